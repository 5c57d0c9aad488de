"""A farm that can be trusted, for real (issue 40): two small packages (tests/packages/
minicuda's kernel, no torch headers) x two cells (torch 2.13.0 and 2.14.1, CUDA builds, each
cell's environment made with uv), real nvcc, cuobjdump and auditwheel.

- Killed (SIGKILL, the whole process group) at six moments spread over its run and resumed
  each time, the farm ends with the indexes an uninterrupted run of another checkout into
  another site gives, sha256 for sha256 (issue 50), while a reader polling
  the site never saw an index missing, or naming a wheel that is missing or not the bytes it
  advertises. A wheel corrupted on disk is built again; a second run on the same site is
  refused, naming the first.
- Each input only the builder knows rebuilds exactly the jobs it touches: a file of a tree,
  the torch a cell's environment holds, the toolkit the build finds; ``--only`` keeps every
  other job in every index. (The inputs a plan knows, by content: tests/test_farm_publish.py.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from archguard.detect.sources import file_sha256
from archguard.farm.ledger import all_ledgers, store_path
from archguard.farm.publish import read_links
from realtools import (
    CUDA_HOME,
    MINI,
    build_env,
    cli,
    extension,
    needs_cu130,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    pyproject,
    setup_py,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.network,  # uv fetches each cell's torch (its cache links it after)
    needs_nvcc,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_cu130,
]
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
CELLS = ("torch2.13", "torch2.14", "cu130")  # cu130: the CUDA line's index, both cells'
MANIFEST = f"""\
[[cell]]
name = "torch2.13"
python = "{PYTHON}"
torch = "torch==2.13.0"
cuda = "13.0"

[[cell]]
name = "torch2.14"
python = "{PYTHON}"
torch = "torch==2.14.1"
cuda = "13.0"

[[package]]
name = "alpha"
source = "src/alpha"
config = {{ arch_list = "8.0" }}

[[package]]
name = "beta"
source = "src/beta"
config = {{ arch_list = "8.0" }}
"""


def make_farm(root: Path, packages: tuple[str, ...] = ("alpha", "beta")) -> Path:
    for name in packages:
        tree = root / "src" / name
        tree.mkdir(parents=True)
        for f in ("kernel.cu", "mod.c"):
            shutil.copy(MINI / f, tree / f)
        # linked with libstdc++ (the kernel's host code is C++), so that it imports
        ext = extension("_minicuda", ["mod.c", "kernel.cu"])
        ext = ext.replace(
            "extra_compile_args=", 'extra_link_args=["-lstdc++"], extra_compile_args='
        )
        (tree / "setup.py").write_text(setup_py(name, [ext]))
        (tree / "pyproject.toml").write_text(pyproject())
    manifest = root / "farm.toml"
    more = "".join(
        f'\n[[package]]\nname = "{name}"\nsource = "src/{name}"\nconfig = {{ arch_list = "8.0" }}\n'
        for name in packages
        if name not in ("alpha", "beta")
    )
    manifest.write_text(MANIFEST + more)
    return manifest


_CACHE: list[Path] = []  # this module's archguard cache (set by the fixture below)


@pytest.fixture(scope="module", autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """An archguard cache of this module's own: its cells' environments (content-addressed,
    shared by every site on a cache) are changed by hand below, which no other module's
    farm may see."""
    _CACHE[:] = [tmp_path_factory.mktemp("archguard-cache")]


def env_for_farm(**extra: str) -> dict[str, str]:
    env = build_env(**{"ARCHGUARD_CACHE_DIR": str(_CACHE[0]), **extra})
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # uv
    return env


def farm_run(
    manifest: Path, site: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return cli("farm", "run", str(manifest), "-o", str(site), *args, env=env or env_for_farm())


def indexes(site: Path) -> dict[str, dict[str, str]]:
    """Each cell's published index: wheel name -> the sha256 it advertises."""
    return {cell: dict(read_links(site / cell / "simple")) for cell in CELLS}


def names(site: Path) -> dict[str, set[str]]:
    return {cell: set(index) for cell, index in indexes(site).items()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, set[str]]]:
    """An uninterrupted run of the farm: its manifest, its site, its indexes' wheel names."""
    root = tmp_path_factory.mktemp("reference")
    manifest = make_farm(root)
    site = root / "site"
    proc = farm_run(manifest, site)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert "4 built, 0 already built" in proc.stdout
    # the torch each cell really holds, as the plan shows it once known
    shown = cli("farm", "plan", str(manifest), "--site", str(site), env=env_for_farm())
    assert "cell torch2.13 holds torch 2.13.0+cu130 (CUDA 13.0) on Python" in shown.stdout
    assert "cell torch2.14 holds torch 2.14.1+cu130 (CUDA 13.0) on Python" in shown.stdout
    return manifest, site, names(site)


class Reader(threading.Thread):
    """A reader polling every cell's index as an installer would: once an index has been
    seen it must always be there, and every wheel it names must be in place, whole, with
    the sha256 it advertises."""

    def __init__(self, site: Path) -> None:
        super().__init__(daemon=True)
        self.site = site
        self.problems: list[str] = []
        self.reads = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        seen: set[str] = set()
        while not self.stopping.is_set():
            for cell in CELLS:
                index = self.site / cell / "simple"
                if cell not in seen and not index.exists():
                    continue
                seen.add(cell)
                try:
                    (index / "index.html").read_text()
                    links = read_links(index)
                except OSError as exc:
                    self.problems.append(f"{cell}: no index: {exc}")
                    continue
                for name, sha in links:
                    path = store_path(self.site, name, sha)
                    try:
                        found = file_sha256(path)
                    except OSError as exc:
                        self.problems.append(f"{cell}: {name}: {exc}")
                        continue
                    if found != sha:
                        self.problems.append(f"{cell}: {name}: sha256 {found}, not {sha}")
                self.reads += 1
            time.sleep(0.01)


def killed_at(
    manifest: Path,
    site: Path,
    pattern: str,
    delay: float,
    then: tuple[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """A farm run, killed (SIGKILL, its whole process group: pip, nvcc, uv) ``delay``
    seconds after a line of its log matches ``pattern`` (and, with ``then``, a line of the
    site's file ``then[0]`` matches ``then[1]``: a moment inside a job, which a fixed delay
    misses on a fast machine); the log up to then."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "archguard", "farm", "run", str(manifest), "-o", str(site)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env or env_for_farm(),
        start_new_session=True,
    )
    assert proc.stderr is not None
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if re.search(pattern, line):
                if then is not None:
                    wait_for_line(site / then[0], then[1], proc)
                time.sleep(delay)
                break
        else:
            pytest.fail(f"the run ended before {pattern!r}:\n{''.join(lines)[-3000:]}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return "".join(lines)


def wait_for_line(path: Path, pattern: str, proc: subprocess.Popen[str]) -> None:
    """Until a line of ``path`` (a job's log, written as it builds) matches ``pattern``."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if path.exists() and re.search(pattern, path.read_text(errors="replace"), re.M):
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {path.name} said {pattern!r}")
        time.sleep(0.05)
    pytest.fail(f"{path} never said {pattern!r}")


# Six moments over a run of 2 packages x 2 cells (each run resumes what the last left):
MOMENTS: list[tuple[str, float, tuple[str, str] | None]] = [
    (r"cell torch2\.13: making its environment", 3.0, None),  # uv installing the cell's torch
    (r"\[1/4\] alpha in torch2\.13: building", 6.0, None),  # nvcc compiling
    # its ledger written, the site publishing
    (r"\[1/4\] alpha in torch2\.13: built in", 0.0, None),
    (r"\[2/4\] alpha in torch2\.14: building", 0.5, None),  # pip starting, in a fresh cell
    (r"\[3/4\] beta in torch2\.13: built in", 0.0, None),
    # pip done, the wheel's read-back and auditwheel running (after what its log says last)
    (
        r"\[4/4\] beta in torch2\.14: building",
        0.3,
        ("torch2.14/logs/beta.log", r"^Successfully built beta"),
    ),
]


def installed_beside(site: Path, target: Path) -> subprocess.CompletedProcess[str]:
    """What is published installs: alpha from torch2.13's index, beside that cell (never
    into it: every site with the cell shares its environment), imported with its torch."""
    python = site / ".farm" / "envs" / "torch2.13" / "bin" / "python"
    index = (site / "torch2.13" / "simple").as_uri()
    pip = [str(python), "-m", "pip", "install", "--isolated", "-q", "--no-deps"]
    installed = subprocess.run(
        [*pip, "--target", str(target), "--index-url", index, "alpha"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    return subprocess.run(
        [str(python), "-c", "import torch, _minicuda"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(target)},
        check=False,
    )


def test_a_farm_killed_at_six_moments_resumes_to_the_uninterrupted_site(
    reference: tuple[Path, Path, dict[str, set[str]]], tmp_path: Path
) -> None:
    _, reference_site, expected = reference
    manifest = make_farm(tmp_path)
    site = tmp_path / "site"
    # a cache of its own: its cells' environments are made (and killed while made) afresh,
    # at other paths than the reference's
    own = env_for_farm(ARCHGUARD_CACHE_DIR=str(tmp_path / "cache"))
    reader = Reader(site)
    reader.start()
    logs = []
    try:
        for moment in MOMENTS:
            logs.append(killed_at(manifest, site, *moment, env=own))
        final = farm_run(manifest, site, env=own)
    finally:
        reader.stopping.set()
        reader.join()
    assert final.returncode == 0, (final.stdout + final.stderr)[-6000:]
    # every resumed run found the killed run's lock and took it over, saying so
    for log in [*logs[1:], final.stderr]:
        assert "took over the lock of" in log and "ended without letting it go" in log
    # a job built before a kill was kept, its wheel checked
    assert "sha256 checked): not built again" in final.stderr
    # each killed run's tokens died with it: the next run found the machine's jobserver idle
    # and made it anew, whole, removing what the killed run left; none is ever stuck
    for log in [*logs[1:], final.stderr]:
        assert "jobserver: the machine's, " in log and "(made by this run;" in log, log[-3000:]
    assert list((tmp_path / "cache" / "jobserver").glob("*/users/*")) == []
    assert names(site) == expected
    # byte for byte: every index advertises the sha256 the uninterrupted run's does (another
    # checkout path, another site, builds killed and resumed: the same bytes, issue 50)
    assert indexes(site) == indexes(reference_site)
    assert not reader.problems, reader.problems[:10]
    assert reader.reads > 100
    verified = cli("farm", "verify", str(site), env=own)
    # each cell's index (2 + 2) and the CUDA line's: alpha and beta link no torch, so each
    # cell's wheel has the same name (+cu130) and the line lists one of each (2)
    assert verified.returncode == 0 and "6 published wheel(s) read: OK" in verified.stdout
    imported = installed_beside(site, tmp_path / "installed")
    assert imported.returncode == 0, imported.stderr[-2000:]

    # a wheel corrupted on disk is built again, never republished; a second run on the
    # same site meanwhile is refused, naming the first
    ledgers = all_ledgers(site)
    (victim,) = [r for r in ledgers.values() if (r.package, r.cell) == ("alpha", "torch2.14")]
    path = victim.stored(site)[0]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    first = subprocess.Popen(
        [sys.executable, "-m", "archguard", "farm", "run", str(manifest), "-o", str(site)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=own,
    )
    assert first.stderr is not None
    said = []
    for line in first.stderr:
        said.append(line)
        if "alpha in torch2.14: building" in line:
            break
    second = farm_run(manifest, site, env=own)
    rest, _ = first.communicate()
    assert first.returncode == 0, "".join(said)[-3000:]
    assert second.returncode == 2 and f"pid {first.pid} on " in second.stderr, second.stderr
    assert "alpha in torch2.14: built again: its wheel" in "".join(said)
    assert "1 built, 3 already built" in rest
    assert cli("farm", "verify", str(site), env=own).returncode == 0


# runs before test_each_builder_input_rebuilds_exactly_its_jobs, which changes the
# reference's tree, toolkit and torch
def test_a_second_builder_rebuilds_a_cell_to_the_same_bytes_and_names_a_tampered_section(
    reference: tuple[Path, Path, dict[str, set[str]]], tmp_path: Path
) -> None:
    """`farm verify SITE --rebuild MANIFEST`: the jobs of one cell built again in a scratch
    site; beta's wheel is the same bytes; alpha's, tampered in a copy of the site (one byte
    of its .so's .text, re-zipped, its ledger saying the new sha256), is named with its
    member and section."""
    from archguard.detect.elf import sections
    from archguard.farm.ledger import write_ledger

    manifest, site, _ = reference
    copy = tmp_path / "site"
    shutil.copytree(site, copy, symlinks=True, ignore=shutil.ignore_patterns("envs"))
    ledgers = all_ledgers(copy)
    alpha = next(r for r in ledgers.values() if (r.package, r.cell) == ("alpha", "torch2.13"))
    beta = next(r for r in ledgers.values() if (r.package, r.cell) == ("beta", "torch2.13"))
    (name,) = alpha.wheels
    original = store_path(copy, name, alpha.sha256[name])
    tampered = tmp_path / name
    with zipfile.ZipFile(original) as zin, zipfile.ZipFile(tampered, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith(".so"):
                text = next(s for s in sections(data) if s.name == ".text")
                changed = bytearray(data)
                changed[text.offset + 8] ^= 0xFF
                data = bytes(changed)
                member = info.filename
            zout.writestr(info, data)
    sha = file_sha256(tampered)
    target = store_path(copy, name, sha)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(tampered, target)
    alpha.sha256[name] = sha
    write_ledger(copy, alpha)
    proc = cli(
        "farm",
        "verify",
        str(copy),
        "--rebuild",
        str(manifest),
        "--only",
        "torch2.13",
        env=env_for_farm(),
    )
    out = proc.stdout
    assert proc.returncode == 1, (out + proc.stderr)[-6000:]
    (beta_wheel,) = beta.wheels
    assert f"identical  {beta_wheel}  (job {beta.job}, cell torch2.13" in out
    assert f"DIFFERS  {name}  (job {alpha.job}, cell torch2.13)" in out
    assert f"{member}: ELF sections .text differ" in out
    assert "1 of 2 wheel(s) rebuilt to the same bytes" in out


def test_each_builder_input_rebuilds_exactly_its_jobs(
    reference: tuple[Path, Path, dict[str, set[str]]],
) -> None:
    manifest, site, _ = reference
    same = farm_run(manifest, site)
    assert "0 built, 4 already built" in same.stdout, same.stdout + same.stderr[-3000:]

    # a file of alpha's tree; only alpha selected: alpha's two jobs, and beta's wheels stay
    # in every index and on the page
    kernel = manifest.parent / "src" / "alpha" / "kernel.cu"
    kernel.write_text(kernel.read_text() + "// reviewed\n")
    edited = farm_run(manifest, site, "--only", "alpha")
    assert edited.returncode == 0, edited.stderr[-3000:]
    assert "2 built, 0 already built" in edited.stdout
    for cell, wheels in names(site).items():
        assert any(w.startswith("beta-") for w in wheels), (cell, wheels)
        assert any(w.startswith("alpha-") for w in wheels), (cell, wheels)
    page = (site / "index.html").read_text()
    assert page.count('class="kept"') == 2 and page.count('class="built"') == 2

    # the torch a cell's environment really holds (changed there by hand): that cell's jobs
    python = site / ".farm" / "envs" / "torch2.14" / "bin" / "python"
    uv = shutil.which("uv", path=env_for_farm()["PATH"])
    assert uv is not None
    swapped = subprocess.run(
        [uv, "pip", "install", "--python", str(python), "torch==2.13.0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert swapped.returncode == 0, swapped.stderr[-2000:]
    held = farm_run(manifest, site)
    assert held.returncode == 0, held.stderr[-3000:]
    assert "2 built, 2 already built" in held.stdout, held.stdout
    assert held.stderr.count("in torch2.14: built again: its inputs changed (held)") == 2

    # the toolkit the build finds (CUDA 13.2 from NVIDIA's wheels): beta's jobs, selected
    other = os.environ.get("AG_TEST_OTHER_CUDA_HOME")
    if not other:
        pytest.fail("AG_TEST_OTHER_CUDA_HOME is unset (scripts/setup_env.sh assembles CUDA 13.2)")
    toolkit = farm_run(manifest, site, "--only", "beta", env=env_for_farm(CUDA_HOME=other))
    assert toolkit.returncode == 0, toolkit.stderr[-3000:]
    assert "2 built, 0 already built" in toolkit.stdout
    assert toolkit.stderr.count("built again: its inputs changed (toolkit)") == 2
    # built with 13.2 beside the cells' cu130 torch: labelled and lined for the torch's index
    # (the row rule), the toolkit that wrote its PTX named in site.json; alpha's untouched
    assert all(any(w.startswith("beta-1.0+cu130") for w in ws) for ws in names(site).values())
    data = json.loads((site / "site.json").read_text())
    compiled = {(w["package"], w.get("compiled_with")) for w in data["wheels"]}
    assert compiled == {("beta", "13.2"), ("alpha", None)}, compiled
    assert cli("farm", "verify", str(site), env=env_for_farm()).returncode == 0


FARM_RUN = [sys.executable, "-m", "archguard", "farm", "run"]


def test_a_prune_during_a_farm_run_removes_nothing_it_needs_and_the_run_publishes(
    reference: tuple[Path, Path, dict[str, set[str]]], tmp_path: Path
) -> None:
    """Issue 57: ``archguard cache prune --max-size 0`` (everything it may remove), run again
    and again on the farm's cache while a farm run builds a cell: the run publishes what the
    uninterrupted one did, and the prunes kept what it held (its cell's environment). Then a
    run with ``ARCHGUARD_CACHE_MAX`` below what it uses ends within it, and the next run makes
    its environment again and publishes the same sha256."""
    manifest, _, expected = reference
    site = tmp_path / "site"
    env = env_for_farm()
    run = subprocess.Popen(
        [*FARM_RUN, str(manifest), "-o", str(site), "--only", "torch2.13"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    prunes: list[str] = []
    while run.poll() is None:
        prune = cli("cache", "prune", "--max-size", "0", env=env)
        assert prune.returncode in (0, 1), prune.stderr  # 1: over budget, in-use entries kept
        prunes.append(prune.stdout + prune.stderr)
        time.sleep(0.5)
    out, err = run.communicate()
    assert run.returncode == 0, (out + err)[-6000:]
    assert names(site)["torch2.13"] == expected["torch2.13"]
    held = [p for p in prunes if re.search(r"kept env envs/\S+ \(.*\): in use by another", p)]
    assert held, prunes[-3:]  # a prune ran while the run held its cell's environment
    assert all("Traceback" not in p for p in prunes)
    published = indexes(site)["torch2.13"]
    # a budget below what the run uses (1 byte): the run, done, lets go of its own entries
    # and ends within it; the next run makes what it needs again and publishes the same bytes
    within = farm_run(
        manifest, site, "--only", "torch2.13", env={**env, "ARCHGUARD_CACHE_MAX": "1"}
    )
    assert within.returncode == 0, (within.stdout + within.stderr)[-6000:]
    assert "(ARCHGUARD_CACHE_MAX 1 B; " in within.stdout and "over budget" not in within.stdout
    assert not list((_CACHE[0] / "envs").glob("torch2.13-*")), within.stdout
    again = farm_run(manifest, site, "--only", "torch2.13", env=env)
    assert again.returncode == 0, (again.stdout + again.stderr)[-6000:]
    assert "cell torch2.13: making its environment" in again.stderr
    assert indexes(site)["torch2.13"] == published


def _nvcc_probed(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A farm's environment whose builds run a probe as nvcc (``PYTORCH_NVCC``, which
    archguard's launcher runs), logging each start and end to the log returned; the
    jobserver is the machine's (no ``ARCHGUARD_JOBSERVER``, no ``MAX_JOBS``)."""
    from test_jobserver import PROBE

    log = tmp_path / "nvcc.log"
    probe = tmp_path / "nvcc-probe"
    probe.write_text(PROBE.format(log=log, nvcc=f"{CUDA_HOME}/bin/nvcc"))
    probe.chmod(0o755)
    env = env_for_farm(PYTORCH_NVCC=str(probe))
    env.pop("ARCHGUARD_JOBSERVER", None)
    env.pop("MAX_JOBS", None)
    return log, env


def test_two_farm_runs_started_together_share_the_machines_jobserver(
    reference: tuple[Path, Path, dict[str, set[str]]], tmp_path: Path
) -> None:
    """Issue 57: two farm runs on one machine (two sites, one cache), started together with
    ``--jobs 2`` each, join one jobserver, the machine's: a probe as each build's nvcc
    (``PYTORCH_NVCC``, which archguard's launcher runs) logs each start and end, and never
    more nvcc processes or threads run at once than the machine's tokens, where each run
    alone would run 2 (4 together). Both publish what the reference run did."""
    from test_jobserver import _most_at_once

    manifest, _, expected = reference
    log, env = _nvcc_probed(tmp_path)
    argv = [*FARM_RUN, str(manifest), "--only", "torch2.13", "--jobs", "2"]
    runs = [
        subprocess.Popen(
            [*argv, "-o", str(tmp_path / f"site{n}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in (1, 2)
    ]
    said = [run.communicate() for run in runs]
    for run, (out, err) in zip(runs, said, strict=True):
        assert run.returncode == 0, (out + err)[-6000:]
    logs = "".join(out + err for out, err in said)
    widths = {int(w) for w in re.findall(r"jobserver: the machine's, (\d+) tokens? \(", logs)}
    assert len(widths) == 1, logs[-6000:]  # both joined one jobserver, of one width
    (width,) = widths
    assert "(made by this run;" in logs and "(joined;" in logs, logs[-6000:]
    for n in (1, 2):
        assert names(tmp_path / f"site{n}")["torch2.13"] == expected["torch2.13"]
    starts = [line for line in log.read_text().splitlines() if line.startswith("start")]
    assert len(starts) == 4, starts  # two packages x two runs, one .cu each
    most_procs, most_threads = _most_at_once(log)
    assert most_procs <= width and most_threads <= width, (most_procs, most_threads, width)
    assert most_procs >= 2  # the runs did build side by side (4 at once with static shares)
    # both left the machine's jobserver: no user of it is left under the cache
    assert not list((_CACHE[0] / "jobserver").glob("*/users/*")), logs[-3000:]


def test_a_job_started_ahead_prepares_while_the_others_compile_within_the_tokens(
    reference: tuple[Path, Path, dict[str, set[str]]], tmp_path: Path
) -> None:
    """Issue 57's tail: three packages, ``--jobs 2``, one cell. With the jobserver a third
    job is started ahead (the default), so all three have started before the first ends (with
    ``--ahead 0`` the third starts only as one ends, and then runs alone), and a probe as each
    build's nvcc shows that the compiles still never outnumber the machine's tokens. All
    three publish."""
    from test_jobserver import _most_at_once

    manifest = make_farm(tmp_path, ("alpha", "beta", "gamma"))
    log, env = _nvcc_probed(tmp_path)
    site = tmp_path / "site"
    run = farm_run(manifest, site, "--only", "torch2.13", "--jobs", "2", env=env)
    said = run.stdout + run.stderr
    assert run.returncode == 0, said[-6000:]
    assert "jobs: 2 at once and 1 ahead" in said, said[-6000:]
    lines = [line for line in said.splitlines() if "in torch2.13: " in line]
    first_end = next(n for n, line in enumerate(lines) if ": built in " in line)
    started = [line for line in lines[:first_end] if ": building (" in line]
    assert len(started) == 3, lines  # all three at once: the third did not wait for an end
    (width,) = {int(w) for w in re.findall(r"jobserver: the machine's, (\d+) tokens? \(", said)}
    most_procs, most_threads = _most_at_once(log)
    assert most_procs <= width and most_threads <= width, (most_procs, most_threads, width)
    published = dict(read_links(site / "torch2.13" / "simple"))
    assert {name.split("-")[0] for name in published} == {"alpha", "beta", "gamma"}
