from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from archguard.core.arch import Arch
from archguard.core.cuda import CudaVersion
from archguard.core.toolkit import (
    Toolkit,
    bundled_rows,
    bundled_toolkit,
    compare_with_bundled,
    variant_rule,
)
from archguard.detect.nvcc import find_nvcc, parse_nvcc_version, probe_toolkit
from archguard.errors import NvccNotFound, NvccUnusable, UnknownToolkit
from realtools import needs_nvcc

CUDA_HOME = os.environ.get("AG_TEST_CUDA_HOME", "/usr/local/cuda")
has_nvcc = needs_nvcc  # realtools' mark: conftest tags the tests it guards `nvcc`


def test_table_covers_the_policy_rows() -> None:
    assert {f"{v[0]}.{v[1]}" for v in bundled_rows()} >= {
        "12.4",
        "12.6",
        "12.8",
        "12.9",
        "13.0",
        "13.2",
    }
    for row in bundled_rows().values():
        assert "wheel" in row.toolkit.source  # provenance: which binary said so


@pytest.mark.parametrize("version", sorted(bundled_rows()))
def test_variant_rule_reproduces_every_probed_row(version: CudaVersion) -> None:
    """The a/f rule used for a live nvcc gives exactly what the real ptxas accepted."""
    row = bundled_rows()[version].toolkit
    plain = [a for a in row.cubins if not a.suffix]
    assert row.cubins == frozenset(plain) | variant_rule(plain, version)


@pytest.mark.parametrize("version", [v for v, r in bundled_rows().items() if r.nvcc_list_gpu_code])
def test_wheel_nvcc_lists_agree_with_ptxas_probe(version: CudaVersion) -> None:
    row = bundled_rows()[version]
    rebuilt = Toolkit.from_lists(version, row.nvcc_list_gpu_code, row.nvcc_list_gpu_arch, "t")
    assert rebuilt.cubins == row.toolkit.cubins


def test_cuda_13_dropped_volta_and_12_9_added_family_targets() -> None:
    assert not bundled_toolkit((13, 0)).emits_cubin(Arch(7, 0))
    assert bundled_toolkit((12, 8)).emits_cubin(Arch(7, 0))
    assert not bundled_toolkit((12, 8)).emits_cubin(Arch(10, 0, "f"))
    assert bundled_toolkit((12, 9)).emits_cubin(Arch(10, 0, "f"))
    assert bundled_toolkit((13, 0)).emits_cubin(Arch(11, 0))
    assert bundled_toolkit((12, 9)).emits_cubin(Arch(10, 1))  # Thor before the rename


def test_unknown_toolkit_lists_the_known_ones() -> None:
    with pytest.raises(UnknownToolkit, match=re.escape("12.4, 12.6, 12.8, 12.9, 13.0, 13.2")):
        bundled_toolkit((11, 8))


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("12.8", (12, 8)),
        ("cu128", (12, 8)),
        ("13", (13, 0)),
        ("12.8.93", (12, 8)),
        ("cu130", (13, 0)),
    ],
)
def test_cuda_spellings(text: str, version: tuple[int, int]) -> None:
    assert CudaVersion.parse(text) == version


def test_nvcc_version_text() -> None:
    text = "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler"
    assert parse_nvcc_version(text) == (13, 0)
    with pytest.raises(NvccUnusable, match="did not print a CUDA release"):
        parse_nvcc_version("nvcc: command not found")


def test_find_nvcc_order(tmp_path: Path) -> None:
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "nvcc").write_text("")
    assert find_nvcc({"CUDA_HOME": str(home), "CUDA_PATH": "/x"}).how == "CUDA_HOME"
    assert find_nvcc({"CUDA_PATH": str(home)}).how == "CUDA_PATH"
    loc = find_nvcc({}, which=lambda _: str(home / "bin" / "nvcc"))
    assert (loc.how, loc.cuda_home) == ("PATH", str(home))
    with pytest.raises(NvccNotFound, match="does not exist"):
        find_nvcc({"CUDA_HOME": str(tmp_path / "missing")})


def test_no_nvcc_anywhere_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("archguard.detect.nvcc.DEFAULT_CUDA_HOME", "/nonexistent-cuda")
    with pytest.raises(NvccNotFound, match="no nvcc found"):
        find_nvcc({}, which=lambda _: None)


@has_nvcc
def test_live_nvcc_agrees_with_bundled_row() -> None:
    """The real nvcc's --list-gpu-code (plus the a/f rule) equals the bundled row."""
    live = probe_toolkit(find_nvcc({"CUDA_HOME": CUDA_HOME}))
    assert live.version in bundled_rows(), f"add CUDA {live.text} to the bundled table"
    bundled = bundled_toolkit(live.version)
    assert live.cubins == bundled.cubins
    assert {a.plain for a in live.ptx} == {a.plain for a in bundled.ptx}
    assert compare_with_bundled(live) is None


@has_nvcc
def test_live_nvcc_emits_what_the_table_says(tmp_path: Path) -> None:
    """Compile a tiny kernel for an a and an f target the table claims, with the real nvcc."""
    live = probe_toolkit(find_nvcc({"CUDA_HOME": CUDA_HOME}))
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n")
    for name in ("sm_90a", "sm_100f", "sm_120"):
        arch = Arch.from_target(name)
        assert live.emits_cubin(arch)
        proc = subprocess.run(
            [
                str(live.nvcc),
                "-cubin",
                f"-arch={name}",
                str(src),
                "-o",
                str(tmp_path / f"{name}.cubin"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(
        [str(live.nvcc), "-cubin", "-arch=sm_70", str(src), "-o", str(tmp_path / "70.cubin")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0 and not live.emits_cubin(Arch(7, 0))
