#!/usr/bin/env python3
"""Regenerate ``defaults/toolkits.yml`` from real CUDA toolkit binaries.

For every CUDA release in ``PACKAGES`` this script downloads the NVIDIA wheel from the
package index (``pip download --no-deps``), unpacks its ``ptxas`` (and ``nvcc`` where the
wheel carries a full one), and asks the binary itself which targets it accepts:

1. ``ptxas --help`` lists the allowed ``--gpu-name`` values;
2. every listed ``sm_*`` target is confirmed by assembling a minimal kernel for it, and
   every ``compute_*`` target by a parse-only run (``ptxas -arch=compute_XY``), at the
   highest PTX ISA that ptxas reports as current;
3. where the wheel has ``nvcc``, ``nvcc --list-gpu-code`` and ``--list-gpu-arch`` are
   recorded too, so the test suite can check archguard's plain/``a``/``f`` rule
   against them.

Usage::

    python scripts/probe_toolkits.py                  # download, probe, print YAML
    python scripts/probe_toolkits.py --write          # ... and rewrite defaults/toolkits.yml
    python scripts/probe_toolkits.py --cache DIR      # keep downloads in DIR

Needs network access to the package index and about 250 MB of temporary disk.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# CUDA release -> the wheel that carries its ptxas (and, for 13.x, a full nvcc): the latest
# patch release of each minor on the index when its row was added (`pip index versions
# nvidia-cuda-nvcc`); a row's pin changes only with a rerun that means to change it.
PACKAGES: dict[str, str] = {
    "12.4": "nvidia-cuda-nvcc-cu12==12.4.131",
    "12.6": "nvidia-cuda-nvcc-cu12==12.6.85",
    "12.8": "nvidia-cuda-nvcc-cu12==12.8.93",
    "12.9": "nvidia-cuda-nvcc-cu12==12.9.86",
    "13.0": "nvidia-cuda-nvcc==13.0.88",
    "13.1": "nvidia-cuda-nvcc==13.1.115",
    "13.2": "nvidia-cuda-nvcc==13.2.86",
    "13.3": "nvidia-cuda-nvcc==13.3.73",
    "13.4": "nvidia-cuda-nvcc==13.4.92",
    "13.5": "nvidia-cuda-nvcc==13.5.37",
}

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "defaults" / "toolkits.yml"

KERNEL = """.version {isa}
.target {target}
.address_size 64
.visible .entry archguard_probe()
{{
\tret;
}}
"""


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def download(requirement: str, cache: Path) -> Path:
    name, version = requirement.split("==")
    stem = name.replace("-", "_") + "-" + version
    found = sorted(cache.glob(stem + "-*.whl"))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                "-d",
                str(cache),
                requirement,
            ],
            check=True,
        )
        found = sorted(cache.glob(stem + "-*.whl"))
    if not found:
        raise SystemExit(f"pip download {requirement} produced no wheel in {cache}")
    return found[0]


def unpack(wheel: Path, dest: Path) -> dict[str, Path]:
    tools: dict[str, Path] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            base = info.filename.rsplit("/", 1)[-1]
            if "/bin/" in info.filename and base in ("ptxas", "nvcc"):
                target = dest / base
                target.write_bytes(zf.read(info))
                target.chmod(0o755)
                tools[base] = target
    if "ptxas" not in tools:
        raise SystemExit(f"{wheel.name} has no bin/ptxas")
    return tools


def allowed_gpu_names(ptxas: Path) -> list[str]:
    text = run([str(ptxas), "--help"]).stdout
    start = text.index("--gpu-name")
    block = text[start:]
    block = block[block.index("Allowed values") :]
    block = block[: block.index("Default value")] if "Default value" in block else block
    return re.findall(r"'((?:sm|compute)_[0-9]+[af]?)'", block)


def current_isa(ptxas: Path, workdir: Path) -> str:
    probe = workdir / "isa.ptx"
    probe.write_text(KERNEL.format(isa="99.9", target="sm_75"))
    err = run([str(ptxas), "-arch=sm_75", str(probe), "-o", str(workdir / "isa.cubin")]).stderr
    match = re.search(r"current version is '([0-9.]+)'", err)
    if not match:
        raise SystemExit(f"{ptxas}: could not read the current PTX ISA from: {err!r}")
    return match.group(1)


def accepts(ptxas: Path, target: str, isa: str, workdir: Path) -> bool:
    kernel = workdir / f"{target}.ptx"
    sass = target.replace("compute_", "sm_")
    kernel.write_text(KERNEL.format(isa=isa, target=sass))
    out = workdir / f"{target}.cubin"
    return run([str(ptxas), f"-arch={target}", str(kernel), "-o", str(out)]).returncode == 0


def sort_key(target: str) -> tuple[int, int, str]:
    digits = re.search(r"_([0-9]+)([af]?)$", target)
    assert digits
    number = int(digits.group(1))
    return (number // 10, number % 10, digits.group(2))


def probe(cuda: str, requirement: str, cache: Path) -> dict[str, object]:
    wheel = download(requirement, cache)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tools = unpack(wheel, work)
        ptxas = tools["ptxas"]
        version_line = run([str(ptxas), "--version"]).stdout.strip().splitlines()[-2]
        if f"release {cuda}," not in version_line:
            raise SystemExit(f"{requirement}: ptxas says {version_line!r}, expected {cuda}")
        isa = current_isa(ptxas, work)
        names = sorted(set(allowed_gpu_names(ptxas)), key=sort_key)
        cubins = [t for t in names if t.startswith("sm_") and accepts(ptxas, t, isa, work)]
        ptx = [t for t in names if t.startswith("compute_") and accepts(ptxas, t, isa, work)]
        rejected = [t for t in names if t not in cubins and t not in ptx]
        row: dict[str, object] = {
            "source": f"ptxas from the {requirement} wheel ({version_line.strip()})",
            "ptx_isa": isa,
            "cubins": cubins,
            "ptx": ptx,
        }
        if rejected:
            row["listed_but_rejected"] = rejected
        if "nvcc" in tools:
            nvcc = str(tools["nvcc"])
            row["nvcc_list_gpu_code"] = run([nvcc, "--list-gpu-code"]).stdout.split()
            row["nvcc_list_gpu_arch"] = run([nvcc, "--list-gpu-arch"]).stdout.split()
        return row


def render(rows: dict[str, dict[str, object]]) -> str:
    lines = [
        "# What each CUDA toolkit can emit, probed from the real binaries.",
        "# GENERATED by scripts/probe_toolkits.py: do not edit by hand, rerun the script.",
        "# cubins: every sm_ target ptxas --help lists AND assembled a minimal kernel for;",
        "# ptx: every compute_ target ptxas --help lists AND accepted (parse-only).",
        "# nvcc_list_gpu_*: what the wheel's own nvcc lists (13.x wheels carry a full nvcc;",
        "# the 12.x wheels on the package index carry ptxas only).",
        "schema: 1",
        "toolkits:",
    ]
    for cuda, row in rows.items():
        lines.append(f'  "{cuda}":')
        for key, value in row.items():
            if isinstance(value, list):
                lines.append(f"    {key}: [{', '.join(value)}]")
            else:
                lines.append(f'    {key}: "{value}"')
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="directory for downloaded wheels")
    parser.add_argument("--write", action="store_true", help=f"rewrite {OUTPUT}")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or Path(tmp)
        cache.mkdir(parents=True, exist_ok=True)
        rows = {cuda: probe(cuda, req, cache) for cuda, req in PACKAGES.items()}
    text = render(rows)
    if args.write:
        OUTPUT.write_text(text)
        print(f"wrote {OUTPUT}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
