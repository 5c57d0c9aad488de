"""Torch builds: which cubins and PTX a torch carries, so which devices it can run on.

A :class:`TorchBuild` is data: it comes from the installed torch
(``archguard.detect.torch``), from the bundled table ``defaults/torch_builds.yml`` (the
ADR's "What PyTorch itself builds"), or from ``--torch-arches`` on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from packaging.version import InvalidVersion, Version

from archguard.arch import Targets, parse_targets
from archguard.cuda import CudaVersion
from archguard.errors import ConfigError, UnknownTorchBuild
from archguard.toolkit import known_arches


def parse_torch_version(text: str, source: str = "--torch") -> Version:
    """'2.7', '2.13.0+cu130', '2.11.0.dev20260101' -> Version (local part kept)."""
    try:
        return Version(text.strip())
    except InvalidVersion:
        raise ConfigError(
            f"{source}: {text!r} is not a torch version; write it as 2.7 or 2.13.0."
        ) from None


def release_minor(version: Version) -> str:
    return f"{version.major}.{version.minor}"


@dataclass(frozen=True)
class TorchBuild:
    """A torch's version, the CUDA it was built for, and the targets it carries."""

    version: Version | None  # None when only --torch-arches is known
    cuda: CudaVersion | None
    targets: Targets
    source: str

    def __post_init__(self) -> None:
        if self.cuda is not None and not isinstance(self.cuda, CudaVersion):
            object.__setattr__(self, "cuda", CudaVersion(*self.cuda))

    @property
    def label(self) -> str:
        ver = str(self.version) if self.version is not None else "(version not given)"
        if self.cuda is not None and (self.version is None or not self.version.local):
            return f"torch {ver} ({self.cuda.tag})"
        return f"torch {ver}"

    @property
    def public_version(self) -> Version | None:
        """The version without its local part (+cu130), for specifier matching."""
        if self.version is None:
            return None
        return Version(self.version.public)


@dataclass(frozen=True)
class BundledBuild:
    """One (CUDA, torch release) cell of the bundled table."""

    cuda: CudaVersion
    torch: str  # "2.7"
    build: TorchBuild

    @property
    def tag(self) -> str:
        return self.cuda.tag


@cache
def bundled_builds() -> tuple[BundledBuild, ...]:
    from archguard._data import bundled_yaml  # noqa: PLC0415

    data = bundled_yaml("torch_builds.yml")
    assert isinstance(data, dict)
    out: list[BundledBuild] = []
    for row in data["builds"]:
        cuda = CudaVersion.parse(row["tag"], "bundled torch_builds.yml")
        source = row["source"]
        if source == "adr":
            source = "CW-ADR-0012 'What PyTorch itself builds' (snapshot 2026-08)"
        targets_text = " ".join(
            [row["cubins"]] + [f"compute_{p.replace('.', '')}" for p in row["ptx"].split()]
        )
        targets = parse_targets(targets_text, "bundled torch_builds.yml", known=known_arches())
        for minor in row["torch"]:
            out.append(
                BundledBuild(
                    cuda,
                    minor,
                    TorchBuild(Version(minor), cuda, targets, f"bundled table: {source}"),
                )
            )
    return tuple(sorted(out, key=lambda b: (b.tag, Version(b.torch))))


def bundled_torch(cuda: tuple[int, int], version: Version) -> TorchBuild:
    cuda = CudaVersion(*cuda)
    index = cuda.tag
    minor = release_minor(version)
    candidates = [b for b in bundled_builds() if b.cuda == cuda]
    for b in candidates:
        if b.torch == minor:
            return b.build
    known = ", ".join(b.torch for b in candidates) or "none"
    raise UnknownTorchBuild(
        f"the bundled torch table has no {index} build of torch {minor} (CUDA "
        f"{cuda.text} builds known: {known}). Pick one of those, or describe the torch "
        "with --torch-arches 'sm_75 sm_80 ... compute_120' (what torch.cuda.get_arch_list() "
        "prints for it)."
    )
