"""``#if`` expressions, three-valued: macro tables per configuration, expansion, and C's
preprocessor operators. An identifier no scanned file defines is *unknown* (``None``), not 0
(see ``archguard.lint.preprocessor``); ``true``/``false`` are C++'s 1 and 0."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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


# `__has_include(<cuda_fp8.h>)`: the header name is not an expression; what the compiler
# would find is unknown to the lint either way
_HEADER_NAME = re.compile(r"\b(__has_include(?:_next)?)\s*\(\s*(?:<[^>]*>|\"[^\"]*\")\s*\)")


def evaluate(text: str, macros: Macros) -> Evaluation:
    """Evaluate a ``#if`` expression for one configuration (three-valued)."""
    text = _HEADER_NAME.sub(r"\1(0)", text)
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
        elif re.match(r"[A-Za-z_]", tok) and tok not in hiding:
            expanded, i = _identifier(tokens, i, macros, ev, hiding)
            out += expanded
        elif re.match(r"[A-Za-z_]", tok):
            # a macro's own name inside its expansion is not expanded again, and an
            # identifier left after expansion is 0 in a #if (C11 6.10.1)
            out.append("0")
            i += 1
        else:
            out.append(tok)
            i += 1
    return out


def _defined(tokens: list[str], i: int, macros: Macros, ev: Evaluation) -> tuple[str, int]:
    """``defined X`` / ``defined(X)`` at ``tokens[i]``, resolved before expansion: its
    value token and the index after it."""
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

    def unary(self) -> Value:  # noqa: PLR0911 - one return per form of a unary expression
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


def and_(a: Tri, b: Tri) -> Tri:
    if a is False or b is False:
        return False
    return True if a is True and b is True else MAYBE


def not_(a: Tri) -> Tri:
    return MAYBE if a is MAYBE else not a


def or_(a: Tri, b: Tri) -> Tri:
    if a is True or b is True:
        return True
    return False if a is False and b is False else MAYBE


def tri(value: Value) -> Tri:
    return MAYBE if value is None else value != 0
