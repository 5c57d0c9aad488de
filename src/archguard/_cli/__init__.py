"""The command line: main(argv) for each command; one exit rule: 0 fine, 1 findings, 2 failed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from archguard._cli import builder, cache, farm, policy, user
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
    "explain": builder.cmd_explain,
    "list": builder.cmd_list,
    "env": builder.cmd_env,
    "derive": policy.cmd_derive,
    "lint": builder.cmd_lint,
    "probe-torch": policy.cmd_probe_torch,
    "check-policy": policy.cmd_check_policy,
    "matrix": policy.cmd_matrix,
    "verify": builder.cmd_verify,
    "abi": builder.cmd_abi,
    "farm": farm.cmd_farm,
    "wheel": farm.cmd_wheel,
    "watch": policy.cmd_watch,
    "doctor": user.cmd_doctor,
    "which": user.cmd_which,
    "variant": farm.cmd_variant,
    "cache": cache.cmd_cache,
}
