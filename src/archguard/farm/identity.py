"""What a job's identity digests, read from this machine: a source tree's content (the files
it would ship, each hashed once and then reused while its size and mtime stay the same), an
archive's sha256, archguard's own code, the toolkit a build finds, and what a cell's
environment really holds (its torch's version and local label, its Python). Paths never enter
a digest: the same manifest checked out at two paths plans the same ids."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from archguard.detect.nvcc import find_nvcc
from archguard.detect.sources import SKIP_DIRS, file_sha256
from archguard.detect.tools import QUERY_TIMEOUT_S, ToolFailed, last_line, run
from archguard.errors import ArchguardError, NvccUnusable, SourceUnusable, ToolError
from archguard.farm.ledger import write_atomic

# Not shipped: version control, build outputs, tool caches (hidden directories are skipped too)
JUNK_DIRS = SKIP_DIRS | {"__pypackages__", "wheelhouse"}
_JUNK_SUFFIXES = (".egg-info", ".pyc", ".so", ".o")


def _shipped(root: Path) -> list[Path]:
    """The files of ``root`` an sdist would hold, as far as a walk can tell: every file but
    those under hidden, build and cache directories and build outputs, in a stable order."""
    out = []
    seen: set[str] = set()  # real directories walked: a link back up is walked once
    for here, dirs, files in os.walk(root, followlinks=True):  # a linked directory is built
        real = os.path.realpath(here)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in JUNK_DIRS and not d.startswith(".") and not d.endswith(".egg-info")
        )
        out += [Path(here, f) for f in sorted(files) if not f.endswith(_JUNK_SUFFIXES)]
    return out


def git_describe(root: Path) -> str | None:
    """What a version plugin (setuptools_scm, versioneer) reads from a checkout's git, which
    the digest leaves out: ``git describe --tags --long --dirty --always``; None outside
    a checkout or without git."""
    if not (root / ".git").exists():
        return None
    try:
        proc = run(
            ["git", "-C", str(root), "describe", "--tags", "--long", "--dirty", "--always"],
            ToolError,
            QUERY_TIMEOUT_S,
        )
    except ToolError:  # git could not run: no description, as without git
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


class _HashCache:
    """sha256 of files by (path, size, mtime): a tree of thousands of files is re-read only
    where it changed. Kept in ``<cache>/digests/<name>.json``; a lost or broken cache is only
    slower, never wrong (a changed file changes its mtime or size)."""

    def __init__(self, cache: Path | None, name: str) -> None:
        self.path = cache / "digests" / f"{name}.json" if cache is not None else None
        self.known: dict[str, list[object]] = {}
        self.changed = False
        if self.path is not None:
            try:
                self.known = json.loads(self.path.read_text())
            except (OSError, ValueError):
                self.known = {}

    def sha256(self, path: Path) -> str:
        stat = path.stat()
        key = str(path)
        seen = self.known.get(key)
        if seen is not None and seen[:2] == [stat.st_size, stat.st_mtime_ns]:
            return str(seen[2])
        digest = file_sha256(path)
        self.known[key] = [stat.st_size, stat.st_mtime_ns, digest]
        self.changed = True
        return digest

    def save(self) -> None:
        if self.path is None or not self.changed:
            return
        with contextlib.suppress(OSError):  # a cache: the next run hashes again
            write_atomic(self.path, json.dumps(self.known))


def tree_digest(root: Path, cache: Path | None = None) -> str:
    """The digest of a source tree's shipped files: their paths relative to ``root``, their
    content and whether each is executable. ``cache`` (a directory) keeps each file's hash
    by its size and mtime between runs."""
    root = root.resolve()
    hashes = _HashCache(cache, hashlib.sha256(str(root).encode()).hexdigest()[:24])
    digest = hashlib.sha256()
    try:
        for path in _shipped(root):
            if not path.is_file():
                continue  # a dangling link: nothing a build could read
            mode = "x" if os.access(path, os.X_OK) else "-"
            relative = path.relative_to(root).as_posix()
            digest.update(f"{relative}\0{mode}\0{hashes.sha256(path)}\n".encode())
    except OSError as exc:
        raise SourceUnusable(f"source tree {root}: could not be read ({exc}).") from None
    hashes.save()
    return digest.hexdigest()


def archguard_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``ARCHGUARD_*`` variables a build inherits (a list, a policy, a config, a
    cache): each changes what it builds, so each is an input."""
    return {k: v for k, v in sorted(environ.items()) if k.startswith("ARCHGUARD_")}


def code_digest(root: Path | None = None) -> str:
    """A digest of archguard's own code (its modules and bundled data), ``root`` being the
    installed package: an edited install, not only a new version, is a new input."""
    root = root or Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".yml", ".yaml", ".toml", ".json"):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


def toolkit_identity(environ: Mapping[str, str], cache: Path | None = None) -> dict[str, str]:
    """The toolkit a build with ``environ`` finds (torch's search order): what ``nvcc
    --version`` prints and the sha256 of the nvcc, ptxas and cicc it runs, so that the same
    release built again, or another toolkit at the same path, is a new input. Where no nvcc is
    found: why (the build then fails, and says so itself)."""
    try:
        location = find_nvcc(environ)
    except ArchguardError as exc:
        return {"nvcc": "none", "why": exc.message}
    proc = run([location.nvcc, "--version"], NvccUnusable, QUERY_TIMEOUT_S)
    printed = [line for line in proc.stdout.splitlines() if line.startswith(("Cuda", "Build"))]
    hashes = _HashCache(cache, "toolkits")
    home = Path(location.cuda_home)
    parts = {"nvcc": Path(location.nvcc), "ptxas": home / "bin" / "ptxas"}
    parts["cicc"] = home / "nvvm" / "bin" / "cicc"
    out = {"version": " | ".join(printed) or proc.stdout.strip()[:200]}
    for name, path in parts.items():
        real = path.resolve()
        out[name] = hashes.sha256(real) if real.is_file() else "absent"
    hashes.save()
    return out


HELD_PROBE = r"""
import importlib.metadata as m, json, re, sys
out = {"python": "%d.%d.%d" % sys.version_info[:3]}
try:
    dist = m.distribution("torch")
except m.PackageNotFoundError:
    out["torch"] = None
else:
    out["torch"] = dist.version
    try:
        text = dist.locate_file("torch/version.py").read_text()
        found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
        out["torch_version"] = found and found[1]
        found = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)", text, re.M)
        out["torch_cuda"] = found and found[1]
    except OSError:
        pass
print(json.dumps(out))
"""


def held(python: Path, wrap: Callable[[list[str]], list[str]] = list) -> dict[str, str | None]:
    """What the environment of ``python`` really holds: its Python's exact version, the torch
    distribution's version and ``torch.__version__`` (with its local label, ``+cu130``), and
    torch's CUDA; read from the installed files, without importing torch. ``wrap``: how the
    command runs (in the cell's container, where its environment was made)."""
    argv = wrap([str(python), "-c", HELD_PROBE])
    try:
        proc = run(argv, None, QUERY_TIMEOUT_S)
    except ToolFailed as exc:
        raise ToolError(str(exc), tool="python") from None
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ToolError(
            f"{python} could not say what its environment holds (exit {proc.returncode}): "
            f"{last_line(proc.stderr) or 'it printed nothing'}\n{proc.stderr.strip()[-300:]}",
            tool="python",
        ) from None
    return {k: (str(v) if v is not None else None) for k, v in data.items()}


def digest_of(data: object) -> str:
    """The sha256 of a JSON value, its keys sorted: every identity is this of its inputs."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
