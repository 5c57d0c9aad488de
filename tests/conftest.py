"""Shared fixtures. Real tools are found, never faked: tests that need one skip with the
reason when it is absent (CI's .ci/run installs all of them)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def cli(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m archguard ARGS`` as a user would, in a clean subprocess."""
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ARCHGUARD_") and k != "TORCH_CUDA_ARCH_LIST"
    }
    full_env.update(env or {})
    return subprocess.run(
        [python, "-m", "archguard", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        check=False,
    )


@pytest.fixture
def run_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    return cli


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
