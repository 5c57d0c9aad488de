"""Where a build archguard changed stands when it fails: which extension each build thread
is on, which compiled, and which compile or link raised. A build is said to have failed to
compile (``compile-failed``, naming archguard's targets) only when a compiler did; a missing
source, a link, an exception of the package's own build step is quoted as itself."""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STEPS = ("compile", "link")  # the compiler's methods watched (setuptools and torch call them)


@dataclass(frozen=True)
class StepRaised:
    """A compile or link that raised: its extension, the step, the exception, and the
    sources it was given that do not exist."""

    ext: str
    step: str
    exc: BaseException
    missing: tuple[str, ...] = ()


@dataclass
class Progress:
    """Where the build is: the extensions started (in order), the ones whose compile
    returned, each compile or link that raised, and the extension of each build thread."""

    started: list[str] = field(default_factory=list)
    called: list[str] = field(default_factory=list)  # compile was called for these
    compiled: list[str] = field(default_factory=list)  # and returned for these
    raised: list[StepRaised] = field(default_factory=list)
    here: threading.local = field(default_factory=threading.local)
    watching: list[tuple[Any, str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on(self, ext: str, compiler: Any) -> None:
        """This thread builds ``ext`` with ``compiler`` (build_ext's, made in its ``run``):
        its compile and link are watched from the first extension on (torch's
        BuildExtension has put its own compile in place by then)."""
        self.here.ext = ext
        with self.lock:
            self.started.append(ext)
            if self.watching or compiler is None or isinstance(compiler, str):
                return
            for step in STEPS:
                self.watching.append((compiler, step, vars(compiler).get(step)))
                setattr(compiler, step, self.step(step, getattr(compiler, step)))

    def unwatch(self) -> None:
        """The compiler's compile and link as they were."""
        for compiler, step, before in self.watching:
            if before is None:
                delattr(compiler, step)
            else:
                setattr(compiler, step, before)
        self.watching.clear()

    def step(self, step: str, method: Any) -> Any:
        """``method`` (the compiler's compile or link), noting what it raised."""

        def watched(*args: Any, **kwargs: Any) -> Any:
            ext = getattr(self.here, "ext", "?")
            given = (args[0] if args else kwargs.get("sources")) if step == "compile" else None
            missing = tuple(str(s) for s in given or () if not Path(s).exists())
            if step == "compile":
                self.called.append(ext)
            try:
                result = method(*args, **kwargs)
            except Exception as exc:
                self.raised.append(StepRaised(ext, step, exc, missing))
                raise
            if step == "compile":
                self.compiled.append(ext)
            return result

        return watched

    def failed(self, exc: BaseException) -> StepRaised | None:
        """The compile or link whose exception ``exc`` is, or was raised from or during."""
        chain: list[int] = []
        at: BaseException | None = exc
        while at is not None and id(at) not in chain:
            chain.append(id(at))
            at = at.__cause__ or at.__context__
        return next((r for r in reversed(self.raised) if id(r.exc) in chain), None)

    def compiler_failed(self, exc: BaseException) -> str | None:
        """The extension whose compile failed in a compiler, where ``exc`` is that failure."""
        found = self.failed(exc)
        if found is None or found.step != "compile" or found.missing:
            return None
        return found.ext if a_compiler_failed(found.exc) else None


def a_compiler_failed(exc: BaseException) -> bool:
    """setuptools' CompileError (the compiler exited non-zero, one source at a time), or
    torch's RuntimeError from its ninja run (raised from ninja's CalledProcessError)."""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"CompileError", "DistutilsExecError"}) or isinstance(
        exc.__cause__, subprocess.CalledProcessError
    )


def said(exc: BaseException) -> str:
    """The exception's own words: its type and the first line of its message (a long one,
    such as a command line, with its middle left out: its end says how it failed)."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    if not lines:
        return type(exc).__name__
    first = lines[0] if len(lines[0]) <= 300 else f"{lines[0][:150]} ... {lines[0][-140:]}"
    return f"{type(exc).__name__}: {first}"


def not_a_compile(progress: Progress, exc: BaseException) -> str:
    """archguard's last words where the build failed and no compiler did (or only in an
    extension archguard changed nothing in): where it stopped, and the exception's own words,
    the cause."""
    found = progress.failed(exc)
    compiled = list(dict.fromkeys(progress.compiled))
    why = "Not a compile failure: archguard's targets are not the cause"
    if found is not None and found.step == "compile" and not found.missing:
        where = f"extension {found.ext} failed in its compile step, and no compiler said it failed"
        if a_compiler_failed(found.exc):
            where = f"extension {found.ext} failed to compile"
            why = "archguard put no targets on it (no CUDA source): the package's own compile"
    elif found is not None and found.missing:
        where = f"extension {found.ext} names sources that do not exist: {', '.join(found.missing)}"
    elif found is not None:
        where = f"extension {found.ext} failed in its {found.step}, after its compile"
    elif progress.started and progress.started[-1] not in progress.called:
        where = (
            f"extension {progress.started[-1]} failed in a build step of its own, which "
            "compiles without setuptools' compiler (a CMake run?)"
        )
        why = (
            "archguard cannot see whether a compile failed there (the log above says); its "
            "list was in CUDAARCHS and TORCH_CUDA_ARCH_LIST"
        )
    elif progress.started:
        where = f"the build stopped after extension {progress.started[-1]}'s compile"
    else:
        where = "the build stopped before any extension was compiled"
    return (
        where
        + (f" (compiled without an error: {', '.join(compiled)})" if compiled else "")
        + f": {said(exc)!r}. {why}"
    )
