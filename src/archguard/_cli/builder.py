"""The commands a package's builder runs: explain, list, env, lint, verify, abi."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from archguard._cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, write
from archguard.core.toolkit import known_arches
from archguard.errors import ArchguardError
from archguard.settings.inputs import Query

if TYPE_CHECKING:
    pass
import sys

from archguard._cli.common import environment_notes, query
from archguard.core.arch import parse_arch
from archguard.core.resolve import Resolution
from archguard.settings.inputs import Gathered, gather


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


def cmd_verify(args: argparse.Namespace) -> int:
    from archguard.binaries.verify import check, given_expectation, render, verdict
    from archguard.detect.cuobjdump import find_cuobjdump

    cuobjdump = find_cuobjdump(args.cuobjdump, needed_by="archguard verify")
    asked = args.cuda or args.torch or args.torch_arches or args.project or args.policy
    query = (
        Query(
            project_dir=args.project or Path(),
            cuda=args.cuda,
            torch=args.torch,
            torch_arches=args.torch_arches,
            policy=args.policy,
        )
        if asked
        else None
    )
    given = given_expectation(args.arch_list, query)
    nvdisasm = None
    if args.stubs or args.fail_on_stubs:
        from archguard.detect.sass import find_nvdisasm
        from archguard.detect.tools import NVDISASM
        from archguard.errors import NvdisasmNotFound

        nvdisasm = find_nvdisasm(near=cuobjdump)
        if nvdisasm is None:
            raise NvdisasmNotFound(
                "verify --stubs disassembles every cubin (cuobjdump -sass), which needs "
                f"nvdisasm, and none was found (looked at {NVDISASM.order}). Install it with "
                f"`pip install {NVDISASM.package}`."
            )
    results = check(args.paths, cuobjdump, given, nvdisasm)
    failed = [r.stubs_error for r in results if r.stubs_error]
    if failed:  # --stubs asked for the disassembly: its failure is the command's
        from archguard.errors import BinaryReadError

        raise BinaryReadError(failed[0])
    report = verdict(results, args.paths)
    write(render(report, args.format))
    stubbed = args.fail_on_stubs and any(r.stubs and r.stubs.findings for r in results)
    return EXIT_OK if report.ok and not stubbed else EXIT_FAIL


def cmd_abi(args: argparse.Namespace) -> int:
    from archguard.binaries.abi import check_paths, render
    from archguard.detect.abi import torch_exports

    torches = [torch_exports(path) for path in args.torches]
    checked = check_paths(args.paths, torches)
    write(render(checked, torches, args.format))
    return EXIT_FAIL if any(c.fails for c in checked) else EXIT_OK
