"""The machine's one jobserver (issue 57): every farm run, ``archguard wheel`` and hook build
that shares archguard's cache draws its tokens from one FIFO there, so builds started apart
never run more compiles than the machine has tokens; the protocol is :mod:`archguard.jobserver`.

Each process that joins (a *user*) serves its own builds from a FIFO of its own and moves
tokens between it and the machine's as they are needed, so a token lost with a killed build
is lost only to its own user, until that user leaves: a user owes the machine exactly the
tokens it took from it (its ``held`` file says how many) and gives back that many when it
leaves, whatever its builds did with them. A user killed before it could give them back is
found by the next one that joins or leaves (its pid gone), and its tokens are given back for
it. So no token is ever lost for longer than a user lives, and a farm that never idles keeps
all its tokens.

Moving tokens (every :data:`TICK` seconds): a user whose own FIFO is empty (its builds took
all it had) takes its share of the machine's free tokens (all of them when alone); where
another user is there, one with spares gives them back, all of them while the machine has none
left (the other may be waiting), else all but one. A user never holds more than the width.

Joining and leaving take ``setup.lock`` (exclusive); ``users.lock`` (shared, held by every
user) says whether anyone is there. The first user (no one there) makes the machine's FIFO
anew and puts the tokens in. A FIFO keeps its bytes only while some process has it open: every
user holds it open from joining to leaving.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import struct
import tempfile
import termios
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from archguard import jobserver
from archguard._fs import hold_lock

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


def free_tokens(fd: int) -> int:
    """The tokens waiting in a FIFO, unread (``FIONREAD``): how many a take would get."""
    buf = fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0))
    return int(struct.unpack("i", buf)[0])


class _User:
    """One user's side: its own jobserver, the machine's FIFO, and what it owes."""

    def __init__(self, directory: Path, machine: jobserver.Client, width: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=directory / "users"))
        self.own = jobserver.Server(self.folder, 0, width)
        self.machine = machine
        self.width = width
        self.held = 0
        self.cooling = 0  # ticks left before taking again, after giving back
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self._write_held()
        self.thread = threading.Thread(target=self._run, name="archguard-jobserver", daemon=True)
        self.thread.start()

    def _write_held(self) -> None:
        # in place: a killed user's count is read by whoever finds it gone
        (self.folder / "held").write_text(f"{self.held}\n")

    def _run(self) -> None:
        while not self.stop.wait(TICK):
            with self.lock:
                self.step()

    def step(self) -> None:
        """One move: where this user's FIFO is empty (its builds took every token it had),
        its share of the machine's free tokens taken; where it has spares and another user
        is there, the spares given back (all of them while the machine has none left)."""
        spare = free_tokens(self.own.client.fd)
        free = free_tokens(self.machine.fd)
        others = self.others()
        if spare == 0:
            if self.cooling:
                self.cooling -= 1
            elif self.held < self.width and free:
                want = min(self.width - self.held, max(1, free // (others + 1)))
                got = self.machine.take(want)
                if got:
                    self.held += len(got)  # owed before it is handed on: a kill leaks none
                    self._write_held()
                    self.own.client.give(got)
            return
        if others and (free == 0 or spare > 1):
            back = self.own.client.take(spare if free == 0 else spare - 1)
            if back:
                self.machine.give(back)
                self.held -= len(back)
                self._write_held()
                self.cooling = 4  # a waiting user takes it first

    def others(self) -> int:
        """The other users there (a killed one counts until it is found gone)."""
        try:
            return sum(1 for _ in self.folder.parent.iterdir()) - 1
        except OSError:
            return 0

    def leave(self) -> None:
        """Stop moving, and give the machine back what this user owes it."""
        self.stop.set()
        self.thread.join()
        with self.lock:
            self.machine.give(jobserver.TOKEN * self.held)
            self.held = 0
            self.own.close()
            shutil.rmtree(self.folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _recover(directory: Path, machine: jobserver.Client | None) -> int:
    """Give back the tokens of users whose process is gone (killed before leaving), and
    remove their folders; how many tokens. ``machine`` None: a fresh start, nothing owed."""
    back = 0
    for folder in sorted((directory / "users").glob("*-*")):
        pid = folder.name.split("-", 1)[0]
        if pid.isdigit() and _alive(int(pid)):
            continue
        if machine is not None:
            with contextlib.suppress(OSError, ValueError):
                back += max(0, int((folder / "held").read_text().strip() or 0))
        shutil.rmtree(folder, ignore_errors=True)
    if machine is not None and back:
        machine.give(jobserver.TOKEN * back)
    return back


@contextlib.contextmanager
def machine_jobserver(directory: Path, width: int) -> Iterator[Joined]:
    """Join the machine's jobserver of ``width`` tokens under ``directory`` (made there by
    the first user), for the block: the FIFO this user's builds take their tokens from (each
    build its first too: none is implicit). ``OSError`` where the directory takes no FIFO."""
    (directory / "users").mkdir(parents=True, exist_ok=True)
    path = directory / MACHINE
    with contextlib.ExitStack() as held:
        with hold_lock(directory / "setup.lock"):
            with hold_lock(directory / "users.lock", wait=False) as alone:
                if alone:
                    path.unlink(missing_ok=True)
                    os.mkfifo(path, 0o600)
                    _recover(directory, None)
            held.enter_context(hold_lock(directory / "users.lock", shared=True))
            machine = jobserver.Client(str(path))
            held.callback(machine.close)
            recovered = 0
            if alone:
                machine.give(jobserver.TOKEN * width)
            else:
                recovered = _recover(directory, machine)
            user = _User(directory, machine, width)
        try:
            yield Joined(user.own.path, width, alone, recovered)
        finally:
            with hold_lock(directory / "setup.lock"):
                user.leave()
                _recover(directory, machine)
                machine.close()
                held.close()
