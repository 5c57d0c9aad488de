"""The GPUs of this machine and its driver's CUDA version, for ``archguard doctor``.

From a CUDA build of torch when it sees devices (imported only when asked), else
``nvidia-smi`` (run by :func:`archguard.detect.tools.run`), else nothing (``doctor --device
CC`` names them). Read-only, bounded: each probe has a timeout (``PROBE_TIMEOUT_S``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from archguard.detect.tools import PROBE_TIMEOUT_S, ToolFailed, on_path, run

_CUDA_VERSION = re.compile(r"CUDA Version:\s*([0-9]+)\.([0-9]+)")


@dataclass(frozen=True)
class Gpu:
    cc: tuple[int, int]
    name: str
    origin: str  # "torch", "nvidia-smi", "--device"


@dataclass(frozen=True)
class Found:
    gpus: tuple[Gpu, ...]
    driver_cuda: tuple[int, int] | None  # the newest CUDA the driver runs
    notes: tuple[str, ...]


def parse_smi_query(text: str) -> list[Gpu]:
    """``nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader`` lines."""
    out = []
    for line in text.splitlines():
        name, _, cap = line.rpartition(",")
        match = re.fullmatch(r"\s*([0-9]+)\.([0-9]+)\s*", cap)
        if name and match:
            out.append(Gpu((int(match[1]), int(match[2])), name.strip(), "nvidia-smi"))
    return out


def parse_driver_cuda(text: str) -> tuple[int, int] | None:
    """The "CUDA Version: 13.0" of ``nvidia-smi``'s header."""
    match = _CUDA_VERSION.search(text)
    return (int(match[1]), int(match[2])) if match else None


def _smi(args: list[str]) -> str | None:
    smi = on_path("nvidia-smi")
    if smi is None:
        return None
    try:
        proc = run([smi, *args], None, PROBE_TIMEOUT_S)
    except ToolFailed:
        return None
    return proc.stdout if proc.returncode == 0 else None


def _from_torch() -> tuple[list[Gpu], str | None]:
    try:
        import torch
    except ImportError:
        return [], "torch is not importable"
    try:
        if not torch.version.cuda or not torch.cuda.is_available():
            return [], "torch sees no CUDA device"
        return [
            Gpu(
                tuple(torch.cuda.get_device_capability(i)),
                str(torch.cuda.get_device_name(i)),
                "torch",
            )
            for i in range(torch.cuda.device_count())
        ], None
    except Exception as exc:  # a broken driver: say so, try nvidia-smi
        return [], f"torch could not query the GPUs ({exc})"


def detect_gpus(use_torch: bool = True) -> Found:
    notes: list[str] = []
    gpus: list[Gpu] = []
    if use_torch:
        gpus, why = _from_torch()
        if why:
            notes.append(why)
    header = _smi([])
    if not gpus:
        query = _smi(["--query-gpu=name,compute_cap", "--format=csv,noheader"])
        if query is None:
            notes.append("nvidia-smi is not available or found no GPU")
        else:
            gpus = parse_smi_query(query)
    return Found(tuple(gpus), parse_driver_cuda(header or ""), tuple(notes))
