"""A cell's container (``container = "IMAGE"`` in its ``[[cell]]``): ``farm run`` makes the
cell's environment and runs each of its jobs' ``archguard wheel`` inside that image, with
docker or podman (whichever is on ``PATH``, docker first), so that the wheels' platform floor
is the image's glibc (PyTorch's ``pytorch/manylinux2_28-builder:cudaX.Y``: torch's own
``manylinux_2_28``), not this builder's. The site, archguard's cache (where every job's
source tree is copied and every sdist unpacked) and what the cell's commands name (uv, the
farm's policy, archguard's own source tree) are mounted at the same paths; the command runs
as this user's uid:gid, so what it writes is this user's.

:func:`container_argv` builds the runtime's command line from data alone (tests call it);
:func:`require_runtime` refuses a manifest whose cells need a runtime this machine lacks,
before anything is made."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from archguard.detect.fetch import cache_root
from archguard.detect.machine import floor_note, glibc_version
from archguard.detect.tools import QUERY_TIMEOUT_S, ToolFailed, run
from archguard.errors import ContainerRuntimeMissing
from archguard.farm.manifest import Cell

RUNTIMES = ("docker", "podman")  # the first on PATH runs a cell's container
# PyTorch's own wheel-building images, where a cell without its own container is built on
# GitHub (`farm workflow`): manylinux_2_28 with the cell's CUDA toolkit, for each platform
# (aarch64's: manylinux_2_28_aarch64, /opt/python with CPython's free-threaded builds)
BUILDER_IMAGES = {
    "x86_64": "pytorch/manylinux2_28-builder:cuda{cuda}",
    "aarch64": "pytorch/manylinuxaarch64-builder:cuda{cuda}",
}
BUILDER_IMAGE = BUILDER_IMAGES["x86_64"]
# what a container run takes from this machine's environment, by name (its value never on
# a command line): the farm's settings, the indexes' and installers' options, proxies
PASSED_PREFIXES = ("ARCHGUARD_", "PIP_", "UV_", "SCCACHE_", "CCACHE_")
PASSED = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


def builder_image(cell: Cell) -> str:
    """The image a cell's jobs are built in on GitHub: its own, else PyTorch's builder for
    its platform and CUDA."""
    return cell.container or BUILDER_IMAGES[cell.platform].format(cuda=cell.cuda.text)


def find_runtime(path: str | None = None) -> str | None:
    """docker's path, else podman's, on ``path`` (default: ``PATH``); None: neither."""
    for name in RUNTIMES:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None


def require_runtime(manifest: Path, cells: Iterable[Cell], path: str | None = None) -> str | None:
    """The runtime that runs ``cells``' containers (None: no cell names one), or
    :class:`ContainerRuntimeMissing` naming the manifest, each such cell and its image."""
    wanting = {c.name: c.container for c in cells if c.container}
    if not wanting:
        return None
    runtime = find_runtime(path)
    if runtime is not None:
        return runtime
    named = "; ".join(f"[[cell]] {n!r} names container = {i!r}" for n, i in wanting.items())
    floor = floor_note(glibc_version())
    here = f" ({floor.split(',', 1)[0].removeprefix('platform floor: ')})" if floor else ""
    raise ContainerRuntimeMissing(
        f"farm manifest {manifest}: {named}, and neither docker nor podman is on PATH to run "
        "its jobs in that image. Install docker or podman (either on PATH), or drop "
        f"`container` from the cell and accept this builder's platform floor{here}: its "
        "wheels then need the glibc this machine has."
    )


def python_dir(python: str) -> str:
    """Where a manylinux image keeps CPython X.Y's programs (``/opt/python/cp311-cp311/bin``;
    a free-threaded ``3.14t``: ``cp314-cp314t``): first on the container's ``PATH``, so that
    uv finds the image's own Python."""
    tag = python.removesuffix("t").replace(".", "")
    return f"/opt/python/cp{tag}-cp{tag}{'t' if python.endswith('t') else ''}/bin"


def outermost(paths: Iterable[str | Path]) -> list[str]:
    """Each path once (made absolute), none under another: the mounts."""
    unique = sorted({os.path.normpath(Path(p).absolute()) for p in paths})
    out: list[str] = []
    for p in unique:
        if not any(p == o or p.startswith(o.rstrip("/") + "/") for o in out):
            out.append(p)
    return out


def container_argv(  # noqa: PLR0913 - the runtime's every option, as data
    runtime: str,
    image: str,
    argv: Sequence[str],
    *,
    mounts: Iterable[str | Path],
    env: Mapping[str, str | None],
    user: tuple[int, int],
    path_first: Sequence[str] = (),
) -> list[str]:
    """The command that runs ``argv`` in ``image`` with ``runtime`` (docker's or podman's
    path): removed when done, as ``user`` (uid, gid; rootless podman keeps this user's id
    inside), each of ``mounts`` at its own path, ``env`` set (a value of None: passed by
    name from the runtime's own environment), and ``path_first`` put before the image's
    ``PATH``."""
    uid, gid = user
    out = [runtime, "run", "--rm", "--user", f"{uid}:{gid}"]
    if Path(runtime).name.startswith("podman") and uid != 0:
        out.append("--userns=keep-id")
    for where in outermost(mounts):
        out += ["--volume", f"{where}:{where}"]
    for key, value in sorted(env.items()):
        out += ["--env", key if value is None else f"{key}={value}"]
    out.append(image)
    if path_first:
        prefix = ":".join(path_first)
        out += ["sh", "-c", f'PATH="{prefix}:$PATH"; export PATH; exec "$@"', "sh"]
    return [*out, *argv]


def container_env(
    environ: Mapping[str, str], additions: Mapping[str, str], cache: Path
) -> dict[str, str | None]:
    """What a command in the container gets: from ``environ`` by name, the farm's and the
    installers' settings and proxies; ``additions`` (the job's own: its package's switches,
    SOURCE_DATE_EPOCH, the farm's policy) as values; and a home and caches that outlive the
    container (uv's and pip's in archguard's cache; ``HOME`` the image's ``/tmp``; no
    Python downloaded into a container that is removed when done)."""
    out: dict[str, str | None] = {
        k: None for k in environ if k.startswith(PASSED_PREFIXES) or k in PASSED
    }
    out.update(additions)
    out.update(
        {
            "HOME": "/tmp",
            "XDG_CACHE_HOME": str(cache.parent),
            "UV_CACHE_DIR": str(cache / "uv"),
            "PIP_CACHE_DIR": str(cache / "pip"),
            "UV_PYTHON_DOWNLOADS": "never",
        }
    )
    return out


def _archguard_source() -> list[str]:
    """archguard's own source tree, where the cells install it from one (a file URL)."""
    try:
        direct = metadata.distribution("torch-archguard").read_text("direct_url.json")
        url = json.loads(direct or "{}").get("url", "")
    except (metadata.PackageNotFoundError, ValueError):
        return []
    return [url.removeprefix("file://")] if url.startswith("file://") else []


@dataclass(frozen=True)
class CellContainer:
    """How a cell's commands run in its image: the runtime, the image, the mounts."""

    runtime: str
    image: str
    python: str  # the cell's X.Y, whose /opt/python programs come first on PATH
    mounts: tuple[str, ...]

    def argv(
        self,
        argv: Sequence[str],
        additions: Mapping[str, str] | None = None,
        more: Sequence[str] = (),
    ) -> list[str]:
        """``argv`` in the container, with the job's ``additions`` to its environment and
        ``more`` paths mounted (a policy file the job names)."""
        return container_argv(
            self.runtime,
            self.image,
            argv,
            mounts=[*self.mounts, *more],
            env=container_env(os.environ, additions or {}, cache_root()),
            user=(os.getuid(), os.getgid()),
            path_first=(python_dir(self.python),),
        )


def cell_container(
    cell: Cell, site: Path, manifest: Path, uv: str | None = None
) -> CellContainer | None:
    """The cell's container (None: its jobs run here), mounting the site, archguard's cache,
    uv (``uv``) and archguard's own source tree; :class:`ContainerRuntimeMissing` where no
    runtime is on ``PATH``."""
    runtime = require_runtime(manifest, [cell])
    if runtime is None or not cell.container:
        return None
    made = [site.resolve(), cache_root()]
    for where in made:  # a runtime makes a missing mount root's, not this user's
        where.mkdir(parents=True, exist_ok=True)
    mounts = [*map(str, made), *([uv] if uv else []), *_archguard_source()]
    return CellContainer(runtime, cell.container, cell.python, tuple(outermost(mounts)))


def image_id(box: CellContainer) -> str | None:
    """The id of the image the runtime holds under the cell's name (a tag moves; the id is
    what the jobs were built in, an input of each); None where it cannot say."""
    argv = [box.runtime, "image", "inspect", "--format", "{{.Id}}", box.image]
    try:
        proc = run(argv, None, QUERY_TIMEOUT_S)
    except ToolFailed:  # the runtime could not run: a tool's failure, never the manifest's
        return None
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None
