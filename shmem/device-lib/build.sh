#!/usr/bin/env bash
# Builds the device-library sources of this folder to SPIR-V: shmem/device-lib/build.sh OUTDIR
#   *.cl -> OUTDIR/<name>.bc (spir64 LLVM bitcode) -> OUTDIR/<name>.spv (validated with spirv-val)
# Tools (Debian 12): clang-14, llvm-spirv-14, spirv-tools (scripts/setup-device.sh installs them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUTDIR}"
mkdir -p "$out"
CLANG="${CLANG:-clang-14}"
LLVM_SPIRV="${LLVM_SPIRV:-llvm-spirv-14}"
SPIRV_VAL="${SPIRV_VAL:-spirv-val}"
for tool in "$CLANG" "$LLVM_SPIRV" "$SPIRV_VAL"; do
    command -v "$tool" >/dev/null || { echo "build.sh: $tool not found (run scripts/setup-device.sh)" >&2; exit 127; }
done
for src in "$here"/*.cl; do
    name="$(basename "$src" .cl)"
    "$CLANG" -cc1 -triple spir64-unknown-unknown -cl-std=CL2.0 -O2 -emit-llvm-bc -x cl "$src" -o "$out/$name.bc"
    "$LLVM_SPIRV" "$out/$name.bc" -o "$out/$name.spv"
    "$SPIRV_VAL" "$out/$name.spv"
    echo "$out/$name.spv"
done
