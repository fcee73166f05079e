//! `libxpushmem_oshmem`: the OpenSHMEM 1.5 interface of xpushmem, exporting the standard `shmem_*` names (header
//! `include/xpushmem/shmem.h`, generated; see `docs/OPENSHMEM.md` for what is supported).
//!
//! The library links the same implementation as `libxpushmem` (crate `xpushmem-ffi-core`, so it also exports the
//! native `xpushmem_*` calls, e.g. `xpushmem_last_error()`), and adds the standard names here. It is a separate
//! library so that `libxpushmem` never defines `shmem_*` symbols that could clash with a system OpenSHMEM.
//!
//! Errors: the standard signatures are mostly `void`, so by default (`XPUSHMEM_ERROR_MODE` unset) a failing call
//! prints its message and aborts, as classic SHMEM implementations do; with `XPUSHMEM_ERROR_MODE=return` (or
//! `xpushmemx_set_error_mode`) the call returns and the failure is in `xpushmem_last_error()`; the calls that
//! return `int` status (`shmem_init_thread`, team and collective calls) return non-zero.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod activeset;
mod coll;
mod fold;
mod legacy;
mod locks;
mod teams;

use std::ffi::{c_char, c_int, c_long, c_void};
use std::io::Write;
use xpushmem_ffi_core::error::{self, value, void, write_out, Failure};
use xpushmem_ffi_core::rt::config::Config;
use xpushmem_ffi_core::rt::{InitAttr, ThreadLevel};
use xpushmem_ffi_core::{imp, native, state};

/// `SHMEM_VENDOR_STRING` of `shmem.h`, what `shmem_info_get_name` returns (a C test compares the two).
const VENDOR_STRING: &str = "xpushmem";

/// A communication context handle (`shmem_ctx_t`).
#[allow(non_camel_case_types)]
pub type shmem_ctx_t = *mut c_void;
/// A team handle (`shmem_team_t`).
#[allow(non_camel_case_types)]
pub type shmem_team_t = *mut c_void;

/// Status of the `int`-returning calls: 0 on success, -1 on failure (message in `xpushmem_last_error()`).
fn status(call: &str, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match error::run(call, f) {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Library setup, exit, and query

/// Makes abort the error mode of this library before `shmem_init` (the OpenSHMEM default; `XPUSHMEM_ERROR_MODE`
/// still decides when set). A load-time constructor, so it holds from the first call; `shmem_init` refers to it so
/// a static link keeps it.
#[used]
#[link_section = ".init_array"]
static SET_LAYER_DEFAULT: extern "C" fn() = set_layer_default;

extern "C" fn set_layer_default() {
    error::set_layer_default(true);
}

/// Start the runtime for the OpenSHMEM layer at `thread_level`: symmetric data segment, the specification's
/// environment variables (`SHMEM_SYMMETRIC_SIZE` and `SHMEM_DEBUG` mapped onto the runtime's settings, see
/// `Config::apply_openshmem`), then what `SHMEM_VERSION` and `SHMEM_INFO` ask to print, once per start (a second
/// init of a running library is a no-op and prints nothing).
fn start(thread_level: ThreadLevel) -> Result<(), Failure> {
    let started = state::is_initialised();
    state::init(
        InitAttr {
            thread_level,
            symmetric_data: true,
            openshmem_env: true,
            ..InitAttr::default()
        },
        true,
    )?;
    if started {
        return Ok(());
    }
    state::with(|sh| {
        let cfg = sh.config();
        let mut out = std::io::stdout().lock();
        // Printing is best effort: a closed stdout must not fail the init.
        if cfg.shmem_version {
            let _ = writeln!(
                out,
                "{VENDOR_STRING} {} (OpenSHMEM {}.{}): PE {} of {}",
                xpushmem_ffi_core::rt::VERSION,
                native::XPUSHMEM_SPEC_MAJOR_VERSION,
                native::XPUSHMEM_SPEC_MINOR_VERSION,
                sh.my_pe(),
                sh.n_pes()
            );
        }
        if cfg.shmem_info && sh.my_pe() == 0 {
            let _ = write!(
                out,
                "{VENDOR_STRING} {}: environment variables (the XPUSHMEM_* ones win over their SHMEM_* names)\n{}",
                xpushmem_ffi_core::rt::VERSION,
                Config::describe()
            );
        }
        let _ = out.flush();
        Ok(())
    })
}

/// Start the library (collective). Aborts on failure unless `XPUSHMEM_ERROR_MODE=return`.
#[no_mangle]
pub extern "C" fn shmem_init() {
    std::hint::black_box(&SET_LAYER_DEFAULT);
    void("shmem_init", || start(InitAttr::default().thread_level))
}

/// Start the library at thread level `requested`; the provided level in `*provided`. 0 on success.
///
/// # Safety
/// `provided` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmem_init_thread(requested: c_int, provided: *mut c_int) -> c_int {
    status("shmem_init_thread", || {
        start(imp::thread_level_arg(requested, "shmem_init_thread")?)?;
        let got = state::with(|sh| Ok(imp::thread_level_int(sh.query_thread())))?;
        // SAFETY: the caller's contract on `provided`.
        unsafe { write_out(provided, got) };
        Ok(())
    })
}

/// The thread level in force into `*provided`.
///
/// # Safety
/// `provided` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmem_query_thread(provided: *mut c_int) {
    void("shmem_query_thread", || {
        let got = state::with(|sh| Ok(imp::thread_level_int(sh.query_thread())))?;
        // SAFETY: the caller's contract on `provided`.
        unsafe { write_out(provided, got) };
        Ok(())
    })
}

/// Finalize (collective).
#[no_mangle]
pub extern "C" fn shmem_finalize() {
    teams::forget_all();
    void("shmem_finalize", state::finalize)
}

/// Leave the program with `status` now (peers see this PE as lost; under `xpushmem-run` a non-zero status stops
/// the job).
#[no_mangle]
pub extern "C" fn shmem_global_exit(status: c_int) {
    native::xpushmem_global_exit(status)
}

/// This PE's number (-1 before `shmem_init`).
#[no_mangle]
pub extern "C" fn shmem_my_pe() -> c_int {
    value("shmem_my_pe", -1, || {
        state::with(|sh| Ok(sh.my_pe() as c_int))
    })
}

/// The number of PEs (-1 before `shmem_init`).
#[no_mangle]
pub extern "C" fn shmem_n_pes() -> c_int {
    value("shmem_n_pes", -1, || {
        state::with(|sh| Ok(sh.n_pes() as c_int))
    })
}

/// Whether PE `pe` is reachable (1) or not (0).
#[no_mangle]
pub extern "C" fn shmem_pe_accessible(pe: c_int) -> c_int {
    native::xpushmem_pe_accessible(pe)
}

/// Whether `addr` is symmetric and reachable on PE `pe` (1) or not (0).
#[no_mangle]
pub extern "C" fn shmem_addr_accessible(addr: *const c_void, pe: c_int) -> c_int {
    native::xpushmem_addr_accessible(addr, pe)
}

/// A local address through which PE `pe`'s copy of `dest` can be accessed with loads and stores, or NULL.
#[no_mangle]
pub extern "C" fn shmem_ptr(dest: *const c_void, pe: c_int) -> *mut c_void {
    value("shmem_ptr", std::ptr::null_mut(), || {
        imp::ptr("shmem_ptr", dest, pe)
    })
}

/// The OpenSHMEM specification version implemented (1.5).
///
/// # Safety
/// `major`, `minor` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmem_info_get_version(major: *mut c_int, minor: *mut c_int) {
    // SAFETY: the caller's contract.
    unsafe {
        write_out(major, native::XPUSHMEM_SPEC_MAJOR_VERSION);
        write_out(minor, native::XPUSHMEM_SPEC_MINOR_VERSION);
    }
}

/// The vendor string into `name` (room for `SHMEM_MAX_NAME_LEN` bytes).
///
/// # Safety
/// `name` is NULL or writable for `SHMEM_MAX_NAME_LEN` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmem_info_get_name(name: *mut c_char) {
    // SAFETY: the caller's contract.
    unsafe { native::copy_name(name, VENDOR_STRING) }
}

// ---------------------------------------------------------------------------------------------------------------
// Memory management

/// Allocate `size` symmetric bytes (collective). NULL for 0 bytes or on error.
#[no_mangle]
pub extern "C" fn shmem_malloc(size: usize) -> *mut c_void {
    alloc_value("shmem_malloc", || {
        imp::alloc("shmem_malloc", size, 1, false)
    })
}

/// `shmem_malloc`; the hints are accepted and ignored (every allocation suits every use here).
#[no_mangle]
pub extern "C" fn shmem_malloc_with_hints(size: usize, hints: c_long) -> *mut c_void {
    let _ = hints;
    alloc_value("shmem_malloc_with_hints", || {
        imp::alloc("shmem_malloc_with_hints", size, 1, false)
    })
}

/// The allocation routines' result: the specification defines a null return when the space cannot be allocated,
/// so a size the heap cannot hold (an exhausted heap, more than the whole heap, a `count * size` that overflows)
/// is a status (recorded for `xpushmem_last_error`, never an abort, whatever `XPUSHMEM_ERROR_MODE` says); every
/// other failure follows the error mode.
fn alloc_value(call: &str, f: impl FnOnce() -> Result<*mut c_void, Failure>) -> *mut c_void {
    use xpushmem_ffi_core::rt::Error;
    let mut exhausted = None;
    let p = value(call, std::ptr::null_mut(), || match f() {
        Err(Failure::Error(
            e @ (Error::HeapExhausted { .. }
            | Error::InvalidArgument {
                name: "len" | "count",
                ..
            }),
        )) => {
            exhausted = Some(e);
            Ok(std::ptr::null_mut())
        }
        r => r,
    });
    if let Some(e) = exhausted {
        error::record(call, Failure::Error(e));
    }
    p
}

/// Allocate `count * size` zeroed symmetric bytes (collective).
#[no_mangle]
pub extern "C" fn shmem_calloc(count: usize, size: usize) -> *mut c_void {
    let call = "shmem_calloc";
    alloc_value(call, || {
        let bytes = count.checked_mul(size).ok_or_else(|| {
            Failure::Error(xpushmem_ffi_core::rt::Error::InvalidArgument {
                name: "count",
                value: count.to_string(),
                reason: format!("{call}: count * size ({count} * {size}) overflows"),
            })
        })?;
        imp::alloc(call, bytes, 1, true)
    })
}

/// Allocate `size` symmetric bytes aligned to `alignment` (collective).
#[no_mangle]
pub extern "C" fn shmem_align(alignment: usize, size: usize) -> *mut c_void {
    alloc_value("shmem_align", || {
        imp::alloc("shmem_align", size, alignment.max(1), false)
    })
}

/// Resize a symmetric allocation (collective).
#[no_mangle]
pub extern "C" fn shmem_realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    alloc_value("shmem_realloc", || imp::realloc("shmem_realloc", ptr, size))
}

/// Free a symmetric allocation (collective).
#[no_mangle]
pub extern "C" fn shmem_free(ptr: *mut c_void) {
    void("shmem_free", || imp::free("shmem_free", ptr))
}

// ---------------------------------------------------------------------------------------------------------------
// Ordering, barriers, signals

/// Order puts, AMOs and signals to each PE.
#[no_mangle]
pub extern "C" fn shmem_fence() {
    void("shmem_fence", || state::with(|sh| Ok(sh.fence()?)))
}

/// Complete every outstanding put, AMO and signal.
#[no_mangle]
pub extern "C" fn shmem_quiet() {
    void("shmem_quiet", || state::with(|sh| Ok(sh.quiet()?)))
}

/// `shmem_fence` on a context.
#[no_mangle]
pub extern "C" fn shmem_ctx_fence(ctx: shmem_ctx_t) {
    void("shmem_ctx_fence", || {
        imp::check_ctx(ctx, "shmem_ctx_fence")?;
        state::with(|sh| Ok(sh.fence()?))
    })
}

/// `shmem_quiet` on a context.
#[no_mangle]
pub extern "C" fn shmem_ctx_quiet(ctx: shmem_ctx_t) {
    void("shmem_ctx_quiet", || {
        imp::check_ctx(ctx, "shmem_ctx_quiet")?;
        state::with(|sh| Ok(sh.quiet()?))
    })
}

/// Complete outstanding operations and synchronise all PEs.
#[no_mangle]
pub extern "C" fn shmem_barrier_all() {
    void("shmem_barrier_all", || {
        state::with(|sh| Ok(sh.barrier_all()?))
    })
}

/// Synchronise all PEs.
#[no_mangle]
pub extern "C" fn shmem_sync_all() {
    void("shmem_sync_all", || state::with(|sh| Ok(sh.sync_all()?)))
}

/// Atomically read this PE's signal word.
///
/// # Safety
/// `sig_addr` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn shmem_signal_fetch(sig_addr: *const u64) -> u64 {
    value("shmem_signal_fetch", 0, || {
        imp::signal_fetch("shmem_signal_fetch", sig_addr)
    })
}

/// Wait until this PE's signal word satisfies `<cmp> cmp_value`; the satisfying value.
///
/// # Safety
/// `sig_addr` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn shmem_signal_wait_until(
    sig_addr: *mut u64,
    cmp: c_int,
    cmp_value: u64,
) -> u64 {
    value("shmem_signal_wait_until", 0, || {
        imp::signal_wait_until("shmem_signal_wait_until", sig_addr, cmp, cmp_value)
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Contexts

/// Create a context (`options` accepted: SHMEM_CTX_PRIVATE, SERIALIZED, NOSTORE). 0 on success.
///
/// # Safety
/// `ctx` is writable.
#[no_mangle]
pub unsafe extern "C" fn shmem_ctx_create(options: c_long, ctx: *mut shmem_ctx_t) -> c_int {
    // SAFETY: the caller's contract on `ctx`.
    unsafe {
        teams::create_ctx(
            "shmem_ctx_create",
            teams::WORLD as shmem_team_t,
            options,
            ctx,
        )
    }
}

/// Create a context on `team`. 0 on success.
///
/// # Safety
/// `ctx` is writable.
#[no_mangle]
pub unsafe extern "C" fn shmem_team_create_ctx(
    team: shmem_team_t,
    options: c_long,
    ctx: *mut shmem_ctx_t,
) -> c_int {
    // SAFETY: the caller's contract on `ctx`.
    unsafe { teams::create_ctx("shmem_team_create_ctx", team, options, ctx) }
}

/// Destroy a context (quiet first).
#[no_mangle]
pub extern "C" fn shmem_ctx_destroy(ctx: shmem_ctx_t) {
    void("shmem_ctx_destroy", || {
        state::with(|sh| Ok(sh.quiet()?))?;
        imp::ctx_destroy(ctx, "shmem_ctx_destroy")?;
        teams::forget_ctx(ctx);
        Ok(())
    })
}

/// The team of a context into `*team`. 0 on success.
///
/// # Safety
/// `team` is writable.
#[no_mangle]
pub unsafe extern "C" fn shmem_ctx_get_team(ctx: shmem_ctx_t, team: *mut shmem_team_t) -> c_int {
    // The specification: SHMEM_CTX_INVALID gives SHMEM_TEAM_INVALID and a nonzero return.
    teams::spec_status("shmem_ctx_get_team", || {
        // SAFETY: the caller's contract on `team`.
        unsafe { write_out(team, std::ptr::null_mut()) };
        imp::check_ctx(ctx, "shmem_ctx_get_team")?;
        // SAFETY: as above.
        unsafe { write_out(team, teams::team_of_ctx(ctx)) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------------------------
// The typed and sized families, plain and on a context (macro-generated)

use xpushmem_ffi_core::error::void as w;

xpushmem_ffi_core::for_rma_types!(xpushmem_ffi_core::rma_typed; shmem [], (), w);
xpushmem_ffi_core::for_longdouble!(xpushmem_ffi_core::rma_typed; shmem [], (), w);
xpushmem_ffi_core::for_rma_types!(xpushmem_ffi_core::rma_pg; shmem [], (), w);
xpushmem_ffi_core::for_sizes!(xpushmem_ffi_core::rma_sized; shmem [], (), w);
xpushmem_ffi_core::rma_mem!(shmem [], (), w);
xpushmem_ffi_core::for_amo_std_types!(xpushmem_ffi_core::amo_ext; shmem [], (), w, _nbi, (), w);
xpushmem_ffi_core::for_amo_float_types!(xpushmem_ffi_core::amo_ext; shmem [], (), w, _nbi, (), w);
xpushmem_ffi_core::for_amo_std_types!(xpushmem_ffi_core::amo_std; shmem [], (), w, _nbi, (), w);
xpushmem_ffi_core::for_amo_bitwise_types!(xpushmem_ffi_core::amo_bitwise; shmem [], (), w, _nbi, (), w, and, And);
xpushmem_ffi_core::for_amo_bitwise_types!(xpushmem_ffi_core::amo_bitwise; shmem [], (), w, _nbi, (), w, or, Or);
xpushmem_ffi_core::for_amo_bitwise_types!(xpushmem_ffi_core::amo_bitwise; shmem [], (), w, _nbi, (), w, xor, Xor);
xpushmem_ffi_core::for_amo_std_types!(xpushmem_ffi_core::sync_typed; shmem, (), w);
xpushmem_ffi_core::for_sync16_types!(xpushmem_ffi_core::sync_typed; shmem, (), w);

xpushmem_ffi_core::for_rma_types!(xpushmem_ffi_core::rma_typed; shmem_ctx [ctx: shmem_ctx_t], (), w);
xpushmem_ffi_core::for_longdouble!(xpushmem_ffi_core::rma_typed; shmem_ctx [ctx: shmem_ctx_t], (), w);
xpushmem_ffi_core::for_rma_types!(xpushmem_ffi_core::rma_pg; shmem_ctx [ctx: shmem_ctx_t], (), w);
xpushmem_ffi_core::for_sizes!(xpushmem_ffi_core::rma_sized; shmem_ctx [ctx: shmem_ctx_t], (), w);
xpushmem_ffi_core::rma_mem!(shmem_ctx [ctx: shmem_ctx_t], (), w);
xpushmem_ffi_core::for_amo_std_types!(xpushmem_ffi_core::amo_ext; shmem_ctx [ctx: shmem_ctx_t], (), w, _nbi, (), w);
xpushmem_ffi_core::for_amo_float_types!(xpushmem_ffi_core::amo_ext; shmem_ctx [ctx: shmem_ctx_t], (), w, _nbi, (), w);
xpushmem_ffi_core::for_amo_std_types!(xpushmem_ffi_core::amo_std; shmem_ctx [ctx: shmem_ctx_t], (), w, _nbi, (), w);
xpushmem_ffi_core::for_amo_bitwise_types!(xpushmem_ffi_core::amo_bitwise; shmem_ctx [ctx: shmem_ctx_t], (), w, _nbi, (), w, and, And);
xpushmem_ffi_core::for_amo_bitwise_types!(xpushmem_ffi_core::amo_bitwise; shmem_ctx [ctx: shmem_ctx_t], (), w, _nbi, (), w, or, Or);
xpushmem_ffi_core::for_amo_bitwise_types!(xpushmem_ffi_core::amo_bitwise; shmem_ctx [ctx: shmem_ctx_t], (), w, _nbi, (), w, xor, Xor);
