"""What a guarded region holds, read from its lines: code or none, a trap, configuration
(macros only), a *value* (``constexpr`` constants only) and where the value is used, and the
kernels a region defines or launches. Pure: lines in, answers out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from archguard.core.kinds import ALTERNATIVE, EMPTY, TRAP, BranchKind
from archguard.lint.lines import Line

_TRAP = re.compile(
    r"__trap\s*\(|\btrap\s*;|__brkpt\s*\(|\bassert\s*\(|__assertfail|\babort\s*\(|"
    r"CUTE_INVALID_CONTROL_PATH|CUTLASS_NOT_IMPLEMENTED|static_assert\s*\(\s*(?:false|0)\b"
)
_PRINT = re.compile(r"\bprintf\s*\(")
_CODE = re.compile(r"[A-Za-z0-9_]")
_INCLUDE = re.compile(r"\s*#\s*include\b")
_DEFINES = re.compile(r"\s*#\s*(define|undef)\b")
# `static constexpr bool X = ...;`, `inline constexpr int X = ...;`, `using X = ...;`,
# `struct X : std::bool_constant<...> {};`: lines that only carry a value on
_VALUE = re.compile(
    r"^\s*(?:template\s*<[^>]*>\s*)?(?:(?:static|inline|extern)\s+)*(?:constexpr|constinit)\s+"
    r"[\w:<>,\s]*?"
    r"\b(?P<const>[A-Za-z_]\w*)\s*(?:=|\{)"
    r"|^\s*using\s+(?P<alias>[A-Za-z_]\w*)\s*="
    r"|^\s*(?:template\s*<[^>]*>\s*)?struct\s+(?P<trait>[A-Za-z_]\w*)\s*:\s*(?:public\s+)?"
    r"std::(?:bool|integral)_constant\b"
)
# `static constexpr bool kFAST = (__CUDA_ARCH__ / 100) >= 10;`: a declared value, computed
# from the arch where its initializer names __CUDA_ARCH (see arch_value: a pattern that looked
# for the name itself rescanned the rest of the line from each occurrence)
_DECLARED = re.compile(
    r"^\s*(?:template\s*<[^>]*>\s*)?(?:(?:static|inline|extern)\s+)*(?:constexpr|constinit)\s+"
    r"[\w:<>,\s]*?"
    r"\b(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<init>[^;{}]*);"
)


def arch_value(text: str) -> tuple[str, str] | None:
    """(name, initializer) of a constexpr value computed from the arch, declared by
    ``text``; None for any other line."""
    match = _DECLARED.match(text)
    if match is None or "__CUDA_ARCH" not in match["init"]:
        return None
    return match["name"], match["init"]


_KERNEL_ATTRIBUTES = {
    "__launch_bounds__",
    "__cluster_dims__",
    "__maxnreg__",
    "__attribute__",
    "__declspec",
    "alignas",
}
_LAUNCH = re.compile(r"<<<|\bcudaLaunch\w*\s*\(|\bcuLaunch\w*\s*\(")
# `fa->allreduce<nv_bfloat16>(...)`: a template instantiated from host code, which may launch
# kernels in turn (casts and the standard library's templates are not)
_INSTANTIATION = re.compile(
    r"(?<![\w:])(?!(?:static|reinterpret|const|dynamic)_cast\b)[A-Za-z_]\w*\s*<[^<>;()]*>\s*\("
)


def classify(body: Sequence[str]) -> BranchKind:
    """What a branch holds: ``trap`` (a trap, an assert, or a print-and-return), ``empty``
    (no code), or ``alternative`` (other code)."""
    text = "\n".join(code_lines(body))
    if _TRAP.search(text):
        return TRAP
    if not _CODE.search(text.replace("return", "")):
        return EMPTY
    statements = [s for s in re.split(r"[;{}]", text) if _CODE.search(s)]
    if _PRINT.search(text) and all(
        _PRINT.search(s) or s.strip().startswith("return") for s in statements
    ):
        return TRAP
    return ALTERNATIVE


def code_lines(body: Sequence[str]) -> list[str]:
    """A branch's lines that are not preprocessor directives."""
    return [line for line in body if not line.lstrip().startswith("#")]


_OPENS = re.compile(r"\s*#\s*if(?:n?def)?\b")
_CLOSES = re.compile(r"\s*#\s*endif\b")


def own_lines(body: Sequence[str]) -> list[str]:
    """A branch's lines outside the ``#if`` blocks nested in it (those are regions of their
    own, judged on their own)."""
    out: list[str] = []
    depth = 0
    for line in body:
        if _OPENS.match(line):
            depth += 1
        elif _CLOSES.match(line):
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(line)
    return out


def is_stub(body: Sequence[str]) -> bool:
    """A branch whose own code is a trap or nothing: a device whose own compile takes it
    loses nothing when the image it loads takes another branch (CUTLASS's
    `#else CUTE_INVALID_CONTROL_PATH(...)` on 10.3 loading sm_100, whose `== 1000` branch
    is the real path)."""
    own = own_lines(body)
    return holds_nothing(own) or (has_code(own) and classify(own) == TRAP)


def has_code(body: Sequence[str]) -> bool:
    return any(_CODE.search(line) for line in code_lines(body))


def configuration_only(body: Sequence[str]) -> bool:
    """A branch that only defines macros (no code of its own)."""
    return not has_code(body) and any(_DEFINES.match(line) for line in body)


def holds_nothing(body: Sequence[str]) -> bool:
    """No code, no ``#include`` and no macro: only ``#error``/``#pragma``/nested empty
    guards. Nothing in it can be compiled out (an ``#error`` is reported as reached)."""
    return not has_code(body) and not any(
        _INCLUDE.match(line) or _DEFINES.match(line) for line in body
    )


def declared_values(body: Sequence[str]) -> set[str] | None:
    """The names a branch declares when it holds only value declarations (``constexpr``
    constants, aliases, ``bool_constant`` traits); None when it holds other code."""
    names: set[str] = set()
    code = (Line(i, t) for i, t in enumerate(body) if not t.lstrip().startswith("#"))
    for line in (j.text for j in _statements(code)):  # read up to the first other statement
        if not _CODE.search(line) or line.strip() in ("};", "}"):
            continue
        match = _VALUE.match(line)
        if match is None:
            return None
        names.add(match["const"] or match["alias"] or match["trait"])
    return names or None


@dataclass(frozen=True)
class Use:
    file: str
    line: int
    text: str


class UseIndex:
    """Where each identifier occurs in the scanned files, statement by statement: built once
    per walk, so that following a value to its uses costs its uses, not the whole tree
    again for every value."""

    def __init__(self, files: Mapping[str, Sequence[Line]]) -> None:
        self.where: dict[str, list[tuple[int, str, Line]]] = {}
        for rank, (path, lines) in enumerate(files.items()):
            for line in statements(lines):
                if line.text.lstrip().startswith("#"):
                    continue
                for word in set(_WORD.findall(line.text)):
                    self.where.setdefault(word, []).append((rank, path, line))

    def first_use(self, names: set[str], skip: set[tuple[str, int]]) -> Use | None:
        """Where a value declared by ``names`` first matters: a statement outside ``skip``
        (the declaring branches) that uses one of them and is not itself a value
        declaration. A declaration that uses one passes the value on (its name is followed
        in turn)."""
        tracked = set(names)
        todo = list(names)
        found: tuple[int, int, Use] | None = None
        while todo:
            name = todo.pop()
            for rank, path, line in self.where.get(name, ()):
                if (path, line.number) in skip:
                    continue
                match = _VALUE.match(line.text)
                if match is not None:
                    declared = match["const"] or match["alias"] or match["trait"]
                    if declared not in tracked:
                        tracked.add(declared)
                        todo.append(declared)
                    continue
                if found is None or (rank, line.number) < found[:2]:
                    found = (rank, line.number, Use(path, line.number, line.text.strip()))
        return None if found is None else found[2]


_WORD = re.compile(r"[A-Za-z_]\w*")


def first_use(
    names: set[str], files: Mapping[str, Sequence[Line]], skip: set[tuple[str, int]]
) -> Use | None:
    """:meth:`UseIndex.first_use` over ``files``."""
    return UseIndex(files).first_use(names, skip)


def statements(lines: Iterable[Line]) -> list[Line]:
    """Code lines joined into statements (up to a line ending in ``;``, ``{`` or ``}``),
    each numbered by its first line; directives stay lines of their own."""
    return list(_statements(lines))


def _statements(lines: Iterable[Line]) -> Iterator[Line]:
    parts: list[str] = []
    start = 0
    for line in lines:
        text = line.text.strip()
        if text.startswith("#"):
            yield line
            continue
        if not parts:
            start = line.number
        parts.append(text)
        if text.endswith((";", "{", "}")):
            yield Line(start, " ".join(parts))
            parts = []
    if parts:
        yield Line(start, " ".join(parts))


_GLOBAL = re.compile(r"\b__global__\b")


def kernel_names(lines: Iterable[Line]) -> set[str]:
    """The ``__global__`` functions a file defines or declares. Each declaration is read up
    to the next ``__global__`` at most: every character is looked at once."""
    text = " ".join(line.text for line in lines)
    names: set[str] = set()
    spans = [match.span() for match in _GLOBAL.finditer(text)]
    for k, (_, start) in enumerate(spans):
        end = spans[k + 1][0] if k + 1 < len(spans) else len(text)
        name = _kernel_after(text, start, end)
        if name:
            names.add(name)
    return names


def _kernel_after(text: str, i: int, end: int) -> str | None:
    last: str | None = None
    while i < end:
        c = text[i]
        if c in ";{}":
            return None
        if c == "(":
            if last is not None and last not in _KERNEL_ATTRIBUTES:
                return last
            depth, i = 1, i + 1
            while i < end and depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            last = None
            continue
        word = _WORD.match(text, i, end)
        if word:
            last = word[0]
            i = word.end()
            continue
        if not c.isspace() and c not in "<>,:*&":
            last = None
        i += 1
    return None


def launches(body: Sequence[str], kernels: set[str]) -> bool:
    """Does host code in ``body`` define, launch or take the address of a kernel, or
    instantiate a template (which may launch one)?"""
    text = "\n".join(code_lines(body))
    if "__global__" in text or _LAUNCH.search(text) or _INSTANTIATION.search(text):
        return True
    return bool(kernels & set(re.findall(r"[A-Za-z_]\w*", text)))
