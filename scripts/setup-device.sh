#!/usr/bin/env bash
# Installs what the device path needs on Debian 12 (as root), idempotently:
#  - the Level Zero loader and headers (libze1, libze-dev),
#  - the SPIR-V kernel toolchain (clang-14, llvm-14 for llvm-link, llvm-spirv-14, spirv-tools),
#  - the OpenCL ICD loader + clinfo, and Intel's OpenCL CPU runtime from PyPI wheels (intel-opencl-rt,
#    intel-cmplr-lib-rt, tbb) unpacked into ${XPUSHMEM_CACHE:-<repo>/.cache}/oneapi-cpu.
# Afterwards `source scripts/device-env.sh` exports OCL_ICD_FILENAMES / LD_LIBRARY_PATH and ZE_EMU_LIB.
# Respects CI=true (non-interactive, terse). Safe to run again: skips what is already there.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${XPUSHMEM_CACHE:-$repo/.cache}/oneapi-cpu"

# Versions known to work together (probed on Debian 12, glibc 2.36).
INTEL_OPENCL_RT_VERSION="${INTEL_OPENCL_RT_VERSION:-2026.2.0}"
INTEL_CMPLR_LIB_RT_VERSION="${INTEL_CMPLR_LIB_RT_VERSION:-2026.2.0}"
TBB_VERSION="${TBB_VERSION:-2023.2.0}"

log() { echo "setup-device: $*"; }

apt_pkgs=(libze1 libze-dev clang-14 llvm-14 llvm-spirv-14 spirv-tools ocl-icd-libopencl1 clinfo unzip)
missing=()
for p in "${apt_pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    sudo_cmd=()
    if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get update -q >/dev/null
    "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
else
    log "apt packages present"
fi

if [[ -f "$cache/.complete-$INTEL_OPENCL_RT_VERSION" ]]; then
    log "Intel OpenCL CPU runtime present in $cache"
else
    pip_cmd=()
    if command -v pip3 >/dev/null 2>&1; then pip_cmd=(pip3);
    elif command -v pip >/dev/null 2>&1; then pip_cmd=(pip);
    elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then pip_cmd=(python3 -m pip);
    else
        log "pip not found; installing python3-pip"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-pip >/dev/null
        pip_cmd=(python3 -m pip)
    fi
    mkdir -p "$cache/wheels"
    log "downloading Intel OpenCL CPU runtime wheels into $cache/wheels"
    "${pip_cmd[@]}" download -q --no-deps -d "$cache/wheels" \
        "intel-opencl-rt==$INTEL_OPENCL_RT_VERSION" \
        "intel-cmplr-lib-rt==$INTEL_CMPLR_LIB_RT_VERSION" \
        "tbb==$TBB_VERSION"
    for whl in "$cache"/wheels/*.whl; do
        name="$(basename "$whl" .whl)"
        if [[ ! -d "$cache/$name" ]]; then
            log "unpacking $name"
            rm -rf "$cache/$name.tmp"
            unzip -q -o "$whl" -d "$cache/$name.tmp"
            mv "$cache/$name.tmp" "$cache/$name"
        fi
    done
    # The wheels' own data files are enough; the downloaded archives are not needed any more.
    rm -rf "$cache/wheels"
    touch "$cache/.complete-$INTEL_OPENCL_RT_VERSION"
fi

# Check the result through the same environment the tests use.
# shellcheck source=device-env.sh
source "$repo/scripts/device-env.sh"
if [[ -z "${OCL_ICD_FILENAMES:-}" ]]; then
    log "error: libintelocl.so not found under $cache" >&2
    exit 1
fi
if clinfo -l 2>/dev/null | grep -q "Intel(R) OpenCL"; then
    log "OpenCL CPU runtime OK: $(clinfo -l 2>/dev/null | grep -m1 Device | sed 's/^ *//')"
else
    log "error: clinfo does not list Intel(R) OpenCL with OCL_ICD_FILENAMES=$OCL_ICD_FILENAMES" >&2
    clinfo -l >&2 || true
    exit 1
fi
