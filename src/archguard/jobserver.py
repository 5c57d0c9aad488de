"""GNU make's jobserver: one set of tokens shared by every build a farm run (or one build)
starts, so that no core idles while another build could use it and none is oversubscribed.
This module is the protocol (the FIFO, its :class:`Client` and :class:`Server`, the
``MAKEFLAGS`` that name it, the ninja shim) and archguard's nvcc launcher; each layer's use of
it is its own ``jobserver`` module: the hook's (:mod:`archguard._integration.jobserver`), the
front-end's for other backends (:mod:`archguard.frontend.jobserver`), a farm run's
(:mod:`archguard.farm.jobserver`). Its setting, ``ARCHGUARD_JOBSERVER`` or a make's
``MAKEFLAGS``, is read once by :func:`archguard.settings.config.jobserver_setting`.

The protocol (GNU make 4.4, "POSIX Jobserver"): a named FIFO holds one byte per free token,
and ``MAKEFLAGS`` names it (``--jobserver-auth=fifo:PATH``). Each client already holds one
implicit token (the one its parent took to start it); for each further job it reads a byte
from the FIFO and writes the same byte back when the job ends. ninja 1.13 is such a client
when it is given no ``-j`` (measured: with ``-j`` it ignores the jobserver); make 4.4 and
cargo are too.

Run as a script (``python -I -S .../archguard/jobserver.py FIFO COMMAND...``) this is
archguard's nvcc launcher (``PYTORCH_NVCC``). Where ``COMMAND`` is a plain nvcc with
``-objtemp`` and several device passes, it runs nvcc's own steps (``nvcc -dryrun``) itself:
the host preprocessing, then each device pass (preprocess, cicc, ptxas) on a token of its
own, the first on the compile's, each other as a token comes free, however late (issue 57:
a compile that started when the others held every token no longer runs its passes alone on
one core after they end), then fatbinary and the host compile; the same commands, so the
same bytes as nvcc's own (tested). Otherwise it takes the tokens free as the compile
starts, at most one fewer than its device compiles, runs ``COMMAND`` with ``--threads`` of
one plus those, and gives them back when it ends, whatever ends it. A compile whose command
already names ``--threads`` (the package's or the user's) runs as it is; so does one whose
jobserver is gone.

Only the standard library is imported: the launcher runs once per nvcc call.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

AUTH = "--jobserver-auth="
TOKEN = b"+"
PREFIX = "jobserver-"  # the FIFOs a server makes in its directory
NVCC_STEPS = "ARCHGUARD_NVCC_STEPS"  # 0: run nvcc whole (settings.config.ENV_NVCC_STEPS)
_ARCH = re.compile(r"compute_(\d+[a-z]?)")  # anchored on a fixed word: linear


def fifo_of(makeflags: str) -> str | None:
    """The FIFO a ``MAKEFLAGS`` value names (``--jobserver-auth=fifo:PATH``; the last such
    word wins, as make reads it), or None: no jobserver, or one passed as inherited file
    descriptors (``R,W``), which a process started by pip cannot rely on."""
    found = None
    for word in makeflags.split():
        if word.startswith(AUTH):
            value = word[len(AUTH) :]
            found = value[len("fifo:") :] if value.startswith("fifo:") else None
    return found or None


def makeflags(fifo: str | Path, width: int) -> str:
    """The ``MAKEFLAGS`` that give a client the jobserver ``fifo`` of ``width`` jobs."""
    return f"-j{width} {AUTH}fifo:{fifo}"


class Client:
    """One holder's end of a jobserver: :meth:`take` never waits, :meth:`wait_one` does."""

    def __init__(self, path: str) -> None:
        self.path = path
        # read and write on one descriptor: the FIFO always has a writer, so an empty FIFO
        # reads as "would block", never as the end of the file
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)

    def take(self, most: int) -> bytes:
        """Up to ``most`` free tokens, without waiting."""
        got = b""
        while len(got) < most:
            try:
                chunk = os.read(self.fd, most - len(got))
            except BlockingIOError:
                break
            if not chunk:
                break
            got += chunk
        return got

    def wait_one(self) -> bytes:
        """One token, waiting until one is free (the FIFO always has a writer: this one)."""
        while True:
            select.select([self.fd], [], [])
            got = self.take(1)
            if got:  # another holder may have read it first
                return got

    def give(self, tokens: bytes) -> None:
        """The tokens back, the same bytes taken."""
        view = memoryview(tokens)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:  # a FIFO holds at most its server's tokens: never full
                select.select([], [self.fd], [], 1.0)

    def wait_first(self) -> tuple[bytes, str]:
        """A build's first token (:meth:`wait_one`), and the words the log gives it."""
        started = time.monotonic()
        token = self.wait_one()
        waited = time.monotonic() - started
        return token, f"its first token taken{f' after {waited:.0f} s' if waited >= 1 else ''}"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def unreachable(path: str) -> str | None:
    """Why the jobserver ``path`` cannot be opened (a run that ended, a file system without
    FIFOs), or None: it can."""
    try:
        Client(path).close()
    except OSError as exc:
        return str(exc)
    return None


class Server:
    """A jobserver this process serves: a FIFO of ``tokens`` tokens in ``directory``, removed
    on :meth:`close`. FIFOs left in the directory by a server whose process is gone (a killed
    run) are removed when the next server is made there: their tokens die with them."""

    def __init__(self, directory: Path, tokens: int, width: int | None = None) -> None:
        """``tokens`` in the FIFO; ``width``: the jobs at once it stands for (``-jN``), the
        tokens and the implicit one of the client this process starts (default: tokens)."""
        directory.mkdir(parents=True, exist_ok=True)
        self.stale = _remove_stale(directory)
        self.tokens = max(0, tokens)
        self.width = width or max(1, tokens)
        self.path = directory / f"{PREFIX}{os.getpid()}"
        self.path.unlink(missing_ok=True)
        os.mkfifo(self.path, 0o600)
        self.client = Client(str(self.path))
        self.client.give(TOKEN * self.tokens)
        self.returned: int | None = None  # what close() found back in the FIFO

    @property
    def makeflags(self) -> str:
        return makeflags(self.path, self.width)

    def close(self) -> int:
        """Remove the FIFO; how many tokens were back in it (all, unless a holder was
        killed before it could give its own back)."""
        self.returned = len(self.client.take(self.tokens + 64))
        self.client.close()
        self.path.unlink(missing_ok=True)
        return self.returned


@contextlib.contextmanager
def serve(width: int) -> Iterator[Server]:
    """A jobserver of ``width`` jobs for one process's builds, in a directory of its own
    under the temporary directory, removed at the end: ``width - 1`` tokens in the FIFO, the
    one build that runs at a time holding the other."""
    directory = Path(tempfile.mkdtemp(prefix="archguard-jobserver-"))
    server = Server(directory, width - 1, width)
    try:
        yield server
    finally:
        server.close()
        shutil.rmtree(directory, ignore_errors=True)


def ninja_shim(shim: Path, ninja: str, makeflags: str) -> Path:
    """``shim/ninja``: ``ninja`` given the jobserver in its own ``MAKEFLAGS`` (put first on a
    build's ``PATH``, or named to CMake as its make program: the build's other tools never
    see it, a GNU make older than 4.4 included, which stops on it)."""
    shim.mkdir(parents=True, exist_ok=True)
    script = shim / "ninja"
    script.write_text(
        f"#!/bin/sh\nMAKEFLAGS={shlex.quote(makeflags)}\nexport MAKEFLAGS\n"
        f'exec {shlex.quote(ninja)} "$@"\n'
    )
    script.chmod(0o755)
    return script


def _remove_stale(directory: Path) -> list[str]:
    removed = []
    for path in directory.glob(f"{PREFIX}*"):
        pid = path.name[len(PREFIX) :]
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path.name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def has_threads(argv: list[str]) -> bool:
    return any(a in ("--threads", "-t") or a.startswith(("--threads=", "-t=")) for a in argv)


def device_compiles(argv: list[str]) -> int:
    """How many device compiles one nvcc call runs: one per virtual arch its ``-gencode``
    flags name (at least 1)."""
    arches = set()
    for arg in argv:
        if "arch=" in arg or arg.startswith(("-arch", "--gpu-architecture")):
            arches.update(_ARCH.findall(arg.split(",", 1)[0]) or _ARCH.findall(arg))
    return max(1, len(arches))


_PRELUDE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")  # anchored, one quantifier each


@dataclass
class DryRun:
    """An nvcc call as the steps ``nvcc -dryrun`` lists: its environment, the steps before
    the device passes (host preprocessing, cudafe++), one list of steps per device pass
    (preprocess, cicc, ptxas: independent of each other, as ``--threads`` runs them), and the
    steps after (fatbinary, the host compile, the removal of the intermediates)."""

    env: dict[str, str]
    before: list[str]
    passes: list[list[str]]
    after: list[str]
    depfile: str | None = None  # nvcc's -MF: written from the preprocessing steps' own


def dry_run(argv: list[str]) -> DryRun | None:
    """``argv``'s steps, or None where it is not one archguard runs step by step: not a plain
    nvcc with ``-objtemp`` (intermediates named after the object: two calls never share one),
    fewer than two device passes, a step of a kind not measured (``nvlink``: relocatable
    device code), or a dry run that failed."""
    if Path(argv[0]).name != "nvcc" or "-objtemp" not in argv or device_compiles(argv) < 2:
        return None
    try:
        proc = subprocess.run(
            [*argv, "-dryrun"], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    env: dict[str, str] = {}
    steps: list[str] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("#$ "):
            return None  # nvcc said something else: run it as it is
        text = line[3:].strip()
        found = _PRELUDE.match(text)
        if found and not steps:
            raw = found[2].strip()
            if not raw.startswith('"'):
                env[found[1]] = raw  # as nvcc sets it: unquoted, spaces and all
                continue
            try:
                words = shlex.split(raw)
            except ValueError:
                return None
            if len(words) == 1:  # a list of words (INCLUDES) is in the steps already
                env[found[1]] = words[0]
            continue
        steps.append(text)
    return _staged(env, steps, _output(argv))


def _output(argv: list[str]) -> str | None:
    """The object an nvcc call writes (``-o FILE``, ``-o=FILE``, ``--output-file[=]FILE``)."""
    for i, arg in enumerate(argv):
        if arg in ("-o", "--output-file") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(("--output-file=", "-o=")):
            return arg.split("=", 1)[1]
    return None


_FILTER = re.compile(r"^-- Filter Dependencies -- > (.+)$")  # nvcc's -MD, done inside it
_CICC_ARCH = re.compile(r" -arch compute_([0-9]+[af]?) ")
_GCC_ARCH = re.compile(r"-D__CUDA_ARCH__=([0-9]+)0 ")


def _staged(env: dict[str, str], steps: list[str], obj: str | None) -> DryRun | None:
    """The steps in stages: a device pass's preprocessing (``-D__CUDA_ARCH__``) and its cicc
    and ptxas, in the order nvcc lists them (the passes' preprocessing first where nvcc
    writes a dependency file); the other steps before fatbinary (host preprocessing,
    cudafe++, whose module id every cicc reads) before the passes; fatbinary and all after
    it after them. The dependency file nvcc writes itself (``-- Filter Dependencies --``) is
    written by the host preprocessing (``-MD -MF FILE -MT OBJECT``)."""
    depfile: list[str] = []  # where nvcc writes the dependencies, if it does
    sorted_ = _sorted(steps, obj, depfile)
    if sorted_ is None:
        return None
    before, preprocess, compiles, after = sorted_
    if depfile and obj is not None:  # the device passes' headers too, as nvcc's own file has
        preprocess = [p + _deps_flags(depfile[0], str(i), obj) for i, p in enumerate(preprocess)]
    if len(compiles) < 2 or len(preprocess) != len(compiles) or not after:
        return None
    passes = []
    for pre, chain in zip(preprocess, compiles, strict=True):
        cc = _GCC_ARCH.search(pre)
        arch = _CICC_ARCH.search(chain[0] + " ")
        if cc is None or arch is None or not arch[1].startswith(cc[1]):
            return None  # not the pass nvcc listed in this order
        passes.append([pre, *chain])
    if any("nvlink" in s for s in (*before, *after)):
        return None
    return DryRun({**os.environ, **env}, before, passes, after, depfile[0] if depfile else None)


def _deps_flags(depfile: str, part: str, obj: str) -> str:
    return f" -MD -MF {shlex.quote(f'{depfile}.{part}')} -MT {shlex.quote(obj)}"


_DEP_WORD = re.compile(r"(?:\\.|[^\s\\])+")  # a word of a make rule: escapes kept, linear


def merge_deps(depfile: str, parts: int) -> None:
    """nvcc's dependency file, from the host's and each device pass's own (``FILE.host``,
    ``FILE.0``...): one rule, the object's, naming each file once, in the order first met."""
    target = ""
    seen: dict[str, None] = {}
    for part in ["host", *map(str, range(parts))]:
        path = Path(f"{depfile}.{part}")
        text = path.read_text(encoding="utf-8", errors="surrogateescape").replace("\\\n", " ")
        head, _, body = text.partition(": ")
        target = target or head.strip()
        seen.update(dict.fromkeys(_DEP_WORD.findall(body)))
        path.unlink()
    lines = [f"{target} : \\", *(f"    {word} \\" for word in seen)]
    Path(depfile).write_text(
        "\n".join(lines).rstrip(" \\") + "\n", encoding="utf-8", errors="surrogateescape"
    )


def _sorted(
    steps: list[str], obj: str | None, depfile: list[str]
) -> tuple[list[str], list[str], list[list[str]], list[str]] | None:
    """(before, the passes' preprocessing, their cicc and ptxas, after), or None: a step of
    a kind not measured among the passes."""
    before: list[str] = []
    preprocess: list[str] = []
    compiles: list[list[str]] = []
    after: list[str] = []
    for step in steps:
        filtered = _FILTER.match(step)
        if after or step.startswith("fatbinary "):
            after.append(step)
        elif filtered:
            if obj is None or not before or " -E " not in before[-1]:
                return None
            depfile[:] = [filtered[1].strip()]
            before[-1] += _deps_flags(depfile[0], "host", obj)
        elif _GCC_ARCH.search(step) and " -E " in step:
            preprocess.append(step)
        elif step.startswith(('"$CICC_PATH/cicc" ', "cicc ")):
            compiles.append([step])
        elif step.startswith("ptxas ") and compiles:
            compiles[-1].append(step)
        elif compiles or not step.startswith(("gcc ", "cudafe++ ")):
            return None
        else:
            before.append(step)
    return before, preprocess, compiles, after


class _Steps:
    """The running steps of one compile: started in the compile's environment, stopped
    together by a signal. The signal handler takes no lock (it runs in the thread it
    interrupts): it marks the compile stopped and signals the children started so far; a
    step started after that sees the mark and is signalled by its starter."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: list[subprocess.Popen[bytes]] = []  # appended, never removed
        self.stopped: list[int] = []

    def run(self, steps: list[str]) -> int:
        for step in steps:
            if self.stopped:
                return 128 + self.stopped[0]
            if _removed(step):  # nvcc's own removal, its path unquoted: done here
                continue
            try:  # a group of its own: a signal reaches the tool's own children (cc1plus)
                child = subprocess.Popen(
                    ["/bin/sh", "-c", step], env=self.env, start_new_session=True
                )
            except OSError:
                return 127
            self.children.append(child)
            if self.stopped:  # a signal came while it started
                _signal_group(child, self.stopped[0])
            code = child.wait()
            if code != 0:
                return code
        return 0

    def signal(self, signum: int) -> None:
        self.stopped.append(signum)
        for child in self.children[:]:  # a copy of a list: atomic under the GIL
            _signal_group(child, signum)


def _removed(step: str) -> bool:
    """Whether ``step`` is one of nvcc's removals (``rm PATH``, the path unquoted): done."""
    if not step.startswith("rm "):
        return False
    with contextlib.suppress(OSError):
        Path(step[3:].strip()).unlink()
    return True


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    if child.returncode is not None:  # reaped: its pid may be another's now
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signum)


def _pass(steps: _Steps, chain: list[str], result: list[int]) -> None:
    try:
        result[0] = steps.run(chain)
    except Exception:  # a pass that could not run fails the compile, never passes
        result[0] = 1


def run_steps(plan: DryRun, client: Client, steps: _Steps) -> int:
    """The compile step by step: its device passes side by side, each on a token (the
    compile's own whenever no pass holds it, else one taken as it comes free: tokens given
    back while the compile runs are used, no idle tail), each given back as its pass ends;
    nvcc's intermediates removed whatever ends it."""
    try:
        code = steps.run(plan.before)
        if code:
            return code
        code = _passes(plan, client, steps)
        if code:
            return code
        if plan.depfile is not None:
            merge_deps(plan.depfile, len(plan.passes))
        return steps.run(plan.after)
    finally:
        for step in plan.after:  # what a failed or stopped compile left, as nvcc removes it
            _removed(step)
        if plan.depfile is not None:
            for part in ["host", *map(str, range(len(plan.passes)))]:
                with contextlib.suppress(OSError):
                    Path(f"{plan.depfile}.{part}").unlink()


def _passes(plan: DryRun, client: Client, steps: _Steps) -> int:
    pending = list(plan.passes)
    running: list[tuple[threading.Thread, bytes | None, list[int]]] = []  # None: own token
    failed = 0
    while pending or running:
        for item in [r for r in running if not r[0].is_alive()]:
            running.remove(item)
            if item[1] is not None:
                client.give(item[1])
            failed = failed or item[2][0]
        if steps.stopped or failed:
            pending.clear()
        if pending:
            own_free = all(r[1] is not None for r in running)
            token: bytes | None = None if own_free else client.take(1)
            if token is None or token:
                result = [0]
                thread = threading.Thread(target=_pass, args=(steps, pending[0], result))
                try:
                    thread.start()
                except RuntimeError:
                    if token:
                        client.give(token)
                    return 1
                pending.pop(0)
                running.append((thread, token, result))
                continue
        if not pending and not running:
            break
        select.select([client.fd] if pending else [], [], [], 0.02)
    if steps.stopped:
        return 128 + steps.stopped[0]
    return failed


def launch(fifo: str, argv: list[str]) -> int:
    """Run one compile in the jobserver: step by step where nvcc's steps are known
    (:func:`dry_run`: its device passes taking tokens as they come free, the same bytes as
    nvcc's own), else with ``--threads`` of its own token plus the free ones it may use."""
    if has_threads(argv):
        return subprocess.call(argv)
    try:
        client = Client(fifo)
    except OSError:  # the jobserver is gone (its run ended): the compile runs on its own token
        return subprocess.call(argv)
    child: subprocess.Popen[bytes] | None = None
    stopped: list[int] = []
    steps: _Steps | None = None

    def forward(signum: int, _frame: object) -> None:
        if steps is not None:
            steps.signal(signum)
        elif child is not None:
            child.send_signal(signum)
        else:
            stopped.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)  # before any token is taken: none leaves with a signal
    got = b""
    try:
        plan = dry_run(argv) if os.environ.get(NVCC_STEPS, "").strip() != "0" else None
        if stopped:
            return 128 + stopped[0]
        if plan is not None:
            steps = _Steps(plan.env)
            return run_steps(plan, client, steps)
        got = client.take(device_compiles(argv) - 1)
        if stopped:
            return 128 + stopped[0]
        child = subprocess.Popen([*argv, "--threads", str(1 + len(got))])
        return child.wait()
    finally:
        client.give(got)
        client.close()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: jobserver.py FIFO COMMAND [ARGS...]  (archguard's nvcc launcher)")
    sys.exit(launch(sys.argv[1], sys.argv[2:]))
