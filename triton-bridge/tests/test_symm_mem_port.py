"""Port of the ``symm_mem`` kernel cases of PyTorch's ``test/distributed/test_symmetric_memory.py`` onto xpushmem's
``"NVSHMEM"`` backend (``xpushmem/torch/_symm_ops.py``).

Upstream's ``SymmMemCollectiveTest`` (one-shot / two-shot all-reduce, reduce-scatter and its corner cases),
``SymmMemSingleProcTest`` (``stream_write_value32``, ``memset32``) and the low-contention and
``has_multicast_support`` cases of ``SymmetricMemoryTest`` keep their names, loops, references and tolerances.
As in ``test_nvshmem_port.py`` only the plumbing differs: CPU tensors over gloo at world sizes 2 and 4 (XPU, one
rank per device, when torch sees one), a pool of ranks running each body, and no ``requires_cuda_p2p_access`` /
``skip_if_lt_x_gpu`` gates: cases run at every world size except where upstream's assertion needs 4 ranks
(``test_reduce_scatter_corner_cases``: 48 elements are divisible by 2 * 8 but not by 4 * 8).

Beyond upstream (marked): the upstream error messages of bad arguments, and that the multicast ops refuse.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from conftest import world_sizes
from torch._C._autograd import DeviceType
from torch._C._distributed_c10d import _SymmetricMemory
from torch.distributed._functional_collectives import all_gather_single

from _harness import RankContext, RankPool

BACKEND_NAME = "NVSHMEM"


@pytest.fixture(params=world_sizes(), ids=lambda w: f"W{w}")
def pool(request: pytest.FixtureRequest, pools) -> RankPool:  # noqa: ANN001
    return pools.get(request.param)


def _init_process(ctx: RankContext) -> None:
    if ctx.device_type != "cpu":
        torch.get_device_module(ctx.device_type).set_device(ctx.device)
    symm_mem.set_backend(BACKEND_NAME)
    torch.manual_seed(42 + ctx.rank)


def _world() -> str:
    return dist.group.WORLD.group_name


# ================================================================================== SymmMemCollectiveTest ====
def _verify_all_reduce_result(ctx: RankContext, inp: torch.Tensor, res: torch.Tensor) -> None:
    gathered_res = all_gather_single(res, 0, "0").view(ctx.world_size, -1)
    # Verify that the results across ranks are identical
    ctx.assertEqual((gathered_res == gathered_res[0, :]).all(dim=0).sum(), inp.numel())
    # Verify that the result are close to the sum of inputs across ranks
    gathered_inps = all_gather_single(inp, 0, "0").view(ctx.world_size, -1)
    torch.testing.assert_close(gathered_inps.sum(dim=0), res.view(-1), rtol=1e-01, atol=1e-01)


def _verify_reduce_scatter_result(ctx: RankContext, inp: torch.Tensor, res: torch.Tensor) -> None:
    gathered_res = all_gather_single(res, 0, "0").view(ctx.world_size, *res.shape)
    gathered_inps = all_gather_single(inp, 0, "0").view(ctx.world_size, *inp.shape)
    sum_inps = gathered_inps.sum(0)
    slice_width = sum_inps.shape[-1] // ctx.world_size
    for i in range(ctx.world_size):
        torch.testing.assert_close(
            gathered_res[i], sum_inps[..., i * slice_width : (i + 1) * slice_width], rtol=1e-01, atol=1.1e-01
        )


def coll_one_shot_all_reduce(ctx: RankContext) -> None:
    _init_process(ctx)
    group_name = _world()
    for dtype, size_bytes, _align_bytes, copy, offset in itertools.product(
        [torch.float, torch.bfloat16], [4, 8192, 8196], [8], [True, False], [0, 16]
    ):
        inp = symm_mem.empty(size_bytes // dtype.itemsize + offset, dtype=dtype, device=ctx.device)
        symm_mem.rendezvous(inp, group=group_name)
        if not copy:
            inp.normal_()
            res = torch.ops.symm_mem.one_shot_all_reduce(inp[offset:], "sum", group_name)
        if copy:
            local_inp = torch.randn_like(inp[offset:])
            res = torch.ops.symm_mem.one_shot_all_reduce_copy(inp[offset:], local_inp, "sum", group_name)
        _verify_all_reduce_result(ctx, local_inp if copy else inp[offset:], res)


def coll_one_shot_all_reduce_out(ctx: RankContext) -> None:
    """Beyond upstream (its out variants are exercised through Inductor): the _out variants write `out`, return
    it, and agree with the allocating variants."""
    _init_process(ctx)
    group_name = _world()
    for dtype in (torch.float, torch.bfloat16):
        inp = symm_mem.empty(1024, dtype=dtype, device=ctx.device)
        symm_mem.rendezvous(inp, group=group_name)
        inp.normal_()
        out = torch.full_like(inp, -1)
        ret = torch.ops.symm_mem.one_shot_all_reduce_out(inp, "sum", group_name, out)
        ctx.assertEqual(ret.data_ptr(), out.data_ptr())
        _verify_all_reduce_result(ctx, inp, out)
        ctx.assertEqual(torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", group_name), out)
        local = torch.randn(1024, dtype=dtype, device=ctx.device)
        out2 = torch.empty_like(local)
        ret2 = torch.ops.symm_mem.one_shot_all_reduce_copy_out(inp, local, "sum", group_name, out2)
        ctx.assertEqual(ret2.data_ptr(), out2.data_ptr())
        _verify_all_reduce_result(ctx, local, out2)
        # The copy variant leaves the local input in the symmetric buffer.
        ctx.assertEqual(inp, local)
        # Bit for bit the peers' values added in rank order in the dtype (upstream's load_and_reduce), for the
        # one-shot and both two-shot forms.
        gathered = all_gather_single(inp, 0, "0").view(ctx.world_size, -1)
        folded = gathered[0].clone()
        for r in range(1, ctx.world_size):
            folded += gathered[r]
        torch.testing.assert_close(out2, folded, rtol=0, atol=0)
        two = torch.empty_like(inp)
        torch.ops.symm_mem.two_shot_all_reduce_out(inp, "sum", group_name, two)
        torch.testing.assert_close(two, folded, rtol=0, atol=0)
        inp.copy_(local)
        torch.ops.symm_mem.two_shot_all_reduce_(inp, "sum", group_name)
        torch.testing.assert_close(inp, folded, rtol=0, atol=0)


def coll_two_shot_all_reduce(ctx: RankContext) -> None:
    _init_process(ctx)
    group_name = _world()
    for dtype, size_bytes, align_bytes, inplace in itertools.product(
        [torch.float, torch.bfloat16], [4, 8192, 8196], [8], [True, False]
    ):
        t = symm_mem.empty(16384, dtype=dtype, device=ctx.device).fill_(0)
        symm_mem.rendezvous(t, group=group_name)
        ctx.assertTrue(t.data_ptr() % 16 == 0)
        ctx.assertTrue(align_bytes % t.element_size() == 0)
        ctx.assertTrue(size_bytes % t.element_size() == 0)
        shift = align_bytes // t.element_size()
        numel = size_bytes // t.element_size()
        res = t[shift : shift + numel]
        res.normal_()
        inp = res.clone()
        if not inplace:
            out = torch.empty_like(inp)
            torch.ops.symm_mem.two_shot_all_reduce_out(res, "sum", group_name, out)
        else:
            torch.ops.symm_mem.two_shot_all_reduce_(res, "sum", group_name)
        # Head and tail should not be written
        ctx.assertTrue(t[:shift].eq(0).all().item())
        ctx.assertTrue(t[shift + numel :].eq(0).all().item())
        _verify_all_reduce_result(ctx, inp, res if inplace else out)


def coll_reduce_scatter(ctx: RankContext) -> None:
    _init_process(ctx)
    group_name = _world()
    for dtype, size_bytes, align_bytes, split_last_dim in itertools.product(
        [torch.float, torch.bfloat16], [128, 8192, 36 * 1024 * 16], [8], [True, False]
    ):
        t = symm_mem.empty(36 * 1024 * 16, dtype=dtype, device=ctx.device).fill_(0)
        symm_mem.rendezvous(t, group=group_name)
        ctx.assertTrue(t.data_ptr() % 16 == 0)
        ctx.assertTrue(align_bytes % t.element_size() == 0)
        ctx.assertTrue(size_bytes % t.element_size() == 0)
        shift = align_bytes // t.element_size()
        numel = size_bytes // t.element_size()
        res = t[shift : shift + numel].normal_()
        if split_last_dim:
            res = res.view(-1, 128 // t.element_size())
        inp = res.clone()
        out_size = list(inp.shape)
        out_size[-1] = inp.shape[-1] // ctx.world_size
        out = torch.empty(out_size, dtype=dtype, device=ctx.device)
        torch.ops.symm_mem.reduce_scatter_out(res, group_name, split_last_dim, out)
        # Head and tail should not be written
        ctx.assertTrue(t[:shift].eq(0).all().item())
        ctx.assertTrue(t[shift + numel :].eq(0).all().item())
        _verify_reduce_scatter_result(ctx, inp, out)


def coll_reduce_scatter_corner_cases(ctx: RankContext) -> None:
    _init_process(ctx)
    dtype = torch.bfloat16
    group_name = _world()
    t = symm_mem.empty(16384, dtype=dtype, device=ctx.device).fill_(0)
    symm_mem.rendezvous(t, group=group_name)
    res = t[:0]
    out_size = res.shape[0] // ctx.world_size
    out = torch.empty(out_size, dtype=dtype, device=ctx.device)
    torch.ops.symm_mem.reduce_scatter_out(res, group_name, False, out)
    res = t[:48]
    out_size = res.shape[0] // ctx.world_size
    out = torch.empty(out_size, dtype=dtype, device=ctx.device)
    with ctx.assertRaisesRegex(RuntimeError, "divisible"):
        torch.ops.symm_mem.reduce_scatter_out(res, group_name, False, out)
    res = t[: 2 * 48].view(2, 48)
    out = torch.empty(2, 48 // ctx.world_size, dtype=dtype, device=ctx.device)
    with ctx.assertRaisesRegex(RuntimeError, "divisible"):
        torch.ops.symm_mem.reduce_scatter_out(res, group_name, True, out)


def coll_bad_arguments(ctx: RankContext) -> None:
    """Beyond upstream: bad arguments raise upstream's errors (its TORCH_CHECK messages), on every rank alike,
    and the ops work afterwards."""
    _init_process(ctx)
    g = _world()
    ops = torch.ops.symm_mem
    t = symm_mem.empty(64, device=ctx.device).fill_(1)
    symm_mem.rendezvous(t, group=g)
    plain = torch.ones(64, device=ctx.device)
    with ctx.assertRaisesRegex(RuntimeError, "one_shot_all_reduce: only sum is supported for now"):
        ops.one_shot_all_reduce(t, "avg", g)
    with ctx.assertRaisesRegex(RuntimeError, r"one_shot_all_reduce: input must be allocated with empty_strided_p2p"):
        ops.one_shot_all_reduce(plain, "sum", g)
    with ctx.assertRaisesRegex(RuntimeError, "one_shot_all_reduce: input must be contiguous"):
        ops.one_shot_all_reduce(t.view(8, 8).t(), "sum", g)
    with ctx.assertRaisesRegex(RuntimeError, "one_shot_all_reduce: input/output size mismatch"):
        ops.one_shot_all_reduce_out(t, "sum", g, torch.empty(63, device=ctx.device))
    with ctx.assertRaisesRegex(RuntimeError, "local input size must be smaller than symm buffer size"):
        ops.one_shot_all_reduce_copy_out(
            t[:32], torch.ones(33, device=ctx.device), "sum", g, torch.empty(32, device=ctx.device)
        )
    with ctx.assertRaisesRegex(RuntimeError, r"one_shot_all_reduce<BFloat16>: input ptr \+ offset must be at least 4"):
        ops.one_shot_all_reduce(t.view(torch.bfloat16)[1:9], "sum", g)
    with ctx.assertRaisesRegex(RuntimeError, "one_shot_all_reduce<BFloat16>: input size must be at least 4"):
        ops.one_shot_all_reduce(t.view(torch.bfloat16)[:3], "sum", g)
    with ctx.assertRaisesRegex(NotImplementedError, "\"one_shot_all_reduce\" not implemented for 'Half'"):
        ops.one_shot_all_reduce(t.view(torch.half), "sum", g)
    with ctx.assertRaisesRegex(RuntimeError, "two_shot_all_reduce: only sum is supported for now"):
        ops.two_shot_all_reduce_(t, "max", g)
    with ctx.assertRaisesRegex(RuntimeError, "two_shot_all_reduce: output must be contiguous"):
        ops.two_shot_all_reduce_out(t[:16], "sum", g, torch.empty(32, device=ctx.device)[::2])
    with ctx.assertRaisesRegex(RuntimeError, "two_shot_all_reduce: input must be allocated with empty_strided_p2p"):
        ops.two_shot_all_reduce_(plain, "sum", g)
    with ctx.assertRaisesRegex(RuntimeError, "reduce_scatter expected 1D input"):
        ops.reduce_scatter_out(t.view(8, 8), g, False, torch.empty(64 // ctx.world_size, device=ctx.device))
    with ctx.assertRaisesRegex(RuntimeError, "reduce_scatter expected output last dim size"):
        ops.reduce_scatter_out(t.view(2, 32), g, True, torch.empty(2, 1, device=ctx.device))
    with ctx.assertRaisesRegex(RuntimeError, "reduce_scatter: input must be allocated with empty_strided_p2p"):
        ops.reduce_scatter_out(plain, g, False, torch.empty(64 // ctx.world_size, device=ctx.device))
    # Still usable, and the data unchanged by the refused calls.
    res = ops.one_shot_all_reduce(t, "sum", g)
    ctx.assertEqual(res, torch.full((64,), float(ctx.world_size), device=ctx.device))


def coll_multicast_ops_raise(ctx: RankContext) -> None:
    """Beyond upstream (whose multimem cases need multicast and are skipped without it): no multicast here, and
    the multicast ops say so."""
    _init_process(ctx)
    g = _world()
    ops = torch.ops.symm_mem
    ctx.assertFalse(_SymmetricMemory.has_multicast_support(DeviceType.CPU, 0))
    t = symm_mem.empty(64, device=ctx.device).fill_(1)
    hdl = symm_mem.rendezvous(t, group=g)
    ctx.assertEqual(hdl.multicast_ptr, 0)
    out = torch.empty(64 * ctx.world_size, device=ctx.device)
    calls = [
        lambda: ops.multimem_all_reduce_(t, "sum", g),
        lambda: ops.multimem_one_shot_all_reduce(t, "sum", g),
        lambda: ops.multimem_one_shot_all_reduce_out(t, "sum", g, torch.empty_like(t)),
        lambda: ops.multimem_all_gather_out(t, g, out),
        lambda: ops.memcpy_to_multicast_(t, t, 0, g),
        lambda: ops._low_contention_all_gather_ce_multicast(t, g),
        lambda: ops._low_contention_all_gather_ce_multicast_out(t, g, out),
    ]
    if hasattr(ops, "multimem_one_shot_reduce_out"):
        calls.append(lambda: ops.multimem_one_shot_reduce_out(t, "sum", 0, g, torch.empty_like(t)))
    for call in calls:
        with ctx.assertRaisesRegex(RuntimeError, "multicast support is required"):
            call()
    dist.barrier()


class SymmMemCollectiveTest:
    def test_one_shot_all_reduce(self, pool: RankPool) -> None:
        pool.run(coll_one_shot_all_reduce)

    def test_one_shot_all_reduce_out(self, pool: RankPool) -> None:
        pool.run(coll_one_shot_all_reduce_out)

    def test_two_shot_all_reduce(self, pool: RankPool) -> None:
        pool.run(coll_two_shot_all_reduce)

    def test_reduce_scatter(self, pool: RankPool) -> None:
        pool.run(coll_reduce_scatter)

    def test_reduce_scatter_corner_cases(self, pool: RankPool) -> None:
        if pool.world_size < 4:
            pytest.skip("upstream's 'divisible' errors need 4 ranks (48 % (2 * 8) == 0); runs at W=4")
        pool.run(coll_reduce_scatter_corner_cases)

    def test_bad_arguments(self, pool: RankPool) -> None:
        pool.run(coll_bad_arguments)

    def test_multicast_ops_raise(self, pool: RankPool) -> None:
        pool.run(coll_multicast_ops_raise)


# ============================================================= SymmetricMemoryTest: low-contention, multicast ====
def lc_all_gather(ctx: RankContext, symm_mem_input: bool) -> None:
    _init_process(ctx)
    if symm_mem_input:
        t = _SymmetricMemory.empty_strided_p2p(
            size=(64, 64), stride=(64, 1), dtype=torch.float32, device=ctx.device, group_name="0"
        ).fill_(ctx.rank)
    else:
        t = torch.full((64, 64), ctx.rank, dtype=torch.float32, device=ctx.device)
    res = torch.ops.symm_mem._low_contention_all_gather(t, "0")
    res = torch.ops._c10d_functional.wait_tensor(res)
    ctx.assertEqual(res.shape, (64 * ctx.world_size, 64))
    chunks = res.chunk(ctx.world_size)
    for r in range(ctx.world_size):
        ctx.assertTrue(chunks[r].eq(r).all())


def lc_reduce_scatter(ctx: RankContext, reduce_op: str, symm_mem_input: bool) -> None:
    _init_process(ctx)
    if symm_mem_input:
        t = _SymmetricMemory.empty_strided_p2p(
            size=(64, 64), stride=(64, 1), dtype=torch.float32, device=ctx.device, group_name="0"
        )
    else:
        t = torch.empty((64, 64), dtype=torch.float32, device=ctx.device)
    chunks = t.chunk(ctx.world_size)
    for r in range(ctx.world_size):
        chunks[r].fill_(r)
    res = torch.ops.symm_mem._low_contention_reduce_scatter(t, reduce_op, "0")
    res = torch.ops._c10d_functional.wait_tensor(res)
    ctx.assertEqual(res.shape, (64 // ctx.world_size, 64))
    if reduce_op == "sum":
        expect = ctx.rank * ctx.world_size
    elif reduce_op == "avg":
        expect = ctx.rank
    else:
        raise AssertionError(f"Unexpected reduce_op: {reduce_op}")
    ctx.assertTrue(res.eq(expect).all())


def lc_distinct_values(ctx: RankContext) -> None:
    """Beyond upstream (whose inputs are constant per chunk): every element distinct, both paths twice in a row
    (the workspace is reused), against gloo's all_gather / reduce_scatter; a bad reduce_op is refused."""
    _init_process(ctx)
    w = ctx.world_size
    for symm_input in (True, False):
        for _ in range(2):
            base = torch.arange(w * 8 * 4, dtype=torch.float32, device=ctx.device).view(w * 8, 4) + 1000 * ctx.rank
            if symm_input:
                t = symm_mem.empty(w * 8, 4, device=ctx.device).copy_(base)
            else:
                t = base.clone()
            ag = torch.ops.symm_mem._low_contention_all_gather(t, "0")
            ref = [torch.empty_like(t) for _ in range(w)]
            dist.all_gather(ref, base)
            ctx.assertEqual(ag, torch.cat(ref))
            rs = torch.ops.symm_mem._low_contention_reduce_scatter(t, "sum", "0")
            ctx.assertEqual(rs, sum(x.chunk(w)[ctx.rank] for x in ref))
    with ctx.assertRaisesRegex(ValueError, r"reduce_op \(max\) is not supported"):
        torch.ops.symm_mem._low_contention_reduce_scatter(torch.ones(w * 2, device=ctx.device), "max", "0")
    dist.barrier()


def sm_has_multicast_support(ctx: RankContext) -> None:
    # validate that has_multicast_support() returns "false" instead of throwing
    ctx.assertFalse(_SymmetricMemory.has_multicast_support(DeviceType.CPU, 0))


class SymmetricMemoryTest:
    def test_has_multicast_support(self, pool: RankPool) -> None:
        pool.run(sm_has_multicast_support)

    @pytest.mark.parametrize("symm_mem_input", [True, False])
    def test_low_contention_all_gather(self, pool: RankPool, symm_mem_input: bool) -> None:
        pool.run(lc_all_gather, symm_mem_input=symm_mem_input)

    @pytest.mark.parametrize("reduce_op", ["sum", "avg"])
    @pytest.mark.parametrize("symm_mem_input", [True, False])
    def test_low_contention_reduce_scatter(self, pool: RankPool, reduce_op: str, symm_mem_input: bool) -> None:
        pool.run(lc_reduce_scatter, reduce_op=reduce_op, symm_mem_input=symm_mem_input)

    def test_low_contention_distinct_values(self, pool: RankPool) -> None:
        pool.run(lc_distinct_values)


# ================================================================================== SymmMemSingleProcTest ====
# Upstream runs these in one process on cuda:0; here every rank of the pool runs them on its own device (the
# empty_strided_p2p of test_memset32 is a collective allocation).
def single_stream_write_value32(ctx: RankContext) -> None:
    tensor = torch.zeros(4, dtype=torch.uint32, device=ctx.device)
    expect = torch.tril(torch.ones(4, 4, device=ctx.device)).to(torch.uint32)
    for i in range(4):
        _SymmetricMemory.stream_write_value32(tensor, i, 1)
        torch.testing.assert_close(tensor, expect[i])
    with ctx.assertRaises(RuntimeError):
        _SymmetricMemory.stream_write_value32(tensor, offset=-1, val=1)
    with ctx.assertRaises(RuntimeError):
        _SymmetricMemory.stream_write_value32(tensor, offset=0, val=4294967296)
    # (not upstream) the top of the uint32 range, and the messages
    _SymmetricMemory.stream_write_value32(tensor, 3, 4294967295)
    ctx.assertEqual(tensor.view(torch.int32)[3].item(), -1)
    with ctx.assertRaisesRegex(RuntimeError, r"offset \(4\) exceeded the numel of the input \(4\)"):
        _SymmetricMemory.stream_write_value32(tensor, offset=4, val=1)
    with ctx.assertRaisesRegex(RuntimeError, "input must be a flat, contiguous uint32 tensor"):
        _SymmetricMemory.stream_write_value32(tensor.view(torch.int32), offset=0, val=1)


def single_memset32(ctx: RankContext) -> None:
    t = _SymmetricMemory.empty_strided_p2p(
        (64,), (1,), dtype=torch.uint32, device=ctx.device, group_name="0"
    ).fill_(0)
    _SymmetricMemory.memset32(t, offset=32, val=1, count=16)
    ctx.assertTrue(t[:32].eq(0).all())
    ctx.assertTrue(t[32:48].eq(1).all())
    ctx.assertTrue(t[48:].eq(0).all())
    with ctx.assertRaisesRegex(RuntimeError, "input must be a flat, contiguous uint32 tensor"):
        _SymmetricMemory.memset32(t.view(8, 8), offset=0, val=1, count=1)
    with ctx.assertRaisesRegex(RuntimeError, "input must be a flat, contiguous uint32 tensor"):
        _SymmetricMemory.memset32(t.view(torch.float32), offset=0, val=1, count=1)
    with ctx.assertRaisesRegex(RuntimeError, "offset must be greater than or equal to 0"):
        _SymmetricMemory.memset32(t, offset=-1, val=1, count=1)
    with ctx.assertRaisesRegex(RuntimeError, r"val must be in the range of.*\(uint32_t\)"):
        _SymmetricMemory.memset32(t, offset=0, val=4294967296, count=1)
    with ctx.assertRaisesRegex(RuntimeError, "count must be a positive integer"):
        _SymmetricMemory.memset32(t, offset=0, val=1, count=-1)
    with ctx.assertRaisesRegex(RuntimeError, "count must be a positive integer"):
        _SymmetricMemory.memset32(t, offset=0, val=1, count=0)
    with ctx.assertRaisesRegex(RuntimeError, r"offset \+ count.*exceeded the numel of the input"):
        _SymmetricMemory.memset32(t, offset=64, val=1, count=1)
    with ctx.assertRaisesRegex(RuntimeError, r"offset \+ count.*exceeded the numel of the input"):
        _SymmetricMemory.memset32(t, offset=0, val=1, count=65)
    _SymmetricMemory.memset32(t, offset=0, val=1, count=64)
    _SymmetricMemory.memset32(t, offset=63, val=1, count=1)
    # (not upstream) the values: all ones, then the uint32 maximum in a middle range
    ctx.assertTrue(t.view(torch.int32).eq(1).all())
    _SymmetricMemory.memset32(t, offset=5, val=4294967295, count=3)
    expect = torch.ones(64, dtype=torch.int32)
    expect[5:8] = -1
    ctx.assertEqual(t.view(torch.int32).cpu(), expect)
    dist.barrier()  # (not upstream) the allocation is collective: free it in step


class SymmMemSingleProcTest:
    def test_stream_write_value32(self, pool: RankPool) -> None:
        pool.run(single_stream_write_value32)

    def test_memset32(self, pool: RankPool) -> None:
        pool.run(single_memset32)


def coll_tensor_inside_allocation(ctx: RankContext) -> None:
    """Beyond upstream: a tensor whose storage starts inside a symmetric allocation (a MemPool sub-allocation,
    handle offset != 0) is reduced at its own place on every peer, not at the allocation's start."""
    import xpushmem.torch as xt

    _init_process(ctx)
    g = _world()
    base = symm_mem.empty(2048, device=ctx.device).fill_(-7)
    x = xt.shim.tensor_inside(base, 4096, 1024)
    ctx.assertEqual(symm_mem.rendezvous(x, group=g).offset, 4096)
    x.copy_(torch.arange(1024, dtype=torch.float, device=ctx.device) * (ctx.rank + 1))
    expect = torch.arange(1024, dtype=torch.float, device=ctx.device) * sum(range(1, ctx.world_size + 1))
    ctx.assertEqual(torch.ops.symm_mem.one_shot_all_reduce(x, "sum", g), expect)
    torch.ops.symm_mem.two_shot_all_reduce_(x, "sum", g)
    ctx.assertEqual(x, expect)
    n = 1024 // ctx.world_size
    out = torch.empty(n, device=ctx.device)
    x.copy_(torch.arange(1024, dtype=torch.float, device=ctx.device) * (ctx.rank + 1))
    torch.ops.symm_mem.reduce_scatter_out(x, g, False, out)
    ctx.assertEqual(out, expect[ctx.rank * n : (ctx.rank + 1) * n])
    ctx.assertTrue(base[:1024].eq(-7).all())
    dist.barrier()


class SymmMemOffsetTest:
    """Beyond upstream."""

    def test_tensor_inside_allocation(self, pool: RankPool) -> None:
        if pool.device_type != "cpu":
            pytest.skip("tensor_inside places a tensor inside a CPU allocation; XPU gets it from its MemPool")
        pool.run(coll_tensor_inside_allocation)


def test_xpu_device_kernels_register_against_torchs_schemas() -> None:
    """Beyond upstream: on a torch without XPU (nothing registered for XPU), the shim's XPU kernels of the nine
    device-kernel ops register in a scratch library, i.e. their C++ signatures match this torch's schemas (the
    dispatcher checks them), and every one gets an XPU kernel; what they do on a GPU is docs/HARDWARE.md's."""
    import xpushmem.torch as xt

    if xt._xpu_built():
        pytest.skip("this torch has XPU: the kernels are registered for real at import")
    expect = [n for n in xt.shim.symm_device_ops() if hasattr(torch.ops.symm_mem, n)]
    assert len(expect) == 9, expect
    assert sorted(xt.shim.check_xpu_symm_registration()) == sorted(expect)
    assert xt.missing_ops() == []
