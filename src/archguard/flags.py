"""Spelling an arch list for the tools that consume it, reading nvcc arch flags back, and
planning an extension's nvcc arguments.

Pure text work: ``-gencode`` flags for nvcc, ``TORCH_CUDA_ARCH_LIST`` for torch,
``CMAKE_CUDA_ARCHITECTURES`` for CMake, the parser that finds the arch flags a package
hard-codes in its nvcc arguments, and :func:`plan_nvcc_args`, which decides what each
hard-coded flag becomes so that the build edge only has to apply the plan.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from archguard.arch import Arch, ArchEntry, Targets, format_list, split_target
from archguard.errors import NotRepresentable, NvccFlagError
from archguard.resolve import Outcome, Resolution

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


def gencode_flags(entries: Iterable[ArchEntry]) -> list[str]:
    """One ``-gencode`` per cubin and per PTX target, ascending; PTX is always plain."""
    targets = Targets.from_entries(entries)
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
        if kind == "sm":  # -arch=sm_XY means compute_XY PTX + sm_XY SASS
            cubins.add(arch)
        ptx.add(arch)
    return ArchFlag(tokens, Targets(frozenset(cubins), frozenset(ptx)))


# ---------------------------------------------------------------------------------------
# Planning one extension's nvcc arguments.


@dataclass(frozen=True)
class NvccPlan:
    """What an extension's nvcc argument list becomes, and what to say about it."""

    args: list[str]
    warnings: list[str]  # hard-coded targets dropped, each with why
    notes: list[str]  # hard-coded flags within the effective list, replaced


def _why_not(res: Resolution, arch: Arch) -> str:
    decisions = [d for d in res.why(arch) if d.outcome in (Outcome.DROPPED, Outcome.NOT_REQUESTED)]
    return decisions[-1].reason if decisions else "not in the effective list"


def plan_nvcc_args(args: Sequence[str], res: Resolution, ext_name: str) -> NvccPlan:
    """Every arch flag out (each hard-coded target outside the effective list named with
    its reason), the effective list's ``-gencode`` flags in."""
    rest, found = find_arch_flags(list(args))
    warnings: list[str] = []
    notes: list[str] = []
    effective = res.targets
    for flag in found:
        text = " ".join(flag.tokens)
        extra_cubins = sorted(flag.targets.cubins - effective.cubins)
        extra = [a.sm for a in extra_cubins]
        extra += [a.compute for a in sorted(flag.targets.ptx - effective.ptx)]
        if extra:
            reasons = "; ".join(f"{a.sm}: {_why_not(res, a)}" for a in extra_cubins)
            warnings.append(
                f"extension {ext_name}: dropped the hard-coded nvcc flag {text!r}: "
                f"{' '.join(extra)} not in the effective list"
                + (f" ({reasons})" if reasons else "")
                + ". Declare arches in [tool.archguard] arch_list instead of nvcc flags."
            )
        else:
            notes.append(
                f"extension {ext_name}: the hard-coded nvcc flag {text!r} is within "
                "the effective list; archguard's flags replace it"
            )
    return NvccPlan(rest + gencode_flags(res.effective), warnings, notes)
