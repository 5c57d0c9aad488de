"""What a build does with the arches its package's CMake files read: the package's own arch
variables set to the list in their spelling before CMake runs, and a refusal before anything
compiles where the files force a literal list no variable archguard sets can change.

The arches reach a CMake build through ``CUDAARCHS`` (:mod:`archguard.reports.text`), and
through the package's own variable where its CMake files read one (``$ENV{MYPKG_CUDA_ARCHS}``
with a literal default; a cache entry with one, given as a ``-D`` in ``CMAKE_ARGS``; either
passed to a function of the package's): :func:`cmake_arches` sets it to the list in that
default's spelling, as for a ``setup.py``'s own variable; where the variable's items go into
nvcc flags (``-gencode arch=compute_${arch},code=sm_${arch}``), in the digits those flags
embed, saying what their shape cannot say, and refusing where the list cannot be said in
it. The files are read by :mod:`archguard.frontend.cmake`, the one reader of CMake files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path

from archguard.core.arch import ArchEntry, Targets
from archguard.frontend.cmake import (
    CMakeFiles,
    ForcedLine,
    OwnVariable,
    forced_lines,
    own_variables,
)
from archguard.frontend.cmake_flags import flag_spelling, within
from archguard.nvcc.flags import cmake_architectures, dropped_ptx, spelled_like

_CMAKE_ARCH = re.compile(r"([0-9]{2,3}[af]?)(-real|-virtual)?")
_FALSE = frozenset({"", "OFF", "FALSE", "NO", "N", "0", "IGNORE", "NOTFOUND"})


@dataclass(frozen=True)
class CMakeArches:
    """What a package's CMake files do with the arches, for one list: the package's own arch
    variables set to it in their spelling, what was said, and the refusal's words where the
    files force arches no variable archguard sets can change ('' where none do)."""

    values: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    refusal: str = ""


def cmake_arches(
    tree: Path,
    entries: Sequence[ArchEntry],
    environ: Mapping[str, str],
    given: Mapping[str, str],
    *,
    cmake_args: bool = True,
) -> CMakeArches:
    """For a build of ``tree`` with the list ``entries``: each arch variable its CMake files
    read from the environment with a literal default, set to the list in that default's
    spelling (the caller's ``environ`` wins; what archguard already ``given`` is kept), and
    the lines that force a literal list of other arches, as the refusal's words. Its own
    reading failing never stops the build: it is said, and the read-back still checks."""
    try:
        return _cmake_arches(CMakeFiles.read(tree), entries, environ, given, cmake_args)
    except Exception as exc:  # archguard's own reading failed: not a decision
        return CMakeArches(
            notes=(
                f"warning: archguard could not read its CMake files ({type(exc).__name__}: "
                f"{str(exc)[:200]}): none of their arch variables set, nothing checked before "
                "the build (the read-back checks the wheel)",
            )
        )


def _cmake_arches(
    model: CMakeFiles,
    entries: Sequence[ArchEntry],
    environ: Mapping[str, str],
    given: Mapping[str, str],
    cmake_args: bool = True,
) -> CMakeArches:
    """:func:`cmake_arches` on the files read; ``cmake_args``: the build passes CMAKE_ARGS to
    CMake (a cache entry's -D is given only then)."""
    plan = _Plan(model, entries, environ, given)
    values = plan.values
    notes: list[str] = []
    defined: list[str] = []  # cache entries given a -D
    for own in own_variables(model):
        name = own.name
        if own.cache:
            said = _cache_define(own, plan) if cmake_args else ""
            if said:
                notes.append(said)
                defined.append(name)
            continue
        if name in given:
            continue
        if environ.get(name):
            notes.append(f"its CMake files read {name}, an arch variable: your {name} wins")
            continue
        spelled, added = _spelled(own, plan)
        if spelled is None:
            continue
        values[name] = spelled
        notes.append(
            f"its CMake files read {name}, an arch variable (default {own.default!r}, "
            f"{own.where}): set to the effective list in that spelling, {name}={spelled!r}" + added
        )
    if cmake_args:
        said = _default_define(model, plan)
        if said:
            notes.append(said)
            defined.append(_ARCHES)
    want = Targets.from_entries(entries)
    wanted = _targets(cmake_architectures(entries).split(";"))
    kept = (  # neither OFF (no arch flags: a target without CUDA) nor the list itself, nor a
        # flag that gives only arches of the list (CMake adds the list's own beside it)
        f
        for f in forced_lines(model, {**environ, **given, **values}, defined)
        if (f.targets is not None and not within(f.targets, want))
        or f.arches is None
        or (
            f.targets is None
            and not all(t.strip().upper() in _FALSE for t in f.arches)
            and _targets(f.arches) != wanted
        )
    )
    found: dict[str, ForcedLine] = {}
    for f in islice(chain(plan.cannot, kept), 100):
        found.setdefault(f.where(), f)
    forced = list(islice(found.values(), 20))
    return CMakeArches(values, tuple(notes), _refusal(forced, entries) if forced else "")


@dataclass
class _Plan:
    """What :func:`_cmake_arches` works from, and what it sets."""

    model: CMakeFiles
    entries: Sequence[ArchEntry]
    environ: Mapping[str, str]
    given: Mapping[str, str]
    values: dict[str, str] = field(default_factory=dict)
    cannot: list[ForcedLine] = field(default_factory=list)  # flags that cannot say the list


def _spelled(own: OwnVariable, plan: _Plan) -> tuple[str | None, str]:
    """The list in the spelling of ``own``'s default, or of the nvcc flags that embed its
    items, and what the note adds; None where it cannot be told, or (a line added to
    ``plan.cannot``) where the flags cannot say the list."""
    entries = plan.entries
    if not own.flags:
        spelled = spelled_like(own.default, entries, own.cmake)
        if spelled is None or own.cache:
            return spelled, ""
        # a bare 80 there is a cubin and PTX, as in CMAKE_CUDA_ARCHITECTURES
        said_ptx = own.cmake and _one_list(spelled) == cmake_architectures(entries)
        dropped = dropped_ptx(own.default, spelled, entries, own.cmake) and not said_ptx
        return spelled, (
            " (its spelling cannot say PTX: the PTX of the list is left out there; the "
            "read-back says what the build made of it)"
            if dropped
            else ""
        )
    items = [t for t in own.default.split(";") if t.strip()]
    flag = flag_spelling(own.flags, entries)
    if flag is None or not items or any(u.gives(t) is None for u in own.flags for t in items):
        return None, ""  # its default is not what its flags read: it is not followed
    why, use = flag.why, flag.use
    cmake = spelled_like(own.default, entries, True) if own.cmake else flag.value
    if not why and cmake != flag.value:
        why = (
            f"it reaches CMAKE_CUDA_ARCHITECTURES too, which takes this cell's list as "
            f"{cmake}, where its nvcc flags take {flag.value}"
        )
        use = own.flags[0]
    if why and use is not None:
        said = f"archguard would set {own.name}, which this flag reads, but {why}"
        plan.cannot.append(ForcedLine(use.command, use.arg, (), None, plan.model, why=said))
        return None, ""
    wheres = ", ".join(dict.fromkeys(u.where() for u in own.flags))
    left = (
        f"; their shape cannot say {' '.join(flag.left_out)}: left out there, the read-back "
        "says what the build made of it"
        if flag.left_out
        else ""
    )
    return flag.value, f" (the digits its nvcc flags embed, at {wheres}{left})"


def _cache_define(own: OwnVariable, plan: _Plan) -> str:
    """A cache entry that reaches the arches (no environment reads it): ``-DNAME=list`` put
    first in ``CMAKE_ARGS`` (``values``; scikit-build-core and the setup.py files that run
    CMake pass it on), in its default's spelling (or its nvcc flags'); what the log says (''
    where nothing is set: the caller's own -D wins, or the spelling cannot be told)."""
    name = own.name
    if _callers_define(plan, name):
        return f"its CMake files take {name}, a cache entry that reaches the arches: your -D wins"
    spelled, added = _spelled(own, plan)
    if spelled is None or any(c.isspace() for c in spelled):
        return ""
    _define_first(plan, name, spelled)
    return (
        f"its CMake files take {name}, a cache entry that reaches the arches (default "
        f"{own.default!r}, {own.where}): -D{name}={spelled} goes first in CMAKE_ARGS{added}"
    )


def _callers_define(plan: _Plan, name: str) -> bool:
    """Whether the caller's own ``CMAKE_ARGS`` gives ``-DNAME=`` (it wins: nothing is set)."""
    mine = plan.environ.get("CMAKE_ARGS", "")
    return re.search(rf"(?:^|\s)-D\s*{re.escape(name)}(?::\w+)?=", mine) is not None


def _define_first(plan: _Plan, name: str, spelled: str) -> None:
    """``-DNAME=spelled`` first in the build's ``CMAKE_ARGS`` (before what archguard or the
    caller put there, whose later -D would win)."""
    mine = plan.environ.get("CMAKE_ARGS", "")
    before = plan.values.get("CMAKE_ARGS", plan.given.get("CMAKE_ARGS", mine))
    plan.values["CMAKE_ARGS"] = f"-D{name}={spelled} {before}".strip()


_ARCHES = "CMAKE_CUDA_ARCHITECTURES"


def _default_define(model: CMakeFiles, plan: _Plan) -> str:
    """Where the files set a default of the arches (``if(NOT DEFINED
    CMAKE_CUDA_ARCHITECTURES) set(...)``): CUDAARCHS defines the variable only as CUDA is
    enabled, so a default set before that (the if() ahead of ``enable_language(CUDA)``, as
    ggml-era files have it) stands, and nvcc gets its arches. ``-DCMAKE_CUDA_ARCHITECTURES=``
    the list, first in ``CMAKE_ARGS``, defines it before any line runs, wherever the if()
    is; what the log says ('' where there is no such default; the caller's own -D wins)."""
    defaults = [
        c
        for c in model.commands
        if c.defaulted and c.name == "set" and c.args and c.args[0].text == _ARCHES
    ]
    if not defaults:
        return ""
    if _callers_define(plan, _ARCHES):
        return f"its CMake files set a default of {_ARCHES}: your -D{_ARCHES} wins"
    spelled = cmake_architectures(plan.entries)
    _define_first(plan, _ARCHES, spelled)
    return (
        f"its CMake files set a default of {_ARCHES} ({defaults[0].where()}), which stands "
        f"where it runs before CUDA is enabled (CUDAARCHS is read only then): "
        f"-D{_ARCHES}={spelled} goes first in CMAKE_ARGS"
    )


def _targets(tokens: Iterable[str]) -> frozenset[str] | None:
    """``80;90-real`` as targets (sm_80 compute_80 sm_90); None for ``all``, ``native``..."""
    out = set()
    for token in tokens:
        m = _CMAKE_ARCH.fullmatch(token.strip())
        if m is None:
            return None
        if m[2] != "-virtual":
            out.add(f"sm_{m[1]}")
        if m[2] != "-real":
            out.add(f"compute_{m[1]}")
    return frozenset(out)


def _one_list(text: str) -> str:
    return ";".join(text.replace(",", ";").replace(" ", ";").split(";"))


def _refusal(forced: list[ForcedLine], entries: Sequence[ArchEntry]) -> str:
    """The refusal's words: each line, what it gives, and the fix."""
    wanted = cmake_architectures(entries)
    shown = "; ".join(f"{f.where()} ({f.gives()})" for f in forced[:5]) + (
        f"; and {len(forced) - 5} more" if len(forced) > 5 else ""
    )
    reads = sorted({name for f in forced for name in f.reads()})
    fix = (
        f"set {' or '.join(reads)} (which that value reads from the environment, unset "
        f"here) to this cell's list, {wanted} in CMake's spelling; or "
        if reads
        else ""
    )
    return (
        "refused before building (no nvcc ran): its CMake files force CUDA arches that no "
        f"variable archguard sets can change, where this cell's list is {wanted}: {shown}. "
        f"Fix: {fix}patch those lines to follow ${{CMAKE_CUDA_ARCHITECTURES}} (archguard "
        "gives the list as CUDAARCHS) or guard them with if(NOT DEFINED "
        "CMAKE_CUDA_ARCHITECTURES); or build this cell with that list (ARCHGUARD_ARCH_LIST, "
        "or arch_list in [tool.archguard]); or skip the package for this cell"
    )
