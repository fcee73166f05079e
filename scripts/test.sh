#!/usr/bin/env bash
# Sets up and runs every check and test: formatting, clippy (warnings are errors), the whole workspace's tests
# (multi-PE suites, MPI bootstrap under mpirun, Level Zero over ze-emu, C ABI, examples).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/setup.sh all
# shellcheck source=/dev/null
source scripts/device-env.sh
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export CARGO_TERM_COLOR=never
# The device suites must never skip in CI for want of the OpenCL CPU runtime.
export XPUSHMEM_REQUIRE_OPENCL=1
start=$(date +%s)
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (all targets, -D warnings; the MPI bootstrap too)"
cargo clippy -q --workspace --all-targets -- -D warnings
cargo clippy -q -p xpushmem -p xpushmem-tests --all-targets --features xpushmem-tests/mpi -- -D warnings
echo "== cargo build (libraries the C, device and Python tests load: libxpushmem*.so, libze_emu.so)"
cargo build -q --workspace
echo "== cargo test"
set +e
cargo test --no-fail-fast --workspace 2>&1 | tee target/test.log
rc=${PIPESTATUS[0]}
echo "== MPI bootstrap under mpirun (feature mpi)"
cargo test --no-fail-fast -p xpushmem-tests --features mpi --test mpi_bootstrap 2>&1 | tee -a target/test.log
rc_mpi=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^test result:' target/test.log | awk '{p+=$4; f+=$6; i+=$8} END {print p" passed, "f" failed, "i" skipped"}')
echo "== $(( $(date +%s) - start ))s"
echo "tests: $summary"
[[ $rc -eq 0 && $rc_mpi -eq 0 ]]
