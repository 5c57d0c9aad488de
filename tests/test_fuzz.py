"""Bounded fuzzing of every parser that reads outside text (CI); `scripts/fuzz.py` runs the
same targets for minutes each."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_targets import TARGETS

EXAMPLES = int(os.environ.get("AG_TEST_FUZZ_EXAMPLES", "300"))


@pytest.mark.parametrize("name", sorted(TARGETS))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_parser_gives_a_result_or_its_own_error(name: str, data: st.DataObject) -> None:
    target, strategy = TARGETS[name]
    target(*data.draw(strategy))
