"""torch's CMake package for every build that may run CMake (issue 58).

A ``setup.py`` that runs ``cmake`` itself, a scikit-build-core package, or a CMake file that
does ``find_package(Torch)`` after ``list(APPEND CMAKE_PREFIX_PATH $ENV{LIBTORCH_PATH})``
finds torch only where something names torch's CMake files: CMake stops with "By not
providing FindTorch.cmake ...". CMake reads ``CMAKE_PREFIX_PATH`` and ``<Package>_DIR`` from
the environment too, so the front-end names the cell's torch there, as it names the toolkit
(:mod:`archguard.frontend.toolkit`):

- ``CMAKE_PREFIX_PATH``: ``<torch>/share/cmake`` (what ``torch.utils.cmake_prefix_path``
  is) before the caller's own entries;
- ``Torch_DIR``: ``<torch>/share/cmake/Torch``, unless the caller set one (theirs wins);
- the package's own variable for torch's location, where its ``setup.py`` reads one and hands
  it to CMake (:attr:`archguard.frontend.setup_py.SetupPy.torch_locations`): torch's
  directory (which holds ``share/cmake``, as libtorch's root does) for a prefix, or
  ``share/cmake/Torch`` for a ``*_DIR``; the caller's value wins.

torch is found without importing it (``importlib.util.find_spec`` in this Python, the one
``archguard wheel`` runs the build's pip with; the cell's torch is never replaced in a build's
overlay). The record keeps archguard's part only: the caller's prefix path is the machine's.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "CMAKE_PREFIX_PATH"
TORCH_DIR = "Torch_DIR"


def torch_location() -> Path | None:
    """The installed torch's package directory in this Python, found without importing it
    (None where there is none)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    places = list(spec.submodule_search_locations or [])
    if not places and spec.origin:
        places = [str(Path(spec.origin).parent)]
    return next((Path(p) for p in places if Path(p).is_dir()), None)


@dataclass(frozen=True)
class TorchCMake:
    """What a build's environment gets for torch's CMake package, and what was said."""

    torch: str = ""  # torch's package directory ("" where none was found)
    variables: dict[str, str] = field(default_factory=dict)  # the build's environment
    recorded: dict[str, str] = field(default_factory=dict)  # archguard's part of them
    notes: tuple[str, ...] = ()
    unset: tuple[str, ...] = ()  # the package's own torch variables left unset

    def as_json(self) -> dict[str, object]:
        """What the record keeps: archguard's part (never the caller's prefix path)."""
        return {
            "torch": self.torch or None,
            "variables": dict(self.recorded),
            "unset": list(self.unset),
            "notes": list(self.notes),
        }


def torch_cmake(
    environ: Mapping[str, str],
    own: Mapping[str, str],
    where: Callable[[], Path | None] = torch_location,
) -> TorchCMake:
    """The variables naming the cell's torch for CMake, over ``environ`` (the caller's):
    ``own`` is the package's own torch-location variables, name -> "prefix" or "dir"."""
    torch = where()
    config = torch / "share" / "cmake" / "Torch" if torch else None
    if torch is None or config is None or not (config / "TorchConfig.cmake").is_file():
        said = (
            f"torch at {torch} has no share/cmake/Torch/TorchConfig.cmake"
            if torch
            else "no torch in this Python"
        )
        unset = tuple(n for n in own if not environ.get(n))
        return TorchCMake(
            str(torch or ""),
            notes=(
                f"torch's CMake package: {said}, so a find_package(Torch) in the build finds "
                "none from archguard (CMAKE_PREFIX_PATH, Torch_DIR"
                + "".join(f", {n}" for n in unset)
                + " left as they are)",
            ),
            unset=unset,
        )
    prefix = str(torch / "share" / "cmake")
    variables: dict[str, str] = {}
    notes: list[str] = []
    theirs = [p for p in environ.get(PREFIX, "").split(os.pathsep) if p and p != prefix]
    variables[PREFIX] = os.pathsep.join([prefix, *theirs])
    recorded = {PREFIX: prefix}
    before = f" before your {PREFIX}" if theirs else ""
    if environ.get(TORCH_DIR):
        dir_said = f"your {TORCH_DIR}={environ[TORCH_DIR]!r} wins (torch's own is {config})"
    else:
        variables[TORCH_DIR] = recorded[TORCH_DIR] = str(config)
        dir_said = f"{TORCH_DIR}={config}"
    notes.append(
        f"torch's CMake package: {PREFIX} gets {prefix} (torch.utils.cmake_prefix_path)"
        f"{before}, {dir_said}: a find_package(Torch) in any CMake the build runs finds the "
        "cell's torch"
    )
    for name, kind in own.items():
        if environ.get(name):
            notes.append(f"its setup.py hands {name} to CMake, torch's location: your {name} wins")
            continue
        value = str(config) if kind == "dir" else str(torch)
        variables[name] = recorded[name] = value
        what = (
            "torch's CMake directory" if kind == "dir" else "torch's prefix (holding share/cmake)"
        )
        notes.append(
            f"its setup.py hands {name} to CMake, torch's location: set to {what}, {name}={value}"
        )
    return TorchCMake(str(torch), variables, recorded, tuple(notes))
