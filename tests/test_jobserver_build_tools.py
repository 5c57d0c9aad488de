"""The jobserver reaches the build tools a setup.py runs itself (issue 58 item 4): a build
whose compiles torch's ninja does not run (a CMake or make step of the package's own) holds
its first token and passes the jobserver on by what reads it: the ninja shim for a ninja 1.13
run by name, ``MAKEFLAGS`` for a make 4.4, else ``CMAKE_BUILD_PARALLEL_LEVEL`` of the tokens
free as it starts. Each is shown on the real tool, with a recipe that logs as it starts and
ends (the probe of :mod:`test_jobserver`) counting the recipes running at once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archguard._integration.jobserver import LEVEL, build_jobserver
from archguard.detect.buildtools import make_reads_fifo
from archguard.detect.machine import Machine
from archguard.jobserver import Client, Server
from archguard.nvcc.parallel import BuildMode, Choice
from test_jobserver import _most_at_once

NEW_NINJA = Path(sys.executable).parent / "ninja"  # the ninja package: 1.13.2
OLD_NINJA = Path("/usr/bin/ninja")  # this machine's (Debian's 1.11.1)
STEP = {"_step": Choice(1, "chosen", 1, "chosen", "2 cores", BuildMode.SERIAL, "CMakeBuild")}
MACHINE = Machine(4, "test", 64 << 30, "test")  # a jobserver of 4 jobs where one is served
RECIPES = 6

PROBE = """\
#!/bin/sh
# one recipe: a line as it starts and as it ends
echo "start $(date +%s.%N) $$ 1" >> {log}
sleep 0.4
echo "end $(date +%s.%N) $$ 1" >> {log}
touch "$1"
"""


def _probe(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "recipes.log"
    probe = tmp_path / "probe.sh"
    probe.write_text(PROBE.format(log=log))
    probe.chmod(0o755)
    return probe, log


def _env(variables: dict[str, str | None]) -> dict[str, str]:
    """The environment the setup.py's subprocesses inherit while the build runs."""
    env = dict(os.environ)
    for name, value in variables.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def _farm_jobserver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tokens: int, path: str
) -> Server:
    """A farm run's jobserver of ``tokens`` (the build takes its first token itself)."""
    server = Server(tmp_path / "jobserver", tokens)
    monkeypatch.setenv("ARCHGUARD_JOBSERVER", f"fifo:{server.path}")
    monkeypatch.setenv("PATH", path)
    monkeypatch.delenv("MAKEFLAGS", raising=False)
    monkeypatch.delenv(LEVEL, raising=False)
    return server


@pytest.mark.skipif(not NEW_NINJA.is_file(), reason="needs the ninja package's ninja 1.13")
def test_a_ninja_the_setup_py_runs_by_name_takes_its_tokens_from_the_jobserver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Six recipes in a farm's jobserver of 3 tokens: ninja (no -j, found on PATH as CMake's
    Ninja generator finds it) runs at most 3 at once, and more than one (it joined), where
    its own default here would run them all at once (-j of the cores + 2)."""
    server = _farm_jobserver(tmp_path, monkeypatch, 3, f"{NEW_NINJA.parent}{os.pathsep}/usr/bin")
    probe, log = _probe(tmp_path)
    outputs = " ".join(f"o{n}" for n in range(RECIPES))
    (tmp_path / "build.ninja").write_text(
        f"rule probe\n  command = {probe} $out\n"
        + "".join(f"build o{n}: probe\n" for n in range(RECIPES))
        + f"build all: phony {outputs}\ndefault all\n"
    )
    shim = tmp_path / "shim"
    with build_jobserver(STEP, {}, shim, MACHINE, own_steps=True) as joined:
        assert joined.jobs == {} and not joined.launched and LEVEL not in joined.variables
        assert str(joined.variables["PATH"]).startswith(f"{shim}{os.pathsep}")
        assert ("MAKEFLAGS" in joined.variables) == make_reads_fifo(os.environ["PATH"])
        helper = Client(str(server.path))
        assert len(helper.take(8)) == 2  # the build holds the third: its ninja's own token
        helper.give(b"++")
        helper.close()
        ran = subprocess.run(
            ["ninja", "-C", str(tmp_path)],
            env=_env(joined.variables),
            capture_output=True,
            text=True,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "Jobserver mode detected" in ran.stdout + ran.stderr
    said = capsys.readouterr().err
    assert "parallel: jobserver the farm run's (fifo:" in said
    assert "ninja 1.13" in said and "a token per compile beyond it" in said
    most = _most_at_once(log)[0]
    assert 2 <= most <= 3, most
    assert server.close() == 3


def test_a_make_the_setup_py_runs_never_runs_more_recipes_than_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six recipes run by ``make`` in a farm's jobserver of 3 tokens. A make 4.4 is given the
    jobserver in MAKEFLAGS and takes its tokens there (at most 3 at once, more than one); a
    make before 4.4 (this machine's 4.3) would stop on a FIFO's name: MAKEFLAGS does not name
    it, and make runs its own default, one recipe at a time."""
    if shutil.which("make", path="/usr/bin") is None:
        pytest.skip("needs GNU make")
    server = _farm_jobserver(tmp_path, monkeypatch, 3, "/usr/bin")
    probe, log = _probe(tmp_path)
    outputs = " ".join(f"o{n}" for n in range(RECIPES))
    (tmp_path / "Makefile").write_text(
        f"all: {outputs}\n" + "".join(f"o{n}:\n\t{probe} $@\n" for n in range(RECIPES))
    )
    reads = make_reads_fifo("/usr/bin")
    with build_jobserver(STEP, {}, tmp_path / "shim", MACHINE, beside=tmp_path) as joined:
        assert ("MAKEFLAGS" in joined.variables) == reads
        ran = subprocess.run(
            ["make", "-C", str(tmp_path)],
            env=_env(joined.variables),
            capture_output=True,
            text=True,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
    most = _most_at_once(log)[0]
    assert (2 <= most <= 3) if reads else most == 1, (reads, most)
    assert server.close() == 3


@pytest.mark.skipif(
    not (OLD_NINJA.is_file() and shutil.which("cmake", path="/usr/bin")),
    reason="needs this machine's ninja 1.11 and cmake",
)
def test_where_no_ninja_reads_it_cmake_build_runs_the_tokens_free_as_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ninja 1.13 and a make before 4.4: a step of the package's own gets
    CMAKE_BUILD_PARALLEL_LEVEL of the tokens free as the build starts (held to its end).
    A real ``cmake --build`` of six recipes, in a farm's jobserver of 3 tokens one of which
    another build holds, runs at most 2 at once; a level the caller set is kept; a build with
    no step of its own (setuptools compiles one source at a time) holds its first token
    only."""
    server = _farm_jobserver(tmp_path, monkeypatch, 3, "/usr/bin")
    probe, log = _probe(tmp_path)
    source = tmp_path / "step"
    source.mkdir()
    outputs = " ".join(f"o{n}" for n in range(RECIPES))
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(step NONE)\n"
        + "".join(f"add_custom_command(OUTPUT o{n} COMMAND {probe} o{n})\n" for n in range(RECIPES))
        + f"add_custom_target(recipes ALL DEPENDS {outputs})\n"
    )
    build = tmp_path / "build"
    configured = subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build), "-G", "Unix Makefiles"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert configured.returncode == 0, configured.stderr
    other = Client(str(server.path))
    one = other.take(1)  # another build holds one
    beside = tmp_path  # no ninja 1.13 beside the build's Python
    with build_jobserver(
        STEP, {}, tmp_path / "shim", MACHINE, beside=beside, own_steps=True
    ) as joined:
        assert joined.variables[LEVEL] == "2" and "PATH" not in joined.variables
        assert other.take(1) == b""  # the build holds the first token and the one free
        ran = subprocess.run(
            ["cmake", "--build", str(build)],
            env=_env(joined.variables),
            capture_output=True,
            text=True,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "its cmake --build runs CMAKE_BUILD_PARALLEL_LEVEL=2, the tokens free now" in (
        capsys.readouterr().err
    )
    assert _most_at_once(log)[0] == 2
    monkeypatch.setenv(LEVEL, "7")
    with build_jobserver(
        STEP, {}, tmp_path / "shim", MACHINE, beside=beside, own_steps=True
    ) as joined:
        assert LEVEL not in joined.variables and other.take(1) == b"+"  # its first only
        other.give(b"+")
    assert f"{LEVEL}=7 is set: its cmake --build runs that many" in capsys.readouterr().err
    monkeypatch.delenv(LEVEL)
    with build_jobserver(STEP, {}, tmp_path / "shim", MACHINE, beside=beside) as joined:
        assert LEVEL not in joined.variables and other.take(1) == b"+"
        other.give(b"+")
    assert "no make or ninja here reads a jobserver" in capsys.readouterr().err
    other.give(one)
    other.close()
    assert server.close() == 3


def test_off_or_unreachable_the_build_takes_no_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARCHGUARD_JOBSERVER", "0")
    with build_jobserver(STEP, {}, tmp_path / "shim", MACHINE, own_steps=True) as joined:
        assert joined.variables == {} and joined.jobs == {}
    monkeypatch.setenv("ARCHGUARD_JOBSERVER", f"fifo:{tmp_path / 'gone'}")
    with build_jobserver(STEP, {}, tmp_path / "shim", MACHINE, own_steps=True) as joined:
        assert joined.variables == {"MAKEFLAGS": None, "ARCHGUARD_JOBSERVER": None}
