//! Level Zero transport: a `Window` onto one PE's device heap ([`DeviceWindow`]: our own, or a node peer's mapped
//! from its exported chunks), and the device heaps' set-up (`setup`, called by `connect`) and growth (`Growth`).
//! Every access is bounds-checked here, then issued as a bounded copy, fill or one-work-item atomic of the Level
//! Zero layer (`hal/ze`), which this module re-exports at its old paths.
//!
//! Every heap is a reserve of device address space as large as the most the heap may grow to
//! (`XPUSHMEM_SYMMETRIC_MAX`, see `hal/ze/ipc.rs`), with the device library's scratch tail mapped after it; each PE
//! reserves one such range per node peer as well, so that every heap this device maps stays contiguous at one
//! base however it grows: kernels address a peer as its base (the device library's bases table, written once)
//! plus a symmetric offset.
//!
//! Set-up (collective, at `init` with `XPUSHMEM_HEAP=device`):
//! 1. each PE opens its device (`XPUSHMEM_DEVICE`, else its local rank modulo the device count) or adopts a host
//!    framework's handles, reserves its heap and maps its first chunk (`XPUSHMEM_SYMMETRIC_SIZE`) and its tail;
//! 2. it exports both as file descriptors (dma-buf);
//! 3. by default (`XPUSHMEM_IPC=auto` or `socket`) the node's PEs pass those descriptors over the node's fd
//!    exchange, a Unix socket whose every end is authenticated (`SO_PEERCRED`: this uid, a pid the bootstrap
//!    reported for this job). With `XPUSHMEM_IPC=pidfd` every PE instead takes each node peer's descriptors with
//!    `pidfd_getfd`, which needs ptrace permission: each PE allows any process to trace it
//!    (`PR_SET_PTRACER_ANY`) only while descriptors are being taken, and withdraws that once every PE has its
//!    peers' descriptors;
//! 4. every PE reserves a range per node peer and maps the peer's tail and first chunk into it: `bases[pe]`.
//!
//! Growth (an allocation's agreement, see `team/memory.rs` and `Growth`): each PE maps one more chunk into its
//! own reserve and exports it; after the agreement, the node's PEs pass the new chunks' descriptors over the node's
//! fd exchange (sockets, whatever `XPUSHMEM_IPC` says) and each maps every peer's chunk at the same offset.
//!
//! Team space (where heaps grow): every reserve has the team-scoped allocations' space after the world's, each
//! allocation a chunk of its own per member, passed among the members only (`TeamChunk`, the `Growth::team_*`
//! methods; `team/memory.rs` says when).

use super::shm::{self, FdListener};
use super::{AmoOp, Window};
use crate::abi::ScratchLayout;
use crate::bootstrap::{Bootstrap, Dec, Enc};
use crate::config::IpcMode;
use crate::error::{Error, Result};
#[cfg_attr(not(xpushmem_fabric), allow(unused_imports))] // used by the fabric transport
pub(crate) use crate::hal::ze::HostAlloc;
pub use crate::hal::ze::{
    DeviceSelect, DeviceWindow, ExternalHandles, ZeEvent, ZeRuntime, RUNTIME_KERNELS_SPIRV,
};
use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Device heaps are shared between the window table (`Peers`) and their [`Growth`], which maps peers' new chunks.
impl Window for Arc<DeviceWindow> {
    fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        self.write_at(off, src)
    }
    fn read(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        self.read_at(off, dst)
    }
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<()> {
        self.fill_at(off, len, byte)
    }
    fn len(&self) -> usize {
        DeviceWindow::len(self)
    }
    fn copy_from(&self, off: usize, src: &dyn Window, src_off: usize, len: usize) -> Result<()> {
        // The source's range is checked by the path that reads it (a host mapping's, this runtime's
        // allocations', or the source window's own read).
        self.check(off, len, 1)?;
        // A direct copy from a host mapping of this process, or when the source lies in a device heap of our
        // context (ours, or a peer's mapped in our context); otherwise (a window with no address here, a peer
        // reached through the fabric) through host memory.
        if let Some(h) = src.host_mem() {
            return self.copy_in_host(off, h, src_off, len);
        }
        if !src.base().is_null() && self.copy_in(off, src.base().wrapping_add(src_off), len)? {
            return Ok(());
        }
        let mut buf = vec![0u8; len];
        src.read(src_off, &mut buf)?;
        self.write_at(off, &buf)
    }
    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        self.amo_at(off, width, op, operand)
    }
    fn base(&self) -> *mut u8 {
        DeviceWindow::base(self)
    }
    fn host_accessible(&self) -> bool {
        false
    }
    /// Heaps grow through their [`Growth`] (a peer's chunk needs its descriptor); here only a length that is
    /// reachable already is accepted.
    fn grow(&self, len: usize) -> Result<()> {
        if len <= DeviceWindow::len(self) {
            return Ok(());
        }
        Err(Error::State(format!(
            "a device heap window of {} bytes grows only through the device heaps' growth, not to {len} here",
            DeviceWindow::len(self)
        )))
    }
}

/// Write the bytes of `own` mapped so far into its scratch tail's `mapped` word (at `at` from the tail's start),
/// which device calls check addresses against: at set-up, and after each growth.
fn publish_mapped(own: &DeviceWindow, at: usize) -> Result<()> {
    own.write_tail(at, &(own.len() as u64).to_ne_bytes())
}

/// Write the team space's start and the end of its mapped chunks (bytes from the base; both 0 without a team
/// space) into `own`'s scratch tail (at `at`), which device calls check team-space addresses against: at set-up,
/// and whenever a team chunk is mapped or unmapped.
fn publish_team(own: &DeviceWindow, at: usize) -> Result<()> {
    let start = own.team_offset().unwrap_or(0) as u64;
    let words: Vec<u8> = [start, own.team_end() as u64]
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .collect();
    own.write_tail(at, &words)
}

/// What `Shmem::start` needs to build device heaps.
pub(crate) struct DeviceSetup<'a> {
    pub boot: &'a dyn Bootstrap,
    pub me: usize,
    pub n: usize,
    /// The node peers whose heaps this device maps (this PE included).
    pub local: &'a [usize],
    pub pids: &'a [u32],
    /// Bytes of the heap's first chunk.
    pub size: usize,
    /// The most the heap may grow to (address space reserved for it on every device).
    pub max: usize,
    pub cookie: u64,
    pub timeout: Option<Duration>,
    /// This PE's device, opened by [`open`].
    pub rt: Arc<ZeRuntime>,
    /// `XPUSHMEM_IPC`: how descriptors reach node peers.
    pub ipc: IpcMode,
    /// Entries of the device library's team table ([`crate::config::Config::device_team_slots`]).
    pub team_slots: usize,
    /// Whether every heap gets a team space (team-scoped allocations; always, on one node and over the fabric).
    pub team: bool,
}

fn pick_device(device: Option<usize>, local_rank: usize) -> Result<usize> {
    match device {
        Some(d) => Ok(d),
        None => {
            let count = ZeRuntime::device_count()?;
            if count == 0 {
                return Err(Error::Device("Level Zero reports no device".into()));
            }
            Ok(local_rank % count)
        }
    }
}

/// One window per PE (`None` for PEs this process cannot reach).
pub(crate) type Windows = Vec<Option<Box<dyn Window>>>;

/// Open this PE's device: adopt a host framework's handles (`external`), else `XPUSHMEM_DEVICE` (`device`), else
/// its local rank modulo the device count.
pub(crate) fn open(
    device: Option<usize>,
    external: Option<ExternalHandles>,
    local_rank: usize,
) -> Result<Arc<ZeRuntime>> {
    let select = match external {
        Some(h) => DeviceSelect::External(h),
        None => DeviceSelect::Index(pick_device(device, local_rank)?),
    };
    ZeRuntime::open(select)
}

/// What each PE's device may do on its node peers' devices, as every PE's Level Zero reported it at init
/// ([`ZeRuntime::peer_access`]: `zeDeviceCanAccessPeer`, `zeDeviceGetP2PProperties`); the same on every PE.
#[derive(Debug)]
pub(crate) struct PeerCaps {
    /// `caps[a][b]`: what PE `a`'s device may do on PE `b`'s (0: nothing, 1: access without atomics, 2: access
    /// with atomics; 2 for PEs of other nodes and for `a` itself).
    caps: Vec<Vec<u8>>,
    /// Each PE's device, for messages: its name and UUID.
    names: Vec<String>,
}

impl PeerCaps {
    /// Whether PEs `a` and `b` (of one node) lack peer access with atomics in either direction: their devices
    /// must not address each other's heaps, so they reach each other through the host (the fabric and its proxy).
    pub(crate) fn limited(&self, a: usize, b: usize) -> bool {
        self.caps[a][b] != 2 || self.caps[b][a] != 2
    }

    /// Whether any pair of the job is [`PeerCaps::limited`].
    pub(crate) fn any(&self) -> bool {
        let n = self.caps.len();
        (0..n).any(|a| (0..n).any(|b| self.limited(a, b)))
    }

    /// The first limited pair, described (PEs, devices, what is missing), for messages.
    pub(crate) fn describe(&self, a: usize, b: usize) -> String {
        let what = |c: u8| match c {
            0 => "has no peer access to",
            1 => "has peer access without atomics to",
            _ => "has peer access with atomics to",
        };
        let (x, y) = if self.caps[a][b] != 2 { (a, b) } else { (b, a) };
        format!(
            "PE {x}'s device {} {} PE {y}'s device {} (zeDeviceCanAccessPeer / zeDeviceGetP2PProperties)",
            self.names[x],
            what(self.caps[x][y]),
            self.names[y]
        )
    }

    /// Every limited pair `(a, b)`, `a < b`.
    pub(crate) fn pairs(&self) -> Vec<(usize, usize)> {
        let n = self.caps.len();
        (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .filter(|&(a, b)| self.limited(a, b))
            .collect()
    }
}

/// Ask this PE's device what it may do on each node peer's device (`local`: this PE's node), and learn every
/// PE's answers. Collective over all PEs (device heaps).
pub(crate) fn peer_caps(
    boot: &dyn Bootstrap,
    rt: &ZeRuntime,
    me: usize,
    local: &[usize],
) -> Result<PeerCaps> {
    let rec = Enc::default()
        .bytes(&rt.uuid())
        .bytes(rt.name().as_bytes())
        .0;
    let all = boot.allgather(&rec)?;
    let n = all.len();
    let mut uuids = Vec::with_capacity(n);
    let mut names = Vec::with_capacity(n);
    for (pe, r) in all.iter().enumerate() {
        let mut d = Dec(r);
        let bad = || Error::Device(format!("malformed device record from PE {pe}"));
        let u: [u8; 16] = d.bytes().and_then(|b| b.try_into().ok()).ok_or_else(bad)?;
        let name = String::from_utf8_lossy(d.bytes().ok_or_else(bad)?).into_owned();
        names.push(format!("{name} (UUID {})", crate::hal::ze::uuid_text(&u)));
        uuids.push(u);
    }
    let mut row = vec![2u8; n];
    for &p in local.iter().filter(|&&p| p != me) {
        let c = rt.peer_access(&uuids[p])?;
        row[p] = match (c.access, c.atomics) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => 2,
        };
    }
    let rows = boot.allgather(&row)?;
    let caps: Vec<Vec<u8>> = rows
        .into_iter()
        .enumerate()
        .map(|(pe, r)| {
            if r.len() == n {
                Ok(r)
            } else {
                Err(Error::Device(format!(
                    "malformed peer-access record from PE {pe}"
                )))
            }
        })
        .collect::<Result<_>>()?;
    Ok(PeerCaps { caps, names })
}

/// How many descriptors each PE shares at set-up: its scratch tail's and its first chunk's.
const SETUP_FDS: usize = 2;

/// Build this PE's device heap and map every node peer's. Collective over all PEs.
pub(crate) fn setup(s: DeviceSetup<'_>) -> Result<(Arc<ZeRuntime>, Windows, Growth)> {
    let mode = s.ipc;
    let rt = s.rt;
    let layout = ScratchLayout::new(s.n, s.team_slots);
    let own = Arc::new(rt.reserve_heap(s.size, s.max, layout.bytes, s.team)?);
    // The device library's scratch (barrier counters, bases table) starts zeroed on every PE before any peer can
    // reach it (peers map our heap only after the allgather below).
    own.zero_tail()?;
    let mine = [own.export_fd(own.tail_offset())?, own.export_fd(0)?];
    let pidfd = mode == IpcMode::Pidfd;
    if pidfd {
        // Let node peers take the heap's descriptors with pidfd_getfd (Yama ptrace scope 1 needs this); withdrawn
        // below once every PE has taken its peers'.
        let _ = rustix::process::set_ptracer(rustix::process::PTracer::Any);
    }
    let mut rec = Enc::default()
        .u64(own.page_size() as u64)
        .u64(own.tail_offset() as u64);
    for f in &mine {
        rec = rec.u64(f.as_raw_fd() as u32 as u64);
    }
    let all = s.boot.allgather(&rec.0)?;
    let mut numbers: Vec<[i32; SETUP_FDS]> = Vec::with_capacity(s.n);
    for (pe, r) in all.iter().enumerate() {
        let mut d = Dec(r);
        let bad = || Error::Device(format!("malformed device-heap record from PE {pe}"));
        let (page, tail_off) = (d.u64().ok_or_else(bad)?, d.u64().ok_or_else(bad)?);
        if page != own.page_size() as u64 || tail_off != own.tail_offset() as u64 {
            return Err(Error::Device(format!(
                "PE {pe}'s device maps heaps in pages of {page} bytes with the scratch at {tail_off}, this PE's \
                 in pages of {} at {}: symmetric heaps need the same device page size on every PE",
                own.page_size(),
                own.tail_offset()
            )));
        }
        let mut fds = [0i32; SETUP_FDS];
        for f in &mut fds {
            *f = d.u64().ok_or_else(bad)? as u32 as i32;
        }
        numbers.push(fds);
    }
    // Take every node peer's descriptors: pidfd_getfd first, SCM_RIGHTS when any PE could not.
    let mut fds: Vec<Vec<OwnedFd>> = (0..s.n).map(|_| Vec::new()).collect();
    let mut ok = pidfd;
    if ok {
        'peers: for &pe in s.local.iter().filter(|&&p| p != s.me) {
            for &number in &numbers[pe] {
                let got = rustix::process::Pid::from_raw(s.pids[pe] as i32)
                    .ok_or(rustix::io::Errno::SRCH)
                    .and_then(|pid| {
                        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
                    })
                    .and_then(|pidfd| {
                        rustix::process::pidfd_getfd(
                            &pidfd,
                            number,
                            rustix::process::PidfdGetfdFlags::empty(),
                        )
                    });
                match got {
                    Ok(f) => fds[pe].push(f),
                    Err(e) => {
                        tracing::debug!(
                            pe = s.me,
                            peer = pe,
                            "pidfd_getfd refused ({e}); will pass fds over a socket"
                        );
                        ok = false;
                        break 'peers;
                    }
                }
            }
        }
    }
    let verdicts = s.boot.allgather(&[ok as u8])?;
    if pidfd {
        // Every PE has taken what it could: nobody needs to trace this process any more.
        let _ = rustix::process::set_ptracer(rustix::process::PTracer::None);
    }
    let all_ok = verdicts.iter().all(|v| v.first() == Some(&1));
    if !all_ok {
        if pidfd {
            return Err(Error::Device(
                "XPUSHMEM_IPC=pidfd, but pidfd_getfd was refused on some PE (ptrace permission)"
                    .into(),
            ));
        }
        fds.iter_mut().for_each(Vec::clear);
        // Names of their own, derived from the job's secret: the host exchange's name does not predict them.
        let cookies: Vec<u64> = (0..SETUP_FDS)
            .map(|i| crate::transport::fdx::exchange_cookie(s.cookie, &format!("device-{i}")))
            .collect();
        let mut listeners = Vec::new();
        for &c in &cookies {
            listeners.push(if s.local[0] == s.me && s.local.len() > 1 {
                Some(FdListener::bind(c, s.me)?)
            } else {
                None
            });
        }
        s.boot.barrier()?;
        if s.local.len() > 1 {
            for ((c, listener), f) in cookies.into_iter().zip(listeners).zip(&mine) {
                let got =
                    shm::exchange_fds(c, s.local, s.pids, s.me, f.as_fd(), listener, s.timeout)?;
                for (&pe, f) in s.local.iter().zip(got) {
                    if pe != s.me {
                        fds[pe].push(f);
                    }
                }
            }
        }
    }
    let mut maps: Windows = (0..s.n).map(|_| None).collect();
    let mut peers = Vec::new();
    for &pe in s.local {
        if pe == s.me {
            continue;
        }
        let [tail, first] = <[OwnedFd; SETUP_FDS]>::try_from(std::mem::take(&mut fds[pe]))
            .map_err(|_| Error::Device(format!("no heap descriptors from PE {pe}")))?;
        let w = Arc::new(rt.reserve_peer_heap(s.max, layout.bytes, s.team)?);
        w.map_tail(layout.bytes, tail.as_fd())?;
        w.grow_to(s.size, Some(first.as_fd()))?;
        // The driver holds its own references to the imported memory now; our descriptors close here.
        peers.push((pe, Arc::clone(&w)));
        maps[pe] = Some(Box::new(w));
    }
    drop(mine);
    // Every PE's heap base as this device sees it, for the device library (0: not reachable from here).
    let mut bases: Vec<u8> = Vec::with_capacity(8 * s.n);
    for (pe, map) in maps.iter().enumerate() {
        let b = if pe == s.me {
            own.base() as u64
        } else {
            map.as_ref().map_or(0, |w| w.base() as u64)
        };
        bases.extend_from_slice(&b.to_ne_bytes());
    }
    // The bases table lies inside our heap's tail (the layout covers 8 bytes per PE).
    own.write_tail(layout.bases, &bases)?;
    publish_mapped(&own, layout.mapped)?;
    publish_team(&own, layout.team)?;
    maps[s.me] = Some(Box::new(Arc::clone(&own)));
    tracing::debug!(
        pe = s.me,
        device = rt.name(),
        ipc = if all_ok { "pidfd_getfd" } else { "SCM_RIGHTS" },
        reserve = s.max,
        "device heap mapped"
    );
    s.boot.barrier()?;
    let growth = Growth {
        me: s.me,
        local: s.local.to_vec(),
        pids: s.pids.to_vec(),
        cookie: s.cookie,
        timeout: s.timeout,
        own,
        peers,
        pending: Mutex::new(None),
        mapped_word: layout.mapped,
        team_words: layout.team,
        team_publish: Mutex::new(()),
    };
    Ok((rt, maps, growth))
}

/// A chunk this PE mapped at an allocation's agreement, waiting for the node peers to take it
/// ([`Growth::grow_own`], then [`Growth::grow_peers`] or [`Growth::abort`]).
#[derive(Debug)]
struct Pending {
    /// The heap's length before.
    from_len: usize,
    /// Where the chunk starts.
    at: usize,
    /// Its descriptor.
    fd: OwnedFd,
    /// The node's exchange socket (node leader only).
    listener: Option<FdListener>,
}

/// How device heaps grow (see `team/memory.rs`): at an allocation's agreement each PE maps a new chunk into its
/// own reserve ([`Growth::grow_own`]); once the agreement has published every PE's outcome, the node's PEs pass the
/// new chunks' descriptors over the node's fd exchange (a socket named by the job's secret and the chunk's offset,
/// bound by the node leader before the agreement, so it exists when the others connect) and each maps every node
/// peer's chunk at the same offset of its reserve for that peer ([`Growth::grow_peers`]). The chunks' boundaries
/// are the same on every PE (the same page size, checked at set-up, and the same history of lengths).
#[derive(Debug)]
pub(crate) struct Growth {
    me: usize,
    /// The node peers whose heaps this device maps (this PE included; the exchange's leader first).
    local: Vec<usize>,
    pids: Vec<u32>,
    cookie: u64,
    timeout: Option<Duration>,
    own: Arc<DeviceWindow>,
    /// The node peers' heaps as this PE maps them.
    peers: Vec<(usize, Arc<DeviceWindow>)>,
    pending: Mutex<Option<Pending>>,
    /// Where the scratch tail's `mapped` word lies ([`crate::abi::ScratchLayout::mapped`], from the tail's start).
    mapped_word: usize,
    /// Where the scratch tail's team-space words lie ([`crate::abi::ScratchLayout::team`]).
    team_words: usize,
    /// Held while the team-space words are computed and written, so that allocations and frees of several teams
    /// at once leave the latest end there.
    team_publish: Mutex<()>,
}

impl Growth {
    /// Where the device library's scratch tail lies in every PE's heap, in bytes from its base.
    pub(crate) fn tail_offset(&self) -> usize {
        self.own.tail_offset()
    }

    /// Where this PE's heap's next chunk starts: the bytes mapped so far, page-rounded.
    pub(crate) fn mapped_end(&self) -> Result<usize> {
        self.own.mapped_end()
    }

    /// This PE's scratch tail: its offset from the heap's base and its bytes.
    #[cfg_attr(not(xpushmem_fabric), allow(dead_code))]
    pub(crate) fn tail(&self) -> (usize, usize) {
        (self.own.tail_offset(), self.own.tail)
    }

    /// The exchange's name for the chunk at `at`.
    fn chunk_cookie(&self, at: usize) -> u64 {
        crate::transport::fdx::exchange_cookie(self.cookie, &format!("device-chunk-{at}"))
    }

    /// Grow this PE's own heap to `len` bytes: map the chunk that covers it (none when the pages mapped already
    /// do), export it, and on the node leader bind the exchange the node's PEs will pass their chunks over.
    pub(crate) fn grow_own(&self, len: usize) -> Result<()> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        *pending = None;
        let from_len = self.own.len();
        let at = self.own.mapped_end()?;
        if !self.own.grow_to(len, None)? {
            return Ok(());
        }
        let fd = match self.own.export_fd(at) {
            Ok(fd) => fd,
            Err(e) => {
                self.own.shrink_to(from_len);
                return Err(e);
            }
        };
        let listener = if self.local.len() > 1 && self.local[0] == self.me {
            match FdListener::bind(self.chunk_cookie(at), self.me) {
                Ok(l) => Some(l),
                Err(e) => {
                    self.own.shrink_to(from_len);
                    return Err(e);
                }
            }
        } else {
            None
        };
        *pending = Some(Pending {
            from_len,
            at,
            fd,
            listener,
        });
        Ok(())
    }

    /// The agreement failed: undo [`Growth::grow_own`] (no peer has taken the chunk).
    pub(crate) fn abort(&self) {
        let p = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(p) = p {
            self.own.shrink_to(p.from_len);
        }
    }

    /// Every PE grew its own heap to `len` bytes: take the node peers' new chunks and map them (collective over
    /// the node's mapped PEs: the exchange), then tell this PE's device calls the new length (the tail's `mapped`
    /// word; every PE's heap has it now, and no pointer into the new part exists before the allocation returns).
    pub(crate) fn grow_peers(&self, len: usize) -> Result<()> {
        self.map_peers(len)?;
        publish_mapped(&self.own, self.mapped_word)
    }

    /// [`Growth::grow_peers`]'s mapping of the node peers' new chunks.
    fn map_peers(&self, len: usize) -> Result<()> {
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(p) = pending else {
            // No new pages anywhere (the same on every PE): only the lengths change.
            return self
                .peers
                .iter()
                .try_for_each(|(_, w)| w.grow_to(len, None).map(drop));
        };
        if self.peers.is_empty() {
            return Ok(());
        }
        let got = shm::exchange_fds(
            self.chunk_cookie(p.at),
            &self.local,
            &self.pids,
            self.me,
            p.fd.as_fd(),
            p.listener,
            self.timeout,
        )?;
        for (&pe, f) in self.local.iter().zip(got) {
            if let Some((_, w)) = self.peers.iter().find(|(q, _)| *q == pe) {
                w.grow_to(len, Some(f.as_fd()))?;
            }
        }
        Ok(())
    }
}

/// One team-scoped allocation's chunk that this PE mapped into its own team space, waiting for the allocation's
/// other members to take it ([`Growth::team_grow_own`], then [`Growth::team_map_peers`] or
/// [`Growth::team_abort`]).
#[derive(Debug)]
pub(crate) struct TeamChunk {
    /// Where it starts, in bytes from the heap's base (in the team space).
    off: usize,
    /// Its bytes (whole pages).
    len: usize,
    /// Its descriptor.
    fd: OwnedFd,
    /// The members' exchange socket (on their first member only).
    listener: Option<FdListener>,
    /// The allocation's members whose heaps this device maps (this PE among them), ascending: those that pass
    /// their chunks among themselves (members reached through the fabric adopt its registration instead).
    members: Vec<usize>,
}

/// Team-scoped allocations on device heaps (`team/memory.rs`, `team/members.rs`): each allocation is a chunk of
/// its own, whole pages at the same offset of every member's team space, mapped by its members only. Each member
/// maps and exports its chunk ([`Growth::team_grow_own`]); once the team's agreement has published that every
/// member could, the members pass the chunks' descriptors among themselves only (the node's fd exchange with the
/// members as its PEs, led by the first member, on a socket named by the job's secret, the offset and the member
/// list) and map each other's ([`Growth::team_map_peers`]). A free unmaps the chunk and the members' mappings of
/// each other's ([`Growth::team_unmap`]), so that a later allocation of other members at the same offset maps
/// fresh chunks.
impl Growth {
    /// Where the team space starts in every PE's heap, in bytes from its base (`None`: the heaps have none).
    pub(crate) fn team_base(&self) -> Option<usize> {
        self.own.team_offset()
    }

    /// The device's page size: what team-scoped allocations are rounded up and aligned to.
    pub(crate) fn page_size(&self) -> usize {
        self.own.page_size()
    }

    /// The exchange's name for the chunks of the allocation at `off` of `members` (ascending).
    fn team_cookie(&self, off: usize, members: &[usize]) -> u64 {
        crate::transport::fdx::exchange_cookie(
            self.cookie,
            &format!("device-team-{off}-{members:?}"),
        )
    }

    /// Map this PE's chunk of the team-scoped allocation `[off, off + len)` (whole pages of the team space) of
    /// `members` (the team's PEs, this one among them), export it, and on the first member this device maps bind
    /// the exchange those members will pass their chunks over (before the agreement, so that it exists when the
    /// others connect).
    pub(crate) fn team_grow_own(
        &self,
        off: usize,
        len: usize,
        members: &[usize],
    ) -> Result<TeamChunk> {
        // Only the members this device maps take each other's chunks (the others, over the fabric, are reached
        // through the chunk's registration: `Peers::team_device_register`).
        let mut members: Vec<usize> = members
            .iter()
            .copied()
            .filter(|p| self.local.contains(p))
            .collect();
        members.sort_unstable();
        self.own.map_team(off, len, None)?;
        let undo = |e: Error| {
            self.own.unmap_team(off);
            e
        };
        let fd = self.own.export_fd(off).map_err(undo)?;
        let listener = if members.len() > 1 && members[0] == self.me {
            Some(FdListener::bind(self.team_cookie(off, &members), self.me).map_err(undo)?)
        } else {
            None
        };
        Ok(TeamChunk {
            off,
            len,
            fd,
            listener,
            members,
        })
    }

    /// The allocation's agreement failed: unmap this PE's chunk (no member has taken it).
    pub(crate) fn team_abort(&self, c: TeamChunk) {
        self.own.unmap_team(c.off);
    }

    /// Every member mapped its chunk (the agreement said so): take the other members' chunks over the members'
    /// exchange and map each at the same offset of this PE's reserve for that member, then tell this PE's device
    /// calls the team space's new end. On an error nothing of the allocation stays mapped here.
    pub(crate) fn team_map_peers(&self, mut c: TeamChunk) -> Result<()> {
        let listener = c.listener.take();
        let r = self.team_exchange(&c, listener);
        if r.is_err() {
            self.team_unmap(c.off, &c.members);
        }
        r?;
        self.publish_team()
    }

    /// Write this PE's team-space words ([`publish_team`]), one writer at a time.
    fn publish_team(&self) -> Result<()> {
        let _one = self.team_publish.lock().unwrap_or_else(|p| p.into_inner());
        publish_team(&self.own, self.team_words)
    }

    /// [`Growth::team_map_peers`]'s exchange and mappings.
    fn team_exchange(&self, c: &TeamChunk, listener: Option<FdListener>) -> Result<()> {
        if c.members.len() < 2 {
            return Ok(());
        }
        let got = shm::exchange_fds(
            self.team_cookie(c.off, &c.members),
            &c.members,
            &self.pids,
            self.me,
            c.fd.as_fd(),
            listener,
            self.timeout,
        )?;
        for (&pe, f) in c.members.iter().zip(got) {
            if pe == self.me {
                continue;
            }
            let (_, w) = self.peers.iter().find(|(q, _)| *q == pe).ok_or_else(|| {
                Error::State(format!(
                    "PE {pe}'s heap is not mapped by this device: no team allocation with it"
                ))
            })?;
            w.map_team(c.off, c.len, Some(f.as_fd()))?;
        }
        Ok(())
    }

    /// The team-scoped allocation at `off` of `members` is freed (its team agreed): unmap this PE's chunk and its
    /// mappings of the other members' chunks, then tell this PE's device calls the team space's new end.
    pub(crate) fn team_unmap(&self, off: usize, members: &[usize]) {
        self.own.unmap_team(off);
        for (pe, w) in &self.peers {
            if members.contains(pe) {
                w.unmap_team(off);
            }
        }
        let _ = self.publish_team();
    }
}
