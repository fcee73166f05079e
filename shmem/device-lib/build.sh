#!/usr/bin/env bash
# Builds the device-library sources of this folder: shmem/device-lib/build.sh OUTDIR
#   xpushmem_device.cl  -> OUTDIR/libxpushmem_device-<version>.bc (spir64 bitcode) and .spv (SPIR-V, Linkage
#                          capability: every function exported), the user-facing device library;
#   runtime_kernels.cl  -> OUTDIR/xpushmem_runtime.spv, kernels the host runtime launches itself;
#   test_kernels.cl     -> OUTDIR/test_kernels.spv, kernels of the ze-emu tests;
#   queue_kernels.cl    -> OUTDIR/xpushmem_queue.spv, the host on-queue kernels (xpushmemx_*_on_queue), linked
#                          (link.sh) with the library bitcode this same run builds, so that one command rebuilds
#                          both when the library changes.
# Every SPIR-V file is validated with spirv-val. <version> is the workspace version (Cargo.toml).
# Tools (Debian 12): clang-14, llvm-spirv-14, spirv-tools (scripts/setup-device.sh installs them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
CLANG="${CLANG:-clang-14}"
LLVM_SPIRV="${LLVM_SPIRV:-llvm-spirv-14}"
SPIRV_VAL="${SPIRV_VAL:-spirv-val}"
for tool in "$CLANG" "$LLVM_SPIRV" "$SPIRV_VAL"; do
    command -v "$tool" >/dev/null || { echo "build.sh: $tool not found (run scripts/setup-device.sh)" >&2; exit 127; }
done
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/../../Cargo.toml" | head -n1)"
[[ -n "$version" ]] || { echo "build.sh: no workspace version in Cargo.toml" >&2; exit 1; }
# Relative source names keep absolute paths of the checkout out of the outputs (the drift check compares bytes).
cd "$here"
build() { # SOURCE NAME [LLVM-SPIRV OPTIONS]
    "$CLANG" -cc1 -triple spir64-unknown-unknown -cl-std=CL2.0 -finclude-default-header -O2 -I include \
        -emit-llvm-bc -x cl "$1" -o "$out/$2.bc"
    "$LLVM_SPIRV" "${@:3}" "$out/$2.bc" -o "$out/$2.spv"
    "$SPIRV_VAL" "$out/$2.spv"
    echo "$out/$2.spv"
}
# SPIR-V 1.0: spirv-link needs every input at one version; kernels built with --spirv-max-version=1.0 link with it.
build xpushmem_device.cl "libxpushmem_device-$version" --spirv-max-version=1.0
build runtime_kernels.cl xpushmem_runtime
build test_kernels.cl test_kernels
rm -f "$out/xpushmem_runtime.bc" "$out/test_kernels.bc"
"$CLANG" -cc1 -triple spir64-unknown-unknown -cl-std=CL2.0 -finclude-default-header -O2 -fno-builtin -I include \
    -emit-llvm-bc -x cl queue_kernels.cl -o "$out/xpushmem_queue.bc"
bash link.sh "$out/xpushmem_queue.bc" "$out/libxpushmem_device-$version.bc" "$out/xpushmem_queue.spv"
rm -f "$out/xpushmem_queue.bc"
"$SPIRV_VAL" "$out/xpushmem_queue.spv"
echo "$out/xpushmem_queue.spv"
