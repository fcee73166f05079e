#!/usr/bin/env bash
# Python environment for the PyTorch drop-in tests (triton-bridge/): a venv with uv, the pinned torch from PyPI,
# pytest and ninja (torch.utils.cpp_extension needs ninja on PATH), setuptools-rust (the wheel is built in this venv,
# without build isolation, so that it carries the C++ shim compiled against this torch), and the SYCL headers of
# intel-sycl-rt; mpi4py (built against the system's Open MPI) for xpushmem.core's start-up under mpirun.
# Idempotent: a venv that already imports the pinned torch is reused (~1 s); a cold install takes about 45 s (uv,
# bytecode compiled once).
#
# Usage: scripts/setup-python.sh            # prints the venv's directory on the last line of stdout
# Env:   XPUSHMEM_CACHE   where to keep the venv (default: <repo>/.venv); the venv goes to $XPUSHMEM_CACHE/venv-torch
#        XPUSHMEM_TORCH_VERSION   the torch pin (default 2.15.0; the C++ shim's kernel signatures follow it)
#        XPUSHMEM_SYCL_RT_VERSION the intel-sycl-rt pin whose SYCL headers check the shim's XPU half (2025.0.5)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
torch_version="${XPUSHMEM_TORCH_VERSION:-2.15.0}"
sycl_version="${XPUSHMEM_SYCL_RT_VERSION:-2025.0.5}"
if [[ -n "${XPUSHMEM_CACHE:-}" ]]; then
    venv="$XPUSHMEM_CACHE/venv-torch"
else
    venv="$repo/.venv"
fi
log() { echo "setup-python: $*" >&2; }

python_bin="${PYTHON:-python3}"
command -v "$python_bin" >/dev/null || { log "python3 not found"; exit 1; }

want() {
    # The venv is usable when it imports the pinned torch (with gloo), pytest, setuptools-rust and mpi4py, and has
    # ninja.
    "$venv/bin/python" - "$torch_version" <<'EOF' 2>/dev/null
import sys
import torch, torch.distributed as dist, pytest, setuptools_rust, mpi4py  # noqa: F401
assert torch.__version__.split("+")[0] == sys.argv[1], torch.__version__
assert dist.is_available() and dist.is_gloo_available()
EOF
}

if [[ -x "$venv/bin/python" ]] && [[ -x "$venv/bin/ninja" ]] && want; then
    log "reusing $venv (torch $torch_version)"
else
    start=$(date +%s)
    if [[ ! -x "$venv/bin/python" ]]; then
        log "creating $venv"
        mkdir -p "$(dirname "$venv")"
        "$python_bin" -m venv "$venv"
        echo '*' >"$venv/.gitignore"   # keep the venv out of git status
    fi
    if [[ ! -x "$venv/bin/uv" ]]; then
        "$venv/bin/pip" install -q uv
    fi
    log "installing torch==$torch_version pytest ninja mpi4py setuptools-rust (uv)"
    "$venv/bin/uv" pip install -q -p "$venv/bin/python" --compile-bytecode \
        "torch==$torch_version" pytest ninja numpy mpi4py "setuptools>=64" "setuptools-rust>=1.9"
    want || { log "the venv at $venv does not import torch $torch_version"; exit 1; }
    log "ready in $(( $(date +%s) - start ))s"
fi
# SYCL headers for the syntax check of the shim's XPU half (scripts/check-shim-xpu.sh): the intel-sycl-rt wheel,
# unpacked beside the venv's packages (not importable, nothing of it is loaded).
if [[ ! -f "$venv/intel-sycl-rt/include/sycl/sycl.hpp" ]]; then
    log "installing the SYCL headers of intel-sycl-rt==$sycl_version into $venv/intel-sycl-rt"
    "$venv/bin/uv" pip install -q --no-deps --target "$venv/intel-sycl-rt" "intel-sycl-rt==$sycl_version"
fi
echo "$venv"
