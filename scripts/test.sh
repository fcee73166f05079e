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
echo "== RMA/AMO/signal/sync suites on the deferred test transport (writes land late and out of order until quiet/fence)"
XPUSHMEM_TRANSPORT=deferred cargo test --no-fail-fast -p xpushmem-tests --test rma --test amo --test signal --test sync \
    -- --skip dev_ 2>&1 | tee -a target/test.log
rc_deferred=${PIPESTATUS[0]}
echo "== the suites over the fabric transport (libfabric tcp on loopback, XPUSHMEM_TRANSPORT=fabric), 2-4 PEs"
# RMA/AMO/signal/sync with progress made only by the calls that wait; the collectives and teams with the progress
# thread too (coll_barrier's a_missing_member_times_out has a PE sleep outside xpushmem: without the thread it
# cannot serve its peers' operations, and they time out in the transport instead of in team_sync).
XPUSHMEM_TRANSPORT=fabric cargo test --no-fail-fast -p xpushmem-tests --test rma --test amo --test signal --test sync \
    -- --skip dev_ --skip _1pe --skip _8pe 2>&1 | tee -a target/test.log
rc_fabric=${PIPESTATUS[0]}
XPUSHMEM_TRANSPORT=fabric XPUSHMEM_PROGRESS_THREAD=1 cargo test --no-fail-fast -p xpushmem-tests --test coll_alltoall \
    --test coll_barrier --test coll_broadcast --test coll_collect --test coll_reduce --test coll_scan --test teams \
    -- --skip dev_ --skip _1pe --skip _8pe 2>&1 | tee -a target/test.log
rc_fabric=$(( rc_fabric | PIPESTATUS[0] ))
# The compare-and-swap emulation of the atomics a provider lacks, on every AMO and signal case.
XPUSHMEM_TRANSPORT=fabric XPUSHMEM_FABRIC_ATOMICS=cas cargo test --no-fail-fast -p xpushmem-tests --test amo --test signal \
    -- --skip dev_ --skip _1pe --skip _8pe 2>&1 | tee -a target/test.log
rc_fabric=$(( rc_fabric | PIPESTATUS[0] ))
# The peer-death matrix (SIGKILL and SIGSTOP of a PE in each wait, 2-8 PEs) with every peer over the fabric.
XPUSHMEM_TRANSPORT=fabric cargo test --no-fail-fast -p xpushmem-tests --test reliability_peer_death 2>&1 | tee -a target/test.log
rc_fabric=$(( rc_fabric | PIPESTATUS[0] ))
echo "== MPI bootstrap under mpirun (feature mpi); mpirun across network namespaces with the examples (as root)"
cargo build -q -p xpushmem-examples --features mpi
cargo test --no-fail-fast -p xpushmem-tests --features mpi --test mpi_bootstrap --test fabric_mpirun 2>&1 | tee -a target/test.log
rc_mpi=${PIPESTATUS[0]}
echo "== Python: the PyTorch drop-in (ported test_nvshmem.py suites on CPU, gloo, 2 and 4 ranks)"
# The wheel's libxpushmem.so in the debug profile: the build above already made it.
SETUPTOOLS_RUST_CARGO_PROFILE=dev bash scripts/test-python.sh 2>&1 | tee target/test-python.log
rc_py=${PIPESTATUS[0]}
echo "== Triton: upstream test_shmem_triton.py kernels compiled by triton-xpu against xpushmem._xpushmem_triton"
bash scripts/test-triton.sh 2>&1 | tee target/test-triton.log
rc_triton=${PIPESTATUS[0]}
set -e
summary=$(
    {
        grep -E '^test result:' target/test.log | awk '{print $4, $6, $8}'
        # pytest's closing line, e.g. "=== 118 passed, 1 skipped in 74.93s ==="
        for log in target/test-python.log target/test-triton.log; do
            tail -n 5 "$log" | grep -E '[0-9]+ (passed|failed)' | tail -n 1
        done |
            awk '{p=0; f=0; s=0; for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) p=$i; if ($(i+1) ~ /^failed/) f=$i;
                  if ($(i+1) ~ /^skipped/) s=$i }; print p, f, s}'
    } | awk '{p+=$1; f+=$2; s+=$3} END {print p" passed, "f" failed, "s" skipped"}'
)
echo "== $(( $(date +%s) - start ))s"
echo "tests: $summary"
[[ $rc -eq 0 && $rc_deferred -eq 0 && $rc_fabric -eq 0 && $rc_mpi -eq 0 && $rc_py -eq 0 && $rc_triton -eq 0 ]]
