//! `tile_reduce`, `multi_root_tile_reduce` (float32 / float16 / bfloat16, strided and transposed 2-D views),
//! `nvshmem_broadcast`, `nvshmem_put` / `nvshmem_get` / `nvshmem_put_with_signal` / `nvshmem_wait_for_signal`,
//! against references every PE computes from the seed. The reduction reference sums in f32 in group-rank order
//! and rounds with its own round-half-to-even (on an f64 grid), independent of the crate's conversions.

use crate::ops_common::*;
use xpushmem::{Result, Shmem, SymSlice};
use xpushmem_ops::{
    multi_root_tile_reduce, nvshmem_broadcast, nvshmem_get, nvshmem_put, nvshmem_put_with_signal,
    nvshmem_wait_for_signal, tile_reduce, DType, Group, TensorView,
};
use xpushmem_tests::pe_test;

const N_MAX: usize = 80;
const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Random element bits of a moderate magnitude (about 2^-6 .. 2^6, both signs) for a float dtype.
fn elem_bits(dt: DType, r: &mut Rng) -> u32 {
    let sign = r.below(2) as u32;
    match dt {
        DType::F32 => {
            (sign << 31) | ((r.range(121, 133) as u32) << 23) | (r.next() as u32 & 0x7f_ffff)
        }
        DType::F16 => (sign << 15) | ((r.range(9, 21) as u32) << 10) | (r.next() as u32 & 0x3ff),
        _ => (sign << 15) | ((r.range(121, 133) as u32) << 7) | (r.next() as u32 & 0x7f),
    }
}

/// The value of element bits (the test's own decoding).
fn decode(dt: DType, b: &[u8]) -> f64 {
    match dt {
        DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        DType::BF16 => f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16) as f64,
        _ => {
            let h = u16::from_le_bytes([b[0], b[1]]);
            let (s, e, m) = (
                (h >> 15) as i32,
                ((h >> 10) & 0x1f) as i32,
                (h & 0x3ff) as f64,
            );
            let mag = if e == 0 {
                m * 2f64.powi(-24)
            } else {
                (1.0 + m / 1024.0) * 2f64.powi(e - 15)
            };
            if s == 1 {
                -mag
            } else {
                mag
            }
        }
    }
}

/// `x` rounded to the dtype's grid, ties to even (values stay far from overflow).
fn round_to(dt: DType, x: f32) -> f64 {
    let (mbits, emin) = match dt {
        DType::F32 => return x as f64,
        DType::F16 => (10, -14),
        _ => (7, -126),
    };
    let x = x as f64;
    if x == 0.0 {
        return 0.0;
    }
    let e = ((((x.to_bits() >> 52) & 0x7ff) as i32) - 1023).max(emin);
    let ulp = 2f64.powi(e - mbits);
    (x / ulp).round_ties_even() * ulp
}

fn encode_bits(dt: DType, bits: u32) -> Vec<u8> {
    if dt == DType::F32 {
        bits.to_le_bytes().to_vec()
    } else {
        (bits as u16).to_le_bytes().to_vec()
    }
}

/// Rank `rank`'s full `n x n` matrix of case `salt`.
fn full_matrix(salt: u64, rank: usize, dt: DType, n: usize) -> Vec<u8> {
    let mut r = Rng::new(&[salt, rank as u64, 3]);
    (0..n * n)
        .flat_map(|_| encode_bits(dt, elem_bits(dt, &mut r)))
        .collect()
}

/// A tile of an `n x n` matrix: `h x w` at `(r0, c0)`, or its transpose view when `t`.
#[derive(Debug, Clone, Copy)]
struct Tile {
    r0: usize,
    c0: usize,
    h: usize,
    w: usize,
    t: bool,
}

impl Tile {
    fn random(r: &mut Rng, n: usize) -> Tile {
        let (h, w) = (r.range(1, n as u64) as usize, r.range(1, n as u64) as usize);
        // Transposed: element (i, j) at (c0 + j) * n + r0 + i, so i runs along a row; either way
        // r0 + h <= n and c0 + w <= n.
        let t = r.chance(0.3);
        Tile {
            r0: r.below((n - h + 1) as u64) as usize,
            c0: r.below((n - w + 1) as u64) as usize,
            h,
            w,
            t,
        }
    }
    fn view(&self, buf: SymSlice<u8>, dt: DType, n: usize) -> TensorView {
        let (strides, off) = if self.t {
            ([1, n], self.c0 * n + self.r0)
        } else {
            ([n, 1], self.r0 * n + self.c0)
        };
        TensorView::new(buf, dt, &[self.h, self.w], &strides, off).unwrap()
    }
    /// Element index in the full matrix of tile element (i, j).
    fn index(&self, n: usize, i: usize, j: usize) -> usize {
        if self.t {
            (self.c0 + j) * n + self.r0 + i
        } else {
            (self.r0 + i) * n + self.c0 + j
        }
    }
}

/// The expected full output of a root: `out` (its prior content) with `tile` = Σ_r in_full_r[in_tile], each
/// element summed in f32 in rank order and rounded to the dtype.
fn reduced(
    salt: u64,
    w: usize,
    dt: DType,
    n: usize,
    in_tile: &Tile,
    out_tile: &Tile,
    out: &[u8],
) -> Vec<f64> {
    let esz = dt.size();
    let fulls: Vec<Vec<u8>> = (0..w).map(|r| full_matrix(salt, r, dt, n)).collect();
    let mut want: Vec<f64> = out.chunks_exact(esz).map(|b| decode(dt, b)).collect();
    for i in 0..in_tile.h {
        for j in 0..in_tile.w {
            let k = in_tile.index(n, i, j);
            let mut acc = 0f32;
            for f in &fulls {
                acc += decode(dt, &f[k * esz..(k + 1) * esz]) as f32;
            }
            want[out_tile.index(n, i, j)] = round_to(dt, acc);
        }
    }
    want
}

fn values(dt: DType, b: &[u8]) -> Vec<f64> {
    b.chunks_exact(dt.size()).map(|c| decode(dt, c)).collect()
}

struct Bufs {
    inp: SymSlice<u8>,
    out: SymSlice<u8>,
}

fn tile_cases(sh: &Shmem, g: &Group, b: &Bufs, cases: usize) -> Result<()> {
    let seed = seed();
    let (w, me) = (g.size(), g.my_rank().unwrap());
    for case in 0..cases {
        let mut r = Rng::new(&[seed, 11, case as u64]);
        let salt = r.next();
        let dt = r.pick(&FLOATS);
        let n = r.range(1, N_MAX as u64) as usize;
        let esz = dt.size();
        let tile = Tile::random(&mut r, n);
        let root = r.below(w as u64) as usize;
        let ctx = format!(
            "seed={seed} case={case} W={w} rank={me} dtype={dt} n={n} tile={tile:?} root={root}"
        );
        write(sh, b.inp, 0, &full_matrix(salt, me, dt, n))?;
        let prior = full_matrix(salt ^ 0x5A5A, me, dt, n);
        write(sh, b.out, 0, &prior)?;
        tile_reduce(
            sh,
            g,
            &tile.view(b.inp, dt, n),
            &tile.view(b.out, dt, n),
            root as i64,
            "sum",
        )?;
        let got = values(dt, &read(sh, b.out, 0, n * n * esz)?);
        if me == root {
            let want = reduced(salt, w, dt, n, &tile, &tile, &prior);
            assert_eq!(got, want, "tile_reduce at the root: {ctx}");
        } else {
            assert_eq!(
                got,
                values(dt, &prior),
                "tile_reduce: non-root out untouched: {ctx}"
            );
        }
    }
    Ok(())
}

fn multi_root_cases(sh: &Shmem, g: &Group, b: &Bufs, cases: usize) -> Result<()> {
    let seed = seed();
    let (w, me) = (g.size(), g.my_rank().unwrap());
    for case in 0..cases {
        let mut r = Rng::new(&[seed, 12, case as u64]);
        let salt = r.next();
        let dt = r.pick(&FLOATS);
        // A grid of ceil(W/2) x 2 tiles (PyTorch's layout), each th x tw, in an n x n matrix.
        let (th, tw) = (r.range(1, 12) as usize, r.range(1, 12) as usize);
        let n = (w.div_ceil(2) * th).max(2 * tw);
        let esz = dt.size();
        let grid = |i: usize| Tile {
            r0: (i / 2) * th,
            c0: (i % 2) * tw,
            h: th,
            w: tw,
            t: false,
        };
        // Roots: PyTorch's range(W // ratio), or a random subset in random order.
        let mut roots: Vec<i64> = if r.chance(0.3) {
            (0..(w / r.range(1, 2) as usize).max(1) as i64).collect()
        } else {
            let mut all: Vec<i64> = (0..w as i64).collect();
            for i in (1..w).rev() {
                all.swap(i, r.below(i as u64 + 1) as usize);
            }
            all.truncate(r.range(1, w as u64) as usize);
            all
        };
        if r.chance(0.1) {
            roots.clear();
        }
        let tiles: Vec<Tile> = (0..roots.len()).map(grid).collect();
        let my_slot = roots.iter().position(|&x| x == me as i64);
        // Each rank's output tile is its own grid position (PyTorch: rank r <-> tile r): views differ per rank.
        let out_tile = grid(my_slot.unwrap_or(0));
        let ctx = format!(
            "seed={seed} case={case} W={w} rank={me} dtype={dt} tile={th}x{tw} roots={roots:?}"
        );
        write(sh, b.inp, 0, &full_matrix(salt, me, dt, n))?;
        let prior = full_matrix(salt ^ 0xABCD, me, dt, n);
        write(sh, b.out, 0, &prior)?;
        let views: Vec<TensorView> = tiles.iter().map(|t| t.view(b.inp, dt, n)).collect();
        multi_root_tile_reduce(sh, g, &views, &out_tile.view(b.out, dt, n), &roots, "sum")?;
        let got = values(dt, &read(sh, b.out, 0, n * n * esz)?);
        match my_slot {
            Some(i) => {
                let want = reduced(salt, w, dt, n, &tiles[i], &out_tile, &prior);
                assert_eq!(got, want, "multi_root_tile_reduce at root slot {i}: {ctx}");
            }
            None => assert_eq!(got, values(dt, &prior), "non-root out untouched: {ctx}"),
        }
    }
    Ok(())
}

/// PyTorch's test_tile_reduce: full matrices filled with the rank, tile [t:2t, t:2t], root 0.
fn pytorch_tile_reduce(sh: &Shmem, g: &Group, b: &Bufs) -> Result<()> {
    let (w, me) = (g.size(), g.my_rank().unwrap());
    let n = 64;
    for dt in FLOATS {
        for t in [8usize, 16, 32] {
            let mut full = vec![0u8; n * n * dt.size()];
            for c in full.chunks_exact_mut(dt.size()) {
                dt.store_f32(me as f32, c);
            }
            write(sh, b.inp, 0, &full)?;
            write(sh, b.out, 0, &vec![0u8; n * n * dt.size()])?;
            let tile = Tile {
                r0: t,
                c0: t,
                h: t,
                w: t,
                t: false,
            };
            tile_reduce(
                sh,
                g,
                &tile.view(b.inp, dt, n),
                &tile.view(b.out, dt, n),
                0,
                "sum",
            )?;
            let got = values(dt, &read(sh, b.out, 0, n * n * dt.size())?);
            for i in 0..n {
                for j in 0..n {
                    let inside = (t..2 * t).contains(&i) && (t..2 * t).contains(&j);
                    let want = if me == 0 && inside {
                        (w * (w - 1) / 2) as f64
                    } else {
                        0.0
                    };
                    assert_eq!(got[i * n + j], want, "{dt} t={t} ({i},{j}) W={w} rank={me}");
                }
            }
        }
    }
    Ok(())
}

pe_test!(
    tile_reductions,
    shm [1, 2, 3, 4, 8],
    |sh| {
        let g = Group::world(sh)?;
        let b = Bufs {
            inp: sh.malloc::<u8>(N_MAX * N_MAX * 4)?,
            out: sh.malloc::<u8>(N_MAX * N_MAX * 4)?,
        };
        let cases = if sh.n_pes() >= 8 { 80 } else { 150 };
        pytorch_tile_reduce(sh, &g, &b)?;
        tile_cases(sh, &g, &b, cases)?;
        multi_root_cases(sh, &g, &b, cases)?;
        // The same on two concurrent halves (and the odd PE count's uneven split is skipped).
        if sh.n_pes() % 2 == 0 {
            let half = Group::split_contiguous(sh, sh.n_pes() / 2)?;
            tile_cases(sh, &half, &b, cases / 2)?;
            multi_root_cases(sh, &half, &b, cases / 2)?;
        }
        Ok(())
    }
);

/// Broadcast from a random root of random (strided) views; bytes outside the view stay.
fn broadcast_cases(sh: &Shmem, g: &Group, buf: SymSlice<u8>, cases: usize) -> Result<()> {
    let seed = seed();
    let (w, me) = (g.size(), g.my_rank().unwrap());
    for case in 0..cases {
        let mut r = Rng::new(&[seed, 13, case as u64]);
        let salt = r.next();
        let dt = r.pick(&DTYPES);
        let esz = dt.size();
        let (rows, cols) = (r.range(0, 20) as usize, r.range(1, 20) as usize);
        let root = r.below(w as u64) as i64;
        // Every other column of a rows x 2cols matrix, or a contiguous block.
        let strided = r.chance(0.5);
        let total = rows * cols * 2 * esz;
        let mine = data_rows(salt, me, 1, total);
        write(sh, buf, 0, &mine)?;
        let v = if strided {
            TensorView::new(buf, dt, &[rows, cols], &[2 * cols, 2], 0)?
        } else {
            TensorView::contiguous(buf, dt, &[rows, cols])?
        };
        nvshmem_broadcast(sh, g, &v, root)?;
        let rootd = data_rows(salt, root as usize, 1, total);
        let mut want = mine.clone();
        for i in 0..rows {
            for j in 0..cols {
                let e = if strided {
                    i * 2 * cols + 2 * j
                } else {
                    i * cols + j
                };
                want[e * esz..(e + 1) * esz].copy_from_slice(&rootd[e * esz..(e + 1) * esz]);
            }
        }
        assert!(
            read(sh, buf, 0, total)? == want,
            "broadcast seed={seed} case={case} W={w} rank={me} root={root} dtype={dt} strided={strided}"
        );
    }
    Ok(())
}

pe_test!(
    broadcast_put_get_signal,
    shm [1, 2, 3, 4, 8],
    dev [1],
    |sh| {
        let (n, me) = (sh.n_pes(), sh.my_pe());
        let g = Group::world(sh)?;
        let buf = sh.malloc::<u8>(8192)?;
        broadcast_cases(sh, &g, buf, 40)?;
        // PyTorch's test_mempool_tensor_factory: rank 0 arange(1024), others zeros, broadcast from 0.
        let t = TensorView::contiguous(buf, DType::F32, &[1024])?;
        let init: Vec<u8> = (0..1024)
            .flat_map(|i| (if me == 0 { i as f32 } else { 0.0 }).to_le_bytes())
            .collect();
        write(sh, buf, 0, &init)?;
        nvshmem_broadcast(sh, &g, &t, 0)?;
        let want: Vec<u8> = (0..1024).flat_map(|i| (i as f32).to_le_bytes()).collect();
        assert!(read(sh, buf, 0, 4096)? == want, "broadcast of arange");

        let data = sh.malloc::<u8>(8192)?;
        let sig = sh.calloc::<u64>(8)?;
        // A 32-bit view of the whole pad, as PyTorch's get_signal_pad returns; the op uses its first 8 bytes.
        let sigpad = TensorView::new(
            xpushmem_ops::sym_bytes(sh, sig)?,
            DType::I32,
            &[16],
            &[1],
            0,
        )?;
        let seed = seed();
        for case in 0..12usize {
            let mut r = Rng::new(&[seed, 14, case as u64]);
            let salt = r.next();
            let dt = r.pick(&DTYPES);
            let len = r.range(0, 300) as usize;
            // A view at a non-zero offset: the remote address is the tensor's, not the allocation base.
            let at = r.below(16) as usize * 8;
            let v = view_at(data, at, dt, &[len]);
            let bytes = len * dt.size();
            let ctx =
                format!("seed={seed} case={case} W={n} rank={me} dtype={dt} len={len} at={at}");
            // One sender per round (a ring of simultaneous puts would overwrite a buffer its owner is still
            // sending from): put, get and put_with_signal from PE k to its right neighbour.
            for k in 0..n {
                let (from, to) = (k, (k + 1) % n);
                let salt = salt ^ ((k as u64) << 8);
                // put
                write(sh, data, at, &data_rows(salt, me, 1, bytes))?;
                sh.barrier_all()?;
                if me == from {
                    nvshmem_put(sh, &v, to as i64)?;
                }
                sh.barrier_all()?;
                if me == to {
                    assert!(
                        read(sh, data, at, bytes)? == data_rows(salt, from, 1, bytes),
                        "nvshmem_put {from}->{to}: {ctx}"
                    );
                }
                // get (the receiver pulls)
                sh.barrier_all()?;
                write(sh, data, at, &data_rows(salt ^ 1, me, 1, bytes))?;
                sh.barrier_all()?;
                if me == to {
                    nvshmem_get(sh, &v, from as i64)?;
                    assert!(
                        read(sh, data, at, bytes)? == data_rows(salt ^ 1, from, 1, bytes),
                        "nvshmem_get {to}<-{from}: {ctx}"
                    );
                }
                sh.barrier_all()?;
                // put_with_signal + wait_for_signal, a new signal value each time (the word is never reset).
                write(sh, data, at, &data_rows(salt ^ 2, me, 1, bytes))?;
                sh.barrier_all()?;
                let value = 1000 + (case * n + k) as i64;
                if me == from {
                    nvshmem_put_with_signal(sh, &v, &sigpad, value, to as i64)?;
                }
                if me == to {
                    nvshmem_wait_for_signal(sh, &sigpad, value, from as i64)?;
                    assert!(
                        read(sh, data, at, bytes)? == data_rows(salt ^ 2, from, 1, bytes),
                        "put_with_signal {from}->{to}: data visible with the signal: {ctx}"
                    );
                    assert_eq!(
                        sh.signal_fetch(sig.at(0)?)?,
                        value as u64,
                        "signal word not reset: {ctx}"
                    );
                }
                sh.barrier_all()?;
            }
        }
        // PyTorch's test_nvshmem_put: rank 0 sends zeros with signal 5 to rank 1.
        if n >= 2 {
            let t = TensorView::contiguous(data, DType::F32, &[1024])?;
            write(
                sh,
                data,
                0,
                &(0..1024)
                    .flat_map(|_| (me as f32).to_le_bytes())
                    .collect::<Vec<_>>(),
            )?;
            sh.barrier_all()?;
            if me == 0 {
                nvshmem_put_with_signal(sh, &t, &sigpad, 5, 1)?;
            } else if me == 1 {
                nvshmem_wait_for_signal(sh, &sigpad, 5, 0)?;
                assert!(
                    read(sh, data, 0, 4096)?.iter().all(|&b| b == 0),
                    "test_nvshmem_put"
                );
            }
            sh.barrier_all()?;
            // test_nvshmem_get: every rank fills with its rank; rank 0 gets rank 1's ones.
            write(
                sh,
                data,
                0,
                &(0..1024)
                    .flat_map(|_| (me as f32).to_le_bytes())
                    .collect::<Vec<_>>(),
            )?;
            sh.barrier_all()?;
            if me == 0 {
                nvshmem_get(sh, &t, 1)?;
                assert!(
                    read(sh, data, 0, 4096)?
                        == (0..1024)
                            .flat_map(|_| 1f32.to_le_bytes())
                            .collect::<Vec<_>>()
                );
            }
            sh.barrier_all()?;
        }
        Ok(())
    }
);
