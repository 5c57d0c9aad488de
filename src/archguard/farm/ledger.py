"""A job's ledger, ``SITE/.farm/jobs/<id>.json``: what it built (each wheel's name and
sha256, the facts ``archguard wheel`` read back), every input of its build (the plan's and
the builder's: the toolkit it found, the torch and Python its cell held, what a release
fetched), its status and its cause. The site is published from these ledgers, every run, so a
ledger is written only once what it names is in place; a kept ledger is kept only while its
inputs are the job's now and its wheels' bytes are the ones it names.

A job's ledger is the farm's; a wheel's record is the ``archguard.json`` it carries
(:mod:`archguard.binaries.record`). The store, ``SITE/wheels/<sha256>/<name>``, holds every
wheel a ledger publishes, by its content."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from archguard._fs import write_atomic as write_atomic  # noqa: PLC0414 (re-exported: farm/*)
from archguard.binaries.facts import WheelFacts
from archguard.detect.sources import file_sha256

STATE = ".farm"  # SITE/.farm: environments, job ledgers, the lock
USAGE = f"{STATE}/usage.json"  # the machine's use in the last run that built, for the page
STORE = "wheels"  # SITE/wheels/<sha256>/<wheel>: the store, every published wheel by its content


class Status(str, Enum):
    """What became of a job."""

    BUILT = "built"
    SKIPPED = "skipped"
    FAILED = "failed"
    KEPT = "kept"  # an earlier run's, checked
    SERVED = "served"  # another cell's stable-ABI wheel serves it

    def __str__(self) -> str:
        return self.value


PUBLISHED = (Status.BUILT, Status.KEPT, Status.SERVED)


@dataclass
class Outcome:
    """One job's result, as its ledger SITE/.farm/jobs/<id>.json holds it."""

    job: str
    package: str
    cell: str
    status: Status
    wheels: list[str] = field(default_factory=list)
    why: str = ""
    log: str = ""
    seconds: float = 0.0
    details: list[WheelFacts] = field(default_factory=list)  # what archguard wheel read back

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    sha256: dict[str, str] = field(default_factory=dict)  # wheel name -> its bytes' sha256
    inputs: dict[str, Any] = field(default_factory=dict)  # every input of its build
    fetched: str = ""  # a release: the sha256 (prefix) of the sdist it fetched

    def as_json(self) -> dict[str, object]:
        return {
            "job": self.job,
            "package": self.package,
            "cell": self.cell,
            "status": self.status.value,
            "wheels": self.wheels,
            "sha256": self.sha256,
            "why": self.why,
            "log": self.log,
            "seconds": round(self.seconds, 1),
            "inputs": self.inputs,
            "fetched": self.fetched or None,
            "details": [d.as_json() for d in self.details],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        return cls(
            str(data["job"]),
            str(data["package"]),
            str(data["cell"]),
            Status(data["status"]),
            [str(w) for w in data.get("wheels") or []],
            str(data.get("why") or ""),
            str(data.get("log") or ""),
            float(data.get("seconds") or 0.0),
            [WheelFacts.from_json(d) for d in data.get("details") or []],
            {str(k): str(v) for k, v in (data.get("sha256") or {}).items()},
            dict(data.get("inputs") or {}),
            str(data.get("fetched") or ""),
        )

    def stored(self, site: Path) -> list[Path]:
        """Where its wheels are published, in the store: ``SITE/wheels/<sha256>/<name>``."""
        return [store_path(site, w, self.sha256.get(w, "")) for w in self.wheels]


def say(text: str) -> None:
    """One line of the farm's log, on stderr."""
    print(f"archguard farm: {text}", file=sys.stderr, flush=True)


def store_path(site: Path, name: str, sha256: str) -> Path:
    return site / STORE / (sha256 or "unknown") / name


def ledger_path(site: Path, job: str) -> Path:
    return site / STATE / "jobs" / f"{job}.json"


def write_ledger(site: Path, outcome: Outcome) -> None:
    write_atomic(ledger_path(site, outcome.job), json.dumps(outcome.as_json(), indent=2))


def read_ledger(site: Path, job: str) -> Outcome | None:
    """The job's ledger, or None (none, or unreadable: a ledger is written whole, so a
    broken one was not written by archguard and is not trusted)."""
    try:
        return Outcome.from_json(json.loads(ledger_path(site, job).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def all_ledgers(site: Path) -> dict[str, Outcome]:
    """Every job's ledger in SITE, by job id."""
    folder = site / STATE / "jobs"
    out = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        ledger = read_ledger(site, path.stem)
        if ledger is not None:
            out[ledger.job] = ledger
    return out


def kept_problem(site: Path, ledger: Outcome, inputs: dict[str, Any]) -> str | None:
    """Why a published ledger cannot be kept for a job whose inputs are now ``inputs``
    (None: it can): its inputs changed (which), or a wheel is missing or its bytes are not
    those its ledger names."""
    if ledger.inputs != inputs:
        changed = sorted(
            k for k in set(ledger.inputs) | set(inputs) if ledger.inputs.get(k) != inputs.get(k)
        )
        return f"its inputs changed ({', '.join(changed)})"
    if not ledger.wheels:
        return "its ledger names no wheel"
    for name, path in zip(ledger.wheels, ledger.stored(site), strict=True):
        if name not in ledger.sha256:
            return f"its ledger holds no sha256 for {name}"
        if not path.is_file():
            return f"its wheel {name} is missing from {path.parent}"
        found = file_sha256(path)
        if found != ledger.sha256[name]:
            return f"its wheel {name} has sha256 {found}, not its ledger's {ledger.sha256[name]}"
    return None
