"""``xpushmem.ep.Buffer``: DeepEP's ``deep_ep.Buffer`` API on xpushmem's token switch: CPU tensors on the host path,
XPU tensors on the device path (kernels appended to the current stream, as ``xpushmem.torch.TokenSwitch``'s).

Normal mode: ``get_dispatch_layout``, ``dispatch`` (with or without a cached ``handle``) and ``combine`` (sum
without weights), as DeepEP's intranode path (flat layout: one received row per (token, destination rank), in
(source rank, token) order; ``recv_topk_idx`` holds local expert ids, ``-1`` elsewhere). Low-latency mode:
``low_latency_dispatch`` (expert-packed ``[num_local_experts, num_max_dispatch_tokens_per_rank * num_ranks, hidden]``,
optional FP8 casting with per-128-channel scales) and ``low_latency_combine`` (sum with the tokens' weights).

A call runs where its tensors are (all on one device, else an error naming the one elsewhere). On XPU tensors no
call synchronises the host, except where DeepEP does: a normal ``dispatch`` without a ``handle`` returns the received
counts as host values (the row count sizes ``recv_x``, the per-expert list is a Python list), so it reads them from
the routing's state once, after enqueuing its kernels (``_recv_counts``), and raises there any error the kernels
found. The low-latency pair, ``combine``, the cached ``dispatch`` and ``get_dispatch_layout`` never read the device
(the expert-packed buffers are gathered by torch ops from the counts on the device).

Events: on XPU (where torch has ``torch.xpu.Event``) ``async_finish=True`` returns an ``EventOverlap`` holding an
event recorded on the current stream after the call's kernels, ``current_stream_wait`` (and leaving its ``with``
block) makes the current stream wait for it, ``previous_event`` is waited for by the current stream before the
call's kernels, ``capture()`` records one; there is no communication stream (the kernels run on the current stream,
so ``allocate_on_comm_stream`` has nothing to do). On the host path every call returns with its data in place, so
the events are ``None`` and do nothing. SM counts and channel configs have no equivalent: ``config`` and
``set_num_sms`` are accepted and unused; ``return_recv_hook`` returns a hook that does nothing (the data is there, in
stream order on XPU). Arguments that would change results and are not supported raise an error that names them. The
receive buffers are the token switch's (symmetric heap): they are sized by the calls (agreed over the group, grown
by powers of two), not by ``num_nvl_bytes``/``num_rdma_bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist

from ..torch import shim
from ..torch.token_switch import _LAYOUTS, _default_device, _RoutingHandle

_FP8 = getattr(torch, "float8_e4m3fn", None)
_FP8_MAX = 448.0


def _record(device: torch.device) -> Any:
    """An event recorded on the current stream of ``device``'s backend (``torch.xpu``: ``Event``,
    ``current_stream``), or ``None``: on the host path (calls complete before they return) and where the backend
    has no events."""
    if device.type == "cpu":
        return None
    backend = getattr(torch, device.type, None)
    event_type, current_stream = getattr(backend, "Event", None), getattr(backend, "current_stream", None)
    if event_type is None or current_stream is None:
        return None
    event = event_type()
    event.record(current_stream(device))
    return event


class EventOverlap:
    """DeepEP's event wrapper: ``event`` is a ``torch.xpu.Event`` recorded on the current stream (device path), or
    ``None`` (host path: the call that made it has completed, so there is nothing to wait for)."""

    def __init__(self, event: Any = None, extra_tensors: Any = None) -> None:
        self.event = event
        self.extra_tensors = extra_tensors

    def current_stream_wait(self) -> None:
        """Make the current stream wait for the event (nothing to do without one)."""
        if self.event is not None:
            self.event.wait()

    def __enter__(self) -> EventOverlap:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.current_stream_wait()


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
    """The symmetric bytes a token switch allocates on a device heap, the larger kind (ops/src/ep/switch.rs:
    receive slots and headers, the kernels' combine rows and stage, counts, signals)."""
    slot = token_bytes + _pad8(4 * topk) + 8 * topk
    sent = max_dispatch * min(topk, world)
    return (max_recv * slot + 16 * world + sent * token_bytes + sent * slot + 8 + 8 * world * (2 * world + 1)
            + 24 * world)


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
    device: torch.device
    state_bytes: int  # one device routing's state (0 on the host path)


def _alloc_rows(sw: _Switch, routing: _RoutingHandle) -> int:
    """Rows of a dispatch output (and of combine's expert rows): the received rows on the host path; on the device
    path ``max_recv`` (the host does not know the received count without a synchronisation)."""
    return routing.recv_rows if routing.state is None else sw.max_recv


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
        """An event on the current XPU stream where torch has one, else a completed event (module docs)."""
        return EventOverlap(_record(_default_device()))

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
    def _switch(self, kind: str, device: torch.device, num_experts: int, max_dispatch: int, max_recv: int,
                token_bytes: int, topk: int) -> _Switch:
        """A switch of ``kind`` on ``device``'s heap covering the (agreed) request; a larger one (or one on another
        device) replaces it (collectively)."""
        sw = self._switches.get(kind)
        if (
            sw is not None
            and sw.device == device
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
            if sw.num_experts == num_experts and sw.device == device:  # grow, never shrink
                max_dispatch, max_recv = max(max_dispatch, sw.max_dispatch), max(max_recv, sw.max_recv)
                token_bytes, topk = max(token_bytes, sw.token_bytes), max(topk, sw.topk)
        h = shim.ep_create(self.group.group_name, num_experts, max_dispatch, max_recv, token_bytes, topk, str(device))
        state_bytes = 0 if device.type == "cpu" else int(shim.ep_state_bytes(h))
        sw = _Switch(h, num_experts, max_dispatch, max_recv, token_bytes, topk, device, state_bytes)
        self._switches[kind] = sw
        return sw

    def _routing(self, sw: _Switch, topk_idx: torch.Tensor, layout: str) -> _RoutingHandle:
        """A routing of ``sw``: host counts on the host path; on the device path the routing's kernel writes them
        into its state tensor in stream order (``expert_counts`` and ``rows`` are views of it)."""
        local = sw.num_experts // self.group_size
        idx = topk_idx.contiguous()
        if idx.device.type == "cpu":
            counts = torch.zeros(local, dtype=torch.int64)
            h, rows = shim.ep_create_routing(sw.handle, idx, _LAYOUTS[layout], counts)
            return _RoutingHandle(sw.handle, h, rows, counts)
        state = torch.zeros(sw.state_bytes, dtype=torch.uint8, device=idx.device)
        h, _ = shim.ep_create_routing(sw.handle, idx, _LAYOUTS[layout], None, state)
        return _RoutingHandle(sw.handle, h, None, None, state=state, num_local=local, topk_idx=idx)

    def _recv_counts(self, routing: _RoutingHandle) -> tuple[int, list[int]]:
        """(received rows, pairs per local expert) as host values. Device path: the one host read of the Buffer
        (DeepEP's normal dispatch reads these too): it waits for the stream, then raises the first error the
        queued kernels found (``shim.ops_queue_wait``) before the counts are trusted."""
        if routing.state is None:
            return routing.recv_rows, [int(c) for c in routing.expert_counts]
        info = torch.cat([routing.rows.view(1), routing.expert_counts]).tolist()
        shim.ops_queue_wait()
        return int(info[0]), [int(c) for c in info[1:]]

    def _agree_max(self, values: list[int]) -> list[int]:
        """Each value's maximum over the group: one ``all_reduce`` of host ints (a CPU tensor: the group needs a
        CPU backend, e.g. gloo, also when the tokens are on XPU)."""
        need = torch.tensor(values, dtype=torch.int64)
        dist.all_reduce(need, op=dist.ReduceOp.MAX, group=self.group)
        return [int(v) for v in need]

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
        [N, W], event), on ``topk_idx``'s device. Local: no communication. On the host path an expert id out of
        range is an error here; on XPU (no host read) such ids are counted nowhere, and the routing's kernel of the
        next dispatch reports them."""
        dev = _device_of("get_dispatch_layout", topk_idx=topk_idx)
        _wait(previous_event)
        _check_topk_idx(topk_idx, num_experts, dev)
        w = self.group_size
        if num_experts % w:
            raise ValueError(f"xpushmem.ep.Buffer: num_experts={num_experts} must be a multiple of the group size {w}")
        local = num_experts // w
        valid = (topk_idx >= 0) & (topk_idx < num_experts)
        bins = torch.where(valid, topk_idx, torch.full_like(topk_idx, num_experts)).flatten()
        per_expert = torch.zeros(num_experts + 1, dtype=torch.int64, device=dev)
        per_expert.scatter_add_(0, bins, torch.ones_like(bins))
        rank_of = torch.where(valid, topk_idx // local, torch.full_like(topk_idx, w))
        in_rank = torch.zeros(topk_idx.size(0), w + 1, dtype=torch.bool, device=dev)
        in_rank.scatter_(1, rank_of, True)
        in_rank = in_rank[:, :w].contiguous()
        return (
            in_rank.sum(0).to(torch.int32),
            None,
            per_expert[:num_experts].to(torch.int32),
            in_rank,
            _event(dev, async_finish),
        )

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
        handle, event); with ``handle`` (cached mode): (recv_x, None, None, None, None, event). On XPU, without a
        handle, the received counts are read on the host once, as DeepEP does (module docs); the layout tensors are
        then not compared with ``get_dispatch_layout``'s (that would be a host read too)."""
        dev = _device_of("dispatch", x=x, topk_idx=topk_idx, topk_weights=topk_weights)
        x, scales = x if isinstance(x, tuple) else (x, None)
        if num_tokens_per_rdma_rank is not None:
            raise _unsupported("num_tokens_per_rdma_rank", "a tensor", "one node only (pass None)")
        if num_worst_tokens:
            raise _unsupported("num_worst_tokens", num_worst_tokens, "outputs are sized by the received count")
        if expert_alignment < 1:
            raise ValueError(f"xpushmem.ep.Buffer.dispatch: expert_alignment must be positive, got {expert_alignment}")
        _wait(previous_event)
        if handle is not None:
            if topk_idx is not None or topk_weights is not None:
                raise ValueError("xpushmem.ep.Buffer.dispatch: with a handle, topk_idx and topk_weights must be None")
            if x.size(0) != handle.num_tokens:
                raise ValueError(
                    f"xpushmem.ep.Buffer.dispatch: x has {x.size(0)} tokens, the handle {handle.num_tokens}"
                )
            _same_device("dispatch", "x", dev, handle.switch.device)
            zeros = torch.zeros(handle.num_tokens, handle.num_topk, dtype=torch.float32, device=dev)
            rows = handle.num_recv_tokens
            recv_x = self._send(handle.switch, handle.routing, x, zeros, handle.num_topk)[0][:rows]
            recv_s = (
                self._send(handle.switch, handle.routing, scales, zeros, handle.num_topk)[0][:rows]
                if scales is not None
                else None
            )
            out_x = (recv_x, recv_s) if scales is not None else recv_x
            return out_x, None, None, None, None, _event(dev, async_finish)
        if topk_idx is None or topk_weights is None:
            raise ValueError("xpushmem.ep.Buffer.dispatch: topk_idx and topk_weights are required without a handle")
        if num_tokens_per_expert is None:
            raise ValueError("xpushmem.ep.Buffer.dispatch: num_tokens_per_expert is required without a handle")
        num_experts = num_tokens_per_expert.numel()
        if dev.type == "cpu":
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
            in_rank = mine[3]
        else:
            _check_topk_idx(topk_idx, num_experts, dev)
            for name, given in (("num_tokens_per_rank", num_tokens_per_rank), ("is_token_in_rank", is_token_in_rank)):
                if given is None:
                    raise ValueError(
                        f"xpushmem.ep.Buffer.dispatch: {name} is required without a handle (get_dispatch_layout's)"
                    )
            in_rank = is_token_in_rank
        n, k = topk_idx.shape
        rb = x.size(1) * x.element_size()
        if scales is not None:
            rb = max(rb, scales.size(1) * scales.element_size())
        rb = max(rb, 4 * k)  # combine also returns the f32 topk_weights rows
        # The maxima, agreed over the group (every rank then sizes its switch alike).
        need_n, need_rb, need_k = self._agree_max([n, rb, k])
        md = _pow2(max(1, need_n))
        sw = self._switch("normal", dev, num_experts, md, md * self.group_size, _pow2(need_rb), max(1, need_k))
        routing = self._routing(sw, topk_idx, "flat")
        recv_x, recv_w, recv_i = self._send(sw, routing, x, topk_weights, k)
        recv_s = self._send(sw, routing, scales, topk_weights, k)[0] if scales is not None else None
        rows, counts = self._recv_counts(routing)
        recv_x, recv_w, recv_i = recv_x[:rows], recv_w[:rows], recv_i[:rows]
        recv_s = recv_s[:rows] if recv_s is not None else None
        aligned = [(c + expert_alignment - 1) // expert_alignment * expert_alignment for c in counts]
        h = _Handle(routing, sw, n, k, rows, in_rank)
        out_x = (recv_x, recv_s) if scales is not None else recv_x
        return out_x, recv_i, recv_w, aligned, h, _event(dev, async_finish)

    def _send(
        self, sw: _Switch, routing: _RoutingHandle, x: torch.Tensor, weights: torch.Tensor, k: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One flat dispatch of ``x`` into new outputs of :func:`_alloc_rows` rows (on the device path, rows past
        the received count hold zeros)."""
        rows = _alloc_rows(sw, routing)
        out = x.new_zeros(rows, x.size(1)) if routing.state is not None else x.new_empty(rows, x.size(1))
        ow = torch.zeros(rows, k, dtype=torch.float32, device=x.device)
        oi = torch.zeros(rows, k, dtype=torch.int64, device=x.device)
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
        dev = _device_of("combine", x=x, topk_weights=topk_weights)
        if bias is not None:
            raise _unsupported("bias", "a tensor", "add it to the combined tokens")
        if not isinstance(handle, _Handle):
            raise ValueError("xpushmem.ep.Buffer.combine: handle must be the one dispatch returned")
        _same_device("combine", "x", dev, handle.switch.device)
        if x.size(0) < handle.num_recv_tokens:
            raise ValueError(
                f"xpushmem.ep.Buffer.combine: x has {x.size(0)} rows, the dispatch received {handle.num_recv_tokens}"
            )
        _wait(previous_event)
        sw, routing = handle.switch, handle.routing
        out = x.new_empty(handle.num_tokens, x.size(1))
        shim.ep_combine(sw.handle, routing.handle, _rows_of(sw, routing, x, handle.num_recv_tokens), out)
        w = None
        if topk_weights is not None:
            w = torch.empty(handle.num_tokens, topk_weights.size(1), dtype=torch.float32, device=dev)
            tw = _rows_of(sw, routing, topk_weights.float(), handle.num_recv_tokens)
            shim.ep_combine(sw.handle, routing.handle, tw, w)
        return out, w, _event(dev, async_finish)

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
        hidden / 128], column-major in the last two dims)), recv_count int32 [L], handle, event, hook). No host
        synchronisation on XPU: the expert-packed buffers are gathered from the expert-major rows by torch ops
        with the counts on the device (:func:`_pack_experts`, the same code on CPU)."""
        dev = _device_of(
            "low_latency_dispatch", x=x, topk_idx=topk_idx,
            cumulative_local_expert_recv_stats=cumulative_local_expert_recv_stats,
        )
        if round_scale or use_ue8m0:
            raise _unsupported("round_scale/use_ue8m0", (round_scale, use_ue8m0), "plain float32 scales only")
        if dispatch_wait_recv_cost_stats is not None:
            raise _unsupported("dispatch_wait_recv_cost_stats", "a tensor", "no per-rank wait timing")
        _check_topk_idx(topk_idx, num_experts, dev)
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
        sw = self._switch("low_latency", dev, num_experts, num_max_dispatch_tokens_per_rank, cap * min(k, local), rb,
                          k)
        routing = self._routing(sw, topk_idx, "expert_major")
        rows = _alloc_rows(sw, routing)
        counts = routing.expert_counts
        zeros = torch.zeros(n, k, dtype=torch.float32, device=dev)

        def packed(t: torch.Tensor) -> torch.Tensor:
            em = t.new_empty(rows, t.size(1))
            shim.ep_dispatch(sw.handle, routing.handle, t.contiguous(), zeros, em,
                             torch.zeros(rows, device=dev), None)
            return _pack_experts(em, counts, cap)

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
        return recv_x, counts.to(torch.int32), handle, _event(dev, async_finish), (lambda: None)

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
        """DeepEP's low-latency combine: each token's sum of its experts' outputs times its ``topk_weights``. No
        host synchronisation on XPU (:func:`_unpack_experts`)."""
        dev = _device_of("low_latency_combine", x=x, topk_idx=topk_idx, topk_weights=topk_weights, out=out)
        if zero_copy:
            raise _unsupported("zero_copy", True, "get_next_low_latency_combine_buffer is not supported")
        if use_logfmt:
            raise _unsupported("use_logfmt", True, "combine sends the expert outputs' dtype")
        if combine_wait_recv_cost_stats is not None:
            raise _unsupported("combine_wait_recv_cost_stats", "a tensor", "no per-rank wait timing")
        if not isinstance(handle, _LowLatencyHandle):
            raise ValueError("xpushmem.ep.Buffer.low_latency_combine: handle must be low_latency_dispatch's")
        _same_device("low_latency_combine", "x", dev, handle.switch.device)
        if topk_idx.shape != topk_weights.shape or topk_idx.size(0) != handle.num_tokens:
            raise ValueError(
                "xpushmem.ep.Buffer.low_latency_combine: topk_idx and topk_weights must be [num_tokens, num_topk] "
                f"of the dispatch ({handle.num_tokens} tokens), got {tuple(topk_idx.shape)} and "
                f"{tuple(topk_weights.shape)}"
            )
        sw, routing = handle.switch, handle.routing
        rows = _alloc_rows(sw, routing)
        # Each received pair's weight, from its source: one dispatch of the weights with a 1-byte payload.
        pair_weights = torch.zeros(rows, device=dev)
        dummy = torch.zeros(handle.num_tokens, 1, dtype=torch.uint8, device=dev)
        shim.ep_dispatch(sw.handle, routing.handle, dummy, topk_weights.float().contiguous(),
                         torch.empty(rows, 1, dtype=torch.uint8, device=dev), pair_weights, None)
        em = _unpack_experts(x, routing.expert_counts, rows)
        em = (em.float() * pair_weights[:, None]).to(x.dtype)
        res = x.new_empty(handle.num_tokens, handle.hidden) if out is None else out
        shim.ep_combine(sw.handle, routing.handle, em.contiguous(), res)
        return res, _event(dev, async_finish), (lambda: None)


def _pack_experts(em: torch.Tensor, counts: torch.Tensor, cap: int) -> torch.Tensor:
    """``[L, cap, C]`` from expert-major rows ``em`` ``[R, C]`` (expert ``e``'s ``counts[e]`` rows after the
    earlier experts'): ``[e, j]`` is expert ``e``'s row ``j``, zeros past its count. A gather by torch ops on the
    rows' bytes (any dtype, FP8 included), with ``counts`` where ``em`` is: no host read."""
    num_local, c = counts.numel(), em.size(1)
    if em.size(0) == 0:
        return em.new_zeros(num_local, cap, c)
    raw = em.contiguous().view(torch.uint8)
    starts = torch.cumsum(counts, 0) - counts
    j = torch.arange(cap, device=em.device)
    src = (starts[:, None] + j[None, :]).clamp(max=em.size(0) - 1)
    live = (j[None, :] < counts[:, None])[..., None]
    return torch.where(live, raw[src], torch.zeros_like(raw[:1])).view(em.dtype)


def _unpack_experts(x: torch.Tensor, counts: torch.Tensor, rows: int) -> torch.Tensor:
    """:func:`_pack_experts`'s inverse: ``rows`` expert-major rows from ``x`` ``[L, cap, H]`` (row ``r`` is
    expert ``e``'s ``r - start[e]``-th; zeros past the last expert's rows). Torch ops, no host read."""
    num_local, cap = x.size(0), x.size(1)
    ends = torch.cumsum(counts, 0)
    r = torch.arange(rows, device=x.device)
    e = (r[:, None] >= ends[None, :]).sum(1).clamp(max=num_local - 1)
    j = (r - (ends - counts)[e]).clamp(min=0, max=cap - 1)
    live = (r < ends[-1])[:, None]
    return torch.where(live, x[e, j], torch.zeros_like(x[0, :1]))


def _rows_of(sw: _Switch, routing: _RoutingHandle, x: torch.Tensor, recv: int) -> torch.Tensor:
    """Combine's expert rows: ``x`` (contiguous) on the host path; on the device path at least ``max_recv`` rows
    (the kernel's input), the received ``recv`` rows of ``x`` then zeros when ``x`` has fewer (a copy on the
    stream)."""
    rows = _alloc_rows(sw, routing)
    if x.size(0) >= rows:
        return x.contiguous()
    full = x.new_zeros(rows, *x.shape[1:])
    full[:recv] = x[:recv]
    return full


def _device_of(call: str, **tensors: Any) -> torch.device:
    """The call's device: its tensors' (``None`` skipped, tuples' tensors each), all on one device (CPU: the host
    path; XPU: the device path); a tensor elsewhere is refused naming it and the first one."""
    dev: torch.device | None = None
    first = ""
    for name, arg in tensors.items():
        for t in arg if isinstance(arg, tuple) else (arg,):
            if not isinstance(t, torch.Tensor):
                continue
            if dev is None:
                dev, first = t.device, name
            elif t.device != dev:
                raise ValueError(
                    f"xpushmem.ep.Buffer.{call}: {name} is on {t.device}, {first} on {dev}; a call's tensors must be "
                    "on one device (CPU: the host path, XPU: kernels on the current stream)"
                )
    return dev if dev is not None else torch.device("cpu")


def _same_device(call: str, name: str, dev: torch.device, switch_device: torch.device) -> None:
    """A handle's buffers are on the device of the dispatch that made it; ``name`` (on ``dev``) must be there."""
    if dev != switch_device:
        raise ValueError(
            f"xpushmem.ep.Buffer.{call}: {name} is on {dev}, the handle's dispatch ran on {switch_device}"
        )


def _wait(previous_event: EventOverlap | None) -> None:
    """DeepEP's ``previous_event``: the call's kernels run after it (the current stream waits for it)."""
    if previous_event is not None:
        previous_event.current_stream_wait()


def _event(device: torch.device, async_finish: bool) -> EventOverlap:
    """The call's ``EventOverlap``: with ``async_finish`` an event recorded on the current stream after the call's
    kernels (device path), else (and on the host path) none."""
    return EventOverlap(_record(device) if async_finish else None)


def _check_topk_idx(topk_idx: torch.Tensor, num_experts: int, device: torch.device) -> None:
    """``topk_idx``'s dtype and shape; on the host path also its values (on the device path the routing's kernel
    checks them: reading them here would synchronise the host)."""
    if topk_idx.dtype != torch.int64 or topk_idx.dim() != 2:
        raise ValueError(
            f"xpushmem.ep.Buffer: topk_idx must be int64 [num_tokens, num_topk], got {topk_idx.dtype} "
            f"{tuple(topk_idx.shape)}"
        )
    if device.type != "cpu":
        return
    bad = (topk_idx < -1) | (topk_idx >= num_experts)
    if bool(bad.any()):
        t, j = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"xpushmem.ep.Buffer: topk_idx: expert id {int(topk_idx[t, j])} at [{t}, {j}] is out of range "
            f"[-1, {num_experts})"
        )
