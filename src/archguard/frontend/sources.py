"""What ``archguard wheel`` builds from: a source tree, an sdist file, an sdist URL pinned
by its sha256 (``URL#sha256=HEX`` as pip writes it, or ``--sha256``), or ``name==version``
(the release's sdist, fetched by pip from its configured index), as a farm's sources are.

An sdist is unpacked afresh for each build, at a path fixed for the same archive
(``<cache>/src/<sha256 prefix>/<its top directory>``): pip would unpack it into a new
``/tmp/pip-...`` directory every time, and the absolute paths in every compile command and
in the preprocessed sources would differ, so a compile cache could never hit. The build
writes into that tree (pip builds a directory in place: setuptools' ``build/`` and
``.egg-info``), so it is the build's alone while it runs
(:func:`archguard._fs.own_directory`): a second build of the same archive at the same time,
from another farm run or runner, unpacks at ``<sha256 prefix>.2`` instead of removing the
first one's tree under it. The downloads (``<cache>/downloads/``) are shared, content-
addressed and written whole (a rename). A download is checked against its sha256 before
anything is unpacked or built; a mismatch is refused."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from archguard._fs import atomic_directory, atomic_file, own_directory
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


class Checkout(NamedTuple):
    """The directory a build builds, and the sha256 of the sdist unpacked there ("" for a
    source tree, which is built where it is)."""

    tree: Path
    sha256: str


@contextlib.contextmanager
def checked_out(
    spec: str,
    sha256: str | None = None,
    cache: Path | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[Checkout]:
    """The directory to build for ``spec`` (a tree, an sdist file, a pinned URL, or
    ``name==version``, which ``python``'s pip fetches: the build's own Python, with the
    package's own switches in ``env``, since pip runs the sdist's ``setup.py`` to read its
    metadata); an unpacked sdist's directory is this build's alone until the block ends."""
    root = cache or cache_root()
    archive, found = _archive(spec, sha256, root, python or sys.executable, env or {})
    if not found:  # a source tree: built where it is
        yield Checkout(archive, "")
        return
    with own_directory(root / "src" / found[:16]) as where:
        yield Checkout(_unpack(archive, where), found)


_HELD = contextlib.ExitStack()  # never closed: each descriptor goes when the process ends


def source_tree(
    spec: str,
    sha256: str | None = None,
    cache: Path | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """:func:`checked_out`'s directory, held until this process ends (``archguard wheel``
    builds it in this process, then exits); a long-lived caller uses :func:`checked_out`."""
    return _HELD.enter_context(checked_out(spec, sha256, cache, python, env)).tree


def _archive(
    spec: str, sha256: str | None, root: Path, python: str, env: Mapping[str, str]
) -> tuple[Path, str]:
    """The sdist ``spec`` names, checked against its pin, and its sha256; for a source tree,
    the tree and ""."""
    spec, pinned = split_pin(spec)
    sha256 = (sha256 or pinned or "").lower() or None
    if sha256 is not None and (
        len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256)
    ):
        raise ConfigError(f"archguard wheel: sha256 {sha256!r} for {spec} is not 64 hex digits.")
    if is_release(spec):
        archive = _fetch_release(spec, root, python, env)
        found = file_sha256(archive)
        if sha256 is not None and found != sha256:
            raise ConfigError(
                f"archguard wheel: {spec} is {archive.name} with sha256 {found}, not the pinned "
                f"{sha256}: refused before anything is built."
            )
        return archive, found
    if is_remote(spec):
        if sha256 is None:
            raise ConfigError(
                f"archguard wheel: {spec} is a URL without a pinned sha256; give it as "
                f"{spec}#sha256=HEX (or --sha256 HEX), so that a farm builds exactly the "
                "sources it reviewed."
            )
        return _download(spec, sha256, root), sha256
    path = Path(spec)
    if path.is_dir():
        if sha256 is not None:
            raise ConfigError(
                f"archguard wheel: {spec} is a directory; a sha256 pins an sdist file or URL."
            )
        return path.resolve(), ""
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
    return path, found


def _fetch_release(spec: str, root: Path, python: str, env: Mapping[str, str]) -> Path:
    """``name==version``'s sdist, by ``pip download`` (the index pip is configured for),
    kept under ``<cache>/downloads/release/<name>-<version>/`` and fetched once."""
    match = _RELEASE.fullmatch(spec)
    assert match is not None
    where = root / "downloads" / "release" / f"{match[1].lower()}-{match[2]}"
    found = [p for p in where.glob("*") if p.name.endswith(_ARCHIVES)] if where.is_dir() else []
    if len(found) == 1:
        return found[0]
    with atomic_directory(where) as partial:  # fetched once, whole, by one build at a time
        if partial is not None:
            _pip_download(spec, partial, python, env)
    found = [p for p in where.glob("*") if p.name.endswith(_ARCHIVES)]
    if len(found) != 1:
        raise ConfigError(f"archguard wheel: {where} holds {len(found)} sdists; remove it.")
    return found[0]


def _pip_download(spec: str, into: Path, python: str, env: Mapping[str, str]) -> None:
    """``name==version``'s sdist, by pip, into ``into`` (exactly one, or one error)."""
    argv = [python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    argv += ["--no-build-isolation", "--disable-pip-version-check", "-d", str(into), spec]
    proc = run(argv, ConfigError, DOWNLOAD_TIMEOUT, {**os.environ, **env})
    archives = [p for p in into.glob("*") if p.name.endswith(_ARCHIVES)]
    if proc.returncode != 0 or len(archives) != 1:
        tail = "\n".join(proc.stderr.strip().splitlines()[-4:])
        raise ConfigError(
            f"archguard wheel: {spec}: pip download found no sdist of that release (exit "
            f"{proc.returncode}):\n{tail}\nGive the sdist's URL with its sha256, or a file."
        )


def _download(url: str, sha256: str, root: Path) -> Path:
    name = Path(urllib.parse.urlparse(url).path).name or "sdist.tar.gz"
    target = root / "downloads" / sha256 / name
    if target.is_file() and file_sha256(target) == sha256:
        return target
    with atomic_file(target) as partial:  # whole, or not there: another build reads it
        try:
            with (
                urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response,
                partial.open("wb") as out,
            ):
                shutil.copyfileobj(response, out)
        except OSError as exc:
            raise ConfigError(f"archguard wheel: {url} could not be downloaded ({exc}).") from None
        found = file_sha256(partial)
        if found != sha256:
            raise ConfigError(
                f"archguard wheel: {url} has sha256 {found}, not the pinned {sha256}: refused "
                "before anything is built."
            )
    return target


def _unpack(archive: Path, where: Path) -> Path:
    """Unpack afresh at ``where`` (this build's own directory); the source tree inside."""
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
