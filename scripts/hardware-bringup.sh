#!/usr/bin/env bash
# Bring-up on a real Intel GPU machine: run the device suites against the real Level Zero driver (no ze-emu)
# and print what passed. Usage: scripts/hardware-bringup.sh
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
unset ZE_ENABLE_ALT_DRIVERS
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-4}"
bash scripts/setup.sh base >/dev/null || exit 1
cargo build -q --release -p xpushmem --bin xpushmem-info || exit 1
echo "== platform"
target/release/xpushmem-info | sed -n '/platform:/,$p'
if ! ls /usr/lib/x86_64-linux-gnu/libze_intel_gpu.so* >/dev/null 2>&1; then
    echo "bring-up: no Intel GPU Level Zero driver (libze_intel_gpu) found; install Intel's GPU stack first" >&2
    exit 2
fi
cargo test --release -p xpushmem-tests --no-run -q || exit 1
results=()
for ipc in pidfd socket; do
    for entry in host:rma host:amo host:signal host:sync host:memory device:device; do
        binary=${entry%%:*} suite=${entry#*:}
        bin=$(ls -t target/release/deps/${binary}-* 2>/dev/null | grep -v '\.d$' | head -1)
        [[ -n "$bin" ]] || { results+=("$suite/$ipc: not built"); continue; }
        # The suite's dev_* cases (tests/tests/<binary>/main.rs has one module per suite).
        mapfile -t names < <("$bin" --list 2>/dev/null | sed -n 's/: test$//p' | grep "^$suite::" | grep 'dev_')
        ((${#names[@]})) || { results+=("$suite/$ipc: no dev_ cases"); continue; }
        # Each dev_* test spawns its PEs itself; the real driver is used because ZE_ENABLE_ALT_DRIVERS is unset
        # and XPUSHMEM_HARDWARE=1 makes the harness skip the ze-emu environment.
        if XPUSHMEM_HARDWARE=1 XPUSHMEM_IPC=$ipc "$bin" --exact "${names[@]}" --test-threads=1 >"/tmp/bringup-$suite-$ipc.log" 2>&1; then
            results+=("$suite/$ipc: PASS ($(grep -c '\.\.\. ok' "/tmp/bringup-$suite-$ipc.log") tests)")
        else
            results+=("$suite/$ipc: FAIL (log: /tmp/bringup-$suite-$ipc.log)")
        fi
    done
done
# Device heaps over the fabric (one host, every other PE forced onto it): registration where the provider offers
# FI_HMEM (auto), then the staging path; the provider is XPUSHMEM_FABRIC_PROVIDER / FI_PROVIDER if set.
bin=$(ls -t target/release/deps/fabric-* 2>/dev/null | grep -v '\.d$' | head -1)
for mode in auto stage; do
    [[ -n "$bin" ]] || { results+=("fabric_device/$mode: not built"); break; }
    if XPUSHMEM_HARDWARE=1 XPUSHMEM_FABRIC_DEVICE_HEAP=$mode "$bin" fabric_device:: --test-threads=1 --skip register_without \
        >"/tmp/bringup-fabric_device-$mode.log" 2>&1; then
        results+=("fabric_device/$mode: PASS ($(grep -c '\.\.\. ok' "/tmp/bringup-fabric_device-$mode.log") tests)")
    else
        results+=("fabric_device/$mode: FAIL (log: /tmp/bringup-fabric_device-$mode.log)")
    fi
done
echo "== results (each dev_* test runs at the PE counts it names: 2 and 4)"
printf '  %s\n' "${results[@]}"
