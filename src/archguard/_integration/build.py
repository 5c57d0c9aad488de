"""What archguard changes inside a build, and puts back: the environment and each CUDA
extension's nvcc arguments (planned by :func:`archguard.nvcc.plan.plan_extension`); then what it
checks after the build (the binaries read back) and records in the wheel.

Torch ignores ``TORCH_CUDA_ARCH_LIST`` as soon as any nvcc flag contains the text "arch"
(an include directory under ``monarch/`` is enough), and cannot spell ``f`` targets or plain
PTX for an ``a`` arch. So archguard does not rely on it: it removes every arch flag from each
CUDA extension's nvcc arguments and appends the exact ``-gencode`` flags of that extension's
targets (the effective list, with the package's own hard-coded ``a``/``f`` targets kept).
Torch then sees "arch" in the flags and adds none of its own. ``TORCH_CUDA_ARCH_LIST`` (where
torch can spell the list) and ``CUDAARCHS`` (CMake's default for
``CMAKE_CUDA_ARCHITECTURES``) are set to the effective list for build steps archguard cannot
put flags into, e.g. a CMake step.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from archguard._integration.abi import record_abi
from archguard._integration.common import (
    announce_once,
    is_torch_build_extension,
    project_root,
    say,
)
from archguard._integration.environment import Planned, compiler_cache, complete_toolkit
from archguard._integration.jobserver import build_jobserver, launched
from archguard._integration.parallel import parallel
from archguard._integration.postbuild import verify_build
from archguard._integration.prebuild import lint_build
from archguard._integration.progress import Progress, not_a_compile
from archguard._integration.reproducible import for_build
from archguard._integration.session import Session, session_for, setup_error
from archguard.binaries.record import (
    extension_record,
    path_free,
    unseen_extension_record,
    wheel_record,
    write_record,
)
from archguard.core.arch import Targets
from archguard.detect.sources import CUDA_FILES, tree_files
from archguard.errors import ArchguardError, CompileFailed
from archguard.nvcc.flags import threads_flag
from archguard.nvcc.parallel import (
    Choice,
)
from archguard.nvcc.plan import ExtensionPlan, Rule, list_text, plan_extension
from archguard.reports.text import extension_lines
from archguard.settings.config import (
    env_disabled,
    env_enabled,
)
from archguard.settings.optin import ENV_ENABLE

NVCC_KEYS = ("nvcc", "nvcc_dlink")


def _has_cuda_sources(ext: Any) -> bool:
    return any(str(s).endswith(CUDA_FILES) for s in getattr(ext, "sources", ()))


def _tree_has_cuda_sources(root: str) -> bool:
    """Does the source tree hold a .cu/.cuh file? (The one bounded tree walk.)"""
    return any(name.endswith(CUDA_FILES) for name in tree_files(root))


def cuda_extensions(extensions: list[Any], root: str, farm: bool) -> list[Any]:
    """The extensions archguard acts on: those with CUDA sources, and source-less ones (a
    CMake step builds them) - in farm mode only when the source tree holds CUDA sources, so
    that a C/C++-only package never notices archguard. ``nvcc`` flags on an extension of
    C/C++ sources alone do not count: torch never runs nvcc on them, and a CPU fallback
    (``CppExtension`` sharing the CUDA variant's flags) must build on a CPU-only torch."""
    direct = [e for e in extensions if _has_cuda_sources(e)]
    sourceless = [e for e in extensions if not getattr(e, "sources", None) and e not in direct]
    if sourceless and (not farm or _tree_has_cuda_sources(root)):
        direct += sourceless
    return direct


@contextmanager
def _variables(values: dict[str, str | None]) -> Iterator[None]:
    """Set (value) or unset (None) each variable for the build; restore all afterwards."""
    before = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _build_variables(session: Session) -> dict[str, str | None]:
    """TORCH_CUDA_ARCH_LIST and CUDAARCHS for the build, each pre-set value named."""
    values = {
        "TORCH_CUDA_ARCH_LIST": session.torch_arch_list,
        "CUDAARCHS": session.cudaarchs,
    }
    for name, value in values.items():
        before = os.environ.get(name)
        if before is not None and before != value:
            session.replaced[name] = before
            say(
                f"warning: {name}={before!r} was set in the environment; replaced by "
                f"{value!r} for this build (archguard's effective list)"
            )
    return values


def _activation(cmd: Any) -> bool:
    """True when the package itself opted in; False when only ARCHGUARD_ENABLE did."""
    return getattr(cmd.distribution, "_archguard_activation", "package") != "environment"


def _extension_file(cmd: Any, ext: Any) -> str:
    """The extension's path inside the wheel (``pkg/_C.cpython-311-x86_64-linux-gnu.so``)."""
    try:
        return str(cmd.get_ext_filename(cmd.get_ext_fullname(ext.name))).replace(os.sep, "/")
    except Exception:  # an unusual build_ext; the record then matches by name
        return ""


def _nvcc_arg_lists(cmd: Any, ext: Any, torch_cmd: bool) -> dict[str, list[str]] | None:
    """The extension's nvcc argument lists, or None (with a warning) when archguard cannot
    see its nvcc line."""
    original = ext.extra_compile_args
    if isinstance(original, dict):
        args = {k: list(v) for k, v in original.items()}
        if "nvcc" not in args and not torch_cmd:
            say(
                f"warning: extension {ext.name}: {type(cmd).__name__} is not "
                "torch's BuildExtension and the extension has no 'nvcc' flags; "
                "archguard cannot see its nvcc line. Check the wheel with "
                "`archguard verify`."
            )
            return None
        args.setdefault("nvcc", [])
        return args
    if torch_cmd:
        flat = list(original or [])
        return {"cxx": flat, "nvcc": list(flat)}  # torch uses a list for both
    say(
        f"warning: extension {ext.name}: {type(cmd).__name__} is not torch's "
        "BuildExtension; archguard set TORCH_CUDA_ARCH_LIST and CUDAARCHS but cannot see the "
        "nvcc line. Check the wheel with `archguard verify`."
    )
    return None


def _farm_gate(cmd: Any, root: str) -> bool:
    """In farm mode (the package did not opt in): is ARCHGUARD_ENABLE on and
    ARCHGUARD_DISABLE off? Announced once."""
    try:
        enabled = env_enabled(os.environ)
        disabled = env_disabled(os.environ)
    except ArchguardError as exc:
        raise setup_error(exc) from None
    if not enabled or disabled:  # ARCHGUARD_DISABLE wins; session_for announces it
        if disabled:
            session_for(cmd.distribution)
        return False
    announce_once(
        "enabled",
        f"enabled by {ENV_ENABLE}={os.environ[ENV_ENABLE]} for {root}: the package does "
        "not opt in itself (no [tool.archguard], no torch-archguard in "
        "build-system.requires)",
    )
    return True


def _plan(
    cmd: Any, session: Session, cuda: list[Any], proofs: dict[str, dict[str, str]] | None = None
) -> Planned:
    """Each CUDA extension whose nvcc line archguard sees, with its plan; the others are
    recorded as unseen. ``proofs``: per extension, targets the lint proves an #error for."""
    torch_cmd = is_torch_build_extension(type(cmd))
    planned: Planned = []
    for ext in cuda:
        args = _nvcc_arg_lists(cmd, ext, torch_cmd) if _has_cuda_sources(ext) else None
        if args is None:
            session.add_extension(
                ext.name,
                unseen_extension_record(session.resolution, ext.name, _extension_file(cmd, ext)),
                session.resolution.targets,
            )
            continue
        keys = {k: args[k] for k in NVCC_KEYS if k in args}
        proven = (proofs or {}).get(ext.name)
        try:
            plan = plan_extension(ext.name, keys, session.resolution, session.arch_specific, proven)
        except ArchguardError as exc:  # a decision (an empty list, a refused flag): it stops
            raise setup_error(exc) from None
        except Exception as exc:  # archguard's own reading of the flags failed: not a decision
            flags = " ".join(str(f) for f in keys.get("nvcc", []))
            say(
                f"warning: extension {ext.name}: archguard could not plan its nvcc flags "
                f"({flags[:200]!r}: {type(exc).__name__}: {str(exc)[:200]}); it builds with "
                "its own flags and TORCH_CUDA_ARCH_LIST (the effective list)"
            )
            session.add_extension(
                ext.name,
                unseen_extension_record(session.resolution, ext.name, _extension_file(cmd, ext)),
                session.resolution.targets,
            )
            continue
        planned.append((ext, args, plan))
    return planned


def _compile_failed(planned: Planned, failing: str | None) -> str:
    """archguard's last words when a compile fails: the extension, the targets archguard
    added beyond the package's own, and the config line that leaves them out."""
    lines = []
    for ext, _, plan in planned:
        if failing is not None and ext.name != failing:
            continue
        own = plan.hard.names()
        added = plan.added
        ours = Targets(plan.targets.cubins & plan.hard.cubins, plan.targets.ptx & plan.hard.ptx)
        entries = list_text(ours if ours.cubins else plan.targets)
        lines.append(
            f"extension {ext.name} failed to build with {' '.join(plan.targets.names())} "
            f"({plan.intent.rule}: {plan.intent.reason}). "
            + (
                f"archguard added {' '.join(added)} beyond what the package hard-codes "
                f"({' '.join(own) or 'nothing'}). "
                if added
                else "archguard added nothing beyond what the package hard-codes. "
            )
            + (
                "To leave them out: "
                if ours.cubins
                else "To leave out the targets that fail, remove them from "
            )
            + f'[tool.archguard] arch_list = "{entries}" in the file ARCHGUARD_CONFIG names '
            f'(or ARCHGUARD_ARCH_LIST="{entries}"); to build without archguard, '
            "ARCHGUARD_DISABLE=1."
        )
    return " ".join(lines)


@contextmanager
def _tracking(cmd: Any, progress: Progress, jobs: dict[str, str]) -> Iterator[None]:
    """Note which extension ``build_extension`` is on and what its compiler's compile and
    link raised (for the failure's last words), and give its ninja run the MAX_JOBS chosen
    for it."""
    own = vars(cmd).get("build_extension")
    original = cmd.build_extension

    def build_extension(ext: Any) -> Any:
        progress.on(ext.name, getattr(cmd, "compiler", None))
        if ext.name not in jobs:
            return original(ext)
        with _variables({"MAX_JOBS": jobs[ext.name]}):
            return original(ext)

    cmd.build_extension = build_extension
    try:
        yield
    finally:
        progress.unwatch()
        if own is None:
            del cmd.build_extension
        else:
            cmd.build_extension = own


def _acting_on(cmd: Any) -> tuple[Session, list[Any]] | None:
    """The build's session and the CUDA extensions archguard acts on; None when it stays
    out (no CUDA extension, farm mode's gate closed, or no session)."""
    extensions = list(getattr(cmd, "extensions", None) or ())
    opted = _activation(cmd)
    root = project_root(cmd.distribution)
    cuda = cuda_extensions(extensions, root, farm=not opted)
    if not cuda:
        if opted and extensions:
            announce_once("no-cuda", "no CUDA sources among the extensions: no arch list to choose")
        return None
    if not opted and not _farm_gate(cmd, root):
        return None
    session = session_for(cmd.distribution)
    return None if session is None else (session, cuda)


def _planned_and_linted(cmd: Any, session: Session, cuda: list[Any]) -> Planned:
    """Each extension's plan; planned again without the targets the lint proves reach an
    ``#error``."""
    planned = _plan(cmd, session, cuda)
    proofs = lint_build(cmd, session, planned)
    if not proofs:
        return planned
    planned = _plan(cmd, session, cuda, proofs)
    for ext, _, plan in planned:
        for target, why in sorted(plan.left_out.items()):
            if target in plan.proven:
                say(f"extension {ext.name}: dropped {target} before compiling: {why}")
    return planned


@contextmanager
def archguard_build(cmd: Any) -> Iterator[None]:
    """Around ``build_ext.run``: each CUDA extension's targets on its nvcc line, the list
    in the environment, and afterwards the built binaries read back.

    Extensions that are all C/C++ sources (a CPU fallback such as ``CppExtension``) need no
    arch list: archguard says so and stays out, so a CPU-only torch can still build them.
    In farm mode (``ARCHGUARD_ENABLE``, the package did not opt in) a build with no CUDA
    extension is left alone without a word.
    """
    acting = _acting_on(cmd)
    if acting is None:
        yield
        return
    session, cuda = acting
    res = session.resolution
    planned = _planned_and_linted(cmd, session, cuda)
    choices = parallel(cmd, session, planned)
    saved_dirs = [(ext, getattr(ext, "library_dirs", None)) for ext, _, _ in planned]
    cache_values, cache_report = compiler_cache(cmd, session)
    variables = {
        **_build_variables(session),
        **complete_toolkit(cmd, session, planned),
        **cache_values,
    }
    repro = for_build(cmd, session, planned, variables)
    saved: list[tuple[Any, Any]] = []
    started = time.time()
    progress = Progress()
    try:
        ninja_shim = Path(cmd.build_temp).resolve() / "archguard-ninja-bin"
        own_steps = any(not getattr(ext, "sources", None) for ext, _, _ in planned)
        with build_jobserver(choices, variables, ninja_shim, own_steps=own_steps) as joined:
            variables |= joined.variables
            for name in joined.launched:
                choices[name] = launched(choices[name], joined, name)
            session.parallel = {n: c.record() for n, c in choices.items()}
            with _variables(variables), _tracking(cmd, progress, joined.jobs):
                for ext, args, plan in planned:
                    _apply(
                        ext,
                        args,
                        plan,
                        choices[ext.name],
                        res,
                        threads=ext.name not in joined.launched,
                    )
                    args["nvcc"] = [*args["nvcc"], *repro.nvcc_for(ext.sources, cmd.build_temp)]
                    if "cxx" in args:  # torch's default is none: a dict without it has no C++
                        args["cxx"] = [*args["cxx"], *repro.cxx]
                    saved.append((ext, ext.extra_compile_args))
                    ext.extra_compile_args = args
                    record = extension_record(plan, _extension_file(cmd, ext))
                    session.add_extension(ext.name, record, plan.targets)
                try:
                    yield
                except Exception as exc:  # the package's own exception goes on unchanged
                    if planned and not isinstance(exc, ArchguardError):
                        failing = progress.compiler_failed(exc)  # only where a compiler failed
                        say(
                            f"error: {CompileFailed.code}: {_compile_failed(planned, failing)}"
                            if failing in {e.name for e, _, _ in planned}
                            else f"error: {not_a_compile(progress, exc)}"
                        )
                    raise
    finally:
        for ext, original in saved:
            ext.extra_compile_args = original
        for ext, dirs in saved_dirs:
            ext.library_dirs = dirs
    if cache_report is not None:
        cache_report()
    verify_build(cmd, session, [e.name for e in cuda], started)
    record_abi(cmd, session)


def _apply(  # noqa: PLR0913 - each a fact of this extension's compile
    ext: Any,
    args: dict[str, list[str]],
    plan: ExtensionPlan,
    choice: Choice,
    res: Any,
    *,
    threads: bool,
) -> None:
    """Log the plan of one extension and put its nvcc arguments into ``args``."""
    say(f"extension {ext.name}: {plan.intent.rule}: {plan.intent.reason}")
    for key in plan.args:
        for line in plan.per_key[key]["dropped"]:
            say(f"warning: {line}")
        for line in plan.per_key[key]["replaced"]:
            say(line)
        args[key] = plan.args[key]
    by_reason: dict[str, list[str]] = {}
    for target in plan.left_out:
        if target not in plan.proven:
            by_reason.setdefault(plan.left_out[target], []).append(target)
    if plan.intent.rule is Rule.ARCH_SPECIFIC_ONLY:
        by_reason = {}  # the rule's line says it
    for why, targets in by_reason.items():
        say(f"extension {ext.name}: left out {' '.join(targets)}: {why}")
    if threads and threads_flag(args["nvcc"]) is None:  # else the launcher sets them
        args["nvcc"] = [*args["nvcc"], "--threads", str(choice.threads)]
    say(f"extension {ext.name}: nvcc gets {' '.join(plan.gencode)}")
    for line in extension_lines(plan, res):
        say(line)


def record_into(dist: Any, dist_info: Path) -> None:
    """Write the build's resolution into the wheel's ``.dist-info`` (``archguard.json``)."""
    session: Session | None = getattr(dist, "_archguard_session", None)
    if session is None or not dist_info.is_dir():
        return
    record = path_free(wheel_record(session.resolution, session), project_root(dist))
    path = write_record(dist_info, record)
    say(f"recorded the resolution in {dist_info.name}/{path.name}")
