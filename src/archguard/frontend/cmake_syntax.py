"""CMake's syntax, read in linear time: a file's commands, each with its arguments (quoted,
bracket, bare) and the variables they expand. :mod:`archguard.frontend.cmake_calls` writes
them out as CMake runs them, :mod:`archguard.frontend.cmake_commands` reads a tree's files."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

# One token of CMake's syntax: each alternative starts on characters the others do not and
# none nests a repetition, so a match never backtracks over the text (a bracket's end is
# found by str.find).
_TOKEN = re.compile(
    r"(?P<blank>[ \t\r\n]+)"
    r"|(?P<bracket>#?\[=*\[)"
    r"|(?P<comment>#[^\n]*)"
    r'|"(?P<quoted>[^"\\]*(?:\\.[^"\\]*)*)"?'
    r"|(?P<open>\()|(?P<close>\))"
    r'|(?P<word>(?:[^\s()#"\\]|\\.)[^\s()#"\\]*(?:\\.[^\s()#"\\]*)*)'
    r"|(?P<other>.)",
    re.S,
)
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# ${X}, $ENV{X}, $CACHE{X}; ``X@3`` is archguard's name for a function's own X in its third
# call written out (:mod:`archguard.frontend.cmake_calls`), never a name CMake gives
REF = re.compile(r"\$(ENV|CACHE)?\{([A-Za-z0-9_./+@-]+)\}")


@dataclass(frozen=True)
class CMakeFile:
    rel: str
    text: str

    def line(self, at: int) -> tuple[int, str]:
        """The number and the text of the line at offset ``at``."""
        start = self.text.rfind("\n", 0, at) + 1
        end = self.text.find("\n", at)
        raw = self.text[start : end if end >= 0 else len(self.text)].strip()
        return self.text.count("\n", 0, at) + 1, raw[:200]


@dataclass(frozen=True)
class Arg:
    text: str
    kind: str  # "bare" (a keyword, a name, list-split by CMake), "quoted", "bracket" (raw)
    at: int  # offset in its file: its command's, or ``passed``
    passed: CMakeFile | None = None  # the file of the call that passed it to a function

    @cached_property
    def refs(self) -> list[str]:
        """The variables it expands: ``X``, ``ENV:X``; ``?`` for what cannot be read."""
        if self.kind == "bracket" or "$" not in self.text:
            return []
        out = [("ENV:" if m[1] == "ENV" else "") + m[2] for m in REF.finditer(self.text)]
        return [*out, "?"] if "$" in REF.sub("", self.text) else out


class Invocation(NamedTuple):
    """One command as written: its name (lower case), its arguments, where it is."""

    name: str
    args: list[Arg]
    at: int
    file: CMakeFile


def invocations(file: CMakeFile) -> Iterator[Invocation]:
    """Each command of a CMake file."""
    text = file.text
    pos, end, depth = 0, len(text), 0
    name: str | None = None  # the last word between commands: a command's name if ( follows
    at = 0
    args: list[Arg] | None = None  # inside a command's parentheses
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:  # `other` matches any character
            break
        kind, token, start, pos = m.lastgroup, m[0], m.start(), m.end()
        if kind == "bracket":  # [==[ raw ]==], or the comment #[[ ... ]]
            close = "]" + "=" * token.count("=") + "]"
            found = text.find(close, pos)
            found = end if found < 0 else found
            if args is not None and token[0] != "#":
                args.append(Arg(text[pos:found], "bracket", start))
            pos = found + len(close)
        elif kind in ("blank", "comment"):
            continue
        elif args is None:
            if kind == "open" and name is not None:
                args, depth = [], 1
            else:
                name = token if kind == "word" and IDENT.fullmatch(token) else None
                at = start
        elif kind in ("open", "close"):
            depth += 1 if kind == "open" else -1
            if depth == 0 and name is not None:
                yield Invocation(name.lower(), args, at, file)
                args = name = None
        elif kind in ("quoted", "word"):
            quoted = kind == "quoted"
            args.append(Arg(m["quoted"] if quoted else token, kind if quoted else "bare", start))
