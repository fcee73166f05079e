#!/bin/sh
# Cross-check of the OpenSHMEM conformance programs (ffi/tests/oshmem/*.c) against Open MPI's OpenSHMEM: builds
# them with `oshcc` and runs them with `oshrun` at 1, 2, 4 and 8 PEs. Not part of CI; a check of the tests
# themselves (each program must pass on another implementation too). Parts that use xpushmem's extensions are under
# `#ifdef XPUSHMEM_SHMEM_H`; `align` (uses xpushmemx_heap_size) and `preinit` (xpushmem's error mode) are skipped.
set -eu
cd "$(dirname "$0")/.."
if ! command -v oshcc >/dev/null 2>&1 || ! command -v oshrun >/dev/null 2>&1; then
    echo "oshcc/oshrun not found (Open MPI built with OpenSHMEM): nothing to cross-check" >&2
    exit 0
fi
probe=${TMPDIR:-/tmp}/oshmem-version-$$.c
printf '#include <shmem.h>\nSHMEM_MAJOR_VERSION.SHMEM_MINOR_VERSION\n' >"$probe"
minor=$(oshcc -E -P "$probe" 2>/dev/null | tail -1 | tr -d ' ')
rm -f "$probe"
case "$minor" in
    1.5 | 1.6 | 1.[7-9] | [2-9].*) ;;
    *)
        echo "Open MPI's OpenSHMEM implements $minor; the programs need 1.5 (teams): nothing to cross-check" >&2
        exit 0
        ;;
esac
out=${TMPDIR:-/tmp}/oshmem-crosscheck
mkdir -p "$out"
fail=0
for prog in globals classic threads teams_ctx activeset; do
    if ! oshcc -std=c11 -O1 -Wall -o "$out/$prog" "ffi/tests/oshmem/$prog.c" -lm -lpthread 2>"$out/$prog.cc.log"; then
        echo "FAIL  $prog does not build with oshcc (log: $out/$prog.cc.log)"
        fail=1
        continue
    fi
    for n in 1 2 4 8; do
        if oshrun --oversubscribe -np "$n" "$out/$prog" >"$out/$prog.$n.log" 2>&1 &&
            [ "$(grep -c "$prog OK on PE" "$out/$prog.$n.log")" -eq "$n" ]; then
            echo "ok    $prog at $n PEs"
        else
            echo "FAIL  $prog at $n PEs (log: $out/$prog.$n.log)"
            fail=1
        fi
    done
done
exit $fail
