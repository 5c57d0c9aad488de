"""A farm's manifest (SPEC section 8): the cells (``[[cell]]``: a name, a Python, the torch
requirement and where it comes from, optionally the CUDA) and the packages (``[[package]]``: a
name, a source pinned by sha256, the package's ``[tool.archguard]`` table, its own switches,
and cells to skip with a reason). Strict as ``[tool.archguard]`` is: an unknown key is an
error naming the file, the table and a "did you mean"; every problem is listed at once."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from archguard.core.cuda import CudaVersion
from archguard.core.platform import DEFAULT_PLATFORM, Platform, parse_platform
from archguard.core.problems import Problems, closest
from archguard.detect.fetch import is_release
from archguard.errors import ArchguardError, ConfigError
from archguard.settings.config import parse_config, read_toml
from archguard.settings.model import PackageConfig

CELL_KEYS = {
    "name": "the cell's name (letters, digits, . _ -): its index is SITE/<name>/simple/",
    "python": "the cell's Python, X.Y (X.Yt: its free-threaded build, e.g. 3.14t)",
    "platform": 'the machine its torch and wheels are for: "x86_64" (default) or "aarch64"',
    "interpreter": "the Python X.Y to make the cell's environment from (default: uv finds one)",
    "torch": "the torch requirement, e.g. torch==2.13.0",
    "cuda": "the CUDA of the cell's torch, X.Y (default: from index-url's /cuXYZ)",
    "index-url": "where the cell's torch comes from (a PEP 503 index)",
    "extra-index-url": "more indexes",
    "find-links": "directories or pages of wheels",
    "installer-options": "more options for the installer (uv pip install ...)",
    "container": "an image to build the cell's jobs in with docker or podman, e.g. "
    '"pytorch/manylinux2_28-builder:cuda13.0" (its glibc is the wheels\' platform floor)',
}
FAMILY_KEYS = {
    "name": "a prefix for its cells' names (default: none): <prefix>-cu130-torch2.13-py311",
    "python": 'the Pythons, X.Y or a list: ["3.10", "3.11", "3.12", "3.13", "3.14t"]',
    "platforms": 'the machines, a list: ["x86_64", "aarch64"] (default: ["x86_64"])',
    "torch": 'the torch releases, a range: ">=2.13" (each minor\'s latest release on the index)',
    "cuda": 'the CUDA line, a major ("13") or X.Y: the torch builds of it',
    "index-url": "the index the torch releases are listed on and installed from (default: pip's)",
    "extra-index-url": "more indexes, for the cells' installs",
    "find-links": "directories or pages of wheels, for the cells' installs",
    "installer-options": "more options for the installer (uv pip install ...)",
    "interpreters": 'a table X.Y = "/path/to/python" (default: uv finds each)',
}
PACKAGE_KEYS = {
    "name": "the package's name",
    "source": "a source tree, an sdist file or URL (pinned by sha256), or name==version",
    "sha256": "the sdist's sha256 (required for a file or a URL)",
    "config": "the package's [tool.archguard] table, kept by the farm",
    "env": 'the package\'s own switches for its build, e.g. { FORCE_CUDA = "1" }',
    "build-requires": 'what its build imports and does not declare, e.g. ["pybind11"], '
    "installed with its declared build requirements",
    "skip": "cells not to build, each { cell = NAME, reason = WHY }",
}
FARM_KEYS = {
    "variants": "true: publish each verified wheel also as a PEP 825 wheel variant (uv "
    "--preview-features wheel-variants), with its NAME-VERSION-variants.json",
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# a CUDA line's index is SITE/cu130/simple: no cell may take that name
LINE = re.compile(r"^cu\d{2,3}$")
_CUDA_IN_URL = re.compile(r"/cu(\d\d)(\d)\b")
PYTHON = re.compile(r"3\.\d{1,3}t?")  # X.Y, or X.Yt: CPython's free-threaded build


def free_threaded(python: str) -> bool:
    """A cell's Python ``3.14t``: CPython's free-threaded build (ABI ``cp314t``)."""
    return python.endswith("t")


def python_release(python: str) -> str:
    """The X.Y of a cell's Python (``3.14t`` -> ``3.14``): what a requires-python holds."""
    return python.removesuffix("t")


def platform_suffix(platform: Platform) -> str:
    """What a cell's name ends with for its platform: nothing for x86_64 (the names of
    before), ``-aarch64`` otherwise."""
    return "" if platform == DEFAULT_PLATFORM else f"-{platform}"


@dataclass(frozen=True)
class Cell:
    name: str
    python: str
    torch: Requirement
    cuda: CudaVersion
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    installer_options: tuple[str, ...] = ()
    interpreter: str | None = None  # a path; None: uv finds Python X.Y
    rule: str | None = None  # the [[cells]] rule that made it (never an input of a job)
    container: str | None = None  # an image its jobs run in (docker or podman)
    platform: Platform = DEFAULT_PLATFORM  # the machine its torch and wheels are for

    def as_json(self) -> dict[str, object]:
        where = {"interpreter": self.interpreter} if self.interpreter else {}
        if self.container:  # an input of every job of the cell: a new image builds again
            where["container"] = self.container
        if self.platform != DEFAULT_PLATFORM:  # x86_64's cells keep the ids they had
            where["platform"] = self.platform
        return {
            **where,
            "name": self.name,
            "python": self.python,
            "torch": str(self.torch),
            "cuda": self.cuda.text,
            "index_url": self.index_url,
            "extra_index_urls": list(self.extra_index_urls),
            "find_links": list(self.find_links),
            "installer_options": list(self.installer_options),
        }


@dataclass(frozen=True)
class CellFamily:
    """A rule for cells (``[[cells]]``): every torch minor the index has in ``torch``'s
    range, at its latest release, for each Python it has wheels for, on the CUDA line
    ``cuda`` (SPEC section 8, "Current"). ``farm.families`` expands it."""

    prefix: str
    pythons: tuple[str, ...]
    torch: Requirement
    cuda_major: int
    cuda_minor: int | None  # None: any minor of the major
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    installer_options: tuple[str, ...] = ()
    interpreters: tuple[tuple[str, str], ...] = ()  # (X.Y, path)
    where: str = ""
    platforms: tuple[Platform, ...] = (DEFAULT_PLATFORM,)

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.prefix,
            "python": list(self.pythons),
            "platforms": list(self.platforms),
            "torch": str(self.torch),
            "cuda": f"{self.cuda_major}"
            + (f".{self.cuda_minor}" if self.cuda_minor is not None else ""),
            "index_url": self.index_url,
        }


@dataclass(frozen=True)
class Package:
    name: str
    source: str
    sha256: str | None
    config: PackageConfig | None
    raw_config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    skip: dict[str, str] = field(default_factory=dict)  # cell -> reason
    build_requires: tuple[str, ...] = ()  # requirements its build imports, undeclared


@dataclass(frozen=True)
class Manifest:
    path: Path
    cells: tuple[Cell, ...]
    packages: tuple[Package, ...]
    variants: bool = False  # [farm] variants: each wheel also published as a wheel variant
    families: tuple[CellFamily, ...] = ()  # [[cells]]: expanded by farm.families
    notes: tuple[str, ...] = ()  # what an expansion left out, and why


def load_manifest(path: Path) -> Manifest:
    """Read and check a manifest; one :class:`ConfigError` listing every problem."""
    if not path.is_file():
        raise ConfigError(f"farm manifest {path}: no such file.")
    data = read_toml(path)
    problems = Problems()
    _unknown(data, {"cell": "", "cells": "", "package": "", "farm": ""}, str(path), problems)
    variants = _farm_table(data.get("farm", {}), path, problems)
    families = [
        _family(t, i, path, problems)
        for i, t in enumerate(_tables(data, "cells", path, problems, required=False))
    ]
    cells = [
        _cell(t, i, path, problems)
        for i, t in enumerate(_tables(data, "cell", path, problems, required=not families))
    ]
    names = [c.name for c in cells if c is not None]
    for name in {n for n in names if names.count(n) > 1}:
        problems.add(f"[[cell]] name {name!r} is given twice", str(path))
    open_names = bool(families)  # a family's cells are named when it is expanded
    packages = [
        _package(t, i, path, set(names), problems, open_names)
        for i, t in enumerate(_tables(data, "package", path, problems))
    ]
    given = [p.name for p in packages if p is not None]
    for name in sorted({n for n in given if given.count(n) > 1}):
        problems.add(f"[[package]] name {name!r} is given twice", str(path))
    problems.raise_if_any(
        lambda _, lines: ConfigError(
            f"farm manifest {path} is invalid; fix each of these:\n{lines}"
        )
    )
    return Manifest(
        path,
        tuple(c for c in cells if c is not None),
        tuple(p for p in packages if p is not None),
        variants,
        tuple(f for f in families if f is not None),
    )


def _farm_table(table: object, path: Path, problems: Problems) -> bool:
    """The manifest's ``[farm]`` table: whether wheels are also published as variants."""
    where = f"{path} [farm]"
    if not isinstance(table, dict):
        problems.add(f"[farm] = {table!r} must be a table", str(path))
        return False
    _unknown(table, FARM_KEYS, where, problems)
    value = table.get("variants", False)
    if not isinstance(value, bool):
        problems.add(f"variants = {value!r} must be true or false", where)
        return False
    return value


def _tables(
    data: dict[str, Any], key: str, path: Path, problems: Problems, required: bool = True
) -> list[dict[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        problems.add(f"{key} must be [[{key}]] tables", str(path))
        return []
    if not value and required:
        more = " (or a [[cells]] rule)" if key == "cell" else ""
        problems.add(f"no [[{key}]]{more}: a farm needs at least one", str(path))
    return value


def _unknown(
    table: dict[str, Any], allowed: dict[str, str], where: str, problems: Problems
) -> None:
    for key in table:
        if key not in allowed:
            close = closest(key, allowed)
            hint = f" Did you mean {close!r}?" if close else ""
            problems.add(f"unknown key {key!r}.{hint} The keys: {', '.join(allowed)}", where)


def _text(table: dict[str, Any], key: str, where: str, problems: Problems) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.add(f"{key} = {value!r} must be a non-empty string", where)
        return None
    return value.strip()


def _texts(table: dict[str, Any], key: str, where: str, problems: Problems) -> tuple[str, ...]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.add(f"{key} = {value!r} must be a string or a list of strings", where)
        return ()
    return tuple(value)


def _cell(table: dict[str, Any], index: int, path: Path, problems: Problems) -> Cell | None:
    where = f"{path} [[cell]] #{index + 1}"
    _unknown(table, CELL_KEYS, where, problems)
    name = _text(table, "name", where, problems)
    if name is None or not _NAME.match(name):
        problems.add(f"name = {table.get('name')!r}: letters, digits, '.', '_' and '-'", where)
        return None
    where = f"{path} [[cell]] {name!r}"
    if LINE.match(name):
        problems.add(
            f"name = {name!r} is the name of a CUDA line's index (SITE/{name}/simple/ lists "
            f"every cell of that CUDA): name the cell for its torch too, e.g. "
            f"'{name}-torch2.13'",
            where,
        )
        return None
    python = _text(table, "python", where, problems)
    if python is None or not PYTHON.fullmatch(python):
        problems.add(
            f"python = {table.get('python')!r} must be 3.X (3.Xt: the free-threaded build)", where
        )
        python = None
    platform = _platforms(table, "platform", where, problems)[:1]
    torch = _requirement(table.get("torch"), where, problems)
    index_url = _text(table, "index-url", where, problems)
    cuda = _cuda(table, index_url, where, problems)
    if python is None or torch is None or cuda is None or not platform:
        return None
    return Cell(
        name,
        python,
        torch,
        cuda,
        index_url,
        _texts(table, "extra-index-url", where, problems),
        _texts(table, "find-links", where, problems),
        _texts(table, "installer-options", where, problems),
        _interpreter(table, path, where, problems),
        container=_container(table, where, problems),
        platform=platform[0],
    )


def _platforms(
    table: dict[str, Any], key: str, where: str, problems: Problems
) -> tuple[Platform, ...]:
    """A cell's ``platform`` or a rule's ``platforms`` (default x86_64), each parsed as
    everywhere in archguard (an alias named, never taken); none twice; () if one is wrong."""
    if key == "platform" and not isinstance(table.get(key, ""), str):
        problems.add(f'platform = {table[key]!r} must be one string: "x86_64" or "aarch64"', where)
        return ()
    given = _texts(table, key, where, problems) or (DEFAULT_PLATFORM,)
    out: list[Platform] = []
    for text in given:
        try:
            found = parse_platform(text, key)
        except ConfigError as exc:
            problems.add(exc.message, where)
            return ()
        out += [] if found in out else [found]
    return tuple(out)


def _container(table: dict[str, Any], where: str, problems: Problems) -> str | None:
    """The cell's image (``container = "IMAGE"``): a non-empty string without spaces; whether
    docker or podman can run it is checked where the plan is made (``farm.container``)."""
    text = _text(table, "container", where, problems)
    if text is not None and (any(c.isspace() for c in text) or text.startswith("-")):
        problems.add(
            f"container = {text!r} is not an image name: write one image reference, e.g. "
            '"pytorch/manylinux2_28-builder:cuda13.0"',
            where,
        )
        return None
    return text


def _family(table: dict[str, Any], index: int, path: Path, problems: Problems) -> CellFamily | None:
    where = f"{path} [[cells]] #{index + 1}"
    _unknown(table, FAMILY_KEYS, where, problems)
    prefix = table.get("name", "")
    if not isinstance(prefix, str) or (prefix and not _NAME.match(prefix)):
        problems.add(f"name = {prefix!r}: letters, digits, '.', '_' and '-'", where)
        return None
    pythons = _texts(table, "python", where, problems)
    bad = [p for p in pythons if not PYTHON.fullmatch(p)]
    if not pythons or bad:
        problems.add(
            f"python = {table.get('python')!r} must be 3.X or a list of them (3.Xt: the "
            "free-threaded build)",
            where,
        )
    platforms = _platforms(table, "platforms", where, problems)
    raw = table.get("torch")
    bare = isinstance(raw, str) and raw.strip()[:1] in ("<", ">", "=", "~", "!")
    torch = _requirement(f"torch{raw.strip()}" if bare else raw, where, problems)  # type: ignore[union-attr]
    cuda_text = _text(table, "cuda", where, problems)
    cuda = re.fullmatch(r"(\d{2})(?:\.(\d))?", cuda_text or "")
    if cuda is None:
        problems.add(f'cuda = {table.get("cuda")!r} must be a CUDA major ("13") or X.Y', where)
    interpreters = table.get("interpreters", {})
    if not isinstance(interpreters, dict) or not all(
        isinstance(v, str) for v in interpreters.values()
    ):
        problems.add(f"interpreters = {interpreters!r} must be a table of X.Y = path", where)
        interpreters = {}
    if not pythons or bad or torch is None or cuda is None or not platforms:
        return None
    return CellFamily(
        prefix,
        pythons,
        torch,
        int(cuda[1]),
        int(cuda[2]) if cuda[2] is not None else None,
        _text(table, "index-url", where, problems),
        _texts(table, "extra-index-url", where, problems),
        _texts(table, "find-links", where, problems),
        _texts(table, "installer-options", where, problems),
        tuple(
            (str(k), str(path.parent.absolute() / Path(v).expanduser()))
            for k, v in sorted(interpreters.items())
        ),
        where,
        platforms,
    )


def _interpreter(table: dict[str, Any], path: Path, where: str, problems: Problems) -> str | None:
    """The path as given, made absolute against the manifest (a venv's link kept as it is).
    Whether it exists is checked where the cell's environment is made: a manifest names
    paths of the machine that runs it, and a plan or a workflow need not be made there."""
    text = _text(table, "interpreter", where, problems)
    if text is None:
        return None
    return str(path.parent.absolute() / Path(text).expanduser())


def _requirement(value: object, where: str, problems: Problems) -> Requirement | None:
    try:
        requirement = Requirement(str(value))
    except InvalidRequirement:
        problems.add(f"torch = {value!r} is not a requirement; write torch==2.13.0", where)
        return None
    if requirement.name.lower() != "torch" or not requirement.specifier:
        problems.add(f"torch = {value!r} must pin torch, e.g. torch==2.13.0", where)
        return None
    return requirement


def _cuda(
    table: dict[str, Any], index_url: str | None, where: str, problems: Problems
) -> CudaVersion | None:
    text = _text(table, "cuda", where, problems)
    if text is not None:
        try:
            return CudaVersion.parse(text, f"{where} cuda")
        except ArchguardError as exc:
            problems.add(str(exc), where)
            return None
    match = _CUDA_IN_URL.search(index_url or "")
    if match:
        return CudaVersion(int(match[1]), int(match[2]))
    problems.add('cuda is not given and index-url names no /cuXYZ: write cuda = "13.0"', where)
    return None


def _package(  # noqa: PLR0913, PLR0917 - the table, where it is, what its skips may name
    table: dict[str, Any],
    index: int,
    path: Path,
    cells: set[str],
    problems: Problems,
    open_names: bool = False,
) -> Package | None:
    where = f"{path} [[package]] #{index + 1}"
    _unknown(table, PACKAGE_KEYS, where, problems)
    name = _text(table, "name", where, problems)
    source = _text(table, "source", where, problems)
    if name is None or source is None:
        problems.add("a package needs a name and a source", where)
        return None
    if not _NAME.match(name):
        problems.add(f"name = {name!r}: letters, digits, '.', '_' and '-'", where)
        return None
    where = f"{path} [[package]] {name!r}"
    release = is_release(source) and not (path.parent / source).exists()
    if not release and "://" not in source and not Path(source).is_absolute():
        source = str((path.parent / source).resolve())  # relative to the manifest
    sha256 = _text(table, "sha256", where, problems)
    remote_or_file = source.startswith(("http://", "https://")) or source.endswith(
        (".tar.gz", ".zip", ".tgz")
    )
    if remote_or_file and sha256 is None:
        problems.add(f'source {source!r} is an sdist: pin it with sha256 = "..."', where)
    if sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        problems.add(f"sha256 = {sha256!r} is not 64 hex digits", where)
    raw = table.get("config", {})
    config = None
    if not isinstance(raw, dict):
        problems.add("config must be a table (the package's [tool.archguard])", where)
        raw = {}
    elif raw:
        try:
            config = parse_config(raw, f"{where} config", path.parent)
        except ConfigError as exc:
            problems.add(str(exc), where)
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        problems.add(f"env = {env!r} must be a table of strings", where)
        env = {}
    skip = _skips(table.get("skip", []), cells, where, problems, open_names)
    build_requires = _texts(table, "build-requires", where, problems)
    for text in build_requires:
        try:
            Requirement(text)
        except InvalidRequirement:
            problems.add(
                f"build-requires entry {text!r} is not a requirement (pybind11>=2.10)", where
            )
    return Package(
        name, source, sha256.lower() if sha256 else None, config, raw, env, skip, build_requires
    )


def _skips(
    value: object, cells: set[str], where: str, problems: Problems, open_names: bool = False
) -> dict[str, str]:
    """``open_names``: the manifest has [[cells]] rules, whose cells' names are known once
    they are expanded (``farm.families.expand_manifest`` checks those)."""
    out: dict[str, str] = {}
    if not isinstance(value, list):
        problems.add("skip must be a list of { cell = NAME, reason = WHY }", where)
        return out
    for item in value:
        if not isinstance(item, dict) or set(item) != {"cell", "reason"}:
            problems.add(f"skip entry {item!r} must be {{ cell = NAME, reason = WHY }}", where)
            continue
        if item["cell"] not in cells and not open_names:
            close = closest(str(item["cell"]), cells)
            hint = f" Did you mean {close!r}?" if close else ""
            problems.add(f"skip names no cell {item['cell']!r}.{hint}", where)
            continue
        out[str(item["cell"])] = str(item["reason"])
    return out
