"""``archguard which SITE [NAME]``: on a user's machine, the one install command that gives a
wheel of a farm's site that imports here and has a native image for every GPU, or, for each
wheel, why it does not fit and the nearest that does.

What it reads: the installed torch (its distribution's version and, from its
``torch/version.py`` read as text, its CUDA; torch is not imported), this Python and the wheel
tags it installs, the GPUs and the driver's CUDA (as ``doctor`` finds them), and the site's
``site.json`` (:mod:`archguard.core.site`), from a directory or an http(s) URL. A machine that
is not this one (a GPU, a torch, a Python, a driver) is given with options, as data.

Why a wheel does not fit, in the order it is judged:

- its torch pin does not hold the installed torch (no wheel for this torch);
- it was compiled with another CUDA major than the installed torch's (another runtime);
- its tags are not this Python's or this platform's;
- the driver runs an older CUDA major than the one that compiled it;
- a GPU has no native image in it (PTX only: compiled at first load, each driver update; or
  nothing: "no kernel image is available for execution on the device").
"""

from __future__ import annotations

import json
import shlex
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags, platform_tags, sys_tags
from packaging.utils import canonicalize_name
from packaging.version import Version

from archguard._http import opened
from archguard.core.arch import parse_targets
from archguard.core.coverage import Device, Tier, device_coverage
from archguard.core.cuda import CudaVersion
from archguard.core.platform import DEFAULT_PLATFORM, Platform, host_platform, platform_of_tag
from archguard.core.site import SITE_JSON, Site, SiteWheel, parse_site
from archguard.core.toolkit import known_arches
from archguard.core.wheelfile import InvalidWheelFilename, parse_wheel_name
from archguard.errors import SiteUnreadable
from archguard.user.doctor import read_installed_torch

WHICH_SCHEMA = "archguard.which/1"
CPU = "the installed torch is a CPU build: no wheel of a CUDA farm runs with it"
FETCH_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Here:
    """The machine a wheel must fit."""

    torch: str | None  # the installed torch distribution's version: "2.13.0+cu130"
    torch_cuda: CudaVersion | None  # the CUDA it was built with (None: a CPU build or unknown)
    python: tuple[int, int]
    tags: frozenset[Tag]  # the wheel tags this Python installs
    gpus: tuple[Device, ...]
    driver_cuda: tuple[int, int] | None
    notes: tuple[str, ...] = ()
    cpu: bool = False  # the torch is a CPU build (its version.py says so, or +cpu)
    platform: Platform | None = None  # the machine: x86_64, aarch64 (None: none torch ships)
    free_threaded: bool = False  # a free-threaded Python (3.14t)

    def as_json(self) -> dict[str, object]:
        return {
            "torch": self.torch,
            "torch_cuda": self.torch_cuda.text if self.torch_cuda else None,
            "python": self.python_text,
            "platform": self.platform,
            "gpus": [d.cc_text for d in self.gpus],
            "driver_cuda": f"{self.driver_cuda[0]}.{self.driver_cuda[1]}"
            if self.driver_cuda
            else None,
            "cpu": self.cpu,
            "notes": list(self.notes),
        }

    @property
    def python_text(self) -> str:
        return f"{self.python[0]}.{self.python[1]}" + ("t" if self.free_threaded else "")


def python_tags(
    python: tuple[int, int] | None,
    platform: Platform | None = None,
    free_threaded: bool = False,
) -> tuple[tuple[int, int], frozenset[Tag]]:
    """This Python's version and the wheel tags it installs; for another X.Y (``3.14t``:
    ``free_threaded``, whose ABI is ``cp314t`` and never ``abi3``), CPython's; for another
    ``platform``, this machine's platform tags with its machine in their place (its glibc
    taken as this one's)."""
    host = host_platform()
    other = platform is not None and platform != host
    if python is None and not other and not free_threaded:
        return (sys.version_info.major, sys.version_info.minor), frozenset(sys_tags())
    version = python or (sys.version_info.major, sys.version_info.minor)
    platforms = list(platform_tags())
    if other and platform is not None:
        mine = host or DEFAULT_PLATFORM
        platforms = [t[: -len(mine)] + platform for t in platforms if t.endswith("_" + mine)]
    abis = [f"cp{version[0]}{version[1]}t"] if free_threaded else None
    tags = [*cpython_tags(version, abis, platforms), *compatible_tags(version, platforms=platforms)]
    # a free-threaded CPython loads no stable-ABI (abi3) extension, whatever packaging yields
    return version, frozenset(t for t in tags if not (free_threaded and t.abi == "abi3"))


def tags_platform(tags: Iterable[Tag]) -> Platform | None:
    """The machine a wheel's tags name (None: any, or none torch ships CUDA for)."""
    found = {platform_of_tag(t.platform) for t in tags} - {None}
    return found.pop() if len(found) == 1 else None


def torch_here(text: str | None = None) -> tuple[str | None, CudaVersion | None, str | None]:
    """The installed torch: its distribution's version, its CUDA, and a note where there is
    none or it cannot be read. ``text`` (``2.14.1+cu130``): a torch given, not read."""
    if text is not None:
        local = Version(text).local or ""
        if local.startswith("cu") and local[2:].isdigit():
            return text, CudaVersion(int(local[2:-1]), int(local[-1])), None
        if local == "cpu":
            return text, None, CPU
        return text, None, f"--torch {text} names no CUDA (+cu130): its CUDA is not judged"
    found = read_installed_torch()
    if found is None:
        return None, None, "no torch is installed: every wheel on the site needs one"
    if found.unread is not None:
        return found.distribution, None, f"torch's CUDA not read ({found.unread}): not judged"
    return found.distribution, found.cuda, None if found.cuda is not None else CPU


def read_site(where: str) -> tuple[Site, str]:
    """The site's ``site.json`` (a directory, or an http(s) or file URL) and the base its
    relative paths resolve against (a URL ending in ``/``)."""
    if urllib.parse.urlparse(where).scheme in ("http", "https", "file"):
        base = where if where.endswith("/") else where + "/"
        url = urllib.parse.urljoin(base, SITE_JSON)
        try:
            with opened(url, FETCH_TIMEOUT_S) as response:
                text = response.read().decode("utf-8")
        except (urllib.error.URLError, OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SiteUnreadable(
                f"archguard which: {url} could not be read ({reason}): give the URL of a "
                "farm's site (the folder holding site.json), or its directory."
            ) from None
    else:
        path = Path(where) / SITE_JSON
        if not path.is_file():
            raise SiteUnreadable(
                f"archguard which: {where} holds no {SITE_JSON}: give a farm's site (the "
                "directory farm run wrote, -o), or its URL."
            )
        text = path.read_text(encoding="utf-8")
        url = str(path)
        base = Path(where).resolve().as_uri() + "/"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SiteUnreadable(f"archguard which: {url} is not JSON ({exc}).") from None
    return parse_site(data, url, SiteUnreadable), base


@dataclass
class Judged:
    """One wheel against this machine."""

    wheel: SiteWheel
    reasons: list[str] = field(default_factory=list)
    jit: list[str] = field(default_factory=list)  # GPUs it serves by PTX only
    version: str = ""

    @property
    def fits(self) -> bool:
        return not self.reasons

    def as_json(self) -> dict[str, object]:
        return {
            "wheel": self.wheel.name,
            "cell": self.wheel.cell,
            "fits": self.fits,
            "reasons": self.reasons,
            "sha256": self.wheel.sha256,
            "record": self.wheel.record,
        }


def _pin(text: str | None) -> Requirement | None:
    try:
        return Requirement(text) if text else None
    except InvalidRequirement:
        return None


def judge(wheel: SiteWheel, here: Here) -> Judged:
    """Every reason ``wheel`` does not fit ``here`` (none: it imports and runs natively)."""
    out = Judged(wheel)
    try:
        name = parse_wheel_name(wheel.name)
        out.version, tags = str(name.version), name.tags
    except InvalidWheelFilename:
        out.reasons.append("its file name is not a wheel's")
        return out
    pin = _pin(wheel.pin)
    if here.torch is None:
        out.reasons.append("no torch is installed")
    elif pin is not None and not pin.specifier.contains(
        Version(here.torch).public, prereleases=True
    ):
        out.reasons.append(f"no wheel for this torch: it requires {pin}, you have {here.torch}")
    cuda = CudaVersion.parse(wheel.cuda, wheel.name)
    if here.cpu:
        out.reasons.append(f"your torch is a CPU build; it was compiled with CUDA {cuda.text}")
    elif here.torch_cuda is not None and here.torch_cuda.major != cuda.major:
        out.reasons.append(
            f"compiled with CUDA {cuda.text}; your torch is built for CUDA "
            f"{here.torch_cuda.text} (another CUDA major: another runtime)"
        )
    tag_problem = _tags_reason(tags, here)
    if tag_problem:
        out.reasons.append(tag_problem)
    if here.driver_cuda is not None and here.driver_cuda[0] < cuda.major:
        out.reasons.append(
            f"the driver runs CUDA up to {here.driver_cuda[0]}.{here.driver_cuda[1]}, older "
            f"than the CUDA {cuda.text} that compiled it: update the driver"
        )
    held = parse_targets(list(wheel.targets), wheel.name, known=known_arches())
    for gpu in here.gpus:
        tier = device_coverage(held, gpu).tier
        if tier is Tier.DEAD:
            out.reasons.append(
                f"its images do not serve the GPU {gpu} (it holds {' '.join(wheel.targets)})"
            )
        elif tier is Tier.JIT:
            out.reasons.append(
                f"only PTX serves the GPU {gpu} (compiled at first load, again after each "
                f"driver update; it holds {' '.join(wheel.targets)})"
                + _ptx_driver(wheel, here.driver_cuda)
            )
    return out


def _tags_reason(tags: frozenset[Tag], here: Here) -> str | None:
    """Why a wheel's tags do not install here: another machine, a glibc above this one's,
    another Python (a free-threaded one never takes abi3); None where they do."""
    built_for = tags_platform(tags)
    if built_for is not None and here.platform is not None and built_for != here.platform:
        return f"it is built for {built_for}; this machine is {here.platform}"
    if tags & here.tags:
        return None
    needs, has = _glibc(tags, min), _glibc(here.tags, max)
    if needs is not None and has is not None and needs > has:
        return (
            f"it needs glibc {needs[0]}.{needs[1]} (manylinux_{needs[0]}_{needs[1]}) and this "
            f"machine has glibc {has[0]}.{has[1]}: the farm built it above torch's own floor "
            "(manylinux_2_28; `archguard farm workflow` builds in PyTorch's image)"
        )
    shown = ", ".join(sorted(str(t) for t in tags))
    return f"its tags ({shown}) are not this Python's ({here.python_text}) or this platform's"


def _glibc(
    tags: Iterable[Tag], pick: Callable[[Iterable[tuple[int, int]]], tuple[int, int]]
) -> tuple[int, int] | None:
    """The glibc a set of tags names (``manylinux_2_34_x86_64`` -> (2, 34)), the lowest or
    the highest by ``pick``; None where none is manylinux."""
    found = []
    for tag in tags:
        parts = tag.platform.split("_")
        if parts[0] == "manylinux" and len(parts) > 2 and parts[1].isdigit() and parts[2].isdigit():
            found.append((int(parts[1]), int(parts[2])))
    return pick(found) if found else None


def _ptx_driver(wheel: SiteWheel, driver: tuple[int, int] | None) -> str:
    """What driver the wheel's PTX needs: the CUDA of the toolkit that wrote it."""
    wrote = CudaVersion.parse(wheel.compiled_with or wheel.cuda, wheel.name)
    if driver is not None and driver < (wrote.major, wrote.minor):
        return (
            f"; its PTX was written by CUDA {wrote.text} and this driver runs CUDA up to "
            f"{driver[0]}.{driver[1]}: it will not JIT until the driver supports "
            f"CUDA {wrote.text}"
        )
    return f"; its PTX needs a driver for CUDA {wrote.text} or newer"


def line_of(site: Site, wheel: SiteWheel) -> str:
    """The index to install ``wheel`` from: its CUDA line's, else its cell's."""
    tag = CudaVersion.parse(wheel.cuda, wheel.name).tag
    if tag in site.lines:
        return site.lines[tag]
    return next((c.index for c in site.cells if c.name == wheel.cell), "")


def command(site: Site, base: str, wheel: SiteWheel, version: str) -> list[str]:
    """The install command for exactly ``wheel``: its version pinned (local label and all),
    from its CUDA line's index; the installed torch satisfies its pin, so nothing else
    changes."""
    index = urllib.parse.urljoin(base, line_of(site, wheel))
    return ["pip", "install", f"--extra-index-url={index}", f"{wheel.package}=={version}"]


def _stable(wheel: SiteWheel) -> bool:
    """A wheel with no upper bound on torch (stable ABI, or no torch link): it serves every
    later torch of its CUDA, so it is preferred where both fit."""
    return wheel.pin is None or "<" not in wheel.pin


def _nearest(judged: list[Judged]) -> Judged | None:
    """The wheel that fails on the fewest counts, preferring a torch change only."""
    failing = [j for j in judged if not j.fits]
    return min(failing, key=lambda j: (len(j.reasons), j.wheel.name)) if failing else None


@dataclass
class Answer:
    package: str
    chosen: Judged | None
    command: list[str]
    judged: list[Judged]
    nearest: Judged | None
    attest: list[str] = field(default_factory=list)

    @property
    def platforms(self) -> list[str]:
        """The machines the site has this package's wheels for."""
        found = set()
        for j in self.judged:
            try:
                found.add(tags_platform(parse_wheel_name(j.wheel.name).tags))
            except InvalidWheelFilename:
                continue
        return sorted(p for p in found if p is not None)

    def as_json(self) -> dict[str, object]:
        return {
            "package": self.package,
            "platforms": self.platforms,
            "fits": self.chosen is not None,
            "wheel": self.chosen.wheel.name if self.chosen else None,
            "command": shlex.join(self.command) if self.command else None,
            "attestation": shlex.join(self.attest) if self.attest else None,
            "wheels": [j.as_json() for j in self.judged],
            "nearest": self.nearest.as_json() if self.nearest else None,
        }


def which(site: Site, base: str, here: Here, name: str | None = None) -> list[Answer]:
    """For each package of the site (or ``name``): the wheel that fits and its command."""
    packages = sorted({w.package for w in site.wheels})
    if name is not None:
        wanted = canonicalize_name(name)
        packages = [p for p in packages if canonicalize_name(p) == wanted]
        if not packages:
            known = ", ".join(sorted({w.package for w in site.wheels})) or "none"
            raise SiteUnreadable(
                f"archguard which: the site publishes no {name!r} (it publishes: {known})."
            )
    answers = []
    for package in packages:
        seen: dict[str, SiteWheel] = {}
        for w in site.wheels:
            if w.package == package:
                seen.setdefault(w.name, w)
        judged = [judge(w, here) for w in seen.values()]
        fitting = [j for j in judged if j.fits]
        # the newest version; a stable-ABI wheel (fewest pins) before a torch-specific one
        chosen = max(
            fitting,
            key=lambda j: (Version(Version(j.version).public), _stable(j.wheel), j.wheel.name),
            default=None,
        )
        argv = command(site, base, chosen.wheel, chosen.version) if chosen else []
        attest = (
            ["gh", "attestation", "verify", chosen.wheel.name, "--repo", site.repository]
            if chosen and site.repository
            else []
        )
        answers.append(
            Answer(package, chosen, argv, judged, None if chosen else _nearest(judged), attest)
        )
    return answers


def render_text(answers: list[Answer], here: Here) -> str:
    gpus = ", ".join(str(g) for g in here.gpus) or "none found"
    lines = [
        f"this machine: {here.platform or 'a machine torch ships no CUDA for'}, torch "
        f"{here.torch or 'none'}"
        + (f" (CUDA {here.torch_cuda.text})" if here.torch_cuda else "")
        + f", Python {here.python_text}, GPUs: {gpus}"
        + (f", driver CUDA {here.driver_cuda[0]}.{here.driver_cuda[1]}" if here.driver_cuda else "")
    ]
    lines += [f"note: {n}" for n in here.notes]
    for a in answers:
        lines.append("")
        if a.chosen is not None:
            lines.append(f"{a.package}: {a.chosen.wheel.name}")
            lines.append(f"  {shlex.join(a.command)}")
            if a.attest:
                lines.append(f"  provenance: {shlex.join(a.attest)}")
        elif here.platform is not None and here.platform not in a.platforms:
            built = ", ".join(a.platforms) or "no platform torch ships CUDA for"
            lines.append(
                f"{a.package}: none for {here.platform} (the site publishes it for {built} only)"
            )
        else:
            lines.append(f"{a.package}: no wheel fits this machine")
        for j in a.judged:
            if not j.fits:
                lines.append(f"  not {j.wheel.name} ({j.wheel.cell}): " + "; ".join(j.reasons))
        if a.nearest is not None:
            lines.append(
                f"  nearest: {a.nearest.wheel.name} ({a.nearest.wheel.cell}), which fits but for: "
                + "; ".join(a.nearest.reasons)
            )
    return "\n".join(lines) + "\n"
