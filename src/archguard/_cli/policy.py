"""The commands the policy's maintainer runs: check-policy, derive, matrix, probe-torch, watch."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from archguard._cli.common import EXIT_FAIL, EXIT_OK, write
from archguard.errors import ArchguardError
from archguard.settings.inputs import Query

if TYPE_CHECKING:
    pass


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
    import json

    from archguard.core.platform import platform_or_host
    from archguard.core.torchbuild import parse_torch_version
    from archguard.settings.inputs import toolkit_table, torch_facts
    from archguard.user import watch

    builds = torch_facts(args.torch_builds)
    platform = platform_or_host(args.platform)
    torch_pip = [*watch.platform_pip_args(platform), *args.pip_args]
    since = parse_torch_version(args.since, "--since") if args.since else None
    versions = watch.available(torch_pip)  # an IndexUnreachable / PipTooOld exits 2
    missing, floor = watch.missing_releases(versions, builds, since, platform)
    table = args.torch_builds or "the bundled torch_builds.yml"
    watched = watch.Watched(table, [v for v in versions if v >= floor], missing, floor)
    watched.platform = platform
    if args.probe and missing:
        from archguard.core.snapshot import row_text
        from archguard.detect.cuobjdump import find_cuobjdump
        from archguard.detect.torchlibs import probe

        cuobjdump = find_cuobjdump(args.cuobjdump, needed_by="archguard watch --probe")
        for version in missing:
            try:
                wheel = watch.download(version, args.download_dir, torch_pip, platform=platform)
                watched.proposed.append(row_text(probe(wheel, cuobjdump).probed()))
            except ArchguardError as exc:
                watched.problems.append(f"torch {version}: {exc}")
        if args.output is not None and watched.proposed:
            args.output.write_text(
                "# Proposed by `archguard watch --probe`: review, then add to the table.\n"
                "schema: 1\nbuilds:\n" + "".join(watched.proposed),
                encoding="utf-8",
            )
    watched.toolkits = watch.available(args.pip_args, project=watch.NVCC_PROJECT)
    watched.toolkit_table = args.toolkits or watched.toolkit_table
    watched.missing_toolkits = watch.missing_minors(watched.toolkits, toolkit_table(args.toolkits))
    if args.probe:
        for version in watched.missing_toolkits:
            try:
                wheel = watch.download(
                    version, args.download_dir, args.pip_args, project=watch.NVCC_PROJECT
                )
                watched.proposed_toolkits.append(watch.probe_toolkit_wheel(wheel, version))
            except ArchguardError as exc:
                watched.problems.append(f"{watch.NVCC_PROJECT} {version}: {exc}")
    if args.format == "json":
        write(json.dumps(watched.as_json(), indent=2) + "\n")
    else:
        write(watch.render_text(watched))
    return EXIT_FAIL if watched.missing_anything else EXIT_OK
