"""The row rule: which policy row a build takes when its nvcc's minor is not its torch
build's (nvcc 13.5 beside torch 2.13.0+cu130), and a toolkit archguard's table lacks,
probed live. Hypothetical combinations are data; the live ones run the real nvcc 13.5
(NVIDIA's wheels, assembled by scripts/setup_env.sh) and the real installed torch."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from archguard.binaries.record import read_record, resolution_record
from archguard.core.arch import parse_targets
from archguard.core.cuda import CudaVersion
from archguard.core.policy import load_policy
from archguard.core.resolve import resolve
from archguard.core.rows import choose_row
from archguard.core.site import SiteWheel
from archguard.core.toolkit import Toolkit, bundled_rows, bundled_toolkit, known_arches
from archguard.core.torchbuild import TorchBuild, bundled_torch
from archguard.detect.nvcc import probed_live
from archguard.errors import NoPolicyRow
from archguard.reports.text import build_log_lines, explain_text
from archguard.user.which import Here, judge, python_tags
from realtools import CUDA_HOME, cli, needs_cuda_torch, needs_nvcc, not_fetched

POLICY = load_policy()
CU130_ROW = "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"
NEW_CUDA_HOME = os.environ.get("AG_TEST_NEW_CUDA_HOME")


def torch_130() -> TorchBuild:
    return bundled_torch((13, 0), Version("2.13"))


def test_a_newer_minor_takes_the_torch_builds_row_clamped_by_its_own_facts() -> None:
    toolkit = bundled_toolkit((13, 5))
    res = resolve(POLICY, toolkit, torch_130())
    assert res.tag == "cu130" and res.toolkit.text == "13.5"
    assert res.request.origin == "policy row cu130"
    assert res.effective_text == CU130_ROW
    assert "torch build's CUDA index (cu130), clamped by nvcc 13.5" in res.row.rule
    assert "driver for CUDA 13.5" in res.row.rule  # its PTX JITs on such a driver only
    text = explain_text(res)
    assert "  row         cu130: the torch build's CUDA index" in text
    # the build log says it only where the rule chose another index than nvcc's own
    assert any(line.startswith("row: cu130: ") for line in build_log_lines(res, [], []))
    same = resolve(POLICY, bundled_toolkit((13, 0)), torch_130())
    assert same.tag == "cu130" and "both CUDA 13.0" in same.row.rule
    assert not any(line.startswith("row: ") for line in build_log_lines(same, [], []))


def test_an_older_minor_takes_the_torch_builds_row() -> None:
    """torch built for 13.2 (as torch 2.15.0 is) with nvcc 13.0: row cu132, its exceptions
    and overrides, clamped by what nvcc 13.0 emits."""
    res = resolve(POLICY, bundled_toolkit((13, 0)), bundled_torch((13, 2), Version("2.15")))
    assert res.tag == "cu132" and res.request.origin == "policy row cu132"
    assert res.effective_text == CU130_ROW
    assert "clamped by nvcc 13.0's own facts" in res.row.rule


def test_a_torch_without_a_cuda_leaves_the_toolkits_own_index_which_may_have_no_row() -> None:
    toolkit = bundled_toolkit((13, 5))
    bare = TorchBuild(None, None, parse_targets("sm_80 sm_90", "t", known=known_arches()), "data")
    row = choose_row(toolkit, bare)
    assert row.tag == "cu135" and "the torch states no CUDA build" in row.rule
    with pytest.raises(NoPolicyRow) as info:
        resolve(POLICY, toolkit, bare)
    message = str(info.value)
    assert "no row for cu135" in message and "the row rule: the toolkit's own index" in message


def test_a_new_cuda_major_still_fails_loudly() -> None:
    """A CUDA 14 toolkit and a torch built for it: no rule invents a row."""
    toolkit = Toolkit(
        CudaVersion(14, 0),
        frozenset(bundled_toolkit((13, 5)).cubins),
        frozenset(bundled_toolkit((13, 5)).ptx),
        "data: a CUDA 14 toolkit",
    )
    torch = TorchBuild(Version("3.0.0+cu140"), CudaVersion(14, 0), torch_130().targets, "data")
    with pytest.raises(NoPolicyRow, match="no row for cu140"):
        resolve(POLICY, toolkit, torch)


def test_the_record_keeps_the_row_for_the_label_and_the_toolkit_for_the_ptx() -> None:
    res = resolve(POLICY, bundled_toolkit((13, 5)), torch_130())
    data = resolution_record(res)
    assert data["cuda"]["version"] == "13.5" and data["cuda"]["tag"] == "cu130"  # type: ignore[index]
    assert "clamped by nvcc 13.5" in data["cuda"]["rule"]  # type: ignore[index]
    recorded = read_record(json.dumps(data), "t")
    assert recorded.line == "cu130" and recorded.cuda == "13.5"
    assert CudaVersion.parse(recorded.line_cuda or "", "t").tag == "cu130"


def test_which_names_the_driver_the_ptx_needs() -> None:
    wheel = SiteWheel(
        "pkg-1.0+cu130torch2.13-cp311-cp311-manylinux_2_28_x86_64.whl",
        "0" * 64,
        "pkg",
        "cell",
        "13.0",
        ("sm_80", "sm_90", "compute_90"),
        "torch>=2.13,<2.14",
        "r",
        "p",
        compiled_with="13.5",
    )
    from archguard.core.coverage import known_devices

    thor = next(d for d in known_devices() if d.cc == (11, 0))
    python, tags = python_tags((3, 11))
    here = Here("2.13.0+cu130", CudaVersion(13, 0), python, tags, (thor,), (13, 0))
    reasons = " ".join(judge(wheel, here).reasons)
    assert "only PTX serves the GPU 11.0" in reasons
    assert "written by CUDA 13.5 and this driver runs CUDA up to 13.0" in reasons
    newer = Here("2.13.0+cu130", CudaVersion(13, 0), python, tags, (thor,), (13, 5))
    assert "needs a driver for CUDA 13.5 or newer" in " ".join(judge(wheel, newer).reasons)


@needs_nvcc
def test_a_toolkit_the_table_lacks_is_probed_live_with_its_real_ptxas() -> None:
    """The real ptxas of the installed toolkit assembles each target the (hypothetical, as
    data) CUDA 13.9's nvcc lists; sm_109, which no ptxas knows, is refused and said."""
    assert CudaVersion(13, 9) not in bundled_rows()
    real = bundled_toolkit((13, 0))
    listed = Toolkit.from_lists(
        CudaVersion(13, 9),
        [a.sm for a in real.plain_cubins()] + ["sm_109"],
        [a.compute for a in sorted(real.ptx) if not a.suffix],
        "data: nvcc 13.9's lists",
    )
    live = probed_live(listed, str(Path(CUDA_HOME) / "bin" / "ptxas"))
    assert "live: CUDA 13.9 is not in archguard's toolkit table" in live.source
    assert "refused sm_109" in live.source and "compute_109" not in live.source
    assert {a.sm for a in live.cubins} == {a.sm for a in real.cubins}
    assert live.ptx == real.ptx


def new_cuda_home() -> str:
    if not NEW_CUDA_HOME:
        not_fetched("CUDA 13.5", "AG_TEST_NEW_CUDA_HOME is unset (scripts/setup_env.sh)")
    return str(NEW_CUDA_HOME)


@needs_cuda_torch
def test_explain_and_derive_with_nvcc_13_5_beside_a_cu130_torch() -> None:
    env = {"CUDA_HOME": new_cuda_home()}
    explained = cli("explain", "--format", "json", env=env)
    assert explained.returncode == 0, explained.stderr
    data = json.loads(explained.stdout)
    assert data["cuda"]["version"] == "13.5" and data["cuda"]["tag"] == "cu130"
    assert data["effective"] == CU130_ROW
    text = cli("explain", env=env)
    assert "cu130: the torch build's CUDA index (cu130), clamped by nvcc 13.5" in text.stdout
    derived = cli("derive", env=env)
    assert derived.returncode == 0, derived.stderr
    assert "archguard derive: cu130" in derived.stdout
    assert "toolkit  CUDA 13.5: nvcc " in derived.stdout
    assert f'arch_list: "{CU130_ROW}"' in derived.stdout


@pytest.mark.slow
@needs_cuda_torch
def test_the_example_builds_with_nvcc_13_5_and_a_cu130_torch(tmp_path: Path) -> None:
    """The example, built by `archguard wheel` with nvcc 13.5: verified, labelled for the
    torch's cell (+cu130torch2.13, not cu135), its record naming both."""
    from realtools import REPO, build_env, copy_tree, wheel_record

    src = copy_tree(REPO / "example_package", tmp_path / "example_package")
    env = build_env(CUDA_HOME=new_cuda_home(), ARCHGUARD_ARCH_LIST="8.0")
    out = tmp_path / "out"
    proc = subprocess.run(
        [*cli_argv(), "wheel", str(src), "-w", str(out), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    assert "+cu130torch2.13-" in wheel.name
    record = wheel_record(wheel)
    assert record["cuda"]["version"] == "13.5" and record["cuda"]["tag"] == "cu130"  # type: ignore[index]
    verified = cli("verify", str(wheel), env=env)
    assert verified.returncode == 0 and "result: OK" in verified.stdout, verified.stdout


def cli_argv() -> list[str]:
    import sys

    return [sys.executable, "-m", "archguard"]
