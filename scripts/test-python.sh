#!/usr/bin/env bash
# Sets up and runs the Python tests of the PyTorch drop-in (triton-bridge/): the ported test_nvshmem.py suites on
# CPU tensors over gloo at world sizes 2 and 4 (on an Intel GPU machine: on XPU, one rank per device).
#   1. scripts/setup-python.sh: venv with the pinned torch, pytest, ninja (idempotent);
#   2. scripts/check-shim-xpu.sh: the shim's XPU half compiled -fsyntax-only (no PyPI torch is built with XPU), in the
#      background beside 3 and 4 (one compiler process each);
#   3. pip wheel ./triton-bridge (no build isolation): cargo builds libxpushmem.so (setuptools-rust), the wheel
#      carries it with the headers, the device bitcode and the C++ shim compiled against the venv's torch;
#   4. the wheel installed into a fresh venv outside the checkout (torch from uv's cache, no ninja, no compiler on
#      PATH): import + a 2-rank CPU smoke test (tests/smoke_installed.py) that finds everything, the shim included,
#      inside the installed package;
#   5. the wheel installed into the test venv; pytest triton-bridge/tests (extra arguments are passed to pytest):
#      the ports of test_nvshmem.py (test_nvshmem_port.py) and of test_symmetric_memory.py's symm_mem kernel cases
#      (test_symm_mem_port.py).
# Stages (XPUSHMEM_PY_STAGE): "build" runs 1-4 and installs the wheel into the test venv; "test" runs 5 against the
# wheel installed there; unset, both. scripts/test.sh runs "build" beside the nextest phase (in the idle scheduling
# class: it takes only CPU time the tests leave idle) and "test" after it.
# Exits non-zero when the smoke test fails, or pytest fails or collects nothing (pytest's exit code 5).
# Env: XPUSHMEM_LIB_DIR (the pytest run uses this libxpushmem.so instead of the wheel's), CARGO_TARGET_DIR (cargo's
#      target dir), SETUPTOOLS_RUST_CARGO_PROFILE (cargo profile of the wheel's library: release unless set, "dev"
#      reuses a debug build), XPUSHMEM_WHEEL_LIB (a libxpushmem.so cargo already built from this checkout: the wheel
#      carries it and cargo is not run, see triton-bridge/setup.py), XPUSHMEM_CACHE (venv location, see
#      setup-python.sh).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
start=$(date +%s)

stage="${XPUSHMEM_PY_STAGE:-all}"
case "$stage" in
all | build | test) ;;
*)
    echo "test-python: XPUSHMEM_PY_STAGE=$stage: expected build, test or unset" >&2
    exit 2
    ;;
esac
venv="$(bash scripts/setup-python.sh | tail -n 1)"
export PATH="$venv/bin:$PATH"   # torch.utils.cpp_extension needs ninja on PATH

# Steps 1-4: the wheel, built, smoke-tested outside the checkout, installed into the test venv.
build_wheel() {
    # The XPU half's syntax check is one compiler process, as is the smoke test's shim build below: on the other core,
    # it runs while the wheel is built and smoke-tested; its verdict is reported before pytest.
    echo "== the C++ shim's XPU half: -fsyntax-only against torch's XPU headers and intel-sycl-rt's SYCL headers (in the background)"
    bash scripts/check-shim-xpu.sh "$venv" >"$work/check-shim-xpu.log" 2>&1 &
    check_xpu=$!
    echo "== pip wheel ./triton-bridge (${XPUSHMEM_WHEEL_LIB:+libxpushmem.so: $XPUSHMEM_WHEEL_LIB, no cargo; }cargo profile ${SETUPTOOLS_RUST_CARGO_PROFILE:-release})"
    # Without build isolation: the wheel's C++ shim is compiled against this venv's torch (triton-bridge/setup.py).
    CARGO_TERM_COLOR=never "$venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$work/dist" "$repo/triton-bridge"
    rm -rf "$repo/triton-bridge/build"   # setuptools' in-tree build output
    wheel="$(ls "$work"/dist/xpushmem-*.whl)"
    # Kept for scripts/test-triton.sh (scripts/test.sh hands it over), so that the shim is compiled once per run.
    wheels="${CARGO_TARGET_DIR:-$repo/target}/wheels"
    rm -rf "$wheels" && mkdir -p "$wheels" && cp "$wheel" "$wheels/"
    "$venv/bin/python" - "$wheel" <<'EOF'
import sys, zipfile
names = [n.split("/")[-1] for n in zipfile.ZipFile(sys.argv[1]).namelist()
         if n.startswith(("xpushmem/lib/", "xpushmem/include/")) or (n.startswith("xpushmem/torch/") and n.endswith((".so", ".json")))]
print(f"== {sys.argv[1].split('/')[-1]} holds: {' '.join(names)}")
EOF

    echo "== the wheel in a fresh venv outside the checkout: import + 2-rank CPU smoke test"
    "$venv/bin/uv" venv -q -p "$venv/bin/python" "$work/venv"
    torch_version="$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')"
    # No ninja and no compiler: building the shim at import would fail, so the smoke test proves the wheel's shim is used.
    "$venv/bin/uv" pip install -q -p "$work/venv/bin/python" "torch==$torch_version" numpy "$wheel"
    cp "$repo/triton-bridge/tests/smoke_installed.py" "$work/"
    (cd "$work" && env -u XPUSHMEM_LIB_DIR -u XPUSHMEM_INCLUDE_DIR -u XPUSHMEM_DEVICE_LIB_DIR -u CARGO_TARGET_DIR \
        PATH="$work/venv/bin:$PATH" CXX=/nonexistent/c++ XPUSHMEM_TORCH_BUILD_DIR="$work/shim" XPUSHMEM_TIMEOUT_MS=120000 \
        "$work/venv/bin/python" -P smoke_installed.py "$repo" "$work/shim")

    echo "== the C++ shim's XPU half (the background check)"
    if ! wait "$check_xpu"; then
        cat "$work/check-shim-xpu.log" >&2
        echo "test-python: the shim's XPU half does not compile" >&2
        exit 1
    fi
    cat "$work/check-shim-xpu.log"

    echo "== install the wheel into $venv"
    "$venv/bin/uv" pip install -q -p "$venv/bin/python" --reinstall-package xpushmem "$wheel"
}

if [[ "$stage" != test ]]; then
    # The wheel's scratch directory (the build, the smoke test's venv), removed on exit.
    work="$(mktemp -d "${TMPDIR:-/tmp}/xpushmem-wheel.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    build_wheel
fi
if [[ "$stage" == build ]]; then
    echo "== test-python (build): $(( $(date +%s) - start ))s"
    exit 0
fi
if [[ -n "${XPUSHMEM_LIB_DIR:-}" ]]; then
    [[ -f "$XPUSHMEM_LIB_DIR/libxpushmem.so" ]] || { echo "test-python: no libxpushmem.so in $XPUSHMEM_LIB_DIR" >&2; exit 1; }
    echo "== libxpushmem.so: $XPUSHMEM_LIB_DIR (XPUSHMEM_LIB_DIR)"
fi

# Bounded waits everywhere: a runtime wait fails after 120 s, a test after XPUSHMEM_TEST_TIMEOUT_S (harness).
export XPUSHMEM_TIMEOUT_MS="${XPUSHMEM_TIMEOUT_MS:-120000}"
export XPUSHMEM_SYMMETRIC_SIZE="${XPUSHMEM_SYMMETRIC_SIZE:-2G}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"   # 4 ranks on 2 cores
echo "== pytest triton-bridge/tests"
set +e
# Run from the tests' directory with the installed package (not the source tree) on the path. tests/triton runs in
# the triton-xpu venv (scripts/test-triton.sh); collecting it here would also shadow tests/conftest.py.
(cd "$repo/triton-bridge" && "$venv/bin/python" -P -m pytest -p no:cacheprovider -rfEs --ignore=tests/triton "$@" tests)
rc=$?
set -e
echo "== test-python: $(( $(date +%s) - start ))s, pytest exit code $rc"
if [[ $rc -eq 5 ]]; then
    echo "test-python: pytest collected no tests" >&2
fi
exit "$rc"
