"""`archguard verify` against small kernels compiled by a real nvcc and read by a real cuobjdump."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from archguard.core.arch import Arch
from archguard.core.coverage import Image
from archguard.core.kinds import REAL, TRAP
from archguard.detect.cuobjdump import combine, parse_headers, parse_listing, read_binary
from archguard.detect.elf import function_sizes
from archguard.detect.sass import STUB_MAX_BYTES, find_nvdisasm, read_kernels
from archguard.errors import BinaryReadError
from realtools import build_env, cuobjdump, needs_cuobjdump, needs_nvcc, nvcc, run_main, tool_path

pytestmark = [needs_nvcc, needs_cuobjdump]

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n"


def compile_so(tmp: Path, name: str, *flags: str, source: str = KERNEL) -> Path:
    src = tmp / "k.cu"
    src.write_text(source)
    out = tmp / f"{name}.so"
    proc = subprocess.run(
        [
            tool_path(nvcc(), "nvcc"),
            "-shared",
            "-Xcompiler",
            "-fPIC",
            str(src),
            "-o",
            str(out),
            *flags,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def gencode(*pairs: str) -> list[str]:
    return [f"-gencode=arch={a},code={c}" for a, c in (p.split(":") for p in pairs)]


def verify(*args: str) -> subprocess.CompletedProcess[str]:
    return run_main("verify", *args, env=build_env())


CASES = [
    ("plain", gencode("compute_80:sm_80", "compute_90:sm_90"), ["sm_80", "sm_90"]),
    (
        "plain+ptx",
        gencode("compute_80:sm_80", "compute_90:sm_90", "compute_90:compute_90"),
        ["sm_80", "sm_90", "compute_90"],
    ),
    ("arch-specific", gencode("compute_90a:sm_90a", "compute_100a:sm_100a"), ["sm_90a", "sm_100a"]),
    ("family", gencode("compute_100f:sm_100f", "compute_120f:sm_120f"), ["sm_100f", "sm_120f"]),
    (
        "family+ptx",
        gencode("compute_100f:sm_100f", "compute_100:compute_100"),
        ["sm_100f", "compute_100"],
    ),
    ("a-and-f", gencode("compute_100a:sm_100a", "compute_100f:sm_100f"), ["sm_100a", "sm_100f"]),
    ("arch-flag", ["-arch=sm_100f"], ["sm_100f", "compute_100", "compute_100f"]),
]


@pytest.mark.parametrize(("name", "flags", "expected"), CASES, ids=[c[0] for c in CASES])
def test_reads_exactly_what_nvcc_embedded(
    tmp_path: Path, name: str, flags: list[str], expected: list[str]
) -> None:
    so = compile_so(tmp_path, name, *flags)
    found = read_binary(so, tool_path(cuobjdump(), "cuobjdump"))
    assert found.targets is not None
    assert found.targets.names() == expected


def test_family_cubin_is_told_from_a_plain_one(tmp_path: Path) -> None:
    """cuobjdump --list-elf prints sm_100f as sm_100; verify must not be fooled."""
    plain = compile_so(tmp_path, "plain", *gencode("compute_100:sm_100"))
    fam = compile_so(tmp_path, "fam", *gencode("compute_100f:sm_100f"))
    listing = subprocess.run(
        [tool_path(cuobjdump(), "cuobjdump"), "--list-elf", str(fam)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".sm_100.cubin" in listing and "sm_100f" not in listing  # the trap, observed
    ok = verify(str(fam), "--arch-list", "10.0f")
    assert ok.returncode == 0, ok.stdout
    bad = verify(str(plain), "--arch-list", "10.0f")
    assert bad.returncode == 1
    assert "MISSING    sm_100f" in bad.stdout and "UNEXPECTED sm_100" in bad.stdout


def test_arch_specific_only_binary_reports_b300_uncovered(tmp_path: Path) -> None:
    so = compile_so(tmp_path, "a-only", *gencode("compute_100a:sm_100a"))
    proc = verify(str(so), "--arch-list", "10.0a", "--format", "json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0
    (binary,) = data["binaries"]
    assert binary["coverage"]["native"] == ["10.0"]
    assert "10.3" in binary["coverage"]["dead"]


def test_difference_names_each_missing_and_unexpected_target(tmp_path: Path) -> None:
    so = compile_so(tmp_path, "x", *gencode("compute_75:sm_75", "compute_89:sm_89"))
    proc = verify(str(so), "--cuda", "13.0", "--torch", "2.13")
    assert proc.returncode == 1
    assert "MISSING    sm_80 sm_86 sm_90 sm_100 sm_120 compute_90 compute_120" in proc.stdout
    assert "UNEXPECTED sm_89" in proc.stdout
    assert "result: FAILED" in proc.stdout


def test_wheel_built_with_a_different_list_fails_verification(tmp_path: Path) -> None:
    """A wheel whose record says one list and whose binary holds another."""
    so = compile_so(tmp_path, "_C", *gencode("compute_86:sm_86", "compute_86:compute_86"))
    record = {
        "schema": "archguard.resolution/1",
        "effective": "8.0;9.0+PTX",
        "cuda": {"tag": "cu130"},
        "torch": {"version": "2.13.0+cu130"},
        "targets": {"cubins": ["sm_80", "sm_90"], "ptx": ["compute_90"]},
    }
    wheel = tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(so, "pkg/_C.so")
        zf.writestr("pkg-1.0.dist-info/archguard.json", json.dumps(record))
        zf.writestr("pkg/__init__.py", "")
    proc = verify(str(wheel))
    assert proc.returncode == 1
    assert "MISSING    sm_80 sm_90 compute_90" in proc.stdout
    assert "UNEXPECTED sm_86 compute_86" in proc.stdout


def test_binary_without_a_record_or_expectation_is_a_problem(tmp_path: Path) -> None:
    so = compile_so(tmp_path, "x", *gencode("compute_80:sm_80"))
    proc = verify(str(so))
    assert proc.returncode == 1
    assert "no recorded resolution to compare with" in proc.stdout


def test_non_cuda_binary_is_reported_not_failed_and_nothing_cuda_is_a_failure(
    tmp_path: Path,
) -> None:
    c = tmp_path / "c.c"
    c.write_text("int f(void) { return 1; }\n")
    so = tmp_path / "plain.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(c), "-o", str(so)], check=True)
    assert read_binary(so, cuobjdump()).targets is None  # type: ignore[arg-type]
    proc = verify(str(so), "--arch-list", "8.0")
    assert proc.returncode == 1
    assert "no CUDA device code" in proc.stdout
    assert "no binary with CUDA device code was found" in proc.stdout


def test_cuobjdump_views_must_agree() -> None:
    listing = parse_listing("ELF file    1: x.1.sm_100.cubin\nPTX file    1: x.1.sm_90.ptx\n")
    headers = parse_headers(
        "Fatbin elf code:\n====\narch = sm_100f\nFatbin ptx code:\n====\narch = sm_90\n"
    )
    targets = combine(listing, headers, "x")
    assert targets.cubins == {Arch(10, 0, "f")} and targets.ptx == {Arch(9, 0)}
    with pytest.raises(BinaryReadError, match="disagree"):
        combine(listing, headers[:1], "x")


def test_missing_cuobjdump_is_one_clear_error(tmp_path: Path) -> None:
    proc = verify(str(tmp_path), "--cuobjdump", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("archguard error [cuobjdump-missing]")
    assert str(tmp_path / "nope") in proc.stderr  # the path it was given, named


# CUDA's printf takes at most 32 arguments; three of them are a fallback of no memory access
# over STUB_MAX_BYTES (2,816 bytes on sm_80), the one shape the size gate calls real unread.
_INTS = ", ".join(f"int a{i}" for i in range(32))
_ARGS = ", ".join(f"a{i}" for i in range(32))
_FMT = " ".join(["%d"] * 32)
LARGE_FALLBACK = (
    "#include <cstdio>\n"
    f"__global__ void large(float* x, {_INTS}) {{\n"
    "#if __CUDA_ARCH__ >= 1000\n  x[0] = a0;\n#else\n"
    + "".join(f'  printf("{i} {_FMT}\\n", {_ARGS});\n' for i in range(3))
    + "#endif\n}\n"
)
SM80 = gencode("compute_80:sm_80")


def test_a_cubins_function_sizes_are_its_symbol_tables(tmp_path: Path) -> None:
    """function_sizes reads the cubin's .symtab as binutils' readelf does."""
    binary = compile_so(tmp_path, "both", *SM80, source=LARGE_FALLBACK + KERNEL)
    subprocess.run(
        [tool_path(cuobjdump(), "cuobjdump"), "-xelf", "all", str(binary)],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    )
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("no readelf (binutils) to compare with")
    found: dict[str, int] = {}
    for cubin in sorted(tmp_path.glob("*.sm_80.cubin")):  # nvcc -shared links in cudart's own
        table = subprocess.run(
            [readelf, "-sW", str(cubin)], capture_output=True, text=True, check=True
        )
        expected = {
            f[-1]: int(f[2])  # Num: Value Size Type Bind Vis [<other>: 10] Ndx Name
            for f in (line.split() for line in table.stdout.splitlines())
            if len(f) >= 8 and f[3] == "FUNC" and f[-2] != "UND"
        }
        assert function_sizes(cubin) == expected
        found.update(expected)
    large = next(n for n in found if "large" in n)
    assert found["_Z1kPf"] <= STUB_MAX_BYTES < found[large]
    cut = tmp_path / "cut.cubin"  # a cubin cut short: one error (the gate then disassembles)
    cut.write_bytes(cubin.read_bytes()[: cubin.stat().st_size // 2])
    with pytest.raises(BinaryReadError, match=r"cut\.cubin"):
        function_sizes(cut)


def test_an_arch_is_disassembled_only_where_a_stub_is_possible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cubin whose every function is over STUB_MAX_BYTES is real work unread; beside a
    function small enough to be a stub, the same kernel is disassembled and read as what it
    is (calls, no memory access: a trap-like fallback). A build names its binaries by
    relative paths: they are read from another folder."""
    tool = tool_path(cuobjdump(), "cuobjdump")
    disassembler = find_nvdisasm(near=tool)
    if disassembler is None:
        pytest.skip("no nvdisasm beside cuobjdump")
    sm80 = Image(Arch.from_target("sm_80"), False)
    compile_so(tmp_path, "alone", *SM80, source=LARGE_FALLBACK)
    monkeypatch.chdir(tmp_path)
    alone = read_kernels(Path("alone.so"), tool, disassembler, [sm80.arch])
    (large,) = alone[sm80]
    assert alone[sm80] == {large: REAL}
    both_so = compile_so(tmp_path, "both", *SM80, source=LARGE_FALLBACK + KERNEL)
    both = read_kernels(both_so, tool, disassembler, [sm80.arch])
    assert both[sm80] == {large: TRAP, "_Z1kPf": REAL}


ASSERTING = (
    "#include <cassert>\n"
    "__global__ void checked(float* x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  assert(i < n);\n"
    "  x[i] *= 2.0f;\n"
    "}\n"
)


def test_a_real_kernel_that_asserts_is_real_in_its_ptx(tmp_path: Path) -> None:
    """An ``assert`` compiles to a call in a brace block of its own inside the entry (found
    on torch_linear_assignment 0.1.0, which the check called a trap in its compute_90): the
    entry's body runs to its own closing brace, past the call, to its global store."""
    tool = tool_path(cuobjdump(), "cuobjdump")
    disassembler = find_nvdisasm(near=tool)
    if disassembler is None:
        pytest.skip("no nvdisasm beside cuobjdump")
    so = compile_so(tmp_path, "asserting", *gencode("compute_80:compute_80"), source=ASSERTING)
    ptx = subprocess.run([tool, "-ptx", str(so)], capture_output=True, text=True, check=True)
    assert "call.uni" in ptx.stdout and "st.global" in ptx.stdout
    images = read_kernels(so, tool, disassembler, [])
    assert images == {Image(Arch(8, 0), True): {"_Z7checkedPfi": REAL}}
