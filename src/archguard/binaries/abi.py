"""``archguard abi``: each extension of built wheels (or .so files) against real torch builds:
"imports" when every torch symbol it needs is exported, "will not import: undefined symbol
..." when one is not. The binary's torch symbols come from its ELF and, where the wheel has
one, its record (the exact list the build's torch resolved); the target of a stable-ABI
extension comes from the record (its build's defines)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from archguard.binaries.record import RecordedTargets, read_wheel_record
from archguard.core.abi import BinaryAbi, TorchExports, Verdict, check, describe, minor
from archguard.core.formats import Format
from archguard.detect.abi import binary_abi, shared_objects, weak_imports
from archguard.detect.elf import ELF_MAGIC
from archguard.detect.sass import demangle
from archguard.errors import BinaryReadError

ABI_SCHEMA = "archguard.abi/1"
CAVEAT = (
    "every torch symbol it needs is exported; that proves no C++ ABI compatibility across "
    "torch minors (layouts, inline code): only a stable-ABI extension is forward compatible"
)


@dataclass
class Checked:
    """One binary and its verdict against each torch."""

    binary: BinaryAbi
    built_with: str | None  # the torch its record names
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def fails(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.imports]


def _record(path: Path) -> RecordedTargets | None:
    if path.suffix != ".whl":
        return None
    try:
        with zipfile.ZipFile(path) as zf:
            return read_wheel_record(zf, path.name)
    except (OSError, zipfile.BadZipFile):
        return None  # shared_objects names the unreadable wheel


def check_paths(paths: Sequence[Path], torches: Sequence[TorchExports]) -> list[Checked]:
    """Every ELF shared object in ``paths`` against every torch in ``torches``."""
    known = frozenset().union(*(t.symbols for t in torches))
    out: list[Checked] = []
    for path in paths:
        record = _record(path)
        found = False
        for name, data in shared_objects(path):
            if not data.startswith(ELF_MAGIC):
                continue
            found = True
            member = name.split("!", 1)[-1]
            recorded = record.abi.get(record.file_for(member) or "") if record else None
            binary = binary_abi(data, name, known, recorded.target_version if recorded else None)
            if recorded is not None:  # the build's torch resolved these: keep each one
                symbols = set(binary.torch_symbols) | set(recorded.torch_symbols)
                binary = replace(binary, torch_symbols=tuple(sorted(symbols)))
            weak = weak_imports(data, name)
            item = Checked(binary, record.torch if record else None)
            item.verdicts = [check(binary, torch, weak) for torch in torches]
            out.append(item)
        if not found:
            raise BinaryReadError(
                f"{path} holds no ELF shared object; give built wheels or extension .so files."
            )
    return out


def verdict_line(v: Verdict, names: dict[str, str]) -> str:
    """What one torch build makes of one binary."""
    b = v.binary
    if not v.imports:
        shown = ", ".join(names.get(s, s) for s in v.missing[:3])
        more = f" and {len(v.missing) - 3} more" if len(v.missing) > 3 else ""
        return f"WILL NOT IMPORT: undefined symbol {shown}{more}"
    if b.kind == "stable":
        target = b.target_version
        if target and minor(v.torch.version) < minor(target):
            return f"below its stable-ABI target {target}: it may need what this torch lacks"
        aimed = f" (target {target})" if target else ""
        return f"imports: stable C ABI{aimed}, every shim function it needs is exported"
    if b.kind == "none":
        return "imports: it needs no torch symbol"
    return f"imports: {CAVEAT}"


def render(checked: list[Checked], torches: Sequence[TorchExports], fmt: Format) -> str:
    missing = sorted({s for c in checked for v in c.fails for s in v.missing})
    names = demangle(missing) if missing else {}
    if fmt == "json":
        data = {
            "schema": ABI_SCHEMA,
            "torches": [{"version": t.version, "where": t.where} for t in torches],
            "binaries": [
                {
                    "binary": c.binary.file,
                    "built_with": c.built_with,
                    "kind": c.binary.kind,
                    "torch_symbols": len(c.binary.torch_symbols),
                    "target_version": c.binary.target_version,
                    "python_api": c.binary.python_api,
                    "python_floor": c.binary.python_floor,
                    "cuda_runtime": c.binary.cuda_runtime,
                    "glibc": c.binary.glibc,
                    "glibcxx": c.binary.glibcxx,
                    "verdicts": [
                        {
                            "torch": v.torch.version,
                            "imports": v.imports,
                            "missing": [
                                {"symbol": s, "demangled": names.get(s, s)} for s in v.missing
                            ],
                        }
                        for v in c.verdicts
                    ],
                }
                for c in checked
            ],
            "ok": not any(c.fails for c in checked),
        }
        return json.dumps(data, indent=2) + "\n"
    lines = ["archguard abi", ""]
    for c in checked:
        lines.append(c.binary.file)
        built = f" (built against torch {c.built_with})" if c.built_with else ""
        lines.append(f"  binds to   {describe(c.binary)}{built}")
        for v in c.verdicts:
            lines.append(f"  {v.torch.label:<28} {verdict_line(v, names)}")
        lines.append("")
    bad = sorted({f"torch {v.torch.version}" for c in checked for v in c.fails})
    count = sum(1 for c in checked if c.fails)
    lines.append(
        f"result: {'OK' if not bad else 'WILL NOT IMPORT'} ({len(checked)} binar"
        f"{'y' if len(checked) == 1 else 'ies'}"
        + (f"; {count} will not import with {', '.join(bad)}" if bad else "")
        + ")"
    )
    return "\n".join(lines) + "\n"
