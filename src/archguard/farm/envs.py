"""Each cell's environment, ``SITE/.farm/envs/<cell>``: made with uv (which reaches the CUDA
builds of torch whatever pip's local settings say) from the cell's Python, its torch, this
archguard (with the farm extra) and the build tools, once, and reused while the cell and
archguard's code are the same; and what it really holds (:func:`archguard.farm.identity.held`),
which joins each of its jobs' records."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from importlib import metadata
from pathlib import Path

from archguard._fs import write_atomic
from archguard.detect.tools import run
from archguard.errors import ConfigError
from archguard.farm.identity import code_digest, held
from archguard.farm.manifest import Cell
from archguard.farm.records import STATE, say


def _uv() -> str:
    here = Path(sys.executable).parent / "uv"
    found = str(here) if here.is_file() else shutil.which("uv")
    if not found:
        raise ConfigError(
            "archguard farm run makes each cell's environment with uv, which is not "
            "installed: pip install uv."
        )
    return found


def archguard_requirement() -> str:
    """What each cell's environment installs for archguard: this archguard (its source
    tree when installed from one, else its release), with the farm extra."""
    dist = metadata.distribution("torch-archguard")
    direct = dist.read_text("direct_url.json")
    if direct:
        url = json.loads(direct).get("url", "")
        if url.startswith("file://"):
            return f"torch-archguard[farm] @ {url}"
    return f"torch-archguard[farm]=={dist.version}"


def cell_venv(cell: Cell, site: Path) -> Path:
    """The cell's Python, in an environment made once and reused while the cell is the
    same (uv's cache makes the next cell's torch a link, not a download)."""
    root = site / STATE / "envs" / cell.name
    python = root / "bin" / "python"
    wanted = json.dumps(
        {**cell.as_json(), "archguard": archguard_requirement(), "code": code_digest()},
        sort_keys=True,
    )
    marker = root / "archguard-cell.json"
    if python.is_file() and marker.is_file() and marker.read_text() == wanted:
        return python
    if cell.interpreter and not Path(cell.interpreter).is_file():
        raise ConfigError(
            f"cell {cell.name}: interpreter = {cell.interpreter!r} is not on this machine; "
            f"give the path of a Python {cell.python} here, or leave interpreter out (uv then "
            "finds one on PATH)."
        )
    uv = _uv()
    say(f"cell {cell.name}: making its environment (Python {cell.python}, {cell.torch})")
    if root.exists():
        shutil.rmtree(root)
    try:
        _run(
            [uv, "venv", "--seed", "--python", cell.interpreter or cell.python, str(root)],
            f"uv venv for {cell.name}",
        )
    except ConfigError as exc:
        if cell.interpreter:
            raise
        raise ConfigError(
            f"{exc}\nuv found no Python {cell.python} (it looks on PATH) and could not fetch "
            f'one: name it in the cell\'s table, interpreter = "/path/to/python{cell.python}".'
        ) from None
    made = run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], ConfigError
    ).stdout.strip()
    if made != cell.python:
        raise ConfigError(
            f"cell {cell.name}: its environment's Python is {made or 'not runnable'}, not the "
            f"cell's python = {cell.python!r} (interpreter = {cell.interpreter!r})."
        )
    where = [f"--index-url={cell.index_url}"] if cell.index_url else []
    where += [f"--extra-index-url={u}" for u in cell.extra_index_urls]
    where += [f"--find-links={u}" for u in cell.find_links]
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
            archguard_requirement(),
            "setuptools>=77",
            "wheel",
            "ninja",
        ],
        f"uv pip install for {cell.name}",
    )
    write_atomic(marker, wanted)  # last, and whole: a killed run leaves no marker
    return python


def _run(argv: list[str], what: str) -> None:
    proc = run(argv, ConfigError, None)  # uv fetching a cell's torch: no time limit
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise ConfigError(f"{what} failed (exit {proc.returncode}):\n{tail}")


HELD = "archguard-held.json"


def record_held(python: Path) -> dict[str, str | None]:
    """What the cell's environment of ``python`` holds now (read every run: an environment
    changed by hand is a new input), kept beside it for ``farm plan --site``."""
    found = held(python)
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
