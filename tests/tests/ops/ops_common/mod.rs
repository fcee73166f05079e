//! Helpers shared by the `ops_*` suites: a seeded generator every PE can replay for every other PE, symmetric
//! buffers as tensor views, and byte-level reads and writes.
#![allow(dead_code)]

use xpushmem::{Result, Shmem, SymSlice};
use xpushmem_ops::{DType, TensorView};

/// The suite's seed: `XPUSHMEM_OPS_SEED` or a fixed default. Printed by every assertion that fails.
pub fn seed() -> u64 {
    std::env::var("XPUSHMEM_OPS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_2026)
}

/// splitmix64: a tiny, fast, reproducible generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for the stream named by `parts` (e.g. seed, case, rank).
    pub fn new(parts: &[u64]) -> Rng {
        let mut r = Rng(0x9E37_79B9_7F4A_7C15);
        for &p in parts {
            r.0 ^= p;
            r.next();
        }
        r
    }
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, n)` (0 when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    /// Uniform in `[lo, hi]`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// One of `xs`.
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// Every dtype of the suites.
pub const DTYPES: [DType; 9] = DType::ALL;

/// Byte `j` of row `r` of the data of rank `rank` in stream `salt`.
pub fn data_byte(salt: u64, rank: usize, r: usize, j: usize) -> u8 {
    let mut z = salt
        ^ (rank as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (r as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9)
        ^ (j as u64).wrapping_mul(0x94D0_49BB_1331_11EB);
    z = (z ^ (z >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (z ^ (z >> 32)) as u8
}

/// `rows` rows of `row_bytes` bytes of rank `rank`'s data.
pub fn data_rows(salt: u64, rank: usize, rows: usize, row_bytes: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(rows * row_bytes);
    for r in 0..rows {
        for j in 0..row_bytes {
            v.push(data_byte(salt, rank, r, j));
        }
    }
    v
}

/// A contiguous view of `shape` at the start of `buf`.
pub fn view(buf: SymSlice<u8>, dtype: DType, shape: &[usize]) -> TensorView {
    TensorView::contiguous(buf, dtype, shape).expect("view fits its buffer")
}

/// A contiguous view of `shape` at byte `at` of `buf` (`at` a multiple of the element size).
pub fn view_at(buf: SymSlice<u8>, at: usize, dtype: DType, shape: &[usize]) -> TensorView {
    let strides = xpushmem_ops::tensor::contiguous_strides(shape);
    TensorView::new(buf, dtype, shape, &strides, at / dtype.size()).expect("view fits its buffer")
}

/// This PE's bytes of `buf[start..start+len]`.
pub fn read(sh: &Shmem, buf: SymSlice<u8>, start: usize, len: usize) -> Result<Vec<u8>> {
    let mut v = vec![0u8; len];
    sh.get(&mut v, buf.slice(start..start + len)?, sh.my_pe())?;
    Ok(v)
}

/// Write `data` at `buf[start..]` on this PE.
pub fn write(sh: &Shmem, buf: SymSlice<u8>, start: usize, data: &[u8]) -> Result<()> {
    sh.put(buf.slice(start..start + data.len())?, data, sh.my_pe())
}

/// int64 values as little-endian bytes.
pub fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Little-endian bytes as int64 values.
pub fn bytes_i64(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Exclusive prefix sum.
pub fn excl(v: &[i64]) -> Vec<i64> {
    let mut acc = 0;
    v.iter()
        .map(|&x| {
            let o = acc;
            acc += x;
            o
        })
        .collect()
}

/// The `all_to_all_vdev_2d` reference on rank `me`: expert-major output, each expert's block starting at a
/// multiple of `align` rows and taking at least `align` rows. `all[s]`: rank `s`'s `ne * W` splits, its data
/// `data_rows(salt, s, rows, rb)`. Returns `out_splits_offsets`' two rows and the expected output (`out_rows` rows
/// of `rb` bytes, `fill` where nothing lands).
#[allow(clippy::too_many_arguments)]
pub fn reference_2d(
    all: &[Vec<i64>],
    me: usize,
    ne: usize,
    align: usize,
    salt: u64,
    rows: usize,
    rb: usize,
    out_rows: usize,
    fill: u8,
) -> (Vec<i64>, Vec<i64>, Vec<u8>) {
    let w = all.len();
    let n = ne * w;
    let mut row0 = vec![0i64; n];
    let mut row1 = vec![0i64; n];
    let mut want = vec![fill; out_rows * rb];
    let mut start = 0usize;
    for e in 0..ne {
        let mut at = start;
        for s in 0..w {
            let t = me * ne + e;
            let cnt = all[s][t] as usize;
            let src = all[s][..t].iter().sum::<i64>() as usize;
            row0[e * w + s] = cnt as i64;
            row1[e * w + s] = at as i64;
            let data = data_rows(salt, s, rows, rb);
            want[at * rb..(at + cnt) * rb].copy_from_slice(&data[src * rb..(src + cnt) * rb]);
            at += cnt;
        }
        let total = at - start;
        start += if total == 0 {
            align
        } else {
            total.div_ceil(align) * align
        };
    }
    (row0, row1, want)
}
