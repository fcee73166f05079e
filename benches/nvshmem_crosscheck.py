"""Cross-check of the op family against PyTorch's own NVSHMEM backend (issue #33), in two halves.

``capture`` runs every op of the family with random shapes, splits, offsets, ``major_align`` values and dtypes at
W=2 (two processes it spawns itself) and saves, per rank, each case's parameters, the inputs that rank made and the
outputs it got: ``OUT/rank0.pt`` and ``OUT/rank1.pt``. With ``--backend nvshmem`` it runs on two CUDA GPUs with
PyTorch's CUDA wheel and its NVSHMEM package (NCCL process group, ``symm_mem.set_backend("NVSHMEM")``); with
``--backend xpushmem`` on CPU tensors with ``import xpushmem.torch`` over gloo (what ``compare`` replays through,
used here to test the harness itself). ``--timing`` adds ``OUT/timing.csv``: medians of ``all_to_all_vdev`` and
``all_to_all_vdev_2d`` per size, for the performance page's reference point (label it as the other vendor's
hardware).

``--one-gpu`` runs both ranks on ``cuda:0`` of a machine with one GPU, over a gloo process group (NCCL refuses two
ranks on one device). NVSHMEM then needs the CUDA MPS daemon (``nvidia-cuda-mps-control -d``) and each process's
``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` at 50 (full multi-process-per-GPU support; without MPS it refuses to create
teams); its cooperative-launch kernels (the tile reductions) fail to launch there, so leave them out with ``--ops``.
``--ops`` takes a comma-separated subset of the family; ops the installed torch lacks (``symm_mem.get``, the
``get_out`` form, came after torch 2.11) are left out with a note.

``compare OUT`` replays each rank's saved inputs through xpushmem on CPU (gloo, W=2), checks that it regenerates
the same inputs from the seeds, and compares the outputs: data movement, splits and offsets bit for bit, the tile
reductions with ``torch.testing.assert_close``'s tolerance for the dtype (the reduction order may differ). It
prints one line per case (``equal`` or the difference) and exits 1 if any case differs.

    python benches/nvshmem_crosscheck.py capture --backend nvshmem --out /tmp/xc --cases 200 --timing  # 2 GPUs
    python benches/nvshmem_crosscheck.py compare /tmp/xc                                           # here
    nvidia-cuda-mps-control -d; CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 python benches/nvshmem_crosscheck.py capture \
        --backend nvshmem --one-gpu --ops put,get,broadcast,put_with_signal,all_to_all,all_to_all_vdev,\
all_to_all_vdev_2d,all_to_all_vdev_2d_offset --out /tmp/xc --cases 220 --timing                    # 1 GPU
"""

from __future__ import annotations

import argparse
import csv
import os
import queue
import socket
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

W = 2
MOVE_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.uint8]
TILE_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
OPS = [
    "put",
    "get",
    "get_out",
    "broadcast",
    "put_with_signal",
    "all_to_all",
    "all_to_all_vdev",
    "all_to_all_vdev_2d",
    "all_to_all_vdev_2d_offset",
    "tile_reduce",
    "multi_root_tile_reduce",
]
REDUCTIONS = {"tile_reduce", "multi_root_tile_reduce"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(rank: int, backend: str, port: int, one_gpu: bool = False) -> torch.device:
    """The process group and symmetric-memory backend of one rank; its device (``one_gpu``: both ranks on cuda:0,
    gloo)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch.distributed._symmetric_memory as symm_mem

    if backend == "nvshmem":
        device = torch.device("cuda", 0 if one_gpu else rank)
        torch.cuda.set_device(device)
        if one_gpu:
            dist.init_process_group("gloo", rank=rank, world_size=W)
        else:
            dist.init_process_group("nccl", rank=rank, world_size=W, device_id=device)
    else:
        dist.init_process_group("gloo", rank=rank, world_size=W)
        import xpushmem.torch  # noqa: F401  (registers the backend)

        device = torch.device("cpu")
    symm_mem.set_backend("NVSHMEM")
    return device


def barrier() -> None:
    """``dist.barrier()`` once this rank's device work is done: NCCL's barrier waits for the device, gloo's (the
    one-GPU form) does not, and a peer could read a buffer before this rank's kernel wrote it."""
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    dist.barrier()


def available_ops(wanted: list[str]) -> list[str]:
    """``wanted`` less the ops the installed torch lacks (each named on stderr)."""
    import torch.distributed._symmetric_memory as symm_mem

    have = {"get_out": hasattr(symm_mem, "get")}
    for op in wanted:
        if op not in OPS:
            raise SystemExit(f"--ops: unknown op {op!r} (the family: {', '.join(OPS)})")
        if not have.get(op, True):
            print(f"capture: {op} left out: torch {torch.__version__} lacks it", file=sys.stderr)
    return [op for op in wanted if have.get(op, True)]


def params(case: int, seed: int, ops: list[str] = OPS) -> dict:
    """The case's parameters, the same on every rank (a generator seeded by the case only) for ops ``ops``."""
    g = torch.Generator().manual_seed(seed * 100_003 + case)

    def pick(xs):  # noqa: ANN001, ANN202
        return xs[int(torch.randint(len(xs), (1,), generator=g))]

    def draw(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    op = ops[case % len(ops)]
    p = {"op": op, "case": case, "dtype": pick(MOVE_DTYPES), "numel": draw(1, 5000), "root": draw(0, W - 1)}
    if op == "get_out":
        p["offset"] = draw(0, p["numel"] - 1)
        p["size"] = draw(0, p["numel"] - p["offset"])
    if op in ("all_to_all_vdev", "all_to_all_vdev_2d", "all_to_all_vdev_2d_offset"):
        p["experts"] = 1 if op == "all_to_all_vdev" else draw(1, 6)
        p["max_split"] = draw(1, 300)
        p["major_align"] = pick([None, 1, 2, 8, 16, 64]) if op == "all_to_all_vdev_2d" else None
    if op in REDUCTIONS:
        p["dtype"] = pick(TILE_DTYPES)
        p["tile"] = pick([16, 32, 64, 128])
        p["roots"] = pick([[0], [1], [0, 1]])
    return p


def data(p: dict, rank: int, seed: int, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """Random contents of `shape` for this rank and case (on CPU, then moved)."""
    g = torch.Generator().manual_seed((seed * 100_003 + p["case"]) * 16 + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    hi = 256 if dtype == torch.uint8 else 1 << 40
    return torch.randint(0, hi, shape, generator=g, dtype=torch.int64).to(dtype)


def splits(p: dict, rank: int, seed: int, n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed((seed * 100_003 + p["case"]) * 16 + 8 + rank)
    s = torch.randint(0, p["max_split"] + 1, (n,), generator=g, dtype=torch.int64)
    s[torch.rand(n, generator=g) < 0.2] = 0  # empty chunks too
    return s


def run_case(p: dict, rank: int, seed: int, device: torch.device) -> tuple[dict, dict]:
    """Run case `p` on this rank: (inputs, outputs), every tensor on CPU."""
    import torch.distributed._symmetric_memory as symm_mem

    grp = dist.group.WORLD.group_name
    ops = torch.ops.symm_mem
    op, dtype, numel, root = p["op"], p["dtype"], p["numel"], p["root"]
    peer = 1 - rank
    ins: dict = {}
    outs: dict = {}

    def sym(shape, dt, fill=None):  # noqa: ANN001, ANN202
        t = symm_mem.empty(shape, dtype=dt, device=device)
        if isinstance(fill, torch.Tensor):
            t.copy_(fill.to(device))
        elif fill is not None:
            t.fill_(fill)
        return t

    if op in ("put", "get", "get_out", "broadcast", "put_with_signal", "all_to_all"):
        n = numel * W if op == "all_to_all" else numel
        src = data(p, rank, seed, (n,), dtype)
        ins["src"] = src
        t = sym(n, dtype, src)
        hdl = symm_mem.rendezvous(t, group=grp)
        if op == "put":
            barrier()
            if rank == 0:
                ops.nvshmem_put(t, peer)
            barrier()
            outs["t"] = t.cpu()
        elif op == "get":
            barrier()
            if rank == 0:
                ops.nvshmem_get(t, peer)
            barrier()
            outs["t"] = t.cpu()
        elif op == "get_out":
            dst = torch.full((p["size"],), -1 if dtype.is_signed else 0, dtype=dtype, device=device)
            barrier()
            symm_mem.get(dst, hdl, peer=peer, offset=p["offset"])
            barrier()
            outs["dst"] = dst.cpu()
        elif op == "broadcast":
            barrier()
            ops.nvshmem_broadcast(t, root, grp)
            barrier()
            outs["t"] = t.cpu()
        elif op == "put_with_signal":
            sig = hdl.get_signal_pad(rank)
            value = 1 + p["case"] % 7
            barrier()
            if rank == 0:
                ops.nvshmem_put_with_signal(t, sig, value, 1)
            else:
                ops.nvshmem_wait_for_signal(sig, value, 0)
            outs["t"] = t.cpu()
            barrier()
            sig.zero_()
            barrier()
        else:
            out = sym(n, dtype, 0)
            symm_mem.rendezvous(out, group=grp)
            barrier()
            ops.nvshmem_all_to_all(t, out, grp)
            barrier()
            outs["out"] = out.cpu()
        return ins, outs

    if op.startswith("all_to_all_vdev"):
        ne = p["experts"]
        nsplits = ne * W
        s = splits(p, rank, seed, nsplits if op != "all_to_all_vdev" else W)
        max_inp = p["max_split"] * len(s) + (p["max_split"] * len(s) if op.endswith("offset") else 0)
        max_out = max_inp * W + (64 * nsplits)  # room for major_align's padding
        inp = sym(max_inp, dtype, data(p, rank, seed, (max_inp,), dtype))
        out = sym(max_out, dtype, 0)
        ins.update(inp=inp.cpu(), splits=s)
        rows = 2
        splits_offsets = sym((2, len(s)), torch.int64, -1)
        if op == "all_to_all_vdev_2d_offset":
            # Input chunks in expert-major order at random non-overlapping offsets (gaps between them).
            g = torch.Generator().manual_seed((seed * 100_003 + p["case"]) * 16 + 12 + rank)
            gaps = torch.randint(0, p["max_split"] + 1, (len(s),), generator=g, dtype=torch.int64)
            offs = torch.cumsum(gaps + s, 0) - s
            ins["offsets"] = offs
            in_so = sym((2, len(s)), torch.int64)
            in_so[0].copy_(s.to(device))
            in_so[1].copy_(offs.to(device))
            barrier()
            ops.all_to_all_vdev_2d_offset(inp, out, in_so, splits_offsets, grp)
        else:
            in_splits = sym(len(s), torch.int64, s)
            barrier()
            if op == "all_to_all_vdev":
                ops.all_to_all_vdev(inp, out, in_splits, splits_offsets, grp)
            else:
                ops.all_to_all_vdev_2d(inp, out, in_splits, splits_offsets, grp, major_align=p["major_align"])
        barrier()
        outs.update(out=out.cpu(), splits_offsets=splits_offsets.cpu()[:rows])
        return ins, outs

    # Tile reductions over a (2*tile) x (2*tile) matrix: tile_reduce of one tile to `root`, multi_root of the
    # roots' tiles (rank r's tile is column r).
    tile = p["tile"]
    full = data(p, rank, seed, (2 * tile, 2 * tile), dtype)
    ins["full"] = full
    inp = sym((2 * tile, 2 * tile), dtype, full)
    out = sym((2 * tile, 2 * tile), dtype, 0)
    barrier()
    if op == "tile_reduce":
        s = slice(tile // 2, tile // 2 + tile)
        ops.tile_reduce(inp[s, s], out[s, s], root, grp)
    else:
        cols = [slice(r * tile, (r + 1) * tile) for r in range(W)]
        in_tiles = [inp[:tile, cols[r]] for r in p["roots"]]
        ops.multi_root_tile_reduce(in_tiles, out[:tile, cols[rank]], p["roots"], grp)
    barrier()
    outs["out"] = out.cpu()
    return ins, outs


def timing(rank: int, device: torch.device) -> list[list]:
    """Medians (microseconds) of all_to_all_vdev and _2d per bytes per peer; every rank sends the same split."""
    import torch.distributed._symmetric_memory as symm_mem

    grp = dist.group.WORLD.group_name
    rows = []
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for per_peer in [8, 64, 512, 4096, 32768, 262144, 2097152]:
        n = per_peer // 4
        for op, ne in [("all_to_all_vdev", 1), ("all_to_all_vdev_2d", 4)]:
            nsplits = ne * W
            chunk = max(n // ne, 1)
            inp = symm_mem.empty(chunk * nsplits, dtype=torch.float32, device=device).fill_(rank)
            out = symm_mem.empty(chunk * nsplits * W + 64 * nsplits, dtype=torch.float32, device=device)
            sp = symm_mem.empty(nsplits, dtype=torch.int64, device=device).fill_(chunk)
            so = symm_mem.empty((2, nsplits), dtype=torch.int64, device=device)
            times = []
            for it in range(30):
                barrier()  # the device is idle once it returns
                t0 = time.perf_counter()
                if op == "all_to_all_vdev":
                    torch.ops.symm_mem.all_to_all_vdev(inp, out, sp, so, grp)
                else:
                    torch.ops.symm_mem.all_to_all_vdev_2d(inp, out, sp, so, grp)
                sync()
                if it >= 5:
                    times.append((time.perf_counter() - t0) * 1e6)
            rows.append([op, per_peer, f"{statistics.median(times):.2f}", device.type])
    return rows


def capture_rank(rank: int, args: argparse.Namespace, port: int) -> None:
    device = setup(rank, args.backend, port, args.one_gpu)
    cases = []
    for case in range(args.cases):
        p = params(case, args.seed, args.ops)
        ins, outs = run_case(p, rank, args.seed, device)
        cases.append({"params": p, "inputs": ins, "outputs": outs})
    out = Path(args.out)
    meta = {
        "backend": args.backend,
        "torch": torch.__version__,
        "seed": args.seed,
        "world": W,
        "ops": args.ops,
        "one_gpu": args.one_gpu,
    }
    torch.save({"meta": meta, "cases": cases}, out / f"rank{rank}.pt")
    if args.timing:
        rows = timing(rank, device)
        if rank == 0:
            with open(out / "timing.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["op", "bytes_per_peer", "median_us", "device"])
                w.writerows(rows)
    dist.destroy_process_group()


def compare_rank(rank: int, args: argparse.Namespace, port: int, verdicts: "mp.Queue") -> None:
    device = setup(rank, "xpushmem", port)
    saved = torch.load(Path(args.dir) / f"rank{rank}.pt", weights_only=False)
    seed = saved["meta"]["seed"]
    found = []
    for c in saved["cases"]:
        p = c["params"]
        ins, outs = run_case(p, rank, seed, device)
        diffs = []
        for k, v in c["inputs"].items():
            if not torch.equal(ins[k], v):
                diffs.append(f"input {k} not regenerated (seeds differ?)")
        for k, want in c["outputs"].items():
            got = outs[k]
            if got.shape != want.shape or got.dtype != want.dtype:
                diffs.append(f"{k}: shape/dtype {tuple(got.shape)} {got.dtype} vs {tuple(want.shape)} {want.dtype}")
            elif p["op"] in REDUCTIONS and k == "out":
                try:
                    torch.testing.assert_close(got, want)
                except AssertionError as e:
                    diffs.append(f"{k}: {str(e).splitlines()[0]}")
            elif not torch.equal(got, want):
                bad = (got != want).nonzero()
                diffs.append(f"{k}: {bad.shape[0]} elements differ, first at {bad[0].tolist()}")
        desc = {k: v for k, v in p.items() if k not in ("case",)}
        found.append((p["case"], desc, diffs))
    # One item per rank, which the parent reads before it joins: a child's queued items must reach the parent
    # before the child can end, so many small items and a join first would wait on each other.
    verdicts.put((rank, found))
    dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("--backend", choices=["nvshmem", "xpushmem"], required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--cases", type=int, default=len(OPS) * 10)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--timing", action="store_true")
    c.add_argument("--one-gpu", action="store_true", help="both ranks on cuda:0 over gloo (needs CUDA MPS)")
    c.add_argument("--ops", default=",".join(OPS), help="comma-separated ops of the family (default: all)")
    k = sub.add_parser("compare")
    k.add_argument("dir")
    args = ap.parse_args()
    port = free_port()
    if args.cmd == "capture":
        args.ops = available_ops([o for o in args.ops.split(",") if o])
        if not args.ops:
            raise SystemExit("capture: no op left to run")
        Path(args.out).mkdir(parents=True, exist_ok=True)
        mp.spawn(capture_rank, args=(args, port), nprocs=W)
        print(f"captured {args.cases} cases with {args.backend} into {args.out}")
        return 0
    ctx = mp.get_context("spawn")
    verdicts = ctx.Queue()
    procs = [ctx.Process(target=compare_rank, args=(r, args, port, verdicts)) for r in range(W)]
    for pr in procs:
        pr.start()
    results: dict = {}
    for _ in range(W):
        rank, found = None, None
        while found is None:
            try:
                rank, found = verdicts.get(timeout=5)
            except queue.Empty:
                if any(pr.exitcode not in (None, 0) for pr in procs):
                    print("compare: a rank failed", file=sys.stderr)
                    for pr in procs:
                        pr.kill()
                    return 2
        for case, desc, diffs in found:
            results.setdefault(case, (desc, []))[1].extend(f"rank {rank}: {d}" for d in diffs)
    for pr in procs:
        pr.join()
    if any(pr.exitcode != 0 for pr in procs):
        print("compare: a rank failed", file=sys.stderr)
        return 2
    differ = 0
    for case in sorted(results):
        desc, diffs = results[case]
        differ += bool(diffs)
        print(f"case {case} {desc}: " + ("equal" if not diffs else "; ".join(diffs)))
    print(f"{len(results)} cases, {len(results) - differ} equal, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
