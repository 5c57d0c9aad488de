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
from archguard.errors import ArchSpecificFlag, NotRepresentable, NvccFlagError
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

ARCH_SPECIFIC_MODES = ("keep", "drop", "error")


@dataclass(frozen=True)
class ExtensionPlan:
    """What one extension's nvcc argument lists become, the targets its binary will hold,
    where each came from, and what to say about it."""

    name: str
    args: dict[str, list[str]]  # per key of extra_compile_args ("nvcc", "nvcc_dlink")
    targets: Targets
    origins: dict[str, str]  # sm_/compute_ name -> where it came from
    kept: dict[Arch, Arch | None]  # hard-coded a/f target kept -> the plain cubin it replaces
    warnings: list[str]
    notes: list[str]
    per_key: dict[str, dict[str, list[str]]]  # key -> {"dropped": [...], "replaced": [...]}

    @property
    def gencode(self) -> list[str]:
        return gencode_flags(self.targets)


def _why_not(res: Resolution, arch: Arch) -> str:
    decisions = [d for d in res.why(arch) if d.outcome in (Outcome.DROPPED, Outcome.NOT_REQUESTED)]
    return decisions[-1].reason if decisions else "not in the effective list"


def _effective_origins(res: Resolution) -> dict[str, str]:
    origins = {a.sm: f"the effective list ({res.request.origin})" for a in res.targets.cubins}
    for d in res.decisions:
        if d.ptx and d.step.value == "ptx" and d.outcome is not Outcome.DROPPED:
            origins[d.arch.plain.compute] = f"a PTX net of the effective list: {d.reason}"
    return {name: origins[name] for name in res.targets.names() if name in origins}


def plan_extension(
    name: str,
    arg_lists: dict[str, list[str]],
    res: Resolution,
    arch_specific: str = "keep",
) -> ExtensionPlan:
    """Every arch flag out of each nvcc argument list and this extension's targets in.

    The targets are the effective list, except that a hard-coded ``Xa``/``Xf`` cubin (a
    kernel requirement) that passes the toolkit and torch clamps is kept with
    ``arch_specific = "keep"``: in place of the list's plain ``X`` (nvcc refuses ``X`` with
    ``Xf`` in one compile; a plain ``X`` the package hard-codes itself stays beside ``Xa``),
    or added. ``"drop"`` treats it like a plain hard-coded target (replaced by the list,
    named); ``"error"`` stops with :class:`ArchSpecificFlag`. Every other hard-coded target
    outside the list is dropped with its reason.
    """
    split = {key: find_arch_flags(list(args)) for key, args in arg_lists.items()}
    effective = res.targets
    hard_cubins = {a for _, found in split.values() for f in found for a in f.targets.cubins}
    specific = sorted(a for a in hard_cubins if a.suffix and a not in effective.cubins)
    if specific and arch_specific == "error":
        flags = sorted({" ".join(f.tokens) for _, found in split.values() for f in found})
        raise ArchSpecificFlag(
            f"extension {name} hard-codes the arch-specific target"
            f"{'s' if len(specific) > 1 else ''} {' '.join(a.sm for a in specific)} "
            f"({'; '.join(repr(f) for f in flags)}) and [tool.archguard] "
            "hardcoded_arch_specific = 'error'. Keep it for this extension with "
            "hardcoded_arch_specific = 'keep', replace it by the effective list with 'drop', "
            "or declare the arch in [tool.archguard] arch_list_by_cuda."
        )
    cubins = set(effective.cubins)
    kept: dict[Arch, Arch | None] = {}
    refused: dict[Arch, str] = {}
    if arch_specific == "keep":
        for arch in specific:
            decision = res.clamp_extra(arch, cubins)
            if decision is not None:
                refused[arch] = decision.reason
            else:
                kept[arch] = None
        for arch in kept:
            twin = arch.plain
            if twin in cubins and not (arch.suffix == "a" and twin in hard_cubins):
                cubins.discard(twin)
                kept[arch] = twin
            cubins.add(arch)
    targets = Targets(frozenset(cubins), effective.ptx)

    origins = _effective_origins(res)
    warnings: list[str] = []
    notes: list[str] = []
    per_key: dict[str, dict[str, list[str]]] = {}
    new_args: dict[str, list[str]] = {}
    for key, (rest, found) in split.items():
        dropped: list[str] = []
        replaced: list[str] = []
        for flag in found:
            text = " ".join(flag.tokens)
            for arch in sorted(flag.targets.cubins & set(kept)):
                origins[arch.sm] = (
                    f"the hard-coded nvcc flag {text!r} of extension {name} (kept: an "
                    "arch-specific target is a kernel requirement)"
                )
            extra_cubins = sorted(flag.targets.cubins - targets.cubins)
            extra = [a.sm for a in extra_cubins]
            extra += [a.compute for a in sorted(flag.targets.ptx - targets.ptx)]
            kept_here = sorted(flag.targets.cubins & set(kept))
            if extra:
                reasons = "; ".join(
                    f"{a.sm}: {refused.get(a) or _why_not(res, a)}"
                    + (
                        " (hardcoded_arch_specific = 'drop')"
                        if a.suffix and arch_specific == "drop"
                        else ""
                    )
                    for a in extra_cubins
                )
                dropped.append(
                    f"extension {name}: dropped the hard-coded nvcc flag {text!r}: "
                    f"{' '.join(extra)} not in the effective list"
                    + (f" ({reasons})" if reasons else "")
                    + ". Declare arches in [tool.archguard] arch_list instead of nvcc flags."
                )
            elif not kept_here:
                replaced.append(
                    f"extension {name}: the hard-coded nvcc flag {text!r} is within "
                    "the effective list; archguard's flags replace it"
                )
            for arch in kept_here:
                displaced = kept[arch]
                replaced.append(
                    f"extension {name}: kept the hard-coded arch-specific target {arch.sm} "
                    f"from {text!r} (a kernel requirement)"
                    + (
                        f", in place of the effective list's {displaced.sm}"
                        if displaced
                        else ", added"
                    )
                )
        warnings += dropped
        notes += replaced
        per_key[key] = {"dropped": dropped, "replaced": replaced}
        new_args[key] = rest + gencode_flags(targets)
    return ExtensionPlan(
        name,
        new_args,
        targets,
        {n: origins[n] for n in targets.names()},
        kept,
        warnings,
        notes,
        per_key,
    )


_MENTION = re.compile(r"\b(?:sm|compute)_[0-9]{2,3}[af]\b", re.ASCII)


def arch_specific_mentions(text: str) -> list[tuple[int, str]]:
    """(line, name) of every ``sm_XYa``/``sm_XYf``/``compute_XYa`` name in a build file."""
    return [
        (number, match.group(0))
        for number, line in enumerate(text.splitlines(), 1)
        for match in _MENTION.finditer(line)
    ]


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
