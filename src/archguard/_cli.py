"""The command line: ``python -m archguard explain | list | matrix | verify | check-policy``.

``main(argv) -> int``; every :class:`~archguard.errors.ArchguardError` becomes one
paragraph on stderr and exit status 1 (2 for a usage error), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from archguard import __version__
from archguard.errors import ArchguardError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _add_inputs(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("inputs (default: the installed torch and nvcc)")
    g.add_argument(
        "--project",
        type=Path,
        default=Path(),
        metavar="DIR",
        help="package directory whose [tool.archguard] applies (default: .)",
    )
    g.add_argument(
        "--cuda", metavar="X.Y", help="a hypothetical toolkit from the bundled table, e.g. 12.8"
    )
    g.add_argument(
        "--torch", metavar="VERSION", help="a torch from the bundled table for that CUDA, e.g. 2.7"
    )
    g.add_argument(
        "--torch-arches",
        metavar="LIST",
        help="describe the torch directly: 'sm_75 sm_80 ... compute_120'",
    )
    g.add_argument(
        "--policy",
        metavar="FILE",
        help="policy file (default: ARCHGUARD_POLICY, [tool.archguard] policy, "
        "then the bundled one)",
    )


def main_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="archguard",
        description="Compute, explain and verify the CUDA arch list of PyTorch extension "
        "wheels from one owned policy.",
    )
    parser.add_argument("--version", action="version", version=f"archguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("explain", help="the inputs, each arch's fate and why, the coverage")
    p.add_argument("arches", nargs="*", metavar="ARCH", help="arches to ask 'why?' about")
    _add_inputs(p)
    p.add_argument("--format", choices=("text", "json"), default="text")

    p = sub.add_parser("list", help="just the effective arch list")
    _add_inputs(p)
    p.add_argument(
        "--format", choices=("text", "torch", "cmake", "gencode", "json"), default="text"
    )

    p = sub.add_parser("check-policy", help="validate a policy file")
    p.add_argument("file", nargs="?", help="default: ARCHGUARD_POLICY or the bundled policy")

    p = sub.add_parser("matrix", help="every (CUDA, torch) combination in the bundled tables")
    p.add_argument(
        "--project",
        type=Path,
        default=None,
        metavar="DIR",
        help="apply this package's [tool.archguard] overrides",
    )
    p.add_argument("--policy", metavar="FILE")
    p.add_argument(
        "--format", choices=("text", "markdown", "html", "json", "github"), default="text"
    )
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here, not stdout")

    p = sub.add_parser(
        "verify",
        help="compare the targets inside built binaries with the recorded (or given) resolution",
    )
    p.add_argument("paths", nargs="+", metavar="WHEEL_OR_SO", type=Path)
    p.add_argument("--cuda", metavar="X.Y")
    p.add_argument("--torch", metavar="VERSION")
    p.add_argument("--torch-arches", metavar="LIST")
    p.add_argument(
        "--arch-list", metavar="LIST", help="expect exactly this list (canonical or torch syntax)"
    )
    p.add_argument("--project", type=Path, default=None, metavar="DIR")
    p.add_argument("--policy", metavar="FILE")
    p.add_argument("--cuobjdump", metavar="PATH", help="cuobjdump to use")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def _query(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from archguard.inputs import Query  # noqa: PLC0415

    return Query(
        project_dir=args.project,
        cuda=args.cuda,
        torch=args.torch,
        torch_arches=args.torch_arches,
        policy=args.policy,
    )


def _environment_notes(warnings: list[str]) -> list[str]:
    preset = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if preset is None:
        return warnings
    return [
        *warnings,
        f"TORCH_CUDA_ARCH_LIST={preset!r} is set in this environment; an "
        "archguard build replaces it with the effective list.",
    ]


def cmd_explain(args: argparse.Namespace) -> int:
    from archguard.arch import parse_arch  # noqa: PLC0415
    from archguard.inputs import gather  # noqa: PLC0415
    from archguard.report import dumps, explain_text, resolution_record  # noqa: PLC0415

    why = [parse_arch(a, "the command line") for a in args.arches]
    gathered = gather(_query(args))
    res = gathered.resolve()
    warnings = _environment_notes(gathered.warnings)
    if args.format == "json":
        record = resolution_record(res, why)
        record["warnings"] = warnings
        sys.stdout.write(dumps(record))
    else:
        sys.stdout.write(explain_text(res, gathered.shown, warnings, why))
    if not res.ok:
        try:
            res.require_cubins()
        except ArchguardError as exc:
            print(f"archguard error [{exc.code}]: {exc}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    from archguard.inputs import gather  # noqa: PLC0415
    from archguard.report import list_text  # noqa: PLC0415

    gathered = gather(_query(args))
    for warning in _environment_notes(gathered.warnings):
        print(f"archguard: warning: {warning}", file=sys.stderr)
    res = gathered.resolve().require_cubins()
    sys.stdout.write(list_text(res, args.format))
    return EXIT_OK


def cmd_check_policy(args: argparse.Namespace) -> int:
    from archguard.config import ENV_POLICY  # noqa: PLC0415
    from archguard.policy import load_policy  # noqa: PLC0415

    if args.file:
        policy = load_policy(args.file)
    elif os.environ.get(ENV_POLICY):
        policy = load_policy(os.environ[ENV_POLICY], ENV_POLICY)
    else:
        policy = load_policy(None)
    exceptions = sum(len(v) for v in policy.exceptions.values())
    print(
        f"{policy.source}: valid ({len(policy.rows)} rows: {', '.join(sorted(policy.rows))}; "
        f"{exceptions} arch exceptions)"
    )
    return EXIT_OK


def cmd_matrix(args: argparse.Namespace) -> int:
    from archguard.matrix import run_matrix  # noqa: PLC0415

    return run_matrix(args)


def cmd_verify(args: argparse.Namespace) -> int:
    from archguard.verify import run_verify  # noqa: PLC0415

    return run_verify(args)


COMMANDS = {
    "explain": cmd_explain,
    "list": cmd_list,
    "check-policy": cmd_check_policy,
    "matrix": cmd_matrix,
    "verify": cmd_verify,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = main_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ArchguardError as exc:
        sys.stdout.flush()
        print(exc.render(), file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        return 130
