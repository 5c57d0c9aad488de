"""GNU make's jobserver: one set of tokens shared by every build a farm run (or one build)
starts, so that no core idles while another build could use it and none is oversubscribed.
This module is the protocol (the FIFO, its :class:`Client` and :class:`Server`, the
``MAKEFLAGS`` that name it, the ninja shim); each layer's use of
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

archguard's nvcc launcher, which runs each compile in the jobserver, is
:mod:`archguard.nvcc_steps`.

Only the standard library is imported: the launcher (:mod:`archguard.nvcc_steps`) imports
this module once per nvcc call.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

AUTH = "--jobserver-auth="
TOKEN = b"+"
PREFIX = "jobserver-"  # the FIFOs a server makes in its directory
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
