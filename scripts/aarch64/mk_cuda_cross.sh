#!/bin/sh
# A CUDA_HOME for cross-compiling to aarch64 with the x86_64 nvcc: bin/ and nvvm/ link to the
# x86_64 toolkit (nvcc takes its profile's TOP from the path it was invoked by, unresolved),
# targets/aarch64-linux (the dir nvcc picks when -ccbin is an aarch64 g++) and include/,
# lib64/ hold the aarch64 cudart from the nvidia-cuda-runtime aarch64 wheel, plus the
# arch-independent crt/ and cccl/ headers of the x86_64 toolkit.
set -e
HOST_CUDA=${HOST_CUDA:-/usr/local/cuda-13.0}
CUDART=${1:?unpacked aarch64 nvidia-cuda-runtime wheel dir (contains nvidia/cu13)}
OUT=${2:?output dir}
rm -rf "$OUT"; mkdir -p "$OUT/bin" "$OUT/targets/aarch64-linux/include" "$OUT/targets/aarch64-linux/lib"
for f in "$HOST_CUDA"/bin/*; do ln -s "$f" "$OUT/bin/"; done
ln -s "$HOST_CUDA/nvvm" "$OUT/nvvm"
inc="$OUT/targets/aarch64-linux/include"
for f in "$HOST_CUDA"/targets/x86_64-linux/include/*; do ln -s "$f" "$inc/"; done
for f in "$CUDART"/nvidia/cu13/include/*; do ln -sfn "$(readlink -f "$f")" "$inc/"; done
for f in "$CUDART"/nvidia/cu13/lib/*; do ln -s "$(readlink -f "$f")" "$OUT/targets/aarch64-linux/lib/"; done
ln -s libcudart.so.13 "$OUT/targets/aarch64-linux/lib/libcudart.so"
ln -s targets/aarch64-linux/include "$OUT/include"
ln -s targets/aarch64-linux/lib "$OUT/lib64"
