"""Nobody else notices archguard: unrelated packages build the same with it installed.

A fresh virtual environment builds four unrelated packages (pure Python, a C extension,
setup.cfg only, a malformed pyproject.toml) without archguard, then with the archguard wheel
installed, from the same source paths. Wheels must be byte-identical file by file and the
build output identical once temporary names are normalised.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import venv
import zipfile
from pathlib import Path

import pytest

from realtools import REPO, build_env

pytestmark = [pytest.mark.slow, pytest.mark.network]  # a fresh venv installs setuptools

PACKAGES = ["purepy", "cext", "cfgonly", "malformed"]
_NOISE = [
    (re.compile(r"/tmp/[A-Za-z0-9_.-]*(pip|tmp)[A-Za-z0-9_.-]*"), "<tmp>"),
    (re.compile(r"\.tmp-[A-Za-z0-9_]+"), ".tmp-<x>"),
    (re.compile(r"sha256=[0-9a-f]{64}"), "sha256=<h>"),
    (re.compile(r"size=[0-9]+"), "size=<n>"),
    (re.compile(r"\b[0-9]+(\.[0-9]+)? ?(s|kB|MB)\b"), "<t>"),
]


def normalise(text: str) -> str:
    for pattern, repl in _NOISE:
        text = pattern.sub(repl, text)
    return text


def wheel_files(out: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for wheel in sorted(out.glob("*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                files[f"{wheel.name}!{name}"] = zf.read(name)
    return files


def build_all(
    python: Path, work: Path, label: str, **env: str
) -> dict[str, tuple[int, str, dict[str, bytes]]]:
    results = {}
    for name in PACKAGES:
        src = work / "src" / name
        if src.exists():
            shutil.rmtree(src)
        shutil.copytree(REPO / "tests" / "packages" / name, src)
        out = work / f"out-{label}" / name
        proc = subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "-v",
                "--no-build-isolation",
                str(src),
                "-w",
                str(out),
            ],
            capture_output=True,
            text=True,
            env=build_env(**env),
            check=False,
        )
        results[name] = (
            proc.returncode,
            normalise(proc.stdout + proc.stderr),
            wheel_files(out) if out.exists() else {},
        )
    return results


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv") / "v"
    venv.create(root, with_pip=True)
    python = root / "bin" / "python"
    import setuptools

    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            f"setuptools=={setuptools.__version__}",
            "wheel",  # setuptools < 70.1 builds wheels through it
        ],
        check=True,
        capture_output=True,
    )
    return python


def test_unrelated_packages_build_identically_with_archguard_installed(
    fresh_python: Path, archguard_built: Path, tmp_path: Path
) -> None:
    work = tmp_path / "w"
    without = build_all(fresh_python, work, "without")
    assert without["purepy"][0] == 0 and without["cext"][0] == 0 and without["cfgonly"][0] == 0
    archguard = archguard_built  # the session's one build of torch-archguard (conftest)
    subprocess.run(
        [str(fresh_python), "-m", "pip", "install", "-q", str(archguard)],
        check=True,
        capture_output=True,
    )
    check = subprocess.run(
        [str(fresh_python), "-c", "import archguard._integration.setuptools_hook"], check=False
    )
    assert check.returncode == 0  # the hook really is installed there
    # ... and the fresh (non-editable) install answers from the data inside its wheel
    with zipfile.ZipFile(archguard) as zf:
        names = set(zf.namelist())
    for data in ("arch_policy.yml", "toolkits.yml", "torch_builds.yml", "devices.yml"):
        assert f"archguard/defaults/{data}" in names
    listed = subprocess.run(
        [str(fresh_python), "-m", "archguard", "list", "--cuda", "12.8", "--torch", "2.7"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert listed.stdout == "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX\n", listed.stderr
    with_ag = build_all(fresh_python, work, "with")
    # Farm mode switched on for every build: still nothing for packages without CUDA code.
    enabled = build_all(fresh_python, work, "enabled", ARCHGUARD_ENABLE="1")
    for name in PACKAGES:
        rc_a, log_a, files_a = without[name]
        for label, (rc_b, log_b, files_b) in (("with", with_ag[name]), ("enabled", enabled[name])):
            assert rc_a == rc_b, (name, label)
            assert files_a == files_b, (name, label)
            assert "archguard:" not in log_b, (name, label)
            assert log_a.replace("out-without", f"out-{label}") == log_b, (name, label)
