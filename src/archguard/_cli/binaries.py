"""The commands that read binaries or run builds: probe-torch, verify, wheel, watch,
variant, doctor."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from archguard._cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, write
from archguard.core.toolkit import known_arches
from archguard.errors import ArchguardError, ConfigError
from archguard.settings.inputs import Query

if TYPE_CHECKING:
    from archguard.core.coverage import Device


def cmd_probe_torch(args: argparse.Namespace) -> int:
    from archguard.core.snapshot import render
    from archguard.detect.cuobjdump import find_cuobjdump
    from archguard.detect.torchlibs import probe
    from archguard.settings.inputs import choose_policy, torch_facts

    cuobjdump = find_cuobjdump(args.cuobjdump, needed_by="archguard probe-torch")
    builds = torch_facts(args.torch_builds)
    policy = choose_policy(Query(policy=args.policy), None, os.environ)
    probes = [probe(path, cuobjdump).probed() for path in args.paths]
    text, ok = render(probes, builds, policy, args.format, check=args.check)
    write(text)
    return EXIT_OK if ok or not args.check else EXIT_FAIL


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
                args.schedule,
                args.watch,
            ),
            args.output,
        )
        return EXIT_OK
    if args.farm_command == "verify":
        from archguard.farm.verify import render, verify_site

        checked = verify_site(args.site)
        write(render(checked, args.site, args.format))
        return EXIT_OK if checked.ok else EXIT_FAIL
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


def cmd_watch(args: argparse.Namespace) -> int:
    import json

    from archguard.core.torchbuild import parse_torch_version
    from archguard.settings.inputs import toolkit_table, torch_facts
    from archguard.user import watch

    builds = torch_facts(args.torch_builds)
    since = parse_torch_version(args.since, "--since") if args.since else None
    versions = watch.available(args.pip_args)  # an IndexUnreachable / PipTooOld exits 2
    missing, floor = watch.missing_releases(versions, builds, since)
    table = args.torch_builds or "the bundled torch_builds.yml"
    watched = watch.Watched(table, [v for v in versions if v >= floor], missing, floor)
    if args.probe and missing:
        from archguard.core.snapshot import row_text
        from archguard.detect.cuobjdump import find_cuobjdump
        from archguard.detect.torchlibs import probe

        cuobjdump = find_cuobjdump(args.cuobjdump, needed_by="archguard watch --probe")
        for version in missing:
            try:
                wheel = watch.download(version, args.download_dir, args.pip_args)
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


def _gpus(
    args: argparse.Namespace, none: str
) -> tuple[list[tuple[Device, str]], tuple[int, int] | None, list[str]]:
    """The GPUs a command on a user's machine judges for (``--device``, else torch's or
    nvidia-smi's), each with where it came from; the driver's CUDA where found; notes
    (``none``: what is said when there is no GPU)."""
    from archguard.core.arch import parse_arch
    from archguard.core.coverage import Device, known_devices
    from archguard.detect.gpus import detect_gpus

    names = {d.cc: d.name for d in known_devices()}
    given = [parse_arch(t, "--device", known=known_arches()) for t in args.device]
    if given:
        return [(Device(a.cc, names.get(a.cc, "given")), "--device") for a in given], None, []
    found = detect_gpus(use_torch=not args.no_torch)
    notes = list(found.notes) + ([] if found.gpus else [none])
    return [(Device(g.cc, g.name), g.origin) for g in found.gpus], found.driver_cuda, notes


def cmd_doctor(args: argparse.Namespace) -> int:
    import json

    from archguard.detect.cuobjdump import find_cuobjdump
    from archguard.user import doctor

    gpus, driver, notes = _gpus(args, "no GPU found: name one with --device CC (e.g. --device 8.9)")
    try:
        cuobjdump: str | None = find_cuobjdump(args.cuobjdump, needed_by="archguard doctor")
    except ArchguardError as exc:
        cuobjdump = None
        notes.append(f"no cuobjdump: wheels without an archguard record are not read ({exc})")
    packages = doctor.installed(args.path or None, cuobjdump)
    findings = doctor.diagnose([g for g, _ in gpus], packages, driver)
    torch = doctor.installed_torch(args.path)
    from archguard.user.importable import check_installed

    imports, import_notes = check_installed(
        [(p.name, p.binaries) for p in packages], doctor.torch_root(args.path), driver
    )
    diagnosis = doctor.Diagnosis(
        gpus, driver, packages, findings, torch, [*notes, *import_notes], imports
    )
    write(
        json.dumps(diagnosis.as_json(), indent=2) + "\n"
        if args.format == "json"
        else diagnosis.render_text()
    )
    if not gpus:
        return EXIT_USAGE
    return EXIT_FAIL if doctor.failed(findings) or any(c.fails for c in imports) else EXIT_OK


def cmd_which(args: argparse.Namespace) -> int:
    import json

    from packaging.version import InvalidVersion

    from archguard.core.cuda import CudaVersion
    from archguard.user import which

    python = None
    if args.python is not None:
        major, _, minor = args.python.partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise ConfigError(f"--python {args.python!r}: write the Python as X.Y, e.g. 3.12.")
        python = (int(major), int(minor))
    version, tags = which.python_tags(python)
    try:
        torch, torch_cuda, note = which.installed_torch(args.torch)
    except InvalidVersion:
        raise ConfigError(
            f"--torch {args.torch!r} is not a version: write it as pip shows it, e.g. 2.14.1+cu130."
        ) from None
    notes = [note] if note else []
    found, driver, more = _gpus(
        args,
        "no GPU found: whether a wheel runs natively is not judged (name one with --device CC)",
    )
    if args.driver_cuda is not None:
        cuda = CudaVersion.parse(args.driver_cuda, "--driver-cuda")
        driver = (cuda.major, cuda.minor)
    gpus = tuple(g for g, _ in found)
    here = which.Here(
        torch, torch_cuda, version, tags, gpus, driver, (*notes, *more), note == which.CPU
    )
    site, base = which.read_site(args.site)
    answers = which.which(site, base, here, args.name)
    if args.format == "json":
        data = {
            "schema": which.WHICH_SCHEMA,
            "machine": here.as_json(),
            "packages": [a.as_json() for a in answers],
        }
        write(json.dumps(data, indent=2) + "\n")
    else:
        write(which.render_text(answers, here))
    return EXIT_OK if all(a.chosen is not None for a in answers) else EXIT_FAIL
