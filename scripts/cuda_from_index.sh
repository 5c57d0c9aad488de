#!/usr/bin/env bash
# Assemble a CUDA 13.0 toolkit (nvcc, headers, cudart) from NVIDIA's wheels on the package
# index, for machines with no nvcc. Prints the directory to use as CUDA_HOME.
#
#   export CUDA_HOME="$(scripts/cuda_from_index.sh .cache/cuda-13.0)"
#
# The wheels install into one tree (nvidia/cu13/{bin,include,lib,nvvm}); torch's
# cpp_extension links -lcudart, so the unversioned libcudart.so link is added.
set -euo pipefail
dest=${1:?usage: cuda_from_index.sh DIR}
version=${CUDA_FROM_INDEX_VERSION:-13.0}
py=${PYTHON:-python3}
home="$dest/nvidia/cu13"
if [ ! -x "$home/bin/nvcc" ]; then
  # CCCL (Thrust, CUB, libcu++) has its own release line after 13.2 (13.3.5.0.6 serves the
  # 13.3-13.5 compilers): the toolkit's own minor where the index has it, else the newest 13.x.
  cccl="nvidia-cuda-cccl==$version.*"
  if ! "$py" -m pip download --isolated -q --disable-pip-version-check --no-deps \
      -d "$dest/.probe" "$cccl" >/dev/null 2>&1; then
    cccl="nvidia-cuda-cccl>=13.3,<14"
  fi
  rm -rf "$dest/.probe"
  "$py" -m pip install --isolated -q --disable-pip-version-check --target "$dest" \
    "nvidia-cuda-nvcc==$version.*" "nvidia-cuda-crt==$version.*" "nvidia-nvvm==$version.*" \
    "$cccl" "nvidia-cuda-runtime==$version.*" >&2
fi
[ -e "$home/lib/libcudart.so" ] || ln -s libcudart.so.13 "$home/lib/libcudart.so"
[ -e "$home/lib64" ] || ln -s lib "$home/lib64"
"$home/bin/nvcc" --version >&2
cd "$home" && pwd
