"""Collecting every problem in a piece of configuration before raising one error.

Used by the readers of the policy file and of ``[tool.archguard]``: each reports all of a
file's problems at once (scikit-build-core's habit), each with a "did you mean" hint for a
misspelt key.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable


def closest(word: str, allowed: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The allowed word closest to ``word`` (difflib), or None when nothing is close."""
    close = difflib.get_close_matches(word, list(allowed), n=1, cutoff=cutoff)
    return close[0] if close else None


class Problems:
    """An ordered list of ``where: message`` items, raised together as one error."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, message: str, where: str = "") -> None:
        self.items.append(f"{where}: {message}" if where else message)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self, make: Callable[[int, str], Exception]) -> None:
        """Raise ``make(count, bullet_lines)`` when there is at least one problem."""
        if self.items:
            raise make(len(self.items), "\n".join(f"  - {item}" for item in self.items))
