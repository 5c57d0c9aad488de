"""A C preprocessor reading, just deep enough to know which code each CUDA target compiles.

Pure: files come through a ``read`` callback. One walk over a translation unit evaluates
every ``#if``/``#ifdef``/``#ifndef``/``#elif``/``#else`` for several *configurations* at
once (one per target: the macros nvcc defines for it), following ``#define``/``#undef`` and
``#include`` per configuration, so that a macro defined from ``__CUDA_ARCH__`` (``#define
FP8_ENABLED (__CUDA_ARCH__ >= 890)``) or defined inside an arch guard (CUTLASS's
``CUTLASS_ARCH_MMA_SM90A_ENABLED``) is seen the way that target sees it.

Values are three-valued: an identifier no scanned file defines (a system header's, a -D
flag's) is *unknown*, not 0 as in a real preprocessor, because the lint does not see every
header. A name the scanned files ``#define`` themselves (CUTLASS's
``CUTLASS_ARCH_MMA_SM90A_ENABLED``, defined only under an arch guard) is the sources' own:
where none of its ``#define`` lines was reached it is undefined, as the compiler sees it,
unless the command line gives it (``-D``/``-U``, in the initial tables). A branch whose
condition is unknown is walked anyway (its state is "maybe"), so guards nested inside it are
still read; a condition that involves an arch macro and evaluates to unknown, or follows
undecided branches of its chain, is reported as not understood.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from archguard.lint.expressions import (
    MAYBE,
    Macro,
    Macros,
    Tri,
    Unparsable,
    Value,
    evaluate,
    parse_define,
)
from archguard.lint.lines import Line, directive, include_guard, logical_lines, pragma_once
from archguard.lint.regions import arch_value
from archguard.lint.walk import ArchValue, Body, Region, Walk, and_, not_, or_, tri

__all__ = ["ArchValue", "Preprocessor", "Region", "Scan", "Walk"]


Resolver = Callable[[str, bool, str], str | None]  # (name, quoted, including file) -> path
Reader = Callable[[str], str]


@dataclass
class _Frame:
    chain: tuple[str, int]
    region: tuple[str, int]
    parent_state: list[Tri]
    taken: list[Tri]  # has an earlier branch of the chain been taken, per config
    state: list[Tri]  # the current branch's state, per config
    index: int
    unknown: set[str] = field(default_factory=set)  # what left earlier branches undecided


class _OutOfTime(Exception):
    """The walk's budget is spent."""


def _covered(before: Sequence[Tri], now: Sequence[Tri]) -> bool:
    """Does an earlier walk of a guarded file (per-config states ``before``) cover one now?
    Each config is off now, was certainly on before, or is "maybe" now as before (a second
    "maybe" walk adds nothing; NATTEN's CUTLASS under its undecided ``#if`` was walked once
    per include path without that rule)."""
    return all(
        n is False or b is True or (b is MAYBE and n is MAYBE)
        for b, n in zip(before, now, strict=True)
    )


@dataclass(frozen=True)
class Scan:
    """How the walk reaches files, and what the command line settles for every
    configuration."""

    read: Reader
    resolve: Resolver
    undefined: frozenset[str] = frozenset()  # -U names: undefined in every configuration
    forced: tuple[str, ...] = ()  # -include / --pre-include files, before each unit
    budget: float | None = None  # seconds for the whole walk; None: no limit
    # headers outside the scan whose macros are known (cuda.h: CUDA_VERSION; cuda_fp16.h: none)
    toolkit_headers: Mapping[str, Sequence[Macro]] = field(default_factory=dict)
    # names only headers outside the scan define: undefined at the start of a unit, and
    # unknown after an outside header not in ``toolkit_headers``
    outside_names: frozenset[str] = frozenset()
    max_depth: int = 64
    # -D names whose values are not expressions: defined, their values unknown
    opaque: frozenset[str] = frozenset()


class Preprocessor:
    """Walks translation units for a list of configurations (initial macro tables)."""

    def __init__(self, configs: Sequence[Mapping[str, Macro]], scan: Scan) -> None:
        self.initial = list(configs)
        self.scan = scan
        self.read = scan.read
        self.resolve = scan.resolve
        self._cache: dict[str, list[Line]] = {}
        self._once: dict[str, bool] = {}  # path -> guarded (include guard or #pragma once)
        self._walked: dict[str, list[Tri]] = {}  # this translation unit's guarded files
        self._deadline: float | None = None

    def walk(self, roots: Iterable[str]) -> Walk:
        """Walk each translation unit. Past the budget the walk stops, whole translation
        units at a time: what it found until then stands (preprocessing is sequential), the
        rest is listed in ``unfinished``."""
        result = Walk(len(self.initial))
        started = time.monotonic()
        budget = self.scan.budget
        self._deadline = None if budget is None else started + budget
        todo = list(roots)
        for i, root in enumerate(todo):
            self._walked = {}
            try:
                owned = self._owned(root, result)
                macros = [
                    Macros(c, owned, self.scan.undefined | (self.scan.outside_names - c.keys()))
                    for c in self.initial
                ]
                unit = _Unit(result)
                for forced in self.scan.forced:  # nvcc -include: read before the unit itself
                    self._file(forced, macros, [True] * len(macros), unit)
                self._file(root, macros, [True] * len(macros), unit)
            except _OutOfTime:
                result.unfinished = todo[i:]
                break
        result.seconds = time.monotonic() - started
        return result

    def _owned(self, root: str, result: Walk) -> frozenset[str]:
        """Every name a ``#define`` line of the translation unit defines, under any
        condition: the files it can include (each ``#include`` followed, whatever guards
        it), read once."""
        names: set[str] = set()
        seen, todo = {root}, [root]
        while todo:
            path = todo.pop()
            lines = self._lines(path, result)
            for line in lines or ():
                found = directive(line)
                if found is None:
                    continue
                name, rest = found
                if name == "define":
                    macro = parse_define(rest)
                    if macro is not None:
                        names.add(macro.name)
                elif name == "include":
                    _, target = self._include_target(rest, path)
                    if target is not None and target not in seen:
                        seen.add(target)
                        todo.append(target)
        return frozenset(names)

    def _include_target(self, rest: str, path: str) -> tuple[str | None, str | None]:
        """An ``#include``'s (name, resolved path); (None, None) for a computed include."""
        match = re.match(r'"([^"]+)"|<([^>]+)>', rest)
        if not match:
            return None, None
        name, quoted = (match[1], True) if match[1] else (match[2], False)
        return name, self.resolve(name, quoted, path)

    def _lines(self, path: str, result: Walk) -> list[Line] | None:
        if path not in self._cache:
            try:
                self._cache[path] = logical_lines(self.read(path))
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                result.skipped[path] = f"{type(exc).__name__}: {exc}"
                return None
        return self._cache[path]

    def _file(self, path: str, macros: list[Macros], active: list[Tri], unit: _Unit) -> None:
        if unit.depth > self.scan.max_depth or path in unit.stack:
            return
        self.check_time()
        lines = self._lines(path, unit.result)
        if lines is None or self._seen_before(path, lines, active):
            return
        unit.result.files.add(path)
        unit.result.lines[path] = list(lines)
        guard = include_guard(lines)
        if guard is not None:
            for m in macros:
                m.assume_absent(guard)
        _FileWalk(self, path, macros, active, unit).run(lines)

    def check_time(self) -> None:
        """Past the walk's budget: stop (also inside one long file)."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise _OutOfTime

    def _seen_before(self, path: str, lines: Sequence[Line], active: list[Tri]) -> bool:
        """A guarded header reached again in a state the first walk covered: a real
        preprocessor skips its body too. (The walk's cost grows with the text.)"""
        if path not in self._once:
            self._once[path] = include_guard(lines) is not None or pragma_once(lines)
        if not self._once[path]:
            return False
        before = self._walked.get(path)
        if before is not None and _covered(before, active):
            return True
        self._walked[path] = (
            list(active)
            if before is None
            else [or_(b, a) for b, a in zip(before, active, strict=True)]
        )
        return False

    def include(
        self, rest: str, path: str, macros: list[Macros], state: list[Tri], walk: _FileWalk
    ) -> None:
        """Follow an ``#include`` for the configurations that reach it."""
        if all(s is False for s in state):
            return
        name, target = self._include_target(rest, path)
        if name is None:
            return  # a computed include: not followed
        if target is None:
            self._outside(name, macros, state, walk.unit.result)
            return
        here = walk.frames[-1].region if walk.frames else walk.unit.parent
        inner = _Unit(walk.unit.result, walk.unit.depth + 1, walk.unit.stack | {path}, here)
        self._file(target, macros, state, inner)

    def _outside(self, name: str, macros: list[Macros], state: list[Tri], result: Walk) -> None:
        """An ``#include`` outside the scan: what it defines is known, or it may define any
        of the outside names still undefined."""
        result.missing.add(name)
        known = self.scan.toolkit_headers.get(name)
        if known is not None:
            for macro in known:
                _define(macros, state, macro)
            return
        for outside in self.scan.outside_names:
            for m, s in zip(macros, state, strict=True):
                if s is not False and m.may_define(outside):
                    result.outside_unknown.setdefault(outside, name)


@dataclass(frozen=True)
class _Unit:
    """Where a file is walked from: the walk's result, the include depth and stack, and
    the region holding the ``#include``."""

    result: Walk
    depth: int = 0
    stack: frozenset[str] = frozenset()
    parent: tuple[str, int] | None = None


def _define(macros: list[Macros], state: list[Tri], macro: Macro) -> None:
    for m, s in zip(macros, state, strict=True):
        if s is not False:
            m.define(macro, s is True)


def _as_expression(kind: str, rest: str) -> str:
    """An ``#if``/``#ifdef``/``#ifndef``'s condition as an expression."""
    if kind == "if":
        return rest
    name = f"defined({rest.split(maxsplit=1)[0]})" if rest.split() else "0"
    return f"!{name}" if kind == "ifndef" else name


_ELSE_KINDS = {"elif": "if", "elifdef": "ifdef", "elifndef": "ifndef"}


class _FileWalk:
    """One file's directives in order, for every configuration at once."""

    def __init__(
        self, pp: Preprocessor, path: str, macros: list[Macros], active: list[Tri], unit: _Unit
    ) -> None:
        self.pp, self.path, self.macros, self.active = pp, path, macros, active
        self.parent, self.unit = unit.parent, unit
        self.result = unit.result
        self.frames: list[_Frame] = []
        # each open branch's first body line, as an index into ``lines`` (bodies are views)
        self.starts: dict[tuple[str, int], int] = {}
        self.lines: Sequence[Line] = ()
        self.at = 0  # the index of the line being read

    def run(self, lines: Sequence[Line]) -> None:
        self.lines = lines
        for self.at, line in enumerate(lines):
            if self.at % 1024 == 1023:
                self.pp.check_time()
            found = directive(line)
            if found is None:
                if "__CUDA_ARCH" in line.text:
                    self._value(line)
                continue
            name, rest = found
            if name in ("if", "ifdef", "ifndef"):
                self._if(name, rest, line)
            elif name in ("else", *_ELSE_KINDS) and self.frames:
                self._branch(name, rest, line)
            elif name == "endif" and self.frames:
                self._close(self.frames.pop().region)
            else:
                self._statement(name, rest, line)
        self.at = len(lines) - 1  # an unterminated #if: close what is open
        for frame in self.frames:
            self._close(frame.region)

    def _value(self, line: Line) -> None:
        """A ``constexpr`` declaration whose initializer reads an arch macro, evaluated as
        each configuration that compiles it sees it."""
        found = arch_value(line.text)
        if found is None:
            return
        name, init = found
        values: list[Value] = []
        for m, s in zip(self.macros, self.state, strict=True):
            try:
                values.append(evaluate(init, m).value if s is True else None)
            except (Unparsable, RecursionError):
                values.append(None)
        key = (self.path, line.number)
        self.result.values.setdefault(key, ArchValue(name, line.text.strip(), values))

    @property
    def state(self) -> list[Tri]:
        return self.frames[-1].state if self.frames else self.active

    def _if(self, name: str, rest: str, line: Line) -> None:
        state = self.state
        unknown: set[str] = set()
        cond = self._condition(_as_expression(name, rest), f"#{name} {rest}", state, line, unknown)
        key = (self.path, line.number)
        region_parent = self.frames[-1].region if self.frames else self.parent
        entered = [and_(s, c) for s, c in zip(state, cond, strict=True)]
        self.frames.append(_Frame(key, key, state, list(cond), entered, 0, unknown))
        self._open(
            Region(self.path, line.number, key, 0, f"#{name} {rest}", region_parent), entered
        )

    def _branch(self, name: str, rest: str, line: Line) -> None:
        frame = self.frames[-1]
        self._close(frame.region)
        frame.index += 1
        live = [and_(p, not_(t)) for p, t in zip(frame.parent_state, frame.taken, strict=True)]
        if name == "else":
            cond: list[Tri] = [True] * len(self.macros)
        else:
            expression = _as_expression(_ELSE_KINDS[name], rest)
            cond = self._condition(expression, f"#{name} {rest}", live, line, frame.unknown)
        frame.state = [and_(v, c) for v, c in zip(live, cond, strict=True)]
        frame.taken = [or_(t, c) for t, c in zip(frame.taken, cond, strict=True)]
        key = (self.path, line.number)
        frame.region = key
        grand = self.frames[-2].region if len(self.frames) > 1 else self.parent
        guard = f"#{name} {rest}".strip()
        self._open(Region(*key, frame.chain, frame.index, guard, grand), frame.state)

    def _statement(self, name: str, rest: str, line: Line) -> None:
        state = self.state
        if name == "define":
            macro = parse_define(rest)
            if macro is not None:
                _define(self.macros, state, macro)
        elif name == "undef":
            target = rest.split(maxsplit=1)[0] if rest.split() else ""
            for m, s in zip(self.macros, state, strict=True):
                if s is not False and target:
                    m.undef(target, s is True)
        elif name == "error":
            self.result.errors.append((self.path, line.number, f"#error {rest}", list(state)))
        elif name == "include":
            self.pp.include(rest, self.path, self.macros, state, self)

    def _condition(
        self, expression: str, label: str, live: list[Tri], line: Line, chain_unknown: set[str]
    ) -> list[Tri]:
        """The condition's value per configuration. ``chain_unknown``: the names that left
        the chain's earlier branches undecided (an ``#if defined(RDNA4)`` before an
        ``#elif __CUDA_ARCH__ == 1210``); an arch condition after them is reported as not
        understood for them, and this condition's own unknown names are added."""
        where = (self.path, line.number)
        out: list[Tri] = []
        arch_unknown: set[str] = set()
        before: set[str] = set()
        own: set[str] = set()
        for m, alive in zip(self.macros, live, strict=True):
            if alive is False:
                out.append(False)  # not walked for this configuration: any value will do
                continue
            try:
                ev = evaluate(expression, m)
            except (Unparsable, RecursionError) as exc:
                self.result.not_understood.setdefault(where, f"{label}: {exc}")
                out.append(MAYBE)
                continue
            if ev.arch:
                self.result.arch_chains.add(where)
            if ev.value is None and ev.arch:
                arch_unknown |= ev.unknown
            if ev.arch and alive is MAYBE and chain_unknown:
                before |= chain_unknown
            if ev.value is None:
                own |= ev.unknown
            out.append(tri(ev.value))
        self._say_undecided(where, label, arch_unknown, before)
        chain_unknown |= own
        return out

    def _say_undecided(
        self, where: tuple[str, int], label: str, arch_unknown: set[str], before: set[str]
    ) -> None:
        if arch_unknown:
            how = (  # (an opaque -D value is settled already: it is what it is)
                ""
                if arch_unknown <= self.pp.scan.opaque
                else " (never defined, or defined under a condition not evaluated; settle it "
                "with -D/-U)"
            )
            self.result.not_understood.setdefault(
                where, f"{label}: depends on {self._why_unknown(arch_unknown)}{how}"
            )
        elif before:
            self.result.not_understood.setdefault(
                where,
                f"{label}: the branches before it depend on {self._why_unknown(before)} "
                "(settle it with -D/-U)",
            )

    def _why_unknown(self, names: set[str]) -> str:
        """The names, and what left them undecided: the scanned files, or a header outside
        the scan that archguard's bundled cuda_headers.yml does not know."""
        outside = self.result.outside_unknown
        opaque = self.pp.scan.opaque
        own = sorted(n for n in names if n not in outside and n not in opaque)
        parts = [f"{', '.join(own)}, which the scanned files leave undecided"] if own else []
        parts += [
            f"{n}, whose -D value is not an expression the lint reads (taken as unknown)"
            for n in sorted(names & opaque)
        ]
        parts += [
            f"{n}, which <{outside[n]}> (outside the scan, not in archguard's bundled "
            "cuda_headers.yml) may define"
            for n in sorted(names)
            if n in outside
        ]
        return "; ".join(parts)

    def _open(self, region: Region, state: list[Tri]) -> None:
        key = (region.file, region.line)
        old = self.result.states.get(key)
        self.result.states[key] = (
            state if old is None else [or_(a, b) for a, b in zip(old, state, strict=True)]
        )
        self.result.regions.setdefault(key, region)
        self.starts[key] = self.at + 1

    def _close(self, key: tuple[str, int]) -> None:
        start = self.starts.pop(key, None)
        region = self.result.regions.get(key)
        if start is not None and region is not None and not region.body:
            # up to the directive that closed it (at EOF: the last line is left out, too)
            stop = self.at
            span = (
                (self.lines[start].number, self.lines[stop - 1].number)
                if stop > start
                else (region.line, region.line)
            )
            body = Body(self.lines, start, stop)
            self.result.regions[key] = dataclasses.replace(region, body=body, span=span)
