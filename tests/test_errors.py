"""The error catalogue: every error code is reachable, documented, and shown without a
traceback."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archguard.errors import ALL_ERRORS
from archguard.nvcc.flags import find_arch_flags
from realtools import REPO, run_main, torch_cuda

_CONFIGURATION = (REPO / "docs" / "configuration.md").read_text()  # the key and variable tables
_CATALOGUE = (REPO / "docs" / "errors.md").read_text()
DOCUMENTED = re.findall(r"^\| `([a-z-]+)` \|", _CATALOGUE, re.M)


def test_readme_catalogue_lists_every_error_exactly_once() -> None:
    assert sorted(DOCUMENTED) == sorted(e.code for e in ALL_ERRORS)


def test_codes_are_unique() -> None:
    assert len({e.code for e in ALL_ERRORS}) == len(ALL_ERRORS)


def no_torch_python(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """This interpreter without site-packages: archguard and its dependencies, no torch."""
    import packaging
    import yaml

    deps = tmp_path / "deps"
    deps.mkdir()
    for module in (yaml, packaging):
        src = Path(module.__file__).parent  # type: ignore[arg-type]
        (deps / src.name).symlink_to(src)
    for extra in Path(yaml.__file__).parent.parent.glob("_yaml*"):
        (deps / extra.name).symlink_to(extra)
    # the package as its wheel lays it out (its data files in archguard/defaults/)
    shutil.copytree(REPO / "src" / "archguard", deps / "archguard")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(deps)}
    return [sys.executable, "-S", "-m", "archguard"], env


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def cases(tmp: Path) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    bad_policy = write(tmp / "bad.yml", "schema: 1\nrows: {cu130: {arch_list: '8.0'}}\n")
    rowless = write(
        tmp / "rowless.yml", "schema: 1\nrows: {cu124: {arch_list: '8.0', reason: r}}\n"
    )
    empty = write(tmp / "empty" / "pyproject.toml", '[tool.archguard]\narch_list = "6.0"\n')
    broken_nvcc = write(tmp / "cuda" / "bin" / "nvcc", "#!/bin/sh\necho not a compiler\n")
    broken_nvcc.chmod(0o755)
    corrupt = write(tmp / "corrupt.whl", "not a zip")
    pinned = write(tmp / "pinned" / "pkg-1.0.tar.gz", "not the pinned bytes")
    cache = {"ARCHGUARD_CACHE_DIR": str(tmp / "cache")}  # a fetch writes nothing of the user's
    gone = (tmp / "gone" / "pkg-1.0.tar.gz").as_uri() + "#sha256=" + "1" * 64
    return {
        "invalid-arch": (["explain", "7.7", "--cuda", "13.0", "--torch", "2.13"], None),
        "invalid-policy": (["check-policy", str(bad_policy)], None),
        "invalid-config": (["list", "--cuda", "thirteen", "--torch", "2.13"], None),
        "no-policy-row": (
            ["list", "--policy", str(rowless), "--cuda", "13.0", "--torch", "2.13"],
            None,
        ),
        "empty-arch-list": (
            ["list", "--project", str(empty.parent), "--cuda", "13.0", "--torch", "2.13"],
            None,
        ),
        "unknown-toolkit": (["list", "--cuda", "11.8", "--torch", "2.13"], None),
        "unknown-torch-build": (["list", "--cuda", "13.0", "--torch", "2.1"], None),
        "nvcc-missing": (["list", "--torch-arches", "sm_80"], {"CUDA_HOME": str(tmp / "nowhere")}),
        "nvcc-unusable": (["list", "--torch-arches", "sm_80"], {"CUDA_HOME": str(tmp / "cuda")}),
        "not-representable": (
            ["list", "--cuda", "13.0", "--torch", "2.13", "--format", "torch"],
            {"ARCHGUARD_ARCH_LIST": "10.0f"},
        ),
        "cuobjdump-missing": (["verify", str(tmp), "--cuobjdump", str(tmp / "none")], None),
        "unreadable-binary": (["verify", str(corrupt), "--cuobjdump", "/bin/true"], None),
        "integrity-mismatch": (
            ["wheel", str(pinned), "--sha256", "0" * 64, "-w", str(tmp / "out")],
            cache,
        ),
        "fetch-failed": (["wheel", gone, "-w", str(tmp / "out")], cache),
    }


@pytest.mark.parametrize("command", ["verify", "probe-torch", "variant"])
def test_a_missing_cuobjdump_is_named_for_the_command_that_needs_it(
    tmp_path: Path, command: str
) -> None:
    proc = run_main(command, str(tmp_path), "--cuobjdump", str(tmp_path / "none"))
    assert proc.returncode == 2 and "[cuobjdump-missing]" in proc.stderr, proc.stderr
    assert f"archguard {command} reads binaries with cuobjdump" in proc.stderr, proc.stderr


@pytest.mark.parametrize("code", sorted(cases(Path("/x"))))
def test_reachable_from_the_command_line(run_cli, tmp_path: Path, code: str) -> None:  # type: ignore[no-untyped-def]
    args, env = cases(tmp_path)[code]
    proc = run_cli(*args, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"archguard error [{code}]" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_torch_missing(tmp_path: Path) -> None:
    argv, env = no_torch_python(tmp_path)
    proc = subprocess.run(
        [*argv, "list", "--cuda", "13.0"], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("archguard error [torch-missing]")
    assert "torch is not installed" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.torch
@pytest.mark.skipif(torch_cuda() != "13.0", reason="needs the CUDA 13.0 build of torch")
def test_cuda_major_mismatch(run_cli) -> None:  # type: ignore[no-untyped-def]
    """The real torch (CUDA 13.0) against a CUDA 12.8 toolkit."""
    proc = run_cli("list", "--cuda", "12.8")
    assert proc.returncode == 2
    assert proc.stderr.startswith("archguard error [cuda-major-mismatch]")
    assert "CUDA 13.0" in proc.stderr and "CUDA 12.8" in proc.stderr


def test_torch_not_cuda() -> None:
    python = os.environ.get("AG_TEST_CPU_PYTHON")
    if not python:
        pytest.skip("AG_TEST_CPU_PYTHON unset (scripts/test.sh sets it)")
    proc = subprocess.run(
        [python, "-m", "archguard", "list"], capture_output=True, text=True, check=False
    )
    assert proc.stderr.startswith("archguard error [torch-not-cuda]")


def test_unsupported_arch_flag() -> None:
    from archguard.errors import NvccFlagError

    for flag in (
        ["-arch=native"],
        ["--gpu-architecture", "all-major"],
        ["-gencode=arch=compute_90,code=lto_90"],
        ["-gencode"],
    ):
        with pytest.raises(NvccFlagError):
            find_arch_flags(flag)


_CONFIG_SECTION = "\n## `[tool.archguard]`\n"
_ENV_SECTION = "\n## Environment\n"


def _section(heading: str) -> str:
    """A section of docs/configuration.md: from its heading to the next heading."""
    return _CONFIGURATION.split(heading, 1)[1].split("\n#", 1)[0]


def _table_names(section: str, pattern: str) -> set[str]:
    return set(re.findall(pattern, _section(section), re.M))


def test_config_table_is_the_models() -> None:
    """One description per key: docs/configuration.md's table is rendered from the model the
    parser reads (``PackageConfig``'s field docs), word for word."""
    from archguard.settings.model import CONFIG_KEYS, config_table

    assert config_table() in _section(_CONFIG_SECTION), config_table()
    assert _table_names(_CONFIG_SECTION, r"^\| `([a-z_]+)` \|") == set(CONFIG_KEYS)


def test_environment_table_lists_every_variable() -> None:
    from archguard.settings.config import ENV_KNOWN

    named = _table_names(_ENV_SECTION, r"`(ARCHGUARD_[A-Z_]+)")
    assert set(ENV_KNOWN) <= named, set(ENV_KNOWN) - named
    from archguard.detect.tools import TOOLS

    tools = _table_names(_ENV_SECTION, r"`([A-Z_]+)`")
    assert {t.variable for t in TOOLS} | {"MAX_JOBS", "NVCC_THREADS", "CUDA_HOME"} <= tools


def test_environment_table_names_only_variables_the_code_reads() -> None:
    """The other way round: every variable the table names is one archguard reads or sets
    (a quoted name in its source), so the table cannot keep a variable the code dropped."""
    from archguard.settings.config import ENV_KNOWN

    named = _table_names(_ENV_SECTION, r"`([A-Z][A-Z0-9_]+)(?:=[^`]*)?`")
    named |= _table_names(_ENV_SECTION, r"\(`([A-Z][A-Z0-9_]+)` still read\)")
    source = "\n".join(p.read_text() for p in (REPO / "src" / "archguard").rglob("*.py"))
    unread = {n for n in named if n not in ENV_KNOWN and f'"{n}"' not in source}
    assert not unread, unread
    assert {n for n in named if n.startswith("ARCHGUARD_")} == set(ENV_KNOWN)
