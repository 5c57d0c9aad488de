"""What ``archguard wheel`` does to each wheel pip made, in order: its binaries read back,
its record written (and read back again where that changed what it expects), the
judgement (CUDA code, as recorded), its cell label, its repair (auditwheel), its variant
copy; a failed build's wheels moved aside.

Each step takes a wheel's result and returns a new one with what the step found, and the
problems it met (:class:`Step`); nothing is changed in place. The record a step writes
travels with the wheel (``WheelResult.record``): the label reads it there, never from the
zip again.
"""

from __future__ import annotations

import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from archguard.binaries.relabel import check_label, relabel
from archguard.binaries.repair import never_grafted, repair
from archguard.binaries.verify import check
from archguard.core.abi import cell_label, minor, serves
from archguard.core.arch import Targets
from archguard.core.cuda import CudaVersion
from archguard.core.resolve import Resolution
from archguard.core.wheelfile import parse_wheel_name
from archguard.detect.cuobjdump import find_cuobjdump
from archguard.errors import ArchguardError
from archguard.frontend.cmake import forced_note, no_cuda_said
from archguard.frontend.recorded import write_frontend_record
from archguard.frontend.result import Built, WheelResult
from archguard.frontend.setup_py import SetupPy
from archguard.frontend.switches import switches
from archguard.user import variant

# a step: one wheel's result -> (its new result, the problems the step met)
Step = Callable[[WheelResult], tuple[WheelResult, list[str]]]


def each(wheels: Sequence[WheelResult], step: Step) -> tuple[list[WheelResult], list[str]]:
    """``step`` over every wheel: (the new results, every problem, in the wheels' order)."""
    out: list[WheelResult] = []
    problems: list[str] = []
    for wheel in wheels:
        new, said = step(wheel)
        out.append(new)
        problems += said
    return out, problems


def verified(wheels: list[Path]) -> list[WheelResult]:
    """Each wheel's binaries read back and compared with its record (the read-back kept
    with it, for the repair and the variant copy)."""
    cuobjdump = find_cuobjdump(None, needed_by="archguard wheel (it verifies every wheel)")
    out = []
    for wheel in wheels:
        results = check([wheel], cuobjdump)
        cuda = [r for r in results if r.found is not None]
        out.append(
            WheelResult(
                wheel,
                len(cuda),
                Targets(
                    frozenset(a for r in cuda if r.found for a in r.found.cubins),
                    frozenset(a for r in cuda if r.found for a in r.found.ptx),
                ).names(),
                bool(cuda) and all(r.ok and r.expected is not None for r in cuda),
                [
                    f"{r.label}: missing {' '.join(r.missing) or 'nothing'}, unexpected "
                    f"{' '.join(r.unexpected) or 'nothing'}"
                    for r in cuda
                    if not r.ok
                ]
                + [f"{r.label}: no recorded resolution" for r in cuda if r.expected is None],
                results,
            )
        )
    return out


def recorder(  # noqa: PLR0913, PLR0917 - the record's inputs and the log, each needed
    resolution: Resolution,
    environment: dict[str, str],
    backend: str,
    part: dict[str, object],
    say: Callable[[str], None],
    tree: Path,
) -> Step:
    """The step that writes each CUDA wheel's record: the front-end's part beside the
    hook's; a wheel whose backend wrote none (no setuptools hook ran) gets the whole record
    and is read back against it."""

    def step(w: WheelResult) -> tuple[WheelResult, list[str]]:
        if not w.cuda_binaries:
            return w, []
        record, changed = write_frontend_record(
            w.wheel, resolution, w.checked, environment, backend, part, tree
        )
        if changed:
            say(
                f"{w.wheel.name}: a CUDA binary its build made that archguard's hook never saw "
                f"(its backend, {backend}, or a CMake step of its own): the front-end recorded "
                "the list it gave the build, each such binary expected to hold it"
            )
            w = verified([w.wheel])[0]
        return replace(w, record=record), []

    return step


def judged(
    wheels: Sequence[WheelResult], setup_py: SetupPy, setup_text: str, log: str, built: Built
) -> list[str]:
    """A problem for each wheel with no CUDA code (with what its setup.py reads and the
    conditions it did not meet, or CMake's words) or other arches than recorded."""
    problems = []
    source = Path(built.source)
    for w in wheels:
        if not w.cuda_binaries:
            offered = [
                r for r in switches(setup_py.reads, setup_text) if r not in built.environment
            ]
            conditions = setup_py.conditions
            said = no_cuda_said(log)
            problems.append(
                (
                    f"{w.wheel.name} holds no CUDA device code: the package built "
                    "without its CUDA extension (a CPU fallback, chosen when no GPU is visible?)"
                    if _compiled(w.wheel)
                    else f"{w.wheel.name} holds no CUDA device code and no compiled extension "
                    "at all: a pure-Python wheel (is this release the CUDA package meant, or "
                    "does its setup.py leave every extension out here?)"
                )
                + (
                    ". Conditions in its setup.py a farm's build does not meet: "
                    + "; ".join(conditions)
                    if conditions
                    else ""
                )
                + (
                    f". Its setup.py reads {', '.join(offered)}: set the one that forces the "
                    "CUDA build (e.g. FORCE_CUDA=1) for this cell"
                    if offered
                    else ""
                )
                + (f". CMake said: {said!r}" if said else "")
            )
        elif not w.ok:
            problems.append(
                f"{w.wheel.name} does not hold what was recorded: "
                + "; ".join(w.differences)
                + forced_note(source)
            )
    return problems


def _compiled(wheel: Path) -> bool:
    """Does the wheel hold a compiled extension (any shared object)?"""
    try:
        with zipfile.ZipFile(wheel) as zf:
            return any(".so" in PurePosixPath(n).suffixes for n in zf.namelist())
    except (OSError, zipfile.BadZipFile):
        return True  # unreadable: the read-back said so; the usual words


def labeller(template: str) -> Step:
    """The step that relabels each verified wheel for its cell: its local version and its
    torch pin, from what its binaries bind to (its record's ``abi``, its CUDA and torch)."""

    def step(w: WheelResult) -> tuple[WheelResult, list[str]]:
        record = w.record
        if template == "off":
            return w, []
        if record is None or record.cuda is None or record.torch is None or not record.abi:
            return replace(
                w, label_note="not labelled: its record says nothing of what it binds to"
            ), []
        cuda = CudaVersion.parse(record.line_cuda or record.cuda, w.wheel.name)
        chosen = cell_label(list(record.abi.values()), cuda, record.torch)
        if chosen is None:
            return replace(w, label_note="not labelled: it holds no extension"), []
        label = chosen.label
        if template != "auto":
            major, minor_ = minor(record.torch)
            label = check_label(
                template.format(cuda=cuda.tag, torch=f"{major}.{minor_}"), "local_version"
            )
        try:
            labelled = relabel(w.wheel, label, chosen.pin)
        except ArchguardError as exc:
            return w, [f"{w.wheel.name}: not labelled: {exc}"]
        tags = parse_wheel_name(labelled.name).python_abi  # relabel wrote a wheel's name
        return replace(
            w,
            wheel=labelled,
            label=label,
            pin=chosen.pin or None,
            label_why=chosen.why,
            compiled_with=record.cuda,
            serves=serves(chosen, list(record.abi.values()), tags),
        ), []

    return step


def repairer() -> Step:
    """The step that makes each labelled wheel manylinux (:mod:`archguard.binaries.repair`),
    its cubins read back again; it takes the plain wheel's place only then."""
    cuobjdump = find_cuobjdump(None, needed_by="archguard wheel --repair (it reads back)")

    def step(w: WheelResult) -> tuple[WheelResult, list[str]]:
        wheel = w.wheel
        with tempfile.TemporaryDirectory(prefix="archguard-repair-", dir=wheel.parent) as tmp:
            try:
                repaired = repair(wheel, Path(tmp))
            except ArchguardError as exc:
                return w, [f"{wheel.name}: not repaired: {exc}"]
            bad = never_grafted(repaired.grafted)
            if bad:
                return w, [
                    f"{wheel.name}: refused: auditwheel grafted {', '.join(bad)}, which only "
                    "the user's torch may bring; the plain wheel is kept"
                ]
            results = check([repaired.wheel], cuobjdump)
            cuda = [r for r in results if r.found is not None]
            if not cuda or not all(r.ok for r in cuda):
                return w, [
                    f"{wheel.name}: refused: the repaired wheel's binaries do not read back "
                    "as recorded; the plain wheel is kept"
                ]
            target = wheel.parent / repaired.wheel.name
            repaired.wheel.replace(target)
        if target != wheel:
            wheel.unlink()
        return replace(
            w,
            wheel=target,
            checked=results,
            platform=repaired.platform,
            lowest_platform=repaired.lowest,
            grafted=list(repaired.grafted),
            not_grafted=list(repaired.not_grafted),
            retagged=repaired.retagged or None,
        ), []

    return step


def varianter(out: Path) -> Step:
    """The step that writes a wheel-variant copy of each verified wheel into
    ``out/variants``, from the binaries already read back."""

    def step(w: WheelResult) -> tuple[WheelResult, list[str]]:
        planned, problems = variant.from_checked(w.wheel, w.checked)
        if planned is None:
            return w, [f"{w.wheel.name}: no variant: {p}" for p in problems]
        written = variant.write(planned, out / "variants")
        return replace(w, variant=str(written), variant_notes=list(planned.notes)), []

    return step


REFUSED = "refused"


def refused(built: Built, left: Sequence[Path], out: Path) -> Built:
    """A failed build with every wheel it left in ``out`` (``left``) moved to
    ``out/refused/``, each with a note saying why (``NAME.whl.why.txt``): ``out/*.whl`` is
    always publishable."""
    if not left:
        return built
    where = out / REFUSED
    where.mkdir(exist_ok=True)
    why = "\n".join(built.problems) or "the build failed"
    moved = {}
    for wheel in left:
        target = where / wheel.name
        wheel.replace(target)
        (where / f"{wheel.name}.why.txt").write_text(
            f"archguard wheel refused {wheel.name} (built from {built.source}):\n{why}\n"
        )
        moved[wheel] = target
    return replace(
        built,
        wheels=[replace(w, wheel=moved.get(w.wheel, w.wheel)) for w in built.wheels],
        problems=[
            *built.problems,
            f"refused: {', '.join(p.name for p in left)} moved to {where} (each with a note why)",
        ],
    )
