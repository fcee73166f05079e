#!/usr/bin/env bash
# What a Rust user sees of xpushmem: every library crate packages and builds from its package (cargo package of
# the eight together: the ones that depend on each other are verified against each other's packages through
# cargo's temporary registry, so no --no-verify), and the public API of xpushmem and xpushmem-ops documents with
# warnings and missing docs as errors, as docs.rs builds it (default features, no system library needed).
# Usage: scripts/check-packaging.sh   (scripts/test.sh runs it; about 3 minutes on 2 cores, mostly the verify builds)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
crates=(level-zero-sys fabric-sys xpushmem xpushmem-launch xpushmem-ops xpushmem-ffi-core xpushmem-ffi xpushmem-oshmem)
echo "== cargo package ${crates[*]}"
# --allow-dirty: a development checkout packages what is in its working tree.
cargo package --allow-dirty --quiet "${crates[@]/#/-p=}"
for c in "${crates[@]}"; do
    f=$(ls target/package/"$c"-[0-9]*.crate)
    echo "   $(basename "$f"): $(tar -tzf "$f" | wc -l) files"
done
echo "== cargo doc -p xpushmem -p xpushmem-ops (RUSTDOCFLAGS=\"-D warnings -D missing_docs\")"
RUSTDOCFLAGS="-D warnings -D missing_docs" cargo doc --quiet --no-deps -p xpushmem -p xpushmem-ops
echo "packaging: ok"
