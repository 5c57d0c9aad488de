#!/usr/bin/env python3
"""Write every command-line output for every bundled combination into a directory.

Usage: python scripts/snapshot_outputs.py OUT_DIR

For a refactor that must not change behaviour: run it before and after, then
``diff -r before/ after/``. It covers, for each (CUDA, torch) cell of the bundled tables,
``list`` in every format and ``explain`` (text and JSON, which is the wheel's resolution
record plus warnings), with the bundled policy, with a package override holding ``a``/``f``
entries and with ``ARCHGUARD_ARCH_LIST``; ``matrix`` in every format; ``check-policy``; and
``lint`` on every corpus excerpt and on the example package.
Each output file holds the exit status, stdout and stderr of one command, run in-process
through ``archguard._cli.main`` (so the whole run takes seconds).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

from archguard._cli import main as archguard_main
from archguard.core.torchbuild import bundled_builds

OVERRIDE = '[tool.archguard]\narch_list = "8.0;9.0a;10.0f;10.3a;12.0f+PTX;Ampere"\n'
ENV_LIST = "7.0;8.0;9.0"


def run(argv: list[str], env: dict[str, str]) -> str:
    saved = dict(os.environ)
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = archguard_main(argv)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return (
        f"$ archguard {' '.join(argv)}\nexit {code}\n"
        f"--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}"
    )


REPO = Path(__file__).resolve().parent.parent
# the lint's wheels: the cu130 policy row; family and arch-specific targets; no image >= 9.0
LINT_LISTS = (None, "7.5;8.0;8.6;9.0a;10.0f;12.0f", "8.0;8.6+PTX")


def lint_outputs(out: Path) -> int:
    """``lint`` on every corpus excerpt and on the example package, for each list."""
    sources = [*sorted(REPO.glob("tests/lint_corpus/*/*.cu")), REPO / "example_package"]
    count = 0
    for source in sources:
        for number, arches in enumerate(LINT_LISTS):
            env = {} if arches is None else {"ARCHGUARD_ARCH_LIST": arches}
            for fmt in ("text", "json"):
                where = ["--project", str(source)] if source.is_dir() else [str(source)]
                argv = ["lint", *where, "--cuda", "13.0", "--torch", "2.13", "--format", fmt]
                name = f"lint-{source.parent.name}-{source.stem}-{number}-{fmt}.txt"
                (out / name).write_text(run(argv, env).replace(str(REPO), "<repo>"))
                count += 1
    return count


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name in list(os.environ):
        if name.startswith("ARCHGUARD_") or name == "TORCH_CUDA_ARCH_LIST":
            del os.environ[name]
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp, "pkg")
        pkg.mkdir()
        (pkg / "pyproject.toml").write_text(OVERRIDE)
        variants = {
            "policy": ([], {}),
            "package": (["--project", str(pkg)], {}),
            "env": ([], {"ARCHGUARD_ARCH_LIST": ENV_LIST}),
        }
        count = 0
        for build in bundled_builds():
            tag = build.tag
            cuda = build.cuda.text
            combo = ["--cuda", cuda, "--torch", build.torch]
            for variant, (extra, env) in variants.items():
                stem = f"{tag}-{build.torch}-{variant}"
                for fmt in ("text", "torch", "cmake", "gencode", "json"):
                    text = run(["list", *combo, *extra, "--format", fmt], env)
                    (out / f"{stem}-list-{fmt}.txt").write_text(text.replace(tmp, "<tmp>"))
                    count += 1
                for fmt in ("text", "json"):
                    args = ["explain", "7.0", "10.3", *combo, *extra, "--format", fmt]
                    text = run(args, env)
                    (out / f"{stem}-explain-{fmt}.txt").write_text(text.replace(tmp, "<tmp>"))
                    count += 1
        for variant, (extra, env) in variants.items():
            for fmt in ("text", "markdown", "html", "json", "github"):
                text = run(["matrix", *extra, "--format", fmt], env)
                (out / f"matrix-{variant}-{fmt}.txt").write_text(text.replace(tmp, "<tmp>"))
                count += 1
        (out / "check-policy.txt").write_text(run(["check-policy"], {}))
        count += lint_outputs(out)
    print(f"{count + 1} outputs written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
