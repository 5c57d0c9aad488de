# Shared steps of cross_build.sh and qemu_import.sh (sourced, not run).
# Each prep_* step is idempotent: it skips its work when its output is already there.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=${WORK:-$REPO/.cache/aarch64}               # everything is written under here
PKG_SRC=${PKG_SRC:-$REPO/example_package}        # only read (copied to $WORK/pkg)
HOST_CUDA=${HOST_CUDA:-${CUDA_HOME:-/usr/local/cuda-13.0}}  # the x86_64 nvcc 13.x
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
NICE="nice -n 10"
mkdir -p "$WORK/logs" "$WORK/wheels"

# pip (23.x) --platform takes tags literally (no manylinux expansion): list them all.
AARCH_PLATS=()
for v in 28 27 26 25 24 23 22 21 20 19 18 17; do AARCH_PLATS+=(--platform "manylinux_2_${v}_aarch64"); done
AARCH_PLATS+=(--platform manylinux2014_aarch64 --platform linux_aarch64)
PIP_AARCH=(--only-binary :all: "${AARCH_PLATS[@]}" --python-version 3.11 --implementation cp --abi cp311)

# qemu-user without binfmt_misc (not mounted in this container): run aarch64 binaries
# explicitly; -L makes the rootfs the prefix for absolute paths (dynamic loader, libs, and
# the fake /proc/cpuinfo + /sys/devices/system/cpu files from fake_cpu.sh).
PY_AARCH() { qemu-aarch64-static -L "$WORK/rootfs" "$WORK/rootfs/usr/bin/python3.11" "$@"; }

step() { echo; echo "=== $* ($(date +%T))"; STEP_T0=$SECONDS; }
done_step() { echo "--- took $((SECONDS - STEP_T0))s"; }

quiet_pip() { grep -v -e 'WARNING: Location' -e 'Looking in' -e 'notice\]' || true; }

# PyTorch's aarch64 CUDA wheel for cp311 (TORCH_WHL: one already downloaded)
if [ -z "${TORCH_WHL:-}" ]; then
  TORCH_WHL=$(ls "$WORK"/wheels/torch-"$TORCH_VERSION"-cp311-cp311-manylinux_2_28_aarch64.whl 2>/dev/null || true)
  if [ -z "$TORCH_WHL" ]; then
    python3 -m pip download --isolated --no-deps "${PIP_AARCH[@]}" -d "$WORK/wheels" \
      "torch==$TORCH_VERSION" 2>&1 | quiet_pip
    TORCH_WHL=$(ls "$WORK"/wheels/torch-"$TORCH_VERSION"-cp311-cp311-manylinux_2_28_aarch64.whl)
  fi
fi


prep_apt() {
  step "apt: cross g++, qemu-user-static, debootstrap"
  if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64-static >/dev/null \
     || ! command -v debootstrap >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $NICE apt-get install -y -qq \
      g++-aarch64-linux-gnu qemu-user-static debootstrap >"$WORK/logs/apt.log" 2>&1
  fi
  aarch64-linux-gnu-g++ --version | head -1; qemu-aarch64-static --version | head -1
  done_step
}

# arm64 Debian 12 with python3.11 + libpython3.11-dev, no chroot needed: debootstrap's first
# stage (--foreign) only downloads + extracts; the --include'd debs are only downloaded, so
# extract every downloaded deb with dpkg-deb -x (nothing is configured; python needs nothing).
prep_rootfs() {
  step "arm64 rootfs (debootstrap --foreign + dpkg-deb -x)"
  if [ ! -x "$WORK/rootfs/usr/bin/python3.11" ]; then
    rm -rf "$WORK/rootfs"
    $NICE debootstrap --foreign --arch=arm64 --variant=minbase \
      --include=python3.11,libpython3.11-dev,python3.11-venv bookworm "$WORK/rootfs" \
      >"$WORK/logs/debootstrap.log" 2>&1
    for d in "$WORK"/rootfs/var/cache/apt/archives/*.deb; do dpkg-deb -x "$d" "$WORK/rootfs"; done
  fi
  # Python.h's "pyconfig.h" is a wrapper that includes <aarch64-linux-gnu/python3.11/pyconfig.h>:
  # expose only that subdir (not the rootfs's glibc headers) through -I$WORK/pyinc.
  mkdir -p "$WORK/pyinc/aarch64-linux-gnu"
  ln -sfn "$WORK/rootfs/usr/include/aarch64-linux-gnu/python3.11" "$WORK/pyinc/aarch64-linux-gnu/python3.11"
  "$HERE/fake_cpu.sh" "$WORK/rootfs"
  PY_AARCH -c 'import sys, platform; print("arm64 python", sys.version.split()[0], platform.machine())'
  done_step
}

# aarch64 cudart (headers identical to x86_64's; libcudart.so.13 is aarch64) + a CUDA_HOME
# for the cross nvcc.
prep_cudart() {
  step "aarch64 nvidia-cuda-runtime wheel + cuda-cross CUDA_HOME"
  mkdir -p "$WORK/wheels"
  if ! ls "$WORK"/wheels/nvidia_cuda_runtime-13.0.96-*aarch64*.whl >/dev/null 2>&1; then
    python3 -m pip download --no-deps "${PIP_AARCH[@]}" -d "$WORK/wheels" nvidia-cuda-runtime==13.0.96 2>&1 | quiet_pip
  fi
  if [ ! -e "$WORK/cudart-aarch64/nvidia/cu13/lib/libcudart.so.13" ]; then
    rm -rf "$WORK/cudart-aarch64"
    python3 -m zipfile -e "$(ls "$WORK"/wheels/nvidia_cuda_runtime-13.0.96-*aarch64*.whl)" "$WORK/cudart-aarch64"
  fi
  HOST_CUDA=$HOST_CUDA "$HERE/mk_cuda_cross.sh" "$WORK/cudart-aarch64" "$WORK/cuda-cross"
  done_step
}

# x86_64 cuobjdump for the checks (the pip-style nvcc install has none).
prep_cuobjdump() {
  CUOBJDUMP=$(ls "$WORK"/tools/x/nvidia/cu13/bin/cuobjdump 2>/dev/null || true)
  if [ -z "$CUOBJDUMP" ]; then
    mkdir -p "$WORK/tools"
    python3 -m pip download --no-deps --only-binary :all: -d "$WORK/tools" nvidia-cuda-cuobjdump 2>&1 | quiet_pip >"$WORK/logs/cuobjdump-dl.log"
    python3 -m zipfile -e "$(ls "$WORK"/tools/nvidia_cuda_cuobjdump-*x86_64*.whl | head -1)" "$WORK/tools/x" >&2
    CUOBJDUMP=$WORK/tools/x/nvidia/cu13/bin/cuobjdump
    chmod +x "$CUOBJDUMP"
  fi
}

# The aarch64 torch wheel and all its aarch64 deps (resolved by pip for the aarch64 platform),
# unzipped into one site dir (--no-deps "install" by unzip; no .data scripts are needed).
prep_site() {
  step "aarch64 torch + deps: pip download --platform, unzip into site/"
  mkdir -p "$WORK/wheels"
  if [ ! -e "$WORK/site/torch/lib/libtorch_cuda.so" ]; then
    $NICE python3 -m pip download "${PIP_AARCH[@]}" -d "$WORK/wheels" "$TORCH_WHL" \
      >"$WORK/logs/site-download.log" 2>&1 \
      || { quiet_pip <"$WORK/logs/site-download.log" | tail -5; exit 1; }
    rm -rf "$WORK/site"; mkdir -p "$WORK/site"
    for w in "$WORK"/wheels/*.whl; do $NICE python3 -m zipfile -e "$w" "$WORK/site"; done
  fi
  du -sh "$WORK/wheels" "$WORK/site"
  done_step
}

check_so() {  # file, cubins/PTX, glibc/libstdc++ floors of one .so
  local so=$1
  prep_cuobjdump
  echo "## file"; file "$so"
  echo "## cuobjdump --list-elf --list-ptx"; "$CUOBJDUMP" --list-elf --list-ptx "$so" 2>&1 || true
  echo "## symbol versions required (readelf --version-info)"
  readelf --version-info "$so" | grep -oE 'Name: (GLIBC|GLIBCXX|CXXABI|GCC)_[0-9.]+' | sed 's/Name: //' | sort -V | uniq | tr '\n' ' '; echo
  echo "## max: $(aarch64-linux-gnu-objdump -T "$so" | grep -oE 'GLIBC_[0-9.]+' | sort -V | uniq | tail -1)" \
       "$(aarch64-linux-gnu-objdump -T "$so" | grep -oE 'GLIBCXX_[0-9.]+' | sort -V | uniq | tail -1)"
  echo "## NEEDED"; readelf -d "$so" | grep NEEDED | sed 's/.*\[/  /; s/\]//'
  ls -la "$so"
}
