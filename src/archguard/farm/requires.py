"""The Pythons a package's source admits (``Requires-Python``), read without building it: an
sdist's ``PKG-INFO`` (read out of the archive, one member, bounded), or a tree's
``pyproject.toml`` ``[project] requires-python`` (else its ``PKG-INFO``). ``farm plan``
skips a cell whose Python the package excludes, with that reason, before anything builds."""

from __future__ import annotations

import tarfile
import zipfile
from functools import lru_cache
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from archguard.core.wheelfile import parse_metadata
from archguard.errors import ArchguardError
from archguard.settings.config import read_toml

_LIMIT = 1 << 20  # a PKG-INFO larger than this is not read
_SDIST = (".tar.gz", ".tgz", ".tar", ".zip")


def _pkg_info_text(sdist: Path) -> str | None:
    """``NAME-VERSION/PKG-INFO`` out of an sdist archive (None: it has none, or it is not
    readable), reading only that member."""
    try:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as zf:
                names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith("/PKG-INFO")]
                if not names or zf.getinfo(names[0]).file_size > _LIMIT:
                    return None
                return zf.read(names[0]).decode("utf-8", errors="replace")
        with tarfile.open(sdist) as tf:
            for member in tf:  # streamed: the archive is read once, up to the member
                if member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                    if not member.isfile() or member.size > _LIMIT:
                        return None
                    handle = tf.extractfile(member)
                    return None if handle is None else handle.read().decode("utf-8", "replace")
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError):
        return None
    return None


def _specifier(text: str | None) -> tuple[SpecifierSet, str] | None:
    if not text or not text.strip():
        return None
    try:
        return SpecifierSet(text.strip()), text.strip()
    except InvalidSpecifier:
        return None


@lru_cache(maxsize=256)  # asked once per cell of a plan
def requires_python(source: str) -> tuple[SpecifierSet, str] | None:
    """The source's ``Requires-Python`` and where it was read (None: it says none, or its
    source is not on this machine: a URL or a release)."""
    path = Path(source)
    if path.is_file() and path.name.endswith(_SDIST):
        text = _pkg_info_text(path)
        found = _specifier(parse_metadata(text).requires_python) if text else None
        return (found[0], f"{path.name}'s PKG-INFO") if found else None
    if path.is_dir():
        pyproject = path / "pyproject.toml"
        if pyproject.is_file():
            try:
                project = read_toml(pyproject).get("project")
            except ArchguardError:  # its own build reports a broken file
                project = None
            if isinstance(project, dict):
                value = project.get("requires-python")
                found = _specifier(value if isinstance(value, str) else None)
                if found:
                    return found[0], "its pyproject.toml"
        pkg_info = path / "PKG-INFO"
        if pkg_info.is_file() and pkg_info.stat().st_size <= _LIMIT:
            text = pkg_info.read_text(encoding="utf-8", errors="replace")
            found = _specifier(parse_metadata(text).requires_python)
            return (found[0], "its PKG-INFO") if found else None
    return None


def excludes(source: str, python: str) -> str | None:
    """Why the source cannot build for Python ``python`` (X.Y), or None."""
    found = requires_python(source)
    if found is None:
        return None
    spec, where = found
    if spec.contains(f"{python}.0", prereleases=True) or spec.contains(f"{python}.99"):
        return None
    return f"the package requires Python {spec} ({where}) and the cell is Python {python}"
