"""archguard.flags: spelling a list for nvcc, torch and CMake; reading hard-coded flags back;
planning an extension's nvcc arguments."""

from __future__ import annotations

import pytest
from packaging.version import Version

from archguard.arch import Arch, ArchEntry, Targets, parse_arch_list
from archguard.errors import NotRepresentable, NvccFlagError
from archguard.flags import (
    cmake_architectures,
    find_arch_flags,
    gencode_flags,
    plan_extension,
    torch_arch_list,
)
from archguard.policy import load_policy
from archguard.resolve import resolve
from archguard.toolkit import bundled_toolkit, known_arches
from archguard.torchbuild import bundled_torch


def entries(text: str) -> tuple[ArchEntry, ...]:
    return parse_arch_list(text, "test", known=known_arches())


SPELLINGS = [
    # list, TORCH_CUDA_ARCH_LIST (None: not representable), CMAKE_CUDA_ARCHITECTURES
    ("7.5;8.0;9.0+PTX", "7.5;8.0;9.0+PTX", "75-real;80-real;90"),
    ("9.0a;10.0", "9.0a;10.0", "90a-real;100-real"),
    ("10.0f", None, "100f-real"),
    ("12.0a+PTX", None, "120a-real;120-virtual"),
    ("8.8", None, "88-real"),  # nvcc 13.0 emits it; torch's allowlist lacks it
]


@pytest.mark.parametrize(("text", "torch", "cmake"), SPELLINGS)
def test_spellings(text: str, torch: str | None, cmake: str) -> None:
    assert cmake_architectures(entries(text)) == cmake
    if torch is None:
        with pytest.raises(NotRepresentable) as info:
            torch_arch_list(entries(text))
        assert info.value.problems
    else:
        assert torch_arch_list(entries(text)) == torch


def test_gencode_is_sorted_cubins_then_plain_ptx() -> None:
    assert gencode_flags(entries("12.0a+PTX;8.0")) == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_120a,code=sm_120a",
        "-gencode=arch=compute_120,code=compute_120",
    ]


FLAGS = [
    (["-O2", "-gencode=arch=compute_80,code=sm_80"], ["-O2"], ["sm_80"]),
    (["-gencode", "arch=compute_90a,code=sm_90a"], [], ["sm_90a"]),
    (
        ["--generate-code=arch=compute_100f,code=[sm_100f,compute_100f]"],
        [],
        ["sm_100f", "compute_100f"],
    ),
    (["-arch=sm_90"], [], ["sm_90", "compute_90"]),
    (["-arch", "compute_80", "-code", "sm_80,sm_86"], [], ["sm_80", "sm_86"]),
    (
        ["-I/x/research/monarch/include", "--threads", "4"],
        ["-I/x/research/monarch/include", "--threads", "4"],
        [],
    ),
]


@pytest.mark.parametrize(("args", "rest", "names"), FLAGS)
def test_find_arch_flags(args: list[str], rest: list[str], names: list[str]) -> None:
    other, found = find_arch_flags(args)
    assert other == rest
    cubins = frozenset().union(*(f.targets.cubins for f in found)) if found else frozenset()
    ptx = frozenset().union(*(f.targets.ptx for f in found)) if found else frozenset()
    assert sorted(Targets(cubins, ptx).names()) == sorted(names)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["-arch=native"], "'native'"),
        (["--gpu-architecture", "all-major"], "'all-major'"),
        (["-gencode=arch=compute_90,code=lto_90"], "LTO"),
        (["-gencode"], "has no value"),
        (["-gencode=sm_90"], "is not of the form"),
    ],
)
def test_unclampable_flags(args: list[str], needle: str) -> None:
    with pytest.raises(NvccFlagError, match=needle):
        find_arch_flags(args)


def test_plan_replaces_every_arch_flag_and_names_each_drop() -> None:
    res = resolve(
        load_policy(None), bundled_toolkit((13, 0)), bundled_torch((13, 0), Version("2.13"))
    )
    plan = plan_extension(
        "pkg._C",
        {
            "nvcc": [
                "-gencode=arch=compute_89,code=sm_89",
                "-O3",
                "-gencode",
                "arch=compute_80,code=sm_80",
            ]
        },
        res,
    )
    assert plan.args == {"nvcc": ["-O3", *gencode_flags(res.effective)]}
    assert plan.targets == res.targets and plan.kept == {}
    (warning,) = plan.warnings
    assert "'-gencode=arch=compute_89,code=sm_89'" in warning and "policy row cu130" in warning
    (note,) = plan.notes
    assert "'-gencode arch=compute_80,code=sm_80' is within the effective list" in note
    assert Arch(8, 9) not in res.targets.cubins


def cu130():  # type: ignore[no-untyped-def]
    return resolve(
        load_policy(None), bundled_toolkit((13, 0)), bundled_torch((13, 0), Version("2.13"))
    )


@pytest.mark.parametrize(
    ("flags", "cubins", "kept"),
    [
        # a kept a target takes its plain twin's place
        (
            ["-gencode", "arch=compute_90a,code=sm_90a"],
            "sm_75 sm_80 sm_86 sm_90a sm_100 sm_120",
            {"sm_90a": "sm_90"},
        ),
        # a plain twin the package hard-codes itself stays beside it (vLLM #56548)
        (
            ["-gencode=arch=compute_100,code=sm_100", "-gencode=arch=compute_100a,code=sm_100a"],
            "sm_75 sm_80 sm_86 sm_90 sm_100 sm_100a sm_120",
            {"sm_100a": None},
        ),
        # an f target always displaces its plain twin (nvcc refuses both)
        (["-arch=sm_100f"], "sm_75 sm_80 sm_86 sm_90 sm_100f sm_120", {"sm_100f": "sm_100"}),
        # a target no plain twin covers is added
        (
            ["-gencode=arch=compute_103a,code=sm_103a"],
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
    assert plan.targets.ptx == cu130().targets.ptx  # the PTX nets stay plain


def test_an_arch_specific_target_the_clamps_refuse_is_dropped_with_the_reason() -> None:
    """nvcc 12.6 emits no sm_100a: the toolkit clamp refuses it even when it is kept."""
    res = resolve(
        load_policy(None), bundled_toolkit((12, 6)), bundled_torch((12, 6), Version("2.8"))
    )
    plan = plan_extension("e", {"nvcc": ["-gencode=arch=compute_100a,code=sm_100a"]}, res)
    assert plan.kept == {} and plan.targets == res.targets
    (warning,) = plan.warnings
    assert "nvcc 12.6 cannot emit sm_100a" in warning


def test_error_mode_stops_with_one_paragraph() -> None:
    from archguard.errors import ArchSpecificFlag

    with pytest.raises(ArchSpecificFlag, match="hard-codes the arch-specific target sm_90a"):
        plan_extension("e", {"nvcc": ["-arch=sm_90a"]}, cu130(), "error")
