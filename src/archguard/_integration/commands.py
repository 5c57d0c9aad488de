"""Command mixins: archguard's code runs first in the MRO of the package's own commands.

``wrap_build_ext`` works on setuptools' ``build_ext``, torch's ``BuildExtension`` (and
``.with_options(...)``), and any subclass, and never wraps a class twice. The heavy work
(resolution, torch import) happens in :mod:`archguard._integration.build`, only when a
command actually runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_cache: dict[type, type] = {}


class ArchguardBuildExt:
    """Mixin for build_ext: resolve, set the environment, inject flags, build, restore."""

    def run(self) -> None:
        from archguard._integration.build import archguard_build

        with archguard_build(self):
            super().run()  # type: ignore[misc]


class ArchguardBdistWheel:
    """Mixin for bdist_wheel: write the resolution record into the wheel's .dist-info."""

    def write_wheelfile(self, wheelfile_base: str, *args: Any, **kwargs: Any) -> None:
        from archguard._integration.build import record_into

        record_into(self.distribution, Path(wheelfile_base))  # type: ignore[attr-defined]
        super().write_wheelfile(wheelfile_base, *args, **kwargs)  # type: ignore[misc]


class ArchguardEditableWheel:
    """Mixin for editable_wheel: the record goes into the editable wheel's .dist-info."""

    def _run_build_commands(self, *args: Any, **kwargs: Any) -> Any:
        from archguard._integration.build import record_into

        result = super()._run_build_commands(*args, **kwargs)  # type: ignore[misc]
        unpacked = Path(args[1] if len(args) > 1 else kwargs["unpacked_wheel"])
        dist_info = Path(self.dist_info_dir).name  # type: ignore[attr-defined]
        record_into(self.distribution, unpacked / dist_info)  # type: ignore[attr-defined]
        return result


MIXINS: dict[str, type] = {
    "build_ext": ArchguardBuildExt,
    "bdist_wheel": ArchguardBdistWheel,
    "editable_wheel": ArchguardEditableWheel,
}


def wrap(cls: type, mixin: type) -> type:
    """A subclass of ``cls`` with ``mixin`` first in its MRO; ``cls`` itself if already so."""
    if issubclass(cls, mixin):
        return cls
    if cls not in _cache:
        _cache[cls] = type(
            cls.__name__,
            (mixin, cls),
            {
                "__module__": cls.__module__,
                "__doc__": cls.__doc__,
                "__qualname__": getattr(cls, "__qualname__", cls.__name__),
            },
        )
    return _cache[cls]


def wrap_build_ext(cls: type) -> type:
    return wrap(cls, ArchguardBuildExt)


def install(dist: Any) -> None:
    """Wrap ``dist.get_command_class`` so every lookup of a build command gets the mixin.

    Wrapping at lookup time also catches ``[tool.setuptools] cmdclass`` and ``setup.cfg``
    cmdclass, which setuptools applies after finalize hooks run.
    """
    if getattr(dist, "_archguard_hooked", False):
        return
    original = dist.get_command_class

    def get_command_class(command: str) -> type:
        cls = original(command)
        mixin = MIXINS.get(command)
        return wrap(cls, mixin) if mixin is not None else cls

    dist.get_command_class = get_command_class
    dist._archguard_hooked = True
