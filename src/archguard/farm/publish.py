"""Publishing a farm's site: atomic and exclusive.

- One run holds a SITE at a time: ``SITE/.farm/lock``, held with ``flock`` (the kernel lets
  it go when its process dies, SIGKILL included) and naming the holder's pid, host and start;
  a second run waits (``--wait``) or refuses naming the holder; a lock left by a run that
  ended without letting go is taken over and said so.
- Every wheel lives at ``SITE/wheels/<sha256>/<name>``: a new wheel of an old name is a new
  file, never the old one rewritten, so an index read a moment ago still finds the bytes it
  advertises. A wheel is moved in under its final name only once whole (a rename).
- Each cell's index is written whole into ``SITE/<cell>/.simple-<token>/`` and published by
  swapping the symlink ``SITE/<cell>/simple`` (``os.replace``): a reader sees the old index or
  the new, never none, never half. The previous index and every wheel it names stay one more
  generation, for readers that were still reading it.
- The indexes are a function of every job's ledger, never of one run's selection: each
  cell's, and each CUDA line's (:mod:`archguard.farm.wheelmeta`), every link with its
  wheel's metadata beside it (PEP 658)."""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import secrets
import shutil
import socket
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from archguard._fs import atomic_file, hold_lock
from archguard.core.wheelfile import parse_wheel_name, variants_json_project
from archguard.detect.sources import file_sha256
from archguard.errors import Busy
from archguard.farm.ledger import PUBLISHED, STATE, STORE, Outcome, say, store_path, write_atomic
from archguard.farm.manifest import Cell
from archguard.farm.wheelmeta import (
    METADATA,
    VARIANTS,
    WheelMeta,
    line_wheels,
    metadata_of,
    variants_json,
)

LOCK = "lock"
INDEX = "simple"
GRACE_S = 120.0  # an index replaced twice stays this long for the readers still in it


def _holder_text(data: Mapping[str, object]) -> str:
    started = data.get("started")
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(started)))
        if isinstance(started, int | float)
        else "?"
    )
    return f"pid {data.get('pid')} on {data.get('host')}, started {when}: {data.get('command')}"


def _read_holder(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def site_lock(site: Path, wait: bool = False, command: str = "") -> Iterator[None]:
    """Hold SITE for one run. Refuses (:class:`~archguard.errors.Busy`, naming the holder)
    when another run holds it, unless ``wait``; takes over, and says so, a lock whose holder
    ended without letting it go (killed). The lock file names its holder: written in place
    (never renamed over: the lock is the file's)."""
    path = site / STATE / LOCK
    with contextlib.ExitStack() as held:
        if not held.enter_context(hold_lock(path, wait=False)):
            holder = _holder_text(_read_holder(path))
            if not wait:
                raise Busy(
                    f"archguard farm: {site} is being published by another run ({holder}). "
                    "One run holds a site at a time: wait for it, or pass --wait to queue "
                    "behind it."
                )
            say(f"waiting for the run that holds {site} ({holder})")
            held.enter_context(hold_lock(path))
        left = _read_holder(path)
        if left:
            say(
                f"took over the lock of {site} from a run that ended without letting it go "
                f"({_holder_text(left)}); what it left unfinished is checked, not trusted"
            )
        mine = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "command": command or " ".join(sys.argv),
        }
        path.write_text(json.dumps(mine), encoding="utf-8")
        try:
            yield
        finally:  # let go cleanly (an error, Ctrl-C): the next run takes nothing over
            path.write_text("", encoding="utf-8")


def store_wheel(site: Path, built: Path) -> tuple[str, str]:
    """Move a built wheel into the store (``SITE/wheels/<sha256>/<name>``), whole (a rename
    on the same file system, else a copy under a temporary name, then a rename); its name
    and sha256. A wheel whose bytes are already stored is not written again."""
    sha = file_sha256(built)
    target = store_path(site, built.name, sha)
    if target.is_file() and file_sha256(target) == sha:
        built.unlink(missing_ok=True)
        return built.name, sha
    with atomic_file(target) as partial:
        try:
            built.replace(partial)
        except OSError:  # another file system
            shutil.copyfile(built, partial)
    return built.name, sha


def store_bytes(site: Path, name: str, data: bytes) -> tuple[str, str]:
    """A file made for an index (a ``variants.json``) stored like a wheel, by its content:
    ``SITE/wheels/<sha256>/<name>``, written once."""
    sha = hashlib.sha256(data).hexdigest()
    target = store_path(site, name, sha)
    if not target.is_file():
        write_atomic(target, data)
    return name, sha


def published(ledgers: Iterable[Outcome], cell: str) -> list[tuple[str, str]]:
    """(name, sha256) of each wheel the ledgers publish in ``cell``."""
    out = set()
    for ledger in ledgers:
        if ledger.cell == cell and ledger.status in PUBLISHED:
            out |= {(w, ledger.sha256.get(w, "")) for w in ledger.wheels}
    return sorted(out)


def _link(name: str, sha: str, meta: WheelMeta | None) -> str:
    """A wheel's link on its project page: the stored file with its sha256; where its
    metadata is beside it, PEP 658/714's attributes and its Requires-Python."""
    attrs = ""
    if meta is not None:
        attrs = (
            f' data-dist-info-metadata="sha256={meta.sha256}"'
            f' data-core-metadata="sha256={meta.sha256}"'
        )
        if meta.requires_python:
            attrs += f' data-requires-python="{html.escape(meta.requires_python)}"'
    return (
        f'<a href="../../../{STORE}/{sha}/{html.escape(name)}#sha256={sha}"{attrs}>'
        f"{html.escape(name)}</a><br>\n"
    )


def _pages(
    wheels: Sequence[tuple[str, str]], metas: Mapping[tuple[str, str], WheelMeta | None]
) -> dict[str, str]:
    """A PEP 503 index's pages (``index.html``, ``<project>/index.html``) for ``wheels``."""
    projects: dict[str, list[tuple[str, str]]] = {}
    for name, sha in wheels:
        written = (
            variants_json_project(name)
            if name.endswith(VARIANTS)
            else parse_wheel_name(name).distribution
        )
        projects.setdefault(canonicalize_name(written), []).append((name, sha))
    links = "".join(f'<a href="{p}/">{p}</a><br>\n' for p in sorted(projects))
    pages = {"index.html": f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n"}
    for project, files in projects.items():
        rows = "".join(_link(name, sha, metas.get((name, sha))) for name, sha in sorted(files))
        pages[f"{project}/index.html"] = f"<!DOCTYPE html>\n<html><body>\n{rows}</body></html>\n"
    return pages


def _published_pages(link: Path) -> dict[str, str] | None:
    """The pages the index at ``link`` publishes now, or None (none, or not readable)."""
    if not link.is_symlink():
        return None
    try:
        target = link.resolve(strict=True)
        return {
            str(p.relative_to(target)): p.read_text()
            for p in [target / "index.html", *target.glob("*/index.html")]
        }
    except OSError:
        return None


Metas = dict[tuple[str, str], WheelMeta | None]


def _metas(site: Path, wheels: Iterable[tuple[str, str]], known: Metas) -> Metas:
    """Each wheel's metadata, read once per publishing pass (``known``: what it has read)."""
    for w in wheels:
        if w not in known and w[0].endswith(".whl"):
            known[w] = metadata_of(site, *w)
    return known


def write_index(
    site: Path, cell: str, wheels: Sequence[tuple[str, str]], metas: Metas | None = None
) -> bool:
    """SITE/<cell>/simple/: a PEP 503 index of ``wheels`` ((name, sha256) in the store),
    written whole in a directory of its own, then published by one symlink swap; an index
    that would say what the published one says is not published again. Whether it was.
    ``metas``: the wheels' metadata already read in this pass (extended here)."""
    root = site / cell
    root.mkdir(parents=True, exist_ok=True)
    wheels = [*wheels, *(store_bytes(site, n, data) for n, data in variants_json(site, wheels))]
    pages = _pages(wheels, _metas(site, wheels, {} if metas is None else metas))
    if _published_pages(root / INDEX) == pages:
        return False
    token = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"
    fresh = root / f".{INDEX}-{token}"
    for relative, text in pages.items():
        (fresh / relative).parent.mkdir(parents=True, exist_ok=True)
        (fresh / relative).write_text(text)
    _swap(root / INDEX, fresh)
    return True


def _swap(link: Path, fresh: Path) -> None:
    """``link`` made to point at ``fresh`` in one step; the directory it pointed at before
    stays (a reader may be in it), and so does any older one for ``grace`` seconds after it
    was written (a slow reader); the rest go, and temporary links a killed run left."""
    previous = str(link.readlink()) if link.is_symlink() else None
    if link.exists() and not link.is_symlink():  # a site written before the swap existed
        legacy = link.with_name(f".{INDEX}-legacy-{secrets.token_hex(4)}")
        link.rename(legacy)
        previous = legacy.name
    temporary = link.with_name(f".{INDEX}-link-{secrets.token_hex(4)}")
    temporary.symlink_to(fresh.name)
    temporary.replace(link)  # rename(2): atomic
    now = time.time()
    if previous is not None:  # replaced now: its grace period starts now
        with contextlib.suppress(OSError):
            os.utime(link.parent / previous, (now, now))
    for old in link.parent.glob(f".{INDEX}-*"):
        if old.is_symlink() or old.is_file():
            if old.name != temporary.name:
                old.unlink(missing_ok=True)
            continue
        if old.name not in (fresh.name, previous):
            with contextlib.suppress(OSError):
                if now - old.stat().st_mtime >= GRACE_S:
                    shutil.rmtree(old, ignore_errors=True)


def indexed(site: Path) -> dict[str, set[tuple[str, str]]]:
    """Every wheel the indexes kept in each cell (the current one, the previous one, those
    in their grace period) name, by cell: (name, sha256), read from the index files."""
    out: dict[str, set[tuple[str, str]]] = {}
    for folder in site.iterdir() if site.is_dir() else []:
        if folder.name.startswith(".") or folder.name == STORE or not folder.is_dir():
            continue
        for index in folder.glob(f".{INDEX}-*"):
            if index.is_dir() and not index.is_symlink():
                out.setdefault(folder.name, set()).update(read_links(index))
    return out


def read_links(index: Path) -> set[tuple[str, str]]:
    """(name, sha256) of every wheel a PEP 503 index directory written here links."""
    found = set()
    for page in index.glob("*/index.html"):
        for part in page.read_text().split('<a href="')[1:]:
            href = part.split('"', 1)[0]
            where, _, sha = href.partition("#sha256=")
            found.add((html.unescape(where.rsplit("/", 1)[-1]), sha))
    return found


def collect_garbage(site: Path, keep: Iterable[tuple[str, str]] = ()) -> list[Path]:
    """Remove stored wheels that no index (current or previous) and no ledger in ``keep``
    names, and partial files no run is writing (the caller holds the lock); the removed."""
    wanted = {pair for pairs in indexed(site).values() for pair in pairs} | set(keep)
    shas = {sha for _, sha in wanted}
    removed = []
    store = site / STORE
    for folder in store.iterdir() if store.is_dir() else []:
        for path in folder.iterdir():
            wheel = path.name.removesuffix(METADATA)  # its metadata goes with the wheel
            if (wheel, folder.name) not in wanted or path.name.endswith(".partial"):
                path.unlink(missing_ok=True)
                removed.append(path)
        if folder.name not in shas:
            with contextlib.suppress(OSError):
                folder.rmdir()
    return removed


def publish_indexes(
    site: Path, cells: Sequence[Cell], ledgers: Mapping[str, Outcome], jobs: Iterable[str]
) -> None:
    """Each cell's index, and each CUDA line's (``SITE/cu130/simple/``: every cell of that
    CUDA), from the ledgers of ``jobs`` (every job of the manifest: a job that left the
    manifest leaves the index)."""
    current = [ledgers[j] for j in jobs if j in ledgers]
    current = [r for r in current if all(p.is_file() for p in r.stored(site))]  # whole only
    lines: dict[str, list[list[tuple[str, str]]]] = {}
    metas: Metas = {}
    for cell in cells:
        wheels = published(current, cell.name)
        write_index(site, cell.name, wheels, metas)
        lines.setdefault(cell.cuda.tag, []).append(wheels)
    for tag, by_cell in lines.items():
        wheels, notes = line_wheels(by_cell, metas)
        if write_index(site, tag, wheels, metas):
            for note in notes:
                say(f"index {tag}: {note}")


def kept_wheels(ledgers: Mapping[str, Outcome], jobs: Iterable[str]) -> set[tuple[str, str]]:
    """(name, sha256) of every wheel the ledgers of ``jobs`` publish: never garbage."""
    current = [ledgers[j] for j in jobs if j in ledgers]
    return {(w, r.sha256.get(w, "")) for r in current if r.status in PUBLISHED for w in r.wheels}
