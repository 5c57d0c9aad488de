"""``archguard farm run`` for real (issue 32): two small packages (a C++-ABI extension and a
stable-ABI one) x two cells (torch 2.13.0 and torch 2.14.1, both CUDA builds, this Python),
each cell's environment made with uv, each job through ``archguard wheel --repair``; then
each package installed from its cell's index (``pip install --index-url file://SITE/<cell>/
simple NAME``) into that cell's environment and imported there; a second run builds nothing
and says so; the page names every job."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from realtools import (
    REPO,
    build_env,
    cli,
    needs_cu130,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    pip_would_install,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.network,  # uv fetches each cell's torch (its cache links the second)
    needs_nvcc,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_cu130,
]
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
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
name = "dlpack-ext"
source = "src/dlpack_ext"
config = {{ arch_list = "8.0" }}

[[package]]
name = "stable-ext"
source = "src/stable_ext"
config = {{ arch_list = "8.0" }}
"""
MODULES = {"dlpack-ext": "dlpack_ext._C", "stable-ext": "stable_ext._C"}


def _page_renders_in_chromium(page: Path, tmp: Path) -> None:
    """The page as Chromium parses it (its DOM holds every job's cell) and draws it."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return  # the matrix page's test names the missing Chromium
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.stdout.count('<td class="built">') == 3, dom.stderr[-2000:]
    assert dom.stdout.count('<td class="served">') == 1
    shot = tmp / "farm.png"
    script = REPO / "scripts" / "screenshot_matrix.py"
    proc = subprocess.run(
        [sys.executable, str(script), str(shot), "--page", str(page)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _the_pages_install_command_works_in_a_fresh_environment(page: str, tmp: Path) -> None:
    """The page's command for torch2.13, run as written by uv in a new environment (uv takes
    pip's options; its cache holds the cell's torch): the pinned wheel and its torch
    resolve, and the extension imports."""
    (command,) = re.findall(r"<li>torch2\.13: <code>(pip install [^<]*)</code>", page)
    argv = html.unescape(command).split()
    assert argv[-1] == "NAME" and any("torch2.13/simple" in a for a in argv), argv
    fresh = tmp / "fresh"
    uv = shutil.which("uv", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    assert uv is not None
    made = subprocess.run(
        [uv, "venv", "--python", sys.executable, str(fresh)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    python = fresh / "bin" / "python"
    argv = [uv, "pip", *argv[1:-1], "--python", str(python), "dlpack-ext"]
    installed = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    imported = subprocess.run(
        [str(python), "-c", "import torch, dlpack_ext._C; print(torch.__version__)"],
        capture_output=True,
        text=True,
        env=build_env(),
        check=False,
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert imported.stdout.startswith("2.13."), imported.stdout


def _the_cuda_lines_index_gives_each_torch_its_wheel(site: Path, tmp: Path) -> None:
    """SITE/cu130/simple holds both cells' wheels: in each cell's environment, with the
    installed torch held (the documented constraint), pip and uv pick the wheel built for
    that torch, install nothing else (torch stays), and it imports; pip reads the .metadata
    file beside each wheel it weighs."""
    line = (site / "cu130" / "simple").as_uri()
    uv = shutil.which("uv", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    assert uv is not None
    for cell in ("torch2.13", "torch2.14"):
        python = site / ".farm" / "envs" / cell / "bin" / "python"
        held = subprocess.run(
            [str(python), "-c", HELD],
            capture_output=True,
            text=True,
            check=False,
        )
        assert held.returncode == 0, held.stderr
        constraint = tmp / f"{cell}-torch.txt"
        constraint.write_text(held.stdout)
        minor = cell.removeprefix("torch")
        # the cell's environment holds both from its own index (above): as a user's has not
        removed = subprocess.run(
            [str(python), "-m", "pip", "uninstall", "-q", "-y", "dlpack-ext", "stable-ext"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert removed.returncode == 0, removed.stderr
        pip, chosen = pip_would_install(python, line, constraint, "dlpack-ext", "stable-ext")
        assert pip.returncode == 0, pip.stderr[-3000:]
        assert chosen == {"dlpack-ext": f"1.0+cu130torch{minor}", "stable-ext": "1.0+cu130"}
        assert "Obtaining dependency information for dlpack-ext from file://" in pip.stdout
        assert ".whl.metadata" in pip.stdout
        installed = subprocess.run(
            [
                uv,
                "pip",
                "install",
                "--python",
                str(python),
                "--reinstall-package",
                "dlpack-ext",
                "--index-url",
                line,
                "-c",
                str(constraint),
                "dlpack-ext",
                "stable-ext",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert installed.returncode == 0, installed.stderr[-3000:]
        assert f"dlpack-ext==1.0+cu130torch{minor}" in installed.stderr, installed.stderr
        assert not re.search(r"^ [+-] torch==", installed.stderr, re.M), installed.stderr
        imported = subprocess.run(
            [
                str(python),
                "-c",
                "import torch, dlpack_ext._C, stable_ext._C; print(torch.__version__)",
            ],
            capture_output=True,
            text=True,
            env=build_env(),
            check=False,
        )
        assert imported.returncode == 0, (cell, imported.stderr[-2000:])
        assert imported.stdout.startswith(minor)
        # `archguard which` from the site's site.json, for that torch: the line's index and
        # exactly the wheel pip chose
        torch = held.stdout.strip().removeprefix("torch==") + "+cu130"
        asked = cli(
            "which",
            str(site),
            "dlpack-ext",
            "--torch",
            torch,
            "--device",
            "8.0",
            "--format",
            "json",
        )
        assert asked.returncode == 0, asked.stdout + asked.stderr
        (answer,) = json.loads(asked.stdout)["packages"]
        assert answer["command"] == (
            f"pip install --extra-index-url={line}/ dlpack-ext==1.0+cu130torch{minor}"
        )


# the installed torch's distribution version (torch.__version__ says 2.13.0+cu130, which
# matches nothing on an index that has no torch): what users' constraint files hold
HELD = "import importlib.metadata as m; print('torch==' + m.version('torch'))"


def test_farm_run_builds_each_cell_into_its_own_index(tmp_path: Path) -> None:
    if shutil.which("uv") is None and not (Path(sys.executable).parent / "uv").is_file():
        pytest.fail("no uv: the test extra installs it")
    for name in ("dlpack_ext", "stable_ext"):
        shutil.copytree(REPO / "tests" / "packages" / name, tmp_path / "src" / name)
    manifest = tmp_path / "farm.toml"
    manifest.write_text(MANIFEST)
    site = tmp_path / "site"
    env = build_env()
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    # --jobs 2: both packages at once, each package's cells in order (so the abi3 wheel
    # stable-ext's first cell builds still serves its second)
    first = cli("farm", "run", str(manifest), "-o", str(site), "--jobs", "2", env=env)
    assert first.returncode == 0, (first.stdout + first.stderr)[-6000:]
    # stable-ext's abi3 wheel of the first cell serves the second (same CUDA, torch >= 2.10)
    assert (
        "archguard farm run: 3 built, 0 already built (not built again), 1 served" in first.stdout
    )
    assert (
        "stable-ext in torch2.14: not built: served by stable_ext-1.0+cu130-cp310-abi3-"
        in first.stderr
    )
    assert "[4/4]" in first.stderr
    for cell in ("torch2.13", "torch2.14"):
        python = site / ".farm" / "envs" / cell / "bin" / "python"
        assert (site / cell / "simple" / "index.html").is_file()
        for package, module in MODULES.items():
            # beside the cell's environment, never into it: every site with this cell shares it
            target = site.parent / f"installed-{cell}-{package}"
            installed = subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--isolated",
                    "-q",
                    "--no-deps",
                    "--target",
                    str(target),
                    "--index-url",
                    (site / cell / "simple").as_uri(),
                    package,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            assert installed.returncode == 0, installed.stderr[-3000:]
            imported = subprocess.run(
                [str(python), "-c", f"import torch, {module}; print(torch.__version__)"],
                capture_output=True,
                text=True,
                env={**build_env(), "PYTHONPATH": str(target)},
                check=False,
            )
            assert imported.returncode == 0, (cell, package, imported.stderr[-2000:])
            assert imported.stdout.startswith(cell.removeprefix("torch"))
    wheels = sorted(p.name for p in (site / "wheels").glob("*/*.whl"))
    assert any(w.startswith("dlpack_ext-1.0+cu130torch2.14-") for w in wheels), wheels
    # the abi3 wheel one cell built serves the other: one file in the store, in both indexes
    assert len([w for w in wheels if w.startswith("stable_ext-")]) == 1, wheels
    page = (site / "index.html").read_text()
    assert page.count('class="built"') == 3 and page.count('class="served"') == 1
    assert "torch2.14/logs/dlpack-ext.log" in page
    # each wheel's facts: verified, its coverage tiers, what it binds to
    assert page.count("verified: sm_80") == 3, page
    assert "native on 8.0, 8.6, 8.7, 8.8, 8.9</li>" in page
    assert "ABI: requires torch&gt;=2.14,&lt;2.15: " in page
    stable = "ABI: requires torch&gt;=2.10: every extension uses only torch&#x27;s stable C ABI"
    assert stable in page
    _page_renders_in_chromium(site / "index.html", tmp_path)
    _the_pages_install_command_works_in_a_fresh_environment(page, tmp_path)
    _the_cuda_lines_index_gives_each_torch_its_wheel(site, tmp_path)
    again = cli("farm", "run", str(manifest), "-o", str(site), env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "archguard farm run: 0 built, 4 already built (not built again)" in again.stdout
    assert "sha256 checked): not built again" in again.stderr
    verified = cli("farm", "verify", str(site), env=env)
    assert verified.returncode == 0 and "7 published wheel(s) read: OK" in verified.stdout
