//! symm_mem's collectives on the ops' device path (`DeviceOps::one_shot_all_reduce`, `two_shot_all_reduce`,
//! `reduce_scatter_out`, `memset32`, `stream_write_value32`: the kernels of `ops/device/symm_mem.cl`, part of the
//! prebuilt op module, enqueued on an immediate list) on ze-emu device heaps at 2, 3 and 4 PEs. Upstream's cases
//! (test_symmetric_memory.py's sizes, offsets, dtypes) with upstream's semantics, which the CPU registration
//! (`triton-bridge/xpushmem/torch/_symm_ops.py`) also has: every result is compared bit for bit with a host
//! reference that adds the ranks' values in group-rank order in the element type (float32; bfloat16 rounded to the
//! nearest, ties to even, after each addition), the elements around the tensor must stay untouched, and the group
//! is the world in descending order (so group rank != PE). Local (non-symmetric) inputs and outputs live in host
//! USM. Bad arguments give upstream's message on the rank that passed them and "rejected its arguments" on the
//! others, a symmetric argument that differs gives a mismatch everywhere, and the next op works.

use xpushmem::device::queue::{DeviceRange, HostBuf, Queue};
use xpushmem::{Error, Result, Shmem, SymSlice};
use xpushmem_ops::{DType, DeviceOps, Group, LocalTensor, OpHandle, Operand, TensorView};
use xpushmem_tests::pe_test;

struct Env {
    ops: DeviceOps,
    q: Queue,
    g: Group,
    /// Global PEs by group rank.
    pes: Vec<usize>,
    /// This PE's group rank.
    me: usize,
}

impl Env {
    fn new(sh: &Shmem) -> Result<Env> {
        let ops = DeviceOps::new(sh)?;
        let q = sh.device().expect("a device heap").create_queue(true)?;
        let pes: Vec<usize> = (0..sh.n_pes()).rev().collect();
        let g = Group::new(sh, &pes)?;
        let me = pes.iter().position(|&p| p == sh.my_pe()).expect("a member");
        Ok(Env { ops, q, g, pes, me })
    }

    fn n(&self) -> usize {
        self.pes.len()
    }
}

/// Wait for an op on the (immediate) list.
fn done(sh: &Shmem, h: Result<OpHandle>) -> Result<()> {
    h?.wait(sh)
}

fn heap<T: xpushmem::Symmetric>(sh: &Shmem, s: SymSlice<T>, d: DType, shape: &[usize]) -> Operand {
    Operand::Heap(TensorView::of(sh, s, d, shape).expect("a view"))
}

/// A local tensor in host USM (outside the symmetric heap), holding `init`.
struct Local {
    buf: HostBuf,
    op: Operand,
}

impl Local {
    fn new<T: Elem>(sh: &Shmem, shape: &[usize], init: &[T]) -> Result<Local> {
        let numel: usize = shape.iter().product();
        let buf = sh
            .device()
            .expect("device")
            .host_buf(round_up(numel * T::size(), 8))?;
        let bytes: Vec<u8> = init.iter().flat_map(|v| v.to_le()).collect();
        buf.write(0, &bytes)?;
        // SAFETY: host USM of the runtime's context, alive (in `Local`) until after every op using it is waited for.
        let range = unsafe { DeviceRange::new(buf.addr(0), numel * T::size()) };
        let op = Operand::Local(LocalTensor::new(range, T::DTYPE, shape, None)?);
        Ok(Local { buf, op })
    }

    fn read<T: Elem>(&self) -> Vec<T> {
        let n = self.op.numel() * T::size();
        let bytes: Vec<u8> = (0..n.div_ceil(8))
            .flat_map(|i| self.buf.word(i).expect("word").to_le_bytes())
            .take(n)
            .collect();
        bytes.chunks(T::size()).map(T::from_le).collect()
    }
}

/// An element type of the kernels: float32 (`f32`) or bfloat16 (its bits, `u16`).
trait Elem: xpushmem::Symmetric + Copy + PartialEq + std::fmt::Debug + Default {
    /// The name in messages.
    const SUF: &'static str;
    /// The ops' dtype.
    const DTYPE: DType;
    /// From little-endian bytes.
    fn from_le(b: &[u8]) -> Self;
    /// To little-endian bytes.
    fn to_le(self) -> Vec<u8>;
    /// A test value from reference bits (finite, with fractional bits, in [-4, 4)).
    fn from_bits(b: u64) -> Self;
    /// The reference addition in the element type.
    fn add(a: Self, b: Self) -> Self;
    fn size() -> usize {
        std::mem::size_of::<Self>()
    }
}

fn test_f32(b: u64) -> f32 {
    (b % (1 << 20)) as f32 / 131_072.0 - 4.0
}

impl Elem for f32 {
    const SUF: &'static str = "f32";
    const DTYPE: DType = DType::F32;
    fn from_le(b: &[u8]) -> Self {
        f32::from_le_bytes(b.try_into().expect("4 bytes"))
    }
    fn to_le(self) -> Vec<u8> {
        self.to_le_bytes().to_vec()
    }
    fn from_bits(b: u64) -> Self {
        test_f32(b)
    }
    fn add(a: Self, b: Self) -> Self {
        a + b
    }
}

fn bf16_value(b: u16) -> f64 {
    f64::from(f32::from_bits(u32::from(b) << 16))
}

/// The bfloat16 nearest to `x` (ties to the even one), found by comparing the two candidates around it in f64.
fn bf16_nearest(x: f32) -> u16 {
    let below = (x.to_bits() >> 16) as u16; // same sign, magnitude rounded down
    let above = below + 1;
    let (d_below, d_above) = (
        (f64::from(x) - bf16_value(below)).abs(),
        (bf16_value(above) - f64::from(x)).abs(),
    );
    if d_below < d_above || (d_below == d_above && below % 2 == 0) {
        below
    } else {
        above
    }
}

impl Elem for u16 {
    const SUF: &'static str = "bf16";
    const DTYPE: DType = DType::BF16;
    fn from_le(b: &[u8]) -> Self {
        u16::from_le_bytes(b.try_into().expect("2 bytes"))
    }
    fn to_le(self) -> Vec<u8> {
        self.to_le_bytes().to_vec()
    }
    fn from_bits(b: u64) -> Self {
        (test_f32(b).to_bits() >> 16) as u16
    }
    fn add(a: Self, b: Self) -> Self {
        bf16_nearest((bf16_value(a) + bf16_value(b)) as f32)
    }
}

fn values<T: Elem>(pe: usize, len: usize, salt: u64) -> Vec<T> {
    (0..len)
        .map(|i| T::from_bits(xpushmem_tests::reference(pe, i, salt)))
        .collect()
}

/// The sum over the PEs of `inputs[pe][i]`, in rank order.
fn rank_order_sum<T: Elem>(inputs: &[Vec<T>], i: usize) -> T {
    inputs[1..]
        .iter()
        .fold(inputs[0][i], |acc, v| T::add(acc, v[i]))
}

fn read<T: xpushmem::Symmetric + Copy + Default>(sh: &Shmem, s: SymSlice<T>) -> Vec<T> {
    let mut v = vec![T::default(); s.len()];
    sh.get(&mut v, s, sh.my_pe()).expect("read back");
    v
}

/// at::native::memory::get_alignment of a byte count.
fn alignment(bytes: usize) -> usize {
    [16, 8, 4, 2]
        .into_iter()
        .find(|a| bytes % a == 0)
        .unwrap_or(1)
}

fn round_up(x: usize, m: usize) -> usize {
    x.div_ceil(m) * m
}

/// A zeroed local tensor of any dtype (its host USM buffer and the operand).
fn local_raw(sh: &Shmem, d: DType, shape: &[usize]) -> Result<(HostBuf, Operand)> {
    let bytes = shape.iter().product::<usize>() * d.size();
    let buf = sh.device().expect("device").host_buf(bytes)?;
    // SAFETY: host USM of the runtime's context; the caller keeps `buf` until the ops using it are waited for.
    let range = unsafe { DeviceRange::new(buf.addr(0), bytes) };
    let op = Operand::Local(LocalTensor::new(range, d, shape, None)?);
    Ok((buf, op))
}

// ---- one-shot all-reduce -------------------------------------------------------------------------------------

/// test_one_shot_all_reduce: sizes 4, 8192, 8196 bytes, element offsets 0 and 16, with and without the copy of a
/// local input (then `out` is local too).
fn one_shot<T: Elem>(sh: &Shmem, e: &Env) -> Result<()> {
    let pe = sh.my_pe();
    let cases = [4usize, 8192, 8196]
        .into_iter()
        .flat_map(|s| [0usize, 16].map(move |o| (s, o)))
        .flat_map(|(s, o)| [false, true].map(move |c| (s, o, c)));
    for (salt, (size_bytes, offset, copy)) in (100u64..).zip(cases) {
        let numel = size_bytes / T::size();
        let total = offset + numel + 8;
        let what = format!(
            "one_shot {} {size_bytes} B, offset {offset}, copy {copy}",
            T::SUF
        );
        let buf = sh.malloc::<T>(total)?;
        let out = sh.calloc::<T>(numel)?;
        let mine = values::<T>(pe, total, salt);
        sh.put(buf, &mine, pe)?;
        let local_vals = values::<T>(pe, numel, salt + 1000);
        let local = Local::new(sh, &[numel], &local_vals)?;
        let local_out = Local::new(sh, &[numel], &vec![T::default(); numel])?;
        let input = heap(sh, buf.slice(offset..offset + numel)?, T::DTYPE, &[numel]);
        let out_op = if copy {
            local_out.op.clone()
        } else {
            heap(sh, out, T::DTYPE, &[numel])
        };
        sh.barrier_all()?;
        let h = e.ops.one_shot_all_reduce(
            sh,
            e.q.list(),
            &e.g,
            &input,
            copy.then_some(&local.op),
            "sum",
            &out_op,
        );
        done(sh, h).map_err(|err| Error::State(format!("{what}: {err}")))?;
        let inputs: Vec<Vec<T>> = e
            .pes
            .iter()
            .map(|&p| {
                if copy {
                    values::<T>(p, numel, salt + 1000)
                } else {
                    values::<T>(p, total, salt)[offset..offset + numel].to_vec()
                }
            })
            .collect();
        let want: Vec<T> = (0..numel).map(|i| rank_order_sum(&inputs, i)).collect();
        let got = if copy {
            local_out.read::<T>()
        } else {
            read(sh, out)
        };
        assert_eq!(got, want, "{what}: out");
        let mut buf_want = mine.clone();
        if copy {
            buf_want[offset..offset + numel].copy_from_slice(&local_vals);
        }
        assert_eq!(read(sh, buf), buf_want, "{what}: the symmetric buffer");
        sh.barrier_all()?;
        sh.free(out)?;
        sh.free(buf)?;
    }
    Ok(())
}

// ---- two-shot all-reduce -------------------------------------------------------------------------------------

/// test_two_shot_all_reduce: a 16384-element zeroed buffer, the tensor 8 bytes in, 4, 8192 and 8196 bytes long,
/// in place and out of place (into a local output); upstream's slice partition (its alignment in bytes, as
/// upstream computes it).
fn two_shot<T: Elem>(sh: &Shmem, e: &Env) -> Result<()> {
    let n = e.n();
    let cases = [4usize, 8192, 8196]
        .into_iter()
        .flat_map(|s| [true, false].map(move |i| (s, i)));
    for (salt, (size_bytes, inplace)) in (200u64..).zip(cases) {
        let what = format!("two_shot {} {size_bytes} B, in place {inplace}", T::SUF);
        let shift = 8 / T::size();
        let numel = size_bytes / T::size();
        let t = sh.calloc::<T>(16384)?;
        let inputs: Vec<Vec<T>> = e.pes.iter().map(|&p| values::<T>(p, numel, salt)).collect();
        let res = t.slice(shift..shift + numel)?;
        sh.put(res, &inputs[e.me], sh.my_pe())?;
        let out = Local::new(sh, &[numel], &vec![T::default(); numel])?;
        let align = alignment(shift * T::size()).min(alignment(numel * T::size()));
        let want: Vec<T> = (0..numel).map(|i| rank_order_sum(&inputs, i)).collect();
        let mut t_want = vec![T::default(); 16384];
        let input = heap(sh, res, T::DTYPE, &[numel]);
        sh.barrier_all()?;
        if inplace {
            done(
                sh,
                e.ops
                    .two_shot_all_reduce(sh, e.q.list(), &e.g, &input, None, "sum"),
            )?;
            t_want[shift..shift + numel].copy_from_slice(&want);
        } else {
            done(
                sh,
                e.ops
                    .two_shot_all_reduce(sh, e.q.list(), &e.g, &input, Some(&out.op), "sum"),
            )?;
            assert_eq!(out.read::<T>(), want, "{what}: output");
            // This rank's slice of its input holds the reduced values, the rest its own input.
            let per_rank = round_up(numel, align / T::size() * n) / n;
            let (lo, hi) = (
                (per_rank * e.me).min(numel),
                (per_rank * (e.me + 1)).min(numel),
            );
            t_want[shift..shift + numel].copy_from_slice(&inputs[e.me]);
            t_want[shift + lo..shift + hi].copy_from_slice(&want[lo..hi]);
        }
        // In place: the result on every PE; head and tail never written.
        assert_eq!(read(sh, t), t_want, "{what}: the symmetric buffer");
        sh.barrier_all()?;
        sh.free(t)?;
    }
    Ok(())
}

// ---- reduce-scatter ------------------------------------------------------------------------------------------

/// test_reduce_scatter: the tensor 8 bytes into a zeroed buffer, 128 and 8192 bytes long (at 2 PEs), flat or
/// viewed as rows of 128 bytes split along the last dimension (then into a local output).
fn reduce_scatter<T: Elem>(sh: &Shmem, e: &Env) -> Result<()> {
    let n = e.n();
    let cases = [128usize, 8192]
        .into_iter()
        .flat_map(|s| [true, false].map(move |d| (s, d)));
    for (salt, (size_bytes, split_last_dim)) in (300u64..).zip(cases) {
        let what = format!(
            "reduce_scatter {} {size_bytes} B, split_last_dim {split_last_dim}",
            T::SUF
        );
        // Upstream's sizes at 2 PEs; at n PEs n / 2 times as many elements (divisible as upstream requires).
        let shift = 8 / T::size();
        let numel = size_bytes / T::size() * n / 2;
        let last = if split_last_dim {
            128 / T::size() * n / 2
        } else {
            0
        };
        let len = shift + numel + 8;
        let t = sh.calloc::<T>(len)?;
        let out = sh.calloc::<T>(numel / n)?;
        let inputs: Vec<Vec<T>> = e.pes.iter().map(|&p| values::<T>(p, numel, salt)).collect();
        let res = t.slice(shift..shift + numel)?;
        sh.put(res, &inputs[e.me], sh.my_pe())?;
        let per = numel / n;
        let oshape = if split_last_dim {
            vec![numel / last, last / n]
        } else {
            vec![per]
        };
        let local_out = Local::new(sh, &oshape, &vec![T::default(); per])?;
        sh.barrier_all()?;
        if split_last_dim {
            let input = heap(sh, res, T::DTYPE, &[numel / last, last]);
            done(
                sh,
                e.ops
                    .reduce_scatter_out(sh, e.q.list(), &e.g, &input, true, &local_out.op),
            )?;
        } else {
            let input = heap(sh, res, T::DTYPE, &[numel]);
            let o = heap(sh, out, T::DTYPE, &[per]);
            done(
                sh,
                e.ops
                    .reduce_scatter_out(sh, e.q.list(), &e.g, &input, false, &o),
            )?;
        }
        let want: Vec<T> = (0..per)
            .map(|i| {
                let idx = if split_last_dim {
                    let w = last / n;
                    i / w * last + w * e.me + i % w
                } else {
                    per * e.me + i
                };
                rank_order_sum(&inputs, idx)
            })
            .collect();
        let got = if split_last_dim {
            local_out.read::<T>()
        } else {
            read(sh, out)
        };
        assert_eq!(got, want, "{what}: output");
        let mut t_want = vec![T::default(); len];
        t_want[shift..shift + numel].copy_from_slice(&inputs[e.me]);
        assert_eq!(read(sh, t), t_want, "{what}: the input is not written");
        sh.barrier_all()?;
        sh.free(out)?;
        sh.free(t)?;
    }
    Ok(())
}

// ---- memset32, stream_write_value32 --------------------------------------------------------------------------

/// test_memset32 and test_stream_write_value32 (their data parts), on a symmetric and on a local tensor.
fn memset_and_write(sh: &Shmem, e: &Env) -> Result<()> {
    let t = sh.calloc::<u32>(64)?;
    let tv = heap(sh, t, DType::I32, &[64]);
    for (offset, val, count) in [
        (32i64, 1i64, 16i64),
        (0, 1, 64),
        (63, 1, 1),
        (5, u32::MAX as i64, 3),
    ] {
        done(sh, e.ops.memset32(sh, e.q.list(), &tv, offset, val, count))?;
        let got = read(sh, t);
        if (offset, count) == (32, 16) {
            assert!(got[..32].iter().all(|&v| v == 0), "memset32: head");
            assert!(got[32..48].iter().all(|&v| v == 1), "memset32: range");
            assert!(got[48..].iter().all(|&v| v == 0), "memset32: tail");
        }
        let r = offset as usize..(offset + count) as usize;
        assert!(
            got[r.clone()].iter().all(|&v| v == val as u32),
            "memset32 {r:?} = {val}"
        );
    }
    let mut want = vec![1u32; 64];
    want[5..8].fill(u32::MAX);
    assert_eq!(read(sh, t), want, "memset32: the whole tensor");

    let w = sh.calloc::<u32>(4)?;
    let wv = heap(sh, w, DType::I32, &[4]);
    for i in 0..4i64 {
        done(sh, e.ops.stream_write_value32(sh, e.q.list(), &wv, i, 1))?;
        let want: Vec<u32> = (0..4).map(|j| u32::from(j <= i)).collect();
        assert_eq!(read(sh, w), want, "stream_write_value32 at {i}");
    }
    done(
        sh,
        e.ops
            .stream_write_value32(sh, e.q.list(), &wv, 3, u32::MAX as i64),
    )?;
    assert_eq!(
        read(sh, w),
        vec![1, 1, 1, u32::MAX],
        "stream_write_value32 max"
    );

    // A local tensor: words 1 and 2 set, then word 3 written.
    let (lbuf, lv) = local_raw(sh, DType::I32, &[4])?;
    done(sh, e.ops.memset32(sh, e.q.list(), &lv, 1, 7, 2))?;
    done(sh, e.ops.stream_write_value32(sh, e.q.list(), &lv, 3, 9))?;
    let words: Vec<u32> = (0..2)
        .flat_map(|i| {
            let x = lbuf.word(i).expect("word");
            [x as u32, (x >> 32) as u32]
        })
        .collect();
    assert_eq!(
        words,
        vec![0, 7, 7, 9],
        "memset32 + stream_write_value32 on a local tensor"
    );
    sh.barrier_all()?;
    sh.free(w)?;
    sh.free(t)?;
    Ok(())
}

// ---- errors --------------------------------------------------------------------------------------------------

/// `r` is this rank's own error with upstream's message `msg`.
fn own(r: Result<()>, msg: &str, what: &str) {
    match r {
        Err(e) => assert!(
            e.to_string().contains(msg),
            "{what}: expected {msg:?}, got {e}"
        ),
        Ok(()) => panic!("{what}: expected {msg:?}, got success"),
    }
}

/// `r` is a peer's rejection.
fn peer_rejected(r: Result<()>, what: &str) {
    match r {
        Err(e) => assert!(
            e.to_string().contains("rejected its arguments"),
            "{what}: got {e}"
        ),
        Ok(()) => panic!("{what}: expected a peer's rejection, got success"),
    }
}

/// An op whose arguments only group rank 0 gets wrong: its own upstream message there (at once, through
/// `rejected()`, and from `wait`), "rejected its arguments" on the others.
fn one_bad(sh: &Shmem, e: &Env, what: &str, msg: &str, h: Result<OpHandle>) -> Result<()> {
    let h = h?;
    if e.me == 0 {
        let now = h.rejected().map(|x| x.to_string()).unwrap_or_default();
        assert!(
            now.contains(msg),
            "{what}: rejected() = {now:?}, expected {msg:?}"
        );
        own(h.wait(sh), msg, what);
    } else {
        assert!(h.rejected().is_none(), "{what}: only rank 0 rejects");
        peer_rejected(h.wait(sh), what);
    }
    sh.barrier_all()
}

fn errors(sh: &Shmem, e: &Env) -> Result<()> {
    let n = e.n();
    let buf = sh.calloc::<f32>(64)?;
    let input = heap(sh, buf.slice(0..8)?, DType::F32, &[8]);
    let out = Local::new(sh, &[8], &[0f32; 8])?;
    let bad = e.me == 0;
    let l = e.q.list();

    let op = if bad { "avg" } else { "sum" };
    let h = e
        .ops
        .one_shot_all_reduce(sh, l, &e.g, &input, None, op, &out.op);
    one_bad(
        sh,
        e,
        "reduce_op",
        "one_shot_all_reduce: only sum is supported for now.",
        h,
    )?;

    let short = Local::new(sh, &[7], &[0f32; 7])?;
    let o = if bad { &short.op } else { &out.op };
    let h = e
        .ops
        .one_shot_all_reduce(sh, l, &e.g, &input, None, "sum", o);
    let msg =
        "one_shot_all_reduce: input/output size mismatch, input.sizes(): [8], output.sizes(): [7]";
    one_bad(sh, e, "size mismatch", msg, h)?;

    let i = if bad { &out.op } else { &input };
    let h = e
        .ops
        .one_shot_all_reduce(sh, l, &e.g, i, None, "sum", &out.op);
    one_bad(
        sh,
        e,
        "not symmetric",
        "one_shot_all_reduce: input must be allocated with empty_strided_p2p().",
        h,
    )?;

    let big = Local::new(sh, &[9], &[0f32; 9])?;
    let li = if bad { &big.op } else { &out.op };
    let h = e
        .ops
        .one_shot_all_reduce(sh, l, &e.g, &input, Some(li), "sum", &out.op);
    let msg = "one_shot_all_reduce: local input size must be smaller than symm buffer size.";
    one_bad(sh, e, "local input", msg, h)?;

    // Every rank with a dtype upstream does not dispatch: each its own error.
    let bfbuf = sh.calloc::<u16>(64)?;
    let half = heap(sh, bfbuf.slice(0..8)?, DType::F16, &[8]);
    let (_hbuf, hout) = local_raw(sh, DType::F16, &[8])?;
    let r = e
        .ops
        .one_shot_all_reduce(sh, l, &e.g, &half, None, "sum", &hout)
        .and_then(|h| h.wait(sh));
    own(
        r,
        "\"one_shot_all_reduce\" not implemented for 'Half'",
        "half",
    );
    sh.barrier_all()?;

    // bfloat16 one element in: 2-byte aligned.
    let skew = heap(sh, bfbuf.slice(1..9)?, DType::BF16, &[8]);
    let fine = heap(sh, bfbuf.slice(16..24)?, DType::BF16, &[8]);
    let i = if bad { &skew } else { &fine };
    let h = e.ops.two_shot_all_reduce(sh, l, &e.g, i, None, "sum");
    let msg = "two_shot_all_reduce<BFloat16>: input ptr + offset must be at least 4-byte aligned.";
    one_bad(sh, e, "alignment", msg, h)?;

    // reduce_scatter: 8 * n - 2 elements (alignment 8 bytes) are not divisible by n * 2; 8 * n are by n * 4.
    let odd = heap(sh, buf.slice(0..8 * n - 2)?, DType::F32, &[8 * n - 2]);
    let even = heap(sh, buf.slice(0..8 * n)?, DType::F32, &[8 * n]);
    let rs_out = Local::new(sh, &[8], &[0f32; 8])?;
    let i = if bad { &odd } else { &even };
    let h = e.ops.reduce_scatter_out(sh, l, &e.g, i, false, &rs_out.op);
    let align = alignment((8 * n - 2) * 4).min(16);
    let msg = format!(
        "expected number of elements to be divisible by world_size * alignment, number of elements {} world size {n}alignment {align}",
        8 * n - 2
    );
    one_bad(sh, e, "reduce_scatter divisibility", &msg, h)?;

    // split_last_dim with an output whose last dimension is not the input's / world size.
    let rows = heap(sh, buf.slice(0..8 * n)?, DType::F32, &[2, 4 * n]);
    let wrong = Local::new(sh, &[2, 2], &[0f32; 4])?;
    let right = Local::new(sh, &[2, 4], &[0f32; 8])?;
    let o = if bad { &wrong.op } else { &right.op };
    let h = e.ops.reduce_scatter_out(sh, l, &e.g, &rows, true, o);
    let msg = "reduce_scatter expected output last dim size to be input last dim size / world_size";
    one_bad(sh, e, "split_last_dim", msg, h)?;

    // A symmetric argument that differs: a mismatch on every rank.
    let other = heap(sh, buf.slice(8..16)?, DType::F32, &[8]);
    let i = if bad { &other } else { &input };
    let r = e
        .ops
        .one_shot_all_reduce(sh, l, &e.g, i, None, "sum", &out.op)
        .and_then(|h| h.wait(sh));
    assert!(
        matches!(r, Err(Error::Mismatch { .. })),
        "a different buffer: {r:?}"
    );
    sh.barrier_all()?;

    // memset32_ / stream_write_value32_: returned at once, nothing enqueued.
    let t = sh.calloc::<u32>(8)?;
    let tv = heap(sh, t, DType::I32, &[8]);
    let fv = heap(sh, buf.slice(0..8)?, DType::F32, &[8]);
    let m = |r: Result<OpHandle>, msg: &str, what: &str| own(r.map(|_| ()), msg, what);
    m(
        e.ops.memset32(sh, l, &fv, 0, 1, 1),
        "symm_mem::memset32_: input must be a flat, contiguous uint32 tensor.",
        "memset32 dtype",
    );
    m(
        e.ops.memset32(sh, l, &tv, -1, 1, 1),
        "symm_mem::memset32_: offset must be greater than or equal to 0 (got -1)",
        "memset32 offset",
    );
    m(
        e.ops.memset32(sh, l, &tv, 0, 1, 0),
        "symm_mem::memset32_: count must be a positive integer (got 0)",
        "memset32 count",
    );
    m(
        e.ops.memset32(sh, l, &tv, 0, 1 << 32, 1),
        "symm_mem::memset32_: val must be in the range of [0, 4294967295] (uint32_t).",
        "memset32 val",
    );
    m(
        e.ops.memset32(sh, l, &tv, 6, 1, 3),
        "symm_mem::memset32_: offset + count (9) exceeded the numel of the input (8)",
        "memset32 range",
    );
    m(
        e.ops.stream_write_value32(sh, l, &tv, -2, 1),
        "symm_mem::stream_write_value32_: offset must be greater than or equal to 0 (got -2)",
        "write32 offset",
    );
    m(
        e.ops.stream_write_value32(sh, l, &tv, 0, -1),
        "symm_mem::stream_write_value32_: val must be in the range of [0, 4294967295] (uint32_t).",
        "write32 val",
    );
    m(
        e.ops.stream_write_value32(sh, l, &tv, 8, 1),
        "symm_mem::stream_write_value32_: offset (8) exceeded the numel of the input (8)",
        "write32 range",
    );
    assert_eq!(read(sh, t), vec![0u32; 8], "nothing was written");

    // The group works after the errors.
    sh.put(buf.slice(0..8)?, &[1.0f32; 8], sh.my_pe())?;
    sh.barrier_all()?;
    done(
        sh,
        e.ops
            .one_shot_all_reduce(sh, l, &e.g, &input, None, "sum", &out.op),
    )?;
    assert_eq!(
        out.read::<f32>(),
        vec![n as f32; 8],
        "the op after the errors"
    );
    sh.barrier_all()?;
    sh.free(t)?;
    sh.free(bfbuf)?;
    sh.free(buf)
}

fn all_cases(sh: &Shmem) -> Result<()> {
    let e = Env::new(sh)?;
    one_shot::<f32>(sh, &e)?;
    one_shot::<u16>(sh, &e)?;
    two_shot::<f32>(sh, &e)?;
    two_shot::<u16>(sh, &e)?;
    reduce_scatter::<f32>(sh, &e)?;
    reduce_scatter::<u16>(sh, &e)?;
    memset_and_write(sh, &e)?;
    errors(sh, &e)?;
    sh.barrier_all()
}

#[test]
fn bf16_reference_rounds_to_nearest_even() {
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to even (1); just above it rounds up.
    assert_eq!(bf16_nearest(1.0 + 1.0 / 256.0), 0x3F80);
    assert_eq!(bf16_nearest(1.0 + 1.0 / 256.0 + 1.0 / 4096.0), 0x3F81);
    // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
    assert_eq!(bf16_nearest(1.0 + 3.0 / 256.0), 0x3F82);
    assert_eq!(bf16_nearest(-2.5), 0xC020);
    assert_eq!(<u16 as Elem>::add(0x3F80, 0x3F80), 0x4000); // 1 + 1 = 2
}

pe_test!(
    symm_kernels,
    dev [2, 3, 4],
    |sh| { all_cases(sh) });
