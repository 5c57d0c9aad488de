"""The wheel's contract against real torch builds (issue 31): three packages built on torch
2.13.0+cu130 with ``archguard wheel --repair`` (one arch, ARCHGUARD_ARCH_LIST=8.0), each
prediction of ``archguard abi`` checked by a real import under torch 2.13.0 and 2.14.1 (both
the CUDA builds), and what pip and ``doctor`` make of them beside torch 2.14.1:

- dlpack_ext calls ``at::toDLPackNonOwning(const Tensor&, DLTensor*)``, which torch 2.14 gave a
  ``bool read_only`` parameter: predicted to fail on 2.14.1, and it does;
- stable_ext uses only torch's stable C ABI (``STABLE_TORCH_LIBRARY``, target 2.10) and the
  limited Python API: ``+cu130``, ``torch>=2.10``, abi3, and it imports on 2.14.1;
- the example package: predicted to import on both, and it does.

The second torch is a Python whose torch is 2.14.1+cu130 (``AG_TEST_OTHER_TORCH``;
scripts/setup_env.sh makes it with ``pip install --isolated torch==2.14.1``)."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from realtools import (
    REPO,
    build_env,
    cli,
    copy_tree,
    needs_cu130,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    torch_dir,
)

OTHER = os.environ.get("AG_TEST_OTHER_TORCH", "")
needs_other_torch = pytest.mark.skipif(
    not OTHER, reason="AG_TEST_OTHER_TORCH unset: a Python with torch 2.14.1 (scripts/test.sh)"
)
pytestmark = [
    pytest.mark.slow,
    needs_nvcc,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_cu130,
    needs_other_torch,
]
PACKAGES = {
    "dlpack-ext": REPO / "tests" / "packages" / "dlpack_ext",
    "stable-ext": REPO / "tests" / "packages" / "stable_ext",
    "archguard-example": REPO / "example_package",
}
MODULES = {
    "dlpack-ext": "dlpack_ext._C",
    "stable-ext": "stable_ext._C",
    "archguard-example": "archguard_example._C",
}
GONE = "_ZN2at17toDLPackNonOwningERKNS_6TensorEP8DLTensor"


@functools.cache
def other_torch_dir() -> Path:
    """The other torch's directory (its Python imports torch: seconds), asked once."""
    out = subprocess.run(
        [
            OTHER,
            "-c",
            "import torch, os; print(torch.__version__, os.path.dirname(torch.__file__))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0].startswith("2.14."), f"AG_TEST_OTHER_TORCH's torch is {out[0]}, not 2.14"
    return Path(out[1])


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The three packages through `archguard wheel --repair`, into one wheelhouse; its
    stdout."""
    root = tmp_path_factory.mktemp("abi-cell")
    sources = [copy_tree(src, root / "src" / src.name) for src in PACKAGES.values()]
    env = build_env(ARCHGUARD_ARCH_LIST="8.0")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    proc = cli("wheel", *map(str, sources), "--repair", "-w", str(root / "wheels"), env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    return root / "wheels", proc.stdout


def wheel_of(house: Path, name: str) -> Path:
    (wheel,) = house.glob(f"{name.replace('-', '_')}-*.whl")
    return wheel


def imports(python: str, site: Path, module: str) -> subprocess.CompletedProcess[str]:
    """A real import of ``module`` (installed in ``site``) under ``python``'s torch."""
    return subprocess.run(
        [python, "-c", f"import torch, {module}; print(torch.__version__)"],
        capture_output=True,
        text=True,
        env={**build_env(), "PYTHONPATH": str(site)},
        check=False,
    )


def install(wheel: Path, site: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--isolated",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    return site


def test_each_prediction_is_what_a_real_import_does(
    wheelhouse: tuple[Path, str], tmp_path: Path
) -> None:
    house, _ = wheelhouse
    other = other_torch_dir()
    for name, module in MODULES.items():
        wheel = wheel_of(house, name)
        proc = cli(
            "abi",
            str(wheel),
            "--torch",
            str(torch_dir()),
            "--torch",
            str(other),
            "--format",
            "json",
        )
        assert proc.returncode in (0, 1), proc.stderr
        (binary,) = json.loads(proc.stdout)["binaries"]
        predicted = {v["torch"][:4]: v["imports"] for v in binary["verdicts"]}
        site = install(wheel, tmp_path / name)
        real = {
            "2.13": imports(sys.executable, site, module),
            "2.14": imports(OTHER, site, module),
        }
        assert {k: p.returncode == 0 for k, p in real.items()} == predicted, (name, real)
        if name == "dlpack-ext":
            assert predicted == {"2.13": True, "2.14": False}
            (missing,) = binary["verdicts"][1]["missing"]
            assert missing == {
                "symbol": GONE,
                "demangled": "at::toDLPackNonOwning(at::Tensor const&, DLTensor*)",
            }
            assert f"undefined symbol: {GONE}" in real["2.14"].stderr
            assert binary["kind"] == "c++"
        else:
            assert predicted == {"2.13": True, "2.14": True}, name
    text = cli("abi", str(wheel_of(house, "dlpack-ext")), "--torch", str(other)).stdout
    assert (
        "WILL NOT IMPORT: undefined symbol at::toDLPackNonOwning(at::Tensor const&, DLTensor*)"
        in text
    )


def metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return zf.read(name).decode()


def test_labels_pins_and_manylinux_per_cell(wheelhouse: tuple[Path, str]) -> None:
    house, out = wheelhouse
    for name in ("dlpack-ext", "archguard-example"):
        wheel = wheel_of(house, name)
        assert "+cu130torch2.13-cp" in wheel.name, wheel.name
        assert "Requires-Dist: torch>=2.13,<2.14" in metadata(wheel)
    stable = wheel_of(house, "stable-ext")
    assert "+cu130-cp310-abi3-" in stable.name, stable.name
    assert "Requires-Dist: torch>=2.10" in metadata(stable)
    assert "serves torch>=2.10 on Python>=3.10 (stable ABI, abi3)" in out
    for wheel in house.glob("*.whl"):
        platform = re.search(r"manylinux_2_(\d+)_x86_64\.whl$", wheel.name)
        assert platform and int(platform[1]) >= 28, wheel.name
        with zipfile.ZipFile(wheel) as zf:
            inside = [Path(n).name for n in zf.namelist()]
        assert not [n for n in inside if re.match(r"lib(torch|c10|cudart|cuda)\b", n)], inside
        verified = cli("verify", str(wheel), env=build_env())
        assert verified.returncode == 0, verified.stdout
        assert "  binds to   torch's " in verified.stdout  # what it binds to, shown by verify
    assert "not grafted: libc10.so" in out and "libcudart.so.13" in out


def test_pip_refuses_the_cxx_abi_wheel_beside_torch_2_14(wheelhouse: tuple[Path, str]) -> None:
    house, _ = wheelhouse
    pip = [OTHER, "-m", "pip", "install", "--isolated", "--dry-run", "--no-index"]
    refused = subprocess.run(
        [*pip, "--find-links", str(house), "dlpack-ext"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode != 0 and "ResolutionImpossible" in refused.stderr, refused.stderr
    assert "torch<2.14" in refused.stdout + refused.stderr
    stable = subprocess.run(
        [*pip, "--find-links", str(house), "stable-ext"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert stable.returncode == 0 and "Would install stable-ext-1.0+cu130" in stable.stdout


def test_doctor_names_the_undefined_symbol_and_nothing_else(
    wheelhouse: tuple[Path, str], tmp_path: Path
) -> None:
    house, _ = wheelhouse
    site = tmp_path / "site"
    for name in PACKAGES:
        install(wheel_of(house, name), site)
    packages = other_torch_dir().parent
    proc = cli(
        "doctor",
        "--no-torch",
        "--device",
        "8.0",
        "--path",
        str(site),
        "--path",
        str(packages),
        env=build_env(),
    )
    assert proc.returncode == 1, proc.stdout
    lines = [
        line
        for line in proc.stdout.splitlines()
        if line.startswith("  ") and "will not import" in line
    ]
    (line,) = [line for line in lines if line.startswith("  dlpack-ext:")]
    assert (
        "will not import with torch 2.14.1+cu130: undefined symbol at::toDLPackNonOwning"
        "(at::Tensor const&, DLTensor*); install its wheel built for this cell (+cu130torch2.14)"
    ) in line
    assert not [line for line in lines if not line.startswith("  dlpack-ext:")]
    assert "  stable-ext: stable_ext/_C.abi3.so: imports: torch's stable C ABI" in proc.stdout
    assert re.search(r"^  archguard-example: .*: imports: every torch symbol", proc.stdout, re.M)
    assert "will not import: dlpack-ext)" in proc.stdout.splitlines()[-1]


def test_a_false_manylinux2014_tag_is_dropped_not_kept_beside_the_true_one(
    wheelhouse: tuple[Path, str], tmp_path: Path
) -> None:
    """A torch extension whose package forces manylinux2014 (glibc 2.17) although it links
    torch (manylinux_2_28): auditwheel alone keeps that tag beside the true one; --repair
    retags it first and says why."""
    from archguard.binaries.repair import repair

    house, _ = wheelhouse
    forced = tmp_path / "forced"
    forced.mkdir()
    source = wheel_of(house, "stable-ext")
    plain = forced / source.name
    plain.write_bytes(source.read_bytes())
    subprocess.run(
        [
            sys.executable,
            "-m",
            "wheel",
            "tags",
            "--platform-tag",
            "manylinux2014_x86_64",
            "--remove",
            str(plain),
        ],
        check=True,
        capture_output=True,
    )
    (claimed,) = forced.glob("*manylinux2014_x86_64.whl")
    repaired = repair(claimed, tmp_path / "work")
    assert "manylinux2014" not in repaired.wheel.name, repaired.wheel.name
    assert repaired.wheel.name.endswith(f"-{repaired.platform}.whl")
    assert repaired.retagged.startswith("its own tag manylinux2014_x86_64 promised glibc 2.17")
