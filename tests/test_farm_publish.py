"""What a farm publishes, without building (issue 40): a job's id digests the content of its
inputs, never their paths; the ledgers a run resumes from are checked, not trusted; the
indexes are swapped whole (a reader polling never sees none, half of one, or a link to a
missing or different wheel); one run holds a site at a time; ``farm verify`` re-reads every
published wheel. The builds themselves are in tests/test_farm_trust.py."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from archguard.binaries.facts import WheelFacts
from archguard.core.cuda import CudaVersion
from archguard.errors import Busy, ConfigError
from archguard.farm.identity import tree_digest
from archguard.farm.ledger import Outcome, Status, kept_problem, store_path, write_ledger
from archguard.farm.manifest import Cell, load_manifest
from archguard.farm.plan import Flags, plan
from archguard.farm.publish import (
    collect_garbage,
    publish_indexes,
    read_links,
    site_lock,
    store_wheel,
    write_index,
)
from archguard.farm.verify import verify_site
from realtools import REPO, needs_cuda_torch, pip_would_install, run_main

MANIFEST = """\
[[cell]]
name = "c13"
python = "3.11"
torch = "torch==2.13.0"
cuda = "13.0"

[[cell]]
name = "c14"
python = "3.11"
torch = "torch==2.14.1"
cuda = "13.0"

[[package]]
name = "alpha"
source = "src/alpha"
config = { arch_list = "8.0", policy = "policies/alpha.yml" }

[[package]]
name = "beta"
source = "src/beta"
config = { arch_list = "8.0" }
"""


def cells(*names: str) -> list[Cell]:
    """Cells of CUDA 13.0, as a manifest gives them."""
    return [Cell(n, "3.11", Requirement("torch"), CudaVersion(13, 0)) for n in names]


def farm(root: Path) -> Path:
    """A manifest at ``root`` with two source trees and a package policy, all relative."""
    for name in ("alpha", "beta"):
        tree = root / "src" / name
        tree.mkdir(parents=True)
        (tree / "setup.py").write_text(f"# {name}\n")
        (tree / "kernel.cu").write_text("__global__ void k() {}\n")
    (root / "policies").mkdir()
    shutil.copy(REPO / "defaults" / "arch_policy.yml", root / "policies" / "alpha.yml")
    (root / "farm.toml").write_text(MANIFEST)
    return root / "farm.toml"


def ids(manifest: Path, **kw: object) -> dict[tuple[str, str], str]:
    return {(j.package.name, j.cell.name): j.id for j in plan(load_manifest(manifest), **kw)}  # type: ignore[arg-type]


def changed(before: dict[tuple[str, str], str], after: dict[tuple[str, str], str]) -> set[str]:
    return {f"{p}/{c}" for (p, c), i in before.items() if after[(p, c)] != i}


def test_the_same_manifest_at_two_paths_plans_the_same_ids(tmp_path: Path) -> None:
    one = farm(tmp_path / "checkout-one")
    two = farm(tmp_path / "elsewhere" / "checkout-two")
    assert ids(one) == ids(two)
    assert len(set(ids(one).values())) == 4


def test_each_input_changes_exactly_the_jobs_it_touches(tmp_path: Path) -> None:
    manifest = farm(tmp_path)
    before = ids(manifest)
    # a file of alpha's tree: alpha's two jobs
    (tmp_path / "src" / "alpha" / "kernel.cu").write_text("__global__ void k(int) {}\n")
    after = ids(manifest)
    assert changed(before, after) == {"alpha/c13", "alpha/c14"}
    # the content of alpha's own policy file (its path unchanged): alpha's jobs only
    policy = tmp_path / "policies" / "alpha.yml"
    policy.write_text(policy.read_text() + "\n# reviewed\n")
    again = ids(manifest)
    assert changed(after, again) == {"alpha/c13", "alpha/c14"}
    # build outputs and version control never enter: no job changes
    (tmp_path / "src" / "beta" / "build").mkdir()
    (tmp_path / "src" / "beta" / "build" / "x.o").write_text("object")
    (tmp_path / "src" / "beta" / ".git").mkdir()
    (tmp_path / "src" / "beta" / ".git" / "HEAD").write_text("ref")
    assert ids(manifest) == again
    # a flag that changes the output: every job
    assert changed(again, ids(manifest, flags=Flags(repair=False))) == {
        "alpha/c13",
        "alpha/c14",
        "beta/c13",
        "beta/c14",
    }
    # a missing tree is one error naming the manifest, the package and the value
    shutil.rmtree(tmp_path / "src" / "beta")
    with pytest.raises(ConfigError, match=r"farm\.toml \[\[package\]\] 'beta': source = '.*beta'"):
        ids(manifest)


def test_archguards_own_code_is_an_input_by_content(tmp_path: Path) -> None:
    """The digest of the installed package, not only its version: a copy of archguard with
    one comment changed gives every job another id."""
    copy = tmp_path / "archguard"
    shutil.copytree(REPO / "src" / "archguard", copy, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = farm(tmp_path / "farm")
    code = (
        "import json, sys; from archguard.farm.plan import plan;"
        "from archguard.farm.manifest import load_manifest;"
        "print(json.dumps(sorted(j.id for j in plan(load_manifest(__import__('pathlib')"
        ".Path(sys.argv[1]))))))"
    )

    def planned() -> list[str]:
        proc = subprocess.run(
            [sys.executable, "-c", code, str(manifest)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
            check=True,
        )
        return list(json.loads(proc.stdout))

    first = planned()
    assert first == planned() == sorted(ids(manifest).values())
    (copy / "farm" / "plan.py").write_text((copy / "farm" / "plan.py").read_text() + "# x\n")
    assert not set(first) & set(planned())


def test_a_tree_digest_reuses_hashes_by_size_and_mtime(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "a.cu").write_text("one")
    cache = tmp_path / "cache"
    first = tree_digest(tree, cache)
    (stored,) = (cache / "digests").glob("*.json")
    known = json.loads(stored.read_text())
    assert [Path(k).name for k in known] == ["a.cu"]
    # the cache is what is read while size and mtime hold: a planted hash is believed...
    key = next(iter(known))
    known[key][2] = "0" * 64
    stored.write_text(json.dumps(known))
    assert tree_digest(tree, cache) != first
    # ...and an edit (its mtime moves) is hashed again, whatever the cache says
    (tree / "a.cu").write_text("two")
    os.utime(tree / "a.cu", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert tree_digest(tree, cache) == tree_digest(tree, None) != first


def wheel(folder: Path, name: str, content: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(content)
    return path


def ledger(site: Path, job: str, cell: str, name: str, content: bytes) -> Outcome:
    """A built job's ledger, its wheel stored."""
    built = wheel(site / ".farm" / "jobs" / job / "wheels", name, content)
    stored, sha = store_wheel(site, built)
    outcome = Outcome(
        job, name.split("-", maxsplit=1)[0], cell, Status.BUILT, [stored], sha256={stored: sha}
    )
    outcome.inputs = {"toolkit": "nvcc 13.0", "held": {"torch": "2.13.0"}}
    write_ledger(site, outcome)
    return outcome


A = "alpha-1.0+cu130-cp311-cp311-linux_x86_64.whl"
B = "beta-1.0+cu130-cp311-cp311-linux_x86_64.whl"


def test_a_kept_ledger_is_checked_not_trusted(tmp_path: Path) -> None:
    site = tmp_path / "site"
    kept = ledger(site, "a1", "c13", A, b"PK-alpha")
    assert kept_problem(site, kept, kept.inputs) is None
    # another input (the toolkit, the torch the cell holds): named
    other = {**kept.inputs, "held": {"torch": "2.13.1"}}
    assert kept_problem(site, kept, other) == "its inputs changed (held)"
    # bytes replaced in place, or truncated: the sha256 said
    path = kept.stored(site)[0]
    path.write_bytes(b"PK-evil")
    problem = kept_problem(site, kept, kept.inputs)
    assert problem is not None and "not its ledger's" in problem
    path.unlink()
    assert "is missing" in str(kept_problem(site, kept, kept.inputs))


def test_the_indexes_come_from_every_ledger_and_a_removed_job_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("archguard.farm.publish.GRACE_S", 0.0)  # only the previous index stays
    site = tmp_path / "site"
    ledgers = {
        r.job: r for r in (ledger(site, "a1", "c13", A, b"a"), ledger(site, "b1", "c13", B, b"b"))
    }
    publish_indexes(site, cells("c13"), ledgers, ["a1", "b1"])
    assert {n for n, _ in read_links(site / "c13" / "simple")} == {A, B}
    published = (site / "c13" / "simple").readlink()
    # a run that selected only a1 still publishes b1 (its ledger); an index that says what
    # the published one says is not published again
    publish_indexes(site, cells("c13"), ledgers, ["a1", "b1"])
    assert {n for n, _ in read_links(site / "c13" / "simple")} == {A, B}
    assert (site / "c13" / "simple").readlink() == published
    # b1 left the manifest: it leaves the index; its wheel stays one generation, then goes
    publish_indexes(site, cells("c13"), ledgers, ["a1"])
    assert {n for n, _ in read_links(site / "c13" / "simple")} == {A}
    collect_garbage(site, {(A, ledgers["a1"].sha256[A])})
    assert ledgers["b1"].stored(site)[0].is_file()  # the previous index still names it
    C = "gamma-1.0+cu130-cp311-cp311-linux_x86_64.whl"
    ledgers["c1"] = ledger(site, "c1", "c13", C, b"c")
    publish_indexes(site, cells("c13"), ledgers, ["a1", "c1"])
    collect_garbage(site, {(A, ledgers["a1"].sha256[A]), (C, ledgers["c1"].sha256[C])})
    assert not ledgers["b1"].stored(site)[0].exists()
    assert ledgers["a1"].stored(site)[0].is_file()
    assert verify_site(site).ok


def test_a_reader_never_sees_an_index_naming_a_missing_or_other_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 publications of an index whose wheel changes bytes under the same name, a reader
    polling all along: every read finds an index, and every wheel it names is there with
    the sha256 it advertises (a replaced index, and its wheels, stay for a grace period).
    Past it, the previous index is what stays."""
    site = tmp_path / "site"
    seen: list[str] = []
    bad: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            index = site / "c13" / "simple"
            if not seen and not index.exists():
                continue
            try:
                links = read_links(index)
                html = (index / "index.html").read_text()
            except OSError as exc:
                bad.append(f"no index: {exc}")
                continue
            for name, sha in links:
                try:
                    data = store_path(site, name, sha).read_bytes()
                except OSError as exc:
                    bad.append(f"{name}: {exc}")
                    continue
                if hashlib.sha256(data).hexdigest() != sha:
                    bad.append(f"{name}: other bytes")
            seen.append(html)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(200):
            r = ledger(site, f"a{i}", "c13", A, f"PK-{i}".encode())
            write_index(site, "c13", [(A, r.sha256[A])])
            collect_garbage(site)
    finally:
        stop.set()
        thread.join()
    assert not bad, bad[:5]
    assert len(seen) > 20
    assert len(list((site / "c13").glob(".simple-*"))) == 200  # all within the grace period
    monkeypatch.setattr("archguard.farm.publish.GRACE_S", 0.0)
    before = (site / "c13" / "simple").readlink()
    r = ledger(site, "last", "c13", A, b"PK-last")
    write_index(site, "c13", [(A, r.sha256[A])])
    collect_garbage(site)
    kept = sorted(p.name for p in (site / "c13").glob(".simple-*"))
    assert kept == sorted([before.name, (site / "c13" / "simple").readlink().name])
    # the wheels of the two indexes kept, and no other
    assert len(list((site / "wheels").glob("*/*.whl"))) == 2


HOLD = """\
import sys, time
from pathlib import Path
from archguard.farm.publish import site_lock
with site_lock(Path(sys.argv[1]), command="holder"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_one_run_holds_a_site_and_a_killed_holder_is_taken_over(tmp_path: Path) -> None:
    site = tmp_path / "site"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(site), "60"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        held = rf"another run \(pid {holder.pid} on .*: holder\)"
        with pytest.raises(Busy, match=held), site_lock(site):
            pass
        # the CLI: exit 2, the holder named
        manifest = farm(tmp_path / "m")
        refused = run_main("farm", "run", str(manifest), "-o", str(site), "--assemble")
        assert refused.returncode == 2 and f"pid {holder.pid}" in refused.stderr
        assert "archguard error [busy]" in refused.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()  # closes its pipe
    # killed without letting go: the next run takes over, and says so
    taken = run_main("farm", "run", str(manifest), "-o", str(site), "--assemble")
    assert f"took over the lock of {site} from a run that ended without" in taken.stderr
    assert f"pid {holder.pid}" in taken.stderr
    again = run_main("farm", "run", str(manifest), "-o", str(site), "--assemble")
    assert "took over" not in again.stderr  # the last run let go cleanly


def test_a_second_run_waits_with_wait(tmp_path: Path) -> None:
    site = tmp_path / "site"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(site), "2"], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    started = time.monotonic()
    manifest = farm(tmp_path / "m")
    waited = run_main("farm", "run", str(manifest), "-o", str(site), "--assemble", "--wait")
    holder.communicate()  # closes its pipe
    assert waited.returncode == 1, waited.stderr  # nothing was built by any job
    assert f"waiting for the run that holds {site} (pid {holder.pid}" in waited.stderr
    assert time.monotonic() - started > 1.0


def test_farm_verify_reads_every_published_wheel(tmp_path: Path) -> None:
    site = tmp_path / "site"
    ledgers = {
        r.job: r for r in (ledger(site, "a1", "c13", A, b"a"), ledger(site, "b1", "c14", B, b"b"))
    }
    # an earlier build of a1's package in c13 (its inputs changed since): a ledger of the
    # same wheel name, other bytes, not in the index; verify reads the one the index names
    ledger(site, "a9", "c13", A, b"a-before")  # its ledger read after a1's
    publish_indexes(site, cells("c13", "c14"), ledgers, list(ledgers))
    ok = run_main("farm", "verify", str(site), "--format", "json")
    # each wheel in its cell's index and in the CUDA line's (cu130)
    assert ok.returncode == 0 and json.loads(ok.stdout)["wheels"] == 4
    ledgers["b1"].stored(site)[0].write_bytes(b"truncat")
    bad = run_main("farm", "verify", str(site))
    assert bad.returncode == 1
    assert f"c14: {B}: its bytes have sha256" in bad.stdout
    ledgers["a1"].stored(site)[0].unlink()
    assert "which is missing" in run_main("farm", "verify", str(site)).stdout
    nowhere = run_main("farm", "verify", str(tmp_path))
    assert nowhere.returncode == 2 and "holds no farm site" in nowhere.stderr


def test_a_package_config_is_written_with_its_policy_against_the_manifest(tmp_path: Path) -> None:
    """The package's table as ARCHGUARD_CONFIG reads it: written by tomli-w, its relative
    policy resolved against the manifest (where it was checked), not the job's folder."""
    from archguard.farm.jobs import config_file
    from archguard.settings.config import load_config_file

    manifest = load_manifest(farm(tmp_path))
    alpha = manifest.packages[0]
    written = config_file(alpha, tmp_path / "cache")
    assert written is not None
    config = load_config_file(str(written))
    assert config.policy == tmp_path / "policies" / "alpha.yml"
    assert config.arch_list is not None
    # named by its content: the same table is the same file from any site (and the wheel's
    # record that names it, the same bytes)
    assert written.parent == tmp_path / "cache" / "farm-config"
    assert config_file(alpha, tmp_path / "cache") == written


def test_a_kept_ledger_keeps_its_wheels_facts(tmp_path: Path) -> None:
    """A resumed job's ledger brings back its wheels' facts (what archguard wheel read
    back), for the page: a kept job's cell says as much as a built one's."""
    from archguard.farm.ledger import read_ledger
    from archguard.farm.page import write_page

    site = tmp_path / "site"
    built = ledger(site, "a1", "c13", A, b"a")
    built.details = [WheelFacts(A, 1, ("sm_80", "compute_80"), True)]
    write_ledger(site, built)
    kept = read_ledger(site, "a1")
    assert kept is not None and kept.details == built.details and kept.sha256 == built.sha256
    kept.status = Status.KEPT
    manifest = load_manifest(farm(tmp_path / "m"))
    kept.package = "alpha"
    write_page(site, manifest, [kept])
    page = (site / "index.html").read_text()
    assert "<li>verified: sm_80 compute_80</li>" in page
    assert f'sha256 {built.sha256[A]}, from <a href=".farm/jobs/a1.json">job a1</a>' in page


def test_a_linked_directory_and_the_git_describe_are_inputs(tmp_path: Path) -> None:
    """A tree whose kernels live behind a linked directory: an edit there is an input (the
    copy built is what was digested); a checkout's git tag, which a version plugin reads,
    is one too."""
    manifest = farm(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "k.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "src" / "alpha" / "csrc").symlink_to(shared, target_is_directory=True)
    before = ids(manifest)
    (shared / "k.cu").write_text("__global__ void k(int) {}\n")
    after = ids(manifest)
    assert changed(before, after) == {"alpha/c13", "alpha/c14"}
    tree = tmp_path / "src" / "beta"
    if shutil.which("git") is None:
        return
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "tag", "v1.0"], check=True)
    tagged = ids(manifest)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "release"], check=True)
    subprocess.run([*git, "tag", "v1.1"], check=True)  # the same files, another release
    assert changed(tagged, ids(manifest)) == {"beta/c13", "beta/c14"}


def test_what_only_the_builder_knows_joins_the_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ARCHGUARD_* variable the runner's environment hands every build (a list, a
    policy) is an input of the build's ledger."""
    from archguard.farm.run import RunOptions, _Run

    manifest = load_manifest(farm(tmp_path))
    jobs = plan(manifest)
    run = _Run(RunOptions(site=tmp_path / "site"), manifest, jobs)
    monkeypatch.delenv("ARCHGUARD_ARCH_LIST", raising=False)
    plain = run.inputs(jobs[0], {"torch": "2.13.0"})
    monkeypatch.setenv("ARCHGUARD_ARCH_LIST", "8.0")
    listed = run.inputs(jobs[0], {"torch": "2.13.0"})
    assert listed["environment"] == {**plain["environment"], "ARCHGUARD_ARCH_LIST": "8.0"}
    assert plain["toolkit"] == listed["toolkit"] and plain["held"] == {"torch": "2.13.0"}


def test_a_skipped_job_a_missing_wheel_and_a_failed_cell_publish_as_they_should(
    tmp_path: Path,
) -> None:
    """A job the manifest now skips leaves the index; a ledger whose wheel is missing is
    never published; a failure before a build (its cell's environment) leaves the job's
    earlier wheels published."""
    from archguard.farm.ledger import read_ledger
    from archguard.farm.run import RunOptions, _Run, publish_site

    path = farm(tmp_path)
    manifest = load_manifest(path)
    jobs = {(j.package.name, j.cell.name): j for j in plan(manifest)}
    site = tmp_path / "site"
    a13, b13 = jobs["alpha", "c13"], jobs["beta", "c13"]
    ledger(site, a13.id, "c13", A, b"a")
    kept = ledger(site, b13.id, "c13", B, b"b")
    publish_site(site, manifest, list(jobs.values()))
    assert {n for n, _ in read_links(site / "c13" / "simple")} == {A, B}
    # a pre-build failure does not replace beta's ledger
    run = _Run(RunOptions(site=site), manifest, list(jobs.values()))
    run.to_ledger(Outcome(b13.id, "beta", "c13", Status.FAILED, why="no uv"), attempted=False)
    assert read_ledger(site, b13.id) == kept
    # alpha is skipped now (the same id: its inputs are the same): it leaves the index
    path.write_text(
        MANIFEST.replace(
            'config = { arch_list = "8.0", policy = "policies/alpha.yml" }',
            'config = { arch_list = "8.0", policy = "policies/alpha.yml" }\n'
            'skip = [{ cell = "c13", reason = "broken there" }]',
        )
    )
    manifest = load_manifest(path)
    skipped = plan(manifest)
    assert a13.id in {j.id for j in skipped if j.arch_list is None}
    publish_site(site, manifest, skipped)
    assert {n for n, _ in read_links(site / "c13" / "simple")} == {B}
    # beta's wheel goes missing: its ledger is not published
    kept.stored(site)[0].unlink()
    publish_site(site, manifest, skipped)
    assert read_links(site / "c13" / "simple") == set()


def real_wheel(folder: Path, name: str, requires: list[str], python: str = ">=3.10") -> Path:
    """A small, valid wheel (a module and its dist-info) with these requirements."""
    import zipfile

    from packaging.utils import parse_wheel_filename

    project, version, _, _ = parse_wheel_filename(name)
    info = f"{project.replace('-', '_')}-{version}.dist-info"
    metadata = (
        f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
        f"Requires-Python: {python}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    files = {
        f"{project}_mod.py": "X = 1\n",
        f"{info}/METADATA": metadata,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
        f"Tag: {'-'.join(name[:-4].split('-')[-3:])}\n",
    }
    record = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in {**files, f"{info}/RECORD": record}.items():
            zf.writestr(member, text)
    return path


def line_site(site: Path) -> dict[str, Outcome]:
    """Two torch cells of CUDA 13.0: a package built per torch, and one built for torch's
    stable ABI (abi3) beside a torch-specific build of the same version."""
    tag = "cp311-cp311-linux_x86_64"
    built = {
        "e13": ("c13", f"ext-1.0+cu130torch2.13-{tag}.whl", ["torch>=2.13,<2.14"]),
        "e14": ("c14", f"ext-1.0+cu130torch2.14-{tag}.whl", ["torch>=2.14,<2.15"]),
        "s13": ("c13", "st-1.0+cu130-cp310-abi3-linux_x86_64.whl", ["torch>=2.10"]),
        "t13": ("c13", f"st-1.0+cu130torch2.13-{tag}.whl", ["torch>=2.13,<2.14"]),
        # for a Python below the abi3 wheel's floor: the stable wheel does not serve it
        "u13": ("c13", "st-1.0+cu130torch2.13-cp39-cp39-linux_x86_64.whl", ["torch>=2.13,<2.14"]),
    }
    ledgers = {}
    for job, (cell, name, requires) in built.items():
        stored, sha = store_wheel(site, real_wheel(site / ".farm" / "jobs" / job, name, requires))
        outcome = Outcome(
            job, name.split("-")[0], cell, Status.BUILT, [stored], sha256={stored: sha}
        )
        write_ledger(site, outcome)
        ledgers[job] = outcome
    publish_indexes(site, cells("c13", "c14"), ledgers, list(ledgers))
    return ledgers


def test_a_cuda_lines_index_lists_every_cell_with_metadata_beside_each_wheel(
    tmp_path: Path,
) -> None:
    import zipfile

    site = tmp_path / "site"
    ledgers = line_site(site)
    line = site / "cu130" / "simple"
    assert {n for n, _ in read_links(line)} == {
        "ext-1.0+cu130torch2.13-cp311-cp311-linux_x86_64.whl",
        "ext-1.0+cu130torch2.14-cp311-cp311-linux_x86_64.whl",
        "st-1.0+cu130-cp310-abi3-linux_x86_64.whl",  # serves 2.13: its torch2.13 build left out
        "st-1.0+cu130torch2.13-cp39-cp39-linux_x86_64.whl",  # but not on Python 3.9
    }
    # each cell's own index is as before: the torch2.13 build of st is in c13's
    assert "st-1.0+cu130torch2.13-cp311-cp311-linux_x86_64.whl" in {
        n for n, _ in read_links(site / "c13" / "simple")
    }
    page = (line / "ext" / "index.html").read_text()
    for outcome in (ledgers["e13"], ledgers["e14"]):
        (name,) = outcome.wheels
        wheel = outcome.stored(site)[0]
        meta = wheel.with_name(name + ".metadata")
        with zipfile.ZipFile(wheel) as zf:
            assert meta.read_bytes() == zf.read(
                "ext-1.0+" + name.split("+")[1].split("-")[0] + ".dist-info/METADATA"
            )
        sha = hashlib.sha256(meta.read_bytes()).hexdigest()
        assert f'data-dist-info-metadata="sha256={sha}" data-core-metadata="sha256={sha}"' in page
    assert 'data-requires-python="&gt;=3.10"' in page
    assert verify_site(site).ok
    # garbage collection keeps a kept wheel's metadata beside it
    collect_garbage(site, {(n, r.sha256[n]) for r in ledgers.values() for n in r.wheels})
    assert all(
        r.stored(site)[0].with_name(r.wheels[0] + ".metadata").is_file() for r in ledgers.values()
    )


def test_a_cell_cannot_take_a_cuda_lines_name(tmp_path: Path) -> None:
    manifest = farm(tmp_path)
    manifest.write_text(manifest.read_text().replace('name = "c13"', 'name = "cu130"'))
    with pytest.raises(ConfigError, match=r"name = 'cu130' is the name of a CUDA line's index"):
        load_manifest(manifest)


@needs_cuda_torch
def test_pip_picks_the_installed_torchs_wheel_from_the_line_reading_only_metadata(
    tmp_path: Path,
) -> None:
    """With the installed torch held (a constraint torch==<its distribution version>), pip
    picks the wheel built against it from the CUDA line's index, installs nothing else, and
    reads the chosen wheel's .metadata file, not the wheel."""
    from importlib.metadata import version

    site = tmp_path / "site"
    line_site(site)
    held = tmp_path / "torch.txt"
    held.write_text(f"torch=={version('torch')}\n")
    proc, chosen = pip_would_install(
        sys.executable, (site / "cu130" / "simple").as_uri(), held, "ext", "st"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    minor = ".".join(version("torch").split(".")[:2])
    assert chosen == {"ext": f"1.0+cu130torch{minor}", "st": "1.0+cu130"}, chosen
    log = proc.stdout + proc.stderr
    # pip read the other torch's wheel's metadata, rejected it, and downloaded no wheel
    other = "2.14" if minor == "2.13" else "2.13"
    assert f"ext-1.0%2Bcu130torch{other}-cp311-cp311-linux_x86_64.whl.metadata" in log, log
    assert f"Obtaining dependency information for ext from file://{site}" in log
    assert not re.search(r"Downloading \S+\.whl \(", log), log


def test_variants_are_published_beside_their_wheel_and_uv_installs_the_one_that_serves(
    tmp_path: Path,
) -> None:
    """A wheel and its PEP 825 variant copy (sm_80 cubins, CUDA 13.0) in the line's index
    with their variants.json: the real uv, its NVIDIA provider forced to a device, installs
    the variant on 8.6 (served by sm_80) and the plain wheel (the fallback) on 9.0; pip
    installs the plain wheel."""
    pytest.importorskip("variantlib")
    from archguard.user.variant import Plan, write

    uv = shutil.which("uv", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    assert uv is not None, "the test extra installs uv"
    site = tmp_path / "site"
    name = "vext-1.0+cu130-cp311-cp311-linux_x86_64.whl"
    plain = real_wheel(tmp_path / "built", name, [])
    copy = write(
        Plan(plain, [("cuda_version_lower_bound", "13.0"), ("sm_arch", "80_real")]),
        tmp_path / "built" / "variants",
    )
    wheels = [store_wheel(site, plain), store_wheel(site, copy)]
    outcome = Outcome(
        "v1", "vext", "c13", Status.BUILT, [n for n, _ in wheels], sha256=dict(wheels)
    )
    write_ledger(site, outcome)
    publish_indexes(site, cells("c13"), {"v1": outcome}, ["v1"])
    line = site / "cu130" / "simple"
    links = {n for n, _ in read_links(line)}
    assert links == {name, copy.name, "vext-1.0+cu130-variants.json"}
    assert verify_site(site).ok
    index = line.as_uri()

    def installed(sm: str | None, installer: str) -> bool:
        """Whether the variant (its dist-info holds variant.json) was installed."""
        env_dir = tmp_path / f"env-{installer}-{sm}"
        made = subprocess.run(
            [uv, "venv", "-q", "--python", sys.executable, str(env_dir)], check=False
        )
        assert made.returncode == 0
        python = env_dir / "bin" / "python"
        env = {k: v for k, v in os.environ.items() if not k.startswith("NV_VARIANT_PROVIDER")}
        if sm is not None:
            env |= {
                "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "13.0",
                "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": sm,
            }
        target = env_dir / "lib" / "python" / "site-packages"  # pip: this Python's, --target
        if installer == "uv":
            argv = [
                uv,
                "pip",
                "install",
                "--python",
                str(python),
                "--preview-features",
                "wheel-variants",
                "--index-url",
                index,
                "vext",
            ]
        else:
            argv = [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--isolated",
                "-q",
                "--target",
                str(target),
                "--index-url",
                index,
                "vext",
            ]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (info,) = env_dir.glob("lib/python*/site-packages/vext-1.0+cu130.dist-info")
        return (info / "variant.json").is_file()

    assert installed("8.6", "uv")  # sm_80 serves 8.6
    assert not installed("9.0", "uv")  # nothing serves 9.0: the plain wheel
    assert not installed(None, "pip")


def test_the_variants_switch_is_an_input_and_stores_each_verified_wheels_copy(
    tmp_path: Path,
) -> None:
    """[farm] variants = true changes every job's id (what a job publishes changes); a job
    stores its verified wheel and, with the switch, the variant copy archguard wheel wrote."""
    from archguard.farm.jobs import _store_verified

    manifest = farm(tmp_path / "m")
    before = ids(manifest)
    manifest.write_text("[farm]\nvariants = true\n\n" + manifest.read_text())
    assert load_manifest(manifest).variants is True
    assert changed(before, ids(manifest)) == {f"{p}/{c}" for p, c in before}  # every job
    site = tmp_path / "site"
    built = tmp_path / "built"
    plain = real_wheel(built, "pv-1.0+cu130-cp311-cp311-linux_x86_64.whl", [])
    copy = real_wheel(built / "variants", "pv-1.0+cu130-cp311-cp311-linux_x86_64.whl", [])
    copy = copy.rename(copy.with_name("pv-1.0+cu130-cp311-cp311-linux_x86_64-a1b2c3d4.whl"))
    for variants, expected in ((False, [plain.name]), (True, [plain.name, copy.name])):
        outcome = Outcome("j", "pv", "c13", Status.BUILT)
        outcome.details = [WheelFacts(str(plain), 1, (), True, variant=str(copy))]
        shutil.copy(plain, tmp_path / "keep.whl")  # storing moves it
        shutil.copy(copy, tmp_path / "keep-variant.whl")
        _store_verified(outcome, site, variants)
        assert outcome.wheels == expected
        assert all(p.is_file() for p in outcome.stored(site))
        shutil.copy(tmp_path / "keep.whl", plain)
        shutil.copy(tmp_path / "keep-variant.whl", copy)
    bad = tmp_path / "bad.toml"
    bad.write_text('[farm]\nvariants = "yes"\nvariant = true\n')
    with pytest.raises(ConfigError) as err:
        load_manifest(bad)
    assert "variants = 'yes' must be true or false" in str(err.value)
    assert "variant" in str(err.value)  # the unknown key, named
