"""Torch builds: which cubins and PTX a torch carries, so which devices it can run on.

A :class:`TorchBuild` is data: it comes from the installed torch
(``archguard.detect.torch``), from the bundled table ``defaults/torch_builds.yml`` (the
ADR's "What PyTorch itself builds"), or from ``--torch-arches`` on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from packaging.version import InvalidVersion, Version

from archguard.core.arch import Targets, parse_targets
from archguard.core.bundled import bundled_yaml
from archguard.core.cuda import CudaVersion
from archguard.core.platform import DEFAULT_PLATFORM, Platform, parse_platform
from archguard.core.toolkit import known_arches
from archguard.errors import ConfigError, UnknownTorchBuild


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
    # the machine this torch is built for: its wheels' platform (the host's, installed)
    platform: Platform = DEFAULT_PLATFORM

    def __post_init__(self) -> None:
        if self.cuda is not None and not isinstance(self.cuda, CudaVersion):
            object.__setattr__(self, "cuda", CudaVersion(*self.cuda))

    @property
    def label(self) -> str:
        ver = str(self.version) if self.version is not None else "(version not given)"
        on = "" if self.platform == DEFAULT_PLATFORM else f", {self.platform}"
        if self.cuda is not None and (self.version is None or not self.version.local):
            return f"torch {ver} ({self.cuda.tag}{on})"
        return f"torch {ver}" + (f" ({self.platform})" if on else "")

    @property
    def public_version(self) -> Version | None:
        """The version without its local part (+cu130), for specifier matching."""
        if self.version is None:
            return None
        return Version(self.version.public)


@dataclass(frozen=True)
class BundledBuild:
    """One (CUDA, torch release, platform) cell of the bundled table."""

    cuda: CudaVersion
    torch: str  # "2.7"
    build: TorchBuild

    @property
    def tag(self) -> str:
        return self.cuda.tag

    @property
    def platform(self) -> Platform:
        return self.build.platform


def parse_builds(
    data: object, source: str, label: str = "bundled table"
) -> tuple[BundledBuild, ...]:
    """A torch_builds.yml table (bundled, or a farm's) -> one BundledBuild per cell. A row's
    ``platform`` is ``x86_64`` or ``aarch64`` (``x86_64`` where it names none).

    Raises ``ValueError``/``KeyError``/``TypeError`` (or archguard's own errors) on a
    malformed table; the readers say which file it was.
    """
    if not isinstance(data, dict) or not isinstance(data.get("builds"), list):
        raise ValueError("expected a mapping with a 'builds' list")
    out: list[BundledBuild] = []
    for row in data["builds"]:
        cuda = CudaVersion.parse(row["tag"], source)
        platform = parse_platform(
            str(row.get("platform", DEFAULT_PLATFORM)), f"{source} {row['tag']} platform"
        )
        origin = row["source"]
        if origin == "adr":
            origin = "CW-ADR-0012 'What PyTorch itself builds' (snapshot 2026-08)"
        targets_text = " ".join(
            [row["cubins"]] + [f"compute_{p.replace('.', '')}" for p in row["ptx"].split()]
        )
        targets = parse_targets(targets_text, source, known=known_arches())
        for minor in row["torch"]:
            out.append(
                BundledBuild(
                    cuda,
                    str(minor),
                    TorchBuild(Version(str(minor)), cuda, targets, f"{label}: {origin}", platform),
                )
            )
    cells = sorted(out, key=lambda b: (b.tag, Version(b.torch), b.platform))
    seen: set[tuple[str, str, str]] = set()
    for b in cells:
        key = (b.tag, b.torch, b.platform)
        if key in seen:
            raise ValueError(f"two rows for torch {b.torch} ({b.tag}, {b.platform})")
        seen.add(key)
    return tuple(cells)


@cache
def bundled_builds() -> tuple[BundledBuild, ...]:

    return parse_builds(bundled_yaml("torch_builds.yml"), "bundled torch_builds.yml")


def bundled_torch(
    cuda: tuple[int, int],
    version: Version,
    platform: Platform = DEFAULT_PLATFORM,
    builds: tuple[BundledBuild, ...] | None = None,
) -> TorchBuild:
    """The table's build of torch ``version`` for ``cuda`` on ``platform`` (the bundled
    table, or ``builds``); :class:`UnknownTorchBuild` naming what it does know."""
    cuda = CudaVersion(*cuda)
    index = cuda.tag
    minor = release_minor(version)
    table = bundled_builds() if builds is None else builds
    candidates = [b for b in table if b.cuda == cuda and b.platform == platform]
    for b in candidates:
        if b.torch == minor:
            return b.build
    known = ", ".join(b.torch for b in candidates) or "none"
    elsewhere = sorted(
        {b.platform for b in table if b.cuda == cuda and b.torch == minor} - {platform}
    )
    other = (
        f" (it has torch {minor} ({index}) for {', '.join(elsewhere)} only)" if elsewhere else ""
    )
    raise UnknownTorchBuild(
        f"the torch table has no {index} build of torch {minor} for {platform}{other} (CUDA "
        f"{cuda.text} builds known for {platform}: {known}). Pick one of those, or describe "
        "the torch with --torch-arches 'sm_75 sm_80 ... compute_120' (what "
        "torch.cuda.get_arch_list() prints for it)."
    )
