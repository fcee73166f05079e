//! The libfabric engine (platform layer: the only code that names `fabric_sys`, and the fabric's only `unsafe`):
//! one PE's endpoint [`Ep`] with its operations in flight, on a reliable-datagram endpoint with RMA, atomics and
//! messages. It knows nothing of windows, transports, the bootstrap or teams: the fabric transport
//! (`transport/fabric/`) drives it under its lock and turns its operation ids into tickets.
//!
//! - [`info`]: provider discovery (`fi_getinfo`, what the endpoint wants, where it listens, rxm's receive bound);
//! - [`ep`]: opening the endpoint, registering memory (keys chosen by the caller), addresses of peers;
//! - [`ops`]: posting RMA writes and reads, atomics, the EAGAIN retry; small puts injected ([`Injects`]);
//! - [`cq`]: completions and completion errors, the write counter, the end of operations;
//! - [`slab`]: the bounce buffers of large puts, the slab of operations in flight and the pool of their parts'
//!   contexts;
//! - [`msg`]: two-sided messages: the receive buffers every PE keeps posted, the staging protocol of device heaps
//!   (requests on a heap behind [`msg::StagedHeap`], and their replies), authenticated by the receiver's token.
//!
//! See `transport/fabric/mod.rs` for what the transport promises (ordering, completion, security).
//!
//! Lock discipline. The engine takes no lock of its own: every method takes `&mut Ep` or `&Ep`, and the fabric
//! transport keeps the one [`Ep`] of a PE in a `Mutex` (`Fabric::ep`), which therefore guards every libfabric
//! object of the PE (endpoint, completion queue, write counter, registrations), the operations in flight (the op
//! slab, the part contexts, the bounce buffers, the injected puts' accounting), their results and errors, and the
//! receive buffers. Waits never sleep or spin holding it: `Fabric::wait` polls under it and lets it go between
//! polls (the progress thread does the same), and a post that the provider pushes back (`EAGAIN`) polls under
//! the lock it holds, with the bounded back-off of every wait. Other locks, always taken in this order and none
//! held while waiting: `Fabric::ep`, then a window's chunk list (`FabricWindow::chunks`, read under the
//! endpoint's lock, written alone when a heap grows), then `Fabric::keys`, then `Fabric::user_keys`;
//! `Fabric::thread` is taken alone. Under `Fabric::ep` the engine calls out only to the liveness check (the
//! bootstrap's own locks) and a staged device heap's service lane, neither of which calls back into the
//! transport.

pub(crate) mod cq;
pub(crate) mod ep;
pub(crate) mod info;
pub(crate) mod msg;
pub(crate) mod ops;
pub(crate) mod slab;
pub(crate) mod stall;

pub(crate) use info::{providers, Bind, Want};
pub(crate) use msg::{amo_of, DeviceSpan, Served, StagedHeap, Token};
use msg::{Inbox, Told};
use slab::Slabs;

use crate::error::{Error, Result};
use crate::types::{AmoOp, Domain};
use crate::wait::{Backoff, FIRST_SLEEP};
use fabric_sys as fi;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CStr};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

/// Asked while a wait lasts: `Err(PeerLost)` when the job lost a peer (the transport asks its bootstrap).
pub(crate) type Liveness = Box<dyn Fn() -> Result<()> + Send>;

/// The back-off of a wait that drives this PE's progress (a completion wait, a post retried while the provider's
/// queue is full): `spins` polls spinning, then yielding, never sleeping (a software provider moves data only while
/// this PE calls in, so a sleep would add its length to every operation), checks due at the back-off's interval,
/// with the time limit `limit`.
pub(crate) fn polling_backoff(spins: u64, limit: Option<Duration>) -> Backoff {
    Backoff::new(spins, u64::MAX, FIRST_SLEEP, limit)
}

/// `FI_ADDR_NOTAVAIL` (a macro in the headers).
pub(crate) const ADDR_NOTAVAIL: u64 = u64::MAX;

/// Providers that reach only the same host: never chosen unless asked for by name.
pub(crate) const SAME_HOST_ONLY: &[&str] = &["shm", "sm2"];

/// A registered region of a PE as its peers address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    /// The remote key.
    pub(crate) key: u64,
    /// What offset 0 of the region is called in RMA requests (its virtual address with `FI_MR_VIRT_ADDR`, else 0).
    pub(crate) addr: u64,
    /// Bytes.
    pub(crate) len: u64,
    /// Not registered: a device heap the provider cannot reach (no `FI_HMEM`), served by its owner's staging
    /// thread through messages (see [`StagedHeap`]).
    pub(crate) staged: bool,
}

/// Per-part context handed to libfabric (`fi_context2` first, for providers that use `FI_CONTEXT`/`2`), from the
/// pool [`slab::Ctxs`] (a receive buffer's is its own).
#[repr(C)]
pub(super) struct Ctx {
    raw: fi::fi_context2,
    id: u64,
    /// The bounce buffer this part reads ([`NO_SLAB`]: none), free again once the part completes.
    slab: u32,
    /// A write or a non-fetching atomic: the write counter counts its completion too ([`Injects`]).
    counted: bool,
    /// Its place in [`slab::Ctxs`] ([`NO_CTX`]: not from the pool).
    index: u32,
}

/// [`Ctx::index`] of a context that is not from the pool (a receive buffer's).
pub(crate) const NO_CTX: u32 = u32::MAX;

/// Ticket bit of an injected put ([`Ep::put`] up to the provider's inject size): the bits below are its sequence
/// number among injected puts ([`Injects`]). Operation ids never reach it.
pub(crate) const INJECT_BIT: u64 = 1 << 62;

/// Injected puts: posted with `FI_INJECT` (the provider copies the source before the call returns) and no
/// completion entry (the completion queue is bound with `FI_SELECTIVE_COMPLETION`; every other operation asks for
/// its entry), so a small put takes no context, no slot and no allocation. Their completions (delivery, with
/// `FI_DELIVERY_COMPLETE`) are counted by the endpoint's write counter, which counts the writes and non-fetching
/// atomics that have contexts as well (`fi_cntr(3)`: the `FI_WRITE` counter). [`Ep::poll`] reads the counter
/// before the completion queue, so the injected puts done by then are at least the counter (successes and
/// failures) less the counted parts whose completions the queue has returned (`ctx_done`); once that reaches
/// `issued`, every injected put issued so far is done (`settled`). A PE or a domain has injected puts in flight
/// while its last one's sequence number is above `settled`: a quiet of one domain may so wait for another's
/// injected puts too (the counter is the endpoint's), never for its larger operations, and a quiet racing another
/// thread's stream of injected puts ends at a poll that finds all of them done (within the wait's time limit). The
/// accounting relies on the provider counting what `fi_cntr(3)` says the `FI_WRITE` counter counts (RMA writes
/// and non-fetching atomics, successes and failures; `ofi_rxm` does, in `rxm_finish_rma` and its atomic
/// responses): one that counted less would leave a quiet waiting until its time limit, one that counted more
/// (reads, fetching atomics) would end it early.
#[derive(Default)]
pub(super) struct Injects {
    /// Injected puts issued; the last one's sequence number.
    issued: u64,
    /// Every injected put up to this sequence number completed.
    settled: u64,
    /// Completions (successes and failures) of counted parts with a context read from the completion queue.
    ctx_done: u64,
    /// Of those, failures.
    ctx_failed: u64,
    /// Failures of injected puts reported already (by the counter, or by an error entry without a context).
    failed_seen: u64,
    /// The sequence number of the last injected put to each PE.
    last_pe: Vec<u64>,
    /// The sequence number of the last injected put of each domain (0: none).
    last_domain: PerDomain,
    /// Polls that found only injected puts in flight ([`INJECT_QUEUE_EVERY`]).
    polls: u64,
    /// The write counter's failures when last read.
    failed_read: u64,
    /// The write counter's completions when last read.
    done_read: u64,
    /// The error of failed injected puts, with the sequence numbers it covers (every one outstanding when the
    /// failure was counted: the counter does not say which one failed). The last few only.
    failures: Vec<(u64, u64, Error)>,
}

/// While only injected puts are in flight, a poll reads the write counter alone, but every this many polls the
/// completion queue (for received messages), and every this many polls half a period later the counter's
/// failures, counted from the first poll of the wait, which reads the queue ([`Ep::poll_first`]): one progress
/// call per poll.
const INJECT_QUEUE_EVERY: u64 = 16;

/// Failure ranges [`Injects`] keeps for the tickets of injected puts.
const INJECT_FAILURES_KEPT: usize = 16;

/// Puts of at least this many bytes copy their source into a bounce buffer from [`Slabs`] (smaller ones into
/// their operation's own buffer), or, for a blocking put whose source lies in the registered heap, are posted
/// from the heap without a copy.
pub(crate) const SLAB_MIN: usize = 32 * 1024;
/// Blocking puts of at least this many bytes are posted from their source without a copy and waited for
/// (the fabric window's `write_direct`): from this PE's registered heap always, from private memory when the
/// provider reads unregistered memory. At 32 KiB the copy costs about 2 us on this host, and below it waiting
/// for the delivery (instead of returning once the copy is posted) would cost blocking puts issued back to back
/// more than the copy saves.
pub(crate) const ZERO_COPY_MIN: usize = SLAB_MIN;
/// A put-with-signal of at least this many bytes writes its data without a copy and waits for its delivery, then
/// posts the signal (the fabric window's `put_signal_nbi`): the extra round trip before the signal (about 10 us over
/// tcp on loopback) costs less than copying the data into a bounce buffer above this size (about 70 us per MiB;
/// the ping-pong at 1-4 MiB was 0.64-0.83x raw libfabric's, whose source is registered). A blocking put-with-signal
/// whose signal cannot follow its data (`Ep::signal_follows_data`) takes that path from [`ZERO_COPY_MIN`], as a
/// blocking put does: its signal waits for the delivery either way, so the copy would only add its own time.
pub(crate) const SIGNAL_DIRECT_MIN: usize = 256 * 1024;
/// log2 of the smallest bounce buffer ([`SLAB_MIN`]).
pub(crate) const SLAB_MIN_LOG: u32 = 15;
/// The largest bounce buffer, hence the largest part of a copied put: a put is one write up to this size (every
/// part is a write the target acknowledges, and splitting a put costs more than its parts overlap).
pub(crate) const SLAB_MAX: usize = 4 << 20;
/// Bounce memory a PE keeps at most, in flight and cached: a put waits for earlier ones to complete beyond it.
pub(crate) const SLAB_CAP: usize = 16 << 20;
/// [`Ctx::slab`] of a part that holds no bounce buffer.
pub(crate) const NO_SLAB: u32 = u32::MAX;

/// An atomic as libfabric names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Form {
    /// `fi_atomic` (no result).
    Post,
    /// `fi_fetch_atomic`.
    Fetch,
    /// `fi_compare_atomic`.
    Compare,
}

/// The signal of a put-with-signal, posted once its data was delivered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signal {
    pub(crate) sig: usize,
    pub(crate) op: AmoOp,
    pub(crate) value: u64,
}

/// One operation in flight. Its buffer holds every local byte libfabric reads or writes for it (data, operand,
/// compare value, result) but the data of large puts (in bounce buffers, or this PE's registered heap for a
/// blocking put that waits), so a provider that needs local registration (`FI_MR_LOCAL`) gets one region per
/// operation, and nothing the caller owns is ever referenced after the call that started it.
pub(super) struct Op {
    parts_left: usize,
    pe: usize,
    /// The completion domain it was issued in.
    domain: Domain,
    what: &'static str,
    /// The operation's local bytes (u64 storage: atomics need aligned operands).
    buf: Vec<u64>,
    /// Bytes of `buf` a get returns.
    get_len: Option<usize>,
    /// Offset (in bytes) in `buf` of an atomic's result.
    result_at: Option<usize>,
    /// Word index in `buf` of an atomic's operand (then compare value, then result); for a staged
    /// put-with-signal, of the signal message's header.
    amo_at: usize,
    /// Goes through messages the target answers: staging messages (its target region is [`Region::staged`]) or
    /// a put-with-signal sent as one message ([`Ep::am_put_signal`]); completes with the reply.
    staged: bool,
    mr: Option<LocalMr>,
    then: Option<(Region, Signal)>,
    /// A told put-with-signal's number ([`Told`]; 0: none): its writes carry it (and this PE's number) as remote
    /// completion data.
    tell: u64,
}

/// Kinds of staging messages (word 0 of a [`Msg`] header).
pub(crate) const MSG_PUT: u64 = 1;
pub(crate) const MSG_GET: u64 = 2;
pub(crate) const MSG_AMO: u64 = 3;
pub(crate) const MSG_REPLY: u64 = 4;
/// The signal of a put-with-signal to a peer's host memory, as a message: with the data when they fit one
/// ([`Ep::am_put_signal`]), else behind the data's writes, which the target is told of ([`Told`]). The target
/// applies the data, then (once those writes landed) the signal, then replies.
pub(crate) const MSG_PUT_SIGNAL: u64 = 5;
/// Words the payload of a [`MSG_PUT_SIGNAL`] message starts with: the data's region key, the signal's offset in it,
/// the number its sender gave the writes ahead of it ([`Told`]; 0: none) and how many they are.
pub(crate) const PUT_SIGNAL_WORDS: usize = 4;
/// The largest put-with-signal sent as one message ([`Ep::am_put_signal`]): with its headers it stays below
/// `ofi_rxm`'s eager size (`FI_OFI_RXM_BUFFER_SIZE`, 16 KiB by default), above which rxm sends a message by
/// rendezvous, a round trip more. Measured on the 2-core machine (ping-pong, raw libfabric's time / this one's):
/// 1.36-1.70x at 8 B-8 KiB as a message; at 16-64 KiB a message took 0.66-0.83x (larger ones go as told writes
/// and a signal message, [`Ep::told_copied`]).
pub(crate) const AM_SIGNAL_MAX: usize = 8 * 1024;
// A put-with-signal that goes as one message never takes the zero-copy path (the fabric window tries that one
// first, from `ZERO_COPY_MIN`).
const _: () = assert!(AM_SIGNAL_MAX < ZERO_COPY_MIN);
/// Bits of a told write's number in its remote completion data (the sender's PE number above them, [`Told`]).
pub(crate) const TELL_BITS: u32 = 40;
/// Words of a message header: eight words of the operation, then the receiver's token ([`Token`]).
pub(crate) const HDR_WORDS: usize = 10;
/// Largest payload of one staging message (larger puts and gets are split).
pub(crate) const STAGE_CHUNK: usize = 64 * 1024;
/// Untagged receive buffers every PE keeps posted ([`Inbox`]): a device heap's staging messages and their replies
/// land in them; on any PE they also take in whatever an outsider sends, which is checked and dropped. As many
/// tagged ones (the job sends no tagged message: what they take in is dropped unread). At least twice
/// [`RXM_MSG_RX_SIZE`], so that every message one progress call can take in finds a posted buffer of its kind
/// (see [`RXM_MSG_RX_SIZE`]).
pub(crate) const RECVS: usize = 32;
/// `FI_OFI_RXM_MSG_RX_SIZE`, set for `ofi_rxm` before libfabric is first asked for providers unless the user set
/// it: the receive buffers rxm posts on its core endpoints (4096 by default with `tcp`, whose connections share
/// them). rxm matches a message against the application's posted receives when its core provider reads the
/// message's header, and queues one that matches none as unexpected, taking a new buffer of its own from a pool
/// without limit for each (`rxm_match_rx_buf` / `rxm_replace_rx_buf` in `prov/rxm/src/rxm_cq.c` of libfabric
/// 1.17), so a flood arriving while this PE's buffers are taken grew without bound (unexpected messages of a kind
/// never received, tagged ones, grew forever). `tcp` reads a message only into one of these core buffers (it
/// stops reading the socket when none is free: `tcpx_op_msg` / `tcpx_get_rx_entry` in `prov/tcp/src/
/// tcpx_progress.c`), so one progress call takes in at most this many messages; this PE's completion read returns
/// after any batch holding received messages, reposts their buffers ([`Ep::serve`]) before the next read, and
/// keeps [`RECVS`] (twice this: a batch's receives may wait in the completion queue while the next call reads) of
/// each kind posted: no message finds no receive, rxm queues nothing unexpected, and a flood backs up in the
/// sender's TCP window instead of this PE's memory.
pub(crate) const RXM_MSG_RX_SIZE: usize = RECVS / 2;
/// Completions one read of the completion queue takes ([`Ep::poll_cq`]): more than `ofi_rxm` produces in one
/// progress call (it reads 32 of its core provider's completions per call by default), so that received messages
/// do not pile up in the queue while rxm takes new ones in ([`RXM_MSG_RX_SIZE`]).
pub(crate) const CQ_BATCH: usize = 64;
/// The variable of [`RXM_MSG_RX_SIZE`].
pub(crate) const RXM_MSG_RX_SIZE_VAR: &str = "FI_OFI_RXM_MSG_RX_SIZE";
/// Context ids of receive buffers (operation ids never reach this bit).
pub(crate) const RECV_BIT: u64 = 1 << 63;
/// `at` of a reply whose bytes nobody wants (a put-with-signal's signal).
pub(crate) const NO_RESULT: u64 = u64::MAX;

impl Op {
    /// A free slot's operation.
    pub(super) fn empty() -> Op {
        Op {
            parts_left: 0,
            pe: 0,
            domain: Domain::DEFAULT,
            what: "",
            buf: Vec::new(),
            get_len: None,
            result_at: None,
            amo_at: 0,
            staged: false,
            mr: None,
            then: None,
            tell: 0,
        }
    }
}

/// The hasher of the maps keyed by operation id: ids are distinct counters, so one multiplication spreads them
/// (SipHash, the default, cost about 20 ns per lookup, and a put and its completion make five).
#[derive(Default)]
pub(super) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

/// A map keyed by operation id.
pub(super) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// A number per completion domain (a count of operations in flight, or a sequence number), 0 by default, indexed
/// by the domain's number: domains take the lowest free numbers, so it is as long as the most domains open at
/// once, and a quiet's look-ups on every poll are two loads instead of two hash-map probes.
#[derive(Default)]
pub(super) struct PerDomain(Vec<u64>);

impl PerDomain {
    /// The number of domain `d`.
    pub(super) fn get(&self, d: Domain) -> u64 {
        self.0.get(d.0 as usize).copied().unwrap_or(0)
    }

    /// The number of domain `d`, to change.
    pub(super) fn at(&mut self, d: Domain) -> &mut u64 {
        let i = d.0 as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, 0);
        }
        &mut self.0[i]
    }

    /// The domains whose number is not 0, with it.
    pub(super) fn iter(&self) -> impl Iterator<Item = (Domain, u64)> + '_ {
        (0u32..)
            .zip(&self.0)
            .filter(|&(_, &n)| n != 0)
            .map(|(i, &n)| (Domain(i), n))
    }
}

/// A local registration of one operation's buffer.
pub(super) struct LocalMr {
    mr: *mut fi::fid_mr,
    desc: *mut c_void,
}

/// A region of this PE's host memory registered for peers ([`Ep::register`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct HostRegion {
    pub(super) key: u64,
    pub(super) base: usize,
    pub(super) len: usize,
}

/// A registered part of this PE's host heap (its first chunk, then each chunk it grew by), which puts read
/// directly (no copy) when their source lies in it.
#[derive(Clone, Copy)]
pub(super) struct LocalHeap {
    base: usize,
    len: usize,
    /// Its descriptor for local access (null without `FI_MR_LOCAL`).
    desc: *mut c_void,
}

/// A user buffer registered for local access ([`Ep::register_user`]): the source of puts and the destination of
/// gets in place.
pub(super) struct UserMr {
    /// Its handle (a counter, never reused).
    handle: u64,
    base: usize,
    len: usize,
    /// Its registration (null without `FI_MR_LOCAL`: none is made).
    mr: *mut fi::fid_mr,
    /// Its descriptor for local access (null without `FI_MR_LOCAL`).
    desc: *mut c_void,
}

/// Every libfabric object of the PE, and the operations in flight. Only used under the fabric transport's lock
/// (`Fabric::ep`).
pub(crate) struct Ep {
    prov: String,
    info: *mut fi::fi_info,
    fabric: *mut fi::fid_fabric,
    domain: *mut fi::fid_domain,
    cq: *mut fi::fid_cq,
    av: *mut fi::fid_av,
    ep: *mut fi::fid_ep,
    /// This PE's own registrations (runtime words, user heap).
    own: Vec<*mut fi::fid_mr>,
    /// This PE's device heap's team-scoped chunks, by window offset ([`Ep::register_team`]), each closed when
    /// its allocation is freed ([`Ep::unregister_team`]).
    team: Vec<(usize, *mut fi::fid_mr)>,
    /// Libfabric address of each PE (`ADDR_NOTAVAIL` for PEs not reached).
    addrs: Vec<u64>,
    me: usize,
    /// The operations in flight (a slab: [`slab::Ops`]).
    ops: slab::Ops,
    /// The contexts of their parts.
    ctxs: slab::Ctxs,
    /// The write counter ([`Injects`]; null: no injected puts).
    cntr: *mut fi::fid_cntr,
    /// Puts up to this many bytes are injected ([`Injects`]; 0: none).
    inject_max: usize,
    /// Injected puts in flight.
    inj: Injects,
    /// A put-with-signal of up to this many bytes posts its signal right after its data (the provider orders an
    /// atomic write after an RMA write, `FI_ORDER_WAW`, and places data in order up to `max_order_waw_size`);
    /// 0: the signal waits for the data's delivery.
    waw_max: usize,
    /// Outstanding operations per PE.
    per_pe: Vec<usize>,
    /// Outstanding operations per completion domain.
    per_domain: PerDomain,
    /// The domain of each completed operation whose error is stored in `errors`.
    error_domains: IdMap<Domain>,
    /// Bytes of completed gets and results of atomics, until their tickets collect them.
    results: IdMap<Vec<u8>>,
    /// Errors of failed operations, until their tickets (or a quiet) collect them.
    errors: IdMap<Error>,
    /// Operations whose tickets were let go (`Pending::issued`): their errors go to the next quiet.
    delivery_complete: bool,
    mr_local: bool,
    mr_endpoint: bool,
    max_msg: usize,
    /// Atomics the provider offers, per (width, op, form).
    atomics: HashSet<(usize, fi::fi_op, Form)>,
    timeout: Option<Duration>,
    /// A completion error said that a peer is gone.
    lost: bool,
    /// Asked while a wait lasts: a lost peer ends it.
    liveness: Liveness,
    /// The staging path when this PE's device heap is not registered (see [`StagedHeap`]).
    stage: Option<Box<dyn StagedHeap>>,
    /// The receive buffers ([`Inbox`]).
    inbox: Inbox,
    /// Completions whose context was not this endpoint's, since set-up ([`Ep::ctx_fields`]).
    foreign_contexts: u64,
    /// The progress calls into the provider, watched ([`stall`]).
    stall: stall::Stall,
    /// [`CQ_BATCH`] completion entries, the buffer of [`Ep::poll_cq`].
    cq_entries: Vec<fi::fi_cq_data_entry>,
    /// Every PE's token (messages to a PE carry its own).
    tokens: Vec<Token>,
    /// Bounce buffers of large puts.
    slabs: Slabs,
    /// This PE's host heap as registered (`None` for a device heap).
    heap: Vec<LocalHeap>,
    /// This PE's host memory registered for peers (its runtime words and host heap chunks): what a
    /// [`MSG_PUT_SIGNAL`] message may write, by key.
    host_regions: Vec<HostRegion>,
    /// Puts-with-signal whose signal would wait for the data's delivery go as messages up to this many bytes
    /// ([`Ep::am_put_signal`]; 0: never): a provider with manual progress, whose target applies RMA in its own
    /// polls anyway.
    am_signal_max: usize,
    /// Whether the provider reports a peer's write that carries remote completion data to this PE
    /// (`cq_data_size` of 8 bytes) and puts-with-signal go as messages (`am_signal_max`): the data of a larger one
    /// then goes as writes the target is told of, the signal as a message behind them ([`Ep::told_copied`]).
    tell: bool,
    /// Told writes, sent and landed, and the signals waiting for them ([`Told`]).
    told: Told,
    /// Signals applied but not yet answered: (sender, operation, reply slot) ([`Ep::answer`]).
    answers: Vec<(usize, u64, u64)>,
    /// Registered user buffers ([`Ep::register_user`]).
    user: Vec<UserMr>,
    /// The last handle of a user buffer's registration.
    user_next: u64,
    /// Copies made for puts and gets, and transfers made in place ([`crate::types::CopyStats`]).
    stats: crate::types::CopyStats,
    /// Why the endpoint was shut down ([`Ep::shutdown`]): every operation from then on fails with
    /// [`Ep::closed_err`].
    closed: Option<String>,
    /// Operations outstanding when the endpoint was shut down: their contexts, buffers and registrations are
    /// freed with the rest of the libfabric objects (in `Drop for Ep`), never while the completion queue may
    /// still hold an entry naming them.
    abandoned: Vec<Op>,
}

// SAFETY: the raw pointers are libfabric objects owned by this struct; the domain is opened FI_THREAD_DOMAIN and
// every call into libfabric for them takes `&mut self` (the fabric transport keeps the Ep in a Mutex), so at most
// one thread calls into libfabric for them at a time; the other fields (the liveness closure, the staged heap) are
// Send themselves.
unsafe impl Send for Ep {}

/// libfabric's text for a (positive) error number.
fn strerror(code: i64) -> String {
    // SAFETY: xfi_strerror (fi_strerror once libfabric is loaded, libc's strerror before) returns a pointer to a
    // NUL-terminated string that stays valid for any value.
    let p = unsafe { fi::xfi_strerror(code.unsigned_abs() as i32) };
    if p.is_null() {
        return format!("error {code}");
    }
    // SAFETY: non-null, NUL-terminated static string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn fab_err(prov: &str, call: &str, code: i64) -> Error {
    Error::Transport {
        transport: "fabric",
        message: format!(
            "{call} failed on provider {prov}: {} ({code})",
            strerror(code)
        ),
    }
}

/// A check of a libfabric return code (0 or a negative error).
fn ok(prov: &str, call: &str, r: i64) -> Result<()> {
    if r < 0 {
        return Err(fab_err(prov, call, r));
    }
    Ok(())
}

fn dtype(width: usize) -> Result<fi::fi_datatype> {
    match width {
        4 => Ok(fi::FI_UINT32),
        8 => Ok(fi::FI_UINT64),
        w => Err(Error::Transport {
            transport: "fabric",
            message: format!("atomic width {w} (must be 4 or 8)"),
        }),
    }
}

/// libfabric's operation and form for one AMO: `None` for a fetch-only or no-op post.
fn fi_op_of(op: AmoOp, fetch: bool) -> (fi::fi_op, Form) {
    let form = if fetch { Form::Fetch } else { Form::Post };
    match op {
        AmoOp::Fetch => (fi::FI_ATOMIC_READ, Form::Fetch),
        AmoOp::Set | AmoOp::Swap => (fi::FI_ATOMIC_WRITE, form),
        AmoOp::CompareSwap { .. } => (fi::FI_CSWAP, Form::Compare),
        AmoOp::FetchAdd => (fi::FI_SUM, form),
        AmoOp::FetchAnd => (fi::FI_BAND, form),
        AmoOp::FetchOr => (fi::FI_BOR, form),
        AmoOp::FetchXor => (fi::FI_BXOR, form),
    }
}

/// Connection-level failures: the peer's process or host is gone.
fn is_lost(err: i32) -> bool {
    [
        fi::FI_ECONNRESET,
        fi::FI_ECONNREFUSED,
        fi::FI_ECONNABORTED,
        fi::FI_ENOTCONN,
        fi::FI_EHOSTUNREACH,
        fi::FI_ENETUNREACH,
        fi::FI_ESHUTDOWN,
        32, // EPIPE (tcp reports errno values; libfabric has no FI_EPIPE)
    ]
    .iter()
    .any(|&e| e as i32 == err.abs())
}
impl Drop for Ep {
    fn drop(&mut self) {
        // Close in reverse order of opening; outstanding operations' buffers are freed after their endpoint.
        // SAFETY: each object was opened in `connect` and is closed once, here, after the endpoint that uses it.
        unsafe {
            if !self.ep.is_null() {
                fi::xfi_close(&mut (*self.ep).fid);
            }
            for op in self.ops.iter_mut().chain(self.abandoned.iter_mut()) {
                if let Some(m) = op.mr.take() {
                    fi::xfi_close(&mut (*m.mr).fid);
                }
            }
            for &mr in self.own.iter().chain(self.team.iter().map(|(_, m)| m)) {
                fi::xfi_close(&mut (*mr).fid);
            }
            for u in self.user.drain(..).filter(|u| !u.mr.is_null()) {
                fi::xfi_close(&mut (*u.mr).fid);
            }
            for slab in self.slabs.bufs.iter_mut().flatten() {
                if let Some(m) = slab.mr.take() {
                    fi::xfi_close(&mut (*m.mr).fid);
                }
            }
            for m in self.inbox.mrs.drain(..) {
                fi::xfi_close(&mut (*m.mr).fid);
            }
            if !self.cntr.is_null() {
                fi::xfi_close(&mut (*self.cntr).fid);
            }
            if !self.av.is_null() {
                fi::xfi_close(&mut (*self.av).fid);
            }
            if !self.cq.is_null() {
                fi::xfi_close(&mut (*self.cq).fid);
            }
            if !self.domain.is_null() {
                fi::xfi_close(&mut (*self.domain).fid);
            }
            if !self.fabric.is_null() {
                fi::xfi_close(&mut (*self.fabric).fid);
            }
            if !self.info.is_null() {
                fi::xfi_freeinfo(self.info);
            }
        }
    }
}

fn bytes_of(v: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding; any u64 storage is valid bytes, and u8's alignment is 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 8) }
}

fn bytes_of_mut(v: &mut [u64]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`; any bytes written form valid u64s.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len() * 8) }
}
