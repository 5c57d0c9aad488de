"""Direct table tests of archguard's readers: the lint's ``#if`` expression evaluator and its
region readers, cuobjdump's listing/header/SASS/PTX output, the stub classifier, and the
tool search order. Pure: no tool runs here (tests/test_verify.py and tests/test_lint.py read
the same formats from the real tools).

The cuobjdump samples are cut from real output: ``k.cu`` (below) compiled by nvcc 13.0.88 with
``-gencode arch=compute_86,code=sm_86 -gencode arch=compute_89,code=compute_89`` and read by
cuobjdump 13.5.37 (the nvidia-cuda-cuobjdump wheel); ``NOP`` lines and most encoding lines
are left out and runs of padding spaces shortened, as the readers skip them.

    __global__ void real(float* x) { x[threadIdx.x] = 1.0f; }
    __global__ void stub(float* x) {
    #if __CUDA_ARCH__ >= 890
      x[0] = 2.0f;
    #endif
    }
    __global__ void trapped(float* x) {
    #if __CUDA_ARCH__ >= 890
      x[0] = 2.0f;
    #else
      __trap();
    #endif
    }
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from archguard.binaries.record import read_record
from archguard.binaries.stubs import analyse as stub_analyse
from archguard.core.arch import Arch
from archguard.core.coverage import Device, Image, Tier, loaded_image
from archguard.core.cuda import CudaVersion
from archguard.core.kinds import BRANCH_KINDS, EMPTY, REAL, STUB_KINDS, TRAP, StubKind
from archguard.detect.cuobjdump import combine, parse_headers, parse_listing
from archguard.detect.sass import classify_ptx, classify_sass, parse_ptx, parse_sass
from archguard.detect.tools import CUOBJDUMP, NVDISASM, ToolFailed, run
from archguard.errors import BinaryReadError, IndexUnreachable
from archguard.lint.expressions import Macro, Macros, Unparsable, evaluate, tokenize
from archguard.lint.lines import logical_lines
from archguard.lint.regions import classify, declared_values, first_use, kernel_names, launches
from archguard.lint.targets import Target
from archguard.user import doctor, variant, watch

# each image's header, as cuobjdump prints it before the image's contents
ELF_86 = """
Fatbin elf code:
================
arch = sm_86
code version = [1,8]
host = linux
compile_size = 64bit
"""
PTX_89 = """
Fatbin ptx code:
================
arch = sm_89
code version = [9,0]
host = linux
compile_size = 64bit
compressed
"""
LISTING = "ELF file    1: k.1.sm_86.cubin\nPTX file    1: k.1.sm_89.ptx\n"
HEADERS = ELF_86 + PTX_89
SASS = (
    ELF_86
    + """
\tcode for sm_86
\t.target\tsm_86

\t\tFunction : _Z7trappedPf
\t.headerflags\t@"EF_CUDA_SM86 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM86)"
        /*0000*/          MOV R1, c[0x0][0x28] ;  /* 0x00000a0000017a02 */
          /* 0x000fe40000000f00 */
        /*0010*/          BPT.TRAP 0x1 ;  /* 0x000000040000795c */
        /*0020*/          BRA 0x20;  /* 0xfffffff000007947 */
\t\t..........


\t\tFunction : _Z4stubPf
\t.headerflags\t@"EF_CUDA_SM86 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM86)"
        /*0000*/          MOV R1, c[0x0][0x28] ;  /* 0x00000a0000017a02 */
        /*0010*/          EXIT ;  /* 0x000000000000794d */
        /*0020*/          BRA 0x20;  /* 0xfffffff000007947 */
\t\t..........


\t\tFunction : _Z4realPf
\t.headerflags\t@"EF_CUDA_SM86 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM86)"
        /*0000*/          MOV R1, c[0x0][0x28] ;  /* 0x00000a0000017a02 */
        /*0010*/          S2R R2, SR_TID.X ;  /* 0x0000000000027919 */
        /*0050*/          IMAD.WIDE.U32 R2, R2, R3, c[0x0][0x160] ;  /* 0x0000580002027625 */
        /*0060*/          STG.E [R2.64], R5 ;  /* 0x0000000502007986 */
        /*0070*/          EXIT ;  /* 0x000000000000794d */
\t\t..........



"""
    + PTX_89
)
PTX = (
    PTX_89
    + """ptxasOptions =

.version 9.0
.target sm_89
.address_size 64

.visible .entry _Z4realPf(
.param .u64 _Z4realPf_param_0
)
{
.reg .b32 %r<3>;
ld.param.u64 %rd1, [_Z4realPf_param_0];
mov.u32 %r1, %tid.x;
st.global.u32 [%rd4], %r2;
ret;
}
.visible .entry _Z4stubPf(
.param .u64 _Z4stubPf_param_0
)
{
ld.param.u64 %rd1, [_Z4stubPf_param_0];
mov.u32 %r1, 1073741824;
st.global.u32 [%rd2], %r1;
ret;
}
"""
)


# --- cuobjdump: listing, headers, SASS, PTX -------------------------------------------------


def test_listing_and_headers_agree_entry_by_entry() -> None:
    assert parse_listing(LISTING) == [("elf", "sm_86"), ("ptx", "sm_89")]
    assert parse_headers(HEADERS) == [("elf", Arch(8, 6)), ("ptx", Arch(8, 9))]
    targets = combine(parse_listing(LISTING), parse_headers(HEADERS), "k.o")
    assert targets.cubins == {Arch(8, 6)} and targets.ptx == {Arch(8, 9)}


@pytest.mark.parametrize(
    ("listing", "headers", "cubins"),
    [
        # the listing drops the f; the header keeps it
        ("ELF file 1: x.1.sm_100.cubin", "Fatbin elf code:\narch = sm_100f", {Arch(10, 0, "f")}),
        ("ELF file 1: x.1.sm_90a.cubin", "Fatbin elf code:\narch = sm_90a", {Arch(9, 0, "a")}),
        ("ELF file 12: a.b.3.sm_75.cubin", "Fatbin elf code:\narch = sm_75", {Arch(7, 5)}),
    ],
)
def test_the_header_supplies_the_suffix(listing: str, headers: str, cubins: set[Arch]) -> None:
    assert combine(parse_listing(listing), parse_headers(headers), "x").cubins == cubins


def test_sass_kernels_by_image() -> None:
    assert parse_sass(SASS) == {
        Image(Arch(8, 6), False): {"_Z7trappedPf": TRAP, "_Z4stubPf": EMPTY, "_Z4realPf": REAL}
    }


def test_ptx_entries_by_image() -> None:
    # the PTX of compute_89 holds both branches' code: each entry stores to global memory
    assert parse_ptx(PTX) == {Image(Arch(8, 9), True): {"_Z4realPf": REAL, "_Z4stubPf": REAL}}


@pytest.mark.parametrize(
    ("opcodes", "kind"),
    [
        (["MOV", "EXIT", "BRA"], EMPTY),
        (["MOV", "BPT.TRAP", "BRA"], TRAP),
        (["MOV", "CALL.ABS.NOINC", "EXIT"], TRAP),  # assert / printf fallbacks call out
        (["MOV", "S2R", "STG.E", "EXIT"], REAL),
        (["LDG.E.128", "HMMA.16816.F32", "STS.128"], REAL),
        (["UTMALDG.2D", "SYNCS.ARRIVE.TRANS64", "EXIT"], REAL),
        ([], EMPTY),
    ],
)
def test_sass_classifier(opcodes: list[str], kind: str) -> None:
    assert classify_sass(opcodes) == kind


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ("ld.param.u64 %rd1, [p];\nret;", EMPTY),  # parameters only: no work
        ("ld.param.u64 %rd1, [p];\nst.global.u32 [%rd2], %r1;", REAL),
        ("trap;", TRAP),
        ("call.uni __assertfail, (...);", TRAP),
        ("ld.local.u32 %r1, [%rd1];", EMPTY),
        ("cp.async.ca.shared.global [%r1], [%rd1], 16;", REAL),
    ],
)
def test_ptx_classifier(body: str, kind: str) -> None:
    assert classify_ptx(body) == kind


# --- the image a device loads, and the stub classifier --------------------------------------


@pytest.mark.parametrize(
    ("cubins", "ptx", "cc", "loaded"),
    [
        ({Arch(8, 0), Arch(8, 6)}, set(), (8, 9), Image(Arch(8, 6), False)),
        ({Arch(8, 6)}, {Arch(9, 0)}, (10, 0), Image(Arch(9, 0), True)),
        ({Arch(9, 0, "a")}, {Arch(9, 0)}, (9, 0), Image(Arch(9, 0, "a"), False)),
        ({Arch(9, 0, "a")}, set(), (10, 0), None),  # an a cubin runs on its own cc only
        ({Arch(10, 0, "f")}, set(), (10, 3), Image(Arch(10, 0, "f"), False)),  # the family
        ({Arch(10, 0, "f")}, set(), (12, 0), None),
        (set(), {Arch(8, 0)}, (7, 5), None),
    ],
)
def test_the_image_a_device_loads(
    cubins: set[Arch], ptx: set[Arch], cc: tuple[int, int], loaded: Image | None
) -> None:
    assert loaded_image(cubins, ptx, cc) == loaded


def test_stub_classifier_names_devices_that_run_a_stub_real_elsewhere() -> None:
    kernels: dict[Image, dict[str, StubKind]] = {
        Image(Arch(8, 6), False): {"k": EMPTY, "ok": REAL, "own": TRAP},
        Image(Arch(9, 0), False): {"k": REAL, "ok": REAL, "own": TRAP},
        Image(Arch(8, 9), True): {"k": REAL, "ok": REAL, "own": TRAP},
    }
    devices = [Device((8, 6), "A"), Device((8, 9), "L4"), Device((9, 0), "H100")]
    report = stub_analyse(kernels, {"k": "kernel<float>"}, devices)
    # 8.9 loads sm_86 (a cubin of its major at or below it), where k is empty and real in
    # the higher images; 8.6 runs its own compile; `own` is a trap everywhere (no finding)
    assert [
        (f.kernel, f.device.cc, f.image, f.kind, f.real_in, str(f.fix)) for f in report.findings
    ] == [("kernel<float>", (8, 9), "sm_86", EMPTY, ("compute_89", "sm_90"), "8.9")]
    views = {k.name: k for k in report.kernels}
    assert views["kernel<float>"].kinds == (
        ("sm_86", EMPTY),
        ("compute_89", REAL),
        ("sm_90", REAL),
    )
    assert views["own"].stub_everywhere and views["kernel<float>"].mixed


# --- the lint's expressions and region readers ----------------------------------------------

ARCH_90 = Target("sm_90", Arch(9, 0)).macros("900", CudaVersion(13, 0), 88)
ARCH_100F = Target("sm_100f", Arch(10, 0, "f")).macros("1000", CudaVersion(13, 0), 88)
HOST = Target("host", None).macros("900", CudaVersion(13, 0), 88)


def table(base: dict[str, Macro], **defines: str) -> Macros:
    macros = {n: Macro(n, tuple(tokenize(v))) for n, v in defines.items()}
    return Macros({**base, **macros}, owned=frozenset({"OWN"}))


@pytest.mark.parametrize(
    ("expression", "base", "value"),
    [
        ("__CUDA_ARCH__ >= 890", ARCH_90, 1),
        ("defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800", ARCH_90, 0),
        ("!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 1000", HOST, 1),
        ("__CUDA_ARCH_FAMILY_SPECIFIC__ == 1000", ARCH_100F, 1),
        ("defined(__CUDA_ARCH_SPECIFIC__)", ARCH_100F, 0),  # f defines only the family
        ("defined(__CUDA_ARCH_FEAT_SM100_ALL)", ARCH_100F, 0),
        (
            "__CUDACC_VER_MAJOR__ > 12 || "
            "(__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8)",
            ARCH_90,
            1,
        ),
        ("__CUDACC_VER_BUILD__ >= 88", ARCH_90, 1),
        ("CUDART_VERSION >= 12090 && __CUDA_ARCH__ >= 900", ARCH_90, 1),
        ("(false)", ARCH_90, 0),
        ("true && __CUDA_ARCH__ == 900", ARCH_90, 1),
        ("FOO", ARCH_90, None),  # a name nothing scanned defines: unknown, not 0
        ("defined(OWN)", ARCH_90, 0),  # the sources' own name, never defined: undefined
        ("FOO && 0", ARCH_90, 0),  # unknown && 0 is 0
        ("FOO || 1", ARCH_90, 1),
        ("__has_include(<cuda_fp8.h>)", ARCH_90, None),
        ("0x10 + 010 - 'A' + (3 ? 2 : 1) * 2", ARCH_90, 16 + 8 - 65 + 4),
        ("-1 < 0 && ~0 == -1 && (7 % 3) == 1 && (1 << 4) == 16", ARCH_90, 1),
        # C++ alternative tokens (deepspeed's `defined(__HIP_PLATFORM_AMD__) and ...`)
        ("defined(__CUDA_ARCH__) and __CUDA_ARCH__ >= 900 and not (0 or 0)", ARCH_90, 1),
        ("(6 bitand 3) == 2 and (4 bitor 1) == 5 and (6 xor 3) == 5 and 1 not_eq 2", ARCH_90, 1),
        ("compl 0 == -1", ARCH_90, 1),
    ],
)
def test_expressions(expression: str, base: dict[str, Macro], value: int | None) -> None:
    assert evaluate(expression, table(base)).value == value


@pytest.mark.parametrize(
    ("expression", "defines", "value"),
    [
        (
            "CUDA_ARCH_FAMILY(1000)",
            {"CUDA_ARCH_FAMILY(X)": "(__CUDA_ARCH_FAMILY_SPECIFIC__ == X)"},
            1,
        ),
        ("ENABLED", {"ENABLED": "(__CUDA_ARCH__ >= 1000)"}, 1),
        ("A", {"A": "B", "B": "A"}, 0),  # A -> B -> A: not expanded again, then 0 as C says
    ],
)
def test_macros_expand_per_configuration(
    expression: str, defines: dict[str, str], value: int | None
) -> None:
    from archguard.lint.expressions import parse_define

    macros = Macros(dict(ARCH_100F))
    for name, body in defines.items():
        macro = parse_define(f"{name} {body}")
        assert macro is not None
        macros.define(macro, certain=True)
    assert evaluate(expression, macros).value == value


@pytest.mark.parametrize("expression", ["(1", "1 +", '"text"', "1 / 0", "defined"])
def test_expressions_it_refuses_to_guess(expression: str) -> None:
    with pytest.raises(Unparsable):
        evaluate(expression, table(ARCH_90))


def lines(text: str) -> list[str]:
    return [line.text for line in logical_lines(text)]


@pytest.mark.parametrize(
    ("body", "names"),
    [
        ("static constexpr bool isArchSpecific = true;", {"isArchSpecific"}),
        (
            "inline constexpr int kStages = 4;\nusing Arch = cutlass::arch::Sm90;",
            {"kStages", "Arch"},
        ),
        ("struct is_fast : std::bool_constant<true> {};", {"is_fast"}),
        ("static constexpr bool x = true;\nfoo();", None),  # code too: not only a value
        ("x[0] = 1;", None),
        ("", None),
    ],
)
def test_value_regions(body: str, names: set[str] | None) -> None:
    assert declared_values(lines(body)) == names


def test_a_value_is_followed_through_the_declarations_that_pass_it_on() -> None:
    files = {
        "a.h": logical_lines(
            "static constexpr bool isArchSpecific = true;\n"  # line 1: the region (skipped)
            "struct info {\n"
            "  static constexpr bool m = isArchSpecific;\n"
            "};\n"
            "struct is_specific : std::bool_constant<info::m> {};\n"
            "inline constexpr bool is_specific_v = is_specific::value;\n"
        ),
        "b.cu": logical_lines(
            "__global__ void k() {\n  if constexpr (is_specific_v) { go(); }\n}\n"
        ),
    }
    use = first_use({"isArchSpecific"}, files, {("a.h", 1)})
    assert use is not None and (use.file, use.line) == ("b.cu", 2)
    del files["b.cu"]
    assert first_use({"isArchSpecific"}, files, {("a.h", 1)}) is None


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("__global__ void k(float* x) {}", {"k"}),
        (
            "template <typename T, int N>\n__global__ __launch_bounds__(1024) void "
            "__cluster_dims__(N, 1, 1)\n    topk_kernel(const T* x) {}",
            {"topk_kernel"},
        ),
        ("__global__ void __launch_bounds__(256, 2) gemm(int n);", {"gemm"}),
        ('extern "C" __global__ void entry(void) {}', {"entry"}),
        ("__device__ void helper() {}", set()),
    ],
)
def test_kernel_names(text: str, names: set[str]) -> None:
    assert kernel_names(logical_lines(text)) == names


@pytest.mark.parametrize(
    ("body", "found"),
    [
        (["  k<<<grid, block>>>(x);"], True),
        (["  cudaLaunchKernelExC(&config, kernel, args);"], True),
        (["  DISPATCH(topk_kernel, T, 1);"], True),  # names a kernel the files define
        (["  fa->allreduce<nv_bfloat16>(stream, out, n);"], True),  # instantiates a launcher
        (["  run_on_host(x);"], False),
        (["  y = static_cast<float>(x);", "  std::vector<int> v;"], False),
    ],
)
def test_host_code_that_launches(body: list[str], found: bool) -> None:
    assert launches(body, {"topk_kernel"}) is found


# --- one search order for the CUDA binary tools ---------------------------------------------


@pytest.mark.parametrize("tool", [CUOBJDUMP, NVDISASM], ids=lambda t: t.name)
def test_one_search_order(tmp_path: Path, tool: object) -> None:
    from archguard.detect.tools import Tool

    assert isinstance(tool, Tool)

    def make(where: str) -> str:
        path = tmp_path / where / tool.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return str(path)

    env = {
        tool.variable: make("named"),
        "PATH": str(Path(make("path")).parent),
        "CUDA_HOME": str(Path(make("home/bin")).parent.parent),
    }
    beside = str(Path(make("beside")).parent)
    order = [
        env[tool.variable],
        str(Path(env["PATH"], tool.name)),
        str(Path(env["CUDA_HOME"], "bin", tool.name)),
    ]
    for expected in order:
        assert tool.find(env, [beside]) == expected
        Path(expected).unlink()  # the next in the order answers
    assert tool.find(env, [beside]) == str(Path(beside, tool.name))
    assert tool.variable in tool.order and tool.package in tool.order


# --- one runner for every external command ---------------------------------------------------


def test_the_runner_fails_one_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = str(tmp_path / "no-such-tool")
    with pytest.raises(ToolFailed, match=f"`{missing} -V` could not run") as failed:
        run([missing, "-V"])
    assert not failed.value.timed_out
    with pytest.raises(BinaryReadError, match="could not run"):
        run([missing], BinaryReadError)
    with pytest.raises(ToolFailed) as slow:
        run([sys.executable, "-c", "import time; time.sleep(10)"], None, 0.2)
    assert slow.value.timed_out
    echo = run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], stdin="ab")
    assert echo.returncode == 0 and echo.stdout.strip() == "AB"
    for cause, says in (
        (OSError(2, "gone"), "could not start"),
        (subprocess.TimeoutExpired("pip", 1), "did not answer"),
    ):
        failure = ToolFailed(["pip"], cause)
        monkeypatch.setattr(watch, "run", lambda *_, f=failure, **__: (_ for _ in ()).throw(f))
        with pytest.raises(IndexUnreachable, match=says):  # pip: one clear error, never OSError
            watch.download(Version("2.13.0"), tmp_path / "wheels")


# --- the record, read in one place -----------------------------------------------------------


def _record(stubs: object, schema: str = "archguard.resolution/2") -> str:
    targets = {"cubins": ["sm_80", "sm_90"], "ptx": []}
    ext = {"name": "pkg._C", "file": "pkg/_C.so", "targets": targets, "stubs": stubs}
    return json.dumps(
        {"schema": schema, "cuda": {"version": "13.0"}, "targets": targets}
        | {"build": {"extensions": [ext]}}
    )


def test_doctor_and_variant_read_the_record_through_its_module(tmp_path: Path) -> None:
    recorded = read_record(_record({"k": {"sm_80": "trap", "sm_90": "real"}}), "w")
    assert recorded.cuda == "13.0"
    assert recorded.stubs == {"pkg/_C.so": {"k": {"sm_80": TRAP, "sm_90": REAL}}}
    binary = doctor._from_record(recorded, "site/pkg/_C.so")
    assert binary is not None and binary.built_with == (13, 0) and binary.source == "record"
    assert doctor._from_record(recorded, "site/other/_C.so") is None
    with pytest.raises(BinaryReadError, match="stub kind 'odd'"):
        read_record(_record({"k": {"sm_80": "odd"}}), "w")
    ada = Device((8, 9), "Ada")
    package = doctor.Package("pkg", "1.0", [binary])
    (finding,) = doctor.diagnose([ada], [package], None)
    assert (finding.tier, finding.word, finding.stubs) == (Tier.NATIVE, "native", ("k (trap)",))
    diagnosis = doctor.Diagnosis([(ada, "--device")], None, [package], [finding], None, [])
    assert diagnosis.as_json()["findings"][0]["tier"] == "native"  # type: ignore[index]
    unread = doctor.Package("pkg", "1.0", [doctor.Binary("x.so", None, "not read: why")])
    (none,) = doctor.diagnose([ada], [unread], None)
    assert none.tier is None and none.word == "unread" and not doctor.failed([none])
    for schema, cuda in (("archguard.resolution/2", "13.0"), ("other/1", None)):
        wheel = tmp_path / f"pkg-{cuda}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr("pkg-1.0.dist-info/archguard.json", _record({}, schema))
        assert variant.recorded_cuda(wheel) == cuda
    # the stub kinds have one owner (archguard.core.kinds), the lint's branch kinds beside them
    assert set(STUB_KINDS) == {"real", "empty", "trap"}
    assert {classify(["__trap();"]), classify([]), classify(["x = 1;"])} == set(BRANCH_KINDS)
