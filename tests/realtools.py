"""Finding the real tools the build tests need, and running builds the way a farm does.

Nothing here fakes a tool: a test that needs one skips (with the reason) when it is absent.
``scripts/test.sh`` (and so CI) installs all of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parent.parent
CUDA_HOME = os.environ.get("AG_TEST_CUDA_HOME", "/usr/local/cuda")


@cache
def _torch_facts() -> subprocess.CompletedProcess[str]:
    """One child Python importing the installed torch (seconds each time), for all three
    facts below: ``torch.version.cuda``, its package directory, its version, one a line."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, torch\n"
            "print(torch.version.cuda or '')\n"
            "print(os.path.dirname(torch.__file__))\n"
            "print(torch.__version__)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def _torch_fact(line: int) -> str:
    """Fact ``line`` (0, 1, 2) of :func:`_torch_facts`; a torch that does not import raises."""
    proc = _torch_facts()
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(
            proc.returncode, proc.args, output=proc.stdout, stderr=proc.stderr
        )
    return proc.stdout.splitlines()[line - 3].strip()  # the last three: whatever torch printed


def torch_cuda() -> str | None:
    """torch.version.cuda of this Python's torch ('' for a CPU build, None if absent)."""
    return _torch_fact(0) if _torch_facts().returncode == 0 else None


def is_cu130() -> bool:
    """Is this Python's torch the CUDA 13.0 build whose numbers the cu130 checks state? Under
    scripts/test.sh (AG_TEST_TORCH_CUDA=13.0, the torch it installs) anything else fails, so
    those checks always run there; elsewhere another CUDA build just skips them."""
    cuda = torch_cuda()
    wanted = os.environ.get("AG_TEST_TORCH_CUDA")
    if wanted is not None and cuda != wanted:
        raise AssertionError(f"scripts/test.sh installed a CUDA {wanted} torch; found {cuda!r}")
    return cuda == "13.0"


def torch_dir() -> Path:
    """The installed torch's package directory (torch imported in a child process)."""
    return Path(_torch_fact(1))


def torch_version() -> str:
    """The installed torch's public version (2.13.0, not 2.13.0+cu130: the index has no tag)."""
    return _torch_fact(2).split("+")[0]


@cache
def cuobjdump() -> str | None:
    from archguard.detect.cuobjdump import find_cuobjdump
    from archguard.errors import CuobjdumpNotFound

    try:
        return find_cuobjdump(environ={"CUDA_HOME": CUDA_HOME, **os.environ}, needed_by="the tests")
    except CuobjdumpNotFound:
        return None


def nvcc() -> str | None:
    path = Path(CUDA_HOME, "bin", "nvcc")
    return str(path) if path.is_file() else None


# --- the tiny CUDA packages the build tests write (torch-free kernels, no torch headers) ---

MINI = REPO / "tests" / "packages" / "minicuda"  # kernel.cu and mod.c
HOPPER = REPO / "tests" / "packages" / "hopper"  # arch-specific kernels
# What a build holds with the bundled policy's cu130 row (torch 2.13.0+cu130, nvcc 13.0)
CU130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_90", "compute_120"]
CU130_TEXT = " ".join(CU130)
TORCH_IMPORT = "from torch.utils.cpp_extension import BuildExtension"
TORCH_CMDCLASS = 'cmdclass={"build_ext": BuildExtension},'


def extension(name: str, sources: Sequence[str], nvcc: Sequence[str] = ()) -> str:
    """One ``Extension(...)`` of a setup.py, with its nvcc flags."""
    return (
        f"Extension({name!r}, {list(sources)!r}, "
        f'extra_compile_args={{"cxx": [], "nvcc": {list(nvcc)!r}}})'
    )


def setup_py(
    name: str,
    extensions: Sequence[str],
    *,
    imports: str = TORCH_IMPORT,
    prelude: str = "",
    cmdclass: str = TORCH_CMDCLASS,
) -> str:
    """A package's setup.py: ``extensions`` are :func:`extension` texts."""
    listed = "".join(f"        {e},\n" for e in extensions)
    return (
        f"from setuptools import Extension, setup\n{imports}\n\n{prelude}\n"
        f'setup(\n    name="{name}",\n    version="1.0",\n    ext_modules=[\n{listed}    ],\n'
        f"    {cmdclass}\n)\n"
    )


def pyproject(*requires: str, extra: str = "") -> str:
    """A pyproject.toml whose build needs setuptools, torch and ``requires``."""
    names = ", ".join(f'"{r}"' for r in ("setuptools>=64", "torch", *requires))
    return f'[build-system]\nrequires = [{names}]\nbuild-backend = "setuptools.build_meta"\n{extra}'


def module_c(name: str) -> str:
    """A Python module with no torch binding, named ``name`` (the tests read its device code)."""
    return (MINI / "mod.c").read_text().replace("_minicuda", name)


# a built example: the pip wheel run and its output directory (conftest's example_noiso)
Built = tuple[subprocess.CompletedProcess[str], Path]
# conftest's example_80: the example built at one arch, farm mode, stubs off, MAX_JOBS=0,
# which tests/test_user_side.py (the lint's hazards in the record, no disassembly) and
# tests/test_parallel_build.py (MAX_JOBS=0 ignored; explain runs with the same settings) read
EXAMPLE_80 = {
    "ARCHGUARD_ENABLE": "1",
    "ARCHGUARD_ARCH_LIST": "8.0",
    "ARCHGUARD_STUBS": "0",
    "MAX_JOBS": "0",
}


def tool_path(path: str | None, what: str) -> str:
    """A tool a test is marked as needing (``needs_nvcc``, ``needs_cuobjdump``): its path."""
    if path is None:
        pytest.fail(f"{what} is not found, and the test is marked as needing it")
    return path


needs_nvcc = pytest.mark.skipif(nvcc() is None, reason=f"no nvcc under {CUDA_HOME}")
needs_cuobjdump = pytest.mark.skipif(
    cuobjdump() is None, reason="no cuobjdump (pip install nvidia-cuda-cuobjdump)"
)
needs_cuda_torch = pytest.mark.skipif(
    not torch_cuda(), reason="this Python has no CUDA build of torch"
)


def not_fetched(what: str, detail: str) -> NoReturn:
    """A test marked ``network`` whose download failed: a failure where
    ``AG_TEST_NETWORK=required`` (scripts/test.sh, so CI), else a skip naming what is missing."""
    message = f"could not fetch {what} from the package index: {detail[-400:]}"
    if os.environ.get("AG_TEST_NETWORK") == "required":
        pytest.fail(f"{message} (AG_TEST_NETWORK=required)")
    pytest.skip(message)


# Checks that state the cu130 row's numbers: under scripts/test.sh (which installs that
# torch) a torch of another CUDA fails at collection (is_cu130 raises), so they always run
# there; elsewhere the whole test skips, naming what it found, never a part of it.
needs_cu130 = pytest.mark.skipif(
    not is_cu130(), reason=f"the expectations are the cu130 row's; this torch: CUDA {torch_cuda()}"
)


def cli(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m archguard ARGS`` as a user would, in a clean subprocess."""
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ARCHGUARD_") and k != "TORCH_CUDA_ARCH_LIST"
    }
    full_env.update(env or {})
    return subprocess.run(
        [python, "-m", "archguard", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        check=False,
    )


def run_main(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``archguard ARGS`` in this process, through ``archguard._cli.main``: the same exit
    status, stdout and stderr as :func:`cli`, without a Python start per call. The
    environment (ARCHGUARD_* and TORCH_CUDA_ARCH_LIST cleared, then ``env``) and the working
    directory are this call's only."""
    import contextlib
    import io

    from archguard._cli import main

    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    for name in list(os.environ):
        if name.startswith("ARCHGUARD_") or name == "TORCH_CUDA_ARCH_LIST":
            del os.environ[name]
    os.environ.update(env or {})
    out, err = io.StringIO(), io.StringIO()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse: --help, --version, a usage error
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["archguard", *args], code, out.getvalue(), err.getvalue())


def build_env(**extra: str) -> dict[str, str]:
    """The environment of a farm build container: no GPU, no archguard settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ARCHGUARD_") and k != "TORCH_CUDA_ARCH_LIST"
    }
    env.update({"CUDA_HOME": CUDA_HOME, "CUDA_VISIBLE_DEVICES": "", "MAX_JOBS": "2"})
    if "XDG_CACHE_HOME" in extra and "UV_CACHE_DIR" not in extra:
        # a fresh archguard cache, not a fresh uv cache: uv's links the cell's torch from
        # the one the session already holds, not a second download of ~5 GB onto the disk
        env["UV_CACHE_DIR"] = uv_cache_dir()
    env.update(extra)
    return env


def uv_cache_dir() -> str:
    """The uv cache of the session's own environment (uv's rule: UV_CACHE_DIR, else
    $XDG_CACHE_HOME/uv, else ~/.cache/uv)."""
    if os.environ.get("UV_CACHE_DIR"):
        return os.environ["UV_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "uv")


def farm_env(**extra: str) -> dict[str, str]:
    """A farm cell: a build container with archguard switched on for every CUDA build
    (ARCHGUARD_ENABLE=1) and nvcc on PATH for CMake steps."""
    env = build_env(**{"ARCHGUARD_ENABLE": "1", **extra})
    env["PATH"] = f"{CUDA_HOME}/bin{os.pathsep}{env.get('PATH', '')}"
    return env


def recorded_targets(wheel: Path) -> list[str]:
    """The cubins and PTX the wheel's archguard record promises."""
    targets = wheel_record(wheel)["targets"]
    assert isinstance(targets, dict)
    return list(targets["cubins"]) + list(targets["ptx"])


def pip_wheel(
    src: Path,
    out: Path,
    *,
    isolated: bool = False,
    env: dict[str, str] | None = None,
    extra: tuple[str, ...] = (),
    python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:
    argv = [python, "-m", "pip", "wheel", "--no-deps", "-v", str(src), "-w", str(out), *extra]
    if not isolated:
        argv.insert(4, "--no-build-isolation")
    return subprocess.run(argv, capture_output=True, text=True, env=env or build_env(), check=False)


def only_wheel(out: Path) -> Path:
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def wheel_record(wheel: Path) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/archguard.json")]
        return json.loads(zf.read(name))  # type: ignore[no-any-return]


def wheel_so_targets(wheel: Path, tmp: Path) -> list[str]:
    """The cubins and PTX in the wheel's (single) CUDA binary, read with real cuobjdump."""
    from archguard.detect.cuobjdump import read_binary

    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".so")]
        so = tmp / Path(name).name
        so.write_bytes(zf.read(name))
    path = cuobjdump()
    assert path
    targets = read_binary(so, path).targets
    assert targets is not None
    return targets.names()


def archguard_list(project: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    """What `archguard list --format json` says the build will get (live torch and nvcc)."""
    proc = cli("list", "--project", str(project), "--format", "json", env=env or build_env())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def archguard_wheel(out: Path) -> Path:
    """Build torch-archguard itself into ``out`` (as a farm's local wheel directory)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            str(REPO),
            "-w",
            str(out),
        ],
        capture_output=True,
        check=True,
    )
    (wheel,) = out.glob("torch_archguard-*.whl")
    return wheel


def run_in(
    cwd: Path, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command in ``cwd`` with the farm build environment; never raises on failure."""
    return subprocess.run(
        list(argv), cwd=cwd, capture_output=True, text=True, env=env or build_env(), check=False
    )


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("build", "*.egg-info", "dist"))
    return dst


def pip_would_install(
    python: str | Path, index: str, constraint: Path, *names: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """``pip install --dry-run -v --report`` of ``names`` from ``index`` alone, under the
    ``constraint`` file, run by ``python``: pip's output and what it would install (name ->
    version)."""
    report = constraint.with_suffix(".report.json")
    argv = [str(python), "-m", "pip", "install", "--isolated", "--dry-run", "-v"]
    argv += ["--report", str(report), "--index-url", index, "-c", str(constraint), *names]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return proc, {}
    chosen = {
        i["metadata"]["name"]: i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    return proc, chosen
