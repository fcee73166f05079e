//! `xpushmem-perf report`: turn the CSV results of one `scripts/bench.sh` run (xpushmem and every peer) into
//! `docs/PERFORMANCE.md` (one table per operation: xpushmem, each peer, the ratio, the physical reference; the
//! targets with met/missed) and PNG charts of latency and bandwidth versus size.

use crate::csv::{self, Record};
use crate::error::{PerfError, Result};
use crate::plot::{Chart, Series};
use crate::stats::{self, human_size};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What a table leads with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Time of one operation in µs (lower is better).
    Lat,
    /// GB/s (higher is better).
    Bw,
}

/// One column source: an implementation's benchmark.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    /// Column label.
    pub label: &'static str,
    /// `impl` in the CSV.
    pub imp: &'static str,
    /// `bench` in the CSV.
    pub bench: &'static str,
}

/// One operation's table (and chart).
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Anchor and PNG file stem.
    pub id: &'static str,
    /// Heading.
    pub title: &'static str,
    /// What one operation is, for each implementation.
    pub what: &'static str,
    /// Lead metric.
    pub metric: Metric,
    /// The xpushmem benchmark.
    pub xp: &'static str,
    /// PE counts shown: one fixed count (point to point), or every count the run measured when several are
    /// listed (the list is then the usual set, for the documentation).
    pub npes: &'static [usize],
    /// Peers (same PE count).
    pub peers: &'static [Col],
    /// Physical references (matched by size at any PE count).
    pub refs: &'static [Col],
    /// Draw a chart per PE count.
    pub plot: bool,
}

const fn col(label: &'static str, imp: &'static str, bench: &'static str) -> Col {
    Col { label, imp, bench }
}

const OSH_PUT: Col = col("Open MPI SHMEM", "oshmem", "put_lat");
const MEMCPY: Col = col("memcpy", "memcpy", "memcpy");
/// memcpy from one source into the distinct chunks of a window (get_bw's memory traffic).
const MEMCPY_WIN: Col = col("memcpy into a window", "memcpy", "memcpy_win");

/// Every table of the page, in order.
pub const SPECS: &[Spec] = &[
    Spec {
        id: "put_lat",
        title: "put latency (blocking put + quiet)",
        what: "xpushmem `put` + `quiet`; Open MPI SHMEM `shmem_putmem` + `shmem_quiet`; MPI `MPI_Put` + `MPI_Win_flush` on a shared window (`MPI_Win_allocate_shared`, osc sm) and a regular one (`MPI_Win_allocate`). PE 0 writes PE 1's buffer (one reused target); this is the initiator's cost to complete a put, nobody waits on the other side. Reference: one `memcpy` of the same size in one process.",
        metric: Metric::Lat,
        xp: "put_lat",
        npes: &[2],
        peers: &[
            OSH_PUT,
            col("MPI shared win", "mpi-shared", "put_lat"),
            col("MPI Win_allocate", "mpi-alloc", "put_lat"),
        ],
        refs: &[MEMCPY],
        plot: true,
    },
    Spec {
        id: "put_nbi_lat",
        title: "put_nbi + quiet latency",
        what: "xpushmem `put_nbi` + `quiet`; Open MPI SHMEM `shmem_putmem_nbi` + `shmem_quiet`.",
        metric: Metric::Lat,
        xp: "put_nbi_lat",
        npes: &[2],
        peers: &[col("Open MPI SHMEM", "oshmem", "put_nbi_lat")],
        refs: &[MEMCPY],
        plot: false,
    },
    Spec {
        id: "get_lat",
        title: "get latency (blocking get)",
        what: "xpushmem `get`; Open MPI SHMEM `shmem_getmem`; MPI `MPI_Get` + `MPI_Win_flush` (shared / regular window). PE 0 reads PE 1's buffer.",
        metric: Metric::Lat,
        xp: "get_lat",
        npes: &[2],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "get_lat"),
            col("MPI shared win", "mpi-shared", "get_lat"),
            col("MPI Win_allocate", "mpi-alloc", "get_lat"),
        ],
        refs: &[MEMCPY],
        plot: true,
    },
    Spec {
        id: "get_nbi_lat",
        title: "get_nbi + quiet latency",
        what: "xpushmem `get_nbi` + `quiet`; Open MPI SHMEM `shmem_getmem_nbi` + `shmem_quiet`.",
        metric: Metric::Lat,
        xp: "get_nbi_lat",
        npes: &[2],
        peers: &[col("Open MPI SHMEM", "oshmem", "get_nbi_lat")],
        refs: &[MEMCPY],
        plot: false,
    },
    Spec {
        id: "put_bw",
        title: "put bandwidth (window of non-blocking puts, then quiet)",
        what: "Windows of up to 64 non-blocking puts (fewer when a window would exceed 64 MiB) into one reused target on PE 1, then `quiet` (MPI: `MPI_Put`s then `MPI_Win_flush`), like OSU's `osu_oshm_put_bw`. Reference: `memcpy` bandwidth with hot buffers in one process. From 64 KiB the memcpy probe, xpushmem (also with NT copies off) and Open MPI SHMEM also ran in interleaved rounds; ratios marked † are paired round by round (see *How to read the tables*).",
        metric: Metric::Bw,
        xp: "put_bw",
        npes: &[2],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "put_bw"),
            col("MPI shared win", "mpi-shared", "put_bw"),
            col("MPI Win_allocate", "mpi-alloc", "put_bw"),
            col("xpushmem, NT copies off", "xpushmem-nt-off", "put_bw"),
        ],
        refs: &[MEMCPY],
        plot: true,
    },
    Spec {
        id: "get_bw",
        title: "get bandwidth (window of non-blocking gets, then quiet)",
        what: "Windows of up to 64 non-blocking gets (fewer when a window would exceed 64 MiB) from one source on PE 1 into distinct local chunks, then `quiet` / `MPI_Win_flush`. Reference: `memcpy` from one hot source into the distinct chunks of the same windows in one process (the same memory traffic: from a few MiB per window the destination is DRAM, not cache, which the hot-buffer `memcpy` of put bandwidth never leaves). From 64 KiB the memcpy probe, xpushmem (also with NT copies off) and Open MPI SHMEM also ran in interleaved rounds; ratios marked † are paired round by round (see *How to read the tables*).",
        metric: Metric::Bw,
        xp: "get_bw",
        npes: &[2],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "get_bw"),
            col("MPI shared win", "mpi-shared", "get_bw"),
            col("MPI Win_allocate", "mpi-alloc", "get_bw"),
            col("xpushmem, NT copies off", "xpushmem-nt-off", "get_bw"),
        ],
        refs: &[MEMCPY_WIN],
        plot: true,
    },
    Spec {
        id: "p_lat",
        title: "p latency (one u64 + quiet)",
        what: "xpushmem `p` + `quiet`; Open MPI SHMEM `shmem_long_p` + `shmem_quiet`.",
        metric: Metric::Lat,
        xp: "p_lat",
        npes: &[2],
        peers: &[col("Open MPI SHMEM", "oshmem", "p_lat")],
        refs: &[],
        plot: false,
    },
    Spec {
        id: "g_lat",
        title: "g latency (one u64)",
        what: "xpushmem `g`; Open MPI SHMEM `shmem_long_g`.",
        metric: Metric::Lat,
        xp: "g_lat",
        npes: &[2],
        peers: &[col("Open MPI SHMEM", "oshmem", "g_lat")],
        refs: &[],
        plot: false,
    },
    Spec {
        id: "put_signal_pp",
        title: "put_signal ping-pong (one-way latency)",
        what: "PE 0 and PE 1 bounce a message: payload, then a signal; the receiver waits for the signal, checks the sequence number stamped into the first and last 8 bytes, and answers. One-way = round trip / 2. xpushmem: `put_signal` (SET) + `signal_wait_until`. Open MPI SHMEM 4.1 implements OpenSHMEM 1.4, which has no `shmem_put_signal`: **emulated** as `shmem_putmem` + `shmem_fence` + `shmem_long_atomic_set`, waited for with `shmem_long_wait_until`. Reference: a hand-written ping-pong of two processes over one shared mapping (memcpy, release store of a flag, spin with acquire loads and `pause`), doing the same stamps and checks. One difference in the receiver's work: the floor and Open MPI SHMEM read the two stamps from their own buffer with plain loads (`memcpy`), xpushmem's benchmark with `get` from its own PE (one call below 16 B, two from 16 B), because safe Rust has no plain load of symmetric memory (`ptr` gives a raw pointer, and the benchmarks are written without `unsafe`). During development, the same benchmark reading the stamps through `ptr` instead was 5-10 ns faster at 8 B and 20-30 ns faster from 16 B one-way (interleaved runs, one vCPU placement: 8 B 0.078 instead of 0.085 µs, 32-128 B 0.08 instead of 0.10-0.11 µs, the floor 0.055-0.06 µs): part of the gap to the floor at small sizes is this benchmark's reads, not the library's put_signal.",
        metric: Metric::Lat,
        xp: "put_signal_pp",
        npes: &[2],
        peers: &[col("Open MPI SHMEM (emulated)", "oshmem", "put_signal_pp")],
        refs: &[col("shm flag ping-pong", "shm-raw", "put_signal_pp")],
        plot: true,
    },
    Spec {
        id: "fetch_add_lat",
        title: "atomic fetch_add latency (u64)",
        what: "xpushmem `atomic_fetch_add`; Open MPI SHMEM `shmem_long_atomic_fetch_add`; MPI `MPI_Fetch_and_op(MPI_SUM)` + `MPI_Win_flush`.",
        metric: Metric::Lat,
        xp: "fetch_add_lat",
        npes: &[2],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "fetch_add_lat"),
            col("MPI shared win", "mpi-shared", "fetch_add_lat"),
            col("MPI Win_allocate", "mpi-alloc", "fetch_add_lat"),
        ],
        refs: &[],
        plot: false,
    },
    Spec {
        id: "cswap_lat",
        title: "atomic compare_swap latency (u64)",
        what: "xpushmem `atomic_compare_swap`; Open MPI SHMEM `shmem_long_atomic_compare_swap`; MPI `MPI_Compare_and_swap` + `MPI_Win_flush` on the shared window (on `MPI_Win_allocate`, Debian's Open MPI 4.1.4 osc rdma crashes the target in `MPI_Compare_and_swap`, so that column is not measured).",
        metric: Metric::Lat,
        xp: "cswap_lat",
        npes: &[2],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "cswap_lat"),
            col("MPI shared win", "mpi-shared", "cswap_lat"),
        ],
        refs: &[],
        plot: false,
    },
    Spec {
        id: "barrier_all",
        title: "barrier_all latency",
        what: "Back-to-back barriers, time per barrier of the slowest PE. xpushmem `barrier_all`; Open MPI SHMEM `shmem_barrier_all`; `MPI_Barrier`. PE counts above the machine's cores run oversubscribed.",
        metric: Metric::Lat,
        xp: "barrier_all",
        npes: &[2, 4],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "barrier_all"),
            col("MPI_Barrier", "mpi", "barrier_all"),
        ],
        refs: &[],
        plot: false,
    },
    Spec {
        id: "sync_all",
        title: "sync_all latency",
        what: "xpushmem `sync_all`; Open MPI SHMEM `shmem_sync_all` (a barrier that does not complete outstanding puts).",
        metric: Metric::Lat,
        xp: "sync_all",
        npes: &[2, 4],
        peers: &[col("Open MPI SHMEM", "oshmem", "sync_all")],
        refs: &[],
        plot: false,
    },
    Spec {
        id: "team_barrier",
        title: "team barrier latency (team of all PEs)",
        what: "xpushmem `team_barrier` on `team_world()`; Open MPI SHMEM 1.4 `shmem_barrier` over the active set of all PEs (no teams in 1.4); `MPI_Barrier` on a duplicate of `MPI_COMM_WORLD`.",
        metric: Metric::Lat,
        xp: "team_barrier",
        npes: &[2, 4],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "team_barrier"),
            col("MPI_Barrier (dup comm)", "mpi", "team_barrier"),
        ],
        refs: &[],
        plot: false,
    },
    Spec {
        id: "bcast",
        title: "broadcast latency (root PE 0)",
        what: "OSU style: each call timed alone, a barrier between calls, slowest PE. xpushmem `broadcast` on `team_world()`; Open MPI SHMEM `shmem_broadcast64`; `MPI_Bcast`. Size = bytes broadcast.",
        metric: Metric::Lat,
        xp: "bcast",
        npes: &[2, 4],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "bcast"),
            col("MPI_Bcast", "mpi", "bcast"),
        ],
        refs: &[],
        plot: true,
    },
    Spec {
        id: "alltoall",
        title: "all-to-all latency",
        what: "OSU style. xpushmem `alltoall` on `team_world()`; Open MPI SHMEM `shmem_alltoall64`; `MPI_Alltoall`. Size = bytes per destination PE.",
        metric: Metric::Lat,
        xp: "alltoall",
        npes: &[2, 4],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "alltoall"),
            col("MPI_Alltoall", "mpi", "alltoall"),
        ],
        refs: &[],
        plot: true,
    },
    Spec {
        id: "fcollect",
        title: "fcollect (allgather) latency",
        what: "OSU style. xpushmem `fcollect` on `team_world()`; Open MPI SHMEM `shmem_fcollect64`; `MPI_Allgather`. Size = bytes contributed per PE.",
        metric: Metric::Lat,
        xp: "fcollect",
        npes: &[2, 4],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "fcollect"),
            col("MPI_Allgather", "mpi", "fcollect"),
        ],
        refs: &[],
        plot: true,
    },
    Spec {
        id: "reduce_sum",
        title: "sum reduction (to all) latency, int64",
        what: "OSU style. xpushmem `reduce(ReduceOp::Sum)` on int64 over `team_world()`; Open MPI SHMEM `shmem_long_sum_to_all`; `MPI_Allreduce(MPI_SUM)` on `MPI_INT64_T`. Size = bytes per PE.",
        metric: Metric::Lat,
        xp: "reduce_sum",
        npes: &[2, 4],
        peers: &[
            col("Open MPI SHMEM", "oshmem", "reduce_sum"),
            col("MPI_Allreduce", "mpi", "reduce_sum"),
        ],
        refs: &[],
        plot: true,
    },
    Spec {
        id: "all_to_all_vdev",
        title: "all_to_all_vdev throughput (xpushmem-ops)",
        what: "xpushmem-ops `all_to_all_vdev` (PyTorch's NVSHMEM op: splits exchanged on the device, then the data); `MPI_Alltoallv` with the same (uniform) counts. Size = bytes per destination PE; GB/s = bytes sent per PE / time.",
        metric: Metric::Bw,
        xp: "all_to_all_vdev",
        npes: &[2, 4],
        peers: &[col("MPI_Alltoallv", "mpi", "alltoallv")],
        refs: &[],
        plot: true,
    },
    Spec {
        id: "all_to_all_vdev_2d",
        title: "all_to_all_vdev_2d throughput (xpushmem-ops)",
        what: "xpushmem-ops `all_to_all_vdev_2d` (MoE token dispatch layout); `MPI_Alltoallv` with the same bytes per destination as the closest MPI equivalent.",
        metric: Metric::Bw,
        xp: "all_to_all_vdev_2d",
        npes: &[2, 4],
        peers: &[col("MPI_Alltoallv", "mpi", "alltoallv")],
        refs: &[],
        plot: true,
    },
];

/// One aggregated cell: over several runs of the same cell (passes, rounds), the median of the runs' medians and
/// the best of their bests. (The best run's median was tried too: it rewards whichever implementation happened to
/// run while the hypervisor placed both vCPUs on one core, so it is not used.)
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    /// µs.
    pub med_us: f64,
    /// µs.
    pub min_us: f64,
    /// GB/s.
    pub med_gbps: f64,
    /// GB/s.
    pub best_gbps: f64,
}

impl Cell {
    /// The lead value for `m`.
    pub fn value(&self, m: Metric) -> f64 {
        match m {
            Metric::Lat => self.med_us,
            Metric::Bw => self.med_gbps,
        }
    }
}

type Key = (String, String, usize, usize);

/// The subdirectory of a results directory that holds interleaved rounds: one directory per round, whose CSVs are
/// the runs of that round (every implementation once, back to back, same options).
pub const ROUNDS_DIR: &str = "rounds";

/// Over the interleaved rounds that measured both sides of a comparison: the per-round ratios (each between two
/// runs made seconds apart, so in the same performance mode of the VM) and their median.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// Median of the per-round ratios.
    pub median: f64,
    /// Smallest per-round ratio.
    pub lo: f64,
    /// Largest per-round ratio.
    pub hi: f64,
    /// Number of rounds.
    pub rounds: usize,
}

/// All results of a run, aggregated per (impl, bench, npes, size).
#[derive(Debug, Default)]
pub struct Results {
    cells: BTreeMap<Key, Cell>,
    /// The interleaved rounds by name, each aggregated on its own.
    rounds: BTreeMap<String, BTreeMap<Key, Cell>>,
}

fn aggregate<'a>(records: impl IntoIterator<Item = &'a Record>) -> BTreeMap<Key, Cell> {
    let mut groups: BTreeMap<Key, Vec<&Record>> = BTreeMap::new();
    for r in records {
        groups
            .entry((r.imp.clone(), r.bench.clone(), r.npes, r.size))
            .or_default()
            .push(r);
    }
    groups
        .into_iter()
        .map(|(k, v)| {
            let f = |g: fn(&Record) -> f64| v.iter().map(|r| g(r)).collect::<Vec<f64>>();
            let c = Cell {
                med_us: stats::median(&f(|r| r.median_us)),
                min_us: stats::min(&f(|r| r.min_us)),
                med_gbps: stats::median(&f(|r| r.median_gbps)),
                best_gbps: f(|r| r.best_gbps).into_iter().fold(0.0, f64::max),
            };
            (k, c)
        })
        .collect()
}

impl Results {
    /// Aggregate records (no interleaved rounds).
    pub fn new(records: &[Record]) -> Results {
        Results::with_rounds(records, &[])
    }

    /// Aggregate `records` and the records of the interleaved `rounds` (name, records of that round): every cell
    /// over all of them (a round's run is also an ordinary run of its cell), and each round on its own for
    /// [`Results::paired`].
    pub fn with_rounds(records: &[Record], rounds: &[(String, Vec<Record>)]) -> Results {
        let all = records
            .iter()
            .chain(rounds.iter().flat_map(|(_, v)| v.iter()));
        Results {
            cells: aggregate(all),
            rounds: rounds
                .iter()
                .map(|(name, v)| (name.clone(), aggregate(v)))
                .collect(),
        }
    }

    /// Read every `*.csv` directly in `dir`, and every round of `dir/rounds/` (the `*.csv` of each subdirectory).
    pub fn load(dir: &Path) -> Result<Results> {
        let recs = csv::read_dir(dir)?;
        let mut rounds = Vec::new();
        let rdir = dir.join(ROUNDS_DIR);
        if rdir.is_dir() {
            let rd = std::fs::read_dir(&rdir).map_err(|e| PerfError::io(&rdir, e))?;
            let mut subs: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect();
            subs.sort();
            for d in subs {
                let v = csv::read_dir(&d)?;
                let name = d
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                rounds.push((name, v));
            }
        }
        Ok(Results::with_rounds(&recs, &rounds))
    }

    /// The ratio ([`ratio`]) of `ours` (impl, bench, npes) against `theirs` (impl, bench, npes; `None`: any PE
    /// count, for references) at `size`, paired round by round: for every interleaved round that measured both,
    /// the ratio of that round's two runs; `None` when no round measured both.
    pub fn paired(
        &self,
        m: Metric,
        ours: (&str, &str, usize),
        theirs: (&str, &str, Option<usize>),
        size: usize,
    ) -> Option<Paired> {
        let v: Vec<f64> = self
            .rounds
            .values()
            .filter_map(|cells| {
                let o = cells.get(&(ours.0.into(), ours.1.into(), ours.2, size))?;
                let t = match theirs.2 {
                    Some(n) => cells.get(&(theirs.0.into(), theirs.1.into(), n, size))?,
                    None => {
                        cells
                            .iter()
                            .find(|((i, b, _, s), _)| i == theirs.0 && b == theirs.1 && *s == size)?
                            .1
                    }
                };
                Some(ratio(m, o.value(m), t.value(m)))
            })
            .filter(|r| r.is_finite())
            .collect();
        if v.is_empty() {
            return None;
        }
        Some(Paired {
            median: stats::median(&v),
            lo: v.iter().copied().fold(f64::INFINITY, f64::min),
            hi: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            rounds: v.len(),
        })
    }

    /// A cell.
    pub fn get(&self, imp: &str, bench: &str, npes: usize, size: usize) -> Option<Cell> {
        self.cells
            .get(&(imp.to_string(), bench.to_string(), npes, size))
            .copied()
    }

    /// A reference cell: any PE count.
    fn get_ref(&self, imp: &str, bench: &str, size: usize) -> Option<Cell> {
        self.cells
            .iter()
            .find(|((i, b, _, s), _)| i == imp && b == bench && *s == size)
            .map(|(_, c)| *c)
    }

    /// The sizes measured for (imp, bench, npes), ascending.
    pub fn sizes(&self, imp: &str, bench: &str, npes: Option<usize>) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .cells
            .keys()
            .filter(|(i, b, n, _)| i == imp && b == bench && npes.is_none_or(|x| x == *n))
            .map(|k| k.3)
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The PE counts measured for (imp, bench), ascending.
    pub fn npes(&self, imp: &str, bench: &str) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .cells
            .keys()
            .filter(|(i, b, _, _)| i == imp && b == bench)
            .map(|k| k.2)
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Whether anything exists for (imp, bench).
    pub fn has(&self, imp: &str, bench: &str) -> bool {
        self.cells.keys().any(|(i, b, _, _)| i == imp && b == bench)
    }
}

/// "we are faster" ratio: peer time / our time for latency, our GB/s / peer GB/s for bandwidth.
pub fn ratio(m: Metric, ours: f64, theirs: f64) -> f64 {
    match m {
        Metric::Lat => theirs / ours,
        Metric::Bw => ours / theirs,
    }
}

fn num(x: f64) -> String {
    if !x.is_finite() {
        "—".into()
    } else if x == 0.0 {
        "0".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        let digits = ((-x.abs().log10()).floor() as usize + 3).min(6);
        format!("{x:.digits$}")
    }
}

fn opt(c: Option<Cell>, m: Metric) -> f64 {
    c.map_or(f64::NAN, |c| c.value(m))
}

fn ratio_cell(m: Metric, ours: f64, theirs: f64) -> String {
    let r = ratio(m, ours, theirs);
    if r.is_finite() {
        format!("{}x", num(r))
    } else {
        "—".into()
    }
}

/// The mark of a ratio paired round by round (see the note under such tables).
const PAIRED_MARK: &str = "†";

/// A table's ratio cell: the median of the per-round ratios (marked) when interleaved rounds measured both sides,
/// else the ratio of the two cells' medians.
fn ratio_or_paired(m: Metric, ours: f64, theirs: f64, p: Option<Paired>) -> String {
    match p {
        Some(p) => format!("{}x{PAIRED_MARK}", num(p.median)),
        None => ratio_cell(m, ours, theirs),
    }
}

fn size_label(s: usize) -> String {
    if s == 0 {
        "—".into()
    } else {
        human_size(s)
    }
}

/// The PE counts of a spec's table and charts: its one fixed count, or every count measured for xpushmem or a peer.
pub fn pe_counts(res: &Results, spec: &Spec) -> Vec<usize> {
    if spec.npes.len() <= 1 {
        return spec.npes.to_vec();
    }
    let mut v = res.npes("xpushmem", spec.xp);
    for p in spec.peers {
        v.extend(res.npes(p.imp, p.bench));
    }
    v.sort();
    v.dedup();
    v
}

fn rows_of(res: &Results, spec: &Spec) -> Vec<(usize, usize)> {
    let mut rows = Vec::new();
    for n in pe_counts(res, spec) {
        let mut sizes = res.sizes("xpushmem", spec.xp, Some(n));
        for p in spec.peers {
            sizes.extend(res.sizes(p.imp, p.bench, Some(n)));
        }
        sizes.sort();
        sizes.dedup();
        rows.extend(sizes.into_iter().map(|s| (n, s)));
    }
    rows
}

/// The markdown table of one spec (empty when there is no data at all).
pub fn table(res: &Results, spec: &Spec) -> String {
    let rows = rows_of(res, spec);
    if rows.is_empty() {
        return String::new();
    }
    let unit = match spec.metric {
        Metric::Lat => "µs",
        Metric::Bw => "GB/s",
    };
    let multi = spec.npes.len() > 1;
    let mut h = vec!["size".to_string()];
    if multi {
        h.push("PEs".into());
    }
    h.push(format!("xpushmem {unit}"));
    for p in spec.peers {
        h.push(format!("{} {unit}", p.label));
        h.push("ratio".into());
    }
    for r in spec.refs {
        h.push(format!("{} {unit}", r.label));
        h.push("vs ref".into());
    }
    let mut s = format!("| {} |\n|{}\n", h.join(" | "), "---|".repeat(h.len()));
    let mut paired_rounds: Vec<usize> = Vec::new();
    for (n, size) in rows {
        let m = spec.metric;
        let ours = opt(res.get("xpushmem", spec.xp, n, size), m);
        let mut c = vec![size_label(size)];
        if multi {
            c.push(n.to_string());
        }
        c.push(if ours.is_finite() {
            format!("**{}**", num(ours))
        } else {
            "—".into()
        });
        let mut pair = |theirs: (&str, &str, Option<usize>)| {
            let p = res.paired(m, ("xpushmem", spec.xp, n), theirs, size);
            paired_rounds.extend(p.map(|p| p.rounds));
            p
        };
        for p in spec.peers {
            let v = opt(res.get(p.imp, p.bench, n, size), m);
            c.push(num(v));
            let pr = pair((p.imp, p.bench, Some(n)));
            c.push(ratio_or_paired(m, ours, v, pr));
        }
        for r in spec.refs {
            let v = opt(res.get_ref(r.imp, r.bench, size), m);
            c.push(num(v));
            let pr = pair((r.imp, r.bench, None));
            c.push(ratio_or_paired(m, ours, v, pr));
        }
        let _ = writeln!(s, "| {} |", c.join(" | "));
    }
    if let (Some(lo), Some(hi)) = (paired_rounds.iter().min(), paired_rounds.iter().max()) {
        let n = if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}-{hi}")
        };
        let _ = write!(
            s,
            "\n{PAIRED_MARK} Paired: the median over the {n} interleaved rounds that ran both sides of the ratio \
             (every implementation once per round, back to back, same options) of each round's own ratio. The \
             values are medians over every run (full passes and rounds), so a {PAIRED_MARK} ratio need not equal \
             their quotient.\n"
        );
    }
    s
}

/// The chart of one spec at `npes`, or `None` without data.
pub fn chart(res: &Results, spec: &Spec, npes: usize) -> Option<Chart> {
    let m = spec.metric;
    if res.sizes("xpushmem", spec.xp, Some(npes)).is_empty() {
        return None;
    }
    let mut series = Vec::new();
    let mut add = |label: String, imp: &str, bench: &str, npes: Option<usize>, reference: bool| {
        let pts: Vec<(usize, f64)> = res
            .sizes(imp, bench, npes)
            .into_iter()
            .filter(|&s| s > 0)
            .filter_map(|s| {
                let c = match npes {
                    Some(n) => res.get(imp, bench, n, s),
                    None => res.get_ref(imp, bench, s),
                };
                c.map(|c| (s, c.value(m)))
            })
            .collect();
        if !pts.is_empty() {
            series.push(Series {
                label,
                points: pts,
                reference,
            });
        }
    };
    add("xpushmem".into(), "xpushmem", spec.xp, Some(npes), false);
    for p in spec.peers {
        add(p.label.into(), p.imp, p.bench, Some(npes), false);
    }
    for r in spec.refs {
        add(
            format!("{} (reference)", r.label),
            r.imp,
            r.bench,
            None,
            true,
        );
    }
    Some(Chart {
        title: format!("{} - {npes} PEs", spec.title),
        y_label: match m {
            Metric::Lat => "us per operation (lower is better)".into(),
            Metric::Bw => "GB/s (higher is better)".into(),
        },
        series,
    })
}

/// One target's verdict.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// What the target says.
    pub target: String,
    /// Worst measured ratio and where.
    pub measured: String,
    /// Met (Some(true)), missed (Some(false)), or not measurable (None).
    pub met: Option<bool>,
}

/// What xpushmem is compared with in a target.
#[derive(Debug, Clone, Copy)]
enum Other<'a> {
    /// A peer at the same PE count: (impl, bench).
    Peer(&'a str, &'a str),
    /// A reference at any PE count: (impl, bench).
    Ref(&'a str, &'a str),
}

/// The outcome of [`worst`].
#[derive(Debug, Clone, PartialEq)]
struct Worst {
    /// The worst ratio.
    ratio: f64,
    /// Its size.
    size: usize,
    /// The spread of its per-round ratios, when paired.
    spread: Option<(f64, f64)>,
    /// The sizes below the target.
    missed: Vec<usize>,
    /// Sizes compared round by round (median of per-round ratios).
    paired: usize,
    /// Sizes compared as the ratio of the cells' medians over separate runs.
    unpaired: usize,
    /// Most rounds behind a paired size.
    rounds: usize,
}

/// Worst ratio over sizes in `range` (inclusive) of xpushmem's `xp` vs `other`, with the sizes below `need`. A size
/// that interleaved rounds measured on both sides is judged by the median of its per-round ratios
/// ([`Results::paired`]), any other by the ratio of the cells' medians.
fn worst(
    res: &Results,
    m: Metric,
    xp: &str,
    other: Other<'_>,
    npes: usize,
    range: (usize, usize),
    need: f64,
) -> Option<Worst> {
    let (lo, hi) = range;
    let mut w: Option<Worst> = None;
    let mut missed = Vec::new();
    let (mut paired, mut unpaired, mut rounds) = (0, 0, 0);
    for s in res.sizes("xpushmem", xp, Some(npes)) {
        if s < lo || s > hi {
            continue;
        }
        let ours_key = ("xpushmem", xp, npes);
        let p = match other {
            Other::Ref(i, b) => res.paired(m, ours_key, (i, b, None), s),
            Other::Peer(i, b) => res.paired(m, ours_key, (i, b, Some(npes)), s),
        };
        let (r, spread) = match p {
            Some(p) => (p.median, Some((p.lo, p.hi))),
            None => {
                let ours = opt(res.get("xpushmem", xp, npes, s), m);
                let theirs = match other {
                    Other::Ref(i, b) => opt(res.get_ref(i, b, s), m),
                    Other::Peer(i, b) => opt(res.get(i, b, npes, s), m),
                };
                (ratio(m, ours, theirs), None)
            }
        };
        if !r.is_finite() {
            continue;
        }
        match p {
            Some(p) => {
                paired += 1;
                rounds = rounds.max(p.rounds);
            }
            None => unpaired += 1,
        }
        if r < need {
            missed.push(s);
        }
        if w.as_ref().is_none_or(|w| r < w.ratio) {
            w = Some(Worst {
                ratio: r,
                size: s,
                spread,
                missed: Vec::new(),
                paired: 0,
                unpaired: 0,
                rounds: 0,
            });
        }
    }
    w.map(|w| Worst {
        missed,
        paired,
        unpaired,
        rounds,
        ..w
    })
}

fn verdict(target: &str, w: Option<Worst>, what: &str) -> Verdict {
    match w {
        None => Verdict {
            target: target.into(),
            measured: format!("not measured ({what} missing)"),
            met: None,
        },
        Some(w) => {
            let missed = &w.missed;
            let mut measured = format!(
                "worst {}x{}{}{}",
                num(w.ratio),
                if w.size == 0 {
                    String::new()
                } else {
                    format!(" at {}", size_label(w.size))
                },
                match w.spread {
                    Some((lo, hi)) => format!(" (its rounds: {}x - {}x)", num(lo), num(hi)),
                    None => String::new(),
                },
                if missed.is_empty() || missed == &[0] {
                    String::new()
                } else {
                    format!(
                        "; below target at {}",
                        missed
                            .iter()
                            .map(|&s| size_label(s))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            );
            if w.paired > 0 {
                let _ = write!(
                    measured,
                    "; medians of the per-round ratios over {} interleaved rounds{}",
                    w.rounds,
                    if w.unpaired > 0 {
                        format!(
                            " ({} other sizes: medians of separate runs, not interleaved)",
                            w.unpaired
                        )
                    } else {
                        String::new()
                    }
                );
            }
            Verdict {
                target: target.into(),
                measured,
                met: Some(missed.is_empty()),
            }
        }
    }
}

/// The targets of issue 18 (and the barrier targets kept from issue 8), evaluated on `res`. PE counts a run did
/// not measure are left out (8 and 16 PEs need a machine with the cores for them).
pub fn targets(res: &Results) -> Vec<Verdict> {
    let l = Metric::Lat;
    let b = Metric::Bw;
    let mut v = Vec::new();
    let measured = |bench: &str| res.npes("xpushmem", bench);
    for op in ["all_to_all_vdev", "all_to_all_vdev_2d"] {
        for n in measured(op) {
            v.push(verdict(
                &format!("{op}, {n} PEs: >= 1.0x MPI_Alltoallv at every size"),
                worst(
                    res,
                    b,
                    op,
                    Other::Peer("mpi", "alltoallv"),
                    n,
                    (0, usize::MAX),
                    1.0,
                ),
                &format!("xpushmem-ops {op} or MPI_Alltoallv"),
            ));
            if n == 2 {
                v.push(verdict(
                    &format!("{op}, 2 PEs: >= 1.5x MPI_Alltoallv from 64 KiB"),
                    worst(
                        res,
                        b,
                        op,
                        Other::Peer("mpi", "alltoallv"),
                        n,
                        (65536, usize::MAX),
                        1.5,
                    ),
                    &format!("xpushmem-ops {op} or MPI_Alltoallv"),
                ));
            }
        }
    }
    let small: [(&str, &str, &str, &str); 4] = [
        ("bcast", "broadcast", "bcast", "MPI_Bcast"),
        ("alltoall", "alltoall", "alltoall", "MPI_Alltoall"),
        ("fcollect", "fcollect", "fcollect", "MPI_Allgather"),
        ("reduce_sum", "sum reduction", "reduce_sum", "MPI_Allreduce"),
    ];
    for (xp, name, mpi, mpi_name) in small {
        for n in measured(xp).into_iter().filter(|&n| n <= 4) {
            v.push(verdict(
                &format!("{name} 8 B - 1 KiB, {n} PEs: >= 1.0x Open MPI SHMEM"),
                worst(res, l, xp, Other::Peer("oshmem", xp), n, (8, 1024), 1.0),
                &format!("{xp} or Open MPI SHMEM"),
            ));
            v.push(verdict(
                &format!("{name} 8 B - 1 KiB, {n} PEs: >= 1.0x {mpi_name}"),
                worst(res, l, xp, Other::Peer("mpi", mpi), n, (8, 1024), 1.0),
                &format!("{xp} or {mpi_name}"),
            ));
        }
    }
    for n in measured("reduce_sum") {
        v.push(verdict(
            &format!("sum reduction from 4 KiB, {n} PEs: >= 1.0x MPI_Allreduce"),
            worst(
                res,
                l,
                "reduce_sum",
                Other::Peer("mpi", "reduce_sum"),
                n,
                (4096, usize::MAX),
                1.0,
            ),
            "reduce_sum or MPI_Allreduce",
        ));
    }
    v.push(verdict(
        "put_signal ping-pong 8 B - 1 KiB, 2 PEs: within 1.25x of the hand-written shm flag ping-pong (ratio >= 0.8)",
        worst(res, l, "put_signal_pp", Other::Ref("shm-raw", "put_signal_pp"), 2, (8, 1024), 0.8),
        "shm-raw",
    ));
    v.push(verdict(
        "put_signal ping-pong 8 B - 1 KiB, 2 PEs: >= 1.3x Open MPI SHMEM (emulated put-with-signal)",
        worst(res, l, "put_signal_pp", Other::Peer("oshmem", "put_signal_pp"), 2, (8, 1024), 1.3),
        "xpushmem or oshmem put_signal_pp",
    ));
    // Each against the memcpy that moves the same memory: put into one reused target, get into a window of
    // distinct chunks.
    for (bw, reference, what) in [
        ("put_bw", "memcpy", "memcpy"),
        (
            "get_bw",
            "memcpy_win",
            "memcpy into the same window of chunks",
        ),
    ] {
        let w = worst(
            res,
            b,
            bw,
            Other::Ref("memcpy", reference),
            2,
            (65536, 64 << 20),
            0.95,
        );
        let separate = w.as_ref().is_some_and(|w| w.paired == 0);
        let mut vd = verdict(
            &format!(
                "{} bandwidth 64 KiB - 64 MiB, 2 PEs: >= 0.95x {what}",
                &bw[..3]
            ),
            w,
            reference,
        );
        if separate {
            vd.measured.push_str(
                "; xpushmem and memcpy from separate runs, no interleaved rounds (they may have run in different \
                 performance modes of the VM)",
            );
        }
        v.push(vd);
    }
    for n in measured("barrier_all") {
        v.push(verdict(
            &format!("barrier_all, {n} PEs: faster than shmem_barrier_all (ratio > 1)"),
            worst(
                res,
                l,
                "barrier_all",
                Other::Peer("oshmem", "barrier_all"),
                n,
                (0, 0),
                1.0 + 1e-9,
            ),
            "barrier_all",
        ));
    }
    v
}

/// The diagnostic table: 4-PE xpushmem with and without the busy-poll phase of the runtime's waits.
/// The emulated-device section: xpushmem with device heaps on ze-emu next to the same benchmarks on host heaps.
fn device_section(res: &Results) -> String {
    let mut s = String::from(
        "## Device path on the emulated device (Level Zero over ze-emu) — not GPU performance\n\n",
    );
    if !res.has("xpushmem-ze-emu", "put_lat") {
        s.push_str("*Not measured in this run* (`scripts/bench.sh` runs it after the host benchmarks).\n\n");
        return s;
    }
    s.push_str("The same benchmarks with `XPUSHMEM_HEAP=device`: every PE's symmetric heap is Level Zero device memory, peers' heaps are opened through IPC descriptors, host-initiated puts and gets are copy-engine transfers, atomics and signals are one-work-item kernels of the device library. The driver is **ze-emu** (device memory = host memory, kernels JIT-compiled and run by Intel's OpenCL CPU runtime), loaded by the real Level Zero loader. These numbers show that the device path works end to end and what each operation costs through the Level Zero API on this emulation; **they say nothing about an Intel GPU** (see `docs/HARDWARE.md`). 2 PEs, medians, µs (put_bw in GB/s).\n\n");
    s.push_str("| benchmark | size | host heap | device heap (ze-emu) |\n|---|---|---|---|\n");
    for bench in [
        "put_lat",
        "get_lat",
        "put_bw",
        "put_signal_pp",
        "fetch_add_lat",
        "barrier_all",
    ] {
        let metric = if bench == "put_bw" {
            Metric::Bw
        } else {
            Metric::Lat
        };
        for size in res.sizes("xpushmem-ze-emu", bench, Some(2)) {
            let _ = writeln!(
                s,
                "| {bench} | {} | {} | {} |",
                size_label(size),
                num(opt(res.get("xpushmem", bench, 2, size), metric)),
                num(opt(res.get("xpushmem-ze-emu", bench, 2, size), metric)),
            );
        }
    }
    s.push('\n');
    s
}

fn spin_diagnostic(res: &Results) -> String {
    let mut s =
        String::from("## Diagnostic: the runtime's wait back-off with more PEs than cores\n\n");
    s.push_str("Not a target figure. The same 4-PE xpushmem run repeated with `XPUSHMEM_SPIN_COUNT=0` (waits yield at once instead of busy-polling first), next to the default and the peers (µs, medians). Since the runtime's `XPUSHMEM_SPIN_COUNT=auto` picks 0 by itself when PEs outnumber CPUs, the two xpushmem columns should agree; before that fix the default column was 20-50x slower (see the analysis).\n\n");
    s.push_str("| operation | size | xpushmem (default) | xpushmem, SPIN_COUNT=0 | Open MPI SHMEM | MPI |\n|---|---|---|---|---|---|\n");
    let rows: [(&str, &str, &str); 8] = [
        ("barrier_all", "barrier_all", "barrier_all"),
        ("sync_all", "sync_all", ""),
        ("team_barrier", "team_barrier", "team_barrier"),
        ("bcast", "bcast", "bcast"),
        ("alltoall", "alltoall", "alltoall"),
        ("fcollect", "fcollect", "fcollect"),
        ("reduce_sum", "reduce_sum", "reduce_sum"),
        ("all_to_all_vdev", "", "alltoallv"),
    ];
    for (xp, osh, mpi) in rows {
        for size in res.sizes("xpushmem-spin0", xp, Some(4)) {
            if ![0, 8, 512, 32 << 10].contains(&size) {
                continue;
            }
            let v = |imp: &str, b: &str| {
                if b.is_empty() {
                    "—".to_string()
                } else {
                    num(opt(res.get(imp, b, 4, size), Metric::Lat))
                }
            };
            let _ = writeln!(
                s,
                "| {xp} | {} | {} | {} | {} | {} |",
                size_label(size),
                v("xpushmem", xp),
                v("xpushmem-spin0", xp),
                v("oshmem", osh),
                v("mpi", mpi)
            );
        }
    }
    s.push('\n');
    s
}

/// The inputs of [`write`].
#[derive(Debug, Clone)]
pub struct ReportArgs {
    /// Directory with the CSV files (and `meta.txt`).
    pub results: PathBuf,
    /// The markdown file to write.
    pub md: PathBuf,
    /// Directory for the PNG charts.
    pub png_dir: PathBuf,
    /// Markdown appended as the analysis section (optional).
    pub analysis: Option<PathBuf>,
}

/// `to` as a link from the markdown file `from_md` (relative when below its folder).
pub fn rel_link(from_md: &Path, to: &Path) -> String {
    let base = from_md.parent().unwrap_or(Path::new("."));
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (b, t) = (abs(base), abs(to));
    match t.strip_prefix(&b) {
        Ok(r) => r.display().to_string(),
        Err(_) => t.display().to_string(),
    }
}

/// Write the page and its charts. The scaling section of the page as it was ([`crate::scale`], measured on
/// another machine) is carried over.
pub fn write(a: &ReportArgs) -> Result<()> {
    let res = Results::load(&a.results)?;
    let old = std::fs::read_to_string(&a.md).unwrap_or_default();
    std::fs::create_dir_all(&a.png_dir).map_err(|e| PerfError::io(&a.png_dir, e))?;
    let meta = std::fs::read_to_string(a.results.join("meta.txt")).unwrap_or_default();
    let mut s = String::new();
    s.push_str("# xpushmem performance\n\n");
    s.push_str("Generated by `scripts/bench.sh` (do not edit by hand: rerun the script). xpushmem and its peers ran one after another on the same machine, with the same sizes, iteration counts and PE counts; every benchmark of every implementation validated the data it moved.\n\n");
    s.push_str("## Machine and run\n\n");
    s.push_str("| item | value |\n|---|---|\n");
    let mut loads = Vec::new();
    for l in meta.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(rest) = l.strip_prefix("load ") {
            loads.push(rest.to_string());
        } else if let Some((k, v)) = l.split_once(':') {
            let _ = writeln!(s, "| {} | {} |", k.trim(), v.trim());
        }
    }
    s.push('\n');
    s.push_str("**Load caveat.** The development machine (2 vCPUs) is shared with other engineers' builds and tests. Before each program the script waits (a few seconds at most) until the machine is less than 10% busy and records what it saw (below; a high figure means the program probably ran next to someone's build). The whole sequence runs twice when time allows (two passes; per pass, the ping-pongs also in three interleaved rounds and the small-message barriers, collectives and all-to-alls in three (2 PEs) or two (more PEs) interleaved rounds, and the bandwidths from 64 KiB in interleaved rounds with the memcpy probe, every implementation once per round); each cell is the median over the 5 repeats of a run, and over several runs of a cell the median of those medians (the raw CSVs keep every run). Latencies of a few hundred nanoseconds move by 10-30% between quiet runs; treat ratios near a threshold accordingly.\n\n");
    if !loads.is_empty() {
        s.push_str(
            "<details><summary>Other tenants' CPU use measured before each program</summary>\n\n",
        );
        for l in &loads {
            let _ = writeln!(s, "- {l}");
        }
        s.push_str("\n</details>\n\n");
    }
    s.push_str("## How to read the tables\n\n");
    s.push_str("- Values are medians (over the repeats of a run, then over the runs; lower µs / higher GB/s is better); **bold** is xpushmem.\n");
    s.push_str("- **ratio** = how many times faster xpushmem is than that peer: peer time / xpushmem time for latencies, xpushmem GB/s / peer GB/s for bandwidths. **> 1 means xpushmem is faster.** *vs ref* is the same ratio against the physical reference (memcpy or the hand-written shared-memory ping-pong), which a library can approach but hardly beat.\n");
    s.push_str("- **Bandwidth against memcpy.** The VM's performance mode moves a copy's bandwidth by 10-30% within minutes, so a memcpy measured at another time than `put_bw`/`get_bw` can compare two modes. In each pass the memcpy probe, xpushmem's `put_bw`/`get_bw` (also with NT copies off) and Open MPI SHMEM's therefore run in interleaved rounds: each once per round, back to back, same options, the order reversed every other round (the rounds' runs also count as ordinary runs of their cells). A ratio marked † and the two bandwidth verdicts are **paired**: each round's own ratio (xpushmem's run against the other run of the same round), then the median over the rounds. Pairing compares runs made seconds apart, which share the mode; the median discards a round in which the mode changed between its runs. The verdict also gives the range of the worst size's per-round ratios. MPI's bandwidths are not in the rounds: their ratios divide medians of separate runs.\n");
    s.push_str("- Sizes sweep by powers of two; iterations per repeat are `min(10000, 128 MiB / bytes per operation)` (at least 2; collectives and ops at most 1000, like OSU), after a warm-up; windows are 64 operations (capped at 64 MiB).\n");
    s.push_str("- Processes are bound one per core when they fit (Open MPI's default; `xpushmem-perf --bind auto` and the C peers do the same); more PEs than cores run unbound and oversubscribed.\n");
    s.push_str("- GB = 1e9 bytes.\n\n");
    s.push_str("## Targets\n\n| target | measured | verdict |\n|---|---|---|\n");
    for v in targets(&res) {
        let verdict = match v.met {
            Some(true) => "**met**",
            Some(false) => "**missed**",
            None => "not measured",
        };
        let _ = writeln!(s, "| {} | {} | {} |", v.target, v.measured, verdict);
    }
    s.push('\n');
    if let Some(p) = &a.analysis {
        let text = std::fs::read_to_string(p).map_err(|e| PerfError::io(p, e))?;
        s.push_str(text.trim_end());
        s.push_str("\n\n");
    }
    let sections: [(&str, &[&str]); 4] = [
        (
            "Point to point (2 PEs)",
            &[
                "put_lat",
                "put_nbi_lat",
                "get_lat",
                "get_nbi_lat",
                "put_bw",
                "get_bw",
                "p_lat",
                "g_lat",
                "put_signal_pp",
                "fetch_add_lat",
                "cswap_lat",
            ],
        ),
        ("Barriers", &["barrier_all", "sync_all", "team_barrier"]),
        (
            "Collectives",
            &["bcast", "alltoall", "fcollect", "reduce_sum"],
        ),
        (
            "xpushmem-ops (PyTorch op family)",
            &["all_to_all_vdev", "all_to_all_vdev_2d"],
        ),
    ];
    for (title, ids) in sections {
        let _ = writeln!(s, "## {title}\n");
        for id in ids {
            let Some(spec) = SPECS.iter().find(|x| x.id == *id) else {
                continue;
            };
            let _ = writeln!(s, "### {}\n\n{}\n", spec.title, spec.what);
            if !res.has("xpushmem", spec.xp) {
                s.push_str("*xpushmem: not benchmarked in this run (the API had not landed when it was generated).*\n\n");
            }
            let t = table(&res, spec);
            if t.is_empty() {
                s.push_str("*No data.*\n\n");
                continue;
            }
            s.push_str(&t);
            s.push('\n');
            if spec.plot {
                for n in pe_counts(&res, spec) {
                    if let Some(c) = chart(&res, spec, n) {
                        let file = a.png_dir.join(format!("{}_{n}pe.png", spec.id));
                        c.write_png(&file)?;
                        let _ = writeln!(
                            s,
                            "![{} at {n} PEs]({})\n",
                            spec.title,
                            rel_link(&a.md, &file)
                        );
                    }
                }
            }
        }
    }
    if res.has("xpushmem-spin0", "barrier_all") {
        s.push_str(&spin_diagnostic(&res));
    }
    s.push_str(&device_section(&res));
    s.push_str("## Reproduce\n\n```\nscripts/bench.sh                  # everything: builds, peers, runs, this page, docs/perf/*.png\nBENCH_ARGS='-e 1M' scripts/bench.sh   # a quicker sweep\nBENCH_PES='2 4 8 16' scripts/bench.sh # more PE counts (one PE per core when they fit), on a machine with the cores\nBENCH_COPY_COMPARE=0 scripts/bench.sh # without the put/get run with XPUSHMEM_NT_COPY_SIZE=off\nBENCH_BW_ROUNDS=5 scripts/bench.sh    # more interleaved bandwidth rounds per pass (default 3)\nxpushmem-run -n 2 target-perf/release/xpushmem-perf put_bw -b 64K -e 16M --csv put.csv\n```\n");
    if let Some(sec) = crate::scale::carried(&old) {
        s.push('\n');
        s.push_str(sec);
    }
    std::fs::write(&a.md, s).map_err(|e| PerfError::io(&a.md, e))?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A latency record (also the scaling section's tests').
    pub(crate) fn rec(imp: &str, bench: &str, npes: usize, size: usize, us: f64) -> Record {
        Record {
            imp: imp.into(),
            bench: bench.into(),
            npes,
            size,
            iters: 10,
            reps: 5,
            median_us: us,
            min_us: us * 0.9,
            median_gbps: size as f64 / us / 1e3,
            best_gbps: size as f64 / us / 0.9e3,
        }
    }

    #[test]
    fn tables_ratios_targets() {
        let mut v = vec![];
        for s in [8usize, 1024] {
            v.push(rec("xpushmem", "put_signal_pp", 2, s, 0.25));
            v.push(rec("oshmem", "put_signal_pp", 2, s, 1.0));
            v.push(rec("shm-raw", "put_signal_pp", 2, s, 0.2));
        }
        v.push(rec("xpushmem", "put_signal_pp", 2, 8, 0.35)); // second run: median of 0.25 and 0.35
        v.push(rec("xpushmem", "barrier_all", 2, 0, 0.2));
        v.push(rec("oshmem", "barrier_all", 2, 0, 0.5));
        v.push(rec("xpushmem", "barrier_all", 4, 0, 9.0));
        v.push(rec("oshmem", "barrier_all", 4, 0, 5.0));
        let r = Results::new(&v);
        assert!((r.get("xpushmem", "put_signal_pp", 2, 8).unwrap().med_us - 0.30).abs() < 1e-9);
        let spec = SPECS.iter().find(|s| s.id == "put_signal_pp").unwrap();
        let t = table(&r, spec);
        assert!(
            t.contains("| 8 B | **0.300** | 1.00 | 3.33x | 0.200 | 0.667x |"),
            "{t}"
        );
        let tg = targets(&r);
        let find = |p: &str| tg.iter().find(|v| v.target.starts_with(p)).unwrap();
        // 0.2 / 0.3 = 0.667 at 8 B against the floor (needs 0.8); 1.0 / 0.3 = 3.3x Open MPI (needs 1.3).
        let floor = find("put_signal ping-pong 8 B - 1 KiB, 2 PEs: within");
        assert_eq!(floor.met, Some(false), "{floor:?}");
        assert!(floor.measured.contains("below target at 8 B"), "{floor:?}");
        assert_eq!(
            find("put_signal ping-pong 8 B - 1 KiB, 2 PEs: >=").met,
            Some(true)
        );
        assert_eq!(find("put bandwidth").met, None);
        // No a2a or collective data: no target rows for them.
        assert!(!tg.iter().any(|v| v.target.starts_with("all_to_all_vdev")));
        let b2 = tg
            .iter()
            .find(|v| v.target.starts_with("barrier_all, 2"))
            .unwrap();
        let b4 = tg
            .iter()
            .find(|v| v.target.starts_with("barrier_all, 4"))
            .unwrap();
        assert_eq!((b2.met, b4.met), (Some(true), Some(false)));
        assert!(chart(&r, spec, 2).is_some());
        assert!(chart(&r, spec, 4).is_none());
        assert_eq!(ratio(Metric::Bw, 10.0, 5.0), 2.0);
        assert_eq!(num(0.01234), "0.0123");
        assert_eq!(num(123.4), "123");
    }

    /// A bandwidth record of `gbps` GB/s.
    fn bw(imp: &str, bench: &str, size: usize, gbps: f64) -> Record {
        rec(
            imp,
            bench,
            if imp == "memcpy" { 1 } else { 2 },
            size,
            size as f64 / gbps / 1e3,
        )
    }

    /// One interleaved round: xpushmem's put_bw and memcpy at 64 KiB and 4 MiB.
    fn round(name: &str, xp: [f64; 2], mc: [f64; 2]) -> (String, Vec<Record>) {
        let mut v = Vec::new();
        for (k, size) in [65536, 4 << 20].into_iter().enumerate() {
            v.push(bw("xpushmem", "put_bw", size, xp[k]));
            v.push(bw("memcpy", "memcpy", size, mc[k]));
        }
        (name.to_string(), v)
    }

    #[test]
    fn bandwidth_verdict_pairs_rounds() {
        // Three rounds in different performance modes of the VM; within each, xpushmem within 3-5% of memcpy at
        // 4 MiB. Separately, one full sweep of each, taken in different modes (memcpy fast, xpushmem slow).
        let rounds = vec![
            round("bw-p1-r1", [40.0, 40.0], [41.0, 41.0]),
            round("bw-p1-r2", [30.0, 30.0], [31.0, 31.0]),
            round("bw-p2-r1", [42.0, 42.0], [40.0, 40.0]),
        ];
        let sweep = vec![
            bw("xpushmem", "put_bw", 4 << 20, 30.0),
            bw("memcpy", "memcpy", 4 << 20, 45.0),
        ];
        let r = Results::with_rounds(&sweep, &rounds);
        // The cells are medians over every run: xpushmem {40, 30, 42, 30} -> 35, memcpy {41, 31, 40, 45} -> 40.5,
        // whose quotient (0.864) would miss the target.
        let x = r.get("xpushmem", "put_bw", 2, 4 << 20).unwrap().med_gbps;
        let m = r.get_ref("memcpy", "memcpy", 4 << 20).unwrap().med_gbps;
        assert!(
            (x - 35.0).abs() < 1e-6 && (m - 40.5).abs() < 1e-6,
            "{x} {m}"
        );
        // Paired: 40/41 = 0.976, 30/31 = 0.968, 42/40 = 1.05 -> median 0.976.
        let p = r
            .paired(
                Metric::Bw,
                ("xpushmem", "put_bw", 2),
                ("memcpy", "memcpy", None),
                4 << 20,
            )
            .unwrap();
        assert_eq!(p.rounds, 3);
        assert!((p.median - 40.0 / 41.0).abs() < 1e-9, "{p:?}");
        assert!(
            (p.lo - 30.0 / 31.0).abs() < 1e-9 && (p.hi - 1.05).abs() < 1e-9,
            "{p:?}"
        );
        assert!(r
            .paired(
                Metric::Bw,
                ("xpushmem", "put_bw", 2),
                ("memcpy", "memcpy", None),
                8
            )
            .is_none());
        let tg = targets(&r);
        let put = tg
            .iter()
            .find(|v| v.target.starts_with("put bandwidth"))
            .unwrap();
        assert_eq!(put.met, Some(true), "{put:?}");
        assert_eq!(
            put.measured,
            "worst 0.976x at 64 KiB (its rounds: 0.968x - 1.05x); medians of the per-round ratios over 3 \
             interleaved rounds"
        );
        // Rounds where xpushmem fell behind the memcpy of its own round at 64 KiB make it miss once they are half.
        let mut rounds2 = rounds.clone();
        for k in 2..=4 {
            rounds2.push(round(&format!("bw-p2-r{k}"), [30.0, 40.0], [40.0, 41.0]));
        }
        let r2 = Results::with_rounds(&[], &rounds2);
        let put2 = targets(&r2)
            .into_iter()
            .find(|v| v.target.starts_with("put bandwidth"))
            .unwrap();
        assert_eq!(put2.met, Some(false), "{put2:?}");
        assert!(
            put2.measured.starts_with(
                "worst 0.859x at 64 KiB (its rounds: 0.750x - 1.05x); below target at 64 KiB; medians of the per-round ratios over 6"
            ),
            "{put2:?}"
        );
        // The table marks the paired ratio and explains it.
        let spec = SPECS.iter().find(|s| s.id == "put_bw").unwrap();
        let t = table(&r, spec);
        assert!(t.contains("| 4 MiB | **35.0** |"), "{t}");
        assert!(t.contains("| 40.5 | 0.976x† |"), "{t}");
        assert!(t.contains("over the 3 interleaved rounds"), "{t}");
        // Without rounds the verdict divides the cells' medians and says so.
        let r3 = Results::new(&sweep);
        let put3 = targets(&r3)
            .into_iter()
            .find(|v| v.target.starts_with("put bandwidth"))
            .unwrap();
        assert_eq!(put3.met, Some(false), "{put3:?}");
        assert!(put3.measured.contains("separate runs"), "{put3:?}");
        assert!(!table(&r3, spec).contains('†'));
    }

    /// The page's analysis is `benches/report/analysis.md`, which `scripts/bench.sh` writes into it between the
    /// targets and the point-to-point tables: a round written into the page alone would be lost at the next run.
    #[test]
    fn the_page_carries_the_analysis_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the benches crate lies in the repository");
        let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
        let page = read("docs/PERFORMANCE.md");
        let analysis = read("benches/report/analysis.md");
        let text = analysis.trim_end();
        assert!(
            text.starts_with("## Analysis")
                && page.contains(&format!("{text}\n\n## Point to point (2 PEs)")),
            "docs/PERFORMANCE.md's analysis differs from benches/report/analysis.md: write the analysis there (or \
             copy the page's analysis back into it)"
        );
    }

    #[test]
    fn load_reads_rounds() {
        let dir = std::env::temp_dir().join(format!("xpushmem-perf-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let write = |p: &Path, recs: &[Record]| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let mut s = format!("{}\n", csv::HEADER);
            for r in recs {
                s.push_str(&r.line());
                s.push('\n');
            }
            std::fs::write(p, s).unwrap();
        };
        write(
            &dir.join("memcpy-p1.csv"),
            &[bw("memcpy", "memcpy", 65536, 50.0)],
        );
        for (k, (x, m)) in [(40.0, 41.0), (30.0, 31.0)].into_iter().enumerate() {
            let d = dir.join(ROUNDS_DIR).join(format!("bw-p1-r{}", k + 1));
            write(
                &d.join("xpushmem.csv"),
                &[bw("xpushmem", "put_bw", 65536, x)],
            );
            write(&d.join("memcpy.csv"), &[bw("memcpy", "memcpy", 65536, m)]);
        }
        // Another subdirectory (the fabric section's) is not read.
        write(
            &dir.join("fabric").join("x.csv"),
            &[bw("memcpy", "memcpy", 65536, 1.0)],
        );
        let r = Results::load(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        // memcpy: median of {50, 41, 31}.
        assert!((r.get("memcpy", "memcpy", 1, 65536).unwrap().med_gbps - 41.0).abs() < 1e-3);
        let p = r
            .paired(
                Metric::Bw,
                ("xpushmem", "put_bw", 2),
                ("memcpy", "memcpy", None),
                65536,
            )
            .unwrap();
        assert_eq!(p.rounds, 2);
        assert!(
            (p.median - (40.0 / 41.0 + 30.0 / 31.0) / 2.0).abs() < 1e-4,
            "{p:?}"
        );
    }
}
