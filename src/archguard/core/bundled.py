"""Access to the bundled data files in ``archguard.defaults`` (shipped inside the wheel)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from archguard.core.plain_yaml import load_plain_yaml
from archguard.errors import PolicyError


def bundled_path(name: str) -> str:
    """A human-readable location of a bundled file, for messages and records."""
    return str(resources.files("archguard.defaults").joinpath(name))


def bundled_text(name: str) -> str:
    return resources.files("archguard.defaults").joinpath(name).read_text(encoding="utf-8")


@cache
def bundled_yaml(name: str) -> object:
    """Parse a bundled YAML file. A broken bundled file is a packaging bug, said as such."""
    return load_plain_yaml(
        bundled_text(name),
        f"bundled {name} ({bundled_path(name)})",
        lambda msg: PolicyError(f"{msg} (this file ships with archguard: reinstall it)"),
    )
