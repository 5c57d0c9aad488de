"""What a torch wheel (or an installed torch) really ships: the cubins and PTX inside its
CUDA libraries, read with cuobjdump, without installing or importing torch.

Each CUDA library holds one image per kernel file and target. The arch list torch was
built for (``TORCH_CUDA_ARCH_LIST``) is in every kernel file of ``libtorch_cuda.so``, torch's
kernel library; a few kernels add their own targets (``sm_90a``/``sm_100a`` CUTLASS
kernels, an ``sm_103f`` build of some). So the targets torch *runs with* are those every
kernel file of ``libtorch_cuda.so`` carries (the most frequent count); the rest, and other
libraries whose lists differ (torch 2.13's ``libtorch_cuda_linalg.so`` has no ``sm_75``),
are listed as notes with their counts, for a reviewer.
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import cast

from archguard.core.arch import Arch, Targets
from archguard.core.cuda import CudaVersion
from archguard.core.platform import DEFAULT_PLATFORM, Platform, platform_of_elf, platform_of_tag
from archguard.core.snapshot import Probed
from archguard.core.wheelfile import InvalidWheelFilename, parse_wheel_name
from archguard.detect.cuobjdump import read_entries
from archguard.detect.elf import elf_machine
from archguard.detect.sources import file_sha256
from archguard.errors import BinaryReadError, TorchNotCuda

_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)
_CUDA = re.compile(r"""^cuda\s*(?::[^=]*)?=\s*['"]([0-9.]+)['"]""", re.M)
_LIB = re.compile(r"^torch/lib/[^/]+\.so(\.[0-9.]+)?$")


@dataclass(frozen=True)
class Library:
    """The images one CUDA library holds, counted by (kind, arch)."""

    name: str
    counts: Counter[tuple[str, Arch]]

    @property
    def kernel_files(self) -> int:
        """How many kernel files the library holds: the most frequent cubin count."""
        return max((n for (k, _), n in self.counts.items() if k == "elf"), default=0)

    @property
    def main(self) -> Targets:
        """The targets every kernel file carries."""
        full = self.kernel_files
        cubins = frozenset(a for (k, a), n in self.counts.items() if k == "elf" and n == full)
        ptx = frozenset(a for (k, a), n in self.counts.items() if k == "ptx" and n == full)
        return Targets(cubins, ptx)

    def extras(self) -> list[str]:
        """Targets only some kernel files carry: ``sm_103 (59 of 449)``."""
        main = self.main
        out = []
        for (kind, arch), n in sorted(self.counts.items(), key=lambda x: (x[0][0], x[0][1])):
            name = arch.sm if kind == "elf" else arch.compute
            if (kind == "elf" and arch not in main.cubins) or (
                kind == "ptx" and arch not in main.ptx
            ):
                out.append(f"{name} ({n} of {self.kernel_files})")
        return out


@dataclass(frozen=True)
class TorchProbe:
    """A torch build as its binaries show it."""

    version: str
    cuda: CudaVersion | None
    libraries: tuple[Library, ...]
    provenance: str
    platform: Platform = DEFAULT_PLATFORM

    @property
    def primary(self) -> Library | None:
        """``libtorch_cuda.so`` (else the library with the most kernel files)."""
        libs = [lib for lib in self.libraries if lib.kernel_files]
        named = [lib for lib in libs if lib.name.startswith("libtorch_cuda.so")]
        ranked = named or sorted(libs, key=lambda lib: -lib.kernel_files)
        return ranked[0] if ranked else None

    @property
    def targets(self) -> Targets:
        """What every kernel file of torch's kernel library carries."""
        primary = self.primary
        return primary.main if primary else Targets(frozenset(), frozenset())

    def notes(self) -> list[str]:
        """Targets only some kernel files carry, and libraries whose lists differ."""
        out = []
        for lib in self.libraries:
            if not lib.kernel_files:
                continue
            if lib is not self.primary and lib.main != self.targets:
                out.append(
                    f"{lib.name} ({lib.kernel_files} kernel files) carries {lib.main}, "
                    f"not {self.targets}"
                )
            out += [f"{lib.name}: {e}" for e in lib.extras()]
        return out

    def probed(self) -> Probed:
        """The facts for the pure core (:mod:`archguard.core.snapshot`)."""
        if self.cuda is None or not any(lib.kernel_files for lib in self.libraries):
            raise TorchNotCuda(
                f"{self.provenance}: torch {self.version} is not a CUDA build (torch/version.py "
                "has no cuda version, or no library holds device code): it ships no cubins."
            )
        return Probed(
            self.version,
            self.cuda,
            self.targets,
            self.provenance,
            tuple(self.notes()),
            self.platform,
        )


def parse_version_py(text: str, where: str) -> tuple[str, CudaVersion | None]:
    """torch/version.py's ``__version__`` and ``cuda`` (None for a CPU build)."""
    version = _VERSION.search(text)
    if not version:
        raise BinaryReadError(f"{where} names no torch __version__; is this torch?")
    cuda = _CUDA.search(text)
    return version[1], CudaVersion.parse(cuda[1], where) if cuda else None


def _libraries(files: Iterator[tuple[str, Path]], cuobjdump: str) -> tuple[Library, ...]:
    out = []
    for name, path in files:
        entries = read_entries(path, cuobjdump)
        if entries:
            out.append(Library(name, Counter(entries)))
    return tuple(out)


def wheel_platform(wheel: Path) -> Platform:
    """A torch wheel's platform, from its file name's platform tag (one reader of wheel
    names: :func:`archguard.core.wheelfile.parse_wheel_name`)."""
    try:
        tags = parse_wheel_name(wheel.name).tags
    except InvalidWheelFilename as exc:
        raise BinaryReadError(f"{wheel.name} is not a wheel's file name ({exc}).") from None
    found = {platform_of_tag(t.platform) for t in tags} - {None}
    if len(found) != 1:
        raise BinaryReadError(
            f"{wheel.name}: its platform tag names no Linux machine torch ships CUDA for "
            f"(x86_64 or aarch64); archguard probes Linux torch wheels."
        )
    return cast(Platform, found.pop())


def library_platform(library: Path) -> Platform:
    """An installed torch's platform: its kernel library's ELF machine."""
    machine = elf_machine(library)
    platform = platform_of_elf(machine)
    if platform is None:
        raise BinaryReadError(
            f"{library} is built for {machine}, no machine torch ships CUDA for (x86_64, aarch64)."
        )
    return platform


def probe_wheel(wheel: Path, cuobjdump: str) -> TorchProbe:
    platform = wheel_platform(wheel)
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise BinaryReadError(f"{wheel} is not a readable wheel: {exc}") from None
    with zf, tempfile.TemporaryDirectory(prefix="archguard-probe-") as tmp:
        names = zf.namelist()
        if "torch/version.py" not in names:
            raise BinaryReadError(f"{wheel.name} holds no torch/version.py: not a torch wheel.")
        version, cuda = parse_version_py(zf.read("torch/version.py").decode(), wheel.name)

        def extracted() -> Iterator[tuple[str, Path]]:
            for name in sorted(n for n in names if _LIB.match(n)):
                target = Path(tmp, PurePosixPath(name).name)
                with zf.open(name) as src, target.open("wb") as dst:
                    while block := src.read(1 << 20):
                        dst.write(block)
                yield PurePosixPath(name).name, target
                target.unlink()

        libraries = _libraries(extracted(), cuobjdump)
    provenance = f"{wheel.name} (sha256 {file_sha256(wheel)})"
    return TorchProbe(version, cuda, libraries, provenance, platform)


def probe_directory(path: Path, cuobjdump: str) -> TorchProbe:
    """An installed torch: its package directory, or the site-packages holding it."""
    root = path / "torch" if (path / "torch" / "version.py").is_file() else path
    if not (root / "version.py").is_file() or not (root / "lib").is_dir():
        raise BinaryReadError(
            f"{path} is not a torch package directory (no version.py and lib/); give the "
            "torch directory in site-packages, or a torch wheel."
        )
    version, cuda = parse_version_py((root / "version.py").read_text(), str(root / "version.py"))
    libs = sorted(p for p in (root / "lib").iterdir() if _LIB.match(f"torch/lib/{p.name}"))
    libraries = _libraries(((p.name, p) for p in libs), cuobjdump)
    main = root / "lib" / "libtorch_cuda.so"
    digest = f", libtorch_cuda.so sha256 {file_sha256(main)}" if main.is_file() else ""
    platform = library_platform(main if main.is_file() else root / "lib" / "libc10.so")
    return TorchProbe(
        version, cuda, libraries, f"installed torch {version} at {root}{digest}", platform
    )


def probe(path: Path, cuobjdump: str) -> TorchProbe:
    if not path.exists():
        raise BinaryReadError(f"{path} does not exist.")
    if path.is_dir():
        return probe_directory(path, cuobjdump)
    return probe_wheel(path, cuobjdump)
