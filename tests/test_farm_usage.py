"""How a farm run uses the machine (issue 51): the longest source first, and the cores' use
said at the end. The plan is a real manifest's; durations are ledgers as a run writes them."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from archguard.farm.ledger import Outcome, Status
from archguard.farm.manifest import load_manifest
from archguard.farm.plan import Job, plan
from archguard.farm.usage import Meter, Usage, longest_first
from test_farm_plan import manifest


def groups_of(tmp: Path) -> list[list[tuple[int, Job]]]:
    jobs = [j for j in plan(load_manifest(manifest(tmp))) if j.arch_list is not None]
    by_source: dict[str, list[tuple[int, Job]]] = {}
    for number, job in enumerate(jobs, 1):
        by_source.setdefault(job.package.source, []).append((number, job))
    return list(by_source.values())


def names(groups: list[list[tuple[int, Job]]]) -> list[str]:
    return [g[0][1].package.name for g in groups]


def test_the_longest_source_by_its_ledgers_goes_first_and_else_the_most_cuda_code(
    tmp_path: Path,
) -> None:
    groups = groups_of(tmp_path)
    assert names(groups) == ["fused-lncc", "floors"]  # the plan's order (too-old: skipped)
    assert names(longest_first(groups, {})) == ["fused-lncc", "floors"]  # no CUDA code: ties
    # no ledger yet: the tree with CUDA code first (an sdist's size is unknown until fetched)
    (tmp_path / "src" / "floors" / "kernel.cu").write_text("// kernel\n" * 500)
    assert names(longest_first(groups, {})) == ["floors", "fused-lncc"]
    # a duration a ledger holds outranks any guess; the longest first
    floors = groups[1][0][1]
    lncc = groups[0][0][1]
    ledgers = {
        floors.id: Outcome(floors.id, "floors", floors.cell.name, Status.BUILT, seconds=30.0),
        lncc.id: Outcome(lncc.id, "fused-lncc", lncc.cell.name, Status.BUILT, seconds=400.0),
    }
    assert names(longest_first(groups, ledgers)) == ["fused-lncc", "floors"]
    # a job whose inputs changed (a new id) takes its package's last duration in its cell
    moved = {
        "old-id": Outcome("old-id", "floors", floors.cell.name, Status.BUILT, seconds=900.0),
        lncc.id: ledgers[lncc.id],
    }
    assert names(longest_first(groups, moved)) == ["floors", "fused-lncc"]


def test_utilization_and_the_limit() -> None:
    # the measured farm: 97 s wall, 146 CPU-seconds, 2 cores, the longest job 50 s
    used = Usage(wall=97.0, cpu=146.0, cores=2, longest=50.0)
    assert round(used.utilization, 2) == 0.75 and used.limit == 73.0
    assert "utilization 0.75" in used.line() and "is 73 s: this run took 1.33x of it" in used.line()
    assert Usage(wall=10.0, cpu=5.0, cores=2, longest=9.0).limit == 9.0  # one long job


def test_the_meter_counts_the_cpu_of_the_processes_a_run_waits_for() -> None:
    meter = Meter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    spent = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
    used = meter.usage([Outcome("j", "p", "c", Status.BUILT, seconds=1.0)], cores=2)
    assert spent > 0.05 and used.cpu >= spent - 1e-6  # user + system, summed otherwise
    assert used.wall >= used.cpu / 2 * 0.5  # never more CPU than the cores could give
