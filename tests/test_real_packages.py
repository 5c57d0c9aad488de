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

Issue #17 (farm mode never breaks a package that builds without it):

- whisper-blaze 0.1.18 (MIT): `-arch=sm_90a`, unguarded wgmma/TMA assembly, `#error` below
  sm_90, `-lcufft`. An arch-specific-only extension: it gets exactly sm_90a (plain nvcc's
  `-arch=sm_90a` adds plain compute_90 PTX, which does not assemble), torch's CUDA library
  headers and a `libcufft.so` link name come from torch's NVIDIA wheels.
- grouped_gemm 0.3.0 (BSD-3-Clause): `setup.py` calls `torch.cuda.get_device_capability()`
  unless TORCH_CUDA_ARCH_LIST is set (no GPU: "Found no NVIDIA driver" before any hook
  runs); vendors CUTLASS (568 headers) for the lint. Built through `archguard wheel`.
- dbscan-torch 0.2.0 (MIT): includes ATen/cuda/CUDAContext.h, whose cusparse.h the
  nvcc-only toolkit lacks; built with no CPATH.

Issue #19 (the lint on real kernels, through each package's own include chain; nothing
built, nothing vendored here):

- NATTEN 0.21.7 (MIT; CUTLASS 4.3.5 vendored under third_party/cutlass, BSD-3-Clause): its
  Blackwell FNA kernel prints an error instead of running unless CUTLASS's
  `CUTLASS_ARCH_MMA_SM100A_ENABLED` / `..._SM100F_ENABLED` is defined, which CUTLASS's
  `arch/config.h` does from `__CUDA_ARCH_FEAT_SM100_ALL` or `CUDA_ARCH_FAMILY(1000)`:
  `(__CUDA_ARCH_FAMILY_SPECIFIC__ == 1000)` on `f` targets, `(false)` on plain ones. Linted
  as its CMake build compiles it (`-I csrc/include -I third_party/cutlass/include`,
  `-DNATTEN_WITH_CUTLASS -DNATTEN_WITH_BLACKWELL_FNA=1`).
- gptqmodel 7.7.0 (Apache-2.0; the Swordfish shim is AGPL-3.0, so read from the sdist, never
  copied here): its Swordfish JIT build passes nvcc `-include swordfish_arch_macros.cuh`,
  which defines CUTLASS's SM100 family switches on `__CUDA_ARCH__ == 1000/1030/1100` (plain
  targets included); linted with the CUTLASS NATTEN vendors (Swordfish fetches CUTLASS at
  build time), the forced include decides CuTe's SM100 copy atoms.

Each sdist is pinned by its sha256, so the test builds exactly the sources docs/farm.md names.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from packaging.version import Version

from archguard.core.arch import parse_targets
from archguard.core.toolkit import bundled_toolkit, known_arches
from archguard.core.torchbuild import bundled_torch
from archguard.lint.guards import Report, Wheel, analyse
from archguard.lint.sources import Sources, parse_defines
from realtools import (
    CU130,
    CU130_TEXT,
    build_env,
    cli,
    farm_env,
    needs_cu130,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    not_fetched,
    only_wheel,
    pip_wheel,
    recorded_targets,
    wheel_record,
    wheel_so_targets,
)

pytestmark = [pytest.mark.slow, pytest.mark.network, needs_nvcc, needs_cuda_torch, needs_cuobjdump]

SDISTS = {
    "points_in_rbbox": (
        "1.1.9",
        "c666f0be6ba5391ee63ef393f87be6b11f3fe747e9c317e847e54f2dd5f1f7c8",
    ),
    "causal_conv1d": (
        "1.7.0",
        "3202758494eaa7b597ce1c282dfa188889506bfcb92cad3c407d26736bfcd32b",
    ),
    "whisper_blaze": (
        "0.1.18",
        "5c96ee0fd906606bca0376f63bb65b9c80e7473ee6e25aa1535f9745701ec6a9",
    ),
    "grouped_gemm": (
        "0.3.0",
        "f0555da33a975610e9160f52449082c5e699525524581a0e5f990b14b02676a3",
    ),
    "dbscan_torch": (
        "0.2.0",
        "ae596989050fafa415c2a7d2199a75e0baae2d401cb71da6cd1b042f82a1b653",
    ),
    "natten": (
        "0.21.7",
        "8417236b74db079b2d23899ec8f77514fb2dc73d4bbd6b346a45b6967fc05ffb",
    ),
    "gptqmodel": (
        "7.7.0",
        "039874c39fb56ba75b750dd4870968e7fe83b6ca28890a53e94ad3c46be699d0",
    ),
    "torch_llm_kernels": (
        "0.1.0",
        "8ad3667609a0bf12fac856330da06994c91c78577e9502793afc972f5224a017",
    ),
    "quad_iou_fixed": (
        "0.2.2",
        "b7be1689c7bca484f469185650cc90c54e12aaf4a6885f8041380e9ae7cd51b5",
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
        # (grouped_gemm's setup.py asks the GPU for its capability unless the list is set)
        env=build_env(CAUSAL_CONV1D_FORCE_BUILD="TRUE", TORCH_CUDA_ARCH_LIST="8.0"),
        check=False,
    )
    archives = sorted(dl.glob(f"{name}-{version}.tar.gz")) if dl.exists() else []
    if not archives:
        not_fetched(f"the {name} {version} sdist", proc.stderr)
    (archive,) = archives
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == sha256, "not the pinned sdist"
    with tarfile.open(archive) as tf:
        tf.extractall(tmp / "src", filter="data")
    return tmp / "src" / f"{name}-{version}"


@needs_cu130
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


def test_whisper_blaze_an_arch_specific_only_package_gets_exactly_sm_90a(tmp_path: Path) -> None:
    src = fetch("whisper_blaze", tmp_path)
    proc = pip_wheel(src, tmp_path / "out", env=farm_env())
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    wheel = only_wheel(tmp_path / "out")
    assert wheel_so_targets(wheel, tmp_path) == ["sm_90a"] == recorded_targets_of(wheel)
    # one line for the one flag, and the rule that says why nothing else
    assert (
        "archguard: extension whisper_blaze_kernels: arch-specific-only: it hard-codes only "
        "arch-specific targets (sm_90a from '-arch=sm_90a')"
    ) in log
    assert "dropped the hard-coded nvcc flag '-arch=sm_90a'" not in log
    assert "serves natively only 9.0 (H100, H200, GH200)" in log
    # the toolkit here has neither cusparse.h nor a libcufft.so link name: torch's wheels do
    assert "CPATH gains" in log and "libcufft.so -> libcufft.so." in log
    assert cli("verify", str(wheel), env=build_env()).returncode == 0


def recorded_targets_of(wheel: Path) -> list[str]:
    """The one extension's recorded targets (the wheel's effective list is the policy's)."""
    (ext,) = wheel_record(wheel)["build"]["extensions"]  # type: ignore[index]
    return list(ext["targets"]["cubins"]) + list(ext["targets"]["ptx"])


def test_dbscan_torch_builds_on_an_nvcc_only_toolkit_without_cpath(tmp_path: Path) -> None:
    src = fetch("dbscan_torch", tmp_path)
    env = farm_env(ARCHGUARD_ARCH_LIST="8.0")
    env.pop("CPATH", None)
    proc = pip_wheel(src, tmp_path / "out", env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert "has no cusparse.h" in log and "CPATH gains" in log
    wheel = only_wheel(tmp_path / "out")
    assert wheel_so_targets(wheel, tmp_path) == ["sm_80", "compute_80"]
    record = wheel_record(wheel)
    completion = record["build"]["toolkit_completion"]  # type: ignore[index]
    assert "cusparse.h" in completion["headers"]
    assert cli("verify", str(wheel), env=build_env()).returncode == 0


def test_grouped_gemm_a_setup_time_reader_builds_through_archguard_wheel(tmp_path: Path) -> None:
    """Plain `pip wheel` in farm mode dies in setup.py (no GPU to ask); `archguard wheel`
    puts the list in the environment first, then verifies the wheel. The lint walks its
    vendored CUTLASS in seconds (each guarded header once)."""
    src = fetch("grouped_gemm", tmp_path)
    plain = pip_wheel(src, tmp_path / "plain", env=farm_env())
    assert plain.returncode != 0
    assert "NVIDIA driver" in plain.stdout + plain.stderr
    env = farm_env(ARCHGUARD_ARCH_LIST="8.0")
    proc = cli("wheel", str(src), "-w", str(tmp_path / "out"), "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr[-5000:]
    report = json.loads(proc.stdout)
    (build,) = report["builds"]
    assert build["ok"] and build["environment"]["TORCH_CUDA_ARCH_LIST"] == "8.0+PTX"
    assert "TORCH_CUDA_ARCH_LIST" in build["setup_py_reads"]
    (wheel,) = build["wheels"]
    assert wheel["targets"] == ["sm_80", "compute_80"]
    assert wheel_so_targets(Path(wheel["wheel"]), tmp_path) == ["sm_80", "compute_80"]
    lint = re.search(r"lint: extension grouped_gemm_backend: (\d+) files read", proc.stderr)
    assert lint, proc.stderr[-3000:]
    # its two .cu files, csrc's headers and the CUTLASS headers it reaches through its own
    # -I third_party/cutlass/include (298 of the 568 vendored)
    assert int(lint[1]) > 250, lint[0]
    assert "budget" not in proc.stderr  # finished well inside it


FAMILY = "sm_75 sm_80 sm_86 sm_90a sm_100f sm_120f"


def lint(
    unit: Path,
    dirs: list[Path],
    inside: list[Path],
    wheel: str,
    flags: Sequence[str] = (),
    forced: Sequence[Path] = (),
) -> Report:
    """The lint as a build of the package runs it: its -I directories, -D flags and forced
    includes, for a wheel holding ``wheel`` (torch 2.13.0+cu130, nvcc 13.0 facts)."""
    targets = parse_targets(wheel, "test", known=known_arches())
    torch = bundled_torch((13, 0), Version("2.13")).targets
    sources = Sources.on_disk(dirs, inside, parse_defines(list(flags)), [str(f) for f in forced])
    return analyse([str(unit)], Wheel(targets, bundled_toolkit((13, 0)), torch), sources)


def at(report: Report, name: str, line: int) -> set[tuple[str, str, str]]:
    """(device, image, fix) of the findings at ``name:line``."""
    return {
        (f.device.cc_text, f.image, str(f.fix))
        for f in report.findings
        if Path(f.file).name == name and f.line == line
    }


def test_natten_blackwell_kernel_guard_through_its_vendored_cutlass(tmp_path: Path) -> None:
    """sm100_fna_fwd_kernel_tma_warpspecialized.hpp:249 (the #else of line 242: the real
    kernel): a plain sm_100 cubin (what 10.0 and 10.3 load from the cu130 list) compiles
    the kernel to its error printf instead, because CUTLASS's
    CUDA_ARCH_FAMILY(1000) is (false) there; sm_100f compiles the real kernel for both. The
    guard is decided (no "depends on false"), and the walk over CUTLASS's headers, all reached
    under NATTEN's own #if, finishes in seconds."""
    src = fetch("natten", tmp_path)
    unit = src / "csrc" / "src" / "blackwell_fna_forward.cu"
    dirs = [src / "csrc" / "include", src / "third_party" / "cutlass" / "include"]
    flags = ["-DNATTEN_WITH_CUTLASS", "-DNATTEN_WITH_BLACKWELL_FNA=1"]
    kernel = "sm100_fna_fwd_kernel_tma_warpspecialized.hpp"
    report = lint(unit, dirs, [src], CU130_TEXT, flags=flags)
    assert not report.unfinished
    assert report.files > 300  # NATTEN's headers and CUTLASS's, through its own -I
    assert at(report, kernel, 249) == {("10.0", "sm_100", "10.0f"), ("10.3", "sm_100", "10.3f")}
    assert not [n for n in report.not_understood if "false" in n[2] or "FAMILY" in n[2]]
    family = lint(unit, dirs, [src], FAMILY, flags=flags)
    assert at(family, kernel, 249) == set()


def test_gptqmodel_forced_include_decides_cutes_sm100_atoms(tmp_path: Path) -> None:
    """CuTe's SM100_LOAD_256bit (copy_sm100.hpp:60) traps unless
    CUTE_ARCH_LOAD256_SM100A_ENABLED, which CUTLASS derives from the SM100A switch: on the
    plain sm_100 cubin 10.0 and 10.3 load, a trap, until Swordfish's forced include defines
    the switch for __CUDA_ARCH__ == 1000. 11.0 JIT-compiles compute_90 either way."""
    natten = fetch("natten", tmp_path / "natten")
    gptq = fetch("gptqmodel", tmp_path / "gptqmodel")
    cutlass = natten / "third_party" / "cutlass" / "include"
    header = cutlass / "cute" / "arch" / "copy_sm100.hpp"
    shim = gptq / "gptqmodel_ext" / "swordfish" / "swordfish_arch_macros.cuh"
    assert '"-include",' in (gptq / "gptqmodel" / "utils" / "swordfish.py").read_text()
    plain = lint(header, [cutlass], [cutlass], CU130_TEXT)
    assert {"10.0", "10.3", "11.0"} <= {d for d, _, _ in at(plain, "copy_sm100.hpp", 60)}
    forced = lint(header, [cutlass], [cutlass, shim.parent], CU130_TEXT, forced=[shim])
    devices = {d for d, _, _ in at(forced, "copy_sm100.hpp", 60)}
    assert "11.0" in devices and not devices & {"10.0", "10.3"}


def test_silent_cuda_less_wheels_name_the_condition_in_their_setup_py(tmp_path: Path) -> None:
    """Two released sdists that add their CUDA extension only under a condition a farm does
    not meet: torch_llm_kernels 0.1.0 (MIT) only when 'build_ext' is on setup.py's command
    line (pip's build never passes it: a pure-Python wheel), quad_iou_fixed 0.2.2 only when
    torch sees a GPU. archguard wheel refuses the first's wheel naming the line and how to
    meet it; the second's setup.py is read for the same (its CPU build is not run here)."""
    from archguard.frontend.setup_py import read_setup_py

    root = fetch("torch_llm_kernels", tmp_path)
    out = tmp_path / "out"
    proc = cli("wheel", str(root), "-w", str(out), env=build_env(ARCHGUARD_ARCH_LIST="8.0"))
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert "holds no CUDA device code" in proc.stdout
    said = (
        "Conditions in its setup.py a farm's build does not meet: setup.py:6: "
        "\"'build_ext' in sys.argv\": pip's build (PEP 517) never puts 'build_ext' on "
        "setup.py's command line"
    )
    assert said in proc.stdout, proc.stdout
    assert not list(out.glob("*.whl"))  # refused: out of the wheelhouse
    quad = fetch("quad_iou_fixed", tmp_path)
    (condition,) = read_setup_py(quad / "setup.py").conditions
    assert condition.startswith("setup.py:34: it asks torch for a GPU ('use_cuda = use_cuda and")
