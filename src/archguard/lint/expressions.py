"""``#if`` expressions, three-valued: macro tables per configuration, expansion, and C's
preprocessor operators. An identifier no scanned file defines is *unknown* (``None``), not 0
(see ``archguard.lint.preprocessor``); ``true``/``false`` are C++'s 1 and 0."""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
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


_TOKEN = re.compile(
    r"\s*(?:(?P<num>0[xX][0-9A-Fa-f]+|[0-9]+)[uUlL]*|(?P<id>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<chr>'(?:\\.|[^'])')|(?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>!~&|^?:(),]))"
)


class Unparsable(Exception):
    """An expression the evaluator does not understand (a cast, a string...)."""


# How deep the evaluator follows nested parentheses, operators and macro expansions before it
# gives up on an expression as not understood (no real #if comes near; a hostile one would
# otherwise take Python's stack), and how many tokens one expression may expand to (macros
# that each use the one before twice double it at every step)
MAX_DEPTH = 100
MAX_TOKENS = 20_000


# C++'s alternative tokens ([lex.digraph]): operators, never identifiers, in #if as anywhere
ALTERNATIVE_TOKENS = {
    "and": "&&",
    "or": "||",
    "not": "!",
    "bitand": "&",
    "bitor": "|",
    "xor": "^",
    "compl": "~",
    "not_eq": "!=",
}


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
        elif match["id"]:
            tokens.append(ALTERNATIVE_TOKENS.get(match["id"], match["id"]))
        else:
            tokens.append(match["op"])
    return tokens


@dataclass(frozen=True)
class Macro:
    name: str
    body: tuple[str, ...]  # tokens (empty: defined to nothing)
    params: tuple[str, ...] | None = None  # function-like when not None
    raw: str = ""
    # defined, to a value the lint does not read as an expression (-DNS_OPEN='namespace x {'):
    # `defined` is certain, its value unknown
    opaque: bool = False


def given_macro(name: str, value: str) -> Macro:
    """A command line's ``-DNAME=VALUE``: its tokens, or opaque where they are not an
    expression's (``namespace cuaev {``)."""
    try:
        return Macro(name, tuple(tokenize(value)), raw=value)
    except Unparsable:
        return Macro(name, (), raw=value, opaque=True)


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

    def may_define(self, name: str) -> bool:
        """A header the lint cannot read may define ``name``: certainly undefined becomes
        unknown. True when it did."""
        if name not in self.absent:
            return False
        self.absent.discard(name)
        self.unknown.add(name)
        return True

    def assume_absent(self, name: str) -> None:
        """An include guard seen for the first time: undefined, not unknown."""
        if name not in self.table and name not in self.unknown:
            self.absent.add(name)


_DEFINE = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)(\(([^)]*)\))?")


def parse_define(rest: str) -> Macro | None:
    """A ``#define``'s macro (``rest``: the line after ``#define``); None when it names none.
    A body the evaluator cannot read is kept as a token that is never a value."""
    match = _DEFINE.match(rest)
    if not match:
        return None
    name, params, body = match[1], match[3], rest[match.end() :].lstrip()
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
    tokens: int = 0  # tokens expansion has produced so far (at most MAX_TOKENS)


# `__has_include(<cuda_fp8.h>)`: the header name is not an expression; what the compiler
# would find is unknown to the lint either way
# (``<[^<>]*>``: a scan stops at the next ``<``, so that a run of ``__has_include(<`` costs
# its length, not its square)
_HEADER_NAME = re.compile(r"\b(__has_include(?:_next)?)\s*\(\s*(?:<[^<>]*>|\"[^\"]*\")\s*\)")


@functools.lru_cache(maxsize=256)
def _condition_tokens(text: str) -> tuple[str, ...] | str:
    """A ``#if`` expression's tokens, or why it has none: read once for all the
    configurations that evaluate it."""
    try:
        return tuple(tokenize(_HEADER_NAME.sub(r"\1(0)", text)))
    except Unparsable as exc:
        return str(exc)


def evaluate(text: str, macros: Macros) -> Evaluation:
    """Evaluate a ``#if`` expression for one configuration (three-valued)."""
    read = _condition_tokens(text)
    if isinstance(read, str):
        raise Unparsable(read)
    ev = Evaluation(None)
    tokens = _expand(list(read), macros, ev, set())
    parser = _Parser(tokens, ev)
    value = parser.ternary()
    if parser.i != len(tokens):
        raise Unparsable(f"unexpected {tokens[parser.i]!r}")
    ev.value = value
    return ev


def _expand(tokens: list[str], macros: Macros, ev: Evaluation, hiding: set[str]) -> list[str]:
    if len(hiding) > MAX_DEPTH:
        raise Unparsable(f"macros expand more than {MAX_DEPTH} levels deep")
    out: list[str] = []
    i = 0
    while i < len(tokens):
        ev.tokens += 1
        if ev.tokens > MAX_TOKENS:
            raise Unparsable(f"the expression expands past {MAX_TOKENS} tokens")
        tok = tokens[i]
        if tok == "defined":
            value, i = _defined(tokens, i, macros, ev)
            out.append(value)
        elif tok in ("true", "false") and tok not in macros.table:
            # CUDA sources are C++: in a #if, true and false are 1 and 0 (CUTLASS's
            # CUDA_ARCH_CONDITIONAL(X) expands to (false) on plain targets)
            out.append("1" if tok == "true" else "0")
            i += 1
        elif tok in _QUERIES and i + 1 < len(tokens) and tokens[i + 1] == "(":
            # __has_include(<x>) and friends: what the compiler has, which a lint cannot know
            _, i = _arguments(tokens, i + 1)
            ev.unknown.add(tok)
            out.append("<unknown>")
        elif _is_name(tok) and tok not in hiding:
            expanded, i = _identifier(tokens, i, macros, ev, hiding)
            out += expanded
        elif _is_name(tok):
            # a macro's own name inside its expansion is not expanded again, and an
            # identifier left after expansion is 0 in a #if (C11 6.10.1)
            out.append("0")
            i += 1
        else:
            out.append(tok)
            i += 1
    return out


def _is_name(token: str) -> bool:
    """An identifier's token (the tokenizer's names start with [A-Za-z_])."""
    first = token[:1]
    return first == "_" or (first.isascii() and first.isalpha())


def _defined(tokens: list[str], i: int, macros: Macros, ev: Evaluation) -> tuple[str, int]:
    """``defined X`` / ``defined(X)`` at ``tokens[i]``, resolved before expansion: its
    value token and the index after it."""
    j = i + 1
    paren = j < len(tokens) and tokens[j] == "("
    if paren:
        j += 1
    if j >= len(tokens) or not _is_name(tokens[j]):
        raise Unparsable("defined without a name")
    name = tokens[j]
    if is_arch_macro(name):
        ev.arch = True
    if name in macros.table:
        value = "1"
    elif name in macros.unknown or _undeclared(name, macros):
        ev.unknown.add(name)
        value = "<unknown>"
    else:
        value = "0"
    return value, j + (2 if paren else 1)


def _identifier(
    tokens: list[str], i: int, macros: Macros, ev: Evaluation, hiding: set[str]
) -> tuple[list[str], int]:
    """The identifier at ``tokens[i]`` expanded (a macro), 0 (certainly undefined) or
    unknown; and the index after it (and after its arguments, for a function-like one)."""
    tok = tokens[i]
    if is_arch_macro(tok):
        ev.arch = True
    macro = macros.table.get(tok)
    if macro is None:
        unknown = tok in macros.unknown or _undeclared(tok, macros)
        i += 1
        if not unknown:
            return ["0"], i
        if i < len(tokens) and tokens[i] == "(":
            _, i = _arguments(tokens, i)  # F(1000) of an unknown F: unknown as a whole
        ev.unknown.add(tok)
        return ["<unknown>"], i
    if macro.opaque:  # a -D value that is no expression: defined, its value unknown
        ev.unknown.add(tok)
        return ["<unknown>"], i + 1
    if macro.params is None:
        return _expand(list(macro.body), macros, ev, hiding | {tok}), i + 1
    args, i = _arguments(tokens, i + 1)
    if args is None:
        ev.unknown.add(tok)
        return ["<unknown>"], i
    return _expand(_substitute(macro, args), macros, ev, hiding | {tok}), i


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
        self.depth = 0  # nested parentheses, unary operators and ternaries

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unparsable(f"the expression nests more than {MAX_DEPTH} levels deep")

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        if self.i >= len(self.tokens):
            raise Unparsable("the expression ends too early")
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def ternary(self) -> Value:
        self.deeper()
        cond = self.binary(0)
        if self.peek() != "?":
            self.depth -= 1
            return cond
        self.take()
        a = self.ternary()
        if self.take() != ":":
            raise Unparsable("expected ':'")
        b = self.ternary()
        self.depth -= 1
        if cond is None:
            return a if a == b else None
        return a if cond else b

    def binary(self, floor: int) -> Value:
        """Operators binding at least as tightly as level ``floor`` (left to right): one call
        per operand, whatever the number of levels."""
        left = self.unary()
        while True:
            op = self.peek()
            if op is None or _LEVEL.get(op, -1) < floor:
                return left
            self.take()
            left = _apply(op, left, self.binary(_LEVEL[op] + 1))

    def unary(self) -> Value:
        tok = self.take()
        if tok == "(":
            value = self.ternary()
            if self.take() != ")":
                raise Unparsable("expected ')'")
            return value
        if tok in ("!", "~", "-", "+"):
            self.deeper()
            value = self.unary()
            self.depth -= 1
            if value is None:
                return None
            return {"!": int(not value), "~": ~value, "-": -value, "+": value}[tok]
        if tok == "<unknown>":
            return None
        if tok[:2] in ("0x", "0X") and len(tok) > 2 and tok[2:].isascii() and tok[2:].isalnum():
            try:
                return int(tok, 16)
            except ValueError:
                raise Unparsable(f"unexpected {tok!r}") from None
        if tok.isascii() and tok.isdigit():
            return int(tok, 8) if tok.startswith("0") and tok.strip("01234567") == "" else int(tok)
        raise Unparsable(f"unexpected {tok!r}")


_LEVEL = {op: level for level, ops in enumerate(_Parser.BINARY) for op in ops}


def _apply(op: str, a: Value, b: Value) -> Value:
    if op in ("&&", "||"):  # three-valued: one known operand may decide alone
        decides = int(op == "||")
        if any(v is not None and int(v != 0) == decides for v in (a, b)):
            return decides
        return None if a is None or b is None else 1 - decides
    if a is None or b is None:
        return None
    if op in ("/", "%"):
        if b == 0:
            raise Unparsable("division by zero")
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C: toward zero
        return _wrapped(quotient if op == "/" else a - b * quotient)
    if op in ("<<", ">>"):
        return _wrapped(a << b if op == "<<" else a >> b) if 0 <= b < 64 else 0
    return _wrapped(_OPERATORS[op](a, b))


# the preprocessor's arithmetic is intmax_t's: 64 bits (a product of a thousand factors is
# not a number a thousand digits long)
_OPERATORS: dict[str, Callable[[int, int], int]] = {
    "|": operator.or_,
    "^": operator.xor,
    "&": operator.and_,
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b),
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
}


def _wrapped(value: int) -> int:
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)
