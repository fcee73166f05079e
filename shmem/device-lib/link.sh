#!/usr/bin/env bash
# Links a kernel's spir64 bitcode with the device library and translates it to SPIR-V, failing at build time (not
# at JIT time on the device) when the kernel calls an xpushmem symbol the library does not define:
#   shmem/device-lib/link.sh KERNEL.bc LIBXPUSHMEM_DEVICE.bc OUT.spv
# Tools: llvm-link-14, llvm-nm-14, llvm-spirv-14 (scripts/setup-device.sh installs them).
set -euo pipefail
kernel="${1:?usage: link.sh KERNEL.bc LIBXPUSHMEM_DEVICE.bc OUT.spv}"
lib="${2:?usage: link.sh KERNEL.bc LIBXPUSHMEM_DEVICE.bc OUT.spv}"
out="${3:?usage: link.sh KERNEL.bc LIBXPUSHMEM_DEVICE.bc OUT.spv}"
linked="$out.linked.bc"
trap 'rm -f "$linked"' EXIT
llvm-link-14 --only-needed "$kernel" "$lib" -o "$linked"
missing="$(llvm-nm-14 --undefined-only "$linked" | awk '{print $NF}' | grep -E '^xpushmemx?_' || true)"
if [[ -n "$missing" ]]; then
    echo "link.sh: the device library $(basename "$lib") does not define:" $missing >&2
    exit 1
fi
llvm-spirv-14 "$linked" -o "$out"
