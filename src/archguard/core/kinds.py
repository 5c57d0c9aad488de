"""What a kernel is in one image of a binary (``real``, ``empty``, ``trap``), and what a
guarded branch of the source holds instead (``trap``, ``empty``, ``alternative``): the words
stated once, for the SASS/PTX reader, the stub analysis, the record, ``doctor`` and the lint.
"""

from __future__ import annotations

from typing import Final, Literal

# a kernel in one image: real work, an empty body, or a trap (or a call out: assert, printf)
StubKind = Literal["real", "empty", "trap"]
REAL: Final = "real"
EMPTY: Final = "empty"  # the same word in both
TRAP: Final = "trap"  # the same word in both
STUB_KINDS: tuple[StubKind, ...] = (REAL, EMPTY, TRAP)

# a guarded branch in the source: a trap, no code, or other code (the source's "real")
BranchKind = Literal["trap", "empty", "alternative"]
ALTERNATIVE: Final = "alternative"
BRANCH_KINDS: tuple[BranchKind, ...] = (TRAP, EMPTY, ALTERNATIVE)
