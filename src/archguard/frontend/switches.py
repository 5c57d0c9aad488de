"""The package's own switches for its CUDA build, among the variables its setup.py reads:
a name that says so (FORCE_CUDA, WITH_GPU, MYPKG_BUILD_EXT), or an ``if`` on it that guards
its CUDA build; never an arch list, a place, a version or flags (archguard's own or the
toolkit's)."""

from __future__ import annotations

import re
from collections.abc import Sequence

# a name that says it switches the CUDA (GPU, nvcc) build, or forces, enables, builds a part
_SWITCH = re.compile(r"CUDA|GPU|NVCC|FORCE|(?:^|_)(?:WITH|BUILD|USE|ENABLE)_")
# a name that says it holds arches (archguard sets those), a place, a version or flags
_NOT_A_SWITCH = re.compile(
    r"(?:^|_)(?:ARCH|ARCHS|ARCHITECTURES?|SMS?|HOME|PATH|ROOT|DIRS?|VERSION|FLAGS|THREADS"
    r"|BIN|LIBS?|INCLUDE|DEVICES|JOBS)(?:_|$)"
)
# what a setup.py's CUDA build is: where an `if` on a variable guards it, the variable is one
_CUDA_BUILD = re.compile(r"CUDAExtension|\bnvcc\b|\.cu['\"]|\bcuda\b|\bgpu\b", re.I)


# what archguard or the toolkit set, never the package's own switch
NOT_SWITCHES = {
    "CUDA_HOME",
    "CUDA_PATH",
    "TORCH_CUDA_ARCH_LIST",
    "CUDAARCHS",
    "CUDA_VISIBLE_DEVICES",
}


def switches(reads: Sequence[str], setup_text: str = "") -> list[str]:
    """The package's own switches among the variables its setup.py reads, the FORCE_ ones
    first: a variable whose name says it switches the CUDA build (FORCE_CUDA, WITH_GPU,
    MYPKG_BUILD_EXT, ...), or, in ``setup_text``, one an ``if`` reads to guard its CUDA
    build. Never DEBUG for its own sake, nor an arch list, a path, a version or flags."""
    found = [
        r
        for r in reads
        if r not in NOT_SWITCHES
        and not r.startswith("ARCHGUARD_")
        and not _NOT_A_SWITCH.search(r)
        and (_SWITCH.search(r) or _guards_cuda(r, setup_text))
    ]
    return sorted(found, key=lambda r: not r.startswith("FORCE_"))


def _guards_cuda(name: str, setup_text: str) -> bool:
    """Does an ``if`` of the setup.py read ``name`` (or a variable set from it) to guard a
    block that builds CUDA code (a CUDAExtension, a .cu source, nvcc)? Read line by line,
    with no pattern that can backtrack over a long line."""
    lines = setup_text.splitlines()
    quoted = (f'"{name}"', f"'{name}'")
    names = {name}
    for line in lines:  # FAST = os.environ.get("NAME") == "1": FAST stands for it
        target, equals, value = line.partition("=")
        if equals and any(q in value for q in quoted) and target.strip().isidentifier():
            names.add(target.strip())
    said = re.compile("|".join(rf"\b{re.escape(n)}\b" for n in sorted(names)))
    for i, line in enumerate(lines):
        test = line.split("#", 1)[0].rstrip()
        if not test.lstrip().startswith(("if ", "elif ")) or not test.endswith(":"):
            continue
        if not said.search(test):
            continue
        indent = len(line) - len(line.lstrip())
        block = []
        for inner in lines[i + 1 :]:
            if inner.strip() and len(inner) - len(inner.lstrip()) <= indent:
                break
            block.append(inner)
        if _CUDA_BUILD.search("\n".join(block)):
            return True
    return False
