//! The rest of PyTorch's `symm_mem` kernels (`CUDASymmetricMemoryOps.cu`) on the device path: one-shot and
//! two-shot all-reduce, `reduce_scatter_out`, `memset32_` and `stream_write_value32_`, each one kernel of the op
//! module (`ops/device/symm_mem.cl`) appended to a caller's command list without waiting, like the rest of
//! [`DeviceOps`].
//!
//! The argument checks are upstream's, in upstream's order and with upstream's messages (the error's `reason` is
//! upstream's text, verbatim); the CPU registration (`triton-bridge/xpushmem/torch/_symm_ops.py`) makes the same
//! checks. Beyond upstream, the device path checks that `out`/`output`/`local_input` have the input's dtype
//! (upstream reinterprets their memory).
//!
//! Operands: the symmetric buffer (`input`, `symm_buffer`) must be a view of the symmetric heap
//! ([`Operand::Heap`]); an op's local input and output may be any device memory ([`Operand::Local`], e.g. a tensor
//! from a framework's caching allocator).

use crate::device::OpKernel;
use crate::device::{u32a, u64a, Arg, Ctx, DeviceOps, OpHandle};
use crate::device_abi::*;
use crate::dtype::DType;
use crate::group::Group;
use crate::plan;
use crate::tensor::{contiguous_strides, TensorView};
use xpushmem::device::queue::{CommandList, DeviceRange};
use xpushmem::{Error, Result, Shmem};

/// A tensor in device memory outside the symmetric heap.
#[derive(Debug, Clone)]
pub struct LocalTensor {
    range: DeviceRange,
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<usize>,
}

impl LocalTensor {
    /// A tensor whose element `[0, ..., 0]` is at the start of `range`; `strides` in elements (`None`: contiguous).
    /// An error when its elements do not fit in `range`.
    pub fn new(
        range: DeviceRange,
        dtype: DType,
        shape: &[usize],
        strides: Option<&[usize]>,
    ) -> Result<LocalTensor> {
        let strides = strides.map_or_else(|| contiguous_strides(shape), <[usize]>::to_vec);
        if strides.len() != shape.len() {
            return Err(Error::invalid(
                "strides",
                format!("{strides:?}"),
                format!("must have one entry per dimension of {shape:?}"),
            ));
        }
        let numel: usize = shape.iter().product();
        let extent = if numel == 0 {
            Some(0)
        } else {
            shape
                .iter()
                .zip(&strides)
                .try_fold(0usize, |acc, (&n, &s)| {
                    (n - 1).checked_mul(s).and_then(|x| x.checked_add(acc))
                })
                .and_then(|last| last.checked_add(1))
                .and_then(|e| e.checked_mul(dtype.size()))
        };
        match extent {
            Some(e) if e <= range.bytes() => Ok(LocalTensor {
                range,
                dtype,
                shape: shape.to_vec(),
                strides,
            }),
            _ => Err(Error::invalid(
                "shape",
                format!("{shape:?} strides {strides:?}"),
                format!(
                    "the tensor's elements do not fit in its {} bytes of device memory",
                    range.bytes()
                ),
            )),
        }
    }
}

/// A tensor argument of the symm ops: a view of the symmetric heap, or device memory outside it.
#[derive(Debug, Clone)]
pub enum Operand {
    /// A view of the symmetric heap.
    Heap(TensorView),
    /// Device memory outside the heap (an op's local input or output).
    Local(LocalTensor),
}

impl Operand {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Operand::Heap(v) => v.dtype(),
            Operand::Local(t) => t.dtype,
        }
    }

    /// The sizes.
    pub fn shape(&self) -> &[usize] {
        match self {
            Operand::Heap(v) => v.shape(),
            Operand::Local(t) => &t.shape,
        }
    }

    fn strides(&self) -> &[usize] {
        match self {
            Operand::Heap(v) => v.strides(),
            Operand::Local(t) => &t.strides,
        }
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// PyTorch's `is_contiguous()` (dimensions of size 1 may have any stride; an empty tensor is contiguous).
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expect = 1usize;
        for (&n, &s) in self.shape().iter().zip(self.strides()).rev() {
            if n != 1 && s != expect {
                return false;
            }
            expect *= n;
        }
        true
    }

    /// A number whose alignment (up to 16) is the data pointer's: the heap offset (every PE's heap base is
    /// page-aligned) or the device address.
    fn align_base(&self) -> usize {
        match self {
            Operand::Heap(v) => v.heap_offset(),
            Operand::Local(t) => t.range.addr() as usize,
        }
    }

    pub(crate) fn arg(&self, pe: usize) -> Arg {
        match self {
            Operand::Heap(v) => Arg::K(crate::device::elem0(v, pe)),
            Operand::Local(t) => Arg::D(t.range),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Operand::Heap(v) => v.describe(),
            Operand::Local(t) => format!("{} {:?} (local)", t.dtype.name(), t.shape),
        }
    }
}

/// c10's ScalarType name (as upstream's messages print it).
pub fn scalar_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "Float",
        DType::F16 => "Half",
        DType::BF16 => "BFloat16",
        DType::F64 => "Double",
        DType::I8 => "Char",
        DType::U8 => "Byte",
        DType::I16 => "Short",
        DType::I32 => "Int",
        DType::I64 => "Long",
    }
}

/// An argument error whose reason is upstream's message.
fn fail(name: &'static str, value: impl std::fmt::Display, msg: String) -> Error {
    Error::InvalidArgument {
        name,
        value: value.to_string(),
        reason: msg,
    }
}

fn check(cond: bool, name: &'static str, value: impl std::fmt::Display, msg: &str) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(fail(name, value, msg.to_string()))
    }
}

/// A message-less `TORCH_CHECK(expr)`: c10's generic message.
fn check_expr(cond: bool, name: &'static str, expr: &str) -> Result<()> {
    check(
        cond,
        name,
        "false",
        &format!("Expected {expr} to be true, but got false."),
    )
}

/// `AT_DISPATCH_FLOAT_AND_BFLOAT16`: float32 and bfloat16 only (`name` is the dispatch's name).
fn dispatch_dtype(t: &Operand, name: &str) -> Result<u64> {
    match t.dtype() {
        DType::F32 => Ok(XPO_DTYPE_F32),
        DType::BF16 => Ok(XPO_DTYPE_BF16),
        d => Err(fail(
            "dtype",
            d.name(),
            format!("\"{name}\" not implemented for '{}'", scalar_name(d)),
        )),
    }
}

/// `at::native::memory::get_alignment` of a byte count: the largest of 16, 8, 4, 2, 1 dividing it.
pub fn alignment(n: usize) -> usize {
    [16, 8, 4, 2].into_iter().find(|a| n % a == 0).unwrap_or(1)
}

fn get_and_verify_alignment(t: &Operand, op: &str) -> Result<usize> {
    let esz = t.dtype().size();
    let min = esz.max(4);
    let name = scalar_name(t.dtype());
    let ptr = alignment(t.align_base());
    check(
        ptr >= min,
        "input",
        t.describe(),
        &format!("{op}<{name}>: input ptr + offset must be at least {min}-byte aligned."),
    )?;
    let size = alignment(t.numel() * esz);
    check(
        size >= min,
        "input",
        t.describe(),
        &format!("{op}<{name}>: input size must be at least {min}-byte aligned."),
    )?;
    Ok(ptr.min(size))
}

/// The symmetric buffer as a heap view, or upstream's rendezvous error.
fn symmetric<'t>(t: &'t Operand, op: &str, what: &'static str) -> Result<&'t TensorView> {
    match t {
        Operand::Heap(v) => Ok(v),
        Operand::Local(_) => Err(fail(
            what,
            t.describe(),
            format!("{op}: {what} must be allocated with empty_strided_p2p()."),
        )),
    }
}

fn same_dtype(t: &Operand, input: &Operand, op: &str, what: &'static str) -> Result<()> {
    check(
        t.dtype() == input.dtype(),
        what,
        t.dtype().name(),
        &format!(
            "{op}: {what} must have the input's dtype ({}); xpushmem's device kernels do not convert",
            input.dtype().name()
        ),
    )
}

fn round_up(n: usize, m: usize) -> usize {
    n.div_ceil(m.max(1)) * m.max(1)
}

/// What an accepted reduction op launches.
#[derive(Debug, Clone)]
struct Plan {
    mode: u64,
    dtype: u64,
    buf: TensorView,
    local: Option<Operand>,
    out: Option<Operand>,
    per_rank: usize,
    last_dim: usize,
}

/// upstream's `one_shot_all_reduce_out_impl` checks; `Ok(None)`: an empty tensor, nothing to do.
fn one_shot_plan(
    input: &Operand,
    local_input: Option<&Operand>,
    reduce_op: &str,
    out: &Operand,
) -> Result<Option<Plan>> {
    const OP: &str = "one_shot_all_reduce";
    check(
        input.is_contiguous(),
        "input",
        input.describe(),
        "one_shot_all_reduce: input must be contiguous.",
    )?;
    check(
        out.is_contiguous(),
        "out",
        out.describe(),
        "one_shot_all_reduce: output must be contiguous.",
    )?;
    check(
        out.shape() == input.shape(),
        "out",
        format!("{:?}", out.shape()),
        &format!(
            "one_shot_all_reduce: input/output size mismatch, input.sizes(): {:?}, output.sizes(): {:?}",
            input.shape(),
            out.shape()
        ),
    )?;
    check(
        reduce_op == "sum",
        "reduce_op",
        reduce_op,
        "one_shot_all_reduce: only sum is supported for now.",
    )?;
    if let Some(l) = local_input {
        check(
            l.is_contiguous(),
            "local_input",
            l.describe(),
            "one_shot_all_reduce: local input must be contiguous.",
        )?;
        check(
            l.numel() <= input.numel(),
            "local_input",
            l.numel(),
            "one_shot_all_reduce: local input size must be smaller than symm buffer size.",
        )?;
    }
    if input.numel() == 0 {
        check_expr(
            input.dtype() == out.dtype(),
            "out",
            "input.scalar_type() == out.scalar_type()",
        )?;
        return Ok(None);
    }
    let buf = symmetric(input, OP, "input")?;
    let align = get_and_verify_alignment(input, OP)?;
    if let Some(l) = local_input {
        let local_align = get_and_verify_alignment(l, OP)?;
        check(
            align == local_align,
            "local_input",
            l.describe(),
            "one_shot_all_reduce: local input and symm buffer must have the same alignment.",
        )?;
    }
    let dtype = dispatch_dtype(input, OP)?;
    same_dtype(out, input, OP, "out")?;
    if let Some(l) = local_input {
        same_dtype(l, input, OP, "local_input")?;
    }
    Ok(Some(Plan {
        mode: if local_input.is_some() {
            XPO_SYMM_ONE_SHOT_COPY
        } else {
            XPO_SYMM_ONE_SHOT
        },
        dtype,
        buf: buf.clone(),
        local: local_input.cloned(),
        out: Some(out.clone()),
        per_rank: 0,
        last_dim: 0,
    }))
}

/// upstream's `two_shot_all_reduce_impl` checks and slice partition (`output` None: in place).
fn two_shot_plan(
    input: &Operand,
    output: Option<&Operand>,
    reduce_op: &str,
    w: usize,
) -> Result<Option<Plan>> {
    const OP: &str = "two_shot_all_reduce";
    check(
        input.is_contiguous(),
        "input",
        input.describe(),
        "two_shot_all_reduce: input must be contiguous.",
    )?;
    check(
        reduce_op == "sum",
        "reduce_op",
        reduce_op,
        "two_shot_all_reduce: only sum is supported for now.",
    )?;
    let buf = symmetric(input, OP, "input")?;
    let align = get_and_verify_alignment(input, OP)?;
    if let Some(o) = output {
        check(
            o.is_contiguous(),
            "output",
            o.describe(),
            "two_shot_all_reduce: output must be contiguous.",
        )?;
        let out_align = get_and_verify_alignment(o, OP)?;
        check(
            align <= out_align,
            "output",
            o.describe(),
            "two_shot_all_reduce: output alignment must be equal to or larger than input.",
        )?;
        check(
            o.shape() == input.shape(),
            "output",
            format!("{:?}", o.shape()),
            &format!(
                "two_shot_all_reduce: input/output size mismatch, input.sizes(): {:?}, output.sizes(): {:?}",
                input.shape(),
                o.shape()
            ),
        )?;
        if input.numel() == 0 {
            check_expr(
                o.dtype() == input.dtype(),
                "output",
                "output->scalar_type() == input.scalar_type()",
            )?;
            return Ok(None);
        }
    } else if input.numel() == 0 {
        return Ok(None);
    }
    let dtype = dispatch_dtype(input, OP)?;
    let numel = input.numel();
    let esz = input.dtype().size();
    let (mode, per_rank) = match output {
        Some(o) => {
            same_dtype(o, input, OP, "output")?;
            (XPO_SYMM_TWO_SHOT_OUT, round_up(numel, align / esz * w) / w)
        }
        // upstream partitions in place with its alignment in bytes (kept: it only moves the slice edges).
        None => (XPO_SYMM_TWO_SHOT_INPLACE, round_up(numel, align * w) / w),
    };
    Ok(Some(Plan {
        mode,
        dtype,
        buf: buf.clone(),
        local: None,
        out: output.cloned(),
        per_rank,
        last_dim: 0,
    }))
}

/// upstream's `reduce_scatter_out` checks.
fn reduce_scatter_plan(
    input: &Operand,
    split_last_dim: bool,
    output: &Operand,
    w: usize,
) -> Result<Option<Plan>> {
    const OP: &str = "reduce_scatter";
    check(
        input.is_contiguous(),
        "input",
        input.describe(),
        "reduce_scatter: input must be contiguous.",
    )?;
    check(
        output.is_contiguous(),
        "output",
        output.describe(),
        "reduce_scatter: output must be contiguous.",
    )?;
    let buf = symmetric(input, OP, "input")?;
    let align = get_and_verify_alignment(input, OP)?;
    // (sic) upstream verifies the input's alignment a second time where it means the output's.
    let out_align = get_and_verify_alignment(input, OP)?;
    let esz = input.dtype().size();
    let per_vec = align / esz;
    let (ishape, oshape) = (input.shape(), output.shape());
    check(
        input.numel() % (w * per_vec) == 0,
        "input",
        input.numel(),
        &format!(
            "expected number of elements to be divisible by world_size * alignment, number of elements {} world size {w}alignment {align}",
            input.numel()
        ),
    )?;
    let last = ishape.last().copied().unwrap_or(1);
    if split_last_dim {
        check_expr(
            ishape.len() == oshape.len(),
            "output",
            "input.dim() == output.dim()",
        )?;
        let d = ishape.len().saturating_sub(1);
        check(
            ishape[..d] == oshape[..d],
            "output",
            format!("{oshape:?}"),
            "reduce_scatter expected input and output to have same sizes except in the last dimension",
        )?;
        check(
            oshape.last().copied().unwrap_or(1) == last / w,
            "output",
            format!("{oshape:?}"),
            "reduce_scatter expected output last dim size to be input last dim size / world_size",
        )?;
        check(
            last % (w * per_vec) == 0,
            "input",
            last,
            &format!(
                "expected last dimension to be divisible by world_size * alignment, last dimension {last} world size {w}alignment {align}"
            ),
        )?;
    } else {
        check(
            ishape.len() == 1,
            "input",
            format!("{ishape:?}"),
            "reduce_scatter expected 1D input",
        )?;
        check(
            oshape.len() == 1,
            "output",
            format!("{oshape:?}"),
            "reduce_scatter expected 1D output",
        )?;
        check_expr(
            output.numel() == input.numel() / w,
            "output",
            "output.numel() == input.numel() / symm_mem->get_world_size()",
        )?;
    }
    if input.numel() == 0 {
        check_expr(
            input.dtype() == output.dtype(),
            "output",
            "input.scalar_type() == output.scalar_type()",
        )?;
        return Ok(None);
    }
    check(
        out_align >= align,
        "output",
        output.describe(),
        "reduce_scatter: output alignment should be not smaller than input alignment",
    )?;
    // (sic) upstream's dispatch name.
    let dtype = dispatch_dtype(input, "two_shot_all_reduce")?;
    same_dtype(output, input, OP, "output")?;
    let (per_rank, last_dim) = if split_last_dim {
        (last / w, last)
    } else {
        (input.numel() / w, 0)
    };
    Ok(Some(Plan {
        mode: XPO_SYMM_REDUCE_SCATTER,
        dtype,
        buf: buf.clone(),
        local: None,
        out: Some(output.clone()),
        per_rank,
        last_dim,
    }))
}

const UINT32_MAX: i64 = u32::MAX as i64;

/// The checks `memset32_` and `stream_write_value32_` share: a flat, contiguous 32-bit tensor (the C ABI has no
/// uint32 code: a torch caller checks `torch.uint32` itself and passes it as int32) and `offset >= 0`.
fn check_flat_u32(op: &str, input: &Operand, offset: i64) -> Result<()> {
    check(
        input.shape().len() == 1 && input.is_contiguous() && input.dtype() == DType::I32,
        "input",
        input.describe(),
        &format!("symm_mem::{op}: input must be a flat, contiguous uint32 tensor."),
    )?;
    check(
        offset >= 0,
        "offset",
        offset,
        &format!("symm_mem::{op}: offset must be greater than or equal to 0 (got {offset})"),
    )
}

fn check_val(op: &str, val: i64) -> Result<()> {
    check(
        (0..=UINT32_MAX).contains(&val),
        "val",
        val,
        &format!("symm_mem::{op}: val must be in the range of [0, 4294967295] (uint32_t)."),
    )
}

/// The symm ops on the device (see the module docs). Each returns once the kernel is appended; the outcome comes
/// from [`OpHandle::wait`]. A rank whose arguments are rejected still launches the kernel with a "rejected" flag
/// (its peers then fail with "group rank r (PE p) rejected its arguments" instead of waiting for it); its own
/// error is both returned by [`OpHandle::rejected`] at once and reported by [`OpHandle::wait`].
impl DeviceOps {
    #[allow(clippy::too_many_arguments)]
    fn symm_reduce(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        me: usize,
        op: &'static str,
        plan: Result<Option<Plan>>,
    ) -> Result<OpHandle> {
        let plan = match plan {
            Ok(None) => return Ok(OpHandle::done(self.module.clone(), op)),
            Ok(Some(p)) => Ok(p),
            Err(e) => Err(e),
        };
        let pe = sh.my_pe();
        let w = group.size();
        let region = Arg::K(self.region_arg());
        let (body, digest, ours) = match &plan {
            Ok(p) => {
                let numel = p.buf.numel();
                let words = [
                    20 + p.mode,
                    w as u64,
                    group.id(),
                    p.dtype,
                    p.buf.heap_offset() as u64,
                    numel as u64,
                    p.per_rank as u64,
                    p.last_dim as u64,
                ];
                let body = vec![
                    u32a(p.mode),
                    u32a(p.dtype),
                    Arg::K(crate::device::elem0(&p.buf, pe)),
                    p.local.as_ref().map_or(region, |l| l.arg(pe)),
                    u64a(p.local.as_ref().map_or(0, Operand::numel) as u64),
                    p.out.as_ref().map_or(region, |o| o.arg(pe)),
                    u64a(numel as u64),
                    u64a(p.per_rank as u64),
                    u64a(p.last_dim as u64),
                ];
                (body, plan::digest(&words), p.buf.describe())
            }
            Err(_) => {
                let body = vec![
                    u32a(0u32),
                    u32a(0u32),
                    region,
                    region,
                    u64a(0),
                    region,
                    u64a(0),
                    u64a(0),
                    u64a(0),
                ];
                (body, 0, "rejected arguments".to_string())
            }
        };
        self.launch(
            sh,
            list,
            Some((group, me)),
            op,
            OpKernel::SymmReduce,
            plan.err(),
            digest,
            body,
            Vec::new(),
            Ctx::with_ours(ours),
        )
    }

    /// `one_shot_all_reduce[_out]` (`local_input` None) and `one_shot_all_reduce_copy[_out]`: every rank's `out`
    /// becomes the sum over the group of the ranks' `input` (a symmetric buffer), added in group-rank order in the
    /// element type; with `local_input`, its elements are first copied into this rank's `input`.
    #[allow(clippy::too_many_arguments)]
    pub fn one_shot_all_reduce(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        input: &Operand,
        local_input: Option<&Operand>,
        reduce_op: &str,
        out: &Operand,
    ) -> Result<OpHandle> {
        const OP: &str = "one_shot_all_reduce";
        let me = group.rank_for(sh, OP)?;
        let plan = one_shot_plan(input, local_input, reduce_op, out);
        self.symm_reduce(sh, list, group, me, OP, plan)
    }

    /// `two_shot_all_reduce_` (`output` None: in place in every rank's `input`) and `two_shot_all_reduce_out`:
    /// rank r sums its slice of the elements (upstream's partition) over the group; in place it writes the slice
    /// into every rank's `input`, out of place into its own `input`, from which every rank gathers `output`.
    pub fn two_shot_all_reduce(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        input: &Operand,
        output: Option<&Operand>,
        reduce_op: &str,
    ) -> Result<OpHandle> {
        const OP: &str = "two_shot_all_reduce";
        let me = group.rank_for(sh, OP)?;
        let plan = two_shot_plan(input, output, reduce_op, group.size());
        self.symm_reduce(sh, list, group, me, OP, plan)
    }

    /// `reduce_scatter_out`: rank r's `output` becomes the sum over the group of slice r of the ranks' `input`:
    /// of the flat tensor, or (`split_last_dim`) of its last dimension.
    pub fn reduce_scatter_out(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        input: &Operand,
        split_last_dim: bool,
        output: &Operand,
    ) -> Result<OpHandle> {
        const OP: &str = "reduce_scatter";
        let me = group.rank_for(sh, OP)?;
        let plan = reduce_scatter_plan(input, split_last_dim, output, group.size());
        self.symm_reduce(sh, list, group, me, OP, plan)
    }

    #[allow(clippy::too_many_arguments)]
    fn write32(
        &self,
        sh: &Shmem,
        list: CommandList,
        op: &'static str,
        kind: u64,
        at: Arg,
        count: usize,
        val: u32,
    ) -> Result<OpHandle> {
        let body = vec![u32a(kind), at, u64a(count as u64), u32a(val)];
        self.launch(
            sh,
            list,
            None,
            op,
            OpKernel::SymmWrite32,
            None,
            0,
            body,
            Vec::new(),
            Ctx::default(),
        )
    }

    /// `memset32_(input, offset, val, count)`: words `[offset, offset + count)` of a flat 32-bit tensor set to
    /// `val`, in queue order. Argument errors are returned at once (nothing is enqueued).
    pub fn memset32(
        &self,
        sh: &Shmem,
        list: CommandList,
        input: &Operand,
        offset: i64,
        val: i64,
        count: i64,
    ) -> Result<OpHandle> {
        const OP: &str = "memset32_";
        check_flat_u32(OP, input, offset)?;
        check(
            count > 0,
            "count",
            count,
            &format!("symm_mem::{OP}: count must be a positive integer (got {count})"),
        )?;
        check_val(OP, val)?;
        let numel = input.numel() as i64;
        check(
            offset.checked_add(count).is_some_and(|e| e <= numel),
            "count",
            count,
            &format!(
                "symm_mem::{OP}: offset + count ({}) exceeded the numel of the input ({numel})",
                offset.saturating_add(count)
            ),
        )?;
        let at = self.word_at(sh, input, offset as usize, count as usize)?;
        self.write32(
            sh,
            list,
            OP,
            XPO_WRITE32_MEMSET,
            at,
            count as usize,
            val as u32,
        )
    }

    /// `stream_write_value32_(input, offset, val)`: one 32-bit release store of `val` at word `offset`, ordered
    /// after everything enqueued before it. Argument errors are returned at once (nothing is enqueued).
    pub fn stream_write_value32(
        &self,
        sh: &Shmem,
        list: CommandList,
        input: &Operand,
        offset: i64,
        val: i64,
    ) -> Result<OpHandle> {
        const OP: &str = "stream_write_value32_";
        check_flat_u32(OP, input, offset)?;
        check_val(OP, val)?;
        let numel = input.numel() as i64;
        check(
            offset < numel,
            "offset",
            offset,
            &format!("symm_mem::{OP}: offset ({offset}) exceeded the numel of the input ({numel})"),
        )?;
        let at = self.word_at(sh, input, offset as usize, 1)?;
        self.write32(sh, list, OP, XPO_WRITE32_STREAM, at, 1, val as u32)
    }

    /// Words `[offset, offset + count)` of a flat 32-bit tensor, as a kernel argument.
    fn word_at(&self, sh: &Shmem, t: &Operand, offset: usize, count: usize) -> Result<Arg> {
        match t {
            Operand::Heap(v) => Ok(Arg::K(crate::device::elem0(
                &v.narrow(0, offset, count)?,
                sh.my_pe(),
            ))),
            Operand::Local(l) => Ok(Arg::D(l.range.sub(4 * offset, 4 * count)?)),
        }
    }
}
