"""Reading what binaries bind to (the facts :mod:`archguard.core.abi` judges): an extension's
torch symbols, Python API, CUDA runtime and glibc floor, from its ELF (no import, no GPU); a
torch build's exported symbols from an installed torch or a torch wheel, cached per build.

The Python API is abi3audit's verdict (the limited API's symbols per Python version, kept by
the people who keep the table); without abi3audit installed it is "unknown", said so.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import tempfile
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from archguard.core.abi import STABLE_PREFIXES, BinaryAbi, PythonApi, TorchExports
from archguard.core.cuda import CudaVersion
from archguard.core.platform import platform_of_elf
from archguard.detect.elf import Dynamic, exported_by, read_dynamic
from archguard.detect.torchlibs import parse_version_py
from archguard.errors import BinaryReadError

# A mangled name in torch's namespaces (at::, c10::, torch::, caffe2::), a vtable or typeinfo
# of one: what an extension imports from torch even where the torch at hand lacks it.
_TORCH_MANGLED = re.compile(r"^_Z(?:T[VIS])?N[rVKRO]*(?:2at|3c10|5torch|6caffe2)(?=\d|[A-Z_])")
# The C++ standard library's names (std::, __gnu_cxx::): torch's libraries export thousands
# of their template instances, as an extension's own instances are imported unversioned.
_STD_MANGLED = re.compile(r"^_Z(?:T[VIS])?N?[rVKRO]*(?:S[tabsiod]|9__gnu_cxx)")
_LIB = re.compile(r"^(?:.*/)?torch/lib/[^/]+\.so(?:\.\d+)*$")
CACHE_SCHEMA = "archguard.torch-exports/1"


def torch_imports(dynamic: Dynamic, exports: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The symbols a binary needs from torch: unversioned imports that ``exports`` (a
    torch build's) holds, or whose names are torch's (namespaces at::, c10::, torch::, and
    the stable shim's C names), so that one a newer torch dropped is still counted; never
    the C++ standard library's, which torch's libraries happen to export too."""
    out = {
        i.name
        for i in dynamic.imports
        if i.version is None
        and (
            (i.name in exports and not _STD_MANGLED.match(i.name))
            or _TORCH_MANGLED.match(i.name)
            or i.name.startswith(STABLE_PREFIXES)
        )
    }
    return tuple(sorted(out))


def python_api(data: bytes, name: str, dynamic: Dynamic) -> tuple[PythonApi, str | None, str]:
    """(kind, the lowest Python whose limited API covers it, how it was judged), by
    abi3audit; ``dynamic``: the binary's ELF facts, already read."""
    try:
        from abi3audit._audit import audit
        from abi3audit._extract import SharedObjectExtractor, SharedObjectSpec
        from abi3info.models import PyVersion
    except ImportError:
        return "unknown", None, "not judged: abi3audit is not installed (torch-archguard[farm])"
    with tempfile.TemporaryDirectory(prefix="archguard-abi-") as tmp:
        path = Path(tmp, PurePosixPath(name).name)
        path.write_bytes(data)
        try:
            (shared,) = list(SharedObjectExtractor(SharedObjectSpec(str(path))))
            result = audit(shared, assume_minimum_abi3=PyVersion(3, 9))
        except Exception as exc:  # abi3audit's own failures: said, never raised
            return "unknown", None, f"not judged: abi3audit could not read it ({exc})"
    unversioned = (i.name for i in dynamic.imports if i.version is None)
    if not any(s.startswith(("Py", "_Py")) for s in unversioned):
        return "none", None, "abi3audit: it calls no Python C API function"
    if result.is_abi3_baseline_compatible and not result.non_abi3_symbols:
        computed = str(result.computed) if result.computed else "3.9"
        return "limited", computed, f"abi3audit: only the limited API (Python {computed}+)"
    bad = sorted(getattr(s, "name", str(s)) for s in result.non_abi3_symbols)[:3]
    return "full", None, f"abi3audit: the full CPython API ({', '.join(bad)}, ...)"


def binary_abi(
    data: bytes,
    name: str,
    exports: frozenset[str] = frozenset(),
    target_version: str | None = None,
) -> BinaryAbi:
    """One extension binary's bindings (``data``: its bytes; ``name``: where it is)."""
    dynamic = read_dynamic(data, name)
    kind, floor, how = python_api(data, name, dynamic)
    return BinaryAbi(
        name,
        torch_imports(dynamic, exports),
        dynamic.needed,
        kind,
        floor,
        how,
        dynamic.highest("GLIBC_"),
        dynamic.highest("GLIBCXX_"),
        target_version,
        platform_of_elf(dynamic.machine),
    )


def weak_imports(data: bytes, name: str) -> frozenset[str]:
    return frozenset(i.name for i in read_dynamic(data, name).imports if i.weak)


def shared_objects(path: Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each ELF shared object in a wheel, or the file itself."""
    if path.suffix == ".whl":
        try:
            with zipfile.ZipFile(path) as zf:
                for member in zf.namelist():
                    if member.endswith(".so") or ".so." in PurePosixPath(member).name:
                        yield f"{path.name}!{member}", zf.read(member)
        except (OSError, zipfile.BadZipFile) as exc:
            raise BinaryReadError(
                f"{path} is not a readable wheel ({exc}); give a .whl or an extension .so."
            ) from None
        return
    try:
        yield str(path), path.read_bytes()
    except OSError as exc:
        raise BinaryReadError(f"{path} cannot be read: {exc.strerror or exc}.") from None


# --- a torch build's exports -----------------------------------------------------------


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base, "archguard", "torch-exports")


def torch_exports(path: Path, cache: Path | None = None, *, persist: bool = True) -> TorchExports:
    """An installed torch (its directory or the site-packages holding it) or a torch wheel,
    read without importing or installing it; cached per build in ``cache`` (default
    :func:`cache_dir`), keyed by each library's path, size and time. ``persist=False``: the
    cache is read but never written (a build writes nothing outside its tree)."""
    if not path.exists():
        raise BinaryReadError(f"{path} does not exist; give an installed torch or a torch wheel.")
    folder = (cache or cache_dir()) if persist else None
    read_from = cache or cache_dir()
    if path.is_dir():
        return _directory_exports(path, (read_from, folder))
    return _wheel_exports(path, (read_from, folder))


def _directory_exports(path: Path, cache: tuple[Path, Path | None]) -> TorchExports:
    root = path / "torch" if (path / "torch" / "version.py").is_file() else path
    if not (root / "version.py").is_file() or not (root / "lib").is_dir():
        raise BinaryReadError(
            f"{path} is not a torch package directory (no version.py and lib/); give the "
            "torch directory in site-packages, or a torch wheel."
        )
    libs = sorted(p for p in (root / "lib").iterdir() if _LIB.match(f"torch/lib/{p.name}"))
    version, cuda = parse_version_py((root / "version.py").read_text(), str(root))
    build = _Build(
        _key([(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in libs]),
        version,
        cuda,
        f"installed torch {version} at {root}",
    )
    return build.exports(cache, ((p.name, p.read_bytes()) for p in libs))


def _wheel_exports(path: Path, cache: tuple[Path, Path | None]) -> TorchExports:
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise BinaryReadError(
            f"{path} is neither a torch directory nor a readable wheel ({exc})."
        ) from None
    with zf:
        names = zf.namelist()
        if "torch/version.py" not in names:
            raise BinaryReadError(f"{path.name} holds no torch/version.py: not a torch wheel.")
        version, cuda = parse_version_py(zf.read("torch/version.py").decode(), path.name)
        stat = path.stat()
        key = _key([(str(path.resolve()), stat.st_size, stat.st_mtime_ns)])
        build = _Build(key, version, cuda, f"torch wheel {path.name}")
        libs = sorted(n for n in names if _LIB.match(n))
        return build.exports(cache, ((n, zf.read(n)) for n in libs))


def _key(parts: Iterable[tuple[str, int, int]]) -> str:
    return hashlib.sha256(json.dumps(sorted(parts)).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class _Build:
    """A torch build being read: its cache key, version, CUDA and where it is."""

    key: str
    version: str
    cuda: CudaVersion | None
    where: str

    def exports(
        self, cache: tuple[Path, Path | None], libraries: Iterable[tuple[str, bytes]]
    ) -> TorchExports:
        """From the cache (``cache``: where to read, where to write or None), else read from
        ``libraries`` (name, bytes) and cached."""
        file = cache[0] / f"{self.key}.json.gz"
        try:
            data = json.loads(gzip.decompress(file.read_bytes()))
            if data.get("schema") == CACHE_SCHEMA:
                return TorchExports(self.version, self.cuda, self.where, frozenset(data["symbols"]))
        except (OSError, ValueError, KeyError, TypeError, EOFError, AttributeError, zlib.error):
            pass  # no cache, or a broken one: read the libraries again
        symbols = exported_by(read_dynamic(data, name) for name, data in libraries)
        if not symbols:
            raise BinaryReadError(f"{self.where} exports no symbols from torch/lib: is this torch?")
        if cache[1] is None:
            return TorchExports(self.version, self.cuda, self.where, symbols)
        file = cache[1] / f"{self.key}.json.gz"
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            partial = file.with_suffix(f".{os.getpid()}.partial")
            payload = {"schema": CACHE_SCHEMA, "where": self.where, "symbols": sorted(symbols)}
            partial.write_bytes(gzip.compress(json.dumps(payload).encode()))
            partial.replace(file)
        except OSError:
            pass  # a read-only cache: read again next time
        return TorchExports(self.version, self.cuda, self.where, symbols)
