"""archguard in real builds: real nvcc, a real CUDA build of torch, real wheels, real cuobjdump.

The expensive example (a torch binding + kernel) is built once per session; the many edge
cases use ``tests/packages/minicuda`` (a kernel with no torch headers, seconds per build).
Every case checks the binary against what ``archguard list`` prints for the same inputs,
so the wheel holds what ``explain`` says, no more, no less.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from realtools import (
    CU130,
    MINI,
    TORCH_CMDCLASS,
    TORCH_IMPORT,
    Built,
    archguard_list,
    build_env,
    cli,
    copy_tree,
    extension,
    needs_cu130,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    only_wheel,
    pip_wheel,
    pyproject,
    run_in,
    setup_py,
    tool_path,
    torch_cuda,
    torch_version,
    wheel_record,
    wheel_so_targets,
)

pytestmark = [pytest.mark.slow, needs_nvcc, needs_cuda_torch, needs_cuobjdump]

# The expectation for the bundled policy on cu130 (torch 2.13.0+cu130, nvcc 13.0).


def targets_of(listing: dict[str, object]) -> list[str]:
    t = listing["targets"]
    assert isinstance(t, dict)
    return list(t["cubins"]) + list(t["ptx"])


# --- the example package -----------------------------------------------------------------


# example_src / example_noiso (the example built once per session): conftest.py


@pytest.fixture(scope="session")
def archguard_wheelhouse(archguard_built: Path) -> Path:
    """A wheel directory of torch-archguard alone: conftest's archguard_built (the session's
    one build of it) sits alone in its directory."""
    assert list(archguard_built.parent.iterdir()) == [archguard_built]
    return archguard_built.parent


@needs_cu130
def test_example_no_isolation_holds_exactly_the_resolved_list(
    example_noiso: Built, example_src: Path, tmp_path: Path
) -> None:
    proc, out = example_noiso
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    wheel = only_wheel(out)
    found = wheel_so_targets(wheel, tmp_path)
    expected = archguard_list(example_src)
    assert found == targets_of(expected)
    assert found == CU130
    record = wheel_record(wheel)
    assert record["schema"] == "archguard.resolution/2"
    assert record["effective"] == expected["effective"]
    log = proc.stdout + proc.stderr
    assert f"archguard: effective arch list ({expected['cuda']}): {expected['effective']}" in log
    verify = cli("verify", str(wheel), env=build_env())
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "OK         exactly the expected cubins and PTX" in verify.stdout
    # the build checked its binaries itself, and linted the FP8 kernel before compiling
    assert "archguard: verify: 1 CUDA binary read back" in log
    assert "8.9 (L4, L40S, RTX 40-series) loads sm_86, which compiles it out" in log
    # the parallel settings reached nvcc: the log names them (the example's own --threads 2
    # wins), and every nvcc compile carries that one --threads
    chosen = re.search(
        r"archguard: parallel: extension archguard_example._C: 2 parallel compile jobs "
        r"\(set by MAX_JOBS\), "
        r"nvcc --threads (\d+) \(set by extension archguard_example._C's nvcc flags",
        log,
    )
    assert chosen, log[-4000:]
    compiles = [line for line in log.splitlines() if "bin/nvcc " in line and " -c " in line]
    assert compiles and all(
        f"--threads {chosen[1]}" in line and line.count("--threads") == 1 for line in compiles
    )


@needs_cu130
def test_example_fp8_kernel_is_a_stub_for_8_9_without_an_sm_89_cubin(
    example_noiso: Built, tmp_path: Path
) -> None:
    """verify --stubs reads every kernel of every image of the wheel the session built."""
    _, out = example_noiso
    proc = cli("verify", str(only_wheel(out)), "--stubs", "--format", "json", env=build_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (binary,) = json.loads(proc.stdout)["binaries"]
    kernels = {k["kernel"]: k["images"] for k in binary["stubs"]["kernels"]}
    (fp8,) = [name for name in kernels if "fp8_roundtrip_kernel" in name]
    assert kernels[fp8]["sm_86"] == "trap" and kernels[fp8]["sm_90"] == "real"
    assert not [k for k in kernels if "scale_kernel" in k]  # real in every image: not listed
    devices = {f["device"] for f in binary["stubs"]["findings"] if f["kernel"] == fp8}
    assert "8.9" in devices  # an L4 runs the sm_86 trap
    failing = cli("verify", str(only_wheel(out)), "--fail-on-stubs", env=build_env())
    assert failing.returncode == 1 and "STUB RUN" in failing.stdout


@pytest.mark.network
def test_example_isolated_build_from_a_local_wheel_directory(
    example_src: Path, archguard_wheelhouse: Path, tmp_path: Path
) -> None:
    """`pip wheel` with build isolation: torch and torch-archguard come into a fresh env."""
    if os.environ.get("AG_TEST_SKIP_ISOLATED") == "1":
        pytest.skip("AG_TEST_SKIP_ISOLATED=1 (the isolated build downloads torch)")
    src = copy_tree(example_src, tmp_path / "src")
    constraints = tmp_path / "build-constraints.txt"
    constraints.write_text(f"torch=={torch_version()}\n")
    env = build_env(PIP_CONFIG_FILE=os.devnull, PIP_FIND_LINKS=str(archguard_wheelhouse))
    proc = pip_wheel(
        src,
        tmp_path / "out",
        isolated=True,
        env=env,
        extra=("--build-constraint", str(constraints)),
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    wheel = only_wheel(tmp_path / "out")
    assert wheel_so_targets(wheel, tmp_path) == targets_of(archguard_list(src))
    assert "archguard: recorded the resolution" in proc.stdout + proc.stderr


def test_example_package_override_with_family_and_specific_targets(
    example_src: Path, tmp_path: Path
) -> None:
    """The package's own override, with targets torch's TORCH_CUDA_ARCH_LIST cannot spell."""
    src = copy_tree(example_src, tmp_path / "src")
    text = (src / "pyproject.toml").read_text()
    tag = "cu" + torch_cuda().replace(".", "")  # type: ignore[union-attr]
    text = text.replace(
        "arch_list_by_cuda = {", f'arch_list_by_cuda = {{ {tag} = "8.0;8.6;8.9;10.0f;12.0a", ', 1
    )
    (src / "pyproject.toml").write_text(text)
    expected = archguard_list(src)
    assert expected["effective"] == "8.0;8.6;8.9+PTX;10.0f;12.0a+PTX"
    proc = pip_wheel(src, tmp_path / "out")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    wheel = only_wheel(tmp_path / "out")
    found = wheel_so_targets(wheel, tmp_path)
    assert found == ["sm_80", "sm_86", "sm_89", "sm_100f", "sm_120a", "compute_89", "compute_120"]
    assert found == targets_of(expected)
    assert "TORCH_CUDA_ARCH_LIST is unset for this build" in proc.stdout + proc.stderr
    # with 8.9 in the list the lint is silent about the FP8 kernel
    assert "loads sm_86, which compiles it out" not in proc.stdout + proc.stderr
    verify = cli("verify", str(wheel), "--stubs", "--format", "json", env=build_env())
    assert verify.returncode == 0, verify.stdout
    (binary,) = json.loads(verify.stdout)["binaries"]
    kernels = {k["kernel"]: k["images"] for k in binary["stubs"]["kernels"]}
    (fp8,) = [name for name in kernels if "fp8_roundtrip_kernel" in name]
    assert kernels[fp8]["sm_86"] == "trap" and kernels[fp8]["sm_89"] == "real"
    devices = {f["device"] for f in binary["stubs"]["findings"] if f["kernel"] == fp8}
    assert "8.9" not in devices  # 8.9 loads its own sm_89 cubin


def test_example_own_test_imports_the_built_extension(
    example_noiso: Built, example_src: Path, tmp_path: Path
) -> None:
    _, out = example_noiso
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--target",
            str(site),
            str(only_wheel(out)),
        ],
        check=True,
        capture_output=True,
    )
    env = build_env(PYTHONPATH=str(site))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(example_src / "tests"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


# --- small CUDA packages for the edge cases ---------------------------------------------


def one_arch() -> dict[str, str]:
    """One arch, for the cases whose point is not the list (the wrapping, the front doors):
    what the binary holds is still checked against `archguard list` under the same override."""
    return build_env(ARCHGUARD_ARCH_LIST="8.0")


def minicuda(
    tmp: Path,
    *,
    nvcc: list[str] | None = None,
    imports: str = TORCH_IMPORT,
    prelude: str = "",
    cmdclass: str = TORCH_CMDCLASS,
    extra: str = "",
) -> Path:
    root = tmp / "minicuda"
    root.mkdir()
    for name in ("kernel.cu", "mod.c"):
        (root / name).write_text((MINI / name).read_text())
    ext = extension("_minicuda", ["mod.c", "kernel.cu"], nvcc or ["-O2"])
    (root / "setup.py").write_text(
        setup_py("minicuda", [ext], imports=imports, prelude=prelude, cmdclass=cmdclass)
    )
    (root / "pyproject.toml").write_text(pyproject("torch-archguard", extra=extra))
    return root


def build_and_check(
    root: Path, tmp: Path, env: dict[str, str] | None = None
) -> tuple[str, list[str], dict[str, object]]:
    """Build, then assert the binary holds exactly what `archguard list` says."""
    env = env or build_env()
    proc = pip_wheel(root, tmp / "out", env=env)
    return check_built(root, tmp, proc, tmp / "out", env)


def check_built(
    root: Path, tmp: Path, proc: subprocess.CompletedProcess[str], out: Path, env: dict[str, str]
) -> tuple[str, list[str], dict[str, object]]:
    """What build_and_check asserts, of a build already run: it built, and the binary holds
    exactly what `archguard list` says for the same inputs."""
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    found = wheel_so_targets(only_wheel(out), tmp)
    expected = archguard_list(root, env)
    assert found == targets_of(expected)
    return log, found, expected


# minicuda as it is: no override, no preset list, no GPU (the cu130 row), PYTHONHASHSEED=1
DefaultBuild = tuple[Path, subprocess.CompletedProcess[str], Path, dict[str, str]]


@pytest.fixture(scope="module")
def default_minicuda(tmp_path_factory: pytest.TempPathFactory) -> DefaultBuild:
    """minicuda as it is, built once for this module: the archguard build that
    test_no_gpu_and_no_arch_list_plain_torch_crashes_archguard_builds checks, and the first
    of test_json_record_is_deterministic_across_builds' two (each built its own before).
    Its source tree, its pip wheel run, its wheel directory, its environment."""
    tmp = tmp_path_factory.mktemp("minicuda-default")
    root = minicuda(tmp)
    env = build_env(PYTHONHASHSEED="1")
    return root, pip_wheel(root, tmp / "out", env=env), tmp / "out", env


@needs_cu130
def test_arch_text_in_an_include_path_does_not_fool_it(tmp_path: Path) -> None:
    """Torch adds no arch flags once any nvcc flag contains 'arch'; archguard still does."""
    root = minicuda(tmp_path, nvcc=["-O2", f"-I{tmp_path}/research/monarch/include"])
    log, found, _ = build_and_check(root, tmp_path)
    assert found == CU130
    assert "monarch/include" in log  # the flag itself passed through


def test_the_in_build_lint_reads_the_extensions_forced_include_and_include_dirs(
    tmp_path: Path,
) -> None:
    """nvcc's `-include cfg/forced.h` defines MINI_FAST; `-Iinc` is where `<mini_scale.h>`
    (found nowhere else) guards its fast path on `MINI_FAST && __CUDA_ARCH__ >= 890`. The
    lint of the build sees both: 8.9 loads sm_80, whose compile takes the #else where 8.9's
    own takes the #if. Without the forced include the guard would be undecided; without
    the -I the header would not be read at all."""
    where = tmp_path / "minicuda"  # minicuda() writes the package there
    nvcc = ["-O2", "-include", str(where / "cfg" / "forced.h"), f"-I{where / 'inc'}"]
    root = minicuda(tmp_path, nvcc=nvcc)
    (root / "cfg").mkdir()
    (root / "cfg" / "forced.h").write_text("#define MINI_FAST 1\n")
    (root / "inc").mkdir()
    (root / "inc" / "mini_scale.h").write_text(
        "__device__ inline float mini_scale(float v) {\n"
        "#if MINI_FAST && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890\n"
        "  return v * 2.0f;\n#else\n  return v;\n#endif\n}\n"
    )
    kernel = (root / "kernel.cu").read_text()
    (root / "kernel.cu").write_text(
        "#include <mini_scale.h>\n" + kernel.replace("+= 1.0f", "+= mini_scale(1.0f)")
    )
    env = build_env(ARCHGUARD_ARCH_LIST="8.0;9.0")
    log, found, _ = build_and_check(root, tmp_path, env)
    assert found == ["sm_80", "sm_90", "compute_90"]
    lint = [line for line in log.splitlines() if "lint: extension _minicuda" in line]
    assert any(re.search(r"_minicuda: 3 files read \(\d+\.\d s\)$", line) for line in lint), lint
    assert any("mini_scale.h:2" in line for line in lint), lint
    assert any("8.9" in line and "sm_80" in line for line in lint), lint
    assert not any("undecided" in line or "not understood" in line for line in lint), lint


def test_hard_coded_gencode_flags_go_through_the_clamp(tmp_path: Path) -> None:
    root = minicuda(
        tmp_path,
        nvcc=[
            "-gencode=arch=compute_89,code=sm_89",
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-O2",
        ],
    )
    proc = pip_wheel(root, tmp_path / "out")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    found = wheel_so_targets(only_wheel(tmp_path / "out"), tmp_path)
    # the effective list from the extension's floor (its lowest hard-coded target, sm_80) up
    listed = targets_of(archguard_list(root))
    assert found == [t for t in listed if t.split("_")[1] >= "80" or len(t.split("_")[1]) > 2]
    assert "sm_75" in listed and "sm_75" not in found and "sm_89" not in found
    assert "archguard: extension _minicuda: floor: nothing below its floor sm_80" in log
    assert "dropped the hard-coded nvcc flag '-gencode=arch=compute_89,code=sm_89'" in log
    assert "'-gencode arch=compute_80,code=sm_80' is within the effective list" in log


def test_unclampable_hard_coded_flag_stops_the_build(tmp_path: Path) -> None:
    root = minicuda(tmp_path, nvcc=["-arch=native"])
    proc = pip_wheel(root, tmp_path / "out")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "archguard error [unsupported-arch-flag]" in log and "'native'" in log
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))


def test_tool_setuptools_cmdclass_is_wrapped(tmp_path: Path) -> None:
    root = minicuda(
        tmp_path,
        imports="",
        cmdclass="",
        extra='[project]\nname = "minicuda"\nversion = "1.0"\n'
        "[tool.setuptools]\npy-modules = []\n"
        "[tool.setuptools.cmdclass]\n"
        'build_ext = "torch.utils.cpp_extension.BuildExtension"\n',
    )
    log, _, _ = build_and_check(root, tmp_path, one_arch())
    assert log.count("archguard: extension _minicuda: nvcc gets") == 1


def test_with_options_and_subclass_are_wrapped_once(tmp_path: Path) -> None:
    prelude = (
        "class MyBuild(BuildExtension.with_options(use_ninja=False)):\n"
        "    def run(self):\n"
        "        print('MyBuild.run')\n"
        "        super().run()\n"
    )
    root = minicuda(tmp_path, prelude=prelude, cmdclass='cmdclass={"build_ext": MyBuild},')
    log, _, _ = build_and_check(root, tmp_path, one_arch())
    assert "MyBuild.run" in log
    assert log.count("archguard: extension _minicuda: nvcc gets") == 1


def test_drop_in_wrapper_with_the_hook_active_is_not_applied_twice(tmp_path: Path) -> None:
    root = minicuda(tmp_path, imports="from archguard.cpp_extension import BuildExtension")
    log, _, _ = build_and_check(root, tmp_path, one_arch())
    assert log.count("archguard: extension _minicuda: nvcc gets") == 1


def test_no_gpu_and_no_arch_list_plain_torch_crashes_archguard_builds(
    default_minicuda: DefaultBuild, tmp_path: Path
) -> None:
    root = minicuda(tmp_path)
    plain = pip_wheel(root, tmp_path / "plain", env=build_env(ARCHGUARD_DISABLE="1"))
    log = plain.stdout + plain.stderr
    assert "archguard: disabled by ARCHGUARD_DISABLE=1" in log
    assert plain.returncode != 0 and "IndexError" in log  # pytorch#137261
    # the same package, archguard on: builds (the module's build of minicuda as it is)
    built, proc, out, env = default_minicuda
    assert (built / "setup.py").read_text() == (root / "setup.py").read_text()
    assert "ARCHGUARD_DISABLE" not in env and "TORCH_CUDA_ARCH_LIST" not in env
    check_built(built, tmp_path, proc, out, env)


def test_preset_torch_cuda_arch_list_is_replaced_with_a_warning(tmp_path: Path) -> None:
    root = minicuda(tmp_path)
    env = build_env(TORCH_CUDA_ARCH_LIST="8.6")
    log, found, expected = build_and_check(root, tmp_path, env)
    assert "sm_86" in found and len(found) > 1
    assert (
        f"TORCH_CUDA_ARCH_LIST='8.6' was set in the environment; replaced by "
        f"'{expected['effective']}'"
    ) in log


@needs_cu130
def test_archguard_arch_list_overrides_and_is_still_clamped(tmp_path: Path) -> None:
    root = minicuda(tmp_path, extra='[tool.archguard]\narch_list = "8.6"\n')
    env = build_env(ARCHGUARD_ARCH_LIST="7.0;8.0;9.0")
    log, found, expected = build_and_check(root, tmp_path, env)
    assert expected["effective"] == "8.0;9.0+PTX"
    assert found == ["sm_80", "sm_90", "compute_90"]
    assert "nvcc 13.0 cannot emit sm_70" in log


def test_override_that_leaves_nothing_stops_the_build(tmp_path: Path) -> None:
    root = minicuda(tmp_path, extra='[tool.archguard]\narch_list = "5.0;6.0"\n')
    proc = pip_wheel(root, tmp_path / "out")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "archguard error [empty-arch-list]" in log
    assert "[tool.archguard] arch_list" in log  # the override that caused it
    assert "Traceback" not in log
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))


def test_a_link_that_fails_after_the_compiles_is_not_a_compile_failure(tmp_path: Path) -> None:
    """nvcc and gcc compile, the link names a library that is not there: archguard says the
    link failed and quotes it, never compile-failed with the targets to leave out; the
    front-end's last line is the linker's own words (issue 47)."""
    from archguard.frontend.failures import cause

    root = minicuda(tmp_path)
    setup = (root / "setup.py").read_text()
    linked = 'libraries=["archguard_no_such_lib"], extra_compile_args='
    (root / "setup.py").write_text(setup.replace("extra_compile_args=", linked, 1))
    proc = pip_wheel(root, tmp_path / "out", env=build_env(ARCHGUARD_ARCH_LIST="8.0"))
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-3000:]
    assert "compile-failed" not in log and "To leave" not in log, log[-3000:]
    (said,) = [x for x in log.splitlines() if "archguard: error:" in x]
    assert "extension _minicuda failed in its link, after its compile (compiled without an " in said
    assert said.endswith("Not a compile failure: archguard's targets are not the cause"), said
    last = cause(log.splitlines(), [], {}, str(root))
    assert last.startswith("the link of the package's extension failed, not a compile: "), last
    assert "cannot find -larchguard_no_such_lib" in last
    # where nvcc itself fails, it is compile-failed, with the targets archguard added
    (root / "setup.py").write_text(setup)
    (root / "kernel.cu").write_text((root / "kernel.cu").read_text() + "\nint broken( {\n")
    proc = pip_wheel(root, tmp_path / "out", env=build_env(ARCHGUARD_ARCH_LIST="8.0"))
    log = proc.stdout + proc.stderr
    (said,) = [x for x in log.splitlines() if "archguard: error:" in x]
    assert "error: compile-failed: extension _minicuda failed to build with sm_80" in said, said


def test_invalid_config_stops_the_build_with_file_key_and_fix(tmp_path: Path) -> None:
    root = minicuda(tmp_path, extra='[tool.archguard]\narch_lists = "8.0"\n')
    proc = pip_wheel(root, tmp_path / "out")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "archguard error [invalid-config]" in log and "Did you mean 'arch_list'?" in log
    assert str(root / "pyproject.toml") in log


def test_setup_py_build_ext_and_editable_wheel(tmp_path: Path) -> None:
    """Both front doors besides pip wheel, at one arch (they build the list, whichever list:
    the cu130 row's is the example's and the edge cases' above)."""
    root = minicuda(tmp_path)
    env = one_arch()
    proc = run_in(root, sys.executable, "setup.py", "build_ext", "--inplace", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (so,) = root.glob("_minicuda*.so")
    from archguard.detect.cuobjdump import read_binary
    from realtools import cuobjdump

    found = read_binary(so, tool_path(cuobjdump(), "cuobjdump")).targets
    assert found is not None and found.names() == targets_of(archguard_list(root, env))
    so.unlink()
    # PEP 660 editable build (what `pip install -e .` runs), without installing anything
    code = (
        "from setuptools import build_meta as b; import sys; print(b.build_editable(sys.argv[1]))"
    )
    proc = run_in(root, sys.executable, "-c", code, str(tmp_path / "ed"), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    editable = tmp_path / "ed" / proc.stdout.strip().splitlines()[-1]
    assert wheel_record(editable)["effective"] == archguard_list(root, env)["effective"]


def test_cpu_only_torch_gets_its_own_clear_message(tmp_path: Path) -> None:
    python = os.environ.get("AG_TEST_CPU_PYTHON")
    if not python:
        pytest.skip("AG_TEST_CPU_PYTHON (a Python with torch +cpu and archguard) unset")
    proc = subprocess.run(
        [python, "-m", "archguard", "explain"],
        capture_output=True,
        text=True,
        env=build_env(),
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("archguard error [torch-not-cuda]")
    assert "CPU-only build" in proc.stderr and "Traceback" not in proc.stderr
    root = minicuda(tmp_path)
    build = pip_wheel(root, tmp_path / "out", python=python)
    log = build.stdout + build.stderr
    assert build.returncode != 0
    assert "archguard error [torch-not-cuda]" in log and "CPU-only build" in log
    # The same package's CPU fallback (C/C++ sources only) still builds on that torch.
    (root / "setup.py").write_text(
        setup_py("minicuda", [extension("_minicuda", ["mod.c"], ["-O2"])])
    )
    fallback = pip_wheel(root, tmp_path / "cpu-out", python=python)
    log = fallback.stdout + fallback.stderr
    assert fallback.returncode == 0, log[-3000:]
    assert "archguard: no CUDA sources among the extensions: no arch list to choose" in log


def test_json_record_is_deterministic_across_builds(
    default_minicuda: DefaultBuild, tmp_path: Path
) -> None:
    # a: the module's build of minicuda (PYTHONHASHSEED=1); b: the same tree built again
    root, a, a_out, a_env = default_minicuda
    assert a_env["PYTHONHASHSEED"] == "1"
    b = pip_wheel(root, tmp_path / "b", env=build_env(PYTHONHASHSEED="2"))
    assert a.returncode == 0 and b.returncode == 0
    ra = zipfile.ZipFile(only_wheel(a_out)).read("minicuda-1.0.dist-info/archguard.json")
    rb = zipfile.ZipFile(only_wheel(tmp_path / "b")).read("minicuda-1.0.dist-info/archguard.json")
    assert ra == rb
    assert json.loads(ra)["effective"] == archguard_list(root)["effective"]
