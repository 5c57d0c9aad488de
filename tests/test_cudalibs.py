"""archguard.detect.cudalibs: what an nvcc-only toolkit lacks for torch extensions, and
where torch's NVIDIA wheels have it. Directory trees laid out as the real ones are
(``site-packages/nvidia/cu13/{include,lib}``, versioned ``libcufft.so.12``); the real
toolkit and wheels are exercised by the real-package builds (test_real_packages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from archguard.detect.cudalibs import (
    TORCH_HEADERS,
    assemble_root,
    completion,
    linked_libraries,
    make_header_dir,
    make_links,
)


def tree(tmp: Path) -> tuple[Path, Path]:
    home = tmp / "cuda"
    (home / "include").mkdir(parents=True)
    (home / "lib64").mkdir()
    (home / "include" / "cuda_runtime.h").write_text("// toolkit 13.2\n")
    (home / "lib64" / "libcudart.so").write_text("")
    nvidia = tmp / "site" / "nvidia"
    inc, lib = nvidia / "cu13" / "include", nvidia / "cu13" / "lib"
    inc.mkdir(parents=True)
    lib.mkdir()
    for name in (*TORCH_HEADERS, "cublas_api.h", "cuda_runtime.h"):
        (inc / name).write_text(f"// wheel {name}\n")
    (inc / "cub").mkdir()
    (lib / "libcufft.so.12").write_text("")
    (lib / "libcufft.so.12.0.0").write_text("")
    return home, nvidia


def test_what_the_toolkit_lacks_comes_from_the_wheels_without_shadowing_it(
    tmp_path: Path,
) -> None:
    home, nvidia = tree(tmp_path)
    found = completion(str(home), 13, ["cufft", "cudart", "gomp"], roots=[nvidia])
    assert found.headers == TORCH_HEADERS and found.include_dirs == (str(nvidia / "cu13/include"),)
    assert found.links == {"cufft": str(nvidia / "cu13/lib/libcufft.so.12")}
    assert found.missing_headers == () and found.missing_libraries == ()
    headers = make_header_dir(found, tmp_path / "h")
    names = sorted(p.name for p in headers.iterdir())
    assert names == sorted([*TORCH_HEADERS, "cublas_api.h", "cub"])  # no cuda_runtime.h
    links = make_links(found, tmp_path / "l")
    assert (links / "libcufft.so").resolve() == (nvidia / "cu13/lib/libcufft.so.12").resolve()


def test_nothing_to_add_and_nothing_found(tmp_path: Path) -> None:
    home, nvidia = tree(tmp_path)
    for name in TORCH_HEADERS:
        (home / "include" / name).write_text("")
    assert not completion(str(home), 13, ["cudart"], roots=[nvidia]).needed
    bare = completion(str(tmp_path / "cuda"), 13, ["cublas"], roots=[])
    assert bare.missing_libraries == ("cublas",) and not bare.needed


def test_linked_libraries_reads_both_spellings() -> None:
    assert linked_libraries(["cublas"], ["-lcufft", "-Wl,-rpath,x", "-lcublas"]) == [
        "cublas",
        "cufft",
    ]


def test_an_assembled_root_links_the_toolkit_then_what_the_wheels_add(tmp_path: Path) -> None:
    """One root for every build system: the toolkit's programs, headers and libraries, then
    the wheels' (under link names too); the toolkit's own never shadowed; the same inputs
    give the same root, kept."""
    home, nvidia = tree(tmp_path)
    (home / "bin").mkdir()
    (home / "bin" / "nvcc").write_text("")
    (home / "bin" / "nvcc.profile").write_text("")
    (home / "nvvm" / "bin").mkdir(parents=True)
    (home / "targets" / "x86_64-linux").mkdir(parents=True)
    made = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    assert made is not None
    root = made.root
    assert root.parent == tmp_path / "roots" and root.name.startswith("cuda-13-")
    assert (root / "bin" / "nvcc").resolve() == (home / "bin" / "nvcc").resolve()
    assert (root / "bin" / "nvcc.profile").is_symlink()  # nvcc reads it beside argv[0]
    assert (root / "nvvm").resolve() == (home / "nvvm").resolve()
    # the toolkit's cuda_runtime.h, never the wheel's
    assert (root / "include" / "cuda_runtime.h").read_text() == "// toolkit 13.2\n"
    assert (root / "include" / "cublas_v2.h").read_text() == "// wheel cublas_v2.h\n"
    assert (root / "lib64" / "libcudart.so").resolve() == (home / "lib64" / "libcudart.so")
    assert (root / "lib64" / "libcufft.so").resolve().name == "libcufft.so.12"
    assert (root / "lib").resolve() == (root / "lib64").resolve()
    # nvcc.profile's $(TOP)/targets/<arch>/include and lib resolve into the merged ones
    target = root / "targets" / "x86_64-linux"
    assert (target / "include" / "cublas_v2.h").is_file()
    assert (target / "lib" / "libcufft.so").exists()
    assert "cublas_v2.h" in made.headers and "libcufft.so" in made.libraries
    assert "cuda_runtime.h" not in made.headers
    again = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    made_there = sorted(p.name for p in (tmp_path / "roots").iterdir())
    assert again == made and made_there == [f".{root.name}.lock", root.name]


def test_no_root_is_assembled_when_the_wheels_add_nothing(tmp_path: Path) -> None:
    home, _ = tree(tmp_path)
    (home / "bin").mkdir()
    assert assemble_root(str(home), 13, tmp_path / "roots", roots=[]) is None
    assert not (tmp_path / "roots").exists()


# Several builds at once (processes at a barrier), each assembling the same root; each one's
# filling of a directory is logged, slowly enough for the others to arrive meanwhile.
ASSEMBLE = """
import os, sys, time
from pathlib import Path
import archguard.detect.cudalibs as cudalibs
home, parent, nvidia, gate, log = sys.argv[1:6]
fill = cudalibs._fill_root
def slow_fill(*args):
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\\n")
    time.sleep(0.5)
    fill(*args)
cudalibs._fill_root = slow_fill
(Path(gate) / str(os.getpid())).write_text("")
deadline = time.monotonic() + 60
while len(list(Path(gate).iterdir())) < 3:
    assert time.monotonic() < deadline
    time.sleep(0.01)
made = cudalibs.assemble_root(home, 13, Path(parent), roots=[Path(nvidia)])
print(made.root, (made.root / "include" / "cublas_v2.h").is_file())
"""


def test_builds_assembling_one_root_at_once_make_it_once(tmp_path: Path) -> None:
    """Three processes at once: one assembles the root (the others wait on its lock beside
    it, then find it), all get the same complete root, nothing partial is left."""
    home, nvidia = tree(tmp_path)
    (home / "bin").mkdir()
    gate, log, parent = tmp_path / "gate", tmp_path / "log", tmp_path / "roots"
    gate.mkdir()
    argv = [sys.executable, "-c", ASSEMBLE, str(home), str(parent), str(nvidia), str(gate)]
    procs = [
        subprocess.Popen([*argv, str(log)], stdout=subprocess.PIPE, text=True) for _ in range(3)
    ]
    outs = [proc.communicate(timeout=120)[0].split() for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert len(log.read_text().splitlines()) == 1  # made once
    (root,) = {out[0] for out in outs}
    assert {out[1] for out in outs} == {"True"}
    assert sorted(p.name for p in parent.iterdir()) == [f".{Path(root).name}.lock", Path(root).name]
