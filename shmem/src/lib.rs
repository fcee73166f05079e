//! # xpushmem
//!
//! A SHMEM/PGAS runtime for CPUs and Intel GPUs: every PE (process) owns a symmetric heap; collective allocation
//! gives the same offset on every PE; one-sided puts, gets, atomics and signals reach any PE's copy.
//!
//! ```
//! use xpushmem::{Cmp, SignalOp};
//! # fn main() -> xpushmem::Result<()> {
//! let sh = xpushmem::init_single()?; // xpushmem::init() under xpushmem-run or mpirun
//! let (me, n) = (sh.my_pe(), sh.n_pes());
//! let data = sh.calloc::<u64>(4)?;
//! let flag = sh.calloc::<u64>(1)?.at(0)?;
//! let right = (me + 1) % n;
//! sh.put_signal(data, &[me as u64; 4], flag, 1, SignalOp::Set, right)?;
//! sh.signal_wait_until(flag, Cmp::Eq, 1)?;
//! let mut got = [0u64; 4];
//! sh.get(&mut got, data, me)?;
//! assert_eq!(got, [((me + n - 1) % n) as u64; 4]);
//! sh.finalize()?;
//! # Ok(()) }
//! ```
//!
//! Every fallible call returns [`Result`]; bad PEs, addresses, sizes, exhausted heaps, timeouts and lost peers are
//! [`Error`]s naming the value and the limit. Configuration: [`config::VARS`] (`xpushmem-info` prints it).
#![warn(missing_docs)]

pub mod abi;
pub mod algo;
pub use crate::core::amo;
pub use crate::core::domain;
pub(crate) mod bootstrap;
pub mod coll;
pub mod config;
pub(crate) mod core;
pub mod device;
pub mod error;
pub(crate) mod hal;
pub(crate) mod init;
pub(crate) mod job;
pub use crate::team::memory;
pub(crate) mod net;
pub use crate::core::rma;
pub mod runtime;
pub use crate::core::symaddr;
pub use crate::core::sync;
pub(crate) mod sys;
pub mod team;
pub mod transport;
pub mod types;
pub(crate) mod wait;

pub use bootstrap::uid::UNIQUE_ID_BYTES;
pub use bootstrap::UniqueId;
pub use coll::{
    AlltoallAlgo, BarrierAlgo, BitwiseReducible, BroadcastAlgo, CollectAlgo, ReduceAlgo, ReduceOp,
    ReduceScatterAlgo, Reducible, ScanAlgo,
};
pub use device::{Device, DeviceEvent, KernelArg};
pub use error::{Error, ErrorCode, Result};
pub use rma::{Pending, Registered};
pub use runtime::{
    get_unique_id, init, init_attr, init_single, init_thread, BootstrapSpec, InitAttr, Nodes, Shmem,
};
pub use sync::SyncInt;
pub use team::{Agreement, Messages, NodeAwareStats, Team, TeamConfig};
pub use types::{
    AtomicInt, AtomicWord, Cmp, CopyStats, Domain, HeapKind, SignalOp, SymRef, SymSlice, Symmetric,
    ThreadLevel,
};

/// What a launcher needs of the runtime (the `xpushmem-launch` crate's supervisor and `xpushmem-run` use it): the
/// unique-ID rendezvous server it serves for its PEs, the variables through which a PE finds its launcher and
/// reports to it, the tie of a PE to its launcher's life, and `global_exit`.
pub mod launcher {
    pub use crate::bootstrap::launcher::{global_exit, tie_to_launcher, PID_VAR, REPORT_VAR};
    pub use crate::bootstrap::uid::Server;
}

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
