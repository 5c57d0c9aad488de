"""The commands a farm operator runs: farm (plan, run, workflow, verify), wheel, variant."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from archguard._cli.common import EXIT_FAIL, EXIT_OK, write
from archguard.errors import ConfigError

if TYPE_CHECKING:
    pass


def cmd_farm(args: argparse.Namespace) -> int:
    if args.farm_command == "run":
        from archguard.farm.run import RunOptions, run_farm

        options = RunOptions(
            args.output,
            args.only,
            args.policy,
            not args.no_repair,
            args.assemble,
            args.jobs,
            args.wait,
            args.in_container,
            args.ahead,
        )
        status, text = run_farm(args.manifest, options)
        write(text)
        return status
    if args.farm_command == "workflow":
        from archguard.farm.workflow import workflow

        write(
            workflow(
                args.manifest,
                args.manifest_in_repo or str(args.manifest),
                args.policy,
                schedule=args.schedule,
                watch=args.watch,
                rebuild=args.rebuild,
            ),
            args.output,
        )
        return EXIT_OK
    if args.farm_command == "verify":
        from archguard.farm.verify import render, verify_site

        checked = verify_site(args.site)
        if args.rebuild is None:
            write(render(checked, args.site, args.format))
            return EXIT_OK if checked.ok else EXIT_FAIL
        from archguard.farm.rebuild import rebuild_site, render_proofs

        if args.sample is not None and args.sample < 1:
            raise ConfigError(f"archguard farm verify --sample {args.sample}: give 1 or more.")
        proofs = rebuild_site(
            args.site,
            args.rebuild,
            args.only,
            args.sample,
            repair=not args.no_repair,
            in_container=args.in_container,
        )
        if args.format == "json":  # one document: the site's check, with the rebuild's
            data = json.loads(render(checked, args.site, "json"))
            data["rebuild"] = json.loads(render_proofs(proofs, args.site, "json"))
            write(json.dumps(data, indent=2) + "\n")
        else:
            write(render(checked, args.site, "text") + render_proofs(proofs, args.site, "text"))
        return EXIT_OK if checked.ok and all(p.identical for p in proofs) else EXIT_FAIL
    from archguard.farm.plan import plan_manifest

    write(plan_manifest(args.manifest, args.policy, args.format, not args.no_repair, args.site))
    return EXIT_OK


def cmd_wheel(args: argparse.Namespace) -> int:
    from archguard.frontend.wheel import WheelOptions, run_wheel

    options = WheelOptions(
        args.config,
        args.pip_args,
        args.local_version,
        args.repair,
        args.sha256,
        tuple(args.build_requires),
    )
    # an ArchguardError (bad input) exits 2 through the one handler
    status, text = run_wheel(args.sources, args.wheel_dir, args.format, options)
    write(text)
    return status


def cmd_variant(args: argparse.Namespace) -> int:
    import json

    from archguard.binaries.verify import check
    from archguard.detect.cuobjdump import find_cuobjdump
    from archguard.user import variant

    variant.ensure_variantlib()
    cuobjdump = find_cuobjdump(args.cuobjdump, needed_by="archguard variant")
    reports: list[dict[str, object]] = []
    status = EXIT_OK
    for wheel in args.wheels:
        planned, problems = variant.from_checked(
            wheel, check([wheel], cuobjdump), args.cuda_lower_bound
        )
        entry: dict[str, object] = {"wheel": str(wheel), "problems": problems}
        if planned is None:
            status = EXIT_FAIL
            reports.append(entry)
            continue
        written = variant.write(planned, args.output_dir, args.label)
        entry |= {
            "variant": str(written),
            "properties": [f"{variant.NAMESPACE} :: {f} :: {v}" for f, v in planned.properties],
            "notes": planned.notes,
        }
        reports.append(entry)
    if args.format == "json":
        write(json.dumps({"schema": "archguard.variant/1", "wheels": reports}, indent=2) + "\n")
    else:
        lines = []
        for entry in reports:
            if entry["problems"]:
                lines.append(f"REFUSED  {entry['wheel']}")
                lines += [f"  {p}" for p in entry["problems"]]  # type: ignore[attr-defined]
                continue
            lines.append(f"wrote  {entry['variant']}")
            lines += [f"  {p}" for p in entry["properties"]]  # type: ignore[attr-defined]
            lines += [f"  note: {n}" for n in entry["notes"]]  # type: ignore[attr-defined]
        write("\n".join(lines) + "\n")
    return status
