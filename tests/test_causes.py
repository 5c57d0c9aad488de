"""The real cause, first (issue 47): a build whose compiles succeeded and that then failed
(a missing source, the link, an exception of the package's own) is not called
``compile-failed``; ``archguard wheel``'s last line names a Requires-Python the cell's Python
is not in, and a module the package's build code imports and does not declare, before what
the setup.py asks about the GPU; a variable is offered as the switch that forces the CUDA
build only where its name or its use says so. Real setuptools and gcc for the compiles (no
nvcc, no torch: archguard's watch of the compiler is the same for both)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from archguard.errors import ConfigError, ToolError
from archguard.frontend import buildenv
from archguard.frontend.failures import cause
from archguard.frontend.switches import switches

# --- pip's own words, from real runs (pip 25, setuptools 80, torch 2.13.0+cu130) -----------

# `pip wheel --no-build-isolation --no-deps -v` of an sdist whose pyproject.toml says
# requires-python = ">=3.12", by Python 3.11.7: pip refuses it after reading its metadata
REQUIRES_PYTHON_LOG = """\
  writing manifest file '/tmp/pip-modern-metadata-kiw0aodq/newpy_ext.egg-info/SOURCES.txt'
  creating '/tmp/pip-modern-metadata-kiw0aodq/newpy_ext-0.3.0.dist-info'
  Preparing metadata (pyproject.toml): finished with status 'done'
ERROR: Package 'newpy-ext' requires a different Python: 3.11.7 not in '>=3.12'
"""

# A setup.py that asks torch for the GPU at line 7 (FORCE_CUDA=1 passes it) and imports
# pybind11 at line 9, which the build does not have (pip wheel --no-build-isolation)
PYBIND11_SETUP = """\
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

if not torch.cuda.is_available() and os.environ.get("FORCE_CUDA", "0") != "1":
    raise RuntimeError("CUDA is not available: set FORCE_CUDA=1")
import pybind11

setup(
    name="pbpkg",
    version="0.1.0",
    ext_modules=[CUDAExtension("pbpkg._C", ["csrc/ext.cu"], include_dirs=[pybind11.get_include()])],
    cmdclass={"build_ext": BuildExtension},
)
"""
PYBIND11_LOG = """\
Processing ./pbpkg
  Preparing metadata (pyproject.toml): started
  Running command Preparing metadata (pyproject.toml)
  W1206 04:15:29.949000 20315 torch/utils/cpp_extension.py:178] No CUDA runtime is found, \
using CUDA_HOME='/usr/local'
  Traceback (most recent call last):
    File "/env/lib/python3.11/site-packages/pip/_vendor/pyproject_hooks/_in_process/\
_in_process.py", line 406, in <module>
      main()
    File "/env/lib/python3.11/site-packages/setuptools/build_meta.py", line 380, in \
prepare_metadata_for_build_wheel
      self.run_setup()
    File "/env/lib/python3.11/site-packages/setuptools/build_meta.py", line 317, in run_setup
      exec(code, locals())  # noqa: S102 # exec is intentional here
      ^^^^^^^^^^^^^^^^^^^^
    File "<string>", line 9, in <module>
  ModuleNotFoundError: No module named 'pybind11'
  error: subprocess-exited-with-error

  \u00d7 Preparing metadata (pyproject.toml) did not run successfully.
  \u2502 exit code: 1
  \u2570\u2500> No available output.
"""  # pip's box: "\u00d7" (the multiplication sign), "\u2502", "\u2570\u2500>"

# setuptools' own build of a C extension whose link names a library that is not there
LINK_LOG = """\
  building '_m' extension
  gcc -Wsign-compare -DNDEBUG -g -fwrapv -O3 -Wall -fPIC -I/env/include -c m.c -o \
build/temp.linux-x86_64-cpython-311/m.o
  gcc -shared build/temp.linux-x86_64-cpython-311/m.o -larchguard_no_such_lib -o \
build/lib.linux-x86_64-cpython-311/_m.cpython-311-x86_64-linux-gnu.so
  /usr/bin/ld: cannot find -larchguard_no_such_lib: No such file or directory
  collect2: error: ld returned 1 exit status
  archguard: error: extension _m failed in its link, after its compile (compiled without an \
error: _m): "LinkError: Command '['gcc', '-shared']' returned non-zero exit status 1.". Not a \
compile failure: archguard's targets are not the cause
  error: Command '['gcc', '-shared', 'build/temp.linux-x86_64-cpython-311/m.o', \
'-larchguard_no_such_lib']' returned non-zero exit status 1.
  error: subprocess-exited-with-error
"""


# diso 0.1.4's released sdist (CC BY-NC 4.0; its setup.py only read, not vendored), built
# by `archguard wheel diso==0.1.4` with no GPU: setup.py:24 asks torch for the GPU and,
# without one (and without FORCE_CUDA=1), builds a CppExtension of src/pybind.cpp alone,
# whose header src/cumc.h includes cuda_runtime.h; its compile line has no toolkit include
# directory. An excerpt of the real log (its tree shortened to /s/diso-0.1.4, the venv to
# /env, the c++ line and the traceback's setuptools frames cut)
DISO_LOG = """\
  W1206 06:05:11.301000 6769 torch/utils/cpp_extension.py:178] No CUDA runtime is found, \
using CUDA_HOME='/root/.cache/archguard/cuda-root/cuda-13-2754aea688910e9d'
  sources: ['src/pybind.cpp']
  running build_ext
  building 'diso._C' extension
  [1/1] c++ -MMD -MF /s/diso-0.1.4/build/temp.linux-x86_64-cpython-311/src/pybind.o.d -O3 \
-Wall -fPIC -Isrc -I/env/lib/python3.11/site-packages/torch/include -c -c \
/s/diso-0.1.4/src/pybind.cpp -o /s/diso-0.1.4/build/temp.linux-x86_64-cpython-311/src/pybind.o \
-DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C -std=c++20
  FAILED: /s/diso-0.1.4/build/temp.linux-x86_64-cpython-311/src/pybind.o
  In file included from /s/diso-0.1.4/src/pybind.cpp:1:
  /s/diso-0.1.4/src/cumc.h:2:10: fatal error: cuda_runtime.h: No such file or directory
      2 | #include <cuda_runtime.h>
        |          ^~~~~~~~~~~~~~~~
  compilation terminated.
  ninja: build stopped: subcommand failed.
  Traceback (most recent call last):
    File "/env/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line 2893, in \
_run_ninja_build
      subprocess.run(
    File "/root/.pyenv/versions/3.11.7/lib/python3.11/subprocess.py", line 571, in run
      raise CalledProcessError(retcode, process.args,
  subprocess.CalledProcessError: Command '['ninja', '-v', '-j', '1']' returned non-zero exit \
status 1.

  The above exception was the direct cause of the following exception:

  Traceback (most recent call last):
    File "/env/lib/python3.11/site-packages/setuptools/build_meta.py", line 317, in run_setup
      exec(code, locals())  # noqa: S102 # exec is intentional here
      ^^^^^^^^^^^^^^^^^^^^
    File "<string>", line 55, in <module>
    File "/env/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line 2910, in \
_run_ninja_build
      raise RuntimeError(message) from e
  RuntimeError: Error compiling objects for extension
  error: subprocess-exited-with-error
"""
# torch-points-kernels 0.7.0's released sdist (MIT), the same build: setup.py:16 asks for the
# GPU; setuptools' own compile of its CPU extension names its files relative to the tree
POINTS_KERNELS_LOG = """\
  building 'torch_points_kernels.points_cpu' extension
  g++ -Wsign-compare -DNDEBUG -g -fwrapv -O3 -Wall -fPIC -Icpu/include -c cpu/src/knn.cpp -o \
build/temp.linux-x86_64-cpython-311/cpu/src/knn.o -O3 -std=c++20
  In file included from cpu/src/knn.cpp:2:
  cpu/src/neighbors.cpp: In function 'int nanoflann_neighbors(std::vector<scalar_t>&, ...)':
  cpu/src/neighbors.cpp:47:10: error: 'unique_ptr' is not a member of 'std'
     47 |     std::unique_ptr<my_kd_tree_t> index(new my_kd_tree_t(3, pcd, tree_params));
        |          ^~~~~~~~~~
  cpu/src/neighbors.cpp:7:1: note: 'std::unique_ptr' is defined in header '<memory>'
  error: command '/usr/bin/g++' failed with exit code 1
  error: subprocess-exited-with-error
"""
DISO_SETUP = """\
import os

import torch
from torch.utils.cpp_extension import CUDA_HOME

if (torch.cuda.is_available() and (CUDA_HOME is not None)) or os.getenv("FORCE_CUDA", "0") == "1":
    nvcc_flags = os.getenv("NVCC_FLAGS", "")
"""


def test_a_python_the_package_refuses_is_the_last_line() -> None:
    said = cause(REQUIRES_PYTHON_LOG.splitlines(), ["FORCE_CUDA"], {})
    assert said.startswith(
        "newpy-ext requires Python >=3.12 (its Requires-Python) and this cell's Python is "
        "3.11.7: pip refused it before any build"
    ), said
    assert 'skip = [{ cell = "...", reason = "requires Python >=3.12" }]' in said
    assert "the log is above" not in said and "FORCE_CUDA" not in said


def test_a_module_its_setup_py_imports_is_named_before_the_gpu(tmp_path: Path) -> None:
    """setup.py:9's ``import pybind11`` stopped it, not its GPU question at line 7: the
    module comes first, with where to declare it."""
    (tmp_path / "setup.py").write_text(PYBIND11_SETUP)
    said = cause(PYBIND11_LOG.splitlines(), ["FORCE_CUDA"], {}, str(tmp_path), ["setup.py:7"])
    assert said.startswith(
        "the package's build imports pybind11, which the build does not have: "
        "\"ModuleNotFoundError: No module named 'pybind11'\", at setup.py:9"
    ), said
    assert 'build-requires = ["pybind11"]' in said and "--build-requires pybind11" in said
    assert "no GPU is visible" not in said
    # a module of the cell's (torch's, the GPU's) is not a build requirement to declare
    torchless = PYBIND11_LOG.replace("'pybind11'", "'torch'")
    said = cause(torchless.splitlines(), ["FORCE_CUDA"], {}, str(tmp_path), ["setup.py:7"])
    assert said.startswith("the package's setup.py stopped because no GPU is visible"), said
    # an import name whose distribution is named otherwise is declared by that name
    yaml = PYBIND11_LOG.replace("'pybind11'", "'yaml'")
    assert 'build-requires = ["PyYAML"]' in cause(yaml.splitlines(), [], {}, str(tmp_path))


def test_a_compile_error_of_the_cpu_fallback_is_first_not_the_gpu(tmp_path: Path) -> None:
    """diso 0.1.4: its setup.py asks for the GPU (line 24) and raises at line 55, but it did
    not stop there: it compiled its CPU fallback, which failed. The compiler's first error
    comes first, with its file and line, then the fallback and the switch; never "stopped
    because no GPU is visible"."""
    tree = tmp_path / "diso-0.1.4"
    tree.mkdir()
    (tree / "setup.py").write_text(DISO_SETUP)
    log = DISO_LOG.replace("/s/diso-0.1.4", str(tree)).splitlines()
    said = cause(log, ["FORCE_CUDA", "NVCC_FLAGS"], {}, str(tree), ["setup.py:24"])
    assert said.startswith(
        "its compile does not find cuda_runtime.h, at src/cumc.h:2 (a CUDA header, in a C++ "
        "extension's compile: that line has no toolkit include directory); the package built "
        "its CPU fallback (no CUDA compile ran: chosen because no GPU is visible: it asks "
        "torch for the GPU, at setup.py:24; a farm has none) and that failed to compile"
    ), said
    assert "FORCE_CUDA=1, in the farm manifest's env table for this package" in said
    assert "stopped because no GPU is visible" not in said
    # built with FORCE_CUDA set, the same error: the plain build's words (no fallback named)
    forced = cause(log, [], {}, str(tree))
    assert forced.startswith("its compile does not find cuda_runtime.h, at src/cumc.h:2 (a "), (
        forced
    )
    assert "CPU fallback" not in forced
    # a file named relative to the tree is the package's own: quoted first, then the fallback
    kernels = POINTS_KERNELS_LOG.splitlines()
    said = cause(kernels, ["FORCE_CUDA", "FORCE_ONLY_CPU"], {}, str(tree), ["setup.py:16"])
    assert said.startswith(
        "the package's own source does not compile, at cpu/src/neighbors.cpp:47: \"'unique_ptr' "
        "is not a member of 'std'\" (the host compiler's first error"
    ), said
    assert "; the package built its CPU fallback (no CUDA compile ran: chosen because" in said


def test_a_link_that_fails_is_the_linkers_words_not_a_compile() -> None:
    said = cause(LINK_LOG.splitlines(), [], {})
    assert said == (
        "the link of the package's extension failed, not a compile: '/usr/bin/ld: cannot find "
        "-larchguard_no_such_lib: No such file or directory' (the linker's first error; no "
        "arch list changes it)"
    )
    # without the linker's line, archguard's own: where it stopped, and the exception
    bare = "\n".join(x for x in LINK_LOG.splitlines() if "ld: " not in x and "collect2" not in x)
    said = cause(bare.splitlines(), [], {})
    assert said.startswith("archguard in the build: extension _m failed in its link"), said
    assert "compile-failed" not in said


# A setup.py gated on its own command line, reading DEBUG for its flags: DEBUG is not the
# switch that forces the CUDA build; MYPKG_EXT (an `if` on it adds the CUDAExtension) is.
GATED = """\
import os
import sys

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

DEBUG = os.environ.get("DEBUG", "0") == "1"
ARCHES = os.environ.get("MYPKG_CUDA_ARCH", "8.0")
ext_modules = []
if "build_ext" in sys.argv:
    flags = ["-O0"] if DEBUG else ["-O3"]
    ext_modules.append(CUDAExtension("_k", ["k.cu"], extra_compile_args={"nvcc": flags}))
fast = os.getenv("MYPKG_EXT") == "1"
if fast:
    ext_modules.append(CUDAExtension("_f", ["f.cu"]))
setup(name="gated", ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
"""


@pytest.mark.parametrize(
    ("reads", "text", "offered"),
    [
        (["DEBUG"], GATED, []),
        (["DEBUG", "MYPKG_CUDA_ARCH", "MYPKG_EXT"], GATED, ["MYPKG_EXT"]),
        (["MYPKG_EXT"], "", []),  # its use is what says so
        (
            ["WITH_GPU", "NVCC_THREADS", "CUDA_VERSION", "FORCE_CUDA"],
            "",
            ["FORCE_CUDA", "WITH_GPU"],
        ),
        (["TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "BUILD_EXTENSIONS"], "", ["BUILD_EXTENSIONS"]),
    ],
)
def test_a_variable_is_offered_as_the_switch_only_where_it_says_so(
    reads: list[str], text: str, offered: list[str]
) -> None:
    assert switches(reads, text) == offered


# --- archguard's watch of the compiler, in a real setuptools build with gcc -------------------

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on PATH")
C_SOURCE = "int archguard_answer(void) { return 42; }\n"


def _build(root: Path, command: Any = None, **ext: Any) -> tuple[Any, Any, BaseException | None]:
    """build_ext (or ``command``, a subclass of it) of one C extension in ``root`` under
    archguard's watch: the progress, the compiler afterwards, and what the build raised."""
    from setuptools import Distribution, Extension

    from archguard._integration.build import _tracking
    from archguard._integration.progress import Progress

    cmdclass = {"build_ext": command} if command else {}
    dist = Distribution(
        {"name": "m", "ext_modules": [Extension("_m", **ext)], "cmdclass": cmdclass}
    )
    cmd = dist.get_command_obj("build_ext")
    cmd.build_temp, cmd.build_lib = str(root / "temp"), str(root / "lib")
    cmd.ensure_finalized()
    progress = Progress()
    try:
        with _tracking(cmd, progress, {}):
            cmd.run()
    except Exception as exc:
        return progress, cmd.compiler, exc
    return progress, cmd.compiler, None


@needs_gcc
def test_only_a_compiler_that_failed_is_a_compile_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from archguard._integration.progress import not_a_compile

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.c").write_text(C_SOURCE)
    (tmp_path / "bad.c").write_text("int broken( {\n")
    # the compile succeeds and the link fails: not a compile failure, the link's own words
    progress, compiler, exc = _build(tmp_path, sources=["m.c"], libraries=["archguard_no_lib"])
    assert exc is not None and progress.compiled == ["_m"]
    assert progress.compiler_failed(exc) is None
    said = not_a_compile(progress, exc)
    assert said.startswith("extension _m failed in its link, after its compile (compiled "), said
    assert "LinkError: Command '['gcc', '-shared'" in said, said
    assert " ... " in said and "returned non-zero exit status 1" in said  # its middle left out
    assert said.endswith("Not a compile failure: archguard's targets are not the cause")
    assert "compile" not in vars(compiler) and "link" not in vars(compiler)  # put back
    # gcc fails on the source: a compiler failed, and it is that extension's
    progress, _, exc = _build(tmp_path, sources=["bad.c"])
    assert exc is not None and progress.compiler_failed(exc) == "_m"
    assert not progress.compiled
    # a source the tree does not hold: named, not a compile failure
    progress, _, exc = _build(tmp_path, sources=["m.c", "gone.c"])
    assert exc is not None and progress.compiler_failed(exc) is None
    said = not_a_compile(progress, exc)
    assert said.startswith("extension _m names sources that do not exist: gone.c: "), said


@needs_gcc
def test_an_exception_after_the_compiles_is_quoted_as_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package whose build_ext removes its build directory after building: its
    FileNotFoundError, quoted, never compile-failed; a build step of its own (a CMake run
    that raises) is said to be one."""
    from setuptools.command.build_ext import build_ext

    from archguard._integration.progress import not_a_compile

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.c").write_text(C_SOURCE)

    class ThenGone(build_ext):  # type: ignore[misc]  # setuptools is untyped here
        def run(self) -> None:
            super().run()
            sorted(Path("build").iterdir())  # [Errno 2]: the directory another step removed

    progress, _, exc = _build(tmp_path, ThenGone, sources=["m.c"])
    assert isinstance(exc, FileNotFoundError) and progress.compiler_failed(exc) is None
    assert not_a_compile(progress, exc) == (
        "the build stopped after extension _m's compile (compiled without an error: _m): "
        "\"FileNotFoundError: [Errno 2] No such file or directory: 'build'\". Not a compile "
        "failure: archguard's targets are not the cause"
    )

    class CMakeBuild(build_ext):  # type: ignore[misc]
        def build_extension(self, ext: Any) -> None:
            subprocess.check_call([sys.executable, "-c", "raise SystemExit(2)"])

    progress, _, exc = _build(tmp_path, CMakeBuild, sources=["m.c"])
    assert isinstance(exc, subprocess.CalledProcessError)
    said = not_a_compile(progress, exc)
    assert said.startswith("extension _m failed in a build step of its own, which compiles"), said
    assert said.endswith("its list was in CUDAARCHS and TORCH_CUDA_ARCH_LIST")


# --- requirements the caller adds to the build ------------------------------------------------


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A pure-Python wheel of one module, as a find-links directory holds it."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "VALUE = 1\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, text in {**files, f"{dist}/RECORD": record}.items():
            zf.writestr(path, text)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    wheel.write_bytes(buffer.getvalue())
    return wheel


def test_extra_build_requirements_are_installed_as_the_declared_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the caller adds (a farm manifest's build-requires) is resolved beside the
    cell, installed into the overlay and recorded with the declared ones; one the cell
    has is not installed; one that is not a requirement is refused, named."""
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "agbuilddep", "1.0")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = tmp_path / "pkg"
    source.mkdir()
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=40.8.0"]\n'
        'build-backend = "setuptools.build_meta"\n'
    )
    env = buildenv.prepare(source, os.environ, extra=["agbuilddep", "packaging"])
    assert env.declared == ["setuptools>=40.8.0", "agbuilddep", "packaging"]
    assert env.installed == ["agbuilddep==1.0"]  # the cell's packaging is kept
    assert env.overlay is not None and (env.overlay / "agbuilddep" / "__init__.py").is_file()
    assert env.as_json()["extra"] == ["agbuilddep", "packaging"]
    assert env.environment({})["PYTHONPATH"] == str(env.overlay)
    plain = buildenv.prepare(source, os.environ)
    assert plain.installed == [] and plain.extra == [] and plain.overlay is None
    with pytest.raises(ConfigError, match=r"added for it \(build-requires\): the requirement"):
        buildenv.prepare(source, os.environ, extra=["not a requirement!"])
    # a requirement no index gives: pip's failure, its own words, never a config error
    with pytest.raises(ToolError) as failed:
        buildenv.prepare(source, os.environ, extra=["agbuilddep==9.9"])
    assert failed.value.code == "tool-failed" and not isinstance(failed.value, ConfigError)
    assert "could not be resolved" in failed.value.message and "agbuilddep==9.9" in str(
        failed.value
    )
