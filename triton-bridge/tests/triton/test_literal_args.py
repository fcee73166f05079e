"""Upstream's call forms compile (issue #30, item 1): every example in the docstrings of PyTorch's
``_nvshmem_triton`` passes Python literals and ``tl.constexpr`` values for counts, PEs, signal values and operators,
comparison values and teams (``signal_op(remote_signal_ptr, 1, NVSHMEM_SIGNAL_SET, target_pe)``,
``signal_wait_until(signal_ptr, NVSHMEM_CMP_EQ, 42)``, ``put(dest, src, 100, 1)``, ...). Each kernel below is one
of those examples written against ``xpushmem._xpushmem_triton``, compiled by triton-xpu for an XPU target; it must
compile and import the device-library function the example names. The same calls with the values as
``tl.constexpr`` kernel parameters compile too, and a kernel whose PE is an int64 value (a loaded word) as well."""

from __future__ import annotations

import pytest
import triton
import triton.language as tl

from xpushmem import _xpushmem_triton as shmem
from _xpu import compile_xpu
from test_externs import imports

# Upstream's docstrings name the operators as module constants.
CMP_EQ: tl.constexpr = tl.constexpr(shmem.CMP_EQ)
SIGNAL_SET: tl.constexpr = tl.constexpr(shmem.SIGNAL_SET)


@triton.jit
def k_put(dest, src):
    shmem.put(dest, src, 100, 1)


@triton.jit
def k_get(dest, src):
    shmem.get(dest, src, 100, 0)


@triton.jit
def k_get_nbi(dest, src):
    shmem.get_nbi(dest, src, 100, 0)
    shmem.quiet()


@triton.jit
def k_putmem_signal_block(dst_ptr, src_ptr, sig_ptr, target_pe):
    shmem.putmem_signal_block(dst_ptr, src_ptr, 1024, sig_ptr, 1, SIGNAL_SET, target_pe)


@triton.jit
def k_wait_until(flag):
    shmem.wait_until(flag, CMP_EQ, 1)


@triton.jit
def k_signal_wait_until(signal_ptr):
    shmem.signal_wait_until(signal_ptr, CMP_EQ, 42)


@triton.jit
def k_signal_op(remote_signal_ptr, target_pe):
    shmem.signal_op(remote_signal_ptr, 1, SIGNAL_SET, target_pe)


@triton.jit
def k_signal_op_all_literal(remote_signal_ptr):
    shmem.signal_op(remote_signal_ptr, 1, 0, 1)


@triton.jit
def k_fence(dst, src, dst2, src2, nelems, target_pe):
    shmem.put(dst, src, nelems, target_pe)
    shmem.fence()
    shmem.put(dst2, src2, nelems, target_pe)


@triton.jit
def k_n_pes(dst, src, size):
    total_pes = shmem.n_pes()
    my_rank = shmem.my_pe()
    if my_rank == 0:
        for peer in range(1, total_pes):
            shmem.put(dst, src, size, peer)


@triton.jit
def k_barrier_sync():
    shmem.barrier_all()
    shmem.sync_all()


@triton.jit
def k_alltoall(dest, src):
    shmem.alltoall(0, dest, src, 10)


@triton.jit
def k_broadcast(dest, src):
    shmem.broadcast(0, dest, src, 100, 0)


@triton.jit
def k_reduce(dest, src):
    shmem.reduce(0, dest, src, 100, "sum")


# The same calls with every scalar a constexpr parameter of the kernel.
@triton.jit
def k_constexpr(dest, src, sig, flag, N: tl.constexpr, PE: tl.constexpr, VAL: tl.constexpr, OP: tl.constexpr,
                CMP: tl.constexpr, TEAM: tl.constexpr):
    shmem.put(dest, src, N, PE)
    shmem.get(dest, src, N, PE)
    shmem.get_nbi(dest, src, N, PE)
    shmem.putmem_signal_block(dest, src, N, sig, VAL, OP, PE)
    shmem.signal_op(sig, VAL, OP, PE)
    shmem.signal_wait_until(sig, CMP, VAL)
    shmem.wait_until(flag, CMP, VAL)
    shmem.alltoall(TEAM, dest, src, N)
    shmem.broadcast(TEAM, dest, src, N, PE)
    shmem.reduce(TEAM, dest, src, N, "sum")


# A PE (and a signal value) that is an int64 value in the kernel: loaded from memory.
@triton.jit
def k_int64_pe(sig, pes):
    pe = tl.load(pes)
    shmem.signal_op(sig, pe, SIGNAL_SET, pe)


P = "*i64"
CONSTEXPRS = {"N": 16, "PE": 1, "VAL": 42, "OP": shmem.SIGNAL_SET, "CMP": shmem.CMP_EQ, "TEAM": 0}
CASES = {
    "put": (k_put, {"dest": P, "src": P}, {}, {"xpushmemx_putmem_work_group"}),
    "get": (k_get, {"dest": P, "src": P}, {}, {"xpushmemx_getmem_work_group"}),
    "get_nbi": (k_get_nbi, {"dest": P, "src": P}, {}, {"xpushmemx_getmem_nbi_work_group", "xpushmem_quiet"}),
    "putmem_signal_block": (k_putmem_signal_block, {"dst_ptr": "*i8", "src_ptr": "*i8", "sig_ptr": P,
                                                    "target_pe": "i32"}, {},
                            {"xpushmemx_putmem_signal_work_group"}),
    "wait_until": (k_wait_until, {"flag": "*i32"}, {}, {"xpushmem_int_wait_until"}),
    "signal_wait_until": (k_signal_wait_until, {"signal_ptr": P}, {}, {"xpushmem_signal_wait_until"}),
    "signal_op": (k_signal_op, {"remote_signal_ptr": P, "target_pe": "i32"}, {}, {"xpushmemx_signal_op"}),
    "signal_op_all_literal": (k_signal_op_all_literal, {"remote_signal_ptr": P}, {}, {"xpushmemx_signal_op"}),
    "fence": (k_fence, {"dst": P, "src": P, "dst2": P, "src2": P, "nelems": "i32", "target_pe": "i32"}, {},
              {"xpushmemx_putmem_work_group", "xpushmem_fence"}),
    "n_pes": (k_n_pes, {"dst": P, "src": P, "size": "i32"}, {},
              {"xpushmem_n_pes", "xpushmem_my_pe", "xpushmemx_putmem_work_group"}),
    "barrier_sync": (k_barrier_sync, {}, {}, {"xpushmemx_barrier_all_work_group", "xpushmemx_sync_all_work_group"}),
    "alltoall": (k_alltoall, {"dest": P, "src": P}, {}, {"xpushmemx_alltoallmem_work_group"}),
    "broadcast": (k_broadcast, {"dest": P, "src": P}, {}, {"xpushmemx_broadcastmem_work_group"}),
    "reduce": (k_reduce, {"dest": P, "src": P}, {}, {"xpushmemx_int64_sum_reduce_work_group"}),
    "constexpr_params": (
        k_constexpr,
        {"dest": P, "src": P, "sig": P, "flag": "*i32", **{k: "constexpr" for k in CONSTEXPRS}},
        CONSTEXPRS,
        {"xpushmemx_putmem_work_group", "xpushmemx_getmem_work_group", "xpushmemx_getmem_nbi_work_group",
         "xpushmemx_putmem_signal_work_group", "xpushmemx_signal_op", "xpushmem_signal_wait_until",
         "xpushmem_int_wait_until", "xpushmemx_alltoallmem_work_group", "xpushmemx_broadcastmem_work_group",
         "xpushmemx_int64_sum_reduce_work_group"},
    ),
    "int64_pe": (k_int64_pe, {"sig": P, "pes": P}, {}, {"xpushmemx_signal_op"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_upstream_call_form_compiles(case: str) -> None:
    fn, sig, constexprs, expected = CASES[case]
    k = compile_xpu(fn, sig, constexprs, threads_per_warp=16)
    assert imports(k.asm["spv"]) == expected
