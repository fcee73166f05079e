"""One PE of the Triton SHMEM tests: ``xpushmem-run -n N python pe_shmem_triton.py THREADS_PER_WARP CASE...``.

Each case is the body of the upstream ``SHMEMTritonTest`` test of the same name (test/distributed/test_shmem_triton.py),
with the kernels of :mod:`kernels` decorated with ``requires_shmem`` (PyTorch's dispatch, XPU branch installed by
:mod:`xpushmem.torch`'s logic) and launched through :mod:`_ze_launch`. The torch pieces that need an XPU torch are
replaced by xpushmem's C API: ``symm_mem.empty`` + ``rendezvous`` by ``xpushmem_malloc`` on the device heap (a CPU
tensor over it: ze-emu's device memory is host-visible), ``dist.barrier`` by ``xpushmem_barrier_all``, the
signal pad by a symmetric int64 word. References are computed with torch on CPU.
"""

from __future__ import annotations

import ctypes
import sys

import torch

import xpushmem
import xpushmem._xpushmem_triton as shmem_backend
import triton
import triton.language as tl
from triton.language import core

from _ze_launch import TritonXpuKernel, Ze, ZeError

LIB = ctypes.CDLL(str(xpushmem.lib_path()))
LIB.xpushmem_malloc.restype = ctypes.c_void_p
LIB.xpushmem_malloc.argtypes = [ctypes.c_size_t]
LIB.xpushmem_last_error.restype = ctypes.c_char_p


def check(rc: int, call: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{call}: {LIB.xpushmem_last_error().decode()}")


def symm_empty(numel: int, dtype: torch.dtype) -> torch.Tensor:
    """A symmetric tensor on the device heap (collective)."""
    nbytes = max(numel * dtype.itemsize, 8)
    ptr = LIB.xpushmem_malloc(nbytes)
    if not ptr:
        raise RuntimeError(f"xpushmem_malloc({nbytes}): {LIB.xpushmem_last_error().decode()}")
    buf = (ctypes.c_char * nbytes).from_address(ptr)
    return torch.frombuffer(buf, dtype=torch.uint8)[: numel * dtype.itemsize].view(dtype)


def barrier() -> None:
    check(LIB.xpushmem_barrier_all(), "xpushmem_barrier_all")


class Ctx:
    def __init__(self, tpw: int) -> None:
        import kernels as K
        import xpushmem.torch  # noqa: F401  (installs the XPU branch of torch's _shmem_triton)
        from torch.distributed._symmetric_memory._shmem_triton import requires_shmem

        self.rank = LIB.xpushmem_my_pe()
        self.world_size = LIB.xpushmem_n_pes()
        self.ze = Ze(LIB)
        self.k = {name: TritonXpuKernel(requires_shmem(getattr(K, name)), self.ze, threads_per_warp=tpw)
                  for name in dir(K) if name.startswith("my_")}

    def __getattr__(self, name: str) -> TritonXpuKernel:
        return self.k[name]


def test_triton_put(c: Ctx) -> None:
    nelems, dtype, val = 5, torch.int64, 42 + c.rank
    src = symm_empty(nelems, dtype)
    dst = symm_empty(nelems, dtype).fill_(-999)
    for i in range(nelems):
        src[i] = val * 10 + i
    barrier()
    peer = 1 - c.rank
    if c.rank == 0:
        c.my_put_kernel[(1,)](dst, src, nelems, peer)
    barrier()
    if c.rank == 1:
        torch.testing.assert_close(dst, torch.tensor([420 + i for i in range(nelems)], dtype=dtype))


def _get(c: Ctx, nbi: bool) -> None:
    numel, dtype, val = 8, torch.int8, 7
    inp = symm_empty(numel, dtype).fill_(val if c.rank == 0 else -1)
    out = symm_empty(numel, dtype).fill_(-1)
    barrier()
    peer = 1 - c.rank
    if c.rank == 1:
        c.my_get_kernel[(1,)](out, inp, numel, peer, nbi=nbi)
        torch.testing.assert_close(out, val * torch.ones(numel, dtype=dtype))
    barrier()


def test_triton_get(c: Ctx) -> None:
    _get(c, nbi=False)


def test_triton_get_nbi(c: Ctx) -> None:
    _get(c, nbi=True)


def test_triton_get_ring(c: Ctx) -> None:
    numel, dtype = 8, torch.int8
    inp = symm_empty(numel, dtype).fill_(c.rank)
    out = symm_empty(numel, dtype).fill_(-1)
    barrier()
    peer = (c.rank - 1) % c.world_size
    c.my_get_kernel[(1,)](out, inp, numel, peer, nbi=False)
    torch.testing.assert_close(out, peer * torch.ones(numel, dtype=dtype))
    barrier()


def _put_signal(c: Ctx, sig_op: int, sig_val: int) -> None:
    msg_size_bytes, dtype = 8, torch.int8
    numel = msg_size_bytes // dtype.itemsize
    val = 11
    inp = symm_empty(numel, dtype).fill_(val)
    out = symm_empty(numel, dtype).fill_(-1)
    flag = symm_empty(1, torch.int64).fill_(0)
    barrier()
    peer = 1 - c.rank
    if c.rank == 0:
        c.my_putmem_signal_block_kernel[(1, 1, 1)](out, inp, size_bytes=msg_size_bytes, signal=flag,
                                                   sig_val=sig_val, sig_op=sig_op, peer=peer)
    if c.rank == 1:
        c.my_signal_wait_until_kernel[(1, 1, 1)](flag, cmp_op=shmem_backend.CMP_EQ, cmp_val=sig_val)
        torch.testing.assert_close(out, val * torch.ones(numel, dtype=dtype))
        torch.testing.assert_close(flag, torch.tensor([sig_val], dtype=torch.int64))
    barrier()


def test_triton_put_signal_set(c: Ctx) -> None:
    _put_signal(c, shmem_backend.SIGNAL_SET, 1)


def test_triton_put_signal_add(c: Ctx) -> None:
    _put_signal(c, shmem_backend.SIGNAL_ADD, 16)


def test_triton_wait_until(c: Ctx) -> None:
    peer = 1 - c.rank
    flag = symm_empty(1, torch.int32).fill_(0)
    expected_flag = symm_empty(1, torch.int32).fill_(42)
    barrier()
    if c.rank == 0:
        c.my_wait_until_kernel[(1,)](flag, cmp_op=shmem_backend.CMP_EQ, cmp_val=42)
        torch.testing.assert_close(flag, torch.tensor([42], dtype=torch.int32))
    if c.rank == 1:
        c.my_put_kernel[(1,)](flag, expected_flag, 1, peer)
    barrier()


def test_triton_signal_wait_until(c: Ctx) -> None:
    _put_signal(c, shmem_backend.SIGNAL_SET, 1)


def test_triton_literal_args(c: Ctx) -> None:
    """Upstream's docstring call forms with literal arguments (issue #30, item 1), run: PE 0 puts 5 elements to
    PE 1 and signals it with signal_op(sig, 42, SIGNAL_SET, 1); PE 1 waits with signal_wait_until(sig, CMP_EQ, 42)
    and wait_until(flag, CMP_EQ, 42)."""
    dtype = torch.int64
    src = symm_empty(5, dtype)
    dst = symm_empty(5, dtype).fill_(-1)
    for i in range(5):
        src[i] = 100 + i
    sig = symm_empty(1, torch.int64).fill_(0)
    flag = symm_empty(1, torch.int32).fill_(0)
    flag_src = symm_empty(1, torch.int32).fill_(42)
    barrier()
    if c.rank == 0:
        c.my_literal_put_kernel[(1,)](dst, src)
        c.my_put_kernel[(1,)](flag, flag_src, 1, 1)
        c.my_literal_signal_op_kernel[(1,)](sig)
    if c.rank == 1:
        c.my_literal_signal_wait_until_kernel[(1,)](sig)
        c.my_literal_wait_until_kernel[(1,)](flag)
        torch.testing.assert_close(sig, torch.tensor([42], dtype=torch.int64))
        torch.testing.assert_close(flag, torch.tensor([42], dtype=torch.int32))
    barrier()
    if c.rank == 1:
        torch.testing.assert_close(dst, torch.tensor([100 + i for i in range(5)], dtype=dtype))


def test_triton_fence(c: Ctx) -> None:
    peer, dtype, numel = 1 - c.rank, torch.int8, 8
    inp1 = symm_empty(numel, dtype).fill_(10)
    inp2 = symm_empty(numel, dtype).fill_(20)
    out1 = symm_empty(numel, dtype).fill_(-1)
    out2 = symm_empty(numel, dtype).fill_(-1)
    flag = symm_empty(1, torch.int32).fill_(0)
    flag_update_val = symm_empty(1, torch.int32).fill_(1)
    barrier()
    if c.rank == 0:
        c.my_put_with_fence_kernel[(1,)](out1, inp1, out2, inp2, flag, flag_update_val, nelems=numel, peer=peer)
    elif c.rank == 1:
        c.my_wait_until_kernel[(1,)](flag, cmp_op=shmem_backend.CMP_EQ, cmp_val=1)
        torch.testing.assert_close(out1, 10 * torch.ones(numel, dtype=dtype))
        torch.testing.assert_close(out2, 20 * torch.ones(numel, dtype=dtype))
    barrier()


def test_triton_quiet(c: Ctx) -> None:
    peer, dtype, numel = 1 - c.rank, torch.int8, 8
    inp = symm_empty(numel, dtype).fill_(15)
    out = symm_empty(numel, dtype).fill_(-1)
    flag = symm_empty(1, torch.int32).fill_(0)
    flag_update_val = symm_empty(1, torch.int32).fill_(42)
    barrier()
    if c.rank == 1:
        c.my_put_with_quiet_kernel[(1,)](out, inp, flag, flag_update_val, nelems=numel, peer=peer)
    elif c.rank == 0:
        c.my_wait_until_kernel[(1,)](flag, cmp_op=shmem_backend.CMP_EQ, cmp_val=42)
        torch.testing.assert_close(out, 15 * torch.ones(numel, dtype=dtype))
    barrier()


def test_triton_barrier(c: Ctx) -> None:
    src = symm_empty(1, torch.int32).fill_(0)
    dst = symm_empty(1, torch.int32).fill_(0)
    barrier()
    c.my_barrier_test_kernel[(1,)](dst, src, nelems=1, launch_cooperative_grid=True, num_ctas=1)
    barrier()
    if c.rank == 0:
        torch.testing.assert_close(src, torch.tensor([42], dtype=torch.int32))
    else:
        torch.testing.assert_close(dst, torch.tensor([43], dtype=torch.int32))


def test_triton_sync(c: Ctx) -> None:
    local_data = symm_empty(1, torch.int32).fill_(0)
    remote_data = symm_empty(1, torch.int32).fill_(0)
    barrier()
    c.my_sync_test_kernel[(1,)](local_data, remote_data, nelems=1, launch_cooperative_grid=True, num_ctas=1)
    torch.testing.assert_close(local_data, torch.tensor([c.rank + 100], dtype=torch.int32))
    next_rank = (c.rank + 1) % c.world_size
    torch.testing.assert_close(remote_data, torch.tensor([next_rank + 100], dtype=torch.int32))
    barrier()


def test_triton_alltoall(c: Ctx) -> None:
    nelems_per_pe, dtype, world = 2, torch.int64, c.world_size
    src = symm_empty(nelems_per_pe * world, dtype)
    for i in range(world):
        src[i * nelems_per_pe : (i + 1) * nelems_per_pe] = c.rank * 100 + i
    dst = symm_empty(nelems_per_pe * world, dtype).fill_(-1)
    barrier()
    c.my_alltoall_kernel[(1,)](0, dst, src, nelems_per_pe, launch_cooperative_grid=True)
    barrier()
    for i in range(world):
        actual = dst[i * nelems_per_pe : (i + 1) * nelems_per_pe]
        torch.testing.assert_close(actual, torch.full_like(actual, i * 100 + c.rank))


def test_triton_broadcast(c: Ctx) -> None:
    nelems, dtype, pe_root = 4, torch.int64, 0
    src = symm_empty(nelems, dtype)
    dst = symm_empty(nelems, dtype).fill_(-999)
    if c.rank == pe_root:
        for i in range(nelems):
            src[i] = 100 + i
    else:
        src.fill_(-1)
    barrier()
    c.my_broadcast_kernel[(1,)](0, dst, src, nelems, pe_root, launch_cooperative_grid=True)
    barrier()
    torch.testing.assert_close(dst, torch.tensor([100 + i for i in range(nelems)], dtype=dtype))


DTYPES = {"int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
          "uint8": torch.uint8, "float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
          "bfloat16": torch.bfloat16}


def _reduce(c: Ctx, dtype: torch.dtype, operation: str, values) -> None:  # noqa: ANN001
    """Every rank contributes values(rank); the reference is torch's reduction of all ranks' rows on CPU."""
    rows = torch.stack([torch.tensor(values(r), dtype=torch.float64) for r in range(c.world_size)])
    ref = {"sum": rows.sum(0), "min": rows.min(0).values, "max": rows.max(0).values, "prod": rows.prod(0)}
    expected = ref[operation].to(dtype)
    src = symm_empty(rows.shape[1], dtype)
    src.copy_(rows[c.rank].to(dtype))
    dst = symm_empty(rows.shape[1], dtype).fill_(-1)
    barrier()
    c.my_reduce_kernel[(1,)](0, dst, src, rows.shape[1], operation=operation, launch_cooperative_grid=True)
    barrier()
    torch.testing.assert_close(dst, expected)


def test_triton_sum_reduce(c: Ctx, dtype: str) -> None:
    _reduce(c, DTYPES[dtype], "sum", lambda r: [(r + 1) * (i + 1) for i in range(3)])


def test_triton_minmax_reduce(c: Ctx, dtype: str) -> None:
    def values(r: int) -> list[int]:  # upstream's: rank 0 [10, 20], rank 1 [15, 5], rank 2 [20, -10], ...
        return [10 + r * 5, 20 - r * 15]

    _reduce(c, DTYPES[dtype], "min", values)
    _reduce(c, DTYPES[dtype], "max", values)


def test_triton_prod_reduce(c: Ctx, dtype: str) -> None:
    # upstream's values: 1 or 2, so that no product overflows int8
    _reduce(c, DTYPES[dtype], "prod", lambda r: [1 if r % 2 == 0 else 2, 1, 1 if (r // 2) % 2 == 0 else 2])


@triton.jit
def _launcher_probe(x, y, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    off = pid * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    v = tl.load(x + off, mask=m, other=0)
    total = tl.sum(v, axis=0)  # a reduction across the work-group's sub-groups: local memory
    tl.store(y + off, v + total + pid, mask=m)


def test_launcher(c: Ctx) -> None:
    """The launcher itself: several programs (work-groups), a runtime int and a constexpr, and the trailing
    local-memory argument of a kernel with metadata.shared > 0; against torch's CPU result."""
    from types import SimpleNamespace

    k = TritonXpuKernel(SimpleNamespace(jit_func=_launcher_probe, extern_libs={}), c.ze,
                        threads_per_warp=c.k["my_put_kernel"].threads_per_warp)
    n, block = 300, 128
    x = symm_empty(n, torch.int32)
    x.copy_(torch.arange(n, dtype=torch.int32) * (c.rank + 1) - 7)
    y = symm_empty(n, torch.int32).fill_(-1)
    k[(3,)](x, y, n, BLOCK=block)
    ((loaded, _),) = k._loaded.values()
    assert loaded.compiled.metadata.shared > 0, "the probe was meant to use local memory"
    expected = torch.empty(n, dtype=torch.int32)
    for pid in range(3):
        blk = x[pid * block : min(n, (pid + 1) * block)]
        expected[pid * block : pid * block + len(blk)] = blk + blk.sum() + pid
    torch.testing.assert_close(y, expected)


@triton.jit
def my_missing_symbol_kernel(x):
    _missing_function(x.to(tl.int64))


@core.extern
def _missing_function(x, _builder=None, _semantic=None):  # noqa: ANN001, ANN202
    """A device function the library does not define."""
    return shmem_backend._call("xpushmemx_no_such_function", [x], ("int64",), "int32", False, _builder, _semantic)


def test_missing_symbol(c: Ctx) -> None:
    """A kernel calling a function the device library lacks compiles (an Import) and fails to load with an error
    naming the function."""
    from torch.distributed._symmetric_memory._shmem_triton import requires_shmem

    k = TritonXpuKernel(requires_shmem(my_missing_symbol_kernel), c.ze)
    x = symm_empty(1, torch.int64)
    try:
        k[(1,)](x)
    except ZeError as e:
        assert "xpushmemx_no_such_function" in str(e), str(e)
        print(f"error as expected: {str(e)[:300]}")
    else:
        raise AssertionError("a kernel calling a missing device function was launched")


def main() -> None:
    """Runs the cases named on the command line in order (``NAME`` or ``NAME:DTYPE``); prints one line per passed
    case. The first failure ends the PE with its traceback (xpushmem-run then stops the job)."""
    tpw, cases = int(sys.argv[1]), sys.argv[2:]
    check(LIB.xpushmem_init(), "xpushmem_init")
    c = Ctx(tpw)
    for case in cases:
        name, _, arg = case.partition(":")
        globals()[name](c, *([arg] if arg else []))
        barrier()
        print(f"PASSED {case} pe={c.rank} n_pes={c.world_size} threads_per_warp={tpw}", flush=True)
    LIB.xpushmem_finalize()


if __name__ == "__main__":
    main()
