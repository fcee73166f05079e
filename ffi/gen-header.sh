#!/bin/sh
# Regenerate the committed C headers of the ffi crates from their generators:
#   ffi/include/xpushmem.h        cbindgen over ffi/core/src + the typed families (ffi/tests/cdecl)
#   ffi/oshmem/include/shmem.h    the OpenSHMEM 1.5 header (ffi/tests/cdecl)
#   ffi/oshmem/include/pshmem.h   its profiling interface, from shmem.h (ffi/tests/cdecl)
#   shmem/device-lib/include/xpushmem_device_abi.h   cbindgen over shmem/src/abi.rs (ffi/tests/device_abi.rs)
# cbindgen is used as a library by the test ffi/tests/headers.rs (no `cargo install` needed); with
# XPUSHMEM_BLESS=1 the test writes the headers instead of comparing them.
set -eu
cd "$(dirname "$0")/.."
XPUSHMEM_BLESS=1 cargo test -p xpushmem-ffi --test headers "$@"
XPUSHMEM_BLESS=1 cargo test -p xpushmem-ffi --test device_abi "$@"
git --no-pager diff --stat -- ffi/include ffi/oshmem/include shmem/device-lib/include 2>/dev/null || true
