"""Read the installed torch: version, CUDA version, and the arch list it was compiled for.

``torch.cuda.get_arch_list()`` answers with no GPU present on a CUDA build; a CPU-only build
returns an empty list (and has no ``torch._C._cuda_getArchFlags``), a ROCm build sets
``torch.version.hip``. Each gets its own message.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from types import ModuleType

from packaging.version import Version

from archguard.core.arch import parse_targets
from archguard.core.cuda import CudaVersion
from archguard.core.platform import DEFAULT_PLATFORM, host_platform
from archguard.core.toolkit import known_arches
from archguard.core.torchbuild import TorchBuild
from archguard.errors import InvalidArch, TorchNotCuda, TorchNotFound

CUDA_BUILD_HINT = (
    "Install a CUDA build of torch (e.g. torch==2.13.0, which is +cu130 on the default "
    "package index; a local wheel directory or pip config that prefers +cpu wheels must be "
    "bypassed, e.g. with `pip install --isolated`), or ask about a hypothetical combination "
    "with `archguard explain --cuda X.Y --torch V`."
)


def _import_torch(importer: Callable[[str], ModuleType]) -> ModuleType:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "Failed to initialize NumPy"
            return importer("torch")
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise TorchNotFound(f"importing torch failed: {exc}") from None
        raise TorchNotFound(
            f"torch is not installed in this Python ({sys.executable}). Building a CUDA "
            "extension needs a CUDA build of torch: list it in build-system.requires (for "
            "isolated builds) or install it here. " + CUDA_BUILD_HINT
        ) from None
    except Exception as exc:
        raise TorchNotFound(f"importing torch failed: {type(exc).__name__}: {exc}") from None


def torch_build_from_module(torch: ModuleType) -> TorchBuild:
    version = str(torch.__version__)
    where = getattr(torch, "__file__", None) or "?"
    hip = getattr(torch.version, "hip", None)
    if hip:
        raise TorchNotCuda(
            f"torch {version} ({where}) is a ROCm build (torch.version.hip = {hip}): archguard "
            "chooses CUDA arches and does nothing for ROCm. Set ARCHGUARD_DISABLE=1 to build "
            "this package for ROCm without it."
        )
    cuda = getattr(torch.version, "cuda", None)
    if not cuda:
        raise TorchNotCuda(
            f"torch {version} ({where}) is a CPU-only build (torch.version.cuda is None): it "
            "cannot build CUDA extensions, so there is no arch list to choose. " + CUDA_BUILD_HINT
        )
    arch_list = list(torch.cuda.get_arch_list())
    if not arch_list:
        getter = getattr(torch._C, "_cuda_getArchFlags", None)
        flags = getter() if getter else ""
        arch_list = flags.split() if flags else []
    if not arch_list:
        raise TorchNotCuda(
            f"torch {version} ({where}) reports CUDA {cuda} but an empty compiled arch list "
            "(torch.cuda.get_arch_list() is empty): archguard cannot tell which devices it "
            "runs on. Pass --torch-arches to describe it."
        )
    source = f"torch.cuda.get_arch_list() of torch {version}"
    try:
        targets = parse_targets(arch_list, source, known=known_arches())
    except InvalidArch as exc:
        raise TorchNotCuda(f"{exc} archguard cannot read this torch's arch list.") from None
    return TorchBuild(
        Version(version),
        CudaVersion.parse(cuda, "torch.version.cuda"),
        targets,
        f"installed torch ({source})",
        host_platform() or DEFAULT_PLATFORM,
    )


def detect_torch(importer: Callable[[str], ModuleType] = importlib.import_module) -> TorchBuild:
    return torch_build_from_module(_import_torch(importer))
