"""Cells by rule (``[[cells]]``): a family such as ``torch = ">=2.13"``, ``python = ["3.10",
"3.11", "3.12", "3.13"]``, ``cuda = "13"`` becomes concrete cells against the index it
names, so that a new torch release gets its wheels without a person adding its cell.

Each torch minor in the range becomes cells built against that minor's latest release on
the index (torch's C++ ABI changes by minor), one per Python it has a wheel for, on the CUDA
line of that release's build: its local label (``+cu130``), the index's ``/cuXYZ``, else its
metadata (``cuda-toolkit[...]==13.2.2``, read with ``detect.index``). A cell's name and its
torch pin follow from the release alone (``cu130-torch2.13-py311``, ``torch==2.13.0``), so a
new release adds its cells and jobs and changes no existing one; a minor's new patch release
moves that minor's cells to it. :func:`expand` is pure (the listing is data);
:func:`expand_manifest` asks the index.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from archguard.core.cuda import CudaVersion
from archguard.detect.index import IndexFile, index_urls, project_files, wheel_metadata
from archguard.errors import ArchguardError, ConfigError, IndexUnreachable
from archguard.farm.manifest import Cell, CellFamily, Manifest, load_manifest
from archguard.farm.records import say

# the distributions whose pin in torch's metadata names its CUDA build
_CUDA_DISTS = ("cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12")


@dataclass(frozen=True)
class Release:
    """One torch release of a family: its version, CUDA build and the Pythons it has a
    wheel for (on this machine's platform)."""

    version: Version
    cuda: CudaVersion | None  # None: its files do not say (the metadata will)
    pythons: frozenset[str]
    files: tuple[IndexFile, ...] = ()


def _python_of(interpreter: str, abi: str) -> str | None:
    """``cp311``/``cp311`` -> 3.11; a free-threaded (``cp313t``) or other ABI -> None."""
    if not interpreter.startswith("cp") or abi != interpreter or not interpreter[2:].isdigit():
        return None
    digits = interpreter[2:]
    return f"{digits[0]}.{digits[1:]}"


def _local_cuda(version: Version) -> CudaVersion | None:
    return CudaVersion.from_tag(version.local) if version.local else None


def releases(
    files: Sequence[IndexFile], family: CellFamily, machine: str | None = None
) -> list[Release]:
    """Each minor's latest final release in the family's range that has a wheel for this
    platform (Linux, ``machine``), with the Pythons it has wheels for; oldest first."""
    arch = machine or platform.machine()
    found: dict[Version, tuple[set[str], set[CudaVersion | None], list[IndexFile]]] = {}
    for f in files:
        try:
            _, version, _, tags = parse_wheel_filename(f.filename)
        except InvalidWheelFilename:
            continue
        public = Version(version.public)
        if public.is_prerelease or public.is_devrelease:
            continue
        if not family.torch.specifier.contains(public, prereleases=False):
            continue
        pythons = {
            p
            for t in tags
            if t.platform.endswith(arch) and t.platform.startswith(("manylinux", "linux"))
            for p in [_python_of(t.interpreter, t.abi)]
            if p is not None
        }
        if not pythons:
            continue
        entry = found.setdefault(public, (set(), set(), []))
        entry[0].update(pythons)
        entry[1].add(_local_cuda(version))
        entry[2].append(f)
    latest: dict[tuple[int, int], Version] = {}
    for v in found:
        if v > latest.get((v.major, v.minor), Version("0")):
            latest[(v.major, v.minor)] = v
    out = []
    for v in sorted(latest.values()):
        pythons, cudas, listed = found[v]
        known = {c for c in cudas if c is not None}
        out.append(
            Release(
                v, next(iter(known)) if len(known) == 1 else None, frozenset(pythons), tuple(listed)
            )
        )
    return out


def cuda_from_metadata(requires: Sequence[str]) -> CudaVersion | None:
    """The CUDA a torch build pins (``cuda-toolkit[...]==13.2.2``,
    ``nvidia-cuda-runtime-cu12==12.8.90``), from its ``Requires-Dist`` lines."""
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() not in _CUDA_DISTS:
            continue
        for spec in req.specifier:
            if spec.operator in ("==", "==="):
                parts = spec.version.split(".")
                if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                    return CudaVersion(int(parts[0]), int(parts[1]))
    return None


def cell_name(family: CellFamily, cuda: CudaVersion, version: Version, python: str) -> str:
    head = f"{family.prefix}-" if family.prefix else ""
    return f"{head}{cuda.tag}-torch{version.major}.{version.minor}-py{python.replace('.', '')}"


def expand(
    family: CellFamily, found: Sequence[Release], cudas: Mapping[Version, CudaVersion]
) -> tuple[list[Cell], list[str]]:
    """The family's concrete cells from the releases the index has (``cudas``: the CUDA of a
    release whose files do not say it), and a note for each release or Python left out."""
    cells: list[Cell] = []
    notes: list[str] = []
    interpreters = dict(family.interpreters)
    for release in found:
        cuda = release.cuda or cudas.get(release.version)
        line = f"{family.cuda_major}" + (
            f".{family.cuda_minor}" if family.cuda_minor is not None else ""
        )
        if cuda is None:
            notes.append(f"torch {release.version}: its CUDA build is not known: no cells")
            continue
        if cuda.major != family.cuda_major or (
            family.cuda_minor is not None and cuda.minor != family.cuda_minor
        ):
            notes.append(
                f"torch {release.version} is a CUDA {cuda.text} build, not CUDA {line}: no cells"
            )
            continue
        for python in family.pythons:
            if python not in release.pythons:
                have = ", ".join(sorted(release.pythons, key=Version))
                notes.append(
                    f"torch {release.version} has no wheel for Python {python} (it has {have})"
                )
                continue
            cells.append(
                Cell(
                    cell_name(family, cuda, release.version, python),
                    python,
                    Requirement(f"torch=={release.version}"),
                    cuda,
                    family.index_url,
                    family.extra_index_urls,
                    family.find_links,
                    family.installer_options,
                    interpreters.get(python),
                    family.where,
                )
            )
    return cells, notes


def _index_cuda(index_url: str | None) -> CudaVersion | None:
    """An index named for its CUDA line (PyTorch's ``.../whl/cu130``)."""
    for part in reversed((index_url or "").rstrip("/").split("/")):
        found = CudaVersion.from_tag(part)
        if found is not None:
            return found
    return None


def listed(family: CellFamily) -> tuple[list[Release], dict[Version, CudaVersion]]:
    """Ask the family's indexes for torch's releases (its ``index-url`` and
    ``extra-index-url``; without an ``index-url``, every index pip reads, as its install
    will), and the CUDA of those whose files do not say it (one wheel's metadata each)."""
    indexes = [family.index_url] if family.index_url else index_urls()
    indexes += [url for url in family.extra_index_urls if url not in indexes]
    files: list[IndexFile] = []
    unread: list[IndexUnreachable] = []
    for index in indexes:
        try:
            files += project_files(index, "torch")
        except IndexUnreachable as exc:
            unread.append(exc)
    if unread and len(unread) == len(indexes):
        raise unread[0]
    for problem in unread:  # as pip does with an index it cannot read: said, the others used
        say(f"torch's releases: an index was not read ({problem.message}); the others were")
    found = releases(files, family)
    by_index = _index_cuda(family.index_url)
    cudas: dict[Version, CudaVersion] = {}
    for release in found:
        if release.cuda is not None:
            continue
        if by_index is not None:
            cudas[release.version] = by_index
            continue
        linux = [f for f in release.files if "linux" in f.filename]
        metadata = wheel_metadata(linux[0] if linux else release.files[0])
        cuda = cuda_from_metadata(metadata.get_all("Requires-Dist") or [])
        if cuda is not None:
            cudas[release.version] = cuda
    return found, cudas


def expand_manifest(
    manifest: Manifest,
    lister: Callable[[CellFamily], tuple[list[Release], dict[Version, CudaVersion]]] = listed,
) -> Manifest:
    """The manifest with each ``[[cells]]`` rule's cells beside its own ``[[cell]]``s; a
    package's ``skip`` must name one of them. Without rules, the manifest as it is."""
    if not manifest.families:
        return manifest
    cells = list(manifest.cells)
    notes: list[str] = list(manifest.notes)
    problems: list[str] = []
    for family in manifest.families:
        try:
            found, cudas = lister(family)
        except ArchguardError as exc:
            raise ConfigError(
                f"{family.where}: torch's releases could not be listed from "
                f"{family.index_url or 'the index pip uses'}: {exc.message}"
            ) from None
        made, said = expand(family, found, cudas)
        notes += [f"{family.where}: {n}" for n in said]
        for cell in made:
            if any(c.name == cell.name for c in cells):
                problems.append(
                    f"{family.where} makes cell {cell.name!r}, which the manifest names "
                    "already: drop that [[cell]] or give the rule a name (a prefix)"
                )
                continue
            cells.append(cell)
    names = {c.name for c in cells}
    for package in manifest.packages:
        for skipped in package.skip:
            if skipped not in names:
                problems.append(
                    f"{manifest.path} [[package]] {package.name!r}: skip names no cell "
                    f"{skipped!r} (the cells: {', '.join(sorted(names))})"
                )
    if problems:
        raise ConfigError(
            f"farm manifest {manifest.path} is invalid; fix each of these:\n"
            + "\n".join(f"  - {p}" for p in problems)
        )
    return replace(manifest, cells=tuple(cells), notes=tuple(notes))


def load_farm(path: Path) -> Manifest:
    """A manifest file, read and checked, its rules expanded against their indexes: what
    ``farm plan``, ``farm run`` and ``farm workflow`` work from."""
    return expand_manifest(load_manifest(path))
