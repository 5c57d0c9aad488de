"""CUDA arch values: parse every accepted spelling, print one canonical text.

An :class:`Arch` is a compute capability with an optional suffix: ``a`` (arch-specific,
runs on exactly that capability) or ``f`` (family, runs on the same major at a minor at or
above it). An :class:`ArchEntry` is one list entry: an arch whose cubin is built, plus
``+PTX`` when plain ``compute_XY`` PTX is embedded with it. :class:`Targets` is what ends up
in a binary: a set of cubins and a set of PTX targets.

Accepted spellings, wherever a list is read (policy, ``[tool.archguard]``, environment,
command line): torch's ``TORCH_CUDA_ARCH_LIST`` syntax (``8.6``, ``9.0a``, ``9.0+PTX``,
named arches such as ``Ampere``, entries separated by ``;`` or whitespace), ``sm_86`` /
``sm_90a`` / ``sm_100f``, and ``M.mf``. Anything else, and any arch that no CUDA toolkit in
the bundled table emits, is an :class:`~archguard.errors.InvalidArch` naming the entry and
where it came from.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from archguard.errors import InvalidArch

SUFFIXES = ("", "a", "f")

# torch.utils.cpp_extension._get_cuda_arch_flags (torch 2.13.0), named_arches: the same
# names expand to the same entries here. Combined names come first, as in torch.
NAMED_ARCHES: dict[str, str] = {
    "Kepler+Tesla": "3.7",
    "Kepler": "3.5+PTX",
    "Maxwell+Tegra": "5.3",
    "Maxwell": "5.0;5.2+PTX",
    "Pascal": "6.0;6.1+PTX",
    "Volta+Tegra": "7.2",
    "Volta": "7.0+PTX",
    "Turing": "7.5+PTX",
    "Ampere+Tegra": "8.7",
    "Ampere": "8.0;8.6+PTX",
    "Ada": "8.9+PTX",
    "Hopper": "9.0+PTX",
    "Blackwell+Tegra": "11.0",
    "Blackwell": "10.0;10.3;12.0;12.1+PTX",
}
_NAMED_LOWER = {name.lower(): value for name, value in NAMED_ARCHES.items()}

_DOTTED = re.compile(r"(?P<major>[0-9]{1,2})\.(?P<minor>[0-9])(?P<suffix>[af]?)", re.ASCII)
# Every target name archguard reads (nvcc flags, cuobjdump, torch, nvcc --list-gpu-*):
# sm_XY[a|f] (a cubin), compute_XY[a|f] (PTX), lto_XY (LTO IR).
_TARGET = re.compile(r"(?P<kind>sm|compute|lto)_(?P<digits>[0-9]{2,3})(?P<suffix>[af]?)", re.ASCII)
_PTX_SUFFIX = re.compile(r"\+ptx$", re.IGNORECASE)

HOW_TO_WRITE = (
    "write an entry as M.m (8.6), M.ma / M.mf (9.0a, 10.0f), sm_86 / sm_90a, or a torch "
    "name such as Ampere, optionally followed by +PTX; separate entries with ';' or spaces"
)


@dataclass(frozen=True, order=True)
class Arch:
    """A CUDA compute capability, optionally arch-specific (``a``) or family (``f``)."""

    major: int
    minor: int
    suffix: str = ""

    def __post_init__(self) -> None:
        if self.suffix not in SUFFIXES:
            raise ValueError(f"suffix must be one of {SUFFIXES}, not {self.suffix!r}")

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}"

    @property
    def digits(self) -> str:
        return f"{self.major}{self.minor}"

    @property
    def sm(self) -> str:
        return f"sm_{self.digits}{self.suffix}"

    @property
    def compute(self) -> str:
        return f"compute_{self.digits}{self.suffix}"

    @property
    def cc(self) -> tuple[int, int]:
        return (self.major, self.minor)

    @property
    def plain(self) -> Arch:
        return Arch(self.major, self.minor)

    @property
    def cc_text(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def from_target(cls, name: str) -> Arch:
        """``sm_90a`` / ``compute_100f`` -> Arch. For trusted data; raises ValueError."""
        split = split_target(name)
        if split is None or split[0] == "lto":
            raise ValueError(f"not a CUDA target name: {name!r}")
        return split[1]


def split_target(name: str) -> tuple[str, Arch] | None:
    """``sm_90a`` -> ('sm', 9.0a); ``compute_90`` -> ('compute', 9.0); ``lto_90`` -> ('lto',
    9.0); anything else -> None. The one parser of target names."""
    match = _TARGET.fullmatch(name)
    if not match:
        return None
    digits = match["digits"]
    return match["kind"], Arch(int(digits[:-1]), int(digits[-1]), match["suffix"])


@dataclass(frozen=True, order=True)
class ArchEntry:
    """One list entry: a cubin for ``arch`` and, with ``ptx``, plain ``compute_XY`` PTX."""

    arch: Arch
    ptx: bool = False

    def __str__(self) -> str:
        return f"{self.arch}+PTX" if self.ptx else str(self.arch)


@dataclass(frozen=True)
class Targets:
    """What a binary holds: cubins (SASS) and PTX, each a set of arches."""

    cubins: frozenset[Arch]
    ptx: frozenset[Arch]

    @classmethod
    def from_entries(cls, entries: Iterable[ArchEntry]) -> Targets:
        entries = tuple(entries)
        return cls(
            cubins=frozenset(e.arch for e in entries),
            ptx=frozenset(e.arch.plain for e in entries if e.ptx),
        )

    def names(self) -> list[str]:
        """``sm_XY`` / ``compute_XY`` names, ascending: cubins first, then PTX."""
        return [a.sm for a in sorted(self.cubins)] + [a.compute for a in sorted(self.ptx)]

    def __str__(self) -> str:
        return " ".join(self.names()) or "(nothing)"


def _syntax_error(entry: str, source: str) -> InvalidArch:
    hint = ""
    if "," in entry:
        hint = " (commas do not separate entries)"
    return InvalidArch(f"{entry!r} in {source} is not a CUDA arch{hint}: {HOW_TO_WRITE}.")


def _check_known(arch: Arch, entry: str, source: str, known: Collection[Arch]) -> Arch:
    if arch in known:
        return arch
    majors = [str(k) for k in sorted({k for k in known if k.major == arch.major})]
    same_major = f" Known {arch.major}.x arches: {' '.join(majors)}." if majors else ""
    raise InvalidArch(
        f"{entry!r} in {source} is not a known CUDA arch: no CUDA toolkit in archguard's "
        f"bundled table emits {arch.sm}.{same_major} Unknown arches are never dropped "
        "silently; fix the entry or remove it."
    )


def parse_arch(text: str, source: str, *, known: Collection[Arch]) -> Arch:
    """Parse one arch (``8.6``, ``9.0a``, ``10.0f``, ``sm_90a``) with no ``+PTX``.

    ``known`` is the set of arches that exist (the readers pass the bundled toolkit table's,
    :func:`archguard.core.toolkit.known_arches`); anything outside it is an error.
    """
    entry = text.strip()
    match = _DOTTED.fullmatch(entry)
    if match:
        arch = Arch(int(match["major"]), int(match["minor"]), match["suffix"])
    else:
        split = split_target(entry)
        if split is None or split[0] != "sm":
            raise _syntax_error(entry, source)
        arch = split[1]
    return _check_known(arch, entry, source, known)


def _parse_entry(piece: str, source: str, known: Collection[Arch]) -> list[ArchEntry]:
    named = _NAMED_LOWER.get(piece.lower())
    if named is not None:
        return [_parse_entry(p, f"{source} (from {piece!r})", known)[0] for p in named.split(";")]
    split = split_target(piece)
    if split is not None and split[0] == "compute":
        raise InvalidArch(
            f"{piece!r} in {source} names PTX alone; an arch list entry is a cubin, "
            "optionally with PTX: write it as M.m+PTX (e.g. 9.0+PTX)."
        )
    ptx = bool(_PTX_SUFFIX.search(piece))
    base = _PTX_SUFFIX.sub("", piece) if ptx else piece
    return [ArchEntry(parse_arch(base, source, known=known), ptx)]


def split_list(value: str | Sequence[object], source: str) -> list[str]:
    """Split a list given as one string (``;`` / whitespace) or as a sequence of strings."""
    if isinstance(value, str):
        pieces = [p for p in re.split(r"[;\s]+", value) if p]
    elif isinstance(value, Sequence):
        pieces = []
        for item in value:
            if not isinstance(item, str):
                raise InvalidArch(
                    f"{item!r} in {source} is a {type(item).__name__}, not text: quote every "
                    f"arch entry (write '{item}' not {item}), so that 8.10 can never read as 8.1."
                )
            pieces.extend(p for p in re.split(r"[;\s]+", item) if p)
    else:
        raise InvalidArch(
            f"{source} must be a string like '8.0;8.6+PTX' or a list of such strings, "
            f"not {type(value).__name__}."
        )
    if not pieces:
        raise InvalidArch(f"{source} is empty: give at least one arch ({HOW_TO_WRITE}).")
    return pieces


def parse_arch_list(
    value: str | Sequence[object], source: str, *, known: Collection[Arch]
) -> tuple[ArchEntry, ...]:
    """Parse a list in any accepted spelling into canonical, sorted, de-duplicated entries.

    Two entries for the same arch merge (``+PTX`` if either has it).
    """
    merged: dict[Arch, bool] = {}
    for piece in split_list(value, source):
        for entry in _parse_entry(piece, source, known):
            merged[entry.arch] = merged.get(entry.arch, False) or entry.ptx
    return tuple(ArchEntry(arch, ptx) for arch, ptx in sorted(merged.items()))


def parse_targets(
    value: str | Sequence[object], source: str, *, known: Collection[Arch]
) -> Targets:
    """Parse a binary's targets: ``sm_XY`` cubins and ``compute_XY`` PTX, as torch lists them.

    ``torch.cuda.get_arch_list()`` gives e.g. ``['sm_75', ..., 'sm_120', 'compute_120']``.
    Arch-list entries (``7.5``, ``9.0+PTX``) are accepted too.
    """
    cubins: set[Arch] = set()
    ptx: set[Arch] = set()
    for piece in split_list(value, source):
        split = split_target(piece)
        if split is not None and split[0] == "compute":
            ptx.add(_check_known(split[1], piece, source, known))
            continue
        for entry in _parse_entry(piece, source, known):
            cubins.add(entry.arch)
            if entry.ptx:
                ptx.add(entry.arch.plain)
    return Targets(frozenset(cubins), frozenset(ptx))


def format_list(entries: Iterable[ArchEntry]) -> str:
    """Canonical text: ``M.m[a|f][+PTX]`` ascending, joined by ``;``."""
    return ";".join(str(e) for e in sorted(entries))
