"""``archguard farm run MANIFEST -o SITE``: the embedded engine on one machine.

One environment per cell, made with uv (which reaches the CUDA builds of torch whatever pip's
local settings say) and reused while the cell is unchanged; each job through ``archguard
wheel --repair`` in its cell's environment, with the package's ``[tool.archguard]`` table and
its own switches; a log per job; failures isolated per job and summed up at the end. A job
whose id already has a verified wheel in SITE is not built again, so a run killed midway
resumes where it stopped. The output: one PEP 503 simple index per cell,
``SITE/<cell>/simple/``, and a page, ``SITE/index.html``, each written whole and then put in
place (a reader never sees a partial one). Only the wheels of jobs that built and verified are
published; a failed job's wheel stays out of its index."""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from archguard._integration.sources import source_tree
from archguard.core.arch import Targets, parse_targets
from archguard.core.coverage import Tier, coverage, known_devices
from archguard.core.cuda import CudaVersion
from archguard.core.toolkit import known_arches
from archguard.detect.sources import file_sha256
from archguard.detect.tools import run
from archguard.errors import ArchguardError, ConfigError
from archguard.farm.manifest import Cell, Manifest, Package, load_manifest
from archguard.farm.plan import Job, plan, torch_version

STATE = ".farm"  # SITE/.farm: environments and job records


@dataclass
class Outcome:
    """One job's result, as recorded in SITE/.farm/jobs/<id>.json."""

    job: str
    package: str
    cell: str
    status: str  # "built", "skipped", "failed", "kept" (an earlier run's), "served"
    wheels: list[str] = field(default_factory=list)
    why: str = ""
    log: str = ""
    seconds: float = 0.0
    details: list[dict[str, object]] = field(default_factory=list)  # archguard wheel's JSON

    def as_json(self) -> dict[str, object]:
        return {
            "job": self.job,
            "package": self.package,
            "cell": self.cell,
            "status": self.status,
            "wheels": self.wheels,
            "why": self.why,
            "log": self.log,
            "seconds": round(self.seconds, 1),
            "details": self.details,
        }


def _say(text: str) -> None:
    print(f"archguard farm: {text}", file=sys.stderr, flush=True)


def _uv() -> str:
    here = Path(sys.executable).parent / "uv"
    found = str(here) if here.is_file() else shutil.which("uv")
    if not found:
        raise ConfigError(
            "archguard farm run makes each cell's environment with uv, which is not "
            "installed: pip install uv."
        )
    return found


def archguard_requirement() -> str:
    """What each cell's environment installs for archguard: this archguard (its source
    tree when installed from one, else its release), with the farm extra."""
    dist = metadata.distribution("torch-archguard")
    direct = dist.read_text("direct_url.json")
    if direct:
        url = json.loads(direct).get("url", "")
        if url.startswith("file://"):
            return f"torch-archguard[farm] @ {url}"
    return f"torch-archguard[farm]=={dist.version}"


def _own_code() -> str:
    """A digest of this archguard's own modules: a cell made from a source tree is made again
    when the tree's code changed (its requirement string stays the same)."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".yml", ".toml", ".json"):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def cell_environment(cell: Cell, site: Path) -> Path:
    """The cell's Python, in an environment made once and reused while the cell is the
    same (uv's cache makes the next cell's torch a link, not a download)."""
    root = site / STATE / "envs" / cell.name
    python = root / "bin" / "python"
    wanted = json.dumps(
        {**cell.as_json(), "archguard": archguard_requirement(), "code": _own_code()},
        sort_keys=True,
    )
    marker = root / "archguard-cell.json"
    if python.is_file() and marker.is_file() and marker.read_text() == wanted:
        return python
    if cell.interpreter and not Path(cell.interpreter).is_file():
        raise ConfigError(
            f"cell {cell.name}: interpreter = {cell.interpreter!r} is not on this machine; "
            f"give the path of a Python {cell.python} here, or leave interpreter out (uv then "
            "finds one on PATH)."
        )
    uv = _uv()
    _say(f"cell {cell.name}: making its environment (Python {cell.python}, {cell.torch})")
    if root.exists():
        shutil.rmtree(root)
    try:
        _run(
            [uv, "venv", "--seed", "--python", cell.interpreter or cell.python, str(root)],
            f"uv venv for {cell.name}",
        )
    except ConfigError as exc:
        if cell.interpreter:
            raise
        raise ConfigError(
            f"{exc}\nuv found no Python {cell.python} (it looks on PATH) and could not fetch "
            f'one: name it in the cell\'s table, interpreter = "/path/to/python{cell.python}".'
        ) from None
    made = run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], ConfigError
    ).stdout.strip()
    if made != cell.python:
        raise ConfigError(
            f"cell {cell.name}: its environment's Python is {made or 'not runnable'}, not the "
            f"cell's python = {cell.python!r} (interpreter = {cell.interpreter!r})."
        )
    where = [f"--index-url={cell.index_url}"] if cell.index_url else []
    where += [f"--extra-index-url={u}" for u in cell.extra_index_urls]
    where += [f"--find-links={u}" for u in cell.find_links]
    _run(
        [
            uv,
            "pip",
            "install",
            "--python",
            str(python),
            *where,
            *cell.installer_options,
            str(cell.torch),
            archguard_requirement(),
            "setuptools>=77",
            "wheel",
            "ninja",
        ],
        f"uv pip install for {cell.name}",
    )
    marker.write_text(wanted)
    return python


def _run(argv: list[str], what: str) -> None:
    proc = run(argv, ConfigError, None)  # uv fetching a cell's torch: no time limit
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise ConfigError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string is a JSON string


def config_file(package: Package, where: Path) -> Path | None:
    """The package's ``[tool.archguard]`` table as a file (ARCHGUARD_CONFIG), or None."""
    if not package.raw_config:
        return None
    lines = [
        "[tool.archguard]",
        *(f"{k} = {_toml_value(v)}" for k, v in package.raw_config.items()),
    ]
    _write_atomic(where, "\n".join(lines) + "\n")
    return where


def run_job(job: Job, python: Path, options: RunOptions, extra_env: dict[str, str]) -> Outcome:
    """One job: its source (checked against its pin; ``name==version`` fetched by the cell's
    pip), then archguard wheel in its cell."""
    cell, package = job.cell, job.package
    site, policy = options.site.resolve(), options.policy
    logs = site / cell.name / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{package.name}.log"
    outcome = Outcome(job.id, package.name, cell.name, "failed", log=str(log.relative_to(site)))
    started = time.monotonic()
    try:
        tree = source_tree(package.source, package.sha256, python=str(python), env=extra_env)
    except ArchguardError as exc:
        outcome.why = exc.message
        log.write_text(exc.message + "\n")
        return outcome
    # the job's own folder: jobs side by side never see each other's wheels (archguard wheel
    # tells its wheels by what appeared in its folder); published wheels move to the cell's
    own = site / STATE / "jobs" / job.id / "wheels"
    shutil.rmtree(own, ignore_errors=True)
    argv = [
        str(python),
        "-m",
        "archguard",
        "wheel",
        str(tree),
        "-w",
        str(own),
        "--format",
        "json",
    ]
    config = config_file(package, site / STATE / "jobs" / job.id / "config.toml")
    if config is not None:
        argv += ["--config", str(config)]
    if options.repair:
        argv.append("--repair")
    env = {**os.environ, **extra_env}
    if policy:
        env["ARCHGUARD_POLICY"] = str(Path(policy).resolve())
    with log.open("w") as out:
        proc = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=out, text=True, env=env, check=False
        )
    outcome.seconds = time.monotonic() - started
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        outcome.why = f"archguard wheel exited {proc.returncode} without its report; see the log"
        return outcome
    builds = report.get("builds") or [{}]
    outcome.details = list(builds[0].get("wheels") or [])
    outcome.wheels = [Path(str(w["wheel"])).name for w in outcome.details if w.get("ok")]
    if report.get("ok"):
        outcome.status = "built"
        _publish(outcome, site / cell.name / "wheels")
    else:
        problems = builds[0].get("problems") or [report.get("error", {}).get("message", "")]
        outcome.why = "; ".join(str(p) for p in problems if p) or "see the log"
    return outcome


def _publish(outcome: Outcome, wheels: Path) -> None:
    """The job's verified wheels moved into its cell's folder (the index lists them)."""
    wheels.mkdir(parents=True, exist_ok=True)
    for w in outcome.details:
        built = Path(str(w.get("wheel", "")))
        if w.get("ok") and built.is_file():
            built.replace(wheels / built.name)
            w["wheel"] = str(wheels / built.name)


def _record(site: Path, outcome: Outcome) -> None:
    """SITE/.farm/jobs/<id>.json: what a later run resumes from and ``--assemble`` reads."""
    _write_atomic(
        site / STATE / "jobs" / f"{outcome.job}.json", json.dumps(outcome.as_json(), indent=2)
    )


def _recorded(site: Path, job: Job) -> Outcome | None:
    path = site / STATE / "jobs" / f"{job.id}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    wheels = [site / job.cell.name / "wheels" / w for w in data.get("wheels", [])]
    if (
        data.get("status") not in ("built", "kept", "served")
        or not wheels
        or not all(w.is_file() for w in wheels)
    ):
        return None
    return Outcome(
        job.id,
        job.package.name,
        job.cell.name,
        "kept",
        data["wheels"],
        log=data.get("log", ""),
        details=list(data.get("details") or []),
    )


_SERVES = re.compile(r"^torch>=([0-9.]+) on Python>=3\.(\d+)$")


@dataclass(frozen=True)
class Serving:
    """A stable-ABI, abi3 wheel one cell built, and what it serves."""

    wheel: Path
    cell: str
    cuda: CudaVersion
    torch_floor: str
    python_floor: int  # 3.X's X
    arch_list: str | None  # the list it was built for


def servings(outcome: Outcome, site: Path, job: Job) -> list[Serving]:
    out = []
    cell = job.cell
    for w in outcome.details:
        match = _SERVES.match(str(w.get("serves") or ""))
        if match and w.get("ok"):
            wheel = site / cell.name / "wheels" / Path(str(w["wheel"])).name
            out.append(Serving(wheel, cell.name, cell.cuda, match[1], int(match[2]), job.arch_list))
    return out


def served_by(job: Job, offers: Sequence[Serving]) -> Serving | None:
    """A wheel another cell built that serves this job's cell: same CUDA major, a torch at
    or above its floor, a Python at or above its floor."""
    torch = _version_tuple(torch_version(job.cell))
    python = int(job.cell.python.split(".")[1])
    for offer in offers:
        if (
            offer.cuda.major == job.cell.cuda.major
            and offer.cuda <= job.cell.cuda  # a newer runtime runs it, never an older one
            and offer.arch_list == job.arch_list
            and torch >= _version_tuple(offer.torch_floor)
            and python >= offer.python_floor
            and offer.wheel.is_file()
        ):
            return offer
    return None


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _failed_record(site: Path, job: Job) -> Outcome:
    """For ``--assemble``: the job's recorded failure (its cause and log, from the runner
    that ran it), or that no job built it."""
    try:
        data = json.loads((site / STATE / "jobs" / f"{job.id}.json").read_text())
    except (OSError, ValueError):
        data = {"why": "not built by any job"}
    return Outcome(
        job.id,
        job.package.name,
        job.cell.name,
        "failed",
        why=str(data.get("why") or "failed"),
        log=str(data.get("log") or ""),
    )


@dataclass
class RunOptions:
    site: Path
    only: str | None = None
    policy: str | None = None
    repair: bool = True
    assemble: bool = False  # build nothing: the indexes and the page from the jobs' records
    jobs: int = 1  # packages built at once


def selected(jobs: Sequence[Job], only: str | None) -> list[Job]:
    if only is None:
        return list(jobs)
    chosen = [j for j in jobs if only in (j.id, j.package.name, j.cell.name)]
    if not chosen:
        names = sorted({j.package.name for j in jobs} | {j.cell.name for j in jobs})
        raise ConfigError(
            f"farm run --only {only!r}: no job, package or cell of that name ({', '.join(names)})."
        )
    return chosen


class _Run:
    """One ``farm run``: its options, the cells' environments (each made once, under a lock,
    since packages run side by side with ``--jobs``) and the progress lines."""

    def __init__(self, options: RunOptions, manifest: Manifest, total: int) -> None:
        self.options = options
        self.manifest = manifest
        self.site = options.site.resolve()
        self.total = total
        self.done: dict[int, Outcome] = {}  # job number -> its outcome, as the run goes
        self.pythons: dict[str, Path] = {}
        self.locks: dict[str, threading.Lock] = {}
        self.broken: dict[str, str] = {}  # cell -> why its environment could not be made
        self.guard = threading.Lock()
        self.stop = threading.Event()  # set on Ctrl-C: no job starts after it

    def python(self, cell: Cell) -> Path:
        """The cell's Python; a cell whose environment could not be made is tried once per
        run (its error is in SITE/<cell>/logs/environment.log) and fails its other jobs."""
        with self.guard:
            lock = self.locks.setdefault(cell.name, threading.Lock())
        with lock:
            if cell.name in self.broken:
                raise ConfigError(self.broken[cell.name])
            if cell.name not in self.pythons:
                try:
                    self.pythons[cell.name] = cell_environment(cell, self.site)
                except ArchguardError as exc:
                    log = self.site / cell.name / "logs" / "environment.log"
                    _write_atomic(log, exc.message + "\n")
                    last = exc.message.strip().splitlines()[-1].strip()
                    self.broken[cell.name] = (
                        f"cell {cell.name}: its environment could not be made (see "
                        f"{log.relative_to(self.site)}): {last}"
                    )
                    raise ConfigError(self.broken[cell.name]) from None
            return self.pythons[cell.name]

    def env(self, job: Job) -> dict[str, str]:
        """What the job's build adds to the environment: its package's switches, and with
        ``--jobs N`` its share of the cores as MAX_JOBS (unless the package or the caller
        sets one)."""
        extra = dict(job.package.env)
        if self.options.jobs > 1 and "MAX_JOBS" not in extra and "MAX_JOBS" not in os.environ:
            extra["MAX_JOBS"] = str(max(1, (os.cpu_count() or 1) // self.options.jobs))
        return extra

    def group(self, jobs: Sequence[tuple[int, Job]]) -> list[tuple[int, Outcome]]:
        """One source's jobs (one package's, or several packages' that share a source, so
        that a source is fetched, unpacked and built by one worker at a time), in the plan's
        order: a stable-ABI wheel one cell builds can serve the cells after it."""
        offers: dict[str, list[Serving]] = {}  # package -> its stable-ABI abi3 wheels
        out = []
        for number, job in jobs:
            if self.stop.is_set():
                break
            head = f"[{number}/{self.total}] {job.package.name} in {job.cell.name}"
            try:
                outcome = self.job(job, head, offers.setdefault(job.package.name, []))
            except Exception as exc:  # one job's failure, whatever it is, stays that job's
                why = f"archguard farm failed on this job: {type(exc).__name__}: {exc}"
                _say(f"{head}: FAILED: {why}")
                outcome = Outcome(job.id, job.package.name, job.cell.name, "failed", why=why)
                try:  # --assemble (another runner) names it
                    _record(self.site, outcome)
                except OSError as error:
                    _say(f"{head}: its record could not be written ({error})")
            out.append((number, outcome))
            self.progress(number, outcome)
        return out

    def progress(self, number: int, outcome: Outcome) -> None:
        """The page follows the run, job by job (the indexes are written at its end, from
        every outcome, kept ones included); a page that cannot be written is said, never a
        reason to stop building."""
        with self.guard:
            self.done[number] = outcome
            if self.options.assemble:
                return
            try:
                write_page(self.site, self.manifest, list(self.done.values()), self.total)
            except OSError as exc:
                _say(f"the page could not be written ({exc}); the run goes on")

    def job(self, job: Job, head: str, offers: list[Serving]) -> Outcome:
        site = self.site
        if job.arch_list is None:
            _say(f"{head}: {job.skipped}")
            return Outcome(job.id, job.package.name, job.cell.name, "skipped", why=job.skipped)
        kept = _recorded(site, job)
        if kept is not None:
            _say(f"{head}: already built ({', '.join(kept.wheels)}): not built again")
            return kept
        offer = served_by(job, offers)
        if offer is not None:
            wheels = site / job.cell.name / "wheels"
            wheels.mkdir(parents=True, exist_ok=True)
            shutil.copy2(offer.wheel, wheels / offer.wheel.name)
            why = f"served by {offer.wheel.name} from cell {offer.cell} (stable ABI, abi3)"
            served = Outcome(
                job.id, job.package.name, job.cell.name, "served", [offer.wheel.name], why=why
            )
            _record(site, served)
            _say(f"{head}: not built: {why}")
            return served
        if self.options.assemble:
            return _failed_record(site, job)
        try:
            python = self.python(job.cell)
        except ArchguardError as exc:
            _say(f"{head}: FAILED: {exc.message}")
            log = f"{job.cell.name}/logs/environment.log"
            failed = Outcome(
                job.id, job.package.name, job.cell.name, "failed", why=exc.message, log=log
            )
            _record(site, failed)  # --assemble (another runner) names the cause
            return failed
        _say(f"{head}: building ({job.arch_list})")
        outcome = run_job(job, python, self.options, self.env(job))
        offers.extend(servings(outcome, site, job))
        _record(site, outcome)
        _say(
            f"{head}: {outcome.status} in {outcome.seconds:.0f} s"
            + (f": {outcome.why}" if outcome.why else "")
        )
        return outcome


def run_farm(manifest_path: Path, options: RunOptions) -> tuple[int, str]:
    """Run every selected job, ``options.jobs`` packages at once; (exit status, the summary)."""
    manifest = load_manifest(manifest_path)
    jobs = selected(plan(manifest, options.policy), options.only)
    farm = _Run(options, manifest, len(jobs))
    by_source: dict[str, list[tuple[int, Job]]] = {}
    for number, job in enumerate(jobs, 1):
        by_source.setdefault(job.package.source, []).append((number, job))
    groups = list(by_source.values())
    if options.jobs == 1:
        done = [pair for group in groups for pair in farm.group(group)]
    else:
        pool = ThreadPoolExecutor(max_workers=options.jobs)
        try:
            done = [pair for part in pool.map(farm.group, groups) for pair in part]
        except KeyboardInterrupt:
            farm.stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown()
    outcomes = [outcome for _, outcome in sorted(done, key=lambda pair: pair[0])]
    publish_site(farm.site, manifest, outcomes)
    return summary(outcomes)


def publish_site(site: Path, manifest: Manifest, outcomes: Sequence[Outcome]) -> None:
    """Each cell's index and the page, from every job's outcome."""
    published = {
        (o.cell, w) for o in outcomes if o.status in ("built", "kept", "served") for w in o.wheels
    }
    for cell in manifest.cells:
        write_index(site, cell.name, {w for c, w in published if c == cell.name})
    write_page(site, manifest, outcomes)


def summary(outcomes: Sequence[Outcome]) -> tuple[int, str]:
    counts = {
        s: sum(1 for o in outcomes if o.status == s)
        for s in ("built", "kept", "served", "skipped", "failed")
    }
    lines = [
        f"archguard farm run: {counts['built']} built, {counts['kept']} already built (not built "
        f"again), {counts['served']} served by another cell's stable-ABI wheel, "
        f"{counts['skipped']} skipped, {counts['failed']} failed"
    ]
    lines += [
        f"  FAILED {o.package} in {o.cell}: {o.why}" + (f" (log: {o.log})" if o.log else "")
        for o in outcomes
        if o.status == "failed"
    ]
    return (1 if counts["failed"] else 0), "\n".join(lines) + "\n"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def write_index(site: Path, cell: str, published: set[str]) -> None:
    """SITE/<cell>/simple/: a PEP 503 index of the cell's published wheels (those of jobs
    that built and verified; a failed job's wheel stays out), written whole in a directory of
    its own and then renamed into place: a reader never sees a partial index (for an instant,
    between the two renames, none)."""
    folder = site / cell / "wheels"
    wheels = (
        sorted(p for p in folder.glob("*.whl") if p.name in published) if folder.is_dir() else []
    )
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        projects.setdefault(_normalized(wheel.name.split("-", 1)[0]), []).append(wheel)
    fresh = site / cell / ".simple.partial"
    if fresh.exists():
        shutil.rmtree(fresh)
    fresh.mkdir(parents=True)
    links = "".join(f'<a href="{p}/">{p}</a><br>\n' for p in sorted(projects))
    (fresh / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
    for project, files in projects.items():
        (fresh / project).mkdir()
        rows = "".join(
            f'<a href="../../wheels/{html.escape(f.name)}#sha256={file_sha256(f)}">'
            f"{html.escape(f.name)}</a><br>\n"
            for f in files
        )
        (fresh / project / "index.html").write_text(
            f"<!DOCTYPE html>\n<html><body>\n{rows}</body></html>\n"
        )
    target = site / cell / "simple"
    old = site / cell / ".simple.old"
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        target.rename(old)
    fresh.rename(target)
    if old.exists():
        shutil.rmtree(old)


def tiers(targets: Sequence[str], cuda: CudaVersion) -> dict[Tier, list[str]]:
    """The known devices (capabilities) of the cell's CUDA by how a wheel holding
    ``targets`` runs on them: native, PTX JIT only, or not at all."""
    held = (
        parse_targets(list(targets), "the job's record", known=known_arches())
        if targets
        else Targets(frozenset(), frozenset())
    )
    out: dict[Tier, list[str]] = {tier: [] for tier in Tier}
    for row in coverage(held, known_devices((cuda.major, cuda.minor))):
        out[row.tier].append(row.device.cc_text)
    return out


def _wheel_html(cell: Cell, name: str, details: Sequence[dict[str, object]]) -> str:
    """One published wheel on the page: its link, whether it verified, its coverage tiers,
    what it binds to (its torch pin and why) and its platform."""
    link = f'<br><a href="{cell.name}/wheels/{html.escape(name)}">{html.escape(name)}</a>'
    w = next((d for d in details if Path(str(d.get("wheel", ""))).name == name), None)
    if w is None:  # served by another cell's wheel: its facts are on that cell's entry
        return link
    held = w.get("targets")
    targets = [str(t) for t in held] if isinstance(held, list) else []
    by_tier = tiers(targets, cell.cuda)
    verified = "verified" if w.get("ok") else "NOT verified"
    lines = [
        f"{verified}: {' '.join(targets) or 'no CUDA code'}",
        f"native on {', '.join(by_tier[Tier.NATIVE]) or 'no known GPU'}",
        f"PTX JIT only on {', '.join(by_tier[Tier.JIT]) or 'none'}",
        f"runs on none of {', '.join(by_tier[Tier.DEAD]) or 'none'}",
    ]
    if w.get("label_why"):
        pin = f"requires {w['pin']}: " if w.get("pin") else ""
        lines.append(f"ABI: {pin}{w['label_why']}")
    elif w.get("label_note"):
        lines.append(f"ABI: {w['label_note']}")
    if w.get("serves"):
        lines.append(f"serves {w['serves']} (stable ABI, abi3)")
    if w.get("platform"):
        lines.append(f"platform {w['platform']}")
    rows = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f'{link}<ul class="facts">{rows}</ul>'


def write_page(
    site: Path, manifest: Manifest, outcomes: Sequence[Outcome], running: int | None = None
) -> None:
    """SITE/index.html: every package x cell, built or why not, with each wheel's facts
    (verified, coverage tiers, ABI) and its log; while a run goes (``running``: its number of
    jobs), how many are done, and "waiting" for the others."""
    by = {(o.package, o.cell): o for o in outcomes}
    absent = "not run" if running is None else "waiting"
    head = "".join(f"<th>{html.escape(c.name)}</th>" for c in manifest.cells)
    rows = []
    for package in manifest.packages:
        cells = []
        for cell in manifest.cells:
            o = by.get((package.name, cell.name))
            if o is None:
                cells.append(f"<td>{absent}</td>")
                continue
            text = {
                "built": "built",
                "kept": "built (earlier run)",
                "skipped": "skipped",
                "served": "served by another cell",
                "failed": "FAILED",
            }[o.status]
            wheels = "".join(_wheel_html(cell, w, o.details) for w in o.wheels)
            why = f"<br>{html.escape(o.why)}" if o.why else ""
            log = f'<br><a href="{html.escape(o.log)}">log</a>' if o.log else ""
            cells.append(f'<td class="{o.status}">{text}{wheels}{why}{log}</td>')
        rows.append(f"<tr><th>{html.escape(package.name)}</th>{''.join(cells)}</tr>")
    progress = (
        ""
        if running is None
        else f"<p>Running: {len(outcomes)} of {running} jobs done (this page follows the run).</p>"
    )
    page = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>archguard farm</title>'
        "<style>td,th{border:1px solid #999;padding:4px;vertical-align:top}"
        "ul.facts{margin:2px 0;padding-left:16px;font-size:90%}"
        ".built,.kept,.served{background:#dfd}.failed{background:#fdd}.skipped{background:#eee}</style>"
        f"</head><body><h1>archguard farm: {html.escape(str(manifest.path.name))}</h1>{progress}"
        f"<table><tr><th>package</th>{head}</tr>{''.join(rows)}</table>"
        "<p>Each cell's index: <code>pip install --index-url "
        "file://SITE/&lt;cell&gt;/simple NAME</code></p>"
        "</body></html>\n"
    )
    _write_atomic(site / "index.html", page)
