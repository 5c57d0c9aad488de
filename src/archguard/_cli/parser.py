"""``archguard``'s argument parser, one builder per group of commands."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from archguard import __version__
from archguard._cli.cache import cache_command
from archguard._cli.farm_args import farm_commands, farm_plan_command
from archguard._cli.options import (
    Subparsers,
    cuobjdump_option,
    format_option,
    platform_option,
)
from archguard.core.formats import EnvFormat, ListFormat, MatrixFormat


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
    platform_option(
        g,
        "the machine the torch is built for: x86_64 or aarch64 (default: this machine's; "
        "another needs --torch or --torch-arches)",
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
    ("a farm operator", ("wheel", "farm", "variant", "cache")),
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
        farm_commands,
        _lint_command,
        _checks,
        _abi_command,
        farm_plan_command,
        cache_command,
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


def _list_commands(sub: Subparsers) -> None:
    p = sub.add_parser("explain", help="the inputs, each arch's fate and why, the coverage")
    p.add_argument("arches", nargs="*", metavar="ARCH", help="arches to ask 'why?' about")
    _add_inputs(p)
    format_option(p)

    p = sub.add_parser("list", help="just the effective arch list")
    _add_inputs(p)
    format_option(p, ListFormat)

    p = sub.add_parser(
        "env",
        help="the variables a build archguard's hook never sees needs (TORCH_CUDA_ARCH_LIST, "
        'CUDAARCHS): eval "$(python -m archguard env)"',
    )
    _add_inputs(p)
    format_option(p, EnvFormat)

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


def _binary_commands(sub: Subparsers) -> None:
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
    cuobjdump_option(p)
    format_option(p)

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
    p.add_argument(
        "--python",
        metavar="X.Y",
        help="a Python, 3.14t for a free-threaded one (default: this one)",
    )
    platform_option(p, "the machine: x86_64 or aarch64 (default: this one)")
    _gpu_options(p)
    p.add_argument("--driver-cuda", metavar="X.Y", help="the driver's CUDA (default: nvidia-smi's)")
    format_option(p)


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
    format_option(p)


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
    format_option(p)


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
    platform_option(
        p, "the torch builds of this machine: x86_64 or aarch64 (default: this machine's)"
    )
    format_option(p, MatrixFormat)
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
    cuobjdump_option(p, "cuobjdump to use")
    p.add_argument(
        "--stubs",
        action="store_true",
        help="also classify every kernel in every image (needs nvdisasm): real, empty or trap",
    )
    p.add_argument(
        "--fail-on-stubs", action="store_true", help="exit 1 when a served device runs a stub"
    )
    format_option(p)
