"""After compiling: what each built extension binds to (its torch symbols, or torch's stable
C ABI and its ``TORCH_TARGET_VERSION``; its Python API; its CUDA runtime; its glibc floor),
read from the binary and recorded in the wheel (:func:`archguard.binaries.record.abi_record`)
so that ``verify``, ``archguard abi`` and ``doctor`` can judge it against other torches."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from archguard._integration.common import say
from archguard._integration.session import Session
from archguard.binaries.record import abi_record
from archguard.core.abi import describe, target_from_define
from archguard.detect.abi import binary_abi, torch_exports
from archguard.errors import ArchguardError

DEFINE = "TORCH_TARGET_VERSION"


def target_version(ext: Any) -> str | None:
    """The ``TORCH_TARGET_VERSION`` an extension is compiled for: its ``define_macros``, or a
    ``-D`` in its compile arguments (the binary does not carry it)."""
    for name, value in getattr(ext, "define_macros", None) or ():
        if name == DEFINE and value is not None:
            return target_from_define(str(value))
    args = getattr(ext, "extra_compile_args", None) or []
    flags = [f for v in args.values() for f in v] if isinstance(args, dict) else list(args)
    for flag in flags:
        text = str(flag)
        if text.startswith(f"-D{DEFINE}="):
            return target_from_define(text.split("=", 1)[1])
    return None


def _installed_torch() -> Path | None:
    spec = importlib.util.find_spec("torch")
    return Path(spec.origin).parent if spec and spec.origin else None


def record_abi(cmd: Any, session: Session) -> None:
    """Read each built extension's bindings into the session's record, one log line each."""
    root = _installed_torch()
    try:
        # read from the cache where one is, never written: a build writes only in its tree
        exports = torch_exports(root, persist=False).symbols if root else frozenset()
    except ArchguardError as exc:
        say(f"abi: torch's exported symbols not read ({exc}); torch symbols judged by name")
        exports = frozenset()
    for ext in getattr(cmd, "extensions", None) or ():
        path = Path(cmd.get_ext_fullpath(ext.name))
        if not path.is_file() or ext.name not in session.extensions:
            continue
        try:
            binary = binary_abi(path.read_bytes(), path.name, exports, target_version(ext))
        except (OSError, ArchguardError) as exc:
            say(f"abi: extension {ext.name}: not read ({exc})")
            continue
        session.extensions[ext.name]["abi"] = abi_record(binary)
        say(f"abi: extension {ext.name}: {describe(binary)}")
