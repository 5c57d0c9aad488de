"""``archguard verify``: what is really inside built binaries, against what was resolved.

For wheels, ``.so`` files and directories: every CUDA binary's embedded cubins and PTX (read
with a real cuobjdump, :mod:`archguard.detect.cuobjdump`) are compared with the resolution
recorded in the wheel's ``.dist-info/archguard.json``, or with an expectation given on the
command line (``--arch-list``, or ``--cuda``/``--torch``/``--torch-arches`` resolved like
``explain``). Missing and unexpected targets are listed per binary, with the coverage tiers
the binary actually gives and where each image was found; any difference exits non-zero.

A binary's images are its fatbin section's and those embedded in it as data (a package that
loads its kernels with ``cuModuleLoadData``). Device code shipped as files of its own
(``.fatbin``, ``.cubin``, ``.ptx``) is checked per folder, the folder's files together as one
binary (``pkg/{kernels.fatbin,kernels.ptx}``): a loader picks among them, and a ``.ptx`` file
alone can never hold a list's cubins.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from archguard.binaries.record import (
    RECORD_NAME,
    RecordedTargets,
    images_record,
    is_record_name,
    read_record,
)
from archguard.binaries.stubs import StubReport
from archguard.binaries.stubs import analyse as analyse_stubs
from archguard.binaries.stubs import lines as stub_lines
from archguard.core.abi import BinaryAbi, describe
from archguard.core.arch import Targets, parse_arch_list
from archguard.core.coverage import Device, Tier, coverage
from archguard.core.formats import Format
from archguard.core.toolkit import known_arches
from archguard.detect.abi import binary_abi
from archguard.detect.cuobjdump import (
    FoundImage,
    is_standalone,
    read_binary,
    standalone_label,
)
from archguard.detect.sass import demangle, read_kernels
from archguard.errors import BinaryReadError
from archguard.settings.inputs import Query, gather

VERIFY_SCHEMA = "archguard.verify/1"
ELF_MAGIC = b"\x7fELF"


@dataclass
class Expectation:
    targets: Targets
    source: str


@dataclass
class Checked:
    label: str
    expected: Expectation | None
    found: Targets | None  # None: no device code
    stubs: StubReport | None = None  # with --stubs
    abi: BinaryAbi | None = None  # what it binds to, read from its ELF
    stubs_error: str | None = None  # why its kernels could not be disassembled
    images: tuple[FoundImage, ...] = ()  # each image and where it was found

    @property
    def missing(self) -> list[str]:
        if self.expected is None or self.found is None:
            return []
        return _diff(self.expected.targets, self.found)

    @property
    def unexpected(self) -> list[str]:
        if self.expected is None or self.found is None:
            return []
        return _diff(self.found, self.expected.targets)

    @property
    def ok(self) -> bool:
        return self.found is None or (
            self.expected is not None and not self.missing and not self.unexpected
        )

    @property
    def left_dead(self) -> list[Device]:
        """Devices the expected targets would run on that the found ones leave dead."""
        if self.expected is None or self.found is None:
            return []
        want = coverage(self.expected.targets)
        got = {c.device.cc: c.tier for c in coverage(self.found)}
        return [c.device for c in want if c.tier is not Tier.DEAD and got[c.device.cc] is Tier.DEAD]


def _diff(a: Targets, b: Targets) -> list[str]:
    return [x.sm for x in sorted(a.cubins - b.cubins)] + [x.compute for x in sorted(a.ptx - b.ptx)]


@dataclass(frozen=True)
class Recorded:
    """A record's promises: one expectation per extension binary, the wheel's otherwise."""

    wheel: Expectation
    targets: RecordedTargets

    def for_binary(self, member: str) -> Expectation:
        own = self.targets.for_file(member)
        if own is None:
            return self.wheel
        name, targets = own
        return Expectation(targets, f"{self.targets.label}, extension {name}: {targets}")


def record_expectation(text: str, where: str) -> Recorded:
    """What a wheel's ``archguard.json`` promises (BinaryReadError if unreadable)."""
    recorded = read_record(text, where)
    return Recorded(Expectation(recorded.targets, recorded.label), recorded)


def _is_elf(data: bytes) -> bool:
    return data[:4] == ELF_MAGIC


def _binary_name(name: str) -> bool:
    base = PurePosixPath(name).name
    return base.endswith((".so", ".pyd")) or ".so." in base


def _iter_wheel(path: Path, tmp: Path) -> Iterator[tuple[str, Path, Expectation | None]]:
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise BinaryReadError(f"{path} is not a readable wheel: {exc}") from None
    own = Path(tempfile.mkdtemp(prefix="wheel-", dir=tmp))  # two wheels' members never meet
    with zf:
        records = [n for n in zf.namelist() if is_record_name(n)]
        expectation = (
            record_expectation(zf.read(records[0]).decode("utf-8"), f"{path.name}!{records[0]}")
            if records
            else None
        )
        standalone: dict[str, list[str]] = {}
        for index, name in enumerate(sorted(zf.namelist())):
            folder, _, base = name.rpartition("/")
            if is_standalone(base):
                standalone.setdefault(folder, []).append(base)
            if not _binary_name(name):
                continue
            data = zf.read(name)
            if not _is_elf(data):
                continue
            target = own / f"{index}-{PurePosixPath(name).name}"
            target.write_bytes(data)
            yield (
                f"{path.name}!{name}",
                target,
                expectation.for_binary(name) if expectation else None,
            )
        for index, (folder, files) in enumerate(sorted(standalone.items())):
            target = own / f"standalone-{index}"
            target.mkdir()
            for base in files:
                (target / base).write_bytes(zf.read(f"{folder}/{base}" if folder else base))
            member = standalone_label(folder, files)
            yield (
                f"{path.name}!{member}",
                target,
                expectation.for_binary(member) if expectation else None,
            )


def _dir_record(root: Path) -> Recorded | None:
    records = sorted(root.glob(f"**/*.dist-info/{RECORD_NAME}"))
    if len(records) == 1:
        return record_expectation(records[0].read_text(encoding="utf-8"), str(records[0]))
    return None


def _iter_paths(paths: list[Path], tmp: Path) -> Iterator[tuple[str, Path, Expectation | None]]:
    for path in paths:
        if not path.exists():
            raise BinaryReadError(f"{path} does not exist.")
        if path.is_dir():
            record = _dir_record(path)
            standalone: dict[Path, list[str]] = {}
            for item in sorted(path.rglob("*")):
                if item.suffix == ".whl":
                    yield from _iter_wheel(item, tmp)
                elif item.is_file() and is_standalone(item.name):
                    standalone.setdefault(item.parent, []).append(item.name)
                elif item.is_file() and _binary_name(item.name):
                    with item.open("rb") as f:
                        if _is_elf(f.read(4)):
                            member = item.relative_to(path).as_posix()
                            yield str(item), item, record.for_binary(member) if record else None
            for folder, files in sorted(standalone.items()):
                inside = folder.relative_to(path).as_posix()
                member = standalone_label("" if inside == "." else inside, files)
                label = standalone_label(str(folder), files)
                yield label, folder, record.for_binary(member) if record else None
        elif path.suffix == ".whl":
            yield from _iter_wheel(path, tmp)
        else:
            yield str(path), path, None


def given_expectation(arch_list: str | None, query: Query | None = None) -> Expectation | None:
    """An expectation from the command line: ``--arch-list``, or a resolution for ``query``
    (``--cuda``/``--torch``/``--torch-arches``/``--project``/``--policy``)."""
    if arch_list:
        entries = parse_arch_list(arch_list, "--arch-list", known=known_arches())
        return Expectation(Targets.from_entries(entries), f"--arch-list {arch_list}")
    if query is not None:
        res = gather(query).resolve().require_cubins()
        return Expectation(
            res.targets, f"resolution for {res.tag}, {res.torch.label}: {res.effective_text}"
        )
    return None


def check(
    paths: Sequence[Path],
    cuobjdump: str,
    given: Expectation | None = None,
    nvdisasm: str | None = None,
) -> list[Checked]:
    """Read every CUDA binary under ``paths`` and pair it with what it should hold."""
    with tempfile.TemporaryDirectory(prefix="archguard-verify-") as tmp:
        found = [
            (label, path, given or recorded)
            for label, path, recorded in _iter_paths(list(paths), Path(tmp))
        ]
        results = check_binaries(found, cuobjdump, nvdisasm)
        for result, (label, path, _) in zip(results, found, strict=True):
            result.abi = _abi(path, label, result.found)  # shown by verify; a build records it
        return results


def check_binaries(
    binaries: Sequence[tuple[str, Path, Expectation | None]],
    cuobjdump: str,
    nvdisasm: str | None = None,
) -> list[Checked]:
    """Read each binary with cuobjdump and pair it with what it should hold; with
    ``nvdisasm``, also classify every kernel in every image (stubs). The binaries are read
    side by side, one per core (each read is a cuobjdump process; after a build the cores
    are idle); the results keep the binaries' order."""

    def one(item: tuple[str, Path, Expectation | None]) -> Checked:
        label, path, expected = item
        embedded = read_binary(path, cuobjdump, _name(label, path))
        found = embedded.targets
        stubs, error = None, None
        if nvdisasm is not None and found is not None:
            stubs, error = _stubs(path, embedded.images, cuobjdump, nvdisasm)
        return Checked(label, expected, found, stubs, stubs_error=error, images=embedded.images)

    workers = min(len(binaries), os.cpu_count() or 1)
    if workers <= 1:
        return [one(item) for item in binaries]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, binaries))


def _name(label: str, path: Path) -> str:
    """How a binary's images name it: its member in a wheel (``pkg/_C.so``), else its label;
    a folder of standalone files by the folder (``pkg``), its files named beneath it."""
    member = label.rsplit("!", 1)[-1]
    if not path.is_dir():
        return member
    parent = PurePosixPath(member).parent.as_posix()
    return "" if parent == "." else parent


def _stubs(
    path: Path, images: Sequence[FoundImage], cuobjdump: str, nvdisasm: str
) -> tuple[StubReport | None, str | None]:
    """The kernels of a binary's fatbin section classified (``--stubs``), and why any were
    not: ``cuobjdump -sass`` reads that section only, never device code embedded as data
    or shipped as files."""
    cubins = sorted({i.arch for i in images if i.kind == "elf" and i.place == "section"})
    others = [i for i in images if i.place != "section"]
    note = (
        f"{len(others)} image(s) embedded as data or shipped as files "
        f"({', '.join(dict.fromkeys(i.where for i in others))}) are not disassembled"
        if others
        else None
    )
    if len(others) == len(images):
        return None, note
    try:
        kernels = read_kernels(path, cuobjdump, nvdisasm, cubins)
    except BinaryReadError as exc:  # its targets stand; only the disassembly failed
        return None, str(exc) + (f"; {note}" if note else "")
    mangled = sorted({k for found in kernels.values() for k in found})
    return analyse_stubs(kernels, demangle(mangled)), note


def _abi(path: Path, label: str, found: Targets | None) -> BinaryAbi | None:
    """What a CUDA binary binds to (None for others, or an ELF that cannot be read)."""
    if found is None:
        return None
    try:
        return binary_abi(path.read_bytes(), label)
    except (OSError, BinaryReadError):
        return None


def _tiers(found: Targets) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {t.value: [] for t in Tier}
    for c in coverage(found):
        out[c.tier.value].append(c.device.cc_text + (f" via {c.via}" if c.tier is Tier.JIT else ""))
    return out


@dataclass(frozen=True)
class Report:
    """The outcome of ``verify``: each binary, the problems, and the verdict."""

    results: list[Checked]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems and all(r.ok for r in self.results)


def verdict(results: list[Checked], paths: Sequence[Path]) -> Report:
    cuda_binaries = [r for r in results if r.found is not None]
    problems = []
    if not cuda_binaries:
        problems.append(
            "no binary with CUDA device code was found in " + ", ".join(str(p) for p in paths)
        )
    for r in cuda_binaries:
        if r.expected is None:
            problems.append(
                f"{r.label}: no recorded resolution to compare with (pass "
                "--arch-list, or --cuda/--torch)"
            )
    return Report(results, problems)


def _binary_json(r: Checked) -> dict[str, object]:
    return {
        "binary": r.label,
        "device_code": r.found is not None,
        "expected_from": r.expected.source if r.expected else None,
        "expected": r.expected.targets.names() if r.expected else None,
        "found": r.found.names() if r.found else None,
        "missing": r.missing,
        "unexpected": r.unexpected,
        "left_dead": [d.cc_text for d in r.left_dead],
        "ok": r.ok and (r.found is None or r.expected is not None),
        "coverage": _tiers(r.found) if r.found else None,
        "stubs": _stubs_json(r.stubs) if r.stubs is not None else None,
        "abi": _abi_json(r.abi),
        "images": images_record(r.images),
    }


def render(report: Report, fmt: Format) -> str:
    """``verify``'s output, text or json."""
    results, problems, ok = report.results, report.problems, report.ok
    cuda_binaries = [r for r in results if r.found is not None]
    if fmt == "json":
        data = {
            "schema": VERIFY_SCHEMA,
            "ok": ok,
            "problems": problems,
            "binaries": [_binary_json(r) for r in results],
        }
        return json.dumps(data, indent=2) + "\n"
    out = ["archguard verify"]
    for r in results:
        out += ["", r.label, *_binary_lines(r)]
    out.append("")
    for p in problems:
        out.append(f"problem: {p}")
    checked = len(cuda_binaries)
    bad = sum(1 for r in cuda_binaries if not r.ok or r.expected is None)
    out.append(
        f"result: {'OK' if ok else 'FAILED'} ({checked} CUDA binar"
        f"{'y' if checked == 1 else 'ies'} checked, {bad} with differences)"
    )
    return "\n".join(out) + "\n"


def _binary_lines(r: Checked) -> list[str]:
    """One binary's part of ``verify``'s text, beneath its label."""
    if r.found is None:
        return ["  no CUDA device code (not a CUDA binary)"]
    out = []
    if r.expected is not None:
        out.append(f"  expected   {r.expected.targets}  ({r.expected.source})")
    out.append(f"  found      {r.found}")
    for where, names in _places(r.images).items():
        out.append(f"  from       {where}: {' '.join(names)}")
    if r.abi is not None:
        out.append(f"  binds to   {describe(r.abi)}")
    if r.missing:
        out.append(f"  MISSING    {' '.join(r.missing)}")
    if r.unexpected:
        out.append(f"  UNEXPECTED {' '.join(r.unexpected)}")
    if r.left_dead:
        out.append(f"  LEFT DEAD  {', '.join(str(d) for d in r.left_dead)}")
    if r.expected is not None and r.ok:
        out.append("  OK         exactly the expected cubins and PTX")
    for tier, items in _tiers(r.found).items():
        out.append(f"  {tier:<10} {', '.join(items) or 'none'}")
    if r.stubs_error and r.stubs is not None:  # a partial read: said where its stubs are
        out.append(f"  stubs      {r.stubs_error}")
    if r.stubs is not None:
        out += stub_lines(r.stubs)
    return out


def _places(images: Sequence[FoundImage]) -> dict[str, list[str]]:
    """Where the images were found -> their names there, in the order found."""
    out: dict[str, list[str]] = {}
    for image in images:
        names = out.setdefault(image.where, [])
        if image.name not in names:
            names.append(image.name)
    return out


def _abi_json(abi: BinaryAbi | None) -> dict[str, object] | None:
    if abi is None:
        return None
    return {
        "kind": abi.kind,
        "torch_symbols": len(abi.torch_symbols),
        "python_api": abi.python_api,
        "python_floor": abi.python_floor,
        "cuda_runtime": abi.cuda_runtime,
        "glibc": abi.glibc,
        "glibcxx": abi.glibcxx,
    }


def _stubs_json(report: StubReport) -> dict[str, object]:
    return {
        "kernels": [
            {"kernel": k.name, "images": dict(k.kinds)}
            for k in report.kernels
            if k.mixed or k.stub_everywhere
        ],
        "findings": [
            {
                "kernel": f.kernel,
                "device": f.device.cc_text,
                "image": f.image,
                "kind": f.kind,
                "real_in": list(f.real_in),
                "fix": str(f.fix),
            }
            for f in report.findings
        ],
    }
