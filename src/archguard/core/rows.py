"""Which policy row a resolution takes (the row rule): the torch build's CUDA index, the
toolkit's own facts doing the clamp. Pure; :mod:`archguard.core.resolve` applies it."""

from __future__ import annotations

from dataclasses import dataclass

from archguard.core.cuda import CudaVersion
from archguard.core.toolkit import Toolkit
from archguard.core.torchbuild import TorchBuild


@dataclass(frozen=True)
class RowChoice:
    """Which ``cuXYZ`` a resolution takes its policy row, exceptions and overrides from, and
    the rule that chose it (``explain`` prints it; the wheel's label and CUDA line follow it)."""

    cuda: CudaVersion
    rule: str

    @property
    def tag(self) -> str:
        return self.cuda.tag


def choose_row(toolkit: Toolkit, torch: TorchBuild) -> RowChoice:
    """The row rule (SPEC §8 "Current", docs/policy.md). The ADR keys rows on PyTorch's CUDA
    indexes, and an extension runs inside its torch: so the row is the torch build's CUDA
    index (torch 2.13.0+cu130 -> cu130) whatever the toolkit's minor, and the toolkit's own
    facts do the clamp (step 3). A torch that states no CUDA (``--torch-arches`` alone)
    leaves the toolkit's own index. Majors that differ never reach here: torch's
    ``cpp_extension`` refuses them, and so does ``settings.inputs.cuda_agreement``."""
    if torch.cuda is None:
        return RowChoice(
            toolkit.version,
            f"the toolkit's own index ({toolkit.tag}): the torch states no CUDA build",
        )
    if torch.cuda == toolkit.version:
        return RowChoice(
            torch.cuda, f"torch and nvcc are both CUDA {torch.cuda.text}: row {torch.cuda.tag}"
        )
    return RowChoice(
        torch.cuda,
        f"the torch build's CUDA index ({torch.cuda.tag}), clamped by nvcc {toolkit.text}'s "
        f"own facts: an extension runs inside its torch and installs from that torch's "
        f"index, and torch's cpp_extension builds any CUDA {torch.cuda.major}.x toolkit "
        f"with it (nvcc {toolkit.text}'s PTX needs a driver for CUDA {toolkit.text} or "
        "newer to JIT)",
    )
