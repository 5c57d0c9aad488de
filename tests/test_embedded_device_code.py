"""Device code wherever a package puts it (issue 48): fatbins and cubins embedded as data in an
extension's ``.rodata`` (a C array, an ``.incbin``; loaded with ``cuModuleLoadData``), and
``.fatbin``/``.cubin``/``.ptx`` files in a wheel. nvcc 13.0's real output, read back by a real
cuobjdump, verified against a list like any cubin; a wheel with none of them is still refused.
The scan itself is checked against adversarial bytes (a truncated header, a size past the end,
thousands of fake magics, headers whose entries overlap) with no tool at all."""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from archguard.detect.cuobjdump import read_binary, read_entries
from archguard.detect.fatbin import FATBIN_MAGIC, Span, find_device_code, ptx_target
from archguard.errors import BinaryReadError
from realtools import (
    REPO,
    build_env,
    cli,
    copy_tree,
    cuobjdump,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    nvcc,
    only_wheel,
    run_main,
    tool_path,
    wheel_record,
)

KERNEL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n'


# --- the scan alone: fatbins laid out as nvcc writes them (module docstring of fatbin.py) ---


def entry(kind: int, payload: bytes, header: int = 64) -> bytes:
    return struct.pack("<HHIQ", kind, 0x0101, header, len(payload)) + bytes(header - 16) + payload


def fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


ONE = fatbin(entry(2, b"\x11" * 40), entry(1, b".target sm_80\n\0\0"))


def test_a_fatbin_is_cut_whole_with_its_entries_in_order() -> None:
    data = b"\0" * 100 + ONE + b"\xff" * 7 + ONE
    spans = find_device_code(data, "x.so")
    assert spans == [
        Span("fatbin", 100, len(ONE), ("elf", "ptx")),
        Span("fatbin", 107 + len(ONE), len(ONE), ("elf", "ptx")),
    ]
    assert data[100 : 100 + len(ONE)] == ONE


def test_a_truncated_header_and_a_size_past_the_end_are_not_fatbins() -> None:
    past = bytearray(ONE)
    struct.pack_into("<Q", past, 8, len(ONE) * 10)  # its fat size runs past the file
    assert find_device_code(bytes(past), "x") == []
    assert find_device_code(ONE[:-1], "x") == []  # the last entry cut short
    assert find_device_code(b"\0" * 8 + FATBIN_MAGIC + b"\x01\x00", "x") == []  # a header cut
    # neither hides a real one after it
    data = bytes(past[:40]) + ONE + ONE[:30]
    assert [s.offset for s in find_device_code(data, "x")] == [40]


def test_thousands_of_fake_magics_are_passed_over_in_linear_time() -> None:
    rng = random.Random(48)
    fakes = b"".join(FATBIN_MAGIC + rng.randbytes(rng.randrange(0, 40)) for _ in range(20_000))
    data = fakes + ONE + fakes
    started = time.monotonic()
    spans = find_device_code(data, "x")
    took = time.monotonic() - started
    assert [s.offset for s in spans] == [len(fakes)]
    assert took < 5, took  # ~0.1 s here; a quadratic scan would take minutes


def test_headers_whose_entries_overlap_are_refused_not_walked_forever() -> None:
    """4,000 fake headers whose first entry jumps to one shared run of 4,000 valid entries,
    each claiming a size that ends 8 bytes short of the run's end: a walk per fake would be
    quadratic (16 million entries); the budget stops it, with an error, at once."""
    count, fake, tiny = 4000, 80, 64
    start = count * fake  # where the shared run begins
    data = bytearray(start + count * tiny)
    for i in range(count):
        at = i * fake
        jump = start - (at + 16 + 64)  # the first entry's payload reaches the shared run
        struct.pack_into("<IHHQ", data, at, 0xBA55ED50, 1, 16, len(data) - at - 16 - 8)
        struct.pack_into("<HHIQ", data, at + 16, 8, 0x0101, 64, jump)
    for i in range(count):
        struct.pack_into("<HHIQ", data, start + i * tiny, 8, 0x0101, 64, 0)
    started = time.monotonic()
    with pytest.raises(BinaryReadError, match="more fatbin-like headers than its size allows"):
        find_device_code(bytes(data), "evil.so")
    assert time.monotonic() - started < 5


def test_device_code_inside_a_fatbin_is_its_own_never_found_twice() -> None:
    outer = fatbin(entry(2, ONE + b"\0" * 8))
    spans = find_device_code(b"\0" * 16 + outer, "x")
    assert spans == [Span("fatbin", 16, len(outer), ("elf",))]


def test_cuobjdumps_own_section_is_not_scanned() -> None:
    data = b"\0" * 64 + ONE + ONE
    (span,) = find_device_code(data, "x", [(64, 64 + len(ONE))])
    assert span.offset == 64 + len(ONE)
    # a header outside the section whose span reaches into it is no fatbin
    assert find_device_code(b"\0" * 8 + ONE, "x", [(20, 30)]) == []


def test_a_ptx_modules_target() -> None:
    assert ptx_target("//\n.version 9.0\n.target sm_80\n.address_size 64\n") == "sm_80"
    assert ptx_target(".version 9.0\n  .target sm_100f, debug\n") == "sm_100f"
    assert ptx_target("// .target sm_80 in a comment\n") is None


# --- real nvcc output, real cuobjdump ---


def run_nvcc(tmp: Path, out: str, *flags: str, source: str = KERNEL) -> Path:
    src = tmp / "k.cu"
    src.write_text(source)
    proc = subprocess.run(
        [tool_path(nvcc(), "nvcc"), *flags, str(src), "-o", str(tmp / out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return tmp / out


@pytest.fixture(scope="module")
def device(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """nvcc's -fatbin, -cubin and -ptx output for one kernel."""
    tmp = tmp_path_factory.mktemp("device")
    return {
        "sm80.fatbin": run_nvcc(tmp, "sm80.fatbin", "-fatbin", "-arch=sm_80"),
        "f.fatbin": run_nvcc(
            tmp,
            "f.fatbin",
            "-fatbin",
            "-gencode=arch=compute_100f,code=sm_100f",
            "-gencode=arch=compute_90,code=compute_90",
        ),
        "sm90a.cubin": run_nvcc(tmp, "sm90a.cubin", "-cubin", "-arch=sm_90a"),
        "sm100f.cubin": run_nvcc(tmp, "sm100f.cubin", "-cubin", "-arch=sm_100f"),
        "sm80.ptx": run_nvcc(tmp, "sm80.ptx", "-ptx", "-arch=compute_80"),
    }


def c_array(name: str, data: bytes) -> str:
    """What bin2c or ``xxd -i`` writes: the bytes as a C array (in .rodata)."""
    body = ",".join(str(b) for b in data)
    return f"const unsigned char {name}[] __attribute__((aligned(8))) = {{{body}}};\n"


def incbin(name: str, path: Path) -> str:
    return (
        f'__asm__(".section .rodata\\n.balign 16\\n.globl {name}\\n{name}:\\n'
        f'.incbin \\"{path}\\"\\n.previous\\n");\n'
    )


def host_module(tmp: Path, name: str, source: str, *objects: Path) -> Path:
    """A host shared object built by the C compiler (no nvcc: no .nv_fatbin)."""
    c = tmp / f"{name}.c"
    c.write_text(source + "int answer(void) { return 42; }\n")
    so = tmp / f"{name}.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", str(c), *map(str, objects), "-o", str(so)], check=True
    )
    return so


@needs_nvcc
@needs_cuobjdump
def test_fatbins_and_a_cubin_embedded_as_data_are_found_where_cuobjdump_sees_nothing(
    tmp_path: Path, device: dict[str, Path]
) -> None:
    """The issue's package: fatbins in .rodata (one .incbin, one C array) and a cubin."""
    f = device["f.fatbin"].read_bytes()
    cubin = device["sm90a.cubin"].read_bytes()
    source = incbin("fb_a", device["sm80.fatbin"]) + c_array("fb_f", f) + c_array("cb", cubin)
    so = host_module(tmp_path, "_C_cuda", source)
    tool = tool_path(cuobjdump(), "cuobjdump")
    alone = subprocess.run(
        [tool, "--list-elf", str(so)], capture_output=True, text=True, check=False
    )
    assert "does not contain device code" in alone.stderr  # the trap, observed
    assert read_entries(so, tool) is None

    found = read_binary(so, tool, "pkg/_C_cuda.so")
    assert found.targets is not None
    assert found.targets.names() == ["sm_80", "sm_90a", "sm_100f", "compute_80", "compute_90"]
    data = so.read_bytes()
    at_a, at_f, at_cubin = (
        data.find(device["sm80.fatbin"].read_bytes()),
        data.find(f),
        data.find(cubin),
    )
    assert min(at_a, at_f, at_cubin) > 0
    where = {(i.name, i.where) for i in found.images}
    assert where == {
        ("sm_80", f"embedded fatbin at offset {at_a:#x} in pkg/_C_cuda.so's .rodata"),
        ("compute_80", f"embedded fatbin at offset {at_a:#x} in pkg/_C_cuda.so's .rodata"),
        ("sm_100f", f"embedded fatbin at offset {at_f:#x} in pkg/_C_cuda.so's .rodata"),
        ("compute_90", f"embedded fatbin at offset {at_f:#x} in pkg/_C_cuda.so's .rodata"),
        ("sm_90a", f"embedded cubin at offset {at_cubin:#x} in pkg/_C_cuda.so's .rodata"),
    }
    assert {i.place for i in found.images} == {"embedded"}


@needs_nvcc
@needs_cuobjdump
def test_an_nvcc_module_with_a_fatbin_embedded_too_reads_each_image_once(
    tmp_path: Path, device: dict[str, Path]
) -> None:
    tool = tool_path(cuobjdump(), "cuobjdump")
    obj = tmp_path / "blob.o"
    (tmp_path / "blob.c").write_text(incbin("fb", device["f.fatbin"]))
    subprocess.run(["cc", "-c", "-fPIC", str(tmp_path / "blob.c"), "-o", str(obj)], check=True)
    so = run_nvcc(tmp_path, "mixed.so", "-shared", "-Xcompiler", "-fPIC", "-arch=sm_80", str(obj))
    found = read_binary(so, tool)
    section = read_entries(so, tool)
    assert section is not None
    in_section = [i for i in found.images if i.place == "section"]
    assert len(in_section) == len(section)  # the .nv_fatbin's own, not found again
    assert {i.where for i in in_section} == {"the .nv_fatbin section of mixed.so"}
    embedded = [(i.name, i.place) for i in found.images if i.place != "section"]
    assert embedded == [("sm_100f", "embedded"), ("compute_90", "embedded")]
    assert found.targets is not None
    assert found.targets.names() == ["sm_80", "sm_100f", "compute_80", "compute_90"]


@needs_nvcc
@needs_cuobjdump
def test_standalone_fatbin_cubin_and_ptx_files(tmp_path: Path, device: dict[str, Path]) -> None:
    tool = tool_path(cuobjdump(), "cuobjdump")

    def read(name: str) -> list[tuple[str, str]]:
        return [(i.name, i.where) for i in read_binary(device[name], tool, f"pkg/{name}").images]

    assert read("sm80.fatbin") == [
        ("sm_80", "standalone file pkg/sm80.fatbin"),
        ("compute_80", "standalone file pkg/sm80.fatbin"),
    ]
    assert read("sm90a.cubin") == [("sm_90a", "standalone file pkg/sm90a.cubin")]
    # cuobjdump lists an sm_100f cubin as sm_100; its ptxas note keeps the f
    listed = subprocess.run(
        [tool, "--list-elf", str(device["sm100f.cubin"])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".sm_100.cubin" in listed
    assert read("sm100f.cubin") == [("sm_100f", "standalone file pkg/sm100f.cubin")]
    assert read("sm80.ptx") == [("compute_80", "standalone file pkg/sm80.ptx")]
    two = tmp_path / "two.fatbin"  # two fatbins in one file, each named by its offset
    two.write_bytes(device["sm80.fatbin"].read_bytes() + device["f.fatbin"].read_bytes())
    places = [i.where for i in read_binary(two, tool).images]
    second = device["sm80.fatbin"].stat().st_size
    assert (
        places
        == ["fatbin at offset 0x0 in standalone file two.fatbin"] * 2
        + [f"fatbin at offset {second:#x} in standalone file two.fatbin"] * 2
    )


@needs_cuobjdump
def test_files_named_as_device_code_that_hold_none_are_errors(tmp_path: Path) -> None:
    tool = tool_path(cuobjdump(), "cuobjdump")
    (tmp_path / "k.fatbin").write_bytes(b"not a fatbin" * 10)
    (tmp_path / "k.ptx").write_text("// no target\n.version 9.0\n")
    with pytest.raises(BinaryReadError, match="holds no device code archguard can find"):
        read_binary(tmp_path / "k.fatbin", tool)
    with pytest.raises(BinaryReadError, match=r"no `.target sm_XY` line"):
        read_binary(tmp_path / "k.ptx", tool)


@needs_nvcc
@needs_cuobjdump
def test_bytes_that_look_like_a_cubin_but_are_not_one_are_an_error_naming_the_offset(
    tmp_path: Path, device: dict[str, Path]
) -> None:
    fake = bytearray(device["sm90a.cubin"].read_bytes())
    fake[64:-512] = bytes(len(fake) - 576)  # its header and section table, nothing else
    so = host_module(tmp_path, "fake", c_array("cb", bytes(fake)))
    at = so.read_bytes().find(bytes(fake[:64]))
    with pytest.raises(BinaryReadError, match=f"at offset {at:#x} in fake.so"):
        read_binary(so, tool_path(cuobjdump(), "cuobjdump"))


# --- verify on wheels ---

RECORD = {
    "schema": "archguard.resolution/2",
    "effective": "8.0+PTX",
    "cuda": {"tag": "cu130", "version": "13.0"},
    "torch": {"version": "2.13.0+cu130"},
    "targets": {"cubins": ["sm_80"], "ptx": ["compute_80"]},
}


def make_wheel(path: Path, members: dict[str, bytes], record: bool = True) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("pkg/__init__.py", "")
        if record:
            zf.writestr("pkg-1.0.dist-info/archguard.json", json.dumps(RECORD))
    return path


def verify(*args: str) -> subprocess.CompletedProcess[str]:
    return run_main("verify", *args, env=build_env())


@needs_nvcc
@needs_cuobjdump
def test_a_wheel_of_embedded_and_standalone_device_code_is_verified_saying_where(
    tmp_path: Path, device: dict[str, Path]
) -> None:
    source = incbin("fb_a", device["sm80.fatbin"]) + c_array(
        "fb_b", device["sm80.fatbin"].read_bytes()
    )
    so = host_module(tmp_path, "_C_cuda", source)
    wheel = make_wheel(
        tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl",
        {
            "pkg/_C_cuda.so": so.read_bytes(),
            "pkg/kernels.fatbin": device["sm80.fatbin"].read_bytes(),
            "pkg/kernels.ptx": device["sm80.ptx"].read_bytes(),
        },
    )
    proc = verify(str(wheel))
    assert proc.returncode == 0, proc.stdout
    assert "result: OK (2 CUDA binaries checked, 0 with differences)" in proc.stdout
    assert "in pkg/_C_cuda.so's .rodata: sm_80 compute_80" in proc.stdout
    assert f"{wheel.name}!pkg/{{kernels.fatbin,kernels.ptx}}\n" in proc.stdout
    assert "  from       standalone file pkg/kernels.fatbin: sm_80 compute_80\n" in proc.stdout
    assert "  from       standalone file pkg/kernels.ptx: compute_80\n" in proc.stdout
    data = json.loads(verify(str(wheel), "--format", "json").stdout)
    group = data["binaries"][1]
    assert group["ok"] and group["found"] == ["sm_80", "compute_80"]
    assert group["images"][-1] == {
        "image": "compute_80",
        "place": "standalone",
        "where": "standalone file pkg/kernels.ptx",
    }
    # the files of a folder are one binary: a .ptx alone lacks the list's cubin
    (tmp_path / "lone").mkdir()
    lone = make_wheel(
        tmp_path / "lone" / wheel.name, {"pkg/kernels.ptx": device["sm80.ptx"].read_bytes()}
    )
    proc = verify(str(lone))
    assert proc.returncode == 1
    assert f"{lone.name}!pkg/kernels.ptx" in proc.stdout and "MISSING    sm_80" in proc.stdout


@needs_nvcc
@needs_cuobjdump
def test_two_wheels_with_the_same_member_are_each_read_as_themselves(
    tmp_path: Path, device: dict[str, Path]
) -> None:
    """Each wheel's members are written to a folder of its own before any is read."""
    wheels = []
    for name in ("sm80.fatbin", "f.fatbin"):
        so = host_module(tmp_path, name.split(".")[0], c_array("fb", device[name].read_bytes()))
        wheel = tmp_path / name.split(".")[0] / "pkg-1.0-py3-none-any.whl"
        wheel.parent.mkdir()
        wheels.append(str(make_wheel(wheel, {"pkg/_C.so": so.read_bytes()})))
    data = json.loads(verify(*wheels, "--format", "json").stdout)
    assert [x["found"] for x in data["binaries"]] == [
        ["sm_80", "compute_80"],
        ["sm_100f", "compute_90"],
    ]


@needs_cuobjdump
def test_a_wheel_with_no_device_code_anywhere_is_still_refused(tmp_path: Path) -> None:
    """A CPU-only extension (its data full of fatbin magics, none a fatbin) and no device
    code file: no binary with CUDA device code, as before."""
    so = host_module(tmp_path, "_C", c_array("fakes", (FATBIN_MAGIC + b"\x01\x00") * 500))
    wheel = make_wheel(
        tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl",
        {"pkg/_C.so": so.read_bytes(), "pkg/kernels.txt": FATBIN_MAGIC * 100},
    )
    proc = verify(str(wheel))
    assert proc.returncode == 1
    assert "no CUDA device code (not a CUDA binary)" in proc.stdout
    assert "no binary with CUDA device code was found" in proc.stdout


# --- a real package: scikit-build-core, kernels as data, through `archguard wheel` ---


@pytest.mark.slow
@needs_nvcc
@needs_cuda_torch
@needs_cuobjdump
@pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake")
def test_a_package_that_loads_its_kernels_as_data_is_verified_labelled_and_published(
    tmp_path: Path,
) -> None:
    """tests/packages/embedfat: two fatbins and a cubin in _C_cuda's .rodata (an .incbin and
    C arrays), kernels.fatbin and a .ptx beside it, all compiled for the list archguard gives
    the build (CUDAARCHS from ARCHGUARD_ARCH_LIST=8.0: 8.0+PTX). Its CPU-only build, with no
    device code anywhere, is refused."""
    pytest.importorskip("scikit_build_core")
    root = copy_tree(REPO / "tests" / "packages" / "embedfat", tmp_path / "embedfat")
    out = tmp_path / "out"
    proc = cli("wheel", str(root), "-w", str(out), env=build_env(ARCHGUARD_ARCH_LIST="8.0"))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "ok  embedfat-1.0+cu130-" in proc.stdout and "  sm_80 compute_80" in proc.stdout
    built = only_wheel(out)
    build = wheel_record(built)["build"]
    assert isinstance(build, dict)
    module, group = sorted(e["file"] for e in build["extensions"])
    assert module.startswith("embedfat/_C_cuda.") and module.endswith(".so")
    assert group == "embedfat/{kernels.compute_80.ptx,kernels.fatbin}"
    wheres = [i["where"] for e in build["extensions"] for i in e.get("images", [])]
    assert any("embedded fatbin at offset" in w for w in wheres), wheres
    assert "standalone file embedfat/kernels.fatbin" in wheres
    verified = cli("verify", str(built))
    assert verified.returncode == 0, verified.stdout
    assert "result: OK (2 CUDA binaries checked, 0 with differences)" in verified.stdout
    assert verified.stdout.count("embedded fatbin at offset") == 2
    assert "embedded cubin at offset" in verified.stdout
    assert "from       standalone file embedfat/kernels.fatbin: sm_80 compute_80" in verified.stdout

    cpu = copy_tree(REPO / "tests" / "packages" / "embedfat", tmp_path / "cpu" / "embedfat")
    env = build_env(ARCHGUARD_ARCH_LIST="8.0", EMBEDFAT_CPU_ONLY="1")
    proc = cli("wheel", str(cpu), "-w", str(tmp_path / "cpu-out"), env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert "holds no CUDA device code" in proc.stdout
