#!/usr/bin/env bash
# What a Rust user sees of xpushmem: every library crate packages and builds from its package (cargo package of
# the nine together: the ones that depend on each other are verified against each other's packages through
# cargo's temporary registry, so no --no-verify), and the public API of xpushmem and xpushmem-ops documents with
# warnings and missing docs as errors, as docs.rs builds it (default features, no system library needed).
# Usage: scripts/check-packaging.sh [quick]
#   (none)  the whole check: about 3 minutes on 2 cores from a fresh clone, mostly the verify builds (target/packaging
#           holds them); run it before publishing
#   quick   what scripts/test.sh runs within its time budget: the packages are made (metadata, versions of path
#           dependencies, file lists, readme) but not built from their sources (--no-verify; the workspace build
#           of the same sources is the suite's), and the docs check as above
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=${1:-full}
case "$mode" in
full) verify=() ;;
quick) verify=(--no-verify) ;;
*) echo "usage: scripts/check-packaging.sh [quick]" >&2; exit 2 ;;
esac
crates=(level-zero-sys fabric-sys pmix-sys xpushmem xpushmem-launch xpushmem-ops xpushmem-ffi-core xpushmem-ffi xpushmem-oshmem)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
# The verify builds treat the packages as registry crates, which cargo never rebuilds once built (a registry
# version is immutable) and unpacks only when the unpacked folder is missing. So the check builds in a target
# folder of its own, where the fingerprints of these crates are removed first, and removes the unpacked copies of
# the temporary registry (local registries' folders are named -<hash>): otherwise an earlier run's sources of the
# same version would be verified instead of this tree's.
pkg_target=${XPUSHMEM_PACKAGE_TARGET_DIR:-target/packaging}
for c in "${crates[@]}"; do
    rm -rf "$pkg_target"/debug/.fingerprint/"$c"-* "$pkg_target"/debug/build/"$c"-*
    for d in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/; do
        rm -rf "$d$c-$version"
    done
done
echo "== cargo package ${verify[*]} ${crates[*]}"
# --allow-dirty: a development checkout packages what is in its working tree.
CARGO_TARGET_DIR=$pkg_target cargo package --allow-dirty --quiet "${verify[@]}" "${crates[@]/#/-p=}"
for c in "${crates[@]}"; do
    f=$pkg_target/package/$c-$version.crate
    echo "   $(basename "$f"): $(tar -tzf "$f" | wc -l) files"
done
echo "== cargo doc -p xpushmem -p xpushmem-ops (RUSTDOCFLAGS=\"-D warnings -D missing_docs\")"
RUSTDOCFLAGS="-D warnings -D missing_docs" cargo doc --quiet --no-deps -p xpushmem -p xpushmem-ops
echo "packaging: ok"
