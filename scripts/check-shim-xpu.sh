#!/usr/bin/env bash
# Compiles the XPU half of the PyTorch shim (triton-bridge/xpushmem/csrc/xpushmem_torch.cpp with
# XPUSHMEM_TORCH_WITH_XPU) with -fsyntax-only, so that it cannot rot on machines without an XPU torch: against the
# installed torch's headers (the PyPI wheel ships c10/xpu, ATen/xpu and torch/csrc/xpu) and the SYCL headers of the
# `intel-sycl-rt` wheel (installed headers-only by scripts/setup-python.sh). A PyPI torch lacks one header that an
# XPU build generates (c10/xpu/impl/xpu_cmake_macros.h); it is written here with the content such a build gives it.
# It also compiles the SYCL interop example of the host on-queue forms (examples/sycl/on_queue.cpp: a
# sycl::queue's native Level Zero list given to xpushmemx_*_on_queue) the same way, against the same headers and
# the system's Level Zero headers.
# Usage: scripts/check-shim-xpu.sh VENV   (the venv of scripts/setup-python.sh)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:?usage: check-shim-xpu.sh VENV}"
sycl="$venv/intel-sycl-rt/include"
[[ -f "$sycl/sycl/sycl.hpp" ]] || { echo "check-shim-xpu: no SYCL headers in $sycl (run scripts/setup-python.sh)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/c10/xpu/impl"
printf '#pragma once\n#define C10_XPU_BUILD_SHARED_LIBS\n' >"$work/c10/xpu/impl/xpu_cmake_macros.h"
mapfile -t includes < <("$venv/bin/python" -c '
import sysconfig
from torch.utils import cpp_extension
for p in cpp_extension.include_paths() + [sysconfig.get_paths()["include"]]:
    print("-isystem" + p)')
abi="$("$venv/bin/python" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')"
"${CXX:-g++}" -std=c++20 -fsyntax-only -Wall -Wno-unused-function -DXPUSHMEM_TORCH_WITH_XPU \
    -DTORCH_EXTENSION_NAME=xpushmem_torch_shim_xpu -D_GLIBCXX_USE_CXX11_ABI="$abi" \
    "${includes[@]}" -isystem"$work" -isystem"$sycl" -isystem"$sycl/sycl" -I"$repo/ffi/include" \
    -Werror "$repo/triton-bridge/xpushmem/csrc/xpushmem_torch.cpp"
echo "check-shim-xpu: the XPU half of xpushmem_torch.cpp compiles (-fsyntax-only, SYCL headers of intel-sycl-rt)"
"${CXX:-g++}" -std=c++20 -fsyntax-only -Wall -Werror -isystem"$sycl" -isystem"$sycl/sycl" -I"$repo/ffi/include" \
    "$repo/examples/sycl/on_queue.cpp"
echo "check-shim-xpu: examples/sycl/on_queue.cpp compiles (-fsyntax-only, SYCL headers of intel-sycl-rt)"
