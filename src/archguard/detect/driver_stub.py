"""The CUDA driver API's link-time stub, ``libcuda.so``, made from a toolkit's ``cuda.h``.

A full CUDA toolkit ships ``lib64/stubs/libcuda.so``: every driver API function, each
returning ``CUDA_ERROR_STUB_LIBRARY``, with the soname ``libcuda.so.1``. A program or
extension that calls the driver API (``-lcuda``, CMake's ``CUDA::cuda_driver``) links
against it where no driver is installed (a build machine, a container) and loads the real
driver's ``libcuda.so.1`` where it runs. An nvcc-only toolkit has none, nor do NVIDIA's
CUDA 13.0 wheels; their ``cuda.h`` names every function, so archguard writes the same stub
from it: :func:`driver_symbols` reads the names (a header archguard did not write, read in
linear time), :func:`make_driver_stub` compiles one C function per name with the machine's
C compiler.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from archguard.detect.tools import ToolFailed, run

# CUDA_ERROR_STUB_LIBRARY: what NVIDIA's stub returns from every function
STUB_LIBRARY_ERROR = 34
SONAME = "libcuda.so.1"  # the real driver's: what a program linked against the stub loads
# headers beside cuda.h that declare more of libcuda's functions (cuProfilerStart, cuGL*, ...)
DRIVER_HEADERS = ("cuda.h", "cudaProfiler.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h")
COMPILE_TIMEOUT_S = 120
SOURCE = "libcuda_stub.c"  # the C file's name, the same every time (the object names it)

# a driver API function name: cu, a capital; CUresult and cuuint32_t are types, not matched
_NAME = re.compile(r"\bcu[A-Z][A-Za-z0-9_]*")
_CALLED = re.compile(r"[ \t\r\n]*\(")  # what follows a declared function's name
_PASTED = re.compile(r"\b__CUDA_API_PT(DS|SZ)[ \t]*\([ \t]*(cu[A-Z][A-Za-z0-9_]*)")
_COMMENT = re.compile(r"/[*/]")
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(?:define|undef)\b", re.MULTILINE)


def _code(text: str) -> str:
    """``text`` without its comments (``/* */`` and ``//``); an unclosed ``/*`` ends it.
    Each character is looked at once or twice: linear time."""
    out: list[str] = []
    at = 0
    while (found := _COMMENT.search(text, at)) is not None:
        start = found.start()
        out.append(text[at:start])
        if found.group() == "/*":
            end = text.find("*/", start + 2)
            if end == -1:
                return "".join(out)
            out.append(" ")
            at = end + 2
        else:
            end = text.find("\n", start + 2)
            if end == -1:
                return "".join(out)
            at = end  # the newline stays: it ends a #define
    out.append(text[at:])
    return "".join(out)


def driver_symbols(text: str) -> tuple[str, ...]:
    """Every driver API function name a program that includes ``text`` (a ``cuda.h``) can
    reference: each ``cu[A-Z]...`` name declared as a function (followed by ``(``) or named
    by a ``#define``/``#undef`` (``#define cuCtxCreate cuCtxCreate_v4``), and the per-thread
    names ``__CUDA_API_PTDS(x)``/``__CUDA_API_PTSZ(x)`` paste (``x_ptds``, ``x_ptsz``), which
    ``CUDA_API_PER_THREAD_DEFAULT_STREAM`` selects. Comments are skipped (their
    ``::cuFoo()`` cross-references name no declaration). Sorted, each once. Linear time:
    one comment pass, then single-quantifier scans."""
    code = _code(text)
    names: set[str] = set()
    for found in _NAME.finditer(code):
        if _CALLED.match(code, found.end()):
            names.add(found.group())
    for directive in _DIRECTIVE.finditer(code):
        end = code.find("\n", directive.end())
        line = code[directive.end() : len(code) if end == -1 else end]
        names.update(found.group() for found in _NAME.finditer(line))
    for found in _PASTED.finditer(code):
        names.add(f"{found[2]}_pt{found[1].lower()}")
    return tuple(sorted(names))


def stub_source(symbols: tuple[str, ...]) -> str:
    """The C file of the stub: one function per name, each returning
    ``CUDA_ERROR_STUB_LIBRARY`` (no prototype is needed: nothing calls them here, and a
    caller's arguments are ignored by a function that takes none)."""
    lines = [
        "/* The CUDA driver API's link-time stub, made by archguard from cuda.h: link",
        f" * against it, run with the real driver's {SONAME}. */",
    ]
    lines += [f"int {name}(void) {{ return {STUB_LIBRARY_ERROR}; }}" for name in symbols]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class DriverStub:
    """A stub made (``library``), or why none was (``reason``)."""

    library: Path | None
    functions: int = 0
    compiler: str = ""  # the compiler command that made it (or failed to)
    reason: str = ""  # why there is no library

    @property
    def said(self) -> str:
        """One clause for a build log: what was made, or why nothing was."""
        if self.library is None:
            return f"no driver stub: {self.reason}"
        return (
            f"{self.functions} driver API functions, each returning CUDA_ERROR_STUB_LIBRARY "
            f"({STUB_LIBRARY_ERROR}), soname {SONAME}, compiled with {self.compiler}"
        )


def c_compiler(
    compiler: str | None = None, environ: Mapping[str, str] | None = None
) -> list[str] | None:
    """The C compiler command: ``compiler``, else ``$CC`` (split as a shell would, so
    ``CC="ccache gcc"`` works), else ``cc`` or ``gcc`` on ``PATH``; None where there is none."""
    env = os.environ if environ is None else environ
    given = compiler or (env.get("CC") or "").strip()
    if given:
        try:
            argv = shlex.split(given)
        except ValueError:  # an unbalanced quote: no command to run
            return None
        return argv or None
    for name in ("cc", "gcc"):
        found = shutil.which(name, path=env.get("PATH"))
        if found:
            return [found]
    return None


def make_driver_stub(
    cuda_h: Path,
    directory: Path,
    compiler: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> DriverStub:
    """``directory/libcuda.so``, made from ``cuda_h`` and the driver headers beside it
    (:data:`DRIVER_HEADERS`) with the C compiler (:func:`c_compiler`). The C file is written
    in a temporary directory under ``directory`` and the library renamed into place whole.
    Never raises for a missing compiler or a failed compile: the result says why."""
    try:
        text = "\n".join(
            (cuda_h.parent / name).read_text(encoding="utf-8", errors="replace")
            for name in DRIVER_HEADERS
            if name == cuda_h.name or (cuda_h.parent / name).is_file()
        )
    except OSError as exc:
        return DriverStub(None, reason=f"{cuda_h} could not be read ({exc})")
    symbols = driver_symbols(text)
    if "cuInit" not in symbols:
        return DriverStub(None, reason=f"{cuda_h} declares no cuInit: not a driver API header")
    argv = c_compiler(compiler, environ)
    if argv is None:
        return DriverStub(None, reason="no C compiler (CC unset, no cc or gcc on PATH)")
    shown = " ".join(argv)
    directory.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".libcuda-stub-", dir=directory))
    try:
        (work / SOURCE).write_text(stub_source(symbols), encoding="utf-8")
        flags = ["-shared", "-fPIC", "-O0", f"-Wl,-soname,{SONAME}", "-o", "libcuda.so", SOURCE]
        # no build id where the linker takes the flag: the same header gives the same bytes
        failed = ""
        for extra in (["-Wl,--build-id=none"], []):
            try:
                done = run([*argv, *extra, *flags], timeout=COMPILE_TIMEOUT_S, cwd=work)
            except ToolFailed as exc:
                return DriverStub(None, compiler=shown, reason=str(exc))
            if done.returncode == 0:
                (work / "libcuda.so").replace(directory / "libcuda.so")
                return DriverStub(directory / "libcuda.so", len(symbols), shown)
            said = (done.stderr or done.stdout).strip().splitlines()
            failed = f"{shown} failed (exit {done.returncode}): {said[-1] if said else ''}"
        return DriverStub(None, compiler=shown, reason=failed.rstrip(": "))
    finally:
        shutil.rmtree(work, ignore_errors=True)
