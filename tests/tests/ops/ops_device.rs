//! The ops' device path (`xpushmem_ops::DeviceOps`: op kernels enqueued on a command list, no host waits) on
//! ze-emu device heaps at 2, 3 and 4 PEs: randomized seeded cases of every op and dtype, each checked against a
//! reference every PE computes on its own AND against the host path run on identical inputs (outputs and
//! `out_splits_offsets` byte for byte); the error cases give the host path's error (same variant and message) on
//! every rank; ops and a user kernel back to back on one list (immediate and regular) without host waits; and the
//! committed prebuilt op kernels match their source.

use crate::ops_common::*;
use xpushmem::device::queue::Queue;
use xpushmem::{Error, KernelArg, Result, Shmem, SymSlice};
use xpushmem_ops::{
    all_to_all_vdev, all_to_all_vdev_2d, all_to_all_vdev_2d_offset, multi_root_tile_reduce,
    nvshmem_all_to_all, nvshmem_broadcast, tile_reduce, DType, DeviceOps, Group, OpHandle,
    TensorView,
};
use xpushmem_tests::device_build::{compile_cl, root, run_tool};
use xpushmem_tests::pe_test;

const R_MAX: usize = 96;
const COLS_MAX: usize = 3;
const NE_MAX: usize = 24;
const ALIGN_MAX: usize = 16;

/// Run a device op to completion on the queue: enqueue, run the list (regular lists are executed here), wait.
fn run(sh: &Shmem, q: &Queue, h: Result<OpHandle>) -> Result<()> {
    let h = h?;
    dev(sh).submit_and_wait(q)?;
    h.wait(sh)
}

fn dev(sh: &Shmem) -> xpushmem::Device<'_> {
    sh.device().expect("a device heap")
}

struct Bufs {
    input: SymSlice<u8>,
    out_h: SymSlice<u8>,
    out_d: SymSlice<u8>,
    splits: SymSlice<u8>,
    oso_h: SymSlice<u8>,
    oso_d: SymSlice<u8>,
    back: SymSlice<u8>,
    boso: SymSlice<u8>,
}

impl Bufs {
    fn new(sh: &Shmem) -> Result<Bufs> {
        let w = sh.n_pes();
        let rowb = COLS_MAX * 8;
        let out_rows = w * R_MAX + NE_MAX * ALIGN_MAX;
        let nso = 2 * w * NE_MAX * 8;
        Ok(Bufs {
            input: sh.malloc::<u8>(R_MAX * rowb)?,
            out_h: sh.malloc::<u8>(out_rows * rowb)?,
            out_d: sh.malloc::<u8>(out_rows * rowb)?,
            splits: sh.malloc::<u8>(nso)?,
            oso_h: sh.malloc::<u8>(nso)?,
            oso_d: sh.malloc::<u8>(nso)?,
            back: sh.malloc::<u8>(R_MAX * rowb)?,
            boso: sh.malloc::<u8>(nso)?,
        })
    }
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
    cols: usize,
    rows: usize,
    sparse: bool,
}

impl Case {
    fn new(seed: u64, index: usize, w: usize) -> Case {
        let mut r = Rng::new(&[seed, 77, index as u64]);
        Case {
            seed,
            index,
            salt: r.next(),
            w,
            ne: r.pick(&[1, 2, 3, 8, 17, NE_MAX]),
            align: r.pick(&[1, 2, 16]),
            dtype: DTYPES[index % DTYPES.len()],
            cols: r.below(COLS_MAX as u64 + 1) as usize,
            rows: r.range(0, R_MAX as u64) as usize,
            sparse: r.chance(0.3),
        }
    }
    fn rb(&self) -> usize {
        self.cols.max(1) * self.dtype.size()
    }
    fn shape(&self, rows: usize) -> Vec<usize> {
        if self.cols == 0 {
            vec![rows]
        } else {
            vec![rows, self.cols]
        }
    }
    /// Rank `rank`'s `n` splits summing to at most `rows`.
    fn splits(&self, rank: usize, n: usize) -> Vec<i64> {
        let mut r = Rng::new(&[self.salt, rank as u64, n as u64]);
        let total = r.range(0, self.rows as u64);
        let mut s = vec![0i64; n];
        for _ in 0..total {
            let t = if self.sparse {
                r.below(2.min(n as u64)) as usize
            } else {
                r.below(n as u64) as usize
            };
            s[t] += 1;
        }
        s
    }
    fn ctx(&self, me: usize) -> String {
        format!(
            "seed={} case={} W={} rank={me} ne={} align={} dtype={} cols={} rows={} (XPUSHMEM_OPS_SEED={})",
            self.seed,
            self.index,
            self.w,
            self.ne,
            self.align,
            self.dtype,
            self.cols,
            self.rows,
            self.seed
        )
    }
}

fn fill(sh: &Shmem, buf: SymSlice<u8>, len: usize, byte: u8) -> Result<()> {
    write(sh, buf, 0, &vec![byte; len])
}

/// Both paths' outputs (data and splits/offsets) are equal and equal the reference.
#[allow(clippy::too_many_arguments)]
fn compare(
    sh: &Shmem,
    b: &Bufs,
    data_len: usize,
    n: usize,
    want: &[u8],
    row0: &[i64],
    row1: &[i64],
    what: &str,
) -> Result<()> {
    let (dh, dd) = (
        read(sh, b.out_h, 0, data_len)?,
        read(sh, b.out_d, 0, data_len)?,
    );
    assert!(dd == want, "{what}: device data != reference");
    assert!(dh == dd, "{what}: host and device data differ");
    let (oh, od) = (
        bytes_i64(&read(sh, b.oso_h, 0, 16 * n)?),
        bytes_i64(&read(sh, b.oso_d, 0, 16 * n)?),
    );
    assert_eq!(od[..n], row0[..], "{what}: device row 0");
    assert_eq!(od[n..], row1[..], "{what}: device row 1");
    assert_eq!(oh, od, "{what}: host and device out_splits_offsets differ");
    Ok(())
}

fn vdev_case(sh: &Shmem, ops: &DeviceOps, q: &Queue, g: &Group, b: &Bufs, c: &Case) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let rb = c.rb();
    write(sh, b.input, 0, &data_rows(c.salt, me, c.rows, rb))?;
    write(sh, b.splits, 0, &i64_bytes(&c.splits(me, w)))?;
    let out_rows = w * c.rows;
    for (o, s) in [(b.out_h, b.oso_h), (b.out_d, b.oso_d)] {
        fill(sh, o, out_rows * rb, 0xA5)?;
        write(sh, s, 0, &i64_bytes(&vec![-1; 2 * w]))?;
    }
    let input = view(b.input, c.dtype, &c.shape(c.rows));
    let sp = view(b.splits, DType::I64, &[w]);
    let v = |o, s| {
        (
            view(o, c.dtype, &c.shape(out_rows)),
            view(s, DType::I64, &[2, w]),
        )
    };
    let (oh, sh_) = v(b.out_h, b.oso_h);
    let (od, sd) = v(b.out_d, b.oso_d);
    all_to_all_vdev(sh, g, &input, &oh, &sp, &sh_)?;
    run(
        sh,
        q,
        ops.all_to_all_vdev(sh, q.list(), g, &input, &od, &sp, &sd),
    )?;
    let all: Vec<Vec<i64>> = (0..w).map(|r| c.splits(r, w)).collect();
    let row0: Vec<i64> = (0..w).map(|s| all[s][me]).collect();
    let row1 = excl(&row0);
    let mut want = vec![0xA5; out_rows * rb];
    for s in 0..w {
        let src = excl(&all[s])[me] as usize;
        let data = data_rows(c.salt, s, c.rows, rb);
        let (d, n) = (row1[s] as usize, row0[s] as usize);
        want[d * rb..(d + n) * rb].copy_from_slice(&data[src * rb..(src + n) * rb]);
    }
    compare(
        sh,
        b,
        out_rows * rb,
        w,
        &want,
        &row0,
        &row1,
        &format!("vdev {}", c.ctx(me)),
    )
}

/// Dispatch (`_2d`) on both paths, then the device combine (`_2d_offset`) back.
fn dispatch_combine_case(
    sh: &Shmem,
    ops: &DeviceOps,
    q: &Queue,
    g: &Group,
    b: &Bufs,
    c: &Case,
) -> Result<()> {
    let (w, me, ne) = (g.size(), g.my_rank().unwrap(), c.ne);
    let n = w * ne;
    let rb = c.rb();
    let align = c.align as usize;
    write(sh, b.input, 0, &data_rows(c.salt, me, c.rows, rb))?;
    let splits = c.splits(me, n);
    write(sh, b.splits, 0, &i64_bytes(&splits))?;
    let out_rows = w * c.rows + ne * align;
    for (o, s) in [(b.out_h, b.oso_h), (b.out_d, b.oso_d)] {
        fill(sh, o, out_rows * rb, 0x5A)?;
        write(sh, s, 0, &i64_bytes(&vec![-1; 2 * n]))?;
    }
    let input = view(b.input, c.dtype, &c.shape(c.rows));
    let sp = view(b.splits, DType::I64, &[n]);
    let oh = view(b.out_h, c.dtype, &c.shape(out_rows));
    let od = view(b.out_d, c.dtype, &c.shape(out_rows));
    let soh = view(b.oso_h, DType::I64, &[2, n]);
    let sod = view(b.oso_d, DType::I64, &[2, n]);
    let ma = if c.align == 1 && c.index % 2 == 0 {
        None
    } else {
        Some(c.align)
    };
    all_to_all_vdev_2d(sh, g, &input, &oh, &sp, &soh, ma)?;
    run(
        sh,
        q,
        ops.all_to_all_vdev_2d(sh, q.list(), g, &input, &od, &sp, &sod, ma),
    )?;
    let all: Vec<Vec<i64>> = (0..w).map(|r| c.splits(r, n)).collect();
    let (row0, row1, want) = reference_2d(&all, me, ne, align, c.salt, c.rows, rb, out_rows, 0x5A);
    compare(
        sh,
        b,
        out_rows * rb,
        n,
        &want,
        &row0,
        &row1,
        &format!("2d {}", c.ctx(me)),
    )?;

    // Combine back on the device: every rank gets its input rows back, row 0 = its dispatch splits.
    fill(sh, b.back, c.rows * rb, 0x3C)?;
    write(sh, b.boso, 0, &i64_bytes(&vec![-1; 2 * n]))?;
    let back = view(b.back, c.dtype, &c.shape(c.rows));
    let boso = view(b.boso, DType::I64, &[2, n]);
    run(
        sh,
        q,
        ops.all_to_all_vdev_2d_offset(sh, q.list(), g, &od, &back, &sod, &boso),
    )?;
    let sent = splits.iter().sum::<i64>() as usize;
    let mut want = data_rows(c.salt, me, c.rows, rb);
    want[sent * rb..].fill(0x3C);
    assert!(
        read(sh, b.back, 0, c.rows * rb)? == want,
        "combine round trip: {}",
        c.ctx(me)
    );
    let got = bytes_i64(&read(sh, b.boso, 0, 16 * n)?);
    assert_eq!(got[..n], splits[..], "combine row 0: {}", c.ctx(me));
    assert_eq!(got[n..], excl(&splits)[..], "combine row 1: {}", c.ctx(me));
    Ok(())
}

/// `_2d_offset` alone, with shuffled input chunks and gaps, on both paths.
fn offset_case(
    sh: &Shmem,
    ops: &DeviceOps,
    q: &Queue,
    g: &Group,
    b: &Bufs,
    c: &Case,
) -> Result<()> {
    let (w, me, ne) = (g.size(), g.my_rank().unwrap(), c.ne);
    let n = w * ne;
    let rb = c.rb();
    let gapped = |rank: usize| -> (Vec<i64>, Vec<i64>) {
        let counts = c.splits(rank, n);
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
    };
    write(sh, b.input, 0, &data_rows(c.salt, me, c.rows, rb))?;
    let (counts, offs) = gapped(me);
    write(sh, b.splits, 0, &i64_bytes(&[counts, offs].concat()))?;
    let out_rows = w * c.rows;
    for (o, s) in [(b.out_h, b.oso_h), (b.out_d, b.oso_d)] {
        fill(sh, o, out_rows * rb, 0x77)?;
        write(sh, s, 0, &i64_bytes(&vec![-1; 2 * n]))?;
    }
    let input = view(b.input, c.dtype, &c.shape(c.rows));
    let iso = view(b.splits, DType::I64, &[2, n]);
    let oh = view(b.out_h, c.dtype, &c.shape(out_rows));
    let od = view(b.out_d, c.dtype, &c.shape(out_rows));
    let soh = view(b.oso_h, DType::I64, &[2, n]);
    let sod = view(b.oso_d, DType::I64, &[2, n]);
    all_to_all_vdev_2d_offset(sh, g, &input, &oh, &iso, &soh)?;
    run(
        sh,
        q,
        ops.all_to_all_vdev_2d_offset(sh, q.list(), g, &input, &od, &iso, &sod),
    )?;
    let mut row0 = vec![0i64; n];
    let mut want = Vec::new();
    for s in 0..w {
        let (cs, os) = gapped(s);
        let data = data_rows(c.salt, s, c.rows, rb);
        for e in 0..ne {
            let (cnt, off) = (cs[e * w + me] as usize, os[e * w + me] as usize);
            row0[s * ne + e] = cnt as i64;
            want.extend_from_slice(&data[off * rb..(off + cnt) * rb]);
        }
    }
    want.resize(out_rows * rb, 0x77);
    compare(
        sh,
        b,
        out_rows * rb,
        n,
        &want,
        &row0,
        &excl(&row0),
        &format!("2d_offset {}", c.ctx(me)),
    )
}

/// `nvshmem_all_to_all` (k elements per rank) on both paths.
fn equal_case(sh: &Shmem, ops: &DeviceOps, q: &Queue, g: &Group, b: &Bufs, c: &Case) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let k = c.rows % 11;
    let chunk = k * c.dtype.size();
    write(sh, b.input, 0, &data_rows(c.salt, me, 1, w * chunk))?;
    for o in [b.out_h, b.out_d] {
        fill(sh, o, w * chunk + 64, 0x11)?;
    }
    let input = view(b.input, c.dtype, &[w * k]);
    nvshmem_all_to_all(sh, g, &input, &view(b.out_h, c.dtype, &[w * k]))?;
    run(
        sh,
        q,
        ops.nvshmem_all_to_all(sh, q.list(), g, &input, &view(b.out_d, c.dtype, &[w * k])),
    )?;
    let mut want = Vec::new();
    for s in 0..w {
        want.extend_from_slice(&data_rows(c.salt, s, 1, w * chunk)[me * chunk..(me + 1) * chunk]);
    }
    want.resize(w * chunk + 64, 0x11);
    let (h, d) = (
        read(sh, b.out_h, 0, w * chunk + 64)?,
        read(sh, b.out_d, 0, w * chunk + 64)?,
    );
    assert!(d == want, "nvshmem_all_to_all device: {}", c.ctx(me));
    assert!(h == d, "nvshmem_all_to_all host == device: {}", c.ctx(me));
    Ok(())
}

fn setup(sh: &Shmem) -> Result<(DeviceOps, Queue)> {
    let ops = DeviceOps::new(sh)?;
    let q = dev(sh).create_queue(true)?;
    Ok((ops, q))
}

fn a2a_cases(sh: &Shmem, cases: usize) -> Result<()> {
    let (ops, q) = setup(sh)?;
    let g = Group::world(sh)?;
    let b = Bufs::new(sh)?;
    for i in 0..cases {
        let c = Case::new(seed(), i, g.size());
        vdev_case(sh, &ops, &q, &g, &b, &c)?;
        dispatch_combine_case(sh, &ops, &q, &g, &b, &c)?;
        offset_case(sh, &ops, &q, &g, &b, &c)?;
        equal_case(sh, &ops, &q, &g, &b, &c)?;
    }
    // A sub-group (PEs of equal parity, descending): group ranks are not PEs, and the groups run concurrently.
    if sh.n_pes() >= 3 {
        let me = sh.my_pe();
        let pes: Vec<usize> = (0..sh.n_pes()).rev().filter(|p| p % 2 == me % 2).collect();
        let sub = Group::new(sh, &pes)?;
        for i in 0..cases / 3 {
            let c = Case::new(seed() ^ 0x5b, i, sub.size());
            vdev_case(sh, &ops, &q, &sub, &b, &c)?;
            dispatch_combine_case(sh, &ops, &q, &sub, &b, &c)?;
        }
        sh.barrier_all()?;
        sub.free(sh)?;
    }
    Ok(())
}

pe_test!(
    a2a_random,
    dev [1, 2, 3, 4],
    |sh| {
    a2a_cases(sh, 18)
});

// ---- tiles, broadcast, point-to-point ----------------------------------------------------------------------

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
const N: usize = 24;

/// An `n x n` matrix of rank `rank`'s moderate random values (`[-8, 8)`, rounded to the dtype).
fn matrix(salt: u64, rank: usize, dt: DType) -> Vec<u8> {
    let mut r = Rng::new(&[salt, rank as u64, 9]);
    let mut v = vec![0u8; N * N * dt.size()];
    for e in v.chunks_exact_mut(dt.size()) {
        let x = (r.next() >> 11) as f64 / (1u64 << 53) as f64 * 16.0 - 8.0;
        dt.store_f32(x as f32, e);
    }
    v
}

/// A random `rows x cols` tile of the matrix at `(i0, j0)` (a strided view), and its element offsets.
fn tile_view(buf: SymSlice<u8>, dt: DType, r: &mut Rng) -> (TensorView, Vec<usize>) {
    let (rows, cols) = (r.range(1, 9) as usize, r.range(1, 9) as usize);
    let (i0, j0) = (
        r.below((N - rows) as u64) as usize,
        r.below((N - cols) as u64) as usize,
    );
    let v = TensorView::new(buf, dt, &[rows, cols], &[N, 1], i0 * N + j0).expect("tile fits");
    let idx = (0..rows)
        .flat_map(|i| (0..cols).map(move |j| (i0 + i) * N + j0 + j))
        .collect();
    (v, idx)
}

/// The tile's sum over ranks in f32, in group-rank order, rounded to the dtype (the host path's arithmetic).
fn tile_sum(salt: u64, g: &Group, dt: DType, idx: &[usize]) -> Vec<u8> {
    let esz = dt.size();
    let mats: Vec<Vec<u8>> = g.pes().iter().map(|&pe| matrix(salt, pe, dt)).collect();
    let mut out = vec![0u8; idx.len() * esz];
    for (k, &e) in idx.iter().enumerate() {
        let mut acc = 0f32;
        for m in &mats {
            acc += dt.load_f32(&m[e * esz..(e + 1) * esz]);
        }
        dt.store_f32(acc, &mut out[k * esz..(k + 1) * esz]);
    }
    out
}

fn gather(sh: &Shmem, buf: SymSlice<u8>, dt: DType, idx: &[usize]) -> Result<Vec<u8>> {
    let all = read(sh, buf, 0, N * N * dt.size())?;
    let esz = dt.size();
    Ok(idx
        .iter()
        .flat_map(|&e| all[e * esz..(e + 1) * esz].to_vec())
        .collect())
}

fn tile_cases(sh: &Shmem, cases: usize) -> Result<()> {
    let (ops, q) = setup(sh)?;
    let g = Group::world(sh)?;
    let (me, w) = (sh.my_pe(), sh.n_pes());
    let bytes = N * N * 4;
    let input = sh.malloc::<u8>(bytes)?;
    let (out_h, out_d) = (sh.malloc::<u8>(bytes)?, sh.malloc::<u8>(bytes)?);
    for i in 0..cases {
        let salt = seed() ^ (i as u64).wrapping_mul(0x9E37_79B9);
        let dt = FLOATS[i % 3];
        let mut r = Rng::new(&[salt, 1]);
        write(sh, input, 0, &matrix(salt, me, dt))?;
        for o in [out_h, out_d] {
            fill(sh, o, bytes, 0xEE)?;
        }
        let ctx = format!(
            "tile case {i} dtype {dt} rank {me} (XPUSHMEM_OPS_SEED={})",
            seed()
        );
        // tile_reduce to a random root.
        let (t, idx) = tile_view(input, dt, &mut r);
        let root = r.below(w as u64) as i64;
        let o = |b| TensorView::new(b, dt, t.shape(), t.strides(), t.offset()).unwrap();
        tile_reduce(sh, &g, &t, &o(out_h), root, "sum")?;
        run(
            sh,
            &q,
            ops.tile_reduce(sh, q.list(), &g, &t, &o(out_d), root, "sum"),
        )?;
        let (h, d) = (read(sh, out_h, 0, bytes)?, read(sh, out_d, 0, bytes)?);
        assert!(h == d, "tile_reduce: host and device outputs differ: {ctx}");
        if me as i64 == root {
            assert_eq!(
                gather(sh, out_d, dt, &idx)?,
                tile_sum(salt, &g, dt, &idx),
                "{ctx}"
            );
        } else {
            assert!(
                d.iter().all(|&x| x == 0xEE),
                "tile_reduce non-root untouched: {ctx}"
            );
        }
        // multi_root_tile_reduce: up to W tiles of one shape, distinct roots; each rank's out_tile its own.
        let k = r.range(1, w as u64) as usize;
        let mut roots: Vec<i64> = (0..w as i64).collect();
        for j in (1..w).rev() {
            roots.swap(j, r.below(j as u64 + 1) as usize);
        }
        roots.truncate(k);
        let (rows, cols) = (r.range(1, 6) as usize, r.range(1, 6) as usize);
        let tiles: Vec<(TensorView, Vec<usize>)> = (0..k)
            .map(|j| {
                let at = (j * 5 % (N - rows)) * N + (j * 7 % (N - cols));
                let v = TensorView::new(input, dt, &[rows, cols], &[N, 1], at).unwrap();
                let idx = (0..rows)
                    .flat_map(|a| (0..cols).map(move |b| at + a * N + b))
                    .collect();
                (v, idx)
            })
            .collect();
        let views: Vec<TensorView> = tiles.iter().map(|t| t.0.clone()).collect();
        for o in [out_h, out_d] {
            fill(sh, o, bytes, 0xDD)?;
        }
        let mine_at = (me % 3) * N + me % 4;
        let ov = |b| TensorView::new(b, dt, &[rows, cols], &[N, 1], mine_at).unwrap();
        multi_root_tile_reduce(sh, &g, &views, &ov(out_h), &roots, "sum")?;
        run(
            sh,
            &q,
            ops.multi_root_tile_reduce(sh, q.list(), &g, &views, &ov(out_d), &roots, "sum"),
        )?;
        let (h, d) = (read(sh, out_h, 0, bytes)?, read(sh, out_d, 0, bytes)?);
        assert!(h == d, "multi_root: host and device differ: {ctx}");
        match roots.iter().position(|&x| x == me as i64) {
            Some(j) => {
                let oidx: Vec<usize> = (0..rows)
                    .flat_map(|a| (0..cols).map(move |b| mine_at + a * N + b))
                    .collect();
                assert_eq!(
                    gather(sh, out_d, dt, &oidx)?,
                    tile_sum(salt, &g, dt, &tiles[j].1),
                    "multi_root root of tile {j}: {ctx}"
                );
            }
            None => assert!(d.iter().all(|&x| x == 0xDD), "multi_root non-root: {ctx}"),
        }
        // nvshmem_broadcast of a random (strided) view from a random root.
        let (bv, bidx) = tile_view(input, dt, &mut r);
        let root = r.below(w as u64) as i64;
        run(sh, &q, ops.nvshmem_broadcast(sh, q.list(), &g, &bv, root))?;
        let want = gather_of(&matrix(salt, root as usize, dt), dt, &bidx);
        assert_eq!(gather(sh, input, dt, &bidx)?, want, "broadcast: {ctx}");
        // Outside the view: untouched.
        let mut all = matrix(salt, me, dt);
        let esz = dt.size();
        for (k, &e) in bidx.iter().enumerate() {
            all[e * esz..(e + 1) * esz].copy_from_slice(&want[k * esz..(k + 1) * esz]);
        }
        assert!(
            read(sh, input, 0, N * N * esz)? == all,
            "broadcast outside the view: {ctx}"
        );
        sh.barrier_all()?;
    }
    Ok(())
}

fn gather_of(m: &[u8], dt: DType, idx: &[usize]) -> Vec<u8> {
    let esz = dt.size();
    idx.iter()
        .flat_map(|&e| m[e * esz..(e + 1) * esz].to_vec())
        .collect()
}

pe_test!(
    tile_bcast_random,
    dev [1, 2, 3, 4],
    |sh| {
    tile_cases(sh, 9)
});

/// put / get / put_with_signal + wait_for_signal around the ring, sizes 0 .. 3000 bytes. PE `s` sends the slice at
/// `s * L` of the symmetric buffer (the same address on the peer), so concurrent sends never overlap.
fn p2p_cases(sh: &Shmem) -> Result<()> {
    let (ops, q) = setup(sh)?;
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    const L: usize = 3000;
    let data = sh.malloc::<u8>(n * L)?;
    let sig = sh.calloc::<u64>(1)?;
    let sigv = TensorView::of(sh, sig, DType::I64, &[1])?;
    let slice = |s: usize, len: usize| view_at(data, s * L, DType::U8, &[len]);
    for (i, len) in [0usize, 1, 7, 64, 1000, 3000].into_iter().enumerate() {
        let salt = seed() ^ i as u64;
        // put: my slice to the right neighbour.
        fill(sh, data, n * L, 0)?;
        write(sh, data, me * L, &data_rows(salt, me, 1, len))?;
        sh.barrier_all()?;
        run(
            sh,
            &q,
            ops.nvshmem_put(sh, q.list(), &slice(me, len), right as i64),
        )?;
        sh.barrier_all()?;
        assert!(
            read(sh, data, left * L, len)? == data_rows(salt, left, 1, len),
            "put {len}"
        );
        // get: the right neighbour's slice.
        sh.barrier_all()?;
        write(sh, data, right * L, &vec![0; len])?;
        sh.barrier_all()?;
        run(
            sh,
            &q,
            ops.nvshmem_get(sh, q.list(), &slice(right, len), right as i64),
        )?;
        assert!(
            read(sh, data, right * L, len)? == data_rows(salt, right, 1, len),
            "get {len}"
        );
        sh.barrier_all()?;
        // put_with_signal to the right, wait_for_signal from the left, both on the queue, one wait.
        write(sh, data, me * L, &data_rows(salt ^ 2, me, 1, len))?;
        sh.barrier_all()?;
        let value = 100 + i as i64;
        let h1 =
            ops.nvshmem_put_with_signal(sh, q.list(), &slice(me, len), &sigv, value, right as i64)?;
        let h2 = ops.nvshmem_wait_for_signal(sh, q.list(), &sigv, value, left as i64)?;
        dev(sh).submit_and_wait(&q)?;
        h1.wait(sh)?;
        h2.wait(sh)?;
        assert!(
            read(sh, data, left * L, len)? == data_rows(salt ^ 2, left, 1, len),
            "put_with_signal {len}: data visible with the signal"
        );
        sh.barrier_all()?;
    }
    Ok(())
}

pe_test!(
    p2p_ring,
    dev [2, 3, 4],
    |sh| { p2p_cases(sh) });

// ---- errors: the host path's error, on every rank, and the next op works ----------------------------------

/// Run the host op, then the device op on the same inputs: the same outcome (error variant and message).
fn same_outcome(host: Result<()>, dev: Result<()>, what: &str) -> Result<String> {
    match (&host, &dev) {
        (Err(h), Err(d)) => {
            assert_eq!(h.kind(), d.kind(), "{what}: host {h} / device {d}");
            assert_eq!(h.to_string(), d.to_string(), "{what}");
            Ok(d.to_string())
        }
        _ => panic!("{what}: expected errors on both paths, got host {host:?}, device {dev:?}"),
    }
}

fn error_cases(sh: &Shmem) -> Result<()> {
    let (ops, q) = setup(sh)?;
    let g = Group::world(sh)?;
    let (me, w) = (sh.my_pe(), sh.n_pes());
    let bad = w - 1; // the rank with the wrong split
    let rows = 16usize;
    let input = sh.malloc::<u8>(rows * 8)?;
    let out = sh.malloc::<u8>(w * rows * 8)?;
    let splits = sh.malloc::<u8>(2 * w * 4 * 8)?;
    let oso = sh.malloc::<u8>(2 * w * 4 * 8)?;
    write(sh, input, 0, &data_rows(1, me, rows, 8))?;
    let iv = view(input, DType::I64, &[rows]);
    let healthy = |round: u64| -> Result<()> {
        let s: Vec<i64> = (0..w)
            .map(|p| ((p + me + round as usize) % 3) as i64)
            .collect();
        write(sh, splits, 0, &i64_bytes(&s))?;
        let sv = view(splits, DType::I64, &[w]);
        let ov = view(oso, DType::I64, &[2, w]);
        run(
            sh,
            &q,
            ops.all_to_all_vdev(
                sh,
                q.list(),
                &g,
                &iv,
                &view(out, DType::I64, &[w * rows]),
                &sv,
                &ov,
            ),
        )?;
        let got = bytes_i64(&read(sh, oso, 0, 8 * w)?);
        let want: Vec<i64> = (0..w)
            .map(|p| ((me + p + round as usize) % 3) as i64)
            .collect();
        assert_eq!(got, want, "the op after an error works (round {round})");
        Ok(())
    };
    type Case<'c> = (&'c str, Vec<i64>, usize, usize);
    // (what, bad rank's splits, out rows, op: 0 vdev / 1 2d / 2 2d_offset)
    let cases: Vec<Case> = vec![
        (
            "negative split",
            (0..w as i64).map(|p| if p == 0 { -3 } else { 1 }).collect(),
            w * rows,
            0,
        ),
        ("splits exceed the input", vec![rows as i64; w], w * rows, 0),
        ("splits overflow int64", vec![i64::MAX; w], w * rows, 0),
        (
            "negative 2d split",
            (0..2 * w as i64)
                .map(|t| if t == 1 { -1 } else { 0 })
                .collect(),
            w * rows,
            1,
        ),
        ("out too small", vec![1; w], 0, 0),
        (
            "2d_offset chunk past the input",
            (0..4 * w)
                .map(|t| if t < 2 * w { 1 } else { rows as i64 })
                .collect(),
            w * rows,
            2,
        ),
    ];
    for (k, (what, bad_splits, out_rows, op)) in cases.into_iter().enumerate() {
        let n = match op {
            0 => w,
            _ => 2 * w,
        };
        let s: Vec<i64> = if me == bad || what == "out too small" {
            bad_splits.clone()
        } else {
            vec![0; if op == 2 { 2 * n } else { n }]
        };
        write(sh, splits, 0, &i64_bytes(&s))?;
        let ov = view(oso, DType::I64, &[2, n]);
        let outv = view(out, DType::I64, &[out_rows]);
        let (h, d) = match op {
            0 => {
                let sv = view(splits, DType::I64, &[n]);
                (
                    all_to_all_vdev(sh, &g, &iv, &outv, &sv, &ov),
                    run(
                        sh,
                        &q,
                        ops.all_to_all_vdev(sh, q.list(), &g, &iv, &outv, &sv, &ov),
                    ),
                )
            }
            1 => {
                let sv = view(splits, DType::I64, &[n]);
                (
                    all_to_all_vdev_2d(sh, &g, &iv, &outv, &sv, &ov, None),
                    run(
                        sh,
                        &q,
                        ops.all_to_all_vdev_2d(sh, q.list(), &g, &iv, &outv, &sv, &ov, None),
                    ),
                )
            }
            _ => {
                let sv = view(splits, DType::I64, &[2, n]);
                (
                    all_to_all_vdev_2d_offset(sh, &g, &iv, &outv, &sv, &ov),
                    run(
                        sh,
                        &q,
                        ops.all_to_all_vdev_2d_offset(sh, q.list(), &g, &iv, &outv, &sv, &ov),
                    ),
                )
            }
        };
        let msg = same_outcome(h, d, &format!("{what} (rank {me})"))?;
        if what == "out too small" {
            assert!(
                msg.contains("rows of out") || msg.contains("rejected"),
                "{what}: {msg}"
            );
        } else if me != bad {
            assert!(msg.contains(&format!("group rank {bad}")), "{what}: {msg}");
        }
        healthy(k as u64)?;
    }
    // Rejected on the host by one rank (in_splits of another dtype): the others get the host path's verdict.
    let sv = if me == bad {
        view(splits, DType::I32, &[w])
    } else {
        view(splits, DType::I64, &[w])
    };
    write(sh, splits, 0, &i64_bytes(&vec![0; w]))?;
    let ov = view(oso, DType::I64, &[2, w]);
    let outv = view(out, DType::I64, &[w * rows]);
    same_outcome(
        all_to_all_vdev(sh, &g, &iv, &outv, &sv, &ov),
        run(
            sh,
            &q,
            ops.all_to_all_vdev(sh, q.list(), &g, &iv, &outv, &sv, &ov),
        ),
        "host-side rejection",
    )?;
    healthy(10)?;
    // Different symmetric arguments on one rank: a mismatch on the others.
    let iv2 = if me == bad {
        view_at(input, 8, DType::I64, &[rows - 1])
    } else {
        iv.clone()
    };
    let sv = view(splits, DType::I64, &[w]);
    let h = all_to_all_vdev(sh, &g, &iv2, &outv, &sv, &ov);
    let d = run(
        sh,
        &q,
        ops.all_to_all_vdev(sh, q.list(), &g, &iv2, &outv, &sv, &ov),
    );
    assert!(matches!(h, Err(Error::Mismatch { .. })), "{h:?}");
    assert!(matches!(d, Err(Error::Mismatch { .. })), "{d:?}");
    healthy(11)?;
    // Roots out of range, tile shape mismatch: rejected on the host on every rank, no kernel work done.
    let tv = view(input, DType::F32, &[4, 4]);
    let tv2 = view(out, DType::F32, &[4, 4]);
    same_outcome(
        tile_reduce(sh, &g, &tv, &tv2, w as i64, "sum"),
        run(
            sh,
            &q,
            ops.tile_reduce(sh, q.list(), &g, &tv, &tv2, w as i64, "sum"),
        ),
        "tile root out of range",
    )?;
    same_outcome(
        nvshmem_broadcast(sh, &g, &tv, -1),
        run(sh, &q, ops.nvshmem_broadcast(sh, q.list(), &g, &tv, -1)),
        "broadcast root out of range",
    )?;
    let r = ops.nvshmem_put(sh, q.list(), &view(input, DType::U8, &[8]), w as i64);
    assert!(matches!(r, Err(Error::InvalidPe { .. })), "{r:?}");
    healthy(12)?;
    Ok(())
}

pe_test!(
    errors_like_host,
    dev [2, 3, 4],
    |sh| {
    error_cases(sh)
});

// ---- ordering on one list ----------------------------------------------------------------------------------

/// The user kernel's SPIR-V (built by each PE into its own temporary directory).
fn user_kernel() -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("xpushmem-opsdev-user-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (bc, spv) = (dir.join("u.bc"), dir.join("u.spv"));
    compile_cl(&root().join("tests/tests/device_kernels/ops_user.cl"), &bc);
    run_tool(
        std::process::Command::new("llvm-spirv-14")
            .arg(&bc)
            .arg("-o")
            .arg(&spv),
    );
    let v = std::fs::read(&spv).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    v
}

/// `all_to_all_vdev`, a user kernel on its output, and an `all_to_all_vdev` of that output, appended back to back
/// on one list (immediate, then regular), then one wait: the second op sees the user kernel's result.
fn queue_order(sh: &Shmem) -> Result<()> {
    let ops = DeviceOps::new(sh)?;
    let dev = dev(sh);
    let module = dev.load_module(&user_kernel())?;
    let k = dev.kernel(&module, "user_add")?;
    let g = Group::world(sh)?;
    let (me, w) = (sh.my_pe(), sh.n_pes());
    let rows = 12usize;
    let a = sh.malloc::<u8>(w * rows * 8)?;
    let b = sh.malloc::<u8>(w * rows * 8)?;
    let c = sh.malloc::<u8>(w * rows * 8)?;
    let splits = sh.malloc::<i64>(w)?;
    let (oso1, oso2) = (sh.malloc::<i64>(2 * w)?, sh.malloc::<i64>(2 * w)?);
    for immediate in [true, false] {
        let q = dev.create_queue(immediate)?;
        // Each rank sends `rows` rows to every rank (all of a's rows, one chunk per peer).
        write(sh, a, 0, &data_rows(me as u64, me, w * rows, 8))?;
        sh.put(splits, &vec![rows as i64; w], me)?;
        let v = |s: SymSlice<u8>| view(s, DType::I64, &[w * rows]);
        let sv = TensorView::of(sh, splits, DType::I64, &[w])?;
        let o1 = TensorView::of(sh, oso1, DType::I64, &[2, w])?;
        let o2 = TensorView::of(sh, oso2, DType::I64, &[2, w])?;
        sh.barrier_all()?;
        let h1 = ops.all_to_all_vdev(sh, q.list(), &g, &v(a), &v(b), &sv, &o1)?;
        // SAFETY: user_add touches only b's w * rows * 8 bytes on this PE.
        unsafe {
            dev.enqueue(
                q.list(),
                &k,
                &[
                    xpushmem::device::queue::QueueArg::Kernel(KernelArg::sym(b, me)),
                    xpushmem::device::queue::QueueArg::Kernel(KernelArg::U64(
                        (w * rows * 8) as u64,
                    )),
                    xpushmem::device::queue::QueueArg::Kernel(KernelArg::U32(3)),
                ],
                [1, 1, 1],
                [32, 1, 1],
            )?
        };
        let h2 = ops.all_to_all_vdev(sh, q.list(), &g, &v(b), &v(c), &sv, &o2)?;
        assert!(
            !immediate || !h2.is_complete()? || h1.is_complete()?,
            "in order"
        );
        dev.submit_and_wait(&q)?;
        h1.wait(sh)?;
        h2.wait(sh)?;
        // c's chunk from rank s = (b's chunk me of rank s) + 3 = (a's chunk s of rank me... ) + 3.
        let mut want = Vec::new();
        for s in 0..w {
            let bs: Vec<u8> = (0..w)
                .flat_map(|t| {
                    data_rows(t as u64, t, w * rows, 8)[s * rows * 8..(s + 1) * rows * 8].to_vec()
                })
                .map(|x| x.wrapping_add(3))
                .collect();
            want.extend_from_slice(&bs[me * rows * 8..(me + 1) * rows * 8]);
        }
        assert!(
            read(sh, c, 0, w * rows * 8)? == want,
            "immediate={immediate}: op, user kernel, op in order"
        );
        sh.barrier_all()?;
    }
    Ok(())
}

pe_test!(
    queue_ordering,
    dev [2, 3],
    |sh| { queue_order(sh) });

/// The committed op kernels are what ops/device/build.sh makes of the source.
#[test]
fn prebuilt_op_kernels_match_their_source() {
    let dir = std::env::temp_dir().join(format!("xpushmem-ops-build-{}", std::process::id()));
    run_tool(
        std::process::Command::new("bash")
            .arg(root().join("ops/device/build.sh"))
            .arg(&dir),
    );
    let built = std::fs::read(dir.join("xpushmem_ops.spv")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let committed = std::fs::read(root().join("ops/device/prebuilt/xpushmem_ops.spv")).unwrap();
    assert!(
        built == committed,
        "ops/device/prebuilt/xpushmem_ops.spv is stale: run ops/device/build.sh ops/device/prebuilt"
    );
}

/// Every kernel of the committed op module carries a vector `vec_type_hint` (`XPO_KERNEL` in
/// ops/device/xpushmem_ops.cl), which keeps Intel's OpenCL CPU runtime (ze-emu) from vectorizing it: a vectorized
/// kernel's device waits poll 30 to 50 times slower, so it gives up on a dead peer that much later. The kernels are
/// the module's entry points; each must have an `OpExecutionMode VecTypeHint` of more than one component.
#[test]
fn op_kernels_carry_a_vector_type_hint() {
    const OP_ENTRY_POINT: u32 = 15;
    const OP_EXECUTION_MODE: u32 = 16;
    const VEC_TYPE_HINT: u32 = 30;
    let bytes = std::fs::read(root().join("ops/device/prebuilt/xpushmem_ops.spv")).unwrap();
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(words[0], 0x0723_0203, "not a little-endian SPIR-V module");
    let (mut kernels, mut hinted) = (Vec::new(), std::collections::HashSet::new());
    let mut at = 5;
    while at < words.len() {
        let (count, op) = ((words[at] >> 16) as usize, words[at] & 0xffff);
        assert!(
            count > 0 && at + count <= words.len(),
            "malformed instruction at word {at}"
        );
        let args = &words[at + 1..at + count];
        if op == OP_ENTRY_POINT {
            let name: Vec<u8> = args[2..]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .take_while(|&b| b != 0)
                .collect();
            kernels.push((args[1], String::from_utf8(name).unwrap()));
        } else if op == OP_EXECUTION_MODE && args[1] == VEC_TYPE_HINT && args[2] >> 16 > 1 {
            hinted.insert(args[0]);
        }
        at += count;
    }
    assert!(
        kernels.iter().any(|(_, n)| n == "xpo_ep_dispatch"),
        "{kernels:?}"
    );
    let bare: Vec<&str> = kernels
        .iter()
        .filter(|(id, _)| !hinted.contains(id))
        .map(|(_, n)| n.as_str())
        .collect();
    assert!(
        bare.is_empty(),
        "op kernels without a vector vec_type_hint (declare them XPO_KERNEL): {bare:?}"
    );
}

/// A device-side wait that never completes (`nvshmem_wait_for_signal` on a word nobody sets) ends in the host's
/// `Timeout` naming the call, within `XPUSHMEM_TIMEOUT_MS`, and the next ops on the queue work.
#[test]
fn wait_for_signal_times_out_on_the_device_2pe() {
    let name = xpushmem_tests::test_name(
        module_path!(),
        "wait_for_signal_times_out_on_the_device_2pe",
    );
    if xpushmem_tests::is_pe_of(&name) {
        xpushmem_tests::run_pe(|sh| {
            let (ops, q) = setup(sh)?;
            let sig = sh.calloc::<u64>(1)?;
            let sigv = TensorView::of(sh, sig, DType::I64, &[1])?;
            // An immediate list runs what is appended: wait on the handle alone (it waits longer than the device).
            let r = ops
                .nvshmem_wait_for_signal(sh, q.list(), &sigv, 7, 0)?
                .wait(sh);
            match &r {
                Err(Error::Timeout { op, .. }) => {
                    assert!(op.contains("signal_wait_until"), "{r:?}")
                }
                _ => panic!("expected a Timeout, got {r:?}"),
            }
            // The next ops: a put with signal to the right neighbour, and the wait for the left one's.
            let me = sh.my_pe();
            let data = sh.calloc::<u8>(64)?;
            let t = view(data, DType::U8, &[64]);
            sh.barrier_all()?;
            let h1 =
                ops.nvshmem_put_with_signal(sh, q.list(), &t, &sigv, 9, ((me + 1) % 2) as i64)?;
            let h2 = ops.nvshmem_wait_for_signal(sh, q.list(), &sigv, 9, 0)?;
            h1.wait(sh)?;
            h2.wait(sh)?;
            sh.barrier_all()
        });
    }
    let mut env = xpushmem_tests::device_env();
    env.push(("XPUSHMEM_TIMEOUT_MS".into(), "3000".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = xpushmem_tests::spawn_pes_with(&name, 2, &env);
    xpushmem_tests::assert_success(&name, 2, &out);
}
