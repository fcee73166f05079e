//! The fabric transport: PEs that shared memory does not reach (other nodes; every other PE with
//! `XPUSHMEM_TRANSPORT=fabric`), through libfabric (`fabric-sys`), on a reliable-datagram endpoint with RMA and
//! atomics (`tcp;ofi_rxm` here; `verbs;ofi_rxm`, `cxi`, `psm3`, `efa` on clusters, untested).
//!
//! The engine (endpoint, operations, completions, messages) is `net/ofi`; this transport drives it under one lock
//! and gives windows onto peers' regions ([`window`]) and its device heap to the staging path ([`stage`]).
//!
//! Set-up (collective, [`connect`]): pick a provider (`XPUSHMEM_FABRIC_PROVIDER`, else libfabric's own `FI_PROVIDER`,
//! else the first RDM provider with RMA, atomics and messages that libfabric lists, single-node-only `shm`
//! providers skipped) on the address the endpoint is to listen on, open fabric, domain, completion queue, address
//! vector and endpoint, register this PE's runtime words and user heap (`fi_mr_reg`, remote read/write, random
//! keys; a device heap's mapped part and its scratch tail at the end of its reserve apart, or neither when they are
//! staged), post the receive buffers, and exchange endpoint names, tokens and keys through the bootstrap.
//!
//! Growth: when an allocation grows the heap, each PE registers its new chunk ([`Fabric::register_chunk`]; a
//! staged device heap only describes it), the allocation's second agreement publishes the records and each peer
//! adopts them ([`Fabric::adopt_chunk`]): a window keeps its PE's chunks in order and splits an operation at a
//! chunk boundary, and refuses one that reaches into no chunk (a device heap's unmapped reserve, another team's
//! range). Team-space chunks (host heaps) are published to the team's members only (`team/memory.rs`).
//!
//! Operations: a put copies its source (the caller may reuse `src` on return) and posts `fi_writemsg`: one up to
//! the provider's inject size (64 B on `tcp;ofi_rxm`) with `FI_INJECT` and no context or completion entry, its
//! completion counted by the endpoint's write counter (`ofi::Injects`); a larger one into a buffer the operation
//! owns (a slot of the operation slab, reused), one of 32 KiB or more into a bounce buffer kept for reuse ([`ofi::slab::Slabs`]: fresh
//! memory for every large put cost more in page faults and zeroing than the copy), as one write up to 4 MiB. A
//! blocking put of 32 KiB or more is posted from its source without a copy and waits for its completion: from this
//! PE's registered heap (`put_sym`, or a slice of the heap) always, from private memory when the provider reads
//! unregistered memory (no `FI_MR_LOCAL`); if that wait ends with the write still outstanding (timeout, lost peer),
//! the endpoint is closed before the error returns, since the caller may free its buffer then and only closing
//! the endpoint stops the provider reading it; every later operation fails naming why ([`Ep::shutdown`]). A get posts `fi_read` into an owned buffer that its ticket
//! hands back; atomics are `fi_atomicmsg` / `fi_fetch_atomic` / `fi_compare_atomic` on `FI_UINT32`/`FI_UINT64`.
//! Every write and atomic is posted with `FI_DELIVERY_COMPLETE` when the provider offers it (its completion means
//! the target applied it), so `quiet` is "every outstanding operation completed" (for injected puts: the write
//! counter accounts for every one issued). `put_signal` below 256 KiB posts the signal right behind its data when
//! the provider orders an atomic write after an RMA write (`FI_ORDER_WAW` in `msg_order`, data placed in order up
//! to `max_order_waw_size`: `sockets`), else only when the data's delivery completed (`tcp;ofi_rxm` orders RMA
//! writes and atomics only within their own class: its atomics are messages); with manual progress (`tcp;ofi_rxm`)
//! one into a peer's host memory goes as one message up to 8 KiB, above that as writes that tell the target of
//! their landing and a signal message behind them ([`ofi::Ep::told_copied`]). `fence` is `quiet`
//! (stronger than OpenSHMEM asks: per-peer order without waiting would need `FI_FENCE`, which rxm lacks). A read
//! or fetching atomic first completes this PE's outstanding operations to the same peer, so a PE reads its own
//! writes.
//!
//! Atomics the provider lacks (`fi_query_atomic`, asked once per operation and width) are emulated by a
//! compare-and-swap loop on the same word (fetch, compute, `FI_CSWAP`, retry if the word moved); without
//! `FI_CSWAP` for that width the operation is an error naming the provider and the operation, never a silent
//! substitute.
//!
//! Progress: software providers move data only when the target's process calls into libfabric. Every wait of the
//! runtime calls [`Transport::progress`] (a completion-queue read); `XPUSHMEM_PROGRESS_THREAD=1` adds a thread
//! that does it continuously (a PE computing without calling xpushmem then still serves its peers); and from
//! [`Transport::close`] to the end the thread always runs, so a PE leaving the job keeps serving the peers that
//! are still completing their last operations until every PE has passed the final bootstrap barrier.
//!
//! Errors name the provider, the operation and the peer; a completion error meaning the connection broke
//! (reset, refused, unreachable, shut down) is [`Error::PeerLost`].
//!
//! Security (libfabric RMA has no peer authentication: `tcp;ofi_rxm` accepts a connection from anyone who reaches
//! the endpoint, and rxm offers no hook into its handshake):
//! - Memory keys are secret capabilities. When the application chooses keys (no `FI_MR_PROV_KEY`; `tcp` has
//!   `mr_key_size` 8), every registration peers address (runtime words, user heap, a registered device heap)
//!   gets a fresh random key of the provider's full key size from the OS (`getrandom`); a wrong key makes `tcp`
//!   drop the connection, so guessing 64 bits is infeasible. With `FI_MR_PROV_KEY` the provider's keys are used,
//!   and their strength is the provider's. Receive buffers, bounce buffers and operations' buffers are
//!   registered (with `FI_MR_LOCAL`) for local access only.
//! - Keys, endpoint names and tokens travel in [`connect`]'s `allgather` of the bootstrap (the unique-ID
//!   rendezvous authenticates its members; MPI's communicator); the keys of chunks registered later (a heap that
//!   grows, host or device: [`Fabric::register_chunk`]; a team-space chunk) in the allocation's agreement words,
//!   which live in the PEs' runtime words and so are reached only with their secret keys (a team-space chunk's
//!   only by the members of the team whose range it holds). A window reaches only the chunks its PE published
//!   to this one.
//! - Messages are authenticated: each PE makes a 128-bit random token at set-up, published only in that
//!   allgather; every message to a PE (staging requests of a device heap, their replies) carries that PE's token.
//!   A message whose token is wrong (compared in constant time), whose length does not match its header, whose
//!   sender is not a PE this transport reaches, whose kind is unknown, or (a reply) that names no staged operation
//!   of this PE on that sender is dropped unread, counted, with at most one warning a second.
//! - Receive buffering is bounded: every PE keeps [`ofi::RECVS`] untagged and as many tagged receive buffers posted
//!   (tagged ones with every tag bit ignored: the job sends none, and rxm would otherwise keep every tagged
//!   message forever) and reposts them before its next completion read, and limits `ofi_rxm`'s own receive
//!   buffers to half as many ([`ofi::RXM_MSG_RX_SIZE`]: `FI_OFI_RXM_MSG_RX_SIZE`, set unless the user set it), so
//!   every message one progress call takes in finds a posted receive and rxm queues none as unexpected; what an
//!   outsider sends beyond that waits in its own TCP window. What arrives is read and dropped; a message longer
//!   than a buffer completes truncated and is dropped.
//! - The endpoint listens on `XPUSHMEM_FABRIC_ADDR` (an address, or an interface: the provider's domain of that
//!   name), else on the address the bootstrap used ([`crate::bootstrap::Bootstrap::local_addr`]: loopback under
//!   `xpushmem-run`; the MPI bootstrap has none: the provider's first interface), or where the provider chooses
//!   when it does not listen on that address (providers that do not address endpoints by IP).
//! - Not protected: the data path is not encrypted, so a passive observer of the network sees data, keys and
//!   tokens (and can then act as a PE); an outsider who reaches the port can still make it spend CPU time
//!   reading and dropping messages (not memory). The fabric belongs on an isolated network.

mod stage;
mod window;

use super::{AmoOp, Domain, Ticket, Transport, Window};
use crate::error::{Error, Result};
use crate::net::ofi::{self, Bind, Ep, Region, Want};
use crate::wait::Backoff;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use window::{Chunks, FabricWindow};

pub(crate) use crate::net::ofi::{amo_of, providers};

/// `N` words from the OS's random generator (getrandom).
fn random_words<const N: usize>() -> Result<[u64; N]> {
    let mut w = [0u64; N];
    for x in &mut w {
        *x = u64::from_le_bytes(crate::bootstrap::uid::random_bytes::<8>()?);
    }
    Ok(w)
}

/// A fresh memory-region key of `bytes` bytes (the provider's `mr_key_size`, at most 8) from the OS's random
/// generator, never 0 and never one of `taken` (this PE's other registrations).
fn fresh_key(bytes: usize, taken: &[u64]) -> Result<u64> {
    let mask = if bytes >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * bytes.max(1))) - 1
    };
    loop {
        let [k] = random_words::<1>()?;
        let k = k & mask;
        if k != 0 && !taken.contains(&k) {
            return Ok(k);
        }
    }
}

/// The word `op` leaves when applied to `old` with `operand` (both truncated to `width` bytes): what the
/// compare-and-swap emulation writes.
fn apply(op: AmoOp, width: usize, old: u64, operand: u64) -> u64 {
    let mask = if width == 4 {
        u32::MAX as u64
    } else {
        u64::MAX
    };
    let new = match op {
        AmoOp::Fetch => old,
        AmoOp::Set | AmoOp::Swap => operand,
        AmoOp::CompareSwap { cond } => {
            if old & mask == cond & mask {
                operand
            } else {
                old
            }
        }
        AmoOp::FetchAdd => old.wrapping_add(operand),
        AmoOp::FetchAnd => old & operand,
        AmoOp::FetchOr => old | operand,
        AmoOp::FetchXor => old ^ operand,
    };
    new & mask
}

/// Polls of a wait ([`Fabric::wait`]) made back to back before it yields (some 30 us: most waits end before it).
const WAIT_SPINS: u64 = 64;

/// The progress thread's longest sleep between polls while no operation is in flight.
const PROGRESS_SLEEP_MAX: Duration = Duration::from_micros(100);

/// The fabric transport.
pub(crate) struct Fabric {
    ep: Arc<Mutex<Ep>>,
    reach: Vec<bool>,
    /// Every reached PE's user heap regions (shared with its windows; for [`Fabric::heap_window`]).
    heaps: Vec<Option<Chunks>>,
    /// Per PE: its user heap is host memory, which a put-with-signal may reach as one message
    /// ([`ofi::Ep::am_put_signal`]): not staged, and no scratch tail (every device heap publishes one: the device
    /// library's reduction scratch, at least `XPUSHMEM_DEVICE_REDUCE_SCRATCH_BYTES`, and its barrier words; a host
    /// heap publishes an empty one).
    heap_host: Vec<bool>,
    /// The keys of this PE's registrations (a new one must differ from each).
    keys: Mutex<Vec<u64>>,
    /// The handles of registered user buffers and their keys (freed with the registration).
    user_keys: Mutex<Vec<(u64, u64)>>,
    prov: String,
    /// This PE's device heap, where it has one: how its chunks are registered and served.
    device: Option<DeviceChunks>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// How this PE's device heap reaches peers as it grows: each chunk registered with `FI_HMEM_ZE` (its key
/// published at the growing allocation's agreement), or served through the staging messages.
struct DeviceChunks {
    /// What of the heap the staging path and the host proxy serve ([`ofi::DeviceSpan`]): raised only once every
    /// PE agreed on a growth ([`Fabric::expose`]), so a chunk that an allocation's failed agreement unmaps again
    /// was never reachable; a team chunk only once its members agreed on it ([`Fabric::team_serve`]), until it is
    /// freed ([`Fabric::team_release`]).
    served: Arc<ofi::Served>,
    /// Served through the staging messages (no registration).
    staged: bool,
    /// The Level Zero device index registrations name.
    ze: i32,
    /// A chunk registered by [`Fabric::register_chunk`] whose agreement has not ended yet (closed again by
    /// [`Fabric::abort_chunk`]).
    pending: Mutex<bool>,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("provider", &self.prov)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Fabric {
    /// Wait (driving progress) until `done` holds, at most the configured timeout, checking for lost peers on the
    /// way ([`Backoff`]).
    fn wait(&self, what: &str, pe: usize, done: impl FnMut(&Ep) -> bool) -> Result<()> {
        self.wait_locked(what, pe, done).map(drop)
    }

    /// [`Fabric::wait`], returning the endpoint's lock as the poll that found `done` held it, for what the caller
    /// reads once the wait is over (a quiet's errors, an operation's result) without taking it again.
    fn wait_locked(
        &self,
        what: &str,
        pe: usize,
        mut done: impl FnMut(&Ep) -> bool,
    ) -> Result<MutexGuard<'_, Ep>> {
        let mut polls: u64 = 0;
        let mut backoff: Option<Backoff> = None;
        loop {
            {
                let mut ep = lock(&self.ep);
                if ep.is_closed() {
                    return Err(ep.closed_err());
                }
                if polls == 0 {
                    // Done already (a quiet after blocking operations, say): no poll, which costs a system call
                    // on a software provider.
                    if done(&ep) {
                        return Ok(ep);
                    }
                    ep.poll_first()?;
                } else {
                    ep.poll()?;
                }
                if done(&ep) {
                    return Ok(ep);
                }
                polls += 1;
                if polls < WAIT_SPINS {
                    // The next poll at once (the lock let go in between): each is a progress call, a system call
                    // on a software provider, and a spin hint between them only delays the look that finds the
                    // reply (it made each poll of a quiet about 0.2 us longer than raw libfabric's).
                    continue;
                }
                if backoff.is_none() {
                    // Made under the lock held for the poll (not a second lock for the time limit).
                    backoff = Some(ofi::polling_backoff(0, ep.timeout()));
                }
            }
            // The peer's answer arrives only through this PE's polls (manual progress): past the first polls the
            // back-off yields and never sleeps (a sleep would add its length, plus the timer's slack, to every
            // operation); yielding keeps polling and still lets another process on this core run.
            let Some(b) = backoff.as_mut() else {
                continue;
            };
            if b.pause(|| true) {
                let mut ep = lock(&self.ep);
                ep.alive(what)?;
                if let Some(waited) = b.expired() {
                    return Err(ep.timeout_error(what, pe, waited));
                }
            }
        }
    }

    /// Complete this PE's outstanding operations to `pe` (a read of the same bytes then sees them).
    fn flush_pe(&self, pe: usize) -> Result<()> {
        self.wait("completing earlier operations", pe, |ep| {
            ep.outstanding_to(pe) == 0
        })?;
        self.take_errors(|_| true)
    }

    /// The first stored error of the operations `pick` selects (by id), removing them all.
    fn take_errors(&self, pick: impl Fn(u64) -> bool) -> Result<()> {
        lock(&self.ep).take_errors(pick)
    }

    /// A fetching atomic (or the compare-and-swap emulation when the provider lacks the operation).
    fn fetch_amo(
        &self,
        pe: usize,
        region: Region,
        off: usize,
        width: usize,
        op: AmoOp,
        operand: u64,
    ) -> Result<u64> {
        self.flush_pe(pe)?;
        let native = lock(&self.ep).offers(width, op, true);
        if native {
            return self.amo_once(pe, region, off, width, op, operand);
        }
        let cas = AmoOp::CompareSwap { cond: 0 };
        if !lock(&self.ep).offers(width, cas, true) {
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "provider {} offers neither the atomic {op:?} nor compare-and-swap on {}-bit words \
                     (PE {pe}); no correct emulation exists without one",
                    self.prov,
                    width * 8
                ),
            });
        }
        // Emulation: read the word (a compare-and-swap of 0 with 0 changes nothing), compute, swap if unchanged.
        let mut old = self.amo_once(pe, region, off, width, AmoOp::CompareSwap { cond: 0 }, 0)?;
        if op == AmoOp::Fetch {
            return Ok(old);
        }
        let start = Instant::now();
        loop {
            let new = apply(op, width, old, operand);
            let seen = self.amo_once(
                pe,
                region,
                off,
                width,
                AmoOp::CompareSwap { cond: old },
                new,
            )?;
            if seen == old {
                return Ok(old);
            }
            old = seen;
            lock(&self.ep).check_time(start, "atomic (compare-and-swap loop)", pe)?;
        }
    }

    fn amo_once(
        &self,
        pe: usize,
        region: Region,
        off: usize,
        width: usize,
        op: AmoOp,
        operand: u64,
    ) -> Result<u64> {
        let t =
            lock(&self.ep).amo_start(pe, Domain::DEFAULT, region, off, width, op, operand, true)?;
        let bytes = self.complete(Ticket(t))?.unwrap_or_default();
        let mut w = [0u8; 8];
        w[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
        let v = u64::from_le_bytes(w);
        Ok(if width == 4 { v & u32::MAX as u64 } else { v })
    }

    /// Start the progress thread if it is not running.
    fn start_thread(&self) {
        let mut th = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        if th.is_some() {
            return;
        }
        let ep = Arc::clone(&self.ep);
        let stop = Arc::clone(&self.stop);
        *th = Some(std::thread::spawn(move || {
            // Sleeps between polls: from 1 us (again after each poll with operations in flight), doubling up to
            // 100 us while idle.
            let fresh = || Backoff::new(0, 0, PROGRESS_SLEEP_MAX, None);
            let mut idle = fresh();
            while !stop.load(Ordering::Relaxed) {
                let busy = {
                    let mut ep = lock(&ep);
                    let _ = ep.poll();
                    !ep.idle()
                };
                if busy {
                    idle = fresh();
                }
                idle.pause(|| false);
            }
        }));
    }
}

impl Fabric {
    /// Another window onto PE `pe`'s user heap (for the device proxy); `None` when the fabric does not reach it.
    pub(crate) fn heap_window(self: &Arc<Self>, pe: usize) -> Option<Box<dyn Window>> {
        let chunks = Arc::clone(self.heaps.get(pe)?.as_ref()?);
        Some(Box::new(FabricWindow {
            t: Arc::clone(self),
            pe,
            chunks,
            host: self.heap_host.get(pe).copied().unwrap_or(false),
        }))
    }

    /// A registration with a key of its own: 0 where the provider picks keys, else a fresh random one that none of
    /// this PE's registrations holds ([`fresh_key`]), recorded once `register` made the registration. Takes the
    /// endpoint's lock, then the keys' (the lock discipline's order), and holds both while `register` runs.
    fn register_keyed<R>(&self, register: impl FnOnce(&mut Ep, u64) -> Result<R>) -> Result<R> {
        let mut ep = lock(&self.ep);
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let key = if ep.provider_keys() {
            0
        } else {
            fresh_key(ep.key_bytes(), &keys)?
        };
        let r = register(&mut ep, key)?;
        keys.push(key);
        Ok(r)
    }

    /// This PE's heap grew (or a team range was mapped): register its new chunk, the `len` bytes at `base` (window
    /// offset `off`), for peers' RMA and atomics with a fresh key (a device heap's with `FI_HMEM_ZE`; a staged
    /// device heap registers nothing: its chunk is served once [`Fabric::expose`] says so). The record to publish
    /// at the allocation's agreement (key, address, window offset, length), which every peer that may reach the
    /// chunk adopts with [`Fabric::adopt_chunk`]. A host chunk stays registered as long as the endpoint is open; a
    /// device chunk until [`Fabric::abort_chunk`] if the agreement fails.
    pub(crate) fn register_chunk(&self, base: *mut u8, off: usize, len: usize) -> Result<[u64; 4]> {
        if let Some(d) = &self.device {
            if d.staged {
                return Ok([0, 0, off as u64, len as u64]);
            }
        }
        let ze = self.device.as_ref().map(|d| d.ze);
        let (k, addr) =
            self.register_keyed(|ep, key| ep.register(base, len, key, ze.is_none(), ze))?;
        if let Some(d) = &self.device {
            *lock(&d.pending) = true;
        }
        Ok([k, addr, off as u64, len as u64])
    }

    /// The agreement of the allocation that made [`Fabric::register_chunk`]'s device chunk failed (its memory is
    /// unmapped again): close its registration. Nothing for host heaps (their file keeps the chunk).
    pub(crate) fn abort_chunk(&self) {
        if let Some(d) = &self.device {
            if std::mem::take(&mut *lock(&d.pending)) {
                lock(&self.ep).unregister_last();
            }
        }
    }

    /// Every PE agreed that the heap grew to `len` bytes (page-rounded: what is mapped): the staging path and the
    /// host proxy serve this PE's device heap up to there.
    pub(crate) fn expose(&self, len: usize) {
        if let Some(d) = &self.device {
            *lock(&d.pending) = false;
            d.served.raise(len);
        }
    }

    /// A team-scoped allocation's chunk of this PE's device heap, the `len` bytes at `base` (window offset `off`),
    /// is mapped: register it with `FI_HMEM_ZE` and a fresh key (a staged heap only describes it). The record the
    /// allocation's members adopt ([`Fabric::adopt_chunk`]); no other PE learns it. The staging path and the host
    /// proxy serve the chunk only once its members agreed on it ([`Fabric::team_serve`]).
    pub(crate) fn team_register(&self, base: *mut u8, off: usize, len: usize) -> Result<[u64; 4]> {
        let Some(d) = &self.device else {
            return Err(Error::State(
                "a device team chunk registered on a host heap".into(),
            ));
        };
        if d.staged {
            return Ok([0, 0, off as u64, len as u64]);
        }
        let (k, addr) =
            self.register_keyed(|ep, key| ep.register_team(base, off, len, key, d.ze))?;
        Ok([k, addr, off as u64, len as u64])
    }

    /// The members of the team-scoped allocation at `off` agreed on its chunks (`len` bytes each): the staging path
    /// and the host proxy serve this PE's.
    pub(crate) fn team_serve(&self, off: usize, len: usize) {
        if let Some(d) = &self.device {
            d.served.add_team(off, len);
        }
    }

    /// The team-scoped allocation at `off` of `members` is freed (or never agreed on): this PE's chunk is no longer
    /// served and its registration closes (before its memory is unmapped), and the members' chunks this PE adopted
    /// there are forgotten (a later allocation of other members may place fresh ones at the same offset).
    pub(crate) fn team_release(&self, off: usize, members: &[usize]) {
        if let Some(d) = &self.device {
            d.served.remove_team(off);
            lock(&self.ep).unregister_team(off);
        }
        for &pe in members {
            if let Some(Some(c)) = self.heaps.get(pe) {
                FabricWindow::remove_chunk(c, off);
            }
        }
    }

    /// Adopt the heap chunk PE `pe` registered ([`Fabric::register_chunk`]'s record).
    pub(crate) fn adopt_chunk(&self, pe: usize, rec: [u64; 4]) -> Result<()> {
        let Some(Some(chunks)) = self.heaps.get(pe) else {
            return Ok(());
        };
        let [key, addr, off, len] = rec;
        // A staged heap's chunks are staged too (the owner registered nothing).
        let staged = chunks.read().unwrap_or_else(|p| p.into_inner())[0].1.staged;
        let region = Region {
            key,
            addr,
            len,
            staged,
        };
        FabricWindow::add_chunk(chunks, off as usize, region)
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self
            .thread
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = t.join();
        }
    }
}

impl Transport for Fabric {
    fn name(&self) -> &'static str {
        "fabric"
    }
    fn can_reach(&self, pe: usize) -> bool {
        self.reach.get(pe).is_some_and(|r| *r)
    }
    fn fence(&self, d: Domain) -> Result<()> {
        self.quiet(d)
    }
    fn quiet(&self, d: Domain) -> Result<()> {
        // The domain's operations only (another domain's stay in flight), and their errors.
        self.wait_locked("quiet", usize::MAX, |ep| ep.outstanding_in(d) == 0)?
            .take_errors_in(d)
    }
    fn quiet_all(&self) -> Result<()> {
        self.wait_locked("quiet", usize::MAX, |ep| ep.idle())?
            .take_errors(|_| true)
    }
    fn progress(&self) -> Result<()> {
        lock(&self.ep).poll()
    }
    fn complete(&self, t: Ticket) -> Result<Option<Vec<u8>>> {
        let pe = lock(&self.ep).pe_of(t.0);
        let mut ep = self.wait_locked("completing an operation", pe, |ep| !ep.in_flight(t.0))?;
        if let Some(e) = ep.take_error(t.0) {
            return Err(e);
        }
        Ok(ep.take_result(t.0))
    }
    fn is_complete(&self, t: Ticket) -> bool {
        !lock(&self.ep).in_flight(t.0)
    }
    fn lost_peer(&self) -> bool {
        // A closed endpoint cuts this PE off the fabric like a lost peer: finalize skips its barriers.
        lock(&self.ep).lost_peer()
    }
    fn needs_polling(&self) -> bool {
        self.thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }
    fn leaving(&self) -> bool {
        // From here on this PE serves its peers' last operations without being asked.
        self.start_thread();
        true
    }
    fn register_local(&self, addr: usize, len: usize) -> Result<Option<u64>> {
        self.register_keyed(|ep, key| {
            let h = ep.register_user(addr, len, key)?;
            lock(&self.user_keys).push((h, key));
            Ok(Some(h))
        })
    }
    fn unregister_local(&self, handle: u64) {
        lock(&self.ep).unregister_user(handle);
        // `user_keys` is let go before `keys` is taken: `register_local` takes them the other way round (the
        // order of `net/ofi`'s lock discipline).
        let key = {
            let mut uk = lock(&self.user_keys);
            uk.iter()
                .position(|&(h, _)| h == handle)
                .map(|i| uk.swap_remove(i).1)
        };
        if let Some(key) = key {
            let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(j) = keys.iter().position(|&k| k == key && k != 0) {
                keys.swap_remove(j);
            }
        }
    }
    fn copy_stats(&self) -> crate::types::CopyStats {
        lock(&self.ep).copy_stats()
    }
}

/// What the set-up needs from [`super::connect`].
pub(crate) struct FabricArgs<'a> {
    pub boot: &'a dyn crate::bootstrap::Bootstrap,
    /// Asked while a wait of the transport lasts: a lost peer ends it.
    pub liveness: Arc<dyn crate::bootstrap::Bootstrap>,
    pub me: usize,
    /// PEs this transport is to reach.
    pub reach: Vec<bool>,
    /// This PE's runtime words and user heap (host memory, mapped in this process).
    pub sys: &'a dyn Window,
    pub heap: &'a dyn Window,
    pub provider: Option<String>,
    pub timeout: Option<Duration>,
    pub progress_thread: bool,
    /// Use only the provider's compare-and-swap, emulating every other atomic (`XPUSHMEM_FABRIC_ATOMICS=cas`).
    pub emulate_atomics: bool,
    /// The device of a device heap (`heap` is then device memory).
    pub device: Option<DeviceHeap>,
    /// `XPUSHMEM_FABRIC_ADDR`: the address or interface the endpoint listens on (`None`: the bootstrap's
    /// address, [`crate::bootstrap::Bootstrap::local_addr`]).
    pub addr: Option<String>,
}

/// A device heap on the fabric.
pub(crate) struct DeviceHeap {
    /// This PE's Level Zero device.
    pub rt: Arc<crate::transport::ze::ZeRuntime>,
    /// `XPUSHMEM_FABRIC_DEVICE_HEAP`: auto, stage or register.
    pub mode: String,
    /// The heap's bytes that are mapped on every PE (its first chunk, page-rounded), raised as it grows
    /// ([`Fabric::expose`]), and its agreed team chunks; shared with the host proxy, which serves the same bytes.
    pub served: Arc<ofi::Served>,
    /// The device library's scratch tail: its offset from the heap's base (the end of the heap's reserve) and
    /// its bytes.
    pub tail: (usize, usize),
}

/// Windows per PE (`None` where not reached).
pub(crate) type Windows = Vec<Option<Box<dyn Window>>>;

/// Set up the transport (collective over all PEs): endpoint, registrations, the exchange of names and keys,
/// and windows onto the reached PEs' runtime words and user heaps.
pub(crate) fn connect(a: FabricArgs<'_>) -> Result<(Arc<Fabric>, Windows, Windows)> {
    let n = a.reach.len();
    let (ep, mine, keys, staged) = open(&a)?;
    let all = a.boot.allgather(&mine)?;
    let mut ep = ep;
    let mut names = Vec::with_capacity(n);
    let mut tokens = Vec::with_capacity(n);
    let mut regions = Vec::with_capacity(n);
    for (pe, rec) in all.iter().enumerate() {
        let mut d = crate::bootstrap::Dec(rec);
        let bad = || Error::Bootstrap {
            method: a.boot.name(),
            message: format!("malformed fabric record from PE {pe}"),
        };
        let prov = String::from_utf8_lossy(d.bytes().ok_or_else(bad)?).into_owned();
        if prov != ep.provider() {
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "PE {pe} chose provider {prov}, PE {} chose {}: set XPUSHMEM_FABRIC_PROVIDER the same on every PE",
                    a.me,
                    ep.provider()
                ),
            });
        }
        names.push(d.bytes().ok_or_else(bad)?.to_vec());
        tokens.push([d.u64().ok_or_else(bad)?, d.u64().ok_or_else(bad)?]);
        let mut reg = || -> Option<Region> {
            Some(Region {
                key: d.u64()?,
                addr: d.u64()?,
                len: d.u64()?,
                staged: d.u64()? != 0,
            })
        };
        let sys = reg().ok_or_else(bad)?;
        let heap = reg().ok_or_else(bad)?;
        // A device heap's scratch tail (length 0 for host heaps) and its offset in the heap's window.
        let tail = reg().ok_or_else(bad)?;
        let tail_off = d.u64().ok_or_else(bad)? as usize;
        regions.push((sys, heap, (tail_off, tail)));
    }
    for pe in (0..n).filter(|&p| a.reach[p]) {
        ep.insert_addr(pe, &names[pe])?;
    }
    ep.set_tokens(tokens);
    let prov = ep.provider().to_string();
    let t = Arc::new(Fabric {
        ep: Arc::new(Mutex::new(ep)),
        reach: a.reach.clone(),
        heap_host: regions
            .iter()
            .map(|(_, h, (_, tail))| !h.staged && tail.len == 0)
            .collect(),
        heaps: (0..n)
            .map(|p| {
                a.reach[p]
                    .then(|| window::heap_chunks(regions[p].1, regions[p].2))
                    .transpose()
            })
            .collect::<Result<_>>()?,
        keys: Mutex::new(keys),
        user_keys: Mutex::new(Vec::new()),
        prov,
        device: a.device.as_ref().map(|d| DeviceChunks {
            served: Arc::clone(&d.served),
            staged,
            ze: d.rt.device_index() as i32,
            pending: Mutex::new(false),
        }),
        stop: Arc::new(AtomicBool::new(false)),
        thread: Mutex::new(None),
    });
    // A device heap's staging requests, and the proxy's, are served while this PE's own thread may be inside
    // a kernel: the thread always runs then.
    if a.progress_thread || a.device.is_some() {
        t.start_thread();
    }
    let mut sys: Windows = (0..n).map(|_| None).collect();
    let mut heap: Windows = (0..n).map(|_| None).collect();
    for pe in (0..n).filter(|&p| a.reach[p]) {
        sys[pe] = Some(Box::new(FabricWindow {
            t: Arc::clone(&t),
            pe,
            chunks: window::chunks(regions[pe].0),
            host: true,
        }));
        heap[pe] = t.heap_window(pe);
    }
    tracing::debug!(pe = a.me, provider = %t.prov, "fabric transport up");
    Ok((t, sys, heap))
}

/// Open the endpoint ([`Ep::open`]) and register this PE's regions with fresh random keys; the record to publish
/// (provider, endpoint name, token, then key, address, length and whether staged of the runtime words, the user
/// heap and a device heap's scratch tail, and the tail's offset), the keys of this PE's registrations, and
/// whether a device heap is staged.
fn open(a: &FabricArgs<'_>) -> Result<(Ep, Vec<u8>, Vec<u64>, bool)> {
    // Host heaps: RMA and atomics. Device heaps: FI_HMEM registration where the provider offers it (unless
    // XPUSHMEM_FABRIC_DEVICE_HEAP=stage), else the staging path's messages.
    let mut wants = vec![Want::Host];
    if let Some(d) = &a.device {
        wants = match d.mode.as_str() {
            "stage" => vec![Want::Host],
            "register" => vec![Want::Hmem],
            _ => vec![Want::Hmem, Want::Host],
        };
    }
    let boot = Arc::clone(&a.liveness);
    let (mut ep, want, name) = Ep::open(ofi::ep::Open {
        me: a.me,
        n: a.reach.len(),
        requested: a.provider.clone().filter(|p| !p.is_empty()),
        wants,
        bind: Bind::of(a.addr.as_deref(), a.boot.local_addr()),
        bind_set: a.addr.is_some(),
        timeout: a.timeout,
        liveness: Box::new(move || boot.check_alive()),
        token: random_words::<2>()?,
    })?;
    let prov = ep.provider().to_string();
    let token = ep.token();
    let mut rec = crate::bootstrap::Enc::default()
        .bytes(prov.as_bytes())
        .bytes(&name)
        .u64(token[0])
        .u64(token[1]);
    // Keys: fresh random ones of the provider's full key size when the application chooses them; the
    // provider's own (and their strength) with FI_MR_PROV_KEY.
    let prov_key = ep.provider_keys();
    let key_bytes = ep.key_bytes();
    if !prov_key {
        tracing::debug!(
            pe = a.me,
            provider = %prov,
            "fabric: memory keys of {} random bits",
            8 * key_bytes
        );
    }
    let mut keys = Vec::new();
    let staged = a.device.is_some() && want != Want::Hmem;
    let ze = a.device.as_ref().map(|d| d.rt.device_index() as i32);
    // The runtime words; the user heap (a host heap with the data segment that follows it, when there is one:
    // `Window::contiguous_len`; a device heap's mapped part); a device heap's scratch tail, at the end of its
    // reserve (device barriers' arrivals and the reduction scratch, through a peer's host proxy).
    let mut regions = vec![
        (a.sys.base(), a.sys.contiguous_len(), false),
        match &a.device {
            Some(d) => (a.heap.base(), d.served.heap(), true),
            None => (a.heap.base(), a.heap.contiguous_len(), true),
        },
    ];
    let tail = a.device.as_ref().map_or((0, 0), |d| d.tail);
    if tail.1 > 0 {
        regions.push((a.heap.base().wrapping_add(tail.0), tail.1, false));
    }
    for (i, &(base, len, is_heap)) in regions.iter().enumerate() {
        let device = i > 0 && a.device.is_some();
        if device && staged {
            // The staging path: the device heap is not registered; peers' messages reach it (below).
            rec = rec.u64(0).u64(0).u64(len as u64).u64(1);
            continue;
        }
        let key = if prov_key {
            0
        } else {
            fresh_key(key_bytes, &keys)?
        };
        keys.push(key);
        let (k, addr) = ep.register(
            base,
            len,
            key,
            is_heap && !device,
            device.then_some(ze).flatten(),
        )?;
        rec = rec.u64(k).u64(addr).u64(len as u64).u64(0);
    }
    if tail.1 == 0 {
        rec = rec.u64(0).u64(0).u64(0).u64(0);
    }
    rec = rec.u64(tail.0 as u64);
    if let (Some(d), true) = (&a.device, staged) {
        ep.set_stage(Box::new(stage::ZeHeap(ofi::DeviceSpan::new(
            Arc::clone(&d.rt),
            a.heap.base() as usize,
            Arc::clone(&d.served),
            d.tail,
        ))));
    }
    let device_heap = a.device.as_ref().map(|_| {
        if want == Want::Hmem {
            "registered (FI_HMEM_ZE)"
        } else {
            "staged"
        }
    });
    ep.ready(a.emulate_atomics, device_heap)?;
    Ok((ep, rec.0, keys, staged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::ofi::msg::{token_eq, Msg};
    use crate::net::ofi::{Token, MSG_PUT};
    use std::collections::HashSet;

    #[test]
    fn keys_are_random_distinct_and_of_the_providers_size() {
        // Distinct per registration: two regions of one PE, and across many set-ups (jobs).
        let mut seen = HashSet::new();
        for _ in 0..1000 {
            let a = fresh_key(8, &[]).expect("key");
            let b = fresh_key(8, &[a]).expect("key");
            assert_ne!(a, b);
            assert!(a != 0 && b != 0);
            assert!(seen.insert(a) && seen.insert(b), "a key came twice");
        }
        // The old constant keys never come back (2^-64 each).
        assert!(!seen.contains(&0x4845) && !seen.contains(&0x5953));
        // All 64 bits vary (an OR of many keys has every bit set).
        assert_eq!(seen.iter().fold(0, |a, k| a | k), u64::MAX);
        // A provider with 2-byte keys gets 16 random bits, never 0 nor a taken one.
        let taken: Vec<u64> = (1..0x8000).collect();
        for _ in 0..100 {
            let k = fresh_key(2, &taken).expect("key");
            assert!((0x8000..=0xffff).contains(&k), "{k:#x}");
        }
    }

    #[test]
    fn chunks_are_kept_in_order_and_never_overlap() {
        let r = |key: u64, len: u64| Region {
            key,
            addr: 0,
            len,
            staged: false,
        };
        // A device heap: its first chunk and its tail at the end of the reserve; grown chunks go between them.
        let c = window::heap_chunks(r(1, 4096), (1 << 20, r(2, 100))).expect("tail");
        FabricWindow::add_chunk(&c, 4096, r(3, 8192)).expect("grown chunk");
        // A chunk published again (another team shared with its owner) is kept; an overlapping one is refused.
        FabricWindow::add_chunk(&c, 4096, r(3, 8192)).expect("the same chunk again");
        for (off, len) in [(0, 4096), (8192, 8192), (12280, 16), ((1 << 20) - 8, 16)] {
            assert!(
                FabricWindow::add_chunk(&c, off, r(9, len)).is_err(),
                "[{off}, +{len}) overlaps"
            );
        }
        FabricWindow::add_chunk(&c, 1 << 16, r(4, 4096)).expect("a team chunk after a gap");
        let offs: Vec<(usize, u64)> = c
            .read()
            .expect("chunks")
            .iter()
            .map(|&(o, r)| (o, r.key))
            .collect();
        assert_eq!(offs, [(0, 1), (4096, 3), (1 << 16, 4), (1 << 20, 2)]);
    }

    #[test]
    fn tokens_compare_equal_only_when_equal() {
        let t: Token = random_words().expect("token");
        let u: Token = random_words().expect("token");
        assert_ne!(t, u, "two set-ups made the same token");
        assert!(token_eq(&t, &t));
        assert!(!token_eq(&t, &u));
        for bit in 0..128 {
            let mut v = t;
            v[bit / 64] ^= 1 << (bit % 64);
            assert!(!token_eq(&t, &v), "bit {bit}");
        }
        // The header carries it in words 8 and 9.
        let m = Msg {
            kind: MSG_PUT,
            tok: t,
            ..Msg::default()
        };
        let w = m.words();
        assert_eq!([w[8], w[9]], t);
        assert!(token_eq(&Msg::of(&w).tok, &t));
    }

    #[test]
    fn emulated_atomics_match_the_cpu_atomics() {
        // The reference: the CPU's own atomics on a word, as the shm transport applies them.
        let cases = [
            (AmoOp::Set, 5u64),
            (AmoOp::Swap, 9),
            (AmoOp::FetchAdd, u64::MAX),
            (AmoOp::FetchAnd, 0xF0F0),
            (AmoOp::FetchOr, 0x0F0F),
            (AmoOp::FetchXor, 0xFFFF_0000_1234),
            (AmoOp::CompareSwap { cond: 7 }, 1),
            (AmoOp::CompareSwap { cond: 8 }, 1),
        ];
        for width in [4usize, 8] {
            for &(op, operand) in &cases {
                for old in [0u64, 7, 0xFFFF_FFFF, 0x1234_5678_9ABC] {
                    let arena = super::super::shm::Arena::create(4096).expect("memfd");
                    let m = super::super::shm::Mapping::map(&arena, 0, 4096).expect("map");
                    let mask = if width == 4 {
                        u32::MAX as u64
                    } else {
                        u64::MAX
                    };
                    m.amo(0, width, AmoOp::Set, old).expect("set");
                    m.amo(0, width, op, operand).expect("op");
                    let want = m.amo(0, width, AmoOp::Fetch, 0).expect("fetch");
                    assert_eq!(
                        apply(op, width, old & mask, operand),
                        want,
                        "{op:?} width {width} old {old:#x} operand {operand:#x}"
                    );
                }
            }
        }
    }
}
