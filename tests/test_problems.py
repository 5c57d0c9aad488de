"""archguard.core.problems: every problem collected, one error raised, one suggestion helper."""

from __future__ import annotations

import pytest

from archguard.core.problems import Problems, closest


@pytest.mark.parametrize(
    ("word", "allowed", "expected"),
    [
        ("arch_lst", ["arch_list", "policy"], "arch_list"),
        ("ARCHGUARD_ARCHLIST", ["ARCHGUARD_ARCH_LIST", "ARCHGUARD_POLICY"], "ARCHGUARD_ARCH_LIST"),
        ("banana", ["arch_list", "policy"], None),
        ("rowz", ("schema", "rows"), "rows"),
    ],
)
def test_closest(word: str, allowed: list[str], expected: str | None) -> None:
    assert closest(word, allowed) == expected


def test_problems_are_raised_together_in_order() -> None:
    problems = Problems()
    assert not problems
    problems.raise_if_any(lambda n, lines: ValueError("never"))  # nothing: no error
    problems.add("first")
    problems.add("second", "rows.cu130")
    with pytest.raises(ValueError) as info:
        problems.raise_if_any(lambda n, lines: ValueError(f"{n} problems:\n{lines}"))
    assert str(info.value) == "2 problems:\n  - first\n  - rows.cu130: second"
