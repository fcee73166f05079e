"""The kernels of upstream test_shmem_triton.py, compiled by triton-xpu for an XPU target with xpushmem's device
bitcode (``extern_libs``), loaded on ze-emu through the xpushmem runtime and the ``requires_shmem`` load hook, and
launched as Intel's SYCL launcher would, at 2 and 4 PEs (``xpushmem-run``) and sub-group sizes 16 and 32; each case
checks against torch CPU references (pe_shmem_triton.py). One job per (PEs, sub-group size) runs its cases in order.
Needs libxpushmem.so and xpushmem-run (XPUSHMEM_LIB_DIR), ze-emu and the OpenCL CPU runtime (device-env.sh), and
the device library; scripts/test-triton.sh provides them."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PAIR = ["test_triton_put", "test_triton_get", "test_triton_get_nbi", "test_triton_put_signal_set",
        "test_triton_put_signal_add", "test_triton_wait_until", "test_triton_signal_wait_until",
        "test_triton_literal_args", "test_triton_fence", "test_triton_quiet"]
ANY = ["test_triton_get_ring", "test_triton_barrier", "test_triton_sync", "test_triton_alltoall",
       "test_triton_broadcast"]
# Upstream's reductions take every dtype of theirs (sum 8, min/max 8, prod 7: 23 cases, 31 programs, each
# compiled on the OpenCL CPU runtime in about a second). Here a covering set of that product: every dtype meets a
# reduction, every operation meets narrow and wide integers and 16-, 32- or 64-bit floats (10 cases, 13 programs).
# The typed device functions themselves are each linked by test_externs.py and each run by the device library's
# suites.
SUM = ["int8", "int64", "uint8", "float32", "bfloat16"]
MINMAX = ["int16", "float16", "float64"]
PROD = ["int32", "bfloat16"]
REDUCE = ([f"test_triton_sum_reduce:{t}" for t in SUM] + [f"test_triton_minmax_reduce:{t}" for t in MINMAX]
          + [f"test_triton_prod_reduce:{t}" for t in PROD])
# (PEs, threads_per_warp) -> cases. Upstream's two-rank cases (peer = 1 - rank) run at 2 PEs.
JOBS = {
    (2, 16): ["test_launcher"] + PAIR + ANY + REDUCE + ["test_missing_symbol"],
    (2, 32): ["test_launcher", "test_triton_put", "test_triton_put_signal_add", "test_triton_get_ring",
              "test_triton_barrier", "test_triton_alltoall", "test_triton_sum_reduce:int32"],
    (4, 16): ANY + ["test_triton_sum_reduce:int64"],
}
CASES = [(n, tpw, case) for (n, tpw), cases in JOBS.items() for case in cases]


def _env_or_skip() -> dict[str, str]:
    lib_dir = os.environ.get("XPUSHMEM_LIB_DIR")
    missing = [what for what, ok in [
        ("XPUSHMEM_LIB_DIR with libxpushmem.so and xpushmem-run",
         lib_dir and (Path(lib_dir) / "xpushmem-run").exists()),
        ("ze-emu (ZE_ENABLE_ALT_DRIVERS)", os.environ.get("ZE_ENABLE_ALT_DRIVERS")),
        ("the OpenCL CPU runtime (OCL_ICD_FILENAMES)", os.environ.get("OCL_ICD_FILENAMES")),
    ] if not ok]
    if missing:
        if os.environ.get("XPUSHMEM_REQUIRE_OPENCL") == "1":
            pytest.fail(f"XPUSHMEM_REQUIRE_OPENCL=1 but missing: {', '.join(missing)}")
        pytest.skip(f"missing: {', '.join(missing)} (run scripts/test-triton.sh)")
    # The device library and its C API (xpushmemx_ze_get_handles/_module_init) land with the device-library issue.
    import ctypes

    import xpushmem

    try:
        xpushmem.device_lib_path()
        lib = ctypes.CDLL(str(Path(lib_dir) / "libxpushmem.so"))
        lib.xpushmemx_ze_get_handles, lib.xpushmemx_ze_module_init  # noqa: B018
    except (RuntimeError, AttributeError) as e:
        pytest.skip(f"the xpushmem device library is not available: {e}")
    return dict(os.environ, XPUSHMEM_HEAP="device", XPUSHMEM_SYMMETRIC_SIZE="64M",
                # No empty entry: it would put the working directory (the source tree) before the installed package.
                PYTHONPATH=os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p))


@lru_cache(maxsize=None)
def _job(n: int, tpw: int) -> tuple[int, str]:
    env = _env_or_skip()
    run = Path(env["XPUSHMEM_LIB_DIR"]) / "xpushmem-run"
    timeout = int(os.environ.get("XPUSHMEM_TRITON_JOB_TIMEOUT_S", "900"))
    p = subprocess.run([str(run), "-n", str(n), "--timeout", str(timeout), sys.executable, "-P",
                        str(HERE / "pe_shmem_triton.py"), str(tpw), *JOBS[(n, tpw)]],
                       env=env, capture_output=True, text=True, timeout=timeout + 60)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize(("n_pes", "tpw", "case"), CASES, ids=[f"{n}pe-tpw{t}-{c}" for n, t, c in CASES])
def test_upstream_kernel(n_pes: int, tpw: int, case: str) -> None:
    _env_or_skip()
    rc, out = _job(n_pes, tpw)
    passed = [ln for ln in out.splitlines() if f"PASSED {case} " in ln]
    assert len(passed) == n_pes, f"{case} passed on {len(passed)} of {n_pes} PEs (job exit {rc}):\n{out[-6000:]}"
