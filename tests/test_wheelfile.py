"""core.wheelfile: wheel file names (plain, PEP 825 variant, odd and refused) and core
metadata (odd, broken, hostile) read by ``packaging``, the way archguard's readers read them
before (the email parser's values), and METADATA rewritten with only its version and torch
requirements changed."""

from __future__ import annotations

import zipfile
from email.parser import BytesParser, HeaderParser
from email.policy import compat32
from pathlib import Path

import pytest
from packaging.tags import Tag
from packaging.version import Version

from archguard.core.wheelfile import (
    CoreMetadata,
    InvalidWheelFilename,
    parse_metadata,
    parse_wheel_name,
    rewrite_metadata,
    split_variant,
    variants_json_project,
)

# name -> (project, version, build, python-abi, platforms, variant)
Expected = tuple[str, str, tuple[()] | tuple[int, str], str, tuple[str, ...], str | None]
NAMES: list[tuple[str, Expected]]
NAMES = sorted(
    [
        ("x-1.0-py3-none-any.whl", ("x", "1.0", (), "py3-none", ("any",), None)),
        (
            "Flash_Attn-2.8.3+cu130torch2.13-cp311-cp311-linux_x86_64.whl",
            ("flash-attn", "2.8.3+cu130torch2.13", (), "cp311-cp311", ("linux_x86_64",), None),
        ),
        (
            "vext-1.0+cu130-1build-cp310-abi3-manylinux_2_28_x86_64.manylinux2014_x86_64.whl",
            (
                "vext",
                "1.0+cu130",
                (1, "build"),
                "cp310-abi3",
                ("manylinux_2_28_x86_64", "manylinux2014_x86_64"),
                None,
            ),
        ),
        (
            "x-1.0-cp310.cp311-cp310.cp311-linux_aarch64.whl",
            ("x", "1.0", (), "cp310.cp311-cp310.cp311", ("linux_aarch64",), None),
        ),
        (
            "torch-2.13.0+cu130-cp314-cp314t-manylinux_2_28_aarch64.whl",
            ("torch", "2.13.0+cu130", (), "cp314-cp314t", ("manylinux_2_28_aarch64",), None),
        ),
        # PEP 825 variants as archguard writes them: the label after the platform
        (
            "x-1.0-cp311-cp311-linux_x86_64-a1b2c3d4.whl",
            ("x", "1.0", (), "cp311-cp311", ("linux_x86_64",), "a1b2c3d4"),
        ),
        (
            "x-1.0-7-cp311-cp311-linux_x86_64-sm_80.cu13.whl",
            ("x", "1.0", (7, ""), "cp311-cp311", ("linux_x86_64",), "sm_80.cu13"),
        ),
        (
            "zope.interface-6.0-py3-none-any.whl",
            ("zope-interface", "6.0", (), "py3-none", ("any",), None),
        ),
        (
            "x-1.0.post1.dev2-py2.py3-none-any.whl",
            ("x", "1.0.post1.dev2", (), "py2.py3-none", ("any",), None),
        ),
        ("x-01.00-py3-none-any.whl", ("x", "1.0", (), "py3-none", ("any",), None)),
        # no build tag (it starts with a digit): a variant of "x-1.0-build-py3-none", as
        # variantlib reads it too (the name is ambiguous; both read it one way)
        ("x-1.0-build-py3-none-any.whl", ("x", "1.0", (), "build-py3", ("none",), "any")),
    ]
)

# Names that are no wheel's: each refused with packaging's own error, quoting the name.
REFUSED = sorted(
    [
        "",
        ".whl",
        "-.whl",
        "x-1.0.whl",  # too few parts
        "x-1.0-py3-none-any.zip",  # not .whl
        "x-1.0-py3-none-any",  # no suffix, however wheel-like
        "x-notaversion-py3-none-any.whl",
        "x__y-1.0-py3-none-any.whl",  # a name PEP 427 escapes never write
        "x-1.0-py3-none-any-a-b.whl",  # too many parts even for a variant
        "x-1.0-cp311-cp311-linux_x86_64-ABC.whl",  # a variant label is lower case
        "x-1.0-cp311-cp311-linux_x86_64-.whl",  # an empty label
        "x-1.0-cp311-cp311-linux_x86_64-a/b.whl",
        "x-1.0-variants.json",
        "x-1.0-1-2-cp311-cp311-linux_x86_64.whl",
        "x-1.0--py3-none-any.whl",
        "x y-1.0-py3-none-any.whl",
    ]
)


@pytest.mark.parametrize(("name", "expected"), NAMES)
def test_a_wheel_name_is_read_by_packaging_and_kept_as_written(
    name: str, expected: Expected
) -> None:
    project, version, build, python_abi, platforms, variant = expected
    wheel = parse_wheel_name(name)
    assert (wheel.project, wheel.version, wheel.build) == (project, Version(version), build)
    assert (wheel.python_abi, wheel.platforms, wheel.variant) == (python_abi, platforms, variant)
    assert wheel.filename == name  # every segment as written
    assert wheel.tag_triple == f"{python_abi}-{'.'.join(platforms)}"
    assert wheel.platform == ".".join(platforms)
    assert split_variant(name) == ((wheel.plain, variant) if variant else (name, None))


@pytest.mark.parametrize("name", [n for n, e in NAMES if e[5] is None])
def test_the_hand_splits_it_replaced_read_every_plain_name_alike(name: str) -> None:
    """frontend/finish's python-abi, binaries/repair's platform tags, binaries/relabel's
    kept segments: what each split by hand before, read the same from the parsed name."""
    wheel = parse_wheel_name(name)
    pieces = name[: -len(".whl")].split("-")
    assert wheel.python_abi == "-".join(pieces[-3:-1])
    assert list(wheel.platforms) == pieces[-1].split(".")
    relabelled = wheel.renamed(version="9.9+x").filename
    build = [pieces[2]] if wheel.build else []
    assert relabelled == "-".join([pieces[0], "9.9+x", *build, *pieces[-3:]]) + ".whl"


@pytest.mark.parametrize("name", REFUSED)
def test_a_name_that_is_no_wheels_is_refused_with_packagings_error(name: str) -> None:
    with pytest.raises(InvalidWheelFilename) as err:
        parse_wheel_name(name)
    assert isinstance(err.value, ValueError)  # the callers' except ValueError still holds
    assert split_variant(name) == (name, None)  # never an error: not a variant


def test_the_tags_are_packagings_own() -> None:
    wheel = parse_wheel_name("x-1.0-cp310.cp311-abi3-linux_x86_64.manylinux_2_28_x86_64.whl")
    assert Tag("cp311", "abi3", "manylinux_2_28_x86_64") in wheel.tags
    assert len(wheel.tags) == 4


def test_a_renamed_wheel_changes_only_what_is_asked() -> None:
    wheel = parse_wheel_name("Tiny_Pkg-1.0+cu130-3x-cp311-cp311-linux_x86_64.whl")
    relabelled = wheel.renamed(distribution="tiny_pkg", version=Version("1.0+cu130torch2.13"))
    assert relabelled.filename == "tiny_pkg-1.0+cu130torch2.13-3x-cp311-cp311-linux_x86_64.whl"
    assert relabelled.build == (3, "x") and relabelled.tags == wheel.tags
    retagged = wheel.renamed(platform="manylinux_2_28_x86_64")
    assert retagged.filename == "Tiny_Pkg-1.0+cu130-3x-cp311-cp311-manylinux_2_28_x86_64.whl"
    variant = parse_wheel_name("x-1.0-cp311-cp311-linux_x86_64-a1b2c3d4.whl")
    assert variant.renamed(version="1.0+cu130").filename == (
        "x-1.0+cu130-cp311-cp311-linux_x86_64-a1b2c3d4.whl"
    )
    with pytest.raises(InvalidWheelFilename):
        wheel.renamed(version="not-a-version")
    with pytest.raises(InvalidWheelFilename):
        wheel.renamed(distribution="a__b")


def test_a_versions_variants_json_is_named_from_its_wheels() -> None:
    wheel = parse_wheel_name("vext-1.0+cu130-cp311-cp311-linux_x86_64-a1b2c3d4.whl")
    assert wheel.variants_json == "vext-1.0+cu130-variants.json"
    assert variants_json_project(wheel.variants_json) == "vext"


def test_the_farms_names_are_the_modules() -> None:
    """farm.wheelmeta's readers (which farm/page and farm/sitejson import) read through
    this module."""
    from archguard.farm.wheelmeta import VARIANTS, platform_of

    assert VARIANTS == "-variants.json"
    assert platform_of("x-1.0-cp311-cp311-manylinux_2_28_x86_64-a1b2c3d4.whl") == (
        "manylinux_2_28_x86_64"
    )
    assert platform_of("x-1.0-py3-none-manylinux_2_28_x86_64.manylinux2014_x86_64.whl") == (
        "manylinux_2_28_x86_64.manylinux2014_x86_64"
    )
    assert platform_of("x-1.0-variants.json") == ""


def test_variantlibs_names_are_read_alike() -> None:
    """The variant copy ``archguard variant`` writes (variantlib's label after the plain
    name) reads back as that plain wheel and label; variantlib agrees on every name here."""
    variantlib = pytest.importorskip("variantlib")
    from variantlib.api import VariantDescription, VariantProperty
    from variantlib.constants import VALIDATION_WHEEL_NAME_REGEX

    from archguard.user.variant import NAMESPACE

    assert variantlib is not None
    label = VariantDescription(properties=[VariantProperty(NAMESPACE, "cuda_arch", "8.0")]).label
    plain = "vext-1.0+cu130-cp311-cp311-linux_x86_64.whl"
    written = f"{plain.removesuffix('.whl')}-{label}.whl"
    assert split_variant(written) == (plain, label)
    for name, _ in NAMES:
        match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(name)
        assert match is not None, name
        wheel = parse_wheel_name(name)
        assert match["variant_label"] == wheel.variant, name
        assert f"{match['base_wheel_name']}.whl" == wheel.plain, name


# --- core metadata -------------------------------------------------------------------------

BASE = "Metadata-Version: 2.1\nName: tiny-pkg\nVersion: 1.0\n"

# Odd METADATA seen in real wheels, or worse: each read without an error, as the email
# parser read it (the first of a field written twice; every Requires-Dist).
TEXTS = sorted(
    [
        BASE,
        "",
        "\n\n\n",
        "no header at all, a body only\n",
        BASE + "Requires-Python: >=3.9\nRequires-Python: >=3.10\n",  # twice: the first
        BASE + "Requires-Python:\n",  # said, empty
        BASE + "Requires-Python: >=3.9, <4 \n",
        BASE + "Requires-Python: >= 3.9 ; garbage ((\n",  # not a specifier: kept as text
        BASE + "Requires-Dist: torch>=2.0\nRequires-Dist: numpy\nRequires-Dist: not a req (((\n",
        BASE + "requires-dist: lower-case\nREQUIRES-DIST: upper-case\n",
        BASE + "Requires-Dist: torch;\n sys_platform == 'linux'\n",  # a folded line
        BASE + "Name: twice\nVersion: 2.0\n",  # single-use fields written twice
        "Name: only-a-name\n",
        BASE + "Requires-Dist: caf\u00e9 @ https://example.invalid/\u00e9.whl\n",
        BASE + "Content-Type: multipart/mixed; boundary=XX\n\n--XX\n\nbody\n--XX--\n",
        BASE + "Description: one\nProject-URL: no comma here\nKeywords: a, b\n",
        BASE + "Dynamic: nonsense\nLicense-File: \nMetadata-Version: 9.9\n",
        BASE + "Platform: \x00\x01\n",
        BASE + "\nFrom the start of a line.\nRequires-Dist: in-the-body\n",
        "\ufeff" + BASE + "Requires-Python: >=3.8\n",
        BASE.replace("\n", "\r\n") + "Requires-Python: >=3.8\r\n\r\nbody\r\n",
        BASE + "Bad Header Name: x\nRequires-Python: >=3.11\n",
        BASE + ":\nRequires-Python: >=3.11\n",
        BASE + " leading continuation\nRequires-Python: >=3.11\n",
        BASE + "X" * 10000 + ": " + "y" * 10000 + "\nRequires-Dist: after-a-long-one\n",
    ]
)


def _as_before(text: str) -> CoreMetadata:
    """What the readers before read of ``text`` with the email parser."""
    headers = HeaderParser().parsestr(text)

    def first(field: str) -> str | None:
        value = headers.get(field)
        return None if value is None else str(value)

    return CoreMetadata(
        first("Name"),
        first("Version"),
        first("Requires-Python"),
        tuple(str(r) for r in headers.get_all("Requires-Dist") or ()),
    )


@pytest.mark.parametrize("text", TEXTS)
def test_odd_metadata_reads_as_the_email_parser_read_it(text: str) -> None:
    assert parse_metadata(text) == _as_before(text)
    data = text.encode("utf-8")
    if data.isascii():  # bytes as the store holds them: as BytesParser read them
        assert parse_metadata(data) == _as_before(text)


def test_metadata_that_is_not_utf8_is_read_without_an_error() -> None:
    data = (BASE + "Author: M\xfcller\nRequires-Python: >=3.9\n").encode("latin-1")
    data += b"Requires-Dist: \xff\xfe\nRequires-Dist: numpy\n\n\xff body \x80\n"
    read = parse_metadata(data)
    assert (read.name, read.version, read.requires_python) == ("tiny-pkg", "1.0", ">=3.9")
    assert read.requires_dist[1] == "numpy" and len(read.requires_dist) == 2


def test_the_fields_read_are_the_ones_said() -> None:
    read = parse_metadata(
        BASE + "Requires-Python: >=3.10\nRequires-Dist: torch>=2.13\nRequires-Dist: numpy\n"
    )
    assert read == CoreMetadata("tiny-pkg", "1.0", ">=3.10", ("torch>=2.13", "numpy"))
    assert parse_metadata("") == CoreMetadata(None, None, None, ())


METADATA = (
    "Metadata-Version: 2.1\n"
    "Name: tiny-pkg\n"
    "Version: 1.0+cu130\n"
    "Summary: A summary long enough that a generator folding at 78 columns would fold it, "
    "which this one never does\n"
    "Author: J\u00fcrgen M\u00fcller\n"
    "Requires-Dist: torch>=2.0\n"
    "Requires-Dist: numpy\n"
    "Requires-Dist: torch; sys_platform == 'win32'\n"
    "Classifier: Programming Language :: Python\n"
    "\n"
    "Description, with a line\n"
    "From the start of a line.\n"
    "and UTF-8: \u2713\n"
).encode()


def test_metadata_rewritten_changes_its_version_and_requirements_only() -> None:
    out = rewrite_metadata(
        METADATA,
        version="1.0+cu130torch2.13",
        requires_dist=["torch>=2.13,<2.14", "numpy", "torch; sys_platform == 'win32'"],
    )
    expected = (
        METADATA.replace(b"Version: 1.0+cu130\n", b"Version: 1.0+cu130torch2.13\n")
        .replace(b"Requires-Dist: torch>=2.0\nRequires-Dist: numpy\n", b"")
        .replace(b"Requires-Dist: torch; sys_platform == 'win32'\n", b"")
        .replace(
            b"Classifier: Programming Language :: Python\n",
            b"Classifier: Programming Language :: Python\n"
            b"Requires-Dist: torch>=2.13,<2.14\nRequires-Dist: numpy\n"
            b"Requires-Dist: torch; sys_platform == 'win32'\n",
        )
    )
    assert out == expected
    assert b">From" not in out and "J\u00fcrgen".encode() in out
    again = parse_metadata(out)
    assert again.version == "1.0+cu130torch2.13"
    assert again.requires_dist[0] == "torch>=2.13,<2.14"


def test_metadata_rewritten_keeps_its_requirements_in_place_unless_given() -> None:
    out = rewrite_metadata(METADATA, version="2.0")
    assert out == METADATA.replace(b"Version: 1.0+cu130\n", b"Version: 2.0\n")
    unversioned = rewrite_metadata(b"Name: x\n\nbody\n", version="1.0")
    assert parse_metadata(unversioned).version == "1.0"
    utf8 = rewrite_metadata(METADATA, version="1", requires_dist=["caf\u00e9 @ file:///\u00e9"])
    assert "Requires-Dist: caf\u00e9 @ file:///\u00e9\n".encode() in utf8  # never =?utf-8?


def test_the_email_parser_is_left_to_this_module() -> None:
    """No reader of archguard parses a METADATA or splits a wheel's name itself."""
    src = Path(__file__).parent.parent / "src" / "archguard"
    for path in sorted(src.rglob("*.py")):
        if path.name == "wheelfile.py":
            continue
        text = path.read_text(encoding="utf-8")
        for needle in ("email.parser", "HeaderParser", "message_from_", "BytesParser"):
            assert needle not in text, f"{path.relative_to(src)}: {needle}"


def test_a_stored_wheels_metadata_is_read_as_before(tmp_path: Path) -> None:
    from archguard.farm.wheelmeta import metadata_of

    site, name, sha = tmp_path / "site", "tiny_pkg-1.0-py3-none-any.whl", "ab" * 32
    wheel = site / "wheels" / sha / name
    wheel.parent.mkdir(parents=True)
    data = METADATA.replace(b"Name: tiny-pkg\n", b"Name: tiny-pkg\nRequires-Python:  >=3.10 \n")
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("tiny_pkg-1.0.dist-info/METADATA", data)
    meta = metadata_of(site, name, sha)
    assert meta is not None
    message = BytesParser(policy=compat32).parsebytes(data)
    assert meta.requires_python == ">=3.10"
    assert meta.requires == tuple(message.get_all("Requires-Dist") or ())


def test_a_sources_release_and_requires_python_are_read_from_pkg_info(tmp_path: Path) -> None:
    from archguard.farm.requires import requires_python
    from archguard.frontend.release import Release, declared_release, not_the_release

    tree = tmp_path / "src"
    tree.mkdir()
    (tree / "PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: Scm_Pkg\nVersion: 1.2.3\n"
        "Requires-Python: >=3.12\nRequires-Python: >=3.8\nDynamic: bogus\n\nbody\n"
    )
    assert declared_release(tree) == Release("Scm_Pkg", "1.2.3", "PKG-INFO")
    found = requires_python(str(tree))
    assert found is not None and str(found[0]) == ">=3.12" and found[1] == "its PKG-INFO"
    release = Release("Scm_Pkg", "1.2.3", "PKG-INFO")
    same = tmp_path / "scm_pkg-1.2.3+cu130torch2.13-cp311-cp311-linux_x86_64.whl"
    assert not_the_release(same, release, tree) is None
    other = tmp_path / "scm_pkg-0.0.0-cp311-cp311-linux_x86_64.whl"
    why = not_the_release(other, release, tree)
    assert why is not None and "it is scm-pkg 0.0.0" in why
    (tree / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: only-a-name\n")
    assert declared_release(tree) is None
