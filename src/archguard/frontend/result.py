"""``archguard wheel``'s result: one typed value per wheel, from its read-back through its
label, its repair and its variant copy, serialised to JSON (``archguard.wheel/1``) in one
place; what was read back travels with the wheel, never looked up again by its path."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from archguard.binaries.facts import WheelFacts
from archguard.core.abi import Serves

if TYPE_CHECKING:
    from archguard.binaries.record import RecordedTargets
    from archguard.binaries.verify import Checked

WHEEL_SCHEMA = "archguard.wheel/1"


@dataclass(frozen=True)
class WheelResult:
    """One wheel a build produced, and what was done to it: each step after the build
    (:mod:`archguard.frontend.finish`) gives a new one."""

    wheel: Path
    cuda_binaries: int
    targets: list[str]
    ok: bool  # every CUDA binary read back as recorded
    differences: list[str] = field(default_factory=list)
    checked: list[Checked] = field(default_factory=list, repr=False)  # the read-back
    # the record the front-end wrote into it (None: no CUDA binary, nothing recorded)
    record: RecordedTargets | None = field(default=None, repr=False, compare=False)
    # the cell's label and pin (archguard.binaries.relabel)
    label: str | None = None
    label_note: str | None = None
    pin: str | None = None
    label_why: str | None = None
    serves: Serves | None = None  # a stable-ABI abi3 wheel: what else it serves
    compiled_with: str | None = None  # the toolkit's CUDA ("13.5"), which wrote its PTX
    # the repair (auditwheel)
    platform: str | None = None
    lowest_platform: str | None = None
    grafted: list[str] | None = None
    not_grafted: list[str] | None = None
    retagged: str | None = None
    # the wheel-variant copy
    variant: str | None = None
    variant_notes: list[str] | None = None

    def facts(self) -> WheelFacts:
        """What it holds and what was done to it, as the one typed value its JSON is."""
        known = {f.name for f in fields(WheelFacts)}
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name in known}
        values["wheel"] = str(self.wheel)
        for key, value in values.items():
            if isinstance(value, list):
                values[key] = tuple(value)
        return WheelFacts(**values)

    def as_json(self) -> dict[str, object]:
        """Its JSON (:class:`~archguard.binaries.facts.WheelFacts`, which reads it back)."""
        return self.facts().as_json()

    def lines(self) -> list[str]:
        """Its line in ``archguard wheel``'s text, and what was done to it beneath."""
        refused = self.wheel.parent.name == "refused"
        mark = "REFUSED" if refused else "ok" if self.ok else "FAILED"
        targets = " ".join(self.targets) or "no CUDA code"
        pin = f"  requires {self.pin}" if self.pin else ""
        out = [f"{mark}  {self.wheel.name}  {targets}{pin}"]
        if self.label_note:
            out.append(f"  {self.label_note}")
        if self.platform:
            kept = ", ".join(self.not_grafted or []) or "none"
            grafted = ", ".join(self.grafted or []) or "nothing"
            out.append(
                f"  repaired: {self.platform} (the symbols allow {self.lowest_platform}; never "
                f"below torch's manylinux_2_28); not grafted: {kept}; grafted: {grafted}"
            )
        if self.retagged:
            out.append(f"  {self.retagged}")
        if self.serves:
            out.append(
                f"  serves {self.serves} (stable ABI, abi3): this CUDA's other cells need no "
                "build of it"
            )
        if self.variant:
            out.append(f"  variant: {self.variant}")
        return out


@dataclass
class Built:
    """One source's outcome."""

    source: str
    returncode: int
    environment: dict[str, str]
    reads: list[str]
    wheels: list[WheelResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    build_env: dict[str, object] = field(default_factory=dict)  # what the build declared
    toolkit: dict[str, object] = field(default_factory=dict)  # the toolkit root it saw

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and bool(self.wheels) and not self.problems

    def as_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "ok": self.ok,
            "pip_returncode": self.returncode,
            "environment": self.environment,
            "setup_py_reads": self.reads,
            "build_requirements": self.build_env,
            "toolkit": self.toolkit,
            "wheels": [w.as_json() for w in self.wheels],
            "problems": self.problems,
        }
