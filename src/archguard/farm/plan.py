"""``archguard farm plan MANIFEST``: the jobs (package x cell), each with its effective list
resolved for the cell's CUDA and torch from the bundled tables (nothing installed), a job id
that is a digest of every input (the source and its pin, the cell, the package's config and
switches, the policy, archguard's version), and the cells skipped with their reasons (the
manifest's, or nothing left after the clamp)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from archguard import __version__
from archguard.core.formats import PlanFormat
from archguard.core.policy import Policy, load_policy
from archguard.core.resolve import resolve
from archguard.core.toolkit import bundled_toolkit
from archguard.core.torchbuild import bundled_torch, parse_torch_version
from archguard.errors import ArchguardError, ConfigError
from archguard.farm.manifest import Cell, Manifest, Package, load_manifest

PLAN_SCHEMA = "archguard.farm-plan/1"
GITHUB_MAX_JOBS = 256  # GitHub Actions' limit per matrix


@dataclass(frozen=True)
class Job:
    id: str
    package: Package
    cell: Cell
    arch_list: str | None  # None: skipped
    skipped: str = ""  # why


def torch_version(cell: Cell) -> str:
    """The torch version a cell pins (``torch==2.13.0`` -> 2.13.0; a range: its lowest bound,
    from ``==``, ``>=`` or ``~=``)."""
    exact = [s.version for s in cell.torch.specifier if s.operator == "==="]
    exact += [s.version.rstrip(".*") for s in cell.torch.specifier if s.operator == "=="]
    if exact:
        return exact[0]
    floors = [s.version for s in cell.torch.specifier if s.operator in (">=", "~=")]
    if not floors:
        raise ConfigError(
            f"cell {cell.name}: torch requirement {cell.torch} has no lower bound (==, >= or "
            "~=): the plan needs the torch it builds against."
        )
    return str(min(Version(f) for f in floors))


def job_id(package: Package, cell: Cell, policy: Policy) -> str:
    """A digest of every input of the job's build."""
    data = {
        "source": package.source,
        "sha256": package.sha256,
        "config": package.raw_config,
        "env": package.env,
        "cell": cell.as_json(),
        "policy": policy.digest,
        "archguard": __version__,
    }
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return f"{package.name}-{cell.name}-{digest[:12]}"


def plan(manifest: Manifest, policy_path: str | None = None) -> list[Job]:
    policy = load_policy(policy_path)
    resolved: dict[tuple[str, str], tuple[str | None, str]] = {}
    jobs: list[Job] = []
    for package in manifest.packages:
        for cell in manifest.cells:
            identity = job_id(package, cell, policy)
            if cell.name in package.skip:
                jobs.append(
                    Job(identity, package, cell, None, f"skipped: {package.skip[cell.name]}")
                )
                continue
            key = (json.dumps(package.raw_config, sort_keys=True), cell.name)
            if key not in resolved:
                resolved[key] = _resolve(package, cell, policy)
            arch_list, why = resolved[key]
            jobs.append(Job(identity, package, cell, arch_list, why))
    return jobs


def _resolve(package: Package, cell: Cell, policy: Policy) -> tuple[str | None, str]:
    try:
        toolkit = bundled_toolkit(cell.cuda)
        torch = bundled_torch(cell.cuda, parse_torch_version(torch_version(cell)))
        res = resolve(policy, toolkit, torch, package.config, None).require_cubins()
        return res.effective_text, ""
    except ArchguardError as exc:  # nothing left after the clamp (empty-arch-list), ...
        return None, f"skipped: {exc.code}: {exc.message}"


def render(jobs: list[Job], fmt: PlanFormat) -> str:
    built = [j for j in jobs if j.arch_list is not None]
    if fmt == "github":
        include = [
            {
                "job": j.id,
                "package": j.package.name,
                "cell": j.cell.name,
                "python": j.cell.python,
                "torch": str(j.cell.torch),
                "cuda": j.cell.cuda.text,
                "arch_list": j.arch_list,
            }
            for j in built
        ]
        shards = [
            {"include": include[i : i + GITHUB_MAX_JOBS]}
            for i in range(0, len(include), GITHUB_MAX_JOBS)
        ]
        return json.dumps({"shards": shards or [{"include": []}]}) + "\n"
    if fmt == "json":
        return (
            json.dumps(
                {
                    "schema": PLAN_SCHEMA,
                    "jobs": [
                        {
                            "id": j.id,
                            "package": j.package.name,
                            "cell": j.cell.name,
                            "arch_list": j.arch_list,
                            "skipped": j.skipped or None,
                        }
                        for j in jobs
                    ],
                },
                indent=2,
            )
            + "\n"
        )
    lines = [
        f"archguard farm plan: {len(built)} jobs to build, {len(jobs) - len(built)} skipped",
        "",
    ]
    for j in jobs:
        what = j.arch_list if j.arch_list is not None else j.skipped
        lines.append(f"  {j.package.name:<24} {j.cell.name:<28} {what}")
        lines.append(f"  {'':<24} {'':<28} job {j.id}")
    return "\n".join(lines) + "\n"


def plan_manifest(path: Path, policy: str | None, fmt: PlanFormat) -> str:
    """The plan of a manifest file, rendered."""
    return render(plan(load_manifest(path), policy), fmt)
