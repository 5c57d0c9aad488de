"""archguard.core.coverage: the CUDA binary rules, table-driven (SPEC §2)."""

from __future__ import annotations

import pytest

from archguard.core.arch import Arch, Targets
from archguard.core.bundled import bundled_yaml
from archguard.core.coverage import (
    Device,
    Tier,
    chosen_cubin,
    chosen_ptx,
    coverage,
    cubin_runs_on,
    known_devices,
    ptx_runs_on,
    served_devices,
)
from archguard.core.policy import load_policy

A = Arch

CUBIN_RULES = [
    (A(8, 6), (8, 6), True),
    (A(8, 6), (8, 9), True),  # same major, higher minor
    (A(8, 6), (8, 0), False),  # never below
    (A(8, 6), (9, 0), False),  # never across majors
    (A(9, 0, "a"), (9, 0), True),
    (A(10, 0, "a"), (10, 3), False),  # an a cubin is a point (FBGEMM #6151)
    (A(10, 0, "f"), (10, 3), True),  # f restores the major
    (A(10, 0, "f"), (11, 0), False),
]


@pytest.mark.parametrize(("cubin", "cc", "runs"), CUBIN_RULES)
def test_cubin_runs_on(cubin: Arch, cc: tuple[int, int], runs: bool) -> None:
    assert cubin_runs_on(cubin, cc) is runs


PTX_RULES = [
    (A(9, 0), (11, 0), True),  # plain PTX JITs on every device at or above it
    (A(12, 0), (10, 3), False),  # ... never below (ADR consequence 1)
    (A(9, 0, "a"), (9, 0), True),
    (A(9, 0, "a"), (10, 0), False),
    (A(10, 0, "f"), (10, 3), True),
    (A(10, 0, "f"), (12, 0), False),
]


@pytest.mark.parametrize(("ptx", "cc", "runs"), PTX_RULES)
def test_ptx_runs_on(ptx: Arch, cc: tuple[int, int], runs: bool) -> None:
    assert ptx_runs_on(ptx, cc) is runs


CHOICES = [
    ({A(8, 0), A(8, 6)}, (8, 9), A(8, 6)),  # the highest that fits
    ({A(10, 0), A(10, 0, "a")}, (10, 0), A(10, 0, "a")),  # the specific one on its own cc
    ({A(10, 0), A(10, 0, "a")}, (10, 3), A(10, 0)),
    ({A(10, 0, "f"), A(10, 0, "a")}, (10, 0), A(10, 0, "a")),
    ({A(9, 0)}, (10, 0), None),
]


@pytest.mark.parametrize(("cubins", "cc", "chosen"), CHOICES)
def test_chosen_cubin(cubins: set[Arch], cc: tuple[int, int], chosen: Arch | None) -> None:
    assert chosen_cubin(cubins, cc) == chosen


def test_chosen_ptx_is_the_highest_at_or_below() -> None:
    assert chosen_ptx({A(9, 0), A(12, 0)}, (11, 0)) == A(9, 0)
    assert chosen_ptx({A(9, 0), A(12, 0)}, (12, 1)) == A(12, 0)
    assert chosen_ptx({A(9, 0)}, (8, 9)) is None


SERVED = [
    (A(8, 0), {A(8, 0), A(8, 6)}, ["8.0"]),
    (A(8, 6), {A(8, 0), A(8, 6)}, ["8.6", "8.7", "8.8", "8.9"]),
    (A(10, 0), {A(10, 0), A(10, 0, "a")}, ["10.0", "10.3", "10.7"]),  # a cubins do not end
    (A(10, 0), {A(10, 0), A(10, 3)}, ["10.0"]),  # ... plain ones do
    (A(10, 3), {A(10, 0), A(10, 3)}, ["10.3", "10.7"]),
    (A(10, 0, "a"), {A(10, 0, "a")}, ["10.0"]),
    (A(5, 0), {A(5, 0)}, ["5.0", "5.2", "5.3"]),  # Maxwell is a known device
]


@pytest.mark.parametrize(("cubin", "cubins", "served"), SERVED)
def test_served_devices(cubin: Arch, cubins: set[Arch], served: list[str]) -> None:
    assert [d.cc_text for d in served_devices(cubin, cubins)] == served


def test_three_tiers_of_the_adr_example() -> None:
    """cu130 row: native 7.5...12.1 except 11.0, JIT-only 11.0 via compute_90, dead below."""
    cubins = {A(7, 5), A(8, 0), A(8, 6), A(9, 0), A(10, 0), A(12, 0)}
    cov = coverage(Targets(frozenset(cubins), frozenset({A(9, 0), A(12, 0)})))
    by = {c.device.cc_text: c for c in cov}
    assert by["11.0"].tier is Tier.JIT and by["11.0"].via == "compute_90"
    assert by["12.1"].via == "sm_120" and by["10.3"].via == "sm_100"
    dead = [c.device.cc_text for c in cov if c.tier is Tier.DEAD]
    assert dead == ["5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2"]


def test_known_devices_are_sorted_and_unique() -> None:
    ccs = [d.cc for d in known_devices()]
    assert ccs == sorted(set(ccs)) and ccs[0] == (5, 0) and ccs[-1] == (12, 1)


def test_10_7_is_a_known_device_under_every_toolkit_with_its_source() -> None:
    """10.7: nvcc/ptxas list sm_107 from CUDA 13.4; CUDA 13.5's cuda.h names it Rubin. The
    device exists whatever toolkit built a wheel: a 13.0 build's sm_100 cubin serves it."""
    rubin = Device((10, 7), "Rubin")
    assert all(rubin in known_devices(c) for c in ((13, 5), (13, 4), (13, 0), (12, 8)))
    assert rubin in known_devices()
    data = bundled_yaml("devices.yml")
    assert isinstance(data, dict)
    (row,) = [r for r in data["devices"] if r["cc"] == "10.7"]
    assert "cuda_from" not in row
    assert "cuda.h" in row["source"] and "13.5" in row["source"]
    assert "Rubin+ (SM_107+)" in row["source"] and "Compute device class 10.7" in row["source"]


def test_cu130_policy_list_serves_10_7_natively_under_cuda_13_5() -> None:
    """The cu130 row (7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX) with a CUDA 13.5 toolkit: 10.7 rides
    the 10.0 cubin (same major, higher minor), as 10.3 does; Thor stays JIT-only."""
    row = load_policy(None).rows["cu130"]
    assert ";".join(str(e) for e in row.entries) == "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"
    targets = Targets.from_entries(row.entries)
    by = {c.device.cc_text: c for c in coverage(targets, known_devices((13, 5)))}
    assert (by["10.7"].tier, by["10.7"].via) == (Tier.NATIVE, "sm_100")
    assert (by["10.3"].tier, by["10.3"].via) == (Tier.NATIVE, "sm_100")
    assert (by["11.0"].tier, by["11.0"].via) == (Tier.JIT, "compute_90")
    under_13_0 = {c.device.cc_text: c.via for c in coverage(targets, known_devices((13, 0)))}
    assert under_13_0["10.7"] == "sm_100"  # a 13.0 build serves it too


@pytest.mark.parametrize(
    ("cubins", "ptx", "tier", "via"),
    [
        ({A(10, 0, "a")}, {A(9, 0)}, Tier.JIT, "compute_90"),  # an a cubin is a point
        ({A(10, 0, "f")}, set(), Tier.NATIVE, "sm_100f"),  # 10.7 is in the 10.x family
        ({A(10, 3, "f"), A(10, 0)}, set(), Tier.NATIVE, "sm_103f"),
        ({A(10, 7, "a"), A(10, 0)}, set(), Tier.NATIVE, "sm_107a"),
        ({A(12, 0)}, {A(10, 0, "f")}, Tier.JIT, "compute_100f"),
        ({A(12, 0)}, {A(10, 3, "a")}, Tier.DEAD, None),
    ],
)
def test_10_7_under_family_and_arch_specific_images(
    cubins: set[Arch], ptx: set[Arch], tier: Tier, via: str | None
) -> None:
    (cov,) = coverage(Targets(frozenset(cubins), frozenset(ptx)), [Device((10, 7), "Rubin")])
    assert (cov.tier, cov.via) == (tier, via)
