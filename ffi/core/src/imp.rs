//! The operations behind every exported function, on C arguments (raw pointers, `int` PEs and operators): they
//! validate the arguments, naming the C call and the argument in every error, and call the runtime.
//!
//! RMA works on bytes (the runtime's `u8` slices), so every C type of any size is covered, `long double`
//! included; atomics and waits use the runtime's typed calls on the Rust type of the same size and signedness.

use crate::error::Failure;
use crate::state;
use std::ffi::{c_int, c_void};
pub use xpushmem_rt::Domain;
use xpushmem_rt::{
    AtomicInt, AtomicWord, Cmp, Error, Shmem, SignalOp, SymRef, SymSlice, Symmetric, SyncInt,
    ThreadLevel,
};

/// Result of the helpers.
pub type R<T> = Result<T, Failure>;

/// `pe` as a PE number of the world: negative or `>= n_pes` is an InvalidPe error naming `call`.
pub fn pe_arg(sh: &Shmem, pe: c_int, call: &str) -> Result<usize, Error> {
    if pe < 0 || pe as usize >= sh.n_pes() {
        return Err(Error::InvalidPe {
            pe: pe as i64,
            n_pes: sh.n_pes(),
            context: call.to_string(),
        });
    }
    Ok(pe as usize)
}

/// The symmetric byte range `[addr, addr + bytes)` of this PE (in its heap or, under the OpenSHMEM layer, its
/// executable's data segment), `addr` aligned to `align`: the runtime's one address translation.
pub fn sym_bytes(
    sh: &Shmem,
    addr: *const c_void,
    bytes: usize,
    align: usize,
    call: &str,
    arg: &str,
) -> Result<SymSlice<u8>, Error> {
    sh.sym_slice_in::<u8>(addr as usize, bytes, align, &|| {
        format!("{call}: argument {arg}")
    })
}

/// A symmetric element of `T` at `addr`.
pub fn sym_ref<T: Symmetric>(
    sh: &Shmem,
    addr: *const T,
    call: &str,
    arg: &str,
) -> Result<SymRef<T>, Error> {
    sym_bytes(
        sh,
        addr.cast(),
        std::mem::size_of::<T>(),
        std::mem::align_of::<T>(),
        call,
        arg,
    )?;
    sh.sym_slice_from_addr::<T>(addr as usize, 1)?.at(0)
}

/// `nelems` symmetric elements of `T` at `addr`.
pub fn sym_elems<T: Symmetric>(
    sh: &Shmem,
    addr: *const T,
    nelems: usize,
    call: &str,
    arg: &str,
) -> Result<SymSlice<T>, Error> {
    let bytes = nelems
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| {
            Error::invalid(
                "nelems",
                nelems,
                format!("{call}: the byte count overflows"),
            )
        })?;
    sym_bytes(sh, addr.cast(), bytes, std::mem::align_of::<T>(), call, arg)?;
    sh.sym_slice_from_addr::<T>(addr as usize, nelems)
}

fn byte_count(nelems: usize, elem: usize, call: &str) -> Result<usize, Error> {
    nelems
        .checked_mul(elem)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| {
            Error::invalid(
                "nelems",
                nelems,
                format!("{call}: nelems * {elem} bytes overflows"),
            )
        })
}

/// A local buffer of `bytes` bytes for reading.
///
/// # Safety
/// `p` is NULL or valid for reads of `bytes` bytes for the returned lifetime.
unsafe fn local<'a>(
    p: *const c_void,
    bytes: usize,
    call: &str,
    arg: &'static str,
) -> Result<&'a [u8], Error> {
    if bytes == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::invalid(
            arg,
            "NULL",
            format!("{call}: must point to {bytes} readable bytes"),
        ));
    }
    // SAFETY: non-NULL; the caller guarantees `bytes` readable bytes at `p`; bytes <= isize::MAX (byte_count).
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), bytes) })
}

/// A local buffer of `bytes` bytes for writing.
///
/// # Safety
/// `p` is NULL or valid for writes of `bytes` bytes for the returned lifetime, and not otherwise referenced.
unsafe fn local_mut<'a>(
    p: *mut c_void,
    bytes: usize,
    call: &str,
    arg: &'static str,
) -> Result<&'a mut [u8], Error> {
    if bytes == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::invalid(
            arg,
            "NULL",
            format!("{call}: must point to {bytes} writable bytes"),
        ));
    }
    // SAFETY: non-NULL; the caller guarantees `bytes` writable bytes at `p`, not aliased by a Rust reference.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), bytes) })
}

/// Put `nelems` elements of `elem` bytes from local `src` to symmetric `dest` on `pe`.
///
/// # Safety
/// `src` is valid for reads of `nelems * elem` bytes.
pub unsafe fn put(
    call: &str,
    dest: *mut c_void,
    src: *const c_void,
    nelems: usize,
    elem: usize,
    align: usize,
    pe: c_int,
) -> R<()> {
    // SAFETY: forwarded caller contract on `src`.
    unsafe {
        put_as(
            call,
            dest,
            src,
            nelems,
            elem,
            align,
            pe,
            false,
            Domain::DEFAULT,
        )
    }
}

/// [`put`] in domain `dom` (a context's), or with `nbi` its non-blocking form: from a registered buffer
/// (`xpushmemx_buffer_register`) started in place and completed by `quiet` (the source must not change until then);
/// from any other source, [`put`], complete (the source reusable) on return.
///
/// # Safety
/// `src` is valid for reads of `nelems * elem` bytes (until `quiet` when registered and `nbi`).
#[allow(clippy::too_many_arguments)]
pub unsafe fn put_as(
    call: &str,
    dest: *mut c_void,
    src: *const c_void,
    nelems: usize,
    elem: usize,
    align: usize,
    pe: c_int,
    nbi: bool,
    dom: Domain,
) -> R<()> {
    state::with(|sh| {
        let pe = pe_arg(sh, pe, call)?;
        let bytes = byte_count(nelems, elem, call)?;
        if bytes == 0 {
            return Ok(());
        }
        let on = sh.on(dom)?;
        let d = sym_bytes(sh, dest, bytes, align, call, "dest")?;
        // SAFETY: forwarded caller contract on `src`.
        let s = unsafe { local(src, bytes, call, "source") }?;
        if nbi && sh.is_registered(s.as_ptr(), bytes) {
            // The handle is let go: the registry and `quiet` complete the operation.
            std::mem::forget(on.put_nbi(d, s, pe)?);
            return Ok(());
        }
        Ok(on.put(d, s, pe)?)
    })
}

/// Get `nelems` elements of `elem` bytes from symmetric `src` on `pe` into local `dest`.
///
/// # Safety
/// `dest` is valid for writes of `nelems * elem` bytes.
pub unsafe fn get(
    call: &str,
    dest: *mut c_void,
    src: *const c_void,
    nelems: usize,
    elem: usize,
    align: usize,
    pe: c_int,
) -> R<()> {
    // SAFETY: forwarded caller contract on `dest`.
    unsafe {
        get_as(
            call,
            dest,
            src,
            nelems,
            elem,
            align,
            pe,
            false,
            Domain::DEFAULT,
        )
    }
}

/// [`get`] in domain `dom` (a context's), or with `nbi` its non-blocking form: into a registered buffer started in
/// place and completed by `quiet` (`dest` is filled then); into any other buffer, [`get`], complete on return.
///
/// # Safety
/// `dest` is valid for writes of `nelems * elem` bytes (until `quiet` when registered and `nbi`), and not
/// otherwise referenced meanwhile.
#[allow(clippy::too_many_arguments)]
pub unsafe fn get_as(
    call: &str,
    dest: *mut c_void,
    src: *const c_void,
    nelems: usize,
    elem: usize,
    align: usize,
    pe: c_int,
    nbi: bool,
    dom: Domain,
) -> R<()> {
    state::with(|sh| {
        let pe = pe_arg(sh, pe, call)?;
        let bytes = byte_count(nelems, elem, call)?;
        if bytes == 0 {
            return Ok(());
        }
        let on = sh.on(dom)?;
        let s = sym_bytes(sh, src, bytes, align, call, "source")?;
        // SAFETY: forwarded caller contract on `dest`.
        let d = unsafe { local_mut(dest, bytes, call, "dest") }?;
        if nbi && sh.is_registered(d.as_ptr(), bytes) {
            // Written in place by the transport; the registry and `quiet` complete it.
            std::mem::forget(on.get_nbi(d, s, pe)?);
            return Ok(());
        }
        Ok(sh.get(d, s, pe)?)
    })
}

/// Store one value on `pe`.
pub fn p<T: Copy>(call: &str, dest: *mut T, value: T, pe: c_int) -> R<()> {
    p_in(call, dest, value, pe, Domain::DEFAULT)
}

/// [`p`] in domain `dom` (a context's).
pub fn p_in<T: Copy>(call: &str, dest: *mut T, value: T, pe: c_int, dom: Domain) -> R<()> {
    // SAFETY: `value` is a live local of size_of::<T>() bytes.
    unsafe {
        put_as(
            call,
            dest.cast(),
            (&value as *const T).cast(),
            1,
            std::mem::size_of::<T>(),
            std::mem::align_of::<T>(),
            pe,
            false,
            dom,
        )
    }
}

/// Load one value from `pe`.
pub fn g<T: Copy + Default>(call: &str, src: *const T, pe: c_int) -> R<T> {
    let mut v = T::default();
    // SAFETY: `v` is a live local of size_of::<T>() bytes, not otherwise referenced.
    unsafe {
        get(
            call,
            (&mut v as *mut T).cast(),
            src.cast(),
            1,
            std::mem::size_of::<T>(),
            std::mem::align_of::<T>(),
            pe,
        )
    }?;
    Ok(v)
}

fn stride_arg(name: &'static str, s: isize, call: &str) -> Result<usize, Error> {
    if s < 1 {
        return Err(Error::invalid(
            name,
            s,
            format!("{call}: strides are in elements and must be at least 1"),
        ));
    }
    Ok(s as usize)
}

/// Elements spanned by `nelems` elements every `stride` (the argument `name`) of `elem` bytes. An overflow (past
/// `isize::MAX` bytes) names the argument that causes it, with the value passed: `nelems` when even a contiguous
/// run of that many elements overflows, the stride otherwise.
fn span(
    nelems: usize,
    stride: usize,
    name: &'static str,
    elem: usize,
    call: &str,
) -> Result<usize, Error> {
    if nelems == 0 {
        return Ok(0);
    }
    let fits = |e: usize| {
        e.checked_mul(elem)
            .is_some_and(|b| b <= isize::MAX as usize)
    };
    if !fits(nelems) {
        return Err(Error::invalid(
            "nelems",
            nelems,
            format!("{call}: nelems * {elem} bytes overflows"),
        ));
    }
    (nelems - 1)
        .checked_mul(stride)
        .and_then(|x| x.checked_add(1))
        .filter(|&e| fits(e))
        .ok_or_else(|| {
            Error::invalid(
                name,
                stride,
                format!(
                    "{call}: {nelems} elements of {elem} bytes every {name} = {stride} elements span more than \
                     the address space"
                ),
            )
        })
}

macro_rules! by_width {
    ($elem:expr, $call:expr, |$t:ident| $body:expr) => {
        match $elem {
            1 => {
                type $t = u8;
                $body
            }
            2 => {
                type $t = u16;
                $body
            }
            4 => {
                type $t = u32;
                $body
            }
            8 => {
                type $t = u64;
                $body
            }
            w => Err(Error::invalid(
                "element size",
                w,
                format!("{}: must be 1, 2, 4, 8 or 16 bytes", $call),
            )
            .into()),
        }
    };
}

/// Strided put of elements of `elem` bytes (1, 2, 4, 8 or 16); strides in elements, at least 1.
///
/// # Safety
/// `src` is valid for reads of the `nelems` elements at stride `sst`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn iput(
    call: &str,
    dest: *mut c_void,
    src: *const c_void,
    dst: isize,
    sst: isize,
    nelems: usize,
    elem: usize,
    pe: c_int,
) -> R<()> {
    // SAFETY: forwarded caller contract.
    unsafe { iput_in(call, dest, src, dst, sst, nelems, elem, pe, Domain::DEFAULT) }
}

/// [`iput`] in domain `dom` (a context's).
///
/// # Safety
/// As [`iput`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn iput_in(
    call: &str,
    dest: *mut c_void,
    src: *const c_void,
    dst: isize,
    sst: isize,
    nelems: usize,
    elem: usize,
    pe: c_int,
    dom: Domain,
) -> R<()> {
    if elem == 16 {
        // The strides as passed are checked before they are doubled for the halves.
        let (du, su) = (stride_arg("dst", dst, call)?, stride_arg("sst", sst, call)?);
        span(nelems, du, "dst", 16, call)?;
        span(nelems, su, "sst", 16, call)?;
        // Two passes of 8-byte words at double strides: the low and the high halves.
        let (d2, s2) = (dst.saturating_mul(2), sst.saturating_mul(2));
        let (d, s) = (dest.cast::<u8>(), src.cast::<u8>());
        // SAFETY: forwarded caller contract; the halves lie inside the caller's elements.
        unsafe { iput_in(call, d.cast(), s.cast(), d2, s2, nelems, 8, pe, dom) }?;
        if nelems > 0 {
            // SAFETY: as above; the +8 offsets stay inside the first element (validated by the first pass).
            unsafe {
                iput_in(
                    call,
                    d.wrapping_add(8).cast(),
                    s.wrapping_add(8).cast(),
                    d2,
                    s2,
                    nelems,
                    8,
                    pe,
                    dom,
                )
            }?;
        }
        return Ok(());
    }
    state::with(|sh| {
        let pe = pe_arg(sh, pe, call)?;
        let (dst, sst) = (stride_arg("dst", dst, call)?, stride_arg("sst", sst, call)?);
        let (dspan, sspan) = (
            span(nelems, dst, "dst", elem, call)?,
            span(nelems, sst, "sst", elem, call)?,
        );
        if nelems == 0 {
            return Ok(());
        }
        by_width!(elem, call, |W| {
            // Checked as bytes first: the errors name the argument.
            sym_bytes(sh, dest, byte_count(dspan, elem, call)?, elem, call, "dest")?;
            let d = sh.sym_slice_from_addr::<W>(dest as usize, dspan)?;
            if (src as usize) % elem != 0 {
                return Err(Error::invalid(
                    "source",
                    format!("{src:p}"),
                    format!("{call}: must be aligned to {elem} bytes"),
                )
                .into());
            }
            // SAFETY: forwarded caller contract on `src`; aligned (checked) for W.
            let s = unsafe { local(src, byte_count(sspan, elem, call)?, call, "source") }?;
            // SAFETY: `s` is aligned to size_of::<W>() (checked above) and holds sspan elements of W.
            let s = unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<W>(), sspan) };
            Ok(sh.on(dom)?.iput(d, s, dst, sst, nelems, pe)?)
        })
    })
}

/// Strided get of elements of `elem` bytes (1, 2, 4, 8 or 16).
///
/// # Safety
/// `dest` is valid for writes of the `nelems` elements at stride `dst`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn iget(
    call: &str,
    dest: *mut c_void,
    src: *const c_void,
    dst: isize,
    sst: isize,
    nelems: usize,
    elem: usize,
    pe: c_int,
) -> R<()> {
    if elem == 16 {
        // The strides as passed are checked before they are doubled for the halves.
        let (du, su) = (stride_arg("dst", dst, call)?, stride_arg("sst", sst, call)?);
        span(nelems, du, "dst", 16, call)?;
        span(nelems, su, "sst", 16, call)?;
        let (d2, s2) = (dst.saturating_mul(2), sst.saturating_mul(2));
        let (d, s) = (dest.cast::<u8>(), src.cast::<u8>());
        // SAFETY: forwarded caller contract; the halves lie inside the caller's elements.
        unsafe { iget(call, d.cast(), s.cast(), d2, s2, nelems, 8, pe) }?;
        if nelems > 0 {
            // SAFETY: as above.
            unsafe {
                iget(
                    call,
                    d.wrapping_add(8).cast(),
                    s.wrapping_add(8).cast(),
                    d2,
                    s2,
                    nelems,
                    8,
                    pe,
                )
            }?;
        }
        return Ok(());
    }
    state::with(|sh| {
        let pe = pe_arg(sh, pe, call)?;
        let (dst, sst) = (stride_arg("dst", dst, call)?, stride_arg("sst", sst, call)?);
        let (dspan, sspan) = (
            span(nelems, dst, "dst", elem, call)?,
            span(nelems, sst, "sst", elem, call)?,
        );
        if nelems == 0 {
            return Ok(());
        }
        by_width!(elem, call, |W| {
            // Checked as bytes first: the errors name the argument.
            sym_bytes(
                sh,
                src,
                byte_count(sspan, elem, call)?,
                elem,
                call,
                "source",
            )?;
            let s = sh.sym_slice_from_addr::<W>(src as usize, sspan)?;
            if (dest as usize) % elem != 0 {
                return Err(Error::invalid(
                    "dest",
                    format!("{dest:p}"),
                    format!("{call}: must be aligned to {elem} bytes"),
                )
                .into());
            }
            // SAFETY: forwarded caller contract on `dest`.
            let d = unsafe { local_mut(dest, byte_count(dspan, elem, call)?, call, "dest") }?;
            // SAFETY: `d` is aligned to size_of::<W>() (checked above) and holds dspan elements of W.
            let d = unsafe { std::slice::from_raw_parts_mut(d.as_mut_ptr().cast::<W>(), dspan) };
            Ok(sh.iget(d, s, dst, sst, nelems, pe)?)
        })
    })
}

/// The signal operator of a C `int` (`XPUSHMEM_SIGNAL_SET` = 0, `XPUSHMEM_SIGNAL_ADD` = 1).
pub fn sig_op_arg(op: c_int, call: &str) -> Result<SignalOp, Error> {
    match op {
        0 => Ok(SignalOp::Set),
        1 => Ok(SignalOp::Add),
        _ => Err(Error::invalid(
            "sig_op",
            op,
            format!("{call}: must be SIGNAL_SET (0) or SIGNAL_ADD (1)"),
        )),
    }
}

/// The comparison operator of a C `int` (`EQ, NE, GT, GE, LT, LE` = 0..5).
pub fn cmp_arg(cmp: c_int, call: &str) -> Result<Cmp, Error> {
    usize::try_from(cmp)
        .ok()
        .and_then(|i| Cmp::ALL.get(i).copied())
        .ok_or_else(|| {
            Error::invalid(
                "cmp",
                cmp,
                format!(
                    "{call}: must be one of CMP_EQ, CMP_NE, CMP_GT, CMP_GE, CMP_LT, CMP_LE (0..5)"
                ),
            )
        })
}

/// The thread level of a C `int` (`SINGLE, FUNNELED, SERIALIZED, MULTIPLE` = 0..3).
pub fn thread_level_arg(level: c_int, call: &str) -> Result<ThreadLevel, Error> {
    match level {
        0 => Ok(ThreadLevel::Single),
        1 => Ok(ThreadLevel::Funneled),
        2 => Ok(ThreadLevel::Serialized),
        3 => Ok(ThreadLevel::Multiple),
        _ => Err(Error::invalid("requested", level, format!("{call}: must be THREAD_SINGLE (0), THREAD_FUNNELED (1), THREAD_SERIALIZED (2) or THREAD_MULTIPLE (3)"))),
    }
}

/// The C value of a thread level.
pub fn thread_level_int(level: ThreadLevel) -> c_int {
    match level {
        ThreadLevel::Single => 0,
        ThreadLevel::Funneled => 1,
        ThreadLevel::Serialized => 2,
        ThreadLevel::Multiple => 3,
    }
}

/// Put with signal.
///
/// # Safety
/// `src` is valid for reads of `nelems * elem` bytes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn put_signal(
    call: &str,
    dest: *mut c_void,
    src: *const c_void,
    nelems: usize,
    elem: usize,
    align: usize,
    sig: *mut u64,
    value: u64,
    op: c_int,
    pe: c_int,
) -> R<()> {
    // SAFETY: forwarded caller contract.
    unsafe {
        put_signal_in(
            call,
            dest,
            src,
            nelems,
            elem,
            align,
            sig,
            value,
            op,
            pe,
            Domain::DEFAULT,
        )
    }
}

/// [`put_signal`] in domain `dom` (a context's).
///
/// # Safety
/// As [`put_signal`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn put_signal_in(
    call: &str,
    dest: *mut c_void,
    src: *const c_void,
    nelems: usize,
    elem: usize,
    align: usize,
    sig: *mut u64,
    value: u64,
    op: c_int,
    pe: c_int,
    dom: Domain,
) -> R<()> {
    state::with(|sh| {
        let pe = pe_arg(sh, pe, call)?;
        let op = sig_op_arg(op, call)?;
        let bytes = byte_count(nelems, elem, call)?;
        let sig = sym_ref(sh, sig.cast_const(), call, "sig_addr")?;
        let d = if bytes == 0 {
            sh.sym_slice_from_addr::<u8>(sh.heap_base() as usize, 0)?
        } else {
            sym_bytes(sh, dest, bytes, align, call, "dest")?
        };
        // SAFETY: forwarded caller contract on `src`.
        let s = unsafe { local(src, bytes, call, "source") }?;
        Ok(sh.on(dom)?.put_signal(d, s, sig, value, op, pe)?)
    })
}

/// Read this PE's signal word.
pub fn signal_fetch(call: &str, sig: *const u64) -> R<u64> {
    state::with(|sh| Ok(sh.signal_fetch(sym_ref(sh, sig, call, "sig_addr")?)?))
}

/// Wait on this PE's signal word; the satisfying value.
pub fn signal_wait_until(call: &str, sig: *mut u64, cmp: c_int, value: u64) -> R<u64> {
    state::with(|sh| {
        let cmp = cmp_arg(cmp, call)?;
        Ok(sh.signal_wait_until(sym_ref(sh, sig.cast_const(), call, "sig_addr")?, cmp, value)?)
    })
}

/// An atomic operation of the C API.
#[derive(Debug, Clone, Copy)]
pub enum Amo<T> {
    /// Read.
    Fetch,
    /// Write.
    Set(T),
    /// Write, returning the old value.
    Swap(T),
    /// Write `value` if the word holds `cond`.
    CompareSwap {
        /// The expected value.
        cond: T,
        /// The new value.
        value: T,
    },
}

/// An atomic operation on integers.
#[derive(Debug, Clone, Copy)]
pub enum AmoInt<T> {
    /// Add one.
    Inc,
    /// Add.
    Add(T),
    /// Bitwise and.
    And(T),
    /// Bitwise or.
    Or(T),
    /// Bitwise xor.
    Xor(T),
}

/// Run an atomic on `dest` at `pe`; the previous value (the fetched value for `Fetch`, `T::default()` for Set).
pub fn amo<T: AtomicWord>(call: &str, dest: *const T, op: Amo<T>, pe: c_int) -> R<T> {
    amo_in(call, dest, op, pe, Domain::DEFAULT)
}

/// [`amo`] in domain `dom` (a context's): what matters to `Set`, the one that does not fetch (the others complete
/// on return, whatever the domain).
pub fn amo_in<T: AtomicWord>(
    call: &str,
    dest: *const T,
    op: Amo<T>,
    pe: c_int,
    dom: Domain,
) -> R<T> {
    state::with(|sh| {
        let pe = pe_arg(sh, pe, call)?;
        let r = sym_ref(sh, dest, call, "dest")?;
        Ok(match op {
            Amo::Fetch => sh.atomic_fetch(r, pe)?,
            Amo::Set(v) => {
                sh.on(dom)?.atomic_set(r, v, pe)?;
                T::default()
            }
            Amo::Swap(v) => sh.atomic_swap(r, v, pe)?,
            Amo::CompareSwap { cond, value } => sh.atomic_compare_swap(r, cond, value, pe)?,
        })
    })
}

/// Run an integer atomic on `dest` at `pe`; the previous value.
pub fn amo_int<T: AtomicInt>(call: &str, dest: *const T, op: AmoInt<T>, pe: c_int) -> R<T> {
    state::with(|sh| {
        let pe = pe_arg(sh, pe, call)?;
        let r = sym_ref(sh, dest, call, "dest")?;
        Ok(match op {
            AmoInt::Inc => sh.atomic_fetch_inc(r, pe)?,
            AmoInt::Add(v) => sh.atomic_fetch_add(r, v, pe)?,
            AmoInt::And(v) => sh.atomic_fetch_and(r, v, pe)?,
            AmoInt::Or(v) => sh.atomic_fetch_or(r, v, pe)?,
            AmoInt::Xor(v) => sh.atomic_fetch_xor(r, v, pe)?,
        })
    })
}

/// Which of a set of variables a wait or test needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// All (not skipped).
    All,
    /// Any one; the result is its index.
    Any,
    /// At least one; the result is the number of indices written.
    Some,
}

/// Wait until (or test whether) `ivar <cmp> value` on this PE.
pub fn wait_one<T: SyncInt>(call: &str, ivar: *mut T, cmp: c_int, value: T, test: bool) -> R<bool> {
    state::with(|sh| {
        let cmp = cmp_arg(cmp, call)?;
        let r = sym_ref(sh, ivar.cast_const(), call, "ivar")?;
        if test {
            Ok(sh.test(r, cmp, value)?)
        } else {
            sh.wait_until(r, cmp, value)?;
            Ok(true)
        }
    })
}

/// Wait for (or test) a set of variables. `values` is one value (`nvalues` = 1, the scalar forms) or one per
/// variable (the vector forms). Returns: `All` -> 1 if satisfied (tests) / 1 (waits); `Any` -> the index, or
/// `usize::MAX` when none; `Some` -> the number of indices written to `indices`.
///
/// # Safety
/// `status` is NULL or valid for reads of `nelems` ints; `values` is valid for reads of `nelems` values in the
/// vector forms and of one otherwise; `indices` is valid for writes of `nelems` `size_t`s for `Some`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn wait_set<T: SyncInt>(
    call: &str,
    need: Need,
    test: bool,
    ivars: *mut T,
    nelems: usize,
    status: *const c_int,
    indices: *mut usize,
    cmp: c_int,
    values: *const T,
    vector: bool,
) -> R<usize> {
    state::with(|sh| {
        let cmp = cmp_arg(cmp, call)?;
        if nelems == 0 {
            return Ok(match need {
                Need::All => 1,
                Need::Any => usize::MAX,
                Need::Some => 0,
            });
        }
        let set = sym_elems(sh, ivars.cast_const(), nelems, call, "ivars")?;
        let skip: Option<Vec<bool>> = if status.is_null() {
            None
        } else {
            // SAFETY: caller contract: `status` holds nelems ints.
            let s = unsafe { std::slice::from_raw_parts(status, nelems) };
            Some(s.iter().map(|&x| x != 0).collect())
        };
        let skip = skip.as_deref();
        if values.is_null() {
            return Err(Error::invalid(
                "cmp_value(s)",
                "NULL",
                format!("{call}: must point to the comparison value(s)"),
            )
            .into());
        }
        let vals: Vec<T> = if vector {
            // SAFETY: caller contract: `values` holds nelems values of T (vector forms).
            unsafe { std::slice::from_raw_parts(values, nelems) }.to_vec()
        } else {
            // SAFETY: caller contract: `values` points to one T (scalar forms; a local of the exported function).
            vec![unsafe { values.read() }]
        };
        let write_indices = |hits: &[usize]| -> Result<usize, Failure> {
            if indices.is_null() {
                return Err(Error::invalid(
                    "indices",
                    "NULL",
                    format!("{call}: must point to room for nelems ({nelems}) indices"),
                )
                .into());
            }
            for (i, &h) in hits.iter().enumerate() {
                // SAFETY: caller contract: `indices` has room for nelems entries; hits.len() <= nelems.
                unsafe { indices.add(i).write(h) };
            }
            Ok(hits.len())
        };
        let r = match (need, test, vector) {
            (Need::All, false, false) => {
                sh.wait_until_all(set, skip, cmp, vals[0])?;
                1
            }
            (Need::All, false, true) => {
                sh.wait_until_all_vector(set, skip, cmp, &vals)?;
                1
            }
            (Need::All, true, false) => sh.test_all(set, skip, cmp, vals[0])? as usize,
            (Need::All, true, true) => sh.test_all_vector(set, skip, cmp, &vals)? as usize,
            (Need::Any, false, false) => sh
                .wait_until_any(set, skip, cmp, vals[0])?
                .unwrap_or(usize::MAX),
            (Need::Any, false, true) => sh
                .wait_until_any_vector(set, skip, cmp, &vals)?
                .unwrap_or(usize::MAX),
            (Need::Any, true, false) => sh.test_any(set, skip, cmp, vals[0])?.unwrap_or(usize::MAX),
            (Need::Any, true, true) => sh
                .test_any_vector(set, skip, cmp, &vals)?
                .unwrap_or(usize::MAX),
            (Need::Some, false, false) => {
                write_indices(&sh.wait_until_some(set, skip, cmp, vals[0])?)?
            }
            (Need::Some, false, true) => {
                write_indices(&sh.wait_until_some_vector(set, skip, cmp, &vals)?)?
            }
            (Need::Some, true, false) => write_indices(&sh.test_some(set, skip, cmp, vals[0])?)?,
            (Need::Some, true, true) => {
                write_indices(&sh.test_some_vector(set, skip, cmp, &vals)?)?
            }
        };
        Ok(r)
    })
}

/// Collective allocation of `bytes` aligned to `align`, zeroed if `zero`; NULL for 0 bytes (still collective).
pub fn alloc(call: &str, bytes: usize, align: usize, zero: bool) -> R<*mut c_void> {
    alloc_on(call, None, bytes, align, zero)
}

/// [`alloc`] collective over `team` only (`None`: the world).
pub fn alloc_on(
    call: &str,
    team: Option<&xpushmem_rt::Team>,
    bytes: usize,
    align: usize,
    zero: bool,
) -> R<*mut c_void> {
    state::with(|sh| {
        let world = sh.team_world();
        let t = team.unwrap_or(&world);
        let s = match (zero, align) {
            (true, _) => sh.team_calloc::<u8>(t, bytes)?,
            (false, 0 | 1) => sh.team_malloc::<u8>(t, bytes)?,
            (false, a) => sh.team_align::<u8>(t, a, bytes).map_err(|e| match e {
                Error::InvalidArgument {
                    name: "align",
                    value,
                    reason,
                } => Error::InvalidArgument {
                    name: "alignment",
                    value,
                    reason: format!("{call}: {reason}"),
                },
                e => e,
            })?,
        };
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        state::record_size(s.heap_offset(), bytes);
        Ok(sh.local_ptr(s).cast())
    })
}

/// Collective free; NULL frees nothing (but is still collective).
pub fn free(call: &str, ptr: *mut c_void) -> R<()> {
    free_on(call, None, ptr)
}

/// [`free`] collective over `team` only (`None`: the world).
pub fn free_on(call: &str, team: Option<&xpushmem_rt::Team>, ptr: *mut c_void) -> R<()> {
    state::with(|sh| {
        let world = sh.team_world();
        let t = team.unwrap_or(&world);
        if ptr.is_null() {
            let none = sh.sym_slice_from_addr::<u8>(sh.heap_base() as usize, 0)?;
            return Ok(sh.team_free(t, none)?);
        }
        let s = sym_bytes(sh, ptr, 1, 1, call, "ptr")?;
        sh.team_free(t, s).map_err(|e| match e {
            Error::InvalidArgument { reason, .. } => Error::InvalidArgument {
                name: "ptr",
                value: format!("{ptr:p}"),
                reason: format!("{call}: {reason}"),
            },
            e => e,
        })?;
        state::forget_size(s.heap_offset());
        Ok(())
    })
}

/// Collective reallocation: a new block, the old contents copied (up to the smaller size), the old block freed.
pub fn realloc(call: &str, ptr: *mut c_void, bytes: usize) -> R<*mut c_void> {
    if ptr.is_null() {
        return alloc(call, bytes, 1, false);
    }
    let old = state::with(|sh| {
        let s = sym_bytes(sh, ptr, 1, 1, call, "ptr")?;
        Ok(state::size_at(s.heap_offset()))
    })?
    .ok_or_else(|| {
        Error::invalid(
            "ptr",
            format!("{ptr:p}"),
            format!("{call}: does not start a live symmetric allocation"),
        )
    })?;
    let new = alloc(call, bytes, 1, false)?;
    if !new.is_null() {
        // SAFETY: both blocks are live heap allocations of at least min(old, bytes) bytes and do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), new.cast::<u8>(), old.min(bytes))
        };
    }
    free(call, ptr)?;
    Ok(new)
}

/// The local address of `pe`'s copy of `addr`, or NULL when `pe` is not reachable by loads and stores.
pub fn ptr(call: &str, addr: *const c_void, pe: c_int) -> R<*mut c_void> {
    state::with(|sh| {
        let pe = pe_arg(sh, pe, call)?;
        let s = sym_bytes(sh, addr, 1, 1, call, "dest")?;
        Ok(sh.ptr(s, pe)?.map_or(std::ptr::null_mut(), |p| p.cast()))
    })
}

/// The handle of the default context (`SHMEM_CTX_DEFAULT`).
pub const CTX_DEFAULT: usize = 1;

/// A live context: the native id of the team it was made on (0: the world), its completion domain (its quiet
/// completes that domain's operations only), and, for one created with `SHMEM_CTX_PRIVATE`, the thread that
/// created it (the only one that may use or destroy it).
#[derive(Clone, Copy, Debug)]
struct CtxEntry {
    team: i64,
    domain: Domain,
    owner: Option<std::thread::ThreadId>,
}

/// Live contexts by handle.
static CONTEXTS: std::sync::Mutex<Option<std::collections::BTreeMap<usize, CtxEntry>>> =
    std::sync::Mutex::new(None);
static NEXT_CTX: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0x100);

/// Validate a context handle: the default one or one made by [`ctx_create`] and not destroyed, used by the thread
/// that created it when it is private; the id of its team (0, the world, for the default context).
pub fn check_ctx(ctx: *mut c_void, call: &str) -> Result<i64, Error> {
    ctx_route(ctx, call).map(|(team, _)| team)
}

/// [`check_ctx`]; the id of its team and its completion domain ([`Domain::DEFAULT`] for the default context).
pub fn ctx_route(ctx: *mut c_void, call: &str) -> Result<(i64, Domain), Error> {
    let h = ctx as usize;
    if h == CTX_DEFAULT {
        return Ok((0, Domain::DEFAULT));
    }
    let entry = CONTEXTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|s| s.get(&h).copied());
    match entry {
        None => Err(Error::invalid(
            "ctx",
            format!("{ctx:p}"),
            format!("{call}: not a live context (SHMEM_CTX_DEFAULT or one from shmem_ctx_create)"),
        )),
        Some(CtxEntry {
            owner: Some(owner), ..
        }) if owner != std::thread::current().id() => Err(Error::invalid(
            "ctx",
            format!("{ctx:p}"),
            format!(
                "{call}: the context was created with SHMEM_CTX_PRIVATE by thread {owner:?}; only that thread may \
                 use it (this is thread {:?})",
                std::thread::current().id()
            ),
        )),
        Some(e) => Ok((e.team, e.domain)),
    }
}

/// A new context handle on the team of native id `team` (validated by the caller), with a completion domain of
/// its own (`Shmem::domain_open`): its quiet and fence complete and order its operations only, and the default
/// context's (and `shmem_barrier_all`) do not complete its operations. `private`: only the calling thread may use
/// it (`SHMEM_CTX_PRIVATE`, checked by [`check_ctx`]).
pub fn ctx_create(team: i64, private: bool) -> R<usize> {
    let domain = state::with(|sh| Ok(sh.domain_open()?))?;
    let h = NEXT_CTX.fetch_add(8, std::sync::atomic::Ordering::Relaxed);
    let owner = private.then(|| std::thread::current().id());
    CONTEXTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(Default::default)
        .insert(
            h,
            CtxEntry {
                team,
                domain,
                owner,
            },
        );
    Ok(h)
}

/// Validate a context handle; the id of its team (0, the world, for the default context).
pub fn ctx_team(ctx: *mut c_void, call: &str) -> Result<i64, Error> {
    check_ctx(ctx, call)
}

/// Destroy a context made by [`ctx_create`]: its domain is completed (an implicit quiet) and closed; the default
/// context cannot be destroyed.
pub fn ctx_destroy(ctx: *mut c_void, call: &str) -> R<()> {
    let h = ctx as usize;
    let mut contexts = CONTEXTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = contexts.as_ref().and_then(|s| s.get(&h).copied()) {
        if e.owner.is_some_and(|o| o != std::thread::current().id()) {
            drop(contexts);
            return Ok(check_ctx(ctx, call).map(|_| ())?); // the private context's error, naming its thread
        }
        contexts.as_mut().map(|s| s.remove(&h));
        drop(contexts);
        return state::with(|sh| Ok(sh.domain_close(e.domain)?));
    }
    Err(Error::invalid(
        "ctx",
        format!("{ctx:p}"),
        format!("{call}: not a context from shmem_ctx_create (or already destroyed; SHMEM_CTX_DEFAULT cannot be destroyed)"),
    )
    .into())
}
