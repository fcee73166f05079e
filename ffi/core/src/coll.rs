//! Collectives over teams, shared by both C layers, and the native collective calls (NVSHMEM host API style:
//! `xpushmem_TYPENAME_broadcast`, `_fcollect`, `_collect`, `_alltoall`, `_alltoalls`, `_OP_reduce`,
//! `_OP_reducescatter`, the extensions `xpushmemx_TYPENAME_sum_inscan/_exscan`, and the byte forms
//! `xpushmem_broadcastmem` & co.). Counts are in elements; every call returns an error code.
//!
//! The algorithm of each collective is the runtime's `Auto` choice (which honours `XPUSHMEM_<COLL>_ALGORITHM`)
//! unless `xpushmemx_set_algorithm` picked one for the process; both C layers use that choice.
//!
//! Argument errors that the runtime checks collectively (root out of range, different counts, roots or types
//! on different PEs, destinations too short, bad strides) are an error on every PE with the same verdict. A bad
//! team handle, or an address outside the symmetric heap, is found before the collective starts and is an error
//! on the PEs that passed it (the others then time out, `XPUSHMEM_TIMEOUT_MS`, unless every PE passed it).

use crate::error::{code, value, Failure};
use crate::state::{self, Coll, COLLS};
use crate::teams::{self, xpushmem_team_t, Api};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::str::FromStr;
use std::sync::OnceLock;
use xpushmem_rt::{
    AlltoallAlgo, BarrierAlgo, BroadcastAlgo, CollectAlgo, Error, ReduceAlgo, ReduceOp,
    ReduceScatterAlgo, Reducible, ScanAlgo, Shmem, SymSlice, Symmetric,
};

// ---------------------------------------------------------------------------------------------------------------
// Algorithm choice (the table is `state`'s)

const COLL_NAMES: &str =
    "barrier (or sync), broadcast, collect (or fcollect), alltoall (or alltoalls), \
reduce, reducescatter (or reduce_scatter), scan (or inscan, exscan)";

fn coll_of(name: &str) -> Option<Coll> {
    Some(match name.trim().to_ascii_lowercase().as_str() {
        "barrier" | "sync" | "team_sync" => Coll::Barrier,
        "broadcast" => Coll::Broadcast,
        "collect" | "fcollect" => Coll::Collect,
        "alltoall" | "alltoalls" => Coll::Alltoall,
        "reduce" => Coll::Reduce,
        "reducescatter" | "reduce_scatter" => Coll::ReduceScatter,
        "scan" | "inscan" | "exscan" => Coll::Scan,
        _ => return None,
    })
}

fn index_of<A: FromStr<Err = Error> + PartialEq + Copy>(
    s: &str,
    all: &[A],
    auto: A,
) -> Result<u8, Error> {
    let a: A = s.parse()?;
    if a == auto {
        return Ok(0);
    }
    Ok(all.iter().position(|x| *x == a).map_or(0, |p| p as u8 + 1))
}

fn parse_algo(c: Coll, s: &str) -> Result<u8, Error> {
    match c {
        Coll::Barrier => index_of(s, BarrierAlgo::ALL, BarrierAlgo::Auto),
        Coll::Broadcast => index_of(s, BroadcastAlgo::ALL, BroadcastAlgo::Auto),
        Coll::Collect => index_of(s, CollectAlgo::ALL, CollectAlgo::Auto),
        Coll::Alltoall => index_of(s, AlltoallAlgo::ALL, AlltoallAlgo::Auto),
        Coll::Reduce => index_of(s, ReduceAlgo::ALL, ReduceAlgo::Auto),
        Coll::ReduceScatter => index_of(s, ReduceScatterAlgo::ALL, ReduceScatterAlgo::Auto),
        Coll::Scan => index_of(s, ScanAlgo::ALL, ScanAlgo::Auto),
    }
}

fn names_of(c: Coll) -> Vec<&'static str> {
    fn list<A: Copy>(all: &[A], name: fn(A) -> &'static str) -> Vec<&'static str> {
        std::iter::once("auto")
            .chain(all.iter().map(|a| name(*a)))
            .collect()
    }
    match c {
        Coll::Barrier => list(BarrierAlgo::ALL, BarrierAlgo::name),
        Coll::Broadcast => list(BroadcastAlgo::ALL, BroadcastAlgo::name),
        Coll::Collect => list(CollectAlgo::ALL, CollectAlgo::name),
        Coll::Alltoall => list(AlltoallAlgo::ALL, AlltoallAlgo::name),
        Coll::Reduce => list(ReduceAlgo::ALL, ReduceAlgo::name),
        Coll::ReduceScatter => list(ReduceScatterAlgo::ALL, ReduceScatterAlgo::name),
        Coll::Scan => list(ScanAlgo::ALL, ScanAlgo::name),
    }
}

fn invalid(
    name: &'static str,
    value: impl std::fmt::Display,
    reason: impl Into<String>,
) -> Failure {
    Error::invalid(name, value, reason).into()
}

/// A C string argument, or an error naming it.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn c_str<'a>(p: *const c_char, name: &'static str, call: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(invalid(name, "NULL", format!("{call}: must be a string")));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map_err(|_| invalid(name, s.to_string_lossy(), format!("{call}: not UTF-8")))
}

/// Choose the algorithm of `collective` for every later call of this process (both C layers): `collective` is
/// `barrier` (also `sync`), `broadcast`, `collect` (also `fcollect`), `alltoall` (also `alltoalls`), `reduce`,
/// `reducescatter`, or `scan` (`inscan`, `exscan`); `name` is one of the runtime's names for it (as accepted by
/// `XPUSHMEM_<COLL>_ALGORITHM`, e.g. `"ring"`, `"recursive-doubling"`, `"binomial"`, `"pairwise"`), or `"auto"`
/// (or NULL) to go back to the environment variable / size rule. Not collective, but every PE of a team must have
/// the same choice when it calls the collective (a disagreement is an error on every PE, `XPUSHMEM_ERROR_MISMATCH`,
/// except for barriers, which then time out). Returns an error code (`XPUSHMEM_ERROR_INVALID_ARGUMENT` for an
/// unknown collective or algorithm; the message lists the accepted names).
///
/// # Safety
/// `collective` is a NUL-terminated string; `name` is NULL or one.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_set_algorithm(
    collective: *const c_char,
    name: *const c_char,
) -> c_int {
    let call = "xpushmemx_set_algorithm";
    code(call, || {
        // SAFETY: the caller's contract on `collective`.
        let cname = unsafe { c_str(collective, "collective", call) }?;
        let c = coll_of(cname).ok_or_else(|| {
            invalid(
                "collective",
                cname,
                format!("{call}: unknown collective; expected one of {COLL_NAMES}"),
            )
        })?;
        let k = if name.is_null() {
            0
        } else {
            // SAFETY: the caller's contract on `name`.
            let a = unsafe { c_str(name, "name", call) }?;
            parse_algo(c, a).map_err(|_| {
                invalid(
                    "name",
                    a,
                    format!(
                        "{call}: unknown {cname} algorithm; expected one of {}",
                        names_of(c).join(", ")
                    ),
                )
            })?
        };
        state::choose(c, k);
        Ok(())
    })
}

/// The name of the algorithm chosen for `collective` by `xpushmemx_set_algorithm` (`"auto"` when none is: the
/// environment variable or the size rule decides); NULL for an unknown collective (an error is recorded). The
/// string is static.
///
/// # Safety
/// `collective` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_get_algorithm(collective: *const c_char) -> *const c_char {
    static NAMES: OnceLock<Vec<Vec<CString>>> = OnceLock::new();
    let call = "xpushmemx_get_algorithm";
    value(call, std::ptr::null(), || {
        // SAFETY: the caller's contract on `collective`.
        let cname = unsafe { c_str(collective, "collective", call) }?;
        let c = coll_of(cname).ok_or_else(|| {
            invalid(
                "collective",
                cname,
                format!("{call}: unknown collective; expected one of {COLL_NAMES}"),
            )
        })?;
        let names = NAMES.get_or_init(|| {
            COLLS
                .iter()
                .map(|c| {
                    names_of(*c)
                        .into_iter()
                        .map(|n| CString::new(n).unwrap_or_default())
                        .collect()
                })
                .collect()
        });
        let k = state::choice(c) as usize;
        Ok(names[c as usize]
            .get(k)
            .unwrap_or(&names[c as usize][0])
            .as_ptr())
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Shared implementation

/// The elements of `T` from the symmetric `p` to the end of the heap (the runtime checks each call's exact extent
/// against it). NULL is accepted when `empty_ok` (a zero-length call): an empty slice.
pub fn sym_to_end<T: Symmetric>(
    sh: &Shmem,
    p: *const c_void,
    empty_ok: bool,
    call: &str,
    arg: &str,
) -> Result<SymSlice<T>, Error> {
    if p.is_null() && empty_ok {
        return sh.sym_slice_from_addr::<T>(sh.heap_base() as usize, 0);
    }
    let s = crate::imp::sym_bytes(sh, p, 0, std::mem::align_of::<T>(), call, arg)?;
    let room = sh.sym_room(s.heap_offset());
    sh.sym_slice_from_addr::<T>(p as usize, room / std::mem::size_of::<T>())
}

/// A C stride as the runtime's (non-positive strides become 0, which the runtime rejects on every PE).
fn stride(v: isize) -> usize {
    usize::try_from(v).unwrap_or(0)
}

/// Which data-movement collective.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// Broadcast from a root (a team member number).
    Broadcast(c_int),
    /// Concatenation of varying sizes.
    Collect,
    /// Concatenation of equal sizes.
    Fcollect,
    /// All to all.
    Alltoall,
    /// All to all, strided (`dst`, `sst` in elements).
    Alltoalls(isize, isize),
}

/// Run a data-movement collective on elements of `T` over team `team` (a handle of `api`).
pub fn movement<T: Symmetric>(
    call: &str,
    team: i64,
    api: Api,
    kind: Kind,
    dest: *mut c_void,
    src: *const c_void,
    nelems: usize,
) -> Result<(), Failure> {
    state::with(|sh| {
        let t = teams::team(sh, team, api, call)?;
        let empty = nelems == 0;
        let d = sym_to_end::<T>(sh, dest, empty, call, "dest")?;
        let s = sym_to_end::<T>(sh, src, empty, call, "source")?;
        match kind {
            // A negative root reaches the runtime as a huge one, so that every PE gets the same verdict; the
            // message shows it as the negative number it was.
            Kind::Broadcast(root) => sh.broadcast_with(
                &t,
                d,
                s,
                nelems,
                root as isize as usize,
                state::broadcast_algo(),
            )?,
            Kind::Collect => sh.collect_with(&t, d, s, nelems, state::collect_algo())?,
            Kind::Fcollect => sh.fcollect_with(&t, d, s, nelems, state::collect_algo())?,
            Kind::Alltoall => sh.alltoall_with(&t, d, s, nelems, state::alltoall_algo())?,
            Kind::Alltoalls(dst, sst) => sh.alltoalls_with(
                &t,
                d,
                s,
                stride(dst),
                stride(sst),
                nelems,
                state::alltoall_algo(),
            )?,
        }
        Ok(())
    })
}

/// Which reduction-like collective.
#[derive(Debug, Clone, Copy)]
pub enum RKind {
    /// All-reduce: every member gets the reduction of `n` elements.
    Reduce,
    /// Reduce-scatter: member `i` gets block `i` (of `n` elements) of the reduction of `n_pes * n`.
    ReduceScatter,
    /// Inclusive scan.
    Inscan,
    /// Exclusive scan.
    Exscan,
}

/// Run a reduction, reduce-scatter or scan of `n` elements of `T` with `op` over team `team`.
#[allow(clippy::too_many_arguments)]
pub fn reduction<T: Reducible>(
    call: &str,
    team: i64,
    api: Api,
    kind: RKind,
    op: ReduceOp,
    dest: *mut c_void,
    src: *const c_void,
    n: usize,
) -> Result<(), Failure> {
    state::with(|sh| {
        let t = teams::team(sh, team, api, call)?;
        let empty = n == 0;
        let d = sym_to_end::<T>(sh, dest, empty, call, "dest")?;
        let s = sym_to_end::<T>(sh, src, empty, call, "source")?;
        match kind {
            RKind::Reduce => sh.reduce_with(&t, op, d, s, n, state::reduce_algo())?,
            RKind::ReduceScatter => {
                sh.reduce_scatter_with(&t, op, d, s, n, state::reduce_scatter_algo())?
            }
            RKind::Inscan => sh.scan_with(&t, op, d, s, n, state::scan_algo(), true)?,
            RKind::Exscan => sh.scan_with(&t, op, d, s, n, state::scan_algo(), false)?,
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------------------------
// The native calls (typed families macro-generated over the type lists; declarations in the generated header)

const N: Api = Api::Native;

macro_rules! native_coll {
    (; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        #[doc = concat!("Copy `nelems` `", $c, "` from `source` on member `PE_root` of `team` to `dest` on every member. Returns an error code.")]
        #[no_mangle]
        pub extern "C" fn [<xpushmem_ $n _broadcast>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize, pe_root: c_int) -> c_int {
            let call = concat!("xpushmem_", stringify!($n), "_broadcast");
            code(call, || movement::<$t>(call, team.into(), N, Kind::Broadcast(pe_root), dest.cast(), source.cast(), nelems))
        }
        #[doc = concat!("Concatenate each member's `nelems` `", $c, "` (the same on every member) into every member's `dest`, in member order. Returns an error code.")]
        #[no_mangle]
        pub extern "C" fn [<xpushmem_ $n _fcollect>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            let call = concat!("xpushmem_", stringify!($n), "_fcollect");
            code(call, || movement::<$t>(call, team.into(), N, Kind::Fcollect, dest.cast(), source.cast(), nelems))
        }
        #[doc = concat!("Concatenate each member's `nelems` `", $c, "` (may differ per member) into every member's `dest`, in member order. Returns an error code.")]
        #[no_mangle]
        pub extern "C" fn [<xpushmem_ $n _collect>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            let call = concat!("xpushmem_", stringify!($n), "_collect");
            code(call, || movement::<$t>(call, team.into(), N, Kind::Collect, dest.cast(), source.cast(), nelems))
        }
        #[doc = concat!("Send block `j` (`nelems` `", $c, "`) of `source` to member `j`, into block `i` of its `dest` (`i` = this member). Returns an error code.")]
        #[no_mangle]
        pub extern "C" fn [<xpushmem_ $n _alltoall>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            let call = concat!("xpushmem_", stringify!($n), "_alltoall");
            code(call, || movement::<$t>(call, team.into(), N, Kind::Alltoall, dest.cast(), source.cast(), nelems))
        }
        #[doc = concat!("Strided all-to-all of `", $c, "` (strides `dst`, `sst` in elements, at least 1). Returns an error code.")]
        #[no_mangle]
        pub extern "C" fn [<xpushmem_ $n _alltoalls>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize) -> c_int {
            let call = concat!("xpushmem_", stringify!($n), "_alltoalls");
            code(call, || movement::<$t>(call, team.into(), N, Kind::Alltoalls(dst, sst), dest.cast(), source.cast(), nelems))
        }
    )* } };
}

macro_rules! native_reduce {
    ($op:ident, $variant:ident ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        #[doc = concat!("`", stringify!($op), "` reduction of `nreduce` `", $c, "` over `team` into every member's `dest` (may equal `source`). Returns an error code.")]
        #[no_mangle]
        pub extern "C" fn [<xpushmem_ $n _ $op _reduce>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nreduce: usize) -> c_int {
            let call = concat!("xpushmem_", stringify!($n), "_", stringify!($op), "_reduce");
            code(call, || reduction::<$t>(call, team.into(), N, RKind::Reduce, ReduceOp::$variant, dest.cast(), source.cast(), nreduce))
        }
        #[doc = concat!("`", stringify!($op), "` reduce-scatter of `", $c, "`: `source` holds `n_pes * nelems` elements; member `i` gets block `i` of the reduction in `dest` (`nelems`). Returns an error code.")]
        #[no_mangle]
        pub extern "C" fn [<xpushmem_ $n _ $op _reducescatter>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            let call = concat!("xpushmem_", stringify!($n), "_", stringify!($op), "_reducescatter");
            code(call, || reduction::<$t>(call, team.into(), N, RKind::ReduceScatter, ReduceOp::$variant, dest.cast(), source.cast(), nelems))
        }
    )* } };
}

macro_rules! native_scan {
    (; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        #[doc = concat!("Inclusive prefix sum of `nelems` `", $c, "` over `team`: member `i` gets the sum of members `0..=i`. Returns an error code.")]
        #[no_mangle]
        pub extern "C" fn [<xpushmemx_ $n _sum_inscan>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            let call = concat!("xpushmemx_", stringify!($n), "_sum_inscan");
            code(call, || reduction::<$t>(call, team.into(), N, RKind::Inscan, ReduceOp::Sum, dest.cast(), source.cast(), nelems))
        }
        #[doc = concat!("Exclusive prefix sum of `nelems` `", $c, "` over `team`: member `i` gets the sum of members `0..i` (0 on member 0). Returns an error code.")]
        #[no_mangle]
        pub extern "C" fn [<xpushmemx_ $n _sum_exscan>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            let call = concat!("xpushmemx_", stringify!($n), "_sum_exscan");
            code(call, || reduction::<$t>(call, team.into(), N, RKind::Exscan, ReduceOp::Sum, dest.cast(), source.cast(), nelems))
        }
    )* } };
}

crate::for_rma_types!(native_coll;);
crate::for_reduce_bitwise_types!(native_reduce; and, And);
crate::for_reduce_bitwise_types!(native_reduce; or, Or);
crate::for_reduce_bitwise_types!(native_reduce; xor, Xor);
crate::for_reduce_arith_types!(native_reduce; min, Min);
crate::for_reduce_arith_types!(native_reduce; max, Max);
crate::for_reduce_arith_types!(native_reduce; sum, Sum);
crate::for_reduce_arith_types!(native_reduce; prod, Prod);
crate::for_reduce_arith_types!(native_scan;);

/// Copy `nelems` bytes from `source` on member `PE_root` of `team` to `dest` on every member. Returns an error
/// code.
#[no_mangle]
pub extern "C" fn xpushmem_broadcastmem(
    team: xpushmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    pe_root: c_int,
) -> c_int {
    let call = "xpushmem_broadcastmem";
    code(call, || {
        movement::<u8>(
            call,
            team.into(),
            N,
            Kind::Broadcast(pe_root),
            dest,
            source,
            nelems,
        )
    })
}

/// Concatenate each member's `nelems` bytes (the same on every member) into every member's `dest`. Returns an
/// error code.
#[no_mangle]
pub extern "C" fn xpushmem_fcollectmem(
    team: xpushmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    let call = "xpushmem_fcollectmem";
    code(call, || {
        movement::<u8>(call, team.into(), N, Kind::Fcollect, dest, source, nelems)
    })
}

/// Concatenate each member's `nelems` bytes (may differ per member) into every member's `dest`. Returns an error
/// code.
#[no_mangle]
pub extern "C" fn xpushmem_collectmem(
    team: xpushmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    let call = "xpushmem_collectmem";
    code(call, || {
        movement::<u8>(call, team.into(), N, Kind::Collect, dest, source, nelems)
    })
}

/// Exchange blocks of `nelems` bytes between every pair of members. Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_alltoallmem(
    team: xpushmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    let call = "xpushmem_alltoallmem";
    code(call, || {
        movement::<u8>(call, team.into(), N, Kind::Alltoall, dest, source, nelems)
    })
}

/// Strided all-to-all of bytes (strides in bytes, at least 1). Returns an error code.
#[no_mangle]
pub extern "C" fn xpushmem_alltoallsmem(
    team: xpushmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    dst: isize,
    sst: isize,
    nelems: usize,
) -> c_int {
    let call = "xpushmem_alltoallsmem";
    code(call, || {
        movement::<u8>(
            call,
            team.into(),
            N,
            Kind::Alltoalls(dst, sst),
            dest,
            source,
            nelems,
        )
    })
}
