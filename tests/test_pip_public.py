"""archguard asks pip only through its command line and the packages pip vendors through
their own releases: no ``pip._internal`` or ``pip._vendor`` import, which breaks whenever pip
moves them (the default index from pip's help, a backend's hooks through pyproject_hooks)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from archguard.detect.index import default_index, index_urls
from archguard.frontend import buildenv

SRC = Path(__file__).resolve().parents[1] / "src" / "archguard"


def test_no_module_of_archguard_imports_pips_internals() -> None:
    found = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bpip\._(internal|vendor)\b", line)
    ]
    assert found == []


def test_pips_default_index_is_the_one_its_help_states() -> None:
    """Asked last, with nothing configured: the default pip itself states, whatever its
    variables say (they are read before it, as pip reads them)."""
    inside = subprocess.run(  # the test alone looks inside pip, in a Python of its own
        [
            sys.executable,
            "-c",
            "from pip._internal.models.index import PyPI as p; print(p.simple_url)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    expected = inside.stdout.strip() if inside.returncode == 0 else None  # else pip moved it
    found = default_index(sys.executable)
    assert found.startswith("https://") and found.rstrip("/").endswith("/simple")
    assert expected is None or found == expected
    bare = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    assert index_urls(environ={**bare, "PIP_CONFIG_FILE": os.devnull}) == [found]
    assert index_urls(
        environ={**bare, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "file:///a"}
    ) == ["file:///a"]


def test_a_backends_own_requirements_are_asked_through_pyproject_hooks(tmp_path: Path) -> None:
    """A backend's ``get_requires_for_build_wheel`` (an in-tree one, PEP 517's
    ``backend-path``), run in a subprocess as pip and build run it."""
    source = tmp_path / "pkg"
    source.mkdir()
    (source / "agbackend.py").write_text(
        "def get_requires_for_build_wheel(config_settings=None):\n"
        "    return ['agextra>=1', 'cmake']\n"
    )
    asked, why = buildenv._ask_backend(source, "agbackend", ["."], dict(os.environ))
    assert (asked, why) == (["agextra>=1", "cmake"], None)
    asked, why = buildenv._ask_backend(source, "agmissing", ["."], dict(os.environ))
    assert asked == [] and why is not None and "agmissing could not say" in why
