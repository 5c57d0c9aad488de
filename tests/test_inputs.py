"""archguard.settings.inputs: one assembler for every command and the build."""

from __future__ import annotations

from pathlib import Path

import pytest

from archguard.errors import CudaMismatch, InvalidArch
from archguard.settings.inputs import Query, choose_policy, cuda_agreement, gather, gather_settings

POLICY = "schema: 1\nrows:\n  cu130: {arch_list: '8.0;9.0+PTX', reason: farm}\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("cli", "env", "pkg"):
        out[name] = tmp_path / f"{name}.yml"
        out[name].write_text(POLICY.replace("farm", name))
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text('[tool.archguard]\npolicy = "../pkg.yml"\n')
    out["project"] = root
    return out


@pytest.mark.parametrize(
    ("use_cli", "use_env", "expected"),
    [(True, True, "cli"), (False, True, "env"), (False, False, "pkg")],
)
def test_policy_precedence(
    files: dict[str, Path], use_cli: bool, use_env: bool, expected: str
) -> None:
    query = Query(project_dir=files["project"], policy=str(files["cli"]) if use_cli else None)
    env = {"ARCHGUARD_POLICY": str(files["env"])} if use_env else {}
    policy = gather_settings(query, env).policy
    assert policy.rows["cu130"].reason == expected
    assert choose_policy(query, gather_settings(query, env).package, env) == policy


def test_bundled_policy_without_project_or_environment() -> None:
    settings = gather_settings(Query(project_dir=None), {})
    assert settings.policy.source.startswith("bundled arch_policy.yml")
    assert settings.package is None and settings.override is None


def test_override_is_shown_with_where_it_came_from() -> None:
    settings = gather_settings(Query(project_dir=None), {"ARCHGUARD_ARCH_LIST": "Ampere"})
    assert settings.override is not None and settings.override[1] == "ARCHGUARD_ARCH_LIST"
    (line,) = [v for k, v in settings.shown if k == "override"]
    assert line.startswith("ARCHGUARD_ARCH_LIST='Ampere' (wins over the package")


def test_bad_override_is_an_error_naming_the_variable() -> None:
    with pytest.raises(InvalidArch, match="environment variable ARCHGUARD_ARCH_LIST"):
        gather_settings(Query(project_dir=None), {"ARCHGUARD_ARCH_LIST": "9.5"})


def test_hypothetical_combo_and_the_order_of_shown_inputs() -> None:
    gathered = gather(Query(project_dir=None, cuda="12.8", torch="2.7"), {})
    assert [k for k, _ in gathered.shown] == ["policy", "platform", "toolkit", "torch", "package"]
    assert gathered.resolve().effective_text == "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"


def test_torch_arches_describe_a_torch_directly() -> None:
    gathered = gather(Query(project_dir=None, cuda="13.0", torch_arches="sm_80 sm_90"), {})
    assert gathered.torch.source == "--torch-arches" and gathered.torch.version is None


def test_unknown_environment_variable_is_warned_about() -> None:
    settings = gather_settings(Query(project_dir=None), {"ARCHGUARD_POLICYY": "x"})
    assert any("Did you mean 'ARCHGUARD_POLICY'?" in w for w in settings.warnings)


def test_cuda_majors_must_match_minors_may_differ() -> None:
    """torch built for one CUDA, the toolkit another (both taken from the bundled tables)."""
    from packaging.version import Version

    from archguard.core.toolkit import bundled_toolkit
    from archguard.core.torchbuild import bundled_torch

    torch_130 = bundled_torch((13, 0), Version("2.13"))
    assert cuda_agreement(bundled_toolkit((13, 0)), torch_130) is None
    warning = cuda_agreement(bundled_toolkit((13, 2)), torch_130)
    assert warning and "same major, so it works" in warning
    assert "the torch build's (cu130), clamped by nvcc 13.2's facts" in warning
    with pytest.raises(CudaMismatch) as info:
        cuda_agreement(bundled_toolkit((12, 8)), torch_130)
    assert "CUDA 13.0" in str(info.value) and "CUDA 12.8" in str(info.value)
