"""Readers of a package's files take time linear in what they read (issue 47): each is fed
large and adversarial text under a generous wall-clock bound. The inputs are sized so that a
linear reader takes a small part of the bound here and a reader that backtracks (a setup.py
pattern took minutes on a real 174-line file) takes minutes: a regression fails, it does not
hang."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest

from archguard.core.arch import parse_targets
from archguard.core.coverage import known_devices
from archguard.core.toolkit import bundled_toolkit, known_arches
from archguard.frontend.setup_py import SetupPy, parse_setup_py
from archguard.lint.expressions import Macros, Unparsable, evaluate, parse_define, tokenize
from archguard.lint.guards import Report, Wheel, analyse
from archguard.lint.lines import logical_lines
from archguard.lint.regions import arch_value, kernel_names
from archguard.lint.sources import Sources, parse_defines

# seconds of CPU per reader and input: the inputs take at most 0.5 s alone, and the same
# CPU time reads twice as long beside CI's builds on two cores (measured: 0.50 s alone, 1.01
# s in a full run); a reader that is not linear takes minutes on them (the nested loops over
# a 900 kB argument took 7.8 s before the budget)
BOUND = 1.5
CORPUS = Path(__file__).parent / "setup_corpus"
T = TypeVar("T")


def within_bound(read: Callable[[], T]) -> T:
    """``read()``, in under BOUND seconds of this process's CPU (the suite shares the cores
    with builds: wall time would measure them too)."""
    start = time.process_time()
    result = read()
    took = time.process_time() - start
    assert took < BOUND, f"took {took:.2f} s of CPU"
    return result


# --- setup.py ------------------------------------------------------------------------------


def build_ext_class(methods: int = 8, body: int = 6) -> str:
    """A setup.py shaped like the one that took minutes: a build_ext subclass whose methods
    each hold a nested function with a try/import/except ImportError, and a try whose
    handler catches other errors, each over a body of ``body`` deeper lines (the old pattern
    split each body line's indentation every way it could: exponential in ``body``)."""
    out = [
        "import os\nimport sys\n\nfrom setuptools import Extension, setup\n"
        "from setuptools.command.build_ext import build_ext\n\n\n"
        "class BuildExt(build_ext):\n"
        '    """Builds the CUDA kernels when it can."""\n\n'
    ]
    for i in range(methods):
        steps = "".join(f"                step_{j} = helper_{i}.step({j})\n" for j in range(body))
        out.append(
            f"    def step_{i}(self):\n"
            "        def inner():\n"
            "            try:\n"
            f"                import helper_{i}\n"
            f"{steps}"
            "            except ImportError:\n"
            "                return None\n\n"
            "        try:\n"
            f"            from pkg_{i}.sub import thing\n"
            "            if thing.ready():\n"
            f"{steps}"
            "        except (OSError, RuntimeError):\n"
            "            thing = None\n"
            "        return inner()\n\n"
        )
    out.append(
        '\nif os.environ.get("FORCE_CUDA", "0") == "1" or "build_ext" in sys.argv:\n'
        "    pass\n"
        'setup(name="x", ext_modules=[Extension("_x", ["x.cu"])],\n'
        '      cmdclass={"build_ext": BuildExt})\n'
    )
    return "".join(out)


# what makes ast give up on a text, and the tokenizer too
PYTHON2 = 'print "built"\n'  # ast refuses it; the tokenizer reads it
BAD_DEDENT = "if x:\n        a = 1\n    b = 2\n"  # both refuse it: read line by line


def numbers(text: str, needle: str) -> list[int]:
    return [n for n, line in enumerate(text.split("\n"), 1) if needle in line]


def test_a_build_ext_class_with_nested_try_imports_reads_in_linear_time() -> None:
    text = build_ext_class()
    assert len(text.splitlines()) >= 200
    found = within_bound(lambda: parse_setup_py(text))
    assert found.reading == "ast"
    (argv,) = numbers(text, "in sys.argv")
    helpers = [(n, f"helper_{i}") for i, n in enumerate(numbers(text, "import helper_"))]
    assert len(helpers) == 8
    written = '"build_ext" in sys.argv'  # as the line writes it
    assert [c.split(" only if")[0] for c in found.conditions] == [
        f"setup.py:{argv}: {written!r}: pip's build (PEP 517) never puts "
        "'build_ext' on setup.py's command line; build it with its own command "
        "(python setup.py build_ext) or patch that line",
        *(f"setup.py:{n}: it imports {m}" for n, m in helpers),
    ]  # pkg_i.sub: its handler does not catch ImportError
    assert (found.reads, found.defaults, found.asks_gpu) == (
        ["FORCE_CUDA"],
        {"FORCE_CUDA": "0"},
        [],
    )


def shifted(found: SetupPy, lines: int) -> list[str]:
    """The conditions with their line numbers moved up by ``lines``."""
    out = []
    for condition in found.conditions:
        name, number, rest = condition.split(":", 2)
        out.append(f"{name}:{int(number) - lines}:{rest}")
    return out


@pytest.mark.parametrize(
    ("head", "tail", "reading"),
    [("", PYTHON2, "tokens"), (BAD_DEDENT, "", "lines")],
    ids=["python2-tokens", "bad-dedent-lines"],
)
def test_a_setup_py_ast_cannot_parse_is_read_the_same_token_by_token_or_line_by_line(
    head: str, tail: str, reading: str
) -> None:
    text = build_ext_class()
    as_python = parse_setup_py(text)
    found = within_bound(lambda: parse_setup_py(head + text + tail))
    assert found.reading == reading
    assert shifted(found, head.count("\n")) == as_python.conditions
    assert (found.reads, found.defaults) == (as_python.reads, as_python.defaults)


def test_a_released_setup_py_asking_the_gpu_in_a_nested_function() -> None:
    """torchani 2.2.4's setup.py (MIT, the released sdist's, tests/setup_corpus): it asks
    torch for the device count and capabilities inside cuda_extension(); its own
    '--cuaev' in sys.argv switches are not setup commands."""
    text = (CORPUS / "torchani" / "setup_py.txt").read_text()
    calls = ("device_count(", "get_device_capability(", "get_device_name(")
    asks = sorted(n for call in calls for n in numbers(text, f"torch.cuda.{call}"))
    assert len(asks) == 3
    for head, reading in (("", "ast"), (BAD_DEDENT, "lines")):
        found = within_bound(partial(parse_setup_py, head + text))
        assert found.reading == reading
        lines = head.count("\n")
        assert found.asks_gpu == [f"setup.py:{n + lines}" for n in asks]
        assert [c.split(": it asks torch for a GPU")[0] for c in shifted(found, lines)] == [
            f"setup.py:{n}" for n in asks
        ]
        assert found.reads == [] and found.defaults == {}


def nested_tries(depth: int) -> str:
    """``depth`` try statements, each in the one before (past the parser's 100 levels)."""
    opening = "".join(" " * d + f"try:\n{' ' * (d + 1)}import m{d}\n" for d in range(depth))
    closing = "".join(
        " " * d + "except ImportError:\n" + " " * (d + 1) + "pass\n" for d in reversed(range(depth))
    )
    return opening + closing


# Past the parser's limits (100 indentations, 200 parentheses) Python 3.12's tokenize, the
# parser's own tokenizer since, gives up too: the text is read line by line there
DEEP = "tokens" if sys.version_info < (3, 12) else "lines"
SETUP_TEXTS: list[tuple[str, Callable[[], str], str, int]] = [
    # (id, the text, how it is read, how many optional imports it names)
    (
        "5k-try-blocks",
        lambda: "".join(f"try:\n import m{i}\nexcept ImportError:\n pass\n" for i in range(5000)),
        "ast",
        5000,
    ),
    ("150-nested-tries", lambda: nested_tries(150), DEEP, 150),
    ("150-nested-tries-unreadable", lambda: BAD_DEDENT + nested_tries(150), "lines", 150),
    ("1MB-whitespace-line", lambda: "x = 1\n" + " " * 1_000_000 + "\n", "ast", 0),
    ("1MB-whitespace-unreadable", lambda: BAD_DEDENT + " " * 1_000_000 + "x\n", "lines", 0),
    ("try-then-endless-blank-lines", lambda: "try:\n import a\n" + "\n" * 100_000, "tokens", 0),
    ("deep-parentheses", lambda: "x = " + "(" * 30_000 + ")" * 30_000 + "\n", DEEP, 0),
    ("almost-env-reads", lambda: "os.environ.get(" * 15_000, "lines", 0),
    ("quoted-names-before-no-environ", lambda: BAD_DEDENT + "'a' " * 250_000, "lines", 0),
    ("almost-argv", lambda: BAD_DEDENT + "'build_ext' in sys." * 50_000, "lines", 0),
    ("a-million-quotes", lambda: BAD_DEDENT + "'" * 1_000_000 + "\n", "lines", 0),
    ("try-colons", lambda: BAD_DEDENT + "try:" * 200_000, "lines", 0),
]


@pytest.mark.parametrize(
    ("make", "reading", "optional"),
    [case[1:] for case in SETUP_TEXTS],
    ids=[case[0] for case in SETUP_TEXTS],
)
def test_hostile_setup_py_text_reads_in_linear_time(
    make: Callable[[], str], reading: str, optional: int
) -> None:
    text = make()
    found = within_bound(lambda: parse_setup_py(text))
    assert found.reading == reading
    assert len([c for c in found.conditions if "only if it can" in c]) == optional


# --- the lint's readers --------------------------------------------------------------------

TARGETS = parse_targets("sm_80 sm_90 compute_90", "t", known=known_arches())
# two devices judged (8.6 and 8.7 load sm_80): six configurations, not two dozen
DEVICES = tuple(d for d in known_devices() if d.cc in ((8, 6), (8, 7)))
WHEEL = Wheel(TARGETS, bundled_toolkit((13, 0)), TARGETS, DEVICES)


def lint(text: str, defines: dict[str, str | None] | None = None) -> Report:
    files = {"a.cu": text}
    return analyse(["a.cu"], WHEEL, Sources(files.__getitem__, lambda n, q, i: None, defines or {}))


def evaluated(text: str) -> int | str | None:
    try:
        return evaluate(text, Macros()).value
    except Unparsable as exc:
        return f"unparsable: {exc}"


LINT_READERS: list[tuple[str, Callable[[], object]]] = [
    ("lines-1MB-whitespace", lambda: logical_lines((" " * 1000 + "\n") * 1000)),
    ("lines-open-comments", lambda: logical_lines("/*" * 500_000)),
    ("lines-open-strings", lambda: logical_lines('"\\' * 300_000)),
    ("tokenize-long-sum", lambda: tokenize("1+" * 100_000 + "1")),
    ("evaluate-has-include-run", lambda: evaluated("__has_include(<" * 40_000)),
    ("evaluate-deep-parentheses", lambda: evaluated("(" * 100_000 + "1" + ")" * 100_000)),
    ("evaluate-deep-not", lambda: evaluated("!" * 100_000 + "1")),
    ("evaluate-long-and", lambda: evaluated("1 && " * 100_000 + "1")),
    ("define-long-body", lambda: parse_define("X " + "(1<<3) " * 100_000)),
    ("define-unclosed-parameters", lambda: parse_define("F(" + "a," * 300_000)),
    ("kernel-names-global-run", lambda: kernel_names(logical_lines("__global__ " * 50_000))),
    ("kernel-names-no-end", lambda: kernel_names(logical_lines("__global__ " + "a " * 300_000))),
    ("arch-value-run", lambda: arch_value("constexpr int a = " + "__CUDA_ARCH__" * 50_000)),
]


@pytest.mark.parametrize("read", [r for _, r in LINT_READERS], ids=[n for n, _ in LINT_READERS])
def test_hostile_text_through_the_lints_readers(read: Callable[[], object]) -> None:
    within_bound(read)


def test_a_deep_nest_of_dead_guards_is_read_once() -> None:
    """5000 nested guards no target compiles: the outermost is named dead, the rest are
    dead with it (not every other one, as a check of the parent alone had it)."""
    depth = 5000
    text = "#if __CUDA_ARCH__ == 870\nint x;\n" * depth + "#endif\n" * depth
    report = within_bound(lambda: lint(text))
    assert [(d.line, d.needs) for d in report.dead] == [(1, ("8.7",))]


def test_many_sibling_dead_guards_are_each_named() -> None:
    """Each is checked against the dead named so far in constant time (a set rebuilt per
    region made this quadratic)."""
    count = 6_000
    report = within_bound(lambda: lint("#if __CUDA_ARCH__ == 870\nint x;\n#endif\n" * count))
    assert len(report.dead) == count


def test_macros_that_double_at_every_step_are_not_understood_not_expanded() -> None:
    text = "#define A0 1\n" + "".join(f"#define A{i} A{i - 1} + A{i - 1}\n" for i in range(1, 60))
    text += "#if A59 > 0 && __CUDA_ARCH__ >= 800\n#error never proved\n#endif\n"
    report = within_bound(lambda: lint(text))
    assert not report.errors
    assert [n for _, n, _ in report.not_understood] == [61]


def test_a_condition_continued_over_fifty_thousand_lines() -> None:
    text = "#if __CUDA_ARCH__ >= 800 \\\n" + "&& 1 \\\n" * 50_000 + "\nint z;\n#endif\n"
    report = within_bound(lambda: lint(text))
    assert [n for _, n, _ in report.not_understood] == [1]  # past the tokens one reads


def test_opaque_defines_with_a_hostile_value() -> None:
    defines = parse_defines(["-DNS_OPEN=namespace x {" + " {" * 200_000, "-DNS_CLOSE=}"])
    text = "#if NS_OPEN && __CUDA_ARCH__ >= 800\n#error never proved\n#endif\n"
    report = within_bound(lambda: lint(text, defines))
    assert not report.errors and set(report.opaque) == {"NS_OPEN", "NS_CLOSE"}


# --- the build log's and the CMake files' readers (frontend/failures.py, frontend/cmake.py) --


# The failure's note reads the CMake files with the one reader the refusal uses (issue 56):
# its cases are sized as the reader's own below.
def forced(text: str) -> list[str]:
    import tempfile

    from archguard.frontend.cmake import forced_arches

    with tempfile.TemporaryDirectory() as tree:
        Path(tree, "CMakeLists.txt").write_text(text)
        return forced_arches(Path(tree))


def log_cause(*lines: str) -> str:
    from archguard.frontend.failures import cause

    return cause(list(lines), [], {})


def last_traceback(text: str) -> object:
    from archguard.frontend.failures import raised

    return raised(text)


def cmake_said(log: str) -> object:
    from archguard.frontend.cmake import cmake_error, no_cuda_said

    return cmake_error(log), no_cuda_said(log)


LOG_READERS = [
    pytest.param(lambda: log_cause("." * 200_000), id="a-200k-path-like-token"),
    pytest.param(lambda: log_cause("a" * 200_000), id="a-200k-word"),
    pytest.param(lambda: log_cause("error " * 40_000), id="error-words-on-a-line"),
    pytest.param(lambda: log_cause(*[" " * 50] * 4000), id="4000-blank-lines"),
    pytest.param(lambda: log_cause("\n" * 40_000 + "x"), id="40k-newlines"),
    pytest.param(
        lambda: last_traceback("Traceback (most recent call last):\n" * 20_000),
        id="20k-traceback-headers",
    ),
    pytest.param(
        lambda: cmake_said("CMake Error at a:1 (" * 20_000),
        id="cmake-errors-unclosed",
    ),
    pytest.param(
        lambda: forced(
            "set_target_properties(x PROPERTIES CUDA_ARCHITECTURES ${CMAKE_CUDA_ARCHITECTURES}"
            + " " * 200_000
            + "x\n"
        ),
        id="cmake-follows-then-blanks",
    ),
    pytest.param(lambda: cmake_said("Could NOT find CUDA" * 20_000), id="cmake-no-cuda-run"),
    pytest.param(lambda: forced(" " * 1_000_000 + "\n"), id="cmake-1MB-whitespace"),
    pytest.param(
        lambda: forced(
            "if(A)\n" * 20_000 + "set(CMAKE_CUDA_ARCHITECTURES 80)\n" + "endif()\n" * 20_000
        ),
        id="cmake-20k-nested-ifs",
    ),
]


@pytest.mark.parametrize("read", LOG_READERS)
def test_hostile_build_logs_and_cmake_files(read: Callable[[], object]) -> None:
    within_bound(read)


# --- the CMake reader before the build (frontend/cmake.py's CMakeFiles, toolkit.cmake_arches) -


def cmake_plan(text: str) -> object:
    import tempfile

    from archguard.core.arch import parse_arch_list
    from archguard.core.toolkit import known_arches
    from archguard.frontend.cmake_arches import cmake_arches

    entries = parse_arch_list("8.0;9.0+PTX", "the test", known=known_arches())
    given = {"CUDAARCHS": "80-real;90"}
    with tempfile.TemporaryDirectory() as tree:
        Path(tree, "CMakeLists.txt").write_text(text, newline="")
        return cmake_arches(Path(tree), entries, {}, given)


def chain(n: int, last: str) -> str:
    """``set(A1 ${A0})`` ... ``set(An ${An-1})``, then ``set(A0 last)``, used by the arches."""
    links = "".join(f"set(A{i + 1} ${{A{i}}})\n" for i in reversed(range(n)))
    return f"set(CMAKE_CUDA_ARCHITECTURES ${{A{n}}})\n{links}set(A0 {last})\n"


CMAKE_READERS = [
    pytest.param(lambda: cmake_plan(" " * 1_000_000 + "\n"), id="1MB-whitespace"),
    pytest.param(
        lambda: cmake_plan(
            "if(A)\n" * 20_000 + "set(CMAKE_CUDA_ARCHITECTURES 75)\n" + "endif()\n" * 20_000
        ),
        id="20k-nested-ifs",
    ),
    pytest.param(lambda: cmake_plan('set(X "' + 'a\\"' * 200_000), id="unclosed-quote"),
    pytest.param(lambda: cmake_plan("set(X [==[" + "]=]" * 200_000), id="unclosed-bracket"),
    pytest.param(lambda: cmake_plan("#[[" * 200_000), id="bracket-comment-openers"),
    pytest.param(lambda: cmake_plan("[=" * 200_000), id="bracket-almost-openers"),
    pytest.param(lambda: cmake_plan("set(X " + "(" * 200_000 + ")"), id="200k-open-parens"),
    pytest.param(lambda: cmake_plan("set(X " + "\\x" * 200_000 + ")"), id="200k-escapes"),
    pytest.param(lambda: cmake_plan("a" * 1_000_000), id="a-1MB-word"),
    pytest.param(
        lambda: cmake_plan(
            "set(CMAKE_CUDA_ARCHITECTURES " + "${" * 50_000 + "X" + "}" * 50_000 + ")\n"
        ),
        id="50k-nested-references",
    ),
    pytest.param(lambda: cmake_plan(chain(10_000, "75")), id="10k-variable-chain"),
    pytest.param(
        lambda: cmake_plan("set(CMAKE_CUDA_ARCHITECTURES 75)\r\n" * 10_000),
        id="10k-forced-lines",
    ),
    pytest.param(
        lambda: cmake_plan("set_property(TARGET t PROPERTY CUDA_ARCHITECTURES OFF)\n" * 10_000),
        id="10k-off-properties",
    ),
    pytest.param(
        lambda: cmake_plan(
            "if("
            + " ".join(f"A{i}" for i in range(10_000))
            + ")\n"
            + "elseif(B)\n" * 20_000
            + "endif()\n"
        ),
        id="20k-elseifs-after-a-wide-condition",
    ),
    pytest.param(
        lambda: cmake_plan(
            "".join(
                f"if(NOT DEFINED ENV{{P{i}_ARCH}})\n  set(V{i} 80)\nelse()\n"
                f"  set(V{i} $ENV{{P{i}_ARCH}})\nendif()\n"
                for i in range(5_000)
            )
        ),
        id="5k-own-arch-variables",
    ),
    pytest.param(
        lambda: cmake_plan(
            "function(f)\n"
            + "if(CMAKE_CUDA_ARCHITECTURES)\nreturn()\nendif()\n" * 10_000
            + "set(CMAKE_CUDA_ARCHITECTURES 75 PARENT_SCOPE)\nendfunction()\n"
        ),
        id="10k-early-returns",
    ),
    pytest.param(
        lambda: cmake_plan(
            "".join(f"set(B{i} " + "${C} " * 100 + ")\n" for i in range(500))
            + "set(C 75)\nset(CMAKE_CUDA_ARCHITECTURES "
            + " ".join(f"${{B{i}}}" for i in range(500))
            + ")\n"
        ),
        id="a-value-of-wide-values",
    ),
    pytest.param(  # each level 64 items: 64**5 commands if written out whole
        lambda: cmake_plan(
            "".join(
                f"foreach(L{i} " + " ".join(f"I{j}" for j in range(64)) + ")\n" for i in range(5)
            )
            + "set(V${L0}${L4} $ENV{ARCH_${L1}})\nset(CMAKE_CUDA_ARCHITECTURES ${V})\n"
            + "endforeach()\n" * 5
        ),
        id="five-nested-foreachs-of-64",
    ),
    pytest.param(
        lambda: cmake_plan("foreach(X A)\n" * 20_000 + "set(Y ${X})\n"),
        id="20k-unclosed-foreachs",
    ),
    pytest.param(  # 64 * 64 copies of a 900 kB argument if written out whole
        lambda: cmake_plan(
            "foreach(A " + " ".join(f"I{j}" for j in range(64)) + ")\n"
            "foreach(B " + " ".join(f"J{j}" for j in range(64)) + ")\n"
            'set(X "${A}' + "x" * 900_000 + '")\nendforeach()\nendforeach()\n'
        ),
        id="two-foreachs-over-a-900kB-argument",
    ),
    # a package's own function()s and macro()s, written out at each call (issue 58)
    pytest.param(
        lambda: cmake_plan(
            'function(f a)\nf("${a}" x)\nf(x "${a}")\n'
            "set(CMAKE_CUDA_ARCHITECTURES ${a})\nendfunction()\nf(75)\n"
        ),
        id="a-function-calling-itself-twice",
    ),
    pytest.param(
        lambda: cmake_plan(
            "".join(
                f'function(g{i} a)\ng{i + 1}("${{a}};${{a}}")\ng{i + 1}("${{a}};${{a}}")\n'
                "endfunction()\n"
                for i in range(30)
            )
            + "function(g30 a)\nset(CMAKE_CUDA_ARCHITECTURES ${a})\nendfunction()\ng0(75)\n"
        ),
        id="30-functions-each-calling-the-next-twice-with-its-list-doubled",
    ),
    pytest.param(
        lambda: cmake_plan(
            "function(f a)\n"
            + "".join(f"set(V{i} ${{a}})\n" for i in range(50))
            + "set_property(TARGET t PROPERTY CUDA_ARCHITECTURES ${a})\nendfunction()\n"
            + "f(75)\n" * 5_000
        ),
        id="5k-calls-of-a-52-command-function",
    ),
    pytest.param(
        lambda: cmake_plan(
            "function(f a)\nset(CMAKE_CUDA_ARCHITECTURES " + "${a}" * 100_000 + ")\n"
            "endfunction()\n" + ('f("' + "7" * 300_000 + '")\n') * 2
        ),
        id="a-300kB-argument-into-100k-references",
    ),
    pytest.param(
        lambda: cmake_plan(
            "".join(
                f'macro(m{i} a)\nm{i + 1}("${{a}}" "${{a}}")\nendmacro()\n' for i in range(2000)
            )
            + "macro(m2000 a b)\nset(CMAKE_CUDA_ARCHITECTURES ${a} ${b})\nendmacro()\nm0(75)\n"
        ),
        id="2000-chained-macros",
    ),
    pytest.param(
        lambda: cmake_plan("function(f a)\n" * 20_000 + "set(X ${a})\nf(75)\n"),
        id="20k-unclosed-functions",
    ),
    pytest.param(
        lambda: cmake_plan(
            "".join(
                f"function(f{i} a)\nset(CMAKE_CUDA_ARCHITECTURES ${{a}})\nendfunction()\n"
                f"f{i}({70 + i % 30})\n"
                for i in range(3_000)
            )
        ),
        id="3k-functions-each-called",
    ),
    pytest.param(
        lambda: cmake_plan(
            'function(f n)\ncmake_parse_arguments(PARSE_ARGV 1 G "" "" "'
            + ";".join(f"K{i}" for i in range(5000))
            + '")\nset(CMAKE_CUDA_ARCHITECTURES ${G_K1})\nendfunction()\n'
            + ("f(x " + " ".join(f"K{i} 7{i % 10}" for i in range(5000)) + ")\n") * 5
        ),
        id="5-calls-of-5000-keywords",
    ),
    pytest.param(  # 64**4 calls if written out whole
        lambda: cmake_plan(
            "function(f a)\n"
            + "".join(f"set(V{i} ${{a}})\n" for i in range(50))
            + "endfunction()\n"
            + "".join(
                f"foreach(L{i} " + " ".join(f"I{j}" for j in range(64)) + ")\n" for i in range(4)
            )
            + "f(${L0}${L3})\n"
            + "endforeach()\n" * 4
        ),
        id="a-call-in-four-nested-foreachs-of-64",
    ),
    # nvcc arch flags followed to the list they loop over (issue 58, item 2)
    pytest.param(
        lambda: cmake_plan(
            'set(L "70;80" CACHE STRING "")\nforeach(a ${L})\nset(CMAKE_CUDA_FLAGS "'
            + " -gencode arch=compute_${a},code=sm_${a}" * 25_000
            + '")\nendforeach()\n'
        ),
        id="a-1MB-flag-string-of-25k-looped-gencodes",
    ),
    pytest.param(
        lambda: cmake_plan('set(CMAKE_CUDA_FLAGS "' + "-gencode=arch=" * 70_000 + '")\n'),
        id="1MB-of-gencode-openers-without-a-code",
    ),
    pytest.param(
        lambda: cmake_plan(
            'set(L 70 CACHE STRING "")\nforeach(a ${L})\nset(CMAKE_CUDA_FLAGS "arch=compute_${a}'
            + "x" * 900_000
            + ",code=[sm_${a}"
            + "," * 50_000
            + '")\nendforeach()\n'
        ),
        id="a-1MB-gencode-value",
    ),
    pytest.param(
        lambda: cmake_plan(
            "".join(
                f'string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_{100 + i % 900},'
                f'code=[sm_{100 + i % 900},compute_{100 + i % 900}]")\n'
                for i in range(5_000)
            )
        ),
        id="5k-literal-gencode-lines",
    ),
    pytest.param(
        lambda: cmake_plan(
            'set(L "70;80" CACHE STRING "")\n'
            + "foreach(a IN LISTS L)\n"
            + "list(APPEND CUDA_NVCC_FLAGS -gencode=arch=compute_${a},code=sm_${a})\n" * 10_000
            + "endforeach()\n"
        ),
        id="10k-gencode-flags-in-a-loop-over-a-cache-entry",
    ),
    pytest.param(
        lambda: cmake_plan(
            "".join(
                f'set(L{i} "7{i % 10}" CACHE STRING "")\nforeach(a ${{L{i}}})\n'
                for i in range(5_000)
            )
            + 'string(APPEND CMAKE_CUDA_FLAGS " -arch=sm_${a}")\n'
            + "endforeach()\n" * 5_000
        ),
        id="5k-nested-loops-over-cache-entries",
    ),
    pytest.param(
        lambda: cmake_plan(
            "foreach(a ${L})\n" * 10_000
            + 'string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_${a},code=sm_${a}")\n' * 1000
        ),
        id="10k-unclosed-loops-around-1000-flags",
    ),
]


@pytest.mark.parametrize("read", CMAKE_READERS)
def test_hostile_cmake_files_before_the_build(read: Callable[[], object]) -> None:
    within_bound(read)
