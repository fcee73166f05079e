"""``xpushmem.ep.Buffer`` (DeepEP's ``deep_ep.Buffer`` API) against a pure-torch reference every rank computes from
every rank's seeded inputs: ``get_dispatch_layout``; normal ``dispatch`` (received rows in (source rank, token)
order, local expert ids, weights, the aligned per-expert counts), the cached dispatch with its ``handle``, FP8
tuples, ``combine`` (sum without weights, and the reduced ``topk_weights``); ``low_latency_dispatch`` (expert-packed
buffers and counts, bf16 and FP8 with per-128-channel scales) and ``low_latency_combine`` (sum with weights); the
arguments it refuses, by name.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from conftest import world_sizes

from _harness import RankContext, RankPool

L = 2
N_MAX = 10


@pytest.fixture(params=world_sizes(), ids=lambda w: f"W{w}")
def pool(request: pytest.FixtureRequest, pools) -> RankPool:  # noqa: ANN001
    return pools.get(request.param)


def _inputs(world: int, rank: int, k: int, hidden: int, case: int) -> dict:
    g = torch.Generator().manual_seed(7000 + 100 * case + 10 * k + rank)
    e = L * world
    n = int(torch.randint(1, N_MAX + 1, (1,), generator=g))
    probs = 1.0 / (torch.arange(e, dtype=torch.float64) + 1) ** (case % 2 * 2)
    idx = torch.full((n, k), -1, dtype=torch.int64)
    for t in range(n):
        c = torch.multinomial(probs, min(k, e), replacement=False, generator=g)
        idx[t, : c.numel()] = c
    idx[torch.rand(n, k, generator=g) < 0.2] = -1
    return {
        "n": n,
        "idx": idx,
        "w": torch.rand(n, k, generator=g),
        "x": torch.randn(n, hidden, generator=g).to(torch.bfloat16),
    }


def _scale(e: torch.Tensor) -> torch.Tensor:
    return (1 + e % 3).to(torch.float32)


def ep_buffer_normal(ctx: RankContext) -> None:
    from xpushmem.ep import Buffer

    world, me = ctx.world_size, ctx.rank
    buf = Buffer(dist.group.WORLD, int(1e8))
    for case, (k, hidden) in enumerate([(8, 1), (1, 8), (3, 16), (8, 256)]):  # (8, 1) first: a fresh switch
        allin = [_inputs(world, r, k, hidden, case) for r in range(world)]
        mine = allin[me]
        e_total = L * world
        ntr, nrdma, nte, in_rank, ev = buf.get_dispatch_layout(mine["idx"], e_total)
        ev.current_stream_wait()
        exp_in_rank = torch.zeros(mine["n"], world, dtype=torch.bool)
        for t in range(mine["n"]):
            for e in mine["idx"][t].tolist():
                if e >= 0:
                    exp_in_rank[t, e // L] = True
        assert nrdma is None and torch.equal(in_rank, exp_in_rank)
        assert torch.equal(ntr, exp_in_rank.sum(0).to(torch.int32))
        exp_nte = torch.tensor([int((mine["idx"] == e).sum()) for e in range(e_total)], dtype=torch.int32)
        assert torch.equal(nte, exp_nte)

        recv_x, recv_i, recv_w, per_expert, handle, _ = buf.dispatch(
            mine["x"], num_tokens_per_rank=ntr, is_token_in_rank=in_rank, num_tokens_per_expert=nte,
            topk_idx=mine["idx"], topk_weights=mine["w"], expert_alignment=4,
        )
        rows = [(s, t) for s in range(world) for t in range(allin[s]["n"])
                if any(e >= 0 and e // L == me for e in allin[s]["idx"][t].tolist())]
        assert recv_x.shape == (len(rows), hidden), (recv_x.shape, len(rows))
        for r, (s, t) in enumerate(rows):
            src = allin[s]
            assert torch.equal(recv_x[r], src["x"][t]), f"row {r}"
            local = (src["idx"][t] >= 0) & (src["idx"][t] // L == me)
            assert torch.equal(recv_i[r], torch.where(local, src["idx"][t] - me * L, -1)), f"idx {r}"
            assert torch.equal(recv_w[r], torch.where(local, src["w"][t], 0.0)), f"weights {r}"
        counts = [sum(int((a["idx"] == me * L + e).sum()) for a in allin) for e in range(L)]
        assert per_expert == [(c + 3) // 4 * 4 for c in counts]

        # Cached mode: the same layout, another payload (FP8 values with their scales as a tuple).
        fp8 = mine["x"].float().to(torch.float8_e4m3fn)
        sc = torch.arange(mine["n"] * 2, dtype=torch.float32).view(mine["n"], 2) + 100 * me
        (rq, rs), none_i, none_w, none_list, none_h, _ = buf.dispatch((fp8, sc), handle=handle)
        assert none_i is None and none_w is None and none_list is None and none_h is None
        for r, (s, t) in enumerate(rows):
            src_fp8 = allin[s]["x"].float().to(torch.float8_e4m3fn)
            assert torch.equal(rq[r].view(torch.uint8), src_fp8[t].view(torch.uint8))
            assert torch.equal(rs[r], torch.arange(2, dtype=torch.float32) + 2 * t + 100 * s)

        # Experts: each received row times the sum of its local weights x scales; combine sums without weights.
        coef = torch.where(recv_i >= 0, recv_w * _scale(recv_i.clamp(min=0) + me * L), 0.0).sum(1)
        y = (recv_x.float() * coef[:, None]).to(torch.bfloat16)
        combined, cw, _ = buf.combine(y, handle, topk_weights=recv_w)
        e = mine["idx"]
        c = torch.where(e >= 0, mine["w"] * _scale(e.clamp(min=0)), 0.0).sum(1)
        torch.testing.assert_close(combined.float(), mine["x"].float() * c[:, None], rtol=3e-2, atol=5e-2)
        torch.testing.assert_close(cw, torch.where(e >= 0, mine["w"], 0.0), rtol=1e-6, atol=1e-6)

    # Refused arguments name themselves.
    idx = torch.zeros(1, 1, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"expert id 99 at \[0, 0\]"):
        buf.get_dispatch_layout(torch.tensor([[99]]), L * world)
    ntr, _, nte, in_rank, _ = buf.get_dispatch_layout(idx, L * world)
    with pytest.raises(ValueError, match="num_tokens_per_rank"):
        buf.dispatch(torch.zeros(1, 8), num_tokens_per_rank=ntr + 1, is_token_in_rank=in_rank,
                     num_tokens_per_expert=nte, topk_idx=idx, topk_weights=torch.ones(1, 1))
    with pytest.raises(ValueError, match="num_worst_tokens"):
        buf.dispatch(torch.zeros(1, 8), num_worst_tokens=4)
    buf.destroy()


def ep_buffer_low_latency(ctx: RankContext) -> None:
    from xpushmem.ep import Buffer

    world, me = ctx.world_size, ctx.rank
    buf = Buffer(dist.group.WORLD, 0, int(1e8), low_latency_mode=True, num_qps_per_rank=L)
    assert Buffer.get_low_latency_rdma_size_hint(N_MAX, 256, world, L * world) > 0
    for case, (k, use_fp8) in enumerate([(1, False), (4, True), (8, False)]):
        hidden = 256
        allin = [_inputs(world, r, k, hidden, case) for r in range(world)]
        mine = allin[me]
        stats = torch.zeros(L, dtype=torch.int32)
        recv, count, handle, ev, hook = buf.low_latency_dispatch(
            mine["x"], mine["idx"], N_MAX, L * world, cumulative_local_expert_recv_stats=stats, use_fp8=use_fp8,
            return_recv_hook=True,
        )
        hook()
        cap = N_MAX * world
        for e in range(L):
            rows = [(s, t) for s in range(world) for t in range(allin[s]["n"])
                    for j in range(k) if int(allin[s]["idx"][t, j]) == me * L + e]
            assert int(count[e]) == len(rows) == int(stats[e])
            for r, (s, t) in enumerate(rows):
                want = allin[s]["x"][t].float()
                if use_fp8:
                    q, sc = recv
                    assert q.shape == (L, cap, hidden) and sc.shape == (L, cap, hidden // 128)
                    got = (q[e, r].float().view(-1, 128) * sc[e, r][:, None]).view(-1)
                    torch.testing.assert_close(got, want, rtol=7e-2, atol=1e-2)
                else:
                    assert recv.shape == (L, cap, hidden)
                    assert torch.equal(recv[e, r], allin[s]["x"][t])
        # Experts scale by 1 + e % 3; combine weights by topk_weights.
        xs = recv[0].float() * recv[1].repeat_interleave(128, dim=2) if use_fp8 else recv.float()
        y = (xs * _scale(torch.arange(L) + me * L)[:, None, None]).to(torch.bfloat16)
        out = torch.empty(mine["n"], hidden, dtype=torch.bfloat16)
        combined, _, _ = buf.low_latency_combine(y, mine["idx"], mine["w"], handle, out=out)
        assert combined is out
        e = mine["idx"]
        c = torch.where(e >= 0, mine["w"] * _scale(e.clamp(min=0)), 0.0).sum(1)
        tol = {"rtol": 1e-1, "atol": 1e-1} if use_fp8 else {"rtol": 3e-2, "atol": 5e-2}
        torch.testing.assert_close(combined.float(), mine["x"].float() * c[:, None], **tol)
        with pytest.raises(ValueError, match="zero_copy"):
            buf.low_latency_combine(y, mine["idx"], mine["w"], handle, zero_copy=True)
    buf.destroy()


def test_ep_buffer_normal(pool: RankPool) -> None:
    pool.run(ep_buffer_normal)


def test_ep_buffer_low_latency(pool: RankPool) -> None:
    pool.run(ep_buffer_low_latency)


class _OneRankGroup:
    group_name = "fake"

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return 2


class _RecordingShim:
    """Stands in for the C++ shim on the ``meta`` device: records each call with its tensors' devices and shapes
    (the kernels are tested from Rust and C on ze-emu)."""

    STATE_BYTES = 136

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def _rec(self, op: str, *tensors: torch.Tensor | None) -> None:
        ts = [t for t in tensors if t is not None]
        self.calls.append((op, {t.device.type for t in ts}, [tuple(t.shape) for t in ts]))

    def ep_create(self, group, e, md, mr, tb, k, device):  # noqa: ANN001, ANN201
        self.calls.append(("create", device, (e, md, mr, tb, k)))
        return len(self.calls)

    def ep_state_bytes(self, sw):  # noqa: ANN001, ANN201
        return self.STATE_BYTES

    def ep_create_routing(self, sw, idx, layout, counts, state=None):  # noqa: ANN001, ANN201
        assert counts is None and state is not None and state.numel() == self.STATE_BYTES
        self._rec("routing", idx, state)
        return 11, -1

    def ep_dispatch(self, sw, r, x, w, ox, ow, oi):  # noqa: ANN001, ANN201
        self._rec("dispatch", x, w, ox, ow, oi)

    def ep_combine(self, sw, r, y, out):  # noqa: ANN001, ANN201
        self._rec("combine", y, out)

    def ops_queue_wait(self):  # noqa: ANN201
        self.calls.append(("queue_wait",))

    def ep_routing_destroy(self, h):  # noqa: ANN001, ANN201
        pass

    def ep_destroy(self, h):  # noqa: ANN001, ANN201
        pass


class _FakeEvent:
    def __init__(self) -> None:
        self.log: list[str] = []

    def record(self, stream) -> None:  # noqa: ANN001
        self.log.append(f"record {stream}")

    def wait(self) -> None:
        self.log.append("wait")


class _FakeBackend:
    """``torch.<device type>`` as a backend with events (``torch.xpu``'s ``Event`` and ``current_stream``)."""

    Event = _FakeEvent

    @staticmethod
    def current_stream(device) -> str:  # noqa: ANN001
        return f"stream of {device}"


def test_ep_buffer_device_branch_reads_counts_once(monkeypatch) -> None:  # noqa: ANN001
    """The XPU path's Python on the ``meta`` device with a recording shim (no data: any host read of a device value
    raises there). Every call reaches the shim with device tensors only, dispatch's outputs and combine's inputs
    have the switch's ``max_recv`` rows (the device kernels' contract); the one host read is the received counts of
    a normal dispatch without a handle (DeepEP's too): the cached dispatch, combine, ``get_dispatch_layout`` and the
    low-latency pair make none. Events: ``async_finish`` records one on the current stream, ``previous_event`` is
    waited for, ``with`` waits. Tensors on two devices are refused naming the argument."""
    import xpushmem.ep.buffer as eb
    import xpushmem.torch as xt
    from xpushmem.ep import Buffer, EventOverlap

    fake = _RecordingShim()
    monkeypatch.setattr(eb, "shim", fake)
    monkeypatch.setattr(xt, "shim", fake)
    monkeypatch.setattr(torch, "meta", _FakeBackend, raising=False)
    buf = Buffer(_OneRankGroup())
    monkeypatch.setattr(buf, "_agree_max", lambda values: list(values))
    reads: list[int] = []

    def counts(routing):  # noqa: ANN001, ANN202
        reads.append(routing.handle)
        with pytest.raises(NotImplementedError):  # the real one reads the device: impossible on meta
            Buffer._recv_counts(buf, routing)
        return 6, [4, 2]

    monkeypatch.setattr(buf, "_recv_counts", counts)
    m = {"device": "meta"}
    n, k, hidden, e = 5, 2, 128, 4
    idx, w = torch.zeros(n, k, dtype=torch.int64, **m), torch.zeros(n, k, **m)
    x = torch.zeros(n, hidden, dtype=torch.bfloat16, **m)

    ntr, nrdma, nte, in_rank, ev = buf.get_dispatch_layout(idx, e)
    assert nrdma is None and ev.event is None and fake.calls == [] and reads == []
    assert [(t.device.type, tuple(t.shape), t.dtype) for t in (ntr, nte, in_rank)] == [
        ("meta", (2,), torch.int32), ("meta", (4,), torch.int32), ("meta", (5, 2), torch.bool)]

    prev = EventOverlap(_FakeEvent())
    recv_x, recv_i, recv_w, per_expert, handle, ev = buf.dispatch(
        x, num_tokens_per_rank=ntr, is_token_in_rank=in_rank, num_tokens_per_expert=nte, topk_idx=idx,
        topk_weights=w, expert_alignment=4, previous_event=prev, async_finish=True)
    assert prev.event.log == ["wait"] and ev.event.log == ["record stream of meta"]
    with ev:
        pass
    assert ev.event.log == ["record stream of meta", "wait"]
    create = fake.calls[0]
    assert create[:2] == ("create", "meta")
    max_recv = create[2][2]
    assert [c[0] for c in fake.calls[1:]] == ["routing", "dispatch"] and reads == [11]
    assert fake.calls[2][2][2] == (max_recv, hidden)  # out_tokens: max_recv rows
    assert recv_x.shape == (6, hidden) and recv_i.shape == recv_w.shape == (6, k) and per_expert == [4, 4]
    assert {t.device.type for t in (recv_x, recv_i, recv_w)} == {"meta"}

    fake.calls.clear()
    fp8 = torch.zeros(n, hidden, dtype=torch.float8_e4m3fn, **m)
    (rq, rs), *nones, ev = buf.dispatch((fp8, torch.zeros(n, 1, **m)), handle=handle)
    assert nones == [None] * 4 and ev.event is None and rq.shape == (6, hidden) and rs.shape == (6, 1)
    combined, cw, _ = buf.combine(recv_x, handle, topk_weights=recv_w)
    assert combined.shape == (n, hidden) and cw.shape == (n, k)
    assert [c[0] for c in fake.calls] == ["dispatch", "dispatch", "combine", "combine"]
    assert [c[2][0][0] for c in fake.calls[2:]] == [max_recv, max_recv]  # combine's rows padded to max_recv

    fake.calls.clear()
    stats = torch.zeros(2, dtype=torch.int32, **m)
    for use_fp8 in (False, True):
        recv, count, ll, ev, hook = buf.low_latency_dispatch(x, idx, 8, e, cumulative_local_expert_recv_stats=stats,
                                                             use_fp8=use_fp8, async_finish=True)
        hook()
        packed = recv if not use_fp8 else recv[0]
        assert packed.shape == (2, 16, hidden) and count.shape == (2,) and count.device.type == "meta"
        if use_fp8:
            assert recv[1].shape == (2, 16, 1) and recv[1].stride()[1] == 1  # column-major scales
        assert ev.event.log == ["record stream of meta"]
        out = torch.empty(n, hidden, dtype=torch.bfloat16, **m)
        res, _, _ = buf.low_latency_combine(packed.to(torch.bfloat16), idx, w, ll, out=out)
        assert res is out
    kinds = [c[0] for c in fake.calls]
    assert kinds == ["create", "routing", "dispatch", "dispatch", "combine",
                     "routing", "dispatch", "dispatch", "dispatch", "combine"], kinds
    assert fake.calls[0][1] == "meta"
    assert reads == [11]  # still the one read of the normal dispatch
    assert all(c[1] == {"meta"} for c in fake.calls[1:]), fake.calls

    with pytest.raises(ValueError, match=r"dispatch: topk_idx is on cpu, x on meta"):
        buf.dispatch(x, num_tokens_per_expert=nte, topk_idx=torch.zeros(n, k, dtype=torch.int64),
                     topk_weights=w)
    with pytest.raises(ValueError, match=r"combine: x is on cpu, the handle's dispatch ran on meta"):
        buf.combine(torch.zeros(6, hidden), handle)
    with pytest.raises(ValueError, match=r"low_latency_dispatch: topk_idx is on meta, x on cpu"):
        buf.low_latency_dispatch(torch.zeros(2, 128), idx[:2], 4, 4)


def test_ep_buffer_expert_packing() -> None:
    """``_pack_experts`` / ``_unpack_experts`` (the low-latency buffers, torch ops with device counts) against
    row-by-row loops: an expert with no rows, rows past the counted ones, any dtype's bytes (FP8)."""
    from xpushmem.ep.buffer import _pack_experts, _unpack_experts

    counts = torch.tensor([2, 0, 3])
    em = torch.arange(7 * 4, dtype=torch.float32).view(7, 4)
    cap = 4
    packed = _pack_experts(em, counts, cap)
    want = torch.zeros(3, cap, 4)
    start = 0
    for ex, c in enumerate(counts.tolist()):
        want[ex, :c] = em[start : start + c]
        start += c
    assert torch.equal(packed, want)
    fp8 = _pack_experts(em.to(torch.float8_e4m3fn), counts, cap)
    assert torch.equal(fp8.view(torch.uint8), want.to(torch.float8_e4m3fn).view(torch.uint8))
    back = _unpack_experts(packed, counts, 7)
    assert torch.equal(back[:5], em[:5]) and torch.equal(back[5:], torch.zeros(2, 4))
    assert _pack_experts(em[:0], counts * 0, cap).shape == (3, cap, 4)
