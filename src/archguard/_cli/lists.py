"""The commands that answer from the policy and the tables: explain, list, env, derive, lint,
check-policy, matrix."""

from __future__ import annotations

import argparse
import os
import sys

from archguard._cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, environment_notes, query, write
from archguard.core.arch import parse_arch
from archguard.core.resolve import Resolution
from archguard.core.toolkit import known_arches
from archguard.errors import ArchguardError
from archguard.settings.inputs import Gathered, Query, gather


def cmd_explain(args: argparse.Namespace) -> int:
    from archguard.binaries.record import explain_record
    from archguard.reports.text import dumps, explain_text

    why = [parse_arch(a, "the command line", known=known_arches()) for a in args.arches]
    gathered = gather(query(args))
    res = gathered.resolve()
    warnings = environment_notes(gathered.warnings)
    if args.format == "json":
        write(dumps(explain_record(res, why, warnings, gathered.settings.build_time)))
    else:
        build_time = gathered.settings.build_time
        if build_time and res.ok:
            from archguard.reports.parallel import parallel_preview

            build_time = (*build_time, parallel_preview(gathered.settings, res, os.environ))
        write(explain_text(res, gathered.shown, warnings, why, build_time))
    if not res.ok:
        try:
            res.require_cubins()
        except ArchguardError as exc:  # the table is printed above: the message alone
            print(exc.render(), file=sys.stderr)
        return EXIT_USAGE  # an archguard error: nothing to build, as `list` says with 2
    return EXIT_OK


def _resolved(args: argparse.Namespace) -> tuple[Gathered, Resolution]:
    """The command's inputs and its non-empty resolution; the environment's warnings said."""
    gathered = gather(query(args))
    for warning in environment_notes(gathered.warnings):
        print(f"archguard: warning: {warning}", file=sys.stderr)
    return gathered, gathered.resolve().require_cubins()


def cmd_list(args: argparse.Namespace) -> int:
    from archguard.reports.text import list_text

    _, res = _resolved(args)
    write(list_text(res, args.format))
    return EXIT_OK


def cmd_env(args: argparse.Namespace) -> int:
    from archguard.reports.text import env_text

    gathered, res = _resolved(args)
    from archguard.settings.config import ENV_COMPILER_CACHE, env_choice

    package = gathered.settings.package
    cache = env_choice(os.environ, ENV_COMPILER_CACHE, "compiler_cache") or (
        package.compiler_cache if package else None
    )
    text, notes = env_text(res, args.format, cache)
    for note in notes:
        print(f"archguard: note: {note}", file=sys.stderr)
    write(text)
    return EXIT_OK


def cmd_derive(args: argparse.Namespace) -> int:
    from archguard.core.cuda import CudaVersion
    from archguard.core.derive import derive, render
    from archguard.settings.inputs import (
        choose_policy,
        installed_row,
        toolkit_facts,
        torch_facts,
    )

    policy = choose_policy(Query(policy=args.policy), None, os.environ)
    inputs: list[tuple[str, str]] = []
    if args.cuda:
        cuda = CudaVersion.parse(args.cuda, "--cuda")
        toolkit = toolkit_facts(cuda, args.toolkits)
    else:  # the installed nvcc (probed live where the table lacks it) and the row it takes
        toolkit, row = installed_row()
        cuda = row.cuda
        inputs = [("toolkit", f"CUDA {toolkit.text}: {toolkit.source}"), ("row", row.rule)]
    derived = derive(cuda, policy, toolkit, torch_facts(args.torch_builds))
    write(render(derived, policy.source, args.format, inputs))
    return EXIT_OK


def cmd_lint(args: argparse.Namespace) -> int:
    from archguard.lint.guards import Wheel, analyse
    from archguard.lint.render import list_place, render
    from archguard.lint.sources import (
        Sources,
        include_dirs_of,
        parse_defines,
        path_sources,
        split_project_sources,
    )

    _, res = _resolved(args)
    project = args.project.resolve()
    roots, vendored = (
        (path_sources(args.paths), []) if args.paths else split_project_sources(project)
    )
    inside = [project, *args.include, *(p if p.is_dir() else p.parent for p in args.paths)]
    include_dirs = [*args.include, *include_dirs_of(project)]
    forced = [str(f.resolve()) for f in args.forced]
    sources = Sources.on_disk(include_dirs, inside, parse_defines(args.macros), forced)
    report = analyse(roots, Wheel(res.targets, res.toolkit, res.torch.targets), sources)
    report.vendored = vendored
    write(render(report, list_place(res.request.origin, res.tag), args.format, base=project))
    return EXIT_OK if report.ok else EXIT_FAIL


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


def cmd_matrix(args: argparse.Namespace) -> int:
    from archguard.reports.matrix import compute, render
    from archguard.settings.inputs import gather_settings

    settings = gather_settings(Query(project_dir=args.project, policy=args.policy))
    cells = compute(settings)
    write(render(cells, settings, args.format), args.output)
    return EXIT_OK if all(c.error is None for c in cells) else EXIT_FAIL
