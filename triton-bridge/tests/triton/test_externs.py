"""The kernels of upstream test_shmem_triton.py compile with triton-xpu for an XPU target, at sub-group sizes 16 and
32, and import exactly the device-library functions ``_xpushmem_triton`` declares for them (with the library
linked through ``extern_libs`` they import none: see test_shmem_triton_xpu.py)."""

from __future__ import annotations

import re

import pytest

import kernels as K
from _xpu import compile_xpu

# kernel -> (signature, constexprs, the device-library functions it calls)
P = "*i64"
CASES = {
    "put": (K.my_put_kernel, {"dest": P, "src": P, "nelems": "i32", "pe": "i32"}, {},
            {"xpushmemx_putmem_work_group"}),
    "get": (K.my_get_kernel, {"dest": "*i8", "src": "*i8", "nelems": "i32", "pe": "i32", "nbi": "constexpr"},
            {"nbi": False}, {"xpushmemx_getmem_work_group"}),
    "get_nbi": (K.my_get_kernel, {"dest": "*i8", "src": "*i8", "nelems": "i32", "pe": "i32", "nbi": "constexpr"},
                {"nbi": True}, {"xpushmemx_getmem_nbi_work_group", "xpushmem_quiet"}),
    "put_signal": (K.my_putmem_signal_block_kernel,
                   {"dst": "*i8", "src": "*i8", "size_bytes": "i32", "signal": P, "sig_val": "i32",
                    "sig_op": "i32", "peer": "i32"}, {}, {"xpushmemx_putmem_signal_work_group"}),
    "signal_wait_until": (K.my_signal_wait_until_kernel, {"signal": P, "cmp_op": "i32", "cmp_val": "i32"}, {},
                          {"xpushmem_signal_wait_until"}),
    "signal_op": (K.my_signal_op_kernel, {"sig_addr": P, "signal": "i32", "sig_op": "i32", "peer": "i32"}, {},
                  {"xpushmemx_signal_op"}),
    "wait_until": (K.my_wait_until_kernel, {"ivar": "*i32", "cmp_op": "i32", "cmp_val": "i32"}, {},
                   {"xpushmem_int_wait_until"}),
    "fence": (K.my_put_with_fence_kernel,
              {"dst1": P, "src1": P, "dst2": P, "src2": P, "flag_dst": P, "flag_src": P, "nelems": "i32",
               "peer": "i32"}, {}, {"xpushmemx_putmem_work_group", "xpushmem_fence"}),
    "quiet": (K.my_put_with_quiet_kernel,
              {"dst": P, "src": P, "flag_dst": P, "flag_src": P, "nelems": "i32", "peer": "i32"}, {},
              {"xpushmemx_putmem_work_group", "xpushmem_quiet"}),
    "barrier": (K.my_barrier_test_kernel, {"dst": "*i32", "src": "*i32", "nelems": "i32"}, {},
                {"xpushmem_my_pe", "xpushmem_n_pes", "xpushmemx_putmem_work_group",
                 "xpushmemx_barrier_all_work_group"}),
    "sync": (K.my_sync_test_kernel, {"local_data": "*i32", "remote_data": "*i32", "nelems": "i32"}, {},
             {"xpushmem_my_pe", "xpushmem_n_pes", "xpushmemx_sync_all_work_group", "xpushmemx_getmem_work_group"}),
    "alltoall": (K.my_alltoall_kernel, {"team_handle": "i32", "dst": P, "src": P, "nelems_per_pe": "i32"}, {},
                 {"xpushmemx_alltoallmem_work_group"}),
    "broadcast": (K.my_broadcast_kernel,
                  {"team_handle": "i32", "dst": P, "src": P, "nelems": "i32", "pe_root": "i32"}, {},
                  {"xpushmemx_broadcastmem_work_group"}),
}
REDUCE_TYPES = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16",
                "u32": "uint32", "u64": "uint64", "fp16": "half", "bf16": "bfloat16", "fp32": "float",
                "fp64": "double"}


def imports(spv: bytes) -> set[str]:
    """Names with Import linkage in a SPIR-V module (OpDecorate LinkageAttributes "name" Import)."""
    words = [int.from_bytes(spv[i:i + 4], "little") for i in range(0, len(spv), 4)]
    out, i = set(), 5
    while i < len(words):
        wc, op = words[i] >> 16, words[i] & 0xFFFF
        if op == 71 and words[i + 2] == 41:  # OpDecorate _ LinkageAttributes
            raw = b"".join(w.to_bytes(4, "little") for w in words[i + 3:i + wc])
            name, _, _ = raw.partition(b"\0")
            if words[i + wc - 1] == 1 and not name.startswith(b"__spirv_BuiltIn"):  # Import, not a builtin
                out.add(name.decode())
        i += wc
    return out


@pytest.mark.parametrize("tpw", [16, 32])
@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_imports_its_device_functions(case: str, tpw: int) -> None:
    fn, sig, constexprs, expected = CASES[case]
    k = compile_xpu(fn, sig, constexprs, threads_per_warp=tpw)
    assert imports(k.asm["spv"]) == expected
    assert k.metadata.threads_per_warp == tpw


@pytest.mark.parametrize("op", ["sum", "min", "max", "prod"])
@pytest.mark.parametrize("ty", sorted(REDUCE_TYPES))
def test_reduce_imports_the_typed_function(ty: str, op: str) -> None:
    sig = {"team_handle": "i32", "dest_tensor": f"*{ty}", "source_tensor": f"*{ty}", "nreduce": "i32",
           "operation": "constexpr"}
    k = compile_xpu(K.my_reduce_kernel, sig, {"operation": op})
    assert imports(k.asm["spv"]) == {f"xpushmemx_{REDUCE_TYPES[ty]}_{op}_reduce_work_group"}


def test_reduce_rejects_an_unknown_operation() -> None:
    sig = {"team_handle": "i32", "dest_tensor": "*fp32", "source_tensor": "*fp32", "nreduce": "i32",
           "operation": "constexpr"}
    with pytest.raises(Exception) as info:
        compile_xpu(K.my_reduce_kernel, sig, {"operation": "avg"})
    chain, e = [], info.value
    while e is not None:
        chain.append(str(e))
        e = e.__cause__
    assert any(re.search("operation 'avg' is not one of", m) for m in chain), chain


def _device_lib() -> str:
    import xpushmem

    try:
        return str(xpushmem.device_lib_path())
    except RuntimeError as e:
        pytest.skip(f"the xpushmem device library is not available: {e}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_links_completely_with_the_device_library(case: str) -> None:
    """With the device bitcode as an extern_libs entry, every function the kernel calls is defined."""
    fn, sig, constexprs, _ = CASES[case]
    k = compile_xpu(fn, sig, constexprs, extern_libs={"libxpushmem_device": _device_lib()})
    assert imports(k.asm["spv"]) == set()


@pytest.mark.parametrize("ty", sorted(REDUCE_TYPES))
def test_reduce_links_completely_with_the_device_library(ty: str) -> None:
    sig = {"team_handle": "i32", "dest_tensor": f"*{ty}", "source_tensor": f"*{ty}", "nreduce": "i32",
           "operation": "constexpr"}
    for op in ("sum", "min", "max", "prod"):
        k = compile_xpu(K.my_reduce_kernel, sig, {"operation": op},
                        extern_libs={"libxpushmem_device": _device_lib()})
        assert imports(k.asm["spv"]) == set(), op
