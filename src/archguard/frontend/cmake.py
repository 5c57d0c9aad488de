"""What a package's CMake files say about CUDA arches and CUDA itself, read from its tree
and its build log, for the failure's last line.

A ``set(CMAKE_CUDA_ARCHITECTURES ...)`` in a CMakeLists wins over ``-D`` and ``CUDAARCHS``,
a ``CUDA_ARCHITECTURES`` target property over both, and ``-gencode`` in ``CMAKE_CUDA_FLAGS``
or a target's options adds its own: the read-back then finds other arches than the list, or
nvcc refuses an arch the toolkit cannot emit. The failure names each such line
(``CMakeLists.txt:78: set(CMAKE_CUDA_ARCHITECTURES all-major)``), as it names a
``setup.py``'s hard-coded flags. A ``set()`` guarded by ``if(NOT DEFINED
CMAKE_CUDA_ARCHITECTURES)`` (or ``if(NOT CMAKE_CUDA_ARCHITECTURES)``) is a default that
``CUDAARCHS`` overrides, and is not named.

Before the build the files are read as CMake, command by command, in linear time (for
:func:`archguard.frontend.toolkit.cmake_arches`): the arch variables they read with
``$ENV{X}`` that have a literal default, and the lines that give a compile a literal list no
variable the build sets can change (``set(CMAKE_CUDA_ARCHITECTURES "70;80" CACHE STRING ""
FORCE)``); a value through what cannot be followed (a variable another command writes or
the files never set) is left to the read-back, which names the line after the build.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from pathlib import Path

from archguard.frontend.setup_py import SetupPy

_SET_LIST = re.compile(r"^\s*set\s*\(\s*CMAKE_CUDA_ARCHITECTURES\b", re.I)
_PROPERTY = re.compile(r"(?<![A-Za-z_])CUDA_ARCHITECTURES\b")  # the target property
_FLAGS = re.compile(
    r"(-gencode\b|--generate-code\b|arch=compute_\d|-arch[= ](?:sm|compute)_\d"
    r"|--gpu-architecture\b|--cuda-gpu-arch)"
)
_IF = re.compile(r"^\s*if\s*\((?P<cond>.*)", re.I)
_ENDIF = re.compile(r"^\s*endif\s*\(", re.I)
_ELSE = re.compile(r"^\s*(?:else|elseif)\s*\(", re.I)
_MESSAGE = re.compile(r"^\s*message\s*\(", re.I)  # says the arches, does not choose them
# a property set to the list the build was given: follows it, forces nothing
# (``(?:\s*\))?``: \s*\)?\s* split a run of blanks every way before failing at its end)
_FOLLOWS = re.compile(r"CUDA_ARCHITECTURES\s+\"?\$\{CMAKE_CUDA_ARCHITECTURES\}\"?(?:\s*\))?\s*$")
_DEFAULT_GUARD = re.compile(r"\bNOT\s+(?:DEFINED\s+)?CMAKE_CUDA_ARCHITECTURES\b", re.I)
_SKIP_DIRS = {".git", "build", "_skbuild", "third_party", "3rdparty", "external", "extern"}
# what a wheel's build seldom builds: a literal list there is no reason to refuse one before
_NOT_BUILT = {"test", "tests", "testing", "benchmark", "benchmarks", "example", "examples", "docs"}
_MAX_FILES = 200
_MAX_BYTES = 1 << 20  # read of one CMake file (a real one is a few kB)
_MAX_TOTAL = 2 << 20  # of all of them
_MAX_ENTRIES = 50_000  # the tree's files and folders looked at for them
_KEPT_FRAMES = 4  # the innermost if()s a command remembers (a default's guard is the nearest)
_KEPT_NAMES = 64  # the names remembered of one if()'s condition
_BUDGET = 256  # the values followed to read one line's arches
_MAX_OWN = 16  # the package's own arch variables looked at
_MAX_ITEMS = 64  # the literal items of one foreach() written out
_MAX_UNROLLED = 20_000  # the commands one file's foreach()s may add, all told


# CMake's own words when it finds no CUDA (a build that then makes a wheel without CUDA code)
_NO_CUDA = re.compile(
    r"(No CMAKE_CUDA_COMPILER could be found\.?|Could NOT find CUDA\w*[^\n]*"
    r"|Failed to find nvcc\.?|CUDA (?:compiler |toolkit )?not found[^\n]*"
    r"|Looking for a CUDA compiler - NOTFOUND)",
    re.I,
)
_CMAKE_ERROR = re.compile(r"CMake Error at (?P<at>[^\s:]+:\d+) \((?P<what>[^()\n]*)\):")


def _cmake_files(tree: Path, skip: set[str] = _SKIP_DIRS) -> list[Path]:
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


def _read(path: Path, left: int) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(min(_MAX_BYTES, left)).decode("utf-8", errors="replace")
    except OSError:
        return None


def forced_arches(tree: Path) -> list[str]:
    """Each line of the tree's CMake files that chooses CUDA arches itself, as
    ``FILE:LINE: text`` (defaults guarded by ``if(NOT DEFINED ...)`` left out)."""
    found: list[str] = []
    for path in _cmake_files(tree):
        text = _read(path, _MAX_BYTES)
        if text is None:
            continue
        lines = text.splitlines()
        guards: list[bool] = []  # for each open if(): is it a default's guard?
        for number, raw in enumerate(lines, 1):
            line = raw.split("#", 1)[0]
            opened = _IF.match(line)
            if opened:
                guards.append(bool(_DEFAULT_GUARD.search(opened["cond"])))
                continue
            if _ENDIF.match(line):
                if guards:
                    guards.pop()
                continue
            if _ELSE.match(line) and guards:  # the other branch of a default's guard forces
                guards[-1] = False
                continue
            if any(guards) or _MESSAGE.match(line) or _FOLLOWS.search(line):
                continue
            if _SET_LIST.match(line) or _PROPERTY.search(line) or _FLAGS.search(line):
                where = path.relative_to(tree).as_posix()
                found.append(f"{where}:{number}: {raw.strip()}")
    return found


def forced_note(tree: Path) -> str:
    """The failure's words for a tree whose CMake files choose arches ('' when none do)."""
    lines = forced_arches(tree)
    if not lines:
        return ""
    shown = "; ".join(lines[:5]) + (f"; and {len(lines) - 5} more" if len(lines) > 5 else "")
    return (
        f". Its CMake files choose arches themselves, over CUDAARCHS and -D: {shown}. Patch "
        "those lines to leave CMAKE_CUDA_ARCHITECTURES to the build (or guard them with "
        "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES))"
    )


def no_cuda_said(log: str) -> str | None:
    """CMake's own words where it found no CUDA compiler or toolkit (None: it said none)."""
    found = _NO_CUDA.findall(log)
    return found[-1].strip() if found else None


def cmake_error(log: str) -> str | None:
    """CMake's last ``CMake Error at FILE:LINE (...)`` and the message under it."""
    found = list(_CMAKE_ERROR.finditer(log))
    if not found:
        return None
    last = found[-1]
    message: list[str] = []
    for line in log[last.end() :].splitlines()[1:16]:
        text = line.strip()
        if text.startswith(("Call Stack", "-- ", "CMake Error")) or len(message) == 3:
            break
        if text and text not in message:
            message.append(text)
    return f"{last['at']}: {' '.join(message)}" if message else last["at"]


# --- before the build: the package's own arch variables, and arches nothing can change -----

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
_REF = re.compile(r"\$(ENV|CACHE)?\{([A-Za-z0-9_./+-]+)\}")  # ${X}, $ENV{X}, $CACHE{X}
_TESTED = re.compile(r"(\$?ENV\{)?([A-Za-z_][A-Za-z0-9_]*)")  # a name an if() tests
# commands that read the variables they name; any other may write them (list, string,
# foreach, math, a function's out-argument): a value that goes through one is not proved
_READ_ONLY = frozenset({"if", "elseif", "else", "endif", "while", "endwhile", "message", "set"})


@dataclass(frozen=True)
class _File:
    rel: str
    text: str

    def line(self, at: int) -> tuple[int, str]:
        """The number and the text of the line at offset ``at``."""
        start = self.text.rfind("\n", 0, at) + 1
        end = self.text.find("\n", at)
        raw = self.text[start : end if end >= 0 else len(self.text)].strip()
        return self.text.count("\n", 0, at) + 1, raw[:200]


@dataclass(frozen=True)
class _Arg:
    text: str
    kind: str  # "bare" (a keyword, a name, list-split by CMake), "quoted", "bracket" (raw)
    at: int  # offset in its file

    @cached_property
    def refs(self) -> list[str]:
        """The variables it expands: ``X``, ``ENV:X``; ``?`` for what cannot be read."""
        if self.kind == "bracket" or "$" not in self.text:
            return []
        out = [("ENV:" if m[1] == "ENV" else "") + m[2] for m in _REF.finditer(self.text)]
        return [*out, "?"] if "$" in _REF.sub("", self.text) else out


@dataclass(frozen=True)
class _Command:
    name: str  # lower case
    args: tuple[_Arg, ...]
    file: _File
    at: int
    frames: tuple[frozenset[str], ...]  # the names the innermost enclosing if()s test
    defaulted: bool  # under if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES): a default
    seq: int  # its place among all the files' commands

    def where(self, at: int | None = None) -> str:
        number, text = self.file.line(self.at if at is None else at)
        return f"{self.file.rel}:{number}: {text}"


def _invocations(text: str) -> Iterator[tuple[str, list[_Arg], int]]:
    """Each command of a CMake file: its name (lower case), its arguments, its offset."""
    pos, end, depth = 0, len(text), 0
    name: str | None = None  # the last word between commands: a command's name if ( follows
    at = 0
    args: list[_Arg] | None = None  # inside a command's parentheses
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
                args.append(_Arg(text[pos:found], "bracket", start))
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
            args.append(_Arg(m["quoted"] if quoted else token, kind if quoted else "bare", start))


Invocation = tuple[str, list[_Arg], int]


def _loop_items(args: Sequence[_Arg]) -> list[str] | None:
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


def _replaced(arg: _Arg, items: Mapping[str, str]) -> _Arg:
    """``arg`` with each loop variable's ``${X}`` replaced by its item (a bracket argument is
    raw: nothing in it expands)."""
    if arg.kind == "bracket" or "${" not in arg.text:
        return arg
    text = arg.text
    for name, item in items.items():
        text = text.replace("${" + name + "}", item)
    return _Arg(text, arg.kind, arg.at)


def _tested(args: Sequence[_Arg]) -> frozenset[str]:
    """The names an if() tests (``ENV:X`` for ``ENV{X}``), the first few."""
    found = islice(_TESTED.finditer(" ".join(a.text for a in args)), _KEPT_NAMES)
    return frozenset(("ENV:" if m[1] else "") + m[2] for m in found)


def _commands(tree: Path) -> list[_Command]:
    """The commands of the tree's CMake files, each with the if()s it is under."""
    out: list[_Command] = []
    left = _MAX_TOTAL
    for path in _cmake_files(tree, _SKIP_DIRS | _NOT_BUILT):
        text = _read(path, left) if left > 0 else None
        if text is not None:
            left -= len(text)
            _file_commands(_File(path.relative_to(tree).as_posix(), text), out)
    return out


def _file_commands(file: _File, out: list[_Command]) -> None:
    """One file's commands, added to ``out``. What follows a return() under an if() (in its
    function, or its file) is under that if() too: ``if(DEFINED CMAKE_CUDA_ARCHITECTURES)
    return() endif()`` guards the rest."""
    frames: list[tuple[frozenset[str], frozenset[str], bool]] = []  # if's, branch's, guard
    guarded = 0  # open frames that guard a default of CMAKE_CUDA_ARCHITECTURES
    returned: frozenset[str] = frozenset()  # what the if()s around an earlier return() test
    for name, args, at in _unrolled(_invocations(file.text), [_MAX_UNROLLED]):
        if name == "if":
            tested = _tested(args)
            guard = bool(_DEFAULT_GUARD.search(" ".join(a.text for a in args)))
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
            out.append(_Command(name, tuple(args), file, at, kept, guarded > 0, len(out)))


def _set_value(args: Sequence[_Arg]) -> tuple[tuple[_Arg, ...], bool, bool]:
    """A set()'s value after its name, whether it sets a cache entry, and with FORCE."""
    for i, a in enumerate(args):
        if a.kind == "bare" and a.text in ("CACHE", "PARENT_SCOPE"):
            cache = a.text == "CACHE"
            force = cache and any(b.kind == "bare" and b.text == "FORCE" for b in args[i:])
            return tuple(args[:i]), cache, force
    return tuple(args), False, False


@dataclass
class CMakeFiles:
    """A tree's CMake files as commands, and where each variable gets its value."""

    commands: list[_Command]
    writes: dict[str, list[tuple[_Command, tuple[_Arg, ...]]]] = field(default_factory=dict)
    feeds: dict[str, list[str]] = field(default_factory=dict)  # X -> those set() from ${X}
    unknown: set[str] = field(default_factory=set)  # written by commands other than set()
    env: dict[str, None] = field(default_factory=dict)  # what $ENV{X} reads, in order

    @classmethod
    def read(cls, tree: Path) -> CMakeFiles:
        """The tree's CMake files, read."""
        model = cls(_commands(tree))
        for c in model.commands:
            for a in c.args:
                if "$ENV{" in a.text:
                    model.env.update((r[4:], None) for r in a.refs if r.startswith("ENV:"))
            if c.name == "set" and c.args:
                first = c.args[0].text
                key = f"ENV:{first[4:-1]}" if first.startswith("ENV{") else first
                value = _set_value(c.args[1:])[0]
                model.writes.setdefault(key, []).append((c, value))
                for r in {r for a in value for r in a.refs}:
                    model.feeds.setdefault(r, []).append(key)
            elif c.name not in _READ_ONLY:
                model.unknown.update(a.text for a in c.args if a.kind == "bare")
        return model

    def sources(self, targets: Iterable[str]) -> set[str]:
        """``targets`` and every variable (``ENV:X`` for the environment's) their values are
        set() from, however far back: one walk over the writes."""
        seen = set(targets)
        todo = list(seen)
        while todo:
            for _, value in self.writes.get(todo.pop(), ()):
                for ref in {r for a in value for r in a.refs} - seen:
                    seen.add(ref)
                    todo.append(ref)
        return seen

    def reach(self, roots: Iterable[str]) -> set[str]:
        """``roots`` and every variable set() from them, however far."""
        seen = set(roots)
        todo = list(seen)
        while todo:
            for key in self.feeds.get(todo.pop(), ()):
                if key not in seen:
                    seen.add(key)
                    todo.append(key)
        return seen


def _arch_settings(
    commands: Iterable[_Command],
) -> Iterator[tuple[_Command, int, tuple[_Arg, ...]]]:
    """Each command that sets the arches a CUDA compile gets (``CMAKE_CUDA_ARCHITECTURES``,
    but not a cache entry without FORCE, which a -D or CUDAARCHS wins over; a target's
    ``CUDA_ARCHITECTURES``): (it, the offset to name, the value)."""
    for c in commands:
        args = c.args
        if c.name == "set" and args and args[0].text == "CMAKE_CUDA_ARCHITECTURES":
            value, cache, force = _set_value(args[1:])
            if force or not cache:
                yield c, c.at, value
        elif c.name in ("set_target_properties", "set_property"):
            for i, a in enumerate(args):
                if a.kind == "bare" and a.text == "CUDA_ARCHITECTURES":
                    end = i + 2 if c.name == "set_target_properties" else len(args)
                    yield c, a.at, args[i + 1 : end]
                    break


@dataclass(frozen=True)
class OwnVariable:
    """A variable the package's CMake files read from the environment, with its default."""

    name: str
    default: str
    where: str  # FILE:LINE of the default
    cmake: bool  # it goes to CMAKE_CUDA_ARCHITECTURES or CUDA_ARCHITECTURES
    cache: bool = False  # a cache entry read from no environment: a -D sets it, not a variable


def own_variables(model: CMakeFiles) -> list[OwnVariable]:
    """The arch variables the files read with ``$ENV{X}`` that have a literal default (set()
    under an if() that tests X, or what is set from it, or before it is set from X): those
    whose names say so (a setup.py's rule), then those whose value reaches the arches however
    it is named (``PKG_ARCHES`` -> ``CMAKE_CUDA_ARCHITECTURES``)."""
    out = []
    to_arches = {r for _, _, v in _arch_settings(model.commands) for a in v for r in a.refs}
    named = SetupPy(list(model.env), []).arch_variables()  # a setup.py's rule for its names
    flowing = model.sources([*to_arches, "CMAKE_CUDA_ARCHITECTURES"])
    by_name = set(named)
    names = [*named, *(n for n in model.env if f"ENV:{n}" in flowing and n not in by_name)]
    for name in islice(names, _MAX_OWN):
        linked = model.reach([f"ENV:{name}"])
        read: dict[str, int] = {}  # variable -> the first set() of it from the environment
        literal: list[tuple[int, _Command, tuple[_Arg, ...]]] = []
        for key in linked - {"CMAKE_CUDA_ARCHITECTURES"}:  # a default of its own, not X's
            for c, value in model.writes.get(key, ()):
                refs = [r for a in value for r in a.refs]
                if any(r in linked for r in refs):
                    read[key] = min(read.get(key, c.seq), c.seq)
                elif value and not refs:
                    literal.append((c.seq, c, value))
        for _, c, value in sorted(literal, key=lambda x: x[0]):
            key = c.args[0].text
            key = f"ENV:{key[4:-1]}" if key.startswith("ENV{") else key
            if any(not f.isdisjoint(linked) for f in c.frames) or c.seq < read.get(key, -1):
                cmake = "CMAKE_CUDA_ARCHITECTURES" in linked or not to_arches.isdisjoint(linked)
                where = f"{c.file.rel}:{c.file.line(c.at)[0]}"
                out.append(OwnVariable(name, ";".join(a.text for a in value), where, cmake))
                break
    return out + cache_variables(model, flowing, {o.name for o in out}, to_arches)


def cache_variables(
    model: CMakeFiles, flowing: set[str], taken: set[str], to_arches: set[str]
) -> list[OwnVariable]:
    """The cache entries whose value reaches the arches, with a literal default and no FORCE
    (``set(PKG_ARCHS "70;80" CACHE STRING "")``, then ``CMAKE_CUDA_ARCHITECTURES`` from it):
    a ``-DPKG_ARCHS=...`` before CMake runs sets each, where nothing else writes it."""
    out: list[OwnVariable] = []
    if any("$" in key for key in model.writes):  # a set() of a name it computes may write any
        return out
    for name in sorted(flowing):
        writes = model.writes.get(name, [])
        if name.startswith("ENV:") or name in taken or name == "CMAKE_CUDA_ARCHITECTURES":
            continue
        if name in model.unknown or len(writes) != 1:  # written more ways than one cache entry
            continue
        c, value = writes[0]
        cache, force = _set_value(c.args[1:])[1:]
        if not cache or force or any(a.refs for a in value):
            continue
        cmake = "CMAKE_CUDA_ARCHITECTURES" in model.reach([name]) or name in to_arches
        where = f"{c.file.rel}:{c.file.line(c.at)[0]}"
        out.append(OwnVariable(name, ";".join(a.text for a in value), where, cmake, cache=True))
        if len(out) >= _MAX_OWN:
            break
    return out


@dataclass(frozen=True, eq=False)
class ForcedLine:
    """A line that gives a compile a literal value, and the arches in it (None where they
    cannot be read: a variable set more ways than one)."""

    command: _Command
    at: int  # the offset to name
    value: tuple[_Arg, ...]
    arches: list[str] | None
    files: CMakeFiles

    def where(self) -> str:
        """``FILE:LINE: text``."""
        return self.command.where(self.at)

    def reads(self) -> list[str]:
        """The environment variables its value reads, through the variables it expands."""
        todo = deque(r for a in self.value for r in a.refs)
        seen: set[str] = set()
        while todo and len(seen) < _BUDGET:
            key = todo.popleft()
            if key not in seen:
                seen.add(key)
                todo += (r for _, v in self.files.writes.get(key, ()) for a in v for r in a.refs)
        return sorted(k[4:] for k in seen if k.startswith("ENV:"))


Memo = dict[str, "list[str] | None"]


def _arches(
    model: CMakeFiles, value: Sequence[_Arg], memo: Memo, budget: list[int]
) -> list[str] | None:
    """The arches a literal value gives, through variables set once (None: not read)."""
    out: list[str] = []
    for a in value:
        budget[0] -= 1
        refs = a.refs
        if not refs:
            out += [t for t in a.text.split(";") if t.strip()]
            continue
        key = refs[0]
        if len(refs) > 1 or budget[0] <= 0 or not _REF.fullmatch(a.text.strip()):
            return None
        if key not in memo:
            writes = model.writes.get(key, [])
            memo[key] = None  # while it is read: a circle reads as None
            if key.startswith("ENV:") and not writes:
                memo[key] = []  # unset in the build: empty
            elif len(writes) == 1:
                memo[key] = _arches(model, writes[0][1], memo, budget)
        inner = memo[key]
        if inner is None:
            return None
        out += inner
    return out


def forced_lines(
    model: CMakeFiles, environ: Mapping[str, str], defined: Iterable[str] = ()
) -> Iterator[ForcedLine]:
    """Each line that gives a CUDA compile a literal value (none of the variables in
    ``environ``, the build's, nor the cache entries ``defined`` by a -D, reach it), not under
    an if() that tests CMAKE_CUDA_ARCHITECTURES or one of those variables (a default they
    override)."""
    followed = model.reach(
        [
            "CMAKE_CUDA_ARCHITECTURES",
            *(f"ENV:{n}" for n, v in environ.items() if v),
            *defined,
        ]
    )
    # no literal is read through what follows the list, what other commands write, what the
    # files never set (a -D, a cache entry, CMake's own) or an indirection
    unset = (k for k in model.feeds if k not in model.writes and not k.startswith("ENV:"))
    opaque = model.reach([*followed, *model.unknown, "?", *unset])
    memo: Memo = {}
    for c, at, value in _arch_settings(model.commands):
        if c.defaulted or any(not f.isdisjoint(followed) for f in c.frames):
            continue
        refs = [r for a in value for r in a.refs]
        if not any(r in opaque or (r not in model.writes and r[:4] != "ENV:") for r in refs):
            yield ForcedLine(c, at, value, _arches(model, value, memo, [_BUDGET]), model)
