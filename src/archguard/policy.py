"""The arch policy: per-CUDA rows with written reasons, and the recorded torch clamps.

``parse_policy`` works on already-parsed data and reports every problem at once;
``load_policy`` does the I/O. The bundled policy is ``defaults/arch_policy.yml``; a farm
overrides it with ``ARCHGUARD_POLICY``, a package with ``[tool.archguard] policy``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from archguard._problems import Problems, closest
from archguard._yaml import load_plain_yaml
from archguard.arch import Arch, ArchEntry, parse_arch, parse_arch_list, split_list
from archguard.cuda import CudaVersion
from archguard.errors import InvalidArch, PolicyError
from archguard.toolkit import known_arches

SCHEMA = 1
TOP_KEYS = ("schema", "rows", "arch_exceptions")
ROW_KEYS = ("arch_list", "reason")
EXCEPTION_KEYS = ("torch", "drop", "reason")


@dataclass(frozen=True)
class PolicyRow:
    tag: str
    entries: tuple[ArchEntry, ...]
    reason: str


@dataclass(frozen=True)
class ArchException:
    tag: str
    torch: SpecifierSet
    drop: tuple[Arch, ...]
    reason: str

    def applies_to(self, version: Version) -> bool:
        return self.torch.contains(version, prereleases=True)


@dataclass(frozen=True)
class Policy:
    rows: Mapping[str, PolicyRow]
    exceptions: Mapping[str, tuple[ArchException, ...]]
    source: str
    digest: str = ""  # sha256 of the file's text, recorded with every resolution

    def exceptions_for(self, tag: str) -> tuple[ArchException, ...]:
        return self.exceptions.get(tag, ())


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

    ``known`` is the set of arches that exist (:func:`archguard.toolkit.known_arches`).
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

    rows: dict[str, PolicyRow] = {}
    raw_rows = data.get("rows", {})
    if not isinstance(raw_rows, dict) or not raw_rows:
        problems.add("must be a non-empty mapping of cuXYZ rows (e.g. cu128:)", "rows")
        raw_rows = {}
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
        problems.check_keys(where, row, ROW_KEYS, ROW_KEYS)
        reason = _reason(problems, f"{where}.reason", row.get("reason"))
        try:
            entries = parse_arch_list(
                row.get("arch_list", ""), f"{source} {where}.arch_list", known=known
            )
        except InvalidArch as exc:
            problems.add(str(exc), f"{where}.arch_list")
            continue
        rows[str(tag)] = PolicyRow(str(tag), entries, reason)

    exceptions: dict[str, tuple[ArchException, ...]] = {}
    raw_exc = data.get("arch_exceptions", {}) or {}
    if not isinstance(raw_exc, dict):
        problems.add("must be a mapping of cuXYZ -> list of exceptions", "arch_exceptions")
        raw_exc = {}
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
        parsed: list[ArchException] = []
        for i, item in enumerate(items):
            iwhere = f"{where}[{i}]"
            if not isinstance(item, dict):
                problems.add("must be a mapping with keys torch, drop, reason", iwhere)
                continue
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
                continue
            try:
                drop = tuple(
                    parse_arch(p, f"{source} {iwhere}.drop", known=known)
                    for p in split_list(item.get("drop", ""), f"{source} {iwhere}.drop")
                )
            except InvalidArch as exc:
                problems.add(str(exc), f"{iwhere}.drop")
                continue
            parsed.append(ArchException(str(tag), spec, drop, reason))
        exceptions[str(tag)] = tuple(parsed)
    problems.raise_policy_error()
    return Policy(rows, exceptions, source)


def read_policy_text(path: Path, source: str) -> str:
    try:
        if path.stat().st_size > (1 << 20):
            raise PolicyError(f"policy file {source} is larger than 1 MiB; a policy is ~5 KB")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyError(f"policy file {source} does not exist; fix the path") from None
    except IsADirectoryError:
        raise PolicyError(f"policy file {source} is a directory; point at the .yml file") from None
    except UnicodeDecodeError:
        raise PolicyError(f"policy file {source} is not UTF-8 text") from None
    except OSError as exc:
        raise PolicyError(f"policy file {source} cannot be read: {exc.strerror}") from None
    except ValueError:  # e.g. an embedded NUL byte
        raise PolicyError(f"policy file {source!r} is not a usable path") from None


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
        from archguard import __version__  # noqa: PLC0415
        from archguard._data import bundled_text  # noqa: PLC0415

        source = f"bundled arch_policy.yml (torch-archguard {__version__})"
        text = bundled_text("arch_policy.yml")
    else:
        p = Path(path)
        source = f"{p} (from {origin})" if origin else str(p)
        text = read_policy_text(p, source)
    data = load_plain_yaml(text, source, PolicyError)
    policy = parse_policy(data, source, known)
    return replace(policy, digest=hashlib.sha256(text.encode("utf-8")).hexdigest())
