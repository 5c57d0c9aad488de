"""``archguard``'s argument parser: the main parser, its --help grouped by who runs each
command, and the arguments of the builder's commands and the user's. The farm operator's
commands' arguments are in ``farm_args``, ``cache``'s and the maintainer's beside their
handlers (``cache``, ``policy``)."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from archguard import __version__
from archguard._cli.cache import cache_command
from archguard._cli.farm_args import farm_commands
from archguard._cli.options import (
    Subparsers,
    cuobjdump_option,
    format_option,
    platform_option,
)
from archguard._cli.policy import policy_commands
from archguard.core.formats import EnvFormat, ListFormat


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
    for group in (  # GROUPS's order: the builder's, the farm's, the user's, the maintainer's
        _list_commands,
        _lint_command,
        _verify_command,
        _abi_command,
        farm_commands,
        cache_command,
        _user_commands,
        policy_commands,
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


def _user_commands(sub: Subparsers) -> None:
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


def _verify_command(sub: Subparsers) -> None:
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
