"""Spelling an arch list for the tools that consume it, and reading nvcc arch flags back.

Pure text work: ``-gencode`` flags for nvcc, ``TORCH_CUDA_ARCH_LIST`` for torch,
``CMAKE_CUDA_ARCHITECTURES`` for CMake, the parser that finds the arch flags a package
hard-codes in its nvcc arguments (:mod:`archguard.nvcc.plan` decides what each becomes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from archguard.core.arch import Arch, ArchEntry, Targets, format_list, split_target
from archguard.core.toolkit import known_arches
from archguard.errors import NotRepresentable, NvccFlagError

# torch.utils.cpp_extension._get_cuda_arch_flags (torch 2.13.0): supported_arches. An entry
# outside this set makes torch raise "Unknown CUDA arch".
TORCH_ACCEPTS = frozenset(
    (
        "3.5",
        "3.7",
        "5.0",
        "5.2",
        "5.3",
        "6.0",
        "6.1",
        "6.2",
        "7.0",
        "7.2",
        "7.5",
        "8.0",
        "8.6",
        "8.7",
        "8.9",
        "9.0",
        "9.0a",
        "10.0",
        "10.0a",
        "11.0",
        "11.0a",
        "10.3",
        "10.3a",
        "12.0",
        "12.0a",
        "12.1",
        "12.1a",
    )
)


def gencode_flags(entries: Iterable[ArchEntry] | Targets) -> list[str]:
    """One ``-gencode`` per cubin and per PTX target, ascending; PTX is always plain
    (for a list; an extension's own targets are given as :class:`Targets`)."""
    targets = entries if isinstance(entries, Targets) else Targets.from_entries(entries)
    flags = [f"-gencode=arch={a.compute},code={a.sm}" for a in sorted(targets.cubins)]
    flags += [f"-gencode=arch={a.compute},code={a.compute}" for a in sorted(targets.ptx)]
    return flags


def torch_arch_list(entries: Sequence[ArchEntry]) -> str:
    """``TORCH_CUDA_ARCH_LIST`` text, or :class:`NotRepresentable` when torch cannot say it."""
    problems = []
    for e in entries:
        if e.arch.suffix == "f":
            problems.append(f"{e} (torch has no 'f' targets)")
        elif e.arch.suffix == "a" and e.ptx:
            problems.append(
                f"{e} (torch would embed {e.arch.compute} PTX, archguard embeds "
                f"plain {e.arch.plain.compute})"
            )
        elif str(e.arch) not in TORCH_ACCEPTS:
            problems.append(f"{e} (not in torch's accepted list)")
    if problems:
        raise NotRepresentable(
            "TORCH_CUDA_ARCH_LIST cannot express " + "; ".join(problems) + ". Use "
            "--format gencode (nvcc flags) or --format cmake; in a build, archguard puts the "
            "-gencode flags on the nvcc line itself.",
            problems=tuple(problems),
        )
    return format_list(entries)


def cmake_architectures(entries: Iterable[ArchEntry]) -> str:
    """``CMAKE_CUDA_ARCHITECTURES`` text: ``NN-real`` cubins, ``NN`` cubin+PTX, ``NN-virtual``."""
    out = []
    for e in sorted(entries):
        name = f"{e.arch.digits}{e.arch.suffix}"
        if e.ptx and not e.arch.suffix:
            out.append(name)
        else:
            out.append(f"{name}-real")
            if e.ptx:
                out.append(f"{e.arch.digits}-virtual")
    return ";".join(out)


@dataclass(frozen=True)
class ArchVariables:
    """The variables that carry a list to what archguard's nvcc lines do not reach (torch's
    own ``TORCH_CUDA_ARCH_LIST`` reader, a CMake step): ``values`` set, ``unset`` with why
    (torch cannot spell an entry), ``notes`` (a CMake too old for a family target)."""

    values: dict[str, str]
    unset: dict[str, str]
    notes: tuple[str, ...]
    unspellable: tuple[str, ...] = ()  # the entries torch cannot spell, each with why
    families: tuple[str, ...] = ()  # the family (``f``) targets ``CUDAARCHS`` holds


def arch_variables(entries: Sequence[ArchEntry]) -> ArchVariables:
    """``TORCH_CUDA_ARCH_LIST`` where torch can spell ``entries`` (else unset, naming each
    entry it cannot spell) and ``CUDAARCHS``, CMake's default for
    ``CMAKE_CUDA_ARCHITECTURES``: the one place a list becomes those variables (the build's
    hook, ``archguard wheel``'s environment and ``archguard env`` all take them from here)."""
    values: dict[str, str] = {}
    unset: dict[str, str] = {}
    problems: tuple[str, ...] = ()
    try:
        values["TORCH_CUDA_ARCH_LIST"] = torch_arch_list(entries)
    except NotRepresentable as exc:
        problems = exc.problems
        unset["TORCH_CUDA_ARCH_LIST"] = "torch cannot spell " + "; ".join(problems)
    values["CUDAARCHS"] = cmake_architectures(entries)
    families = tuple(str(e) for e in entries if e.arch.suffix == "f")
    notes = (
        (
            f"CUDAARCHS holds family targets ({', '.join(families)}): CMake 4.4 reads the 'f' "
            "suffix, CMake 3.25 stops with 'is not one of the following'",
        )
        if families
        else ()
    )
    return ArchVariables(values, unset, notes, problems, families)


_SPELLINGS = {
    "dotted": re.compile(r"^[0-9]{1,2}\.[0-9][af]?(?:\+PTX)?$", re.I),  # 8.0 9.0a 9.0+PTX
    "cmake": re.compile(r"^[0-9]{2,3}[af]?(?:-real|-virtual)?$"),  # 80 90a 90-real
    "sm": re.compile(r"^(?:sm|compute)_[0-9]{2,3}[af]?$"),  # sm_80 compute_90
}


def _known(token: str) -> bool:
    """A token of a package's arch default that names a known CUDA arch."""
    digits = re.sub(r"^(?:sm|compute)_|(?:\+PTX|-real|-virtual)$", "", token, flags=re.I)
    digits = digits.replace(".", "").rstrip("af")
    return any(a.digits == digits for a in known_arches())


def dropped_ptx(
    sample: str, spelled: str, entries: Sequence[ArchEntry], cmake: bool = False
) -> bool:
    """Whether ``spelled`` (in ``sample``'s spelling) leaves out PTX the list holds. Numbers
    that go to CMake (``cmake``) say PTX bare (``80``: a cubin and PTX) or ``-virtual``."""
    has_ptx = any(e.ptx for e in entries)
    says = "+PTX" in spelled.upper() or "compute_" in spelled or "-real" in spelled
    if cmake:
        tokens = spelled.replace(",", ";").replace(" ", ";").split(";")
        says = says or any(t.isdigit() or t.endswith("-virtual") for t in tokens)
    return has_ptx and not says


def spelled_like(sample: str, entries: Sequence[ArchEntry], cmake: bool = False) -> str | None:
    """``entries`` in the spelling of ``sample``, a package's own default for its arch
    variable (``"8.0;8.6"``, ``"80,86"``, ``"sm_80 sm_86"``, ``"80-real;90"``; an empty one
    whose value goes to ``CMAKE_CUDA_ARCHITECTURES`` takes CMake's own spelling): its
    separator, its form, and PTX only where its form can say it; numbers that go to
    ``CMAKE_CUDA_ARCHITECTURES`` (``cmake``) in CMake's own words (``80-real;90``: a bare
    ``80`` there is a cubin and PTX). None when ``sample`` is none of these (archguard cannot
    tell the package's spelling)."""
    text = sample.strip()
    sep = next((c for c in (";", ",", " ") if c in text), ";")
    tokens = [t.strip() for t in text.split(sep) if t.strip()]
    if not tokens:  # an empty default: only one that goes to CMAKE_CUDA_ARCHITECTURES has one
        return cmake_architectures(sorted(entries)) if cmake else None
    form = next((f for f, rx in _SPELLINGS.items() if all(rx.match(t) for t in tokens)), None)
    if form is None or not all(_known(t) for t in tokens):  # "64" for ARCH: not a GPU's
        return None
    ordered = sorted(entries)
    if form == "cmake":
        if cmake or any("-" in t for t in tokens):
            return cmake_architectures(ordered).replace(";", sep)
        return sep.join(f"{e.arch.digits}{e.arch.suffix}" for e in ordered)
    if form == "dotted":
        ptx = any(t.upper().endswith("+PTX") for t in tokens)
        return sep.join(str(e) if ptx else str(e.arch) for e in ordered)
    ptx = any(t.startswith("compute_") for t in tokens)
    out = [e.arch.sm for e in ordered]
    out += [e.arch.compute for e in ordered if ptx and e.ptx]
    return sep.join(out)


# ---------------------------------------------------------------------------------------
# Reading arch flags a package hard-codes.

_NAMES = {
    "-gencode": "gencode",
    "--generate-code": "gencode",
    "-arch": "arch",
    "--gpu-architecture": "arch",
    "-code": "code",
    "--gpu-code": "code",
}


@dataclass(frozen=True)
class ArchFlag:
    """Arch flags found in an nvcc argument list: the tokens, and what they would embed."""

    tokens: tuple[str, ...]
    targets: Targets


def _target(text: str, flag: str) -> tuple[str, Arch]:
    split = split_target(text.strip().strip("\"'"))
    if split is None:
        raise NvccFlagError(
            f"the nvcc flag {flag!r} names {text!r}, which archguard cannot clamp (it is not "
            "an sm_XY / compute_XY target; values such as native, all or all-major depend on "
            "the machine or the toolkit). Remove the flag and declare the arches in "
            "[tool.archguard] arch_list instead."
        )
    kind, arch = split
    if kind == "lto":
        raise NvccFlagError(
            f"the nvcc flag {flag!r} asks for LTO IR ({text}); archguard "
            "does not clamp LTO targets. Remove the flag or set "
            "ARCHGUARD_DISABLE=1 for this package."
        )
    return kind, arch


def _values(text: str) -> list[str]:
    return [v for v in re.split(r"[\[\],\s]+", text.strip().strip("\"'")) if v]


def _gencode_targets(value: str, flag: str) -> Targets:
    parts = dict(p.split("=", 1) for p in re.split(r",(?=\s*(?:arch|code)=)", value) if "=" in p)
    if "arch" not in parts or "code" not in parts:
        raise NvccFlagError(
            f"the nvcc flag {flag!r} is not of the form "
            "arch=compute_XY,code=sm_XY; fix or remove it."
        )
    cubins: set[Arch] = set()
    ptx: set[Arch] = set()
    for code in _values(parts["code"]):
        kind, arch = _target(code, flag)
        (cubins if kind == "sm" else ptx).add(arch)
    return Targets(frozenset(cubins), frozenset(ptx))


def find_arch_flags(args: Sequence[str]) -> tuple[list[str], list[ArchFlag]]:
    """Split nvcc arguments into (other arguments, arch flags with their targets).

    Understands ``-gencode``/``--generate-code``, ``-arch``/``--gpu-architecture`` and
    ``-code``/``--gpu-code``, each as ``NAME=VALUE`` or ``NAME VALUE``. Text that merely
    contains "arch" (an include path under ``monarch/``) is left alone.
    """
    rest: list[str] = []
    found: list[ArchFlag] = []
    arch_value: tuple[tuple[str, ...], str] | None = None
    code_value: tuple[tuple[str, ...], str] | None = None
    i = 0
    while i < len(args):
        token = args[i]
        name, sep, value = token.partition("=")
        kind = _NAMES.get(name)
        if kind is None:
            rest.append(token)
            i += 1
            continue
        if sep:
            tokens: tuple[str, ...] = (token,)
        elif i + 1 < len(args):
            value, tokens = args[i + 1], (token, args[i + 1])
            i += 1
        else:
            raise NvccFlagError(f"the nvcc flag {token!r} has no value; fix or remove it.")
        i += 1
        if kind == "gencode":
            found.append(ArchFlag(tokens, _gencode_targets(value, " ".join(tokens))))
        elif kind == "arch":
            arch_value = (tokens, value)
        else:
            code_value = (tokens, value)
    if arch_value is not None or code_value is not None:
        found.append(_arch_code(arch_value, code_value))
    return rest, found


def _arch_code(
    arch_value: tuple[tuple[str, ...], str] | None,
    code_value: tuple[tuple[str, ...], str] | None,
) -> ArchFlag:
    tokens = (arch_value[0] if arch_value else ()) + (code_value[0] if code_value else ())
    flag = " ".join(tokens)
    cubins: set[Arch] = set()
    ptx: set[Arch] = set()
    if code_value is not None:
        for code in _values(code_value[1]):
            kind, arch = _target(code, flag)
            (cubins if kind == "sm" else ptx).add(arch)
        return ArchFlag(tokens, Targets(frozenset(cubins), frozenset(ptx)))
    assert arch_value is not None
    for value in _values(arch_value[1]):
        kind, arch = _target(value, flag)
        if kind != "sm":
            ptx.add(arch)
            continue
        cubins.add(arch)
        # -arch=sm_XY means sm_XY SASS + compute_XY PTX. nvcc expands -arch=sm_90a to the
        # sm_90a cubin plus *plain* compute_90 PTX (`nvcc -arch=sm_90a --dryrun`), and that
        # PTX, compiled without the arch-specific features, is what fails on sm_90a-only
        # code: the package meant the sm_90a cubin, and that is what it is read as.
        if not arch.suffix:
            ptx.add(arch)
    return ArchFlag(tokens, Targets(frozenset(cubins), frozenset(ptx)))


_MENTION = re.compile(r"\b(?:sm|compute)_[0-9]{2,3}[af]\b", re.ASCII)


def arch_specific_mentions(text: str) -> list[tuple[int, str]]:
    """(line, name) of every ``sm_XYa``/``sm_XYf``/``compute_XYa`` name in a build file."""
    return [
        (number, match.group(0))
        for number, line in enumerate(text.splitlines(), 1)
        for match in _MENTION.finditer(line)
    ]


_TARGET_MENTION = re.compile(r"\b(?:sm|compute)_[0-9]{2,3}[af]?\b", re.ASCII)


def target_mentions(text: str) -> list[tuple[int, Arch]]:
    """(line, arch) of every ``sm_XY[a|f]``/``compute_XY[a|f]`` name in a build file (an
    f-string such as ``sm_{cc}`` names nothing)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in _TARGET_MENTION.finditer(line):
            split = split_target(match.group(0))
            if split is not None:
                out.append((number, split[1]))
    return out


_THREADS = re.compile(r"^(?:--threads|-t)(?:=?([0-9]+))?$")


def threads_flag(args: Sequence[str]) -> tuple[int, str] | None:
    """The ``--threads N`` / ``-t N`` a package puts on its nvcc line: (N, as written)."""
    for i, token in enumerate(args):
        match = _THREADS.match(token)
        if not match:
            continue
        value = match[1]
        written = token
        if value is None and i + 1 < len(args) and args[i + 1].isdigit():
            value, written = args[i + 1], f"{token} {args[i + 1]}"
        if value is not None:
            return int(value), written
    return None
