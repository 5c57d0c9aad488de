"""The arguments of the farm operator's commands (``wheel``, ``farm`` with its steps
``plan``, ``run``, ``verify``, ``workflow``, and ``variant``), whose handlers are
``_cli/farm.py``'s; ``cache``, also the operator's, holds its own."""

from __future__ import annotations

from pathlib import Path

from archguard._cli.options import (
    Subparsers,
    cuobjdump_option,
    format_option,
    non_negative,
    positive,
)
from archguard.core.formats import PlanFormat


def farm_commands(sub: Subparsers) -> None:
    """The farm operator's commands' arguments, in the order --help lists them."""
    _wheel_arguments(sub)
    _farm_arguments(sub)
    _variant_arguments(sub)


def _wheel_arguments(sub: Subparsers) -> None:
    p = sub.add_parser(
        "wheel",
        help="a farm cell: the list in the environment before setup.py runs, pip wheel "
        "--no-build-isolation, every wheel verified",
    )
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SRC",
        help="a source tree, an sdist file, an sdist URL pinned as URL#sha256=HEX, or "
        "name==version (the release's sdist from the index pip reads, checked against its "
        "published sha256); an sdist is unpacked at the same path each time, so a compile "
        "cache hits",
    )
    p.add_argument(
        "--sha256",
        metavar="HEX",
        help="the pinned sha256 of the one SRC (an sdist file, URL or name==version)",
    )
    p.add_argument("-w", "--wheel-dir", type=Path, default=Path("wheelhouse"), metavar="DIR")
    p.add_argument(
        "--build-requires",
        action="append",
        default=[],
        metavar="REQ",
        help="a build requirement the package imports and does not declare, installed with "
        "its declared ones (repeatable; a farm manifest's build-requires)",
    )
    p.add_argument(
        "--config",
        type=Path,
        metavar="PKG.toml",
        help="a [tool.archguard] table (ARCHGUARD_CONFIG)",
    )
    p.add_argument(
        "--repair",
        action="store_true",
        help="make each wheel manylinux with auditwheel (never grafting torch's, the CUDA "
        "runtime's or NVIDIA wheels' libraries; never below manylinux_2_28), read back again",
    )
    p.add_argument(
        "--local-version",
        metavar="LABEL",
        help="each wheel's local version label: auto (cu130torch2.13 for torch's C++ ABI, cu130 "
        "for its stable ABI), off, or a template with {cuda} and {torch} (default: the "
        "package's or --config's local_version, else auto)",
    )
    format_option(p)
    p.epilog = "Extra pip options go after --: archguard wheel SRC -- --config-settings=..."


def _farm_arguments(sub: Subparsers) -> None:
    p = sub.add_parser(
        "farm",
        help="the farm past one cell: 'farm plan MANIFEST' lists the jobs (package x cell) with "
        "their lists, ids and skips",
    )
    steps = p.add_subparsers(dest="farm_command", required=True, metavar="STEP")
    _plan_step(steps)
    _run_step(steps)
    _verify_step(steps)
    _workflow_step(steps)


def _plan_step(steps: Subparsers) -> None:
    plan = steps.add_parser("plan", help="the jobs of a manifest, nothing installed")
    plan.add_argument("manifest", type=Path, metavar="MANIFEST")
    plan.add_argument("--policy", metavar="FILE", help="the farm's policy (default: bundled)")
    plan.add_argument(
        "--no-repair",
        action="store_true",
        help="plan the ids of farm run --no-repair (a flag that changes the output is an input)",
    )
    plan.add_argument(
        "--site",
        type=Path,
        metavar="SITE",
        help="also show the torch each cell's environment in SITE held when a run last looked",
    )
    format_option(plan, PlanFormat)


def _run_step(steps: Subparsers) -> None:
    run = steps.add_parser(
        "run",
        help="build every job on this machine: an environment per cell (uv), archguard wheel "
        "--repair per job, one PEP 503 index per cell and a page; resumable",
    )
    run.add_argument("manifest", type=Path, metavar="MANIFEST")
    run.add_argument("-o", "--output", type=Path, required=True, metavar="SITE")
    run.add_argument("--only", metavar="PKG|CELL|JOB", help="only these jobs")
    run.add_argument(
        "--jobs",
        type=positive,
        default=1,
        metavar="N",
        help="build N packages at once (a package's cells stay in order; their compiles "
        "share one jobserver, a token per core; more jobs than cores fetch and resolve while "
        "others compile); default 1",
    )
    run.add_argument(
        "--ahead",
        type=non_negative,
        default=None,
        metavar="N",
        help="with the jobserver, keep N more jobs started than --jobs: they prepare while "
        "the others compile and take tokens as they come free, so a run's last jobs do not "
        "run alone; default 1 where --jobs is 2 or more, else 0",
    )
    run.add_argument("--policy", metavar="FILE", help="the farm's policy (default: bundled)")
    run.add_argument("--no-repair", action="store_true", help="keep linux_x86_64 wheels")
    run.add_argument(
        "--assemble",
        action="store_true",
        help="build nothing: the indexes and the page from the jobs' ledgers in SITE",
    )
    run.add_argument(
        "--wait",
        action="store_true",
        help="when another run holds SITE, wait for it (default: refuse, naming it)",
    )
    run.add_argument(
        "--in-container",
        action="store_true",
        help="this runner is the cells' image (farm workflow's build jobs): run the jobs of "
        "a cell with a container here, not in docker or podman",
    )


def _verify_step(steps: Subparsers) -> None:
    check = steps.add_parser(
        "verify",
        help="re-read every wheel a site's indexes publish against the index and its job's ledger",
    )
    check.add_argument("site", type=Path, metavar="SITE")
    check.add_argument(
        "--rebuild",
        type=Path,
        metavar="MANIFEST",
        help="also build the manifest's published jobs again in a scratch site and compare "
        "each wheel's sha256 (what differs: the zip's member, a .so's ELF section)",
    )
    check.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="JOB|PKG|CELL",
        help="with --rebuild: only these jobs (repeatable)",
    )
    check.add_argument(
        "--sample", type=int, metavar="N", help="with --rebuild: the first N published jobs"
    )
    check.add_argument(
        "--no-repair", action="store_true", help="with --rebuild: the site was run --no-repair"
    )
    check.add_argument(
        "--in-container",
        action="store_true",
        help="with --rebuild: this runner is the cells' image (farm workflow's rebuild job)",
    )
    format_option(check)


def _workflow_step(steps: Subparsers) -> None:
    flow = steps.add_parser("workflow", help="the plan as a GitHub Actions workflow")
    flow.add_argument("manifest", type=Path, metavar="MANIFEST")
    flow.add_argument(
        "--as",
        dest="manifest_in_repo",
        metavar="PATH",
        help="the manifest's path in the repository (default: as given)",
    )
    flow.add_argument("--policy", metavar="FILE", help="the farm's policy (default: bundled)")
    flow.add_argument(
        "--schedule",
        metavar="CRON",
        help="a schedule: trigger (default: daily where the manifest has [[cells]] rules)",
    )
    flow.add_argument(
        "--watch",
        action="store_true",
        help="a job that runs `archguard watch` (red while the tables lack a release)",
    )
    flow.add_argument(
        "--rebuild",
        type=int,
        default=0,
        metavar="N",
        help="a job per cell that rebuilds N of its published jobs on another runner and "
        "fails on a wheel whose bytes differ (default: none)",
    )
    flow.add_argument("-o", "--output", type=Path, metavar="FILE")


def _variant_arguments(sub: Subparsers) -> None:
    p = sub.add_parser(
        "variant",
        help="a wheel-variant copy of built wheels (PEP 825 draft, through variantlib), its "
        "properties from the binaries as read back",
    )
    p.add_argument("wheels", nargs="+", metavar="WHEEL", type=Path)
    p.add_argument("-o", "--output-dir", type=Path, default=Path("variants"), metavar="DIR")
    p.add_argument("--label", metavar="L", help="the variant label (default: variantlib's hash)")
    p.add_argument(
        "--cuda-lower-bound",
        metavar="X.Y",
        help="for a wheel with no archguard record: the CUDA that compiled it",
    )
    cuobjdump_option(p)
    format_option(p)
