"""Each cell's environment, ``<cache>/envs/<cell>-<digest>`` (``SITE/.farm/envs/<cell>``
links to it): made with uv (which reaches the CUDA
builds of torch whatever pip's local settings say) from the cell's Python, its torch, this
archguard (with the farm extra, and the extras the manifest's switches need: ``variants``
for ``[farm] variants = true``, checked in the made cell before anything compiles) and the
build tools, once, and reused while the cell and archguard's code are the same; and what it
really holds (:func:`archguard.farm.identity.held`), which joins each of its jobs' ledgers.

The environment is named by its content (the cell, archguard's requirement and code), not by
the site: every site that holds the same cell builds with the same paths (torch's headers,
the Python prefix), so a compile cache hits the compiles of a job built again from another
checkout into another site (issue 50), and the environment is made once for all of them."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from archguard._fs import file_lock, write_atomic
from archguard.detect.cachestore import mark_used, register_site
from archguard.detect.fetch import cache_root
from archguard.detect.tools import last_line, run
from archguard.errors import CellEnvironmentFailed, ConfigError, ToolError
from archguard.farm.container import CellContainer
from archguard.farm.identity import code_digest, held
from archguard.farm.ledger import STATE, say
from archguard.farm.manifest import Cell

Wrap = Callable[[list[str]], list[str]]  # a command as it runs: here, or in a cell's container


def wrap_for(container: CellContainer | None) -> Wrap:
    """How the cell's commands run: as they are, or in its container."""
    return list if container is None else container.argv


def uv_path() -> str | None:
    """uv beside this Python, else on PATH; None: not installed."""
    here = Path(sys.executable).parent / "uv"
    return str(here) if here.is_file() else shutil.which("uv")


def _uv() -> str:
    found = uv_path()
    if not found:
        raise ToolError(
            "archguard farm run makes each cell's environment with uv, which is not "
            "installed: pip install uv.",
            tool="uv",
        )
    return found


FARM = ("farm",)  # what every cell needs: the binary readers, auditwheel, wheel, uv
# an extra a manifest's switch needs, with why; and the modules the cell must then import
NEEDED_BY = {"variants": "[farm] variants = true (each wheel's variant, through variantlib)"}
IMPORTS = {"variants": ("variantlib",)}


def cell_extras(variants: bool = False) -> tuple[str, ...]:
    """archguard's extras a manifest's cells need: the farm's, and ``variants`` where
    ``[farm] variants = true`` (each job's ``archguard wheel`` writes a wheel variant)."""
    return (*FARM, "variants") if variants else FARM


def archguard_requirement(extras: Sequence[str] = FARM) -> str:
    """What each cell's environment installs for archguard: this archguard (its source
    tree when installed from one, else its release), with ``extras``."""
    dist = metadata.distribution("torch-archguard")
    name = f"torch-archguard[{','.join(extras)}]"
    direct = dist.read_text("direct_url.json")
    if direct:
        url = json.loads(direct).get("url", "")
        if url.startswith("file://"):
            return f"{name} @ {url}"
    return f"{name}=={dist.version}"


def cell_venv(
    cell: Cell,
    site: Path,
    extras: Sequence[str] = FARM,
    container: CellContainer | None = None,
) -> Path:
    """The cell's Python, in an environment made once and reused while the cell (and the
    archguard ``extras`` it needs: :func:`cell_extras`) is the same (uv's cache makes the
    next cell's torch a link, not a download). An extra it cannot have is refused here,
    before any job of the cell compiles. With ``container`` (the cell's image), uv runs in
    it, so the environment is made from the image's Python and runs only there."""
    requirement = archguard_requirement(extras)
    wanted = json.dumps(
        {**cell.as_json(), "archguard": requirement, "code": code_digest()},
        sort_keys=True,
    )
    digest = hashlib.sha256(wanted.encode()).hexdigest()[:16]
    root = cache_root() / "envs" / f"{cell.name}-{digest}"
    with file_lock(root):  # two sites making the same cell at once: one makes it
        python = _made(
            cell, root, wanted, extras=extras, requirement=requirement, container=container
        )
        mark_used(root)  # under its lock: no prune removes it while this run lives
    link = site / STATE / "envs" / cell.name  # for people, and plan --site: never run by path
    link.parent.mkdir(parents=True, exist_ok=True)
    if not (link.is_symlink() and link.resolve() == root.resolve()):
        temporary = link.with_name(f".{link.name}.{os.getpid()}")
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(root)
        if link.is_dir() and not link.is_symlink():  # an environment of before: made here
            shutil.rmtree(link)
        temporary.replace(link)
    register_site(cache_root(), site)  # archguard cache names the sites of each environment
    return python


def _made(  # noqa: PLR0913 - the cell's facts, each needed
    cell: Cell,
    root: Path,
    wanted: str,
    *,
    extras: Sequence[str],
    requirement: str,
    container: CellContainer | None,
) -> Path:
    """The environment at ``root``: as it is where it was made for ``wanted``, else made."""
    python = root / "bin" / "python"
    marker = root / "archguard-cell.json"
    # made in a container, its python links to the image's: there, not here
    made = python.is_file() or python.is_symlink()
    if made and marker.is_file() and marker.read_text() == wanted:
        return python
    wrap = wrap_for(container)
    if cell.interpreter and container is None and not Path(cell.interpreter).is_file():
        raise ConfigError(
            f"cell {cell.name}: interpreter = {cell.interpreter!r} is not on this machine; "
            f"give the path of a Python {cell.python} here, or leave interpreter out (uv then "
            "finds one on PATH)."
        )
    uv = _uv()
    inside = f", in {cell.container}" if container is not None else ""
    say(f"cell {cell.name}: making its environment (Python {cell.python}, {cell.torch}{inside})")
    if root.exists():
        shutil.rmtree(root)
    _make_venv(uv, cell, root, wrap)
    where = [f"--index-url={cell.index_url}"] if cell.index_url else []
    where += [f"--extra-index-url={u}" for u in cell.extra_index_urls]
    where += [f"--find-links={u}" for u in cell.find_links]
    why = "".join(f"; {e}: {NEEDED_BY[e]}" for e in extras if e in NEEDED_BY)
    _run(
        [
            uv,
            "pip",
            "install",
            "--python",
            str(python),
            *where,
            *cell.installer_options,
            str(cell.torch),
            requirement,
            "setuptools>=77",
            "wheel",
            "ninja",
        ],
        f"uv pip install for {cell.name} ({cell.torch}, {requirement}{why})",
        wrap,
    )
    _check_extras(cell, python, extras, wrap)
    write_atomic(marker, wanted)  # last, and whole: a killed run leaves no marker
    return python


_WHICH_PYTHON = (
    "import sys, sysconfig; print('%d.%d' % sys.version_info[:2] "
    "+ ('t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))"
)


def _make_venv(uv: str, cell: Cell, root: Path, wrap: Wrap = list) -> None:
    """The cell's bare environment at ``root``, of the cell's Python."""
    try:
        _run(
            [uv, "venv", "--seed", "--python", cell.interpreter or cell.python, str(root)],
            f"uv venv for {cell.name}",
            wrap,
        )
    except CellEnvironmentFailed as exc:
        if cell.interpreter:
            raise
        first, _, rest = exc.message.partition("\n")
        raise CellEnvironmentFailed(
            f"{first}; uv found no Python {cell.python} (it looks on PATH) and could not fetch "
            f'one: name it in the cell\'s table, interpreter = "/path/to/python{cell.python}".'
            f"\n{rest}"
        ) from None
    python = root / "bin" / "python"
    made = run(  # X.Y, and X.Yt for a free-threaded build (a cell's python = "3.14t")
        wrap([str(python), "-c", _WHICH_PYTHON]),
        CellEnvironmentFailed,
        None,  # a container's first run may pull its image
    ).stdout.strip()
    if made != cell.python:
        raise CellEnvironmentFailed(
            f"cell {cell.name}: its environment's Python is {made or 'not runnable'}, not the "
            f"cell's python = {cell.python!r} (interpreter = {cell.interpreter!r})."
        )


# Run in the cell: each extra's requirements (archguard's own metadata) installed and
# satisfied, and its modules imported; a JSON list of what is not.
_CHECK = """\
import importlib, json, sys
from importlib import metadata
from packaging.requirements import Requirement

dist = metadata.distribution("torch-archguard")
declared = set(dist.metadata.get_all("Provides-Extra") or [])
wanted = json.loads(sys.argv[1])
out = []
for extra, modules in wanted.items():
    if extra not in declared:
        out.append(f"this archguard ({dist.version}) has no {extra!r} extra")
        continue
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is None or not req.marker.evaluate({"extra": extra}):
            continue
        if req.marker.evaluate({"extra": ""}):
            continue
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            out.append(f"{req} (not installed)")
            continue
        if not req.specifier.contains(version, prereleases=True):
            out.append(f"{req} ({version} installed)")
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:
            out.append(f"import {module} ({type(exc).__name__}: {exc})")
print(json.dumps(out))
"""


def _check_extras(cell: Cell, python: Path, extras: Sequence[str], wrap: Wrap = list) -> None:
    """Each of archguard's ``extras`` in the made cell, whole (uv installs a release that
    lacks an extra with only a warning): :class:`CellEnvironmentFailed` naming what lacks."""
    wanted = {e: list(IMPORTS.get(e, ())) for e in extras}
    proc = run(wrap([str(python), "-c", _CHECK, json.dumps(wanted)]), CellEnvironmentFailed)
    try:
        missing = json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        missing = None
    if missing is None:
        tail = "\n".join(proc.stderr.strip().splitlines()[-4:])
        raise CellEnvironmentFailed(
            f"cell {cell.name}: its archguard could not be checked for the extras "
            f"{', '.join(extras)} (exit {proc.returncode}): {last_line(proc.stderr)}\n{tail}"
        )
    if missing:
        needs = "".join(f"; {e}: {NEEDED_BY[e]}" for e in extras if e in NEEDED_BY)
        raise CellEnvironmentFailed(
            f"cell {cell.name}: its environment lacks what archguard's extras "
            f"{', '.join(extras)} need ({'; '.join(missing)}){needs}. Nothing of the cell was "
            "built: make the cell's index offer them (extra-index-url, find-links), or "
            "switch off what needs them."
        )


def _run(argv: list[str], what: str, wrap: Wrap = list) -> None:
    """``argv`` (a uv command), else :class:`CellEnvironmentFailed`: its first line what
    failed and uv's own cause, then the end of uv's output."""
    proc = run(wrap(argv), CellEnvironmentFailed, None)  # uv fetching a cell's torch: no limit
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
        said = uv_error(proc.stderr) or last_line(proc.stderr)  # a container's runtime, a kill
        raise CellEnvironmentFailed(
            f"{what} failed (exit {proc.returncode}){': ' + said if said else ''}\n{tail}"
        )


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # no nesting, no backtracking: linear
_WHY_INCLUDED = " was included because "  # uv's hint of which requirement brought a package


def uv_error(stderr: str, limit: int = 500) -> str:
    """uv's error on one line, at most ``limit`` characters: its ``error:`` and each
    ``cause:`` below it (a cause's continuation lines joined, up to a blank line or a build
    backend's ``[stdout]``/``[stderr]``, which stay in the log), and its hints except the one
    that only says which requirement brought the failing package; "" when uv printed no
    error. One pass."""
    parts: list[list[str]] = []  # each part's lines
    inside = going = False
    for raw in _ANSI.sub("", stderr).splitlines():  # FORCE_COLOR's escapes, where set
        line = raw.strip()
        if raw.startswith("error:"):
            parts, inside, going = [[line.removeprefix("error:").strip()]], True, True
        elif not inside:
            continue
        elif line.startswith(("cause:", "Caused by:")):
            parts.append([line.partition(":")[2].strip()])
            going = True
        elif line.startswith(("hint:", "help:")):
            going = _WHY_INCLUDED not in line
            if going:
                parts.append([line])
        elif not line or line.startswith(("[stdout]", "[stderr]")):
            going = False  # a build's own output: the log has it
        elif raw[:1].isspace():
            if going:  # a cause or hint going on
                parts[-1].append(line)
        else:
            inside = False  # uv's output after its error (a warning, a summary)
    said = ": ".join(" ".join(p).rstrip(":") for p in parts)
    return said if len(said) <= limit else said[: limit - 3].rstrip() + "..."


HELD = "archguard-held.json"


def held_now(python: Path, container: CellContainer | None = None) -> dict[str, str | None]:
    """What the cell's environment of ``python`` holds now (read every run: an environment
    changed by hand is a new input), kept beside it for ``farm plan --site``."""
    found = held(python, wrap_for(container))
    with contextlib.suppress(OSError):  # only plan's display reads it
        write_atomic(python.parent.parent / HELD, json.dumps(found, sort_keys=True))
    return found


def known_held(site: Path, cell: str) -> dict[str, str | None] | None:
    """What a cell's environment in SITE held when a run last looked, or None."""
    try:
        data = json.loads((site / STATE / "envs" / cell / HELD).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
