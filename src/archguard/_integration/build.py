"""What archguard changes inside a build, and puts back: the environment and each CUDA
extension's nvcc arguments (planned by :func:`archguard.flags.plan_nvcc_args`), and the
record written into the wheel.

Torch ignores ``TORCH_CUDA_ARCH_LIST`` as soon as any nvcc flag contains the text "arch"
(an include directory under ``monarch/`` is enough), and cannot spell ``f`` targets or plain
PTX for an ``a`` arch. So archguard does not rely on it: it removes every arch flag from each
CUDA extension's nvcc arguments (warning for each hard-coded target the resolution does not
keep) and appends the exact ``-gencode`` flags of the effective list. Torch then sees "arch"
in the flags and adds none of its own. ``TORCH_CUDA_ARCH_LIST`` is still set to the same list
(where torch can spell it) for code that reads it, e.g. a CMake step.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from archguard._integration.common import announce_once, say
from archguard._integration.session import Session, session_for, setup_error
from archguard.errors import ArchguardError
from archguard.flags import gencode_flags, plan_nvcc_args
from archguard.record import resolution_record, write_record

CUDA_SUFFIXES = (".cu", ".cuh")
NVCC_KEYS = ("nvcc", "nvcc_dlink")


def is_torch_build_extension(cls: type) -> bool:
    """Is torch's BuildExtension in the MRO? (Checked by name: no torch import here.)"""
    return any(
        c.__name__ == "BuildExtension" and c.__module__ == "torch.utils.cpp_extension"
        for c in cls.__mro__
    )


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
                        plan = plan_nvcc_args(args[key], res, ext.name)
                    except ArchguardError as exc:
                        raise setup_error(exc) from None
                    for w in plan.warnings:
                        say(f"warning: {w}")
                    for n in plan.notes:
                        say(n)
                    args[key] = plan.args
                    record[key] = {"dropped": plan.warnings, "replaced": plan.notes}
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


def record_into(dist: Any, dist_info: Path) -> None:
    """Write the build's resolution into the wheel's ``.dist-info`` (``archguard.json``)."""
    session: Session | None = getattr(dist, "_archguard_session", None)
    if session is None or not dist_info.is_dir():
        return
    record = resolution_record(session.resolution)
    record["build"] = {
        "torch_cuda_arch_list": session.torch_arch_list,
        "replaced_torch_cuda_arch_list": session.replaced,
        "extensions": session.extensions,
    }
    path = write_record(dist_info, record)
    say(f"recorded the resolution in {dist_info.name}/{path.name}")
