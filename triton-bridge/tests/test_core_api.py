"""xpushmem.core, the Python host API without PyTorch: tests/core_prog.py (every call against NumPy references, then
every error class) at 2 and 4 PEs under ``xpushmem-run`` (start-up from the environment) and under ``mpirun``
(start-up through mpi4py's communicator), a start-up from a torch process group (gloo) at 2 ranks, and README's
Python first program at 4 PEs. Each job runs in fresh processes with a hard timeout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PROG = HERE / "core_prog.py"
TIMEOUT_S = 240


def _launcher() -> Path:
    """``xpushmem-run`` of the checkout these tests belong to (scripts/test.sh builds it), or $XPUSHMEM_RUN."""
    if os.environ.get("XPUSHMEM_RUN"):
        return Path(os.environ["XPUSHMEM_RUN"])
    roots = [Path(os.environ["CARGO_TARGET_DIR"])] if os.environ.get("CARGO_TARGET_DIR") else []
    roots.append(HERE.parent.parent / "target")
    found = [r / p / "xpushmem-run" for r in roots for p in ("debug", "release") if (r / p / "xpushmem-run").exists()]
    if not found:
        pytest.fail(f"xpushmem-run not found under {roots}: `cargo build -p xpushmem-launch` (or set XPUSHMEM_RUN)")
    return max(found, key=lambda p: p.stat().st_mtime)


def _check(out: subprocess.CompletedProcess, n: int, how: str) -> None:
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"{how} at {n} PEs: exit {out.returncode}\n{text}"
    for pe in range(n):
        assert f"core_prog OK on PE {pe} of {n}" in text, f"{how}: PE {pe} did not report\n{text}"


@pytest.mark.parametrize("n", [2, 4])
def test_every_call_under_xpushmem_run(n):
    cmd = [str(_launcher()), "-n", str(n), "--timeout", str(TIMEOUT_S - 20), sys.executable, str(PROG), "env"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    _check(out, n, "xpushmem-run")


@pytest.mark.parametrize("n", [2, 4])
def test_every_call_under_mpirun_with_mpi4py(n):
    pytest.importorskip("mpi4py", reason="scripts/setup-python.sh installs mpi4py")
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun is not installed (scripts/setup.sh installs openmpi-bin)"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [mpirun, "--oversubscribe", "--allow-run-as-root", "-n", str(n), "-x", "XPUSHMEM_TIMEOUT_MS"]
    if "XPUSHMEM_LIB_DIR" in env:
        cmd += ["-x", "XPUSHMEM_LIB_DIR"]
    env.setdefault("XPUSHMEM_TIMEOUT_MS", "60000")
    out = subprocess.run([*cmd, sys.executable, str(PROG), "mpi"], capture_output=True, text=True, env=env,
                         timeout=TIMEOUT_S)
    _check(out, n, "mpirun")


def test_the_readme_first_program_runs(tmp_path):
    readme = (HERE.parent.parent / "README.md").read_text()
    section = readme[readme.index("## A first program"):]
    block = section[section.index("```python\n") + len("```python\n"):]
    prog = tmp_path / "first.py"
    prog.write_text(block[:block.index("```")])
    out = subprocess.run([str(_launcher()), "-n", "4", "--timeout", str(TIMEOUT_S - 20), sys.executable, str(prog)],
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    assert out.returncode == 0, f"README's Python program failed:\n{out.stdout}{out.stderr}"


def _pg_rank(rank: int, world: int, store: str) -> None:
    import numpy as np
    import torch.distributed as dist

    import xpushmem.core as xc

    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    xc.init(process_group=dist.group.WORLD)
    assert (xc.my_pe(), xc.n_pes()) == (rank, world)
    a = xc.array(5, np.int64)
    xc.put(a, np.arange(5) + 10 * rank, (rank + 1) % world)
    xc.barrier_all()
    assert (a == np.arange(5) + 10 * ((rank - 1) % world)).all(), a
    total = xc.array(5, np.int64)
    xc.reduce(total, a, "sum")
    assert (total == world * np.arange(5) + 10 * sum(range(world))).all(), total
    xc.free(total)
    xc.free(a)
    xc.finalize()
    dist.destroy_process_group()


def test_start_from_a_torch_process_group():
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_pg_rank, args=(2, os.path.join(d, "store")), nprocs=2, start_method="spawn")
