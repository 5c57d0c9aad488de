"""What a walk of translation units finds (:mod:`archguard.lint.preprocessor`): the branches
of each ``#if`` chain with their lines, each branch's state per configuration, and the
``constexpr`` values computed from an arch macro."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from archguard.lint.expressions import MAYBE, Tri, Value
from archguard.lint.lines import Line


class Body(Sequence[str]):
    """A branch's lines: a view of its file's lines, never a copy, so that branches nested
    ten thousand deep cost their file's length, not its length times their depth."""

    __slots__ = ("_lines", "_start", "_stop")

    def __init__(self, lines: Sequence[Line], start: int, stop: int) -> None:
        self._lines = lines
        self._start = start
        self._stop = max(start, stop)

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            return [self._lines[self._start + i].text for i in range(start, stop, step)]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return self._lines[self._start + index % len(self)].text

    def __iter__(self) -> Iterator[str]:
        for i in range(self._start, self._stop):
            yield self._lines[i].text

    def __repr__(self) -> str:
        return f"Body({list(self)!r})"


@dataclass(frozen=True)
class Region:
    """One branch of an ``#if`` chain: where it is, its guard, and its body's lines."""

    file: str
    line: int  # the branch directive's line
    chain: tuple[str, int]  # (file, line of the chain's #if)
    index: int  # 0 for the #if, 1.. for #elif/#else
    guard: str  # as written: "#if __CUDA_ARCH__ >= 890"
    parent: tuple[str, int] | None  # the enclosing region, if any
    body: Sequence[str] = ()  # the branch's own lines (nested directives included)
    span: tuple[int, int] = (0, 0)  # the line numbers of its first and last body line


@dataclass(frozen=True)
class ArchValue:
    """A constexpr value computed from an arch macro: its name, its declaration, and its
    value per configuration (None where it is not compiled or not evaluated)."""

    name: str
    text: str
    values: list[Value]


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
    # an outside name (CUDA_VERSION) made unknown -> the first unknown header that did it
    outside_unknown: dict[str, str] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)
    lines: dict[str, list[Line]] = field(default_factory=dict)  # each walked file's lines
    unfinished: list[str] = field(default_factory=list)  # roots the budget left unscanned
    # constexpr values computed from an arch macro: (file, line) -> the value per configuration
    values: dict[tuple[str, int], ArchValue] = field(default_factory=dict)
    seconds: float = 0.0


# A branch's state per configuration, three-valued: True, False or MAYBE (undecided).


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
