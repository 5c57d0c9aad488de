"""`archguard watch` (issue #22): the torch releases on the index that the torch table lacks.

No network: a local PEP 503 index (a directory, ``DIR/torch/index.html`` listing tiny fake
``torch-*.whl`` files named as the index names them) is named after ``--`` (``--index-url
file:///DIR``) and read by the one index reader (``archguard.detect.index``), as the real
index is; ``--probe`` downloads from it with pip. pip's own settings are set aside
(``PIP_CONFIG_FILE=/dev/null``, no ``PIP_*`` index variable), so a developer's pip.conf adds
no index."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from realtools import build_env, cli, needs_cuobjdump, not_fetched


def fake_torch(root: Path, version: str, machine: str = "x86_64") -> Path:
    """A wheel pip accepts as torch ``version`` for this Python on ``machine`` (no
    libraries: not a CUDA build), in the index ``root``'s torch/ directory."""
    directory = root / "torch"
    directory.mkdir(parents=True, exist_ok=True)
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    full = f"{tag}-{tag}-manylinux_2_28_{machine}"
    wheel = directory / f"torch-{version}-{full}.whl"
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        zf.writestr(
            f"{info}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {full}\n",
        )
        zf.writestr("torch/version.py", f"__version__ = '{version}+cpu'\ncuda = None\n")
        zf.writestr(f"{info}/RECORD", "")
    return wheel


def project_page(root: Path, project: str) -> None:
    """``root/<project>/index.html``: the PEP 503 page of the files beside it."""
    here = root / project
    links = "".join(
        f'<a href="{html.escape(f.name)}">{html.escape(f.name)}</a><br/>\n'
        for f in sorted(here.iterdir())
        if f.name != "index.html"
    )
    (here / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")


def index(tmp: Path, *versions: str, machine: str = "x86_64") -> list[str]:
    """A local index of torch ``versions``; the arguments that name it to watch (pip's
    own, after ``--``)."""
    root = tmp / "index"
    for v in versions:
        fake_torch(root, v, machine)
    project_page(root, "torch")
    return ["--", "--isolated", "--index-url", root.as_uri()]


def index_env() -> dict[str, str]:
    """A build container's environment with pip's settings set aside: the index is the one
    named after ``--``."""
    unset = {k: "" for k in os.environ if k.startswith("PIP_")}
    return build_env(**unset, PIP_CONFIG_FILE=os.devnull)


def test_watch_lists_the_releases_the_table_lacks(tmp_path: Path) -> None:
    pip = index(tmp_path, "2.13.0", "2.14.1", "2.16.0", "2.17.0rc1")
    proc = cli("watch", "--format", "json", *pip, env=index_env())
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == "archguard.watch/1"
    assert data["available"] == ["2.16.0", "2.14.1", "2.13.0"]  # no pre-releases
    assert data["missing"] == ["2.16.0"]  # 2.13 and 2.14 have rows (2.14: probed wheels)
    text = cli("watch", *pip, env=index_env())
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
    proc = cli("watch", "--torch-builds", str(table), *pip, env=index_env())
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
        env=index_env(),
    )
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["missing"] == ["2.1.0"]
    assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == [
        next((tmp_path / "index" / "torch").glob("torch-2.1.0-*.whl")).name
    ]
    (problem,) = [p for p in data["problems"] if p.startswith("torch")]
    assert problem.startswith("torch 2.1.0:") and "not a CUDA build" in problem
    assert not out.exists()  # nothing proposed from a wheel with no device code


def test_an_unreachable_index_is_one_clear_error(tmp_path: Path) -> None:
    proc = cli("watch", "--", "--isolated", "--no-index", env=index_env())
    assert proc.returncode == 2
    assert "archguard error [index-unreachable]" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_index_names_the_fix_and_find_links_is_no_index(tmp_path: Path) -> None:
    """pip's --no-index leaves watch nothing to read: one error that says so; a
    --find-links directory is named as what it is not (a page per project)."""
    pip = ["--", "--no-index", "--find-links", str(tmp_path)]
    proc = cli("watch", "--format", "json", *pip, env=index_env())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = json.loads(proc.stdout)["error"]["message"]
    assert "--no-index" in message and "not --find-links" in message
    assert "--index-url URL" in message


def _no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"watch ran a program to read the index: {args}")

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


def test_watch_reads_a_local_index_through_the_one_reader_with_no_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The releases come from the index's project page (a PEP 503 directory here, as
    families and fetch read it), not from `pip index versions`: no program runs."""
    from packaging.version import Version

    from archguard.user import watch

    index(tmp_path, "2.13.0", "2.14.1", "2.16.0", "2.17.0rc1")
    fake_torch(tmp_path / "index", "2.15.0", "aarch64")
    (tmp_path / "index" / "torch" / "torch-2.18.0.tar.gz").write_bytes(b"")  # an sdist: no build
    project_page(tmp_path / "index", "torch")
    _no_subprocess(monkeypatch)
    root = (tmp_path / "index").as_uri()
    listed = watch.available([root], "torch", "x86_64")
    assert listed.versions == [Version("2.16.0"), Version("2.14.1"), Version("2.13.0")]
    assert listed.unread == []
    assert watch.available([root], "torch", "aarch64").versions == [Version("2.15.0")]
    # an index without the project is said, and the others still read
    nvcc = watch.available([root, (tmp_path / "none").as_uri()], watch.NVCC_PROJECT)
    assert nvcc.versions == [] and len(nvcc.unread) == 2
    assert all(" could not be read (" in u for u in nvcc.unread)


def test_watch_reads_an_index_served_over_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same reader over HTTP (a localhost server of the same directory)."""
    import functools
    import http.server
    import threading

    from packaging.version import Version

    from archguard.user import watch

    index(tmp_path, "2.13.0", "2.16.0")
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "index")
    )
    handler.log_message = lambda *_: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        _no_subprocess(monkeypatch)
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        listed = watch.available([url], "torch", "x86_64")
    finally:
        server.shutdown()
        server.server_close()
    assert listed.versions == [Version("2.16.0"), Version("2.13.0")]


def test_a_release_counts_where_this_python_installs_a_wheel_of_it() -> None:
    """As pip chose: this interpreter's tags on the machine asked about, its Requires-Python;
    no pre-release, no sdist, no other project's file."""
    from packaging.version import Version

    from archguard.detect.index import IndexFile
    from archguard.user.watch import releases_of

    here = f"cp{sys.version_info[0]}{sys.version_info[1]}"

    def file(name: str, requires: str | None = None) -> IndexFile:
        return IndexFile(name, f"file:///x/{name}", None, requires, False)

    files = [
        file(f"torch-2.13.0-{here}-{here}-manylinux_2_28_x86_64.whl"),
        file(f"torch-2.14.0-{here}-{here}-manylinux_2_28_aarch64.whl"),
        file("torch-2.15.0-cp27-cp27mu-manylinux1_x86_64.whl"),  # another Python
        file(f"torch-2.16.0-{here}-{here}-win_amd64.whl"),  # not Linux
        file(f"torch-2.17.0-{here}-{here}-manylinux_2_28_x86_64.whl", "<3"),
        file(f"torch-2.18.0.dev20260101-{here}-{here}-manylinux_2_28_x86_64.whl"),
        file("torch-2.19.0.tar.gz"),
        file(f"torchvision-0.30.0-{here}-{here}-manylinux_2_28_x86_64.whl"),
        file("nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.whl", ">=3"),
    ]
    assert releases_of(files, "torch", "x86_64") == [Version("2.13.0")]
    assert releases_of(files, "torch", "aarch64") == [Version("2.14.0")]
    assert releases_of(files, "nvidia-cuda-nvcc", "x86_64") == [Version("13.0.88")]


def test_pip_index_options_after_the_dashes_choose_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--index-url, --extra-index-url and --no-index after `--` map as the families' and
    fetch's do (detect.index.index_urls)."""
    from archguard.errors import IndexUnreachable
    from archguard.user.watch import watched_indexes

    for name in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    one, two = (tmp_path / "one").as_uri(), (tmp_path / "two").as_uri()
    assert watched_indexes(["--index-url", one, "--extra-index-url", two]) == [one, two]
    assert watched_indexes([f"-i{two}"]) == [two]
    with pytest.raises(IndexUnreachable, match="--no-index"):
        watched_indexes(["--no-index"])


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
         str(tmp_path / "index" / "nvidia-cuda-nvcc"), "nvidia-cuda-nvcc==13.5.37"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if fetch.returncode != 0:
        not_fetched("nvidia-cuda-nvcc==13.5.37", fetch.stderr)
    project_page(tmp_path / "index", "nvidia-cuda-nvcc")
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
    listed = cli(*args, "--format", "json", *pip, env=index_env())
    assert listed.returncode == 1, listed.stderr
    toolkits = json.loads(listed.stdout)["toolkits"]
    assert toolkits["missing"] == ["13.5.37"] and toolkits["proposed_rows"] == []
    probed = cli(*args, "--probe", *pip, env=index_env())
    assert probed.returncode == 1, probed.stderr
    assert "toolkit minors missing from the table: 13.5 (13.5.37)" in probed.stdout
    assert f"cubins: [{', '.join(rows['13.5']['cubins'])}]" in probed.stdout
    assert f"ptx: [{', '.join(rows['13.5']['ptx'])}]" in probed.stdout
    assert "# policy: no cu135 row is needed" in probed.stdout
    assert (
        "#   row cu130 (torch 2.14): 7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX (unchanged)" in probed.stdout
    )
    whole = cli("watch", "--toolkits", str(table), *pip, env=index_env())
    assert "toolkit minors missing from the table: 13.5 (13.5.37)" in whole.stdout
