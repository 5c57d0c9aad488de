from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from archguard.core.arch import format_list
from archguard.core.policy import load_policy
from archguard.errors import PolicyError

# CW-ADR-0012, "The policy rows (the decision)".
ADR_ROWS = {
    "cu124": "6.0;7.0;7.5;8.0;8.6;9.0+PTX",
    "cu126": "6.0;7.0;7.5;8.0;8.6;9.0+PTX",
    "cu128": "7.0;7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX",
    "cu129": "7.0;7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX",
    "cu130": "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX",
    "cu132": "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX",
}

GOOD = """\
schema: 1
rows:
  cu130:
    arch_list: "8.0;9.0+PTX"
    reason: "test row"
arch_exceptions:
  cu130:
    - torch: ">=2.12"
      drop: "8.0"
      reason: "test exception"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yml"
    path.write_text(text)
    return path


def test_bundled_policy_is_the_adr_table() -> None:
    policy = load_policy(None)
    assert {tag: format_list(row.entries) for tag, row in policy.rows.items()} == ADR_ROWS
    assert all(row.reason.startswith("CW-ADR-0012") for row in policy.rows.values())
    recorded = {
        tag: [(str(e.torch), [str(a) for a in e.drop]) for e in items]
        for tag, items in policy.exceptions.items()
    }
    assert recorded == {
        "cu128": [("==2.7.*", ["7.0"]), ("==2.11.*", ["7.0"])],
        "cu129": [(">=2.11", ["7.0"])],
    }
    assert len(policy.digest) == 64


def test_a_good_file_loads(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, GOOD))
    assert format_list(policy.rows["cu130"].entries) == "8.0;9.0+PTX"


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        (
            ("arch_list:", "arch_lst:"),
            [
                "rows.cu130",
                "unknown key 'arch_lst'",
                "did you mean 'arch_list'",
                "missing required key",
            ],
        ),
        (('"8.0;9.0+PTX"', '"8.0;9.5+PTX"'), ["rows.cu130.arch_list", "'9.5'", "sm_95"]),
        (('reason: "test row"', 'reason: ""'), ["rows.cu130.reason", "non-empty"]),
        (('    reason: "test row"\n', ""), ["missing required key 'reason'"]),
        (("cu130:\n    arch", "cu13:\n    arch"), ["'cu13' is not a CUDA row name"]),
        (('">=2.12"', '">=two"'), ["arch_exceptions.cu130[0].torch", "not a version specifier"]),
        (('drop: "8.0"', 'drop: "8.0q"'), ["arch_exceptions.cu130[0].drop", "'8.0q'"]),
        (("schema: 1", "schema: 2"), ["schema", "write schema: 1"]),
        (
            ("arch_exceptions:\n  cu130", "arch_exceptions:\n  cu128"),
            ["arch_exceptions.cu128", "no policy row 'cu128'"],
        ),
        (("rows:", "rowz:"), ["unknown key 'rowz'", "did you mean 'rows'"]),
    ],
)
def test_bad_policies_name_file_key_value_and_fix(
    tmp_path: Path, change: tuple[str, str], needles: list[str]
) -> None:
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    message = str(info.value)
    assert str(path) in message
    assert "check-policy" in message
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("!!python/object/apply:os.system ['echo pwned']", "is not plain data"),
        ("schema: !!python/name:os.system\nrows: {}", "is not plain data"),
        ("rows: !!set {a, b}", "is not plain data"),
        ("schema: 1\nrows:\n  cu130: {arch_list: '8.0', reason: 2026-08-01}", "timestamp"),
        ("a: &x [1]\nb: *x", "anchors and aliases are not allowed"),
        ("schema: 1\nschema: 1", "duplicate key 'schema'"),
        ("rows: [", "not valid YAML"),
        ("- just\n- a list", "must be a mapping"),
    ],
)
def test_yaml_that_is_not_plain_data_is_refused(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(write(tmp_path, text))
    assert needle in str(info.value)
    assert str(tmp_path) in str(info.value)


def test_alias_bomb_is_refused_quickly_in_bounded_memory(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    path = write(tmp_path, "\n".join(lines) + "\n")
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(PolicyError, match="anchors and aliases are not allowed"):
        load_policy(path)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 2.0
    assert peak < 20 * 1024 * 1024


def test_very_large_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = write(tmp_path, "# " + "x" * (2 << 20) + "\n")
    with pytest.raises(PolicyError, match="larger than 1 MiB"):
        load_policy(path)


def test_unusable_path_is_a_policy_error() -> None:
    with pytest.raises(PolicyError, match="not a usable path"):
        load_policy("bad\x00name.yml", "--policy")


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="does not exist"):
        load_policy(tmp_path / "nope.yml", "ARCHGUARD_POLICY")


def test_check_policy_cli(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    ok = run_cli("check-policy")
    assert ok.returncode == 0, ok.stderr
    assert (
        "valid (6 rows: cu124, cu126, cu128, cu129, cu130, cu132; 3 arch exceptions)" in ok.stdout
    )
    broken = str(write(tmp_path, GOOD.replace("reason:", "reasn:")))
    bad = run_cli("check-policy", broken)
    assert bad.returncode == 2
    # --policy FILE, as every other command takes it, is the same check
    flagged = run_cli("check-policy", "--policy", broken)
    assert flagged.returncode == 2 and flagged.stderr == bad.stderr
    assert "Traceback" not in bad.stderr
    assert "archguard error [invalid-policy]" in bad.stderr
    assert "did you mean 'reason'" in bad.stderr
    env_bad = run_cli(
        "list",
        "--cuda",
        "13.0",
        "--torch",
        "2.13",
        env={"ARCHGUARD_POLICY": str(tmp_path / "policy.yml")},
    )
    assert env_bad.returncode == 2
    assert "(from ARCHGUARD_POLICY)" in env_bad.stderr
