"""``python -m archguard doctor``: on a user's machine, for each GPU and each installed
distribution with CUDA binaries, which image the GPU loads (a cubin: native; PTX only: a JIT
compile at first load, lost on every driver upgrade; nothing: "no kernel image is available
for execution on the device", at the first launch because of lazy loading), the kernels that
are stubs in that image (from the wheel's record), and whether the installed torch itself
runs there.

What each binary holds comes from the wheel's ``archguard.json`` where it has one, else from
its ``.so`` files read with cuobjdump where one is found, else the binary is named as
unread. The runtime's own distributions (torch, triton, ``nvidia-*``, ``cuda-*``) are not
read: torch is judged from the bundled torch table. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.version import InvalidVersion, Version

from archguard.binaries.record import RECORD_NAME, LintHazard, RecordedTargets, Stubs, read_record
from archguard.core.abi import BinaryAbi
from archguard.core.arch import Targets
from archguard.core.coverage import Device, Tier, device_coverage
from archguard.core.cuda import CudaVersion
from archguard.core.kinds import REAL
from archguard.core.platform import DEFAULT_PLATFORM, host_platform
from archguard.core.torchbuild import bundled_torch
from archguard.detect.cuobjdump import read_binary
from archguard.detect.torchlibs import parse_version_py
from archguard.errors import ArchguardError, BinaryReadError
from archguard.user.importable import ImportCheck
from archguard.user.importable import lines as import_lines

DOCTOR_SCHEMA = "archguard.doctor/1"
_RUNTIME = ("torch", "triton", "pytorch-triton")
_RUNTIME_PREFIXES = ("nvidia-", "cuda-")
# the word doctor prints and records for each tier; a binary not read has no tier: "unread"
TIER_WORDS = {Tier.NATIVE: "native", Tier.JIT: "jit-only", Tier.DEAD: "nothing"}
UNREAD = "unread"


@dataclass
class Binary:
    file: str  # inside the distribution
    targets: Targets | None  # None: not read
    source: str  # "record", "cuobjdump", or why it is unread
    stubs: Stubs = field(default_factory=dict)  # kernel -> image -> kind
    built_with: tuple[int, int] | None = None  # the CUDA toolkit that compiled it
    hazards: tuple[LintHazard, ...] = ()  # the build's lint, by device and image
    path: Path | None = None  # where it is installed (read for what it binds to)
    abi: BinaryAbi | None = None  # what it binds to, as its record holds it
    built_for: str | None = None  # the torch its record names: "2.13.0+cu130"


@dataclass
class Package:
    name: str
    version: str
    binaries: list[Binary]


@dataclass(frozen=True)
class Finding:
    gpu: Device
    package: str
    binary: str
    tier: Tier | None  # None: the binary was not read
    via: str | None
    stubs: tuple[str, ...] = ()  # "kernel (trap)" in the image this GPU loads
    jit_note: str = ""
    # where the build's lint found guarded code this GPU's image compiles out, used where the
    # kernels were not disassembled (the record has no stub classification)
    lint: tuple[str, ...] = ()

    @property
    def stubs_from(self) -> str | None:
        """What the stub line rests on: the disassembly, the build's lint, or nothing."""
        return "disassembly" if self.stubs else "lint" if self.lint else None

    @property
    def word(self) -> str:
        """The tier as doctor prints and records it: native, jit-only, nothing, unread."""
        return UNREAD if self.tier is None else TIER_WORDS[self.tier]


def _runtime(name: str) -> bool:
    low = name.lower()
    return low in _RUNTIME or low.startswith(_RUNTIME_PREFIXES)


def _shared_object(name: str) -> bool:
    return name.endswith(".so") or ".so." in name


def _record(dist: metadata.Distribution) -> RecordedTargets | None:
    """The distribution's archguard record (None: none, or not one this archguard reads)."""
    try:
        text = dist.read_text(RECORD_NAME)
    except OSError:
        return None
    if not text:
        return None
    try:
        return read_record(text, f"{dist.metadata['Name']}'s {RECORD_NAME}")
    except BinaryReadError:
        return None


def _version_pair(text: str | None) -> tuple[int, int] | None:
    try:
        major, minor = str(text).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def _from_record(record: RecordedTargets, file: str) -> Binary | None:
    own = record.file_for(file)
    if own is None:
        return None
    _, targets = record.extensions[own]
    return Binary(
        file,
        targets,
        "record",
        record.stubs.get(own, {}),
        _version_pair(record.cuda),
        record.hazards.get(own, ()),
        abi=record.abi.get(own),
        built_for=record.torch,
    )


def _binary(
    dist: metadata.Distribution,
    file: metadata.PackagePath,
    record: RecordedTargets | None,
    cuobjdump: str | None,
) -> Binary | None:
    """What one installed .so holds (None: no device code)."""

    member = str(file).replace("\\", "/")
    binary = _from_record(record, member) if record else None
    if binary is not None:
        binary.path = Path(str(dist.locate_file(file)))
        return binary
    if cuobjdump is None:
        return Binary(member, None, "not read: no cuobjdump (pip install nvidia-cuda-cuobjdump)")
    try:
        targets = read_binary(Path(str(dist.locate_file(file))), cuobjdump).targets
    except ArchguardError as exc:
        return Binary(member, None, f"not read: {exc}")
    if targets is None:
        return None
    return Binary(member, targets, "cuobjdump", path=Path(str(dist.locate_file(file))))


def installed(paths: Sequence[str] | None, cuobjdump: str | None) -> list[Package]:
    """Every distribution (on ``paths``, default: this interpreter's) holding CUDA
    binaries, with what each binary holds."""
    dists = metadata.distributions(path=list(paths)) if paths else metadata.distributions()
    out: dict[str, Package] = {}
    for dist in dists:
        name = dist.metadata["Name"] or "?"
        if _runtime(name) or name in out:
            continue
        files = [f for f in (dist.files or []) if _shared_object(f.name)]
        if not files:
            continue
        record = _record(dist)
        binaries = [
            b for b in (_binary(dist, f, record, cuobjdump) for f in files) if b is not None
        ]
        if binaries:
            out[name] = Package(name, dist.version, binaries)
    return sorted(out.values(), key=lambda p: p.name.lower())


def _torch_distribution(paths: Sequence[str]) -> metadata.Distribution | None:
    """The installed torch's distribution (on ``paths``, default: this interpreter's)."""
    found = (
        metadata.distributions(name="torch", path=list(paths))
        if paths
        else metadata.distributions(name="torch")
    )
    return next(iter(found), None)


@dataclass(frozen=True)
class InstalledTorch:
    """The installed torch as its files say it: its distribution's version (``2.13.0``,
    what an index and a constraint name), its ``torch.__version__`` and its CUDA (None: a
    CPU build), or why its torch/version.py was not read."""

    distribution: str
    version: str | None = None
    cuda: CudaVersion | None = None
    unread: str | None = None


def read_installed_torch(paths: Sequence[str] = ()) -> InstalledTorch | None:
    """The installed torch (None: none). Its torch/version.py is read as text by the one
    parser of it (:func:`archguard.detect.torchlibs.parse_version_py`): torch is not
    imported."""
    dist = _torch_distribution(paths)
    if dist is None:
        return None
    where = Path(str(dist.locate_file("torch/version.py")))
    try:
        version, cuda = parse_version_py(where.read_text(encoding="utf-8"), str(where))
    except (OSError, ArchguardError) as exc:
        return InstalledTorch(dist.version, unread=str(exc))
    return InstalledTorch(dist.version, version, cuda)


def installed_torch_targets(paths: Sequence[str]) -> tuple[str, Targets | None] | None:
    """The installed torch's version and, from the bundled table, its targets."""
    found = read_installed_torch(paths)
    if found is None:
        return None
    version, cuda = found.version, found.cuda
    if version is None:
        return f"{found.distribution} (no torch/version.py)", None
    if cuda is None:
        return f"{version} (no CUDA)", None
    label = f"{version} (CUDA {cuda.text})"
    try:
        base = Version(Version(version).base_version)
        platform = host_platform() or DEFAULT_PLATFORM  # the installed torch is this machine's
        return label, bundled_torch((cuda.major, cuda.minor), base, platform).targets
    except (InvalidVersion, ArchguardError):
        return label, None


def torch_root(paths: Sequence[str]) -> Path | None:
    """The installed torch's package directory (None: no torch)."""
    dist = _torch_distribution(paths)
    if dist is None:
        return None
    root = Path(str(dist.locate_file("torch")))
    return root if root.is_dir() else None


def diagnose(
    gpus: Iterable[Device], packages: Iterable[Package], driver_cuda: tuple[int, int] | None
) -> list[Finding]:
    out = []
    packages = list(packages)
    for gpu in gpus:
        for package in packages:
            for binary in package.binaries:
                out.append(_finding(gpu, package, binary, driver_cuda))
    return out


def _finding(
    gpu: Device, package: Package, binary: Binary, driver_cuda: tuple[int, int] | None
) -> Finding:
    if binary.targets is None:
        return Finding(gpu, package.name, binary.file, None, None)
    cov = device_coverage(binary.targets, gpu)
    if cov.tier is Tier.DEAD:
        return Finding(gpu, package.name, binary.file, Tier.DEAD, None)
    image = cov.via or ""
    stubs = tuple(
        f"{kernel} ({images[image]})"
        for kernel, images in sorted(binary.stubs.items())
        if images.get(image, REAL) != REAL
    )
    lint: tuple[str, ...] = ()
    if not binary.stubs:  # not disassembled: the build's lint says what this image lacks
        lint = tuple(
            f"{h.where} ({h.kind} in {h.image}; fix: add {h.fix})"
            for h in binary.hazards
            if h.device == gpu.cc_text and h.image == image
        )
    note = ""
    if cov.tier is Tier.JIT:
        note = "JIT-compiled by the driver at first load (minutes; redone after a driver upgrade)"
        if binary.built_with and driver_cuda and driver_cuda < binary.built_with:
            note += (
                f"; this driver runs CUDA {driver_cuda[0]}.{driver_cuda[1]}, older than the "
                f"CUDA {binary.built_with[0]}.{binary.built_with[1]} that wrote the PTX: it "
                "cannot JIT it"
            )
    return Finding(gpu, package.name, binary.file, cov.tier, cov.via, stubs, note, lint)


def torch_line(gpu: Device, torch: tuple[str, Targets | None]) -> str:
    version, targets = torch
    if targets is None:
        return (
            f"torch {version}: not a CUDA build in the bundled torch table; whether it runs "
            f"on {gpu.cc_text} is not known"
        )
    cov = device_coverage(targets, gpu)
    if cov.tier is Tier.DEAD:
        return f"torch {version} itself has no image for {gpu}: nothing built on it runs there"
    return f"torch {version} runs on {gpu.cc_text} ({cov.via})"


@dataclass(frozen=True)
class Diagnosis:
    """Everything ``doctor`` found: the GPUs (and where each came from), the driver, the
    packages, the findings per GPU and binary, the installed torch, notes."""

    gpus: Sequence[tuple[Device, str]]
    driver_cuda: tuple[int, int] | None
    packages: Sequence[Package]
    findings: Sequence[Finding]
    torch: tuple[str, Targets | None] | None
    notes: Sequence[str]
    imports: Sequence[ImportCheck] = ()

    def as_json(self) -> dict[str, object]:
        return as_json(self)

    def render_text(self) -> str:
        return render_text(self)


def _parts(
    d: Diagnosis,
) -> tuple[
    Sequence[tuple[Device, str]],
    tuple[int, int] | None,
    Sequence[Package],
    Sequence[Finding],
    tuple[str, Targets | None] | None,
    Sequence[str],
]:
    return d.gpus, d.driver_cuda, d.packages, d.findings, d.torch, d.notes


def as_json(d: Diagnosis) -> dict[str, object]:
    gpus, driver_cuda, packages, findings, torch, notes = _parts(d)
    return {
        "schema": DOCTOR_SCHEMA,
        "gpus": [{"cc": g.cc_text, "name": g.name, "from": origin} for g, origin in gpus],
        "driver_cuda": f"{driver_cuda[0]}.{driver_cuda[1]}" if driver_cuda else None,
        "torch": None
        if torch is None
        else {"version": torch[0], "targets": torch[1].names() if torch[1] else None},
        "packages": [
            {
                "name": p.name,
                "version": p.version,
                "binaries": [
                    {
                        "file": b.file,
                        "source": b.source,
                        "targets": b.targets.names() if b.targets else None,
                    }
                    for b in p.binaries
                ],
            }
            for p in packages
        ],
        "findings": [
            {
                "gpu": f.gpu.cc_text,
                "package": f.package,
                "binary": f.binary,
                "tier": f.word,
                "via": f.via,
                "stubs": list(f.stubs),
                "lint": list(f.lint),
                "stubs_from": f.stubs_from,
                "note": f.jit_note,
            }
            for f in findings
        ],
        "imports": [
            {
                "package": c.package,
                "binary": c.binary,
                "kind": c.kind,
                "built_for": c.built_for,
                "imports": not c.fails,
                "missing": list(c.missing),
                "problem": c.problem or None,
            }
            for c in d.imports
        ],
        "notes": list(notes),
        "ok": not failed(findings) and not any(c.fails for c in d.imports),
    }


def failed(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.tier is Tier.DEAD]


def render_text(d: Diagnosis) -> str:
    gpus, driver_cuda, packages, findings, torch, notes = _parts(d)
    lines = ["archguard doctor", ""]
    shown = ", ".join(f"{g} (from {origin})" for g, origin in gpus) or "none found"
    lines.append(f"GPUs: {shown}")
    driver = f"{driver_cuda[0]}.{driver_cuda[1]}" if driver_cuda else "unknown"
    lines.append(f"driver: runs CUDA {driver}")
    lines += [f"note: {n}" for n in notes]
    for gpu, _ in gpus:
        lines += ["", f"{gpu}:"]
        if torch is not None:
            lines.append(f"  {torch_line(gpu, torch)}")
        for f in (f for f in findings if f.gpu == gpu):
            where = f"  {f.package}: {f.binary}"
            if f.tier is Tier.NATIVE:
                lines.append(f"{where}: native ({f.via} cubin)")
            elif f.tier is Tier.JIT:
                lines.append(f"{where}: JIT-only via {f.via}: {f.jit_note}")
            elif f.tier is Tier.DEAD:
                lines.append(
                    f"{where}: NOTHING for {gpu.cc_text}: 'no kernel image is available for "
                    "execution on the device' at its first kernel launch"
                )
            else:
                binary = next(
                    b
                    for p in packages
                    if p.name == f.package
                    for b in p.binaries
                    if b.file == f.binary
                )
                lines.append(f"{where}: {binary.source}")
            if f.stubs:
                lines.append(
                    f"    stubs in {f.via}, the image {gpu.cc_text} loads: {', '.join(f.stubs)}"
                )
            if f.lint:
                lines.append(
                    f"    guarded code compiled out of {f.via}, the image {gpu.cc_text} loads "
                    f"(from the build's lint; its kernels were not disassembled): "
                    f"{', '.join(f.lint)}"
                )
    if d.imports and torch is not None:
        lines += ["", *import_lines(d.imports, torch[0])]
    bad = failed(findings)
    cannot = sorted({c.package for c in d.imports if c.fails})
    lines += [
        "",
        f"result: {'NO IMAGE' if bad else 'WILL NOT IMPORT' if cannot else 'OK'} ({len(gpus)} GPU"
        f"{'s' if len(gpus) != 1 else ''}, {len(packages)} package"
        f"{'s' if len(packages) != 1 else ''} with CUDA binaries"
        + (
            f"; no image for {', '.join(sorted({f'{f.package} on {f.gpu.cc_text}' for f in bad}))}"
            if bad
            else ""
        )
        + (f"; will not import: {', '.join(cannot)}" if cannot else "")
        + ")",
    ]
    return "\n".join(lines) + "\n"
