#!/usr/bin/env python3
"""What a package's declared build environment adds to a job (issue 41): ``archguard
wheel``'s preparation (its ``[build-system].requires`` and its backend's
``get_requires_for_build_wheel`` read, the unmet ones resolved by pip beside the cell and
installed into an overlay), timed side by side in one run for

- a released sdist whose build needs setuptools_scm, which this environment lacks: first
  (an empty cache: pip resolves and installs) and cached (the overlay is reused: only the
  backend is asked again and the resolution checked),
- the same sdist's build as a whole (``archguard wheel``, one arch), for scale,
- a package whose requirements the environment already meets (only the backend is asked),
- the CUDA toolkit root every build system gets (the toolkit's files and torch's NVIDIA
  wheels' linked into one root): first (assembled) and cached (found complete).

Usage: python benchmarks/build_env.py [--runs 3]
Needs the CUDA build of torch and nvcc (scripts/setup_env.sh); about 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MINI = REPO / "tests" / "packages" / "minicuda"
SETUP = """\
from setuptools import Extension, setup
from torch.utils.cpp_extension import BuildExtension

setup(
    name="{name}",
    {version}
    ext_modules=[Extension("_minicuda", ["mod.c", "kernel.cu"], extra_compile_args={{"nvcc": []}})],
    cmdclass={{"build_ext": BuildExtension}},
)
"""


def package(root: Path, name: str, scm: bool) -> Path:
    root.mkdir(parents=True)
    for f in ("kernel.cu", "mod.c"):
        (root / f).write_bytes((MINI / f).read_bytes())
    version = (
        'use_scm_version=True, setup_requires=["setuptools_scm"],' if scm else 'version="1.0",'
    )
    (root / "setup.py").write_text(SETUP.format(name=name, version=version))
    requires = '"setuptools>=64", "torch"' + (', "setuptools_scm>=8"' if scm else "")
    (root / "pyproject.toml").write_text(
        f'[build-system]\nrequires = [{requires}]\nbuild-backend = "setuptools.build_meta"\n'
    )
    (root / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    return root


PREPARE = """
import sys, time
from pathlib import Path
from archguard.frontend.buildenv import prepare
started = time.perf_counter()
env = prepare(Path(sys.argv[1]), dict(__import__("os").environ))
print(time.perf_counter() - started, len(env.installed))
"""


ROOT = """
import sys, time
from archguard.frontend.toolkit import build_toolkit
from archguard.settings.inputs import Query, gather
res = gather(Query(), dict(__import__("os").environ)).resolve()
started = time.perf_counter()
made = build_toolkit(res, dict(__import__("os").environ))
print(time.perf_counter() - started, len((made.assembled or {}).get("libraries_from_wheels", [])))
"""


def root_time(cache: Path) -> tuple[float, int]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    out = subprocess.run(
        [sys.executable, "-c", ROOT], capture_output=True, text=True, env=env, check=False
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    seconds, linked = out.stdout.split()
    return float(seconds), int(linked)


def prepare_time(tree: Path, cache: Path) -> tuple[float, int]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    out = subprocess.run(
        [sys.executable, "-c", PREPARE, str(tree)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    seconds, installed = out.stdout.split()
    return float(seconds), int(installed)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    firsts, cached, plain, roots, kept = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="archguard-bench-buildenv-") as tmp:
        root = Path(tmp)
        scm = package(root / "scmpkg-1.2.3", "scmpkg", scm=True)
        met = package(root / "plainpkg-1.0", "plainpkg", scm=False)
        for run in range(args.runs):
            cache = root / f"cache-{run}"
            firsts.append(prepare_time(scm, cache)[0])
            cached.append(prepare_time(scm, cache)[0])
            plain.append(prepare_time(met, cache)[0])
            roots.append(root_time(cache)[0])
            kept.append(root_time(cache)[0])
        sdist = root / "scmpkg-1.2.3.tar.gz"
        with tarfile.open(sdist, "w:gz") as tf:
            tf.add(scm, arcname=scm.name)
        env = {**os.environ, "ARCHGUARD_ARCH_LIST": "8.0", "XDG_CACHE_HOME": str(root / "c")}
        started = time.perf_counter()
        built = subprocess.run(
            [sys.executable, "-m", "archguard", "wheel", str(sdist), "-w", str(root / "out")],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        whole = time.perf_counter() - started
        if built.returncode != 0:
            raise SystemExit(built.stdout + built.stderr[-3000:])
    med = statistics.median
    print(f"runs: {args.runs} (medians; min-max in brackets)")
    for what, xs in (
        ("setuptools_scm needed, first (pip resolves, installs)", firsts),
        ("setuptools_scm needed, cached overlay", cached),
        ("nothing needed (no setup_requires: the backend not asked)", plain),
        ("toolkit root, first (assembled)", roots),
        ("toolkit root, cached (found complete)", kept),
    ):
        print(f"  {what:<55} {med(xs):6.2f} s  [{min(xs):.2f}-{max(xs):.2f}]")
    print(f"  {'the whole archguard wheel job (first, one arch)':<55} {whole:6.2f} s")
    print(
        f"ratios to the whole job: first {med(firsts) / whole:.3f}, cached "
        f"{med(cached) / whole:.3f}, nothing needed {med(plain) / whole:.3f}; toolkit root "
        f"first {med(roots) / whole:.4f}, cached {med(kept) / whole:.4f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
