"""The command line: main(argv) for each command; one exit rule: 0 fine, 1 findings, 2 failed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from archguard._cli import binaries, lists
from archguard._cli.common import EXIT_USAGE
from archguard._cli.parser import main_parser
from archguard.errors import ArchguardError


def main(argv: Sequence[str] | None = None) -> int:
    parser = main_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if argv[:1] in (["wheel"], ["watch"]) and "--" in argv:  # pip's options, untouched
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    args.pip_args = extra
    try:
        return COMMANDS[args.command](args)
    except ArchguardError as exc:
        from archguard.reports.text import error_json, render_error

        if getattr(args, "format", None) == "json":  # a machine reads stdout: one JSON object
            sys.stdout.write(error_json(exc))
        sys.stdout.flush()
        print(render_error(exc), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "explain": lists.cmd_explain,
    "list": lists.cmd_list,
    "env": lists.cmd_env,
    "derive": lists.cmd_derive,
    "lint": lists.cmd_lint,
    "probe-torch": binaries.cmd_probe_torch,
    "check-policy": lists.cmd_check_policy,
    "matrix": lists.cmd_matrix,
    "verify": binaries.cmd_verify,
    "abi": binaries.cmd_abi,
    "farm": binaries.cmd_farm,
    "wheel": binaries.cmd_wheel,
    "watch": binaries.cmd_watch,
    "doctor": binaries.cmd_doctor,
    "which": binaries.cmd_which,
    "variant": binaries.cmd_variant,
}
