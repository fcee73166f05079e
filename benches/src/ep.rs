//! Issue 29's benchmark: one expert-parallel MoE step per rank (routing + dispatch + combine) of `tokens` bf16
//! tokens of `hidden` elements, top-[`TOPK`] of `8 * W` experts, uniform random routing, the experts being the
//! identity, for the [`CASES`] (128/512/4096 tokens x hidden 1024/7168):
//!
//! * `ep_step`: `xpushmem-ops`' host [`TokenSwitch`] in the flat layout (`create_routing`, `dispatch_in_place`,
//!   `combine_in_place`: the rows stay in the switch's receive area, where the identity experts leave them);
//! * `ep_step_expert_major`: the same in the expert-major layout (`dispatch` into and `combine` from a buffer);
//! * `ep_step_vdev_2d`: the same exchange built from `all_to_all_vdev_2d` + `all_to_all_vdev_2d_offset` (as
//!   `benches/ep_bench.py` builds it, and torchtitan on NVSHMEM): one row per (token, expert) pair packed by global
//!   expert, dispatched expert-major, returned, summed per token in f32.
//!
//! `benches/peers/mpi_bench.c`'s `ep_step` is the `all_to_all_single` reference in MPI (counts by `MPI_Alltoall`,
//! packed rows of token + f32 weights + int64 expert ids by `MPI_Alltoallv`, the token rows back by
//! `MPI_Alltoallv`, an f32 index-add), with the same cases, routing generator ([`splitmix64`]) and token values.
//!
//! A case's CSV `size` is the bytes of one rank's tokens (`tokens * hidden * 2`; [`case_of`] maps it back); the
//! cases run whose size is within `-b`..`-e`. Buffers (the switch's symmetric receive areas, the `vdev_2d`
//! symmetric tensors, the local outputs) are allocated once, on the first EP step, for the largest selected case
//! and the most any rank receives in it (every rank computes every rank's routing: they are functions of the
//! seed). One run call times `iters` steps, each alone between barriers, and returns this PE's median; with
//! `Timing::MaxOverPes` the runner keeps the slowest PE's, per repeat. The first step of each case and variant is
//! checked: with identity experts and combine's sum (weights are not applied: upstream's semantics, the experts
//! apply them), token `t`'s combined row is `x[t]` times its number of destination ranks (flat) or of its experts
//! (expert-major, `vdev_2d`); the token values are small integers, so every sum is exact in bf16.

use crate::bench::{Bench, RunFn, Sizes, Step, Timing};
use crate::ctx::Ctx;
use crate::error::{PerfError, Result};
use std::time::Instant;
use xpushmem::{Shmem, SymSlice};
use xpushmem_ops::dtype::{bf16_to_f32, f32_to_bf16};
use xpushmem_ops::ep::{EpConfig, Layout, TokenSwitch};
use xpushmem_ops::{all_to_all_vdev_2d, all_to_all_vdev_2d_offset, DType, Group, TensorView};

/// Experts per token.
pub const TOPK: usize = 8;
/// Experts per rank (`8 * W` experts in all).
pub const EXPERTS_PER_RANK: usize = 8;
/// Bytes of one token element (bf16).
pub const ELEM: usize = 2;
/// The cases (tokens, hidden), in table order.
pub const CASES: [(usize, usize); 6] = [
    (128, 1024),
    (128, 7168),
    (512, 1024),
    (512, 7168),
    (4096, 1024),
    (4096, 7168),
];
/// The seed of the routings (mixed with the rank and the case: [`seed`]).
pub const SEED: u64 = 0xE9B0_0000_0000_0029;

/// The CSV size of a case: the bytes of one rank's tokens.
pub const fn case_size(tokens: usize, hidden: usize) -> usize {
    tokens * hidden * ELEM
}

/// The case whose CSV size is `size`.
pub fn case_of(size: usize) -> Option<(usize, usize)> {
    CASES
        .iter()
        .copied()
        .find(|&(n, h)| case_size(n, h) == size)
}

/// The CSV sizes of the cases, in [`CASES`] order.
pub const SIZES: [usize; 6] = {
    let mut s = [0; 6];
    let mut i = 0;
    while i < 6 {
        s[i] = case_size(CASES[i].0, CASES[i].1);
        i += 1;
    }
    s
};

/// The EP benchmarks.
pub fn benches() -> Vec<Bench> {
    vec![
        ep(
            "ep_step",
            "MoE step (routing + dispatch + combine) through TokenSwitch, flat layout; size = one rank's bf16 tokens (tokens x hidden x 2), top-8 of 8*PEs experts",
            ep_flat,
        ),
        ep(
            "ep_step_expert_major",
            "ep_step in the expert_major layout",
            ep_expert_major,
        ),
        ep(
            "ep_step_vdev_2d",
            "the same MoE step from all_to_all_vdev_2d + all_to_all_vdev_2d_offset, one row per (token, expert) pair",
            ep_vdev,
        ),
    ]
}

fn ep(name: &'static str, about: &'static str, run: RunFn) -> Bench {
    Bench {
        name,
        group: "ep",
        about,
        sizes: Sizes::Cases(&SIZES),
        windowed: false,
        timing: Timing::MaxOverPes,
        min_pes: 1,
        bytes: crate::bench::bytes_size,
        run,
    }
}

/// One step of the splitmix64 generator (the C peer implements the same).
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The generator's seed for `rank`'s tokens of a case.
pub fn seed(rank: usize, tokens: usize, hidden: usize) -> u64 {
    SEED ^ ((rank as u64) << 40) ^ ((tokens as u64) << 16) ^ hidden as u64
}

/// `rank`'s routing of a case: `topk_idx` (`[tokens, k]`, distinct experts of `experts`, uniform: a partial
/// Fisher-Yates shuffle per token) and `topk_weights` (`[tokens, k]`, in [0, 1), 24 random bits each), drawn
/// token by token (the k experts, then the k weights).
pub fn routing(
    rank: usize,
    tokens: usize,
    hidden: usize,
    k: usize,
    experts: usize,
) -> (Vec<i64>, Vec<f32>) {
    let mut s = seed(rank, tokens, hidden);
    let mut idx = vec![0i64; tokens * k];
    let mut w = vec![0f32; tokens * k];
    let mut perm: Vec<u64> = Vec::with_capacity(experts);
    for t in 0..tokens {
        perm.clear();
        perm.extend(0..experts as u64);
        for j in 0..k {
            let i = j + (splitmix64(&mut s) % (experts - j) as u64) as usize;
            perm.swap(j, i);
            idx[t * k + j] = perm[j] as i64;
        }
        for j in 0..k {
            w[t * k + j] = (splitmix64(&mut s) >> 40) as f32 / (1u64 << 24) as f32;
        }
    }
    (idx, w)
}

/// Element `c` of `rank`'s token `t`: a small integer in [-8, 8] (the C peer uses the same).
pub fn token_value(rank: usize, t: usize, c: usize) -> i32 {
    ((t * 7 + c * 13 + rank * 5) % 17) as i32 - 8
}

/// bfloat16 bits of a small integer (exact: |v| <= 256).
fn bf16_int(v: i32) -> u16 {
    ((v as f32).to_bits() >> 16) as u16
}

/// `rank`'s tokens of a case, bf16 little-endian.
pub fn tokens_of(rank: usize, tokens: usize, hidden: usize) -> Vec<u8> {
    let mut x = vec![0u8; tokens * hidden * ELEM];
    for t in 0..tokens {
        for c in 0..hidden {
            let at = (t * hidden + c) * ELEM;
            x[at..at + ELEM].copy_from_slice(&bf16_int(token_value(rank, t, c)).to_le_bytes());
        }
    }
    x
}

/// The reference combine output of `rank` (independent of the exchange): token `t`'s row is `x[t] * mult[t]`.
pub fn expected(rank: usize, tokens: usize, hidden: usize, mult: &[i32]) -> Vec<u8> {
    let mut x = vec![0u8; tokens * hidden * ELEM];
    for (t, &m) in mult.iter().enumerate().take(tokens) {
        for c in 0..hidden {
            let at = (t * hidden + c) * ELEM;
            x[at..at + ELEM].copy_from_slice(&bf16_int(token_value(rank, t, c) * m).to_le_bytes());
        }
    }
    x
}

/// Per token, the number of distinct ranks holding its experts (`local` experts per rank; `-1` = none).
pub fn dest_ranks(idx: &[i64], k: usize, local: usize) -> Vec<i32> {
    idx.chunks(k)
        .map(|row| {
            let mut r: Vec<i64> = row
                .iter()
                .filter(|&&e| e >= 0)
                .map(|&e| e / local as i64)
                .collect();
            r.sort_unstable();
            r.dedup();
            r.len() as i32
        })
        .collect()
}

/// Per token, the number of its experts (`-1` = none).
pub fn experts_of(idx: &[i64], k: usize) -> Vec<i32> {
    idx.chunks(k)
        .map(|row| row.iter().filter(|&&e| e >= 0).count() as i32)
        .collect()
}

/// The most (slots, pairs) any rank receives over `cases` with `w` ranks (from every rank's routing).
fn most_received(cases: &[(usize, usize)], w: usize) -> (usize, usize) {
    let (experts, local) = (EXPERTS_PER_RANK * w, EXPERTS_PER_RANK);
    let (mut slots, mut pairs) = (0, 0);
    for &(n, h) in cases {
        let (mut s, mut p) = (vec![0usize; w], vec![0usize; w]);
        for src in 0..w {
            let (idx, _) = routing(src, n, h, TOPK, experts);
            for row in idx.chunks(TOPK) {
                let mut hit = vec![false; w];
                for &e in row.iter().filter(|&&e| e >= 0) {
                    let d = e as usize / local;
                    p[d] += 1;
                    hit[d] = true;
                }
                for (d, _) in hit.iter().enumerate().filter(|x| *x.1) {
                    s[d] += 1;
                }
            }
        }
        slots = slots.max(s.into_iter().max().unwrap_or(0));
        pairs = pairs.max(p.into_iter().max().unwrap_or(0));
    }
    (slots, pairs)
}

/// One case's inputs on this rank.
#[derive(Debug)]
struct Inputs {
    case: (usize, usize),
    x: Vec<u8>,
    idx: Vec<i64>,
    w: Vec<f32>,
}

/// The buffers of the EP benchmarks, allocated once (collectively) for the largest selected case.
#[derive(Debug)]
pub struct EpState {
    switch: TokenSwitch,
    inputs: Option<Inputs>,
    /// Dispatch outputs (the experts' inputs and outputs: identity) and combine's output.
    out_tokens: Vec<u8>,
    out_w: Vec<f32>,
    out_idx: Vec<i64>,
    comb: Vec<u8>,
    /// The vdev_2d path: pairs sent (packed by global expert), received, returned (symmetric), the splits.
    inp: SymSlice<u8>,
    recv: SymSlice<u8>,
    back: SymSlice<u8>,
    splits: SymSlice<i64>,
    oso: SymSlice<i64>,
    boso: SymSlice<i64>,
    /// The vdev_2d path's local state: per global expert counts, each pair's token, the returned rows, the sums.
    counts: Vec<i64>,
    starts: Vec<usize>,
    tok: Vec<usize>,
    back_local: Vec<u8>,
    acc: Vec<f32>,
    /// (bench, size) already checked.
    checked: Vec<(&'static str, usize)>,
}

impl EpState {
    /// Allocate for the cases and steps `opts` selects (collective over all PEs).
    fn new(c: &mut Ctx<'_>) -> Result<EpState> {
        let (sh, w) = (c.sh, c.n);
        let cases: Vec<(usize, usize)> = CASES
            .iter()
            .copied()
            .filter(|&(n, h)| (c.opts.begin..=c.opts.end).contains(&case_size(n, h)))
            .collect();
        let max_n = cases.iter().map(|c| c.0).max().unwrap_or(1);
        let max_rb = cases.iter().map(|c| c.1 * ELEM).max().unwrap_or(ELEM);
        let (slots, pairs) = most_received(&cases, w);
        // The switch receives slots (flat), or pairs when the expert-major step runs too.
        let em = c
            .opts
            .select
            .iter()
            .any(|s| s == "ep" || s == "ep_step_expert_major");
        let group = crate::ops::group(c)?;
        let cfg = EpConfig {
            num_experts: EXPERTS_PER_RANK * w,
            max_dispatch_tokens: max_n,
            max_recv_tokens: if em { slots.max(pairs) } else { slots }.max(1),
            max_token_bytes: max_rb,
            max_topk: TOPK,
        };
        let switch = TokenSwitch::new(sh, group, cfg)?;
        let rows = cfg.max_recv_tokens;
        let sent = max_n * TOPK;
        let e = cfg.num_experts;
        Ok(EpState {
            switch,
            inputs: None,
            out_tokens: vec![0; rows * max_rb],
            out_w: vec![0.0; rows * TOPK],
            out_idx: vec![0; rows * TOPK],
            comb: vec![0; max_n * max_rb],
            inp: sh.align::<u8>(4096, sent * max_rb)?,
            recv: sh.align::<u8>(4096, pairs.max(1) * max_rb)?,
            back: sh.align::<u8>(4096, sent * max_rb)?,
            splits: sh.calloc::<i64>(e)?,
            oso: sh.calloc::<i64>(2 * e)?,
            boso: sh.calloc::<i64>(2 * e)?,
            counts: vec![0; e],
            starts: vec![0; e + 1],
            tok: vec![0; sent],
            back_local: vec![0; sent * max_rb],
            acc: vec![0.0; max_n * max_rb / ELEM],
            checked: Vec::new(),
        })
    }

    fn inputs(&mut self, me: usize, w: usize, case: (usize, usize)) -> &Inputs {
        if self.inputs.as_ref().is_none_or(|i| i.case != case) {
            let (n, h) = case;
            let (idx, wts) = routing(me, n, h, TOPK, EXPERTS_PER_RANK * w);
            self.inputs = Some(Inputs {
                case,
                x: tokens_of(me, n, h),
                idx,
                w: wts,
            });
        }
        self.inputs.as_ref().expect("just made")
    }
}

/// Which exchange a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Switch(Layout),
    Vdev2d,
}

fn ep_flat(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    timed(c, s, Variant::Switch(Layout::Flat))
}

fn ep_expert_major(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    timed(c, s, Variant::Switch(Layout::ExpertMajor))
}

fn ep_vdev(c: &mut Ctx<'_>, s: &Step) -> Result<f64> {
    timed(c, s, Variant::Vdev2d)
}

/// `s.iters` steps, each timed alone between barriers; this PE's median. The first step of a (bench, case) is
/// checked against [`expected`].
fn timed(c: &mut Ctx<'_>, s: &Step, v: Variant) -> Result<f64> {
    let case = case_of(s.size)
        .ok_or_else(|| PerfError::Usage(format!("{}: no EP case of {} bytes", c.bench, s.size)))?;
    if c.ep.is_none() {
        let st = EpState::new(c)?;
        c.ep = Some(Box::new(st));
    }
    crate::ops::group(c)?;
    let (sh, me, w, bench, chk) = (c.sh, c.me, c.n, c.bench, c.checker());
    let st = c.ep.as_mut().and_then(|b| b.downcast_mut::<EpState>());
    let (group, st) = match (c.group.as_ref(), st) {
        (Some(g), Some(st)) => (g, st),
        _ => return Err(PerfError::Usage("the EP state was not created".into())),
    };
    st.inputs(me, w, case);
    let mut times = Vec::with_capacity(s.iters);
    for _ in 0..s.iters {
        sh.barrier_all()?;
        let t0 = Instant::now();
        match v {
            Variant::Switch(layout) => switch_step(sh, group, st, layout)?,
            Variant::Vdev2d => vdev_step(sh, group, st)?,
        }
        times.push(t0.elapsed().as_secs_f64());
        if !st.checked.contains(&(bench, s.size)) {
            let (n, h) = case;
            let inp = st.inputs.as_ref().expect("made above");
            let mult = match v {
                Variant::Switch(Layout::Flat) => dest_ranks(&inp.idx, TOPK, EXPERTS_PER_RANK),
                _ => experts_of(&inp.idx, TOPK),
            };
            let want = expected(me, n, h, &mult);
            chk.bytes("combined tokens", &mut st.comb[..n * h * ELEM], &want)?;
            st.checked.push((bench, s.size));
        }
    }
    Ok(crate::stats::median(&times))
}

/// Routing, dispatch and combine through the switch (identity experts: combine takes dispatch's output).
fn switch_step(sh: &Shmem, g: &Group, st: &mut EpState, layout: Layout) -> Result<()> {
    let inp = st.inputs.as_ref().expect("inputs made");
    let ((n, h), k) = (inp.case, TOPK);
    let rb = h * ELEM;
    let r = st.switch.create_routing(sh, g, &inp.idx, n, k, layout)?;
    let rows = r.recv_rows();
    let (weights, idx) = match layout {
        Layout::Flat => (rows * k, Some(&mut st.out_idx[..rows * k])),
        Layout::ExpertMajor => (rows, None),
    };
    let comb = &mut st.comb[..n * rb];
    match layout {
        // The rows stay in the switch's receive area, the (identity) experts compute there, and combine reads
        // them where they are.
        Layout::Flat => {
            st.switch.dispatch_in_place(
                sh,
                g,
                &r,
                &inp.x,
                DType::BF16,
                h,
                &inp.w,
                &mut st.out_w[..weights],
                idx,
            )?;
            st.switch
                .combine_in_place(sh, g, &r, DType::BF16, h, comb)?;
        }
        Layout::ExpertMajor => {
            let out = &mut st.out_tokens[..rows * rb];
            st.switch.dispatch(
                sh,
                g,
                &r,
                &inp.x,
                DType::BF16,
                h,
                &inp.w,
                out,
                &mut st.out_w[..weights],
                idx,
            )?;
            st.switch.combine(sh, g, &r, out, DType::BF16, h, comb)?;
        }
    }
    Ok(())
}

/// `rows` rows of `h` bf16 of `buf` as a tensor.
fn rows_view(buf: SymSlice<u8>, h: usize) -> Result<TensorView> {
    let rows = buf.len() / (h * ELEM);
    Ok(TensorView::contiguous(
        buf.slice(..rows * h * ELEM)?,
        DType::BF16,
        &[rows, h],
    )?)
}

/// The same step from all_to_all_vdev_2d and all_to_all_vdev_2d_offset: the (token, expert) pairs sorted by global
/// expert (stable: by token within an expert), packed into the symmetric input, dispatched expert-major,
/// returned by the offsets the dispatch wrote, summed per token in f32.
fn vdev_step(sh: &Shmem, g: &Group, st: &mut EpState) -> Result<()> {
    let inp = st.inputs.as_ref().expect("inputs made");
    let ((n, h), k, me) = (inp.case, TOPK, sh.my_pe());
    let rb = h * ELEM;
    let e = st.counts.len();
    st.counts.fill(0);
    for &x in inp.idx.iter().filter(|&&x| x >= 0) {
        st.counts[x as usize] += 1;
    }
    st.starts[0] = 0;
    for i in 0..e {
        st.starts[i + 1] = st.starts[i] + st.counts[i] as usize;
    }
    let pairs = st.starts[e];
    for (p, &x) in inp.idx.iter().enumerate().filter(|(_, &x)| x >= 0) {
        let at = &mut st.starts[x as usize];
        st.tok[*at] = p / k;
        *at += 1;
    }
    sh.put(st.splits, &st.counts, me)?;
    for (p, &t) in st.tok[..pairs].iter().enumerate() {
        sh.put(
            st.inp.slice(p * rb..(p + 1) * rb)?,
            &inp.x[t * rb..(t + 1) * rb],
            me,
        )?;
    }
    let (input, recv, back) = (
        rows_view(st.inp, h)?,
        rows_view(st.recv, h)?,
        rows_view(st.back, h)?,
    );
    let splits = TensorView::of(sh, st.splits, DType::I64, &[e])?;
    let oso = TensorView::of(sh, st.oso, DType::I64, &[2, e])?;
    let boso = TensorView::of(sh, st.boso, DType::I64, &[2, e])?;
    all_to_all_vdev_2d(sh, g, &input, &recv, &splits, &oso, None)?;
    // The experts (identity) would run here on `recv`, expert by expert (oso row 1: their offsets).
    all_to_all_vdev_2d_offset(sh, g, &recv, &back, &oso, &boso)?;
    sh.get(
        &mut st.back_local[..pairs * rb],
        st.back.slice(..pairs * rb)?,
        me,
    )?;
    let acc = &mut st.acc[..n * h];
    acc.fill(0.0);
    for (p, &t) in st.tok[..pairs].iter().enumerate() {
        let row = &st.back_local[p * rb..(p + 1) * rb];
        for (a, b) in acc[t * h..(t + 1) * h]
            .iter_mut()
            .zip(row.chunks_exact(ELEM))
        {
            *a += bf16_to_f32(u16::from_le_bytes([b[0], b[1]]));
        }
    }
    for (a, b) in acc.iter().zip(st.comb[..n * rb].chunks_exact_mut(ELEM)) {
        b.copy_from_slice(&f32_to_bf16(*a).to_le_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_map_to_distinct_sizes() {
        for (i, &(n, h)) in CASES.iter().enumerate() {
            assert_eq!(case_of(SIZES[i]), Some((n, h)));
        }
        assert_eq!(case_of(12345), None);
    }

    #[test]
    fn splitmix64_known_values() {
        // The reference values of splitmix64 seeded with 0 (Vigna's splitmix64.c).
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(&mut s), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn routing_and_tokens_match_the_c_peer() {
        // Printed by mpi_bench.c's ep_routing / ep_value / bf16_int (copied into a small C program): rank 1, 128 x
        // 1024, 32 experts.
        let (idx, w) = routing(1, 128, 1024, TOPK, 32);
        assert_eq!((idx[0], idx[1], idx[8]), (28, 7, 27));
        let mut h = 0u64;
        for (e, x) in idx.iter().zip(&w) {
            h = h
                .wrapping_mul(31)
                .wrapping_add((*e as u64).wrapping_mul(1_000_003))
                .wrapping_add(x.to_bits() as u64);
        }
        assert_eq!(h, 18_018_248_686_881_800_399);
        let mut v = 0u64;
        for t in 0..128 {
            for c in 0..1024 {
                let x = token_value(1, t, c);
                v = v
                    .wrapping_mul(7)
                    .wrapping_add(x as i64 as u64)
                    .wrapping_add(bf16_int(x) as u64);
            }
        }
        assert_eq!(v, 16_228_484_488_485_431_740);
    }

    #[test]
    fn routings_are_distinct_uniform_experts() {
        let (idx, w) = routing(3, 512, 1024, TOPK, 64);
        for row in idx.chunks(TOPK) {
            let mut r = row.to_vec();
            r.sort_unstable();
            r.dedup();
            assert_eq!(r.len(), TOPK);
            assert!(r.iter().all(|&e| (0..64).contains(&e)));
        }
        assert!(w.iter().all(|&x| (0.0..1.0).contains(&x)));
        // Every expert is chosen (4096 draws over 64 experts).
        let mut seen = [false; 64];
        idx.iter().for_each(|&e| seen[e as usize] = true);
        assert!(seen.iter().all(|&s| s));
        assert_ne!(routing(2, 512, 1024, TOPK, 64).0, idx);
    }

    #[test]
    fn reference_multiplies_each_token() {
        let idx = [0i64, 1, 9, -1, 8, 15, 16, 17];
        assert_eq!(dest_ranks(&idx, 4, 8), [2, 2]);
        assert_eq!(experts_of(&idx, 4), [3, 4]);
        let x = tokens_of(1, 2, 3);
        let e = expected(1, 2, 3, &[2, 0]);
        let v = |b: &[u8], i: usize| bf16_to_f32(u16::from_le_bytes([b[2 * i], b[2 * i + 1]]));
        for i in 0..3 {
            assert_eq!(v(&e, i), 2.0 * v(&x, i));
            assert_eq!(v(&e, 3 + i), 0.0);
        }
    }
}
