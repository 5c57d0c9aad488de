"""Shared fixtures. Real tools are found, never faked: tests that need one skip with the
reason when it is absent (CI's .ci/run installs all of them)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from realtools import Built, run_main

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def run_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The command line in-process (``archguard._cli.main``); tests/test_cli.py runs the
    entry points themselves (``python -m archguard``, the ``archguard`` script)."""
    return run_main


@pytest.fixture
def project(tmp_path: Path) -> Callable[[str], Path]:
    """Write a pyproject.toml with the given text into a fresh directory."""

    def make(text: str, name: str = "pkg") -> Path:
        root = tmp_path / name
        root.mkdir(parents=True, exist_ok=True)
        (root / "pyproject.toml").write_text(text)
        return root

    return make


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process tests never see a developer's ARCHGUARD_* or TORCH_CUDA_ARCH_LIST."""
    for name in list(os.environ):
        if name.startswith("ARCHGUARD_") or name == "TORCH_CUDA_ARCH_LIST":
            monkeypatch.delenv(name, raising=False)


# --- one build per run, whatever the number of workers -----------------------------------
#
# scripts/test.sh runs the suite on every core (pytest-xdist, --dist loadgroup). A session
# fixture would then be made once per worker: the builds below are made once per run, by the
# first worker that asks, under a lock, in the run's shared temporary directory; the others
# wait and read what it returned. A module-scoped fixture keeps its module on one worker
# (pytest_collection_modifyitems below).


def _encode(value: Any) -> Any:
    if isinstance(value, Path):
        return {"path": str(value)}
    if isinstance(value, subprocess.CompletedProcess):
        return {"proc": [value.args, value.returncode, value.stdout, value.stderr]}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    raise TypeError(f"a shared fixture's value must be a Path, a run or a tuple: {value!r}")


def _decode(data: Any) -> Any:
    if "path" in data:
        return Path(data["path"])
    if "proc" in data:
        return subprocess.CompletedProcess(*data["proc"])
    return tuple(_decode(v) for v in data["tuple"])


def once_per_run(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Any]) -> Any:
    """``make(directory)``, once per run: alone, in a fresh directory; under pytest-xdist, by
    the first worker to ask (the others wait on its lock, then read what it returned)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return make(factory.mktemp(name))
    shared = factory.getbasetemp().parent / "once-per-run"
    shared.mkdir(exist_ok=True)
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # let go when the file closes, or the worker dies
        saved = shared / f"{name}.json"
        if saved.exists():
            return _decode(json.loads(saved.read_text()))
        root = shared / name
        shutil.rmtree(root, ignore_errors=True)  # a worker that failed to make it
        root.mkdir()
        value = make(root)
        saved.write_text(json.dumps(_encode(value)))
        return value


def _example_tree(root: Path) -> Path:
    from realtools import copy_tree

    return copy_tree(REPO / "example_package", root / "example_package")


@pytest.fixture(scope="session")
def example_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of example_package (its build writes into the tree), made once per run."""
    return once_per_run(tmp_path_factory, "example-tree", _example_tree)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def example_noiso(example_src: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The example, built once per run (pip wheel --no-build-isolation) in example_src."""
    from realtools import pip_wheel

    def made(root: Path) -> Built:
        return pip_wheel(example_src, root / "out"), root / "out"

    return once_per_run(tmp_path_factory, "example-noiso", made)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def example_80(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The example at one arch, built once per run (pip wheel --no-build-isolation) with
    realtools' EXAMPLE_80 settings: what tests/test_user_side.py's doctor-from-the-lint test
    (ARCHGUARD_STUBS=0) and tests/test_parallel_build.py's explain-and-build test (MAX_JOBS=0)
    each built on their own before, one settings set that serves both. Read it; a test that
    needs the tree or the wheel changed copies it."""
    from realtools import EXAMPLE_80, build_env, pip_wheel

    def made(root: Path) -> Built:
        src = _example_tree(root)
        out = root / "out"
        return pip_wheel(src, out, env=build_env(**EXAMPLE_80)), out

    return once_per_run(tmp_path_factory, "example-80", made)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def archguard_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch-archguard's own wheel (realtools' archguard_wheel), built once per run, alone
    in its directory. A test that adds files to a wheel directory copies it into its own."""
    from realtools import archguard_wheel

    return once_per_run(tmp_path_factory, "archguard-wheel", archguard_wheel)  # type: ignore[no-any-return]


def _keep_with_its_module(item: pytest.Item) -> None:
    """A test that uses a fixture made once per module (or a session fixture of its own
    module) runs on the worker that runs the module's others: --dist loadgroup keeps an
    xdist_group together, so the fixture is made once, as in a serial run."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return
    for defs in info.name2fixturedefs.values():
        for fixture in defs:
            own = str(fixture.baseid or "").endswith(".py")  # a test module's, not conftest's
            if fixture.scope == "module" or (fixture.scope == "session" and own):
                item.add_marker(pytest.mark.xdist_group(item.path.stem))
                return


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs a real tool (realtools' needs_nvcc / needs_cuda_torch /
    needs_cuobjdump) also carries that tool's marker, so that `pytest -m "not nvcc and not
    torch"` is the fast pure suite."""
    from realtools import needs_cuda_torch, needs_cuobjdump, needs_nvcc

    tags = [
        (needs_nvcc.mark, "nvcc"),
        (needs_cuda_torch.mark, "torch"),
        (needs_cuobjdump.mark, "cuobjdump"),
    ]
    for item in items:
        _keep_with_its_module(item)
        skips = list(item.iter_markers("skipif"))
        for mark, name in tags:
            if any(m == mark for m in skips):
                item.add_marker(getattr(pytest.mark, name))
