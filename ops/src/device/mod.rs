//! The device path: every op as one kernel (`ops/device/xpushmem_ops.cl`) enqueued on a caller's command list,
//! returning without waiting. The split exchange, the offset computation, the split checks and the data movement
//! run on the device; the host checks only what it knows without reading device memory (shapes, dtypes,
//! contiguity, aliasing, roots) and computes the argument digest.
//!
//! Each op returns an [`OpHandle`]: once the list has run it (the caller synchronises its stream, or
//! [`OpHandle::wait`] polls the op's status record), [`OpHandle::wait`] turns the kernel's status into the host
//! path's error: the same [`Error`] variant, argument and message. Collective ops agree on the device as the host
//! path does on the host: every rank fails (its own error, or "group rank r rejected its arguments", or a
//! mismatch) or none does, and a rank rejected on the host still joins the kernel's verdict step, so no rank
//! waits for it. A device-side wait that gives up reports [`Error::Timeout`], or [`Error::PeerLost`] when the PE
//! it waited for died (the device cannot see that: [`OpHandle::wait`] asks [`Shmem::check_peers`] once the
//! kernel has given up); after either the op sync state of the ranks involved is out of step (finalize).
//!
//! [`DeviceOps::new`] is collective over the world (it allocates the ops' sync region in the symmetric heap and
//! builds the kernels' module, ~seconds of JIT on ze-emu): create it once, next to the groups.

#[allow(unsafe_code)] // the op kernels' enqueue: the crate's only unsafe block
mod kernels;

pub use kernels::{OpKernel, OpsModule, OPS_KERNELS_SPIRV};

use crate::device_abi::*;
use crate::dtype::DType;
use crate::group::Group;
use crate::io::check_contiguous;
use crate::plan;
use crate::tensor::TensorView;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use xpushmem::device::queue::{CommandList, DeviceRange, HostBuf, QueueArg};
use xpushmem::{Device, Error, KernelArg, Result, Shmem, SymSlice};

fn device_of(sh: &Shmem) -> Result<Device<'_>> {
    sh.device().ok_or_else(|| {
        Error::invalid(
            "heap",
            "host",
            "the ops' device path needs device heaps (XPUSHMEM_HEAP=device)",
        )
    })
}

/// Which path the ops take (`XPUSHMEM_OPS_PATH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpsPath {
    /// Host-driven transfers (any heap).
    Host,
    /// Kernels on the device (device heaps only).
    Device,
}

/// The path `XPUSHMEM_OPS_PATH` selects for `sh`: `host`, `device` (an error on a host heap), or `auto` (device
/// for device heaps whose every PE the device maps, host otherwise: the op kernels reach mapped peers only, so a
/// job with PEs on other nodes takes the host path).
pub fn ops_path(sh: &Shmem) -> Result<OpsPath> {
    path_of(sh, true)
}

/// The path `XPUSHMEM_OPS_PATH` selects for the expert-parallel ops ([`crate::ep::TokenSwitch`]'s `_on` calls and
/// their C and PyTorch entry points): as [`ops_path`], except that `auto` takes the device path on device heaps
/// whatever the nodes: the EP kernels reach PEs on other nodes through the host proxy (the other op kernels reach
/// mapped peers only).
pub fn ep_path(sh: &Shmem) -> Result<OpsPath> {
    path_of(sh, false)
}

/// [`ops_path`] (`auto` needs every PE mapped: `needs_mapped`) or [`ep_path`].
fn path_of(sh: &Shmem, needs_mapped: bool) -> Result<OpsPath> {
    use xpushmem::config::OpsPathMode;
    let want = sh.config().ops_path;
    let device = sh.heap_kind() == xpushmem::HeapKind::Device;
    let all_mapped = || (0..sh.n_pes()).all(|pe| sh.transport_name(pe) != "fabric");
    match want {
        OpsPathMode::Host => Ok(OpsPath::Host),
        OpsPathMode::Auto if device && (!needs_mapped || all_mapped()) => Ok(OpsPath::Device),
        OpsPathMode::Auto => Ok(OpsPath::Host),
        OpsPathMode::Device if device => Ok(OpsPath::Device),
        OpsPathMode::Device => Err(Error::invalid(
            "XPUSHMEM_OPS_PATH",
            want.name(),
            "the device path needs device heaps (XPUSHMEM_HEAP=device)",
        )),
    }
}

/// The device path's per-PE state: the op kernels' module, the sync region, the groups' PE lists.
pub struct DeviceOps {
    pe: usize,
    pub(crate) module: Arc<OpsModule>,
    region: SymSlice<u64>,
    groups: Mutex<HashMap<Vec<usize>, Arc<HostBuf>>>,
    seq: AtomicU64,
}

impl std::fmt::Debug for DeviceOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceOps").field("pe", &self.pe).finish()
    }
}

/// What turns a status record into the host path's error.
#[derive(Debug, Default)]
pub(crate) struct Ctx {
    /// Name of the split argument (`in_splits`, `in_splits_offsets`).
    split_name: &'static str,
    splits: Option<TensorView>,
    oso: Option<TensorView>,
    /// This rank's symmetric arguments, for a mismatch.
    pub(crate) ours: String,
    /// Rows of the input.
    in_rows: usize,
    /// This PE's rank in the op's group (the signal pad's timeout message).
    rank: usize,
    /// An op family's own status codes: its decoder (op name, its words, code, a, b, c) and its words.
    pub(crate) codes: Option<(Decoder, Vec<u64>)>,
}

/// Turns an op family's own status code into its error (`None`: not one of its codes).
pub(crate) type Decoder = fn(&str, &[u64], u64, i64, i64, i64) -> Option<Error>;

impl Ctx {
    /// A context with only this rank's symmetric arguments (for a mismatch message).
    pub(crate) fn with_ours(ours: String) -> Ctx {
        Ctx {
            ours,
            ..Ctx::default()
        }
    }
}

/// An op enqueued on a list. Keep it until the list has run the op; [`OpHandle::wait`] reports its outcome.
/// Dropping it unwaited waits (bounded by the timeout) for the op's status, so its host buffers outlive the
/// kernel.
#[must_use = "an enqueued op reports its errors through wait()"]
pub struct OpHandle {
    module: Arc<OpsModule>,
    op: &'static str,
    seq: u64,
    status: Option<HostBuf>,
    keep: Vec<HostBuf>,
    local: Option<Error>,
    ctx: Ctx,
}

impl std::fmt::Debug for OpHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpHandle")
            .field("op", &self.op)
            .field("seq", &self.seq)
            .finish()
    }
}

impl OpHandle {
    /// A handle for an op with nothing to enqueue (e.g. an empty tensor): complete, successful.
    pub(crate) fn done(module: Arc<OpsModule>, op: &'static str) -> OpHandle {
        OpHandle {
            module,
            op,
            seq: 0,
            status: None,
            keep: Vec::new(),
            local: None,
            ctx: Ctx::default(),
        }
    }

    /// This rank's own argument error when the host rejected its arguments (the kernel was launched anyway, so
    /// that its peers fail instead of waiting for it); [`OpHandle::wait`] reports the same error.
    pub fn rejected(&self) -> Option<&Error> {
        self.local.as_ref().filter(|_| self.status.is_some())
    }

    /// The op's name.
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// Whether the op's kernel has finished (never blocks).
    pub fn is_complete(&self) -> Result<bool> {
        match &self.status {
            Some(s) => Ok(s.word(0)? == self.seq),
            None => Ok(true),
        }
    }

    /// Wait until the op's kernel has finished (the list must be running: an immediate list, or a regular list
    /// its owner has executed), then report its outcome as the host path would.
    pub fn wait(mut self, sh: &Shmem) -> Result<()> {
        let status = self.status.take();
        let keep = std::mem::take(&mut self.keep);
        let r = self.finish(sh, status.as_ref());
        if r.is_err()
            && status
                .as_ref()
                .is_some_and(|s| s.word(0).ok() != Some(self.seq))
        {
            // The kernel may still run: its buffers must outlive it.
            std::mem::forget(status);
            std::mem::forget(keep);
        }
        r
    }

    fn finish(&self, sh: &Shmem, status: Option<&HostBuf>) -> Result<()> {
        let Some(st) = status else {
            return match &self.local {
                Some(e) => Err(e.clone()),
                None => Ok(()),
            };
        };
        let dev = device_of(sh)?;
        // The kernel's own waits (at most three sync steps) are each bounded by the timeout: let them report first.
        dev.wait_host_word(st, 0, self.seq, 4, self.op)?;
        let lib = self.module.take_error(&dev, self.op);
        let code = st.word(1)?;
        let (a, b, c) = (st.word(2)? as i64, st.word(3)? as i64, st.word(4)? as i64);
        if code == XPO_OK {
            return lib;
        }
        if code == XPO_ERR_HOST_REJECT {
            return Err(self
                .local
                .clone()
                .unwrap_or_else(|| Error::State(format!("{}: rejected on the host", self.op))));
        }
        if (code == XPO_ERR_TIMEOUT && a != sh.my_pe() as i64) || code == XPO_ERR_PAD_TIMEOUT {
            // A device-side wait for a peer gave up: the device cannot learn that a mapped peer died, the host
            // can. A dead peer is the op's error, not the timeout it caused.
            if let Err(e @ Error::PeerLost { .. }) = sh.check_peers(self.op) {
                return Err(e);
            }
        }
        if code == XPO_ERR_TIMEOUT || code == XPO_ERR_DEVICE {
            lib?;
            return Err(Error::Device(format!(
                "{}: a device-side call failed (status {code}, PE {a})",
                self.op
            )));
        }
        Err(self.decode(sh, code, a, b, c))
    }

    fn decode(&self, sh: &Shmem, code: u64, a: i64, b: i64, c: i64) -> Error {
        let op = self.op;
        if let Some(e) = self
            .ctx
            .codes
            .as_ref()
            .and_then(|(f, words)| f(op, words, code, a, b, c))
        {
            return e;
        }
        let name = self.ctx.split_name;
        let read = |v: &Option<TensorView>, row: Option<usize>| -> Vec<i64> {
            v.as_ref()
                .and_then(|v| match row {
                    Some(r) => v.narrow(0, r, 1).ok(),
                    None => Some(v.clone()),
                })
                .and_then(|v| crate::io::read_i64s(sh, &v, sh.my_pe()).ok())
                .unwrap_or_default()
        };
        match code {
            XPO_ERR_SPLIT_NEGATIVE => Error::invalid(
                name,
                format!("{b} at index {a}"),
                format!("{op}: splits must be non-negative"),
            ),
            XPO_ERR_SPLIT_OVERFLOW => Error::invalid(
                name,
                format!("{:?}", read(&self.ctx.splits, None)),
                format!("{op}: the sum of the splits overflows int64"),
            ),
            XPO_ERR_SPLIT_EXCEEDS => Error::OutOfBounds {
                what: "rows of the splits",
                start: 0,
                len: a as usize,
                limit: b as usize,
                context: format!("{op}: the sum of {name} ({a}) exceeds the {b} rows of the input"),
            },
            XPO_ERR_CHUNK_NEGATIVE => Error::InvalidArgument {
                name: "in_splits_offsets",
                value: format!("split {b}, offset {c} at column {a}"),
                reason: format!("{op}: splits and offsets must be non-negative"),
            },
            XPO_ERR_CHUNK_PAST_INPUT => {
                Error::OutOfBounds {
                    what: "input rows of a chunk",
                    start: c as usize,
                    len: b as usize,
                    limit: self.ctx.in_rows,
                    context: format!("{op}: in_splits_offsets column {a} runs past the input"),
                }
            }
            XPO_ERR_RECV_NEGATIVE => {
                Error::invalid("out_splits_offsets", a, "a received count is negative")
            }
            XPO_ERR_RECV_OVERFLOW => Error::invalid(
                "out_splits_offsets",
                format!("{:?}", read(&self.ctx.oso, Some(0))),
                "received row counts overflow int64",
            ),
            XPO_ERR_OUT_TOO_SMALL => Error::OutOfBounds {
                what: "output rows",
                start: 0,
                len: a as usize,
                limit: b as usize,
                context: format!(
                    "{op}: the received splits need {a} rows of out, which has {b} (row 0 of out_splits_offsets: {:?})",
                    read(&self.ctx.oso, Some(0))
                ),
            },
            XPO_ERR_PEER_FAILED => Error::InvalidArgument {
                name: "group",
                value: format!("rank {a} (PE {b})"),
                reason: format!(
                    "{op}: group rank {a} (PE {b}) rejected its arguments (see its error); nothing was written"
                ),
            },
            XPO_ERR_MISMATCH => Error::Mismatch {
                call: op,
                pe: b as usize,
                theirs: "different symmetric arguments (buffers, shapes, dtypes or op parameters must be the same on every rank)".into(),
                reference_pe: sh.my_pe(),
                ours: self.ctx.ours.clone(),
            },
            XPO_ERR_PAD_TIMEOUT => {
                let limit = sh.config().timeout.unwrap_or_default();
                Error::Timeout {
                    op: format!("xpushmem: {op}"),
                    waited: limit,
                    limit,
                    detail: format!("; rank {}, peer rank {a}, channel {b}", self.ctx.rank),
                }
            }
            _ => Error::Device(format!("{op}: unknown device status {code} ({a}, {b}, {c})")),
        }
    }
}

impl Drop for OpHandle {
    /// A handle dropped before its kernel has finished leaks its host buffers (the kernel may still write them).
    fn drop(&mut self) {
        if let Some(st) = self.status.take() {
            if st.word(0).ok() != Some(self.seq) {
                std::mem::forget(st);
                std::mem::forget(std::mem::take(&mut self.keep));
            }
        }
    }
}

/// A kernel argument of an op's body: a value, or the address of one of the op's own host buffers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg {
    K(KernelArg),
    Keep(usize),
    /// Device memory outside the heap (an op's local input or output).
    D(DeviceRange),
}

pub(crate) fn u32a(v: impl TryInto<u32>) -> Arg {
    Arg::K(KernelArg::U32(v.try_into().unwrap_or(u32::MAX)))
}

pub(crate) fn u64a(v: u64) -> Arg {
    Arg::K(KernelArg::U64(v))
}

/// Address argument of element [0, ...] of `v` (its extent validated as a heap range).
pub(crate) fn elem0(v: &TensorView, pe: usize) -> KernelArg {
    let (_, e) = v.byte_extent();
    let first = v.heap_offset();
    KernelArg::Heap {
        off: first,
        bytes: (v.buf().heap_offset() + e).saturating_sub(first),
        pe,
    }
}

impl DeviceOps {
    /// Set up the device path on this PE: collective over the world (allocates the sync region, builds and
    /// initialises the op kernels' module). An error on a host heap.
    pub fn new(sh: &Shmem) -> Result<DeviceOps> {
        let dev = device_of(sh)?;
        let region = sh.calloc::<u64>(XPO_SYNC_WORDS_PER_PE as usize * sh.n_pes())?;
        let module = OpsModule::load(&dev)?;
        sh.barrier_all()?;
        Ok(DeviceOps {
            pe: sh.my_pe(),
            module: Arc::new(module),
            region,
            groups: Mutex::new(HashMap::new()),
            seq: AtomicU64::new(1),
        })
    }

    fn pes_of(&self, sh: &Shmem, group: &Group) -> Result<Arc<HostBuf>> {
        let mut g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = g.get(group.pes()) {
            return Ok(b.clone());
        }
        let buf = device_of(sh)?.host_buf(4 * group.size())?;
        let bytes: Vec<u8> = group
            .pes()
            .iter()
            .flat_map(|&p| (p as i32).to_ne_bytes())
            .collect();
        buf.write(0, &bytes)?;
        let buf = Arc::new(buf);
        g.insert(group.pes().to_vec(), buf.clone());
        Ok(buf)
    }

    fn start(&self, sh: &Shmem) -> Result<(u64, HostBuf)> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let st = device_of(sh)?.host_buf(8 * XPO_STATUS_WORDS as usize)?;
        Ok((seq, st))
    }

    pub(crate) fn region_arg(&self) -> KernelArg {
        KernelArg::sym(self.region, self.pe)
    }

    /// Element [0, ...] of `v` on this PE, or (for a rank rejected on the host, whose kernel only joins the
    /// verdict) the sync region.
    fn addr(&self, v: &TensorView, ok: bool) -> KernelArg {
        if ok {
            elem0(v, self.pe)
        } else {
            self.region_arg()
        }
    }

    /// Enqueue `kernel` with the group prefix (region, PE list, W, my rank), `body`, and the verdict suffix
    /// (digest, host verdict, status, sequence number).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: Option<(&Group, usize)>,
        op: &'static str,
        kernel: OpKernel,
        local: Option<Error>,
        digest: u64,
        body: Vec<Arg>,
        keep: Vec<HostBuf>,
        ctx: Ctx,
    ) -> Result<OpHandle> {
        let (seq, status) = self.start(sh)?;
        let mut a: Vec<QueueArg<'_>> = Vec::new();
        let pes;
        if let Some((g, me)) = group {
            pes = self.pes_of(sh, g)?;
            a.push(QueueArg::Kernel(self.region_arg()));
            a.push(QueueArg::Host(&pes, 0));
            a.push(QueueArg::Kernel(KernelArg::U32(g.size() as u32)));
            a.push(QueueArg::Kernel(KernelArg::U32(me as u32)));
        }
        for b in body {
            a.push(match b {
                Arg::K(k) => QueueArg::Kernel(k),
                Arg::Keep(i) => QueueArg::Host(&keep[i], 0),
                Arg::D(d) => QueueArg::Device(d),
            });
        }
        if group.is_some() {
            a.push(QueueArg::Kernel(KernelArg::U64(digest)));
            a.push(QueueArg::Kernel(KernelArg::U32(local.is_some() as u32)));
        }
        a.push(QueueArg::Host(&status, 0));
        a.push(QueueArg::Kernel(KernelArg::U64(seq)));
        self.module
            .enqueue(&device_of(sh)?, list, kernel, &a, XPO_GROUP_SIZE as u32)?;
        drop(a);
        Ok(OpHandle {
            module: self.module.clone(),
            op,
            seq,
            status: Some(status),
            keep,
            local,
            ctx,
        })
    }
}

/// The ops, enqueued on `list`. Each returns once the kernel is appended (an error here is this rank's, and no
/// kernel was enqueued only when this PE is not a member of the group); the outcome comes from
/// [`OpHandle::wait`]. Arguments, semantics and errors are the host path's (`crate::a2a`, `crate::tile`,
/// `crate::p2p`), with one extra check: `in_splits` of `all_to_all_vdev` must be contiguous.
impl DeviceOps {
    #[allow(clippy::too_many_arguments)]
    fn vfamily(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        op: &'static str,
        mode: u64,
        input: &TensorView,
        out: &TensorView,
        splits: &TensorView,
        oso: &TensorView,
        align: i64,
        prep: Result<(usize, usize)>,
        split_name: &'static str,
    ) -> Result<OpHandle> {
        let me = group.rank_for(sh, op)?;
        let mut words = vec![mode, group.size() as u64, group.id()];
        if let Ok((ne, _)) = &prep {
            words.push(*ne as u64);
        }
        input.digest_words(&mut words);
        oso.digest_words(&mut words);
        let ok = prep.is_ok();
        let (ne, row_bytes) = prep.as_ref().map_or((1, 0), |p| *p);
        let rows = |v: &TensorView| u64a(if ok { v.size(0) as u64 } else { 0 });
        let body = vec![
            u32a(mode),
            u32a(ne),
            u64a(align as u64),
            Arg::K(self.addr(input, ok)),
            rows(input),
            Arg::K(self.addr(out, ok)),
            rows(out),
            u64a(row_bytes as u64),
            Arg::K(self.addr(splits, ok)),
            Arg::K(self.addr(oso, ok)),
        ];
        let ctx = Ctx {
            split_name,
            splits: Some(splits.clone()),
            oso: Some(oso.clone()),
            ours: format!(
                "input {}; out_splits_offsets {}",
                input.describe(),
                oso.describe()
            ),
            in_rows: input.size(0),
            rank: me,
            codes: None,
        };
        self.launch(
            sh,
            list,
            Some((group, me)),
            op,
            OpKernel::AllToAllV,
            prep.err(),
            plan::digest(&words),
            body,
            Vec::new(),
            ctx,
        )
    }

    /// `all_to_all_vdev` (see [`crate::all_to_all_vdev`]) on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn all_to_all_vdev(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        input: &TensorView,
        out: &TensorView,
        in_splits: &TensorView,
        out_splits_offsets: &TensorView,
    ) -> Result<OpHandle> {
        const OP: &str = "all_to_all_vdev";
        let w = group.size();
        let prep = crate::a2a::vdev_shapes(input, out, in_splits, out_splits_offsets, w, true)
            .map(|rb| (1, rb));
        self.vfamily(
            sh,
            list,
            group,
            OP,
            XPO_MODE_VDEV,
            input,
            out,
            in_splits,
            out_splits_offsets,
            0,
            prep,
            "in_splits",
        )
    }

    /// `all_to_all_vdev_2d` (see [`crate::all_to_all_vdev_2d`]) on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn all_to_all_vdev_2d(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        input: &TensorView,
        out: &TensorView,
        in_splits: &TensorView,
        out_splits_offsets: &TensorView,
        major_align: Option<i64>,
    ) -> Result<OpHandle> {
        const OP: &str = "all_to_all_vdev_2d";
        let w = group.size();
        let align = major_align.unwrap_or(1);
        let prep = crate::a2a::vdev_2d_shapes(input, out, in_splits, out_splits_offsets, align, w)
            .map(|(n, rb)| (n / w, rb));
        self.vfamily(
            sh,
            list,
            group,
            OP,
            XPO_MODE_2D,
            input,
            out,
            in_splits,
            out_splits_offsets,
            align.max(0),
            prep,
            "in_splits",
        )
    }

    /// `all_to_all_vdev_2d_offset` (see [`crate::all_to_all_vdev_2d_offset`]) on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn all_to_all_vdev_2d_offset(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        input: &TensorView,
        out: &TensorView,
        in_splits_offsets: &TensorView,
        out_splits_offsets: &TensorView,
    ) -> Result<OpHandle> {
        const OP: &str = "all_to_all_vdev_2d_offset";
        let w = group.size();
        let iso = in_splits_offsets;
        let prep = crate::a2a::vdev_2d_offset_shapes(input, out, iso, out_splits_offsets, w)
            .map(|(n, rb)| (n / w, rb));
        self.vfamily(
            sh,
            list,
            group,
            OP,
            XPO_MODE_2D_OFFSET,
            input,
            out,
            iso,
            out_splits_offsets,
            0,
            prep,
            "in_splits_offsets",
        )
    }

    /// `nvshmem_all_to_all` (see [`crate::nvshmem_all_to_all`]) on the device.
    pub fn nvshmem_all_to_all(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        input: &TensorView,
        out: &TensorView,
    ) -> Result<OpHandle> {
        const OP: &str = "nvshmem_all_to_all";
        let me = group.rank_for(sh, OP)?;
        let w = group.size();
        let prep = crate::a2a::all_to_all_chunk(input, out, w);
        let mut words = vec![4, w as u64, group.id()];
        input.digest_words(&mut words);
        let ok = prep.is_ok();
        let chunk = prep.as_ref().map_or(0, |c| *c);
        let body = vec![
            Arg::K(self.addr(input, ok)),
            Arg::K(self.addr(out, ok)),
            u64a(chunk as u64),
        ];
        let ctx = Ctx {
            ours: format!("input {}", input.describe()),
            ..Ctx::default()
        };
        self.launch(
            sh,
            list,
            Some((group, me)),
            OP,
            OpKernel::AllToAll,
            prep.err(),
            plan::digest(&words),
            body,
            Vec::new(),
            ctx,
        )
    }

    /// `nvshmem_broadcast` (see [`crate::nvshmem_broadcast`]) on the device.
    pub fn nvshmem_broadcast(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        tensor: &TensorView,
        root: i64,
    ) -> Result<OpHandle> {
        const OP: &str = "nvshmem_broadcast";
        let me = group.rank_for(sh, OP)?;
        let w = group.size();
        let mut local = if root < 0 || root as u64 >= w as u64 {
            Some(Error::InvalidPe {
                pe: root,
                n_pes: w,
                context: format!("{OP}: root must be smaller than group size"),
            })
        } else {
            None
        };
        let mut words = vec![7, w as u64, group.id(), root as u64];
        tensor.digest_words(&mut words);
        // The runs of the view as (address on this device, bytes): non-roots pull each from the root.
        let runs = tensor.runs();
        let base = match sh.ptr(tensor.buf(), sh.my_pe()) {
            Ok(Some(p)) => p as u64,
            Ok(None) => 0,
            Err(e) => {
                local.get_or_insert(e);
                0
            }
        };
        let buf = device_of(sh)?.host_buf(16 * runs.len())?;
        let bytes: Vec<u8> = runs
            .iter()
            .flat_map(|r| {
                let mut v = (base + r.start as u64).to_ne_bytes().to_vec();
                v.extend_from_slice(&(r.len as u64).to_ne_bytes());
                v
            })
            .collect();
        buf.write(0, &bytes)?;
        let n = if local.is_some() { 0 } else { runs.len() };
        let body = vec![u32a(root.max(0) as u64), Arg::Keep(0), u64a(n as u64)];
        let ctx = Ctx {
            ours: format!("root {root}, tensor {}", tensor.describe()),
            ..Ctx::default()
        };
        self.launch(
            sh,
            list,
            Some((group, me)),
            OP,
            OpKernel::Broadcast,
            local,
            plan::digest(&words),
            body,
            vec![buf],
            ctx,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn tile(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        op: &'static str,
        me: usize,
        tile: Option<&TensorView>,
        out: &TensorView,
        local: Option<Error>,
        words: &[u64],
        ours: String,
    ) -> Result<OpHandle> {
        let ok = local.is_none();
        let active = ok && tile.is_some();
        let t = tile.unwrap_or(out);
        let code = match out.dtype() {
            DType::F16 => XPO_DTYPE_F16,
            DType::BF16 => XPO_DTYPE_BF16,
            _ => XPO_DTYPE_F32,
        };
        let dim = |v: &TensorView, d: usize| u64a(if active { v.size(d) as u64 } else { 0 });
        let st = |v: &TensorView, d: usize| u64a(if active { v.stride(d) as u64 } else { 0 });
        let body = vec![
            u32a(active as u32),
            u32a(code),
            dim(t, 0),
            dim(t, 1),
            Arg::K(self.addr(t, active)),
            st(t, 0),
            st(t, 1),
            Arg::K(self.addr(out, active)),
            st(out, 0),
            st(out, 1),
        ];
        let ctx = Ctx {
            ours,
            ..Ctx::default()
        };
        self.launch(
            sh,
            list,
            Some((group, me)),
            op,
            OpKernel::TileReduce,
            local,
            plan::digest(words),
            body,
            Vec::new(),
            ctx,
        )
    }

    /// `tile_reduce` (see [`crate::tile_reduce`]) on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn tile_reduce(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        in_tile: &TensorView,
        out_tile: &TensorView,
        root: i64,
        reduce_op: &str,
    ) -> Result<OpHandle> {
        const OP: &str = "tile_reduce";
        let me = group.rank_for(sh, OP)?;
        let w = group.size();
        let prep = crate::tile::tile_reduce_root(in_tile, out_tile, root, w, reduce_op);
        let mut words = vec![5, w as u64, group.id(), root as u64];
        in_tile.digest_words(&mut words);
        let ours = format!(
            "root {root}, in_tile {}, out_tile {}",
            in_tile.describe(),
            out_tile.describe()
        );
        let mine = matches!(prep, Ok(r) if r == me);
        self.tile(
            sh,
            list,
            group,
            OP,
            me,
            mine.then_some(in_tile),
            out_tile,
            prep.err(),
            &words,
            ours,
        )
    }

    /// `multi_root_tile_reduce` (see [`crate::multi_root_tile_reduce`]) on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn multi_root_tile_reduce(
        &self,
        sh: &Shmem,
        list: CommandList,
        group: &Group,
        in_tiles: &[TensorView],
        out_tile: &TensorView,
        roots: &[i64],
        reduce_op: &str,
    ) -> Result<OpHandle> {
        const OP: &str = "multi_root_tile_reduce";
        let me = group.rank_for(sh, OP)?;
        let w = group.size();
        let prep = (|| {
            crate::tile::check_op(OP, reduce_op)?;
            crate::tile::check_2d(OP, "out_tile", out_tile)?;
            if roots.len() != in_tiles.len() {
                return Err(Error::InvalidArgument {
                    name: "roots",
                    value: format!("{roots:?}"),
                    reason: format!(
                        "{OP}: must have one root per tile ({} in_tiles, {} roots)",
                        in_tiles.len(),
                        roots.len()
                    ),
                });
            }
            for t in in_tiles {
                crate::tile::check_2d(OP, "in_tiles", t)?;
                if t.dtype() != out_tile.dtype() || t.shape() != out_tile.shape() {
                    return Err(Error::InvalidArgument {
                        name: "in_tiles",
                        value: t.describe(),
                        reason: format!(
                            "{OP}: every in_tile must have out_tile's dtype and sizes (out_tile: {})",
                            out_tile.describe()
                        ),
                    });
                }
            }
            plan::root_slots(OP, roots, w)
        })();
        let mut words = vec![6, w as u64, group.id(), roots.len() as u64];
        words.extend(roots.iter().map(|&r| r as u64));
        for t in in_tiles {
            t.digest_words(&mut words);
        }
        let ours = format!("roots {roots:?}, out_tile {}", out_tile.describe());
        let slot = prep.as_ref().ok().and_then(|s| s[me]);
        self.tile(
            sh,
            list,
            group,
            OP,
            me,
            slot.map(|i| &in_tiles[i]),
            out_tile,
            prep.err(),
            &words,
            ours,
        )
    }

    fn rma(
        &self,
        sh: &Shmem,
        list: CommandList,
        op: &'static str,
        kind: u64,
        data: Option<(&TensorView, usize)>,
        sig: Option<(xpushmem::SymRef<u64>, u64)>,
    ) -> Result<OpHandle> {
        let me = sh.my_pe();
        let (addr, nbytes, peer) = match data {
            Some((t, p)) => (elem0(t, me), t.nbytes(), p),
            None => (self.region_arg(), 0, me),
        };
        let (sig_arg, signal) = match sig {
            Some((r, v)) => (KernelArg::sym_ref(r, me), v),
            None => (self.region_arg(), 0),
        };
        let body = vec![
            u32a(kind),
            Arg::K(addr),
            u64a(nbytes as u64),
            u32a(peer as u64),
            Arg::K(sig_arg),
            u64a(signal),
        ];
        self.launch(
            sh,
            list,
            None,
            op,
            OpKernel::Rma,
            None,
            0,
            body,
            Vec::new(),
            Ctx::default(),
        )
    }

    /// `nvshmem_put` (see [`crate::nvshmem_put`]) on the device: complete when the kernel has finished.
    pub fn nvshmem_put(
        &self,
        sh: &Shmem,
        list: CommandList,
        tensor: &TensorView,
        peer: i64,
    ) -> Result<OpHandle> {
        const OP: &str = "nvshmem_put";
        check_contiguous(OP, "tensor", tensor)
            .map_err(|_| crate::p2p::contiguous_only(OP, tensor))?;
        let peer = crate::p2p::check_peer(sh, OP, peer)?;
        self.rma(sh, list, OP, XPO_RMA_PUT, Some((tensor, peer)), None)
    }

    /// `nvshmem_get` (see [`crate::nvshmem_get`]) on the device.
    pub fn nvshmem_get(
        &self,
        sh: &Shmem,
        list: CommandList,
        tensor: &TensorView,
        peer: i64,
    ) -> Result<OpHandle> {
        const OP: &str = "nvshmem_get";
        check_contiguous(OP, "tensor", tensor)
            .map_err(|_| crate::p2p::contiguous_only(OP, tensor))?;
        let peer = crate::p2p::check_peer(sh, OP, peer)?;
        self.rma(sh, list, OP, XPO_RMA_GET, Some((tensor, peer)), None)
    }

    /// `nvshmem_put_with_signal` (see [`crate::nvshmem_put_with_signal`]) on the device.
    pub fn nvshmem_put_with_signal(
        &self,
        sh: &Shmem,
        list: CommandList,
        tensor: &TensorView,
        sigpad: &TensorView,
        signal: i64,
        peer: i64,
    ) -> Result<OpHandle> {
        const OP: &str = "nvshmem_put_with_signal";
        check_contiguous(OP, "tensor", tensor)?;
        let peer = crate::p2p::check_peer(sh, OP, peer)?;
        let sig = crate::p2p::signal_word(sh, OP, sigpad)?;
        self.rma(
            sh,
            list,
            OP,
            XPO_RMA_PUT_SIGNAL,
            Some((tensor, peer)),
            Some((sig, signal as u64)),
        )
    }

    /// `nvshmem_wait_for_signal` (see [`crate::nvshmem_wait_for_signal`]) on the device: the queue waits (bounded
    /// by `XPUSHMEM_TIMEOUT_MS`) until this PE's signal word equals `signal`.
    pub fn nvshmem_wait_for_signal(
        &self,
        sh: &Shmem,
        list: CommandList,
        sigpad: &TensorView,
        signal: i64,
        peer: i64,
    ) -> Result<OpHandle> {
        const OP: &str = "nvshmem_wait_for_signal";
        let _ = peer;
        let sig = crate::p2p::signal_word(sh, OP, sigpad)?;
        self.rma(
            sh,
            list,
            OP,
            XPO_RMA_WAIT_SIGNAL,
            None,
            Some((sig, signal as u64)),
        )
    }

    /// The symm_mem handle's `barrier` (`mode` [`XPO_PAD_BARRIER`]), `put_signal` ([`XPO_PAD_PUT_SIGNAL`]) or
    /// `wait_signal` ([`XPO_PAD_WAIT_SIGNAL`]) on the device: the CAS protocol of the host version on the pad's
    /// 32-bit words (signal: the peer's word `[channel * W + my rank]` 0 -> 1; wait: my word `[channel * W + r]`
    /// 1 -> 0), each retried with the device library's back-off until `XPUSHMEM_TIMEOUT_MS`. `pad` is this PE's
    /// signal pad (`pad_bytes` bytes of symmetric memory), `pes` the handle's rank -> global PE table; `peer` is
    /// the rank signalled or waited for (ignored by the barrier). Arguments are checked with the host version's
    /// messages.
    #[allow(clippy::too_many_arguments)]
    pub fn signal_pad(
        &self,
        sh: &Shmem,
        list: CommandList,
        mode: u64,
        pad: SymSlice<u8>,
        pes: &[usize],
        channel: i64,
        peer: i64,
    ) -> Result<OpHandle> {
        let op: &'static str = match mode {
            XPO_PAD_BARRIER => "barrier",
            XPO_PAD_PUT_SIGNAL => "put_signal",
            XPO_PAD_WAIT_SIGNAL => "wait_signal",
            _ => {
                return Err(Error::invalid(
                    "mode",
                    mode,
                    "must be 1 (barrier), 2 (put_signal) or 3 (wait_signal)",
                ))
            }
        };
        let w = pes.len();
        let me = pes.iter().position(|&p| p == sh.my_pe()).ok_or_else(|| {
            Error::invalid(
                "group_pes",
                format!("{pes:?}"),
                format!(
                    "{op}: this PE ({}) is not in the handle's group",
                    sh.my_pe()
                ),
            )
        })?;
        if let Some(&bad) = pes.iter().find(|&&p| p >= sh.n_pes()) {
            return Err(Error::invalid(
                "group_pes",
                bad,
                format!("{op}: a PE must be smaller than {}", sh.n_pes()),
            ));
        }
        if mode != XPO_PAD_BARRIER && !(0..w as i64).contains(&peer) {
            let what = if mode == XPO_PAD_PUT_SIGNAL {
                "dst_rank"
            } else {
                "src_rank"
            };
            return Err(Error::invalid(
                what,
                peer,
                format!("{op}: rank must be in [0, {w}) (world size {w})"),
            ));
        }
        let max_channel = pad.len() / 4 / w;
        if !(0..max_channel as i64).contains(&channel) {
            return Err(Error::invalid(
                "channel",
                channel,
                format!(
                    "channel {channel} exceeds the maximum supported channel: channels must be in [0, {max_channel}) for a signal pad of {} bytes and world size {w}",
                    pad.len()
                ),
            ));
        }
        let buf = device_of(sh)?.host_buf(4 * w)?;
        let bytes: Vec<u8> = pes.iter().flat_map(|&p| (p as i32).to_ne_bytes()).collect();
        buf.write(0, &bytes)?;
        let body = vec![
            Arg::Keep(0),
            u32a(w as u64),
            u32a(me as u64),
            u32a(mode),
            Arg::K(KernelArg::sym(pad, self.pe)),
            u32a(channel as u64),
            u32a(if mode == XPO_PAD_BARRIER {
                0
            } else {
                peer as u64
            }),
        ];
        let ctx = Ctx {
            rank: me,
            ..Ctx::default()
        };
        self.launch(
            sh,
            list,
            None,
            op,
            OpKernel::SignalPad,
            None,
            0,
            body,
            vec![buf],
            ctx,
        )
    }
}
