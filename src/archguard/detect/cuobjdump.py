"""Read the cubins and PTX inside a binary with a real ``cuobjdump``, wherever the package put
them, each image with where it was found.

``cuobjdump --list-elf --list-ptx FILE`` names every embedded cubin and PTX, but prints an
``sm_100f`` cubin as ``...sm_100.cubin``; the header dump (``cuobjdump FILE``) keeps the
``f`` (``arch = sm_100f``). Both are read, in the same order, and must agree.

cuobjdump reads a host binary's fatbin section (``.nv_fatbin``) only: a package that loads its
kernels through the driver API (``cuModuleLoadData``) may embed them as data (a ``bin2c`` or
``xxd -i`` array, an ``.incbin`` in ``.rodata``), or ship ``.fatbin``, ``.cubin`` and ``.ptx``
files. Those are found by :mod:`archguard.detect.fatbin`, cut out whole, and read the same
way: every fatbin of a file written one after another into one file, which cuobjdump reads as
it reads a ``.fatbin`` (one listing, one header dump; its images come out in the fatbins'
order, each fatbin's entries checked against its own headers); a cubin alone with
``cuobjdump --list-elf`` (its header dump is empty), its ``f`` from its ``.note.nv.tkinfo``;
a PTX file by its ``.target`` line.

cuobjdump is found as ``--cuobjdump PATH``, else in :mod:`archguard.detect.tools`' one search
order.
"""

from __future__ import annotations

import mmap
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from archguard.core.arch import Arch, Targets
from archguard.detect.elf import ELF_MAGIC, Section, cubin_arch, sections
from archguard.detect.fatbin import EM_CUDA, Data, Span, find_device_code, ptx_target
from archguard.detect.tools import CUOBJDUMP, READ_TIMEOUT_S, executable, run
from archguard.errors import BinaryReadError, CuobjdumpNotFound

_LIST = re.compile(r"^(ELF|PTX) file\s+[0-9]+:\s+\S*?\.(sm_[0-9]+[af]?)\.(cubin|ptx)\s*$")
# The header of each embedded image in plain `cuobjdump FILE` / `-sass` / `-ptx` output, and
# its arch line (the one place these formats are read; detect/sass.py uses them too).
HEADER = re.compile(r"^Fatbin (elf|ptx) code:")
ARCH_LINE = re.compile(r"^arch = (sm_[0-9]{2,3}[af]?)\s*$")
NO_DEVICE_CODE = "does not contain device code"
# the sections cuobjdump reads in a host binary (executable, then relocatable device code)
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
# files a wheel ships its device code in besides its extension modules
STANDALONE_SUFFIXES = (".fatbin", ".cubin", ".ptx")
# where an image was: a host binary's fatbin section (what `cuobjdump -sass` disassembles),
# embedded as data in a host binary, or a file of its own (whole, or inside one)
Place = Literal["section", "embedded", "standalone"]


def find_cuobjdump(
    explicit: str | None = None,
    environ: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] | None = None,
    extra_dirs: Sequence[str] = (),
    *,
    needed_by: str,
) -> str:
    """The cuobjdump to use: ``explicit`` (``--cuobjdump PATH``), else the one search order
    of :mod:`archguard.detect.tools`; ``extra_dirs``: beside the nvcc that compiles.
    ``needed_by``: what asks for it and why, as the error names it ("verify", "probe-torch")."""
    if explicit:
        if not executable(Path(explicit)):
            raise CuobjdumpNotFound(
                f"{needed_by} reads binaries with cuobjdump, and --cuobjdump {explicit} is not "
                "an executable file; give the path of a cuobjdump, or drop --cuobjdump to let "
                f"archguard look ({CUOBJDUMP.order})."
            )
        return explicit
    found = CUOBJDUMP.find(environ, extra_dirs, which)
    if found is not None:
        return found
    raise CuobjdumpNotFound(
        f"{needed_by} needs cuobjdump to read the cubins and PTX inside a binary, and none "
        f"was found (looked at --cuobjdump, {CUOBJDUMP.order}). Install it with "
        f"`pip install {CUOBJDUMP.package}`, or pass --cuobjdump PATH."
    )


@dataclass(frozen=True)
class FoundImage:
    """One cubin (``elf``) or PTX image, and where it was found ("the .nv_fatbin section of
    pkg/_C.so", "embedded fatbin at offset 0x2000 in pkg/_C.so's .rodata", "standalone file
    pkg/kernels.fatbin")."""

    kind: str
    arch: Arch
    where: str
    place: Place = "section"

    @property
    def name(self) -> str:
        return self.arch.sm if self.kind == "elf" else self.arch.compute


@dataclass(frozen=True)
class Embedded:
    """What one binary holds: cubins and PTX (``None`` when it has no device code), and each
    image with where it was found."""

    targets: Targets | None
    images: tuple[FoundImage, ...] = ()


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return run(argv, BinaryReadError, READ_TIMEOUT_S)


def parse_listing(text: str) -> list[tuple[str, str]]:
    """``--list-elf --list-ptx`` output -> [(kind 'elf'|'ptx', 'sm_XY')]."""
    out = []
    for line in text.splitlines():
        match = _LIST.match(line.strip())
        if match:
            out.append((match[1].lower(), match[2]))
    return out


def parse_headers(text: str) -> list[tuple[str, Arch]]:
    """Plain ``cuobjdump FILE`` output -> [(kind, arch with its a/f suffix)]."""
    out: list[tuple[str, Arch]] = []
    kind: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        header = HEADER.match(line)
        if header:
            kind = header[1]
            continue
        arch = ARCH_LINE.match(line)
        if arch and kind:
            out.append((kind, Arch.from_target(arch[1])))
            kind = None
    return out


def combine(listing: list[tuple[str, str]], headers: list[tuple[str, Arch]], where: str) -> Targets:
    """Check both views agree entry by entry; the headers supply the f suffix."""
    entries = combine_entries(listing, headers, where)
    cubins = frozenset(a for k, a in entries if k == "elf")
    ptx = frozenset(a for k, a in entries if k == "ptx")
    return Targets(cubins, ptx)


def combine_entries(
    listing: list[tuple[str, str]], headers: list[tuple[str, Arch]], where: str
) -> list[tuple[str, Arch]]:
    """Every embedded image, in order, as (kind 'elf'|'ptx', arch with its a/f suffix)."""
    if len(listing) != len(headers) or any(
        lk != hk or name.removesuffix("f") != arch.sm.removesuffix("f")
        for (lk, name), (hk, arch) in zip(listing, headers, strict=True)
    ):
        raise BinaryReadError(
            f"cuobjdump's listing and header dump of {where} disagree ({len(listing)} vs "
            f"{len(headers)} entries); archguard will not guess which is right."
        )
    return headers


def read_entries(path: Path, cuobjdump: str) -> list[tuple[str, Arch]] | None:
    """Every image embedded in a binary (kind, arch), or None when it has no device code."""
    listed = _run([cuobjdump, "--list-elf", "--list-ptx", str(path)])
    if NO_DEVICE_CODE in listed.stderr:
        return None
    if listed.returncode != 0 and not parse_listing(listed.stdout):
        raise BinaryReadError(
            f"cuobjdump could not read {path}: {(listed.stderr or listed.stdout).strip()[:300]}"
        )
    headers = _run([cuobjdump, str(path)])
    return combine_entries(parse_listing(listed.stdout), parse_headers(headers.stdout), str(path))


def read_binary(path: Path, cuobjdump: str, name: str | None = None) -> Embedded:
    """Every image ``path`` holds, wherever it is (see the module's docstring): a host
    binary's, a fatbin, cubin or PTX file's, or a folder's standalone device code files.
    ``name``: the file (or folder) as the images' places name it (default: its name)."""
    images = read_images(path, cuobjdump, path.name if name is None else name)
    if not images:
        return Embedded(None)
    cubins = frozenset(i.arch for i in images if i.kind == "elf")
    ptx = frozenset(i.arch for i in images if i.kind == "ptx")
    return Embedded(Targets(cubins, ptx), tuple(images))


def is_standalone(name: str) -> bool:
    """Is this file device code shipped as a file of its own (a ``.fatbin``, ``.cubin`` or
    ``.ptx``)?"""
    return name.endswith(STANDALONE_SUFFIXES)


def standalone_label(folder: str, files: Sequence[str]) -> str:
    """A folder's standalone device code files as one name: ``pkg/kernels.fatbin``, or
    ``pkg/{kernels.fatbin,kernels.ptx}`` for several (``folder`` "" at the top)."""
    inner = files[0] if len(files) == 1 else "{" + ",".join(files) + "}"
    return f"{folder}/{inner}" if folder else inner


def read_images(path: Path, cuobjdump: str, name: str) -> list[FoundImage]:
    """Every image ``path`` holds, with where it was found (see :func:`read_binary`)."""
    if path.is_dir():
        return [
            image
            for file in sorted(path.iterdir())
            if file.is_file() and is_standalone(file.name)
            for image in read_images(file, cuobjdump, f"{name}/{file.name}" if name else file.name)
        ]
    try:
        with path.open("rb") as f:
            head = f.read(20)
    except OSError as exc:
        raise BinaryReadError(f"{name} cannot be read: {exc.strerror or exc}.") from None
    if head[:4] == ELF_MAGIC and int.from_bytes(head[18:20], "little") != EM_CUDA:
        return _host(path, cuobjdump, name)
    if path.suffix == ".ptx":
        return _ptx(path, name)
    return _data(path, cuobjdump, name)


def _host(path: Path, cuobjdump: str, name: str) -> list[FoundImage]:
    """A host binary's fatbin section (cuobjdump reads it), then the device code embedded
    in its other bytes as data (in an ELF archguard reads: 64-bit little-endian, where it
    can tell that section from the rest)."""
    try:
        parts: list[Section] | None = sections(path, name)
    except BinaryReadError:
        parts = None
    fatbin = [s for s in parts or () if s.name in FATBIN_SECTIONS and s.size]
    place = f"the {' and '.join(dict.fromkeys(s.name for s in fatbin)) or 'fatbin'} section"
    entries = read_entries(path, cuobjdump) or []
    images = [FoundImage(kind, arch, f"{place} of {name}") for kind, arch in entries]
    if parts is None:
        return images

    def where(span: Span) -> str:
        section = _section(span, parts or ())
        return f"embedded {span.kind} at offset {span.offset:#x} in {name}'s {section}"

    with _mapped(path, name) as data:
        spans = find_device_code(data, name, [(s.offset, s.end) for s in fatbin])
        images += _read_spans(data, spans, cuobjdump, where, name, "embedded")
    return images


def _section(span: Span, parts: Sequence[Section]) -> str:
    for part in parts:
        if part.offset <= span.offset < part.end:
            return part.name or "unnamed section"
    return "bytes outside its sections"


def _data(path: Path, cuobjdump: str, name: str) -> list[FoundImage]:
    """A fatbin or cubin file (or data holding fatbins and cubins)."""
    with _mapped(path, name) as data:
        size = len(data)

        def where(span: Span) -> str:
            whole = span.offset == 0 and span.size == size
            return (
                f"standalone file {name}"
                if whole
                else f"{span.kind} at offset {span.offset:#x} in standalone file {name}"
            )

        spans = find_device_code(data, name)
        images = _read_spans(data, spans, cuobjdump, where, name, "standalone")
    if not images and path.suffix in (".fatbin", ".cubin"):
        raise BinaryReadError(
            f"{name} holds no device code archguard can find: no fatbin header "
            "(0xBA55ED50) nor cubin (an EM_CUDA ELF header) whose sizes fit the file."
        )
    return images


def _ptx(path: Path, name: str) -> list[FoundImage]:
    """A PTX file: its ``.target`` names its arch."""
    try:
        target = ptx_target(path.read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        raise BinaryReadError(f"{name} cannot be read: {exc.strerror or exc}.") from None
    if target is None:
        raise BinaryReadError(f"{name} has no `.target sm_XY` line: it is not a PTX module.")
    return [FoundImage("ptx", Arch.from_target(target), f"standalone file {name}", "standalone")]


@contextmanager
def _mapped(path: Path, name: str) -> Iterator[Data]:
    """A file's bytes, mapped (a large extension is never read into memory whole)."""
    try:
        f = path.open("rb")
    except OSError as exc:
        raise BinaryReadError(f"{name} cannot be read: {exc.strerror or exc}.") from None
    with f:
        if path.stat().st_size == 0:
            yield b""
            return
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise BinaryReadError(f"{name} cannot be read: {exc.strerror or exc}.") from None
        with data:
            yield data


def _read_spans(  # noqa: PLR0913, PLR0917 (the file, its spans, how each is named)
    data: Data,
    spans: Sequence[Span],
    cuobjdump: str,
    where: Callable[[Span], str],
    name: str,
    place: Place,
) -> list[FoundImage]:
    """The images of the fatbins and cubins found in ``data``, in their order."""
    if not spans:
        return []
    out: dict[int, list[FoundImage]] = {}
    with tempfile.TemporaryDirectory(prefix="archguard-embedded-") as tmp:
        fatbins = [s for s in spans if s.kind == "fatbin"]
        if fatbins:
            read = _read_fatbins(data, fatbins, cuobjdump, Path(tmp) / "embedded.fatbin", name)
            for span, entries in zip(fatbins, read, strict=True):
                out[span.offset] = [FoundImage(k, a, where(span), place) for k, a in entries]
        for span in spans:
            if span.kind == "cubin":
                cubin = Path(tmp) / f"{span.offset:x}.cubin"
                cubin.write_bytes(data[span.offset : span.end])
                arch = _cubin(cubin, cuobjdump, span, name)
                out[span.offset] = [FoundImage("elf", arch, where(span), place)]
    return [image for span in spans for image in out[span.offset]]


def _read_fatbins(
    data: Data, spans: Sequence[Span], cuobjdump: str, target: Path, name: str
) -> list[list[tuple[str, Arch]]]:
    """Each fatbin's images: all of them written one after another (8-byte aligned) into
    ``target``, read in one listing and one header dump, and split by each fatbin's own
    entries (their kinds must match, in order)."""
    with target.open("wb") as f:
        for span in spans:
            f.write(data[span.offset : span.end])
            f.write(b"\0" * (-span.size % 8))
    entries = read_entries(target, cuobjdump) or []
    expected = [kind for span in spans for kind in span.entries]
    if [kind for kind, _ in entries] != expected:
        raise BinaryReadError(
            f"cuobjdump read {len(entries)} images from the {len(spans)} fatbins embedded in "
            f"{name}, whose headers name {len(expected)} ({', '.join(expected) or 'none'}); "
            "archguard will not guess which is right."
        )
    out, at = [], 0
    for span in spans:
        out.append(entries[at : at + len(span.entries)])
        at += len(span.entries)
    return out


def _cubin(path: Path, cuobjdump: str, span: Span, name: str) -> Arch:
    """A cubin's arch: cuobjdump's listing (``sm_90a``), its ``f`` from its ptxas note."""
    listed = _run([cuobjdump, "--list-elf", str(path)])
    found = [target for kind, target in parse_listing(listed.stdout) if kind == "elf"]
    if len(found) != 1:
        detail = (listed.stderr or listed.stdout).strip()[:300]
        raise BinaryReadError(
            f"the cubin header at offset {span.offset:#x} in {name} is not a cubin cuobjdump "
            f"reads ({detail or 'it lists no ELF image'}); archguard will not guess."
        )
    noted = cubin_arch(path, f"the cubin at offset {span.offset:#x} in {name}")
    if noted is not None and noted != found[0] and noted != found[0] + "f":
        raise BinaryReadError(
            f"the cubin at offset {span.offset:#x} in {name} is {found[0]} to cuobjdump and "
            f"{noted} to its ptxas note; archguard will not guess which is right."
        )
    return Arch.from_target(noted or found[0])
