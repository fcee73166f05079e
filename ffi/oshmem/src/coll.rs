//! Collectives over teams (OpenSHMEM 1.5 section 9.9): broadcast, collect, fcollect, alltoall(s), reductions.
//! Every call returns 0 on success and -1 on failure (message in `xpushmem_last_error()`; abort mode aborts).

use crate::teams::id;
use crate::{shmem_team_t, status};
use std::ffi::{c_int, c_void};
use xpushmem_ffi_core::coll::{self as core, Kind, RKind};
use xpushmem_ffi_core::error::Failure;
use xpushmem_ffi_core::rt::Error;
use xpushmem_ffi_core::rt::{ReduceOp, Reducible, Symmetric};
use xpushmem_ffi_core::teams::Api;
use xpushmem_ffi_core::types::LongDouble;

#[cfg(target_arch = "x86_64")]
use crate::fold::x87;
use crate::fold::{self, complex_prod, complex_sum, fold, Complex, Group};

/// Run a data-movement collective on elements of `T`.
fn movement<T: Symmetric>(
    call: &str,
    team_h: shmem_team_t,
    kind: Kind,
    dest: *mut c_void,
    src: *const c_void,
    nelems: usize,
) -> c_int {
    status(call, || {
        core::movement::<T>(call, id(team_h), Api::Oshmem, kind, dest, src, nelems)
    })
}

/// Run a reduction on elements of `T`.
fn reduce<T: Reducible>(
    call: &str,
    team_h: shmem_team_t,
    op: ReduceOp,
    dest: *mut c_void,
    src: *const c_void,
    nreduce: usize,
) -> c_int {
    status(call, || {
        core::reduction::<T>(
            call,
            id(team_h),
            Api::Oshmem,
            RKind::Reduce,
            op,
            dest,
            src,
            nreduce,
        )
    })
}

macro_rules! typed_coll {
    (; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("Broadcast `nelems` `", $c, "` from member `PE_root` of `team` to every member's `dest`. 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _broadcast>](team: shmem_team_t, dest: *mut $t, source: *const $t, nelems: usize, pe_root: c_int) -> c_int {
            movement::<$t>(concat!("shmem_", stringify!($n), "_broadcast"), team, Kind::Broadcast(pe_root), dest.cast(), source.cast(), nelems)
        }
        #[doc = concat!("Concatenate each member's `nelems` `", $c, "` (may differ per member) into every member's `dest`. 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _collect>](team: shmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            movement::<$t>(concat!("shmem_", stringify!($n), "_collect"), team, Kind::Collect, dest.cast(), source.cast(), nelems)
        }
        #[doc = concat!("Concatenate each member's `nelems` `", $c, "` (the same everywhere) into every member's `dest`. 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _fcollect>](team: shmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            movement::<$t>(concat!("shmem_", stringify!($n), "_fcollect"), team, Kind::Fcollect, dest.cast(), source.cast(), nelems)
        }
        #[doc = concat!("Exchange `nelems` `", $c, "` between every pair of members. 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _alltoall>](team: shmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            movement::<$t>(concat!("shmem_", stringify!($n), "_alltoall"), team, Kind::Alltoall, dest.cast(), source.cast(), nelems)
        }
        #[doc = concat!("Strided all-to-all of `", $c, "` (strides in elements). 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _alltoalls>](team: shmem_team_t, dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize) -> c_int {
            movement::<$t>(concat!("shmem_", stringify!($n), "_alltoalls"), team, Kind::Alltoalls(dst, sst), dest.cast(), source.cast(), nelems)
        }
    )* } };
}

macro_rules! typed_reduce {
    ($op:ident, $variant:ident ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`", stringify!($op), "` reduction of `nreduce` `", $c, "` over `team` into every member's `dest`. 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _ $op _reduce>](team: shmem_team_t, dest: *mut $t, source: *const $t, nreduce: usize) -> c_int {
            reduce::<$t>(concat!("shmem_", stringify!($n), "_", stringify!($op), "_reduce"), team, ReduceOp::$variant, dest.cast(), source.cast(), nreduce)
        }
    )* } };
}

macro_rules! typed_scan {
    (; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("Inclusive prefix sum of `nelems` `", $c, "` over `team` (OpenSHMEM 1.6): member `i` gets the sum of members `0..=i`. 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _sum_inscan>](team: shmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            scan::<$t>(concat!("shmem_", stringify!($n), "_sum_inscan"), team, RKind::Inscan, dest.cast(), source.cast(), nelems)
        }
        #[doc = concat!("Exclusive prefix sum of `nelems` `", $c, "` over `team` (OpenSHMEM 1.6): member `i` gets the sum of members `0..i` (0 on member 0). 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _sum_exscan>](team: shmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            scan::<$t>(concat!("shmem_", stringify!($n), "_sum_exscan"), team, RKind::Exscan, dest.cast(), source.cast(), nelems)
        }
    )* } };
}

/// Run a prefix sum (`RKind::Inscan` or `RKind::Exscan`) on elements of `T`.
fn scan<T: Reducible>(
    call: &str,
    team_h: shmem_team_t,
    kind: RKind,
    dest: *mut c_void,
    src: *const c_void,
    nelems: usize,
) -> c_int {
    status(call, || {
        core::reduction::<T>(
            call,
            id(team_h),
            Api::Oshmem,
            kind,
            ReduceOp::Sum,
            dest,
            src,
            nelems,
        )
    })
}

xpushmem_ffi_core::for_reduce_arith_types!(typed_scan;);
xpushmem_ffi_core::for_rma_types!(typed_coll;);
xpushmem_ffi_core::for_reduce_bitwise_types!(typed_reduce; and, And);
xpushmem_ffi_core::for_reduce_bitwise_types!(typed_reduce; or, Or);
xpushmem_ffi_core::for_reduce_bitwise_types!(typed_reduce; xor, Xor);
xpushmem_ffi_core::for_reduce_arith_types!(typed_reduce; min, Min);
xpushmem_ffi_core::for_reduce_arith_types!(typed_reduce; max, Max);
xpushmem_ffi_core::for_reduce_arith_types!(typed_reduce; sum, Sum);
xpushmem_ffi_core::for_reduce_arith_types!(typed_reduce; prod, Prod);

/// Broadcast `nelems` bytes from member `PE_root`. 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_broadcastmem(
    team: shmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    pe_root: c_int,
) -> c_int {
    movement::<u8>(
        "shmem_broadcastmem",
        team,
        Kind::Broadcast(pe_root),
        dest,
        source,
        nelems,
    )
}

/// Concatenate each member's `nelems` bytes (may differ). 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_collectmem(
    team: shmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    movement::<u8>(
        "shmem_collectmem",
        team,
        Kind::Collect,
        dest,
        source,
        nelems,
    )
}

/// Concatenate each member's `nelems` bytes (the same everywhere). 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_fcollectmem(
    team: shmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    movement::<u8>(
        "shmem_fcollectmem",
        team,
        Kind::Fcollect,
        dest,
        source,
        nelems,
    )
}

/// Exchange `nelems` bytes between every pair of members. 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_alltoallmem(
    team: shmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    movement::<u8>(
        "shmem_alltoallmem",
        team,
        Kind::Alltoall,
        dest,
        source,
        nelems,
    )
}

/// Strided all-to-all of bytes. 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_alltoallsmem(
    team: shmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    dst: isize,
    sst: isize,
    nelems: usize,
) -> c_int {
    movement::<u8>(
        "shmem_alltoallsmem",
        team,
        Kind::Alltoalls(dst, sst),
        dest,
        source,
        nelems,
    )
}

// ---------------------------------------------------------------------------------------------------------------
// long double and complex: reductions by the layer's fold (`crate::fold`: the runtime has no arithmetic for these
// types), data movement as bytes.

/// Reduce over `team` by the layer's fold.
fn fold_reduce<T: Copy + Default>(
    call: &str,
    team_h: shmem_team_t,
    op: fn(T, T) -> T,
    dest: *mut T,
    src: *const T,
    nreduce: usize,
) -> c_int {
    status(call, || {
        let group = Group::team(id(team_h), call)?;
        fold(call, &group, op, dest, src, nreduce)
    })
}

macro_rules! fold_reduce_fns {
    ($n:ident, $t:ty, $c:literal, [$($op:ident => $f:expr),*]) => { paste::paste! { $(
        #[doc = concat!("`", stringify!($op), "` reduction of `nreduce` `", $c, "` over `team` into every member's `dest` (folded in member order). 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _ $op _reduce>](team: shmem_team_t, dest: *mut $t, source: *const $t, nreduce: usize) -> c_int {
            fold_reduce::<$t>(concat!("shmem_", stringify!($n), "_", stringify!($op), "_reduce"), team, $f, dest, source, nreduce)
        }
    )* } };
}

fold_reduce_fns!(complexf, Complex<f32>, "float _Complex", [sum => complex_sum::<f32>, prod => complex_prod::<f32>]);
fold_reduce_fns!(complexd, Complex<f64>, "double _Complex", [sum => complex_sum::<f64>, prod => complex_prod::<f64>]);
#[cfg(target_arch = "x86_64")]
fold_reduce_fns!(longdouble, LongDouble, "long double", [
    min => x87::min, max => x87::max, sum => x87::add, prod => x87::mul
]);

/// Prefix sum over `team` by the layer's fold (`inclusive`: members `0..=i`, else `0..i`).
fn fold_scan<T: Copy + Default>(
    call: &str,
    team_h: shmem_team_t,
    op: fn(T, T) -> T,
    inclusive: bool,
    dest: *mut T,
    src: *const T,
    nelems: usize,
) -> c_int {
    status(call, || {
        let group = Group::team(id(team_h), call)?;
        fold::scan(call, &group, op, inclusive, dest, src, nelems)
    })
}

macro_rules! fold_scan_fns {
    ($( ($n:ident, $t:ty, $c:literal, $add:expr) ),*) => { paste::paste! { $(
        #[doc = concat!("Inclusive prefix sum of `nelems` `", $c, "` over `team` (OpenSHMEM 1.6), folded in member order: member `i` gets the sum of members `0..=i`. 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _sum_inscan>](team: shmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            fold_scan::<$t>(concat!("shmem_", stringify!($n), "_sum_inscan"), team, $add, true, dest, source, nelems)
        }
        #[doc = concat!("Exclusive prefix sum of `nelems` `", $c, "` over `team` (OpenSHMEM 1.6), folded in member order: member `i` gets the sum of members `0..i` (0 on member 0). 0 on success.")]
        #[no_mangle]
        pub extern "C" fn [<pshmem_ $n _sum_exscan>](team: shmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            fold_scan::<$t>(concat!("shmem_", stringify!($n), "_sum_exscan"), team, $add, false, dest, source, nelems)
        }
    )* } };
}

fold_scan_fns!(
    (complexf, Complex<f32>, "float _Complex", complex_sum::<f32>),
    (complexd, Complex<f64>, "double _Complex", complex_sum::<f64>)
);
#[cfg(target_arch = "x86_64")]
fold_scan_fns!((longdouble, LongDouble, "long double", x87::add));

/// `nelems` `long double`s as a byte count.
fn ld_bytes(call: &str, nelems: usize) -> Result<usize, Failure> {
    nelems.checked_mul(16).ok_or_else(|| {
        Error::invalid(
            "nelems",
            nelems,
            format!("{call}: the byte count overflows"),
        )
        .into()
    })
}

/// A byte collective of `nelems` `long double`s.
fn ld_movement(
    call: &str,
    team_h: shmem_team_t,
    kind: Kind,
    dest: *mut LongDouble,
    src: *const LongDouble,
    nelems: usize,
) -> c_int {
    status(call, || {
        let bytes = ld_bytes(call, nelems)?;
        core::movement::<u8>(
            call,
            id(team_h),
            Api::Oshmem,
            kind,
            dest.cast(),
            src.cast(),
            bytes,
        )
    })
}

/// Broadcast `nelems` `long double` from member `PE_root` of `team`. 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_longdouble_broadcast(
    team: shmem_team_t,
    dest: *mut LongDouble,
    source: *const LongDouble,
    nelems: usize,
    pe_root: c_int,
) -> c_int {
    let call = "shmem_longdouble_broadcast";
    ld_movement(call, team, Kind::Broadcast(pe_root), dest, source, nelems)
}

/// Concatenate each member's `nelems` `long double` (may differ per member). 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_longdouble_collect(
    team: shmem_team_t,
    dest: *mut LongDouble,
    source: *const LongDouble,
    nelems: usize,
) -> c_int {
    ld_movement(
        "shmem_longdouble_collect",
        team,
        Kind::Collect,
        dest,
        source,
        nelems,
    )
}

/// Concatenate each member's `nelems` `long double` (the same everywhere). 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_longdouble_fcollect(
    team: shmem_team_t,
    dest: *mut LongDouble,
    source: *const LongDouble,
    nelems: usize,
) -> c_int {
    ld_movement(
        "shmem_longdouble_fcollect",
        team,
        Kind::Fcollect,
        dest,
        source,
        nelems,
    )
}

/// Exchange `nelems` `long double` between every pair of members. 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_longdouble_alltoall(
    team: shmem_team_t,
    dest: *mut LongDouble,
    source: *const LongDouble,
    nelems: usize,
) -> c_int {
    ld_movement(
        "shmem_longdouble_alltoall",
        team,
        Kind::Alltoall,
        dest,
        source,
        nelems,
    )
}

/// Strided all-to-all of `long double` (strides in elements): two all-to-alls of 8-byte words at twice the
/// strides, the low halves and the high halves. 0 on success.
#[no_mangle]
pub extern "C" fn pshmem_longdouble_alltoalls(
    team: shmem_team_t,
    dest: *mut LongDouble,
    source: *const LongDouble,
    dst: isize,
    sst: isize,
    nelems: usize,
) -> c_int {
    let call = "shmem_longdouble_alltoalls";
    status(call, || {
        let kind = Kind::Alltoalls(dst.saturating_mul(2), sst.saturating_mul(2));
        let (d, s) = (dest.cast::<u64>(), source.cast::<u64>());
        for half in 0..2 {
            core::movement::<u64>(
                call,
                id(team),
                Api::Oshmem,
                kind,
                d.wrapping_add(half).cast(),
                s.wrapping_add(half).cast(),
                nelems,
            )?;
        }
        Ok(())
    })
}
