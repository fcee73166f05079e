#!/usr/bin/env bash
# Links a kernel's SPIR-V with the device library's SPIR-V, the SPIR-V-only alternative to link.sh:
#   shmem/device-lib/spirv-link.sh KERNEL.spv LIBXPUSHMEM_DEVICE.spv OUT.spv
# KERNEL.spv must be SPIR-V 1.0 like the library (llvm-spirv-14 --spirv-max-version=1.0). A call to a symbol the
# library does not define fails here, naming it (spirv-link refuses unresolved imports).
#
# Why not a plain `spirv-link`: linking an executable, spirv-link removes every Export decoration, the state
# global's too, and the driver can then no longer find `xpushmem_device_state` (zeModuleGetGlobalPointer; on the
# OpenCL CPU runtime clGetDeviceGlobalVariablePointerINTEL looks globals up by their export). So the module is linked
# as a library (--create-library keeps every export), every export but the state global's is dropped, and the
# functions no kernel reaches are eliminated (spirv-opt), leaving a small module that exports only the state.
# Built-in variables (`__spirv_BuiltIn*`) come from both inputs, so the linked module has two variables for one
# built-in; the CPU runtime names both after the built-in, renames the second and then cannot resolve it. The
# duplicates are merged into the first variable of each built-in.
# Tools: spirv-tools (spirv-link, spirv-dis, spirv-as, spirv-opt, spirv-val).
set -euo pipefail
kernel="${1:?usage: spirv-link.sh KERNEL.spv LIBXPUSHMEM_DEVICE.spv OUT.spv}"
lib="${2:?usage: spirv-link.sh KERNEL.spv LIBXPUSHMEM_DEVICE.spv OUT.spv}"
out="${3:?usage: spirv-link.sh KERNEL.spv LIBXPUSHMEM_DEVICE.spv OUT.spv}"
state=xpushmem_device_state
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
spirv-link --create-library "$kernel" "$lib" -o "$tmp/linked.spv"
spirv-dis --raw-id "$tmp/linked.spv" -o "$tmp/linked.spvasm"
# Pass 1 finds each built-in's first variable and its duplicates; pass 2 drops the duplicates' definitions and
# decorations, points their uses at the first, and drops every export but the state's.
awk -v keep="\"$state\"" '
    NR == FNR {
        if ($1 == "OpDecorate" && $3 == "BuiltIn") {
            if ($4 in first) dup[$2] = first[$4]; else first[$4] = $2
        }
        next
    }
    ($1 == "OpDecorate" || $1 == "OpName") && ($2 in dup) { next }
    $1 in dup && $2 == "=" && $3 == "OpVariable" { next }
    $0 ~ /LinkageAttributes ".*" Export$/ && index($0, keep) == 0 { next }
    {
        hit = 0
        for (i = 1; i <= NF; i++) if ($i in dup) hit = 1
        if (hit) {
            line = ""; delete seen
            for (i = 1; i <= NF; i++) {
                t = ($i in dup) ? dup[$i] : $i
                if ($1 == "OpEntryPoint" && t ~ /^%/ && (t in seen)) continue
                seen[t] = 1
                line = line (line == "" ? "" : " ") t
            }
            print line
        } else print
    }' "$tmp/linked.spvasm" "$tmp/linked.spvasm" >"$tmp/kept.spvasm"
grep -q "LinkageAttributes \"$state\" Export" "$tmp/kept.spvasm" ||
    { echo "spirv-link.sh: $(basename "$lib") does not export $state" >&2; exit 1; }
spirv-as --target-env spv1.0 "$tmp/kept.spvasm" -o "$tmp/kept.spv"
spirv-opt --eliminate-dead-functions "$tmp/kept.spv" -o "$out"
spirv-val "$out"
