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
import shlex
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from archguard.core.arch import Arch, format_list
from archguard.core.cuda import CudaVersion
from archguard.core.platform import (
    DEFAULT_PLATFORM,
    Platform,
    host_platform,
    platform_of_tag,
    wheel_tag,
)
from archguard.core.policy import load_policy
from archguard.core.resolve import resolve
from archguard.core.toolkit import Toolkit
from archguard.core.torchbuild import BundledBuild, bundled_builds, release_minor
from archguard.detect.ptxas import probe_ptxas
from archguard.detect.tools import DOWNLOAD_TIMEOUT_S, INDEX_TIMEOUT_S, ToolFailed, run
from archguard.errors import (
    ArchguardError,
    ConfigError,
    IndexUnreachable,
    PipTooOld,
    ToolError,
)

if TYPE_CHECKING:
    import subprocess

WATCH_SCHEMA = "archguard.watch/1"
NVCC_PROJECT = "nvidia-cuda-nvcc"  # NVIDIA's CUDA compiler wheels (13.x: a full nvcc)
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


def available(
    pip_args: Sequence[str] = (), timeout: float = PIP_TIMEOUT, project: str = "torch"
) -> list[Version]:
    """Every final release of ``project`` (torch, or NVIDIA's nvcc wheel) the index offers
    for this interpreter, newest first."""
    proc = _pip(
        ["index", "versions", project, "--json", "--retries", "1", "--timeout", "15", *pip_args],
        timeout,
    )
    if proc.returncode != 0 and "no such option: --json" in proc.stderr:
        raise PipTooOld(
            f"archguard watch lists {project}'s releases with `pip index versions --json`, and the "
            f"pip of {sys.executable} ({_pip_version()}) has no --json there (pip 25.1 added "
            f'it). Upgrade it: {sys.executable} -m pip install -U "pip>=25.1".'
        )
    if proc.returncode != 0 and project != "torch" and "No matching distribution" in proc.stderr:
        return []  # an index (or a --find-links directory) with no CUDA compiler wheels
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise IndexUnreachable(
            f"pip could not list the {project} releases on the package index ({last}). Check the "
            "network or the index configuration (archguard watch -- --index-url URL, or "
            "--find-links DIR)."
        )
    try:
        data = json.loads(proc.stdout)
        versions = [Version(v) for v in data["versions"]]
    except (ValueError, KeyError, TypeError, InvalidVersion) as exc:
        raise IndexUnreachable(
            f"pip's answer about {project}'s releases is not what archguard reads ({exc})"
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
    toolkit_table: str = "the bundled toolkits.yml"
    toolkits: list[Version] = field(default_factory=list)  # nvidia-cuda-nvcc releases
    missing_toolkits: list[Version] = field(default_factory=list)  # newest of each new minor
    proposed_toolkits: list[str] = field(default_factory=list)  # toolkits.yml rows, and why
    platform: Platform = DEFAULT_PLATFORM  # whose torch builds were asked about

    @property
    def missing_anything(self) -> bool:
        return bool(self.missing or self.missing_toolkits)

    def as_json(self) -> dict[str, object]:
        return {
            "schema": WATCH_SCHEMA,
            "platform": self.platform,
            "table": self.table,
            "since": str(self.since),
            "available": [str(v) for v in self.versions],
            "missing": [str(v) for v in self.missing],
            "proposed_rows": self.proposed,
            "problems": self.problems,
            "toolkits": {
                "project": NVCC_PROJECT,
                "table": self.toolkit_table,
                "available": [str(v) for v in self.toolkits],
                "missing": [str(v) for v in self.missing_toolkits],
                "proposed_rows": self.proposed_toolkits,
            },
        }


def platform_pip_args(platform: Platform) -> list[str]:
    """pip's options that ask the index about another machine's wheels (none for this one's):
    torch's own platform tag, binary wheels only (pip's rule for --platform)."""
    if platform == host_platform():
        return []
    return ["--platform", wheel_tag(platform), "--only-binary", ":all:"]


def missing_releases(
    versions: Sequence[Version],
    builds: Sequence[BundledBuild],
    since: Version | None = None,
    platform: Platform = DEFAULT_PLATFORM,
) -> tuple[list[Version], Version]:
    """The releases at or above ``since`` (default: the table's oldest for ``platform``)
    whose minor release the table has no ``platform`` row for."""
    mine = [b for b in builds if b.platform == platform]
    known = {b.torch for b in mine}
    floor = since or min((Version(b.torch) for b in mine), default=Version("0"))
    out = [v for v in versions if v >= floor and release_minor(v) not in known]
    return out, floor


def missing_minors(versions: Sequence[Version], known: Iterable[CudaVersion]) -> list[Version]:
    """The newest release of each CUDA minor the toolkit table lacks (nvidia-cuda-nvcc
    13.5.37 for a table without 13.5), at or above the table's oldest, newest first."""
    table = set(known)
    floor = min(table, default=CudaVersion(0, 0))
    newest: dict[CudaVersion, Version] = {}
    for v in versions:
        cuda = CudaVersion(v.major, v.minor)
        if cuda not in table and cuda >= floor and v > newest.get(cuda, Version("0")):
            newest[cuda] = v
    return sorted(newest.values(), reverse=True)


def download(
    version: Version,
    dest: Path,
    pip_args: Sequence[str] = (),
    project: str = "torch",
    platform: Platform | None = None,
) -> Path:
    """One wheel of ``project`` (torch, or NVIDIA's nvcc) for this interpreter (for
    ``platform``'s machine where given: a shared directory may hold both), no dependencies."""
    dest.mkdir(parents=True, exist_ok=True)
    proc = _pip(
        ["download", "--no-deps", f"{project}=={version}", "-d", str(dest), *pip_args],
        DOWNLOAD_TIMEOUT_S,
    )
    found = sorted(
        p
        for p in dest.glob(f"{project.replace('-', '_')}-{version}-*.whl")
        if platform is None or _tags_name(p.name, platform)
    )
    if proc.returncode != 0 or not found:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ToolError(f"pip could not download {project} {version}: {last}")
    return found[0]


def _tags_name(name: str, platform: Platform) -> bool:
    """Whether a wheel's file name's platform tags name ``platform``'s machine."""
    try:
        tags = parse_wheel_filename(name)[3]
    except InvalidWheelFilename:
        return False
    return any(platform_of_tag(t.platform) == platform for t in tags)


def wheel_row(wheel: Path, requirement: str, emulator: Sequence[str] = ()) -> dict[str, object]:
    """A toolkits.yml row from a CUDA compiler wheel: its ptxas's accepted targets
    (``detect.ptxas``) and, where the wheel carries a full nvcc, its lists. The one probe of
    the bundled table (``scripts/probe_toolkits.py``) and of ``watch --probe``.
    ``emulator``: the command that runs another machine's binaries (``qemu-aarch64-static -L
    /usr/aarch64-linux-gnu`` for the aarch64 wheel on x86_64), so that one probe reads both
    platforms' toolkits."""
    with tempfile.TemporaryDirectory(prefix="archguard-watch-") as tmp:
        tools = unpack_tools(wheel, Path(tmp))
        if emulator:
            tools = {name: emulated(path, emulator) for name, path in tools.items()}
        if "ptxas" not in tools:
            raise ConfigError(f"{wheel.name} holds no bin/ptxas: not a CUDA compiler wheel")
        found = probe_ptxas(str(tools["ptxas"]))
        row: dict[str, object] = {
            "source": f"ptxas from the {requirement} wheel ({found.version_line})",
            "ptx_isa": found.isa,
            "cubins": list(found.cubins),
            "ptx": list(found.ptx),
        }
        if found.rejected:
            row["listed_but_rejected"] = list(found.rejected)
        if "nvcc" in tools:
            for key, flag in (
                ("nvcc_list_gpu_code", "--list-gpu-code"),
                ("nvcc_list_gpu_arch", "--list-gpu-arch"),
            ):
                row[key] = run([str(tools["nvcc"]), flag], None).stdout.split()
    return row


def emulated(tool: Path, emulator: Sequence[str]) -> Path:
    """A program that runs ``tool`` through ``emulator`` (its arguments passed as they are)."""
    shim = tool.with_name(tool.name + "-emulated")
    shim.write_text(f'#!/bin/sh\nexec {shlex.join([*emulator, str(tool)])} "$@"\n')
    shim.chmod(0o755)
    return shim


def row_lines(cuda: str, row: dict[str, object]) -> list[str]:
    """One toolkits.yml row as the table writes it."""
    lines = [f'  "{cuda}":']
    for key, value in row.items():
        if isinstance(value, list):
            lines.append(f"    {key}: [{', '.join(str(v) for v in value)}]")
        else:
            lines.append(f'    {key}: "{value}"')
    return lines


def probe_toolkit_wheel(wheel: Path, version: Version) -> str:
    """A toolkits.yml row for the nvcc wheel's release, with the policy rows a build with it
    takes, as the row rule resolves them."""
    row = wheel_row(wheel, f"{NVCC_PROJECT}=={version}")
    cuda = CudaVersion(version.major, version.minor)
    toolkit = Toolkit(
        cuda,
        frozenset(Arch.from_target(str(t)) for t in row["cubins"]),  # type: ignore[attr-defined]
        frozenset(Arch.from_target(str(t)) for t in row["ptx"]),  # type: ignore[attr-defined]
        f"{NVCC_PROJECT}=={version}",
    )
    lines = row_lines(cuda.text, row) + [f"    # {line}" for line in rows_taken(toolkit)]
    return "\n".join(lines) + "\n"


def rows_taken(toolkit: Toolkit) -> list[str]:
    """No policy row is derived for a toolkit minor: a build with it takes its torch build's
    row (the row rule). What each such row resolves to with this toolkit, for the review."""
    policy = load_policy()
    out = [
        f"policy: no {toolkit.tag} row is needed: a build with nvcc {toolkit.text} takes its "
        "torch build's row (the row rule, docs/policy.md); with this toolkit:"
    ]
    newest: dict[tuple[CudaVersion, Platform], BundledBuild] = {}
    for b in bundled_builds():
        key = (b.cuda, b.platform)
        same_major = b.cuda.major == toolkit.version.major and b.tag in policy.rows
        if same_major and (key not in newest or Version(b.torch) > Version(newest[key].torch)):
            newest[key] = b
    for (cuda, platform), b in sorted(newest.items()):
        row = policy.row(cuda.tag, platform)
        assert row is not None  # same_major: the policy has the row
        name = cuda.tag if platform == DEFAULT_PLATFORM else f"{cuda.tag} on {platform}"
        try:
            res = resolve(policy, toolkit, b.build)
            said = res.effective_text
            same = "unchanged" if said == format_list(row.entries) else "CHANGED"
            out.append(f"  row {name} (torch {b.torch}): {said} ({same})")
        except ArchguardError as exc:
            out.append(f"  row {name} (torch {b.torch}): {exc.code}: {exc}")
    return out


def unpack_tools(wheel: Path, dest: Path) -> dict[str, Path]:
    """``ptxas`` and ``nvcc`` out of a CUDA compiler wheel (``*/bin/``), executable."""
    tools: dict[str, Path] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            base = info.filename.rsplit("/", 1)[-1]
            if "/bin/" in info.filename and base in ("ptxas", "nvcc"):
                target = dest / base
                target.write_bytes(zf.read(info))
                target.chmod(0o755)
                tools[base] = target
    return tools


def render_text(watched: Watched) -> str:
    on = "" if watched.platform == DEFAULT_PLATFORM else f" ({watched.platform} wheels)"
    lines = [
        f"torch releases{on} on the package index since {watched.since}: "
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
    lines.append(
        f"{NVCC_PROJECT} releases on the package index: "
        + (", ".join(str(v) for v in sorted(watched.toolkits)) or "none")
        + f" (checked against {watched.toolkit_table})"
    )
    lines.append(
        "toolkit minors missing from the table: "
        + (
            ", ".join(f"{v.major}.{v.minor} ({v})" for v in sorted(watched.missing_toolkits))
            or "none"
        )
        + (
            " (probe them with `archguard watch --probe`)"
            if watched.missing_toolkits and not watched.proposed_toolkits
            else ""
        )
    )
    if watched.proposed_toolkits:
        lines += ["", "proposed toolkits.yml rows (review, then add them):"]
        lines += watched.proposed_toolkits
    lines += [f"problem: {p}" for p in watched.problems]
    return "\n".join(lines) + "\n"
