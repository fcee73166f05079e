//! Expert-parallel dispatch and combine (`xpushmem_ops::ep::TokenSwitch`, host path) against an independent
//! reference: every PE replays every PE's inputs from the seed and computes what each rank must receive by the
//! definition (sources in rank order, tokens in order; expert-major: experts in order, then sources, tokens and
//! top-k columns), and what combine must return (the sum of the expert outputs of a token's experts). A covering
//! set of (layout, top-k, dtype, routing skew, experts per rank, hidden) rows; then the errors: an expert id out
//! of range, a receive overflow (the same error on every rank), ranks disagreeing (`Mismatch`), and a lost peer.

use crate::ops_common::*;
use std::time::Duration;
use xpushmem::{Error, Result, Shmem};
use xpushmem_ops::ep::{EpConfig, Layout, TokenSwitch};
use xpushmem_ops::{DType, Group};
use xpushmem_tests::cover::{depth, pairwise, product, Depth};
use xpushmem_tests::{assert_success, is_pe_of, pe_test, run_pe, spawn_pes_with, test_name};

const MAX_N: usize = 12;
const MAX_K: usize = 8;
const MAX_HIDDEN: usize = 24;

/// One case's inputs on rank `rank`: `topk_idx` `[n, k]` (distinct experts per row, some `-1`), weights and
/// integer-valued tokens (every sum below is exact in every float dtype).
struct Inputs {
    n: usize,
    idx: Vec<i64>,
    weights: Vec<f32>,
    x: Vec<f32>,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    layout: Layout,
    k: usize,
    dtype: DType,
    /// 0 uniform, 1 skewed towards expert 0, 2 mostly masked (-1).
    skew: usize,
    l: usize,
    hidden: usize,
}

fn inputs(c: &Case, w: usize, case: u64, rank: usize) -> Inputs {
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

fn scale(e: i64) -> f32 {
    (e % 3 + 1) as f32
}

fn to_bytes(v: &[f32], dt: DType) -> Vec<u8> {
    let es = dt.size();
    let mut out = vec![0u8; v.len() * es];
    for (x, b) in v.iter().zip(out.chunks_exact_mut(es)) {
        dt.store_f32(*x, b);
    }
    out
}

fn from_bytes(b: &[u8], dt: DType) -> Vec<f32> {
    b.chunks_exact(dt.size()).map(|c| dt.load_f32(c)).collect()
}

/// What rank `d` must receive: (source, token, column) per output row, and the local expert of each row
/// (expert-major) or `None` (flat: the row is the slot).
fn expected_rows(c: &Case, all: &[Inputs], d: usize) -> Vec<(usize, usize, Option<usize>)> {
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

fn run_case(sh: &Shmem, g: &Group, ts: &TokenSwitch, c: &Case, case: u64) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let all: Vec<Inputs> = (0..w).map(|r| inputs(c, w, case, r)).collect();
    let mine = &all[me];
    let (k, h, dt, l) = (c.k, c.hidden, c.dtype, c.l);
    let what = format!("case {case} {c:?} seed {}", seed());
    let r = ts.create_routing(sh, g, &mine.idx, mine.n, k, c.layout)?;
    let rows = expected_rows(c, &all, me);
    assert_eq!(r.recv_rows(), rows.len(), "{what}: receive rows");
    let want_counts: Vec<u64> = (0..l)
        .map(|e| {
            all.iter()
                .flat_map(|i| &i.idx)
                .filter(|&&x| x == (me * l + e) as i64)
                .count() as u64
        })
        .collect();
    assert_eq!(r.expert_counts(), want_counts, "{what}: expert counts");
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
        let got = from_bytes(&out, dt);
        let mut y = vec![0f32; rows.len() * h];
        for (row, &(s, t, col)) in rows.iter().enumerate() {
            let src = &all[s];
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
                        assert_eq!(
                            oi.as_ref().unwrap()[row * k + j],
                            wi,
                            "{what}: idx {row},{j}"
                        );
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
        let mut back = vec![0xAAu8; mine.n * h * es];
        ts.combine(sh, g, &r, &to_bytes(&y, dt), dt, h, &mut back)?;
        let back = from_bytes(&back, dt);
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
                    "{what} round {round}: combined token {t} element {i}"
                );
            }
        }
    }
    Ok(())
}

#[track_caller]
fn expect<T>(r: Result<T>, kind: &str, text: &str, what: &str) {
    match r {
        Ok(_) => panic!("{what}: expected a {kind} error containing {text:?}, got Ok"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "{what}: {e}");
            assert!(e.to_string().contains(text), "{what}: {text:?} not in {e}");
        }
    }
}

fn switch(sh: &Shmem, g: &Group, l: usize) -> Result<TokenSwitch> {
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

fn healthy(sh: &Shmem, g: &Group, ts: &TokenSwitch, l: usize) -> Result<()> {
    let c = Case {
        layout: Layout::ExpertMajor,
        k: 2,
        dtype: DType::F32,
        skew: 0,
        l,
        hidden: 3,
    };
    run_case(sh, g, ts, &c, 999)
}

fn errors(sh: &Shmem, g: &Group, ts: &TokenSwitch, l: usize) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let last = me == w - 1;
    let e = (l * w) as i64;
    // An expert id out of range on the last rank: it names the value and position; the others name the rank.
    let idx = if last { vec![0, e] } else { vec![0, 1] };
    let r = ts.create_routing(sh, g, &idx, 1, 2, Layout::Flat);
    if last {
        expect(
            r,
            "InvalidArgument",
            &format!("{e} at [0, 1]"),
            "bad expert id",
        );
    } else {
        expect(
            r,
            "InvalidArgument",
            "rejected its arguments",
            "bad expert id elsewhere",
        );
    }
    healthy(sh, g, ts, l)?;
    // A switch receiving at most W rows; every rank sends rank 0 two tokens (on two of its experts, when it has
    // two): rank 0 would receive 2W slots (flat) or 2W or 4W pairs (expert-major). Every rank reports the same
    // overflow, naming rank 0, the count and the excess; a routing that fits still works.
    let small = TokenSwitch::new(
        sh,
        g,
        EpConfig {
            max_recv_tokens: w,
            ..ts.config()
        },
    )?;
    let k = l.min(2);
    let idx: Vec<i64> = (0..2).flat_map(|_| 0..k as i64).collect();
    for layout in [Layout::Flat, Layout::ExpertMajor] {
        let rows = if layout == Layout::Flat {
            2 * w
        } else {
            2 * k * w
        };
        expect(
            small.create_routing(sh, g, &idx, 2, k, layout),
            "OutOfBounds",
            &format!(
                "rank 0 would receive {rows} {} rows ({} did not fit in max_recv_tokens_per_rank = {w})",
                layout.name(),
                rows - w
            ),
            "overflow",
        );
    }
    let r = small.create_routing(sh, g, &[0], 1, 1, Layout::Flat)?;
    assert_eq!(r.recv_rows(), if me == 0 { w } else { 0 });
    small.free(sh)?;
    healthy(sh, g, ts, l)?;
    // Ranks disagreeing on top-k, then on the dtype of a dispatch: Mismatch on every rank.
    let k = if last { 2 } else { 1 };
    expect(
        ts.create_routing(sh, g, &vec![0; k], 1, k, Layout::Flat),
        "Mismatch",
        "",
        "top-k differs",
    );
    let r = ts.create_routing(sh, g, &[0], 1, 1, Layout::Flat)?;
    let dt = if last { DType::F16 } else { DType::F32 };
    let rows = r.recv_rows();
    expect(
        ts.dispatch(
            sh,
            g,
            &r,
            &vec![0u8; 4 * dt.size()],
            dt,
            4,
            &[1.0],
            &mut vec![0u8; rows.max(1) * 4 * dt.size()],
            &mut vec![0f32; rows.max(1)],
            Some(&mut vec![0i64; rows.max(1)]),
        ),
        "Mismatch",
        "",
        "dtype differs",
    );
    // A bad local argument: the flat layout needs out_topk_idx.
    let mut oi = vec![0i64; w];
    let r2 = ts.dispatch(
        sh,
        g,
        &r,
        &[0u8; 16],
        DType::F32,
        4,
        &[1.0],
        &mut vec![0u8; 16 * w],
        &mut vec![0f32; w],
        if last { None } else { Some(&mut oi) },
    );
    if last {
        expect(
            r2,
            "InvalidArgument",
            "out_topk_idx",
            "missing out_topk_idx",
        );
    } else {
        expect(
            r2,
            "InvalidArgument",
            "rejected its arguments",
            "missing out_topk_idx elsewhere",
        );
    }
    healthy(sh, g, ts, l)
}

pe_test!(ep_dispatch_combine_against_reference, shm[2, 3, 4], |sh| {
    let g = Group::world(sh)?;
    let w = g.size();
    let layouts = [Layout::Flat, Layout::ExpertMajor];
    let ks = [1, 2, 3, 8];
    let dtypes = [DType::F32, DType::BF16, DType::F16];
    let ls = [1, 3];
    let hiddens = [1, 8, MAX_HIDDEN];
    let dims = [2, ks.len(), dtypes.len(), 3, ls.len(), hiddens.len()];
    let rows = match depth() {
        Depth::Full => product(&dims, |_| true),
        Depth::Cover => pairwise(
            &dims,
            &[(0, 1), (0, 2), (0, 3), (0, 4), (1, 3), (1, 4), (2, 5)],
            |_| true,
        ),
    };
    for l in ls {
        let ts = switch(sh, &g, l)?;
        for (i, row) in rows.iter().enumerate().filter(|(_, r)| ls[r[4]] == l) {
            let c = Case {
                layout: layouts[row[0]],
                k: ks[row[1]],
                dtype: dtypes[row[2]],
                skew: row[3],
                l,
                hidden: hiddens[row[5]],
            };
            run_case(sh, &g, &ts, &c, i as u64 * 31 + w as u64)?;
        }
        if w == 3 || l == 1 {
            errors(sh, &g, &ts, l)?;
        }
        ts.free(sh)?;
    }
    g.free(sh)
});

/// A rank that died during a dispatch is reported as `PeerLost` on the others, quickly (no hang).
#[test]
fn ep_peer_lost_in_dispatch_3pe() {
    let name = test_name(module_path!(), "ep_peer_lost_in_dispatch_3pe");
    if is_pe_of(&name) {
        run_pe(|sh| {
            let (me, n) = (sh.my_pe(), sh.n_pes());
            let g = Group::world(sh)?;
            let ts = switch(sh, &g, 2)?;
            let out = sh.calloc::<u64>(1)?.at(0)?;
            healthy(sh, &g, &ts, 2)?;
            let r = ts.create_routing(sh, &g, &[0, 5], 1, 2, Layout::Flat)?;
            xpushmem_tests::victim_leaves_last(sh, out, n - 1)?;
            let start = std::time::Instant::now();
            let rows = r.recv_rows().max(1);
            let e = ts
                .dispatch(
                    sh,
                    &g,
                    &r,
                    &[0u8; 8],
                    DType::F32,
                    2,
                    &[1.0, 1.0],
                    &mut vec![0u8; rows * 8],
                    &mut vec![0f32; rows * 2],
                    Some(&mut vec![0i64; rows * 2]),
                )
                .unwrap_err();
            assert!(matches!(e, Error::PeerLost { .. }), "PE {me}: {e}");
            assert!(start.elapsed() < Duration::from_secs(10));
            Ok(())
        });
    }
    let out = spawn_pes_with(&name, 3, &[]);
    assert_success(&name, 3, &out);
}
