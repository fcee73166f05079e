//! [`TokenSwitch`] on the device path: create_routing, dispatch and combine as kernels of the op module
//! (`ops/device/ep.cl`) appended to a caller's command list (a framework's stream), returning without waiting,
//! like the rest of [`DeviceOps`]. Same algorithm, layouts, rounding and verdicts as the host path
//! ([`TokenSwitch::create_routing`], [`TokenSwitch::dispatch`], [`TokenSwitch::combine`]): an expert id out of
//! range names its value and position, a receive overflow is the same error on every rank, ranks that disagree get
//! `Mismatch`, a rank rejected on the host still joins the kernels' verdict step (its peers fail with "rejected its
//! arguments" instead of waiting).
//!
//! The host never reads device memory, so what depends on `topk_idx` is decided on the device: the send plan and
//! the counts (kept in the routing's **state**, device memory the caller provides and keeps with the routing:
//! [`TokenSwitch::device_state_bytes`]), the overflow verdict, the expert-major layout. Differences from the host
//! path, all because the host does not know the received counts without a synchronisation: the outputs of
//! dispatch (and the input of combine) must have `max_recv_tokens_per_rank` rows; the received row count and the
//! per-expert counts are in the state ([`DeviceRouting::info_range`]: int64 `[2 + L]`: rows in the layout, slots,
//! then each local expert's pairs).

use crate::device::{u32a, u64a, Arg, Ctx, DeviceOps, OpHandle, OpKernel};
use crate::device_abi::*;
use crate::dtype::DType;
use crate::ep::route::{self, Layout};
use crate::ep::switch::{bad, meta_bytes, pad8, Kind, RouteShape, TokenSwitch};
use crate::group::Group;
use crate::plan::digest;
use crate::symm::Operand;
use std::sync::atomic::{AtomicBool, Ordering};
use xpushmem::device::queue::CommandList;
use xpushmem::{Error, KernelArg, Result, Shmem};

const ROUTE: &str = "ep_create_routing";
const DISPATCH: &str = "ep_dispatch";
const COMBINE: &str = "ep_combine";

/// A routing made on the device by [`TokenSwitch::create_routing_on`]: its `topk_idx` and its state stay the
/// caller's device memory, to be kept unchanged while the routing is used.
#[derive(Debug)]
pub struct DeviceRouting {
    switch: usize,
    id: u64,
    shape: RouteShape,
    topk_idx: Operand,
    state: Operand,
    dispatched: AtomicBool,
}

impl std::ops::Deref for DeviceRouting {
    type Target = RouteShape;

    fn deref(&self) -> &RouteShape {
        &self.shape
    }
}

impl DeviceRouting {
    /// Byte offset and length, in the state, of int64 `[2 + L]`: this rank's received rows in the layout, its
    /// received slots, then the pairs each local expert receives (written by the routing kernel).
    pub fn info_range(&self, ts: &TokenSwitch) -> (usize, usize) {
        let s = StateLayout::of(ts);
        (s.info, s.ct - s.info)
    }
}

/// Byte offsets of a routing's device state (all 8-aligned).
struct StateLayout {
    info: usize,
    ct: usize,
    send: usize,
    slot_of: usize,
    pos: usize,
    end: usize,
}

impl StateLayout {
    fn of(ts: &TokenSwitch) -> StateLayout {
        let (w, l, cfg) = (ts.w(), ts.local_experts(), ts.cfg);
        let info = 0;
        let ct = info + 8 * (2 + l);
        let send = ct + 8 * w * (2 * w + l);
        let slot_of = send + 8 * (2 * w + cfg.num_experts);
        let pos = slot_of + (4 * cfg.max_dispatch_tokens * w).div_ceil(8) * 8;
        let end = pos + (4 * cfg.max_recv_tokens * cfg.max_topk).div_ceil(8) * 8;
        StateLayout {
            info,
            ct,
            send,
            slot_of,
            pos,
            end,
        }
    }
}

/// `len` bytes at byte `off` of a kernel argument (a heap range or a device range).
fn sub(a: Arg, off: usize, len: usize) -> Result<Arg> {
    match a {
        Arg::K(KernelArg::Heap { off: o, bytes, pe }) if off <= bytes && len <= bytes - off => {
            Ok(Arg::K(KernelArg::Heap {
                off: o + off,
                bytes: len,
                pe,
            }))
        }
        Arg::D(d) => Ok(Arg::D(d.sub(off, len)?)),
        _ => Err(Error::invalid(
            "state",
            format!("{len} bytes at {off}"),
            "outside the routing state",
        )),
    }
}

/// The EP status codes as the host path's errors (words: number of experts, layout code).
fn decode(op: &str, words: &[u64], code: u64, a: i64, b: i64, c: i64) -> Option<Error> {
    let layout = if words.get(1) == Some(&1) {
        Layout::ExpertMajor
    } else {
        Layout::Flat
    };
    match code {
        XPO_ERR_EP_EXPERT => Some(route::bad_expert(
            op,
            a,
            b as usize,
            c as usize,
            words.first().copied().unwrap_or(0) as usize,
        )),
        XPO_ERR_EP_OVERFLOW => Some(route::overflow(
            op, layout, a as usize, b as u64, c as usize,
        )),
        _ => None,
    }
}

/// Check that `t` is a contiguous `dtype` tensor of shape `[rows, cols]` (`cols` `None`: 1-D), with at least
/// `rows` rows (`at_least`) or exactly.
fn check_2d(
    op: &str,
    name: &'static str,
    t: &Operand,
    dtype: DType,
    rows: usize,
    cols: Option<usize>,
    at_least: bool,
) -> Result<()> {
    let s = t.shape();
    let shape_ok = match cols {
        Some(c) => s.len() == 2 && s[1] == c,
        None => s.len() == 1,
    };
    let rows_ok = s
        .first()
        .is_some_and(|&r| if at_least { r >= rows } else { r == rows });
    if t.dtype() == dtype && t.is_contiguous() && shape_ok && rows_ok {
        return Ok(());
    }
    let want = match (cols, at_least) {
        (Some(c), true) => format!("[rows >= {rows}, {c}]"),
        (Some(c), false) => format!("[{rows}, {c}]"),
        (None, true) => format!("[rows >= {rows}]"),
        (None, false) => format!("[{rows}]"),
    };
    Err(bad(
        name,
        t.describe(),
        format!("{op}: must be a contiguous {} tensor {want}", dtype.name()),
    ))
}

fn dtype_code(d: DType) -> u64 {
    match d {
        DType::F16 => XPO_DTYPE_F16,
        DType::BF16 => XPO_DTYPE_BF16,
        _ => XPO_DTYPE_F32,
    }
}

impl TokenSwitch {
    /// Bytes of the device state of one routing of this switch ([`TokenSwitch::create_routing_on`]).
    pub fn device_state_bytes(&self) -> usize {
        StateLayout::of(self).end
    }

    /// Enqueue an EP kernel for group rank `me` (its host verdict `local`, the digest `dig` of what every rank must
    /// agree on, `ours` describing it for a mismatch) with the EP status codes decoded in `layout`'s words.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        sh: &Shmem,
        ops: &DeviceOps,
        list: CommandList,
        (group, me): (&Group, usize),
        (op, kernel): (&'static str, OpKernel),
        local: Option<Error>,
        dig: u64,
        body: Vec<Arg>,
        (ours, layout): (String, Layout),
    ) -> Result<OpHandle> {
        let mut ctx = Ctx::with_ours(ours);
        ctx.codes = Some((decode, vec![self.cfg.num_experts as u64, layout as u64]));
        // Every EP kernel's last body argument: the stage of its sends to ranks on other nodes.
        let mut body = body;
        body.push(Arg::K(KernelArg::sym(self.stage, self.me)));
        ops.launch(
            sh,
            list,
            Some((group, me)),
            op,
            kernel,
            local,
            dig,
            body,
            Vec::new(),
            ctx,
        )
    }

    /// Enqueue a dispatch or combine kernel on routing `r` (`dtype`, `hidden`): its digest and epoch, then
    /// [`TokenSwitch::launch`].
    #[allow(clippy::too_many_arguments)]
    fn launch_op(
        &self,
        sh: &Shmem,
        ops: &DeviceOps,
        list: CommandList,
        rank: (&Group, usize),
        (op, kernel, kind): (&'static str, OpKernel, Kind),
        (r, dtype, hidden): (&DeviceRouting, DType, usize),
        local: Option<Error>,
        body: Vec<Arg>,
    ) -> Result<OpHandle> {
        let dig = self.op_digest(kind, dtype, hidden, r.id);
        self.next_epoch(kind);
        let ours = format!("{hidden} x {}, routing {}", dtype.name(), r.id);
        self.launch(
            sh,
            ops,
            list,
            rank,
            (op, kernel),
            local,
            dig,
            body,
            (ours, r.layout),
        )
    }

    /// The kernel arguments of the routing state's parts (every EP kernel takes them all: the counts table, the
    /// info words, the send scratch, the send plan, the pair positions), or, on a rank rejected on the host (whose
    /// kernel only joins the verdict), the switch's count area.
    fn state_parts(&self, state: &Operand, ok: bool) -> Result<Vec<Arg>> {
        let st = StateLayout::of(self);
        let counts = Arg::K(KernelArg::sym(self.counts, self.me));
        let sa = state.arg(self.me);
        [
            (st.ct, st.send),
            (st.info, st.ct),
            (st.send, st.slot_of),
            (st.slot_of, st.pos),
            (st.pos, st.end),
        ]
        .iter()
        .map(|&(from, to)| {
            if ok {
                sub(sa, from, to - from)
            } else {
                Ok(counts)
            }
        })
        .collect()
    }

    /// [`TokenSwitch::create_routing`] on the device, appended to `list`: `topk_idx` is int64 `[n, k]`
    /// (contiguous, device memory), `state` at least [`TokenSwitch::device_state_bytes`] bytes of device memory
    /// (uint8, 1-D) that the routing owns until it is dropped. The routing is usable once the handle reports
    /// success (in stream order: its dispatches may be enqueued at once, after it on the same list).
    #[allow(clippy::too_many_arguments)]
    pub fn create_routing_on(
        &self,
        sh: &Shmem,
        ops: &DeviceOps,
        list: CommandList,
        group: &Group,
        topk_idx: &Operand,
        layout: Layout,
        state: &Operand,
    ) -> Result<(DeviceRouting, OpHandle)> {
        self.check_group(group, ROUTE)?;
        let me = group.rank_for(sh, ROUTE)?;
        let s = topk_idx.shape();
        let (n, k) = (
            s.first().copied().unwrap_or(0),
            s.get(1).copied().unwrap_or(0),
        );
        let cfg = self.cfg;
        let st = StateLayout::of(self);
        let local = (|| {
            check_2d(ROUTE, "topk_idx", topk_idx, DType::I64, n, Some(k), false)?;
            self.check_topk_shape(ROUTE, n, k)?;
            check_2d(ROUTE, "state", state, DType::U8, st.end, None, true)
        })();
        let dig = digest(&[1, k as u64, layout as u64, self.group_id]);
        let id = self.next_epoch(Kind::Routing);
        let ok = local.is_ok();
        let mut body = vec![
            topk_idx.arg(self.me),
            u64a(if ok { n as u64 } else { 0 }),
            u64a(k as u64),
            u64a(cfg.num_experts as u64),
            u32a(layout as u32),
            u64a(cfg.max_recv_tokens as u64),
            Arg::K(KernelArg::sym(self.counts, self.me)),
        ];
        body.extend(self.state_parts(state, ok)?);
        let h = self.launch(
            sh,
            ops,
            list,
            (group, me),
            (ROUTE, OpKernel::EpRoute),
            local.err(),
            dig,
            body,
            (format!("top-k {k}, layout {}", layout.name()), layout),
        )?;
        let r = DeviceRouting {
            switch: self.recv.heap_offset(),
            id,
            shape: RouteShape { layout, n, k },
            topk_idx: topk_idx.clone(),
            state: state.clone(),
            dispatched: AtomicBool::new(false),
        };
        Ok((r, h))
    }

    fn check_device_routing(&self, r: &DeviceRouting, op: &str) -> Result<()> {
        self.check_made_here(r.switch, r.id, op)
    }

    /// [`TokenSwitch::dispatch`] on the device, appended to `list` after the routing's kernel: `tokens` `[n,
    /// hidden]` of any dtype, `topk_weights` float32 `[n, k]`; the outputs have `max_recv_tokens_per_rank` rows
    /// (at least): `out_tokens` `[rows, hidden]` of the tokens' dtype, flat: `out_topk_weights` float32 `[rows, k]`
    /// and `out_topk_idx` int64 `[rows, k]`; expert-major: `out_topk_weights` float32 `[rows]`, `out_topk_idx`
    /// `None`. Rows past the received ones are not written.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_on(
        &self,
        sh: &Shmem,
        ops: &DeviceOps,
        list: CommandList,
        group: &Group,
        r: &DeviceRouting,
        tokens: &Operand,
        topk_weights: &Operand,
        out_tokens: &Operand,
        out_topk_weights: &Operand,
        out_topk_idx: Option<&Operand>,
    ) -> Result<OpHandle> {
        self.check_group(group, DISPATCH)?;
        let me = group.rank_for(sh, DISPATCH)?;
        let (n, k, cfg) = (r.n, r.k, self.cfg);
        let dtype = tokens.dtype();
        let hidden = tokens.shape().get(1).copied().unwrap_or(0);
        let rows = cfg.max_recv_tokens;
        let local = (|| {
            self.check_device_routing(r, DISPATCH)?;
            let rb = self.row_bytes(DISPATCH, "tokens", dtype, hidden)?;
            check_2d(DISPATCH, "tokens", tokens, dtype, n, Some(hidden), false)?;
            check_2d(
                DISPATCH,
                "topk_weights",
                topk_weights,
                DType::F32,
                n,
                Some(k),
                false,
            )?;
            check_2d(
                DISPATCH,
                "out_tokens",
                out_tokens,
                dtype,
                rows,
                Some(hidden),
                true,
            )?;
            match r.layout {
                Layout::Flat => {
                    check_2d(
                        DISPATCH,
                        "out_topk_weights",
                        out_topk_weights,
                        DType::F32,
                        rows,
                        Some(k),
                        true,
                    )?;
                    match out_topk_idx {
                        None => Err(bad(
                            "out_topk_idx",
                            "None",
                            format!("{DISPATCH}: the flat layout writes it: int64 [rows >= {rows}, {k}]"),
                        )),
                        Some(i) => {
                            check_2d(DISPATCH, "out_topk_idx", i, DType::I64, rows, Some(k), true)
                        }
                    }?;
                }
                Layout::ExpertMajor => {
                    check_2d(
                        DISPATCH,
                        "out_topk_weights",
                        out_topk_weights,
                        DType::F32,
                        rows,
                        None,
                        true,
                    )?;
                    if out_topk_idx.is_some() {
                        return Err(bad(
                            "out_topk_idx",
                            "a tensor",
                            format!("{DISPATCH}: the expert_major layout has none (pass None)"),
                        ));
                    }
                }
            }
            Ok(rb)
        })();
        let ok = local.is_ok();
        let rb = local.as_ref().map_or(0, |&rb| rb);
        let counts = Arg::K(KernelArg::sym(self.counts, self.me));
        let ok_arg = |a: Arg| if ok { a } else { counts };
        let mut body = vec![
            ok_arg(r.topk_idx.arg(self.me)),
            ok_arg(topk_weights.arg(self.me)),
            ok_arg(tokens.arg(self.me)),
            u64a(if ok { n as u64 } else { 0 }),
            u64a(k as u64),
            u64a(cfg.num_experts as u64),
            u64a(rb as u64),
            u32a(r.layout as u32),
            Arg::K(KernelArg::sym(self.recv, self.me)),
            u64a((cfg.max_recv_tokens * cfg.max_token_bytes) as u64),
            u64a(meta_bytes(k) as u64),
            u64a(pad8(4 * k) as u64),
        ];
        body.extend(self.state_parts(&r.state, ok)?);
        body.extend([
            ok_arg(out_tokens.arg(self.me)),
            ok_arg(out_topk_weights.arg(self.me)),
            match out_topk_idx {
                Some(i) if ok => i.arg(self.me),
                _ => counts,
            },
        ]);
        let h = self.launch_op(
            sh,
            ops,
            list,
            (group, me),
            (DISPATCH, OpKernel::EpDispatch, Kind::Dispatch),
            (r, dtype, hidden),
            local.err(),
            body,
        )?;
        if ok {
            r.dispatched.store(true, Ordering::Relaxed);
        }
        Ok(h)
    }

    /// [`TokenSwitch::combine`] on the device, appended to `list`: `expert_tokens` `[rows >=
    /// max_recv_tokens_per_rank, hidden]` (float32, float16 or bfloat16) in the routing's layout, `out` `[n,
    /// hidden]` of the same dtype (overwritten). An expert-major routing is combined after its first dispatch.
    #[allow(clippy::too_many_arguments)]
    pub fn combine_on(
        &self,
        sh: &Shmem,
        ops: &DeviceOps,
        list: CommandList,
        group: &Group,
        r: &DeviceRouting,
        expert_tokens: &Operand,
        out: &Operand,
    ) -> Result<OpHandle> {
        self.check_group(group, COMBINE)?;
        let me = group.rank_for(sh, COMBINE)?;
        let (n, k, cfg) = (r.n, r.k, self.cfg);
        let dtype = expert_tokens.dtype();
        let hidden = expert_tokens.shape().get(1).copied().unwrap_or(0);
        let local = (|| {
            self.check_device_routing(r, COMBINE)?;
            Self::check_reducible(COMBINE, dtype)?;
            let rb = self.row_bytes(COMBINE, "expert_tokens", dtype, hidden)?;
            check_2d(
                COMBINE,
                "expert_tokens",
                expert_tokens,
                dtype,
                cfg.max_recv_tokens,
                Some(hidden),
                true,
            )?;
            check_2d(COMBINE, "out", out, dtype, n, Some(hidden), false)?;
            if r.layout == Layout::ExpertMajor && !r.dispatched.load(Ordering::Relaxed) {
                return Err(Error::State(format!(
                    "{COMBINE}: an expert_major routing is combined after its first dispatch (the received \
                     topk_idx places the pairs)"
                )));
            }
            Ok(rb)
        })();
        let ok = local.is_ok();
        let counts = Arg::K(KernelArg::sym(self.counts, self.me));
        let mut body = vec![
            if ok {
                expert_tokens.arg(self.me)
            } else {
                counts
            },
            u64a(if ok { n as u64 } else { 0 }),
            u64a(if ok { hidden as u64 } else { 0 }),
            u32a(dtype_code(dtype)),
            u64a(k as u64),
            u64a(cfg.num_experts as u64),
            u32a(r.layout as u32),
            Arg::K(KernelArg::sym(self.comb, self.me)),
        ];
        body.extend(self.state_parts(&r.state, ok)?);
        body.push(if ok { out.arg(self.me) } else { counts });
        self.launch_op(
            sh,
            ops,
            list,
            (group, me),
            (COMBINE, OpKernel::EpCombine, Kind::Combine),
            (r, dtype, hidden),
            local.err(),
            body,
        )
    }
}
