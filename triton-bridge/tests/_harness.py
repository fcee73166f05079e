"""Multi-process harness for the distributed tests: a pool of W long-lived ranks (spawned processes, one process
group), to which each test sends a function that every rank runs, like PyTorch's ``MultiProcContinuousTest``.

* Each rank: ``init_process_group`` (gloo on CPU, xccl on XPU) over a FileStore, ``import xpushmem.torch``, then
  runs the functions it is sent, each as ``fn(ctx, **kwargs)``, and reports success or the formatted traceback.
* Every run has a hard timeout; on a timeout or a crashed rank the whole pool is killed (and the next test gets a
  fresh one). A failure on any rank fails the test with every failing rank's traceback.
* ``fresh=True`` pools serve one test only (PyTorch's ``MultiProcessTestCase``), for tests that leave state behind.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import tempfile
import traceback
import unittest
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any, Callable

DEFAULT_TIMEOUT_S = float(os.environ.get("XPUSHMEM_TEST_TIMEOUT_S", "180"))
PG_TIMEOUT_S = float(os.environ.get("XPUSHMEM_TEST_PG_TIMEOUT_S", "120"))
STARTUP_TIMEOUT_S = float(os.environ.get("XPUSHMEM_TEST_STARTUP_TIMEOUT_S", "240"))


class RankContext(unittest.TestCase):
    """What a test function sees on one rank: its rank, the world size, its device, and unittest's asserts
    (``assertEqual`` compares tensors like PyTorch's test suite: same values, same dtype)."""

    __test__ = False  # a helper, not a test case for pytest to collect

    def __init__(self, rank: int, world_size: int, device_type: str, backend: str) -> None:
        super().__init__(methodName="_noop")
        self.rank = rank
        self.world_size = world_size
        self.device_type = device_type
        self.backend = backend

    def _noop(self) -> None:  # unittest requires an existing method name
        pass

    @property
    def device(self) -> Any:
        import torch

        if self.device_type == "cpu":
            return torch.device("cpu")
        return torch.device(self.device_type, self.rank)

    def synchronize(self) -> None:
        """The device's ``synchronize`` (``torch.cuda.synchronize`` in the upstream file); no-op on CPU."""
        import torch

        if self.device_type != "cpu":
            torch.get_device_module(self.device_type).synchronize(self.device)

    def assertEqual(self, first: Any, second: Any, msg: Any = None) -> None:  # noqa: N802
        import torch

        if isinstance(first, torch.Tensor) or isinstance(second, torch.Tensor):
            a = first if isinstance(first, torch.Tensor) else torch.as_tensor(first)
            b = second if isinstance(second, torch.Tensor) else torch.as_tensor(second)
            if not isinstance(first, torch.Tensor) or not isinstance(second, torch.Tensor):
                # A tensor against a Python scalar: compare values, broadcasting the scalar.
                b = b.to(a.dtype) if isinstance(first, torch.Tensor) else b
                a = a.to(b.dtype) if isinstance(second, torch.Tensor) else a
                a, b = torch.broadcast_tensors(a, b.to(a.device))
            torch.testing.assert_close(a, b, check_device=False, msg=msg)
        else:
            super().assertEqual(first, second, msg)


def _worker(rank: int, world_size: int, device_type: str, backend: str, store_path: str, conn: Connection) -> None:
    try:
        import torch
        import torch.distributed as dist

        if device_type != "cpu":
            torch.get_device_module(device_type).set_device(rank)
        dist.init_process_group(
            backend=backend,
            store=dist.FileStore(store_path, world_size),
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=PG_TIMEOUT_S),  # a collective fails before the harness kills the pool
        )
        import xpushmem.torch  # noqa: F401  (registers the backend before any test code runs)

        ctx = RankContext(rank=rank, world_size=world_size, device_type=device_type, backend=backend)
        conn.send(("ready", None))
    except BaseException:  # report start-up failures to the parent instead of dying silently
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        msg = conn.recv()
        if msg is None:
            break
        module, name, kwargs = msg
        try:
            fn = getattr(importlib.import_module(module), name)
            fn(ctx, **kwargs)
            conn.send(("ok", None))
        except BaseException:  # every failure goes back to the parent with its traceback
            conn.send(("error", traceback.format_exc()))
    try:
        dist.barrier()
        dist.destroy_process_group()
    finally:
        conn.send(("bye", None))


class RankPool:
    """W ranks sharing one process group."""

    def __init__(self, world_size: int, device_type: str, backend: str) -> None:
        self.world_size = world_size
        self.device_type = device_type
        self.backend = backend
        self._tmp = tempfile.TemporaryDirectory(prefix="xpushmem-pool-")
        store_path = os.path.join(self._tmp.name, "store")
        ctx = mp.get_context("spawn")
        self._conns: list[Connection] = []
        self._procs: list[mp.process.BaseProcess] = []
        for rank in range(world_size):
            parent, child = ctx.Pipe()
            p = ctx.Process(
                target=_worker,
                args=(rank, world_size, device_type, backend, store_path, child),
                name=f"xpushmem-rank{rank}",
                daemon=True,
            )
            p.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(p)
        self.alive = True
        replies = self._collect(STARTUP_TIMEOUT_S, "start-up")
        bad = [(r, tb) for r, (kind, tb) in enumerate(replies) if kind != "ready"]
        if bad:
            self.kill()
            raise AssertionError(self._format("rank start-up failed", bad))

    def _collect(self, timeout_s: float, what: str) -> list[tuple[str, Any]]:
        import time

        deadline = time.monotonic() + timeout_s
        replies: list[tuple[str, Any] | None] = [None] * self.world_size
        while any(r is None for r in replies):
            left = deadline - time.monotonic()
            if left <= 0:
                missing = [r for r, rep in enumerate(replies) if rep is None]
                done = [(r, rep[1]) for r, rep in enumerate(replies) if rep is not None and rep[0] == "error"]
                self.kill()
                detail = self._format("", done) if done else ""
                raise AssertionError(
                    f"{what}: ranks {missing} did not finish within {timeout_s:.0f} s (hard timeout); "
                    f"the pool was killed{detail}"
                )
            for r, conn in enumerate(self._conns):
                if replies[r] is not None:
                    continue
                if conn.poll(0.05):
                    try:
                        replies[r] = conn.recv()
                    except EOFError:
                        replies[r] = ("error", f"rank {r} exited (exit code {self._procs[r].exitcode})")
                elif not self._procs[r].is_alive():
                    replies[r] = ("error", f"rank {r} died (exit code {self._procs[r].exitcode})")
        return [rep for rep in replies if rep is not None]

    @staticmethod
    def _format(title: str, errors: list[tuple[int, str]]) -> str:
        parts = [title] if title else []
        for rank, tb in errors:
            parts.append(f"\n---------------- rank {rank} ----------------\n{tb}")
        return "".join(parts)

    def run(self, fn: Callable[..., None], timeout_s: float = DEFAULT_TIMEOUT_S, **kwargs: Any) -> None:
        """Run ``fn(ctx, **kwargs)`` on every rank; raise AssertionError if any rank fails or time runs out."""
        if not self.alive:
            raise AssertionError("the rank pool is dead (killed after an earlier failure)")
        for conn in self._conns:
            conn.send((fn.__module__, fn.__name__, kwargs))
        replies = self._collect(timeout_s, f"{fn.__name__}")
        errors = [(r, tb) for r, (kind, tb) in enumerate(replies) if kind != "ok"]
        if any(kind not in ("ok", "error") for kind, _ in replies) or any(
            not p.is_alive() for p in self._procs
        ):
            self.kill()
        if errors:
            raise AssertionError(self._format(f"{fn.__name__} failed on {len(errors)} rank(s):", errors))

    def close(self) -> None:
        if not self.alive:
            return
        try:
            for conn in self._conns:
                conn.send(None)
            self._collect(60, "shutdown")
        finally:
            self.kill()

    def kill(self) -> None:
        self.alive = False
        for p in self._procs:
            if p.is_alive():
                p.kill()
        for p in self._procs:
            p.join(timeout=10)
        for conn in self._conns:
            conn.close()
        self._tmp.cleanup()
