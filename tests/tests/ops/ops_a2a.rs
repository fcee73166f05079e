//! The all-to-all ops of xpushmem-ops against references every PE computes on its own: `all_to_all_vdev`,
//! `all_to_all_vdev_2d` (every `major_align` rule, empty experts, heavy skew, 1..64 experts per rank),
//! `all_to_all_vdev_2d_offset` (as the combine after a dispatch, and with gapped, shuffled input offsets) and
//! `nvshmem_all_to_all`, on the world and on concurrent subgroups (contiguous, strided, permuted).
//!
//! Every case is drawn from the seed (`XPUSHMEM_OPS_SEED`, printed on failure); every PE regenerates every other
//! rank's splits and data from it, so the reference needs no communication. Outputs are pre-filled with a
//! sentinel, so rows the op must not write (padding, tails) are checked too.

use crate::ops_common::*;
use xpushmem::{Result, Shmem, SymSlice};
use xpushmem_ops::{
    all_to_all_vdev, all_to_all_vdev_2d, all_to_all_vdev_2d_offset, nvshmem_all_to_all, DType,
    Group,
};
use xpushmem_tests::{assert_success, is_pe_of, pe_test, run_pe, spawn_pes_with, test_name};

const R_MAX: usize = 192;
const COLS_MAX: usize = 3;
const NE_MAX: usize = 64;
const ALIGN_MAX: usize = 16;

/// Symmetric buffers reused by every case (views of different shapes are laid over them).
struct Bufs {
    input: SymSlice<u8>,
    out: SymSlice<u8>,
    splits: SymSlice<u8>,
    oso: SymSlice<u8>,
    cout: SymSlice<u8>,
    coso: SymSlice<u8>,
}

impl Bufs {
    /// Collective over the world; sized for groups of up to `w` ranks.
    fn new(sh: &Shmem, w: usize) -> Result<Bufs> {
        let rowb = COLS_MAX * 8;
        let out_rows = w * R_MAX + NE_MAX * ALIGN_MAX;
        Ok(Bufs {
            input: sh.malloc::<u8>(R_MAX * rowb)?,
            out: sh.malloc::<u8>(out_rows * rowb)?,
            splits: sh.malloc::<u8>(2 * w * NE_MAX * 8)?,
            oso: sh.malloc::<u8>(2 * w * NE_MAX * 8)?,
            cout: sh.malloc::<u8>(out_rows * rowb)?,
            coso: sh.malloc::<u8>(2 * w * NE_MAX * 8)?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Uniform,
    Zeros,
    Sparse,
    Skew,
    EmptyExperts,
    ToRankZero,
}

#[derive(Debug, Clone)]
struct Case {
    seed: u64,
    index: usize,
    salt: u64,
    w: usize,
    ne: usize,
    align: i64,
    dtype: DType,
    /// 0: 1-D data (one element per row); otherwise `[rows, cols]`.
    cols: usize,
    rows: usize,
    mode: Mode,
    /// A rank whose splits come from another stream (the same views, one rank's splits changed).
    twist: Option<usize>,
    /// The generation of the input rows (the same arguments moving other bytes).
    gen: u64,
}

impl Case {
    fn new(seed: u64, tag: u64, index: usize, w: usize) -> Case {
        let mut r = Rng::new(&[seed, tag, index as u64]);
        let ne = match r.below(4) {
            0 => 1,
            1 => r.range(2, 8) as usize,
            2 => r.range(9, 24) as usize,
            _ => r.range(25, NE_MAX as u64) as usize,
        };
        Case {
            seed,
            index,
            salt: r.next(),
            w,
            ne,
            align: r.pick(&[1, 2, 16]),
            dtype: r.pick(&DTYPES),
            cols: r.below(COLS_MAX as u64 + 1) as usize,
            rows: r.range(0, R_MAX as u64) as usize,
            mode: r.pick(&[
                Mode::Uniform,
                Mode::Uniform,
                Mode::Zeros,
                Mode::Sparse,
                Mode::Skew,
                Mode::EmptyExperts,
                Mode::ToRankZero,
            ]),
            twist: None,
            gen: 0,
        }
    }
    /// The seed of the input rows: the case's salt, changed by the generation.
    fn data_salt(&self) -> u64 {
        self.salt ^ self.gen.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
    fn row_bytes(&self) -> usize {
        self.cols.max(1) * self.dtype.size()
    }
    fn shape(&self, rows: usize) -> Vec<usize> {
        if self.cols == 0 {
            vec![rows]
        } else {
            vec![rows, self.cols]
        }
    }
    fn ctx(&self, me: usize) -> String {
        format!(
            "seed={} case={} W={} rank={me} ne={} align={} dtype={} cols={} rows={} mode={:?} (rerun with XPUSHMEM_OPS_SEED={})",
            self.seed, self.index, self.w, self.ne, self.align, self.dtype, self.cols, self.rows, self.mode, self.seed
        )
    }

    /// Rank `rank`'s split vector of `w * ne` entries (`ne = 1` for the 1-D op), summing to at most `rows`.
    /// `expert_of(t)` names the expert of entry `t`; `rank_of(t)` its destination rank.
    fn splits(&self, rank: usize, ne: usize, rank_major: bool) -> Vec<i64> {
        let n = self.w * ne;
        let stream = 1 + u64::from(self.twist == Some(rank));
        let mut r = Rng::new(&[self.salt, rank as u64, ne as u64, stream]);
        let total = if self.mode == Mode::Zeros {
            0
        } else {
            r.range(0, self.rows as u64) as usize
        };
        let expert_of = |t: usize| if rank_major { t % ne } else { t / self.w };
        let rank_of = |t: usize| if rank_major { t / ne } else { t % self.w };
        let allowed: Vec<usize> = match self.mode {
            Mode::EmptyExperts => (0..n)
                .filter(|&t| !Rng::new(&[self.salt, 7, expert_of(t) as u64]).chance(0.5))
                .collect(),
            Mode::ToRankZero => (0..n).filter(|&t| rank_of(t) == 0).collect(),
            Mode::Sparse => {
                let k = r.range(1, 3);
                (0..k).map(|_| r.below(n as u64) as usize).collect()
            }
            _ => (0..n).collect(),
        };
        let mut s = vec![0i64; n];
        if allowed.is_empty() || n == 0 {
            return s;
        }
        let hot = r.pick(&allowed);
        for _ in 0..total {
            let t = if self.mode == Mode::Skew && r.chance(0.9) {
                hot
            } else {
                r.pick(&allowed)
            };
            s[t] += 1;
        }
        s
    }

    fn sentinel(&self) -> u8 {
        0xA5 ^ self.index as u8
    }
}

fn fill(sh: &Shmem, buf: SymSlice<u8>, len: usize, byte: u8) -> Result<()> {
    write(sh, buf, 0, &vec![byte; len])
}

/// `all_to_all_vdev` on one case.
fn vdev_case(sh: &Shmem, g: &Group, b: &Bufs, c: &Case) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let rb = c.row_bytes();
    write(sh, b.input, 0, &data_rows(c.data_salt(), me, c.rows, rb))?;
    let splits = c.splits(me, 1, true);
    write(sh, b.splits, 0, &i64_bytes(&splits))?;
    let out_rows = w * c.rows;
    fill(sh, b.out, out_rows * rb, c.sentinel())?;
    write(sh, b.oso, 0, &i64_bytes(&vec![-1; 2 * w]))?;
    let input = view(b.input, c.dtype, &c.shape(c.rows));
    let out = view(b.out, c.dtype, &c.shape(out_rows));
    let in_splits = view(b.splits, DType::I64, &[w]);
    let oso = view(b.oso, DType::I64, &[2, w]);
    all_to_all_vdev(sh, g, &input, &out, &in_splits, &oso)?;

    let all: Vec<Vec<i64>> = (0..w).map(|r| c.splits(r, 1, true)).collect();
    let row0: Vec<i64> = (0..w).map(|s| all[s][me]).collect();
    let row1 = excl(&row0);
    let got = bytes_i64(&read(sh, b.oso, 0, 16 * w)?);
    assert_eq!(got[..w], row0[..], "vdev row 0 (splits): {}", c.ctx(me));
    assert_eq!(got[w..], row1[..], "vdev row 1 (offsets): {}", c.ctx(me));
    let mut want = vec![c.sentinel(); out_rows * rb];
    for s in 0..w {
        let src = excl(&all[s])[me] as usize;
        let data = data_rows(c.data_salt(), s, c.rows, rb);
        let (d, n) = (row1[s] as usize, row0[s] as usize);
        want[d * rb..(d + n) * rb].copy_from_slice(&data[src * rb..(src + n) * rb]);
    }
    assert!(
        read(sh, b.out, 0, out_rows * rb)? == want,
        "vdev data: {}",
        c.ctx(me)
    );
    assert_eq!(
        bytes_i64(&read(sh, b.splits, 0, 8 * w)?),
        splits,
        "vdev in_splits unchanged: {}",
        c.ctx(me)
    );
    Ok(())
}

/// `all_to_all_vdev_2d` (dispatch), then `all_to_all_vdev_2d_offset` back (combine), on one case.
fn dispatch_combine_case(sh: &Shmem, g: &Group, b: &Bufs, c: &Case) -> Result<()> {
    let (w, me, ne) = (g.size(), g.my_rank().unwrap(), c.ne);
    let n = w * ne;
    let rb = c.row_bytes();
    let align = c.align as usize;
    write(sh, b.input, 0, &data_rows(c.data_salt(), me, c.rows, rb))?;
    let splits = c.splits(me, ne, true);
    write(sh, b.splits, 0, &i64_bytes(&splits))?;
    let out_rows = w * c.rows + ne * align;
    fill(sh, b.out, out_rows * rb, c.sentinel())?;
    write(sh, b.oso, 0, &i64_bytes(&vec![-1; 2 * n]))?;
    let input = view(b.input, c.dtype, &c.shape(c.rows));
    let out = view(b.out, c.dtype, &c.shape(out_rows));
    let in_splits = view(b.splits, DType::I64, &[n]);
    let oso = view(b.oso, DType::I64, &[2, n]);
    // align 1 sometimes goes as None: PyTorch's default.
    let major_align = if c.align == 1 && c.index % 2 == 0 {
        None
    } else {
        Some(c.align)
    };
    all_to_all_vdev_2d(sh, g, &input, &out, &in_splits, &oso, major_align)?;

    // Reference: expert-major, each expert's block aligned, at least `align` rows.
    let all: Vec<Vec<i64>> = (0..w).map(|r| c.splits(r, ne, true)).collect();
    let (row0, row1, want) = reference_2d(
        &all,
        me,
        ne,
        align,
        c.data_salt(),
        c.rows,
        rb,
        out_rows,
        c.sentinel(),
    );
    let got = bytes_i64(&read(sh, b.oso, 0, 16 * n)?);
    assert_eq!(got[..n], row0[..], "2d row 0: {}", c.ctx(me));
    assert_eq!(
        got[n..],
        row1[..],
        "2d row 1 (aligned offsets): {}",
        c.ctx(me)
    );
    assert!(
        read(sh, b.out, 0, out_rows * rb)? == want,
        "2d data (padding untouched): {}",
        c.ctx(me)
    );
    assert_eq!(
        bytes_i64(&read(sh, b.splits, 0, 8 * n)?),
        splits,
        "2d in_splits unchanged: {}",
        c.ctx(me)
    );

    // Combine back: the dispatch output and its splits/offsets are the input.
    fill(sh, b.cout, c.rows * rb, c.sentinel() ^ 0xFF)?;
    write(sh, b.coso, 0, &i64_bytes(&vec![-1; 2 * n]))?;
    let cout = view(b.cout, c.dtype, &c.shape(c.rows));
    let coso = view(b.coso, DType::I64, &[2, n]);
    all_to_all_vdev_2d_offset(sh, g, &out, &cout, &oso, &coso)?;
    let sent = splits.iter().sum::<i64>() as usize;
    let mut want = data_rows(c.data_salt(), me, c.rows, rb);
    want[sent * rb..].fill(c.sentinel() ^ 0xFF);
    assert!(
        read(sh, b.cout, 0, c.rows * rb)? == want,
        "combine round trip: {}",
        c.ctx(me)
    );
    let got = bytes_i64(&read(sh, b.coso, 0, 16 * n)?);
    assert_eq!(
        got[..n],
        splits[..],
        "combine row 0 == dispatch in_splits: {}",
        c.ctx(me)
    );
    assert_eq!(got[n..], excl(&splits)[..], "combine row 1: {}", c.ctx(me));
    assert_eq!(
        bytes_i64(&read(sh, b.oso, 0, 16 * n)?),
        [row0, row1].concat(),
        "combine input unchanged: {}",
        c.ctx(me)
    );
    Ok(())
}

/// Rank `rank`'s `[2, ne * W]` in_splits_offsets of the stand-alone combine: chunks in a shuffled order with gaps.
fn gapped(c: &Case, rank: usize) -> (Vec<i64>, Vec<i64>) {
    let n = c.w * c.ne;
    let counts = c.splits(rank, c.ne, false);
    let mut r = Rng::new(&[c.salt, rank as u64, 2]);
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, r.below(i as u64 + 1) as usize);
    }
    let mut slack = c.rows - counts.iter().sum::<i64>() as usize;
    let mut offs = vec![0i64; n];
    let mut cursor = 0usize;
    for &i in &order {
        let gap = r.below(slack.min(3) as u64 + 1) as usize;
        slack -= gap;
        cursor += gap;
        offs[i] = cursor as i64;
        cursor += counts[i] as usize;
    }
    (counts, offs)
}

/// `all_to_all_vdev_2d_offset` alone, with gapped and shuffled input chunks.
fn offset_case(sh: &Shmem, g: &Group, b: &Bufs, c: &Case) -> Result<()> {
    let (w, me, ne) = (g.size(), g.my_rank().unwrap(), c.ne);
    let n = w * ne;
    let rb = c.row_bytes();
    write(sh, b.input, 0, &data_rows(c.data_salt(), me, c.rows, rb))?;
    let (counts, offs) = gapped(c, me);
    write(
        sh,
        b.splits,
        0,
        &i64_bytes(&[counts.clone(), offs.clone()].concat()),
    )?;
    let out_rows = w * c.rows;
    fill(sh, b.out, out_rows * rb, c.sentinel())?;
    write(sh, b.oso, 0, &i64_bytes(&vec![-1; 2 * n]))?;
    let input = view(b.input, c.dtype, &c.shape(c.rows));
    let out = view(b.out, c.dtype, &c.shape(out_rows));
    let iso = view(b.splits, DType::I64, &[2, n]);
    let oso = view(b.oso, DType::I64, &[2, n]);
    all_to_all_vdev_2d_offset(sh, g, &input, &out, &iso, &oso)?;

    let mut row0 = vec![0i64; n];
    let mut want = Vec::new();
    for s in 0..w {
        let (cs, os) = gapped(c, s);
        let data = data_rows(c.data_salt(), s, c.rows, rb);
        for e in 0..ne {
            let (cnt, off) = (cs[e * w + me] as usize, os[e * w + me] as usize);
            row0[s * ne + e] = cnt as i64;
            want.extend_from_slice(&data[off * rb..(off + cnt) * rb]);
        }
    }
    want.resize(out_rows * rb, c.sentinel());
    let got = bytes_i64(&read(sh, b.oso, 0, 16 * n)?);
    assert_eq!(got[..n], row0[..], "2d_offset row 0: {}", c.ctx(me));
    assert_eq!(got[n..], excl(&row0)[..], "2d_offset row 1: {}", c.ctx(me));
    assert!(
        read(sh, b.out, 0, out_rows * rb)? == want,
        "2d_offset data: {}",
        c.ctx(me)
    );
    assert_eq!(
        bytes_i64(&read(sh, b.splits, 0, 16 * n)?),
        [counts, offs].concat(),
        "2d_offset in_splits_offsets unchanged: {}",
        c.ctx(me)
    );
    Ok(())
}

/// `nvshmem_all_to_all` on one case (`k` elements per rank).
fn equal_case(sh: &Shmem, g: &Group, b: &Bufs, c: &Case) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let k = c.rows % 11;
    let esz = c.dtype.size();
    let chunk = k * esz;
    write(sh, b.input, 0, &data_rows(c.data_salt(), me, 1, w * chunk))?;
    fill(sh, b.out, w * chunk + 64, c.sentinel())?;
    let input = view(b.input, c.dtype, &[w * k]);
    let out = view(b.out, c.dtype, &[w * k]);
    nvshmem_all_to_all(sh, g, &input, &out)?;
    let mut want = Vec::new();
    for s in 0..w {
        want.extend_from_slice(
            &data_rows(c.data_salt(), s, 1, w * chunk)[me * chunk..(me + 1) * chunk],
        );
    }
    want.resize(w * chunk + 64, c.sentinel());
    assert!(
        read(sh, b.out, 0, w * chunk + 64)? == want,
        "nvshmem_all_to_all: {}",
        c.ctx(me)
    );
    Ok(())
}

fn cases_for(w: usize) -> usize {
    match w {
        1 | 2 => 400,
        3 | 4 => 250,
        _ => 150,
    }
}

fn run_cases(sh: &Shmem, g: &Group, b: &Bufs, tag: u64, cases: usize) -> Result<()> {
    let seed = seed();
    for i in 0..cases {
        let c = Case::new(seed, tag, i, g.size());
        vdev_case(sh, g, b, &c)?;
        dispatch_combine_case(sh, g, b, &c)?;
        offset_case(sh, g, b, &c)?;
        equal_case(sh, g, b, &c)?;
    }
    Ok(())
}

// The same calls again and again (a call with the arguments of the last one reuses its checks, split messages and
// receive plan: every repeat must still move its own input rows, new at each call, and rewrite
// out_splits_offsets, both reset before each call), then the same views with one rank's splits changed (every
// rank must see it), then back, then the other way round.
pe_test!(
    a2a_repeated_and_changed_calls,
    shm [2, 3],
    |sh| {
        let g = Group::world(sh)?;
        let b = Bufs::new(sh, sh.n_pes())?;
        let seed = seed();
        for i in 0..40 {
            let c = Case::new(seed, 900, i, g.size());
            let mut t = c.clone();
            t.twist = Some(i % g.size());
            let calls = [&c, &c, &c, &t, &c, &t, &t, &c];
            let calls: Vec<Case> = (0..).zip(calls).map(|(k, x)| Case { gen: k, ..x.clone() }).collect();
            for x in &calls {
                vdev_case(sh, &g, &b, x)?;
                dispatch_combine_case(sh, &g, &b, x)?;
            }
            for x in &calls {
                offset_case(sh, &g, &b, x)?;
            }
        }
        Ok(())
    }
);

pe_test!(
    a2a_random_world,
    shm [1, 2, 3, 4, 8],
    |sh| {
        let g = Group::world(sh)?;
        let b = Bufs::new(sh, sh.n_pes())?;
        run_cases(sh, &g, &b, 0, cases_for(sh.n_pes()))
    }
);

// Subgroups run concurrently on shared buffer offsets: contiguous halves (PyTorch's `"ep"` mesh dimension),
// then PEs of equal parity in descending order (group rank != global PE), then a permuted world.
pe_test!(
    a2a_concurrent_subgroups,
    shm [4, 8],
    |sh| {
    let (n, me) = (sh.n_pes(), sh.my_pe());
    let b = Bufs::new(sh, n)?;
    let halves = Group::split_contiguous(sh, n / 2)?;
    assert_eq!(halves.my_rank(), Some(me % (n / 2)));
    run_cases(sh, &halves, &b, 100 + (me / (n / 2)) as u64, 40)?;
    let parity: Vec<usize> = (0..n).rev().filter(|p| p % 2 == me % 2).collect();
    let strided = Group::new(sh, &parity)?;
    assert_eq!(strided.global(strided.my_rank().unwrap())?, me);
    run_cases(sh, &strided, &b, 200 + (me % 2) as u64, 40)?;
    let perm: Vec<usize> = (0..n).map(|i| (i * 3 + 1) % n).collect();
    let permuted = Group::new(sh, &perm)?;
    run_cases(sh, &permuted, &b, 300, 20)?;
    // Groups from runtime teams: the rows of a 2-D split (the "ep" halves again), and the even PEs of a strided
    // split (odd PEs take part in the creation without joining).
    let (row, col) = sh.team_split_2d(&sh.team_world(), n / 2, None, None)?;
    let from_row = Group::from_team(sh, Some(&row))?;
    assert_eq!(from_row.pes(), halves.pes());
    run_cases(sh, &from_row, &b, 500 + (me / (n / 2)) as u64, 10)?;
    let evens = sh.team_split_strided(&sh.team_world(), 0, 2, n / 2, None)?;
    let from_evens = Group::from_team(sh, evens.as_ref())?;
    if me % 2 == 0 {
        assert_eq!(from_evens.my_rank(), Some(me / 2));
        run_cases(sh, &from_evens, &b, 600, 10)?;
    } else {
        assert_eq!(from_evens.my_rank(), None);
    }
    sh.barrier_all()?;
    for g in [from_evens, from_row, permuted, strided, halves] {
        g.free(sh)?;
    }
    if let Some(t) = evens {
        sh.team_destroy(t)?;
    }
    sh.team_destroy(col)?;
    sh.team_destroy(row)?;
    Ok(())
});

/// Past NVSHMEM's limits: W = 33 > 32 (dispatch) > 16 (combine), experts per rank 17 > 16 and 33 > 32.
fn beyond_caps(sh: &Shmem) -> Result<()> {
    let g = Group::world(sh)?;
    let b = Bufs::new(sh, sh.n_pes())?;
    let seed = seed();
    for i in 0..4 {
        let mut c = Case::new(seed, 400, i, g.size());
        c.ne = [17, 33, 1, 40][i];
        c.rows = 64;
        vdev_case(sh, &g, &b, &c)?;
        dispatch_combine_case(sh, &g, &b, &c)?;
        offset_case(sh, &g, &b, &c)?;
    }
    Ok(())
}

pe_test!(a2a_beyond_nvshmem_caps, shm[33], |sh| { beyond_caps(sh) });

/// Row `i` of what group rank `from` sends to rank `to` in an eager-boundary case (int64 rows): distinct per
/// (sender, destination, row, case), so a chunk copied to the wrong place or from the wrong message shows.
fn tagged(case: usize, from: usize, to: usize, i: usize) -> i64 {
    ((case as i64) << 48) | ((from as i64) << 36) | ((to as i64) << 24) | i as i64
}

/// The eager path at every size boundary: chunks of 0, 1, the largest eager size, one row more and far more,
/// uniform and mixed (some destinations eager, some read from the sender, so the completion exchange runs),
/// through `all_to_all_vdev`, `all_to_all_vdev_2d` (2 experts) and `nvshmem_all_to_all`, checked against the
/// tagged rows every rank computes on its own. The eager limit is the team's eager capacity or
/// `XPUSHMEM_OPS_EAGER_SIZE`, whichever is smaller.
fn eager_boundaries(sh: &Shmem) -> Result<()> {
    let g = Group::world(sh)?;
    let (w, me) = (g.size(), sh.my_pe());
    // One PE exchanges nothing (its capacity is unbounded): the same sizes as two.
    let cap = sh.team_eager_capacity(&sh.team_world()).min(4096);
    let limit = sh.config().ops_eager_size.map_or(cap, |l| l.min(cap));
    // Rows of 8 bytes; a split message carries a flags word and (count, source row) per expert before the rows.
    let edge = |ne: usize| (limit.min(cap.saturating_sub(8 + 16 * ne))) / 8;
    let max_rows = 2 * edge(1) + 8;
    let input = sh.malloc::<u8>(w * max_rows * 8)?;
    let out = sh.malloc::<u8>(w * max_rows * 8 + 64)?;
    let splits = sh.malloc::<u8>(2 * w * 2 * 8)?;
    let oso = sh.malloc::<u8>(2 * w * 2 * 8)?;
    let mut case = 0;
    for ne in [1usize, 2] {
        let e = edge(ne);
        let mut sizes = vec![0, 1, e.saturating_sub(1), e, e + 1, 2 * e + 3];
        sizes.dedup();
        for &k in &sizes {
            for mixed in [false, true] {
                case += 1;
                // Rows from rank r to rank p (split over ne experts: the first takes the larger half).
                let rows = |r: usize, p: usize| k + usize::from(mixed && (r + p) % 2 == 1);
                let per_expert = |r: usize, p: usize, x: usize| {
                    let t = rows(r, p);
                    if x == 0 {
                        t - t / ne * (ne - 1)
                    } else {
                        t / ne
                    }
                };
                let mut data = Vec::new();
                let mut counts = Vec::new();
                for p in 0..w {
                    for x in 0..ne {
                        counts.push(per_expert(me, p, x) as i64);
                    }
                    for i in 0..rows(me, p) {
                        data.push(tagged(case, me, p, i));
                    }
                }
                write(sh, input, 0, &i64_bytes(&data))?;
                write(sh, splits, 0, &i64_bytes(&counts))?;
                write(sh, out, 0, &vec![0xA5; w * max_rows * 8 + 64])?;
                let inv = view(input, DType::I64, &[data.len().max(1)]);
                let outv = view(out, DType::I64, &[w * max_rows]);
                let sv = view(splits, DType::I64, &[w * ne]);
                let ov = view(oso, DType::I64, &[2, w * ne]);
                let ctx =
                    format!("case {case}: ne {ne}, k {k}, mixed {mixed}, limit {limit}, PE {me}");
                // Expected output: expert-major blocks of source-major chunks; with 2 experts (major_align 1) an
                // expert block reserves at least one row even when it receives nothing.
                let mut want_counts = Vec::new();
                let mut want_offs = Vec::new();
                let mut chunks = Vec::new();
                let mut start = 0usize;
                for x in 0..ne {
                    let mut acc = start;
                    for s in 0..w {
                        let before: usize = (0..x).map(|y| per_expert(s, me, y)).sum();
                        let c = per_expert(s, me, x);
                        want_counts.push(c as i64);
                        want_offs.push(acc as i64);
                        let rows: Vec<i64> = (before..before + c)
                            .map(|i| tagged(case, s, me, i))
                            .collect();
                        chunks.push((acc, rows));
                        acc += c;
                    }
                    let total = acc - start;
                    start += if ne == 1 { total } else { total.max(1) };
                }
                if ne == 1 {
                    all_to_all_vdev(sh, &g, &inv, &outv, &sv, &ov)?;
                } else {
                    all_to_all_vdev_2d(sh, &g, &inv, &outv, &sv, &ov, None)?;
                }
                let image = read(sh, out, 0, w * max_rows * 8 + 64)?;
                let mut written = vec![false; w * max_rows + 8];
                for (at, rows) in chunks {
                    let got = bytes_i64(&image[at * 8..(at + rows.len()) * 8]);
                    assert_eq!(got, rows, "rows at {at}: {ctx}");
                    written[at..at + rows.len()]
                        .iter_mut()
                        .for_each(|b| *b = true);
                }
                for (r, &was) in written.iter().enumerate() {
                    if !was {
                        assert!(
                            image[r * 8..r * 8 + 8].iter().all(|&b| b == 0xA5),
                            "row {r} must not be written: {ctx}"
                        );
                    }
                }
                let o = bytes_i64(&read(sh, oso, 0, 2 * w * ne * 8)?);
                assert_eq!(
                    o,
                    [want_counts, want_offs].concat(),
                    "out_splits_offsets: {ctx}"
                );
                g.barrier(sh)?;
            }
            if ne == 1 {
                // The equal split: k rows of 8 bytes to every rank.
                case += 1;
                let data: Vec<i64> = (0..w)
                    .flat_map(|p| (0..k).map(move |i| tagged(case, me, p, i)))
                    .collect();
                write(sh, input, 0, &i64_bytes(&data))?;
                let n = (w * k).max(w);
                let data_pad: Vec<i64> = if k == 0 { vec![0; w] } else { data };
                write(sh, input, 0, &i64_bytes(&data_pad))?;
                nvshmem_all_to_all(
                    sh,
                    &g,
                    &view(input, DType::I64, &[n]),
                    &view(out, DType::I64, &[n]),
                )?;
                let got = bytes_i64(&read(sh, out, 0, n * 8)?);
                let want: Vec<i64> = if k == 0 {
                    vec![0; w]
                } else {
                    (0..w)
                        .flat_map(|s| (0..k).map(move |i| tagged(case, s, me, i)))
                        .collect()
                };
                assert_eq!(got, want, "nvshmem_all_to_all: case {case}, k {k}, PE {me}");
                g.barrier(sh)?;
            }
        }
    }
    Ok(())
}

pe_test!(
    a2a_eager_boundaries,
    shm [1, 2, 4],
    |sh| {
    eager_boundaries(sh)
});

/// The same boundaries with a small configured eager limit, and with the argument checks off (the completion
/// exchange is skipped when every chunk went eagerly).
#[test]
fn a2a_eager_boundaries_configured_2pe_4pe() {
    let name = test_name(module_path!(), "a2a_eager_boundaries_configured_2pe_4pe");
    if is_pe_of(&name) {
        run_pe(eager_boundaries);
    }
    for (n, env) in [
        (
            2,
            [
                ("XPUSHMEM_OPS_EAGER_SIZE", "100"),
                ("XPUSHMEM_CHECK_SYMMETRY", "1"),
            ],
        ),
        (
            4,
            [
                ("XPUSHMEM_OPS_EAGER_SIZE", "0"),
                ("XPUSHMEM_CHECK_SYMMETRY", "1"),
            ],
        ),
        (
            2,
            [
                ("XPUSHMEM_OPS_EAGER_SIZE", "auto"),
                ("XPUSHMEM_CHECK_SYMMETRY", "0"),
            ],
        ),
        (
            4,
            [
                ("XPUSHMEM_OPS_EAGER_SIZE", "40"),
                ("XPUSHMEM_CHECK_SYMMETRY", "0"),
            ],
        ),
    ] {
        let out = spawn_pes_with(&name, n, &env);
        assert_success(&name, n, &out);
    }
}
