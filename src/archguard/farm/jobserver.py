"""A farm run's jobserver (the protocol: :mod:`archguard.jobserver`): one set of tokens for
every build the run starts, so that the builds side by side never run more compiles than the
machine has cores, and a build in its serial tail leaves its cores to the others.

A job holds no token while it fetches, resolves or repairs: its build takes one as its
compiles start (held to their end: the one its ninja runs on) and, through ninja (1.13 and
later) and archguard's nvcc launcher, the others as they come free. So a job in a serial or
idle phase leaves the cores to the others (measured: a token held by each job for its whole
run left the cores idle while it resolved or repaired, 0.83 of them used). The tokens are the
machine's (:mod:`archguard.detect.machine_jobserver`, under archguard's cache): two farm runs,
an ``archguard wheel`` and a hook build beside them share them, and a run killed holding some
has them given back by the next run that joins or leaves.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from archguard import jobserver
from archguard.detect.fetch import machine_directory
from archguard.detect.machine import detect_machine
from archguard.detect.machine_jobserver import joined_machine, joined_words
from archguard.farm.ledger import say
from archguard.nvcc.parallel import MEMORY_PER_THREAD, jobserver_width
from archguard.settings.config import ENV_JOBSERVER, jobserver_setting


@dataclass
class RunJobserver:
    """What the run's builds add to their environment to join its jobserver (empty: none;
    ``ARCHGUARD_JOBSERVER=fifo:PATH``: ``MAKEFLAGS`` would stop a GNU make before 4.4 in a
    package's build, which cannot read a FIFO's name), and its last words for the summary."""

    env: dict[str, str] = field(default_factory=dict)
    said: list[str] = field(default_factory=list)


@contextmanager
def run_jobserver(site: Path, assemble: bool = False) -> Iterator[RunJobserver]:
    """The jobserver ``ARCHGUARD_JOBSERVER=fifo:PATH`` or the caller's ``MAKEFLAGS`` names
    (make 4.4, another tool's); none with ``ARCHGUARD_JOBSERVER=0`` (each build gets a static
    share) or ``--assemble``; else a token per core, memory-capped, under SITE/.farm."""
    setting = jobserver_setting(os.environ)
    if assemble or not setting.on:
        if not assemble:
            say(f"jobserver: off ({ENV_JOBSERVER}=0): each build gets a static share of the cores")
        yield RunJobserver()
        return
    outer = setting.fifo
    if outer is not None:
        why = jobserver.unreachable(outer)
        if why is not None:
            say(f"jobserver: fifo:{outer} cannot be opened ({why}): each build gets a static share")
            yield RunJobserver()
            return
        say(f"jobserver: the caller's (fifo:{outer}): each build takes its tokens there")
        yield RunJobserver({ENV_JOBSERVER: f"fifo:{outer}"})
        return
    machine = detect_machine()
    width = jobserver_width(machine)
    directory = machine_directory()
    with joined_machine(directory, width) as joined:
        if isinstance(joined, OSError):  # a cache on a file system without FIFOs
            say(f"jobserver: none under {directory} ({joined}): each build gets a static share")
            yield RunJobserver()
            return
        slots = machine.memory // MEMORY_PER_THREAD
        said = joined_words(joined, machine, "run")
        say(
            f"jobserver: the machine's, {said.tokens} ({said.how}{said.recovered}; "
            f"{said.cores}; memory for {slots} compiler threads): "
            "a build takes one as its compiles start, and the others as they come free"
        )
        yield RunJobserver({ENV_JOBSERVER: f"fifo:{joined.path}"})


def at_once(jobs: int, ahead: int | None, joined: RunJobserver, groups: int) -> tuple[int, str]:
    """How many jobs a run of ``groups`` jobs keeps started (``--jobs`` and ``--ahead``, never
    more than there are jobs), and the log's line ("" where none starts ahead unasked).

    A job started ahead prepares (archguard's start, pip's metadata step, the build's own
    start: each imports torch) while the others compile, and its compiles take tokens as they
    come free, so the last jobs of a run end together instead of one running alone on one
    core (measured: three small tree packages at ``--jobs 2``, 0.85 of 2 cores without, see
    docs/build-speed.md). Only a jobserver makes that safe: without one, each build's static
    share assumes ``--jobs`` builds, so ``--ahead`` starts none (and says so). The default is
    one ahead where ``--jobs`` is 2 or more and a jobserver bounds the compiles; ``--jobs 1``
    keeps one job at a time, its log in order."""
    if not joined.env:
        if ahead:
            return (
                jobs,
                f"jobs: {jobs} at once; --ahead {ahead} starts none: "
                "no jobserver bounds the compiles",
            )
        return jobs, ""
    extra = ahead if ahead is not None else (1 if jobs > 1 else 0)
    extra = min(extra, max(0, groups - jobs))
    if not extra:
        return jobs, ""
    return jobs + extra, (
        f"jobs: {jobs} at once and {extra} ahead (it prepares while the others compile; "
        "every compile takes a token)"
    )
