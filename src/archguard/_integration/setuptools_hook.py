"""``setuptools.finalize_distribution_options`` entry point: archguard's only always-on code.

It runs at the end of every ``Distribution.__init__`` in the environment, several times per
``pip wheel``. For a package that has not opted in (no ``[tool.archguard]`` table, no
``torch-archguard`` in ``build-system.requires``) it reads at most one small TOML file, imports
nothing beyond the standard library, changes nothing and prints nothing. A package that has
opted in gets its command lookup wrapped so that ``build_ext`` (whatever class it is, from
``setup.py`` or ``[tool.setuptools] cmdclass``), ``bdist_wheel`` and ``editable_wheel`` run
archguard's mixin first.

Farm mode: with ``ARCHGUARD_ENABLE`` set (to anything but an "off" word) every package gets
the wrapped lookup, marked as enabled by the environment; the ``build_ext`` mixin then acts
only when the distribution has a CUDA extension, and says nothing otherwise. A value that is
neither on nor off is reported by that mixin as an error, for CUDA builds only.
"""

from __future__ import annotations

import os
from typing import Any

from archguard._integration.common import announce_once, project_root
from archguard.settings.optin import (
    ENV_DISABLE,
    ENV_ENABLE,
    OFF_WORDS,
    ON_WORDS,
    opted_in,
    switch_word,
)


def _disabled() -> bool:
    """ARCHGUARD_DISABLE is on. A value that is neither on nor off is not "on": the build
    command then stops with archguard's error about it instead of silently switching off."""
    return switch_word(os.environ, ENV_DISABLE) in ON_WORDS


def _farm_enabled() -> bool:
    """ARCHGUARD_ENABLE is set to something other than an "off" word."""
    return switch_word(os.environ, ENV_ENABLE) not in OFF_WORDS


def finalize_distribution_options(dist: Any) -> None:
    if getattr(dist, "_archguard_hooked", False):
        return
    root = project_root(dist)
    if not opted_in(os.path.join(root, "pyproject.toml")):
        if _farm_enabled():
            from archguard._integration.commands import install

            dist._archguard_activation = "environment"
            install(dist)
        return
    if _disabled():
        announce_once(
            "disabled",
            f"disabled by {ENV_DISABLE}="
            f"{os.environ[ENV_DISABLE]}: building {root} "
            "without an arch policy",
        )
        return
    from archguard._integration.commands import install

    install(dist)


finalize_distribution_options.order = 0  # type: ignore[attr-defined]
