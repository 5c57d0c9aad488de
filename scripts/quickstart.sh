#!/usr/bin/env bash
# The main job: build example_package into a wheel with archguard active, then show what
# archguard decided (explain) and what the wheel really holds (verify, via cuobjdump).
source "$(dirname "$0")/setup_env.sh"
out=dist/example
rm -rf "$out" example_package/build && mkdir -p "$out"

step "pip wheel ./example_package (no GPU needed; archguard's lines from the build log)"
CUDA_VISIBLE_DEVICES="" "$VPY" -m pip wheel --no-build-isolation --no-deps -v \
  ./example_package -w "$out" > "$out/build.log" 2>&1 \
  || { tail -50 "$out/build.log"; echo "build failed; full log: $out/build.log" >&2; exit 1; }
grep "archguard:" "$out/build.log" | sed 's/^ *//'

step "python -m archguard explain --project example_package"
"$VPY" -m archguard explain --project example_package

step "python -m archguard verify --stubs $out/*.whl"
"$VPY" -m archguard verify --stubs "$out"/*.whl
