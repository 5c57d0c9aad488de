"""The stub lint (issue #9): what each target defines is what the real nvcc defines; the
example package's FP8 kernel, Hopper feature guards and PTX-only devices are judged right;
nothing makes it raise."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from archguard.core.arch import Arch, parse_arch_list, parse_targets
from archguard.core.cuda import CudaVersion
from archguard.core.toolkit import bundled_toolkit, known_arches
from archguard.core.torchbuild import bundled_torch
from archguard.detect.nvcc import detect_toolkit
from archguard.lint.guards import Wheel, analyse
from archguard.lint.regions import classify
from archguard.lint.sources import Sources
from archguard.lint.targets import Target
from realtools import (
    CUDA_HOME,
    REPO,
    needs_cu130,
    needs_cuda_torch,
    needs_nvcc,
    nvcc,
    run_main,
    tool_path,
)

CU130 = parse_targets(
    "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_90 compute_120", "t", known=known_arches()
)
TOOLKIT = bundled_toolkit((13, 0))
TORCH = bundled_torch((13, 0), Version("2.13")).targets  # what torch 2.13 (cu130) ships

PROBE = r"""
#define AG_STR2(...) #__VA_ARGS__
#define AG_STR(...) AG_STR2(__VA_ARGS__)
#ifdef __CUDA_ARCH__
#define AG_A AG_STR(__CUDA_ARCH__)
#else
#define AG_A "-"
#endif
#ifdef __CUDA_ARCH_SPECIFIC__
#define AG_S AG_STR(__CUDA_ARCH_SPECIFIC__)
#else
#define AG_S "-"
#endif
#ifdef __CUDA_ARCH_FAMILY_SPECIFIC__
#define AG_F AG_STR(__CUDA_ARCH_FAMILY_SPECIFIC__)
#else
#define AG_F "-"
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define AG_X "90"
#elif defined(__CUDA_ARCH_FEAT_SM100_ALL)
#define AG_X "100"
#elif defined(__CUDA_ARCH_FEAT_SM120_ALL)
#define AG_X "120"
#else
#define AG_X "-"
#endif
#define AG_L AG_STR(__CUDA_ARCH_LIST__)
#define AG_V AG_STR(__CUDACC_VER_MAJOR__) "." AG_STR(__CUDACC_VER_MINOR__) "." \
  AG_STR(__CUDACC_VER_BUILD__)
#define AG_T AG_STR(CUDART_VERSION) "|" AG_V
#pragma message("AG|" AG_A "|" AG_S "|" AG_F "|" AG_X "|" AG_L "|" AG_T "|")
__global__ void k() {}
"""


def model(target: Target, arch_list: str, build: int | None) -> str:
    macros = target.macros(arch_list, CudaVersion(13, 0), build)

    def value(name: str) -> str:
        return macros[name].body[0] if name in macros else "-"

    feat = next(
        (
            n[len("__CUDA_ARCH_FEAT_SM") : -len("_ALL")]
            for n in macros
            if n.startswith("__CUDA_ARCH_FEAT_SM")
        ),
        "-",
    )
    return "|".join(
        [
            "AG",
            value("__CUDA_ARCH__"),
            value("__CUDA_ARCH_SPECIFIC__"),
            value("__CUDA_ARCH_FAMILY_SPECIFIC__"),
            feat,
            arch_list,
            value("CUDART_VERSION"),
            ".".join(value(f"__CUDACC_VER_{part}__") for part in ("MAJOR", "MINOR", "BUILD")),
            "",
        ]
    )


CASES = [
    ("compute_86,code=sm_86",),
    ("compute_90,code=sm_90",),
    ("compute_90a,code=sm_90a",),
    ("compute_100f,code=sm_100f",),
    ("compute_100a,code=sm_100a",),
    ("compute_120a,code=sm_120a",),
    ("compute_110,code=sm_110",),
    ("compute_90,code=compute_90",),
    ("compute_80,code=sm_80", "compute_90a,code=sm_90a", "compute_90,code=compute_90"),
]


@needs_nvcc
@pytest.mark.parametrize("gencodes", CASES, ids=["+".join(c) for c in CASES])
def test_what_each_target_defines_is_what_nvcc_defines(
    tmp_path: Path, gencodes: tuple[str, ...]
) -> None:
    src = tmp_path / "probe.cu"
    src.write_text(PROBE)
    argv = [tool_path(nvcc(), "nvcc"), "-c", str(src), "-o", str(tmp_path / "p.o")]
    for g in gencodes:
        argv += ["-gencode", f"arch={g}"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    # cicc echoes each device pass's message in quotes, the host compiler its own way
    seen = set(re.findall(r"(AG\|[^\"'\s]*\|)", proc.stdout + proc.stderr))
    images = []
    for g in gencodes:  # the pass for "arch=compute_XY" compiles with compute_XY's macros
        arch_name, code = g.split(",code=")
        images.append(Target(code, Arch.from_target(arch_name.replace("compute_", "sm_"))))
    values = sorted(
        {str(t.arch.major * 100 + t.arch.minor * 10) for t in images if t.arch}, key=int
    )
    arch_list = ",".join(values)
    # the build number archguard reads from this nvcc's --version (V13.0.88 -> 88)
    build = detect_toolkit(
        {"CUDA_HOME": str(Path(tool_path(nvcc(), "nvcc")).parent.parent), "PATH": ""}
    ).build
    assert build is not None
    expected = {model(t, arch_list, build) for t in images}
    expected |= {model(Target("host", None), arch_list, build)}
    assert seen == expected


@needs_nvcc
def test_alternative_tokens_read_as_nvcc_reads_them(tmp_path: Path) -> None:
    """`and`/`or`/`not` in #if are C++ operators for nvcc, in the host pass and each device
    pass: the lint reads the same guard the same way (sm_90 takes it, sm_80 and the host do
    not)."""
    guard = "defined(__CUDA_ARCH__) and __CUDA_ARCH__ >= 900 and not (0 or 0)"
    src = tmp_path / "alt.cu"
    src.write_text(f"#if {guard}\n#error taken\n#endif\n__global__ void k() {{}}\n")
    for arch, taken in (("sm_90", True), ("sm_80", False)):
        proc = subprocess.run(
            [
                tool_path(nvcc(), "nvcc"),
                "-c",
                str(src),
                f"-arch={arch}",
                "-o",
                str(tmp_path / "a.o"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (proc.returncode != 0 and "taken" in proc.stderr) is taken, proc.stderr
        wanted = parse_targets(arch, "t", known=known_arches())
        report = lint_text(tmp_path, src.read_text(), str(wanted))
        assert not report.not_understood
        assert bool(report.errors) is taken


@needs_nvcc
def test_what_nvcc_never_defines_on_linux(tmp_path: Path) -> None:
    """The other compilers' names the lint takes as undefined (clang, NVHPC, MSVC, hipcc...)
    are undefined in nvcc's host pass and in each device pass."""
    from archguard.lint.targets import OTHER_COMPILERS

    src = tmp_path / "names.cu"
    src.write_text(
        "".join(f"#ifdef {n}\n#error {n} is defined\n#endif\n" for n in OTHER_COMPILERS)
        + "__global__ void k() {}\n"
    )
    argv = [tool_path(nvcc(), "nvcc"), "-c", str(src), "-o", str(tmp_path / "n.o")]
    for gencode in ("arch=compute_80,code=sm_80", "arch=compute_100a,code=sm_100a"):
        argv += ["-gencode", gencode]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    src.write_text("#ifdef __NVCC__\n#error __NVCC__ is defined\n#endif\n")  # the probe can fail
    assert subprocess.run(argv, capture_output=True, check=False).returncode != 0


def no_include(name: str, quoted: bool, including: str) -> None:
    return None


def lint_text(tmp_path: Path, source: str, targets: str, name: str = "k.cu"):  # type: ignore[no-untyped-def]
    files = {name: source}
    wanted = parse_targets(targets, "t", known=known_arches())
    return analyse([name], Wheel(wanted, TOOLKIT, TORCH), Sources(files.__getitem__, no_include))


FEAT = """\
__global__ void gemm(float* x) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\\n" ::);
  x[0] = 1;
#else
  __trap();
#endif
}
"""


def test_a_feature_guard_is_reported_for_plain_9_0_and_not_for_9_0a(tmp_path: Path) -> None:
    plain = lint_text(tmp_path, FEAT, "sm_80 sm_90 compute_90")
    (finding,) = [f for f in plain.findings if f.device.cc == (9, 0)]
    assert (finding.line, finding.image, finding.kind, str(finding.fix)) == (
        2,
        "sm_90",
        "trap",
        "9.0a",
    )
    specific = lint_text(tmp_path, FEAT, "sm_80 sm_90a compute_90")
    assert [f for f in specific.findings if f.device.cc == (9, 0)] == []


THOR = """\
__global__ void k(float* x) {
#if __CUDA_ARCH__ >= 950
  x[0] = 1;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  x[1] = 1;
#endif
}
"""


def test_a_device_reached_only_through_ptx_is_evaluated_with_that_ptxs_arch(tmp_path: Path) -> None:
    """11.0 (Thor) JIT-compiles compute_90: it sees __CUDA_ARCH__ == 900, not 1100."""
    report = lint_text(
        tmp_path, THOR, "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_90 compute_120"
    )
    thor = [f for f in report.findings if f.device.cc == (11, 0)]
    assert [(f.line, f.image, str(f.fix)) for f in thor] == [(2, "compute_90 (JIT)", "11.0")]
    assert thor[0].torch_runs is False  # torch 2.13 itself has no PTX: it cannot run on Thor


@pytest.mark.parametrize(
    ("guard", "reported"),
    [
        ("#if __CUDA_ARCH__ >= 750", False),  # every image a device can load satisfies it
        ("#if __CUDACC_VER_MAJOR__ >= 12", False),  # a toolkit version, not an arch guard
        ("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800", False),  # inverted: old-arch fallback
        ("#if __CUDA_ARCH__ >= 890", True),
    ],
)
def test_guards_that_must_not_be_reported(tmp_path: Path, guard: str, reported: bool) -> None:
    source = (
        f"__global__ void k(float* x) {{\n{guard}\n  x[0] = 1;\n#else\n  x[0] = 2;\n#endif\n}}\n"
    )
    report = lint_text(
        tmp_path, source, "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_90 compute_120"
    )
    assert bool(report.findings) is reported, report.findings


def test_macros_defined_from_the_arch_in_an_included_header(tmp_path: Path) -> None:
    files = {
        "k.cu": (
            '#include "flags.h"\n__global__ void k(float* x) {\n'
            "#ifdef FP8_OK\n  x[0] = 1;\n#endif\n}\n"
        ),
        "flags.h": (
            "#ifndef FLAGS_H\n#define FLAGS_H\n"
            "#if __CUDA_ARCH__ >= 890\n#define FP8_OK 1\n#endif\n#endif\n"
        ),
    }
    resolve = lambda n, q, i: n if n in files else None  # noqa: E731
    report = analyse(["k.cu"], Wheel(CU130, TOOLKIT, CU130), Sources(files.__getitem__, resolve))
    ((device, line, kind),) = {(f.device.cc_text, f.line, f.kind) for f in report.findings}
    assert (device, line, kind) == ("8.9", 3, "empty")


def test_dead_regions_errors_and_conditions_it_cannot_evaluate(tmp_path: Path) -> None:
    source = (
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 870\nint orin;\n#endif\n"
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 750\n#error needs Turing\n#endif\n"
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && MY_FLAG\nint x;\n#endif\n"
        "#if (int)__CUDA_ARCH__ > 3\nint y;\n#endif\n"
    )
    report = lint_text(tmp_path, source, "sm_70 sm_80 compute_80")
    assert (report.dead[0].line, report.dead[0].needs) == (1, ("8.7",))
    assert [(e.line, e.images) for e in report.errors] == [(5, ("sm_70",))]
    lines = {n: why for _, n, why in report.not_understood}
    assert "MY_FLAG" in lines[7] and 10 in lines
    assert not report.ok


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (["  __trap();"], "trap"),
        (['  assert(false && "no");'], "trap"),
        (['  asm volatile("trap;");'], "trap"),
        (['  printf("unsupported\\n");', "  return;"], "trap"),
        (["  // nothing", ""], "empty"),
        (["  return;"], "empty"),
        (["  y[i] = x[i];"], "alternative"),
    ],
)
def test_what_the_loaded_image_gets_instead(body: list[str], kind: str) -> None:
    from archguard.lint.lines import logical_lines

    lines = [line.text for line in logical_lines("\n".join(body))]
    assert classify(lines) == kind


def guard_line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_the_example_packages_fp8_kernel(tmp_path: Path) -> None:
    """With the cu130 row: 8.9 runs the sm_86 trap. With 8.9 in the package's list: silent."""
    example = REPO / "example_package"
    fp8 = example / "src" / "archguard_example" / "csrc" / "fp8.cu"
    line = guard_line(fp8, "__CUDA_ARCH__ >= 890")
    proc = run_main(
        "lint", "--project", str(example), "--cuda", "13.0", "--torch", "2.13", "--format", "json"
    )
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    (finding,) = data["findings"]
    assert finding["file"] == "src/archguard_example/csrc/fp8.cu" and finding["line"] == line
    assert (finding["device"], finding["image"], finding["kind"], finding["fix"]) == (
        "8.9",
        "sm_86",
        "trap",
        "8.9",
    )
    assert finding["torch_runs"] is True
    text = run_main("lint", "--project", str(example), "--cuda", "13.0", "--torch", "2.13").stdout
    # the fix names where the list came from: here the policy row, and how to override it
    assert "fix: add 8.9 to the list (policy row cu130: override it with [tool.archguard] " in text
    from_env = run_main(
        "lint",
        "--project",
        str(example),
        "--cuda",
        "13.0",
        "--torch",
        "2.13",
        env={"ARCHGUARD_ARCH_LIST": "8.0;8.6"},
    ).stdout
    assert (
        "loads sm_86, which compiles it out (trap instead); torch runs there; fix: add 8.9 to "
        "ARCHGUARD_ARCH_LIST\n" in from_env
    )
    farm = tmp_path / "farm.toml"
    farm.write_text('[tool.archguard]\narch_list_by_cuda = { cu130 = "8.0;8.6" }\n')
    from_farm = run_main(
        "lint",
        "--project",
        str(example),
        "--cuda",
        "13.0",
        "--torch",
        "2.13",
        env={"ARCHGUARD_CONFIG": str(farm)},
    ).stdout
    assert (
        f"fix: add 8.9 to {farm} [tool.archguard] (from ARCHGUARD_CONFIG) arch_list_by_cuda"
        ".cu130\n" in from_farm
    )
    quiet = run_main(
        "lint",
        "--project",
        str(example),
        "--cuda",
        "13.0",
        "--torch",
        "2.13",
        env={"ARCHGUARD_ARCH_LIST": "7.5;8.0;8.6;8.9;9.0+PTX;10.0;12.0+PTX"},
    )
    assert quiet.returncode == 0, quiet.stdout
    assert "Stub hazards (0)" in quiet.stdout


def test_unreadable_files_are_skipped_with_a_note_and_nothing_raises(tmp_path: Path) -> None:
    (tmp_path / "bad.cu").write_bytes(b"\xff\xfe#if __CUDA_ARCH__ >=\n#elif\n#endif\n#endif\n")
    (tmp_path / "dir.cu").mkdir()
    proc = run_main(
        "lint",
        str(tmp_path / "bad.cu"),
        str(tmp_path / "dir.cu"),
        str(tmp_path / "none.cu"),
        "--cuda",
        "13.0",
        "--torch",
        "2.13",
        "--project",
        str(tmp_path),
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Skipped (unreadable)" in proc.stdout and "none.cu" in proc.stdout


CUTLASS_STYLE = """\
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ARCH_CONDITIONAL (true)
#else
#define ARCH_CONDITIONAL (false)
#endif
__global__ void gemm(float* x) {
#if ARCH_CONDITIONAL
  x[0] = 1;
#else
  __trap();
#endif
}
"""


def test_true_and_false_in_a_condition_are_cpp_truth_values(tmp_path: Path) -> None:
    """CUTLASS's CUDA_ARCH_CONDITIONAL(X) expands to (false) on plain targets: in C++,
    true/false in #if are 1/0, so the guard is decided, not 'undecided'."""
    plain = lint_text(tmp_path, CUTLASS_STYLE, "sm_80 sm_90 compute_90")
    assert not plain.not_understood
    (finding,) = [f for f in plain.findings if f.device.cc == (9, 0)]
    assert (finding.line, finding.image, finding.kind) == (7, "sm_90", "trap")
    assert [
        f
        for f in lint_text(tmp_path, CUTLASS_STYLE, "sm_80 sm_90a").findings
        if f.device.cc == (9, 0)
    ] == []


def lattice(depth: int, once: str) -> dict[str, str]:
    """h0 includes h1 and h2, h1 includes h2 and h3, ...: 2**depth include paths through
    ``depth`` guarded headers, as in CUTLASS-sized trees."""
    files = {"k.cu": '#include "h0.h"\n__global__ void k(float* x) { x[0] = 1; }\n'}
    for i in range(depth):
        guard = f"#ifndef H{i}\n#define H{i}\n" if once == "guard" else "#pragma once\n"
        body = "".join(f'#include "h{j}.h"\n' for j in (i + 1, i + 2) if j < depth)
        body += f"#if __CUDA_ARCH__ >= 890\n#define FAST{i} 1\n#endif\n"
        files[f"h{i}.h"] = guard + body + ("#endif\n" if once == "guard" else "")
    return files


@pytest.mark.parametrize("once", ["guard", "pragma"])
def test_a_guarded_header_is_walked_once_per_state(once: str) -> None:
    """40 headers, 2**40 include paths: each guarded header is walked again only in a state
    its first walk did not cover, so the walk finishes well inside its budget."""
    files = lattice(40, once)
    reads: list[str] = []

    def read(name: str) -> str:
        reads.append(name)
        return files[name]

    wanted = parse_targets("sm_80 sm_90", "t", known=known_arches())
    resolve = lambda n, q, i: n if n in files else None  # noqa: E731
    report = analyse(["k.cu"], Wheel(wanted, TOOLKIT, TORCH), Sources(read, resolve, budget=60.0))
    assert report.unfinished == [] and report.files == 41
    assert sorted(reads) == sorted(files)  # each file read once


def test_past_its_budget_the_lint_lists_what_it_did_not_scan() -> None:
    from archguard.lint.render import text_lines

    files = lattice(3, "guard")
    wanted = parse_targets("sm_80", "t", known=known_arches())
    sources = Sources(files.__getitem__, lambda n, q, i: n, budget=0.0)
    report = analyse(["k.cu"], Wheel(wanted, TOOLKIT, TORCH), sources)
    assert report.unfinished == ["k.cu"]
    assert any(
        "budget" in line and "k.cu" in line for line in text_lines(report, "ARCHGUARD_ARCH_LIST")
    )


@pytest.mark.parametrize(
    "include",
    ["<cuda.h>", "<torch/extension.h>", '"ATen/cuda/CUDAContext.h"', "<c10/cuda/CUDAGuard.h>"],
)
def test_toolkit_version_macros_are_known(tmp_path: Path, include: str) -> None:
    """CUDART_VERSION (nvcc includes cuda_runtime.h in every .cu) and CUDA_VERSION (once a
    header that reaches cuda.h, outside the scan, is included: bundled cuda_headers.yml) are
    the toolkit's own values."""
    source = (
        f"#include {include}\n"
        "__global__ void k(float* x) {\n"
        "#if CUDA_VERSION >= 12080 && CUDART_VERSION >= 12080 && defined(__CUDA_ARCH__) "
        "&& __CUDA_ARCH__ >= 890\n"
        "  x[0] = 1;\n#else\n  x[0] = 2;\n#endif\n}\n"
    )
    report = lint_text(tmp_path, source, "sm_80 sm_90 compute_90")
    assert not report.not_understood, report.not_understood
    assert [f.device.cc for f in report.findings] == [(8, 9)]  # 8.9 loads sm_80
    newer = source.replace("CUDA_VERSION >= 12080 &&", "CUDA_VERSION >= 13010 &&", 1)
    report = lint_text(tmp_path, newer, "sm_80 sm_90 compute_90")  # 13.0 is below: dead
    assert not report.not_understood and not report.findings


def test_cuda_version_after_headers_that_do_not_reach_cuda_h_is_undefined(
    tmp_path: Path,
) -> None:
    """cuda_fp16.h, cuda_runtime.h and <vector> leave CUDA_VERSION undefined (the probe says
    so), and nvcc's implicit cuda_runtime.h does too: 0 in #if, so the guarded code is in no
    image and the guard is decided."""
    source = (
        "#include <cuda_fp16.h>\n#include <cuda_runtime.h>\n#include <vector>\n"
        "__global__ void k(float* x) {\n"
        "#if CUDA_VERSION >= 12080 && __CUDA_ARCH__ >= 890\n  x[0] = 1;\n#endif\n}\n"
    )
    report = lint_text(tmp_path, source, "sm_80 sm_90 compute_90")
    assert not report.not_understood and not report.findings
    bare = source.split("__global__", 1)[1]  # no include at all: still undefined
    report = lint_text(tmp_path, "__global__" + bare, "sm_80 sm_90 compute_90")
    assert not report.not_understood and not report.findings


def test_cuda_version_after_a_header_no_probe_knows_is_undecided_and_says_which(
    tmp_path: Path,
) -> None:
    """A header outside the scan that the bundled table does not list may reach cuda.h: the
    lint does not guess, and names the header; a later cuda.h settles it again."""
    source = (
        "#include <cuda_fp16.h>\n#include <somelib/config.h>\n"
        "__global__ void k(float* x) {\n"
        "#if CUDA_VERSION >= 12080 && __CUDA_ARCH__ >= 890\n  x[0] = 1;\n#endif\n}\n"
    )
    report = lint_text(tmp_path, source, "sm_80 sm_90 compute_90")
    assert [(f, n) for f, n, _ in report.not_understood] == [("k.cu", 4)]
    assert "CUDA_VERSION, which <somelib/config.h> (outside the scan" in report.not_understood[0][2]
    settled = source.replace(
        "#include <somelib/config.h>\n", "#include <somelib/config.h>\n#include <cuda.h>\n"
    )
    report = lint_text(tmp_path, settled, "sm_80 sm_90 compute_90")
    assert not report.not_understood
    assert [f.device.cc for f in report.findings] == [(8, 9)]


@pytest.mark.slow  # the probe runs nvcc -E once per header: 547 runs, over a minute on 2 cores
@needs_nvcc
@needs_cuda_torch
@needs_cu130  # the bundled table was probed with torch cu130 and nvcc 13.0
def test_the_bundled_cuda_headers_are_what_the_probe_finds() -> None:
    """scripts/probe_cuda_headers.py, run on the real toolkit and torch, regenerates the
    bundled table's header lists (its comments name the toolkit and torch it was made with)."""
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "probe_cuda_headers.py")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CUDA_HOME": CUDA_HOME},
    )
    bundled = (REPO / "src" / "archguard" / "defaults" / "cuda_headers.yml").read_text()
    found = yaml.safe_load(run.stdout)
    assert found == yaml.safe_load(bundled)
    assert "cuda.h" in found["toolkit"] and "ATen/cuda/CUDAContext.h" in found["torch"]
    assert {"cuda_runtime.h", "cuda_fp16.h", "cub/cub.cuh", "vector"} <= set(found["undefined"])


def test_a_forced_include_is_read_before_the_source() -> None:
    """nvcc -include config.h: the macros it defines decide the guards of the source."""
    files = {
        "config.h": "#define USE_FAST 1\n",
        "k.cu": (
            "__global__ void k(float* x) {\n#if USE_FAST && __CUDA_ARCH__ >= 890\n"
            "  x[0] = 1;\n#else\n  x[0] = 2;\n#endif\n}\n"
        ),
    }
    wanted = parse_targets("sm_80 sm_90", "t", known=known_arches())

    def lint(forced: list[str]):  # type: ignore[no-untyped-def]
        sources = Sources(files.__getitem__, no_include, forced=tuple(forced))
        return analyse(["k.cu"], Wheel(wanted, TOOLKIT, TORCH), sources)

    assert lint([]).not_understood  # USE_FAST: undecided without the forced include
    forced = lint(["config.h"])
    assert not forced.not_understood and [f.device.cc for f in forced.findings] == [(8, 9)]


def test_include_flags_reads_dirs_and_forced_includes(tmp_path: Path) -> None:
    from archguard.lint.sources import include_flags

    (tmp_path / "cfg.h").write_text("")
    dirs, forced = include_flags(
        [
            "-Iinc",
            "-I",
            "/abs/x",
            "--include-path=third",
            "-include",
            "cfg.h",
            "-O3",
            "--pre-include=missing.h",
        ],
        tmp_path,
    )
    assert dirs == [tmp_path / "inc", Path("/abs/x"), tmp_path / "third"]
    assert forced == [str((tmp_path / "cfg.h").resolve())]


def test_guarded_headers_reached_under_an_undecided_branch_are_walked_once() -> None:
    """A chain of 40 `#pragma once` headers, each including the next two, all reached under
    `#if UNDECIDED` (NATTEN's CUTLASS under `NATTEN_WITH_CUTLASS`): a second walk in the same
    "maybe" state adds nothing, so each header is walked once (about 10^8 include paths
    otherwise: the budget would stop the walk unfinished)."""
    depth = 40
    files = {
        f"h{i}.h": f'#pragma once\n#include "h{i + 1}.h"\n#include "h{i + 2}.h"\n'
        f"#if __CUDA_ARCH__ >= 890\n__device__ int v{i}() {{ return {i}; }}\n#endif\n"
        for i in range(depth)
    }
    files["k.cu"] = '#if UNDECIDED\n#include "h0.h"\n#endif\n__global__ void k() {}\n'

    def resolve(name: str, quoted: bool, including: str) -> str | None:
        return name if name in files else None

    wanted = parse_targets("sm_80 sm_90", "t", known=known_arches())
    sources = Sources(files.__getitem__, resolve, budget=30.0)
    report = analyse(["k.cu"], Wheel(wanted, TOOLKIT, TORCH), sources)
    assert not report.unfinished
    assert report.files == depth + 1


@pytest.mark.parametrize(
    ("guard", "device"),
    [
        ("__CUDA_ARCH__ == 1000", "10.3"),  # 10.3 loads sm_100: the image takes the real path
        ("__CUDA_ARCH__ <= 900", "11.0"),  # 11.0 JIT-compiles compute_90: the same
    ],
)
def test_a_trap_the_devices_own_compile_would_take_is_not_a_hazard(
    tmp_path: Path, guard: str, device: str
) -> None:
    """CUTLASS keys real paths on `== 1000` / `<= 900` with a trap in the #else: the device's
    own plain compile would take the trap, the image it loads takes the real path. Nothing
    is lost, so nothing is reported (the fix would have been to add the arch: a trap). The
    opposite direction is still a finding."""
    source = (
        "__device__ void fast();\n__global__ void k() {\n"
        f"#if {guard}\n  fast();\n#else\n  __trap();\n#endif\n}}\n"
    )
    report = lint_text(tmp_path, source, "sm_80 sm_90 sm_100 sm_120 compute_90")
    assert device not in {f.device.cc_text for f in report.findings}
    inverted = source.replace("  fast();\n#else\n  __trap();", "  __trap();\n#else\n  fast();")
    report = lint_text(tmp_path, inverted, "sm_80 sm_90 sm_100 sm_120 compute_90")
    assert device in {f.device.cc_text for f in report.findings}


def test_lint_project_leaves_vendored_translation_units_out_and_says_so(tmp_path: Path) -> None:
    """xformers' sdist carries CUTLASS's 153 example .cu files under third_party/cutlass: not
    the package's translation units (337 s of lint). `lint --project` reads the package's
    own .cu files, follows their includes into the vendored tree, and names what it left
    out; a vendored file named on the command line is linted."""
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "k.cu").write_text('#include "../third_party/lib/h.cuh"\n')
    examples = tmp_path / "third_party" / "lib" / "examples"
    examples.mkdir(parents=True)
    (tmp_path / "third_party" / "lib" / "h.cuh").write_text("__device__ int h();\n")
    (examples / "e.cu").write_text("#if __CUDA_ARCH__ >= 890\n__global__ void e() {}\n#endif\n")
    args = ["lint", "--project", str(tmp_path), "--cuda", "13.0", "--torch", "2.13"]
    text = run_main(*args).stdout
    assert "archguard lint: 2 files read" in text  # k.cu and the vendored header it includes
    assert "Not linted: 1 .cu files under vendored directories (third_party/lib/examples)" in (
        " ".join(text.split())
    )
    report = json.loads(run_main(*args, "--format", "json").stdout)
    assert report["vendored_not_linted"] == ["third_party/lib/examples/e.cu"]
    named = run_main("lint", str(examples / "e.cu"), "--cuda", "13.0", "--torch", "2.13")
    assert "archguard lint: 1 files read" in named.stdout


# -D values a released setup.py passes nvcc: torchani's cuaev puts its CUB in a namespace
CUAEV_FLAGS = [
    "-DCUB_NS_QUALIFIER=::cuaev::cub",
    "-DCUB_NS_PREFIX=namespace cuaev {",
    "-DCUB_NS_POSTFIX=}",
]
OPAQUE_GUARDS = """\
#ifdef CUB_NS_PREFIX
#error defined, certainly
#endif
#if CUB_NS_PREFIX
#error never a proof
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900 && CUB_NS_POSTFIX
#error nor this
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900 && READABLE
#error a proof for sm_80
#endif
__global__ void k() {}
"""


def test_a_define_that_is_no_expression_is_opaque_undecided_and_never_a_proof() -> None:
    """The lint read every -D value as an expression and raised on torchani's
    `-DCUB_NS_PREFIX=namespace cuaev {` (from inside the build). Such a value is opaque:
    the name is defined (an #ifdef on it is decided), its value unknown (an #if on it is
    undecided: an #error under it is never a proof that drops a target), and said as such;
    a value the lint reads still decides."""
    from archguard.lint.render import render
    from archguard.lint.sources import parse_defines

    files = {"k.cu": OPAQUE_GUARDS}
    defines = parse_defines([*CUAEV_FLAGS, "-DREADABLE=1"])
    wanted = parse_targets("sm_80 sm_90", "t", known=known_arches())
    sources = Sources(files.__getitem__, no_include, defines)
    report = analyse(["k.cu"], Wheel(wanted, TOOLKIT, TORCH), sources)
    assert report.opaque == {"CUB_NS_PREFIX": "namespace cuaev {", "CUB_NS_POSTFIX": "}"}
    assert [(e.line, e.images) for e in report.errors] == [
        (2, ("sm_80", "sm_90")),
        (11, ("sm_80",)),
    ]
    (why,) = [t for _, n, t in report.not_understood if n == 7]
    assert "CUB_NS_POSTFIX, whose -D value is not an expression the lint reads" in why
    text = render(report, "the list")
    assert "Opaque -D values" in text and "-DCUB_NS_PREFIX='namespace cuaev {'" in text
    data = json.loads(render(report, "the list", "json"))
    assert data["opaque_defines"] == report.opaque


def _extension(name: str, flags: list[str]):  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    return SimpleNamespace(
        name=name, sources=["k.cu"], include_dirs=[], define_macros=[], undef_macros=[]
    ), {"nvcc": flags}


def _lint_in_a_build(
    root: Path, extensions: list[tuple[str, list[str]]]
) -> dict[str, dict[str, str]]:
    """The build's lint step (archguard._integration.prebuild.lint_build) over ``root``'s
    k.cu, for extensions with these nvcc flags, planned for sm_80 and sm_90."""
    from types import SimpleNamespace

    from archguard._integration.prebuild import lint_build
    from archguard._integration.session import Session
    from archguard.core.modes import DEFAULT_ARCH_SPECIFIC
    from archguard.core.policy import load_policy
    from archguard.core.resolve import resolve
    from archguard.nvcc.plan import plan_extension

    res = resolve(
        load_policy(None),
        TOOLKIT,
        bundled_torch((13, 0), Version("2.13")),
        override=(
            tuple(parse_arch_list("8.0 9.0", "test", known=known_arches())),
            "ARCHGUARD_ARCH_LIST",
        ),
    )
    session = Session(
        resolution=res,
        package=None,
        torch_arch_list=None,
        cudaarchs="",
        inputs={},
        activation="package",
    )
    planned = []
    for name, flags in extensions:
        ext, args = _extension(name, flags)
        plan = plan_extension(name, args, res, DEFAULT_ARCH_SPECIFIC, None)
        planned.append((ext, args, plan))
    cmd = SimpleNamespace(distribution=SimpleNamespace(src_root=str(root)))
    return lint_build(cmd, session, planned)


def test_the_build_lints_through_defines_it_cannot_read_and_says_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two extensions with torchani's flags: the build's lint raises nothing, names each
    opaque -D value once in the log, and proves only what a readable value decides."""
    from archguard._integration import common

    monkeypatch.setattr(common, "_announced", set())
    monkeypatch.delenv("ARCHGUARD_LINT", raising=False)
    (tmp_path / "k.cu").write_text(OPAQUE_GUARDS)
    flags = [*CUAEV_FLAGS, "-DREADABLE=1"]
    proofs = _lint_in_a_build(tmp_path, [("_a", flags), ("_b", flags)])
    reached = {
        "sm_80": "'#error a proof for sm_80' (k.cu:11)",  # (the last #error it reaches)
        "sm_90": "'#error defined, certainly' (k.cu:2)",
        "compute_90": "'#error defined, certainly' (k.cu:2)",
    }
    assert proofs == {"_a": reached, "_b": reached}
    log = capsys.readouterr().err
    said = "-DCUB_NS_PREFIX='namespace cuaev {' is not an expression the lint reads"
    assert log.count(said) == 1, log
    assert log.count("-DCUB_NS_POSTFIX='}' is not an expression") == 1
    assert "CUB_NS_QUALIFIER" not in log  # ::cuaev::cub is tokens the lint reads
    assert "Traceback" not in log


def test_an_unexpected_failure_of_the_lint_is_a_warning_and_the_build_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """archguard's own reading is never a decision: an exception of the lint's own (here,
    analyse failing) is one warning naming the extension, its sources and the exception;
    the build goes on with the planned targets, even with lint = "error". A flag naming a
    file the system cannot look up (a name too long for it) is read as no file."""
    from archguard._integration import prebuild

    def boom(*_: object) -> None:
        raise RuntimeError("cannot read ' {'")

    (tmp_path / "k.cu").write_text(OPAQUE_GUARDS)
    monkeypatch.setenv("ARCHGUARD_LINT", "error")
    too_long = ["-include", "x" * 5000, "-I" + "y" * 5000, *CUAEV_FLAGS]
    assert list(_lint_in_a_build(tmp_path, [("_long", too_long)])) == ["_long"]
    assert "warning" not in capsys.readouterr().err
    monkeypatch.setattr(prebuild, "analyse", boom)
    assert _lint_in_a_build(tmp_path, [("_c", CUAEV_FLAGS)]) == {}
    log = capsys.readouterr().err
    assert (
        "warning: lint: extension _c: archguard's lint could not read its sources or flags "
        "(k.cu: RuntimeError: cannot read ' {'); no lint for it, and it builds with sm_80 "
        "sm_90 compute_90 as planned"
    ) in log, log


NAMESPACED_KERNEL = """\
// torchani's way: two -D values open and close a namespace around the kernel
NS_OPEN
__global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
NS_CLOSE
#if defined(NS_OPEN) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error no device below 7.0
#endif
void launch(float* x, int n) { x::add_one<<<(n + 127) / 128, 128>>>(x, n); }
"""


@needs_nvcc
@needs_cuda_torch
def test_nvcc_defines_that_are_no_expressions_build_with_archguard_as_without(
    tmp_path: Path,
) -> None:
    """A package whose nvcc flags define `-DNS_OPEN=namespace x {` and `-DNS_CLOSE=}` (as
    torchani's cuaev does for CUB) builds with archguard (ARCHGUARD_ARCH_LIST=8.0) as it
    builds without (ARCHGUARD_DISABLE=1, TORCH_CUDA_ARCH_LIST=8.0): the lint says once that
    it takes those values as opaque, and the build goes on."""
    from realtools import MINI, build_env, extension, pyproject, run_in, setup_py

    flags = ["-O2", "-DNS_OPEN=namespace x {", "-DNS_CLOSE=}"]
    logs = {}
    for label, env in (
        ("with", build_env(ARCHGUARD_ARCH_LIST="8.0")),
        ("without", build_env(ARCHGUARD_DISABLE="1", TORCH_CUDA_ARCH_LIST="8.0")),
    ):
        root = tmp_path / label
        root.mkdir()
        (root / "kernel.cu").write_text(NAMESPACED_KERNEL)
        (root / "mod.c").write_text((MINI / "mod.c").read_text())
        ext = extension("_minicuda", ["mod.c", "kernel.cu"], flags)
        (root / "setup.py").write_text(setup_py("nsdefines", [ext]))
        (root / "pyproject.toml").write_text(pyproject("torch-archguard"))
        proc = run_in(root, sys.executable, "setup.py", "build_ext", "--inplace", env=env)
        logs[label] = proc.stdout + proc.stderr
        assert proc.returncode == 0, logs[label][-3000:]
        assert len(list(root.glob("_minicuda*.so"))) == 1
    said = "-DNS_OPEN='namespace x {' is not an expression the lint reads"
    assert logs["with"].count(said) == 1, logs["with"][-3000:]
    assert "nvcc gets -gencode=arch=compute_80,code=sm_80" in logs["with"]
    assert "Traceback" not in logs["with"]
