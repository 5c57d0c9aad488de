"""The build's modes, as types, each with its one default: a check (verify, lint), what a
hard-coded ``a``/``f`` nvcc target becomes (read by :func:`archguard.nvcc.plan.plan_extension`),
and the compile cache. ``[tool.archguard]`` and the ``ARCHGUARD_*`` variables choose among them
(:mod:`archguard.settings.config`)."""

from __future__ import annotations

from typing import Literal

Check = Literal["error", "warn", "off"]
ArchSpecific = Literal["keep", "drop", "error"]
CompilerCache = Literal["off", "sccache", "ccache"]
DEFAULT_VERIFY: Check = "error"  # when cuobjdump is found
DEFAULT_LINT: Check = "warn"
DEFAULT_ARCH_SPECIFIC: ArchSpecific = "keep"
DEFAULT_COMPILER_CACHE: CompilerCache = "off"
