"""archguard.core.torchbuild: the bundled torch table and version parsing."""

from __future__ import annotations

import pytest
from packaging.version import Version

from archguard.core.arch import Arch
from archguard.core.cuda import CudaVersion
from archguard.core.torchbuild import TorchBuild, bundled_builds, bundled_torch, parse_torch_version
from archguard.errors import ConfigError, UnknownTorchBuild

ADR_TABLE = [  # CW-ADR-0012 "What PyTorch itself builds": (index, torch, has sm_70, PTX)
    ("cu124", "2.6", True, ""),
    ("cu126", "2.10", True, ""),
    ("cu128", "2.7", False, "compute_120"),
    ("cu128", "2.9", True, ""),
    ("cu128", "2.11", False, ""),
    ("cu129", "2.10", True, "compute_120"),
    ("cu129", "2.11", False, "compute_120"),
    ("cu129", "2.12", False, ""),
    ("cu130", "2.10", False, "compute_120"),
    ("cu130", "2.13", False, ""),
    ("cu132", "2.13", False, ""),
]


@pytest.mark.parametrize(("tag", "torch", "volta", "ptx"), ADR_TABLE)
def test_bundled_rows_follow_the_adr(tag: str, torch: str, volta: bool, ptx: str) -> None:
    (build,) = [
        b for b in bundled_builds() if (b.tag, b.torch, b.platform) == (tag, torch, "x86_64")
    ]
    assert (Arch(7, 0) in build.build.targets.cubins) is volta
    assert " ".join(a.compute for a in sorted(build.build.targets.ptx)) == ptx
    assert build.build.cuda == build.cuda and build.cuda.tag == tag


def test_lookup_by_release_minor() -> None:
    build = bundled_torch((12, 8), Version("2.7.1+cu128"))
    assert build.label == "torch 2.7 (cu128)"


def test_unknown_release_names_the_known_ones_and_the_way_out() -> None:
    with pytest.raises(UnknownTorchBuild) as info:
        bundled_torch((12, 8), Version("2.3"))
    assert "2.7, 2.8, 2.9, 2.10, 2.11" in str(info.value) and "--torch-arches" in str(info.value)


@pytest.mark.parametrize(
    ("text", "public"), [("2.7", "2.7"), ("2.13.0+cu130", "2.13.0"), ("2.11.0.dev20260101", None)]
)
def test_parse_torch_version(text: str, public: str | None) -> None:
    version = parse_torch_version(text)
    build = TorchBuild(
        version, CudaVersion(13, 0), bundled_torch((13, 0), Version("2.13")).targets, "t"
    )
    assert str(build.public_version) == (public or str(version))


def test_bad_torch_version_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'two' is not a torch version"):
        parse_torch_version("two")


def test_label_with_and_without_version() -> None:
    targets = bundled_torch((13, 0), Version("2.13")).targets
    assert TorchBuild(None, None, targets, "t").label == "torch (version not given)"
    assert (
        TorchBuild(Version("2.13.0+cu130"), CudaVersion(13, 0), targets, "t").label
        == "torch 2.13.0+cu130"
    )
