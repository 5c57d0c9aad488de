"""The package's own settings: ``[tool.archguard]`` in ``pyproject.toml``, and the
``ARCHGUARD_*`` environment variables.

Strict: an unknown key is an error with a "did you mean" hint, because a typo must never
silently build the wrong wheel. ``parse_config`` works on parsed data; ``load_project``
does the I/O.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from archguard.arch import ArchEntry, parse_arch_list
from archguard.errors import ConfigError, InvalidArch

DISTRIBUTION = "torch-archguard"
UNRELATED_NAME = "archguard"  # an unrelated project on the public index (SPEC §1)

CONFIG_KEYS: dict[str, str] = {
    "arch_list": "arch list for every CUDA version (overrides the policy row)",
    "arch_list_by_cuda": "arch list per cuXYZ (wins over arch_list)",
    "policy": "path of a policy file, relative to the project (ARCHGUARD_POLICY wins)",
}

ENV_ARCH_LIST = "ARCHGUARD_ARCH_LIST"
ENV_POLICY = "ARCHGUARD_POLICY"
ENV_DISABLE = "ARCHGUARD_DISABLE"
ENV_KNOWN = (ENV_ARCH_LIST, ENV_POLICY, ENV_DISABLE)
_TAG = re.compile(r"cu[0-9]{3}", re.ASCII)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def _did_you_mean(key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


@dataclass(frozen=True)
class PackageConfig:
    """A validated ``[tool.archguard]`` table."""

    source: str  # "/path/pyproject.toml [tool.archguard]"
    arch_list: tuple[ArchEntry, ...] | None = None
    arch_list_by_cuda: Mapping[str, tuple[ArchEntry, ...]] = field(default_factory=dict)
    policy: Path | None = None

    def requested_for(self, tag: str) -> tuple[tuple[ArchEntry, ...], str] | None:
        if tag in self.arch_list_by_cuda:
            return self.arch_list_by_cuda[tag], f"{self.source} arch_list_by_cuda.{tag}"
        if self.arch_list is not None:
            return self.arch_list, f"{self.source} arch_list"
        return None


def parse_config(table: object, source: str, root: Path) -> PackageConfig:
    """Validate a ``[tool.archguard]`` table (already parsed from TOML)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source} must be a table, not {type(table).__name__}.")
    problems: list[str] = []
    allowed = list(CONFIG_KEYS)
    for key in table:
        if key not in CONFIG_KEYS:
            problems.append(
                f"unknown key {key!r}.{_did_you_mean(key, allowed)} Allowed keys: "
                + ", ".join(f"{k} ({v})" for k, v in CONFIG_KEYS.items())
            )
    arch_list = None
    by_cuda: dict[str, tuple[ArchEntry, ...]] = {}
    policy = None
    try:
        if "arch_list" in table:
            arch_list = parse_arch_list(table["arch_list"], f"{source} arch_list")
    except InvalidArch as exc:
        problems.append(str(exc))
    raw = table.get("arch_list_by_cuda", {})
    if not isinstance(raw, dict):
        problems.append(f'arch_list_by_cuda must be a table of cuXYZ = "list", not {raw!r}')
        raw = {}
    for tag, value in raw.items():
        if not _TAG.fullmatch(tag):
            hint = ""
            m = re.fullmatch(r"([0-9]{2})\.([0-9])", tag)
            if m:
                hint = f" Did you mean 'cu{m[1]}{m[2]}'?"
            problems.append(
                f"arch_list_by_cuda key {tag!r} is not a CUDA row name; write cuXYZ "
                f"(cu128 for CUDA 12.8).{hint}"
            )
            continue
        try:
            by_cuda[tag] = parse_arch_list(value, f"{source} arch_list_by_cuda.{tag}")
        except InvalidArch as exc:
            problems.append(str(exc))
    if "policy" in table:
        value = table["policy"]
        if not isinstance(value, str) or not value.strip() or "\x00" in value:
            problems.append(f"policy must be a path string, not {value!r}")
        else:
            policy = (root / value).resolve()
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(f"{source} is invalid; fix each of these:\n{lines}")
    return PackageConfig(source, arch_list, by_cuda, policy)


@dataclass(frozen=True)
class Project:
    """What archguard knows about the package being built (or explained)."""

    root: Path
    pyproject: Path | None
    has_table: bool
    config: PackageConfig | None
    lists_archguard: bool  # torch-archguard in build-system.requires
    lists_unrelated: bool  # bare 'archguard' (the unrelated project) in build-system.requires

    @classmethod
    def none(cls, root: Path) -> Project:
        """A directory with no pyproject.toml: no package overrides, not opted in."""
        return cls(root, None, False, None, False, False)

    @property
    def active(self) -> bool:
        return self.has_table or self.lists_archguard

    def warnings(self) -> list[str]:
        out = []
        if self.lists_unrelated:
            out.append(
                f"{self.pyproject}: build-system.requires names 'archguard', an unrelated "
                f"project on the public index; archguard is distributed as '{DISTRIBUTION}'."
            )
        if self.has_table and not self.lists_archguard and self.pyproject is not None:
            out.append(
                f"{self.pyproject} has [tool.archguard] but build-system.requires does not "
                f"list '{DISTRIBUTION}': an isolated `pip wheel` would build without archguard."
            )
        return out


def read_toml(path: Path) -> dict[str, object]:
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415
    else:  # pragma: no cover
        import tomli as tomllib  # noqa: PLC0415
    try:
        with path.open("rb") as f:
            data: dict[str, object] = tomllib.load(f)
            return data
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read: {exc.strerror}") from None


def _requirement_names(requires: object) -> set[str]:
    names: set[str] = set()
    if isinstance(requires, list):
        for item in requires:
            if isinstance(item, str):
                try:
                    names.add(canonicalize_name(Requirement(item).name))
                except InvalidRequirement:
                    continue  # setuptools/pip report malformed requirements themselves
    return names


def project_from_data(root: Path, pyproject: Path | None, data: Mapping[str, object]) -> Project:
    tool = data.get("tool", {})
    table = tool.get("archguard") if isinstance(tool, dict) else None
    build = data.get("build-system", {})
    names = _requirement_names(build.get("requires") if isinstance(build, dict) else None)
    config = None
    if table is not None:
        config = parse_config(table, f"{pyproject} [tool.archguard]", root)
    return Project(
        root=root,
        pyproject=pyproject,
        has_table=table is not None,
        config=config,
        lists_archguard=DISTRIBUTION in names,
        lists_unrelated=UNRELATED_NAME in names,
    )


def load_project(root: str | Path) -> Project:
    """Read ``root/pyproject.toml``. No file, or no table, means no package overrides."""
    root = Path(root).resolve()
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return Project.none(root)
    return project_from_data(root, pyproject, read_toml(pyproject))


def env_disabled(environ: Mapping[str, str]) -> bool:
    value = environ.get(ENV_DISABLE, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(
        f"{ENV_DISABLE}={environ[ENV_DISABLE]!r} is neither on (1, true, yes, on) nor off "
        "(0, false, no, off, empty); set it to 1 to turn archguard off."
    )


def env_arch_list(environ: Mapping[str, str]) -> tuple[tuple[ArchEntry, ...], str] | None:
    value = environ.get(ENV_ARCH_LIST)
    if value is None:
        return None
    return parse_arch_list(value, f"environment variable {ENV_ARCH_LIST}"), ENV_ARCH_LIST


def unknown_env_warnings(environ: Mapping[str, str]) -> list[str]:
    """``ARCHGUARD_*`` variables that archguard does not read (a typo, probably).

    A warning, not an error: the name is also used by an unrelated project.
    """
    out = []
    for name in sorted(environ):
        if name.startswith("ARCHGUARD_") and name not in ENV_KNOWN:
            out.append(
                f"environment variable {name} is not one archguard reads (it reads "
                f"{', '.join(ENV_KNOWN)}).{_did_you_mean(name, list(ENV_KNOWN))}"
            )
    return out
