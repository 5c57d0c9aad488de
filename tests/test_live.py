"""The installed torch and nvcc, read live, against the bundled facts and through `explain`."""

from __future__ import annotations

import subprocess
import sys

from packaging.version import Version

from archguard.core.torchbuild import bundled_builds, bundled_torch
from archguard.detect.torch import detect_torch
from realtools import REPO, build_env, needs_cuda_torch, needs_nvcc

pytestmark = [needs_cuda_torch]


def test_installed_torch_agrees_with_its_bundled_row() -> None:
    live = detect_torch()
    assert live.version is not None and live.cuda is not None
    minor = f"{live.version.major}.{live.version.minor}"
    index = f"cu{live.cuda[0]}{live.cuda[1]}"
    assert live.platform == "x86_64"  # this machine's: the installed torch is for it
    if (index, minor, live.platform) not in {
        (b.tag, b.torch, b.platform) for b in bundled_builds()
    }:
        raise AssertionError(
            f"add {index}/torch {minor} to defaults/torch_builds.yml "
            "(python scripts/probe_torch.py prints the row)"
        )
    assert bundled_torch(live.cuda, Version(minor), live.platform).targets == live.targets


def test_probe_script_prints_the_row() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "probe_torch.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "  - tag: cu" in proc.stdout and "torch.cuda.get_arch_list()" in proc.stdout
    assert "    platform: x86_64\n" in proc.stdout


@needs_nvcc
def test_explain_with_no_hypothetical_flags_reads_the_machine_and_the_package() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "archguard", "explain", "--project", str(REPO / "example_package")],
        capture_output=True,
        text=True,
        env=build_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    inputs = " ".join(proc.stdout.split("Decisions")[0].split())  # unwrap the columns
    assert "installed torch (torch.cuda.get_arch_list() of torch" in inputs
    assert "/bin/nvcc (found via CUDA_HOME" in inputs
    assert "example_package/pyproject.toml [tool.archguard]" in inputs
