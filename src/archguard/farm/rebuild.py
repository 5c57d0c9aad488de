"""``archguard farm verify SITE --rebuild MANIFEST``: a second builder's proof of what a site
publishes. The manifest's jobs that SITE has published (a job's id digests its inputs by
content, never by path: the same manifest from another checkout plans the same ids) are
built again, with ``farm run``, into a scratch site of their own; each rebuilt wheel's
sha256 is compared with the one the published ledger holds, and where they differ the
member of the zip, and for a ``.so`` the ELF section, is named
(:func:`archguard.binaries.compare.wheel_differences`). SITE is only read."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from archguard.binaries.compare import wheel_differences
from archguard.detect.fetch import cache_root
from archguard.errors import ConfigError
from archguard.farm.families import load_farm
from archguard.farm.ledger import PUBLISHED, Outcome, Status, all_ledgers, say, store_path
from archguard.farm.plan import Flags, Job, plan
from archguard.farm.run import RunOptions, run_farm

REBUILD_SCHEMA = "archguard.farm-rebuild/1"


@dataclass
class Proof:
    """One published wheel and its rebuild."""

    job: str
    cell: str
    wheel: str
    sha256: str  # what the published ledger holds
    rebuilt: str | None = None  # the rebuild's sha256; None: not rebuilt
    differences: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return self.rebuilt == self.sha256

    def line(self) -> str:
        if self.identical:
            return f"identical  {self.wheel}  (job {self.job}, cell {self.cell}, {self.sha256})"
        if self.rebuilt is None:
            return f"NOT REBUILT  {self.wheel}  (job {self.job}): {'; '.join(self.differences)}"
        return (
            f"DIFFERS  {self.wheel}  (job {self.job}, cell {self.cell}): published "
            f"{self.sha256}, rebuilt {self.rebuilt}: " + "; ".join(self.differences)
        )


def chosen(  # noqa: PLR0913 - the site, its ledgers, the manifest and the three options
    site: Path,
    ledgers: Mapping[str, Outcome],
    manifest: Path,
    *,
    only: Sequence[str],
    sample: int | None,
    repair: bool,
) -> list[Job]:
    """The manifest's jobs SITE published (``ledgers``: built, not served by another's),
    those ``only`` names (ids, packages, cells), the first ``sample`` of them."""
    jobs = plan(load_farm(manifest), None, Flags(repair=repair), cache=cache_root())
    published = [
        j
        for j in jobs
        if (r := ledgers.get(j.id)) is not None
        and r.status in PUBLISHED
        and r.wheels
        and r.status is not Status.SERVED
    ]
    if only:
        published = [j for j in published if {j.id, j.package.name, j.cell.name} & set(only)]
    if not published:
        raise ConfigError(
            f"archguard farm verify --rebuild: {site} publishes no job of {manifest}"
            + (f" that {', '.join(only)} names" if only else "")
            + ": a job's id digests its inputs (the manifest's tables, the trees' files, "
            "archguard's version): give the manifest and archguard that built SITE."
        )
    return published[:sample] if sample else published


def rebuild_site(  # noqa: PLR0913 - the site, the manifest, and each option of the command
    site: Path,
    manifest: Path,
    only: Sequence[str] = (),
    sample: int | None = None,
    *,
    repair: bool = True,
    in_container: bool = False,
) -> list[Proof]:
    """Each chosen job built again in a scratch site, each of its wheels compared
    (``in_container``: this runner is the cells' image, as a workflow's rebuild job is)."""
    ledgers = all_ledgers(site)
    jobs = chosen(site, ledgers, manifest, only=only, sample=sample, repair=repair)
    proofs: list[Proof] = []
    with tempfile.TemporaryDirectory(prefix="archguard-rebuild-") as tmp:
        scratch = Path(tmp) / "site"
        for number, job in enumerate(jobs, 1):
            say(f"rebuild [{number}/{len(jobs)}] {job.package.name} in {job.cell.name}")
            options = RunOptions(scratch, only=job.id, repair=repair, in_container=in_container)
            run_farm(manifest, options)
            mine = all_ledgers(scratch).get(job.id)
            theirs = ledgers[job.id]
            for name in theirs.wheels:
                proof = Proof(job.id, job.cell.name, name, theirs.sha256.get(name, ""))
                proofs.append(proof)
                if mine is None or name not in mine.wheels:
                    why = (mine.why if mine is not None else "") or "no wheel of that name"
                    proof.differences.append(why)
                    continue
                proof.rebuilt = mine.sha256.get(name, "")
                if not proof.identical:
                    proof.differences = wheel_differences(
                        store_path(site, name, proof.sha256),
                        store_path(scratch, name, proof.rebuilt),
                    )
    return proofs


def render_proofs(proofs: Sequence[Proof], site: Path, fmt: str) -> str:
    same = sum(p.identical for p in proofs)
    if fmt == "json":
        return (
            json.dumps(
                {
                    "schema": REBUILD_SCHEMA,
                    "site": str(site),
                    "ok": same == len(proofs),
                    "wheels": [
                        {
                            "job": p.job,
                            "cell": p.cell,
                            "wheel": p.wheel,
                            "sha256": p.sha256,
                            "rebuilt": p.rebuilt,
                            "identical": p.identical,
                            "differences": p.differences,
                        }
                        for p in proofs
                    ],
                },
                indent=2,
            )
            + "\n"
        )
    lines = [p.line() for p in proofs]
    lines.append(
        f"archguard farm verify --rebuild: {same} of {len(proofs)} wheel(s) rebuilt to the "
        "same bytes"
    )
    return "\n".join(lines) + "\n"
