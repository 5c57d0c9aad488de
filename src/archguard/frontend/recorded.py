"""What ``archguard wheel`` writes into each wheel's record (``.dist-info/archguard.json``).

A setuptools build records its own resolution through archguard's hook. A build the hook
never sees (scikit-build-core, meson-python, any PEP 517 backend that runs CMake or nvcc
itself) has no record, so its wheel could not be verified, labelled or repaired: the
front-end resolved the list and put it in the build's environment (``CUDAARCHS``,
``TORCH_CUDA_ARCH_LIST``), so it writes that resolution into the wheel, each CUDA binary
expected to hold exactly the effective list, with what it binds to read from its ELF. Every
record also gets the front-end's part: the build requirements installed for the build and
the toolkit root it saw.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from archguard.binaries.record import (
    BuildFacts,
    RecordedTargets,
    abi_record,
    images_record,
    path_free,
    recorded_targets,
    unseen_extension_record,
    wheel_record,
    wheel_record_data,
)
from archguard.binaries.relabel import write_wheel_record
from archguard.binaries.verify import Checked
from archguard.core.resolve import Resolution


def frontend_part(
    build_env: Mapping[str, object], toolkit: Mapping[str, object]
) -> dict[str, object]:
    """The record's ``build.frontend``: what the front-end gave the build."""
    return {"build_requirements": dict(build_env), "toolkit": dict(toolkit)}


def backend_record(
    res: Resolution, checked: Sequence[Checked], environment: Mapping[str, str], backend: str
) -> dict[str, object]:
    """The record of a wheel whose backend archguard's hook never saw: each CUDA binary the
    read-back found is expected to hold the effective list, which reached it through the
    environment; what it binds to is read from its ELF."""
    facts = BuildFacts(
        torch_arch_list=environment.get("TORCH_CUDA_ARCH_LIST"),
        cudaarchs=environment.get("CUDAARCHS", ""),
        inputs={"list": res.request.origin, "backend": backend},
        activation="frontend",
    )
    for member, ext in unseen_binaries(res, checked, backend, set()):
        facts.add_extension(member, ext, res.targets)
    return wheel_record(res, facts)


def unseen_binaries(
    res: Resolution,
    checked: Sequence[Checked],
    backend: str,
    known: set[str],
    names: frozenset[str] = frozenset(),
) -> list[tuple[str, dict[str, object]]]:
    """An extension entry for each CUDA binary the read-back found that no recorded
    extension is (``known``: their files; ``names``: their names' last part, for one the
    hook recorded by name only): expected to hold the effective list, which reached
    its build through the environment; what it binds to read from its ELF."""
    out = []
    for r in checked:
        if r.found is None:
            continue
        member = r.label.split("!", 1)[-1]
        stem = PurePosixPath(member).name.lstrip("{").split(".")[0]
        if any(member == f or member.endswith("/" + f) for f in known if f) or stem in names:
            continue
        ext = unseen_extension_record(res, stem, member)
        ext["backend"] = backend
        ext["images"] = images_record(r.images)
        if r.abi is not None:
            ext["abi"] = abi_record(r.abi)
        out.append((member, ext))
    return out


def write_frontend_record(  # noqa: PLR0913, PLR0917 (the record's inputs, each needed)
    wheel: Path,
    res: Resolution,
    checked: Sequence[Checked],
    environment: Mapping[str, str],
    backend: str,
    part: Mapping[str, object],
    tree: Path,
) -> tuple[RecordedTargets, bool]:
    """Write the wheel's record: a backend's whole record where it has none, else the
    hook's with the front-end's part and an entry for each CUDA binary the hook never saw
    (one a CMake step of the package built and installed itself). (the record written, as
    its typed value; True when the wheel's expectations changed: it is read back again).
    Written path-free (:func:`archguard.binaries.record.path_free`, ``tree`` the source)."""
    with zipfile.ZipFile(wheel) as zf:
        found = wheel_record_data(zf, wheel.name)
    record = found[0] if found else None
    changed = record is None
    if record is None:
        record = backend_record(res, checked, environment, backend)
    build = record.setdefault("build", {})
    if isinstance(build, dict):
        extensions = build.setdefault("extensions", [])
        known = {str(e.get("file") or "") for e in extensions if isinstance(e, dict)}
        names = frozenset(
            str(e.get("name", "")).rsplit(".", 1)[-1] for e in extensions if isinstance(e, dict)
        )
        unseen = unseen_binaries(res, checked, backend, known, names)
        extensions += [ext for _, ext in unseen]
        changed = changed or bool(unseen)
        build["frontend"] = json.loads(json.dumps(dict(part)))
    record = path_free(json.loads(json.dumps(record)), tree)
    where = write_wheel_record(wheel, record)
    return recorded_targets(record, where), changed
