"""Has a package opted in to archguard? One answer for the setuptools hook and the config
reader, in the standard library only (the hook runs in every setuptools build).

A package opts in with a ``[tool.archguard]`` table in its ``pyproject.toml`` or by listing
``torch-archguard`` in ``build-system.requires``. Requirement names are read with the PEP 508
name grammar and compared after PEP 503 normalisation, so ``Torch_ArchGuard[x]>=0.1`` counts
and the bare ``archguard`` (an unrelated project on the public index) does not.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The environment switches, and the words that turn one on or off: one owner, read by the
# setuptools hook (standard library only) and by settings.config (strictly, with errors).
ENV_DISABLE = "ARCHGUARD_DISABLE"
ENV_ENABLE = "ARCHGUARD_ENABLE"
ON_WORDS = frozenset({"1", "true", "yes", "on"})
OFF_WORDS = frozenset({"", "0", "false", "no", "off"})


def switch_word(environ: Mapping[str, str], name: str) -> str:
    """A switch's value as compared with :data:`ON_WORDS` / :data:`OFF_WORDS`."""
    return environ.get(name, "").strip().lower()


DISTRIBUTION = "torch-archguard"
UNRELATED_NAME = "archguard"  # an unrelated project on the public index (SPEC §1)
_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def canonical_name(name: str) -> str:
    """PEP 503 normalisation: ``Torch_ArchGuard`` -> ``torch-archguard``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: object) -> str | None:
    """The normalised project name a requirement string starts with, or None."""
    match = _NAME.match(requirement) if isinstance(requirement, str) else None
    return canonical_name(match.group(1)) if match else None


@dataclass(frozen=True)
class OptIn:
    """What a parsed ``pyproject.toml`` says about archguard."""

    has_table: bool  # [tool.archguard] is present
    lists_archguard: bool  # torch-archguard in build-system.requires
    lists_unrelated: bool  # bare 'archguard' (the unrelated project) in build-system.requires

    @property
    def active(self) -> bool:
        return self.has_table or self.lists_archguard


def opt_in(data: Mapping[str, Any]) -> OptIn:
    tool = data.get("tool")
    build = data.get("build-system")
    requires = build.get("requires") if isinstance(build, dict) else None
    names = {requirement_name(r) for r in requires} if isinstance(requires, list) else set()
    return OptIn(
        has_table=isinstance(tool, dict) and "archguard" in tool,
        lists_archguard=DISTRIBUTION in names,
        lists_unrelated=UNRELATED_NAME in names,
    )


def opted_in(pyproject: str) -> bool:
    """True when the file at ``pyproject`` opts in. Never raises: a missing or malformed
    file is the package's business (setuptools reports it) and means "not opted in"."""
    try:
        with open(pyproject, "rb") as f:
            raw = f.read()
    except OSError:
        return False
    if b"archguard" not in raw.lower():  # fast path: most packages never mention it
        return False
    try:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib
        data = tomllib.loads(raw.decode("utf-8"))
    except Exception:
        return False
    return opt_in(data).active
