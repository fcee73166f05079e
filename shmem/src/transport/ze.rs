//! Level Zero transport: [`DeviceWindow`], a `Window` onto one PE's device heap (our own allocation, or a
//! peer's opened through IPC), and the device heaps' set-up (`setup`, called by `connect`). Every access is
//! bounds-checked here, then issued as a bounded copy, fill or one-work-item atomic of the Level Zero layer
//! (`hal/ze`), which this module re-exports at its old paths.
//!
//! Set-up (collective, at `init` with `XPUSHMEM_HEAP=device`):
//! 1. each PE opens its device (`XPUSHMEM_DEVICE`, else its local rank modulo the device count) or adopts a host
//!    framework's handles, and allocates its heap with `zeMemAllocDevice`;
//! 2. it exports the heap's IPC handle, whose first bytes carry a file descriptor;
//! 3. by default (`XPUSHMEM_IPC=auto` or `socket`) the node's PEs pass those descriptors over the node's fd
//!    exchange, a Unix socket whose every end is authenticated (`SO_PEERCRED`: this uid, a pid the bootstrap
//!    reported for this job). With `XPUSHMEM_IPC=pidfd` every PE instead takes each node peer's descriptor with
//!    `pidfd_getfd`, which needs ptrace permission: each PE allows any process to trace it
//!    (`PR_SET_PTRACER_ANY`) only while descriptors are being taken, and withdraws that once every PE has its
//!    peers' descriptors;
//! 4. every PE opens each peer's handle (descriptor patched in) with `zeMemOpenIpcHandle`: `bases[pe]`.

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
use std::sync::Arc;
use std::time::Duration;

impl Window for DeviceWindow {
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
    /// The heap and the device library's scratch tail after it (`abi::ScratchLayout`), which the host proxy of a
    /// peer's kernels reaches through the fabric (barrier arrivals, the reduction scratch area).
    fn contiguous_len(&self) -> usize {
        DeviceWindow::len(self) + self.tail
    }
    fn copy_from(&self, off: usize, src: &dyn Window, src_off: usize, len: usize) -> Result<()> {
        super::check_access("ze", "access", off, len, 1, DeviceWindow::len(self))?;
        super::check_access("ze", "source range", src_off, len, 1, src.len())?;
        // A direct copy from a host mapping of this process, or when the source lies in a device heap of our
        // context (ours, or a peer's opened through IPC); otherwise (a window with no address here, a peer reached
        // through the fabric) through host memory.
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
}

/// What `Shmem::start` needs to build device heaps.
pub(crate) struct DeviceSetup<'a> {
    pub boot: &'a dyn Bootstrap,
    pub me: usize,
    pub n: usize,
    /// The node peers whose heaps this device maps (this PE included).
    pub local: &'a [usize],
    pub pids: &'a [u32],
    pub size: usize,
    pub cookie: u64,
    pub timeout: Option<Duration>,
    /// This PE's device, opened by [`open`].
    pub rt: Arc<ZeRuntime>,
    /// `XPUSHMEM_IPC`: how descriptors reach node peers.
    pub ipc: IpcMode,
    /// Entries of the device library's team table ([`crate::config::Config::device_team_slots`]).
    pub team_slots: usize,
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

/// Build this PE's device heap and open every node peer's. Collective over all PEs.
pub(crate) fn setup(s: DeviceSetup<'_>) -> Result<(Arc<ZeRuntime>, Windows)> {
    let mode = s.ipc;
    let rt = s.rt;
    let layout = ScratchLayout::new(s.n, s.team_slots);
    let own = rt.alloc_heap_with_tail(s.size, layout.bytes)?;
    // The device library's scratch (barrier counters, bases table) starts zeroed on every PE before any peer can
    // reach it (peers open our heap only after the allgather below).
    own.zero_tail()?;
    let (handle, fd) = rt.ipc_handle(&own)?;
    let pidfd = mode == IpcMode::Pidfd;
    if pidfd {
        // Let node peers take the heap's descriptor with pidfd_getfd (Yama ptrace scope 1 needs this); withdrawn
        // below once every PE has taken its peers'.
        let _ = rustix::process::set_ptracer(rustix::process::PTracer::Any);
    }
    let rec = Enc::default().u64(fd as u32 as u64).bytes(&handle).0;
    let all = s.boot.allgather(&rec)?;
    let mut peers: Vec<(usize, i32, [u8; 64])> = Vec::new();
    for (pe, r) in all.iter().enumerate() {
        let mut d = Dec(r);
        let bad = || Error::Device(format!("malformed device-heap record from PE {pe}"));
        let pfd = d.u64().ok_or_else(bad)? as u32 as i32;
        let h: [u8; 64] = d.bytes().and_then(|b| b.try_into().ok()).ok_or_else(bad)?;
        peers.push((pe, pfd, h));
    }
    // Take every node peer's descriptor: pidfd_getfd first, SCM_RIGHTS when any PE could not.
    let mut fds: Vec<Option<OwnedFd>> = (0..s.n).map(|_| None).collect();
    let mut ok = pidfd;
    if ok {
        for &pe in s.local.iter().filter(|&&p| p != s.me) {
            let got = rustix::process::Pid::from_raw(s.pids[pe] as i32)
                .ok_or(rustix::io::Errno::SRCH)
                .and_then(|pid| {
                    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
                })
                .and_then(|pidfd| {
                    rustix::process::pidfd_getfd(
                        &pidfd,
                        peers[pe].1,
                        rustix::process::PidfdGetfdFlags::empty(),
                    )
                });
            match got {
                Ok(f) => fds[pe] = Some(f),
                Err(e) => {
                    tracing::debug!(
                        pe = s.me,
                        peer = pe,
                        "pidfd_getfd refused ({e}); will pass fds over a socket"
                    );
                    ok = false;
                    break;
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
        fds.iter_mut().for_each(|f| *f = None);
        // A name of its own, derived from the job's secret: the host exchange's name does not predict it.
        let cookie = crate::transport::fdx::exchange_cookie(s.cookie, "device");
        let listener = if s.local[0] == s.me && s.local.len() > 1 {
            Some(FdListener::bind(cookie, s.me)?)
        } else {
            None
        };
        s.boot.barrier()?;
        if s.local.len() > 1 {
            // The raw fd number names the driver's own live descriptor for our heap; borrow and duplicate it.
            let own_fd = rustix::io::dup(shm::borrow_raw_fd(fd)?)
                .map_err(|e| Error::os("dup(device heap fd)", e))?;
            let got = shm::exchange_fds(
                cookie,
                s.local,
                s.pids,
                s.me,
                own_fd.as_fd(),
                listener,
                s.timeout,
            )?;
            for (&pe, f) in s.local.iter().zip(got) {
                if pe != s.me {
                    fds[pe] = Some(f);
                }
            }
        }
    }
    let mut maps: Windows = (0..s.n).map(|_| None).collect();
    for &pe in s.local {
        if pe == s.me {
            continue;
        }
        let f = fds[pe]
            .take()
            .ok_or_else(|| Error::Device(format!("no heap descriptor from PE {pe}")))?;
        let w = rt.open_ipc(&peers[pe].2, f.as_raw_fd(), s.size)?;
        drop(f); // the driver holds its own reference now
        maps[pe] = Some(Box::new(w));
    }
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
    // The bases table lies inside our allocation's tail (the layout covers 8 bytes per PE).
    own.write_tail(layout.bases, &bases)?;
    maps[s.me] = Some(Box::new(own));
    tracing::debug!(
        pe = s.me,
        device = rt.name(),
        ipc = if all_ok { "pidfd_getfd" } else { "SCM_RIGHTS" },
        "device heap mapped"
    );
    s.boot.barrier()?;
    Ok((rt, maps))
}
