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

from archguard.arch import Arch
from archguard.errors import ConfigError, UnknownToolkit

_TARGET = re.compile(r"(?:sm|compute)_(?P<digits>[0-9]{2,3})(?P<suffix>[af]?)", re.ASCII)
_CUDA = re.compile(
    r"(?:cu(?P<tag>[0-9]{3,4})|(?P<major>[0-9]{1,2})(?:\.(?P<minor>[0-9]{1,2}))?"
    r"(?:\.[0-9]+)*)",
    re.ASCII,
)

CudaVersion = tuple[int, int]


def target_arch(name: str) -> Arch:
    """``sm_90a`` / ``compute_100f`` -> Arch. For trusted data; raises ValueError."""
    match = _TARGET.fullmatch(name)
    if not match:
        raise ValueError(f"not a CUDA target name: {name!r}")
    digits = match["digits"]
    return Arch(int(digits[:-1]), int(digits[-1]), match["suffix"])


def cuda_tag(version: CudaVersion) -> str:
    """(12, 8) -> 'cu128'; (13, 0) -> 'cu130'."""
    return f"cu{version[0]}{version[1]}"


def cuda_text(version: CudaVersion) -> str:
    return f"{version[0]}.{version[1]}"


def parse_cuda_version(text: str, source: str = "--cuda") -> CudaVersion:
    """Accept '12.8', '12.8.93', '13', 'cu128'."""
    match = _CUDA.fullmatch(text.strip())
    if not match:
        raise ConfigError(f"{source}: {text!r} is not a CUDA version; write it as 12.8 (or cu128).")
    if match["tag"]:
        tag = match["tag"]
        return (int(tag[:-1]), int(tag[-1]))
    return (int(match["major"]), int(match["minor"] or 0))


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
    sass: frozenset[Arch]
    ptx: frozenset[Arch]
    source: str
    nvcc: str | None = None  # path of the live nvcc; None for a bundled row

    @property
    def tag(self) -> str:
        return cuda_tag(self.version)

    @property
    def text(self) -> str:
        return cuda_text(self.version)

    def emits_cubin(self, arch: Arch) -> bool:
        return arch in self.sass

    def emits_ptx(self, arch: Arch) -> bool:
        return arch in self.ptx

    def plain_sass(self) -> list[Arch]:
        return sorted(a for a in self.sass if not a.suffix)

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
        plain = frozenset(target_arch(n) for n in gpu_code)
        plain_ptx = frozenset(target_arch(n) for n in gpu_arch)
        return cls(
            version=version,
            sass=plain | variant_rule(plain, version),
            ptx=plain_ptx | variant_rule(plain_ptx, version),
            source=source,
            nvcc=nvcc,
        )


@dataclass(frozen=True)
class ToolkitRow:
    """One row of the bundled table, with the raw probe fields kept for checks."""

    toolkit: Toolkit
    ptx_isa: str
    nvcc_list_gpu_code: tuple[str, ...]
    nvcc_list_gpu_arch: tuple[str, ...]


@cache
def bundled_rows() -> dict[CudaVersion, ToolkitRow]:
    from archguard._data import bundled_yaml  # noqa: PLC0415

    data = bundled_yaml("toolkits.yml")
    assert isinstance(data, dict)
    rows: dict[CudaVersion, ToolkitRow] = {}
    for key, row in data["toolkits"].items():
        version = parse_cuda_version(key)
        toolkit = Toolkit(
            version=version,
            sass=frozenset(target_arch(n) for n in row["sass"]),
            ptx=frozenset(target_arch(n) for n in row["ptx"]),
            source=f"bundled table (toolkits.yml): {row['source']}",
        )
        rows[version] = ToolkitRow(
            toolkit,
            str(row["ptx_isa"]),
            tuple(row.get("nvcc_list_gpu_code", ())),
            tuple(row.get("nvcc_list_gpu_arch", ())),
        )
    return rows


def bundled_toolkit(version: CudaVersion) -> Toolkit:
    rows = bundled_rows()
    if version not in rows:
        known = ", ".join(cuda_text(v) for v in sorted(rows))
        raise UnknownToolkit(
            f"CUDA {cuda_text(version)} is not in archguard's bundled toolkit table "
            f"(known: {known}). Run on a machine with that nvcc installed (drop --cuda), or "
            "add the release to scripts/probe_toolkits.py and regenerate defaults/toolkits.yml."
        )
    return rows[version].toolkit


@cache
def known_arches() -> frozenset[Arch]:
    """Every arch some bundled toolkit emits as a cubin or PTX: the set parsing accepts."""
    out: set[Arch] = set()
    for row in bundled_rows().values():
        out |= row.toolkit.sass | row.toolkit.ptx
    return frozenset(out)
