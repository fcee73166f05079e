//! The reference of the expert-parallel tests (`ops_ep.rs`, and across nodes `fabric_ep.rs` and
//! `fabric_netns.rs`): every PE replays every PE's inputs from the seed and computes what each rank must receive by
//! the definition (sources in rank order, tokens in order; expert-major: experts in order, then sources, tokens and
//! top-k columns), and what combine must return (the sum of the expert outputs of a token's experts).
#![allow(dead_code)]

use super::ops_common::*;
use xpushmem::{Result, Shmem};
use xpushmem_ops::ep::{EpConfig, Layout, TokenSwitch};
use xpushmem_ops::{DType, Group};

pub const MAX_N: usize = 12;
pub const MAX_K: usize = 8;
pub const MAX_HIDDEN: usize = 24;

/// One case's inputs on rank `rank`: `topk_idx` `[n, k]` (distinct experts per row, some `-1`), weights and
/// integer-valued tokens (every sum below is exact in every float dtype).
pub struct Inputs {
    pub n: usize,
    pub idx: Vec<i64>,
    pub weights: Vec<f32>,
    pub x: Vec<f32>,
}

#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub layout: Layout,
    pub k: usize,
    pub dtype: DType,
    /// 0 uniform, 1 skewed towards expert 0, 2 mostly masked (-1).
    pub skew: usize,
    pub l: usize,
    pub hidden: usize,
}

pub fn inputs(c: &Case, w: usize, case: u64, rank: usize) -> Inputs {
    let mut rng = Rng::new(&[seed(), case, rank as u64]);
    let e = c.l * w;
    let n = rng.range(0, MAX_N as u64) as usize;
    let mut idx = vec![-1i64; n * c.k];
    for t in 0..n {
        let mut used = vec![false; e];
        for j in 0..c.k.min(e) {
            let masked = match c.skew {
                2 => rng.chance(0.7),
                _ => rng.chance(0.15),
            };
            if masked {
                continue;
            }
            let mut x = if c.skew == 1 && rng.chance(0.6) {
                0
            } else {
                rng.below(e as u64) as usize
            };
            while used[x] {
                x = (x + 1) % e;
            }
            used[x] = true;
            idx[t * c.k + j] = x as i64;
        }
    }
    let weights = (0..n * c.k).map(|_| rng.below(1000) as f32 / 7.0).collect();
    let x = (0..n * c.hidden)
        .map(|_| rng.below(7) as f32 - 3.0)
        .collect();
    Inputs { n, idx, weights, x }
}

pub fn scale(e: i64) -> f32 {
    (e % 3 + 1) as f32
}

pub fn to_bytes(v: &[f32], dt: DType) -> Vec<u8> {
    let es = dt.size();
    let mut out = vec![0u8; v.len() * es];
    for (x, b) in v.iter().zip(out.chunks_exact_mut(es)) {
        dt.store_f32(*x, b);
    }
    out
}

pub fn from_bytes(b: &[u8], dt: DType) -> Vec<f32> {
    b.chunks_exact(dt.size()).map(|c| dt.load_f32(c)).collect()
}

/// What rank `d` must receive: (source, token, column) per output row, and the local expert of each row
/// (expert-major) or `None` (flat: the row is the slot).
pub fn expected_rows(c: &Case, all: &[Inputs], d: usize) -> Vec<(usize, usize, Option<usize>)> {
    let (k, l) = (c.k, c.l);
    let on_d = |e: i64| e >= 0 && e as usize / l == d;
    let mut rows = Vec::new();
    match c.layout {
        Layout::Flat => {
            for (s, inp) in all.iter().enumerate() {
                for t in 0..inp.n {
                    if (0..k).any(|j| on_d(inp.idx[t * k + j])) {
                        rows.push((s, t, None));
                    }
                }
            }
        }
        Layout::ExpertMajor => {
            for e in 0..l {
                for (s, inp) in all.iter().enumerate() {
                    for t in 0..inp.n {
                        for j in 0..k {
                            if inp.idx[t * k + j] == (d * l + e) as i64 {
                                rows.push((s, t, Some(j)));
                            }
                        }
                    }
                }
            }
        }
    }
    rows
}

/// What one rank must see of a case: every rank's inputs, its expected rows, its expert counts.
pub struct Expect {
    pub all: Vec<Inputs>,
    pub rows: Vec<(usize, usize, Option<usize>)>,
    pub counts: Vec<u64>,
    pub what: String,
}

pub fn expect_of(g: &Group, c: &Case, case: u64) -> Expect {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let all: Vec<Inputs> = (0..w).map(|r| inputs(c, w, case, r)).collect();
    let rows = expected_rows(c, &all, me);
    let counts = (0..c.l)
        .map(|e| {
            all.iter()
                .flat_map(|i| &i.idx)
                .filter(|&&x| x == (me * c.l + e) as i64)
                .count() as u64
        })
        .collect();
    let what = format!("case {case} {c:?} seed {}", seed());
    Expect {
        all,
        rows,
        counts,
        what,
    }
}

/// Check a dispatch's outputs (`got`: the output rows as f32; `ow`, `oi`: as written) against the reference and
/// return the experts' outputs `y` (each row scaled by its expert's factor; flat: summed over the local experts).
pub fn check_dispatch(
    c: &Case,
    x: &Expect,
    me: usize,
    round: usize,
    got: &[f32],
    ow: &[f32],
    oi: Option<&[i64]>,
) -> Vec<f32> {
    let (k, h, l, what) = (c.k, c.hidden, c.l, &x.what);
    let mut y = vec![0f32; x.rows.len() * h];
    for (row, &(s, t, col)) in x.rows.iter().enumerate() {
        let src = &x.all[s];
        assert_eq!(
            &got[row * h..(row + 1) * h],
            &src.x[t * h..(t + 1) * h],
            "{what} round {round}: row {row} (rank {s} token {t})"
        );
        match col {
            None => {
                for j in 0..k {
                    let e = src.idx[t * k + j];
                    let local = e >= 0 && e as usize / l == me;
                    let (wi, ww) = if local {
                        (e - (me * l) as i64, src.weights[t * k + j])
                    } else {
                        (-1, 0.0)
                    };
                    assert_eq!(oi.unwrap()[row * k + j], wi, "{what}: idx {row},{j}");
                    assert_eq!(ow[row * k + j], ww, "{what}: weight {row},{j}");
                    if local {
                        for i in 0..h {
                            y[row * h + i] += scale(e) * src.x[t * h + i];
                        }
                    }
                }
            }
            Some(j) => {
                assert_eq!(
                    ow[row],
                    src.weights[t * k + j],
                    "{what}: weight of row {row}"
                );
                let e = src.idx[t * k + j];
                for i in 0..h {
                    y[row * h + i] = scale(e) * src.x[t * h + i];
                }
            }
        }
    }
    y
}

/// Check a combine's output: each token times the sum of its experts' factors.
pub fn check_combine(c: &Case, x: &Expect, me: usize, round: usize, back: &[f32]) {
    let (k, h, mine) = (c.k, c.hidden, &x.all[me]);
    for t in 0..mine.n {
        let f: f32 = (0..k)
            .map(|j| mine.idx[t * k + j])
            .filter(|&e| e >= 0)
            .map(scale)
            .sum();
        for i in 0..h {
            assert_eq!(
                back[t * h + i],
                f * mine.x[t * h + i],
                "{} round {round}: combined token {t} element {i}",
                x.what
            );
        }
    }
}

pub fn run_case(sh: &Shmem, g: &Group, ts: &TokenSwitch, c: &Case, case: u64) -> Result<()> {
    let me = g.my_rank().unwrap();
    let x = expect_of(g, c, case);
    let mine = &x.all[me];
    let (k, h, dt) = (c.k, c.hidden, c.dtype);
    let r = ts.create_routing(sh, g, &mine.idx, mine.n, k, c.layout)?;
    assert_eq!(r.recv_rows(), x.rows.len(), "{}: receive rows", x.what);
    assert_eq!(r.expert_counts(), x.counts, "{}: expert counts", x.what);
    let cap = ts.config().max_recv_tokens;
    let es = dt.size();
    let tokens = to_bytes(&mine.x, dt);
    // Twice on the same routing (as autograd's backward does): the second round reads no stale state.
    for round in 0..2 {
        let mut out = vec![0u8; cap * h * es];
        let (mut ow, mut oi) = match c.layout {
            Layout::Flat => (vec![0f32; cap * k], Some(vec![0i64; cap * k])),
            Layout::ExpertMajor => (vec![0f32; cap], None),
        };
        ts.dispatch(
            sh,
            g,
            &r,
            &tokens,
            dt,
            h,
            &mine.weights,
            &mut out,
            &mut ow,
            oi.as_deref_mut(),
        )?;
        let y = check_dispatch(c, &x, me, round, &from_bytes(&out, dt), &ow, oi.as_deref());
        let mut back = vec![0xAAu8; mine.n * h * es];
        ts.combine(sh, g, &r, &to_bytes(&y, dt), dt, h, &mut back)?;
        check_combine(c, &x, me, round, &from_bytes(&back, dt));
        // A combine right after a combine (it stages its rows only once every rank has passed its entry) of
        // other rows: twice the experts' outputs come back as twice the sums (exact: a power of two).
        let y2: Vec<f32> = y.iter().map(|v| 2.0 * v).collect();
        back.fill(0xAA);
        ts.combine(sh, g, &r, &to_bytes(&y2, dt), dt, h, &mut back)?;
        let half: Vec<f32> = from_bytes(&back, dt).iter().map(|v| v / 2.0).collect();
        check_combine(c, &x, me, round, &half);
    }
    if c.layout == Layout::Flat {
        // Without copies: the rows stay in the receive area, the experts' outputs are written there, and combine
        // reads them where they are.
        let (mut ow, mut oi) = (vec![0f32; cap * k], vec![0i64; cap * k]);
        let view = ts.dispatch_in_place(
            sh,
            g,
            &r,
            &tokens,
            dt,
            h,
            &mine.weights,
            &mut ow,
            Some(&mut oi),
        )?;
        assert_eq!(
            view.len(),
            x.rows.len() * h * es,
            "{}: in-place rows",
            x.what
        );
        let mut got = vec![0u8; view.len()];
        sh.get(&mut got, view, sh.my_pe())?;
        let y = check_dispatch(c, &x, me, 2, &from_bytes(&got, dt), &ow, Some(&oi));
        sh.put(view, &to_bytes(&y, dt), sh.my_pe())?;
        let mut back = vec![0xAAu8; mine.n * h * es];
        ts.combine_in_place(sh, g, &r, dt, h, &mut back)?;
        check_combine(c, &x, me, 2, &from_bytes(&back, dt));
    }
    Ok(())
}

pub fn switch(sh: &Shmem, g: &Group, l: usize) -> Result<TokenSwitch> {
    TokenSwitch::new(
        sh,
        g,
        EpConfig {
            num_experts: l * g.size(),
            max_dispatch_tokens: MAX_N,
            max_recv_tokens: MAX_N * 3 * g.size(),
            max_token_bytes: MAX_HIDDEN * 4,
            max_topk: MAX_K,
        },
    )
}

/// The covering set of 6 rows the round trips run (here and on the device path across nodes): both layouts,
/// top-k 1, 2, 3 and 8, the three float dtypes, uniform, skewed and mostly masked routings, 1 and 3 experts per
/// rank. The rows with `l` experts per rank, each with its case number.
pub fn round_trip_cases(l: usize) -> Vec<(u64, Case)> {
    let rows: [(Layout, usize, DType, usize, usize, usize); 6] = [
        (Layout::Flat, 2, DType::BF16, 0, 1, 8),
        (Layout::ExpertMajor, 8, DType::F32, 1, 1, MAX_HIDDEN),
        (Layout::Flat, 8, DType::F16, 2, 1, 1),
        (Layout::ExpertMajor, 1, DType::BF16, 2, 3, 8),
        (Layout::Flat, 3, DType::F32, 1, 3, MAX_HIDDEN),
        (Layout::ExpertMajor, 2, DType::F16, 0, 3, 1),
    ];
    rows.iter()
        .enumerate()
        .filter(|r| r.1 .4 == l)
        .map(|(i, &(layout, k, dtype, skew, _, hidden))| {
            let c = Case {
                layout,
                k,
                dtype,
                skew,
                l,
                hidden,
            };
            (7000 + i as u64, c)
        })
        .collect()
}

/// The host path's dispatch + combine at this job's size on the world over [`round_trip_cases`], each against the
/// reference.
pub fn ep_round_trips(sh: &Shmem) -> Result<()> {
    let g = Group::world(sh)?;
    for l in [1, 3] {
        let ts = switch(sh, &g, l)?;
        for (case, c) in round_trip_cases(l) {
            run_case(sh, &g, &ts, &c, case)?;
        }
        ts.free(sh)?;
    }
    g.free(sh)
}
