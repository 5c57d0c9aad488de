"""What the lint reads: the translation units of a project or of the paths given, the
include directories, and the build's own macros and ``-I``/``-include`` flags, read as nvcc
reads them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from archguard.detect.sources import CUDA_HEADERS, CUDA_SOURCES, tree_files
from archguard.lint.preprocessor import Reader, Resolver


@dataclass(frozen=True)
class Sources:
    """How the lint reads the sources, and the build's command-line macros and forced
    includes. ``defines``: ``-DNAME=VALUE`` a string, ``-UNAME`` None. ``budget``: seconds
    for the walk, after which the sources not reached are listed as unscanned."""

    read: Reader
    resolve: Resolver
    defines: Mapping[str, str | None] = field(default_factory=dict)
    forced: tuple[str, ...] = ()
    budget: float | None = None

    @classmethod
    def on_disk(
        cls,
        include_dirs: Sequence[Path],
        inside: Sequence[Path],
        defines: Mapping[str, str | None] | None = None,
        forced: Sequence[str] = (),
        budget: float | None = None,
    ) -> Sources:
        """Files read from disk (unreadable ones are skipped, noted); ``#include`` followed
        through ``include_dirs``, only into files under one of ``inside``."""

        def read(path: str) -> str:
            return Path(path).read_text(encoding="utf-8", errors="replace")

        resolve = file_resolver(include_dirs, inside)
        return cls(read, resolve, dict(defines or {}), tuple(forced), budget)


# Directories that hold other projects' code a package vendors (CUTLASS's examples and tools
# under third_party/cutlass): their .cu files are not the package's translation units (their
# headers are still read wherever the package's sources include them)
VENDORED_DIRS = frozenset({"third_party", "3rdparty", "thirdparty", "third-party", "vendor"})


def project_sources(root: Path) -> list[str]:
    """Every .cu file under a project (:func:`archguard.detect.sources.tree_files`) outside
    its vendored directories: what its CUDA extensions compile, as far as a reading of the
    tree can tell."""
    return split_project_sources(root)[0]


def split_project_sources(root: Path) -> tuple[list[str], list[str]]:
    """(the project's own .cu files, those under its vendored directories), from one walk."""
    own: list[str] = []
    vendored: list[str] = []
    for name in tree_files(root):
        if name.endswith(CUDA_SOURCES):
            (vendored if _vendored(Path(name), root) else own).append(name)
    return own, vendored


def _vendored(path: Path, root: Path) -> bool:
    return any(part.lower() in VENDORED_DIRS for part in path.relative_to(root).parts[:-1])


def path_sources(paths: Sequence[Path]) -> list[str]:
    """Files as given; directories: their .cu files, or, when they hold none, their CUDA
    headers (excerpts of kernels are often headers)."""
    out: list[str] = []
    for path in paths:
        if path.is_dir():
            found = project_sources(path)
            if not found:
                found = [name for name in tree_files(path) if name.endswith(CUDA_HEADERS)]
            out += found
        else:
            out.append(str(path))
    return out


def include_dirs_of(root: Path) -> list[Path]:
    """A project's likely include directories: itself and every ``include`` directory up
    to three levels down."""
    out = [root]
    for depth in range(1, 4):
        out += [p for p in root.glob("/".join(["*"] * depth)) if p.is_dir() and p.name == "include"]
    return out


def parse_defines(
    flags: Sequence[str], macros: Sequence[tuple[str, str | int | None]] = ()
) -> dict[str, str | None]:
    """A compile's macros: setuptools' ``define_macros`` ((name, value), value None: "1")
    and ``undef_macros``-style ``-U`` flags, then ``-D``/``-U`` flags in command-line order
    (``-DX``, ``-D X``, ``-DX=V``); the last word on a name wins."""
    # setuptools writes a value as -DNAME=VALUE with str(): an int is a value too (inplace-abn)
    out: dict[str, str | None] = {
        name: "1" if value is None else str(value) for name, value in macros
    }
    it = iter(flags)
    for flag in it:
        if flag in ("-D", "-U", "--define-macro", "--undefine-macro"):
            word = next(it, "")
            kind = "D" if flag in ("-D", "--define-macro") else "U"
        elif flag.startswith(("-D", "-U")):
            word, kind = flag[2:], flag[1]
        else:
            continue
        name, eq, value = word.partition("=")
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            continue
        out[name] = (value if eq else "1") if kind == "D" else None
    return out


def include_flags(flags: Sequence[str], root: Path) -> tuple[list[Path], list[str]]:
    """The ``-I`` directories and the ``-include`` / ``--pre-include`` files of a compile's
    flags (relative ones under ``root``): (directories, forced includes that exist)."""
    dirs: list[Path] = []
    forced: list[str] = []
    it = iter(flags)
    for flag in it:
        if flag in ("-I", "--include-path", "-include", "--pre-include"):
            value, kind = next(it, ""), flag
        elif flag.startswith("-I"):
            value, kind = flag[2:], "-I"
        elif flag.startswith(("--include-path=", "--pre-include=", "-include=")):
            kind, _, value = flag.partition("=")
        else:
            continue
        path = Path(value) if Path(value).is_absolute() else root / value
        if kind in ("-I", "--include-path"):
            dirs.append(path)
        elif _is_file(path):
            forced.append(str(path.resolve()))
    return dirs, forced


def _is_file(path: Path) -> bool:
    """A file, as far as the system can say (a name too long for it is none)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def file_resolver(include_dirs: Sequence[Path], inside: Sequence[Path]) -> Resolver:
    """Resolve ``#include`` names on disk: quoted ones beside the including file first, then
    ``include_dirs``; only files under one of ``inside`` are followed (the package's own
    sources and headers, not torch's or the toolkit's)."""
    roots = [p.resolve() for p in inside]

    def resolve(name: str, quoted: bool, including: str) -> str | None:
        candidates = ([Path(including).parent / name] if quoted else []) + [
            d / name for d in include_dirs
        ]
        for candidate in candidates:
            try:
                if candidate.is_file():
                    real = candidate.resolve()
                    if any(real == r or r in real.parents for r in roots):
                        return str(real)
                    return None
            except (OSError, ValueError):
                continue
        return None

    return resolve
