"""The stub lint on real public sources (issue #9): excerpts of real projects' CUDA code,
vendored verbatim under ``tests/lint_corpus/<project>/`` with their licence and a
PROVENANCE file (archive, sha256, the line ranges). Every finding below was checked by hand
against nvcc's rules: which image each served device loads from the cu130 list
(sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 + compute_90 compute_120) and which branch that
image's ``__CUDA_ARCH__`` / feature macros compile.

- CUTLASS 4.2.0.0 (nvidia-cutlass wheel): Hopper GMMA wrappers gated on
  ``CUTE_ARCH_MMA_SM90A_ENABLED``, which ``cute/arch/config.hpp`` defines only when
  ``cutlass/arch/config.h`` saw ``__CUDA_ARCH_FEAT_SM90_ALL`` (``sm_90a`` only): a plain
  ``sm_90`` cubin compiles each to ``CUTE_INVALID_CONTROL_PATH`` (a trap) on an H100.
- llama.cpp (vendored in llama_cpp_python 0.3.36): parameter tables chosen by
  ``__CUDA_ARCH__ == 1210`` (DGX Spark) and ``>= 890`` (Ada), after HIP-only branches.
- mamba_ssm 2.3.2.post1: a bf16 converter under ``>= 800`` (every device that compiles it
  out loads its own sm_75 image: no finding).
- torch-harmonics 0.8.0: inverted ``< 900`` guards choosing 32-bit over 128-bit atomics
  (no finding with cu130; a finding once a 9.x device runs PTX of a lower arch).
- flashinfer-python 0.7.4 (its wheel ships the sources, with CUTLASS and TensorRT-LLM code
  vendored): ``CUDA_ARCH_FAMILY(X)`` expanding to ``(false)`` on plain targets inside
  TensorRT-LLM's grid-dependency guard; an ``#error`` for plain targets >= 9.0 once
  ``CUDA_VERSION >= 12090``; ``#ifdef __CUDA_ARCH_SPECIFIC__`` setting only a ``constexpr
  bool``; a host launcher's ``!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900``.
- tilelang 0.1.15 (its wheel ships the CUDA templates its JIT compiles):
  ``__CUDA_ARCH_FAMILY_SPECIFIC__ == 1000/1030/1100`` comparisons, arch guards combined with
  ``__CUDACC_VER_MAJOR__``/``_MINOR__``, and ``__CUDA_ARCH_FEAT_SM100_ALL`` where an ``f``
  target is not enough.

- vllm 0.34.0: a `constexpr` value computed from `__CUDA_ARCH__` (`kHAS_FAST_REDUX`) read by
  `if constexpr`, and a host dtype switch whose bf16 case is under `__CUDA_ARCH__ >= 800 ||
  !defined(__CUDA_ARCH__)`, which decides whether a device pass instantiates the bf16
  all-reduce kernels.
- flash-attn 2.8.3.post2: `>= 800` / `>= 750` regions that set only types and a
  `constexpr bool`.
- gptqmodel 7.7.0: a `< 750` guard around host code (a stub entry point; the real dispatch
  and launch in the #else).
- NATTEN 0.21.7 (its sdist, with CUTLASS 4.3.5 vendored under third_party/cutlass): CUTLASS /
  CuTe kernels built without their ``a`` (or ``f``) target trap on the GPU they were written
  for. NATTEN's Hopper FMHA (``!defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)``) and Blackwell FMHA
  (SM100A/SM100F/SM103A/SM103F switches) and CUTLASS's cooperative SM90 GEMM
  (``ENABLE_SM90_KERNEL_LEVEL`` from the FEAT macros and
  ``CUDA_ARCH_CONDITIONAL_OR_FAMILY(1200/1210)``) each get their switch through the real
  include chain (``cutlass/pipeline/pipeline.hpp`` -> ... -> ``cutlass/arch/config.h``;
  ``cutlass/cutlass.h`` -> ``cutlass/detail/helper_macros.hpp``), excerpted under
  ``natten/include/``. And the precision side: CuTe atoms whose ``#else`` trap a device's own
  compile takes while the image it loads takes the real path (``== 1000`` for 10.3 on
  ``sm_100``, ``<= 900`` for 11.0 on ``compute_90``) are no finding.

The macro facts (which target defines ``__CUDA_ARCH_SPECIFIC__`` /
``__CUDA_ARCH_FAMILY_SPECIFIC__`` / the FEAT macros, and their values; ``__CUDACC_VER_*``)
are checked against the real nvcc by ``tests/test_lint.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from archguard.core.arch import Targets, parse_targets
from archguard.core.toolkit import bundled_toolkit, known_arches
from archguard.core.torchbuild import bundled_torch
from archguard.lint.guards import Report, Wheel, analyse
from archguard.lint.sources import Sources, parse_defines
from realtools import REPO, run_main

CORPUS = REPO / "tests" / "lint_corpus"
TOOLKIT = bundled_toolkit((13, 0))
TORCH = bundled_torch((13, 0), Version("2.13")).targets
CU130 = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_90 compute_120"
# llama.cpp's CMake passes none of its HIP/MUSA switches to a CUDA build; its AMD names come
# from vendors/hip.h, which a CUDA build never includes.
LLAMA_CUDA_BUILD = [
    "-UGGML_USE_HIP",
    "-UGGML_USE_MUSA",
    *(f"-U{n}" for n in ("RDNA1", "RDNA2", "RDNA3", "RDNA3_0", "RDNA3_5", "RDNA4", "GCN", "CDNA")),
]


def targets(text: str) -> Targets:
    return parse_targets(text, "test", known=known_arches())


def lint(path: str, wheel: str = CU130, flags: list[str] | None = None) -> Report:
    file = CORPUS / path
    # a project's include/ holds its excerpted headers at their original paths (natten/include
    # mirrors CUTLASS's include/): passed as -I, as the project's build passes the original
    dirs = [file.parent, *[d for d in [file.parent / "include"] if d.is_dir()]]
    sources = Sources.on_disk(dirs, [file.parent], parse_defines(flags or []))
    return analyse([str(file)], Wheel(targets(wheel), TOOLKIT, TORCH), sources)


# the family/arch-specific list of the hand answers: sm_90a for 9.0 only, sm_100f for the
# 10.x family (10.0, 10.3), sm_120f for 12.0 and 12.1; 11.0 is not served
FAMILY = "sm_75 sm_80 sm_86 sm_90a sm_100f sm_120f"
# flashinfer's GEMM JIT passes the SM100 switch, never the SM90 one
GDC_BUILD = ["-DCUTLASS_ENABLE_GDC_FOR_SM100=1", "-UCUTLASS_ENABLE_GDC_FOR_SM90"]
BLACKWELL_UP = ("10.0", "10.3", "11.0", "12.0", "12.1")


def found(report: Report) -> set[tuple[str, int, str, str, str, str]]:
    return {
        (Path(f.file).name, f.line, f.device.cc_text, f.image, f.kind, str(f.fix))
        for f in report.findings
    }


def test_every_project_is_vendored_with_its_licence_and_provenance() -> None:
    projects = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
    assert projects == [
        "cutlass",
        "flash_attn",
        "flashinfer",
        "gptqmodel",
        "llama_cpp",
        "mamba_ssm",
        "natten",
        "tilelang",
        "torch_harmonics",
        "vllm",
    ]
    for name in projects:
        provenance = (CORPUS / name / "PROVENANCE").read_text()
        assert "sha256: " in provenance and "version: " in provenance
        assert "licen" in (CORPUS / name / "LICENSE").read_text().lower()
        for excerpt in [*CORPUS.joinpath(name).glob("*.cu"), *CORPUS.joinpath(name).glob("*.cuh")]:
            assert excerpt.name in provenance, (name, excerpt.name)
        # headers under include/ (original paths, for the #include lines): named by their path
        include = CORPUS / name / "include"
        for header in include.rglob("*") if include.is_dir() else []:
            if header.is_file():
                where = header.relative_to(CORPUS / name).as_posix()
                assert f"-> {where} lines " in provenance, (name, where)


def test_cutlass_sm90a_wrappers_trap_on_a_plain_sm_90_cubin() -> None:
    report = lint("cutlass/mma_sm90_gmma.cu")
    # Lines 23, 37, 50: `#if defined(CUTE_ARCH_MMA_SM90A_ENABLED)`, a macro line 10-11 define
    # only under __CUDA_ARCH_FEAT_SM90_ALL; each #else is CUTE_INVALID_CONTROL_PATH.
    assert found(report) == {
        ("mma_sm90_gmma.cu", line, "9.0", "sm_90", "trap", "9.0a") for line in (23, 37, 50)
    }
    # Line 10's own region only defines the macro (reported where it is used); line 64's
    # `#if defined(__CUDA_ARCH__)` holds for every image: neither is a finding.
    assert {f.line for f in report.findings}.isdisjoint({10, 64})
    assert not report.not_understood
    with_a = lint("cutlass/mma_sm90_gmma.cu", CU130.replace("sm_90 ", "sm_90a "))
    assert with_a.ok and not with_a.findings


def test_cutlass_configuration_header_is_read_not_reported() -> None:
    """config.h's `#if (__CUDACC_VER_MAJOR__ > 12 || ...)` are toolkit-version guards, true on
    13.0, never findings; the arch-gated `#define`s are configuration, judged where used.
    `CUDA_ARCH_FAMILY(1000)` (a function-like macro the excerpt defines) is evaluated."""
    report = lint("cutlass/arch_config.cu")
    assert report.ok and not report.findings and not report.not_understood
    dead = {(d.line, d.needs) for d in report.dead}
    assert (33, ("9.0a",)) in dead  # CUTLASS_ARCH_MMA_SM90A_ENABLED: only sm_90a defines it
    assert all(d.line not in (28, 39, 47, 60, 71) for d in report.dead)  # toolkit guards


def test_cutlass_warp_mma_tables_name_89_and_121() -> None:
    report = lint("cutlass/mma_tensor_op.cu")
    assert found(report) == {
        # `(__CUDA_ARCH__ < 800) || (__CUDA_ARCH__ == 890)`: sm_86 takes the #else
        ("mma_tensor_op.cu", 11, "8.9", "sm_86", "alternative", "8.9"),
        # the #else after `== 1200`: 12.1 loads sm_120, which takes the `== 1200` branch
        ("mma_tensor_op.cu", 15, "12.1", "sm_120", "alternative", "12.1"),
    }
    # The inverted `< 800` guard whose body is assert(0) (line 27): only 7.5 compiles it, and
    # 7.5 loads its own sm_75: no finding.
    assert 27 not in {f.line for f in report.findings}
    fixed = lint("cutlass/mma_tensor_op.cu", CU130 + " sm_89 sm_121")
    assert not fixed.findings


def test_llama_cpp_tables_once_the_build_says_it_is_not_hip() -> None:
    # Without the build's macros the HIP-only branches before the arch tests are undecided:
    # said, never silently skipped.
    plain = lint("llama_cpp/mmvq.cu")
    assert not plain.findings
    undecided = {(Path(f).name, n): why for f, n, why in plain.not_understood}
    assert "the branches before it depend on" in undecided[("mmvq.cu", 26)]
    assert "GGML_USE_MUSA" in undecided[("mmvq.cu", 46)]
    report = lint("llama_cpp/mmvq.cu", flags=LLAMA_CUDA_BUILD)
    assert found(report) == {
        # `#elif __CUDA_ARCH__ == GGML_CUDA_CC_DGX_SPARK`: sm_120 takes the GENERIC table
        ("mmvq.cu", 26, "12.1", "sm_120", "alternative", "12.1"),
        # `== VOLTA || >= ADA_LOVELACE`: sm_86 takes turing_plus's batch sizes
        ("mmvq.cu", 46, "8.9", "sm_86", "alternative", "8.9"),
    }
    # `>= TURING && < AMPERE` (line 24): only 7.5, on its own cubin. Line 66 of common.cuh
    # (`== VOLTA`) is dead for a list without 7.0.
    assert 24 not in {f.line for f in report.findings}
    assert ("common.cuh", 66) in {(Path(d.file).name, d.line) for d in report.dead}


def test_llama_cpp_feature_macros_every_image_satisfies() -> None:
    """`BLACKWELL_MMA_AVAILABLE` (`>= 1200 && < 1300`, defined in common.cuh) holds for 12.0
    and 12.1 via sm_120 and natively for neither 10.x nor 11.0; `CUDART_VERSION` is a
    toolkit guard, not an arch guard."""
    report = lint("llama_cpp/quantize.cu", flags=LLAMA_CUDA_BUILD)
    assert not report.findings and not report.errors


def test_mamba_bf16_converter_on_the_images_that_need_it() -> None:
    report = lint("mamba_ssm/selective_scan_common.cu")
    assert report.ok and not report.findings and not report.dead


def test_torch_harmonics_inverted_guard() -> None:
    assert not lint("torch_harmonics/attention_bwd_cuda.cu").findings
    # With no 9.x cubin, a 9.0 device JITs compute_86 (860 < 900: the 32-bit atomics, line
    # 13) where its own compile takes the 128-bit #else (line 30): a finding, fixed by 9.0.
    # (Line 4's extra __syncwarp, compiled in for the image and out natively, is not: the
    # lint reports code the device's own compile has and its image lacks.)
    report = lint("torch_harmonics/attention_bwd_cuda.cu", "sm_80 sm_86 compute_86")
    nine = {(line, kind, fix) for _, line, cc, image, kind, fix in found(report) if cc == "9.0"}
    assert nine == {(30, "alternative", "9.0")}
    assert all(f.image == "compute_86 (JIT)" for f in report.findings if f.device.cc_text == "9.0")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_cli_takes_the_builds_macros(fmt: str) -> None:
    args = ["lint", str(CORPUS / "llama_cpp" / "mmvq.cu"), "--cuda", "13.0", "--torch", "2.13"]
    flags = [f"-U{f[2:]}" if fmt == "text" else f"-U {f[2:]}" for f in LLAMA_CUDA_BUILD]
    proc = run_main(*args, *" ".join(flags).split(), "--format", fmt)
    assert proc.returncode == 1, proc.stderr
    if fmt == "json":
        lines = {(Path(f["file"]).name, f["line"]) for f in json.loads(proc.stdout)["findings"]}
        assert lines == {("mmvq.cu", 26), ("mmvq.cu", 46)}
    else:
        assert "mmvq.cu:26" in proc.stdout and "fix: add 12.1" in proc.stdout


def test_the_builds_macros_are_read_as_nvcc_reads_them() -> None:
    """setuptools' define_macros first, then -D/-U flags in order; the last word wins."""
    got = parse_defines(
        ["-O3", "-DA", "-D", "B=2", "-UC", "--define-macro", "E=x y", "-DA=3", "-D1BAD", "-U"],
        [("C", None), ("D", "4")],
    )
    assert got == {"C": None, "D": "4", "A": "3", "B": "2", "E": "x y"}
    # an int value, as setuptools takes it (inplace-abn 1.1.0: define_macros=[("WITH_CUDA", 1)])
    assert parse_defines([], [("WITH_CUDA", 1)]) == {"WITH_CUDA": "1"}


def test_flashinfer_grid_dependency_guard_reads_false_from_cutlass_family_macros() -> None:
    """Line 12's condition reaches ``CUDA_ARCH_FAMILY(1000)``, which cutlass_macros.cuh
    defines as ``(false)`` without ``__CUDA_ARCH_FAMILY_SPECIFIC__``: false for every cu130
    image (decided, never "depends on false"), true for each 10.x-12.x device's own ``f``/``a``
    compile. The griddepcontrol asm (lines 38, 48; no #else) is compiled out of the image those
    devices load; the fix is the device's family target."""
    report = lint("flashinfer/grid_dependency_control.cu", flags=GDC_BUILD)
    assert not report.not_understood
    images = {"10.0": "sm_100", "10.3": "sm_100", "11.0": "compute_90 (JIT)"}
    assert found(report) == {
        ("grid_dependency_control.cu", line, cc, images.get(cc, "sm_120"), "empty", f"{cc}f")
        for line in (38, 48)
        for cc in BLACKWELL_UP
    }
    # Line 54 only sets `static constexpr bool IsGdcGloballyEnabled`, which nothing scanned
    # uses: a value, judged by its uses, not compiled-out code.
    assert 54 not in {f.line for f in report.findings}
    assert 12 in {d.line for d in report.dead}  # no cu130 image enables GDC
    # With family targets each device's image enables it as its own compile does.
    assert not lint("flashinfer/grid_dependency_control.cu", FAMILY, GDC_BUILD).findings


def test_flashinfer_grid_dependency_guard_with_both_switches() -> None:
    """The same guards with both PDL switches, -DCUTLASS_ENABLE_GDC_FOR_SM90 and
    -DCUTLASS_ENABLE_GDC_FOR_SM100 (PROVENANCE names which of flashinfer's JIT modules pass
    which): line 5's SM90 condition also needs `__CUDA_ARCH_FEAT_SM90_ALL`, which only sm_90a
    defines, so the plain sm_90 cubin 9.0 loads compiles the griddepcontrol asm out as well
    (fix: 9.0a); the 10.x-12.x devices' fix is their family target, as without the switch."""
    both = ["-DCUTLASS_ENABLE_GDC_FOR_SM90", "-DCUTLASS_ENABLE_GDC_FOR_SM100"]
    report = lint("flashinfer/grid_dependency_control.cu", flags=both)
    assert not report.not_understood
    images = {"9.0": "sm_90", "10.0": "sm_100", "10.3": "sm_100", "11.0": "compute_90 (JIT)"}
    fixes = {"9.0": "9.0a"}
    assert found(report) == {
        (
            "grid_dependency_control.cu",
            line,
            cc,
            images.get(cc, "sm_120"),
            "empty",
            fixes.get(cc, f"{cc}f"),
        )
        for line in (38, 48)
        for cc in ("9.0", *BLACKWELL_UP)
    }
    # no cu130 image enables GDC through either block
    assert {5, 12} <= {d.line for d in report.dead}
    assert not lint("flashinfer/grid_dependency_control.cu", FAMILY, both).findings


def test_flashinfer_error_for_plain_targets_and_an_unused_value() -> None:
    """arch_condition.h: `#if __CUDA_ARCH__ >= 900` / `#if CUDA_VERSION >= 12090` (13000 once
    <cuda.h> is included: the toolkit's value, though cuda.h is outside the scan) / `#if
    !defined(__CUDA_ARCH_SPECIFIC__) && !defined(__CUDA_ARCH_FAMILY_SPECIFIC__)` / `#error`:
    reached by every plain image >= 9.0, by none of the family list's. Line 13's
    `#ifdef __CUDA_ARCH_SPECIFIC__` only sets `isArchSpecific`, passed on through
    `arch_info::mArchSpecific` and `is_arch_specific(_v)` and used by nothing scanned."""
    report = lint("flashinfer/arch_condition.cu")
    assert {(e.line, e.images) for e in report.errors} == {
        (42, ("sm_90", "sm_100", "sm_120", "compute_90", "compute_120"))
    }
    assert not report.findings and not report.not_understood
    family = lint("flashinfer/arch_condition.cu", FAMILY)
    assert not family.errors and not family.findings  # the #error-only region is no hazard


def test_flashinfer_host_launcher_decides_which_images_have_the_kernels() -> None:
    """fast_topk_clusters_exact.cuh: the kernels (line 5) and the host launcher's dispatch
    (line 38) sit under `!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900`. The host pass takes
    line 38 everywhere; a device pass below 9.0 takes its #else, so it never instantiates the
    kernels. With cu130 every device >= 9.0 loads an image >= 9.0: no finding. With no image
    >= 9.0, those devices JIT compute_86, which has no kernel to launch: a missing kernel."""
    assert not lint("flashinfer/fast_topk_clusters_exact.cu").findings
    report = lint("flashinfer/fast_topk_clusters_exact.cu", "sm_80 sm_86 compute_86")
    ccs = ("9.0", *BLACKWELL_UP)
    assert found(report) == {
        ("fast_topk_clusters_exact.cu", line, cc, "compute_86 (JIT)", "missing-kernel", cc)
        for line in (5, 38)
        for cc in ccs
    }


def test_tilelang_family_values_and_toolkit_guards() -> None:
    """common.h's `TL_CUDA_ARCH_TCGEN05_ENABLED` (FEAT_SM100/101/103/110 or
    `__CUDA_ARCH_FAMILY_SPECIFIC__ == 1000/1010/1030/1100`) and `__CUDA_ARCH__ >= 1000` guards
    combined with `__CUDACC_VER_MAJOR__ > 12 || (== 12 && _MINOR__ >= 8/9)`, all decided."""
    report = lint("tilelang/copy_sm100.cu")
    assert not report.not_understood
    assert found(report) == {
        # 11.0 JITs compute_90 (900): the scalar / two-128-bit #else where sm_110 takes the #if
        ("common.cuh", 20, "11.0", "compute_90 (JIT)", "alternative", "11.0"),
        ("copy_sm100.cu", 7, "11.0", "compute_90 (JIT)", "alternative", "11.0"),
        # tcgen05 loads: a dependent static_assert on every plain image; the family fixes it
        *(
            ("copy_sm100.cu", line, cc, image, "alternative", f"{cc}f")
            for line in (61, 76)
            for cc, image in (("10.0", "sm_100"), ("10.3", "sm_100"), ("11.0", "compute_90 (JIT)"))
        ),
    }
    # 10.3 loads sm_100f, whose __CUDA_ARCH_FAMILY_SPECIFIC__ is 1000: the tcgen05 path, as
    # 10.3's own f/a compile has (its plain sm_103 compile, which it does not load, would not)
    assert not lint("tilelang/copy_sm100.cu", FAMILY).findings


def test_tilelang_stochastic_rounding_needs_the_arch_specific_target() -> None:
    """cuda_fp4.h line 22: `defined(__CUDA_ARCH_FEAT_SM100_ALL) || ...SM103_ALL`, which only
    `a` targets define: the family cubin sm_100f is not enough for 10.0 or 10.3. Line 8's
    `__CUDACC_VER_MAJOR__ >= 13` is a toolkit guard: its #else is dead with 13.0, never a
    finding."""
    for wheel in (CU130, FAMILY):
        report = lint("tilelang/cuda_fp4.cu", wheel)
        image = "sm_100" if wheel == CU130 else "sm_100f"
        got = {f for f in found(report) if f[0] == "cuda_fp4.cu"}
        assert got == {
            ("cuda_fp4.cu", 22, "10.0", image, "alternative", "10.0a"),
            ("cuda_fp4.cu", 22, "10.3", image, "alternative", "10.3a"),
        }
        assert ("cuda_fp4.cu", 10) in {(Path(d.file).name, d.line) for d in report.dead}


SM75_PTX = "sm_75 compute_75"  # every device above 7.5 JIT-compiles compute_75
ABOVE_75 = ("8.0", "8.6", "8.7", "8.8", "8.9", "9.0", *BLACKWELL_UP)


def test_vllm_a_constexpr_computed_from_the_arch_is_judged_where_it_is_used() -> None:
    """moeTopKFuncs.cuh line 24: `static constexpr bool kHAS_FAST_REDUX = (__CUDA_ARCH__ /
    100) >= 10;` (the #ifdef around it holds in every image), read by line 28's `if
    constexpr`: 11.0 JIT-compiling compute_90 gets false (cg::reduce) where its own compile
    gets true (redux.sync); with compute_86 the only image >= 9.0, every device from 10.0."""
    report = lint("vllm/moeTopKFuncs.cu")
    assert found(report) == {("moeTopKFuncs.cu", 24, "11.0", "compute_90 (JIT)", "value", "11.0")}
    assert {Path(f.used_at).name for f in report.findings} == {"moeTopKFuncs.cu:28"}
    low = lint("vllm/moeTopKFuncs.cu", "sm_80 sm_86 compute_86")
    assert {f.device.cc_text for f in low.findings} == set(BLACKWELL_UP)  # 9.0: 900/100 < 10


def test_vllm_a_host_dtype_switch_decides_which_images_have_the_bf16_kernels() -> None:
    """custom_all_reduce.cu line 107: the bf16 case of the host switch, under `__CUDA_ARCH__ >=
    800 || !defined(__CUDA_ARCH__)`, instantiates `allreduce<nv_bfloat16>`, whose launch macros
    name the reduction kernels. cu130 and sm_80/sm_86/compute_86: every pass >= 8.0 has it
    (7.5 drops it in its own compile too). With only sm_75 + compute_75, the devices above 7.5
    JIT an image without the bf16 kernels: a missing kernel (and line 6's bf16 helpers)."""
    assert not lint("vllm/custom_all_reduce.cu").findings
    assert not lint("vllm/custom_all_reduce.cu", "sm_80 sm_86 compute_86").findings
    report = lint("vllm/custom_all_reduce.cu", SM75_PTX)
    assert found(report) == {
        *(
            ("custom_all_reduce.cu", 107, cc, "compute_75 (JIT)", "missing-kernel", cc)
            for cc in ABOVE_75
        ),
        *(("custom_all_reduce.cu", 6, cc, "compute_75 (JIT)", "empty", cc) for cc in ABOVE_75),
    }


def test_flash_attn_type_and_value_regions_are_judged_by_their_uses() -> None:
    """kernel_traits.h: `>= 800` / `>= 750` regions set only `using` types and `static
    constexpr bool Has_cp_async`; their uses (the kernels) are not in the excerpt, and every
    device >= 8.0 loads an image >= 8.0 with cu130: no finding, even with only compute_75."""
    for wheel in (CU130, "sm_80 sm_86 compute_86", SM75_PTX):
        report = lint("flash_attn/kernel_traits.cu", wheel)
        assert not report.findings and not report.not_understood, wheel


def test_gptqmodel_a_stub_entry_point_for_old_arches_is_dead_code_here() -> None:
    """gptq_marlin.cu line 13: `defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 750` around host
    code (a stub permute kernel and entry point; #else: the real dispatch and launch). No image
    of these lists is below 7.5, so the stub side is dead and every pass has the real one."""
    for wheel in (CU130, "sm_80 sm_86 compute_86", SM75_PTX):
        report = lint("gptqmodel/gptq_marlin.cu", wheel)
        assert not report.findings and not report.errors, wheel
        assert 13 in {d.line for d in report.dead if Path(d.file).name == "gptq_marlin.cu"}


# cu130 with sm_90a in place of sm_90
CU130_90A = CU130.replace("sm_90 ", "sm_90a ")


def test_natten_hopper_fmha_traps_on_a_plain_sm_90_cubin() -> None:
    """fmha_kernel_tma_warpspecialized.hpp:184 `#if !defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)`:
    CUTE_INVALID_CONTROL_PATH (an assert and a printf); the #else (line 28 here) is the kernel. The
    switch comes from cutlass/arch/config.h through pipeline.hpp -> sm90_pipeline.hpp ->
    barrier.h, defined only under `__CUDA_ARCH_FEAT_SM90_ALL`: an H100 loading the plain sm_90
    cubin runs the trap. No other device's own compile has the kernel."""
    report = lint("natten/fmha_kernel_tma_warpspecialized.cu")
    assert found(report) == {
        ("fmha_kernel_tma_warpspecialized.cu", 28, "9.0", "sm_90", "trap", "9.0a")
    }
    assert not report.not_understood and not report.errors
    # the switch is reached through the include chain, not assumed: config.h's SM90A #define
    # is dead for this list (only sm_90a would compile it)
    assert ("config.h", 19, ("9.0a",)) in {
        (Path(d.file).name, d.line, d.needs) for d in report.dead
    }
    fixed = lint("natten/fmha_kernel_tma_warpspecialized.cu", CU130_90A)
    assert not fixed.findings and not fixed.not_understood
    assert not lint("natten/fmha_kernel_tma_warpspecialized.cu", FAMILY).findings


def test_natten_blackwell_fmha_prints_instead_of_running_on_a_plain_sm_100_cubin() -> None:
    """sm100_fmha_fwd_kernel_tma_warpspecialized.hpp:285-292: `#if (!defined(..._SM100A_ENABLED)
    && !..._SM100F_ && !..._SM103A_ && !..._SM103F_)` -> a printf only (a trap: nothing runs),
    #else (line 37 here) the kernel. config.h defines the A switches from the FEAT macros and
    the F ones from CUDA_ARCH_FAMILY(1000/1030), (false) on plain targets: 10.0 and 10.3 load
    sm_100, which has the printf; their family target (10.0f, 10.3f) fixes it. 11.0 JITs
    compute_90 and its own compile has no SM100/SM103 switch either: no finding."""
    report = lint("natten/sm100_fmha_fwd_kernel_tma_warpspecialized.cu")
    assert found(report) == {
        ("sm100_fmha_fwd_kernel_tma_warpspecialized.cu", 37, cc, "sm_100", "trap", f"{cc}f")
        for cc in ("10.0", "10.3")
    }
    assert not report.not_understood and not report.errors
    assert not lint("natten/sm100_fmha_fwd_kernel_tma_warpspecialized.cu", FAMILY).findings


def test_cutlass_435_cooperative_gemm_needs_sm_90a_or_the_12x_family() -> None:
    """CUTLASS 4.3.5 (vendored in NATTEN) sm90_gemm_tma_warpspecialized_cooperative.hpp:359-370:
    ENABLE_SM90_KERNEL_LEVEL is defined from `__CUDA_ARCH_FEAT_SM90/120/121_ALL ||
    CUDA_ARCH_CONDITIONAL_OR_FAMILY(1200) || ...(1210)` (helper_macros.hpp, through
    cutlass/cutlass.h); `#if ! defined(ENABLE_SM90_KERNEL_LEVEL)` traps, the #else (line 54
    here) is the kernel. 9.0 on sm_90 and 12.0/12.1 on sm_120 run the trap; the fixes are 9.0a
    and the 12.x family targets. 10.x and 11.0 trap in their own compiles too: no finding."""
    report = lint("natten/sm90_gemm_tma_warpspecialized_cooperative.cu")
    images = {"9.0": "sm_90", "12.0": "sm_120", "12.1": "sm_120"}
    fixes = {"9.0": "9.0a", "12.0": "12.0f", "12.1": "12.1f"}
    assert found(report) == {
        ("sm90_gemm_tma_warpspecialized_cooperative.cu", 54, cc, images[cc], "trap", fixes[cc])
        for cc in images
    }
    assert not report.not_understood and not report.errors
    assert not lint("natten/sm90_gemm_tma_warpspecialized_cooperative.cu", FAMILY).findings


def test_cute_traps_the_loaded_image_skips_for_the_real_path_are_no_finding() -> None:
    """The precision rule on CuTe's own atoms: a region whose code is a trap, compiled by the
    device's own target and not by the image it loads, which takes the real path instead, loses
    nothing. mma_sm100.hpp: `#if defined(CUTE_ARCH_FFMA2_SM100_ENABLED)` (cute/arch/config.hpp,
    from config.h's `__CUDA_ARCH__ == 1000` switch, plain targets included) / #else
    CUTE_INVALID_CONTROL_PATH: 10.3 loads sm_100 (the real path; its own sm_103 traps).
    mma_sm80.hpp: `CUTE_ARCH_MMA_B1_AND_SM80_ENABLED` for `800 <= __CUDA_ARCH__ <= 900`: 11.0
    JITs compute_90 (the real path; its own compile traps). Neither #else (lines 26 and 46 of
    mma_sm100, 57 of mma_sm80) is reported; the other direction is."""
    reports = {
        (name, wheel): lint(name, wheel)
        for name in ("natten/mma_sm100.cu", "natten/mma_sm80.cu")
        for wheel in (CU130, FAMILY)
    }
    assert {key: found(r) for key, r in reports.items()} == {key: set() for key in reports}
    assert not [r.not_understood for r in reports.values() if r.not_understood]
    # the other direction, where the image takes the trap and the device's own compile the
    # real path: 10.0 JIT-compiling compute_90; 8.0-9.0 JIT-compiling compute_75
    low = lint("natten/mma_sm100.cu", "sm_80 sm_86 sm_90 compute_90")
    assert found(low) == {
        ("mma_sm100.cu", line, "10.0", "compute_90 (JIT)", "trap", "10.0") for line in (24, 44)
    }
    old = lint("natten/mma_sm80.cu", SM75_PTX)
    assert found(old) == {
        ("mma_sm80.cu", 46, cc, "compute_75 (JIT)", "trap", cc)
        for cc in ("8.0", "8.6", "8.7", "8.8", "8.9", "9.0")
    }
