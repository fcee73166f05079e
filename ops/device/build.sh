#!/usr/bin/env bash
# Builds the op kernels: ops/device/build.sh OUTDIR
#   xpushmem_ops.cl -> spir64 bitcode (clang-14, the device library's headers), linked with the committed device
#   library bitcode by shmem/device-lib/link.sh (which refuses undefined xpushmem symbols) into
#   OUTDIR/xpushmem_ops.spv, validated with spirv-val.
# The committed copy is ops/device/prebuilt/; the test prebuilt_op_kernels_match_their_source
# (tests/tests/ops/ops_device.rs) fails when it is stale. Tools: scripts/setup-device.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
CLANG="${CLANG:-clang-14}"
SPIRV_VAL="${SPIRV_VAL:-spirv-val}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/../../Cargo.toml" | head -n1)"
[[ -n "$version" ]] || { echo "build.sh: no workspace version in Cargo.toml" >&2; exit 1; }
lib="$here/../../shmem/device-lib/prebuilt/libxpushmem_device-$version.bc"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Relative paths keep the checkout's location out of the output (the drift check compares bytes).
cd "$here"
# -fno-builtin: no memset/memcpy idioms; llvm-spirv-14 turns them into copies from a constant that SPIR-V 1.4 entry
# points do not list (spirv-val rejects it).
"$CLANG" -cc1 -triple spir64-unknown-unknown -cl-std=CL2.0 -finclude-default-header -O2 -fno-builtin \
    -I ../../shmem/device-lib/include -I . -emit-llvm-bc -x cl xpushmem_ops.cl -o "$tmp/ops.bc"
bash ../../shmem/device-lib/link.sh "$tmp/ops.bc" "$lib" "$out/xpushmem_ops.spv"
"$SPIRV_VAL" "$out/xpushmem_ops.spv"
echo "$out/xpushmem_ops.spv"
