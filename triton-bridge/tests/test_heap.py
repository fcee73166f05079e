"""The symmetric heap as PyTorch's tests expect it (issue #30, items 4 and 6), on CPU tensors over gloo at world
sizes 2 and 4 (as test_symm_mem_port.py).

* The heap grows on demand: upstream's ``test_large_alloc`` (a 2 GiB ``symm_mem.empty`` with no heap size set by
  the user), and beyond it more than the configured first chunk (``XPUSHMEM_SYMMETRIC_SIZE``, which
  scripts/test-python.sh sets) live at once, each allocation's both ends written by its owner and read by a peer.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from conftest import world_sizes

from _harness import RankContext, RankPool

BACKEND_NAME = "NVSHMEM"
GIB = 1024**3


@pytest.fixture(params=world_sizes(), ids=lambda w: f"W{w}")
def pool(request: pytest.FixtureRequest, pools) -> RankPool:  # noqa: ANN001
    return pools.get(request.param)


def _first_chunk() -> int:
    """``XPUSHMEM_SYMMETRIC_SIZE`` in bytes (1 GiB when unset), K/M/G/T in powers of 1024."""
    text = os.environ.get("XPUSHMEM_SYMMETRIC_SIZE", "") or "1G"
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if text[-1].upper() in units:
        return int(float(text[:-1]) * units[text[-1].upper()])
    return int(text)


# ====================================================================== item 4: a heap that grows on demand ====
def large_alloc(ctx: RankContext) -> None:
    symm_mem.set_backend(BACKEND_NAME)
    group_name = dist.group.WORLD.group_name
    # Upstream's test_large_alloc.
    t = symm_mem.empty(2 * GIB, dtype=torch.uint8, device=ctx.device)
    ctx.assertEqual(t.numel() * t.element_size(), 2 * GIB)
    # Beyond upstream: a second allocation of the whole first chunk while the first is live (the heap must have
    # grown past its first chunk whatever XPUSHMEM_SYMMETRIC_SIZE says), and peers see both ends of each.
    u = symm_mem.empty(_first_chunk(), dtype=torch.uint8, device=ctx.device)
    peer = (ctx.rank + 1) % ctx.world_size
    for k, x in enumerate((t, u)):
        hdl = symm_mem.rendezvous(x, group_name)
        ctx.assertIsNotNone(hdl)
        n = x.numel()
        x[:64].fill_(ctx.rank + 1 + k)
        x[n - 64 :].fill_(ctx.rank + 101 + k)
        hdl.barrier()
        theirs = hdl.get_buffer(peer, (n,), torch.uint8)
        ctx.assertTrue(theirs[:64].eq(peer + 1 + k).all(), f"allocation {k}: the peer's first bytes")
        ctx.assertTrue(theirs[n - 64 :].eq(peer + 101 + k).all(), f"allocation {k}: the peer's last bytes")
        hdl.barrier()
    del t, u


class TestHeapGrows:
    def test_large_alloc(self, pool: RankPool) -> None:
        pool.run(large_alloc)
