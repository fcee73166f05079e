//! Small helpers shared by the entry points: result plumbing, structure checks, timed waits.

use level_zero_sys::*;
use std::ffi::c_void;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Result of an entry point body.
pub type ZeResult<T = ()> = Result<T, ze_result_t>;

/// Runs an entry point body; a panic becomes `ZE_RESULT_ERROR_UNKNOWN` (never unwinds into C).
pub fn entry(f: impl FnOnce() -> ZeResult) -> ze_result_t {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => ZE_RESULT_SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => ZE_RESULT_ERROR_UNKNOWN,
    }
}

/// Prints a diagnostic for an error the caller could not otherwise understand, then returns it.
pub fn fail(code: ze_result_t, what: impl std::fmt::Display) -> ze_result_t {
    if std::env::var_os("ZE_EMU_QUIET").is_none() {
        eprintln!("ze-emu: {code}: {what}");
    }
    code
}

/// Non-null check for a pointer argument.
pub fn nn<T>(p: *const T) -> ZeResult<*const T> {
    if p.is_null() {
        Err(ZE_RESULT_ERROR_INVALID_NULL_POINTER)
    } else {
        Ok(p)
    }
}

/// Non-null check for an output pointer.
pub fn nn_mut<T>(p: *mut T) -> ZeResult<*mut T> {
    if p.is_null() {
        Err(ZE_RESULT_ERROR_INVALID_NULL_POINTER)
    } else {
        Ok(p)
    }
}

/// Reads an input descriptor after checking it is non-null and carries `T::STYPE`; extension chains in
/// `pNext` are checked by `allowed_ext` (returns whether an extension stype is understood).
///
/// # Safety
/// `p` must be null or point to a readable `T`; every element of its `pNext` chain must start with a
/// `ze_base_desc_t`.
pub unsafe fn read_desc<T: ZeStruct + Copy>(
    p: *const T,
    allowed_ext: &[ze_structure_type_t],
) -> ZeResult<T> {
    let p = nn(p)?;
    // SAFETY: the caller guarantees `p` points to a readable T; non-null checked above.
    let v = unsafe { std::ptr::read_unaligned(p) };
    // SAFETY: every ZeStruct starts with ze_base_desc_t (stype, pNext).
    let base = unsafe { std::ptr::read_unaligned(p as *const ze_base_desc_t) };
    if base.stype != T::STYPE {
        return Err(fail(
            ZE_RESULT_ERROR_INVALID_ARGUMENT,
            format_args!(
                "{}: stype is {}, expected {}",
                short_name::<T>(),
                base.stype,
                T::STYPE
            ),
        ));
    }
    // SAFETY: forwarded caller guarantee on the chain.
    unsafe { check_chain(base.pNext, allowed_ext)? };
    Ok(v)
}

/// Checks an output structure: non-null and `stype == T::STYPE`; chains are checked like [`read_desc`].
///
/// # Safety
/// `p` must be null or point to a readable and writable `T`.
pub unsafe fn check_props<T: ZeStruct>(
    p: *mut T,
    allowed_ext: &[ze_structure_type_t],
) -> ZeResult<*mut T> {
    let p = nn_mut(p)?;
    // SAFETY: as for read_desc.
    let base = unsafe { std::ptr::read_unaligned(p as *const ze_base_desc_t) };
    if base.stype != T::STYPE {
        return Err(fail(
            ZE_RESULT_ERROR_INVALID_ARGUMENT,
            format_args!(
                "{}: stype is {}, expected {}",
                short_name::<T>(),
                base.stype,
                T::STYPE
            ),
        ));
    }
    // SAFETY: forwarded caller guarantee on the chain.
    unsafe { check_chain(base.pNext, allowed_ext)? };
    Ok(p)
}

/// Walks an extension chain; an extension this driver does not understand is `UNSUPPORTED_FEATURE`.
///
/// # Safety
/// Each chain element must start with a readable `ze_base_desc_t`.
pub unsafe fn check_chain(mut next: *const c_void, allowed: &[ze_structure_type_t]) -> ZeResult {
    let mut depth = 0;
    while !next.is_null() {
        // SAFETY: caller guarantee.
        let b = unsafe { std::ptr::read_unaligned(next as *const ze_base_desc_t) };
        if !allowed.contains(&b.stype) {
            return Err(fail(
                ZE_RESULT_ERROR_UNSUPPORTED_FEATURE,
                format_args!(
                    "extension structure {} in pNext is not supported by ze-emu",
                    b.stype
                ),
            ));
        }
        next = b.pNext;
        depth += 1;
        if depth > 64 {
            return Err(ZE_RESULT_ERROR_INVALID_ARGUMENT);
        }
    }
    Ok(())
}

/// Rejects bits outside `valid`.
pub fn check_flags(flags: u32, valid: u32, what: &str) -> ZeResult {
    if flags & !valid != 0 {
        Err(fail(
            ZE_RESULT_ERROR_INVALID_ENUMERATION,
            format_args!("{what}: unknown flag bits {:#x}", flags & !valid),
        ))
    } else {
        Ok(())
    }
}

/// Writes a value through a checked output pointer.
///
/// # Safety
/// `p` must be null or valid for a write of `T`.
pub unsafe fn out<T>(p: *mut T, v: T) -> ZeResult {
    let p = nn_mut(p)?;
    // SAFETY: caller guarantee, non-null checked.
    unsafe { std::ptr::write_unaligned(p, v) };
    Ok(())
}

/// Copies `s` into a fixed C char array, truncating, NUL terminated.
/// Reserve `len` bytes of inaccessible address space at an address aligned to `align` (a power of two): `len +
/// align` bytes are reserved and their head and tail outside the aligned range released. `code` is the result a
/// failed reservation reports. What device allocations map over (memory.rs) and what a virtual-memory reservation
/// is (vmem.rs).
pub fn reserve_aligned(len: usize, align: usize, code: ze_result_t) -> ZeResult<usize> {
    let span = len
        .checked_add(align)
        .ok_or(ZE_RESULT_ERROR_UNSUPPORTED_SIZE)?;
    // SAFETY: fresh inaccessible address space; it aliases nothing.
    let res = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            span,
            rustix::mm::ProtFlags::empty(),
            rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::NORESERVE,
        )
    }
    .map_err(|e| {
        fail(
            code,
            format_args!("reserve {len} bytes aligned to {align}: {e}"),
        )
    })? as usize;
    let aligned = res.next_multiple_of(align);
    // SAFETY: the head and tail of our own reservation outside the aligned range.
    unsafe {
        if aligned > res {
            let _ = rustix::mm::munmap(res as *mut c_void, aligned - res);
        }
        if res + span > aligned + len {
            let _ = rustix::mm::munmap((aligned + len) as *mut c_void, res + span - aligned - len);
        }
    }
    Ok(aligned)
}

pub fn copy_name(dst: &mut [std::ffi::c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as std::ffi::c_char;
    }
    dst[n] = 0;
}

/// Lock ignoring poisoning (a panicking entry point already reported its error).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A boolean flag with host waits (events, fences, completion).
#[derive(Default)]
pub struct Flag {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Flag {
    /// A flag in the given state.
    pub fn new(v: bool) -> Self {
        Self {
            set: Mutex::new(v),
            cv: Condvar::new(),
        }
    }
    /// Sets the flag and wakes waiters.
    pub fn set(&self) {
        *lock(&self.set) = true;
        self.cv.notify_all();
    }
    /// Clears the flag.
    pub fn reset(&self) {
        *lock(&self.set) = false;
    }
    /// Current state.
    pub fn is_set(&self) -> bool {
        *lock(&self.set)
    }
    /// Waits per Level Zero timeout rules: 0 polls, `u64::MAX` waits forever, otherwise up to `timeout_ns`.
    /// Returns whether the flag is set.
    pub fn wait(&self, timeout_ns: u64) -> bool {
        let mut g = lock(&self.set);
        if timeout_ns == u64::MAX {
            while !*g {
                g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            return true;
        }
        let deadline = Instant::now() + Duration::from_nanos(timeout_ns);
        while !*g {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self
                .cv
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

fn short_name<T>() -> &'static str {
    let n = std::any::type_name::<T>();
    n.rsplit("::").next().unwrap_or(n)
}
