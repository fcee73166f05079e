//! [`TokenSwitch`]: expert-parallel dispatch and combine on the host path (CPU memory in and out, symmetric
//! receive buffers in between).
//!
//! Every op starts with the group's entry: the agreement folded into one exchange (`Group::exchange`: one message
//! latency; the dissemination agreement in a group too large for the exchange area), with the same verdict on
//! every rank, `Mismatch` when ranks disagree on dtypes, sizes or the routing; it is also the point after which
//! every rank has left the previous op, so the receive buffers are free to be written. The buffers are allocated
//! once at construction and bounded by the declared maxima:
//!
//! * [`TokenSwitch::create_routing`]: each rank's count row for each rank (slots and pairs for every rank, pairs
//!   for the destination's experts) travels in the entry's exchange; every rank then holds every rank's counts
//!   and reaches the same receive-overflow verdict;
//! * [`TokenSwitch::dispatch`]: each token is put once per destination rank (with its `topk_weights` and
//!   `topk_idx` rows, and a signal) into that rank's receive rows, sources one after another in rank order; the
//!   receiver copies them out in the routing's layout, or, flat, leaves them there
//!   ([`TokenSwitch::dispatch_in_place`], or an `out_tokens` that is the receive rows). Right after a routing, a
//!   dispatch has no entry: the routing's exchange had every rank leave every earlier op, and each rank's op,
//!   verdict and digest travel in a header before its signal, judged by every rank alike after the wait;
//! * [`TokenSwitch::combine`]: each expert rank puts one returned row per received slot (the sum of the slot's
//!   pairs in the expert-major layout) into its own receive rows, where the slot's row arrived (nothing to do
//!   when the experts computed in place there: [`TokenSwitch::combine_in_place`]); the source gets each block of
//!   its tokens' rows from every rank's receive rows and sums each token's rows in f32 in destination-rank order.
//!   After a routing or a dispatch no rank reads a rank's receive rows, so the rows are staged before the entry,
//!   which then also says they are ready; after another combine they are staged after it, then signalled. Right
//!   after a routing a combine has no entry either: it sends the entry-less dispatch's header and signal (the
//!   same words, with its own op in the header), so a rank that combines where another dispatches gets
//!   `Mismatch` on every rank, as at an entry.
//!
//! Row copies per (token, destination rank) in a flat step (one copy: a row read and written once; combine's f32
//! sum reads each returned row once more in every version):
//!
//! | | dispatch | combine | step |
//! |---|---|---|---|
//! | before (push combine) | put into the receive rows, copy out | put into the source's combine rows, copy into a block | 4 |
//! | `dispatch` / `combine` with buffers | put, copy out | copy into the receive rows, get into a block | 4 |
//! | in place (`*_in_place`, or the receive rows passed as the buffers) | put | get into a block | 2 |
//!
//! The expert-major layout copies a slot's row into each of its pairs' rows on dispatch (its rows are one per
//! pair) and sums a slot's pairs into the receive rows on combine: 3 copies of a slot's row plus one per pair.
//!
//! Every wait is the runtime's `signal_wait_until` or the exchange's (`XPUSHMEM_TIMEOUT_MS`, lost peers reported
//! as `PeerLost`).

use crate::dtype::DType;
use crate::ep::route::{self, Counts, Layout, PairLayout, SendPlan};
use crate::group::Group;
use crate::plan::digest;
use std::sync::Mutex;
use xpushmem::{Cmp, Error, Result, Shmem, SignalOp, SymRef, SymSlice};

/// The maxima a [`TokenSwitch`] is built for (upstream's `TokenSwitchNCCL` constructor, plus `max_topk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpConfig {
    /// Experts in the group, numbered globally; rank `r` holds `num_experts / W` of them, from
    /// `r * num_experts / W`. Must be a positive multiple of the group size.
    pub num_experts: usize,
    /// Most tokens one rank dispatches in one step (`topk_idx.size(0)`).
    pub max_dispatch_tokens: usize,
    /// Most output rows one rank receives in one step (slots in the flat layout, pairs in expert-major).
    pub max_recv_tokens: usize,
    /// Most bytes of one token row (`hidden * element size`).
    pub max_token_bytes: usize,
    /// Most experts per token (`topk_idx.size(1)`).
    pub max_topk: usize,
}

/// The largest `max_topk` (DeepEP and NCCL EP route to at most a few dozen experts per token).
pub const MAX_TOPK: usize = 1024;

/// Which op a signal word belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Routing = 0,
    Dispatch = 1,
    Combine = 2,
}

/// Expert-parallel dispatch and combine over a [`Group`] (module docs). Upstream's `TokenSwitch`.
#[derive(Debug)]
pub struct TokenSwitch {
    pub(super) cfg: EpConfig,
    pub(super) group_id: u64,
    pub(super) pes: Vec<usize>,
    pub(super) me: usize,
    /// Receive area: `max_recv_tokens` rows of up to `max_token_bytes` (the receive rows), then as many slots'
    /// metadata, then `W` dispatch headers of 16 bytes.
    pub(super) recv: SymSlice<u8>,
    /// The device kernels' combine returns (device heaps; 8 bytes on host heaps, whose combine pulls the rows
    /// from the expert ranks' receive areas): `max_dispatch_tokens * min(max_topk, W)` rows of `max_token_bytes`.
    pub(super) comb: SymSlice<u8>,
    /// Count rows: `W` of `2W + L` words.
    pub(super) counts: SymSlice<u64>,
    /// The device kernels' stage (device heaps; 8 bytes on host heaps): what a rank sends ranks on other nodes,
    /// built where the host proxy reads a put's source (this PE's heap): a count row, or the slots of a dispatch,
    /// each destination's in a part of its own (the puts do not wait for one another):
    /// `max_dispatch_tokens * min(max_topk, W)` rows of `max_token_bytes` then their metadata (8-aligned).
    pub(super) stage: SymSlice<u8>,
    /// Signal words: `3 * W` (routing, dispatch, combine; one per source rank).
    sigs: SymSlice<u64>,
    /// The last epoch of each kind of op (the signal values; the same on every rank).
    epochs: Mutex<[u64; 3]>,
    /// The kind of the last host op that completed on this rank and its routing's id, `None` after any other
    /// outcome (a failure, a device op, an op under way). After a routing or a dispatch no rank reads this rank's
    /// receive rows (every rank has passed that op's entry, so it has left the combine before it), so a combine
    /// may stage its returned rows there before its own entry, which then tells the sources the rows are ready;
    /// and right after a routing every rank has left every earlier op, so a dispatch or combine needs no entry of
    /// its own (its op and verdicts travel in a header with its signals: [`TokenSwitch::entry_less`]).
    last: Mutex<Option<(Kind, u64)>>,
    /// The host path's working buffers, kept between steps so that a step allocates nothing once the first step
    /// of the largest shape has sized them (each bounded by the maxima: one slot's metadata per received slot,
    /// one row, one f32 row, and in expert-major a source rank's summed rows).
    scratch: Mutex<Scratch>,
}

/// [`TokenSwitch`]'s reused host buffers (see its `scratch`).
#[derive(Debug, Default)]
struct Scratch {
    /// Dispatch: the metadata sent to one rank; then the received metadata.
    meta: Vec<u8>,
    /// Dispatch: the received slots' expert ids.
    idx: Vec<i64>,
    /// Combine: the returned rows of a block of tokens.
    block: Vec<u8>,
    /// Combine: one token's f32 sum.
    acc: Vec<f32>,
    /// Combine (expert-major): a block of slots' summed rows, staged into the receive rows.
    stage: Vec<u8>,
    /// Combine: each rank's next returned row (`W` entries), then where its rows of the current block start in
    /// `block` (`W` more), then where this rank's slots start in each rank's receive rows (`W` more).
    cursors: Vec<usize>,
    /// Combine: the ranks each token went to (`n`), which size the blocks.
    dests: Vec<u32>,
}

/// A routing made by [`TokenSwitch::create_routing`] (upstream's `Routing.handle`): the send plan and every
/// rank's counts, reusable for any number of dispatches and combines of its switch.
#[derive(Debug)]
pub struct Routing {
    switch: usize,
    id: u64,
    shape: RouteShape,
    me: usize,
    plan: SendPlan,
    /// The `topk_idx` it was made from (`[n, k]`).
    topk: Vec<i64>,
    counts: Counts,
    expert_pairs: Vec<u64>,
    /// The expert-major positions of the received pairs, known from the first dispatch (the received `topk_idx`).
    pairs: Mutex<Option<PairLayout>>,
}

/// What a routing knows of its `topk_idx` (host and device routings alike): the layout, the tokens and the
/// experts per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteShape {
    pub(super) layout: Layout,
    pub(super) n: usize,
    pub(super) k: usize,
}

impl RouteShape {
    /// The dispatch output layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Tokens this rank dispatches (`topk_idx.size(0)`).
    pub fn num_tokens(&self) -> usize {
        self.n
    }

    /// Experts per token (`topk_idx.size(1)`).
    pub fn top_k(&self) -> usize {
        self.k
    }
}

impl std::ops::Deref for Routing {
    type Target = RouteShape;

    fn deref(&self) -> &RouteShape {
        &self.shape
    }
}

impl Routing {
    /// Rows of this rank's dispatch output (received slots in the flat layout, pairs in expert-major).
    pub fn recv_rows(&self) -> usize {
        self.counts.recv_rows(self.me, self.layout) as usize
    }

    /// Tokens (slots) this rank receives from each rank.
    pub fn recv_slots_from(&self) -> Vec<u64> {
        (0..self.counts.w)
            .map(|s| self.counts.slots[s * self.counts.w + self.me])
            .collect()
    }

    /// Pairs each local expert of this rank receives (upstream's `per_expert_token_counts`); their prefix sums
    /// are the expert-major layout's expert boundaries (`grouped_mm`'s `offs=`).
    pub fn expert_counts(&self) -> &[u64] {
        &self.expert_pairs
    }
}

pub(super) fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Metadata bytes of one receive slot: `k` f32 weights (padded to 8 bytes), then `k` int64 expert ids.
pub(super) fn meta_bytes(k: usize) -> usize {
    pad8(4 * k) + 8 * k
}

pub(super) fn bad(name: &'static str, value: impl ToString, reason: String) -> Error {
    Error::InvalidArgument {
        name,
        value: value.to_string(),
        reason,
    }
}

impl TokenSwitch {
    /// Build a switch for `group` (collective: the group agrees on `cfg`, then every PE of the world allocates the
    /// buffers with the world-collective `malloc`, so every PE of the world calls it at the same point with the
    /// same `cfg`, like [`Group::new`]).
    pub fn new(sh: &Shmem, group: &Group, cfg: EpConfig) -> Result<TokenSwitch> {
        const OP: &str = "TokenSwitch::new";
        let w = group.size();
        let local = (|| {
            if cfg.num_experts == 0 || cfg.num_experts % w != 0 {
                return Err(bad(
                    "num_experts",
                    cfg.num_experts,
                    format!("{OP}: must be a positive multiple of the group size ({w})"),
                ));
            }
            for (name, v) in [
                ("max_dispatch_tokens_per_rank", cfg.max_dispatch_tokens),
                ("max_recv_tokens_per_rank", cfg.max_recv_tokens),
                ("max_token_bytes", cfg.max_token_bytes),
                ("max_topk", cfg.max_topk),
            ] {
                if v == 0 {
                    return Err(bad(name, v, format!("{OP}: must be positive")));
                }
            }
            if cfg.max_topk > MAX_TOPK {
                return Err(bad(
                    "max_topk",
                    cfg.max_topk,
                    format!("{OP}: must be at most {MAX_TOPK}"),
                ));
            }
            Ok(())
        })();
        let dig = digest(&[
            cfg.num_experts as u64,
            cfg.max_dispatch_tokens as u64,
            cfg.max_recv_tokens as u64,
            cfg.max_token_bytes as u64,
            cfg.max_topk as u64,
        ]);
        group.agree(sh, OP, local.err(), dig, &|| format!("{cfg:?}"))?;
        let me = group.rank_for(sh, OP)?;
        let l = cfg.num_experts / w;
        let overflow = || Error::InvalidArgument {
            name: "max_recv_tokens_per_rank",
            value: format!("{cfg:?}"),
            reason: format!("{OP}: the buffers' size overflows"),
        };
        let recv_bytes = cfg
            .max_token_bytes
            .checked_add(meta_bytes(cfg.max_topk))
            .and_then(|b| b.checked_mul(cfg.max_recv_tokens))
            .and_then(|b| b.checked_add(16 * w))
            .ok_or_else(overflow)?;
        let device = sh.heap_kind() == xpushmem::HeapKind::Device;
        let comb_bytes = if device {
            cfg.max_dispatch_tokens
                .checked_mul(cfg.max_topk.min(w))
                .and_then(|r| r.checked_mul(cfg.max_token_bytes))
                .ok_or_else(overflow)?
        } else {
            8
        };
        let stage_bytes = if device {
            cfg.max_token_bytes
                .checked_add(meta_bytes(cfg.max_topk))
                .and_then(|b| b.checked_mul(cfg.max_dispatch_tokens))
                .and_then(|b| b.checked_mul(cfg.max_topk.min(w)))
                .and_then(|b| b.checked_add(8))
                .ok_or_else(overflow)?
                .max(8 * (2 * w + l))
        } else {
            8
        };
        Ok(TokenSwitch {
            cfg,
            group_id: group.id(),
            pes: group.pes().to_vec(),
            me,
            recv: sh.malloc::<u8>(recv_bytes)?,
            comb: sh.malloc::<u8>(comb_bytes)?,
            counts: sh.malloc::<u64>(w * (2 * w + l))?,
            stage: sh.malloc::<u8>(stage_bytes)?,
            sigs: sh.calloc::<u64>(3 * w)?,
            epochs: Mutex::new([0; 3]),
            last: Mutex::new(None),
            scratch: Mutex::new(Scratch::default()),
        })
    }

    /// Free the buffers (collective over the world, like [`TokenSwitch::new`]).
    pub fn free(self, sh: &Shmem) -> Result<()> {
        sh.free(self.sigs)?;
        sh.free(self.stage)?;
        sh.free(self.counts)?;
        sh.free(self.comb)?;
        sh.free(self.recv)
    }

    /// The maxima the switch was built for.
    pub fn config(&self) -> EpConfig {
        self.cfg
    }

    /// This PE's receive rows (`max_recv_tokens_per_rank * max_token_bytes` bytes of the symmetric heap), where
    /// a flat dispatch's rows arrive, back to back from byte 0, and where a combine's returned rows are read:
    /// the memory of [`TokenSwitch::dispatch_in_place`]'s result, for callers that map it (the C ABI's
    /// `xpushmem_ops_ep_recv_rows`, a tensor over it). What it holds is valid until this rank's next dispatch or
    /// combine of the switch, and must not be written once this rank has called combine until its next op.
    pub fn recv_rows(&self) -> Result<SymSlice<u8>> {
        self.recv.slice(..self.rows_area())
    }

    /// Experts per rank.
    pub fn local_experts(&self) -> usize {
        self.cfg.num_experts / self.pes.len()
    }

    pub(super) fn w(&self) -> usize {
        self.pes.len()
    }

    pub(super) fn check_group(&self, group: &Group, op: &str) -> Result<()> {
        if group.id() != self.group_id {
            return Err(bad(
                "group",
                format!("{:?}", group.pes()),
                format!("{op}: the switch was built for the group {:?}", self.pes),
            ));
        }
        Ok(())
    }

    fn check_routing(&self, r: &Routing, op: &str) -> Result<()> {
        self.check_made_here(r.switch, r.id, op)
    }

    /// A routing (host or device) `id` made by the switch whose receive area starts at heap offset `switch`.
    pub(super) fn check_made_here(&self, switch: usize, id: u64, op: &str) -> Result<()> {
        if switch != self.recv.heap_offset() {
            return Err(bad(
                "routing",
                format!("routing {id}"),
                format!("{op}: the routing was made by another switch"),
            ));
        }
        Ok(())
    }

    fn sig(&self, kind: Kind, rank: usize) -> Result<SymRef<u64>> {
        self.sigs.at(kind as usize * self.w() + rank)
    }

    pub(super) fn next_epoch(&self, kind: Kind) -> u64 {
        self.set_last(None);
        let mut e = self.epochs.lock().unwrap_or_else(|p| p.into_inner());
        e[kind as usize] += 1;
        e[kind as usize]
    }

    fn set_last(&self, last: Option<(Kind, u64)>) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = last;
    }

    fn last(&self) -> Option<(Kind, u64)> {
        *self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Byte of the entry-less ops' headers in the receive area (after the rows and the slots' metadata): one per
    /// source rank, 16 bytes ([`header`]).
    fn headers_at(&self) -> usize {
        self.cfg.max_recv_tokens * (self.cfg.max_token_bytes + meta_bytes(self.cfg.max_topk))
    }

    /// Whether the next dispatch or combine has no entry: right after a routing (the same on every rank: every
    /// op's outcome is), whose exchange had every rank leave every earlier op, so the receive areas are free.
    /// Such an op takes the next dispatch epoch whatever its kind, puts its [`header`] into every rank's header
    /// slot before its signal in the dispatch words, waits for every rank's, and judges every header alike
    /// ([`TokenSwitch::judge_headers`]): ranks that called different ops meet there and get `Mismatch`. A routing
    /// right after a routing does the same before its exchange (one more message latency, in that order only),
    /// so that it meets a rank that dispatches or combines instead.
    fn entry_less(&self) -> bool {
        matches!(self.last(), Some((Kind::Routing, _)))
    }

    /// Put this rank's entry-less `header` into group rank `d`'s header slot, then (after a fence) signal `d` with
    /// `epoch` in this rank's dispatch word (an entry-less op's signal when it sends `d` nothing else).
    fn announce(&self, sh: &Shmem, header: &[u8; 16], epoch: u64, d: usize) -> Result<()> {
        self.put_header(sh, header, d)?;
        sh.fence()?;
        self.put_signal(sh, self.recv, 0, &[], Kind::Dispatch, epoch, d)
    }

    /// Put this rank's entry-less `header` into group rank `d`'s header slot.
    fn put_header(&self, sh: &Shmem, header: &[u8; 16], d: usize) -> Result<()> {
        let at = self.headers_at() + 16 * self.me;
        sh.put(self.recv.slice(at..at + 16)?, header, self.pes[d])
    }

    /// Bytes of the receive area's rows (the metadata follows them).
    fn rows_area(&self) -> usize {
        self.cfg.max_recv_tokens * self.cfg.max_token_bytes
    }

    /// Whether `buf` overlaps this PE's receive rows, and whether it starts where they start.
    fn in_recv_rows(&self, sh: &Shmem, buf: &[u8]) -> (bool, bool) {
        let (at, a) = (sh.local_ptr(self.recv) as usize, buf.as_ptr() as usize);
        let overlaps = !buf.is_empty() && a < at + self.rows_area() && at < a + buf.len();
        (overlaps, overlaps && a == at)
    }

    /// Put `data` at byte `at` of `buf` on group rank `d` and signal it with `epoch` in this rank's word of
    /// `kind` (only the signal when there is no data).
    #[allow(clippy::too_many_arguments)]
    fn put_signal(
        &self,
        sh: &Shmem,
        buf: SymSlice<u8>,
        at: usize,
        data: &[u8],
        kind: Kind,
        epoch: u64,
        d: usize,
    ) -> Result<()> {
        let sig = self.sig(kind, self.me)?;
        if data.is_empty() {
            return sh.atomic_set(sig, epoch, self.pes[d]);
        }
        let dst = buf.slice(at..at + data.len())?;
        sh.put_signal(dst, data, sig, epoch, SignalOp::Set, self.pes[d])
    }

    /// Wait until every rank signalled `epoch` in its word of `kind`.
    fn wait_all(&self, sh: &Shmem, kind: Kind, epoch: u64) -> Result<()> {
        for s in 0..self.w() {
            sh.signal_wait_until(self.sig(kind, s)?, Cmp::Ge, epoch)?;
        }
        Ok(())
    }

    /// `topk_idx` of `n` tokens and `k` experts each within the maxima (both paths).
    pub(super) fn check_topk_shape(&self, op: &str, n: usize, k: usize) -> Result<()> {
        let cfg = self.cfg;
        if n > cfg.max_dispatch_tokens {
            return Err(bad(
                "topk_idx",
                format!("{n} tokens"),
                format!(
                    "{op}: more tokens than max_dispatch_tokens_per_rank = {}",
                    cfg.max_dispatch_tokens
                ),
            ));
        }
        if k == 0 || k > cfg.max_topk {
            return Err(bad(
                "topk_idx",
                format!("{k} experts per token"),
                format!("{op}: top-k must be in [1, max_topk = {}]", cfg.max_topk),
            ));
        }
        Ok(())
    }

    /// Upstream's `create_routing(topk_idx, layout=...)`: `topk_idx` is int64 `[n, k]` (row-major), `-1` = no
    /// expert. Collective over the group. Errors: an expert id out of range (its value and position), `n` or `k`
    /// past the maxima, a receive overflow (the same error on every rank, naming the rank, its count and the
    /// excess), ranks disagreeing on `k` or `layout` (`Mismatch`).
    pub fn create_routing(
        &self,
        sh: &Shmem,
        group: &Group,
        topk_idx: &[i64],
        n: usize,
        k: usize,
        layout: Layout,
    ) -> Result<Routing> {
        const OP: &str = "ep_create_routing";
        self.check_group(group, OP)?;
        let (w, l, cfg) = (self.w(), self.local_experts(), self.cfg);
        let plan = self
            .check_topk_shape(OP, n, k)
            .and_then(|()| route::plan_send(OP, topk_idx, n, k, cfg.num_experts, w));
        let dig = digest(&[1, k as u64, layout as u64, self.group_id]);
        let ours = || format!("top-k {k}, layout {}", layout.name());
        if self.entry_less() {
            // Right after a routing the other ranks may be in an entry-less dispatch or combine, which never
            // reach this routing's exchange: meet them where they wait first (`Mismatch` on every rank there).
            let epoch = self.next_epoch(Kind::Dispatch);
            let hdr = header(Kind::Routing, epoch, plan.is_err(), dig);
            for d in 0..w {
                self.announce(sh, &hdr, epoch, d)?;
            }
            self.wait_all(sh, Kind::Dispatch, epoch)?;
            let local = plan.as_ref().map(|_| 0).map_err(Clone::clone);
            self.judge_headers(sh, group, (OP, Kind::Routing), epoch, dig, local, &ours)?;
        }
        let row_len = 2 * w + l;
        // This rank's count row for destination `d`: slots and pairs for every rank, then pairs for d's experts.
        let row_for = |plan: &SendPlan, d: usize, row: &mut [u64]| {
            for d2 in 0..w {
                row[d2] = plan.slots(d2) as u64;
                row[w + d2] = plan.pairs[d2];
            }
            row[2 * w..].copy_from_slice(&plan.expert_pairs[d * l..(d + 1) * l]);
        };
        let mut all = vec![0u64; w * row_len];
        let epoch = if group.exchange_capacity(sh) >= 8 * row_len {
            // The rows travel in the agreement's own exchange: one message latency for both.
            let mut sc = group.scratch();
            let crate::group::Scratch { send, recv, .. } = &mut *sc;
            send.clear();
            if let Ok(p) = &plan {
                let mut row = vec![0u64; row_len];
                for &d in group.group_ranks() {
                    row_for(p, d, &mut row);
                    for v in &row {
                        send.data.extend_from_slice(&v.to_le_bytes());
                    }
                    send.close();
                }
            }
            group.exchange(sh, OP, plan.as_ref().err().cloned(), dig, send, recv, &ours)?;
            for (tr, &s) in group.group_ranks().iter().enumerate() {
                let got = recv.get(tr);
                if got.len() != 8 * row_len {
                    return Err(Error::State(format!(
                        "{OP}: group rank {s} sent a count row of {} bytes (expected {})",
                        got.len(),
                        8 * row_len
                    )));
                }
                for (v, b) in all[s * row_len..(s + 1) * row_len]
                    .iter_mut()
                    .zip(got.chunks_exact(8))
                {
                    *v = u64::from_le_bytes(b.try_into().unwrap_or_default());
                }
            }
            self.next_epoch(Kind::Routing)
        } else {
            // A group too large for the exchange: the agreement, then a put with signal of each row.
            group.agree(sh, OP, plan.as_ref().err().cloned(), dig, &ours)?;
            let p = plan.as_ref().map_err(Clone::clone)?;
            let epoch = self.next_epoch(Kind::Routing);
            let mut row = vec![0u64; row_len];
            for d in 0..w {
                row_for(p, d, &mut row);
                let mine = self
                    .counts
                    .slice(self.me * row_len..(self.me + 1) * row_len)?;
                sh.put_signal(
                    mine,
                    &row,
                    self.sig(Kind::Routing, self.me)?,
                    epoch,
                    SignalOp::Set,
                    self.pes[d],
                )?;
            }
            self.wait_all(sh, Kind::Routing, epoch)?;
            sh.get(&mut all, self.counts, sh.my_pe())?;
            epoch
        };
        let plan = plan?;
        let mut counts = Counts {
            w,
            slots: vec![0; w * w],
            pairs: vec![0; w * w],
        };
        let mut expert_pairs = vec![0u64; l];
        for s in 0..w {
            let r = &all[s * row_len..(s + 1) * row_len];
            counts.slots[s * w..(s + 1) * w].copy_from_slice(&r[..w]);
            counts.pairs[s * w..(s + 1) * w].copy_from_slice(&r[w..2 * w]);
            for (acc, v) in expert_pairs.iter_mut().zip(&r[2 * w..]) {
                *acc += v;
            }
        }
        if let Some(e) = counts.overflow(OP, layout, cfg.max_recv_tokens) {
            return Err(e);
        }
        self.set_last(Some((Kind::Routing, epoch)));
        Ok(Routing {
            switch: self.recv.heap_offset(),
            id: epoch,
            shape: RouteShape { layout, n, k },
            me: self.me,
            plan,
            topk: topk_idx.to_vec(),
            counts,
            expert_pairs,
            pairs: Mutex::new(None),
        })
    }

    /// The entry of a dispatch or combine: the group's agreement on this rank's verdict (`local`: its row size
    /// in bytes, or its error) and on the dtype, `hidden` and the routing (`Mismatch` when ranks differ); then the
    /// op's next epoch. Returns (row size, epoch).
    #[allow(clippy::too_many_arguments)]
    fn enter(
        &self,
        sh: &Shmem,
        group: &Group,
        op: &'static str,
        kind: Kind,
        local: Result<usize>,
        dtype: DType,
        hidden: usize,
        r: &Routing,
    ) -> Result<(usize, u64)> {
        let dig = self.op_digest(kind, dtype, hidden, r.id);
        let ours = || format!("{hidden} x {}, routing {}", dtype.name(), r.id);
        sync(sh, group, op, local.as_ref().err().cloned(), dig, &ours)?;
        let rb = local?;
        Ok((rb, self.next_epoch(kind)))
    }

    /// An entry-less op's verdict ([`TokenSwitch::entry_less`]; `kind` is this rank's op), after the wait for
    /// every rank's signal: this rank's own error first, then the first rank whose header says it rejected its
    /// arguments, then the first that called another op or whose digest differs from `dig` (`Mismatch`), as the
    /// entry's agreement would have said; the same verdict on every rank (every rank read every header). Returns
    /// `local`'s value.
    #[allow(clippy::too_many_arguments)]
    fn judge_headers(
        &self,
        sh: &Shmem,
        group: &Group,
        (op, kind): (&'static str, Kind),
        epoch: u64,
        dig: u64,
        local: Result<usize>,
        ours: &dyn Fn() -> String,
    ) -> Result<usize> {
        let w = self.w();
        let mut hdr = [0u8; 16];
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
        let mut rejected = None;
        let mut differs = None;
        for s in 0..w {
            let at = self.headers_at() + 16 * s;
            sh.get(&mut hdr, self.recv.slice(at..at + 16)?, sh.my_pe())?;
            let (flags, d) = (word(&hdr[..8]), word(&hdr[8..]));
            if flags >> 3 != epoch {
                return Err(Error::State(format!(
                    "{op}: group rank {s}'s header is of entry-less op {} (this is {epoch})",
                    flags >> 3
                )));
            }
            let theirs = (flags >> 1) & 3;
            if flags & 1 == 1 {
                rejected = rejected.or(Some(s));
            } else if theirs != kind as u64 || d != dig {
                differs = differs.or(Some((s, theirs)));
            }
        }
        let rb = local?;
        if let Some(s) = rejected {
            return Err(group.rejected(op, s)?);
        }
        if let Some((s, theirs)) = differs {
            let theirs = if theirs == kind as u64 {
                "different symmetric arguments (buffers, shapes, dtypes or op parameters must be the same on \
                 every rank)"
                    .to_string()
            } else {
                let other = match theirs {
                    0 => "ep_create_routing",
                    1 => "ep_dispatch",
                    _ => "ep_combine",
                };
                format!("another op: {other} (every rank must call the same op)")
            };
            return Err(Error::Mismatch {
                call: op,
                pe: self.pes[s],
                theirs,
                reference_pe: sh.my_pe(),
                ours: ours(),
            });
        }
        Ok(rb)
    }

    /// The digest of what every rank must agree on in a dispatch or combine (both paths): the op, the dtype,
    /// `hidden`, the routing and the group.
    pub(super) fn op_digest(&self, kind: Kind, dtype: DType, hidden: usize, routing: u64) -> u64 {
        digest(&[
            kind as u64,
            dtype as u64,
            hidden as u64,
            routing,
            self.group_id,
        ])
    }

    /// combine's dtype: float32, float16 or bfloat16 (both paths).
    pub(super) fn check_reducible(op: &str, dtype: DType) -> Result<()> {
        if !dtype.is_reducible() {
            return Err(bad(
                "expert_tokens",
                dtype.name(),
                format!("{op}: the dtype must be float32, float16 or bfloat16"),
            ));
        }
        Ok(())
    }

    /// Row size in bytes of `hidden` elements of `dtype`, checked against `max_token_bytes`.
    pub(super) fn row_bytes(
        &self,
        op: &str,
        name: &'static str,
        dtype: DType,
        hidden: usize,
    ) -> Result<usize> {
        let rb = hidden.saturating_mul(dtype.size());
        if rb == 0 || rb > self.cfg.max_token_bytes {
            return Err(bad(
                name,
                format!("{hidden} x {}", dtype.name()),
                format!(
                    "{op}: a row must hold 1 to max_token_bytes = {} bytes (has {rb})",
                    self.cfg.max_token_bytes
                ),
            ));
        }
        Ok(rb)
    }

    /// Upstream's `_dispatch`: `tokens` is `[n, hidden]` of `dtype` (row-major bytes), `topk_weights` `[n, k]`
    /// f32. Writes `r.recv_rows()` rows of the outputs (the rest is untouched):
    /// * flat: `out_tokens[rows, hidden]`, `out_topk_weights[rows, k]` and `out_topk_idx[rows, k]` (local expert
    ///   ids; `-1` and weight 0 where the token's expert lives on another rank), rows in (source rank, token)
    ///   order;
    /// * expert-major: `out_tokens[rows, hidden]` grouped by local expert, `out_topk_weights[rows]` (each pair's
    ///   weight); `out_topk_idx` must be `None`.
    ///
    /// In the flat layout, an `out_tokens` that starts where this PE's receive rows start (the rows of
    /// [`TokenSwitch::dispatch_in_place`], e.g. a tensor over them) is not copied into: the rows arrive there.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        sh: &Shmem,
        group: &Group,
        r: &Routing,
        tokens: &[u8],
        dtype: DType,
        hidden: usize,
        topk_weights: &[f32],
        out_tokens: &mut [u8],
        out_topk_weights: &mut [f32],
        out_topk_idx: Option<&mut [i64]>,
    ) -> Result<()> {
        self.dispatch_into(
            sh,
            group,
            r,
            tokens,
            dtype,
            hidden,
            topk_weights,
            Some(out_tokens),
            out_topk_weights,
            out_topk_idx,
        )
    }

    /// [`TokenSwitch::dispatch`] in the flat layout without a copy of the rows: they stay where they arrived, in
    /// this PE's receive area, and the returned slice of the symmetric heap holds them (`[r.recv_rows(), hidden]`
    /// of `dtype`, rows in (source rank, token) order); `out_topk_weights` and `out_topk_idx` are written as by
    /// `dispatch`. The rows are the switch's: they stay valid until this rank's next dispatch or combine of the
    /// switch (a combine stages its returned rows there unless it is given these rows themselves), and the other
    /// ranks read them during a combine, so they must not be written once this rank has called combine. The
    /// experts may compute in place in them and pass them to [`TokenSwitch::combine`] (through a pointer to
    /// them, e.g. a tensor over the heap) to return them without a copy. The expert-major layout is refused
    /// (its rows are one per pair: pass `out_tokens` to `dispatch`).
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_in_place(
        &self,
        sh: &Shmem,
        group: &Group,
        r: &Routing,
        tokens: &[u8],
        dtype: DType,
        hidden: usize,
        topk_weights: &[f32],
        out_topk_weights: &mut [f32],
        out_topk_idx: Option<&mut [i64]>,
    ) -> Result<SymSlice<u8>> {
        self.dispatch_into(
            sh,
            group,
            r,
            tokens,
            dtype,
            hidden,
            topk_weights,
            None,
            out_topk_weights,
            out_topk_idx,
        )?;
        self.recv
            .slice(..r.recv_rows() * hidden.saturating_mul(dtype.size()))
    }

    /// [`TokenSwitch::dispatch`]; `out_tokens` `None`: the rows stay in the receive area (flat only).
    #[allow(clippy::too_many_arguments)]
    fn dispatch_into(
        &self,
        sh: &Shmem,
        group: &Group,
        r: &Routing,
        tokens: &[u8],
        dtype: DType,
        hidden: usize,
        topk_weights: &[f32],
        out_tokens: Option<&mut [u8]>,
        out_topk_weights: &mut [f32],
        out_topk_idx: Option<&mut [i64]>,
    ) -> Result<()> {
        const OP: &str = "ep_dispatch";
        self.check_group(group, OP)?;
        let (n, k, w, me) = (r.n, r.k, self.w(), self.me);
        let rows = r.recv_rows();
        // Whether the rows arrive where the caller wants them (no copy out of the receive area).
        let mut in_place = out_tokens.is_none();
        let local = (|| {
            self.check_routing(r, OP)?;
            let rb = self.row_bytes(OP, "tokens", dtype, hidden)?;
            check_rows(OP, "tokens", tokens, rb, n, true, hidden, dtype)?;
            if topk_weights.len() != n.saturating_mul(k) {
                return Err(bad(
                    "topk_weights",
                    format!("{} entries", topk_weights.len()),
                    format!("{OP}: must be float32 [{n}, {k}]"),
                ));
            }
            match &out_tokens {
                Some(o) => {
                    check_rows(OP, "out_tokens", o, rb, rows, false, hidden, dtype)?;
                    let (overlaps, at_start) = self.in_recv_rows(sh, o);
                    if overlaps && !(at_start && r.layout == Layout::Flat) {
                        return Err(bad(
                            "out_tokens",
                            format!("{:p}", o.as_ptr()),
                            format!(
                                "{OP}: overlaps the switch's receive rows; only a flat dispatch may be given \
                                 them, from their start"
                            ),
                        ));
                    }
                    in_place = at_start;
                }
                None if r.layout == Layout::ExpertMajor => {
                    return Err(bad(
                        "layout",
                        r.layout.name(),
                        format!(
                            "{OP}: dispatch_in_place is for the flat layout (expert_major rows are one per \
                             pair: pass out_tokens to dispatch)"
                        ),
                    ))
                }
                None => {}
            }
            let per_row = match r.layout {
                Layout::Flat => k,
                Layout::ExpertMajor => 1,
            };
            if out_topk_weights.len() < rows * per_row {
                return Err(bad(
                    "out_topk_weights",
                    format!("{} entries", out_topk_weights.len()),
                    format!(
                        "{OP}: needs at least {rows} x {per_row} float32 entries ({} layout)",
                        r.layout.name()
                    ),
                ));
            }
            match (r.layout, &out_topk_idx) {
                (Layout::Flat, None) => Err(bad(
                    "out_topk_idx",
                    "None",
                    format!("{OP}: the flat layout writes it: int64 [rows >= {rows}, {k}]"),
                )),
                (Layout::Flat, Some(i)) if i.len() < rows * k => Err(bad(
                    "out_topk_idx",
                    format!("{} entries", i.len()),
                    format!("{OP}: must be int64 [rows >= {rows}, {k}]"),
                )),
                (Layout::ExpertMajor, Some(_)) => Err(bad(
                    "out_topk_idx",
                    "a tensor",
                    format!("{OP}: the expert_major layout has none (pass None)"),
                )),
                _ => Ok(rb),
            }
        })();
        // Right after a routing, no entry: each rank's op, verdict and argument digest go to every rank in a
        // header before its signal, and every rank judges them all alike after the wait (`entry_less`).
        let fast = self.entry_less();
        let dig = self.op_digest(Kind::Dispatch, dtype, hidden, r.id);
        let (rb, epoch) = if fast {
            (
                *local.as_ref().unwrap_or(&0),
                self.next_epoch(Kind::Dispatch),
            )
        } else {
            self.enter(
                sh,
                group,
                OP,
                Kind::Dispatch,
                local.clone(),
                dtype,
                hidden,
                r,
            )?
        };
        // Receive area: the rows back to back from byte 0, then from `meta0` each slot's `k` f32 weights and `k`
        // int64 expert ids (`ms` bytes a slot), then the headers.
        let (ms, wo) = (meta_bytes(k), pad8(4 * k));
        let meta0 = self.rows_area();
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let Scratch { meta, idx, .. } = &mut *scratch;
        let hdr = header(Kind::Dispatch, epoch, local.is_err(), dig);
        for d in 0..w {
            if local.is_err() {
                // Only the header and the signal: this rank sends nothing else.
                self.announce(sh, &hdr, epoch, d)?;
                continue;
            }
            let base = r.counts.dispatch_base(me, d);
            let to = r.plan.to(d);
            // Runs of consecutive tokens go to consecutive slots: one put per run.
            let mut i = 0;
            while i < to.len() {
                let t0 = to[i] as usize;
                let mut len = 1;
                while i + len < to.len() && to[i + len] as usize == t0 + len {
                    len += 1;
                }
                let at = (base + i) * rb;
                sh.put(
                    self.recv.slice(at..at + len * rb)?,
                    &tokens[t0 * rb..(t0 + len) * rb],
                    self.pes[d],
                )?;
                i += len;
            }
            meta.clear();
            meta.resize(to.len() * ms, 0);
            for (m, &t) in meta.chunks_exact_mut(ms).zip(to) {
                let t = t as usize;
                for j in 0..k {
                    m[4 * j..4 * j + 4].copy_from_slice(&topk_weights[t * k + j].to_le_bytes());
                    m[wo + 8 * j..wo + 8 * j + 8].copy_from_slice(&r.plan_idx(t, j).to_le_bytes());
                }
            }
            if fast {
                self.put_header(sh, &hdr, d)?;
            }
            if fast || !meta.is_empty() {
                // The rows (and the header) are delivered before the metadata and its signal.
                sh.fence()?;
            }
            let at = meta0 + base * ms;
            self.put_signal(sh, self.recv, at, meta, Kind::Dispatch, epoch, d)?;
        }
        self.wait_all(sh, Kind::Dispatch, epoch)?;
        if fast {
            let ours = || format!("{hidden} x {}, routing {}", dtype.name(), r.id);
            self.judge_headers(sh, group, (OP, Kind::Dispatch), epoch, dig, local, &ours)?;
        }
        let slots = r.counts.recv_slots(me) as usize;
        let got = meta;
        got.clear();
        got.resize(slots * ms, 0);
        sh.get(got, self.recv.slice(meta0..meta0 + slots * ms)?, sh.my_pe())?;
        let l = self.local_experts();
        let first = me * l;
        let weight = |i: usize, j: usize| {
            let b = &got[i * ms + 4 * j..i * ms + 4 * j + 4];
            f32::from_le_bytes([b[0], b[1], b[2], b[3]])
        };
        idx.clear();
        idx.resize(slots * k, 0);
        for i in 0..slots {
            for j in 0..k {
                let b = &got[i * ms + wo + 8 * j..i * ms + wo + 8 * j + 8];
                idx[i * k + j] = i64::from_le_bytes(b.try_into().unwrap_or_default());
            }
        }
        let me_pe = sh.my_pe();
        match r.layout {
            Layout::Flat => {
                let oi = out_topk_idx.unwrap_or_default();
                if let (Some(o), false) = (out_tokens, in_place) {
                    sh.get(&mut o[..slots * rb], self.recv.slice(..slots * rb)?, me_pe)?;
                }
                for i in 0..slots {
                    for j in 0..k {
                        let e = idx[i * k + j];
                        let local = e >= first as i64 && e < (first + l) as i64;
                        oi[i * k + j] = if local { e - first as i64 } else { -1 };
                        out_topk_weights[i * k + j] = if local { weight(i, j) } else { 0.0 };
                    }
                }
            }
            Layout::ExpertMajor => {
                let out_tokens = out_tokens.unwrap_or_default();
                let pl = route::pair_layout(idx, k, first, l);
                for i in 0..slots {
                    for p in pl.starts[i]..pl.starts[i + 1] {
                        let row = pl.pos[p];
                        sh.get(
                            &mut out_tokens[row * rb..(row + 1) * rb],
                            self.recv.slice(i * rb..(i + 1) * rb)?,
                            me_pe,
                        )?;
                        out_topk_weights[row] = weight(i, pl.col[p]);
                    }
                }
                *r.pairs.lock().unwrap_or_else(|p| p.into_inner()) = Some(pl);
            }
        }
        self.set_last(Some((Kind::Dispatch, r.id)));
        Ok(())
    }

    /// Upstream's `_combine`: `expert_tokens` is `[rows >= r.recv_rows(), hidden]` of `dtype` (float32, float16
    /// or bfloat16) in the routing's layout; `out` (`[n, hidden]`, overwritten) gets, for each token, the sum of
    /// the rows of its slots on every rank (expert-major: of its pairs). Sums run in f32 and are rounded once per
    /// rank (expert-major: the sum of a slot's pairs, on the expert rank) and once at the end. Weights are not
    /// applied (upstream: the experts apply the dispatched `topk_weights`; combine is dispatch's adjoint).
    ///
    /// Each rank's returned rows (one per received slot) are in its receive rows, where the sources read them:
    /// a flat `expert_tokens` that starts where those rows start (the rows of
    /// [`TokenSwitch::dispatch_in_place`]) is read where it is; any other is first copied there (expert-major:
    /// the sum of each slot's pairs), which ends the receive rows' validity. An `expert_tokens` that overlaps
    /// them otherwise is an error.
    #[allow(clippy::too_many_arguments)]
    pub fn combine(
        &self,
        sh: &Shmem,
        group: &Group,
        r: &Routing,
        expert_tokens: &[u8],
        dtype: DType,
        hidden: usize,
        out: &mut [u8],
    ) -> Result<()> {
        self.combine_from(sh, group, r, Some(expert_tokens), dtype, hidden, out)
    }

    /// [`TokenSwitch::combine`] of the flat layout's rows where [`TokenSwitch::dispatch_in_place`] left them (the
    /// experts computed in place there): the sources read them where they are, nothing is copied before.
    #[allow(clippy::too_many_arguments)]
    pub fn combine_in_place(
        &self,
        sh: &Shmem,
        group: &Group,
        r: &Routing,
        dtype: DType,
        hidden: usize,
        out: &mut [u8],
    ) -> Result<()> {
        self.combine_from(sh, group, r, None, dtype, hidden, out)
    }

    /// [`TokenSwitch::combine`]; `expert_tokens` `None`: the receive rows as they are (flat only).
    #[allow(clippy::too_many_arguments)]
    fn combine_from(
        &self,
        sh: &Shmem,
        group: &Group,
        r: &Routing,
        expert_tokens: Option<&[u8]>,
        dtype: DType,
        hidden: usize,
        out: &mut [u8],
    ) -> Result<()> {
        const OP: &str = "ep_combine";
        self.check_group(group, OP)?;
        let (n, w, me) = (r.n, self.w(), self.me);
        let rows = r.recv_rows();
        let pairs = r.pairs.lock().unwrap_or_else(|p| p.into_inner());
        let local = (|| {
            self.check_routing(r, OP)?;
            Self::check_reducible(OP, dtype)?;
            let rb = self.row_bytes(OP, "expert_tokens", dtype, hidden)?;
            let Some(expert_tokens) = expert_tokens else {
                check_rows(OP, "out", out, rb, n, true, hidden, dtype)?;
                if r.layout == Layout::ExpertMajor {
                    return Err(bad(
                        "layout",
                        r.layout.name(),
                        format!(
                            "{OP}: combine_in_place is for the flat layout (pass expert_tokens to combine)"
                        ),
                    ));
                }
                return Ok((rb, true));
            };
            check_rows(
                OP,
                "expert_tokens",
                expert_tokens,
                rb,
                rows,
                false,
                hidden,
                dtype,
            )?;
            check_rows(OP, "out", out, rb, n, true, hidden, dtype)?;
            if r.layout == Layout::ExpertMajor && pairs.is_none() && rows > 0 {
                return Err(Error::State(format!(
                    "{OP}: an expert_major routing is combined after its first dispatch (the received \
                     topk_idx places the pairs)"
                )));
            }
            let (overlaps, at_start) = self.in_recv_rows(sh, expert_tokens);
            if overlaps && !(at_start && r.layout == Layout::Flat) {
                return Err(bad(
                    "expert_tokens",
                    format!("{:p}", expert_tokens.as_ptr()),
                    format!(
                        "{OP}: overlaps the switch's receive rows; only a flat combine may be given them, \
                         from their start"
                    ),
                ));
            }
            Ok((rb, at_start))
        })();
        let es = dtype.size();
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let Scratch {
            block: got,
            acc,
            stage,
            cursors,
            dests,
            ..
        } = &mut *scratch;
        acc.clear();
        acc.resize(hidden, 0.0);
        // The returned rows go into this rank's receive rows before the entry when no rank can be reading them
        // (the last op was a routing or a dispatch: `last`); the entry then also says they are ready.
        let early = matches!(self.last(), Some((Kind::Routing | Kind::Dispatch, _)));
        let mut local = local;
        if let (true, Ok((rb, in_place))) = (early, &local) {
            let staged = self.stage_returns(
                sh,
                r,
                pairs.as_ref(),
                expert_tokens.unwrap_or_default(),
                (dtype, *rb, *in_place),
                stage,
                acc,
            );
            if let Err(e) = staged {
                local = Err(e);
            }
        }
        let in_place = matches!(local, Ok((_, true)));
        let (rb, epoch) = if self.entry_less() {
            // Right after a routing: the entry-less dispatch's header and signal, with this op in the header (a
            // rank that dispatches meanwhile meets this one there: `Mismatch` on both). The rows were staged.
            let dig = self.op_digest(Kind::Combine, dtype, hidden, r.id);
            let epoch = self.next_epoch(Kind::Dispatch);
            let hdr = header(Kind::Combine, epoch, local.is_err(), dig);
            sh.quiet()?; // the staged rows are complete before any rank hears they are ready
            for d in 0..w {
                self.announce(sh, &hdr, epoch, d)?;
            }
            self.wait_all(sh, Kind::Dispatch, epoch)?;
            let ours = || format!("{hidden} x {}, routing {}", dtype.name(), r.id);
            let local = local.map(|l| l.0);
            let rb =
                self.judge_headers(sh, group, (OP, Kind::Combine), epoch, dig, local, &ours)?;
            (rb, epoch)
        } else {
            self.enter(
                sh,
                group,
                OP,
                Kind::Combine,
                local.map(|l| l.0),
                dtype,
                hidden,
                r,
            )?
        };
        if !early {
            // A combine right after another: the sources may still read this rank's rows until they have passed
            // this entry; stage now, then tell every source.
            self.stage_returns(
                sh,
                r,
                pairs.as_ref(),
                expert_tokens.unwrap_or_default(),
                (dtype, rb, in_place),
                stage,
                acc,
            )?;
            for s in 0..w {
                self.put_signal(sh, self.recv, 0, &[], Kind::Combine, epoch, s)?;
            }
            self.wait_all(sh, Kind::Combine, epoch)?;
        }
        drop(pairs);
        // In blocks of tokens whose returned rows fit in COMBINE_BLOCK bytes (or of one token): each rank's rows for
        // the block are consecutive in its receive rows (this rank's slots there are in token order), so one get
        // per (block, rank) brings them into the cached `got`; then token by token its rows are summed in rank
        // order in an f32 row. No buffer of every returned row or of every token's sum.
        dests.clear();
        dests.resize(n, 0);
        for &t in &r.plan.tokens {
            dests[t as usize] += 1;
        }
        let rows_of = |t: usize| dests[t] as usize * rb;
        grow(
            got,
            (r.plan.tokens.len() * rb).min(COMBINE_BLOCK.max(w * rb)),
        );
        cursors.clear();
        cursors.resize(3 * w, 0);
        let (cur, rest) = cursors.split_at_mut(w);
        let (seg, base) = rest.split_at_mut(w);
        for (d, b) in base.iter_mut().enumerate() {
            *b = r.counts.dispatch_base(me, d);
        }
        let mut t1 = 0;
        while t1 < n {
            let t0 = t1;
            let mut bytes = rows_of(t0);
            t1 += 1;
            while t1 < n && bytes + rows_of(t1) <= COMBINE_BLOCK {
                bytes += rows_of(t1);
                t1 += 1;
            }
            let mut used = 0;
            for d in 0..w {
                let to = r.plan.to(d);
                let first = cur[d];
                let cnt = to[first..]
                    .iter()
                    .take_while(|&&t| (t as usize) < t1)
                    .count();
                seg[d] = used;
                if cnt > 0 {
                    let at = (base[d] + first) * rb;
                    sh.get(
                        &mut got[used..used + cnt * rb],
                        self.recv.slice(at..at + cnt * rb)?,
                        self.pes[d],
                    )?;
                    used += cnt * rb;
                }
            }
            for (o, t) in out[t0 * rb..t1 * rb].chunks_exact_mut(rb).zip(t0..) {
                let mut first = true;
                for d in 0..w {
                    if r.plan.to(d).get(cur[d]) != Some(&(t as u32)) {
                        continue;
                    }
                    add_row(acc, &got[seg[d]..seg[d] + rb], dtype, first);
                    first = false;
                    seg[d] += rb;
                    cur[d] += 1;
                }
                if first {
                    // A token routed nowhere sums to zero.
                    acc.fill(0.0);
                }
                store_row(acc, o, dtype, es);
            }
        }
        self.set_last(Some((Kind::Combine, r.id)));
        Ok(())
    }

    /// Put this rank's returned rows (one per received slot, in receive order) into its receive rows: flat, a
    /// copy of `expert_tokens` (none when it is those rows: `in_place`); expert-major, each slot's pairs summed in
    /// f32 and rounded, a block of rows at a time through `stage`.
    #[allow(clippy::too_many_arguments)]
    fn stage_returns(
        &self,
        sh: &Shmem,
        r: &Routing,
        pairs: Option<&PairLayout>,
        expert_tokens: &[u8],
        (dtype, rb, in_place): (DType, usize, bool),
        stage: &mut Vec<u8>,
        acc: &mut [f32],
    ) -> Result<()> {
        let slots = r.counts.recv_slots(self.me) as usize;
        let me_pe = sh.my_pe();
        match (r.layout, pairs) {
            (Layout::ExpertMajor, Some(pl)) => {
                let block = (COMBINE_BLOCK / rb).max(1);
                grow(stage, block.min(slots) * rb);
                for i0 in (0..slots).step_by(block) {
                    let i1 = (i0 + block).min(slots);
                    for (i, o) in (i0..i1).zip(stage.chunks_exact_mut(rb)) {
                        let ps = &pl.pos[pl.starts[i]..pl.starts[i + 1]];
                        for (p, &row) in ps.iter().enumerate() {
                            add_row(acc, &expert_tokens[row * rb..(row + 1) * rb], dtype, p == 0);
                        }
                        if ps.is_empty() {
                            acc.fill(0.0);
                        }
                        store_row(acc, o, dtype, dtype.size());
                    }
                    sh.put(
                        self.recv.slice(i0 * rb..i1 * rb)?,
                        &stage[..(i1 - i0) * rb],
                        me_pe,
                    )?;
                }
                Ok(())
            }
            _ if in_place || slots == 0 => Ok(()),
            _ => sh.put(
                self.recv.slice(..slots * rb)?,
                &expert_tokens[..slots * rb],
                me_pe,
            ),
        }
    }
}

/// An entry-less op's 16-byte header ([`TokenSwitch::entry_less`]): `epoch << 3 | kind << 1 | rejected`, then the
/// argument digest.
fn header(kind: Kind, epoch: u64, rejected: bool, dig: u64) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[..8].copy_from_slice(&(epoch << 3 | (kind as u64) << 1 | rejected as u64).to_le_bytes());
    h[8..].copy_from_slice(&dig.to_le_bytes());
    h
}

impl Routing {
    /// The global expert id of token `t`'s `j`-th choice, as planned.
    fn plan_idx(&self, t: usize, j: usize) -> i64 {
        self.topk[t * self.k + j]
    }
}

/// The group's agreement on an op's entry (`local`: this rank's error; `dig`: the digest of what every rank must
/// agree on): one exchange without payloads, one message latency, where the group fits the exchange area; else the
/// agreement's `ceil(log2 W)` rounds. Either way every rank has entered the op when it returns.
fn sync(
    sh: &Shmem,
    group: &Group,
    op: &'static str,
    local: Option<Error>,
    dig: u64,
    ours: &dyn Fn() -> String,
) -> Result<()> {
    if group.exchange_capacity(sh) == 0 {
        return group.agree(sh, op, local, dig, ours);
    }
    let mut sc = group.scratch();
    let crate::group::Scratch { send, recv, .. } = &mut *sc;
    send.clear();
    for _ in 0..group.size() {
        send.close();
    }
    group.exchange(sh, op, local, dig, send, recv, ours)
}

/// Make `buf` at least `len` bytes long, keeping what it holds (every use overwrites what it reads: no memset of
/// a reused buffer per step).
fn grow(buf: &mut Vec<u8>, len: usize) {
    if buf.len() < len {
        buf.resize(len, 0);
    }
}

/// Bytes of returned rows a combine brings in per block of tokens (cache-sized: the rows are summed right after).
const COMBINE_BLOCK: usize = 1 << 20;

/// Check that `buf` holds whole rows of `rb` bytes: exactly `rows` of them (`exact`), or at least `rows`.
#[allow(clippy::too_many_arguments)]
fn check_rows(
    op: &str,
    name: &'static str,
    buf: &[u8],
    rb: usize,
    rows: usize,
    exact: bool,
    hidden: usize,
    dtype: DType,
) -> Result<()> {
    let need = rows.saturating_mul(rb);
    let ok = if exact {
        buf.len() == need
    } else {
        buf.len() % rb == 0 && buf.len() >= need
    };
    if ok {
        return Ok(());
    }
    let shape = if exact {
        format!("[{rows}, {hidden}]")
    } else {
        format!("[rows >= {rows}, {hidden}]")
    };
    Err(bad(
        name,
        format!("{} bytes", buf.len()),
        format!("{op}: must be {shape} of {}", dtype.name()),
    ))
}

/// `acc += row` (row of `dtype`, widened to f32; float32 and bfloat16 without a per-element dispatch); the
/// first row of a sum is loaded instead (`first`: no pass that zeroes `acc` per token).
fn add_row(acc: &mut [f32], row: &[u8], dtype: DType, first: bool) {
    if first {
        fold(acc, row, dtype, |a, x| *a = x);
    } else {
        fold(acc, row, dtype, |a, x| *a += x);
    }
}

/// `f(acc[i], row[i] as f32)` for every element.
#[inline(always)]
fn fold(acc: &mut [f32], row: &[u8], dtype: DType, f: impl Fn(&mut f32, f32)) {
    match dtype {
        DType::F32 => {
            for (a, b) in acc.iter_mut().zip(row.chunks_exact(4)) {
                f(a, f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            }
        }
        DType::BF16 => {
            for (a, b) in acc.iter_mut().zip(row.chunks_exact(2)) {
                f(
                    a,
                    crate::dtype::bf16_to_f32(u16::from_le_bytes([b[0], b[1]])),
                );
            }
        }
        _ => {
            for (a, b) in acc.iter_mut().zip(row.chunks_exact(dtype.size())) {
                f(a, dtype.load_f32(b));
            }
        }
    }
}

/// Store `acc` as a row of `dtype` (element size `es`), rounding to nearest even.
fn store_row(acc: &[f32], row: &mut [u8], dtype: DType, es: usize) {
    match dtype {
        DType::F32 => {
            for (a, b) in acc.iter().zip(row.chunks_exact_mut(4)) {
                b.copy_from_slice(&a.to_le_bytes());
            }
        }
        DType::BF16 => {
            for (a, b) in acc.iter().zip(row.chunks_exact_mut(2)) {
                b.copy_from_slice(&crate::dtype::f32_to_bf16(*a).to_le_bytes());
            }
        }
        _ => {
            for (a, b) in acc.iter().zip(row.chunks_exact_mut(es)) {
                dtype.store_f32(*a, b);
            }
        }
    }
}
