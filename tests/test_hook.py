"""The setuptools hook: silent and light for everyone else, wraps once for its users."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from setuptools import Distribution
from setuptools.command.build_ext import build_ext

from archguard._integration.commands import ArchguardBuildExt, install, wrap_build_ext
from archguard._integration.setuptools_hook import finalize_distribution_options
from archguard.errors import ConfigError
from archguard.settings.config import load_project
from archguard.settings.optin import opted_in


@pytest.mark.parametrize(
    ("text", "active"),
    [
        ('[build-system]\nrequires = ["setuptools", "torch-archguard>=0.1"]\n', True),
        ("[build-system]\nrequires = [\"Torch_ArchGuard[extra] ; python_version>'3'\"]\n", True),
        ("[tool.archguard]\n", True),
        ('[build-system]\nrequires = ["archguard"]\n', False),  # the unrelated project
        ('[project]\nname = "x"\ndescription = "uses archguard"\n', False),
        ('[tool.other]\nkey = "archguard is mentioned but the string never ends\n', False),
        ('[build-system]\nrequires = ["torch-archguard>=0.1,<"]\n', True),  # malformed spec
        ("", False),
    ],
)
def test_opted_in(tmp_path: Path, text: str, active: bool) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    assert opted_in(str(tmp_path / "pyproject.toml")) is active
    try:
        project = load_project(tmp_path)
    except ConfigError:  # not TOML: setuptools reports it; the hook stays out
        assert not active
        return
    assert project.active is active  # the config reader agrees with the hook


def test_no_pyproject_is_not_opted_in(tmp_path: Path) -> None:
    assert opted_in(str(tmp_path / "pyproject.toml")) is False


PROBE = """
import json, os, sys
from importlib.metadata import entry_points
from setuptools import Distribution
os.chdir(sys.argv[1])
# other plugins' hooks (scikit-build-core's imports packaging) loaded first: what is left
# is archguard's own
for ep in entry_points(group="setuptools.finalize_distribution_options"):
    if ep.name != "archguard":
        ep.load()
before = set(sys.modules)
dist = Distribution({"name": "x", "version": "1"})  # runs every finalize hook
after = set(sys.modules)
print(json.dumps({"new": sorted(after - before),
                  "wrapped": getattr(dist, "_archguard_hooked", False)}))
"""


def probe(directory: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(directory)], capture_output=True, text=True, check=True
    )
    assert proc.stderr == ""  # nothing printed for anyone
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_unrelated_project_imports_nothing_heavy_and_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    result = probe(tmp_path)
    assert result["wrapped"] is False
    heavy = [
        m
        for m in result["new"]
        if m.split(".")[0] in ("torch", "yaml", "packaging")
        or (
            m.startswith("archguard.")
            and m
            not in (
                "archguard._integration",
                "archguard._integration.setuptools_hook",
                "archguard._integration.common",
                "archguard.settings",  # its __init__: a docstring
                "archguard.settings.optin",
            )
        )
    ]
    assert heavy == []


def test_opted_in_project_is_wrapped_still_without_torch_or_yaml(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.archguard]\narch_list = "8.0"\n')
    result = probe(tmp_path)
    assert result["wrapped"] is True
    assert not [m for m in result["new"] if m.split(".")[0] in ("torch", "yaml")]


def test_wrapping_is_once_and_keeps_the_class_behaviour() -> None:
    wrapped = wrap_build_ext(build_ext)
    assert wrapped.__mro__[1] is ArchguardBuildExt and wrapped.__mro__[2] is build_ext
    assert wrap_build_ext(wrapped) is wrapped
    assert wrap_build_ext(build_ext) is wrapped  # cached

    class Sub(wrapped):  # type: ignore[misc, valid-type]
        pass

    assert wrap_build_ext(Sub) is Sub


def test_install_is_idempotent_and_wraps_at_lookup(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    dist = Distribution({"name": "x", "version": "1"})
    install(dist)
    first = dist.get_command_class
    install(dist)
    assert dist.get_command_class is first
    dist.cmdclass = {"build_ext": build_ext}  # what [tool.setuptools] cmdclass does later
    assert issubclass(dist.get_command_class("build_ext"), ArchguardBuildExt)
    assert not issubclass(dist.get_command_class("build_py"), ArchguardBuildExt)


def test_hook_runs_twice_without_double_wrapping(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.archguard]\n")
    monkeypatch.chdir(tmp_path)
    dist = Distribution({"name": "x", "version": "1"})
    getter = dist.get_command_class
    finalize_distribution_options(dist)
    assert dist.get_command_class is getter
    cls = dist.get_command_class("build_ext")
    assert [c for c in cls.__mro__ if c is ArchguardBuildExt] == [ArchguardBuildExt]


def test_disable_is_announced(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.archguard]\n")
    code = (
        "import os, sys; os.chdir(sys.argv[1]); from setuptools import Distribution; "
        "d = Distribution({'name': 'x', 'version': '1'}); "
        "print(getattr(d, '_archguard_hooked', False))"
    )
    env = {"ARCHGUARD_DISABLE": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert proc.stdout.strip() == "False"
    assert "archguard: disabled by ARCHGUARD_DISABLE=1" in proc.stderr


@pytest.mark.parametrize("farm", [False, True])
def test_which_extensions_are_cuda(tmp_path: Path, farm: bool) -> None:
    """CUDA sources make a CUDA extension; nvcc flags on C/C++ sources alone do not (torch
    never runs nvcc on them: a CPU fallback sharing the CUDA variant's flags must build on a
    CPU-only torch); a source-less extension (CMake) counts, in farm mode only when the tree
    holds CUDA sources."""
    from setuptools import Extension

    from archguard._integration.build import cuda_extensions

    cu = Extension("cu", ["k.cu", "b.cpp"])
    cpu = Extension("cpu", ["b.cpp"], extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O2"]})
    cmake = Extension("cmake", [])
    assert cuda_extensions([cu, cpu], str(tmp_path), farm=farm) == [cu]
    assert cuda_extensions([cpu, cmake], str(tmp_path), farm=farm) == ([] if farm else [cmake])
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "k.cu").write_text("")
    assert cuda_extensions([cpu, cmake], str(tmp_path), farm=farm) == [cmake]
