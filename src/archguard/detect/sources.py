"""The one walk over a project's source tree: build and environment directories skipped,
bounded, in a stable order. ``explain`` counts compile jobs with it, farm mode asks whether a
source-less extension's tree holds CUDA code, the lint finds its translation units."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

SKIP_DIRS = frozenset({".git", "build", "dist", ".venv", "venv", "node_modules", "__pycache__"})
LIMIT = 20000  # files looked at, at most: a tree is read before a build, never for long
# What a file is, by its name: one list each, for the build, explain and the lint
CUDA_SOURCES = (".cu",)  # translation units nvcc compiles as CUDA
CUDA_FILES = (".cu", ".cuh")  # CUDA code, sources and headers
CUDA_HEADERS = (".cuh", ".cu.h", ".h", ".hpp")  # headers a kernel excerpt may live in
CXX_SOURCES = (".c", ".cc", ".cpp", ".cxx")  # host translation units


def tree_files(root: Path | str, limit: int = LIMIT) -> Iterator[str]:
    """Every file under ``root``, directory by directory in sorted order, skipping
    ``SKIP_DIRS`` and hidden directories; stops after the directory that passes ``limit``
    files."""
    seen = 0
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            yield str(Path(here, name))
        seen += len(files)
        if seen > limit:
            return


def file_sha256(path: Path) -> str:
    """A file's sha256, read in blocks (an sdist, a torch wheel, a library)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
