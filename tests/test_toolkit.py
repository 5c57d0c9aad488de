from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from archguard.core.arch import Arch
from archguard.core.bundled import bundled_yaml
from archguard.core.coverage import ptx_runs_on
from archguard.core.cuda import CudaVersion
from archguard.core.toolkit import (
    Toolkit,
    bundled_rows,
    bundled_toolkit,
    compare_with_bundled,
    variant_rule,
)
from archguard.detect.nvcc import find_nvcc, parse_nvcc_version, probe_toolkit
from archguard.errors import NvccNotFound, NvccUnusable, UnknownToolkit
from realtools import REPO, needs_nvcc, not_fetched

CUDA_HOME = os.environ.get("AG_TEST_CUDA_HOME", "/usr/local/cuda")
has_nvcc = needs_nvcc  # realtools' mark: conftest tags the tests it guards `nvcc`


def test_table_covers_the_policy_rows() -> None:
    assert {f"{v[0]}.{v[1]}" for v in bundled_rows()} >= {
        "12.4",
        "12.6",
        "12.8",
        "12.9",
        "13.0",
        "13.2",
    }
    for row in bundled_rows().values():
        assert "wheel" in row.toolkit.source  # provenance: which binary said so


@pytest.mark.parametrize("version", sorted(bundled_rows()))
def test_variant_rule_reproduces_every_probed_row(version: CudaVersion) -> None:
    """The a/f rule used for a live nvcc gives exactly what the real ptxas accepted."""
    row = bundled_rows()[version].toolkit
    plain = [a for a in row.cubins if not a.suffix]
    assert row.cubins == frozenset(plain) | variant_rule(plain, version)


@pytest.mark.parametrize("version", [v for v, r in bundled_rows().items() if r.nvcc_list_gpu_code])
def test_wheel_nvcc_lists_agree_with_ptxas_probe(version: CudaVersion) -> None:
    row = bundled_rows()[version]
    rebuilt = Toolkit.from_lists(version, row.nvcc_list_gpu_code, row.nvcc_list_gpu_arch, "t")
    assert rebuilt.cubins == row.toolkit.cubins


def test_cuda_13_dropped_volta_and_12_9_added_family_targets() -> None:
    assert not bundled_toolkit((13, 0)).emits_cubin(Arch(7, 0))
    assert bundled_toolkit((12, 8)).emits_cubin(Arch(7, 0))
    assert not bundled_toolkit((12, 8)).emits_cubin(Arch(10, 0, "f"))
    assert bundled_toolkit((12, 9)).emits_cubin(Arch(10, 0, "f"))
    assert bundled_toolkit((13, 0)).emits_cubin(Arch(11, 0))
    assert bundled_toolkit((12, 9)).emits_cubin(Arch(10, 1))  # Thor before the rename


def test_cuda_13_4_added_sm_107() -> None:
    """nvcc/ptxas 13.4 (13.4.59 and 13.4.92) list sm_107; 13.3.73 does not."""
    assert not bundled_toolkit((13, 3)).emits_cubin(Arch(10, 7))
    for version in ((13, 4), (13, 5)):
        toolkit = bundled_toolkit(version)
        for suffix in ("", "a", "f"):
            assert toolkit.emits_cubin(Arch(10, 7, suffix))
            assert toolkit.emits_ptx(Arch(10, 7, suffix))
        assert "sm_107" in bundled_rows()[CudaVersion(*version)].nvcc_list_gpu_code


def test_unknown_toolkit_lists_the_known_ones() -> None:
    known = "12.4, 12.6, 12.8, 12.9, 13.0, 13.1, 13.2, 13.3, 13.4, 13.5"
    with pytest.raises(UnknownToolkit, match=re.escape(known)):
        bundled_toolkit((11, 8))


# Every row against the real binaries it was probed from: scripts/probe_toolkits.py's own
# probe, run again on NVIDIA's wheel (pip download --no-deps, one download per wheel for the
# whole session; the probe of one wheel takes about a second).
PROBE_SCRIPT = REPO / "scripts" / "probe_toolkits.py"


def probe_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("probe_toolkits", PROBE_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_rows() -> dict[str, object]:
    """toolkits.yml's rows as written, keyed by their CUDA text ("13.5")."""
    data = bundled_yaml("toolkits.yml")
    assert isinstance(data, dict) and isinstance(data["toolkits"], dict)
    return data["toolkits"]


@pytest.fixture(scope="session")
def nvcc_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's download directory for the toolkit wheels (shared by the tests here)."""
    return tmp_path_factory.mktemp("nvcc-wheels")


def fetched(requirement: str, cache: Path) -> Path:
    """The wheel for ``requirement`` in ``cache``, downloaded once (skip/fail if it cannot)."""
    try:
        wheel: Path = probe_script().download(requirement, cache)
    except (subprocess.CalledProcessError, SystemExit) as exc:
        not_fetched(requirement, str(exc))
    return wheel


@pytest.mark.network
@pytest.mark.parametrize("cuda", sorted(table_rows()))
def test_every_row_is_what_its_wheels_ptxas_says(cuda: str, nvcc_wheels: Path) -> None:
    """Probing the row's wheel again gives the bundled row, field for field (source, PTX ISA,
    the cubins and PTX ptxas accepts, the wheel nvcc's lists)."""
    script = probe_script()
    requirement = script.PACKAGES[cuda]
    fetched(requirement, nvcc_wheels)
    assert script.probe(cuda, requirement, nvcc_wheels) == table_rows()[cuda]


def test_the_probe_script_pins_every_row_and_the_minors_through_13_5() -> None:
    """The script regenerates every row, from the latest patch release of each minor probed."""
    packages = probe_script().PACKAGES
    assert sorted(packages) == sorted(table_rows())
    assert {"13.1", "13.3", "13.4", "13.5"} <= set(packages)
    for cuda, requirement in packages.items():
        assert requirement.split("==")[1].startswith(cuda + ".")
        assert requirement in bundled_rows()[CudaVersion.parse(cuda)].toolkit.source


# (PTX .target, the device's sm): ptxas 13.5 compiles family (f) PTX within its major at or
# above it (sm_100f and sm_103f PTX for sm_107), arch-specific (a) PTX for its own target only
# (with -arch=sm_XYa, the only -arch ptxas takes for a PTX), and refuses across the family
# ("cannot be compiled to different SM-family architecture").
FAMILY_PAIRS = [
    (ptx, device)
    for ptx in ("sm_100", "sm_100f", "sm_103f", "sm_100a", "sm_107f", "sm_107a")
    for device in ("sm_100", "sm_103", "sm_107", "sm_110")
]


@pytest.mark.network
def test_ptxas_13_5_puts_10_7_in_the_10x_family(nvcc_wheels: Path, tmp_path: Path) -> None:
    """The coverage rule's PTX answer for 10.x devices, 10.7 included, is what the real
    ptxas 13.5 accepts: an f image of 10.0 or 10.3 serves 10.7, an a image does not, and
    none crosses into 11.0."""
    from archguard.detect.ptxas import KERNEL, probe_ptxas
    from archguard.user.watch import unpack_tools

    script = probe_script()
    wheel = fetched(script.PACKAGES["13.5"], nvcc_wheels)
    ptxas = unpack_tools(wheel, tmp_path)["ptxas"]
    isa = probe_ptxas(str(ptxas)).isa
    accepted = {}
    for ptx, device in FAMILY_PAIRS:
        source = tmp_path / f"{ptx}.ptx"
        source.write_text(KERNEL.format(isa=isa, target=ptx))
        arch = device + "a" if ptx.endswith("a") else device
        out = tmp_path / f"{ptx}-{arch}.cubin"
        argv = [str(ptxas), f"-arch={arch}", str(source), "-o", str(out)]
        done = subprocess.run(argv, capture_output=True, check=False)
        accepted[ptx, device] = done.returncode == 0
    assert accepted["sm_100f", "sm_107"] and accepted["sm_103f", "sm_107"]
    assert accepted["sm_107a", "sm_107"] and accepted["sm_100a", "sm_100"]
    assert not accepted["sm_100a", "sm_107"] and not accepted["sm_100f", "sm_110"]
    rule = {
        (ptx, device): ptx_runs_on(Arch.from_target(ptx), Arch.from_target(device).cc)
        for ptx, device in FAMILY_PAIRS
    }
    assert accepted == rule


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("12.8", (12, 8)),
        ("cu128", (12, 8)),
        ("13", (13, 0)),
        ("12.8.93", (12, 8)),
        ("cu130", (13, 0)),
    ],
)
def test_cuda_spellings(text: str, version: tuple[int, int]) -> None:
    assert CudaVersion.parse(text) == version


def test_nvcc_version_text() -> None:
    text = "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler"
    assert parse_nvcc_version(text) == (13, 0)
    with pytest.raises(NvccUnusable, match="did not print a CUDA release"):
        parse_nvcc_version("nvcc: command not found")


def test_find_nvcc_order(tmp_path: Path) -> None:
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "nvcc").write_text("")
    assert find_nvcc({"CUDA_HOME": str(home), "CUDA_PATH": "/x"}).how == "CUDA_HOME"
    assert find_nvcc({"CUDA_PATH": str(home)}).how == "CUDA_PATH"
    loc = find_nvcc({}, which=lambda _: str(home / "bin" / "nvcc"))
    assert (loc.how, loc.cuda_home) == ("PATH", str(home))
    with pytest.raises(NvccNotFound, match="does not exist"):
        find_nvcc({"CUDA_HOME": str(tmp_path / "missing")})


def test_no_nvcc_anywhere_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("archguard.detect.nvcc.DEFAULT_CUDA_HOME", "/nonexistent-cuda")
    with pytest.raises(NvccNotFound, match="no nvcc found"):
        find_nvcc({}, which=lambda _: None)


@has_nvcc
def test_live_nvcc_agrees_with_bundled_row() -> None:
    """The real nvcc's --list-gpu-code (plus the a/f rule) equals the bundled row."""
    live = probe_toolkit(find_nvcc({"CUDA_HOME": CUDA_HOME}))
    assert live.version in bundled_rows(), f"add CUDA {live.text} to the bundled table"
    bundled = bundled_toolkit(live.version)
    assert live.cubins == bundled.cubins
    assert {a.plain for a in live.ptx} == {a.plain for a in bundled.ptx}
    assert compare_with_bundled(live) is None


@has_nvcc
def test_live_nvcc_emits_what_the_table_says(tmp_path: Path) -> None:
    """Compile a tiny kernel for an a and an f target the table claims, with the real nvcc."""
    live = probe_toolkit(find_nvcc({"CUDA_HOME": CUDA_HOME}))
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n")
    for name in ("sm_90a", "sm_100f", "sm_120"):
        arch = Arch.from_target(name)
        assert live.emits_cubin(arch)
        proc = subprocess.run(
            [
                str(live.nvcc),
                "-cubin",
                f"-arch={name}",
                str(src),
                "-o",
                str(tmp_path / f"{name}.cubin"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(
        [str(live.nvcc), "-cubin", "-arch=sm_70", str(src), "-o", str(tmp_path / "70.cubin")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0 and not live.emits_cubin(Arch(7, 0))
