"""Hard-coded ``a``/``f`` targets are kernel requirements (issue #13): kept per extension,
their coverage computed, recorded, and verified per binary.

Real nvcc 13.0, real torch 2.13.0+cu130, real cuobjdump; tiny kernels without torch headers
(``tests/packages/hopper``). ``strict.cu`` only assembles for ``sm_90a``: if archguard ever
turns the package's ``sm_90a`` into ``sm_90`` again, the build fails.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from realtools import (
    CU130,
    HOPPER,
    MINI,
    build_env,
    cli,
    cuobjdump,
    extension,
    needs_cu130,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    only_wheel,
    pip_wheel,
    pyproject,
    setup_py,
    tool_path,
    wheel_record,
)

pytestmark = [pytest.mark.slow, needs_nvcc, needs_cuda_torch, needs_cuobjdump]


pytestmark.append(needs_cu130)


def gencode(*targets: str) -> list[str]:
    out = []
    for t in targets:
        out += ["-gencode", f"arch={t.replace('sm_', 'compute_')},code={t}"]
    return out


def package(
    tmp: Path,
    extensions: dict[str, tuple[str, list[str]]],
    extra: str = "",
    requires: tuple[str, ...] = ("torch-archguard",),
) -> Path:
    root = tmp / "hoppy"
    root.mkdir(parents=True)
    for name in ("hopper.cu", "strict.cu", "cpasync.cu"):
        (root / name).write_text((HOPPER / name).read_text())
    (root / "kernel.cu").write_text((MINI / "kernel.cu").read_text())
    (root / "mod.c").write_text((MINI / "mod.c").read_text())
    exts = [extension(n, ["mod.c", cu], nvcc) for n, (cu, nvcc) in extensions.items()]
    (root / "setup.py").write_text(setup_py("hoppy", exts))
    (root / "pyproject.toml").write_text(pyproject(*requires, extra=extra))
    return root


def so_targets(wheel: Path, tmp: Path) -> dict[str, list[str]]:
    from archguard.detect.cuobjdump import read_binary

    out = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.endswith(".so"):
                so = tmp / Path(name).name
                so.write_bytes(zf.read(name))
                found = read_binary(so, tool_path(cuobjdump(), "cuobjdump")).targets
                assert found is not None
                out[name.split(".")[0]] = found.names()
    return out


def assert_last_words(log: str, ext: str, targets: str, added: str, own: str) -> None:
    """archguard's one compile-failed line: the extension, its targets, what archguard
    added beyond the package's own, and the ARCHGUARD_ARCH_LIST that leaves them out."""
    (last,) = [x for x in log.splitlines() if "archguard: error: compile-failed:" in x]
    assert f"extension {ext} failed to build with {targets}" in last
    assert f"archguard added {added} beyond what the package hard-codes" in last
    assert f'ARCHGUARD_ARCH_LIST="{own}"' in last


def build(root: Path, tmp: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], str]:
    proc = pip_wheel(root, tmp / "out", env=build_env(**env))
    return proc, proc.stdout + proc.stderr


def test_hard_coded_sm_90a_is_kept_per_extension_and_verifies(tmp_path: Path) -> None:
    """The issue's package: -gencode 90a and 80 for its Hopper kernel, beside a plain one."""
    root = package(
        tmp_path,
        {
            "_hopper": ("hopper.cu", ["-O2", *gencode("sm_90a", "sm_80")]),
            "_plain": ("kernel.cu", ["-O2"]),
        },
    )
    proc, log = build(root, tmp_path)
    assert proc.returncode == 0, log[-5000:]
    wheel = only_wheel(tmp_path / "out")
    found = so_targets(wheel, tmp_path)
    # floor sm_80 (its lowest hard-coded target), sm_90a in place of sm_90, the compute_90
    # net moved to compute_86 (never plain compute_90 beside an sm_90a-only 9.0)
    hopper = ["sm_80", "sm_86", "sm_90a", "sm_100", "sm_120", "compute_86", "compute_120"]
    assert found["_hopper"] == hopper
    assert found["_plain"] == CU130
    assert (
        "archguard: extension _hopper: kept the hard-coded arch-specific target sm_90a from "
        "'-gencode arch=compute_90a,code=sm_90a' (a kernel requirement), in place of the "
        "effective list's sm_90"
    ) in log
    assert "archguard: extension _hopper: left out sm_75: below extension _hopper's floor" in log
    assert "archguard: extension _hopper coverage: " in log
    assert "no longer serves natively" not in log  # 9.0a serves 9.0, the only 9.x device
    record = wheel_record(wheel)
    exts = {e["name"]: e for e in record["build"]["extensions"]}  # type: ignore[index]
    assert exts["_hopper"]["targets"]["cubins"] == [
        "sm_80",
        "sm_86",
        "sm_90a",
        "sm_100",
        "sm_120",
    ]
    assert "hard-coded nvcc flag" in exts["_hopper"]["origins"]["sm_90a"]
    assert exts["_hopper"]["kept_arch_specific"] == {"sm_90a": "sm_90"}
    assert exts["_hopper"]["intent"]["rule"] == "floor"
    assert exts["_hopper"]["intent"]["floor"] == "sm_80"
    assert exts["_hopper"]["added"] == ["sm_86", "sm_100", "sm_120", "compute_86", "compute_120"]
    assert "__CUDA_ARCH_FEAT_SM90_ALL" in exts["_hopper"]["left_out"]["compute_90"]
    assert exts["_plain"]["targets"] == record["targets"]
    assert "archguard: verify: 2 CUDA binaries read back" in log
    verify = cli("verify", str(wheel), env=build_env())
    assert verify.returncode == 0, verify.stdout  # the extensions legitimately differ


@pytest.mark.parametrize("mode", ["drop", "error"])
def test_drop_gives_todays_behaviour_and_error_stops(tmp_path: Path, mode: str) -> None:
    root = package(
        tmp_path,
        {"_hopper": ("hopper.cu", gencode("sm_90a", "sm_80"))},
        extra=f'[tool.archguard]\nhardcoded_arch_specific = "{mode}"\n',
    )
    proc, log = build(root, tmp_path)
    if mode == "drop":
        assert proc.returncode == 0, log[-5000:]
        assert so_targets(only_wheel(tmp_path / "out"), tmp_path)["_hopper"] == CU130[1:]
        assert "dropped the hard-coded nvcc flag '-gencode arch=compute_90a,code=sm_90a'" in log
        assert "(hardcoded_arch_specific = 'drop')" in log
    else:
        assert proc.returncode != 0
        (line,) = [x for x in log.splitlines() if "archguard error [hardcoded-arch-specific]" in x]
        assert "extension _hopper hard-codes the arch-specific target sm_90a" in line
        assert "hardcoded_arch_specific = 'keep'" in line and "Traceback" not in log


def test_a_kernel_that_only_assembles_for_sm_90a_builds_in_farm_mode_with_the_full_list(
    tmp_path: Path,
) -> None:
    """strict.cu: setmaxnreg under __CUDA_ARCH__ == 900, hard-coded sm_90a + sm_80, a package
    that never heard of archguard (farm mode, the whole cu130 row). It builds without
    archguard; with it, the binary holds sm_90a, no plain sm_90, no compute_90 (a net there
    is compiled with __CUDA_ARCH__ == 900 and does not assemble), nothing below sm_80."""
    nvcc = gencode("sm_90a", "sm_80")
    root = package(tmp_path, {"_strict": ("strict.cu", nvcc)}, requires=())
    farm, log = build(root, tmp_path, ARCHGUARD_ENABLE="1")
    assert farm.returncode == 0, log[-5000:]
    wheel = only_wheel(tmp_path / "out")
    found = so_targets(wheel, tmp_path)["_strict"]
    assert found == ["sm_80", "sm_86", "sm_90a", "sm_100", "sm_120", "compute_86", "compute_120"]
    assert "archguard: enabled by ARCHGUARD_ENABLE=1" in log
    assert "left out compute_90: plain compute_90 beside sm_90a with no plain sm_90" in log
    assert cli("verify", str(wheel), env=build_env()).returncode == 0
    # the same package with its own flags (archguard off) holds sm_90a and sm_80 ...
    plain_root = package(tmp_path / "off", {"_strict": ("strict.cu", nvcc)}, requires=())
    off, log = build(plain_root, tmp_path / "off")
    assert off.returncode == 0, log[-3000:]
    assert so_targets(only_wheel(tmp_path / "off" / "out"), tmp_path) == {
        "_strict": ["sm_80", "sm_90a"]
    }
    # ... and turning sm_90a into sm_90 ("drop") fails to assemble; the last words name the
    # targets archguard added and the line that leaves them out
    drop_root = package(
        tmp_path / "drop",
        {"_strict": ("strict.cu", nvcc)},
        extra='[tool.archguard]\nhardcoded_arch_specific = "drop"\n',
    )
    dropped, log = build(drop_root, tmp_path / "drop", ARCHGUARD_ARCH_LIST="8.0;9.0")
    assert dropped.returncode != 0
    assert "Instruction 'setmaxnreg.inc' not supported on .target 'sm_90'" in log
    assert_last_words(log, "_strict", "sm_80 sm_90 compute_90", "sm_90 compute_90", "8.0")


def test_a_cp_async_package_hard_coding_sm_80_up_keeps_its_floor_in_farm_mode(
    tmp_path: Path,
) -> None:
    """cpasync.cu: unguarded cp.async (sm_80+), hard-coded sm_80 and sm_86. In farm mode the
    cu130 row is filled from sm_80 up (no sm_75, which ptxas would reject); an explicit list
    that asks for 7.5 wins over the inferred floor, fails, and archguard's last line names
    what it added and the line that leaves it out."""
    nvcc = gencode("sm_80", "sm_86")
    root = package(tmp_path, {"_cp": ("cpasync.cu", nvcc)}, requires=())
    proc, log = build(root, tmp_path, ARCHGUARD_ENABLE="1")
    assert proc.returncode == 0, log[-5000:]
    wheel = only_wheel(tmp_path / "out")
    assert so_targets(wheel, tmp_path)["_cp"] == CU130[1:]
    assert (
        "archguard: extension _cp: floor: nothing below its floor sm_80, the lowest target its "
        "hard-coded nvcc flag '-gencode arch=compute_80,code=sm_80' names"
    ) in log
    assert "left out sm_75: below extension _cp's floor sm_80" in log
    (ext,) = wheel_record(wheel)["build"]["extensions"]  # type: ignore[index]
    assert ext["intent"]["rule"] == "floor" and ext["added"] == [
        "sm_90",
        "sm_100",
        "sm_120",
        "compute_90",
        "compute_120",
    ]
    assert cli("verify", str(wheel), env=build_env()).returncode == 0
    explicit = package(tmp_path / "explicit", {"_cp": ("cpasync.cu", nvcc)}, requires=())
    failed, log = build(
        explicit, tmp_path / "explicit", ARCHGUARD_ENABLE="1", ARCHGUARD_ARCH_LIST="7.5;8.0"
    )
    assert failed.returncode != 0
    assert "requires .target sm_80 or higher" in log
    assert_last_words(log, "_cp", "sm_75 sm_80 compute_80", "sm_75 compute_80", "8.0")


def test_sm_100a_leaves_b300_without_a_native_cubin_and_says_how_to_fix_it(
    tmp_path: Path,
) -> None:
    root = package(tmp_path, {"_bw": ("kernel.cu", gencode("sm_75", "sm_100a"))})
    proc, log = build(root, tmp_path)
    assert proc.returncode == 0, log[-5000:]
    found = so_targets(only_wheel(tmp_path / "out"), tmp_path)["_bw"]
    assert "sm_100a" in found and "sm_100" not in found
    (warning,) = [x for x in log.splitlines() if "no longer serves natively" in x]
    assert "10.3 (B300, GB300) (now jit-only via compute_90)" in warning
    assert "hard-code sm_100f instead of sm_100a" in warning and "add sm_103a" in warning


def test_sm_100f_replaces_plain_sm_100_without_a_warning(tmp_path: Path) -> None:
    root = package(tmp_path, {"_bw": ("kernel.cu", gencode("sm_75", "sm_100f"))})
    proc, log = build(root, tmp_path)
    assert proc.returncode == 0, log[-5000:]
    found = so_targets(only_wheel(tmp_path / "out"), tmp_path)["_bw"]
    assert "sm_100f" in found and "sm_100" not in found
    assert "in place of the effective list's sm_100" in log
    assert "no longer serves natively" not in log
    record = wheel_record(only_wheel(tmp_path / "out"))
    (ext,) = record["build"]["extensions"]  # type: ignore[index]
    assert "sm_100f" in ext["targets"]["cubins"]
    assert json.loads(json.dumps(record))["effective"] == "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"
