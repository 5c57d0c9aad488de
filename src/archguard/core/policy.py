"""The arch policy: per-CUDA rows with written reasons, and the recorded torch clamps.

``parse_policy`` works on already-parsed data and reports every problem at once;
``load_policy`` does the I/O. The bundled policy is ``defaults/arch_policy.yml``; a farm
overrides it with ``ARCHGUARD_POLICY``, a package with ``[tool.archguard] policy``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from archguard import __version__
from archguard.core.arch import Arch, ArchEntry, parse_arch, parse_arch_list, split_list
from archguard.core.bundled import bundled_text
from archguard.core.cuda import CudaVersion
from archguard.core.plain_yaml import load_plain_yaml, read_yaml_text
from archguard.core.platform import PLATFORMS, Platform
from archguard.core.problems import Problems, closest
from archguard.core.toolkit import known_arches
from archguard.errors import InvalidArch, PolicyError

SCHEMA = 1
TOP_KEYS = ("schema", "rows", "arch_exceptions", "derivation")
ROW_KEYS = ("arch_list", "reason", "platforms")
PLATFORM_ROW_KEYS = ("arch_list", "reason")
EXCEPTION_KEYS = ("torch", "drop", "reason")
DERIVATION_KEYS = ("drop", "gap_nets")
DROP_KEYS = ("arch", "reason")
GAP_NET_KEYS = ("gap", "arch", "reason")


@dataclass(frozen=True)
class PolicyRow:
    tag: str
    entries: tuple[ArchEntry, ...]
    reason: str
    # a platform's own list under this row (rows.cu130.platforms.aarch64): the derivation
    # rule applied to that platform's torch facts, with its own reason
    platforms: Mapping[Platform, PolicyRow] = field(default_factory=dict)
    platform: Platform | None = None  # set on a platform's own list

    @property
    def name(self) -> str:
        """``policy row cu130``, or ``policy row cu130 (aarch64)`` for a platform's list."""
        return f"policy row {self.tag}" + (f" ({self.platform})" if self.platform else "")

    def for_platform(self, platform: Platform) -> PolicyRow:
        """The list a build for ``platform`` asks for: the platform's own, else this row's."""
        return self.platforms.get(platform, self)


@dataclass(frozen=True)
class ArchException:
    tag: str
    torch: SpecifierSet
    drop: tuple[Arch, ...]
    reason: str

    def applies_to(self, version: Version) -> bool:
        return self.torch.contains(version, prereleases=True)


@dataclass(frozen=True)
class DecidedDrop:
    """An arch the owner decided has no population for this farm (CW-ADR-0012: 5.0)."""

    arch: Arch
    reason: str


@dataclass(frozen=True)
class GapNet:
    """Where the PTX net for a major with no cubin (a "major gap") sits, where the owner
    decided it (CW-ADR-0012 puts the net for the 11.x gap on 9.0, not 10.0)."""

    gap: int
    arch: Arch
    reason: str


@dataclass(frozen=True)
class Derivation:
    """What the ADR's derivation rule needs beyond the facts: the owner's decisions."""

    drops: tuple[DecidedDrop, ...] = ()
    gap_nets: tuple[GapNet, ...] = ()

    def gap_net(self, major: int) -> GapNet | None:
        return next((g for g in self.gap_nets if g.gap == major), None)


@dataclass(frozen=True)
class Policy:
    rows: Mapping[str, PolicyRow]
    exceptions: Mapping[str, tuple[ArchException, ...]]
    source: str
    digest: str = ""  # sha256 of the file's text, recorded with every resolution
    derivation: Derivation = Derivation()

    def exceptions_for(self, tag: str) -> tuple[ArchException, ...]:
        return self.exceptions.get(tag, ())

    def row(self, tag: str, platform: Platform) -> PolicyRow | None:
        """Row ``tag`` as a build for ``platform`` reads it (None: the policy has no row)."""
        row = self.rows.get(tag)
        return None if row is None else row.for_platform(platform)


def _hint(key: str, allowed: Collection[str]) -> str:
    close = closest(key, allowed)
    return f" (did you mean {close!r}?)" if close else ""


class _Problems(Problems):
    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def check_keys(
        self,
        where: str,
        mapping: Mapping[str, object],
        allowed: tuple[str, ...],
        required: tuple[str, ...],
    ) -> None:
        for key in mapping:
            if key not in allowed:
                self.add(
                    f"unknown key {key!r}{_hint(str(key), allowed)}; allowed keys: "
                    f"{', '.join(allowed)}",
                    where,
                )
        for key in required:
            if key not in mapping:
                self.add(f"missing required key {key!r}", where)

    def raise_policy_error(self) -> None:
        self.raise_if_any(
            lambda count, lines: PolicyError(
                f"policy file {self.source} is invalid ({count} problem"
                f"{'s' if count > 1 else ''}); fix each and check it with "
                f"`python -m archguard check-policy {self.source}`:\n{lines}"
            )
        )


def _reason(problems: _Problems, where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        problems.add(
            f"reason must be a non-empty string (got {value!r}); every policy "
            "decision carries its written reason",
            where,
        )
        return ""
    return " ".join(value.split())


def parse_policy(data: object, source: str, known: Collection[Arch]) -> Policy:
    """Validate parsed policy data; raise one PolicyError listing every problem.

    ``known`` is the set of arches that exist (:func:`archguard.core.toolkit.known_arches`).
    """
    problems = _Problems(source)
    if not isinstance(data, dict):
        problems.add(
            f"must be a mapping with keys {', '.join(TOP_KEYS)}, not {type(data).__name__}",
            "top level",
        )
        problems.raise_policy_error()
    assert isinstance(data, dict)
    problems.check_keys("top level", data, TOP_KEYS, ("schema", "rows"))
    if "schema" in data and data["schema"] != SCHEMA:
        problems.add(
            f"{data['schema']!r} is not a schema this archguard reads; write schema: {SCHEMA}",
            "schema",
        )

    raw_rows = data.get("rows", {})
    if not isinstance(raw_rows, dict) or not raw_rows:
        problems.add("must be a non-empty mapping of cuXYZ rows (e.g. cu128:)", "rows")
        raw_rows = {}
    rows = _rows(raw_rows, source, known, problems)
    raw_exc = data.get("arch_exceptions", {}) or {}
    if not isinstance(raw_exc, dict):
        problems.add("must be a mapping of cuXYZ -> list of exceptions", "arch_exceptions")
        raw_exc = {}
    exceptions: dict[str, tuple[ArchException, ...]] = {}
    for tag, items in raw_exc.items():
        where = f"arch_exceptions.{tag}"
        if str(tag) not in raw_rows:
            problems.add(
                f"there is no policy row {tag!r}"
                f"{_hint(str(tag), [str(t) for t in raw_rows])}; exceptions belong to "
                "an existing row",
                where,
            )
            continue
        if not isinstance(items, list) or not items:
            problems.add("must be a non-empty list of {torch, drop, reason} entries", where)
            continue
        parsed = [
            _exception(str(tag), item, f"{where}[{i}]", known, problems)
            for i, item in enumerate(items)
        ]
        exceptions[str(tag)] = tuple(e for e in parsed if e is not None)
    derivation = _derivation(data.get("derivation"), source, known, problems)
    problems.raise_policy_error()
    return Policy(rows, exceptions, source, derivation=derivation)


def _rows(
    raw_rows: dict[Any, Any], source: str, known: Collection[Arch], problems: _Problems
) -> dict[str, PolicyRow]:
    rows: dict[str, PolicyRow] = {}
    for tag, row in raw_rows.items():
        where = f"rows.{tag}"
        if CudaVersion.from_tag(str(tag)) is None:
            problems.add(
                f"{tag!r} is not a CUDA row name; write cuXYZ, e.g. cu128 for CUDA 12.8", where
            )
            continue
        if not isinstance(row, dict):
            problems.add("must be a mapping with arch_list and reason", where)
            continue
        problems.check_keys(where, row, ROW_KEYS, PLATFORM_ROW_KEYS)
        parsed = _row_list(str(tag), row, where, known, problems)
        if parsed is None:
            continue
        platforms = _platform_rows(str(tag), row.get("platforms"), where, known, problems)
        rows[str(tag)] = replace(parsed, platforms=platforms)
    return rows


def _row_list(  # noqa: PLR0913 - a row's data, where it is, and what checks it
    tag: str,
    row: Mapping[str, Any],
    where: str,
    known: Collection[Arch],
    problems: _Problems,
    *,
    platform: Platform | None = None,
) -> PolicyRow | None:
    """A row's (or a platform's) ``arch_list`` and ``reason``; None where the list is bad."""
    reason = _reason(problems, f"{where}.reason", row.get("reason"))
    try:
        entries = parse_arch_list(
            row.get("arch_list", ""), f"{problems.source} {where}.arch_list", known=known
        )
    except InvalidArch as exc:
        problems.add(str(exc), f"{where}.arch_list")
        return None
    return PolicyRow(tag, entries, reason, platform=platform)


def _platform_rows(
    tag: str, raw: object, where: str, known: Collection[Arch], problems: _Problems
) -> dict[Platform, PolicyRow]:
    """``rows.cuXYZ.platforms``: a platform's own list and reason, keyed by the platform."""
    if raw is None:
        return {}
    where = f"{where}.platforms"
    if not isinstance(raw, dict) or not raw:
        problems.add("must be a mapping of platform -> {arch_list, reason} (e.g. aarch64:)", where)
        return {}
    out: dict[Platform, PolicyRow] = {}
    for name, item in raw.items():
        pwhere = f"{where}.{name}"
        if name not in PLATFORMS:
            problems.add(
                f"{name!r} is not a platform{_hint(str(name), PLATFORMS)}; write one of "
                f"{', '.join(PLATFORMS)}",
                pwhere,
            )
            continue
        if not isinstance(item, dict):
            problems.add("must be a mapping with arch_list and reason", pwhere)
            continue
        problems.check_keys(pwhere, item, PLATFORM_ROW_KEYS, PLATFORM_ROW_KEYS)
        parsed = _row_list(tag, item, pwhere, known, problems, platform=name)
        if parsed is not None:
            out[name] = parsed
    return out


def _exception(
    tag: str, item: object, iwhere: str, known: Collection[Arch], problems: _Problems
) -> ArchException | None:
    """One ``arch_exceptions`` entry, or None (its problems added)."""
    source = problems.source
    if not isinstance(item, dict):
        problems.add("must be a mapping with keys torch, drop, reason", iwhere)
        return None
    problems.check_keys(iwhere, item, EXCEPTION_KEYS, EXCEPTION_KEYS)
    reason = _reason(problems, f"{iwhere}.reason", item.get("reason"))
    spec_text = item.get("torch")
    try:
        if not isinstance(spec_text, str) or not spec_text.strip():
            raise InvalidSpecifier(repr(spec_text))
        spec = SpecifierSet(spec_text)
    except InvalidSpecifier:
        problems.add(
            f"{spec_text!r} is not a version specifier; write e.g. '==2.7.*' or '>=2.11'",
            f"{iwhere}.torch",
        )
        return None
    try:
        drop = tuple(
            parse_arch(p, f"{source} {iwhere}.drop", known=known)
            for p in split_list(item.get("drop", ""), f"{source} {iwhere}.drop")
        )
    except InvalidArch as exc:
        problems.add(str(exc), f"{iwhere}.drop")
        return None
    return ArchException(tag, spec, drop, reason)


def _derivation(
    raw: object, source: str, known: Collection[Arch], problems: _Problems
) -> Derivation:
    """The ``derivation:`` section: decided drops and gap nets, each with its reason."""
    if raw is None:
        return Derivation()
    if not isinstance(raw, dict):
        problems.add("must be a mapping with keys drop, gap_nets", "derivation")
        return Derivation()
    problems.check_keys("derivation", raw, DERIVATION_KEYS, ())
    drops: list[DecidedDrop] = []
    nets: list[GapNet] = []
    for key, keys in (("drop", DROP_KEYS), ("gap_nets", GAP_NET_KEYS)):
        items = raw.get(key, [])
        if not isinstance(items, list):
            problems.add(f"must be a list of {{{', '.join(keys)}}} entries", f"derivation.{key}")
            continue
        for i, item in enumerate(items):
            where = f"derivation.{key}[{i}]"
            if not isinstance(item, dict):
                problems.add(f"must be a mapping with keys {', '.join(keys)}", where)
                continue
            problems.check_keys(where, item, keys, keys)
            reason = _reason(problems, f"{where}.reason", item.get("reason"))
            try:
                arch = parse_arch(str(item.get("arch", "")), f"{source} {where}.arch", known=known)
            except InvalidArch as exc:
                problems.add(str(exc), f"{where}.arch")
                continue
            if key == "drop":
                drops.append(DecidedDrop(arch, reason))
                continue
            gap = item.get("gap")
            if not isinstance(gap, int) or isinstance(gap, bool) or not arch.major < gap:
                problems.add(
                    f"gap must be the major with no cubin, above the net's arch ({arch}), as "
                    f"a whole number (e.g. gap: 11), not {gap!r}",
                    f"{where}.gap",
                )
                continue
            nets.append(GapNet(gap, arch, reason))
    return Derivation(tuple(drops), tuple(nets))


def read_policy_text(path: Path, source: str) -> str:
    return read_yaml_text(path, source, PolicyError, "policy file")


def load_policy(
    path: str | os.PathLike[str] | None = None,
    origin: str = "",
    known: Collection[Arch] | None = None,
) -> Policy:
    """Load and validate a policy file; ``None`` loads the bundled one.

    ``origin`` says who chose the file (e.g. ``ARCHGUARD_POLICY``), for messages and logs.
    ``known``: the arches that exist; by default those of the bundled toolkit table.
    """
    if known is None:
        known = known_arches()
    if path is None:
        source = f"bundled arch_policy.yml (torch-archguard {__version__})"
        text = bundled_text("arch_policy.yml")
    else:
        p = Path(path)
        source = f"{p} (from {origin})" if origin else str(p)
        text = read_policy_text(p, source)
    data = load_plain_yaml(text, source, PolicyError)
    policy = parse_policy(data, source, known)
    return replace(policy, digest=hashlib.sha256(text.encode("utf-8")).hexdigest())
