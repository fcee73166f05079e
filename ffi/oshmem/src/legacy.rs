//! Names from before OpenSHMEM 1.5 that real programs still use (deprecated by the specification, kept by Sandia
//! OpenSHMEM and Open MPI): `start_pes`, `_my_pe`, `_num_pes`, `shmalloc`/`shfree`/`shrealloc`/`shmemalign`, the
//! pre-1.4 atomics (`shmem_TYPE_fadd/finc/add/inc/swap/cswap/fetch/set`), `shmem_wait`, `shmem_wait_until` (on a
//! `long`), `shmem_TYPE_wait`, and the cache-management calls, which have nothing to do here (no-ops). Each is the
//! current call under its old name; errors are reported as by that call.

use std::ffi::{c_int, c_long, c_void};
use xpushmem_ffi_core::error::{self, void};
use xpushmem_ffi_core::imp::{self, Amo, AmoInt};

const CMP_NE: c_int = 1;

/// Deprecated (OpenSHMEM 1.2): `shmem_init`; `npes` is ignored (the launcher decides the number of PEs).
#[no_mangle]
pub extern "C" fn pstart_pes(npes: c_int) {
    let _ = npes;
    crate::pshmem_init()
}

/// Deprecated: `shmem_my_pe`.
#[no_mangle]
pub extern "C" fn p_my_pe() -> c_int {
    crate::pshmem_my_pe()
}

/// Deprecated: `shmem_n_pes`.
#[no_mangle]
pub extern "C" fn p_num_pes() -> c_int {
    crate::pshmem_n_pes()
}

/// Deprecated: `shmem_malloc`.
#[no_mangle]
pub extern "C" fn pshmalloc(size: usize) -> *mut c_void {
    error::value("shmalloc", std::ptr::null_mut(), || {
        imp::alloc("shmalloc", size, 1, false)
    })
}

/// Deprecated: `shmem_free`.
#[no_mangle]
pub extern "C" fn pshfree(ptr: *mut c_void) {
    void("shfree", || imp::free("shfree", ptr))
}

/// Deprecated: `shmem_realloc`.
#[no_mangle]
pub extern "C" fn pshrealloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    error::value("shrealloc", std::ptr::null_mut(), || {
        imp::realloc("shrealloc", ptr, size)
    })
}

/// Deprecated: `shmem_align`.
#[no_mangle]
pub extern "C" fn pshmemalign(alignment: usize, size: usize) -> *mut c_void {
    error::value("shmemalign", std::ptr::null_mut(), || {
        imp::alloc("shmemalign", size, alignment.max(1), false)
    })
}

macro_rules! no_op {
    ($($name:ident ( $($arg:ident: $t:ty),* ) $doc:literal;)*) => {$(
        #[doc = $doc]
        #[no_mangle]
        pub extern "C" fn $name($($arg: $t),*) {
            $(let _ = $arg;)*
        }
    )*};
}

no_op! {
    pshmem_clear_cache_inv() "Deprecated cache management: a no-op (memory is coherent).";
    pshmem_set_cache_inv() "Deprecated cache management: a no-op (memory is coherent).";
    pshmem_clear_cache_line_inv(dest: *mut c_void) "Deprecated cache management: a no-op (memory is coherent).";
    pshmem_set_cache_line_inv(dest: *mut c_void) "Deprecated cache management: a no-op (memory is coherent).";
    pshmem_udcflush() "Deprecated cache management: a no-op (memory is coherent).";
    pshmem_udcflush_line(dest: *mut c_void) "Deprecated cache management: a no-op (memory is coherent).";
}

/// Deprecated (OpenSHMEM 1.2): wait until `*ivar != cmp_value` (a `long`).
///
/// # Safety
/// `ivar` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn pshmem_wait(ivar: *mut c_long, cmp_value: c_long) {
    void("shmem_wait", || {
        imp::wait_one("shmem_wait", ivar, CMP_NE, cmp_value, false).map(|_| ())
    })
}

/// Deprecated (OpenSHMEM 1.2): `shmem_long_wait_until` (the header declares it as `(shmem_wait_until)` so that the
/// C11 generic macro of the same name still applies to other calls).
///
/// # Safety
/// `ivar` is a symmetric address (checked).
#[no_mangle]
pub unsafe extern "C" fn pshmem_wait_until(ivar: *mut c_long, cmp: c_int, cmp_value: c_long) {
    void("shmem_wait_until", || {
        imp::wait_one("shmem_wait_until", ivar, cmp, cmp_value, false).map(|_| ())
    })
}

macro_rules! wait_old {
    ($($n:ident: $t:ty),*) => { paste::paste! { $(
        #[doc = concat!("Deprecated (OpenSHMEM 1.2): wait until `*ivar != cmp_value` (`shmem_", stringify!($n), "_wait`).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivar` is a symmetric address (checked)."]
        #[no_mangle]
        pub unsafe extern "C" fn [<pshmem_ $n _wait>](ivar: *mut $t, cmp_value: $t) {
            let call = concat!("shmem_", stringify!($n), "_wait");
            void(call, || imp::wait_one(call, ivar, CMP_NE, cmp_value, false).map(|_| ()))
        }
    )* } };
}
wait_old!(short: i16, int: c_int, long: c_long, longlong: i64);

macro_rules! amo_old_int {
    ($($n:ident: $t:ty),*) => { paste::paste! { $(
        #[doc = concat!("Deprecated (OpenSHMEM 1.3): `shmem_", stringify!($n), "_atomic_fetch_add`.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _fadd>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            let call = concat!("shmem_", stringify!($n), "_fadd");
            error::value(call, 0, || imp::amo_int::<$t>(call, dest, AmoInt::Add(value), pe))
        }
        #[doc = concat!("Deprecated (OpenSHMEM 1.3): `shmem_", stringify!($n), "_atomic_fetch_inc`.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _finc>](dest: *mut $t, pe: c_int) -> $t {
            let call = concat!("shmem_", stringify!($n), "_finc");
            error::value(call, 0, || imp::amo_int::<$t>(call, dest, AmoInt::Inc, pe))
        }
        #[doc = concat!("Deprecated (OpenSHMEM 1.3): `shmem_", stringify!($n), "_atomic_add`.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _add>](dest: *mut $t, value: $t, pe: c_int) {
            let call = concat!("shmem_", stringify!($n), "_add");
            void(call, || imp::amo_int::<$t>(call, dest, AmoInt::Add(value), pe).map(|_| ()))
        }
        #[doc = concat!("Deprecated (OpenSHMEM 1.3): `shmem_", stringify!($n), "_atomic_inc`.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _inc>](dest: *mut $t, pe: c_int) {
            let call = concat!("shmem_", stringify!($n), "_inc");
            void(call, || imp::amo_int::<$t>(call, dest, AmoInt::Inc, pe).map(|_| ()))
        }
        #[doc = concat!("Deprecated (OpenSHMEM 1.3): `shmem_", stringify!($n), "_atomic_compare_swap`.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _cswap>](dest: *mut $t, cond: $t, value: $t, pe: c_int) -> $t {
            let call = concat!("shmem_", stringify!($n), "_cswap");
            error::value(call, 0, || imp::amo::<$t>(call, dest, Amo::CompareSwap { cond, value }, pe))
        }
    )* } };
}
amo_old_int!(int: c_int, long: c_long, longlong: i64);

macro_rules! amo_old_ext {
    ($($n:ident: $t:ty),*) => { paste::paste! { $(
        #[doc = concat!("Deprecated (OpenSHMEM 1.3): `shmem_", stringify!($n), "_atomic_swap`.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _swap>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            let call = concat!("shmem_", stringify!($n), "_swap");
            error::value(call, <$t>::default(), || imp::amo::<$t>(call, dest, Amo::Swap(value), pe))
        }
        #[doc = concat!("Deprecated (OpenSHMEM 1.3): `shmem_", stringify!($n), "_atomic_fetch`.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _fetch>](source: *const $t, pe: c_int) -> $t {
            let call = concat!("shmem_", stringify!($n), "_fetch");
            error::value(call, <$t>::default(), || imp::amo::<$t>(call, source, Amo::Fetch, pe))
        }
        #[doc = concat!("Deprecated (OpenSHMEM 1.3): `shmem_", stringify!($n), "_atomic_set`.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _set>](dest: *mut $t, value: $t, pe: c_int) {
            let call = concat!("shmem_", stringify!($n), "_set");
            void(call, || imp::amo::<$t>(call, dest, Amo::Set(value), pe).map(|_| ()))
        }
    )* } };
}
amo_old_ext!(int: c_int, long: c_long, longlong: i64, float: f32, double: f64);
