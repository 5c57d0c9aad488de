"""The same inputs give the same bytes (issue 50): one extension built twice, in two
processes, from two checkout paths, at two times, gives the same wheel, sha256 for sha256;
a package that puts the time into its code builds, its record saying why it is not
reproducible. The flags and the verdict, as data."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from archguard._integration.reproducible import (
    prefix_maps,
    reproducible,
    source_facts,
)
from archguard.binaries.record import path_free
from realtools import (
    MINI,
    build_env,
    cli,
    extension,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    pyproject,
    setup_py,
    wheel_record,
)

SDE = {"SOURCE_DATE_EPOCH": "315532800"}


def verdict(**given: object) -> tuple[bool, tuple[str, ...], tuple[str, ...]]:
    facts: dict[str, object] = {
        "toolkit_root": "/opt/cuda",
        "cache_tool": "off",
        "environ": SDE,
        "cuda_major": 13,
        "uses": [],
        **given,
    }
    found = reproducible(Path("/src/pkg"), **facts)  # type: ignore[arg-type]
    return found.by_construction, found.nvcc, found.why_not


def test_nvcc_unwrapped_gets_objtemp_and_every_compile_the_prefix_maps() -> None:
    ok, nvcc, why = verdict()
    assert ok and not why
    assert nvcc[0] == "-objtemp"
    assert "-Xcompiler=-ffile-prefix-map=/src/pkg=." in nvcc
    assert "-Xcompiler=-ffile-prefix-map=/opt/cuda=/archguard/cuda" in nvcc


def test_a_wrapper_decides_objtemp() -> None:
    # sccache names nvcc's intermediates itself (and with -objtemp writes no object)
    ok, nvcc, _ = verdict(cache_tool="sccache", environ={**SDE, "PYTORCH_NVCC": "sccache nvcc"})
    assert ok and "-objtemp" not in nvcc
    ok, nvcc, why = verdict(environ={**SDE, "PYTORCH_NVCC": "/usr/bin/mywrap nvcc"})
    assert not ok and "-objtemp" not in nvcc and "PYTORCH_NVCC='/usr/bin/mywrap nvcc'" in why[0]
    ok, _, why = verdict(cache_tool="ccache")
    assert not ok and "ccache wraps nvcc" in why[0]
    ok, nvcc, why = verdict(cuda_major=12)
    assert not ok and "-objtemp" not in nvcc and "nvcc 12.x" in why[0]
    ok, _, why = verdict(environ={})
    assert not ok and "SOURCE_DATE_EPOCH is unset" in why[0]
    ok, _, why = verdict(uses=["k.cu:3 uses __DATE__"])
    assert not ok and why == ("k.cu:3 uses __DATE__",)


def test_prefix_maps_put_the_longest_last_and_skip_relative_paths() -> None:
    maps = prefix_maps({"/a": "A", "/a/b/c": "C", "rel": "R", "": "E"})
    assert maps == ["-ffile-prefix-map=/a=A", "-ffile-prefix-map=/a/b/c=C"]


def test_the_record_is_path_free(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    assembled = "/home/u/.cache/archguard/cuda-root/cuda-13-0123456789abcdef"
    record = {
        "inputs": {"package": f"no [tool.archguard] in {root}/pyproject.toml"},
        "other": [f"{root}", f"{root}x/y", f"({root})", 3],
        "toolkit": {"CUDACXX": f"{assembled}/bin/nvcc", "note": f"one root, {assembled}, linking"},
    }
    assert path_free(record, root) == {
        "inputs": {"package": "no [tool.archguard] in ./pyproject.toml"},
        "other": [".", f"{root}x/y", "(.)", 3],
        "toolkit": {
            "CUDACXX": "{archguard-cache}/cuda-root/cuda-13/bin/nvcc",
            "note": "one root, {archguard-cache}/cuda-root/cuda-13, linking",
        },
    }


def test_the_record_names_archguards_cache_by_a_placeholder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A farm package's config lives under the cache, named by its content: two builders
    with their caches at other paths record the same bytes (measured: the only difference
    of the fault-injection farm's wheels, built with a cache of their own)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ARCHGUARD_CACHE_DIR", str(cache))
    config = f"{cache}/farm-config/aee569fc2343078a.toml [tool.archguard] arch_list"
    assert path_free({"origin": config}, tmp_path / "pkg") == {
        "origin": "{archguard-cache}/farm-config/aee569fc2343078a.toml [tool.archguard] arch_list"
    }
    # a farm's tree is in the cache, at a slot and under a name of its own: the tree first
    tree = cache / "src" / "tree-0123456789abcdef.2" / "checkout-name"
    assert path_free([f"no [tool.archguard] in {tree}/pyproject.toml"], tree) == [
        "no [tool.archguard] in ./pyproject.toml"
    ]
    # the cache as a whole path only: not inside another path, nor a URL
    other = [f"/var{cache}/x", f"https:/{cache}/x", f"{cache}x/y"]
    assert path_free(other, tmp_path / "pkg") == other
    from archguard.detect.fetch import cache_root
    from archguard.errors import ConfigError

    monkeypatch.setenv("ARCHGUARD_CACHE_DIR", "relative/cache")
    with pytest.raises(ConfigError, match="ARCHGUARD_CACHE_DIR='relative/cache' is a relative"):
        cache_root()


def test_time_macros_are_named_with_their_lines_in_linear_time(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text('int x;\nconst char* d = __DATE__ " " __TIME__;\n// __DATE__X no\n')
    assert source_facts([source, tmp_path / "absent.cu"], tmp_path)[0] == [
        "k.cu:2 uses __DATE__",
        "k.cu:2 uses __TIME__",
    ]
    hostile = tmp_path / "h.cu"
    hostile.write_text("__DATE" * 400_000 + "_" * 400_000)  # no match, no backtracking
    started = time.process_time()
    assert source_facts([hostile], tmp_path)[0] == []
    assert time.process_time() - started < 1.0


def test_a_source_whose_bytes_follow_its_path_is_named_in_linear_time(tmp_path: Path) -> None:
    """nvcc names an anonymous namespace after the source's absolute path (measured: the
    same .cu at two paths differs in .nv_fatbin and the namespace's .rodata, with
    --frandom-seed too); torch's headers bring one through CCCL."""
    (tmp_path / "plain.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "anon.cu").write_text("int a;\nnamespace  {\n__device__ int n;\n}\n")
    (tmp_path / "ops.cu").write_text("#include <torch/extension.h>\n")
    files = [tmp_path / n for n in ("plain.cu", "anon.cu", "ops.cu")]
    assert source_facts(files[:1], tmp_path) == ([], None)
    assert source_facts(files, tmp_path) == ([], "anon.cu:2 (namespace {)")
    assert source_facts(files[2:], tmp_path)[1] == "ops.cu:1 (#include <torch/)"
    ok, _, why = verdict(path_bound="ops.cu:1 (#include <torch/)")
    assert not ok and why[0].startswith("ops.cu:1 (#include <torch/): nvcc names each")
    hostile = tmp_path / "h.cu"
    hostile.write_text("namespace " * 300_000 + "#include <" * 200_000)
    started = time.process_time()
    assert source_facts([hostile], tmp_path) == ([], None)
    assert time.process_time() - started < 1.0


# --- real builds ---------------------------------------------------------------------


def checkout(where: Path, kernel: str | None = None) -> Path:
    """A package of minicuda's kernel (no torch headers) at ``where``."""
    where.mkdir(parents=True)
    for name in ("kernel.cu", "mod.c"):
        shutil.copy(MINI / name, where / name)
    if kernel is not None:
        (where / "kernel.cu").write_text(kernel)
    ext = extension("_minicuda", ["mod.c", "kernel.cu"])
    (where / "setup.py").write_text(setup_py("repro", [ext]))
    (where / "pyproject.toml").write_text(pyproject())
    return where


def built(tree: Path, out: Path) -> Path:
    proc = cli("wheel", str(tree), "-w", str(out), env=build_env(ARCHGUARD_ARCH_LIST="8.0"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    (wheel,) = out.glob("*.whl")
    return wheel


def members_that_differ(a: Path, b: Path) -> list[str]:
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        names = sorted(set(za.namelist()) | set(zb.namelist()))
        return [
            n
            for n in names
            if n not in za.namelist() or n not in zb.namelist() or za.read(n) != zb.read(n)
        ]


@needs_nvcc
@needs_cuda_torch
@needs_cuobjdump
def test_one_extension_from_two_checkouts_at_two_times_is_the_same_wheel(tmp_path: Path) -> None:
    """Two `archguard wheel` processes, two checkout paths of different depths, a second
    apart: the same sha256 (before: nvcc's tmpxft_<pid> name and the tree's path in the
    .so, the pyproject.toml's path in the record)."""
    first = built(checkout(tmp_path / "a" / "repro"), tmp_path / "w1")
    time.sleep(1.1)
    second = built(checkout(tmp_path / "elsewhere" / "deeper" / "repro"), tmp_path / "w2")
    assert first.name == second.name
    assert members_that_differ(first, second) == []
    digest = [hashlib.sha256(w.read_bytes()).hexdigest() for w in (first, second)]
    assert digest[0] == digest[1]
    record = wheel_record(first)
    repro = record["build"]["reproducible"]  # type: ignore[index]
    assert repro["by_construction"] is True and repro["why_not"] == []
    # how this builder names its temporaries is not the wheel's: the same with sccache
    assert "-objtemp" not in repro["nvcc_flags"] and repro["nvcc_flags"]
    assert str(tmp_path) not in json.dumps(record)


@needs_nvcc
@needs_cuda_torch
@needs_cuobjdump
def test_a_kernel_that_uses_the_date_builds_and_says_it_is_not_reproducible(
    tmp_path: Path,
) -> None:
    kernel = (MINI / "kernel.cu").read_text() + '\nconst char* built_on = __DATE__ " " __TIME__;\n'
    tree = checkout(tmp_path / "dated", kernel)
    proc = cli(
        "wheel",
        str(tree),
        "-w",
        str(tmp_path / "out"),
        env=build_env(ARCHGUARD_ARCH_LIST="8.0"),
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "not reproducible by construction: kernel.cu:" in proc.stderr
    (wheel,) = (tmp_path / "out").glob("*.whl")
    repro = wheel_record(wheel)["build"]["reproducible"]  # type: ignore[index]
    assert repro["by_construction"] is False
    line = kernel.count("\n", 0, kernel.index("__DATE__")) + 1
    assert repro["why_not"] == [
        f"kernel.cu:{line} uses __DATE__",
        f"kernel.cu:{line} uses __TIME__",
    ]


# --- a wheel and its rebuild, compared ---------------------------------------------------


def wheel_of(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
    return path


def test_a_rebuilt_wheel_is_compared_member_by_member_and_section_by_section(
    tmp_path: Path,
) -> None:
    """A real shared object (this Python's own _struct module) with one byte of .text
    changed: its member and its section are named; the same bytes say nothing."""
    import _struct

    from archguard.binaries.compare import wheel_differences
    from archguard.detect.elf import sections

    so = Path(_struct.__file__).read_bytes()
    text = next(s for s in sections(so) if s.name == ".text")
    tampered = bytearray(so)
    tampered[text.offset + 16] ^= 0xFF
    base = {"pkg/_x.so": so, "pkg/__init__.py": b"", "pkg-1.0.dist-info/RECORD": b"r"}
    published = wheel_of(tmp_path / "a.whl", base)
    assert wheel_differences(published, wheel_of(tmp_path / "same.whl", base)) == []
    changed = wheel_of(tmp_path / "b.whl", {**base, "pkg/_x.so": bytes(tampered)})
    assert wheel_differences(published, changed) == ["pkg/_x.so: ELF sections .text differ"]
    other = wheel_of(tmp_path / "c.whl", {**base, "pkg/__init__.py": b"x = 1\n", "extra": b""})
    assert wheel_differences(published, other) == [
        "extra: only in the rebuilt wheel",
        "pkg/__init__.py: 0 and 6 bytes, first different at byte 0",
    ]


def test_each_cuda_object_gets_its_intermediates_named_as_sccache_names_them() -> None:
    """Under -objtemp the host object's STT_FILE is ``<object>.cudafe1.cpp``; sccache's is
    ``x_0.cudafe1.cpp``: one map per CUDA object (the build directory as given and made
    absolute, as setuptools and torch's ninja file spell it), none for C++ sources, none
    where -objtemp is not added (sccache names them itself)."""
    from archguard._integration.reproducible import intermediate_maps

    maps = intermediate_maps(["mod.c", "src/kernel.cu", "/abs/k2.cu"], "build/temp")
    absolute = str(Path("build/temp").resolve())
    assert maps == [
        "-Xcompiler=-ffile-prefix-map=build/temp/src/kernel.o.=x_0.",
        f"-Xcompiler=-ffile-prefix-map={absolute}/src/kernel.o.=x_0.",
        "-Xcompiler=-ffile-prefix-map=build/temp/abs/k2.o.=x_0.",
        f"-Xcompiler=-ffile-prefix-map={absolute}/abs/k2.o.=x_0.",
    ]
    unwrapped = reproducible(
        Path("/src/pkg"), toolkit_root=None, cache_tool="off", environ=SDE, cuda_major=13, uses=[]
    )
    assert unwrapped.nvcc_for(["k.cu"], "/b")[-1] == "-Xcompiler=-ffile-prefix-map=/b/k.o.=x_0."
    assert "-objtemp" not in unwrapped.record()["nvcc_flags"]  # type: ignore[operator]
    wrapped = reproducible(
        Path("/src/pkg"),
        toolkit_root=None,
        cache_tool="sccache",
        environ={**SDE, "PYTORCH_NVCC": "sccache nvcc"},
        cuda_major=13,
        uses=[],
    )
    assert wrapped.nvcc_for(["k.cu"], "/b") == list(wrapped.nvcc)
    assert wrapped.record() == unwrapped.record()


@needs_nvcc
@needs_cuda_torch
@needs_cuobjdump
def test_one_job_with_and_without_sccache_is_the_same_wheel(tmp_path: Path) -> None:
    """Issue 57: the same tree built with the compile cache off and through sccache gives
    one sha256 (before: the host object's STT_FILE ``kernel.o.cudafe1.cpp`` against
    ``x_0.cudafe1.cpp``, and the record's ``compiler_cache``)."""
    import os

    from test_compile_cache import free_port, sccache

    tool = sccache()
    if tool is None:
        pytest.fail("no sccache (scripts/setup_env.sh installs one into .cache/sccache)")
    tree = checkout(tmp_path / "repro")
    off = built(tree, tmp_path / "off")
    env = build_env(
        ARCHGUARD_ARCH_LIST="8.0",
        ARCHGUARD_COMPILER_CACHE="sccache",
        SCCACHE_DIR=str(tmp_path / "sccache"),
        SCCACHE_SERVER_PORT=str(free_port()),
        SCCACHE_IDLE_TIMEOUT="0",
    )
    env["PATH"] = f"{Path(tool).parent}{os.pathsep}{env['PATH']}"
    shutil.rmtree(tree / "build", ignore_errors=True)
    try:
        proc = cli("wheel", str(tree), "-w", str(tmp_path / "on"), env=env)
    finally:
        subprocess.run([tool, "--stop-server"], env=env, capture_output=True, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert "compiler cache: sccache (" in log, log[-4000:]
    (on,) = (tmp_path / "on").glob("*.whl")
    assert members_that_differ(off, on) == []
    assert hashlib.sha256(off.read_bytes()).digest() == hashlib.sha256(on.read_bytes()).digest()
    assert "compiler_cache" not in wheel_record(on)["build"]  # type: ignore[operator]
