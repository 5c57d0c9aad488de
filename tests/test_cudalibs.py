"""archguard.detect.cudalibs: what an nvcc-only toolkit lacks for torch extensions, and
where torch's NVIDIA wheels have it. Directory trees laid out as the real ones are
(``site-packages/nvidia/cu13/{include,lib}``, versioned ``libcufft.so.12``); the real
toolkit and wheels are exercised by the real-package builds (test_real_packages)."""

from __future__ import annotations

from pathlib import Path

from archguard.detect.cudalibs import (
    TORCH_HEADERS,
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
