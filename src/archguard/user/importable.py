"""``doctor``'s import prediction: for each installed binary with CUDA code, whether it will
import with the installed torch, before anything imports it. Its torch symbols (read from the
binary, and from its record where it has one) are resolved against the installed torch's
exported symbols: a missing one is the "undefined symbol" the import would meet, named and
demangled, with the cell whose wheel to install instead. A stable-ABI binary is fine with any
torch at or above its target; a binary that links a CUDA runtime newer than the driver runs is
named too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from archguard.core.abi import BinaryAbi, TorchExports, Verdict, check, minor
from archguard.detect.abi import binary_abi, torch_exports, weak_imports
from archguard.detect.sass import demangle
from archguard.errors import ArchguardError


class Installed(Protocol):
    """An installed binary as doctor found it."""

    @property
    def file(self) -> str: ...
    @property
    def path(self) -> Path | None: ...
    @property
    def abi(self) -> BinaryAbi | None: ...
    @property
    def built_for(self) -> str | None: ...


@dataclass(frozen=True)
class ImportCheck:
    """One installed binary against the installed torch."""

    package: str
    binary: str
    kind: str  # "c++", "stable", "none"
    built_for: str | None  # the torch its record names
    missing: tuple[str, ...] = ()  # demangled
    problem: str = ""  # why it will not import (or will not run), empty when it will

    @property
    def fails(self) -> bool:
        return bool(self.problem)


def check_installed(
    packages: Sequence[tuple[str, Sequence[Installed]]],
    torch_root: Path | None,
    driver_cuda: tuple[int, int] | None,
) -> tuple[list[ImportCheck], list[str]]:
    """Each binary's prediction, and notes on what could not be judged."""
    if torch_root is None:
        return [], ["no torch installed here: nothing to judge the extensions' imports against"]
    try:
        torch = torch_exports(torch_root)
    except ArchguardError as exc:
        return [], [f"the installed torch's exported symbols could not be read: {exc}"]
    out: list[ImportCheck] = []
    notes: list[str] = []
    for name, binaries in packages:
        for binary in binaries:
            if binary.path is None:
                continue
            try:
                data = binary.path.read_bytes()
                read = binary_abi(data, binary.file, torch.symbols)
            except (OSError, ArchguardError) as exc:
                notes.append(f"{name}: {binary.file}: not read for its imports ({exc})")
                continue
            if binary.abi is not None:  # the build's own list and target
                symbols = set(read.torch_symbols) | set(binary.abi.torch_symbols)
                read = replace(
                    read,
                    torch_symbols=tuple(sorted(symbols)),
                    target_version=binary.abi.target_version,
                )
            verdict = check(read, torch, weak_imports(data, binary.file))
            out.append(_judged(name, binary.file, binary.built_for, verdict, driver_cuda))
    return out, notes


def _judged(
    package: str,
    file: str,
    built_for: str | None,
    verdict: Verdict,
    driver_cuda: tuple[int, int] | None,
) -> ImportCheck:
    b, torch = verdict.binary, verdict.torch
    problem = ""
    names: tuple[str, ...] = ()
    if not verdict.imports:
        shown = demangle(list(verdict.missing))
        names = tuple(shown.get(s, s) for s in verdict.missing)
        more = f" and {len(names) - 1} more" if len(names) > 1 else ""
        problem = (
            f"will not import with torch {torch.version}: undefined symbol {names[0]}{more}; "
            f"install its wheel built for this cell ({_cell(torch)})"
            + (f", not the one built against torch {built_for}" if built_for else "")
        )
    elif b.kind == "stable" and b.target_version and minor(torch.version) < minor(b.target_version):
        problem = (
            f"its stable-ABI target is torch {b.target_version}, above the installed torch "
            f"{torch.version}: upgrade torch to {b.target_version} or later"
        )
    elif b.cuda_major and driver_cuda and b.cuda_major > driver_cuda[0]:
        problem = (
            f"links {b.cuda_runtime}, and this driver runs CUDA {driver_cuda[0]}."
            f"{driver_cuda[1]}: its first CUDA call fails until the driver is upgraded"
        )
    return ImportCheck(package, file, b.kind, built_for, names, problem)


def _cell(torch: TorchExports) -> str:
    major, minor_ = minor(torch.version)
    cuda = torch.cuda.tag if torch.cuda else "cpu"
    return f"+{cuda}torch{major}.{minor_}"


def lines(checks: Sequence[ImportCheck], torch_version: str) -> list[str]:
    """doctor's import lines: one per binary, each on its package's line."""
    out = [f"imports, against the installed torch {torch_version}:"] if checks else []
    for c in checks:
        where = f"  {c.package}: {c.binary}"
        if c.fails:
            out.append(f"{where}: {c.problem}")
            continue
        built = f", built against torch {c.built_for}" if c.built_for else ""
        how = {
            "stable": "torch's stable C ABI",
            "c++": "every torch symbol it needs is exported (C++ ABI" + built + ")",
            "none": "it needs no torch symbol",
        }.get(c.kind, c.kind)
        out.append(f"{where}: imports: {how}")
    return out
