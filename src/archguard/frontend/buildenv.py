"""The build environment a package declares, beside the cell's torch.

``archguard wheel`` builds with ``pip wheel --no-build-isolation`` (the cell's torch is the
one to build against), and pip then installs nothing the package declares: a
scikit-build-core package stops at "No module named 'scikit_build_core'", a setuptools_scm
version comes out ``0.0.0``. So before the build, the package's PEP 517 requirements are
read (``[build-system].requires``, and the backend's ``get_requires_for_build_wheel``, which
for setuptools includes ``setup_requires``); those the cell's environment does not satisfy
are resolved by pip against that environment, with the cell's torch, numpy, triton and
NVIDIA wheels held at their installed versions, and installed (exactly the resolved set, no
more) into an overlay directory put on the build's ``PYTHONPATH``. Never into the cell, never
over it: a requirement on a distribution the cell has at another version (a package's build
pinning torch<2.8) keeps the cell's, said in the log; a resolution that would change the
cell's torch, numpy, triton or NVIDIA wheels is refused with their names. The overlay is
kept per resolved set under ``<cache>/build-env/`` (a farm installs each set once). What a
package imports in its build and does not declare (a farm manifest's ``build-requires``) is
added by the caller and installed the same way."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from archguard._fs import atomic_directory
from archguard.detect.cachestore import mark_used
from archguard.detect.fetch import cache_root
from archguard.detect.tools import BUILD_TIMEOUT_S, ToolFailed, run
from archguard.errors import ConfigError, ToolError
from archguard.settings.config import read_toml

# What the cell holds for the build and the user's install: never changed for one package
HELD = ("torch", "numpy", "triton")
HELD_PREFIXES = ("nvidia-",)
DEFAULT_REQUIRES = ["setuptools>=40.8.0"]  # PEP 517: a project with no [build-system]
LEGACY_BACKEND = "setuptools.build_meta:__legacy__"

_ASK = r"""
import json, sys
from pyproject_hooks import BuildBackendHookCaller
backend = sys.argv[2] or None
path = json.loads(sys.argv[3]) or None
caller = BuildBackendHookCaller(sys.argv[1], sys.argv[2], backend_path=path)
print("ARCHGUARD-REQUIRES " + json.dumps(caller.get_requires_for_build_wheel({})))
"""


@dataclass
class BuildEnv:
    """What a build gets beyond the cell: the requirements it declared, the dists installed
    for it (``name==version``), the overlay they are in, and what was said."""

    declared: list[str] = field(default_factory=list)
    backend: str = LEGACY_BACKEND  # [build-system] build-backend
    installed: list[str] = field(default_factory=list)
    overlay: Path | None = None
    notes: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # what the caller added (build-requires)

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The variables that put the overlay before the cell's site-packages."""
        if self.overlay is None:
            return {}
        old = environ.get("PYTHONPATH")
        return {"PYTHONPATH": f"{self.overlay}{os.pathsep}{old}" if old else str(self.overlay)}

    def as_json(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "declared": self.declared,
            "installed": self.installed,
            "overlay": str(self.overlay) if self.overlay else None,
            "notes": self.notes,
            "extra": self.extra,
        }


def _installed(name: str) -> str | None:
    """The version of ``name`` this environment holds, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _held(name: str) -> bool:
    name = canonicalize_name(name)
    return name in HELD or name.startswith(HELD_PREFIXES)


def static_requires(source: Path) -> tuple[list[str], str, list[str]]:
    """``[build-system]``'s requires, backend and backend-path (PEP 517's defaults where the
    project has no pyproject.toml or no table)."""
    pyproject = source / "pyproject.toml"
    if not pyproject.is_file():
        return list(DEFAULT_REQUIRES), LEGACY_BACKEND, []
    table = read_toml(pyproject).get("build-system")
    if not isinstance(table, dict):
        return list(DEFAULT_REQUIRES), LEGACY_BACKEND, []
    requires = table.get("requires", DEFAULT_REQUIRES)
    backend = table.get("build-backend") or LEGACY_BACKEND
    path = table.get("backend-path") or []
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise ConfigError(
            f"{pyproject} [build-system] requires = {requires!r} is not a list of strings; "
            "it is the package's to fix (PEP 518)."
        )
    return list(requires), str(backend), [str(p) for p in path]


def unmet(requirements: list[str], where: str, notes: list[str] | None = None) -> list[Requirement]:
    """The requirements of distributions this environment lacks. One it has at another
    version is kept as the cell has it (never replaced, never shadowed: a package that
    builds without archguard builds with it), and said in ``notes``: a farm builds against
    its cell's torch whatever torch a package's own build pins."""
    out = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise ConfigError(f"{where}: the requirement {text!r} is not valid ({exc}).") from None
        if req.marker is not None and not req.marker.evaluate():
            continue
        version = _installed(req.name)
        if version is not None and req.specifier.contains(version, prereleases=True):
            continue
        if version is not None or _held(req.name):
            have = f"{req.name} {version}" if version else f"no {req.name}"
            if notes is not None:
                notes.append(
                    f"the package's build asks for {text!r}; the cell's {have} is kept "
                    "(archguard never changes or shadows what a cell holds for one package"
                    + ("; a farm builds against its cell's torch" if _held(req.name) else "")
                    + ")"
                )
            continue
        out.append(req)
    return out


def _constraints(folder: Path) -> Path:
    """A constraints file pinning every held distribution installed here."""
    lines = sorted(
        f"{dist.metadata['Name']}=={dist.version}"
        for dist in metadata.distributions()
        if dist.metadata["Name"] and _held(dist.metadata["Name"])
    )
    path = folder / "held.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _resolve(requirements: list[Requirement], where: str, tmp: Path) -> list[str]:
    """``name==version`` of every distribution pip would install into this environment for
    ``requirements`` (what is already installed and fits is not among them), with the held
    distributions pinned; one that would change a held distribution is refused."""
    report = tmp / "report.json"
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report"]
    argv += [str(report), "--disable-pip-version-check", "-c", str(_constraints(tmp))]
    argv += [str(r) for r in requirements]
    proc = _run(argv)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise ToolError(
            f"{where}: the build requirements {', '.join(map(str, requirements))} could not "
            f"be resolved beside the cell's environment (pip exit {proc.returncode}):\n{tail}",
            tool="pip",
        )
    items = json.loads(report.read_text()).get("install", [])
    pins = sorted(
        f"{i['metadata']['name']}=={i['metadata']['version']}"
        for i in items
        if _installed(i["metadata"]["name"]) is None or _held(i["metadata"]["name"])
    )  # what the cell has stays as it has it: only what it lacks goes in the overlay
    changed = [p for p in pins if _held(p.split("==")[0])]
    if changed:
        raise ConfigError(
            f"{where}: installing {', '.join(map(str, requirements))} for the build would "
            f"change the cell's {', '.join(changed)}, which archguard never does for one "
            "package: skip this cell for the package in the farm manifest."
        )
    return pins


def _install(pins: list[str], where: str) -> Path:
    """The overlay holding exactly ``pins`` for this Python, made once (a directory of its
    own, renamed into place) and reused."""
    key = hashlib.sha256(json.dumps([sys.version, pins]).encode()).hexdigest()[:20]
    overlay = cache_root() / "build-env" / key
    mark_used(overlay)  # held before it is looked at: no prune removes it from here on
    if (overlay / ".archguard-complete").is_file():
        return overlay
    with atomic_directory(overlay) as partial:  # one build installs it; the next finds it
        if partial is not None:
            argv = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target"]
            argv += [str(partial), "--disable-pip-version-check", *pins]
            proc = _run(argv)
            if proc.returncode != 0:
                tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
                raise ToolError(
                    f"{where}: pip installing {', '.join(pins)} failed:\n{tail}", tool="pip"
                )
            (partial / ".archguard-complete").write_text("\n".join(pins) + "\n")
    return overlay


def _run(
    argv: list[str], env: Mapping[str, str] | None = None, tool: str = "pip"
) -> subprocess.CompletedProcess[str]:
    """``argv`` run for the build environment; one that cannot start or runs past the
    timeout is a :class:`ToolError` naming ``tool`` (its exit status is the caller's)."""
    try:
        return run(argv, None, BUILD_TIMEOUT_S, env)
    except ToolFailed as exc:
        raise ToolError(str(exc), tool=tool) from None


def _ask_backend(
    source: Path, backend: str, path: list[str], environ: Mapping[str, str]
) -> tuple[list[str], str | None]:
    """The backend's ``get_requires_for_build_wheel`` (setuptools': its ``setup_requires``),
    run as pip would run it, with the build's environment; (requirements, why not asked)."""
    argv = [sys.executable, "-c", _ASK, str(source), backend, json.dumps(path)]
    proc = _run(argv, dict(environ), tool="python")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("ARCHGUARD-REQUIRES "):
            return list(json.loads(line.split(" ", 1)[1])), None
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return [], f"its backend {backend} could not say its requirements ({last})"


def prepare(source: Path, environ: Mapping[str, str], extra: Sequence[str] = ()) -> BuildEnv:
    """The build environment ``source`` declares, beside this (the cell's) environment:
    static requirements first (the backend may be among them), with ``extra`` (what the
    caller adds: a farm manifest's ``build-requires`` for a package that does not declare
    them), then the backend's own. ``extra`` is installed and recorded as the declared ones
    are (in ``declared``, and named in ``extra``)."""
    where = f"{source.name}'s build requirements"
    env = BuildEnv(extra=list(extra))
    requires, backend, path = static_requires(source)
    added = [r for r in dict.fromkeys(extra) if r not in requires]
    env.declared, env.backend = [*requires, *added], backend
    with tempfile.TemporaryDirectory(prefix="archguard-buildenv-") as tmp:
        missing = unmet(requires, where, env.notes)
        missing += unmet(added, f"{where} added for it (build-requires)", env.notes)
        if missing:
            env.installed = _resolve(missing, where, Path(tmp))
            env.overlay = _install(env.installed, where) if env.installed else None
        asked, why = (
            _ask_backend(source, backend, path, {**environ, **env.environment(environ)})
            if _may_add(source, backend)
            else ([], None)
        )
        if why is not None:
            env.notes.append(why)
        more = [r for r in asked if r not in env.declared]
        env.declared += more
        still = [r for r in unmet(more, where, env.notes) if not _in(r, env.installed)]
        if still:  # one resolution of everything unmet: one consistent set
            env.installed = _resolve([*missing, *still], where, Path(tmp))
            env.overlay = _install(env.installed, where)
    return env


def _may_add(source: Path, backend: str) -> bool:
    """Whether the backend can add to its static requirements: setuptools only through
    ``setup_requires`` (asking it runs the setup.py, which imports torch: 3 s a job), any
    other backend by its own rules."""
    if not backend.startswith("setuptools.build_meta"):
        return True
    for name in ("setup.py", "setup.cfg"):
        try:
            if "setup_requires" in (source / name).read_text(encoding="utf-8", errors="replace"):
                return True
        except OSError:
            continue
    return False


def _in(req: Requirement, pins: list[str]) -> bool:
    """Whether ``pins`` (``name==version``) already satisfy ``req``."""
    for pin in pins:
        name, _, version = pin.partition("==")
        if canonicalize_name(name) == canonicalize_name(req.name):
            return req.specifier.contains(version, prereleases=True)
    return False
