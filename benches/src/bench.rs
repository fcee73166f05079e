//! Benchmark definitions, the registry and the runner.
//!
//! A benchmark is a [`Bench`]: a name, a group, which sizes it sweeps, how its time is taken, how many bytes one
//! operation moves, and a `run` function that performs `iters` timed operations, validates the data, and returns
//! the seconds per operation seen on this PE. The runner does the rest (sizes, iteration plan, warm-up, repeats,
//! gathering, median/min, table, CSV). Adding a benchmark is one entry in a group's list plus its `run` function.

use crate::csv::{Record, Writer};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::opts::Opts;
use crate::stats::{self, human_size, Plan};
use xpushmem::Shmem;

/// One step of a benchmark: `iters` operations of `size` bytes, in windows of `window`.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Message size in bytes.
    pub size: usize,
    /// Operations to run (a multiple of `window`).
    pub iters: usize,
    /// Operations per window (bandwidth benchmarks).
    pub window: usize,
}

/// Which sizes a benchmark runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizes {
    /// The `-b/-e/-f` sweep.
    Sweep,
    /// One fixed size (an element, or 0 for barriers).
    Fixed(usize),
    /// A fixed list of cases (the EP benchmarks: one rank's token bytes), those within `-b`..`-e`.
    Cases(&'static [usize]),
}

/// Whose clock counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// PE 0's (point-to-point benchmarks initiated by PE 0).
    Pe0,
    /// The slowest PE's, per repeat (collectives and barriers).
    MaxOverPes,
}

/// The run function of a benchmark: perform `step.iters` timed operations, validate, and return seconds per
/// operation as seen on this PE. Called collectively on every PE.
pub type RunFn = fn(&mut Ctx<'_>, &Step) -> Result<f64>;

/// A benchmark.
#[derive(Debug, Clone, Copy)]
pub struct Bench {
    /// Name (shared with the C peers' output for the same operation).
    pub name: &'static str,
    /// Group: `rma`, `sync`, `coll` or `ops`.
    pub group: &'static str,
    /// One line: what one operation is.
    pub about: &'static str,
    /// Sizes it runs at.
    pub sizes: Sizes,
    /// Whether it runs in windows of non-blocking operations (`-W`).
    pub windowed: bool,
    /// Whose time counts.
    pub timing: Timing,
    /// Fewest PEs it needs.
    pub min_pes: usize,
    /// Bytes one operation moves for (size, n_pes): the iteration budget and the GB/s column use it.
    pub bytes: fn(usize, usize) -> usize,
    /// The run function.
    pub run: RunFn,
}

/// `bytes` for operations that move `size` bytes.
pub fn bytes_size(size: usize, _n: usize) -> usize {
    size
}

/// `bytes` for operations that move `size` bytes per PE (all-to-all, collect).
pub fn bytes_size_times_n(size: usize, n: usize) -> usize {
    size * n
}

/// The sizes `b` runs at under `opts`.
pub fn sizes_of(b: &Bench, opts: &Opts) -> Vec<usize> {
    match b.sizes {
        Sizes::Sweep => stats::sweep(opts.begin, opts.end, opts.factor),
        Sizes::Fixed(s) => vec![s],
        Sizes::Cases(c) => c
            .iter()
            .copied()
            .filter(|s| (opts.begin..=opts.end).contains(s))
            .collect(),
    }
}

/// The iteration plan of `b` at `size` with `n` PEs (collectives, ops and EP steps: at most `--coll-iters`
/// operations).
pub fn plan_of(b: &Bench, opts: &Opts, size: usize, n: usize) -> Plan {
    let max_iters = if matches!(b.group, "coll" | "ops" | "ep") {
        opts.iters.min(opts.coll_iters)
    } else {
        opts.iters
    };
    stats::plan(
        (b.bytes)(size, n),
        size,
        max_iters,
        opts.warmup,
        opts.budget,
        opts.window,
        b.windowed,
    )
}

fn header(b: &Bench, n: usize) -> String {
    format!(
        "# {} ({} PEs): {}\n# {:>10} {:>9} {:>12} {:>12} {:>12} {:>12}",
        b.name, n, b.about, "size", "iters", "median us", "min us", "median GB/s", "best GB/s"
    )
}

fn row(r: &Record) -> String {
    format!(
        "  {:>10} {:>9} {:>12.3} {:>12.3} {:>12.3} {:>12.3}",
        human_size(r.size),
        r.iters,
        r.median_us,
        r.min_us,
        r.median_gbps,
        r.best_gbps
    )
}

/// Run `benches` on every PE; PE 0 prints the tables, writes `opts.csv`, and gets the records.
pub fn run(sh: &Shmem, opts: &Opts, benches: &[Bench]) -> Result<Vec<Record>> {
    // The EP benchmarks keep their own buffers: a run of only those needs no sweep-sized ones.
    let ab_end = if benches.iter().all(|b| matches!(b.sizes, Sizes::Cases(_))) {
        8
    } else {
        opts.end
    };
    let mut ctx = Ctx::new(sh, opts, ab_end)?;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let mut csv = match (&opts.csv, me) {
        (Some(p), 0) => Some(Writer::create(p)?),
        _ => None,
    };
    let mut out = Vec::new();
    for b in benches {
        if n < b.min_pes {
            if me == 0 && !opts.quiet {
                println!("# {}: skipped (needs {} PEs, have {n})", b.name, b.min_pes);
            }
            continue;
        }
        if me == 0 && !opts.quiet {
            println!("{}", header(b, n));
        }
        for size in sizes_of(b, opts) {
            let p = plan_of(b, opts, size, n);
            ctx.bench = b.name;
            ctx.size = size;
            sh.barrier_all()?;
            if p.warmup > 0 {
                let iters = p.warmup.div_ceil(p.window) * p.window;
                (b.run)(
                    &mut ctx,
                    &Step {
                        size,
                        iters,
                        window: p.window,
                    },
                )?;
            }
            let step = Step {
                size,
                iters: p.iters,
                window: p.window,
            };
            let mut mine = Vec::with_capacity(opts.reps);
            for _ in 0..opts.reps {
                sh.barrier_all()?;
                mine.push((b.run)(&mut ctx, &step)?);
            }
            let per_rep = ctx.gather(&mine, b.timing == Timing::MaxOverPes)?;
            if me == 0 {
                let (med, min) = (stats::median(&per_rep), stats::min(&per_rep));
                let bytes = (b.bytes)(size, n) as f64;
                let r = Record {
                    imp: opts.label.clone(),
                    bench: b.name.into(),
                    npes: n,
                    size,
                    iters: p.iters,
                    reps: opts.reps,
                    median_us: med * 1e6,
                    min_us: min * 1e6,
                    median_gbps: bytes / med / 1e9,
                    best_gbps: bytes / min / 1e9,
                };
                if !opts.quiet {
                    println!("{}", row(&r));
                }
                if let Some(w) = csv.as_mut() {
                    w.write(&r)?;
                }
                out.push(r);
            }
        }
    }
    Ok(out)
}
