//! symm_mem's collective kernels for Intel GPUs (`triton-bridge/kernels/symm_mem.cl`: one-shot and two-shot
//! all-reduce, reduce-scatter, memset32, stream_write_value32) on device heaps of several processes on ze-emu, linked
//! with the committed device-library bitcode. Upstream's cases (test_symmetric_memory.py's sizes, offsets, dtypes)
//! with upstream's semantics, which the CPU registration (`triton-bridge/xpushmem/torch/_symm_ops.py`) also has: every
//! result is compared bit for bit with a host reference that adds the PEs' values in rank order in the element type
//! (float32; bfloat16 rounded to the nearest, ties to even, after each addition), and the elements around the
//! tensor must stay untouched.

use std::path::{Path, PathBuf};
use xpushmem::{Device, KernelArg, Shmem, SymSlice};
use xpushmem_tests::device_build;

const SPV_VAR: &str = "XPUSHMEM_TEST_SYMM_KERNELS_SPV";
/// Work-items of the one work-group each PE launches.
const GROUP: u32 = 64;

/// Compile triton-bridge/kernels/symm_mem.cl and link it with the committed device-library bitcode.
fn build_linked(dir: &Path) -> PathBuf {
    let src = device_build::root().join("triton-bridge/kernels/symm_mem.cl");
    device_build::link_with_library(&src, dir, "symm_mem.spv")
}

/// Run every case on `n` device-heap PEs; the parent builds the linked module once and passes its path.
fn symm_kernels_test(func: &str, n: usize) {
    let name = xpushmem_tests::test_name(module_path!(), func);
    if xpushmem_tests::is_pe_of(&name) {
        let spv =
            std::fs::read(std::env::var(SPV_VAR).expect("module path")).expect("linked module");
        xpushmem_tests::run_pe(|sh| {
            let dev = sh.device().expect("a device heap");
            let module = dev.load_module(&spv)?;
            dev.init_module(&module)?;
            all_cases(sh, &Lib { dev, module })
        });
    }
    let dir = std::env::temp_dir().join(format!("xpushmem-symm-{}-{func}", std::process::id()));
    let spv = build_linked(&dir);
    let mut env = xpushmem_tests::device_env();
    env.push((SPV_VAR.into(), spv.display().to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = xpushmem_tests::spawn_pes_with(&name, n, &env);
    let _ = std::fs::remove_dir_all(&dir);
    xpushmem_tests::assert_success(&name, n, &out);
}

struct Lib<'a> {
    dev: Device<'a>,
    module: xpushmem::device::Module,
}

impl Lib<'_> {
    /// Launch `name` as one work-group of GROUP items and return the kernel's status word.
    fn run(&self, sh: &Shmem, name: &str, args: &[KernelArg], status: SymSlice<i32>) -> i32 {
        let k = self.dev.kernel(&self.module, name).expect(name);
        // SAFETY: the kernels touch only the heap buffers passed as arguments (within the extents the test gives
        // them), the peers' copies of the same buffers through the device library, and the library's scratch;
        // every PE launches one work-group.
        unsafe { self.dev.launch(&k, args, [1, 1, 1], [GROUP, 1, 1]) }
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut st = [0i32];
        sh.get(&mut st, status, sh.my_pe()).expect("status");
        st[0]
    }
}

fn sym<T: xpushmem::Symmetric>(s: SymSlice<T>, pe: usize) -> KernelArg {
    KernelArg::sym(s, pe)
}

/// An element type of the kernels: float32 (`f32`) or bfloat16 (its bits, `u16`).
trait Elem: xpushmem::Symmetric + Copy + PartialEq + std::fmt::Debug + Default {
    /// The kernels' name suffix.
    const SUF: &'static str;
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

// ---- one-shot all-reduce -------------------------------------------------------------------------------------

/// test_one_shot_all_reduce: sizes 4, 8192, 8196 bytes, element offsets 0 and 16, with and without the copy of a
/// local input.
fn one_shot<T: Elem>(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
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
        let local = sh.malloc::<T>(numel)?;
        let out = sh.calloc::<T>(numel)?;
        let status = sh.calloc::<i32>(1)?;
        let mine = values::<T>(me, total, salt);
        sh.put(buf, &mine, me)?;
        sh.put(local, &values::<T>(me, numel, salt + 1000), me)?;
        let args = [
            sym(buf.slice(offset..offset + numel)?, me),
            sym(local, me),
            KernelArg::U32(copy as u32),
            KernelArg::U64(numel as u64),
            sym(out, me),
            KernelArg::U64(numel as u64),
            sym(status, me),
        ];
        let name = format!("k_one_shot_all_reduce_{}", T::SUF);
        assert_eq!(lib.run(sh, &name, &args, status), 0, "{what}: status");
        let inputs: Vec<Vec<T>> = (0..n)
            .map(|pe| {
                if copy {
                    values::<T>(pe, numel, salt + 1000)
                } else {
                    values::<T>(pe, total, salt)[offset..offset + numel].to_vec()
                }
            })
            .collect();
        let want: Vec<T> = (0..numel).map(|i| rank_order_sum(&inputs, i)).collect();
        assert_eq!(read(sh, out), want, "{what}: out");
        let mut buf_want = mine.clone();
        if copy {
            buf_want[offset..offset + numel].copy_from_slice(&inputs[me]);
        }
        assert_eq!(read(sh, buf), buf_want, "{what}: the symmetric buffer");
        sh.free(status)?;
        sh.free(out)?;
        sh.free(local)?;
        sh.free(buf)?;
    }
    Ok(())
}

// ---- two-shot all-reduce -------------------------------------------------------------------------------------

/// test_two_shot_all_reduce: a 16384-element zeroed buffer, the tensor 8 bytes in, 4, 8192 and 8196 bytes long,
/// in place and out of place; upstream's slice partition (its alignment in bytes, as upstream computes it).
fn two_shot<T: Elem>(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let cases = [4usize, 8192, 8196]
        .into_iter()
        .flat_map(|s| [true, false].map(move |i| (s, i)));
    for (salt, (size_bytes, inplace)) in (200u64..).zip(cases) {
        let what = format!("two_shot {} {size_bytes} B, in place {inplace}", T::SUF);
        let shift = 8 / T::size();
        let numel = size_bytes / T::size();
        let t = sh.calloc::<T>(16384)?;
        let out = sh.calloc::<T>(numel)?;
        let status = sh.calloc::<i32>(1)?;
        let inputs: Vec<Vec<T>> = (0..n).map(|pe| values::<T>(pe, numel, salt)).collect();
        let res = t.slice(shift..shift + numel)?;
        sh.put(res, &inputs[me], me)?;
        let align = alignment(shift * T::size()).min(alignment(numel * T::size()));
        let want: Vec<T> = (0..numel).map(|i| rank_order_sum(&inputs, i)).collect();
        let mut t_want = vec![T::default(); 16384];
        if inplace {
            let per_rank = round_up(numel, align * n) / n;
            let args = [
                sym(res, me),
                KernelArg::U64(numel as u64),
                KernelArg::U64(per_rank as u64),
                sym(status, me),
            ];
            let name = format!("k_two_shot_all_reduce_inplace_{}", T::SUF);
            assert_eq!(lib.run(sh, &name, &args, status), 0, "{what}: status");
            t_want[shift..shift + numel].copy_from_slice(&want);
        } else {
            let per_rank = round_up(numel, align / T::size() * n) / n;
            let args = [
                sym(res, me),
                sym(out, me),
                KernelArg::U64(numel as u64),
                KernelArg::U64(per_rank as u64),
                sym(status, me),
            ];
            let name = format!("k_two_shot_all_reduce_out_{}", T::SUF);
            assert_eq!(lib.run(sh, &name, &args, status), 0, "{what}: status");
            assert_eq!(read(sh, out), want, "{what}: output");
            // This PE's slice of its input holds the reduced values, the rest its own input.
            let (lo, hi) = ((per_rank * me).min(numel), (per_rank * (me + 1)).min(numel));
            t_want[shift..shift + numel].copy_from_slice(&inputs[me]);
            t_want[shift + lo..shift + hi].copy_from_slice(&want[lo..hi]);
        }
        // In place: the result on every PE; head and tail never written.
        assert_eq!(read(sh, t), t_want, "{what}: the symmetric buffer");
        sh.free(status)?;
        sh.free(out)?;
        sh.free(t)?;
    }
    Ok(())
}

// ---- reduce-scatter ------------------------------------------------------------------------------------------

/// test_reduce_scatter: the tensor 8 bytes into a zeroed buffer, 128 and 8192 bytes long (at 2 PEs), flat or
/// viewed as rows of 128 bytes split along the last dimension.
fn reduce_scatter<T: Elem>(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let cases = [128usize, 8192]
        .into_iter()
        .flat_map(|s| [true, false].map(move |d| (s, d)));
    for (salt, (size_bytes, split_last_dim)) in (300u64..).zip(cases) {
        let what = format!(
            "reduce_scatter {} {size_bytes} B, split_last_dim {split_last_dim}",
            T::SUF
        );
        // Upstream's sizes at 2 PEs; at n PEs n / 2 times as many elements (divisible by n, as the host checks).
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
        let status = sh.calloc::<i32>(1)?;
        let inputs: Vec<Vec<T>> = (0..n).map(|pe| values::<T>(pe, numel, salt)).collect();
        let res = t.slice(shift..shift + numel)?;
        sh.put(res, &inputs[me], me)?;
        let args = [
            sym(res, me),
            sym(out, me),
            KernelArg::U64(numel as u64),
            KernelArg::U64(last as u64),
            sym(status, me),
        ];
        let name = format!("k_reduce_scatter_{}", T::SUF);
        assert_eq!(lib.run(sh, &name, &args, status), 0, "{what}: status");
        let per = numel / n;
        let want: Vec<T> = (0..per)
            .map(|i| {
                let idx = if split_last_dim {
                    let w = last / n;
                    i / w * last + w * me + i % w
                } else {
                    per * me + i
                };
                rank_order_sum(&inputs, idx)
            })
            .collect();
        assert_eq!(read(sh, out), want, "{what}: output");
        let mut t_want = vec![T::default(); len];
        t_want[shift..shift + numel].copy_from_slice(&inputs[me]);
        assert_eq!(read(sh, t), t_want, "{what}: the input is not written");
        sh.free(status)?;
        sh.free(out)?;
        sh.free(t)?;
    }
    Ok(())
}

// ---- memset32, stream_write_value32 --------------------------------------------------------------------------

/// test_memset32 and test_stream_write_value32 (their data parts; the argument checks are the host's).
fn memset_and_write(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    let me = sh.my_pe();
    let t = sh.calloc::<u32>(64)?;
    let status = sh.calloc::<i32>(1)?;
    for (offset, val, count) in [
        (32u64, 1u32, 16u64),
        (0, 1, 64),
        (63, 1, 1),
        (5, u32::MAX, 3),
    ] {
        let k = lib.dev.kernel(&lib.module, "k_memset32")?;
        let args = [
            sym(t, me),
            KernelArg::U64(offset),
            KernelArg::U32(val),
            KernelArg::U64(count),
        ];
        // SAFETY: the kernel writes words [offset, offset + count) of `t`, inside its 64 words.
        unsafe { lib.dev.launch(&k, &args, [1, 1, 1], [GROUP, 1, 1]) }?;
        let got = read(sh, t);
        if (offset, count) == (32, 16) {
            assert!(got[..32].iter().all(|&v| v == 0), "memset32: head");
            assert!(got[32..48].iter().all(|&v| v == 1), "memset32: range");
            assert!(got[48..].iter().all(|&v| v == 0), "memset32: tail");
        }
        let r = offset as usize..(offset + count) as usize;
        assert!(
            got[r.clone()].iter().all(|&v| v == val),
            "memset32 {r:?} = {val}"
        );
    }
    let mut want = vec![1u32; 64];
    want[5..8].fill(u32::MAX);
    assert_eq!(read(sh, t), want, "memset32: the whole tensor");

    let w = sh.calloc::<u32>(4)?;
    for i in 0..4u64 {
        let args = [
            sym(w, me),
            KernelArg::U64(i),
            KernelArg::U32(1),
            sym(status, me),
        ];
        assert_eq!(
            lib.run(sh, "k_stream_write_value32", &args, status),
            0,
            "stream_write_value32 status"
        );
        let want: Vec<u32> = (0..4).map(|j| u32::from(j <= i)).collect();
        assert_eq!(read(sh, w), want, "stream_write_value32 at {i}");
    }
    let args = [
        sym(w, me),
        KernelArg::U64(3),
        KernelArg::U32(u32::MAX),
        sym(status, me),
    ];
    assert_eq!(lib.run(sh, "k_stream_write_value32", &args, status), 0);
    assert_eq!(
        read(sh, w),
        vec![1, 1, 1, u32::MAX],
        "stream_write_value32 max"
    );
    sh.free(w)?;
    sh.free(status)?;
    sh.free(t)?;
    Ok(())
}

fn all_cases(sh: &Shmem, lib: &Lib) -> xpushmem::Result<()> {
    one_shot::<f32>(sh, lib)?;
    one_shot::<u16>(sh, lib)?;
    two_shot::<f32>(sh, lib)?;
    two_shot::<u16>(sh, lib)?;
    reduce_scatter::<f32>(sh, lib)?;
    reduce_scatter::<u16>(sh, lib)?;
    memset_and_write(sh, lib)?;
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

#[test]
fn symm_kernels_2pe() {
    symm_kernels_test("symm_kernels_2pe", 2);
}

#[test]
fn symm_kernels_3pe() {
    symm_kernels_test("symm_kernels_3pe", 3);
}
