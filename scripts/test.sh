#!/usr/bin/env bash
# Set up everything the tests need (see setup_env.sh), then run the whole suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
source "$(dirname "$0")/setup_env.sh"

# A CPU-only torch for the "cannot build CUDA extensions" test: only from a local wheel
# directory (PIP_FIND_LINKS), never a multi-GB download. Without one, that test skips.
cpu_wheel=""
for dir in ${PIP_FIND_LINKS:-}; do
  for w in "$dir"/torch-"$TORCH_VERSION"+cpu-*.whl; do [ -f "$w" ] && cpu_wheel=$w; done
done
if [ -n "$cpu_wheel" ]; then
  if [ ! -x .venv-cpu/bin/python ]; then
    step "creating .venv-cpu with $(basename "$cpu_wheel")"
    "$py" -m venv .venv-cpu
  fi
  .venv-cpu/bin/python -m pip install -q --disable-pip-version-check --upgrade "pip>=25.3" setuptools
  .venv-cpu/bin/python -m pip install -q --disable-pip-version-check "$cpu_wheel" -e .
  export AG_TEST_CPU_PYTHON="$repo/.venv-cpu/bin/python"
fi

# a test marked `network` whose download fails is a failure here (and so in CI), not a skip
export AG_TEST_NETWORK=required

# every core busy: one pytest worker per core (AG_TEST_WORKERS=0 runs in one process); a
# build shared by several tests is made once per run whatever the workers (tests/conftest.py)
step "pytest"
exec "$VPY" -m pytest -n "${AG_TEST_WORKERS:-auto}" --dist loadgroup --durations=30 "$@"
