"""One built wheel's facts, as ``archguard wheel`` writes them (its JSON's ``wheels``) and a
farm's job record keeps them: one typed class writes them (:meth:`WheelFacts.as_json`) and
reads them back (:meth:`WheelFacts.from_json`), so the page, the site's data and the run read
fields, never keys of a dict another step formatted."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from archguard.core.abi import Serves


@dataclass(frozen=True)
class WheelFacts:
    """What was read back from one wheel and what was done to it."""

    wheel: str  # where it was built; a farm keeps its name once stored
    cuda_binaries: int
    targets: tuple[str, ...]  # cubins and PTX read back
    ok: bool  # every CUDA binary read back as recorded
    differences: tuple[str, ...] = ()
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
    grafted: tuple[str, ...] | None = None
    not_grafted: tuple[str, ...] | None = None
    retagged: str | None = None
    # the wheel-variant copy
    variant: str | None = None
    variant_notes: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return Path(self.wheel).name

    def as_json(self) -> dict[str, object]:
        """The read-back always, each later step's facts once that step ran."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("wheel", "cuda_binaries", "ok"):
                out[f.name] = value
            elif f.name in ("targets", "differences"):
                out[f.name] = list(value)
            elif isinstance(value, Serves):  # its words, and its floors for a farm to read
                out[f.name], out["serves_floor"] = str(value), value.as_json()
            elif isinstance(value, tuple):
                out[f.name] = list(value)
            elif value is not None:
                out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: object) -> WheelFacts:
        """From :meth:`as_json`'s value; :class:`ValueError` naming what is not."""
        if not isinstance(data, dict) or not isinstance(data.get("wheel"), str):
            raise ValueError(f"not a wheel's facts (no wheel name): {str(data)[:120]!r}")

        def texts(key: str) -> tuple[str, ...] | None:
            value = data.get(key)
            if value is None:
                return None
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key} = {value!r} is not a list of texts")
            return tuple(value)

        def text(key: str) -> str | None:
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{key} = {value!r} is not a text")
            return value

        known: dict[str, Any] = {
            "wheel": data["wheel"],
            "cuda_binaries": int(data.get("cuda_binaries") or 0),
            "targets": texts("targets") or (),
            "ok": bool(data.get("ok")),
            "differences": texts("differences") or (),
            "serves": Serves.from_json(data.get("serves_floor")),
            "grafted": texts("grafted"),
            "not_grafted": texts("not_grafted"),
            "variant_notes": texts("variant_notes"),
        }
        for f in fields(cls):
            if f.name not in known:
                known[f.name] = text(f.name)
        return cls(**known)
