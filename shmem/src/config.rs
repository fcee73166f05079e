//! The one configuration table: every `XPUSHMEM_*` environment variable, its default and its meaning.
//!
//! [`VARS`] is the source of truth; [`Config::from_env`] parses it once per [`crate::init`], and `xpushmem-info`
//! prints it. A variable with a value that cannot be parsed is an error naming the variable, never a silent default.

use crate::algo::{
    AlltoallAlgo, BarrierAlgo, BroadcastAlgo, CollectAlgo, ReduceAlgo, ReduceScatterAlgo, ScanAlgo,
};
use crate::error::{Error, Result};
use crate::types::HeapKind;
use std::net::IpAddr;

use std::time::Duration;

/// One documented environment variable.
#[derive(Debug, Clone, Copy)]
pub struct VarSpec {
    /// Full name, `XPUSHMEM_...`.
    pub name: &'static str,
    /// Default value, as text.
    pub default: &'static str,
    /// One-line description.
    pub doc: &'static str,
    /// The Rust type it is parsed into (the field of [`Config`] of the same row).
    pub ty: &'static str,
}

/// Declares the table once: each row is a field of [`Config`] (its doc the variable's description, its type what
/// the value is parsed into), the variable's name, its default and the parser. [`VARS`], the struct and
/// [`Config::from_env`] are generated from it; `docs/ENV.md` is checked against [`VARS`] by a test.
macro_rules! env_table {
    ($( #[doc = $doc:literal] $field:ident : $ty:ty = $name:literal, $default:literal, $parse:expr; )+) => {
        /// Every environment variable the library reads.
        pub const VARS: &[VarSpec] = &[$(VarSpec {
            name: $name,
            default: $default,
            doc: $doc,
            ty: stringify!($ty),
        }),+];

        /// The configuration: every variable of [`VARS`], parsed once at init.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Config {
            $( #[doc = $doc] pub $field: $ty, )+
        }

        impl Config {
            /// Parse every variable of the environment (defaults for unset ones); an unusable value is an error
            /// naming the variable.
            pub fn from_env() -> Result<Config> {
                Ok(Config { $( $field: $parse($name)?, )+ })
            }
        }
    };
}

env_table! {
    /// size of the first chunk of each PE's symmetric heap, which grows on demand (host heaps, over shared memory or the fabric; device heaps through Level Zero virtual memory, their new chunks mapped by node peers and registered with the fabric); bytes or with a K/M/G/T suffix (powers of 1024); memory is committed only when touched
    symmetric_size: usize = "XPUSHMEM_SYMMETRIC_SIZE", "1G", heap_size;
    /// the most each PE's symmetric heap may grow to (unset: 1T of address space reserved, DEFAULT_HEAP_RESERVE, less on a node of more than 16 PEs or under an address-space limit (RLIMIT_AS: a node's reserves fit an eighth of it); a tool that keeps an address space of its own, such as valgrind, needs a value set; team-scoped allocations get a second reserve of the same size; on device heaps, device address space reserved for each PE's heap and team space and for each node peer's); at least XPUSHMEM_SYMMETRIC_SIZE; PEs must agree on it; bytes or with a K/M/G/T suffix
    symmetric_max: Option<usize> = "XPUSHMEM_SYMMETRIC_MAX", "", opt_heap_size;
    /// limit for every blocking wait (barriers, wait_until, signal waits, bootstrap) in ms, and, at least 10 s, for one progress call into the fabric provider (past it the stall watchdog aborts the PE: a call that never returns); 0 = wait forever
    timeout: Option<Duration> = "XPUSHMEM_TIMEOUT_MS", "300000", timeout_ms;
    /// cross-check every collective call's arguments on every PE (allocations, team creation, data collectives; 0 = compare only the kind of call)
    check_symmetry: bool = "XPUSHMEM_CHECK_SYMMETRY", "1", boolean;
    /// log level on stderr: off, error, warn, info, debug, trace
    log: String = "XPUSHMEM_LOG", "warn", log_level;
    /// how PEs find each other: auto, uid, mpi, pmix, single (auto: uid if XPUSHMEM_BOOTSTRAP_UID is set, else mpi under mpirun when built with it, else pmix under a PMIx server (srun --mpi=pmix, mpirun) when built with it, else single)
    bootstrap: String = "XPUSHMEM_BOOTSTRAP", "auto", bootstrap_method;
    /// unique ID of the rendezvous (set by xpushmem-run, or by the program from get_unique_id)
    bootstrap_uid: Option<String> = "XPUSHMEM_BOOTSTRAP_UID", "", opt_text;
    /// this PE's number for the uid bootstrap
    bootstrap_rank: Option<usize> = "XPUSHMEM_BOOTSTRAP_RANK", "", opt_count;
    /// number of PEs for the uid bootstrap
    bootstrap_nranks: Option<usize> = "XPUSHMEM_BOOTSTRAP_NRANKS", "", opt_count;
    /// IP address the uid rendezvous listens on (use a routable address for multi-node jobs)
    bootstrap_addr: IpAddr = "XPUSHMEM_BOOTSTRAP_ADDR", "127.0.0.1", ip_addr;
    /// busy-poll iterations of a wait before it starts yielding; auto: 4000 when every PE on this machine has a CPU of its own (the CPUs counted are those its PEs may run on together: PEs a launcher binds one per core have one each), 0 when it is oversubscribed (a spinning PE would hold the CPU its partner needs; PEs in other network namespaces or on other XPUSHMEM_NODE_ID nodes of the same machine count too); whatever the count, a wait checks its peers and its time limit at least every 4096 polls
    spin_count: Option<u32> = "XPUSHMEM_SPIN_COUNT", "auto", auto_u32;
    /// sched_yield iterations of a wait before it starts sleeping
    yield_count: u32 = "XPUSHMEM_YIELD_COUNT", "200", plain_u32;
    /// longest sleep between polls of a wait, in microseconds (sleeps grow from 1 us to this)
    sleep_max: Duration = "XPUSHMEM_SLEEP_MAX_US", "200", micros;
    /// where the symmetric heap lives: host (memfd, CPU PEs) or device (Level Zero device memory, one device per PE)
    heap: HeapKind = "XPUSHMEM_HEAP", "host", heap_kind;
    /// auto (each peer through the transport that reaches it), fabric (every other PE through the libfabric transport, even on this node; tests and benchmarks) or deferred (test only: writes to other PEs wait in a queue until quiet, fence or completion, and land in reverse order between fences)
    transport: TransportMode = "XPUSHMEM_TRANSPORT", "auto", transport_mode;
    /// Level Zero device of this PE for a device heap: auto (local rank modulo the device count) or a device number
    device: Option<usize> = "XPUSHMEM_DEVICE", "auto", auto_usize;
    /// how device-heap descriptors reach node peers at init: auto or socket (SCM_RIGHTS over the authenticated node socket), pidfd (pidfd_getfd; ptrace permission granted only while descriptors are taken); the chunks a device heap grows by later always go over the socket
    ipc: IpcMode = "XPUSHMEM_IPC", "auto", ipc_mode;
    /// 0: each PE makes itself non-dumpable at init (prctl PR_SET_DUMPABLE 0): its /proc/PID/fd, environ and mem become root-only, so that other processes of the same uid can no longer open its heap or read the job's unique ID there (until init they still can); costs debuggers (no attach) and core dumps; an error with XPUSHMEM_IPC=pidfd, whose pidfd_getfd needs that access
    dumpable: bool = "XPUSHMEM_DUMPABLE", "1", boolean;
    /// C ABI only: return (error codes + xpushmem_last_error) or abort (print and abort, classic SHMEM); the native xpushmem_* API defaults to return, the OpenSHMEM shmem_* layer to abort unless this is set
    abort_on_error: bool = "XPUSHMEM_ERROR_MODE", "return", error_mode;
    /// team slots in the symmetric heap (2..4096; TEAM_WORLD and TEAM_SHARED take two); more live teams is an error
    teams_max: OnUse<usize> = "XPUSHMEM_TEAMS_MAX", "64", on_use(team_slots);
    /// the pattern of every collective synchronisation (the agreement that carries each call's identity): auto (hierarchical on a team spanning nodes with 2+ members on a node, else all-pairs at 3-4 members and dissemination otherwise), linear, dissemination, tree, hierarchical, all-pairs (one round: every member signals every other; a team of more than 33 members runs the dissemination)
    barrier_algorithm: OnUse<BarrierAlgo> = "XPUSHMEM_BARRIER_ALGORITHM", "auto", on_use(algorithm::<BarrierAlgo>);
    /// broadcast algorithm: auto, linear, binomial, pipelined, eager, eager-rounds, hierarchical, agreement (data up to 88 bytes in the agreement's own messages; auto takes it where the agreement is the dissemination or all-pairs)
    broadcast_algorithm: OnUse<BroadcastAlgo> = "XPUSHMEM_BROADCAST_ALGORITHM", "auto", on_use(algorithm::<BroadcastAlgo>);
    /// fcollect/collect algorithm: auto, direct, ring, eager, eager-rounds, hierarchical
    collect_algorithm: OnUse<CollectAlgo> = "XPUSHMEM_COLLECT_ALGORITHM", "auto", on_use(algorithm::<CollectAlgo>);
    /// alltoall/alltoalls algorithm: auto, pairwise, direct, eager, eager-rounds
    alltoall_algorithm: OnUse<AlltoallAlgo> = "XPUSHMEM_ALLTOALL_ALGORITHM", "auto", on_use(algorithm::<AlltoallAlgo>);
    /// reduction algorithm: auto, linear, recursive-doubling, ring, eager, eager-rounds, hierarchical, rs-ag
    reduce_algorithm: OnUse<ReduceAlgo> = "XPUSHMEM_REDUCE_ALGORITHM", "auto", on_use(algorithm::<ReduceAlgo>);
    /// reduce_scatter algorithm: auto, linear
    reduce_scatter_algorithm: OnUse<ReduceScatterAlgo> = "XPUSHMEM_REDUCE_SCATTER_ALGORITHM", "auto", on_use(algorithm::<ReduceScatterAlgo>);
    /// inscan/exscan algorithm: auto, linear, chain
    scan_algorithm: OnUse<ScanAlgo> = "XPUSHMEM_SCAN_ALGORITHM", "auto", on_use(algorithm::<ScanAlgo>);
    /// reductions of at least this many bytes use the ring (reduce-scatter then allgather in 2 (n - 1) steps: traffic per PE independent of the team size) when the reduction algorithm is auto; auto: 256K at 2 PEs, never at 3 or more (there the one-step reduce-scatter + allgather, rs-ag, takes the sizes above 4K per PE up to 4 PEs and above 8K for the whole team on larger teams), and on a team spanning nodes the node-aware algorithm below 256K up to 4 PEs, 64K above, the ring from there; bytes or with a K/M suffix
    reduce_ring_size: Option<usize> = "XPUSHMEM_REDUCE_RING_SIZE", "auto", auto_size;
    /// copies of at least this many bytes into or out of a mapped heap (put, get, put_sym, get_sym, the collectives' and ops' copies) use non-temporal stores, which bypass the caches (no read for ownership of the destination); auto: 16M divided by the PEs on this node, between 1M and 8M (8M up to 2 PEs, 2M at 8, 1M from 16: the node's PEs share its caches), and then also, in a call of the op family's all-to-alls whose copies into a PE together reach 128M divided by the node's PEs (at most 32M), every copy from 64K (many chunks, each below the threshold, leave the caches together); bytes or with a K/M/G suffix (that size alone decides), or off
    nt_copy_size: NtCopyFrom = "XPUSHMEM_NT_COPY_SIZE", "auto", nt_copy_from;
    /// team size from which the eager broadcast, fcollect, reduction and alltoall (algorithm auto, data small enough) move their data in ceil(log2 n) rounds (eager-rounds: Bruck's allgather, or Bruck's alltoall, on the dissemination pattern, one message sent and one read per round) instead of one all-to-all round (eager: n - 1 messages sent and read by every member); auto: 8, and never while this machine runs more PEs than CPUs (a round waits for its sender to be scheduled: one round wins); a team size (at least 2) or off
    eager_rounds_from: RoundsFrom = "XPUSHMEM_EAGER_ROUNDS_FROM", "auto", rounds_from;
    /// chunk of the pipelined broadcast; bytes or with a K/M/G suffix (at least 64)
    coll_chunk_bytes: OnUse<usize> = "XPUSHMEM_COLL_CHUNK_SIZE", "64K", on_use(chunk_size);
    /// largest chunk (bytes per destination, or a K/M suffix) the op family's all-to-alls ship inside their split exchange instead of having the receiver read it from the sender; auto: up to 1 KiB, as far as a one-round message of the team's exchange holds it (team_eager_capacity: 8 KiB divided by the group size, less a header; above about 1 KiB pulling is faster, docs/PERFORMANCE.md round nineteen), 0: never
    ops_eager_size: Option<usize> = "XPUSHMEM_OPS_EAGER_SIZE", "auto", auto_size;
    /// this PE's node: PEs with the same value share memory, others talk through the fabric (default: the host name, boot id and network namespace; set it to split one host into nodes for tests)
    node_id: Option<String> = "XPUSHMEM_NODE_ID", "", opt_text;
    /// libfabric provider of the fabric transport (tcp, verbs, cxi, psm3, efa...; FI_PROVIDER works too); empty: the first provider with RDM endpoints, RMA and atomics that libfabric lists, same-host-only ones skipped
    fabric_provider: Option<String> = "XPUSHMEM_FABRIC_PROVIDER", "", opt_text;
    /// the address (IPv4 or IPv6) or interface name (eth0, ib0...) the fabric transport's endpoint listens on; empty: the address the bootstrap used (unique ID: the local address of this PE's rendezvous connection, so loopback under xpushmem-run; MPI: the provider's first interface), or the provider's own choice where it does not listen on that address (providers that do not address endpoints by IP)
    fabric_addr: Option<String> = "XPUSHMEM_FABRIC_ADDR", "", opt_text;
    /// 1: a thread drives the fabric transport's progress continuously (a PE busy outside xpushmem still serves its peers' RMA and atomics); 0: progress is made by the calls that wait
    progress_thread: bool = "XPUSHMEM_PROGRESS_THREAD", "0", boolean;
    /// atomics of the fabric transport: native (the provider's own where it offers them, else a compare-and-swap loop) or cas (tests: every atomic but compare-and-swap emulated by the loop)
    fabric_atomics: FabricAtomics = "XPUSHMEM_FABRIC_ATOMICS", "native", fabric_atomics;
    /// device heaps over the fabric: auto (registered as Level Zero memory, FI_HMEM_ZE, when the provider offers FI_HMEM, else staged), stage (peers' operations go as messages through registered host buffers and a Level Zero copy at the target) or register (FI_HMEM_ZE; an error when the provider lacks FI_HMEM)
    fabric_device_heap: String = "XPUSHMEM_FABRIC_DEVICE_HEAP", "auto", fabric_device_heap;
    /// the host proxy serving kernels' requests to PEs reached through the fabric: on, or stalled (tests: the ring exists but nothing drains it, so a kernel's remote call ends in its Timeout)
    device_proxy: DeviceProxy = "XPUSHMEM_DEVICE_PROXY", "on", device_proxy;
    /// set by xpushmem-run (internal): the launcher's pid, so a PE whose launcher is gone fails its init at once
    launcher_pid: Option<String> = "XPUSHMEM_LAUNCHER_PID", "", opt_text;
    /// set by xpushmem-run (internal): where a PE reports global_exit and lost peers to the launcher
    launcher_report: Option<String> = "XPUSHMEM_LAUNCHER_REPORT", "", opt_text;
    /// which path the PyTorch op family (xpushmem-ops) takes: host (host-driven transfers), device (kernels enqueued on the caller's queue; device heaps only), auto (device on device heaps whose every peer the device maps, else host: PEs on other nodes need the host path; the expert-parallel ops take the device path on every device heap, reaching other nodes through the host proxy)
    ops_path: OpsPathMode = "XPUSHMEM_OPS_PATH", "auto", ops_path;
    /// OpenSHMEM layer only (the specification's name): size of each PE's symmetric heap, used when XPUSHMEM_SYMMETRIC_SIZE is unset, and then also its maximum (a fixed heap, as the specification has it) unless XPUSHMEM_SYMMETRIC_MAX is set; bytes, a K/M/G/T suffix (powers of 1024) or a number with a fraction or exponent (1.5G, 2e9, 1E3K)
    shmem_symmetric_size: OnUse<Option<usize>> = "SHMEM_SYMMETRIC_SIZE", "", on_use(opt_heap_size);
    /// OpenSHMEM layer only: set (to anything but 0, false, no or off) prints the library version on every PE at shmem_init
    shmem_version: bool = "SHMEM_VERSION", "", presence;
    /// OpenSHMEM layer only: set (to anything but 0, false, no or off) makes PE 0 print every variable of this table (name, value, default, meaning) at shmem_init
    shmem_info: bool = "SHMEM_INFO", "", presence;
    /// OpenSHMEM layer only: set (to anything but 0, false, no or off) enables debugging messages on stderr (XPUSHMEM_LOG=debug) when XPUSHMEM_LOG is unset
    shmem_debug: bool = "SHMEM_DEBUG", "", presence;
}

/// A setting parsed at init whose error, if its value is unusable, is reported by the calls that use it (the
/// collectives' algorithm choices, the team pool and the chunk size: a bad value fails those calls on every PE
/// and leaves the rest of the runtime usable).
pub type OnUse<T> = std::result::Result<T, Error>;

/// A parser whose error is kept for the calls that use the setting.
fn on_use<T>(parse: fn(&'static str) -> Result<T>) -> impl Fn(&'static str) -> Result<OnUse<T>> {
    move |var| Ok(parse(var))
}

/// A setting chosen by a field of [`Config`] (the algorithm enums: `Auto` is resolved through it).
pub(crate) trait FromConfig {
    /// The value the configuration gives, or the error of its variable.
    fn from_config(cfg: &Config) -> Result<Self>
    where
        Self: Sized;
}

macro_rules! from_config {
    ($($t:ty => $field:ident),+ $(,)?) => {
        $(impl FromConfig for $t {
            fn from_config(cfg: &Config) -> Result<Self> {
                cfg.$field.clone()
            }
        }

        impl $t {
            /// `Auto` resolved through the configuration parsed at init, `cfg` (its `XPUSHMEM_*_ALGORITHM`
            /// variable; still `Auto` when that is unset).
            #[allow(dead_code)]
            pub(crate) fn with_cfg(self, cfg: &Config) -> Result<$t> {
                if self != <$t>::Auto {
                    return Ok(self);
                }
                <$t as FromConfig>::from_config(cfg)
            }
        })+
    };
}

from_config!(
    BarrierAlgo => barrier_algorithm,
    BroadcastAlgo => broadcast_algorithm,
    CollectAlgo => collect_algorithm,
    AlltoallAlgo => alltoall_algorithm,
    ReduceAlgo => reduce_algorithm,
    ReduceScatterAlgo => reduce_scatter_algorithm,
    ScanAlgo => scan_algorithm,
);

/// How PEs other than this one are reached (`XPUSHMEM_TRANSPORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportMode {
    /// Each peer through the transport that reaches it.
    Auto,
    /// The deferred test transport (writes wait until quiet, fence or completion).
    Deferred,
    /// Every other PE through the fabric transport, even on this node.
    Fabric,
}

pub use crate::algo::RoundsFrom;

/// From which size heap copies use non-temporal stores (`XPUSHMEM_NT_COPY_SIZE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NtCopyFrom {
    /// [`NtCopyFrom::AUTO_NODE_BYTES`] divided by the PEs on this node, between [`NtCopyFrom::AUTO_MIN`] and
    /// [`NtCopyFrom::AUTO_MAX`]: a
    /// copy that large leaves this PE's share of the node's shared caches. Measured with a core per PE: at 2 PEs
    /// copies from 8 MiB gain (docs/PERFORMANCE.md, bandwidth), at 8 and 16 PEs 2 MiB ones do (all_to_all_vdev
    /// 2 MiB per destination: 3.0 -> 2.0 ms at 8 PEs, 13.1 -> 8.9 ms at 16) while 256 KiB ones lose (alltoall
    /// 256 KiB at 8 PEs: 0.32 -> 0.81 ms).
    Auto,
    /// From this many bytes.
    Size(usize),
    /// Never.
    Off,
}

impl NtCopyFrom {
    /// `Auto`'s bytes for the whole node.
    pub const AUTO_NODE_BYTES: usize = 16 << 20;
    /// `Auto`'s smallest threshold.
    pub const AUTO_MIN: usize = 1 << 20;
    /// `Auto`'s largest threshold (one or two PEs on the node).
    pub const AUTO_MAX: usize = 8 << 20;

    /// `Auto`'s bytes for the whole node of one call's copies ([`NtCopyFrom::call_threshold`]): about the last-level
    /// cache of a 16-core server (105 MiB on the lent measuring machine).
    pub const AUTO_CALL_NODE_BYTES: usize = 128 << 20;
    /// `Auto`'s largest per-call bytes for one PE ([`NtCopyFrom::call_threshold`] with one or two PEs on the node):
    /// a call that pulls this much into one PE streams even when the node's caches are large. Measured with a core
    /// per PE on a 300-MiB-L3 host: `all_to_all_vdev_2d` at 16 MiB per destination and 2 PEs (4-MiB chunks,
    /// 32 MiB into each PE) 7.6 -> 5.8 ms with its chunks streamed (docs/PERFORMANCE.md, round thirteen).
    pub const AUTO_CALL_MAX: usize = 32 << 20;

    /// The bytes one call's copies into a PE must reach together, on a node of `local_pes` PEs each making such a
    /// call, before its copies of at least 64 KiB use non-temporal stores whatever their own size
    /// (`Shmem::get_sym_streamed`): `Auto` only, [`NtCopyFrom::AUTO_CALL_NODE_BYTES`] divided by the PEs, at most
    /// [`NtCopyFrom::AUTO_CALL_MAX`] (8 MiB at 16 PEs, 16 MiB at 8, 32 MiB at 2 and 4). The per-copy threshold judges one copy; a call of many copies, each below
    /// it (the 2-D all-to-all's per-expert chunks), can together leave the caches all the same. `None` for an
    /// explicit size or `Off`: the user's threshold alone decides.
    pub fn call_threshold(self, local_pes: usize) -> Option<usize> {
        match self {
            NtCopyFrom::Auto => {
                Some((Self::AUTO_CALL_NODE_BYTES / local_pes.max(1)).min(Self::AUTO_CALL_MAX))
            }
            NtCopyFrom::Size(_) | NtCopyFrom::Off => None,
        }
    }

    /// The threshold for a node of `local_pes` PEs (`None`: never).
    pub fn threshold(self, local_pes: usize) -> Option<usize> {
        match self {
            NtCopyFrom::Auto => Some(
                (Self::AUTO_NODE_BYTES / local_pes.max(1)).clamp(Self::AUTO_MIN, Self::AUTO_MAX),
            ),
            NtCopyFrom::Size(n) => Some(n),
            NtCopyFrom::Off => None,
        }
    }
}

/// How device-heap descriptors reach node peers (`XPUSHMEM_IPC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpcMode {
    /// The default: SCM_RIGHTS over the authenticated node socket.
    Auto,
    /// `pidfd_getfd`, with ptrace permission granted only while descriptors are taken.
    Pidfd,
    /// SCM_RIGHTS over the authenticated node socket.
    Socket,
}

/// Atomics of the fabric transport (`XPUSHMEM_FABRIC_ATOMICS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricAtomics {
    /// The provider's own atomics where it offers them, else a compare-and-swap loop.
    Native,
    /// Tests: every atomic but compare-and-swap emulated by the compare-and-swap loop.
    Cas,
}

/// The host proxy serving kernels' requests to PEs reached through the fabric (`XPUSHMEM_DEVICE_PROXY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceProxy {
    /// The proxy drains the ring.
    On,
    /// Tests: the ring exists but nothing drains it (a kernel's remote call ends in its timeout).
    Stalled,
}

/// Which path the PyTorch op family takes (`XPUSHMEM_OPS_PATH`; resolved by `xpushmem_ops::ops_path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpsPathMode {
    /// Device on device heaps whose every peer the device maps, else host.
    Auto,
    /// Host-driven transfers.
    Host,
    /// Kernels enqueued on the caller's queue (device heaps only).
    Device,
}

impl OpsPathMode {
    /// The variable's value that selects this mode.
    pub fn name(self) -> &'static str {
        match self {
            OpsPathMode::Auto => "auto",
            OpsPathMode::Host => "host",
            OpsPathMode::Device => "device",
        }
    }
}

/// The value of a variable in the environment, or `None` when unset or empty.
pub fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn raw(name: &'static str) -> String {
    env_value(name).unwrap_or_else(|| spec(name).default.to_string())
}

fn spec(name: &str) -> &'static VarSpec {
    VARS.iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| unreachable!("config variable {name} missing from VARS"))
}

fn bad(var: &'static str, value: &str, reason: impl Into<String>) -> Error {
    Error::Config {
        var,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Parse a size such as `4096`, `512M`, `2G`, `1.5G` (binary units; a trailing `B`/`iB` is accepted).
pub fn parse_size(text: &str) -> Option<usize> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix("ib"))
        .or_else(|| t.strip_suffix('B'))
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(t);
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1u128 << 10),
        'm' | 'M' => (&t[..t.len() - 1], 1u128 << 20),
        'g' | 'G' => (&t[..t.len() - 1], 1u128 << 30),
        't' | 'T' => (&t[..t.len() - 1], 1u128 << 40),
        _ => (t, 1u128),
    };
    let num = num.trim();
    let bytes = if let Ok(n) = num.parse::<u128>() {
        n.checked_mul(mult)?
    } else {
        let f: f64 = num.parse().ok()?;
        if !(f.is_finite() && f >= 0.0) {
            return None;
        }
        (f * mult as f64) as u128
    };
    usize::try_from(bytes).ok()
}

fn parse_u64(var: &'static str) -> Result<u64> {
    let v = raw(var);
    v.trim()
        .parse::<u64>()
        .map_err(|_| bad(var, &v, "expected a non-negative integer"))
}

fn parse_bool(var: &'static str) -> Result<bool> {
    let v = raw(var);
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(bad(var, &v, "expected 0/1, true/false, yes/no or on/off")),
    }
}

fn parse_choice(var: &'static str, allowed: &[&str]) -> Result<String> {
    let v = raw(var).trim().to_ascii_lowercase();
    if allowed.contains(&v.as_str()) {
        Ok(v)
    } else {
        Err(bad(
            var,
            &v,
            format!("expected one of {}", allowed.join(", ")),
        ))
    }
}

/// Largest accepted `XPUSHMEM_TEAMS_MAX` (the teams' free-slot mask must fit 64 words of their exchange area).
pub const TEAMS_MAX_LIMIT: usize = 64 * 64;
/// Default number of team slots (`XPUSHMEM_TEAMS_MAX`).
pub const TEAMS_MAX_DEFAULT: usize = 64;

/// Largest symmetric heap we accept (the mapping of every node peer must fit the address space).
pub const MAX_SYMMETRIC_SIZE: usize = 1 << 44;

/// Address space reserved for each PE's growable heap when `XPUSHMEM_SYMMETRIC_MAX` is unset: 1 TiB (nothing is
/// committed until touched), less on nodes of many PEs ([`Config::heap_max`]).
pub const DEFAULT_HEAP_RESERVE: usize = 1 << 40;

/// Address space every PE may spend on the node's heap mappings when `XPUSHMEM_SYMMETRIC_MAX` is unset: half of a
/// 47-bit user address space.
pub const HEAP_ADDRESS_BUDGET: usize = 1 << 46;

// The parsers of the table: each reads its variable (or the default) and names the variable when it fails.

fn heap_size(var: &'static str) -> Result<usize> {
    let text = raw(var);
    let n = parse_size(&text).ok_or_else(|| {
        bad(
            var,
            &text,
            "expected bytes or a number with K/M/G/T suffix, e.g. 512M or 2G",
        )
    })?;
    if !(4096..=MAX_SYMMETRIC_SIZE).contains(&n) {
        return Err(bad(
            var,
            &text,
            format!("must be in [4096, {MAX_SYMMETRIC_SIZE}] bytes"),
        ));
    }
    Ok(n)
}

/// `SHMEM_SYMMETRIC_SIZE`: unset, or a heap size like `XPUSHMEM_SYMMETRIC_SIZE`.
fn opt_heap_size(var: &'static str) -> Result<Option<usize>> {
    match env_value(var) {
        Some(_) => heap_size(var).map(Some),
        None => Ok(None),
    }
}

/// The OpenSHMEM switches (`SHMEM_VERSION`...): on when set to anything but `0`, `false`, `no` or `off`.
fn presence(var: &'static str) -> Result<bool> {
    Ok(env_value(var).is_some_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "false" | "no" | "off"
        )
    }))
}

fn timeout_ms(var: &'static str) -> Result<Option<Duration>> {
    let ms = parse_u64(var)?;
    Ok((ms > 0).then(|| Duration::from_millis(ms)))
}

fn boolean(var: &'static str) -> Result<bool> {
    parse_bool(var)
}

fn log_level(var: &'static str) -> Result<String> {
    parse_choice(var, &["off", "error", "warn", "info", "debug", "trace"])
}

fn ops_path(var: &'static str) -> Result<OpsPathMode> {
    match parse_choice(var, &["auto", "host", "device"])?.as_str() {
        "host" => Ok(OpsPathMode::Host),
        "device" => Ok(OpsPathMode::Device),
        _ => Ok(OpsPathMode::Auto),
    }
}

fn bootstrap_method(var: &'static str) -> Result<String> {
    parse_choice(var, &["auto", "uid", "mpi", "pmix", "single"])
}

fn opt_text(var: &'static str) -> Result<Option<String>> {
    Ok(env_value(var))
}

fn opt_count(var: &'static str) -> Result<Option<usize>> {
    env_value(var)
        .map(|v| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| bad(var, &v, "expected a non-negative integer"))
        })
        .transpose()
}

fn ip_addr(var: &'static str) -> Result<IpAddr> {
    let v = raw(var);
    v.trim()
        .parse()
        .map_err(|_| bad(var, &v, "expected an IPv4 or IPv6 address"))
}

fn plain_u32(var: &'static str) -> Result<u32> {
    let n = parse_u64(var)?;
    u32::try_from(n).map_err(|_| bad(var, &n.to_string(), "must fit in 32 bits"))
}

fn auto_u32(var: &'static str) -> Result<Option<u32>> {
    match raw(var).trim() {
        "auto" => Ok(None),
        _ => plain_u32(var).map(Some),
    }
}

fn auto_usize(var: &'static str) -> Result<Option<usize>> {
    let v = raw(var);
    match v.trim() {
        "auto" => Ok(None),
        t => t
            .parse()
            .map(Some)
            .map_err(|_| bad(var, &v, "expected auto or a device number")),
    }
}

fn auto_size(var: &'static str) -> Result<Option<usize>> {
    let v = raw(var);
    match v.trim() {
        "auto" => Ok(None),
        t => parse_size(t)
            .map(Some)
            .ok_or_else(|| bad(var, &v, "expected auto or a size in bytes (e.g. 2K)")),
    }
}

fn nt_copy_from(var: &'static str) -> Result<NtCopyFrom> {
    let v = raw(var);
    match v.trim() {
        "auto" => Ok(NtCopyFrom::Auto),
        "off" => Ok(NtCopyFrom::Off),
        t => parse_size(t)
            .map(NtCopyFrom::Size)
            .ok_or_else(|| bad(var, &v, "expected auto, off or a size in bytes (e.g. 8M)")),
    }
}

fn rounds_from(var: &'static str) -> Result<RoundsFrom> {
    let v = raw(var);
    match v.trim() {
        "auto" => Ok(RoundsFrom::Auto),
        "off" => Ok(RoundsFrom::Off),
        t => match t.parse::<usize>() {
            Ok(n) if n >= 2 => Ok(RoundsFrom::Size(n)),
            _ => Err(bad(
                var,
                &v,
                "expected auto, off or a team size of at least 2",
            )),
        },
    }
}

fn micros(var: &'static str) -> Result<Duration> {
    Ok(Duration::from_micros(parse_u64(var)?.clamp(1, 1_000_000)))
}

fn heap_kind(var: &'static str) -> Result<HeapKind> {
    match parse_choice(var, &["host", "device"])?.as_str() {
        "device" => Ok(HeapKind::Device),
        _ => Ok(HeapKind::Host),
    }
}

fn fabric_atomics(var: &'static str) -> Result<FabricAtomics> {
    match parse_choice(var, &["native", "cas"])?.as_str() {
        "cas" => Ok(FabricAtomics::Cas),
        _ => Ok(FabricAtomics::Native),
    }
}

fn fabric_device_heap(var: &'static str) -> Result<String> {
    parse_choice(var, &["auto", "stage", "register"])
}

fn device_proxy(var: &'static str) -> Result<DeviceProxy> {
    match parse_choice(var, &["on", "stalled"])?.as_str() {
        "stalled" => Ok(DeviceProxy::Stalled),
        _ => Ok(DeviceProxy::On),
    }
}

fn transport_mode(var: &'static str) -> Result<TransportMode> {
    match parse_choice(var, &["auto", "fabric", "deferred"])?.as_str() {
        "deferred" => Ok(TransportMode::Deferred),
        "fabric" => Ok(TransportMode::Fabric),
        _ => Ok(TransportMode::Auto),
    }
}

fn ipc_mode(var: &'static str) -> Result<IpcMode> {
    match parse_choice(var, &["auto", "pidfd", "socket"])?.as_str() {
        "pidfd" => Ok(IpcMode::Pidfd),
        "socket" => Ok(IpcMode::Socket),
        _ => Ok(IpcMode::Auto),
    }
}

fn error_mode(var: &'static str) -> Result<bool> {
    Ok(parse_choice(var, &["return", "abort"])? == "abort")
}

fn team_slots(var: &'static str) -> Result<usize> {
    let v = raw(var);
    match v.trim().parse::<usize>() {
        Ok(n) if (2..=TEAMS_MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(bad(
            var,
            &v,
            format!("expected a number of team slots in [2, {TEAMS_MAX_LIMIT}] (TEAM_WORLD and TEAM_SHARED take two)"),
        )),
    }
}

fn algorithm<A: std::str::FromStr>(var: &'static str) -> Result<A>
where
    A::Err: std::fmt::Display,
{
    let v = raw(var);
    v.parse::<A>()
        .map_err(|e| bad(var, &v, format!("unknown algorithm ({e})")))
}

fn chunk_size(var: &'static str) -> Result<usize> {
    let v = raw(var);
    parse_size(&v)
        .filter(|&b| b >= 64)
        .ok_or_else(|| bad(var, &v, "expected a size of at least 64 bytes (e.g. 64K)"))
}

impl Config {
    /// Entries of the device library's team table: one per team slot (`XPUSHMEM_TEAMS_MAX`; the default count when
    /// its value is invalid, in which case no split team can be made).
    pub fn device_team_slots(&self) -> usize {
        self.teams_max
            .as_ref()
            .copied()
            .unwrap_or(TEAMS_MAX_DEFAULT)
    }

    /// Apply the OpenSHMEM specification's variables (the `SHMEM_*` rows of [`VARS`]), as the OpenSHMEM layer's
    /// `shmem_init` does: `SHMEM_SYMMETRIC_SIZE` sets the heap size and `SHMEM_DEBUG` the log level `debug`, each
    /// only where its `XPUSHMEM_*` variable is unset (that one wins). A bad `SHMEM_SYMMETRIC_SIZE` is an error
    /// even when `XPUSHMEM_SYMMETRIC_SIZE` is set.
    pub fn apply_openshmem(&mut self) -> Result<()> {
        let size = self.shmem_symmetric_size.clone()?;
        if env_value("XPUSHMEM_SYMMETRIC_SIZE").is_none() {
            if let Some(n) = size {
                // The specification's variable is the heap's size: a fixed heap unless a maximum is set.
                self.symmetric_size = n;
                self.symmetric_max.get_or_insert(n);
            }
        }
        if self.shmem_debug && env_value("XPUSHMEM_LOG").is_none() {
            self.log = "debug".into();
        }
        Ok(())
    }

    /// The most the symmetric heap may grow to: `XPUSHMEM_SYMMETRIC_MAX`, else [`DEFAULT_HEAP_RESERVE`] or less, so
    /// that the mappings of a node of `node_pes` PEs (each PE maps every node peer's world reserve and team space,
    /// with alignment slack: four reserves a peer; on device heaps each PE reserves the world's reserve, the team
    /// space after it at a power of two, and the scratch tail for itself and for every node peer: under three
    /// reserves each) fit [`HEAP_ADDRESS_BUDGET`], and an eighth of the smallest
    /// address-space limit of the job's PEs (`as_limit`, `RLIMIT_AS`) (a power of two, at least
    /// `XPUSHMEM_SYMMETRIC_SIZE`); an error naming the variable when it is below `XPUSHMEM_SYMMETRIC_SIZE`.
    pub fn heap_max(&self, node_pes: usize, as_limit: usize) -> Result<usize> {
        match self.symmetric_max {
            Some(m) if m < self.symmetric_size => Err(bad(
                "XPUSHMEM_SYMMETRIC_MAX",
                &m.to_string(),
                format!(
                    "is below XPUSHMEM_SYMMETRIC_SIZE ({} bytes), the heap's first chunk",
                    self.symmetric_size
                ),
            )),
            Some(m) => Ok(m),
            None => {
                let budget = HEAP_ADDRESS_BUDGET.min(as_limit / 8);
                let fits = (budget / (4 * node_pes.max(1))).max(1);
                let pow2 = 1usize << (usize::BITS - 1 - fits.leading_zeros());
                Ok(DEFAULT_HEAP_RESERVE.min(pow2).max(self.symmetric_size))
            }
        }
    }

    /// Every variable of [`VARS`], one line each: name, value (set, default or unset) and meaning; what
    /// `xpushmem-info` and the OpenSHMEM layer's `SHMEM_INFO` print.
    pub fn describe() -> String {
        let w = VARS.iter().map(|v| v.name.len()).max().unwrap_or(0);
        let mut out = String::new();
        for (name, value, default, doc) in Config::table() {
            let shown = match &value {
                Some(v) => format!("{v} (set)"),
                None if default.is_empty() => "(unset)".into(),
                None => format!("{default} (default)"),
            };
            out.push_str(&format!("  {name:<w$}  {shown:<22} {doc}\n"));
        }
        out
    }

    /// Rows of (name, current value or empty, default, doc), for `xpushmem-info`.
    pub fn table() -> Vec<(&'static str, Option<String>, &'static str, &'static str)> {
        VARS.iter()
            .map(|v| (v.name, env_value(v.name), v.default, v.doc.trim()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nt_copy_thresholds_follow_the_pes_on_the_node() {
        let auto = NtCopyFrom::Auto;
        let got: Vec<_> = [1, 2, 3, 4, 8, 16, 64]
            .map(|n| auto.threshold(n).map(|b| b >> 10))
            .to_vec();
        // KiB: 16 MiB shared by the node's PEs, from 8 MiB down to 1 MiB.
        let want = [8192, 8192, 5461, 4096, 2048, 1024, 1024]
            .map(Some)
            .to_vec();
        assert_eq!(got, want);
        assert_eq!(NtCopyFrom::Size(4096).threshold(16), Some(4096));
        assert_eq!(NtCopyFrom::Off.threshold(2), None);
        // Per call: 128 MiB for the node, at most 32 MiB a PE, only under auto.
        let calls: Vec<_> = [1, 2, 4, 8, 16]
            .map(|n| auto.call_threshold(n).map(|b| b >> 20))
            .to_vec();
        assert_eq!(calls, [32, 32, 32, 16, 8].map(Some).to_vec());
        assert_eq!(NtCopyFrom::Size(4096).call_threshold(16), None);
        assert_eq!(NtCopyFrom::Off.call_threshold(16), None);
    }

    /// The default maximum keeps every PE's mappings of its node's heaps in the budget, at any node size: host heaps
    /// (world reserve and team space, mapped with alignment slack: 4 reserves a peer) and device heaps (the world's
    /// reserve, the team space from the next power of two, a scratch tail under 1 MiB: per peer and for itself).
    #[test]
    fn default_heap_max_fits_the_address_budget() {
        let mut cfg = Config::from_env().unwrap();
        cfg.symmetric_max = None;
        cfg.symmetric_size = 1 << 30;
        for pes in [1usize, 2, 16, 17, 64, 256] {
            let max = cfg.heap_max(pes, usize::MAX).unwrap();
            assert!(
                (1 << 30..=DEFAULT_HEAP_RESERVE).contains(&max),
                "{pes} PEs: {max}"
            );
            assert!(
                pes * 4 * max <= HEAP_ADDRESS_BUDGET,
                "host heaps, {pes} PEs: {max}"
            );
            let device = max.next_power_of_two() + max + (1 << 20);
            assert!(
                pes * device <= HEAP_ADDRESS_BUDGET,
                "device heaps, {pes} PEs: {max}"
            );
        }
        assert_eq!(cfg.heap_max(16, usize::MAX).unwrap(), DEFAULT_HEAP_RESERVE);
        assert!(cfg.heap_max(17, usize::MAX).unwrap() < DEFAULT_HEAP_RESERVE);
    }

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("1.5G"), Some(3 << 29));
        // The OpenSHMEM specification's forms of SHMEM_SYMMETRIC_SIZE: fractions and scientific notation.
        assert_eq!(parse_size("2e9"), Some(2_000_000_000));
        assert_eq!(parse_size("1.5E3K"), Some(1500 << 10));
        assert_eq!(parse_size("0.5m"), Some(1 << 19));
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn every_var_has_a_unique_name_and_docs() {
        let mut names: Vec<_> = VARS.iter().map(|v| v.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), VARS.len());
        // The runtime's own variables, and the OpenSHMEM specification's that the OpenSHMEM layer maps onto them.
        assert!(VARS.iter().all(|v| (v.name.starts_with("XPUSHMEM_")
            || (v.name.starts_with("SHMEM_")
                && v.doc.trim().starts_with("OpenSHMEM layer only")))
            && !v.doc.is_empty()));
    }

    /// The table of `docs/ENV.md`, rendered from [`VARS`].
    fn env_md_table() -> String {
        let mut t = String::from("| variable | type | default | meaning |\n|---|---|---|---|\n");
        for v in VARS {
            let ty =
                v.ty.replace("crate::team::", "")
                    .replace("crate::coll::", "");
            t.push_str(&format!(
                "| `{}` | `{}` | `{}` | {} |\n",
                v.name,
                ty.replace(' ', ""),
                v.default,
                v.doc.trim()
            ));
        }
        t
    }

    #[test]
    fn docs_env_md_is_generated_from_the_table() {
        // XPUSHMEM_BLESS=1 rewrites the table between the markers instead of comparing.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/ENV.md");
        let doc = std::fs::read_to_string(path).expect("docs/ENV.md");
        let (begin, end) = ("<!-- env-table: begin -->\n", "<!-- env-table: end -->");
        let a = doc.find(begin).expect("docs/ENV.md has the begin marker") + begin.len();
        let b = doc.find(end).expect("docs/ENV.md has the end marker");
        let want = env_md_table();
        if std::env::var("XPUSHMEM_BLESS").is_ok_and(|v| v == "1") {
            std::fs::write(path, format!("{}{want}{}", &doc[..a], &doc[b..]))
                .expect("write ENV.md");
            return;
        }
        assert_eq!(
            &doc[a..b],
            want,
            "docs/ENV.md drifted from config::VARS (regenerate: XPUSHMEM_BLESS=1 cargo test -p xpushmem --lib config)"
        );
    }

    #[test]
    fn every_variable_is_declared_once_and_documented() {
        for v in VARS {
            assert!(!v.doc.trim().is_empty(), "{} has no description", v.name);
        }
        let names: std::collections::HashSet<_> = VARS.iter().map(|v| v.name).collect();
        assert_eq!(names.len(), VARS.len(), "a variable is declared twice");
    }
}
