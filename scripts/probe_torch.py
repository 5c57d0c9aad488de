#!/usr/bin/env python3
"""Print the defaults/torch_builds.yml row for the torch installed in this Python.

Usage: python scripts/probe_torch.py

Reads the real build (torch.__version__, torch.version.cuda, torch.cuda.get_arch_list(),
which answers with no GPU) through archguard's own detection, so a CPU-only or ROCm torch
gets the same message as in a build. Paste the row into defaults/torch_builds.yml when a new
(CUDA index, torch) cell is added; the test suite re-reads the installed torch and fails if
its bundled row disagrees.
"""

from __future__ import annotations

import sys

from archguard.detect.torch import detect_torch
from archguard.errors import ArchguardError


def main() -> int:
    try:
        build = detect_torch()
    except ArchguardError as exc:
        print(exc.render(), file=sys.stderr)
        return 1
    assert build.version is not None and build.cuda is not None
    cubins = " ".join(str(a) for a in sorted(build.targets.cubins))
    ptx = " ".join(str(a) for a in sorted(build.targets.ptx))
    names = " ".join(build.targets.names())
    print(f"""  - tag: {build.cuda.tag}
    platform: {build.platform}
    torch: ["{build.version.major}.{build.version.minor}"]
    cubins: "{cubins}"
    ptx: "{ptx}"
    source: >-
      probe: torch {build.version} (torch.cuda.get_arch_list() = {names})""")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
