"""A package's CMake files read as CMake reads them, command by command, in linear time: the
tree's CMakeLists.txt and *.cmake files (not a build or vendored folder; bounded in files
and bytes), each command's arguments (quoted, bracket, bare) with the variables they expand,
the if()s around it, and each foreach() over literal items written out once per item as CMake
runs it. :mod:`archguard.frontend.cmake` reads the arches from these commands."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import islice
from pathlib import Path

# an if() that guards a default of the arches (a -D or CUDAARCHS wins over what it sets)
DEFAULT_GUARD = re.compile(r"\bNOT\s+(?:DEFINED\s+)?CMAKE_CUDA_ARCHITECTURES\b", re.I)
_SKIP_DIRS = {".git", "build", "_skbuild", "third_party", "3rdparty", "external", "extern"}
# what a wheel's build seldom builds: a literal list there is no reason to refuse one before
_NOT_BUILT = {"test", "tests", "testing", "benchmark", "benchmarks", "example", "examples", "docs"}
_MAX_FILES = 200
MAX_BYTES = 1 << 20  # read of one CMake file (a real one is a few kB)
_MAX_TOTAL = 2 << 20  # of all of them
_MAX_ENTRIES = 50_000  # the tree's files and folders looked at for them
_KEPT_FRAMES = 4  # the innermost if()s a command remembers (a default's guard is the nearest)
_KEPT_NAMES = 64  # the names remembered of one if()'s condition
_MAX_ITEMS = 64  # the literal items of one foreach() written out
_MAX_UNROLLED = 20_000  # the commands one file's foreach()s may add, all told


def cmake_files(tree: Path, skip: set[str] = _SKIP_DIRS) -> list[Path]:
    """The tree's CMakeLists.txt and *.cmake files (not in a build or vendored folder), the
    first few, looking at a bounded number of entries."""
    out: list[Path] = []
    looked = 0
    for root, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        looked += len(dirs) + len(files)
        for name in sorted(files):
            path = Path(root, name)
            if (name == "CMakeLists.txt" or name.endswith(".cmake")) and path.is_file():
                out.append(path)
                if len(out) >= _MAX_FILES:
                    return out
        if looked > _MAX_ENTRIES:
            break
    return out


def read_file(path: Path, left: int) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(min(MAX_BYTES, left)).decode("utf-8", errors="replace")
    except OSError:
        return None


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
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REF = re.compile(r"\$(ENV|CACHE)?\{([A-Za-z0-9_./+-]+)\}")  # ${X}, $ENV{X}, $CACHE{X}
_TESTED = re.compile(r"(\$?ENV\{)?([A-Za-z_][A-Za-z0-9_]*)")  # a name an if() tests
# commands that read the variables they name; any other may write them (list, string,
# foreach, math, a function's out-argument): a value that goes through one is not proved
READ_ONLY = frozenset({"if", "elseif", "else", "endif", "while", "endwhile", "message", "set"})


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
    at: int  # offset in its file

    @cached_property
    def refs(self) -> list[str]:
        """The variables it expands: ``X``, ``ENV:X``; ``?`` for what cannot be read."""
        if self.kind == "bracket" or "$" not in self.text:
            return []
        out = [("ENV:" if m[1] == "ENV" else "") + m[2] for m in REF.finditer(self.text)]
        return [*out, "?"] if "$" in REF.sub("", self.text) else out


@dataclass(frozen=True)
class Command:
    name: str  # lower case
    args: tuple[Arg, ...]
    file: CMakeFile
    at: int
    frames: tuple[frozenset[str], ...]  # the names the innermost enclosing if()s test
    defaulted: bool  # under if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES): a default
    seq: int  # its place among all the files' commands

    def where(self, at: int | None = None) -> str:
        number, text = self.file.line(self.at if at is None else at)
        return f"{self.file.rel}:{number}: {text}"


def _invocations(text: str) -> Iterator[tuple[str, list[Arg], int]]:
    """Each command of a CMake file: its name (lower case), its arguments, its offset."""
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
                name = token if kind == "word" and _IDENT.fullmatch(token) else None
                at = start
        elif kind in ("open", "close"):
            depth += 1 if kind == "open" else -1
            if depth == 0 and name is not None:
                yield name.lower(), args, at
                args = name = None
        elif kind in ("quoted", "word"):
            quoted = kind == "quoted"
            args.append(Arg(m["quoted"] if quoted else token, kind if quoted else "bare", start))


Invocation = tuple[str, list[Arg], int]


def _loop_items(args: Sequence[Arg]) -> list[str] | None:
    """A foreach()'s literal items (``foreach(X A B C)``, ``foreach(X IN ITEMS A B)``; a
    bare argument is a list: ``A;B``); None where they cannot be read (``RANGE``, ``IN
    LISTS``, an item that expands a variable) or are too many."""
    if not args or not _IDENT.fullmatch(args[0].text):
        return None
    rest = list(args[1:])
    if rest and rest[0].kind == "bare" and rest[0].text in ("RANGE", "IN"):
        if rest[0].text == "RANGE" or len(rest) < 2 or rest[1].text != "ITEMS":
            return None
        rest = rest[2:]
    items: list[str] = []
    for a in rest:
        if a.refs or a.kind == "bracket":
            return None
        items += [t for t in a.text.split(";") if t] if a.kind == "bare" else [a.text]
        if len(items) > _MAX_ITEMS:
            return None
    return items


def _unrolled(invocations: Iterable[Invocation], budget: list[int]) -> Iterator[Invocation]:
    """The commands with each foreach() over literal items written out once per item, its
    variable's ``${X}`` replaced by the item, as CMake runs it (``foreach(opt A PKG_ARCHS)
    set(${opt} "$ENV{${opt}}")`` reads ``$ENV{PKG_ARCHS}`` into ``PKG_ARCHS``). A foreach()
    that cannot be read, or has no endforeach(), stays as it is (its variable is then written
    by a command other than set(): not followed). ``budget``: the commands left to add; each
    loop's end is found once, so the reading stays linear."""
    seq = list(invocations)
    ends: dict[int, int] = {}  # a foreach()'s index -> its endforeach()'s
    open_loops: list[int] = []
    for i, (name, _, _) in enumerate(seq):
        if name == "foreach":
            open_loops.append(i)
        elif name == "endforeach" and open_loops:
            ends[open_loops.pop()] = i
    yield from _written_out(seq, (0, len(seq)), ends, budget, {})


def _written_out(
    seq: Sequence[Invocation],
    span: tuple[int, int],
    ends: Mapping[int, int],
    budget: list[int],
    items: Mapping[str, str],
) -> Iterator[Invocation]:
    """The commands of ``seq[span]``, the loop variables ``items`` replaced."""
    i, stop = span
    while i < stop:
        name, args, at = seq[i]
        if items:
            args = [_replaced(a, items) for a in args]
        end = ends.get(i, stop) if name == "foreach" else stop
        looped = _loop_items(args) if end < stop else None
        cost = len(looped) * max(1, end - i - 1) if looped is not None else 0
        if looped is None or cost > budget[0]:
            yield name, args, at
            i += 1
            continue
        budget[0] -= cost
        for item in looped:
            inner = {**items, args[0].text: item}
            yield from _written_out(seq, (i + 1, end), ends, budget, inner)
        i = end + 1


def _replaced(arg: Arg, items: Mapping[str, str]) -> Arg:
    """``arg`` with each loop variable's ``${X}`` replaced by its item (a bracket argument is
    raw: nothing in it expands)."""
    if arg.kind == "bracket" or "${" not in arg.text:
        return arg
    text = arg.text
    for name, item in items.items():
        text = text.replace("${" + name + "}", item)
    return Arg(text, arg.kind, arg.at)


def _tested(args: Sequence[Arg]) -> frozenset[str]:
    """The names an if() tests (``ENV:X`` for ``ENV{X}``), the first few."""
    found = islice(_TESTED.finditer(" ".join(a.text for a in args)), _KEPT_NAMES)
    return frozenset(("ENV:" if m[1] else "") + m[2] for m in found)


def read_commands(tree: Path) -> list[Command]:
    """The commands of the tree's CMake files, each with the if()s it is under."""
    out: list[Command] = []
    left = _MAX_TOTAL
    for path in cmake_files(tree, _SKIP_DIRS | _NOT_BUILT):
        text = read_file(path, left) if left > 0 else None
        if text is not None:
            left -= len(text)
            _file_commands(CMakeFile(path.relative_to(tree).as_posix(), text), out)
    return out


def _file_commands(file: CMakeFile, out: list[Command]) -> None:
    """One file's commands, added to ``out``. What follows a return() under an if() (in its
    function, or its file) is under that if() too: ``if(DEFINED CMAKE_CUDA_ARCHITECTURES)
    return() endif()`` guards the rest."""
    frames: list[tuple[frozenset[str], frozenset[str], bool]] = []  # if's, branch's, guard
    guarded = 0  # open frames that guard a default of CMAKE_CUDA_ARCHITECTURES
    returned: frozenset[str] = frozenset()  # what the if()s around an earlier return() test
    for name, args, at in _unrolled(_invocations(file.text), [_MAX_UNROLLED]):
        if name == "if":
            tested = _tested(args)
            guard = bool(DEFAULT_GUARD.search(" ".join(a.text for a in args)))
            frames.append((tested, tested, guard))
            guarded += guard
        elif name in ("elseif", "else") and frames:  # the other branch of a guard forces
            tested, _, guard = frames[-1]
            frames[-1] = (tested, tested | _tested(args), False)
            guarded -= guard
        elif name == "endif" and frames:
            guarded -= frames.pop()[2]
        elif name not in ("if", "elseif", "else", "endif"):
            kept = tuple(f[1] for f in frames[-_KEPT_FRAMES:])
            if name in ("function", "macro", "endfunction", "endmacro"):
                returned = frozenset()
            elif name == "return" and len(returned) < _KEPT_NAMES:
                returned = returned.union(*kept)
            kept += (returned,) if returned else ()
            out.append(Command(name, tuple(args), file, at, kept, guarded > 0, len(out)))


def set_value(args: Sequence[Arg]) -> tuple[tuple[Arg, ...], bool, bool]:
    """A set()'s value after its name, whether it sets a cache entry, and with FORCE."""
    for i, a in enumerate(args):
        if a.kind == "bare" and a.text in ("CACHE", "PARENT_SCOPE"):
            cache = a.text == "CACHE"
            force = cache and any(b.kind == "bare" and b.text == "FORCE" for b in args[i:])
            return tuple(args[:i]), cache, force
    return tuple(args), False, False
