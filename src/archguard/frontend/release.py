"""The release a source declares, and whether a built wheel is it: an sdist's ``PKG-INFO``
(what its author's build wrote, version plugins already run), else a ``pyproject.toml``'s
static ``[project]`` name and version. A wheel whose name or public version differs is not
the source's release (a version plugin such as setuptools_scm missing from the build
environment gives ``0.0.0``), and is never published."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from archguard.core.wheelfile import parse_metadata, parse_wheel_name
from archguard.settings.config import read_toml

# version plugins a setup.py or pyproject.toml may name: the likely cause of a wrong version
_PLUGINS = re.compile(
    r"setuptools[_-]scm|use_scm_version|versioneer|setuptools[_-]git[_-]versioning|"
    r"hatch[_-]vcs|dunamai|pbr\b|miniver|setuptools[_-]dso"
)


@dataclass(frozen=True)
class Release:
    name: str
    version: str
    where: str  # "PKG-INFO", "pyproject.toml [project]"


def declared_release(tree: Path) -> Release | None:
    """What the source says it is, or None where it does not say without a build (a tree
    whose version is dynamic: only its build knows)."""
    info = tree / "PKG-INFO"
    if info.is_file():
        read = parse_metadata(info.read_text(encoding="utf-8", errors="replace"))
        if read.name and read.version:
            return Release(read.name, read.version, "PKG-INFO")
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = read_toml(pyproject).get("project")
        except Exception:  # a broken pyproject.toml is the build's to report
            return None
        if isinstance(project, dict):
            name, version = project.get("name"), project.get("version")
            dynamic = project.get("dynamic") or []
            if isinstance(name, str) and isinstance(version, str) and "version" not in dynamic:
                return Release(name, version, "pyproject.toml [project]")
    return None


def plugins_named(tree: Path) -> list[str]:
    """The version plugins the source's ``setup.py``, ``setup.cfg`` or ``pyproject.toml``
    names (the likely cause when its version comes out wrong)."""
    found: list[str] = []
    for name in ("setup.py", "setup.cfg", "pyproject.toml"):
        try:
            text = (tree / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for match in _PLUGINS.finditer(text):
            plugin = match[0].replace("-", "_")
            plugin = "setuptools_scm" if plugin == "use_scm_version" else plugin
            if plugin not in found:
                found.append(plugin)
    return found


def not_the_release(wheel: Path, release: Release, tree: Path) -> str | None:
    """Why ``wheel`` is not ``release`` (None: it is): the names and versions, without the
    cell's local label, compared as PEP 503 and PEP 440 read them."""
    built = parse_wheel_name(wheel.name)
    name, version = built.project, built.version
    try:
        declared = Version(release.version)
    except InvalidVersion:
        return None  # not a version packaging reads: nothing to compare it with
    if canonicalize_name(name) == canonicalize_name(release.name) and Version(
        version.public
    ) == Version(declared.public):
        return None
    plugins = plugins_named(tree)
    cause = (
        f"its build names {', '.join(plugins)}: install it in the build environment (the "
        "cell), or the version falls back to a default"
        if plugins
        else "a version plugin or a build step that sets the version missing from the build "
        "environment"
    )
    return (
        f"{wheel.name} is not the source's release: it is {name} {version.public}, the "
        f"source's {release.where} says {release.name} {release.version}. Likely cause: "
        f"{cause}. Refused: it would be published as a release it is not"
    )
