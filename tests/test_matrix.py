from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archguard.core.torchbuild import bundled_builds
from test_resolve import spec_expected

REPO = Path(__file__).resolve().parent.parent


def matrix(run_cli, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    proc: subprocess.CompletedProcess[str] = run_cli("matrix", *args)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_json_covers_every_bundled_combo_and_agrees_with_list(run_cli) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(matrix(run_cli, "--format", "json").stdout)
    assert data["schema"] == "archguard.matrix/1"
    combos = {(c["cuda_tag"], c["torch"]): c for c in data["combos"]}
    assert set(combos) == {(b.tag, b.torch) for b in bundled_builds() if b.platform == "x86_64"}
    for (index, torch), combo in combos.items():
        assert combo["effective"] == spec_expected(index, torch)
        assert len(combo["coverage"]) == len(data["devices"])
    # rows agree with `list` for the same combo (spot-check through the CLI)
    for index, torch in [("cu128", "2.7"), ("cu129", "2.10"), ("cu132", "2.13")]:
        cuda = f"{index[2:-1]}.{index[-1]}"
        listed = run_cli("list", "--cuda", cuda, "--torch", torch).stdout.strip()
        assert listed == combos[(index, torch)]["effective"]
    cu128 = combos[("cu128", "2.7")]
    assert cu128["dropped"][0]["arch"] == "7.0" and cu128["dropped"][0]["step"] == "exception"
    # Thor is 10.1 under CUDA 12.8 (11.0 from CUDA 13.0 on): sm_100 serves it natively
    thor = next(c for c in cu128["coverage"] if c["cc"] == "10.1")
    assert thor == {"cc": "10.1", "tier": "native", "via": "sm_100", "torch_runs": True}
    cu130 = combos[("cu130", "2.14")]  # a probed wheel's row
    thor = next(c for c in cu130["coverage"] if c["cc"] == "11.0")
    assert thor == {"cc": "11.0", "tier": "jit-only", "via": "compute_90", "torch_runs": False}


def test_github_matrix_is_include_entries(run_cli) -> None:  # type: ignore[no-untyped-def]
    text = matrix(run_cli, "--format", "github").stdout
    assert text.count("\n") == 1  # one line, for $GITHUB_OUTPUT
    data = json.loads(text)
    assert list(data) == ["include"]
    entry = next(e for e in data["include"] if (e["cuda_tag"], e["torch"]) == ("cu130", "2.13"))
    assert entry["arch_list"] == "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"
    assert entry["torch_cuda_arch_list"] == entry["arch_list"]
    assert entry["archguard_schema"] == "archguard.github-matrix/1"


def test_text_and_markdown(run_cli) -> None:  # type: ignore[no-untyped-def]
    text = matrix(run_cli).stdout
    assert "cu128  2.7    7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX      7.0 (exception)" in text
    md = matrix(run_cli, "--format", "markdown").stdout
    assert (
        "| cu128 | 2.7 | `7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX` | 7.0 (exception) | - | "
        "5.0, 5.2, 5.3, 6.0, 6.1, 6.2, 7.0, 7.2 | 5.0, 5.2, 5.3, 6.0, 6.1, 6.2, 7.0, 7.2 |"
    ) in md


def test_html_is_self_contained(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "m.html"
    matrix(run_cli, "--format", "html", "-o", str(out))
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    for external in ("http://", "https://", "<script", "<link", "@import", "url("):
        assert external not in page
    x86 = [b for b in bundled_builds() if b.platform == "x86_64"]  # this machine's page
    assert page.count("<tr>") == len(x86) + 1


def test_package_overrides_apply_with_project(run_cli, project) -> None:  # type: ignore[no-untyped-def]
    root = project(
        '[tool.archguard]\narch_list_by_cuda = { cu124 = "9.0a" }\narch_list = "8.0;9.0"\n'
    )
    proc = run_cli("matrix", "--project", str(root), "--format", "json")
    data = json.loads(proc.stdout)
    combos = {(c["cuda_tag"], c["torch"]): c for c in data["combos"]}
    assert combos[("cu130", "2.13")]["effective"] == "8.0;9.0+PTX"
    assert combos[("cu124", "2.6")]["effective"] == "9.0a+PTX"


def test_failing_cells_are_shown_and_exit_non_zero(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "p.yml"
    policy.write_text("schema: 1\nrows:\n  cu130: {arch_list: '8.0', reason: farm}\n")
    proc = run_cli("matrix", "--policy", str(policy))
    assert proc.returncode == 1
    assert "cu124  2.4    ERROR: the policy" in proc.stdout


@pytest.mark.skipif(
    not (shutil.which("chromium") or shutil.which("chromium-browser")),
    reason="no headless Chromium (apt-get install chromium)",
)
def test_html_renders_in_headless_chromium(tmp_path: Path) -> None:
    out = tmp_path / "matrix.png"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHGUARD_")}
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "screenshot_matrix.py"), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_matrix_and_list_agree_on_every_cell_under_archguard_arch_list(run_cli) -> None:  # type: ignore[no-untyped-def]
    """ARCHGUARD_ARCH_LIST applies to every cell, as it does to `list` (issue #11)."""
    env = {"ARCHGUARD_ARCH_LIST": "7.0;8.0;10.0"}
    data = json.loads(run_cli("matrix", "--format", "json", env=env).stdout)
    assert data["override"] == {"variable": "ARCHGUARD_ARCH_LIST", "list": "7.0;8.0;10.0"}
    for combo in data["combos"]:
        listed = run_cli("list", "--cuda", combo["cuda"], "--torch", combo["torch"], env=env)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.strip() == combo["effective"], combo["cuda_tag"]
    cells = {(c["cuda_tag"], c["torch"]): c["effective"] for c in data["combos"]}
    assert cells[("cu128", "2.8")] == "7.0;8.0+PTX;10.0+PTX"  # 9.x between: PTX on 8.0
    assert cells[("cu130", "2.13")] == "8.0+PTX;10.0+PTX"  # no sm_70 in nvcc 13.0
    text = run_cli("matrix", env=env).stdout
    assert text.startswith("note: ARCHGUARD_ARCH_LIST=7.0;8.0;10.0 applies to every cell")
    assert "note:" not in run_cli("matrix").stdout  # without the override: no note
