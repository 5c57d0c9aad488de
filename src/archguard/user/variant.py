"""``python -m archguard variant WHEEL...``: a wheel-variant copy of built wheels (the PEP 825
draft, written through ``variantlib``), whose properties come from the binaries as read back.

NVIDIA's provider (``nvidia-variant-provider``, namespace ``nvidia``; wheelnext's repository,
``nvidia_variant_provider/plugin.py``) names ``cuda_version_lower_bound`` (``"13.0"``: the
driver must run at least that CUDA) and ``sm_arch`` (multi-value: ``"{major}{minor}_real"``
for a cubin, ``"{major}{minor}_virtual"`` for PTX; no ``a``/``f`` values). On a machine it
reports, for the *highest* GPU only, the real values of its major from its minor down and the
single ``"{major}0_virtual"``: no PTX of a lower major ever matches. The properties say only
what every CUDA binary of the wheel serves (an installer that picks the wheel for a GPU must
find an image for it in each extension); what the vocabulary cannot say is named per wheel,
with what a variant installer will therefore do.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from archguard.binaries.record import read_wheel_record
from archguard.core.arch import Arch, Targets
from archguard.errors import BinaryReadError, VariantsUnavailable

if TYPE_CHECKING:
    from archguard.binaries.verify import Checked

NAMESPACE = "nvidia"
PROVIDER_REQUIRES = ["nvidia-variant-provider>=0.0.1,<1.0.0"]
PROVIDER_PLUGIN = "nvidia_variant_provider.plugin:NvidiaVariantPlugin"
EXTRA = "torch-archguard[variants]"


@dataclass
class Plan:
    """The properties one wheel gets, and what they cannot say."""

    wheel: Path
    properties: list[tuple[str, str]]  # (feature, value)
    notes: list[str] = field(default_factory=list)


def sm_values(targets: Targets) -> tuple[list[str], list[str]]:
    """(sm_arch values, what they leave out) for what a binary holds."""
    values = [f"{a.digits}_real" for a in sorted(targets.cubins) if not a.suffix]
    values += [f"{a.digits}_virtual" for a in sorted(targets.ptx)]
    left = [a.sm for a in sorted(targets.cubins) if a.suffix]
    return values, left


def plan(wheel: Path, binaries: list[tuple[str, Targets]], cuda: str) -> Plan:
    """The properties of ``wheel`` whose CUDA binaries hold ``binaries`` (label, targets),
    compiled by CUDA ``cuda`` (``"13.0"``)."""
    per = {label: sm_values(t) for label, t in binaries}
    common = set.intersection(*(set(v) for v, _ in per.values())) if per else set()
    every = sorted(
        {v for vals, _ in per.values() for v in vals},
        key=lambda v: (int(v.split("_")[0]), v),
    )
    shown = [v for v in every if v in common]
    out = Plan(wheel, [("cuda_version_lower_bound", cuda)] + [("sm_arch", v) for v in shown])
    for label, (vals, left) in per.items():
        if left:
            out.notes.append(
                f"{label} holds {' '.join(left)}: the provider's vocabulary has no a/f values, "
                "so no property says it; a variant installer picks this wheel for those GPUs "
                "only through another property"
            )
        missing = [v for v in every if v not in vals]
        if missing:
            out.notes.append(
                f"{label} lacks {' '.join(missing)}, which another binary of the wheel holds: "
                "those are left out of the properties (the wheel does not serve them whole)"
            )
    for v in shown:
        digits, kind = v.split("_")
        arch = Arch(int(digits[:-1]), int(digits[-1]))
        if kind == "virtual" and arch.minor != 0:
            out.notes.append(
                f"sm_arch {v}: the provider reports only {arch.major}0_virtual for a "
                f"{arch.major}.x GPU, so a variant installer never selects this wheel through "
                f"{arch.compute}"
            )
        elif kind == "virtual":
            out.notes.append(
                f"sm_arch {v}: the provider matches PTX within major {arch.major} only; GPUs of a "
                f"higher major that JIT {arch.compute} (e.g. Thor 11.0 via compute_90) do not "
                "select this wheel"
            )
    if not shown:
        out.notes.append(
            "no sm_arch property: a variant installer selects this wheel on any GPU whose "
            f"driver runs CUDA {cuda} or newer, including GPUs it holds no image for"
        )
    return out


def from_checked(
    wheel: Path, results: Sequence[Checked], cuda: str | None = None
) -> tuple[Plan | None, list[str]]:
    """The plan for a wheel whose binaries ``results`` were read back (``verify.check``),
    or the problems that refuse it: a binary that disagrees with its record, no CUDA
    binary, no CUDA version (``cuda``, else the record's)."""
    binaries = [(r.label, r.found) for r in results if r.found is not None]
    problems = [
        f"{r.label}: holds {' '.join(r.found.names())}, its record says "
        f"{' '.join(r.expected.targets.names())}"
        for r in results
        if r.found is not None and r.expected is not None and not r.ok
    ]
    if not binaries:
        problems.append("no binary with CUDA device code")
    cuda = cuda or recorded_cuda(wheel)
    if cuda is None:
        problems.append(
            "no archguard record says which CUDA compiled it: pass --cuda-lower-bound X.Y"
        )
    if problems or cuda is None:
        return None, problems
    return plan(wheel, binaries, cuda), []


def ensure_variantlib() -> object:
    try:
        import variantlib.api
    except ImportError:
        raise VariantsUnavailable(
            "archguard variant writes wheel variants through variantlib, which is not "
            f"installed. Install the optional extra: pip install '{EXTRA}' (or pip install "
            "variantlib==0.2.2)."
        ) from None
    return variantlib.api


def write(p: Plan, out_dir: Path, label: str | None = None) -> Path:
    """The variant wheel in ``out_dir``: the same files, ``variant.json`` in its .dist-info
    and the RECORD updated, named ``{base}-{label}.whl``."""
    ensure_variantlib()
    from variantlib.api import (
        VariantDescription,
        VariantProperty,
        make_variant_dist_info,
    )
    from variantlib.constants import (
        VALIDATION_WHEEL_NAME_REGEX,
        VARIANT_DIST_INFO_FILENAME,
    )
    from variantlib.models.variant_info import ProviderInfo, VariantInfo

    vdesc = VariantDescription(
        properties=[VariantProperty(NAMESPACE, f, v) for f, v in p.properties],
        **({"label": label} if label else {}),
    )
    info = VariantInfo(
        namespace_priorities=[NAMESPACE],
        providers={
            NAMESPACE: ProviderInfo(requires=list(PROVIDER_REQUIRES), plugin_api=PROVIDER_PLUGIN)
        },
    )
    match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(p.wheel.name)
    if match is None:
        raise BinaryReadError(f"{p.wheel.name} is not a wheel file name.")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{match.group('base_wheel_name')}-{vdesc.label}.whl"
    data = make_variant_dist_info(vdesc, variant_info=info)
    with zipfile.ZipFile(p.wheel) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            parts = item.filename.split("/")
            in_info = len(parts) == 2 and parts[0].endswith(".dist-info")
            if in_info and parts[1] == VARIANT_DIST_INFO_FILENAME:
                continue
            if in_info and parts[1] == "RECORD":
                name = f"{parts[0]}/{VARIANT_DIST_INFO_FILENAME}"
                dst.writestr(name, data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data.encode()).digest())
                lines = [
                    line
                    for line in src.read(item).decode().splitlines()
                    if line and not line.startswith(name + ",")
                ]
                lines.append(f"{name},sha256={digest.rstrip(b'=').decode()},{len(data.encode())}")
                dst.writestr(item, "\n".join(lines) + "\n")
                continue
            with src.open(item) as fin, dst.open(item, "w") as fout:
                shutil.copyfileobj(fin, fout)
    return target


def recorded_cuda(wheel: Path) -> str | None:
    """The CUDA version (``"13.0"``) the wheel's archguard record says compiled it (None: no
    record, or not one this archguard reads)."""

    try:
        with zipfile.ZipFile(wheel) as zf:
            recorded = read_wheel_record(zf, wheel.name)
    except (OSError, zipfile.BadZipFile, BinaryReadError):
        return None
    return recorded.cuda if recorded is not None else None
