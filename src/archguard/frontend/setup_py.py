"""What a package's ``setup.py`` text shows, read once before its build: the environment
variables it reads by name, the lines that ask torch about the GPU, and the conditions a
farm's build does not meet that can leave its CUDA extension out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_READS = re.compile(
    r"""(?:os\.environ\.get|os\.getenv|environ\.get|getenv)\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']"""
    r"""|os\.environ\[\s*["']([A-Za-z_][A-Za-z0-9_]*)["']\s*\]"""
    r"""|["']([A-Za-z_][A-Za-z0-9_]*)["']\s+(?:not\s+)?in\s+os\.environ"""
)


# a variable read with a literal default: os.environ.get("GPU_ARCH", "8.0;8.6")
_DEFAULT = re.compile(
    r"""(?:os\.environ\.get|os\.getenv|environ\.get|getenv)\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']"""
    r"""\s*,\s*["']([^"'\n]*)["']"""
)
# a variable whose name says it holds CUDA arches (GPU_ARCH, CUDA_ARCH_LIST, NVCC_ARCHS, ...)
_ARCH_NAME = re.compile(r"(?:^|_)(?:ARCH|ARCHS|ARCH_LIST|ARCHITECTURES?|SMS?)(?:_|$)")
# what archguard sets itself (the list's own variables) or reads as its own settings
_ARCHGUARDS = re.compile(r"^(?:TORCH_CUDA_ARCH_LIST|CUDAARCHS|ARCHGUARD_\w+)$")


# a setup.py asking torch about the GPU (which fails, or says no, on a farm's builder)
_ASKS_GPU = re.compile(r"\bcuda\.(?:is_available|device_count|get_device_(?:capability|name))\(")


@dataclass(frozen=True)
class SetupPy:
    """What a package's ``setup.py`` text shows (as far as it shows it): the environment
    variables it reads by name, the lines that ask torch about the GPU (``setup.py:21``),
    and the conditions a farm's build does not meet that can leave its extension out
    (``setup.py:5: 'build_ext' in sys.argv: ...how to meet it``)."""

    reads: list[str]
    asks_gpu: list[str]
    conditions: list[str] = field(default_factory=list)
    defaults: dict[str, str] = field(default_factory=dict)  # variable -> its literal default
    cmake_arches: bool = False  # it passes CMAKE_CUDA_ARCHITECTURES to CMake itself

    def arch_variables(self) -> list[str]:
        """The variables it reads whose names say they hold CUDA arches, not archguard's."""
        return [n for n in self.reads if _ARCH_NAME.search(n.upper()) and not _ARCHGUARDS.match(n)]


# a setup.py that adds its extension only for a command on its own command line
_ARGV = re.compile(r"""["'](build_ext|bdist_wheel|install|develop|build)["']\s+in\s+sys\.argv""")
# a module it imports only if it can (its extension may depend on it)
_OPTIONAL_IMPORT = re.compile(
    r"^(\s*)try:\s*\n\1\s+(?:import|from)\s+(?P<module>[A-Za-z_][\w.]*)[^\n]*\n"
    r"(?:\1\s+[^\n]*\n)*?\1except\s*\(?[^\n]*(?:ImportError|ModuleNotFoundError)",
    re.M,
)


def _conditions(text: str, name: str) -> list[str]:
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines, 1):
        argv = _ARGV.search(line)
        if argv:
            found.append(
                f"{name}:{number}: {argv[0]!r}: pip's build (PEP 517) never puts "
                f"{argv[1]!r} on setup.py's command line; build it with its own command "
                f"(python setup.py {argv[1]}) or patch that line"
            )
        elif _ASKS_GPU.search(line):
            found.append(
                f"{name}:{number}: it asks torch for a GPU ({line.strip()[:80]!r}), and a "
                "farm has none: set the switch it reads to force the CUDA build, or patch "
                "that line"
            )
    for match in _OPTIONAL_IMPORT.finditer(text):
        module = match["module"]
        if module.split(".")[0] in ("torch", "setuptools", "os", "sys"):
            continue
        number = text.count("\n", 0, match.start()) + 2
        found.append(
            f"{name}:{number}: it imports {module} only if it can: make {module} importable "
            "in the build (the package's build requirements, or the cell)"
        )
    return found


def read_setup_py(setup_py: Path) -> SetupPy:
    try:
        text = setup_py.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return SetupPy([], [])
    names = [next(g for g in m.groups() if g) for m in _READS.finditer(text)]
    asks = [
        f"{setup_py.name}:{number}"
        for number, line in enumerate(text.splitlines(), 1)
        if _ASKS_GPU.search(line)
    ]
    defaults = {m[1]: m[2] for m in _DEFAULT.finditer(text)}
    return SetupPy(
        list(dict.fromkeys(names)),
        asks,
        _conditions(text, setup_py.name),
        defaults,
        "CMAKE_CUDA_ARCHITECTURES" in text,
    )
