"""``python -m archguard watch``, the policy maintainer's: the torch releases on the package
index that the torch table (bundled, or the farm's ``--torch-builds``) lacks, and the CUDA
toolkit minors (``nvidia-cuda-nvcc``) that the toolkit table lacks, before a farm plans cells
without them.

The index is read as the farm's ``[[cells]]`` rules and ``archguard wheel name==version``
read it, through the one reader (:mod:`archguard.detect.index`): the indexes pip would read
(the ``--index-url``, ``--extra-index-url`` and ``--no-index`` given after ``--``, else its
``PIP_*`` variables and configuration, else its default), each project page (PEP 691 JSON,
else PEP 503 HTML) fetched with a timeout: offline is one clear
:class:`~archguard.errors.IndexUnreachable`, never a hang. A release counts where a page lists
a wheel of it that this interpreter could install on the machine asked about, as pip chose
when it was asked. With ``--probe`` each missing release is downloaded (``pip download
--no-deps``, the same options after ``--``, through :func:`archguard.detect.tools.run` within
``DOWNLOAD_TIMEOUT_S``) and read, a torch with cuobjdump (:mod:`archguard.detect.torchlibs`),
a toolkit with its own ptxas, into proposed rows the owner reviews.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name
from packaging.version import Version

from archguard.core.arch import Arch, format_list
from archguard.core.cuda import CudaVersion
from archguard.core.platform import (
    DEFAULT_PLATFORM,
    Platform,
    host_platform,
    platform_of_tag,
    platform_or_host,
    wheel_tag,
)
from archguard.core.policy import load_policy
from archguard.core.resolve import resolve
from archguard.core.snapshot import row_text
from archguard.core.toolkit import Toolkit
from archguard.core.torchbuild import (
    BundledBuild,
    bundled_builds,
    parse_torch_version,
    release_minor,
)
from archguard.core.wheelfile import InvalidWheelFilename, parse_wheel_name
from archguard.detect.cuobjdump import find_cuobjdump
from archguard.detect.index import IndexFile, index_urls, project_files
from archguard.detect.ptxas import probe_ptxas
from archguard.detect.tools import DOWNLOAD_TIMEOUT_S, ToolFailed, run
from archguard.detect.torchlibs import probe
from archguard.errors import ArchguardError, ConfigError, IndexUnreachable, ToolError
from archguard.settings.inputs import toolkit_table, torch_facts

if TYPE_CHECKING:
    import subprocess

WATCH_SCHEMA = "archguard.watch/1"
NVCC_PROJECT = "nvidia-cuda-nvcc"  # NVIDIA's CUDA compiler wheels (13.x: a full nvcc)
_NAME_ONE = "name the index after `--` (archguard watch -- --index-url URL)"


@dataclass(frozen=True)
class WatchOptions:
    """What ``archguard watch`` is asked: the tables (None: the bundled ones), the oldest
    release that counts, the machine whose torch wheels, whether to probe (the wheels into
    ``download_dir``, the proposed torch rows into ``output``), and pip's options (after
    ``--``: they choose the index)."""

    torch_builds: str | None = None
    toolkits: str | None = None
    since: str | None = None
    platform: str | None = None
    probe: bool = False
    download_dir: Path = Path("torch-wheels")
    output: Path | None = None
    cuobjdump: str | None = None
    pip_args: tuple[str, ...] = ()


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


def run_watch(options: WatchOptions) -> Watched:
    """The torch releases and toolkit minors the tables lack; with ``probe``, each read into
    a proposed row (the torch rows also written to ``output``). The tables are read before
    the index, so a bad table fails before any fetch."""
    builds = torch_facts(options.torch_builds)
    toolkits = toolkit_table(options.toolkits)
    indexes = watched_indexes(options.pip_args)
    watched = watch_torch(options, builds, indexes)
    if options.probe and watched.missing:
        probe_torch(watched, options)
        write_proposed(watched, options.output)
    watched.toolkit_table = options.toolkits or watched.toolkit_table
    listed = available(indexes, NVCC_PROJECT)  # this machine's compiler wheels
    watched.toolkits = listed.versions
    watched.problems += [f"{NVCC_PROJECT}'s releases: {said}" for said in listed.unread]
    watched.missing_toolkits = missing_minors(watched.toolkits, toolkits)
    if options.probe:
        probe_toolkits(watched, options)
    return watched


def watched_indexes(pip_args: Sequence[str] = ()) -> list[str]:
    """The indexes pip reads with ``pip_args`` (:func:`~archguard.detect.index.index_urls`),
    at least one: :class:`IndexUnreachable` where pip is set to ``--no-index``. pip's
    ``--find-links`` are no index: a directory of wheels has no project page to read."""
    indexes = index_urls(sys.executable, None, pip_args)
    if indexes:
        return indexes
    links = any(a.startswith(("-f", "--find-links")) for a in pip_args)
    raise IndexUnreachable(
        "pip is set to --no-index (after `--`, PIP_NO_INDEX or its configuration), so there "
        "is no index to list torch's releases from"
        + (
            "; watch reads an index's project pages, not --find-links (a directory is an "
            "index where DIR/torch/ holds an index.html of the wheels: --index-url file:///DIR)"
            if links
            else ""
        )
        + f". Drop --no-index, or {_NAME_ONE}."
    )


@dataclass(frozen=True)
class Listed:
    """One project's releases on the indexes, and the message of each index not read."""

    versions: list[Version]
    unread: list[str]


def available(
    indexes: Sequence[str], project: str = "torch", platform: Platform | None = None
) -> Listed:
    """Every final release of ``project`` (torch, or NVIDIA's nvcc wheel) that ``indexes``
    offer a wheel of for this interpreter on ``platform``'s machine (default: this one),
    newest first; an index not read is one line of ``unread`` (pip, too, reads the others)."""
    files: list[IndexFile] = []
    unread: list[str] = []
    for index in indexes:
        try:
            files += project_files(index, project)
        except IndexUnreachable as exc:
            unread.append(exc.message)
    machine = platform or host_platform() or DEFAULT_PLATFORM
    return Listed(releases_of(files, project, machine), unread)


def releases_of(files: Iterable[IndexFile], project: str, platform: Platform) -> list[Version]:
    """The final releases of ``project`` among a project page's files with a wheel this
    interpreter could install on ``platform``'s machine: one of its interpreter and ABI tags,
    a Linux tag of that machine (any glibc), its Python within the file's Requires-Python;
    newest first. An sdist is no build to read."""
    pythons = {(t.interpreter, t.abi) for t in sys_tags()}
    name = canonicalize_name(project)
    found: set[Version] = set()
    for f in files:
        try:
            wheel = parse_wheel_name(f.filename)
        except InvalidWheelFilename:
            continue
        if wheel.variant is not None:  # a PEP 825 variant's file: not a wheel to pip
            continue
        version = wheel.version
        if wheel.project != name or version.is_prerelease or not _python_fits(f.requires_python):
            continue
        if any(
            (t.interpreter, t.abi) in pythons and platform_of_tag(t.platform) == platform
            for t in wheel.tags
        ):
            found.add(version)
    return sorted(found, reverse=True)


def _python_fits(requires: str | None) -> bool:
    """Whether this Python is within a file's Requires-Python (one pip cannot read: yes)."""
    if not requires:
        return True
    here = ".".join(str(part) for part in sys.version_info[:3])
    try:
        return SpecifierSet(requires).contains(here, prereleases=True)
    except InvalidSpecifier:
        return True


def watch_torch(
    options: WatchOptions, builds: Sequence[BundledBuild], indexes: Sequence[str]
) -> Watched:
    """torch's releases on ``indexes`` for the machine asked about, and those ``builds`` has
    no row for; :class:`IndexUnreachable` where no index was read or none lists one."""
    platform = platform_or_host(options.platform)
    since = parse_torch_version(options.since, "--since") if options.since else None
    listed = available(indexes, "torch", platform)
    if not listed.versions:
        python = f"{sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]}"
        said = list(listed.unread)
        if len(said) < len(indexes):  # some were read, and list nothing for this machine
            said.append(
                f"No index pip reads ({', '.join(indexes)}) lists a torch wheel that this "
                f"Python ({python}) installs on {platform}."
            )
        raise IndexUnreachable(
            f"torch's releases could not be read: {' '.join(said)} Check the network, or "
            f"{_NAME_ONE}."
        )
    missing, floor = missing_releases(listed.versions, builds, since, platform)
    table = options.torch_builds or "the bundled torch_builds.yml"
    versions = [v for v in listed.versions if v >= floor]
    watched = Watched(table, versions, missing, floor, platform=platform)
    watched.problems += [f"torch's releases: {said}" for said in listed.unread]  # others read
    return watched


def probe_torch(watched: Watched, options: WatchOptions) -> None:
    """Each missing torch release downloaded and read with cuobjdump into a proposed row;
    one that could not be is a problem, the others still read."""
    cuobjdump = find_cuobjdump(options.cuobjdump, needed_by="archguard watch --probe")
    pip_args = [*platform_pip_args(watched.platform), *options.pip_args]
    for version in watched.missing:
        try:
            wheel = download(version, options.download_dir, pip_args, platform=watched.platform)
            watched.proposed.append(row_text(probe(wheel, cuobjdump).probed()))
        except ArchguardError as exc:
            watched.problems.append(f"torch {version}: {exc}")


def write_proposed(watched: Watched, output: Path | None) -> None:
    """The proposed torch rows as a torch_builds.yml for review (nothing where none was
    read: no file that looks like a table and holds no row)."""
    if output is not None and watched.proposed:
        output.write_text(
            "# Proposed by `archguard watch --probe`: review, then add to the table.\n"
            "schema: 1\nbuilds:\n" + "".join(watched.proposed),
            encoding="utf-8",
        )


def probe_toolkits(watched: Watched, options: WatchOptions) -> None:
    """Each missing toolkit minor's newest nvcc wheel downloaded and probed into a proposed
    toolkits.yml row."""
    for version in watched.missing_toolkits:
        try:
            wheel = download(version, options.download_dir, options.pip_args, project=NVCC_PROJECT)
            watched.proposed_toolkits.append(probe_toolkit_wheel(wheel, version))
        except ArchguardError as exc:
            watched.problems.append(f"{NVCC_PROJECT} {version}: {exc}")


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
            f"does not respond). Check the network, or {_NAME_ONE}."
        ) from None


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
        tags = parse_wheel_name(name).tags
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


def render(watched: Watched, fmt: str = "text") -> str:
    """The report: ``fmt`` json (one ``archguard.watch/1`` object) or text."""
    if fmt == "json":
        return json.dumps(watched.as_json(), indent=2) + "\n"
    return render_text(watched)


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
