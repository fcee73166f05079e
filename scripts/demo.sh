#!/usr/bin/env bash
# Sets up, builds and runs the demo: every example program at 4 PEs under xpushmem-run. Each checks its result.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/setup.sh base
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
cargo build --release -q -p xpushmem -p xpushmem-examples
for ex in hello ring_put put_signal_pipeline jacobi; do
    echo "== $ex (4 PEs)"
    target/release/xpushmem-run -n 4 --timeout 120 "target/release/$ex"
done
echo "demo: all examples passed"
