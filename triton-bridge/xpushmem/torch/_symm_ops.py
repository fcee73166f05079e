"""The rest of ``symm_mem``'s kernels for CPU and XPU tensors on the ``"NVSHMEM"`` (xpushmem) allocator.

PyTorch registers these for CUDA only (``CUDASymmetricMemoryOps.cu`` and, for the low-contention collectives,
``torch/distributed/_symmetric_memory/__init__.py``). Here they are registered for the CPU dispatch key (and for
XPU when torch is built with XPU), with upstream's argument checks, error messages and data movement:

* ``one_shot_all_reduce[_out]``, ``one_shot_all_reduce_copy[_out]``: (copy the local input into this rank's
  symmetric buffer,) barrier, every rank reduces the whole tensor from all peers' buffers, barrier;
* ``two_shot_all_reduce_`` / ``two_shot_all_reduce_out``: each rank reduces its slice of the tensor (upstream's
  partition) and writes it to every peer (in place) or to its own buffer, then gathers the slices (out of place);
* ``reduce_scatter_out`` (1-D, or ``split_last_dim``): each rank reduces its slice (of the flat tensor, or of the
  last dimension) into ``output``;
* ``memset32_`` / ``stream_write_value32_``: 32-bit writes into a flat uint32 tensor (ordered on the current
  stream on XPU; on CPU, immediate);
* ``_low_contention_all_gather`` / ``_low_contention_reduce_scatter``: upstream's pull/push algorithms over the
  handle's buffers, with the symmetric workspace when the input is not symmetric;
* ``_async_input_mm``: a matmul whose input ``a`` arrives in row chunks, each announced by its word of
  ``a_chunk_signals`` becoming 1; the chunks are consumed in upstream's order (from ``a_chunk_pivot``, wrapping),
  each after its signal, with ``torch.mm`` on the chunk (host code, bounded waits).

Reductions: ``"sum"`` over float32 and bfloat16, as upstream (other dtypes raise upstream's
``NotImplementedError``). Peers' values are added in rank order (0, 1, ..., W-1) in the tensor's dtype, as
upstream's ``load_and_reduce`` does, so every rank gets bit-identical results. Synchronisation is the handle's
``barrier()`` (signal pad channel 0, with the backend's timeout), the same pad words upstream's kernels use.

The multicast ops (``multimem_*``, ``memcpy_to_multicast_``, ``_low_contention_all_gather_ce_multicast[_out]``)
raise ``RuntimeError``: Intel GPUs (and host memory) have no NVLink SHARP multicast, ``has_multicast_support()`` is
false and ``multicast_ptr`` is 0.

On XPU, the C++ shim registers the first nine (one-/two-shot all-reduce, ``reduce_scatter_out``, ``memset32_``,
``stream_write_value32_``; ``shim.symm_device_ops()``) as device kernels on the current stream
(``ops/device/symm_mem.cl`` through the ``xpushmem_ops_*_on_queue`` C entry points, with the same checks and
messages); this module registers the low-contention collectives (torch XPU copies over the peers' buffers between
the handle's barriers, which on XPU are the ``xpo_pad`` kernel on the current stream) and the multicast refusals for
XPU. See docs/OPS.md.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import torch
import torch.distributed  # noqa: F401  (loads c10d: the _SymmetricMemory binding)
import torch.distributed._symmetric_memory as symm_mem
from torch._C._distributed_c10d import _SymmetricMemory

__all__ = ["MULTICAST_OPS", "OPS", "register"]

# The ops this module implements (dispatcher names in the symm_mem namespace).
OPS = (
    "one_shot_all_reduce",
    "one_shot_all_reduce_out",
    "one_shot_all_reduce_copy",
    "one_shot_all_reduce_copy_out",
    "two_shot_all_reduce_",
    "two_shot_all_reduce_out",
    "reduce_scatter_out",
    "memset32_",
    "stream_write_value32_",
    "_low_contention_all_gather",
    "_low_contention_reduce_scatter",
    "_async_input_mm",
)
# The ops that need NVLink SHARP multicast: registered to raise.
MULTICAST_OPS = (
    "multimem_all_reduce_",
    "multimem_one_shot_all_reduce",
    "multimem_one_shot_all_reduce_out",
    "multimem_one_shot_reduce_out",
    "multimem_all_gather_out",
    "memcpy_to_multicast_",
    "_low_contention_all_gather_ce_multicast",
    "_low_contention_all_gather_ce_multicast_out",
)

_UINT32_MAX = 4294967295

# c10's ScalarType names, as upstream's messages print them.
_SCALAR_NAMES = {
    torch.uint8: "Byte",
    torch.int8: "Char",
    torch.int16: "Short",
    torch.int32: "Int",
    torch.int64: "Long",
    torch.float16: "Half",
    torch.float32: "Float",
    torch.float64: "Double",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
    torch.bool: "Bool",
    torch.bfloat16: "BFloat16",
    torch.uint16: "UInt16",
    torch.uint32: "UInt32",
    torch.uint64: "UInt64",
}
_REDUCIBLE = (torch.float32, torch.bfloat16)  # upstream's AT_DISPATCH_FLOAT_AND_BFLOAT16


def _scalar_name(dtype: torch.dtype) -> str:
    return _SCALAR_NAMES.get(dtype, str(dtype).replace("torch.", ""))


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise RuntimeError(msg)


def _check_expr(cond: bool, expr: str) -> None:
    """A message-less ``TORCH_CHECK(expr)``: c10's generic message."""
    if not cond:
        raise RuntimeError(f"Expected {expr} to be true, but got false.")


def _dispatch_dtype(t: torch.Tensor, name: str) -> None:
    """``AT_DISPATCH_FLOAT_AND_BFLOAT16``: other dtypes are not implemented."""
    if t.dtype not in _REDUCIBLE:
        raise NotImplementedError(f'"{name}" not implemented for \'{_scalar_name(t.dtype)}\'')


def _alignment(n: int) -> int:
    """``at::native::memory::get_alignment`` of a byte count: the largest of 16, 8, 4, 2, 1 dividing it."""
    for a in (16, 8, 4, 2):
        if n % a == 0:
            return a
    return 1


def _get_and_verify_alignment(t: torch.Tensor, op: str) -> int:
    min_alignment = max(4, t.element_size())
    ptr_alignment = _alignment(t.storage_offset() * t.element_size())
    _check(
        ptr_alignment >= min_alignment,
        f"{op}<{_scalar_name(t.dtype)}>: input ptr + offset must be at least {min_alignment}-byte aligned.",
    )
    size_alignment = _alignment(t.numel() * t.element_size())
    _check(
        size_alignment >= min_alignment,
        f"{op}<{_scalar_name(t.dtype)}>: input size must be at least {min_alignment}-byte aligned.",
    )
    return min(ptr_alignment, size_alignment)


def _rendezvous(t: torch.Tensor, group_name: str, op: str, what: str = "input") -> Any:
    """The tensor's handle on the group; upstream's error when it is not a symmetric allocation."""
    _check(symm_mem.is_symm_mem_tensor(t), f"{op}: {what} must be allocated with empty_strided_p2p().")
    return symm_mem.rendezvous(t, group_name)


class _Peers:
    """The buffers of every rank of ``hdl`` at the place of the (contiguous) tensor ``t``, as flat tensors."""

    def __init__(self, hdl: Any, t: torch.Tensor) -> None:
        esz = t.element_size()
        byte_off = hdl.offset + t.storage_offset() * esz
        _check(byte_off % esz == 0, f"symm_mem: tensor offset {byte_off} is not a multiple of its element size")
        self.rank = hdl.rank
        self.world_size = hdl.world_size
        self._hdl = hdl
        self._off = byte_off // esz
        self._numel = t.numel()
        self._dtype = t.dtype
        self._views: dict[int, torch.Tensor] = {}

    def __getitem__(self, rank: int) -> torch.Tensor:
        v = self._views.get(rank)
        if v is None:
            v = self._hdl.get_buffer(rank, (self._numel,), self._dtype, self._off)
            self._views[rank] = v
        return v

    def reduce(self, lo: int, hi: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """Sum of elements [lo, hi) over the ranks, added in rank order in the dtype (upstream's order)."""
        acc = self[0][lo:hi].clone() if out is None else out.copy_(self[0][lo:hi])
        for r in range(1, self.world_size):
            acc.add_(self[r][lo:hi])
        return acc


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


# ---------------------------------------------------------------------------------------------- one-shot ----
def _one_shot_all_reduce_out_impl(
    input: torch.Tensor,
    local_input: torch.Tensor | None,
    reduce_op: str,
    group_name: str,
    out: torch.Tensor,
) -> torch.Tensor:
    _check(input.is_contiguous(), "one_shot_all_reduce: input must be contiguous.")
    _check(out.is_contiguous(), "one_shot_all_reduce: output must be contiguous.")
    _check(
        out.shape == input.shape,
        f"one_shot_all_reduce: input/output size mismatch, input.sizes(): {list(input.shape)}, "
        f"output.sizes(): {list(out.shape)}",
    )
    _check(reduce_op == "sum", "one_shot_all_reduce: only sum is supported for now.")
    if local_input is not None:
        _check(local_input.is_contiguous(), "one_shot_all_reduce: local input must be contiguous.")
        _check(
            local_input.numel() <= input.numel(),
            "one_shot_all_reduce: local input size must be smaller than symm buffer size.",
        )
    if input.numel() == 0:
        _check_expr(input.dtype == out.dtype, "input.scalar_type() == out.scalar_type()")
        return out
    hdl = _rendezvous(input, group_name, "one_shot_all_reduce")
    alignment = _get_and_verify_alignment(input, "one_shot_all_reduce")
    if local_input is not None:
        local_alignment = _get_and_verify_alignment(local_input, "one_shot_all_reduce")
        _check(
            alignment == local_alignment,
            "one_shot_all_reduce: local input and symm buffer must have the same alignment.",
        )
    _dispatch_dtype(input, "one_shot_all_reduce")
    peers = _Peers(hdl, input)
    if local_input is not None:
        peers[peers.rank][: local_input.numel()].copy_(local_input.reshape(-1))
    hdl.barrier()
    peers.reduce(0, input.numel(), out=out.view(-1))
    hdl.barrier()
    return out


def one_shot_all_reduce(input: torch.Tensor, reduce_op: str, group_name: str) -> torch.Tensor:
    return _one_shot_all_reduce_out_impl(input, None, reduce_op, group_name, torch.empty_like(input))


def one_shot_all_reduce_out(input: torch.Tensor, reduce_op: str, group_name: str, out: torch.Tensor) -> torch.Tensor:
    return _one_shot_all_reduce_out_impl(input, None, reduce_op, group_name, out)


def one_shot_all_reduce_copy(
    symm_buffer: torch.Tensor, local_input: torch.Tensor, reduce_op: str, group_name: str
) -> torch.Tensor:
    return _one_shot_all_reduce_out_impl(
        symm_buffer, local_input, reduce_op, group_name, torch.empty_like(local_input)
    )


def one_shot_all_reduce_copy_out(
    symm_buffer: torch.Tensor, local_input: torch.Tensor, reduce_op: str, group_name: str, out: torch.Tensor
) -> torch.Tensor:
    return _one_shot_all_reduce_out_impl(symm_buffer, local_input, reduce_op, group_name, out)


# ---------------------------------------------------------------------------------------------- two-shot ----
def _two_shot_all_reduce_impl(
    input: torch.Tensor, output: torch.Tensor | None, reduce_op: str, group_name: str
) -> torch.Tensor:
    _check(input.is_contiguous(), "two_shot_all_reduce: input must be contiguous.")
    _check(reduce_op == "sum", "two_shot_all_reduce: only sum is supported for now.")
    hdl = _rendezvous(input, group_name, "two_shot_all_reduce")
    alignment = _get_and_verify_alignment(input, "two_shot_all_reduce")
    if output is not None:
        _check(output.is_contiguous(), "two_shot_all_reduce: output must be contiguous.")
        output_alignment = _get_and_verify_alignment(output, "two_shot_all_reduce")
        _check(
            alignment <= output_alignment,
            "two_shot_all_reduce: output alignment must be equal to or larger than input.",
        )
        _check(
            output.shape == input.shape,
            f"two_shot_all_reduce: input/output size mismatch, input.sizes(): {list(input.shape)}, "
            f"output.sizes(): {list(output.shape)}",
        )
        if input.numel() == 0:
            _check_expr(output.dtype == input.dtype, "output->scalar_type() == input.scalar_type()")
            return output
    elif input.numel() == 0:
        return input
    _dispatch_dtype(input, "two_shot_all_reduce")
    peers = _Peers(hdl, input)
    rank, world, numel = peers.rank, peers.world_size, input.numel()
    if output is None:
        # In place: this rank reduces its slice and writes it into every rank's buffer. (Upstream partitions
        # with round_up(numel, alignment * world_size), alignment in bytes; kept, it only moves slice edges.)
        per_rank = _round_up(numel, alignment * world) // world
        lo, hi = min(per_rank * rank, numel), min(per_rank * (rank + 1), numel)
        hdl.barrier()
        if lo < hi:
            reduced = peers.reduce(lo, hi)
            for step in range(world):
                peers[(rank + step) % world][lo:hi].copy_(reduced)
        hdl.barrier()
        return input
    # Out of place: reduce this rank's slice into its own buffer, then gather every slice into output.
    per_rank = _round_up(numel, (alignment // input.element_size()) * world) // world
    lo, hi = min(per_rank * rank, numel), min(per_rank * (rank + 1), numel)
    hdl.barrier()
    if lo < hi:
        peers[rank][lo:hi].copy_(peers.reduce(lo, hi))
    hdl.barrier()
    flat_out = output.view(-1)
    for step in range(world):
        r = (rank + step) % world
        rlo, rhi = min(per_rank * r, numel), min(per_rank * (r + 1), numel)
        if rlo < rhi:
            flat_out[rlo:rhi].copy_(peers[r][rlo:rhi])
    hdl.barrier()
    return output


def two_shot_all_reduce_(input: torch.Tensor, reduce_op: str, group_name: str) -> torch.Tensor:
    return _two_shot_all_reduce_impl(input, None, reduce_op, group_name)


def two_shot_all_reduce_out(
    input: torch.Tensor, reduce_op: str, group_name: str, output: torch.Tensor
) -> torch.Tensor:
    return _two_shot_all_reduce_impl(input, output, reduce_op, group_name)


# ------------------------------------------------------------------------------------------ reduce-scatter ----
def reduce_scatter_out(
    input: torch.Tensor, group_name: str, split_last_dim: bool, output: torch.Tensor
) -> torch.Tensor:
    _check(input.is_contiguous(), "reduce_scatter: input must be contiguous.")
    _check(output.is_contiguous(), "reduce_scatter: output must be contiguous.")
    hdl = _rendezvous(input, group_name, "reduce_scatter")
    alignment = _get_and_verify_alignment(input, "reduce_scatter")
    output_alignment = _get_and_verify_alignment(input, "reduce_scatter")  # (sic) upstream checks input twice
    world = hdl.world_size
    per_vec = alignment // input.element_size()
    _check(
        input.numel() % (world * per_vec) == 0,
        "expected number of elements to be divisible by world_size * alignment, number of elements "
        f"{input.numel()} world size {world}alignment {alignment}",
    )
    if split_last_dim:
        _check_expr(input.dim() == output.dim(), "input.dim() == output.dim()")
        _check(
            tuple(input.shape[:-1]) == tuple(output.shape[: input.dim() - 1]),
            "reduce_scatter expected input and output to have same sizes except in the last dimension",
        )
        _check(
            output.size(-1) == input.size(-1) // world,
            "reduce_scatter expected output last dim size to be input last dim size / world_size",
        )
        _check(
            input.size(-1) % (world * per_vec) == 0,
            "expected last dimension to be divisible by world_size * alignment, last dimension "
            f"{input.size(-1)} world size {world}alignment {alignment}",
        )
    else:
        _check(input.dim() == 1, "reduce_scatter expected 1D input")
        _check(output.dim() == 1, "reduce_scatter expected 1D output")
        _check_expr(
            output.numel() == input.numel() // world, "output.numel() == input.numel() / symm_mem->get_world_size()"
        )
    if input.numel() == 0:
        _check_expr(input.dtype == output.dtype, "input.scalar_type() == output.scalar_type()")
        return output
    _check(
        output_alignment >= alignment,
        "reduce_scatter: output alignment should be not smaller than input alignment",
    )
    _dispatch_dtype(input, "two_shot_all_reduce")  # (sic) upstream's dispatch name
    peers = _Peers(hdl, input)
    rank = hdl.rank
    hdl.barrier()
    if split_last_dim:
        last = input.size(-1)
        n = last // world
        views = [peers[r].view(-1, last)[:, rank * n : (rank + 1) * n] for r in range(world)]
        acc = output.view(-1, n)
        acc.copy_(views[0])
        for v in views[1:]:
            acc.add_(v)
    else:
        n = input.numel() // world
        peers.reduce(rank * n, (rank + 1) * n, out=output.view(-1))
    hdl.barrier()
    return output


# ------------------------------------------------------------------------------------ memset32 / write32 ----
def _as_int32_bits(val: int) -> int:
    """The uint32 ``val`` as the int32 with the same bits (uint32 tensors have few kernels)."""
    return val - (1 << 32) if val > 0x7FFFFFFF else val


def memset32_(input: torch.Tensor, offset: int, val: int, count: int) -> torch.Tensor:
    _check(
        input.dim() == 1 and input.is_contiguous() and input.dtype == torch.uint32,
        "symm_mem::memset32_: input must be a flat, contiguous uint32 tensor.",
    )
    _check(offset >= 0, f"symm_mem::memset32_: offset must be greater than or equal to 0 (got {offset})")
    _check(count > 0, f"symm_mem::memset32_: count must be a positive integer (got {count})")
    _check(
        0 <= val <= _UINT32_MAX,
        "symm_mem::memset32_: val must be in the range of [0, 4294967295] (uint32_t).",
    )
    _check(
        offset + count <= input.numel(),
        f"symm_mem::memset32_: offset + count ({offset + count}) exceeded the numel of the input "
        f"({input.numel()})",
    )
    input.view(torch.int32)[offset : offset + count].fill_(_as_int32_bits(val))
    return input


def stream_write_value32_(input: torch.Tensor, offset: int, val: int) -> torch.Tensor:
    _check(
        input.dim() == 1 and input.is_contiguous() and input.dtype == torch.uint32,
        "symm_mem::stream_write_value32_: input must be a flat, contiguous uint32 tensor.",
    )
    _check(
        offset >= 0,
        f"symm_mem::stream_write_value32_: offset must be greater than or equal to 0 (got {offset})",
    )
    _check(
        0 <= val <= _UINT32_MAX,
        "symm_mem::stream_write_value32_: val must be in the range of [0, 4294967295] (uint32_t).",
    )
    _check(
        offset < input.numel(),
        f"symm_mem::stream_write_value32_: offset ({offset}) exceeded the numel of the input ({input.numel()})",
    )
    # One 32-bit store after everything before it (program order on CPU; stream order on XPU).
    input.view(torch.int32)[offset : offset + 1].fill_(_as_int32_bits(val))
    return input


# ------------------------------------------------------------------------------- low-contention collectives ----
_workspaces: dict[tuple[str, str], torch.Tensor] = {}


def _workspace(group_name: str, min_size: int, device: torch.device) -> Any:
    """``get_symm_mem_workspace`` for ``device`` (upstream's picks the accelerator's current device): a uint8
    symmetric tensor of at least ``min_size`` bytes, grown (collectively) when too small, and its handle."""
    key = (group_name, str(device))
    t = _workspaces.get(key)
    size = t.numel() if t is not None else 0
    if t is None or size < min_size:
        # xpushmem allocates on the world (every rank of the default group), then rendezvous on the group.
        t = _SymmetricMemory.empty_strided_p2p((max(size, min_size),), [1], torch.uint8, device)
        _workspaces[key] = t
    return symm_mem.rendezvous(t, group_name)


def _workspace_view(ws: Any, rank: int, shape: torch.Size, dtype: torch.dtype, elem_off: int) -> torch.Tensor:
    return ws.get_buffer(rank, tuple(shape), dtype, ws.offset // dtype.itemsize + elem_off)


def _low_contention_all_gather(tensor: torch.Tensor, group_name: str) -> torch.Tensor:
    """Pull-based all-gather (upstream's algorithm): the input when it is symmetric, else a copy of it in the
    group's symmetric workspace, is read from every peer in turn."""
    if symm_mem.is_symm_mem_tensor(tensor):
        hdl = symm_mem.rendezvous(tensor, group_name)
        src = tensor
    else:
        hdl = _workspace(group_name, tensor.numel() * tensor.element_size(), tensor.device)
        src = None
    rank, world = hdl.rank, hdl.world_size
    output = tensor.new_empty(tensor.shape[0] * world, *tensor.shape[1:])
    chunks = output.chunk(world)
    if src is None:
        _workspace_view(hdl, rank, tensor.shape, tensor.dtype, 0).copy_(tensor)
        views = [_workspace_view(hdl, r, tensor.shape, tensor.dtype, 0) for r in range(world)]
    else:
        _check(tensor.is_contiguous(), "_low_contention_all_gather: a symmetric input must be contiguous")
        peers = _Peers(hdl, tensor)
        views = [peers[r].view(tensor.shape) for r in range(world)]
    hdl.barrier()
    for step in range(world):
        remote = (rank - step) % world
        chunks[remote].copy_(views[remote])
    hdl.barrier()
    return output


def _reduce_chunks(stacked: torch.Tensor, reduce_op: str) -> torch.Tensor:
    if reduce_op == "sum":
        return stacked.sum(dim=0)
    if reduce_op == "avg":
        return stacked.mean(dim=0)
    raise ValueError(f"reduce_op ({reduce_op}) is not supported")


def _low_contention_reduce_scatter(tensor: torch.Tensor, reduce_op: str, group_name: str) -> torch.Tensor:
    """Upstream's P2P all-to-all then a local reduction: pull from the peers' inputs when the input is symmetric,
    else push into the peers' workspaces."""
    if symm_mem.is_symm_mem_tensor(tensor):
        hdl = symm_mem.rendezvous(tensor, group_name)
        rank, world = hdl.rank, hdl.world_size
        if tensor.shape[0] % world != 0:
            raise AssertionError
        _check(tensor.is_contiguous(), "_low_contention_reduce_scatter: a symmetric input must be contiguous")
        a2a = torch.empty_like(tensor)
        chunks = a2a.chunk(world)
        peers = _Peers(hdl, tensor)
        n = chunks[0].numel()
        hdl.barrier()
        for step in range(world):
            remote = (rank - step) % world
            chunks[remote].copy_(peers[remote][n * rank : n * (rank + 1)].view(chunks[0].shape))
        hdl.barrier()
        return _reduce_chunks(a2a.unflatten(0, (world, -1)), reduce_op)
    hdl = _workspace(group_name, tensor.numel() * tensor.element_size(), tensor.device)
    rank, world = hdl.rank, hdl.world_size
    if tensor.shape[0] % world != 0:
        raise AssertionError
    chunks = tensor.chunk(world)
    n = chunks[0].numel()
    hdl.barrier()
    for step in range(world):
        remote = (rank - step) % world
        _workspace_view(hdl, remote, chunks[0].shape, chunks[0].dtype, n * rank).copy_(chunks[remote])
    hdl.barrier()
    buf = _workspace_view(hdl, rank, tensor.shape, tensor.dtype, 0)
    ret = _reduce_chunks(buf.unflatten(0, (world, -1)), reduce_op)
    # The workspace is reused by the next call: no peer may push into it before everyone has reduced.
    hdl.barrier()
    return ret


# ------------------------------------------------------------------------------------------ _async_input_mm ----
_ASYNC_MM_TILE_M = 128  # upstream's kernel tile along M: a chunk is a whole number of tiles


def _signal_timeout_s() -> float:
    """The bound of a wait on a chunk signal: XPUSHMEM_TIMEOUT_MS (the runtime's bound), 300 s by default."""
    try:
        return int(os.environ.get("XPUSHMEM_TIMEOUT_MS", "300000")) / 1000.0
    except ValueError:
        return 300.0


def _wait_chunk_signal(signals: torch.Tensor, idx: int, timeout_s: float) -> None:
    """Waits until ``signals[idx] == 1`` (another thread, or a peer through symmetric memory, sets it), backing off
    from a spin to 1 ms sleeps; raises ``RuntimeError`` naming the chunk after ``timeout_s``."""
    word = signals[idx : idx + 1].view(torch.int32)  # the word itself (no copy), read afresh by each item()
    deadline = time.monotonic() + timeout_s
    pause = 0.0
    while int(word.item()) != 1:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"async_input_mm: the signal of chunk {idx} did not arrive within {timeout_s:g} s "
                f"(a_chunk_signals[{idx}] = {int(word.item()) & _UINT32_MAX}; XPUSHMEM_TIMEOUT_MS bounds the wait)"
            )
        time.sleep(pause)
        pause = min(max(pause * 2, 1e-5), 1e-3)


def _async_input_mm(
    a: torch.Tensor, b: torch.Tensor, a_chunk_signals: torch.Tensor, a_chunk_pivot: int
) -> torch.Tensor:
    """``symm_mem::_async_input_mm(a, b, a_chunk_signals, a_chunk_pivot)``: ``a @ b`` with ``a`` (M x K, row-major)
    arriving in ``n = a_chunk_signals.numel()`` chunks of M / n rows; chunk ``i`` is ready when
    ``a_chunk_signals[i] == 1``. As upstream's kernel, the chunks are consumed in the order ``a_chunk_pivot``,
    ``a_chunk_pivot + 1``, ... (mod n), each only after its signal; upstream's argument checks (bfloat16, ``b``
    row- or column-major, M a multiple of n, chunks of whole 128-row tiles, the pivot in range)."""
    _check(a.dim() == 2 and b.dim() == 2, "async_input_mm: `a`, `b` and `out` must all be a matrix")
    _check(a.is_contiguous(), "async_input_mm: `a` and `out` must be in row-major layout")
    if not b.is_contiguous():
        _check_expr(b.stride(1) == b.size(0), "b.stride(1) == b.size(0)")
        _check_expr(b.stride(0) == 1, "b.stride(0) == 1")
    for name, t in (("a", a), ("b", b)):
        _check(t.dtype == torch.bfloat16, f"async_input_mm: `{name}` must be bfloat16 (got {t.dtype})")
    m, k, n = a.size(0), a.size(1), b.size(1)
    _check(b.size(0) == k, f"async_input_mm: `b.shape(0)` ({b.size(0)}) must equal `a.shape(1)` ({k})")
    _check(a_chunk_signals.dim() == 1, "async_input_mm: `a_chunk_signals` must be a 1D tensor.")
    _check(a_chunk_signals.dtype == torch.uint32, "async_input_mm: `a_chunk_signals` must be uint32")
    _check(
        a_chunk_signals.device == a.device,
        "async_input_mm: `a_chunk_signals` must be on the same device as `a`.",
    )
    chunks = a_chunk_signals.numel()
    _check(chunks > 0, "async_input_mm: `a_chunk_signals` must contain at least one element.")
    _check(
        m % chunks == 0,
        "async_input_mm: `a.shape(0)` must be an integer multiple of `a_chunk_signals.numel()`",
    )
    _check(
        0 <= a_chunk_pivot < chunks,
        "async_input_mm: `a_chunk_pivot` must be in the range [0, `a_chunk_signals.numel()`).",
    )
    rows = m // chunks
    _check_expr(rows % _ASYNC_MM_TILE_M == 0, f"chunk_size_M % {_ASYNC_MM_TILE_M} == 0")
    out = a.new_empty((m, n))
    timeout_s = _signal_timeout_s()
    for step in range(chunks):
        idx = (a_chunk_pivot + step) % chunks
        _wait_chunk_signal(a_chunk_signals, idx, timeout_s)
        lo, hi = idx * rows, (idx + 1) * rows
        torch.mm(a[lo:hi], b, out=out[lo:hi])
    return out


# ------------------------------------------------------------------------------------------- multicast ----
def _no_multicast(name: str) -> Callable[..., Any]:
    def raise_no_multicast(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{name}: multicast support is required, and the xpushmem (\"NVSHMEM\") backend has none: Intel GPUs "
            "and host memory have no NVLink SHARP multicast (has_multicast_support() is False, multicast_ptr is "
            "0). Use one_shot_all_reduce / two_shot_all_reduce_ / reduce_scatter_out / _low_contention_all_gather "
            "instead."
        )

    raise_no_multicast.__name__ = name
    return raise_no_multicast


_IMPLS: dict[str, Callable[..., Any]] = {
    "one_shot_all_reduce": one_shot_all_reduce,
    "one_shot_all_reduce_out": one_shot_all_reduce_out,
    "one_shot_all_reduce_copy": one_shot_all_reduce_copy,
    "one_shot_all_reduce_copy_out": one_shot_all_reduce_copy_out,
    "two_shot_all_reduce_": two_shot_all_reduce_,
    "two_shot_all_reduce_out": two_shot_all_reduce_out,
    "reduce_scatter_out": reduce_scatter_out,
    "memset32_": memset32_,
    "stream_write_value32_": stream_write_value32_,
    "_low_contention_all_gather": _low_contention_all_gather,
    "_low_contention_reduce_scatter": _low_contention_reduce_scatter,
    "_async_input_mm": _async_input_mm,
}

_libs: list[torch.library.Library] = []
_registered: set[str] = set()


def _has_op(name: str) -> bool:
    return hasattr(torch.ops.symm_mem, name)


def register(dispatch_key: str, skip: tuple[str, ...] | list[str] = ()) -> list[str]:
    """Register the kernels (and the multicast refusals) for ``dispatch_key`` ("CPU" or "XPU"), once, except the ops
    in ``skip`` (on XPU: those the C++ shim registers as device kernels); returns the ops registered (those this
    torch defines)."""
    if dispatch_key in _registered:
        return []
    lib = torch.library.Library("symm_mem", "IMPL", dispatch_key)
    done = []
    for name in OPS + MULTICAST_OPS:
        if not _has_op(name) or name in skip:
            continue
        fn = _IMPLS.get(name) or _no_multicast(name)
        lib.impl(name, fn)
        done.append(name)
    _libs.append(lib)
    _registered.add(dispatch_key)
    return done
