"""``python -m archguard wheel SRC...``: one farm cell in one command.

Real ``setup.py`` files read the arch list (``TORCH_CUDA_ARCH_LIST``), their own switches
(``FORCE_CUDA``) or the GPU (``torch.cuda.get_device_capability()``) at the top of the file,
while pip prepares metadata, before archguard's build hook exists. So the front-end resolves
the list for each source first and runs ``pip wheel --no-build-isolation --no-deps`` with
``ARCHGUARD_ENABLE=1``, ``TORCH_CUDA_ARCH_LIST``, ``CUDAARCHS`` (and ``CUDA_HOME`` where
archguard found the toolkit) already in the environment; then it verifies every wheel the
build produced. A wheel with no CUDA device code is a failure here: many ``setup.py`` files
build a CPU fallback when no GPU is visible unless a variable such as ``FORCE_CUDA=1`` says
otherwise; the variables the package's ``setup.py`` reads are named.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import zipfile
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from archguard.binaries.record import read_wheel_record
from archguard.binaries.relabel import check_label, relabel
from archguard.binaries.repair import never_grafted, repair
from archguard.binaries.verify import check
from archguard.core.abi import cell_label, minor, serves
from archguard.core.arch import Targets
from archguard.core.cuda import CudaVersion
from archguard.core.resolve import Resolution
from archguard.detect.cuobjdump import find_cuobjdump
from archguard.detect.fetch import source_tree
from archguard.detect.tools import BUILD_TIMEOUT_S, run
from archguard.errors import ArchguardError, ConfigError
from archguard.frontend import buildenv
from archguard.frontend.cmake import forced_note, no_cuda_said
from archguard.frontend.failures import cause
from archguard.frontend.recorded import frontend_part, write_frontend_record
from archguard.frontend.release import declared_release, not_the_release
from archguard.frontend.result import WHEEL_SCHEMA, Built, WheelResult
from archguard.frontend.setup_py import SetupPy, read_setup_py
from archguard.frontend.switches import switches
from archguard.frontend.toolkit import BuildToolkit, build_toolkit, cmake_arches
from archguard.nvcc.flags import dropped_ptx, spelled_like
from archguard.reports.text import build_variables, render_error
from archguard.settings.config import ENV_CONFIG, env_wheel_variant
from archguard.settings.inputs import Query, gather
from archguard.settings.optin import ENV_ENABLE
from archguard.user import variant

# nvcc refusing an arch (one a CMake file or setup.py forced), or archguard's in-build check
_ARCH_REFUSED = re.compile(r"Unsupported gpu architecture|\[verify-failed\]")


@dataclass(frozen=True)
class Cell:
    """What the build of one source gets: its environment before ``setup.py`` runs, whether
    its wheels get a wheel-variant copy, and the local version label template."""

    environment: dict[str, str]
    variants: bool
    local_version: str  # "auto", "off" or a template with {cuda} and {torch}
    resolution: Resolution
    toolkit: BuildToolkit | None = None  # the one toolkit root every build system sees
    notes: tuple[str, ...] = ()  # what was set for the package's own variables, and why
    refused: str = ""  # its CMake files force other arches: why it is not built


def own_arch_variables(
    setup_py: SetupPy, res: Resolution, environ: dict[str, str], out: dict[str, str]
) -> list[str]:
    """The package's own arch variables (``GPU_ARCH``, read by its setup.py) set to the
    effective list in the package's spelling, learnt from the default its setup.py gives;
    added to ``out``; what was done, one note each. A variable set by the caller wins, and
    one with no default to learn from is left (and named if the build fails)."""
    notes: list[str] = []
    for name in setup_py.arch_variables():
        if environ.get(name):
            notes.append(f"its setup.py reads {name}, an arch variable: your {name} wins")
            continue
        default = setup_py.defaults.get(name)
        spelled = (
            spelled_like(default, res.effective, setup_py.cmake_arches)
            if default is not None
            else None
        )
        if spelled is None:
            continue
        out[name] = spelled
        notes.append(
            f"its setup.py reads {name}, an arch variable (default {default!r}): set to the "
            f"effective list in that spelling, {name}={spelled!r}"
            + (
                " (its spelling cannot say PTX: the PTX of the list is left out there; the "
                "read-back says what the build made of it)"
                if dropped_ptx(default or "", spelled, res.effective, setup_py.cmake_arches)
                else ""
            )
        )
    return notes


def cell_environment(
    source: Path, setup_py: SetupPy, config: Path | None, local_version: str | None = None
) -> Cell:
    """What the build of ``source`` (whose ``setup.py`` reads ``setup_py``) gets in its
    environment before ``setup.py`` runs, and whether its wheels get a wheel-variant copy
    (``ARCHGUARD_WHEEL_VARIANT``, else the package's or ARCHGUARD_CONFIG's
    ``wheel_variant``)."""
    environ = dict(os.environ)
    config = config.resolve() if config is not None else None  # pip builds elsewhere
    if config is not None:
        environ[ENV_CONFIG] = str(config)
    gathered = gather(Query(project_dir=source), environ)
    res = gathered.resolve().require_cubins()
    package = gathered.settings.package
    wanted = env_wheel_variant(environ)
    if wanted is None:
        wanted = bool(package and package.wheel_variant)
    values, _, _ = build_variables(res)
    out = {ENV_ENABLE: "1", **values}
    toolkit = build_toolkit(res, environ)
    if toolkit is not None:
        out.update(toolkit.variables)
    if config is not None:
        out[ENV_CONFIG] = str(config)
    notes = list(own_arch_variables(setup_py, res, environ, out))
    cmake = cmake_arches(source, res.effective, environ, out)  # its CMake files' own variables
    out.update(cmake.values)
    notes += cmake.notes
    label = local_version or (package.local_version if package else "auto")
    _check_template(label, "--local-version" if local_version else "local_version")
    return Cell(out, wanted, label, res, toolkit, tuple(notes), cmake.refusal)


def _check_template(template: str, where: str) -> None:
    """A ``local_version`` template checked before anything builds: its placeholders are
    ``{cuda}`` and ``{torch}`` and what it gives is a local version label."""
    if template in ("auto", "off"):
        return
    try:
        example = template.format(cuda="cu130", torch="2.13")
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"{where} = {template!r} is not a label template ({type(exc).__name__}: {exc}): "
            'write "auto", "off", or a label with {cuda} and {torch}, e.g. "{cuda}torch{torch}".'
        ) from None
    check_label(example, f"{where} = {template!r} gives")


def _wheels_in(out: Path) -> dict[Path, float]:
    return {p: p.stat().st_mtime for p in out.glob("*.whl")} if out.is_dir() else {}


def _verify(wheels: list[Path]) -> list[WheelResult]:
    """Each wheel's binaries read back and compared with its record (the read-back kept
    with it, for the variant copy)."""

    cuobjdump = find_cuobjdump(None, needed_by="archguard wheel (it verifies every wheel)")
    out = []
    for wheel in wheels:
        results = check([wheel], cuobjdump)
        cuda = [r for r in results if r.found is not None]
        out.append(
            WheelResult(
                wheel,
                len(cuda),
                Targets(
                    frozenset(a for r in cuda if r.found for a in r.found.cubins),
                    frozenset(a for r in cuda if r.found for a in r.found.ptx),
                ).names(),
                bool(cuda) and all(r.ok and r.expected is not None for r in cuda),
                [
                    f"{r.label}: missing {' '.join(r.missing) or 'nothing'}, unexpected "
                    f"{' '.join(r.unexpected) or 'nothing'}"
                    for r in cuda
                    if not r.ok
                ]
                + [f"{r.label}: no recorded resolution" for r in cuda if r.expected is None],
                results,
            )
        )
    return out


@dataclass(frozen=True)
class WheelOptions:
    """``archguard wheel``'s options for every source."""

    config: Path | None = None  # a [tool.archguard] table (ARCHGUARD_CONFIG)
    pip_args: Sequence[str] = ()
    local_version: str | None = None  # None: the package's or the config's, else auto
    repair: bool = False  # auditwheel, read back again
    sha256: str | None = None  # the one source's pinned sha256
    build_requires: Sequence[str] = ()  # requirements it imports and does not declare


def _say(source: Path, text: str) -> None:
    print(f"archguard wheel: {source}: {text}", file=sys.stderr, flush=True)


def build_one(source: Path, out: Path, options: WheelOptions) -> Built:
    setup_py = read_setup_py(source / "setup.py")
    cell = cell_environment(source, setup_py, options.config, options.local_version)
    env_vars = cell.environment
    if cell.refused:  # before anything is installed or compiled
        built = Built(str(source), -1, env_vars, setup_py.reads)
        built.problems.append(cell.refused)
        return built
    declared = buildenv.prepare(source, {**os.environ, **env_vars}, options.build_requires)
    if declared.installed:
        _say(
            source,
            "installed for its build (its declared requirements the cell lacks, the cell's "
            f"torch held): {', '.join(declared.installed)} in {declared.overlay}",
        )
    for note in [*cell.notes, *declared.notes, *(cell.toolkit.notes if cell.toolkit else ())]:
        _say(source, note)
    before = _wheels_in(out)
    argv = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v"]
    argv += [str(source), "-w", str(out), *options.pip_args]
    shown = [
        f"{k}={v.split(os.pathsep)[0]}:$PATH" if k == "PATH" else f"{k}={v}"
        for k, v in env_vars.items()
    ]
    _say(source, " ".join([*shown, *argv[1:]]))
    # no timeout (BUILD_TIMEOUT_S, see archguard.detect.tools); the build log goes to stderr,
    # stdout is the one line per wheel (or JSON)
    environment = {**os.environ, **env_vars, **declared.environment(os.environ)}
    tail: deque[str] = deque(maxlen=4000)  # the log's last lines, to say why it failed
    proc = run(argv, ConfigError, BUILD_TIMEOUT_S, environment, log=sys.stderr, tail=tail)
    made = sorted(p for p, t in _wheels_in(out).items() if before.get(p) != t)
    built = Built(str(source), proc.returncode, env_vars, setup_py.reads)
    built.build_env = declared.as_json()
    built.toolkit = cell.toolkit.as_json() if cell.toolkit else {}
    log = "\n".join(tail)
    if proc.returncode != 0:
        why = cause(tail, setup_py.reads, environment, str(source), setup_py.asks_gpu)
        if _ARCH_REFUSED.search(log):
            why += forced_note(source)
        built.problems.append(f"pip wheel failed (exit {proc.returncode}): {why}")
        return built
    release = declared_release(source)
    if release is not None:
        built.problems += [p for w in made if (p := not_the_release(w, release, source))]
    built.wheels = _verify(made)
    _record(built, cell, declared.backend, source)
    _judge(built, setup_py, log, source)
    if not made:
        built.problems.append("pip reported success but wrote no wheel")
    if not built.problems:
        _label(built, cell.local_version)
    if options.repair and not built.problems:
        _repair(built)
    if cell.variants and not built.problems:
        _variants(built, out)
    return built


def _record(built: Built, cell: Cell, backend: str, source: Path) -> None:
    """Each CUDA wheel's record gets the front-end's part; a wheel whose backend wrote none
    (no setuptools hook ran) gets the whole record, and is read back against it."""
    part = frontend_part(built.build_env, built.toolkit)
    for i, w in enumerate(built.wheels):
        if not w.cuda_binaries:
            continue
        if write_frontend_record(
            w.wheel, cell.resolution, w.checked, cell.environment, backend, part
        ):
            _say(
                source,
                f"{w.wheel.name}: a CUDA binary its build made that archguard's hook never saw "
                f"(its backend, {backend}, or a CMake step of its own): the front-end recorded "
                "the list it gave the build, each such binary expected to hold it",
            )
            built.wheels[i] = _verify([w.wheel])[0]


def _setup_text(source: Path) -> str:
    try:
        return (source / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _judge(built: Built, setup_py: SetupPy, log: str, source: Path) -> None:
    """A problem for each wheel with no CUDA code (with what its setup.py reads and the
    conditions it did not meet, or CMake's words) or other arches than recorded."""
    for w in built.wheels:
        if not w.cuda_binaries:
            offered = [
                r
                for r in switches(setup_py.reads, _setup_text(source))
                if r not in built.environment
            ]
            conditions = setup_py.conditions
            said = no_cuda_said(log)
            built.problems.append(
                f"{w.wheel.name} holds no CUDA device code: the package built "
                "without its CUDA extension (a CPU fallback, chosen when no GPU is visible?)"
                + (
                    ". Conditions in its setup.py a farm's build does not meet: "
                    + "; ".join(conditions)
                    if conditions
                    else ""
                )
                + (
                    f". Its setup.py reads {', '.join(offered)}: set the one that forces the "
                    "CUDA build (e.g. FORCE_CUDA=1) for this cell"
                    if offered
                    else ""
                )
                + (f". CMake said: {said!r}" if said else "")
            )
        elif not w.ok:
            built.problems.append(
                f"{w.wheel.name} does not hold what was recorded: "
                + "; ".join(w.differences)
                + forced_note(source)
            )


def _label(built: Built, template: str) -> None:
    """Each verified wheel relabelled for its cell: its local version and its torch pin,
    from what its binaries bind to (the record's ``abi``, its CUDA and torch)."""
    if template == "off":
        return
    for w in built.wheels:
        wheel = w.wheel
        try:
            with zipfile.ZipFile(wheel) as zf:
                record = read_wheel_record(zf, wheel.name)
        except (OSError, zipfile.BadZipFile) as exc:
            built.problems.append(f"{wheel.name}: not labelled: {exc}")
            continue
        if record is None or record.cuda is None or record.torch is None or not record.abi:
            w.label_note = "not labelled: its record says nothing of what it binds to"
            continue
        cuda = CudaVersion.parse(record.line_cuda or record.cuda, wheel.name)
        chosen = cell_label(list(record.abi.values()), cuda, record.torch)
        if chosen is None:
            w.label_note = "not labelled: it holds no extension"
            continue
        label = chosen.label
        if template != "auto":
            major, minor_ = minor(record.torch)
            label = check_label(
                template.format(cuda=cuda.tag, torch=f"{major}.{minor_}"), "local_version"
            )
        try:
            labelled = relabel(wheel, label, chosen.pin)
        except ArchguardError as exc:
            built.problems.append(f"{wheel.name}: not labelled: {exc}")
            continue
        tags = "-".join(labelled.name[: -len(".whl")].split("-")[-3:-1])
        w.wheel, w.label, w.pin, w.label_why = labelled, label, chosen.pin or None, chosen.why
        w.compiled_with = record.cuda
        w.serves = serves(chosen, list(record.abi.values()), tags)


def _repair(built: Built) -> None:
    """Each labelled wheel made manylinux (:mod:`archguard.binaries.repair`), its cubins read
    back again, and put in place of the plain wheel only then."""
    cuobjdump = find_cuobjdump(None, needed_by="archguard wheel --repair (it reads back)")
    for w in built.wheels:
        wheel = w.wheel
        with tempfile.TemporaryDirectory(prefix="archguard-repair-", dir=wheel.parent) as tmp:
            try:
                repaired = repair(wheel, Path(tmp))
            except ArchguardError as exc:
                built.problems.append(f"{wheel.name}: not repaired: {exc}")
                continue
            bad = never_grafted(repaired.grafted)
            if bad:
                built.problems.append(
                    f"{wheel.name}: refused: auditwheel grafted {', '.join(bad)}, which only "
                    "the user's torch may bring; the plain wheel is kept"
                )
                continue
            results = check([repaired.wheel], cuobjdump)
            cuda = [r for r in results if r.found is not None]
            if not cuda or not all(r.ok for r in cuda):
                built.problems.append(
                    f"{wheel.name}: refused: the repaired wheel's binaries do not read back "
                    "as recorded; the plain wheel is kept"
                )
                continue
            target = wheel.parent / repaired.wheel.name
            repaired.wheel.replace(target)
        if target != wheel:
            wheel.unlink()
        w.wheel, w.checked = target, results
        w.platform, w.lowest_platform = repaired.platform, repaired.lowest
        w.grafted, w.not_grafted = list(repaired.grafted), list(repaired.not_grafted)
        w.retagged = repaired.retagged or None


def _variants(built: Built, out: Path) -> None:
    """A wheel-variant copy of each verified wheel, in ``out/variants``, from the binaries
    already read back."""

    for w in built.wheels:
        planned, problems = variant.from_checked(w.wheel, w.checked)
        if planned is None:
            built.problems += [f"{w.wheel.name}: no variant: {p}" for p in problems]
            continue
        w.variant = str(variant.write(planned, out / "variants"))
        w.variant_notes = list(planned.notes)


REFUSED = "refused"


def _refuse(built: Built, out: Path, before: dict[Path, float]) -> None:
    """Every wheel a failed build left in ``out`` moved to ``out/refused/``, each with a note
    saying why (``NAME.whl.why.txt``): ``out/*.whl`` is always publishable."""
    left = [p for p, t in _wheels_in(out).items() if before.get(p) != t]
    if not left:
        return
    where = out / REFUSED
    where.mkdir(exist_ok=True)
    why = "\n".join(built.problems) or "the build failed"
    for wheel in left:
        target = where / wheel.name
        wheel.replace(target)
        (where / f"{wheel.name}.why.txt").write_text(
            f"archguard wheel refused {wheel.name} (built from {built.source}):\n{why}\n"
        )
        for w in built.wheels:
            if w.wheel == wheel:
                w.wheel = target
    built.problems.append(
        f"refused: {', '.join(p.name for p in left)} moved to {where} (each with a note why)"
    )


def run_wheel(
    sources: Sequence[str], out: Path, fmt: str, options: WheelOptions
) -> tuple[int, str]:
    """Build each source (a tree, an sdist file, an sdist URL pinned by its sha256); (exit
    status, stdout text). 0: every wheel built and verified. Every source is checked (an
    sdist's hash too) before anything builds."""
    if options.sha256 is not None and len(sources) != 1:
        raise ConfigError(
            "archguard wheel --sha256 pins one source; for several, write each as "
            "URL_OR_FILE#sha256=HEX."
        )
    if options.config is not None and not options.config.is_file():
        raise ConfigError(f"archguard wheel --config {options.config}: no such file.")
    if options.local_version is not None:
        _check_template(options.local_version, "--local-version")
    trees = [source_tree(s, options.sha256, pip_args=options.pip_args) for s in sources]
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for source in trees:
        before = _wheels_in(out)
        try:
            built = build_one(source, out, options)
        except ArchguardError as exc:
            built = Built(str(source), -1, {}, read_setup_py(source / "setup.py").reads)
            built.problems.append(render_error(exc))
        if not built.ok:
            _refuse(built, out, before)
        results.append(built)
    ok = all(r.ok for r in results)
    if fmt == "json":
        text = json.dumps(
            {"schema": WHEEL_SCHEMA, "ok": ok, "builds": [r.as_json() for r in results]}, indent=2
        )
        return (0 if ok else 1), text + "\n"
    lines = []
    for r in results:
        for w in r.wheels:
            lines += w.lines()
        if not r.wheels:
            lines.append(f"FAILED  {r.source}  no wheel")
        lines += [f"  {p}" for p in r.problems]
    return (0 if ok else 1), "\n".join(lines) + "\n"
