"""``xpushmem.torch.TokenSwitch``: PyTorch's expert-parallel ``torch.distributed._token_switch.TokenSwitch`` on
xpushmem (issue #29), built like upstream's ``TokenSwitchNCCL``::

    from xpushmem.torch import TokenSwitch
    ts = TokenSwitch(dist.group.WORLD, num_experts, max_dispatch_tokens_per_rank, max_recv_tokens_per_rank,
                     max_token_bytes)
    routing = ts.create_routing(topk_idx, layout="expert_major")      # topk_idx: int64 [N, K], -1 = no expert
    x, w, _ = ts.dispatch(routing, tokens, topk_weights, max_recv_tokens)
    y = ts.combine(routing, experts(x, w))                             # [N, H], autograd through both

CPU tensors run on the host path of ``ops/src/ep`` (receive buffers on the symmetric heap, allocated once here and
bounded by the maxima; one put with a signal per source rank and step). XPU tensors run on the device path: each
call appends its kernel to the current stream's Level Zero list and returns without a host synchronisation; a
routing keeps its counts in a uint8 XPU state tensor (``shim.ep_state_bytes`` bytes) that it owns, and errors
found on the device are raised at the next call, or by ``xpushmem.torch.shim.ops_queue_wait()`` after
synchronising the stream. Semantics (upstream's): ``dispatch`` returns
``(out_tokens, out_topk_weights, out_topk_idx)``; ``"flat"``: one row per (token, destination rank) in (source rank,
token) order, ``out_topk_weights``/``out_topk_idx`` ``[rows, K]``: the token's local expert ids on this rank,
ascending and packed at the front, with their weights (``-1`` and weight 0 after them; upstream's contract);
``"expert_major"``: one row per (token, local expert), each expert's rows contiguous, ``out_topk_weights``
``[rows]``, ``out_topk_idx`` ``None``; :meth:`TokenSwitch.expert_offsets` gives
``grouped_mm``'s ``offs=``. ``combine`` sums, for each token, the rows of its copies (weights are not applied: the
experts apply the dispatched weights), so it is ``dispatch``'s adjoint and each is the other's backward. See
``docs/EP.md``.
"""

from __future__ import annotations

from typing import Any

import torch

try:
    from torch.distributed._token_switch import Routing
    from torch.distributed._token_switch import TokenSwitch as _UpstreamTokenSwitch
except ImportError:  # torch < 2.15: no token switch to subclass
    _UpstreamTokenSwitch = None  # type: ignore[assignment,misc]
    Routing = None  # type: ignore[assignment,misc]

__all__ = ["TokenSwitch", "available"]

_LAYOUTS = {"flat": 0, "expert_major": 1}


def available() -> bool:
    """Whether this torch has ``torch.distributed._token_switch.TokenSwitch`` (torch >= 2.15)."""
    return _UpstreamTokenSwitch is not None


def _shim() -> Any:
    from . import shim

    return shim


class _RoutingHandle:
    """The C routing handle (``Routing.handle``) with what Python needs of it; freed when collected.

    Host path (CPU): ``recv_rows`` and ``expert_counts`` (int64, one per local expert) are known at creation.
    Device path: they live in ``state`` (uint8, int64 ``[2 + num_local, ...]`` from byte 0: received rows, received
    slots, pairs per local expert), written by the routing's kernel in stream order; ``topk_idx`` is kept because the
    kernels read it while the routing lives."""

    def __init__(
        self,
        switch: int,
        handle: int,
        recv_rows: int | None,
        expert_counts: torch.Tensor | None,
        *,
        state: torch.Tensor | None = None,
        num_local: int = 0,
        topk_idx: torch.Tensor | None = None,
    ) -> None:
        self.switch = switch
        self.handle = handle
        self.state = state
        self.topk_idx = topk_idx
        if state is not None:
            info = state[: 8 * (2 + num_local)].view(torch.int64)
            self._rows: int | torch.Tensor = info[0]
            self.expert_counts = info[2 : 2 + num_local]
        else:
            assert recv_rows is not None and expert_counts is not None
            self._rows = recv_rows
            self.expert_counts = expert_counts

    @property
    def rows(self) -> int | torch.Tensor:
        """The received rows without a host synchronisation: an int (host path) or a 0-dim int64 tensor on the
        device (device path), for masks computed in stream order."""
        return self._rows

    @property
    def recv_rows(self) -> int:
        """The received rows as an int (on the device path a host read of the state: it waits for the routing)."""
        return int(self._rows)

    def __del__(self) -> None:
        try:
            _shim().ep_routing_destroy(self.handle)
        except Exception:  # noqa: BLE001  (interpreter teardown, runtime finalized: nothing left to free)
            pass


def _default_device() -> torch.device:
    """The switch's device when none is given: the current XPU when torch has one, else the CPU."""
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return torch.device("xpu", xpu.current_device())
    return torch.device("cpu")


def _pack_local(idx: torch.Tensor, weights: torch.Tensor, num_local: int, rows: int | torch.Tensor) -> None:
    """Upstream's flat-layout convention, in place on the first ``rows`` rows (an int, or a 0-dim tensor on
    ``idx``'s device: no host synchronisation): each row's local expert ids ascending and packed at the front (ties
    in top-k column order), ``-1`` and weight 0 after them; the other rows are left as they are. The switch writes
    the ids at their top-k columns (DeepEP's convention, which ``xpushmem.ep.Buffer`` keeps)."""
    live = (torch.arange(idx.size(0), device=idx.device) < rows)[:, None]
    key = torch.where(idx >= 0, idx, torch.full_like(idx, num_local))
    key, perm = key.sort(dim=1, stable=True)
    routed = key < num_local
    packed_w = torch.where(routed, weights.gather(1, perm), torch.zeros_like(weights))
    packed_i = torch.where(routed, key, torch.full_like(key, -1))
    weights.copy_(torch.where(live, packed_w, weights))
    idx.copy_(torch.where(live, packed_i, idx))


if _UpstreamTokenSwitch is not None:

    class TokenSwitch(_UpstreamTokenSwitch):
        """Expert-parallel dispatch/combine over xpushmem (module docs). Collective over ``process_group``:
        every rank of the world constructs it at the same point with the same arguments.

        ``max_topk`` (beyond upstream): the most experts per token (``topk_idx.size(1)``) the receive slots hold.
        ``device`` (beyond upstream): where the buffers and the tensors are, ``cpu`` (host path) or ``xpu[:i]``
        (device path); default the current XPU when torch has one, else the CPU.
        ``zero_copy`` (beyond upstream; host path): a flat ``dispatch`` without ``out=`` under ``torch.no_grad()``
        or ``torch.inference_mode()`` returns as ``out_tokens`` a view of the switch's receive rows, where the
        rows arrived, instead of a copy; a ``combine`` of that view (the experts computed in place) reads the rows
        where they are. The view is the switch's memory: it holds the rows until the switch's next ``dispatch``
        or ``combine`` (a second dispatch, e.g. of FP8 scales, overwrites it), rows past
        :meth:`num_recv_rows` hold whatever was there (not zeros), it must not be written once this rank called
        ``combine``, and it must not outlive :meth:`close`. With autograd (grad enabled) the outputs are always
        copies: combine's backward dispatches into the receive rows while the forward's rows are still saved.
        """

        def __init__(
            self,
            process_group: Any,
            num_experts: int,
            max_dispatch_tokens_per_rank: int,
            max_recv_tokens_per_rank: int,
            max_token_bytes: int,
            *,
            max_topk: int = 8,
            device: torch.device | str | None = None,
            zero_copy: bool = False,
        ) -> None:
            world = process_group.size()
            if num_experts <= 0 or num_experts % world:
                raise ValueError(
                    f"num_experts must be a positive multiple of the group size ({world}); got {num_experts}"
                )
            self._num_local_experts = num_experts // world
            self._max_recv_tokens_per_rank = max_recv_tokens_per_rank
            self._device = torch.device(device) if device is not None else _default_device()
            self._handle: int | None = _shim().ep_create(
                process_group.group_name,
                num_experts,
                max_dispatch_tokens_per_rank,
                max_recv_tokens_per_rank,
                max_token_bytes,
                max_topk,
                str(self._device),
            )
            self._zero_copy = bool(zero_copy) and self._device.type == "cpu"
            self._recv_area: torch.Tensor | None = None  # the receive rows (uint8), fetched on first use
            self._views_now = False  # set by dispatch for the call's _alloc_dispatch_outputs
            # The device path's per-routing state (bytes of one routing's uint8 state tensor).
            self._state_bytes = 0 if self._device.type == "cpu" else int(_shim().ep_state_bytes(self._handle))

        def close(self) -> None:
            """Free the receive buffers (collective over the world, like the construction)."""
            self._recv_area = None
            if self._handle is not None:
                _shim().ep_destroy(self._handle)
                self._handle = None

        def _live(self) -> int:
            if self._handle is None:
                raise RuntimeError("TokenSwitch: the switch was closed")
            return self._handle

        @property
        def device(self) -> torch.device:
            """Where the switch's buffers are and its tensors must be: ``cpu`` (host path) or an XPU (device
            path); the constructor's ``device`` (default: the current XPU when torch has one, else the CPU)."""
            return self._device

        def _on_device(self, t: torch.Tensor, arg: str) -> torch.Tensor:
            if t.device.type != self._device.type:
                raise ValueError(
                    f"TokenSwitch: {arg} is on {t.device}, the switch on {self._device} (its device argument)"
                )
            return t

        def create_routing(
            self,
            topk_idx: torch.Tensor,
            per_expert_token_counts: torch.Tensor | None = None,
            *,
            layout: str,
        ) -> Routing:
            """Routing for ``topk_idx`` (int64 ``[N, K]``, ``-1`` = no expert); collective over the group.
            ``per_expert_token_counts`` (optional, 1-D, at least the local experts): receives each local expert's
            received rows."""
            if layout not in _LAYOUTS:
                raise ValueError(f"layout must be one of {list(_LAYOUTS)}; got {layout!r}")
            if per_expert_token_counts is not None and (
                per_expert_token_counts.dim() != 1 or per_expert_token_counts.numel() < self._num_local_experts
            ):
                raise ValueError(
                    "per_expert_token_counts must be 1-D with at least the local experts "
                    f"({self._num_local_experts}); got shape {tuple(per_expert_token_counts.shape)}"
                )
            sw = self._live()
            idx = self._on_device(topk_idx, "topk_idx").contiguous()
            if idx.device.type == "cpu":
                counts = torch.zeros(self._num_local_experts, dtype=torch.int64)
                handle, rows = _shim().ep_create_routing(sw, idx, _LAYOUTS[layout], counts)
                rh = _RoutingHandle(sw, handle, rows, counts)
            else:
                # Device path: the routing's kernel on the current stream fills its state; nothing waits for it.
                state = torch.zeros(self._state_bytes, dtype=torch.uint8, device=idx.device)
                handle, _ = _shim().ep_create_routing(sw, idx, _LAYOUTS[layout], None, state)
                rh = _RoutingHandle(
                    sw, handle, None, None, state=state, num_local=self._num_local_experts, topk_idx=idx
                )
            if per_expert_token_counts is not None:
                per_expert_token_counts[: self._num_local_experts].copy_(rh.expert_counts)
            return Routing(handle=rh, topk_idx=topk_idx, layout=layout)

        @property
        def max_recv_tokens_per_rank(self) -> int:
            """The most rows one rank receives per dispatch (the constructor's ``max_recv_tokens_per_rank``)."""
            return self._max_recv_tokens_per_rank

        @staticmethod
        def num_recv_rows(routing: Routing) -> int:
            """Rows of this rank's dispatch output that hold tokens (the rest of ``out_tokens`` is untouched). On
            the device path this reads the routing's state: a host synchronisation (the rows as a 0-dim device
            tensor, without one: ``routing.handle.rows``)."""
            return routing.handle.recv_rows

        @staticmethod
        def expert_offsets(routing: Routing) -> torch.Tensor:
            """The expert-major layout's expert ends, int32 (``torch.nn.functional.grouped_mm``'s ``offs=``), on
            the routing's device (computed in stream order on the device path)."""
            return torch.cumsum(routing.handle.expert_counts, 0).to(torch.int32)

        def dispatch(
            self,
            routing: Routing,
            tokens: torch.Tensor,
            topk_weights: torch.Tensor,
            max_recv_tokens: int | None = None,
            *,
            out: tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None] | None = None,
        ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
            """Upstream's ``dispatch``; with ``zero_copy`` (constructor), a flat dispatch without ``out=`` and
            without autograd returns a view of the receive rows as ``out_tokens`` (the constructor's docs)."""
            self._views_now = self._zero_copy and out is None and not torch.is_grad_enabled()
            try:
                return super().dispatch(routing, tokens, topk_weights, max_recv_tokens, out=out)
            finally:
                self._views_now = False

        def _recv_view(self, dtype: torch.dtype, rows: int, h: int) -> torch.Tensor | None:
            """``[rows, h]`` of ``dtype`` over the receive rows from their start, or ``None`` when they do not
            hold that many."""
            if self._recv_area is None:
                self._recv_area = _shim().ep_recv_rows(self._live())
            nbytes = rows * h * torch.empty((), dtype=dtype).element_size()
            if nbytes > self._recv_area.numel():
                return None
            return self._recv_area[:nbytes].view(dtype).view(rows, h)

        def _alloc_dispatch_outputs(
            self,
            routing: Routing,
            tokens: torch.Tensor,
            topk_weights: torch.Tensor,
            max_recv_tokens: int,
            H: int,  # noqa: N803 (upstream's name)
            K: int,  # noqa: N803
        ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
            if routing.layout == "expert_major":
                return (
                    tokens.new_zeros(max_recv_tokens, H),
                    topk_weights.new_zeros(max_recv_tokens),
                    None,
                )
            view = self._recv_view(tokens.dtype, max_recv_tokens, H) if self._views_now else None
            return (
                view if view is not None else tokens.new_zeros(max_recv_tokens, H),
                topk_weights.new_zeros(max_recv_tokens, K),
                tokens.new_zeros(max_recv_tokens, K, dtype=torch.int64),
            )

        def _dispatch(
            self,
            routing: Routing,
            tokens: torch.Tensor,
            topk_weights: torch.Tensor,
            out_tokens: torch.Tensor,
            out_topk_weights: torch.Tensor | None,
            out_topk_idx: torch.Tensor | None,
        ) -> None:
            if out_topk_weights is None:
                raise ValueError("out_topk_weights: the token switch always writes the weights; pass a tensor")
            _shim().ep_dispatch(
                self._live(),
                routing.handle.handle,
                self._on_device(tokens, "tokens").contiguous(),
                topk_weights.to(torch.float32).contiguous(),
                out_tokens,
                out_topk_weights,
                out_topk_idx,
            )
            if out_topk_idx is not None:
                _pack_local(out_topk_idx, out_topk_weights, self._num_local_experts, routing.handle.rows)

        def _combine(self, routing: Routing, expert_tokens: torch.Tensor, out_tokens: torch.Tensor) -> None:
            _shim().ep_combine(
                self._live(),
                routing.handle.handle,
                self._on_device(expert_tokens, "expert_tokens").contiguous(),
                out_tokens,
            )

else:  # pragma: no cover  (torch < 2.15)

    class TokenSwitch:  # type: ignore[no-redef]
        """Placeholder: this torch has no ``torch.distributed._token_switch`` (torch >= 2.15 needed)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError("xpushmem.torch.TokenSwitch needs torch >= 2.15 (torch.distributed._token_switch)")
