"""Running one job: its source (a tree copied to a path fixed by its content, an sdist
checked against its pin and unpacked at its stable path, a release fetched by the cell's
pip; each a directory of the job's own while it builds), its ``[tool.archguard]`` table as a
file, then ``archguard wheel`` in its cell's environment; its
verified wheels moved into the store. Nothing is published here: the caller writes the
outcome as the job's ledger, and the site is published from the ledgers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from archguard._fs import SOURCE_DATE_EPOCH, own_directory
from archguard.binaries.facts import WheelFacts
from archguard.detect.cachestore import mark_used
from archguard.detect.fetch import cache_root, checked_out, is_release
from archguard.errors import ArchguardError, ExtraMissing
from archguard.farm.container import CellContainer
from archguard.farm.identity import JUNK_DIRS
from archguard.farm.ledger import STATE, Outcome, Status, write_atomic
from archguard.farm.manifest import Package
from archguard.farm.plan import Job
from archguard.farm.publish import store_wheel


@dataclass
class JobRun:
    """What a job needs from its run: the site, the farm's policy, the flags."""

    site: Path
    policy: str | None
    repair: bool
    variants: bool = False  # each verified wheel also as a wheel variant (its copy stored)


def config_file(package: Package, cache: Path) -> Path | None:
    """The package's ``[tool.archguard]`` table as a file (ARCHGUARD_CONFIG), written by
    tomli-w under ``cache``, named by its content (``farm-config/<sha256>.toml``: the same
    table is the same path from any site, and the wheel's record that names it the same
    bytes); a relative ``policy`` made absolute against the manifest (the table was checked
    there), never re-read against this file's folder."""
    if not package.raw_config:
        return None
    try:
        import tomli_w  # noqa: PLC0415 (the farm extra's: only a farm run needs it)
    except ImportError:
        raise ExtraMissing(
            "archguard farm run writes each package's [tool.archguard] table with tomli-w, "
            "which is not installed: pip install 'torch-archguard[farm]'."
        ) from None
    table: dict[str, Any] = dict(package.raw_config)
    if package.config is not None and package.config.policy is not None:
        table["policy"] = str(package.config.policy)
    text = tomli_w.dumps({"tool": {"archguard": table}})
    where = cache / "farm-config" / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.toml"
    if not where.is_file() or where.read_text() != text:
        where.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(where, text)
    mark_used(where)  # no prune removes it while this run lives
    return where


@contextlib.contextmanager
def _tree_copy(tree: Path, digest: str) -> Iterator[Path]:
    """A source tree copied, afresh, to ``<cache>/src/tree-<digest>/<its name>``, this
    build's alone until the block ends: what is built is exactly what was digested (an edit
    during the build changes nothing; linked files and directories are copied as what they
    point at), and the same content is built at the same path from any checkout, so a
    compile cache hits. Build outputs stay behind; ``.git`` and hidden files come along (a
    version plugin reads them).

    The build writes into its copy (pip builds a directory in place), so the copy is a
    directory of its own (:func:`archguard._fs.own_directory`), not a content-addressed one
    that every build of the digest shares: a second farm run building the same digest at the
    same time (another site, another checkout, another runner on this ``~/.cache``) copies to
    ``tree-<digest>.2`` instead of removing the first one's tree while it links. Keyed by the
    lock and not by the job: the same job runs in two sites at once when two checkouts of
    one manifest do."""
    with own_directory(cache_root() / "src" / f"tree-{digest[:16]}") as where:
        if where.exists():
            shutil.rmtree(where)
        junk = [d for d in JUNK_DIRS if d != ".git"]
        ignore = shutil.ignore_patterns(*junk, "*.egg-info", "*.pyc", "*.so", "*.o")
        target = where / tree.name
        shutil.copytree(tree, target, ignore=ignore, symlinks=False, ignore_dangling_symlinks=True)
        yield target


@contextlib.contextmanager
def _source(job: Job, python: Path | None, env: Mapping[str, str]) -> Iterator[tuple[Path, str]]:
    """The directory to build, this job's alone until the block ends, and, for a release,
    the sha256 prefix of the sdist it fetched (its unpacked path, ``<cache>/src/<prefix>``),
    by ``python``'s pip (None: this archguard's, for a cell whose Python runs in its
    container). Both under archguard's cache, which a cell's container mounts."""
    package = job.package
    digest = job.inputs.get("source", {}).get("tree")
    if isinstance(digest, str):
        with _tree_copy(Path(package.source), digest) as tree:
            yield tree, ""
        return
    pip = str(python) if python is not None else None
    pinned_by = f"sha256 = of [[package]] {package.name!r} in the farm manifest"
    with checked_out(
        package.source, package.sha256, python=pip, env=env, pinned_by=pinned_by
    ) as out:
        yield out.tree, (out.sha256[:16] if is_release(package.source) else "")


def _store_verified(outcome: Outcome, site: Path, variants: bool) -> None:
    """Each verified wheel of the job (and, with ``variants``, its wheel-variant copy)
    moved into the store, named in the outcome with its sha256."""
    stored = []
    for facts in outcome.details:
        renamed = facts
        for key in ("wheel", "variant") if variants else ("wheel",):
            built = Path(str(getattr(facts, key) or ""))
            if facts.ok and built.is_file():
                name, sha = store_wheel(site, built)
                outcome.wheels.append(name)
                outcome.sha256[name] = sha
                renamed = (
                    replace(renamed, wheel=name)
                    if key == "wheel"
                    else replace(renamed, variant=name)
                )
        stored.append(renamed)
    outcome.details = stored


def run_job(
    job: Job,
    python: Path,
    options: JobRun,
    extra_env: dict[str, str],
    container: CellContainer | None = None,
) -> Outcome:
    """One job: its source (its own directory while it builds), then archguard wheel in its
    cell (in the cell's ``container`` where it names one); its verified wheels stored."""
    site = options.site
    log = _log(site, job)
    log.parent.mkdir(parents=True, exist_ok=True)
    outcome = Outcome(
        job.id, job.package.name, job.cell.name, Status.FAILED, log=str(log.relative_to(site))
    )
    started = time.monotonic()
    with contextlib.ExitStack() as held:
        try:
            fetcher = python if container is None else None
            tree, outcome.fetched = held.enter_context(_source(job, fetcher, extra_env))
        except (ArchguardError, OSError) as exc:
            outcome.why = exc.message if isinstance(exc, ArchguardError) else str(exc)
            log.write_text(outcome.why + "\n")
            return outcome
        proc = _build(job, tree, python, options, extra_env, container=container)
        outcome.seconds = time.monotonic() - started
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            outcome.why = (
                f"archguard wheel exited {proc.returncode} without its report; see the log"
            )
            return outcome
        builds = report.get("builds") or [{}]
        try:
            outcome.details = [WheelFacts.from_json(w) for w in builds[0].get("wheels") or []]
        except ValueError as exc:
            outcome.why = f"archguard wheel's report is not what this archguard reads ({exc})"
            return outcome
        if not report.get("ok"):
            problems = builds[0].get("problems") or [report.get("error", {}).get("message", "")]
            outcome.why = "; ".join(str(p) for p in problems if p) or "see the log"
            return outcome
        _store_verified(outcome, site, options.variants)
    outcome.status = Status.BUILT if outcome.wheels else Status.FAILED
    if not outcome.wheels:
        outcome.why = "archguard wheel reported success but left no verified wheel"
    return outcome


def _log(site: Path, job: Job) -> Path:
    return site / job.cell.name / "logs" / f"{job.package.name}.log"


def _build(  # noqa: PLR0913 - the job, its tree, its cell's Python and container, the run's
    job: Job,
    tree: Path,
    python: Path,
    options: JobRun,
    extra_env: dict[str, str],
    *,
    container: CellContainer | None = None,
) -> subprocess.CompletedProcess[str]:
    """``archguard wheel`` of ``tree`` in the job's cell, its stderr in the job's log; in
    the cell's ``container``, with the job's environment and the files it names mounted."""
    site = options.site
    # the job's own folder: jobs side by side never see each other's wheels (archguard wheel
    # tells its wheels by what appeared in its folder); verified wheels move to the store
    own = site / STATE / "jobs" / job.id / "wheels"
    shutil.rmtree(own, ignore_errors=True)
    argv = [str(python), "-m", "archguard", "wheel", str(tree), "-w", str(own)]
    argv += ["--format", "json"]
    config = config_file(job.package, cache_root())
    if config is not None:
        argv += ["--config", str(config)]
    if options.repair:
        argv.append("--repair")
    for requirement in job.package.build_requires:
        argv += ["--build-requires", requirement]
    own_env = {"SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH, **extra_env}
    if options.variants:
        own_env["ARCHGUARD_WHEEL_VARIANT"] = "1"
    if options.policy:
        own_env["ARCHGUARD_POLICY"] = str(Path(options.policy).resolve())
    env = {**os.environ, **own_env}
    if container is not None:  # the files the job names, where the container sees them
        named = [own_env.get("ARCHGUARD_POLICY"), str(tree)]
        if job.package.config is not None and job.package.config.policy is not None:
            named.append(str(job.package.config.policy))
        argv = container.argv(argv, own_env, [n for n in named if n])
    with _log(site, job).open("w") as out:
        return subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=out, text=True, env=env, check=False
        )
