"""What the farm benchmarks share: a manifest of released sdists (each fetched by name and
version from the indexes pip reads, its sha256 checked against the index), one cell of the
installed torch, and one ``archguard farm run`` timed from outside."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# Released sdists no test names, each a torch CUDA extension (issue 47's survey): the build
# switch a package needs where it asks torch for a GPU before it adds its CUDA extension.
SDISTS: dict[str, dict[str, str]] = {
    "spatial-correlation-sampler==0.5.0": {},
    "torchsort==0.1.10": {},
    "chamferdist==1.0.3": {"FORCE_CUDA": "1"},
    "diso==0.1.4": {"FORCE_CUDA": "1"},
    "torch-discounted-cumsum==1.1.0": {},
}


def manifest(root: Path, sdists: list[str], arch: str) -> Path:
    """One cell (this Python, the installed torch's release), the sdists at ``arch``."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    release = metadata.version("torch").split("+")[0]
    lines = [
        "[[cell]]",
        'name = "c"',
        f'python = "{python}"',
        f'interpreter = "{os.path.realpath(sys.executable)}"',
        f'torch = "torch=={release}"',
        'cuda = "13.0"',
    ]
    for spec in sdists:
        name = Path(spec).name if spec.startswith("/") else spec.split("==")[0]
        lines += ["", "[[package]]", f'name = "{name}"', f'source = "{spec}"']
        lines.append(f'config = {{ arch_list = "{arch}" }}')
        env = SDISTS.get(spec, {})
        if env:
            lines.append("env = { " + ", ".join(f'{k} = "{v}"' for k, v in env.items()) + " }")
    path = root / "farm.toml"
    root.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class FarmRun:
    wall: float
    summary: str
    log: str
    returncode: int

    def number(self, pattern: str) -> float | None:
        found = re.search(pattern, self.summary)
        return float(found.group(1)) if found else None

    @property
    def utilization(self) -> float | None:
        return self.number(r"utilization ([\d.]+)")

    @property
    def distance(self) -> float | None:
        return self.number(r"this run took ([\d.]+)x of it")

    def job_seconds(self) -> dict[str, float]:
        """Each job's build time, from the run's own lines (``NAME in c: built in N s``)."""
        return {
            m.group(1): float(m.group(2))
            for m in re.finditer(r"\] (\S+) in c: built in (\d+) s", self.log)
        }


def farm_run(manifest_path: Path, site: Path, env: dict[str, str], *args: str) -> FarmRun:
    argv = [sys.executable, "-m", "archguard", "farm", "run", str(manifest_path), "-o", str(site)]
    started = time.monotonic()
    proc = subprocess.run([*argv, *args], capture_output=True, text=True, env=env, check=False)
    return FarmRun(time.monotonic() - started, proc.stdout, proc.stderr, proc.returncode)


def base_env(**extra: str) -> dict[str, str]:
    """The caller's environment without archguard's settings, uv on PATH, no GPU."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHGUARD_")}
    for name in ("MAX_JOBS", "NVCC_THREADS", "TORCH_CUDA_ARCH_LIST", "MAKEFLAGS"):
        env.pop(name, None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("CUDA_HOME", "/usr/local/cuda")
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra)
    return env


def prewarm(manifest_path: Path, cache: Path) -> None:
    """The cells' environments made in ``cache`` before anything is timed."""
    os.environ["ARCHGUARD_CACHE_DIR"] = str(cache)
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    from archguard.farm.envs import cell_venv
    from archguard.farm.families import load_farm

    farm = load_farm(manifest_path)
    started = time.monotonic()
    for cell in farm.cells:
        cell_venv(cell, cache / "prewarm-site")
    print(f"cells' environments made in {time.monotonic() - started:.0f} s (not timed)")


TREE_KERNEL = """\
#include <torch/extension.h>

__global__ void scale_kernel(float* x, float a, int64_t n) {{
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + {n};
}}

torch::Tensor scale(torch::Tensor x, double a) {{
  auto y = x.contiguous().clone();
  int64_t n = y.numel();
  scale_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), (float)a, n);
  return y;
}}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ m.def("scale", &scale); }}
"""


def tree_packages(root: Path, count: int) -> list[str]:
    """``count`` small tree packages like the example (one ``.cu`` with torch's headers, no
    ``--threads`` of their own): the paths a manifest's ``source`` takes."""
    out = []
    for n in range(count):
        tree = root / "src" / f"small{n}"
        tree.mkdir(parents=True, exist_ok=True)
        (tree / "ops.cu").write_text(TREE_KERNEL.format(n=n))
        (tree / "setup.py").write_text(
            "from setuptools import setup\n"
            "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
            f"setup(name='small{n}', version='1.0', ext_modules=[CUDAExtension("
            f"'small{n}._C', ['ops.cu'])], cmdclass={{'build_ext': BuildExtension}})\n"
        )
        (tree / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=64", "torch", "torch-archguard"]\n'
            'build-backend = "setuptools.build_meta"\n'
        )
        out.append(str(tree))
    return out
