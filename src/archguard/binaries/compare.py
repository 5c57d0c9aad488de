"""Two wheels that should be the same bytes (a published one and its rebuild): where they
differ, said as a member of the zip and, for an ELF member, its sections."""

from __future__ import annotations

import zipfile
from pathlib import Path

from archguard.detect.elf import ELF_MAGIC, Section, sections
from archguard.errors import BinaryReadError


def wheel_differences(published: Path, rebuilt: Path) -> list[str]:
    """Nothing when the two files are the same bytes; else a line per difference: a member
    only one holds, a member whose bytes differ (an ELF's differing sections named), the
    members' order or dates, or the zip's own bytes around equal members."""
    if published.read_bytes() == rebuilt.read_bytes():
        return []
    with zipfile.ZipFile(published) as a, zipfile.ZipFile(rebuilt) as b:
        names_a, names_b = a.namelist(), b.namelist()
        in_a, in_b = set(names_a), set(names_b)
        out = [f"{n}: only in the published wheel" for n in names_a if n not in in_b]
        out += [f"{n}: only in the rebuilt wheel" for n in names_b if n not in in_a]
        for name in (n for n in names_a if n in in_b):
            left, right = a.read(name), b.read(name)
            if left != right:
                out.append(f"{name}: {member_difference(left, right, name)}")
            elif a.getinfo(name).date_time != b.getinfo(name).date_time:
                out.append(f"{name}: the same bytes, another date in the zip")
        if not out and names_a != names_b:
            out.append("the same members in another order")
    return out or ["the same members and dates; the zip's own bytes differ (its compression)"]


def member_difference(left: bytes, right: bytes, name: str) -> str:
    """How one member's two versions differ: for ELF objects, by section."""
    if not (left.startswith(ELF_MAGIC) and right.startswith(ELF_MAGIC)):
        first = next((i for i, (x, y) in enumerate(zip(left, right, strict=False)) if x != y), None)
        at = min(len(left), len(right)) if first is None else first
        return f"{len(left)} and {len(right)} bytes, first different at byte {at}"
    try:
        ours, theirs = sections(left, name), sections(right, name)
    except BinaryReadError as exc:
        return f"an ELF object that cannot be read ({exc.message})"
    by_name = {s.name: s for s in theirs}
    differ = [
        s.name or "(unnamed)"
        for s in ours
        if s.name not in by_name or _bytes(left, s) != _bytes(right, by_name[s.name])
    ]
    mine = {s.name for s in ours}
    differ += [s.name for s in theirs if s.name not in mine]
    if differ:
        return "ELF sections " + ", ".join(differ) + " differ"
    return "the same ELF sections, placed or headed differently"


def _bytes(data: bytes, section: Section) -> bytes:
    return data[section.offset : section.end]
