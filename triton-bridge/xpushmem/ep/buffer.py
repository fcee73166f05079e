"""``xpushmem.ep.Buffer``: DeepEP's ``deep_ep.Buffer`` API on xpushmem's token switch (host path, CPU tensors).

Normal mode: ``get_dispatch_layout``, ``dispatch`` (with or without a cached ``handle``) and ``combine`` (sum
without weights), as DeepEP's intranode path (flat layout: one received row per (token, destination rank), in
(source rank, token) order; ``recv_topk_idx`` holds local expert ids, ``-1`` elsewhere). Low-latency mode:
``low_latency_dispatch`` (expert-packed ``[num_local_experts, num_max_dispatch_tokens_per_rank * num_ranks, hidden]``,
optional FP8 casting with per-128-channel scales) and ``low_latency_combine`` (sum with the tokens' weights).

Events, streams, SM counts and channel configs have no equivalent on the host path: ``EventOverlap`` is a
completed event (every call returns with its data in place), ``previous_event``/``async_finish``/
``allocate_on_comm_stream``/``config`` are accepted and have nothing to do, ``return_recv_hook`` returns a hook that
does nothing (the data has arrived). Arguments that would change results and are not supported raise an error that
names them. The receive buffers are the token switch's (symmetric heap): they are sized by the calls (agreed over
the group, grown by powers of two), not by ``num_nvl_bytes``/``num_rdma_bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist

from ..torch import shim
from ..torch.token_switch import _LAYOUTS, _RoutingHandle

_FP8 = getattr(torch, "float8_e4m3fn", None)
_FP8_MAX = 448.0


class EventOverlap:
    """DeepEP's event wrapper. The host path completes every call before it returns, so the event has already
    happened: ``current_stream_wait`` and the ``with`` block do nothing."""

    def __init__(self, event: Any = None, extra_tensors: Any = None) -> None:
        self.event = event
        self.extra_tensors = extra_tensors

    def current_stream_wait(self) -> None:
        """Nothing to wait for (the call that made the event has completed)."""

    def __enter__(self) -> EventOverlap:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


@dataclass
class Config:
    """DeepEP's performance config (SMs, chunk sizes): accepted and unused (the host path has no SMs or channels).
    The size hints are the token switch's buffer sizes for ``hidden_bytes`` rows."""

    num_sms: int = 20
    num_max_nvl_chunked_send_tokens: int = 6
    num_max_nvl_chunked_recv_tokens: int = 256
    num_max_rdma_chunked_send_tokens: int = 6
    num_max_rdma_chunked_recv_tokens: int = 128

    def get_nvl_buffer_size_hint(self, hidden_bytes: int, num_ranks: int) -> int:
        return _switch_bytes(self.num_max_nvl_chunked_recv_tokens, num_ranks * self.num_max_nvl_chunked_recv_tokens,
                             hidden_bytes, 8, num_ranks)

    def get_rdma_buffer_size_hint(self, hidden_bytes: int, num_ranks: int) -> int:
        return 0


def _pad8(n: int) -> int:
    return (n + 7) // 8 * 8


def _switch_bytes(max_dispatch: int, max_recv: int, token_bytes: int, topk: int, world: int) -> int:
    """The symmetric bytes a token switch allocates (ops/src/ep/switch.rs: receive slots, combine rows, counts,
    signals)."""
    slot = token_bytes + _pad8(4 * topk) + 8 * topk
    return max_recv * slot + max_dispatch * min(topk, world) * token_bytes + 8 * world * (2 * world + 1) + 24 * world


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


@dataclass
class _Switch:
    handle: int
    num_experts: int
    max_dispatch: int
    max_recv: int
    token_bytes: int
    topk: int


@dataclass
class _Handle:
    """The communication handle ``dispatch`` returns (DeepEP's is a tuple of layout tensors)."""

    routing: _RoutingHandle
    switch: _Switch
    num_tokens: int
    num_topk: int
    num_recv_tokens: int
    is_token_in_rank: torch.Tensor


@dataclass
class _LowLatencyHandle:
    routing: _RoutingHandle
    switch: _Switch
    num_tokens: int
    num_max_dispatch_tokens_per_rank: int
    hidden: int
    num_experts: int


def _unsupported(name: str, value: Any, why: str) -> ValueError:
    return ValueError(f"xpushmem.ep.Buffer: {name}={value!r} is not supported: {why}")


class Buffer:
    """DeepEP's ``Buffer`` (module docs). Collective over ``group``; every process of the world makes its buffers
    at the same points (the receive buffers are allocated with the world-collective symmetric ``malloc``)."""

    num_sms: int = 20

    def __init__(
        self,
        group: dist.ProcessGroup,
        num_nvl_bytes: int = 0,
        num_rdma_bytes: int = 0,
        low_latency_mode: bool = False,
        num_qps_per_rank: int = 12,
        allow_nvlink_for_low_latency_mode: bool = True,
        explicitly_destroy: bool = False,
    ) -> None:
        for name, v in (("num_nvl_bytes", num_nvl_bytes), ("num_rdma_bytes", num_rdma_bytes)):
            if v < 0:
                raise ValueError(f"xpushmem.ep.Buffer: {name} must be non-negative, got {v}")
        self.rank = group.rank()
        self.group_size = group.size()
        self.group = group
        self.num_nvl_bytes = num_nvl_bytes
        self.num_rdma_bytes = num_rdma_bytes
        self.low_latency_mode = low_latency_mode
        self.explicitly_destroy = explicitly_destroy
        self._switches: dict[str, _Switch] = {}

    # ----------------------------------------------------------------------------------------- housekeeping ----
    def destroy(self) -> None:
        """Free the receive buffers (collective, like their creation)."""
        for sw in self._switches.values():
            shim.ep_destroy(sw.handle)
        self._switches.clear()

    @staticmethod
    def set_num_sms(new_num_sms: int) -> None:
        """Accepted (must be even, as DeepEP asks); the host path has no SMs."""
        if new_num_sms % 2:
            raise ValueError(f"xpushmem.ep.Buffer: new_num_sms must be even, got {new_num_sms}")
        Buffer.num_sms = new_num_sms

    @staticmethod
    def capture() -> EventOverlap:
        """A completed event (module docs)."""
        return EventOverlap()

    @staticmethod
    def get_dispatch_config(num_ranks: int) -> Config:
        return Config(Buffer.num_sms)

    @staticmethod
    def get_combine_config(num_ranks: int) -> Config:
        return Config(Buffer.num_sms)

    @staticmethod
    def get_low_latency_rdma_size_hint(
        num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int
    ) -> int:
        """The symmetric bytes low-latency mode allocates for these sizes (bf16 tokens, top-k up to 8)."""
        local = max(1, num_experts // max(1, num_ranks))
        return _switch_bytes(
            num_max_dispatch_tokens_per_rank,
            num_max_dispatch_tokens_per_rank * num_ranks * min(8, local),
            hidden * 2,
            8,
            num_ranks,
        )

    def get_local_buffer_tensor(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise NotImplementedError(
            "xpushmem.ep.Buffer.get_local_buffer_tensor: the receive buffers belong to the token switch and are not "
            "exposed"
        )

    def get_next_low_latency_combine_buffer(self, handle: object) -> torch.Tensor:
        raise NotImplementedError(
            "xpushmem.ep.Buffer.get_next_low_latency_combine_buffer: zero-copy combine is not supported (pass the "
            "expert outputs to low_latency_combine)"
        )

    def clean_low_latency_buffer(self, num_max_dispatch_tokens_per_rank: int, hidden: int, num_experts: int) -> None:
        """Nothing to clean: the switch's buffers need no zeroing between modes."""

    # ------------------------------------------------------------------------------------------- switches ----
    def _switch(self, kind: str, num_experts: int, max_dispatch: int, max_recv: int, token_bytes: int,
                topk: int) -> _Switch:
        """A switch of ``kind`` covering the (agreed) request; a larger one replaces a smaller (collectively)."""
        sw = self._switches.get(kind)
        if (
            sw is not None
            and sw.num_experts == num_experts
            and sw.max_dispatch >= max_dispatch
            and sw.max_recv >= max_recv
            and sw.token_bytes >= token_bytes
            and sw.topk >= topk
        ):
            return sw
        if sw is not None:
            shim.ep_destroy(sw.handle)
            del self._switches[kind]
            if sw.num_experts == num_experts:  # grow, never shrink
                max_dispatch, max_recv = max(max_dispatch, sw.max_dispatch), max(max_recv, sw.max_recv)
                token_bytes, topk = max(token_bytes, sw.token_bytes), max(topk, sw.topk)
        h = shim.ep_create(self.group.group_name, num_experts, max_dispatch, max_recv, token_bytes, topk)
        sw = _Switch(h, num_experts, max_dispatch, max_recv, token_bytes, topk)
        self._switches[kind] = sw
        return sw

    def _routing(self, sw: _Switch, topk_idx: torch.Tensor, layout: str) -> _RoutingHandle:
        local = sw.num_experts // self.group_size
        counts = torch.zeros(local, dtype=torch.int64)
        h, rows = shim.ep_create_routing(sw.handle, topk_idx.contiguous(), _LAYOUTS[layout], counts)
        return _RoutingHandle(sw.handle, h, rows, counts)

    # ---------------------------------------------------------------------------------------- normal mode ----
    def get_dispatch_layout(
        self,
        topk_idx: torch.Tensor,
        num_experts: int,
        previous_event: EventOverlap | None = None,
        async_finish: bool = False,
        allocate_on_comm_stream: bool = False,
    ) -> tuple[torch.Tensor, None, torch.Tensor, torch.Tensor, EventOverlap]:
        """(num_tokens_per_rank int32 [W], None (one node), num_tokens_per_expert int32 [E], is_token_in_rank bool
        [N, W], event). Local: no communication."""
        _cpu("get_dispatch_layout", topk_idx=topk_idx)
        _check_topk_idx(topk_idx, num_experts)
        w = self.group_size
        if num_experts % w:
            raise ValueError(f"xpushmem.ep.Buffer: num_experts={num_experts} must be a multiple of the group size {w}")
        local = num_experts // w
        valid = topk_idx >= 0
        per_expert = torch.bincount(topk_idx[valid], minlength=num_experts).to(torch.int32)
        rank_of = torch.where(valid, topk_idx // local, torch.full_like(topk_idx, w))
        in_rank = torch.zeros(topk_idx.size(0), w + 1, dtype=torch.bool)
        in_rank.scatter_(1, rank_of, True)
        in_rank = in_rank[:, :w].contiguous()
        return in_rank.sum(0).to(torch.int32), None, per_expert, in_rank, EventOverlap()

    def dispatch(
        self,
        x: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
        handle: _Handle | None = None,
        num_tokens_per_rank: torch.Tensor | None = None,
        num_tokens_per_rdma_rank: torch.Tensor | None = None,
        is_token_in_rank: torch.Tensor | None = None,
        num_tokens_per_expert: torch.Tensor | None = None,
        topk_idx: torch.Tensor | None = None,
        topk_weights: torch.Tensor | None = None,
        expert_alignment: int = 1,
        num_worst_tokens: int = 0,
        config: Config | None = None,
        previous_event: EventOverlap | None = None,
        async_finish: bool = False,
        allocate_on_comm_stream: bool = False,
    ) -> tuple[Any, torch.Tensor | None, torch.Tensor | None, list[int] | None, _Handle | None, EventOverlap]:
        """DeepEP's normal dispatch: (recv_x, recv_topk_idx, recv_topk_weights, num_recv_tokens_per_expert_list,
        handle, event); with ``handle`` (cached mode): (recv_x, None, None, None, None, event)."""
        _cpu("dispatch", x=x, topk_idx=topk_idx, topk_weights=topk_weights)
        x, scales = x if isinstance(x, tuple) else (x, None)
        if num_tokens_per_rdma_rank is not None:
            raise _unsupported("num_tokens_per_rdma_rank", "a tensor", "one node only (pass None)")
        if num_worst_tokens:
            raise _unsupported("num_worst_tokens", num_worst_tokens, "outputs are sized by the received count")
        if expert_alignment < 1:
            raise ValueError(f"xpushmem.ep.Buffer.dispatch: expert_alignment must be positive, got {expert_alignment}")
        if handle is not None:
            if topk_idx is not None or topk_weights is not None:
                raise ValueError("xpushmem.ep.Buffer.dispatch: with a handle, topk_idx and topk_weights must be None")
            if x.size(0) != handle.num_tokens:
                raise ValueError(
                    f"xpushmem.ep.Buffer.dispatch: x has {x.size(0)} tokens, the handle {handle.num_tokens}"
                )
            zeros = torch.zeros(handle.num_tokens, handle.num_topk, dtype=torch.float32)
            recv_x = self._send(handle.switch, handle.routing, x, zeros, handle.num_recv_tokens, handle.num_topk)[0]
            recv_s = (
                self._send(handle.switch, handle.routing, scales, zeros, handle.num_recv_tokens, handle.num_topk)[0]
                if scales is not None
                else None
            )
            return (recv_x, recv_s) if scales is not None else recv_x, None, None, None, None, EventOverlap()
        if topk_idx is None or topk_weights is None:
            raise ValueError("xpushmem.ep.Buffer.dispatch: topk_idx and topk_weights are required without a handle")
        if num_tokens_per_expert is None:
            raise ValueError("xpushmem.ep.Buffer.dispatch: num_tokens_per_expert is required without a handle")
        num_experts = num_tokens_per_expert.numel()
        mine = self.get_dispatch_layout(topk_idx, num_experts)
        for name, given, want in (
            ("num_tokens_per_rank", num_tokens_per_rank, mine[0]),
            ("num_tokens_per_expert", num_tokens_per_expert, mine[2]),
            ("is_token_in_rank", is_token_in_rank, mine[3]),
        ):
            if given is None or not torch.equal(given.to(want.dtype).cpu(), want):
                raise ValueError(
                    f"xpushmem.ep.Buffer.dispatch: {name} must be get_dispatch_layout(topk_idx, num_experts)'s"
                )
        n, k = topk_idx.shape
        rb = x.size(1) * x.element_size()
        if scales is not None:
            rb = max(rb, scales.size(1) * scales.element_size())
        rb = max(rb, 4 * k)  # combine also returns the f32 topk_weights rows
        # The maxima, agreed over the group (every rank then sizes its switch alike).
        need = torch.tensor([n, rb, k], dtype=torch.int64)
        dist.all_reduce(need, op=dist.ReduceOp.MAX, group=self.group)
        md = _pow2(max(1, int(need[0])))
        sw = self._switch("normal", num_experts, md, md * self.group_size, _pow2(int(need[1])), max(1, int(need[2])))
        routing = self._routing(sw, topk_idx, "flat")
        rows = routing.recv_rows
        recv_x, recv_w, recv_i = self._send(sw, routing, x, topk_weights, rows, k)
        recv_s = self._send(sw, routing, scales, topk_weights, rows, k)[0] if scales is not None else None
        counts = [int(c) for c in routing.expert_counts]
        aligned = [(c + expert_alignment - 1) // expert_alignment * expert_alignment for c in counts]
        h = _Handle(routing, sw, n, k, rows, mine[3])
        out_x = (recv_x, recv_s) if scales is not None else recv_x
        return out_x, recv_i, recv_w, aligned, h, EventOverlap()

    def _send(
        self, sw: _Switch, routing: _RoutingHandle, x: torch.Tensor, weights: torch.Tensor, rows: int, k: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out = x.new_empty(rows, x.size(1))
        ow = torch.zeros(rows, k, dtype=torch.float32)
        oi = torch.zeros(rows, k, dtype=torch.int64)
        shim.ep_dispatch(sw.handle, routing.handle, x.contiguous(), weights.to(torch.float32).contiguous(), out, ow, oi)
        return out, ow, oi

    def combine(
        self,
        x: torch.Tensor,
        handle: _Handle,
        topk_weights: torch.Tensor | None = None,
        bias: Any = None,
        config: Config | None = None,
        previous_event: EventOverlap | None = None,
        async_finish: bool = False,
        allocate_on_comm_stream: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, EventOverlap]:
        """DeepEP's normal combine: (combined_x [N, hidden], combined_topk_weights [N, K] or None, event); sums
        without weights."""
        _cpu("combine", x=x, topk_weights=topk_weights)
        if bias is not None:
            raise _unsupported("bias", "a tensor", "add it to the combined tokens")
        if not isinstance(handle, _Handle):
            raise ValueError("xpushmem.ep.Buffer.combine: handle must be the one dispatch returned")
        if x.size(0) < handle.num_recv_tokens:
            raise ValueError(
                f"xpushmem.ep.Buffer.combine: x has {x.size(0)} rows, the dispatch received {handle.num_recv_tokens}"
            )
        out = x.new_empty(handle.num_tokens, x.size(1))
        shim.ep_combine(handle.switch.handle, handle.routing.handle, x.contiguous(), out)
        w = None
        if topk_weights is not None:
            w = torch.empty(handle.num_tokens, topk_weights.size(1), dtype=torch.float32)
            shim.ep_combine(handle.switch.handle, handle.routing.handle, topk_weights.float().contiguous(), w)
        return out, w, EventOverlap()

    # ---------------------------------------------------------------------------------- low-latency mode ----
    def low_latency_dispatch(
        self,
        x: torch.Tensor,
        topk_idx: torch.Tensor,
        num_max_dispatch_tokens_per_rank: int,
        num_experts: int,
        cumulative_local_expert_recv_stats: torch.Tensor | None = None,
        dispatch_wait_recv_cost_stats: torch.Tensor | None = None,
        use_fp8: bool = True,
        round_scale: bool = False,
        use_ue8m0: bool = False,
        async_finish: bool = False,
        return_recv_hook: bool = False,
    ) -> tuple[Any, torch.Tensor, _LowLatencyHandle, EventOverlap, Callable[[], None]]:
        """DeepEP's low-latency dispatch: (recv_x [L, max * W, hidden] (with FP8: (values, scales [L, max * W,
        hidden / 128], column-major in the last two dims)), recv_count int32 [L], handle, event, hook)."""
        _cpu("low_latency_dispatch", x=x, topk_idx=topk_idx)
        if round_scale or use_ue8m0:
            raise _unsupported("round_scale/use_ue8m0", (round_scale, use_ue8m0), "plain float32 scales only")
        if dispatch_wait_recv_cost_stats is not None:
            raise _unsupported("dispatch_wait_recv_cost_stats", "a tensor", "no per-rank wait timing on the host path")
        _check_topk_idx(topk_idx, num_experts)
        n, k = topk_idx.shape
        hidden = x.size(1)
        w = self.group_size
        if num_experts % w:
            raise ValueError(f"xpushmem.ep.Buffer: num_experts={num_experts} must be a multiple of the group size {w}")
        if n > num_max_dispatch_tokens_per_rank:
            raise ValueError(
                f"xpushmem.ep.Buffer.low_latency_dispatch: x has {n} tokens, more than "
                f"num_max_dispatch_tokens_per_rank={num_max_dispatch_tokens_per_rank}"
            )
        if use_fp8 and (_FP8 is None or hidden % 128):
            raise _unsupported("use_fp8", True, f"needs torch.float8_e4m3fn and hidden % 128 == 0 (hidden={hidden})")
        local = num_experts // w
        cap = num_max_dispatch_tokens_per_rank * w
        rb = max(hidden * x.element_size(), 4 * max(1, hidden // 128))
        sw = self._switch("low_latency", num_experts, num_max_dispatch_tokens_per_rank, cap * min(k, local), rb, k)
        routing = self._routing(sw, topk_idx, "expert_major")
        rows = routing.recv_rows
        counts = routing.expert_counts
        zeros = torch.zeros(n, k, dtype=torch.float32)

        def packed(t: torch.Tensor) -> torch.Tensor:
            em = t.new_empty(rows, t.size(1))
            shim.ep_dispatch(sw.handle, routing.handle, t.contiguous(), zeros, em, torch.zeros(rows), None)
            out = t.new_zeros(local, cap, t.size(1))
            start = 0
            for e in range(local):
                c = int(counts[e])
                out[e, :c] = em[start : start + c]
                start += c
            return out

        if use_fp8:
            blocks = x.float().view(n, hidden // 128, 128)
            scale = (blocks.abs().amax(-1).clamp(min=1e-4) / _FP8_MAX).contiguous()
            q = (blocks / scale[..., None]).view(n, hidden).to(_FP8)
            recv_s = packed(scale)
            recv_s = recv_s.transpose(1, 2).contiguous().transpose(1, 2)  # column-major in the last two dims
            recv_x: Any = (packed(q), recv_s)
        else:
            recv_x = packed(x)
        if cumulative_local_expert_recv_stats is not None:
            cumulative_local_expert_recv_stats += counts.to(cumulative_local_expert_recv_stats.dtype)
        handle = _LowLatencyHandle(routing, sw, n, num_max_dispatch_tokens_per_rank, hidden, num_experts)
        return recv_x, counts.to(torch.int32), handle, EventOverlap(), (lambda: None)

    def low_latency_combine(
        self,
        x: torch.Tensor,
        topk_idx: torch.Tensor,
        topk_weights: torch.Tensor,
        handle: _LowLatencyHandle,
        use_logfmt: bool = False,
        zero_copy: bool = False,
        async_finish: bool = False,
        return_recv_hook: bool = False,
        out: torch.Tensor | None = None,
        combine_wait_recv_cost_stats: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, EventOverlap, Callable[[], None]]:
        """DeepEP's low-latency combine: each token's sum of its experts' outputs times its ``topk_weights``."""
        _cpu("low_latency_combine", x=x, topk_idx=topk_idx, topk_weights=topk_weights)
        if zero_copy:
            raise _unsupported("zero_copy", True, "get_next_low_latency_combine_buffer is not supported")
        if use_logfmt:
            raise _unsupported("use_logfmt", True, "combine sends the expert outputs' dtype")
        if combine_wait_recv_cost_stats is not None:
            raise _unsupported("combine_wait_recv_cost_stats", "a tensor", "no per-rank wait timing on the host path")
        if not isinstance(handle, _LowLatencyHandle):
            raise ValueError("xpushmem.ep.Buffer.low_latency_combine: handle must be low_latency_dispatch's")
        if topk_idx.shape != topk_weights.shape or topk_idx.size(0) != handle.num_tokens:
            raise ValueError(
                "xpushmem.ep.Buffer.low_latency_combine: topk_idx and topk_weights must be [num_tokens, num_topk] "
                f"of the dispatch ({handle.num_tokens} tokens), got {tuple(topk_idx.shape)} and "
                f"{tuple(topk_weights.shape)}"
            )
        sw, routing = handle.switch, handle.routing
        rows = routing.recv_rows
        # Each received pair's weight, from its source: one dispatch of the weights with a 1-byte payload.
        pair_weights = torch.zeros(rows)
        dummy = torch.zeros(handle.num_tokens, 1, dtype=torch.uint8)
        shim.ep_dispatch(sw.handle, routing.handle, dummy, topk_weights.float().contiguous(),
                         torch.empty(rows, 1, dtype=torch.uint8), pair_weights, None)
        em = x.new_empty(rows, handle.hidden)
        start = 0
        for e, c in enumerate(routing.expert_counts.tolist()):
            em[start : start + c] = x[e, :c]
            start += c
        em = (em.float() * pair_weights[:, None]).to(x.dtype)
        res = x.new_empty(handle.num_tokens, handle.hidden) if out is None else out
        shim.ep_combine(sw.handle, routing.handle, em.contiguous(), res)
        return res, EventOverlap(), (lambda: None)


def _cpu(call: str, **tensors: Any) -> None:
    """The Buffer runs on CPU tensors (the host path); an XPU (or other) tensor is refused naming it."""
    for name, t in tensors.items():
        if isinstance(t, tuple):
            t = t[0]
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            raise ValueError(
                f"xpushmem.ep.Buffer.{call}: {name} is on {t.device}; the DeepEP API runs on CPU tensors (the "
                "host path). XPU tensors run on the device path through xpushmem.torch.TokenSwitch"
            )


def _check_topk_idx(topk_idx: torch.Tensor, num_experts: int) -> None:
    if topk_idx.dtype != torch.int64 or topk_idx.dim() != 2:
        raise ValueError(
            f"xpushmem.ep.Buffer: topk_idx must be int64 [num_tokens, num_topk], got {topk_idx.dtype} "
            f"{tuple(topk_idx.shape)}"
        )
    bad = (topk_idx < -1) | (topk_idx >= num_experts)
    if bool(bad.any()):
        t, j = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"xpushmem.ep.Buffer: topk_idx: expert id {int(topk_idx[t, j])} at [{t}, {j}] is out of range "
            f"[-1, {num_experts})"
        )
