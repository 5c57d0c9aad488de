"""What every command shares: the exit-status rule, the input query, output."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from archguard.settings.inputs import Query

# The exit-status rule of every command: 0 fine; 1 findings or differences (the command
# ran and says what it found); 2 it could not run (bad input, a missing tool, nothing left
# to build).
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def query(args: argparse.Namespace) -> Query:
    return Query(
        project_dir=args.project,
        cuda=args.cuda,
        torch=args.torch,
        torch_arches=args.torch_arches,
        policy=args.policy,
        platform=args.platform,
    )


def environment_notes(warnings: list[str]) -> list[str]:
    preset = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if preset is None:
        return warnings
    return [
        *warnings,
        f"TORCH_CUDA_ARCH_LIST={preset!r} is set in this environment; an "
        "archguard build replaces it with the effective list.",
    ]


def write(text: str, output: Path | None = None) -> None:
    if output is not None:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
