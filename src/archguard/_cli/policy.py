"""The commands the policy's maintainer runs: check-policy, derive, matrix, probe-torch, watch;
their arguments (``policy_commands``) and their handlers, which ask the module that does the
work and write what it says."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from archguard._cli.common import EXIT_FAIL, EXIT_OK, write
from archguard._cli.options import (
    Subparsers,
    cuobjdump_option,
    format_option,
    platform_option,
)
from archguard.core.formats import MatrixFormat
from archguard.settings.inputs import Query


def policy_commands(sub: Subparsers) -> None:
    """The maintainer's commands' arguments, in the order --help lists them."""
    _check_policy_arguments(sub)
    _derive_arguments(sub)
    _matrix_arguments(sub)
    _probe_torch_arguments(sub)
    _watch_arguments(sub)


def _check_policy_arguments(sub: Subparsers) -> None:
    p = sub.add_parser("check-policy", help="validate a policy file")
    p.add_argument(
        "--policy",
        dest="policy",
        metavar="FILE",
        help="the policy file, as every command takes it (default: ARCHGUARD_POLICY or the "
        "bundled policy)",
    )
    p.add_argument("file", nargs="?", help="the same, as a positional (kept for old scripts)")


def _derive_arguments(sub: Subparsers) -> None:
    p = sub.add_parser(
        "derive", help="propose a policy row for a CUDA index by the ADR's rule (writes nothing)"
    )
    p.add_argument(
        "--cuda",
        metavar="X.Y",
        help="the CUDA index (default: the row a build with the installed nvcc and torch "
        "takes, the nvcc probed live where archguard's table lacks it)",
    )
    p.add_argument("--policy", metavar="FILE", help="its decisions and rows (default: bundled)")
    p.add_argument("--toolkits", metavar="FILE", help="a toolkits.yml with that CUDA's row")
    p.add_argument("--torch-builds", metavar="FILE", help="a torch_builds.yml with its torch")
    platform_option(
        p, "derive from this machine's torch facts: x86_64 or aarch64 (default: this machine's)"
    )
    format_option(p)


def _matrix_arguments(sub: Subparsers) -> None:
    p = sub.add_parser("matrix", help="every (CUDA, torch) combination in the bundled tables")
    p.add_argument(
        "--project",
        type=Path,
        default=None,
        metavar="DIR",
        help="apply this package's [tool.archguard] overrides",
    )
    p.add_argument("--policy", metavar="FILE")
    platform_option(
        p, "the torch builds of this machine: x86_64 or aarch64 (default: this machine's)"
    )
    format_option(p, MatrixFormat)
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here, not stdout")


def _probe_torch_arguments(sub: Subparsers) -> None:
    p = sub.add_parser(
        "probe-torch",
        help="read what a torch wheel (or installed torch) ships; print its torch_builds.yml row",
    )
    p.add_argument("paths", nargs="+", metavar="WHEEL_OR_DIR", type=Path)
    p.add_argument("--check", action="store_true", help="exit 1 if the table's row differs")
    p.add_argument("--torch-builds", metavar="FILE", help="the table to check (default: bundled)")
    p.add_argument("--policy", metavar="FILE", help="whose arch_exceptions to check")
    platform_option(
        p,
        "compare with the table's rows for this machine (default: the torch's own, from its "
        "wheel tag or its libraries' ELF machine)",
    )
    cuobjdump_option(p)
    format_option(p)


def _watch_arguments(sub: Subparsers) -> None:
    p = sub.add_parser(
        "watch",
        help="torch releases and CUDA toolkit minors on the package index that the tables "
        "lack; --probe reads them into proposed rows",
    )
    p.add_argument("--torch-builds", metavar="FILE", help="the farm's table (default: bundled)")
    p.add_argument("--toolkits", metavar="FILE", help="the farm's toolkits.yml (default: bundled)")
    p.add_argument(
        "--since", metavar="VERSION", help="ignore releases below (default: the table's oldest)"
    )
    p.add_argument("--probe", action="store_true", help="download and probe each missing one")
    platform_option(
        p, "the torch wheels of this machine: x86_64 or aarch64 (default: this machine's)"
    )
    p.add_argument("--download-dir", type=Path, default=Path("torch-wheels"), metavar="DIR")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the proposed rows")
    cuobjdump_option(p)
    format_option(p)
    p.epilog = (
        "The index is the one pip reads; pip's index options go after --: archguard watch -- "
        "--index-url URL (--extra-index-url, --no-index)"
    )


def cmd_check_policy(args: argparse.Namespace) -> int:
    from archguard.settings.inputs import choose_policy

    if args.policy and args.file and args.policy != args.file:
        from archguard.errors import ConfigError

        raise ConfigError(
            f"check-policy got two policy files ({args.policy} with --policy, {args.file} as "
            "the positional); give one."
        )
    chosen = args.policy or args.file
    policy = choose_policy(Query(policy=chosen, policy_origin=""), None, os.environ)
    exceptions = sum(len(v) for v in policy.exceptions.values())
    print(
        f"{policy.source}: valid ({len(policy.rows)} rows: {', '.join(sorted(policy.rows))}; "
        f"{exceptions} arch exceptions)"
    )
    return EXIT_OK


def cmd_derive(args: argparse.Namespace) -> int:
    from archguard.core.cuda import CudaVersion
    from archguard.core.derive import derive, render
    from archguard.core.platform import platform_or_host
    from archguard.settings.inputs import (
        choose_policy,
        installed_row,
        toolkit_facts,
        torch_facts,
    )

    policy = choose_policy(Query(policy=args.policy), None, os.environ)
    platform = platform_or_host(args.platform)
    inputs: list[tuple[str, str]] = []
    if args.cuda:
        cuda = CudaVersion.parse(args.cuda, "--cuda")
        toolkit = toolkit_facts(cuda, args.toolkits)
    else:  # the installed nvcc (probed live where the table lacks it) and the row it takes
        toolkit, row = installed_row()
        cuda = row.cuda
        inputs = [("toolkit", f"CUDA {toolkit.text}: {toolkit.source}"), ("row", row.rule)]
    derived = derive(cuda, policy, toolkit, torch_facts(args.torch_builds), platform=platform)
    write(render(derived, policy.source, args.format, inputs))
    return EXIT_OK


def cmd_matrix(args: argparse.Namespace) -> int:
    from archguard.core.platform import platform_or_host
    from archguard.reports.matrix import compute, render
    from archguard.settings.inputs import gather_settings

    settings = gather_settings(Query(project_dir=args.project, policy=args.policy))
    cells = compute(settings, platform_or_host(args.platform))
    write(render(cells, settings, args.format), args.output)
    return EXIT_OK if all(c.error is None for c in cells) else EXIT_FAIL


def cmd_probe_torch(args: argparse.Namespace) -> int:
    from archguard.core.snapshot import render
    from archguard.detect.cuobjdump import find_cuobjdump
    from archguard.detect.torchlibs import probe
    from archguard.settings.inputs import choose_policy, torch_facts

    cuobjdump = find_cuobjdump(args.cuobjdump, needed_by="archguard probe-torch")
    builds = torch_facts(args.torch_builds)
    policy = choose_policy(Query(policy=args.policy), None, os.environ)
    probes = [probe(path, cuobjdump).probed() for path in args.paths]
    text, ok = render(probes, builds, policy, args.format, check=args.check, platform=args.platform)
    write(text)
    return EXIT_OK if ok or not args.check else EXIT_FAIL


def cmd_watch(args: argparse.Namespace) -> int:
    from archguard.user.watch import WatchOptions, render, run_watch

    options = WatchOptions(
        args.torch_builds,
        args.toolkits,
        args.since,
        args.platform,
        args.probe,
        args.download_dir,
        args.output,
        args.cuobjdump,
        tuple(args.pip_args),
    )
    watched = run_watch(options)  # an IndexUnreachable exits 2 through the one handler
    write(render(watched, args.format))
    return EXIT_FAIL if watched.missing_anything else EXIT_OK
