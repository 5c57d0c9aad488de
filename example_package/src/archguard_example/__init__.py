"""archguard's worked example: ``scale(x, alpha)`` multiplies a CUDA float tensor."""

from __future__ import annotations

import torch

from archguard_example import _C

__all__ = ["scale"]


def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Return ``x * alpha`` computed by the extension's CUDA kernel."""
    return _C.scale(x, alpha)
