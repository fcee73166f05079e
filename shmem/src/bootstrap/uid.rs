//! Unique-ID bootstrap: a TCP rendezvous served by one process, joined by every PE.
//!
//! Wire format: frames of `u32 length (LE) | u8 kind | payload`. A PE says `HELLO(cookie, rank, size)`; once all
//! `size` PEs have, the server answers `WELCOME` to each. Each collective is one `GATHER(bytes)` from every PE,
//! answered with `RESULT(all contributions)`. `BYE` leaves. A PE whose connection closes without `BYE` is lost: the
//! server tells every other PE `LOST(rank)` at once, so nobody waits for a dead peer.

use super::Bootstrap;
use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const HELLO: u8 = 1;
const GATHER: u8 = 2;
const BYE: u8 = 3;
const WELCOME: u8 = 10;
const RESULT: u8 = 11;
const LOST: u8 = 12;
const FAIL: u8 = 13;
const MAX_FRAME: usize = 1 << 30;
const PREFIX: &str = "xpushmem-uid1";

fn berr(message: impl Into<String>) -> Error {
    Error::Bootstrap {
        method: "uid",
        message: message.into(),
    }
}

/// The identity of one rendezvous: where it listens and the job's secret cookie. Printable and parseable
/// (`xpushmem-uid1:<cookie hex>@<ip:port>`), and convertible to the 128-byte blob of the C ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId {
    /// Address the rendezvous listens on.
    pub addr: SocketAddr,
    /// Random job cookie; connections without it are refused.
    pub cookie: u64,
}

/// Size of the C ABI's unique-ID blob (as NVSHMEM's).
pub const UNIQUE_ID_BYTES: usize = 128;

impl std::fmt::Display for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{PREFIX}:{:016x}@{}", self.cookie, self.addr)
    }
}

impl std::str::FromStr for UniqueId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                "unique id",
                s,
                format!("expected {PREFIX}:<16 hex digits>@<ip:port>"),
            )
        };
        let rest = s
            .trim()
            .strip_prefix(PREFIX)
            .and_then(|r| r.strip_prefix(':'))
            .ok_or_else(bad)?;
        let (cookie, addr) = rest.split_once('@').ok_or_else(bad)?;
        Ok(UniqueId {
            cookie: u64::from_str_radix(cookie, 16).map_err(|_| bad())?,
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

/// A random non-zero 64-bit value (job cookies); falls back to the clock and the pid without getrandom.
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
    let mut buf = Vec::with_capacity(5 + payload.len());
    buf.extend_from_slice(&((payload.len() + 1) as u32).to_le_bytes());
    buf.push(kind);
    buf.extend_from_slice(payload);
    s.write_all(&buf)
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "bad frame length",
        ));
    }
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf)?;
    let kind = buf.remove(0);
    Ok((kind, buf))
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
        let listener = TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(|e| berr(format!("bind {ip}:0: {e}")))?;
        let addr = listener.local_addr().map_err(|e| berr(e.to_string()))?;
        let id = UniqueId {
            addr,
            cookie: random_cookie(),
        };
        let handle = std::thread::Builder::new()
            .name("xpushmem-rendezvous".into())
            .spawn(move || serve(listener, id.cookie, timeout))
            .map_err(|e| berr(format!("spawn rendezvous thread: {e}")))?;
        tracing::debug!(%id, "uid rendezvous serving");
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

fn serve(
    listener: TcpListener,
    cookie: u64,
    timeout: Option<Duration>,
) -> std::result::Result<(), String> {
    let start = Instant::now();
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut conns: Vec<Option<TcpStream>> = Vec::new();
    let mut size: Option<usize> = None;
    let mut joined = 0usize;
    // Phase 1: every PE says hello.
    while size.is_none_or(|n| joined < n) {
        match listener.accept() {
            Ok((mut s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_nodelay(true);
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let Ok((HELLO, p)) = read_frame(&mut s) else {
                    continue;
                };
                if p.len() != 24
                    || u64::from_le_bytes(p[0..8].try_into().unwrap_or_default()) != cookie
                {
                    let _ = write_frame(
                        &mut s,
                        FAIL,
                        b"wrong cookie: this unique ID belongs to another job",
                    );
                    continue;
                }
                let rank = u64::from_le_bytes(p[8..16].try_into().unwrap_or_default()) as usize;
                let n = u64::from_le_bytes(p[16..24].try_into().unwrap_or_default()) as usize;
                let expect = *size.get_or_insert(n);
                if conns.is_empty() {
                    conns.resize_with(n, || None);
                }
                let msg = if n != expect {
                    Some(format!(
                        "PE {rank} says the job has {n} PEs, others say {expect}"
                    ))
                } else if rank >= n {
                    Some(format!("rank {rank} out of range [0, {n})"))
                } else if conns[rank].is_some() {
                    Some(format!("rank {rank} joined twice"))
                } else {
                    None
                };
                if let Some(m) = msg {
                    let _ = write_frame(&mut s, FAIL, m.as_bytes());
                    continue;
                }
                let _ = s.set_read_timeout(None);
                conns[rank] = Some(s);
                joined += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if timeout.is_some_and(|t| start.elapsed() > t) {
                    let missing: Vec<usize> =
                        (0..conns.len()).filter(|&r| conns[r].is_none()).collect();
                    let m = format!(
                        "timed out after {:?} waiting for PEs {missing:?} to join",
                        start.elapsed()
                    );
                    for s in conns.iter_mut().flatten() {
                        let _ = write_frame(s, FAIL, m.as_bytes());
                    }
                    return Err(m);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    }
    let n = conns.len();
    let mut conns: Vec<TcpStream> = conns.into_iter().flatten().collect();
    for s in &mut conns {
        let _ = write_frame(s, WELCOME, &[]);
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
            match read_frame(&mut conns[r]) {
                Ok((GATHER, p)) if pending[r].is_none() => pending[r] = Some(p),
                Ok((BYE, _)) => gone[r] = true,
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

/// A PE's connection to the rendezvous.
#[derive(Debug)]
pub struct UidBootstrap {
    rank: usize,
    size: usize,
    timeout: Option<Duration>,
    conn: Mutex<TcpStream>,
    /// Keeps the server thread of a rendezvous this process serves (the PE that called `get_unique_id`).
    server: Mutex<Option<Server>>,
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
        let mut s = loop {
            match TcpStream::connect_timeout(&id.addr, Duration::from_secs(5)) {
                Ok(s) => break s,
                Err(e)
                    if timeout.is_none_or(|t| start.elapsed() < t)
                        && e.kind() == std::io::ErrorKind::ConnectionRefused =>
                {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => return Err(berr(format!("connect to rendezvous {}: {e}", id.addr))),
            }
        };
        let _ = s.set_nodelay(true);
        s.set_read_timeout(timeout)
            .map_err(|e| berr(e.to_string()))?;
        let mut hello = id.cookie.to_le_bytes().to_vec();
        hello.extend_from_slice(&(rank as u64).to_le_bytes());
        hello.extend_from_slice(&(size as u64).to_le_bytes());
        write_frame(&mut s, HELLO, &hello).map_err(|e| berr(format!("send hello: {e}")))?;
        let b = UidBootstrap {
            rank,
            size,
            timeout,
            conn: Mutex::new(s),
            server: Mutex::new(server),
        };
        {
            let mut conn = b.lock();
            b.expect(&mut conn, WELCOME, "join")?;
        }
        tracing::debug!(rank, size, %id, "uid bootstrap joined");
        Ok(b)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TcpStream> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn expect(&self, conn: &mut TcpStream, kind: u8, op: &str) -> Result<Vec<u8>> {
        let start = Instant::now();
        match read_frame(conn) {
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
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
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
            // The server ends once every PE said BYE; don't block on slow peers' exits beyond the timeout.
            let start = Instant::now();
            while !server.is_finished() && self.timeout.is_none_or(|t| start.elapsed() < t) {
                std::thread::sleep(Duration::from_millis(1));
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
            cookie: 0xdead_beef_0bad_f00d,
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
}
