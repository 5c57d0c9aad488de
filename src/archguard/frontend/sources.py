"""What ``archguard wheel`` builds from: a source tree, an sdist file, an sdist URL pinned
by its sha256 (``URL#sha256=HEX`` as pip writes it, or ``--sha256``), or ``name==version``
(the release's sdist, fetched by pip from its configured index), as a farm's sources are.

An sdist is unpacked afresh for each build, always at the same path for the same archive
(``<cache>/src/<sha256 prefix>/<its top directory>``): pip would unpack it into a new
``/tmp/pip-...`` directory every time, and the absolute paths in every compile command and
in the preprocessed sources would differ, so a compile cache could never hit. A download is
checked against its sha256 before anything is unpacked or built; a mismatch is refused."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Mapping
from pathlib import Path

from archguard.detect.sources import file_sha256
from archguard.detect.tools import run
from archguard.errors import ConfigError

_ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip")
DOWNLOAD_TIMEOUT = 300  # seconds for one sdist
_RELEASE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base, "archguard")


def split_pin(spec: str) -> tuple[str, str | None]:
    """``URL#sha256=HEX`` -> (URL, HEX); a spec without a fragment -> (spec, None)."""
    where, _, fragment = spec.partition("#")
    if fragment.startswith("sha256="):
        return where, fragment[len("sha256=") :].lower()
    return spec, None


def is_remote(spec: str) -> bool:
    return urllib.parse.urlparse(spec).scheme in ("http", "https", "file")


def is_release(spec: str) -> bool:
    """``name==version``: a released sdist, fetched from the index (a directory of that
    name, where there is one, is the directory)."""
    return _RELEASE.fullmatch(spec) is not None and not Path(spec).exists()


def source_tree(
    spec: str,
    sha256: str | None = None,
    cache: Path | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The directory to build for ``spec`` (a tree, an sdist file, a pinned URL, or
    ``name==version``, which ``python``'s pip fetches: the build's own Python, with the
    package's own switches in ``env``, since pip runs the sdist's ``setup.py`` to read its
    metadata)."""
    spec, pinned = split_pin(spec)
    sha256 = (sha256 or pinned or "").lower() or None
    if sha256 is not None and (
        len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256)
    ):
        raise ConfigError(f"archguard wheel: sha256 {sha256!r} for {spec} is not 64 hex digits.")
    root = cache or cache_root()
    if is_release(spec):
        archive = _fetch_release(spec, root, python or sys.executable, env or {})
        found = file_sha256(archive)
        if sha256 is not None and found != sha256:
            raise ConfigError(
                f"archguard wheel: {spec} is {archive.name} with sha256 {found}, not the pinned "
                f"{sha256}: refused before anything is built."
            )
        return _unpack(archive, found, root)
    if is_remote(spec):
        if sha256 is None:
            raise ConfigError(
                f"archguard wheel: {spec} is a URL without a pinned sha256; give it as "
                f"{spec}#sha256=HEX (or --sha256 HEX), so that a farm builds exactly the "
                "sources it reviewed."
            )
        return _unpack(_download(spec, sha256, root), sha256, root)
    path = Path(spec)
    if path.is_dir():
        if sha256 is not None:
            raise ConfigError(
                f"archguard wheel: {spec} is a directory; a sha256 pins an sdist file or URL."
            )
        return path.resolve()
    if not path.is_file():
        raise ConfigError(
            f"archguard wheel: {spec} is neither a source tree, an sdist file nor a URL."
        )
    if not path.name.endswith(_ARCHIVES):
        raise ConfigError(
            f"archguard wheel: {spec} is not an sdist ({', '.join(_ARCHIVES)}); give a source "
            "tree, an sdist, or its URL."
        )
    found = file_sha256(path)
    if sha256 is not None and found != sha256:
        raise ConfigError(
            f"archguard wheel: {spec} has sha256 {found}, not the pinned {sha256}: refused "
            "before anything is built."
        )
    return _unpack(path, found, root)


def _fetch_release(spec: str, root: Path, python: str, env: Mapping[str, str]) -> Path:
    """``name==version``'s sdist, by ``pip download`` (the index pip is configured for),
    kept under ``<cache>/downloads/release/<name>-<version>/`` and fetched once."""
    match = _RELEASE.fullmatch(spec)
    assert match is not None
    where = root / "downloads" / "release" / f"{match[1].lower()}-{match[2]}"
    found = [p for p in where.glob("*") if p.name.endswith(_ARCHIVES)] if where.is_dir() else []
    if len(found) == 1:
        return found[0]
    where.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{where.name}.", dir=where.parent))
    argv = [python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    argv += ["--no-build-isolation", "--disable-pip-version-check", "-d", str(partial), spec]
    try:
        proc = run(argv, ConfigError, DOWNLOAD_TIMEOUT, {**os.environ, **env})
    except ConfigError:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    archives = [p for p in partial.glob("*") if p.name.endswith(_ARCHIVES)]
    if proc.returncode != 0 or len(archives) != 1:
        shutil.rmtree(partial, ignore_errors=True)
        tail = "\n".join(proc.stderr.strip().splitlines()[-4:])
        raise ConfigError(
            f"archguard wheel: {spec}: pip download found no sdist of that release (exit "
            f"{proc.returncode}):\n{tail}\nGive the sdist's URL with its sha256, or a file."
        )
    try:
        partial.rename(where)
    except OSError:  # another fetch of the same release put it in place first
        shutil.rmtree(partial, ignore_errors=True)
    found = [p for p in where.glob("*") if p.name.endswith(_ARCHIVES)]
    if len(found) != 1:
        raise ConfigError(f"archguard wheel: {where} holds {len(found)} sdists; remove it.")
    return found[0]


def _download(url: str, sha256: str, root: Path) -> Path:
    name = Path(urllib.parse.urlparse(url).path).name or "sdist.tar.gz"
    target = root / "downloads" / sha256 / name
    if target.is_file() and file_sha256(target) == sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(handle)
    partial = Path(name)
    try:
        with (
            urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response,
            partial.open("wb") as out,
        ):
            shutil.copyfileobj(response, out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ConfigError(f"archguard wheel: {url} could not be downloaded ({exc}).") from None
    found = file_sha256(partial)
    if found != sha256:
        partial.unlink()
        raise ConfigError(
            f"archguard wheel: {url} has sha256 {found}, not the pinned {sha256}: refused "
            "before anything is built."
        )
    partial.replace(target)
    return target


def _unpack(archive: Path, sha256: str, root: Path) -> Path:
    """Unpack afresh at the archive's stable path; the source tree inside."""
    where = root / "src" / sha256[:16]
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(where)
        else:
            if not hasattr(tarfile, "data_filter"):  # Python 3.10.0-3.10.11 and 3.11.0-3.11.3
                raise ConfigError(
                    f"archguard wheel: this Python has no safe tar extraction (tarfile's data "
                    f"filter); unpack {archive.name} yourself and give the tree, or use a "
                    "newer Python."
                )
            with tarfile.open(archive) as tf:
                tf.extractall(where, filter="data")
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"archguard wheel: {archive} could not be unpacked ({exc}).") from None
    entries = [p for p in where.iterdir() if not p.name.startswith(".")]
    tree = entries[0] if len(entries) == 1 and entries[0].is_dir() else where
    if not (tree / "setup.py").is_file() and not (tree / "pyproject.toml").is_file():
        raise ConfigError(
            f"archguard wheel: {archive.name} holds no setup.py or pyproject.toml at its top "
            "level; it is not an sdist pip can build."
        )
    return tree
