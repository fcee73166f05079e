"""``xpushmem.torch.TokenSwitch`` (upstream's ``torch.distributed._token_switch.TokenSwitch`` on xpushmem) against
a pure-torch reference that every rank computes from every rank's inputs (each rank replays every rank's seeded
generator): what each rank must receive by the definition of the layouts (flat: (source rank, token) order with
the local expert ids ascending and packed, upstream's contract; expert_major: experts in order, then sources,
tokens and top-k columns), and the combined output and its gradients by autograd through plain torch ops. Both
layouts, float32/bfloat16/float16, K in 1, 2, 3, 8, routings with masked (-1) entries and skewed expert loads,
2/3/4 ranks (CPU over gloo); then the errors; then PyTorch's own token-switch tests, ported (``ported_*`` below).
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
from conftest import device_type, world_sizes

from _harness import RankContext, RankPool

L = 3  # experts per rank
H = 16
N_MAX = 12
K_MAX = 8
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _sizes() -> list[int]:
    ws = set(world_sizes())
    if device_type() == "cpu":
        ws |= {3}
    return sorted(ws)


@pytest.fixture(params=_sizes(), ids=lambda w: f"W{w}")
def pool(request: pytest.FixtureRequest, pools) -> RankPool:  # noqa: ANN001
    return pools.get(request.param)


def _inputs(world: int, rank: int, k: int, case: int, dtype: torch.dtype) -> dict:
    """Rank ``rank``'s inputs of ``case``: ``case`` odd = skewed loads and many masked entries."""
    g = torch.Generator().manual_seed(1000 * case + 17 * k + rank)
    e = L * world
    n = int(torch.randint(0, N_MAX + 1, (1,), generator=g))
    skew = case % 2 == 1
    probs = 1.0 / (torch.arange(e, dtype=torch.float64) + 1) ** (2 if skew else 0)
    idx = torch.full((n, k), -1, dtype=torch.int64)
    for t in range(n):
        chosen = torch.multinomial(probs, min(k, e), replacement=False, generator=g)
        idx[t, : chosen.numel()] = chosen
    masked = torch.rand(n, k, generator=g) < (0.5 if skew else 0.15)
    idx[masked] = -1
    weights = torch.rand(n, k, generator=g)
    x = torch.randn(n, H, generator=g).to(dtype)
    grad = torch.randn(n, H, generator=g)
    return {"n": n, "idx": idx, "w": weights, "x": x, "grad": grad}


def _scale(e: torch.Tensor) -> torch.Tensor:
    """The test's expert e multiplies by 1 + e % 3."""
    return (1 + e % 3).to(torch.float32)


def _expected(allin: list[dict], d: int, k: int, layout: str) -> list[tuple[int, int, int | None]]:
    rows: list[tuple[int, int, int | None]] = []
    if layout == "flat":
        for s, inp in enumerate(allin):
            for t in range(inp["n"]):
                if any(int(e) >= 0 and int(e) // L == d for e in inp["idx"][t]):
                    rows.append((s, t, None))
    else:
        for le in range(L):
            for s, inp in enumerate(allin):
                for t in range(inp["n"]):
                    for j in range(k):
                        if int(inp["idx"][t, j]) == d * L + le:
                            rows.append((s, t, j))
    return rows


def _tol(dtype: torch.dtype) -> dict:
    # float32: the sums of a token's copies run in another order than the reference's (per rank, then across).
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 3e-2, "atol": 5e-2}


def ep_forward_backward(ctx: RankContext, layout: str, dtype_name: str) -> None:
    from xpushmem.torch import TokenSwitch

    dtype = DTYPES[dtype_name]
    world, me = ctx.world_size, ctx.rank
    dev = torch.device(device_type(), me) if device_type() == "xpu" else torch.device("cpu")
    max_recv = N_MAX * world * L
    ts = TokenSwitch(dist.group.WORLD, L * world, N_MAX, max_recv, H * 4, max_topk=K_MAX, device=dev)
    assert ts.device.type == dev.type
    for k in (1, 2, 3, 8):
        for case in (0, 1):
            what = f"{layout} {dtype_name} K={k} case={case} rank {me}"
            allin = [_inputs(world, r, k, case, dtype) for r in range(world)]
            mine = allin[me]
            counts = torch.zeros(L + 1, dtype=torch.int64)
            routing = ts.create_routing(mine["idx"].to(dev), counts, layout=layout)
            rows = _expected(allin, me, k, layout)
            assert TokenSwitch.num_recv_rows(routing) == len(rows), what
            want = [
                sum(int((inp["idx"] == me * L + le).sum()) for inp in allin) for le in range(L)
            ]
            assert counts[:L].tolist() == want, f"{what}: per_expert_token_counts {counts} != {want}"
            assert TokenSwitch.expert_offsets(routing).tolist() == torch.tensor(want).cumsum(0).tolist()

            x = mine["x"].to(dev).requires_grad_(True)
            out_x, out_w, out_i = ts.dispatch(routing, x, mine["w"].to(dev), max_recv)
            assert out_x.shape == (max_recv, H) and out_x.dtype == dtype and out_x.device == dev, what
            exp_x = torch.stack([allin[s]["x"][t] for s, t, _ in rows]) if rows else out_x[:0].cpu()
            torch.testing.assert_close(out_x[: len(rows)].detach().cpu(), exp_x, rtol=0, atol=0, msg=what)
            if layout == "flat":
                assert out_i is not None and out_w.shape == (max_recv, k), what
                for r, (s, t, _) in enumerate(rows):
                    # Upstream's contract: the local ids ascending, packed (ties in column order), -1 / 0 after.
                    e, w = allin[s]["idx"][t].tolist(), allin[s]["w"][t].tolist()
                    mine_ = sorted((x - me * L, j) for j, x in enumerate(e) if x >= 0 and x // L == me)
                    exp_i = torch.tensor([le for le, _ in mine_] + [-1] * (k - len(mine_)))
                    exp_w = torch.tensor([w[j] for _, j in mine_] + [0.0] * (k - len(mine_)))
                    assert torch.equal(out_i[r].cpu(), exp_i), f"{what}: out_topk_idx row {r}"
                    assert torch.equal(out_w[r].cpu(), exp_w), f"{what}: out_topk_weights row {r}"
                local_ids = out_i.clamp(min=0) + me * L
                coef = torch.where(out_i >= 0, out_w * _scale(local_ids), torch.zeros_like(out_w)).sum(1)
            else:
                assert out_i is None and out_w.shape == (max_recv,), what
                exp_w = torch.tensor([float(allin[s]["w"][t, j]) for s, t, j in rows])
                assert torch.equal(out_w[: len(rows)].cpu(), exp_w), f"{what}: out_topk_weights"
                ends = TokenSwitch.expert_offsets(routing).tolist()
                expert_of_row = torch.zeros(max_recv, dtype=torch.int64, device=dev)
                start = 0
                for le, end in enumerate(ends):
                    expert_of_row[start:end] = me * L + le
                    start = end
                coef = out_w * _scale(expert_of_row)
            # The experts: row * (its weights times the expert's scale), in the token dtype.
            y = (out_x.float() * coef[:, None]).to(dtype)
            combined = ts.combine(routing, y)
            (combined.float() * mine["grad"].to(dev)).sum().backward()

            # Reference: plain torch on this rank's own tokens (combine is dispatch's adjoint).
            xr = mine["x"].detach().clone().requires_grad_(True)
            e = mine["idx"]
            c = torch.where(e >= 0, mine["w"] * _scale(e.clamp(min=0)), torch.zeros_like(mine["w"])).sum(1)
            ref = xr.float() * c[:, None]
            (ref * mine["grad"]).sum().backward()
            torch.testing.assert_close(combined.float().cpu(), ref.detach(), **_tol(dtype), msg=what)
            assert x.grad is not None and x.grad.dtype == dtype, what
            torch.testing.assert_close(x.grad.float().cpu(), xr.grad.float(), **_tol(dtype), msg=what)
    ts.close()


def ep_errors(ctx: RankContext) -> None:
    from xpushmem.torch import TokenSwitch

    world, me = ctx.world_size, ctx.rank
    last = me == world - 1
    ts = TokenSwitch(dist.group.WORLD, 2 * world, 4, world, 64, max_topk=2)
    # An expert id out of range on the last rank: its message names the value and position.
    idx = torch.tensor([[0, 2 * world if last else 1]])
    with pytest.raises(RuntimeError, match=rf"{2 * world} at \[0, 1\]" if last else "rejected its arguments"):
        ts.create_routing(idx, layout="flat")
    # Every rank sends rank 0 two tokens: 2W rows where W fit; the same error on every rank.
    with pytest.raises(RuntimeError, match=rf"rank 0 would receive {2 * world} flat rows \({world} did not fit"):
        ts.create_routing(torch.zeros(2, 1, dtype=torch.int64), layout="flat")
    with pytest.raises(ValueError, match="layout must be one of"):
        ts.create_routing(torch.zeros(1, 1, dtype=torch.int64), layout="rank_major")
    # Still in step: one token each to expert 0.
    r = ts.create_routing(torch.zeros(1, 1, dtype=torch.int64), layout="flat")
    x = torch.full((1, 4), float(me))
    out, _, _ = ts.dispatch(r, x, torch.ones(1, 1), world)
    if me == 0:
        assert out[:world, 0].tolist() == [float(s) for s in range(world)]
    # A dtype that differs between ranks: Mismatch on every rank.
    xd = x.to(torch.float16 if last else torch.float32)
    with pytest.raises(RuntimeError, match="Mismatch|different symmetric arguments"):
        ts.dispatch(r, xd, torch.ones(1, 1), world)
    # Handles: a routing of another switch, a freed switch (errors on every rank alike, before any exchange).
    from xpushmem.torch import shim

    other = TokenSwitch(dist.group.WORLD, 2 * world, 4, world, 64, max_topk=2)
    r2 = other.create_routing(torch.zeros(1, 1, dtype=torch.int64), layout="flat")
    with pytest.raises(RuntimeError, match="routing.*made by switch"):
        ts.dispatch(r2, x, torch.ones(1, 1), world)
    stale = other._handle
    other.close()
    with pytest.raises(RuntimeError, match="switch was closed"):
        other.create_routing(torch.zeros(1, 1, dtype=torch.int64), layout="flat")
    with pytest.raises(RuntimeError, match="not a live handle"):
        shim.ep_destroy(stale)
    ts.close()


def ep_fp8_with_scales(ctx: RankContext) -> None:
    """FP8 payloads with per-token scales (as DeepEP's ``(x_fp8, scales)``): the float8 values and their float32
    scales (one per 128 channels) are two dispatches on one routing, so each scale row lands beside its values'
    row; every received row is bit for bit the routed token's, in both layouts, and combine of the dequantized
    expert outputs equals the reference on the dequantized inputs."""
    from xpushmem.torch import TokenSwitch

    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is None:
        pytest.skip("this torch has no float8_e4m3fn")
    world, me = ctx.world_size, ctx.rank
    hidden, k = 256, 2
    max_recv = N_MAX * world * L
    ts = TokenSwitch(dist.group.WORLD, L * world, N_MAX, max_recv, hidden * 4, max_topk=k)

    def quantized(r: int) -> tuple[torch.Tensor, torch.Tensor, dict]:
        inp = _inputs(world, r, k, 1, torch.float32)
        g = torch.Generator().manual_seed(99 + r)
        x = torch.randn(inp["n"], hidden, generator=g) * 3
        blocks = x.view(inp["n"], hidden // 128, 128)
        scale = (blocks.abs().amax(-1).clamp(min=1e-4) / 448.0).contiguous()
        return (blocks / scale[..., None]).view(inp["n"], hidden).to(fp8), scale, inp

    allq = [quantized(r) for r in range(world)]
    x8, scale, mine = allq[me]
    for layout in ("flat", "expert_major"):
        what = f"fp8 {layout} rank {me}"
        routing = ts.create_routing(mine["idx"], layout=layout)
        rows = _expected([q[2] for q in allq], me, k, layout)
        out_x, out_w, out_i = ts.dispatch(routing, x8, mine["w"], max_recv)
        out_s, _, _ = ts.dispatch(routing, scale, mine["w"], max_recv)
        assert out_x.dtype == fp8 and out_s.dtype == torch.float32, what
        for r, (s, t, _) in enumerate(rows):
            assert torch.equal(out_x[r].view(torch.uint8), allq[s][0][t].view(torch.uint8)), f"{what}: values row {r}"
            assert torch.equal(out_s[r], allq[s][1][t]), f"{what}: scales row {r}"
        # The experts on the dequantized rows (scale 1 + e % 3 times the weight, as the reference test), combined.
        deq = (out_x.float().view(max_recv, hidden // 128, 128) * out_s[..., None]).view(max_recv, hidden)
        if layout == "flat":
            coef = torch.where(out_i >= 0, out_w * _scale(out_i.clamp(min=0) + me * L), torch.zeros_like(out_w)).sum(1)
        else:
            ends = TokenSwitch.expert_offsets(routing).tolist()
            expert_of_row = torch.zeros(max_recv, dtype=torch.int64)
            start = 0
            for le, end in enumerate(ends):
                expert_of_row[start:end] = me * L + le
                start = end
            coef = out_w * _scale(expert_of_row)
        combined = ts.combine(routing, deq * coef[:, None])
        e = mine["idx"]
        c = torch.where(e >= 0, mine["w"] * _scale(e.clamp(min=0)), torch.zeros_like(mine["w"])).sum(1)
        n = mine["n"]
        ref = (x8.float().view(n, hidden // 128, 128) * scale[..., None]).view(n, hidden) * c[:, None]
        torch.testing.assert_close(combined, ref, rtol=1e-5, atol=1e-5, msg=what)
    ts.close()


def ep_zero_copy(ctx: RankContext) -> None:
    """``zero_copy=True`` on the host path: a flat dispatch under ``no_grad`` returns a view of the switch's receive
    rows (its data pointer is theirs) holding the reference's rows; the experts scale them in place and combine of
    the view equals the reference; with grad enabled, or without ``zero_copy``, the outputs are copies."""
    from xpushmem.torch import TokenSwitch, shim

    if device_type() != "cpu":
        pytest.skip("zero_copy is the host path's")
    world, me, k = ctx.world_size, ctx.rank, 3
    max_recv = N_MAX * world * L
    allin = [_inputs(world, r, k, 1, torch.float32) for r in range(world)]
    mine = allin[me]
    ts = TokenSwitch(dist.group.WORLD, L * world, N_MAX, max_recv, H * 4, max_topk=k, zero_copy=True)
    plain = TokenSwitch(dist.group.WORLD, L * world, N_MAX, max_recv, H * 4, max_topk=k)
    area = shim.ep_recv_rows(ts._handle)
    rows = _expected(allin, me, k, "flat")
    for step in range(2):
        what = f"zero_copy step {step} rank {me}"
        routing = ts.create_routing(mine["idx"], layout="flat")
        with torch.no_grad():
            out_x, out_w, out_i = ts.dispatch(routing, mine["x"], mine["w"], max_recv)
            assert out_x.data_ptr() == area.data_ptr() and out_x.shape == (max_recv, H), what
            exp_x = torch.stack([allin[s]["x"][t] for s, t, _ in rows]) if rows else out_x[:0]
            torch.testing.assert_close(out_x[: len(rows)], exp_x, rtol=0, atol=0, msg=what)
            local_ids = out_i.clamp(min=0) + me * L
            coef = torch.where(out_i >= 0, out_w * _scale(local_ids), torch.zeros_like(out_w)).sum(1)
            out_x.mul_(coef[:, None])  # the experts, in place in the receive rows
            combined = ts.combine(routing, out_x)
        e = mine["idx"]
        c = torch.where(e >= 0, mine["w"] * _scale(e.clamp(min=0)), torch.zeros_like(mine["w"])).sum(1)
        torch.testing.assert_close(combined, mine["x"] * c[:, None], **_tol(torch.float32), msg=what)
    # With autograd, and on a switch without zero_copy: copies.
    routing = ts.create_routing(mine["idx"], layout="flat")
    out_x, _, _ = ts.dispatch(routing, mine["x"].clone().requires_grad_(True), mine["w"], max_recv)
    assert out_x.data_ptr() != area.data_ptr()
    routing = plain.create_routing(mine["idx"], layout="flat")
    with torch.no_grad():
        out_x, _, _ = plain.dispatch(routing, mine["x"], mine["w"], max_recv)
    assert out_x.data_ptr() != shim.ep_recv_rows(plain._handle).data_ptr()
    plain.close()
    ts.close()


def test_ep_zero_copy(pools) -> None:  # noqa: ANN001
    pools.get(3 if 3 in _sizes() else world_sizes()[0]).run(ep_zero_copy)


def test_ep_fp8_with_scales(pools) -> None:  # noqa: ANN001
    pools.get(3 if 3 in _sizes() else world_sizes()[0]).run(ep_fp8_with_scales)


def _reference_rows() -> list[tuple[int, str, str]]:
    """(world size, layout, dtype) of the reference test: a covering set of the product (every world size meets
    every dtype and both layouts, every dtype both layouts: the layout alternates with world and dtype); the whole
    product at XPUSHMEM_TEST_DEPTH=full (as the Rust suites)."""
    layouts = ["flat", "expert_major"]
    if os.environ.get("XPUSHMEM_TEST_DEPTH") == "full":
        return [(w, lay, d) for w in _sizes() for lay in layouts for d in DTYPES]
    return [(w, layouts[(i + j) % 2], d) for i, w in enumerate(_sizes()) for j, d in enumerate(DTYPES)]


@pytest.mark.parametrize(("world", "layout", "dtype_name"), _reference_rows(),
                         ids=lambda v: f"W{v}" if isinstance(v, int) else str(v))
def test_ep_token_switch_against_reference(pools, world: int, layout: str, dtype_name: str) -> None:  # noqa: ANN001
    pools.get(world).run(ep_forward_backward, layout=layout, dtype_name=dtype_name)


def test_ep_token_switch_errors(pool: RankPool) -> None:
    pool.run(ep_errors)


class _FakeGroup:
    group_name = "fake"

    def size(self) -> int:
        return 2


class _RecordingShim:
    """Stands in for the C++ shim: records the calls the device path makes (the kernels are tested from Rust and
    C on ze-emu; the shim's C++ is compiled by scripts/check-shim-xpu.sh)."""

    STATE_BYTES = 136

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def ep_create(self, group, e, md, mr, tb, k, device):  # noqa: ANN001, ANN201
        self.calls.append(("create", device))
        return 7

    def ep_state_bytes(self, sw):  # noqa: ANN001, ANN201
        return self.STATE_BYTES

    def ep_create_routing(self, sw, idx, layout, counts, state=None):  # noqa: ANN001, ANN201
        self.calls.append(("routing", idx.device.type, counts, None if state is None else (state.numel(), state.dtype,
                                                                                            state.device.type)))
        return 11, -1

    def ep_dispatch(self, sw, r, x, w, ox, ow, oi):  # noqa: ANN001, ANN201
        self.calls.append(("dispatch", r, tuple(t.device.type for t in (x, w, ox, ow)), tuple(ox.shape),
                           oi is not None))

    def ep_combine(self, sw, r, y, out):  # noqa: ANN001, ANN201
        self.calls.append(("combine", r, y.device.type, tuple(y.shape), tuple(out.shape)))

    def ep_routing_destroy(self, h):  # noqa: ANN001, ANN201
        pass

    def ep_destroy(self, h):  # noqa: ANN001, ANN201
        pass


def test_ep_device_branch_never_reads_the_device(monkeypatch) -> None:  # noqa: ANN001
    """The Python side of the XPU path, on the ``meta`` device (no data: any host read of a device value, such as
    ``int(rows)`` or ``.tolist()``, raises): create_routing hands the shim a uint8 state tensor of
    ``ep_state_bytes`` on the tensors' device and no host counts; dispatch (forward and backward) and combine call
    the shim with device tensors only and pack the flat ids with the state's row count on the device; the counts and
    offsets are views of the state; a CPU tensor on a non-CPU switch is refused naming the argument."""
    import xpushmem.torch as xt
    from xpushmem.torch import TokenSwitch

    fake = _RecordingShim()
    monkeypatch.setattr(xt, "shim", fake)
    ts = TokenSwitch(_FakeGroup(), 4, 8, 32, 64, max_topk=2, device="meta")
    assert fake.calls == [("create", "meta")] and ts.device == torch.device("meta")
    counts = torch.zeros(3, dtype=torch.int64, device="meta")
    for layout in ("flat", "expert_major"):
        fake.calls.clear()
        routing = ts.create_routing(torch.zeros(5, 2, dtype=torch.int64, device="meta"), counts, layout=layout)
        assert fake.calls == [("routing", "meta", None, (fake.STATE_BYTES, torch.uint8, "meta"))], fake.calls
        assert routing.handle.state.numel() == fake.STATE_BYTES
        assert routing.handle.expert_counts.shape == (2,) and routing.handle.rows.dim() == 0
        assert TokenSwitch.expert_offsets(routing).device.type == "meta"
        x = torch.zeros(5, 16, device="meta", requires_grad=True)
        out_x, out_w, out_i = ts.dispatch(routing, x, torch.zeros(5, 2, device="meta"), 32)
        assert out_x.shape == (32, 16) and (out_i is not None) == (layout == "flat")
        y = ts.combine(routing, out_x * 2)
        assert y.shape == (5, 16) and y.device.type == "meta"
        y.sum().backward()
        assert x.grad is not None and x.grad.shape == (5, 16)
        kinds = [c[0] for c in fake.calls[1:]]
        # forward dispatch, combine; backward: combine's backward is a dispatch, dispatch's backward a combine.
        assert kinds == ["dispatch", "combine", "dispatch", "combine"], kinds
        assert all(set(c[2]) == {"meta"} for c in fake.calls[1:] if c[0] == "dispatch"), fake.calls
        assert all(c[2] == "meta" for c in fake.calls[1:] if c[0] == "combine"), fake.calls
        with pytest.raises(RuntimeError, match="meta"):
            TokenSwitch.num_recv_rows(routing)  # a host read: refused on meta, a synchronisation on XPU
    with pytest.raises(ValueError, match="tokens is on cpu, the switch on meta"):
        ts.dispatch(routing, torch.zeros(5, 16), torch.zeros(5, 2), 32)
    with pytest.raises(ValueError, match="topk_idx is on cpu"):
        ts.create_routing(torch.zeros(5, 2, dtype=torch.int64), layout="flat")


def test_ep_pack_local_masks_rows() -> None:
    """``_pack_local`` packs exactly the first ``rows`` rows, with ``rows`` an int (host path) or a 0-dim tensor
    (device path), and leaves the others as they were; against a row-by-row reference."""
    from xpushmem.torch.token_switch import _pack_local

    g = torch.Generator().manual_seed(5)
    idx0 = torch.randint(-1, 3, (6, 4), generator=g)
    w0 = torch.rand(6, 4, generator=g)
    for rows in (0, 4, torch.tensor(4), torch.tensor(6)):
        idx, w = idx0.clone(), w0.clone()
        _pack_local(idx, w, 3, rows)
        n = int(rows)
        for r in range(6):
            if r >= n:
                assert torch.equal(idx[r], idx0[r]) and torch.equal(w[r], w0[r]), (rows, r)
                continue
            mine = sorted((int(e), j) for j, e in enumerate(idx0[r].tolist()) if e >= 0)
            exp_i = [e for e, _ in mine] + [-1] * (4 - len(mine))
            exp_w = [float(w0[r, j]) for _, j in mine] + [0.0] * (4 - len(mine))
            assert idx[r].tolist() == exp_i and w[r].tolist() == exp_w, (rows, r)


def test_ep_readme_example(tmp_path) -> None:  # noqa: ANN001
    """README's MoE example runs as written (2 processes, gloo), and every rank reports."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## MoE dispatch and combine"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "README's MoE section has no python block"
    script = tmp_path / "ep_example.py"
    script.write_text(code.group(1))
    env = dict(os.environ, MASTER_PORT=str(29000 + os.getpid() % 1000))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(re.findall(r"rank \d: \d+ \(token, expert\) rows received", out.stdout)) == 2, out.stdout


# ---- PyTorch's own token-switch tests, ported -------------------------------------------------------------------
#
# Upstream's test/distributed/test_token_switch.py (TokenSwitchNCCLTest and the backend-independent contract tests
# _TokenSwitchContractTests), their semantics re-implemented here on CPU tensors over gloo (upstream runs them on
# CUDA with NCCL EP, the contract tests also on a gloo all_gather reference switch). Ported: every contract test
# (per-expert counts, flat rows and packed top-k, flat combine, re-dispatch into the same slots, autograd round
# trip, combine's backward through the forward's slots, two live routings, interleaved routings) and every
# TokenSwitchNCCLTest case that does not need symmetric-memory windows (create_routing, dispatch, the round trip,
# dispatch's and combine's backward, the autograd round trip, several rounds on one routing, the expert-major
# dispatch and round trip, and the dispatch -> grouped GEMM -> weights -> combine pipeline with plain tensors).
# Not ported: test_dispatch_symm_mem_tokens and test_combine_symm_mem_tokens (NCCL EP's zero-copy window path for
# tensors from symm_mem.empty on CUDA, with and without an explicit rendezvous: the host path copies from and to any
# tensor, so there is no window path to test), and the symm_mem allocation of the GEMM pipeline (its arithmetic is
# ported).

U_TOKENS = 16  # upstream's NUM_TOKENS
U_HIDDEN = 64
U_ROUNDS = 3
C_TOP_K = 2  # upstream's CONTRACT_TOP_K
C_EPR = 2  # CONTRACT_EXPERTS_PER_RANK


def _ring_topk(rank: int, world: int, top_k: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream's _generate_topk: every token of rank r to expert (r + 1) % W (one expert per rank)."""
    idx = torch.full((U_TOKENS, top_k), (rank + 1) % world, dtype=torch.int64)
    return idx, torch.full((U_TOKENS, top_k), 1.0 / top_k)


def _contract_inputs(world: int, rank: int, seed: int, dtype: torch.dtype) -> tuple:
    """Upstream's _contract_inputs: every rank builds every rank's inputs (distinct experts per token, columns 0/1
    of each token encode (source rank, token)), so it knows what it receives."""
    k, epr, e = C_TOP_K, C_EPR, world * C_EPR
    idx, xs = [], []
    for r in range(world):
        g = torch.Generator().manual_seed(seed * 100 + r)
        idx.append(torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(U_TOKENS)]))
        x = torch.randn(U_TOKENS, U_HIDDEN, generator=g)
        x[:, 0] = r
        x[:, 1] = torch.arange(U_TOKENS)
        xs.append(x.to(dtype))
    dest = [[{int(v) // epr for v in row} for row in i.tolist()] for i in idx]
    ndest = torch.tensor([float(len(d)) for d in dest[rank]]).unsqueeze(1)
    expected = sorted((r, t) for r in range(world) for t in range(U_TOKENS) if rank in dest[r][t])
    weights = (0.1 * torch.arange(1, k + 1)).expand(U_TOKENS, k).contiguous()
    return idx[rank], weights, xs[rank], ndest, expected, idx


def _out_buffers(ts, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # noqa: ANN001
    m = ts.max_recv_tokens_per_rank
    return (torch.zeros(m, U_HIDDEN, dtype=dtype), torch.zeros(m, C_TOP_K), torch.zeros(m, C_TOP_K, dtype=torch.int64))


def _sources(rows: torch.Tensor) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in rows[:, :2].float().tolist()]


def ported_contract(ctx: RankContext, dtype_name: str) -> None:
    """_TokenSwitchContractTests, every case, on one switch (W * 2 experts, top-2, flat)."""
    from xpushmem.torch import TokenSwitch

    dtype = DTYPES[dtype_name]
    world, me = ctx.world_size, ctx.rank
    ts = TokenSwitch(dist.group.WORLD, world * C_EPR, U_TOKENS, world * U_TOKENS, U_HIDDEN * 4, max_topk=C_TOP_K)
    lo = me * C_EPR

    # test_contract_per_expert_counts: int32 counts of received (token, local expert) pairs.
    topk_idx, _w, _x, _nd, _exp, all_idx = _contract_inputs(world, me, 1, dtype)
    counts = torch.zeros(C_EPR, dtype=torch.int32)
    ts.create_routing(topk_idx, counts, layout="flat")
    per_expert = torch.bincount(torch.cat(all_idx).flatten(), minlength=world * C_EPR)
    assert counts.long().tolist() == per_expert[lo : lo + C_EPR].tolist(), "per_expert_counts"

    # test_contract_flat_dispatch_rows_and_topk: one row per (token, destination rank); local ids packed.
    topk_idx, w, x, _nd, expected, all_idx = _contract_inputs(world, me, 2, dtype)
    routing = ts.create_routing(topk_idx, layout="flat")
    out_tokens, out_w, out_idx = _out_buffers(ts, dtype)
    ts.dispatch(routing, x, w, out=(out_tokens, out_w, out_idx))
    n = len(expected)
    srcs = _sources(out_tokens[:n])
    assert sorted(srcs) == expected, "flat rows"
    want_idx = torch.full((n, C_TOP_K), -1, dtype=torch.int64)
    want_w = torch.zeros(n, C_TOP_K)
    for row, (r, t) in enumerate(srcs):
        mine = sorted((int(v) - lo, j) for j, v in enumerate(all_idx[r][t]) if 0 <= int(v) - lo < C_EPR)
        for j, (le, col) in enumerate(mine):
            want_idx[row, j] = le
            want_w[row, j] = 0.1 * (col + 1)
    assert torch.equal(out_idx[:n], want_idx), "flat out_topk_idx"
    torch.testing.assert_close(out_w[:n], want_w, msg="flat out_topk_weights")

    # test_contract_flat_combine_sums_per_destination_rank
    topk_idx, w, x, ndest, expected, _ = _contract_inputs(world, me, 3, dtype)
    routing = ts.create_routing(topk_idx, layout="flat")
    out_tokens, out_w, out_idx = _out_buffers(ts, dtype)
    ts.dispatch(routing, x, w, out=(out_tokens, out_w, out_idx))
    combined = torch.zeros_like(x)
    ts.combine(routing, out_tokens[: len(expected)].contiguous(), out=combined)
    torch.testing.assert_close(combined.float(), ndest * x.float(), **_tol(dtype))

    # test_contract_redispatch_keeps_layout: a second dispatch on the routing fills the first one's slots.
    topk_idx, w, x, _nd, expected, _ = _contract_inputs(world, me, 4, dtype)
    routing = ts.create_routing(topk_idx, layout="flat")
    n = len(expected)
    out_tokens, out_w, out_idx = _out_buffers(ts, dtype)
    ts.dispatch(routing, x, w, out=(out_tokens, out_w, out_idx))
    first = out_tokens[:n].clone()
    x2 = x.clone()
    x2[:, 2:] = -x2[:, 2:]
    ts.dispatch(routing, x2, w, out=(out_tokens, out_w, out_idx))
    assert torch.equal(out_tokens[:n, :2], first[:, :2]) and torch.equal(out_tokens[:n, 2:], -first[:, 2:])

    # test_contract_autograd_roundtrip
    topk_idx, w, x, ndest, expected, _ = _contract_inputs(world, me, 5, dtype)
    routing = ts.create_routing(topk_idx, layout="flat")
    tokens = x.clone().requires_grad_(True)
    dispatched, _, _ = ts.dispatch(routing, tokens, w, ts.max_recv_tokens_per_rank)
    combined = ts.combine(routing, dispatched[: len(expected)].contiguous())
    combined.sum().backward()
    torch.testing.assert_close(combined.float(), ndest * x.float(), **_tol(dtype))
    torch.testing.assert_close(tokens.grad.float(), ndest.expand(U_TOKENS, U_HIDDEN), **_tol(dtype))

    # test_contract_combine_backward_uses_forward_slots: each row's gradient is its token's id + 1.
    topk_idx, w, x, _nd, expected, _ = _contract_inputs(world, me, 6, dtype)
    routing = ts.create_routing(topk_idx, layout="flat")
    out_tokens, out_w, out_idx = _out_buffers(ts, dtype)
    ts.dispatch(routing, x, w, out=(out_tokens, out_w, out_idx))
    n = len(expected)
    expert_tokens = out_tokens[:n].contiguous().requires_grad_(True)
    scale = torch.arange(1.0, U_TOKENS + 1).unsqueeze(1)
    (ts.combine(routing, expert_tokens).float() * scale).sum().backward()
    want = (out_tokens[:n, 1].float() + 1)[:, None].expand(n, U_HIDDEN)
    torch.testing.assert_close(expert_tokens.grad.float(), want, **_tol(dtype))

    # test_contract_two_routings_autograd: layer 1's backward after layer 2's forward.
    idx1, w1, x, nd1, exp1, _ = _contract_inputs(world, me, 7, dtype)
    idx2, w2, _x2, nd2, exp2, _ = _contract_inputs(world, me, 8, dtype)
    r1 = ts.create_routing(idx1, layout="flat")
    r2 = ts.create_routing(idx2, layout="flat")
    m = ts.max_recv_tokens_per_rank
    tokens = x.clone().requires_grad_(True)
    d1, _, _ = ts.dispatch(r1, tokens, w1, m)
    h = ts.combine(r1, d1[: len(exp1)].contiguous())
    d2, _, _ = ts.dispatch(r2, h, w2, m)
    y = ts.combine(r2, d2[: len(exp2)].contiguous())
    y.sum().backward()
    torch.testing.assert_close(y.float(), nd1 * nd2 * x.float(), **_tol(dtype))
    torch.testing.assert_close(tokens.grad.float(), (nd1 * nd2).expand(U_TOKENS, U_HIDDEN), **_tol(dtype))

    # test_contract_interleaved_routings: two dispatches before either combine, then their backwards.
    for seed in range(9, 15, 2):
        idx1, w1, x1, nd1, exp1, _ = _contract_inputs(world, me, seed, dtype)
        idx2, w2, x2, nd2, exp2, _ = _contract_inputs(world, me, seed + 1, dtype)
        r1 = ts.create_routing(idx1, layout="flat")
        r2 = ts.create_routing(idx2, layout="flat")
        t1 = x1.clone().requires_grad_(True)
        t2 = x2.clone().requires_grad_(True)
        d1, _, _ = ts.dispatch(r1, t1, w1, m)
        d2, _, _ = ts.dispatch(r2, t2, w2, m)
        y1 = ts.combine(r1, d1[: len(exp1)].contiguous())
        y2 = ts.combine(r2, d2[: len(exp2)].contiguous())
        (y1.sum() + 2 * y2.sum()).backward()
        torch.testing.assert_close(y1.float(), nd1 * x1.float(), **_tol(dtype))
        torch.testing.assert_close(y2.float(), nd2 * x2.float(), **_tol(dtype))
        torch.testing.assert_close(t1.grad.float(), nd1.expand(U_TOKENS, U_HIDDEN), **_tol(dtype))
        torch.testing.assert_close(t2.grad.float(), (2 * nd2).expand(U_TOKENS, U_HIDDEN), **_tol(dtype))
    ts.close()


def ported_nccl_cases(ctx: RankContext) -> None:
    """TokenSwitchNCCLTest's cases (W experts, one per rank, every token of rank r to rank r + 1, bfloat16)."""
    from xpushmem.torch import TokenSwitch

    world, me = ctx.world_size, ctx.rank
    bf = torch.bfloat16
    m = world * U_TOKENS
    ts = TokenSwitch(dist.group.WORLD, world, U_TOKENS, m, U_HIDDEN * 2)
    val = float(me + 1)
    src_val = float((me - 1) % world + 1)

    def bufs(expert_major: bool = False) -> tuple:
        if expert_major:
            return torch.zeros(m, U_HIDDEN, dtype=bf), torch.zeros(m), None
        return torch.zeros(m, U_HIDDEN, dtype=bf), torch.zeros(m, 1), torch.zeros(m, 1, dtype=torch.int64)

    # test_create_routing: one local expert receives every token of one rank (int32 counts).
    topk_idx, topk_w = _ring_topk(me, world)
    counts = torch.zeros(1, dtype=torch.int32)
    ts.create_routing(topk_idx, counts, layout="flat")
    assert counts.dtype == torch.int32 and counts.numel() == 1 and counts.item() == U_TOKENS

    # test_dispatch
    routing = ts.create_routing(topk_idx, torch.zeros(world, dtype=torch.int32), layout="flat")
    out = bufs()
    ts.dispatch(routing, torch.full((U_TOKENS, U_HIDDEN), val, dtype=bf), topk_w, out=out)
    assert out[0][:U_TOKENS].float().eq(src_val).all(), f"rank {me}: expected {src_val}"

    # test_dispatch_combine_roundtrip
    combined = torch.zeros(U_TOKENS, U_HIDDEN, dtype=bf)
    ts.combine(routing, out[0][:U_TOKENS].contiguous(), out=combined)
    assert torch.equal(combined, torch.full((U_TOKENS, U_HIDDEN), val, dtype=bf))

    # test_dispatch_autograd_backward: grad of sum(out_tokens) is one per token (one destination).
    tokens = torch.full((U_TOKENS, U_HIDDEN), val, dtype=bf, requires_grad=True)
    out_tokens, _ow, out_idx = ts.dispatch(routing, tokens, topk_w, m)
    out_tokens.sum().backward()
    assert out_idx.dtype == torch.int64
    assert torch.equal(tokens.grad, torch.ones_like(tokens))

    # test_combine_autograd_backward: dispatch first, then combine's gradient goes back to the expert rows.
    out = bufs()
    ts.dispatch(routing, torch.full((U_TOKENS, U_HIDDEN), val, dtype=bf), topk_w, out=out)
    expert_tokens = out[0][:U_TOKENS].contiguous().detach().requires_grad_(True)
    ts.combine(routing, expert_tokens).sum().backward()
    assert torch.equal(expert_tokens.grad, torch.ones_like(expert_tokens))

    # test_dispatch_combine_autograd_roundtrip
    tokens = torch.full((U_TOKENS, U_HIDDEN), val, dtype=bf, requires_grad=True)
    dispatched, _w, _i = ts.dispatch(routing, tokens, topk_w, m)
    ts.combine(routing, dispatched[:U_TOKENS].contiguous()).sum().backward()
    assert torch.equal(tokens.grad, torch.ones_like(tokens))

    # test_dispatch_combine_multiple_rounds: one routing, fresh tokens each round, the same buffers.
    out = bufs()
    combined = torch.zeros(U_TOKENS, U_HIDDEN, dtype=bf)
    for r in range(U_ROUNDS):
        token_val = float(me + 1 + r)
        ts.dispatch(routing, torch.full((U_TOKENS, U_HIDDEN), token_val, dtype=bf), topk_w, out=out)
        ts.combine(routing, out[0][:U_TOKENS].contiguous(), out=combined)
    assert torch.equal(combined, torch.full((U_TOKENS, U_HIDDEN), token_val, dtype=bf))

    # test_dispatch_expert_major: 1-D weights, no out_topk_idx.
    routing = ts.create_routing(topk_idx, layout="expert_major")
    out = bufs(expert_major=True)
    ts.dispatch(routing, torch.full((U_TOKENS, U_HIDDEN), val, dtype=bf), topk_w, out=out)
    assert out[0][:U_TOKENS].float().eq(src_val).all() and out[2] is None

    # test_dispatch_combine_roundtrip_expert_major: the caller applies the 1-D weights before combine.
    weighted = (out[0][:U_TOKENS].float().mul_(out[1][:U_TOKENS, None])).to(bf).contiguous()
    combined = torch.zeros(U_TOKENS, U_HIDDEN, dtype=bf)
    ts.combine(routing, weighted, out=combined)
    assert torch.equal(combined, torch.full((U_TOKENS, U_HIDDEN), val, dtype=bf))

    # test_dispatch_group_gemm_combine_symm_mem's arithmetic (plain tensors): dispatch -> GEMM (2 I) -> weights ->
    # combine gives 2 * the token.
    out = bufs(expert_major=True)
    ts.dispatch(routing, torch.full((U_TOKENS, U_HIDDEN), val, dtype=bf), topk_w, out=out)
    gemm = out[0][:U_TOKENS].float().mm(torch.eye(U_HIDDEN) * 2.0).to(bf)
    weighted = (gemm.float().mul_(out[1][:U_TOKENS, None])).to(bf).contiguous()
    combined = torch.zeros(U_TOKENS, U_HIDDEN, dtype=bf)
    ts.combine(routing, weighted, out=combined)
    assert torch.equal(combined, torch.full((U_TOKENS, U_HIDDEN), 2 * val, dtype=bf))
    ts.close()


def test_ported_token_switch_contract(pools) -> None:  # noqa: ANN001
    """Upstream's contract tests at 2 ranks (its reference backend's size) in float32 (the reference backend's
    dtype), and at 3 ranks in bfloat16 (the NCCL backend's)."""
    pools.get(2).run(ported_contract, dtype_name="float32")
    if 3 in _sizes():
        pools.get(3).run(ported_contract, dtype_name="bfloat16")


def test_ported_token_switch_nccl_cases(pool: RankPool) -> None:
    pool.run(ported_nccl_cases)
