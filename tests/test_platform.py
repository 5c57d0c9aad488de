"""The platform axis (issue #55): linux x86_64 and aarch64, each with PyTorch's own build.

The aarch64 facts are rows of the bundled torch table probed from PyTorch's aarch64 wheels;
here they are read back through the commands a user runs (``list``, ``explain``, ``derive``,
``matrix``, ``watch``) and, in the slow test, probed again from the real wheel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from archguard.core.cuda import CudaVersion
from archguard.core.platform import (
    host_platform,
    parse_platform,
    platform_of_tag,
    wheel_tag,
)
from archguard.core.policy import parse_policy
from archguard.core.toolkit import known_arches
from archguard.core.torchbuild import bundled_builds, bundled_torch
from archguard.errors import ConfigError, PolicyError, UnknownTorchBuild
from realtools import cli, needs_cuobjdump, not_fetched, run_main
from test_watch import index, index_env

THOR, GB10, TURING = (11, 0), (12, 1), (7, 5)


@pytest.mark.parametrize("text", ["x86_64", "aarch64", " aarch64 "])
def test_the_two_platforms_parse(text: str) -> None:
    assert parse_platform(text) == text.strip()


@pytest.mark.parametrize(
    ("text", "fix"), [("arm64", "'aarch64'"), ("amd64", "'x86_64'"), ("ppc64le", "")]
)
def test_another_spelling_is_refused_naming_the_one_to_write(text: str, fix: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_platform(text, "manifest.toml [[cell]] platform")
    message = str(caught.value)
    assert message.startswith(f"manifest.toml [[cell]] platform: {text!r} is not a platform")
    assert fix in message
    assert "write one of x86_64, aarch64" in message


@pytest.mark.parametrize(
    ("machine", "expected"),
    [("x86_64", "x86_64"), ("aarch64", "aarch64"), ("arm64", "aarch64"), ("riscv64", None)],
)
def test_the_host_is_read_from_its_machine_name(machine: str, expected: str | None) -> None:
    assert host_platform(machine) == expected


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("manylinux_2_28_aarch64", "aarch64"),
        ("manylinux2014_aarch64", "aarch64"),
        ("linux_x86_64", "x86_64"),
        ("manylinux_2_28_x86_64", "x86_64"),
        ("win_amd64", None),
        ("macosx_11_0_arm64", None),
        ("any", None),
    ],
)
def test_a_wheel_tag_names_its_platform(tag: str, expected: str | None) -> None:
    assert platform_of_tag(tag) == expected
    if expected:
        assert platform_of_tag(wheel_tag(expected)) == expected


def test_the_table_holds_each_platforms_build_as_its_wheels_say() -> None:
    aarch = [b for b in bundled_builds() if b.platform == "aarch64"]
    assert {(b.tag, b.torch) for b in aarch} == {
        ("cu130", "2.11"),
        ("cu130", "2.12"),
        ("cu130", "2.13"),
        ("cu130", "2.14"),
        ("cu132", "2.15"),
    }
    for b in aarch:
        assert b.build.targets.names() == ["sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]
        assert "manylinux_2_28_aarch64.whl (sha256 " in b.build.source
    x86 = bundled_torch((13, 0), Version("2.13"))
    assert x86.platform == "x86_64"
    assert x86.targets.names() == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


def test_a_platform_the_table_lacks_a_build_for_is_one_error_naming_what_it_has() -> None:
    with pytest.raises(UnknownTorchBuild) as caught:
        bundled_torch((12, 8), Version("2.8"), "aarch64")
    message = str(caught.value)
    assert "no cu128 build of torch 2.8 for aarch64" in message
    assert "(it has torch 2.8 (cu128) for x86_64 only)" in message


def test_list_for_aarch64_serves_thor_natively_by_the_platforms_own_row() -> None:
    proc = run_main("list", "--cuda", "13.0", "--torch", "2.13", "--platform", "aarch64")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "8.0;9.0;10.0;11.0;12.0+PTX\n"
    x86 = run_main("list", "--cuda", "13.0", "--torch", "2.13", "--platform", "x86_64")
    assert x86.stdout == "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX\n"
    data = json.loads(
        run_main(
            "explain", "--cuda", "13.0", "--torch", "2.13", "--platform", "aarch64",
            "--format", "json",
        ).stdout
    )  # fmt: skip
    assert data["platform"] == "aarch64"
    assert data["request"]["origin"] == "policy row cu130 (aarch64)"
    tiers = {c["cc"]: c["tier"] for c in data["coverage"]}
    assert tiers["11.0"] == "native"
    assert tiers["12.1"] == "native"
    assert tiers["7.5"] == "dead"  # the aarch64 torch itself ships no 7.x


def test_explain_names_the_platform_and_the_rows_rule() -> None:
    proc = run_main("explain", "11.0", "--cuda", "13.0", "--torch", "2.13", "--platform", "aarch64")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "  platform    aarch64 (--platform)" in out
    assert "request     policy row cu130 (aarch64): 8.0;9.0;10.0;11.0;12.0+PTX" in out
    assert "torch ships sm_110 there" in out  # the row's written reason
    assert "Why 11.0? => kept" in out
    x86 = run_main("explain", "11.0", "--cuda", "13.0", "--torch", "2.13").stdout
    assert "Why 11.0? => dropped (torch)" in x86  # x86_64's torch ships no sm_110


def test_a_described_torch_takes_the_platform_given() -> None:
    """The aarch64 row asked for, clamped by the torch described: no 10.x or 12.x in it, so
    10.0 and 12.0 are dropped and the nets move down (9.0 carries the net for the 10.x gap)."""
    proc = run_main(
        "list", "--cuda", "13.0", "--torch-arches", "sm_80 sm_90 sm_110", "--platform", "aarch64"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "8.0;9.0+PTX;11.0+PTX\n"


def test_a_bad_platform_on_the_command_line_is_a_usage_error_naming_the_fix() -> None:
    proc = run_main("list", "--cuda", "13.0", "--torch", "2.13", "--platform", "arm64")
    assert proc.returncode == 2
    assert "'arm64' is not a platform" in proc.stderr
    assert "write 'aarch64'" in proc.stderr


def test_derive_for_aarch64_proposes_the_policys_aarch64_row() -> None:
    for cuda in ("13.0", "13.2"):
        proc = run_main("derive", "--cuda", cuda, "--platform", "aarch64", "--format", "json")
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["platform"] == "aarch64"
        assert data["row"]["arch_list"] == "8.0;9.0;10.0;11.0;12.0+PTX"
        assert data["agrees"], data["differences"]
    text = run_main("derive", "--cuda", "13.0", "--platform", "aarch64").stdout
    assert "    platforms:\n      aarch64:\n        arch_list:" in text
    assert "row cu130 as aarch64 reads it (8.0;9.0;10.0;11.0;12.0+PTX)" in text


def test_the_matrix_of_aarch64_is_its_own_builds() -> None:
    proc = run_main("matrix", "--platform", "aarch64", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    combos = json.loads(proc.stdout)["combos"]
    assert [(c["cuda_tag"], c["torch"]) for c in combos] == [
        ("cu130", "2.11"),
        ("cu130", "2.12"),
        ("cu130", "2.13"),
        ("cu130", "2.14"),
        ("cu132", "2.15"),
    ]
    assert {c["platform"] for c in combos} == {"aarch64"}
    assert {c["effective"] for c in combos} == {"8.0;9.0;10.0;11.0;12.0+PTX"}
    text = run_main("matrix", "--platform", "aarch64").stdout
    assert text.startswith("platform: aarch64")


BASE = """schema: 1
rows:
  cu130:
    arch_list: "7.5;8.0"
    reason: the x86 row
    platforms:
{platforms}
"""


@pytest.mark.parametrize(
    ("platforms", "problem"),
    [
        (
            '      arm64:\n        arch_list: "8.0"\n        reason: r',
            "rows.cu130.platforms.arm64: 'arm64' is not a platform",
        ),
        (
            '      aarch64:\n        arch_list: "8.0"\n        reasn: r',
            "rows.cu130.platforms.aarch64: unknown key 'reasn' (did you mean 'reason'?)",
        ),
        (
            '      aarch64:\n        arch_list: "8.0"',
            "rows.cu130.platforms.aarch64: missing required key 'reason'",
        ),
        (
            '      aarch64:\n        arch_list: "sm_111"\n        reason: r',
            "rows.cu130.platforms.aarch64.arch_list",
        ),
    ],
)
def test_a_platforms_row_is_checked_as_strictly_as_a_row(platforms: str, problem: str) -> None:
    import yaml

    data = yaml.safe_load(BASE.format(platforms=platforms))
    with pytest.raises(PolicyError) as caught:
        parse_policy(data, "farm.yml", known_arches())
    assert problem in str(caught.value)


def test_a_row_without_a_platforms_list_serves_every_platform() -> None:
    import yaml

    data = yaml.safe_load('schema: 1\nrows:\n  cu130:\n    arch_list: "8.0"\n    reason: r\n')
    policy = parse_policy(data, "farm.yml", known_arches())
    row = policy.row("cu130", "aarch64")
    assert row is not None
    assert row.name == "policy row cu130"
    assert policy.row("cu129", "aarch64") is None


def test_watch_lists_the_aarch64_builds_the_table_lacks(tmp_path: Path) -> None:
    pip = index(tmp_path, "2.13.0", "2.16.0", machine="aarch64")
    proc = cli("watch", "--platform", "aarch64", "--format", "json", *pip, env=index_env())
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["platform"] == "aarch64"
    assert data["available"] == ["2.16.0", "2.13.0"]  # the index's aarch64 wheels
    assert data["missing"] == ["2.16.0"]  # 2.13 has an aarch64 row
    assert data["since"] == "2.11"  # the table's oldest aarch64 build, not x86_64's 2.4


@pytest.mark.slow
@pytest.mark.network
@needs_cuobjdump
def test_the_real_aarch64_torch_wheel_reproduces_its_own_row(tmp_path: Path) -> None:
    """PyTorch's aarch64 wheel, read here on x86_64 with cuobjdump: the same as its row, and
    not the x86_64 row (which the table held for every platform before)."""
    got = subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--isolated", "--no-deps", "-q",
            "--only-binary", ":all:", "--platform", "manylinux_2_28_aarch64",
            "--python-version", "3.11", "torch==2.13.0", "-d", str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if got.returncode != 0:
        not_fetched("the aarch64 torch wheel", got.stderr)
    (wheel,) = tmp_path.glob("torch-*aarch64.whl")
    proc = cli("probe-torch", str(wheel), "--check", "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (torch,) = json.loads(proc.stdout)["torches"]
    assert (torch["platform"], torch["tag"], torch["release"]) == ("aarch64", "cu130", "2.13")
    assert torch["cubins"] == ["8.0", "9.0", "10.0", "11.0", "12.0"]
    assert torch["differences"] == []
    assert torch["exceptions_needed"] == []  # the aarch64 row asks for nothing it cannot run
    other = cli("probe-torch", str(wheel), "--check", "--platform", "x86_64")
    assert other.returncode == 1
    assert "sm_75: the table says torch 2.13 (cu130) ships it; its binaries do not" in other.stdout
    assert "sm_110: torch 2.13 (cu130) ships it; the table does not say so" in other.stdout


def test_the_cuda_line_of_a_platform_row_is_the_torch_builds() -> None:
    cu132 = [b for b in bundled_builds() if b.platform == "aarch64" and b.torch == "2.15"]
    assert [b.cuda for b in cu132] == [CudaVersion(13, 2)]


# ---- the user's side: a site with both platforms (site.json as farm run writes it)

ARM = "manylinux_2_28_aarch64"


def _site_with_both_platforms(tmp_path: Path) -> Path:
    from archguard.core.site import Site, SiteCell, SiteWheel

    def wheel(name: str, cell: str) -> SiteWheel:
        return SiteWheel(
            name, "ab" * 32, name.split("-", maxsplit=1)[0], cell, "13.0",
            ("sm_80", "sm_90", "sm_100", "sm_110", "sm_120", "compute_120"),
            "torch>=2.13,<2.14", f".farm/jobs/{cell}.json", f"wheels/{'ab' * 32}/{name}",
        )  # fmt: skip

    site = Site(
        (
            SiteCell("cu130-torch2.13-py311", "13.0", "torch==2.13.0", "3.11", "a/simple/"),
            SiteCell(
                "cu130-torch2.13-py311-aarch64",
                "13.0",
                "torch==2.13.0",
                "3.11",
                "b/",
                None,
                "aarch64",
            ),
        ),
        {"cu130": "cu130/simple/"},
        (
            wheel("ext-1.0+cu130torch2.13-cp311-cp311-manylinux_2_28_x86_64.whl", "x"),
            wheel(f"ext-1.0+cu130torch2.13-cp311-cp311-{ARM}.whl", "a"),
            wheel("xonly-1.0+cu130torch2.13-cp311-cp311-manylinux_2_28_x86_64.whl", "x"),
            wheel("st-1.0+cu130-cp311-abi3-manylinux_2_28_x86_64.whl", "x"),
        ),
    )
    (tmp_path / "site.json").write_text(json.dumps(site.as_json()))
    return tmp_path


def test_which_on_aarch64_gives_the_aarch64_wheel_or_none_for_aarch64(tmp_path: Path) -> None:
    site = _site_with_both_platforms(tmp_path)
    machine = ("--torch", "2.13.0+cu130", "--python", "3.11", "--device", "11.0")
    proc = run_main("which", str(site), "--platform", "aarch64", *machine, "--format", "json")
    by = {a["package"]: a for a in json.loads(proc.stdout)["packages"]}
    assert by["ext"]["wheel"] == f"ext-1.0+cu130torch2.13-cp311-cp311-{ARM}.whl"
    assert by["ext"]["command"].endswith("ext==1.0+cu130torch2.13")
    assert by["ext"]["platforms"] == ["aarch64", "x86_64"]
    x86_wheel = next(w for w in by["ext"]["wheels"] if "x86_64" in w["wheel"])
    assert x86_wheel["reasons"] == ["it is built for x86_64; this machine is aarch64"]
    assert by["xonly"]["wheel"] is None
    text = run_main("which", str(site), "xonly", "--platform", "aarch64", *machine).stdout
    assert text.startswith("this machine: aarch64, torch 2.13.0+cu130")
    assert "xonly: none for aarch64 (the site publishes it for x86_64 only)" in text
    here = run_main("which", str(site), "ext", *machine, "--format", "json")  # this x86_64 one
    (answer,) = json.loads(here.stdout)["packages"]
    assert answer["wheel"] == "ext-1.0+cu130torch2.13-cp311-cp311-manylinux_2_28_x86_64.whl"


def test_a_free_threaded_python_never_takes_an_abi3_wheel(tmp_path: Path) -> None:
    site = _site_with_both_platforms(tmp_path)
    args = ("--torch", "2.13.0+cu130", "--device", "8.0", "--format", "json")
    plain = run_main("which", str(site), "st", "--python", "3.12", *args)
    (answer,) = json.loads(plain.stdout)["packages"]
    assert answer["wheel"] == "st-1.0+cu130-cp311-abi3-manylinux_2_28_x86_64.whl"
    free = run_main("which", str(site), "st", "--python", "3.14t", *args)
    (answer,) = json.loads(free.stdout)["packages"]
    assert answer["wheel"] is None
    assert "are not this Python's (3.14t)" in answer["wheels"][0]["reasons"][0]


def test_the_pages_finder_picks_by_machine_as_which_does(tmp_path: Path) -> None:
    """The finder, run by Chromium with a machine chosen by the query string."""
    import shutil

    from archguard.core.site import parse_site
    from archguard.farm.finder import finder_html

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium (tests/test_farm_run.py names it)")
    site = _site_with_both_platforms(tmp_path)
    data = parse_site(json.loads((site / "site.json").read_text()), "site.json", ValueError)
    page = site / "index.html"
    page.write_text(f"<!DOCTYPE html><html><body>{finder_html(data)}</body></html>")

    def finder(query: str) -> str:
        dom = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
             page.as_uri() + query],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        return dom.stdout.split('<pre id="finder-out">', 1)[1].split("</pre>", 1)[0]

    arm = finder("?torch=2.13.0&cuda=13.0&python=3.11&platform=aarch64&gpu=11.0")
    assert "ext: pip install --extra-index-url=" in arm
    assert "xonly: none for aarch64" in arm
    x86 = finder("?torch=2.13.0&cuda=13.0&python=3.11&platform=x86_64&gpu=8.0")
    assert "xonly: pip install" in x86
    assert "st: pip install" in x86


@pytest.mark.slow
@pytest.mark.network
def test_a_toolkits_targets_do_not_depend_on_its_host() -> None:
    """NVIDIA's aarch64 (SBSA) nvcc wheel, its ptxas and nvcc run under qemu-user here, says
    what the bundled (x86_64-probed) row says: one toolkit row serves every platform."""
    import shutil

    if shutil.which("qemu-aarch64-static") is None or not Path("/usr/aarch64-linux-gnu").is_dir():
        pytest.skip("no qemu-aarch64-static or /usr/aarch64-linux-gnu (.ci/run installs both)")
    script = Path(__file__).resolve().parent.parent / "scripts" / "probe_toolkits.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--platform", "aarch64", "--only", "13.0"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 and ("pip download" in proc.stderr or "'download'" in proc.stderr):
        not_fetched("the aarch64 nvcc wheel", proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == (
        "13.0: the aarch64 wheel's ptx_isa, cubins, ptx, nvcc_list_gpu_code, "
        "nvcc_list_gpu_arch are the table's\n"
    )
