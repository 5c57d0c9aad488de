"""A farm cell holds what its manifest's switches need (issue 48 item 4): with ``[farm]
variants = true`` each cell's environment gets archguard's ``variants`` extra (variantlib)
beside the farm's, checked in the made cell before any job compiles; a need the cell cannot
meet is refused there, named (``cell-environment-failed``), never ``variantlib-missing``
after every compile."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from archguard.core.cuda import CudaVersion
from archguard.errors import CellEnvironmentFailed
from archguard.farm.envs import (
    IMPORTS,
    _check_extras,
    archguard_requirement,
    cell_extras,
    cell_venv,
)
from archguard.farm.manifest import Cell
from realtools import (
    MINI,
    build_env,
    cli,
    extension,
    needs_cu130,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    not_fetched,
    pyproject,
    setup_py,
)

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def cell(**more: object) -> Cell:
    return Cell("c13", PYTHON, Requirement("torch==2.13.0"), CudaVersion(13, 0), **more)  # type: ignore[arg-type]


def test_the_variants_switch_asks_each_cell_for_the_variants_extra() -> None:
    assert cell_extras() == ("farm",) and cell_extras(variants=True) == ("farm", "variants")
    plain, both = archguard_requirement(), archguard_requirement(cell_extras(variants=True))
    assert plain.startswith("torch-archguard[farm]") and both.startswith(
        "torch-archguard[farm,variants]"
    )
    assert plain.partition("]")[2] == both.partition("]")[2]  # the same archguard


def _lacks(extra: str) -> list[str]:
    """The requirements of archguard's ``extra`` this Python does not hold, read from
    archguard's own metadata (not by the check under test)."""
    out = []
    for text in metadata.requires("torch-archguard") or []:
        req = Requirement(text)
        if req.marker is None or not req.marker.evaluate({"extra": extra}):
            continue
        if req.marker.evaluate({"extra": ""}):
            continue  # not the extra's own
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            out.append(req.name)
            continue
        if not req.specifier.contains(have, prereleases=True):
            out.append(f"{req.name} {have}")
    return out


@pytest.mark.skipif(
    bool(_lacks("farm")),
    reason="needs archguard's [farm] extra in this Python (pip install -e '.[test,farm]'); "
    f"it lacks {', '.join(_lacks('farm'))}",
)
def test_a_cell_holding_both_extras_passes_the_check() -> None:
    """The check a made cell gets, run in this Python, which holds both extras (the [farm]
    one from scripts/setup_env.sh; the pure suite's [test] has only ``variants``)."""
    _check_extras(cell(), Path(sys.executable), cell_extras(variants=True))


def test_a_need_the_made_cell_lacks_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check a made cell gets, run in this Python (which holds the ``variants`` extra,
    [test] asks for it): whole, an extra this archguard lacks, a module of the extra that
    does not import."""
    here = Path(sys.executable)
    _check_extras(cell(), here, ("variants",))
    with pytest.raises(CellEnvironmentFailed, match=r"has no 'nonesuch' extra") as lacks:
        _check_extras(cell(), here, ("variants", "nonesuch"))
    assert lacks.value.code == "cell-environment-failed"
    monkeypatch.setitem(IMPORTS, "variants", ("variantlib_that_is_not",))
    with pytest.raises(CellEnvironmentFailed, match=r"import variantlib_that_is_not \(") as bad:
        _check_extras(cell(), here, ("variants",))
    assert "variants: [farm] variants = true (each wheel's variant, through variantlib)" in str(
        bad.value
    )
    assert "Nothing of the cell was built" in str(bad.value)


@pytest.mark.network  # uv venv --seed takes pip from uv's cache, else from the index
def test_an_extra_uv_cannot_install_fails_the_cell_naming_why(tmp_path: Path) -> None:
    """No index for the cell (uv offline, --no-index): its install fails at the cell's
    creation, naming the cell, archguard's extras and the switch that needs them."""
    offline = cell(installer_options=("--no-index", "--offline"), interpreter=sys.executable)
    with pytest.raises(CellEnvironmentFailed) as failed:
        cell_venv(offline, tmp_path / "site", cell_extras(variants=True))
    said = str(failed.value)
    if said.startswith("uv venv for c13"):
        not_fetched("pip, to seed the cell's environment", said)
    assert said.startswith("uv pip install for c13 (torch==2.13.0, torch-archguard[farm,variants]")
    assert "; variants: [farm] variants = true" in said and "failed (exit" in said, said
    assert not (tmp_path / "site" / ".farm" / "envs" / "c13" / "archguard-cell.json").exists()


@pytest.mark.slow
@pytest.mark.network  # uv fetches the cell's torch and variantlib (its cache links them)
def test_a_cell_made_for_variants_imports_variantlib(tmp_path: Path) -> None:
    """The cell the variants switch asks for: made by uv with archguard[farm,variants],
    variantlib imports in it, and the next run reuses it (its marker names the extras)."""
    site = tmp_path / "site"
    try:
        python = cell_venv(cell(interpreter=sys.executable), site, cell_extras(variants=True))
    except CellEnvironmentFailed as exc:
        not_fetched("a cell's torch and archguard's extras", str(exc))
    made = json.loads((python.parent.parent / "archguard-cell.json").read_text())
    assert made["archguard"].startswith("torch-archguard[farm,variants]"), made
    imported = subprocess.run(
        [str(python), "-c", "import variantlib, archguard.user.variant"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    again = cell_venv(cell(interpreter=sys.executable), site, cell_extras(variants=True))
    assert again == python


MANIFEST = f"""\
[farm]
variants = true

[[cell]]
name = "torch2.13"
python = "{PYTHON}"
torch = "torch==2.13.0"
cuda = "13.0"

[[package]]
name = "minicuda"
source = "src/minicuda"
config = {{ arch_list = "8.0" }}
"""


@pytest.mark.slow
@pytest.mark.network  # uv fetches the cell's torch and variantlib (its cache links them)
@needs_nvcc
@needs_cuda_torch
@needs_cuobjdump
@needs_cu130
def test_a_fresh_variants_farm_publishes_each_wheel_and_its_variant(tmp_path: Path) -> None:
    """A fresh farm with ``[farm] variants = true``: its cell gets variantlib, the job
    compiles once and publishes its wheel, its variant and the variants.json."""
    source = tmp_path / "src" / "minicuda"
    source.mkdir(parents=True)
    for name in ("kernel.cu", "mod.c"):
        shutil.copy(MINI / name, source / name)
    (source / "setup.py").write_text(
        setup_py("minicuda", [extension("_minicuda", ["mod.c", "kernel.cu"])])
    )
    (source / "pyproject.toml").write_text(pyproject())
    manifest = tmp_path / "farm.toml"
    manifest.write_text(MANIFEST)
    site = tmp_path / "site"
    env = build_env(ARCHGUARD_ARCH_LIST="8.0")
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    proc = cli("farm", "run", str(manifest), "-o", str(site), "--no-repair", env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert "variantlib-missing" not in proc.stdout + proc.stderr
    python = site / ".farm" / "envs" / "torch2.13" / "bin" / "python"
    made = json.loads((python.parent.parent / "archguard-cell.json").read_text())
    assert made["archguard"].startswith("torch-archguard[farm,variants]"), made
    imported = subprocess.run(
        [str(python), "-c", "import variantlib"], capture_output=True, text=True, check=False
    )
    assert imported.returncode == 0, imported.stderr
    links = sorted(p.name for p in (site / "wheels").glob("*/*"))
    wheels = [n for n in links if n.endswith(".whl")]
    assert len(wheels) == 2 and all(n.startswith("minicuda-1.0+cu130") for n in wheels), links
    page = (site / "cu130" / "simple" / "minicuda" / "index.html").read_text()
    assert "minicuda-1.0+cu130-variants.json" in page, page
