"""``archguard farm run MANIFEST -o SITE``: the embedded engine on one machine.

One run holds SITE at a time (:func:`archguard.farm.publish.site_lock`). Each job runs in its
cell's environment (:mod:`archguard.farm.envs`) through ``archguard wheel --repair``
(:mod:`archguard.farm.jobs`); its ledger (:mod:`archguard.farm.ledger`) holds every input of
its build and its wheels' sha256. A job whose ledger is still its own (the same inputs, the
wheels' bytes those it names) is kept, anything else is built again, so a run killed at any
moment resumes where it stopped and never republishes what it cannot vouch for. After every
job, each cell's index and the page are published from the ledgers of every job of the
manifest, whatever this run selected (``--only``)."""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from archguard.core.cuda import CudaVersion
from archguard.detect.cachestore import budget_line, cache_budget
from archguard.detect.fetch import cache_root
from archguard.detect.machine import floor_note, glibc_version
from archguard.errors import ArchguardError, CellEnvironmentFailed, ConfigError
from archguard.farm.container import CellContainer, cell_container, image_id, require_runtime
from archguard.farm.envs import cell_extras, cell_venv, held_now, uv_path
from archguard.farm.families import load_farm
from archguard.farm.identity import archguard_environment, toolkit_identity
from archguard.farm.jobs import JobRun, run_job
from archguard.farm.jobserver import at_once, run_jobserver
from archguard.farm.ledger import (
    PUBLISHED,
    USAGE,
    Outcome,
    Status,
    all_ledgers,
    kept_problem,
    ledger_path,
    read_ledger,
    say,
    store_path,
    write_atomic,
    write_ledger,
)
from archguard.farm.manifest import Cell, Manifest
from archguard.farm.page import write_page
from archguard.farm.plan import Flags, Job, here_only, plan, torch_version
from archguard.farm.publish import collect_garbage, kept_wheels, publish_indexes, site_lock
from archguard.farm.sitejson import site_data, write_site_json
from archguard.farm.usage import Meter, longest_first, uncounted

__all__ = ["Outcome", "RunOptions", "publish_site", "run_farm", "write_page"]


@dataclass(frozen=True)
class Serving:
    """A stable-ABI, abi3 wheel one cell built, and what it serves."""

    name: str
    sha256: str
    cell: str
    cuda: CudaVersion
    torch_floor: str
    python_floor: int  # 3.X's X
    arch_list: str | None  # the list it was built for
    platform: str = "x86_64"  # the machine its cell builds for: it serves that machine only


def servings(outcome: Outcome, job: Job) -> list[Serving]:
    out = []
    for w in outcome.details:
        floor, name = w.serves, w.name
        if floor and w.ok and name in outcome.sha256:
            out.append(
                Serving(
                    name,
                    outcome.sha256[name],
                    job.cell.name,
                    job.cell.cuda,
                    floor.torch,
                    floor.python,
                    job.arch_list,
                    job.cell.platform,
                )
            )
    return out


def served_by(job: Job, offers: Sequence[Serving], site: Path) -> Serving | None:
    """A wheel another cell built that serves this job's cell: same machine, same CUDA
    major, a torch at or above its floor, a Python at or above its floor."""
    if job.cell.python.endswith("t"):  # a free-threaded Python loads no abi3 wheel
        return None
    torch = Version(torch_version(job.cell))
    python = int(job.cell.python.split(".")[1])
    for offer in offers:
        if (
            offer.cuda.major == job.cell.cuda.major
            and offer.platform == job.cell.platform
            and offer.cuda <= job.cell.cuda  # a newer runtime runs it, never an older one
            and offer.arch_list == job.arch_list
            and torch >= Version(offer.torch_floor)
            and python >= offer.python_floor
            and store_path(site, offer.name, offer.sha256).is_file()
        ):
            return offer
    return None


@dataclass
class RunOptions:
    site: Path
    only: str | None = None
    policy: str | None = None
    repair: bool = True
    assemble: bool = False  # build nothing: the indexes and the page from the jobs' ledgers
    jobs: int = 1  # packages built at once
    wait: bool = False  # another run holds SITE: wait for it (default: refuse)
    in_container: bool = False  # this runner is the cells' image (farm workflow's build jobs)
    ahead: int | None = (
        None  # more jobs started while a jobserver bounds compiles (None: 1 if jobs > 1)
    )


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
    since packages run side by side with ``--jobs``), the progress lines, and the site
    published after every job."""

    def __init__(
        self,
        options: RunOptions,
        manifest: Manifest,
        jobs: Sequence[Job],
        joining: dict[str, str] | None = None,
    ) -> None:
        """``joining``: what a build adds to its environment to join the run's jobserver
        (none: each build's static share)."""
        self.options = options
        self.manifest = manifest
        self.site = options.site.resolve()
        self.jobs = list(jobs)  # every job of the manifest: what the site is published from
        self.total = len(jobs)
        self.done: dict[str, Outcome] = {}  # job id -> its outcome in this run
        self.pythons: dict[str, tuple[Path, dict[str, Any]]] = {}
        self.containers: dict[str, CellContainer | None] = {}  # cell -> where it runs
        self.toolkits: dict[tuple[str, ...], dict[str, str]] = {}
        self.locks: dict[str, threading.Lock] = {}
        self.broken: dict[str, str] = {}  # cell -> why its environment could not be made
        self.guard = threading.Lock()
        self.stop = threading.Event()  # set on Ctrl-C: no job starts after it
        self.job_run = JobRun(self.site, options.policy, options.repair, manifest.variants)
        self.joining = joining or {}

    def python(self, cell: Cell) -> tuple[Path, dict[str, Any]]:
        """The cell's Python and what its environment holds; a cell whose environment could
        not be made is tried once per run (its error is in SITE/<cell>/logs/environment.log)
        and fails its other jobs."""
        with self.guard:
            lock = self.locks.setdefault(cell.name, threading.Lock())
        with lock:
            if cell.name in self.broken:
                raise CellEnvironmentFailed(self.broken[cell.name])
            if cell.name not in self.pythons:
                try:
                    box = self.container(cell)
                    extras = cell_extras(self.manifest.variants)
                    python = cell_venv(cell, self.site, extras, box)
                    self.pythons[cell.name] = (python, dict(held_now(python, box)))
                except ArchguardError as exc:
                    log = self.site / cell.name / "logs" / "environment.log"
                    write_atomic(log, exc.message + "\n")
                    first = exc.message.strip().splitlines()[0].strip()  # the cause
                    self.broken[cell.name] = (
                        f"cell {cell.name}: its environment could not be made (see "
                        f"{log.relative_to(self.site)}): {first}"
                    )
                    raise CellEnvironmentFailed(self.broken[cell.name]) from None
            return self.pythons[cell.name]

    def container(self, cell: Cell) -> CellContainer | None:
        """Where the cell's commands run: its container, unless it names none or this
        runner is already its image (``--in-container``)."""
        if cell.name not in self.containers:
            box = None
            if not self.options.in_container:
                box = cell_container(cell, self.site, self.manifest.path, uv_path())
            self.containers[cell.name] = box
        return self.containers[cell.name]

    def env(self, job: Job) -> dict[str, str]:
        """What the job's build adds to the environment: its package's switches, and the
        run's jobserver, else with ``--jobs N`` its share of the cores as MAX_JOBS (unless
        the package or the caller sets one)."""
        extra = dict(job.package.env)
        if self.joining:
            extra = {**self.joining, **extra}
        elif self.options.jobs > 1 and "MAX_JOBS" not in extra and "MAX_JOBS" not in os.environ:
            extra["MAX_JOBS"] = str(max(1, (os.cpu_count() or 1) // self.options.jobs))
        return extra

    def inputs(self, job: Job, held: Mapping[str, Any]) -> dict[str, Any]:
        """Every input of the job's build: the plan's, the toolkit its build finds (with the
        package's switches, which may name one) and what its cell's environment holds."""
        environ = {**os.environ, **job.package.env}
        key = tuple(environ.get(k, "") for k in ("CUDA_HOME", "CUDA_PATH", "PATH"))
        box = self.containers.get(job.cell.name)
        with self.guard:
            if box is not None:  # the image's toolkit: the image, by the id it has here
                key = ("container", box.image)
                if key not in self.toolkits:
                    self.toolkits[key] = {"container": box.image, "id": image_id(box) or "unknown"}
            elif key not in self.toolkits:
                self.toolkits[key] = toolkit_identity(environ, cache_root())
            toolkit = self.toolkits[key]
        inherited = archguard_environment(environ)
        return {**job.inputs, "toolkit": toolkit, "held": dict(held), "environment": inherited}

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
                say(f"{head}: FAILED: {why}")
                outcome = Outcome(job.id, job.package.name, job.cell.name, Status.FAILED, why=why)
                self.to_ledger(outcome, attempted=False)
            out.append((number, outcome))
            self.progress(outcome)
        return out

    def to_ledger(self, outcome: Outcome, attempted: bool = True) -> None:
        """The outcome, written as its job's ledger (a skipped job has none: the plan says
        why). A failure before the build was attempted (the cell's environment, the machine)
        never replaces a ledger that publishes wheels: they stay published; the failure is
        said."""
        if outcome.status is Status.SKIPPED:
            return
        if not attempted:
            earlier = read_ledger(self.site, outcome.job)
            if earlier is not None and earlier.status in PUBLISHED:
                say(
                    f"{outcome.package} in {outcome.cell}: its earlier wheels stay published "
                    "(this failure came before its build)"
                )
                return
        try:
            write_ledger(self.site, outcome)
        except OSError as error:
            say(f"{outcome.package} in {outcome.cell}: its ledger could not be written ({error})")

    def progress(self, outcome: Outcome) -> None:
        """The site follows the run, job by job: the indexes and the page from every job's
        ledger; a site that cannot be written is said, never a reason to stop building."""
        with self.guard:
            self.done[outcome.job] = outcome
            if self.options.assemble:
                return
            try:
                running = (len(self.done), self.total)
                publish_site(self.site, self.manifest, self.jobs, self.done, running)
            except OSError as exc:
                say(f"the site could not be published ({exc}); the run goes on")

    def job(self, job: Job, head: str, offers: list[Serving]) -> Outcome:
        if job.arch_list is None:
            say(f"{head}: {job.skipped}")
            return Outcome(job.id, job.package.name, job.cell.name, Status.SKIPPED, why=job.skipped)
        if self.options.assemble:
            return _assembled(self.site, job)
        try:
            python, held = self.python(job.cell)
        except ArchguardError as exc:
            say(f"{head}: FAILED: {exc.message}")
            log = f"{job.cell.name}/logs/environment.log"
            failed = Outcome(
                job.id, job.package.name, job.cell.name, Status.FAILED, why=exc.message, log=log
            )
            self.to_ledger(failed, attempted=False)  # --assemble (another runner) names the cause
            return failed
        inputs = self.inputs(job, held)
        kept = self.kept(job, head, inputs)
        if kept is not None:
            offers.extend(servings(kept, job))
            return kept
        offer = served_by(job, offers, self.site)
        if offer is not None:
            why = f"served by {offer.name} from cell {offer.cell} (stable ABI, abi3)"
            served = Outcome(job.id, job.package.name, job.cell.name, Status.SERVED, [offer.name])
            served.why, served.sha256, served.inputs = why, {offer.name: offer.sha256}, inputs
            self.to_ledger(served)
            say(f"{head}: not built: {why}")
            return served
        say(f"{head}: building ({job.arch_list})")
        box = self.containers.get(job.cell.name)
        outcome = run_job(job, python, self.job_run, self.env(job), box)
        outcome.inputs = inputs
        offers.extend(servings(outcome, job))
        self.to_ledger(outcome)
        say(
            f"{head}: {outcome.status} in {outcome.seconds:.0f} s"
            + (f": {outcome.why}" if outcome.why else "")
        )
        return outcome

    def kept(self, job: Job, head: str, inputs: dict[str, Any]) -> Outcome | None:
        """The job's earlier ledger, where it can be kept: its inputs are the job's now and
        its wheels' bytes are those it names; otherwise why not, said, and None."""
        ledger = read_ledger(self.site, job.id)
        if ledger is None or ledger.status not in PUBLISHED:
            return None
        problem = kept_problem(self.site, ledger, inputs)
        if problem is not None:
            say(f"{head}: built again: {problem}")
            if not problem.startswith("its inputs changed"):  # its wheels: never published
                ledger_path(self.site, job.id).unlink(missing_ok=True)
            return None
        say(f"{head}: already built ({', '.join(ledger.wheels)}, sha256 checked): not built again")
        ledger.status = Status.KEPT
        return ledger


def _assembled(site: Path, job: Job) -> Outcome:
    """For ``--assemble``: the job's ledger as the runner that ran it wrote it (its wheels,
    or its cause and log), or that no job built it."""
    ledger = read_ledger(site, job.id)
    if ledger is None:
        return Outcome(
            job.id, job.package.name, job.cell.name, Status.FAILED, why="not built by any job"
        )
    if ledger.status in PUBLISHED:
        ledger.status = Status.KEPT
    return ledger


def run_farm(manifest_path: Path, options: RunOptions) -> tuple[int, str]:
    """Run every selected job, ``options.jobs`` packages at once; (exit status, the summary).
    The site is published from every job's ledger, at the end as after each job."""
    manifest = load_farm(manifest_path)
    budget = cache_budget(os.environ)  # a bad ARCHGUARD_CACHE_MAX: refused before anything
    flags = Flags(repair=options.repair)
    every = plan(manifest, options.policy, flags, cache=cache_root())
    jobs, away = selected(every, options.only), list[str]()
    if not options.assemble:  # a cell this machine cannot build: refused before anything
        jobs, away = here_only(jobs, options.only)
        for line in away:
            say(line)
    if not options.assemble and not options.in_container:  # before anything is made
        require_runtime(manifest.path, {j.cell.name: j.cell for j in jobs}.values())
    site = options.site.resolve()
    command = "archguard " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    floor = floor_note(glibc_version())
    if floor and (options.in_container or any(not j.cell.container for j in jobs)):
        say(floor)  # a cell built in its container has the image's floor
    meter = Meter()
    with site_lock(site, options.wait, command), run_jobserver(site, options.assemble) as joined:
        farm = _Run(options, manifest, every, joined.env)
        farm.total = len(jobs)
        by_source: dict[str, list[tuple[int, Job]]] = {}
        for number, job in enumerate(jobs, 1):
            by_source.setdefault(job.package.source, []).append((number, job))
        # the longest first (the duration its ledger holds, else its CUDA code's size): a run
        # does not end on one long job alone
        groups = longest_first(list(by_source.values()), all_ledgers(site))
        width, started = at_once(options.jobs, options.ahead, joined, len(groups))
        if started:
            say(started)
        if width == 1:
            done = [pair for group in groups for pair in farm.group(group)]
        else:
            workers = ThreadPoolExecutor(max_workers=width)
            try:
                done = [pair for part in workers.map(farm.group, groups) for pair in part]
            finally:  # no worker outlives the lock, whatever stopped the run
                farm.stop.set()
                workers.shutdown(wait=True, cancel_futures=True)
        outcomes = [outcome for _, outcome in sorted(done, key=lambda pair: pair[0])]
        built = [o for o in outcomes if o.status is Status.BUILT]
        usage = meter.usage(built) if built else None  # the machine's use, where it built
        used = usage.line(uncounted(os.environ)) if usage is not None else ""
        if usage is not None:  # the page shows the last run that built anything
            write_atomic(site / USAGE, json.dumps({**usage.as_json(), "line": used}))
        ledgers = publish_site(site, manifest, every, {o.job: o for o in outcomes})
        collect_garbage(site, kept_wheels(ledgers, built_ids(every)))
    status, text = summary(outcomes)
    if used:
        text += f"  {used}\n"
    text += f"  {budget_line(cache_root(), budget)}\n"  # within ARCHGUARD_CACHE_MAX, LRU first
    return status, text + "".join(f"  {line}\n" for line in [*away, *joined.said])


def publish_site(
    site: Path,
    manifest: Manifest,
    jobs: Sequence[Job],
    outcomes: Mapping[str, Outcome] | None = None,
    running: tuple[int, int] | None = None,
) -> dict[str, Outcome]:
    """Each cell's index and the page, from the ledgers of every job of the manifest
    (``outcomes``: this run's, by job id, for the page's words); the ledgers read."""
    ledgers = all_ledgers(site)
    publish_indexes(site, manifest.cells, ledgers, built_ids(jobs))
    data = site_data(site, manifest, ledgers, built_ids(jobs))
    write_site_json(site, data)
    shown = dict(outcomes or {})
    for job in jobs:
        if job.id not in shown:
            if job.arch_list is None:
                shown[job.id] = Outcome(
                    job.id, job.package.name, job.cell.name, Status.SKIPPED, why=job.skipped
                )
            elif job.id in ledgers:
                earlier = ledgers[job.id]
                if earlier.status in PUBLISHED:
                    earlier.status = Status.KEPT
                shown[job.id] = earlier
    write_page(site, manifest, list(shown.values()), running, data)
    return ledgers


def built_ids(jobs: Sequence[Job]) -> list[str]:
    """The ids of the jobs the manifest builds: a job it now skips leaves the index."""
    return [j.id for j in jobs if j.arch_list is not None]


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
        if o.status is Status.FAILED
    ]
    return (1 if counts["failed"] else 0), "\n".join(lines) + "\n"
