"""The kernels of PyTorch's test/distributed/test_shmem_triton.py, written as upstream writes them (``@requires_shmem``
+ ``@triton.jit``, the same bodies), over ``shmem_backend = get_shmem_backend_module()``: ``xpushmem._xpushmem_triton``.
``requires_shmem`` is applied by :func:`decorated` once the device library is found; the bare JIT functions are
:data:`JIT`."""

import triton
import triton.language as tl

import xpushmem._xpushmem_triton as shmem_backend


@triton.jit
def my_put_kernel(dest, src, nelems, pe):
    shmem_backend.put(dest, src, nelems, pe)


@triton.jit
def my_get_kernel(dest, src, nelems, pe, nbi: tl.constexpr):
    if nbi:
        shmem_backend.get_nbi(dest, src, nelems, pe)
        shmem_backend.quiet()
    else:
        shmem_backend.get(dest, src, nelems, pe)


@triton.jit
def my_putmem_signal_block_kernel(dst, src, size_bytes, signal, sig_val, sig_op, peer):
    shmem_backend.putmem_signal_block(dst, src, size_bytes, signal, sig_val, sig_op, peer)


@triton.jit
def my_signal_wait_until_kernel(signal, cmp_op, cmp_val):
    shmem_backend.signal_wait_until(signal, cmp_op, cmp_val)


@triton.jit
def my_signal_op_kernel(sig_addr, signal, sig_op, peer):
    shmem_backend.signal_op(sig_addr, signal, sig_op, peer)


# Upstream's docstring call forms, with Python literals (issue #30, item 1): signal_op(ptr, 1, SIGNAL_SET, pe),
# signal_wait_until(sig, CMP_EQ, 42), put(dst, src, 5, 1), wait_until(flag, CMP_EQ, 42).
@triton.jit
def my_literal_signal_op_kernel(sig_addr):
    shmem_backend.signal_op(sig_addr, 42, 0, 1)


@triton.jit
def my_literal_signal_wait_until_kernel(signal):
    shmem_backend.signal_wait_until(signal, 0, 42)


@triton.jit
def my_literal_put_kernel(dest, src):
    shmem_backend.put(dest, src, 5, 1)


@triton.jit
def my_literal_wait_until_kernel(ivar):
    shmem_backend.wait_until(ivar, 0, 42)


@triton.jit
def my_wait_until_kernel(ivar, cmp_op, cmp_val):
    shmem_backend.wait_until(ivar, cmp_op, cmp_val)


@triton.jit
def my_fence_kernel():
    shmem_backend.fence()


@triton.jit
def my_put_with_fence_kernel(dst1, src1, dst2, src2, flag_dst, flag_src, nelems, peer):
    shmem_backend.put(dst1, src1, nelems, peer)
    shmem_backend.fence()
    shmem_backend.put(dst2, src2, nelems, peer)
    shmem_backend.fence()
    shmem_backend.put(flag_dst, flag_src, 1, peer)


@triton.jit
def my_put_with_quiet_kernel(dst, src, flag_dst, flag_src, nelems, peer):
    shmem_backend.put(dst, src, nelems, peer)
    shmem_backend.quiet()
    shmem_backend.put(flag_dst, flag_src, 1, peer)


@triton.jit
def my_barrier_test_kernel(dst, src, nelems):
    my_pe = shmem_backend.my_pe()
    n_pes = shmem_backend.n_pes()
    if my_pe == 0:
        p_src = src.to(tl.pointer_type(tl.int32))
        tl.store(p_src, 42)
        i = 1
        while i < n_pes:
            shmem_backend.put(dst, src, nelems, i)
            i += 1
    shmem_backend.barrier_all()
    if my_pe != 0:
        p_dst = dst.to(tl.pointer_type(tl.int32))
        received = tl.load(p_dst)
        tl.store(p_dst, received + 1)


@triton.jit
def my_barrier_all_kernel():
    shmem_backend.barrier_all()


@triton.jit
def my_sync_test_kernel(local_data, remote_data, nelems):
    my_pe = shmem_backend.my_pe()
    n_pes = shmem_backend.n_pes()
    p_local = local_data.to(tl.pointer_type(tl.int32))
    unique_value = my_pe + 100
    tl.store(p_local, unique_value)
    shmem_backend.sync_all()
    next_pe = (my_pe + 1) % n_pes
    shmem_backend.get(remote_data, local_data, nelems, next_pe)


@triton.jit
def my_alltoall_kernel(team_handle, dst, src, nelems_per_pe):
    shmem_backend.alltoall(team_handle, dst, src, nelems_per_pe)


@triton.jit
def my_broadcast_kernel(team_handle, dst, src, nelems, pe_root):
    shmem_backend.broadcast(team_handle, dst, src, nelems, pe_root)


@triton.jit
def my_reduce_kernel(team_handle, dest_tensor, source_tensor, nreduce, operation: tl.constexpr):
    shmem_backend.reduce(team_handle, dest_tensor, source_tensor, nreduce, operation)
