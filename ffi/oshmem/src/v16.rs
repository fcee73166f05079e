//! Routines of OpenSHMEM 1.6: the interleaved block transfers (`shmem_ibput`, `shmem_ibget`, typed, sized and on a
//! context), `shmem_signal_add`/`shmem_signal_set`, `shmem_pe_quiet`, the session routines and
//! `shmem_query_initialized`.

use std::ffi::{c_int, c_long, c_void};
use xpushmem_ffi_core::error::{void, Failure};
use xpushmem_ffi_core::rt::Error;
use xpushmem_ffi_core::{imp, state, teams};

/// The direction of an interleaved block transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// `ibput`: local source blocks to the symmetric destination on the PE.
    Put,
    /// `ibget`: the PE's symmetric source blocks to the local destination.
    Get,
}

/// One stride argument: at least `bsize` (1.6: "must be greater than or equal to bsize").
fn stride(call: &str, name: &'static str, v: isize, bsize: usize) -> Result<usize, Failure> {
    usize::try_from(v)
        .ok()
        .filter(|&s| s >= bsize)
        .ok_or_else(|| {
            Error::invalid(
                name,
                v,
                format!("{call}: the stride between blocks must be at least bsize = {bsize}"),
            )
            .into()
        })
}

/// `nblocks` blocks of `bsize` elements of `elem` bytes: block `i` moves between `source + i * sst` and
/// `dest + i * dst` (elements), each block one put or get with its checks (`dest`/`source` symmetric on the remote
/// side, the PE relative to the context's team).
///
/// # Safety
/// The local side (`source` for a put, `dest` for a get) is valid for every block it names.
#[allow(clippy::too_many_arguments)]
pub unsafe fn ib(
    call: &str,
    dir: Dir,
    ctx: Option<*mut c_void>,
    dest: *mut c_void,
    source: *const c_void,
    dst: isize,
    sst: isize,
    bsize: usize,
    nblocks: usize,
    elem: usize,
    align: usize,
    pe: c_int,
) -> Result<(), Failure> {
    let (pe, dom) = match ctx {
        Some(ctx) => teams::ctx_route(ctx, pe, call)?,
        None => (pe, imp::Domain::DEFAULT),
    };
    let (dst, sst) = (
        stride(call, "dst", dst, bsize)?,
        stride(call, "sst", sst, bsize)?,
    );
    if bsize == 0 || nblocks == 0 {
        return Ok(());
    }
    let span = |s: usize| {
        s.checked_mul(nblocks - 1)
            .and_then(|x| x.checked_add(bsize))
            .and_then(|x| x.checked_mul(elem))
            .ok_or_else(|| {
                Error::invalid(
                    "nblocks",
                    nblocks,
                    format!("{call}: the blocks' extent overflows"),
                )
            })
    };
    span(dst)?;
    span(sst)?;
    for i in 0..nblocks {
        let d = dest
            .cast::<u8>()
            .wrapping_add(i * dst * elem)
            .cast::<c_void>();
        let s = source
            .cast::<u8>()
            .wrapping_add(i * sst * elem)
            .cast::<c_void>();
        match dir {
            // SAFETY: the caller's contract on the local source covers this block; `d` is checked by put.
            Dir::Put => unsafe { imp::put_as(call, d, s, bsize, elem, align, pe, false, dom) }?,
            // SAFETY: the caller's contract on the local dest covers this block; `s` is checked by get.
            Dir::Get => unsafe { imp::get(call, d, s, bsize, elem, align, pe) }?,
        }
    }
    Ok(())
}

/// `shmem_TYPE_ibput`/`_ibget`, plain and on a context, for each type.
macro_rules! ib_typed {
    ($p:ident $ctxspec:tt ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $( ib_typed!(@one $p $ctxspec ; ($n, $t, $c)); )* };
    (@one $p:ident [$($ctx:ident : $cty:ty)?] ; ($n:ident, $t:ty, $c:literal)) => { xpushmem_ffi_core::paste::paste! {
        #[doc = concat!("Interleaved block put of `", $c, "` (OpenSHMEM 1.6): `nblocks` blocks of `bsize` elements, block `i` from `source + i*sst` to `dest + i*dst` on `pe`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for every block; `dest` must be symmetric."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _ibput>]($($ctx: $cty, )?dest: *mut $t, source: *const $t, dst: isize, sst: isize, bsize: usize, nblocks: usize, pe: c_int) {
            let call = concat!(xpushmem_ffi_core::call_prefix!($p), "_", stringify!($n), "_ibput");
            let ctx: Option<*mut c_void> = None $( .or(Some($ctx)) )?;
            // SAFETY: the caller's contract on `source` is forwarded.
            void(call, || unsafe { crate::v16::ib(call, crate::v16::Dir::Put, ctx, dest.cast(), source.cast(), dst, sst, bsize, nblocks, ::core::mem::size_of::<$t>(), ::core::mem::align_of::<$t>(), pe) })
        }

        #[doc = concat!("Interleaved block get of `", $c, "` (OpenSHMEM 1.6): `nblocks` blocks of `bsize` elements, block `i` from `source + i*sst` on `pe` to `dest + i*dst`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be writable for every block; `source` must be symmetric."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _ibget>]($($ctx: $cty, )?dest: *mut $t, source: *const $t, dst: isize, sst: isize, bsize: usize, nblocks: usize, pe: c_int) {
            let call = concat!(xpushmem_ffi_core::call_prefix!($p), "_", stringify!($n), "_ibget");
            let ctx: Option<*mut c_void> = None $( .or(Some($ctx)) )?;
            // SAFETY: the caller's contract on `dest` is forwarded.
            void(call, || unsafe { crate::v16::ib(call, crate::v16::Dir::Get, ctx, dest.cast(), source.cast(), dst, sst, bsize, nblocks, ::core::mem::size_of::<$t>(), ::core::mem::align_of::<$t>(), pe) })
        }
    } };
}

/// `shmem_ibputSIZE`/`shmem_ibgetSIZE`, plain and on a context.
macro_rules! ib_sized {
    ($p:ident $ctxspec:tt ; $( ($bits:literal, $bytes:literal) ),* $(,)?) => { $( ib_sized!(@one $p $ctxspec ; ($bits, $bytes)); )* };
    (@one $p:ident [$($ctx:ident : $cty:ty)?] ; ($bits:literal, $bytes:literal)) => { xpushmem_ffi_core::paste::paste! {
        #[doc = concat!("Interleaved block put of ", stringify!($bits), "-bit elements (OpenSHMEM 1.6).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for every block; `dest` must be symmetric."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ibput $bits>]($($ctx: $cty, )?dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, bsize: usize, nblocks: usize, pe: c_int) {
            let call = concat!(xpushmem_ffi_core::call_prefix!($p), "_ibput", stringify!($bits));
            let ctx: Option<*mut c_void> = None $( .or(Some($ctx)) )?;
            // SAFETY: the caller's contract on `source` is forwarded.
            void(call, || unsafe { crate::v16::ib(call, crate::v16::Dir::Put, ctx, dest, source, dst, sst, bsize, nblocks, $bytes, 1, pe) })
        }

        #[doc = concat!("Interleaved block get of ", stringify!($bits), "-bit elements (OpenSHMEM 1.6).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be writable for every block; `source` must be symmetric."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ibget $bits>]($($ctx: $cty, )?dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, bsize: usize, nblocks: usize, pe: c_int) {
            let call = concat!(xpushmem_ffi_core::call_prefix!($p), "_ibget", stringify!($bits));
            let ctx: Option<*mut c_void> = None $( .or(Some($ctx)) )?;
            // SAFETY: the caller's contract on `dest` is forwarded.
            void(call, || unsafe { crate::v16::ib(call, crate::v16::Dir::Get, ctx, dest, source, dst, sst, bsize, nblocks, $bytes, 1, pe) })
        }
    } };
}

xpushmem_ffi_core::for_rma_types!(ib_typed; pshmem []);
xpushmem_ffi_core::for_longdouble!(ib_typed; pshmem []);
xpushmem_ffi_core::for_rma_types!(ib_typed; pshmem_ctx [ctx: *mut c_void]);
xpushmem_ffi_core::for_longdouble!(ib_typed; pshmem_ctx [ctx: *mut c_void]);
xpushmem_ffi_core::for_sizes!(ib_sized; pshmem []);
xpushmem_ffi_core::for_sizes!(ib_sized; pshmem_ctx [ctx: *mut c_void]);

/// `SHMEM_SIGNAL_SET` / `SHMEM_SIGNAL_ADD` of `shmem.h`.
const SIGNAL_SET: c_int = 0;
const SIGNAL_ADD: c_int = 1;

/// Update the signal word `sig_addr` on PE `pe` (relative to the context's team) with `op`, with no data.
fn signal_update(
    call: &str,
    ctx: Option<*mut c_void>,
    sig_addr: *mut u64,
    signal: u64,
    op: c_int,
    pe: c_int,
) {
    void(call, || {
        let (pe, dom) = match ctx {
            Some(ctx) => teams::ctx_route(ctx, pe, call)?,
            None => (pe, imp::Domain::DEFAULT),
        };
        // SAFETY: zero bytes of data: neither dest nor source is read or written.
        unsafe {
            imp::put_signal_in(
                call,
                std::ptr::null_mut(),
                std::ptr::null(),
                0,
                1,
                1,
                sig_addr,
                signal,
                op,
                pe,
                dom,
            )
        }
    })
}

/// Atomically add `signal` to the signal word `sig_addr` on PE `pe` (OpenSHMEM 1.6).
#[no_mangle]
pub extern "C" fn pshmem_signal_add(sig_addr: *mut u64, signal: u64, pe: c_int) {
    signal_update("shmem_signal_add", None, sig_addr, signal, SIGNAL_ADD, pe)
}

/// Atomically set the signal word `sig_addr` on PE `pe` to `signal` (OpenSHMEM 1.6).
#[no_mangle]
pub extern "C" fn pshmem_signal_set(sig_addr: *mut u64, signal: u64, pe: c_int) {
    signal_update("shmem_signal_set", None, sig_addr, signal, SIGNAL_SET, pe)
}

/// `shmem_signal_add` on a context (the PE relative to its team).
#[no_mangle]
pub extern "C" fn pshmem_ctx_signal_add(
    ctx: *mut c_void,
    sig_addr: *mut u64,
    signal: u64,
    pe: c_int,
) {
    signal_update(
        "shmem_ctx_signal_add",
        Some(ctx),
        sig_addr,
        signal,
        SIGNAL_ADD,
        pe,
    )
}

/// `shmem_signal_set` on a context (the PE relative to its team).
#[no_mangle]
pub extern "C" fn pshmem_ctx_signal_set(
    ctx: *mut c_void,
    sig_addr: *mut u64,
    signal: u64,
    pe: c_int,
) {
    signal_update(
        "shmem_ctx_signal_set",
        Some(ctx),
        sig_addr,
        signal,
        SIGNAL_SET,
        pe,
    )
}

/// Complete the operations to the `npes` PEs of `target_pes` (OpenSHMEM 1.6): each PE is checked, then the
/// operations complete as `shmem_quiet` (or `shmem_ctx_quiet` of the context) completes them.
///
/// # Safety
/// `target_pes` is readable for `npes` ints (NULL when `npes` is 0).
unsafe fn pe_quiet(call: &str, ctx: Option<*mut c_void>, target_pes: *const c_int, npes: usize) {
    void(call, || {
        let dom = match ctx {
            Some(ctx) if ctx.is_null() => return Ok(()), // SHMEM_CTX_INVALID: no operation, as for shmem_ctx_quiet
            Some(ctx) => imp::ctx_route(ctx, call)?.1,
            None => imp::Domain::DEFAULT,
        };
        if npes > 0 {
            if target_pes.is_null() {
                return Err(
                    Error::invalid("target_pes", "NULL", format!("{call}: npes = {npes}")).into(),
                );
            }
            // SAFETY: the caller's contract.
            let pes = unsafe { std::slice::from_raw_parts(target_pes, npes) };
            for &pe in pes {
                let pe = match ctx {
                    Some(ctx) => teams::ctx_pe(ctx, pe, call)?,
                    None => pe,
                };
                state::with(|sh| {
                    if usize::try_from(pe).is_ok_and(|p| p < sh.n_pes()) {
                        Ok(())
                    } else {
                        Err(Error::InvalidPe {
                            pe: pe as i64,
                            n_pes: sh.n_pes(),
                            context: call.into(),
                        }
                        .into())
                    }
                })?;
            }
        }
        state::with(|sh| Ok(sh.on(dom)?.quiet()?))
    })
}

/// `shmem_quiet` for the PEs of `target_pes` only (OpenSHMEM 1.6).
///
/// # Safety
/// `target_pes` is readable for `npes` ints.
#[no_mangle]
pub unsafe extern "C" fn pshmem_pe_quiet(target_pes: *const c_int, npes: usize) {
    // SAFETY: forwarded.
    unsafe { pe_quiet("shmem_pe_quiet", None, target_pes, npes) }
}

/// `shmem_pe_quiet` on a context (the PEs relative to its team; SHMEM_CTX_INVALID: no operation).
///
/// # Safety
/// `target_pes` is readable for `npes` ints.
#[no_mangle]
pub unsafe extern "C" fn pshmem_ctx_pe_quiet(
    ctx: *mut c_void,
    target_pes: *const c_int,
    npes: usize,
) {
    // SAFETY: forwarded.
    unsafe { pe_quiet("shmem_ctx_pe_quiet", Some(ctx), target_pes, npes) }
}

/// Start a session on a context (OpenSHMEM 1.6): the options are hints, and this transport completes every
/// operation when it returns, so there is nothing to tune; the context is checked (SHMEM_CTX_INVALID: no action).
#[no_mangle]
pub extern "C" fn pshmem_ctx_session_start(
    ctx: *mut c_void,
    options: c_long,
    config: *const c_void,
    config_mask: c_long,
) {
    let _ = (options, config, config_mask);
    void("shmem_ctx_session_start", || {
        if ctx.is_null() {
            return Ok(());
        }
        imp::check_ctx(ctx, "shmem_ctx_session_start")?;
        Ok(())
    })
}

/// Stop the session of a context (OpenSHMEM 1.6): completes its operations, as `shmem_ctx_quiet`.
#[no_mangle]
pub extern "C" fn pshmem_ctx_session_stop(ctx: *mut c_void) {
    void("shmem_ctx_session_stop", || {
        if ctx.is_null() {
            return Ok(());
        }
        let (_, dom) = imp::ctx_route(ctx, "shmem_ctx_session_stop")?;
        state::with(|sh| Ok(sh.on(dom)?.quiet()?))
    })
}

/// Whether the library is initialised (OpenSHMEM 1.6): `*initialized` is 1 between `shmem_init` and
/// `shmem_finalize`, 0 otherwise.
///
/// # Safety
/// `initialized` is writable (NULL: nothing is written).
#[no_mangle]
pub unsafe extern "C" fn pshmem_query_initialized(initialized: *mut c_int) {
    let on = state::with(|_| Ok(())).is_ok();
    // SAFETY: the caller's contract.
    unsafe { xpushmem_ffi_core::error::write_out(initialized, c_int::from(on)) };
}
