"""archguard.nvcc.parallel and archguard.detect.machine: the choice at the edges the issue names,
with the machine given as data; and the cgroup / meminfo parsers on real file formats."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from archguard.detect.machine import (
    Machine,
    detect_machine,
    parse_cfs,
    parse_cpu_max,
    parse_meminfo,
    parse_memory_limit,
)
from archguard.nvcc.flags import threads_flag
from archguard.nvcc.parallel import GIB, Decided, Workload, choose, device_compiles


def machine(cores: int, gib: float) -> Machine:
    return Machine(cores, "test", int(gib * GIB), "test")


EDGES = [
    # (what, cores, GiB, cuda, cxx, targets, decided jobs, decided threads, jobs, threads)
    ("1 core", 1, 24, 2, 1, 8, None, None, 1, 1),
    ("2 cores, the benchmark's extension", 2, 24, 2, 1, 6, None, None, 2, 1),
    ("64 cores with 8 GiB: memory bounds it", 64, 8, 4, 1, 8, None, None, 2, 1),
    ("64 cores with 8 GiB, one .cu", 64, 8, 1, 0, 8, None, None, 1, 2),
    ("one .cu with 6 targets on 16 cores", 16, 128, 1, 0, 6, None, None, 1, 6),
    ("one .cu with 6 targets and a binding on 2 cores", 2, 24, 1, 1, 6, None, None, 2, 2),
    ("30 .cu files with 1 target on 16 cores", 16, 128, 30, 0, 1, None, None, 16, 1),
    ("30 .cu files with 1 target on 2 cores", 2, 24, 30, 0, 1, None, None, 2, 1),
    ("a package that already passes --threads 4, 16 cores", 16, 128, 4, 1, 8, None, 4, 4, 4),
    ("a package that already passes --threads 4, 2 cores", 2, 24, 2, 1, 8, None, 4, 1, 4),
    ("MAX_JOBS=1 set by the user, 2 cores", 2, 24, 2, 1, 8, 1, None, 1, 2),
    ("MAX_JOBS=1 and NVCC_THREADS=1: nothing chosen", 8, 64, 2, 1, 8, 1, 1, 1, 1),
]


@pytest.mark.parametrize("case", EDGES, ids=[c[0] for c in EDGES])
def test_the_choice_at_the_edges(case: tuple) -> None:  # type: ignore[type-arg]
    _, cores, gib, cu, cxx, targets, jobs, threads, want_jobs, want_threads = case
    choice = choose(
        machine(cores, gib),
        Workload(cu, cxx, targets),
        Decided(jobs, "MAX_JOBS") if jobs else None,
        Decided(threads, "the package's nvcc flags") if threads else None,
    )
    assert (choice.jobs, choice.threads) == (want_jobs, want_threads)
    # what someone decided always wins, and says who
    if jobs:
        assert choice.jobs == jobs and choice.jobs_from == "set by MAX_JOBS"
    if threads:
        assert choice.threads == threads and "package" in choice.threads_from
    # never more compiler threads than memory holds (3 GiB each), unless someone decided;
    # never more CUDA compiler processes than cores
    if not jobs and not threads:
        assert choice.jobs * choice.threads <= max(1, int(gib // 3)) or choice.jobs == 1
        assert min(cu, choice.jobs) * choice.threads <= max(1, min(cores, int(gib // 3)))


def test_the_reason_names_every_input() -> None:
    choice = choose(machine(2, 24), Workload(2, 1, 8))
    assert choice.why == (
        "2 cores (test), 24.0 GiB memory (test: room for 8 compiler threads at 3 GiB each), "
        "2 CUDA and 1 C++ source, 8 device compiles (virtual archs) per CUDA source"
    )
    assert choice.summary == "2 parallel compile jobs (chosen), nvcc --threads 1 (chosen)"


def test_device_compiles_count_virtual_archs() -> None:
    """A cubin and the PTX of the same virtual arch are one cicc run (nvcc --time shows it);
    the benchmark's list, 6 cubins and 2 PTX, is 6 device compiles."""
    from archguard.core.arch import parse_arch_list
    from archguard.core.toolkit import known_arches
    from archguard.nvcc.flags import gencode_flags

    benchmark = parse_arch_list("7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX", "test", known=known_arches())
    assert len(gencode_flags(benchmark)) == 8 and device_compiles(gencode_flags(benchmark)) == 6
    assert device_compiles([]) == 0
    assert device_compiles(["-gencode=arch=compute_90,code=sm_90"]) == 1
    assert (
        device_compiles(
            [
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_90,code=compute_90",
                "-gencode=arch=compute_90a,code=sm_90a",
            ]
        )
        == 2
    )


@pytest.mark.parametrize(
    ("args", "found"),
    [
        (["-O2", "--threads", "4"], (4, "--threads 4")),
        (["--threads=8"], (8, "--threads=8")),
        (["-t", "2"], (2, "-t 2")),
        (["-t4"], (4, "-t4")),
        (["-O2", "-Xptxas=-v"], None),
        (["--threads"], None),
    ],
)
def test_threads_flag(args: list[str], found: tuple[int, str] | None) -> None:
    assert threads_flag(args) == found


def test_cgroup_and_meminfo_parsers() -> None:
    assert parse_cpu_max("200000 100000\n") == 2.0
    assert parse_cpu_max("150000 100000") == 1.5
    assert parse_cpu_max("max 100000") is None
    assert parse_cfs("-1", "100000") is None and parse_cfs("400000\n", "100000\n") == 4.0
    assert parse_meminfo("MemTotal: 100 kB\nMemAvailable:   2048 kB\n") == 2048 * 1024
    assert parse_memory_limit("max") is None
    assert parse_memory_limit("9223372036854771712") is None  # v1 "no limit"
    assert parse_memory_limit(str(8 * GIB), str(2 * GIB)) == 6 * GIB


def test_detect_machine_reads_a_cgroup_tree(tmp_path: Path) -> None:
    """A container with 16 CPUs in its affinity, a 3.5-CPU quota and a 6 GiB limit."""
    cg = tmp_path / "sys" / "fs" / "cgroup"
    cg.mkdir(parents=True)
    (cg / "cpu.max").write_text("350000 100000\n")
    (cg / "memory.max").write_text(f"{6 * GIB}\n")
    (cg / "memory.current").write_text(f"{1 * GIB}\n")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text(f"MemAvailable: {100 * 1024 * 1024} kB\n")
    found = detect_machine(tmp_path, affinity=lambda: 16)
    assert found.cores == 3 and "cgroup quota 3.5" in found.cores_from
    assert found.memory == 5 * GIB and found.memory_from == "cgroup memory limit"


def test_detect_machine_on_this_machine_is_sane() -> None:
    found = detect_machine()
    assert found.cores >= 1 and found.memory > 0


@pytest.mark.parametrize(
    ("environ", "jobs", "threads", "warned"),
    [
        ({"MAX_JOBS": "0"}, None, None, ["MAX_JOBS='0' is not a positive whole number"]),
        ({"MAX_JOBS": " 4"}, 4, None, []),
        ({"MAX_JOBS": "four", "NVCC_THREADS": "2"}, None, 2, ["MAX_JOBS='four'"]),
        ({"NVCC_THREADS": "-1"}, None, None, ["NVCC_THREADS='-1'"]),
        ({}, None, None, []),
    ],
)
def test_one_reading_of_the_parallel_settings(
    environ: dict[str, str], jobs: int | None, threads: int | None, warned: list[str]
) -> None:
    from archguard.nvcc.parallel import asked

    got = asked(environ)
    assert (got.jobs.value if got.jobs else None) == jobs
    assert (got.threads.value if got.threads else None) == threads
    assert len(got.warnings) == len(warned)
    assert all(w in g for w, g in zip(warned, got.warnings, strict=True))


def test_the_package_own_threads_win_over_nvcc_threads_and_the_table() -> None:
    from archguard.nvcc.parallel import asked
    from archguard.settings.model import PackageConfig

    table = PackageConfig("pyproject", max_jobs=5, nvcc_threads=6)
    got = asked(
        {"NVCC_THREADS": "3", "MAX_JOBS": "2"},
        table,
        Decided(4, "extension e's nvcc flags ('--threads 4')"),
    )
    assert (got.jobs, got.threads) == (
        Decided(2, "MAX_JOBS"),
        Decided(4, "extension e's nvcc flags ('--threads 4')"),
    )
    alone = asked({}, table)
    assert (alone.jobs, alone.threads) == (
        Decided(5, "pyproject max_jobs"),
        Decided(6, "pyproject nvcc_threads"),
    )


def test_a_serial_build_gets_the_cores_as_nvcc_threads() -> None:
    """use_ninja=False: one compile at a time, so nvcc --threads takes the cores (bounded by
    the device compiles and the memory); MAX_JOBS cannot change that mode."""
    from archguard.nvcc.parallel import Asked, BuildMode, RunsAs, decided_parallelism

    work = Workload(cuda_sources=3, cxx_sources=0, targets=4)
    serial = decided_parallelism(
        machine(2, 24),
        work,
        Asked(Decided(2, "MAX_JOBS")),
        RunsAs(BuildMode.SERIAL, "use_ninja=False"),
    )
    assert (serial.jobs, serial.threads, serial.threads_from) == (1, 2, "chosen")
    assert serial.summary == (
        "setuptools compiles one source at a time (use_ninja=False): nvcc --threads 2 (chosen)"
    )
    ninja = decided_parallelism(machine(2, 24), work, Asked(Decided(2, "MAX_JOBS")))
    assert (ninja.jobs, ninja.threads) == (2, 1)
    assert (
        decided_parallelism(machine(16, 128), work, Asked(), RunsAs(BuildMode.SERIAL)).threads == 4
    )
    assert decided_parallelism(machine(16, 6), work, Asked(), RunsAs(BuildMode.SERIAL)).threads == 2
    shared = decided_parallelism(machine(8, 64), work, Asked(), RunsAs(BuildMode.SERIAL, "x", 2))
    assert shared.threads == 4 and "shared by 2 extensions" in shared.why


@pytest.mark.parametrize(
    ("setup", "said"),
    [
        ('nvcc = ["-O2", "--threads", "2"]\n', "set by setup.py:1's nvcc flags ('--threads 2')"),
        ('flags = ("-t4",)\n', "set by setup.py:1's nvcc flags ('-t4')"),
        ("n = 3\nflags = ['--threads', str(n)]\n", "(chosen)"),  # built at run time
        ("this is not python(\n", "(chosen)"),
    ],
)
def test_explain_reads_the_threads_setup_py_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: str, said: str
) -> None:
    """explain reads the `--threads` a package's setup.py writes in a flag list (as the
    build will find it on the extension), never running setup.py; a list built at run time
    or a file that does not parse leaves the choice to archguard."""
    from realtools import run_main

    (tmp_path / "setup.py").write_text(setup)
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    monkeypatch.setenv("MAX_JOBS", "1")
    proc = run_main("explain", "--project", str(tmp_path), "--cuda", "13.0", "--torch", "2.13")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    threads = re.search(r"nvcc --threads \d+ (\((?:chosen|set by [^)]*\)[^)]*)\))", text)
    assert threads, text
    assert said in threads[0]
