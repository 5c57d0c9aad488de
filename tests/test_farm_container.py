"""A cell's container (``container = "IMAGE"``) and each wheel's platform floor on the page:
the manifest's checks, the image as an input of the cell's jobs, the refusal where neither
docker nor podman is on PATH (for real: a PATH without them), the runtime's command line
(built from data), the workflow, and the page and site.json built from ledgers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archguard.errors import ConfigError
from archguard.farm.ledger import Status
from archguard.farm.manifest import load_manifest
from archguard.farm.plan import plan, render
from realtools import run_main

IMAGE = "pytorch/manylinux2_28-builder:cuda13.0"
MANIFEST = """\
[[cell]]
name = "cu130-torch2.13-py311"
python = "3.11"
torch = "torch==2.13.0"
cuda = "13.0"
{container}

[[cell]]
name = "cu130-torch2.14-py311"
python = "3.11"
torch = "torch==2.14.1"
cuda = "13.0"

[[package]]
name = "floors"
source = "src/floors"
config = {{ arch_list = "8.0;9.0+PTX" }}
"""


def manifest(tmp: Path, container: str = f'container = "{IMAGE}"') -> Path:
    path = tmp / "farm.toml"
    path.write_text(MANIFEST.format(container=container))
    (tmp / "src" / "floors").mkdir(parents=True, exist_ok=True)
    (tmp / "src" / "floors" / "setup.py").write_text("# floors\n")
    return path


def no_runtime_env(tmp: Path) -> dict[str, str]:
    """A PATH with neither docker nor podman (this machine has neither anyway)."""
    bare = tmp / "bare-bin"
    bare.mkdir(exist_ok=True)
    return {"PATH": str(bare), "XDG_CACHE_HOME": str(tmp / "cache")}


def test_a_cells_container_is_checked_by_the_strict_manifest(tmp_path: Path) -> None:
    cells = load_manifest(manifest(tmp_path)).cells
    assert [c.container for c in cells] == [IMAGE, None]
    assert cells[0].as_json()["container"] == IMAGE and "container" not in cells[1].as_json()
    for bad, said in (
        ('container = ""', "container = '' must be a non-empty string"),
        ("container = 13", "container = 13 must be a non-empty string"),
        ('container = "a b"', "container = 'a b' is not an image name"),
        ('containers = "x"', "unknown key 'containers'. Did you mean 'container'?"),
    ):
        with pytest.raises(ConfigError) as caught:
            load_manifest(manifest(tmp_path, bad))
        assert said in caught.value.message, caught.value.message
        assert str(tmp_path / "farm.toml") in caught.value.message


def test_a_cells_image_is_an_input_of_its_jobs_and_in_the_plan(tmp_path: Path) -> None:
    """A new image builds the cell's jobs again and no other cell's; the plan says each
    job's image (JSON), and the GitHub matrix each job's image (PyTorch's builder where the
    cell names none)."""
    ids = {j.cell.name: j.id for j in plan(load_manifest(manifest(tmp_path)))}
    other = f'container = "{IMAGE.replace("13.0", "13.2")}"'
    moved = {j.cell.name: j.id for j in plan(load_manifest(manifest(tmp_path, other)))}
    bare = {j.cell.name: j.id for j in plan(load_manifest(manifest(tmp_path, "")))}
    assert moved["cu130-torch2.13-py311"] != ids["cu130-torch2.13-py311"]
    assert bare["cu130-torch2.13-py311"] != ids["cu130-torch2.13-py311"]
    assert moved["cu130-torch2.14-py311"] == ids["cu130-torch2.14-py311"]
    assert bare["cu130-torch2.14-py311"] == ids["cu130-torch2.14-py311"]

    jobs = plan(load_manifest(manifest(tmp_path)))
    data = json.loads(render(jobs, "json"))
    assert [j["container"] for j in data["jobs"]] == [IMAGE, None]
    matrix = json.loads(render(jobs, "github"))["shards"][0]["include"]
    assert [j["container"] for j in matrix] == [IMAGE, IMAGE]  # 13.0's builder is the same
    text = render(jobs, "text")
    assert f"job {jobs[0].id} in {IMAGE}" in text


def test_a_cell_with_a_container_is_refused_where_no_runtime_is_on_path(tmp_path: Path) -> None:
    """farm plan and farm run, with a PATH holding neither docker nor podman: one error
    naming the manifest, the cell, the image and the fix; nothing made."""
    path = manifest(tmp_path)
    env = no_runtime_env(tmp_path)
    site = tmp_path / "site"
    for argv in (("farm", "plan", str(path)), ("farm", "run", str(path), "-o", str(site))):
        proc = run_main(*argv, env=env)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        err = proc.stderr
        assert err.startswith("archguard error [container-runtime-missing]: "), err
        assert f"farm manifest {path}" in err
        assert f"[[cell]] 'cu130-torch2.13-py311' names container = '{IMAGE}'" in err
        assert "neither docker nor podman is on PATH" in err
        assert "Install docker or podman" in err and "drop `container` from the cell" in err
        assert "platform floor" in err and "Traceback" not in err
    assert not site.exists()  # refused before anything was made
    # the same farm without the container plans on this PATH
    proc = run_main("farm", "plan", str(manifest(tmp_path, "")), env=env)
    assert proc.returncode == 0, proc.stderr


def test_the_runtime_is_docker_first_then_podman(tmp_path: Path) -> None:
    from archguard.farm.container import find_runtime, require_runtime

    for name in ("podman", "docker"):
        here = tmp_path / name
        here.mkdir()
        (here / name).write_text("#!/bin/sh\n")
        (here / name).chmod(0o755)
    both = f"{tmp_path / 'podman'}:{tmp_path / 'docker'}"
    assert find_runtime(both) == str(tmp_path / "docker" / "docker")
    assert find_runtime(str(tmp_path / "podman")) == str(tmp_path / "podman" / "podman")
    assert find_runtime(str(tmp_path / "nothing")) is None
    cells = load_manifest(manifest(tmp_path)).cells
    assert require_runtime(tmp_path, cells, both) == str(tmp_path / "docker" / "docker")
    assert require_runtime(tmp_path, cells[1:], str(tmp_path / "nothing")) is None


def test_the_containers_command_line(tmp_path: Path) -> None:
    """docker and podman's command line from data: removed when done, this uid:gid, the
    mounts at their own paths (each once, none under another), the job's environment (a
    value of None passed by name), the image's Python first on PATH, then the command."""
    from archguard.farm.container import container_argv, container_env, python_dir

    site, cache = tmp_path / "site", tmp_path / "cache" / "archguard"
    argv = ["/site/.farm/envs/c/bin/python", "-m", "archguard", "wheel", "/tree"]
    env = {"FORCE_CUDA": "1", "PIP_INDEX_URL": None}
    mounts: list[str | Path] = [site, cache, site / ".farm", str(cache)]
    built = container_argv(
        "/usr/bin/docker",
        IMAGE,
        argv,
        mounts=mounts,
        env=env,
        user=(1000, 100),
        path_first=(python_dir("3.11"),),
    )
    assert built == [
        "/usr/bin/docker",
        "run",
        "--rm",
        "--user",
        "1000:100",
        "--volume",
        f"{cache}:{cache}",
        "--volume",
        f"{site}:{site}",
        "--env",
        "FORCE_CUDA=1",
        "--env",
        "PIP_INDEX_URL",
        IMAGE,
        "sh",
        "-c",
        'PATH="/opt/python/cp311-cp311/bin:$PATH"; export PATH; exec "$@"',
        "sh",
        *argv,
    ]
    podman = container_argv("/usr/bin/podman", IMAGE, argv, mounts=[site], env={}, user=(1000, 100))
    assert podman[:6] == [
        "/usr/bin/podman",
        "run",
        "--rm",
        "--user",
        "1000:100",
        "--userns=keep-id",
    ]
    assert podman[-len(argv) - 1 :] == [IMAGE, *argv]
    as_root = container_argv("/usr/bin/podman", IMAGE, argv, mounts=[], env={}, user=(0, 0))
    assert "--userns=keep-id" not in as_root

    passed = container_env(
        {"PIP_INDEX_URL": "https://example.invalid/simple", "HOME": "/home/me", "PATH": "/x"},
        {"SOURCE_DATE_EPOCH": "315532800", "MAX_JOBS": "1"},
        cache,
    )
    assert passed["PIP_INDEX_URL"] is None  # by name: its value never on a command line
    assert "PATH" not in passed and passed["HOME"] == "/tmp"
    assert passed["SOURCE_DATE_EPOCH"] == "315532800" and passed["MAX_JOBS"] == "1"
    assert passed["XDG_CACHE_HOME"] == str(cache.parent)
    assert passed["UV_CACHE_DIR"] == str(cache / "uv")
    assert passed["UV_PYTHON_DOWNLOADS"] == "never"


def test_a_cells_container_replaces_the_builder_image_in_the_workflow(tmp_path: Path) -> None:
    from archguard.farm.workflow import workflow

    text = workflow(manifest(tmp_path), "farm.toml")
    assert "    container:\n      image: ${{ matrix.container }}\n" in text
    assert "-o site --in-container\n" in text
    plain = workflow(manifest(tmp_path, ""), "farm.toml")
    assert "image: pytorch/manylinux2_28-builder:cuda${{ matrix.cuda }}\n" in plain
    assert "--in-container" not in plain


def test_the_page_and_site_json_give_each_wheels_platform_floor(tmp_path: Path) -> None:
    from archguard.binaries.facts import WheelFacts
    from archguard.core.site import parse_site
    from archguard.farm.ledger import Outcome, store_path
    from archguard.farm.run import write_page
    from archguard.farm.sitejson import site_data

    loaded = load_manifest(manifest(tmp_path))
    low = "floors-0.1+cu130torch2.13-cp311-cp311-manylinux_2_28_x86_64.whl"
    high = "floors-0.1+cu130torch2.14-cp311-cp311-manylinux_2_34_x86_64.whl"
    facts = [
        WheelFacts.from_json({"wheel": name, "ok": True, "targets": ["sm_80"]})
        for name in (low, high)
    ]
    outcomes = [
        Outcome("j1", "floors", "cu130-torch2.13-py311", Status.BUILT, [low], details=facts[:1]),
        Outcome("j2", "floors", "cu130-torch2.14-py311", Status.BUILT, [high], details=facts[1:]),
    ]
    for o in outcomes:
        o.sha256 = {o.wheels[0]: o.job * 32}
        stored = store_path(tmp_path, o.wheels[0], o.job * 32)
        stored.parent.mkdir(parents=True)
        stored.write_bytes(b"wheel")
    write_page(tmp_path, loaded, outcomes)
    page = (tmp_path / "index.html").read_text()
    assert (
        "<li>platform manylinux_2_28_x86_64: glibc &gt;= 2.28 (RHEL 8, Ubuntu 20.04 and newer)</li>"
    ) in page
    assert (
        "<li>platform manylinux_2_34_x86_64: glibc &gt;= 2.34 (RHEL 9, Ubuntu 22.04 and "
        "newer); above torch&#x27;s own manylinux_2_28: a machine with glibc 2.28-2.33 "
        "installs torch and not this wheel</li>"
    ) in page
    data = site_data(tmp_path, loaded, {o.job: o for o in outcomes}, ["j1", "j2"]).as_json()
    wheels = {w["name"]: w for w in data["wheels"]}  # type: ignore[attr-defined]
    assert wheels[low]["glibc"] == "2.28"
    assert wheels[low]["platform_floor"] == "glibc >= 2.28 (RHEL 8, Ubuntu 20.04 and newer)"
    assert wheels[high]["glibc"] == "2.34"
    back = parse_site(json.loads(json.dumps(data)), "site.json", ValueError)
    assert [w.glibc for w in back.wheels] == ["2.28", "2.34"]


def test_a_platform_tags_glibc_floor_in_words() -> None:
    from archguard.detect.machine import glibc_floor_text, platform_floor, platform_glibc

    assert platform_glibc("manylinux_2_28_x86_64") == (2, 28)
    assert platform_glibc("manylinux_2_17_x86_64.manylinux2014_x86_64") == (2, 17)
    assert platform_glibc("manylinux2010_x86_64") == (2, 12)
    assert platform_glibc("linux_x86_64") is None
    assert platform_glibc("musllinux_1_2_x86_64") is None
    assert glibc_floor_text((2, 17)) == "glibc >= 2.17 (RHEL 7, Ubuntu 14.04 and newer)"
    assert glibc_floor_text((2, 31)) == "glibc >= 2.31 (RHEL 9, Ubuntu 20.04 and newer)"
    assert "newer than every RHEL and Ubuntu LTS" in glibc_floor_text((2, 41))
    assert platform_floor("linux_x86_64").startswith("no glibc floor stated")
