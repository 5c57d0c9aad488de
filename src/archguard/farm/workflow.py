"""``archguard farm workflow MANIFEST``: the same plan as a GitHub Actions workflow, where a
farm outgrows one machine. A plan job writes the matrix (``farm plan --format github``), one
build job per shard of at most 256 jobs (GitHub's limit) runs ``archguard farm run ... --only
JOB`` for each of its jobs inside PyTorch's own wheel-building image (manylinux_2_28 with the
cell's CUDA toolkit, so the wheels' platform floor is torch's; a cell's own ``container`` in
its place; an aarch64 cell's jobs on GitHub's arm runners in PyTorch's aarch64 builder,
``pytorch/manylinuxaarch64-builder:cudaX.Y``), with a timeout under the 6-hour cap so that
the cache is saved before GitHub cancels the job, sccache through GitHub's cache backend, and
the job's SITE as an artifact;
a last job assembles the indexes and the page from every job's ledger and attests every
published wheel (GitHub's build-provenance attestation: ``gh attestation verify WHEEL --repo
OWNER/REPO``, which ``archguard which`` prints, checks it; its subject is the wheel's sha256,
the digest a rebuild must match). With ``--rebuild N`` a job per cell then rebuilds a sample
of N of the cell's published jobs on another runner, in the cell's image, and fails on any
wheel whose bytes differ (``farm verify SITE --rebuild``, issue 50). Every job builds with
archguard's cache at one path (``ARCHGUARD_CACHE_DIR``), so the trees and the cells'
environments are at the same paths on every runner: nvcc names anonymous namespaces after the
source's absolute path."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path

from archguard import __version__
from archguard.farm.container import builder_image
from archguard.farm.families import load_farm
from archguard.farm.manifest import Cell
from archguard.farm.plan import GITHUB_MAX_JOBS, RUNNERS, plan

JOB_TIMEOUT_MINUTES = 330  # under GitHub's 360: sccache's post step saves the cache
# Where PyTorch builds its own Linux wheels: AlmaLinux 8 (glibc 2.28) with the CUDA toolkit
# and every CPython under /opt/python, so a wheel built there is manylinux_2_28 like torch's
# (a GitHub runner's glibc would set a floor above torch's own).
BUILDER_IMAGE = "pytorch/manylinux2_28-builder:cuda${{ matrix.cuda }}"
# Every job installs the archguard that wrote the workflow: its code is an input of every job
# id, so a release between the plan job and the build jobs would leave --only finding nothing.
ARCHGUARD = f'"torch-archguard[farm]=={__version__}"'


CACHE_DIR = "/tmp/archguard-cache"  # the same path on every runner: the same compile lines
DAILY = "23 4 * * *"  # a manifest with [[cells]] rules follows torch's releases within a day


def workflow(  # noqa: PLR0913 - the manifest, and each option of the command
    manifest_path: Path,
    manifest_in_repo: str,
    policy: str | None = None,
    *,
    schedule: str | None = None,
    watch: bool = False,
    rebuild: int = 0,
) -> str:
    """The workflow's YAML text for the manifest (named by its path in the repository).
    ``schedule``: a cron line for a ``schedule:`` trigger (default: daily where the
    manifest has ``[[cells]]`` rules, whose cells follow torch's releases); ``watch``: a job
    that runs ``archguard watch`` (failing while the bundled tables lack a torch release or
    a CUDA toolkit on the index); ``rebuild``: a job per cell that rebuilds a sample of that
    many published jobs and fails on a wheel whose bytes differ (0: none)."""
    manifest = load_farm(manifest_path)
    # every job, whichever machine writes the workflow: each runs on its platform's runner
    jobs = [j for j in plan(manifest, policy, here=lambda _: "") if j.arch_list is not None]
    cron = schedule or (DAILY if manifest.families else None)
    shards = max(1, -(-len(jobs) // GITHUB_MAX_JOBS))
    # the plan, the builds and the assembly: the same policy, paths quoted for the shell
    chosen = f" --policy {shlex.quote(policy)}" if policy else ""
    manifest_in_repo = shlex.quote(manifest_in_repo)
    lines = _plan_job(manifest_in_repo, shards, chosen, cron)
    if watch:
        lines += _watch_job()
    # a cell's own container replaces PyTorch's image for its jobs: each job's image is then
    # the matrix's (farm plan --format github names it), and farm run runs in it as it is
    own = any(c.container for c in manifest.cells)
    # aarch64 cells: each job on its platform's runner, in its platform's builder image
    arm = any(c.platform != "x86_64" for c in manifest.cells)
    for i in range(shards):
        lines += _build_job(i, manifest_in_repo, chosen, own, arm)
    lines += _assemble_job(manifest_in_repo, shards, chosen)
    if rebuild > 0:
        lines += _rebuild_job(manifest_in_repo, chosen, manifest.cells, rebuild, arm)
    return "\n".join(line for line in lines if line) + "\n"


def _plan_job(manifest: str, shards: int, policy: str, cron: str | None = None) -> list[str]:
    return [
        "# Generated by `archguard farm workflow`: the farm's plan on GitHub Actions.",
        "name: archguard farm",
        "on:",
        "  workflow_dispatch:",
        *(["  schedule:", f'    - cron: "{cron}"'] if cron else []),
        "permissions:",
        "  contents: read",
        "env:",
        "  ARCHGUARD_COMPILER_CACHE: sccache",
        f"  ARCHGUARD_CACHE_DIR: {CACHE_DIR}",
        '  SCCACHE_GHA_ENABLED: "true"',
        "jobs:",
        "  plan:",
        "    runs-on: ubuntu-latest",
        "    outputs:",
        *(f"      shard{i}: ${{{{ steps.plan.outputs.shard{i} }}}}" for i in range(shards)),
        "    steps:",
        *_setup('"3.11"', ARCHGUARD),
        "      - id: plan",
        "        run: |",
        f"          python -m archguard farm plan {manifest}{policy} --format github > plan.json",
        "          python - <<'EOF' >> \"$GITHUB_OUTPUT\"",
        "          import json",
        "          for i, shard in enumerate(json.load(open('plan.json'))['shards']):",
        "              print(f'shard{i}=' + json.dumps(shard))",
        "          EOF",
    ]


def _watch_job() -> list[str]:
    """``archguard watch``: red while the bundled torch or toolkit table lacks a release the
    index has (a new archguard release, or the farm's own tables, is due)."""
    return [
        "  watch:",
        "    runs-on: ubuntu-latest",
        "    steps:",
        *_setup('"3.11"', ARCHGUARD),
        "      - run: python -m archguard watch",
    ]


def _build_job(
    i: int, manifest: str, policy: str, own_images: bool = False, arm: bool = False
) -> list[str]:
    """A shard's build jobs: ``own_images``: some cell names its image (each job's is the
    matrix's, and farm run runs in it as it is); ``arm``: some cell is aarch64 (each job's
    runner and PyTorch image are its platform's, both the matrix's)."""
    image = "${{ matrix.container }}" if own_images or arm else BUILDER_IMAGE
    inside = " --in-container" if own_images else ""
    return [
        f"  build-{i}:",
        "    needs: plan",
        f"    runs-on: {'${{ matrix.runner }}' if arm else RUNNERS['x86_64']}",
        f"    timeout-minutes: {JOB_TIMEOUT_MINUTES}",
        "    strategy:",
        "      fail-fast: false",
        f"      matrix: ${{{{ fromJSON(needs.plan.outputs.shard{i}) }}}}",
        "    container:",
        f"      image: {image}",
        "    env:",
        '      CUDA_VISIBLE_DEVICES: ""',
        "      CUDA_HOME: /usr/local/cuda",
        "      PY: ${{ matrix.python }}",
        *_image_steps(),
        "      - run: >-",
        f"          python -m archguard farm run {manifest}{policy} -o site{inside}",
        "          --only ${{ matrix.job }}",
        "      - uses: actions/upload-artifact@v4",
        "        if: always()",
        "        with:",
        "          name: site-${{ matrix.job }}",
        "          path: |",
        "            site",
        "            !site/.farm/envs",
        "            !site/.farm/jobserver",
        "            !site/*/simple",
        "            !site/*/.simple-*",
        "            !site/.farm/lock",
        "          include-hidden-files: true",
    ]


def _assemble_job(manifest: str, shards: int, policy: str) -> list[str]:
    return [
        "  assemble:",
        f"    needs: [{', '.join(f'build-{i}' for i in range(shards))}]",
        "    if: always()",
        "    runs-on: ubuntu-latest",
        "    permissions:",  # the build-provenance attestation of every published wheel
        "      contents: read",
        "      id-token: write",
        "      attestations: write",
        "    steps:",
        *_setup('"3.11"', ARCHGUARD),
        "      - uses: actions/download-artifact@v4",
        "        with:",
        "          pattern: site-*",
        "          path: site",
        "          merge-multiple: true",
        f"      - run: python -m archguard farm run {manifest}{policy} -o site --assemble",
        "      - uses: actions/attest-build-provenance@v2",
        "        with:",
        '          subject-path: "site/wheels/*/*.whl"',
        "      - uses: actions/upload-artifact@v4",
        "        with:",
        "          name: farm-site",
        "          path: |",
        "            site",
        "            !site/.farm/envs",
        "          include-hidden-files: true",
    ]


def _rebuild_job(
    manifest: str, policy: str, cells: Sequence[Cell], sample: int, arm: bool = False
) -> list[str]:
    """A second builder: each cell's sample of published jobs rebuilt from their ledgers'
    inputs on another runner (its platform's), in the cell's image; red on any wheel whose
    sha256 (its attestation's subject) the rebuild does not give."""
    include = [
        {
            "cell": c.name,
            "python": c.python,
            "image": builder_image(c),
            **({"runner": RUNNERS[c.platform]} if arm else {}),
        }
        for c in cells
    ]
    return [
        "  rebuild:",
        "    needs: assemble",
        f"    runs-on: {'${{ matrix.runner }}' if arm else RUNNERS['x86_64']}",
        f"    timeout-minutes: {JOB_TIMEOUT_MINUTES}",
        "    strategy:",
        "      fail-fast: false",
        f"      matrix: {{include: {json.dumps(include)}}}",
        "    container:",
        "      image: ${{ matrix.image }}",
        "    env:",
        '      CUDA_VISIBLE_DEVICES: ""',
        "      CUDA_HOME: /usr/local/cuda",
        "      PY: ${{ matrix.python }}",
        *_image_steps(),  # as the builds': the same inputs in the ledger
        "      - uses: actions/download-artifact@v4",
        "        with:",
        "          name: farm-site",
        "          path: site",
        "      - run: >-",
        f"          python -m archguard farm verify site --rebuild {manifest}{policy}",
        f"          --only ${{{{ matrix.cell }}}} --sample {sample} --in-container",
    ]


def _image_steps() -> list[str]:
    """A job's first steps in a builder image: the checkout, the cell's Python from the
    image's /opt/python (``3.14t``: ``cp314-cp314t``, CPython's free-threaded build),
    sccache, and the archguard that wrote the workflow."""
    return [
        "    steps:",
        "      - uses: actions/checkout@v4",
        '      - run: V="${PY%t}"; echo "/opt/python/cp${V//./}-cp${V//./}${PY#"$V"}/bin" '
        '>> "$GITHUB_PATH"',
        "      - uses: mozilla-actions/sccache-action@v0.0.9",
        f"      - run: python -m pip install {ARCHGUARD}",
    ]


def _setup(python: str, install: str = "") -> list[str]:
    """A job's first steps: the checkout, a Python, and what to install with pip."""
    steps = [
        "      - uses: actions/checkout@v4",
        "      - uses: actions/setup-python@v5",
        "        with:",
        f"          python-version: {python}",
    ]
    return [*steps, f"      - run: python -m pip install {install}"] if install else steps
