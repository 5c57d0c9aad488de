"""Run by the arm64 Python under qemu: import torch and the cross-built extension, timed."""

import platform
import sys
import time

t0 = time.time()
import torch  # noqa: E402 - timed: its import is the slow part under qemu

t1 = time.time()
print("python", sys.version.split()[0], platform.machine())
print("torch", torch.__version__, "cuda", torch.version.cuda, "is_available",
      torch.cuda.is_available())  # fmt: skip
print(f"import torch: {t1 - t0:.1f}s")
import archguard_example  # noqa: E402 - timed after torch's
from archguard_example import _C  # noqa: E402

t2 = time.time()
print("extension:", _C.__file__)
print("callable scale/fp8_roundtrip:", callable(_C.scale), callable(_C.fp8_roundtrip))
print(f"import extension: {t2 - t1:.2f}s")
try:
    archguard_example.scale(torch.ones(4), 2.0)
except RuntimeError as e:
    print("CPU tensor refused as designed:", str(e).splitlines()[0])
