"""What archguard does inside a build: resolve once, log it, put it on the nvcc line,
record it in the wheel, and leave the process as it found it.

Torch ignores ``TORCH_CUDA_ARCH_LIST`` as soon as any nvcc flag contains the text "arch"
(an include directory under ``monarch/`` is enough), and cannot spell ``f`` targets or plain
PTX for an ``a`` arch. So archguard does not rely on it: it removes every arch flag from each
CUDA extension's nvcc arguments (warning for each hard-coded target the resolution does not
keep) and appends the exact ``-gencode`` flags of the effective list. Torch then sees "arch"
in the flags and adds none of its own. ``TORCH_CUDA_ARCH_LIST`` is still set to the same list
(where torch can spell it) for code that reads it, e.g. a CMake step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archguard._integration.setuptools_hook import announce_once, project_root, say
from archguard.arch import Arch
from archguard.errors import ArchguardError, NotRepresentable
from archguard.flags import find_arch_flags, gencode_flags, torch_arch_list
from archguard.resolve import Resolution

RECORD_NAME = "archguard.json"
CUDA_SUFFIXES = (".cu", ".cuh")
NVCC_KEYS = ("nvcc", "nvcc_dlink")


@dataclass
class Session:
    """One resolution per Distribution (a process may build several extensions)."""

    resolution: Resolution
    torch_arch_list: str | None
    replaced: str | None = None  # a TORCH_CUDA_ARCH_LIST the environment had set
    extensions: list[dict[str, object]] = field(default_factory=list)


def _setup_error(exc: ArchguardError) -> Exception:
    """setuptools reports a SetupError raised in a command as one clean ``error:`` line."""
    from setuptools.errors import SetupError  # noqa: PLC0415

    error: Exception = SetupError(exc.render())
    return error


def _log_resolution(
    res: Resolution, shown: Sequence[tuple[str, str]], warnings: Sequence[str]
) -> None:
    for key, value in shown:
        say(f"{key}: {value}")
    say(f"request: {res.request.origin}: {res.requested_text}")
    for d in res.decisions:
        notable = d.outcome in ("dropped", "moved", "added")
        if notable or (d.step == "torch" and d.outcome != "kept"):
            say(f"{d.outcome}{' PTX' if d.ptx else ''} {d.arch} ({d.step}): {d.reason}")
    for note in [*res.notes, *warnings]:
        say(f"warning: {note}")
    say(f"effective arch list ({res.tag}): {res.effective_text}")
    tiers: dict[str, list[str]] = {}
    for c in res.coverage():
        tiers.setdefault(c.tier.value, []).append(
            c.device.cc_text + (f" via {c.via}" if c.tier.value == "jit-only" else "")
        )
    say("coverage: " + "; ".join(f"{k} {', '.join(v)}" for k, v in tiers.items()))


def session_for(dist: Any) -> Session | None:
    """Resolve for this distribution (once), or None when ARCHGUARD_DISABLE is on."""
    cached = getattr(dist, "_archguard_session", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    from archguard.config import env_disabled  # noqa: PLC0415
    from archguard.inputs import Query, gather  # noqa: PLC0415

    try:
        if env_disabled(os.environ):
            announce_once(
                "disabled",
                f"disabled by ARCHGUARD_DISABLE="
                f"{os.environ['ARCHGUARD_DISABLE']}: building without "
                "an arch policy",
            )
            return None
        gathered = gather(Query(project_dir=Path(project_root(dist))))
        res = gathered.resolve()
        _log_resolution(res, gathered.shown, gathered.warnings)
        res.require_cubins()
    except ArchguardError as exc:
        raise _setup_error(exc) from None
    try:
        torch_text: str | None = torch_arch_list(res.effective)
    except NotRepresentable as exc:
        torch_text = None
        say(
            f"TORCH_CUDA_ARCH_LIST is unset for this build: torch cannot express "
            f"{'; '.join(exc.problems)}; "
            "archguard passes the -gencode flags to nvcc itself"
        )
    session = Session(res, torch_text)
    dist._archguard_session = session
    return session


def is_torch_build_extension(cls: type) -> bool:
    """Is torch's BuildExtension in the MRO? (Checked by name: no torch import here.)"""
    return any(
        c.__name__ == "BuildExtension" and c.__module__ == "torch.utils.cpp_extension"
        for c in cls.__mro__
    )


def _why_not(res: Resolution, arch: Arch) -> str:
    decisions = [d for d in res.why(arch) if d.outcome in ("dropped", "not-requested")]
    return decisions[-1].reason if decisions else "not in the effective list"


def plan_nvcc_args(
    args: Sequence[str], res: Resolution, ext_name: str
) -> tuple[list[str], list[str], list[str]]:
    """(new nvcc args, warnings, notes): every arch flag out, the effective -gencode in."""
    rest, found = find_arch_flags(list(args))
    warnings: list[str] = []
    notes: list[str] = []
    effective = res.targets
    for flag in found:
        text = " ".join(flag.tokens)
        extra = [a.sm for a in sorted(flag.targets.cubins - effective.cubins)]
        extra += [a.compute for a in sorted(flag.targets.ptx - effective.ptx)]
        if extra:
            reasons = "; ".join(
                f"{name}: {_why_not(res, arch)}"
                for name, arch in [
                    (a.sm, a) for a in sorted(flag.targets.cubins - effective.cubins)
                ]
            )
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
    return rest + gencode_flags(res.effective), warnings, notes


def _has_cuda_sources(ext: Any) -> bool:
    return any(str(s).endswith(CUDA_SUFFIXES) for s in getattr(ext, "sources", ()))


@contextmanager
def _environment(session: Session) -> Iterator[None]:
    name = "TORCH_CUDA_ARCH_LIST"
    before = os.environ.get(name)
    if before is not None and before != session.torch_arch_list:
        session.replaced = before
        say(
            f"warning: {name}={before!r} was set in the environment; replaced by "
            f"{session.torch_arch_list!r} for this build (archguard's effective list)"
        )
    try:
        if session.torch_arch_list is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = session.torch_arch_list
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@contextmanager
def archguard_build(cmd: Any) -> Iterator[None]:
    """Around ``build_ext.run``: the resolved list on every CUDA extension's nvcc line.

    Extensions that are all C/C++ sources (a CPU fallback such as ``CppExtension``) need no
    arch list: archguard says so and stays out, so a CPU-only torch can still build them.
    Extensions with CUDA sources, or with no sources at all (a CMake step builds them and
    reads ``TORCH_CUDA_ARCH_LIST``), get the resolution.
    """
    extensions = list(getattr(cmd, "extensions", None) or ())
    if extensions and not any(_has_cuda_sources(e) or not e.sources for e in extensions):
        announce_once("no-cuda", "no CUDA sources among the extensions: no arch list to choose")
        yield
        return
    session = session_for(cmd.distribution)
    if session is None:
        yield
        return
    res = session.resolution
    torch_cmd = is_torch_build_extension(type(cmd))
    saved: list[tuple[Any, Any]] = []
    try:
        with _environment(session):
            for ext in extensions:
                if not _has_cuda_sources(ext):
                    continue
                original = ext.extra_compile_args
                args: dict[str, list[str]]
                if isinstance(original, dict):
                    args = {k: list(v) for k, v in original.items()}
                    if "nvcc" not in args and not torch_cmd:
                        say(
                            f"warning: extension {ext.name}: {type(cmd).__name__} is not "
                            "torch's BuildExtension and the extension has no 'nvcc' flags; "
                            "archguard cannot see its nvcc line. Check the wheel with "
                            "`archguard verify`."
                        )
                        continue
                    args.setdefault("nvcc", [])
                elif torch_cmd:
                    flat = list(original or [])
                    args = {"cxx": flat, "nvcc": list(flat)}  # torch uses a list for both
                else:
                    say(
                        f"warning: extension {ext.name}: {type(cmd).__name__} is not torch's "
                        "BuildExtension; archguard set TORCH_CUDA_ARCH_LIST but cannot see the "
                        "nvcc line. Check the wheel with `archguard verify`."
                    )
                    continue
                record: dict[str, object] = {"name": ext.name}
                for key in NVCC_KEYS:
                    if key not in args:
                        continue
                    try:
                        new, warnings, notes = plan_nvcc_args(args[key], res, ext.name)
                    except ArchguardError as exc:
                        raise _setup_error(exc) from None
                    for w in warnings:
                        say(f"warning: {w}")
                    for n in notes:
                        say(n)
                    args[key] = new
                    record[key] = {"dropped": warnings, "replaced": notes}
                record["gencode"] = gencode_flags(res.effective)
                saved.append((ext, original))
                ext.extra_compile_args = args
                say(f"extension {ext.name}: nvcc gets {' '.join(gencode_flags(res.effective))}")
                session.extensions = [e for e in session.extensions if e["name"] != ext.name]
                session.extensions.append(record)
            yield
    finally:
        for ext, original in saved:
            ext.extra_compile_args = original


def write_record(dist: Any, dist_info: Path) -> None:
    """Write the resolution into the wheel's ``.dist-info`` (``archguard.json``)."""
    session: Session | None = getattr(dist, "_archguard_session", None)
    if session is None or not dist_info.is_dir():
        return
    from archguard.report import resolution_record  # noqa: PLC0415

    record = resolution_record(session.resolution)
    record["build"] = {
        "torch_cuda_arch_list": session.torch_arch_list,
        "replaced_torch_cuda_arch_list": session.replaced,
        "extensions": session.extensions,
    }
    (dist_info / RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    say(f"recorded the resolution in {dist_info.name}/{RECORD_NAME}")
