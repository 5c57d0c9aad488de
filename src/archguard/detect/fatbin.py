"""Device code held as data: fatbins and cubins found by their magic inside a larger file (a C
array written by ``bin2c``/``xxd -i``, an ``.incbin``, a ``.fatbin`` shipped beside the
package), cut out whole for cuobjdump to read, and a PTX file's target.

A package that loads its kernels through the driver API (``cuModuleLoadData``) embeds them
where cuobjdump does not look: cuobjdump reads a host binary's ``.nv_fatbin`` section (and a
raw fatbin or cubin file) only. These are found by their headers, checked as cuobjdump's
formats (nvcc 13.0 output, read byte by byte):

- a fatbin: ``magic u32 = 0xBA55ED50, version u16 = 1, header size u16 = 16, fat size u64``,
  then entries that fill ``fat size`` exactly, each ``kind u16`` (1 PTX, 2 ELF, 8 LTO-IR),
  ``version u16 = 0x0101``, ``header size u32`` (64, 80, 112, 120 seen; a multiple of 8),
  ``payload size u64``, the arch at byte 28;
- a cubin: a 64-bit little-endian ELF whose ``e_machine`` is ``EM_CUDA`` (190); nvcc writes
  its section headers, then its program headers, last, so their ends bound it.

The scan is linear in the file's size whatever its bytes: each candidate magic costs a fixed
number of reads, except a fatbin's entry walk, which a budget of one entry per 64 bytes of
the file (each real entry has a 64-byte header) bounds; past it the file is refused
(:class:`~archguard.errors.BinaryReadError`) rather than read on. A found fatbin or cubin is
skipped whole: device code inside it is its own, never found twice.
"""

from __future__ import annotations

import mmap
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from archguard.errors import BinaryReadError

FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
FATBIN_KINDS = {1: "ptx", 2: "elf", 8: "nvvm"}  # an entry's kind; cuobjdump lists ptx and elf

_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, fat size
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
_ENTRY_VERSION = 0x0101
_MIN_ENTRY = 64
_MAX_ENTRY_HEADER = 4096
# Elf64_Ehdr from e_type: type, machine, version, entry, phoff, shoff, flags, ehsize,
# phentsize, phnum, shentsize, shnum
_ELF = struct.Struct("<HHIQQQIHHHHH")
_ELF_HEADER, _PHENT, _SHENT = 64, 56, 64
_PTX_TARGET = re.compile(r"^[ \t]*\.target[ \t]+(sm_[0-9]{2,3}[af]?)\b", re.M)

Kind = Literal["fatbin", "cubin"]
Data = bytes | mmap.mmap  # a file's bytes, or the file mapped


@dataclass(frozen=True)
class Span:
    """One fatbin or cubin inside a file: where it starts, its size, and (a fatbin) its
    entries' kinds in order, as cuobjdump lists them (``elf``/``ptx``; LTO-IR left out)."""

    kind: Kind
    offset: int
    size: int
    entries: tuple[str, ...] = ()

    @property
    def end(self) -> int:
        return self.offset + self.size


class _Budget:
    """Fatbin entries the scan may still walk (see the module's docstring)."""

    def __init__(self, size: int, where: str) -> None:
        self.left = size // _MIN_ENTRY + 64
        self.where = where

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise BinaryReadError(
                f"{self.where} holds more fatbin-like headers than its size allows (their "
                "entries overlap): it is not device code nvcc wrote, and archguard will not "
                "guess which of them is real."
            )


def _fatbin_at(data: Data, at: int, budget: _Budget) -> Span | None:
    """The fatbin whose header starts at ``at``, or None where the bytes are not one."""
    if at + _HEADER.size > len(data):
        return None
    _, version, header, fat = _HEADER.unpack_from(data, at)
    end = at + header + fat
    if version != 1 or header != _HEADER.size or fat < _MIN_ENTRY or end > len(data):
        return None
    kinds: list[str] = []
    entry = at + header
    while entry < end:
        budget.spend()
        if entry + _ENTRY.size > end:
            return None
        kind, version, size, payload = _ENTRY.unpack_from(data, entry)
        if (
            kind not in FATBIN_KINDS
            or version != _ENTRY_VERSION
            or not _MIN_ENTRY <= size <= _MAX_ENTRY_HEADER
            or size % 8
        ):
            return None
        entry += size + payload
        if FATBIN_KINDS[kind] != "nvvm":
            kinds.append(FATBIN_KINDS[kind])
    if entry != end:
        return None
    return Span("fatbin", at, end - at, tuple(kinds))


def _cubin_at(data: Data, at: int) -> Span | None:
    """The cubin whose ELF header starts at ``at``, or None where the bytes are not one."""
    if at + _ELF_HEADER > len(data) or data[at + 4 : at + 6] != b"\x02\x01":
        return None
    fields = _ELF.unpack_from(data, at + 16)
    machine, phoff, shoff, ehsize = fields[1], fields[4], fields[5], fields[7]
    phentsize, phnum, shentsize, shnum = fields[8], fields[9], fields[10], fields[11]
    if machine != EM_CUDA or ehsize != _ELF_HEADER or shnum == 0 or shentsize != _SHENT:
        return None
    if phnum and phentsize != _PHENT:
        return None
    size = max(shoff + shnum * _SHENT, phoff + phnum * _PHENT if phnum else 0)
    if shoff < _ELF_HEADER or at + size > len(data):
        return None
    return Span("cubin", at, size)


Read = Callable[[Data, int], Span | None]


def _merged(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) ranges sorted, overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _scan(data: Data, magic: bytes, ranges: list[tuple[int, int]], read: Read) -> list[Span]:
    """Each span ``read`` finds at a ``magic`` outside ``ranges`` (sorted, disjoint) and not
    reaching into one; a scan in order walks the file and the ranges once."""
    out: list[Span] = []
    at, index = data.find(magic), 0
    while at >= 0:
        while index < len(ranges) and ranges[index][1] <= at:
            index += 1
        following = ranges[index][0] if index < len(ranges) else len(data)
        span = read(data, at) if at < following else None
        if span is not None and span.end <= following:
            out.append(span)
            at = data.find(magic, span.end)
        else:
            at = data.find(magic, at + 1)
    return out


def find_device_code(data: Data, where: str, skip: Sequence[tuple[int, int]] = ()) -> list[Span]:
    """Every fatbin, then every cubin outside them, in ``data`` (a file's bytes or an
    ``mmap``), by offset; ``skip``: (start, end) ranges not to look in (a host binary's
    ``.nv_fatbin``, which cuobjdump reads itself). ``where`` names the file in an error."""
    budget = _Budget(len(data), where)
    ranges = _merged(skip)
    fatbins = _scan(data, FATBIN_MAGIC, ranges, lambda d, at: _fatbin_at(d, at, budget))
    taken = _merged([*ranges, *((s.offset, s.end) for s in fatbins)])
    cubins = _scan(data, ELF_MAGIC, taken, _cubin_at)
    return sorted(fatbins + cubins, key=lambda s: s.offset)


def ptx_target(text: str) -> str | None:
    """A PTX module's target (its ``.target sm_80`` line: ``sm_80``), or None."""
    match = _PTX_TARGET.search(text)
    return match[1] if match else None
