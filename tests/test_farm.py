"""Farm mode (issue #8): archguard on packages the farm does not own, on any build system,
checked after the build. Real nvcc 13.0, real torch 2.13.0+cu130, real cuobjdump, real CMake.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from realtools import (
    CU130,
    CUDA_HOME,
    MINI,
    REPO,
    build_env,
    cli,
    copy_tree,
    extension,
    farm_env,
    needs_cu130,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    not_fetched,
    only_wheel,
    pip_wheel,
    pyproject,
    recorded_targets,
    setup_py,
    torch_version,
    wheel_record,
    wheel_so_targets,
)

pytestmark = [pytest.mark.slow, needs_nvcc, needs_cuda_torch, needs_cuobjdump]

# An upstream package that has never heard of archguard.
SETUP = setup_py("upstream", [extension("_upstream", ["mod.c", "kernel.cu"], ["-O2"])])
PYPROJECT = pyproject()


def upstream(tmp: Path) -> Path:
    root = tmp / "upstream"
    root.mkdir(parents=True)
    for name in ("kernel.cu", "mod.c"):
        shutil.copy(MINI / name, root / name)
    (root / "setup.py").write_text(SETUP)
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root


def log_of(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


@needs_cu130
def test_enable_builds_an_unmodified_package_with_exactly_the_effective_list(
    tmp_path: Path,
) -> None:
    root = upstream(tmp_path)
    proc = pip_wheel(root, tmp_path / "out", env=farm_env())
    log = log_of(proc)
    assert proc.returncode == 0, log[-4000:]
    assert f"archguard: enabled by ARCHGUARD_ENABLE=1 for {root}" in log
    wheel = only_wheel(tmp_path / "out")
    found = wheel_so_targets(wheel, tmp_path)
    assert found == recorded_targets(wheel)
    assert found == CU130
    assert wheel_record(wheel)["build"]["activation"] == "environment"  # type: ignore[index]
    assert "archguard: verify: 1 CUDA binary read back" in log


@pytest.mark.parametrize("value", ["maybe", "2"])
def test_a_bad_enable_value_is_one_invalid_config_error(tmp_path: Path, value: str) -> None:
    root = upstream(tmp_path)
    proc = pip_wheel(root, tmp_path / "out", env=farm_env(ARCHGUARD_ENABLE=value))
    log = log_of(proc)
    assert proc.returncode != 0
    assert f"archguard error [invalid-config]: ARCHGUARD_ENABLE={value!r} is neither on" in log
    assert "Traceback" not in log


def test_disable_still_wins_and_is_announced(tmp_path: Path) -> None:
    root = upstream(tmp_path)
    proc = pip_wheel(root, tmp_path / "out", env=farm_env(ARCHGUARD_DISABLE="1"))
    log = log_of(proc)
    assert "archguard: disabled by ARCHGUARD_DISABLE=1" in log
    assert proc.returncode != 0 and "IndexError" in log  # plain torch, no GPU: pytorch#137261


@needs_cu130
def test_archguard_config_keeps_the_packages_floors_and_names_both_tables(
    tmp_path: Path,
) -> None:
    root = upstream(tmp_path)
    (root / "pyproject.toml").write_text(PYPROJECT + '[tool.archguard]\narch_list = "7.5"\n')
    farm = tmp_path / "farm" / "packages"
    farm.mkdir(parents=True)
    (farm.parent / "policy.yml").write_text(
        "schema: 1\nrows:\n  cu130: {arch_list: '8.0;9.0+PTX', reason: the farm's}\n"
    )
    config = farm / "upstream.toml"
    config.write_text(
        '[tool.archguard]\narch_list_by_cuda = { cu130 = "8.6;10.0" }\npolicy = "../policy.yml"\n'
    )
    proc = pip_wheel(root, tmp_path / "out", env=farm_env(ARCHGUARD_CONFIG=str(config)))
    log = log_of(proc)
    assert proc.returncode == 0, log[-4000:]
    assert (
        f"archguard: package: {config} [tool.archguard] (from ARCHGUARD_CONFIG), in place of "
        f"the package's own ({root / 'pyproject.toml'} [tool.archguard])"
    ) in log
    assert f"archguard: policy: {farm.parent / 'policy.yml'} (from {config}" in log
    wheel = only_wheel(tmp_path / "out")
    record = wheel_record(wheel)
    # 9.x lies between: role (ii) puts a PTX net on 8.6
    assert wheel_so_targets(wheel, tmp_path) == ["sm_86", "sm_100", "compute_86", "compute_100"]
    assert record["request"]["origin"] == (  # type: ignore[index]
        f"{config} [tool.archguard] (from ARCHGUARD_CONFIG) arch_list_by_cuda.cu130"
    )
    inputs = record["build"]["inputs"]  # type: ignore[index]
    assert str(config) in inputs["package"] and "policy.yml" in inputs["policy"]


def test_a_typo_in_archguard_config_stops_the_build_naming_the_file(tmp_path: Path) -> None:
    root = upstream(tmp_path)
    config = tmp_path / "upstream.toml"
    config.write_text('[tool.archguard]\narch_lst = "8.0"\n')
    proc = pip_wheel(root, tmp_path / "out", env=farm_env(ARCHGUARD_CONFIG=str(config)))
    log = log_of(proc)
    assert proc.returncode != 0
    (line,) = [x for x in log.splitlines() if "archguard error [invalid-config]" in x]
    assert str(config) in line and "Did you mean 'arch_list'?" in log
    assert "Traceback" not in log


def cmake_package(tmp: Path) -> Path:
    return copy_tree(REPO / "tests" / "packages" / "cmakecuda", tmp / "cmakecuda")


@pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake")
def test_a_setup_py_that_drives_cmake_gets_exactly_the_list_through_cudaarchs(
    tmp_path: Path,
) -> None:
    root = cmake_package(tmp_path)
    proc = pip_wheel(root, tmp_path / "out", env=farm_env(ARCHGUARD_ARCH_LIST="8.0;9.0;12.0"))
    log = log_of(proc)
    assert proc.returncode == 0, log[-4000:]
    wheel = only_wheel(tmp_path / "out")
    assert wheel_so_targets(wheel, tmp_path) == [
        "sm_80",
        "sm_90",
        "sm_120",
        "compute_90",
        "compute_120",
    ]
    assert "archguard: verify: 1 CUDA binary read back" in log
    (ext,) = wheel_record(wheel)["build"]["extensions"]  # type: ignore[index]
    assert ext["nvcc_line_seen"] is False
    assert wheel_record(wheel)["build"]["cudaarchs"] == "80-real;90;120"  # type: ignore[index]


@pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake")
def test_a_cmake_file_that_hard_codes_its_arches_is_stopped_by_the_in_build_check(
    tmp_path: Path,
) -> None:
    root = cmake_package(tmp_path)
    text = (root / "CMakeLists.txt").read_text()
    (root / "CMakeLists.txt").write_text(
        text.replace("add_library(", 'set(CMAKE_CUDA_ARCHITECTURES "86-real")\nadd_library(')
    )
    proc = pip_wheel(root, tmp_path / "out", env=farm_env(ARCHGUARD_ARCH_LIST="8.0;9.0;12.0"))
    log = log_of(proc)
    assert proc.returncode != 0
    assert "archguard error [verify-failed]" in log
    assert "missing sm_80 sm_90 sm_120 compute_90 compute_120, unexpected sm_86" in log
    assert "leaves dead 8.0, 9.0, 10.0, 10.3, 10.7, 11.0, 12.0, 12.1" in log
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))
    warn = pip_wheel(
        root,
        tmp_path / "warn",
        env=farm_env(ARCHGUARD_ARCH_LIST="8.0;9.0;12.0", ARCHGUARD_VERIFY="warn"),
    )
    assert warn.returncode == 0, log_of(warn)[-3000:]
    assert "verify = 'warn'" in log_of(warn)


@pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake")
def test_scikit_build_core_gets_the_list_from_archguard_env_and_is_verified_after(
    tmp_path: Path,
) -> None:
    pytest.importorskip("scikit_build_core")
    root = copy_tree(REPO / "tests" / "packages" / "skbuild", tmp_path / "skbuild")
    out = tmp_path / "out"
    script = (
        f'eval "$("{sys.executable}" -m archguard env --project "{root}")"\n'
        f'"{sys.executable}" -m pip wheel --no-build-isolation --no-deps "{root}" -w "{out}"\n'
        f'"{sys.executable}" -m archguard verify "{out}"/*.whl --project "{root}"\n'
    )
    env = build_env(ARCHGUARD_ARCH_LIST="8.0;9.0;10.0")
    env["PATH"] = f"{CUDA_HOME}/bin{os.pathsep}{env['PATH']}"
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, log_of(proc)[-4000:]
    assert "OK         exactly the expected cubins and PTX" in proc.stdout
    assert wheel_so_targets(only_wheel(out), tmp_path) == [
        "sm_80",
        "sm_90",
        "sm_100",
        "compute_100",
    ]


def readme_farm_recipe(index: int) -> str:
    """The farm recipes as the docs give them: 0, the README's one command (``archguard
    wheel``, under "In a farm"); 1, docs/farm.md's plain pip block."""
    readme = (REPO / "README.md").read_text().split("\n## In a farm\n", 1)[1]
    farm = (REPO / "docs" / "farm.md").read_text().split("The same with plain pip", 1)[1]
    blocks = [re.findall(r"```bash\n(.*?)```", text, re.S) for text in (readme, farm)]
    assert all(blocks), "the farm recipes of the README and docs/farm.md"
    return blocks[index][0]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("index", "says"),
    [
        (0, re.compile(r"^ok  upstream-.*\.whl  sm_80 sm_86 sm_90 compute_90$", re.M)),
        (1, re.compile(r"^result: OK \(1 CUDA binary checked, 0 with differences\)$", re.M)),
    ],
    ids=["archguard-wheel", "pip-wheel"],
)
@needs_cu130
def test_the_readme_farm_recipes_run_exactly_as_written(
    tmp_path: Path, index: int, says: re.Pattern[str]
) -> None:
    """Per-package config, policy, pinned torch, verify: each of the farm recipes (the
    README's `archguard wheel` front-end, and docs/farm.md's plain `pip wheel`), run by bash
    in a farm cell whose environment already holds the pinned torch and archguard (so its
    install line installs nothing: the package index is switched off)."""
    farm = tmp_path / "farm"
    (farm / "packages").mkdir(parents=True)
    shutil.copy(REPO / "defaults" / "arch_policy.yml", farm / "arch_policy.yml")
    (farm / "packages" / "upstream.toml").write_text(
        '[tool.archguard]\narch_list_by_cuda = { cu130 = "8.0;8.6;9.0+PTX" }\n'
    )
    source = upstream(tmp_path / "src")
    version = torch_version()
    env = build_env(
        FARM=str(farm), PKG="upstream", PKG_SOURCE=str(source), TORCH=version, PIP_NO_INDEX="1"
    )
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", readme_farm_recipe(index)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    log = log_of(proc)
    assert proc.returncode == 0, log[-4000:]
    assert says.search(proc.stdout), proc.stdout
    wheel = only_wheel(tmp_path / "wheelhouse")
    assert wheel_so_targets(wheel, tmp_path) == ["sm_80", "sm_86", "sm_90", "compute_90"]


def _uv() -> str | None:
    here = Path(sys.executable).parent / "uv"
    return str(here) if here.is_file() else shutil.which("uv")


@pytest.mark.network
@pytest.mark.skipif(_uv() is None, reason="no uv (pip install uv)")
@needs_cu130
def test_uv_extra_build_dependencies_bring_archguard_into_an_isolated_build(
    archguard_built: Path, tmp_path: Path
) -> None:
    """uv's extra-build-dependencies, from a uv.toml the farm passes with --config-file: an
    isolated build of a package that never names archguard, with archguard and the pinned
    torch added to its build environment. Everything comes from a local wheel directory
    (pip's cache fills it; uv's index is switched off), so the test needs no network when
    pip's cache already holds torch."""
    if os.environ.get("AG_TEST_SKIP_ISOLATED") == "1":
        pytest.skip("AG_TEST_SKIP_ISOLATED=1 (the isolated build installs torch again)")
    version = torch_version()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    # the session's one build of torch-archguard (conftest's archguard_built), copied: pip
    # download adds torch and the rest to this directory
    ours = Path(shutil.copy2(archguard_built, wheels))
    download = subprocess.run(  # torch, archguard's own requirements, setuptools
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--isolated",
            "-q",
            f"torch=={version}",
            str(ours),
            "setuptools>=64",
            "-d",
            str(wheels),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if download.returncode != 0:
        not_fetched("setuptools and torch's wheels for a wheel directory", download.stderr)
    root = upstream(tmp_path / "src")
    (root / "pyproject.toml").write_text(
        PYPROJECT + '[project]\nname = "upstream"\nversion = "1.0"\n'
    )
    config = tmp_path / "farm-uv.toml"
    config.write_text(
        f'find-links = ["{wheels}"]\nno-index = true\n'
        "[extra-build-dependencies]\n"
        f'upstream = ["torch-archguard @ {ours.as_uri()}", "torch=={version}"]\n'
    )
    # uv passes its environment to the build backend: the farm's switch reaches the hook.
    env = build_env(ARCHGUARD_ENABLE="1", UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    uv = _uv()
    assert uv is not None
    proc = subprocess.run(
        [
            uv,
            "build",
            "--wheel",
            "--config-file",
            str(config),
            "-o",
            str(tmp_path / "out"),
            str(root),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    log = log_of(proc)
    assert proc.returncode == 0, log[-4000:]
    assert f"archguard: enabled by ARCHGUARD_ENABLE=1 for {root}" in log
    wheel = only_wheel(tmp_path / "out")
    found = wheel_so_targets(wheel, tmp_path)
    assert found == recorded_targets(wheel)
    assert found == CU130


FALLBACK = """\
import os

from setuptools import Extension, setup
from torch.utils.cpp_extension import BuildExtension

# As many real setup.py files do: the CUDA extension only when told (no GPU is visible).
sources = ["mod.c", "kernel.cu"] if os.environ.get("FORCE_CUDA", "0") == "1" else ["mod.c"]
setup(
    name="fallback",
    version="1.0",
    ext_modules=[Extension("_minicuda", sources, extra_compile_args={"cxx": [], "nvcc": []})],
    cmdclass={"build_ext": BuildExtension},
)
"""


def mini_package(root: Path, setup_py: str) -> Path:
    """tests/packages/minicuda's kernel and C module under ``setup_py``, at ``root``."""
    root.mkdir()
    for name in ("kernel.cu", "mod.c"):
        shutil.copy(MINI / name, root / name)
    (root / "setup.py").write_text(setup_py)
    (root / "pyproject.toml").write_text(pyproject())
    return root


def test_a_pure_python_release_is_refused_as_such_not_as_a_cpu_fallback(tmp_path: Path) -> None:
    """A release with no extension at all (simple-knn 2.0.1 on the index is a pure-Python
    kNN, not the CUDA package of that name): refused, saying it holds no compiled extension,
    never guessing a CPU fallback chosen for want of a GPU."""
    root = copy_tree(REPO / "tests" / "packages" / "purepy", tmp_path / "purepy")
    proc = cli("wheel", str(root), "-w", str(tmp_path / "out"), env=build_env())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "holds no CUDA device code and no compiled extension at all" in proc.stdout
    assert "CPU fallback" not in proc.stdout


def test_archguard_wheel_fails_a_cpu_fallback_and_names_the_switch(tmp_path: Path) -> None:
    """`archguard wheel`: a wheel with no CUDA device code is a failure, naming the variable
    the package's setup.py reads; with it set, the same source builds and verifies."""
    root = mini_package(tmp_path / "fallback", FALLBACK)
    env = build_env(ARCHGUARD_ARCH_LIST="8.0")
    cpu = cli("wheel", str(root), "-w", str(tmp_path / "cpu"), env=env)
    assert cpu.returncode == 1, cpu.stdout + cpu.stderr
    assert "holds no CUDA device code" in cpu.stdout
    assert "Its setup.py reads FORCE_CUDA" in cpu.stdout
    # the refused wheel left the wheelhouse: DIR/*.whl is always publishable
    assert not list((tmp_path / "cpu").glob("*.whl"))
    (refused,) = (tmp_path / "cpu" / "refused").glob("fallback-1.0-*.whl")
    note = refused.with_name(refused.name + ".why.txt").read_text()
    assert "holds no CUDA device code" in note
    assert f"REFUSED  {refused.name}  no CUDA code" in cpu.stdout
    cuda = cli(
        "wheel",
        str(root),
        "-w",
        str(tmp_path / "cuda"),
        env={**env, "FORCE_CUDA": "1", "ARCHGUARD_WHEEL_VARIANT": "1"},
    )
    assert cuda.returncode == 0, cuda.stdout + cuda.stderr[-3000:]
    # it never calls torch: labelled for its CUDA only, no torch pin
    assert re.search(r"^ok  fallback-1\.0\+cu130-.*\.whl  sm_80 compute_80$", cuda.stdout, re.M)
    # ARCHGUARD_WHEEL_VARIANT: a wheel-variant copy of the verified wheel beside it
    (variant,) = (tmp_path / "cuda" / "variants").glob("fallback-1.0+cu130-*.whl")
    assert f"  variant: {variant}" in cuda.stdout
    bad = cli("wheel", str(tmp_path / "nowhere"), env=env)
    assert bad.returncode == 2 and "is neither a source tree, an sdist file nor a URL" in bad.stderr


NO_GPU = """\
import os

import torch
from setuptools import Extension, setup
from torch.utils.cpp_extension import BuildExtension

# As some real setup.py files do: refuse to build without a GPU unless told.
if not torch.cuda.is_available() and os.environ.get("FORCE_CUDA", "0") != "1":
    raise RuntimeError("CUDA is not available: build on a machine with a GPU or set FORCE_CUDA")
setup(
    name="nogpu",
    version="1.0",
    ext_modules=[Extension("_minicuda", ["mod.c", "kernel.cu"], extra_compile_args={"nvcc": []})],
    cmdclass={"build_ext": BuildExtension},
)
"""
MISSING = FALLBACK.replace('"kernel.cu"]', '"csrc/kernel.cu"]').replace("fallback", "missing")
CPU_FALLBACK = FALLBACK.replace('["mod.c"]', '["mod.c", "cpu.cpp"]').replace("fallback", "cpuonly")


@pytest.mark.parametrize(
    ("setup_py", "env", "cause"),
    [
        (NO_GPU, {}, "the package's setup.py stopped because no GPU is visible"),
        (MISSING, {"FORCE_CUDA": "1"}, "the source does not hold csrc/kernel.cu"),
        (CPU_FALLBACK, {}, "the package built its CPU fallback (no CUDA compile ran"),
    ],
    ids=["no-gpu-at-import", "sdist-without-its-sources", "cpu-fallback-fails"],
)
def test_setup_time_failures_name_their_cause_and_the_switch(
    tmp_path: Path, setup_py: str, env: dict[str, str], cause: str
) -> None:
    """`archguard wheel`'s last line says why the build stopped, names the package's own
    switch read from its setup.py and where a farm sets it."""
    root = mini_package(tmp_path / "pkg", setup_py)
    (root / "cpu.cpp").write_text("int broken( {\n")  # the CPU path does not compile
    proc = cli("wheel", str(root), "-w", str(tmp_path / "out"), env=build_env(**env))
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert cause in last, last
    if not env:  # the switch is named with where to set it
        assert "FORCE_CUDA=1, in the farm manifest's env table for this package" in last, last
    assert "the log is above" not in last


# warp_rnnt 0.7.0's setup.py (MIT, released sdist, lines 21-22), its own words: no switch
WARP_RNNT = NO_GPU.replace(
    'if not torch.cuda.is_available() and os.environ.get("FORCE_CUDA", "0") != "1":\n'
    '    raise RuntimeError("CUDA is not available: build on a machine with a GPU or set '
    'FORCE_CUDA")',
    'if not torch.cuda.is_available():\n    raise Exception("CPU version is not implemented")',
)


def test_a_setup_py_that_refuses_in_its_own_words_is_named_with_its_line(tmp_path: Path) -> None:
    """A setup.py that asks torch for the GPU and raises its own message (nothing a log
    pattern knows) is named by the line that asks, and, reading no switch, the fix."""
    assert "CPU version is not implemented" in WARP_RNNT and "FORCE_CUDA" not in WARP_RNNT
    root = mini_package(tmp_path / "pkg", WARP_RNNT)
    proc = cli("wheel", str(root), "-w", str(tmp_path / "out"), env=build_env())
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert "the package's setup.py stopped because no GPU is visible" in last, last
    assert "while pip prepares the build, at setup.py:8; a farm has none" in last, last
    assert "it reads no switch that forces the CUDA build" in last, last


# A released sdist whose version comes from setuptools_scm (its PKG-INFO holds the release),
# built where setuptools_scm is absent: setuptools ignores use_scm_version and says 0.0.0.
SCM_SETUP = """\
from setuptools import Extension, setup
from torch.utils.cpp_extension import BuildExtension

setup(
    name="scmpkg",
    use_scm_version=True,
    setup_requires=["setuptools_scm"],
    ext_modules=[Extension("_minicuda", ["mod.c", "kernel.cu"], extra_compile_args={"nvcc": []})],
    cmdclass={"build_ext": BuildExtension},
)
"""


def _sdist(root: Path, version: str, tmp: Path) -> Path:
    """``root`` as a released sdist: its PKG-INFO holds the release."""
    import tarfile

    (root / "PKG-INFO").write_text(
        f"Metadata-Version: 2.1\nName: {root.name.split('-')[0]}\nVersion: {version}\n"
    )
    sdist = tmp / f"{root.name}.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        tf.add(root, arcname=root.name)
    return sdist


def test_a_packages_declared_build_requirements_are_installed_beside_the_cell(
    tmp_path: Path,
) -> None:
    """setuptools_scm, named by the sdist's setup_requires and [build-system].requires and
    absent from the environment, is installed for the build (an overlay on PYTHONPATH, the
    cell untouched): the wheel has the release's version. A requirement that would change
    the cell's torch is refused with its name, before anything builds."""
    import importlib.util

    assert importlib.util.find_spec("setuptools_scm") is None, "the test needs it absent"
    root = mini_package(tmp_path / "scmpkg-1.2.3", SCM_SETUP)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "setuptools_scm>=8", "torch"]\n'
        'build-backend = "setuptools.build_meta"\n'
    )
    sdist = _sdist(root, "1.2.3", tmp_path)
    out = tmp_path / "out"
    env = build_env(ARCHGUARD_ARCH_LIST="8.0")
    proc = cli("wheel", str(sdist), "-w", str(out), "--format", "json", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    assert wheel.name.startswith("scmpkg-1.2.3+cu130-"), wheel.name
    said = json.loads(proc.stdout)["builds"][0]["build_requirements"]
    assert "setuptools_scm>=8" in said["declared"]
    assert any(p.startswith("setuptools-scm==") for p in said["installed"]), said
    assert "installed for its build (its declared requirements the cell lacks" in proc.stderr
    assert importlib.util.find_spec("setuptools_scm") is None  # the cell is unchanged
    # torch<2.10 for the build (as grouped_gemm 0.3.0 pins torch<2.8): the cell's torch is
    # kept, never replaced or shadowed, and said; the package builds against it
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "setuptools_scm>=8", "torch<2.10"]\n'
        'build-backend = "setuptools.build_meta"\n'
    )
    pinned = cli("wheel", str(root), "-w", str(tmp_path / "old"), "--format", "json", env=env)
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr[-2000:]
    notes = json.loads(pinned.stdout)["builds"][0]["build_requirements"]["notes"]
    assert any(
        n.startswith("the package's build asks for 'torch<2.10'; the cell's torch ") for n in notes
    ), notes


# A setup.py that takes its version from setuptools_scm when it can, and says 0.0.0 when it
# cannot, declaring nothing (as some released setup.py files do)
UNDECLARED = SCM_SETUP.replace(
    '    use_scm_version=True,\n    setup_requires=["setuptools_scm"],\n',
    "    version=VERSION,\n",
).replace(
    "setup(\n",
    "try:\n    from setuptools_scm import get_version\n\n    VERSION = get_version()\n"
    'except ImportError:\n    VERSION = "0.0.0"\n\nsetup(\n',
    1,
)


def test_a_wheel_that_is_not_the_sources_release_is_refused(tmp_path: Path) -> None:
    """The version a build gives is compared with the sdist's PKG-INFO: a version plugin
    missing from the build environment (an undeclared one: 0.0.0) fails the build, naming
    both versions and the plugin; the wheel leaves the wheelhouse. A bad label template
    fails before pip."""
    import importlib.util

    assert importlib.util.find_spec("setuptools_scm") is None, "the test needs it absent"
    assert "VERSION = get_version()" in UNDECLARED and "setup_requires" not in UNDECLARED
    sdist = _sdist(mini_package(tmp_path / "scmpkg-1.2.3", UNDECLARED), "1.2.3", tmp_path)
    out = tmp_path / "out"
    env = build_env(ARCHGUARD_ARCH_LIST="8.0")
    bad = cli("wheel", str(sdist), "-w", str(out), "--local-version", "{cuda}+{torh}", env=env)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "--local-version = '{cuda}+{torh}' is not a label template (KeyError" in bad.stderr
    assert "pip" not in bad.stderr.split("archguard wheel:", 1)[0]  # nothing was built
    proc = cli("wheel", str(sdist), "-w", str(out), env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    said = (
        "scmpkg-0.0.0-cp311-cp311-linux_x86_64.whl is not the source's release: it is scmpkg "
        "0.0.0, the source's PKG-INFO says scmpkg 1.2.3. Likely cause: its build names "
        "setuptools_scm"
    ).replace("cp311", f"cp{sys.version_info.major}{sys.version_info.minor}")
    assert said in proc.stdout, proc.stdout
    assert not list(out.glob("*.whl")) and len(list((out / "refused").glob("*.whl"))) == 1


# A setup.py that refuses without a GPU in its own words, naming its own variable (as some
# released ones do for builds without a GPU), and builds when that variable is set.
OWN_WORDS = NO_GPU.replace(
    'if not torch.cuda.is_available() and os.environ.get("FORCE_CUDA", "0") != "1":\n'
    '    raise RuntimeError("CUDA is not available: build on a machine with a GPU or set '
    'FORCE_CUDA")',
    'if not torch.cuda.is_available() and "NOGPU_CUDA_ARCHS" not in os.environ:\n'
    "    raise RuntimeError(\n"
    '        "No GPU found. To build without one, set NOGPU_CUDA_ARCHS to the "\n'
    "        \"architectures to build for, e.g. NOGPU_CUDA_ARCHS='8.0;9.0'\"\n"
    "    )",
)


def test_a_package_that_raises_its_own_instructions_is_quoted_with_its_variable(
    tmp_path: Path,
) -> None:
    """The package's own exception, quoted with its file and line, and the variable its
    message names with where a farm sets it; set, the same source builds with archguard."""
    assert "NOGPU_CUDA_ARCHS" in OWN_WORDS and "FORCE_CUDA" not in OWN_WORDS
    root = mini_package(tmp_path / "pkg", OWN_WORDS)
    env = build_env(ARCHGUARD_ARCH_LIST="8.0")
    proc = cli("wheel", str(root), "-w", str(tmp_path / "out"), env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    line = OWN_WORDS.splitlines().index("    raise RuntimeError(") + 1
    assert f'it raised, at setup.py:{line}: "RuntimeError: No GPU found. To build' in last, last
    assert "e.g. NOGPU_CUDA_ARCHS='8.0;9.0'\"" in last, last
    assert "its message names NOGPU_CUDA_ARCHS: set it as it says, in the farm manifest's" in last
    built = cli(
        "wheel", str(root), "-w", str(tmp_path / "out"), env={**env, "NOGPU_CUDA_ARCHS": "8.0"}
    )
    assert built.returncode == 0, built.stdout + built.stderr[-3000:]
