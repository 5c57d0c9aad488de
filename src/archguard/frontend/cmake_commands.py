"""A package's CMake files read as CMake reads them, command by command, in linear time: the
tree's CMakeLists.txt and *.cmake files (not a build or vendored folder; bounded in files
and bytes), each command (:mod:`archguard.frontend.cmake_syntax`) with the if()s around it,
as CMake runs it (:mod:`archguard.frontend.cmake_calls`: each foreach() over literal items
written out once per item, each call of the package's own function() or macro() as its
body). :mod:`archguard.frontend.cmake` reads the arches from these commands; it is the one
reader of CMake files, before the build and in a failure's words after it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from archguard.frontend.cmake_calls import MARK_END, MARK_FUNCTION, MARK_MACRO, Budget
from archguard.frontend.cmake_calls import definitions as _definitions
from archguard.frontend.cmake_calls import written as _written
from archguard.frontend.cmake_syntax import Arg, CMakeFile, Invocation, invocations

# an if() that guards a default of the arches (a -D or CUDAARCHS wins over what it sets)
_DEFAULT_GUARD = re.compile(r"\bNOT\s+(?:DEFINED\s+)?CMAKE_CUDA_ARCHITECTURES\b", re.I)
_SKIP_DIRS = {".git", "build", "_skbuild", "third_party", "3rdparty", "external", "extern"}
# what a wheel's build seldom builds: a list there is neither refused nor named in a failure
_NOT_BUILT = {"test", "tests", "testing", "benchmark", "benchmarks", "example", "examples", "docs"}
_MAX_FILES = 200
_MAX_BYTES = 1 << 20  # read of one CMake file (a real one is a few kB)
_MAX_TOTAL = 2 << 20  # of all of them
_MAX_ENTRIES = 50_000  # the tree's files and folders looked at for them
_KEPT_FRAMES = 4  # the innermost if()s a command remembers (a default's guard is the nearest)
_KEPT_NAMES = 64  # the names remembered of one if()'s condition
# a name an if() tests (``archs@3``: a function's own variable, named apart for its call)
_TESTED = re.compile(r"(\$?ENV\{)?([A-Za-z_][A-Za-z0-9_]*(?:@[0-9]+)?)")


def _cmake_files(tree: Path) -> list[Path]:
    """The tree's CMakeLists.txt and *.cmake files (not in a build, vendored, test or example
    folder), the first few, looking at a bounded number of entries."""
    skip = _SKIP_DIRS | _NOT_BUILT
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


def _read_file(path: Path, left: int) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(min(_MAX_BYTES, left)).decode("utf-8", errors="replace")
    except OSError:
        return None


@dataclass(frozen=True)
class Command:
    name: str  # lower case
    args: tuple[Arg, ...]
    file: CMakeFile
    at: int
    frames: tuple[frozenset[str], ...]  # the names the innermost enclosing if()s test
    defaulted: bool  # under if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES): a default
    seq: int  # its place among all the files' commands
    defines: str = ""  # the function() or macro() whose definition holds it ('' for none)
    via: tuple[CMakeFile, int] | None = None  # the call that ran it (a function's body)

    def where(self, arg: Arg | None = None) -> str:
        """``FILE:LINE: text`` of the command, or of one of its arguments (one a call passed
        to a function: the call's line); in a function's body, with the call that ran it."""
        file = (arg.passed or self.file) if arg else self.file
        number, text = file.line(arg.at if arg else self.at)
        if self.via is None or (arg is not None and arg.passed):
            return f"{file.rel}:{number}: {text}"
        called, at = self.via
        return f"{file.rel}:{number}: {text} (called at {called.rel}:{called.line(at)[0]})"

    def place(self, arg: Arg | None = None) -> str:
        """``FILE:LINE`` of the command, or of one of its arguments."""
        file = (arg.passed or self.file) if arg else self.file
        return f"{file.rel}:{file.line(arg.at if arg else self.at)[0]}"


def _tested(args: Sequence[Arg]) -> frozenset[str]:
    """The names an if() tests (``ENV:X`` for ``ENV{X}``), the first few."""
    found = islice(_TESTED.finditer(" ".join(a.text for a in args)), _KEPT_NAMES)
    return frozenset(("ENV:" if m[1] else "") + m[2] for m in found)


def read_commands(tree: Path) -> list[Command]:
    """The commands of the tree's CMake files as CMake runs them, each with the if()s it is
    under. A function() or macro() whose every call is written out leaves its definition's
    body out: its calls stand for it."""
    files: list[list[Invocation]] = []
    left = _MAX_TOTAL
    for path in _cmake_files(tree):
        text = _read_file(path, left) if left > 0 else None
        if text is not None:
            left -= len(text)
            files.append(list(invocations(CMakeFile(path.relative_to(tree).as_posix(), text))))
    defs = _definitions(files)
    budget = Budget()  # one for the tree: what all its loops and calls may add
    out: list[Command] = []
    for seq in files:
        _Frames().read(_written(seq, defs, budget), out)
    done = budget.expanded - budget.missed
    return [c for c in out if c.defines not in done] if done else out


@dataclass
class _Frames:
    """Where one file's commands are: the if()s open, what the if()s around an earlier
    return() test (what follows a return() under an if(), in its function or its file, is
    under that if() too: ``if(DEFINED CMAKE_CUDA_ARCHITECTURES) return() endif()`` guards
    the rest), the calls written out around it, the definitions that hold it."""

    open: list[tuple[frozenset[str], frozenset[str], bool]] = field(default_factory=list)
    guarded: int = 0  # open frames that guard a default of CMAKE_CUDA_ARCHITECTURES
    returned: frozenset[str] = frozenset()
    # at each call written out around it: the if()s open then, returned, a function's, where
    calls: list[tuple[int, frozenset[str], bool, Invocation]] = field(default_factory=list)
    defining: list[str] = field(default_factory=list)

    def read(self, seq: Iterable[Invocation], out: list[Command]) -> None:
        """``seq``'s commands, added to ``out``."""
        for inv in seq:
            name, args = inv.name, inv.args
            inside = len(self.open) > (self.calls[-1][0] if self.calls else 0)
            if name in (MARK_FUNCTION, MARK_MACRO, MARK_END):
                self._call(inv)
            elif name == "if":
                tested = _tested(args)
                guard = bool(_DEFAULT_GUARD.search(" ".join(a.text for a in args)))
                self.open.append((tested, tested, guard))
                self.guarded += guard
            elif name in ("elseif", "else") and inside:  # the other branch of a guard forces
                tested, _, guard = self.open[-1]
                self.open[-1] = (tested, tested | _tested(args), False)
                self.guarded -= guard
            elif name == "endif" and inside:
                self.guarded -= self.open.pop()[2]
            elif name not in ("if", "elseif", "else", "endif"):
                out.append(self._command(inv, len(out)))

    def _call(self, mark: Invocation) -> None:
        """A call written out starts or ends: a function's return() ends with it, and so do
        the if()s its body left open."""
        function = mark.name == MARK_FUNCTION
        if mark.name != MARK_END:
            self.calls.append((len(self.open), self.returned, function, mark))
            self.returned = frozenset() if function else self.returned
        elif self.calls:
            depth, returned, function, _ = self.calls.pop()
            while len(self.open) > depth:
                self.guarded -= self.open.pop()[2]
            self.returned = returned if function else self.returned

    def _command(self, inv: Invocation, seq: int) -> Command:
        name = inv.name
        kept = tuple(f[1] for f in self.open[-_KEPT_FRAMES:])
        if name in ("function", "macro", "endfunction", "endmacro"):
            self.returned = frozenset()
        elif name == "return" and len(self.returned) < _KEPT_NAMES:
            self.returned = self.returned.union(*kept)
        kept += (self.returned,) if self.returned else ()
        defines = self.defining[0] if self.defining else ""
        if name in ("function", "macro"):
            self.defining.append(inv.args[0].text.lower() if inv.args else "")
        elif name in ("endfunction", "endmacro") and self.defining:
            self.defining.pop()
        via = (self.calls[0][3].file, self.calls[0][3].at) if self.calls else None
        guarded = self.guarded > 0
        return Command(name, tuple(inv.args), inv.file, inv.at, kept, guarded, seq, defines, via)


def set_value(args: Sequence[Arg]) -> tuple[tuple[Arg, ...], bool, bool]:
    """A set()'s value after its name, whether it sets a cache entry, and with FORCE."""
    for i, a in enumerate(args):
        if a.kind == "bare" and a.text in ("CACHE", "PARENT_SCOPE"):
            cache = a.text == "CACHE"
            force = cache and any(b.kind == "bare" and b.text == "FORCE" for b in args[i:])
            return tuple(args[:i]), cache, force
    return tuple(args), False, False
