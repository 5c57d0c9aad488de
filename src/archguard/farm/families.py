"""Cells by rule (``[[cells]]``): a family such as ``torch = ">=2.13"``, ``python = ["3.10",
"3.11", "3.12", "3.13"]``, ``cuda = "13"`` becomes concrete cells against the index it
names, so that a new torch release gets its wheels without a person adding its cell.

Each torch minor in the range becomes cells built against that minor's latest release on
the index (torch's C++ ABI changes by minor), one per platform of the rule (``platforms``:
x86_64, aarch64) and Python (``3.14t``: the free-threaded ``cp314t`` build) it has a wheel
for, on the CUDA line of that release's build: its local label (``+cu130``), the index's
``/cuXYZ``, else its metadata (``cuda-toolkit[...]==13.2.2``, read with ``detect.index``). A
cell's name and its torch pin follow from the release alone (``cu130-torch2.13-py311``,
``torch==2.13.0``; ``cu130-torch2.13-py314t-aarch64`` on aarch64), so a new release adds its
cells and jobs and changes no existing one; a minor's new patch release moves that minor's
cells to it. :func:`expand` is pure (the listing is data);
:func:`expand_manifest` asks the index.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from archguard.core.cuda import CudaVersion
from archguard.core.platform import DEFAULT_PLATFORM, Platform, platform_of_tag
from archguard.core.wheelfile import InvalidWheelFilename, parse_wheel_name
from archguard.detect.index import IndexFile, index_urls, project_files, wheel_metadata
from archguard.errors import ArchguardError, ConfigError, IndexUnreachable
from archguard.farm.ledger import say
from archguard.farm.manifest import Cell, CellFamily, Manifest, load_manifest, platform_suffix

# the distributions whose pin in torch's metadata names its CUDA build
_CUDA_DISTS = ("cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12")


@dataclass(frozen=True)
class Release:
    """One torch release of a family: its version, CUDA build and the (platform, Python)
    pairs it has a Linux wheel for (``("aarch64", "3.14t")``: a ``cp314-cp314t`` wheel)."""

    version: Version
    cuda: CudaVersion | None  # None: its files do not say (the metadata will)
    wheels: frozenset[tuple[Platform, str]]
    files: tuple[IndexFile, ...] = ()

    def pythons(self, platform: Platform) -> list[str]:
        """The Pythons it has a wheel for on ``platform``, in order (3.9 ... 3.14, 3.14t)."""
        return sorted((p for m, p in self.wheels if m == platform), key=python_order)


def python_order(python: str) -> tuple[int, int, bool]:
    """``3.9`` < ``3.14`` < ``3.14t`` (a sort key; X.Y as numbers, the free-threaded after)."""
    major, _, minor = python.removesuffix("t").partition(".")
    return int(major), int(minor), python.endswith("t")


def _python_of(interpreter: str, abi: str) -> str | None:
    """``cp311``/``cp311`` -> 3.11, ``cp314``/``cp314t`` -> 3.14t (the free-threaded
    build); abi3, ``none`` or another implementation -> None."""
    digits = interpreter[2:]
    if not interpreter.startswith("cp") or not digits.isdigit() or len(digits) < 2:
        return None
    if abi not in (interpreter, f"{interpreter}t"):
        return None
    return f"{digits[0]}.{digits[1:]}" + ("t" if abi.endswith("t") else "")


def _local_cuda(version: Version) -> CudaVersion | None:
    return CudaVersion.from_tag(version.local) if version.local else None


def _wheels_of(filename: str, family: CellFamily) -> tuple[Version, set[tuple[Platform, str]]]:
    """A torch file's version and the (platform, Python) pairs of the family's platforms
    it is a wheel for; nothing for an sdist, another OS or a release outside the range."""
    try:
        wheel = parse_wheel_name(filename)
    except InvalidWheelFilename:
        return Version("0"), set()
    if wheel.variant is not None:  # a PEP 825 variant copy: its plain wheel says it
        return Version("0"), set()
    version, tags = wheel.version, wheel.tags
    public = Version(version.public)
    if public.is_prerelease or public.is_devrelease:
        return version, set()
    if not family.torch.specifier.contains(public, prereleases=False):
        return version, set()
    pairs = set()
    for t in tags:
        machine, python = platform_of_tag(t.platform), _python_of(t.interpreter, t.abi)
        if machine in family.platforms and python is not None:
            pairs.add((machine, python))
    return version, pairs


def releases(files: Sequence[IndexFile], family: CellFamily) -> list[Release]:
    """Each minor's latest final release in the family's range that has a Linux wheel for
    one of its platforms, with the (platform, Python) pairs it has wheels for; oldest
    first. One pass over the listing."""
    found: dict[Version, tuple[set[tuple[Platform, str]], set[CudaVersion | None], list[IndexFile]]]
    found = {}
    for f in files:
        version, pairs = _wheels_of(f.filename, family)
        if not pairs:
            continue
        entry = found.setdefault(Version(version.public), (set(), set(), []))
        entry[0].update(pairs)
        entry[1].add(_local_cuda(version))
        entry[2].append(f)
    latest: dict[tuple[int, int], Version] = {}
    for v in found:
        if v > latest.get((v.major, v.minor), Version("0")):
            latest[(v.major, v.minor)] = v
    out = []
    for v in sorted(latest.values()):
        pairs, cudas, listed = found[v]
        known = {c for c in cudas if c is not None}
        out.append(
            Release(
                v, next(iter(known)) if len(known) == 1 else None, frozenset(pairs), tuple(listed)
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


def cell_name(
    family: CellFamily,
    cuda: CudaVersion,
    version: Version,
    python: str,
    platform: Platform = DEFAULT_PLATFORM,
) -> str:
    """``cu130-torch2.13-py311``; ``...-py314t`` for a free-threaded Python, and
    ``...-aarch64`` on aarch64 (x86_64's names are those of before)."""
    head = f"{family.prefix}-" if family.prefix else ""
    tail = platform_suffix(platform)
    minor = f"{version.major}.{version.minor}"
    return f"{head}{cuda.tag}-torch{minor}-py{python.replace('.', '')}{tail}"


def _cuda_of(
    family: CellFamily, release: Release, cudas: Mapping[Version, CudaVersion]
) -> tuple[CudaVersion | None, str]:
    """The release's CUDA build, or why it makes no cells (unknown, or off the line)."""
    cuda = release.cuda or cudas.get(release.version)
    line = f"{family.cuda_major}" + (
        f".{family.cuda_minor}" if family.cuda_minor is not None else ""
    )
    if cuda is None:
        return None, f"torch {release.version}: its CUDA build is not known: no cells"
    if cuda.major != family.cuda_major or (
        family.cuda_minor is not None and cuda.minor != family.cuda_minor
    ):
        return (
            None,
            f"torch {release.version} is a CUDA {cuda.text} build, not CUDA {line}: no cells",
        )
    return cuda, ""


def expand(
    family: CellFamily, found: Sequence[Release], cudas: Mapping[Version, CudaVersion]
) -> tuple[list[Cell], list[str]]:
    """The family's concrete cells from the releases the index has (``cudas``: the CUDA of a
    release whose files do not say it): one per platform and Python the release has a wheel
    for, and a note for each release, platform or Python left out."""
    cells: list[Cell] = []
    notes: list[str] = []
    interpreters = dict(family.interpreters)
    several = family.platforms != (DEFAULT_PLATFORM,)
    for release in found:
        cuda, why = _cuda_of(family, release, cudas)
        if cuda is None:
            notes.append(why)
            continue
        for platform in family.platforms:
            have = release.pythons(platform)
            on = f" on {platform}" if several else ""
            for python in family.pythons:
                if python not in have:
                    notes.append(
                        f"torch {release.version} has no wheel for Python {python}{on} "
                        f"(it has {', '.join(have) or 'none'})"
                    )
                    continue
                cells.append(
                    Cell(
                        cell_name(family, cuda, release.version, python, platform),
                        python,
                        Requirement(f"torch=={release.version}"),
                        cuda,
                        family.index_url,
                        family.extra_index_urls,
                        family.find_links,
                        family.installer_options,
                        interpreters.get(python),
                        family.where,
                        platform=platform,
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
        # one build's metadata says the release's CUDA (x86_64's first: its rows came first)
        linux = sorted(
            (f for f in release.files if "linux" in f.filename),
            key=lambda f: not f.filename.endswith("_x86_64.whl"),
        )
        metadata = wheel_metadata(linux[0] if linux else release.files[0])
        cuda = cuda_from_metadata(metadata.requires_dist)
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
