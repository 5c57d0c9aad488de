"""The machine's one jobserver (issue 57): every farm run, ``archguard wheel`` and hook build
that shares archguard's cache on one machine draws its tokens from one FIFO there, so builds
started apart never run more compiles than the machine has tokens; the protocol is
:mod:`archguard.jobserver`.

Each process that joins (a *user*) serves its own builds from a FIFO of its own and moves
tokens between it and the machine's as they are needed, so a token lost with a killed build
is lost only to its own user, until that user leaves: a user owes the machine exactly the
tokens it took from it (its ``held`` file says how many, written whole) and gives back that
many when it leaves, whatever its builds did with them. A user killed before it could is
found by the next one that joins or leaves (its ``alive.lock`` no longer held: no pid is
trusted, a reused one included), and its tokens are given back for it. So no token is lost
for longer than a user lives, and a farm that never idles keeps all its tokens. Every step
that could be cut short by a kill errs toward a token lost until the machine's jobserver is
next idle, never toward one given twice.

Moving tokens (every :data:`TICK` seconds): a user whose own FIFO is empty (its builds took
all it had) takes its share of the machine's free tokens (all of them when alone) and, while
it has less than its fair share (the width over the users), says it wants more (a ``wants``
file); a user above its fair share while another wants gives back each token its builds
return (it watches its own FIFO for them, beside its builds' own clients); one with spares
gives them back where another user is there. A user never holds more than the width.

The directory is the machine's: named for its boot and its pid namespace (a cache shared by
hosts over NFS, or by containers, gives each machine its own), under the cache. Joining and
leaving take ``setup.lock`` (exclusive); ``users.lock`` (shared, held by every user) says
whether anyone is there. The first user (no one there) makes the machine's FIFO anew with the
width it was asked for (``width``, which later users read) and removes what users before it
left. A FIFO keeps its bytes only while some process has it open: every user holds it open
from joining to leaving.

Farm runs, ``archguard wheel`` and hook builds join through :func:`joined_machine` (which
hands back why it could not, each caller falling back its own way) and say what they joined
with :func:`joined_words`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import select
import shutil
import struct
import termios
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from archguard import jobserver
from archguard._fs import hold_lock, write_atomic
from archguard.detect.machine import Machine

MACHINE = "machine"  # the machine's FIFO, in the directory
TICK = 0.05  # seconds between two moves of tokens


@dataclass(frozen=True)
class Joined:
    """A user's part in the machine's jobserver: its own FIFO (what its builds are given,
    ``ARCHGUARD_JOBSERVER=fifo:PATH``), the jobs the machine stands for, and whether this
    user made the machine's jobserver (no one else was there) or joined it."""

    path: Path
    width: int
    made: bool
    recovered: int = 0  # tokens given back for users that were killed holding them


def machine_id() -> str:
    """This machine's boot and pid namespace: two hosts (or containers) sharing a cache
    share no FIFO and no pid."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        boot = os.uname().nodename
    try:
        space = Path("/proc/self/ns/pid").stat().st_ino
    except OSError:
        space = 0
    return f"{boot}-{space}"


def free_tokens(fd: int) -> int:
    """The tokens waiting in a FIFO, unread (``FIONREAD``): how many a take would get."""
    buf = fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0))
    return int(struct.unpack("i", buf)[0])


class _User:
    """One user's side: its own jobserver, the machine's FIFO, and what it owes."""

    def __init__(self, directory: Path, machine: jobserver.Client, width: int) -> None:
        self.users = directory / "users"
        self.folder = self.users / f"{os.getpid()}-{secrets.token_hex(4)}"
        self.folder.mkdir()
        self.alive = contextlib.ExitStack()
        self.alive.enter_context(hold_lock(self.folder / "alive.lock"))
        self.own = jobserver.Server(self.folder, 0, width)
        self.machine = machine
        self.width = width
        self.held = 0
        self.cooling = 0  # ticks left before taking again, after giving back
        self.wanting = False
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self._write_held()
        self.thread = threading.Thread(target=self._run, name="archguard-jobserver", daemon=True)
        self.thread.start()

    def _write_held(self) -> None:
        write_atomic(self.folder / "held", f"{self.held}\n")  # whole, or the old count

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                with self.lock:
                    reclaiming = self.step()
                if reclaiming:  # watch for a token its builds give back, beside their clients
                    select.select([self.own.client.fd], [], [], TICK)
                else:
                    self.stop.wait(TICK)
            except Exception:  # a move that failed is tried again: never a hang
                self.stop.wait(TICK)

    def step(self) -> bool:
        """One move; whether this user is above its fair share while another wants tokens
        (its builds' returned tokens then go back to the machine as they come)."""
        spare = free_tokens(self.own.client.fd)
        free = free_tokens(self.machine.fd)
        users = self.others() + 1
        fair = max(1, self.width // users)
        waiting = self.others_want()
        if waiting and self.held > fair and spare:
            self._give_back(min(spare, self.held - fair))
            return self.held > fair
        if spare == 0:
            if self.cooling:
                self.cooling -= 1
            elif self.held < self.width and free:
                want = min(self.width - self.held, max(1, free // users))
                got = self.machine.take(want)
                if got:
                    self.held += len(got)
                    self._write_held()  # a kill before this line loses them: never gives twice
                    self.own.client.give(got)
            self._want(self.held < fair)
            return waiting and self.held > fair
        self._want(False)
        if users > 1 and (free == 0 or spare > 1):
            self._give_back(spare if free == 0 else spare - 1)
        return False

    def _give_back(self, count: int) -> None:
        # never more than it owes: a token one of its builds lost or gave twice stays here
        back = self.own.client.take(min(count, self.held))
        if back:
            self.held -= len(back)
            self._write_held()  # owed no more before it is given: a kill loses, never doubles
            self.machine.give(back)
            self.cooling = 4  # a waiting user takes it first

    def _want(self, wanting: bool) -> None:
        if wanting != self.wanting:
            self.wanting = wanting
            flag = self.folder / "wants"
            with contextlib.suppress(OSError):
                flag.touch() if wanting else flag.unlink()

    def others(self) -> int:
        """The other users there (a killed one counts until it is found gone)."""
        try:
            return sum(1 for _ in self.users.iterdir()) - 1
        except OSError:
            return 0

    def others_want(self) -> bool:
        try:
            return any((p / "wants").exists() for p in self.users.iterdir() if p != self.folder)
        except OSError:
            return False

    def leave(self) -> None:
        """Stop moving, and give the machine back what this user owes it."""
        self.stop.set()
        self.thread.join()
        owed = self.held
        self.held = 0
        self._write_held()  # owed no more before it is given: a kill loses, never doubles
        self.machine.give(jobserver.TOKEN * owed)
        self.own.close()
        self.alive.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _recover(directory: Path, machine: jobserver.Client | None) -> int:
    """Give back the tokens of users that are gone (their ``alive.lock`` free: killed before
    leaving) and remove their folders; how many tokens. ``machine`` None: a fresh start,
    nothing owed, every folder left by users before removed."""
    back = 0
    for folder in sorted((directory / "users").iterdir()):
        if machine is not None:
            with hold_lock(folder / "alive.lock", wait=False, create=False) as gone:
                if not gone:
                    continue  # its user lives
        trash = folder.with_name(f".{folder.name}.gone")
        try:
            folder.rename(trash)  # no longer owed before it is given: a kill loses, never doubles
        except OSError:
            continue
        if machine is not None:
            with contextlib.suppress(OSError, ValueError):
                back += max(0, int((trash / "held").read_text().strip() or 0))
        shutil.rmtree(trash, ignore_errors=True)
    if machine is not None and back:
        machine.give(jobserver.TOKEN * back)
    return back


@contextlib.contextmanager
def machine_jobserver(directory: Path, width: int) -> Iterator[Joined]:
    """Join the machine's jobserver under ``directory`` (made there by the first user with
    ``width`` tokens; a later user gets the width it was made with), for the block: the FIFO
    this user's builds take their tokens from (each build its first too: none is implicit).
    ``OSError`` where the directory takes no FIFO."""
    (directory / "users").mkdir(parents=True, exist_ok=True)
    path = directory / MACHINE
    with contextlib.ExitStack() as held:
        with hold_lock(directory / "setup.lock"):
            with hold_lock(directory / "users.lock", wait=False) as alone:
                if alone:
                    path.unlink(missing_ok=True)
                    os.mkfifo(path, 0o600)
                    _recover(directory, None)
                    write_atomic(directory / "width", f"{width}\n")
            held.enter_context(hold_lock(directory / "users.lock", shared=True))
            machine = jobserver.Client(str(path))
            held.callback(machine.close)
            recovered = 0
            if alone:
                machine.give(jobserver.TOKEN * width)
            else:
                with contextlib.suppress(OSError, ValueError):
                    width = int((directory / "width").read_text().strip())
                recovered = _recover(directory, machine)
            user = _User(directory, machine, width)
        try:
            yield Joined(user.own.path, width, alone, recovered)
        finally:
            with hold_lock(directory / "setup.lock"):
                user.leave()
                _recover(directory, machine)
                held.close()


@contextlib.contextmanager
def joined_machine(directory: Path, width: int) -> Iterator[Joined | OSError]:
    """:func:`machine_jobserver` for the block, or the ``OSError`` that kept this process out
    (a cache on a file system without FIFOs), for the caller to fall back its own way: a
    static share, a jobserver of the build's own. Only joining is caught: an ``OSError``
    raised in the block is the block's, never taken for a failed join. ``directory`` and
    ``width`` are the caller's (:func:`archguard.detect.fetch.machine_directory` imports this
    module; :func:`archguard.nvcc.parallel.jobserver_width` is a layer up)."""
    with contextlib.ExitStack() as stack:
        try:
            joined: Joined | OSError = stack.enter_context(machine_jobserver(directory, width))
        except OSError as exc:
            joined = exc
        yield joined


class JoinedWords(NamedTuple):
    """What a log line says of the machine's jobserver a process joined, in pieces that each
    caller places in its own wording (a farm run's line and a build's are laid out apart)."""

    how: str  # "made by this run" (no one else was there), or "joined"
    tokens: str  # "4 tokens": the machine's width
    cores: str  # "16 cores, CPU affinity 16, no cgroup quota": the width's figure, and whence
    recovered: str  # "; 2 tokens of a killed user given back", or ""


def joined_words(joined: Joined, machine: Machine, maker: str) -> JoinedWords:
    """The words for ``joined``; ``maker`` made it where it was the first (``run``,
    ``build``). The tokens said are the machine's (``joined.width``: a user that joins gets
    the width the first asked, whatever it asked itself)."""
    back = joined.recovered
    return JoinedWords(
        how=f"made by this {maker}" if joined.made else "joined",
        tokens=_count(joined.width, "token"),
        cores=f"{_count(machine.cores, 'core')}, {machine.cores_from}",
        recovered=f"; {_count(back, 'token')} of a killed user given back" if back else "",
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' if number != 1 else ''}"
