"""archguard's errors: one type per cause, each a single paragraph a person can act on.

Every error archguard raises on purpose is an :class:`ArchguardError`. The command line
and the setuptools hook print ``render()`` (``archguard error [code]: message``, plus a
detail where there is one, e.g. the whole decision table) and exit non-zero: never a
traceback. Each class carries a
stable ``code`` that the error catalogue (docs/errors.md) lists with its cause and fix.
"""

from __future__ import annotations


class ArchguardError(Exception):
    """Base class. ``str(err)`` is the one-paragraph message; ``detail`` is optional."""

    code = "archguard-error"

    def __init__(self, message: str, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail

    def __str__(self) -> str:
        return self.message

    def render(self) -> str:
        """The text shown to a person: ``archguard error [code]: message`` (+ detail)."""
        text = f"archguard error [{self.code}]: {self.message}"
        if self.detail:
            text += "\n\n" + self.detail
        return text


class InvalidArch(ArchguardError, ValueError):
    """An arch entry that is not a known CUDA arch in any accepted spelling."""

    code = "invalid-arch"


class PolicyError(ArchguardError):
    """The policy file is unreadable, not plain data, or breaks the schema."""

    code = "invalid-policy"


class ConfigError(ArchguardError):
    """``[tool.archguard]``, an ``ARCHGUARD_*`` variable or a command-line value is invalid."""

    code = "invalid-config"


class NoPolicyRow(ArchguardError):
    """The policy has no row for the toolkit's CUDA version and nothing overrides it."""

    code = "no-policy-row"


class EmptyArchList(ArchguardError):
    """Resolution left no cubin: there is nothing to build.

    ``resolution`` is the :class:`~archguard.core.resolve.Resolution` that came out empty; the
    code that prints the error attaches its decision table as the detail
    (:func:`archguard.reports.text.render_error`).
    """

    code = "empty-arch-list"

    def __init__(self, message: str, *, resolution: object = None) -> None:
        super().__init__(message)
        self.resolution = resolution


class UnknownToolkit(ArchguardError):
    """A hypothetical CUDA version that the bundled toolkit table does not describe."""

    code = "unknown-toolkit"


class UnknownTorchBuild(ArchguardError):
    """A hypothetical torch that the bundled torch table does not describe."""

    code = "unknown-torch-build"


class TorchNotFound(ArchguardError):
    """torch is not importable where archguard looked for it."""

    code = "torch-missing"


class TorchNotCuda(ArchguardError):
    """The installed torch is a CPU-only or ROCm build: it cannot build CUDA extensions."""

    code = "torch-not-cuda"


class NvccNotFound(ArchguardError):
    """No nvcc where torch's ``cpp_extension`` would look for one."""

    code = "nvcc-missing"


class NvccUnusable(ArchguardError):
    """nvcc was found but did not answer ``--version`` / ``--list-gpu-code`` as expected."""

    code = "nvcc-unusable"


class CudaMismatch(ArchguardError):
    """torch was built for another CUDA major version than the nvcc that would compile."""

    code = "cuda-major-mismatch"


class NvccFlagError(ArchguardError):
    """A package hard-codes an nvcc arch flag that archguard cannot clamp."""

    code = "unsupported-arch-flag"


class ArchSpecificFlag(ArchguardError):
    """A package hard-codes an ``a``/``f`` target and ``hardcoded_arch_specific = "error"``."""

    code = "hardcoded-arch-specific"


class EmptyExtension(ArchguardError):
    """One extension's own targets (its hard-coded intent, the clamps, the lint's proofs)
    leave no cubin."""

    code = "empty-extension"


class CompileFailed(ArchguardError):
    """A compile failed in a build archguard changed: which extension, the targets
    archguard added beyond the package's own, and the line that leaves them out."""

    code = "compile-failed"


class IndexUnreachable(ArchguardError):
    """The package index could not be read (offline, a bad index, no project page): watch,
    the families, a release's fetch."""

    code = "index-unreachable"


class ReleaseNotFetched(ArchguardError):
    """``name==version``'s sdist could not be fetched from the index: no sdist of that
    release there, the index unreachable, or a download whose sha256 is not the one the
    index publishes."""

    code = "release-not-fetched"


class CellEnvironmentFailed(ArchguardError):
    """A farm cell's environment could not be made: uv failed (no such Python, a torch or
    package its index lacks) or the made cell lacks an extra of archguard its manifest's
    switches need (``variants``)."""

    code = "cell-environment-failed"


class ContainerRuntimeMissing(ArchguardError):
    """A farm cell names ``container = "IMAGE"`` and neither docker nor podman is on
    ``PATH`` to run its jobs in that image (``farm plan`` and ``farm run`` refuse it before
    anything is made)."""

    code = "container-runtime-missing"


class ToolError(ArchguardError):
    """A tool archguard runs for a build or a watch (pip resolving or installing a package's
    build requirements, pip downloading a wheel) exited with an error: its own last lines are
    quoted. Never a config error: the input may be right and the tool, its index or the
    network wrong."""

    code = "tool-failed"

    def __init__(self, message: str, *, tool: str = "", detail: str | None = None) -> None:
        super().__init__(message, detail=detail)
        self.tool = tool  # which tool failed ("pip", "auditwheel", "uv", ...), for callers


class IntegrityMismatch(ArchguardError):
    """A file's bytes are not the ones pinned for it: a download, a cached copy or a given
    file whose sha256 differs from the one the index publishes, a ``#sha256=`` pin or a
    ``--sha256``. Never retried silently: the file is refused."""

    code = "integrity-mismatch"


class FetchFailed(ArchguardError):
    """A download failed: the server refused it, the network dropped, or it timed out.
    The input may be right; the network or the server is not."""

    code = "fetch-failed"


class SourceUnusable(ArchguardError):
    """A source that was found but cannot be built from: an sdist that does not unpack or
    holds no ``setup.py``/``pyproject.toml``, a tree that cannot be read, a Python without
    safe tar extraction to unpack it."""

    code = "source-unusable"


class ExtraMissing(ArchguardError):
    """A feature needs a package of one of archguard's extras that is not installed
    (``tomli-w`` for the farm's per-package configuration: the ``farm`` extra)."""

    code = "extra-missing"


class Busy(ArchguardError):
    """A lock another archguard process holds (a site being published, a cache entry being
    made) and the caller asked not to wait."""

    code = "busy"


class SiteUnreadable(ArchguardError):
    """``archguard which`` could not read a farm's site (no site.json, unreachable, not one)."""

    code = "site-unreadable"


class VariantsUnavailable(ArchguardError):
    """``archguard variant`` needs ``variantlib`` (the ``variants`` extra), not installed."""

    code = "variantlib-missing"


class CompilerCacheMissing(ArchguardError):
    """``compiler_cache`` names a cache (sccache, ccache) that is not installed."""

    code = "compiler-cache-missing"


class BuildVerifyFailed(ArchguardError):
    """After ``build_ext``, a built binary does not hold the targets it was built for."""

    code = "verify-failed"


class NotRepresentable(ArchguardError):
    """The effective list cannot be written in the requested output format."""

    code = "not-representable"

    def __init__(self, message: str, *, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems  # each entry that cannot be written, with why


class CuobjdumpNotFound(ArchguardError):
    """A command that reads binaries (verify, probe-torch, variant, doctor, watch --probe,
    archguard wheel, the build's read-back) needs cuobjdump and found none."""

    code = "cuobjdump-missing"


class NvdisasmNotFound(ArchguardError):
    """``verify --stubs`` needs nvdisasm (``cuobjdump -sass``) and found none."""

    code = "nvdisasm-missing"


class StubHazard(ArchguardError):
    """The lint found guarded code a served device runs compiled out, and ``lint = "error"``."""

    code = "stub-hazard"


class BinaryReadError(ArchguardError):
    """``verify`` could not read a wheel, a shared object or cuobjdump's answer."""

    code = "unreadable-binary"


ALL_ERRORS: tuple[type[ArchguardError], ...] = (
    InvalidArch,
    PolicyError,
    ConfigError,
    NoPolicyRow,
    EmptyArchList,
    UnknownToolkit,
    UnknownTorchBuild,
    TorchNotFound,
    TorchNotCuda,
    NvccNotFound,
    NvccUnusable,
    CudaMismatch,
    NvccFlagError,
    ArchSpecificFlag,
    EmptyExtension,
    CompileFailed,
    IndexUnreachable,
    ReleaseNotFetched,
    CellEnvironmentFailed,
    ContainerRuntimeMissing,
    ToolError,
    IntegrityMismatch,
    FetchFailed,
    SourceUnusable,
    ExtraMissing,
    Busy,
    SiteUnreadable,
    VariantsUnavailable,
    CompilerCacheMissing,
    BuildVerifyFailed,
    NotRepresentable,
    CuobjdumpNotFound,
    NvdisasmNotFound,
    StubHazard,
    BinaryReadError,
)
