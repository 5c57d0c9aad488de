#!/usr/bin/env bash
# Import the aarch64 torch 2.13.0+cu130 wheel and the cross-built extension under qemu-user
# (no GPU, no binfmt_misc, no chroot) and run the example's own tests.
# Needs cross_build.sh's output ($WORK/out). Usage: [WORK=dir] scripts/aarch64/qemu_import.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
T0=$SECONDS
prep_apt
prep_rootfs          # also writes the fake /proc/cpuinfo + /sys cpu files into the prefix
prep_site

step "pip (Debian's pip 23.0.1 wheel, run by the arm64 python under qemu) installs the built wheel + test deps"
mkdir -p "$WORK/wheels-test"
if ! ls "$WORK"/wheels-test/pytest-*.whl >/dev/null 2>&1; then
  python3 -m pip download "${PIP_AARCH[@]}" -d "$WORK/wheels-test" pytest 'numpy<2.4' 2>&1 | quiet_pip | grep -E '^(Saved|ERROR)' || true
fi
WHL=$(ls "$WORK"/out/archguard_example-*-cp311-cp311-manylinux_2_28_aarch64.whl)
PIPWHL=$(ls "$WORK"/rootfs/usr/share/python-wheels/pip-*.whl)
rm -rf "$WORK/site-test"
PYTHONPATH=$PIPWHL $NICE qemu-aarch64-static -L "$WORK/rootfs" "$WORK/rootfs/usr/bin/python3.11" -m pip install \
  --no-deps --no-index --no-compile --disable-pip-version-check --root-user-action=ignore \
  --target "$WORK/site-test" "$WHL" "$WORK"/wheels-test/*.whl 2>&1 | tail -2
done_step

step "import torch + the extension (from the wheel) under qemu-aarch64"
PYTHONPATH=$WORK/site-test:$WORK/site $NICE qemu-aarch64-static -L "$WORK/rootfs" \
  "$WORK/rootfs/usr/bin/python3.11" "$HERE/import_test.py" 2>&1 | tee "$WORK/logs/import.log"
done_step

if [ -e "$WORK/out/direct/_C.cpython-311-aarch64-linux-gnu.so" ]; then
  step "import the route-A (direct) .so the same way"
  rm -rf "$WORK/ext-direct"; mkdir -p "$WORK/ext-direct/archguard_example"
  cp "$WORK/pkg/src/archguard_example/__init__.py" "$WORK/out/direct/_C.cpython-311-aarch64-linux-gnu.so" \
     "$WORK/ext-direct/archguard_example/"
  PYTHONPATH=$WORK/ext-direct:$WORK/site-test:$WORK/site $NICE qemu-aarch64-static -L "$WORK/rootfs" \
    "$WORK/rootfs/usr/bin/python3.11" "$HERE/import_test.py" 2>&1 | tee "$WORK/logs/import-direct.log"
  done_step
fi

step "the example's tests (pytest) under qemu-aarch64"
( cd "$WORK" && PYTHONPATH=$WORK/site-test:$WORK/site $NICE qemu-aarch64-static -L "$WORK/rootfs" \
    "$WORK/rootfs/usr/bin/python3.11" -m pytest -p no:cacheprovider -q -rs "$WORK/pkg/tests" ) 2>&1 \
  | tee "$WORK/logs/pytest.log" | tail -5
done_step
echo; echo "qemu_import.sh total: $((SECONDS - T0))s"
