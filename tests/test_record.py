"""archguard.binaries.record: the wheel record's name, schema, writing and reading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from archguard.binaries.record import (
    RECORD_NAME,
    RESOLUTION_SCHEMA,
    is_record_name,
    read_record,
    resolution_record,
    write_record,
)
from archguard.core.policy import load_policy
from archguard.core.resolve import Resolution, resolve
from archguard.core.toolkit import bundled_toolkit
from archguard.core.torchbuild import bundled_torch
from archguard.errors import BinaryReadError


def cu130() -> Resolution:
    return resolve(
        load_policy(None), bundled_toolkit((13, 0)), bundled_torch((13, 0), Version("2.13"))
    )


def test_record_round_trips_through_a_dist_info(tmp_path: Path) -> None:
    res = cu130()
    path = write_record(tmp_path, resolution_record(res))
    assert path.name == RECORD_NAME
    data = json.loads(path.read_text())
    assert data["schema"] == RESOLUTION_SCHEMA
    assert data["effective"] == "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"
    assert {d["step"] for d in data["decisions"]} == {"request", "toolkit", "torch", "ptx"}
    recorded = read_record(path.read_text(), "x.whl!archguard.json")
    assert recorded.targets == res.targets
    assert (
        recorded.label
        == "x.whl!archguard.json (7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX; cu130, torch 2.13)"
    )


@pytest.mark.parametrize(
    ("name", "yes"),
    [
        ("pkg-1.0.dist-info/archguard.json", True),
        ("a/b/pkg-1.0.dist-info/archguard.json", True),
        ("pkg/archguard.json", False),
        ("archguard.json", False),
    ],
)
def test_is_record_name(name: str, yes: bool) -> None:
    assert is_record_name(name) is yes


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"schema": "other/1"}',
        '{"schema": "archguard.resolution/1"}',
        '{"schema": "archguard.resolution/1", "targets": {"cubins": [1], "ptx": []}}',
    ],
)
def test_unreadable_records_are_one_error(text: str) -> None:
    with pytest.raises(BinaryReadError, match="is not a readable archguard record"):
        read_record(text, "w.whl!archguard.json")


def test_why_section_uses_the_same_decisions() -> None:
    from archguard.core.arch import Arch

    record = resolution_record(cu130(), why=[Arch(7, 0)])
    why = record["why"]["7.0"]  # type: ignore[index]
    assert why["fate"] == "dropped (toolkit)"
    assert why["decisions"][0]["outcome"] == "not-requested"


def test_a_wheels_facts_round_trip_through_archguard_wheels_json_and_a_farm_ledger(
    tmp_path: Path,
) -> None:
    """One typed class writes a wheel's facts and reads them back: archguard wheel's JSON,
    a farm job's ledger written and read, the site's data published from it."""
    from archguard.binaries.facts import WheelFacts
    from archguard.core.abi import Serves
    from archguard.farm.ledger import Outcome, Status, read_ledger, write_ledger
    from archguard.frontend.result import WheelResult

    built = WheelResult(
        tmp_path / "x-1.0+cu130-cp310-abi3-manylinux_2_28_x86_64.whl",
        1,
        ["sm_80", "compute_80"],
        True,
        label="cu130",
        pin="torch>=2.10",
        serves=Serves("2.10", 10),
        grafted=[],
        compiled_with="13.5",
    )
    data = built.as_json()
    assert data["serves"] == "torch>=2.10 on Python>=3.10" and data["targets"] == [
        "sm_80",
        "compute_80",
    ]
    facts = WheelFacts.from_json(data)
    assert facts == built.facts() and facts.serves == Serves("2.10", 10)
    # a ledger's JSON says its status as text: taken as the enum
    outcome = Outcome("j", "x", "cell", "built", [facts.name], details=[facts])  # type: ignore[arg-type]
    assert outcome.status is Status.BUILT
    write_ledger(tmp_path, outcome)
    back = read_ledger(tmp_path, "j")
    assert back is not None and back.details == [facts] and back.status is Status.BUILT
    with pytest.raises(ValueError, match="targets = 'sm_80' is not a list of texts"):
        WheelFacts.from_json({"wheel": "w", "targets": "sm_80"})
    broken = tmp_path / ".farm" / "jobs" / "j.json"
    broken.write_text(broken.read_text().replace('"targets": [', '"targets": 3, "x": ['))
    assert read_ledger(tmp_path, "j") is None  # not archguard's: not trusted
