"""The commands a wheel's user runs: doctor, which."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from archguard._cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, write
from archguard.core.toolkit import known_arches
from archguard.errors import ArchguardError, ConfigError

if TYPE_CHECKING:
    from archguard.core.coverage import Device
from archguard.core.arch import parse_arch


def _gpus(
    args: argparse.Namespace, none: str
) -> tuple[list[tuple[Device, str]], tuple[int, int] | None, list[str]]:
    """The GPUs a command on a user's machine judges for (``--device``, else torch's or
    nvidia-smi's), each with where it came from; the driver's CUDA where found; notes
    (``none``: what is said when there is no GPU)."""
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
    torch = doctor.installed_torch_targets(args.path)
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
    from archguard.core.platform import host_platform
    from archguard.user import which

    python, free_threaded = None, False
    if args.python is not None:
        text = args.python.strip()
        free_threaded = text.endswith("t")
        major, _, minor = text.removesuffix("t").partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise ConfigError(
                f"--python {args.python!r}: write the Python as X.Y, e.g. 3.12 (3.14t for a "
                "free-threaded one)."
            )
        python = (int(major), int(minor))
    platform = args.platform or host_platform()
    version, tags = which.python_tags(python, platform, free_threaded)
    try:
        torch, torch_cuda, note = which.torch_here(args.torch)
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
        torch,
        torch_cuda,
        version,
        tags,
        gpus,
        driver,
        (*notes, *more),
        note == which.CPU,
        platform,
        free_threaded,
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
