#!/usr/bin/env bash
# Checks that the patches of docs/upstream/ (the XPU branches of PyTorch's test_nvshmem.py, test_shmem_triton.py /
# _shmem_triton.py and test_symmetric_memory.py) apply to a pytorch checkout, without changing it:
#   scripts/check-upstream-patches.sh PYTORCH_CHECKOUT
# Not part of scripts/test.sh: the upstream files are not stored in this repository. Run it when bringing the patches
# up on an XPU machine (docs/HARDWARE.md) or when moving them to a newer pytorch.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
checkout="${1:?usage: check-upstream-patches.sh PYTORCH_CHECKOUT}"
[[ -d "$checkout/test/distributed" ]] || { echo "check-upstream-patches: $checkout is not a pytorch checkout" >&2; exit 1; }
rc=0
for p in "$repo"/docs/upstream/*.patch; do
    if git -C "$checkout" apply --check "$p"; then
        echo "applies: $(basename "$p")"
    else
        echo "DOES NOT APPLY: $(basename "$p")" >&2
        rc=1
    fi
done
exit "$rc"
