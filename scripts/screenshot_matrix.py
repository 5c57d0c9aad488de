#!/usr/bin/env python3
"""Render ``archguard matrix --format html`` (or any page: ``--page FILE``, e.g. a farm's
``SITE/index.html``) in headless Chromium and save a PNG.

Usage: python scripts/screenshot_matrix.py [OUT.png] [--chromium PATH] [--page FILE]
       [-- matrix args...]

Exits non-zero when Chromium is missing, fails, or writes no image, so a test can use it.
The page is self-contained (no external assets); Chromium runs with networking features
off and a fresh profile.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def find_chromium(explicit: str | None) -> str:
    for name in ([explicit] if explicit else []) + [
        "chromium",
        "chromium-browser",
        "google-chrome",
    ]:
        found = shutil.which(name) if name else None
        if found:
            return found
    raise SystemExit("no Chromium found: install Debian's 'chromium' package or pass --chromium")


def _matrix(page: Path, extra: list[str]) -> None:
    argv = [sys.executable, "-m", "archguard", "matrix", "--format", "html", "-o", str(page)]
    subprocess.run([*argv, *extra], check=False)
    if not page.is_file():
        raise SystemExit("archguard matrix wrote no page")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=Path("matrix.png"))
    parser.add_argument("--chromium")
    parser.add_argument("--width", type=int, default=1500)
    parser.add_argument("--height", type=int, default=1100)
    parser.add_argument("--page", type=Path, help="an HTML file to render, not the matrix")
    parser.add_argument("--query", default="", help="a query string for the page: ?gpu=8.6")
    given = sys.argv[1:] if argv is None else argv
    cut = given.index("--") if "--" in given else len(given)
    args = parser.parse_args(given[:cut])
    extra = given[cut + 1 :]  # archguard matrix's own arguments, after --
    chromium = find_chromium(args.chromium)
    with tempfile.TemporaryDirectory(prefix="archguard-shot-") as tmp:
        page = args.page.resolve() if args.page else Path(tmp, "matrix.html")
        if args.page and not page.is_file():
            raise SystemExit(f"{args.page}: no such page")
        if not args.page:
            _matrix(page, extra)
        out = args.out.resolve()
        out.unlink(missing_ok=True)
        proc = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp}/profile",
                "--hide-scrollbars",
                f"--window-size={args.width},{args.height}",
                f"--screenshot={out}",
                page.as_uri() + args.query,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if not out.is_file() or out.stat().st_size == 0:
            sys.stderr.write(proc.stderr[-2000:])
            raise SystemExit(f"Chromium wrote no screenshot (exit {proc.returncode})")
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
