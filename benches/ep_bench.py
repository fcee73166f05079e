"""Expert-parallel dispatch + combine per step: xpushmem's TokenSwitch (host path, CPU tensors) against the same
exchange built from ``torch.distributed.all_to_all_single`` on gloo, from xpushmem's own ``all_to_all_vdev_2d`` /
``all_to_all_vdev_2d_offset`` (the symm_mem MoE ops, as torchtitan's NVSHMEM path uses them) and, under mpirun with
mpi4py, from MPI's ``Alltoallv`` (issue #29's benchmark).

    python benches/ep_bench.py --ranks 2 --tokens 128,512,4096 --hidden 1024,7168 --topk 8 [--csv out.csv]
    mpirun -n 8 python benches/ep_bench.py --mpi ...      # adds the MPI column (needs mpi4py)
    bash benches/ep_bench.sh                                # the issue's table at 8 and 16 ranks (a core per rank)

One step = routing + dispatch + combine of ``tokens`` bf16 tokens per rank, top-``topk`` of ``8 * ranks`` experts
(uniform random routing), the experts being the identity:
- xpushmem: ``TokenSwitch`` in the flat layout: each token goes once to every rank holding one of its experts, the
  rows come back and are summed in the token's order;
- all_to_all_single (and MPI): the same with plain torch: one exchange of the per-rank counts, one of the packed
  rows (token, f32 weights, int64 expert ids, so that both move the same metadata), one back for combine, then an
  ``index_add_`` in f32;
- all_to_all_vdev_2d: one row per (token, expert) pair (the op's layout is per expert), packed by expert, dispatched
  expert-major with ``all_to_all_vdev_2d``, returned with ``all_to_all_vdev_2d_offset``, summed with ``index_add_``;
  its symmetric buffers are allocated once, for the largest size.
Each is checked against a pure-torch result on the first step. Time: each step between barriers, the slowest rank's
median over ``--iters`` steps. Environment: ``XPUSHMEM_LIB_DIR`` (libxpushmem.so), ``XPUSHMEM_SYMMETRIC_SIZE``
(default here: 4G).
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
    n = idx.size(0)
    _dest, tok, send_counts = _send_plan(idx, world, local)
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


def _send_plan(idx: torch.Tensor, world: int, local: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One row per (token, destination rank): (destination, token) sorted by destination then token, and the rows
    sent to each rank."""
    n = idx.size(0)
    in_rank = torch.zeros(n, world + 1, dtype=torch.bool)
    in_rank.scatter_(1, torch.where(idx >= 0, idx // local, world), True)
    in_rank = in_rank[:, :world]
    dest, tok = in_rank.t().nonzero(as_tuple=True)
    return dest, tok, in_rank.sum(0)


def _mpi_step(x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, world: int, local: int) -> torch.Tensor:
    """_reference_step over MPI: mpi4py's Alltoall of the counts, Alltoallv of the packed rows and back."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    n = idx.size(0)
    _dest, tok, send_counts = _send_plan(idx, world, local)
    recv_counts = torch.empty_like(send_counts)
    comm.Alltoall(send_counts.numpy(), recv_counts.numpy())
    packed = torch.cat([x[tok].view(torch.uint8), w[tok].view(torch.uint8), idx[tok].view(torch.uint8)], dim=1)
    recv = packed.new_empty(int(recv_counts.sum()), packed.size(1))

    def layout(counts: torch.Tensor, b: int) -> tuple[list[int], list[int]]:
        c = counts * b
        return c.tolist(), (c.cumsum(0) - c).tolist()

    def alltoallv(src: torch.Tensor, dst: torch.Tensor, out_counts: torch.Tensor, in_counts: torch.Tensor) -> None:
        b = src.size(1)
        comm.Alltoallv([src.numpy(), *layout(out_counts, b), MPI.BYTE], [dst.numpy(), *layout(in_counts, b), MPI.BYTE])

    alltoallv(packed, recv, send_counts, recv_counts)
    hb = x.size(1) * x.element_size()
    rows = recv[:, :hb].contiguous()  # the experts' outputs (identity)
    back = rows.new_empty(tok.numel(), hb)
    alltoallv(rows, back, recv_counts, send_counts)
    out = torch.zeros(n, x.size(1), dtype=torch.float32)
    out.index_add_(0, tok, back.view(x.dtype).float())
    return out.to(x.dtype)


class _Vdev2d:
    """Dispatch + combine from all_to_all_vdev_2d / _2d_offset over symmetric buffers allocated once: ``max_pairs``
    rows sent and ``max_recv`` received (the most any rank receives, over the sizes), of up to ``max_h`` bf16."""

    def __init__(self, experts: int, max_pairs: int, max_recv: int, max_h: int) -> None:
        import torch.distributed._symmetric_memory as symm_mem

        symm_mem.set_backend("NVSHMEM")
        self.experts, self.group = experts, dist.group.WORLD.group_name
        self.inp = symm_mem.empty(max_pairs * max_h, dtype=torch.bfloat16)
        self.out = symm_mem.empty(max_recv * max_h, dtype=torch.bfloat16)
        self.back = symm_mem.empty(max_pairs * max_h, dtype=torch.bfloat16)
        self.splits = symm_mem.empty(experts, dtype=torch.int64)
        self.oso = symm_mem.empty((2, experts), dtype=torch.int64)
        self.boso = symm_mem.empty((2, experts), dtype=torch.int64)
        for t in (self.inp, self.out, self.back, self.splits, self.oso, self.boso):
            symm_mem.rendezvous(t, group=dist.group.WORLD)

    def step(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        n, h = x.shape
        flat = idx.flatten()
        valid = (flat >= 0).nonzero().squeeze(1)
        order = valid[flat[valid].argsort(stable=True)]  # pairs by global expert id: rank-major, expert-major
        tok = order // idx.size(1)
        p = tok.numel()
        self.splits.copy_(torch.bincount(flat[order], minlength=self.experts))
        rows = lambda t: t[: t.numel() // h * h].view(-1, h)  # noqa: E731
        inp = rows(self.inp)
        torch.index_select(x, 0, tok, out=inp[:p])
        out = rows(self.out)
        torch.ops.symm_mem.all_to_all_vdev_2d(inp, out, self.splits, self.oso, self.group)
        # The experts (identity) would run here on out, expert by expert (oso row 1: their offsets).
        torch.ops.symm_mem.all_to_all_vdev_2d_offset(out, rows(self.back), self.oso, self.boso, self.group)
        res = torch.zeros(n, h, dtype=torch.float32)
        res.index_add_(0, tok, self.back[: p * h].view(p, h).float())
        return res.to(x.dtype)


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


def _received_pairs(sizes: list[tuple[int, int]], k: int, experts: int, world: int, rank: int) -> int:
    """The most (token, expert) pairs any rank receives in any of the sizes' routings (all_to_all_vdev_2d's out)."""
    local = experts // world
    most = 0
    for n, h in sizes:
        idx, _ = _routing(n, k, experts, 1000 * rank + n + h)
        per_rank = torch.bincount(idx[idx >= 0] // local, minlength=world)
        dist.all_reduce(per_rank)
        most = max(most, int(per_rank.max()))
    return most


def _worker(rank: int, world: int, args: argparse.Namespace) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    os.environ.setdefault("XPUSHMEM_SYMMETRIC_SIZE", "4G")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from xpushmem.torch import TokenSwitch

    experts = 8 * world
    local = experts // world
    k = args.topk
    sizes = [(n, h) for n in args.tokens for h in args.hidden]
    max_n, max_h = max(n for n, _ in sizes), max(h for _, h in sizes)
    ts = TokenSwitch(dist.group.WORLD, experts, max_n, max_n * world, max_h * 2, max_topk=k)
    vdev = _Vdev2d(experts, max_n * k, _received_pairs(sizes, k, experts, world, rank), max_h)
    rows = []
    for n, h in sizes:
        idx, w = _routing(n, k, experts, 1000 * rank + n + h)
        x = torch.randn(n, h).to(torch.bfloat16)
        # Pure-torch results (identity experts): flat = each token times its number of destination ranks, pairs =
        # times its number of experts.
        ndest = torch.zeros(n, world, dtype=torch.bool).scatter_(1, idx // local, True).sum(1)
        npairs = (idx >= 0).sum(1)

        def ours() -> torch.Tensor:
            r = ts.create_routing(idx, layout="flat")
            # Outputs sized to the received rows (upstream's dispatch zero-fills max_recv_tokens rows otherwise).
            out_x, _, _ = ts.dispatch(r, x, w, TokenSwitch.num_recv_rows(r))
            return ts.combine(r, out_x)

        methods = {
            "xpushmem": (ours, ndest),
            "a2a_single": (lambda: _reference_step(x, idx, w, world, local), ndest),
            "vdev_2d": (lambda: vdev.step(x, idx), npairs),
        }
        if args.mpi:
            methods["mpi"] = (lambda: _mpi_step(x, idx, w, world, local), ndest)
        times, ok = {}, True
        for name, (fn, factor) in methods.items():
            want = (x.float() * factor[:, None].float()).to(torch.bfloat16).float()
            ok &= torch.allclose(fn().float(), want, rtol=2e-2, atol=2e-2)
            for _ in range(args.warmup):
                fn()
            times[name] = _timed(fn, args.iters)
        rows.append((n, h, times, ok))
    ts.close()
    if rank == 0:
        names = list(rows[0][2]) if rows else []
        print(f"ranks {world}, top-{k} of {experts} experts, bf16 (ms per dispatch+combine step; speedup = "
              "xpushmem's time over each other's)")
        print(f"{'tokens':>7} {'hidden':>7} " + " ".join(f"{m:>11}" for m in names)
              + " " + " ".join(f"{'vs ' + m:>14}" for m in names[1:]) + "  check")
        for n, h, t, ok in rows:
            print(f"{n:>7} {h:>7} " + " ".join(f"{t[m] * 1e3:>11.3f}" for m in names) + " "
                  + " ".join(f"{t[m] / t['xpushmem']:>13.2f}x" for m in names[1:]) + f"  {'ok' if ok else 'MISMATCH'}")
        if args.csv:
            with open(args.csv, "w") as f:
                f.write("ranks,tokens,hidden,topk," + ",".join(f"{m}_ms" for m in names) + ",check\n")
                for n, h, t, ok in rows:
                    f.write(f"{world},{n},{h},{k}," + ",".join(f"{t[m] * 1e3:.4f}" for m in names) + f",{ok}\n")
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
    p.add_argument("--mpi", action="store_true", help="started by mpirun: add the MPI Alltoallv column (mpi4py)")
    args = p.parse_args()
    if args.mpi:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        _worker(comm.Get_rank(), comm.Get_size(), args)
    else:
        mp.spawn(_worker, args=(args.ranks, args), nprocs=args.ranks)


if __name__ == "__main__":
    main()
