"""The other end of the wheel (issue #20): `archguard variant` (wheel-variant metadata from
the binaries as read back, written through variantlib and read back with it) and
`archguard doctor` (for a machine's GPUs, the image each installed package loads).

The example is built once per session (conftest's ``example_noiso``, the full cu130 row;
``example_80``, one arch with stubs off); the arch-specific and record-less wheels are tiny
torch-free kernels. GPUs are named with ``--device`` (no GPU here); ``doctor --path DIR``
reads a ``pip install --target DIR``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from realtools import (
    EXAMPLE_80,
    HOPPER,
    Built,
    build_env,
    extension,
    module_c,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    only_wheel,
    pip_wheel,
    pyproject,
    run_main,
    setup_py,
    torch_cuda,
    wheel_so_targets,
)

pytestmark = [pytest.mark.slow, needs_nvcc, needs_cuda_torch, needs_cuobjdump]


def variant_properties(wheel: Path) -> list[str]:
    """The properties of a variant wheel, as variantlib itself reads its variant.json."""
    from variantlib.variant_dist_info import VariantDistInfo

    label = wheel.name[: -len(".whl")].rsplit("-", 1)[1]
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/variant.json")]
        info = VariantDistInfo(zf.read(name), expected_label=label)
    return sorted(p.to_str() for p in info.variant_desc.properties)


def test_variant_properties_are_what_cuobjdump_finds(example_noiso: Built, tmp_path: Path) -> None:
    proc, out = example_noiso
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheel = only_wheel(out)
    found = wheel_so_targets(wheel, tmp_path)
    made = run_main("variant", str(wheel), "-o", str(tmp_path / "v"), "--format", "json")
    assert made.returncode == 0, made.stdout + made.stderr
    (entry,) = json.loads(made.stdout)["wheels"]
    variant = Path(entry["variant"])
    expected = [f"nvidia :: cuda_version_lower_bound :: {torch_cuda()}"] + [
        f"nvidia :: sm_arch :: {n.split('_')[1]}_{'real' if n.startswith('sm_') else 'virtual'}"
        for n in found
    ]
    assert variant_properties(variant) == sorted(expected)
    # the same files plus variant.json, and pip still reads it as a wheel of the same name
    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(variant) as b:
        assert set(b.namelist()) - set(a.namelist()) == {
            n for n in b.namelist() if n.endswith(".dist-info/variant.json")
        }
    assert any("Thor 11.0 via compute_90" in n for n in entry["notes"])


def hopper_wheel(tmp: Path, nvcc: list[str], record: bool = True) -> Path:
    root = tmp / "hoppy"
    root.mkdir(parents=True)
    shutil.copy(HOPPER / "strict.cu", root / "strict.cu")
    (root / "mod.c").write_text(module_c("_strict"))
    (root / "setup.py").write_text(
        setup_py("hoppy", [extension("_strict", ["mod.c", "strict.cu"], nvcc)])
    )
    (root / "pyproject.toml").write_text(pyproject())
    env = build_env(**({"ARCHGUARD_ENABLE": "1"} if record else {}))
    proc = pip_wheel(root, tmp / "out", env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return only_wheel(tmp / "out")


@pytest.fixture(scope="module")
def sm90a_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sm_90a-only wheel (with its record), built once for the two tests that read it
    (each writes only beside it)."""
    return hopper_wheel(
        tmp_path_factory.mktemp("sm90a"), ["-gencode", "arch=compute_90a,code=sm_90a"]
    )


def test_an_sm_90a_only_wheel_gets_the_explicit_note(sm90a_wheel: Path, tmp_path: Path) -> None:
    wheel = sm90a_wheel
    made = run_main("variant", str(wheel), "-o", str(tmp_path / "v"))
    assert made.returncode == 0, made.stdout + made.stderr
    assert "holds sm_90a: the provider's vocabulary has no a/f values" in made.stdout
    assert "no sm_arch property: a variant installer selects this wheel on any GPU" in made.stdout
    (variant,) = (tmp_path / "v").glob("*.whl")
    assert variant_properties(variant) == [f"nvidia :: cuda_version_lower_bound :: {torch_cuda()}"]


def test_a_wheel_whose_binaries_disagree_with_its_record_is_refused(
    sm90a_wheel: Path, tmp_path: Path
) -> None:
    wheel = sm90a_wheel
    forged = tmp_path / "forged" / wheel.name
    forged.parent.mkdir()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(forged, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("archguard.json"):
                data = data.replace(b'"sm_90a"', b'"sm_100a"')
            dst.writestr(item, data)
    made = run_main("variant", str(forged), "-o", str(tmp_path / "v"))
    assert made.returncode == 1
    assert made.stdout.startswith("REFUSED") and "its record says" in made.stdout
    assert not (tmp_path / "v").exists() or not list((tmp_path / "v").glob("*.whl"))


def install(wheel: Path, target: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    return target


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return run_main("doctor", "--no-torch", *args, env=build_env())


def test_doctor_names_the_image_each_gpu_loads_and_its_stubs(
    example_noiso: Built, tmp_path: Path
) -> None:
    _, out = example_noiso
    site = install(only_wheel(out), tmp_path / "site")
    ada = doctor("--path", str(site), "--device", "8.9")
    assert ada.returncode == 0, ada.stdout + ada.stderr
    assert "archguard-example: archguard_example/_C" in ada.stdout
    assert "native (sm_86 cubin)" in ada.stdout
    assert (
        "stubs in sm_86, the image 8.9 loads:" in ada.stdout
        and "fp8_roundtrip_kernel" in ada.stdout
    )
    assert "(trap)" in ada.stdout
    thor = doctor("--path", str(site), "--device", "11.0", "--format", "json")
    data = json.loads(thor.stdout)
    assert data["schema"] == "archguard.doctor/1" and thor.returncode == 0
    (finding,) = data["findings"]
    assert (finding["tier"], finding["via"]) == ("jit-only", "compute_90")
    pascal = doctor("--path", str(site), "--device", "6.1")
    assert pascal.returncode == 1
    assert (
        "NOTHING for 6.1" in pascal.stdout
        and "no image for archguard-example on 6.1" in pascal.stdout
    )


def test_doctor_reads_a_wheel_built_without_archguard_from_its_binaries(tmp_path: Path) -> None:
    wheel = hopper_wheel(tmp_path, ["-gencode", "arch=compute_90a,code=sm_90a"], record=False)
    site = install(wheel, tmp_path / "site")
    proc = doctor("--path", str(site), "--device", "9.0", "--device", "8.0", "--format", "json")
    data = json.loads(proc.stdout)
    (package,) = data["packages"]
    assert package["name"] == "hoppy" and package["binaries"][0]["source"] == "cuobjdump"
    assert package["binaries"][0]["targets"] == ["sm_90a"]
    tiers = {f["gpu"]: f["tier"] for f in data["findings"]}
    assert tiers == {"9.0": "native", "8.0": "nothing"} and proc.returncode == 1


def test_doctor_names_the_fp8_trap_from_the_lint_where_the_build_did_not_disassemble(
    example_80: Built, tmp_path: Path
) -> None:
    """A farm without nvdisasm (here ARCHGUARD_STUBS=0, the same record): the wheel has no
    stub classification, and doctor takes the build's recorded lint hazards for the image the
    GPU loads, and says that is what it used. The example at 8.0 with ARCHGUARD_STUBS=0 is
    conftest's example_80 (shared with tests/test_parallel_build.py)."""
    assert EXAMPLE_80["ARCHGUARD_ARCH_LIST"] == "8.0" and EXAMPLE_80["ARCHGUARD_STUBS"] == "0"
    proc, out = example_80
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert "stubs: off (ARCHGUARD_STUBS)" in log
    wheel = only_wheel(out)
    site = install(wheel, tmp_path / "site")
    ada = doctor("--path", str(site), "--device", "8.9")
    assert ada.returncode == 0, ada.stdout + ada.stderr
    assert "native (sm_80 cubin)" in ada.stdout
    assert "stubs in" not in ada.stdout  # nothing was disassembled
    assert (
        "guarded code compiled out of sm_80, the image 8.9 loads (from the build's lint; its "
        "kernels were not disassembled): src/archguard_example/csrc/fp8.cu:" in ada.stdout
    )
    assert "(trap in sm_80; fix: add 8.9)" in ada.stdout
    data = json.loads(doctor("--path", str(site), "--device", "8.9", "--format", "json").stdout)
    (finding,) = data["findings"]
    assert finding["stubs_from"] == "lint" and finding["stubs"] == []
    # a device whose own cubin is in the wheel: nothing from the lint
    ampere = json.loads(doctor("--path", str(site), "--device", "8.0", "--format", "json").stdout)
    assert [f["lint"] for f in ampere["findings"]] == [[]]


def sm90a_package(root: Path) -> Path:
    """A package that never heard of archguard, with a CUTLASS-style sm_90a-only kernel."""
    root.mkdir(parents=True)
    shutil.copy(HOPPER / "sm90a_only.cu", root / "sm90a_only.cu")
    (root / "mod.c").write_text(module_c("_sm90a"))
    ext = extension("_sm90a", ["mod.c", "sm90a_only.cu"])
    (root / "setup.py").write_text(setup_py("sm90a-kernel", [ext]))
    return root


def test_the_build_lint_names_the_sm_90a_trap_and_the_fix_and_verify_agrees(
    tmp_path: Path,
) -> None:
    """Built with the cu130 row, H100 loads the plain sm_90 cubin, where the kernel is the
    trap: the in-build lint names 9.0 and the fix 9.0a, and the disassembly finds the trap in
    sm_90. Built with 9.0a (an explicit list keeps the a target), the lint is silent and the
    disassembly finds the kernel real in the image 9.0 loads."""
    src = sm90a_package(tmp_path / "src")
    plain = pip_wheel(src, tmp_path / "plain", env=build_env(ARCHGUARD_ENABLE="1"))
    log = plain.stdout + plain.stderr
    assert plain.returncode == 0, log[-4000:]
    assert (
        "9.0 (H100, H200, GH200) loads sm_90, which compiles it out (trap instead); torch runs "
        "there; fix: add 9.0a to the list (policy row cu130" in log
    )
    assert "lint: extension _sm90a: result: FINDINGS (1 stub hazard, 0 #error reached)" in log
    stubs = run_main("verify", "--stubs", str(only_wheel(tmp_path / "plain")), env=build_env())
    # the disassembly agrees: no image of this wheel runs the kernel, sm_90 included
    assert "sm90a_scale(float*, int): a stub in every image" in stubs.stdout, stubs.stdout

    specific = pip_wheel(
        src, tmp_path / "a", env=build_env(ARCHGUARD_ENABLE="1", ARCHGUARD_ARCH_LIST="9.0a")
    )
    log = specific.stdout + specific.stderr
    assert specific.returncode == 0, log[-4000:]
    assert "lint: extension _sm90a: no stub hazard in 1 files (" in log
    wheel = only_wheel(tmp_path / "a")
    # 9.0a keeps the a target, with the policy's PTX net as plain compute_90 beside it
    assert wheel_so_targets(wheel, tmp_path) == ["sm_90a", "compute_90"]
    agreed = run_main("verify", "--stubs", "--fail-on-stubs", str(wheel), env=build_env())
    assert agreed.returncode == 0, agreed.stdout + agreed.stderr
    assert "sm90a_scale(float*, int): real in sm_90a" in agreed.stdout
