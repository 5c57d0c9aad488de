"""The machine's one jobserver (issue 57): every farm run, ``archguard wheel`` and hook build
under one cache draws from it, on real processes and real FIFOs. Two users together never hold
more tokens than the machine's; a user killed holding tokens has them given back by the next
user that joins, so a farm that never idles keeps all its tokens."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from archguard.detect.machine import Machine
from archguard.detect.machine_jobserver import (
    Joined,
    joined_machine,
    joined_words,
    machine_jobserver,
)
from archguard.jobserver import Client

HERE = Path(__file__).resolve().parent


def _gather(clients: list[Client], want: int, seconds: float = 5.0) -> list[bytes]:
    """Take from each client until ``want`` in all (or the time is out), then a while more:
    what each got."""
    got = [b"" for _ in clients]
    deadline = time.monotonic() + seconds
    while sum(map(len, got)) < want and time.monotonic() < deadline:
        for i, client in enumerate(clients):
            got[i] += client.take(64)
        time.sleep(0.01)
    end = time.monotonic() + 0.4  # long enough for several moves: nothing more comes
    while time.monotonic() < end:
        for i, client in enumerate(clients):
            got[i] += client.take(64)
        time.sleep(0.01)
    return got


def test_two_users_share_the_machines_tokens_and_never_hold_more(tmp_path: Path) -> None:
    where = tmp_path / "jobserver"
    with machine_jobserver(where, 3) as first:
        assert first.made and first.width == 3
        a = Client(str(first.path))
        with machine_jobserver(where, 3) as second:
            assert not second.made and second.path != first.path
            b = Client(str(second.path))
            got = _gather([a, b], 3)
            assert sum(map(len, got)) == 3, got  # one machine: 3 tokens in all, never more
            a.give(got[0])
            # what the first gives back and no longer wants goes where it is wanted
            more = _gather([b], 3 - len(got[1]))
            assert len(got[1]) + len(more[0]) == 3, (got, more)
            b.give(got[1] + more[0])
            b.close()
        a.close()
    with machine_jobserver(where, 3) as again:  # everyone left: made anew, whole
        assert again.made
        client = Client(str(again.path))
        assert len(_gather([client], 3)[0]) == 3
        client.close()
    assert list((where / "users").iterdir()) == []


_KILLED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from archguard.detect.machine_jobserver import machine_jobserver
    from archguard.jobserver import Client

    with machine_jobserver(Path(sys.argv[1]), 3) as joined:
        client = Client(str(joined.path))
        got = b""
        while len(got) < 2:
            got += client.take(2 - len(got))
            time.sleep(0.01)
        print("holding", len(got), flush=True)
        time.sleep(600)
    """
)


def test_a_user_killed_holding_tokens_has_them_given_back_by_the_next(tmp_path: Path) -> None:
    """A farm run SIGKILLed while its builds hold 2 of 3 tokens, beside a user that stays (so
    the machine's jobserver never idles): the next user to join gives them back for it."""
    where = tmp_path / "jobserver"
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    with machine_jobserver(where, 3) as staying:
        killed = subprocess.Popen(
            [sys.executable, "-c", _KILLED, str(where)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            assert killed.stdout is not None
            assert killed.stdout.readline().split() == ["holding", "2"]
        finally:
            os.killpg(killed.pid, signal.SIGKILL)
            killed.communicate()  # closes its pipe
        with machine_jobserver(where, 3) as next_user:
            assert not next_user.made and next_user.recovered >= 2
            clients = [Client(str(staying.path)), Client(str(next_user.path))]
            got = _gather(clients, 3)
            assert sum(map(len, got)) == 3, got  # every token back, and no more
            for client, tokens in zip(clients, got, strict=True):
                client.give(tokens)
                client.close()
    assert list((where / "users").iterdir()) == []


def test_a_user_gives_back_what_it_owes_whatever_its_builds_did(tmp_path: Path) -> None:
    """A build killed holding its tokens loses them to its own user only: on leaving, the user
    gives the machine what it took from it, so the next user finds all of them."""
    where = tmp_path / "jobserver"
    with machine_jobserver(where, 2) as staying:
        with machine_jobserver(where, 2) as leaving:
            lost = Client(str(leaving.path))
            assert len(_gather([lost], 2)[0]) == 2
            lost.close()  # as a killed build: its tokens never come back to the FIFO
        client = Client(str(staying.path))
        got = _gather([client], 2)[0]
        assert len(got) == 2
        client.give(got)
        client.close()


def test_a_busy_user_gives_a_waiting_one_its_fair_share(tmp_path: Path) -> None:
    """A user whose builds give each token back and take it again at once (ninja between two
    compiles) keeps no more than its share while another user waits: the waiting one gets
    tokens within seconds, not when the busy one's work runs out. A later user gets the
    width the machine's jobserver was made with, whatever it asks."""
    import threading

    where = tmp_path / "jobserver"
    stop = threading.Event()
    with machine_jobserver(where, 4) as busy:
        client = Client(str(busy.path))
        mine = _gather([client], 4)[0]
        assert len(mine) == 4

        def churn() -> None:  # each compile ends and the next starts at once
            held = bytearray(mine)
            while not stop.is_set():
                if held:
                    client.give(bytes(held[:1]))
                    del held[:1]
                held += client.take(1)
                time.sleep(0.002)
            client.give(bytes(held))

        worker = threading.Thread(target=churn)
        worker.start()
        try:
            with machine_jobserver(where, 16) as waiting:
                assert waiting.width == 4  # the machine's, not what it asked
                other = Client(str(waiting.path))
                got = b""
                deadline = time.monotonic() + 10
                while len(got) < 2 and time.monotonic() < deadline:
                    got += other.take(4)
                    time.sleep(0.01)
                assert len(got) >= 2, got  # its fair share: 4 tokens over 2 users
                other.give(got)
                other.close()
        finally:
            stop.set()
            worker.join()
        client.close()


def test_joined_machine_hands_back_why_a_cache_takes_no_fifo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A file system without FIFOs (a FUSE or NFS cache says EPERM): no jobserver, the error
    handed to the caller to say and fall back from, nothing raised."""

    def no_fifo(path: object, mode: int = 0o666) -> None:
        raise OSError(errno.EPERM, "Operation not permitted", str(path))

    monkeypatch.setattr(os, "mkfifo", no_fifo)
    with joined_machine(tmp_path / "jobserver", 3) as joined:
        assert isinstance(joined, OSError) and joined.errno == errno.EPERM


def test_joined_machine_joins_and_an_error_in_the_block_is_the_blocks(tmp_path: Path) -> None:
    """A normal directory: the machine's jobserver of the width asked, the words every caller
    says of it; an ``OSError`` in the block is raised, never taken for a failed join, and the
    user leaves all the same."""
    where = tmp_path / "jobserver"
    machine = Machine(2, "CPU affinity 2, no cgroup quota", 8 << 30, "MemAvailable")
    with joined_machine(where, 3) as first:
        assert isinstance(first, Joined) and first.made and first.width == 3
        assert Path(first.path).exists()
        said = joined_words(first, machine, "run")
        assert said.how == "made by this run" and said.tokens == "3 tokens"
        assert said.cores == "2 cores, CPU affinity 2, no cgroup quota" and said.recovered == ""
        with pytest.raises(OSError, match="the block's"), joined_machine(where, 16) as second:
            assert isinstance(second, Joined) and not second.made
            assert second.width == 3  # the machine's, not what it asked
            assert joined_words(second, machine, "build").how == "joined"
            raise OSError("the block's")
    assert list((where / "users").iterdir()) == []


def test_joined_words_count_in_the_singular() -> None:
    one = Machine(1, "CPU affinity 1, cgroup quota 1", 8 << 30, "MemAvailable")
    said = joined_words(Joined(Path("/x"), 1, False, recovered=1), one, "build")
    assert said == (
        "joined",
        "1 token",
        "1 core, CPU affinity 1, cgroup quota 1",
        "; 1 token of a killed user given back",
    )
