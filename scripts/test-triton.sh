#!/usr/bin/env bash
# Runs the Triton tests of triton-bridge (tests/triton/): the kernels of PyTorch's test_shmem_triton.py, compiled by
# Intel's Triton (triton-xpu) for an XPU target at sub-group sizes 16 and 32 against xpushmem._xpushmem_triton and
# the device bitcode, run on ze-emu at 2 and 4 PEs (xpushmem-run) through the load hook; requires_xpushmem's
# library search, extern_libs entry and chained kernel-load hook; the upstream patch.
#   1. scripts/setup-triton.sh: a venv of its own with triton-xpu and torch (idempotent);
#   2. libxpushmem.so, xpushmem-run and ze-emu (cargo build, debug) unless XPUSHMEM_LIB_DIR names them;
#      scripts/device-env.sh selects ze-emu and the OpenCL CPU runtime;
#   3. pytest triton-bridge/tests/triton with the source tree's package, or with the wheel XPUSHMEM_WHEEL names
#      installed into the venv (scripts/test.sh: the wheel scripts/test-python.sh built, whose C++ shim is then
#      loaded instead of compiled again); extra arguments are passed to pytest.
# Exits non-zero when pytest fails or collects nothing (pytest's exit code 5).
# Env: XPUSHMEM_CACHE (venv location, see setup-triton.sh), XPUSHMEM_LIB_DIR, CARGO_TARGET_DIR, XPUSHMEM_WHEEL.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
start=$(date +%s)
venv="$(bash scripts/setup-triton.sh | tail -n 1)"
export PATH="$venv/bin:$PATH"   # torch.utils.cpp_extension (xpushmem.torch's shim) needs ninja on PATH
if [[ -z "${XPUSHMEM_LIB_DIR:-}" ]]; then
    echo "== cargo build (libxpushmem.so, xpushmem-run, libze_emu.so)"
    CARGO_TERM_COLOR=never cargo build -q -p xpushmem-ffi -p ze-emu
    CARGO_TERM_COLOR=never cargo build -q -p xpushmem -p xpushmem-launch --bins
    export XPUSHMEM_LIB_DIR="${CARGO_TARGET_DIR:-$repo/target}/debug"
fi
# ze-emu as the Level Zero driver, Intel's OpenCL CPU runtime behind it (scripts/setup-device.sh installs it).
# shellcheck source=/dev/null
source "$repo/scripts/device-env.sh"
ze_emu_env || true
echo "== pytest triton-bridge/tests/triton (triton-xpu)"
set +e
if [[ -n "${XPUSHMEM_WHEEL:-}" ]]; then
    echo "== the wheel $XPUSHMEM_WHEEL installed into $venv (its C++ shim is loaded, not compiled)"
    "$venv/bin/uv" pip install -q -p "$venv/bin/python" --no-deps --reinstall-package xpushmem "$XPUSHMEM_WHEEL"
    # -P: the installed package, not the source tree in the working directory.
    pkg=(-P)
else
    pkg=()
    export PYTHONPATH="$repo/triton-bridge"
fi
# Triton keys its kernel cache by the device library's path, whose name carries the release version only: a
# rebuilt library of the same version (a change to the device ABI) would get kernels linked against the old one.
# So the cache is per content of the checkout's device library (the one the wheel carries).
device_lib_hash=$(cat "$repo"/shmem/device-lib/prebuilt/libxpushmem_device-*.bc | sha256sum | cut -c1-16)
(cd "$repo/triton-bridge" && TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$repo/target/triton-cache/$device_lib_hash}" \
    "$venv/bin/python" "${pkg[@]}" -m pytest -p no:cacheprovider -rfEs "$@" tests/triton)
rc=$?
set -e
echo "== test-triton: $(( $(date +%s) - start ))s, pytest exit code $rc"
if [[ $rc -eq 5 ]]; then
    echo "test-triton: pytest collected no tests" >&2
fi
exit "$rc"
