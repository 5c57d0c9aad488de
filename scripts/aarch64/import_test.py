import time, platform, sys
t0 = time.time()
import torch
t1 = time.time()
print("python", sys.version.split()[0], platform.machine())
print("torch", torch.__version__, "cuda", torch.version.cuda, "is_available", torch.cuda.is_available())
print(f"import torch: {t1 - t0:.1f}s")
import archguard_example
from archguard_example import _C
t2 = time.time()
print("extension:", _C.__file__)
print("callable scale/fp8_roundtrip:", callable(_C.scale), callable(_C.fp8_roundtrip))
print(f"import extension: {t2 - t1:.2f}s")
try:
    archguard_example.scale(torch.ones(4), 2.0)
except RuntimeError as e:
    print("CPU tensor refused as designed:", str(e).splitlines()[0])
