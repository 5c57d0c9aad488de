"""A wheel file taken apart: its file name and its core metadata (``METADATA``,
``PKG-INFO``), each read by the library that defines it, in this one place.

- The name: :func:`parse_wheel_name`, over ``packaging.utils.parse_wheel_filename`` (PEP 427's
  rules, a version PEP 440 reads), keeping each segment as written, so that a name made from
  it (:meth:`WheelName.renamed`: a new local version) changes only what the caller changes.
  A PEP 825 variant copy (``x-1.0-cp311-cp311-linux_x86_64-a1b2c3d4.whl``: its label after
  the platform, which ``packaging`` refuses) is read too: the plain name, plus the label.
- The metadata: :func:`parse_metadata`, over ``packaging.metadata.parse_email``, which never
  refuses a field: a field it cannot type (a single-use field written twice, bytes that are
  not UTF-8) is kept aside, and read from there as the email parser read it before (the
  first value). Real wheels carry odd METADATA; reading one never fails.
- :func:`rewrite_metadata`: METADATA with its ``Version`` and ``Requires-Dist`` replaced and
  every other byte as it was (``packaging`` writes no METADATA of its own that keeps them).

Pure functions of a name or a text: any layer may use them."""

from __future__ import annotations

import email.policy
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from email.generator import BytesGenerator
from email.parser import BytesParser

from packaging.metadata import parse_email
from packaging.tags import Tag
from packaging.utils import BuildTag, InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import InvalidVersion, Version

__all__ = [
    "VARIANTS_JSON",
    "CoreMetadata",
    "InvalidWheelFilename",
    "WheelName",
    "parse_metadata",
    "parse_wheel_name",
    "rewrite_metadata",
    "split_variant",
    "variants_json_project",
]

VARIANTS_JSON = "-variants.json"  # PEP 825: NAME-VERSION-variants.json beside variant wheels
_LABEL = re.compile(r"[0-9a-z._]+")  # PEP 825's variant label (variantlib's own rule)


@dataclass(frozen=True)
class WheelName:
    """A wheel's file name: what ``packaging`` reads of it (``project``, ``version``,
    ``build``, ``tags``) and its segments as written (``segments``: name, version, the build
    tag where there is one, python, abi, platform), with a PEP 825 variant's label."""

    project: NormalizedName
    version: Version
    build: BuildTag
    tags: frozenset[Tag]
    segments: tuple[str, ...]
    variant: str | None = None

    @property
    def distribution(self) -> str:
        """The name segment as written (``flash_attn``)."""
        return self.segments[0]

    @property
    def version_text(self) -> str:
        """The version segment as written (``2.8.3+cu130``)."""
        return self.segments[1]

    @property
    def python(self) -> str:
        """The python tag as written (``cp310``, ``cp310.cp311``)."""
        return self.segments[-3]

    @property
    def abi(self) -> str:
        return self.segments[-2]

    @property
    def platform(self) -> str:
        """The platform tag as written (``manylinux_2_28_x86_64.manylinux2014_x86_64``)."""
        return self.segments[-1]

    @property
    def platforms(self) -> tuple[str, ...]:
        """Each platform tag of a compressed set (``("manylinux_2_28_x86_64", ...)``)."""
        return tuple(self.platform.split("."))

    @property
    def python_abi(self) -> str:
        """``cp310-abi3``: the python and abi tags as written."""
        return f"{self.python}-{self.abi}"

    @property
    def tag_triple(self) -> str:
        """``cp310-abi3-manylinux_2_28_x86_64``: the three tags as written."""
        return f"{self.python}-{self.abi}-{self.platform}"

    @property
    def plain(self) -> str:
        """The file name without a variant's label (a plain wheel's: its own)."""
        return "-".join(self.segments) + ".whl"

    @property
    def filename(self) -> str:
        """The file name, a variant's label included."""
        if self.variant is None:
            return self.plain
        return f"{'-'.join(self.segments)}-{self.variant}.whl"

    @property
    def variants_json(self) -> str:
        """The ``NAME-VERSION-variants.json`` of its version's variants (PEP 825)."""
        return f"{self.distribution}-{self.version_text}{VARIANTS_JSON}"

    def renamed(
        self,
        *,
        distribution: str | None = None,
        version: str | Version | None = None,
        platform: str | None = None,
    ) -> WheelName:
        """The same wheel's name with a new name segment, version or platform tag; every
        other segment (its build tag, its python and abi tags, a variant's label) as it was.
        Raises :class:`InvalidWheelFilename` where the new name is none."""
        segments = list(self.segments)
        if distribution is not None:
            segments[0] = distribution
        if version is not None:
            segments[1] = str(version)
        if platform is not None:
            segments[-1] = platform
        return _parse(f"{'-'.join(segments)}.whl", self.variant)


def _parse(plain: str, variant: str | None) -> WheelName:
    try:
        project, version, build, tags = parse_wheel_filename(plain)
    except InvalidVersion:  # packaging before 23.2 let it through unwrapped
        raise InvalidWheelFilename(f"Invalid wheel filename (invalid version): {plain!r}") from None
    segments = tuple(plain[: -len(".whl")].split("-"))  # packaging checked: 5, or 6 (build)
    return WheelName(project, version, build, tags, segments, variant)


def parse_wheel_name(filename: str) -> WheelName:
    """``filename`` read as a wheel's (a PEP 825 variant's too). Raises
    ``packaging``'s :class:`InvalidWheelFilename` (a ``ValueError``, quoting the name) where it
    is none."""
    try:
        return _parse(filename, None)
    except InvalidWheelFilename as plain_error:
        refused = plain_error
    stem, dash, label = filename.removesuffix(".whl").rpartition("-")
    if dash and filename.endswith(".whl") and _LABEL.fullmatch(label):
        try:
            return _parse(f"{stem}.whl", label)
        except InvalidWheelFilename:
            pass
    raise refused


def split_variant(name: str) -> tuple[str, str | None]:
    """A wheel's name without its PEP 825 variant label, and the label (None: a plain
    wheel, or a name that is no wheel's, returned as it is): ``x-1.0-cp311-cp311-
    linux_x86_64-a1b2c3d4.whl`` -> (``x-1.0-cp311-cp311-linux_x86_64.whl``, ``a1b2c3d4``)."""
    try:
        wheel = parse_wheel_name(name)
    except InvalidWheelFilename:
        return name, None
    return (wheel.plain, wheel.variant) if wheel.variant is not None else (name, None)


def variants_json_project(filename: str) -> str:
    """The name segment of a ``NAME-VERSION-variants.json`` (as written)."""
    return filename.removesuffix(VARIANTS_JSON).rpartition("-")[0]


@dataclass(frozen=True)
class CoreMetadata:
    """What archguard reads of a core metadata file (each as written; None: not said)."""

    name: str | None
    version: str | None
    requires_python: str | None
    requires_dist: tuple[str, ...] = ()


def parse_metadata(data: bytes | str) -> CoreMetadata:
    """A ``METADATA`` or ``PKG-INFO`` (bytes: decoded as UTF-8; text: as the caller decoded
    it), read leniently: never an error, whatever a field holds. A field ``packaging``
    cannot type (written twice where it may be once, not UTF-8) is read as the email parser
    reads it: its first value, or every value of a field that may repeat."""
    raw, unparsed = parse_email(data)

    def first(key: str, field: str) -> str | None:
        value = raw.get(key)
        if isinstance(value, str):
            return value
        kept = unparsed.get(field)
        return str(kept[0]) if kept else None

    requires = raw.get("requires_dist")
    if requires is None:
        requires = [str(r) for r in unparsed.get("requires-dist", [])]
    return CoreMetadata(
        first("name", "name"),
        first("version", "version"),
        first("requires_python", "requires-python"),
        tuple(requires),
    )


def _as_written(text: str) -> str:
    """``text`` as the email generator writes back byte for byte (UTF-8 as it was, never
    an RFC 2047 encoded word)."""
    return text.encode("utf-8", "surrogateescape").decode("ascii", "surrogateescape")


def rewrite_metadata(
    data: bytes, *, version: str, requires_dist: Sequence[str] | None = None
) -> bytes:
    """``data`` (a METADATA) with ``Version: version`` and, where ``requires_dist`` is given,
    its ``Requires-Dist`` lines replaced by those (in that order, after the other fields);
    every other field and the description as they were (no line folded, no ``>From``)."""
    message = BytesParser(policy=email.policy.compat32).parsebytes(data)
    if "Version" in message:
        message.replace_header("Version", version)
    else:
        message["Version"] = version
    if requires_dist is not None:
        del message["Requires-Dist"]
        for text in requires_dist:
            message["Requires-Dist"] = _as_written(text)
    out = io.BytesIO()
    BytesGenerator(out, mangle_from_=False, maxheaderlen=0).flatten(message)
    return out.getvalue()
