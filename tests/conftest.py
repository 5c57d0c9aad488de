"""Shared fixtures. Real tools are found, never faked: tests that need one skip with the
reason when it is absent (CI's .ci/run installs all of them)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from realtools import run_main

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


@pytest.fixture(scope="session")
def example_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of example_package (its build writes into the tree)."""
    from realtools import REPO, copy_tree

    return copy_tree(REPO / "example_package", tmp_path_factory.mktemp("ex") / "example_package")


@pytest.fixture(scope="session")
def example_noiso(
    example_src: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The example, built once per session (pip wheel --no-build-isolation)."""
    from realtools import pip_wheel

    out = tmp_path_factory.mktemp("wheel-noiso")
    return pip_wheel(example_src, out), out


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
        skips = list(item.iter_markers("skipif"))
        for mark, name in tags:
            if any(m == mark for m in skips):
                item.add_marker(getattr(pytest.mark, name))
