"""``archguard farm plan MANIFEST``: the jobs (package x cell), each with its effective list
resolved for the cell's CUDA and torch from the bundled tables (nothing installed), a job id
that digests every input a plan can know (the source's content: a tree's shipped files, an
sdist's sha256, a release and its pin; the cell; the package's config with its policy's
content; its switches; the farm's policy; archguard's own code; the flags that change the
output), and the cells skipped with their reasons (the manifest's, or nothing left after the
clamp). No path enters an id: the same manifest checked out at two paths plans the same ids.
What only the builder can know (the toolkit it finds, the torch and Python a cell's
environment really holds, what a release fetched) joins the id in the job's ledger
(:mod:`archguard.farm.ledger`): a kept job is kept only while all of it is unchanged.
A cell's platform picks the torch facts its list is resolved from; a cell this machine
cannot build (:func:`not_here`: another platform, a free-threaded Python it lacks) is said,
never skipped: ``farm run`` leaves it to what builds it (``farm workflow``), and its
ledgers, made there, are published with the others."""

from __future__ import annotations

import json
import platform as _machine
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from archguard import __version__
from archguard.core.formats import PlanFormat
from archguard.core.platform import host_platform
from archguard.core.policy import Policy, load_policy
from archguard.core.resolve import resolve
from archguard.core.toolkit import bundled_toolkit
from archguard.core.torchbuild import bundled_torch, parse_torch_version
from archguard.detect.fetch import cache_root, is_release
from archguard.detect.machine import floor_note, glibc_version
from archguard.detect.sources import file_sha256
from archguard.detect.tools import QUERY_TIMEOUT_S, run
from archguard.errors import ArchguardError, ConfigError
from archguard.farm.container import builder_image, require_runtime
from archguard.farm.envs import known_held, uv_path
from archguard.farm.families import load_farm
from archguard.farm.identity import code_digest, digest_of, git_describe, tree_digest
from archguard.farm.manifest import Cell, Manifest, Package, free_threaded, python_release
from archguard.farm.requires import excludes

PLAN_SCHEMA = "archguard.farm-plan/1"
GITHUB_MAX_JOBS = 256  # GitHub Actions' limit per matrix
# Where `farm workflow` builds a cell: x86_64 on GitHub's hosted runners in PyTorch's
# manylinux_2_28 builder (container.BUILDER_IMAGE), aarch64 on GitHub's arm runners in
# PyTorch's aarch64 builder (manylinux_2_28_aarch64, the cell's CUDA toolkit, /opt/python
# with CPython's free-threaded builds as cp314-cp314t)
RUNNERS = {"x86_64": "ubuntu-latest", "aarch64": "ubuntu-24.04-arm"}


@dataclass(frozen=True)
class Job:
    id: str
    package: Package
    cell: Cell
    arch_list: str | None  # None: skipped
    skipped: str = ""  # why
    inputs: dict[str, Any] = field(default_factory=dict, compare=False)  # what the id digests
    elsewhere: str = field(default="", compare=False)  # why this machine cannot build it


@dataclass(frozen=True)
class Flags:
    """The options of a run that change what it publishes."""

    repair: bool = True

    def as_json(self) -> dict[str, object]:
        return {"repair": self.repair}


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


def uv_finds(python: str) -> bool | None:
    """Whether uv finds a Python ``python`` here (``uv python find``: installed, managed or
    on PATH; nothing is fetched); None where it cannot tell (no uv: the run says so)."""
    uv = uv_path()
    if uv is None:
        return None
    try:
        return run([uv, "python", "find", python], None, QUERY_TIMEOUT_S).returncode == 0
    except ArchguardError:
        return None


def not_here(
    cell: Cell, machine: str | None = None, finds: Callable[[str], bool | None] = uv_finds
) -> str:
    """Why this machine (``machine``: its ``uname -m``, default this one's) cannot build the
    cell, and what does; "" where it can. Its platform must be this machine's; a
    free-threaded Python must be one the cell names (``interpreter``) or uv finds here (a
    cell with a ``container`` takes the image's)."""
    name = machine or _machine.machine()
    runner, image = RUNNERS[cell.platform], builder_image(cell)
    if host_platform(name) != cell.platform:
        whose = "GitHub's arm runners" if cell.platform == "aarch64" else "GitHub's runners"
        return (
            f"cell {cell.name} is for {cell.platform} and this machine is {name}: `archguard "
            f"farm workflow` builds it on {whose} ({runner}, in {image}), or run farm run on "
            f"an {cell.platform} machine"
        )
    wanted = free_threaded(cell.python) and not cell.interpreter and not cell.container
    if wanted and finds(cell.python) is False:
        return (
            f"cell {cell.name} asks for Python {cell.python} (free-threaded) and uv finds none "
            f"here: `archguard farm workflow` builds it on {runner} in {image}, whose "
            f"/opt/python has it; or `uv python install {cell.python}` here, or name one in "
            f'the cell: interpreter = "/path/to/python{cell.python}"'
        )
    return ""


def here_only(jobs: Sequence[Job], only: str | None = None) -> tuple[list[Job], list[str]]:
    """``farm run``'s jobs on this machine: those of the cells it can build, and a line for
    each cell it leaves out (its ledgers, made where it was built, stay published); a
    :class:`ConfigError` naming each where it can build none of those selected."""
    away = {j.cell.name: j.elsewhere for j in jobs if j.elsewhere}
    if not away:
        return list(jobs), []
    kept = [j for j in jobs if j.cell.name not in away]
    said = [f"not built here: {why}" for why in away.values()]
    if not kept:
        chosen = f" --only {only}" if only else ""
        raise ConfigError(
            f"farm run{chosen}: this machine can build none of its jobs, and nothing was "
            "made; each cell and what builds it:\n" + "\n".join(f"  - {w}" for w in away.values())
        )
    return kept, said


def source_identity(
    package: Package, manifest: Path, cache: Path | None = None
) -> dict[str, object]:
    """What a package's source is, by content: a tree's digest, an sdist file's or URL's
    sha256, a release as written with its pin (what it fetched joins the ledger)."""
    source = package.source
    if is_release(source):
        return {"release": source, "sha256": package.sha256}
    if "://" in source:
        return {"sdist": package.sha256}
    path = Path(source)
    if path.is_dir():
        return {"tree": tree_digest(path, cache), "git": git_describe(path)}
    if path.is_file():
        return {"sdist": package.sha256 or file_sha256(path)}
    raise ConfigError(
        f"farm manifest {manifest} [[package]] {package.name!r}: source = {source!r} is neither "
        "a directory, an sdist file, a URL nor name==version: give a source tree's path "
        "relative to the manifest, an sdist (with its sha256) or name==version."
    )


def config_identity(package: Package) -> dict[str, object]:
    """The package's ``[tool.archguard]`` table as an input: a ``policy`` file by its content
    (never its path)."""
    raw = dict(package.raw_config)
    if package.config is not None and package.config.policy is not None:
        raw["policy"] = {"sha256": file_sha256(package.config.policy)}
    return raw


def job_inputs(
    package: Package, cell: Cell, source: dict[str, object], farm: dict[str, Any]
) -> dict[str, Any]:
    """Every input of a job's build a plan can know, as JSON (the ledger keeps it): the
    package's (its source, config and switches), the cell's, and the farm's (``farm``: its
    policy, archguard's code, the flags)."""
    described = cell.as_json()
    described["interpreter"] = bool(cell.interpreter)  # a path of the runner's, never digested
    return {
        "source": source,
        "config": config_identity(package),
        "env": package.env,
        **({"build_requires": list(package.build_requires)} if package.build_requires else {}),
        "cell": described,
        **farm,
    }


def job_id(package: Package, cell: Cell, inputs: dict[str, Any]) -> str:
    """``<package>-<cell>-<digest of the inputs>``."""
    return f"{package.name}-{cell.name}-{digest_of(inputs)[:12]}"


def plan(
    manifest: Manifest,
    policy_path: str | None = None,
    flags: Flags | None = None,
    cache: Path | None = None,
    here: Callable[[Cell], str] | None = None,
) -> list[Job]:
    """The manifest's jobs; ``cache`` keeps the trees' file hashes between plans; ``here``:
    why this machine cannot build a cell ("" where it can; default :func:`not_here`),
    never an input of a job."""
    policy = load_policy(policy_path)
    farm = {
        "policy": policy.digest,
        "archguard": {"version": __version__, "code": code_digest()},
        "flags": (flags or Flags()).as_json(),
        "variants": manifest.variants,  # a variant copy of each wheel is published too
    }
    resolved: dict[tuple[str, str], tuple[str | None, str]] = {}
    away = {c.name: (here or not_here)(c) for c in manifest.cells}
    jobs: list[Job] = []
    for package in manifest.packages:
        source = source_identity(package, manifest.path, cache)
        for cell in manifest.cells:
            inputs = job_inputs(package, cell, source, farm)
            identity = job_id(package, cell, inputs)
            if cell.name in package.skip:
                why = f"skipped: {package.skip[cell.name]}"
                jobs.append(Job(identity, package, cell, None, why, inputs, away[cell.name]))
                continue
            excluded = excludes(package.source, python_release(cell.python))
            if excluded is not None:
                why = f"skipped: {excluded}"
                jobs.append(Job(identity, package, cell, None, why, inputs, away[cell.name]))
                continue
            key = (json.dumps(package.raw_config, sort_keys=True), cell.name)
            if key not in resolved:
                resolved[key] = _resolve(package, cell, policy)
            arch_list, why = resolved[key]
            jobs.append(Job(identity, package, cell, arch_list, why, inputs, away[cell.name]))
    return jobs


def _resolve(package: Package, cell: Cell, policy: Policy) -> tuple[str | None, str]:
    try:
        toolkit = bundled_toolkit(cell.cuda)
        version = parse_torch_version(torch_version(cell))
        torch = bundled_torch(cell.cuda, version, cell.platform)  # that platform's facts
        res = resolve(policy, toolkit, torch, package.config, None).require_cubins()
        return res.effective_text, ""
    except ArchguardError as exc:  # nothing left after the clamp (empty-arch-list), ...
        return None, f"skipped: {exc.code}: {exc.message}"


def _matrix(built: Sequence[Job]) -> str:
    """The jobs to build as GitHub's matrix, in shards of at most 256: each with its cell's
    runner and image (its platform's) for ``farm workflow``'s build jobs."""
    include = [
        {
            "job": j.id,
            "package": j.package.name,
            "cell": j.cell.name,
            "python": j.cell.python,
            "torch": str(j.cell.torch),
            "cuda": j.cell.cuda.text,
            "arch_list": j.arch_list,
            "container": builder_image(j.cell),
            "platform": j.cell.platform,
            "runner": RUNNERS[j.cell.platform],
        }
        for j in built
    ]
    shards = [
        {"include": include[i : i + GITHUB_MAX_JOBS]}
        for i in range(0, len(include), GITHUB_MAX_JOBS)
    ]
    return json.dumps({"shards": shards or [{"include": []}]}) + "\n"


def render(
    jobs: list[Job],
    fmt: PlanFormat,
    held: dict[str, Any] | None = None,
    manifest: Manifest | None = None,
    site: Path | None = None,
) -> str:
    """The plan as text, JSON or a GitHub matrix; ``held``: what each cell's environment
    held when a run last looked (``farm plan --site``), by cell; ``manifest``: the cells its
    [[cells]] rules made (new: no run in ``site`` has made its environment) and what the
    expansion left out."""
    held = held or {}
    ruled = [c for c in manifest.cells if c.rule] if manifest is not None else []
    new = [c.name for c in ruled if site is not None and c.name not in held]
    notes = list(manifest.notes) if manifest is not None else []
    built = [j for j in jobs if j.arch_list is not None]
    away = {j.cell.name: j.elsewhere for j in jobs if j.elsewhere}  # farm run leaves them out
    if fmt == "github":
        return _matrix(built)
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
                            "container": j.cell.container,
                            "platform": j.cell.platform,
                            "not_here": j.elsewhere or None,
                        }
                        for j in jobs
                    ],
                    "not_here": away,
                    "held": held,
                    "rule_cells": [c.name for c in ruled],
                    "new_cells": new if site is not None else None,
                    "notes": notes,
                },
                indent=2,
            )
            + "\n"
        )
    lines = [
        f"archguard farm plan: {len(built)} jobs to build, {len(jobs) - len(built)} skipped",
        "",
    ]
    for cell, found in held.items():
        lines.append(
            f"  cell {cell} holds torch {found.get('torch_version') or found.get('torch')} "
            f"(CUDA {found.get('torch_cuda')}) on Python {found.get('python')}"
        )
    if held:
        lines.append("")
    floor = floor_note(glibc_version())
    if floor and any(not j.cell.container for j in jobs):  # a container's floor is its own
        lines += [f"  {floor}", ""]
    if ruled:
        said = "" if site is not None else " (farm plan --site SITE says which are new)"
        lines.append(f"  cells made by [[cells]] rules{said}:")
        lines += [f"    {c.name}: {c.torch}{' (new)' if c.name in new else ''}" for c in ruled]
        lines += [f"    note: {n}" for n in notes]
        lines.append("")
    if away:
        lines.append("  cells this machine does not build (farm run leaves them out):")
        lines += [f"    {why}" for why in away.values()]
        lines.append("")
    for j in jobs:
        what = j.arch_list if j.arch_list is not None else j.skipped
        lines.append(f"  {j.package.name:<24} {j.cell.name:<28} {what}")
        inside = f" in {j.cell.container}" if j.cell.container else ""
        lines.append(f"  {'':<24} {'':<28} job {j.id}{inside}")
    return "\n".join(lines) + "\n"


def plan_manifest(
    path: Path, policy: str | None, fmt: PlanFormat, repair: bool = True, site: Path | None = None
) -> str:
    """The plan of a manifest file, rendered; with ``site``, what each cell's environment
    there held when a run last looked (the torch its jobs' ledgers name)."""
    manifest = load_farm(path)
    require_runtime(path, manifest.cells)  # a cell's container needs docker or podman here
    jobs = plan(manifest, policy, Flags(repair), cache_root())
    held = {}
    for cell in manifest.cells if site is not None else ():
        found = known_held(site, cell.name)  # type: ignore[arg-type]
        if found is not None:
            held[cell.name] = found
    return render(jobs, fmt, held, manifest, site)
