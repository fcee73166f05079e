//! The facade and lifecycle: [`get_unique_id`], the `init*` entry points, the choice of bootstrap, logging, the
//! start-up of a PE (bootstrap, job layout, transports, teams) and its shutdown (`finalize`, `Drop`), and the
//! calls of [`Shmem`] that run a team protocol over `TEAM_WORLD` (`sync_all`, `barrier_all`).

use crate::bootstrap::{self, Bootstrap, Dec, Enc, UniqueId};
use crate::config::Config;
use crate::core::heap::Allocator;
use crate::core::{Shmem, STATE_FINALIZED, STATE_RUNNING, SYNC, SYS_BYTES};
use crate::device::{Device, HeapKind};
use crate::error::{Error, Result};
use crate::job::{self, JobLayout, PeRecord};
use crate::sys::pidwatch::PeerWatch;
use crate::team::CallId;
use crate::transport::ze::ExternalHandles;
use crate::transport::{self, AmoOp};
use crate::types::ThreadLevel;
use once_cell::sync::OnceCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The bootstrap of the last finalized runtime and the spec it was made from, kept for a later init with the same
/// spec (OpenSHMEM 1.6: the library "may be re-initialized"; `xpushmem-run`'s rendezvous serves one job, and MPI
/// and PMIx cannot be initialised again after their finalize). Released when an init asks for another spec, and
/// at process exit ([`release_kept_bootstrap`]).
static KEPT: Mutex<Option<(BootstrapSpec, Arc<dyn Bootstrap>)>> = Mutex::new(None);
/// The spec of the running runtime's bootstrap (one runtime per process: [`ACTIVE`]).
static RUNNING_SPEC: Mutex<Option<BootstrapSpec>> = Mutex::new(None);
/// Whether [`release_kept_bootstrap`] is registered to run at exit.
static AT_EXIT: AtomicBool = AtomicBool::new(false);
static PENDING_SERVER: Mutex<Option<bootstrap::uid::Server>> = Mutex::new(None);
static LOGGING: OnceCell<()> = OnceCell::new();

/// How a runtime should find its peers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// The PMIx namespace this process was started in (a build that found PMIx's headers; others refuse it).
    Pmix,
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
        #[cfg(xpushmem_pmix)]
        BootstrapSpec::Pmix => Ok(Box::new(bootstrap::pmix::PmixBootstrap::new(cfg.timeout)?)),
        #[cfg(not(xpushmem_pmix))]
        BootstrapSpec::Pmix => Err(Error::Config {
            var: "XPUSHMEM_BOOTSTRAP",
            value: "pmix".into(),
            reason: "this build has no PMIx bootstrap (PMIx's headers were not found: install libpmix-dev)"
                .into(),
        }),
        BootstrapSpec::Env => {
            let uid_text = cfg.bootstrap_uid.clone();
            let method = match cfg.bootstrap.as_str() {
                "auto" if uid_text.is_some() => "uid",
                "auto" if cfg!(feature = "mpi") && under_mpi_launcher() => "mpi",
                "auto" if cfg!(xpushmem_pmix) && under_pmix_server() => "pmix",
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
                "mpi" => mpi_bootstrap(cfg),
                "pmix" => make_bootstrap(&BootstrapSpec::Pmix, cfg),
                _ => make_bootstrap(&BootstrapSpec::Single, cfg),
            }
        }
    }
}

/// The MPI bootstrap, or the error of a build without it. Both arms are compiled (and linted) in every build: a
/// build with `mpi` returns first.
#[cfg_attr(feature = "mpi", allow(unreachable_code))]
fn mpi_bootstrap(cfg: &Config) -> Result<Box<dyn Bootstrap>> {
    #[cfg(feature = "mpi")]
    {
        return make_bootstrap(&BootstrapSpec::Mpi, cfg);
    }
    let _ = cfg;
    Err(Error::Config {
        var: "XPUSHMEM_BOOTSTRAP",
        value: "mpi".into(),
        reason: "this build has no MPI bootstrap (cargo feature `mpi`)".into(),
    })
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

/// Whether a PMIx server started this process (it sets the client's namespace and rank, and how to reach it).
fn under_pmix_server() -> bool {
    std::env::var_os("PMIX_NAMESPACE").is_some() && std::env::var_os("PMIX_RANK").is_some()
}

/// The bootstrap for a runtime starting with `spec`: the one kept from the last finalize when it was made from the
/// same spec, else a new one (a kept one of another spec is released first).
fn bootstrap_for(spec: &BootstrapSpec, cfg: &Config) -> Result<Arc<dyn Bootstrap>> {
    let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner()).take();
    let boot = match kept {
        Some((was, boot)) if was == *spec => {
            tracing::debug!(
                bootstrap = boot.name(),
                "init again: the bootstrap kept from the last finalize"
            );
            boot
        }
        other => {
            if let Some((_, old)) = other {
                if let Err(e) = old.finalize() {
                    tracing::warn!(
                        bootstrap = old.name(),
                        "releasing the earlier bootstrap: {e}"
                    );
                }
            }
            make_bootstrap(spec, cfg)?.into()
        }
    };
    *RUNNING_SPEC.lock().unwrap_or_else(|p| p.into_inner()) = Some(spec.clone());
    Ok(boot)
}

/// At the last finalize: keep `boot` for a later init (released at exit); where no exit handler can be
/// registered, release it now (the process then cannot initialise again under a one-shot bootstrap).
fn keep_bootstrap(boot: Arc<dyn Bootstrap>) -> Result<()> {
    let Some(spec) = RUNNING_SPEC
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    else {
        return boot.finalize();
    };
    if !AT_EXIT.swap(true, Ordering::SeqCst) {
        if let Err(e) = crate::sys::exit::at_exit(release_kept_bootstrap) {
            AT_EXIT.store(false, Ordering::SeqCst);
            tracing::warn!("the bootstrap is released at finalize: {e}");
            return boot.finalize();
        }
    }
    *KEPT.lock().unwrap_or_else(|p| p.into_inner()) = Some((spec, boot));
    Ok(())
}

/// Run at process exit: leave the job of the bootstrap kept from the last finalize (the uid rendezvous' `BYE`,
/// `MPI_Finalize` when the bootstrap initialised MPI, `PMIx_Finalize`).
extern "C" fn release_kept_bootstrap() {
    // `try_lock`: an exit from a thread inside `bootstrap_for`/`keep_bootstrap` must not deadlock.
    let kept = match KEPT.try_lock() {
        Ok(mut g) => g.take(),
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().take(),
        Err(std::sync::TryLockError::WouldBlock) => None,
    };
    if let Some((_, boot)) = kept {
        if let Err(e) = boot.finalize() {
            tracing::warn!(bootstrap = boot.name(), "leaving the job at exit: {e}");
        }
    }
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

/// Every PE's [`PeRecord`] from one allgather, and the layout they make.
fn exchange_layout(boot: &dyn Bootstrap, cfg: &Config) -> Result<JobLayout> {
    let me = boot.rank();
    let (cpus, cpu_limit) = job::cpu_record();
    let info = Enc::default()
        .bytes(job::host_key(cfg.node_id.as_deref()).as_bytes())
        .bytes(job::machine_key().as_bytes())
        .u64(std::process::id() as u64)
        .u64(cfg.symmetric_size as u64)
        .u64(cfg.symmetric_max.map_or(0, |m| m as u64))
        .u64(
            rustix::process::getrlimit(rustix::process::Resource::As)
                .current
                .unwrap_or(u64::MAX),
        )
        .u64(bootstrap::uid::random_cookie())
        .bytes(&cpus)
        .u64(cpu_limit)
        .0;
    let records = boot
        .allgather(&info)?
        .iter()
        .enumerate()
        .map(|(pe, rec)| {
            let mut d = Dec(rec);
            let bad = || Error::Bootstrap {
                method: boot.name(),
                message: format!("malformed setup record from PE {pe}"),
            };
            Ok(PeRecord {
                host: String::from_utf8_lossy(d.bytes().ok_or_else(bad)?).into_owned(),
                machine: d.bytes().ok_or_else(bad)?.to_vec(),
                pid: d.u64().ok_or_else(bad)? as u32,
                heap_bytes: d.u64().ok_or_else(bad)? as usize,
                heap_max: d.u64().ok_or_else(bad)? as usize,
                as_limit: d.u64().ok_or_else(bad)?,
                cookie: d.u64().ok_or_else(bad)?,
                cpus: d.bytes().ok_or_else(bad)?.to_vec(),
                cpu_limit: d.u64().ok_or_else(bad)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let layout = job::job_layout(
        &records,
        me,
        (cfg.symmetric_size, cfg.symmetric_max.unwrap_or(0)),
    )?;
    // The launcher's view of this node (PMIx's local peers) must be the runtime's: PEs it places on one node that
    // the host keys split (or the reverse) would choose the wrong transports.
    if let (Some(local), None) = (boot.local_ranks(), cfg.node_id.as_deref()) {
        let ours = layout.nodes.pes_on(layout.nodes.node_of(me));
        if local != ours {
            return Err(Error::Bootstrap {
                method: boot.name(),
                message: format!(
                    "the launcher places PEs {local:?} on this PE's node, the host detection finds {ours:?}; \
                     set XPUSHMEM_NODE_ID to the node's name on every PE"
                ),
            });
        }
    }
    Ok(layout)
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
        init_logging(&cfg.log);
        bootstrap::launcher::tie_to_launcher()?;
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
        let boot = bootstrap_for(&attr.bootstrap, &cfg)?;
        let (me, n) = (boot.rank(), boot.size());
        tracing::debug!(pe = me, n_pes = n, bootstrap = boot.name(), "bootstrap up");

        let JobLayout {
            nodes,
            pids,
            cookie: job_cookie,
            machine_pes,
            machine_cpus,
            as_limit,
        } = exchange_layout(boot.as_ref(), &cfg)?;
        let heap_kind = attr.heap.unwrap_or(cfg.heap);
        let (peers, data) = transport::connect(transport::ConnectArgs {
            cfg: &cfg,
            boot: boot.as_ref(),
            liveness: std::sync::Arc::clone(&boot),
            me,
            nodes: &nodes,
            pids: &pids,
            heap_kind,
            heap_bytes: cfg.symmetric_size,
            heap_max: cfg.heap_max(
                (0..nodes.count())
                    .map(|i| nodes.pe_count(i))
                    .max()
                    .unwrap_or(1),
                as_limit,
            )?,
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
        let (watch, unwatchable) = PeerWatch::new(&watched);
        if !unwatchable.is_empty() {
            // No pidfd for them: the process is gone already (it left before this PE's start-up ended, which
            // the start-up barrier below then reports), or its pid is not valid in this PE's pid namespace, or
            // the kernel lacks pidfd_open (before Linux 5.3). Not an error: their loss is still seen by the
            // bootstrap (the uid rendezvous tells every PE when a PE's connection drops), only later than a
            // pidfd would show it, and not at all under a bootstrap without failure detection (mpi).
            let pids: Vec<u32> = unwatchable.iter().map(|&p| pids[p]).collect();
            tracing::warn!(
                pe = me,
                ?unwatchable,
                ?pids,
                bootstrap = boot.name(),
                "node peers whose process cannot be watched (no pidfd): their loss is detected only through \
                 the bootstrap"
            );
        }

        let heap = Allocator::new(peers.heap_max());
        let team_heap = Allocator::new(peers.team_base().map_or(0, |_| peers.heap_max()));
        // The machine's CPUs are those its PEs may run on together: a PE bound to one core by its launcher still
        // has that core to itself when the others are bound to theirs.
        let spin_count = match cfg.spin_count {
            Some(n) => n as u64,
            None if machine_pes > machine_cpus => 0,
            None => 4000,
        };
        tracing::debug!(
            pe = me,
            node_pes = local.len(),
            machine_pes,
            machine_cpus,
            spin_count,
            "wait back-off"
        );
        let teams = crate::team::Teams::new(me, n, nodes.pes_on(nodes.node_of(me)));
        let sh = Shmem {
            me,
            n,
            heap_size: std::sync::atomic::AtomicUsize::new(cfg.symmetric_size),
            data,
            cfg,
            boot,
            peers,
            heap_kind,
            nodes,
            heap: Mutex::new(heap),
            team_heap: Mutex::new(team_heap),
            team_mapped: std::sync::atomic::AtomicUsize::new(0),
            teams,
            watch,
            thread_level: attr.thread_level,
            finalized: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            spin_count,
            oversubscribed: machine_pes > machine_cpus,
            machine_cpus,
            registry: Default::default(),
            domains: Default::default(),
        };
        let started = (|| {
            sh.sys_local()
                .amo(SYNC.state, 8, AmoOp::Set, STATE_RUNNING)?;
            // Kernels see TEAM_WORLD and TEAM_SHARED (device heaps) before the start-up barrier below.
            sh.teams.publish_predefined(&sh)?;
            for (pe, route) in (0..n).map(|pe| (pe, sh.route_name(pe))) {
                tracing::debug!(pe = me, peer = pe, route, "route");
            }
            sh.boot.barrier()
        })();
        if let Err(e) = started {
            // A start-up that did not complete ends here, with its error, as if this PE had left: dropping the
            // runtime releases what it holds without a finalize (whose barrier would wait until the timeout for
            // PEs still starting, which wait for this one in the start-up) and without keeping the bootstrap for
            // a later init, so that its connection closes and the rendezvous tells the others at once.
            sh.finalized.store(true, Ordering::SeqCst);
            return Err(e);
        }
        tracing::info!(pe = me, n_pes = n, "xpushmem initialised");
        Ok(sh)
    }

    /// This PE's device (for a device heap): modules, kernels, launches on symmetric buffers.
    pub fn device(&self) -> Option<Device<'_>> {
        self.peers.device.as_ref().map(|rt| Device::new(self, rt))
    }

    /// Barrier over all PEs without completing outstanding puts (OpenSHMEM `sync_all`): `TEAM_WORLD`'s
    /// agreement, so a PE in another collective makes it fail on every PE.
    pub fn sync_all(&self) -> Result<()> {
        self.teams
            .world_ctx(self, "sync_all")
            .sync_world(CallId::SyncAll)
    }

    /// Complete every outstanding put of the default domain, then barrier over all PEs (OpenSHMEM `barrier_all`):
    /// `TEAM_WORLD`'s barrier. Another domain's operations are completed by its own quiet
    /// ([`crate::domain::OnDomain::quiet`]). Fails with [`Error::Timeout`] after `XPUSHMEM_TIMEOUT_MS`, [`Error::PeerLost`] as soon as a PE it
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
            // Every domain's operations land before the PEs pass the last barrier (its sync completes the default
            // domain's only); the barrier runs whatever the quiet gave.
            let q = self.quiet_all();
            let s = self
                .teams
                .world_ctx(self, "finalize")
                .sync_world(CallId::Finalize);
            q.and(s)
        };
        // Nothing this PE issued may be left undelivered when it goes (best effort once a peer was lost: what was
        // bound for it fails, and the loss was reported already).
        let r = r.and_then(|()| match self.quiet_all() {
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
        // The bootstrap outlives the runtime, for an init again (OpenSHMEM 1.6); it leaves the job at exit.
        let r2 = if r.is_ok() {
            keep_bootstrap(Arc::clone(&self.boot))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A build without the `mpi` feature (the default, which the suite runs) refuses `XPUSHMEM_BOOTSTRAP=mpi` with
    /// an error naming the variable and the value.
    #[test]
    fn a_build_without_mpi_refuses_the_mpi_bootstrap() {
        if cfg!(feature = "mpi") {
            return;
        }
        let cfg = Config::from_env().expect("the test process's configuration");
        match mpi_bootstrap(&cfg).err() {
            Some(Error::Config { var, value, reason }) => {
                assert_eq!((var, value.as_str()), ("XPUSHMEM_BOOTSTRAP", "mpi"));
                assert!(reason.contains("feature `mpi`"), "{reason}");
            }
            other => panic!("expected a Config error, got {other:?}"),
        }
    }
}
