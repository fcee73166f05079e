//! The fabric transport: PEs that shared memory does not reach (other nodes; every other PE with
//! `XPUSHMEM_TRANSPORT=fabric`), through libfabric (`fabric-sys`), on a reliable-datagram endpoint with RMA and
//! atomics (`tcp;ofi_rxm` here; `verbs;ofi_rxm`, `cxi`, `psm3`, `efa` on clusters, untested).
//!
//! Set-up (collective, [`connect`]): pick a provider (`XPUSHMEM_FABRIC_PROVIDER`, else libfabric's own `FI_PROVIDER`,
//! else the first RDM provider with RMA, atomics and messages that libfabric lists, single-node-only `shm`
//! providers skipped) on the address the endpoint is to listen on, open fabric, domain, completion queue, address
//! vector and endpoint, register this PE's runtime words and user heap (`fi_mr_reg`, remote read/write, random
//! keys), post the receive buffers, and exchange endpoint names, tokens and keys through the bootstrap.
//!
//! Operations: a put copies its source (the caller may reuse `src` on return) and posts `fi_writemsg`: a small one
//! into a buffer the operation owns, one of 32 KiB or more into a bounce buffer kept for reuse ([`Slabs`]: fresh
//! memory for every large put cost more in page faults and zeroing than the copy), as one write up to 4 MiB. A
//! blocking put of 32 KiB or more is posted from its source without a copy and waits for its completion: from this
//! PE's registered heap (`put_sym`, or a slice of the heap) always, from private memory when the provider reads
//! unregistered memory (no `FI_MR_LOCAL`); if that wait ends with the write still outstanding (timeout, lost peer),
//! the endpoint is closed before the error returns, since the caller may free its buffer then and only closing
//! the endpoint stops the provider reading it; every later operation fails naming why ([`Ep::shutdown`]). A get posts `fi_read` into an owned buffer that its ticket
//! hands back; atomics are `fi_atomicmsg` / `fi_fetch_atomic` / `fi_compare_atomic` on `FI_UINT32`/`FI_UINT64`.
//! Every write and atomic is posted with `FI_DELIVERY_COMPLETE` when the provider offers it (its completion means
//! the target applied it), so `quiet` is "every outstanding operation completed". `put_signal` posts the signal only when the data's
//! delivery completed (libfabric orders RMA writes and atomics only within their own class). `fence` is `quiet`
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
//! - Keys, endpoint names and tokens travel only in [`connect`]'s `allgather` of the bootstrap (the unique-ID
//!   rendezvous authenticates its members; MPI's communicator), nowhere else.
//! - Messages are authenticated: each PE makes a 128-bit random token at set-up, published only in that
//!   allgather; every message to a PE (staging requests of a device heap, their replies) carries that PE's token.
//!   A message whose token is wrong (compared in constant time), whose length does not match its header, whose
//!   sender is not a PE this transport reaches, whose kind is unknown, or (a reply) that names no staged operation
//!   of this PE on that sender is dropped unread, counted, with at most one warning a second.
//! - Receive buffering is bounded: every PE keeps [`RECVS`] untagged and as many tagged receive buffers posted
//!   (tagged ones with every tag bit ignored: the job sends none, and rxm would otherwise keep every tagged
//!   message forever) and reposts them before its next completion read, and limits `ofi_rxm`'s own receive
//!   buffers to half as many ([`RXM_MSG_RX_SIZE`]: `FI_OFI_RXM_MSG_RX_SIZE`, set unless the user set it), so
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

use super::{check_access, AmoOp, Ticket, Transport, Window};
use crate::error::{Error, Result};
use fabric_sys as fi;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CStr, CString};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// `FI_ADDR_NOTAVAIL` (a macro in the headers).
const ADDR_NOTAVAIL: u64 = u64::MAX;

/// Providers that reach only the same host: never chosen unless asked for by name.
const SAME_HOST_ONLY: &[&str] = &["shm", "sm2"];

/// A registered region of a PE as its peers address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Region {
    /// The remote key.
    key: u64,
    /// What offset 0 of the region is called in RMA requests (its virtual address with `FI_MR_VIRT_ADDR`, else 0).
    addr: u64,
    /// Bytes.
    len: u64,
    /// Not registered: a device heap the provider cannot reach (no `FI_HMEM`), served by its owner's staging
    /// thread through messages (see [`Stage`]).
    staged: bool,
}

/// Per-operation context handed to libfabric (`fi_context2` first, for providers that use `FI_CONTEXT`/`2`).
#[repr(C)]
struct Ctx {
    raw: fi::fi_context2,
    id: u64,
    /// The bounce buffer this part reads ([`NO_SLAB`]: none), free again once the part completes.
    slab: u32,
}

/// Puts of at least this many bytes copy their source into a bounce buffer from [`Slabs`] (smaller ones into
/// their operation's own buffer), or, for a blocking put whose source lies in the registered heap, are posted
/// from the heap without a copy.
const SLAB_MIN: usize = 32 * 1024;
/// Blocking puts of at least this many bytes are posted from their source without a copy and waited for
/// ([`FabricWindow::write_direct`]): from this PE's registered heap always, from private memory when the
/// provider reads unregistered memory. At 32 KiB the copy costs about 2 us on this host, and below it waiting
/// for the delivery (instead of returning once the copy is posted) would cost blocking puts issued back to back
/// more than the copy saves.
const ZERO_COPY_MIN: usize = SLAB_MIN;
/// A put-with-signal of at least this many bytes writes its data without a copy and waits for its delivery, then
/// posts the signal ([`FabricWindow::put_signal_nbi`]): the extra round trip before the signal (about 10 us over
/// tcp on loopback) costs less than copying the data into a bounce buffer above this size (about 70 us per MiB;
/// the ping-pong at 1-4 MiB was 0.64-0.83x raw libfabric's, whose source is registered).
const SIGNAL_DIRECT_MIN: usize = 256 * 1024;
/// log2 of the smallest bounce buffer ([`SLAB_MIN`]).
const SLAB_MIN_LOG: u32 = 15;
/// The largest bounce buffer, hence the largest part of a copied put: a put is one write up to this size (every
/// part is a write the target acknowledges, and splitting a put costs more than its parts overlap).
const SLAB_MAX: usize = 4 << 20;
/// Bounce memory a PE keeps at most, in flight and cached: a put waits for earlier ones to complete beyond it.
const SLAB_CAP: usize = 16 << 20;
/// [`Ctx::slab`] of a part that holds no bounce buffer.
const NO_SLAB: u32 = u32::MAX;

/// An atomic as libfabric names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Form {
    /// `fi_atomic` (no result).
    Post,
    /// `fi_fetch_atomic`.
    Fetch,
    /// `fi_compare_atomic`.
    Compare,
}

/// The signal of a put-with-signal, posted once its data was delivered.
#[derive(Debug, Clone, Copy)]
struct Signal {
    sig: usize,
    op: AmoOp,
    value: u64,
}

/// One operation in flight. Its buffer holds every local byte libfabric reads or writes for it (data, operand,
/// compare value, result) but the data of large puts (in bounce buffers, or this PE's registered heap for a
/// blocking put that waits), so a provider that needs local registration (`FI_MR_LOCAL`) gets one region per
/// operation, and nothing the caller owns is ever referenced after the call that started it.
struct Op {
    /// Boxed: libfabric holds each context's address until its completion, and the Vec may reallocate.
    #[allow(clippy::vec_box)]
    ctxs: Vec<Box<Ctx>>,
    parts_left: usize,
    pe: usize,
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
    /// Goes through staging messages (its target region is [`Region::staged`]).
    staged: bool,
    mr: Option<LocalMr>,
    then: Option<(Region, Signal)>,
}

/// Kinds of staging messages (word 0 of a [`Msg`] header).
const MSG_PUT: u64 = 1;
const MSG_GET: u64 = 2;
const MSG_AMO: u64 = 3;
const MSG_REPLY: u64 = 4;
/// Words of a message header: eight words of the operation, then the receiver's token ([`Token`]).
const HDR_WORDS: usize = 10;
/// Largest payload of one staging message (larger puts and gets are split).
const STAGE_CHUNK: usize = 64 * 1024;
/// Untagged receive buffers every PE keeps posted ([`Inbox`]): a device heap's staging messages and their replies
/// land in them; on any PE they also take in whatever an outsider sends, which is checked and dropped. As many
/// tagged ones (the job sends no tagged message: what they take in is dropped unread). At least twice
/// [`RXM_MSG_RX_SIZE`], so that every message one progress call can take in finds a posted buffer of its kind
/// (see [`RXM_MSG_RX_SIZE`]).
const RECVS: usize = 32;
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
const RXM_MSG_RX_SIZE: usize = RECVS / 2;
/// Completions one read of the completion queue takes ([`Ep::poll_cq`]): more than `ofi_rxm` produces in one
/// progress call (it reads 32 of its core provider's completions per call by default), so that received messages
/// do not pile up in the queue while rxm takes new ones in ([`RXM_MSG_RX_SIZE`]).
const CQ_BATCH: usize = 64;
/// The variable of [`RXM_MSG_RX_SIZE`].
const RXM_MSG_RX_SIZE_VAR: &str = "FI_OFI_RXM_MSG_RX_SIZE";
/// Context ids of receive buffers (operation ids never reach this bit).
const RECV_BIT: u64 = 1 << 63;
/// `at` of a reply whose bytes nobody wants (a put-with-signal's signal).
const NO_RESULT: u64 = u64::MAX;

/// A PE's message token: 128 random bits made by the PE at set-up ([`random_words`]) and published only in the
/// bootstrap's allgather. Every message to a PE carries that PE's token; one that does not is dropped unread.
type Token = [u64; 2];

/// Whether two tokens are equal, in time independent of where they differ.
fn token_eq(a: &Token, b: &Token) -> bool {
    let d = std::hint::black_box((a[0] ^ b[0]) | (a[1] ^ b[1]));
    d == 0
}

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

/// A message header: `[kind, from, id, off, len, operand, cond, op, token, token]`. Requests name the target heap
/// range (an atomic's `len` is its code, [`amo_code`]) and, in `op`, where the reply's bytes go in the
/// operation's buffer; a reply echoes `id` and `op`, and says in `operand` whether it failed (1: the payload is
/// the error text). `tok` is the receiver's [`Token`].
#[derive(Debug, Clone, Copy, Default)]
struct Msg {
    kind: u64,
    from: u64,
    id: u64,
    off: u64,
    len: u64,
    operand: u64,
    cond: u64,
    op: u64,
    tok: Token,
}

impl Msg {
    fn words(&self) -> [u64; HDR_WORDS] {
        [
            self.kind,
            self.from,
            self.id,
            self.off,
            self.len,
            self.operand,
            self.cond,
            self.op,
            self.tok[0],
            self.tok[1],
        ]
    }
    fn of(w: &[u64]) -> Msg {
        Msg {
            kind: w[0],
            from: w[1],
            id: w[2],
            off: w[3],
            len: w[4],
            operand: w[5],
            cond: w[6],
            op: w[7],
            tok: [w[8], w[9]],
        }
    }
}

/// Wire code of an atomic (width in the high half): the device's own codes ([`crate::abi::AmoCode`]); [`amo_of`]
/// decodes it (and the host proxy's requests).
fn amo_code(op: AmoOp, width: usize) -> (u64, u64) {
    let (c, cond) = op.code();
    (c as u64 | (width as u64) << 32, cond)
}

pub(crate) fn amo_of(code: u64, cond: u64) -> Option<(AmoOp, usize)> {
    use crate::abi::AmoCode as C;
    let width = (code >> 32) as usize;
    let op = match (code & 0xffff_ffff) as u32 {
        x if x == C::Fetch as u32 => AmoOp::Fetch,
        x if x == C::Set as u32 => AmoOp::Set,
        x if x == C::Swap as u32 => AmoOp::Swap,
        x if x == C::CompareSwap as u32 => AmoOp::CompareSwap { cond },
        x if x == C::FetchAdd as u32 => AmoOp::FetchAdd,
        x if x == C::FetchAnd as u32 => AmoOp::FetchAnd,
        x if x == C::FetchOr as u32 => AmoOp::FetchOr,
        x if x == C::FetchXor as u32 => AmoOp::FetchXor,
        _ => return None,
    };
    (width == 4 || width == 8).then_some((op, width))
}

/// The staging path of a device heap the provider cannot register (no `FI_HMEM`): peers send their operations on
/// it as messages into this PE's receive buffers ([`Inbox`]); this PE's progress thread applies them to the heap
/// with Level Zero copies (and the runtime's atomic kernel) on the device's service lane, and replies.
struct Stage {
    /// This PE's device and its heap's device address and length.
    rt: Arc<crate::transport::ze::ZeRuntime>,
    base: usize,
    len: usize,
}

/// The receive buffers every PE keeps posted ([`RECVS`] untagged ones, then as many tagged ones, each a header and
/// a chunk), reposted as their messages are handled: what the provider buffers for this PE is bounded by them (an
/// outsider's flood is read into them and dropped, instead of piling up in the provider's queue of unexpected
/// messages; see [`RXM_MSG_RX_SIZE`]).
struct Inbox {
    bufs: Vec<Vec<u64>>,
    #[allow(clippy::vec_box)]
    ctxs: Vec<Box<Ctx>>,
    /// Their registrations (with `FI_MR_LOCAL`).
    mrs: Vec<LocalMr>,
    /// Received messages not yet handled: (buffer, bytes).
    arrived: std::collections::VecDeque<(usize, usize)>,
    serving: bool,
    /// This PE's token ([`Token`]): a message without it is dropped.
    token: Token,
    /// Messages dropped (bad token, length, sender or kind; truncated) since set-up, and at the last warning.
    dropped: u64,
    warned: u64,
    /// When the last warning about dropped messages was logged (at most one a second).
    warned_at: Option<Instant>,
}

impl Inbox {
    /// Count a dropped message; a warning with the count at most once a second.
    fn drop_msg(&mut self, me: usize, why: std::fmt::Arguments<'_>) {
        self.dropped += 1;
        if self
            .warned_at
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            tracing::warn!(
                pe = me,
                "fabric: dropped {} message(s) not from this job ({} since set-up; last: {why})",
                self.dropped - self.warned,
                self.dropped
            );
            self.warned = self.dropped;
            self.warned_at = Some(Instant::now());
        }
    }
}

/// The hasher of the maps keyed by operation id: ids are distinct counters, so one multiplication spreads them
/// (SipHash, the default, cost about 20 ns per lookup, and a put and its completion make five).
#[derive(Default)]
struct IdHasher(u64);

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
}

/// A map keyed by operation id.
type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// A local registration of one operation's buffer.
struct LocalMr {
    mr: *mut fi::fid_mr,
    desc: *mut c_void,
}

/// The bounce buffers of large puts: power-of-two sizes from [`SLAB_MIN`] to [`SLAB_MAX`], allocated on first
/// use and registered once each when the provider needs local registration, kept for reuse (most recently freed
/// first: warm in the cache) up to [`SLAB_CAP`] bytes in all. Reusing them spares every large put the page faults
/// and zeroing of fresh memory, which cost the sender more than the copy itself.
#[derive(Default)]
struct Slabs {
    /// By id (a [`Ctx::slab`]); `None`: an id free for reuse.
    bufs: Vec<Option<Slab>>,
    /// Free buffers by size class.
    free: Vec<Vec<u32>>,
    /// Ids whose buffer was released.
    holes: Vec<u32>,
    /// Bytes of every buffer (in flight or free).
    bytes: usize,
}

struct Slab {
    buf: Box<[u64]>,
    class: usize,
    /// Its registration (with `FI_MR_LOCAL`).
    mr: Option<LocalMr>,
}

/// This PE's registered host heap, which puts read directly (no copy) when their source lies in it.
#[derive(Clone, Copy)]
struct LocalHeap {
    base: usize,
    len: usize,
    /// Its descriptor for local access (null without `FI_MR_LOCAL`).
    desc: *mut c_void,
}

/// Every libfabric object of the PE, and the operations in flight. Only used under [`Fabric::ep`]'s lock.
struct Ep {
    prov: String,
    info: *mut fi::fi_info,
    fabric: *mut fi::fid_fabric,
    domain: *mut fi::fid_domain,
    cq: *mut fi::fid_cq,
    av: *mut fi::fid_av,
    ep: *mut fi::fid_ep,
    /// This PE's own registrations (runtime words, user heap).
    own: Vec<*mut fi::fid_mr>,
    /// Libfabric address of each PE (`ADDR_NOTAVAIL` for PEs not reached).
    addrs: Vec<u64>,
    me: usize,
    next: u64,
    ops: IdMap<Op>,
    /// Outstanding operations per PE.
    per_pe: Vec<usize>,
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
    liveness: Arc<dyn crate::bootstrap::Bootstrap>,
    /// The staging path when this PE's device heap is not registered (see [`Stage`]).
    stage: Option<Stage>,
    /// The receive buffers ([`Inbox`]).
    inbox: Inbox,
    /// [`CQ_BATCH`] completion entries, the buffer of [`Ep::poll_cq`].
    cq_entries: Vec<fi::fi_cq_msg_entry>,
    /// Every PE's token (messages to a PE carry its own).
    tokens: Vec<Token>,
    /// Bounce buffers of large puts.
    slabs: Slabs,
    /// This PE's host heap as registered (`None` for a device heap).
    heap: Option<LocalHeap>,
    /// Why the endpoint was shut down ([`Ep::shutdown`]): every operation from then on fails with
    /// [`Ep::closed_err`].
    closed: Option<String>,
    /// Operations outstanding when the endpoint was shut down: their contexts, buffers and registrations are
    /// freed with the rest of the libfabric objects (in `Drop for Ep`), never while the completion queue may
    /// still hold an entry naming them.
    abandoned: Vec<Op>,
}

// SAFETY: the raw pointers are libfabric objects owned by this struct; the domain is opened FI_THREAD_DOMAIN and
// every use goes through the Mutex in `Fabric`, so at most one thread calls into libfabric for them at a time.
unsafe impl Send for Ep {}

/// The fabric transport.
pub(crate) struct Fabric {
    ep: Arc<Mutex<Ep>>,
    reach: Vec<bool>,
    /// Every reached PE's user heap region (for [`Fabric::heap_window`]).
    heaps: Vec<Option<Region>>,
    prov: String,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("provider", &self.prov)
            .finish()
    }
}

fn lock(m: &Mutex<Ep>) -> MutexGuard<'_, Ep> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

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

/// The word `op` leaves when applied to `old` with `operand` (both truncated to `width` bytes): what the
/// compare-and-swap emulation writes.
pub(crate) fn apply(op: AmoOp, width: usize, old: u64, operand: u64) -> u64 {
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

impl Ep {
    /// Read completions until the queue is empty (or 64 entries), finishing their operations.
    fn poll(&mut self) -> Result<()> {
        if self.closed.is_some() {
            // The completion queue may still hold entries of abandoned operations: never read it again.
            return Err(self.closed_err());
        }
        let mut r = self.poll_cq();
        // Under a stream of messages (a device heap's staging traffic, or an outsider's flood) keep draining while
        // messages keep arriving, every buffer reposted before the next read ([`RXM_MSG_RX_SIZE`]; bounded rounds:
        // the caller's own completion is read on the way).
        let mut rounds = 0;
        while self.serve() > 0 && rounds < 64 && r.is_ok() {
            r = self.poll_cq();
            rounds += 1;
        }
        r
    }

    /// Read completions: until the queue is empty (at most four reads), or after the first read that returned a
    /// received message (its buffer is to be reposted before the next read: [`RXM_MSG_RX_SIZE`]).
    fn poll_cq(&mut self) -> Result<()> {
        // Kept between calls (not zeroed for every poll).
        let mut entries = std::mem::take(&mut self.cq_entries);
        let r = self.poll_cq_into(&mut entries);
        self.cq_entries = entries;
        r
    }

    /// [`Ep::poll_cq`] reading into `entries` ([`CQ_BATCH`] of them).
    fn poll_cq_into(&mut self, entries: &mut [fi::fi_cq_msg_entry]) -> Result<()> {
        for _ in 0..4 {
            // SAFETY: `cq` is open; `entries` holds `entries.len()` FI_CQ_FORMAT_MSG entries.
            let r = unsafe { fi::xfi_cq_read(self.cq, entries.as_mut_ptr().cast(), entries.len()) };
            if r == -(fi::FI_EAGAIN as isize) {
                return Ok(());
            }
            if r == -(fi::FI_EAVAIL as isize) {
                self.read_error()?;
                continue;
            }
            ok(&self.prov, "fi_cq_read", r as i64)?;
            for e in &entries[..r as usize] {
                // SAFETY: every operation's context is a live Box<Ctx> held by its `Op` (or, for a receive, by
                // the `Stage`) until its completion.
                let (id, slab) = unsafe {
                    let c = &*(e.op_context as *const Ctx);
                    (c.id, c.slab)
                };
                self.free_slab(slab);
                if id & RECV_BIT != 0 {
                    self.inbox
                        .arrived
                        .push_back(((id & !RECV_BIT) as usize, e.len));
                } else {
                    self.part_done(id, None);
                }
            }
            if (r as usize) < entries.len() || !self.inbox.arrived.is_empty() {
                return Ok(());
            }
        }
        Ok(())
    }

    fn read_error(&mut self) -> Result<()> {
        let mut e = fi::fi_cq_err_entry::default();
        // SAFETY: `cq` is open; `e` is a zeroed error entry (err_data_size 0: the provider's own buffer).
        let r = unsafe { fi::xfi_cq_readerr(self.cq, &mut e, 0) };
        if r < 0 {
            return if r == -(fi::FI_EAGAIN as isize) {
                Ok(())
            } else {
                Err(fab_err(&self.prov, "fi_cq_readerr", r as i64))
            };
        }
        let mut text = [0 as std::ffi::c_char; 256];
        // SAFETY: `cq` is open; `e` is the entry just read; `text` is a 256-byte buffer.
        let p = unsafe {
            fi::xfi_cq_strerror(
                self.cq,
                e.prov_errno,
                e.err_data,
                text.as_mut_ptr(),
                text.len(),
            )
        };
        let prov_text = if p.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated string (in `text` or the provider's static storage).
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        if e.op_context.is_null() {
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "provider {}: a completion error without an operation: {} ({prov_text})",
                    self.prov,
                    strerror(e.err as i64)
                ),
            });
        }
        // SAFETY: as in `poll`, the context is a live Box<Ctx>.
        let (id, slab) = unsafe {
            let c = &*(e.op_context as *const Ctx);
            (c.id, c.slab)
        };
        self.free_slab(slab);
        if id & RECV_BIT != 0 {
            // A receive failed: canceled at close (nothing to do), or a message longer than a buffer (no message
            // of the job is: dropped, and the buffer posted again).
            if e.err.unsigned_abs() != fi::FI_ECANCELED {
                self.inbox.drop_msg(
                    self.me,
                    format_args!("{} ({prov_text})", strerror(e.err as i64)),
                );
                let _ = self.post_recv((id & !RECV_BIT) as usize);
            }
            return Ok(());
        }
        let (pe, what) = self
            .ops
            .get(&id)
            .map_or((usize::MAX, "?"), |o| (o.pe, o.what));
        // Connection-level failures mean the peer is gone; so does the cancellation of an operation: this PE
        // never cancels one, the provider does when the connection it was queued on went away (tcp;ofi_rxm with
        // a connection error, or ENOENT once the peer's endpoint is gone).
        let lost = is_lost(e.err) || e.err.unsigned_abs() == fi::FI_ECANCELED;
        self.lost |= lost;
        let err = if lost {
            let cause = self.lost_first(pe);
            let via = if cause == pe {
                String::new()
            } else {
                format!(", which left after PE {cause} was lost")
            };
            Error::PeerLost {
                pe: cause,
                me: self.me,
                op: format!(
                    "{what} to PE {pe} over fabric provider {}: {} ({prov_text}){via}",
                    self.prov,
                    strerror(e.err as i64)
                ),
            }
        } else {
            Error::Transport {
                transport: "fabric",
                message: format!(
                    "{what} to PE {pe} failed on provider {}: {} ({prov_text})",
                    self.prov,
                    strerror(e.err as i64)
                ),
            }
        };
        self.part_done(id, Some(err));
        Ok(())
    }

    /// One completion of operation `id` (an error, or one of its parts).
    fn part_done(&mut self, id: u64, err: Option<Error>) {
        let Some(op) = self.ops.get_mut(&id) else {
            return;
        };
        if let Some(e) = err {
            self.errors.entry(id).or_insert(e);
            op.then = None;
        }
        op.parts_left = op.parts_left.saturating_sub(1);
        if op.parts_left > 0 {
            return;
        }
        if let Some((region, s)) = op.then.take() {
            // The data was delivered: now the signal (a guard part keeps the operation open while it is posted).
            op.parts_left = 1;
            let r = if op.staged {
                let at = op.amo_at;
                self.stage_amo_msg(id, at, s.sig, 8, s.op, s.value, NO_RESULT)
            } else {
                self.post_amo(id, region, s.sig, 8, s.op, s.value, false)
            };
            if let Err(e) = r {
                self.errors.entry(id).or_insert(e);
            }
            self.release(id);
            return;
        }
        self.finish(id);
    }

    /// Drop the guard part of operation `id`; finish it when nothing else is in flight.
    fn release(&mut self, id: u64) {
        if let Some(op) = self.ops.get_mut(&id) {
            op.parts_left = op.parts_left.saturating_sub(1);
            if op.parts_left == 0 && op.then.is_none() {
                self.finish(id);
            } else if op.parts_left == 0 {
                // Data of zero parts (an empty put-with-signal): the signal goes now.
                op.parts_left = 1;
                self.part_done(id, None);
            }
        }
    }

    fn finish(&mut self, id: u64) {
        let Some(mut op) = self.ops.remove(&id) else {
            return;
        };
        self.per_pe[op.pe] = self.per_pe[op.pe].saturating_sub(1);
        if let Some(m) = op.mr.take() {
            // SAFETY: the registration was made for this operation, which has completed.
            unsafe { fi::xfi_close(&mut (*m.mr).fid) };
        }
        if !self.errors.contains_key(&id) {
            let bytes = bytes_of(&op.buf);
            if let Some(n) = op.get_len {
                self.results.insert(id, bytes[..n].to_vec());
            } else if let Some(at) = op.result_at {
                self.results.insert(id, bytes[at..at + 8].to_vec());
            }
        }
    }

    /// A new operation on `pe` with `words` words of buffer, tracked from now on with one guard part (dropped by
    /// [`Ep::release`] once every part is posted): completions read while it is being posted find it.
    fn start(&mut self, pe: usize, what: &'static str, words: usize) -> u64 {
        let id = self.next;
        self.next += 1;
        let op = Op {
            ctxs: Vec::new(),
            parts_left: 1,
            pe,
            what,
            buf: vec![0u64; words.max(1)],
            get_len: None,
            result_at: None,
            amo_at: 0,
            staged: false,
            mr: None,
            then: None,
        };
        self.per_pe[pe] += 1;
        self.ops.insert(id, op);
        id
    }

    fn op(&mut self, id: u64) -> &mut Op {
        match self.ops.get_mut(&id) {
            Some(o) => o,
            None => unreachable!("an operation being posted holds a guard part"),
        }
    }

    /// Register operation `id`'s buffer when the provider needs local registration; its descriptor.
    fn local_desc(&mut self, id: u64) -> Result<*mut c_void> {
        if !self.mr_local {
            return Ok(std::ptr::null_mut());
        }
        if let Some(m) = &self.op(id).mr {
            return Ok(m.desc);
        }
        let (ptr, len) = {
            let b = &self.op(id).buf;
            (b.as_ptr(), b.len() * 8)
        };
        let mut mr = std::ptr::null_mut();
        // SAFETY: the domain is open; the buffer is the operation's Vec, whose heap block stays put (the Vec is
        // never resized after posting starts) until `finish` closes this registration.
        let r = unsafe {
            fi::xfi_mr_reg(
                self.domain,
                ptr.cast(),
                len,
                (fi::FI_READ | fi::FI_WRITE) as u64,
                0,
                0,
                0,
                &mut mr,
                std::ptr::null_mut(),
            )
        };
        ok(&self.prov, "fi_mr_reg (operation buffer)", r as i64)?;
        // SAFETY: `mr` was just opened.
        let desc = unsafe { fi::xfi_mr_desc(mr) };
        self.op(id).mr = Some(LocalMr { mr, desc });
        Ok(desc)
    }

    /// Post one part of operation `id` with `post` (given its context), retrying while the provider's queue is
    /// full. The part holds bounce buffer `slab` ([`NO_SLAB`]: none) until it completes; a part that cannot be
    /// posted frees it at once.
    fn post(
        &mut self,
        id: u64,
        call: &str,
        slab: u32,
        post: impl FnMut(*mut c_void) -> isize,
    ) -> Result<()> {
        let r = self.post_ctx(id, call, slab, post);
        if r.is_err() {
            self.free_slab(slab);
        }
        r
    }

    fn post_ctx(
        &mut self,
        id: u64,
        call: &str,
        slab: u32,
        mut post: impl FnMut(*mut c_void) -> isize,
    ) -> Result<()> {
        if self.closed.is_some() {
            return Err(self.closed_err());
        }
        let mut ctx = Box::new(Ctx {
            raw: fi::fi_context2::default(),
            id,
            slab,
        });
        let cp: *mut Ctx = &mut *ctx;
        // The clock, and the operation's PE and name, only once the provider pushes back (most posts go at once).
        let mut start: Option<Instant> = None;
        let mut tries = 0u32;
        loop {
            let r = post(cp.cast());
            if r == -(fi::FI_EAGAIN as isize) {
                // The transmit queue is full (or the connection is being made): completions free it.
                let start = *start.get_or_insert_with(Instant::now);
                self.poll()?;
                let (pe, what) = self.pe_what(id);
                self.check_time(start, call, pe)?;
                tries = tries.wrapping_add(1);
                if tries % 256 == 0 {
                    self.alive(what)?;
                }
                std::thread::yield_now();
                continue;
            }
            let o = self.op(id);
            if r < 0 {
                let (pe, what) = (o.pe, o.what);
                return Err(Error::Transport {
                    transport: "fabric",
                    message: format!(
                        "{call} ({what}) to PE {pe} failed on provider {}: {} ({r})",
                        self.prov,
                        strerror(r as i64)
                    ),
                });
            }
            o.ctxs.push(ctx);
            o.parts_left += 1;
            return Ok(());
        }
    }

    /// The PE and the name of operation `id`.
    fn pe_what(&mut self, id: u64) -> (usize, &'static str) {
        let o = self.op(id);
        (o.pe, o.what)
    }

    /// The PE to name when the connection to `pe` broke: the one the bootstrap reports lost when it knows of one.
    /// A PE that died makes the survivors leave, and a slower survivor's connection to one that has already left
    /// breaks too; the job lost the dead PE, not the one that finalized. The bootstrap's news may trail the broken
    /// connection by a moment, so it is asked twice.
    fn lost_first(&self, pe: usize) -> usize {
        for attempt in 0..2 {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if let Err(Error::PeerLost { pe: first, .. }) = self.liveness.check_alive() {
                return first;
            }
        }
        pe
    }

    /// An error when the bootstrap knows of a lost peer: a peer that died may never answer (a provider need not
    /// report operations queued for a connection it cannot make).
    fn alive(&mut self, what: &str) -> Result<()> {
        match self.liveness.check_alive() {
            Ok(()) => Ok(()),
            Err(Error::PeerLost { pe, me, op }) => {
                self.lost = true;
                Err(Error::PeerLost {
                    pe,
                    me,
                    op: format!("{what} over fabric provider {} ({op})", self.prov),
                })
            }
            Err(e) => {
                self.lost = true;
                Err(e)
            }
        }
    }

    fn check_time(&self, start: Instant, what: &str, pe: usize) -> Result<()> {
        if let Some(limit) = self.timeout {
            let waited = start.elapsed();
            if waited > limit {
                let whom = if pe == usize::MAX {
                    String::new()
                } else {
                    format!(" to PE {pe}")
                };
                return Err(Error::Timeout {
                    op: format!("{what}{whom} over fabric provider {}", self.prov),
                    waited,
                    limit,
                    detail: String::new(),
                });
            }
        }
        Ok(())
    }

    /// End the posting of operation `id`: on error its posted parts still complete, but nothing follows them.
    fn posted(&mut self, id: u64, r: Result<()>) -> Result<Ticket> {
        if r.is_err() {
            self.op(id).then = None;
        }
        self.release(id);
        r.map(|()| Ticket(id))
    }

    /// Put `src` into `region` at `off` of PE `pe`, then (once delivered) `signal`. A large source is copied into
    /// bounce buffers (one part up to [`SLAB_MAX`]); a smaller one into the operation's own buffer. (A source in
    /// the registered heap goes through [`Ep::put_direct`] instead when the caller waits for it: blocking puts.)
    fn put(
        &mut self,
        pe: usize,
        region: Region,
        off: usize,
        src: &[u8],
        signal: Option<Signal>,
    ) -> Result<Ticket> {
        let what = if signal.is_some() {
            "put_signal"
        } else {
            "put"
        };
        if src.len() >= SLAB_MIN {
            let id = self.start(pe, what, 3);
            self.op(id).then = signal.map(|s| (region, s));
            let r = self.slab_parts(id, region, off, src);
            return self.posted(id, r);
        }
        let data_words = src.len().div_ceil(8);
        let id = self.start(pe, what, data_words + 3);
        {
            let o = self.op(id);
            bytes_of_mut(&mut o.buf)[..src.len()].copy_from_slice(src);
            o.amo_at = data_words;
            o.then = signal.map(|s| (region, s));
        }
        let r = self.local_desc(id).and_then(|desc| {
            let base = self.op(id).buf.as_ptr() as usize;
            self.write_parts(id, region, off, base, src.len(), desc, NO_SLAB)
        });
        self.posted(id, r)
    }

    /// The local descriptor of `[addr, addr + len)` when it lies in this PE's registered host heap.
    fn heap_desc(&self, addr: usize, len: usize) -> Option<*mut c_void> {
        let h = self.heap?;
        (addr >= h.base && addr.checked_add(len).is_some_and(|e| e <= h.base + h.len))
            .then_some(h.desc)
    }

    /// Put `len` bytes at `addr` of this PE's registered heap (described by `desc`, from [`Ep::heap_desc`]) into
    /// `region` at `off` of PE `pe` without copying them. The provider reads the
    /// heap until the operation completes, so the caller waits for it before the source may change (a window's
    /// non-blocking puts promise to copy: their callers, collectives among them, may reuse the source at once).
    fn put_direct(
        &mut self,
        pe: usize,
        region: Region,
        off: usize,
        addr: usize,
        len: usize,
        desc: *mut c_void,
    ) -> (u64, Result<()>) {
        let id = self.start(pe, "put", 1);
        let r = self.write_parts(id, region, off, addr, len, desc, NO_SLAB);
        (id, self.posted(id, r).map(|_| ()))
    }

    /// The error of every operation once the endpoint was shut down.
    fn closed_err(&self) -> Error {
        Error::Transport {
            transport: "fabric",
            message: format!(
                "the endpoint of PE {} on provider {} was closed after {}; no operation over the fabric is \
                 possible any more",
                self.me,
                self.prov,
                self.closed.as_deref().unwrap_or("an earlier failure")
            ),
        }
    }

    /// Close the endpoint for good (`fi_close`), so that the provider drops every reference to the buffers of
    /// the operations still outstanding (a zero-copy put's source is the caller's memory, which the caller may
    /// free once the put returned, even with an error). `why` is named by every later error ([`Ep::closed_err`]);
    /// the outstanding operations fail with it, and their contexts and buffers are kept until `Drop for Ep`. A
    /// provider that refuses to close the endpoint would go on reading freed memory: the process aborts instead.
    fn shutdown(&mut self, why: String) {
        if self.ep.is_null() || self.closed.is_some() {
            return;
        }
        tracing::error!(pe = self.me, "closing the fabric endpoint: {why}");
        // SAFETY: the endpoint is open (non-null, closed only here or in `Drop`, after which it is null); the
        // objects bound to it (completion queue, address vector, registrations) outlive it.
        let r = unsafe { fi::xfi_close(&mut (*self.ep).fid) };
        if r != 0 {
            eprintln!(
                "xpushmem: PE {}: fi_close of the endpoint failed on provider {} ({}) after {why}: the provider may \
                 still read a buffer its caller is about to free; aborting",
                self.me,
                self.prov,
                strerror(r as i64)
            );
            std::process::abort();
        }
        self.ep = std::ptr::null_mut();
        self.closed = Some(why);
        self.lost = true;
        let err = self.closed_err();
        let ids: Vec<u64> = self.ops.keys().copied().collect();
        for id in ids {
            if let Some(op) = self.ops.remove(&id) {
                self.per_pe[op.pe] = self.per_pe[op.pe].saturating_sub(1);
                self.errors.entry(id).or_insert_with(|| err.clone());
                self.abandoned.push(op);
            }
        }
    }

    /// Copy `src` into bounce buffers and post each as a part of operation `id` (to `off` of `region`): one part
    /// up to [`SLAB_MAX`] bytes.
    fn slab_parts(&mut self, id: u64, region: Region, off: usize, src: &[u8]) -> Result<()> {
        let part = SLAB_MAX.min(self.max_msg);
        for (k, chunk) in src.chunks(part).enumerate() {
            let s = self.take_slab(id, chunk.len())?;
            let (base, desc) = {
                let Some(slab) = self.slabs.bufs.get_mut(s as usize).and_then(|b| b.as_mut())
                else {
                    return Err(Error::State(format!(
                        "fabric: bounce buffer {s} taken for a put to PE {} is not allocated",
                        self.op(id).pe
                    )));
                };
                bytes_of_mut(&mut slab.buf)[..chunk.len()].copy_from_slice(chunk);
                let desc = slab.mr.as_ref().map_or(std::ptr::null_mut(), |m| m.desc);
                (slab.buf.as_ptr() as usize, desc)
            };
            self.write_parts(id, region, off + k * part, base, chunk.len(), desc, s)?;
        }
        Ok(())
    }

    /// A free bounce buffer of at least `len` bytes (at most [`SLAB_MAX`]) for operation `id`: a cached one of
    /// its size, else a new one while [`SLAB_CAP`] allows (dropping cached buffers of other sizes to make room),
    /// else the first one a completion frees, driving progress meanwhile.
    fn take_slab(&mut self, id: u64, len: usize) -> Result<u32> {
        let log = len.max(1).next_power_of_two().trailing_zeros();
        let class = log.saturating_sub(SLAB_MIN_LOG) as usize;
        let size = 1usize << (class as u32 + SLAB_MIN_LOG);
        if self.slabs.free.len() <= class {
            self.slabs.free.resize_with(class + 1, Vec::new);
        }
        let start = Instant::now();
        let mut tries = 0u32;
        loop {
            if let Some(s) = self.slabs.free[class].pop() {
                return Ok(s);
            }
            // Room for a new buffer: drop cached buffers of other sizes while the cap is in the way.
            while self.slabs.bytes + size > SLAB_CAP {
                let Some(s) = self.slabs.free.iter_mut().find_map(|f| f.pop()) else {
                    break;
                };
                self.drop_slab(s);
            }
            if self.slabs.bytes + size <= SLAB_CAP {
                return self.new_slab(class, size);
            }
            // Every byte of the cap is in flight: completions free buffers.
            self.poll()?;
            let (pe, what) = {
                let o = self.op(id);
                (o.pe, o.what)
            };
            self.check_time(start, "waiting for a bounce buffer", pe)?;
            tries = tries.wrapping_add(1);
            if tries % 256 == 0 {
                self.alive(what)?;
            }
            if tries > 64 {
                std::thread::yield_now();
            }
        }
    }

    /// Allocate (and register, with `FI_MR_LOCAL`) a bounce buffer of `size` bytes, size class `class`.
    fn new_slab(&mut self, class: usize, size: usize) -> Result<u32> {
        let buf = vec![0u64; size / 8].into_boxed_slice();
        let mut mr = None;
        if self.mr_local {
            let mut m = std::ptr::null_mut();
            // SAFETY: the domain is open; the buffer's heap block stays in place (a boxed slice, never resized)
            // until `drop_slab` or `Drop for Ep` (after the endpoint) closes this registration and frees it.
            let r = unsafe {
                fi::xfi_mr_reg(
                    self.domain,
                    buf.as_ptr().cast(),
                    size,
                    (fi::FI_READ | fi::FI_WRITE) as u64,
                    0,
                    0,
                    0,
                    &mut m,
                    std::ptr::null_mut(),
                )
            };
            ok(&self.prov, "fi_mr_reg (bounce buffer)", r as i64)?;
            // SAFETY: `m` was just opened.
            let desc = unsafe { fi::xfi_mr_desc(m) };
            mr = Some(LocalMr { mr: m, desc });
        }
        let slab = Slab { buf, class, mr };
        self.slabs.bytes += size;
        if let Some(s) = self.slabs.holes.pop() {
            self.slabs.bufs[s as usize] = Some(slab);
            return Ok(s);
        }
        self.slabs.bufs.push(Some(slab));
        Ok((self.slabs.bufs.len() - 1) as u32)
    }

    /// Release free bounce buffer `s` (its registration, then its memory).
    fn drop_slab(&mut self, s: u32) {
        if let Some(slab) = self.slabs.bufs[s as usize].take() {
            if let Some(m) = slab.mr {
                // SAFETY: the buffer is free (no part in flight reads it); its registration is closed once.
                unsafe { fi::xfi_close(&mut (*m.mr).fid) };
            }
            self.slabs.bytes -= slab.buf.len() * 8;
            self.slabs.holes.push(s);
        }
    }

    /// Give bounce buffer `s` back for reuse (a no-op for [`NO_SLAB`]).
    fn free_slab(&mut self, s: u32) {
        if let Some(Some(slab)) = self.slabs.bufs.get(s as usize) {
            let c = slab.class;
            self.slabs.free[c].push(s);
        }
    }

    /// Post writes of the `len` bytes at local address `base` (described by `desc`) to `off` of `region` as parts
    /// of operation `id`, one per `max_msg` bytes; `slab` is the bounce buffer they read ([`NO_SLAB`]: none; a
    /// bounce buffer's bytes always fit one part).
    #[allow(clippy::too_many_arguments)]
    fn write_parts(
        &mut self,
        id: u64,
        region: Region,
        off: usize,
        base: usize,
        len: usize,
        desc: *mut c_void,
        slab: u32,
    ) -> Result<()> {
        let flags = if self.delivery_complete {
            fi::FI_DELIVERY_COMPLETE as u64
        } else {
            0
        };
        let pe = self.op(id).pe;
        let dest = self.addrs[pe];
        let ep = self.ep;
        let mut done = 0;
        while done < len {
            let n = (len - done).min(self.max_msg);
            let iov = fi::iovec {
                iov_base: (base + done) as *mut c_void,
                iov_len: n,
            };
            let rma = fi::fi_rma_iov {
                addr: region.addr + (off + done) as u64,
                len: n,
                key: region.key,
            };
            let mut d = desc;
            self.post(id, "fi_writemsg", slab, |ctx| {
                let msg = fi::fi_msg_rma {
                    msg_iov: &iov,
                    desc: &mut d,
                    iov_count: 1,
                    addr: dest,
                    rma_iov: &rma,
                    rma_iov_count: 1,
                    context: ctx,
                    data: 0,
                };
                // SAFETY: the endpoint is open; `iov` points into the operation's buffer, a bounce buffer or this
                // PE's registered heap, each alive (and in place) until the part's completion; `msg` and what it
                // points to live across the call.
                unsafe { fi::xfi_writemsg(ep, &msg, flags) }
            })?;
            done += n;
        }
        Ok(())
    }

    /// Post an atomic of operation `id` (its buffer holds operand, compare value and result at words `amo_at`,
    /// `+1`, `+2`).
    #[allow(clippy::too_many_arguments)]
    fn post_amo(
        &mut self,
        id: u64,
        region: Region,
        off: usize,
        width: usize,
        amo: AmoOp,
        operand: u64,
        fetch: bool,
    ) -> Result<()> {
        let dt = dtype(width)?;
        let (fop, form) = fi_op_of(amo, fetch);
        let cond = match amo {
            AmoOp::CompareSwap { cond } => cond,
            _ => 0,
        };
        let (base, dest) = {
            let o = self.op(id);
            let at = o.amo_at;
            // Little-endian: the low `width` bytes of each word are the value of that width.
            o.buf[at] = operand;
            o.buf[at + 1] = cond;
            o.buf[at + 2] = 0;
            o.result_at = (form != Form::Post).then_some((at + 2) * 8);
            // SAFETY: `at + 2` is inside the buffer (every operation allocates three words past its data).
            let base = unsafe { o.buf.as_mut_ptr().add(at) };
            let pe = o.pe;
            (base, self.addrs[pe])
        };
        let desc = self.local_desc(id)?;
        let addr = region.addr + off as u64;
        let key = region.key;
        let ep = self.ep;
        let flags = if self.delivery_complete {
            fi::FI_DELIVERY_COMPLETE as u64
        } else {
            0
        };
        match form {
            Form::Post => {
                let ioc = fi::fi_ioc {
                    addr: base.cast(),
                    count: 1,
                };
                let rioc = fi::fi_rma_ioc {
                    addr,
                    count: 1,
                    key,
                };
                let mut d = desc;
                self.post(id, "fi_atomicmsg", NO_SLAB, |ctx| {
                    let msg = fi::fi_msg_atomic {
                        msg_iov: &ioc,
                        desc: &mut d,
                        iov_count: 1,
                        addr: dest,
                        rma_iov: &rioc,
                        rma_iov_count: 1,
                        datatype: dt,
                        op: fop,
                        context: ctx,
                        data: 0,
                    };
                    // SAFETY: the endpoint is open; the operand lives in the operation's buffer until completion.
                    unsafe { fi::xfi_atomicmsg(ep, &msg, flags) }
                })
            }
            Form::Fetch => self.post(id, "fi_fetch_atomic", NO_SLAB, |ctx| {
                // SAFETY: the endpoint is open; operand and result are words of the operation's buffer, alive
                // until completion.
                unsafe {
                    fi::xfi_fetch_atomic(
                        ep,
                        base.cast(),
                        1,
                        desc,
                        base.add(2).cast(),
                        desc,
                        dest,
                        addr,
                        key,
                        dt,
                        fop,
                        ctx,
                    )
                }
            }),
            Form::Compare => self.post(id, "fi_compare_atomic", NO_SLAB, |ctx| {
                // SAFETY: as for the fetch form; the compare value is the next word.
                unsafe {
                    fi::xfi_compare_atomic(
                        ep,
                        base.cast(),
                        1,
                        desc,
                        base.add(1).cast(),
                        desc,
                        base.add(2).cast(),
                        desc,
                        dest,
                        addr,
                        key,
                        dt,
                        fop,
                        ctx,
                    )
                }
            }),
        }
    }

    /// Start a get of `len` bytes at `off` of `region` of PE `pe`.
    fn get(&mut self, pe: usize, region: Region, off: usize, len: usize) -> Result<Ticket> {
        let id = self.start(pe, "get", len.div_ceil(8));
        self.op(id).get_len = Some(len);
        let r = self.get_parts(id, region, off, len);
        self.posted(id, r)
    }

    fn get_parts(&mut self, id: u64, region: Region, off: usize, len: usize) -> Result<()> {
        let desc = self.local_desc(id)?;
        let (base, src) = {
            let pe = self.op(id).pe;
            (self.op(id).buf.as_mut_ptr() as usize, self.addrs[pe])
        };
        let ep = self.ep;
        let mut done = 0;
        while done < len {
            let n = (len - done).min(self.max_msg);
            let addr = region.addr + (off + done) as u64;
            self.post(id, "fi_read", NO_SLAB, |ctx| {
                // SAFETY: the endpoint is open; the destination lies in the operation's buffer (at least `len`
                // bytes), alive and in place until completion.
                unsafe {
                    fi::xfi_read(
                        ep,
                        (base + done) as *mut c_void,
                        n,
                        desc,
                        src,
                        addr,
                        region.key,
                        ctx,
                    )
                }
            })?;
            done += n;
        }
        Ok(())
    }

    /// Start an atomic (the provider's own; the caller checked that it offers it).
    #[allow(clippy::too_many_arguments)]
    fn amo_start(
        &mut self,
        pe: usize,
        region: Region,
        off: usize,
        width: usize,
        amo: AmoOp,
        operand: u64,
        fetch: bool,
    ) -> Result<Ticket> {
        let id = self.start(pe, "atomic", 3);
        let r = self.post_amo(id, region, off, width, amo, operand, fetch);
        self.posted(id, r)
    }

    /// Post receive buffer `i` of the [`Inbox`] (tagged from [`RECVS`] on).
    fn post_recv(&mut self, i: usize) -> Result<()> {
        let ep = self.ep;
        let prov = self.prov.clone();
        if self.closed.is_some() {
            return Err(self.closed_err());
        }
        let ib = &mut self.inbox;
        let (ptr, len) = (ib.bufs[i].as_mut_ptr(), ib.bufs[i].len() * 8);
        let desc = ib.mrs.get(i).map_or(std::ptr::null_mut(), |m| m.desc);
        let ctx: *mut Ctx = &mut *ib.ctxs[i];
        let start = Instant::now();
        loop {
            // SAFETY: the endpoint is open; the buffer and its context are owned by the Inbox, which lives (in
            // place: boxed contexts, Vec storage never resized) until the endpoint is closed.
            let r = unsafe {
                if i < RECVS {
                    fi::xfi_recv(ep, ptr.cast(), len, desc, ADDR_NOTAVAIL, ctx.cast())
                } else {
                    // Any tag (every bit ignored): what the job never sends is taken in and dropped.
                    fi::xfi_trecv(
                        ep,
                        ptr.cast(),
                        len,
                        desc,
                        ADDR_NOTAVAIL,
                        0,
                        u64::MAX,
                        ctx.cast(),
                    )
                }
            };
            if r == -(fi::FI_EAGAIN as isize) {
                // Completions free the queue; read them without serving (serving may post again).
                self.poll_cq()?;
                self.check_time(start, "fi_recv", usize::MAX)?;
                std::thread::yield_now();
                continue;
            }
            return ok(&prov, "fi_recv (receive buffer)", r as i64);
        }
    }

    /// Handle the messages received so far and post their buffers again (never re-entered: replies it posts
    /// may poll); how many.
    fn serve(&mut self) -> usize {
        if self.inbox.serving || self.inbox.arrived.is_empty() {
            return 0;
        }
        self.inbox.serving = true;
        let mut handled = 0;
        while let Some((i, len)) = self.inbox.arrived.pop_front() {
            handled += 1;
            if i >= RECVS {
                self.inbox
                    .drop_msg(self.me, format_args!("a tagged message of {len} bytes"));
            } else {
                let buf = std::mem::take(&mut self.inbox.bufs[i]);
                self.handle(&buf, len);
                self.inbox.bufs[i] = buf;
            }
            if let Err(e) = self.post_recv(i) {
                tracing::error!(pe = self.me, "re-posting a receive buffer failed: {e}");
            }
        }
        self.inbox.serving = false;
        handled
    }

    /// Whether a received message is one of this job's: it carries this PE's token, a whole header, a sender
    /// that is a PE this transport reaches, a known kind, and (a put) as many payload bytes as it announces (a
    /// reply) names one of this PE's staged operations on that sender. Checked before any other field is used.
    fn authentic(&self, m: &Msg, len: usize) -> std::result::Result<(), String> {
        if !token_eq(&m.tok, &self.inbox.token) {
            return Err(format!("wrong token, {len} bytes"));
        }
        let from = usize::try_from(m.from).unwrap_or(usize::MAX);
        if from >= self.addrs.len() || self.addrs[from] == ADDR_NOTAVAIL {
            return Err(format!(
                "sender {} is not a PE this transport reaches",
                m.from
            ));
        }
        let payload = len - HDR_WORDS * 8;
        let ok = match m.kind {
            MSG_PUT => m.len == payload as u64,
            MSG_GET | MSG_AMO => payload == 0,
            MSG_REPLY => self
                .ops
                .get(&m.id)
                .is_some_and(|o| o.staged && o.pe == from && payload as u64 == m.len),
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "kind {} of {len} bytes from PE {from} does not match its header",
                m.kind
            ))
        }
    }

    /// One received message: a request on this PE's device heap (applied, then answered) or a reply to one of
    /// this PE's operations; anything else is dropped ([`Ep::authentic`]).
    fn handle(&mut self, buf: &[u64], len: usize) {
        if len < HDR_WORDS * 8 || len > buf.len() * 8 {
            self.inbox
                .drop_msg(self.me, format_args!("a message of {len} bytes"));
            return;
        }
        let m = Msg::of(&buf[..HDR_WORDS]);
        if let Err(why) = self.authentic(&m, len) {
            self.inbox.drop_msg(self.me, format_args!("{why}"));
            return;
        }
        let payload = &bytes_of(&buf[HDR_WORDS..])[..(len - HDR_WORDS * 8).min(STAGE_CHUNK)];
        if m.kind == MSG_REPLY {
            let Some(op) = self.ops.get_mut(&m.id) else {
                return;
            };
            if m.operand != 0 {
                let pe = op.pe;
                let what = op.what;
                let e = Error::Transport {
                    transport: "fabric",
                    message: format!(
                        "{what} on PE {pe}'s device heap (staged, provider {}): {}",
                        self.prov,
                        String::from_utf8_lossy(payload)
                    ),
                };
                self.part_done(m.id, Some(e));
                return;
            }
            if m.op != NO_RESULT {
                let b = bytes_of_mut(&mut op.buf);
                let at = m.op as usize;
                let n = (m.len as usize).min(payload.len());
                if at.checked_add(n).is_some_and(|e| e <= b.len()) {
                    b[at..at + n].copy_from_slice(&payload[..n]);
                }
            }
            self.part_done(m.id, None);
            return;
        }
        let from = m.from as usize;
        let mut result = Vec::new();
        let r = self.apply(&m, payload, &mut result);
        let (status, data) = match r {
            Ok(()) => (0, result),
            Err(e) => (1, e.to_string().into_bytes()),
        };
        let reply = Msg {
            kind: MSG_REPLY,
            from: self.me as u64,
            id: m.id,
            off: 0,
            len: data.len() as u64,
            operand: status,
            cond: 0,
            op: m.op,
            tok: self.tokens[from],
        };
        let id = self.start(from, "staged reply", HDR_WORDS + data.len().div_ceil(8));
        {
            let o = self.op(id);
            o.buf[..HDR_WORDS].copy_from_slice(&reply.words());
            bytes_of_mut(&mut o.buf[HDR_WORDS..])[..data.len()].copy_from_slice(&data);
        }
        let r = self.send_part(id, 0, HDR_WORDS * 8 + data.len(), false);
        if let Err(e) = self.posted(id, r) {
            tracing::error!(pe = self.me, peer = from, "a staging reply failed: {e}");
        }
    }

    /// Apply a staging request to this PE's device heap (through the device's service lane); a get's bytes or an
    /// atomic's previous value go to `out`.
    fn apply(&mut self, m: &Msg, payload: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let st = self.stage.as_ref().ok_or_else(|| Error::Transport {
            transport: "fabric",
            message: "a staging request reached a PE without a staged device heap".into(),
        })?;
        let (off, len) = (m.off as usize, m.len as usize);
        let range = |l: usize| check_access("fabric", "staged access", off, l, 1, st.len);
        match m.kind {
            MSG_PUT => {
                if len != payload.len() {
                    return Err(Error::Transport {
                        transport: "fabric",
                        message: format!("a staged put of {len} bytes carried {}", payload.len()),
                    });
                }
                range(len)?;
                // SAFETY: [off, off + len) lies in this PE's device heap (checked); the payload is host memory.
                unsafe {
                    st.rt
                        .service_copy((st.base + off) as *mut u8, payload.as_ptr(), len)
                }
            }
            MSG_GET => {
                range(len)?;
                out.resize(len, 0);
                // SAFETY: as for puts, in the other direction into `out` (len bytes).
                unsafe {
                    st.rt
                        .service_copy(out.as_mut_ptr(), (st.base + off) as *const u8, len)
                }
            }
            MSG_AMO => {
                // An atomic's `len` word is its code (width in the high half).
                let (op, width) = amo_of(m.len, m.cond).ok_or_else(|| Error::Transport {
                    transport: "fabric",
                    message: format!("a staged atomic with code {:#x}", m.len),
                })?;
                check_access("fabric", "staged atomic", off, width, width, st.len)?;
                let old = st
                    .rt
                    .service_amo((st.base + off) as *mut u8, width, op, m.operand)?;
                out.extend_from_slice(&old.to_le_bytes());
                Ok(())
            }
            k => Err(Error::Transport {
                transport: "fabric",
                message: format!("a staging message of unknown kind {k}"),
            }),
        }
    }

    /// Send `bytes` bytes of operation `id`'s buffer from word `at` as one message to its PE; with `reply`, the
    /// operation also waits for the target's answer.
    fn send_part(&mut self, id: u64, at: usize, bytes: usize, reply: bool) -> Result<()> {
        let desc = self.local_desc(id)?;
        let (ptr, pe) = {
            let o = self.op(id);
            // SAFETY: `at` words lie inside the buffer (the callers lay messages out inside it).
            (unsafe { o.buf.as_ptr().add(at) }, o.pe)
        };
        let dest = self.addrs[pe];
        let ep = self.ep;
        self.post(id, "fi_send", NO_SLAB, |ctx| {
            // SAFETY: the endpoint is open; the message lies in the operation's buffer, alive and in place until
            // its completion.
            unsafe { fi::xfi_send(ep, ptr.cast(), bytes, desc, dest, ctx) }
        })?;
        if reply {
            self.op(id).parts_left += 1;
        }
        Ok(())
    }

    /// A put (then, once delivered, `signal`) to PE `pe`'s staged device heap: one message per chunk, each
    /// answered once the target has copied it into the heap.
    fn stage_put(
        &mut self,
        pe: usize,
        region: Region,
        off: usize,
        src: &[u8],
        signal: Option<Signal>,
    ) -> Result<Ticket> {
        let what = if signal.is_some() {
            "put_signal"
        } else {
            "put"
        };
        let chunks = src.len().div_ceil(STAGE_CHUNK).max(1);
        let words = chunks * HDR_WORDS + src.len().div_ceil(8) + chunks + HDR_WORDS;
        let id = self.start(pe, what, words);
        let me = self.me as u64;
        let tok = self.tokens[pe];
        let mut at = 0;
        let mut layout = Vec::with_capacity(chunks);
        {
            let o = self.op(id);
            o.staged = true;
            o.then = signal.map(|s| (region, s));
            for (c, part) in src.chunks(STAGE_CHUNK).enumerate() {
                let m = Msg {
                    kind: MSG_PUT,
                    from: me,
                    id,
                    off: (off + c * STAGE_CHUNK) as u64,
                    len: part.len() as u64,
                    operand: 0,
                    cond: 0,
                    op: NO_RESULT,
                    tok,
                };
                o.buf[at..at + HDR_WORDS].copy_from_slice(&m.words());
                bytes_of_mut(&mut o.buf[at + HDR_WORDS..])[..part.len()].copy_from_slice(part);
                layout.push((at, HDR_WORDS * 8 + part.len()));
                at += HDR_WORDS + part.len().div_ceil(8);
            }
            o.amo_at = at;
        }
        let mut r = Ok(());
        for (w, bytes) in layout {
            r = self.send_part(id, w, bytes, true);
            if r.is_err() {
                break;
            }
        }
        self.posted(id, r)
    }

    /// A get of `len` bytes at `off` of PE `pe`'s staged device heap: the replies carry the bytes.
    fn stage_get(&mut self, pe: usize, off: usize, len: usize) -> Result<Ticket> {
        let chunks = len.div_ceil(STAGE_CHUNK);
        let data_words = len.div_ceil(8);
        let id = self.start(pe, "get", data_words + chunks * HDR_WORDS);
        let me = self.me as u64;
        let tok = self.tokens[pe];
        {
            let o = self.op(id);
            o.staged = true;
            o.get_len = Some(len);
            for c in 0..chunks {
                let n = (len - c * STAGE_CHUNK).min(STAGE_CHUNK);
                let m = Msg {
                    kind: MSG_GET,
                    from: me,
                    id,
                    off: (off + c * STAGE_CHUNK) as u64,
                    len: n as u64,
                    operand: 0,
                    cond: 0,
                    op: (c * STAGE_CHUNK) as u64,
                    tok,
                };
                let at = data_words + c * HDR_WORDS;
                o.buf[at..at + HDR_WORDS].copy_from_slice(&m.words());
            }
        }
        let mut r = Ok(());
        for c in 0..chunks {
            r = self.send_part(id, data_words + c * HDR_WORDS, HDR_WORDS * 8, true);
            if r.is_err() {
                break;
            }
        }
        self.posted(id, r)
    }

    /// An atomic on PE `pe`'s staged device heap; the reply carries the previous value.
    fn stage_amo(
        &mut self,
        pe: usize,
        off: usize,
        width: usize,
        op: AmoOp,
        operand: u64,
    ) -> Result<Ticket> {
        let id = self.start(pe, "atomic", HDR_WORDS + 1);
        self.op(id).staged = true;
        self.op(id).result_at = Some(HDR_WORDS * 8);
        let r = self.stage_amo_msg(id, 0, off, width, op, operand, (HDR_WORDS * 8) as u64);
        self.posted(id, r)
    }

    /// Lay out (at word `at` of operation `id`'s buffer) and send an atomic message; the reply's value goes to
    /// byte `result` of the buffer ([`NO_RESULT`]: nowhere).
    #[allow(clippy::too_many_arguments)]
    fn stage_amo_msg(
        &mut self,
        id: u64,
        at: usize,
        off: usize,
        width: usize,
        op: AmoOp,
        operand: u64,
        result: u64,
    ) -> Result<()> {
        let (code, cond) = amo_code(op, width);
        let pe = self.op(id).pe;
        let m = Msg {
            kind: MSG_AMO,
            from: self.me as u64,
            id,
            off: off as u64,
            len: code,
            operand,
            cond,
            op: result,
            tok: self.tokens[pe],
        };
        self.op(id).buf[at..at + HDR_WORDS].copy_from_slice(&m.words());
        self.send_part(id, at, HDR_WORDS * 8, true)
    }

    fn offers(&self, width: usize, amo: AmoOp, fetch: bool) -> bool {
        let (fop, form) = fi_op_of(amo, fetch);
        self.atomics.contains(&(width, fop, form))
    }
}

impl Drop for Ep {
    fn drop(&mut self) {
        // Close in reverse order of opening; outstanding operations' buffers are freed after their endpoint.
        // SAFETY: each object was opened in `connect` and is closed once, here, after the endpoint that uses it.
        unsafe {
            if !self.ep.is_null() {
                fi::xfi_close(&mut (*self.ep).fid);
            }
            for op in self.ops.values_mut().chain(self.abandoned.iter_mut()) {
                if let Some(m) = op.mr.take() {
                    fi::xfi_close(&mut (*m.mr).fid);
                }
            }
            for &mr in &self.own {
                fi::xfi_close(&mut (*mr).fid);
            }
            for slab in self.slabs.bufs.iter_mut().flatten() {
                if let Some(m) = slab.mr.take() {
                    fi::xfi_close(&mut (*m.mr).fid);
                }
            }
            for m in self.inbox.mrs.drain(..) {
                fi::xfi_close(&mut (*m.mr).fid);
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

impl Fabric {
    /// Wait (driving progress) until `done` holds, at most the configured timeout.
    fn wait(&self, what: &str, pe: usize, mut done: impl FnMut(&Ep) -> bool) -> Result<()> {
        // The clock is first read at the 64th poll (some 30 us in): most waits end before it.
        let mut start: Option<Instant> = None;
        let mut i = 0u32;
        loop {
            {
                let mut ep = lock(&self.ep);
                if ep.closed.is_some() {
                    return Err(ep.closed_err());
                }
                // Done already (a quiet after blocking operations, say): no poll, which costs a system call on a
                // software provider.
                if i == 0 && done(&ep) {
                    return Ok(());
                }
                ep.poll()?;
                if done(&ep) {
                    return Ok(());
                }
                if i % 64 == 63 {
                    ep.check_time(*start.get_or_insert_with(Instant::now), what, pe)?;
                }
            }
            if i % 256 == 255 {
                lock(&self.ep).alive(what)?;
            }
            i = i.wrapping_add(1);
            // The peer's answer arrives only through this PE's polls (manual progress): a sleep here adds its
            // length (plus the timer's slack) to every operation; yielding keeps polling and still lets another
            // process on this core run.
            if i < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Complete this PE's outstanding operations to `pe` (a read of the same bytes then sees them).
    fn flush_pe(&self, pe: usize) -> Result<()> {
        self.wait("completing earlier operations", pe, |ep| ep.per_pe[pe] == 0)?;
        self.take_errors(|_| true)
    }

    /// The first stored error of the operations `pick` selects (by id), removing them all.
    fn take_errors(&self, pick: impl Fn(u64) -> bool) -> Result<()> {
        let mut ep = lock(&self.ep);
        let ids: Vec<u64> = ep.errors.keys().copied().filter(|&i| pick(i)).collect();
        let mut first: Option<(u64, Error)> = None;
        for id in ids {
            if let Some(e) = ep.errors.remove(&id) {
                if first.as_ref().is_none_or(|(f, _)| id < *f) {
                    first = Some((id, e));
                }
            }
        }
        first.map_or(Ok(()), |(_, e)| Err(e))
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
        let t = lock(&self.ep).amo_start(pe, region, off, width, op, operand, true)?;
        let bytes = self.complete(t)?.unwrap_or_default();
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
            let mut idle = Duration::from_micros(1);
            while !stop.load(Ordering::Relaxed) {
                let busy = {
                    let mut ep = lock(&ep);
                    let _ = ep.poll();
                    !ep.ops.is_empty()
                };
                idle = if busy {
                    Duration::from_micros(1)
                } else {
                    (idle * 2).min(Duration::from_micros(100))
                };
                std::thread::sleep(idle);
            }
        }));
    }
}

impl Fabric {
    /// Another window onto PE `pe`'s user heap (for the device proxy); `None` when the fabric does not reach it.
    pub(crate) fn heap_window(self: &Arc<Self>, pe: usize) -> Option<Box<dyn Window>> {
        let region = (*self.heaps.get(pe)?)?;
        Some(Box::new(FabricWindow {
            t: Arc::clone(self),
            pe,
            region,
        }))
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
    fn fence(&self) -> Result<()> {
        self.quiet()
    }
    fn quiet(&self) -> Result<()> {
        self.wait("quiet", usize::MAX, |ep| ep.ops.is_empty())?;
        self.take_errors(|_| true)
    }
    fn progress(&self) -> Result<()> {
        lock(&self.ep).poll()
    }
    fn complete(&self, t: Ticket) -> Result<Option<Vec<u8>>> {
        let pe = lock(&self.ep).ops.get(&t.0).map_or(usize::MAX, |o| o.pe);
        self.wait("completing an operation", pe, |ep| {
            !ep.ops.contains_key(&t.0)
        })?;
        let mut ep = lock(&self.ep);
        if let Some(e) = ep.errors.remove(&t.0) {
            return Err(e);
        }
        Ok(ep.results.remove(&t.0))
    }
    fn is_complete(&self, t: Ticket) -> bool {
        !lock(&self.ep).ops.contains_key(&t.0)
    }
    fn lost_peer(&self) -> bool {
        let ep = lock(&self.ep);
        // A closed endpoint cuts this PE off the fabric like a lost peer: finalize skips its barriers.
        ep.lost || ep.closed.is_some()
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
}

/// A window onto one region (runtime words or user heap) of a PE reached through the fabric.
#[derive(Debug)]
struct FabricWindow {
    t: Arc<Fabric>,
    pe: usize,
    region: Region,
}

impl FabricWindow {
    fn check(&self, what: &str, off: usize, len: usize, align: usize) -> Result<()> {
        check_access("fabric", what, off, len, align, self.region.len as usize)
    }

    /// How a blocking put of `len` bytes at `addr` goes without a copy, if it can: `Some((desc, private))` with
    /// the local descriptor of the source and whether it is private memory (not in this PE's registered heap).
    /// Only puts of at least [`ZERO_COPY_MIN`] bytes to a registered (not staged) region; a private source only
    /// when the provider reads unregistered memory (no `FI_MR_LOCAL`, no `FI_MR_ENDPOINT`: the endpoint can then
    /// be closed on its own, see [`FabricWindow::write_direct`]).
    fn direct(&self, ep: &Ep, addr: usize, len: usize) -> Option<(*mut c_void, bool)> {
        if len < ZERO_COPY_MIN || self.region.staged || ep.closed.is_some() {
            return None;
        }
        if let Some(desc) = ep.heap_desc(addr, len) {
            return Some((desc, false));
        }
        (!ep.mr_local && !ep.mr_endpoint).then_some((std::ptr::null_mut(), true))
    }

    /// A blocking put of `len` bytes at `addr` (checked against the window by the caller) without a copy when
    /// [`FabricWindow::direct`] allows one: the provider reads the source in place, and the call returns once
    /// the write completed (delivered, with `FI_DELIVERY_COMPLETE`), when the source may be reused. `Ok(false)`
    /// when the source needs a copy.
    ///
    /// A private source is the caller's memory, which it may free as soon as this returns, error or not. When
    /// the wait ends while the write is still outstanding (the timeout, a lost peer, a failed completion-queue
    /// read), the provider could still read it afterwards, and only closing the endpoint stops that: the
    /// endpoint is shut down ([`Ep::shutdown`]) before the error returns, and every later operation of this
    /// transport fails naming why. A write the provider completed with an error needs none of that.
    fn write_direct(&self, off: usize, addr: usize, len: usize) -> Result<bool> {
        let mut ep = lock(&self.t.ep);
        let Some((desc, private)) = self.direct(&ep, addr, len) else {
            return Ok(false);
        };
        let what = if private {
            "put (zero-copy from private memory)"
        } else {
            "put (zero-copy from the heap)"
        };
        let (id, posted) = ep.put_direct(self.pe, self.region, off, addr, len, desc);
        drop(ep);
        let waited =
            posted.and_then(|()| self.t.wait(what, self.pe, |ep| !ep.ops.contains_key(&id)));
        let mut ep = lock(&self.t.ep);
        match waited {
            // Still outstanding: the provider may read the source after this returns.
            Err(e) if private && ep.ops.contains_key(&id) => {
                ep.shutdown(format!(
                    "a zero-copy put of {len} bytes to PE {} failed while the provider still read the caller's \
                     buffer ({e})",
                    self.pe
                ));
                return Err(match e {
                    Error::Timeout {
                        op,
                        waited,
                        limit,
                        detail,
                    } => Error::Timeout {
                        op,
                        waited,
                        limit,
                        detail: format!(
                            "{detail}; the fabric endpoint was closed so that the provider no longer reads the \
                             source, and every later fabric operation of this PE fails"
                        ),
                    },
                    e => e,
                });
            }
            // The heap is the runtime's registered memory, not the caller's: an outstanding write from it
            // completes (or fails) later, as a non-blocking put's would.
            Err(e) if ep.ops.contains_key(&id) => return Err(e),
            _ => {}
        }
        if let Some(e) = ep.errors.remove(&id) {
            return Err(e);
        }
        waited.map(|()| true)
    }
}

impl Window for FabricWindow {
    fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        self.check("put", off, src.len(), 1)?;
        // A large source is written in place (and waited for) rather than copied, from this PE's heap or, when
        // the provider reads unregistered memory, from private memory. (A smaller one does not take the lock twice.)
        if src.len() >= ZERO_COPY_MIN && self.write_direct(off, src.as_ptr() as usize, src.len())? {
            return Ok(());
        }
        self.put_nbi(off, src).map(|_| ())
    }
    fn copy_from(&self, off: usize, src: &dyn Window, src_off: usize, len: usize) -> Result<()> {
        if let Some(t) = self.copy_from_nbi(off, src, src_off, len)? {
            self.t.complete(t)?;
        }
        Ok(())
    }
    fn copy_from_nbi(
        &self,
        off: usize,
        src: &dyn Window,
        src_off: usize,
        len: usize,
    ) -> Result<Option<Ticket>> {
        self.check("put", off, len, 1)?;
        check_access("fabric", "put (source)", src_off, len, 1, src.len())?;
        // This PE's registered heap as the source (put_sym): posted from it without a copy, and the blocking form
        // waits for the ticket (the heap, unlike a caller's buffer, stays valid whatever happens to a handle).
        let base = src.base();
        if src.host_accessible() && !base.is_null() {
            let addr = base as usize + src_off;
            let mut ep = lock(&self.t.ep);
            if let Some((desc, false)) = self.direct(&ep, addr, len) {
                let (id, posted) = ep.put_direct(self.pe, self.region, off, addr, len, desc);
                return posted.map(|()| Some(Ticket(id)));
            }
        }
        let mut buf = vec![0u8; len];
        src.read(src_off, &mut buf)?;
        self.write(off, &buf).map(|()| None)
    }
    fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        if let Some(t) = self.get_nbi(off, dst)? {
            let b = self.t.complete(t)?.unwrap_or_default();
            if b.len() != dst.len() {
                return Err(Error::Transport {
                    transport: "fabric",
                    message: format!(
                        "a get of {} bytes from PE {} completed with {}",
                        dst.len(),
                        self.pe,
                        b.len()
                    ),
                });
            }
            dst.copy_from_slice(&b);
        }
        Ok(())
    }
    fn put_nbi(&self, off: usize, src: &[u8]) -> Result<Option<Ticket>> {
        self.check("put", off, src.len(), 1)?;
        if src.is_empty() {
            return Ok(None);
        }
        let mut ep = lock(&self.t.ep);
        if self.region.staged {
            return ep.stage_put(self.pe, self.region, off, src, None).map(Some);
        }
        ep.put(self.pe, self.region, off, src, None).map(Some)
    }
    fn get_nbi(&self, off: usize, dst: &mut [u8]) -> Result<Option<Ticket>> {
        self.check("get", off, dst.len(), 1)?;
        if dst.is_empty() {
            return Ok(None);
        }
        self.t.flush_pe(self.pe)?;
        let mut ep = lock(&self.t.ep);
        if self.region.staged {
            return ep.stage_get(self.pe, off, dst.len()).map(Some);
        }
        ep.get(self.pe, self.region, off, dst.len()).map(Some)
    }
    fn put_signal_nbi(
        &self,
        off: usize,
        src: &[u8],
        sig: usize,
        op: AmoOp,
        value: u64,
    ) -> Result<Option<Ticket>> {
        self.check("put_signal data", off, src.len(), 1)?;
        self.check("put_signal signal", sig, 8, 8)?;
        let s = Signal { sig, op, value };
        // A large source goes without a copy: the data is delivered (and waited for) first, so the signal needs
        // no ordering with it (FI_DELIVERY_COMPLETE: the data is visible at the target when the write completes).
        if src.len() >= SIGNAL_DIRECT_MIN
            && lock(&self.t.ep).offers(8, op, false)
            && self.write_direct(off, src.as_ptr() as usize, src.len())?
        {
            return self.amo_post(sig, 8, op, value).map(|()| None);
        }
        let mut ep = lock(&self.t.ep);
        if self.region.staged {
            return ep
                .stage_put(self.pe, self.region, off, src, Some(s))
                .map(Some);
        }
        if !ep.offers(8, op, false) {
            drop(ep);
            // The provider lacks the signal's atomic: deliver the data, then emulate.
            if let Some(t) = self.put_nbi(off, src)? {
                self.t.complete(t)?;
            }
            self.amo(sig, 8, op, value)?;
            return Ok(None);
        }
        ep.put(self.pe, self.region, off, src, Some(s)).map(Some)
    }
    fn amo_post(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<()> {
        self.check("atomic", off, width, width)?;
        if op == AmoOp::Fetch {
            return Ok(());
        }
        let mut ep = lock(&self.t.ep);
        if self.region.staged {
            return ep.stage_amo(self.pe, off, width, op, operand).map(|_| ());
        }
        if matches!(op, AmoOp::CompareSwap { .. }) || !ep.offers(width, op, false) {
            drop(ep);
            return self.amo(off, width, op, operand).map(|_| ());
        }
        ep.amo_start(self.pe, self.region, off, width, op, operand, false)
            .map(|_| ())
    }
    fn len(&self) -> usize {
        self.region.len as usize
    }
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        self.write(off, &vec![byte; len])
    }
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        self.check("atomic", off, width, width)?;
        let old = if self.region.staged {
            self.t.flush_pe(self.pe)?;
            let t = lock(&self.t.ep).stage_amo(self.pe, off, width, op, operand)?;
            let bytes = self.t.complete(t)?.unwrap_or_default();
            let mut w = [0u8; 8];
            w[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
            let v = u64::from_le_bytes(w);
            if width == 4 {
                v & u32::MAX as u64
            } else {
                v
            }
        } else {
            self.t
                .fetch_amo(self.pe, self.region, off, width, op, operand)?
        };
        Ok(if op == AmoOp::Set { 0 } else { old })
    }
    fn base(&self) -> *mut u8 {
        std::ptr::null_mut()
    }
    fn host_accessible(&self) -> bool {
        false
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
}

/// Windows per PE (`None` where not reached).
pub(crate) type Windows = Vec<Option<Box<dyn Window>>>;

/// The providers libfabric lists for RDM endpoints with RMA and atomics: (provider, domain, fabric) names.
pub fn providers() -> Result<Vec<(String, String, String)>> {
    let list = getinfo(None, false, Want::Host, None)?;
    let mut out = Vec::new();
    let mut p = list;
    while !p.is_null() {
        // SAFETY: a node of the list fi_getinfo returned; its attribute pointers are set by libfabric.
        unsafe {
            let name = |s: *const std::ffi::c_char| {
                if s.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(s).to_string_lossy().into_owned()
                }
            };
            out.push((
                name((*(*p).fabric_attr).prov_name),
                name((*(*p).domain_attr).name),
                name((*(*p).fabric_attr).name),
            ));
            p = (*p).next;
        }
    }
    if !list.is_null() {
        // SAFETY: the list came from fi_getinfo and is freed once.
        unsafe { fi::xfi_freeinfo(list) };
    }
    let mut seen = HashSet::new();
    out.retain(|t| seen.insert(t.clone()));
    Ok(out)
}

/// What the endpoint needs beyond RMA, atomics and two-sided messages (every PE receives: [`Inbox`]) on host
/// memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Nothing more (host heaps, and device heaps through the staging path).
    Host,
    /// `FI_HMEM`: RMA and atomics on registered Level Zero memory.
    Hmem,
}

/// Where the endpoint listens: `XPUSHMEM_FABRIC_ADDR`, else the address the bootstrap used.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Bind {
    /// The provider's first interface (a bootstrap that knows no address: MPI).
    Any,
    /// This address (`fi_getinfo`'s node with `FI_SOURCE`).
    Addr(std::net::IpAddr),
    /// The interface of this name (the provider's domain of that name: `eth0`, `lo`, `mlx5_0`...).
    Iface(String),
}

impl Bind {
    /// The setting's value, else the bootstrap's address.
    fn of(setting: Option<&str>, boot: Option<std::net::IpAddr>) -> Bind {
        match setting.map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) => match v.trim_start_matches('[').trim_end_matches(']').parse() {
                Ok(ip) => Bind::Addr(ip),
                Err(_) => Bind::Iface(v.to_string()),
            },
            None => boot.map_or(Bind::Any, Bind::Addr),
        }
    }
}

/// Sets [`RXM_MSG_RX_SIZE_VAR`] to [`RXM_MSG_RX_SIZE`] unless the user set it, once, before libfabric is first
/// asked for providers (`ofi_rxm` reads it when libfabric loads it, at the first `fi_getinfo`). A user's own value
/// is kept (logged when it exceeds [`RXM_MSG_RX_SIZE`]: a flood may then be queued in rxm's memory again).
fn bound_rxm_receives() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| match std::env::var(RXM_MSG_RX_SIZE_VAR) {
        Ok(v) => {
            if v.trim().parse::<usize>().map_or(true, |n| n > RXM_MSG_RX_SIZE) {
                tracing::warn!(
                    "fabric: {RXM_MSG_RX_SIZE_VAR}={v} (set by the user) exceeds {RXM_MSG_RX_SIZE}, half the \
                     receive buffers of each kind this PE keeps posted: messages arriving faster than this PE \
                     drains them (an outsider's flood) can be queued in ofi_rxm's memory without bound"
                );
            }
        }
        Err(_) => std::env::set_var(RXM_MSG_RX_SIZE_VAR, RXM_MSG_RX_SIZE.to_string()),
    });
}

/// `fi_getinfo` for what this transport needs; `provider` filters by name; `delivery` asks for
/// `FI_DELIVERY_COMPLETE`; `want` adds [`Want::Hmem`] (registration of Level Zero memory, `FI_HMEM`); `source`
/// is the local address to listen on. A null list when nothing matches.
fn getinfo(
    provider: Option<&str>,
    delivery: bool,
    want: Want,
    source: Option<std::net::IpAddr>,
) -> Result<*mut fi::fi_info> {
    bound_rxm_receives();
    fi::load().map_err(|e| Error::Transport {
        transport: "fabric",
        message: format!("cannot load libfabric: {e}"),
    })?;
    // SAFETY: hints are allocated by libfabric and filled field by field; the provider name is a CString we give
    // back (reset to null) before fi_freeinfo, which would otherwise free it with libc's free.
    unsafe {
        let hints = fi::xfi_allocinfo();
        if hints.is_null() {
            return Err(fab_err("-", "fi_allocinfo", -(fi::FI_ENOMEM as i64)));
        }
        (*hints).caps = (fi::FI_RMA
            | fi::FI_ATOMIC
            | fi::FI_READ
            | fi::FI_WRITE
            | fi::FI_REMOTE_READ
            | fi::FI_REMOTE_WRITE
            | fi::FI_MSG
            | fi::FI_TAGGED
            | fi::FI_SEND
            | fi::FI_RECV) as u64;
        if want == Want::Hmem {
            (*hints).caps |= fi::FI_HMEM;
        }
        (*hints).mode = fi::FI_CONTEXT | fi::FI_CONTEXT2;
        (*(*hints).ep_attr).type_ = fi::FI_EP_RDM;
        (*(*hints).domain_attr).mr_mode = (fi::FI_MR_LOCAL
            | fi::FI_MR_VIRT_ADDR
            | fi::FI_MR_ALLOCATED
            | fi::FI_MR_PROV_KEY
            | fi::FI_MR_ENDPOINT
            | if want == Want::Hmem {
                fi::FI_MR_HMEM
            } else {
                0
            }) as i32;
        (*(*hints).domain_attr).threading = fi::FI_THREAD_DOMAIN;
        if delivery {
            (*(*hints).tx_attr).op_flags = fi::FI_DELIVERY_COMPLETE as u64;
        }
        let name = provider.map(|p| CString::new(p).unwrap_or_default());
        if let Some(n) = &name {
            (*(*hints).fabric_attr).prov_name = n.as_ptr().cast_mut();
        }
        let node = source.map(|ip| CString::new(ip.to_string()).unwrap_or_default());
        let mut info = std::ptr::null_mut();
        let r = fi::xfi_getinfo(
            fi::xfi_header_version(),
            node.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
            std::ptr::null(),
            if node.is_some() { fi::FI_SOURCE } else { 0 },
            hints,
            &mut info,
        );
        (*(*hints).fabric_attr).prov_name = std::ptr::null_mut();
        fi::xfi_freeinfo(hints);
        if r == -(fi::FI_ENODATA as i32) {
            return Ok(std::ptr::null_mut());
        }
        ok(provider.unwrap_or("(any)"), "fi_getinfo", r as i64)?;
        Ok(info)
    }
}

/// Set up the transport (collective over all PEs): endpoint, registrations, the exchange of names and keys,
/// and windows onto the reached PEs' runtime words and user heaps.
pub(crate) fn connect(a: FabricArgs<'_>) -> Result<(Arc<Fabric>, Windows, Windows)> {
    let n = a.reach.len();
    let (ep, mine) = open(&a)?;
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
        if prov != ep.prov {
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "PE {pe} chose provider {prov}, PE {} chose {}: set XPUSHMEM_FABRIC_PROVIDER the same on every PE",
                    a.me, ep.prov
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
        regions.push((sys, heap));
    }
    for pe in (0..n).filter(|&p| a.reach[p]) {
        let mut addr = ADDR_NOTAVAIL;
        // SAFETY: the AV is open; `names[pe]` is the peer's endpoint name as fi_getname gave it.
        let r = unsafe {
            fi::xfi_av_insert(
                ep.av,
                names[pe].as_ptr().cast(),
                1,
                &mut addr,
                0,
                std::ptr::null_mut(),
            )
        };
        if r != 1 {
            return Err(Error::Transport {
                transport: "fabric",
                message: format!(
                    "fi_av_insert of PE {pe}'s address failed on provider {}: {}",
                    ep.prov,
                    strerror(r as i64)
                ),
            });
        }
        ep.addrs[pe] = addr;
    }
    ep.tokens = tokens;
    let prov = ep.prov.clone();
    let t = Arc::new(Fabric {
        ep: Arc::new(Mutex::new(ep)),
        reach: a.reach.clone(),
        heaps: (0..n).map(|p| a.reach[p].then_some(regions[p].1)).collect(),
        prov,
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
        let (s, h) = regions[pe];
        sys[pe] = Some(Box::new(FabricWindow {
            t: Arc::clone(&t),
            pe,
            region: s,
        }));
        heap[pe] = Some(Box::new(FabricWindow {
            t: Arc::clone(&t),
            pe,
            region: h,
        }));
    }
    tracing::debug!(pe = a.me, provider = %t.prov, "fabric transport up");
    Ok((t, sys, heap))
}

/// Open the endpoint and register this PE's regions; the record to publish.
fn open(a: &FabricArgs<'_>) -> Result<(Ep, Vec<u8>)> {
    let requested = a.provider.clone().filter(|p| !p.is_empty());
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
    let mut bind = Bind::of(a.addr.as_deref(), a.boot.local_addr());
    let mut delivery = true;
    let mut want = wants[0];
    let mut list = std::ptr::null_mut();
    loop {
        let source = match &bind {
            Bind::Addr(ip) => Some(*ip),
            _ => None,
        };
        'found: for &w in &wants {
            for d in [true, false] {
                list = getinfo(requested.as_deref(), d, w, source)?;
                if !list.is_null() {
                    delivery = d;
                    want = w;
                    break 'found;
                }
            }
        }
        // The bootstrap's address is only a default: a provider that does not address its endpoints by IP
        // (cxi, efa, psm3...) listens where it does.
        if list.is_null() && a.addr.is_none() && source.is_some() {
            tracing::info!(
                pe = a.me,
                "fabric: no provider listens on the bootstrap's address {bind:?}; the provider's own choice \
                 (XPUSHMEM_FABRIC_ADDR selects one)"
            );
            bind = Bind::Any;
            continue;
        }
        break;
    }
    if list.is_null() && wants == [Want::Hmem] {
        return Err(Error::Transport {
            transport: "fabric",
            message: format!(
                "XPUSHMEM_FABRIC_DEVICE_HEAP=register, but no libfabric provider {}offers FI_HMEM (registration \
                 of Level Zero memory) with RMA and atomics; use auto or stage",
                requested.as_deref().map_or(String::new(), |p| format!("named {p} "))
            ),
        });
    }
    // SAFETY: walking the list fi_getinfo returned (freed below, after the chosen node is duplicated).
    let chosen = unsafe {
        let mut p = list;
        let mut pick = std::ptr::null_mut();
        while !p.is_null() {
            let name = CStr::from_ptr((*(*p).fabric_attr).prov_name).to_string_lossy();
            let same_host = SAME_HOST_ONLY
                .iter()
                .any(|s| name.split(';').next() == Some(*s));
            let domain = (*(*p).domain_attr).name;
            let iface_ok = match &bind {
                Bind::Iface(want) => {
                    !domain.is_null() && CStr::from_ptr(domain).to_bytes() == want.as_bytes()
                }
                _ => true,
            };
            if (requested.is_some() || !same_host) && iface_ok {
                pick = fi::xfi_dupinfo(p);
                break;
            }
            p = (*p).next;
        }
        if !list.is_null() {
            fi::xfi_freeinfo(list);
        }
        pick
    };
    if chosen.is_null() {
        let at = match (&bind, a.addr.is_some()) {
            (Bind::Any, _) => String::new(),
            (Bind::Addr(ip), true) => format!(" on XPUSHMEM_FABRIC_ADDR={ip}"),
            (Bind::Addr(ip), false) => {
                format!(" on {ip} (the bootstrap's address; XPUSHMEM_FABRIC_ADDR selects another)")
            }
            (Bind::Iface(i), _) => format!(" on interface XPUSHMEM_FABRIC_ADDR={i}"),
        };
        return Err(Error::Transport {
            transport: "fabric",
            message: format!(
                "no libfabric provider {}offers reliable datagrams with RMA, atomics and messages{at} (see \
                 fi_info; XPUSHMEM_FABRIC_PROVIDER or FI_PROVIDER selects one)",
                requested.as_deref().map_or(String::new(), |p| format!("named {p} "))
            ),
        });
    }
    let mut ep = Ep {
        prov: String::new(),
        info: chosen,
        fabric: std::ptr::null_mut(),
        domain: std::ptr::null_mut(),
        cq: std::ptr::null_mut(),
        av: std::ptr::null_mut(),
        ep: std::ptr::null_mut(),
        own: Vec::new(),
        addrs: vec![ADDR_NOTAVAIL; a.reach.len()],
        me: a.me,
        next: 1,
        ops: IdMap::default(),
        per_pe: vec![0; a.reach.len()],
        results: IdMap::default(),
        errors: IdMap::default(),
        delivery_complete: delivery,
        mr_local: false,
        closed: None,
        abandoned: Vec::new(),
        mr_endpoint: false,
        max_msg: 1 << 30,
        atomics: HashSet::new(),
        timeout: a.timeout,
        lost: false,
        liveness: Arc::clone(&a.liveness),
        stage: None,
        cq_entries: vec![fi::fi_cq_msg_entry::default(); CQ_BATCH],
        inbox: Inbox {
            bufs: (0..2 * RECVS)
                .map(|_| vec![0u64; HDR_WORDS + STAGE_CHUNK / 8])
                .collect(),
            ctxs: (0..2 * RECVS)
                .map(|i| {
                    Box::new(Ctx {
                        raw: fi::fi_context2::default(),
                        id: RECV_BIT | i as u64,
                        slab: NO_SLAB,
                    })
                })
                .collect(),
            mrs: Vec::new(),
            arrived: std::collections::VecDeque::new(),
            serving: false,
            token: random_words::<2>()?,
            dropped: 0,
            warned: 0,
            warned_at: None,
        },
        tokens: Vec::new(),
        slabs: Slabs::default(),
        heap: None,
    };
    // SAFETY: `chosen` is a valid fi_info owned by `ep` (freed in its Drop); each object is opened into `ep`'s
    // fields, so Drop closes whatever was opened if a later step fails.
    unsafe {
        let info = &*chosen;
        ep.prov = CStr::from_ptr((*info.fabric_attr).prov_name)
            .to_string_lossy()
            .into_owned();
        let prov = ep.prov.clone();
        let mr_mode = (*info.domain_attr).mr_mode as u32;
        ep.mr_local = mr_mode & fi::FI_MR_LOCAL != 0;
        ep.mr_endpoint = mr_mode & fi::FI_MR_ENDPOINT != 0;
        let virt = mr_mode & fi::FI_MR_VIRT_ADDR != 0 || mr_mode == fi::FI_MR_BASIC;
        let prov_key = mr_mode & fi::FI_MR_PROV_KEY != 0 || mr_mode == fi::FI_MR_BASIC;
        ep.max_msg = (*info.ep_attr).max_msg_size.clamp(4096, 1 << 30);
        ok(
            &prov,
            "fi_fabric",
            fi::xfi_fabric(info.fabric_attr, &mut ep.fabric, std::ptr::null_mut()) as i64,
        )?;
        ok(
            &prov,
            "fi_domain",
            fi::xfi_domain(ep.fabric, chosen, &mut ep.domain, std::ptr::null_mut()) as i64,
        )?;
        let mut cq_attr = fi::fi_cq_attr {
            format: fi::FI_CQ_FORMAT_MSG,
            wait_obj: fi::FI_WAIT_NONE,
            ..Default::default()
        };
        ok(
            &prov,
            "fi_cq_open",
            fi::xfi_cq_open(ep.domain, &mut cq_attr, &mut ep.cq, std::ptr::null_mut()) as i64,
        )?;
        let mut av_attr = fi::fi_av_attr {
            type_: fi::FI_AV_TABLE,
            count: a.reach.len(),
            ..Default::default()
        };
        ok(
            &prov,
            "fi_av_open",
            fi::xfi_av_open(ep.domain, &mut av_attr, &mut ep.av, std::ptr::null_mut()) as i64,
        )?;
        ok(
            &prov,
            "fi_endpoint",
            fi::xfi_endpoint(ep.domain, chosen, &mut ep.ep, std::ptr::null_mut()) as i64,
        )?;
        ok(
            &prov,
            "fi_ep_bind(cq)",
            fi::xfi_ep_bind(
                ep.ep,
                &mut (*ep.cq).fid,
                (fi::FI_TRANSMIT | fi::FI_RECV) as u64,
            ) as i64,
        )?;
        ok(
            &prov,
            "fi_ep_bind(av)",
            fi::xfi_ep_bind(ep.ep, &mut (*ep.av).fid, 0) as i64,
        )?;
        ok(&prov, "fi_enable", fi::xfi_enable(ep.ep) as i64)?;
        let mut name = vec![0u8; 256];
        let mut len = name.len();
        ok(
            &prov,
            "fi_getname",
            fi::xfi_getname(&mut (*ep.ep).fid, name.as_mut_ptr().cast(), &mut len) as i64,
        )?;
        name.truncate(len);
        let mut rec = crate::bootstrap::Enc::default()
            .bytes(prov.as_bytes())
            .bytes(&name)
            .u64(ep.inbox.token[0])
            .u64(ep.inbox.token[1]);
        // Keys: fresh random ones of the provider's full key size when the application chooses them; the
        // provider's own (and their strength) with FI_MR_PROV_KEY.
        let key_bytes = (*info.domain_attr).mr_key_size.min(8);
        if !prov_key {
            tracing::debug!(
                pe = a.me,
                provider = %prov,
                "fabric: memory keys of {} random bits",
                8 * key_bytes
            );
        }
        let mut keys = Vec::new();
        for (w, is_heap) in [(a.sys, false), (a.heap, true)] {
            let device = is_heap && a.device.is_some();
            if device && want != Want::Hmem {
                // The staging path: the device heap is not registered; peers' messages reach it (below).
                rec = rec.u64(0).u64(0).u64(w.len() as u64).u64(1);
                continue;
            }
            let key = if prov_key {
                0
            } else {
                fresh_key(key_bytes, &keys)?
            };
            keys.push(key);
            let mut mr = std::ptr::null_mut();
            let access =
                (fi::FI_REMOTE_READ | fi::FI_REMOTE_WRITE | fi::FI_READ | fi::FI_WRITE) as u64;
            // The region is this PE's own mapping of its memfd (or its device heap), alive as long as the runtime
            // (which outlives this transport: the transport is dropped with `Peers`, before the arena).
            let r = if device {
                let iov = fi::iovec {
                    iov_base: w.base().cast(),
                    iov_len: w.len(),
                };
                let mut attr = fi::fi_mr_attr {
                    mr_iov: &iov,
                    iov_count: 1,
                    access,
                    requested_key: key,
                    iface: fi::FI_HMEM_ZE,
                    ..Default::default()
                };
                attr.device.ze = a.device.as_ref().map_or(0, |d| d.rt.device_index()) as i32;
                fi::xfi_mr_regattr(ep.domain, &attr, 0, &mut mr)
            } else {
                fi::xfi_mr_reg(
                    ep.domain,
                    w.base().cast(),
                    w.len(),
                    access,
                    0,
                    key,
                    0,
                    &mut mr,
                    std::ptr::null_mut(),
                )
            };
            ok(
                &prov,
                if device {
                    "fi_mr_regattr (device heap, FI_HMEM_ZE)"
                } else {
                    "fi_mr_reg (symmetric heap)"
                },
                r as i64,
            )?;
            ep.own.push(mr);
            if ep.mr_endpoint {
                ok(
                    &prov,
                    "fi_mr_bind",
                    fi::xfi_mr_bind(mr, &mut (*ep.ep).fid, 0) as i64,
                )?;
                ok(&prov, "fi_mr_enable", fi::xfi_mr_enable(mr) as i64)?;
            }
            if is_heap && !device {
                ep.heap = Some(LocalHeap {
                    base: w.base() as usize,
                    len: w.len(),
                    desc: if ep.mr_local {
                        fi::xfi_mr_desc(mr)
                    } else {
                        std::ptr::null_mut()
                    },
                });
            }
            let k = if prov_key { fi::xfi_mr_key(mr) } else { key };
            let addr = if virt { w.base() as u64 } else { 0 };
            rec = rec.u64(k).u64(addr).u64(w.len() as u64).u64(0);
        }
        if let (Some(d), false) = (&a.device, want == Want::Hmem) {
            ep.stage = Some(Stage {
                rt: Arc::clone(&d.rt),
                base: a.heap.base() as usize,
                len: a.heap.len(),
            });
        }
        // The receive buffers, posted on every PE (local access only: no peer addresses them).
        if ep.mr_local {
            for b in &mut ep.inbox.bufs {
                let mut mr = std::ptr::null_mut();
                let r = fi::xfi_mr_reg(
                    ep.domain,
                    b.as_ptr().cast(),
                    b.len() * 8,
                    (fi::FI_RECV | fi::FI_SEND) as u64,
                    0,
                    0,
                    0,
                    &mut mr,
                    std::ptr::null_mut(),
                );
                ok(&prov, "fi_mr_reg (receive buffer)", r as i64)?;
                ep.inbox.mrs.push(LocalMr {
                    mr,
                    desc: fi::xfi_mr_desc(mr),
                });
            }
        }
        for i in 0..2 * RECVS {
            ep.post_recv(i)?;
        }
        // The atomics the provider offers, per width, operation and form.
        for width in [4usize, 8] {
            let dt = dtype(width)?;
            for fop in [
                fi::FI_ATOMIC_READ,
                fi::FI_ATOMIC_WRITE,
                fi::FI_CSWAP,
                fi::FI_SUM,
                fi::FI_BAND,
                fi::FI_BOR,
                fi::FI_BXOR,
            ] {
                for (form, flag) in [
                    (Form::Post, 0u64),
                    (Form::Fetch, fi::FI_FETCH_ATOMIC),
                    (Form::Compare, fi::FI_COMPARE_ATOMIC),
                ] {
                    let mut attr = fi::fi_atomic_attr::default();
                    if fi::xfi_query_atomic(ep.domain, dt, fop, &mut attr, flag) == 0
                        && attr.count >= 1
                    {
                        ep.atomics.insert((width, fop, form));
                    }
                }
            }
        }
        if a.emulate_atomics {
            ep.atomics
                .retain(|&(_, op, form)| op == fi::FI_CSWAP && form == Form::Compare);
        }
        tracing::debug!(
            pe = a.me,
            provider = %prov,
            domain = %CStr::from_ptr((*info.domain_attr).name).to_string_lossy(),
            delivery_complete = delivery,
            device_heap = ?a.device.as_ref().map(|_| if want == Want::Hmem { "registered (FI_HMEM_ZE)" } else { "staged" }),
            mr_mode,
            atomics = ep.atomics.len(),
            "fabric endpoint"
        );
        Ok((ep, rec.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_bind_address_is_the_setting_else_the_bootstraps() {
        let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(Bind::of(None, Some(lo)), Bind::Addr(lo));
        assert_eq!(Bind::of(Some(""), None), Bind::Any);
        assert_eq!(
            Bind::of(Some("10.1.2.3"), Some(lo)),
            Bind::Addr("10.1.2.3".parse().unwrap())
        );
        assert_eq!(
            Bind::of(Some("[fd00::2]"), None),
            Bind::Addr("fd00::2".parse().unwrap())
        );
        assert_eq!(Bind::of(Some("eth0"), Some(lo)), Bind::Iface("eth0".into()));
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
