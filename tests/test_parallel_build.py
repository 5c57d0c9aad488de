"""Parallelism per extension, in the build mode it really runs in (issue #24), with real
nvcc 13.0 and torch's BuildExtension: a ``use_ninja=False`` package compiles one source at a
time, so nvcc gets the cores as ``--threads``; a package with two extensions gets one decision
each. Tiny kernels without torch headers (seconds per arch); the command lines come from
pip's verbose log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from realtools import (
    EXAMPLE_80,
    REPO,
    Built,
    build_env,
    cli,
    copy_tree,
    extension,
    module_c,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    only_wheel,
    pip_wheel,
    pyproject,
    setup_py,
)

pytestmark = [pytest.mark.slow, needs_nvcc, needs_cuda_torch, needs_cuobjdump]

KERNEL = """\
__global__ void k_{n}(float* x, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += {n}.0f;
}}
void launch_{n}(float* x, int n) {{ k_{n}<<<(n + 127) / 128, 128>>>(x, n); }}
"""


def package(tmp: Path, extensions: dict[str, int], use_ninja: bool) -> Path:
    root = tmp / "par"
    root.mkdir(parents=True)
    exts = []
    n = 0
    for name, files in extensions.items():
        (root / f"{name}.c").write_text(module_c(name))
        sources = [f"{name}.c"]
        for _ in range(files):
            n += 1
            (root / f"k{n}.cu").write_text(KERNEL.format(n=n))
            sources.append(f"k{n}.cu")
        exts.append(extension(name, sources))
    cmd = "BuildExtension" if use_ninja else "BuildExtension.with_options(use_ninja=False)"
    (root / "setup.py").write_text(
        setup_py("par", exts, cmdclass=f'cmdclass={{"build_ext": {cmd}}},')
    )
    (root / "pyproject.toml").write_text(pyproject())
    return root


def nvcc_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "bin/nvcc " in line and " -c " in line]


def test_a_serial_build_gives_nvcc_the_cores(tmp_path: Path) -> None:
    """use_ninja=False, three .cu files of 4 device compiles each, MAX_JOBS=2 set by the
    farm: MAX_JOBS does nothing there, so each nvcc gets --threads 2 (2 cores)."""
    root = package(tmp_path, {"_serial": 3}, use_ninja=False)
    env = build_env(ARCHGUARD_ENABLE="1", ARCHGUARD_ARCH_LIST="7.5;8.0;8.6;9.0")
    explain = cli("explain", "--project", str(root), env=env)
    assert "setuptools compiles one source at a time (use_ninja=False, setup.py:" in explain.stdout
    proc = pip_wheel(root, tmp_path / "out", env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert (
        "archguard: parallel: extension _serial: setuptools compiles one source at a time "
        "(use_ninja=False, or ninja is not installed): nvcc --threads 2 (chosen)"
    ) in log
    compiles = nvcc_lines(log)
    assert len(compiles) == 3 and all("--threads 2" in line for line in compiles), compiles
    only_wheel(tmp_path / "out")


def test_two_extensions_get_a_decision_each(tmp_path: Path) -> None:
    """A 3-file and a 1-file extension under ninja with 2 cores: the 3-file one runs 2 jobs of
    --threads 1; the 1-file one runs alone with --threads 2 (one model of 4 files would have
    given both --threads 1). The static choice, without the jobserver (test_jobserver.py has
    the pool)."""
    root = package(tmp_path, {"_three": 3, "_one": 1}, use_ninja=True)
    env = build_env(
        ARCHGUARD_ENABLE="1", ARCHGUARD_ARCH_LIST="7.5;8.0;8.6;9.0", ARCHGUARD_JOBSERVER="0"
    )
    env.pop("MAX_JOBS")
    proc = pip_wheel(root, tmp_path / "out", env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    three = re.search(
        r"archguard: parallel: extension _three: (\d+) parallel compile jobs? "
        r"\(chosen\), nvcc --threads (\d+) \(chosen\)",
        log,
    )
    one = re.search(
        r"archguard: parallel: extension _one: (\d+) parallel compile jobs? "
        r"\(chosen\), nvcc --threads (\d+) \(chosen\)",
        log,
    )
    assert three and one, log[-4000:]
    assert (three[1], three[2]) == ("2", "1")
    assert one[2] == "2"
    lines = nvcc_lines(log)
    k4 = [line for line in lines if "k4.cu" in line]
    others = [line for line in lines if "k4.cu" not in line]
    assert len(k4) == 1 and "--threads 2" in k4[0]
    assert len(others) == 3 and all("--threads 1" in line for line in others)


def test_explain_and_the_build_agree_on_an_ignored_max_jobs(tmp_path: Path) -> None:
    """MAX_JOBS=0: explain and the build read it the same way (ignored, with a warning) and
    both say the jobs were chosen."""
    root = package(tmp_path, {"_one": 2}, use_ninja=True)
    env = build_env(ARCHGUARD_ENABLE="1", ARCHGUARD_ARCH_LIST="8.0", MAX_JOBS="0")
    explain = cli("explain", "--project", str(root), env=env)
    shown = " ".join(explain.stdout.split())  # explain wraps its paragraphs (a path's length)
    assert "MAX_JOBS='0' is not a positive whole number; archguard ignores it" in shown
    assert re.search(r"Build parallelism here: \d+ parallel compile jobs? \(chosen\)", shown)
    # and both say the jobserver the build runs with (its ninja 1.13, beside this Python)
    assert "With the jobserver (the default; ARCHGUARD_JOBSERVER=0 for none)" in shown
    assert "--threads 1 + the free tokens, at most its device compiles" in shown
    proc = pip_wheel(root, tmp_path / "out", env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert "archguard: warning: MAX_JOBS='0' is not a positive whole number" in log
    assert re.search(
        r"archguard: parallel: extension _one: \d+ parallel compile jobs? \(chosen\)", log
    )
    machine = r"archguard: parallel: jobserver the machine's \((made by this build|joined): "
    assert re.search(machine, log)
    assert "ninja: Jobserver mode detected" in log


_SUMMARY = (
    r"(\d+) parallel compile jobs? \((.+?)\), nvcc --threads (\d+) \(set by (?:extension "
    r"archguard_example\._C|setup\.py:\d+)'s nvcc flags \('--threads 2'\)\)"
)


def test_explain_and_the_build_of_the_example_agree_on_who_decided(
    example_80: Built, tmp_path: Path
) -> None:
    """MAX_JOBS=0 on example_package, whose setup.py gives nvcc `--threads 2`: explain (which
    reads setup.py's flag lists, never runs it) and the build (which reads the extension's
    flags) both ignore MAX_JOBS, give nvcc the package's 2 threads and choose the jobs. The
    build is conftest's example_80 (8.0, farm mode, MAX_JOBS=0, shared with
    tests/test_user_side.py); explain reads a fresh copy with the same settings."""
    assert EXAMPLE_80["MAX_JOBS"] == "0" and EXAMPLE_80["ARCHGUARD_ENABLE"] == "1"
    root = copy_tree(REPO / "example_package", tmp_path / "example_package")
    env = build_env(**EXAMPLE_80)
    explain = cli("explain", "--project", str(root), env=env)
    said = re.search(r"Build parallelism here: " + _SUMMARY, " ".join(explain.stdout.split()))
    assert said, explain.stdout
    proc, _ = example_80
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    did = re.search(r"archguard: parallel: extension archguard_example\._C: " + _SUMMARY, log)
    assert did, log[-4000:]
    assert said.groups() == did.groups()
    assert said[2] == "chosen" and said[3] == "2"  # MAX_JOBS=0 ignored by both
    assert "MAX_JOBS='0' is not a positive whole number" in " ".join(explain.stdout.split())
    assert "archguard: warning: MAX_JOBS='0' is not a positive whole number" in log
