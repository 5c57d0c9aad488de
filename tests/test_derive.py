"""archguard.core.derive: the ADR's derivation rule reproduces every policy row and its recorded
exceptions from the bundled facts, and proposes a row for an index given as data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archguard.core.arch import Arch
from archguard.core.cuda import CudaVersion
from archguard.core.derive import derive
from archguard.core.policy import load_policy
from archguard.core.toolkit import bundled_toolkit
from archguard.core.torchbuild import bundled_builds
from archguard.errors import PolicyError, UnknownTorchBuild
from archguard.settings.inputs import toolkit_facts, torch_facts
from test_policy import ADR_ROWS

POLICY = load_policy(None)
RECORDED = {
    "cu128": [("==2.7.*", "7.0"), ("==2.11.*", "7.0")],
    "cu129": [(">=2.11", "7.0")],
}


@pytest.mark.parametrize("tag", sorted(ADR_ROWS))
def test_derive_reproduces_every_policy_row_and_its_exceptions(tag: str) -> None:
    cuda = CudaVersion.from_tag(tag)
    assert cuda is not None
    derived = derive(cuda, POLICY, bundled_toolkit(cuda), bundled_builds())
    assert derived.text == ADR_ROWS[tag]
    assert [(e.torch, str(e.drop)) for e in derived.exceptions] == RECORDED.get(tag, [])
    assert derived.existing == ADR_ROWS[tag] and derived.differences == ()


def test_the_steps_name_the_decisions_they_used() -> None:
    cu124 = derive(CudaVersion(12, 4), POLICY, bundled_toolkit((12, 4)), bundled_builds())
    step, what = cu124.steps[1]
    assert step == "drop"
    assert what.startswith("5.0: decided in the policy: CW-ADR-0012: Maxwell is below Steam's")
    cu130 = derive(CudaVersion(13, 0), POLICY, bundled_toolkit((13, 0)), bundled_builds())
    nets = [w for s, w in cu130.steps if s == "ptx"]
    assert nets[0].startswith("9.0+PTX: the net for the 11.x gap (11.0, no cubin in the row)")
    assert nets[1].startswith("12.0+PTX on the highest arch")


def test_without_the_gap_decision_the_rule_puts_the_net_below_the_gap(tmp_path: Path) -> None:
    """The ADR's literal rule says 10.0; its table says 9.0: the decision is data."""
    path = tmp_path / "p.yml"
    bundled = (Path(__file__).parent.parent / "defaults" / "arch_policy.yml").read_text()
    path.write_text(bundled.split("  gap_nets:")[0])
    derived = derive(
        CudaVersion(13, 0), load_policy(path), bundled_toolkit((13, 0)), bundled_builds()
    )
    assert derived.text == "7.5;8.0;8.6;9.0;10.0+PTX;12.0+PTX"
    assert "9.0: +PTX differs (the policy row carries it)" in derived.differences
    assert "10.0: +PTX differs (derived carries it)" in derived.differences


TOOLKITS = """\
schema: 1
toolkits:
  "13.4":
    source: "made up for a test: a toolkit like 13.2"
    ptx_isa: "9.4"
    cubins: [sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, sm_100, sm_100a, sm_100f,
             sm_103, sm_110, sm_120, sm_120a, sm_121]
    ptx: [compute_75, compute_80, compute_86, compute_89, compute_90, compute_100,
          compute_110, compute_120, compute_121]
"""
BUILDS = """\
schema: 1
builds:
  - tag: cu134
    torch: ["2.14"]
    cubins: "7.5 8.0 8.6 9.0 10.0 11.0 12.0"
    ptx: "12.0"
    source: "made up for a test"
  - tag: cu134
    torch: ["2.15", "2.16"]
    cubins: "8.0 8.6 9.0 10.0 11.0 12.0"
    ptx: ""
    source: "made up for a test: Turing rotated off"
"""


def test_a_hypothetical_index_given_as_data_gets_a_sensible_row(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    toolkits, builds = tmp_path / "toolkits.yml", tmp_path / "torch_builds.yml"
    toolkits.write_text(TOOLKITS)
    builds.write_text(BUILDS)
    cuda = CudaVersion(13, 4)
    derived = derive(cuda, POLICY, toolkit_facts(cuda, str(toolkits)), torch_facts(str(builds)))
    # Thor (11.0) has a cubin here: no gap, so one PTX net on the highest arch
    assert derived.text == "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX"
    (exc,) = derived.exceptions
    assert (exc.torch, exc.drop, exc.releases) == (">=2.15", Arch(7, 5), ("2.15", "2.16"))
    assert "cannot run where sm_75 would serve (7.5)" in exc.reason
    assert derived.existing is None
    assert derived.reason.startswith("derived by CW-ADR-0012's rule from PyTorch's cu134 union")
    proc = run_cli(
        "derive", "--cuda", "13.4", "--toolkits", str(toolkits), "--torch-builds", str(builds)
    )
    assert proc.returncode == 0, proc.stderr
    assert 'arch_list: "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX"' in proc.stdout
    assert "no cu134 row yet: the row above is new" in proc.stdout
    data = json.loads(
        run_cli(
            "derive",
            "--cuda",
            "13.4",
            "--toolkits",
            str(toolkits),
            "--torch-builds",
            str(builds),
            "--format",
            "json",
        ).stdout
    )
    assert data["schema"] == "archguard.derive/1" and data["agrees"] is False
    assert data["arch_exceptions"][0]["torch"] == ">=2.15"


def test_derive_for_an_index_without_torch_facts_names_the_fix() -> None:
    with pytest.raises(UnknownTorchBuild, match="--torch-builds"):
        derive(CudaVersion(12, 9), POLICY, bundled_toolkit((12, 9)), [])


def test_derive_cli_agrees_with_the_bundled_policy(run_cli) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli("derive", "--cuda", "12.9")
    assert proc.returncode == 0, proc.stderr
    assert (
        "row cu129 (7.0;7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX) and its arch_exceptions: the same"
        in proc.stdout
    )
    assert 'torch: ">=2.11"' in proc.stdout


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ("derivation:\n  drop:\n    - {arch: '5.0'}\n", "missing required key 'reason'"),
        ("derivation:\n  drop:\n    - {arch: '9.5', reason: r}\n", "sm_95"),
        ("derivation:\n  gap_nets:\n    - {gap: 9, arch: '9.0', reason: r}\n", "gap must be"),
        ("derivation:\n  drops: []\n", "did you mean 'drop'"),
    ],
)
def test_check_policy_validates_the_derivation_section(
    tmp_path: Path, section: str, needle: str
) -> None:
    path = tmp_path / "p.yml"
    path.write_text("schema: 1\nrows:\n  cu130: {arch_list: '8.0', reason: r}\n" + section)
    with pytest.raises(PolicyError, match=needle):
        load_policy(path)
