"""Reading the kernels inside a binary: per image (each cubin's SASS, each PTX), per kernel,
is the body real work, empty, or a trap?

``cuobjdump -sass`` needs ``nvdisasm`` (from the ``nvidia-cuda-nvdisasm`` package or the
toolkit; found by :mod:`archguard.detect.tools`' search order, beside cuobjdump too). A stub's
SASS (nvcc 13.0, ``#if __CUDA_ARCH__ >= 890 ... #else #endif`` compiled for ``sm_86``) is
``MOV R1, c[0x0][0x28]; EXIT; BRA`` and nothing else; with ``__trap()`` in the fallback it is
``MOV R1 ...; BPT.TRAP 0x1; BRA``; an ``assert`` or a ``printf`` fallback calls out
(``CALL.ABS.NOINC``) and touches no global memory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from archguard.core.arch import Arch
from archguard.core.coverage import Image
from archguard.core.kinds import EMPTY, REAL, TRAP, StubKind
from archguard.detect.cuobjdump import ARCH_LINE, HEADER
from archguard.detect.tools import (
    NVDISASM,
    QUERY_TIMEOUT_S,
    READ_TIMEOUT_S,
    ToolFailed,
    on_path,
    run,
)
from archguard.errors import BinaryReadError

Parser = Callable[[str], "dict[Image, dict[str, StubKind]]"]
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_.]*)")
# Instructions that do the kernel's work on memory it shares with the host or other threads.
_MEMORY = re.compile(
    r"^(LDG|STG|LDS|STS|LD|ST|ATOM|ATOMG|ATOMS|RED|REDG|LDGSTS|LDGDEPBAR|UTMA|UBLKCP|UTMALDG|"
    r"UTMASTG|SYNCS|HMMA|IMMA|DMMA|HGMMA|UTCHMMA|UTCQMMA|UTCMMA|SUST|SULD|TEX|TLD|TXQ)\b"
)
_PTX_ENTRY = re.compile(r"^\.(?:visible|weak)?\s*\.entry\s+([A-Za-z_$][\w$]*)")
_PTX_MEMORY = re.compile(
    r"\b(?:ld|st|atom|red|cp\.async|wgmma|mma|tex|suld|sust)\.(?!local\b|param\b)"
)


def find_nvdisasm(environ: Mapping[str, str] | None = None, near: str | None = None) -> str | None:
    """nvdisasm by :mod:`archguard.detect.tools`' search order; ``near``: a cuobjdump, whose
    directory is searched too."""
    return NVDISASM.find(environ, [str(Path(near).parent)] if near else ())


def classify_sass(opcodes: list[str]) -> StubKind:
    if any(_MEMORY.match(op) for op in opcodes):
        return REAL
    if any(op.startswith("BPT.TRAP") or op.startswith("CALL") for op in opcodes):
        return TRAP
    return EMPTY


def classify_ptx(body: str) -> StubKind:
    if _PTX_MEMORY.search(body):
        return REAL
    if re.search(r"\btrap\s*;|\bcall\b|\bbrkpt\b", body):
        return TRAP
    return EMPTY


def parse_sass(text: str) -> dict[Image, dict[str, StubKind]]:
    """``cuobjdump -sass`` -> {cubin: {mangled function: kind}}."""
    out: dict[Image, dict[str, list[str]]] = {}
    arch: Arch | None = None
    function: str | None = None
    ops: list[str] = []
    for raw in text.splitlines():
        if function is not None:  # most lines are instructions: tried first
            match = _INSTRUCTION.match(raw)
            if match:
                ops.append(match[1])
                continue
        line = raw.strip()
        if HEADER.match(line):
            arch, function = None, None
            continue
        match = ARCH_LINE.match(line)
        if match:
            arch = Arch.from_target(match[1])
            continue
        match = _FUNCTION.match(raw)
        if match and arch is not None:
            function = match[1]
            ops = out.setdefault(Image(arch, False), {}).setdefault(function, [])
    return {img: {f: classify_sass(ops) for f, ops in fns.items()} for img, fns in out.items()}


def parse_ptx(text: str) -> dict[Image, dict[str, StubKind]]:
    """``cuobjdump -ptx`` -> {PTX image: {mangled entry: kind}}."""
    out: dict[Image, dict[str, StubKind]] = {}
    arch: Arch | None = None
    in_ptx = False
    entry: str | None = None
    body: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        header = HEADER.match(line)
        if header:
            in_ptx, arch = header[1] == "ptx", None
            continue
        match = ARCH_LINE.match(line)
        if match:
            arch = Arch.from_target(match[1]).plain
            continue
        if not in_ptx or arch is None:
            continue
        match = _PTX_ENTRY.match(line)
        if match:
            entry, body = match[1], []
            continue
        if entry is not None:
            if line == "}":
                out.setdefault(Image(arch, True), {})[entry] = classify_ptx("\n".join(body))
                entry = None
            else:
                body.append(line)
    return out


def read_kernels(
    path: Path, cuobjdump: str, nvdisasm: str, cubins: Sequence[str] = ()
) -> dict[Image, dict[str, StubKind]]:
    """Every image's kernels and their kinds (cubins via nvdisasm, PTX as text). ``cubins``
    (``sm_80`` ...): the binary's cubin arches, disassembled side by side, one
    ``cuobjdump -sass -arch`` per arch on the idle cores (the disassembly is most of the
    read's time: 4.5 s of a 16 MB extension's 256 kernels x 2 cubins, one process)."""
    env = {**os.environ, "PATH": f"{Path(nvdisasm).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    sass = [["-sass", "-arch", a] for a in cubins] if len(cubins) > 1 else [["-sass"]]
    jobs = [(flags, parse_sass) for flags in sass] + [(["-ptx"], parse_ptx)]

    def dump(job: tuple[list[str], Parser]) -> dict[Image, dict[str, StubKind]]:
        flags, parse = job
        proc = run([cuobjdump, *flags, str(path)], BinaryReadError, READ_TIMEOUT_S, env)
        if proc.returncode != 0 and "does not contain device code" not in proc.stderr:
            if flags == ["-ptx"] and "No PTX" in (proc.stderr + proc.stdout):
                return {}
            raise BinaryReadError(
                f"`cuobjdump {' '.join(flags)} {path}` failed: "
                f"{(proc.stderr or proc.stdout).strip()[:300]}"
            )
        return parse(proc.stdout)

    workers = min(len(jobs), os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        parts = list(pool.map(dump, jobs))
    out: dict[Image, dict[str, StubKind]] = {}
    for part in parts:
        for image, kernels in part.items():
            out.setdefault(image, {}).update(kernels)
    return out


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> readable names with ``c++filt`` (or ``cu++filt``); unchanged without one."""
    tool = on_path("c++filt") or on_path("cu++filt")
    if not tool or not names:
        return {n: n for n in names}
    try:
        proc = run([tool], None, QUERY_TIMEOUT_S, stdin="\n".join(names) + "\n")
    except ToolFailed:
        return {n: n for n in names}
    lines = proc.stdout.splitlines()
    return {n: (lines[i] if i < len(lines) and lines[i] else n) for i, n in enumerate(names)}
