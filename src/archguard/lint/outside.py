"""What headers outside the scan (the toolkit's, torch's, the C++ library's) do to the macros
the lint cannot see them define: a fact from archguard's bundled ``cuda_headers.yml``, probed
from the real toolkit and torch by ``scripts/probe_cuda_headers.py``.

CUDA_VERSION is defined by ``cuda.h``; nvcc's implicit ``cuda_runtime.h`` does not include
it. So in a translation unit CUDA_VERSION starts undefined; a header the table lists as
reaching ``cuda.h`` defines it as the toolkit's version; one it lists as leaving it undefined
changes nothing; any other header outside the scan may define it (unknown from there on)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from archguard.core.bundled import bundled_path, bundled_yaml
from archguard.core.cuda import CudaVersion
from archguard.errors import PolicyError
from archguard.lint.expressions import Macro

_FILE = "cuda_headers.yml"
_KEYS = ("schema", "toolkit", "torch", "undefined")
SCHEMA = 2
# the names only headers outside the scan define (the sources' own #define aside)
OUTSIDE_NAMES = frozenset({"CUDA_VERSION"})


@dataclass(frozen=True)
class OutsideHeaders:
    """The include names (as spelled in ``#include <...>``) after which CUDA_VERSION is
    defined, and those after which it is still undefined."""

    defines: frozenset[str]
    undefined: frozenset[str]


@cache
def outside_headers() -> OutsideHeaders:
    data = bundled_yaml(_FILE)
    where = f"archguard's bundled {_FILE} ({bundled_path(_FILE)})"
    if not isinstance(data, dict) or sorted(data) != sorted(_KEYS) or data["schema"] != SCHEMA:
        raise PolicyError(
            f"{where} must hold exactly the keys {', '.join(_KEYS)} with schema {SCHEMA} "
            "(this file ships with archguard: reinstall it)"
        )
    lists: dict[str, frozenset[str]] = {}
    for key in _KEYS[1:]:
        rows = data[key]
        if not isinstance(rows, list) or not all(isinstance(r, str) and r for r in rows):
            raise PolicyError(
                f"{where}: {key} must be a list of header names, got {rows!r} "
                "(this file ships with archguard: reinstall it)"
            )
        lists[key] = frozenset(rows)
    defines = lists["toolkit"] | lists["torch"]
    both = sorted(defines & lists["undefined"])
    if both:
        raise PolicyError(
            f"{where}: {', '.join(both)} listed both as defining CUDA_VERSION and as leaving "
            "it undefined (this file ships with archguard: reinstall it)"
        )
    return OutsideHeaders(defines, lists["undefined"])


def outside_macros(cuda: CudaVersion) -> dict[str, list[Macro]]:
    """For each known outside header, the macros it defines for the toolkit ``cuda`` (an
    empty list: none of :data:`OUTSIDE_NAMES`). A header not in the mapping may define any
    of them."""
    version = Macro("CUDA_VERSION", (str(cuda.major * 1000 + cuda.minor * 10),))
    known = outside_headers()
    return {
        **{name: [] for name in known.undefined},
        **{name: [version] for name in known.defines},
    }
