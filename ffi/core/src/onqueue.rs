//! The host on-queue forms (`xpushmemx_<op>_on_queue`, Intel SHMEM's `ishmemx_<op>_on_queue`, NVSHMEM's
//! `nvshmemx_<op>_on_stream`): every op is appended to a caller's Level Zero command list (`ze_command_list_handle_t`,
//! immediate or regular, of the runtime's context and device: `xpushmemx_ze_get_handles`) as one kernel launch that
//! waits for `num_wait_events` events of `wait_events` (a `ze_event_handle_t` array) and signals `signal_event`
//! (NULL: none) when the op has finished, in order with the list. The op's arguments are checked when it is
//! enqueued (the same errors as the blocking form); errors found on the device (a wait that gave up, a peer lost
//! behind the host proxy) are returned by [`xpushmemx_queue_wait`] / [`xpushmemx_queue_poll`]. The Rust API is
//! `xpushmem::device::onqueue::OnQueue`; semantics (ordering, completion, the signal event) are in docs/DEVICE.md,
//! "Host on-queue forms".

use crate::coll::sym_to_end;
use crate::error::code;
use crate::imp::{cmp_arg, pe_arg, sig_op_arg};
use crate::state;
use crate::teams::{self, xpushmem_team_t, Api};
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, Once};
use xpushmem_rt::device::onqueue::{Movement, OnList, OnQueue, QueueReduce, RmaKind};
use xpushmem_rt::device::queue::{CommandList, QueueEvents};
use xpushmem_rt::{Device, Error, ReduceOp, Shmem, SymRef, SymSlice, Symmetric};

/// This PE's on-queue module and outstanding ops (created on the first on-queue call, forgotten at finalize).
static ONQ: Mutex<Option<OnQueue>> = Mutex::new(None);
static FORGET_AT_FINALIZE: Once = Once::new();

/// The list and events of an on-queue call, as C passes them.
#[derive(Clone, Copy)]
pub struct Q {
    list: *mut c_void,
    n: u32,
    waits: *const c_void,
    signal: *mut c_void,
}

/// The list and events of an on-queue call.
pub fn q(list: *mut c_void, n: u32, waits: *const c_void, signal: *mut c_void) -> Q {
    Q {
        list,
        n,
        waits,
        signal,
    }
}

/// Run an on-queue entry point's body on the runtime: the device, the on-queue module (loaded on first use) and the
/// caller's list with its events.
///
/// # Safety
/// `q.list` is NULL or a live command list, `q.waits` NULL or `q.n` readable event handles, `q.signal` NULL or a
/// live event, all staying alive until the op has run (the `_on_queue` entry points' contract).
pub unsafe fn run(
    call: &str,
    q: Q,
    f: impl FnOnce(&Shmem, &Device<'_>, &OnQueue, OnList<'_>) -> Result<(), Error>,
) -> c_int {
    code(call, || {
        state::with(|sh| {
            let dev = sh.device().ok_or_else(|| {
                Error::State(format!(
                    "{call}: the on-queue forms need a device heap (XPUSHMEM_HEAP=device)"
                ))
            })?;
            if q.list.is_null() {
                return Err(Error::invalid(
                    "ze_command_list",
                    "NULL",
                    format!("{call}: must be a ze_command_list_handle_t of the runtime's context"),
                )
                .into());
            }
            if q.n > 0 && q.waits.is_null() {
                return Err(Error::invalid(
                    "wait_events",
                    "NULL",
                    format!("{call}: num_wait_events is {}", q.n),
                )
                .into());
            }
            let waits: &[*mut c_void] = if q.n == 0 {
                &[]
            } else {
                // SAFETY: non-NULL; the caller provides `n` readable handles.
                unsafe { std::slice::from_raw_parts(q.waits.cast::<*mut c_void>(), q.n as usize) }
            };
            // SAFETY: the caller's contract (live handles that outlive the op).
            let on = unsafe {
                OnList::with_events(
                    CommandList::from_raw(q.list),
                    QueueEvents::from_raw(waits, q.signal),
                )
            };
            let mut g = ONQ.lock().unwrap_or_else(|p| p.into_inner());
            if g.is_none() {
                FORGET_AT_FINALIZE.call_once(|| {
                    state::on_finalize(|| *ONQ.lock().unwrap_or_else(|p| p.into_inner()) = None)
                });
                *g = Some(OnQueue::new(&dev)?);
            }
            let oq = g.as_ref().expect("set above");
            Ok(f(sh, &dev, oq, on)?)
        })
    })
}

/// The report of [`xpushmemx_queue_wait`] (`wait`) or [`xpushmemx_queue_poll`].
fn report(call: &str, wait: bool) -> c_int {
    code(call, || {
        state::with(|sh| {
            let g = ONQ.lock().unwrap_or_else(|p| p.into_inner());
            let (Some(oq), Some(dev)) = (g.as_ref(), sh.device()) else {
                return Ok(());
            };
            Ok(if wait { oq.wait(&dev) } else { oq.poll(&dev) }?)
        })
    })
}

/// Wait (bounded by `XPUSHMEM_TIMEOUT_MS`, with lost-peer detection) until every op enqueued with an
/// `xpushmemx_*_on_queue` entry point since the last report has run, and return 0 or the first failed op's error
/// (its message, naming the entry point, in `xpushmem_last_error()`): the error the blocking form returns (a device
/// wait that gave up is `XPUSHMEM_ERROR_TIMEOUT`). The caller must have let its lists run (immediate lists run by
/// themselves; a regular list must have been executed). The op family (`xpushmem_ops_*_on_queue`) reports through
/// `xpushmem_ops_queue_wait`.
#[no_mangle]
pub extern "C" fn xpushmemx_queue_wait() -> c_int {
    report("xpushmemx_queue_wait", true)
}

/// Without waiting: 0, or the first error of an op enqueued with an `xpushmemx_*_on_queue` entry point that has
/// finished since the last report.
#[no_mangle]
pub extern "C" fn xpushmemx_queue_poll() -> c_int {
    report("xpushmemx_queue_poll", false)
}

/// `p`'s symmetric slice of `T` to the end of the heap (NULL allowed when `empty`).
fn sym<T: Symmetric>(
    sh: &Shmem,
    p: *const c_void,
    empty: bool,
    call: &str,
    arg: &str,
) -> Result<SymSlice<T>, Error> {
    sym_to_end::<T>(sh, p, empty, call, arg)
}

/// The signal word at `p`.
fn sig(sh: &Shmem, p: *const u64, call: &str) -> Result<SymRef<u64>, Error> {
    crate::imp::sym_ref(sh, p, call, "sig_addr")
}

/// A C stride (in elements) as the runtime's (non-positive strides become 0, which is refused naming it).
fn stride(v: isize) -> usize {
    usize::try_from(v).unwrap_or(0)
}

/// A C team member number (root) as the runtime's (negative: refused, naming it).
fn root_arg(root: c_int, call: &str) -> Result<usize, Error> {
    usize::try_from(root)
        .map_err(|_| Error::invalid("pe_root", root, format!("{call}: a team member number")))
}

/// An RMA entry point's body: `nelems` elements of `T`.
///
/// # Safety
/// The `_on_queue` contract.
#[allow(clippy::too_many_arguments)]
pub unsafe fn rma<T: Symmetric>(
    call: &str,
    kind: RmaKind,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    pe: c_int,
    q: Q,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        run(call, q, |sh, dev, oq, on| {
            let pe = pe_arg(sh, pe, call)?;
            let d = sym::<T>(sh, dest, nelems == 0, call, "dest")?;
            let s = sym::<T>(sh, source, nelems == 0, call, "source")?;
            oq.rma(dev, on, kind, d, fit(s, nelems, "source", call)?, pe)
        })
    }
}

/// The first `n` elements of `s`, or an error naming `nelems` when `n` elements overflow the address space, or
/// `what` when `s` (to the end of the heap) is shorter.
fn fit<T: Symmetric>(
    s: SymSlice<T>,
    n: usize,
    what: &'static str,
    call: &str,
) -> Result<SymSlice<T>, Error> {
    if n.checked_mul(std::mem::size_of::<T>())
        .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(Error::invalid(
            "nelems",
            n,
            format!(
                "{call}: {n} elements of {} bytes overflow",
                std::mem::size_of::<T>()
            ),
        ));
    }
    if n > s.len() {
        return Err(Error::invalid(
            what,
            format!("{s:?}"),
            format!("{call}: {n} elements pass the end of the symmetric heap"),
        ));
    }
    s.slice(..n)
}

/// A strided RMA entry point's body.
///
/// # Safety
/// The `_on_queue` contract.
#[allow(clippy::too_many_arguments)]
pub unsafe fn strided<T: Symmetric>(
    call: &str,
    get: bool,
    dest: *mut c_void,
    source: *const c_void,
    dst: isize,
    sst: isize,
    nelems: usize,
    pe: c_int,
    q: Q,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        run(call, q, |sh, dev, oq, on| {
            let pe = pe_arg(sh, pe, call)?;
            let d = sym::<T>(sh, dest, nelems == 0, call, "dest")?;
            let s = sym::<T>(sh, source, nelems == 0, call, "source")?;
            oq.strided(dev, on, get, d, s, stride(dst), stride(sst), nelems, pe)
        })
    }
}

/// A put-with-signal entry point's body.
///
/// # Safety
/// The `_on_queue` contract.
#[allow(clippy::too_many_arguments)]
pub unsafe fn put_signal<T: Symmetric>(
    call: &str,
    nbi: bool,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    sig_addr: *mut u64,
    signal: u64,
    op: c_int,
    pe: c_int,
    q: Q,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        run(call, q, |sh, dev, oq, on| {
            let pe = pe_arg(sh, pe, call)?;
            let op = sig_op_arg(op, call)?;
            let d = sym::<T>(sh, dest, nelems == 0, call, "dest")?;
            let s = fit(
                sym::<T>(sh, source, nelems == 0, call, "source")?,
                nelems,
                "source",
                call,
            )?;
            let g = sig(sh, sig_addr, call)?;
            oq.put_signal(dev, on, d, s, g, signal, op, pe, nbi)
        })
    }
}

/// A data-movement collective entry point's body.
///
/// # Safety
/// The `_on_queue` contract.
#[allow(clippy::too_many_arguments)]
pub unsafe fn movement<T: Symmetric>(
    call: &str,
    kind: MoveKind,
    team: xpushmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    q: Q,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        run(call, q, |sh, dev, oq, on| {
            let t = teams::team(sh, team.into(), Api::Native, call)?;
            let d = sym::<T>(sh, dest, nelems == 0, call, "dest")?;
            let s = sym::<T>(sh, source, nelems == 0, call, "source")?;
            let m = match kind {
                MoveKind::Broadcast(root) => Movement::Broadcast {
                    root: root_arg(root, call)?,
                },
                MoveKind::Fcollect => Movement::Fcollect,
                MoveKind::Collect => return oq.collect(dev, on, &t, d, s, nelems),
                MoveKind::Alltoall => Movement::Alltoall,
                MoveKind::Alltoalls(dst, sst) => {
                    return oq.alltoalls(dev, on, &t, d, s, stride(dst), stride(sst), nelems)
                }
            };
            oq.movement(dev, on, m, &t, d, s, nelems)
        })
    }
}

/// Which data-movement collective.
#[derive(Debug, Clone, Copy)]
pub enum MoveKind {
    /// Broadcast from a root (a team member number).
    Broadcast(c_int),
    /// Concatenation of equal sizes.
    Fcollect,
    /// Concatenation of sizes that may differ per member.
    Collect,
    /// All to all.
    Alltoall,
    /// Strided all to all (strides in elements).
    Alltoalls(isize, isize),
}

/// A reduction (`scan`: `None`) or prefix sum (`Some(exclusive)`) entry point's body.
///
/// # Safety
/// The `_on_queue` contract.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduction<T: QueueReduce>(
    call: &str,
    op: ReduceOp,
    scan: Option<bool>,
    team: xpushmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    q: Q,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        run(call, q, |sh, dev, oq, on| {
            let t = teams::team(sh, team.into(), Api::Native, call)?;
            let d = sym::<T>(sh, dest, nelems == 0, call, "dest")?;
            let s = sym::<T>(sh, source, nelems == 0, call, "source")?;
            match scan {
                None => oq.reduce(dev, on, &t, op, d, s, nelems),
                Some(exclusive) => oq.scan(dev, on, &t, exclusive, d, s, nelems),
            }
        })
    }
}

macro_rules! onq_rma {
    (; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        #[doc = concat!("On-queue put of `nelems` `", $c, "` from local symmetric `source` to `dest` on `pe` (see `xpushmemx_queue_wait`).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _put_on_queue>](dest: *mut $t, source: *const $t, nelems: usize, pe: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { rma::<$t>(concat!("xpushmemx_", stringify!($n), "_put_on_queue"), RmaKind::Put, dest.cast(), source.cast(), nelems, pe, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue get of `nelems` `", $c, "` from symmetric `source` on `pe` to local symmetric `dest`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _get_on_queue>](dest: *mut $t, source: *const $t, nelems: usize, pe: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { rma::<$t>(concat!("xpushmemx_", stringify!($n), "_get_on_queue"), RmaKind::Get, dest.cast(), source.cast(), nelems, pe, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue non-blocking put of `", $c, "`: complete after a later `xpushmemx_quiet_on_queue`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _put_nbi_on_queue>](dest: *mut $t, source: *const $t, nelems: usize, pe: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { rma::<$t>(concat!("xpushmemx_", stringify!($n), "_put_nbi_on_queue"), RmaKind::PutNbi, dest.cast(), source.cast(), nelems, pe, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue non-blocking get of `", $c, "`: complete after a later `xpushmemx_quiet_on_queue`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _get_nbi_on_queue>](dest: *mut $t, source: *const $t, nelems: usize, pe: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { rma::<$t>(concat!("xpushmemx_", stringify!($n), "_get_nbi_on_queue"), RmaKind::GetNbi, dest.cast(), source.cast(), nelems, pe, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue strided put of `", $c, "` (strides in elements).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _iput_on_queue>](dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize, pe: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { strided::<$t>(concat!("xpushmemx_", stringify!($n), "_iput_on_queue"), false, dest.cast(), source.cast(), dst, sst, nelems, pe, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue strided get of `", $c, "` (strides in elements).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _iget_on_queue>](dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize, pe: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { strided::<$t>(concat!("xpushmemx_", stringify!($n), "_iget_on_queue"), true, dest.cast(), source.cast(), dst, sst, nelems, pe, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue put of `", $c, "` then a signal update (`sig_op`: XPUSHMEM_SIGNAL_SET/ADD).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _put_signal_on_queue>](dest: *mut $t, source: *const $t, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int, pe: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { put_signal::<$t>(concat!("xpushmemx_", stringify!($n), "_put_signal_on_queue"), false, dest.cast(), source.cast(), nelems, sig_addr, signal, sig_op, pe, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue broadcast of `nelems` `", $c, "` from member `pe_root` of `team`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _broadcast_on_queue>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize, pe_root: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { movement::<$t>(concat!("xpushmemx_", stringify!($n), "_broadcast_on_queue"), MoveKind::Broadcast(pe_root), team, dest.cast(), source.cast(), nelems, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue fcollect of `nelems` `", $c, "` per member.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _fcollect_on_queue>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { movement::<$t>(concat!("xpushmemx_", stringify!($n), "_fcollect_on_queue"), MoveKind::Fcollect, team, dest.cast(), source.cast(), nelems, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue collect of `nelems` `", $c, "` (may differ per member; the counts are exchanged on the host, so the call returns once every member made it).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _collect_on_queue>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { movement::<$t>(concat!("xpushmemx_", stringify!($n), "_collect_on_queue"), MoveKind::Collect, team, dest.cast(), source.cast(), nelems, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue alltoall of `nelems` `", $c, "` per member.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _alltoall_on_queue>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { movement::<$t>(concat!("xpushmemx_", stringify!($n), "_alltoall_on_queue"), MoveKind::Alltoall, team, dest.cast(), source.cast(), nelems, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue strided alltoall of `", $c, "` (strides `dst`, `sst` in elements).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _alltoalls_on_queue>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { movement::<$t>(concat!("xpushmemx_", stringify!($n), "_alltoalls_on_queue"), MoveKind::Alltoalls(dst, sst), team, dest.cast(), source.cast(), nelems, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
    )* } };
}

macro_rules! onq_wait {
    (; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        #[doc = concat!("On-queue `wait_until` on this PE's `", $c, "` at `ivar` (`cmp`: XPUSHMEM_CMP_*).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _wait_until_on_queue>](ivar: *mut $t, cmp: c_int, cmp_value: $t, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            let call = concat!("xpushmemx_", stringify!($n), "_wait_until_on_queue");
            // SAFETY: the caller's contract.
            unsafe { run(call, q(ze_command_list, num_wait_events, wait_events, signal_event), |sh, dev, oq, on| {
                let r = crate::imp::sym_ref(sh, ivar.cast_const(), call, "ivar")?;
                oq.wait_until(dev, on, r, cmp_arg(cmp, call)?, cmp_value)
            }) }
        }
    )* } };
}

macro_rules! onq_reduce {
    ($op:ident, $variant:ident ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        #[doc = concat!("On-queue `", stringify!($op), "` reduction of `nreduce` `", $c, "` over `team` (`dest` must not overlap `source`).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _ $op _reduce_on_queue>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nreduce: usize, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { reduction::<$t>(concat!("xpushmemx_", stringify!($n), "_", stringify!($op), "_reduce_on_queue"), ReduceOp::$variant, None, team, dest.cast(), source.cast(), nreduce, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
    )* } };
}

macro_rules! onq_scan {
    (; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        #[doc = concat!("On-queue inclusive prefix sum of `nelems` `", $c, "` over `team`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _sum_inscan_on_queue>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { reduction::<$t>(concat!("xpushmemx_", stringify!($n), "_sum_inscan_on_queue"), ReduceOp::Sum, Some(false), team, dest.cast(), source.cast(), nelems, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
        #[doc = concat!("On-queue exclusive prefix sum of `nelems` `", $c, "` over `team` (0 on member 0).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "The list and events are live handles of the runtime's context that outlive the op."]
        #[no_mangle]
        pub unsafe extern "C" fn [<xpushmemx_ $n _sum_exscan_on_queue>](team: xpushmem_team_t, dest: *mut $t, source: *const $t, nelems: usize, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { reduction::<$t>(concat!("xpushmemx_", stringify!($n), "_sum_exscan_on_queue"), ReduceOp::Sum, Some(true), team, dest.cast(), source.cast(), nelems, q(ze_command_list, num_wait_events, wait_events, signal_event)) }
        }
    )* } };
}

crate::for_rma_types!(onq_rma;);
crate::for_amo_std_types!(onq_wait;);
crate::for_reduce_bitwise_types!(onq_reduce; and, And);
crate::for_reduce_bitwise_types!(onq_reduce; or, Or);
crate::for_reduce_bitwise_types!(onq_reduce; xor, Xor);
crate::for_reduce_arith_types!(onq_reduce; min, Min);
crate::for_reduce_arith_types!(onq_reduce; max, Max);
crate::for_reduce_arith_types!(onq_reduce; sum, Sum);
crate::for_reduce_arith_types!(onq_reduce; prod, Prod);
crate::for_reduce_arith_types!(onq_scan;);

/// On-queue update of the signal word `sig_addr` on `pe` with `signal` by `sig_op` (`XPUSHMEM_SIGNAL_SET`: set,
/// `XPUSHMEM_SIGNAL_ADD`: atomic add).
///
/// # Safety
/// As for `xpushmemx_putmem_on_queue`.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_signal_op_on_queue(
    sig_addr: *mut u64,
    signal: u64,
    sig_op: c_int,
    pe: c_int,
    ze_command_list: *mut c_void,
    num_wait_events: u32,
    wait_events: *const c_void,
    signal_event: *mut c_void,
) -> c_int {
    let call = "xpushmemx_signal_op_on_queue";
    let q = q(ze_command_list, num_wait_events, wait_events, signal_event);
    // SAFETY: the caller's contract.
    unsafe {
        run(call, q, |sh, dev, oq, on| {
            let pe = pe_arg(sh, pe, call)?;
            let op = sig_op_arg(sig_op, call)?;
            oq.signal_op(dev, on, sig(sh, sig_addr, call)?, signal, op, pe)
        })
    }
}

/// Hold the list until this PE's signal word `sig_addr` satisfies `cmp cmp_value` (`XPUSHMEM_CMP_*`; bounded by
/// `XPUSHMEM_TIMEOUT_MS`: a wait that gives up is `XPUSHMEM_ERROR_TIMEOUT` from `xpushmemx_queue_wait`).
///
/// # Safety
/// As for `xpushmemx_putmem_on_queue`.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_signal_wait_until_on_queue(
    sig_addr: *mut u64,
    cmp: c_int,
    cmp_value: u64,
    ze_command_list: *mut c_void,
    num_wait_events: u32,
    wait_events: *const c_void,
    signal_event: *mut c_void,
) -> c_int {
    let call = "xpushmemx_signal_wait_until_on_queue";
    let q = q(ze_command_list, num_wait_events, wait_events, signal_event);
    // SAFETY: the caller's contract.
    unsafe {
        run(call, q, |sh, dev, oq, on| {
            let c = cmp_arg(cmp, call)?;
            oq.signal_wait_until(dev, on, sig(sh, sig_addr, call)?, c, cmp_value)
        })
    }
}

/// On-queue `team_sync`: every member of `team` meets.
///
/// # Safety
/// As for `xpushmemx_putmem_on_queue`.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_team_sync_on_queue(
    team: xpushmem_team_t,
    ze_command_list: *mut c_void,
    num_wait_events: u32,
    wait_events: *const c_void,
    signal_event: *mut c_void,
) -> c_int {
    let call = "xpushmemx_team_sync_on_queue";
    let q = q(ze_command_list, num_wait_events, wait_events, signal_event);
    // SAFETY: the caller's contract.
    unsafe {
        run(call, q, |sh, dev, oq, on| {
            let t = teams::team(sh, team.into(), Api::Native, call)?;
            oq.team_sync(dev, on, &t)
        })
    }
}

/// On-queue broadcast of `nbytes` bytes from member `pe_root` of `team` to every member's `dest`.
///
/// # Safety
/// As for `xpushmemx_putmem_on_queue`.
#[no_mangle]
pub unsafe extern "C" fn xpushmemx_broadcastmem_on_queue(
    team: xpushmem_team_t,
    dest: *mut c_void,
    source: *const c_void,
    nbytes: usize,
    pe_root: c_int,
    ze_command_list: *mut c_void,
    num_wait_events: u32,
    wait_events: *const c_void,
    signal_event: *mut c_void,
) -> c_int {
    let q = q(ze_command_list, num_wait_events, wait_events, signal_event);
    let k = MoveKind::Broadcast(pe_root);
    // SAFETY: the caller's contract.
    unsafe {
        movement::<u8>(
            "xpushmemx_broadcastmem_on_queue",
            k,
            team,
            dest,
            source,
            nbytes,
            q,
        )
    }
}

/// The Safety section of the untyped on-queue entry points.
macro_rules! onq_safety {
    () => {
        "`ze_command_list` is a live command list of the runtime's context and device; `wait_events` NULL or \
         `num_wait_events` live `ze_event_handle_t`s; `signal_event` NULL or a live event; all outlive the op."
    };
}

/// The untyped on-queue entry points, by shape (declared in `xpushmem.h` by `ffi/tests/cdecl`'s `ONQ_UNTYPED`).
macro_rules! onq_untyped {
    (rma $( $name:ident: $kind:ident, $doc:literal; )*) => { $(
        #[doc = $doc]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = onq_safety!()]
        #[no_mangle]
        pub unsafe extern "C" fn $name(dest: *mut c_void, source: *const c_void, nbytes: usize, pe: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            let q = q(ze_command_list, num_wait_events, wait_events, signal_event);
            // SAFETY: the caller's contract.
            unsafe { rma::<u8>(stringify!($name), RmaKind::$kind, dest, source, nbytes, pe, q) }
        }
    )* };
    (put_signal $( $name:ident: $nbi:literal, $doc:literal; )*) => { $(
        #[doc = $doc]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = onq_safety!()]
        #[no_mangle]
        pub unsafe extern "C" fn $name(dest: *mut c_void, source: *const c_void, nbytes: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int, pe: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            let q = q(ze_command_list, num_wait_events, wait_events, signal_event);
            // SAFETY: the caller's contract.
            unsafe { put_signal::<u8>(stringify!($name), $nbi, dest, source, nbytes, sig_addr, signal, sig_op, pe, q) }
        }
    )* };
    (signal $( $name:ident: $op:literal, $doc:literal; )*) => { $(
        #[doc = $doc]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = onq_safety!()]
        #[no_mangle]
        pub unsafe extern "C" fn $name(sig_addr: *mut u64, signal: u64, pe: c_int, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { xpushmemx_signal_op_on_queue(sig_addr, signal, $op, pe, ze_command_list, num_wait_events, wait_events, signal_event) }
        }
    )* };
    (list $( $name:ident: $method:ident, $doc:literal; )*) => { $(
        #[doc = $doc]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = onq_safety!()]
        #[no_mangle]
        pub unsafe extern "C" fn $name(ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            let q = q(ze_command_list, num_wait_events, wait_events, signal_event);
            // SAFETY: the caller's contract.
            unsafe { run(stringify!($name), q, |_, dev, oq, on| oq.$method(dev, on)) }
        }
    )* };
    (coll $( $name:ident: $kind:ident, $doc:literal; )*) => { $(
        #[doc = $doc]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = onq_safety!()]
        #[no_mangle]
        pub unsafe extern "C" fn $name(team: xpushmem_team_t, dest: *mut c_void, source: *const c_void, nbytes: usize, ze_command_list: *mut c_void, num_wait_events: u32, wait_events: *const c_void, signal_event: *mut c_void) -> c_int {
            let q = q(ze_command_list, num_wait_events, wait_events, signal_event);
            // SAFETY: the caller's contract.
            unsafe { movement::<u8>(stringify!($name), MoveKind::$kind, team, dest, source, nbytes, q) }
        }
    )* };
}

onq_untyped!(rma
    xpushmemx_putmem_on_queue: Put, "On-queue put of `nbytes` bytes from this PE's symmetric `source` to `dest` on `pe`, complete at the target when the op has finished (when `signal_event` is signalled). Returns an error code (argument errors at once; device errors from `xpushmemx_queue_wait`).";
    xpushmemx_getmem_on_queue: Get, "On-queue get of `nbytes` bytes from symmetric `source` on `pe` into this PE's symmetric `dest`.";
    xpushmemx_putmem_nbi_on_queue: PutNbi, "On-queue non-blocking put of bytes: complete at the target after a later `xpushmemx_quiet_on_queue` (or `barrier_all`) on the list.";
    xpushmemx_getmem_nbi_on_queue: GetNbi, "On-queue non-blocking get of bytes: `dest` is complete after a later `xpushmemx_quiet_on_queue`.";
);
onq_untyped!(put_signal
    xpushmemx_putmem_signal_on_queue: false, "On-queue put of `nbytes` bytes, then the update of `sig_addr` on `pe` with `signal` by `sig_op` (`XPUSHMEM_SIGNAL_SET`/`ADD`): the data is visible at the target before the signal.";
    xpushmemx_putmem_signal_nbi_on_queue: true, "`xpushmemx_putmem_signal_on_queue` whose put is complete after a later `xpushmemx_quiet_on_queue`.";
);
onq_untyped!(signal
    xpushmemx_signal_set_on_queue: 0, "On-queue `signal_set` (OpenSHMEM 1.6's `shmem_signal_set`): store `signal` into `sig_addr` on `pe` (`xpushmemx_signal_op_on_queue` with `XPUSHMEM_SIGNAL_SET`).";
    xpushmemx_signal_add_on_queue: 1, "On-queue `signal_add` (OpenSHMEM 1.6's `shmem_signal_add`): atomically add `signal` to `sig_addr` on `pe` (`xpushmemx_signal_op_on_queue` with `XPUSHMEM_SIGNAL_ADD`).";
);
onq_untyped!(list
    xpushmemx_quiet_on_queue: quiet, "On-queue quiet: every earlier put of this PE (on-queue `_nbi` forms and kernels' included) is complete at its target when the op has finished.";
    xpushmemx_barrier_all_on_queue: barrier_all, "On-queue `barrier_all`: earlier puts complete, then every PE meets (every PE calls it, on its own list).";
    xpushmemx_sync_all_on_queue: sync_all, "On-queue `sync_all`: every PE meets (no completion of puts).";
);
onq_untyped!(coll
    xpushmemx_fcollectmem_on_queue: Fcollect, "On-queue fcollect of `nbytes` bytes per member (every member's `dest` gets `n_pes * nbytes`, member order).";
    xpushmemx_collectmem_on_queue: Collect, "On-queue collect of `nbytes` bytes from each member (may differ per member) into every member's `dest`, in member order. The counts are exchanged on the host when the op is enqueued: the call returns once every member of `team` has made it.";
    xpushmemx_alltoallmem_on_queue: Alltoall, "On-queue alltoall of `nbytes` bytes per member.";
);
