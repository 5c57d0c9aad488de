"""After ``build_ext``: read every binary the build produced with cuobjdump and compare it
with the targets it was built for, exactly as ``archguard verify`` does.

This is what catches a CMake step that ignored the list, a prebuilt object linked in, or a
build step archguard never saw. ``[tool.archguard] verify`` / ``ARCHGUARD_VERIFY`` choose:
``error`` (the default when cuobjdump is found) stops the build with verify's report,
``warn`` prints it, ``off`` skips the check. Without cuobjdump the default is a one-line
note naming how to get it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from archguard._integration.common import say
from archguard._integration.prebuild import lint_mode
from archguard._integration.session import Session, setup_error
from archguard.binaries.record import images_record
from archguard.binaries.stubs import lines as stub_lines
from archguard.binaries.verify import Checked, Expectation, check_binaries, render, verdict
from archguard.detect.cuobjdump import find_cuobjdump
from archguard.detect.sass import STUB_MAX_BYTES, find_nvdisasm
from archguard.errors import ArchguardError, BuildVerifyFailed, CuobjdumpNotFound, StubHazard
from archguard.settings.config import env_stubs

ELF_MAGIC = b"\x7fELF"


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


def _binaries(
    cmd: Any, session: Session, cuda_names: list[str], started: float
) -> list[tuple[str, Path, Expectation]]:
    res = session.resolution
    wheel = Expectation(res.targets, f"the effective list ({res.effective_text})")
    out: list[tuple[str, Path, Expectation]] = []
    seen: set[Path] = set()
    for ext in getattr(cmd, "extensions", None) or ():
        path = Path(cmd.get_ext_fullpath(ext.name))
        if not path.is_file():
            continue
        seen.add(path.resolve())
        expected = wheel
        if ext.name in session.targets:
            expected = Expectation(session.targets[ext.name], f"extension {ext.name}'s targets")
        out.append((f"{ext.name} ({path.name})", path, expected))
        if ext.name in cuda_names and not getattr(ext, "sources", None):
            # A CMake step may install more libraries beside the extension: read those the
            # build just wrote too.
            for other in sorted(path.parent.glob("*.so*")):
                if (
                    other.resolve() not in seen
                    and other.is_file()
                    and other.stat().st_mtime >= started - 1
                    and _is_elf(other)
                ):
                    seen.add(other.resolve())
                    out.append((f"{other.name} (built beside {ext.name})", other, wheel))
    return out


def verify_build(cmd: Any, session: Session, cuda_names: list[str], started: float) -> None:
    mode = session.verify_mode()
    if mode == "off":
        say(
            "verify: off ([tool.archguard] verify or ARCHGUARD_VERIFY): the built binaries "
            "are not read back"
        )
        return
    nvcc = session.resolution.toolkit.nvcc
    extra = [str(Path(nvcc).parent)] if nvcc else []
    try:
        cuobjdump = find_cuobjdump(
            None,
            os.environ,
            extra_dirs=extra,
            needed_by="the build's read-back of its binaries ([tool.archguard] verify)",
        )
    except CuobjdumpNotFound as exc:
        if mode == "error":
            raise setup_error(exc) from None
        say(
            "verify: no cuobjdump, so the built binaries are not read back; "
            "`pip install nvidia-cuda-cuobjdump` into the build environment (or put the CUDA "
            "toolkit's bin/ on PATH) to check them"
        )
        return
    nvdisasm = _stub_tool(session, cuobjdump)
    binaries = _binaries(cmd, session, cuda_names, started)
    reading = time.monotonic()
    try:  # one read of each binary: its targets, and with nvdisasm its kernels
        results = check_binaries(binaries, cuobjdump, nvdisasm)
    except ArchguardError as exc:
        raise setup_error(exc) from None
    read = time.monotonic() - reading
    for r in results:
        if r.stubs_error:
            say(f"stubs: {r.label}: not checked: {r.stubs_error}")
    session.verified = [_verified(r) for r in results]
    if nvdisasm is not None:
        _stubs(session, results)
    bad = [r for r in results if not r.ok]
    cuda = [r for r in results if r.found is not None]
    if not bad:
        say(
            f"verify: {len(cuda)} CUDA binar{'y' if len(cuda) == 1 else 'ies'} read back "
            f"{'and disassembled ' if nvdisasm else ''}in {read:.1f} s with {cuobjdump}: each "
            "holds exactly its targets"
        )
        return
    report = render(verdict(results, []), "text")
    summary = "; ".join(
        f"{r.label}: missing {' '.join(r.missing) or '-'}, unexpected "
        f"{' '.join(r.unexpected) or '-'}"
        + (f", leaves dead {', '.join(d.cc_text for d in r.left_dead)}" if r.left_dead else "")
        for r in bad
    )
    if mode == "warn":
        for line in report.splitlines():
            say(f"verify: {line}" if line else "verify:")
        say(f"warning: the built binaries differ from their targets ({summary}); verify = 'warn'")
        return
    raise setup_error(
        BuildVerifyFailed(
            f"the built binaries do not hold the targets archguard put on the nvcc line "
            f"({summary}). A build step archguard cannot see (a CMake step that ignores "
            "CUDAARCHS/TORCH_CUDA_ARCH_LIST, a prebuilt object linked in) chose other arches. "
            "Make that step read the list (`python -m archguard env` prints it), or set "
            "[tool.archguard] verify = 'warn' (ARCHGUARD_VERIFY=warn) to build anyway. "
            "cuobjdump's view follows.",
            detail=report.rstrip(),
        )
    )


def _verified(r: Checked) -> dict[str, object]:
    return {
        "binary": r.label,
        "found": r.found.names() if r.found else None,
        "ok": r.ok,
        "images": images_record(r.images),
    }


def _stub_tool(session: Session, cuobjdump: str) -> str | None:
    """nvdisasm, where the kernels are to be disassembled (the lint on, ``ARCHGUARD_STUBS``
    not 0, nvdisasm found); None, said, where not."""
    mode = lint_mode(session)
    try:
        wanted = env_stubs(os.environ)
    except ArchguardError as exc:
        raise setup_error(exc) from None
    if mode == "off":
        return None
    if not wanted:
        say(
            "stubs: off (ARCHGUARD_STUBS): the kernels are not disassembled; the lint's "
            "hazards are recorded in their place"
        )
        return None
    nvdisasm = find_nvdisasm(near=cuobjdump)
    if nvdisasm is None:
        say(
            "stubs: no nvdisasm, so the kernels are not disassembled "
            "(`pip install nvidia-cuda-nvdisasm` to check them for stubs)"
        )
    return nvdisasm


def _stubs(session: Session, checked: list[Checked]) -> None:
    """Every kernel in every image of the built binaries, real or a stub, and any served
    device that runs a stub."""
    mode = lint_mode(session)
    kernels = sum(len(r.stubs.kernels) for r in checked if r.stubs is not None)
    say(
        f"stubs: {kernels} kernel{'s' if kernels != 1 else ''} read (disassembled where a stub "
        f"is possible: a cubin arch with a function of at most {STUB_MAX_BYTES // 1024} KiB)"
    )
    found = 0
    for r in checked:
        if r.stubs is None:
            continue
        name = r.label.split(" (", 1)[0]
        if name in session.extensions:  # the record's schema /2: doctor reads it
            session.extensions[name]["stubs"] = {k.name: dict(k.kinds) for k in r.stubs.kernels}
        found += len(r.stubs.findings)
        for line in stub_lines(r.stubs):
            say(f"stubs: {r.label}: {line.strip()}")
    if found and mode == "error":
        raise setup_error(
            StubHazard(
                f"{found} served device{'s' if found != 1 else ''} would run a stub kernel "
                "(listed above: real in one image, empty or trapping in the image the device "
                "loads) and [tool.archguard] lint = 'error'. Add the arches named, or set "
                "lint = 'warn'."
            )
        )
