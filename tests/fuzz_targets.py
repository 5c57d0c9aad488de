"""Fuzz targets: every parser that takes outside text, with the inputs hypothesis draws.

Contract for each target: a result, or archguard's own error type with a message. Any other
exception is a bug. ``tests/test_fuzz.py`` runs each target for a bounded number of examples
in CI; ``scripts/fuzz.py`` runs them for minutes each.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml
from hypothesis import strategies as st

from archguard.binaries.verify import record_expectation
from archguard.core.arch import parse_arch_list, parse_targets
from archguard.core.cuda import CudaVersion
from archguard.core.policy import load_policy, parse_policy
from archguard.core.toolkit import known_arches
from archguard.core.torchbuild import parse_torch_version
from archguard.detect.cuobjdump import combine, parse_headers, parse_listing
from archguard.detect.nvcc import parse_nvcc_version, parse_target_list
from archguard.errors import ArchguardError
from archguard.nvcc.flags import find_arch_flags
from archguard.settings.config import (
    env_arch_list,
    env_disabled,
    load_project,
    parse_config,
    unknown_env_warnings,
)
from archguard.settings.optin import opted_in

BUNDLED_POLICY = (
    Path(__file__).resolve().parent.parent / "defaults" / "arch_policy.yml"
).read_text()

# Pieces that are almost right: the fuzzer spends its time near the grammar.
TOKENS = [
    "8.6",
    "9.0a",
    "10.0f",
    "sm_90a",
    "sm_100f",
    "compute_90",
    "+PTX",
    "+ptx",
    "Ampere",
    "Blackwell+Tegra",
    ";",
    " ",
    ",",
    "12.1a",
    "7.0",
    "5.0",
    "sm_",
    "a",
    "f",
    ".",
    "\t",
    "1",
    "99.9",
    "+",
    "PTX",
    "native",
    "all",
    "\x00",
    "é",
    "\n",
    "sm_120a+PTX",
]
FLAG_TOKENS = [
    "-gencode",
    "--generate-code",
    "-arch",
    "--gpu-architecture",
    "-code",
    "--gpu-code",
    "arch=compute_90,code=sm_90",
    "arch=compute_100f,code=[sm_100f,compute_100f]",
    "-gencode=arch=compute_80,code=sm_80",
    "sm_86",
    "compute_75",
    "native",
    "-O2",
    "-I/x/monarch",
    "=",
    ",",
    "lto_90",
    "code=",
    "arch=",
]
LISTING_LINES = [
    "ELF file    1: x.1.sm_90.cubin",
    "PTX file    1: x.1.sm_90.ptx",
    "ELF file    2: x.2.sm_100.cubin",
    "PTX file    2: x.2.sm_100f.ptx",
    "cuobjdump info    : File 'x' does not contain device code",
    "",
]
HEADER_LINES = [
    "Fatbin elf code:",
    "================",
    "arch = sm_90",
    "arch = sm_100f",
    "Fatbin ptx code:",
    "arch = sm_90a",
    "code version = [1,8]",
    "host = linux",
    "compressed",
    "",
]


def text_near(tokens: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=60),
        st.lists(st.sampled_from(tokens), max_size=12).map("".join),
        st.lists(st.one_of(st.sampled_from(tokens), st.text(max_size=3)), max_size=12).map("".join),
    )


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text_near(TOKENS)
)
plain_data = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(
            st.one_of(
                st.sampled_from(
                    [
                        "schema",
                        "rows",
                        "arch_exceptions",
                        "cu128",
                        "cu130",
                        "arch_list",
                        "reason",
                        "torch",
                        "drop",
                        "arch_list_by_cuda",
                        "policy",
                    ]
                ),
                st.text(max_size=8),
            ),
            children,
            max_size=5,
        ),
    ),
    max_leaves=25,
)


def mutated_policy() -> st.SearchStrategy[str]:
    """The bundled policy with lines deleted, duplicated or characters replaced."""
    lines = BUNDLED_POLICY.splitlines()

    @st.composite
    def build(draw: st.DrawFn) -> str:
        out = list(lines)
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(out) - 1))
            op = draw(st.sampled_from(["delete", "dup", "poke", "indent"]))
            if op == "delete":
                del out[i]
            elif op == "dup":
                out.insert(i, out[i])
            elif op == "indent":
                out[i] = " " + out[i]
            elif out[i]:
                j = draw(st.integers(0, len(out[i]) - 1))
                char = draw(st.sampled_from(list("&*!:[]{}'\"#-9a ")))
                out[i] = out[i][:j] + char + out[i][j + 1 :]
            if not out:
                break
        return "\n".join(out)

    return build()


def expect_ok_or_archguard_error(fn: Callable[[], object]) -> None:
    try:
        fn()
    except ArchguardError as exc:
        assert str(exc), "archguard errors carry a message"


# --- targets ------------------------------------------------------------------------------


def fuzz_arch_list(text: str) -> None:
    expect_ok_or_archguard_error(lambda: parse_arch_list(text, "fuzz", known=known_arches()))
    expect_ok_or_archguard_error(lambda: parse_targets(text, "fuzz", known=known_arches()))


def fuzz_policy_data(data: object) -> None:
    expect_ok_or_archguard_error(lambda: parse_policy(data, "fuzz.yml", known_arches()))


def fuzz_policy_text(text: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write(text)
    try:
        expect_ok_or_archguard_error(lambda: load_policy(f.name))
    finally:
        Path(f.name).unlink()


def fuzz_config_table(table: object) -> None:
    expect_ok_or_archguard_error(lambda: parse_config(table, "fuzz [tool.archguard]", Path()))


def fuzz_pyproject_bytes(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "pyproject.toml").write_bytes(raw)
        hook_says = opted_in(str(Path(tmp, "pyproject.toml")))  # raising fails the fuzz
        try:
            project = load_project(tmp)
        except ArchguardError:
            return
        assert project.active is hook_says  # one opt-in check: the hook and the reader agree


def fuzz_environment(value: str) -> None:
    env = {"ARCHGUARD_DISABLE": value, "ARCHGUARD_ARCH_LIST": value, f"ARCHGUARD_{value}": "1"}
    expect_ok_or_archguard_error(lambda: env_disabled(env))
    expect_ok_or_archguard_error(lambda: env_arch_list(env))
    unknown_env_warnings(env)


def fuzz_versions(text: str) -> None:
    expect_ok_or_archguard_error(lambda: parse_torch_version(text))
    expect_ok_or_archguard_error(lambda: CudaVersion.parse(text))
    expect_ok_or_archguard_error(lambda: parse_nvcc_version(text))
    expect_ok_or_archguard_error(lambda: parse_target_list(text, "sm", "fuzz"))


def fuzz_cuobjdump(listing: str, headers: str) -> None:
    parsed_listing = parse_listing(listing)
    parsed_headers = parse_headers(headers)
    expect_ok_or_archguard_error(lambda: combine(parsed_listing, parsed_headers, "fuzz"))


def fuzz_nvcc_flags(args: list[str]) -> None:
    expect_ok_or_archguard_error(lambda: find_arch_flags(args))


def fuzz_record(data: object) -> None:
    expect_ok_or_archguard_error(lambda: record_expectation(json.dumps(data), "fuzz.json"))


# name -> (target, strategy for its arguments as a tuple)
CPP_TOKENS = [
    "#if ",
    "#ifdef ",
    "#ifndef ",
    "#elif ",
    "#else",
    "#endif",
    "#define ",
    "#undef ",
    '#include "h.h"',
    "#error x",
    "\n",
    "__CUDA_ARCH__",
    "__CUDA_ARCH_FEAT_SM90_ALL",
    "__CUDA_ARCH_SPECIFIC__",
    "defined(",
    "defined ",
    ")",
    "(",
    ">=",
    "<",
    "==",
    "&&",
    "||",
    "!",
    "?",
    ":",
    "890",
    "0x10",
    "1",
    "0",
    "/",
    "%",
    "<<",
    "FOO",
    "FOO(x)",
    ",",
    "/*",
    "*/",
    "//",
    "\\\n",
    "'a'",
    "__has_include(<x>)",
    "__trap();",
    " ",
]


def fuzz_preprocessor(text: str, header: str) -> None:
    """The lint reads any text without a traceback: a result or archguard's own error."""
    from archguard.core.toolkit import bundled_toolkit
    from archguard.lint.expressions import Macros, Unparsable, evaluate, parse_define
    from archguard.lint.guards import Wheel, analyse
    from archguard.lint.lines import logical_lines
    from archguard.lint.sources import Sources
    from archguard.lint.targets import Target

    for line in logical_lines(text):
        parse_define(line.text)
        with contextlib.suppress(Unparsable):  # (deep nesting is Unparsable, not a crash)
            evaluate(line.text, Macros(Target("sm_90", None).macros("900", CudaVersion(13, 0))))
    toolkit = bundled_toolkit((13, 0))
    files = {"a.cu": text, "h.h": header}
    targets = parse_targets("sm_80 sm_86 sm_90 compute_90", "fuzz", known=known_arches())
    resolve = lambda n, q, i: n if n in files else None  # noqa: E731
    report = analyse(
        ["a.cu"], Wheel(targets, toolkit, targets), Sources(files.__getitem__, resolve)
    )
    assert report.files >= 1


# -D values released setup.py files pass nvcc: torchani's cuaev (its CUB in a namespace),
# torch's extension flags, CUTLASS's switches, and values that are expressions
REAL_DEFINES = [
    "-DCUB_NS_PREFIX=namespace cuaev {",
    "-DCUB_NS_POSTFIX=}",
    "-DCUB_NS_QUALIFIER=::cuaev::cub",
    "-DTORCH_EXTENSION_NAME=_C",
    '-DVERSION="1.2"',
    "-D_GLIBCXX_USE_CXX11_ABI=1",
    "-DWITH_CUDA",
    "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1",
    "-DNDEBUG",
    "-DFOO=(1<<3)",
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    '-DPYBIND11_COMPILER_TYPE="_gcc"',
    "-DTORCH_API_INCLUDE_EXTENSION_H",
]
DEFINE_NAMES = ["CUB_NS_PREFIX", "CUB_NS_POSTFIX", "FOO", "WITH_CUDA", "VERSION", "NDEBUG"]
random_defines = st.builds(
    lambda name, value: f"-D{name}={value}",
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True),
    text_near([*CPP_TOKENS, "{", "}", "namespace", '"', "::"]),
)


def fuzz_lint_defines(flags: list[str], text: str) -> None:
    """-D values from released setup.py files and random ones, with sources that use them:
    nothing raises out of the lint's entry points, not even archguard's own error (a value
    that is no expression is opaque), and an #error under a condition on an opaque value
    is never reached (never a proof)."""
    from archguard.core.toolkit import bundled_toolkit
    from archguard.lint.expressions import given_macro
    from archguard.lint.guards import Wheel, analyse
    from archguard.lint.sources import Sources, parse_defines

    defines = parse_defines(flags)
    for name, value in defines.items():
        if value is not None:
            given_macro(name, value)
    first = "".join(f"#if {n}\n#error opaque {n}\n#endif\n" for n in defines)
    files = {"a.cu": first + text}
    targets = parse_targets("sm_80 sm_90 compute_90", "fuzz", known=known_arches())
    wheel = Wheel(targets, bundled_toolkit((13, 0)), targets)
    report = analyse(["a.cu"], wheel, Sources(files.__getitem__, lambda n, q, i: None, defines))
    assert set(report.opaque) <= set(defines)
    reached = {e.text for e in report.errors}
    assert not {f"#error opaque {n}" for n in report.opaque} & reached


TARGETS: dict[str, tuple[Callable[..., None], st.SearchStrategy[tuple[object, ...]]]] = {
    "arch-list": (fuzz_arch_list, st.tuples(text_near(TOKENS))),
    "policy-data": (fuzz_policy_data, st.tuples(plain_data)),
    "policy-yaml": (
        fuzz_policy_text,
        st.tuples(
            st.one_of(mutated_policy(), plain_data.map(yaml.safe_dump), st.text(max_size=200))
        ),
    ),
    "config-table": (fuzz_config_table, st.tuples(plain_data)),
    "pyproject": (
        fuzz_pyproject_bytes,
        st.tuples(
            st.one_of(
                st.binary(max_size=200),
                text_near(
                    [
                        "[tool.archguard]",
                        "[build-system]",
                        'requires = ["torch-archguard"]',
                        "\n",
                        '"',
                        "archguard",
                        "=",
                        "[",
                        "]",
                    ]
                ).map(str.encode),
            )
        ),
    ),
    "environment": (fuzz_environment, st.tuples(text_near(TOKENS))),
    "versions": (
        fuzz_versions,
        st.tuples(
            text_near(
                [
                    "2.13.0",
                    "+cu130",
                    "release 13.0, V13.0.88",
                    "cu128",
                    "12.8",
                    ".",
                    "dev",
                    "sm_90",
                    " ",
                    "13",
                    "rc1",
                    "post",
                ]
            )
        ),
    ),
    "cuobjdump": (
        fuzz_cuobjdump,
        st.tuples(
            st.lists(st.sampled_from(LISTING_LINES) | st.text(max_size=20), max_size=8).map(
                "\n".join
            ),
            st.lists(st.sampled_from(HEADER_LINES) | st.text(max_size=20), max_size=12).map(
                "\n".join
            ),
        ),
    ),
    "nvcc-flags": (
        fuzz_nvcc_flags,
        st.tuples(st.lists(st.sampled_from(FLAG_TOKENS) | st.text(max_size=12), max_size=8)),
    ),
    "preprocessor": (
        fuzz_preprocessor,
        st.tuples(text_near(CPP_TOKENS), text_near(CPP_TOKENS)),
    ),
    "lint-defines": (
        fuzz_lint_defines,
        st.tuples(
            st.lists(
                st.sampled_from(REAL_DEFINES) | random_defines | st.text(max_size=12), max_size=6
            ),
            text_near([*CPP_TOKENS, *DEFINE_NAMES]),
        ),
    ),
    "verify-record": (
        fuzz_record,
        st.tuples(
            st.one_of(
                plain_data,
                st.fixed_dictionaries(
                    {
                        "schema": st.just("archguard.resolution/1"),
                        "targets": st.fixed_dictionaries(
                            {
                                "cubins": st.lists(text_near(TOKENS), max_size=3),
                                "ptx": st.lists(text_near(TOKENS), max_size=3),
                            }
                        ),
                        "cuda": plain_data,
                        "torch": plain_data,
                        "effective": plain_data,
                    }
                ),
            )
        ),
    ),
}
