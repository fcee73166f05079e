//! One PE's engine, [`Shmem`]: the PE and node layout, validation of every argument, the transports' windows,
//! waits with back-off and failure detection, progress. Start-up, shutdown and the calls that run a team protocol
//! (`barrier_all`, `finalize`) live in the facade above it (`init.rs`); this layer never calls into team or coll.

pub mod amo;
pub mod domain;
pub(crate) mod groups;
pub(crate) mod heap;
pub(crate) mod reg;
pub mod rma;
pub mod symaddr;
pub mod sync;
pub(crate) mod teams;

use crate::bootstrap::Bootstrap;
use crate::config::Config;
use crate::core::heap::Allocator;
use crate::error::{Error, Result};
use crate::job::Nodes;
use crate::sys::dataseg::SymData;
use crate::sys::pidwatch::PeerWatch;
use crate::transport::{AmoOp, Peers, Transport, Window};
use crate::types::HeapKind;
use crate::types::{AtomicWord, SymRef, ThreadLevel};
use crate::wait::Backoff;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Values of the per-PE state word.
pub(crate) const STATE_RUNNING: u64 = 1;
pub(crate) const STATE_FINALIZED: u64 = 2;
/// Bytes of the runtime's own region at the start of every PE's host arena (page aligned); the user heap follows.
pub(crate) const SYS_BYTES: usize = 128 << 10;
/// Where the runtime's words live in the system region (the same on every PE).
pub(crate) const SYNC: SyncLayout = SyncLayout { state: 0 };

/// The error for an operation on a PE no transport reaches.
#[cold]
#[inline(never)]
fn unreachable_pe(pe: usize, call: &str) -> Error {
    Error::Transport {
        transport: "route",
        message: format!("{call}: PE {pe} is on another node and no fabric transport is available"),
    }
}

/// Offsets of the runtime's own words in every PE's system region.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SyncLayout {
    /// The PE's state word (running / finalized). The predefined teams' slots follow (`team/`).
    pub state: usize,
}

/// A running PE: the handle through which every xpushmem call is made.
///
/// `Shmem` is `Send + Sync`: with thread level MULTIPLE any thread may call it. Collective calls must be made by
/// every PE in the same order. Dropping it finalizes (errors are logged); [`Shmem::finalize`] reports them.
#[derive(Debug)]
pub struct Shmem {
    pub(crate) me: usize,
    pub(crate) n: usize,
    pub(crate) cfg: Config,
    pub(crate) boot: std::sync::Arc<dyn Bootstrap>,
    /// Every PE as reached through its transport: user heap and runtime words.
    pub(crate) peers: Peers,
    /// Where the user heap lives.
    pub(crate) heap_kind: HeapKind,
    pub(crate) nodes: Nodes,
    pub(crate) heap: Mutex<Allocator>,
    /// Offsets of the team-scoped allocations this PE is part of, relative to the start of the team space (see
    /// `team/memory.rs`).
    pub(crate) team_heap: Mutex<Allocator>,
    /// Bytes of the team-scoped allocations' space mapped on this PE (from its start).
    pub(crate) team_mapped: std::sync::atomic::AtomicUsize,
    /// Bytes of the heap mapped on every PE (its first chunk, then as allocations grew it).
    pub(crate) heap_size: std::sync::atomic::AtomicUsize,
    /// Teams and their synchronisation state (`barrier_all` is `TEAM_WORLD`'s barrier).
    pub(crate) teams: teams::Teams,
    /// The executable's data segment, when symmetric.
    pub(crate) data: SymData,
    pub(crate) watch: PeerWatch,
    pub(crate) thread_level: ThreadLevel,
    pub(crate) finalized: AtomicBool,
    /// Set once a wait failed (timeout, lost peer): finalize then skips its barrier instead of waiting again.
    pub(crate) broken: AtomicBool,
    /// Busy-poll iterations of a wait before it yields (XPUSHMEM_SPIN_COUNT, or chosen from the node's load).
    pub(crate) spin_count: u64,
    /// More PEs on this machine than [`Shmem::machine_cpus`].
    pub(crate) oversubscribed: bool,
    /// CPUs the PEs on this machine may run on together.
    pub(crate) machine_cpus: usize,
    /// Registered user buffers (`reg.rs`).
    pub(crate) registry: reg::Registry,
    /// The open completion domains (`domain.rs`).
    pub(crate) domains: domain::Domains,
}

impl Shmem {
    /// This PE's number.
    pub fn my_pe(&self) -> usize {
        self.me
    }

    /// Number of PEs.
    pub fn n_pes(&self) -> usize {
        self.n
    }

    /// The thread level in force (the requested one: every level is supported).
    pub fn query_thread(&self) -> ThreadLevel {
        self.thread_level
    }

    /// Which PEs share which node.
    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    /// PEs on this PE's node, ascending.
    pub fn node_pes(&self) -> Vec<usize> {
        self.nodes.pes_on(self.nodes.node_of(self.me))
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Bytes of symmetric heap per PE mapped now: `XPUSHMEM_SYMMETRIC_SIZE` at first, more as allocations grow it
    /// (up to [`Shmem::heap_max`]).
    pub fn heap_size(&self) -> usize {
        self.heap_size.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The most the symmetric heap may grow to (`XPUSHMEM_SYMMETRIC_MAX`, or the address space reserved); the
    /// heap's fixed size where it cannot grow (device heaps whose peers the fabric reaches).
    pub fn heap_max(&self) -> usize {
        self.peers.heap_max()
    }

    /// Where the symmetric heap lives.
    pub fn heap_kind(&self) -> HeapKind {
        self.heap_kind
    }

    /// Name of the bootstrap in use.
    pub fn bootstrap_name(&self) -> &'static str {
        self.boot.name()
    }

    /// Start address of this PE's heap: a host address for host heaps, a Level Zero device address for device
    /// heaps (see [`Shmem::ptr`] for what may dereference it).
    pub fn heap_base(&self) -> *mut u8 {
        self.local_map().base()
    }

    /// Name of the transport through which `pe` is reached: `local` (this PE), `shm`, `ze`, `fabric`, `deferred`,
    /// or `unreachable`.
    pub fn transport_name(&self, pe: usize) -> &'static str {
        self.route_name(pe)
    }

    pub(crate) fn route_name(&self, pe: usize) -> &'static str {
        if pe == self.me {
            "local"
        } else {
            self.peers.transport(pe).map_or("unreachable", |t| t.name())
        }
    }

    /// This PE's own user heap.
    pub(crate) fn local_map(&self) -> &dyn Window {
        match self.peers.heap(self.me) {
            Some(m) => m,
            None => unreachable!("own heap is always mapped"),
        }
    }

    /// This PE's own system region.
    pub(crate) fn sys_local(&self) -> &dyn Window {
        match self.peers.sys(self.me) {
            Some(m) => m,
            None => unreachable!("own system region is always mapped"),
        }
    }

    /// The window onto `pe`'s runtime words (barrier counters, state, argument checks), after validating `pe`.
    pub(crate) fn sys_of(&self, pe: usize, call: &str) -> Result<&dyn Window> {
        self.check_pe(pe, call)?;
        self.peers.sys(pe).ok_or_else(|| unreachable_pe(pe, call))
    }

    /// The transport that completes operations on `pe` (validated by the caller).
    #[inline]
    pub(crate) fn transport_of(&self, pe: usize, call: &str) -> Result<&dyn Transport> {
        self.check_pe(pe, call)?;
        self.peers
            .transport(pe)
            .ok_or_else(|| unreachable_pe(pe, call))
    }

    /// Validate `pe` for `call`.
    #[inline]
    pub(crate) fn check_pe(&self, pe: usize, call: &str) -> Result<()> {
        if pe >= self.n {
            return Err(self.invalid_pe(pe, call));
        }
        Ok(())
    }

    /// The error of [`Shmem::check_pe`] (out of line: the check is on every operation's path, its error is not).
    #[cold]
    #[inline(never)]
    fn invalid_pe(&self, pe: usize, call: &str) -> Error {
        Error::InvalidPe {
            pe: pe as i64,
            n_pes: self.n,
            context: call.to_string(),
        }
    }

    /// The window through which `pe`'s user heap is reached, after validating `pe`.
    #[inline]
    pub(crate) fn map_of(&self, pe: usize, call: &str) -> Result<&dyn Window> {
        self.check_pe(pe, call)?;
        self.peers.heap(pe).ok_or_else(|| unreachable_pe(pe, call))
    }

    /// Is `pe`'s heap directly reachable with loads and stores from this process?
    pub fn is_mapped(&self, pe: usize) -> bool {
        pe < self.n && self.peers.heap(pe).is_some_and(|w| !w.base().is_null())
    }

    /// Whether this machine runs more PEs than [`Shmem::machine_cpus`] (waits then yield at once, and algorithms
    /// with fewer dependent steps win).
    pub(crate) fn oversubscribed(&self) -> bool {
        self.oversubscribed
    }

    /// The CPUs the PEs on this machine (of this job) may run on together: the union of their CPU affinities, within
    /// the smallest CPU quota (cgroup) any of them has. A PE that its launcher binds to one core counts the cores
    /// of the others too. With fewer CPUs than PEs, waits yield at once (`XPUSHMEM_SPIN_COUNT=auto`).
    pub fn machine_cpus(&self) -> usize {
        self.machine_cpus
    }

    /// Wait until `ready()` holds, with the one back-off ([`crate::wait::Backoff`]: spin, yield, sleep; never
    /// sleeping while a transport needs this PE to poll), bounded by `XPUSHMEM_TIMEOUT_MS`; fails on timeout or
    /// when a peer is lost. See [`Shmem::wait_for_within`].
    pub(crate) fn wait_for(
        &self,
        op: &str,
        detail: &dyn Fn() -> String,
        ready: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let r = self.wait_for_within(op, self.cfg.timeout, detail, ready);
        if r.is_err() {
            self.broken.store(true, Ordering::SeqCst);
        }
        r
    }

    /// `Shmem::wait_for` (every wait of the runtime) with its own time limit (`None`: none). The clock starts at the 32nd poll (a wait that
    /// ends sooner reads no clock) and a timeout reports the time waited since; whatever the spin count, peers and
    /// the limit are checked at least every 4096 polls (two syscalls and a clock read: rare enough not to slow a
    /// spinning wait). Unlike `Shmem::wait_for`, a failure does not mark the runtime broken: the caller decides.
    /// `op` names the wait in its errors and `detail()` says, on timeout, what it was waiting for. Public for the
    /// C layers' own waits (the OpenSHMEM lock), so that they too wait with the one back-off.
    pub fn wait_for_within(
        &self,
        op: &str,
        limit: Option<Duration>,
        detail: &dyn Fn() -> String,
        mut ready: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let mut backoff = Backoff::new(
            self.spin_count,
            self.cfg.yield_count as u64,
            self.cfg.sleep_max,
            limit,
        );
        let must_poll = || self.peers.transports().any(|t| t.needs_polling());
        loop {
            // A transport that completes late delivers what this PE issued (a barrier's own signal, say) while it
            // waits, and before it stops waiting.
            self.progress()?;
            if ready()? {
                return Ok(());
            }
            if !backoff.pause(must_poll) {
                continue;
            }
            if let Err(e) = self.find_lost_peer(op) {
                // The peer may have done its part before it left: the condition decides.
                return if ready()? { Ok(()) } else { Err(e) };
            }
            if let Some(waited) = backoff.expired() {
                let d = detail();
                return Err(Error::Timeout {
                    op: op.to_string(),
                    waited,
                    limit: limit.unwrap_or_default(),
                    detail: if d.is_empty() { d } else { format!("; {d}") },
                });
            }
        }
    }

    /// Atomically move `r` on `pe` from `cond` to `value`, retrying with the wait back-off until it holds `cond`
    /// (a hand-off slot that the owner must empty first, for instance). Bounded by `limit` (`None`: by
    /// `XPUSHMEM_TIMEOUT_MS`): fails with [`Error::Timeout`] when it passes and with [`Error::PeerLost`] when a
    /// PE this one waits for is lost, like every other wait. A timeout under `limit` leaves the runtime as it was
    /// (a later `finalize` still synchronises); every other failure marks it broken, as any failed wait does.
    pub fn atomic_compare_swap_until<T: AtomicWord>(
        &self,
        r: SymRef<T>,
        cond: T,
        value: T,
        pe: usize,
        limit: Option<Duration>,
    ) -> Result<()> {
        const CALL: &str = "atomic_compare_swap_until";
        self.check_pe(pe, CALL)?;
        let seen = std::cell::Cell::new(0u64);
        let r = self.wait_for_within(
            CALL,
            limit.or(self.cfg.timeout),
            &|| {
                format!(
                    "PE {pe}'s word at heap+{:#x} holds {:#x}, waiting for {:#x} to replace it by {:#x}",
                    r.off,
                    seen.get(),
                    cond.to_bits(),
                    value.to_bits()
                )
            },
            || {
                seen.set(self.atomic_compare_swap(r, cond, value, pe)?.to_bits());
                Ok(seen.get() == cond.to_bits())
            },
        );
        // A timeout under the caller's own limit leaves the runtime usable (the caller may retry or give up);
        // any other failure is that of every wait: finalize then skips its barrier.
        if r.is_err() && !(limit.is_some() && matches!(r, Err(Error::Timeout { .. }))) {
            self.broken.store(true, Ordering::SeqCst);
        }
        r
    }

    /// A 64-bit word of this PE's heap to poll: a CPU atomic on host heaps (one load per poll), the window's
    /// atomic fetch elsewhere.
    pub(crate) fn local_word(&self, off: usize, call: &str) -> Result<LocalWord<'_>> {
        self.check_range(off, 8, call)?;
        let w = self.local_map();
        Ok(match w.atomic64(off) {
            Some(a) => LocalWord::Atomic(a),
            None => LocalWord::Window(w, off),
        })
    }

    /// Let every transport move outstanding operations forward.
    pub(crate) fn progress(&self) -> Result<()> {
        self.peers
            .progressing()
            .iter()
            .try_for_each(|t| t.progress())
    }

    /// Whether every PE of the job is still alive: [`Error::PeerLost`] naming a PE that died (exited or was
    /// killed without finalize), with `op` as the call that noticed; `Ok(())` when none did. Never blocks (one
    /// look at the exit watch and the bootstrap). Every blocking wait of the host library asks this as it backs
    /// off; a caller whose own wait gave up elsewhere (a device kernel's, say) asks it to tell a dead peer from a
    /// slow one. A lost peer marks the runtime broken, as when a wait notices it: `finalize` then skips its
    /// barrier.
    pub fn check_peers(&self, op: &str) -> Result<()> {
        let r = self.find_lost_peer(op);
        if matches!(r, Err(Error::PeerLost { .. })) {
            self.broken.store(true, Ordering::SeqCst);
        }
        r
    }

    /// [`Shmem::check_peers`] without marking the runtime broken (a wait's caller decides).
    fn find_lost_peer(&self, op: &str) -> Result<()> {
        let lost = |pe: usize| {
            crate::bootstrap::launcher::report_peer_lost(pe);
            Error::PeerLost {
                pe,
                me: self.me,
                op: op.to_string(),
            }
        };
        // An exited node peer that did not finalize; the state word of one reached through the fabric
        // (XPUSHMEM_TRANSPORT=fabric) cannot be read once it is gone: the bootstrap tells whether it left without
        // finalizing.
        let dead = || {
            self.watch.exited().into_iter().find(|&pe| {
                self.route_name(pe) != "fabric"
                    && self
                        .peers
                        .sys(pe)
                        .and_then(|m| m.amo(SYNC.state, 8, AmoOp::Fetch, 0).ok())
                        != Some(STATE_FINALIZED)
            })
        };
        if let Some(pe) = dead() {
            return Err(lost(pe));
        }
        match self.boot.check_alive() {
            Ok(()) => Ok(()),
            Err(Error::PeerLost { pe, .. }) => Err(lost(pe)),
            // The rendezvous went away: a dead peer on this node explains it best, once its exit is visible (one
            // grace pause, not a wait for a condition: no `Backoff`).
            Err(e) => {
                std::thread::sleep(Duration::from_millis(5));
                Err(dead().map_or(e, lost))
            }
        }
    }
}

/// A word of this PE's heap being polled (see [`Shmem::local_word`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum LocalWord<'a> {
    Atomic(&'a std::sync::atomic::AtomicU64),
    Window(&'a dyn Window, usize),
}

impl LocalWord<'_> {
    /// Load the word (acquire).
    pub(crate) fn load(&self) -> Result<u64> {
        match self {
            LocalWord::Atomic(a) => Ok(a.load(Ordering::Acquire)),
            LocalWord::Window(w, off) => w.amo(*off, 8, AmoOp::Fetch, 0),
        }
    }
}
