"""What nvcc defines for each configuration the lint walks (an image in the wheel, a
device's own native target, the host pass), and the compilers an nvcc build is not."""

from __future__ import annotations

from dataclasses import dataclass

from archguard.core.arch import Arch
from archguard.core.cuda import CudaVersion
from archguard.lint.expressions import Macro

__all__ = ["OTHER_COMPILERS", "Target"]


# What an nvcc build on Linux is not: clang, NVHPC, MSVC, Windows, an IDE's parser, hipcc.
# Undefined in every pass (checked against the real nvcc by tests/test_lint.py), unless a
# scanned file or the command line defines one.
OTHER_COMPILERS = (
    "__clang__",
    "_NVHPC_CUDA",
    "__NVCOMPILER",
    "_MSC_VER",
    "_WIN32",
    "_WIN64",
    "_M_AMD64",
    "_M_X64",
    "__INTELLISENSE__",
    "__HIP__",
    "__HIPCC__",
    "__HIP_PLATFORM_AMD__",
)


@dataclass(frozen=True)
class Target:
    """One configuration: an image in the wheel, a device's own native target, or the host."""

    name: str  # "sm_86", "compute_90", "host"
    arch: Arch | None  # None: the host pass

    def macros(
        self, arch_list: str, cuda: CudaVersion, build: int | None = None
    ) -> dict[str, Macro]:
        """What nvcc defines for this target (nvcc 13.0, checked by the tests). ``build``:
        the toolkit's build number (``__CUDACC_VER_BUILD__``), when known."""
        out = {
            "__CUDACC__": Macro("__CUDACC__", ("1",)),
            "__NVCC__": Macro("__NVCC__", ("1",)),
            "__CUDACC_VER_MAJOR__": Macro("__CUDACC_VER_MAJOR__", (str(cuda.major),)),
            "__CUDACC_VER_MINOR__": Macro("__CUDACC_VER_MINOR__", (str(cuda.minor),)),
            # nvcc includes cuda_runtime.h in every .cu compile (cuda_runtime_api.h defines it)
            "CUDART_VERSION": Macro("CUDART_VERSION", (str(cuda.major * 1000 + cuda.minor * 10),)),
            "__CUDA_ARCH_LIST__": Macro(
                "__CUDA_ARCH_LIST__", tuple(" , ".join(arch_list.split(",")).split())
            ),
        }
        if build is not None:
            out["__CUDACC_VER_BUILD__"] = Macro("__CUDACC_VER_BUILD__", (str(build),))
        arch = self.arch
        if arch is None:
            return out
        value = str(arch.major * 100 + arch.minor * 10)
        out["__CUDA_ARCH__"] = Macro("__CUDA_ARCH__", (value,))
        if arch.suffix in ("a", "f"):
            out["__CUDA_ARCH_FAMILY_SPECIFIC__"] = Macro("__CUDA_ARCH_FAMILY_SPECIFIC__", (value,))
        if arch.suffix == "a":
            out["__CUDA_ARCH_SPECIFIC__"] = Macro("__CUDA_ARCH_SPECIFIC__", (value,))
            feat = f"__CUDA_ARCH_FEAT_SM{arch.digits}_ALL"
            out[feat] = Macro(feat, ("1",))
        return out
