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
:func:`assemble_root` makes one toolkit root for every build system, in archguard's cache; where
neither the toolkit nor the wheels have the driver API's link-time stub, it is generated there
from the root's ``cuda.h`` (:mod:`archguard.detect.driver_stub`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from archguard._fs import atomic_directory
from archguard.detect.cachestore import mark_used
from archguard.detect.driver_stub import c_compiler, make_driver_stub

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


_WHOSE = {"toolkit": "the toolkit's", "wheels": "the wheels'"}


@dataclass(frozen=True)
class GeneratedStub:
    """The root's ``lib64/stubs/libcuda.so`` where archguard made it from the root's
    ``cuda.h`` (neither the toolkit nor the wheels have one), or why it could not."""

    header: str  # the cuda.h read, its real path
    header_of: str  # whose it is: "toolkit" or "wheels"
    made: bool
    said: str  # what was made (how many functions, which compiler), or why nothing was

    def line(self) -> str:
        """The build log's clause for it."""
        if self.made:
            return f"lib64/stubs/libcuda.so generated from {self.header}: {self.said}"
        return f"lib64/stubs/libcuda.so not generated from {self.header}: {self.said}"

    def record(self) -> dict[str, object]:
        """Path-free (the header as the root's ``include/cuda.h`` and whose it is)."""
        return {
            "generated": self.made,
            "from": f"include/cuda.h ({_WHOSE[self.header_of]})",
            "said": self.said,
        }


@dataclass(frozen=True)
class ToolkitRoot:
    """One CUDA toolkit directory for every build system: the toolkit's own files, and
    what torch's NVIDIA wheels add, linked under the names CMake and nvcc look for."""

    root: Path
    cuda_home: str  # the toolkit it completes
    headers: tuple[str, ...]  # include entries from the wheels
    # lib64 entries it adds: the wheels' (link names included), and stubs where generated
    libraries: tuple[str, ...]
    stub: GeneratedStub | None = None  # where lib64/stubs was to be generated

    @property
    def nvcc(self) -> Path:
        return self.root / "bin" / "nvcc"

    def record(self) -> dict[str, object]:
        return {
            "root": str(self.root),
            "completes": self.cuda_home,
            "headers_from_wheels": list(self.headers),
            "libraries_from_wheels": list(self.libraries),
            "driver_stub": self.stub.record() if self.stub else None,
        }


def _entries(dirs: Sequence[Path]) -> dict[str, Path]:
    """Each name in ``dirs`` (the first directory holding it wins) and its real path."""
    out: dict[str, Path] = {}
    for d in dirs:
        for entry in sorted(d.iterdir()):
            out.setdefault(entry.name, entry.resolve())
    return out


def root_plan(
    cuda_home: str, major: int, roots: Sequence[Path] | None = None
) -> tuple[dict[str, Path], dict[str, Path], dict[str, Path], dict[str, Path]]:
    """What an assembled root holds: the toolkit's include and library entries, and the
    wheels' entries that the toolkit lacks (each library also under its link name)."""
    home = Path(cuda_home)
    roots = nvidia_roots() if roots is None else list(roots)
    own_include = _entries(_toolkit_dirs(home, ("include",)))
    own_lib = _entries(_toolkit_dirs(home, ("lib64", "lib")))
    add_include = {
        name: path
        for name, path in _entries(_wheel_dirs(roots, major, "include")).items()
        if name not in own_include
    }
    add_lib: dict[str, Path] = {}
    for name, path in _entries(_wheel_dirs(roots, major, "lib")).items():
        if name in own_lib or not path.is_file():
            continue
        add_lib[name] = path
        match = re.match(r"^(lib[A-Za-z0-9_+-]+)\.so\.[0-9.]+$", name)
        link = f"{match[1]}.so" if match else None
        if link and link not in own_lib and link not in add_lib:
            add_lib[link] = path
    stubs = None if STUBS in own_lib else driver_stubs(roots, major)
    if stubs is not None:  # lib64/stubs/libcuda.so, as a full toolkit has it
        add_lib[STUBS] = stubs
    return own_include, own_lib, add_include, add_lib


STUBS = "stubs"  # lib64/stubs: the driver API's link-time stub (libcuda.so), in a full toolkit


def driver_stubs(roots: Sequence[Path], major: int) -> Path | None:
    """A ``lib/stubs`` directory of torch's NVIDIA wheels that holds the driver stub
    ``libcuda.so`` (what ``-lcuda`` and CMake's ``CUDA::cuda_driver`` link against where no
    driver is installed), or None. (NVIDIA's 13.0 wheels checked, ``nvidia-cuda-runtime``
    13.0.96 and ``nvidia-cuda-nvcc`` 13.0.88, ship none.)"""
    for lib in _wheel_dirs(roots, major, "lib"):
        if (lib / STUBS / "libcuda.so").exists():
            return (lib / STUBS).resolve()
    return None


def stub_header(
    own_include: dict[str, Path],
    own_lib: dict[str, Path],
    add_include: dict[str, Path],
    add_lib: dict[str, Path],
) -> tuple[Path, str] | None:
    """The ``cuda.h`` a root's driver stub is generated from, and whose it is (``toolkit``
    or ``wheels``), where neither the toolkit (``lib64/stubs`` or ``lib/stubs``) nor the
    wheels have the stub; None where one of them has it, or the root has no ``cuda.h``."""
    if STUBS in own_lib or STUBS in add_lib:
        return None
    if "cuda.h" in own_include:
        return own_include["cuda.h"], "toolkit"
    if "cuda.h" in add_include:
        return add_include["cuda.h"], "wheels"
    return None


STUB_NOTE = ".archguard-stub"  # in a root: what was generated in lib64/stubs, or why not


def assemble_root(
    cuda_home: str, major: int, parent: Path, roots: Sequence[Path] | None = None
) -> ToolkitRoot | None:
    """Make one toolkit root under ``parent`` (None when the wheels add nothing the toolkit
    lacks): ``bin/`` links to the toolkit's programs (nvcc takes its paths from the
    directory it is run from, ``nvcc.profile``'s ``_HERE_``), ``nvvm`` its device
    libraries, ``include/`` and ``lib64/`` (``lib`` and ``targets/<arch>/`` pointing at
    them) links to the toolkit's entries and then to the wheels' entries it lacks, and
    ``lib64/stubs/libcuda.so`` generated from its ``cuda.h`` where neither has the driver
    stub (:func:`stub_header`; a failed compile leaves the root without, and says why).
    Never shadows a file of the toolkit. Made complete or not at all."""
    own_include, own_lib, add_include, add_lib = root_plan(cuda_home, major, roots)
    if not add_include and not add_lib:
        return None
    home = Path(cuda_home)
    # named by what it links to: the same toolkit and wheels give the same root, kept
    digest = hashlib.sha256(str(home.resolve()).encode())
    for name, path in sorted({**own_include, **own_lib, **add_include, **add_lib}.items()):
        digest.update(f"\0{name}\0{path}".encode())
    header = stub_header(own_include, own_lib, add_include, add_lib)
    if header is not None:  # and by the stub's making: with a compiler or without (none made)
        compiler = " ".join(c_compiler() or ["none"])
        digest.update(f"\0{STUBS}\0generated from {header[0]}\0with {compiler}".encode())
    directory = parent / f"cuda-{major}-{digest.hexdigest()[:16]}"
    mark_used(directory)  # held before it is looked at: no prune removes it from here on
    if not (directory / ".archguard-complete").is_file():
        linked = {
            "bin": _entries([home / "bin"]),
            "include": {**own_include, **add_include},
            "lib64": {**own_lib, **add_lib},
        }
        # made by one build at a time (the next waits, then finds it), renamed into place whole
        with atomic_directory(directory) as partial:
            if partial is not None:
                _fill_root(partial, home, linked)
                if header is not None:
                    _generate_stub(partial, header[0])
                (partial / ".archguard-complete").write_text(f"completes {cuda_home}\n")
    stub = None if header is None else _stub_of(directory, *header)
    added = sorted([*add_lib, *([STUBS] if stub and stub.made else [])])
    return ToolkitRoot(directory, cuda_home, tuple(sorted(add_include)), tuple(added), stub)


def _generate_stub(partial: Path, header: Path) -> None:
    """``lib64/stubs/libcuda.so`` in a root being made, from ``header``; what was made, or
    why nothing was, in the root's :data:`STUB_NOTE`."""
    stubs = partial / "lib64" / STUBS
    made = make_driver_stub(header, stubs)
    if made.library is None:
        with contextlib.suppress(OSError):
            stubs.rmdir()  # an empty stubs directory would promise a stub
    said = made.said if made.library is not None else made.reason
    (partial / STUB_NOTE).write_text(said + "\n", encoding="utf-8")


def _stub_of(directory: Path, header: Path, header_of: str) -> GeneratedStub:
    """What a made root's generated stub is (read back, so a kept root says the same)."""
    made = (directory / "lib64" / STUBS / "libcuda.so").is_file()
    try:
        said = (directory / STUB_NOTE).read_text(encoding="utf-8").strip()
    except OSError:
        said = f"{STUB_NOTE} is unreadable"
    return GeneratedStub(str(header), header_of, made, said)


def _fill_root(partial: Path, home: Path, linked: dict[str, dict[str, Path]]) -> None:
    """The links of a toolkit root (:func:`assemble_root`) in ``partial``."""
    if (home / "nvvm").is_dir():
        (partial / "nvvm").symlink_to((home / "nvvm").resolve())
    for sub, entries in linked.items():
        (partial / sub).mkdir()
        for name, path in entries.items():
            (partial / sub / name).symlink_to(path)
    (partial / "lib").symlink_to("lib64")
    targets = home / "targets"
    for target in sorted(targets.iterdir()) if targets.is_dir() else ():
        (partial / "targets" / target.name).mkdir(parents=True)
        (partial / "targets" / target.name / "include").symlink_to("../../include")
        (partial / "targets" / target.name / "lib").symlink_to("../../lib64")
    for name in ("version.json", "version.txt"):
        if (home / name).is_file():
            (partial / name).symlink_to((home / name).resolve())
