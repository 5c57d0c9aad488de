"""Farm mode on real public packages (issue #8): released source distributions fetched from
the package index, unmodified, built with torch 2.13.0+cu130 and nvcc 13.0, no GPU.

- points_in_rbbox 1.1.9 (MIT): its setup.py uses torch's BuildExtension with no arch flags,
  so plain torch with no GPU visible crashes (IndexError, pytorch#137261). Built with the
  full bundled policy list.
- causal-conv1d 1.7.0 (BSD-3-Clause, Dao-AILab): its setup.py hard-codes a -gencode list that
  grows with the nvcc version (sm_75, 80, 87, 90, then 100, 120 on >= 12.8, then 103, 110,
  121 on >= 13.0, no PTX), appends its own `--threads 4`, and downloads a prebuilt wheel
  unless CAUSAL_CONV1D_FORCE_BUILD=TRUE. Built with ARCHGUARD_ARCH_LIST=8.0 to keep CI's
  time down (its 108 kernels cost minutes per arch on 2 cores).

Each sdist is pinned by its sha256, so the test builds exactly the sources the README names.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from realtools import (
    build_env,
    cli,
    farm_env,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    only_wheel,
    pip_wheel,
    recorded_targets,
    torch_cuda,
    wheel_so_targets,
)

pytestmark = [pytest.mark.slow, needs_nvcc, needs_cuda_torch, needs_cuobjdump]

CU130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_90", "compute_120"]
SDISTS = {
    "points_in_rbbox": (
        "1.1.9",
        "c666f0be6ba5391ee63ef393f87be6b11f3fe747e9c317e847e54f2dd5f1f7c8",
    ),
    "causal_conv1d": (
        "1.7.0",
        "3202758494eaa7b597ce1c282dfa188889506bfcb92cad3c407d26736bfcd32b",
    ),
}


def fetch(name: str, tmp: Path) -> Path:
    """Download the released sdist, check its hash, unpack it; the unpacked tree."""
    version, sha256 = SDISTS[name]
    dl = tmp / "dl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--no-build-isolation",
            f"{name}=={version}",
            "-d",
            str(dl),
        ],
        capture_output=True,
        text=True,
        env=build_env(CAUSAL_CONV1D_FORCE_BUILD="TRUE"),
        check=False,
    )
    archives = sorted(dl.glob(f"{name}-{version}.tar.gz")) if dl.exists() else []
    if not archives:
        pytest.skip(f"could not download the {name} {version} sdist: {proc.stderr[-400:]}")
    (archive,) = archives
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == sha256, "not the pinned sdist"
    with tarfile.open(archive) as tf:
        tf.extractall(tmp / "src", filter="data")
    return tmp / "src" / f"{name}-{version}"


def test_points_in_rbbox_an_unmodified_buildextension_package_with_the_full_policy_list(
    tmp_path: Path,
) -> None:
    src = fetch("points_in_rbbox", tmp_path)
    plain = pip_wheel(src, tmp_path / "plain", env=build_env())
    assert plain.returncode != 0 and "IndexError" in plain.stdout + plain.stderr
    proc = pip_wheel(src, tmp_path / "out", env=farm_env())
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert f"archguard: enabled by ARCHGUARD_ENABLE=1 for {src}" in log
    wheel = only_wheel(tmp_path / "out")
    found = wheel_so_targets(wheel, tmp_path)
    assert found == recorded_targets(wheel)
    if torch_cuda() == "13.0":
        assert found == CU130  # the whole bundled cu130 row
    assert "archguard: verify: 1 CUDA binary read back" in log
    # no --threads of its own: archguard's choice is on every nvcc compile, once
    chosen = re.search(r"archguard: parallel: .*, nvcc --threads (\d+) \(chosen\)", log)
    assert chosen, log[-5000:]
    compiles = [line for line in log.splitlines() if "bin/nvcc " in line and " -c " in line]
    assert compiles and all(
        f"--threads {chosen[1]}" in line and line.count("--threads") == 1 for line in compiles
    )
    assert cli("verify", str(wheel), env=build_env()).returncode == 0


def test_causal_conv1d_hard_coded_gencode_list_and_threads(tmp_path: Path) -> None:
    src = fetch("causal_conv1d", tmp_path)
    env = farm_env(ARCHGUARD_ARCH_LIST="8.0", CAUSAL_CONV1D_FORCE_BUILD="TRUE")
    proc = pip_wheel(src, tmp_path / "out", env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    wheel = only_wheel(tmp_path / "out")
    assert wheel_so_targets(wheel, tmp_path) == ["sm_80", "compute_80"]
    # each hard-coded target outside the list is named as dropped, with its reason
    for dropped in ("sm_75", "sm_87", "sm_90", "sm_100", "sm_120", "sm_103", "sm_110", "sm_121"):
        assert (
            f"dropped the hard-coded nvcc flag '-gencode arch={dropped.replace('sm_', 'compute_')},"
            f"code={dropped}'"
        ) in log, dropped
    assert "'-gencode arch=compute_80,code=sm_80' is within the effective list" in log
    # the package's own --threads 4 wins over archguard's choice
    assert (
        "nvcc --threads 4 (set by extension causal_conv1d_cuda's nvcc flags ('--threads 4'))" in log
    )
    assert "archguard: verify: 1 CUDA binary read back" in log
