#!/usr/bin/env bash
# Sets up, builds and runs the demo: every example program at 4 PEs under xpushmem-run. Each checks its result.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/setup.sh base
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
cargo build --release -q -p xpushmem -p xpushmem-launch -p xpushmem-examples
for ex in hello ring_put put_signal_pipeline jacobi; do
    echo "== $ex (4 PEs)"
    target/release/xpushmem-run -n 4 --timeout 120 "target/release/$ex"
done
# Device-initiated communication (kernels pass a token round the ring), when the device environment is set up.
# shellcheck source=/dev/null
source scripts/device-env.sh
if [[ -n "${OCL_ICD_FILENAMES:-}" ]] && command -v clang-14 >/dev/null && command -v llvm-link-14 >/dev/null; then
    cargo build --release -q -p ze-emu
    ze_emu_env
    echo "== device_token_ring (4 PEs, kernels on ze-emu devices)"
    XPUSHMEM_HEAP=device target/release/xpushmem-run -n 4 --timeout 300 target/release/device_token_ring
else
    echo "== device_token_ring skipped: run scripts/setup-device.sh to set up the device environment"
fi
echo "demo: all examples passed"
