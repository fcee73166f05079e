"""Drop-in fidelity (issue #30, items 2, 3, 5, 6, 7): what PyTorch's own tests expect at the edges of the symmetric
memory API, on CPU tensors over gloo at world sizes 2 and 4 (as test_symm_mem_port.py).

* ``rendezvous`` on a tensor that is not symmetric returns ``None`` (upstream's ``test_empty_strided_p2p``), and
  ``is_symm_mem_tensor`` and ``rendezvous`` agree on what counts;
* a process without a process group allocates: a world of one (``SymmMemSingleProcTest.test_memset32``);
* a group with ``use_pg_for_symm_mem_rendezvous`` set rendezvouses through its allgather, not its store
  (``test_rendezvous_via_pg_allgather``);
* an allocation on a group (``empty_strided_p2p(..., group_name)``) is made by that group's ranks only, the others
  never call, and rendezvous on it works among them; a group name recycled by a destroyed and recreated world (other
  ranks under the same name) allocates and rendezvouses as a new group (``test_rendezvous_after_group_name_recycled``,
  at the largest world size, leaving the pool a new world);
* ``symm_mem::_async_input_mm`` exists with upstream's schema and computes ``torch.mm``, consuming ``a``'s chunks as
  their signals arrive, in upstream's order from the pivot.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from conftest import world_sizes
from torch._C._distributed_c10d import _SymmetricMemory
from torch.distributed._functional_collectives import all_gather_single

from _harness import RankContext, RankPool

BACKEND_NAME = "NVSHMEM"


@pytest.fixture(params=world_sizes(), ids=lambda w: f"W{w}")
def pool(request: pytest.FixtureRequest, pools) -> RankPool:  # noqa: ANN001
    return pools.get(request.param)


def _init(ctx: RankContext) -> None:
    symm_mem.set_backend(BACKEND_NAME)
    torch.manual_seed(42 + ctx.rank)


# ==================================================================== item 2: rendezvous on a plain tensor ====
def rendezvous_not_symmetric(ctx: RankContext) -> None:
    _init(ctx)
    group_name = dist.group.WORLD.group_name
    # Upstream's test_empty_strided_p2p: a plain tensor has no handle.
    t = torch.empty((64, 64), device=ctx.device)
    ctx.assertFalse(symm_mem.is_symm_mem_tensor(t))
    ctx.assertIsNone(_SymmetricMemory.rendezvous(t))
    ctx.assertIsNone(symm_mem.rendezvous(t, group_name))
    s = _SymmetricMemory.empty_strided_p2p((64, 64), (64, 1), torch.float32, ctx.device, group_name)
    hdl = _SymmetricMemory.rendezvous(s)
    ctx.assertIsNotNone(hdl)
    ctx.assertEqual(hdl.world_size, ctx.world_size)
    # Both answer the same for a view inside the allocation, its last element, and a tensor that is not.
    for view, symmetric in ((s, True), (s[10:], True), (s.view(-1)[-1:], True), (t[1:], False)):
        ctx.assertEqual(symm_mem.is_symm_mem_tensor(view), symmetric)
        ctx.assertEqual(symm_mem.rendezvous(view, group_name) is not None, symmetric)
    # The handle works: upstream's _verify_symmetric_memory, rank 1 writes rank 0's buffer.
    buf = hdl.get_buffer(0, (64, 64), torch.float32)
    if ctx.rank == 0:
        hdl.wait_signal(src_rank=1)
        ctx.assertTrue(buf.eq(42).all())
    elif ctx.rank == 1:
        buf.fill_(42)
        hdl.put_signal(dst_rank=0)
    hdl.barrier()


class TestRendezvousNotSymmetric:
    def test_rendezvous_returns_none(self, pool: RankPool) -> None:
        pool.run(rendezvous_not_symmetric)


# ======================================================================== item 3: a world of one, no group ====
_SINGLE = textwrap.dedent(
    """
    import torch
    import torch.distributed as dist
    import xpushmem.torch
    import torch.distributed._symmetric_memory as symm_mem
    from torch._C._distributed_c10d import _SymmetricMemory

    assert not dist.is_initialized()
    symm_mem.set_backend("NVSHMEM")
    # upstream's SymmMemSingleProcTest.test_memset32, on CPU
    t = _SymmetricMemory.empty_strided_p2p(
        (64,), (1,), dtype=torch.uint32, device=torch.device("cpu"), group_name="0"
    ).fill_(0)
    _SymmetricMemory.memset32(t, offset=32, val=1, count=16)
    assert t[:32].eq(0).all()
    assert t[32:48].eq(1).all()
    assert t[48:].eq(0).all()
    assert symm_mem.is_symm_mem_tensor(t)
    assert xpushmem.torch.shim.n_pes() == 1
    # more allocations, frees, and a rendezvous on the world of one
    for n in (1, 4096, 1 << 20):
        u = symm_mem.empty(n, dtype=torch.float32, device="cpu").fill_(3)
        hdl = symm_mem.rendezvous(u, "0")
        assert hdl.world_size == 1 and hdl.rank == 0
        assert hdl.get_buffer(0, (n,), torch.float32).eq(3).all()
        del u, hdl
    print("single-ok")
    """
)


def test_world_of_one_without_process_group(tmp_path: Path) -> None:
    env = dict(os.environ)
    env.setdefault("XPUSHMEM_TIMEOUT_MS", "60000")
    r = subprocess.run([sys.executable, "-c", _SINGLE], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "single-ok" in r.stdout, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


# ============================================================ item 5: use_pg_for_symm_mem_rendezvous ====
def _rdv_keys_in_store(pg: dist.ProcessGroup, world: int) -> bool:
    """Whether the group's store holds the first rendezvous record of any rank."""
    store = dist.distributed_c10d._get_process_group_store(pg)
    prefix = f"xpushmem/torch/rdv/{pg.group_name}/0/"
    return any(store.check([prefix + str(r)]) for r in range(world))


def rendezvous_via_pg_allgather(ctx: RankContext) -> None:
    import xpushmem.torch as xt

    _init(ctx)
    ranks = list(range(ctx.world_size))
    for use_pg in (False, True):
        pg = dist.new_group(ranks)
        pg.use_pg_for_symm_mem_rendezvous = use_pg
        ctx.assertEqual(pg.use_pg_for_symm_mem_rendezvous, use_pg)
        t = symm_mem.empty(256, dtype=torch.float32, device=ctx.device).fill_(ctx.rank)
        store_before, pg_before = xt.shim.rendezvous_exchanges()
        hdl = symm_mem.rendezvous(t, pg)
        store_after, pg_after = xt.shim.rendezvous_exchanges()
        dist.barrier()
        # Through the allgather when set, else the store: the counts and the store's keys say which.
        ctx.assertEqual(_rdv_keys_in_store(pg, ctx.world_size), not use_pg)
        ctx.assertEqual(pg_after > pg_before, use_pg)
        ctx.assertEqual(store_after > store_before, not use_pg)
        # The handle is the same either way.
        ctx.assertEqual(hdl.world_size, ctx.world_size)
        ctx.assertEqual(hdl.rank, ctx.rank)
        for r in range(ctx.world_size):
            ctx.assertTrue(hdl.get_buffer(r, (256,), torch.float32).eq(r).all())
        hdl.barrier()
        del hdl, t
        dist.destroy_process_group(pg)


class TestRendezvousViaPg:
    def test_rendezvous_via_pg_allgather(self, pool: RankPool) -> None:
        pool.run(rendezvous_via_pg_allgather)


# ============================================================= item 6: allocations on a group, recycled names ====
def _check_peers(ctx: RankContext, hdl, members: list[int], base: float) -> None:  # noqa: ANN001
    """Every member's buffer holds ``base + its global rank``, seen through ``hdl`` (numbered as ``members``)."""
    ctx.assertEqual(hdl.world_size, len(members))
    ctx.assertEqual(hdl.rank, members.index(ctx.rank))
    hdl.barrier()
    for peer, g in enumerate(members):
        ctx.assertEqual(hdl.get_buffer(peer, (64,), torch.float32), torch.full((64,), base + g))
    hdl.barrier()


def subgroup_allocations(ctx: RankContext) -> None:
    _init(ctx)
    symm_mem.empty(1, device=ctx.device)  # the runtime starts collectively over the world, as NVSHMEM's does
    ranks = list(range(ctx.world_size))
    head, tail = ranks[:-1] or ranks, ranks[1:] or ranks
    head_pg, tail_pg = dist.new_group(head), dist.new_group(tail)
    if ctx.rank in head:
        # The last rank never calls. Twice: the second allocation also releases the first (freed by torch), as
        # agreed among the group's ranks.
        for k in range(2):
            t = _SymmetricMemory.empty_strided_p2p((64,), (1,), torch.float32, ctx.device, head_pg.group_name)
            t.fill_(100 * k + ctx.rank)
            _check_peers(ctx, symm_mem.rendezvous(t, head_pg), head, 100.0 * k)
            # No group at rendezvous: the allocation's own (upstream's rendezvous takes the allocation's group).
            ctx.assertEqual(_SymmetricMemory.rendezvous(t).world_size, len(head))
            # An op of the group on it.
            res = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", head_pg.group_name)
            ctx.assertEqual(res, torch.full((64,), float(sum(100 * k + r for r in head))))
            del t
    if ctx.rank in tail:
        # An overlapping group, with the rank that sat out.
        t = _SymmetricMemory.empty_strided_p2p((64,), (1,), torch.float32, ctx.device, tail_pg.group_name)
        t.fill_(ctx.rank + 0.5)
        _check_peers(ctx, symm_mem.rendezvous(t, tail_pg.group_name), tail, 0.5)
        if len(tail) < ctx.world_size:
            # A group with a rank that holds no copy: an error naming it, not a wait.
            with ctx.assertRaisesRegex(RuntimeError, "has no copy of it"):
                symm_mem.rendezvous(t, dist.group.WORLD)
    dist.barrier()
    dist.destroy_process_group(head_pg)
    dist.destroy_process_group(tail_pg)


class TestSubgroupAllocations:
    def test_allocation_on_a_subgroup_only(self, pool: RankPool) -> None:
        pool.run(subgroup_allocations)


def group_name_recycled(ctx: RankContext, store_path: str) -> None:
    from datetime import timedelta

    def new_world(k: int) -> None:
        """Tear the world's process group down and start it again over a new store: torch's group-name counter
        starts again, so the groups made next get the names of the groups made after the previous start."""
        dist.barrier()
        dist.destroy_process_group()
        dist.init_process_group(backend=ctx.backend, store=dist.FileStore(f"{store_path}.{k}", ctx.world_size),
                                rank=ctx.rank, world_size=ctx.world_size, timeout=timedelta(seconds=120))

    _init(ctx)
    symm_mem.empty(1, device=ctx.device)
    new_world(1)
    first = dist.new_group([0, 1])  # rank 2 and up get no group object (torch's NON_GROUP_MEMBER)
    names = []
    if ctx.rank in (0, 1):
        names.append(first.group_name)
        t = _SymmetricMemory.empty_strided_p2p((64,), (1,), torch.float32, ctx.device, first.group_name)
        _check_peers(ctx, symm_mem.rendezvous(t.fill_(ctx.rank + 1), first.group_name), [0, 1], 1.0)
        del t
    new_world(2)
    second = dist.new_group([1, 2])  # the same name, other ranks
    if ctx.rank in (1, 2):
        names.append(second.group_name)
        t = _SymmetricMemory.empty_strided_p2p((64,), (1,), torch.float32, ctx.device, second.group_name)
        _check_peers(ctx, symm_mem.rendezvous(t.fill_(ctx.rank + 10), second.group_name), [1, 2], 10.0)
        del t
    dist.barrier()
    if ctx.rank == 1:
        ctx.assertEqual(names[0], names[1])  # the premise: the name was recycled


@pytest.mark.parametrize("pool", [max(world_sizes())], indirect=True, ids=lambda w: f"W{w}")
def test_rendezvous_after_group_name_recycled(pool: RankPool, tmp_path: Path) -> None:
    """Upstream's test_rendezvous_after_group_name_recycled: a rank sits out of each group. It replaces the world's
    process group (with one over a new store), which the pool's later tests then use."""
    if pool.world_size < 3:
        pytest.skip("needs 3 ranks or more")
    pool.run(group_name_recycled, store_path=str(tmp_path / "store-again"))


# ======================================================================================= item 7: _async_input_mm ====
def async_input_mm_local(ctx: RankContext) -> None:
    """Upstream's semantics on one rank: the result is torch.mm; each chunk is read after its signal (a writer
    thread fills `a` chunk by chunk, from garbage, in the pivot's order); the chunks are consumed from the pivot on;
    upstream's argument checks."""
    _init(ctx)
    chunks, rows, k, n = 4, 128, 32, 64
    m = chunks * rows
    ref_a = torch.randn(m, k, dtype=torch.bfloat16)
    for b in (torch.randn(k, n, dtype=torch.bfloat16), torch.randn(n, k, dtype=torch.bfloat16).t()):
        expected = torch.mm(ref_a, b)
        # All signals set: torch.mm.
        ones = torch.ones(chunks, dtype=torch.uint32)
        torch.testing.assert_close(torch.ops.symm_mem._async_input_mm(ref_a, b, ones, 0), expected, rtol=0, atol=0)
        for pivot in range(chunks):
            a = torch.full((m, k), float("nan"), dtype=torch.bfloat16)
            signals = torch.zeros(chunks, dtype=torch.uint32)

            def writer() -> None:
                import time

                for step in range(chunks):
                    idx = (pivot + step) % chunks
                    time.sleep(0.02)
                    a[idx * rows : (idx + 1) * rows].copy_(ref_a[idx * rows : (idx + 1) * rows])
                    signals[idx : idx + 1].view(torch.int32).fill_(1)

            th = threading.Thread(target=writer)
            th.start()
            out = torch.ops.symm_mem._async_input_mm(a, b, signals, pivot)
            th.join()
            torch.testing.assert_close(out, expected, rtol=0, atol=0)
    # The order: only the pivot's chunk signalled, the op waits for the next one after it (and names it).
    os.environ["XPUSHMEM_TIMEOUT_MS"], saved = "200", os.environ.get("XPUSHMEM_TIMEOUT_MS")
    try:
        for pivot in range(chunks):
            signals = torch.zeros(chunks, dtype=torch.uint32)
            signals[pivot : pivot + 1].view(torch.int32).fill_(1)
            with ctx.assertRaisesRegex(RuntimeError, f"signal of chunk {(pivot + 1) % chunks} did not arrive"):
                torch.ops.symm_mem._async_input_mm(ref_a, b, signals, pivot)
    finally:
        if saved is None:
            del os.environ["XPUSHMEM_TIMEOUT_MS"]
        else:
            os.environ["XPUSHMEM_TIMEOUT_MS"] = saved
    # Upstream's checks.
    ones = torch.ones(chunks, dtype=torch.uint32)
    b = torch.randn(k, n, dtype=torch.bfloat16)
    with ctx.assertRaisesRegex(RuntimeError, "a_chunk_pivot"):
        torch.ops.symm_mem._async_input_mm(ref_a, b, ones, chunks)
    with ctx.assertRaisesRegex(RuntimeError, "integer multiple"):
        torch.ops.symm_mem._async_input_mm(ref_a, b, torch.ones(3, dtype=torch.uint32), 0)
    with ctx.assertRaisesRegex(RuntimeError, "bfloat16"):
        torch.ops.symm_mem._async_input_mm(ref_a.float(), b.float(), ones, 0)
    with ctx.assertRaisesRegex(RuntimeError, "chunk_size_M"):
        torch.ops.symm_mem._async_input_mm(ref_a[:256], b, ones, 0)


def async_input_mm_from_peers(ctx: RankContext) -> None:
    """Upstream's use (the native fused all-gather matmul): every rank writes its shard of `a` into chunk `rank` of
    each peer's symmetric `a` and sets the peer's signal word `rank`; each rank multiplies as the shards land,
    starting with its own (pivot = rank)."""
    _init(ctx)
    w, rows, k, n = ctx.world_size, 128, 32, 48
    a = symm_mem.empty(w * rows, k, dtype=torch.bfloat16, device=ctx.device).fill_(float("nan"))
    sig = symm_mem.empty(w, dtype=torch.uint32, device=ctx.device)
    sig.view(torch.int32).fill_(0)
    hdl_a, hdl_s = symm_mem.rendezvous(a, "0"), symm_mem.rendezvous(sig, "0")
    hdl_a.barrier()
    shard = torch.randn(rows, k, dtype=torch.bfloat16)
    b = torch.randn(k, n, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(7))
    for step in range(w):
        peer = (ctx.rank + step) % w
        hdl_a.get_buffer(peer, (w * rows, k), torch.bfloat16)[ctx.rank * rows : (ctx.rank + 1) * rows].copy_(shard)
        hdl_s.get_buffer(peer, (w,), torch.uint32)[ctx.rank : ctx.rank + 1].view(torch.int32).fill_(1)
    out = torch.ops.symm_mem._async_input_mm(a, b, sig, ctx.rank)
    full = all_gather_single(shard, 0, "0")
    torch.testing.assert_close(out, torch.mm(full, b), rtol=0, atol=0)
    hdl_a.barrier()


class TestAsyncInputMm:
    def test_schema(self) -> None:
        import xpushmem.torch  # noqa: F401

        schema = str(torch.ops.symm_mem._async_input_mm.default._schema)
        assert schema == (
            "symm_mem::_async_input_mm(Tensor a, Tensor b, Tensor a_chunk_signals, int a_chunk_pivot) -> Tensor"
        )
        assert torch._C._dispatch_has_kernel_for_dispatch_key("symm_mem::_async_input_mm", "CPU")

    def test_async_input_mm(self, pool: RankPool) -> None:
        pool.run(async_input_mm_local)

    def test_async_input_mm_from_peers(self, pool: RankPool) -> None:
        pool.run(async_input_mm_from_peers)
