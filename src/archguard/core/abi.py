"""What an extension binary binds to, and what follows from it (SPEC section 7), as pure
rules over facts read elsewhere (:mod:`archguard.detect.abi`):

- its torch ABI: the C++ symbols it imports from torch, or only torch's stable C ABI (the
  ``aoti_torch_*`` / ``torch_*`` shim that ``STABLE_TORCH_LIBRARY`` and ``torch/csrc/stable``
  call), with the ``TORCH_TARGET_VERSION`` it was compiled for;
- its Python API (full, or the limited API of abi3), its CUDA runtime, its glibc floor;
- against a torch build's exported symbols: the ones it needs that are missing ("will not
  import: undefined symbol ..."). A missing symbol proves a failure; none missing does not
  prove C++ ABI compatibility across torch minors (layouts, inline code), so only stable-ABI
  binaries are treated as forward compatible;
- the cell label and torch pin of a wheel: a C++-ABI wheel ``+cu130torch2.13`` pinned
  ``torch>=2.13,<2.14``; a stable-ABI wheel ``+cu130`` pinned ``torch>=`` its target.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from packaging.version import Version

from archguard.core.cuda import CudaVersion

# The stable C ABI's exported names (torch 2.13's libtorch: 504 aoti_torch_*, 57 torch_*)
STABLE_PREFIXES = ("aoti_torch_", "torch_")
# Libraries of torch itself and of the CUDA runtime: never grafted into a wheel
TORCH_LIBRARIES = re.compile(r"^(libtorch\w*|libc10\w*|libshm)\.so")
CUDA_RUNTIME = re.compile(r"^libcudart\.so\.(\d+)")

PythonApi = Literal["limited", "full", "none", "unknown"]


@dataclass(frozen=True)
class BinaryAbi:
    """One extension binary's bindings."""

    file: str
    torch_symbols: tuple[str, ...]  # mangled C++ names, or the stable shim's C names
    needed: tuple[str, ...]
    python_api: PythonApi
    python_floor: str | None = None  # the lowest Python whose limited API covers it: "3.10"
    python_note: str = ""  # how the Python API was judged, or why it could not be
    glibc: str | None = None  # "GLIBC_2.28"
    glibcxx: str | None = None  # "GLIBCXX_3.4.22"
    target_version: str | None = None  # TORCH_TARGET_VERSION, from the build's defines
    platform: str | None = None  # the machine its ELF is for: x86_64, aarch64 (None: other)

    @property
    def links_torch(self) -> bool:
        return bool(self.torch_symbols) or any(TORCH_LIBRARIES.match(n) for n in self.needed)

    @property
    def stable_only(self) -> bool:
        """Every torch symbol it needs is a C name of the stable shim (and it needs some)."""
        return bool(self.torch_symbols) and all(
            not s.startswith("_Z") and s.startswith(STABLE_PREFIXES) for s in self.torch_symbols
        )

    @property
    def cuda_runtime(self) -> str | None:
        """The CUDA runtime it links, ``libcudart.so.13`` (None: none)."""
        return next((n for n in self.needed if CUDA_RUNTIME.match(n)), None)

    @property
    def cuda_major(self) -> int | None:
        runtime = self.cuda_runtime
        match = CUDA_RUNTIME.match(runtime) if runtime else None
        return int(match[1]) if match else None

    @property
    def kind(self) -> Literal["stable", "c++", "none"]:
        """Which torch ABI it binds to: the stable C ABI, torch's C++ ABI, or none."""
        if self.stable_only:
            return "stable"
        return "c++" if self.links_torch else "none"


@dataclass(frozen=True)
class TorchExports:
    """A torch build's exported dynamic symbols (its ``lib/*.so``), and what it is."""

    version: str  # "2.14.1+cu130"
    cuda: CudaVersion | None
    where: str
    symbols: frozenset[str] = field(repr=False)

    @property
    def label(self) -> str:
        return f"torch {self.version}"


@dataclass(frozen=True)
class Verdict:
    """One binary against one torch build."""

    binary: BinaryAbi
    torch: TorchExports
    missing: tuple[str, ...]  # needed (non-weak) torch symbols the build does not export

    @property
    def imports(self) -> bool:
        return not self.missing


def check(binary: BinaryAbi, torch: TorchExports, weak: Iterable[str] = ()) -> Verdict:
    """Resolve the binary's torch symbols against a torch build; ``weak`` names those whose
    absence the dynamic loader tolerates."""
    tolerated = set(weak)
    missing = tuple(
        s for s in binary.torch_symbols if s not in torch.symbols and s not in tolerated
    )
    return Verdict(binary, torch, missing)


def minor(version: str | Version) -> tuple[int, int]:
    v = Version(str(version))
    return v.major, v.minor


def target_from_define(value: str) -> str | None:
    """``TORCH_TARGET_VERSION`` (``0x020a000000000000``: major << 56 | minor << 48) as
    ``2.10``; None when it is not such a number."""
    try:
        number = int(value.strip().rstrip("ULul"), 0)
    except ValueError:
        return None
    major, minor_ = number >> 56, (number >> 48) & 0xFF
    return f"{major}.{minor_}" if major else None


@dataclass(frozen=True)
class CellLabel:
    """A wheel's local version label and torch requirement for its cell."""

    label: str  # "cu130torch2.13" / "cu130"
    pin: str  # "torch>=2.13,<2.14" / "torch>=2.10"
    why: str
    stable: bool = False  # every extension uses only torch's stable C ABI
    floor: str = ""  # stable: the lowest torch it loads on, X.Y


@dataclass(frozen=True)
class Serves:
    """What a stable-ABI, limited-API wheel serves beyond its cell: every torch from
    ``torch`` (X.Y) and every Python from 3.``python``, of its CUDA major."""

    torch: str
    python: int  # 3.X's X

    def __str__(self) -> str:
        return f"torch>={self.torch} on Python>=3.{self.python}"

    def as_json(self) -> dict[str, str]:
        return {"torch": self.torch, "python": f"3.{self.python}"}

    @classmethod
    def from_json(cls, data: object) -> Serves | None:
        """From :meth:`as_json`'s value (None: not one)."""
        if not isinstance(data, dict):
            return None
        torch, python = data.get("torch"), str(data.get("python", ""))
        if not isinstance(torch, str) or not re.fullmatch(r"3\.\d+", python):
            return None
        return cls(torch, int(python.split(".")[1]))


def serves(label: CellLabel, binaries: Sequence[BinaryAbi], wheel_tags: str) -> Serves | None:
    """What one stable-ABI, limited-API wheel serves (None: it serves its own cell only):
    ``torch>=2.10 on Python>=3.10``, so that a farm's other cells of that CUDA major need no
    build. ``wheel_tags``: the wheel's python-abi tags (``cp310-abi3``)."""
    python, _, abi_tag = wheel_tags.partition("-")
    match = re.fullmatch(r"cp3(\d+)", python)
    limited = all(b.python_api in ("limited", "none") for b in binaries if b.links_torch)
    if not label.stable or abi_tag != "abi3" or not match or not limited:
        return None
    return Serves(label.floor, int(match[1]))


def cell_label(
    binaries: Sequence[BinaryAbi], cuda: CudaVersion, torch_version: str
) -> CellLabel | None:
    """The label and pin the wheel's binaries call for (None: it holds no binary). A wheel
    none of whose binaries links torch is labelled for its CUDA only, with no torch pin."""
    if not binaries:
        return None
    linked = [b for b in binaries if b.links_torch]
    if not linked:
        return CellLabel(
            cuda.tag,
            "",
            f"no extension links torch: labelled for CUDA {cuda.text}, which compiled it",
        )
    major, minor_ = minor(torch_version)
    if all(b.stable_only for b in linked):
        targets = [b.target_version for b in linked if b.target_version]
        floor = max(targets, key=minor) if targets else f"{major}.{minor_}"
        return CellLabel(
            cuda.tag,
            f"torch>={floor}",
            f"every extension uses only torch's stable C ABI (target {floor}): it loads on "
            f"torch {floor} and later built for CUDA {cuda.major}",
            stable=True,
            floor=floor,
        )
    cxx = [b.file for b in linked if not b.stable_only]
    return CellLabel(
        f"{cuda.tag}torch{major}.{minor_}",
        f"torch>={major}.{minor_},<{major}.{minor_ + 1}",
        f"{', '.join(cxx)} call{'s' if len(cxx) == 1 else ''} into torch's C++ ABI, which "
        f"changes between minor releases: built against torch {torch_version}",
    )


def describe(binary: BinaryAbi) -> str:
    """One line: what the binary binds to."""
    if binary.kind == "stable":
        torch = (
            f"torch's stable C ABI only ({len(binary.torch_symbols)} shim functions, "
            f"target {binary.target_version or 'not recorded'})"
        )
    elif binary.kind == "c++":
        count = len(binary.torch_symbols)
        torch = f"torch's C++ ABI ({count} torch symbol{'s' if count != 1 else ''})"
    else:
        torch = "no torch symbol"
    python = {
        "limited": f"the limited Python API ({binary.python_floor}+, abi3)",
        "full": "the full CPython API",
        "none": "no Python C API",
        "unknown": "Python API not judged (abi3audit is not installed)",
    }[binary.python_api]
    parts = [torch, python, binary.cuda_runtime or "no CUDA runtime"]
    if binary.platform and binary.platform != "x86_64":  # x86_64's lines stay as they were
        parts.insert(0, f"{binary.platform} code")
    parts += [v for v in (binary.glibc, binary.glibcxx) if v]
    return ", ".join(parts)
