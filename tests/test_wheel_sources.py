"""What ``archguard wheel`` builds from (issue 35): a tree, an sdist file, or an sdist URL
pinned by its sha256; an sdist is unpacked afresh at the same path each time (so the compile
cache's keys, which hold absolute paths, are equal), at the next one while another build
holds it (issue 47; across processes: tests/test_isolation.py), and a source whose sha256
differs is refused before anything builds."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from archguard.errors import ConfigError
from archguard.frontend.sources import checked_out, source_tree, split_pin
from realtools import run_main


def sdist(tmp: Path, name: str = "pkg-1.0", body: str = "X = 1\n") -> Path:
    archive = tmp / f"{name}.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for member, text in {
            f"{name}/setup.py": "from setuptools import setup\nsetup()\n",
            f"{name}/pkg/__init__.py": body,
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return archive


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_sdist_is_unpacked_afresh_at_one_path(tmp_path: Path) -> None:
    archive = sdist(tmp_path)
    cache = tmp_path / "cache"
    base = cache / "src" / sha(archive)[:16]
    with checked_out(str(archive), cache=cache) as first:
        tree = first.tree
        assert tree == base / "pkg-1.0" and first.sha256 == sha(archive)
        assert (tree / "pkg" / "__init__.py").read_text() == "X = 1\n"
        (tree / "build").mkdir()  # what a build leaves behind
        # a second build of it meanwhile: its own tree, the first one's left alone
        with checked_out(f"{archive}#sha256={sha(archive)}", cache=cache) as second:
            assert second.tree == Path(f"{base}.2") / "pkg-1.0"
            assert (tree / "build").is_dir()
    with checked_out(str(archive), cache=cache) as again:  # alone: the same path, afresh
        assert again.tree == tree and not (tree / "build").exists()
    (tmp_path / "o").mkdir()
    with checked_out(str(sdist(tmp_path / "o", body="X = 2\n")), cache=cache) as other:
        assert other.tree.parent.parent == cache / "src" and other.tree != tree


def test_a_source_whose_sha256_differs_is_refused_before_anything_builds(tmp_path: Path) -> None:
    archive = sdist(tmp_path)
    wrong = "0" * 64
    with pytest.raises(ConfigError, match="not the pinned 0000"):
        source_tree(str(archive), wrong, cache=tmp_path / "cache")
    assert not (tmp_path / "cache" / "src").exists()
    url = archive.as_uri()
    with pytest.raises(ConfigError, match="without a pinned sha256"):
        source_tree(url, cache=tmp_path / "cache")
    with pytest.raises(ConfigError, match="not the pinned 0000"):
        source_tree(f"{url}#sha256={wrong}", cache=tmp_path / "cache")
    tree = source_tree(f"{url}#sha256={sha(archive)}", cache=tmp_path / "cache")
    assert (tree / "setup.py").is_file()
    assert split_pin("u#sha256=ABC") == ("u", "abc") and split_pin("u") == ("u", None)


def test_what_is_not_a_source_is_one_error(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    with pytest.raises(ConfigError, match="is not an sdist"):
        source_tree(str(notes), cache=tmp_path)
    with pytest.raises(ConfigError, match="64 hex digits"):
        source_tree(str(notes), "abc", cache=tmp_path)
    proc = run_main("wheel", str(tmp_path / "nowhere"), "--format", "json")
    assert proc.returncode == 2
    assert "is neither a source tree, an sdist file nor a URL" in proc.stderr


def test_name_equals_version_is_the_release_sdist_pip_fetches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``name==version``: pip (its configured index; here a local find-links) fetches the
    release's sdist once; a sha256 pins it; a release with no sdist is one clear error."""
    links = tmp_path / "links"
    links.mkdir()
    archive = links / "relpkg-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for member, text in {
            "relpkg-1.0/setup.py": "from setuptools import setup\nsetup(name='relpkg', "
            "version='1.0')\n",
            "relpkg-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: relpkg\nVersion: 1.0\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    cache = tmp_path / "cache"
    with checked_out("relpkg==1.0", cache=cache) as first:
        tree = first.tree
    assert (tree / "setup.py").is_file() and tree.name == "relpkg-1.0"
    with pytest.raises(ConfigError, match=f"sha256 {sha(archive)}, not the pinned 0{{63}}"):
        source_tree("relpkg==1.0", "0" * 64, cache=cache)
    pinned = sha(archive)
    archive.unlink()  # fetched once: the cached sdist serves the next build
    with checked_out("relpkg==1.0", pinned, cache=cache) as again:
        assert again.tree == tree
    with pytest.raises(ConfigError, match=r"relpkg==2\.0: pip download found no sdist"):
        source_tree("relpkg==2.0", cache=cache)
