"""Why a farm build failed before or outside the compile of its CUDA code, said on its last
line (issue 32): a ``setup.py`` that stops because no GPU is visible, a CPU fallback (chosen
because no GPU is visible) that then fails to compile, an sdist that lacks its own sources;
the real cause first (issue 47): a Requires-Python the cell's Python is not in, a module the
package's build imports and does not declare, a link that fails after the compiles.
Each names the package's own switch read from its ``setup.py`` (``FORCE_CUDA``, ...) and where
a farm sets it (the manifest's ``env`` table, or the environment of ``archguard wheel``), in
place of "pip wheel failed; the log is above". Read from the build log's last lines."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from archguard.frontend.cmake import cmake_error
from archguard.frontend.setup_py import parse_setup_py
from archguard.frontend.switches import NOT_SWITCHES, switches

# a setup.py that asks torch for a GPU and stops without one
_NO_GPU = re.compile(
    r"(No CUDA GPUs are available|Found no NVIDIA driver|torch\.cuda\.is_available\(\)"
    r"|CUDA is not available|no CUDA-capable device|get_device_capability|"
    r"NVIDIA driver on your system|CUDA (?:must|needs to) be available)",
    re.I,
)
# a source file a build names that the tree does not hold (setuptools' check, or ninja's)
_SOURCE_MISSING = re.compile(
    r"(?<![\w./+-])(?P<file>[\w./+-]+\.(?:cu|cpp|cc|cxx|c))['\"]?(?:: No such file or directory"
    r"| does not exist|, needed by [^,\n]*, missing and no known rule)",
)
_ERROR_WORD = re.compile(r"\berror\b")
_C_SOURCE = re.compile(r"\.(?:cpp|cc|cxx|c)[:(]")
_GCC_ERROR = re.compile(r"\.(?:cpp|cc|cxx|c):\d+:\d+: error")
# torch's headers refusing the C++ standard the package compiles with (torch 2.14: C++20)
_TORCH_STD = re.compile(
    r"#error C\+\+(?P<needs>\d+) or later compatible compiler is required to use (?:PyTorch|ATen)"
)
_STD_FLAG = re.compile(r"""(?:^|[\s'"])--?std[= ](?:c|gnu)\+\+(?P<std>\w+)""")
_NVCC = re.compile(r"bin/nvcc\b")  # an nvcc command line (archguard's own lines say "nvcc")
# a host compiler's error in a C/C++ file (gcc, clang: FILE:LINE:COL: error: ...), and nvcc's
# own in a .cu file (FILE(LINE): error: ...), which may depend on the arch
_HOST_ERROR = re.compile(
    r"^[^\S\n]*(?P<file>\S+\.(?:cpp|cc|cxx|c|h|hpp|hh)):(?P<line>\d+):\d+: (?:fatal )?error: "
    r"(?P<msg>.+)$",
    re.M,
)
_NO_HEADER = re.compile(r"^(?P<header>[\w./+-]+): No such file or directory$")
_CUDA_HEADER = re.compile(
    r"^(?:cuda|cublas|cusparse|cusolver|cufft|curand|nvrtc|nvToolsExt|thrust|cub)"
)
_NVCC_ERROR = re.compile(r"\.cuh?\(\d+\): error", re.M)
# nvcc's front end (cudafe++, cicc) on its own line: FILE(LINE): error: MESSAGE
_DEVICE_ERROR = re.compile(r"^[^\S\n]*(?P<file>\S+)\((?P<line>\d+)\): error: (?P<msg>.+)$", re.M)
# the setup.py itself raised while pip ran it (setuptools execs it as "<string>")
_SETUP_RAISED = re.compile(r'File "(?:<string>|[^"]*setup\.py)", line \d+, in <module>')
_ON_OFF = re.compile(r"^(?:FORCE_\w+|WITH_CUDA|USE_CUDA|BUILD_CUDA\w*)$")  # set to 1
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
_RAISED = re.compile(r"^\s*(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit))(?::\s*(?P<msg>.*))?$")
_END = re.compile(r"^\s*(?:\[end of output\]|error: |note: |ERROR: |\S+ exited with)")
# names in a message that read as environment variables: upper case, with an underscore
_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b")


@dataclass(frozen=True)
class Raised:
    """An exception in a build's log that passed through the package's code: where the
    package's code was (``setup.py:48``), what was raised (``Type: message``), and where it
    was raised when that is not the package's own code (``torch/utils/cpp_extension.py:
    2650``; in archguard's own modules, archguard failed, not the package)."""

    at: str
    what: str
    inner: str | None = None
    archguard: bool = False


def _short(path: str) -> str:
    """A library file as ``torch/utils/cpp_extension.py``: from its top package down."""
    if "/src/archguard/" in path:
        return "archguard/" + path.split("/src/archguard/", 1)[1]
    return path.split("/site-packages/", 1)[-1]


_HERE = str(Path(__file__).resolve().parent.parent) + "/"  # this archguard's package


def _archguards(path: str) -> bool:
    """A file of archguard's own package (installed, or this one), never a package of the
    build environment's overlay (which lives under archguard's cache directory)."""
    return "/site-packages/archguard/" in path or path.startswith(_HERE)


def _own(path: str, root: str | None) -> bool:
    return path == "<string>" or path.endswith("setup.py") or bool(root and path.startswith(root))


def raised(text: str, source: str = "") -> Raised | None:
    """The last exception in a log whose traceback reaches the package's code (its setup.py,
    which setuptools runs as ``<string>``, or a file of its tree). None: no such traceback."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == _TRACEBACK]
    root = source.rstrip("/") + "/" if source else None
    ends = [*starts[1:], len(lines)] if starts else []  # each ends where the next starts
    for start, end in reversed(list(zip(starts, ends, strict=True))):
        own: str | None = None
        last: tuple[str, str] | None = None  # the innermost frame past the package's
        for i in range(start + 1, end):
            frame = _FRAME.match(lines[i])
            if frame:
                if _own(frame["file"], root):
                    name = "setup.py" if frame["file"] == "<string>" else frame["file"]
                    own, last = f"{name.removeprefix(root or '')}:{frame['line']}", None
                else:
                    last = (frame["file"], frame["line"])
                continue
            exc = _RAISED.match(lines[i])
            if exc and own is not None:
                message = [exc["msg"] or ""]
                for more in lines[i + 1 :]:
                    if not more.strip() or _END.match(more) or _FRAME.match(more):
                        break
                    message.append(more.strip())
                said = " ".join(m for m in message if m).strip()
                what = f"{exc['type']}: {said}" if said else exc["type"]
                if last is None:
                    return Raised(own, what)
                ours = _archguards(last[0])
                return Raised(own, what, f"{_short(last[0])}:{last[1]}", ours)
            if exc:
                break  # an exception whose frames never reached the package
    return None


def named_variables(message: str) -> list[str]:
    """The environment variables a package's message names, in its order; never what
    archguard or the toolkit set."""
    return [v for v in dict.fromkeys(_VARIABLE.findall(message)) if v not in NOT_SWITCHES]


def _where_to_set(names: Sequence[str], set_already: dict[str, str], none: str = "") -> str:
    if not names:
        return none
    shown = ", ".join(f"{n}={set_already[n]!r} (set)" if n in set_already else n for n in names)
    return (
        f"; its setup.py reads {shown}: set the one that forces the CUDA build, e.g. "
        f"{names[0]}=1, in the farm manifest's env table for this package "
        f'(env = {{ {names[0]} = "1" }}) or the environment of archguard wheel'
    )


def _standard(text: str, refused: re.Match[str]) -> str:
    """torch's headers refused the C++ standard: the package's own -std (the last one before
    the first refusal, as the compiler takes the last), or the compiler's own mode."""
    needs = refused["needs"]
    flags = [m["std"] for m in _STD_FLAG.finditer(text, 0, refused.start())]
    said = (
        f"the installed torch's headers require C++{needs} ('#error C++{needs} or later "
        "compatible compiler is required to use PyTorch')"
    )
    if flags and flags[-1] != needs:
        return (
            f"{said} and the package compiles with -std=c++{flags[-1]}, from its own setup.py: "
            "it cannot build against this torch until its flags change; patch them, or skip "
            'this cell in the farm manifest (skip = [{ cell = "...", reason = "needs C++'
            f'{needs} for this torch" }}])'
        )
    return (
        f"{said}, and the compiler does not give it (no older -std in the failing command: "
        f"the compiler's own C++{needs} mode is too old, e.g. GCC before 11); build with a "
        "newer host compiler (CXX, or nvcc's -ccbin)"
    )


def cause(
    log_tail: Sequence[str],
    reads: Sequence[str],
    environment: dict[str, str],
    source: str = "",
    asks_gpu: Sequence[str] = (),
) -> str:
    """The last line of a failed build: its cause where the log shows one (``source``: the
    tree, whose prefix a missing file's name loses; ``asks_gpu``: the setup.py lines that ask
    torch about the GPU, for a setup.py that raises its own words when there is none)."""
    text = "\n".join(log_tail)
    own = switches(reads, _setup_text(source))
    own_words = raised(text, source)
    certain = _certain(text, own_words)
    if certain:
        return certain
    quoted = f"; it raised, at {own_words.at}: {own_words.what!r}" if own_words else ""
    # a compile that ran and failed with no nvcc in the log: the setup.py did not stop at
    # its GPU question, it went on (to its CPU fallback), and the compiler's error is first
    compile_error = (
        _on_a_line(_ERROR_WORD, _C_SOURCE, text)
        or _GCC_ERROR.search(text)
        or _host_error(text, source)
    )
    no_nvcc = not _NVCC.search(text)
    stopped = _NO_GPU.search(text) or (asks_gpu and _SETUP_RAISED.search(text))
    if stopped and no_nvcc and not compile_error:
        at = f", at {', '.join(asks_gpu)}" if asks_gpu else ""
        # what its message names, unless that is only an on/off switch (FORCE_CUDA=1)
        named = named_variables(own_words.what) if own_words else []
        named = [] if all(_ON_OFF.match(n) for n in named) else named
        return (
            "the package's setup.py stopped because no GPU is visible (it asks torch for "
            f"the GPU while pip prepares the build{at}; a farm has none){quoted}"
            + (
                _named(named, environment)
                if named
                else _where_to_set(
                    own,
                    environment,
                    "; it reads no switch that forces the CUDA build: build it where a GPU is "
                    "visible, or patch that line",
                )
            )
        )
    missing = _SOURCE_MISSING.search(text)
    if missing:
        return (
            f"the source does not hold {missing['file'].removeprefix(source.rstrip('/') + '/')}, "
            "which its build names: the sdist "
            "lacks its own sources (its MANIFEST.in leaves them out); build from the project's "
            "source tree or a fixed sdist"
        )
    if compile_error and no_nvcc and (own or asks_gpu):
        first = _source_error(text, source, fallback=True)
        why = (
            f"because no GPU is visible: it asks torch for the GPU, at {', '.join(asks_gpu)}; "
            "a farm has none"
            if asks_gpu
            else "because no GPU is visible?"
        )
        return (
            (f"{first}; " if first else "")
            + f"the package built its CPU fallback (no CUDA compile ran: chosen {why}) and "
            + "that failed to compile"
            + _where_to_set(
                own,
                environment,
                "; it reads no switch that forces the CUDA build: build it where a GPU is "
                "visible, or patch that line",
            )
        )
    return _last_word(text, own_words, own, environment, source)


def _certain(text: str, own_words: Raised | None) -> str | None:
    """A cause that is certain wherever it shows, so first: pip refused the cell's Python,
    torch's headers refused the C++ standard, archguard itself raised, or the package's own
    build code imports a module the build lacks."""
    python = _REQUIRES_PYTHON.search(text)
    if python:
        return _other_python(python)
    refused = _TORCH_STD.search(text)
    if refused:
        return _standard(text, refused)
    if own_words is not None and own_words.archguard:
        return (
            f"archguard itself failed in {own_words.inner} (called from the package's "
            f"{own_words.at}): {own_words.what!r}. This is archguard's bug, not the package's: "
            "report it with the log; ARCHGUARD_DISABLE=1 builds without archguard"
        )
    return _missing_module(own_words)


# pip's own refusal of a package whose Requires-Python the cell's Python is not in
_REQUIRES_PYTHON = re.compile(
    r"Package '(?P<package>[^']+)' requires a different Python: (?P<have>\S+) not in "
    r"'(?P<needs>[^']+)'"
)
_NO_MODULE = re.compile(
    r"^(?:ModuleNotFoundError|ImportError): No module named '(?P<module>[\w.]+)'"
)
# modules that are torch's (the cell's torch provides them) or the GPU's (a driver, a
# toolkit's Python binding): their absence is the cell's, not a missing build requirement
_CELLS_MODULES = re.compile(
    r"^(?:torch|torchvision|torchaudio|torchgen|functorch|triton|cuda|pycuda|cupy\w*|nvidia"
    r"|pynvml|nvidia_smi|tensorrt|cudnn)$"
)
# an import name whose distribution is named otherwise
_DISTRIBUTIONS = {
    "yaml": "PyYAML",
    "PIL": "Pillow",
    "cv2": "opencv-python-headless",
    "skbuild": "scikit-build",
    "sklearn": "scikit-learn",
    "git": "GitPython",
    "Cython": "Cython",
}


def _setup_text(source: str) -> str:
    try:
        return (Path(source) / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _other_python(refused: re.Match[str]) -> str:
    needs = refused["needs"]
    return (
        f"{refused['package']} requires Python {needs} (its Requires-Python) and this cell's "
        f"Python is {refused['have']}: pip refused it before any build. Build it in a cell "
        f"whose Python is in {needs}, or skip this cell for it in the farm manifest "
        f'(skip = [{{ cell = "...", reason = "requires Python {needs}" }}])'
    )


def _missing_module(own_words: Raised | None) -> str | None:
    """The package's own build code imports a module the build does not have (not torch's,
    not the GPU's): a build requirement it does not declare. Named, with the fix."""
    if own_words is None or own_words.inner is not None:
        return None
    found = _NO_MODULE.match(own_words.what)
    if not found or _CELLS_MODULES.match(found["module"].split(".")[0]):
        return None
    module = found["module"].split(".")[0]
    dist = _DISTRIBUTIONS.get(module, module)
    return (
        f"the package's build imports {module}, which the build does not have: "
        f"{own_words.what!r}, at {own_words.at}. It is a build requirement the package does "
        f"not declare: declare it ([build-system] requires in its pyproject.toml), or in the "
        f'farm manifest\'s entry for this package, build-requires = ["{dist}"] (archguard '
        f"wheel: --build-requires {dist}), which is installed beside the cell's torch"
    )


def _host_error(
    text: str, source: str, pattern: re.Pattern[str] = _HOST_ERROR
) -> re.Match[str] | None:
    """A host compiler's (or with ``_DEVICE_ERROR``, nvcc's) first error in the package's own
    files (under its tree, or named relative to it, as setuptools' own compiles name them):
    not the toolkit's or torch's headers, not nvcc's tmpxft files."""
    if not source:
        return None
    tree = source.rstrip("/") + "/"
    return next(
        (m for m in pattern.finditer(text) if m["file"].startswith(tree) or m["file"][0] != "/"),
        None,
    )


def _source_error(text: str, source: str, fallback: bool = False) -> str | None:
    """A host compiler's first error in the package's C/C++ source (no nvcc target is in
    that compile: no arch list changes it), quoted with its file and line; a header it does
    not find, named with where it should come from (``fallback``: the compile is the CPU
    fallback's, a C++ extension, whose line never has the toolkit's include directory)."""
    host = _host_error(text, source)
    if not host or _NVCC_ERROR.search(text):
        return None
    where = host["file"].removeprefix(source.rstrip("/") + "/")
    missing = _NO_HEADER.match(host["msg"].strip())
    if missing:
        header = missing["header"]
        cuda = (
            " (a CUDA header, in a C++ extension's compile: that line has no toolkit include "
            "directory)"
            if fallback
            else " (a CUDA header: the toolkit's include directory is not on that compile "
            "line; archguard wheel names one toolkit root that has it in CUDA_HOME, "
            "a plain build needs CUDA_HOME to name such a toolkit)"
        )
        return f"its compile does not find {header}, at {where}:{host['line']}" + (
            cuda
            if _CUDA_HEADER.match(header)
            else " (a header its build requirements or its sdist should provide)"
        )
    return (
        f"the package's own source does not compile, at {where}:{host['line']}: "
        f"{host['msg'].strip()!r} (the host compiler's first error: no nvcc target is in "
        "that compile, so no arch list changes it; the package's source, or the compiler "
        "and torch headers it was written for, must change)"
    )


def _last_word(
    text: str,
    own_words: Raised | None,
    own: Sequence[str],
    environment: dict[str, str],
    source: str = "",
) -> str:
    """Where no known cause fits: what the build's own steps said (:func:`_in_build`), else
    the package's exception, else setuptools' own ``error:``, else the log."""
    in_build = _in_build(text, own_words, source, environment)
    if in_build:
        return in_build
    if own_words is not None:
        named = named_variables(own_words.what)
        inside = f" (raised in {own_words.inner})" if own_words.inner else ""
        return f"the package's setup.py failed, at {own_words.at}{inside}: {own_words.what!r}" + (
            _named(named, environment) if named else _where_to_set(own, environment)
        )
    refused = _setuptools_said(text)
    if refused:
        return f"setuptools refused the package's build: {refused!r}"
    return "pip wheel failed; the log is above"


def _in_build(
    text: str, own_words: Raised | None, source: str, environment: dict[str, str]
) -> str | None:
    """What the build's own steps said: a host compiler's error in the package's source,
    archguard's compile-failed line, CMake's error (where the package's exception only says
    its CMake run failed), the linker's first error, archguard's other error line (where
    the package's exception is not in the log)."""
    compiled = _source_error(text, source)
    if compiled:
        return compiled
    said = _archguard_said(text)
    if said and said.startswith(f"{_SAID}compile-failed:"):  # a compiler failed, it says
        nvcc = _host_error(text, source, _DEVICE_ERROR)  # and what the compiler said, first
        where = nvcc and f"{nvcc['file'].removeprefix(source.rstrip('/') + '/')}:{nvcc['line']}"
        return f"nvcc's first error, at {where}: {nvcc['msg'].strip()!r}; {said}" if nvcc else said
    stopped = cmake_error(text)
    ran_cmake = own_words is not None and _on_a_line(_CALLED, _CMAKE, own_words.what)
    lacking = not_found(text)
    # a routine '-- Could NOT find nvtx3' in a build that failed elsewhere is no cause; CMake's
    # own stop over variables set to NOTFOUND is
    fatal = lacking and ("set to NOTFOUND" in text or "Generate step failed" in text)
    if (stopped or (lacking and (ran_cmake or fatal))) and (own_words is None or ran_cmake):
        ran = f" (its setup.py ran CMake, at {own_words.at})" if own_words else ""
        first = (
            f"CMake stopped the build, at {stopped}{ran}"
            if stopped
            else f"CMake did not find {', '.join(lacking)}{ran}"
        )
        return first + cmake_fix(text, lacking, environment, source)
    linked = _link_error(text)
    if linked:
        return (
            f"the link of the package's extension failed, not a compile: {linked!r} (the "
            "linker's first error; no arch list changes it)"
        )
    # archguard's words where no compiler failed (where it stopped, the exception's words),
    # unless the package's own traceback says it with its line
    return said if own_words is None else None


# the package's exception is only its wrapper around a CMake run that failed
_CALLED = re.compile(r"CalledProcessError", re.I)
_CMAKE = re.compile(r"\bcmake\b", re.I)
_ARCHGUARD_ERROR = re.compile(r"^[^\S\n]*archguard: error: (?P<said>.+)$", re.M)
_DISTUTILS_ERROR = re.compile(
    r"^[^\S\n]*error: (?!subprocess-exited-with-error)(?P<said>.+)$", re.M
)


def _on_a_line(first: re.Pattern[str], then: re.Pattern[str], text: str) -> bool:
    """Does a line hold ``first`` and, after it, ``then`` (what ``first.*then`` asked,
    without rescanning the rest of the line from every ``first``)?"""
    for line in text.split("\n"):
        found = first.search(line)
        if found and then.search(line, found.end()):
            return True
    return False


_SAID = "archguard in the build: "
# a linker's error line (GNU ld, gold, lld; gcc's collect2 summary only where none is before)
_LINK_ERROR = re.compile(
    r"^[^\S\n]*(?P<said>(?:\S*/)?(?:ld(?:\.\w+)?|lld|collect2): (?!warning:).+)$", re.M
)


def _archguard_said(text: str) -> str | None:
    """archguard's own last word in the build (its hook ran, and said why it stopped)."""
    found = list(_ARCHGUARD_ERROR.finditer(text))
    return f"{_SAID}{found[-1]['said'].strip()}" if found else None


def _link_error(text: str) -> str | None:
    """The linker's first error in the log."""
    found = [m["said"].strip() for m in _LINK_ERROR.finditer(text)]
    first = next((f for f in found if not f.startswith("collect2")), None)
    return first or (found[0] if found else None)


def _setuptools_said(text: str) -> str | None:
    """setuptools' (distutils') own ``error: ...``, with the lines that follow it."""
    found = list(_DISTUTILS_ERROR.finditer(text))
    if not found:
        return None
    lines = [found[-1]["said"].strip()]
    for more in text[found[-1].end() :].splitlines()[1:8]:
        if _END.match(more) or more.strip().startswith(("\u00d7", "\u2570", "\u2502")):  # pip's box
            break
        if more.strip():
            lines.append(more.strip())
    return " ".join(lines)


def _named(names: Sequence[str], set_already: dict[str, str]) -> str:
    """The variables a package's own message names, and where a farm sets them."""
    shown = ", ".join(f"{n}={set_already[n]!r} (set)" if n in set_already else n for n in names)
    return (
        f"; its message names {shown}: set {'it' if len(names) == 1 else 'them'} as it says, "
        f'in the farm manifest\'s env table for this package (env = {{ {names[0]} = "..." }}) '
        "or the environment of archguard wheel"
    )


# --- what the farm has for a CMake that stopped (issue 58) ---------------------------------

_CMAKE_REMOVED = re.compile(
    r"Compatibility with CMake < (?P<floor>\d+(?:\.\d+)*) has been removed from CMake"
)
_CMAKE_VERSION = re.compile(
    r"CMake (?P<needs>\d+(?:\.\d+)*) or higher is required\.\s+You are running version "
    r"(?P<have>\d+(?:\.\d+)*)"
)
_NO_PACKAGE = re.compile(r"Could NOT find (?P<package>\w+) \(missing: (?P<missing>[^)\n]*)\)")
_NOTFOUND = "-NOTFOUND"
_SET_TO_NOTFOUND = "but they are set to NOTFOUND"
_NO_TORCH = ('provided by "Torch"', "FindTorch.cmake", "Could not find Torch")
# the library a CMake variable names: CUDA_cuda_LIBRARY, CUDA_CUDART_LIBRARY, CUDA_CUDART
_LIBRARY_VARIABLE = re.compile(r"^CUDA_(?P<name>[A-Za-z0-9]+)(?:_LIBRARY|_LIB)?$")
_MAX_NAMES = 8


def _word_before(text: str, end: int) -> str:
    """The name (letters, digits, underscores) that ends at ``end``, read backwards."""
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return text[start:end]


def not_found(text: str) -> list[str]:
    """The CMake variables the log says CMake did not find: ``X-NOTFOUND`` (in a link line
    or a message), the names under "... set to NOTFOUND", and the ``missing:`` of "Could NOT
    find P (missing: ...)". Linear: each ``-NOTFOUND`` is found by ``str.find``, its name
    read backwards."""
    names: dict[str, None] = {}
    at = text.find(_NOTFOUND)
    while at != -1 and len(names) < _MAX_NAMES:
        name = _word_before(text, at)
        if name:
            names[name] = None
        at = text.find(_NOTFOUND, at + len(_NOTFOUND))
    block = text.find(_SET_TO_NOTFOUND)
    if block != -1:  # one name a line (ADVANCED ones marked), each "linked by ..." under it
        for line in text[block:].splitlines()[2 : _MAX_NAMES * 3]:
            words = line.split()
            if words[:1] == ["linked"] or words[:1] == ["used"]:
                continue
            if not words or len(words) > 2 or words[1:] not in ([], ["(ADVANCED)"]):
                break
            if _NAME_ONLY.fullmatch(words[0]):
                names[words[0]] = None
    for missing in _NO_PACKAGE.finditer(text):
        for word in missing["missing"].split():
            names[word] = None
    return list(names)[:_MAX_NAMES]


_NAME_ONLY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _library(variable: str) -> str | None:
    """The library a CMake variable names (``CUDA_cuda_LIBRARY`` -> ``cuda``, the driver's
    ``libcuda``; ``CUDA_CUDART`` -> ``cudart``); None for one that names no library."""
    found = _LIBRARY_VARIABLE.match(variable)
    if not found or variable.endswith(("_DIRS", "_DIR", "_INCLUDE")):
        return None
    name = found["name"]
    return name.lower() if name.isupper() else name


def _in_root(root: str, library: str) -> str | None:
    """Where the toolkit root holds ``lib<library>.so`` (its own or the link-time stub in
    ``lib64/stubs``), as a path under the root; None where it has none."""
    # a toolkit's own target directory: x86_64-linux, sbsa-linux (aarch64 servers), ...
    targets = ("targets/x86_64-linux/lib", "targets/sbsa-linux/lib", "targets/aarch64-linux/lib")
    for sub in ("lib64", "lib", "lib64/stubs", "lib/stubs", *targets):
        for name in (f"lib{library}.so", f"lib{library}.a"):
            if (Path(root) / sub / name).exists():
                return f"{sub}/{name}"
    return None


def _libraries_said(lacking: Sequence[str], environment: dict[str, str]) -> str:
    """For each library CMake did not find: whether the build's toolkit root has it."""
    root = environment.get("CUDAToolkit_ROOT") or environment.get("CUDA_HOME") or ""
    out = []
    for variable in lacking:
        library = _library(variable)
        if library is None:
            continue
        if not root:
            out.append(f"{variable} is lib{library}.so; the build named no toolkit root")
            continue
        held = _in_root(root, library)
        if held:
            out.append(
                f"{variable} is lib{library}.so, which the build's toolkit root {root} has "
                f"({held}): the package's CMake looks elsewhere (CUDAToolkit_ROOT names it)"
            )
        elif library == "cuda":
            out.append(
                f"{variable} is libcuda.so, the driver's, which the build's toolkit root "
                f"{root} lacks (a full toolkit has a link-time stub in lib64/stubs; neither "
                "this toolkit nor torch's NVIDIA wheels have one, and archguard generates one "
                "from cuda.h, with a C compiler, only in a toolkit root it assembles, and made "
                "none here): build with a full CUDA toolkit (CUDA_HOME), with a C compiler "
                "(CC), or where the driver is installed"
            )
        else:
            out.append(
                f"{variable} is lib{library}.so, which the build's toolkit root {root} lacks "
                "(nor do torch's NVIDIA wheels have it): build with a CUDA toolkit that has it"
            )
    return "".join(f"; {said}" for said in out)


def _torch_said(environment: dict[str, str], source: str) -> str:
    """Where a find_package(Torch) failed: what the build named for torch's CMake package,
    and the package's own torch variables (set or not)."""
    shown = [
        f"{name}={environment[name]!r}" if environment.get(name) else f"{name} unset"
        for name in ("CMAKE_PREFIX_PATH", "Torch_DIR")
    ]
    own = parse_setup_py(_setup_text(source)).torch_locations if source else {}
    said = "; its CMake did not find torch's CMake package (find_package(Torch)): the build had "
    said += ", ".join(shown)
    if own:
        said += "; its setup.py hands " + ", ".join(
            f"{n}={environment[n]!r} (set)" if environment.get(n) else f"{n} (unset)" for n in own
        )
        said += " to CMake as torch's location"
    return said + (
        "; set the variable its CMake files read for torch's location to torch's directory "
        "(the one holding share/cmake), in the farm manifest's env table for this package"
    )


def cmake_fix(
    text: str, lacking: Sequence[str], environment: dict[str, str], source: str = ""
) -> str:
    """What the farm has for a CMake that stopped: the manifest's ``build-requires`` entry
    that gives a newer CMake (pip's ``cmake``), the policy floor CMake 4 needs for files
    written for an old one, the libraries it did not find (and whether
    the toolkit root has them), torch's CMake package where ``find_package(Torch)`` failed."""
    out = ""
    version = _CMAKE_VERSION.search(text)
    if version:
        needs = f"cmake>={version['needs']}"
        out += (
            f'; the fix the farm has: build-requires = ["{needs}"] in the farm manifest\'s '
            f"[[package]] entry for this package (archguard wheel: --build-requires "
            f"\"{needs}\"): pip's cmake package gives that CMake, installed beside the cell's "
            "torch and first on the build's PATH"
        )
    removed = _CMAKE_REMOVED.search(text)
    if removed:
        out += (
            f"; CMake 4 no longer configures files that ask for CMake older than "
            f"{removed['floor']} (cmake_minimum_required): the fix the farm has: "
            f"CMAKE_POLICY_VERSION_MINIMUM={removed['floor']} in the farm manifest's env table "
            "for this package (CMake 4 reads it from the environment and configures them as "
            f'{removed["floor"]} would), or build-requires = ["cmake<4"] in its [[package]] '
            "entry"
        )
    out += _libraries_said(lacking, environment)
    if any(said in text for said in _NO_TORCH):
        out += _torch_said(environment, source)
    return out + _download_said(text, source)


# CMake's file(DOWNLOAD) as FetchContent and ExternalProject print it: one class each, linear
_DOWNLOAD = re.compile(r"error: downloading '(?P<url>[^'\n]+)' failed")
_DOWNLOAD_WHY = re.compile(r'status_string: "(?P<why>[^"\n]*)"')
_BUILD_STEP = re.compile(r"Build step for (?P<name>[A-Za-z0-9_.+-]+) failed")


_OWN_CMAKE_ARGS = re.compile(r"[\"']([A-Z][A-Z0-9_]*_CMAKE_ARGS)[\"']")  # a quoted name: linear
_PY_FILES = 40  # the package's own Python files read for it, at most (setup.py first)
_PY_BYTES = 200_000  # of each


def _own_cmake_args(source: str) -> list[str]:
    """The package's own variables for CMake's arguments (``FT_CMAKE_ARGS``), each quoted by
    name in its ``setup.py`` or the Python files beside it that run CMake for it
    (``cmake/cmake_extension.py``): the first two levels of the tree, a bounded number of
    files and bytes, one linear scan each."""
    root = Path(source)
    files = [root / "setup.py"]
    try:
        files += sorted(p for p in root.glob("*.py") if p.name != "setup.py")
        files += sorted(root.glob("*/*.py"))
    except OSError:
        pass
    found: dict[str, None] = {}
    for path in files[:_PY_FILES]:
        try:
            with path.open("rb") as handle:
                text = handle.read(_PY_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        found.update(dict.fromkeys(_OWN_CMAKE_ARGS.findall(text)))
    return list(found)


def _download_said(text: str, source: str) -> str:
    """Where CMake stopped on a download at configure time (FetchContent, ExternalProject):
    what it fetched, why it failed, and the two ways a farm has: a builder that reaches it,
    or the dependency's source given beforehand, in the variable the package's ``setup.py``
    hands to CMake (its own ``*CMAKE_ARGS``), else ``CMAKE_ARGS``."""
    found = _DOWNLOAD.search(text)
    if found is None:
        return ""
    why = _DOWNLOAD_WHY.search(text, found.end())
    said = (
        f"; its CMake files download {found['url']} (FetchContent or ExternalProject) and "
        f"the download failed ({why['why'] if why else 'no reason given'})"
        ": build where that address is reached, or give the dependency's source beforehand"
    )
    step = _BUILD_STEP.search(text)
    if step is None:
        return said
    passes = _own_cmake_args(source) if source else []
    where = f"{passes[0]}, which its build hands to CMake" if passes else "CMAKE_ARGS"
    return said + (
        f" (-DFETCHCONTENT_SOURCE_DIR_{step['name'].upper()}=DIR, a directory holding "
        f"{step['name']}'s source, in {where}, in the farm manifest's env table for this "
        "package)"
    )
