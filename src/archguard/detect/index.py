"""Read a package index's project page (PEP 691 JSON, else PEP 503 HTML) and a wheel's
metadata (PEP 658/714 ``.metadata`` beside it, else its ``METADATA`` read out of the remote
zip with HTTP range requests: a torch wheel's metadata without its 1-4 GB); and which
indexes pip reads (:func:`index_urls`: its options, its ``PIP_*`` variables, its
configuration, as ``pip config list`` shows them, then its default, as its help states it:
pip's command line only, never its internals).

Read-only, and strangers' data: the HTML is read in one pass (``_anchors``), the JSON
with ``json``; every fetch has a timeout and a size bound; a failure is one
:class:`~archguard.errors.IndexUnreachable` naming the URL.
"""

from __future__ import annotations

import ast
import functools
import html
import io
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from archguard._http import opened
from archguard.core.wheelfile import CoreMetadata, parse_metadata
from archguard.detect.tools import ToolFailed, run
from archguard.errors import IndexUnreachable

FETCH_TIMEOUT_S = 60
PAGE_LIMIT = 64 << 20  # a project page larger than this is not one
_JSON = "application/vnd.pypi.simple.v1+json"
_ACCEPT = f"{_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


@dataclass(frozen=True)
class IndexFile:
    """One file of a project page."""

    filename: str
    url: str  # absolute, without its #fragment
    sha256: str | None
    requires_python: str | None
    metadata: bool  # PEP 658/714: ``url + ".metadata"`` is served


def pip_config(
    python: str = sys.executable, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """pip's settings as ``python -m pip config list`` shows them, under ``environ`` (its
    files' ``global.index-url``, ..., and its ``PIP_*`` variables as ``:env:.index-url``);
    {} where that pip cannot answer (none installed, no answer within the timeout)."""
    try:
        proc = run(
            [python, "-m", "pip", "config", "list"],
            None,
            FETCH_TIMEOUT_S,
            None if environ is None else dict(environ),
        )
    except ToolFailed:
        return {}
    out: dict[str, str] = {}
    for line in proc.stdout.splitlines() if proc.returncode == 0 else ():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        try:  # pip prints each value as Python's repr of a string
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parsed = value
        out[key.strip()] = str(parsed)
    return out


def _setting(config: Mapping[str, str], name: str, sections: Sequence[str]) -> str | None:
    """The first of ``sections`` (highest priority first) that sets ``name``."""
    return next((config[f"{s}.{name}"] for s in sections if f"{s}.{name}" in config), None)


# pip's help states each option's default: ``--index-url`` ``(default URL)``
_DEFAULT_INDEX = re.compile(r"--index-url\b.*?\(default\s+(\S+?)\)")


@functools.cache
def _help_default_index(python: str) -> str | None:
    """The index ``python``'s pip reads when nothing names one, as its own help states it
    (``pip download --isolated --help``: its variables and user file left out, which would
    replace the stated default with theirs); None where that pip cannot answer."""
    try:
        proc = run([python, "-m", "pip", "download", "--isolated", "--help"], None)
    except ToolFailed:
        return None
    found = _DEFAULT_INDEX.search(" ".join(proc.stdout.split())) if proc.returncode == 0 else None
    return found[1] if found else None


def default_index(python: str = sys.executable) -> str:
    """pip's own default index, asked last: that of ``python``'s pip, else of the pip beside
    archguard (a cell made by uv may hold none); :class:`IndexUnreachable` when neither
    says."""
    for pip in dict.fromkeys((python, sys.executable)):
        found = _help_default_index(pip)
        if found:
            return found
    raise IndexUnreachable(
        f"no pip said its default index ({python} -m pip download --help); name the index "
        "with --index-url or PIP_INDEX_URL."
    )


def _options(pip_args: Sequence[str], names: Sequence[str]) -> list[str]:
    """The values of the options ``names`` (``--index-url``, ``-i``) in pip's arguments,
    written ``--name VALUE``, ``--name=VALUE`` or, for a short one, ``-iVALUE``."""
    out = []
    args = list(pip_args)
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                out.append(args[i + 1])
            elif name.startswith("--") and arg.startswith(name + "="):
                out.append(arg[len(name) + 1 :])
            elif not name.startswith("--") and arg.startswith(name) and len(arg) > len(name):
                out.append(arg[len(name) :])
    return out


_TRUE = ("1", "true", "yes", "on", "y", "t")


def index_urls(
    python: str = sys.executable,
    environ: Mapping[str, str] | None = None,
    pip_args: Sequence[str] = (),
) -> list[str]:
    """The indexes ``pip download`` would read under ``environ`` with ``pip_args`` (the
    options given to pip), the primary first: ``--index-url`` (``-i``) in ``pip_args``, else
    ``PIP_INDEX_URL``, else pip's configured ``index-url``, else pip's default; then each
    ``extra-index-url`` (``PIP_EXTRA_INDEX_URL`` or the configured ones, then those in
    ``pip_args``). None with ``--no-index`` (``PIP_NO_INDEX``, ``no-index``). pip's
    ``find-links`` are not indexes: a flat directory publishes no sha256."""
    config = pip_config(python, environ)
    sections = (":env:", "download", "global")  # pip download's: its variables win
    no_index = (_setting(config, "no-index", sections) or "").strip().lower() in _TRUE
    if no_index or "--no-index" in pip_args:
        return []
    given = _options(pip_args, ("--index-url", "-i"))
    primary = given[-1] if given else (_setting(config, "index-url", sections) or "").strip()
    extra = (_setting(config, "extra-index-url", sections) or "").split()
    extra += _options(pip_args, ("--extra-index-url",))
    out: list[str] = []
    for url in [primary.split()[0] if primary.split() else default_index(python), *extra]:
        if url not in out:
            out.append(url)
    return out


def _open(url: str, headers: dict[str, str] | None = None) -> tuple[bytes, str, int]:
    """(body, content type, status) of one GET; :class:`IndexUnreachable` on failure."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opened(request, FETCH_TIMEOUT_S) as response:
            body = response.read(PAGE_LIMIT + 1)
            kind = response.headers.get("Content-Type", "") if response.headers else ""
            status = getattr(response, "status", 200) or 200
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise IndexUnreachable(f"{url} could not be read ({reason}).") from None
    if len(body) > PAGE_LIMIT:
        raise IndexUnreachable(f"{url} is larger than {PAGE_LIMIT >> 20} MiB: not a project page")
    return body, kind, status


def project_files(index_url: str, project: str) -> list[IndexFile]:
    """The files of ``project`` on the index at ``index_url`` (its simple root)."""
    base = index_url if index_url.endswith("/") else index_url + "/"
    page = urllib.parse.urljoin(base, f"{project}/")
    if urllib.parse.urlparse(page).scheme == "file":
        page = urllib.parse.urljoin(page, "index.html") if _is_dir(page) else page
    body, kind, _ = _open(page, {"Accept": _ACCEPT})
    if kind.startswith(_JSON):
        return parse_json_page(body, page)
    return parse_html_page(body.decode("utf-8", errors="replace"), page)


def _is_dir(file_url: str) -> bool:
    return Path(urllib.request.url2pathname(urllib.parse.urlparse(file_url).path)).is_dir()


def parse_json_page(body: bytes, page: str) -> list[IndexFile]:
    """A PEP 691 JSON project page."""
    try:
        data = json.loads(body)
        files = data["files"]
        out = []
        for f in files:
            url, _, _ = urllib.parse.urljoin(page, str(f["url"])).partition("#")
            hashes = f.get("hashes") or {}
            meta = f.get("core-metadata", f.get("dist-info-metadata", False))
            out.append(
                IndexFile(
                    str(f["filename"]),
                    url,
                    str(hashes["sha256"]).lower() if hashes.get("sha256") else None,
                    f.get("requires-python") or None,
                    bool(meta),
                )
            )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise IndexUnreachable(f"{page} is not a PEP 691 project page ({exc}).") from None
    return out


def _attributes(tag: str) -> dict[str, str | None]:
    """The attributes of one start tag's text (after ``<a``), read left to right once."""
    out: dict[str, str | None] = {}
    i, n = 0, len(tag)
    while i < n:
        while i < n and (tag[i].isspace() or tag[i] == "/"):
            i += 1
        start = i
        while i < n and not tag[i].isspace() and tag[i] not in "=/":
            i += 1
        name = tag[start:i].lower()
        while i < n and tag[i].isspace():
            i += 1
        value: str | None = None
        if i < n and tag[i] == "=":
            i += 1
            while i < n and tag[i].isspace():
                i += 1
            if i < n and tag[i] in "\"'":
                close = tag.find(tag[i], i + 1)
                close = n if close < 0 else close
                value, i = tag[i + 1 : close], close + 1
            else:
                begin = i
                while i < n and not tag[i].isspace():
                    i += 1
                value = tag[begin:i]
        if name:
            out[name] = html.unescape(value) if value is not None else None
        elif i == start:
            i += 1
    return out


def _anchors(text: str) -> list[tuple[dict[str, str | None], str]]:
    """Each ``<a ...>text</a>`` of a page, in one pass: every search starts where the last
    one ended (Python's ``html.parser`` rescans an unclosed tag: quadratic on ``<a <a <a``)."""
    out = []
    lower = text.lower()
    at = 0
    while True:
        at = lower.find("<a", at)
        if at < 0:
            break
        if lower[at + 2 : at + 3] not in (" ", "\t", "\n", "\r", ">", "/"):
            at += 2
            continue
        end = text.find(">", at)
        if end < 0:
            break
        closing = lower.find("</a", end)
        words = text[end + 1 : closing if closing >= 0 else len(text)]
        out.append((_attributes(text[at + 2 : end]), html.unescape(words)))
        if closing < 0:
            break
        at = closing + 3
    return out


def parse_html_page(text: str, page: str) -> list[IndexFile]:
    """A PEP 503 HTML project page: each anchor's file, its ``#sha256=`` and its
    ``data-requires-python`` / ``data-core-metadata`` (``data-dist-info-metadata``)."""
    out = []
    for attrs, words in _anchors(text):
        href = attrs.get("href")
        if not href:
            continue
        url, _, fragment = urllib.parse.urljoin(page, href).partition("#")
        name = words.strip() or urllib.parse.unquote(url.rsplit("/", 1)[-1])
        algo, _, digest = fragment.partition("=")
        key = next(
            (k for k in ("data-core-metadata", "data-dist-info-metadata") if k in attrs), None
        )
        out.append(
            IndexFile(
                name,
                url,
                digest.lower() if algo == "sha256" and digest else None,
                attrs.get("data-requires-python") or None,
                key is not None and attrs[key] != "false",
            )
        )
    return out


class _Ranged(io.RawIOBase):
    """A remote file read by HTTP range requests, in blocks, for :mod:`zipfile`."""

    BLOCK = 1 << 18

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.pos = 0
        self.blocks: dict[int, bytes] = {}
        self.size = self._size()

    def _range(self, start: int, end: int) -> bytes:
        body, _, status = _open(self.url, {"Range": f"bytes={start}-{end}"})
        if status != 206 and len(body) > end - start + 1:
            raise IndexUnreachable(
                f"{self.url}: the index does not serve byte ranges, so its metadata cannot "
                "be read without the whole wheel"
            )
        return body

    def _size(self) -> int:
        request = urllib.request.Request(self.url, method="HEAD")
        try:
            with opened(request, FETCH_TIMEOUT_S) as response:
                return int(response.headers["Content-Length"])
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexUnreachable(f"{self.url}: its size could not be read ({exc}).") from None

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        want = min(len(buffer), max(0, self.size - self.pos))
        done = 0
        while done < want:
            index = (self.pos + done) // self.BLOCK
            if index not in self.blocks:
                start = index * self.BLOCK
                self.blocks[index] = self._range(start, min(self.size, start + self.BLOCK) - 1)
            block = self.blocks[index]
            offset = (self.pos + done) - index * self.BLOCK
            chunk = block[offset : offset + want - done]
            if not chunk:
                break
            buffer[done : done + len(chunk)] = chunk
            done += len(chunk)
        self.pos += done
        return done


def wheel_metadata(file: IndexFile) -> CoreMetadata:
    """The wheel's core metadata: the index's ``.metadata`` file where it serves one, else
    ``*.dist-info/METADATA`` out of the remote zip (a local file: read directly); read
    leniently (:func:`archguard.core.wheelfile.parse_metadata`)."""
    if file.metadata:
        body, _, _ = _open(file.url + ".metadata")
        return parse_metadata(body.decode("utf-8", errors="replace"))
    parsed = urllib.parse.urlparse(file.url)
    source: io.RawIOBase | str
    if parsed.scheme == "file":
        source = urllib.request.url2pathname(parsed.path)
    else:
        source = _Ranged(file.url)
    try:
        with zipfile.ZipFile(source) as zf:
            names = [
                n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
            ]
            if not names:
                raise IndexUnreachable(f"{file.url} holds no .dist-info/METADATA")
            text = zf.read(names[0]).decode("utf-8", errors="replace")
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise IndexUnreachable(f"{file.url}: its metadata could not be read ({exc}).") from None
    return parse_metadata(text)
