"""Offline compilation for an XPU target with Intel's Triton (triton-xpu 3.3), without a GPU or a SYCL runtime.

The XPU backend's constructor compiles a small SYCL program to query the device architecture; with no device it
is replaced by a parser that reports none (the ``ocloc`` query is then skipped). The target describes a Data Center
GPU Max; the sub-group size comes from the ``threads_per_warp`` option.
"""

from __future__ import annotations

import inspect
from typing import Any

import triton
import triton.backends as tb
from triton.backends.compiler import GPUTarget

ARCH = dict(
    name="Intel(R) Data Center GPU Max 1550",
    architecture=0,
    sub_group_sizes=[16, 32],
    max_work_group_size=1024,
    max_num_sub_groups=64,
    has_fp64=True,
    has_subgroup_2d_block_io=False,
    has_subgroup_matrix_multiply_accumulate=False,
    has_subgroup_matrix_multiply_accumulate_tensor_float32=False,
    has_bfloat16_conversions=True,
)


class _NoArchParser:
    def parse_device_arch(self, arch: Any) -> str:
        return ""


def _patch_backend() -> None:
    module = tb.backends["intel"].compiler
    cls = module if isinstance(module, type) else dict(inspect.getmembers(module))["XPUBackend"]
    cls.__init__.__globals__["compile_module_from_src"] = lambda src, name: _NoArchParser()


_patch_backend()
TARGET = GPUTarget("xpu", ARCH, 16)


def compile_xpu(fn: Any, signature: dict[str, str], constexprs: dict[str, Any] | None = None, *,
                num_warps: int = 4, threads_per_warp: int = 16,
                extern_libs: dict[str, str] | None = None) -> Any:
    """``triton.compile`` of a ``@triton.jit`` function for the XPU target (constexpr parameters appear in
    ``signature`` as ``"constexpr"``)."""
    src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs or {})
    options: dict[str, Any] = {"num_warps": num_warps, "threads_per_warp": threads_per_warp}
    if extern_libs:
        options["extern_libs"] = extern_libs
    return triton.compile(src, target=TARGET, options=options)
