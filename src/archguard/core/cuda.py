"""CUDA versions and their ``cuXYZ`` tags: one type, one parser.

A :class:`CudaVersion` is a (major, minor) pair (it compares and hashes like the tuple)
with its two spellings: ``12.8`` (:attr:`~CudaVersion.text`) and ``cu128``
(:attr:`~CudaVersion.tag`, the name of a policy row, an ``arch_list_by_cuda`` key and a
PyTorch wheel index). :meth:`CudaVersion.parse` reads what a person types (``12.8``,
``12.8.93``, ``13``, ``cu128``); :meth:`CudaVersion.from_tag` reads only a tag.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from archguard.errors import ConfigError

_TAG = re.compile(r"cu(?P<major>[0-9]{2})(?P<minor>[0-9])", re.ASCII)
_VERSION = re.compile(
    r"(?:cu(?P<tag>[0-9]{3,4})|(?P<major>[0-9]{1,2})(?:\.(?P<minor>[0-9]{1,2}))?"
    r"(?:\.[0-9]+)*)",
    re.ASCII,
)


class CudaVersion(NamedTuple):
    """A CUDA toolkit release, e.g. ``CudaVersion(12, 8)``: text ``12.8``, tag ``cu128``."""

    major: int
    minor: int

    @property
    def tag(self) -> str:
        return f"cu{self.major}{self.minor}"

    @property
    def text(self) -> str:
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        return self.text

    @classmethod
    def from_tag(cls, tag: str) -> CudaVersion | None:
        """``cu128`` -> 12.8; anything that is not exactly a ``cuXYZ`` tag -> None."""
        match = _TAG.fullmatch(tag)
        return cls(int(match["major"]), int(match["minor"])) if match else None

    @classmethod
    def parse(cls, text: str, source: str = "--cuda") -> CudaVersion:
        """Accept ``12.8``, ``12.8.93``, ``13``, ``cu128``; else :class:`ConfigError`."""
        match = _VERSION.fullmatch(text.strip())
        if not match:
            raise ConfigError(
                f"{source}: {text!r} is not a CUDA version; write it as 12.8 (or cu128)."
            )
        if match["tag"]:
            digits = match["tag"]
            return cls(int(digits[:-1]), int(digits[-1]))
        return cls(int(match["major"]), int(match["minor"] or 0))
