"""archguard.core.plain_yaml: plain data only, within fixed limits, errors of the caller's
type."""

from __future__ import annotations

import pytest

from archguard.core.plain_yaml import MAX_BYTES, MAX_DEPTH, load_plain_yaml


class Caller(Exception):
    pass


PLAIN = [
    ("a: 1\nb: [x, 'y']\n", {"a": 1, "b": ["x", "y"]}),
    ("", None),
    ("- 1.5\n- true\n- null\n", [1.5, True, None]),
    ("when: '2026-08-01'\n", {"when": "2026-08-01"}),  # quoted: stays text
]


@pytest.mark.parametrize(("text", "data"), PLAIN)
def test_plain_data_loads(text: str, data: object) -> None:
    assert load_plain_yaml(text, "t.yml", Caller) == data


REFUSED = [
    ("a: &x 1\nb: *x\n", "anchors and aliases are not allowed"),
    ("a: !!python/name:os.system x\n", "is not plain data"),
    ("a: 2026-08-01\n", "timestamp"),
    ("a: 1\na: 2\n", "duplicate key 'a'"),
    ("? [1, 2]\n: x\n", "a mapping key must be text"),
    ("a: [\n", "not valid YAML"),
    ("a: \x07\n", "binary or control characters"),
    ("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2), "nested deeper"),
]


@pytest.mark.parametrize(("text", "needle"), REFUSED)
def test_refused_with_the_callers_error_naming_the_source(text: str, needle: str) -> None:
    with pytest.raises(Caller) as info:
        load_plain_yaml(text, "farm.yml", Caller)
    assert needle in str(info.value) and "farm.yml" in str(info.value)


def test_size_limit_is_checked_before_parsing() -> None:
    with pytest.raises(Caller, match="larger than"):
        load_plain_yaml("#" * (MAX_BYTES + 1), "big.yml", Caller)


def test_errors_carry_the_line_and_column() -> None:
    with pytest.raises(Caller, match=r"farm.yml, line 2, column 1: duplicate key 'k'"):
        load_plain_yaml("k: 1\nk: 2\n", "farm.yml", Caller)
