"""Expert-parallel dispatch + combine per step: xpushmem's TokenSwitch (host path, CPU tensors) against the same
exchange built from ``torch.distributed.all_to_all_single`` on gloo (issue #29's benchmark).

    python benches/ep_bench.py --ranks 2 --tokens 128,512,4096 --hidden 1024,7168 --topk 8 [--csv out.csv]

One step = routing + dispatch + combine of ``tokens`` bf16 tokens per rank, top-``topk`` of ``8 * ranks`` experts
(uniform random routing), flat layout: each token goes once to every rank holding one of its experts, the experts'
rows come back and are summed in the token's order. The reference does the same with plain torch: one
``all_to_all_single`` of the per-rank counts, one of the packed rows (token, f32 weights, int64 expert ids, so that
both move the same metadata), one back for combine, then an ``index_add_`` in f32. Both are checked against each
other on the first step. Time: each step between barriers, the slowest rank's median over ``--iters`` steps.
Environment: ``XPUSHMEM_LIB_DIR`` (libxpushmem.so), ``XPUSHMEM_SYMMETRIC_SIZE`` (default here: 2G).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _routing(n: int, k: int, experts: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    idx = torch.rand(n, experts, generator=g).topk(k, dim=-1).indices
    return idx, torch.rand(n, k, generator=g)


def _reference_step(x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, world: int, local: int) -> torch.Tensor:
    """Dispatch and combine with all_to_all_single (flat layout); the experts are the identity."""
    n, k = idx.shape
    in_rank = torch.zeros(n, world + 1, dtype=torch.bool)
    in_rank.scatter_(1, torch.where(idx >= 0, idx // local, world), True)
    in_rank = in_rank[:, :world]
    dest, tok = in_rank.t().nonzero(as_tuple=True)  # sorted by destination rank, then token
    send_counts = in_rank.sum(0)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    packed = torch.cat([x[tok].view(torch.uint8), w[tok].view(torch.uint8), idx[tok].view(torch.uint8)], dim=1)
    recv = packed.new_empty(int(recv_counts.sum()), packed.size(1))
    dist.all_to_all_single(recv, packed, recv_counts.tolist(), send_counts.tolist())
    hb = x.size(1) * x.element_size()
    rows = recv[:, :hb].contiguous().view(x.dtype)  # the experts' outputs (identity)
    back = rows.new_empty(tok.numel(), x.size(1))
    dist.all_to_all_single(back, rows, send_counts.tolist(), recv_counts.tolist())
    out = torch.zeros(n, x.size(1), dtype=torch.float32)
    out.index_add_(0, tok, back.float())
    return out.to(x.dtype)


def _timed(fn, iters: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(iters):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    med = torch.tensor([statistics.median(times)])
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    return float(med)


def _worker(rank: int, world: int, args: argparse.Namespace) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    os.environ.setdefault("XPUSHMEM_SYMMETRIC_SIZE", "2G")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from xpushmem.torch import TokenSwitch

    experts = 8 * world
    local = experts // world
    sizes = [(n, h) for n in args.tokens for h in args.hidden]
    max_n, max_h = max(n for n, _ in sizes), max(h for _, h in sizes)
    ts = TokenSwitch(dist.group.WORLD, experts, max_n, max_n * world, max_h * 2, max_topk=args.topk)
    rows = []
    for n, h in sizes:
        idx, w = _routing(n, args.topk, experts, 1000 * rank + n + h)
        x = torch.randn(n, h).to(torch.bfloat16)

        def ours() -> torch.Tensor:
            r = ts.create_routing(idx, layout="flat")
            # Outputs sized to the received rows (upstream's dispatch zero-fills max_recv_tokens rows otherwise).
            out_x, _, _ = ts.dispatch(r, x, w, TokenSwitch.num_recv_rows(r))
            return ts.combine(r, out_x)

        got, want = ours(), _reference_step(x, idx, w, world, local)
        ok = torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2)
        for _ in range(args.warmup):
            ours()
            _reference_step(x, idx, w, world, local)
        t_ours = _timed(ours, args.iters)
        t_ref = _timed(lambda: _reference_step(x, idx, w, world, local), args.iters)
        rows.append((n, h, t_ours, t_ref, ok))
    ts.close()
    if rank == 0:
        print(f"ranks {world}, top-{args.topk} of {experts} experts, bf16, flat layout (ms per dispatch+combine step)")
        print(f"{'tokens':>7} {'hidden':>7} {'xpushmem':>10} {'a2a_single':>11} {'speedup':>8}  check")
        for n, h, a, b, ok in rows:
            print(f"{n:>7} {h:>7} {a * 1e3:>10.3f} {b * 1e3:>11.3f} {b / a:>7.2f}x  {'ok' if ok else 'MISMATCH'}")
        if args.csv:
            with open(args.csv, "w") as f:
                f.write("ranks,tokens,hidden,topk,xpushmem_ms,all_to_all_single_ms,speedup,check\n")
                for n, h, a, b, ok in rows:
                    f.write(f"{world},{n},{h},{args.topk},{a * 1e3:.4f},{b * 1e3:.4f},{b / a:.3f},{ok}\n")
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ints = lambda s: [int(v) for v in s.split(",")]  # noqa: E731
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--tokens", type=ints, default=[128, 512, 4096])
    p.add_argument("--hidden", type=ints, default=[1024, 7168])
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--port", type=int, default=29533)
    p.add_argument("--csv", default="")
    args = p.parse_args()
    mp.spawn(_worker, args=(args.ranks, args), nprocs=args.ranks)


if __name__ == "__main__":
    main()
