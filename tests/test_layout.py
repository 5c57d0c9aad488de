"""The layout tells the architecture: subpackages in layers, every import between two of them
running downhill (a lazy import inside a function counts; one under ``if TYPE_CHECKING:``
never runs and does not), so no two subpackages import each other, directly or round a
circle. The layers are the package docstring's."""

from __future__ import annotations

import ast
from pathlib import Path

import archguard

PACKAGE = Path(archguard.__file__).parent

# Lowest first. A subpackage may import its own layer's modules only within itself, and any
# lower layer's. The top-level modules (errors, the version) sit below everything.
LAYERS: list[set[str]] = [
    {"errors", "__version__", "_fs", "_http", "jobserver"},
    {"core", "nvcc_steps"},
    {"detect"},
    {"nvcc", "lint"},
    {"settings"},
    {"binaries"},
    {"reports", "user"},
    {"_integration", "frontend"},
    {"farm"},
    {"_cli"},
    {"cpp_extension", "__main__"},
]


def layer_of(unit: str) -> int:
    for index, units in enumerate(LAYERS):
        if unit in units:
            return index
    raise AssertionError(f"{unit} is in no layer: add it to LAYERS and the package docstring")


def unit_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def edges() -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, where) for every import between two units."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for statement in node.body
            for inner in ast.walk(statement)
        }
        unit = unit_of(path)
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "archguard":
                    names = [f"archguard.{a.name}" for a in node.names]
                else:
                    names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "archguard" and len(parts) > 1 and parts[1] != unit:
                    line = getattr(node, "lineno", 0)
                    where = f"{path.relative_to(PACKAGE.parent)}:{line}"
                    out.append((unit, parts[1], where))
    return out


def test_every_import_between_subpackages_runs_downhill() -> None:
    found = edges()
    assert any(u == "_cli" and v == "core" for u, v, _ in found)  # the walk sees imports
    uphill = [
        f"{where}: {u} (layer {layer_of(u)}) imports {v} (layer {layer_of(v)})"
        for u, v, where in found
        if layer_of(v) >= layer_of(u)
    ]
    assert not uphill, "\n".join(uphill)


def test_the_layers_are_the_package_docstrings() -> None:
    doc = " ".join((archguard.__doc__ or "").split())
    for units in LAYERS[1:-1]:
        for unit in sorted(units):
            assert f"``{unit}``" in doc, unit
    assert "core" in doc.split("<-")[0]


def test_the_farm_runs_archguard_wheel_and_never_imports_the_frontend() -> None:
    """A farm job runs ``archguard wheel`` in its cell (a process); what both need (the
    cache, a build's source) stands on a floor below both (``detect.fetch``)."""
    found = edges()
    assert any(u == "farm" and v == "detect" for u, v, _ in found)
    assert not [where for u, v, where in found if u == "farm" and v == "frontend"]
