#!/usr/bin/env bash
# Sets up and runs every check and test: formatting, clippy (warnings are errors), the whole workspace's tests under
# cargo-nextest (multi-PE suites, MPI bootstrap under mpirun, Level Zero over ze-emu, C ABI, examples), the doctests,
# the PyTorch port and Triton. docs/TESTING.md describes the runner, its groups and the tiers.
# Usage: scripts/test.sh [quick]
#   (none)  everything CI runs (.ci/run)
#   quick   the inner loop: unit tests, the host suites at 1-2 PEs on shm, the layering test (nextest profile quick)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
tier="${1:-all}"
case "$tier" in
all | quick) ;;
*)
    echo "usage: scripts/test.sh [quick]" >&2
    exit 2
    ;;
esac
start=$(date +%s)
phase_start=$start
# Phase timer: "== (Ns) <phase>" at the end of each phase, for the timings in docs/TESTING.md.
phase() {
    local now
    now=$(date +%s)
    echo "== ($(( now - phase_start ))s) $*"
    phase_start=$now
}
bash scripts/setup.sh "$([[ $tier == quick ]] && echo base || echo all)"
# cargo-nextest as scripts/setup.sh installed it.
export PATH="${XPUSHMEM_CACHE:-$repo/.cache}/tools/nextest/bin:$PATH"
# shellcheck source=/dev/null
source scripts/device-env.sh
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export CARGO_TERM_COLOR=never
# A fresh clone (CI) builds everything once: incremental compilation would only write caches nobody reads (and costs
# time doing it). A developer's repeated runs keep it.
if [[ "${CI:-}" == true ]]; then
    export CARGO_INCREMENTAL=0
fi
# The device suites must never skip in CI for want of the OpenCL CPU runtime.
export XPUSHMEM_REQUIRE_OPENCL=1
# Reports of an earlier run must not count in this one.
rm -f target/nextest/*/junit.xml
if [[ "$tier" == quick ]]; then
    phase "setup"
    cargo nextest run --workspace -P quick
    phase "cargo nextest -P quick (unit tests, host suites at 1-2 PEs on shm, layering)"
    echo "== $(( $(date +%s) - start ))s"
    echo "tests: $(python3 scripts/junit.py summary target/nextest/quick/junit.xml)"
    exit 0
fi
phase "setup"
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (all targets, -D warnings; the MPI bootstrap too)"
# One pass over every crate and target with the MPI bootstrap on. A build without it compiles no code of its own:
# its one difference, the error that refuses XPUSHMEM_BOOTSTRAP=mpi (shmem/src/init.rs, mpi_bootstrap), is compiled
# and linted in both builds; the build phase below fails on a warning of the build without it.
cargo clippy -q --workspace --all-targets --features xpushmem-tests/mpi -- -D warnings
phase "fmt, clippy"
echo "== packaging: cargo package of every library crate (not built from the packages: scripts/check-packaging.sh without"
echo "   'quick' does that, ~3 min), cargo doc -D missing_docs"
bash scripts/check-packaging.sh quick
phase "packaging"
echo "== cargo build (libraries the C, device and Python tests load: libxpushmem*.so, libze_emu.so)"
# Warnings are errors here too: clippy's pass has the MPI bootstrap on, this build is the one without it (code that
# only the MPI bootstrap uses would be dead here).
build_log=$(cargo build -q --workspace 2>&1) || { echo "$build_log"; exit 1; }
if grep -q '^warning' <<<"$build_log"; then
    echo "$build_log"
    echo "!! the build without the MPI bootstrap has warnings" >&2
    exit 1
fi
# The device tests load this ze-emu driver instead of building their own copy in a target dir of its own
# (ze_emu::testing::emu_lib: a second build of ze-emu and its dependencies inside the test run).
export ZE_EMU_TEST_LIB="${CARGO_TARGET_DIR:-$repo/target}/debug/libze_emu.so"
phase "build"
# Beside the tests, in the idle scheduling class (chrt --idle: a process there runs only on a CPU nothing else
# wants, so the tests' timing is not touched): the Python phase's venv and wheel (the C++ shim's compile, the smoke
# test of the installed wheel; scripts/test-python.sh, stage build) and the Triton phase's venv. The test processes
# leave about a quarter of the machine idle (PEs waiting on each other, libfabric's start-up: docs/TESTING.md);
# these jobs, about 100 s of CPU that ran alone after the tests, fill it.
# Where the idle class is refused (a seccomp profile that blocks sched_setscheduler), the lowest nice value instead.
idle() {
    if chrt --idle 0 true 2>/dev/null; then
        chrt --idle 0 "$@"
    else
        nice -n 19 "$@"
    fi
}
# The wheel carries the libxpushmem.so of the build above (XPUSHMEM_WHEEL_LIB, triton-bridge/setup.py):
# setuptools-rust's own cargo call would compile the ffi crate again as a cdylib alone (and take cargo's lock).
XPUSHMEM_PY_STAGE=build XPUSHMEM_WHEEL_LIB="${CARGO_TARGET_DIR:-$repo/target}/debug/libxpushmem.so" \
    SETUPTOOLS_RUST_CARGO_PROFILE=dev idle bash scripts/test-python.sh >target/python-build.log 2>&1 &
python_build=$!
idle bash scripts/setup-triton.sh >target/setup-triton.log 2>&1 &
setup_triton=$!
# And the library as a machine without libfabric's or PMIx's headers builds it (both are optional; code that only
# the fabric transport or the PMIx bootstrap uses is dead there): a check in a target folder of its own, warnings
# are errors (about 20 s of CPU).
FABRIC_SYS_DISABLE=1 PMIX_SYS_DISABLE=1 CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}/no-sys" \
    idle cargo check -q -p xpushmem --lib >target/no-sys.log 2>&1 &
no_sys=$!
# Every transport's cases are tests of their own (`rma::put_get_every_type::fab_2pe`, `def_`, `fabp_`, `cas_`,
# `dev_`: docs/TESTING.md), so this one run covers the deferred, fabric, progress-thread, CAS and peer-death runs too.
echo "== cargo nextest (the workspace's tests; report in target/nextest/ci/junit.xml)"
# The cross-node device bodies run in two forms: across two network namespaces (fabric_netns::netns_device_spanning_*,
# which need root and `ip`) and across two simulated nodes on one network stack (fabric_device::spanning_teams_* and
# ops_ep::device::dev_ep_two_nodes_4pe, anywhere). Where the namespaces can be made, the simulated form adds nothing
# (same bodies, same layouts, one network stack instead of two) and is left out: about 15 s of the machine.
spanning=()
if [[ $(id -u) == 0 ]] && ip -V >/dev/null 2>&1; then
    spanning=(-E 'not test(/^fabric_device::spanning_teams_|^ops_ep::device::dev_ep_two_nodes_4pe$/)')
    echo "   (as root with ip: fabric_device::spanning_teams_* and ops_ep::device::dev_ep_two_nodes_4pe left out," \
        "fabric_netns::netns_device_spanning_* run them)"
fi
set +e
cargo nextest run --workspace -P ci "${spanning[@]}" 2>&1 | tee target/test.log
rc=${PIPESTATUS[0]}
echo "== the library without libfabric and PMIx (cargo check beside the tests)"
rc_no_sys=0
wait "$no_sys" || rc_no_sys=$?
if [[ $rc_no_sys -ne 0 ]] || grep -q '^warning' target/no-sys.log; then
    cat target/no-sys.log
    echo "!! the library without libfabric and PMIx does not build or has warnings" >&2
    rc=1
fi
phase "tests"
echo "== Python: the PyTorch drop-in (ported test_nvshmem.py suites on CPU, gloo, 2 and 4 ranks)"
# The wheel, built beside the tests (above): its log, then pytest against it.
rc_py=0
wait "$python_build" || rc_py=$?
cat target/python-build.log
cp target/python-build.log target/test-python.log
# Beside pytest, in the idle scheduling class as above: the MPI phase's build (cargo; pytest runs none, so nothing
# waits for cargo's lock). Its package and feature set: see the MPI phase.
mpi_args=(-p xpushmem-tests -p xpushmem-examples --features xpushmem-tests/mpi,xpushmem-examples/mpi --test mpi)
idle cargo build -q "${mpi_args[@]}" --bins >target/mpi-build.log 2>&1 &
mpi_build=$!
if [[ $rc_py -eq 0 ]]; then
    XPUSHMEM_PY_STAGE=test bash scripts/test-python.sh 2>&1 | tee -a target/test-python.log
    rc_py=${PIPESTATUS[0]}
else
    echo "!! the wheel's build or smoke test failed (target/python-build.log): pytest not run" >&2
fi
phase "Python"
echo "== MPI bootstrap under mpirun (feature mpi); mpirun across network namespaces with the examples (as root)"
# One package set and feature set for the examples (the programs mpirun starts) and the `mpi` test binary (the MPI
# suites alone, tests/tests/mpi: not the whole reliability and fabric binaries again), so that the runtime is
# compiled once with `mpi` (separate builds resolved the shared dependencies' features differently and compiled it
# twice). Built beside pytest (above); a failed build is reported here.
rc_mpi=0
wait "$mpi_build" || rc_mpi=$?
cat target/mpi-build.log
if [[ $rc_mpi -eq 0 ]]; then
    cargo nextest run -P ci-mpi "${mpi_args[@]}" -E 'binary_id(xpushmem-tests::mpi)' 2>&1 | tee -a target/test.log
    rc_mpi=${PIPESTATUS[0]}
fi
phase "MPI"
wait "$setup_triton" || true
echo "== Triton: upstream test_shmem_triton.py kernels compiled by triton-xpu against xpushmem._xpushmem_triton"
# The libraries and the launcher of the build above (test-triton.sh would otherwise build a subset of the packages).
# The wheel of the Python phase: its C++ shim, compiled there, is the one the Triton tests load.
wheel_file=$(ls "${CARGO_TARGET_DIR:-$repo/target}"/wheels/xpushmem-*.whl 2>/dev/null | head -n 1)
# Beside it, in the idle scheduling class as above: the doctests (nextest does not run them; mostly rustdoc
# compiling them; the Triton phase runs no cargo).
idle cargo test --doc -p xpushmem -p xpushmem-ops -p xpushmem-tests -p level-zero-sys >target/doctests.log 2>&1 &
doctests=$!
XPUSHMEM_LIB_DIR="${CARGO_TARGET_DIR:-$repo/target}/debug" XPUSHMEM_WHEEL="$wheel_file" \
    bash scripts/test-triton.sh 2>&1 | tee target/test-triton.log
rc_triton=${PIPESTATUS[0]}
echo "== doctests (beside the Triton phase)"
wait "$doctests"
rc=$(( rc | $? ))
tee -a target/test.log <target/doctests.log
phase "Triton"
set -e
summary=$(
    {
        python3 scripts/junit.py summary target/nextest/ci/junit.xml target/nextest/ci-mpi/junit.xml |
            awk '{print $1, $3, $5}'
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
[[ $rc -eq 0 && $rc_mpi -eq 0 && $rc_py -eq 0 && $rc_triton -eq 0 ]]
