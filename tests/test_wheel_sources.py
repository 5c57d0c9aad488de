"""What ``archguard wheel`` builds from (issue 35): a tree, an sdist file, or an sdist URL
pinned by its sha256; an sdist is unpacked afresh at the same path each time (so the compile
cache's keys, which hold absolute paths, are equal), at the next one while another build
holds it (issue 47; across processes: tests/test_isolation.py), and a source whose sha256
differs is refused before anything builds. ``name==version`` is the sdist its index's page
lists, checked against the sha256 the page publishes, without running the release (issue 48:
``pip download`` built a setuptools_scm release's metadata as 0.0.0 and refused it)."""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
from pathlib import Path

import pytest

from archguard.detect.fetch import checked_out, source_tree, split_pin
from archguard.detect.index import index_urls
from archguard.errors import (
    ConfigError,
    FetchFailed,
    IntegrityMismatch,
    ReleaseNotFetched,
)
from realtools import build_env, cli, needs_cuda_torch, needs_nvcc, not_fetched, run_main


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
    with pytest.raises(IntegrityMismatch) as given:
        source_tree(str(archive), wrong, cache=tmp_path / "cache", pinned_by="--sha256")
    assert str(given.value).startswith(
        f"{archive} has sha256 {sha(archive)}, not {wrong} (--sha256)"
    )
    assert not (tmp_path / "cache" / "src").exists()
    url = archive.as_uri()
    with pytest.raises(ConfigError, match="without a pinned sha256"):
        source_tree(url, cache=tmp_path / "cache")
    with pytest.raises(IntegrityMismatch) as fragment:
        source_tree(f"{url}#sha256={wrong}", cache=tmp_path / "cache")
    said = f"{url} has sha256 {sha(archive)}, not {wrong} (its #sha256= fragment)"
    assert str(fragment.value).startswith(said), fragment.value
    assert not list((tmp_path / "cache" / "downloads").rglob("*.tar.gz"))  # nothing kept
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


# A release's setup.py that fails if anything runs it: the fetch reads the index, never it
NEVER_RUN = "raise SystemExit('the release ran while it was fetched')\n"


def release(folder: Path, version: str, name: str = "relpkg") -> Path:
    """``name``'s sdist of ``version``: its PKG-INFO holds the version, its setup.py fails."""
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / f"{name}-{version}.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for member, text in {
            "setup.py": NEVER_RUN,
            "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{member}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return archive


def index(tmp: Path, files: list[Path], published: dict[str, str | None] | None = None) -> str:
    """A PEP 503 index in a directory (its file:// URL) listing ``files`` under relpkg, each
    with its sha256 (or the one ``published`` gives it; None: none)."""
    published = published or {}
    page = tmp / "simple" / "relpkg"
    page.mkdir(parents=True, exist_ok=True)
    links = []
    for f in files:
        digest = published.get(f.name, sha(f))
        fragment = f"#sha256={digest}" if digest else ""
        links.append(f'<a href="../../{f.parent.name}/{f.name}{fragment}">{f.name}</a><br/>')
    (page / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    return (tmp / "simple").as_uri()


def only(url: str, extra: str = "") -> dict[str, str]:
    """pip's settings naming ``url`` as its index, and nothing of this machine's."""
    return {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": url, "PIP_EXTRA_INDEX_URL": extra}


def test_name_equals_version_is_the_sdist_the_index_lists(tmp_path: Path) -> None:
    """``name==version``: the sdist whose file name has that version (names and versions
    compared normalised), from the index's page, checked against the sha256 it publishes;
    nothing of the release runs; fetched once; a pin that differs is refused."""
    files = tmp_path / "files"
    one, two = release(files, "1.0"), release(files, "2.0")
    wheel = files / "relpkg-3.0-py3-none-any.whl"
    wheel.write_bytes(b"not an sdist")
    env = only(index(tmp_path, [one, two, wheel]))
    cache = tmp_path / "cache"
    with checked_out("relpkg==1.0", cache=cache, env=env) as first:
        tree = first.tree
        assert tree.name == "relpkg-1.0" and first.sha256 == sha(one)
        assert "Version: 1.0\n" in (tree / "PKG-INFO").read_text()
    assert (cache / "downloads" / "release" / "relpkg-1.0" / one.name).is_file()
    with checked_out("RelPkg==2", cache=cache, env=env) as other:  # 2 is 2.0
        assert other.tree.name == "relpkg-2.0" and other.sha256 == sha(two)
    with pytest.raises(IntegrityMismatch, match=f"sha256 {sha(one)}, not 0{{64}} \\(the sha256"):
        source_tree("relpkg==1.0", "0" * 64, cache=cache, env=env)
    pinned = sha(one)
    one.unlink()  # fetched once: the cached sdist serves the next build
    with checked_out("relpkg==1.0", pinned, cache=cache, env=env) as again:
        assert again.tree == tree


def test_a_release_the_index_cannot_give_is_one_error(tmp_path: Path) -> None:
    """No sdist of that version, an index that cannot be read, --no-index, or none published
    and none pinned: each is release-not-fetched, naming the release and the index; a
    download whose sha256 is not the published one is integrity-mismatch, naming the file,
    both hashes and the index; nothing is kept."""
    files = tmp_path / "files"
    one, two = release(files, "1.0"), release(files, "2.0")
    url = index(tmp_path, [one, two], {one.name: "0" * 64, two.name: None})
    cache = tmp_path / "cache"
    with pytest.raises(ReleaseNotFetched, match=r"relpkg==3\.0: no index pip reads has") as no:
        source_tree("relpkg==3.0", cache=cache, env=only(url))
    assert f"{url}: no sdist of 3.0 (its newest sdists: 1.0, 2.0)" in str(no.value)
    with pytest.raises(IntegrityMismatch, match=r"not 0{64} \(the one .* publishes\)") as bad:
        source_tree("relpkg==1.0", cache=cache, env=only(url))
    said = f"relpkg-1.0.tar.gz (the sdist of relpkg==1.0) from {one.as_uri()} has sha256 {sha(one)}"
    assert str(bad.value).startswith(said), bad.value
    assert f"not {'0' * 64} (the one {url} publishes)" in str(bad.value), bad.value
    with pytest.raises(ReleaseNotFetched, match=r"relpkg-2\.0\.tar\.gz without a sha256"):
        source_tree("relpkg==2.0", cache=cache, env=only(url))
    assert not (cache / "downloads" / "release" / "relpkg-1.0").exists()
    assert not (cache / "src").exists()  # nothing unpacked
    tree = source_tree("relpkg==2.0", sha(two), cache=cache, env=only(url))  # pinned: checked
    assert tree.name == "relpkg-2.0"
    nowhere = (tmp_path / "nowhere").as_uri()
    with pytest.raises(ReleaseNotFetched, match=re.escape(f"{nowhere}: {nowhere}/relpkg/")):
        source_tree("relpkg==1.0", cache=cache, env=only(nowhere))
    with pytest.raises(ReleaseNotFetched, match="pip is set to --no-index"):
        source_tree("relpkg==1.0", cache=cache, env={**only(url), "PIP_NO_INDEX": "1"})
    with pytest.raises(ConfigError, match=r"'1\.x' is not a version"):
        source_tree("relpkg==1.x", cache=cache, env=only(url))


def test_the_indexes_are_the_ones_pip_reads(tmp_path: Path) -> None:
    """pip's options (after ``--``) before its variables before its configuration: an
    ``--index-url`` replaces the index, each ``--extra-index-url`` is read after it."""
    good = index(tmp_path, [release(tmp_path / "files", "1.0")])
    bad = (tmp_path / "nowhere").as_uri()
    environ = {**os.environ, **only("file:///a", "file:///b file:///c")}
    assert index_urls(environ=environ) == ["file:///a", "file:///b", "file:///c"]
    given = ["-ifile:///x", "--extra-index-url=file:///y", "--extra-index-url", "file:///b"]
    assert index_urls(environ=environ, pip_args=given) == [
        "file:///x",
        "file:///b",
        "file:///c",
        "file:///y",
    ]
    assert index_urls(environ=environ, pip_args=["--no-index"]) == []
    options = ["--index-url", bad, "--extra-index-url", good]
    tree = source_tree("relpkg==1.0", cache=tmp_path / "c", env=only(bad), pip_args=options)
    assert tree.name == "relpkg-1.0"


def test_a_release_not_fetched_is_its_own_error_on_the_command_line(tmp_path: Path) -> None:
    url = index(tmp_path, [release(tmp_path / "files", "1.0")])
    env = {**only(url), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_main("wheel", "relpkg==9.0", "-w", str(tmp_path / "out"), env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = "archguard error [release-not-fetched]: relpkg==9.0: no index pip reads has"
    assert proc.stderr.startswith(said), proc.stderr
    # the fetch says what it found; the command adds how it is given an index and a pin
    assert "archguard wheel NAME==VERSION -- --index-url URL" in proc.stderr, proc.stderr
    assert "invalid-config" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.network
@needs_cuda_torch  # archguard wheel resolves against the cell's torch and toolkit
@needs_nvcc
def test_a_setuptools_scm_release_is_fetched_with_its_version(tmp_path: Path) -> None:
    """torchani 2.9.0 (setuptools_scm): ``pip download`` built its metadata without the
    plugin, got 0.0.0 and refused its own download. From the index's page: its sdist, and the
    build says 2.9.0 (it then refuses the wheel: no CUDA code without the package's switch)."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "ARCHGUARD_ARCH_LIST": "8.0"}
    try:
        with checked_out("torchani==2.9.0", cache=tmp_path / "cache" / "archguard") as out:
            assert out.tree.name == "torchani-2.9.0"
            assert "\nVersion: 2.9.0\n" in (out.tree / "PKG-INFO").read_text()
    except (ReleaseNotFetched, FetchFailed) as exc:
        not_fetched("torchani 2.9.0's sdist", str(exc))
    proc = cli("wheel", "torchani==2.9.0", "-w", str(tmp_path / "out"), env=build_env(**env))
    assert "[release-not-fetched]" not in proc.stderr and "[invalid-config]" not in proc.stderr
    assert "Created wheel for torchani: filename=torchani-2.9.0-" in proc.stderr, proc.stderr[
        -3000:
    ]
    assert "torchani-0.0.0" not in proc.stderr + proc.stdout
    assert "torchani-2.9.0-py3-none-any.whl" in proc.stdout, proc.stdout
