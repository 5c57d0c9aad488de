"""The CUDA library headers and link names a torch extension needs, where the compiling
toolkit lacks them and the installed torch's NVIDIA wheels have them.

torch's ``ATen/cuda/CUDAContextLight.h`` (torch 2.13.0, included by ``ATen/cuda/CUDAContext.h``,
which most real extensions include) includes ``cusparse.h``, ``cublas_v2.h``, ``cublasLt.h``
and ``cusolverDn.h``. An nvcc-only toolkit (a container with just the compiler, or one
assembled from NVIDIA's nvcc wheels) has none of them; torch's own NVIDIA dependencies ship
them, under ``site-packages/nvidia/cu13/include`` for CUDA 13 builds of torch and
``site-packages/nvidia/<library>/include`` for CUDA 12 ones. Their libraries carry versioned
names only (``libcufft.so.12``), so ``-lcufft`` finds nothing until a link name
``libcufft.so`` points at one.

Read-only: :func:`completion` says what is missing and where it is; the build edge makes it
available to that build alone (``CPATH``, a library directory in the build's temporary tree).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# ATen/cuda/CUDAContextLight.h, torch 2.13.0 (its unconditional CUDA library includes).
TORCH_HEADERS = ("cusparse.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h")
# Libraries of the CUDA toolkit a package may link by name (-lcufft, libraries=["cublas"]).
CUDA_LIBRARIES = frozenset(
    (
        "cublas",
        "cublasLt",
        "cudart",
        "cufft",
        "cufftw",
        "curand",
        "cusolver",
        "cusparse",
        "nvJitLink",
        "nvrtc",
        "cupti",
        "nvToolsExt",
        "cuda",
    )
)
_LINK = re.compile(r"^-l(?P<name>[A-Za-z0-9_+.-]+)$")


@dataclass(frozen=True)
class Completion:
    """What the toolkit lacks for this build, and what fills it."""

    cuda_home: str
    include_dirs: tuple[str, ...] = ()  # torch's NVIDIA include directories to add
    headers: tuple[str, ...] = ()  # the headers they provide that the toolkit lacks
    links: dict[str, str] = field(default_factory=dict)  # lib name -> versioned file
    missing_headers: tuple[str, ...] = ()  # in neither
    missing_libraries: tuple[str, ...] = ()  # in neither

    @property
    def needed(self) -> bool:
        return bool(self.include_dirs or self.links)

    def record(self) -> dict[str, object]:
        return {
            "cuda_home": self.cuda_home,
            "include_dirs": list(self.include_dirs),
            "headers": list(self.headers),
            "links": dict(self.links),
            "missing_headers": list(self.missing_headers),
            "missing_libraries": list(self.missing_libraries),
        }


def linked_libraries(libraries: Iterable[str], link_args: Iterable[str]) -> list[str]:
    """The library names an extension links: ``libraries=[...]`` and ``-lNAME`` flags."""
    names = list(libraries)
    for arg in link_args:
        match = _LINK.match(str(arg))
        if match:
            names.append(match["name"])
    return list(dict.fromkeys(names))


def nvidia_roots() -> list[Path]:
    """The ``site-packages/nvidia`` directories of this interpreter (a namespace package
    that torch's NVIDIA wheels install into); nothing is imported."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(p) for p in spec.submodule_search_locations if Path(p).is_dir()]


def _wheel_dirs(roots: Sequence[Path], major: int, leaf: str) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        own = root / f"cu{major}" / leaf
        if own.is_dir():
            out.append(own)
        out += sorted(p for p in root.glob(f"*/{leaf}") if p.is_dir() and p not in out)
    return out


def _toolkit_dirs(cuda_home: Path, leaves: Sequence[str]) -> list[Path]:
    out = [cuda_home / leaf for leaf in leaves]
    out += [cuda_home / "targets" / "x86_64-linux" / leaf for leaf in leaves]
    return [d for d in out if d.is_dir()]


def _versioned(dirs: Sequence[Path], name: str) -> Path | None:
    for d in dirs:
        found = sorted(d.glob(f"lib{name}.so.*"), key=lambda p: (len(p.name), p.name))
        if found:
            return found[0]
    return None


def completion(
    cuda_home: str,
    major: int,
    libraries: Iterable[str] = (),
    roots: Sequence[Path] | None = None,
    headers: Sequence[str] = TORCH_HEADERS,
) -> Completion:
    """What ``cuda_home`` lacks of ``headers`` and of the CUDA ``libraries`` linked by name,
    and where torch's NVIDIA wheels (``roots``, default: this interpreter's) have it."""
    home = Path(cuda_home)
    roots = nvidia_roots() if roots is None else list(roots)
    includes = _toolkit_dirs(home, ("include",))
    lacking = [h for h in headers if not any((d / h).is_file() for d in includes)]
    wheel_includes = _wheel_dirs(roots, major, "include")
    add: list[str] = []
    provided: list[str] = []
    missing: list[str] = []
    for header in lacking:
        where = next((d for d in wheel_includes if (d / header).is_file()), None)
        if where is None:
            missing.append(header)
            continue
        provided.append(header)
        if str(where) not in add:
            add.append(str(where))
    lib_dirs = _toolkit_dirs(home, ("lib64", "lib"))
    wheel_libs = _wheel_dirs(roots, major, "lib")
    links: dict[str, str] = {}
    missing_libs: list[str] = []
    for name in libraries:
        if name not in CUDA_LIBRARIES:
            continue
        if any((d / f"lib{name}.so").exists() or (d / f"lib{name}.a").exists() for d in lib_dirs):
            continue
        versioned = _versioned(wheel_libs, name)
        if versioned is None:
            missing_libs.append(name)
        else:
            links[name] = str(versioned)
    return Completion(
        cuda_home, tuple(add), tuple(provided), links, tuple(missing), tuple(missing_libs)
    )


def make_header_dir(completion: Completion, directory: Path) -> Path:
    """A directory of links to every header (and header directory) of torch's NVIDIA
    include directories that the toolkit lacks: on CPATH it adds what is missing and
    never shadows a header of the toolkit itself (whose version may differ)."""
    directory.mkdir(parents=True, exist_ok=True)
    home = Path(completion.cuda_home)
    toolkit = _toolkit_dirs(home, ("include",))
    for source in completion.include_dirs:
        for entry in sorted(Path(source).iterdir()):
            if any((d / entry.name).exists() for d in toolkit):
                continue
            link = directory / entry.name
            if link.is_symlink() or link.exists():
                continue  # an earlier directory provided it
            link.symlink_to(entry)
    return directory


def make_links(completion: Completion, directory: Path) -> Path:
    """A directory of link names (``libcufft.so`` -> the wheel's ``libcufft.so.12``)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, target in completion.links.items():
        link = directory / f"lib{name}.so"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    return directory
