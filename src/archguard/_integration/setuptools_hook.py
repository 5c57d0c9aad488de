"""``setuptools.finalize_distribution_options`` entry point: archguard's only always-on code.

It runs at the end of every ``Distribution.__init__`` in the environment, several times per
``pip wheel``. For a package that has not opted in (no ``[tool.archguard]`` table, no
``torch-archguard`` in ``build-system.requires``) it reads at most one small TOML file, imports
nothing beyond the standard library, changes nothing and prints nothing. A package that has
opted in gets its command lookup wrapped so that ``build_ext`` (whatever class it is, from
``setup.py`` or ``[tool.setuptools] cmdclass``), ``bdist_wheel`` and ``editable_wheel`` run
archguard's mixin first.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

DISTRIBUTION = "torch-archguard"
_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
_announced: set[str] = set()


def project_root(dist: Any) -> str:
    """Where the package's pyproject.toml lives: ``src_root``, setup.py's folder, or cwd."""
    root = getattr(dist, "src_root", None)
    if root:
        return str(root)
    script = getattr(dist, "script_name", None)
    if script and os.path.basename(script) == "setup.py" and os.path.isfile(script):
        return str(os.path.dirname(os.path.abspath(script)))
    return os.getcwd()


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def opted_in(root: str) -> bool:
    """True when ``root/pyproject.toml`` has ``[tool.archguard]`` or requires torch-archguard.

    Never raises: a missing or malformed file is the package's business, reported by
    setuptools itself, and means "not opted in" here.
    """
    path = os.path.join(root, "pyproject.toml")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return False
    if b"archguard" not in raw.lower():  # fast path: most packages never mention it
        return False
    try:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib
        data = tomllib.loads(raw.decode("utf-8"))
    except Exception:
        return False
    tool = data.get("tool")
    if isinstance(tool, dict) and "archguard" in tool:
        return True
    build = data.get("build-system")
    requires = build.get("requires") if isinstance(build, dict) else None
    if not isinstance(requires, list):
        return False
    for item in requires:
        match = _NAME.match(item) if isinstance(item, str) else None
        if match and _canonical(match.group(1)) == DISTRIBUTION:
            return True
    return False


def say(message: str) -> None:
    print(f"archguard: {message}", file=sys.stderr, flush=True)


def announce_once(key: str, message: str) -> None:
    if key not in _announced:
        _announced.add(key)
        say(message)


def _disabled() -> bool:
    """ARCHGUARD_DISABLE is on. A value that is neither on nor off is not "on": the build
    command then stops with archguard's error about it instead of silently switching off."""
    return os.environ.get("ARCHGUARD_DISABLE", "").strip().lower() in ("1", "true", "yes", "on")


def finalize_distribution_options(dist: Any) -> None:
    if getattr(dist, "_archguard_hooked", False):
        return
    root = project_root(dist)
    if not opted_in(root):
        return
    if _disabled():
        announce_once(
            "disabled",
            f"disabled by ARCHGUARD_DISABLE="
            f"{os.environ['ARCHGUARD_DISABLE']}: building {root} "
            "without an arch policy",
        )
        return
    from archguard._integration.commands import install

    install(dist)


finalize_distribution_options.order = 0  # type: ignore[attr-defined]
