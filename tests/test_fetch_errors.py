"""Errors say what failed (issue 56): fetching a source, a sha256 that differs is
integrity-mismatch (the file, both hashes, where the pin came from), a download that fails is
fetch-failed (the URL and the server's answer), a release no index gives stays
release-not-fetched, and only a bad input is invalid-config. The fetch says what it found
about its input; it never names the command that asked. Everything here is local: files, and
an HTTP server on localhost."""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import http.server
import re
import socket
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from archguard.detect.fetch import checked_out, source_tree
from archguard.errors import (
    ConfigError,
    FetchFailed,
    IntegrityMismatch,
    ReleaseNotFetched,
)
from realtools import REPO
from test_wheel_sources import index, only, release, sdist

DETECT = REPO / "src" / "archguard" / "detect"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the base's name: quiet
        pass


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    """``folder`` served over HTTP on localhost; its base URL."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """localhost is asked directly, whatever proxy this machine names."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("no_proxy", "*")


@pytest.fixture(autouse=True)
def _no_socket_left_open() -> Iterator[None]:
    """Each test's garbage collected as it ends, where an unclosed socket is an error: an
    HTTP error answer (a 404) is closed as archguard raises it, so that no socket is left
    to the collector (one that was, warned in an unrelated test on CI and failed it)."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        gc.collect()


def closed_port() -> int:
    """A localhost port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_url_whose_sha256_differs_is_an_integrity_mismatch(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    archive = sdist(tmp_path / "files")
    wrong = "0" * 64
    cache = tmp_path / "cache"
    with served(tmp_path / "files") as base:
        url = f"{base}/{archive.name}"
        with pytest.raises(IntegrityMismatch) as fragment:
            source_tree(f"{url}#sha256={wrong}", cache=cache)
        said = f"{url} has sha256 {sha(archive)}, not {wrong} (its #sha256= fragment)"
        assert str(fragment.value).startswith(said), fragment.value
        with pytest.raises(IntegrityMismatch, match=re.escape(f"not {wrong} (--sha256)")):
            source_tree(url, wrong, cache=cache, pinned_by="--sha256")
        assert not [p for p in (cache / "downloads").rglob("*") if p.is_file()]  # none kept
        assert source_tree(f"{url}#sha256={sha(archive)}", cache=cache).name == "pkg-1.0"


def test_a_download_that_fails_is_fetch_failed_with_the_servers_answer(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    pin = "#sha256=" + "1" * 64
    with served(tmp_path / "files") as base:
        missing = f"{base}/gone-1.0.tar.gz"
        with pytest.raises(FetchFailed) as gone:
            source_tree(missing + pin, cache=tmp_path / "cache")
        assert str(gone.value).startswith(f"{missing} could not be downloaded: HTTP 404 "), (
            gone.value
        )
    refused = f"http://127.0.0.1:{closed_port()}/pkg-1.0.tar.gz"
    with pytest.raises(FetchFailed, match=re.escape(f"{refused} could not be downloaded: ")):
        source_tree(refused + pin, cache=tmp_path / "cache")
    nowhere = (tmp_path / "nowhere.tar.gz").as_uri()
    with pytest.raises(FetchFailed, match=re.escape(f"{nowhere} could not be downloaded: ")):
        source_tree(nowhere + pin, cache=tmp_path / "cache")


def test_a_release_whose_listed_file_cannot_be_downloaded_is_fetch_failed(
    tmp_path: Path,
) -> None:
    """The index lists the release's sdist, and its URL answers 404: the download failed
    (fetch-failed, naming the URL, the release and the index), not "no such release"."""
    one = release(tmp_path / "files", "1.0")
    index(tmp_path, [one])
    one.unlink()  # listed, not there
    with served(tmp_path) as base:
        url = f"{base}/simple"
        with pytest.raises(FetchFailed) as failed:
            source_tree("relpkg==1.0", cache=tmp_path / "cache", env=only(url))
    said = f"{base}/files/relpkg-1.0.tar.gz (the sdist of relpkg==1.0, listed by {url}) could "
    assert str(failed.value).startswith(said + "not be downloaded: HTTP 404 "), failed.value


def test_a_releases_pins_and_its_cached_copy(tmp_path: Path) -> None:
    """``name==version#sha256=HEX`` pins a release as a URL is pinned; a cached sdist that is
    not the pinned one names its folder to remove; a folder holding two sdists is
    release-not-fetched."""
    one = release(tmp_path / "files", "1.0")
    env = only(index(tmp_path, [one]))
    cache = tmp_path / "cache"
    with checked_out(f"relpkg==1.0#sha256={sha(one)}", cache=cache, env=env) as out:
        assert out.sha256 == sha(one)
    kept = cache / "downloads" / "release" / "relpkg-1.0" / one.name
    with pytest.raises(IntegrityMismatch) as cached:
        source_tree("relpkg==1.0", "2" * 64, cache=cache, env=env, pinned_by="the manifest's")
    said = f"{kept} (the sdist of relpkg==1.0, kept in the cache) has sha256 {sha(one)}, not "
    assert str(cached.value).startswith(said + "2" * 64 + " (the manifest's)"), cached.value
    assert f"remove {kept.parent}" in str(cached.value)
    (kept.parent / "relpkg-1.0.zip").write_bytes(b"another")
    with pytest.raises(ReleaseNotFetched, match=r"holds 2 sdists, not one; remove the folder"):
        source_tree("relpkg==1.0", cache=cache, env=env)


def test_a_bad_input_stays_a_config_error(tmp_path: Path) -> None:
    archive = sdist(tmp_path)
    with pytest.raises(ConfigError, match="is not 64 hex digits"):
        source_tree(str(archive), "abc", cache=tmp_path / "cache")
    with pytest.raises(ConfigError, match="without a pinned sha256"):
        source_tree(archive.as_uri(), cache=tmp_path / "cache")
    with pytest.raises(ConfigError, match="is a directory; a sha256"):
        source_tree(str(tmp_path), "0" * 64, cache=tmp_path / "cache")


def test_detect_messages_do_not_name_their_callers() -> None:
    """A detection function says what it found about its input; the command that called it
    adds its own context (``archguard wheel: …`` was the fetch's, also under a farm)."""
    named = re.compile(r"""f?["']archguard (wheel|farm[a-z -]*|watch|build|verify)\b[^"']*:""")
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(DETECT.glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if named.search(line)
    ]
    assert not found, found
