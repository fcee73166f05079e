//! Host on-queue forms of the API (Intel SHMEM's `ishmemx_<op>_on_queue`, NVSHMEM's `nvshmemx_<op>_on_stream`):
//! RMA (+ strided, `_nbi`), put-with-signal, `signal_op`, `wait_until`/`signal_wait_until`, `quiet`, barriers and
//! syncs, broadcast, fcollect, alltoall(s), reductions and prefix sums, each appended to a caller's Level Zero command
//! list ([`CommandList`], immediate or regular) as one work-group of a kernel of `shmem/device-lib/queue_kernels.cl`
//! (prebuilt, linked with the device library), waiting for the caller's wait events and signalling its signal event
//! ([`QueueEvents`]). The kernels call the device library, so a PE the device cannot map (another node) is reached
//! through the host proxy exactly as a user kernel's call is.
//!
//! [`OnQueue`] holds the module (loaded and initialised once, by [`OnQueue::new`]) and the ops enqueued but not yet
//! reported: each op writes a status record in host memory when it has finished; [`OnQueue::wait`] waits for them
//! and returns the first error, the one a blocking form returns (a wait that gave up is [`Error::Timeout`], a peer
//! lost behind the proxy [`Error::PeerLost`]); [`OnQueue::poll`] reports without waiting. Arguments are checked
//! before anything is enqueued (PE, ranges inside the heap, sizes that overflow, teams), with the blocking forms'
//! errors; a list or event the driver refuses is an [`Error::InvalidArgument`] naming `ze_command_list`,
//! `wait_events` or `signal_event`.
//!
//! Semantics: ops run in the list's order (each after a barrier on what was appended before it, and after its wait
//! events). Blocking forms end with a `quiet`, so when an op's signal event is signalled (or a later command of the
//! list runs) its data is complete at the target PE, not only locally; `_nbi` forms skip that `quiet` and are
//! complete after a later [`OnQueue::quiet`] on the list. Collectives and syncs are entered by every member, each on
//! its own list, in the same order on every PE (as the blocking forms).

use super::queue::{CommandList, HostBuf, QueueArg, QueueEvents};
use super::{Device, Kernel, KernelArg, Module};
use crate::coll::ReduceOp;
use crate::error::{Error, Result};
use crate::team::{Messages, Team};
use crate::types::{AtomicInt, Cmp, SignalOp, SymRef, SymSlice, Symmetric};
use std::collections::HashMap;
use std::sync::Mutex;

/// The on-queue kernels (`shmem/device-lib/queue_kernels.cl` linked with the device library), prebuilt to SPIR-V.
pub const QUEUE_KERNELS_SPIRV: &[u8] =
    include_bytes!("../../device-lib/prebuilt/xpushmem_queue.spv");

/// Work-items of the one work-group of a data-moving op.
const GROUP: u32 = 64;

/// Where an op goes: a caller's command list and the events its launch waits for and signals.
#[derive(Debug, Clone, Copy)]
pub struct OnList<'e> {
    /// The caller's list.
    pub list: CommandList,
    /// The wait events and the signal event of the op's launch.
    pub events: QueueEvents<'e>,
}

impl OnList<'static> {
    /// `list` without events (ordered by the list alone).
    pub fn new(list: CommandList) -> OnList<'static> {
        OnList {
            list,
            events: QueueEvents::none(),
        }
    }
}

impl<'e> OnList<'e> {
    /// `list`, the launch waiting for and signalling `events`.
    pub fn with_events(list: CommandList, events: QueueEvents<'e>) -> OnList<'e> {
        OnList { list, events }
    }
}

/// Element types of the on-queue reductions and prefix sums: the device library's name of the type.
pub trait QueueReduce: Symmetric {
    /// The device library's name (`int8` .. `uint64`, `float`, `double`).
    const DEVICE: &'static str;
    /// Whether the type is a floating-point type (no bitwise reductions).
    const FLOAT: bool = false;
}

macro_rules! queue_reduce {
    ($($t:ty => $n:literal $(, $f:literal)?);* $(;)?) => {$(
        impl QueueReduce for $t { const DEVICE: &'static str = $n; $(const FLOAT: bool = $f;)? }
    )*};
}
queue_reduce!(
    i8 => "int8"; i16 => "int16"; i32 => "int32"; i64 => "int64"; isize => "int64";
    u8 => "uint8"; u16 => "uint16"; u32 => "uint32"; u64 => "uint64"; usize => "uint64";
    f32 => "float", true; f64 => "double", true;
);

/// The RMA kinds of the kernel `xq_rma` (its `XQ_*` constants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmaKind {
    /// Blocking put (complete at the target when the op has finished).
    Put = 0,
    /// Blocking get.
    Get = 1,
    /// Non-blocking put: complete after a later [`OnQueue::quiet`].
    PutNbi = 2,
    /// Non-blocking get: complete after a later [`OnQueue::quiet`].
    GetNbi = 3,
}

/// The data-movement collectives of [`OnQueue::movement`] (the kernel `xq_coll`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Movement {
    /// Broadcast `nelems` elements of `src` on member `root` (a team member number) into every member's `dest`.
    Broadcast {
        /// The root's member number.
        root: usize,
    },
    /// Concatenate each member's `nelems` elements of `src` into every member's `dest`, in member order.
    Fcollect,
    /// Block `j` (`nelems` elements) of `src` goes to member `j`, into block `i` of its `dest` (`i` = this member).
    Alltoall,
}

impl Movement {
    /// The kernel's kind code (`XQ_BROADCAST`, ...) and the call's name.
    fn code(self) -> (u32, &'static str) {
        match self {
            Movement::Broadcast { .. } => (0, "broadcast_on_queue"),
            Movement::Fcollect => (1, "fcollect_on_queue"),
            Movement::Alltoall => (2, "alltoall_on_queue"),
        }
    }
}

/// The sync kinds of the kernel `xq_sync`.
#[derive(Debug, Clone, Copy)]
enum SyncKind {
    BarrierAll = 0,
    SyncAll = 1,
    TeamSync = 2,
}

/// An op enqueued whose outcome was not reported yet: its entry point and its status record.
#[derive(Debug)]
struct Pending {
    call: String,
    status: HostBuf,
}

/// Ops enqueued and not yet reported, and the first error of those that finished before a report.
#[derive(Debug, Default)]
struct Outstanding {
    ops: Vec<Pending>,
    deferred: Option<Error>,
}

/// The host on-queue forms on this PE's device: the module of on-queue kernels and the ops not yet reported.
#[derive(Debug)]
pub struct OnQueue {
    module: Module,
    kernels: Mutex<HashMap<String, Kernel>>,
    outstanding: Mutex<Outstanding>,
}

/// The element count of `n` elements of `T` in bytes, or an error naming `what`.
fn bytes_of<T>(n: usize, what: &'static str, call: &str) -> Result<usize> {
    n.checked_mul(std::mem::size_of::<T>())
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| {
            Error::invalid(
                what,
                n,
                format!(
                    "{call}: {n} elements of {} bytes overflow",
                    std::mem::size_of::<T>()
                ),
            )
        })
}

/// `s` must hold at least `n` elements, or an error naming `what`.
fn fits<T: Symmetric>(s: SymSlice<T>, n: usize, what: &'static str, call: &str) -> Result<()> {
    if s.len() < n {
        return Err(Error::invalid(
            what,
            format!("{s:?}"),
            format!("{call}: {n} elements do not fit its {}", s.len()),
        ));
    }
    Ok(())
}

/// Strides of the strided forms: at least 1 element, or an error naming the stride.
fn strides(call: &str, strides: [(&'static str, usize); 2]) -> Result<()> {
    for (name, s) in strides {
        if s == 0 || s > isize::MAX as usize {
            return Err(Error::invalid(
                name,
                s,
                format!("{call}: a stride is at least 1 element"),
            ));
        }
    }
    Ok(())
}

/// The elements a strided access of `count` elements at `stride` spans (0 for none), or an error naming `nelems`
/// (reported as `nelems`) when it overflows.
fn span<T>(count: Option<usize>, stride: usize, nelems: usize, call: &str) -> Result<usize> {
    count
        .and_then(|c| match c {
            0 => Some(0),
            c => (c - 1).checked_mul(stride).and_then(|x| x.checked_add(1)),
        })
        .filter(|&x| bytes_of::<T>(x, "nelems", call).is_ok())
        .ok_or_else(|| {
            Error::invalid(
                "nelems",
                nelems,
                format!("{call}: {nelems} elements at stride {stride} overflow"),
            )
        })
}

/// The first `n` elements of `dest` and `src`, which must not overlap (the members of a reduction or scan read
/// each other's sources on the device), or an error naming `dest`.
fn disjoint<T: Symmetric>(
    dest: SymSlice<T>,
    src: SymSlice<T>,
    n: usize,
    what: &'static str,
    call: &str,
) -> Result<(SymSlice<T>, SymSlice<T>)> {
    bytes_of::<T>(n, what, call)?;
    fits(dest, n, "dest", call)?;
    fits(src, n, "source", call)?;
    let (d, s) = (dest.slice(..n)?, src.slice(..n)?);
    let (a, b, len) = (d.heap_offset(), s.heap_offset(), d.size_bytes());
    if len > 0 && a < b + len && b < a + len {
        return Err(Error::invalid(
            "dest",
            format!("{d:?}"),
            format!(
                "{call}: overlaps source {s:?} (on the queue the members read each other's sources directly)"
            ),
        ));
    }
    Ok((d, s))
}

impl OnQueue {
    /// Load and initialise the on-queue module on `dev` (once per user: C keeps one per runtime).
    pub fn new(dev: &Device<'_>) -> Result<OnQueue> {
        let module = dev.load_module(QUEUE_KERNELS_SPIRV)?;
        dev.init_module(&module)?;
        Ok(OnQueue {
            module,
            kernels: Mutex::new(HashMap::new()),
            outstanding: Mutex::new(Outstanding::default()),
        })
    }

    fn heap<T: Symmetric>(dev: &Device<'_>, s: SymSlice<T>) -> QueueArg<'static> {
        QueueArg::Kernel(KernelArg::sym(s, dev.sh.my_pe()))
    }

    fn pe(dev: &Device<'_>, pe: usize, call: &str) -> Result<u32> {
        if pe >= dev.sh.n_pes() {
            return Err(Error::InvalidPe {
                pe: pe as i64,
                n_pes: dev.sh.n_pes(),
                context: call.to_string(),
            });
        }
        Ok(pe as u32)
    }

    /// Enqueue kernel `kernel` with `args` (the status record is appended) on `on`, one work-group of `group`
    /// items, and remember it as `call`'s op.
    ///
    /// # Safety
    /// See [`OnQueue::put`].
    unsafe fn op(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        call: &str,
        kernel: &str,
        args: Vec<QueueArg<'static>>,
        group: u32,
    ) -> Result<()> {
        let status = dev.host_buf(16)?;
        let mut args: Vec<QueueArg<'_>> = args;
        args.push(QueueArg::Host(&status, 0));
        {
            let mut ks = self.kernels.lock().unwrap_or_else(|p| p.into_inner());
            if !ks.contains_key(kernel) {
                let k = dev.kernel(&self.module, kernel)?;
                ks.insert(kernel.to_string(), k);
            }
            let k = &ks[kernel];
            // SAFETY: the on-queue kernels touch only the heap ranges of `args` (validated against the heap by
            // enqueue_with_events) and the status record, which stays alive until the op has finished (kept in
            // `outstanding`, leaked if dropped unfinished); the list and events are the caller's contract.
            unsafe {
                dev.enqueue_with_events(on.list, on.events, k, &args, [1, 1, 1], [group, 1, 1])?
            };
        }
        drop(args);
        self.lock().ops.push(Pending {
            call: call.to_string(),
            status,
        });
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Outstanding> {
        self.outstanding.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The outcome of a finished op: its error, the one the module recorded (naming the device call) when the
    /// kernel reported a code.
    fn outcome(&self, dev: &Device<'_>, p: &Pending) -> Result<()> {
        let code = p.status.word(1)?;
        let recorded = dev.take_module_error(&self.module, &p.call);
        if code != 0 {
            recorded?;
            return Err(Error::Device(format!(
                "{}: the device library returned error code {code}",
                p.call
            )));
        }
        recorded
    }

    /// Wait (bounded by `XPUSHMEM_TIMEOUT_MS`, with lost-peer detection) until every op enqueued so far has run,
    /// and return the first error of any (its entry point named), the error the blocking form returns. The caller
    /// must let its lists run (immediate lists run by themselves; a regular list must have been executed). Ops that
    /// have not run when the wait gives up stay outstanding (the error is a [`Error::Timeout`]).
    pub fn wait(&self, dev: &Device<'_>) -> Result<()> {
        let mut o = self.lock();
        let mut first = o.deferred.take();
        let ops = std::mem::take(&mut o.ops);
        let mut rest = ops.into_iter();
        while let Some(p) = rest.next() {
            let what = format!("{} (waiting for the op to run)", p.call);
            if let Err(e) = dev.wait_host_word(&p.status, 0, 1, 4, &what) {
                o.ops.push(p);
                o.ops.extend(rest);
                return Err(first.unwrap_or(e));
            }
            if let Err(e) = self.outcome(dev, &p) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Without waiting: the first error of an op that has finished since the last report (`Ok` when none failed or
    /// none has finished yet).
    pub fn poll(&self, dev: &Device<'_>) -> Result<()> {
        let mut o = self.lock();
        let mut first = o.deferred.take();
        let mut still = Vec::new();
        for p in std::mem::take(&mut o.ops) {
            if p.status.word(0)? == 1 {
                if let Err(e) = self.outcome(dev, &p) {
                    first.get_or_insert(e);
                }
            } else {
                still.push(p);
            }
        }
        o.ops = still;
        first.map_or(Ok(()), Err)
    }

    /// The number of ops enqueued whose outcome was not reported yet.
    pub fn outstanding(&self) -> usize {
        self.lock().ops.len()
    }

    /// Put `src` (this PE's copy) into `dest` on `pe` ([`RmaKind`]: blocking or `_nbi`; gets read `src` on `pe`
    /// into this PE's `dest`). Byte-level RMA uses `T = u8`.
    ///
    /// # Safety
    /// `on.list` and the events are live Level Zero handles that outlive the op (see [`CommandList::from_raw`],
    /// [`QueueEvents::from_raw`]); the heap ranges given stay allocated, and are not accessed by the host in a way
    /// that races with the op, until it has run. (The op's kernel touches only those ranges on the PEs named.)
    pub unsafe fn rma<T: Symmetric>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        kind: RmaKind,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        pe: usize,
    ) -> Result<()> {
        let call = match kind {
            RmaKind::Put => "put_on_queue",
            RmaKind::Get => "get_on_queue",
            RmaKind::PutNbi => "put_nbi_on_queue",
            RmaKind::GetNbi => "get_nbi_on_queue",
        };
        let pe = Self::pe(dev, pe, call)?;
        fits(dest, src.len(), "dest", call)?;
        let n = bytes_of::<T>(src.len(), "nelems", call)?;
        let args = vec![
            QueueArg::Kernel(KernelArg::U32(kind as u32)),
            Self::heap(dev, dest.slice(..src.len())?),
            Self::heap(dev, src),
            QueueArg::Kernel(KernelArg::U64(n as u64)),
            QueueArg::Kernel(KernelArg::U32(pe)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, "xq_rma", args, GROUP) }
    }

    /// Blocking put of `src` into `dest` on `pe` ([`OnQueue::rma`]).
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    pub unsafe fn put<T: Symmetric>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        pe: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.rma(dev, on, RmaKind::Put, dest, src, pe) }
    }

    /// Blocking get of `src` on `pe` into this PE's `dest` ([`OnQueue::rma`]).
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    pub unsafe fn get<T: Symmetric>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        pe: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.rma(dev, on, RmaKind::Get, dest, src, pe) }
    }

    /// Strided put (`get` false: `iput`) or get (`iget`) of `nelems` elements: element `i` moves from `src[i *
    /// sst]` to `dest[i * dst]` (strides in elements, at least 1), `dest` on `pe` for a put, `src` on `pe` for a get.
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn strided<T: Symmetric>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        get: bool,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        dst: usize,
        sst: usize,
        nelems: usize,
        pe: usize,
    ) -> Result<()> {
        let call = if get {
            "iget_on_queue"
        } else {
            "iput_on_queue"
        };
        let pe = Self::pe(dev, pe, call)?;
        strides(call, [("dst", dst), ("sst", sst)])?;
        let (dn, sn) = (
            span::<T>(Some(nelems), dst, nelems, call)?,
            span::<T>(Some(nelems), sst, nelems, call)?,
        );
        fits(dest, dn, "dest", call)?;
        fits(src, sn, "source", call)?;
        let args = vec![
            QueueArg::Kernel(KernelArg::U32(get as u32)),
            Self::heap(dev, dest.slice(..dn)?),
            Self::heap(dev, src.slice(..sn)?),
            QueueArg::Kernel(KernelArg::U64(dst as u64)),
            QueueArg::Kernel(KernelArg::U64(sst as u64)),
            QueueArg::Kernel(KernelArg::U64(nelems as u64)),
            QueueArg::Kernel(KernelArg::U64(std::mem::size_of::<T>() as u64)),
            QueueArg::Kernel(KernelArg::U32(pe)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, "xq_strided", args, GROUP) }
    }

    /// Put `src` into `dest` on `pe`, then update `sig` on `pe` with `signal` by `op` (the data is visible before
    /// the signal); `nbi`: the put is complete after a later [`OnQueue::quiet`].
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn put_signal<T: Symmetric>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        sig: SymRef<u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
        nbi: bool,
    ) -> Result<()> {
        let call = if nbi {
            "put_signal_nbi_on_queue"
        } else {
            "put_signal_on_queue"
        };
        let pe = Self::pe(dev, pe, call)?;
        fits(dest, src.len(), "dest", call)?;
        let n = bytes_of::<T>(src.len(), "nelems", call)?;
        let args = vec![
            QueueArg::Kernel(KernelArg::U32(nbi as u32)),
            Self::heap(dev, dest.slice(..src.len())?),
            Self::heap(dev, src),
            QueueArg::Kernel(KernelArg::U64(n as u64)),
            Self::heap(dev, sig.as_slice()),
            QueueArg::Kernel(KernelArg::U64(signal)),
            QueueArg::Kernel(KernelArg::U32(op as u32)),
            QueueArg::Kernel(KernelArg::U32(pe)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, "xq_putmem_signal", args, GROUP) }
    }

    /// Update `sig` on `pe` with `signal` by `op` (`signal_set`/`signal_add`).
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    pub unsafe fn signal_op(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        sig: SymRef<u64>,
        signal: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        let call = "signal_op_on_queue";
        let pe = Self::pe(dev, pe, call)?;
        let args = vec![
            Self::heap(dev, sig.as_slice()),
            QueueArg::Kernel(KernelArg::U64(signal)),
            QueueArg::Kernel(KernelArg::U32(op as u32)),
            QueueArg::Kernel(KernelArg::U32(pe)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, "xq_signal_op", args, 1) }
    }

    /// Hold the list until this PE's `ivar` satisfies `cmp value` (bounded by `XPUSHMEM_TIMEOUT_MS`: a wait that
    /// gives up is reported as [`Error::Timeout`] by [`OnQueue::wait`]).
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    pub unsafe fn wait_until<T: AtomicInt>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        ivar: SymRef<T>,
        cmp: Cmp,
        value: T,
    ) -> Result<()> {
        let signed = T::NAME.starts_with("int") || T::NAME == "ptrdiff";
        let ty = match (T::WIDTH, signed) {
            (4, true) => 0,
            (4, false) => 1,
            (_, true) => 2,
            (_, false) => 3,
        };
        // SAFETY: the caller's contract.
        unsafe {
            self.wait_op(
                dev,
                on,
                "wait_until_on_queue",
                ivar.as_slice().as_bytes(),
                ty,
                cmp,
                value.to_bits(),
            )
        }
    }

    /// Hold the list until this PE's signal word `sig` satisfies `cmp value`.
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    pub unsafe fn signal_wait_until(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        sig: SymRef<u64>,
        cmp: Cmp,
        value: u64,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            self.wait_op(
                dev,
                on,
                "signal_wait_until_on_queue",
                sig.as_slice().as_bytes(),
                4,
                cmp,
                value,
            )
        }
    }

    /// # Safety
    /// As for [`OnQueue::rma`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn wait_op(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        call: &str,
        ivar: SymSlice<u8>,
        ty: u32,
        cmp: Cmp,
        value: u64,
    ) -> Result<()> {
        let code = Cmp::ALL.iter().position(|c| *c == cmp).unwrap_or(0) as u32;
        let args = vec![
            Self::heap(dev, ivar),
            QueueArg::Kernel(KernelArg::U32(ty)),
            QueueArg::Kernel(KernelArg::U32(code)),
            QueueArg::Kernel(KernelArg::U64(value)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, "xq_wait_until", args, 1) }
    }

    /// Complete every earlier put of this PE's on-queue ops and kernels (the `_nbi` forms included) at its target.
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    pub unsafe fn quiet(&self, dev: &Device<'_>, on: OnList<'_>) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, "quiet_on_queue", "xq_quiet", Vec::new(), 1) }
    }

    /// # Safety
    /// As for [`OnQueue::rma`].
    unsafe fn sync(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        kind: SyncKind,
        team: i32,
        call: &str,
    ) -> Result<()> {
        let args = vec![
            QueueArg::Kernel(KernelArg::U32(kind as u32)),
            QueueArg::Kernel(KernelArg::U32(team as u32)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, "xq_sync", args, GROUP) }
    }

    /// `barrier_all` on the list: every PE's earlier puts complete, then all PEs meet.
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    pub unsafe fn barrier_all(&self, dev: &Device<'_>, on: OnList<'_>) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.sync(dev, on, SyncKind::BarrierAll, 0, "barrier_all_on_queue") }
    }

    /// `sync_all` on the list (the PEs meet; no completion of puts).
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    pub unsafe fn sync_all(&self, dev: &Device<'_>, on: OnList<'_>) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.sync(dev, on, SyncKind::SyncAll, 0, "sync_all_on_queue") }
    }

    /// `team_sync` of `team` on the list.
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    pub unsafe fn team_sync(&self, dev: &Device<'_>, on: OnList<'_>, team: &Team) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            self.sync(
                dev,
                on,
                SyncKind::TeamSync,
                team.device_id(),
                "team_sync_on_queue",
            )
        }
    }

    /// A data-movement collective over `team` ([`Movement`]), `nelems` elements per member.
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn movement<T: Symmetric>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        kind: Movement,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        let (code, call) = kind.code();
        let n = team.n_pes();
        let all = nelems.saturating_mul(n);
        let (dn, sn, root) = match kind {
            Movement::Broadcast { root } => (nelems, nelems, root),
            Movement::Fcollect => (all, nelems, 0),
            Movement::Alltoall => (all, all, 0),
        };
        bytes_of::<T>(dn, "nelems", call)?;
        fits(dest, dn, "dest", call)?;
        fits(src, sn, "source", call)?;
        if root >= n {
            return Err(Error::invalid(
                "pe_root",
                root,
                format!("{call}: the team has {n} members"),
            ));
        }
        let args = vec![
            QueueArg::Kernel(KernelArg::U32(code)),
            QueueArg::Kernel(KernelArg::U32(team.device_id() as u32)),
            Self::heap(dev, dest.slice(..dn)?),
            Self::heap(dev, src.slice(..sn)?),
            QueueArg::Kernel(KernelArg::U64(bytes_of::<T>(nelems, "nelems", call)? as u64)),
            QueueArg::Kernel(KernelArg::U32(root as u32)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, "xq_coll", args, GROUP) }
    }

    /// Concatenate each member's `nelems` elements of `src` (the count may differ per member) into every member's
    /// `dest`, in member order (OpenSHMEM `collect`). The members' counts are exchanged on the host when the op is
    /// enqueued (one [`Shmem::team_exchange`](crate::Shmem::team_exchange) over `team`: this call blocks until
    /// every member has made it), which gives each member its offset. A member whose `src` is too short makes the
    /// call fail on every member (`source` on it, `team` naming the member on the others) with nothing enqueued; a
    /// `dest` too short for the total fails on that member only (the others' collect then ends in
    /// [`Error::Timeout`] when waited on, as a blocking collective that a member left).
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn collect<T: Symmetric>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        let call = "collect_on_queue";
        let mut local =
            bytes_of::<T>(nelems, "nelems", call).and_then(|_| fits(src, nelems, "source", call));
        let (n, me) = (team.n_pes(), team.my_pe());
        let mut send = Messages::default();
        for _ in 0..n {
            send.push(&(nelems as u64).to_le_bytes());
        }
        let mut recv = Messages::default();
        let agreement = dev.sh.team_exchange(
            team,
            "collect_on_queue",
            local.is_err(),
            0,
            &send,
            &mut recv,
        )?;
        let counts: Vec<usize> = (0..n)
            .map(|i| {
                let b: [u8; 8] = recv.get(i).try_into().unwrap_or([0; 8]);
                u64::from_le_bytes(b) as usize
            })
            .collect();
        let offset = counts[..me]
            .iter()
            .fold(0usize, |a, &c| a.saturating_add(c));
        let total = counts.iter().fold(0usize, |a, &c| a.saturating_add(c));
        if local.is_ok() {
            local =
                bytes_of::<T>(total, "nelems", call).and_then(|_| fits(dest, total, "dest", call));
        }
        local?;
        if let Some(i) = agreement.failed {
            return Err(Error::invalid(
                "team",
                format!("member {i}"),
                format!("{call}: member {i} of the team rejected its arguments"),
            ));
        }
        let args = vec![
            QueueArg::Kernel(KernelArg::U32(team.device_id() as u32)),
            Self::heap(dev, dest.slice(offset..offset + nelems)?),
            Self::heap(dev, src.slice(..nelems)?),
            QueueArg::Kernel(KernelArg::U64(bytes_of::<T>(nelems, "nelems", call)? as u64)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, "xq_collect", args, GROUP) }
    }

    /// Strided all-to-all: element `k` of block `j` is `src[(j * nelems + k) * sst]`, stored at `dest[(i * nelems
    /// + k) * dst]` of member `j` (strides in elements, at least 1).
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn alltoalls<T: Symmetric>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        team: &Team,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        dst: usize,
        sst: usize,
        nelems: usize,
    ) -> Result<()> {
        let call = "alltoalls_on_queue";
        strides(call, [("dst", dst), ("sst", sst)])?;
        let total = nelems.checked_mul(team.n_pes());
        let (dn, sn) = (
            span::<T>(total, dst, nelems, call)?,
            span::<T>(total, sst, nelems, call)?,
        );
        fits(dest, dn, "dest", call)?;
        fits(src, sn, "source", call)?;
        let args = vec![
            QueueArg::Kernel(KernelArg::U32(team.device_id() as u32)),
            Self::heap(dev, dest.slice(..dn)?),
            Self::heap(dev, src.slice(..sn)?),
            QueueArg::Kernel(KernelArg::U64(dst as u64)),
            QueueArg::Kernel(KernelArg::U64(sst as u64)),
            QueueArg::Kernel(KernelArg::U64(nelems as u64)),
            QueueArg::Kernel(KernelArg::U64(std::mem::size_of::<T>() as u64)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, "xq_alltoalls", args, GROUP) }
    }

    /// `op` reduction of `nreduce` elements of every member's `src` into every member's `dest` (which must not
    /// overlap `src`: the members read each other's sources directly).
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn reduce<T: QueueReduce>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        team: &Team,
        op: ReduceOp,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nreduce: usize,
    ) -> Result<()> {
        let call = "reduce_on_queue";
        if T::FLOAT && op.is_bitwise() {
            return Err(Error::invalid(
                "op",
                op.name(),
                format!(
                    "{call}: bitwise reductions are defined for integer types, not {}",
                    T::NAME
                ),
            ));
        }
        let (d, s) = disjoint(dest, src, nreduce, "nreduce", call)?;
        let kernel = format!("xq_reduce_{}_{}", T::DEVICE, op.name());
        let args = vec![
            QueueArg::Kernel(KernelArg::U32(team.device_id() as u32)),
            Self::heap(dev, d),
            Self::heap(dev, s),
            QueueArg::Kernel(KernelArg::U64(nreduce as u64)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, &kernel, args, GROUP) }
    }

    /// Prefix sum of `nelems` elements over `team`: member `i` gets the sum of members `0..=i` (`exclusive`:
    /// `0..i`, zero on member 0) in `dest` (which must not overlap `src`).
    ///
    /// # Safety
    /// As for [`OnQueue::rma`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn scan<T: QueueReduce>(
        &self,
        dev: &Device<'_>,
        on: OnList<'_>,
        team: &Team,
        exclusive: bool,
        dest: SymSlice<T>,
        src: SymSlice<T>,
        nelems: usize,
    ) -> Result<()> {
        let call = if exclusive {
            "sum_exscan_on_queue"
        } else {
            "sum_inscan_on_queue"
        };
        let (d, s) = disjoint(dest, src, nelems, "nelems", call)?;
        let kernel = format!("xq_scan_{}", T::DEVICE);
        let args = vec![
            QueueArg::Kernel(KernelArg::U32(exclusive as u32)),
            QueueArg::Kernel(KernelArg::U32(team.device_id() as u32)),
            Self::heap(dev, d),
            Self::heap(dev, s),
            QueueArg::Kernel(KernelArg::U64(nelems as u64)),
        ];
        // SAFETY: the caller's contract.
        unsafe { self.op(dev, on, call, &kernel, args, GROUP) }
    }
}

impl Drop for OnQueue {
    fn drop(&mut self) {
        // An op that has not finished may still write its status record: leak those records rather than free
        // memory the device may write.
        let o = self
            .outstanding
            .get_mut()
            .unwrap_or_else(|p| p.into_inner());
        for p in o.ops.drain(..) {
            if p.status.word(0).ok() != Some(1) {
                std::mem::forget(p.status);
            }
        }
    }
}
