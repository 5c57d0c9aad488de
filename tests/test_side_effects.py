"""No side effects: resolution and the build hook open no network connection, run no process
but nvcc, ninja and make (fixed arguments, no shell: their versions), write nothing but the
machine's jobserver (under archguard's cache: its locks and this build's own folder, removed
when the build ends) and the ninja shim that gives it to ninja (in the build's temp
directory), and restore every variable they set.

Measured with a Python audit hook (``sys.addaudithook``) in a fresh interpreter with the
real torch and nvcc; sockets are also blocked outright.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from realtools import REPO, build_env, needs_cuda_torch, needs_nvcc

pytestmark = [needs_nvcc, needs_cuda_torch]

SCRIPT = r"""
import json, os, socket, sys
from pathlib import Path

import torch  # the package's own import, before recording starts
import torch.utils.cpp_extension
from setuptools import Distribution, Extension

events, recording = [], False
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

def hook(event, args):
    if not recording:
        return
    if event == "socket.connect":
        events.append(["connect", repr(args[1])])
    elif event == "subprocess.Popen":
        events.append(["popen", [str(a) for a in (args[1] or [args[0]])]])
    elif event in ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork"):
        events.append([event, repr(args)[:200]])
    elif event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & WRITE_FLAGS)
        if writing:
            events.append(["write", str(path)])

def blocked(*a, **k):
    raise OSError("network blocked by the side-effect test")

socket.socket.connect = blocked
socket.socket.connect_ex = blocked
sys.addaudithook(hook)

project = Path(sys.argv[1])
os.chdir(project)
os.environ["TORCH_CUDA_ARCH_LIST"] = "8.6"
env_before = dict(os.environ)

recording = True
# 1. resolution through the CLI's path, live torch and nvcc
from archguard.settings.inputs import Query, gather
from archguard.binaries.record import resolution_record
from archguard.reports.text import explain_text
res = gather(Query(project_dir=project)).resolve()
explain_text(res)
resolution_record(res)
# 2. the setuptools hook and the build_ext mixin, up to the compiler call
ext = Extension("_m", ["k.cu"], extra_compile_args={"cxx": [], "nvcc": ["-O2"]})
dist = Distribution({"name": "m", "version": "1", "ext_modules": [ext],
                     "cmdclass": {"build_ext": torch.utils.cpp_extension.BuildExtension}})
recording = False  # torch's own BuildExtension.__init__ runs `ninja --version`
cmd = dist.get_command_obj("build_ext")
cmd.ensure_finalized()
recording = True
from archguard._integration.build import archguard_build
with archguard_build(cmd):
    inside = {"arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST"),
              "nvcc": list(ext.extra_compile_args["nvcc"])}
recording = False

print(json.dumps({
    "events": events,
    "wrapped": [c.__name__ for c in type(cmd).__mro__],
    "inside": inside,
    "env_restored": dict(os.environ) == env_before,
    "args_restored": ext.extra_compile_args == {"cxx": [], "nvcc": ["-O2"]},
    "effective": res.effective_text,
}))
"""


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One observed run (a fresh interpreter importing torch, probing nvcc), which the three
    tests below read; none of them changes it."""
    tmp_path = tmp_path_factory.mktemp("observed")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools", "torch", "torch-archguard"]\n'
    )
    (project / "k.cu").write_text("__global__ void k() {}\n")
    home = tmp_path / "home"
    home.mkdir()
    env = build_env(HOME=str(home), TMPDIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(project)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["log"] = proc.stderr
    result["tmp"] = str(tmp_path)
    return result


def test_no_network_and_no_writes(observed: dict[str, Any]) -> None:
    events = observed["events"]
    assert isinstance(events, list)
    assert [e for e in events if e[0] == "connect"] == []
    tmp = str(observed["tmp"])
    writes = [e[1] for e in events if e[0] == "write"]
    # the machine's jobserver, under archguard's cache: its locks, the width, this build's
    # own folder (its FIFO, what it holds), removed when the build ends
    machine = Path(tmp) / "home" / ".cache" / "archguard" / "jobserver"
    jobserver = [w for w in writes if machine in Path(w).parents]
    assert jobserver, writes
    assert list(machine.glob("*/users/*")) == []  # this build's own folder left with it
    # the ninja that reads the pool, given it: a script in the build's own temp directory
    shims = [w for w in writes if Path(w).parent.name == "archguard-ninja-bin"]
    assert len(shims) == 1 and Path(shims[0]).parent.parent.parent.parent.name == "proj", writes
    # besides them, only tempfile's own probe of TMPDIR (a file it writes once and removes)
    rest = [w for w in writes if w not in jobserver and w not in shims]
    assert all(Path(w).parent == Path(tmp) for w in rest), writes
    assert [e for e in events if e[0].startswith("os.")] == []


def test_only_nvcc_with_fixed_arguments_and_no_shell(observed: dict[str, Any]) -> None:
    popens = [e[1] for e in observed["events"] if e[0] == "popen"]
    assert popens, "the live toolkit was probed"
    for argv in popens:
        # ninja and make: does each read the jobserver (make before 4.4 must not see it)
        assert Path(argv[0]).name in ("nvcc", "ninja", "make"), argv
        assert argv[1:] in (["--version"], ["--list-gpu-code"], ["--list-gpu-arch"]), argv


def test_environment_and_extension_arguments_restored(observed: dict[str, Any]) -> None:
    # ArchguardBuildExt is in the command's MRO (another plugin, e.g. scikit-build-core's
    # setuptools plugin, may wrap the class again around it)
    assert "ArchguardBuildExt" in observed["wrapped"]
    inside = observed["inside"]
    assert isinstance(inside, dict)
    assert inside["arch_list"] == observed["effective"]  # replaced during the build ...
    assert observed["env_restored"] is True  # ... and put back afterwards
    assert any(f.startswith("-gencode=") for f in inside["nvcc"])
    assert observed["args_restored"] is True
    assert "TORCH_CUDA_ARCH_LIST='8.6' was set in the environment" in str(observed["log"])


MIXED = "8.0;9.0a;10.0f;10.3a;12.0f;12.1a;Ampere"  # a/f suffixes hash with the seed
DETERMINISM_COMMANDS = [
    ["explain", "--cuda", "12.8", "--torch", "2.7", "--format", "json", "7.0", "10.3"],
    ["explain", "--cuda", "13.0", "--torch", "2.13", "--format", "json", "10.0f"],
    ["list", "--cuda", "13.0", "--torch", "2.13", "--format", "gencode"],
    ["list", "--cuda", "12.9", "--torch", "2.11", "--format", "json"],
    ["matrix", "--format", "json"],
]


@pytest.mark.parametrize("args", DETERMINISM_COMMANDS, ids=lambda a: " ".join(a[:3]))
@pytest.mark.parametrize("override", [None, MIXED])
def test_same_inputs_give_byte_identical_output_across_hash_seeds(
    args: list[str], override: str | None
) -> None:
    outputs = set()
    for seed in ("0", "1", "12345", "4242", "random"):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("ARCHGUARD_")},
            "PYTHONHASHSEED": seed,
        }
        if override:
            env["ARCHGUARD_ARCH_LIST"] = override
        proc = subprocess.run(
            [sys.executable, "-m", "archguard", *args],
            capture_output=True,
            env=env,
            cwd=REPO,
            check=True,
        )
        outputs.add(proc.stdout)
    assert len(outputs) == 1
