//! The deprecated active-set collectives of OpenSHMEM 1.4 (kept by 1.5 for old programs): `shmem_barrier`, `shmem_sync`,
//! `shmem_broadcast32/64`, `shmem_fcollect32/64`, `shmem_collect32/64`, `shmem_alltoall32/64`, `shmem_alltoalls32/64` and
//! `shmem_TYPE_OP_to_all`, over the PEs `PE_start + i * 2^logPE_stride`, `i < PE_size`, with a `pSync` work array.
//!
//! Built from one-sided operations on `pSync` (symmetric: a global array or heap memory): `pSync[0]` counts arrivals
//! at the first member, `pSync[1]` is each member's release flag, `pSync[2]` holds a member's `collect` count while
//! the others read it. Every word is back to `SHMEM_SYNC_VALUE` (0) when the call returns. `pWrk` is not used.

use std::ffi::{c_int, c_long, c_void};
use xpushmem_ffi_core::error::{void, Failure};
use xpushmem_ffi_core::imp::{self, Amo};
use xpushmem_ffi_core::rt::Error;
use xpushmem_ffi_core::state;

#[cfg(target_arch = "x86_64")]
use crate::fold::x87;
use crate::fold::{complex_prod, complex_sum, fold, Group};
use crate::psync::{barrier, sync};
#[cfg(target_arch = "x86_64")]
use xpushmem_ffi_core::types::LongDouble;

/// The members of an active set, after validation; this PE's index among them.
fn members(
    call: &str,
    start: c_int,
    log_stride: c_int,
    size: c_int,
) -> Result<(Vec<c_int>, usize), Failure> {
    let n = state::with(|sh| Ok(sh.n_pes()))?;
    let me = state::with(|sh| Ok(sh.my_pe()))? as c_int;
    let bad = |name: &'static str, v: c_int, why: String| -> Failure {
        Error::InvalidArgument {
            name,
            value: v.to_string(),
            reason: format!("{call}: {why}"),
        }
        .into()
    };
    if !(0..31).contains(&log_stride) {
        return Err(bad("logPE_stride", log_stride, "must be in [0, 31)".into()));
    }
    if size < 1 {
        return Err(bad("PE_size", size, "must be at least 1".into()));
    }
    let stride = 1i64 << log_stride;
    let last = start as i64 + (size as i64 - 1) * stride;
    if start < 0 || last >= n as i64 {
        return Err(bad(
            "PE_start",
            start,
            format!("the active set ({size} PEs every {stride} from {start}) must lie in [0, {n})"),
        ));
    }
    let pes: Vec<c_int> = (0..size as i64)
        .map(|i| (start as i64 + i * stride) as c_int)
        .collect();
    let idx = pes.iter().position(|&p| p == me).ok_or_else(|| {
        bad(
            "PE_start",
            start,
            format!("PE {me} is not in the active set ({size} PEs every {stride} from {start})"),
        )
    })?;
    Ok((pes, idx))
}

/// Barrier over the active set `(PE_start, logPE_stride, PE_size)` (every member calls it with the same `pSync`).
///
/// # Safety
/// `pSync` is a symmetric array of `SHMEM_BARRIER_SYNC_SIZE` longs holding `SHMEM_SYNC_VALUE`.
#[no_mangle]
pub unsafe extern "C" fn pshmem_barrier(
    pe_start: c_int,
    log_pe_stride: c_int,
    pe_size: c_int,
    psync: *mut c_long,
) {
    let call = "shmem_barrier";
    void(call, || {
        let (pes, idx) = members(call, pe_start, log_pe_stride, pe_size)?;
        barrier(call, &pes, idx, psync)
    })
}

/// Synchronisation over the active set `(PE_start, logPE_stride, PE_size)` (every member calls it with the same
/// `pSync`): the deprecated C binding of `shmem_sync` (OpenSHMEM 1.4; the team form is `shmem_team_sync`, and
/// C11's `shmem_sync(team)` in `shmem.h` selects it). Unlike `shmem_barrier` it does not quiet first.
///
/// # Safety
/// `pSync` is a symmetric array of `SHMEM_BARRIER_SYNC_SIZE` longs holding `SHMEM_SYNC_VALUE`.
#[no_mangle]
pub unsafe extern "C" fn pshmem_sync(
    pe_start: c_int,
    log_pe_stride: c_int,
    pe_size: c_int,
    psync: *mut c_long,
) {
    let call = "shmem_sync";
    void(call, || {
        let (pes, idx) = members(call, pe_start, log_pe_stride, pe_size)?;
        sync(call, &pes, idx, psync)
    })
}

/// Which data movement.
#[derive(Clone, Copy)]
enum Move {
    Broadcast(c_int),
    Fcollect,
    Collect,
    Alltoall,
    /// Strides of the destination and source, in elements.
    Alltoalls(isize, isize),
}

#[allow(clippy::too_many_arguments)]
fn movement(
    call: &str,
    what: Move,
    elem: usize,
    dest: *mut c_void,
    src: *const c_void,
    nelems: usize,
    start: c_int,
    log_stride: c_int,
    size: c_int,
    psync: *mut c_long,
) -> Result<(), Failure> {
    let (pes, idx) = members(call, start, log_stride, size)?;
    let n = pes.len();
    let at =
        |p: *mut c_void, elems: usize| p.cast::<u8>().wrapping_add(elems * elem).cast::<c_void>();
    let slot = psync.wrapping_add(2);
    if let Move::Collect = what {
        // SAFETY: `slot` is pSync[2], symmetric and writable (the caller's contract); written before the barrier
        // that lets the others read it.
        unsafe { slot.write(nelems as c_long + 1) };
    }
    barrier(call, &pes, idx, psync)?;
    match what {
        Move::Broadcast(root) => {
            if root < 0 || root as usize >= n {
                return Err(Error::InvalidArgument {
                    name: "PE_root",
                    value: root.to_string(),
                    reason: format!("{call}: must be in [0, {n}) (an index in the active set)"),
                }
                .into());
            }
            if idx == root as usize {
                for (i, &pe) in pes.iter().enumerate() {
                    if i != idx {
                        // SAFETY: `src` holds `nelems` elements (the caller's contract); `dest` is symmetric.
                        unsafe { imp::put(call, dest, src, nelems, elem, 1, pe) }?;
                    }
                }
            }
        }
        Move::Fcollect => {
            for &pe in &pes {
                // SAFETY: as above; this member's block of the destination.
                unsafe { imp::put(call, at(dest, idx * nelems), src, nelems, elem, 1, pe) }?;
            }
        }
        Move::Alltoall => {
            for (j, &pe) in pes.iter().enumerate() {
                let from = src
                    .cast::<u8>()
                    .wrapping_add(j * nelems * elem)
                    .cast::<c_void>();
                // SAFETY: `src` holds `n * nelems` elements; block `j` goes to block `idx` of member `j`.
                unsafe { imp::put(call, at(dest, idx * nelems), from, nelems, elem, 1, pe) }?;
            }
        }
        Move::Alltoalls(dst, sst) => {
            if dst < 1 || sst < 1 {
                let (name, v) = if dst < 1 { ("dst", dst) } else { ("sst", sst) };
                return Err(Error::InvalidArgument {
                    name,
                    value: v.to_string(),
                    reason: format!("{call}: a stride must be at least 1"),
                }
                .into());
            }
            let (dst_u, sst_u) = (dst as usize, sst as usize);
            for (j, &pe) in pes.iter().enumerate() {
                let from = src
                    .cast::<u8>()
                    .wrapping_add(j * nelems * sst_u * elem)
                    .cast::<c_void>();
                let to = at(dest, idx * nelems * dst_u);
                // SAFETY: `src` holds `n * nelems` elements `sst` apart; block `j` goes, `dst` apart, to block
                // `idx` of member `j` (the caller's contract; the destination range is checked by the call).
                unsafe { imp::iput(call, to, from, dst, sst, nelems, elem, pe) }?;
            }
        }
        Move::Collect => {
            let mut before = 0usize;
            for &pe in &pes[..idx] {
                let c = imp::amo::<i64>(call, slot.cast_const().cast(), Amo::Fetch, pe)?;
                before += (c - 1).max(0) as usize;
            }
            for &pe in &pes {
                // SAFETY: as above, at this member's offset in the concatenation.
                unsafe { imp::put(call, at(dest, before), src, nelems, elem, 1, pe) }?;
            }
        }
    }
    barrier(call, &pes, idx, psync)?;
    if let Move::Collect = what {
        // SAFETY: pSync[2] as above; every member read it before the barrier that just completed.
        unsafe { slot.write(0) };
    }
    Ok(())
}

macro_rules! sized_movement {
    ($($bits:literal),*) => { paste::paste! { $(
        #[doc = concat!("Deprecated active-set broadcast of `nelems` ", $bits, "-bit elements from active-set member `PE_root`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest`/`source` symmetric and large enough; `pSync` of `SHMEM_BCAST_SYNC_SIZE` longs at `SHMEM_SYNC_VALUE`."]
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<pshmem_broadcast $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_root: c_int, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, psync: *mut c_long) {
            let call = concat!("shmem_broadcast", $bits);
            void(call, || movement(call, Move::Broadcast(pe_root), $bits / 8, dest, source, nelems, pe_start, log_pe_stride, pe_size, psync))
        }
        #[doc = concat!("Deprecated active-set fcollect of `nelems` ", $bits, "-bit elements per member.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "As for the broadcast; `pSync` of `SHMEM_COLLECT_SYNC_SIZE` longs."]
        #[no_mangle]
        pub unsafe extern "C" fn [<pshmem_fcollect $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, psync: *mut c_long) {
            let call = concat!("shmem_fcollect", $bits);
            void(call, || movement(call, Move::Fcollect, $bits / 8, dest, source, nelems, pe_start, log_pe_stride, pe_size, psync))
        }
        #[doc = concat!("Deprecated active-set collect of `nelems` ", $bits, "-bit elements per member (may differ per member).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "As for the broadcast; `pSync` of `SHMEM_COLLECT_SYNC_SIZE` longs."]
        #[no_mangle]
        pub unsafe extern "C" fn [<pshmem_collect $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, psync: *mut c_long) {
            let call = concat!("shmem_collect", $bits);
            void(call, || movement(call, Move::Collect, $bits / 8, dest, source, nelems, pe_start, log_pe_stride, pe_size, psync))
        }
        #[doc = concat!("Deprecated active-set alltoall of `nelems` ", $bits, "-bit elements per pair of members.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "As for the broadcast; `pSync` of `SHMEM_ALLTOALL_SYNC_SIZE` longs."]
        #[no_mangle]
        pub unsafe extern "C" fn [<pshmem_alltoall $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, psync: *mut c_long) {
            let call = concat!("shmem_alltoall", $bits);
            void(call, || movement(call, Move::Alltoall, $bits / 8, dest, source, nelems, pe_start, log_pe_stride, pe_size, psync))
        }
        #[doc = concat!("Deprecated active-set strided alltoall of `nelems` ", $bits, "-bit elements per pair of members (`dst`, `sst` in elements).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "As for the broadcast; `pSync` of `SHMEM_ALLTOALL_SYNC_SIZE` longs."]
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<pshmem_alltoalls $bits>](dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, psync: *mut c_long) {
            let call = concat!("shmem_alltoalls", $bits);
            void(call, || movement(call, Move::Alltoalls(dst, sst), $bits / 8, dest, source, nelems, pe_start, log_pe_stride, pe_size, psync))
        }
    )* } };
}
sized_movement!(32, 64);

/// Reduce `nreduce` elements of `T` over the active set with `op` (the layer's fold, [`crate::fold`]), then a last
/// barrier so that `pSync` may be reused at once.
#[allow(clippy::too_many_arguments)]
fn to_all<T: Copy + Default>(
    call: &str,
    op: fn(T, T) -> T,
    dest: *mut T,
    src: *const T,
    nreduce: c_int,
    start: c_int,
    log_stride: c_int,
    size: c_int,
    psync: *mut c_long,
) -> Result<(), Failure> {
    let (pes, idx) = members(call, start, log_stride, size)?;
    let n = usize::try_from(nreduce).map_err(|_| Error::InvalidArgument {
        name: "nreduce",
        value: nreduce.to_string(),
        reason: format!("{call}: must not be negative"),
    })?;
    let group = Group::Active { pes, idx, psync };
    fold(call, &group, op, dest, src, n)?;
    group.sync(call)
}

macro_rules! to_all_fns {
    ($n:ident, $t:ty, [$($op:ident => $f:expr),*]) => { paste::paste! { $(
        #[doc = concat!("Deprecated active-set `", stringify!($op), "` reduction of `", stringify!($t), "` (`shmem_", stringify!($n), "_", stringify!($op), "_to_all`).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest`/`source` symmetric arrays of `nreduce` elements; `pSync` of `SHMEM_REDUCE_SYNC_SIZE` longs at `SHMEM_SYNC_VALUE`."]
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<pshmem_ $n _ $op _to_all>](dest: *mut $t, source: *const $t, nreduce: c_int, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, _pwrk: *mut $t, psync: *mut c_long) {
            let call = concat!("shmem_", stringify!($n), "_", stringify!($op), "_to_all");
            void(call, || to_all::<$t>(call, $f, dest, source, nreduce, pe_start, log_pe_stride, pe_size, psync))
        }
    )* } };
}

macro_rules! int_to_all {
    ($($n:ident: $t:ty),*) => { $(
        to_all_fns!($n, $t, [
            and => |a: $t, b: $t| a & b, or => |a: $t, b: $t| a | b, xor => |a: $t, b: $t| a ^ b,
            min => |a: $t, b: $t| a.min(b), max => |a: $t, b: $t| a.max(b),
            sum => |a: $t, b: $t| a.wrapping_add(b), prod => |a: $t, b: $t| a.wrapping_mul(b)
        ]);
    )* };
}
int_to_all!(short: i16, int: i32, long: c_long, longlong: i64);

macro_rules! float_to_all {
    ($($n:ident: $t:ty),*) => { $(
        to_all_fns!($n, $t, [
            min => |a: $t, b: $t| a.min(b), max => |a: $t, b: $t| a.max(b),
            sum => |a: $t, b: $t| a + b, prod => |a: $t, b: $t| a * b
        ]);
    )* };
}
float_to_all!(float: f32, double: f64);

macro_rules! complex_to_all {
    ($($n:ident: $t:ty),*) => { $(
        to_all_fns!($n, [$t; 2], [
            sum => complex_sum::<$t>, prod => complex_prod::<$t>
        ]);
    )* };
}
complex_to_all!(complexf: f32, complexd: f64);

#[cfg(target_arch = "x86_64")]
to_all_fns!(longdouble, LongDouble, [
    min => x87::min, max => x87::max, sum => x87::add, prod => x87::mul
]);
