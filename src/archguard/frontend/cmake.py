"""What a package's CMake files say about CUDA arches, read as CMake runs them (the one reader
of CMake files: :mod:`archguard.frontend.cmake_commands`), before the build and in the
failure's words after it; and CMake's own words in a build log.

A ``set(CMAKE_CUDA_ARCHITECTURES ...)`` in a CMakeLists wins over ``-D`` and ``CUDAARCHS``,
a ``CUDA_ARCHITECTURES`` target property over both, and ``-gencode`` in ``CMAKE_CUDA_FLAGS``
or a target's options adds its own: the read-back then finds other arches than the list, or
nvcc refuses an arch the toolkit cannot emit. The failure names each such line
(``CMakeLists.txt:78: set(CMAKE_CUDA_ARCHITECTURES all-major)``; the call's line where a
function of the package's is passed the list), as it names a ``setup.py``'s hard-coded
flags. A ``set()`` guarded by ``if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)`` (or ``if(NOT
CMAKE_CUDA_ARCHITECTURES)``) is a default that ``CUDAARCHS`` overrides, and is not named, nor
is a value that follows ``${CMAKE_CUDA_ARCHITECTURES}``.

Before the build (for :func:`archguard.frontend.cmake_arches.cmake_arches`) the same
commands give the arch variables the files read with ``$ENV{X}`` that have a literal
default, the cache entries that reach the arches, and the lines that give a compile a
literal list no variable the build sets can change (``set(CMAKE_CUDA_ARCHITECTURES "70;80"
CACHE STRING "" FORCE)``, ``pkg_set_arches(mylib "80;90")``); a value through what cannot be
followed (a variable another command writes or the files never set) is left to the
read-back, which names the line after the build. An nvcc flag that takes its arch from a
variable (``-gencode arch=compute_${arch},code=sm_${arch}`` in a foreach() over
``${PKG_ARCHS}``; :mod:`archguard.frontend.cmake_flags`) is followed to that variable's
source the same way; a literal flag is a literal list.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path

from archguard.core.arch import Targets
from archguard.frontend.cmake_calls import READ_ONLY
from archguard.frontend.cmake_commands import Command, read_commands, set_value
from archguard.frontend.cmake_flags import SAYS, FlagUse, flag_args, flag_uses, union
from archguard.frontend.cmake_syntax import REF, Arg
from archguard.frontend.setup_py import SetupPy

_BUDGET = 256  # the values followed to read one line's arches
# a command that chooses arches, the argument whose line to name (None: its own), the value
Choice = tuple[Command, Arg | None, tuple[Arg, ...]]
_MAX_OWN = 16  # the package's own arch variables looked at
_MAX_ITEMS = 64  # the items of a list an nvcc flag is read for


# CMake's own words when it finds no CUDA (a build that then makes a wheel without CUDA code)
_NO_CUDA = re.compile(
    r"(No CMAKE_CUDA_COMPILER could be found\.?|Could NOT find CUDA\w*[^\n]*"
    r"|Failed to find nvcc\.?|CUDA (?:compiler |toolkit )?not found[^\n]*"
    r"|Looking for a CUDA compiler - NOTFOUND)",
    re.I,
)
_CMAKE_ERROR = re.compile(r"CMake Error at (?P<at>[^\s:]+:\d+) \((?P<what>[^()\n]*)\):")


def forced_arches(tree: Path) -> list[str]:
    """Each line of the tree's CMake files that chooses CUDA arches itself, as ``FILE:LINE:
    text``: defaults guarded by ``if(NOT DEFINED ...)`` and values that follow
    ``${CMAKE_CUDA_ARCHITECTURES}`` left out."""
    model = CMakeFiles.read(tree)
    follows = model.reach(["CMAKE_CUDA_ARCHITECTURES"])
    found: dict[str, None] = {}
    for c, arg, value in _choices(model.commands):
        refs = {r for a in value for r in a.refs}
        if not refs or not refs <= follows:
            found.setdefault(c.where(arg))
    return list(found)


def _choices(commands: Iterable[Command]) -> Iterator[Choice]:
    """Each command that chooses arches (a default's aside): every set of the list or the
    property, and each argument that holds an nvcc arch flag."""
    for c in commands:
        if c.defaulted or c.name in SAYS:
            continue
        yield from _arch_settings([c], cached=True)
        for a in flag_args(c):
            yield c, a, (a,)


def forced_note(tree: Path) -> str:
    """The failure's words for a tree whose CMake files choose arches ('' when none do)."""
    try:
        lines = forced_arches(tree)
    except Exception as exc:  # archguard's own reading failed: the failure's words stand
        return f" (archguard could not read its CMake files: {type(exc).__name__})"
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
# (the files read as CMake commands: archguard.frontend.cmake_commands)


@dataclass
class CMakeFiles:
    """A tree's CMake files as commands, and where each variable gets its value."""

    commands: list[Command]
    writes: dict[str, list[tuple[Command, tuple[Arg, ...]]]] = field(default_factory=dict)
    feeds: dict[str, list[str]] = field(default_factory=dict)  # X -> those set() from ${X}
    unknown: set[str] = field(default_factory=set)  # written by commands other than set()
    env: dict[str, None] = field(default_factory=dict)  # what $ENV{X} reads, in order
    flags: list[FlagUse] = field(default_factory=list)  # the nvcc arch flags they write

    @classmethod
    def read(cls, tree: Path) -> CMakeFiles:
        """The tree's CMake files, read."""
        model = cls(read_commands(tree))
        model.flags = list(flag_uses(model.commands))
        for c in model.commands:
            for a in c.args:
                if "$ENV{" in a.text:
                    model.env.update((r[4:], None) for r in a.refs if r.startswith("ENV:"))
            if c.name == "set" and c.args:
                first = c.args[0].text
                key = f"ENV:{first[4:-1]}" if first.startswith("ENV{") else first
                value = set_value(c.args[1:])[0]
                model.writes.setdefault(key, []).append((c, value))
                for r in {r for a in value for r in a.refs}:
                    model.feeds.setdefault(r, []).append(key)
            elif c.name == "foreach":  # it writes its variable, and reads its lists
                model.unknown.update(a.text for a in c.args[:1] if a.kind == "bare")
            elif c.name not in READ_ONLY:
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


def _arch_settings(commands: Iterable[Command], *, cached: bool = False) -> Iterator[Choice]:
    """Each command that sets the arches a CUDA compile gets (``CMAKE_CUDA_ARCHITECTURES``,
    but not a cache entry without FORCE, which a -D or CUDAARCHS wins over, unless
    ``cached``; a target's ``CUDA_ARCHITECTURES``): (it, the argument whose line to name,
    None for its own, the value). A value a call passed to a function is named by the
    call's line."""
    for c in commands:
        args = c.args
        if c.name == "set" and args and args[0].text == "CMAKE_CUDA_ARCHITECTURES":
            value, cache, force = set_value(args[1:])
            if force or not cache or cached:
                yield c, _passed(value), value
        elif c.name in ("set_target_properties", "set_property"):
            for i, a in enumerate(args):
                if a.kind == "bare" and a.text == "CUDA_ARCHITECTURES":
                    end = i + 2 if c.name == "set_target_properties" else len(args)
                    value = args[i + 1 : end]
                    yield c, _passed(value) or a, value
                    break


def _passed(value: Iterable[Arg]) -> Arg | None:
    """The first argument of ``value`` that a call passed to a function (None: none)."""
    return next((a for a in value if a.passed), None)


@dataclass(frozen=True)
class OwnVariable:
    """A variable the package's CMake files read from the environment, with its default."""

    name: str
    default: str
    where: str  # FILE:LINE of the default
    cmake: bool  # it goes to CMAKE_CUDA_ARCHITECTURES or CUDA_ARCHITECTURES
    cache: bool = False  # a cache entry read from no environment: a -D sets it, not a variable
    flags: tuple[FlagUse, ...] = ()  # the nvcc arch flags that embed its items (or its value)


def own_variables(model: CMakeFiles) -> list[OwnVariable]:
    """The arch variables the files read with ``$ENV{X}`` that have a literal default (set()
    under an if() that tests X, or what is set from it, or before it is set from X): those
    whose names say so (a setup.py's rule), then those whose value reaches the arches however
    it is named (``PKG_ARCHES`` -> ``CMAKE_CUDA_ARCHITECTURES``)."""
    out = []
    to_arches = {r for _, _, v in _arch_settings(model.commands) for a in v for r in a.refs}
    named = SetupPy(list(model.env), []).arch_variables()  # a setup.py's rule for its names
    to_flags = {u.source for u in model.flags if u.source}
    flowing = model.sources([*to_arches, *to_flags, "CMAKE_CUDA_ARCHITECTURES"])
    by_name = set(named)
    names = [*named, *(n for n in model.env if f"ENV:{n}" in flowing and n not in by_name)]
    for name in islice(names, _MAX_OWN):
        linked = model.reach([f"ENV:{name}"])
        read: dict[str, int] = {}  # variable -> the first set() of it from the environment
        literal: list[tuple[int, Command, tuple[Arg, ...]]] = []
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
                where = c.place(_passed(value))
                flags = _flags_of(model, linked)
                out.append(
                    OwnVariable(name, ";".join(a.text for a in value), where, cmake, flags=flags)
                )
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
        cache, force = set_value(c.args[1:])[1:]
        if not cache or force or any(a.refs for a in value):
            continue
        linked = model.reach([name])
        cmake = "CMAKE_CUDA_ARCHITECTURES" in linked or not to_arches.isdisjoint(linked)
        where = c.place(_passed(value))
        text = ";".join(a.text for a in value)
        flags = _flags_of(model, linked)
        out.append(OwnVariable(name, text, where, cmake, cache=True, flags=flags))
        if len(out) >= _MAX_OWN:
            break
    return out


def _flags_of(model: CMakeFiles, linked: set[str]) -> tuple[FlagUse, ...]:
    """The flags whose arch comes from one of ``linked``, each shape once, the first few."""
    shapes = {(u.pieces, u.loop): u for u in model.flags if u.source in linked}
    return tuple(islice(shapes.values(), _MAX_OWN))


@dataclass(frozen=True, eq=False)
class ForcedLine:
    """A line that gives a compile a literal value, and the arches in it (None where they
    cannot be read: a variable set more ways than one)."""

    command: Command
    arg: Arg | None  # the argument whose line to name (None: the command's)
    value: tuple[Arg, ...]
    arches: list[str] | None
    files: CMakeFiles
    targets: Targets | None = None  # an nvcc flag's: what it gives (None: not a flag's)
    why: str = ""  # why archguard cannot say the list there, where it sets what the line reads

    def where(self) -> str:
        """``FILE:LINE: text``."""
        return self.command.where(self.arg)

    def gives(self) -> str:
        """What the line gives, in the refusal's words."""
        if self.why:
            return self.why
        if self.targets is not None:
            return f"gives {self.targets}"
        return f"gives {';'.join(self.arches) if self.arches else 'arches of its own'}"

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
    model: CMakeFiles, value: Sequence[Arg], memo: Memo, budget: list[int]
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
        if len(refs) > 1 or budget[0] <= 0 or not REF.fullmatch(a.text.strip()):
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
    for c, arg, value in _arch_settings(model.commands):
        if c.defaulted or any(not f.isdisjoint(followed) for f in c.frames):
            continue
        refs = [r for a in value for r in a.refs]
        if not any(r in opaque or (r not in model.writes and r[:4] != "ENV:") for r in refs):
            yield ForcedLine(c, arg, value, _arches(model, value, memo, [_BUDGET]), model)
    yield from _flag_lines(model, followed, opaque, memo)


def _flag_lines(
    model: CMakeFiles, followed: set[str], opaque: set[str], memo: Memo
) -> Iterator[ForcedLine]:
    """Each nvcc arch flag that gives a compile literal arches (its own text, or the items
    of a list no variable the build sets can change), with what it gives (a line a loop
    wrote out once per item: what all of them give); one whose list cannot be read gives
    arches of its own; one whose targets cannot be read is left to the read-back."""
    lines: dict[tuple[int, int, tuple[int, int] | None], ForcedLine] = {}
    for u in model.flags:
        c = u.command
        if c.defaulted or any(not f.isdisjoint(followed) for f in c.frames):
            continue
        line = _flag_line(model, u, opaque, memo)
        if line is None:
            continue
        # where() without reading the file's lines: the argument, and the call that ran it
        via = None if u.arg.passed or c.via is None else (id(c.via[0]), c.via[1])
        key = (id(u.arg.passed or c.file), u.arg.at, via)
        seen = lines.setdefault(key, line)
        if seen is not line and seen.targets is not None and line.targets is not None:
            found = union([seen.targets, line.targets])
            lines[key] = replace(seen, targets=found, arches=found.names())
    yield from lines.values()


def _flag_line(model: CMakeFiles, u: FlagUse, opaque: set[str], memo: Memo) -> ForcedLine | None:
    """The line of one flag where it gives literal arches (None: it follows what the build
    sets, or cannot be read)."""
    if u.source is None:
        found = u.gives()
        return None if found is None else ForcedLine(u.command, u.arg, (), [], model, found)
    source = u.source
    if source in opaque or (source not in model.writes and source[:4] != "ENV:"):
        return None
    ref = f"$ENV{{{source[4:]}}}" if source[:4] == "ENV:" else f"${{{source}}}"
    value = (Arg(ref, "bare", u.arg.at, u.arg.passed),)
    items = _arches(model, value, memo, [_BUDGET])
    if items is None:
        return ForcedLine(u.command, u.arg, value, None, model)
    items = items[:_MAX_ITEMS] if u.loop else [";".join(items)] if items else []
    gives = [u.gives(item) for item in items]
    if None in gives:
        return None
    found = union(t for t in gives if t is not None)
    return ForcedLine(u.command, u.arg, value, found.names(), model, found)
