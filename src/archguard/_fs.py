"""Files and directories that several processes share: two farm runs (two sites, two
runners on one ``~/.cache``), two ``archguard wheel`` builds, a reader and a writer.

- :func:`write_atomic` / :func:`atomic_file`: a file is written under a name of its own
  beside its target and renamed into place (``rename(2)``): a reader sees the old file or
  the new, whole; two writers never share a temporary file; one killed midway leaves only a
  ``.partial`` name, never a torn target.
- :func:`atomic_directory`: a cache entry made once and then only read (a toolkit root, an
  overlay, a fetched release), made under a lock beside it (``.<name>.lock``, so a second
  maker waits and then finds it made, instead of doing the work again) in a directory of its
  own, renamed into place when complete (so a reader that takes no lock, or a maker killed
  midway, never sees half of one).
- :func:`own_directory`: a directory one build works in, alone: ``base`` when no other
  process holds it, else ``base.2``, ``base.3``, ... (the first free), held by ``flock`` for
  as long as the build runs (the kernel lets it go when the process dies, SIGKILL
  included). See its docstring for why its name is fixed rather than random.
- :func:`hold_lock`: archguard's one file lock (``flock``: shared or exclusive, waiting or
  not, or a probe of a lock others hold), under each of the above, a farm site's lock and the
  cache's use holds. It raises nothing of its own: a caller that finds the lock held says
  why (:class:`~archguard.errors.Busy`), this module importing nothing of archguard.

Below every subpackage (it imports nothing of archguard), so any layer may use it."""

from __future__ import annotations

import contextlib
import fcntl
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO

PARTIAL = ".partial"  # every temporary name ends so: what a killed writer left is known
_TOKEN = 6  # bytes of a temporary name's random part

# Builds of the same inputs give the same bytes: the zip entries' dates (setuptools'
# bdist_wheel, wheel pack, auditwheel) from here, not the clock; 1980-01-01, zip's first day.
# archguard wheel and farm jobs set it where the caller has not.
SOURCE_DATE_EPOCH = "315532800"

ENV_CACHE_DIR = "ARCHGUARD_CACHE_DIR"  # archguard's cache (detect.fetch.cache_root)
ENV_CACHE_MAX = "ARCHGUARD_CACHE_MAX"  # farm run keeps the cache within it (detect.cachestore)


def _temporary(target: Path) -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(_TOKEN)}{PARTIAL}")


def _temporaries(target: Path) -> list[Path]:
    """The temporary names :func:`_temporary` gives ``target`` (never another name's)."""
    return list(target.parent.glob(f".{target.name}.{'[0-9a-f]' * 2 * _TOKEN}{PARTIAL}"))


@contextlib.contextmanager
def atomic_file(target: Path, *, own_name: bool = False) -> Iterator[Path]:
    """A path to write ``target`` at; renamed over ``target`` when the block ends without
    error, removed when it raises. ``own_name``: the path carries ``target``'s own name
    (inside a temporary directory beside it), for writers that read the name (a wheel's).
    Beside ``target``, so the rename stays on one file system."""
    target.parent.mkdir(parents=True, exist_ok=True)
    holder = _temporary(target) if own_name else None
    if holder is not None:
        holder.mkdir()
    partial = holder / target.name if holder is not None else _temporary(target)
    try:
        yield partial
        partial.replace(target)
    finally:
        if holder is not None:
            shutil.rmtree(holder, ignore_errors=True)
        elif partial.is_symlink() or partial.exists():
            partial.unlink()


def write_atomic(path: Path, data: str | bytes) -> None:
    """``data`` (text as UTF-8, or bytes as they are) at ``path``, whole or not at all."""
    with atomic_file(path) as partial:
        partial.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def lock_path(target: Path) -> Path:
    """The lock file of ``target``: beside it, hidden, ``.<name>.lock``."""
    return target.with_name(f".{target.name}.lock")


@contextlib.contextmanager
def hold_lock(
    path: Path, *, shared: bool = False, wait: bool = True, create: bool = True
) -> Iterator[bool]:
    """Hold the lock file ``path`` (``flock``, shared or exclusive) for the block; yields
    whether it is held: with ``wait=False``, False at once when another holds it against
    this mode. Between processes and between threads alike (each call opens the file anew,
    so two holds in one process are two holders); the kernel lets it go when the process
    dies, SIGKILL included. ``create=False``
    probes a lock that may not be there: a file that cannot be opened is one nobody holds
    (True), and nothing is made."""
    handle: IO[bytes]
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("ab")
    else:
        try:
            handle = path.open("rb")
        except OSError:
            yield True
            return
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(handle, mode | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        handle.close()  # the flock goes with the descriptor


@contextlib.contextmanager
def file_lock(target: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold ``target``'s lock (:func:`lock_path`), exclusive, for the block; yields whether
    it is held (with ``wait=False``, False at once when another holds it)."""
    with hold_lock(lock_path(target), wait=wait) as held:
        yield held


@contextlib.contextmanager
def atomic_directory(target: Path) -> Iterator[Path | None]:
    """Make the cache entry ``target`` once: under its lock, None when it is already there
    (another process made it; the caller reads it), else a fresh directory beside it to
    fill, renamed into place when the block ends without error and removed when it raises.
    Partial directories a killed maker left are removed (only a lock holder makes them)."""
    with file_lock(target):
        if target.exists():
            yield None
            return
        for left in _temporaries(target):
            shutil.rmtree(left, ignore_errors=True)
        partial = _temporary(target)
        partial.mkdir()
        try:
            yield partial
            try:
                partial.rename(target)
            except OSError:  # made meanwhile by a maker that took no lock: the same entry
                if not target.exists():
                    raise
        finally:
            if partial.exists():
                shutil.rmtree(partial, ignore_errors=True)


def slot_name(base: Path, number: int) -> Path:
    """The ``number``-th directory of ``base`` (1: ``base`` itself, then ``base.2``, ...)."""
    return base if number == 1 else base.with_name(f"{base.name}.{number}")


@contextlib.contextmanager
def own_directory(base: Path) -> Iterator[Path]:
    """A directory for one build alone, held for the block: the first of ``base``,
    ``base.2``, ``base.3``, ... whose lock no other build holds (it may hold what an
    earlier build left: the caller empties it).

    Why a fixed name and not a random one: a compile cache (sccache, ccache) keys on the
    compile's arguments and the preprocessed source, both holding absolute paths, so a build
    in a new directory each time would never hit. Here a build alone on the machine always
    works at ``base`` (a source's stable path, as before), and the second of two at once at
    ``base.2``, which is just as stable the next time two run together; the lock, not the
    name, is what keeps two builds apart."""
    base.parent.mkdir(parents=True, exist_ok=True)
    number = 1
    while True:
        where = slot_name(base, number)
        with file_lock(where, wait=False) as held:
            if held:
                yield where
                return
        number += 1
