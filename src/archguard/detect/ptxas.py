"""Ask a real ptxas which targets it assembles: the one probe behind the bundled toolkit
table (``scripts/probe_toolkits.py`` runs it over NVIDIA's wheels) and behind a live
toolkit the table does not know yet (``archguard explain`` / ``derive`` with nvcc 13.5
installed before archguard's table has 13.5).

1. ``ptxas --help`` lists the allowed ``--gpu-name`` values;
2. the current PTX ISA is read from ptxas's own complaint about a too-new ``.version``;
3. every ``sm_*`` target must assemble a minimal kernel, every ``compute_*`` target must
   parse it (ptxas lists some it then rejects: ``compute_90a`` before CUDA 12.9).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from archguard.detect.tools import QUERY_TIMEOUT_S, run
from archguard.errors import NvccUnusable

KERNEL = """.version {isa}
.target {target}
.address_size 64
.visible .entry archguard_probe()
{{
\tret;
}}
"""
_NAME = re.compile(r"'((?:sm|compute)_[0-9]+[af]?)'")
_ISA = re.compile(r"current version is '([0-9]+\.[0-9]+)'")
_TARGET = re.compile(r"_([0-9]+)([af]?)$")


@dataclass(frozen=True)
class PtxasTargets:
    """What one ptxas assembles: the cubins and PTX targets it accepted, those it lists but
    rejects, and its PTX ISA."""

    ptxas: str
    version_line: str  # "Cuda compilation tools, release 13.5, V13.5.37"
    isa: str
    cubins: tuple[str, ...]
    ptx: tuple[str, ...]
    rejected: tuple[str, ...]


def _run(argv: Sequence[str]) -> tuple[int, str, str]:
    proc = run(list(argv), NvccUnusable, QUERY_TIMEOUT_S)
    return proc.returncode, proc.stdout, proc.stderr


def allowed_gpu_names(help_text: str) -> list[str]:
    """The ``--gpu-name`` values ``ptxas --help`` lists (ptxas's own text, in order)."""
    start = help_text.find("--gpu-name")
    if start < 0:
        return []
    block = help_text[start:]
    allowed = block.find("Allowed values")
    block = block[allowed:] if allowed >= 0 else ""
    end = block.find("Default value")
    return _NAME.findall(block[:end] if end >= 0 else block)


def sort_key(target: str) -> tuple[int, int, str]:
    match = _TARGET.search(target)
    number = int(match[1]) if match else 0
    return (number // 10, number % 10, match[2] if match else "")


def probe_ptxas(ptxas: str) -> PtxasTargets:
    """Every target ``ptxas`` lists, tried on a minimal kernel (a few seconds)."""
    code, out, err = _run([ptxas, "--version"])
    lines = out.strip().splitlines()
    if code != 0 or len(lines) < 2:
        raise NvccUnusable(f"`{ptxas} --version` failed: {(err or out).strip()[:200]!r}")
    names = sorted(set(allowed_gpu_names(_run([ptxas, "--help"])[1])), key=sort_key)
    if not names:
        raise NvccUnusable(f"`{ptxas} --help` lists no --gpu-name values")
    with tempfile.TemporaryDirectory(prefix="archguard-ptxas-") as tmp:
        work = Path(tmp)
        isa = _current_isa(ptxas, work)
        accepted = [t for t in names if _accepts(ptxas, t, isa, work)]
    return PtxasTargets(
        ptxas,
        lines[-2].strip(),
        isa,
        tuple(t for t in accepted if t.startswith("sm_")),
        tuple(t for t in accepted if t.startswith("compute_")),
        tuple(t for t in names if t not in accepted),
    )


def _current_isa(ptxas: str, work: Path) -> str:
    probe = work / "isa.ptx"
    probe.write_text(KERNEL.format(isa="99.9", target="sm_75"))
    _, _, err = _run([ptxas, "-arch=sm_75", str(probe), "-o", str(work / "isa.cubin")])
    match = _ISA.search(err)
    if not match:
        raise NvccUnusable(f"{ptxas}: could not read the current PTX ISA from {err[:200]!r}")
    return match[1]


def _accepts(ptxas: str, target: str, isa: str, work: Path) -> bool:
    kernel = work / f"{target}.ptx"
    kernel.write_text(KERNEL.format(isa=isa, target=target.replace("compute_", "sm_")))
    code, _, _ = _run([ptxas, f"-arch={target}", str(kernel), "-o", str(work / f"{target}.o")])
    return code == 0
