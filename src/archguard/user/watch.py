"""``python -m archguard watch``: torch releases on the package index that the torch table
(bundled, or the farm's ``--torch-builds``) lacks, before a farm plans cells without them.

The index is asked through pip's own machinery (``pip index versions torch --json``), so the
user's index configuration (``--index-url``, ``--find-links``, ``pip.conf``) holds; with
``--probe`` each missing release is downloaded (``pip download --no-deps``) and read with
cuobjdump (:mod:`archguard.detect.torchlibs`) into a proposed table the owner reviews. Every
pip call goes through :func:`archguard.detect.tools.run` with a timeout
(``INDEX_TIMEOUT_S``, a download ``DOWNLOAD_TIMEOUT_S``): offline is one clear error, never a
hang.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from archguard.core.torchbuild import BundledBuild, release_minor
from archguard.detect.tools import DOWNLOAD_TIMEOUT_S, INDEX_TIMEOUT_S, ToolFailed, run
from archguard.errors import ConfigError, IndexUnreachable, PipTooOld

if TYPE_CHECKING:
    import subprocess

WATCH_SCHEMA = "archguard.watch/1"
PIP_TIMEOUT = INDEX_TIMEOUT_S  # seconds for one pip call (a download: DOWNLOAD_TIMEOUT_S)


def _pip(args: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return run([sys.executable, "-m", "pip", *args], None, timeout)
    except ToolFailed as failed:
        if not failed.timed_out:
            raise IndexUnreachable(
                f"`pip {' '.join(args)}` could not start ({failed.cause}). Check that pip is "
                f"installed for {sys.executable}."
            ) from None
        raise IndexUnreachable(
            f"`pip {' '.join(args)}` did not answer within {timeout:g} s (offline, or the index "
            "does not respond). Check the network or point pip at a reachable index "
            "(archguard watch -- --index-url URL, or --find-links DIR)."
        ) from None


def _pip_version() -> str:

    try:
        return f"pip {metadata.version('pip')}"
    except metadata.PackageNotFoundError:
        return "pip of unknown version"


def available(pip_args: Sequence[str] = (), timeout: float = PIP_TIMEOUT) -> list[Version]:
    """Every final torch release the index offers for this interpreter, newest first."""
    proc = _pip(
        ["index", "versions", "torch", "--json", "--retries", "1", "--timeout", "15", *pip_args],
        timeout,
    )
    if proc.returncode != 0 and "no such option: --json" in proc.stderr:
        raise PipTooOld(
            f"archguard watch lists torch's releases with `pip index versions --json`, and the "
            f"pip of {sys.executable} ({_pip_version()}) has no --json there (pip 25.1 added "
            f'it). Upgrade it: {sys.executable} -m pip install -U "pip>=25.1".'
        )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise IndexUnreachable(
            f"pip could not list the torch releases on the package index ({last}). Check the "
            "network or the index configuration (archguard watch -- --index-url URL, or "
            "--find-links DIR)."
        )
    try:
        data = json.loads(proc.stdout)
        versions = [Version(v) for v in data["versions"]]
    except (ValueError, KeyError, TypeError, InvalidVersion) as exc:
        raise IndexUnreachable(
            f"pip's answer about torch's releases is not what archguard reads ({exc})"
        ) from None
    return sorted((v for v in versions if not v.is_prerelease), reverse=True)


@dataclass
class Watched:
    """What the index offers and the table lacks."""

    table: str
    versions: list[Version]
    missing: list[Version]
    since: Version
    proposed: list[str] = field(default_factory=list)  # torch_builds.yml rows (YAML text)
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "schema": WATCH_SCHEMA,
            "table": self.table,
            "since": str(self.since),
            "available": [str(v) for v in self.versions],
            "missing": [str(v) for v in self.missing],
            "proposed_rows": self.proposed,
            "problems": self.problems,
        }


def missing_releases(
    versions: Sequence[Version], builds: Sequence[BundledBuild], since: Version | None = None
) -> tuple[list[Version], Version]:
    """The releases at or above ``since`` (default: the table's oldest) whose minor release
    the table has no row for."""
    known = {b.torch for b in builds}
    floor = since or min((Version(b.torch) for b in builds), default=Version("0"))
    out = [v for v in versions if v >= floor and release_minor(v) not in known]
    return out, floor


def download(version: Version, dest: Path, pip_args: Sequence[str] = ()) -> Path:
    """One torch wheel for this interpreter, no dependencies."""
    dest.mkdir(parents=True, exist_ok=True)
    proc = _pip(
        ["download", "--no-deps", f"torch=={version}", "-d", str(dest), *pip_args],
        DOWNLOAD_TIMEOUT_S,
    )
    found = sorted(dest.glob(f"torch-{version}-*.whl"))
    if proc.returncode != 0 or not found:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"pip could not download torch {version}: {last}")
    return found[0]


def render_text(watched: Watched) -> str:
    lines = [
        f"torch releases on the package index since {watched.since}: "
        + (", ".join(str(v) for v in sorted(watched.versions)) or "none")
        + f" (checked against {watched.table})"
    ]
    if watched.missing:
        lines.append(
            "missing from the table: "
            + ", ".join(str(v) for v in sorted(watched.missing))
            + ("" if watched.proposed else " (read them with `archguard watch --probe`)")
        )
    else:
        lines.append("missing from the table: none")
    if watched.proposed:
        lines += ["", "proposed rows (review, then add to the table):", *watched.proposed]
    lines += [f"problem: {p}" for p in watched.problems]
    return "\n".join(lines) + "\n"
