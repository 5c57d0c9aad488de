"""Builds that give the same bytes for the same inputs (issue 50), whatever the path of the
tree, the process, the time and the host: the flags archguard adds to the compile lines it
owns, and whether the build is reproducible by construction (and why not).

Measured with nvcc 13.0 on the same extension built from two paths (tests/test_reproducible.py):

- nvcc compiles its host side through a temporary file named ``tmpxft_<pid>_...``, and the
  host object keeps that name: 2 bytes of a 42 kB ``.so`` differ between two builds.
  ``-objtemp`` (``--objdir-as-tempdir``) puts the intermediates beside the object, named
  after it. sccache runs nvcc's steps itself, naming them ``x_0...`` (the same each time),
  and with ``-objtemp`` it exits 0 without writing the object (sccache 0.16): the flag is
  added only where nvcc runs unwrapped.
- The host compiler keeps its input's name as the object's ``STT_FILE`` symbol:
  ``k1.o.cudafe1.cpp`` under ``-objtemp``, ``x_0.cudafe1.cpp`` under sccache, so one job
  with and without the compile cache gave two sha256s (issue 57). Each ``.cu`` object's own
  intermediates are mapped to sccache's name (``-ffile-prefix-map=<object>.=x_0.``: the
  compiler takes the map for the whole path, measured with GCC 12), so the bytes do not
  depend on the compile cache; the wheel's record leaves out what differs (the flag, the
  maps, the cache chosen: the build log says them).
- The host compiler writes the tree's path (and the headers' paths) into the debug
  information Python's own flags ask for (``-g``): ``-ffile-prefix-map=OLD=NEW`` for the
  tree, the Python environment and the toolkit root, on the C/C++ compiles and through
  ``-Xcompiler`` on nvcc's host side.
- ``SOURCE_DATE_EPOCH`` fixes the wheel's zip dates (set by ``archguard wheel`` and the farm).
- ``--frandom-seed`` alone does not fix the temporary name (measured): not added.
- nvcc names each anonymous namespace after the source's absolute path
  (``_GLOBAL__N__<hash>_14_elementwise_cu_...``; ``--orig_src_path_name`` to cudafe++ and
  cicc), ``--frandom-seed`` or not, with a relative path given or not: a source that has one
  (torch's headers bring one through CCCL's ``cuda::std``) gives other bytes at another path
  (measured: ``.nv_fatbin`` and the namespace's ``.rodata`` sections). Farm jobs and released
  sources build from a copy named by its content under archguard's cache, the same path from
  any checkout (and on any builder whose ``ARCHGUARD_CACHE_DIR`` is the same); a tree built at
  its checkout's path is said not to be reproducible from another path.

A package that puts the time into its code (``__DATE__``, ``__TIME__``, ``__TIMESTAMP__`` in
its sources) still builds; the record says it is not reproducible and where.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archguard._integration.common import project_root, say
from archguard._integration.environment import Planned, cache_choice
from archguard._integration.session import Session
from archguard.detect.fetch import cache_root

# where each mapped prefix is said to be, in the binaries
TREE, PYTHON, TOOLKIT = ".", "/archguard/python", "/archguard/cuda"
_TIME_MACRO = re.compile(r"\b__(?:DATE|TIME|TIMESTAMP)__\b")
_HEADERS = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl")
# a source whose device code holds an anonymous namespace, its own or its headers' (torch's,
# CCCL's): fixed words, no nested quantifier (linear)
_PATH_BOUND = re.compile(
    r"\bnamespace\s*\{|#\s*include\s*[<\"](?:torch/|ATen/|c10/|cuda/std/|cub/|thrust/)"
)
_SCAN_LIMIT = 4 << 20  # bytes read per file: a generated table is not looked through whole


@dataclass(frozen=True)
class Reproducible:
    """The flags a build's compiles get for the same bytes, and the verdict."""

    nvcc: tuple[str, ...]  # added to each nvcc line archguard owns
    cxx: tuple[str, ...]  # added to each host (C/C++) compile of those extensions
    by_construction: bool
    why_not: tuple[str, ...] = ()

    def nvcc_for(self, sources: Sequence[str], build_temp: str) -> list[str]:
        """The flags for one extension's nvcc line: :attr:`nvcc`, and under ``-objtemp``
        each of its ``.cu`` objects' intermediates named as sccache names them."""
        if _OBJTEMP not in self.nvcc:
            return list(self.nvcc)
        return [*self.nvcc, *intermediate_maps(sources, build_temp)]

    def record(self) -> dict[str, object]:
        """Its part of the wheel's record (``build.reproducible``): path-free, and the same
        whichever compile cache ran (``-objtemp`` and the intermediates' maps are how this
        builder names its temporary files, said in the log)."""
        return {
            "by_construction": self.by_construction,
            "why_not": list(self.why_not),
            # sorted: the maps' order follows their paths' lengths, which vary by site
            "nvcc_flags": sorted(_shown(f) for f in self.nvcc if f != _OBJTEMP),
            "cxx_flags": sorted(_shown(f) for f in self.cxx),
        }

    def lines(self) -> list[str]:
        """What the build log says of it, once per build."""
        added = " ".join(sorted(dict.fromkeys(_shown(f) for f in (*self.nvcc, *self.cxx))))
        head = f"reproducible: the compiles get {added}"
        if _OBJTEMP in self.nvcc:
            head += (
                f" (each CUDA object's intermediates named {SCCACHE_INTERMEDIATE}*, as sccache "
                "names them)"
            )
        if self.by_construction:
            return [f"{head}: the same inputs give the same bytes"]
        return [f"{head}; not reproducible by construction: {'; '.join(self.why_not)}"]


def _shown(flag: str) -> str:
    """A prefix map as the record keeps it: its new side only (the old is this machine's)."""
    if "-ffile-prefix-map=" in flag:
        head, _, new = flag.rpartition("=")
        return f"{head.split('-ffile-prefix-map=')[0]}-ffile-prefix-map=...={new}"
    return flag


_OBJTEMP = "-objtemp"
_CUDA_SOURCES = (".cu", ".cuh")  # what torch's cpp_extension gives nvcc (_is_cuda_file)
SCCACHE_INTERMEDIATE = "x_0."  # sccache's name for nvcc's intermediates (sccache 0.16)


def intermediate_maps(sources: Sequence[str], build_temp: str) -> list[str]:
    """For each CUDA source, ``-Xcompiler=-ffile-prefix-map=<object>.=x_0.``: its
    ``-objtemp`` intermediates (``<object>.cudafe1.cpp``) named as under sccache in the
    host object. The object is where setuptools puts it (``object_filenames``): under the
    build directory as given (setuptools' own compile) and made absolute (torch's ninja
    file); each map matches only its own object's files."""
    # os.path, as setuptools and torch spell the object's path (abspath: no symlink resolved)
    out: dict[str, None] = {}
    for source in sources:
        stem, suffix = os.path.splitext(source)  # noqa: PTH122
        if suffix not in _CUDA_SOURCES:
            continue
        relative = os.path.splitdrive(stem)[1].lstrip("/")
        for folder in (build_temp, os.path.abspath(build_temp)):  # noqa: PTH100
            obj = os.path.join(folder, relative + ".o")  # noqa: PTH118
            out[f"-Xcompiler=-ffile-prefix-map={obj}.={SCCACHE_INTERMEDIATE}"] = None
    return list(out)


def prefix_maps(prefixes: Mapping[str, str]) -> list[str]:
    """``-ffile-prefix-map=OLD=NEW`` for each existing ``OLD``, the longest last (the host
    compiler takes the last map that matches)."""
    found = [(old, new) for old, new in prefixes.items() if old and Path(old).is_absolute()]
    return [f"-ffile-prefix-map={old}={new}" for old, new in sorted(found, key=lambda p: len(p[0]))]


def source_facts(files: Iterable[Path], root: Path) -> tuple[list[str], str | None]:
    """The uses of a time macro (``FILE:LINE uses __DATE__``), and the first place whose
    bytes depend on the source's path (``FILE:LINE has an anonymous namespace`` or includes
    torch's headers); linear: patterns without backtracking, each file read once, at most
    :data:`_SCAN_LIMIT`."""
    out: list[str] = []
    bound = None
    for path in files:
        try:
            with path.open("rb") as f:
                text = f.read(_SCAN_LIMIT).decode("utf-8", errors="replace")
        except OSError:
            continue
        try:
            shown = path.relative_to(root)
        except ValueError:
            shown = path
        for match in _TIME_MACRO.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            out.append(f"{shown}:{line} uses {match.group(0)}")
        found = _PATH_BOUND.search(text) if bound is None else None
        if found is not None:
            line = text.count("\n", 0, found.start()) + 1
            what = "namespace {" if found.group(0).startswith("namespace") else found.group(0)
            bound = f"{shown}:{line} ({' '.join(what.split())})"
    return out, bound


def scanned(sources: Sequence[str], root: Path) -> list[Path]:
    """An extension's sources and the headers beside them (each directory once)."""
    files: dict[Path, None] = {}
    for source in sources:
        path = (root / source).resolve() if not Path(source).is_absolute() else Path(source)
        files[path] = None
        folder = path.parent
        if folder.is_dir() and (folder == root or root in folder.parents):
            for header in sorted(folder.iterdir()):
                if header.suffix in _HEADERS:
                    files[header] = None
    return list(files)


def reproducible(  # noqa: PLR0913 - each a fact of this build, each needed
    root: Path,
    *,
    toolkit_root: str | None,
    cache_tool: str,
    environ: Mapping[str, str],
    cuda_major: int,
    uses: Sequence[str],
    path_bound: str | None = None,
) -> Reproducible:
    """The flags and the verdict for a build of the tree ``root`` whose nvcc is under
    ``toolkit_root``, compiled through ``cache_tool`` (``off``, ``sccache``, ``ccache``) in
    ``environ`` (the build's, with archguard's variables); ``uses``: the time macros found."""
    maps = prefix_maps(
        {str(root): TREE, sys.prefix: PYTHON, **({toolkit_root: TOOLKIT} if toolkit_root else {})}
    )
    nvcc = [f"-Xcompiler={m}" for m in maps]
    why_not = [*uses]
    if path_bound:
        why_not.append(
            f"{path_bound}: nvcc names each anonymous namespace after the source's absolute "
            "path, and this tree is built at its checkout's path (farm jobs and released "
            "sources build from a copy named by its content under archguard's cache)"
        )
    wrapper = environ.get("PYTORCH_NVCC", "")
    if wrapper.split()[:1] and Path(wrapper.split()[0]).name == "sccache":
        pass  # sccache names nvcc's intermediates itself, the same each time (measured)
    elif wrapper:
        why_not.append(
            f"PYTORCH_NVCC={wrapper!r} runs nvcc: nvcc's temporary file names carry its pid, "
            "and -objtemp is not added under a wrapper archguard has not measured"
        )
    elif cache_tool == "ccache":
        why_not.append("ccache wraps nvcc: its temporary names were not measured")
    elif cuda_major < 13:
        why_not.append(
            f"nvcc {cuda_major}.x: -objtemp is added from CUDA 13.0 (measured there); its "
            "temporary file names carry its pid"
        )
    else:
        nvcc.insert(0, _OBJTEMP)
    if "SOURCE_DATE_EPOCH" not in environ:
        why_not.append("SOURCE_DATE_EPOCH is unset: the wheel's zip carries the build's dates")
    return Reproducible(tuple(nvcc), tuple(maps), not why_not, tuple(why_not))


# _fs.own_directory's second and later slots of a source in the cache: src/<sha>.2, ...
_SLOT = re.compile(r"^(?:tree-)?[0-9a-f]{16}\.\d+$")


def _path_bound(root: Path, bound: str | None) -> str | None:
    """Where a source's bytes follow its path, and the tree is not where any build of the
    same content builds: its checkout, or a second slot of the cache (two builds of the
    same source at once)."""
    if bound is None:
        return None
    cache = cache_root().resolve()
    if not root.is_relative_to(cache):
        return bound
    slot = next((p.name for p in root.relative_to(cache).parents if _SLOT.search(p.name)), None)
    return (
        f"{bound}, built in the cache's slot {slot} (another build held the first)"
        if slot
        else None
    )


def for_build(
    cmd: Any, session: Session, planned: Planned, variables: dict[str, str | None]
) -> Reproducible:
    """The flags for the same bytes from the same inputs, said once and recorded."""
    root = Path(project_root(cmd.distribution)).resolve()
    environ = {**os.environ, **{k: v for k, v in variables.items() if v is not None}}
    toolkit = session.resolution.toolkit
    home = environ.get("CUDA_HOME") or (
        str(Path(toolkit.nvcc).parent.parent) if toolkit.nvcc else None
    )
    tool = cache_choice(session)[0]
    if session.compiler_cache.get("skipped"):  # sccache refused this nvcc: none wraps it
        tool = "off"
    files = [f for ext, _, _ in planned for f in scanned(list(ext.sources), root)]
    uses, bound = source_facts(files, root)
    repro = reproducible(
        root,
        toolkit_root=home,
        cache_tool=tool,
        environ=environ,
        cuda_major=toolkit.version.major,
        uses=uses,
        path_bound=_path_bound(root, bound),
    )
    for line in repro.lines():
        say(line)
    session.reproducible = repro.record()
    return repro
