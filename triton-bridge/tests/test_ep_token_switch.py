"""``xpushmem.torch.TokenSwitch`` (upstream's ``torch.distributed._token_switch.TokenSwitch`` on xpushmem) against
a pure-torch reference that every rank computes from every rank's inputs (each rank replays every rank's seeded
generator): what each rank must receive by the definition of the layouts (flat: (source rank, token) order with
local expert ids; expert_major: experts in order, then sources, tokens and top-k columns), and the combined output
and its gradients by autograd through plain torch ops. Both layouts, float32/bfloat16/float16, K in 1, 2, 3, 8,
routings with masked (-1) entries and skewed expert loads, 2/3/4 ranks (CPU over gloo); then the errors.
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
    max_recv = N_MAX * world * L
    ts = TokenSwitch(dist.group.WORLD, L * world, N_MAX, max_recv, H * 4, max_topk=K_MAX)
    for k in (1, 2, 3, 8):
        for case in (0, 1):
            what = f"{layout} {dtype_name} K={k} case={case} rank {me}"
            allin = [_inputs(world, r, k, case, dtype) for r in range(world)]
            mine = allin[me]
            counts = torch.zeros(L + 1, dtype=torch.int64)
            routing = ts.create_routing(mine["idx"], counts, layout=layout)
            rows = _expected(allin, me, k, layout)
            assert TokenSwitch.num_recv_rows(routing) == len(rows), what
            want = [
                sum(int((inp["idx"] == me * L + le).sum()) for inp in allin) for le in range(L)
            ]
            assert counts[:L].tolist() == want, f"{what}: per_expert_token_counts {counts} != {want}"
            assert TokenSwitch.expert_offsets(routing).tolist() == torch.tensor(want).cumsum(0).tolist()

            x = mine["x"].clone().requires_grad_(True)
            out_x, out_w, out_i = ts.dispatch(routing, x, mine["w"], max_recv)
            assert out_x.shape == (max_recv, H) and out_x.dtype == dtype, what
            exp_x = torch.stack([allin[s]["x"][t] for s, t, _ in rows]) if rows else out_x[:0]
            torch.testing.assert_close(out_x[: len(rows)].detach(), exp_x, rtol=0, atol=0, msg=what)
            if layout == "flat":
                assert out_i is not None and out_w.shape == (max_recv, k), what
                for r, (s, t, _) in enumerate(rows):
                    e = allin[s]["idx"][t]
                    local = (e >= 0) & (e // L == me)
                    exp_i = torch.where(local, e - me * L, torch.full_like(e, -1))
                    exp_w = torch.where(local, allin[s]["w"][t], torch.zeros_like(allin[s]["w"][t]))
                    assert torch.equal(out_i[r], exp_i), f"{what}: out_topk_idx row {r}"
                    assert torch.equal(out_w[r], exp_w), f"{what}: out_topk_weights row {r}"
                local_ids = out_i.clamp(min=0) + me * L
                coef = torch.where(out_i >= 0, out_w * _scale(local_ids), torch.zeros_like(out_w)).sum(1)
            else:
                assert out_i is None and out_w.shape == (max_recv,), what
                exp_w = torch.tensor([float(allin[s]["w"][t, j]) for s, t, j in rows])
                assert torch.equal(out_w[: len(rows)], exp_w), f"{what}: out_topk_weights"
                ends = TokenSwitch.expert_offsets(routing).tolist()
                expert_of_row = torch.zeros(max_recv, dtype=torch.int64)
                start = 0
                for le, end in enumerate(ends):
                    expert_of_row[start:end] = me * L + le
                    start = end
                coef = out_w * _scale(expert_of_row)
            # The experts: row * (its weights times the expert's scale), in the token dtype.
            y = (out_x.float() * coef[:, None]).to(dtype)
            combined = ts.combine(routing, y)
            (combined.float() * mine["grad"]).sum().backward()

            # Reference: plain torch on this rank's own tokens (combine is dispatch's adjoint).
            xr = mine["x"].clone().requires_grad_(True)
            e = mine["idx"]
            c = torch.where(e >= 0, mine["w"] * _scale(e.clamp(min=0)), torch.zeros_like(mine["w"])).sum(1)
            ref = xr.float() * c[:, None]
            (ref * mine["grad"]).sum().backward()
            torch.testing.assert_close(combined.float(), ref.detach(), **_tol(dtype), msg=what)
            assert x.grad is not None and x.grad.dtype == dtype, what
            torch.testing.assert_close(x.grad.float(), xr.grad.float(), **_tol(dtype), msg=what)
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


def test_ep_docs_example(tmp_path) -> None:  # noqa: ANN001
    """docs/EP.md's example runs as written (2 processes, gloo), and every rank reports."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "EP.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.S)
    assert code is not None, "docs/EP.md has no python block"
    script = tmp_path / "ep_example.py"
    script.write_text(code.group(1))
    env = dict(os.environ, MASTER_PORT=str(29000 + os.getpid() % 1000))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(re.findall(r"rank \d: \d+ \(token, expert\) rows received", out.stdout)) == 2, out.stdout
