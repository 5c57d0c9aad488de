"""Builds running at once on one machine never share a writable directory (SPEC section 8,
"Isolated"; issue 47): two ``archguard wheel`` runs of one sdist, two ``farm run``s of one
tree into two sites, each in a directory of its own; the shared caches made once, whole.

The processes really overlap: the package's ``build_ext`` waits at a barrier (a folder where
each build leaves its working directory) until every build of the test has arrived, and the
second is started once the first is there, as a job started a little later finds one already
building; so each one compiles and links while the other is in its build. Before the fix, the
second removed the first one's tree under it (``<cache>/src/tree-<digest>/``, ``<cache>/src/
<sha256 prefix>/``) and the first failed (its barrier says so: the file it left in its own
tree was gone). The lock and the atomic helpers they stand on are tested across processes
first, each able to fail without its lock."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from archguard._fs import (
    atomic_directory,
    atomic_file,
    file_lock,
    hold_lock,
    own_directory,
    write_atomic,
)
from realtools import (
    MINI,
    build_env,
    extension,
    needs_cu130,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    pyproject,
    setup_py,
)

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
WAIT_S = 300  # what a barrier waits for the other builds before it fails the build


def python(code: str, *args: object) -> subprocess.Popen[str]:
    """``code`` in a new Python process (this one's archguard), started now."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(procs: list[subprocess.Popen[str]], timeout: float = 120) -> list[str]:
    """Each process's stdout, once every one has exited 0."""
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-3000:]
        outs.append(out.strip())
    return outs


# A process at the barrier: it leaves its pid in GATE and waits until COUNT have.
ARRIVE = """
import os, sys, time
from pathlib import Path
gate, count = Path(sys.argv[1]), int(sys.argv[2])
(gate / str(os.getpid())).write_text("")
deadline = time.monotonic() + 60
while len(list(gate.iterdir())) < count:
    assert time.monotonic() < deadline, "the other processes never came"
    time.sleep(0.01)
"""


# Holds own_directory(BASE) while at the barrier, then prints which directory it held.
HOLD = """
import os, sys, time
from pathlib import Path
from archguard._fs import own_directory
gate, count, base = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
with own_directory(base) as mine:
    (gate / str(os.getpid())).write_text("")
    deadline = time.monotonic() + 60
    while len(list(gate.iterdir())) < count:
        assert time.monotonic() < deadline, "the other processes never came"
        time.sleep(0.01)
    print(mine)
"""


def test_a_builds_directory_is_its_own_while_it_runs_and_the_same_when_alone(
    tmp_path: Path,
) -> None:
    """Three processes holding ``own_directory`` at once get three directories; alone, a
    process gets the first, the same path as before (a compile cache's keys hold it)."""
    together, alone = tmp_path / "together", tmp_path / "alone"
    together.mkdir()
    alone.mkdir()
    base = tmp_path / "cache" / "src" / "abc"
    outs = finished([python(HOLD, together, 3, base) for _ in range(3)])
    assert sorted(outs) == [str(base), f"{base}.2", f"{base}.3"]
    assert finished([python(HOLD, alone, 1, base)]) == [str(base)]


def test_a_lock_is_exclusive_across_processes(tmp_path: Path) -> None:
    """While one process holds a lock, another's try fails at once and its wait lasts until
    the first lets go: their turns never interleave."""
    target, log = tmp_path / "entry", tmp_path / "log"
    trying = tmp_path / "trying"
    holder = python(
        "import sys, time\n"
        "from pathlib import Path\n"
        "from archguard._fs import file_lock\n"
        "target, log, trying = map(Path, sys.argv[1:4])\n"
        "with file_lock(target):\n"
        "    with log.open('a') as f: f.write('A in\\n')\n"
        "    deadline = time.monotonic() + 60\n"
        "    while not trying.exists():\n"
        "        assert time.monotonic() < deadline\n"
        "        time.sleep(0.01)\n"
        "    time.sleep(0.5)  # the other process is in flock(2), waiting\n"
        "    with log.open('a') as f: f.write('A out\\n')\n",
        target,
        log,
        trying,
    )
    deadline = time.monotonic() + 60
    while not log.exists():
        assert time.monotonic() < deadline and holder.poll() is None
        time.sleep(0.01)
    with file_lock(target, wait=False) as got:
        assert got is False  # held by the other process: refused at once
    waiter = python(
        "import sys\n"
        "from pathlib import Path\n"
        "from archguard._fs import file_lock\n"
        "target, log, trying = map(Path, sys.argv[1:4])\n"
        "trying.write_text('')\n"
        "with file_lock(target) as got:\n"
        "    with log.open('a') as f: f.write(f'B in {got}\\n')\n",
        target,
        log,
        trying,
    )
    finished([holder, waiter])
    assert log.read_text().splitlines() == ["A in", "A out", "B in True"]
    with file_lock(target, wait=False) as got:
        assert got is True  # both let go


def test_one_lock_shared_exclusive_and_probed(tmp_path: Path) -> None:
    """archguard's one flock: shared holds stand together and keep an exclusive one out
    (each hold opens the file anew, so two in one process are two holders, as two processes
    are); a probe of a lock file that is not there finds it free and makes nothing."""
    lock = tmp_path / "deep" / "lock"
    with hold_lock(lock, shared=True) as first, hold_lock(lock, shared=True, wait=False) as second:
        assert first is True and second is True
        with hold_lock(lock, wait=False) as exclusive:
            assert exclusive is False  # refused at once, not waited for
        with hold_lock(lock, wait=False, create=False) as probed:
            assert probed is False  # a probe sees the holders too
    with hold_lock(lock, wait=False) as exclusive:
        assert exclusive is True  # both let go
        with hold_lock(lock, shared=True, wait=False, create=False) as probed:
            assert probed is False
    missing = tmp_path / "none" / "lock"
    with hold_lock(missing, wait=False, create=False) as probed:
        assert probed is True
    assert not missing.parent.exists()


def test_a_cache_entry_is_made_once_whole_by_processes_at_once(tmp_path: Path) -> None:
    """Four processes making one entry at once: one makes it (the others wait on its lock,
    then find it made), each finds it whole, and no partial directory is left."""
    gate, target = tmp_path / "gate", tmp_path / "cache" / "entry"
    gate.mkdir()
    code = (
        ARRIVE
        + "from archguard._fs import atomic_directory\n"
        + "with atomic_directory(Path(sys.argv[3])) as partial:\n"
        + "    if partial is not None:\n"
        + "        (partial / 'half').write_text('')\n"
        + "        time.sleep(0.5)  # the others arrive meanwhile\n"
        + "        (partial / 'whole').write_text(str(os.getpid()))\n"
        + "print('made' if partial is not None else 'found',"
        + " sorted(p.name for p in Path(sys.argv[3]).iterdir()))\n"
    )
    outs = finished([python(code, gate, 4, target) for _ in range(4)])
    assert sorted(o.split()[0] for o in outs) == ["found", "found", "found", "made"]
    assert {o.split(" ", 1)[1] for o in outs} == {"['half', 'whole']"}
    assert sorted(p.name for p in target.parent.iterdir()) == [".entry.lock", "entry"]


def test_what_a_killed_maker_left_goes_and_no_other_entrys(tmp_path: Path) -> None:
    """A maker killed midway leaves its partial directory; the next maker of that entry
    removes it, never the partial of another entry whose name starts alike."""
    target = tmp_path / "release" / "foo-1.0"
    killed = target.with_name(".foo-1.0.0123456789ab.partial")
    other = target.with_name(".foo-1.0.1.0123456789ab.partial")  # foo-1.0.1's, being made
    for left in (killed, other):
        left.mkdir(parents=True)
    with atomic_directory(target) as partial:
        assert partial is not None
        (partial / "foo-1.0.tar.gz").write_text("")
    assert not killed.exists() and other.is_dir() and (target / "foo-1.0.tar.gz").is_file()
    with atomic_directory(target) as again:
        assert again is None  # made: nothing to do


def test_a_file_is_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "records" / "job.json"
    write_atomic(target, "old")
    with pytest.raises(RuntimeError), atomic_file(target) as partial:
        partial.write_text("half")
        raise RuntimeError("killed midway")
    assert target.read_text() == "old" and [p.name for p in target.parent.iterdir()] == ["job.json"]
    # a writer that reads the name it writes (a wheel's) gets the target's own name
    with atomic_file(target, own_name=True) as partial:
        assert partial.name == "job.json" and partial.parent.parent == target.parent
        partial.write_bytes(b"new")
    assert target.read_text() == "new" and len(list(target.parent.iterdir())) == 1


def test_a_directory_held_by_this_process_is_not_given_again(tmp_path: Path) -> None:
    """Threads of one farm run are kept apart too (each lock is its own descriptor)."""
    base = tmp_path / "tree-0123"
    with own_directory(base) as first, own_directory(base) as second:
        assert (first, second) == (base, base.with_name("tree-0123.2"))
    with own_directory(base) as again:
        assert again == base


# --- the builds: a tiny kernel (no torch headers), one arch, overlapping at a barrier ---

BARRIER = """\
import os, time
from pathlib import Path


class Barrier(BuildExtension):
    \"\"\"Waits, before compiling, until every build of the test is in its build.\"\"\"

    def run(self):
        gate, mine = Path(os.environ["AG_TEST_BARRIER"]), Path(f"barrier-{{os.getpid()}}")
        mine.write_text("")  # in this build's tree: another build must leave it alone
        (gate / str(os.getpid())).write_text(os.getcwd())
        deadline = time.monotonic() + {wait}
        while len(list(gate.iterdir())) < int(os.environ["AG_TEST_BARRIER_COUNT"]):
            if time.monotonic() > deadline:
                raise SystemExit("barrier: the other build never came")
            time.sleep(0.05)
        if not mine.is_file():
            raise SystemExit(f"barrier: another build replaced this one's tree {{os.getcwd()}}")
        super().run()
"""


def barrier_package(root: Path) -> Path:
    """tests/packages/minicuda's kernel as a package whose build waits at the barrier."""
    root.mkdir(parents=True)
    for name in ("kernel.cu", "mod.c"):
        (root / name).write_text((MINI / name).read_text())
    ext = extension("_minicuda", ["mod.c", "kernel.cu"])
    text = setup_py(
        "barrier",
        [ext],
        prelude=BARRIER.format(wait=WAIT_S),
        cmdclass='cmdclass={"build_ext": Barrier},',
    )
    (root / "setup.py").write_text(text)
    (root / "pyproject.toml").write_text(pyproject())
    return root


def at_the_barrier(gate: Path) -> list[Path]:
    """Where each build that reached the barrier worked (its setup.py's directory), in the
    order they came."""
    return [Path(p.read_text()) for p in sorted(gate.iterdir(), key=lambda p: p.stat().st_mtime)]


def overlapping(runs: list[list[str]], env: dict[str, str], tmp: Path) -> list[str]:
    """``archguard RUN`` for each run, the next started once the one before is in its build
    (at the barrier, where it waits for the rest), as the second of two jobs started a
    little later finds the first: each one's stdout, once all have exited 0."""
    gate = Path(env["AG_TEST_BARRIER"])
    procs: list[subprocess.Popen[str]] = []
    logs: list[Path] = []
    for number, argv in enumerate(runs, 1):
        if procs:
            deadline = time.monotonic() + WAIT_S
            while len(list(gate.iterdir())) < number - 1:
                assert procs[-1].poll() is None, logs[-1].read_text()[-6000:]
                assert time.monotonic() < deadline, "the build before never reached its build"
                time.sleep(0.05)
        logs.append(tmp / f"run-{number}.log")
        with logs[-1].open("w") as err:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "archguard", *argv],
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    env=env,
                )
            )
    outs = []
    for proc, log in zip(procs, logs, strict=True):
        out, _ = proc.communicate(timeout=WAIT_S + 300)
        assert proc.returncode == 0, (out + log.read_text())[-6000:]
        outs.append(out)
    return outs


@pytest.mark.slow
@needs_nvcc
@needs_cuda_torch
@needs_cuobjdump
def test_two_archguard_wheels_of_one_sdist_at_once_both_build(tmp_path: Path) -> None:
    """Both unpack the sdist (its stable path, then the next), both build at once from their
    own tree, both wheels are verified."""
    src = barrier_package(tmp_path / "barrier-1.0")
    archive = tmp_path / "barrier-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname="barrier-1.0")
    gate, cache = tmp_path / "gate", tmp_path / "xdg"
    gate.mkdir()
    env = build_env(
        ARCHGUARD_ARCH_LIST="8.0",
        XDG_CACHE_HOME=str(cache),
        AG_TEST_BARRIER=str(gate),
        AG_TEST_BARRIER_COUNT="2",
    )
    overlapping(
        [["wheel", str(archive), "-w", str(tmp_path / run)] for run in ("one", "two")],
        env,
        tmp_path,
    )
    for run in ("one", "two"):
        (wheel,) = (tmp_path / run).glob("barrier-1.0*.whl")
        assert wheel.stat().st_size > 0
    base = cache / "archguard" / "src" / hashlib.sha256(archive.read_bytes()).hexdigest()[:16]
    trees = at_the_barrier(gate)
    assert trees == [base / "barrier-1.0", Path(f"{base}.2") / "barrier-1.0"], trees


MANIFEST = f"""\
[[cell]]
name = "torch2.13"
python = "{PYTHON}"
torch = "torch==2.13.0"
cuda = "13.0"

[[package]]
name = "barrier"
source = "src/barrier"
config = {{ arch_list = "8.0" }}
"""


@pytest.fixture(scope="module")
def two_sites(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """A farm of one cell and the barrier package, and two sites whose cell environment is
    made already (by the farm's own code, with uv, whose cache links the second's torch)."""
    from archguard.farm.envs import cell_venv
    from archguard.farm.manifest import load_manifest

    root = tmp_path_factory.mktemp("isolated-farm")
    barrier_package(root / "src" / "barrier")
    manifest = root / "farm.toml"
    manifest.write_text(MANIFEST)
    (cell,) = load_manifest(manifest).cells
    sites = [root / "nightly", root / "release"]
    for site in sites:
        cell_venv(cell, site)
    return manifest, sites


@pytest.mark.slow
@pytest.mark.network  # the cell's torch: from the session's uv cache, else the index
@needs_nvcc
@needs_cuda_torch
@needs_cuobjdump
@needs_cu130
def test_two_farm_runs_of_one_tree_into_two_sites_at_once_both_publish(
    two_sites: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """Two farm runs of one manifest (two sites: nightly and release; one ~/.cache) at
    once: each copies the tree to a directory of its own, both build at once, both
    publish."""
    manifest, sites = two_sites
    gate, cache = tmp_path / "gate", tmp_path / "xdg"
    gate.mkdir()
    env = build_env(XDG_CACHE_HOME=str(cache), AG_TEST_BARRIER=str(gate))
    env["AG_TEST_BARRIER_COUNT"] = "2"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    runs = [["farm", "run", str(manifest), "-o", str(site), "--no-repair"] for site in sites]
    outs = overlapping(runs, env, tmp_path)
    for out, site in zip(outs, sites, strict=True):
        assert "archguard farm run: 1 built" in out, out
        index = (site / "torch2.13" / "simple" / "barrier" / "index.html").read_text()
        assert ">barrier-1.0+cu130-cp" in index  # no torch symbol: the CUDA label alone
    copies = sorted((cache / "archguard" / "src").glob("tree-*/barrier"))
    assert len(copies) == 2 and copies[1].parent.name == f"{copies[0].parent.name}.2", copies
    assert at_the_barrier(gate) == copies  # the first at the stable path, the next beside it
