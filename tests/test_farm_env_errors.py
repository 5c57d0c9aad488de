"""A cell whose environment uv cannot make names uv's own cause first: the farm's summary
line once took uv's last line, which is often a hint of which requirement brought the
failing package (``hint: `nvidia-cusparselt-cu13` (v0.8.1) was included because `torch`
(v2.13.0) depends on ...``), never what failed. Real uv, on wheels made here."""

from __future__ import annotations

import base64
import hashlib
import random
import sys
import time
import zipfile
from pathlib import Path

import pytest

from archguard.errors import CellEnvironmentFailed
from archguard.farm.envs import _run, uv_error, uv_path
from realtools import run_main, uv_cache_dir

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _wheel(where: Path, name: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure wheel of ``name`` 1.0 with 64 KiB of data that does not compress, requiring
    ``requires``."""
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}/data.bin": random.Random(name).randbytes(65536),
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires)
        ).encode(),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = ""
    for member, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{member},sha256={digest},{len(data)}\n"
    record += f"{info}/RECORD,,\n"
    path = where / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in {**files, f"{info}/RECORD": record.encode()}.items():
            zf.writestr(member, data)
    return path


def _damaged(path: Path) -> None:
    """64 bytes of the first member's compressed data turned over: the archive still
    opens (its central directory is whole), extracting it fails."""
    with zipfile.ZipFile(path) as zf:
        first = zf.infolist()[0]
    data = bytearray(path.read_bytes())
    start = first.header_offset + 30 + len(first.filename) + 40
    data[start : start + 64] = bytes(b ^ 0xFF for b in data[start : start + 64])
    path.write_bytes(bytes(data))


@pytest.fixture
def uv() -> str:
    found = uv_path()
    if found is None:
        pytest.skip("no uv (pip install uv)")
    return found


def test_a_package_that_fails_to_extract_is_named_not_the_hint_of_who_required_it(
    uv: str, tmp_path: Path
) -> None:
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "agtest_alpha", ("agtest-beta",))
    _damaged(_wheel(links, "agtest_beta"))
    target = tmp_path / "target"
    argv = [uv, "pip", "install", "--no-index", "--find-links", str(links), "--target"]
    argv += [str(target), "--cache-dir", str(tmp_path / "uv-cache"), "agtest-alpha"]
    with pytest.raises(CellEnvironmentFailed) as failed:
        _run(argv, "uv pip install for c13")
    first, _, rest = failed.value.message.partition("\n")
    assert first.startswith("uv pip install for c13 failed (exit "), first
    assert "): Failed to download `agtest-beta==1.0`: Failed to extract archive" in first, first
    assert "was included because" not in first, first
    # the log keeps uv's own lines, hint included
    assert "was included because `agtest-alpha`" in rest, rest


def test_a_requirement_no_location_holds_is_named(uv: str, tmp_path: Path) -> None:
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "agtest_alpha", ("agtest-gamma>=2",))
    argv = [uv, "pip", "install", "--no-index", "--find-links", str(links), "--target"]
    argv += [str(tmp_path / "t"), "--cache-dir", str(tmp_path / "uv-cache"), "agtest-alpha"]
    with pytest.raises(CellEnvironmentFailed) as failed:
        _run(argv, "uv pip install for c13")
    first = failed.value.message.partition("\n")[0]
    assert "No solution found when resolving dependencies: Because agtest-gamma" in first, first
    assert "we can conclude that your requirements are unsatisfiable" in first, first


@pytest.mark.network  # uv venv --seed: pip from uv's cache, else the index
def test_a_cell_uv_cannot_install_fails_its_jobs_with_uvs_cause(uv: str, tmp_path: Path) -> None:
    """A whole farm run: a cell whose installer sees only an empty wheel directory. The
    summary line of its job gives uv's error, which names what was not there;
    environment.log keeps uv's output."""
    (tmp_path / "links").mkdir()
    (tmp_path / "src" / "x").mkdir(parents=True)
    (tmp_path / "src" / "x" / "setup.py").write_text("# x\n")
    manifest = tmp_path / "farm.toml"
    manifest.write_text(
        f'[[cell]]\nname = "c13"\npython = "{PYTHON}"\ninterpreter = "{sys.executable}"\n'
        'torch = "torch==2.13.0"\ncuda = "13.0"\n'
        f'find-links = ["{tmp_path / "links"}"]\ninstaller-options = ["--no-index"]\n\n'
        '[[package]]\nname = "x"\nsource = "src/x"\nconfig = { arch_list = "8.0" }\n'
    )
    site = tmp_path / "site"
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "UV_CACHE_DIR": uv_cache_dir()}
    done = run_main("farm", "run", str(manifest), "-o", str(site), "--no-repair", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = [s for s in done.stderr.splitlines() if "FAILED: cell c13" in s]
    assert "its environment could not be made (see c13/logs/environment.log)" in line, line
    assert "was not found in the provided package locations" in line, line
    assert line.endswith("we can conclude that your requirements are unsatisfiable."), line
    log = (site / "c13" / "logs" / "environment.log").read_text()
    assert log.startswith("uv pip install for c13") and "\nerror: " in log, log


def test_a_build_backends_own_output_stays_in_the_log_and_the_line_is_bounded() -> None:
    """uv quotes a failed sdist build's output under its cause: the one line stops there
    (the log keeps it), and is at most 500 characters whatever uv printed."""
    said = uv_error(
        "error: Failed to build `a @ file:///a`\n"
        "  cause: The build backend returned an error\n"
        "  cause: Call to `setuptools.build_meta.build_wheel` failed (exit status: 1)\n"
        "\n"
        "      [stdout]\n"
        "      compiling a.cu\n"
        "\n"
        "      [stderr]\n"
        "      nvcc fatal   : Unsupported gpu architecture 'compute_20'\n"
        "\n"
        "      hint: This usually indicates a problem with the package or the build environment.\n"
    )
    assert said == (
        "Failed to build `a @ file:///a`: The build backend returned an error: Call to "
        "`setuptools.build_meta.build_wheel` failed (exit status: 1): hint: This usually "
        "indicates a problem with the package or the build environment."
    ), said
    long = uv_error("error: x\n  cause: " + "y" * 5000 + "\n")
    assert len(long) == 500 and long.endswith("...")


def test_a_command_that_prints_no_uv_error_gives_its_last_line(tmp_path: Path) -> None:
    """A container runtime that cannot pull the image, uv killed: no ``error:`` line, so the
    summary gives the last line the command printed."""
    script = (
        "echo 'Unable to find image x:1 locally' >&2; echo 'docker: Error response' >&2; exit 125"
    )
    with pytest.raises(CellEnvironmentFailed) as failed:
        _run(["sh", "-c", script], "uv venv for c13")
    first = failed.value.message.partition("\n")[0]
    assert first == "uv venv for c13 failed (exit 125): docker: Error response", first


def test_reading_uvs_output_is_linear_on_hostile_input() -> None:
    """uv's output is read in one pass: 20,000 cause lines and 200,000 continuation lines
    read in well under a second of CPU time, and give one line."""
    hostile = "error: x\n" + "  cause: y\n" * 20_000 + "      z\n" * 200_000 + "hint: a\n"
    start = time.process_time()
    said = uv_error(hostile)
    assert time.process_time() - start < 1.0
    assert "\n" not in said and said.startswith("x: y") and len(said) <= 500
    assert uv_error("Resolved 4 packages\nwarning: something\n") == ""
    # FORCE_COLOR's escapes around uv's words
    colored = "\x1b[1m\x1b[31merror\x1b[39m\x1b[0m: x\n  \x1b[31mcause\x1b[39m: y\n"
    assert uv_error(colored) == "x: y"
    assert uv_error("error: x\n" + "\x1b[" * 100_000 + "\n") == "x"
