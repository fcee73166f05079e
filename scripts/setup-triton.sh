#!/usr/bin/env bash
# Python environment for the Triton tests (triton-bridge/tests/triton/): a venv of its own with Intel's Triton
# (`triton-xpu`, PyPI) and the pinned torch. Both torch's CUDA dependency `triton` and `triton-xpu` install the module
# `triton`, so torch is installed without its dependencies and then every requirement of torch but `triton`.
# Idempotent: a venv that already imports both is reused (~2 s).
#
# Usage: scripts/setup-triton.sh            # prints the venv's directory on the last line of stdout
# Env:   XPUSHMEM_CACHE   where to keep the venv (default: <repo>/.venv-triton); the venv goes to
#                         $XPUSHMEM_CACHE/venv-triton
#        XPUSHMEM_TORCH_VERSION   the torch pin (default 2.15.0, as scripts/setup-python.sh)
#        XPUSHMEM_TRITON_XPU_VERSION   the triton-xpu pin (default 3.3.0b1)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
torch_version="${XPUSHMEM_TORCH_VERSION:-2.15.0}"
triton_version="${XPUSHMEM_TRITON_XPU_VERSION:-3.3.0b1}"
if [[ -n "${XPUSHMEM_CACHE:-}" ]]; then
    venv="$XPUSHMEM_CACHE/venv-triton"
else
    venv="$repo/.venv-triton"
fi
log() { echo "setup-triton: $*" >&2; }

python_bin="${PYTHON:-python3}"
command -v "$python_bin" >/dev/null || { log "python3 not found"; exit 1; }

want() {
    # Usable when the module `triton` is Intel's (the XPU backend is there), at the pin, next to the pinned torch.
    "$venv/bin/python" - "$torch_version" "$triton_version" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
import torch, triton, pytest  # noqa: F401
import triton.backends
assert torch.__version__.split("+")[0] == sys.argv[1], torch.__version__
assert version("triton-xpu") == sys.argv[2], version("triton-xpu")
assert "intel" in triton.backends.backends, list(triton.backends.backends)
EOF
}

if [[ -x "$venv/bin/python" ]] && [[ -x "$venv/bin/ninja" ]] && want; then
    log "reusing $venv (triton-xpu $triton_version, torch $torch_version)"
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
    uvi() { "$venv/bin/uv" pip install -q -p "$venv/bin/python" --compile-bytecode "$@"; }
    log "installing triton-xpu==$triton_version, torch==$torch_version (without its triton), pytest, ninja (uv)"
    uvi "triton-xpu==$triton_version" pytest ninja numpy
    uvi --no-deps "torch==$torch_version"
    # torch's own requirements for this platform, less `triton` (which would replace triton-xpu's module).
    mapfile -t deps < <("$venv/bin/python" - <<'EOF'
from importlib.metadata import requires
from packaging.requirements import Requirement
for r in requires("torch") or []:
    req = Requirement(r)
    if req.name == "triton" or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
        continue
    print(str(req).split(";")[0])
EOF
)
    uvi "${deps[@]}"
    want || { log "the venv at $venv does not import triton-xpu $triton_version and torch $torch_version"; exit 1; }
    log "ready in $(( $(date +%s) - start ))s"
fi
echo "$venv"
