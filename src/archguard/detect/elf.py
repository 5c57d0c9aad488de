"""What a shared object binds to, read from its ELF dynamic section without loading it: the
libraries it needs (``DT_NEEDED``), the symbols it imports (undefined in ``.dynsym``, with
their symbol version and whether a missing one is tolerated: weak), and the symbols it
exports; a cubin's functions with their sizes (:func:`function_sizes`) and the arch its
ptxas was given (:func:`cubin_arch`); where each section lies (:func:`sections`). The one reader of
ELF symbols (pyelftools finds the sections; the symbol table is unpacked directly, 0.2 s for
all of torch 2.13's libraries against 6 s through pyelftools' per-symbol objects, and with
GNU_UNIQUE bindings kept, which its object API calls STB_LOOS).
"""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from archguard.errors import BinaryReadError

ELF_MAGIC = b"\x7fELF"
_SYMBOL = struct.Struct("<IBBHQQ")  # Elf64_Sym: name, info, other, shndx, value, size
_GLOBAL, _WEAK, _UNIQUE = 1, 2, 10  # symbol bindings (STB_GNU_UNIQUE is 10)
_DEFAULT, _PROTECTED = 0, 3  # visibilities an importer can bind to
_FUNC = 2  # STT_FUNC
# a cubin's .note.nv.tkinfo holds ptxas' command line: "-arch sm_100f -m 64" (nvcc 13.0)
_TKINFO_ARCH = re.compile(rb"-arch[ =](sm_[0-9]{2,3}[af]?)(?![0-9a-z])")


@dataclass(frozen=True)
class Import:
    """A symbol the object needs from another: its name, its version (``GLIBC_2.28``; None
    when unversioned, as every torch symbol is) and whether it is weak (a missing weak
    symbol is no load failure)."""

    name: str
    version: str | None
    weak: bool


@dataclass(frozen=True)
class Dynamic:
    """One shared object's dynamic linking facts."""

    needed: tuple[str, ...]
    imports: tuple[Import, ...]
    exports: frozenset[str]
    machine: str = ""  # the ELF header's e_machine: "EM_X86_64", "EM_AARCH64"

    def highest(self, prefix: str) -> str | None:
        """The highest symbol version of a family among the imports (``GLIBC_`` ->
        ``GLIBC_2.28``), compared number by number."""
        found = {i.version for i in self.imports if i.version and i.version.startswith(prefix)}
        return max(found, key=lambda v: _numbers(v[len(prefix) :]), default=None)


def _numbers(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split("."):
        digits = "".join(c for c in part if c.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def read_dynamic(source: Path | bytes, where: str | None = None) -> Dynamic:
    """A shared object's dynamic facts, from its path or its bytes (a wheel member).
    :class:`BinaryReadError` names ``where`` when it is not a 64-bit little-endian ELF."""
    label = where or str(source)
    fix = "an ELF shared object (no ELF header); give a Linux extension module (.so) or a wheel "
    with _elf(source, label, fix + "holding one") as (f, elf):
        sections: dict[str, Any] = {s.name: s for s in elf.iter_sections()}
        machine = str(elf["e_machine"])
        dynsym = sections.get(".dynsym")
        if dynsym is None:
            return Dynamic((), (), frozenset(), machine)
        symbols = _raw(f, dynsym)
        strings = _raw(f, elf.get_section(dynsym["sh_link"]))
        versym = _raw(f, sections[".gnu.version"]) if ".gnu.version" in sections else None
        names = _version_names(sections)
        dynamic = sections.get(".dynamic")
        needed = tuple(
            t.needed
            for t in (dynamic.iter_tags() if dynamic else ())
            if t.entry.d_tag == "DT_NEEDED"
        )
    imports, exports = _symbols(symbols, strings, versym, names)
    return Dynamic(needed, imports, exports, machine)


def elf_machine(source: Path | bytes, where: str | None = None) -> str:
    """The ELF header's e_machine as pyelftools names it (``EM_X86_64``, ``EM_AARCH64``)."""
    label = where or str(source)
    with _elf(source, label, "an ELF object (no ELF header)") as (_, elf):
        return str(elf["e_machine"])


@contextmanager
def _elf(source: Path | bytes, where: str, expected: str) -> Iterator[tuple[IO[bytes], ELFFile]]:
    """``source`` open as a 64-bit little-endian ELF; every way it cannot be read is one
    :class:`BinaryReadError` naming ``where`` (``expected``: what it should have been)."""
    try:
        with io.BytesIO(source) if isinstance(source, bytes) else Path(source).open("rb") as f:
            if f.read(4) != ELF_MAGIC:
                raise BinaryReadError(f"{where} is not {expected}.")
            f.seek(0)
            try:
                elf = ELFFile(f)
                if elf.elfclass != 64 or not elf.little_endian:
                    raise BinaryReadError(
                        f"{where} is a {elf.elfclass}-bit "
                        f"{'little' if elf.little_endian else 'big'}-endian ELF; archguard reads "
                        "x86_64 and aarch64 (64-bit little-endian) objects."
                    )
                yield f, elf
            except ELFError as exc:
                raise BinaryReadError(f"{where} is not a readable ELF object ({exc}).") from None
    except OSError as exc:
        raise BinaryReadError(f"{where} cannot be read: {exc.strerror or exc}.") from None


def _name(strings: bytes, offset: int) -> str:
    """A symbol's name from its string table."""
    return strings[offset : strings.index(b"\0", offset)].decode("utf-8", "replace")


def _raw(f: IO[bytes], section: Any) -> bytes:
    f.seek(section["sh_offset"])
    data: bytes = f.read(section["sh_size"])
    return data


def _version_names(sections: dict[str, Any]) -> dict[int, str]:
    """Symbol version index -> name (``GLIBC_2.28``), from the needed and defined versions."""
    out: dict[int, str] = {}
    need = sections.get(".gnu.version_r")
    for _, auxes in need.iter_versions() if need else ():
        for aux in auxes:
            out[aux["vna_other"]] = aux.name
    define = sections.get(".gnu.version_d")
    for entry, auxes in define.iter_versions() if define else ():
        out[entry["vd_ndx"]] = next(iter(auxes)).name
    return out


def _symbols(
    table: bytes, strings: bytes, versym: bytes | None, names: dict[int, str]
) -> tuple[tuple[Import, ...], frozenset[str]]:
    imports: list[Import] = []
    exports: set[str] = set()
    for index, (name, info, other, shndx, _, _) in enumerate(_SYMBOL.iter_unpack(table)):
        if index == 0 or name == 0:
            continue
        text = _name(strings, name)
        bind = info >> 4
        if shndx == 0:
            version = None
            if versym is not None:
                number = int.from_bytes(versym[2 * index : 2 * index + 2], "little") & 0x7FFF
                version = names.get(number) if number > 1 else None
            imports.append(Import(text, version, bind == _WEAK))
        elif bind in (_GLOBAL, _WEAK, _UNIQUE) and other & 3 in (_DEFAULT, _PROTECTED):
            exports.add(text)
    return tuple(imports), frozenset(exports)


def function_sizes(source: Path, where: str | None = None) -> dict[str, int]:
    """A device code object's (a cubin's) functions and the bytes of machine code each holds,
    from its ``.symtab`` (``STT_FUNC`` symbols defined in a section; 0 where the compiler
    recorded no size)."""
    label = where or str(source)
    with _elf(source, label, "an ELF object (no ELF header)") as (f, elf):
        table = elf.get_section_by_name(".symtab")
        if table is None:
            return {}
        symbols = _raw(f, table)
        strings = _raw(f, elf.get_section(table["sh_link"]))
    try:
        return {
            _name(strings, name): size
            for name, info, _, shndx, _, size in _SYMBOL.iter_unpack(symbols)
            if info & 0xF == _FUNC and shndx != 0 and name != 0
        }
    except (struct.error, ValueError) as exc:  # a truncated table or string
        raise BinaryReadError(f"{label}: its symbol table cannot be read ({exc}).") from None


def exported_by(objects: Iterable[Dynamic]) -> frozenset[str]:
    """Every symbol a set of libraries exports (a torch build's ``lib/*.so``)."""
    out: set[str] = set()
    for dynamic in objects:
        out |= dynamic.exports
    return frozenset(out)


@dataclass(frozen=True)
class Section:
    """One section of an ELF object: its name and the bytes of the file it occupies (none
    for a ``SHT_NOBITS`` section such as ``.bss``)."""

    name: str
    offset: int
    size: int

    @property
    def end(self) -> int:
        return self.offset + self.size


def sections(source: Path | bytes, where: str | None = None) -> list[Section]:
    """Every section of an ELF object (a file, or its bytes), where it lies in it."""
    label = where or ("an ELF object" if isinstance(source, bytes) else str(source))
    with _elf(source, label, "an ELF object (no ELF header)") as (_, elf):
        return [
            Section(s.name, s["sh_offset"], 0 if s["sh_type"] == "SHT_NOBITS" else s["sh_size"])
            for s in elf.iter_sections()
        ]


def cubin_arch(source: Path | bytes, where: str | None = None) -> str | None:
    """The target a cubin was assembled for as its ``.note.nv.tkinfo`` records ptxas'
    ``-arch`` (``sm_100f``: the one place a family cubin keeps its ``f``, which
    ``cuobjdump --list-elf`` and ``-elf`` drop); None where it has no such note."""
    label = where or str(source)
    with _elf(source, label, "a cubin (no ELF header)") as (f, elf):
        note = elf.get_section_by_name(".note.nv.tkinfo")
        data = _raw(f, note) if note is not None else b""
    match = _TKINFO_ARCH.search(data)
    return match[1].decode("ascii") if match else None
