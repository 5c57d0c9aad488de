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

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

MAYBE = None  # the third truth value
Tri = bool | None
Value = int | None  # None: unknown

ARCH_MACROS = (
    "__CUDA_ARCH__",
    "__CUDA_ARCH_SPECIFIC__",
    "__CUDA_ARCH_FAMILY_SPECIFIC__",
    "__CUDA_ARCH_LIST__",
)
_FEAT = re.compile(r"__CUDA_ARCH_FEAT_SM[0-9]+_ALL")


def is_arch_macro(name: str) -> bool:
    return name in ARCH_MACROS or bool(_FEAT.fullmatch(name))


# ---------------------------------------------------------------------------------------
# Source lines: comments removed, continuations joined, line numbers kept.


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


def _strip_comments(raw: str, in_block: bool) -> tuple[str, bool]:
    out: list[str] = []
    i, n = 0, len(raw)
    quote = ""
    while i < n:
        c = raw[i]
        if in_block:
            end = raw.find("*/", i)
            if end < 0:
                return "".join(out), True
            in_block = False
            i = end + 2
            out.append(" ")
            continue
        if quote:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(raw[i + 1])
                i += 2
                continue
            if c == quote:
                quote = ""
            i += 1
            continue
        if c in "\"'":
            quote = c
            out.append(c)
        elif raw.startswith("//", i):
            break
        elif raw.startswith("/*", i):
            in_block = True
            i += 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out).rstrip(), in_block


_DIRECTIVE = re.compile(r"^\s*#\s*([A-Za-z_]+)\s*(.*)$")


def directive(line: Line) -> tuple[str, str] | None:
    match = _DIRECTIVE.match(line.text)
    return (match[1], match[2].strip()) if match else None


# ---------------------------------------------------------------------------------------
# Expressions.

_TOKEN = re.compile(
    r"\s*(?:(?P<num>0[xX][0-9A-Fa-f]+|[0-9]+)[uUlL]*|(?P<id>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<chr>'(?:\\.|[^'])')|(?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>!~&|^?:(),]))"
)


class Unparsable(Exception):
    """An expression the evaluator does not understand (a cast, a string...)."""


def tokenize(text: str) -> list[str]:
    tokens, i = [], 0
    text = text.strip()
    while i < len(text):
        match = _TOKEN.match(text, i)
        if not match or match.end() == i:
            if text[i:].strip() == "":
                break
            raise Unparsable(f"cannot read {text[i:]!r}")
        i = match.end()
        if match["num"]:
            tokens.append(match["num"])
        elif match["chr"]:
            tokens.append(str(ord(match["chr"][1:-1][-1])))
        else:
            tokens.append(match["id"] or match["op"])
    return tokens


@dataclass(frozen=True)
class Macro:
    name: str
    body: tuple[str, ...]  # tokens (empty: defined to nothing)
    params: tuple[str, ...] | None = None  # function-like when not None
    raw: str = ""


class Macros:
    """One configuration's macro table. A name is defined (``table``), certainly undefined
    (``absent``: #undef'd, or an include guard before its first #define), or unknown
    (``unknown``: defined in a branch of unknown state, or never seen: a -D flag or a
    system header may define it). nvcc's own names (``__CUDA*``) are never unknown."""

    def __init__(
        self,
        initial: Mapping[str, Macro] | None = None,
        owned: frozenset[str] = frozenset(),
        absent: Iterable[str] = (),
    ) -> None:
        self.table: dict[str, Macro] = dict(initial or {})
        self.unknown: set[str] = set()
        # -U names, and the sources' own names (see the module docstring) not given -D
        self.absent: set[str] = set(absent) | (set(owned) - set(self.table))

    def define(self, macro: Macro, certain: bool) -> None:
        if certain:
            self.table[macro.name] = macro
            self.unknown.discard(macro.name)
            self.absent.discard(macro.name)
        else:
            existing = self.table.get(macro.name)
            if existing != macro:
                self.table.pop(macro.name, None)
                self.absent.discard(macro.name)
                self.unknown.add(macro.name)

    def undef(self, name: str, certain: bool) -> None:
        if certain:
            self.table.pop(name, None)
            self.unknown.discard(name)
            self.absent.add(name)
        elif name in self.table or name not in self.absent:
            self.table.pop(name, None)
            self.unknown.add(name)

    def assume_absent(self, name: str) -> None:
        """An include guard seen for the first time: undefined, not unknown."""
        if name not in self.table and name not in self.unknown:
            self.absent.add(name)


def parse_define(rest: str) -> Macro | None:
    match = re.match(r"([A-Za-z_][A-Za-z_0-9]*)(\(([^)]*)\))?\s*(.*)$", rest)
    if not match:
        return None
    name, params, body = match[1], match[3], match[4]
    try:
        tokens = tuple(tokenize(body)) if body else ()
    except Unparsable:
        tokens = ("<unparsable>",)
    plist = None
    if match[2] is not None:
        plist = tuple(p.strip() for p in params.split(",") if p.strip())
    return Macro(name, tokens, plist, body)


@dataclass
class Evaluation:
    value: Value
    unknown: set[str] = field(default_factory=set)  # identifiers that made it unknown
    arch: bool = False  # an arch macro took part


def evaluate(text: str, macros: Macros) -> Evaluation:
    """Evaluate a ``#if`` expression for one configuration (three-valued)."""
    ev = Evaluation(None)
    tokens = _expand(tokenize(text), macros, ev, set())
    parser = _Parser(tokens, ev)
    value = parser.ternary()
    if parser.i != len(tokens):
        raise Unparsable(f"unexpected {tokens[parser.i]!r}")
    ev.value = value
    return ev


def _expand(tokens: list[str], macros: Macros, ev: Evaluation, hiding: set[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "defined":
            # defined X / defined(X): resolved here, before expansion
            j = i + 1
            paren = j < len(tokens) and tokens[j] == "("
            if paren:
                j += 1
            if j >= len(tokens) or not re.match(r"[A-Za-z_]", tokens[j]):
                raise Unparsable("defined without a name")
            name = tokens[j]
            if is_arch_macro(name):
                ev.arch = True
            if name in macros.table:
                out.append("1")
            elif name in macros.unknown or _undeclared(name, macros):
                ev.unknown.add(name)
                out.append("<unknown>")
            else:
                out.append("0")
            i = j + (2 if paren else 1)
            continue
        if tok in ("true", "false") and tok not in macros.table:
            # CUDA sources are C++: in a #if, true and false are 1 and 0 (CUTLASS's
            # CUDA_ARCH_CONDITIONAL(X) expands to (false) on plain targets)
            out.append("1" if tok == "true" else "0")
            i += 1
            continue
        if tok in _QUERIES and i + 1 < len(tokens) and tokens[i + 1] == "(":
            # __has_include(<x>) and friends: what the compiler has, which a lint cannot know
            _, i = _arguments(tokens, i + 1)
            ev.unknown.add(tok)
            out.append("<unknown>")
            continue
        if re.match(r"[A-Za-z_]", tok) and tok not in hiding:
            if is_arch_macro(tok):
                ev.arch = True
            macro = macros.table.get(tok)
            if macro is None:
                unknown = tok in macros.unknown or _undeclared(tok, macros)
                i += 1
                if unknown and i < len(tokens) and tokens[i] == "(":
                    _, i = _arguments(tokens, i)  # F(1000) of an unknown F: unknown as a whole
                if unknown:
                    ev.unknown.add(tok)
                    out.append("<unknown>")
                else:
                    out.append("0")
                continue
            if macro.params is None:
                out += _expand(list(macro.body), macros, ev, hiding | {tok})
                i += 1
                continue
            args, i = _arguments(tokens, i + 1)
            if args is None:
                ev.unknown.add(tok)
                out.append("<unknown>")
                continue
            body = _substitute(macro, args)
            out += _expand(body, macros, ev, hiding | {tok})
            continue
        out.append(tok)
        i += 1
    return out


_QUERIES = {
    "__has_include",
    "__has_include_next",
    "__has_attribute",
    "__has_cpp_attribute",
    "__has_builtin",
    "__has_feature",
    "__has_extension",
}


def _undeclared(name: str, macros: Macros) -> bool:
    """Not defined by anything this walk has seen: unknown, unless nvcc owns the name (an
    arch macro the configuration leaves undefined is undefined, not unknown) or the walk
    knows it is undefined."""
    return not (is_arch_macro(name) or name.startswith("__CUDA") or name in macros.absent)


def _arguments(tokens: list[str], i: int) -> tuple[list[list[str]] | None, int]:
    if i >= len(tokens) or tokens[i] != "(":
        return None, i
    depth = 0
    args: list[list[str]] = []
    cur: list[str] = []
    i += 1
    while i < len(tokens):
        tok = tokens[i]
        if tok == "(":
            depth += 1
        elif tok == ")":
            if depth == 0:
                args.append(cur)
                return args, i + 1
            depth -= 1
        elif tok == "," and depth == 0:
            args.append(cur)
            cur = []
            i += 1
            continue
        cur.append(tok)
        i += 1
    return None, i


def _substitute(macro: Macro, args: list[list[str]]) -> list[str]:
    params = macro.params or ()
    mapping = dict(zip(params, args, strict=False))
    out: list[str] = []
    for tok in macro.body:
        out += mapping.get(tok, [tok])
    return out


class _Parser:
    """Precedence climbing over C's preprocessor operators, three-valued."""

    BINARY: ClassVar[list[tuple[str, ...]]] = [
        ("||",),
        ("&&",),
        ("|",),
        ("^",),
        ("&",),
        ("==", "!="),
        ("<", "<=", ">", ">="),
        ("<<", ">>"),
        ("+", "-"),
        ("*", "/", "%"),
    ]

    def __init__(self, tokens: list[str], ev: Evaluation) -> None:
        self.tokens = tokens
        self.i = 0
        self.ev = ev

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        if self.i >= len(self.tokens):
            raise Unparsable("the expression ends too early")
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def ternary(self) -> Value:
        cond = self.binary(0)
        if self.peek() != "?":
            return cond
        self.take()
        a = self.ternary()
        if self.take() != ":":
            raise Unparsable("expected ':'")
        b = self.ternary()
        if cond is None:
            return a if a == b else None
        return a if cond else b

    def binary(self, level: int) -> Value:
        if level == len(self.BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self.BINARY[level]:
            op = self.take()
            right = self.binary(level + 1)
            left = _apply(op, left, right)
        return left

    def unary(self) -> Value:
        tok = self.take()
        if tok == "(":
            value = self.ternary()
            if self.take() != ")":
                raise Unparsable("expected ')'")
            return value
        if tok in ("!", "~", "-", "+"):
            value = self.unary()
            if value is None:
                return None
            return {"!": int(not value), "~": ~value, "-": -value, "+": value}[tok]
        if tok == "<unknown>":
            return None
        if re.fullmatch(r"0[xX][0-9A-Fa-f]+", tok):
            return int(tok, 16)
        if re.fullmatch(r"0[0-7]*", tok):
            return int(tok, 8)
        if tok.isdigit():
            return int(tok)
        raise Unparsable(f"unexpected {tok!r}")


def _apply(op: str, a: Value, b: Value) -> Value:
    if op == "&&":
        if a == 0 or b == 0:
            return 0
        return None if a is None or b is None else 1
    if op == "||":
        if (a is not None and a != 0) or (b is not None and b != 0):
            return 1
        return None if a is None or b is None else 0
    if a is None or b is None:
        return None
    if op in ("/", "%") and b == 0:
        raise Unparsable("division by zero")
    return {
        "|": lambda: a | b,
        "^": lambda: a ^ b,
        "&": lambda: a & b,
        "==": lambda: int(a == b),
        "!=": lambda: int(a != b),
        "<": lambda: int(a < b),
        "<=": lambda: int(a <= b),
        ">": lambda: int(a > b),
        ">=": lambda: int(a >= b),
        "<<": lambda: a << b if 0 <= b < 64 else 0,
        ">>": lambda: a >> b if 0 <= b < 64 else 0,
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "/": lambda: int(a / b),
        "%": lambda: a - b * int(a / b),
    }[op]()


# ---------------------------------------------------------------------------------------
# Walking translation units.


@dataclass(frozen=True)
class Region:
    """One branch of an ``#if`` chain: where it is, its guard, and its body's lines."""

    file: str
    line: int  # the branch directive's line
    chain: tuple[str, int]  # (file, line of the chain's #if)
    index: int  # 0 for the #if, 1.. for #elif/#else
    guard: str  # as written: "#if __CUDA_ARCH__ >= 890"
    parent: tuple[str, int] | None  # the enclosing region, if any
    body: tuple[str, ...] = ()  # the branch's own lines (nested directives included)


@dataclass
class Walk:
    """What one walk found, per configuration."""

    configs: int
    states: dict[tuple[str, int], list[Tri]] = field(default_factory=dict)
    regions: dict[tuple[str, int], Region] = field(default_factory=dict)
    errors: list[tuple[str, int, str, list[Tri]]] = field(default_factory=list)
    not_understood: dict[tuple[str, int], str] = field(default_factory=dict)
    arch_chains: set[tuple[str, int]] = field(default_factory=set)  # a condition uses an arch macro
    skipped: dict[str, str] = field(default_factory=dict)  # path -> why
    missing: set[str] = field(default_factory=set)  # includes not found (outside the scan)
    files: set[str] = field(default_factory=set)
    unfinished: list[str] = field(default_factory=list)  # roots the budget left unscanned
    seconds: float = 0.0


Resolver = Callable[[str, bool, str], str | None]  # (name, quoted, including file) -> path
Reader = Callable[[str], str]


def _and(a: Tri, b: Tri) -> Tri:
    if a is False or b is False:
        return False
    return True if a is True and b is True else MAYBE


def _not(a: Tri) -> Tri:
    return MAYBE if a is MAYBE else not a


def _or(a: Tri, b: Tri) -> Tri:
    if a is True or b is True:
        return True
    return False if a is False and b is False else MAYBE


def _tri(value: Value) -> Tri:
    return MAYBE if value is None else value != 0


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


def _pragma_once(lines: Sequence[Line]) -> bool:
    for line in lines[:200]:
        found = directive(line)
        if found is not None and found[0] == "pragma" and found[1].split()[:1] == ["once"]:
            return True
    return False


def _covered(before: Sequence[Tri], now: Sequence[Tri]) -> bool:
    """Does an earlier walk of a file (per-config states ``before``) cover one now? A
    config must be off now, or have been certainly on before."""
    return all(n is False or b is True for b, n in zip(before, now, strict=True))


def _include_guard(lines: Sequence[Line]) -> str | None:
    """``X`` when a file starts ``#ifndef X`` / ``#define X`` (an include guard)."""
    found = [d for d in (directive(line) for line in lines[:200]) if d is not None][:2]
    if len(found) == 2 and found[0][0] == "ifndef" and found[1][0] == "define":
        name = found[0][1].split()[0] if found[0][1].split() else ""
        if name and found[1][1].split() and found[1][1].split()[0] == name:
            return name
    return None


class Preprocessor:
    """Walks translation units for a list of configurations (initial macro tables)."""

    def __init__(
        self,
        configs: Sequence[Mapping[str, Macro]],
        read: Reader,
        resolve: Resolver,
        max_depth: int = 64,
        undefined: Iterable[str] = (),
        budget: float | None = None,
        forced: Sequence[str] = (),
        toolkit_headers: Mapping[str, Sequence[Macro]] | None = None,
    ) -> None:
        self.initial = list(configs)
        self.read = read
        self.resolve = resolve
        self.max_depth = max_depth
        self.undefined = frozenset(undefined)  # -U names: undefined in every configuration
        self._cache: dict[str, list[Line]] = {}
        self._once: dict[str, bool] = {}  # path -> guarded (include guard or #pragma once)
        self._walked: dict[str, list[Tri]] = {}  # this translation unit's guarded files
        self.budget = budget  # seconds for the whole walk; None: no limit
        self.forced = list(forced)  # -include / --pre-include files, before each unit
        # headers outside the scan whose macros are known (cuda.h: CUDA_VERSION)
        self.toolkit_headers = dict(toolkit_headers or {})
        self._deadline: float | None = None

    def walk(self, roots: Iterable[str]) -> Walk:
        """Walk each translation unit. Past the budget the walk stops, whole translation
        units at a time: what it found until then stands (preprocessing is sequential), the
        rest is listed in ``unfinished``."""
        result = Walk(len(self.initial))
        started = time.monotonic()
        self._deadline = None if self.budget is None else started + self.budget
        todo = list(roots)
        for i, root in enumerate(todo):
            self._walked = {}
            try:
                owned = self._owned(root, result)
                macros = [Macros(c, owned, self.undefined) for c in self.initial]
                for forced in self.forced:  # nvcc -include: read before the unit itself
                    self._file(forced, macros, [True] * len(macros), None, result, 0, set())
                self._file(root, macros, [True] * len(macros), None, result, 0, set())
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

    def _file(
        self,
        path: str,
        macros: list[Macros],
        active: list[Tri],
        parent: tuple[str, int] | None,
        result: Walk,
        depth: int,
        stack: set[str],
    ) -> None:
        if depth > self.max_depth or path in stack:
            return
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise _OutOfTime
        lines = self._lines(path, result)
        if lines is None:
            return
        guard = _include_guard(lines)
        if path not in self._once:
            self._once[path] = guard is not None or _pragma_once(lines)
        if self._once[path]:
            # A guarded header reached again in a state the first walk covered: a real
            # preprocessor skips its body too. (The walk's cost grows with the text.)
            before = self._walked.get(path)
            if before is not None and _covered(before, active):
                return
            self._walked[path] = (
                list(active)
                if before is None
                else [_or(b, a) for b, a in zip(before, active, strict=True)]
            )
        result.files.add(path)
        if guard is not None:
            for m in macros:
                m.assume_absent(guard)
        frames: list[_Frame] = []
        n = len(macros)
        region_lines: dict[tuple[str, int], list[str]] = {}
        for line in lines:
            state = frames[-1].state if frames else active
            found = directive(line)
            for key in list(region_lines):
                region_lines[key].append(line.text)
            if found is None:
                continue
            name, rest = found
            if name in ("if", "ifdef", "ifndef"):
                unknown: set[str] = set()
                cond = self._condition(name, rest, macros, state, path, line, result, unknown)
                key = (path, line.number)
                region_parent = frames[-1].region if frames else parent
                frames.append(
                    _Frame(
                        key,
                        key,
                        state,
                        [False] * n,
                        [_and(s, c) for s, c in zip(state, cond, strict=True)],
                        0,
                    )
                )
                frames[-1].taken = list(cond)
                frames[-1].unknown = unknown
                self._open(result, key, key, 0, f"#{name} {rest}", region_parent, frames[-1].state)
                region_lines[key] = []
                continue
            if name in ("elif", "else", "elifdef", "elifndef") and frames:
                frame = frames[-1]
                self._close(result, frame.region, region_lines)
                frame.index += 1
                if name == "else":
                    cond = [True] * n
                else:
                    kind = {"elif": "if", "elifdef": "ifdef", "elifndef": "ifndef"}[name]
                    live = [
                        _and(p, _not(t))
                        for p, t in zip(frame.parent_state, frame.taken, strict=True)
                    ]
                    cond = self._condition(
                        kind, rest, macros, live, path, line, result, frame.unknown, name
                    )
                frame.state = [
                    _and(_and(p, _not(t)), c)
                    for p, t, c in zip(frame.parent_state, frame.taken, cond, strict=True)
                ]
                frame.taken = [_or(t, c) for t, c in zip(frame.taken, cond, strict=True)]
                key = (path, line.number)
                frame.region = key
                grand = frames[-2].region if len(frames) > 1 else parent
                self._open(
                    result,
                    key,
                    frame.chain,
                    frame.index,
                    f"#{name} {rest}".strip(),
                    grand,
                    frame.state,
                )
                region_lines[key] = []
                continue
            if name == "endif" and frames:
                self._close(result, frames[-1].region, region_lines)
                frames.pop()
                continue
            here = frames[-1].region if frames else parent
            if name == "define":
                macro = parse_define(rest)
                if macro is not None:
                    for m, s in zip(macros, state, strict=True):
                        if s is not False:
                            m.define(macro, s is True)
            elif name == "undef":
                target = rest.split()[0] if rest.split() else ""
                for m, s in zip(macros, state, strict=True):
                    if s is not False and target:
                        m.undef(target, s is True)
            elif name == "error":
                result.errors.append((path, line.number, f"#error {rest}", list(state)))
            elif name == "include":
                self._include(rest, path, macros, state, here, result, depth, stack | {path})
        for frame in frames:  # an unterminated #if: close what is open
            self._close(result, frame.region, region_lines)

    def _include(
        self,
        rest: str,
        path: str,
        macros: list[Macros],
        state: list[Tri],
        here: tuple[str, int] | None,
        result: Walk,
        depth: int,
        stack: set[str],
    ) -> None:
        if all(s is False for s in state):
            return
        name, target = self._include_target(rest, path)
        if name is None:
            return  # a computed include: not followed
        if target is None:
            result.missing.add(name)
            for macro in self.toolkit_headers.get(name, ()):
                for m, s in zip(macros, state, strict=True):
                    if s is not False:
                        m.define(macro, s is True)
            return
        self._file(target, macros, state, here, result, depth + 1, stack)

    def _condition(
        self,
        kind: str,
        rest: str,
        macros: list[Macros],
        live: list[Tri],
        path: str,
        line: Line,
        result: Walk,
        chain_unknown: set[str],
        written: str = "",
    ) -> list[Tri]:
        """The condition's value per configuration. ``chain_unknown``: the names that left
        the chain's earlier branches undecided (an ``#if defined(RDNA4)`` before an
        ``#elif __CUDA_ARCH__ == 1210``); an arch condition after them is reported as not
        understood for them, and this condition's own unknown names are added."""
        label = f"#{written or kind} {rest}"
        if kind in ("ifdef", "ifndef"):
            rest = f"defined({rest.split(maxsplit=1)[0]})" if rest.split() else "0"
            if kind == "ifndef":
                rest = f"!{rest}"
        out: list[Tri] = []
        arch_unknown: set[str] = set()
        before: set[str] = set()
        own: set[str] = set()
        for m, alive in zip(macros, live, strict=True):
            if alive is False:
                out.append(False)  # not walked for this configuration: any value will do
                continue
            try:
                ev = evaluate(rest, m)
            except (Unparsable, RecursionError) as exc:
                result.not_understood.setdefault((path, line.number), f"{label}: {exc}")
                out.append(MAYBE)
                continue
            if ev.arch:
                result.arch_chains.add((path, line.number))
            if ev.value is None and ev.arch:
                arch_unknown |= ev.unknown
            if ev.arch and alive is MAYBE and chain_unknown:
                before |= chain_unknown
            if ev.value is None:
                own |= ev.unknown
            out.append(_tri(ev.value))
        if arch_unknown:
            result.not_understood.setdefault(
                (path, line.number),
                f"{label}: depends on {', '.join(sorted(arch_unknown))}, which the scanned "
                "files leave undecided (never defined, or defined under a condition not "
                "evaluated; settle it with -D/-U)",
            )
        elif before:
            result.not_understood.setdefault(
                (path, line.number),
                f"{label}: the branches before it depend on "
                f"{', '.join(sorted(before))}, which the scanned files leave undecided "
                "(settle it with -D/-U)",
            )
        chain_unknown |= own
        return out

    @staticmethod
    def _open(
        result: Walk,
        key: tuple[str, int],
        chain: tuple[str, int],
        index: int,
        guard: str,
        parent: tuple[str, int] | None,
        state: list[Tri],
    ) -> None:
        old = result.states.get(key)
        result.states[key] = (
            state if old is None else [_or(a, b) for a, b in zip(old, state, strict=True)]
        )
        if key not in result.regions:
            result.regions[key] = Region(key[0], key[1], chain, index, guard, parent)

    @staticmethod
    def _close(
        result: Walk, key: tuple[str, int], region_lines: dict[tuple[str, int], list[str]]
    ) -> None:
        body = region_lines.pop(key, None)
        region = result.regions.get(key)
        if body is not None and region is not None and not region.body:
            result.regions[key] = Region(
                region.file,
                region.line,
                region.chain,
                region.index,
                region.guard,
                region.parent,
                tuple(body[:-1]),  # without the directive that closed it
            )


def file_resolver(include_dirs: Sequence[Path], inside: Sequence[Path]) -> Resolver:
    """Resolve ``#include`` names on disk: quoted ones beside the including file first, then
    ``include_dirs``; only files under one of ``inside`` are followed (the package's own
    sources and headers, not torch's or the toolkit's)."""
    roots = [p.resolve() for p in inside]

    def resolve(name: str, quoted: bool, including: str) -> str | None:
        candidates = ([Path(including).parent / name] if quoted else []) + [
            d / name for d in include_dirs
        ]
        for candidate in candidates:
            try:
                if candidate.is_file():
                    real = candidate.resolve()
                    if any(real == r or r in real.parents for r in roots):
                        return str(real)
                    return None
            except (OSError, ValueError):
                continue
        return None

    return resolve
