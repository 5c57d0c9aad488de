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
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from archguard.core.arch import Arch
from archguard.core.coverage import Image
from archguard.core.kinds import EMPTY, REAL, TRAP, StubKind
from archguard.detect.cuobjdump import ARCH_LINE, HEADER
from archguard.detect.elf import function_sizes
from archguard.detect.tools import (
    NVDISASM,
    QUERY_TIMEOUT_S,
    READ_TIMEOUT_S,
    ToolFailed,
    on_path,
    run,
)
from archguard.errors import BinaryReadError

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
    """``cuobjdump -ptx`` -> {PTX image: {mangled entry: kind}}. An entry's body ends where
    its braces close: a call inside it is a block of its own (``{ .param ...; call.uni ...;
    }``, as every ``assert`` makes), whose closing brace is not the entry's."""
    out: dict[Image, dict[str, StubKind]] = {}
    arch: Arch | None = None
    in_ptx = False
    entry: str | None = None
    body: list[str] = []
    depth = 0
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
            entry, body, depth = match[1], [], 0
            continue
        if entry is not None:
            opened = depth > 0
            depth += line.count("{") - line.count("}")
            if opened and depth == 0:
                out.setdefault(Image(arch, True), {})[entry] = classify_ptx("\n".join(body))
                entry = None
            else:
                body.append(line)
    return out


# A function with more machine code than this is real work, not a stub. A stub is its
# fallback after dead-code elimination; measured (nvcc 13.0, symbol sizes in the cubin,
# 16-byte instructions padded to 128 bytes): an empty body or ``__trap()`` 256 bytes, CUTLASS's
# ``printf`` + ``brkpt`` 384-512, ``assert(false)`` 512, a ``printf`` of CUDA's maximum 32
# arguments 1,152 on sm_80 (1,024 on sm_75, 768 on sm_90). 2 KiB is 128 instructions.
STUB_MAX_BYTES = 2048


def stub_possible(sizes: Mapping[str, int]) -> bool:
    """Whether a cubin arch's functions (name -> bytes of machine code, the largest of its
    copies) can hold a stub: one of them is no larger than :data:`STUB_MAX_BYTES` (or has no
    size recorded, 0)."""
    return any(n <= STUB_MAX_BYTES for n in sizes.values())


def read_kernels(
    path: Path, cuobjdump: str, nvdisasm: str, cubins: Sequence[Arch] = ()
) -> dict[Image, dict[str, StubKind]]:
    """Every image's kernels and their kinds (cubins via nvdisasm, PTX as text). ``cubins``:
    the binary's cubin arches. Each arch's cubins are extracted (``cuobjdump -xelf``, a few
    milliseconds) for their functions' sizes; an arch is disassembled (``cuobjdump -sass
    -arch``, one process per arch on the idle cores) only where a stub is possible
    (:func:`stub_possible`); in the others every function is real work by its size. The
    disassembly is most of a read's time: 1.6 s for each of torch_ms_deform_attn's two
    1.4 MB cubins."""
    env = {**os.environ, "PATH": f"{Path(nvdisasm).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    binary = str(path.resolve())  # -xelf runs in its own folder

    def dump(flags: list[str], cwd: Path | None = None) -> str:
        proc = run([cuobjdump, *flags, binary], BinaryReadError, READ_TIMEOUT_S, env, cwd=cwd)
        if proc.returncode != 0 and "does not contain device code" not in proc.stderr:
            if flags == ["-ptx"] and "No PTX" in (proc.stderr + proc.stdout):
                return ""
            raise BinaryReadError(
                f"`cuobjdump {' '.join(flags)} {path}` failed: "
                f"{(proc.stderr or proc.stdout).strip()[:300]}"
            )
        return proc.stdout

    def sizes(arch: Arch, tmp: Path) -> dict[str, int]:
        """The arch's functions and their sizes; none where they cannot be read (the arch
        is then disassembled, as without the gate)."""
        folder = tmp / arch.sm
        folder.mkdir()
        merged: dict[str, int] = {}
        try:
            dump(["-xelf", "all", "-arch", arch.sm], folder)
            for cubin in sorted(folder.glob("*.cubin")):
                for name, n in function_sizes(cubin, f"{path} ({cubin.name})").items():
                    merged[name] = max(n, merged.get(name, 0))
        except BinaryReadError:
            return {}
        return merged

    def one(arch: Arch | None, tmp: Path) -> dict[Image, dict[str, StubKind]]:
        if arch is None:
            return parse_ptx(dump(["-ptx"]))
        functions = sizes(arch, tmp)
        if functions and not stub_possible(functions):
            return {Image(arch, False): dict.fromkeys(functions, REAL)}
        return parse_sass(dump(["-sass", "-arch", arch.sm]))

    jobs: list[Arch | None] = [*sorted(set(cubins)), None]
    with tempfile.TemporaryDirectory(prefix="archguard-cubins-") as tmp:
        workers = min(len(jobs), os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(lambda arch: one(arch, Path(tmp)), jobs))
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
