"""archguard's cache as entries (``archguard cache``): what it holds, and pruning it.

An entry is one top-level thing of one kind under the cache root (:data:`ENTRIES`): a cell
environment (``envs/<cell>-<digest>``), an unpacked source (``src/<sha>``, ``src/<sha>.2``,
``src/tree-<digest>``), a toolkit root (``cuda-root/cuda-<major>-<digest>``), a build-
requirement overlay (``build-env/<key>``), a download (``downloads/<sha>``,
``downloads/release/<name>-<version>``), a package's config (``farm-config/<sha>.toml``),
a tree's file hashes (``digests/<name>.json``, only ever a speed-up). Anything else under
the root (uv's and pip's caches of a cell's container) is listed as ``other`` and never
pruned. Hidden names (locks) are no entries, but a ``.partial`` directory a killed maker or
prune left is (``partial``): every prune removes it.

- Size: the bytes of its regular files, walked once, symlinks not followed, a file linked
  twice inside one entry counted once (a file uv hard-links from its own cache still counts
  in each environment that links it).
- Last use: the newest mtime of the walk (the entry itself included). A user calls
  :func:`mark_used` (it sets the entry's own mtime to now) where it reuses one, so an entry
  that is only read still counts as used.
- In use: another process holds the entry's lock (``.<name>.lock``, the one its maker or
  :func:`archguard._fs.own_directory` takes) or its use hold (``<root>/.inuse/<kind>/<name>``,
  shared, taken by :func:`mark_used` for the rest of the user's process).

A prune takes both, non-blocking and exclusive, before it removes an entry, and skips (and
names) the entry when it cannot; it renames the entry to a hidden ``.partial`` name and
then removes that, so a reader sees the whole entry or none. The next user of a pruned
entry makes it again (each maker checks for its entry under its lock).

Imports nothing of archguard but :mod:`archguard._fs` and the errors: any layer may call
:func:`mark_used`."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from archguard._fs import ENV_CACHE_MAX, PARTIAL, file_lock, hold_lock, lock_path, write_atomic
from archguard.errors import ConfigError

# directory under the root -> kind; "downloads/release" is a directory of entries itself
ENTRIES = {
    "envs": "env",
    "src": "source",
    "cuda-root": "cuda-root",
    "build-env": "overlay",
    "downloads": "download",
    "downloads/release": "download",
    "farm-config": "config",
    "digests": "digests",
}
OTHER = "other"  # not archguard's own (uv's, pip's): listed, never pruned
SITES = "sites"  # <root>/sites/<digest>: the path of a farm site that links entries here
NOT_ENTRIES = {"jobserver", SITES}  # the machine's jobserver, the sites' register: no entries
# what a killed maker (atomic_directory) or prune left: a hidden directory named for its entry
LEFTOVER = "partial"
_LEFT = re.compile(r"\.(.+)\.[0-9a-f]{12}" + re.escape(PARTIAL))
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)
_DAY = 86400


@dataclass(frozen=True)
class Entry:
    kind: str
    path: Path
    size: int  # bytes
    last_use: float  # seconds since the epoch
    in_use: bool
    sites: tuple[str, ...] = ()  # the farm sites that link it (a cell's environment)

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "path": str(self.path),
            "size": self.size,
            "last_use": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.last_use)),
            "in_use": self.in_use,
            "sites": list(self.sites),
        }


@dataclass(frozen=True)
class Pruned:
    """What a prune removed (or, dry, would remove), what it kept because another process
    holds it, and the cache's bytes before and after."""

    removed: list[Entry]
    in_use: list[Entry]
    before: int
    after: int
    reached: bool  # within the size asked for (always, for an age)


def parse_size(text: str, what: str) -> int:
    """``50G``, ``1.5T``, ``800M``, ``1024`` (bytes) -> bytes; K, M, G, T are powers of 1024
    (``G``, ``GB`` and ``GiB`` alike). ``what`` names the value in the error."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ConfigError(
            f"{what} {text!r} is not a size: give a number of bytes with an optional unit "
            "K, M, G or T (powers of 1024), e.g. 50G or 1.5T."
        )
    return int(float(match[1]) * _UNITS[match[2].upper()])


def cache_budget(environ: Mapping[str, str]) -> int | None:
    """``ARCHGUARD_CACHE_MAX`` in bytes; None where unset."""
    text = environ.get(ENV_CACHE_MAX, "").strip()
    return parse_size(text, ENV_CACHE_MAX) if text else None


def count(number: int) -> str:
    return f"{number} entr{'y' if number == 1 else 'ies'}"


def human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _in_use_path(entry: Path) -> Path:
    """The use hold of ``P/K/N``: ``P/.inuse/K/N``, out of the entries' own directories (which
    hold only the entries and their makers' locks)."""
    return entry.parent.parent / ".inuse" / entry.parent.name / entry.name


_HOLDS: dict[Path, contextlib.ExitStack] = {}  # never let go: each goes with the process


def mark_used(entry: Path) -> None:
    """``entry`` (a cache entry: its directory or file) is used by this process: its last use
    is now, and no prune removes it while this process runs (a shared use hold,
    :func:`_in_use_path`). Call it before the entry is looked at (or under its maker's lock,
    where the maker takes one on every use). Never fails: a read-only cache is used
    unmarked."""
    with contextlib.suppress(OSError):
        os.utime(entry)
    key = entry.absolute()
    if key in _HOLDS:
        return
    hold = contextlib.ExitStack()
    try:
        hold.enter_context(hold_lock(_in_use_path(entry), shared=True))
    except OSError:
        return
    _HOLDS[key] = hold


def let_go() -> None:
    """This process is done with every entry it marked used (a farm run that has published:
    its own prune may then remove its cells' environments to keep the budget; the next run
    makes them again)."""
    while _HOLDS:
        _HOLDS.popitem()[1].close()


def register_site(root: Path, site: Path) -> None:
    """Note in the cache ``root`` that the farm site ``site`` links entries here (its cells'
    environments, ``SITE/.farm/envs/<cell>``), so ``archguard cache`` can name the sites of
    each entry and ``cache prune --unlinked`` keep what a site links. Never fails: a
    read-only cache is used unregistered."""
    where = site.resolve()
    name = hashlib.sha256(str(where).encode()).hexdigest()[:16]
    with contextlib.suppress(OSError):
        (root / SITES).mkdir(parents=True, exist_ok=True)
        target = root / SITES / name
        if not target.is_file() or target.read_text(encoding="utf-8").strip() != str(where):
            write_atomic(target, f"{where}\n")


# the links a site keeps into the cache, under the site (its cells' environments)
SITE_LINKS = (".farm/envs",)


def site_links(root: Path) -> dict[Path, tuple[str, ...]]:
    """Each entry a registered site links (its path, resolved) -> those sites; a site that is
    gone (or no longer a site) is forgotten. Reads only the register and each site's links:
    linear in what is there."""
    found: dict[Path, list[str]] = {}
    register = root / SITES
    try:
        names = sorted(register.iterdir())
    except OSError:
        return {}
    top = root.resolve()
    for name in names:
        try:
            site = Path(name.read_text(encoding="utf-8").strip())
        except OSError:
            continue
        folders = [site / links for links in SITE_LINKS if (site / links).is_dir()]
        if not folders:
            with contextlib.suppress(OSError):
                name.unlink()  # the site is gone: nothing of it links here
            continue
        for folder in folders:
            for link in sorted(folder.iterdir()):
                with contextlib.suppress(OSError):
                    target = link.resolve()
                    if target.is_relative_to(top):
                        found.setdefault(target, []).append(str(site))
    return {path: tuple(sorted(sites)) for path, sites in found.items()}


def _free(path: Path, *, shared: bool) -> bool:
    """Whether no other process holds the lock file ``path`` against a shared (else an
    exclusive) lock now, asked without waiting (no file: nobody does; nothing is created)."""
    with hold_lock(path, shared=shared, wait=False, create=False) as free:
        return free


def _walk(path: Path) -> tuple[int, float]:
    """(bytes of the regular files under ``path``, newest mtime), symlinks not followed."""
    top = path.lstat()
    size, newest, seen = 0, top.st_mtime, set[tuple[int, int]]()
    if stat.S_ISREG(top.st_mode):
        return top.st_size, newest
    pending = [path] if stat.S_ISDIR(top.st_mode) else []
    while pending:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as listing:
            for item in listing:
                info = item.stat(follow_symlinks=False)
                newest = max(newest, info.st_mtime)
                if stat.S_ISDIR(info.st_mode):
                    pending.append(Path(item.path))
                elif stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    size += info.st_size
    return size, newest


def _owner(leftover: Path) -> Path:
    """The entry whose lock a hidden ``.partial`` directory's maker holds."""
    match = _LEFT.fullmatch(leftover.name)
    assert match is not None
    return leftover.with_name(match[1])


def _entry(kind: str, path: Path) -> Entry | None:
    try:
        size, newest = _walk(path)
    except OSError:  # removed meanwhile
        return None
    if kind == LEFTOVER:  # in use while its maker fills it
        in_use = not _free(lock_path(_owner(path)), shared=True)
    else:
        in_use = not _free(lock_path(path), shared=True) or not _free(
            _in_use_path(path), shared=False
        )
    return Entry(kind, path, size, newest, in_use)


def _visible(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if not p.name.startswith("."))
    except OSError:
        return []


def _leftovers(directory: Path) -> list[Entry | None]:
    """The ``.partial`` directories a killed maker or prune left in ``directory``."""
    try:
        found = sorted(p for p in directory.iterdir() if _LEFT.fullmatch(p.name))
    except OSError:
        return []
    return [_entry(LEFTOVER, p) for p in found if p.is_dir() and not p.is_symlink()]


def entries(root: Path) -> list[Entry]:
    """Every entry under the cache ``root``, by kind then path."""
    found: list[Entry | None] = []
    for top in _visible(root):
        if top.name in NOT_ENTRIES:
            continue
        if top.name not in ENTRIES:
            found.append(_entry(OTHER, top))
            continue
        for path in _visible(top):
            name = path.relative_to(root).as_posix()
            if name not in ENTRIES:
                found.append(_entry(ENTRIES[top.name], path))
        found += _leftovers(top)
        if (top / "release").is_dir() and f"{top.name}/release" in ENTRIES:
            found += [_entry(ENTRIES[f"{top.name}/release"], p) for p in _visible(top / "release")]
            found += _leftovers(top / "release")
    links = site_links(root)
    if not links:
        return [e for e in found if e is not None]
    top_resolved = root.resolve()
    return [
        replace(e, sites=links.get(top_resolved / e.path.relative_to(root), ()))
        for e in found
        if e is not None
    ]


@contextlib.contextmanager
def _taken(entry: Path) -> Iterator[bool]:
    """Both of ``entry``'s locks, exclusive, without waiting: whether they are held."""
    with file_lock(entry, wait=False) as held:
        if not held:
            yield False
            return
        with hold_lock(_in_use_path(entry), wait=False) as free:
            yield free


def remove_entry(entry: Path) -> bool:
    """Remove ``entry`` unless another process holds it (then False): renamed to a hidden
    ``.partial`` name under its locks, so no reader sees half of it, then removed. A
    leftover ``.partial`` directory is removed under its entry's lock."""
    if _LEFT.fullmatch(entry.name):
        with file_lock(_owner(entry), wait=False) as free:
            if free:
                shutil.rmtree(entry, ignore_errors=True)
            return free
    with _taken(entry) as held:
        if not held:
            return False
        trash = entry.with_name(f".{entry.name}.{secrets.token_hex(6)}{PARTIAL}")
        try:
            entry.rename(trash)
        except FileNotFoundError:  # removed meanwhile
            return True
    if trash.is_dir() and not trash.is_symlink():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        trash.unlink(missing_ok=True)
    return True


def prune(
    root: Path,
    *,
    older_than_days: float | None = None,
    max_size: int | None = None,
    unlinked: bool = False,
    dry_run: bool = False,
) -> Pruned:
    """Remove the entries last used more than ``older_than_days`` ago, then, least recently
    used first, entries until archguard's own entries hold at most ``max_size`` bytes, with
    ``unlinked`` every entry no registered farm site links (:func:`site_links`), and every
    leftover ``.partial`` directory; never an entry another process holds, nor an
    ``other`` one (uv's and pip's caches: not archguard's to prune, nor counted against the
    budget, which would otherwise empty the rest at every run). ``dry_run``: what it would
    remove."""
    listed = entries(root)
    before = sum(e.size for e in listed)
    total = sum(e.size for e in listed if e.kind != OTHER)
    cutoff = time.time() - older_than_days * _DAY if older_than_days is not None else None
    removed: list[Entry] = []
    in_use: list[Entry] = []
    for entry in sorted((e for e in listed if e.kind != OTHER), key=lambda e: e.last_use):
        old = cutoff is not None and entry.last_use < cutoff
        big = max_size is not None and total > max_size
        orphan = unlinked and not entry.sites
        if not (old or big or orphan or entry.kind == LEFTOVER):  # a leftover: always
            continue
        if entry.in_use or not (dry_run or remove_entry(entry.path)):
            in_use.append(entry)
            continue
        removed.append(entry)
        total -= entry.size
    reached = max_size is None or total <= max_size
    others = sum(e.size for e in listed if e.kind == OTHER)
    return Pruned(removed, in_use, before, total + others, reached)


def budget_line(root: Path, budget: int | None) -> str:
    """The cache's size for a farm run's summary, after keeping it within ``budget`` bytes
    (``ARCHGUARD_CACHE_MAX``: :func:`cache_budget`) where one is set: the run has published,
    so what it used is let go first (:func:`let_go`), and only other processes' holds are
    kept."""
    if budget is None:
        listed = entries(root)
        size = sum(e.size for e in listed)
        return f"cache: {human(size)} in {count(len(listed))} at {root}"
    let_go()
    done = prune(root, max_size=budget)
    line = (
        f"cache: {human(done.after)} at {root} ({ENV_CACHE_MAX} {human(budget)}; "
        f"{count(len(done.removed))} removed, {human(done.before - done.after)})"
    )
    if not done.reached:
        line += f"; over budget: {count(len(done.in_use))} in use kept"
    return line
