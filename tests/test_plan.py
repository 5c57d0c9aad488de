"""archguard.nvcc.plan: an extension's targets from the effective list, bounded by what the
package hard-codes (floor, arch-specific only), PTX nets moved off a-only arches, targets
the lint proves an #error for dropped; and what each hard-coded flag becomes.

The resolutions are the bundled cu130 row with torch 2.13 (and cu126 / torch 2.8), fed in
as data; the nvcc test reads the real nvcc's expansion of ``-arch=sm_90a``."""

from __future__ import annotations

import re
import subprocess

import pytest
from packaging.version import Version

from archguard.core.arch import Arch, ArchEntry, parse_arch_list
from archguard.core.policy import load_policy
from archguard.core.resolve import resolve
from archguard.core.toolkit import bundled_toolkit, known_arches
from archguard.core.torchbuild import bundled_torch
from archguard.errors import ArchSpecificFlag, EmptyExtension
from archguard.nvcc.flags import gencode_flags
from archguard.nvcc.plan import Rule, list_text, plan_extension
from realtools import needs_nvcc, nvcc


def cu130(arch_list: str | None = None):  # type: ignore[no-untyped-def]
    override = None
    if arch_list is not None:
        override = (
            tuple(parse_arch_list(arch_list, "test", known=known_arches())),
            "ARCHGUARD_ARCH_LIST",
        )
    return resolve(
        load_policy(None),
        bundled_toolkit((13, 0)),
        bundled_torch((13, 0), Version("2.13")),
        override=override,
    )


def names(plan) -> str:  # type: ignore[no-untyped-def]
    return " ".join(plan.targets.names())


def test_no_hard_coded_target_gets_the_effective_list() -> None:
    res = cu130()
    plan = plan_extension("e", {"nvcc": ["-O3"]}, res)
    assert plan.intent.rule is Rule.LIST
    assert plan.targets == res.targets and plan.args == {
        "nvcc": ["-O3", *gencode_flags(res.effective)]
    }
    assert plan.added == res.targets.names()


def test_the_lowest_hard_coded_target_is_the_floor() -> None:
    """A cp.async package hard-codes 8.0 and 8.6: nothing below 8.0 is added; the list is
    the policy's from there up, and the hard-coded flags are replaced."""
    plan = plan_extension(
        "pkg._C",
        {
            "nvcc": [
                "-gencode=arch=compute_86,code=sm_86",
                "-O3",
                "-gencode",
                "arch=compute_80,code=sm_80",
            ]
        },
        cu130(),
    )
    assert plan.intent.rule is Rule.FLOOR and plan.intent.floor == Arch(8, 0)
    assert plan.intent.flag == "-gencode arch=compute_80,code=sm_80"
    assert names(plan) == "sm_80 sm_86 sm_90 sm_100 sm_120 compute_90 compute_120"
    assert plan.args["nvcc"][0] == "-O3" and plan.args["nvcc"][1:] == plan.gencode
    assert "below extension pkg._C's floor sm_80" in plan.left_out["sm_75"]
    assert plan.added == ["sm_90", "sm_100", "sm_120", "compute_90", "compute_120"]
    assert all("is within the effective list" in n for n in plan.notes) and not plan.warnings


def test_a_plain_target_above_the_floor_is_a_cost_choice() -> None:
    plan = plan_extension("e", {"nvcc": ["-gencode=arch=compute_89,code=sm_89"]}, cu130())
    assert names(plan) == "sm_90 sm_100 sm_120 compute_90 compute_120"  # floor 8.9: no 8.9 row
    (warning,) = plan.warnings
    assert "dropped the hard-coded nvcc flag '-gencode=arch=compute_89,code=sm_89'" in warning
    assert "policy row cu130" in warning


def test_a_floor_cut_moves_the_nets_as_step_5_does() -> None:
    """Floor 10.0 drops the 9.0 net; Thor (11.0, no cubin) is then caught by compute_100."""
    plan = plan_extension(
        "e",
        {
            "nvcc": [
                "-gencode=arch=compute_100,code=sm_100",
                "-gencode=arch=compute_100a,code=sm_100a",
            ]
        },
        cu130(),
    )
    assert names(plan) == "sm_100 sm_100a sm_120 compute_100 compute_120"
    assert {a.sm: (b.sm if b else None) for a, b in plan.kept.items()} == {"sm_100a": None}


def test_a_floor_above_every_policy_entry_keeps_the_package_own_targets() -> None:
    plan = plan_extension("e", {"nvcc": ["-arch=sm_121"]}, cu130())
    assert names(plan) == "sm_121 compute_121"
    assert plan.added == []


def test_arch_specific_only_gets_exactly_those() -> None:
    """whisper-blaze's -arch=sm_90a: the sm_90a cubin, no plain target, no PTX net."""
    plan = plan_extension("e", {"nvcc": ["-arch=sm_90a", "-O3"]}, cu130())
    assert plan.intent.rule is Rule.ARCH_SPECIFIC_ONLY
    assert names(plan) == "sm_90a"
    assert plan.args["nvcc"] == ["-O3", "-gencode=arch=compute_90a,code=sm_90a"]
    (note,) = plan.notes  # one line for the one flag, no "dropped" beside "kept"
    assert note == (
        "extension e: kept the hard-coded arch-specific target sm_90a from '-arch=sm_90a' "
        "(a kernel requirement)"
    )
    assert not plan.warnings
    assert set(plan.left_out) == set(cu130().targets.names())


def test_the_net_never_sits_beside_an_a_only_arch() -> None:
    """sm_90a + sm_80: sm_90a in place of sm_90, the compute_90 net moves to compute_86,
    nothing below sm_80."""
    plan = plan_extension(
        "e",
        {
            "nvcc": [
                "-gencode",
                "arch=compute_90a,code=sm_90a",
                "-gencode",
                "arch=compute_80,code=sm_80",
            ]
        },
        cu130(),
    )
    assert plan.intent.rule is Rule.FLOOR
    assert names(plan) == "sm_80 sm_86 sm_90a sm_100 sm_120 compute_86 compute_120"
    assert "__CUDA_ARCH_FEAT_SM90_ALL" in plan.left_out["compute_90"]
    assert "moved to compute_86" in plan.left_out["compute_90"]
    assert plan.origins["compute_86"].startswith("the compute_90 PTX net, moved down")


def test_the_net_move_applies_to_explicit_lists_too() -> None:
    plan = plan_extension("e", {"nvcc": ["-arch=sm_90a"]}, cu130("9.0+PTX;10.0"))
    assert plan.intent.rule is Rule.EXPLICIT
    assert names(plan) == "sm_90a sm_100 compute_100"  # nothing below 9.0 carries its net
    assert "no plain arch below it" in plan.left_out["compute_90"]


def test_an_explicit_list_wins_over_the_floor() -> None:
    plan = plan_extension("e", {"nvcc": ["-arch=sm_80"]}, cu130("7.5;8.0+PTX"))
    assert plan.intent.rule is Rule.EXPLICIT
    assert names(plan) == "sm_75 sm_80 compute_80"


@pytest.mark.parametrize(
    ("flags", "cubins", "kept"),
    [
        # a kept a target takes its plain twin's place
        (
            ["-gencode=arch=compute_80,code=sm_80", "-gencode", "arch=compute_90a,code=sm_90a"],
            "sm_80 sm_86 sm_90a sm_100 sm_120",
            {"sm_90a": "sm_90"},
        ),
        # a plain twin the package hard-codes itself stays beside it (vLLM #56548)
        (
            [
                "-gencode=arch=compute_75,code=sm_75",
                "-gencode=arch=compute_100,code=sm_100",
                "-gencode=arch=compute_100a,code=sm_100a",
            ],
            "sm_75 sm_80 sm_86 sm_90 sm_100 sm_100a sm_120",
            {"sm_100a": None},
        ),
        # an f target always displaces its plain twin (nvcc refuses both)
        (
            ["-arch=sm_75", "-gencode=arch=compute_100f,code=sm_100f"],
            "sm_75 sm_80 sm_86 sm_90 sm_100f sm_120",
            {"sm_100f": "sm_100"},
        ),
        # a target no plain twin covers is added
        (
            ["-arch=sm_75", "-gencode=arch=compute_103a,code=sm_103a"],
            "sm_75 sm_80 sm_86 sm_90 sm_100 sm_103a sm_120",
            {"sm_103a": None},
        ),
    ],
)
def test_hard_coded_arch_specific_targets_are_kept(
    flags: list[str], cubins: str, kept: dict[str, str | None]
) -> None:
    plan = plan_extension("e", {"nvcc": flags}, cu130())
    assert " ".join(a.sm for a in sorted(plan.targets.cubins)) == cubins
    assert {a.sm: (b.sm if b else None) for a, b in plan.kept.items()} == kept


def test_an_arch_specific_target_the_clamps_refuse_is_dropped_with_the_reason() -> None:
    """nvcc 12.6 emits no sm_100a: the clamp refuses it, and an extension that asked for it
    alone has no cubin left: one clear error."""
    res = resolve(
        load_policy(None), bundled_toolkit((12, 6)), bundled_torch((12, 6), Version("2.8"))
    )
    plan = plan_extension(
        "e", {"nvcc": ["-arch=sm_80", "-gencode=arch=compute_100a,code=sm_100a"]}, res
    )
    assert plan.kept == {} and names(plan) == "sm_80 sm_86 sm_90 compute_90"
    refused, ptx = plan.warnings
    assert "nvcc 12.6 cannot emit sm_100a" in refused
    assert "compute_80: the PTX nets come from the list (compute_90)" in ptx
    with pytest.raises(EmptyExtension, match="extension e is left with no cubin") as info:
        plan_extension("e", {"nvcc": ["-gencode=arch=compute_100a,code=sm_100a"]}, res)
    assert "nvcc 12.6 cannot emit sm_100a" in str(info.value)


def test_drop_mode_treats_an_a_target_as_a_plain_one() -> None:
    plan = plan_extension("e", {"nvcc": ["-arch=sm_90a"]}, cu130(), "drop")
    assert (
        plan.intent.rule is Rule.FLOOR
        and names(plan) == "sm_90 sm_100 sm_120 compute_90 compute_120"
    )
    (warning,) = plan.warnings
    assert "hardcoded_arch_specific = 'drop'" in warning


def test_error_mode_stops_with_one_paragraph() -> None:
    with pytest.raises(ArchSpecificFlag, match="hard-codes the arch-specific target sm_90a"):
        plan_extension("e", {"nvcc": ["-arch=sm_90a"]}, cu130(), "error")


def test_a_proved_error_drops_its_targets_whatever_asked_for_them() -> None:
    why = "'#error \"needs sm_80\"' (k.cu:4)"
    plan = plan_extension("e", {"nvcc": []}, cu130("7.5;8.0+PTX"), proven={"sm_75": why})
    assert names(plan) == "sm_80 compute_80"
    assert plan.left_out == {"sm_75": f"the lint proves {why} is reached for it"}
    with pytest.raises(EmptyExtension, match="the lint proves"):
        plan_extension("e", {"nvcc": []}, cu130("7.5"), proven={"sm_75": why})


def test_list_text_spells_plain_ptx_on_its_arch() -> None:
    plan = plan_extension("e", {"nvcc": ["-arch=sm_80", "-arch=sm_90a"]}, cu130("8.0+PTX"))
    assert list_text(plan.targets) == "8.0+PTX;9.0a"
    assert list_text(cu130().targets) == cu130().effective_text
    assert str(ArchEntry(Arch(9, 0, "a"), True)) == "9.0a+PTX"


@needs_nvcc
def test_nvcc_expands_arch_sm_90a_to_plain_compute_90_ptx() -> None:
    """Why -arch=sm_90a is read as the sm_90a cubin alone: nvcc 13.0 adds plain compute_90
    PTX to it (ptxas runs on it, and sm_90a-only code in it fails), while the -gencode line
    archguard writes asks for the cubin alone."""
    path = nvcc()
    assert path

    def dryrun(*flags: str) -> str:
        proc = subprocess.run(
            [path, *flags, "--dryrun", "-c", "x.cu", "-o", "x.o"],
            capture_output=True,
            text=True,
            check=False,
        )
        return proc.stdout + proc.stderr

    plain = dryrun("-arch=sm_90a")
    assert re.search(r"cicc.* -arch compute_90\s", plain), plain[-3000:]  # plain PTX compiled
    assert "kind=ptx,sm=90," in plain and "kind=elf,sm=90a," in plain
    exact = dryrun("-gencode=arch=compute_90a,code=sm_90a")
    assert "kind=elf,sm=90a," in exact and "kind=ptx" not in exact
    assert not re.search(r"cicc.* -arch compute_90\s", exact)
