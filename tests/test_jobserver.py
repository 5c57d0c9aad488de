"""The jobserver (issue 51): one set of tokens (GNU make's FIFO protocol) shared by every
build, ninja 1.13 as its client, archguard's nvcc launcher taking the free tokens for
``--threads``. The protocol, the launcher and a killed holder are tested on real processes
and a real FIFO; the jobserver's bound on two concurrent real builds by a probe that counts the
nvcc processes running at once; the fallback on the real ninja 1.11 of this machine."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from archguard import jobserver, nvcc_steps
from archguard.jobserver import Client, Server, device_compiles, fifo_of
from realtools import CUDA_HOME, build_env, needs_cuda_torch, needs_nvcc, pip_wheel

HERE = Path(__file__).resolve().parent
LAUNCHER = [sys.executable, "-I", "-S", nvcc_steps.__file__]
NEW_NINJA = Path(sys.executable).parent / "ninja"  # the ninja package: 1.13.2
OLD_NINJA = Path("/usr/bin/ninja")  # this machine's (Debian's 1.11.1)


def test_makeflags_names_the_fifo_and_nothing_else() -> None:
    assert fifo_of("-j4 --jobserver-auth=fifo:/tmp/js") == "/tmp/js"
    assert fifo_of("--jobserver-auth=fifo:/a --jobserver-auth=fifo:/b") == "/b"  # make: last
    assert fifo_of("-j4 --jobserver-auth=3,4") is None  # inherited fds: pip does not keep them
    assert fifo_of("--jobserver-auth=fifo:/a --jobserver-auth=3,4") is None
    assert fifo_of("-j4") is None and fifo_of("") is None
    assert fifo_of("--jobserver-auth=fifo:") is None


def test_a_hostile_makeflags_is_read_in_linear_time() -> None:
    started = time.process_time()
    assert fifo_of("--jobserver-auth=fifo:" + "x" * 2_000_000 + " -j" * 200_000) == "x" * 2_000_000
    assert fifo_of("--jobserver-auth=" * 300_000) is None
    assert time.process_time() - started < 2.0


def test_device_compiles_from_an_nvcc_line() -> None:
    line = [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_90,code=[sm_90,compute_90]",
        "-gencode=arch=compute_80,code=compute_80",
        "--generate-code=arch=compute_100a,code=sm_100a",
    ]
    assert device_compiles(line) == 3
    assert device_compiles(["-c", "k.cu"]) == 1


def test_a_jobserver_hands_out_its_tokens_and_takes_them_back(tmp_path: Path) -> None:
    server = Server(tmp_path, 3)
    client = Client(fifo_of(server.makeflags) or "")
    got = client.take(5)
    assert got == b"+++" and client.take(1) == b""  # never more than the jobserver holds
    client.give(got[:2])
    assert client.take(5) == b"++"
    client.give(b"++")
    assert server.close() == 2  # one is still held: said by whoever closes it
    assert not server.path.exists()
    client.close()


def test_a_killed_holder_leaves_no_stuck_tokens_for_the_next_run(tmp_path: Path) -> None:
    """A run that served a jobserver and was killed (SIGKILL, holding every token) leaves its FIFO;
    the next server in the directory removes it and has all its tokens."""
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(Path(jobserver.__file__).parent.parent)!r})
        from pathlib import Path
        from archguard.jobserver import Server
        server = Server(Path({str(tmp_path)!r}), 2)
        assert server.client.take(2) == b"++"
        print(server.path, flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    left = Path(proc.stdout.readline().strip())
    proc.send_signal(signal.SIGKILL)
    proc.communicate()  # closes its pipe
    assert left.exists()
    server = Server(tmp_path, 2)
    assert server.stale == [left.name] and not left.exists()
    assert server.client.take(3) == b"++"
    server.client.give(b"++")
    assert server.close() == 2


def _probe(tmp_path: Path) -> Path:
    """A command that prints the arguments it got, then sleeps until killed or 0.3 s."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sys, time\nprint(' '.join(sys.argv[1:]), flush=True)\n"
        "time.sleep(float(sys.argv[1]) if sys.argv[1:] and sys.argv[1][0].isdigit() else 0.3)\n"
    )
    return probe


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)


def _version(tool: str) -> str:
    return subprocess.run([tool, "--version"], capture_output=True, text=True, check=False).stdout


def test_the_launcher_takes_free_tokens_for_threads_and_gives_them_back(tmp_path: Path) -> None:
    server = Server(tmp_path / "server", 5)
    fifo = str(server.path)
    env = dict(os.environ)
    probe = [sys.executable, str(_probe(tmp_path))]
    four = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in (75, 80, 86, 90)]
    ran = _run([*LAUNCHER, fifo, *probe, *four], env)
    assert ran.returncode == 0 and ran.stdout.split()[-2:] == ["--threads", "4"], ran.stdout
    # two compiles at once: the second finds what the first left (5 - 3 = 2 tokens: 3 threads)
    first = subprocess.Popen([*LAUNCHER, fifo, *probe, "2", *four], stdout=subprocess.PIPE)
    time.sleep(1.0)
    second = _run([*LAUNCHER, fifo, *probe, *four], env)
    assert second.stdout.split()[-2:] == ["--threads", "3"], second.stdout
    first.communicate()  # closes its pipe
    # a compile that names its own threads, or whose jobserver is gone, runs as it is
    own = _run([*LAUNCHER, fifo, *probe, *four, "--threads", "2"], env)
    assert own.stdout.split()[-2:] == ["--threads", "2"]
    alone = _run([*LAUNCHER, str(tmp_path / "gone"), *probe, *four], env)
    assert alone.returncode == 0 and "--threads" not in alone.stdout
    assert server.close() == 5


def test_a_launcher_stopped_by_a_signal_gives_its_tokens_back(tmp_path: Path) -> None:
    server = Server(tmp_path / "server", 3)
    probe = [sys.executable, str(_probe(tmp_path)), "30"]
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in (80, 90)]
    proc = subprocess.Popen([*LAUNCHER, str(server.path), *probe, *gencode], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().split()[-2:] == [b"--threads", b"2"]
    assert server.client.take(3) == b"++"  # it holds one
    server.client.give(b"++")
    proc.send_signal(signal.SIGTERM)  # forwarded to the compile, then the token goes back
    proc.communicate(timeout=30)  # closes its pipe
    assert server.close() == 3


# a kernel whose device passes each take a while (cicc unrolls it), no torch headers
SLOW_KERNEL = """
template <int N> __device__ float step(float x) { return step<N - 1>(x * 1.0001f + 0.5f); }
template <> __device__ float step<0>(float x) { return x; }
__global__ void k(float* x) {
  float v = x[threadIdx.x];
#pragma unroll
  for (int i = 0; i < 64; ++i) v = step<200>(v) + i;
  x[threadIdx.x] = v;
}
int host(float* x) { k<<<1, 32>>>(x); return 0; }
"""
THREE = [
    "-gencode=arch=compute_75,code=sm_75",
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
]


def _nvcc_line(tmp_path: Path) -> list[str]:
    (tmp_path / "k.cu").write_text(SLOW_KERNEL)
    source, obj = str(tmp_path / "k.cu"), str(tmp_path / "k.o")
    return [
        f"{CUDA_HOME}/bin/nvcc",
        "-objtemp",
        "-c",
        source,
        "-o",
        obj,
        *THREE,
        "-Xcompiler",
        "-fPIC",
    ]


@needs_nvcc
def test_the_launcher_runs_nvccs_steps_itself_to_nvccs_own_bytes(tmp_path: Path) -> None:
    """Issue 57: a plain nvcc with -objtemp and three device passes is run step by step (its
    own ``-dryrun`` steps, each pass on a token of its own): the object is nvcc's own, byte
    for byte (nvcc with --threads 3, the same object path), and every token comes back."""
    argv = _nvcc_line(tmp_path)
    plan = nvcc_steps.dry_run(argv)
    assert plan is not None and len(plan.passes) == 3, plan
    assert all(p[0].startswith("gcc ") and "ptxas " in p[-1] for p in plan.passes), plan.passes
    # each cicc makes the module id itself, so no pass waits for cudafe++
    assert plan.module_id == f"{tmp_path}/k.o.module_id"
    assert all("--gen_module_id_file" in p[1] for p in plan.passes)
    assert plan.module_ids == [f"{plan.module_id}.{i}" for i in range(3)]
    assert subprocess.run([*argv, "--threads", "3"], check=False).returncode == 0
    own = (tmp_path / "k.o").read_bytes()
    (tmp_path / "k.o").unlink()
    server = Server(tmp_path / "server", 2)
    ran = subprocess.run([*LAUNCHER, str(server.path), *argv], check=False)
    assert ran.returncode == 0
    assert (tmp_path / "k.o").read_bytes() == own
    assert not list(tmp_path.glob("k.o.*"))  # nvcc's intermediates removed, as nvcc does
    # with the dependency file torch's ninja asks for: the same object, the same files named
    depfile = tmp_path / "k.o.d"
    with_deps = [*argv, "--generate-dependencies-with-compile", "--dependency-output", str(depfile)]
    assert subprocess.run([*with_deps, "--threads", "3"], check=False).returncode == 0
    own_deps = _deps(depfile.read_text())
    depfile.unlink()
    assert nvcc_steps.dry_run(with_deps) is not None
    assert subprocess.run([*LAUNCHER, str(server.path), *with_deps], check=False).returncode == 0
    assert (tmp_path / "k.o").read_bytes() == own
    assert _deps(depfile.read_text()) == own_deps and len(own_deps[1]) > 50
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.cu", "k.o", "k.o.d", "server"]
    # what it does not run step by step: one device pass, no -objtemp, not nvcc itself
    assert nvcc_steps.dry_run([*argv[:-5], "-Xcompiler", "-fPIC"]) is None
    assert nvcc_steps.dry_run([a for a in argv if a != "-objtemp"]) is None
    assert nvcc_steps.dry_run(["sccache", *argv]) is None
    assert server.close() == 2


@needs_nvcc
def test_a_pass_whose_module_id_differs_from_cudafes_runs_again_as_nvcc_lists_it(
    tmp_path: Path,
) -> None:
    """The passes run beside cudafe++ on a module id each cicc makes itself; one whose id is
    not cudafe++'s runs its cicc and ptxas again exactly as nvcc lists them. Here the first
    pass's id is made to differ and its cubin is spoiled: the object is still nvcc's own, so
    the pass ran again, and no id file is left."""
    argv = _nvcc_line(tmp_path)
    assert subprocess.run([*argv, "--threads", "3"], check=False).returncode == 0
    own = (tmp_path / "k.o").read_bytes()
    (tmp_path / "k.o").unlink()
    plan = nvcc_steps.dry_run(argv)
    assert plan is not None and plan.module_id is not None
    # cudafe++ names the stub file the host compile includes but does not write it (the last
    # cicc does): the host side and the passes never write one file at once
    assert nvcc_steps._Steps(plan.env).run(plan.before) == 0
    assert not list(tmp_path.glob("*.stub.c")) and Path(plan.module_id).is_file()
    cubin = plan.passes[0][-1].rsplit("-o ", 1)[1].strip().strip('"')
    spoil = f'echo other >> "{plan.module_ids[0]}"; echo spoiled > "{cubin}"'
    plan.passes[0] = [*plan.passes[0], spoil]
    server = Server(tmp_path / "server", 2)
    client = Client(str(server.path))
    assert nvcc_steps.run_steps(plan, client, nvcc_steps._Steps(plan.env)) == 0
    assert (tmp_path / "k.o").read_bytes() == own
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.cu", "k.o", "server"]
    client.close()
    assert server.close() == 2


@needs_nvcc
def test_a_stepwise_compile_in_a_folder_with_spaces_and_one_stopped_by_a_signal(
    tmp_path: Path,
) -> None:
    """nvcc lists its removals unquoted (``rm sp ace/k.o.compute_90.cubin``): the launcher
    removes them itself, so a tree under a folder with a space builds as with nvcc. A compile
    stopped by SIGTERM while its passes run ends (its steps stopped, no hang), gives every
    token back and leaves none of nvcc's intermediates."""
    spaced = tmp_path / "sp ace"
    spaced.mkdir()
    argv = _nvcc_line(spaced)
    server = Server(tmp_path / "server", 2)
    ran = subprocess.run([*LAUNCHER, str(server.path), *argv], check=False)
    assert ran.returncode == 0
    assert sorted(p.name for p in spaced.iterdir()) == ["k.cu", "k.o"]
    (spaced / "k.o").unlink()
    compile_ = subprocess.Popen([*LAUNCHER, str(server.path), *argv])
    deadline = time.monotonic() + 60
    while not list(spaced.glob("k.o.compute_*.ii")) and time.monotonic() < deadline:
        time.sleep(0.01)  # until its device passes run
    compile_.send_signal(signal.SIGTERM)
    assert compile_.wait(timeout=60) != 0
    time.sleep(0.5)
    assert sorted(p.name for p in spaced.iterdir()) == ["k.cu"]
    assert server.close() == 2


def _deps(text: str) -> tuple[str, set[str]]:
    target, _, body = text.partition(":")
    return target.strip(), set(body.replace("\\\n", " ").split())


def test_dependency_files_merge_into_one_rule_naming_each_file_once(tmp_path: Path) -> None:
    depfile = tmp_path / "k.o.d"
    (tmp_path / "k.o.d.host").write_text("k.o: k.cu a.h \\\n  my\\ dir/b.h\n")
    (tmp_path / "k.o.d.0").write_text("k.o: k.cu a.h dev.cuh\n")
    (tmp_path / "k.o.d.1").write_text("k.o: k.cu \\\n dev.cuh other.cuh\n")
    nvcc_steps.merge_deps(str(depfile), 2)
    assert depfile.read_text() == (
        "k.o : \\\n    k.cu \\\n    a.h \\\n    my\\ dir/b.h \\\n    dev.cuh \\\n    other.cuh\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.o.d"]


def test_steps_of_a_kind_not_measured_are_left_to_nvcc() -> None:
    """Relocatable device code (nvlink), a step among the passes that is no preprocessing,
    cicc or ptxas, a pass whose cicc is not its preprocessing's arch: nvcc runs whole."""
    pre = 'gcc -D__CUDA_ARCH_LIST__=800,900 -E -x c++ "k.cu" -o "k.o.cpp4.ii"'
    fe = 'cudafe++ --gen_module_id_file "k.o.cpp4.ii"'
    passes = [
        f'gcc -D__CUDA_ARCH__={a}0 -D__CUDA_ARCH_LIST__=800,900 -E -x c++ "k.cu" -o "k.o.{a}.ii"'
        for a in (80, 90)
    ]
    cicc = [f'"$CICC_PATH/cicc" -arch compute_{a} "k.o.{a}.ii" -o "k.o.{a}.ptx"' for a in (80, 90)]
    ptxas = [f'ptxas -arch=sm_{a} "k.o.{a}.ptx" -o "k.o.{a}.cubin"' for a in (80, 90)]
    tail = ['fatbinary --create="k.o.fatbin"', 'gcc -c -x c++ "k.o.cudafe1.cpp" -o "k.o"']
    steps = [pre, fe, passes[0], cicc[0], ptxas[0], passes[1], cicc[1], ptxas[1], *tail]
    plan = nvcc_steps._staged({}, steps, "k.o")
    assert plan is not None and [len(p) for p in plan.passes] == [3, 3]
    assert plan.before == [pre, fe] and plan.after == tail
    assert nvcc_steps._staged({}, [*steps[:-1], "nvlink -o k.o"], "k.o") is None
    assert nvcc_steps._staged({}, [*steps[:4], "touch x", *steps[4:]], "k.o") is None
    swapped = [pre, fe, passes[0], cicc[1], ptxas[1], passes[1], cicc[0], ptxas[0], *tail]
    assert nvcc_steps._staged({}, swapped, "k.o") is None


def test_each_cicc_makes_the_module_id_itself_only_where_its_cicc_takes_the_option(
    tmp_path: Path,
) -> None:
    """The passes are given ``--gen_module_id_file`` and a file of their own (their cicc and
    ptxas as nvcc lists them kept to run again) only where cudafe++ makes the id, each cicc
    reads that file, and the cicc the steps run names the option; else nvcc's order stands."""
    fe = (
        'cudafe++ --gen_c_file_name "k.o.cudafe1.cpp" --gen_module_id_file '
        '--module_id_file_name "k.o.module_id" "k.o.cpp4.ii"'
    )
    steps = [
        'gcc -D__CUDA_ARCH_LIST__=800,900 -E -x c++ "k.cu" -o "k.o.cpp4.ii"',
        fe,
        *[
            step
            for a in (80, 90)
            for step in (
                f'gcc -D__CUDA_ARCH__={a}0 -D__CUDA_ARCH_LIST__=800,900 -E -x c++ "k.cu" '
                f'-o "k.o.{a}.ii"',
                f'"$CICC_PATH/cicc" -arch compute_{a} --module_id_file_name "k.o.module_id" '
                f'"k.o.{a}.ii" -o "k.o.{a}.ptx"',
                f'ptxas -arch=sm_{a} "k.o.{a}.ptx" -o "k.o.{a}.cubin"',
            )
        ],
        'fatbinary --create="k.o.fatbin"',
        'gcc -c -x c++ "k.o.cudafe1.cpp" -o "k.o"',
    ]
    cicc = tmp_path / "cicc"
    cicc.write_bytes(b"\x7fELF...--gen_module_id_file...")
    plan = nvcc_steps._staged({"CICC_PATH": str(tmp_path)}, steps, "k.o")
    assert plan is not None and plan.module_id == "k.o.module_id"
    assert plan.module_ids == ["k.o.module_id.0", "k.o.module_id.1"]
    assert plan.passes[1][1] == (
        '"$CICC_PATH/cicc" -arch compute_90 --gen_module_id_file --module_id_file_name '
        '"k.o.module_id.1" "k.o.90.ii" -o "k.o.90.ptx"'
    )
    assert plan.redo == [steps[3:5], steps[6:8]]  # nvcc's own cicc and ptxas
    # a cicc that does not name the option, or none where the steps run it: nvcc's order
    cicc.write_bytes(b"\x7fELF... an older cicc ...")
    old = nvcc_steps._staged({"CICC_PATH": str(tmp_path)}, steps, "k.o")
    assert old is not None and old.module_id is None and old.passes[0][1] == steps[3]
    gone = nvcc_steps._staged({"CICC_PATH": str(tmp_path / "none")}, steps, "k.o")
    assert gone is not None and gone.module_id is None
    # a cicc that reads another file than the one cudafe++ makes: nvcc's order
    other = [s.replace('"k.o.module_id" "k.o.90', '"x.module_id" "k.o.90') for s in steps]
    cicc.write_bytes(b"--gen_module_id_file")
    moved = nvcc_steps._staged({"CICC_PATH": str(tmp_path)}, other, "k.o")
    assert moved is not None and moved.module_id is None


def test_a_failed_chain_ends_the_others_and_its_code_is_the_compiles(tmp_path: Path) -> None:
    """The host side and the device passes run side by side and parse the same source: the
    first to fail ends the others (its error is not printed again by each), its exit code is
    the compile's, no chain left waiting starts, and every token comes back."""
    server = Server(tmp_path / "server", 2)
    client = Client(str(server.path))
    steps = nvcc_steps._Steps(dict(os.environ))
    never = tmp_path / "never"
    chains = [["sleep 30"], ["sleep 0.3; exit 3"], ["sleep 30"], [f"touch {never}"]]
    started = time.monotonic()
    assert nvcc_steps._chains(chains, client, steps) == 3
    assert time.monotonic() - started < 10
    assert not never.exists()
    client.close()
    assert server.close() == 2


def _taken_within(client: Client, started: float, seconds: float) -> bytes:
    """A token ``client`` takes, tried every 10 ms until ``seconds`` after ``started``
    (b"" where none came free by then)."""
    got = b""
    while not got and time.monotonic() - started < seconds:
        time.sleep(0.01)
        got = client.take(1)
    return got


def test_a_compile_never_holds_a_token_it_does_not_run_on(tmp_path: Path) -> None:
    """Issue 57: the chain on the compile's own token ends first while another runs on a
    taken one; that one goes on on the own token and the taken token goes back at once, so
    a build waiting for a token gets it while the compile still runs (before: held to the
    last chain's end, a core idle beside one cicc for 12 s of a farm run, measured)."""
    server = Server(tmp_path / "server", 1)  # the compile's own token is not in the FIFO
    client = Client(str(server.path))
    other = Client(str(server.path))
    steps = nvcc_steps._Steps(dict(os.environ))
    code: list[int] = []
    compile_ = threading.Thread(
        target=lambda: code.append(nvcc_steps._chains([["sleep 0.3"], ["sleep 4"]], client, steps))
    )
    started = time.monotonic()
    compile_.start()
    while select.select([other.fd], [], [], 0)[0] and time.monotonic() - started < 1:
        time.sleep(0.005)  # until the second chain has taken the free token
    got = _taken_within(other, started, 3)
    waited = time.monotonic() - started
    assert got, "the taken token stayed with the compile to its last chain's end"
    assert 0.25 < waited < 2, waited  # given back as the first chain ended (0.3 s)
    assert compile_.is_alive()  # the second chain still runs, on the compile's own token
    other.give(got)
    compile_.join()
    assert code == [0]
    client.close()
    other.close()
    assert server.close() == 1


@pytest.mark.parametrize("turns", [True, False])
def test_in_archguards_jobserver_a_chains_end_gives_a_waiting_build_its_turn(
    tmp_path: Path, turns: bool
) -> None:
    """Issue 57: three chains, the first on the compile's own token (0.3 s), the second on
    the one free token (4 s), the third (4 s) waiting; another build waits for a token. With
    turns (archguard's jobserver) the first chain's end lends the own token to it at once,
    and the compile takes one back before it ends; without (a caller's make), the third
    chain runs on it and the build waits for the second chain's end. Every token comes back
    either way."""
    server = Server(tmp_path / "server", 1)
    client = Client(str(server.path))
    steps = nvcc_steps._Steps(dict(os.environ))
    chains = [["sleep 0.3"], ["sleep 4"], ["sleep 4"]]
    code: list[int] = []
    compile_ = threading.Thread(
        target=lambda: code.append(nvcc_steps._chains(chains, client, steps, turns))
    )
    compile_.start()
    time.sleep(0.1)  # both tokens taken: the build waits
    other = Client(str(server.path))
    started = time.monotonic()
    got = other.wait_one()
    waited = time.monotonic() - started
    time.sleep(0.5)  # the build compiles on it
    other.give(got)
    compile_.join()
    assert code == [0]
    assert (waited < 1.5) == turns, waited
    client.close()
    other.close()
    assert server.close() == 1


def test_in_turn_a_compile_lets_a_waiting_build_run_before_its_host_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 57: after its device passes a compile lends its own token and takes it back in
    turn, so a build waiting for its first token (no pass done) runs first; the compile then
    goes on on a token taken back, and every token is where it was."""
    monkeypatch.setattr(nvcc_steps, "TURN", 0.5)  # the turn, long enough on a loaded machine
    server = Server(tmp_path / "server", 0)  # every token held: the compile's own only
    client = Client(str(server.path))
    other = Client(str(server.path))
    steps = nvcc_steps._Steps(dict(os.environ))
    code: list[int] = []
    compile_ = threading.Thread(
        target=lambda: code.append(nvcc_steps._chains([["sleep 0.3"]], client, steps, True))
    )
    started = time.monotonic()
    compile_.start()
    got = _taken_within(other, started, 3)
    assert got, "the compile went on to its host side before the waiting build"
    time.sleep(0.5)
    assert compile_.is_alive()  # waiting for a token to go on with
    other.give(got)
    compile_.join(5)
    assert code == [0]
    client.close()
    other.close()
    assert server.close() == 0


@needs_nvcc
def test_a_compile_stopped_while_it_waits_its_turn_ends_within_the_stopped_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compile that lent its own token before its host side and is stopped while no token
    comes back (another holds it) ends within STOPPED_WAIT of the stop, not whenever a token
    comes: a stop seen while it waits counts, not only one before."""
    monkeypatch.setattr(nvcc_steps, "STOPPED_WAIT", 0.5)
    server = Server(tmp_path / "server", 0)
    client = Client(str(server.path))
    other = Client(str(server.path))
    steps = nvcc_steps._Steps(dict(os.environ))
    turns = nvcc_steps._Turns(True)
    waiting = threading.Thread(target=turns.own_back, args=(client, 1, steps))
    started = time.monotonic()
    waiting.start()
    got = other.wait_one()  # the lent token, held: none comes back to the compile
    time.sleep(0.3)
    assert waiting.is_alive()
    stop = time.monotonic()
    steps.stopped.append(signal.SIGTERM)
    waiting.join(5)
    assert not waiting.is_alive(), "a stop while waiting did not end the wait"
    assert time.monotonic() - stop < 2, time.monotonic() - started
    other.give(got)
    client.close()
    other.close()
    server.close()


def test_tokens_freed_after_a_compile_starts_are_used(tmp_path: Path) -> None:
    """Issue 57's tail: a compile that starts while the others hold every token runs its
    first pass on its own token, and its other passes on the tokens given back while it
    runs (before: nvcc --threads 1 to its end, the freed cores idle)."""
    argv = _nvcc_line(tmp_path)
    server = Server(tmp_path / "server", 2)
    held = server.client.take(2)  # the other jobs hold both as it starts
    assert len(held) == 2
    compile_ = subprocess.Popen([*LAUNCHER, str(server.path), *argv])
    time.sleep(0.3)
    assert compile_.poll() is None, "the compile ended too soon to show anything"
    server.client.give(held)  # the others end
    from archguard.detect.machine_jobserver import free_tokens

    lowest = 2
    while compile_.poll() is None:
        lowest = min(lowest, free_tokens(server.client.fd))
        time.sleep(0.005)
    assert compile_.returncode == 0
    assert lowest == 0  # both freed tokens taken by its passes while it ran
    assert server.close() == 2


@pytest.mark.skipif(
    not (shutil.which("make") and "GNU Make 4.3" in _version("make")),
    reason="needs this machine's GNU make 4.3",
)
def test_make_before_4_4_never_sees_the_jobserver_in_makeflags(tmp_path: Path) -> None:
    """GNU make 4.3 stops on a FIFO's name in MAKEFLAGS (measured): archguard passes the jobserver
    to ninja in its own shim, and to a farm's jobs as ARCHGUARD_JOBSERVER=fifo:PATH."""
    from archguard.detect.buildtools import make_reads_fifo

    server = Server(tmp_path / "server", 1)
    (tmp_path / "Makefile").write_text("all:\n\t@echo built\n")
    env = {**os.environ, "MAKEFLAGS": server.makeflags}
    stopped = _run(["make", "-C", str(tmp_path)], env)
    assert stopped.returncode != 0 and "invalid --jobserver-auth string" in stopped.stderr
    assert make_reads_fifo(os.environ["PATH"]) is False
    assert make_reads_fifo(str(tmp_path)) is True  # no make on that PATH: nothing to stop
    server.close()


@pytest.mark.skipif(
    not (NEW_NINJA.is_file() and OLD_NINJA.is_file()), reason="needs ninja 1.13 and an older one"
)
def test_the_build_picks_a_ninja_that_reads_the_jobserver_else_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from archguard._integration.jobserver import build_jobserver
    from archguard.detect.buildtools import make_reads_fifo, ninja_version, pick_ninja
    from archguard.detect.machine import Machine
    from archguard.nvcc.parallel import BuildMode, Choice

    old = ninja_version(str(OLD_NINJA))
    assert old is not None and old < (1, 13), old
    assert pick_ninja("/usr/bin", NEW_NINJA.parent) == (str(NEW_NINJA), (1, 13))
    assert pick_ninja("/usr/bin", tmp_path) == (str(OLD_NINJA), old)
    choices = {"_k": Choice(2, "chosen", 1, "chosen", "2 cores", BuildMode.NINJA)}
    machine = Machine(4, "test", 64 << 30, "test")
    monkeypatch.setenv("PATH", "/usr/bin")
    monkeypatch.delenv("MAKEFLAGS", raising=False)
    monkeypatch.delenv("ARCHGUARD_JOBSERVER", raising=False)
    with build_jobserver(choices, {}, tmp_path / "shim", machine, beside=tmp_path) as joined:
        assert joined.jobs == {"_k": "2"} and not joined.launched  # the static choice
    said = capsys.readouterr().err
    assert "ninja 1.11" in said and "reads no jobserver (ninja 1.13 is the first" in said
    # inside a caller's jobserver, the old ninja runs as many compiles as the tokens free now
    server = Server(tmp_path / "server", 3)
    monkeypatch.setenv("ARCHGUARD_JOBSERVER", f"fifo:{server.path}")
    with build_jobserver(choices, {}, tmp_path / "shim", machine, beside=tmp_path) as joined:
        assert joined.jobs == {"_k": "2"}
        # a farm's jobserver gives a build no token: it took its first, and one more for MAX_JOBS
        assert server.client.take(3) == b"+"
        server.client.give(b"+")
    assert "MAX_JOBS=2, the tokens the jobserver had free" in capsys.readouterr().err
    assert server.close() == 3
    # a jobserver that cannot be opened: the static choice, and no variable names it
    monkeypatch.setenv("ARCHGUARD_JOBSERVER", f"fifo:{tmp_path / 'gone'}")
    with build_jobserver(choices, {}, tmp_path / "shim", machine) as joined:
        assert joined.jobs == {"_k": "2"} and joined.variables["ARCHGUARD_JOBSERVER"] is None
    assert "cannot be opened: the static choice stands" in capsys.readouterr().err
    # the new ninja beside the build's Python: the machine's jobserver, ninja given it in
    # its shim alone (this machine's make 4.3 would stop on it), the launcher for --threads
    monkeypatch.delenv("ARCHGUARD_JOBSERVER")
    monkeypatch.setenv("ARCHGUARD_CACHE_DIR", str(tmp_path / "cache"))  # the machine's, here
    monkeypatch.setenv("MAX_JOBS", "0")  # ignored by archguard: torch would pass ninja -j 0
    variables: dict[str, str | None] = {"PYTORCH_NVCC": "nvcc"}
    with build_jobserver(choices, variables, tmp_path / "shim", machine) as joined:
        assert joined.jobs == {} and joined.launched == {"_k"}
        assert joined.variables["MAX_JOBS"] is None
        made = str(joined.variables["ARCHGUARD_JOBSERVER"]).removeprefix("fifo:")
        assert Path(made).exists()
        shim = (tmp_path / "shim" / "ninja").read_text()
        assert f"exec {NEW_NINJA}" in shim and f"--jobserver-auth=fifo:{made}" in shim
        assert str(joined.variables["PATH"]).startswith(str(tmp_path / "shim"))
        # the build's environment names the jobserver only where its make reads a FIFO's name
        assert ("MAKEFLAGS" in joined.variables) == make_reads_fifo("/usr/bin")
        # archguard's own jobserver (every token one byte): the compiles take turns
        assert str(joined.variables["PYTORCH_NVCC"]).endswith(f"nvcc_steps.py --turns {made} nvcc")
    assert tmp_path / "cache" / "jobserver" in Path(made).parents
    said = capsys.readouterr().err
    assert "jobserver the machine's (made by this build: 4 tokens" in said, said
    assert "takes a token" in said


PROBE = """\
#!/bin/sh
# a caller's PYTORCH_NVCC: one line as each nvcc starts and ends, with the threads it got
threads=$(printf '%s\\n' "$@" | sed -n '/^--threads$/{{n;p;}}')
echo "start $(date +%s.%N) $$ ${{threads:-1}}" >> {log}
{nvcc} "$@"
rc=$?
echo "end $(date +%s.%N) $$ ${{threads:-1}}" >> {log}
exit $rc
"""


def _two_builds(tmp_path: Path, env: dict[str, str]) -> list[subprocess.CompletedProcess[str]]:
    """Two packages of 4 ``.cu`` files each, built side by side in ``env``."""
    from test_parallel_build import package

    roots = [package(tmp_path / name, {"_four": 4}, use_ninja=True) for name in ("a", "b")]
    with ThreadPoolExecutor(2) as both:
        return list(both.map(lambda r: pip_wheel(r, r.parent / "out", env=env), roots))


def _most_at_once(log: Path) -> tuple[int, int]:
    """The most nvcc processes, and the most nvcc threads, running at one moment."""
    events: list[tuple[float, int, int]] = []
    for line in log.read_text().splitlines():
        kind, when, _, got = line.split()
        sign = 1 if kind == "start" else -1
        events.append((float(when), sign, sign * int(got)))
    events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same moment
    procs = threads = most_procs = most_threads = 0
    for _, sign, count in events:
        procs, threads = procs + sign, threads + count
        most_procs, most_threads = max(most_procs, procs), max(most_threads, threads)
    return most_procs, most_threads


@pytest.mark.slow
@needs_nvcc
@needs_cuda_torch
def test_two_concurrent_builds_never_run_more_compiles_than_tokens(tmp_path: Path) -> None:
    """Two real builds (4 .cu files of 3 device compiles each, no MAX_JOBS) side by side in
    one jobserver of 3 tokens, given as a farm run gives it (each build takes its first token as
    its compiles start): never more nvcc processes, nor nvcc threads, than 3, where
    archguard's static choice runs 2 per build (4; measured) and ninja's own default 4 per
    build; every token back at the end."""

    log = tmp_path / "nvcc.log"
    probe = tmp_path / "nvcc-probe"
    probe.write_text(PROBE.format(log=log, nvcc=f"{CUDA_HOME}/bin/nvcc"))
    probe.chmod(0o755)
    server = Server(tmp_path / "server", 3)
    env = build_env(
        ARCHGUARD_ENABLE="1",
        ARCHGUARD_ARCH_LIST="7.5;8.0;9.0",
        ARCHGUARD_JOBSERVER=f"fifo:{server.path}",  # as a farm run gives its jobs
        PYTORCH_NVCC=str(probe),
    )
    env.pop("MAX_JOBS")
    for proc in _two_builds(tmp_path, env):
        said = proc.stdout + proc.stderr
        assert proc.returncode == 0, said[-4000:]
        assert "archguard: parallel: jobserver the farm run's (fifo:" in said
        assert "archguard's nvcc launcher gives each compile --threads 1 + the free tokens" in said
    starts = [line for line in log.read_text().splitlines() if line.startswith("start")]
    assert len(starts) == 8, starts
    most_procs, most_threads = _most_at_once(log)
    assert most_procs <= 3 and most_threads <= 3, (most_procs, most_threads)
    assert most_procs >= 2  # the builds did run side by side
    assert server.close() == 3


def test_archguard_wheel_builds_in_the_machines_jobserver(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``archguard wheel`` joins the machine's jobserver under the cache for all its builds
    (each takes its first token there: the FIFO holds all of them), leaves it as it was, and
    keeps a caller's (a farm job's)."""
    from archguard.detect.machine import detect_machine
    from archguard.frontend.wheel import _one_jobserver
    from archguard.nvcc.parallel import jobserver_width

    monkeypatch.delenv("ARCHGUARD_JOBSERVER", raising=False)
    monkeypatch.delenv("MAKEFLAGS", raising=False)
    monkeypatch.setenv("ARCHGUARD_CACHE_DIR", str(tmp_path / "cache"))
    width = jobserver_width(detect_machine())
    with _one_jobserver():
        fifo = os.environ["ARCHGUARD_JOBSERVER"].removeprefix("fifo:")
        assert tmp_path / "cache" / "jobserver" in Path(fifo).parents
        client = Client(fifo)
        got = b""
        deadline = time.monotonic() + 5
        while len(got) < width and time.monotonic() < deadline:  # moved in as they are taken
            got += client.take(64)
            time.sleep(0.02)
        time.sleep(0.3)
        got += client.take(64)
        assert len(got) == width  # all of the machine's, no more: none is implicit
        client.give(got)
        client.close()
    assert "ARCHGUARD_JOBSERVER" not in os.environ
    monkeypatch.setenv("ARCHGUARD_JOBSERVER", "fifo:/a/farm/fifo")  # a farm job's: kept
    with _one_jobserver():
        assert os.environ["ARCHGUARD_JOBSERVER"] == "fifo:/a/farm/fifo"


@pytest.mark.slow
@needs_nvcc
@needs_cuda_torch
def test_two_builds_started_apart_never_run_more_compiles_than_the_machines_tokens(
    tmp_path: Path,
) -> None:
    """Issue 57: two real builds (4 .cu files of 3 device compiles each) started side by side
    with no jobserver given, as two farm runs or `archguard wheel`s on one machine start
    theirs: both join the machine's under the shared cache, so never more nvcc processes,
    nor nvcc threads, than its tokens (before: a jobserver each, twice as many)."""
    from archguard.detect.machine import detect_machine
    from archguard.nvcc.parallel import jobserver_width

    width = jobserver_width(detect_machine())
    log = tmp_path / "nvcc.log"
    probe = tmp_path / "nvcc-probe"
    probe.write_text(PROBE.format(log=log, nvcc=f"{CUDA_HOME}/bin/nvcc"))
    probe.chmod(0o755)
    env = build_env(
        ARCHGUARD_ENABLE="1",
        ARCHGUARD_ARCH_LIST="7.5;8.0;9.0",
        ARCHGUARD_CACHE_DIR=str(tmp_path / "cache"),
        PYTORCH_NVCC=str(probe),
    )
    env.pop("MAX_JOBS")
    env.pop("MAKEFLAGS", None)
    for proc in _two_builds(tmp_path, env):
        said = proc.stdout + proc.stderr
        assert proc.returncode == 0, said[-4000:]
        assert "archguard: parallel: jobserver the machine's (" in said, said[-3000:]
    starts = [line for line in log.read_text().splitlines() if line.startswith("start")]
    assert len(starts) == 8, starts
    most_procs, most_threads = _most_at_once(log)
    assert most_procs <= width and most_threads <= width, (most_procs, most_threads, width)
    if width >= 2:
        assert most_procs >= 2  # the builds did run side by side
