//! The MoE step's part of the scaling section (issue 29's benchmark and targets): per PE count and case, the
//! step time of xpushmem's `TokenSwitch` (`ep_step`), of the same exchange from `all_to_all_vdev_2d`
//! (`ep_step_vdev_2d`) and of the `all_to_all_single` reference in MPI (`mpi_bench`'s `ep_step`), with the
//! targets' verdicts at 8 and 16 PEs. Cells nobody measured read "not measured": the section regenerates from
//! CSVs of runs made before the benchmark existed. The PE counts are the section's (`scale::PES`), passed in.

use crate::ep::{case_size, CASES};
use crate::plot::{Chart, Series};
use crate::report::Results;
use std::fmt::Write as _;

/// xpushmem's benchmark (TokenSwitch, flat layout).
pub const XP: &str = "ep_step";
/// xpushmem's all_to_all_vdev_2d path.
pub const VDEV: &str = "ep_step_vdev_2d";
/// MPI's reference (mpi_bench's `ep_step`, impl `mpi`).
pub const MPI: &str = "ep_step";
/// The PE counts the targets apply at.
pub const TARGET_PES: [usize; 2] = [8, 16];
/// The target against the MPI reference: MPI time / xpushmem time.
pub const MPI_TARGET: f64 = 2.0;
/// The target against the vdev_2d path: faster (vdev_2d time / xpushmem time above this).
pub const VDEV_TARGET: f64 = 1.0;

/// One comparison: xpushmem's time, the other's, and the ratio other / xpushmem (above 1: xpushmem faster).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cmp {
    /// xpushmem's step, µs.
    pub xp_us: f64,
    /// The other's step, µs.
    pub other_us: f64,
    /// `other_us / xp_us`.
    pub ratio: f64,
}

fn cmp(res: &Results, other: (&str, &str), npes: usize, size: usize) -> Option<Cmp> {
    let x = res.get("xpushmem", XP, npes, size)?;
    let o = res.get(other.0, other.1, npes, size)?;
    let ratio = o.med_us / x.med_us;
    ratio.is_finite().then_some(Cmp {
        xp_us: x.med_us,
        other_us: o.med_us,
        ratio,
    })
}

/// xpushmem against the MPI reference at `npes` and a case's size.
pub fn vs_mpi(res: &Results, npes: usize, size: usize) -> Option<Cmp> {
    cmp(res, ("mpi", MPI), npes, size)
}

/// xpushmem against the vdev_2d path.
pub fn vs_vdev(res: &Results, npes: usize, size: usize) -> Option<Cmp> {
    cmp(res, ("xpushmem", VDEV), npes, size)
}

/// Whether a ratio meets its target: `Some(met)` at the target PE counts, `None` elsewhere.
fn verdict(npes: usize, ratio: f64, target: f64, strict: bool) -> Option<bool> {
    TARGET_PES.contains(&npes).then_some(if strict {
        ratio > target
    } else {
        ratio >= target
    })
}

fn mpi_met(npes: usize, c: &Cmp) -> Option<bool> {
    verdict(npes, c.ratio, MPI_TARGET, false)
}

fn vdev_met(npes: usize, c: &Cmp) -> Option<bool> {
    verdict(npes, c.ratio, VDEV_TARGET, true)
}

/// The tally of the target cells: (met, missed, not measured).
pub fn tally(res: &Results) -> (usize, usize, usize) {
    let (mut met, mut missed, mut none) = (0, 0, 0);
    for n in TARGET_PES {
        for &(t, h) in &CASES {
            let s = case_size(t, h);
            for got in [
                vs_mpi(res, n, s).and_then(|c| mpi_met(n, &c)),
                vs_vdev(res, n, s).and_then(|c| vdev_met(n, &c)),
            ] {
                match got {
                    Some(true) => met += 1,
                    Some(false) => missed += 1,
                    None => none += 1,
                }
            }
        }
    }
    (met, missed, none)
}

fn ms(us: f64) -> String {
    let v = us / 1e3;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn ratio_text(c: Option<Cmp>, met: fn(usize, &Cmp) -> Option<bool>, npes: usize) -> String {
    match c {
        None => "not measured".into(),
        Some(c) => match met(npes, &c) {
            Some(false) => format!("**{:.2}x**", c.ratio),
            _ => format!("{:.2}x", c.ratio),
        },
    }
}

/// The table: a line per PE count of `pes` and case, the three step times and the two ratios.
pub fn table(res: &Results, pes: &[usize]) -> String {
    let mut s = String::from("| PEs | tokens | hidden | xpushmem ms | all_to_all_vdev_2d ms | MPI all_to_all_single ms | MPI / xpushmem (≥ 2x at 8, 16 PEs) | vdev_2d / xpushmem (> 1x at 8, 16 PEs) |\n|---|---|---|---|---|---|---|---|\n");
    let time = |imp: &str, b: &str, n: usize, size: usize| {
        res.get(imp, b, n, size)
            .map_or_else(|| "not measured".into(), |c| ms(c.med_us))
    };
    for &n in pes {
        for &(t, h) in &CASES {
            let size = case_size(t, h);
            let _ = writeln!(
                s,
                "| {n} | {t} | {h} | {} | {} | {} | {} | {} |",
                time("xpushmem", XP, n, size),
                time("xpushmem", VDEV, n, size),
                time("mpi", MPI, n, size),
                ratio_text(vs_mpi(res, n, size), mpi_met, n),
                ratio_text(vs_vdev(res, n, size), vdev_met, n),
            );
        }
    }
    s
}

/// The chart of one comparison: the ratio against one rank's token bytes, a line per PE count of `pes`, the target
/// dashed; `None` when nothing was measured.
pub fn chart(res: &Results, pes: &[usize], vdev: bool) -> Option<Chart> {
    let (name, target) = if vdev {
        ("all_to_all_vdev_2d", VDEV_TARGET)
    } else {
        ("MPI all_to_all_single", MPI_TARGET)
    };
    let sizes: Vec<usize> = CASES.iter().map(|&(t, h)| case_size(t, h)).collect();
    let mut series: Vec<Series> = pes
        .iter()
        .map(|&n| Series {
            label: format!("{n} PEs"),
            points: sizes
                .iter()
                .filter_map(|&s| {
                    let c = if vdev {
                        vs_vdev(res, n, s)
                    } else {
                        vs_mpi(res, n, s)
                    };
                    c.map(|c| (s, c.ratio))
                })
                .collect(),
            reference: false,
        })
        .collect();
    if series.iter().all(|s| s.points.is_empty()) {
        return None;
    }
    let mut sorted = sizes.clone();
    sorted.sort_unstable();
    series.push(Series {
        label: format!("{target:.1}x (target at 8 and 16 PEs)"),
        points: sorted.iter().map(|&s| (s, target)).collect(),
        reference: true,
    });
    Some(Chart {
        title: format!("MoE step: {name} time / xpushmem TokenSwitch time"),
        y_label: "ratio (above 1: xpushmem faster); x: one rank's bf16 tokens".into(),
        series,
    })
}

/// The subsection (markdown, a table line per PE count of `pes`) and its charts: `(file stem, chart)` to draw.
pub fn subsection(res: &Results, pes: &[usize]) -> (String, Vec<(&'static str, Chart)>) {
    let mut s = String::from("### MoE step (issue 29): TokenSwitch vs all_to_all_single (MPI) and all_to_all_vdev_2d\n\n");
    s.push_str("One step per rank = routing + dispatch + combine of the rank's own tokens (bf16-sized, 128/512/4096 tokens x hidden 1024/7168), top-8 of 8 x PEs experts, uniform random routing from a fixed seed (splitmix64, the same generator on both sides), the experts being the identity: xpushmem's host `TokenSwitch` in the flat layout (`xpushmem-perf ep_step`), the same exchange built from xpushmem's `all_to_all_vdev_2d` + `all_to_all_vdev_2d_offset` (`ep_step_vdev_2d`: one row per (token, expert) pair, packed by expert, index-added back), and the `all_to_all_single` reference in C with MPI (`benches/peers/mpi_bench.c`'s `ep_step`: `MPI_Alltoall` of the counts, `MPI_Alltoallv` of rows of token + f32 weights + int64 expert ids, `MPI_Alltoallv` back, f32 index-add; the same steps as `benches/ep_bench.py`'s `_mpi_step`). This machine runs the C reference because torch cannot be carried there; `benches/ep_bench.py` remains the torch comparison (gloo's `all_to_all_single`, mpi4py) on machines that have torch. A time is the slowest rank's median step (each step alone between barriers; buffers allocated once), the median over the rounds; each variant's first step is checked against a locally computed combine. Targets (issue 29), at 8 and 16 PEs and every case: MPI time / xpushmem time ≥ 2.0x and all_to_all_vdev_2d time / xpushmem time > 1.0x; **bold** = missed.\n\n");
    let (met, missed, none) = tally(res);
    let _ = writeln!(
        s,
        "**MoE verdict: {met} of {} target cells met, {missed} missed, {none} not measured.**\n",
        met + missed + none
    );
    s.push_str(&table(res, pes));
    s.push('\n');
    let charts = [("ep_step", false), ("ep_step_vdev_2d", true)]
        .into_iter()
        .filter_map(|(stem, vdev)| chart(res, pes, vdev).map(|c| (stem, c)))
        .collect();
    (s, charts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::rec;

    const PES: [usize; 4] = [2, 4, 8, 16];

    #[test]
    fn verdicts_and_unmeasured_cells() {
        let s = case_size(128, 1024);
        let big = case_size(4096, 7168);
        let recs = vec![
            rec("xpushmem", XP, 8, s, 100.0),
            rec("mpi", MPI, 8, s, 250.0),
            rec("xpushmem", VDEV, 8, s, 90.0),
            rec("xpushmem", XP, 16, big, 1000.0),
            rec("mpi", MPI, 16, big, 1500.0),
            rec("xpushmem", XP, 2, s, 10.0),
            rec("mpi", MPI, 2, s, 11.0),
        ];
        let res = Results::new(&recs);
        // 8 PEs, 128 x 1024: 2.5x MPI (met), 0.9x vdev_2d (missed); 16 PEs, 4096 x 7168: 1.5x MPI (missed).
        assert_eq!(tally(&res), (1, 2, 21));
        let t = table(&res, &PES);
        assert!(
            t.contains("| 8 | 128 | 1024 | 0.100 | 0.090 | 0.250 | 2.50x | **0.90x** |"),
            "{t}"
        );
        assert!(
            t.contains(
                "| 16 | 4096 | 7168 | 1.00 | not measured | 1.50 | **1.50x** | not measured |"
            ),
            "{t}"
        );
        // No target at 2 PEs: 1.1x is not bold.
        assert!(
            t.contains("| 2 | 128 | 1024 | 0.010 | not measured | 0.011 | 1.10x | not measured |"),
            "{t}"
        );
        assert!(chart(&res, &PES, false).is_some() && chart(&res, &PES, true).is_some());
    }

    #[test]
    fn nothing_measured_is_said_not_crashed() {
        let res = Results::new(&[]);
        let (text, charts) = subsection(&res, &PES);
        assert!(text.contains("0 of 24 target cells met, 0 missed, 24 not measured"));
        // 24 rows (4 PE counts x 6 cases) of 5 cells each.
        assert_eq!(text.matches("not measured |").count(), 120);
        assert!(charts.is_empty());
    }
}
