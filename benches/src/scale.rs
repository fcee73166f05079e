//! The scaling section of the performance page (issue 31, item 1): xpushmem's collectives and ops against MPI at
//! 2, 4, 8 and 16 PEs, measured on a machine with a core per PE (`scripts/bench-scale.sh`), with a verdict per cell
//! against the scaling targets and a chart of the ratios per benchmark.
//!
//! `xpushmem-perf scale-report --results DIR --md FILE [--png-dir DIR]`: reads every `*.csv` of DIR (the rounds'
//! runs; a cell is the median over them, each run's figure being the median of its repeats) and `meta.txt` (one
//! `key: value` line per fact about the run) and puts the section into FILE between [`BEGIN`] and [`END`]
//! (replacing an earlier one, or appended). `xpushmem-perf report` carries the section over when it rewrites the
//! rest of the page ([`carried`]), since the 2-core run of `scripts/bench.sh` cannot measure it.

use crate::error::{PerfError, Result};
use crate::fabric::splice_between;
use crate::plot::{Chart, Series};
use crate::report::{Metric, Results};
use crate::stats::human_size;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// First line of the section.
pub const BEGIN: &str = "<!-- scaling section: written by xpushmem-perf scale-report -->";
/// Last line of the section.
pub const END: &str = "<!-- end of the scaling section -->";

/// How the section is made, its last paragraph.
const REPRODUCE: &str = "Reproduce: `scripts/bench-scale.sh stage` here (release build, stripped binaries and the runner into the git-ignored `.scale/`), then `OUT=DIR bash .scale/run.sh` on the machine with the cores (Open MPI with `mpicc`, no Rust needed), then `scripts/bench-scale.sh report DIR` here (copies the CSVs into `benches/results/scale/`, writes this section and `docs/perf/scale_*.png`); `scripts/bench-scale.sh report` alone regenerates it from the committed CSVs.\n\n";

/// The PE counts of the section.
pub const PES: [usize; 4] = [2, 4, 8, 16];
/// Largest size of the section.
pub const MAX_SIZE: usize = 16 << 20;
/// Largest size the ≥ 1.0x target covers.
pub const TARGET_MAX: usize = 256 << 10;
/// Smallest size of the all-to-all_vdev target.
pub const VDEV_FROM: usize = 4 << 10;
/// The all_to_all_vdev(_2d) target from [`VDEV_FROM`].
pub const VDEV_TARGET: f64 = 1.5;

/// One benchmark of the section: xpushmem's and MPI's counterpart (as issue 31's table pairs them).
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// xpushmem-perf's benchmark (CSV impl `xpushmem`); also the chart's file stem.
    pub xp: &'static str,
    /// mpi_bench's benchmark (CSV impl `mpi`).
    pub mpi: &'static str,
    /// Heading.
    pub title: &'static str,
    /// Whether the all_to_all_vdev target applies from [`VDEV_FROM`].
    pub vdev: bool,
}

const fn row(xp: &'static str, mpi: &'static str, title: &'static str, vdev: bool) -> Row {
    Row {
        xp,
        mpi,
        title,
        vdev,
    }
}

/// Every benchmark of the section, in order.
pub const ROWS: &[Row] = &[
    row(
        "barrier_all",
        "barrier_all",
        "barrier_all vs MPI_Barrier",
        false,
    ),
    row(
        "team_barrier",
        "team_barrier",
        "team_barrier (team of all PEs) vs MPI_Barrier on a duplicate communicator",
        false,
    ),
    row(
        "bcast",
        "bcast",
        "broadcast (root PE 0) vs MPI_Bcast",
        false,
    ),
    row("alltoall", "alltoall", "alltoall vs MPI_Alltoall", false),
    row("fcollect", "fcollect", "fcollect vs MPI_Allgather", false),
    row(
        "reduce_sum",
        "reduce_sum",
        "sum reduction, int64 vs MPI_Allreduce(MPI_SUM)",
        false,
    ),
    row(
        "all_to_all_vdev",
        "alltoallv",
        "all_to_all_vdev vs MPI_Alltoallv",
        true,
    ),
    row(
        "all_to_all_vdev_2d",
        "alltoallv",
        "all_to_all_vdev_2d vs MPI_Alltoallv",
        true,
    ),
];

/// The ratio a cell of `r` at `size` must reach, or `None` where no target applies (sizes above 256 KiB, except
/// the all-to-all_vdev ops).
pub fn target(r: &Row, size: usize) -> Option<f64> {
    if r.vdev && size >= VDEV_FROM {
        Some(VDEV_TARGET)
    } else if size <= TARGET_MAX {
        Some(1.0)
    } else {
        None
    }
}

/// One cell: xpushmem's and MPI's median times (µs) and the ratio MPI time / xpushmem time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// xpushmem, µs.
    pub xp_us: f64,
    /// MPI, µs.
    pub mpi_us: f64,
    /// `mpi_us / xp_us` (> 1: xpushmem faster).
    pub ratio: f64,
    /// The target, if one applies.
    pub target: Option<f64>,
}

impl Cell {
    /// `Some(true)` met, `Some(false)` missed, `None` no target.
    pub fn met(&self) -> Option<bool> {
        self.target.map(|t| self.ratio >= t)
    }
}

/// The cell of `r` at `npes` PEs and `size`, when both sides measured it.
pub fn cell(res: &Results, r: &Row, npes: usize, size: usize) -> Option<Cell> {
    let x = res.get("xpushmem", r.xp, npes, size)?;
    let m = res.get("mpi", r.mpi, npes, size)?;
    let ratio = m.med_us / x.med_us;
    ratio.is_finite().then_some(Cell {
        xp_us: x.med_us,
        mpi_us: m.med_us,
        ratio,
        target: target(r, size),
    })
}

/// The sizes of `r` either side measured at any PE count, up to [`MAX_SIZE`], ascending.
pub fn sizes(res: &Results, r: &Row) -> Vec<usize> {
    let mut v = res.sizes("xpushmem", r.xp, None);
    v.extend(res.sizes("mpi", r.mpi, None));
    v.retain(|&s| s <= MAX_SIZE);
    v.sort_unstable();
    v.dedup();
    v
}

fn size_label(s: usize) -> String {
    if s == 0 {
        "-".into()
    } else {
        human_size(s)
    }
}

fn ratio_text(c: &Cell) -> String {
    match c.met() {
        Some(false) => format!("**{:.2}x**", c.ratio),
        _ => format!("{:.2}x", c.ratio),
    }
}

fn us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A missed cell, for the list under the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Missed {
    /// The row's xpushmem benchmark.
    pub bench: &'static str,
    /// PEs.
    pub npes: usize,
    /// Bytes.
    pub size: usize,
    /// The cell.
    pub cell: Cell,
}

/// A missed cell's ratios paired round by round (each round's MPI run against its xpushmem run):
/// `"median 1.02 (0.90-1.27, 7 rounds)"`, or `"-"` when the runs carry no round.
fn by_round(res: &Results, m: &Missed) -> String {
    let Some(r) = ROWS.iter().find(|r| r.xp == m.bench) else {
        return "-".into();
    };
    match res.paired(
        Metric::Lat,
        ("xpushmem", r.xp, m.npes),
        ("mpi", r.mpi, Some(m.npes)),
        m.size,
    ) {
        Some(p) => format!(
            "median {:.2} ({:.2}-{:.2}, {} rounds)",
            p.median, p.lo, p.hi, p.rounds
        ),
        None => "-".into(),
    }
}

/// The runs of `dir` (every `*.csv`), each a round's when its name ends in `-rN` (`xp-4-r3.csv`, `mpi-4-large-r3.csv`:
/// round `r3`): every run counts in its cell, and each round also on its own, for the cells' pairing by round.
pub fn load(dir: &Path) -> Result<Results> {
    let mut plain = Vec::new();
    let mut rounds: std::collections::BTreeMap<String, Vec<crate::csv::Record>> =
        Default::default();
    for f in crate::csv::csv_files(dir)? {
        let recs = crate::csv::read_file(&f)?;
        let stem = f
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        match round_of(&stem) {
            Some(r) => rounds.entry(r.to_string()).or_default().extend(recs),
            None => plain.extend(recs),
        }
    }
    let rounds: Vec<(String, Vec<crate::csv::Record>)> = rounds.into_iter().collect();
    Ok(Results::with_rounds(&plain, &rounds))
}

/// The round a run's file stem names (`xp-4-large-r3` -> `r3`), if any.
fn round_of(stem: &str) -> Option<&str> {
    let (_, r) = stem.rsplit_once('-')?;
    (r.len() > 1 && r.starts_with('r') && r[1..].bytes().all(|b| b.is_ascii_digit())).then_some(r)
}

/// Every cell with a target that the ratio misses, in row, PE count and size order.
pub fn missed(res: &Results) -> Vec<Missed> {
    let mut v = Vec::new();
    for r in ROWS {
        for n in PES {
            for s in sizes(res, r) {
                if let Some(c) = cell(res, r, n, s).filter(|c| c.met() == Some(false)) {
                    v.push(Missed {
                        bench: r.xp,
                        npes: n,
                        size: s,
                        cell: c,
                    });
                }
            }
        }
    }
    v
}

/// The range of ratios of `r` at `npes` over the sizes `keep` selects, with whether every cell with a target there
/// met it: `"0.83-1.20x"`, bold when one missed; `"-"` when none measured.
fn range(res: &Results, r: &Row, npes: usize, keep: impl Fn(usize) -> bool) -> String {
    let cells: Vec<Cell> = sizes(res, r)
        .into_iter()
        .filter(|&s| keep(s))
        .filter_map(|s| cell(res, r, npes, s))
        .collect();
    if cells.is_empty() {
        return "-".into();
    }
    let lo = cells.iter().map(|c| c.ratio).fold(f64::INFINITY, f64::min);
    let hi = cells
        .iter()
        .map(|c| c.ratio)
        .fold(f64::NEG_INFINITY, f64::max);
    let t = if (hi - lo).abs() < 0.005 {
        format!("{lo:.2}x")
    } else {
        format!("{lo:.2}-{hi:.2}x")
    };
    if cells.iter().any(|c| c.met() == Some(false)) {
        format!("**{t}**")
    } else {
        t
    }
}

/// The summary table: one line per benchmark and band of sizes with one target, one column per PE count.
pub fn summary(res: &Results) -> String {
    let mut s = String::from("| benchmark | sizes | target |");
    for n in PES {
        let _ = write!(s, " {n} PEs |");
    }
    s.push_str("\n|---|---|---|");
    for _ in PES {
        s.push_str("---|");
    }
    s.push('\n');
    for r in ROWS {
        // The bands: runs of consecutive sizes with the same target.
        let mut bands: Vec<(Option<f64>, usize, usize)> = Vec::new();
        for sz in sizes(res, r) {
            match bands.last_mut() {
                Some(b) if b.0 == target(r, sz) => b.2 = sz,
                _ => bands.push((target(r, sz), sz, sz)),
            }
        }
        for (tg, lo, hi) in bands {
            let keep = |x: usize| (lo..=hi).contains(&x);
            let label = if lo == hi {
                size_label(lo)
            } else {
                format!("{}-{}", size_label(lo), size_label(hi))
            };
            let t = tg.map_or_else(|| "none".into(), |t| format!("≥ {t:.1}x"));
            let _ = write!(s, "| {} | {label} | {t} |", r.xp);
            for n in PES {
                let _ = write!(s, " {} |", range(res, r, n, keep));
            }
            s.push('\n');
        }
    }
    s
}

/// The table of one benchmark: a line per size, per PE count the ratio (bold: missed), then the medians.
pub fn table(res: &Results, r: &Row) -> String {
    let mut s = String::from("| size | target |");
    for n in PES {
        let _ = write!(s, " {n} PEs |");
    }
    for n in PES {
        let _ = write!(s, " {n} PEs: xpushmem / MPI µs |");
    }
    s.push_str("\n|---|---|");
    for _ in 0..2 * PES.len() {
        s.push_str("---|");
    }
    s.push('\n');
    for size in sizes(res, r) {
        let t = target(r, size).map_or_else(|| "none".into(), |t| format!("≥ {t:.1}x"));
        let _ = write!(s, "| {} | {t} |", size_label(size));
        let cells: Vec<Option<Cell>> = PES.iter().map(|&n| cell(res, r, n, size)).collect();
        for c in &cells {
            let _ = write!(
                s,
                " {} |",
                c.as_ref().map_or_else(|| "-".into(), ratio_text)
            );
        }
        for c in &cells {
            let _ = write!(
                s,
                " {} |",
                c.as_ref().map_or_else(
                    || "-".into(),
                    |c| format!("{} / {}", us(c.xp_us), us(c.mpi_us))
                )
            );
        }
        s.push('\n');
    }
    s
}

/// The chart of one benchmark: the ratio against size, a line per PE count, the 1.0x (and 1.5x) lines dashed;
/// `None` for a benchmark without sizes (the barriers).
pub fn chart(res: &Results, r: &Row) -> Option<Chart> {
    let sz: Vec<usize> = sizes(res, r).into_iter().filter(|&s| s > 0).collect();
    if sz.is_empty() {
        return None;
    }
    let mut series: Vec<Series> = PES
        .iter()
        .map(|&n| Series {
            label: format!("{n} PEs"),
            points: sz
                .iter()
                .filter_map(|&s| cell(res, r, n, s).map(|c| (s, c.ratio)))
                .collect(),
            reference: false,
        })
        .collect();
    series.push(Series {
        label: "1.0x (as fast as MPI)".into(),
        points: sz.iter().map(|&s| (s, 1.0)).collect(),
        reference: true,
    });
    if r.vdev {
        series.push(Series {
            label: "1.5x (target from 4 KiB)".into(),
            points: sz
                .iter()
                .filter(|&&s| s >= VDEV_FROM)
                .map(|&s| (s, VDEV_TARGET))
                .collect(),
            reference: true,
        });
    }
    Some(Chart {
        title: format!("{}: MPI time / xpushmem time", r.xp),
        y_label: "ratio (above 1: xpushmem faster)".into(),
        series,
    })
}

/// The section, from `BEGIN` to `END`; charts go to `png` (linked from `md`) when given.
pub fn section(res: &Results, meta: &str, png: Option<(&Path, &Path)>) -> Result<String> {
    let mut s = String::new();
    let _ = writeln!(s, "{BEGIN}");
    s.push_str("## Scaling: collectives and ops at 2-16 PEs, a core per PE (xpushmem vs MPI)\n\n");
    s.push_str("Generated by `scripts/bench-scale.sh` (do not edit by hand): built in release on the development machine, run on a lent machine with a core per PE (`bash .scale/run.sh`), then `xpushmem-perf scale-report`. Every PE count runs xpushmem's `xpushmem-perf` (PEs bound one per core, `--bind auto`) and `benches/peers/mpi_bench.c` (Open MPI on vader shared memory, `mpirun --bind-to core`) back to back with the same options; the whole sweep runs in interleaved rounds (every PE count and implementation once per round). A figure is the median over the rounds of each run's median over its repeats; **ratio = MPI time / xpushmem time** (above 1: xpushmem faster). Collectives are timed OSU style (each call alone, a barrier between calls, slowest PE). The point-to-point, bandwidth and 2-4 PE figures above are the 2-core machine's; this section is the one that measures scaling.\n\n");
    let any = ROWS.iter().any(|r| !sizes(res, r).is_empty());
    if !any {
        s.push_str("*Not measured yet with this script: `benches/results/scale/` holds no CSVs of a machine with a core per PE. Until it does, issue 31's table (an earlier 8 B-256 KiB sweep on the same kind of machine) is the reference; above 2 PEs the 2-core sections measure the scheduler more than the library.*\n\n");
        ep_part(&mut s, res, png)?;
        s.push_str(REPRODUCE);
        let _ = writeln!(s, "{END}");
        return Ok(s);
    }
    s.push_str("| item | value |\n|---|---|\n");
    let mut runs = Vec::new();
    for l in meta.lines().filter(|l| !l.trim().is_empty()) {
        if l.starts_with("run ") || l.starts_with("skipped ") {
            runs.push(l);
        } else if let Some((k, v)) = l.split_once(':') {
            let _ = writeln!(s, "| {} | {} |", k.trim(), v.trim().replace('|', "/"));
        }
    }
    s.push('\n');
    if !runs.is_empty() {
        s.push_str("<details><summary>The runs, in order (exit status, seconds)</summary>\n\n");
        for l in runs {
            let _ = writeln!(s, "- {l}");
        }
        s.push_str("\n</details>\n\n");
    }
    s.push_str("### Scaling targets\n\nEvery collective and op at 2, 4, 8 and 16 PEs and every size 8 B-256 KiB: ≥ 1.0x MPI; all_to_all_vdev and all_to_all_vdev_2d ≥ 1.5x from 4 KiB. **Bold** = missed. The ranges are the smallest and largest ratio over the sizes of the band.\n\n");
    s.push_str(&summary(res));
    let miss = missed(res);
    let judged: usize = ROWS
        .iter()
        .map(|r| {
            PES.iter()
                .flat_map(|&n| sizes(res, r).into_iter().map(move |s| (n, s)))
                .filter(|&(n, sz)| cell(res, r, n, sz).is_some_and(|c| c.target.is_some()))
                .count()
        })
        .sum();
    let _ = writeln!(
        s,
        "\n**Verdict: {} of {judged} cells with a target met, {} missed.**\n",
        judged - miss.len(),
        miss.len()
    );
    if !miss.is_empty() {
        s.push_str("<details><summary>The missed cells</summary>\n\n| benchmark | PEs | size | ratio | target | xpushmem / MPI µs | round by round |\n|---|---|---|---|---|---|---|\n");
        for m in &miss {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2}x | ≥ {:.1}x | {} / {} | {} |",
                m.bench,
                m.npes,
                size_label(m.size),
                m.cell.ratio,
                m.cell.target.unwrap_or(1.0),
                us(m.cell.xp_us),
                us(m.cell.mpi_us),
                by_round(res, m)
            );
        }
        s.push_str("\n*Round by round*: the ratio of each round's two runs (MPI / xpushmem of the same round), their median and range; the verdict is the ratio of the two medians, as in the tables.\n");
        s.push_str("\n</details>\n\n");
    }
    for r in ROWS {
        let _ = writeln!(s, "### {}\n", r.title);
        if sizes(res, r).is_empty() {
            s.push_str("*Not measured in this run.*\n\n");
            continue;
        }
        s.push_str(&table(res, r));
        s.push('\n');
        if let (Some((dir, md)), Some(c)) = (png, chart(res, r)) {
            let file = dir.join(format!("scale_{}.png", r.xp));
            c.write_png(&file)?;
            let _ = writeln!(
                s,
                "![{} ratio at 2-16 PEs]({})\n",
                r.xp,
                crate::report::rel_link(md, &file)
            );
        }
    }
    ep_part(&mut s, res, png)?;
    s.push_str(REPRODUCE);
    let _ = writeln!(s, "{END}");
    Ok(s)
}

/// The MoE step's subsection ([`crate::scale_ep`]) and its charts.
fn ep_part(s: &mut String, res: &Results, png: Option<(&Path, &Path)>) -> Result<()> {
    let (text, charts) = crate::scale_ep::subsection(res, &PES);
    s.push_str(&text);
    if let Some((dir, md)) = png {
        for (stem, c) in charts {
            let file = dir.join(format!("scale_{stem}.png"));
            c.write_png(&file)?;
            let _ = writeln!(
                s,
                "![{stem}: the MoE step's ratios at 2-16 PEs]({})\n",
                crate::report::rel_link(md, &file)
            );
        }
    }
    Ok(())
}

/// The section of `page` from `BEGIN` to `END` (and its newline), if it has one: what `xpushmem-perf report`
/// carries over when it rewrites the page.
pub fn carried(page: &str) -> Option<&str> {
    let a = page.find(BEGIN)?;
    let b = a + page[a..].find(END)? + END.len();
    let b = if page[b..].starts_with('\n') {
        b + 1
    } else {
        b
    };
    Some(&page[a..b])
}

/// `xpushmem-perf scale-report --results DIR --md FILE [--png-dir DIR]`.
pub fn report(results: &Path, md: &Path, png_dir: Option<&Path>) -> Result<()> {
    let res = load(results)?;
    let meta = std::fs::read_to_string(results.join("meta.txt")).unwrap_or_default();
    if let Some(d) = png_dir {
        std::fs::create_dir_all(d).map_err(|e| PerfError::io(d, e))?;
    }
    let md_abs: PathBuf = md.to_path_buf();
    let sec = section(&res, &meta, png_dir.map(|d| (d, md_abs.as_path())))?;
    let old = match std::fs::read_to_string(md) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(PerfError::io(md, e)),
    };
    std::fs::write(md, splice_between(&old, BEGIN, END, &sec)).map_err(|e| PerfError::io(md, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::rec;

    #[test]
    fn targets_by_op_and_size() {
        let vdev = ROWS.iter().find(|r| r.xp == "all_to_all_vdev").unwrap();
        let bc = ROWS.iter().find(|r| r.xp == "bcast").unwrap();
        assert_eq!(target(vdev, 512), Some(1.0));
        assert_eq!(target(vdev, 4096), Some(1.5));
        assert_eq!(target(vdev, 16 << 20), Some(1.5));
        assert_eq!(target(bc, 256 << 10), Some(1.0));
        assert_eq!(target(bc, 2 << 20), None);
        assert_eq!(target(bc, 0), Some(1.0));
    }

    #[test]
    fn cells_ratios_medians_and_misses() {
        // Two rounds each: the cell is the median (the mean of two).
        let recs = vec![
            rec("xpushmem", "bcast", 4, 8, 1.0),
            rec("xpushmem", "bcast", 4, 8, 3.0),
            rec("mpi", "bcast", 4, 8, 1.5),
            rec("mpi", "bcast", 4, 8, 1.5),
            rec("xpushmem", "all_to_all_vdev", 2, 4096, 2.0),
            rec("mpi", "alltoallv", 2, 4096, 2.8),
            rec("xpushmem", "barrier_all", 16, 0, 1.0),
            rec("mpi", "barrier_all", 16, 0, 2.0),
            rec("xpushmem", "reduce_sum", 8, 1 << 20, 10.0),
            rec("mpi", "reduce_sum", 8, 1 << 20, 5.0),
        ];
        let res = Results::new(&recs);
        let bc = ROWS.iter().find(|r| r.xp == "bcast").unwrap();
        let c = cell(&res, bc, 4, 8).unwrap();
        assert_eq!((c.xp_us, c.mpi_us, c.ratio), (2.0, 1.5, 0.75));
        assert_eq!(c.met(), Some(false));
        let m = missed(&res);
        let got: Vec<(&str, usize, usize)> = m.iter().map(|m| (m.bench, m.npes, m.size)).collect();
        // all_to_all_vdev at 4 KiB: 1.4x < 1.5x; reduce_sum at 1 MiB: no target.
        assert_eq!(got, [("bcast", 4, 8), ("all_to_all_vdev", 2, 4096)]);
        let sec = section(&res, "date: today\nCPU: 16 cores", None).unwrap();
        assert!(sec.contains("| bcast | 8 B | ≥ 1.0x | - | **0.75x** | - | - |"));
        assert!(sec.contains("| barrier_all | - | ≥ 1.0x | - | - | - | 2.00x |"));
        assert!(sec.contains("| 1 MiB | none | - | - | 0.50x | - |"));
        assert!(sec.contains("Verdict: 1 of 3 cells with a target met, 2 missed"));
        assert!(sec.contains("| CPU | 16 cores |"));
    }

    #[test]
    fn missed_cells_show_their_rounds_paired() {
        assert_eq!(round_of("xp-4-large-r12"), Some("r12"));
        assert_eq!(round_of("mpi-4-r3"), Some("r3"));
        assert_eq!(
            (round_of("xp-4"), round_of("xp-r"), round_of("xp-4-rx")),
            (None, None, None)
        );
        let dir =
            std::env::temp_dir().join(format!("xpushmem-scale-rounds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let head = "impl,bench,npes,size,iters,reps,median_us,min_us,median_gbps,best_gbps\n";
        let row =
            |imp: &str, bench: &str, us: f64| format!("{imp},{bench},4,8,10,5,{us},{us},0,0\n");
        // Three rounds, MPI / xpushmem 1.5 / 1.0, 1.2 / 2.0, 0.9 / 1.0 (paired: 1.5, 0.6, 0.9), and one xpushmem run
        // of no round (3.0), which counts in the cell but in no pairing.
        for (r, xp, mpi) in [(1, 1.0, 1.5), (2, 2.0, 1.2), (3, 1.0, 0.9)] {
            std::fs::write(
                dir.join(format!("xp-4-r{r}.csv")),
                head.to_owned() + &row("xpushmem", "bcast", xp),
            )
            .unwrap();
            std::fs::write(
                dir.join(format!("mpi-4-r{r}.csv")),
                head.to_owned() + &row("mpi", "bcast", mpi),
            )
            .unwrap();
        }
        std::fs::write(
            dir.join("xp-4.csv"),
            head.to_owned() + &row("xpushmem", "bcast", 3.0),
        )
        .unwrap();
        let res = load(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        // Every run counts in the cell: xpushmem median of 1, 2, 1, 3 = 1.5, MPI 1.2: 0.80x, missed.
        let bc = ROWS.iter().find(|r| r.xp == "bcast").unwrap();
        let c = cell(&res, bc, 4, 8).unwrap();
        assert_eq!((c.xp_us, c.mpi_us), (1.5, 1.2));
        let sec = section(&res, "", None).unwrap();
        assert!(
            sec.contains("| bcast | 4 | 8 B | 0.80x | ≥ 1.0x | 1.50 / 1.20 | median 0.90 (0.60-1.50, 3 rounds) |"),
            "{sec}"
        );
    }

    #[test]
    fn the_section_is_replaced_and_carried() {
        let res = Results::new(&[]);
        let sec = section(&res, "", None).unwrap();
        let page = "# page\n\nbody\n";
        let once = splice_between(page, BEGIN, END, &sec);
        let twice = splice_between(&once, BEGIN, END, &sec);
        assert_eq!(once, twice);
        assert_eq!(carried(&once), Some(sec.as_str()));
        assert_eq!(carried(page), None);
    }
}
