"""The CUDA toolkit every build system of a build sees: one root, given the names CMake,
scikit-build-core, setuptools and torch's own CMake files read.

An nvcc-only toolkit (a container with just the compiler, or one assembled from NVIDIA's
nvcc wheels) lacks the CUDA libraries torch's headers and many packages use (cuBLAS,
cuSPARSE, cuSOLVER...); torch's NVIDIA wheels have them. archguard's setuptools hook adds
them to its own compiles (``CPATH``, link names), but a CMake build looks for one toolkit
root holding ``bin/nvcc``, ``include/`` and ``lib64/`` (``FindCUDA``, ``FindCUDAToolkit``,
torch's ``Caffe2/public/cuda.cmake``). So the front-end assembles that root
(:func:`archguard.detect.cudalibs.assemble_root`, kept under ``<cache>/cuda-root/``) and
points every variable at it before the backend runs:

- ``CUDA_HOME``, ``CUDA_PATH``: setuptools, torch's ``cpp_extension``, ``FindCUDA``;
- ``CUDACXX``: CMake's CUDA compiler where a project enables CUDA itself;
- ``CUDAToolkit_ROOT``: ``find_package(CUDAToolkit)``;
- ``CMAKE_ARGS``: ``-DCMAKE_CUDA_COMPILER``, ``-DCUDAToolkit_ROOT`` and
  ``-DCUDA_TOOLKIT_ROOT_DIR`` before the caller's own (scikit-build-core, scikit-build and
  many ``setup.py`` files pass ``CMAKE_ARGS`` to CMake; the caller's later ``-D`` wins).
  ``SKBUILD_CMAKE_ARGS`` is left to the caller: scikit-build-core reads both, and each
  ``-D`` would be passed twice;
- ``PATH``: the root's ``bin/`` first (``FindCUDA`` and ``setup.py`` files that run
  ``nvcc`` by name).

With a complete toolkit nothing is assembled and the same variables name the toolkit.

The arches reach a CMake build through ``CUDAARCHS`` (:mod:`archguard.reports.text`) and the
package's own variables: :mod:`archguard.frontend.cmake_arches`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from archguard.core.resolve import Resolution
from archguard.detect.cudalibs import assemble_root
from archguard.detect.fetch import cache_root


@dataclass(frozen=True)
class BuildToolkit:
    """The toolkit root of one build, and the variables that name it."""

    root: str
    variables: dict[str, str]
    assembled: dict[str, object] = field(default_factory=dict)  # ToolkitRoot.record()
    notes: tuple[str, ...] = ()
    cmake_args: tuple[str, ...] = ()  # the -D archguard put before the caller's CMAKE_ARGS

    def as_json(self) -> dict[str, object]:
        """What the record keeps: the root, what was linked into it, and the variables that
        name it (never the caller's PATH or CMAKE_ARGS, which are the machine's)."""
        named = {k: v for k, v in self.variables.items() if k not in ("PATH", "CMAKE_ARGS")}
        return {
            "root": self.root,
            "variables": named,
            "cmake_args": list(self.cmake_args),
            "assembled": self.assembled or None,
            "notes": list(self.notes),
        }


def build_toolkit(res: Resolution, environ: Mapping[str, str]) -> BuildToolkit | None:
    """The toolkit root of a build that compiles with ``res``'s nvcc (None without one),
    assembled with torch's NVIDIA wheels where the toolkit lacks what they have."""
    nvcc = res.toolkit.nvcc
    if not nvcc:
        return None
    home = str(Path(nvcc).parent.parent)
    made = assemble_root(home, res.toolkit.version.major, cache_root() / "cuda-root")
    root = str(made.root) if made else home
    compiler = str(Path(root, "bin", "nvcc"))
    notes: list[str] = []
    if made:
        notes.append(
            f"toolkit: {home} lacks what torch's NVIDIA wheels have ({_some(made.headers)}; "
            f"{_some(made.libraries)}): every build system gets one root, {root}, linking "
            "the toolkit's files and then the wheels' (none of the toolkit's shadowed)"
        )
        if made.stub is not None:
            notes.append(f"toolkit: {made.stub.line()}")
    variables = {"CUDA_HOME": root, "CUDA_PATH": root, "CUDAToolkit_ROOT": root}
    defines = f"-DCUDAToolkit_ROOT={root} -DCUDA_TOOLKIT_ROOT_DIR={root}"
    if environ.get("CUDACXX"):  # CMake's own variable for its CUDA compiler: the caller's
        notes.append(
            f"toolkit: your CUDACXX={environ['CUDACXX']!r} wins (CMake's CUDA compiler is "
            "left to it)"
        )
    else:
        variables["CUDACXX"] = compiler
        defines = f"-DCMAKE_CUDA_COMPILER={compiler} {defines}"
    before = environ.get("CMAKE_ARGS", "").strip()
    given: tuple[str, ...] = ()
    if any(c.isspace() for c in root):  # setup.py files split CMAKE_ARGS on spaces
        notes.append(
            f"toolkit: {root} holds a space, so CMAKE_ARGS gets no -D for it (most setup.py "
            "files split CMAKE_ARGS on spaces); CUDACXX and CUDAToolkit_ROOT name it"
        )
    else:
        given = tuple(defines.split())
        variables["CMAKE_ARGS"] = f"{defines} {before}".strip()
    search = environ.get("PATH") or os.defpath  # an empty entry would be the working dir
    variables["PATH"] = os.pathsep.join([str(Path(root, "bin")), search])
    return BuildToolkit(root, variables, made.record() if made else {}, tuple(notes), given)


def _some(names: tuple[str, ...], shown: int = 4) -> str:
    """A few names of a long list, and how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
