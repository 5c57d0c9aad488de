"""archguard.nvcc.flags: spelling a list for nvcc, torch and CMake; reading hard-coded flags
back."""

from __future__ import annotations

import pytest

from archguard.core.arch import ArchEntry, Targets, parse_arch_list
from archguard.core.toolkit import known_arches
from archguard.errors import NotRepresentable, NvccFlagError
from archguard.nvcc.flags import (
    cmake_architectures,
    find_arch_flags,
    gencode_flags,
    torch_arch_list,
)


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
    # nvcc adds plain compute_90 PTX to -arch=sm_90a; the package meant the sm_90a cubin
    (["-arch=sm_90a"], [], ["sm_90a"]),
    (["--gpu-architecture", "sm_100f"], [], ["sm_100f"]),
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


@pytest.mark.parametrize(
    ("sample", "cmake", "spelled"),
    [
        ("8.0;8.6", False, "8.0;9.0;9.0a"),
        ("7.5 8.0+PTX", False, "8.0 9.0+PTX 9.0a"),
        ("80,86", False, "80,90,90a"),
        ("75;80", True, "80-real;90;90a-real"),
        ("80-real;90", False, "80-real;90;90a-real"),
        ("sm_80", False, "sm_80;sm_90;sm_90a"),
        ("sm_80,compute_80", False, "sm_80,sm_90,sm_90a,compute_90"),
        ("native", False, None),
        ("", False, None),
    ],
)
def test_the_list_in_a_packages_own_spelling(sample: str, cmake: bool, spelled: str | None) -> None:
    from archguard.core.arch import Arch, ArchEntry
    from archguard.nvcc.flags import spelled_like

    entries = [ArchEntry(Arch(8, 0)), ArchEntry(Arch(9, 0), True), ArchEntry(Arch(9, 0, "a"))]
    assert spelled_like(sample, entries, cmake) == spelled


def test_a_cmake_number_says_ptx_and_a_dotted_one_does_not() -> None:
    """``80`` bound for CMAKE_CUDA_ARCHITECTURES is a cubin and PTX: no "PTX left out" note;
    a dotted ``8.0`` (TORCH_CUDA_ARCH_LIST-like, no +PTX) does leave it out."""
    from archguard.core.arch import parse_arch_list
    from archguard.core.toolkit import known_arches
    from archguard.nvcc.flags import dropped_ptx, spelled_like

    entries = parse_arch_list("8.0+PTX", "t", known=known_arches())
    spelled = spelled_like("75;80", entries, cmake=True)
    assert spelled == "80"
    assert not dropped_ptx("75;80", spelled, entries, cmake=True)
    assert dropped_ptx("7.5;8.0", "8.0", entries)
    assert not dropped_ptx("75;80", "80-real;80-virtual", entries, cmake=True)
