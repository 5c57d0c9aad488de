"""The nvcc arch flags a package's CMake files write, and where each flag's arch comes from:
literal text (``-gencode arch=compute_80,code=sm_80``), the items of a foreach() over a
variable's list (``foreach(arch ${PKG_ARCHS})`` around ``-gencode
arch=compute_${arch},code=sm_${arch}``), or a variable's own value (``-arch=sm_${CC}``).
:mod:`archguard.frontend.cmake` follows that variable to its source, as it follows
``CMAKE_CUDA_ARCHITECTURES``, and :mod:`archguard.frontend.cmake_arches` sets it to the list
in the spelling the flag reads; what a flag gives for an item is read by
:mod:`archguard.nvcc.flags`, the one reader of nvcc's arch flags.

A flag whose arch cannot be told (two variables in one target, a loop over RANGE or two
lists, a value another command computes, ``-arch`` beside ``-code``) yields nothing: it is
left to the read-back. The reading is one pass over the commands; each flag's pieces are
bounded in length and number, and what a piece gives is read once per text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice

from archguard.core.arch import ArchEntry, Targets
from archguard.errors import NvccFlagError
from archguard.frontend.cmake_commands import Command
from archguard.frontend.cmake_syntax import REF, Arg, CMakeFile
from archguard.nvcc.flags import find_arch_flags

# an argument that holds an nvcc arch flag (or clang's)
FLAGS = re.compile(
    r"(-gencode\b|--generate-code\b|arch=compute_[\d$]|-arch[= ](?:sm|compute)_[\d$]"
    r"|--gpu-architecture\b|--cuda-gpu-arch)"
)
# commands that test or say the arches, choosing none; string() and list() choose only where
# they add to a value
SAYS = frozenset({"message", "if", "elseif", "while", "get_property", "get_target_property"})
_ADDS = frozenset({"APPEND", "PREPEND", "CONCAT", "JOIN", "INSERT"})
# One flag in an argument's text: a -gencode value (its flag name before it or in the
# argument before), or -arch's target. Each part is bounded, so that a scan never backtracks
# over more than a flag's length.
_PIECE = re.compile(
    r"(?P<gencode>arch=[^\s,;\"'<>]{1,80},\s{0,4}code=(?:\[[^\]\n]{0,200}\]"
    r"|\\?\"[^\"\n]{0,200}\"|[^\s;\"'<>\[]{1,200}))"
    r"|(?:-arch|--gpu-architecture)(?:=|[ \t]{1,8})(?P<arch>(?:sm|compute)_[^\s,;\"'<>]{1,80})"
)
# CMake's and FindCUDA's flag variables: every CUDA compile reads them
_COMPILE_FLAGS = re.compile(r"CMAKE_CUDA_FLAGS\w*|CUDA_NVCC_FLAGS\w*")
_CODE = re.compile(r"(?<![\w-])(?:-code|--gpu-code)\b")  # beside -arch: the pair is not read
_MAX_PIECES = 64  # the flags of one argument read


def flag_args(c: Command) -> list[Arg]:
    """The arguments of ``c`` that hold an nvcc arch flag, where it chooses arches (not a
    test, a message, or a string() or list() that does not add to a value)."""
    if c.name in SAYS or (
        c.name in ("string", "list") and (not c.args or c.args[0].text not in _ADDS)
    ):
        return []
    return [a for a in c.args if FLAGS.search(a.text)]


# what a foreach() runs over: the variable it reads, and whether once per item of its list
# (False: once, for the whole value); None where it cannot be told
Binding = tuple[str, bool] | None


@dataclass(frozen=True)
class FlagUse:
    """The nvcc arch flags of one argument that take their arch from one place: literal text
    (``var`` ''), or the variable ``var``, which is each item of ``source``'s list (``loop``)
    or ``source`` itself."""

    command: Command
    arg: Arg
    var: str  # the variable the flags embed ('' for literal flags)
    source: str | None  # where its value comes from (``ENV:X`` for the environment's)
    loop: bool  # each item of the source's list gives the flags once
    pieces: tuple[tuple[str, str], ...]  # ("gencode" or "arch", the flag's value as written)

    def where(self) -> str:
        """``FILE:LINE`` of the flag."""
        return self.command.place(self.arg)

    def gives(self, item: str = "") -> Targets | None:
        """The targets the flags give with ``item`` as the variable's value (None: they
        cannot be read)."""
        found = [
            _targets(kind, REF.sub(lambda _: item, value) if self.var else value)
            for kind, value in self.pieces
        ]
        return union(t for t in found if t is not None) if None not in found else None


@lru_cache(maxsize=4096)
def _targets(kind: str, value: str) -> Targets | None:
    """What one flag gives (None: not an arch nvcc names, or not read)."""
    try:
        _, found = find_arch_flags(["-gencode" if kind == "gencode" else "-arch", value])
    except (NvccFlagError, ValueError):
        return None
    return union(f.targets for f in found)


def flag_uses(commands: Sequence[Command]) -> Iterator[FlagUse]:
    """Each argument's nvcc arch flags that reach a compile, by where their arch comes from:
    each foreach() left as written binds its variable, to the list it reads, until its
    endforeach(). Flags a command writes to a variable nothing reads (``set(SM61
    "-gencode ...")`` of a project that picks one such variable) reach none."""
    read = _read_names(commands)
    bound: dict[str, list[Binding]] = {}  # a loop variable -> its open foreach()s' lists
    open_loops: list[str] = []  # the open foreach()s' variables, innermost last
    top: CMakeFile | None = None
    for c in commands:
        if c.via is None and c.file is not top:  # a file's loops end with it
            bound.clear()
            open_loops.clear()
            top = c.file
        if c.name == "foreach":
            var = c.args[0].text if c.args else ""
            bound.setdefault(var, []).append(_loop(c.args[1:]))
            open_loops.append(var)
        elif c.name == "endforeach" and open_loops:
            bound[open_loops.pop()].pop()
        elif (into := _destination(c)) is None or into in read or _COMPILE_FLAGS.match(into):
            for a in flag_args(c):
                yield from _uses(c, a, bound)


def _read_names(commands: Iterable[Command]) -> set[str]:
    """The variables the commands read (``${X}``, a foreach()'s ``IN LISTS X``), but for a
    set()'s read of the variable it sets (``set(F "${F} -gencode ...")``)."""
    out: set[str] = set()
    for c in commands:
        own = c.args[0].text if c.name == "set" and c.args else None
        out.update(r for a in c.args for r in a.refs if r != own)
        if c.name == "foreach" and [a.text for a in c.args[1:3]] == ["IN", "LISTS"]:
            out.update(a.text for a in c.args[3:])
    return out


def _destination(c: Command) -> str | None:
    """The variable ``c`` writes its arguments to (None: a command that hands them on, to a
    compile or a function, or one whose variable a variable names)."""
    words = [a.text for a in c.args]
    into = None
    if c.name == "set" and words and not words[0].startswith("ENV{"):
        into = words[0]
    elif c.name in ("string", "list") and len(words) > 2:
        into = words[2] if words[0] == "JOIN" else words[1]
    return into if into is not None and "$" not in into else None


def _loop(rest: Sequence[Arg]) -> Binding:
    """What a foreach() reads after its variable: ``${L}`` (each item), ``IN LISTS L``,
    ``IN ITEMS ${L}``; a quoted ``"${L}"`` is one item, the whole value."""
    words = [a.text for a in rest]
    if len(rest) == 3 and words[:2] == ["IN", "LISTS"] and rest[2].kind == "bare":
        return (rest[2].text, True) if not rest[2].refs else None
    if len(rest) == 3 and words[:2] == ["IN", "ITEMS"]:
        rest = rest[2:]
    if len(rest) != 1 or rest[0].kind == "bracket":
        return None
    m = REF.fullmatch(rest[0].text)
    if m is None:
        return None
    return ("ENV:" if m[1] == "ENV" else "") + m[2], rest[0].kind == "bare"


def _uses(c: Command, a: Arg, bound: dict[str, list[Binding]]) -> Iterator[FlagUse]:
    """The flags of one argument: its literal ones, and those of each variable it embeds."""
    pieces = list(islice(_PIECE.finditer(a.text), _MAX_PIECES + 1))
    if len(pieces) > _MAX_PIECES:
        return
    arch_read = not _CODE.search(a.text)
    literal: dict[tuple[str, str], None] = {}
    embedded: dict[str, dict[tuple[str, str], None]] = {}
    for m in pieces:
        kind = "gencode" if m["gencode"] else "arch"
        if kind == "arch" and not arch_read:
            continue
        piece = (kind, m[kind])
        if "$" not in m[kind]:
            literal[piece] = None
            continue
        names = {("ENV:" if r[1] == "ENV" else "") + r[2] for r in REF.finditer(m[kind])}
        if len(names) == 1 and "$" not in REF.sub("", m[kind]):
            embedded.setdefault(names.pop(), {})[piece] = None
    if literal:
        yield FlagUse(c, a, "", None, False, tuple(literal))
    for var, found in embedded.items():
        binding = bound[var][-1] if bound.get(var) else (var, False)
        if binding is not None:
            yield FlagUse(c, a, var, binding[0], binding[1], tuple(found))


@dataclass(frozen=True)
class FlagSpelling:
    """A list as the items a variable's flags read: the value, the targets of the list the
    flags' shape cannot give (said, left to the read-back), or why the list cannot be said
    (and the flag whose shape is why)."""

    value: str | None
    left_out: tuple[str, ...] = ()
    why: str = ""
    use: FlagUse | None = None


def flag_spelling(uses: Sequence[FlagUse], entries: Sequence[ArchEntry]) -> FlagSpelling | None:
    """``entries`` as the items of the variable ``uses`` read, in the digits the flags embed
    (``80;90``): each entry whose targets through the flags the list holds all of. An entry
    the flags give only with a target the list lacks (``code=[sm_X,compute_X]`` for an entry
    without PTX) cannot be said; nor can more than one arch where a flag takes the
    variable's whole value. None: a flag cannot be read."""
    want = Targets.from_entries(entries)
    chosen: list[str] = []
    got = Targets(frozenset(), frozenset())
    for e in sorted(entries):
        item = f"{e.arch.digits}{e.arch.suffix}"
        gives = [(u, u.gives(item)) for u in uses]
        found = [t for _, t in gives if t is not None]
        if len(found) < len(gives):
            return None
        all_of = union(found)
        if within(all_of, want):
            chosen.append(item)
            got = union([got, all_of])
        elif all_of.cubins & want.cubins or all_of.ptx & want.ptx:
            u, t = next((u, t) for u, t in gives if t is not None and not within(t, want))
            extra = Targets(t.cubins - want.cubins, t.ptx - want.ptx)
            why = f"for {item} it gives {t}, and this cell's list has no {extra}"
            return FlagSpelling(None, why=why, use=u)
    whole = next((u for u in uses if not u.loop), None)
    if whole is not None and len(chosen) != 1:
        why = (
            f"it takes one arch, {whole.source}'s whole value, and this cell's list gives "
            f"{len(chosen)} there ({';'.join(chosen) or 'none'})"
        )
        return FlagSpelling(None, why=why, use=whole)
    left = Targets(want.cubins - got.cubins, want.ptx - got.ptx)
    return FlagSpelling(";".join(chosen), tuple(left.names()))


def union(found: Iterable[Targets]) -> Targets:
    """The targets of all of ``found``."""
    found = list(found)
    return Targets(
        frozenset(a for t in found for a in t.cubins), frozenset(a for t in found for a in t.ptx)
    )


def within(t: Targets, want: Targets) -> bool:
    """Whether ``want`` holds every target of ``t``."""
    return t.cubins <= want.cubins and t.ptx <= want.ptx
