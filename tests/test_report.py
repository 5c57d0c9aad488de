"""archguard.reports.text: every human-readable view prints from the same decisions."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from archguard.core.arch import Arch, parse_arch_list
from archguard.core.decisions import Outcome
from archguard.core.formats import ListFormat
from archguard.core.policy import load_policy
from archguard.core.resolve import resolve
from archguard.core.toolkit import bundled_toolkit, known_arches
from archguard.core.torchbuild import bundled_torch
from archguard.errors import EmptyArchList, NvccNotFound
from archguard.reports.text import (
    build_log_lines,
    decision_table,
    explain_text,
    list_text,
    render_error,
    tiers_text,
)
from archguard.settings.model import PackageConfig

POLICY = load_policy(None)


def combo(cuda: tuple[int, int], torch: str, arch_list: str | None = None):  # type: ignore[no-untyped-def]
    pkg = (
        PackageConfig("pp", arch_list=parse_arch_list(arch_list, "t", known=known_arches()))
        if arch_list
        else None
    )
    return resolve(POLICY, bundled_toolkit(cuda), bundled_torch(cuda, Version(torch)), pkg)


LIST_FORMATS = [
    ("text", "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX\n"),
    ("torch", "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX\n"),
    ("cmake", "75-real;80-real;86-real;90;100-real;120\n"),
]


@pytest.mark.parametrize(("fmt", "text"), LIST_FORMATS)
def test_list_text(fmt: ListFormat, text: str) -> None:
    assert list_text(combo((13, 0), "2.13"), fmt) == text


def test_list_json_has_a_schema_and_null_for_what_torch_cannot_spell() -> None:
    data = json.loads(list_text(combo((13, 0), "2.13", "9.0;10.0f"), "json"))
    assert data["schema"] == "archguard.list/1" and data["torch_arch_list"] is None
    assert data["targets"] == {"cubins": ["sm_90", "sm_100f"], "ptx": ["compute_100"]}


def test_decision_table_lists_every_arch_once_with_its_fate() -> None:
    table = decision_table(combo((12, 8), "2.7"))
    assert table.splitlines()[0] == "  arch   => fate"
    assert "  7.0    => dropped (exception)" in table
    assert table.count("=> kept+PTX") == 2
    assert table.endswith("effective: 7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX")


def test_explain_sections_in_order() -> None:
    text = explain_text(combo((13, 0), "2.13"), [("policy", "p")], ["w1"], [Arch(7, 0)])
    order = ["Inputs", "Why 7.0? => dropped (toolkit)", "Decisions", "Effective list", "Coverage"]
    positions = [text.index(s) for s in [*order, "Notes"]]
    assert positions == sorted(positions)
    assert "  - w1" in text


def test_build_log_names_only_the_notable_decisions() -> None:
    res = combo((12, 8), "2.7")
    lines = build_log_lines(res, [("policy", "p")], [])
    assert lines[0] == "policy: p" and lines[1].startswith("request: policy row cu128")
    assert any(line.startswith("dropped 7.0 (exception)") for line in lines)
    assert any(line.startswith("confirms 7.0 (torch)") for line in lines)
    kept = [d for d in res.decisions if d.outcome is Outcome.KEPT and d.step.value == "toolkit"]
    assert kept and not any("nvcc 12.8 emits" in line for line in lines)
    assert lines[-2] == "effective arch list (cu128): 7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"


def test_tiers_text() -> None:
    text = tiers_text(combo((13, 0), "2.13").coverage())
    assert text.startswith("dead 5.0, 5.2, 5.3, 6.0")
    assert "jit-only 11.0 via compute_90" in text


def test_render_error_attaches_the_table_once() -> None:
    res = combo((12, 6), "2.8", "12.0a")
    with pytest.raises(EmptyArchList) as info:
        res.require_cubins()
    text = render_error(info.value)
    assert text.startswith("archguard error [empty-arch-list]: no cubin is left")
    assert text.count(decision_table(res)) == 1
    assert render_error(info.value) == text  # rendering twice does not stack tables
    assert render_error(NvccNotFound("x")) == "archguard error [nvcc-missing]: x"
