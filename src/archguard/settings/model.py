"""The model of ``[tool.archguard]``: one dataclass whose fields carry each key's
documentation, type and default. The parser (:func:`archguard.settings.config.parse_config`),
its error text and docs/configuration.md's table (:func:`config_table`, compared word for word
by a test) all read it here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_args, get_type_hints

from archguard.core.arch import ArchEntry
from archguard.core.modes import (
    DEFAULT_ARCH_SPECIFIC,
    DEFAULT_COMPILER_CACHE,
    DEFAULT_LINT,
    DEFAULT_VERIFY,
    ArchSpecific,
    Check,
    CompilerCache,
)


@dataclass(frozen=True)
class PackageConfig:
    """A validated ``[tool.archguard]`` table: one field per key, each with its documentation
    (``metadata["doc"]``, docs/configuration.md's table row), its type (a ``Literal`` is a
    choice of words, the default first; ``int`` a count from 1 to 1024) and its default."""

    source: str  # "/path/pyproject.toml [tool.archguard]"; not a key
    arch_list: tuple[ArchEntry, ...] | None = field(
        default=None, metadata={"doc": "the list for every CUDA version, instead of the policy row"}
    )
    arch_list_by_cuda: Mapping[str, tuple[ArchEntry, ...]] = field(
        default_factory=dict,
        metadata={"doc": 'a table `cuXYZ = "list"`, wins over `arch_list` for that CUDA'},
    )
    policy: Path | None = field(
        default=None,
        metadata={"doc": "a policy file, relative to the project (`ARCHGUARD_POLICY` wins)"},
    )
    hardcoded_arch_specific: ArchSpecific = field(
        default=DEFAULT_ARCH_SPECIFIC,
        metadata={"doc": "what a hard-coded `sm_XYa`/`sm_XYf` nvcc target becomes (see below)"},
    )
    verify: Check | None = field(  # None: the default word, where cuobjdump is found
        default=None,
        metadata={
            "doc": "read the built binaries back after `build_ext` (the default only where "
            "cuobjdump is found; `ARCHGUARD_VERIFY` wins)",
            "default_word": DEFAULT_VERIFY,
        },
    )
    lint: Check | None = field(  # None: the default word
        default=None,
        metadata={
            "doc": "the `__CUDA_ARCH__` stub lint before compiling (`ARCHGUARD_LINT` wins)",
            "default_word": DEFAULT_LINT,
        },
    )
    nvcc_threads: int | None = field(
        default=None,
        metadata={
            "doc": "nvcc `--threads` for every CUDA compile (default: chosen per extension "
            "from its targets, sources, cores and memory; `NVCC_THREADS` and a package's own "
            "`--threads` win)"
        },
    )
    max_jobs: int | None = field(
        default=None,
        metadata={
            "doc": "parallel compile jobs (default: chosen per extension from its sources, "
            "cores and memory; `MAX_JOBS` wins)"
        },
    )
    compiler_cache: CompilerCache | None = field(  # None: the default word
        default=None,
        metadata={
            "doc": "route nvcc and the host compiler through a compile cache "
            '(`ARCHGUARD_COMPILER_CACHE` wins; see "Compile cache")',
            "default_word": DEFAULT_COMPILER_CACHE,
        },
    )
    local_version: str = field(
        default="auto",
        metadata={
            "doc": "the local version label `archguard wheel` gives each wheel for its cell: "
            '`"auto"` (default: `cu130torch2.13` for a wheel that calls torch\'s C++ ABI, '
            '`cu130` for one that uses only its stable ABI), `"off"`, or a template with '
            "`{cuda}` and `{torch}` (`--local-version` wins)"
        },
    )
    wheel_variant: bool = field(
        default=False,
        metadata={
            "doc": "`true`: `archguard wheel` also writes a wheel-variant copy of each verified "
            "wheel into `DIR/variants/` (`ARCHGUARD_WHEEL_VARIANT` wins; see `variant`)"
        },
    )

    def requested_for(self, tag: str) -> tuple[tuple[ArchEntry, ...], str] | None:
        if tag in self.arch_list_by_cuda:
            return self.arch_list_by_cuda[tag], f"{self.source} arch_list_by_cuda.{tag}"
        if self.arch_list is not None:
            return self.arch_list, f"{self.source} arch_list"
        return None


def _config_fields() -> list[Any]:
    return [f for f in fields(PackageConfig) if f.name != "source"]


def _words_of(name: str) -> tuple[str, ...] | None:
    """A choice key's words, its default first (None: not a choice)."""
    hint = get_type_hints(PackageConfig)[name]
    words = [w for a in get_args(hint) for w in (get_args(a) or ()) if isinstance(w, str)]
    if not words:
        words = [w for w in get_args(hint) if isinstance(w, str)]
    if not words:
        return None
    f = next(f for f in fields(PackageConfig) if f.name == name)
    default = f.metadata.get("default_word", f.default)
    return (default, *(w for w in words if w != default))


# The model's views, for the parser, the error text and docs/configuration.md's table
CONFIG_KEYS: dict[str, str] = {f.name: f.metadata["doc"] for f in _config_fields()}
CHOICES: dict[str, tuple[str, ...]] = {
    name: words for name in CONFIG_KEYS if (words := _words_of(name)) is not None
}
COUNTS = tuple(  # positive integers
    f.name for f in _config_fields() if get_type_hints(PackageConfig)[f.name] == (int | None)
)


def config_table() -> str:
    """docs/configuration.md's ``[tool.archguard]`` table, from the model (a test compares them)."""
    rows = ["| key | meaning |", "|---|---|"]
    for name, doc in CONFIG_KEYS.items():
        words = CHOICES.get(name)
        said = ""
        if words:
            middle = ", ".join(f'`"{w}"`' for w in words[1:-1])
            said = f'`"{words[0]}"` (default), {middle} or `"{words[-1]}"`: '
        rows.append(f"| `{name}` | {said}{doc} |")
    return "\n".join(rows) + "\n"
