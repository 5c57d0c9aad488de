"""What a build (``archguard wheel``, a farm's job) builds from: a source tree, an sdist
file, an sdist URL pinned by its sha256 (``URL#sha256=HEX`` as pip writes it, or a pin the
caller gives with where it came from), or ``name==version`` (the release's sdist, as a farm's
sources are: taken from the project page of the indexes pip reads, its file chosen by the
version in its name and checked against the sha256 the index publishes; nothing of the
release runs to find it, where ``pip download`` would build its metadata, and a
setuptools_scm package without its plugin says 0.0.0).

Each message says what was found about the input (the release, the URL, the file), never
which command asked: the caller adds its own context. A sha256 that differs is
:class:`~archguard.errors.IntegrityMismatch`, a download that fails
:class:`~archguard.errors.FetchFailed`, a release no index gives
:class:`~archguard.errors.ReleaseNotFetched`; only a bad input is a config error.

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
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from archguard._fs import ENV_CACHE_DIR, atomic_directory, atomic_file, own_directory
from archguard._http import opened
from archguard.detect.cachestore import mark_used
from archguard.detect.index import IndexFile, index_urls, project_files
from archguard.detect.machine_jobserver import machine_id
from archguard.detect.sources import file_sha256
from archguard.errors import (
    ConfigError,
    FetchFailed,
    IndexUnreachable,
    IntegrityMismatch,
    ReleaseNotFetched,
    SourceUnusable,
)

_ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip")
DOWNLOAD_TIMEOUT = 300  # seconds for one sdist
PINNED_BY = "the sha256 given for it"  # where a pin came from, where the caller names none
_RELEASE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)")


def cache_root() -> Path:
    """archguard's cache: ``ARCHGUARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/archguard``, else
    ``~/.cache/archguard`` (sources, build environments, the farm's cell environments)."""
    own = os.environ.get(ENV_CACHE_DIR, "").strip()
    if own:
        if not Path(own).is_absolute():  # a build runs elsewhere: the same cache everywhere
            raise ConfigError(
                f"{ENV_CACHE_DIR}={own!r} is a relative path; give an absolute one (the "
                "build backend runs in another directory, and would find another cache)."
            )
        return Path(own)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base, "archguard")


def machine_directory() -> Path:
    """Where the machine's one jobserver lives
    (:func:`archguard.detect.machine_jobserver.machine_jobserver`): every farm run,
    ``archguard wheel`` and hook build that shares the cache on this machine joins it (a
    directory per boot and pid namespace: hosts or containers sharing the cache share none)."""
    return cache_root() / "jobserver" / machine_id()


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
def checked_out(  # noqa: PLR0913 - each a seam: the cache, the pip whose index, its options
    spec: str,
    sha256: str | None = None,
    cache: Path | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    pip_args: Sequence[str] = (),
    pinned_by: str = PINNED_BY,
) -> Iterator[Checkout]:
    """The directory to build for ``spec`` (a tree, an sdist file, a pinned URL, or
    ``name==version``, fetched from the indexes ``python``'s pip reads under ``env`` and
    with ``pip_args``, the options given to pip); an unpacked sdist's directory is this
    build's alone until the block ends. ``pinned_by`` says where ``sha256`` came from (the
    caller's option or manifest key), so that a mismatch names the pin that refused it."""
    root = cache or cache_root()
    pip = (python or sys.executable, env or {}, pip_args)
    archive, found = _archive(spec, (sha256, pinned_by), root, pip)
    if not found:  # a source tree: built where it is
        yield Checkout(archive, "")
        return
    with own_directory(root / "src" / found[:16]) as where:
        yield Checkout(_unpack(archive, where), found)


_HELD = contextlib.ExitStack()  # never closed: each descriptor goes when the process ends


def source_tree(  # noqa: PLR0913 - checked_out's
    spec: str,
    sha256: str | None = None,
    cache: Path | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    pip_args: Sequence[str] = (),
    pinned_by: str = PINNED_BY,
) -> Path:
    """:func:`checked_out`'s directory, held until this process ends (a command that builds
    it in this process, then exits); a long-lived caller uses :func:`checked_out`."""
    return _HELD.enter_context(
        checked_out(spec, sha256, cache, python, env, pip_args=pip_args, pinned_by=pinned_by)
    ).tree


_Pip = tuple[str, Mapping[str, str], Sequence[str]]  # a pip, its environment, its options


def _pinned(spec: str, given: tuple[str | None, str]) -> tuple[str, str | None, str]:
    """(the spec without its fragment, the sha256 it is pinned by or None, where that pin
    came from): the caller's (``given``: its sha256 and where it came from) before the
    spec's own ``#sha256=``."""
    where, fragment = split_pin(spec)
    sha256, by = given
    if sha256:
        return where, sha256.lower(), by
    if fragment:
        return where, fragment, "its #sha256= fragment"
    return where, None, ""


def _archive(spec: str, given: tuple[str | None, str], root: Path, pip: _Pip) -> tuple[Path, str]:
    """The sdist ``spec`` names, checked against its pin, and its sha256; for a source tree,
    the tree and ""."""
    spec, sha256, by = _pinned(spec, given)
    if sha256 is not None and (
        len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256)
    ):
        raise ConfigError(f"sha256 {sha256!r} for {spec} ({by}) is not 64 hex digits.")
    if is_release(spec):
        archive = _fetch_release(spec, root, pip, sha256, by)
        found = file_sha256(archive)
        if sha256 is not None and found != sha256:
            raise IntegrityMismatch(
                f"{archive} (the sdist of {spec}, kept in the cache) has sha256 {found}, not "
                f"{sha256} ({by}): refused before anything is built. Check the pin, or "
                f"remove {archive.parent} to fetch it again."
            )
        return archive, found
    if is_remote(spec):
        if sha256 is None:
            raise ConfigError(
                f"{spec} is a URL without a pinned sha256; give it as {spec}#sha256=HEX, so "
                "that what is built is exactly the sources reviewed."
            )
        return _download(spec, sha256, by, root), sha256
    path = Path(spec)
    if path.is_dir():
        if sha256 is not None:
            raise ConfigError(f"{spec} is a directory; a sha256 ({by}) pins an sdist file or URL.")
        return path.resolve(), ""
    if not path.is_file():
        raise ConfigError(f"{spec} is neither a source tree, an sdist file nor a URL.")
    if not path.name.endswith(_ARCHIVES):
        raise ConfigError(
            f"{spec} is not an sdist ({', '.join(_ARCHIVES)}); give a source tree, an sdist, "
            "or its URL."
        )
    found = file_sha256(path)
    if sha256 is not None and found != sha256:
        raise IntegrityMismatch(
            f"{spec} has sha256 {found}, not {sha256} ({by}): refused before anything is "
            "built. Check the pin, or the file."
        )
    return path, found


def _fetch_release(spec: str, root: Path, pip: _Pip, pinned: str | None, by: str) -> Path:
    """``name==version``'s sdist, from the index's project page with the sha256 it publishes
    (:func:`_download_release`; ``pinned``, pinned ``by``, where it publishes none), kept
    under ``<cache>/downloads/release/<name>-<version>/`` and fetched once."""
    match = _RELEASE.fullmatch(spec)
    assert match is not None
    where = root / "downloads" / "release" / f"{match[1].lower()}-{match[2]}"
    mark_used(where)  # held before it is looked at: no prune removes it from here on
    found = [p for p in where.glob("*") if p.name.endswith(_ARCHIVES)] if where.is_dir() else []
    if len(found) == 1:
        return found[0]
    with atomic_directory(where) as partial:  # fetched once, whole, by one build at a time
        if partial is not None:
            python, env, pip_args = pip
            indexes = index_urls(python, {**os.environ, **env}, pip_args)
            index, file = find_release(match[1], match[2], indexes)
            _download_release(spec, index, file, (pinned, by), partial)
    found = [p for p in where.glob("*") if p.name.endswith(_ARCHIVES)]
    if len(found) != 1:  # something else wrote there: which is the release is not known
        raise ReleaseNotFetched(
            f"{spec}: its download folder {where} holds {len(found)} sdists, not one; remove "
            "the folder to fetch the release again."
        )
    return found[0]


_FIX = (
    "Check the network and the version, name an index that has it (pip's --index-url), or "
    "give the sdist's URL with its sha256 (URL#sha256=HEX) or its file."
)


def _sdist_version(filename: str) -> tuple[str, Version] | None:
    """(canonical name, version) of an sdist's file name (PEP 625, and the older
    ``.tar.bz2``/``.zip`` spellings); None for a wheel or anything else."""
    suffix = next((s for s in _ARCHIVES if filename.endswith(s)), None)
    if suffix is None or Path(filename).name != filename:
        return None
    try:
        name, version = parse_sdist_filename(filename[: -len(suffix)] + ".tar.gz")
    except (InvalidSdistFilename, InvalidVersion):
        return None
    return canonicalize_name(name), version


def find_release(name: str, version: str, indexes: Sequence[str]) -> tuple[str, IndexFile]:
    """(the index, its file) of ``name``'s sdist whose version is ``version`` (PEP 440
    equal: ``1.0`` is ``1.0.0``), from the first index that lists one; no metadata is built
    to find it. :class:`ReleaseNotFetched` naming each index read when none does."""
    release = f"{name}=={version}"
    try:
        wanted = Version(version)
    except InvalidVersion:
        raise ConfigError(f"{release}: {version!r} is not a version.") from None
    project = canonicalize_name(name)
    if not indexes:
        raise ReleaseNotFetched(
            f"{release}: pip is set to --no-index (PIP_NO_INDEX or its configuration), so "
            f"there is no index to fetch the release's sdist from. {_FIX}"
        )
    said = []
    for index in indexes:
        try:
            files = project_files(index, project)
        except IndexUnreachable as exc:
            said.append(f"{index}: {exc}")
            continue
        sdists = [(f, _sdist_version(f.filename)) for f in files]
        for file, parsed in sdists:
            if parsed is not None and parsed == (project, wanted):
                return index, file
        versions = sorted({p[1] for _, p in sdists if p is not None and p[0] == project})
        shown = ", ".join(str(v) for v in versions[-5:]) or "none"
        said.append(f"{index}: no sdist of {version} (its newest sdists: {shown})")
    raise ReleaseNotFetched(
        f"{release}: no index pip reads has the release's sdist:\n"
        + "\n".join(f"  {s}" for s in said)
        + f"\n{_FIX}"
    )


def _answer(exc: BaseException) -> str:
    """What the server (or the network) said to a download: ``HTTP 404 Not Found``,
    ``Connection refused``, a timeout."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, TimeoutError):
        return f"no answer within {DOWNLOAD_TIMEOUT} s"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


def _fetch(url: str, into: Path, what: str) -> None:
    """``url``'s bytes into ``into``; :class:`FetchFailed` naming the URL (``what`` it is)
    and the server's answer."""
    try:
        with (
            opened(url, DOWNLOAD_TIMEOUT) as response,
            into.open("wb") as out,
        ):
            shutil.copyfileobj(response, out)
    except (OSError, ValueError) as exc:
        raise FetchFailed(f"{url}{what} could not be downloaded: {_answer(exc)}.") from None


def _download_release(
    release: str, index: str, file: IndexFile, given: tuple[str | None, str], into: Path
) -> None:
    """The release's sdist ``file`` into ``into``, checked against the sha256 its index
    publishes (else the one the caller pinned, ``given`` with where it came from; the
    caller compares a pin with the file)."""
    pinned, by = given
    expected = file.sha256 or pinned
    if expected is None:
        raise ReleaseNotFetched(
            f"{release}: {index} lists {file.filename} without a sha256, so its download "
            f"could not be checked. Pin the sha256 you trust for it, or give "
            f"{file.url}#sha256=HEX."
        )
    target = into / file.filename
    _fetch(file.url, target, f" (the sdist of {release}, listed by {index})")
    found = file_sha256(target)
    if found != expected:
        whose = f"the one {index} publishes" if file.sha256 else by
        raise IntegrityMismatch(
            f"{file.filename} (the sdist of {release}) from {file.url} has sha256 {found}, "
            f"not {expected} ({whose}): refused before anything is unpacked. Fetch it again "
            "later (a broken download or mirror), or ask the index's owner."
        )


def _download(url: str, sha256: str, by: str, root: Path) -> Path:
    """``url``'s sdist, kept under ``<cache>/downloads/<sha256>/`` once it is checked
    against ``sha256`` (pinned ``by``)."""
    name = Path(urllib.parse.urlparse(url).path).name or "sdist.tar.gz"
    target = root / "downloads" / sha256 / name
    mark_used(target.parent)
    if target.is_file() and file_sha256(target) == sha256:
        return target
    with atomic_file(target) as partial:  # whole, or not there: another build reads it
        _fetch(url, partial, "")
        found = file_sha256(partial)
        if found != sha256:
            raise IntegrityMismatch(
                f"{url} has sha256 {found}, not {sha256} ({by}): refused before anything is "
                "built. Check the pin, or the URL."
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
                raise SourceUnusable(
                    f"this Python has no safe tar extraction (tarfile's data filter); unpack "
                    f"{archive.name} yourself and give the tree, or use a newer Python."
                )
            with tarfile.open(archive) as tf:
                tf.extractall(where, filter="data")
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise SourceUnusable(f"{archive} could not be unpacked ({exc}).") from None
    entries = [p for p in where.iterdir() if not p.name.startswith(".")]
    tree = entries[0] if len(entries) == 1 and entries[0].is_dir() else where
    if not (tree / "setup.py").is_file() and not (tree / "pyproject.toml").is_file():
        raise SourceUnusable(
            f"{archive.name} holds no setup.py or pyproject.toml at its top level; it is not an "
            "sdist pip can build."
        )
    return tree
