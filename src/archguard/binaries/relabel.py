"""A built wheel labelled for its cell (SPEC section 7): its version's local label
(``+cu130torch2.13``; a label the package set itself is replaced, never doubled) and a
``Requires-Dist`` on torch matching what its binaries need, in place of the package's own
unpinned torch requirement. The name, the ``.dist-info`` and ``.data`` directories, METADATA
and RECORD stay consistent: the wheel is rewritten through the ``wheel`` package's
``WheelFile``, which writes RECORD from what it holds, and METADATA is read and rewritten by
:mod:`archguard.core.wheelfile` (``packaging`` parses the requirements), its other bytes as
they were."""

from __future__ import annotations

import json
import re
import tempfile
import zipfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from archguard._fs import atomic_file
from archguard.binaries.record import RECORD_NAME
from archguard.core.wheelfile import (
    InvalidWheelFilename,
    parse_metadata,
    parse_wheel_name,
    rewrite_metadata,
)
from archguard.errors import BinaryReadError, ConfigError

_LOCAL = re.compile(r"^[a-z0-9]+(?:\.[a-z0-9]+)*$")


def check_label(label: str, where: str) -> str:
    """A local version label as PEP 440 writes it (lower case, alphanumerics and dots)."""
    text = label.strip().lower()
    if not _LOCAL.match(text):
        raise ConfigError(
            f"{where} {label!r} is not a local version label: letters, digits and dots only "
            "(PEP 440), e.g. 'cu130torch2.13'."
        )
    return text


def relabel(wheel: Path, label: str, pin: str) -> Path:
    """Rewrite ``wheel`` (beside it) with version ``<public>+<label>`` and the torch
    requirement ``pin`` (empty: its requirements untouched); the new wheel's path. The
    original is removed only once the new one is complete."""
    try:
        name = parse_wheel_name(wheel.name)
    except InvalidWheelFilename as exc:
        raise BinaryReadError(f"{wheel.name} is not a wheel file name ({exc}).") from None
    _require_wheel()
    version = name.version
    new = Version(f"{version.public}+{label}")
    if new == version and (not pin or _pinned(wheel, pin)):
        return wheel
    with tempfile.TemporaryDirectory(prefix="archguard-label-", dir=wheel.parent) as tmp:
        root = _unpack(wheel, Path(tmp, "tree"))
        old_info = next(root.glob("*.dist-info"))
        stem = old_info.name[: -len(".dist-info")].rsplit("-", 1)[0]
        new_info = root / f"{stem}-{new}.dist-info"
        old_info.rename(new_info)
        for data in root.glob("*.data"):
            data.rename(root / f"{stem}-{new}.data")
        _metadata(new_info / "METADATA", new, pin)
        try:  # its build, python, abi and platform tags as they were
            renamed = name.renamed(distribution=stem, version=new)
        except InvalidWheelFilename as exc:
            raise BinaryReadError(f"{wheel.name}: its .dist-info names no wheel ({exc}).") from None
        target = wheel.parent / renamed.filename
        _pack(root, target)
    if target != wheel:
        wheel.unlink()
    return target


def _require_wheel() -> None:
    """The ``wheel`` package, which rewrites wheels here, is installed (else one error)."""
    try:
        import wheel.wheelfile  # noqa: F401
    except ImportError:
        raise ConfigError(
            "archguard wheel labels each wheel for its cell with the `wheel` package, which "
            "is not installed: pip install 'torch-archguard[farm]' (or wheel>=0.40)."
        ) from None


def _unpack(wheel: Path, root: Path) -> Path:
    """``wheel``'s files under ``root``, their modes kept (an executable stays one)."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(root)
        for info in zf.infolist():  # extractall drops the modes
            mode = (info.external_attr >> 16) & 0o7777
            if mode and not info.is_dir():
                (root / info.filename).chmod(mode)
    return root


def _pack(root: Path, target: Path) -> None:
    """``root`` written as the wheel ``target`` (RECORD written afresh from what it holds),
    moved into place only once complete (under its own name until then: ``WheelFile``
    reads the name)."""
    from wheel.wheelfile import WheelFile

    for record in root.glob("*.dist-info/RECORD"):
        record.unlink()
    with atomic_file(target, own_name=True) as partial, WheelFile(str(partial), "w") as wf:
        wf.write_files(str(root))


def write_wheel_record(wheel: Path, record: dict[str, object]) -> str:
    """``wheel`` rewritten in place with ``record`` as its ``.dist-info/archguard.json``
    (a record it had is replaced); where it is (``WHEEL!member``)."""
    _require_wheel()
    with tempfile.TemporaryDirectory(prefix="archguard-record-", dir=wheel.parent) as tmp:
        root = _unpack(wheel, Path(tmp, "tree"))
        info = next(root.glob("*.dist-info"))
        (info / RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        _pack(root, wheel)
    return f"{wheel.name}!{info.name}/{RECORD_NAME}"


def _pinned(wheel: Path, pin: str) -> bool:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(
            n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1
        )
        return pin in parse_metadata(zf.read(meta)).requires_dist


def _metadata(path: Path, version: Version, pin: str) -> None:
    """The METADATA at ``path`` with ``version``, and ``pin`` in place of its unconditional
    torch requirements (the first one's place; else last); every other line kept."""
    data = path.read_bytes()
    if not pin:
        path.write_bytes(rewrite_metadata(data, version=str(version)))
        return
    requirements: list[str] = []
    placed = False
    for text in parse_metadata(data).requires_dist:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            requirements.append(text)
            continue
        if canonicalize_name(requirement.name) == "torch" and requirement.marker is None:
            if not placed:
                requirements.append(pin)
                placed = True
            continue
        requirements.append(text)
    if not placed:
        requirements.append(pin)
    path.write_bytes(rewrite_metadata(data, version=str(version), requires_dist=requirements))
