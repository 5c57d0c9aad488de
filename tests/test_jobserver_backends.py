"""A build whose backend is not setuptools joins the jobserver ``archguard wheel`` is given (a
farm run's): archguard's hook never runs in it, so the front-end takes the build's first
token before the backend runs and gives the build's ninja the jobserver (issue 51: "passes it to
every build"). A real scikit-build-core build, with a probe as CMake's CUDA compiler
launcher counting the nvcc processes at once; the choices on a real FIFO and this machine's
real ninja and make."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from archguard.frontend.jobserver import LEVEL, backend_jobserver, generator_chosen, hook_joins
from archguard.jobserver import Client, Server
from archguard.settings.config import JobserverSetting, jobserver_setting
from realtools import REPO, build_env, cli, copy_tree, needs_cuda_torch, needs_nvcc

NEW_NINJA = Path(sys.executable).parent / "ninja"  # the ninja package: 1.13.2
SKBUILD = "scikit_build_core.build"

LAUNCHER_PROBE = """\
#!/bin/sh
# CMake's CUDA compiler launcher: a line as each compile starts and ends
echo "start $(date +%s.%N) $$ 1" >> {log}
"$@"
rc=$?
echo "end $(date +%s.%N) $$ 1" >> {log}
exit $rc
"""


def _env(server: Server, **more: str) -> dict[str, str]:
    """A farm job's environment: the run's jobserver, the cell's Python's directory first on PATH
    (its ninja 1.13 beside it), this machine's make 4.3 after."""
    return {
        "ARCHGUARD_JOBSERVER": f"fifo:{server.path}",
        "PATH": f"{NEW_NINJA.parent}{os.pathsep}/usr/bin",
        **more,
    }


def test_only_backends_the_hook_never_runs_in_are_joined_from_outside(tmp_path: Path) -> None:
    assert hook_joins("setuptools.build_meta") and hook_joins("setuptools.build_meta:__legacy__")
    assert not hook_joins(SKBUILD) and not hook_joins("mesonpy")
    server = Server(tmp_path / "server", 2)
    said: list[str] = []
    client = Client(str(server.path))
    with backend_jobserver(
        "setuptools.build_meta", _env(server), said.append, source=tmp_path
    ) as joined:
        got = client.take(8)
        assert joined == {} and len(got) == 2  # nothing taken: the hook takes its own
        client.give(got)
    with backend_jobserver(SKBUILD, {"PATH": "/usr/bin"}, said.append, source=tmp_path) as joined:
        assert joined == {}  # no jobserver given: the backend's own choice
    client.close()
    assert said == [] and server.close() == 2


def test_a_cmake_build_gets_ninja_with_the_jobserver_and_holds_its_first_token(
    tmp_path: Path,
) -> None:
    server = Server(tmp_path / "server", 3)
    said: list[str] = []
    env = _env(server, CMAKE_ARGS="-DFOO=1")
    with backend_jobserver(SKBUILD, env, said.append, source=tmp_path) as joined:
        shim = Path(joined["PATH"].split(os.pathsep)[0])
        assert joined["CMAKE_ARGS"] == f"-DCMAKE_MAKE_PROGRAM={shim / 'ninja'} -DFOO=1"
        # a setuptools build behind another backend's name runs the hook: it must not wait
        # for a first token of its own
        assert joined["ARCHGUARD_JOBSERVER"] == f"held:{server.path}"
        assert jobserver_setting(joined) == JobserverSetting(True, str(server.path), True)
        script = (shim / "ninja").read_text()
        assert f"--jobserver-auth=fifo:{server.path}" in script and str(NEW_NINJA) in script
        client = Client(str(server.path))
        assert len(client.take(8)) == 2  # the build holds the third
        client.give(b"++")
        client.close()
    assert not shim.exists()
    (line,) = said
    assert "its first token taken, held by the build of scikit_build_core.build" in line
    assert "ninja takes a token per compile beyond it" in line
    assert server.close() == 3


def test_ninja_that_reads_no_jobserver_runs_as_many_as_the_tokens_free(tmp_path: Path) -> None:
    """A generator that is not ninja (the build then runs as many compiles as the tokens
    free as it starts, held to its end), and a level the caller set (kept: its first token
    only)."""
    server = Server(tmp_path / "server", 3)
    said: list[str] = []
    held = Client(str(server.path))
    one = held.take(1)  # another build holds one
    makefiles = _env(server, CMAKE_GENERATOR="Unix Makefiles")
    with backend_jobserver(SKBUILD, makefiles, said.append, source=tmp_path) as joined:
        assert joined == {LEVEL: "2", "ARCHGUARD_JOBSERVER": f"held:{server.path}"}
        assert held.take(1) == b""  # the build holds the two that were free
    assert "the generator is chosen (CMAKE_GENERATOR=Unix Makefiles): " in said[-1]
    assert "CMAKE_BUILD_PARALLEL_LEVEL=2, the tokens free as it starts" in said[-1]
    level = _env(server, **{LEVEL: "7"})
    with backend_jobserver(SKBUILD, level, said.append, source=tmp_path) as joined:
        assert LEVEL not in joined and "PATH" not in joined
        assert len(held.take(8)) == 1  # the caller's level: its first token only
        held.give(b"+")
    assert "CMAKE_BUILD_PARALLEL_LEVEL=7 is set, which CMake passes as -j" in said[-1]
    held.give(one)
    held.close()
    assert server.close() == 3


def test_the_jobserver_a_build_joins_and_whether_its_first_token_came_with_it() -> None:
    from archguard.errors import ConfigError

    assert jobserver_setting({"ARCHGUARD_JOBSERVER": "fifo:/p"}) == JobserverSetting(True, "/p")
    held = jobserver_setting({"ARCHGUARD_JOBSERVER": "held:/p"})
    assert held == JobserverSetting(on=True, fifo="/p", token_held=True)
    made = {"MAKEFLAGS": "-j4 --jobserver-auth=fifo:/m"}
    assert jobserver_setting(made) == JobserverSetting(True, "/m", token_held=True)  # make's
    assert jobserver_setting({}) == JobserverSetting(True, None)  # one of the build's own
    assert jobserver_setting({"ARCHGUARD_JOBSERVER": "1", **made}).fifo == "/m"
    assert jobserver_setting({"ARCHGUARD_JOBSERVER": "0", **made}) == JobserverSetting(on=False)
    with pytest.raises(ConfigError, match=r"ARCHGUARD_JOBSERVER='maybe' is neither on"):
        jobserver_setting({"ARCHGUARD_JOBSERVER": "maybe"})
    for empty in ("fifo:", "held:"):
        with pytest.raises(ConfigError, match=rf"ARCHGUARD_JOBSERVER='{empty}' names no FIFO"):
            jobserver_setting({"ARCHGUARD_JOBSERVER": empty})


def test_a_generator_chosen_anywhere_the_front_end_sees_keeps_ninja_out(tmp_path: Path) -> None:
    """A Makefiles build given the ninja shim as its make program fails (ninja reads the
    Makefile): any sign of a chosen generator or make program keeps CMake's own."""
    assert generator_chosen({}, tmp_path) is None
    assert generator_chosen({"CMAKE_GENERATOR": "Ninja Multi-Config"}, tmp_path) is None
    assert generator_chosen({"CMAKE_GENERATOR": "Unix Makefiles"}, tmp_path)
    assert generator_chosen({"CMAKE_ARGS": "-DX=1 -G 'Unix Makefiles'"}, tmp_path) == "CMAKE_ARGS"
    assert generator_chosen({"SKBUILD_CMAKE_ARGS": "-GNinja"}, tmp_path) == "SKBUILD_CMAKE_ARGS"
    assert generator_chosen({"SKBUILD_CMAKE_DEFINE": "CMAKE_MAKE_PROGRAM=/x"}, tmp_path)
    said = generator_chosen({}, tmp_path, ["--config-settings=cmake.args=-GUnix Makefiles"])
    assert said == "pip's --config-settings"
    (tmp_path / "pyproject.toml").write_text(
        '[tool.scikit-build]\ncmake.args = ["-G", "Unix Makefiles"]\n'
    )
    assert generator_chosen({}, tmp_path) == f"{tmp_path / 'pyproject.toml'} [tool.scikit-build]"


def _four_kernels(tmp_path: Path, pyproject: str = "") -> tuple[Path, Path, Server, dict[str, str]]:
    """tests/packages/skbuild with four .cu files (its tree, ``pyproject`` added to its
    pyproject.toml), the log of a probe that is CMake's CUDA compiler launcher, a jobserver of 2
    tokens, and a farm job's environment for ``archguard wheel`` (list 8.0)."""
    pytest.importorskip("scikit_build_core")
    root = copy_tree(REPO / "tests" / "packages" / "skbuild", tmp_path / "skbuild")
    kernel = (root / "kernel.cu").read_text()
    names = ["kernel.cu"]
    for n in range(2, 5):
        (root / f"kernel{n}.cu").write_text(kernel.replace("minicuda_", f"minicuda{n}_"))
        names.append(f"kernel{n}.cu")
    cmake = (root / "CMakeLists.txt").read_text()
    (root / "CMakeLists.txt").write_text(cmake.replace("kernel.cu", " ".join(names)))
    with (root / "pyproject.toml").open("a") as toml:
        toml.write(pyproject)
    log = tmp_path / "nvcc.log"
    probe = tmp_path / "probe"
    probe.write_text(LAUNCHER_PROBE.format(log=log))
    probe.chmod(0o755)
    server = Server(tmp_path / "server", 2)
    env = build_env(
        ARCHGUARD_ARCH_LIST="8.0",
        ARCHGUARD_JOBSERVER=f"fifo:{server.path}",
        CMAKE_CUDA_COMPILER_LAUNCHER=str(probe),
    )
    env["PATH"] = f"{NEW_NINJA.parent}{os.pathsep}{env['PATH']}"
    return root, log, server, env


def _compiles(log: Path) -> tuple[int, int]:
    """(the compiles the probe saw, the most at once)."""
    from test_jobserver import _most_at_once

    starts = [line for line in log.read_text().splitlines() if line.startswith("start")]
    return len(starts), _most_at_once(log)[0]


@pytest.mark.slow
@needs_nvcc
@needs_cuda_torch
def test_a_scikit_build_core_build_runs_no_more_compiles_than_the_jobserver_gives(
    tmp_path: Path,
) -> None:
    """``archguard wheel`` of a scikit-build-core package of four .cu files, in a jobserver of 2
    tokens as a farm job gets it: at most 2 nvcc processes at once and at least 2 (ninja took
    the second token), where ninja's own default on these 2 cores runs 3 (measured); every
    token back. The caller's CMAKE_ARGS are kept after archguard's."""
    root, log, server, env = _four_kernels(tmp_path)
    env["CMAKE_ARGS"] = "-DCMAKE_VERBOSE_MAKEFILE=ON"
    proc = cli("wheel", str(root), "-w", str(tmp_path / "out"), env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "takes a token per compile beyond it" in proc.stderr, proc.stderr[-4000:]
    assert "Building project with Ninja" in proc.stderr
    compiles, most = _compiles(log)
    assert compiles >= 4 and most == 2, (compiles, most)
    assert server.close() == 2


@pytest.mark.slow
@needs_nvcc
@needs_cuda_torch
def test_a_project_that_chooses_makefiles_builds_in_the_jobserver_as_it_did(tmp_path: Path) -> None:
    """A project whose [tool.scikit-build] asks for Unix Makefiles: never given ninja as its
    make program (it would fail reading the Makefile); it builds, with as many compiles as
    the tokens free as it started (both: 2 at most)."""
    root, log, server, env = _four_kernels(
        tmp_path, '\n[tool.scikit-build.cmake]\nargs = ["-G", "Unix Makefiles"]\n'
    )
    proc = cli("wheel", str(root), "-w", str(tmp_path / "out"), env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "the generator is chosen (" in proc.stderr and "CMAKE_BUILD_PARALLEL_LEVEL=2" in (
        proc.stderr
    )
    assert "Building project with Unix Makefiles" in proc.stderr  # scikit-build-core's words
    compiles, most = _compiles(log)
    assert compiles >= 4 and 1 <= most <= 2, (compiles, most)
    assert server.close() == 2
