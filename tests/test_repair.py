"""binaries.repair's failures by cause: auditwheel (or ``wheel tags``) failing is the tool's
error (``tool-failed``, naming the tool), never a config error; auditwheel not installed is
still the setup's (``invalid-config``: install the extra). Pure: the tools are stand-ins."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from archguard.binaries import repair as repair_module
from archguard.binaries.repair import platform_for, repair
from archguard.detect.tools import ToolFailed
from archguard.errors import ConfigError, ToolError


def test_a_sym_tag_that_is_no_manylinux_policy_is_auditwheels_failure() -> None:
    assert platform_for("manylinux_2_17_x86_64") == "manylinux_2_28_x86_64"  # torch's floor
    assert platform_for("manylinux_2_34_aarch64") == "manylinux_2_34_aarch64"
    with pytest.raises(ToolError, match="'linux_x86_64', not a manylinux policy") as err:
        platform_for("linux_x86_64")
    assert err.value.tool == "auditwheel"
    assert err.value.render().startswith("archguard error [tool-failed]: auditwheel says")


def test_auditwheel_failing_or_not_starting_is_a_tool_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing(
        argv: list[str], *args: object, **kwargs: object
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1, "", "one\ntwo\nInvalidElfFileError: x.so\n")

    monkeypatch.setattr(repair_module, "run", failing)
    with pytest.raises(
        ToolError, match=r"(?s)auditwheel show failed on w\.whl:\n.*InvalidElf"
    ) as err:
        repair_module._auditwheel(["show", "--json", "w.whl"])
    assert err.value.tool == "auditwheel" and err.value.code == "tool-failed"

    def unstartable(argv: list[str], *args: object, **kwargs: object) -> None:
        raise ToolFailed(argv, subprocess.TimeoutExpired(argv, 600))

    monkeypatch.setattr(repair_module, "run", unstartable)
    with pytest.raises(ToolError, match="auditwheel repair could not run") as err:
        repair_module._auditwheel(["repair", "w.whl"])
    assert err.value.tool == "auditwheel"


def test_wheel_tags_failing_is_the_wheel_tools_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A forced manylinux2014 tag whose retag fails: ``wheel tags`` named, not config."""
    wheel = tmp_path / "x-1.0-cp311-cp311-manylinux2014_x86_64.whl"
    wheel.write_bytes(b"PK")

    def failing(
        argv: list[str], *args: object, **kwargs: object
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1, "", "bad")

    monkeypatch.setattr(repair_module, "run", failing)
    with pytest.raises(ToolError, match="its false tag manylinux2014_x86_64") as err:
        repair_module._drop_false_tags(wheel, "manylinux_2_28_x86_64", tmp_path / "work")
    assert err.value.tool == "wheel"
    # its tags read from its name: a true tag, or a name that is no wheel's, is left alone
    true = tmp_path / "x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert repair_module._drop_false_tags(true, "manylinux_2_28_x86_64", tmp_path) == (true, "")
    odd = tmp_path / "not-a-wheel.whl"
    assert repair_module._drop_false_tags(odd, "manylinux_2_28_x86_64", tmp_path) == (odd, "")


def test_auditwheel_not_installed_is_still_the_setups_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"pip install 'torch-archguard\[farm\]'"):
        repair(tmp_path / "x-1.0-py3-none-any.whl", tmp_path / "work")
