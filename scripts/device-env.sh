# shellcheck shell=bash
# Source me: exports the environment for the device path without an Intel GPU.
#   OCL_ICD_FILENAMES  Intel's OpenCL CPU runtime (libintelocl.so) from ${XPUSHMEM_CACHE:-<repo>/.cache}/oneapi-cpu
#   LD_LIBRARY_PATH    + the runtime's own libraries, libsvml (intel-cmplr-lib-rt) and libtbb
#   ZE_EMU_LIB         absolute path of the ze-emu Level Zero driver (libze_emu.so) if built
#   ze_emu_env         function: `ze_emu_env` exports ZE_ENABLE_ALT_DRIVERS=$ZE_EMU_LIB (+ validation layer, and
#                      ZE_EMU_PROGRAM_CACHE, ze-emu's compiled-program cache, unless set)
# Run scripts/setup-device.sh first to install what this points at.

_xpm_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_xpm_cache="${XPUSHMEM_CACHE:-$_xpm_repo/.cache}/oneapi-cpu"

_xpm_ocl="$(find "$_xpm_cache" -name libintelocl.so -print -quit 2>/dev/null || true)"
if [[ -n "$_xpm_ocl" ]]; then
    export OCL_ICD_FILENAMES="$_xpm_ocl"
    _xpm_libs="$(dirname "$_xpm_ocl")"
    for _xpm_lib in libsvml.so libtbb.so.12; do
        _xpm_found="$(find "$_xpm_cache" -name "$_xpm_lib" -print -quit 2>/dev/null || true)"
        if [[ -n "$_xpm_found" ]]; then
            _xpm_libs="$_xpm_libs:$(dirname "$_xpm_found")"
        fi
    done
    case ":${LD_LIBRARY_PATH:-}:" in
        *":$_xpm_libs:"*) ;;
        *) export LD_LIBRARY_PATH="$_xpm_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
    esac
fi

# ze-emu: newest libze_emu.so among the target directories of this checkout (CARGO_TARGET_DIR first).
ze_emu_path() {
    local d f
    for d in "${CARGO_TARGET_DIR:-}" "$_xpm_repo"/target*; do
        [[ -n "$d" && -d "$d" ]] || continue
        for f in "$d"/debug/libze_emu.so "$d"/release/libze_emu.so; do
            [[ -f "$f" ]] && echo "$f" && return 0
        done
    done
    return 1
}
if ZE_EMU_LIB="$(ze_emu_path)"; then
    export ZE_EMU_LIB
else
    unset ZE_EMU_LIB
fi

# Select ze-emu as the only Level Zero driver, with the loader's validation layer on.
ze_emu_env() {
    local lib="${ZE_EMU_LIB:-$(ze_emu_path)}"
    if [[ -z "$lib" ]]; then
        echo "ze_emu_env: libze_emu.so not built (cargo build -p ze-emu)" >&2
        return 1
    fi
    export ZE_ENABLE_ALT_DRIVERS="$lib"
    # ze-emu's compiled-program cache beside the driver's target dir (<target>/<profile>/libze_emu.so).
    export ZE_EMU_PROGRAM_CACHE="${ZE_EMU_PROGRAM_CACHE:-$(dirname "$(dirname "$lib")")/ze-emu-cache}"
    export ZE_ENABLE_VALIDATION_LAYER=1
    export ZE_ENABLE_PARAMETER_VALIDATION=1
}
unset _xpm_ocl _xpm_libs _xpm_lib _xpm_found
