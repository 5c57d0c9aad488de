#!/usr/bin/env bash
# Cross-build the example torch CUDA extension for aarch64 (manylinux_2_28_aarch64, cp311,
# torch 2.13.0+cu130) on x86_64 Debian 12, two ways:
#   A. direct: x86_64 nvcc (-ccbin aarch64-linux-gnu-g++) + aarch64-linux-gnu-g++ -> out/direct/_C...so
#   B. setuptools: the example's own setup.py (torch BuildExtension) run by an aarch64
#      python3.11 under qemu-user, whose subprocesses (ninja, nvcc, aarch64-linux-gnu-g++)
#      are native x86_64 -> out/*.whl (cp311-cp311-manylinux_2_28_aarch64)
# Usage: [WORK=dir] [TORCH_WHL=wheel] [ROUTE_B=0] scripts/aarch64/cross_build.sh
# (reads the repo's example_package and PyTorch's aarch64 wheel, downloaded into $WORK when
# TORCH_WHL is not given; writes only under $WORK, default .cache/aarch64)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ROUTE_B=${ROUTE_B:-1}
ARCH_GENCODE=(-gencode arch=compute_80,code=sm_80 -gencode arch=compute_110,code=sm_110)
T0=$SECONDS

prep_apt
prep_rootfs
prep_cudart

step "copy the example package"
rm -rf "$WORK/pkg"; cp -r "$PKG_SRC" "$WORK/pkg"; rm -rf "$WORK/pkg/build" "$WORK/pkg/dist"
CSRC=$WORK/pkg/src/archguard_example/csrc
done_step

step "unpack the aarch64 torch wheel (headers + libs for route A)"
if [ ! -e "$WORK/torchwhl/torch/lib/libtorch_python.so" ]; then
  rm -rf "$WORK/torchwhl"; $NICE python3 -m zipfile -e "$TORCH_WHL" "$WORK/torchwhl"
fi
done_step

# ---- Route A: direct commands --------------------------------------------------------
B=$WORK/build-direct; mkdir -p "$B" "$WORK/out/direct"
TI=$WORK/torchwhl/torch
step "A1 nvcc scale.cu, fp8.cu (device: sm_80 + sm_110; host: aarch64-linux-gnu-g++)"
for cu in scale fp8; do
  ( set -x; $NICE "$WORK/cuda-cross/bin/nvcc" -ccbin aarch64-linux-gnu-g++ \
      -c "$CSRC/$cu.cu" -o "$B/$cu.o" -Xcompiler -fPIC -O2 -std=c++20 "${ARCH_GENCODE[@]}" )
done
done_step

step "A2 aarch64-linux-gnu-g++ binding.cpp (torch/extension.h)"
( set -x; $NICE aarch64-linux-gnu-g++ -include "$HERE/glibc228_compat.h" \
    -c "$CSRC/binding.cpp" -o "$B/binding.o" -fPIC -O2 -std=c++20 \
    -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C \
    -I"$TI/include" -I"$TI/include/torch/csrc/api/include" -I"$WORK/cuda-cross/include" \
    -I"$WORK/rootfs/usr/include/python3.11" -I"$WORK/pyinc" )
done_step

step "A3 link"
SO=$WORK/out/direct/_C.cpython-311-aarch64-linux-gnu.so
( set -x; aarch64-linux-gnu-g++ -shared -o "$SO" "$B/binding.o" "$B/scale.o" "$B/fp8.o" \
    -L"$TI/lib" -L"$WORK/cuda-cross/lib64" \
    -lc10 -ltorch -ltorch_cpu -ltorch_python -lcudart -lc10_cuda -ltorch_cuda )
done_step
check_so "$SO" | tee "$WORK/out/direct/check.txt"

# ---- Route B: the package's own setup.py under qemu ----------------------------------
if [ "$ROUTE_B" = 1 ]; then
  prep_site
  step "B setup.py bdist_wheel by aarch64 python3.11 under qemu (native cross tools)"
  # CFLAGS: its -I's come before sysconfig's -I/usr/include/python3.11 (which the native
  # compiler would resolve on the x86_64 host), and -include keeps the glibc floor at 2.17.
  ( cd "$WORK/pkg" && set -x && env CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ \
      CUDA_HOME="$WORK/cuda-cross" TORCH_CUDA_ARCH_LIST="8.0;11.0" MAX_JOBS=1 \
      CFLAGS="-include $HERE/glibc228_compat.h -I$WORK/rootfs/usr/include/python3.11 -I$WORK/pyinc" \
      PYTHONPATH="$WORK/site" $NICE qemu-aarch64-static -L "$WORK/rootfs" "$WORK/rootfs/usr/bin/python3.11" \
      setup.py bdist_wheel --plat-name manylinux_2_28_aarch64 ) >"$WORK/logs/bdist.log" 2>&1 \
    || { tail -30 "$WORK/logs/bdist.log"; exit 1; }
  grep -E '^\[[0-9]/[0-9]\]|^aarch64-linux-gnu-g\+\+ .*-shared' "$WORK/logs/bdist.log" || true
  cp "$WORK"/pkg/dist/*.whl "$WORK/out/"
  done_step
  WHL=$(ls "$WORK"/out/archguard_example-*-cp311-cp311-manylinux_2_28_aarch64.whl)
  echo "wheel: $WHL"; python3 -m zipfile -l "$WHL"
  rm -rf "$WORK/out/whl-unpacked"; python3 -m zipfile -e "$WHL" "$WORK/out/whl-unpacked"
  check_so "$WORK/out/whl-unpacked/archguard_example/_C.cpython-311-aarch64-linux-gnu.so" | tee "$WORK/out/wheel-check.txt"
fi
echo; echo "cross_build.sh total: $((SECONDS - T0))s"
