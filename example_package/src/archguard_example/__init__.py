"""archguard's worked example: ``scale`` (any CUDA GPU) and ``fp8_roundtrip`` (8.9+)."""

from __future__ import annotations

import torch

from archguard_example import _C

__all__ = ["fp8_roundtrip", "scale"]


def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Return ``x * alpha`` computed by the extension's CUDA kernel."""
    return _C.scale(x, alpha)


def fp8_roundtrip(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to FP8 (e4m3) and back, by a kernel that needs compute capability 8.9."""
    return _C.fp8_roundtrip(x)
