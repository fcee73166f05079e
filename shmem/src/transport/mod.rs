//! Transports move bytes between PEs. Each is a leaf: the only place (with the FFI) where raw memory is touched,
//! each `unsafe` block justified in place.
//!
//! Two traits make the seam. A `Transport` is one kind of connection (same-node mapping, Level Zero device heap,
//! a network): it completes what its windows started (`Transport::quiet`, `Transport::fence`,
//! `Transport::progress`, one operation with `Transport::complete`). A `Window` is one peer's heap or runtime
//! words as reached through a transport; every operation on another PE goes through one. Non-blocking operations
//! return a `Ticket` when the transport completes them later; [`Pending`] is the safe handle around it.
//!
//! - `shm`: same node, CPU memory. Every PE's heap is a memfd; the fds travel over a Unix socket (SCM_RIGHTS) and
//!   every PE maps every node peer's heap, so a put is a `memcpy` and an atomic is a CPU atomic on the peer's page.
//! - [`ze`]: same node, device heaps opened through Level Zero IPC, and their set-up.
//! - [`dataseg`]: the executable's global and static variables moved onto the heap's memfd (OpenSHMEM's symmetric
//!   data objects), reached through the same mappings.
//! - `fabric` (built when libfabric's headers are found, see `fabric-sys`): PEs on other nodes (every other PE with
//!   `XPUSHMEM_TRANSPORT=fabric`) through libfabric RMA and atomics on registered heaps.
//! - `deferred`: test-only; wraps another transport's windows and queues writes until completion, to show that
//!   callers wait where they must (`XPUSHMEM_TRANSPORT=deferred`).

pub(crate) use crate::types::AmoOp;
pub use crate::types::Domain;

pub use crate::sys::dataseg;
pub(crate) mod deferred;
#[cfg(xpushmem_fabric)]
pub(crate) mod fabric;
#[cfg(xpushmem_fabric)]
pub(crate) mod proxy;
pub use crate::sys::fdx;
pub(crate) mod shm;
pub use crate::sys::vmem;
pub mod ze;

use crate::error::Result;
use std::marker::PhantomData;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// The libfabric providers the fabric transport could use here (reliable datagrams with RMA and atomics), as
/// (provider, domain, fabric) names in libfabric's order of preference; `Ok(None)` when this build has no fabric
/// transport (libfabric's headers were missing at build time).
pub fn fabric_providers() -> Result<Option<Vec<(String, String, String)>>> {
    #[cfg(xpushmem_fabric)]
    return fabric::providers().map(Some);
    #[cfg(not(xpushmem_fabric))]
    Ok(None)
}

/// One operation a transport completes later; redeemed with `Transport::complete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ticket(pub(crate) u64);

/// One kind of connection to peers: it completes and orders what its `Window`s started.
pub(crate) trait Transport: Send + Sync + std::fmt::Debug {
    /// Short name for logs and errors.
    fn name(&self) -> &'static str;
    /// Whether this transport reaches PE `pe` (asked once, by [`connect`], to route every PE).
    fn can_reach(&self, pe: usize) -> bool;
    /// Operations issued in domain `d` through this transport's windows before the fence are delivered to each PE
    /// before those issued in `d` after it.
    fn fence(&self, d: Domain) -> Result<()>;
    /// Complete every operation issued so far in domain `d` through this transport's windows (and, where the
    /// transport does not tell domains apart, every other one too).
    fn quiet(&self, d: Domain) -> Result<()>;
    /// Complete every operation issued so far through this transport's windows, whatever its domain.
    fn quiet_all(&self) -> Result<()>;
    /// Move outstanding operations forward without waiting for any one (called while a PE waits); a transport
    /// that keeps operations back until they are asked for moves the default domain's.
    fn progress(&self) -> Result<()>;
    /// Whether `Transport::progress` does anything: waits skip transports whose progress is a no-op (a wait's
    /// poll loop is on the latency path of every signal and barrier).
    fn needs_progress(&self) -> bool {
        true
    }
    /// Complete the operation `t` (and every operation it is ordered after); for a get, the bytes it read.
    fn complete(&self, t: Ticket) -> Result<Option<Vec<u8>>>;
    /// Whether `t` has completed (never blocks).
    fn is_complete(&self, t: Ticket) -> bool;
    /// Move outstanding operations forward, `t` among them whatever its domain (a handle's `test`); by default
    /// [`Transport::progress`].
    fn progress_for(&self, t: Ticket) -> Result<()> {
        let _ = t;
        self.progress()
    }
    /// The job is ending (this PE's last `quiet` is done): serve peers without being asked from now on. True when
    /// the transport needs every PE to pass one more bootstrap barrier before any tears it down (peers may still
    /// be completing operations that need this PE's help).
    fn leaving(&self) -> bool {
        false
    }
    /// Whether an operation failed because a peer is gone (finalize then skips its barriers, as after a wait
    /// that found a lost peer).
    fn lost_peer(&self) -> bool {
        false
    }
    /// Whether data moves only while this process calls in (a provider with manual progress and no progress
    /// thread): a wait then keeps polling instead of sleeping, since its peers' operations on this PE progress
    /// only when it polls.
    fn needs_polling(&self) -> bool {
        false
    }
    /// Register the `len` bytes of this process's host memory at `addr` (a registered user buffer, see
    /// `core/reg.rs`) with this transport, so that its windows' `Window::put_nbi_registered` and
    /// `Window::get_nbi_registered` may read and write it in place; the handle for
    /// [`Transport::unregister_local`], `None` when this transport needs no registration (the default).
    fn register_local(&self, addr: usize, len: usize) -> Result<Option<u64>> {
        let _ = (addr, len);
        Ok(None)
    }
    /// Undo [`Transport::register_local`] (every operation that used the memory has completed).
    fn unregister_local(&self, handle: u64) {
        let _ = handle;
    }
    /// The copies this transport made for transfers, and the transfers it made in place.
    fn copy_stats(&self) -> crate::types::CopyStats {
        crate::types::CopyStats::default()
    }
}

/// The transport of windows that complete every operation before returning (mapped memory): every completion
/// call is a memory fence.
#[derive(Debug, Default)]
pub(crate) struct Immediate {
    name: &'static str,
    /// Which PEs it reaches.
    reach: Vec<bool>,
}

impl Immediate {
    /// A transport named `name` whose windows complete at once, reaching the PEs marked in `reach`.
    pub(crate) fn new(name: &'static str, reach: Vec<bool>) -> Immediate {
        Immediate { name, reach }
    }
}

impl Transport for Immediate {
    fn name(&self) -> &'static str {
        self.name
    }
    fn can_reach(&self, pe: usize) -> bool {
        self.reach.get(pe).is_some_and(|r| *r)
    }
    fn fence(&self, _: Domain) -> Result<()> {
        fence(Ordering::SeqCst);
        Ok(())
    }
    fn quiet(&self, _: Domain) -> Result<()> {
        fence(Ordering::SeqCst);
        Ok(())
    }
    fn quiet_all(&self) -> Result<()> {
        fence(Ordering::SeqCst);
        Ok(())
    }
    fn progress(&self) -> Result<()> {
        Ok(())
    }
    fn needs_progress(&self) -> bool {
        false
    }
    fn complete(&self, _: Ticket) -> Result<Option<Vec<u8>>> {
        fence(Ordering::SeqCst);
        Ok(None)
    }
    fn is_complete(&self, _: Ticket) -> bool {
        true
    }
}

/// A non-blocking operation in flight. It borrows its local buffer until it completes: call [`Pending::wait`],
/// or let it drop, which waits too (after [`crate::Shmem::quiet`] that is immediate). A get's buffer is written only
/// through the handle's own borrow (when the operation completes, at the latest when the handle is waited for or
/// dropped), so no transport ever holds a pointer into memory the caller could free: forgetting the handle loses the
/// data, never memory safety.
#[must_use = "a non-blocking operation must be completed with wait() or quiet()"]
#[derive(Debug)]
pub struct Pending<'a> {
    op: Option<(&'a dyn Transport, Ticket)>,
    dst: Option<&'a mut [u8]>,
    _src: PhantomData<&'a [u8]>,
}

impl<'a> Pending<'a> {
    /// An operation `t` of transport `tr` (no ticket: completed already); for a get, `dst` receives its bytes.
    pub(crate) fn new(tr: &'a dyn Transport, t: Option<Ticket>, dst: Option<&'a mut [u8]>) -> Self {
        Pending {
            op: t.map(|t| (tr, t)),
            dst,
            _src: PhantomData,
        }
    }

    /// An operation that completed when it was issued.
    pub(crate) fn done() -> Self {
        Pending {
            op: None,
            dst: None,
            _src: PhantomData,
        }
    }

    /// Complete the operation. One that completed when it was issued (a same-node mapping: its loads and stores
    /// are done) needs nothing more, not even a fence: put-with-signal orders its data before its signal with the
    /// signal's release store, and `quiet`/`fence` fence. (A sequentially consistent fence here cost every
    /// blocking `put_signal` an `mfence` that waited for the payload's and the signal's cache lines to be owned.)
    fn finish(&mut self) -> Result<()> {
        if let Some((tr, t)) = self.op.take() {
            let bytes = tr.complete(t)?;
            if let (Some(dst), Some(b)) = (self.dst.take(), bytes) {
                if b.len() != dst.len() {
                    return Err(crate::error::Error::Transport {
                        transport: tr.name(),
                        message: format!("a get of {} bytes completed with {}", dst.len(), b.len()),
                    });
                }
                dst.copy_from_slice(&b);
            }
            fence(Ordering::SeqCst);
        }
        Ok(())
    }

    /// Wait until the operation is complete: a put has been delivered, a get's buffer is filled.
    pub fn wait(mut self) -> Result<()> {
        self.finish()
    }

    /// Whether the operation has completed (never blocks; a get's buffer is filled once the handle is waited for
    /// or dropped).
    pub fn test(&self) -> bool {
        self.op.is_none_or(|(tr, t)| {
            let _ = tr.progress_for(t);
            tr.is_complete(t)
        })
    }
}

impl Drop for Pending<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.op.is_none() {
            // Completed at issue (the common case on shared memory): nothing to do, and no call to find that out.
            return;
        }
        if let Err(e) = self.finish() {
            tracing::error!("completing a non-blocking operation on drop failed: {e}");
        }
    }
}

/// A window onto one PE's symmetric heap (or its runtime words), as seen from this process: the operations every
/// transport provides. Offsets are bytes from the start of the window; every method checks its range against it.
///
/// Completion: a blocking `write`/`amo_post` returns when `src` may be reused, *not* necessarily when the owner
/// sees it (that is `Transport::quiet`'s job); `read` and fetching `amo` return the value. A window must make its
/// own earlier writes to a range visible to a later `read` or `amo` of that range.
pub(crate) trait Window: Send + Sync + std::fmt::Debug {
    /// Copy `src` to `off`; `src` may be reused on return, delivery completes by the transport's `quiet`.
    fn write(&self, off: usize, src: &[u8]) -> Result<()>;
    /// Copy from `off` into `dst` (complete on return).
    fn read(&self, off: usize, dst: &mut [u8]) -> Result<()>;
    /// Start a put of `src` to `off`: `None` when it completed already, else the ticket that completes it. The
    /// window does not keep a reference to `src` past the call (it copies what it has not sent).
    fn put_nbi(&self, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.write(off, src).map(|()| None)
    }
    /// Start a put of `src` to `off` from a registered user buffer (`core/reg.rs`): the caller keeps `src`
    /// registered, valid and unchanged until the ticket (or `quiet`) completes, so a transport may read it in
    /// place. The default is [`Window::put_nbi`] (a copy where the transport needs one).
    fn put_nbi_registered(&self, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.put_nbi(off, src)
    }
    /// Start a get of `dst.len()` bytes at `off` into a registered user buffer: `None` when `dst` holds them
    /// already, else the ticket whose completion means the transport wrote them into `dst` in place (the caller
    /// keeps `dst` registered and untouched until then). The default reads at once ([`Window::read`]).
    fn get_nbi_registered(&self, off: usize, dst: &mut [u8]) -> Result<Option<Ticket>> {
        self.read(off, dst).map(|()| None)
    }
    /// Start a get of `dst.len()` bytes at `off`: `None` when `dst` holds them already, else the ticket whose
    /// completion returns them (`dst` is then left untouched).
    fn get_nbi(&self, off: usize, dst: &mut [u8]) -> Result<Option<Ticket>> {
        self.read(off, dst).map(|()| None)
    }
    /// Put `src` at `off`, then apply `op` with `value` to the 8-byte signal word at `sig`: whoever sees the signal
    /// sees the data. `None` when complete, else its ticket.
    fn put_signal_nbi(
        &self,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
    ) -> Result<Option<Ticket>> {
        self.write(off, src)?;
        fence(Ordering::Release);
        self.amo_post(sig, 8, op, value).map(|()| None)
    }
    /// A non-fetching atomic (`Set`, `FetchAdd` and the bitwise forms used without their result): delivered like a
    /// write, by the transport's `quiet`.
    fn amo_post(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<()> {
        self.amo(off, width, op, operand).map(|_| ())
    }
    /// [`Window::write`] in domain `d`: delivered by `d`'s quiet. The `_in` forms are what a transport that keeps
    /// domains apart overrides (the deferred test transport, the fabric); each defaults to its domain-less form,
    /// which is right for a window that completes at issue, and the domain-less forms are the default domain's.
    fn write_in(&self, d: Domain, off: usize, src: &[u8]) -> Result<()> {
        let _ = d;
        self.write(off, src)
    }
    /// [`Window::put_nbi`] in domain `d`.
    fn put_nbi_in(&self, d: Domain, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        let _ = d;
        self.put_nbi(off, src)
    }
    /// [`Window::put_nbi_registered`] in domain `d`.
    fn put_nbi_registered_in(&self, d: Domain, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        let _ = d;
        self.put_nbi_registered(off, src)
    }
    /// [`Window::get_nbi`] in domain `d`.
    fn get_nbi_in(&self, d: Domain, off: usize, dst: &mut [u8]) -> Result<Option<Ticket>> {
        let _ = d;
        self.get_nbi(off, dst)
    }
    /// [`Window::get_nbi_registered`] in domain `d`.
    fn get_nbi_registered_in(
        &self,
        d: Domain,
        off: usize,
        dst: &mut [u8],
    ) -> Result<Option<Ticket>> {
        let _ = d;
        self.get_nbi_registered(off, dst)
    }
    /// The blocking put-with-signal in domain `d`: [`Window::put_signal_nbi_in`] whose source is copied or sent
    /// before it returns (only the delivery is left to `d`'s quiet). A transport whose copy would only delay the
    /// signal overrides it (the fabric: a signal that waits for the data's delivery anyway).
    fn put_signal_in(
        &self,
        d: Domain,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
    ) -> Result<()> {
        self.put_signal_nbi_in(d, off, src, sig, op, value)
            .map(|_| ())
    }
    /// [`Window::put_signal_nbi`] in domain `d`.
    fn put_signal_nbi_in(
        &self,
        d: Domain,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
    ) -> Result<Option<Ticket>> {
        let _ = d;
        self.put_signal_nbi(off, src, sig, op, value)
    }
    /// [`Window::amo_post`] in domain `d`.
    fn amo_post_in(
        &self,
        d: Domain,
        off: usize,
        width: usize,
        op: AmoOp,
        operand: u64,
    ) -> Result<()> {
        let _ = d;
        self.amo_post(off, width, op, operand)
    }
    /// Strided write of `count` elements of `elem` bytes in domain `d`: element `i` goes from
    /// `src[i * src_stride]` to `off + i * dst_stride` (strides in elements), each by [`Window::write_in`].
    #[allow(clippy::too_many_arguments)]
    fn write_strided_in(
        &self,
        d: Domain,
        off: usize,
        dst_stride: usize,
        src: &[u8],
        src_stride: usize,
        elem: usize,
        count: usize,
    ) -> Result<()> {
        check_local_span(src.len(), count, src_stride, elem)?;
        for i in 0..count {
            self.write_in(
                d,
                off + i * dst_stride * elem,
                &src[i * src_stride * elem..][..elem],
            )?;
        }
        Ok(())
    }
    /// Strided read of `count` elements of `elem` bytes: element `i` goes from `off + i * src_stride` to
    /// `dst[i * dst_stride]` (strides in elements).
    fn read_strided(
        &self,
        off: usize,
        src_stride: usize,
        dst: &mut [u8],
        dst_stride: usize,
        elem: usize,
        count: usize,
    ) -> Result<()> {
        check_local_span(dst.len(), count, dst_stride, elem)?;
        for i in 0..count {
            self.read(
                off + i * src_stride * elem,
                &mut dst[i * dst_stride * elem..][..elem],
            )?;
        }
        Ok(())
    }
    /// Copy `len` bytes from `src_off` of another window of this process into `off` of this one. The default
    /// stages through host memory; transports override it with a direct copy where both sides allow one.
    fn copy_from(&self, off: usize, src: &dyn Window, src_off: usize, len: usize) -> Result<()> {
        let mut buf = vec![0u8; len];
        src.read(src_off, &mut buf)?;
        self.write(off, &buf)
    }
    /// [`Window::copy_from`] for a copy of a call whose data leaves this PE's share of the node's caches
    /// ([`crate::Shmem::get_sym_streamed`]): a mapped heap makes it with non-temporal stores (unless they are off).
    /// The default is [`Window::copy_from`].
    fn copy_from_streamed(
        &self,
        off: usize,
        src: &dyn Window,
        src_off: usize,
        len: usize,
    ) -> Result<()> {
        self.copy_from(off, src, src_off, len)
    }
    /// Start a copy of `len` bytes from `src_off` of `src`, this PE's own symmetric heap, into `off` of this
    /// window: `None` when it completed already, else the ticket that completes it. The heap outlives every
    /// operation, so a transport may read the source in place until the ticket or `quiet` completes (the caller
    /// promises not to change it until then). The default copies at once ([`Window::copy_from`]).
    fn copy_from_nbi(
        &self,
        off: usize,
        src: &dyn Window,
        src_off: usize,
        len: usize,
    ) -> Result<Option<Ticket>> {
        self.copy_from(off, src, src_off, len).map(|()| None)
    }
    /// The 8-byte word at `off` as a CPU atomic, when this process can address it directly (host heaps), for
    /// polling without a call per load.
    fn atomic64(&self, off: usize) -> Option<&std::sync::atomic::AtomicU64> {
        let _ = off;
        None
    }
    /// Size of the window in bytes.
    fn len(&self) -> usize;
    /// Where the accessible range holding offset `off` ends: [`Window::len`], or for an offset in a tail range
    /// beyond it (the symmetric data segment of a mapped heap), the tail's end. What a wrapping window checks
    /// accesses against.
    fn limit_at(&self, off: usize) -> usize {
        let _ = off;
        self.len()
    }
    /// The bytes from the window's start that are accessible without a gap: [`Window::len`], and through a tail
    /// range that starts where it ends (the symmetric data segment after a heap that does not grow). What the
    /// fabric registers.
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))]
    fn contiguous_len(&self) -> usize {
        self.len()
    }
    /// Set `len` bytes at `off` to `byte`.
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()>;
    /// Atomic operation on the `width`-byte (4 or 8) word at `off`; the previous value (complete on return).
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64>;
    /// Address of the window's first byte in this process (a CPU address for host heaps, a device address for
    /// device heaps).
    fn base(&self) -> *mut u8;
    /// Whether the CPU of this process may load and store through [`Window::base`].
    fn host_accessible(&self) -> bool;
    /// The window's memory as a host mapping of this process, when it is one and may be read directly (bypassing
    /// the window's own ordering): what a same-node copy between windows reads from. `None` by default.
    fn host_mem(&self) -> Option<&crate::sys::memfd::HostMem> {
        None
    }
    /// The heap grew: make its first `len` bytes reachable (on this PE's own window, grow the memory first). Only
    /// windows of a growable heap can ([`Peers::heap_max`]); others accept only a length they have already.
    fn grow(&self, len: usize) -> Result<()> {
        if len <= self.len() {
            return Ok(());
        }
        Err(crate::error::Error::Transport {
            transport: "window",
            message: format!(
                "a fixed heap window of {} bytes cannot grow to {len}",
                self.len()
            ),
        })
    }
}

/// An error unless a local buffer of `have` bytes holds `count` elements of `elem` bytes every `stride` elements.
fn check_local_span(have: usize, count: usize, stride: usize, elem: usize) -> Result<()> {
    let need = match count {
        0 => 0,
        c => (c - 1)
            .saturating_mul(stride)
            .saturating_mul(elem)
            .saturating_add(elem),
    };
    if need > have {
        return Err(crate::error::Error::Transport {
            transport: "strided",
            message: format!(
                "{count} elements every {stride} need {need} bytes of a {have}-byte local buffer"
            ),
        });
    }
    Ok(())
}

pub(crate) use crate::error::check_access;

/// What [`connect`] needs to know about the job.
pub(crate) struct ConnectArgs<'a> {
    /// The configuration parsed at init.
    pub cfg: &'a crate::config::Config,
    /// The bootstrap, for the collective steps of set-up.
    pub boot: &'a dyn crate::bootstrap::Bootstrap,
    /// The same bootstrap, kept by transports whose own waits must notice a lost peer (`check_alive`).
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))]
    pub liveness: Arc<dyn crate::bootstrap::Bootstrap>,
    /// This PE.
    pub me: usize,
    /// Which PE is on which node.
    pub nodes: &'a crate::job::Nodes,
    /// Process id of every PE.
    pub pids: &'a [u32],
    /// Where the user heap lives.
    pub heap_kind: crate::types::HeapKind,
    /// Bytes of user heap per PE: the first chunk.
    pub heap_bytes: usize,
    /// Bytes of address space to reserve for the user heap per PE, which may grow up to it (at least `heap_bytes`;
    /// a host heap with a symmetric data segment over the fabric stays at `heap_bytes`).
    pub heap_max: usize,
    /// Bytes of the runtime's own region per PE.
    pub sys_bytes: usize,
    /// The job's cookie (names the node's fd exchange).
    pub cookie: u64,
    /// Limit of every set-up wait.
    pub timeout: Option<std::time::Duration>,
    /// Level Zero handles to adopt for a device heap.
    pub external: Option<ze::ExternalHandles>,
    /// Make the executable's data segment symmetric (host heaps only; see [`dataseg`]).
    pub symmetric_data: bool,
}

/// Every PE as this process reaches it: the windows onto its user heap and its runtime words, and the transport
/// that completes them. Built once by [`connect`]; the runtime routes every operation through it.
#[derive(Debug)]
pub(crate) struct Peers {
    heap: Vec<Option<Box<dyn Window>>>,
    sys: Vec<Option<Box<dyn Window>>>,
    /// Index into `transports` of the transport completing each PE's windows.
    route: Vec<Option<usize>>,
    transports: Vec<Arc<dyn Transport>>,
    /// The transports whose progress is not a no-op ([`Transport::needs_progress`]).
    progressing: Vec<Arc<dyn Transport>>,
    /// This PE.
    me: usize,
    /// The Level Zero device of a device heap.
    pub(crate) device: Option<Arc<ze::ZeRuntime>>,
    /// How device heaps grow (`None` for host heaps).
    device_growth: Option<ze::Growth>,
    /// The host proxy of kernels' operations on PEs reached through the fabric (device heaps only).
    #[cfg(xpushmem_fabric)]
    pub(crate) proxy: Option<proxy::DeviceProxy>,
    /// The fabric transport, when in use (it registers the heap's new chunks).
    #[cfg(xpushmem_fabric)]
    fabric: Option<Arc<fabric::Fabric>>,
    /// The largest the user heap may grow to (its first chunk where it cannot grow).
    heap_max: usize,
    /// Whether the user heap grows (every heap but a host heap with a symmetric data segment over the fabric).
    grows: bool,
    /// Where team-scoped allocations start (after the world's reserve), where they are possible.
    team_base: Option<usize>,
    /// With the fabric: this PE's team-space chunks registered so far (key, address, offset, length), in order,
    /// each starting where the last ends ([`Peers::team_grow_own`]).
    #[cfg(xpushmem_fabric)]
    team_chunks: std::sync::Mutex<Vec<[u64; 4]>>,
    /// This PE's own memfd (runtime words, and the user heap on host heaps); mapped by every node peer.
    _arena: shm::Arena,
}

impl Peers {
    /// The window onto `pe`'s user heap, if reachable.
    pub(crate) fn heap(&self, pe: usize) -> Option<&dyn Window> {
        self.heap.get(pe)?.as_deref()
    }
    /// This PE's own heap window (an error if it has none).
    fn own_heap(&self) -> Result<&dyn Window> {
        self.heap(self.me)
            .ok_or_else(|| crate::error::Error::Transport {
                transport: "heap",
                message: "this PE has no heap window".into(),
            })
    }
    /// The largest the user heap may grow to: the reserved space of a growable heap (every heap but a host heap
    /// with a symmetric data segment over the fabric), else its fixed size.
    pub(crate) fn heap_max(&self) -> usize {
        self.heap_max
    }
    /// Whether the user heap grows on demand ([`Peers::heap_max`]); a host heap with a symmetric data segment
    /// over the fabric keeps its first size.
    pub(crate) fn heap_grows(&self) -> bool {
        self.grows
    }
    /// Where team-scoped allocations start in the symmetric space (after the world's reserve), or `None` where
    /// they are not possible (a host heap with a symmetric data segment over the fabric).
    pub(crate) fn team_base(&self) -> Option<usize> {
        self.team_base
    }
    /// A team-scoped range `[start, end)` (team space, `end` a page multiple) is to be used by this PE: grow its
    /// own heap over it and, with the fabric, register what of the team space up to `end` is not registered yet
    /// (one more chunk, with a fresh key). The records (key, address, offset, length) of this PE's team-space
    /// chunks that overlap the range, which the team's members adopt ([`Peers::team_adopt`]) and no other PE
    /// learns: a PE reaches only the team ranges of the teams it is a member of. Empty without the fabric.
    pub(crate) fn team_grow_own(&self, start: usize, end: usize) -> Result<Vec<[u64; 4]>> {
        self.grow_windows(&[self.me], end)?;
        #[cfg(xpushmem_fabric)]
        if let (Some(f), Some(base)) = (&self.fabric, self.team_base) {
            let mut chunks = self.team_chunks.lock().unwrap_or_else(|p| p.into_inner());
            let from = chunks.last().map_or(base, |c| (c[2] + c[3]) as usize);
            if end > from {
                let own = self.own_heap()?;
                chunks.push(f.register_chunk(own.base().wrapping_add(from), from, end - from)?);
            }
            return Ok(chunks
                .iter()
                .filter(|c| (c[2] as usize) < end && (c[2] + c[3]) as usize > start)
                .copied()
                .collect());
        }
        let _ = start;
        Ok(Vec::new())
    }
    /// Adopt PE `pe`'s team-space chunk `rec` ([`Peers::team_grow_own`]'s record) on the fabric: this PE and `pe`
    /// are members of one team. A chunk adopted before is kept as it is.
    pub(crate) fn team_adopt(&self, pe: usize, rec: [u64; 4]) -> Result<()> {
        #[cfg(xpushmem_fabric)]
        if let Some(f) = &self.fabric {
            if pe != self.me {
                return f.adopt_chunk(pe, rec);
            }
        }
        let _ = (pe, rec);
        Ok(())
    }
    /// Whether team-space chunks travel between members ([`Peers::team_grow_own`]): the fabric is in use.
    pub(crate) fn team_chunks_travel(&self) -> bool {
        #[cfg(xpushmem_fabric)]
        return self.fabric.is_some() && self.team_base.is_some();
        #[cfg(not(xpushmem_fabric))]
        false
    }
    /// Make the first `len` bytes of each of `pes`'s heaps reachable (growing this PE's own when it is one of
    /// them): a team-scoped allocation grew the heaps of the team's members.
    pub(crate) fn grow_windows(&self, pes: &[usize], len: usize) -> Result<()> {
        pes.iter()
            .filter_map(|&pe| self.heap(pe))
            .try_for_each(|w| w.grow(len))
    }
    /// The heap grows from `from` to `len` bytes on every PE (an allocation's agreement): grow this PE's own heap
    /// and, with the fabric, register the new part. The record to publish to every PE ([`Peers::grow_peers`]).
    pub(crate) fn grow_own(&self, from: usize, len: usize) -> Result<Vec<u8>> {
        let own = self.own_heap()?;
        if let Some(g) = &self.device_growth {
            let at = g.mapped_end()?;
            g.grow_own(len)?;
            // With the fabric, the new chunk `[at, mapped end)` (page-rounded, as mapped) is registered (or, staged,
            // described) for peers; it is served only once the agreement succeeded (`Fabric::expose`).
            #[cfg(xpushmem_fabric)]
            if let Some(f) = &self.fabric {
                let to = g.mapped_end()?;
                if to > at {
                    let rec = f
                        .register_chunk(own.base().wrapping_add(at), at, to - at)
                        .inspect_err(|_| g.abort())?;
                    return Ok(rec.iter().flat_map(|w| w.to_le_bytes()).collect());
                }
            }
            let _ = at;
            return Ok(Vec::new());
        }
        own.grow(len)?;
        #[cfg(xpushmem_fabric)]
        if let Some(f) = &self.fabric {
            // The new part [from, len) of this PE's own mapping (grown above); only the provider reads it.
            let base = own.base().wrapping_add(from);
            let rec = f.register_chunk(base, from, len - from)?;
            return Ok(rec.iter().flat_map(|w| w.to_le_bytes()).collect());
        }
        let _ = from;
        Ok(Vec::new())
    }
    /// Every PE grew its heap to `len` ([`Peers::grow_own`]; `records`: what each published): adopt their new
    /// chunks on the fabric and make the new part of every other PE's heap reachable.
    pub(crate) fn grow_peers(&self, len: usize, records: &[Vec<u8>]) -> Result<()> {
        if let Some(g) = &self.device_growth {
            g.grow_peers(len)?;
        }
        #[cfg(xpushmem_fabric)]
        if let Some(f) = &self.fabric {
            self.adopt_chunks(f, records.iter().enumerate())?;
            if let Some(g) = &self.device_growth {
                f.expose(g.mapped_end()?);
            }
        }
        let _ = records;
        if self.device_growth.is_some() {
            return Ok(());
        }
        self.heap
            .iter()
            .enumerate()
            .filter(|&(pe, _)| pe != self.me)
            .filter_map(|(_, w)| w.as_deref())
            .try_for_each(|w| w.grow(len))
    }
    /// Device heaps over the fabric: this PE's chunk `[off, off + len)` of a team-scoped allocation is mapped (and
    /// the node members' taken): register it with the fabric (a staged heap only describes it) for the
    /// allocation's members, who adopt the record ([`Peers::team_adopt`]); `None` without the fabric. Peers'
    /// operations reach it only once [`Peers::team_device_serve`] says the members agreed.
    pub(crate) fn team_device_register(&self, off: usize, len: usize) -> Result<Option<[u64; 4]>> {
        #[cfg(xpushmem_fabric)]
        if let Some(f) = &self.fabric {
            let own = self.own_heap()?;
            return f
                .team_register(own.base().wrapping_add(off), off, len)
                .map(Some);
        }
        let _ = (off, len);
        Ok(None)
    }
    /// The members of the device team-scoped allocation `[off, off + len)` agreed on its chunks: with the fabric,
    /// the staging path and the host proxy serve this PE's.
    pub(crate) fn team_device_serve(&self, off: usize, len: usize) {
        #[cfg(xpushmem_fabric)]
        if let Some(f) = &self.fabric {
            f.team_serve(off, len);
        }
        let _ = (off, len);
    }
    /// The device team-scoped allocation at `off` of `members` is freed (or failed after its chunks were mapped):
    /// with the fabric, this PE's chunk stops being served and its registration closes, and the members' adopted
    /// chunks there are forgotten; then the chunks are unmapped ([`ze::Growth::team_unmap`]).
    pub(crate) fn team_device_release(&self, off: usize, members: &[usize]) {
        #[cfg(xpushmem_fabric)]
        if let Some(f) = &self.fabric {
            f.team_release(off, members);
        }
        if let Some(g) = &self.device_growth {
            g.team_unmap(off, members);
        }
    }
    /// How device heaps grow and map team-scoped allocations (device heaps the device maps; `None` elsewhere).
    pub(crate) fn device_growth(&self) -> Option<&ze::Growth> {
        self.device_growth.as_ref()
    }
    /// The allocation's agreement failed after [`Peers::grow_own`]: undo this PE's growth where it can be undone
    /// (device heaps, whose new chunk no peer has taken yet); a host heap keeps its larger file, unused.
    pub(crate) fn grow_abort(&self) {
        // The registration of a device chunk is closed before its memory is unmapped.
        #[cfg(xpushmem_fabric)]
        if let Some(f) = &self.fabric {
            f.abort_chunk();
        }
        if let Some(g) = &self.device_growth {
            g.abort();
        }
    }
    /// Adopt the heap chunks other PEs registered ([`fabric::Fabric::register_chunk`]'s records, as `(PE,
    /// record)`; an empty record: none).
    #[cfg(xpushmem_fabric)]
    fn adopt_chunks<'r>(
        &self,
        f: &fabric::Fabric,
        records: impl Iterator<Item = (usize, &'r Vec<u8>)>,
    ) -> Result<()> {
        for (pe, rec) in records.filter(|&(pe, r)| pe != self.me && !r.is_empty()) {
            let w: Vec<u64> = rec
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect();
            let rec: [u64; 4] = w.try_into().map_err(|_| crate::error::Error::Transport {
                transport: "fabric",
                message: format!("malformed heap chunk record from PE {pe}"),
            })?;
            f.adopt_chunk(pe, rec)?;
        }
        Ok(())
    }
    /// Where the device library's scratch tail lies in every PE's device heap, in bytes from its base (`None` for
    /// host heaps).
    pub(crate) fn scratch_offset(&self) -> Option<usize> {
        self.device_growth.as_ref().map(|g| g.tail_offset())
    }
    /// The window onto `pe`'s runtime words, if reachable.
    pub(crate) fn sys(&self, pe: usize) -> Option<&dyn Window> {
        self.sys.get(pe)?.as_deref()
    }
    /// The transport that completes operations on `pe`.
    pub(crate) fn transport(&self, pe: usize) -> Option<&dyn Transport> {
        Some(self.transports[(*self.route.get(pe)?)?].as_ref())
    }
    /// Every transport in use.
    pub(crate) fn transports(&self) -> impl Iterator<Item = &dyn Transport> {
        self.transports.iter().map(|t| t.as_ref())
    }
    /// The transports a wait must drive ([`Transport::needs_progress`]): none on shared memory alone.
    pub(crate) fn progressing(&self) -> &[Arc<dyn Transport>] {
        &self.progressing
    }
    /// Register the `len` bytes of host memory at `addr` with every transport that needs it
    /// ([`Transport::register_local`]): the handles, one per transport (in [`Peers::transports`]' order). On an
    /// error, what was registered is undone.
    pub(crate) fn register_local(&self, addr: usize, len: usize) -> Result<Vec<Option<u64>>> {
        let mut handles = Vec::with_capacity(self.transports.len());
        for t in &self.transports {
            match t.register_local(addr, len) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    self.unregister_local(&handles);
                    return Err(e);
                }
            }
        }
        Ok(handles)
    }
    /// Undo [`Peers::register_local`].
    pub(crate) fn unregister_local(&self, handles: &[Option<u64>]) {
        for (t, h) in self.transports.iter().zip(handles) {
            if let Some(h) = h {
                t.unregister_local(*h);
            }
        }
    }
    /// The host proxy ring's address for kernels' device state (0: no proxy, every PE is mapped).
    pub(crate) fn proxy_ring(&self) -> u64 {
        #[cfg(xpushmem_fabric)]
        return self.proxy.as_ref().map_or(0, |p| p.ring_address());
        #[cfg(not(xpushmem_fabric))]
        0
    }
    /// The host error of the first request the proxy failed, if any (cleared).
    pub(crate) fn take_proxy_failure(&self) -> Option<crate::error::Error> {
        #[cfg(xpushmem_fabric)]
        return self.proxy.as_ref().and_then(|p| p.take_failure());
        #[cfg(not(xpushmem_fabric))]
        None
    }
}

impl Drop for Peers {
    fn drop(&mut self) {
        // The proxy thread (which uses the fabric windows and the device) stops first.
        #[cfg(xpushmem_fabric)]
        drop(self.proxy.take());
        #[cfg(xpushmem_fabric)]
        drop(self.fabric.take());
        // The device heaps' growth holds the device windows too: let go of them with the window table.
        drop(self.device_growth.take());
        // Peers' windows and the transports go first, while this PE's own mappings (registered with a network
        // transport, which may still write into them until it is closed) stay mapped.
        let own = (
            self.heap.get_mut(self.me).and_then(Option::take),
            self.sys.get_mut(self.me).and_then(Option::take),
        );
        self.heap.clear();
        self.sys.clear();
        self.transports.clear();
        drop(own);
    }
}

/// The error for a PE no transport reaches.
fn route_error(a: &ConnectArgs<'_>, pe: usize) -> crate::error::Error {
    let nodes = a.nodes;
    crate::error::Error::Transport {
        transport: "route",
        message: format!(
            "the job spans {} nodes ({}); this build reaches peers on the same node only (built without \
             libfabric's headers: no fabric transport), and PE {pe} is on {}",
            nodes.count(),
            (0..nodes.count()).map(|i| nodes.host(i)).collect::<Vec<_>>().join(", "),
            nodes.host(nodes.node_of(pe)),
        ),
    }
}

/// Set up every transport and ask each which PEs it reaches: same-node PEs through the shm mapping (runtime words,
/// and the user heap of host heaps) or the Level Zero device window (device heaps); a PE no transport reaches is
/// an error. Also the symmetric data segment's layout, when asked for. With `XPUSHMEM_TRANSPORT=deferred` every other PE's windows are wrapped in the deferred test
/// transport. Collective over all PEs.
pub(crate) fn connect(a: ConnectArgs<'_>) -> Result<(Peers, dataseg::SymData)> {
    use crate::types::HeapKind;
    let (me, n) = (a.me, a.pids.len());
    let local = a.nodes.pes_on(a.nodes.node_of(me));
    let cfg = a.cfg;
    let deferred = cfg.transport == crate::config::TransportMode::Deferred;
    let forced = cfg.transport == crate::config::TransportMode::Fabric;
    if forced && !cfg!(xpushmem_fabric) {
        return Err(crate::error::Error::Config {
            var: "XPUSHMEM_TRANSPORT",
            value: "fabric".into(),
            reason: "this build has no fabric transport (libfabric's headers were missing at build time)".into(),
        });
    }
    // The transports, most general first: the shm mapping reaches this node's PEs (runtime words, and host heaps);
    // Level Zero IPC reaches the same PEs' device heaps; the fabric reaches the other nodes' PEs (every other PE
    // when forced); the deferred test transport wraps the other PEs' windows. Each PE is routed to the last one
    // that reaches it, decided here from what each will reach, before any set-up.
    let node: Vec<bool> = (0..n).map(|p| local.contains(&p)).collect();
    let mut transports: Vec<Arc<dyn Transport>> =
        vec![Arc::new(Immediate::new("shm", node.clone()))];
    if a.heap_kind == HeapKind::Device {
        transports.push(Arc::new(Immediate::new("ze", node.clone())));
    }
    let mut reach: Vec<Vec<bool>> = transports
        .iter()
        .map(|t| (0..n).map(|p| t.can_reach(p)).collect())
        .collect();
    // Device heaps: this PE's device, and what every PE's device may do on its node peers' (peer access, atomics),
    // asked of Level Zero, not assumed. Node peers whose devices lack either (in either direction) do not map
    // each other's heaps: they reach each other through the host, as PEs of different nodes do (the fabric, and
    // its device proxy for kernels); without a fabric transport, init is refused naming both devices.
    let (rt, caps) = if a.heap_kind == HeapKind::Device {
        let local_rank = local.iter().position(|&p| p == me).unwrap_or(0);
        let rt = ze::open(cfg.device, a.external, local_rank)?;
        let caps = ze::peer_caps(a.boot, &rt, me, &local)?;
        (Some(rt), Some(caps))
    } else {
        (None, None)
    };
    let limited = |p: usize| caps.as_ref().is_some_and(|c| c.limited(me, p));
    let any_limited = caps.as_ref().is_some_and(|c| c.any());
    if let (Some(c), true) = (&caps, any_limited) {
        for (x, y) in c.pairs() {
            tracing::info!(
                pe = me,
                "{}: PEs {x} and {y} reach each other through the host",
                c.describe(x, y)
            );
        }
        if !cfg!(xpushmem_fabric) {
            let (x, y) = c.pairs()[0];
            return Err(crate::error::Error::Device(format!(
                "{}; their kernels cannot address each other's heaps, and this build has no fabric transport                  (libfabric's headers were missing at build time) through whose host proxy they could reach each                  other",
                c.describe(x, y)
            )));
        }
    }
    // Every PE takes the same decision (same configuration, same node table, the same peer capabilities): the
    // set-up below is collective.
    let fabric_reach: Option<Vec<bool>> =
        (cfg!(xpushmem_fabric) && (forced || a.nodes.count() > 1 || any_limited)).then(|| {
            (0..n)
                .map(|p| p != me && (forced || !node[p] || limited(p)))
                .collect()
        });
    if let Some(r) = &fabric_reach {
        reach.push(r.clone());
    }
    let wrap = deferred.then(|| {
        let others: Vec<bool> = (0..n).map(|p| node[p] && p != me).collect();
        reach.push(others.clone());
        deferred::Deferred::new(others)
    });
    let route: Vec<Option<usize>> = (0..n).map(|pe| reach.iter().rposition(|r| r[pe])).collect();
    if let Some(pe) = route.iter().position(Option::is_none) {
        return Err(route_error(&a, pe));
    }
    let host_user = if a.heap_kind == HeapKind::Host {
        a.heap_bytes
    } else {
        0
    };
    // Host heaps grow (node mappings, and chunks registered with the fabric); the data segment lies after the
    // reserve.
    // Except with a symmetric data segment over the fabric (OpenSHMEM's statics reached over the network): there the
    // heap keeps its first size, so that the data segment follows it and one registration covers both
    // (`Window::contiguous_len`); a chunk registered later could not lie between them.
    // Device heaps grow everywhere: the node peers the device maps take each new chunk through Level Zero IPC, and
    // with the fabric each chunk is registered (or served through the staging path) and published at the growing
    // allocation's agreement, the scratch tail at the reserve's end having a registration of its own.
    let grows = match a.heap_kind {
        HeapKind::Host => !(a.symmetric_data && fabric_reach.is_some()),
        HeapKind::Device => true,
    };
    let heap_max = if grows {
        a.heap_max.max(a.heap_bytes)
    } else {
        a.heap_bytes
    };
    // Team-scoped allocations live in a second reserve after the world's, `[T, T + heap_max)` (see
    // `team/memory.rs`). Host heaps: node peers map it, and over the fabric each member registers its team-space
    // chunks and publishes them to the members of the team that uses them; not with a symmetric data segment over
    // the fabric (one registration covers the heap and the data segment after it). Device heaps place it in their
    // reserves (after the world's, rounded up to the device's page first: `hal/ze/ipc.rs`), below, on one node and
    // over the fabric (each member registers its allocations' chunks and publishes them to the members only). The
    // team space starts at a power of two, so its allocations align like the world's.
    let mut team_base = (host_user > 0 && grows).then(|| vmem::alignment_for(heap_max, 1));
    let host_reserve = match team_base {
        Some(b) => b
            .checked_add(heap_max)
            .ok_or_else(|| crate::error::Error::Config {
                var: "XPUSHMEM_SYMMETRIC_MAX",
                value: heap_max.to_string(),
                reason: "the world's and the teams' reserves overflow the address space".into(),
            })?,
        None if host_user > 0 => heap_max,
        None => 0,
    };
    let data = dataseg::SymData::plan(
        a.symmetric_data && a.heap_kind == HeapKind::Host,
        host_reserve,
    )?;
    let (arena, mut sys, mut heap) = shm::connect(&a, &local, host_user, host_reserve, &data)?;
    let mut device_growth = None;
    let device = if a.heap_kind == HeapKind::Device {
        // The device maps the node peers the fabric does not reach (with XPUSHMEM_TRANSPORT=fabric: none), so
        // the device library's bases table holds 0 for every PE the fabric (and the host proxy) serves.
        let mapped: Vec<usize> = local
            .iter()
            .copied()
            .filter(|&p| p == me || fabric_reach.as_ref().is_none_or(|r| !r[p]))
            .collect();
        let rt =
            rt.ok_or_else(|| crate::error::Error::State("no Level Zero device opened".into()))?;
        let (rt, dmaps, growth) = ze::setup(ze::DeviceSetup {
            boot: a.boot,
            me,
            n,
            local: &mapped,
            pids: a.pids,
            size: a.heap_bytes,
            max: heap_max,
            cookie: a.cookie,
            timeout: a.timeout,
            rt,
            ipc: cfg.ipc,
            team_slots: cfg.device_team_slots(),
            team: true,
        })?;
        team_base = growth.team_base();
        heap = dmaps;
        device_growth = Some(growth);
        Some(rt)
    } else {
        None
    };
    #[cfg(xpushmem_fabric)]
    let mut proxy = None;
    #[cfg(xpushmem_fabric)]
    let mut fabric_t = None;
    #[cfg(xpushmem_fabric)]
    if let Some(r) = fabric_reach {
        let internal = |what: &str| crate::error::Error::Transport {
            transport: "fabric",
            message: format!("{what} not mapped before the fabric set-up"),
        };
        // A device heap's bytes mapped on every PE, as the staging path and the host proxy serve them, and its
        // scratch tail.
        let dev_span = device_growth
            .as_ref()
            .map(|g| -> Result<_> {
                Ok((
                    Arc::new(crate::net::ofi::Served::new(g.mapped_end()?)),
                    g.tail(),
                ))
            })
            .transpose()?;
        let (t, mut fsys, mut fheap) = fabric::connect(fabric::FabricArgs {
            boot: a.boot,
            liveness: Arc::clone(&a.liveness),
            me,
            reach: r.clone(),
            sys: sys[me]
                .as_deref()
                .ok_or_else(|| internal("own runtime words"))?,
            heap: heap[me].as_deref().ok_or_else(|| internal("own heap"))?,
            provider: cfg
                .fabric_provider
                .clone()
                .or_else(|| std::env::var("FI_PROVIDER").ok()),
            timeout: a.timeout,
            progress_thread: cfg.progress_thread,
            emulate_atomics: cfg.fabric_atomics == crate::config::FabricAtomics::Cas,
            device: device
                .as_ref()
                .zip(dev_span.as_ref())
                .map(|(rt, (served, tail))| fabric::DeviceHeap {
                    rt: Arc::clone(rt),
                    mode: cfg.fabric_device_heap.clone(),
                    served: Arc::clone(served),
                    tail: *tail,
                }),
            addr: cfg.fabric_addr.clone(),
        })?;
        for pe in (0..n).filter(|&p| r[p]) {
            sys[pe] = fsys[pe].take();
            heap[pe] = fheap[pe].take();
        }
        if let (Some(rt), Some((served, tail))) = (&device, &dev_span) {
            let own = heap[me].as_deref().ok_or_else(|| internal("own heap"))?;
            let own = proxy::OwnHeap {
                base: own.base() as usize,
                served: Arc::clone(served),
                tail: *tail,
            };
            let windows = (0..n).map(|p| t.heap_window(p)).collect();
            proxy = Some(proxy::DeviceProxy::start(
                rt,
                Arc::clone(&t),
                windows,
                own,
                me,
                cfg.device_proxy == crate::config::DeviceProxy::Stalled,
            )?);
        }
        fabric_t = Some(Arc::clone(&t));
        transports.push(t);
    }
    if let Some(d) = wrap {
        transports.push(d.clone());
        for pe in (0..n).filter(|&p| d.can_reach(p)) {
            heap[pe] = heap[pe].take().map(|w| d.wrap(w));
            sys[pe] = sys[pe].take().map(|w| d.wrap(w));
        }
    }
    let progressing = transports
        .iter()
        .filter(|t| t.needs_progress())
        .cloned()
        .collect();
    let peers = Peers {
        heap,
        sys,
        route,
        transports,
        progressing,
        me,
        device,
        device_growth,
        #[cfg(xpushmem_fabric)]
        proxy,
        #[cfg(xpushmem_fabric)]
        fabric: fabric_t,
        heap_max,
        grows,
        team_base,
        #[cfg(xpushmem_fabric)]
        team_chunks: std::sync::Mutex::new(Vec::new()),
        _arena: arena,
    };
    Ok((peers, data))
}
