#!/usr/bin/env bash
# Sets up and runs the Python tests of the PyTorch drop-in (triton-bridge/): the ported test_nvshmem.py suites on
# CPU tensors over gloo at world sizes 2 and 4 (on an Intel GPU machine: on XPU, one rank per device).
#   1. scripts/setup-python.sh: venv with the pinned torch, pytest, ninja (idempotent);
#   2. cargo build --release -p xpushmem-ffi (libxpushmem.so), unless XPUSHMEM_LIB_DIR points at a built one;
#   3. pip install ./triton-bridge into the venv;
#   4. pytest triton-bridge/tests (extra arguments are passed to pytest).
# Exits non-zero when pytest fails or collects nothing (pytest's exit code 5).
# Env: XPUSHMEM_LIB_DIR (use this libxpushmem.so), CARGO_TARGET_DIR (cargo's target dir; the library is taken from
#      $CARGO_TARGET_DIR/release), XPUSHMEM_CACHE (venv location, see setup-python.sh).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
start=$(date +%s)

venv="$(bash scripts/setup-python.sh | tail -n 1)"
export PATH="$venv/bin:$PATH"   # torch.utils.cpp_extension needs ninja on PATH

if [[ -z "${XPUSHMEM_LIB_DIR:-}" ]]; then
    target="${CARGO_TARGET_DIR:-$repo/target}"
    echo "== cargo build --release -p xpushmem-ffi (target dir $target)"
    CARGO_TERM_COLOR=never cargo build -q --release -p xpushmem-ffi
    export XPUSHMEM_LIB_DIR="$target/release"
fi
[[ -f "$XPUSHMEM_LIB_DIR/libxpushmem.so" ]] || { echo "test-python: no libxpushmem.so in $XPUSHMEM_LIB_DIR" >&2; exit 1; }
echo "== libxpushmem.so: $XPUSHMEM_LIB_DIR"

echo "== install triton-bridge"
"$venv/bin/uv" pip install -q -p "$venv/bin/python" --reinstall-package xpushmem "$repo/triton-bridge"
rm -rf "$repo/triton-bridge/build"   # setuptools' in-tree build output

# Bounded waits everywhere: a runtime wait fails after 120 s, a test after XPUSHMEM_TEST_TIMEOUT_S (harness).
export XPUSHMEM_TIMEOUT_MS="${XPUSHMEM_TIMEOUT_MS:-120000}"
export XPUSHMEM_SYMMETRIC_SIZE="${XPUSHMEM_SYMMETRIC_SIZE:-2G}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"   # 4 ranks on 2 cores
echo "== pytest triton-bridge/tests"
set +e
# Run from the tests' directory with the installed package (not the source tree) on the path.
(cd "$repo/triton-bridge" && "$venv/bin/python" -P -m pytest -p no:cacheprovider -rfEs "$@" tests)
rc=$?
set -e
echo "== test-python: $(( $(date +%s) - start ))s, pytest exit code $rc"
if [[ $rc -eq 5 ]]; then
    echo "test-python: pytest collected no tests" >&2
fi
exit "$rc"
