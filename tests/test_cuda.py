"""archguard.core.cuda: one CUDA version type, one parser for each spelling."""

from __future__ import annotations

import pytest

from archguard.core.cuda import CudaVersion
from archguard.errors import ConfigError

SPELLINGS = [
    ("12.8", (12, 8), "cu128"),
    ("12.8.93", (12, 8), "cu128"),
    ("13", (13, 0), "cu130"),
    ("cu130", (13, 0), "cu130"),
    (" 12.4 ", (12, 4), "cu124"),
    ("cu129", (12, 9), "cu129"),
]


@pytest.mark.parametrize(("text", "version", "tag"), SPELLINGS)
def test_parse(text: str, version: tuple[int, int], tag: str) -> None:
    parsed = CudaVersion.parse(text)
    assert parsed == version and parsed.tag == tag
    assert parsed.text == f"{version[0]}.{version[1]}" == str(parsed)


@pytest.mark.parametrize("text", ["twelve", "12.x", "cu12", "", "v12.8", "12.8a"])
def test_parse_refuses_with_the_value_and_the_fix(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        CudaVersion.parse(text, "--cuda")
    assert repr(text.strip()) in str(info.value) and "write it as 12.8" in str(info.value)


@pytest.mark.parametrize(
    ("tag", "version"),
    [("cu128", (12, 8)), ("cu130", (13, 0)), ("cu12", None), ("12.8", None), ("cu1280", None)],
)
def test_from_tag_reads_only_tags(tag: str, version: tuple[int, int] | None) -> None:
    assert CudaVersion.from_tag(tag) == version


def test_behaves_like_the_tuple() -> None:
    assert CudaVersion(12, 9) >= (12, 9) > (12, 8)
    assert {(13, 0): "x"}[CudaVersion(13, 0)] == "x"
    assert sorted([CudaVersion(13, 0), CudaVersion(12, 4)])[0].tag == "cu124"
