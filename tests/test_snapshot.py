"""probe-torch: what a real torch ships, read from its binaries with a real cuobjdump,
against the bundled table (issue #12). A table that differs is given as data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realtools import (
    REPO,
    cli,
    needs_cu130,
    needs_cuda_torch,
    needs_cuobjdump,
    not_fetched,
    run_main,
    torch_cuda,
    torch_dir,
    torch_version,
)

pytestmark = [needs_cuda_torch, needs_cuobjdump]


@pytest.fixture(scope="module", autouse=True)
def _one_probe_of_the_installed_torch() -> Iterator[None]:
    """The installed torch's binaries read once (cuobjdump over every CUDA library: the slow
    part) for the three `probe-torch` runs of it here, each run in this process (run_main)
    through the command line as a user runs it; the reading is the same each time, what each
    renders from it (the table, the policy, text or JSON) is its own."""
    from archguard.detect import torchlibs

    real = torchlibs.probe
    read: dict[tuple[Path, str], torchlibs.TorchProbe] = {}

    def probe(path: Path, cuobjdump: str) -> torchlibs.TorchProbe:
        key = (Path(path).resolve(), cuobjdump)
        if key not in read:
            read[key] = real(path, cuobjdump)
        return read[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torchlibs, "probe", probe)
        yield


@pytest.fixture(scope="module")
def installed() -> dict[str, Any]:
    proc = run_main("probe-torch", str(torch_dir()), "--check", "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@needs_cu130
def test_the_installed_torch_reproduces_its_bundled_row(installed: dict[str, Any]) -> None:
    (torch,) = installed["torches"]
    assert torch["differences"] == [] and installed["ok"] is True
    assert torch["cubins"] == ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]
    assert torch["ptx"] == []
    # what only some kernel files carry is named, with counts, not taken for the list
    assert any("libtorch_cuda.so: sm_100a (" in e for e in torch["extras"])
    assert "libtorch_cuda.so sha256 " in torch["provenance"]


def test_the_printed_row_is_a_torch_builds_row(run_cli) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli("probe-torch", str(torch_dir()))
    assert proc.returncode == 0, proc.stderr
    assert (
        "  - tag: cu" in proc.stdout
        and "    source: >-\n      probe: installed torch" in proc.stdout
    )


def test_a_table_that_differs_fails_check_and_names_the_difference(tmp_path: Path) -> None:
    """The Volta flicker as data: a table that says this torch also ships sm_70 (and a
    farm policy whose row asks for Thor, which this torch cannot run)."""
    table = (REPO / "defaults" / "torch_builds.yml").read_text()
    release = ".".join(torch_version().split(".")[:2])
    tag = "cu" + (torch_cuda() or "").replace(".", "")
    changed = tmp_path / "torch_builds.yml"
    changed.write_text(
        table.replace(
            f'  - tag: {tag}\n    torch: ["{release}"]\n    cubins: "7.5',
            f'  - tag: {tag}\n    torch: ["{release}"]\n    cubins: "7.0 7.5',
        )
    )
    assert changed.read_text() != table, "the installed torch's row is in the table"
    policy = tmp_path / "farm.yml"
    policy.write_text(
        f"schema: 1\nrows:\n  {tag}: {{arch_list: '8.0;9.0;11.0;12.0', reason: farm}}\n"
    )
    proc = run_main(
        "probe-torch",
        str(torch_dir()),
        "--check",
        "--torch-builds",
        str(changed),
        "--policy",
        str(policy),
    )
    assert proc.returncode == 1
    assert (
        f"sm_70: the table says torch {release} ({tag}) ships it; its binaries do not"
        in proc.stdout
    )
    assert "the policy needs this entry" in proc.stdout
    assert (
        f'#       - torch: "=={release}.*"' in proc.stdout
        and '#         drop: "11.0"' in proc.stdout
    )
    assert "result: DIFFERENT" in proc.stdout


@pytest.mark.slow
@pytest.mark.network
def test_the_real_torch_wheel_reproduces_the_bundled_row(tmp_path: Path) -> None:
    """The wheel itself, read without installing it (pip's cache supplies it)."""
    if os.environ.get("AG_TEST_SKIP_ISOLATED") == "1":
        pytest.skip("AG_TEST_SKIP_ISOLATED=1 (this fetches the torch wheel)")
    version = torch_version()
    got = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--isolated",
            "--no-deps",
            "-q",
            f"torch=={version}",
            "-d",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if got.returncode != 0:
        not_fetched("the torch wheel", got.stderr)
    (wheel,) = tmp_path.glob("torch-*.whl")
    proc = cli("probe-torch", str(wheel), "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"probe: {wheel.name} (sha256 " in proc.stdout
    assert "# against the table: the same" in proc.stdout
