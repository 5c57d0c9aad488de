"""`archguard watch` (issue #22): the torch releases pip finds that the torch table lacks.

No network: a local wheel directory holds tiny fake ``torch-*.whl`` files named as the index
names them, and pip is pointed at it (``--isolated --no-index --find-links DIR``); pip's own
machinery answers, as it would from the real index."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from realtools import REPO, build_env, cli, needs_cuobjdump, not_fetched


def fake_torch(directory: Path, version: str) -> Path:
    """A wheel pip accepts as torch ``version`` (no libraries: not a CUDA build)."""
    directory.mkdir(parents=True, exist_ok=True)
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    wheel = directory / f"torch-{version}-{tag}-{tag}-manylinux_2_28_x86_64.whl"
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        wheel_tag = f"{tag}-{tag}-manylinux_2_28_x86_64"
        zf.writestr(
            f"{info}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {wheel_tag}\n",
        )
        zf.writestr("torch/version.py", f"__version__ = '{version}+cpu'\ncuda = None\n")
        zf.writestr(f"{info}/RECORD", "")
    return wheel


def index(tmp: Path, *versions: str) -> list[str]:
    for v in versions:
        fake_torch(tmp / "index", v)
    return ["--", "--isolated", "--no-index", "--find-links", str(tmp / "index")]


def test_watch_lists_the_releases_the_table_lacks(tmp_path: Path) -> None:
    pip = index(tmp_path, "2.13.0", "2.14.1", "2.16.0", "2.17.0rc1")
    proc = cli("watch", "--format", "json", *pip, env=build_env())
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == "archguard.watch/1"
    assert data["available"] == ["2.16.0", "2.14.1", "2.13.0"]  # no pre-releases
    assert data["missing"] == ["2.16.0"]  # 2.13 and 2.14 have rows (2.14: probed wheels)
    text = cli("watch", *pip, env=build_env())
    assert (
        "missing from the table: 2.16.0 (read them with `archguard watch --probe`)" in text.stdout
    )


def test_watch_against_the_farm_table_and_nothing_missing(tmp_path: Path) -> None:
    table = tmp_path / "builds.yml"
    table.write_text(
        "schema: 1\nbuilds:\n"
        '  - {tag: cu130, torch: ["2.13", "2.14"], cubins: "7.5 8.0", ptx: "", source: test}\n'
    )
    pip = index(tmp_path, "2.13.0", "2.14.1")
    proc = cli("watch", "--torch-builds", str(table), *pip, env=build_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "missing from the table: none" in proc.stdout
    assert f"checked against {table}" in proc.stdout


@needs_cuobjdump  # --probe reads each download with it
def test_watch_probe_downloads_each_missing_release_and_says_what_it_could_not_read(
    tmp_path: Path,
) -> None:
    pip = index(tmp_path, "2.1.0", "2.13.0")
    out = tmp_path / "proposed.yml"
    proc = cli(
        "watch",
        "--since",
        "2.0",
        "--probe",
        "--download-dir",
        str(tmp_path / "dl"),
        "-o",
        str(out),
        "--format",
        "json",
        *pip,
        env=build_env(),
    )
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["missing"] == ["2.1.0"]
    assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == [
        next((tmp_path / "index").glob("torch-2.1.0-*.whl")).name
    ]
    (problem,) = data["problems"]
    assert problem.startswith("torch 2.1.0:") and "not a CUDA build" in problem
    assert not out.exists()  # nothing proposed from a wheel with no device code


def test_an_unreachable_index_is_one_clear_error(tmp_path: Path) -> None:
    proc = cli("watch", "--", "--isolated", "--no-index", env=build_env())
    assert proc.returncode == 2
    assert "archguard error [index-unreachable]" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_pip_without_json_is_named_not_blamed_on_the_network(tmp_path: Path) -> None:
    """`pip index versions --json` came with pip 25.1; the pip `python -m venv` bundles here is
    older. watch says so and how to upgrade, not "check the network" (exit 2)."""
    import os
    import subprocess
    import venv

    import packaging
    import yaml

    root = tmp_path / "v"
    venv.create(root, with_pip=True)  # ensurepip's bundled pip: no download
    python = str(root / "bin" / "python")
    probe = subprocess.run(
        [python, "-m", "pip", "index", "versions", "pip", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "no such option: --json" in probe.stderr, "this Python bundles a pip with --json"
    deps = tmp_path / "deps"  # archguard's own dependencies, nothing else of this venv
    deps.mkdir()
    for module in (packaging, yaml):
        (deps / module.__name__).symlink_to(Path(module.__file__).parent)  # type: ignore[arg-type]
    env = {**build_env(), "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(deps)])}
    proc = subprocess.run(
        [python, "-m", "archguard", "watch", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["error"]["code"] == "pip-too-old"
    assert proc.stderr.startswith("archguard error [pip-too-old]: archguard watch lists")
    assert 'pip install -U "pip>=25.1"' in proc.stderr and "network" not in proc.stderr


def test_the_missing_toolkit_minors_are_each_minors_newest_release() -> None:
    """As data: nvidia-cuda-nvcc's releases against a table of 13.0 and 13.2."""
    from packaging.version import Version

    from archguard.core.cuda import CudaVersion
    from archguard.user.watch import missing_minors

    releases = [Version(v) for v in ("13.5.37", "13.4.92", "13.4.59", "13.2.86", "13.0.88")]
    table = [CudaVersion(13, 0), CudaVersion(13, 2)]
    assert missing_minors(releases, table) == [Version("13.5.37"), Version("13.4.92")]
    assert missing_minors(releases, [*table, CudaVersion(13, 4), CudaVersion(13, 5)]) == []
    # below the table's oldest is not the table's business
    assert missing_minors([Version("12.1.105")], table) == []


@pytest.mark.network
def test_watch_lists_a_toolkit_the_table_lacks_and_probe_proposes_its_real_row(
    tmp_path: Path,
) -> None:
    """A farm's toolkits.yml without 13.5, the real nvidia-cuda-nvcc 13.5.37 wheel on the
    index: watch names it (exit 1) and --probe proposes the row its real ptxas gives, the
    bundled 13.5 row's targets, and what the policy rows become with it."""
    from archguard.core.bundled import bundled_yaml

    pip = index(tmp_path, "2.13.0")
    fetch = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--isolated", "--no-deps", "-q", "-d",
         str(tmp_path / "index"), "nvidia-cuda-nvcc==13.5.37"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if fetch.returncode != 0:
        not_fetched("nvidia-cuda-nvcc==13.5.37", fetch.stderr)
    data = bundled_yaml("toolkits.yml")
    assert isinstance(data, dict)
    rows = data["toolkits"]
    table = tmp_path / "toolkits.yml"
    table.write_text(
        "schema: 1\ntoolkits:\n"
        + "".join(
            f'  "{cuda}": {{source: "t", cubins: [{", ".join(r["cubins"])}], '
            f"ptx: [{', '.join(r['ptx'])}]}}\n"
            for cuda, r in rows.items()
            if cuda != "13.5"
        )
    )
    args = ("watch", "--toolkits", str(table), "--download-dir", str(tmp_path / "dl"))
    listed = cli(*args, "--format", "json", *pip, env=build_env())
    assert listed.returncode == 1, listed.stderr
    toolkits = json.loads(listed.stdout)["toolkits"]
    assert toolkits["missing"] == ["13.5.37"] and toolkits["proposed_rows"] == []
    probed = cli(*args, "--probe", *pip, env=build_env())
    assert probed.returncode == 1, probed.stderr
    assert "toolkit minors missing from the table: 13.5 (13.5.37)" in probed.stdout
    assert f"cubins: [{', '.join(rows['13.5']['cubins'])}]" in probed.stdout
    assert f"ptx: [{', '.join(rows['13.5']['ptx'])}]" in probed.stdout
    assert "# policy: no cu135 row is needed" in probed.stdout
    assert (
        "#   row cu130 (torch 2.14): 7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX (unchanged)" in probed.stdout
    )
    whole = cli("watch", "--toolkits", str(table), *pip, env=build_env())
    assert "toolkit minors missing from the table: 13.5 (13.5.37)" in whole.stdout
