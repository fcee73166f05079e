//! Unique-ID bootstrap: a TCP rendezvous served by one process, joined by every PE.
//!
//! Wire format: frames of `u32 length (LE) | u8 kind | payload`. The job's key (the unique ID's secret) never goes
//! over the wire: the server opens every connection with `CHALLENGE(server nonce)`; a PE answers
//! `HELLO(rank, size, client nonce, HMAC-SHA256(key, server nonce, rank, size, client nonce))`; the server answers
//! `ADMITTED` once the MAC, the rank and the size are right, and once all `size` PEs have, `WELCOME(HMAC-SHA256(key,
//! client nonce, rank))` to each, so each side has proved it holds the key. Each collective is one
//! `GATHER(bytes)` from every PE, answered with `RESULT(all contributions)`. `BYE` leaves. A PE whose connection
//! closes without `BYE` is lost: the server tells every other PE `LOST(rank)` at once, so nobody waits for a dead
//! peer.
//!
//! Clients without the key cost the server little and cannot keep a PE out: a connection that fails the check is
//! logged (rate-limited) and dropped without disturbing the others; before a connection is admitted the only frame
//! read is a `HELLO` of its exact size (a longer announced length is refused unread); every handshake has one
//! deadline for the whole exchange ([`HANDSHAKE_TIMEOUT`]), not per read, so trickling bytes does not extend it;
//! at most [`MAX_HANDSHAKES`] run at once, at most [`MAX_HANDSHAKES_PER_SOURCE`] from one remote address, and a new
//! connection past either bound evicts the oldest unadmitted one rather than being refused. A PE whose connection
//! is closed before it was admitted connects again (within the bootstrap's timeout), so a PE holding the key gets
//! in however many connections an outsider opens. After admission, frames are bounded by the protocol: a
//! contribution to a gather by [`gather_limit`] (the whole result must fit in one frame), read as it arrives; the
//! announced job size by [`max_pes`].

use super::Bootstrap;
use crate::error::{Error, Result, Throttle};
use crate::wait::Backoff;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const HELLO: u8 = 1;
const GATHER: u8 = 2;
const BYE: u8 = 3;
const CHALLENGE: u8 = 4;
const WELCOME: u8 = 10;
const RESULT: u8 = 11;
const LOST: u8 = 12;
const FAIL: u8 = 13;
const ADMITTED: u8 = 14;
/// The largest frame (kind byte included) either side reads or writes: 1 GiB.
const MAX_FRAME: usize = 1 << 30;
/// The most of a frame's payload allocated ahead of the bytes actually received.
const READ_CHUNK: usize = 1 << 20;
/// The unique ID's text prefix; its number changes with the wire protocol, so PEs of another version refuse the
/// ID instead of failing the handshake.
const PREFIX: &str = "xpushmem-uid3";
/// Bytes of a nonce and of a MAC.
const NONCE: usize = 16;
const MAC: usize = 32;
/// Bytes of a `HELLO` payload: rank, size, client nonce, MAC.
const HELLO_BYTES: usize = 16 + NONCE + MAC;
/// How long an accepted connection may take, in all, from its challenge to a valid `HELLO`.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How many handshakes may be pending at once, and how many of them may come from one remote address (loopback
/// sources are all one address, so only the total bounds them); past either bound the oldest one is evicted.
pub(crate) const MAX_HANDSHAKES: usize = 256;
pub(crate) const MAX_HANDSHAKES_PER_SOURCE: usize = 32;

/// The most PEs one rendezvous serves: it holds one connection (one descriptor) per PE, so no more than this
/// process may open (the hard `RLIMIT_NOFILE`), and no more than the C ABI's `int` counts.
pub(crate) fn max_pes() -> usize {
    let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .maximum
        .unwrap_or(u64::MAX);
    usize::try_from(nofile.min(i32::MAX as u64)).unwrap_or(usize::MAX)
}

/// The largest contribution of one PE to a gather of `n` PEs: the result (each contribution with its 8-byte
/// length) must fit in one frame.
pub(crate) fn gather_limit(n: usize) -> usize {
    ((MAX_FRAME - 1) / n.max(1)).saturating_sub(8)
}

/// Refused connections and evicted handshakes: a flood of them logs a line a second.
static REFUSED: Throttle = Throttle::new();
static EVICTED: Throttle = Throttle::new();

fn berr(message: impl Into<String>) -> Error {
    Error::Bootstrap {
        method: "uid",
        message: message.into(),
    }
}

/// The identity of one rendezvous: where it listens and the job's secret key. Printable and parseable
/// (`xpushmem-uid2:<key hex>@<ip:port>`), and convertible to the 128-byte blob of the C ABI. Whoever holds it can
/// join the job: pass it to the PEs as privately as the job's data.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId {
    /// Address the rendezvous listens on.
    pub addr: SocketAddr,
    /// Random 128-bit job key: both sides prove they hold it (challenge-response); it is never sent.
    pub cookie: u128,
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("UniqueId")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Size of the C ABI's unique-ID blob (as NVSHMEM's).
pub const UNIQUE_ID_BYTES: usize = 128;

impl std::fmt::Display for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{PREFIX}:{:032x}@{}", self.cookie, self.addr)
    }
}

impl std::str::FromStr for UniqueId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                "unique id",
                s,
                format!("expected {PREFIX}:<32 hex digits>@<ip:port>"),
            )
        };
        let rest = s
            .trim()
            .strip_prefix(PREFIX)
            .and_then(|r| r.strip_prefix(':'))
            .ok_or_else(bad)?;
        let (cookie, addr) = rest.split_once('@').ok_or_else(bad)?;
        Ok(UniqueId {
            cookie: (cookie.len() == 32)
                .then(|| u128::from_str_radix(cookie, 16).ok())
                .flatten()
                .ok_or_else(bad)?,
            addr: addr.parse().map_err(|_| bad())?,
        })
    }
}

impl UniqueId {
    /// The ID as a zero-padded, NUL-terminated text blob of [`UNIQUE_ID_BYTES`] bytes.
    pub fn to_bytes(&self) -> [u8; UNIQUE_ID_BYTES] {
        let mut out = [0u8; UNIQUE_ID_BYTES];
        let s = self.to_string();
        out[..s.len()].copy_from_slice(s.as_bytes());
        out
    }

    /// Parse the blob made by [`UniqueId::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Result<UniqueId> {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        std::str::from_utf8(&b[..end])
            .map_err(|_| {
                Error::invalid(
                    "unique id",
                    "<binary>",
                    "not a unique ID made by get_unique_id",
                )
            })?
            .parse()
    }
}

/// Random bytes from the kernel; an error (never a weak fallback) where it has none: they are secrets.
pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    let mut b = [0u8; N];
    let mut filled = 0;
    while filled < N {
        match rustix::rand::getrandom(&mut b[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(k) => filled += k,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(Error::os("getrandom", e)),
        }
    }
    Ok(b)
}

/// A new random job key (the secret of a unique ID).
pub(crate) fn random_key() -> Result<u128> {
    Ok(u128::from_le_bytes(random_bytes()?))
}

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// HMAC-SHA256 of `parts` (concatenated) under the job key.
fn mac(key: u128, parts: &[&[u8]]) -> [u8; MAC] {
    use hmac::Mac;
    let mut m = <HmacSha256 as Mac>::new_from_slice(&key.to_le_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// Whether `tag` is the MAC of `parts` (constant time).
fn mac_ok(key: u128, parts: &[&[u8]], tag: &[u8]) -> bool {
    use hmac::Mac;
    let mut m = <HmacSha256 as Mac>::new_from_slice(&key.to_le_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    for p in parts {
        m.update(p);
    }
    m.verify_slice(tag).is_ok()
}

/// A random non-zero 64-bit value (names of node-local sockets: not a secret); falls back to the clock and the
/// pid without getrandom.
pub(crate) fn random_cookie() -> u64 {
    let mut b = [0u8; 8];
    if rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        b = (now ^ ((std::process::id() as u64) << 32)).to_le_bytes();
    }
    u64::from_le_bytes(b) | 1
}

fn write_frame(s: &mut TcpStream, kind: u8, payload: &[u8]) -> std::io::Result<()> {
    let len = payload.len() + 1;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("frame of {len} bytes exceeds the rendezvous limit {MAX_FRAME}"),
        ));
    }
    let mut buf = Vec::with_capacity(5 + payload.len());
    buf.extend_from_slice(&(len as u32).to_le_bytes());
    buf.push(kind);
    buf.extend_from_slice(payload);
    s.write_all(&buf)
}

/// Read one frame whose length (kind byte included) is at most `max`; a longer announced length is an error,
/// nothing of it read. The payload is allocated as it arrives ([`READ_CHUNK`] at a time, failing allocation an
/// error), never the announced length up front.
fn read_frame(s: &mut TcpStream, max: usize) -> std::io::Result<(u8, Vec<u8>)> {
    let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > max.min(MAX_FRAME) {
        return Err(bad(format!(
            "bad frame length {len} (at most {} here)",
            max.min(MAX_FRAME)
        )));
    }
    let mut kind = [0u8; 1];
    s.read_exact(&mut kind)?;
    let mut buf = Vec::new();
    let mut left = len - 1;
    while left > 0 {
        let step = left.min(READ_CHUNK);
        buf.try_reserve(step)
            .map_err(|e| bad(format!("frame of {len} bytes: {e}")))?;
        let at = buf.len();
        buf.resize(at + step, 0);
        s.read_exact(&mut buf[at..])?;
        left -= step;
    }
    Ok((kind[0], buf))
}

fn encode_all(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

fn decode_all(mut b: &[u8], n: usize) -> Option<Vec<Vec<u8>>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let (h, t) = b.split_at_checked(8)?;
        let len = usize::try_from(u64::from_le_bytes(h.try_into().ok()?)).ok()?;
        let (p, t) = t.split_at_checked(len)?;
        v.push(p.to_vec());
        b = t;
    }
    b.is_empty().then_some(v)
}

/// The rendezvous server. Runs on its own thread until every PE has said `BYE` or one was lost.
#[derive(Debug)]
pub struct Server {
    id: UniqueId,
    handle: std::thread::JoinHandle<std::result::Result<(), String>>,
}

impl Server {
    /// Listen on `ip` (port chosen by the kernel) and serve one job on a background thread. `timeout` bounds the
    /// wait for all PEs to connect.
    pub fn start(ip: IpAddr, timeout: Option<Duration>) -> Result<Server> {
        Self::start_with_deadline(ip, timeout, HANDSHAKE_TIMEOUT)
    }

    /// [`Server::start`] with `handshake` as the deadline of each connection's handshake (the tests' shorter
    /// deadline; every other caller has [`HANDSHAKE_TIMEOUT`]).
    pub(crate) fn start_with_deadline(
        ip: IpAddr,
        timeout: Option<Duration>,
        handshake: Duration,
    ) -> Result<Server> {
        let listener = TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(|e| berr(format!("bind {ip}:0: {e}")))?;
        let addr = listener.local_addr().map_err(|e| berr(e.to_string()))?;
        let id = UniqueId {
            addr,
            cookie: random_key()?,
        };
        let handle = std::thread::Builder::new()
            .name("xpushmem-rendezvous".into())
            .spawn(move || serve(listener, id.cookie, timeout, handshake))
            .map_err(|e| berr(format!("spawn rendezvous thread: {e}")))?;
        tracing::debug!(addr = %id.addr, "uid rendezvous serving");
        Ok(Server { id, handle })
    }

    /// The job's unique ID.
    pub fn id(&self) -> UniqueId {
        self.id
    }

    /// Whether the server thread has ended.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Wait for the server to end; its error, if it ended on one.
    pub fn join(self) -> Result<()> {
        self.handle
            .join()
            .map_err(|_| berr("rendezvous thread panicked"))?
            .map_err(berr)
    }
}

/// A connection that proved it holds the key: who it says it is, and its nonce for the server's proof.
struct Joined {
    stream: TcpStream,
    rank: usize,
    size: usize,
    nonce: [u8; NONCE],
}

/// Log a refused connection (rate-limited: an outsider can make many) and tell it why.
fn refuse(s: &mut TcpStream, peer: SocketAddr, why: &str) -> Option<Joined> {
    if let Some(skipped) = REFUSED.note() {
        tracing::warn!(%peer, why, skipped, "rendezvous: connection refused (skipped: refusals not logged since the last line)");
    }
    let _ = write_frame(
        s,
        FAIL,
        format!("wrong cookie: {why} (this unique ID belongs to another job?)").as_bytes(),
    );
    None
}

/// Challenge one accepted connection and check its answer. `None` (logged) when it does not hold the key or does
/// not answer; nothing is sent to it but the challenge and a refusal. Reads at most one `HELLO`-sized frame; the
/// server shuts the connection down (ending this) when the handshake's deadline passes or it is evicted.
fn handshake(mut s: TcpStream, peer: SocketAddr, key: u128, deadline: Duration) -> Option<Joined> {
    let _ = s.set_nonblocking(false);
    let _ = s.set_nodelay(true);
    // A backstop only: the deadline of the whole handshake is kept by the accept loop.
    let _ = s.set_read_timeout(Some(deadline));
    let challenge: [u8; NONCE] = random_bytes().ok()?;
    write_frame(&mut s, CHALLENGE, &challenge).ok()?;
    let p = match read_frame(&mut s, 1 + HELLO_BYTES) {
        Ok((HELLO, p)) if p.len() == HELLO_BYTES => p,
        Ok(_) => return refuse(&mut s, peer, "malformed hello"),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return refuse(&mut s, peer, &format!("malformed hello: {e}"))
        }
        Err(e) => {
            tracing::debug!(%peer, error = %e, "rendezvous: connection dropped before its hello");
            return None;
        }
    };
    let (fields, tag) = p.split_at(16 + NONCE);
    if !mac_ok(key, &[b"xpushmem-hello", &challenge, fields], tag) {
        return refuse(&mut s, peer, "authentication failed");
    }
    let word = |i: usize| u64::from_le_bytes(fields[i..i + 8].try_into().unwrap_or_default());
    let _ = s.set_read_timeout(None);
    Some(Joined {
        rank: usize::try_from(word(0)).unwrap_or(usize::MAX),
        size: usize::try_from(word(8)).unwrap_or(usize::MAX),
        nonce: fields[16..].try_into().unwrap_or_default(),
        stream: s,
    })
}

/// An accepted connection whose handshake runs on its own thread: where it came from, since when, and a handle
/// on its socket to end it.
struct Pending {
    id: u64,
    source: IpAddr,
    since: Instant,
    socket: TcpStream,
}

/// End pending handshake `i` (its thread sees the connection shut down and gives up).
fn evict(pending: &mut Vec<Pending>, i: usize, why: &str) {
    let p = pending.remove(i);
    let _ = p.socket.shutdown(Shutdown::Both);
    if let Some(skipped) = EVICTED.note() {
        tracing::warn!(source = %p.source, why, skipped, "rendezvous: unauthenticated connection dropped (skipped: drops not logged since the last line)");
    }
}

/// Why an authenticated `HELLO` cannot join the job being assembled (`size`: the size the first admitted PE
/// gave; `joined`: the ranks admitted so far), or `None` when it can.
fn misfit(j: &Joined, size: Option<usize>, joined: &BTreeMap<usize, Joined>) -> Option<String> {
    let (rank, n) = (j.rank, j.size);
    let limit = max_pes();
    if n == 0 || n > limit {
        Some(format!(
            "PE {rank} says the job has {n} PEs: this rendezvous serves 1 to {limit} (one connection per PE, at \
             most RLIMIT_NOFILE's hard limit and the C ABI's int)"
        ))
    } else if size.is_some_and(|expect| expect != n) {
        Some(format!(
            "PE {rank} says the job has {n} PEs, others say {}",
            size.unwrap_or_default()
        ))
    } else if rank >= n {
        Some(format!("rank {rank} out of range [0, {n})"))
    } else if joined.contains_key(&rank) {
        Some(format!("rank {rank} joined twice"))
    } else {
        None
    }
}

fn serve(
    listener: TcpListener,
    key: u128,
    timeout: Option<Duration>,
    deadline: Duration,
) -> std::result::Result<(), String> {
    let start = Instant::now();
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    // Admitted PEs by rank: grows as they arrive (nothing is sized from a claimed job size).
    let mut conns: BTreeMap<usize, Joined> = BTreeMap::new();
    let mut size: Option<usize> = None;
    // Phase 1: every PE proves it holds the key and says who it is. Handshakes run on their own threads, so a
    // connection that stalls or fails delays nobody; `pending` lists them oldest first.
    let (tx, rx) = std::sync::mpsc::channel::<(u64, Option<Joined>)>();
    let mut pending: Vec<Pending> = Vec::new();
    let mut next_id = 0u64;
    // Idle, the loop sleeps from 1 us doubling up to 2 ms, from the start again after each arrival; the limit
    // counts from the server's start.
    let mut backoff = Backoff::new(0, 0, Duration::from_millis(2), timeout).since(start);
    while size.is_none_or(|n| conns.len() < n) {
        let mut progressed = false;
        let now = Instant::now();
        while pending
            .first()
            .is_some_and(|p| now.saturating_duration_since(p.since) >= deadline)
        {
            evict(
                &mut pending,
                0,
                "no valid hello before the handshake deadline",
            );
        }
        match listener.accept() {
            Ok((s, peer)) => {
                progressed = true;
                let source = peer.ip();
                if !source.is_loopback() {
                    let mine: Vec<usize> = (0..pending.len())
                        .filter(|&i| pending[i].source == source)
                        .collect();
                    if mine.len() >= MAX_HANDSHAKES_PER_SOURCE {
                        evict(
                            &mut pending,
                            mine[0],
                            "too many pending handshakes from its address",
                        );
                    }
                }
                if pending.len() >= MAX_HANDSHAKES {
                    evict(&mut pending, 0, "too many pending handshakes");
                }
                let id = next_id;
                next_id += 1;
                let Ok(socket) = s.try_clone() else {
                    continue;
                };
                let tx = tx.clone();
                let spawned = std::thread::Builder::new()
                    .name("xpushmem-handshake".into())
                    .spawn(move || {
                        let _ = tx.send((id, handshake(s, peer, key, deadline)));
                    });
                if spawned.is_ok() {
                    pending.push(Pending {
                        id,
                        source,
                        since: now,
                        socket,
                    });
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("accept: {e}")),
        }
        while let Ok((id, done)) = rx.try_recv() {
            progressed = true;
            // A handshake evicted meanwhile has a dead socket: its PE connects again.
            let Some(i) = pending.iter().position(|p| p.id == id) else {
                continue;
            };
            pending.remove(i);
            let Some(mut j) = done else {
                continue;
            };
            if let Some(m) = misfit(&j, size, &conns) {
                tracing::debug!(why = %m, "rendezvous: PE refused");
                let _ = write_frame(&mut j.stream, FAIL, m.as_bytes());
                continue;
            }
            if write_frame(&mut j.stream, ADMITTED, &[]).is_ok() {
                size = Some(j.size);
                conns.insert(j.rank, j);
            }
        }
        // The limit holds however busy outsiders keep the accept loop: checked at every turn, not only after a
        // pause.
        if let Some(waited) = backoff.expired() {
            let n = size.unwrap_or(0);
            let missing: Vec<usize> = (0..n).filter(|r| !conns.contains_key(r)).take(32).collect();
            let more = n - conns.len() - missing.len();
            let m = format!(
                "timed out after {waited:?} waiting for PEs {missing:?}{} to join",
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
            for j in conns.values_mut() {
                let _ = write_frame(&mut j.stream, FAIL, m.as_bytes());
            }
            return Err(m);
        }
        if progressed {
            backoff.reset();
        } else {
            backoff.pause(|| false);
        }
    }
    for p in pending.drain(..) {
        let _ = p.socket.shutdown(Shutdown::Both);
    }
    let n = conns.len();
    let (mut conns, nonces): (Vec<TcpStream>, Vec<[u8; NONCE]>) =
        conns.into_values().map(|j| (j.stream, j.nonce)).unzip();
    for (rank, s) in conns.iter_mut().enumerate() {
        let proof = mac(
            key,
            &[
                b"xpushmem-welcome",
                &nonces[rank],
                &(rank as u64).to_le_bytes(),
            ],
        );
        let _ = write_frame(s, WELCOME, &proof);
    }
    // Phase 2: rounds of gathers until everyone leaves or someone is lost.
    let mut pending: Vec<Option<Vec<u8>>> = vec![None; n];
    let mut gone = vec![false; n];
    loop {
        if gone.iter().all(|g| *g) {
            return Ok(());
        }
        let mut fds: Vec<rustix::event::PollFd<'_>> = conns
            .iter()
            .map(|s| rustix::event::PollFd::new(s, rustix::event::PollFlags::IN))
            .collect();
        match rustix::event::poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        let ready: Vec<usize> = (0..n)
            .filter(|&r| !gone[r] && !fds[r].revents().is_empty())
            .collect();
        drop(fds);
        for r in ready {
            match read_frame(&mut conns[r], 1 + gather_limit(n)) {
                Ok((GATHER, p)) if pending[r].is_none() => pending[r] = Some(p),
                Ok((BYE, _)) => gone[r] = true,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    // Too large a contribution (the PE checks its own first, so only a broken or foreign PE).
                    let m = format!(
                        "PE {r} sent a gather the rendezvous refuses: {e} (a PE contributes at most {} bytes in a \
                         job of {n} PEs)",
                        gather_limit(n)
                    );
                    for (i, s) in conns.iter_mut().enumerate() {
                        if !gone[i] {
                            let _ = write_frame(s, FAIL, m.as_bytes());
                        }
                    }
                    return Err(m);
                }
                other => {
                    let why = match other {
                        Ok((k, _)) => format!("protocol error (frame kind {k})"),
                        Err(e) => format!("connection closed ({e})"),
                    };
                    tracing::debug!(rank = r, %why, "rendezvous: PE lost");
                    for (i, s) in conns.iter_mut().enumerate() {
                        if i != r && !gone[i] {
                            let _ = write_frame(s, LOST, &(r as u64).to_le_bytes());
                        }
                    }
                    return Err(format!("PE {r} lost: {why}"));
                }
            }
        }
        if (0..n).all(|r| pending[r].is_some() || gone[r]) && pending.iter().any(|p| p.is_some()) {
            if let Some(r) = (0..n).find(|&r| gone[r]) {
                let m = format!("PE {r} left the job (finalize) while others were in a collective");
                for (i, s) in conns.iter_mut().enumerate() {
                    if !gone[i] {
                        let _ = write_frame(s, FAIL, m.as_bytes());
                    }
                }
                return Err(m);
            }
            let all: Vec<Vec<u8>> = pending
                .iter_mut()
                .map(|p| p.take().unwrap_or_default())
                .collect();
            let msg = encode_all(&all);
            for s in &mut conns {
                let _ = write_frame(s, RESULT, &msg);
            }
        }
    }
}

/// Whether a connection error before admission means "connect again": the server closed a connection it had not
/// admitted (a handshake evicted under a flood of connections, or past its deadline).
fn closed_early(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe | NotConnected
    )
}

fn join_timeout(start: Instant, timeout: Option<Duration>, detail: String) -> Error {
    Error::Timeout {
        op: "bootstrap join".into(),
        waited: start.elapsed(),
        limit: timeout.unwrap_or_default(),
        detail,
    }
}

/// Connect to the rendezvous and be admitted (challenge answered, rank and size accepted): the connection and the
/// nonce of this PE's `HELLO`. A connection closed before admission is made again, backing off, until `timeout`.
fn admit(
    id: UniqueId,
    rank: usize,
    size: usize,
    timeout: Option<Duration>,
) -> Result<(TcpStream, [u8; NONCE])> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let why = match admit_once(id, rank, size, timeout, start)? {
            Ok(done) => return Ok(done),
            Err(why) => why,
        };
        if timeout.is_some_and(|t| start.elapsed() + pause >= t) {
            return Err(join_timeout(
                start,
                timeout,
                format!(
                    "; the rendezvous at {} closed all {attempts} connections of this PE before admitting it \
                     (last: {why})",
                    id.addr
                ),
            ));
        }
        tracing::debug!(rank, attempts, %why, "uid bootstrap: connecting to the rendezvous again");
        // Not a wait but a reconnection pace (so no `Backoff`): the server closed this connection to shed a
        // flood of handshakes, and reconnecting at once would add to it; the pause is counted against the limit
        // before it is taken.
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// One attempt of [`admit`]: `Ok(Err(why))` when the server closed the connection before admitting this PE.
fn admit_once(
    id: UniqueId,
    rank: usize,
    size: usize,
    timeout: Option<Duration>,
    start: Instant,
) -> Result<std::result::Result<(TcpStream, [u8; NONCE]), String>> {
    // A refused connection: the server is not listening yet (its process may start after this one); connect
    // again, backing off up to 10 ms, until the limit counted from `admit`'s start.
    let mut backoff = Backoff::new(0, 0, Duration::from_millis(10), timeout).since(start);
    let mut s = loop {
        match TcpStream::connect_timeout(&id.addr, Duration::from_secs(5)) {
            Ok(s) => break s,
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && backoff.expired().is_none() =>
            {
                backoff.pause(|| false);
            }
            Err(e) => return Err(berr(format!("connect to rendezvous {}: {e}", id.addr))),
        }
    };
    let _ = s.set_nodelay(true);
    s_timeout(&s, timeout.map(|t| t.saturating_sub(start.elapsed())))?;
    let failed = |e: std::io::Error, what: &str| -> Result<std::result::Result<_, String>> {
        if closed_early(&e) {
            Ok(Err(format!("closed {what}: {e}")))
        } else if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            Err(join_timeout(
                start,
                timeout,
                format!("; waiting for the rendezvous at {} {what}", id.addr),
            ))
        } else {
            Err(berr(format!(
                "rendezvous connection lost during join: {e} (the serving process exited?)"
            )))
        }
    };
    let challenge = match read_frame(&mut s, MAX_FRAME) {
        Ok((CHALLENGE, c)) if c.len() == NONCE => c,
        Ok((FAIL, m)) => return Err(berr(String::from_utf8_lossy(&m).into_owned())),
        Ok(_) => {
            return Err(berr(format!(
                "the rendezvous at {} sent a malformed challenge",
                id.addr
            )))
        }
        Err(e) => return failed(e, "before its challenge"),
    };
    let nonce: [u8; NONCE] = random_bytes()?;
    let mut hello = (rank as u64).to_le_bytes().to_vec();
    hello.extend_from_slice(&(size as u64).to_le_bytes());
    hello.extend_from_slice(&nonce);
    let tag = mac(id.cookie, &[b"xpushmem-hello", &challenge, &hello]);
    hello.extend_from_slice(&tag);
    if let Err(e) = write_frame(&mut s, HELLO, &hello) {
        return failed(e, "before this PE's hello");
    }
    match read_frame(&mut s, MAX_FRAME) {
        Ok((ADMITTED, _)) => Ok(Ok((s, nonce))),
        Ok((FAIL, m)) => Err(berr(String::from_utf8_lossy(&m).into_owned())),
        Ok((k, _)) => Err(berr(format!("unexpected frame kind {k} during join"))),
        Err(e) => failed(e, "before admitting this PE"),
    }
}

/// Set a connection's read timeout (`None`: none; zero is taken as the least positive).
fn s_timeout(s: &TcpStream, t: Option<Duration>) -> Result<()> {
    s.set_read_timeout(t.map(|t| t.max(Duration::from_millis(1))))
        .map_err(|e| berr(format!("set the rendezvous connection's timeout: {e}")))
}

/// A PE's connection to the rendezvous.
#[derive(Debug)]
pub struct UidBootstrap {
    rank: usize,
    size: usize,
    timeout: Option<Duration>,
    conn: Mutex<TcpStream>,
    /// Keeps the server thread of a rendezvous this process serves (the PE that called `get_unique_id`).
    server: Mutex<Option<Server>>,
    /// The first news of a lost peer or a failed collective, kept: the server closes every connection right after
    /// telling it, so a later look at the connection would see only that it closed.
    news: Mutex<Option<Error>>,
    /// The local address of the connection to the rendezvous ([`Bootstrap::local_addr`]).
    local: Option<std::net::IpAddr>,
}

impl UidBootstrap {
    /// Join the rendezvous `id` as `rank` of `size`. Blocks until all `size` PEs have joined (or `timeout`).
    pub fn connect(
        id: UniqueId,
        rank: usize,
        size: usize,
        timeout: Option<Duration>,
        server: Option<Server>,
    ) -> Result<Self> {
        if size == 0 || rank >= size {
            return Err(Error::InvalidPe {
                pe: rank as i64,
                n_pes: size,
                context: "uid bootstrap rank".into(),
            });
        }
        let start = Instant::now();
        let (s, nonce) = admit(id, rank, size, timeout)?;
        s_timeout(&s, timeout.map(|t| t.saturating_sub(start.elapsed())))?;
        let local = s.local_addr().ok().map(|a| a.ip());
        let b = UidBootstrap {
            rank,
            size,
            timeout,
            local,
            conn: Mutex::new(s),
            server: Mutex::new(server),
            news: Mutex::new(None),
        };
        {
            let mut conn = b.lock();
            let proof = b.expect(&mut conn, WELCOME, "join")?;
            if !mac_ok(
                id.cookie,
                &[b"xpushmem-welcome", &nonce, &(rank as u64).to_le_bytes()],
                &proof,
            ) {
                return Err(berr(format!(
                    "the rendezvous at {} does not hold this job's key (not the server that made the unique ID)",
                    id.addr
                )));
            }
            s_timeout(&conn, timeout)?;
        }
        tracing::debug!(rank, size, addr = %id.addr, "uid bootstrap joined");
        Ok(b)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TcpStream> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn expect(&self, conn: &mut TcpStream, kind: u8, op: &str) -> Result<Vec<u8>> {
        let r = self.read_expected(conn, kind, op);
        if let Err(Error::PeerLost { pe, .. }) = &r {
            // The launcher hears of it as of a loss a wait met (during the start-up too, before any wait runs).
            super::launcher::report_peer_lost(*pe);
        }
        if let Err(e @ (Error::PeerLost { .. } | Error::Bootstrap { .. })) = &r {
            let mut news = self.news.lock().unwrap_or_else(|p| p.into_inner());
            match &*news {
                // What the server said before it closed the connection explains the closed connection.
                Some(first) => return Err(first.clone()),
                None => *news = Some(e.clone()),
            }
        }
        r
    }

    fn read_expected(&self, conn: &mut TcpStream, kind: u8, op: &str) -> Result<Vec<u8>> {
        let start = Instant::now();
        match read_frame(conn, MAX_FRAME) {
            Ok((k, p)) if k == kind => Ok(p),
            Ok((LOST, p)) => Err(Error::PeerLost {
                pe: u64::from_le_bytes(
                    p.get(..8)
                        .and_then(|b| b.try_into().ok())
                        .unwrap_or_default(),
                ) as usize,
                me: self.rank,
                op: format!("bootstrap {op}"),
            }),
            Ok((FAIL, p)) => Err(berr(String::from_utf8_lossy(&p).into_owned())),
            Ok((k, _)) => Err(berr(format!("unexpected frame kind {k} during {op}"))),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Err(Error::Timeout {
                    op: format!("bootstrap {op}"),
                    waited: start.elapsed(),
                    limit: self.timeout.unwrap_or_default(),
                    detail: "; waiting for every PE to reach the same point".into(),
                })
            }
            Err(e) => Err(berr(format!(
                "rendezvous connection lost during {op}: {e} (the serving process exited?)"
            ))),
        }
    }
}

impl Bootstrap for UidBootstrap {
    fn name(&self) -> &'static str {
        "uid"
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn local_addr(&self) -> Option<std::net::IpAddr> {
        self.local
    }
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let limit = gather_limit(self.size);
        if mine.len() > limit {
            return Err(Error::invalid(
                "allgather contribution (bytes)",
                mine.len(),
                format!(
                    "the uid rendezvous carries at most {limit} bytes per PE in a job of {} PEs (the whole result \
                     fits in one {MAX_FRAME}-byte frame)",
                    self.size
                ),
            ));
        }
        let mut conn = self.lock();
        write_frame(&mut conn, GATHER, mine).map_err(|e| berr(format!("send: {e}")))?;
        let p = self.expect(&mut conn, RESULT, "allgather")?;
        decode_all(&p, self.size).ok_or_else(|| berr("malformed allgather result"))
    }
    fn check_alive(&self) -> Result<()> {
        // Skip when another thread is inside a collective: it will see the news itself.
        let Ok(mut conn) = self.conn.try_lock() else {
            return Ok(());
        };
        if let Some(first) = &*self.news.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(first.clone());
        }
        let mut head = [0u8; 5];
        match rustix::net::recv(
            conn.as_fd(),
            &mut head,
            rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT,
        ) {
            Ok((0, _)) => Err(berr(
                "rendezvous connection closed (the serving process exited)",
            )),
            Ok((_, _)) => match head[4] {
                LOST | FAIL => self.expect(&mut conn, RESULT, "wait").map(|_| ()),
                _ => Ok(()),
            },
            Err(_) => Ok(()),
        }
    }
    fn finalize(&self) -> Result<()> {
        let mut conn = self.lock();
        let _ = write_frame(&mut conn, BYE, &[]);
        drop(conn);
        if let Some(server) = self.server.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // The server ends once every PE said BYE (and on its own when a PE is lost); don't block on slow
            // peers' exits beyond the timeout.
            let mut backoff = Backoff::new(0, 0, Duration::from_millis(1), self.timeout);
            while !server.is_finished() && backoff.expired().is_none() {
                backoff.pause(|| false);
            }
            if server.is_finished() {
                let _ = server.join();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_id_round_trips_through_text_and_bytes() {
        let id = UniqueId {
            addr: "127.0.0.1:4242".parse().unwrap(),
            cookie: 0xdead_beef_0bad_f00d_0123_4567_89ab_cdef,
        };
        assert_eq!(id.to_string().parse::<UniqueId>().unwrap(), id);
        assert_eq!(UniqueId::from_bytes(&id.to_bytes()).unwrap(), id);
        assert!("nonsense".parse::<UniqueId>().is_err());
    }

    #[test]
    fn threads_rendezvous_and_allgather() {
        let server =
            Server::start("127.0.0.1".parse().unwrap(), Some(Duration::from_secs(10))).unwrap();
        let id = server.id();
        let n = 3;
        let handles: Vec<_> = (0..n)
            .map(|r| {
                std::thread::spawn(move || {
                    let b = UidBootstrap::connect(id, r, n, Some(Duration::from_secs(10)), None)
                        .unwrap();
                    let all = b.allgather(&[r as u8; 3][..r]).unwrap();
                    b.barrier().unwrap();
                    b.finalize().unwrap();
                    all
                })
            })
            .collect();
        for h in handles {
            let all = h.join().unwrap();
            let expect: Vec<Vec<u8>> = (0..n).map(|r| vec![r as u8; r]).collect();
            assert_eq!(all, expect);
        }
        server.join().unwrap();
    }

    #[test]
    fn a_lost_pe_is_reported_to_the_others() {
        let server =
            Server::start("127.0.0.1".parse().unwrap(), Some(Duration::from_secs(10))).unwrap();
        let id = server.id();
        let t = std::thread::spawn(move || {
            let b = UidBootstrap::connect(id, 1, 2, Some(Duration::from_secs(10)), None).unwrap();
            drop(b); // closes without BYE
        });
        let b = UidBootstrap::connect(id, 0, 2, Some(Duration::from_secs(10)), None).unwrap();
        t.join().unwrap();
        let err = b.barrier().unwrap_err();
        assert!(matches!(err, Error::PeerLost { pe: 1, me: 0, .. }), "{err}");
        assert!(server.join().is_err());
    }

    #[test]
    fn a_wrong_cookie_is_refused() {
        let server =
            Server::start("127.0.0.1".parse().unwrap(), Some(Duration::from_secs(2))).unwrap();
        let mut id = server.id();
        id.cookie ^= 1;
        let err = UidBootstrap::connect(id, 0, 1, Some(Duration::from_secs(2)), None).unwrap_err();
        assert!(err.to_string().contains("wrong cookie"), "{err}");
    }

    /// Bytes a client sent to a listener that is not the job's rendezvous (it plays one: challenge, then a
    /// welcome it cannot sign), and what the client made of it.
    fn talk_to_impostor(id_key: u128) -> (Vec<u8>, Error) {
        let fake = TcpListener::bind("127.0.0.1:0").unwrap();
        let id = UniqueId {
            addr: fake.local_addr().unwrap(),
            cookie: id_key,
        };
        let t = std::thread::spawn(move || {
            let (mut s, _) = fake.accept().unwrap();
            write_frame(&mut s, CHALLENGE, &[7u8; NONCE]).unwrap();
            let (kind, hello) = read_frame(&mut s, MAX_FRAME).unwrap();
            assert_eq!(kind, HELLO);
            write_frame(&mut s, ADMITTED, &[]).unwrap();
            write_frame(&mut s, WELCOME, &[0u8; MAC]).unwrap();
            let mut raw = Vec::new();
            raw.extend_from_slice(&hello);
            raw
        });
        let err = UidBootstrap::connect(id, 0, 1, Some(Duration::from_secs(5)), None).unwrap_err();
        (t.join().unwrap(), err)
    }

    #[test]
    fn the_key_never_goes_over_the_wire_and_an_impostor_server_is_refused() {
        let key = random_key().unwrap();
        let (sent, err) = talk_to_impostor(key);
        let k = key.to_le_bytes();
        assert!(
            !sent.windows(k.len()).any(|w| w == k) && !sent.windows(8).any(|w| w == &k[..8]),
            "the hello carries the key"
        );
        assert!(
            matches!(&err, Error::Bootstrap { method: "uid", message } if message.contains("does not hold this job's key")),
            "{err}"
        );
    }

    #[test]
    fn outsiders_are_refused_and_the_job_is_unaffected() {
        let timeout = Some(Duration::from_secs(20));
        let server = Server::start("127.0.0.1".parse().unwrap(), timeout).unwrap();
        let id = server.id();
        // A connection that never answers the challenge, one that answers with garbage, and one with the wrong key.
        let mut silent = TcpStream::connect(id.addr).unwrap();
        let mut garbage = TcpStream::connect(id.addr).unwrap();
        write_frame(&mut garbage, HELLO, &[0u8; HELLO_BYTES]).unwrap();
        let mut wrong = id;
        wrong.cookie ^= 1 << 100;
        let err = UidBootstrap::connect(wrong, 0, 2, timeout, None).unwrap_err();
        assert!(err.to_string().contains("wrong cookie"), "{err}");
        // The real PEs join while the silent connection is still open, and are welcomed.
        let t = std::thread::spawn(move || {
            let b = UidBootstrap::connect(id, 1, 2, timeout, None).unwrap();
            let all = b.allgather(b"one").unwrap();
            b.finalize().unwrap();
            all
        });
        let b = UidBootstrap::connect(id, 0, 2, timeout, None).unwrap();
        let all = b.allgather(b"zero").unwrap();
        b.finalize().unwrap();
        assert_eq!(all, vec![b"zero".to_vec(), b"one".to_vec()]);
        assert_eq!(t.join().unwrap(), all);
        server.join().unwrap();
        // The outsiders were handed a challenge and a refusal (or the close of a pending handshake once every PE
        // was in), never a welcome or a result.
        // On a loaded machine the server may finish before it accepted an outsider's connection, or before the
        // handshake's thread wrote the challenge: then the connection is closed unanswered (end of stream or
        // reset), which is a refusal too. `challenged`: whether the first frame was the challenge (else that close).
        let challenged = |s: &mut TcpStream, who: &str| -> bool {
            match read_frame(s, MAX_FRAME)
                .map(|(k, _)| k)
                .map_err(|e| e.kind())
            {
                Ok(kind) => {
                    assert_eq!(kind, CHALLENGE, "the {who} connection's first frame");
                    true
                }
                Err(kind) => {
                    assert!(
                        matches!(
                            kind,
                            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
                        ),
                        "the {who} connection: {kind:?}"
                    );
                    false
                }
            }
        };
        let _ = silent.set_read_timeout(Some(Duration::from_millis(100)));
        challenged(&mut silent, "silent");
        let more = read_frame(&mut silent, MAX_FRAME)
            .map(|(k, _)| k)
            .map_err(|e| e.kind());
        assert!(
            matches!(
                more,
                Err(std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::UnexpectedEof)
            ),
            "{more:?}"
        );
        // A challenge is followed by the refusal of the garbage hello, never by anything else.
        let _ = garbage.set_read_timeout(Some(Duration::from_secs(5)));
        if challenged(&mut garbage, "garbage") {
            assert_eq!(read_frame(&mut garbage, MAX_FRAME).unwrap().0, FAIL);
        }
    }

    /// A 2-PE job on `id` (threads), each PE's allgather of its rank: what both got.
    fn two_pes_join(id: UniqueId, timeout: Option<Duration>) -> Vec<Vec<Vec<u8>>> {
        let pes: Vec<_> = (0..2)
            .map(|r| {
                std::thread::spawn(move || {
                    let b = UidBootstrap::connect(id, r, 2, timeout, None).unwrap();
                    let all = b.allgather(&[r as u8]).unwrap();
                    b.finalize().unwrap();
                    all
                })
            })
            .collect();
        pes.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn a_huge_job_size_is_refused_by_value_and_the_server_goes_on() {
        let timeout = Some(Duration::from_secs(20));
        let server = Server::start("127.0.0.1".parse().unwrap(), timeout).unwrap();
        let id = server.id();
        // A PE with the key but a wrong size arrives first: 2^40 PEs, and the C ABI's largest int plus one.
        for n in [1usize << 40, 1 << 31] {
            let err = UidBootstrap::connect(id, 1, n, timeout, None).unwrap_err();
            assert!(
                matches!(&err, Error::Bootstrap { message, .. } if message.contains(&format!("says the job has {n} PEs"))),
                "{err}"
            );
        }
        let expect = vec![vec![vec![0u8], vec![1u8]]; 2];
        assert_eq!(two_pes_join(id, timeout), expect);
        server.join().unwrap();
    }

    #[test]
    fn a_long_frame_before_authentication_is_refused_unread() {
        let timeout = Some(Duration::from_secs(20));
        let server = Server::start("127.0.0.1".parse().unwrap(), timeout).unwrap();
        let id = server.id();
        // A 1 GiB frame announced, nothing of it sent: refused at once (the server reads no further).
        let mut s = TcpStream::connect(id.addr).unwrap();
        s.write_all(&(1u32 << 30).to_le_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(read_frame(&mut s, MAX_FRAME).unwrap().0, CHALLENGE);
        let (kind, why) = read_frame(&mut s, MAX_FRAME).unwrap();
        let why = String::from_utf8_lossy(&why);
        assert!(
            kind == FAIL && why.contains("bad frame length 1073741824"),
            "{kind} {why}"
        );
        assert_eq!(two_pes_join(id, timeout).len(), 2);
        server.join().unwrap();
    }

    #[test]
    fn pes_get_in_while_outsiders_hold_every_handshake_slot() {
        let timeout = Some(Duration::from_secs(30));
        let server = Server::start("127.0.0.1".parse().unwrap(), timeout).unwrap();
        let id = server.id();
        // More idle connections than there are slots, all opened before the PEs come.
        let idle: Vec<TcpStream> = (0..MAX_HANDSHAKES + 44)
            .map(|_| TcpStream::connect(id.addr).unwrap())
            .collect();
        assert_eq!(two_pes_join(id, timeout).len(), 2);
        server.join().unwrap();
        drop(idle);
    }

    #[test]
    fn a_trickling_hello_is_cut_at_the_handshake_deadline() {
        // A 2 s deadline (the product's is HANDSHAKE_TIMEOUT): the same accept loop and handshake code, a fifth of
        // the wait.
        let deadline = Duration::from_secs(2);
        let timeout = Some(Duration::from_secs(60));
        let server =
            Server::start_with_deadline("127.0.0.1".parse().unwrap(), timeout, deadline).unwrap();
        let id = server.id();
        // A hello of the right length, one byte every 400 ms: each read succeeds, so only a deadline for the whole
        // handshake ends it.
        let mut s = TcpStream::connect(id.addr).unwrap();
        let start = Instant::now();
        s.write_all(&((1 + HELLO_BYTES) as u32).to_le_bytes())
            .unwrap();
        let mut cut = None;
        for _ in 0..HELLO_BYTES {
            std::thread::sleep(Duration::from_millis(400));
            if s.write_all(&[HELLO]).is_err() {
                cut = Some(start.elapsed());
                break;
            }
        }
        // The security bound: cut within the deadline plus the time to notice (one write after the close).
        let cut = cut.expect("the trickling connection was never cut");
        assert!(
            cut >= deadline && cut <= deadline + Duration::from_secs(5),
            "cut after {cut:?}"
        );
        assert_eq!(two_pes_join(id, timeout).len(), 2);
        server.join().unwrap();
    }
}
