"""A farm run's jobserver (:mod:`archguard.jobserver`): one pool of tokens for every build
the run starts, so that the builds side by side never run more compiles than the machine has
cores, and a build in its serial tail leaves its cores to the others.

A job holds no token while it fetches, resolves or repairs: its build takes one as its
compiles start (held to their end: the one its ninja runs on) and, through ninja (1.13 and
later) and archguard's nvcc launcher, the others as they come free. So a job in a serial or
idle phase leaves the cores to the others (measured: a token held by each job for its whole
run left the cores idle while it resolved or repaired, 0.83 of them used). The FIFO lives
under SITE/.farm for the run and is removed at its end; a run killed before that leaves a
FIFO no later run reads (the next run's pool removes it), so no token is ever stuck.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from archguard.detect.machine import detect_machine
from archguard.farm.records import STATE, say
from archguard.jobserver import Pool, unreachable
from archguard.nvcc.parallel import MEMORY_PER_THREAD, pool_tokens
from archguard.settings.config import ENV_JOBSERVER, jobserver_pool


@dataclass
class RunTokens:
    """What the run's builds add to their environment to join its pool (empty: no pool;
    ``ARCHGUARD_JOBSERVER=fifo:PATH``: ``MAKEFLAGS`` would stop a GNU make before 4.4 in a
    package's build, which cannot read a FIFO's name), and its last words for the summary."""

    env: dict[str, str] = field(default_factory=dict)
    said: list[str] = field(default_factory=list)


@contextmanager
def run_tokens(site: Path, assemble: bool = False) -> Iterator[RunTokens]:
    """The pool ``ARCHGUARD_JOBSERVER=fifo:PATH`` or the caller's ``MAKEFLAGS`` names (make
    4.4, another tool's jobserver); none with ``ARCHGUARD_JOBSERVER=0`` (each build gets a
    static share) or ``--assemble``; else a token per core, memory-capped, under SITE/.farm."""
    on, outer, _ = jobserver_pool(os.environ)
    if assemble or not on:
        if not assemble:
            say(f"jobserver: off ({ENV_JOBSERVER}=0): each build gets a static share of the cores")
        yield RunTokens()
        return
    if outer is not None:
        why = unreachable(outer)
        if why is not None:
            say(f"jobserver: fifo:{outer} cannot be opened ({why}): each build gets a static share")
            yield RunTokens()
            return
        say(f"jobserver: the caller's (fifo:{outer}): each build takes its tokens there")
        yield RunTokens({ENV_JOBSERVER: f"fifo:{outer}"})
        return
    machine = detect_machine()
    try:
        pool = Pool(site / STATE / "jobserver", pool_tokens(machine))
    except OSError as exc:  # a site on a file system without FIFOs
        say(f"jobserver: no pool under {site / STATE} ({exc}): each build gets a static share")
        yield RunTokens()
        return
    if pool.stale:
        say(f"jobserver: removed {', '.join(pool.stale)}, left by a run that was killed")
    slots = machine.memory // MEMORY_PER_THREAD
    say(
        f"jobserver: {pool.tokens} token{'s' if pool.tokens != 1 else ''} ({machine.cores} "
        f"cores, {machine.cores_from}; memory for {slots} compiler threads): a build takes one "
        "as its compiles start, and the others as they come free"
    )
    tokens = RunTokens({ENV_JOBSERVER: f"fifo:{pool.path}"})
    try:
        yield tokens
    finally:
        back = pool.close()
        tokens.said.append(
            f"jobserver: {back} of {pool.tokens} tokens back at the end"
            + ("" if back == pool.tokens else " (a build was killed holding the others)")
        )
