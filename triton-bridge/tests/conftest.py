"""Fixtures of the distributed tests: rank pools per world size (see _harness.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from _harness import RankPool


def _has_triton_xpu() -> bool:
    """Whether the installed Triton is Intel's (the venv of scripts/setup-triton.sh)."""
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return False
    import triton.backends

    return "intel" in triton.backends.backends


# triton/: the Triton tests, collected only where triton-xpu is installed (scripts/test-triton.sh). No conftest.py
# there: the ranks of the distributed tests import this module by its name, `conftest`.
collect_ignore_glob = [] if _has_triton_xpu() else ["triton/*"]

# Where the ranks run: an Intel GPU when torch sees one (one rank per device, xccl), else CPU tensors over gloo.
# XPUSHMEM_TEST_DEVICE=cpu|xpu overrides.


def device_type() -> str:
    forced = os.environ.get("XPUSHMEM_TEST_DEVICE")
    if forced:
        return forced
    import torch

    xpu = getattr(torch, "xpu", None)
    return "xpu" if xpu is not None and xpu.is_available() else "cpu"


def backend_for(dev: str) -> str:
    return {"cpu": "gloo", "xpu": "xccl"}[dev]


def world_sizes() -> list[int]:
    """CPU: 2 and 4 ranks (XPUSHMEM_TEST_WORLD_SIZES=2,4). XPU: one rank per device."""
    dev = device_type()
    if dev == "xpu":
        import torch

        return [torch.xpu.device_count()]
    return [int(w) for w in os.environ.get("XPUSHMEM_TEST_WORLD_SIZES", "2,4").split(",")]


class Pools:
    def __init__(self) -> None:
        self._pools: dict[int, RankPool] = {}

    def get(self, world_size: int) -> RankPool:
        pool = self._pools.get(world_size)
        if pool is None or not pool.alive:
            # Only one pool lives at a time: ranks of different sizes compete for two cores.
            self.close()
            dev = device_type()
            pool = RankPool(world_size, dev, backend_for(dev))
            self._pools[world_size] = pool
        return pool

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()


@pytest.fixture(scope="session")
def pools() -> Iterator[Pools]:
    # Build the C++ shim once in this process, before ranks import it concurrently.
    import xpushmem.torch  # noqa: F401

    p = Pools()
    yield p
    p.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run every test of one world size before the next size, so that each rank pool is started once."""

    def world(item: pytest.Item) -> int:
        callspec = getattr(item, "callspec", None)
        return int(callspec.params.get("pool", 0)) if callspec is not None else 0

    items.sort(key=world)  # stable: file order within a world size
