"""The command line: ``python -m archguard explain | list | env | matrix | verify |
check-policy | lint | wheel | ...``.

``main(argv) -> int``; every :class:`~archguard.errors.ArchguardError` becomes one
paragraph on stderr and exit status 1 (2 for a usage error), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from archguard import __version__
from archguard.core.arch import parse_arch
from archguard.core.toolkit import known_arches
from archguard.errors import ArchguardError
from archguard.settings.inputs import Query, gather

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


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


def main_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="archguard",
        description="Compute, explain and verify the CUDA arch list of PyTorch extension "
        "wheels from one owned policy.",
    )
    parser.add_argument("--version", action="version", version=f"archguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("explain", help="the inputs, each arch's fate and why, the coverage")
    p.add_argument("arches", nargs="*", metavar="ARCH", help="arches to ask 'why?' about")
    _add_inputs(p)
    p.add_argument("--format", choices=("text", "json"), default="text")

    p = sub.add_parser("list", help="just the effective arch list")
    _add_inputs(p)
    p.add_argument(
        "--format", choices=("text", "torch", "cmake", "gencode", "json"), default="text"
    )

    p = sub.add_parser(
        "env",
        help="the variables a build archguard's hook never sees needs (TORCH_CUDA_ARCH_LIST, "
        'CUDAARCHS): eval "$(python -m archguard env)"',
    )
    _add_inputs(p)
    p.add_argument("--format", choices=("sh", "github", "json"), default="sh")

    p = sub.add_parser(
        "derive", help="propose a policy row for a CUDA index by the ADR's rule (writes nothing)"
    )
    p.add_argument("--cuda", metavar="X.Y", required=True)
    p.add_argument("--policy", metavar="FILE", help="its decisions and rows (default: bundled)")
    p.add_argument("--toolkits", metavar="FILE", help="a toolkits.yml with that CUDA's row")
    p.add_argument("--torch-builds", metavar="FILE", help="a torch_builds.yml with its torch")
    p.add_argument("--format", choices=("text", "json"), default="text")

    p = sub.add_parser(
        "probe-torch",
        help="read what a torch wheel (or installed torch) ships; print its torch_builds.yml row",
    )
    p.add_argument("paths", nargs="+", metavar="WHEEL_OR_DIR", type=Path)
    p.add_argument("--check", action="store_true", help="exit 1 if the table's row differs")
    p.add_argument("--torch-builds", metavar="FILE", help="the table to check (default: bundled)")
    p.add_argument("--policy", metavar="FILE", help="whose arch_exceptions to check")
    p.add_argument("--cuobjdump", metavar="PATH")
    p.add_argument("--format", choices=("text", "json"), default="text")

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
    p.add_argument("--cuobjdump", metavar="PATH")
    p.add_argument("--format", choices=("text", "json"), default="text")

    p = sub.add_parser(
        "doctor",
        help="on this machine: for each GPU and installed package with CUDA binaries, the "
        "image it loads (native, JIT-only, nothing) and the stubs in it",
    )
    p.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="CC",
        help="a GPU's compute capability, e.g. 8.9 (repeatable; default: the machine's)",
    )
    p.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="DIR",
        help="read the distributions installed in DIR (default: this interpreter's)",
    )
    p.add_argument(
        "--no-torch",
        action="store_true",
        help="do not import torch to find the GPUs (nvidia-smi only)",
    )
    p.add_argument("--cuobjdump", metavar="PATH")
    p.add_argument("--format", choices=("text", "json"), default="text")

    p = sub.add_parser(
        "watch",
        help="torch releases on the package index that the torch table lacks; --probe reads "
        "them into a proposed table",
    )
    p.add_argument("--torch-builds", metavar="FILE", help="the farm's table (default: bundled)")
    p.add_argument(
        "--since", metavar="VERSION", help="ignore releases below (default: the table's oldest)"
    )
    p.add_argument("--probe", action="store_true", help="download and probe each missing one")
    p.add_argument("--download-dir", type=Path, default=Path("torch-wheels"), metavar="DIR")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the proposed rows")
    p.add_argument("--cuobjdump", metavar="PATH")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.epilog = "pip options for the index go after --: archguard watch -- --index-url URL"

    p = sub.add_parser(
        "wheel",
        help="a farm cell: the list in the environment before setup.py runs, pip wheel "
        "--no-build-isolation, every wheel verified",
    )
    p.add_argument("sources", nargs="+", metavar="SRC", type=Path, help="unpacked source trees")
    p.add_argument("-w", "--wheel-dir", type=Path, default=Path("wheelhouse"), metavar="DIR")
    p.add_argument(
        "--config",
        type=Path,
        metavar="PKG.toml",
        help="a [tool.archguard] table (ARCHGUARD_CONFIG)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.epilog = "Extra pip options go after --: archguard wheel SRC -- --config-settings=..."

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
    p.add_argument("--format", choices=("text", "json"), default="text")

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
    p.add_argument(
        "--format", choices=("text", "markdown", "html", "json", "github"), default="text"
    )
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
    p.add_argument("--cuobjdump", metavar="PATH", help="cuobjdump to use")
    p.add_argument(
        "--stubs",
        action="store_true",
        help="also classify every kernel in every image (needs nvdisasm): real, empty or trap",
    )
    p.add_argument(
        "--fail-on-stubs", action="store_true", help="exit 1 when a served device runs a stub"
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def _query(args: argparse.Namespace) -> Query:
    return Query(
        project_dir=args.project,
        cuda=args.cuda,
        torch=args.torch,
        torch_arches=args.torch_arches,
        policy=args.policy,
    )


def _environment_notes(warnings: list[str]) -> list[str]:
    preset = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if preset is None:
        return warnings
    return [
        *warnings,
        f"TORCH_CUDA_ARCH_LIST={preset!r} is set in this environment; an "
        "archguard build replaces it with the effective list.",
    ]


def _write(text: str, output: Path | None = None) -> None:
    if output is not None:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


def cmd_explain(args: argparse.Namespace) -> int:
    from archguard.binaries.record import resolution_record  # noqa: PLC0415
    from archguard.reports.text import dumps, explain_text  # noqa: PLC0415

    why = [parse_arch(a, "the command line", known=known_arches()) for a in args.arches]
    gathered = gather(_query(args))
    res = gathered.resolve()
    warnings = _environment_notes(gathered.warnings)
    if args.format == "json":
        record = resolution_record(res, why)
        record["warnings"] = warnings
        record["build_time"] = list(gathered.settings.build_time)
        _write(dumps(record))
    else:
        build_time = gathered.settings.build_time
        if build_time and res.ok:
            from archguard.settings.inputs import parallel_preview  # noqa: PLC0415

            build_time = (*build_time, parallel_preview(gathered.settings, res, os.environ))
        _write(explain_text(res, gathered.shown, warnings, why, build_time))
    if not res.ok:
        try:
            res.require_cubins()
        except ArchguardError as exc:  # the table is printed above: the message alone
            print(exc.render(), file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    from archguard.reports.text import list_text  # noqa: PLC0415

    gathered = gather(_query(args))
    for warning in _environment_notes(gathered.warnings):
        print(f"archguard: warning: {warning}", file=sys.stderr)
    res = gathered.resolve().require_cubins()
    _write(list_text(res, args.format))
    return EXIT_OK


def cmd_env(args: argparse.Namespace) -> int:
    from archguard.reports.text import env_text  # noqa: PLC0415

    gathered = gather(_query(args))
    for warning in _environment_notes(gathered.warnings):
        print(f"archguard: warning: {warning}", file=sys.stderr)
    res = gathered.resolve().require_cubins()
    from archguard.settings.config import ENV_COMPILER_CACHE, env_choice  # noqa: PLC0415

    package = gathered.settings.package
    cache = env_choice(os.environ, ENV_COMPILER_CACHE, "compiler_cache") or (
        package.compiler_cache if package else None
    )
    text, notes = env_text(res, args.format, cache)
    for note in notes:
        print(f"archguard: note: {note}", file=sys.stderr)
    _write(text)
    return EXIT_OK


def cmd_derive(args: argparse.Namespace) -> int:
    from archguard.core.cuda import CudaVersion  # noqa: PLC0415
    from archguard.core.derive import derive, render  # noqa: PLC0415
    from archguard.settings.inputs import choose_policy, toolkit_facts, torch_facts  # noqa: PLC0415

    cuda = CudaVersion.parse(args.cuda, "--cuda")
    policy = choose_policy(Query(policy=args.policy), None, os.environ)
    derived = derive(
        cuda, policy, toolkit_facts(cuda, args.toolkits), torch_facts(args.torch_builds)
    )
    _write(render(derived, policy.source, args.format))
    return EXIT_OK


def cmd_probe_torch(args: argparse.Namespace) -> int:
    from archguard.core.snapshot import render  # noqa: PLC0415
    from archguard.detect.cuobjdump import find_cuobjdump  # noqa: PLC0415
    from archguard.detect.torchlibs import probe  # noqa: PLC0415
    from archguard.settings.inputs import choose_policy, torch_facts  # noqa: PLC0415

    cuobjdump = find_cuobjdump(args.cuobjdump)
    builds = torch_facts(args.torch_builds)
    policy = choose_policy(Query(policy=args.policy), None, os.environ)
    probes = [probe(path, cuobjdump).probed() for path in args.paths]
    text, ok = render(probes, builds, policy, args.format, check=args.check)
    _write(text)
    return EXIT_OK if ok or not args.check else EXIT_FAIL


def cmd_lint(args: argparse.Namespace) -> int:
    from archguard.lint.guards import Wheel, analyse  # noqa: PLC0415
    from archguard.lint.render import render  # noqa: PLC0415
    from archguard.lint.sources import (  # noqa: PLC0415
        Sources,
        include_dirs_of,
        parse_defines,
        path_sources,
        project_sources,
    )

    gathered = gather(_query(args))
    for warning in _environment_notes(gathered.warnings):
        print(f"archguard: warning: {warning}", file=sys.stderr)
    res = gathered.resolve().require_cubins()
    project = args.project.resolve()
    roots = path_sources(args.paths) if args.paths else project_sources(project)
    inside = [project, *args.include, *(p if p.is_dir() else p.parent for p in args.paths)]
    include_dirs = [*args.include, *include_dirs_of(project)]
    forced = [str(f.resolve()) for f in args.forced]
    sources = Sources.on_disk(include_dirs, inside, parse_defines(args.macros), forced)
    report = analyse(roots, Wheel(res.targets, res.toolkit, res.torch.targets), sources)
    _write(render(report, res.tag, args.format, base=project))
    return EXIT_OK if report.ok else EXIT_FAIL


def cmd_check_policy(args: argparse.Namespace) -> int:
    from archguard.settings.inputs import choose_policy  # noqa: PLC0415

    if args.policy and args.file and args.policy != args.file:
        from archguard.errors import ConfigError  # noqa: PLC0415

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
    from archguard.reports.matrix import compute, render  # noqa: PLC0415
    from archguard.settings.inputs import gather_settings  # noqa: PLC0415

    settings = gather_settings(Query(project_dir=args.project, policy=args.policy))
    cells = compute(settings)
    _write(render(cells, settings, args.format), args.output)
    return EXIT_OK if all(c.error is None for c in cells) else EXIT_FAIL


def cmd_verify(args: argparse.Namespace) -> int:
    from archguard.binaries.verify import check, given_expectation, render, verdict  # noqa: PLC0415
    from archguard.detect.cuobjdump import find_cuobjdump  # noqa: PLC0415

    cuobjdump = find_cuobjdump(args.cuobjdump)
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
        from archguard.detect.sass import find_nvdisasm  # noqa: PLC0415
        from archguard.errors import NvdisasmNotFound  # noqa: PLC0415

        nvdisasm = find_nvdisasm(near=cuobjdump)
        if nvdisasm is None:
            raise NvdisasmNotFound(
                "verify --stubs disassembles every cubin (cuobjdump -sass), which needs "
                "nvdisasm, and none was found (looked at NVDISASM_PATH, PATH, CUDA_HOME/bin, "
                "beside cuobjdump, and the nvidia-cuda-nvdisasm package). Install it with "
                "`pip install nvidia-cuda-nvdisasm`."
            )
    results = check(args.paths, cuobjdump, given, nvdisasm)
    report = verdict(results, args.paths)
    _write(render(report, args.format))
    stubbed = args.fail_on_stubs and any(r.stubs and r.stubs.findings for r in results)
    return EXIT_OK if report.ok and not stubbed else EXIT_FAIL


def cmd_wheel(args: argparse.Namespace) -> int:
    from archguard._integration.farm import run_wheel  # noqa: PLC0415
    from archguard.errors import ConfigError  # noqa: PLC0415
    from archguard.reports.text import render_error  # noqa: PLC0415

    try:
        status, text = run_wheel(
            args.sources, args.wheel_dir, args.config, args.format, args.pip_args
        )
    except ConfigError as exc:  # could not run: exit 2
        print(render_error(exc), file=sys.stderr)
        return EXIT_USAGE
    _write(text)
    return status


def cmd_watch(args: argparse.Namespace) -> int:
    import json  # noqa: PLC0415

    from archguard.core.torchbuild import parse_torch_version  # noqa: PLC0415
    from archguard.errors import IndexUnreachable  # noqa: PLC0415
    from archguard.settings.inputs import torch_facts  # noqa: PLC0415
    from archguard.user import watch  # noqa: PLC0415

    builds = torch_facts(args.torch_builds)
    since = parse_torch_version(args.since, "--since") if args.since else None
    try:
        versions = watch.available(args.pip_args)
    except IndexUnreachable as exc:
        from archguard.reports.text import render_error  # noqa: PLC0415

        print(render_error(exc), file=sys.stderr)
        return EXIT_USAGE
    missing, floor = watch.missing_releases(versions, builds, since)
    table = args.torch_builds or "the bundled torch_builds.yml"
    watched = watch.Watched(table, [v for v in versions if v >= floor], missing, floor)
    if args.probe and missing:
        from archguard.core.snapshot import row_text  # noqa: PLC0415
        from archguard.detect.cuobjdump import find_cuobjdump  # noqa: PLC0415
        from archguard.detect.torchlibs import probe  # noqa: PLC0415

        cuobjdump = find_cuobjdump(args.cuobjdump)
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
    if args.format == "json":
        _write(json.dumps(watched.record(), indent=2) + "\n")
    else:
        _write(watch.text(watched))
    return EXIT_FAIL if missing else EXIT_OK


def cmd_variant(args: argparse.Namespace) -> int:
    import json  # noqa: PLC0415

    from archguard.binaries.verify import check  # noqa: PLC0415
    from archguard.detect.cuobjdump import find_cuobjdump  # noqa: PLC0415
    from archguard.user import variant  # noqa: PLC0415

    variant.ensure_variantlib()
    cuobjdump = find_cuobjdump(args.cuobjdump)
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
        _write(json.dumps({"schema": "archguard.variant/1", "wheels": reports}, indent=2) + "\n")
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
        _write("\n".join(lines) + "\n")
    return status


def cmd_doctor(args: argparse.Namespace) -> int:
    import json  # noqa: PLC0415

    from archguard.core.arch import parse_arch  # noqa: PLC0415
    from archguard.core.coverage import Device, known_devices  # noqa: PLC0415
    from archguard.detect.cuobjdump import find_cuobjdump  # noqa: PLC0415
    from archguard.detect.gpus import detect_gpus  # noqa: PLC0415
    from archguard.user import doctor  # noqa: PLC0415

    names = {d.cc: d.name for d in known_devices()}
    notes: list[str] = []
    gpus: list[tuple[Device, str]] = []
    driver = None
    for text in args.device:
        arch = parse_arch(text, "--device", known=known_arches())
        gpus.append((Device(arch.cc, names.get(arch.cc, "given")), "--device"))
    if not gpus:
        found = detect_gpus(use_torch=not args.no_torch)
        gpus = [(Device(g.cc, g.name), g.origin) for g in found.gpus]
        driver = found.driver_cuda
        notes += list(found.notes)
        if not gpus:
            notes.append("no GPU found: name one with --device CC (e.g. --device 8.9)")
    try:
        cuobjdump: str | None = find_cuobjdump(args.cuobjdump)
    except ArchguardError as exc:
        cuobjdump = None
        notes.append(f"no cuobjdump: wheels without an archguard record are not read ({exc})")
    packages = doctor.installed(args.path or None, cuobjdump)
    findings = doctor.diagnose([g for g, _ in gpus], packages, driver)
    torch = doctor.installed_torch(args.path)
    diagnosis = doctor.Diagnosis(gpus, driver, packages, findings, torch, notes)
    _write(
        json.dumps(diagnosis.record(), indent=2) + "\n"
        if args.format == "json"
        else diagnosis.text()
    )
    if not gpus:
        return EXIT_USAGE
    return EXIT_FAIL if doctor.failed(findings) else EXIT_OK


COMMANDS = {
    "explain": cmd_explain,
    "list": cmd_list,
    "env": cmd_env,
    "derive": cmd_derive,
    "lint": cmd_lint,
    "probe-torch": cmd_probe_torch,
    "check-policy": cmd_check_policy,
    "matrix": cmd_matrix,
    "verify": cmd_verify,
    "wheel": cmd_wheel,
    "watch": cmd_watch,
    "doctor": cmd_doctor,
    "variant": cmd_variant,
}


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
        from archguard.reports.text import render_error  # noqa: PLC0415

        sys.stdout.flush()
        print(render_error(exc), file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        return 130
