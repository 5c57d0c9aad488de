"""CUDA toolkits: which cubins and PTX a given nvcc can emit.

Facts come from two places that must agree where both exist: the bundled table
``defaults/toolkits.yml`` (probed from real ptxas/nvcc binaries by
``scripts/probe_toolkits.py``) for toolkits that are not installed, and the live nvcc
(``archguard.detect.nvcc``), whose ``--list-gpu-code`` lists plain targets only; the ``a``
and ``f`` variants are added by :func:`variant_rule`, which reproduces every bundled row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from archguard.core.arch import Arch
from archguard.core.bundled import bundled_yaml
from archguard.core.cuda import CudaVersion
from archguard.errors import UnknownToolkit


def variant_rule(plain: Iterable[Arch], cuda: CudaVersion) -> frozenset[Arch]:
    """The ``a``/``f`` targets a toolkit emits beyond its plain list.

    Rule (matches every row of the bundled, probed table): every plain target of major 9
    or above has an ``a`` variant; from CUDA 12.9, every plain target of major 10 or above
    has an ``f`` variant too.
    """
    out: set[Arch] = set()
    for arch in plain:
        if arch.suffix:
            continue
        if arch.major >= 9:
            out.add(Arch(arch.major, arch.minor, "a"))
        if arch.major >= 10 and cuda >= (12, 9):
            out.add(Arch(arch.major, arch.minor, "f"))
    return frozenset(out)


@dataclass(frozen=True)
class Toolkit:
    """What one CUDA toolkit can emit, and where that fact came from."""

    version: CudaVersion
    cubins: frozenset[Arch]
    ptx: frozenset[Arch]
    source: str
    nvcc: str | None = None  # path of the live nvcc; None for a bundled row

    def __post_init__(self) -> None:
        if not isinstance(self.version, CudaVersion):
            object.__setattr__(self, "version", CudaVersion(*self.version))

    @property
    def tag(self) -> str:
        return self.version.tag

    @property
    def build(self) -> int | None:
        """nvcc's ``__CUDACC_VER_BUILD__`` (88 for V13.0.88), when the source names the
        full release."""
        return release_build(self.source, self.version)

    @property
    def text(self) -> str:
        return self.version.text

    def emits_cubin(self, arch: Arch) -> bool:
        return arch in self.cubins

    def emits_ptx(self, arch: Arch) -> bool:
        return arch in self.ptx

    def plain_cubins(self) -> list[Arch]:
        return sorted(a for a in self.cubins if not a.suffix)

    @classmethod
    def from_lists(
        cls,
        version: CudaVersion,
        gpu_code: Iterable[str],
        gpu_arch: Iterable[str],
        source: str,
        nvcc: str | None = None,
    ) -> Toolkit:
        """Build from ``nvcc --list-gpu-code`` / ``--list-gpu-arch`` output plus the rule."""
        plain = frozenset(Arch.from_target(n) for n in gpu_code)
        plain_ptx = frozenset(Arch.from_target(n) for n in gpu_arch)
        return cls(
            version=CudaVersion(*version),
            cubins=plain | variant_rule(plain, version),
            ptx=plain_ptx | variant_rule(plain_ptx, version),
            source=source,
            nvcc=nvcc,
        )


_FULL_RELEASE = re.compile(r"\bV(\d+)\.(\d+)\.(\d+)\b")


def release_build(text: str, version: CudaVersion) -> int | None:
    """The build number of ``version`` in an nvcc release text ("..., V13.0.88" -> 88):
    what ``nvcc --version`` prints, and what the bundled rows' sources quote."""
    for match in _FULL_RELEASE.finditer(text):
        if (int(match[1]), int(match[2])) == (version.major, version.minor):
            return int(match[3])
    return None


@dataclass(frozen=True)
class ToolkitRow:
    """One row of the bundled table, with the raw probe fields kept for checks."""

    toolkit: Toolkit
    ptx_isa: str
    nvcc_list_gpu_code: tuple[str, ...]
    nvcc_list_gpu_arch: tuple[str, ...]


def parse_rows(data: object, source: str) -> dict[CudaVersion, ToolkitRow]:
    """A toolkits.yml table (bundled, or a farm's for a toolkit not in it) -> rows.

    Raises ``ValueError``/``KeyError``/``TypeError`` on a malformed table; the readers say
    which file it was.
    """
    if not isinstance(data, dict) or not isinstance(data.get("toolkits"), dict):
        raise ValueError("expected a mapping with a 'toolkits' mapping of CUDA versions")
    rows: dict[CudaVersion, ToolkitRow] = {}
    for key, row in data["toolkits"].items():
        version = CudaVersion.parse(str(key), source)
        toolkit = Toolkit(
            version=version,
            cubins=frozenset(Arch.from_target(n) for n in row["cubins"]),
            ptx=frozenset(Arch.from_target(n) for n in row["ptx"]),
            source=f"{source}: {row['source']}",
        )
        rows[version] = ToolkitRow(
            toolkit,
            str(row.get("ptx_isa", "")),
            tuple(row.get("nvcc_list_gpu_code", ())),
            tuple(row.get("nvcc_list_gpu_arch", ())),
        )
    return rows


@cache
def bundled_rows() -> dict[CudaVersion, ToolkitRow]:

    return parse_rows(bundled_yaml("toolkits.yml"), "bundled table (toolkits.yml)")


def bundled_toolkit(version: tuple[int, int]) -> Toolkit:
    rows = bundled_rows()
    version = CudaVersion(*version)
    if version not in rows:
        known = ", ".join(v.text for v in sorted(rows))
        raise UnknownToolkit(
            f"CUDA {version.text} is not in archguard's bundled toolkit table "
            f"(known: {known}). Run on a machine with that nvcc installed (drop --cuda), or "
            "wait for an archguard release whose bundled table has it (the table holds only "
            "toolkits probed from their real binaries)."
        )
    return rows[version].toolkit


@cache
def known_arches() -> frozenset[Arch]:
    """Every arch some bundled toolkit emits as a cubin or PTX: the arches that exist.

    The readers of arch lists (policy, package config, environment, command line, torch
    detection) pass this to :mod:`archguard.core.arch`'s parsers.
    """
    out: set[Arch] = set()
    for row in bundled_rows().values():
        out |= row.toolkit.cubins | row.toolkit.ptx
    return frozenset(out)


def compare_with_bundled(toolkit: Toolkit) -> str | None:
    """The live toolkit and the bundled table must agree where both exist."""
    row = bundled_rows().get(toolkit.version)
    if row is None:
        return None
    if row.toolkit.cubins == toolkit.cubins:
        return None
    only_live = sorted(a.sm for a in toolkit.cubins - row.toolkit.cubins)
    only_table = sorted(a.sm for a in row.toolkit.cubins - toolkit.cubins)
    return (
        f"the live nvcc {toolkit.text} and archguard's bundled table disagree (only live: "
        f"{' '.join(only_live) or '-'}; only in the table: {' '.join(only_table) or '-'}); "
        "the live nvcc is used (archguard's bundled table is regenerated from real "
        "toolkits by its maintainers' probe script: report the difference upstream)."
    )
