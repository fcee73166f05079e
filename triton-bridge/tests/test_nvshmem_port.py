"""Port of PyTorch's ``test/distributed/test_nvshmem.py`` onto xpushmem's ``"NVSHMEM"`` backend.

The upstream classes (NVSHMEMSymmetricMemoryTest, NVSHMEMSignalNegativeTest, NVSHMEMAll2AllTest,
DispatchCombineTest, DispatchCombineInSubgroups, NVSHMEMTileCommTest) keep their names, their tests and their
assertions. What differs is only the plumbing:

* device: ``xpu`` (one rank per Intel GPU, ``xccl``) when torch sees an XPU, else CPU tensors over ``gloo`` at
  world sizes 2 and 4 (``XPUSHMEM_TEST_DEVICE`` / ``XPUSHMEM_TEST_WORLD_SIZES`` override);
* processes: a pool of ranks per world size that runs each test body on every rank (``_harness.py``; hard
  timeout per test), instead of ``MultiProcContinuousTest``;
* MemPool: CPU has no ``MemPool``; on CPU the MemPool tests take their symmetric tensors from ``symm_mem.empty``
  (and ``test_handle_offset`` places two tensors inside one allocation), on XPU they use ``torch.xpu.MemPool``
  as upstream uses ``torch.cuda.MemPool``;
* tile reduce: upstream gates it on NVLS multicast; xpushmem implements it without multicast, so it runs here.

A rank body is a module-level function ``body(ctx, **params)``; ``ctx`` carries ``rank``, ``world_size``,
``device`` and unittest's asserts.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from conftest import device_type, world_sizes

from _harness import RankContext, RankPool

DEVICE_TYPE = device_type()
BACKEND_NAME = "NVSHMEM"


@pytest.fixture(params=world_sizes(), ids=lambda w: f"W{w}")
def pool(request: pytest.FixtureRequest, pools) -> RankPool:  # noqa: ANN001
    return pools.get(request.param)


def test_backend_is_available() -> None:
    """``import xpushmem.torch`` makes symm_mem.is_nvshmem_available() answer for this backend; every
    xpushmem-ops C function the kernels call must be exported by libxpushmem.so."""
    import xpushmem.torch as xt

    assert xt.missing_ops() == [], f"libxpushmem.so does not export: {xt.missing_ops()}"
    assert symm_mem.is_nvshmem_available()


def _init_device(ctx: RankContext) -> None:
    if ctx.device_type != "cpu":
        torch.get_device_module(ctx.device_type).set_device(ctx.device)
    symm_mem.set_backend(BACKEND_NAME)


def _world() -> str:
    return dist.group.WORLD.group_name


def _pool_tensors(ctx: RankContext, make):  # noqa: ANN001, ANN202
    """Run ``make()`` with the symmetric MemPool active (XPU), or return symmetric copies of what it makes (CPU,
    which has no MemPool)."""
    if ctx.device_type == "cpu":
        made = make()
        tensors = made if isinstance(made, tuple) else (made,)
        out = tuple(symm_mem.empty(t.shape, dtype=t.dtype, device=ctx.device).copy_(t) for t in tensors)
        # The copies are made after the (collective) allocation: no peer may touch them before they are done.
        dist.barrier()
        return out if isinstance(made, tuple) else out[0]
    dm = torch.get_device_module(ctx.device_type)
    mempool = dm.MemPool(symm_mem.get_mempool_allocator(ctx.device))
    with dm.use_mem_pool(mempool):
        return make()


# ================================================================================ NVSHMEMSymmetricMemoryTest ====


def sm_alloc(ctx: RankContext) -> None:
    _init_device(ctx)

    def scoped() -> None:
        t = symm_mem.empty(1024, dtype=torch.float, device=ctx.device)
        symm_mem.rendezvous(t, group=_world())

    scoped()
    t = symm_mem.empty(1024, dtype=torch.float, device=ctx.device)
    symm_mem.rendezvous(t, group=_world())


def sm_alloc_without_device_context(ctx: RankContext) -> None:
    symm_mem.set_backend(BACKEND_NAME)
    t = symm_mem.empty(1024, dtype=torch.float, device=ctx.device)
    ctx.assertEqual(t.device, ctx.device)
    symm_mem.rendezvous(t, group=_world())


def sm_alloc_sizes_and_free(ctx: RankContext) -> None:
    """Beyond upstream: size-0 allocations, is_symm_mem_tensor, and that freed allocations are released once every
    rank has freed them (frees are deferred to the next collective allocation)."""
    import xpushmem.torch as xt

    _init_device(ctx)
    empty = symm_mem.empty(0, dtype=torch.float, device=ctx.device)
    ctx.assertEqual(empty.numel(), 0)
    hdl = symm_mem.rendezvous(empty, group=_world())
    ctx.assertEqual(hdl.buffer_size, 0)
    t = symm_mem.empty(64, device=ctx.device)
    ctx.assertTrue(symm_mem.is_symm_mem_tensor(t))
    ctx.assertFalse(symm_mem.is_symm_mem_tensor(torch.empty(64, device=ctx.device)))
    released_before = xt.shim.allocator_stats(ctx.device_type)[2]
    del empty, hdl, t
    dist.barrier()
    symm_mem.empty(1, device=ctx.device)  # the next collective allocation releases what everyone freed
    ctx.assertGreaterEqual(xt.shim.allocator_stats(ctx.device_type)[2], released_before + 2)


def sm_handle_properties(ctx: RankContext) -> None:
    """Beyond upstream: the handle's tables (what C1 requires of get_buffer_ptrs and friends)."""
    _init_device(ctx)
    t = symm_mem.empty(256, dtype=torch.int32, device=ctx.device).fill_(ctx.rank)
    hdl = symm_mem.rendezvous(t, group=_world())
    ctx.assertEqual(hdl.rank, ctx.rank)
    ctx.assertEqual(hdl.world_size, ctx.world_size)
    ctx.assertEqual(hdl.buffer_size, 256 * 4)
    ctx.assertEqual(hdl.offset, 0)
    ctx.assertEqual(len(hdl.buffer_ptrs), ctx.world_size)
    ctx.assertTrue(all(p != 0 for p in hdl.buffer_ptrs))
    ctx.assertTrue(all(p != 0 for p in hdl.signal_pad_ptrs))
    ctx.assertEqual(hdl.buffer_ptrs[ctx.rank], t.data_ptr())
    ctx.assertNotEqual(hdl.buffer_ptrs_dev, 0)
    ctx.assertNotEqual(hdl.signal_pad_ptrs_dev, 0)
    ctx.assertEqual(hdl.signal_pad_size, symm_mem.get_signal_pad_size())
    # The signal pad starts zeroed.
    ctx.assertEqual(hdl.get_signal_pad(ctx.rank, dtype=torch.int32).count_nonzero().item(), 0)
    dist.barrier()
    for peer in range(ctx.world_size):
        ctx.assertTrue(hdl.get_buffer(peer, (256,), torch.int32).eq(peer).all())
    # Cached per allocation and group: a second rendezvous returns the same tables.
    again = symm_mem.rendezvous(t, group=_world())
    ctx.assertEqual(again.buffer_ptrs, hdl.buffer_ptrs)
    dist.barrier()


def sm_mempool_tensor_factory(ctx: RankContext) -> None:
    _init_device(ctx)
    numel, src = 1024, 0

    def make() -> torch.Tensor:
        if ctx.rank == src:
            return torch.arange(numel, dtype=torch.float, device=ctx.device)
        return torch.zeros(numel, dtype=torch.float, device=ctx.device)

    t = _pool_tensors(ctx, make)
    symm_mem.rendezvous(t, group=_world())
    torch.ops.symm_mem.nvshmem_broadcast(t, src, _world())
    ctx.assertEqual(t, torch.arange(numel, dtype=torch.float, device=ctx.device))


def sm_mempool_tensor_w_collective(ctx: RankContext) -> None:
    _init_device(ctx)
    numel = 1024
    t = _pool_tensors(ctx, lambda: torch.ones(numel, dtype=torch.float, device=ctx.device))
    symm_mem.rendezvous(t, group=_world())
    dist.all_reduce(t)
    ctx.assertEqual(t, torch.ones(numel, dtype=torch.float, device=ctx.device) * ctx.world_size)


def sm_mempool_compute_ops(ctx: RankContext) -> None:
    _init_device(ctx)
    dim = 1024
    w = torch.ones(dim, dim, dtype=torch.float, device=ctx.device)
    x0 = torch.ones(1, dim, dtype=torch.float, device=ctx.device)
    y = _pool_tensors(ctx, lambda: torch.mm(x0 + ctx.rank, w))
    torch.ops.symm_mem.nvshmem_broadcast(y, 0, _world())
    ctx.assertEqual(y, torch.mm(x0, w))


def sm_handle_offset(ctx: RankContext) -> None:
    _init_device(ctx)
    numel = 1024
    if ctx.device_type == "cpu":
        import xpushmem.torch as xt

        # Two tensors inside one symmetric allocation, as a MemPool segment would hold them.
        base = symm_mem.empty(2 * numel, dtype=torch.float, device=ctx.device)
        x0 = xt.shim.tensor_inside(base, 0, numel)
        x1 = xt.shim.tensor_inside(base, numel * 4, numel)
    else:
        x0, x1 = _pool_tensors(
            ctx,
            lambda: (lambda a: (a, torch.empty_like(a)))(torch.empty(numel, dtype=torch.float, device=ctx.device)),
        )
    hdl0 = symm_mem.rendezvous(x0, group=_world())
    hdl1 = symm_mem.rendezvous(x1, group=_world())
    ctx.assertEqual(hdl0.offset, 0)
    ctx.assertEqual(hdl1.offset, x0.untyped_storage().nbytes())


def sm_get_remote_tensor(ctx: RankContext) -> None:
    _init_device(ctx)
    numel = 1024
    x, y = _pool_tensors(
        ctx,
        lambda: (lambda a: (a, torch.empty_like(a)))(
            torch.empty(numel, dtype=torch.float, device=ctx.device).fill_(ctx.rank)
        ),
    )
    hdl_y = symm_mem.rendezvous(y, group=_world())
    peer = (ctx.rank + 1) % ctx.world_size
    hdl_y.get_remote_tensor(peer, y.size(), y.dtype).copy_(x)
    dist.barrier()
    ctx.assertEqual(y, torch.empty(numel, dtype=torch.float, device=ctx.device).fill_((ctx.rank - 1) % ctx.world_size))


def sm_get_remote_tensors(ctx: RankContext) -> None:
    _init_device(ctx)
    mine = symm_mem.empty(1, device=ctx.device).fill_(ctx.rank)
    remotes = torch.ops.symm_mem.get_remote_tensors(mine, _world())
    dist.barrier()
    for peer, t in enumerate(remotes):
        ctx.assertEqual(t, peer)


def sm_multicast_ptr(ctx: RankContext) -> None:
    _init_device(ctx)
    t = symm_mem.empty(1, device=ctx.device)
    handle = symm_mem.rendezvous(t, _world())
    # No multicast (NVLS) on XPU or CPU: has_nvls_support() is False there.
    ctx.assertEqual(handle.multicast_ptr, 0)


def sm_nvshmem_put(ctx: RankContext) -> None:
    _init_device(ctx)
    numel = 1024
    t = symm_mem.empty(numel, dtype=torch.float, device=ctx.device).fill_(ctx.rank)
    hdl = symm_mem.rendezvous(t, group=_world())
    sig = hdl.get_signal_pad(ctx.rank)
    value = 5
    if ctx.rank == 0:
        torch.ops.symm_mem.nvshmem_put_with_signal(t, sig, value, 1)
    elif ctx.rank == 1:
        torch.ops.symm_mem.nvshmem_wait_for_signal(sig, value, 0)
        torch.testing.assert_close(t, torch.zeros(numel, dtype=torch.float, device=ctx.device))
    # (not upstream) keep the allocation alive until rank 1 has checked it, and leave the pad zeroed
    dist.barrier()


def sm_nvshmem_get(ctx: RankContext) -> None:
    _init_device(ctx)
    numel = 1024
    t = symm_mem.empty(numel, dtype=torch.float, device=ctx.device).fill_(ctx.rank)
    hdl = symm_mem.rendezvous(t, group=_world())
    if ctx.rank == 0:
        torch.ops.symm_mem.nvshmem_get(t, 1)
        hdl.put_signal(dst_rank=1)
        torch.testing.assert_close(t, torch.ones(numel, dtype=torch.float, device=ctx.device))
    elif ctx.rank == 1:
        hdl.wait_signal(src_rank=0)


def sm_barrier(ctx: RankContext) -> None:
    _init_device(ctx)
    numel = 64
    t = symm_mem.empty(numel, dtype=torch.float32, device=ctx.device)
    t.fill_(ctx.rank)
    hdl = symm_mem.rendezvous(t, group=_world())
    hdl.barrier()
    for peer in range(ctx.world_size):
        ctx.assertTrue(hdl.get_buffer(peer, (numel,), torch.float32).eq(peer).all())
    hdl.barrier()


def sm_put_wait_signal(ctx: RankContext) -> None:
    _init_device(ctx)
    numel = 64
    t = symm_mem.empty(numel, dtype=torch.float32, device=ctx.device)
    t.fill_(-1)
    hdl = symm_mem.rendezvous(t, group=_world())
    if ctx.rank == 0:
        hdl.wait_signal(src_rank=1)
        ctx.assertTrue(hdl.get_buffer(0, (numel,), torch.float32).eq(42).all())
    elif ctx.rank == 1:
        hdl.get_buffer(0, (numel,), torch.float32).fill_(42)
        hdl.put_signal(dst_rank=0)
    hdl.barrier()


def sm_get(ctx: RankContext) -> None:
    _init_device(ctx)
    numel, dtype = 1024, torch.float

    src = symm_mem.empty(numel, dtype=dtype, device=ctx.device).fill_(ctx.rank)
    hdl = symm_mem.rendezvous(src, group=_world())
    dist.barrier()
    if ctx.rank == 0:
        dst = torch.empty_like(src)
        symm_mem.get(dst, hdl, peer=1)
        torch.testing.assert_close(dst, torch.ones_like(dst))
    dist.barrier()

    base = symm_mem.empty(2 * numel, dtype=dtype, device=ctx.device)
    base.copy_(torch.arange(2 * numel, dtype=dtype, device=ctx.device) + ctx.rank * 2 * numel)
    hdl = symm_mem.rendezvous(base, group=_world())
    dist.barrier()
    if ctx.rank == 0:
        offset = numel // 2
        dst = torch.empty(numel, dtype=dtype, device=ctx.device)
        symm_mem.get(dst, hdl, peer=1, offset=offset)
        expected = torch.arange(offset, offset + numel, dtype=dtype, device=ctx.device) + 2 * numel
        torch.testing.assert_close(dst, expected)

        larger = torch.full((numel + 1,), -1, dtype=dtype, device=ctx.device)
        symm_mem.get(larger[:numel], hdl, peer=1, offset=offset)
        ctx.assertEqual(larger[:numel], expected)
        ctx.assertEqual(larger[numel], -1)

        with ctx.assertRaisesRegex(ValueError, "contiguous"):
            symm_mem.get(torch.empty(2 * numel, dtype=dtype, device=ctx.device)[::2], hdl, peer=1)
        with ctx.assertRaisesRegex(ValueError, "non-negative"):
            symm_mem.get(torch.empty(numel, dtype=dtype, device=ctx.device), hdl, peer=1, offset=-1)
        with ctx.assertRaisesRegex(ValueError, "exceeds"):
            symm_mem.get(
                torch.empty(1, dtype=dtype, device=ctx.device),
                hdl,
                peer=1,
                offset=hdl.buffer_size // dst.element_size(),
            )
        with ctx.assertRaisesRegex(ValueError, "invalid peer"):
            symm_mem.get(torch.empty(numel, dtype=dtype, device=ctx.device), hdl, peer=hdl.world_size)
    dist.barrier()


def sm_errors_are_runtime_errors(ctx: RankContext) -> None:
    """Beyond upstream: misuse raises RuntimeError with xpushmem's message, and the ranks stay usable."""
    _init_device(ctx)
    peer = (ctx.rank + 1) % ctx.world_size
    plain = torch.ones(16, device=ctx.device)  # not symmetric memory
    with ctx.assertRaisesRegex(RuntimeError, r"xpushmem_ops_nvshmem_put: .*is not symmetric"):
        torch.ops.symm_mem.nvshmem_put(plain, peer)
    # Upstream's answer for a tensor that is not symmetric: no handle (test_empty_strided_p2p; issue #30).
    ctx.assertIsNone(symm_mem.rendezvous(plain, group=_world()))
    t = symm_mem.empty(16, device=ctx.device).fill_(ctx.rank)
    with ctx.assertRaisesRegex(RuntimeError, "peer must be smaller than world size"):
        torch.ops.symm_mem.nvshmem_put(t, ctx.world_size)
    with ctx.assertRaisesRegex(RuntimeError, "root must be smaller than group size"):
        torch.ops.symm_mem.nvshmem_broadcast(t, ctx.world_size, _world())
    with ctx.assertRaisesRegex(RuntimeError, "xpushmem_ops_tile_reduce: .*reduce_op"):
        tile = symm_mem.empty(4, 4, device=ctx.device)
        torch.ops.symm_mem.tile_reduce(tile, tile, 0, _world(), "max")
    # Still usable: a collective op after the errors.
    torch.ops.symm_mem.nvshmem_broadcast(t, 0, _world())
    ctx.assertEqual(t, torch.zeros(16, device=ctx.device))
    dist.barrier()


class NVSHMEMSymmetricMemoryTest:
    def test_errors_are_runtime_errors(self, pool: RankPool) -> None:
        pool.run(sm_errors_are_runtime_errors)

    def test_alloc(self, pool: RankPool) -> None:
        pool.run(sm_alloc)

    def test_alloc_without_device_context(self, pool: RankPool) -> None:
        pool.run(sm_alloc_without_device_context)

    def test_alloc_sizes_and_free(self, pool: RankPool) -> None:
        pool.run(sm_alloc_sizes_and_free)

    def test_handle_properties(self, pool: RankPool) -> None:
        pool.run(sm_handle_properties)

    def test_mempool_tensor_factory(self, pool: RankPool) -> None:
        pool.run(sm_mempool_tensor_factory)

    def test_mempool_tensor_w_collective(self, pool: RankPool) -> None:
        pool.run(sm_mempool_tensor_w_collective)

    def test_mempool_compute_ops(self, pool: RankPool) -> None:
        pool.run(sm_mempool_compute_ops)

    def test_handle_offset(self, pool: RankPool) -> None:
        pool.run(sm_handle_offset)

    def test_get_remote_tensor(self, pool: RankPool) -> None:
        pool.run(sm_get_remote_tensor)

    def test_get_remote_tensors(self, pool: RankPool) -> None:
        pool.run(sm_get_remote_tensors)

    def test_multicast_ptr(self, pool: RankPool) -> None:
        pool.run(sm_multicast_ptr)

    def test_nvshmem_put(self, pool: RankPool) -> None:
        pool.run(sm_nvshmem_put)

    def test_nvshmem_get(self, pool: RankPool) -> None:
        pool.run(sm_nvshmem_get)

    def test_barrier(self, pool: RankPool) -> None:
        pool.run(sm_barrier)

    def test_put_wait_signal(self, pool: RankPool) -> None:
        pool.run(sm_put_wait_signal)

    def test_get(self, pool: RankPool) -> None:
        pool.run(sm_get)


# ================================================================================= NVSHMEMSignalNegativeTest ====
# Upstream runs these at W=2 in fresh processes because a device-side trap poisons the CUDA context. Here errors
# are host-side RuntimeErrors that leave the process usable; each body works on its own allocation (whose signal
# pad nobody touches afterwards), and rank 1 waits, over the store, until rank 0 has seen the failure.


def _rank0_times_out(ctx: RankContext, body) -> None:  # noqa: ANN001
    store = dist.distributed_c10d._get_default_store()
    key = f"xpushmem-test/rank0_observed_failure/{body.__name__}"
    if ctx.rank == 0:
        with ctx.assertRaises(RuntimeError):
            body()
            ctx.synchronize()
        store.set(key, "1")
    else:
        ctx.synchronize()
        store.wait([key])


def neg_wait_signal_timeout(ctx: RankContext) -> None:
    _init_device(ctx)
    hdl = symm_mem.rendezvous(symm_mem.empty(1, device=ctx.device), group=dist.group.WORLD)

    def wait_signal_nobody_sends() -> None:
        hdl.wait_signal(src_rank=1, timeout_ms=1000)

    _rank0_times_out(ctx, wait_signal_nobody_sends)


def neg_barrier_timeout(ctx: RankContext) -> None:
    _init_device(ctx)
    hdl = symm_mem.rendezvous(symm_mem.empty(1, device=ctx.device), group=dist.group.WORLD)

    def barrier_alone() -> None:
        hdl.barrier(timeout_ms=1000)

    _rank0_times_out(ctx, barrier_alone)


def neg_put_signal_timeout(ctx: RankContext) -> None:
    _init_device(ctx)
    hdl = symm_mem.rendezvous(symm_mem.empty(1, device=ctx.device), group=dist.group.WORLD)

    def put_signal_twice() -> None:
        hdl.put_signal(dst_rank=1)
        hdl.put_signal(dst_rank=1, timeout_ms=1000)

    _rank0_times_out(ctx, put_signal_twice)


def neg_channel_out_of_bounds(ctx: RankContext) -> None:
    _init_device(ctx)
    hdl = symm_mem.rendezvous(symm_mem.empty(64, device=ctx.device), group=dist.group.WORLD)
    max_channel = (hdl.signal_pad_size // 4) // ctx.world_size
    peer = (ctx.rank + 1) % ctx.world_size
    with ctx.assertRaisesRegex(RuntimeError, "maximum supported channel"):
        hdl.barrier(channel=max_channel)
    with ctx.assertRaisesRegex(RuntimeError, "maximum supported channel"):
        hdl.put_signal(dst_rank=peer, channel=max_channel)
    with ctx.assertRaisesRegex(RuntimeError, "maximum supported channel"):
        hdl.wait_signal(src_rank=peer, channel=max_channel)
    ctx.synchronize()
    if max_channel > 1:
        hdl.barrier(channel=max_channel - 1)
    ctx.synchronize()


def neg_rank_out_of_bounds(ctx: RankContext) -> None:
    _init_device(ctx)
    hdl = symm_mem.rendezvous(symm_mem.empty(64, device=ctx.device), group=dist.group.WORLD)
    for bad in (-1, ctx.world_size):
        with ctx.assertRaisesRegex(RuntimeError, r"must be in \[0"):
            hdl.put_signal(dst_rank=bad)
        with ctx.assertRaisesRegex(RuntimeError, r"must be in \[0"):
            hdl.wait_signal(src_rank=bad)
    ctx.synchronize()


class NVSHMEMSignalNegativeTest:
    def test_wait_signal_timeout(self, pool: RankPool) -> None:
        pool.run(neg_wait_signal_timeout)

    def test_barrier_timeout(self, pool: RankPool) -> None:
        pool.run(neg_barrier_timeout)

    def test_put_signal_timeout(self, pool: RankPool) -> None:
        pool.run(neg_put_signal_timeout)

    def test_channel_out_of_bounds(self, pool: RankPool) -> None:
        pool.run(neg_channel_out_of_bounds)

    def test_rank_out_of_bounds(self, pool: RankPool) -> None:
        pool.run(neg_rank_out_of_bounds)


# ======================================================================================== NVSHMEMAll2AllTest ====


def a2a_nvshmem_all_to_all(ctx: RankContext) -> None:
    _init_device(ctx)
    per_peer = 10
    numel = ctx.world_size * per_peer
    inp = symm_mem.empty(numel, dtype=torch.float, device=ctx.device).fill_(ctx.rank)
    out = symm_mem.empty(numel, dtype=torch.float, device=ctx.device).fill_(-1)
    symm_mem.rendezvous(inp, group=_world())
    symm_mem.rendezvous(out, group=_world())
    torch.ops.symm_mem.nvshmem_all_to_all(inp, out, _world())
    expected = torch.cat(
        [torch.empty(per_peer, dtype=torch.float, device=ctx.device).fill_(i) for i in range(ctx.world_size)]
    )
    torch.testing.assert_close(out, expected)


def a2a_all_to_all_vdev(ctx: RankContext) -> None:
    _init_device(ctx)
    w, k, dtype = ctx.world_size, 10, torch.float
    inp_splits = torch.randint(k, (w,), device=ctx.device)
    inp_numel = inp_splits.sum().item()
    out_splits = torch.zeros_like(inp_splits)
    dist.all_to_all_single(out_splits, inp_splits)
    out_numel = out_splits.sum().item()
    max_inp = k * w
    max_out = max_inp * w

    inp = symm_mem.empty(max_inp, dtype=dtype, device=ctx.device).copy_(
        torch.randn(max_inp, dtype=dtype, device=ctx.device)
    )
    out = symm_mem.empty(max_out, dtype=dtype, device=ctx.device).fill_(-1)
    in_splits = symm_mem.empty(w, dtype=torch.int64, device=ctx.device)
    out_splits_offsets = symm_mem.empty((2, w), dtype=torch.int64, device=ctx.device)
    in_splits.copy_(inp_splits)
    dist.barrier()

    torch.ops.symm_mem.all_to_all_vdev(inp, out, in_splits, out_splits_offsets, _world())

    torch.testing.assert_close(in_splits, inp_splits)
    torch.testing.assert_close(out_splits_offsets[0], out_splits)
    inclusive = torch.cumsum(out_splits, dim=0)
    ctx.assertEqual(out_splits_offsets[1][0], 0)
    torch.testing.assert_close(out_splits_offsets[1][1:], inclusive[:-1])
    expected = torch.empty(out_numel, dtype=dtype, device=ctx.device)
    dist.all_to_all_single(expected, inp[:inp_numel], out_splits.tolist(), inp_splits.tolist())
    torch.testing.assert_close(out[:out_numel], expected)
    dist.barrier()  # (not upstream) peers may still read this rank's input


def a2a_all_to_all_vdev_2d(ctx: RankContext, align: int) -> None:
    torch.manual_seed(42 + ctx.rank)
    _init_device(ctx)
    w, ne, k, dtype = ctx.world_size, 8, 10, torch.float
    nsplits = ne * w
    inp_splits = torch.randint(k, (nsplits,), dtype=torch.int64, device=ctx.device)
    out_splits = torch.zeros_like(inp_splits)
    dist.all_to_all_single(out_splits, inp_splits)
    out_splits_t = out_splits.reshape(w, ne).t()  # rank-major -> expert-major
    inp_numel = inp_splits.sum().item()
    out_numel = out_splits.sum().item()
    max_inp = k * nsplits
    max_out = max_inp * w

    inp = symm_mem.empty(max_inp, dtype=dtype, device=ctx.device).copy_(
        torch.randn(max_inp, dtype=dtype, device=ctx.device)
    )
    out = symm_mem.empty(max_out, dtype=dtype, device=ctx.device).fill_(-1)
    in_splits = symm_mem.empty(nsplits, dtype=torch.int64, device=ctx.device).copy_(inp_splits)
    out_splits_offsets = symm_mem.empty((2, nsplits), dtype=torch.int64, device=ctx.device).fill_(-1)
    dist.barrier()

    torch.ops.symm_mem.all_to_all_vdev_2d(inp, out, in_splits, out_splits_offsets, _world(), major_align=align)
    got_splits = out_splits_offsets[0]
    got_offsets = out_splits_offsets[1]

    torch.testing.assert_close(in_splits, inp_splits)
    torch.testing.assert_close(got_splits, out_splits_t.reshape(-1))

    # Each expert's total is aligned up to `align`, at least `align`; the last source absorbs the padding.
    padded = out_splits_t.tolist()
    for e in range(ne):
        total = sum(padded[e])
        aligned = max((total + align - 1) // align * align, align)
        padded[e][-1] += aligned - total
    padded_t = torch.tensor(padded, device=ctx.device).reshape(-1)
    exclusive = torch.cat([torch.zeros(1, device=ctx.device), torch.cumsum(padded_t, dim=0)[:-1]]).to(torch.int64)
    torch.testing.assert_close(got_offsets, exclusive)

    expected = torch.empty(out_numel, dtype=dtype, device=ctx.device)
    dist.all_to_all_single(
        expected,
        inp[:inp_numel],
        out_splits.reshape(w, ne).sum(1).tolist(),
        inp_splits.reshape(w, ne).sum(1).tolist(),
    )
    ends = torch.cumsum(out_splits, dim=0)
    chunks = []
    for e in range(ne):
        for r in range(w):
            c = r * ne + e
            chunks.append(expected[ends[c] - out_splits[c] : ends[c]])
    for c, chunk in enumerate(chunks):
        start, n = got_offsets[c].item(), got_splits[c].item()
        torch.testing.assert_close(out[start : start + n], chunk)
    dist.barrier()  # (not upstream) peers may still read this rank's input


def a2a_all_to_all_vdev_2d_offset(ctx: RankContext) -> None:
    torch.manual_seed(42 + ctx.rank)
    _init_device(ctx)
    w, ne, k, dtype = ctx.world_size, 8, 10, torch.float
    nsplits = ne * w
    inp_splits = torch.randint(k, (nsplits,), dtype=torch.int64, device=ctx.device)
    inp_offsets = torch.arange(0, k * nsplits, k, dtype=torch.int64, device=ctx.device)  # padded input
    max_inp = k * nsplits
    max_out = max_inp * w

    inp = symm_mem.empty(max_inp, dtype=dtype, device=ctx.device).copy_(
        torch.randn(max_inp, dtype=dtype, device=ctx.device)
    )
    out = symm_mem.empty(max_out, dtype=dtype, device=ctx.device).fill_(-1)
    in_splits_offsets = symm_mem.empty((2, nsplits), dtype=torch.int64, device=ctx.device)
    out_splits_offsets = symm_mem.empty((2, nsplits), dtype=torch.int64, device=ctx.device).fill_(-1)
    in_splits_offsets[0].copy_(inp_splits)
    in_splits_offsets[1].copy_(inp_offsets)
    dist.barrier()

    torch.ops.symm_mem.all_to_all_vdev_2d_offset(inp, out, in_splits_offsets, out_splits_offsets, _world())
    got_splits = out_splits_offsets[0]
    got_offsets = out_splits_offsets[1]

    torch.testing.assert_close(in_splits_offsets[0], inp_splits)
    torch.testing.assert_close(in_splits_offsets[1], inp_offsets)
    out_splits = torch.zeros_like(inp_splits)
    dist.all_to_all_single(out_splits, inp_splits.reshape(ne, w).t().contiguous())
    torch.testing.assert_close(got_splits, out_splits)
    inclusive = torch.cumsum(out_splits, dim=0)
    ctx.assertEqual(got_offsets[0], 0)
    torch.testing.assert_close(got_offsets[1:], inclusive[:-1])

    # Reference: per destination rank, the concatenation of its chunks over this rank's experts.
    per_expert = [
        [inp[in_splits_offsets[1][e * w + r] : in_splits_offsets[1][e * w + r] + inp_splits[e * w + r]] for r in range(w)]
        for e in range(ne)
    ]
    send = [torch.cat(row) for row in zip(*per_expert)]
    recv_sizes = out_splits.reshape(w, ne).sum(1)
    if ctx.backend == "gloo":
        # gloo's all_to_all needs equal sizes; the same exchange as one all_to_all_single with split sizes.
        expected = torch.empty(int(recv_sizes.sum().item()), dtype=dtype, device=ctx.device)
        dist.all_to_all_single(expected, torch.cat(send), recv_sizes.tolist(), [c.numel() for c in send])
    else:
        recv = [torch.empty(recv_sizes[r].item(), dtype=dtype, device=ctx.device) for r in range(w)]
        dist.all_to_all(recv, send)
        expected = torch.cat(recv)
    out_numel = out_splits.sum().item()
    ctx.assertEqual(expected.shape[0], out_numel)
    torch.testing.assert_close(expected, out[:out_numel])
    dist.barrier()  # (not upstream) peers may still read this rank's input


class NVSHMEMAll2AllTest:
    def test_nvshmem_all_to_all(self, pool: RankPool) -> None:
        pool.run(a2a_nvshmem_all_to_all)

    def test_all_to_all_vdev(self, pool: RankPool) -> None:
        pool.run(a2a_all_to_all_vdev)

    @pytest.mark.parametrize("align", [1, 8, 16])
    def test_all_to_all_vdev_2d(self, pool: RankPool, align: int) -> None:
        pool.run(a2a_all_to_all_vdev_2d, align=align)

    def test_all_to_all_vdev_2d_offset(self, pool: RankPool) -> None:
        pool.run(a2a_all_to_all_vdev_2d_offset)


# ===================================================================== DispatchCombineTest (+ InSubgroups) ====


def dispatch_then_combine(ctx: RankContext, align: int, group: dist.ProcessGroup) -> None:
    """MoE dispatch (all_to_all_vdev_2d) then combine (all_to_all_vdev_2d_offset) over ``group`` must give back
    exactly the input, its splits and their exclusive prefix sums."""
    group_name = group.group_name
    ne, k, dtype = 8, 10, torch.float
    nsplits = ne * group.size()
    inp_splits = torch.randint(k, (nsplits,), dtype=torch.int64, device=ctx.device)
    inp_numel = inp_splits.sum().item()
    max_inp = k * nsplits
    max_out = max_inp * group.size()

    inp = symm_mem.empty(max_inp, dtype=dtype, device=ctx.device).copy_(
        torch.randn(max_inp, dtype=dtype, device=ctx.device)
    )
    out = symm_mem.empty(max_out, dtype=dtype, device=ctx.device).fill_(-1)
    in_splits = symm_mem.empty(nsplits, dtype=torch.int64, device=ctx.device).copy_(inp_splits)
    out_splits_offsets = symm_mem.empty((2, nsplits), dtype=torch.int64, device=ctx.device).fill_(-1)
    combine_out = symm_mem.empty(max_out, dtype=dtype, device=ctx.device).fill_(-1)
    combine_splits_offsets = symm_mem.empty((2, nsplits), dtype=torch.int64, device=ctx.device).fill_(-1)

    ctx.synchronize()
    dist.barrier(group=group)

    torch.ops.symm_mem.all_to_all_vdev_2d(inp, out, in_splits, out_splits_offsets, group_name, major_align=align)
    torch.ops.symm_mem.all_to_all_vdev_2d_offset(out, combine_out, out_splits_offsets, combine_splits_offsets, group_name)

    torch.testing.assert_close(combine_out[:inp_numel], inp[:inp_numel])
    torch.testing.assert_close(combine_splits_offsets[0], inp_splits)
    exclusive = torch.cat([torch.zeros(1, device=ctx.device), torch.cumsum(inp_splits, dim=0)[:-1]]).to(torch.int64)
    torch.testing.assert_close(combine_splits_offsets[1], exclusive)

    dist.barrier(group=group)
    ctx.synchronize()


def dc_dispatch_combine(ctx: RankContext, align: int) -> None:
    torch.manual_seed(42 + ctx.rank)
    _init_device(ctx)
    dispatch_then_combine(ctx, align, dist.group.WORLD)


def dc_dispatch_combine_subgroup(ctx: RankContext) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    torch.manual_seed(42 + ctx.rank)
    _init_device(ctx)
    ngroups = 2
    mesh = init_device_mesh(ctx.device_type, (ngroups, ctx.world_size // ngroups), mesh_dim_names=("dp", "ep"))
    dispatch_then_combine(ctx, align=8, group=mesh.get_group("ep"))


class DispatchCombineTest:
    @pytest.mark.parametrize("align", [1, 8, 16])
    def test_dispatch_combine(self, pool: RankPool, align: int) -> None:
        pool.run(dc_dispatch_combine, align=align)


class DispatchCombineInSubgroups:
    def test_dispatch_combine_subgroup(self, pool: RankPool) -> None:
        if pool.world_size < 4:
            pytest.skip("needs 4 ranks (upstream: skip_if_lt_x_gpu(4)); runs at W=4")
        pool.run(dc_dispatch_combine_subgroup)


# ====================================================================================== NVSHMEMTileCommTest ====
TILE_DTYPES = [torch.float, torch.half, torch.bfloat16]


def tile_tile_reduce(ctx: RankContext, tile_size: int, dtype: torch.dtype) -> None:
    full = 1024
    assert tile_size <= full
    _init_device(ctx)
    full_inp = symm_mem.empty(full, full, dtype=dtype, device=ctx.device).fill_(ctx.rank)
    full_out = symm_mem.empty(full, full, dtype=dtype, device=ctx.device).fill_(0)
    s = slice(tile_size, 2 * tile_size)
    root = 0
    torch.ops.symm_mem.tile_reduce(full_inp[s, s], full_out[s, s], root, _world())
    expected = torch.zeros_like(full_out)
    if ctx.rank == root:
        expected[s, s].fill_(ctx.world_size * (ctx.world_size - 1) / 2)
    torch.testing.assert_close(full_out, expected)
    dist.barrier()  # (not upstream) peers may still read this rank's tile


def tile_multi_root_tile_reduce(ctx: RankContext, tile_size: int, root_ratio: int, dtype: torch.dtype) -> None:
    full = 2048
    cols = 2
    rows = ctx.world_size // cols
    assert tile_size * cols <= full and tile_size * rows <= full
    _init_device(ctx)
    full_inp = symm_mem.empty(full, full, dtype=dtype, device=ctx.device).fill_(ctx.rank)
    full_out = symm_mem.empty(full, full, dtype=dtype, device=ctx.device).fill_(0)
    row_slices = [slice(i * tile_size, (i + 1) * tile_size) for i in range(rows)]
    col_slices = [slice(j * tile_size, (j + 1) * tile_size) for j in range(cols)]

    def tile_of(r: int) -> tuple[slice, slice]:
        return row_slices[r // cols], col_slices[r % cols]

    roots = list(range(ctx.world_size // root_ratio))
    in_tiles = [full_inp[tile_of(r)] for r in roots]
    mine = tile_of(ctx.rank)
    torch.ops.symm_mem.multi_root_tile_reduce(in_tiles, full_out[mine], roots, _world())
    expected = torch.zeros_like(full_out)
    if ctx.rank in roots:
        expected[mine].fill_(ctx.world_size * (ctx.world_size - 1) / 2)
    torch.testing.assert_close(full_out, expected)
    dist.barrier()  # (not upstream) peers may still read this rank's tiles


class NVSHMEMTileCommTest:
    # Upstream gates these on NVLS multicast (requires_nvls); xpushmem reduces tiles without multicast.
    @pytest.mark.parametrize("tile_size", [32, 128, 512])
    @pytest.mark.parametrize("dtype", TILE_DTYPES, ids=str)
    def test_tile_reduce(self, pool: RankPool, tile_size: int, dtype: torch.dtype) -> None:
        pool.run(tile_tile_reduce, tile_size=tile_size, dtype=dtype)

    @pytest.mark.parametrize("tile_size", [32, 128, 512])
    @pytest.mark.parametrize("root_ratio", [1, 2])
    @pytest.mark.parametrize("dtype", TILE_DTYPES, ids=str)
    def test_multi_root_tile_reduce(
        self, pool: RankPool, tile_size: int, root_ratio: int, dtype: torch.dtype
    ) -> None:
        if pool.world_size % 2:
            pytest.skip("the upstream case lays tiles out on 2 columns: it needs an even world size")
        pool.run(tile_multi_root_tile_reduce, tile_size=tile_size, root_ratio=root_ratio, dtype=dtype)
