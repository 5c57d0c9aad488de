"""archguard's nvcc launcher (``PYTORCH_NVCC``): one compile run in the jobserver
(:mod:`archguard.jobserver`), its parallel parts each on a token as one comes free.

Run as a script (``python -I -S .../archguard/nvcc_steps.py [--turns] FIFO COMMAND...``;
``--turns``: the jobserver is archguard's own, every token one byte, and its compiles take
turns, the least advanced first, :class:`_Turns`). Where
``COMMAND`` is a plain nvcc with ``-objtemp`` and several device passes, it runs nvcc's own
steps (``nvcc -dryrun``) itself, in a graph instead of nvcc's line: the host side (its
preprocessing and cudafe++) and each device pass (preprocess, cicc, ptxas) side by side, the
first on the compile's own token, each other as a token comes free, however late (issue 57:
a compile that started when the others held every token no longer runs its passes alone on
one core after they end); then fatbinary and the host compile.

Every cicc reads the module id cudafe++ writes, and cudafe++ takes as long as a device pass
on a file with torch's headers (measured: 24 s beside cicc's 26-30 s), so in nvcc's order it
holds every pass back. Here each cicc makes the module id itself (``--gen_module_id_file``, to
a name of its own, where the cicc the steps run names that option), by the same rule cudafe++
uses: the id is the same (checked on torch's
extension headers and on small kernels) and so is cicc's output. The launcher compares each
pass's id with cudafe++'s before fatbinary runs; a pass whose id differs runs its cicc and
ptxas again exactly as nvcc lists them. So the steps that make the object are nvcc's commands
and the object is nvcc's own, byte for byte (tested).

Otherwise it takes the tokens free as the compile starts, at most one fewer than its device
compiles, runs ``COMMAND`` with ``--threads`` of one plus those, and gives them back when it
ends, whatever ends it. A compile whose command already names ``--threads`` (the package's or
the user's) runs as it is; so does one whose jobserver is gone.

Only the standard library and :mod:`archguard.jobserver` (itself standard library only) are
imported: the launcher runs once per nvcc call.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

if __name__ == "__main__":  # run as a script under -I -S: archguard's own directory, no more
    sys.path.append(str(Path(__file__).resolve().parent.parent))  # after the stdlib

from archguard.jobserver import TOKEN, Client, device_compiles, has_threads

NVCC_STEPS = "ARCHGUARD_NVCC_STEPS"  # 0: run nvcc whole (settings.config.ENV_NVCC_STEPS)
TURNS = "--turns"  # the jobserver is archguard's: its compiles take turns (:class:`_Turns`)
_PRELUDE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")  # anchored, one quantifier each


@dataclass
class DryRun:
    """An nvcc call as the steps ``nvcc -dryrun`` lists: its environment, the steps before
    the device passes (host preprocessing, cudafe++), one list of steps per device pass
    (preprocess, cicc, ptxas: independent of each other, as ``--threads`` runs them), and the
    steps after (fatbinary, the host compile, the removal of the intermediates).

    Where each cicc can make the module id itself (:func:`_own_module_ids`), ``module_id`` is
    cudafe++'s file, each pass's cicc writes its own (``module_ids``) and ``before`` runs
    beside the passes; ``redo`` holds each pass's cicc and ptxas as nvcc lists them, run
    again for a pass whose id is not cudafe++'s."""

    env: dict[str, str]
    before: list[str]
    passes: list[list[str]]
    after: list[str]
    depfile: str | None = None  # nvcc's -MF: written from the preprocessing steps' own
    module_id: str | None = None
    redo: list[list[str]] = field(default_factory=list)

    @property
    def module_ids(self) -> list[str]:
        """The file each pass's cicc writes its module id to (none in nvcc's order)."""
        return [f"{self.module_id}.{i}" for i in range(len(self.redo))]


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
    plan = DryRun({**os.environ, **env}, before, passes, after, depfile[0] if depfile else None)
    return _own_module_ids(plan)


_MODULE_ID = re.compile(r' --module_id_file_name "([^"]+)"')  # nvcc quotes it: one class


def _own_module_ids(plan: DryRun) -> DryRun:
    """``plan`` with each cicc making the module id itself into a file of its own, so that
    the passes need not wait for cudafe++ (which writes the one every cicc reads); unchanged
    where cudafe++ is not the step that makes it or a cicc does not read that file."""
    made = [s for s in plan.before if s.startswith("cudafe++ ") and " --gen_module_id_file" in s]
    found = _MODULE_ID.search(made[-1]) if len(made) == 1 else None
    if found is None or not _cicc_makes_ids(plan):
        return plan
    module_id = found[1]
    # cudafe++ names the stub file the host compile includes, but only the last cicc writes it
    # (measured, CUDA 13.0; tested): no two chains write one file
    passes = []
    for i, chain in enumerate(plan.passes):
        cicc = chain[1]
        read = _MODULE_ID.search(cicc)
        if read is None or read[1] != module_id or "--gen_module_id_file" in cicc:
            return plan
        spoken = f' --gen_module_id_file --module_id_file_name "{module_id}.{i}"'
        passes.append([chain[0], cicc[: read.start()] + spoken + cicc[read.end() :], *chain[2:]])
    redo = [chain[1:] for chain in plan.passes]  # nvcc's own cicc and ptxas
    return replace(plan, passes=passes, module_id=module_id, redo=redo)


def _cicc_makes_ids(plan: DryRun) -> bool:
    """Whether the passes' cicc takes ``--gen_module_id_file`` (its program names the option:
    a cicc that did not would fail every pass). Read where the steps run it from
    (``$CICC_PATH/cicc``, else ``cicc`` on the steps' ``PATH``); 76 MB mapped, about 20 ms."""
    first = plan.passes[0][1]
    if first.startswith('"$CICC_PATH/cicc" '):
        cicc: str | None = str(Path(plan.env.get("CICC_PATH", "")) / "cicc")
    else:
        cicc = shutil.which("cicc", path=plan.env.get("PATH"))
    if not cicc:
        return False
    try:
        with Path(cicc).open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(b"gen_module_id_file") != -1
    except (OSError, ValueError):
        return False


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
        self.cancelled = False  # a chain failed: the others stop, its code is the compile's

    def run(self, steps: list[str]) -> int:
        for step in steps:
            if self.stopped:
                return 128 + self.stopped[0]
            if self.cancelled:
                return 1
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

    def cancel(self) -> None:
        """One chain failed: the others end now (the front ends that run side by side parse
        the same source, so its error is not printed again by each), none starts."""
        self.cancelled = True
        for child in self.children[:]:
            _signal_group(child, signal.SIGTERM)


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


def run_steps(plan: DryRun, client: Client, steps: _Steps, turns: bool = False) -> int:
    """The compile step by step: its device passes (and, where each cicc makes its own module
    id, the host side) side by side, each on a token (the compile's own whenever no chain
    holds it, else one taken as it comes free: tokens given back while the compile runs are
    used, no idle tail), each given back as its chain ends; nvcc's intermediates removed
    whatever ends it."""
    try:
        if plan.module_id is None:
            code = steps.run(plan.before)
            if code:
                return code
            code = _chains(plan.passes, client, steps, turns)
        else:
            code = _chains([plan.before, *plan.passes], client, steps, turns)
            code = code or _same_ids(plan, steps)
        if code:
            return code
        if plan.depfile is not None:
            merge_deps(plan.depfile, len(plan.passes))
        return steps.run(plan.after)
    finally:
        for step in plan.after:  # what a failed or stopped compile left, as nvcc removes it
            _removed(step)
        for path in plan.module_ids:
            with contextlib.suppress(OSError):
                Path(path).unlink()
        if plan.depfile is not None:
            for part in ["host", *map(str, range(len(plan.passes)))]:
                with contextlib.suppress(OSError):
                    Path(f"{plan.depfile}.{part}").unlink()


def _same_ids(plan: DryRun, steps: _Steps) -> int:
    """Each pass whose module id is not cudafe++'s runs its cicc and ptxas again as nvcc
    lists them (reading cudafe++'s), so the object is nvcc's own either way."""
    assert plan.module_id is not None
    try:
        theirs: bytes | None = Path(plan.module_id).read_bytes()
    except OSError:  # not where the shell wrote it (a path it expands): every pass again
        theirs = None
    for own, again in zip(plan.module_ids, plan.redo, strict=True):
        try:
            same = theirs is not None and Path(own).read_bytes() == theirs
        except OSError:
            same = False
        code = 0 if same else steps.run(again)
        if code:
            return code
    return 0


_Running = list[tuple[threading.Thread, bytes | None, list[int]]]  # None: the own token
TURN = 0.05  # seconds a token given back at a chain's end is left to the builds that wait
STOPPED_WAIT = 5.0  # seconds a stopped compile waits to take back the own token it lent


@dataclass
class _Turns:
    """Where the jobserver is archguard's (every token the same byte, :data:`TOKEN`), the
    compiles take turns, the least advanced first. At each chain's end the compile's own
    token, free until its next chain starts, is given back (``lent``: one is taken back
    before the compile goes on), and every token it gives back is left to the others for
    :data:`TURN` seconds. A token seen free is taken only after :data:`TURN` seconds per
    chain this compile has ended, so a build waiting for its first token (which takes it at
    once) or a compile with fewer chains done gets it first. So the builds of a farm move on
    together instead of two holding the cores while a third waits, to run its last pass, its
    host compile and its read-back alone (measured: the jobs of a three-package farm ended at
    88, 135 and 181 s, the last 35 s on one core)."""

    on: bool
    lent: bool = False
    until: float = 0.0  # no token taken before then
    seen: float | None = None  # when the free token now waiting its turn was first seen

    def gave(self) -> None:
        if self.on:
            self.until = time.monotonic() + TURN

    def waiting(self) -> bool:
        """Whether a token is left to the others now (the loop sleeps, not polls)."""
        return time.monotonic() < self.until or self.seen is not None

    def token(self, running: _Running, client: Client, done: int) -> bytes | None:
        """The token the next chain runs on: None for the compile's own (no chain holds it,
        and none has ended or turns are off), else one taken, or ``b""``: none now."""
        if not self.lent and all(r[1] is not None for r in running):
            if not (done and self.on):
                return None
            client.give(TOKEN)
            self.lent = True
            self.gave()
        if not self.on:
            return client.take(1)
        now = time.monotonic()
        if now < self.until:
            return b""
        if not select.select([client.fd], [], [], 0)[0]:
            self.seen = None
            return b""
        self.seen = self.seen or now
        if now < self.seen + TURN * done:
            return b""
        self.seen = None
        return client.take(1)

    def own_back(self, client: Client, done: int, steps: _Steps) -> None:
        """After the chains, the compile's own token for its host side: with turns, lent
        and taken back in turn like a chain's (a compile about to run its host compile lets
        one with fewer passes done run first); a lent one is taken back in any case, by a
        compile stopped (before or while it waits) within :data:`STOPPED_WAIT` seconds of
        the stop. One stopped that cannot leaves the token it lent in the FIFO, one more than
        its jobserver's user served, which that user keeps (the machine's jobserver takes
        back no more than it lent)."""
        if self.on and not self.lent and done:
            client.give(TOKEN)
            self.lent = True
            self.gave()
        end: float | None = None
        while self.lent:
            if steps.stopped:
                end = end or time.monotonic() + STOPPED_WAIT
                if time.monotonic() > end:
                    return
            got = self.token([], client, done) if done else client.take(1)
            if got:
                self.lent = False
            else:
                self.pause(client)

    def pause(self, client: Client) -> None:
        """Wait for the next try: while a given token is left to the others, until then (at
        most 20 ms at a time); while the FIFO is empty, until a token comes (at most 0.5 s,
        to see a stop); while a free token waits its turn, 20 ms."""
        now = time.monotonic()
        if now < self.until:
            time.sleep(min(self.until - now, 0.02))
        elif self.seen is None:
            select.select([client.fd], [], [], 0.5)
        else:
            time.sleep(0.02)


def _chains(chains: list[list[str]], client: Client, steps: _Steps, lend: bool = False) -> int:
    """Each chain of steps in a thread of its own, the first on the compile's own token,
    each other on a token taken as one comes free (with ``lend``, the waiting builds' turn
    first: :class:`_Turns`); the first failure's code, the others cancelled; every token
    given back whatever ends it."""
    pending = list(chains)
    running: _Running = []
    failed = 0
    turns = _Turns(lend)
    try:
        while pending or running:
            failed = _reaped(running, client, steps, failed, turns)
            if steps.stopped or failed:
                pending.clear()
            if not pending:
                if not running:
                    break
                _moved(running, client, turns)
            else:
                done = len(chains) - len(pending) - len(running)
                token = turns.token(running, client, done)
                if token is None or token:
                    if _started(pending.pop(0), token, running, steps):
                        continue
                    if token:  # no thread: the running chains end, then it fails
                        client.give(token)
                    failed = failed or 1
                    steps.cancel()
                    continue
            taking = pending and not turns.waiting()
            select.select([client.fd] if taking else [], [], [], 0.02)
    finally:  # whatever ended the loop: every token a chain holds goes back
        for thread, token, _ in running:
            thread.join()
            if token:
                client.give(token)
        # the own token, to go on with: in turn, as every chain's; a stopped compile takes a
        # lent one back as it can (its chains' tokens were just given back), never waiting long
        turns.own_back(client, 0 if failed or steps.stopped else len(chains), steps)
    if steps.stopped:
        return 128 + steps.stopped[0]
    return failed


def _reaped(running: _Running, client: Client, steps: _Steps, failed: int, turns: _Turns) -> int:
    """The chains that ended taken out of ``running``, their tokens given back; the first
    failure cancels the others and is the result."""
    for item in [r for r in running if not r[0].is_alive()]:
        running.remove(item)
        if item[1] is not None:
            client.give(item[1])
            turns.gave()
        if item[2][0] and not failed:
            failed = item[2][0]
            steps.cancel()
    return failed


def _moved(running: _Running, client: Client, turns: _Turns) -> None:
    """With no chain left to start: where none runs on the compile's own token while one runs
    on a taken one, that one goes on on the own token: its token goes back at once, or, where
    the own token was lent, is kept as the own one. A compile never holds a token it does not
    run on (measured: a build waiting for its first token sat 12 s beside one cicc, a core
    idle). While a chain is still to start, the free own token is that chain's (or, with
    turns, lent), not given back and taken again."""
    if running and all(r[1] is not None for r in running):
        thread, token, result = running[0]
        running[0] = (thread, None, result)
        if turns.lent:
            turns.lent = False
        else:
            client.give(token or b"")
            turns.gave()


def _started(chain: list[str], token: bytes | None, running: _Running, steps: _Steps) -> bool:
    result = [0]
    thread = threading.Thread(target=_pass, args=(steps, chain, result))
    try:
        thread.start()
    except RuntimeError:
        return False
    running.append((thread, token, result))
    return True


def launch(fifo: str, argv: list[str], turns: bool = False) -> int:
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
            steps = _Steps(plan.env)  # a signal before the handler could see it: stopped
            return 128 + stopped[0] if stopped else run_steps(plan, client, steps, turns)
        got = client.take(device_compiles(argv) - 1)
        if stopped:
            return 128 + stopped[0]
        child = subprocess.Popen([*argv, "--threads", str(1 + len(got))])
        if stopped:  # a signal came while it started
            child.send_signal(stopped[0])
        return child.wait()
    finally:
        client.give(got)
        client.close()


if __name__ == "__main__":
    turns = sys.argv[1:2] == [TURNS]
    words = sys.argv[2:] if turns else sys.argv[1:]
    if len(words) < 2:
        sys.exit(
            f"usage: nvcc_steps.py [{TURNS}] FIFO COMMAND [ARGS...]  (archguard's nvcc launcher)"
        )
    sys.exit(launch(words[0], words[1:], turns))
