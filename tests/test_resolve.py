from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from archguard.core.arch import (
    Arch,
    ArchEntry,
    Targets,
    format_list,
    parse_arch_list,
    parse_targets,
)
from archguard.core.coverage import Tier, chosen_cubin, known_devices, runs_on, served_devices
from archguard.core.cuda import CudaVersion
from archguard.core.policy import load_policy
from archguard.core.resolve import resolve
from archguard.core.toolkit import bundled_rows, bundled_toolkit, known_arches
from archguard.core.torchbuild import TorchBuild, bundled_builds, bundled_torch
from archguard.errors import EmptyArchList, NoPolicyRow
from archguard.reports.text import render_error
from archguard.settings.model import PackageConfig

POLICY = load_policy(None)
KNOWN = known_arches()


def entries(text: str) -> tuple[ArchEntry, ...]:
    return parse_arch_list(text, "test", known=KNOWN)


def targets(text: str) -> Targets:
    return parse_targets(text, "test", known=KNOWN)


FULL = "7.0;7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"
NO_VOLTA = "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"


def spec_expected(index: str, torch: str) -> str:
    """SPEC §4's expected-results table, transcribed."""
    minor = Version(torch)
    if index in ("cu124", "cu126"):
        return "6.0;7.0;7.5;8.0;8.6;9.0+PTX"
    if index == "cu128":
        return FULL if Version("2.8") <= minor <= Version("2.10") else NO_VOLTA
    if index == "cu129":
        return FULL if minor <= Version("2.10") else NO_VOLTA
    assert index in ("cu130", "cu132")
    return NO_VOLTA


COMBOS = [(b.tag, b.torch) for b in bundled_builds() if b.platform == "x86_64"]


def resolve_combo(index: str, torch: str, **kw):  # type: ignore[no-untyped-def]
    version = (int(index[2:-1]), int(index[-1]))
    return resolve(POLICY, bundled_toolkit(version), bundled_torch(version, Version(torch)), **kw)


def test_every_policy_row_has_bundled_torch_builds() -> None:
    assert {i for i, _ in COMBOS} == set(POLICY.rows)
    assert ("cu128", "2.7") in COMBOS and ("cu128", "2.11") in COMBOS
    assert ("cu129", "2.11") in COMBOS and ("cu130", "2.13") in COMBOS


@pytest.mark.parametrize(("index", "torch"), COMBOS)
def test_expected_results_table(index: str, torch: str) -> None:
    res = resolve_combo(index, torch)
    assert res.effective_text == spec_expected(index, torch)


def test_volta_on_cu128_torch_27_is_dropped_by_the_record_and_the_clamp_agrees() -> None:
    res = resolve_combo("cu128", "2.7")
    steps = {d.step: d for d in res.why(Arch(7, 0))}
    assert steps["exception"].outcome == "dropped"
    assert "pytorch#157517" in steps["exception"].reason
    assert steps["torch"].outcome == "confirms"
    assert "ships no 7.x cubin at or below 7.2" in steps["torch"].reason
    assert "no PTX at or below 7.2" in steps["torch"].reason


def test_why_for_an_arch_nobody_asked_for_is_what_the_resolution_would_do() -> None:
    """An override without 7.0 on cu128/torch 2.7: asked why 7.0 is not there, the answer is
    the resolution's own steps run with 7.0 added. The recorded exception drops it at step 2
    (it never reaches the toolkit), and the torch step says whether the live clamp agrees."""
    override = (parse_arch_list("8.0;9.0", "test", known=known_arches()), "the test")
    res = resolve_combo("cu128", "2.7", override=override)
    why = res.why(Arch(7, 0))
    assert [(d.step.value, d.outcome.value) for d in why] == [
        ("request", "not-requested"),
        ("exception", "dropped"),
        ("torch", "note"),
    ]
    assert "the recorded exception still drops it" in why[-1].reason


def test_volta_on_cu130_is_a_toolkit_drop_even_though_nobody_asked() -> None:
    res = resolve_combo("cu130", "2.13")
    why = res.why(Arch(7, 0))
    assert why[0].outcome == "not-requested"
    assert any(d.step == "toolkit" and "nvcc 13.0 cannot emit sm_70" in d.reason for d in why)


def test_thor_is_jit_only_via_compute_90_on_cu130() -> None:
    res = resolve_combo("cu130", "2.13")
    tiers = {c.device.cc_text: (c.tier, c.via) for c in res.coverage()}
    assert tiers["11.0"] == (Tier.JIT, "compute_90")
    native = [cc for cc, (tier, _) in tiers.items() if tier is Tier.NATIVE]
    assert native == [
        "7.5",
        "8.0",
        "8.6",
        "8.7",
        "8.8",
        "8.9",
        "9.0",
        "10.0",
        "10.3",
        "10.7",
        "12.0",
        "12.1",
    ]
    assert [cc for cc, (tier, _) in tiers.items() if tier is Tier.DEAD] == [
        "5.0",  # Maxwell: dead after the ADR's 5.0 drop, named on the page
        "5.2",
        "5.3",
        "6.0",
        "6.1",
        "6.2",
        "7.0",
        "7.2",
    ]


def test_override_leaving_nothing_is_empty_and_refused() -> None:
    pkg = PackageConfig("pyproject.toml [tool.archguard]", arch_list=entries("12.0a"))
    res = resolve_combo("cu126", "2.8", package=pkg)
    assert not res.ok
    with pytest.raises(EmptyArchList) as info:
        res.require_cubins()
    assert "[tool.archguard] arch_list" in str(info.value)
    assert info.value.resolution is res  # raised without rendering; the printer adds the table
    assert info.value.detail is None
    rendered = render_error(info.value)
    assert "nvcc 12.6 cannot emit sm_120a" in rendered
    assert rendered.count("effective: (empty: no cubin left)") == 1


def test_no_policy_row_names_the_version_the_rows_and_both_fixes(tmp_path: Path) -> None:
    path = tmp_path / "p.yml"
    path.write_text("schema: 1\nrows:\n  cu124: {arch_list: '8.0', reason: r}\n")
    with pytest.raises(NoPolicyRow) as info:
        resolve(
            load_policy(path), bundled_toolkit((13, 0)), bundled_torch((13, 0), Version("2.13"))
        )
    message = str(info.value)
    for needle in (
        "cu130",
        "CUDA 13.0",
        "cu124",
        "ADR process",
        "arch_list_by_cuda",
        "never falls back",
    ):
        assert needle in message


def test_package_by_cuda_wins_over_arch_list_and_env_wins_over_both() -> None:
    pkg = PackageConfig(
        "pp",
        arch_list=entries("8.0"),
        arch_list_by_cuda={"cu130": entries("8.6;9.0")},
    )
    assert resolve_combo("cu130", "2.13", package=pkg).effective_text == "8.6;9.0+PTX"
    assert resolve_combo("cu128", "2.8", package=pkg).effective_text == "8.0+PTX"
    env = (entries("12.0"), "ARCHGUARD_ARCH_LIST")
    res = resolve_combo("cu130", "2.13", package=pkg, override=env)
    assert res.effective_text == "12.0+PTX"
    assert res.request.origin == "ARCHGUARD_ARCH_LIST"


def test_arch_specific_only_list_gets_a_ptx_net_for_the_rest_of_its_major() -> None:
    """FBGEMM #6151: an sm_100a-only binary does not run on 10.3."""
    pkg = PackageConfig("pp", arch_list=entries("9.0;10.0a"))
    res = resolve_combo("cu130", "2.13", package=pkg)
    assert res.effective_text == "9.0;10.0a+PTX"
    tiers = {c.device.cc_text: (c.tier, c.via) for c in res.coverage()}
    assert tiers["10.0"] == (Tier.NATIVE, "sm_100a")
    assert tiers["10.3"] == (Tier.JIT, "compute_100")  # plain PTX: a PTX is not portable


def test_plain_cubin_beside_its_a_twin_is_kept() -> None:
    """vLLM #56548: dropping plain 10.0 when 10.0a is present kills B300 (10.3)."""
    pkg = PackageConfig("pp", arch_list=entries("10.0;10.0a;12.0"))
    res = resolve_combo("cu130", "2.13", package=pkg)
    assert res.effective_text == "10.0+PTX;10.0a;12.0+PTX"
    tiers = {c.device.cc_text: c.via for c in res.coverage()}
    assert tiers["10.3"] == "sm_100" and tiers["10.0"] == "sm_100a"


def test_family_cubin_serves_its_major() -> None:
    pkg = PackageConfig("pp", arch_list=entries("10.0f;12.0f"))
    res = resolve_combo("cu130", "2.13", package=pkg)
    tiers = {c.device.cc_text: c.via for c in res.coverage()}
    assert tiers["10.3"] == "sm_100f" and tiers["12.1"] == "sm_120f"
    assert res.effective_text == "10.0f+PTX;12.0f+PTX"
    assert res.targets.ptx == frozenset({Arch(10, 0), Arch(12, 0)})  # PTX always plain


def test_declared_ptx_of_a_dropped_arch_moves_to_the_highest_survivor_below() -> None:
    pkg = PackageConfig("pp", arch_list=entries("7.5;8.0;10.0+PTX;12.0"))
    res = resolve_combo("cu124", "2.6", package=pkg)
    assert res.effective_text == "7.5;8.0+PTX"
    moved = [d for d in res.decisions if d.outcome == "moved"]
    assert {str(d.arch) for d in moved} == {"10.0", "8.0"}


def test_role_ii_adds_ptx_below_the_major_gap_when_nobody_declared_one() -> None:
    pkg = PackageConfig("pp", arch_list=entries("9.0;10.0;12.0"))
    res = resolve_combo("cu130", "2.13", package=pkg)
    assert res.effective_text == "9.0;10.0+PTX;12.0+PTX"
    added = {str(d.arch): d.reason for d in res.decisions if d.outcome == "added"}
    assert "role (i)" in added["12.0"] and "role (ii)" in added["10.0"]


def test_live_clamp_drop_not_in_the_record_is_called_stale() -> None:
    torch = TorchBuild(
        Version("2.9.0"),
        CudaVersion(12, 8),
        targets("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"),
        "test",
    )
    res = resolve(POLICY, bundled_toolkit((12, 8)), torch)
    assert res.effective_text == NO_VOLTA
    (drop,) = [d for d in res.decisions if d.step == "torch" and d.outcome == "dropped"]
    assert drop.arch == Arch(7, 0) and "arch_exceptions is stale" in drop.reason


def test_exceptions_need_a_torch_version() -> None:
    torch = TorchBuild(
        None,
        None,
        targets("sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"),
        "--torch-arches",
    )
    res = resolve(POLICY, bundled_toolkit((12, 8)), torch)
    assert res.effective_text == FULL
    assert any("not applied" in n for n in res.notes)


def test_cpu_era_torch_without_ptx_clamps_above() -> None:
    """cu126 torch ships no PTX: a cubin it cannot host above 9.x is dropped."""
    pkg = PackageConfig("pp", arch_list=entries("8.0;9.0;9.0a"))
    res = resolve_combo("cu126", "2.8", package=pkg)
    assert res.effective_text == "8.0;9.0+PTX;9.0a"


# --- properties -----------------------------------------------------------------------

TOOLKITS = sorted(bundled_rows())
ARCHES = sorted({a for r in bundled_rows().values() for a in r.toolkit.cubins})
DEVICES = known_devices()


@st.composite
def combos(draw):  # type: ignore[no-untyped-def]
    version = draw(st.sampled_from(TOOLKITS))
    toolkit = bundled_toolkit(version)
    request = draw(
        st.lists(st.tuples(st.sampled_from(ARCHES), st.booleans()), min_size=1, max_size=10)
    )
    cubins = draw(st.sets(st.sampled_from([a for a in ARCHES if not a.suffix]), max_size=8))
    ptx = draw(st.sets(st.sampled_from([a for a in ARCHES if not a.suffix]), max_size=2))
    torch_version = draw(st.sampled_from(["2.6", "2.7", "2.11", "2.13"]))
    torch = TorchBuild(
        Version(torch_version), version, Targets(frozenset(cubins), frozenset(ptx)), "hypothesis"
    )
    entries = tuple(sorted({a: p for a, p in request}.items()))
    pkg = PackageConfig("pp", arch_list=tuple(ArchEntry(a, p) for a, p in entries))
    return toolkit, torch, pkg


@settings(max_examples=300, deadline=None)
@given(combos())
def test_resolution_invariants(combo) -> None:  # type: ignore[no-untyped-def]
    toolkit, torch, pkg = combo
    res = resolve(POLICY, toolkit, torch, package=pkg)
    cubins = {e.arch for e in res.effective}
    # a subset of what was asked, and never a plain/family twin nvcc would refuse
    assert cubins <= {e.arch for e in pkg.arch_list or ()}
    assert not any(Arch(a.major, a.minor, "f") in cubins for a in cubins if not a.suffix)
    # every cubin is emitted by the toolkit and serves a device torch can run on
    for arch in cubins:
        assert toolkit.emits_cubin(arch)
        served = served_devices(arch, cubins, res.devices)  # its toolkit's era
        assert any(runs_on(torch.targets, d.cc) for d in served)
    if cubins:
        # PTX role (i): the highest arch carries PTX
        highest = max(a.cc for a in cubins)
        assert any(p.cc == highest for p in res.targets.ptx)
        # PTX role (ii): every device between lowest and highest is reached
        lowest = min(a.cc for a in cubins)
        for d in res.devices:
            if lowest <= d.cc <= highest and chosen_cubin(cubins, d.cc) is None:
                assert any(p.cc <= d.cc for p in res.targets.ptx), d
        # PTX is always plain and emitted by the toolkit
        assert all(not p.suffix and toolkit.emits_ptx(p) for p in res.targets.ptx)
    # canonical order, and the same input gives the same output
    assert list(res.effective) == sorted(res.effective)
    again = resolve(POLICY, toolkit, torch, package=pkg)
    assert again.effective == res.effective and again.decisions == res.decisions
    assert format_list(res.effective) == res.effective_text


def test_plain_and_family_twins_collapse_to_the_family_cubin() -> None:
    """nvcc 13.0 refuses sm_100 and sm_100f in one compile; 10.0f serves the same devices."""
    pkg = PackageConfig("pp", arch_list=entries("9.0;10.0+PTX;10.0f"))
    res = resolve_combo("cu130", "2.13", package=pkg)
    assert res.effective_text == "9.0;10.0f+PTX"
    (drop,) = [d for d in res.decisions if d.outcome == "dropped"]
    assert drop.arch == Arch(10, 0) and "nvcc refuses" in drop.reason


def test_maxwell_is_served_by_sm_50_where_the_toolkit_emits_it_and_torch_ships_it() -> None:
    """cu126: nvcc 12.6 emits sm_50 and torch ships it, so 5.0 serves 5.0-5.3 (kept);
    cu128 torch 2.8 ships no 5.x cubin and no PTX at or below 5.3, so it is dropped."""
    pkg = PackageConfig("pp", arch_list=entries("5.0;8.0"))
    res = resolve_combo("cu126", "2.8", package=pkg)
    assert res.effective_text == "5.0+PTX;8.0+PTX"  # 6.x/7.x sit in the gap: PTX on 5.0
    tiers = {c.device.cc_text: (c.tier, c.via) for c in res.coverage()}
    assert tiers["5.2"] == (Tier.NATIVE, "sm_50") and tiers["5.3"] == (Tier.NATIVE, "sm_50")
    (kept,) = [d for d in res.decisions_for(Arch(5, 0)) if d.step.value == "torch"]
    assert kept.reason.startswith("sm_50 serves 5.0, 5.2, 5.3; torch 2.8 (cu126) runs on")
    res = resolve_combo("cu128", "2.8", package=pkg)
    assert res.effective_text == "8.0+PTX"
    (drop,) = res.dropped()
    assert drop.arch == Arch(5, 0) and "ships no 5.x cubin at all" in drop.reason


@pytest.mark.parametrize(("index", "torch"), COMBOS)
def test_maxwell_is_named_dead_on_every_bundled_row(index: str, torch: str) -> None:
    dead = {c.device.cc_text for c in resolve_combo(index, torch).coverage() if c.tier is Tier.DEAD}
    assert {"5.0", "5.2", "5.3"} <= dead
