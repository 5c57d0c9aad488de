"""Running one job: its source (a tree copied to a content-addressed path, an sdist checked
against its pin and unpacked at its stable path, a release fetched by the cell's pip), its
``[tool.archguard]`` table as a file, then ``archguard wheel`` in its cell's environment; its
verified wheels moved into the pool. Nothing is published here: the caller records the
outcome, and the site is published from the records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archguard.errors import ArchguardError, ConfigError
from archguard.farm.identity import JUNK_DIRS
from archguard.farm.manifest import Package
from archguard.farm.plan import Job
from archguard.farm.publish import pool_wheel
from archguard.farm.records import STATE, Outcome, write_atomic
from archguard.frontend.sources import cache_root, is_release, source_tree

# Builds of the same inputs give the same bytes: the zip entries' dates (setuptools'
# bdist_wheel, wheel pack, auditwheel) from here, not the clock; 1980-01-01, zip's first day.
SOURCE_DATE_EPOCH = "315532800"


@dataclass
class JobRun:
    """What a job needs from its run: the site, the farm's policy, the flags."""

    site: Path
    policy: str | None
    repair: bool
    variants: bool = False  # each verified wheel also as a wheel variant (its copy pooled)


def config_file(package: Package, where: Path) -> Path | None:
    """The package's ``[tool.archguard]`` table as a file (ARCHGUARD_CONFIG), written by
    tomli-w; a relative ``policy`` made absolute against the manifest (the table was checked
    there), never re-read against this file's folder."""
    if not package.raw_config:
        return None
    try:
        import tomli_w  # noqa: PLC0415 (the farm extra's: only a farm run needs it)
    except ImportError:
        raise ConfigError(
            "archguard farm run writes each package's [tool.archguard] table with tomli-w, "
            "which is not installed: pip install 'torch-archguard[farm]'."
        ) from None
    table: dict[str, Any] = dict(package.raw_config)
    if package.config is not None and package.config.policy is not None:
        table["policy"] = str(package.config.policy)
    write_atomic(where, tomli_w.dumps({"tool": {"archguard": table}}))
    return where


def _tree_copy(tree: Path, digest: str) -> Path:
    """A source tree copied, afresh, to ``<cache>/src/tree-<digest>/<its name>``: what is
    built is exactly what was digested (an edit during the build changes nothing; linked
    files and directories are copied as what they point at), and the same content is built
    at the same path from any checkout, so a compile cache hits. Build outputs stay behind;
    ``.git`` and hidden files come along (a version plugin reads them)."""
    where = cache_root() / "src" / f"tree-{digest[:16]}"
    if where.exists():
        shutil.rmtree(where)
    junk = [d for d in JUNK_DIRS if d != ".git"]
    ignore = shutil.ignore_patterns(*junk, "*.egg-info", "*.pyc", "*.so", "*.o")
    target = where / tree.name
    shutil.copytree(tree, target, ignore=ignore, symlinks=False, ignore_dangling_symlinks=True)
    return target


def _source(job: Job, python: Path, env: Mapping[str, str]) -> tuple[Path, str]:
    """The directory to build, and, for a release, the sha256 prefix of the sdist it
    fetched (its unpacked path, ``<cache>/src/<prefix>/<top>``)."""
    package = job.package
    digest = job.inputs.get("source", {}).get("tree")
    if isinstance(digest, str):
        return _tree_copy(Path(package.source), digest), ""
    tree = source_tree(package.source, package.sha256, python=str(python), env=env)
    return tree, (tree.parent.name if is_release(package.source) else "")


def _pool_verified(outcome: Outcome, site: Path, variants: bool) -> None:
    """Each verified wheel of the job (and, with ``variants``, its wheel-variant copy)
    moved into the pool, named in the outcome with its sha256."""
    for w in outcome.details:
        for key in ("wheel", "variant") if variants else ("wheel",):
            built = Path(str(w.get(key) or ""))
            if w.get("ok") and built.is_file():
                name, sha = pool_wheel(site, built)
                outcome.wheels.append(name)
                outcome.sha256[name] = sha
                w[key] = name


def run_job(job: Job, python: Path, options: JobRun, extra_env: dict[str, str]) -> Outcome:
    """One job: its source, then archguard wheel in its cell; its verified wheels pooled."""
    cell, package, site = job.cell, job.package, options.site
    logs = site / cell.name / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{package.name}.log"
    outcome = Outcome(job.id, package.name, cell.name, "failed", log=str(log.relative_to(site)))
    started = time.monotonic()
    try:
        tree, fetched = _source(job, python, extra_env)
    except (ArchguardError, OSError) as exc:
        outcome.why = exc.message if isinstance(exc, ArchguardError) else str(exc)
        log.write_text(outcome.why + "\n")
        return outcome
    outcome.fetched = fetched
    # the job's own folder: jobs side by side never see each other's wheels (archguard wheel
    # tells its wheels by what appeared in its folder); verified wheels move to the pool
    own = site / STATE / "jobs" / job.id / "wheels"
    shutil.rmtree(own, ignore_errors=True)
    argv = [str(python), "-m", "archguard", "wheel", str(tree), "-w", str(own)]
    argv += ["--format", "json"]
    config = config_file(package, site / STATE / "jobs" / job.id / "config.toml")
    if config is not None:
        argv += ["--config", str(config)]
    if options.repair:
        argv.append("--repair")
    env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH, **extra_env}
    if options.variants:
        env["ARCHGUARD_WHEEL_VARIANT"] = "1"
    if options.policy:
        env["ARCHGUARD_POLICY"] = str(Path(options.policy).resolve())
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
    if not report.get("ok"):
        problems = builds[0].get("problems") or [report.get("error", {}).get("message", "")]
        outcome.why = "; ".join(str(p) for p in problems if p) or "see the log"
        return outcome
    _pool_verified(outcome, site, options.variants)
    outcome.status = "built" if outcome.wheels else "failed"
    if not outcome.wheels:
        outcome.why = "archguard wheel reported success but left no verified wheel"
    return outcome
