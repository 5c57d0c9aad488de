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

import contextlib
import json
import os
import re
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from archguard._fs import SOURCE_DATE_EPOCH
from archguard.binaries.relabel import check_label
from archguard.core.resolve import Resolution
from archguard.detect.fetch import machine_directory, source_tree
from archguard.detect.machine import detect_machine
from archguard.detect.machine_jobserver import joined_machine
from archguard.detect.tools import BUILD_TIMEOUT_S, ToolFailed, run
from archguard.errors import ArchguardError, ConfigError, ReleaseNotFetched, ToolError
from archguard.frontend import buildenv
from archguard.frontend.cmake import forced_note
from archguard.frontend.cmake_arches import cmake_arches
from archguard.frontend.failures import cause
from archguard.frontend.finish import (
    each,
    judged,
    labeller,
    recorder,
    refused,
    repairer,
    varianter,
    verified,
)
from archguard.frontend.jobserver import backend_jobserver
from archguard.frontend.recorded import frontend_part
from archguard.frontend.release import declared_release, not_the_release
from archguard.frontend.result import WHEEL_SCHEMA, Built
from archguard.frontend.setup_py import SetupPy, read_setup_py
from archguard.frontend.toolkit import BuildToolkit, build_toolkit
from archguard.frontend.torchcmake import TorchCMake, torch_cmake
from archguard.nvcc.flags import arch_variables, dropped_ptx, spelled_like
from archguard.nvcc.parallel import jobserver_width
from archguard.reports.text import render_error
from archguard.settings.config import (
    ENV_CONFIG,
    ENV_JOBSERVER,
    env_wheel_variant,
    jobserver_setting,
)
from archguard.settings.inputs import Query, gather
from archguard.settings.optin import ENV_ENABLE

# nvcc refusing an arch (one a CMake file or setup.py forced), or archguard's in-build check
_ARCH_REFUSED = re.compile(r"Unsupported gpu architecture|\[verify-failed\]")


@dataclass(frozen=True)
class SourceBuild:
    """What the build of one source gets: its environment before ``setup.py`` runs, whether
    its wheels get a wheel-variant copy, and the local version label template (the farm's
    cell is :class:`archguard.farm.manifest.Cell`: the environment the build runs in)."""

    environment: dict[str, str]
    variants: bool
    local_version: str  # "auto", "off" or a template with {cuda} and {torch}
    resolution: Resolution
    toolkit: BuildToolkit | None = None  # the one toolkit root every build system sees
    notes: tuple[str, ...] = ()  # what was set for the package's own variables, and why
    refused: str = ""  # its CMake files force other arches: why it is not built
    torch_cmake: TorchCMake | None = None  # torch's CMake package, named for any CMake


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


def source_build(
    source: Path, setup_py: SetupPy, config: Path | None, local_version: str | None = None
) -> SourceBuild:
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
    values = arch_variables(res.effective).values
    out = {ENV_ENABLE: "1", **values}
    toolkit = build_toolkit(res, environ)
    if toolkit is not None:
        out.update(toolkit.variables)
    torch = torch_cmake(environ, setup_py.torch_locations)  # for any CMake the build runs
    out.update(torch.variables)
    if config is not None:
        out[ENV_CONFIG] = str(config)
    notes = [*torch.notes, *own_arch_variables(setup_py, res, environ, out)]
    # its CMake files' own variables; a -D in CMAKE_ARGS reaches CMake only where the backend
    # (scikit-build-core), scikit-build's setup() (a requirement of the build) or the setup.py
    # passes CMAKE_ARGS on
    requires, backend, _ = buildenv.static_requires(source)
    passes = (
        "CMAKE_ARGS" in setup_py.reads
        or "scikit_build" in backend
        or any(_SCIKIT_BUILD.match(r) for r in requires)
    )
    cmake = cmake_arches(source, res.effective, environ, out, cmake_args=passes)
    out.update(cmake.values)
    notes += cmake.notes
    label = local_version or (package.local_version if package else "auto")
    _check_template(label, "--local-version" if local_version else "local_version")
    return SourceBuild(out, wanted, label, res, toolkit, tuple(notes), cmake.refusal, torch)


_SCIKIT_BUILD = re.compile(r"\s*scikit[-_.]build\b", re.I)  # scikit-build, -core: CMAKE_ARGS


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
    build = source_build(source, setup_py, options.config, options.local_version)
    env_vars = build.environment
    if build.refused:  # before anything is installed or compiled
        built = Built(str(source), -1, env_vars, setup_py.reads)
        built.problems.append(build.refused)
        return built
    declared = buildenv.prepare(source, {**os.environ, **env_vars}, options.build_requires)
    if declared.installed:
        _say(
            source,
            "installed for its build (its declared requirements the cell lacks, the cell's "
            f"torch held): {', '.join(declared.installed)} in {declared.overlay}",
        )
    for note in [*build.notes, *declared.notes, *(build.toolkit.notes if build.toolkit else ())]:
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
    if declared.overlay is not None and (declared.overlay / "bin").is_dir():
        # the commands its build requirements install (pip's cmake): before the toolkit's
        search = environment.get("PATH") or os.defpath
        environment["PATH"] = os.pathsep.join([str(declared.overlay / "bin"), search])
    tail: deque[str] = deque(maxlen=4000)  # the log's last lines, to say why it failed
    with backend_jobserver(
        declared.backend,
        environment,
        lambda t: _say(source, t),
        source=source,
        pip_args=options.pip_args,
    ) as joined:
        environment.update(joined)  # a backend the hook never runs in: the jobserver's tokens
        try:
            proc = run(argv, None, BUILD_TIMEOUT_S, environment, log=sys.stderr, tail=tail)
        except ToolFailed as exc:  # pip could not start: not the package's build failing
            raise ToolError(f"{source}: {exc}", tool="pip") from None
    made = sorted(p for p, t in _wheels_in(out).items() if before.get(p) != t)
    built = Built(str(source), proc.returncode, env_vars, setup_py.reads)
    built.build_env = declared.as_json()
    built.toolkit = build.toolkit.as_json() if build.toolkit else {}
    if build.torch_cmake is not None:
        built.toolkit["torch_cmake"] = build.torch_cmake.as_json()
    log = "\n".join(tail)
    if proc.returncode != 0:
        why = cause(tail, setup_py.reads, environment, str(source), setup_py.asks_gpu)
        if _ARCH_REFUSED.search(log):
            why += forced_note(source)
        built.problems.append(f"pip wheel failed (exit {proc.returncode}): {why}")
        return built
    return _finished(
        built,
        made,
        build=build,
        backend=declared.backend,
        setup_py=setup_py,
        log=log,
        options=options,
        out=out,
    )


def _finished(  # noqa: PLR0913 - what the steps after pip need, each from build_one
    built: Built,
    made: list[Path],
    *,
    build: SourceBuild,
    backend: str,
    setup_py: SetupPy,
    log: str,
    options: WheelOptions,
    out: Path,
) -> Built:
    """The build's wheels through the steps after pip (:mod:`archguard.frontend.finish`),
    each step's new results passed to the next; a step runs only while no problem is met."""
    source = Path(built.source)
    problems: list[str] = []
    release = declared_release(source)
    if release is not None:
        problems += [p for w in made if (p := not_the_release(w, release, source))]
    part = frontend_part(built.build_env, built.toolkit)
    step = recorder(
        build.resolution, build.environment, backend, part, lambda t: _say(source, t), source
    )
    wheels, said = each(verified(made), step)
    problems += said + judged(wheels, setup_py, _setup_text(source), log, built)
    if not made:
        problems.append("pip reported success but wrote no wheel")
    if not problems:
        wheels, said = each(wheels, labeller(build.local_version))
        problems += said
    if options.repair and not problems:
        wheels, said = each(wheels, repairer())
        problems += said
    if build.variants and not problems:
        wheels, said = each(wheels, varianter(out))
        problems += said
    return replace(built, wheels=wheels, problems=[*built.problems, *problems])


def _setup_text(source: Path) -> str:
    try:
        return (source / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


@contextlib.contextmanager
def _zip_dates() -> Iterator[None]:
    """The same bytes each time: the zips pip, archguard (the record, the label) and
    auditwheel write take their dates from ``SOURCE_DATE_EPOCH``, set while the builds run
    where the caller gave none, and taken back after."""
    given = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = given or SOURCE_DATE_EPOCH
    try:
        yield
    finally:
        if given is None:
            del os.environ["SOURCE_DATE_EPOCH"]


@contextlib.contextmanager
def _one_jobserver() -> Iterator[None]:
    """Every build of this run in the machine's jobserver (issue 57: one per machine, shared
    with farm runs and other builds under the same cache; each build takes its first token
    there, its hook or :func:`backend_jobserver` for it). The caller's jobserver (a farm
    job's, make 4.4's), or none asked: each build as it is."""
    setting = jobserver_setting(os.environ)
    if not setting.on or setting.fifo is not None:
        yield
        return
    with joined_machine(machine_directory(), jobserver_width(detect_machine())) as joined:
        if isinstance(joined, OSError):  # no FIFO there: each build's hook makes its own
            yield
            return
        os.environ[ENV_JOBSERVER] = f"fifo:{joined.path}"
        try:
            yield
        finally:
            del os.environ[ENV_JOBSERVER]


def _built(source: Path, out: Path, options: WheelOptions) -> Built:
    """One source built; a failed build's wheels moved aside (``out/*.whl`` is publishable)."""
    before = _wheels_in(out)
    try:
        built = build_one(source, out, options)
    except ArchguardError as exc:
        built = Built(str(source), -1, {}, read_setup_py(source / "setup.py").reads)
        built.problems.append(render_error(exc))
    if built.ok:
        return built
    return refused(built, [p for p, t in _wheels_in(out).items() if before.get(p) != t], out)


_RELEASE_HINT = (
    "(archguard wheel gives pip's options after `--`: archguard wheel NAME==VERSION -- "
    "--index-url URL; --sha256 HEX pins one source.)"
)


def _source_tree(source: str, options: WheelOptions) -> Path:
    """The tree to build for ``source``: its release's error says how this command names
    an index and a pin, which the fetch cannot know."""
    try:
        return source_tree(source, options.sha256, pip_args=options.pip_args, pinned_by="--sha256")
    except ReleaseNotFetched as exc:
        raise ReleaseNotFetched(f"{exc.message} {_RELEASE_HINT}", detail=exc.detail) from None


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
    trees = [_source_tree(s, options) for s in sources]
    out.mkdir(parents=True, exist_ok=True)
    with _zip_dates(), _one_jobserver():
        results = [_built(source, out, options) for source in trees]
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
