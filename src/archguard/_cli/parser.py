"""``archguard``'s argument parser, one builder per group of commands."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import TypeAlias, get_args

from archguard import __version__
from archguard.core.formats import EnvFormat, Format, ListFormat, MatrixFormat, PlanFormat


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


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


# The commands by who runs them, as the README's command table groups them and as the _cli
# modules hold them (builder, farm, user, policy; a test compares all three): --help lists
# them so.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("a package's builder", ("explain", "list", "env", "lint", "verify", "abi")),
    ("a farm operator", ("wheel", "farm", "variant")),
    ("a wheel's user", ("doctor", "which")),
    ("the policy's maintainer", ("check-policy", "derive", "matrix", "probe-torch", "watch")),
)


def main_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="archguard",
        usage="archguard [-h] [--version] COMMAND ...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"archguard {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help=argparse.SUPPRESS
    )
    for group in (
        _list_commands,
        _binary_commands,
        _farm_commands,
        _lint_command,
        _checks,
        _abi_command,
        _farm_plan_command,
    ):
        group(sub)
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    lines = textwrap.wrap(
        "Compute, explain and verify the CUDA arch list of PyTorch extension wheels from one "
        "owned policy.",
        78,
    )
    for title, names in GROUPS:
        lines += ["", f"{title}:"]
        lines += [_command_line(name, helps[name]) for name in names]
    parser.description = "\n".join(lines)
    parser.epilog = textwrap.fill(
        "Exit status, every command: 0 fine; 1 findings or differences; 2 could not run "
        "(bad input, a missing tool, nothing left to build); 130 when interrupted (Ctrl-C).",
        78,
    )
    return parser


def _command_line(name: str, text: str) -> str:
    """One command in --help's listing: its name, then its help wrapped under it."""
    first, *rest = textwrap.wrap(text, 62) or [""]
    return "\n".join([f"  {name:<14}{first}", *(f"  {'':<14}{line}" for line in rest)])


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _format(p: argparse.ArgumentParser, formats: object = Format) -> None:
    """``--format``, its words from :mod:`archguard.core.formats` (the first the default)."""
    choices = get_args(formats)
    p.add_argument("--format", choices=choices, default=choices[0])


def _cuobjdump(p: argparse.ArgumentParser, help: str | None = None) -> None:
    p.add_argument("--cuobjdump", metavar="PATH", help=help)


def _list_commands(sub: Subparsers) -> None:
    p = sub.add_parser("explain", help="the inputs, each arch's fate and why, the coverage")
    p.add_argument("arches", nargs="*", metavar="ARCH", help="arches to ask 'why?' about")
    _add_inputs(p)
    _format(p)

    p = sub.add_parser("list", help="just the effective arch list")
    _add_inputs(p)
    _format(p, ListFormat)

    p = sub.add_parser(
        "env",
        help="the variables a build archguard's hook never sees needs (TORCH_CUDA_ARCH_LIST, "
        'CUDAARCHS): eval "$(python -m archguard env)"',
    )
    _add_inputs(p)
    _format(p, EnvFormat)

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
    _format(p)


def _binary_commands(sub: Subparsers) -> None:
    p = sub.add_parser(
        "probe-torch",
        help="read what a torch wheel (or installed torch) ships; print its torch_builds.yml row",
    )
    p.add_argument("paths", nargs="+", metavar="WHEEL_OR_DIR", type=Path)
    p.add_argument("--check", action="store_true", help="exit 1 if the table's row differs")
    p.add_argument("--torch-builds", metavar="FILE", help="the table to check (default: bundled)")
    p.add_argument("--policy", metavar="FILE", help="whose arch_exceptions to check")
    _cuobjdump(p)
    _format(p)

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
    _cuobjdump(p)
    _format(p)

    p = sub.add_parser(
        "doctor",
        help="on this machine: for each GPU and installed package with CUDA binaries, the "
        "image it loads (native, JIT-only, nothing) and the stubs in it",
    )
    _gpu_options(p)
    p.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="DIR",
        help="read the distributions installed in DIR (default: this interpreter's)",
    )
    _cuobjdump(p)
    _format(p)

    p = sub.add_parser(
        "which",
        help="the install command that gives a farm site's wheel that imports here and runs "
        "natively on every GPU, or why each wheel does not fit",
    )
    p.add_argument("site", metavar="SITE", help="a farm's site: its directory or its URL")
    p.add_argument("name", nargs="?", metavar="NAME", help="a package (default: every one)")
    p.add_argument(
        "--torch", metavar="VERSION", help="a torch, e.g. 2.14.1+cu130 (default: the installed)"
    )
    p.add_argument("--python", metavar="X.Y", help="a Python (default: this one)")
    _gpu_options(p)
    p.add_argument("--driver-cuda", metavar="X.Y", help="the driver's CUDA (default: nvidia-smi's)")
    _format(p)


def _gpu_options(p: argparse.ArgumentParser) -> None:
    """How a command on a user's machine finds its GPUs: given, or asked of torch and
    nvidia-smi (``doctor``, ``which``)."""
    p.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="CC",
        help="a GPU's compute capability, e.g. 8.9 (repeatable; default: the machine's)",
    )
    p.add_argument(
        "--no-torch",
        action="store_true",
        help="do not import torch to find the GPUs (nvidia-smi only)",
    )


def _farm_commands(sub: Subparsers) -> None:
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
    p.add_argument("--download-dir", type=Path, default=Path("torch-wheels"), metavar="DIR")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the proposed rows")
    _cuobjdump(p)
    _format(p)
    p.epilog = "pip options for the index go after --: archguard watch -- --index-url URL"

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
    _format(p)
    p.epilog = "Extra pip options go after --: archguard wheel SRC -- --config-settings=..."


def _lint_command(sub: Subparsers) -> None:
    p = sub.add_parser(
        "lint", help="find __CUDA_ARCH__-guarded code a served device runs compiled out"
    )
    p.add_argument(
        "paths", nargs="*", metavar="PATH", type=Path, help="default: the project's .cu files"
    )
    p.add_argument("-I", dest="include", action="append", default=[], type=Path, metavar="DIR")
    p.add_argument(
        "-D",
        dest="macros",
        action="append",
        default=[],
        type=lambda v: f"-D{v}",
        metavar="NAME[=VALUE]",
        help="a macro the build defines (as nvcc's -D)",
    )
    p.add_argument(
        "-U",
        dest="macros",
        action="append",
        type=lambda v: f"-U{v}",
        metavar="NAME",
        help="a macro the build leaves undefined: settles a condition the lint lists as not "
        "understood because no scanned file defines the name",
    )
    p.add_argument(
        "--pre-include",
        dest="forced",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a file the build includes before each source (nvcc -include / --pre-include)",
    )
    _add_inputs(p)
    _format(p)


def _farm_plan_command(sub: Subparsers) -> None:
    p = sub.add_parser(
        "farm",
        help="the farm past one cell: 'farm plan MANIFEST' lists the jobs (package x cell) with "
        "their lists, ids and skips",
    )
    steps = p.add_subparsers(dest="farm_command", required=True, metavar="STEP")
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
    _format(plan, PlanFormat)
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
        type=_positive,
        default=1,
        metavar="N",
        help="build N packages at once (a package's cells stay in order; each build gets "
        "its share of the cores as MAX_JOBS unless the package sets it); default 1",
    )
    run.add_argument("--policy", metavar="FILE", help="the farm's policy (default: bundled)")
    run.add_argument("--no-repair", action="store_true", help="keep linux_x86_64 wheels")
    run.add_argument(
        "--assemble",
        action="store_true",
        help="build nothing: the indexes and the page from the jobs' records in SITE",
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
    check = steps.add_parser(
        "verify",
        help="re-read every wheel a site's indexes publish against the index and its job record",
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
    _format(check)
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
    flow.add_argument("-o", "--output", type=Path, metavar="FILE")


def _abi_command(sub: Subparsers) -> None:
    p = sub.add_parser(
        "abi",
        help="will built extensions import with these torch builds? their torch symbols "
        "resolved against each torch's exports, read without importing anything",
    )
    p.add_argument("paths", nargs="+", metavar="WHEEL_OR_SO", type=Path)
    p.add_argument(
        "--torch",
        dest="torches",
        action="append",
        required=True,
        type=Path,
        metavar="DIR_OR_WHEEL",
        help="an installed torch (its directory, or the site-packages holding it) or a torch "
        "wheel, read without installing it; repeat for several",
    )
    _format(p)


def _checks(sub: Subparsers) -> None:
    p = sub.add_parser("check-policy", help="validate a policy file")
    p.add_argument(
        "--policy",
        dest="policy",
        metavar="FILE",
        help="the policy file, as every command takes it (default: ARCHGUARD_POLICY or the "
        "bundled policy)",
    )
    p.add_argument("file", nargs="?", help="the same, as a positional (kept for old scripts)")

    p = sub.add_parser("matrix", help="every (CUDA, torch) combination in the bundled tables")
    p.add_argument(
        "--project",
        type=Path,
        default=None,
        metavar="DIR",
        help="apply this package's [tool.archguard] overrides",
    )
    p.add_argument("--policy", metavar="FILE")
    _format(p, MatrixFormat)
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
    _cuobjdump(p, "cuobjdump to use")
    p.add_argument(
        "--stubs",
        action="store_true",
        help="also classify every kernel in every image (needs nvdisasm): real, empty or trap",
    )
    p.add_argument(
        "--fail-on-stubs", action="store_true", help="exit 1 when a served device runs a stub"
    )
    _format(p)
