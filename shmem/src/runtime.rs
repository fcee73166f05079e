//! The runtime handle [`Shmem`]: start-up, the PE and node layout, validation of every argument, waits with
//! back-off and failure detection, and shutdown.

use crate::bootstrap::{self, Bootstrap, Dec, Enc, UniqueId};
use crate::config::Config;
use crate::device::{Device, HeapKind};
use crate::error::{Error, Result};
use crate::heap::Allocator;
use crate::team::CallId;
use crate::transport::dataseg::SymData;
use crate::transport::shm::PeerWatch;
use crate::transport::ze::ExternalHandles;
use crate::transport::{self, AmoOp, Peers, Transport, Window};
use crate::types::ThreadLevel;
use once_cell::sync::OnceCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ACTIVE: AtomicBool = AtomicBool::new(false);
static PENDING_SERVER: Mutex<Option<bootstrap::uid::Server>> = Mutex::new(None);
static LOGGING: OnceCell<()> = OnceCell::new();

/// Values of the per-PE state word.
const STATE_RUNNING: u64 = 1;
const STATE_FINALIZED: u64 = 2;
/// Bytes of the runtime's own region at the start of every PE's host arena (page aligned); the user heap follows.
pub(crate) const SYS_BYTES: usize = 64 << 10;
/// Where the runtime's words live in the system region (the same on every PE).
pub(crate) const SYNC: SyncLayout = SyncLayout { state: 0 };

/// How a runtime should find its peers.
#[derive(Debug, Clone, Default)]
pub enum BootstrapSpec {
    /// From the environment (`XPUSHMEM_BOOTSTRAP` and friends).
    #[default]
    Env,
    /// Join the rendezvous `uid` as `rank` of `size` PEs.
    Uid {
        /// The unique ID (from [`get_unique_id`] on one process).
        uid: UniqueId,
        /// This PE's number.
        rank: usize,
        /// Number of PEs.
        size: usize,
    },
    /// A one-PE job.
    Single,
    /// The MPI world communicator (feature `mpi`).
    #[cfg(feature = "mpi")]
    Mpi,
}

/// Arguments of [`init_attr`].
#[derive(Debug, Clone)]
pub struct InitAttr {
    /// How to find the peers.
    pub bootstrap: BootstrapSpec,
    /// Requested thread level.
    pub thread_level: ThreadLevel,
    /// Where the symmetric heap lives; `None`: `XPUSHMEM_HEAP` (default host).
    pub heap: Option<HeapKind>,
    /// Level Zero handles to adopt for a device heap (from SYCL or PyTorch XPU) instead of opening a device.
    pub device_handles: Option<ExternalHandles>,
    /// Make the executable's writable data segment (global and static variables) symmetric, as OpenSHMEM requires
    /// (host heaps only; see `transport::dataseg`). Off by default; the OpenSHMEM C layer turns it on.
    pub symmetric_data: bool,
    /// Apply the OpenSHMEM specification's environment variables (`SHMEM_SYMMETRIC_SIZE`, `SHMEM_DEBUG`; see
    /// [`Config::apply_openshmem`]). Off by default; the OpenSHMEM C layer turns it on.
    pub openshmem_env: bool,
}

impl Default for InitAttr {
    fn default() -> Self {
        InitAttr {
            bootstrap: BootstrapSpec::Env,
            thread_level: ThreadLevel::Multiple,
            heap: None,
            device_handles: None,
            symmetric_data: false,
            openshmem_env: false,
        }
    }
}

/// Create the unique ID of a new job and serve its rendezvous from this process (NVSHMEM's
/// `nvshmemx_get_uniqueid`). Pass it to every PE (e.g. through a framework's store), then call [`init_attr`] with
/// [`BootstrapSpec::Uid`] on each, this process included.
pub fn get_unique_id() -> Result<UniqueId> {
    let cfg = Config::from_env()?;
    let server = bootstrap::uid::Server::start(cfg.bootstrap_addr, cfg.timeout)?;
    let id = server.id();
    *PENDING_SERVER.lock().unwrap_or_else(|p| p.into_inner()) = Some(server);
    Ok(id)
}

/// Start the runtime with the bootstrap named by the environment, at thread level MULTIPLE.
pub fn init() -> Result<Shmem> {
    init_attr(InitAttr::default())
}

/// Start the runtime at a requested thread level. Every level is supported, so the provided level is the
/// requested one ([`Shmem::query_thread`]).
pub fn init_thread(level: ThreadLevel) -> Result<Shmem> {
    init_attr(InitAttr {
        thread_level: level,
        ..InitAttr::default()
    })
}

/// Start a one-PE runtime regardless of the environment (handy for documentation and unit tests).
pub fn init_single() -> Result<Shmem> {
    init_attr(InitAttr {
        bootstrap: BootstrapSpec::Single,
        ..InitAttr::default()
    })
}

fn init_logging(level: &str) {
    LOGGING.get_or_init(|| {
        let lvl = match level {
            "off" => None,
            "error" => Some(tracing::Level::ERROR),
            "warn" => Some(tracing::Level::WARN),
            "info" => Some(tracing::Level::INFO),
            "debug" => Some(tracing::Level::DEBUG),
            _ => Some(tracing::Level::TRACE),
        };
        if let Some(lvl) = lvl {
            let _ = tracing_subscriber::fmt()
                .with_max_level(lvl)
                .with_writer(std::io::stderr)
                .with_target(false)
                .try_init();
        }
    });
}

/// This PE's node: `XPUSHMEM_NODE_ID` when set, else the host name, boot id and network namespace (the shm
/// transport meets its node peers on abstract Unix sockets, which a network namespace does not share: PEs of one
/// host in different namespaces, e.g. containers, reach each other through the fabric).
fn host_key(cfg: &Config) -> String {
    if let Some(id) = cfg.node_id.as_deref().filter(|s| !s.is_empty()) {
        return format!("{id}/node-id");
    }
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let net = std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{host}/{}/{net}", machine_key())
}

/// A variable the uid bootstrap needs (xpushmem-run sets it).
fn required<T: Copy>(var: &'static str, value: Option<T>) -> Result<T> {
    value.ok_or_else(|| Error::Config {
        var,
        value: String::new(),
        reason: "required by the uid bootstrap (set by xpushmem-run)".into(),
    })
}

fn make_bootstrap(spec: &BootstrapSpec, cfg: &Config) -> Result<Box<dyn Bootstrap>> {
    let take_server = |id: &UniqueId| {
        let mut g = PENDING_SERVER.lock().unwrap_or_else(|p| p.into_inner());
        if g.as_ref().is_some_and(|s| s.id() == *id) {
            g.take()
        } else {
            None
        }
    };
    match spec {
        BootstrapSpec::Single => Ok(Box::new(bootstrap::single::Single)),
        BootstrapSpec::Uid { uid, rank, size } => {
            Ok(Box::new(bootstrap::uid::UidBootstrap::connect(
                *uid,
                *rank,
                *size,
                cfg.timeout,
                take_server(uid),
            )?))
        }
        #[cfg(feature = "mpi")]
        BootstrapSpec::Mpi => Ok(Box::new(bootstrap::mpi::MpiBootstrap::new()?)),
        BootstrapSpec::Env => {
            let uid_text = cfg.bootstrap_uid.clone();
            let method = match cfg.bootstrap.as_str() {
                "auto" if uid_text.is_some() => "uid",
                "auto" if cfg!(feature = "mpi") && under_mpi_launcher() => "mpi",
                "auto" => "single",
                m => m,
            };
            match method {
                "uid" => {
                    let text = uid_text.ok_or_else(|| Error::Config {
                        var: "XPUSHMEM_BOOTSTRAP_UID",
                        value: String::new(),
                        reason: "XPUSHMEM_BOOTSTRAP=uid needs the unique ID (xpushmem-run sets it)"
                            .into(),
                    })?;
                    let uid: UniqueId = text.parse()?;
                    let spec = BootstrapSpec::Uid {
                        uid,
                        rank: required("XPUSHMEM_BOOTSTRAP_RANK", cfg.bootstrap_rank)?,
                        size: required("XPUSHMEM_BOOTSTRAP_NRANKS", cfg.bootstrap_nranks)?,
                    };
                    make_bootstrap(&spec, cfg)
                }
                #[cfg(feature = "mpi")]
                "mpi" => make_bootstrap(&BootstrapSpec::Mpi, cfg),
                #[cfg(not(feature = "mpi"))]
                "mpi" => Err(Error::Config {
                    var: "XPUSHMEM_BOOTSTRAP",
                    value: "mpi".into(),
                    reason: "this build has no MPI bootstrap (cargo feature `mpi`)".into(),
                }),
                _ => make_bootstrap(&BootstrapSpec::Single, cfg),
            }
        }
    }
}

fn under_mpi_launcher() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

/// Start the runtime with explicit attributes (NVSHMEM's `nvshmemx_init_attr`). Collective over all PEs of the job.
pub fn init_attr(attr: InitAttr) -> Result<Shmem> {
    if ACTIVE.swap(true, Ordering::SeqCst) {
        return Err(Error::State(
            "xpushmem is already initialised in this process (finalize the running instance first)"
                .into(),
        ));
    }
    let r = Shmem::start(attr);
    if r.is_err() {
        ACTIVE.store(false, Ordering::SeqCst);
    }
    r
}

/// The machine this process runs on: the kernel's boot id (shared by the network namespaces of one host and by
/// PEs that `XPUSHMEM_NODE_ID` places on different nodes), else the host name.
fn machine_key() -> String {
    match std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        Ok(id) if !id.trim().is_empty() => id.trim().to_string(),
        _ => rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned(),
    }
}

/// Who is where, from one allgather: every PE's node and process id, the job's cookie (PE 0's), and how many PEs
/// share this PE's machine (they share its CPUs even when they are on different nodes of the job); an error when
/// the PEs disagree on the heap size.
fn job_layout(boot: &dyn Bootstrap, cfg: &Config) -> Result<(Nodes, Vec<u32>, u64, usize)> {
    let (me, n) = (boot.rank(), boot.size());
    let cookie = bootstrap::uid::random_cookie();
    let info = Enc::default()
        .bytes(host_key(cfg).as_bytes())
        .bytes(machine_key().as_bytes())
        .u64(std::process::id() as u64)
        .u64(cfg.symmetric_size as u64)
        .u64(cookie)
        .0;
    let all = boot.allgather(&info)?;
    let mut hosts: Vec<String> = Vec::new();
    let mut node_of = Vec::with_capacity(n);
    let mut pids = Vec::with_capacity(n);
    let mut job_cookie = 0;
    let mut machines: Vec<Vec<u8>> = Vec::with_capacity(n);
    for (pe, rec) in all.iter().enumerate() {
        let mut d = Dec(rec);
        let bad = || Error::Bootstrap {
            method: boot.name(),
            message: format!("malformed setup record from PE {pe}"),
        };
        let host = String::from_utf8_lossy(d.bytes().ok_or_else(bad)?).into_owned();
        machines.push(d.bytes().ok_or_else(bad)?.to_vec());
        let pid = d.u64().ok_or_else(bad)?;
        let size = d.u64().ok_or_else(bad)? as usize;
        let ck = d.u64().ok_or_else(bad)?;
        if pe == 0 {
            job_cookie = ck;
        }
        if size != cfg.symmetric_size {
            return Err(Error::Mismatch {
                call: "init (XPUSHMEM_SYMMETRIC_SIZE)",
                pe,
                theirs: format!("{size} bytes"),
                reference_pe: me,
                ours: format!("{} bytes", cfg.symmetric_size),
            });
        }
        let node = hosts.iter().position(|h| *h == host).unwrap_or_else(|| {
            hosts.push(host);
            hosts.len() - 1
        });
        node_of.push(node);
        pids.push(pid as u32);
    }
    let on_machine = machines.iter().filter(|m| **m == machines[me]).count();
    Ok((Nodes { node_of, hosts }, pids, job_cookie, on_machine))
}

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

/// The layout of PEs over nodes.
#[derive(Debug, Clone)]
pub struct Nodes {
    node_of: Vec<usize>,
    hosts: Vec<String>,
}

impl Nodes {
    /// Node index of each PE.
    pub fn node_of(&self, pe: usize) -> usize {
        self.node_of[pe]
    }
    /// Number of nodes.
    pub fn count(&self) -> usize {
        self.hosts.len()
    }
    /// PEs on node `node`, ascending.
    pub fn pes_on(&self, node: usize) -> Vec<usize> {
        (0..self.node_of.len())
            .filter(|&p| self.node_of[p] == node)
            .collect()
    }
    /// Host name of node `node`.
    pub fn host(&self, node: usize) -> &str {
        self.hosts[node].split('/').next().unwrap_or("")
    }
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
    heap_kind: HeapKind,
    pub(crate) nodes: Nodes,
    pub(crate) heap: Mutex<Allocator>,
    pub(crate) heap_size: usize,
    /// Teams and their synchronisation state (`barrier_all` is `TEAM_WORLD`'s barrier).
    pub(crate) teams: crate::team::Teams,
    /// The executable's data segment, when symmetric.
    pub(crate) data: SymData,
    watch: PeerWatch,
    thread_level: ThreadLevel,
    finalized: AtomicBool,
    /// Set once a wait failed (timeout, lost peer): finalize then skips its barrier instead of waiting again.
    broken: AtomicBool,
    /// Busy-poll iterations of a wait before it yields (XPUSHMEM_SPIN_COUNT, or chosen from the node's load).
    spin_count: u64,
    /// More PEs on this machine than CPUs this process may run on.
    oversubscribed: bool,
}

impl Shmem {
    fn start(attr: InitAttr) -> Result<Shmem> {
        let mut cfg = Config::from_env()?;
        if attr.openshmem_env {
            cfg.apply_openshmem()?;
        }
        if attr.device_handles.is_some() && attr.heap.unwrap_or(cfg.heap) == HeapKind::Host {
            return Err(Error::invalid(
                "XPUSHMEM_HEAP",
                "host",
                "Level Zero handles were given to adopt (InitAttr::device_handles; in C \
                 xpushmemx_set_attr_ze_handles), but they back only a device heap: set XPUSHMEM_HEAP=device",
            ));
        }
        crate::config::install(&cfg);
        crate::transport::shm::set_nt_copy_size(cfg.nt_copy_size);
        init_logging(&cfg.log);
        crate::launch::tie_to_launcher()?;
        if !cfg.dumpable {
            // Before any heap or socket exists: /proc/PID/{fd,environ,mem} become root-only.
            if cfg.ipc == crate::config::IpcMode::Pidfd {
                return Err(Error::invalid(
                    "XPUSHMEM_DUMPABLE",
                    "0",
                    "cannot be combined with XPUSHMEM_IPC=pidfd: pidfd_getfd needs ptrace access to a peer, which a \
                     non-dumpable PE grants only to root (use XPUSHMEM_IPC=auto or socket)",
                ));
            }
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
                .map_err(|e| Error::os("prctl(PR_SET_DUMPABLE, 0)", e))?;
        }
        let boot: std::sync::Arc<dyn Bootstrap> = make_bootstrap(&attr.bootstrap, &cfg)?.into();
        let (me, n) = (boot.rank(), boot.size());
        tracing::debug!(pe = me, n_pes = n, bootstrap = boot.name(), "bootstrap up");

        let (nodes, pids, job_cookie, machine_pes) = job_layout(boot.as_ref(), &cfg)?;
        let heap_kind = attr.heap.unwrap_or(cfg.heap);
        let (peers, data) = transport::connect(transport::ConnectArgs {
            boot: boot.as_ref(),
            liveness: std::sync::Arc::clone(&boot),
            me,
            nodes: &nodes,
            pids: &pids,
            heap_kind,
            heap_bytes: cfg.symmetric_size,
            sys_bytes: SYS_BYTES,
            cookie: job_cookie,
            timeout: cfg.timeout,
            external: attr.device_handles,
            symmetric_data: attr.symmetric_data,
        })?;
        let local = nodes.pes_on(nodes.node_of(me));
        tracing::debug!(
            pe = me,
            heap_bytes = cfg.symmetric_size,
            mapped_peers = local.len(),
            "symmetric heap mapped"
        );
        let watched: Vec<(usize, u32)> = local
            .iter()
            .filter(|&&p| p != me)
            .map(|&p| (p, pids[p]))
            .collect();
        let (watch, _unwatchable) = PeerWatch::new(&watched);

        let heap = Allocator::new(cfg.symmetric_size);
        let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
        let spin_count = match cfg.spin_count {
            Some(n) => n as u64,
            None if machine_pes > cpus => 0,
            None => 4000,
        };
        tracing::debug!(
            pe = me,
            node_pes = local.len(),
            machine_pes,
            cpus,
            spin_count,
            "wait back-off"
        );
        let teams = crate::team::Teams::new(me, n, nodes.pes_on(nodes.node_of(me)));
        let sh = Shmem {
            me,
            n,
            heap_size: cfg.symmetric_size,
            data,
            cfg,
            boot,
            peers,
            heap_kind,
            nodes,
            heap: Mutex::new(heap),
            teams,
            watch,
            thread_level: attr.thread_level,
            finalized: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            spin_count,
            oversubscribed: machine_pes > cpus,
        };
        sh.sys_local()
            .amo(SYNC.state, 8, AmoOp::Set, STATE_RUNNING)?;
        // Kernels see TEAM_WORLD and TEAM_SHARED (device heaps) before the start-up barrier below.
        sh.teams.publish_predefined(&sh)?;
        for (pe, route) in (0..n).map(|pe| (pe, sh.route_name(pe))) {
            tracing::debug!(pe = me, peer = pe, route, "route");
        }
        sh.boot.barrier()?;
        tracing::info!(pe = me, n_pes = n, "xpushmem initialised");
        Ok(sh)
    }

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

    /// Bytes of symmetric heap per PE.
    pub fn heap_size(&self) -> usize {
        self.heap_size
    }

    /// Where the symmetric heap lives.
    pub fn heap_kind(&self) -> HeapKind {
        self.heap_kind
    }

    /// This PE's device (for a device heap): modules, kernels, launches on symmetric buffers.
    pub fn device(&self) -> Option<Device<'_>> {
        self.peers.device.as_ref().map(|rt| Device::new(self, rt))
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

    fn route_name(&self, pe: usize) -> &'static str {
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

    /// Whether this machine runs more PEs than this process has CPUs (waits then yield at once, and algorithms
    /// with fewer dependent steps win).
    pub(crate) fn oversubscribed(&self) -> bool {
        self.oversubscribed
    }

    /// Spin, then yield, then sleep until `ready()` holds (never sleeping while a transport needs this PE to poll);
    /// fails on timeout or when a peer is lost. The clock starts at the 32nd poll (a wait that ends sooner reads no
    /// clock) and a timeout reports the time waited since; whatever the spin count, peers and the limit are
    /// checked at least every 4096 polls (two syscalls and a clock read: rare enough not to slow a spinning wait).
    pub(crate) fn wait_for(
        &self,
        op: &str,
        detail: &dyn Fn() -> String,
        mut ready: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        // The clock is first read at the 32nd poll: most waits end before it.
        let mut start: Option<Instant> = None;
        let spins = self.spin_count;
        let yields = spins + self.cfg.yield_count as u64;
        let mut sleep = Duration::from_micros(1);
        let mut i: u64 = 0;
        let mut polling = false;
        let r = (|| loop {
            // A transport that completes late delivers what this PE issued (a barrier's own signal, say) while it
            // waits, and before it stops waiting.
            self.progress()?;
            if ready()? {
                return Ok(());
            }
            i += 1;
            // Whether to check peers and the limit now: at least every 4096 polls.
            let check = if i < spins {
                std::hint::spin_loop();
                if i == 32 && self.cfg.timeout.is_some() {
                    start.get_or_insert_with(Instant::now);
                }
                i % 4096 == 0
            } else {
                if i == yields || (i > yields && i % 1024 == 0) {
                    polling = self.peers.transports().any(|t| t.needs_polling());
                }
                if i < yields || polling {
                    // Yielding keeps polling: a transport that moves data only while this PE calls in (the fabric
                    // without its progress thread) would otherwise hold its peers' operations on this PE for as
                    // long as the sleep lasts.
                    std::thread::yield_now();
                    i % 32 == 0
                } else {
                    std::thread::sleep(sleep);
                    sleep = (sleep * 2).min(self.cfg.sleep_max);
                    true
                }
            };
            if !check {
                continue;
            }
            if let Err(e) = self.check_peers(op) {
                // The peer may have done its part before it left: the condition decides.
                return if ready()? { Ok(()) } else { Err(e) };
            }
            if let Some(limit) = self.cfg.timeout {
                let waited = start.get_or_insert_with(Instant::now).elapsed();
                if waited > limit {
                    let d = detail();
                    return Err(Error::Timeout {
                        op: op.to_string(),
                        waited,
                        limit,
                        detail: if d.is_empty() { d } else { format!("; {d}") },
                    });
                }
            }
        })();
        if r.is_err() {
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

    /// An error when a peer died without finalizing.
    pub(crate) fn check_peers(&self, op: &str) -> Result<()> {
        let lost = |pe: usize| {
            crate::launch::report_peer_lost(pe);
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
            // The rendezvous went away: a dead peer on this node explains it best, once its exit is visible.
            Err(e) => {
                std::thread::sleep(Duration::from_millis(5));
                Err(dead().map_or(e, lost))
            }
        }
    }

    /// Barrier over all PEs without completing outstanding puts (OpenSHMEM `sync_all`): `TEAM_WORLD`'s
    /// agreement, so a PE in another collective makes it fail on every PE.
    pub fn sync_all(&self) -> Result<()> {
        self.teams
            .world_ctx(self, "sync_all")
            .sync_world(CallId::SyncAll)
    }

    /// Complete every outstanding put, then barrier over all PEs (OpenSHMEM `barrier_all`): `TEAM_WORLD`'s
    /// barrier. Fails with [`Error::Timeout`] after `XPUSHMEM_TIMEOUT_MS`, [`Error::PeerLost`] as soon as a PE it
    /// waits for has died, or [`Error::Mismatch`] (on every PE) when another PE is in a different collective.
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let x = sh.calloc::<u64>(1).unwrap().at(0).unwrap();
    /// sh.p(x, 42, (sh.my_pe() + 1) % sh.n_pes()).unwrap();
    /// sh.barrier_all().unwrap(); // every PE's p() has landed
    /// assert_eq!(sh.g(x, sh.my_pe()).unwrap(), 42);
    /// ```
    pub fn barrier_all(&self) -> Result<()> {
        self.teams
            .world_ctx(self, "barrier_all")
            .sync_world(CallId::BarrierAll)
    }

    /// Finalize: a last barrier, then leave. Collective. Returns the first error met; resources are released either way.
    pub fn finalize(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.finalized.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        if self.peers.transports().any(|t| t.lost_peer()) {
            self.broken.store(true, Ordering::SeqCst);
        }
        let r = if self.broken.load(Ordering::SeqCst) {
            Ok(())
        } else {
            self.teams
                .world_ctx(self, "finalize")
                .sync_world(CallId::Finalize)
        };
        // Nothing this PE issued may be left undelivered when it goes (best effort once a peer was lost: what was
        // bound for it fails, and the loss was reported already).
        let r = r.and_then(|()| match self.quiet() {
            Err(_) if self.broken.load(Ordering::SeqCst) => Ok(()),
            q => q,
        });
        // A network transport serves its peers' last operations until every PE is past this barrier (skipped,
        // like the finalize barrier, once a wait failed: a lost peer would never arrive).
        let mut wants_barrier = false;
        for t in self.peers.transports() {
            // Every transport is told (no short-circuit).
            wants_barrier |= t.leaving();
        }
        let r = r.and_then(|()| {
            if wants_barrier && !self.broken.load(Ordering::SeqCst) {
                self.boot.barrier()
            } else {
                Ok(())
            }
        });
        let _ = self
            .sys_local()
            .amo(SYNC.state, 8, AmoOp::Set, STATE_FINALIZED);
        let r2 = if r.is_ok() {
            self.boot.finalize()
        } else {
            Ok(())
        };
        ACTIVE.store(false, Ordering::SeqCst);
        tracing::debug!(pe = self.me, ok = r.is_ok(), "finalized");
        r.and(r2)
    }
}

impl Drop for Shmem {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(pe = self.me, "finalize on drop failed: {e}");
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
