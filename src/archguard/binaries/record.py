"""The resolution record: what a wheel carries in ``.dist-info/archguard.json``.

This module owns the record's file name, its schema, writing it and reading it back.
``explain --format json`` prints the same record; ``verify`` reads the targets it promises.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from archguard import __version__
from archguard.core.abi import BinaryAbi
from archguard.core.arch import Arch, Targets, parse_targets
from archguard.core.coverage import runs_on
from archguard.core.kinds import STUB_KINDS, StubKind
from archguard.core.resolve import Resolution
from archguard.core.toolkit import known_arches
from archguard.detect.fetch import cache_root
from archguard.errors import BinaryReadError
from archguard.nvcc.flags import gencode_flags
from archguard.nvcc.plan import ExtensionPlan

if TYPE_CHECKING:  # the reader (and pyelftools) only where a binary is read
    from archguard.detect.cuobjdump import FoundImage

RECORD_NAME = "archguard.json"
# /2: each extension of a built wheel records its kernels' stub classification per image
# ("stubs": {kernel: {image: kind}}, from the in-build check), which `doctor` reads. /1
# records (no stubs) are still read; a reader that knows only /1 rejects /2 by its schema.
RESOLUTION_SCHEMA = "archguard.resolution/2"
READABLE_SCHEMAS = ("archguard.resolution/1", RESOLUTION_SCHEMA)
# how archguard came into a build: the package opted in, ARCHGUARD_ENABLE (farm mode), or
# `archguard wheel` for a backend its hook never sees (the front-end wrote the record)
Activation = Literal["package", "environment", "frontend"]


def coverage_record(res: Resolution) -> list[dict[str, object]]:
    return [
        {
            "cc": c.device.cc_text,
            "device": c.device.name,
            "tier": c.tier.value,
            "via": c.via,
            "torch_runs": runs_on(res.torch.targets, c.device.cc),
        }
        for c in res.coverage()
    ]


def targets_record(targets: Targets) -> dict[str, list[str]]:
    return {
        "cubins": [a.sm for a in sorted(targets.cubins)],
        "ptx": [a.compute for a in sorted(targets.ptx)],
    }


def resolution_record(res: Resolution, why: Sequence[Arch] = ()) -> dict[str, object]:
    """The machine-readable resolution (explain --format json, and the wheel's record)."""
    torch = res.torch
    record: dict[str, object] = {
        "schema": RESOLUTION_SCHEMA,
        "archguard": __version__,
        # version: the toolkit that compiled (and so made the PTX: a driver for that CUDA
        # or newer JITs it); tag: the row the rule chose, which the label and line follow
        "cuda": {
            "version": res.toolkit.text,
            "tag": res.tag,
            "rule": res.row.rule,
            "source": res.toolkit.source,
        },
        # the machine the build's torch (so its wheel) is for: x86_64 or aarch64
        "platform": torch.platform,
        "torch": {
            "version": str(torch.version) if torch.version is not None else None,
            "cuda": torch.cuda.text if torch.cuda else None,
            "targets": torch.targets.names(),
            "source": torch.source,
        },
        "policy": {"source": res.policy.source, "sha256": res.policy.digest or None},
        "request": {
            "origin": res.request.origin,
            "reason": res.request.reason,
            "list": res.requested_text,
        },
        "decisions": [
            {
                "arch": str(d.arch),
                "step": d.step.value,
                "outcome": d.outcome.value,
                "ptx": d.ptx,
                "reason": d.reason,
            }
            for d in res.decisions
        ],
        "effective": res.effective_text,
        "entries": [str(e) for e in res.effective],
        "targets": targets_record(res.targets),
        "gencode": gencode_flags(res.effective),
        "coverage": coverage_record(res),
        "notes": list(res.notes),
    }
    if why:
        record["why"] = {
            str(a): {
                "fate": res.fate(a),
                "decisions": [
                    {
                        "step": d.step.value,
                        "outcome": d.outcome.value,
                        "ptx": d.ptx,
                        "reason": d.reason,
                    }
                    for d in res.why(a)
                ],
            }
            for a in why
        }
    return record


def explain_record(
    res: Resolution, why: Sequence[Arch], warnings: Sequence[str], build_time: Sequence[str]
) -> dict[str, object]:
    """``explain --format json``: the resolution record, plus what this environment warned
    about and what is known before a build about per-extension targets."""
    return {
        **resolution_record(res, why),
        "warnings": list(warnings),
        "build_time": list(build_time),
    }


@dataclass
class BuildFacts:
    """What a build records beside its resolution: the record's ``build`` part."""

    torch_arch_list: str | None
    cudaarchs: str
    inputs: dict[str, str]  # input -> where it came from (the log's first lines)
    activation: Activation
    replaced: dict[str, str] = field(default_factory=dict)  # variable -> pre-set value
    extensions: dict[str, dict[str, object]] = field(default_factory=dict)
    verified: list[dict[str, object]] = field(default_factory=list)
    parallel: dict[str, object] = field(default_factory=dict)
    linted: dict[str, dict[str, object]] = field(default_factory=dict)
    toolkit_completion: dict[str, object] = field(default_factory=dict)
    # the compile cache chosen: said in the build log, never in the wheel (its bytes must not
    # depend on it, issue 57)
    compiler_cache: dict[str, object] = field(default_factory=dict)
    reproducible: dict[str, object] = field(default_factory=dict)  # flags added, the verdict
    # each extension's targets, as planned (what its binary must hold), by name
    targets: dict[str, Targets] = field(default_factory=dict)

    def add_extension(self, name: str, record: dict[str, object], targets: Targets) -> None:
        self.extensions[name] = record
        self.targets[name] = targets


def extension_record(plan: ExtensionPlan, file: str) -> dict[str, object]:
    """One extension of the build: its targets, where each came from, its rules."""
    return {
        "name": plan.name,
        "file": file,
        "targets": targets_record(plan.targets),
        "origins": plan.origins,
        "kept_arch_specific": {a.sm: (b.sm if b else None) for a, b in sorted(plan.kept.items())},
        **plan.per_key,
        "intent": plan.intent.record(),
        "hard_coded": targets_record(plan.hard),
        "added": plan.added,
        "left_out": plan.left_out,
        "proven_errors": plan.proven,
        "gencode": plan.gencode,
    }


def unseen_extension_record(res: Resolution, name: str, file: str) -> dict[str, object]:
    """An extension whose nvcc line archguard cannot see (a CMake step): expected to hold
    the effective list, which it got through TORCH_CUDA_ARCH_LIST/CUDAARCHS."""
    return {
        "name": name,
        "file": file,
        "targets": targets_record(res.targets),
        "origins": {
            n: f"the effective list ({res.request.origin}), through the environment"
            for n in res.targets.names()
        },
        "nvcc_line_seen": False,
    }


def images_record(images: Sequence[FoundImage]) -> list[dict[str, str]]:
    """Where each image of a binary was found, as a record holds it (an extension's or a
    read-back's ``images``; ``verify --format json`` prints the same): its name, its place
    (``section``, ``embedded``, ``standalone``) and where, in words."""
    return [{"image": i.name, "place": i.place, "where": i.where} for i in images]


def wheel_record(res: Resolution, facts: BuildFacts) -> dict[str, object]:
    """What a built wheel carries: the resolution record and its ``build`` part."""
    record = resolution_record(res)
    record["build"] = {
        "activation": facts.activation,
        "inputs": facts.inputs,
        "torch_cuda_arch_list": facts.torch_arch_list,
        "replaced_torch_cuda_arch_list": facts.replaced.get("TORCH_CUDA_ARCH_LIST"),
        "cudaarchs": facts.cudaarchs,
        "replaced_cudaarchs": facts.replaced.get("CUDAARCHS"),
        "extensions": list(facts.extensions.values()),
        "parallel": facts.parallel,
        "lint": facts.linted,
        "toolkit_completion": facts.toolkit_completion,
        "reproducible": facts.reproducible,
        "verified": facts.verified,
    }
    return record


def write_record(dist_info: Path, record: dict[str, object]) -> Path:
    """Write ``record`` as ``dist_info/archguard.json``; return the path."""
    path = dist_info / RECORD_NAME
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def is_record_name(name: str) -> bool:
    """Is this (POSIX) path inside a wheel or tree an archguard record?"""
    parts = name.rsplit("/", 2)
    return len(parts) >= 2 and parts[-1] == RECORD_NAME and parts[-2].endswith(".dist-info")


# kernel -> image -> kind: one extension's stub classification, as its record holds it
Stubs = dict[str, dict[str, StubKind]]


@dataclass(frozen=True)
class LintHazard:
    """One stub hazard the build's lint recorded: the guarded region, the device, the image
    it loads (``sm_86``, ``compute_90``), what that image has there, and the target to add."""

    file: str
    line: int
    device: str  # "8.9"
    image: str
    kind: str
    fix: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class RecordedTargets:
    """What a record promises: the wheel's targets and a label naming the record and its
    list, per extension (by its file inside the wheel) that extension's own targets and its
    kernels' stub kinds, and the CUDA version that compiled it."""

    targets: Targets
    label: str
    extensions: dict[str, tuple[str, Targets]] = field(default_factory=dict)  # file -> name
    stubs: dict[str, Stubs] = field(default_factory=dict)  # file -> its kernels' kinds
    cuda: str | None = None  # "13.0"
    hazards: dict[str, tuple[LintHazard, ...]] = field(default_factory=dict)  # file -> lint's
    abi: dict[str, BinaryAbi] = field(default_factory=dict)  # file -> what it binds to
    torch: str | None = None  # the torch version it was built against: "2.13.0+cu130"
    line: str | None = None  # the row it was resolved under, "cu130": its label's and line's

    @property
    def line_cuda(self) -> str | None:
        """The CUDA its label and line name: the row's (the torch build's index), else the
        toolkit's for a record written before the row rule."""
        return self.line or self.cuda

    def file_for(self, member: str) -> str | None:
        """The recorded file of the extension whose binary ``member`` is (a path in a wheel
        or a tree)."""
        for file in self.extensions:
            if member == file or member.endswith("/" + file):
                return file
        return None

    def for_file(self, member: str) -> tuple[str, Targets] | None:
        """The extension whose binary ``member`` is (a path in a wheel or a tree)."""
        file = self.file_for(member)
        return None if file is None else self.extensions[file]


def targets_from_record(value: object, where: str) -> Targets:
    """``{"cubins": [...], "ptx": [...]}`` back to Targets (ValueError if malformed)."""
    if not isinstance(value, dict):
        raise ValueError("targets must be an object with cubins and ptx")
    names = list(value["cubins"]) + list(value["ptx"])
    if not all(isinstance(n, str) for n in names):
        raise ValueError("targets must be sm_/compute_ names")
    if not names:
        return Targets(frozenset(), frozenset())
    return parse_targets(names, where, known=known_arches())


def _stubs(value: object) -> Stubs:
    """An extension's ``stubs`` (ValueError if malformed)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ValueError("stubs must map each kernel to {image: kind}")
    out: Stubs = {}
    for kernel, images in value.items():
        out[str(kernel)] = {}
        for image, kind in images.items():
            if kind not in STUB_KINDS:
                raise ValueError(f"stub kind {kind!r} is not one of {', '.join(STUB_KINDS)}")
            out[str(kernel)][str(image)] = kind
    return out


def abi_record(binary: BinaryAbi) -> dict[str, object]:
    """What an extension binds to, as its record holds it (``build.extensions[].abi``)."""
    return {
        "kind": binary.kind,
        "torch_symbols": list(binary.torch_symbols),
        "target_version": binary.target_version,
        "python_api": binary.python_api,
        "python_floor": binary.python_floor,
        "python_note": binary.python_note,
        "cuda_runtime": binary.cuda_runtime,
        "needed": list(binary.needed),
        "glibc": binary.glibc,
        "glibcxx": binary.glibcxx,
        "platform": binary.platform,
    }


def abi_from_record(value: dict[str, object], file: str) -> BinaryAbi:
    """An extension's recorded ``abi`` back (ValueError if malformed)."""
    symbols, needed = value.get("torch_symbols"), value.get("needed")
    if not isinstance(symbols, list) or not isinstance(needed, list):
        raise ValueError("abi needs torch_symbols and needed lists")
    api = value.get("python_api")
    if api not in ("limited", "full", "none", "unknown"):
        raise ValueError(f"abi python_api {api!r} is not limited, full, none or unknown")

    def text(key: str) -> str | None:
        item = value.get(key)
        return None if item is None else str(item)

    return BinaryAbi(
        file,
        tuple(str(s) for s in symbols),
        tuple(str(n) for n in needed),
        api,
        text("python_floor"),
        text("python_note") or "",
        text("glibc"),
        text("glibcxx"),
        text("target_version"),
        text("platform"),
    )


def _hazards(value: object) -> tuple[LintHazard, ...]:
    """An extension's lint part's ``hazards`` (ValueError if malformed; none in records
    written before they were recorded)."""
    if not isinstance(value, dict) or value.get("hazards") is None:
        return ()
    items = value["hazards"]
    if not isinstance(items, list) or not all(isinstance(h, dict) for h in items):
        raise ValueError("lint hazards must be a list of objects")
    return tuple(
        LintHazard(
            str(h["file"]),
            int(h["line"]),
            str(h["device"]),
            str(h["image"]),
            str(h["kind"]),
            str(h["fix"]),
        )
        for h in items
    )


def parse_record(text: str, where: str) -> dict[str, object]:
    """A record's data, its schema checked (:class:`BinaryReadError` if it is not JSON or not
    a record this archguard reads)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BinaryReadError(f"{where} is not a readable archguard record ({exc}).") from None
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
        raise BinaryReadError(
            f"{where} is not a readable archguard record "
            f"(not an {' or '.join(READABLE_SCHEMAS)} record)."
        )
    return data


def read_record(text: str, where: str) -> RecordedTargets:
    """What a record promises (:class:`BinaryReadError` if it is not a record)."""
    return recorded_targets(parse_record(text, where), where)


def recorded_targets(data: dict[str, object], where: str) -> RecordedTargets:
    """A record's data (as :func:`parse_record` gives it) as its typed value."""
    try:
        targets = targets_from_record(data["targets"], where)
        extensions: dict[str, tuple[str, Targets]] = {}
        stubs: dict[str, Stubs] = {}
        hazards: dict[str, tuple[LintHazard, ...]] = {}
        abi: dict[str, BinaryAbi] = {}
        build = data.get("build")
        linted = build.get("lint", {}) if isinstance(build, dict) else {}
        for ext in build.get("extensions", []) if isinstance(build, dict) else []:
            if isinstance(ext, dict) and ext.get("file") and "targets" in ext:
                name, file = str(ext.get("name")), str(ext["file"])
                extensions[file] = (
                    name,
                    targets_from_record(ext["targets"], f"{where} extension {name}"),
                )
                stubs[file] = _stubs(ext.get("stubs"))
                hazards[file] = _hazards(linted.get(name) if isinstance(linted, dict) else None)
                if isinstance(ext.get("abi"), dict):
                    abi[file] = abi_from_record(ext["abi"], file)
        raw_cuda, raw_torch = data.get("cuda"), data.get("torch")
        cuda: dict[str, object] = raw_cuda if isinstance(raw_cuda, dict) else {}
        torch: dict[str, object] = raw_torch if isinstance(raw_torch, dict) else {}
        label = (
            f"{where} ({data.get('effective')}; {cuda.get('tag')}, torch {torch.get('version')})"
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BinaryReadError(f"{where} is not a readable archguard record ({exc}).") from None
    version = str(cuda["version"]) if cuda.get("version") else None
    built_with = str(torch["version"]) if torch.get("version") else None
    line = str(cuda["tag"]) if cuda.get("tag") else None
    return RecordedTargets(
        targets, label, extensions, stubs, version, hazards, abi, built_with, line
    )


def wheel_record_data(wheel: zipfile.ZipFile, where: str) -> tuple[dict[str, object], str] | None:
    """The record inside an open wheel as its data, and where it is (``WHEEL!member``); None
    when it has none; :class:`BinaryReadError` if it is unreadable."""
    names = [n for n in wheel.namelist() if is_record_name(n)]
    if not names:
        return None
    try:
        text = wheel.read(names[0]).decode("utf-8")
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise BinaryReadError(f"{where}!{names[0]} could not be read ({exc}).") from None
    return parse_record(text, f"{where}!{names[0]}"), f"{where}!{names[0]}"


def read_wheel_record(wheel: zipfile.ZipFile, where: str) -> RecordedTargets | None:
    """The record inside an open wheel (None when it has none; :class:`BinaryReadError` if
    it is unreadable)."""
    found = wheel_record_data(wheel, where)
    return None if found is None else recorded_targets(*found)


# an assembled toolkit root (:func:`archguard.detect.cudalibs.assemble_root`): its digest
# names the files it links, which lie in a cell's environment, so it differs from site to site
_ASSEMBLED_ROOT = re.compile(r"/[^\s'\",;()]*/cuda-root/cuda-(\d+)-[0-9a-f]{16}")
CACHE = "{archguard-cache}/"  # archguard's cache (detect.fetch.cache_root), wherever it is
ASSEMBLED = f"{CACHE}cuda-root/cuda-"


def path_free(value: Any, tree: str | Path) -> Any:
    """``value`` (a record, or a part of one) as a record is written: the tree built said
    relative to itself (``./...``) and an assembled toolkit root by its major alone
    (``{archguard-cache}/cuda-root/cuda-13``): the same inputs built from two checkouts, or
    into two sites, record the same bytes."""
    prefix = str(Path(tree).resolve())
    # the tree itself, never a longer path that starts with its text (/a/b, not /a/bc)
    pattern = re.compile(re.escape(prefix) + r"(?=/|$|[^\w.-])") if prefix != "/" else None
    root = str(cache_root())
    # the cache as a whole path: /a/cache/x, never /b/a/cache/x nor a URL's //a/cache
    cache = (root, re.compile(r"(?<![\w./-])" + re.escape(root) + "/")) if root != "/" else None
    return _path_free(value, prefix, pattern, cache)


def _path_free(
    value: Any,
    prefix: str,
    pattern: re.Pattern[str] | None,
    cache: tuple[str, re.Pattern[str]] | None,
) -> Any:
    if isinstance(value, str):
        if "/cuda-root/cuda-" in value:
            value = _ASSEMBLED_ROOT.sub(lambda m: ASSEMBLED + m.group(1), value)
        if pattern is not None and prefix in value:  # the tree first: it may be in the cache
            value = pattern.sub(".", value)
        if cache is not None and cache[0] in value:  # a farm package's config, by content
            value = cache[1].sub(lambda _: CACHE, value)
        return value
    if isinstance(value, list):
        return [_path_free(v, prefix, pattern, cache) for v in value]
    if isinstance(value, dict):
        return {k: _path_free(v, prefix, pattern, cache) for k, v in value.items()}
    return value
