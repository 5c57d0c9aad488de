"""The command line: its stdout, stderr and exit status. Most tests run it in-process
(``run_cli``: ``archguard._cli.main``); the first ones run the entry points themselves as a
user does, ``python -m archguard`` and the ``archguard`` script, in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archguard import __version__
from realtools import REPO, cli, run_main
from test_resolve import COMBOS, spec_expected


def test_the_entry_points_run_the_same_command_line(tmp_path: Path) -> None:
    args = ("list", "--cuda", "13.0", "--torch", "2.13", "--format", "json")
    module = cli(*args)
    assert module.returncode == 0, module.stderr
    script = Path(sys.executable).parent / "archguard"
    assert script.is_file() or shutil.which("archguard"), "the console script is installed"
    proc = subprocess.run(
        [str(script) if script.is_file() else "archguard", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, module.stdout)
    inside = run_main(*args)
    assert (inside.returncode, inside.stdout, inside.stderr) == (0, module.stdout, module.stderr)
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"archguard {__version__}"
    # one exit-status rule, from the entry point too: an archguard error is 2, never a traceback
    bad = cli("list", "--cuda", "12.5", "--torch", "2.8")
    assert bad.returncode == 2 and bad.stderr.startswith("archguard error [unknown-toolkit]")
    assert "Exit status, every command: 0 fine; 1 findings" in " ".join(
        cli("--help").stdout.split()
    )


@pytest.mark.parametrize(("index", "torch"), COMBOS)
def test_list_prints_the_expected_results_table(run_cli, index: str, torch: str) -> None:  # type: ignore[no-untyped-def]
    cuda = f"{index[2:-1]}.{index[-1]}"
    proc = run_cli("list", "--cuda", cuda, "--torch", torch)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == spec_expected(index, torch) + "\n"


def test_explain_why_volta_on_cu128_torch_27(run_cli) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli("explain", "7.0", "--cuda", "12.8", "--torch", "2.7")
    assert proc.returncode == 0, proc.stderr
    why = " ".join(proc.stdout.split("Why 7.0?")[1].split("Decisions")[0].split())  # unwrapped
    assert "dropped (exception)" in why
    assert "ships no 7.x cubin" in why and "no PTX at or below 7.2" in why
    assert "pytorch#157517" in why  # the recorded exception's reason, quoted


def test_explain_why_volta_on_cu130(run_cli) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli("explain", "7.0", "--cuda", "13.0", "--torch", "2.13")
    assert proc.returncode == 0, proc.stderr
    assert "nvcc 13.0 cannot emit sm_70" in proc.stdout.split("Decisions")[0]


def test_explain_shows_thor_jit_only(run_cli) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli("explain", "--cuda", "13.0", "--torch", "2.13")
    jit = [line for line in proc.stdout.splitlines() if line.strip().startswith("jit-only")]
    assert jit == ["  jit-only    11.0 (Jetson Thor) via compute_90"]


def test_explain_json_has_schema_and_decisions(run_cli) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli("explain", "7.0", "--cuda", "12.8", "--torch", "2.7", "--format", "json")
    data = json.loads(proc.stdout)
    assert data["schema"] == "archguard.resolution/2"
    assert data["effective"] == "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"
    assert data["why"]["7.0"]["fate"] == "dropped (exception)"
    assert {d["step"] for d in data["decisions"]} == {
        "request",
        "exception",
        "toolkit",
        "torch",
        "ptx",
    }
    # Thor is 10.1 under CUDA 12.8 (sm_101; 11.0 from CUDA 13.0 on): sm_100 serves it
    thor = next(c for c in data["coverage"] if c["device"] == "Jetson Thor")
    assert thor == {
        "cc": "10.1",
        "device": "Jetson Thor",
        "tier": "native",
        "via": "sm_100",
        "torch_runs": True,
    }


def test_empty_override_fails_loudly_with_the_table_and_no_list(run_cli, project) -> None:  # type: ignore[no-untyped-def]
    root = project('[tool.archguard]\narch_list = "12.0a"\n')
    proc = run_cli("list", "--project", str(root), "--cuda", "12.6", "--torch", "2.8")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "archguard error [empty-arch-list]" in proc.stderr
    assert "nvcc 12.6 cannot emit sm_120a" in proc.stderr  # the decision table
    assert "[tool.archguard] arch_list" in proc.stderr  # the override that caused it
    assert "Traceback" not in proc.stderr
    explain = run_cli("explain", "--project", str(root), "--cuda", "12.6", "--torch", "2.8")
    assert explain.returncode == 2  # the exit rule: an archguard error, as `list` says
    assert "archguard error [empty-arch-list]" in explain.stderr
    assert "Effective list  (empty: no cubin left)" in explain.stdout


def test_no_policy_row_fails_with_the_fix(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "farm.yml"
    policy.write_text("schema: 1\nrows:\n  cu126: {arch_list: '8.0', reason: farm}\n")
    proc = run_cli("list", "--policy", str(policy), "--cuda", "12.8", "--torch", "2.8")
    assert proc.returncode == 2
    assert "archguard error [no-policy-row]" in proc.stderr
    assert "arch_list_by_cuda" in proc.stderr and "ADR process" in proc.stderr


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("text", "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"),
        ("torch", "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"),
        ("cmake", "75-real;80-real;86-real;90;100-real;120"),
        (
            "gencode",
            "-gencode=arch=compute_75,code=sm_75 -gencode=arch=compute_80,code=sm_80 "
            "-gencode=arch=compute_86,code=sm_86 -gencode=arch=compute_90,code=sm_90 "
            "-gencode=arch=compute_100,code=sm_100 -gencode=arch=compute_120,code=sm_120 "
            "-gencode=arch=compute_90,code=compute_90 "
            "-gencode=arch=compute_120,code=compute_120",
        ),
    ],
)
def test_list_formats(run_cli, fmt: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli("list", "--cuda", "13.0", "--torch", "2.13", "--format", fmt)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected + "\n"


def test_list_json_and_an_unrepresentable_torch_list(run_cli, project) -> None:  # type: ignore[no-untyped-def]
    root = project('[tool.archguard]\narch_list = "9.0;10.0f"\n')
    args = ("--project", str(root), "--cuda", "13.0", "--torch", "2.13")
    data = json.loads(run_cli("list", *args, "--format", "json").stdout)
    assert data["schema"] == "archguard.list/1"
    assert data["effective"] == "9.0;10.0f+PTX"
    assert data["torch_arch_list"] is None
    assert data["gencode"][1] == "-gencode=arch=compute_100f,code=sm_100f"
    proc = run_cli("list", *args, "--format", "torch")
    assert proc.returncode == 2 and "torch has no 'f' targets" in proc.stderr


def test_env_override_and_torch_arches(run_cli) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(
        "list",
        "--cuda",
        "12.8",
        "--torch-arches",
        "sm_80 sm_90",
        "--torch",
        "2.9",
        env={"ARCHGUARD_ARCH_LIST": "Ampere;Hopper"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "8.0;8.6+PTX;9.0+PTX\n"  # Ampere declares 8.6+PTX


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["list", "--cuda", "12.5", "--torch", "2.8"], "unknown-toolkit", "12.4, 12.6"),
        (["list", "--cuda", "12.8", "--torch", "2.3"], "unknown-torch-build", "2.7, 2.8"),
        (["list", "--cuda", "twelve", "--torch", "2.3"], "invalid-config", "'twelve'"),
        (["explain", "7.7", "--cuda", "12.8", "--torch", "2.7"], "invalid-arch", "sm_77"),
        (["list", "--cuda", "12.8", "--torch-arches", "sm_80 gpu"], "invalid-arch", "'gpu'"),
    ],
)
def test_errors_are_one_paragraph_without_traceback(run_cli, args, code, needle) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"archguard error [{code}]")
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["explain", "--cuda", "14.0", "--format", "json"], "unknown-toolkit"),
        (["list", "--cuda", "12.8", "--torch", "2.3", "--format", "json"], "unknown-torch-build"),
        (["lint", "--cuda", "13.0", "--torch", "2.1", "--format", "json"], "unknown-torch-build"),
        (["matrix", "--policy", "missing.yml", "--format", "json"], None),
    ],
)
def test_under_format_json_an_error_is_one_json_object_on_stdout(args, code) -> None:  # type: ignore[no-untyped-def]
    proc = run_main(*args)
    assert proc.returncode == 2, proc.stderr
    data = json.loads(proc.stdout)  # stdout is the JSON object and nothing else
    assert data["schema"] == "archguard.error/1"
    error = data["error"]
    assert set(error) == {"code", "message", "detail"}
    assert error["code"] == code if code else error["code"] != "archguard-error"
    # the person still reads the same one paragraph on stderr
    assert proc.stderr.startswith(f"archguard error [{error['code']}]: {error['message']}")
    assert "Traceback" not in proc.stderr
    text = run_main(*[a for a in args if a not in ("--format", "json")])
    assert text.returncode == 2 and text.stdout == ""


def test_usage_error_exit_status(run_cli) -> None:  # type: ignore[no-untyped-def]
    assert run_cli("list", "--format", "yaml").returncode == 2


def test_help_groups_the_commands_as_the_readme_does() -> None:
    import re

    from archguard._cli import COMMANDS
    from archguard._cli.parser import GROUPS

    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(COMMANDS)  # every command in exactly one group
    readme = (REPO / "README.md").read_text()
    table = readme.split("| command | what it does |", 1)[1].split("\n\n", 1)[0]
    seen: list[tuple[str, list[str]]] = []
    for row in table.splitlines():
        if heading := re.match(r"^\| \*\*(.+)\*\* \| \|$", row):
            seen.append((heading[1], []))
        elif command := re.match(r"^\| `([a-z-]+)", row):
            seen[-1][1].append(command[1])
    assert seen == [(title, list(names)) for title, names in GROUPS]
    shown = run_main("--help").stdout
    assert [line[:-1] for line in shown.splitlines() if line.endswith(":")][:-1] == [
        title for title, _ in GROUPS
    ]
    for name in grouped:
        assert re.search(rf"^  {re.escape(name)}\s", shown, re.M), name
    modules = ["builder", "farm", "user", "policy"]  # each group's commands in its own module
    own = {"cache": "cache"}  # a command in a module of its own, within its group
    for module, (_, names) in zip(modules, GROUPS, strict=True):
        for name in names:
            assert COMMANDS[name].__module__ == f"archguard._cli.{own.get(name, module)}", name
