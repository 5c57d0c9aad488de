"""The CUDA binary tools archguard runs besides nvcc (cuobjdump, nvdisasm): one search order,
one environment naming scheme, one way to run them and to fail.

Search order, for each tool: the variable named after it (``CUOBJDUMP``, ``NVDISASM``; the
older ``NVDISASM_PATH`` still read), ``PATH``, ``CUDA_HOME/bin``, ``CUDA_PATH/bin``, the
directories the caller adds (beside the nvcc that compiles, beside cuobjdump),
``/usr/local/cuda/bin``, then the ``nvidia-cuda-*`` wheels' ``nvidia/cu*/bin``. nvcc itself is
found as torch's ``cpp_extension`` finds it (:mod:`archguard.detect.nvcc`), so that archguard
and torch never disagree about the compiler.

Timeouts: a query (``--version``, a listing) gets ``QUERY_TIMEOUT_S``; reading a binary
(``-sass`` of a large wheel's every cubin) ``READ_TIMEOUT_S``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from archguard.errors import ArchguardError

QUERY_TIMEOUT_S = 60
READ_TIMEOUT_S = 600
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
        found = (which or (lambda n: shutil.which(n, path=environ.get("PATH"))))(self.name)
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


def executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def run(
    argv: list[str],
    error: type[ArchguardError],
    timeout: float = QUERY_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a tool; a tool that cannot start or runs past ``timeout`` raises ``error`` naming
    the command. The exit status is the caller's to judge."""
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            shell=False,
            env=None if env is None else dict(env),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise error(f"`{' '.join(argv)}` could not run: {exc}") from None
