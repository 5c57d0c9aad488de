from __future__ import annotations

from pathlib import Path

import pytest

from archguard.core.arch import format_list
from archguard.errors import ConfigError
from archguard.settings.config import env_disabled, load_project, unknown_env_warnings


def test_no_pyproject_means_no_overrides(tmp_path: Path) -> None:
    project = load_project(tmp_path)
    assert project.config is None
    assert not project.active


def test_table_is_parsed(project) -> None:  # type: ignore[no-untyped-def]
    root = project(
        '[build-system]\nrequires = ["setuptools", "torch-archguard>=0.1"]\n'
        '[tool.archguard]\narch_list = "8.0;8.6"\n'
        'arch_list_by_cuda = { cu130 = ["sm_90a", "12.0+PTX"] }\npolicy = "farm.yml"\n'
    )
    p = load_project(root)
    assert p.active and p.opt_in.lists_archguard and p.config is not None
    assert format_list(p.config.arch_list or ()) == "8.0;8.6"
    assert format_list(p.config.arch_list_by_cuda["cu130"]) == "9.0a;12.0+PTX"
    assert p.config.policy == root / "farm.yml"
    assert p.config.requested_for("cu130")[1].endswith("arch_list_by_cuda.cu130")  # type: ignore[index]
    assert p.config.requested_for("cu128")[1].endswith("arch_list")  # type: ignore[index]


def test_requires_alone_activates(project) -> None:  # type: ignore[no-untyped-def]
    p = load_project(project('[build-system]\nrequires = ["Torch_ArchGuard"]\n'))
    assert p.active and not p.opt_in.has_table


@pytest.mark.parametrize(
    ("table", "needles"),
    [
        ('arch_lists = "8.0"', ["unknown key 'arch_lists'", "Did you mean 'arch_list'?"]),
        ("archlist_by_cuda = {}", ["Did you mean 'arch_list_by_cuda'?"]),
        ('arch_list = "8.0;banana"', ["'banana'", "arch_list"]),
        ('arch_list_by_cuda = { "12.8" = "8.0" }', ["Did you mean 'cu128'?"]),
        ("arch_list = [8.0, 9.0]", ["quote every arch entry"]),
        ("policy = 3", ["policy must be a path string"]),
        ('policy = "a\\u0000b"', ["policy must be a path string"]),  # found by scripts/fuzz.py
    ],
)
def test_bad_tables_name_file_key_and_fix(project, table: str, needles: list[str]) -> None:  # type: ignore[no-untyped-def]
    root = project(f"[tool.archguard]\n{table}\n")
    with pytest.raises(ConfigError) as info:
        load_project(root)
    message = str(info.value)
    assert str(root / "pyproject.toml") in message
    for needle in needles:
        assert needle in message


def test_all_problems_are_reported_together(project) -> None:  # type: ignore[no-untyped-def]
    root = project('[tool.archguard]\narch_lst = "8.0"\npolicyy = "x"\n')
    with pytest.raises(ConfigError) as info:
        load_project(root)
    assert "'arch_lst'" in str(info.value) and "'policyy'" in str(info.value)


def test_unrelated_archguard_requirement_is_warned_about(project) -> None:  # type: ignore[no-untyped-def]
    p = load_project(project('[build-system]\nrequires = ["archguard"]\n'))
    assert not p.active
    assert any("unrelated project" in w for w in p.warnings())


def test_table_without_requirement_is_warned_about(project) -> None:  # type: ignore[no-untyped-def]
    p = load_project(project('[tool.archguard]\narch_list = "8.0"\n'))
    assert any("isolated `pip wheel` would build without archguard" in w for w in p.warnings())


@pytest.mark.parametrize(
    ("value", "disabled"), [("1", True), ("yes", True), ("0", False), ("", False), ("off", False)]
)
def test_disable_values(value: str, disabled: bool) -> None:
    assert env_disabled({"ARCHGUARD_DISABLE": value}) is disabled


def test_disable_garbage_is_an_error() -> None:
    with pytest.raises(ConfigError, match="ARCHGUARD_DISABLE='maybe'"):
        env_disabled({"ARCHGUARD_DISABLE": "maybe"})


def test_misspelled_env_variable_is_warned_about() -> None:
    (warning,) = unknown_env_warnings({"ARCHGUARD_ARCHLIST": "8.0", "PATH": "/bin"})
    assert "Did you mean 'ARCHGUARD_ARCH_LIST'?" in warning


@pytest.mark.parametrize(
    ("value", "seconds"), [(None, 10.0), ("", 10.0), ("30", 30.0), (" 0.5 ", 0.5)]
)
def test_the_lint_budget_from_the_environment(value: str | None, seconds: float) -> None:
    from archguard.settings.config import env_lint_budget

    env = {} if value is None else {"ARCHGUARD_LINT_BUDGET": value}
    assert env_lint_budget(env) == seconds


@pytest.mark.parametrize("value", ["0", "-3", "ten", "nan"])
def test_a_bad_lint_budget_is_one_error_naming_it(value: str) -> None:
    from archguard.errors import ConfigError
    from archguard.settings.config import env_lint_budget

    with pytest.raises(ConfigError) as caught:
        env_lint_budget({"ARCHGUARD_LINT_BUDGET": value})
    text = str(caught.value)
    assert f"ARCHGUARD_LINT_BUDGET={value!r}" in text and "e.g. 30" in text


def test_an_unknown_key_gets_the_suggestion_and_the_key_names_not_every_description() -> None:
    from archguard.settings.config import parse_config
    from archguard.settings.model import CONFIG_KEYS

    try:
        parse_config({"max_job": 2}, "p/pyproject.toml [tool.archguard]", Path())
    except ConfigError as exc:
        (line,) = [x for x in str(exc).splitlines() if "unknown key" in x]
    else:
        raise AssertionError("an unknown key must be an error")
    assert "Did you mean 'max_jobs'?" in line
    assert all(name in line for name in CONFIG_KEYS)
    assert not any(doc in line for doc in CONFIG_KEYS.values()) and len(line) < 300
