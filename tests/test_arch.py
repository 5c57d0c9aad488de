from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archguard.core.arch import (
    NAMED_ARCHES,
    Arch,
    ArchEntry,
    Targets,
    format_list,
    parse_arch,
    parse_arch_list,
    parse_targets,
)
from archguard.core.toolkit import known_arches
from archguard.errors import InvalidArch

KNOWN = sorted(known_arches())
K = known_arches()

SPELLINGS = [
    ("8.6", "8.6"),
    ("sm_86", "8.6"),
    ("9.0a", "9.0a"),
    ("sm_90a", "9.0a"),
    ("10.0f", "10.0f"),
    ("sm_100f", "10.0f"),
    ("sm_120", "12.0"),
    ("9.0+PTX", "9.0+PTX"),
    ("9.0+ptx", "9.0+PTX"),
    ("sm_90+PTX", "9.0+PTX"),
    ("12.0a+PTX", "12.0a+PTX"),
    ("Ampere", "8.0;8.6+PTX"),
    ("ampere", "8.0;8.6+PTX"),
    ("Blackwell", "10.0;10.3;12.0;12.1+PTX"),
    ("Blackwell+Tegra", "11.0"),
    ("7.5 8.0;8.6", "7.5;8.0;8.6"),
    ("  8.6 ;; 7.5  ", "7.5;8.6"),
    ("8.6;8.6+PTX", "8.6+PTX"),
]


@pytest.mark.parametrize(("text", "canonical"), SPELLINGS)
def test_every_spelling_gives_canonical_text(text: str, canonical: str) -> None:
    assert format_list(parse_arch_list(text, "test", known=K)) == canonical


def test_list_form_and_string_form_agree() -> None:
    assert parse_arch_list(["8.0", "sm_86", "9.0+PTX"], "x", known=K) == parse_arch_list(
        "8.0 8.6 9.0+PTX", "x", known=K
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("8,6", "commas do not separate entries"),
        ("8.6a", "sm_86a"),
        ("9.0f", "sm_90f"),
        ("9.5", "no CUDA toolkit in archguard's bundled table emits sm_95"),
        ("sm_999", "sm_999"),
        ("3.5", "sm_35"),
        ("compute_90", "PTX alone"),
        ("Ampère", "is not a CUDA arch"),
        ("native", "is not a CUDA arch"),
        ("all-major", "is not a CUDA arch"),
        ("", "is empty"),
        ("8.6+PTX+PTX", "is not a CUDA arch"),
    ],
)
def test_bad_entries_name_the_entry_and_where_it_came_from(text: str, needle: str) -> None:
    with pytest.raises(InvalidArch) as info:
        parse_arch_list(text, "ARCHGUARD_ARCH_LIST", known=K)
    message = str(info.value)
    assert needle in message
    assert "ARCHGUARD_ARCH_LIST" in message


def test_numbers_in_a_list_must_be_quoted() -> None:
    with pytest.raises(InvalidArch, match="quote every arch entry"):
        parse_arch_list([8.6, "9.0"], "[tool.archguard] arch_list", known=K)


def test_named_arches_match_torch_table() -> None:
    # Every name expands to arches this project knows (torch 2.13's named_arches).
    for name, expansion in NAMED_ARCHES.items():
        if name.startswith(("Kepler", "Maxwell")):
            continue  # 3.x / 5.x: no toolkit in the bundled table emits 3.x
        assert parse_arch_list(name, "t", known=K) == parse_arch_list(expansion, "t", known=K)


def test_kepler_is_refused_because_no_bundled_toolkit_emits_it() -> None:
    with pytest.raises(InvalidArch, match="sm_35"):
        parse_arch_list("Kepler", "t", known=K)


def test_targets_from_torch_arch_list() -> None:
    t = parse_targets(["sm_75", "sm_120", "compute_120"], "torch", known=K)
    assert t == Targets(frozenset({Arch(7, 5), Arch(12, 0)}), frozenset({Arch(12, 0)}))
    assert t.names() == ["sm_75", "sm_120", "compute_120"]


def test_sort_order_is_by_capability_then_suffix() -> None:
    entries = parse_arch_list("12.0 10.0f 10.0a 10.0 9.0 7.5", "t", known=K)
    assert format_list(entries) == "7.5;9.0;10.0;10.0a;10.0f;12.0"


@given(st.lists(st.tuples(st.sampled_from(KNOWN), st.booleans()), min_size=1, max_size=12))
def test_canonical_text_round_trips(items: list[tuple[Arch, bool]]) -> None:
    entries = [ArchEntry(a, p) for a, p in items]
    text = format_list(entries)
    again = parse_arch_list(text, "t", known=K)
    # canonical text is a fixed point, and duplicates merge with +PTX if any had it
    assert format_list(parse_arch_list(format_list(again), "t", known=K)) == format_list(again)
    expected = {a: any(p for b, p in items if b == a) for a, _ in items}
    assert {e.arch: e.ptx for e in again} == expected
    assert list(again) == sorted(again)
    # sm_ spelling of the same list parses to the same arches
    sm = " ".join(a.sm for a, _ in items)
    assert {e.arch for e in parse_arch_list(sm, "t", known=K)} == {a for a, _ in items}


@given(st.text(max_size=40))
def test_any_text_gives_a_list_or_invalid_arch(text: str) -> None:
    try:
        parse_arch_list(text, "fuzz", known=K)
    except InvalidArch as exc:
        assert "fuzz" in str(exc)


def test_parse_arch_rejects_ptx_suffix() -> None:
    with pytest.raises(InvalidArch):
        parse_arch("9.0+PTX", "t", known=K)
