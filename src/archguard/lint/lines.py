"""Source lines for the lint's preprocessor: comments removed, continuations joined, line
numbers kept; which line is a directive; whether a header guards itself."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, of the line the logical line starts on
    text: str  # comments removed, continuations joined


def logical_lines(text: str) -> list[Line]:
    """Comments removed (``//`` and ``/* */``, strings respected), ``\\``-continuations
    joined; each logical line keeps the number of its first physical line."""
    out: list[Line] = []
    buf: list[str] = []
    start = 1
    in_block = False
    number = 0
    for number, raw in enumerate(text.split("\n"), 1):
        if not buf:
            start = number
        line, in_block = _strip_comments(raw, in_block)
        if line.endswith("\\"):
            buf.append(line[:-1])
            continue
        buf.append(line)
        out.append(Line(start, " ".join(buf)))
        buf = []
    if buf:
        out.append(Line(start, " ".join(buf)))
    return out


# a string or character literal (to its end, or the line's), a line comment, a block comment
_LEXEMES = re.compile(r"\"(?:\\.|[^\"\\])*\"?|'(?:\\.|[^'\\])*'?|//|/\*")


def _strip_comments(raw: str, in_block: bool) -> tuple[str, bool]:
    if not in_block and "/*" not in raw and '"' not in raw and "'" not in raw:
        cut = raw.find("//")  # most lines: no string and no block comment to respect
        return (raw if cut < 0 else raw[:cut]).rstrip(), False
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        if in_block:
            end = raw.find("*/", i)
            if end < 0:
                return "".join(out), True
            in_block = False
            i = end + 2
            out.append(" ")
            continue
        match = _LEXEMES.search(raw, i)
        if match is None:
            out.append(raw[i:])
            break
        out.append(raw[i : match.start()])
        i = match.end()
        if match[0] == "//":
            break
        if match[0] == "/*":
            in_block = True
        else:
            out.append(match[0])  # a literal, kept whole: no comment starts inside it
    return "".join(out).rstrip(), in_block


_DIRECTIVE = re.compile(r"^\s*#\s*([A-Za-z_]+)\s*(.*)$")


def directive(line: Line) -> tuple[str, str] | None:
    match = _DIRECTIVE.match(line.text)
    return (match[1], match[2].strip()) if match else None


# ---------------------------------------------------------------------------------------


def pragma_once(lines: Sequence[Line]) -> bool:
    for line in lines[:200]:
        found = directive(line)
        if found is not None and found[0] == "pragma" and found[1].split()[:1] == ["once"]:
            return True
    return False


def include_guard(lines: Sequence[Line]) -> str | None:
    """``X`` when a file starts ``#ifndef X`` / ``#define X`` (an include guard)."""
    found = [d for d in (directive(line) for line in lines[:200]) if d is not None][:2]
    if len(found) == 2 and found[0][0] == "ifndef" and found[1][0] == "define":
        name = found[0][1].split()[0] if found[0][1].split() else ""
        if name and found[1][1].split() and found[1][1].split()[0] == name:
            return name
    return None
