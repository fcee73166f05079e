"""Smoke test of an installed wheel, run by scripts/test-python.sh in a fresh venv outside the checkout, with no
ninja and no C++ compiler: ``python -P smoke_installed.py CHECKOUT SHIM_BUILD_DIR``.

Checks that the package, libxpushmem.so, the headers, the device bitcode and the C++ shim come from the installed
package (no path into CHECKOUT is used or recorded; the shim is the wheel's, compiled against this torch, and
nothing was built in SHIM_BUILD_DIR, the ``XPUSHMEM_TORCH_BUILD_DIR`` of the run), and that two CPU ranks (gloo)
exchange data through xpushmem's symmetric heap (the peers' mapped buffers, nvshmem_get). Prints how long the first
``import xpushmem.torch`` took (docs/OPS.md quotes it; not asserted: timing is not a test).
Not a pytest module: it must not run inside the development venv.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import torch.multiprocessing as mp


def _under(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _rank(rank: int, world: int, store: str, checkout: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    import xpushmem.torch  # loads the wheel's shim, registers the backend

    shim_file = Path(xpushmem.torch.shim.__file__)
    assert _under(shim_file, Path(xpushmem.torch.__file__).parent), f"the shim was not the wheel's: {shim_file}"

    assert symm_mem.is_nvshmem_available()
    symm_mem.set_backend("NVSHMEM")
    numel = 256
    t = symm_mem.empty(numel, dtype=torch.float32, device="cpu").fill_(rank)
    hdl = symm_mem.rendezvous(t, group=dist.group.WORLD.group_name)
    hdl.barrier()
    for peer in range(world):
        got = hdl.get_buffer(peer, (numel,), torch.float32)
        assert got.eq(peer).all(), f"rank {rank}: peer {peer}'s buffer holds {got[:4]}"
    hdl.barrier()
    if rank == 0:  # one-sided: rank 0 reads rank 1's copy into its own
        torch.ops.symm_mem.nvshmem_get(t, 1)
        torch.testing.assert_close(t, torch.full((numel,), 1.0))
    hdl.barrier()
    # Every file the process has mapped (libxpushmem.so, the shim) lies outside the checkout.
    maps = {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if "/" in line}
    inside = sorted(m for m in maps if _under(Path(m), Path(checkout)))
    assert not inside, f"rank {rank} maps files of the checkout: {inside}"
    dist.destroy_process_group()


def main() -> None:
    checkout, shim_build = Path(sys.argv[1]), Path(sys.argv[2])
    for var in ("XPUSHMEM_LIB_DIR", "XPUSHMEM_INCLUDE_DIR", "XPUSHMEM_DEVICE_LIB_DIR", "CARGO_TARGET_DIR"):
        assert var not in os.environ, f"{var} is set: the smoke test must find everything in the package"
    import xpushmem

    pkg = Path(xpushmem.__file__).parent
    assert not _under(pkg, checkout), f"xpushmem imported from the checkout: {pkg}"
    assert _under(pkg, Path(sys.prefix)), f"xpushmem imported from {pkg}, not from this venv ({sys.prefix})"
    for p in (xpushmem.lib_path(), xpushmem.include_dir()):
        assert _under(p, pkg), f"{p} is not inside the installed package {pkg}"
    try:
        bc = xpushmem.device_lib_path()
        assert _under(bc, pkg), f"device bitcode {bc} is not inside the installed package {pkg}"
    except RuntimeError:
        # The device bitcode is packaged once shmem/device-lib/prebuilt holds it.
        if list((checkout / "shmem" / "device-lib" / "prebuilt").glob("libxpushmem_device-*.bc")):
            raise
    recorded = [f for f in pkg.rglob("*") if f.is_file() and f.suffix in (".py", ".json", ".txt")
                and str(checkout) in f.read_text(errors="replace")]
    assert not recorded, f"the package records the checkout's path in {recorded}"
    start = time.perf_counter()
    import xpushmem.torch  # noqa: F401

    took = time.perf_counter() - start
    built = sorted(shim_build.rglob("*")) if shim_build.exists() else []
    assert not built, f"the shim was built at import although the wheel carries one: {built}"
    world = 2
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_rank, args=(world, os.path.join(d, "store"), str(checkout)), nprocs=world,
                           start_method="spawn")
    print(f"smoke_installed: OK ({pkg}, {world} CPU ranks; first import of xpushmem.torch {took:.2f} s, the wheel's shim)")


if __name__ == "__main__":
    main()
