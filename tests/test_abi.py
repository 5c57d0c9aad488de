"""The wheel's contract (issue 31), the parts that need no build: the ELF reader on real
binaries (this interpreter's own extension modules, and the real CUDA build of torch where it
is installed), the rules of core.abi as data, the relabelled wheel as pip installs it, and
``archguard abi`` against the installed torch. The predictions checked by real imports under
two real torch builds are in tests/test_abi_torch.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from archguard.core.abi import BinaryAbi, TorchExports, cell_label, check, target_from_define
from archguard.core.cuda import CudaVersion
from archguard.detect.abi import shared_objects, torch_exports, torch_imports
from archguard.detect.elf import read_dynamic
from archguard.errors import BinaryReadError
from realtools import needs_cuda_torch, run_main, torch_dir

CU130 = CudaVersion(13, 0)


def extension_module() -> Path:
    """A real CPython extension module of this interpreter."""
    import _json

    return Path(_json.__file__)


def real_binaries() -> list[Path]:
    """Real shared objects on this machine: a CPython extension module, libyaml's binding
    (glibc-versioned imports), zlib (versioned exports), and the C++ runtime."""
    import yaml._yaml

    found = [extension_module(), Path(str(yaml._yaml.__file__))]
    for name in ("libz.so.1", "libstdc++.so.6"):
        found += sorted(Path("/usr/lib/x86_64-linux-gnu").glob(name))[:1]
    return found


def readelf(path: Path) -> tuple[set[tuple[str, str | None]], set[str]]:
    """binutils' view: (undefined (name, version)), defined exported names)."""
    out = subprocess.run(
        ["readelf", "--dyn-syms", "-W", str(path)], capture_output=True, text=True, check=True
    ).stdout
    imports: set[tuple[str, str | None]] = set()
    exports: set[str] = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 8 or not fields[0].rstrip(":").isdigit() or fields[0] == "0:":
            continue
        bind, vis, ndx, name = fields[4], fields[5], fields[6], fields[7]
        symbol, _, tail = name.partition("@")
        if ndx == "UND":
            imports.add((symbol, tail.lstrip("@") or None))
        elif bind in ("GLOBAL", "WEAK", "UNIQUE") and vis in ("DEFAULT", "PROTECTED"):
            exports.add(symbol)
    return imports, exports


@pytest.mark.skipif(shutil.which("readelf") is None, reason="no readelf (binutils) to compare with")
def test_the_elf_reader_agrees_with_readelf_on_real_binaries() -> None:
    binaries = real_binaries()
    assert len(binaries) >= 3
    for path in binaries:
        dynamic = read_dynamic(path)
        imports, exports = readelf(path)
        assert {(i.name, i.version) for i in dynamic.imports} == imports, path
        assert dynamic.exports == exports, path
    cpp = read_dynamic(binaries[-1])
    assert cpp.highest("GLIBC_") is not None and "libc.so.6" in cpp.needed


def test_not_elf_is_one_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "notes.so"
    bad.write_text("hello")
    with pytest.raises(BinaryReadError, match=r"notes\.so is not an ELF shared object"):
        read_dynamic(bad)
    with pytest.raises(BinaryReadError, match="not a readable wheel"):
        list(shared_objects(tmp_path / "x.whl"))


def test_versions_compare_number_by_number() -> None:
    from archguard.detect.elf import Dynamic, Import

    d = Dynamic(
        (), (Import("a", "GLIBC_2.9", False), Import("b", "GLIBC_2.17", False)), frozenset()
    )
    assert d.highest("GLIBC_") == "GLIBC_2.17"
    assert d.highest("GLIBCXX_") is None


def test_torch_symbols_by_name_when_the_torch_at_hand_lacks_them() -> None:
    from archguard.detect.elf import Dynamic, Import

    gone = "_ZN2at17toDLPackNonOwningERKNS_6TensorEP8DLTensor"
    d = Dynamic(
        ("libc10.so",),
        (
            Import(gone, None, False),
            Import("_ZN3c1019UndefinedTensorImpl10_singletonE", None, False),
            Import("aoti_torch_empty_strided", None, False),
            Import("memcpy", "GLIBC_2.14", False),
            Import("_ZNSt6thread6_StateD2Ev", "GLIBCXX_3.4.22", False),
            Import("my_own_helper", None, False),
            Import("_ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1Ev", None, True),
            Import("_ZNKRSt7__cxx1115basic_stringbufIcSt11char_traitsIcESaIcEE3strEv", None, True),
        ),
        frozenset(),
    )
    assert torch_imports(d) == (
        "_ZN2at17toDLPackNonOwningERKNS_6TensorEP8DLTensor",
        "_ZN3c1019UndefinedTensorImpl10_singletonE",
        "aoti_torch_empty_strided",
    )
    # a symbol torch exports counts, except the C++ standard library's template instances
    std = "_ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1Ev"
    ref = "_ZNKRSt7__cxx1115basic_stringbufIcSt11char_traitsIcESaIcEE3strEv"  # a & member
    exports = frozenset({"my_own_helper", std, ref})
    assert torch_imports(d, exports)[-1] == "my_own_helper" and not {std, ref} & set(
        torch_imports(d, exports)
    )


@pytest.mark.parametrize(
    ("value", "target"),
    [
        ("0x020a000000000000", "2.10"),
        ("0x0209000000000000ULL", "2.9"),
        (str((2 << 56) | (13 << 48)), "2.13"),
        ("TORCH_VERSION_2_10_0", None),
        ("0", None),
    ],
)
def test_torch_target_version_as_the_headers_define_it(value: str, target: str | None) -> None:
    assert target_from_define(value) == target


def abi(
    symbols: tuple[str, ...], needed: tuple[str, ...] = (), target: str | None = None
) -> BinaryAbi:
    return BinaryAbi("x.so", symbols, needed, "full", target_version=target)


def test_labels_and_pins_per_kind_of_binding() -> None:
    cxx = abi(("_ZN2at6TensorD1Ev",), ("libc10.so", "libcudart.so.13"))
    stable = abi(("aoti_torch_empty_strided", "torch_library_impl"), target="2.10")
    older = abi(("aoti_torch_get_device_type",), target="2.9")
    plain = abi((), ("libc.so.6",))
    assert (cxx.kind, stable.kind, plain.kind) == ("c++", "stable", "none")
    assert cxx.cuda_runtime == "libcudart.so.13" and cxx.cuda_major == 13
    label = cell_label([cxx, stable], CU130, "2.13.0+cu130")
    assert label is not None and (label.label, label.pin) == ("cu130torch2.13", "torch>=2.13,<2.14")
    label = cell_label([stable, older, plain], CU130, "2.13.0+cu130")
    assert label is not None and (label.label, label.pin) == ("cu130", "torch>=2.10")
    untargeted = cell_label([abi(("torch_library_impl",))], CU130, "2.13.0+cu130")
    assert untargeted is not None and untargeted.pin == "torch>=2.13"  # the build's own
    alone = cell_label([plain], CU130, "2.13.0")  # a CUDA extension that never calls torch
    assert alone is not None and (alone.label, alone.pin) == ("cu130", "")
    assert cell_label([], CU130, "2.13.0") is None


def test_a_missing_symbol_proves_the_failure_a_weak_one_does_not() -> None:
    torch = TorchExports("2.14.1+cu130", CU130, "t", frozenset({"_ZN2at6TensorD1Ev"}))
    binary = abi(("_ZN2at6TensorD1Ev", "_ZN2at3fooEv", "_ZN2at3barEv"))
    verdict = check(binary, torch, weak={"_ZN2at3barEv"})
    assert verdict.missing == ("_ZN2at3fooEv",) and not verdict.imports
    assert check(abi(("_ZN2at6TensorD1Ev",)), torch).imports


def build_pure_wheel(tmp: Path, version: str, requires: list[str]) -> Path:
    src = tmp / "src"
    (src / "tiny").mkdir(parents=True)
    (src / "tiny" / "__init__.py").write_text("X = 1\n")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "tiny-pkg"\nversion = "{version}"\n'
        f"dependencies = {json.dumps(requires)}\n"
        'readme = {text = "From the start of a line.", content-type = "text/plain"}\n'
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(src),
            "-w",
            str(tmp / "out"),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp / "out").glob("*.whl")
    return wheel


def test_relabel_keeps_one_label_and_a_consistent_wheel(tmp_path: Path) -> None:
    from archguard.binaries.relabel import relabel

    wheel = build_pure_wheel(
        tmp_path, "1.0+cu130", ["torch>=2.0", "numpy", "torch; sys_platform == 'win32'"]
    )
    out = relabel(wheel, "cu130torch2.13", "torch>=2.13,<2.14")
    assert out.name == "tiny_pkg-1.0+cu130torch2.13-py3-none-any.whl" and not wheel.exists()
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        metadata = zf.read("tiny_pkg-1.0+cu130torch2.13.dist-info/METADATA").decode()
        record = zf.read("tiny_pkg-1.0+cu130torch2.13.dist-info/RECORD").decode()
    assert all(n.startswith(("tiny/", "tiny_pkg-1.0+cu130torch2.13.dist-info/")) for n in names)
    assert "Version: 1.0+cu130torch2.13\n" in metadata
    assert "\nFrom the start of a line." in metadata  # not mangled to ">From"
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist")]
    assert requires == [
        "Requires-Dist: torch>=2.13,<2.14",  # in place of the unpinned one
        "Requires-Dist: numpy",
        'Requires-Dist: torch; sys_platform == "win32"',  # a marker's requirement is its own
    ]
    assert all(n in record for n in names if not n.endswith("RECORD"))
    # pip itself installs it, and reads the new version and requirement
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    assert (target / "tiny_pkg-1.0+cu130torch2.13.dist-info").is_dir()


def test_a_bad_label_template_is_one_error() -> None:
    from archguard.binaries.relabel import check_label
    from archguard.errors import ConfigError

    assert check_label("CU130Torch2.13", "x") == "cu130torch2.13"
    with pytest.raises(ConfigError, match="'cu130-torch' is not a local version label"):
        check_label("cu130-torch", "local_version")


@needs_cuda_torch
def test_the_installed_torch_resolves_its_own_python_binding(tmp_path: Path) -> None:
    """torch's own libtorch_python.so, read as an extension would be: thousands of torch C++
    symbols, the full CPython API, CUDA 13's runtime; every symbol exported by its torch."""
    torch = torch_exports(torch_dir(), cache=tmp_path / "cache")
    assert len(torch.symbols) > 50_000 and torch.version.startswith("2.")
    again = torch_exports(torch_dir(), cache=tmp_path / "cache")  # from the cache
    assert again.symbols == torch.symbols and list((tmp_path / "cache").glob("*.json.gz"))
    lib = torch_dir() / "lib" / "libtorch_python.so"
    proc = run_main("abi", str(lib), "--torch", str(torch_dir()), "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (binary,) = json.loads(proc.stdout)["binaries"]
    assert binary["kind"] == "c++" and binary["torch_symbols"] > 1000
    assert binary["cuda_runtime"] == "libcudart.so.13" and binary["python_api"] == "full"
    assert binary["verdicts"][0]["imports"] is True
    assert sysconfig.get_config_var("SOABI")  # (a CPython: the limited API is a question)


def test_abi_refuses_what_is_not_torch(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    proc = run_main("abi", str(extension_module()), "--torch", str(tmp_path), "--format", "json")
    assert proc.returncode == 2
    error = json.loads(proc.stdout)["error"]
    assert (
        error["code"] == "unreadable-binary"
        and "is not a torch package directory" in error["message"]
    )


def test_a_stable_abi3_wheel_serves_later_torches_and_pythons() -> None:
    from archguard.core.abi import serves

    stable = BinaryAbi("x.so", ("torch_library_impl",), (), "limited", target_version="2.10")
    label = cell_label([stable], CU130, "2.13.0+cu130")
    assert label is not None and label.stable
    served = serves(label, [stable], "cp310-abi3")
    assert str(served) == "torch>=2.10 on Python>=3.10"
    assert served is not None and served.as_json() == {"torch": "2.10", "python": "3.10"}
    assert serves(label, [stable], "cp311-cp311") is None  # not abi3: one wheel per Python
    full = BinaryAbi("x.so", ("torch_library_impl",), (), "full", target_version="2.10")
    assert serves(label, [full], "cp310-abi3") is None  # abi3 by name, not by its symbols
    cxx = cell_label([abi(("_ZN2at6TensorD1Ev",))], CU130, "2.13.0")
    assert cxx is not None and serves(cxx, [stable], "cp310-abi3") is None
