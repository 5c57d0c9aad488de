"""Find the nvcc that torch's ``cpp_extension`` would use, and ask it what it emits.

Search order (torch's ``_find_cuda_home``): ``CUDA_HOME``, ``CUDA_PATH``, the directory
above ``nvcc`` on ``PATH``, then ``/usr/local/cuda``.

An ``nvcc`` on ``PATH`` may be a link or a wrapper script (``/usr/local/bin/nvcc`` running
``exec /usr/local/cuda-13.0/bin/nvcc "$@"``, Debian's ``/usr/bin/nvcc``): the directory above
it then holds no toolkit, and CMake's ``FindCUDA`` stops at "Could NOT find CUDA (missing:
CUDA_INCLUDE_DIRS CUDA_CUDART_LIBRARY)". A real nvcc has ``nvcc.profile`` beside it; for one
that does not, nvcc itself is asked where it runs from (``-dryrun`` prints ``_HERE_``).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from archguard.core.arch import Arch, split_target
from archguard.core.cuda import CudaVersion
from archguard.core.toolkit import Toolkit, bundled_rows, release_build
from archguard.detect.ptxas import PtxasTargets, probe_ptxas
from archguard.detect.tools import QUERY_TIMEOUT_S, run
from archguard.errors import NvccNotFound, NvccUnusable

DEFAULT_CUDA_HOME = "/usr/local/cuda"
_HERE = re.compile(r"^#\$ _HERE_=(?P<dir>.+)$", re.M)
_RELEASE = re.compile(r"release ([0-9]+)\.([0-9]+), V([0-9.]+)")


@dataclass(frozen=True)
class NvccLocation:
    cuda_home: str
    nvcc: str
    how: str  # "CUDA_HOME", "CUDA_PATH", "PATH", "default"


def find_nvcc(
    environ: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> NvccLocation:
    env = os.environ if environ is None else environ
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = env.get(var)
        if home:
            nvcc = os.path.join(home, "bin", "nvcc")
            if not os.path.isfile(nvcc):
                raise NvccNotFound(
                    f"{var}={home} but {nvcc} does not exist. torch's cpp_extension would use "
                    f"that directory too: point {var} at a CUDA toolkit (the directory holding "
                    "bin/nvcc), or unset it."
                )
            return NvccLocation(home, nvcc, var)
    found = which("nvcc")
    if found:
        real = _behind_wrapper(found)
        if (
            real is not None
            and real != found
            and _has_headers(os.path.dirname(os.path.dirname(real)))
        ):
            how = f"PATH: {found} runs {real}"
            return NvccLocation(os.path.dirname(os.path.dirname(real)), real, how)
        return NvccLocation(os.path.dirname(os.path.dirname(found)), found, "PATH")
    nvcc = os.path.join(DEFAULT_CUDA_HOME, "bin", "nvcc")
    if os.path.isfile(nvcc):
        return NvccLocation(DEFAULT_CUDA_HOME, nvcc, "default")
    raise NvccNotFound(
        "no nvcc found: CUDA_HOME and CUDA_PATH are unset, nvcc is not on PATH, and "
        f"{DEFAULT_CUDA_HOME}/bin/nvcc does not exist. Install a CUDA toolkit matching torch's "
        "CUDA (or `pip install nvidia-cuda-nvcc` and its companions) and set CUDA_HOME; for "
        "questions about a toolkit you do not have, use `archguard explain --cuda X.Y`."
    )


def _has_headers(home: str) -> bool:
    """A toolkit root that holds the CUDA runtime's headers (Debian's nvcc runs from
    ``/usr/lib/nvidia-cuda-toolkit``, its headers in ``/usr/include``: there the directory
    above the wrapper stays the toolkit, as torch takes it)."""
    return any(
        os.path.isfile(os.path.join(home, d, "cuda_runtime.h"))
        for d in (
            "include",
            os.path.join("targets", "x86_64-linux", "include"),
            os.path.join("targets", "sbsa-linux", "include"),
        )
    )


def _is_toolkit_nvcc(path: str) -> bool:
    """A toolkit's own nvcc: ``nvcc.profile`` (which sets its include and library paths
    from its own directory) lies beside it."""
    return os.path.isfile(os.path.join(os.path.dirname(path), "nvcc.profile"))


def _behind_wrapper(found: str) -> str | None:
    """The toolkit's nvcc that ``found`` (an nvcc on PATH) runs: itself, the target of its
    links, or, for a wrapper script, the directory nvcc reports it runs from (``#$ _HERE_=``
    in its ``-dryrun`` output); None when neither is a toolkit's nvcc."""
    if _is_toolkit_nvcc(found):
        return found
    real = os.path.realpath(found)
    if _is_toolkit_nvcc(real):
        return real
    try:
        proc = run(
            [found, "-dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
            NvccUnusable,
            QUERY_TIMEOUT_S,
        )
    except NvccUnusable:
        return None
    match = _HERE.search(proc.stdout + proc.stderr)
    if match is None:
        return None
    nvcc = os.path.join(match["dir"].strip(), "nvcc")
    return os.path.realpath(nvcc) if _is_toolkit_nvcc(nvcc) else None


def _run(argv: list[str]) -> str:
    proc = run(argv, NvccUnusable, QUERY_TIMEOUT_S)
    if proc.returncode != 0:
        raise NvccUnusable(
            f"`{' '.join(argv)}` exited {proc.returncode}: {proc.stderr.strip()[:300]}"
        )
    return proc.stdout


def parse_nvcc_version(text: str, nvcc: str = "nvcc") -> CudaVersion:
    match = _RELEASE.search(text)
    if not match:
        raise NvccUnusable(
            f"`{nvcc} --version` did not print a CUDA release (expected 'release X.Y, "
            f"VX.Y.Z'); it printed: {text.strip()[:200]!r}"
        )
    return CudaVersion(int(match[1]), int(match[2]))


def parse_target_list(text: str, prefix: str, what: str) -> list[str]:
    names = text.split()
    bad = [n for n in names if (split_target(n) or ("", None))[0] != prefix]
    if bad or not names:
        raise NvccUnusable(
            f"`{what}` printed {text.strip()[:200]!r}, not a list of {prefix}_XY targets"
        )
    return names


def probe_toolkit(
    location: NvccLocation,
    run: Callable[[list[str]], str] = _run,
    probe: Callable[[str], PtxasTargets] = probe_ptxas,
) -> Toolkit:
    nvcc = location.nvcc
    printed = run([nvcc, "--version"])
    version = parse_nvcc_version(printed, nvcc)
    build = release_build(printed, version)
    release = f", V{version.text}.{build}" if build is not None else ""
    code = parse_target_list(run([nvcc, "--list-gpu-code"]), "sm", f"{nvcc} --list-gpu-code")
    arch = parse_target_list(run([nvcc, "--list-gpu-arch"]), "compute", f"{nvcc} --list-gpu-arch")
    listed = Toolkit.from_lists(
        version,
        code,
        arch,
        source=f"nvcc {nvcc} (found via {location.how}{release}; --list-gpu-code plus the "
        "a/f rule)",
        nvcc=nvcc,
    )
    if version in bundled_rows():
        return listed  # the table's row is checked against it (compare_with_bundled)
    return probed_live(listed, os.path.join(os.path.dirname(nvcc), "ptxas"), probe)


def probed_live(
    listed: Toolkit, ptxas: str, probe: Callable[[str], PtxasTargets] = probe_ptxas
) -> Toolkit:
    """A toolkit archguard's table does not have (nvcc 13.5 before a release that knows it):
    what nvcc lists, each target also assembled by its own ptxas, as the table's probe
    does (``detect.ptxas``). The source says the facts are live."""
    known = ", ".join(v.text for v in sorted(bundled_rows()))
    if not os.path.isfile(ptxas):
        return replace(
            listed,
            source=f"{listed.source}; live: CUDA {listed.text} is not in archguard's toolkit "
            f"table (it has {known}) and no ptxas lies beside nvcc to check the list",
        )
    found = probe(ptxas)
    cubins = frozenset(Arch.from_target(t) for t in found.cubins)
    ptx = frozenset(Arch.from_target(t) for t in found.ptx)
    refused = sorted([a.sm for a in listed.cubins - cubins] + [a.compute for a in listed.ptx - ptx])
    return replace(
        listed,
        cubins=listed.cubins & cubins,
        ptx=listed.ptx & ptx,
        source=f"{listed.source}; live: CUDA {listed.text} is not in archguard's toolkit "
        f"table (it has {known}), so each listed target was assembled by {ptxas} "
        f"(PTX ISA {found.isa})" + (f", which refused {' '.join(refused)}" if refused else ""),
    )


def detect_toolkit(environ: Mapping[str, str] | None = None) -> Toolkit:
    return probe_toolkit(find_nvcc(environ))
