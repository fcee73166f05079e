//! # xpushmem-perf
//!
//! The performance suite of xpushmem, modelled on NVSHMEM's perftest and the OSU OpenSHMEM benchmarks: put/get
//! latency and bandwidth, `p`/`g`, the `put_signal` ping-pong, atomics, barriers, and (as they land) collectives and
//! the `xpushmem-ops` op family. Every benchmark validates the data it moved and fails loudly when it is wrong.
//!
//! Run it as PEs: `xpushmem-run -n 2 xpushmem-perf [BENCH|GROUP ...] [-b 8 -e 64M -f 2 -i N -w N -r N] [--csv F]`.
//! `xpushmem-perf report` turns the CSV files of xpushmem and of the C peers (`benches/peers/`, driven by
//! `scripts/bench.sh`) into `docs/PERFORMANCE.md` with PNG plots.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod bench;
pub mod coll;
pub mod csv;
pub mod ctx;
pub mod ep;
pub mod error;
pub mod fabric;
pub mod ops;
pub mod opts;
pub mod plot;
pub mod report;
pub mod rma;
pub mod scale;
pub mod scale_ep;
pub mod stats;
pub mod suites;
pub mod sync;

pub use error::{PerfError, Result};

/// Bind this process to one CPU according to `mode`, as PE `me` of `n`: the `me mod k`-th of the `k` CPUs it may
/// run on. Returns the CPU, or `None` when left unbound.
pub fn bind(mode: opts::Bind, me: usize, n: usize) -> Option<usize> {
    let allowed = rustix::thread::sched_getaffinity(None).ok()?;
    let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| allowed.is_set(c))
        .collect();
    let go = match mode {
        opts::Bind::None => false,
        opts::Bind::Core => true,
        opts::Bind::Auto => n <= cpus.len(),
    };
    if !go || cpus.is_empty() {
        return None;
    }
    let cpu = cpus[me % cpus.len()];
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).ok()?;
    Some(cpu)
}
