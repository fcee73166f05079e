"""Triton device functions over xpushmem's device library: the XPU counterpart of PyTorch's ``_nvshmem_triton``.

The public surface is ``_nvshmem_triton``'s (same names, same arguments): ``put``, ``get``, ``get_nbi``,
``putmem_signal_block``, ``wait_until``, ``signal_wait_until``, ``signal_op``, ``fence``, ``quiet``, ``my_pe``,
``n_pes``, ``barrier_all``, ``sync_all``, ``alltoall``, ``broadcast``, ``reduce``, and the decorator
``requires_xpushmem`` (``requires_shmem`` on XPU after ``import xpushmem.torch``)::

    @requires_xpushmem
    @triton.jit
    def kernel(dst, src, n, pe):
        _xpushmem_triton.put(dst, src, n, pe)

Differences from upstream, all deliberate:

* the symbols are the device library's (``xpushmemx_putmem_work_group`` for NVSHMEM's ``nvshmemx_putmem_block``,
  see ``shmem/device-lib/include/xpushmem_device.h``); every work-item of the work-group calls the ``_block``-style
  functions, as with NVSHMEM. Addresses are passed as int64.
* ``get_nbi`` is really non-blocking (upstream calls the blocking get); complete it with ``quiet``.
* comparison and signal operators are xpushmem's: ``CMP_EQ .. CMP_LE`` and ``SIGNAL_SET = 0``, ``SIGNAL_ADD = 1``
  (rocSHMEM's values; NVSHMEM's ADD is 5).
* every argument upstream lets be a Python literal or a ``tl.constexpr`` (counts, PEs, signal values and
  operators, comparison values, teams) may be one: the functions cast with ``tl.cast``, not ``.to()``.
* the extern declarations accept both Triton styles: ``_builder=`` (Triton 3.3, Intel's ``triton-xpu``) and
  ``_semantic=`` (Triton >= 3.4).
* the kernel-load hook chains to a hook already installed instead of replacing it, and is installed on
  ``triton.knobs.runtime.jit_post_compile_hook`` (Triton >= 3.4) or ``JITFunction.compiled_hook`` (Triton 3.3).
"""

from __future__ import annotations

import ctypes
import logging
from functools import lru_cache
from typing import Any, Callable

import triton
import triton.language as tl
from triton.language import core
from triton.runtime.jit import JITFunction, KernelInterface

from ._lib import device_lib_path, lib_path

__all__ = [
    "CMP_EQ", "CMP_GE", "CMP_GT", "CMP_LE", "CMP_LT", "CMP_NE", "EXTERN_LIBS_KEY", "SIGNAL_ADD", "SIGNAL_SET",
    "XpushmemKernelRegistry", "alltoall", "barrier_all", "broadcast", "fence", "find_device_library", "get",
    "get_nbi", "install_kernel_load_hook", "my_pe", "n_pes", "put", "putmem_signal_block", "quiet", "reduce",
    "requires_xpushmem", "set_module_init", "signal_op", "signal_wait_until", "sync_all", "wait_until",
]

logger = logging.getLogger(__name__)

# The device library's operator values (shmem/device-lib/include/xpushmem_device_abi.h).
CMP_EQ, CMP_NE, CMP_GT, CMP_GE, CMP_LT, CMP_LE = 0, 1, 2, 3, 4, 5
SIGNAL_SET, SIGNAL_ADD = 0, 1
TEAM_WORLD = 0

#: The ``extern_libs`` key of the device library. Not ``"libdevice"``: that key replaces Intel's SYCL libdevice.
EXTERN_LIBS_KEY = "libxpushmem_device"


def find_device_library() -> str:
    """Path of ``libxpushmem_device-<version>.bc``: ``$XPUSHMEM_DEVICE_LIB_DIR``, then the installed package, then
    the install prefix (see :func:`xpushmem.device_lib_path`). The name carries the version, so Triton's cache
    (keyed by the path, not the content) never reuses a kernel linked with another release's library; a library
    rebuilt with the same version (a development build) needs a cache of its own (``TRITON_CACHE_DIR``: the
    project's scripts/test-triton.sh keys it by the library's hash)."""
    return str(device_lib_path())


class XpushmemKernelRegistry:
    """Kernels (by bare function name) whose modules get xpushmem's device state when they load."""

    _to_init: dict[str, None] = {}

    @classmethod
    def register(cls, name: str) -> None:
        cls._to_init.setdefault(name)

    @classmethod
    def deregister(cls, name: str) -> None:
        cls._to_init.pop(name, None)

    @classmethod
    def has(cls, name: str) -> bool:
        return name in cls._to_init


# ------------------------------------------------------------------------------------------------ module init


@lru_cache(maxsize=None)
def _ze_module_init_fn() -> Callable[[int], int]:
    lib = ctypes.CDLL(str(lib_path()))
    try:
        fn = lib.xpushmemx_ze_module_init
    except AttributeError:
        raise RuntimeError(f"{lib_path()} does not export xpushmemx_ze_module_init") from None
    fn.argtypes = [ctypes.c_void_p]
    fn.restype = ctypes.c_int
    lib.xpushmem_last_error.restype = ctypes.c_char_p
    fn.last_error = lib.xpushmem_last_error  # type: ignore[attr-defined]
    return fn


def ze_module_init(module: Any) -> None:
    """Puts xpushmem's device state (this PE, the PE count, the peers' heap bases, ...) into a Level Zero module:
    ``xpushmemx_ze_module_init``. ``module`` is a ``ze_module_handle_t`` as an int, an object with a ``ze_module``
    attribute holding one, or the ``"kernel_bundle"`` capsule of Intel's Triton driver (through the XPU build of
    ``xpushmem.torch``'s shim). Raises ``RuntimeError`` with xpushmem's message on failure."""
    handle = getattr(module, "ze_module", module)
    if type(handle).__name__ == "PyCapsule":
        # Intel's Triton driver: a capsule "kernel_bundle" over a SYCL kernel bundle of one Level Zero module.
        from .torch import shim

        if not hasattr(shim, "ze_module_of_kernel_bundle"):
            raise TypeError(
                "cannot get the Level Zero module of a SYCL kernel bundle: xpushmem.torch's shim was built without "
                "XPU support (an XPU torch and the SYCL headers are needed; see XPUSHMEM_SYCL_INCLUDE)"
            )
        handle = shim.ze_module_of_kernel_bundle(handle)
    if not isinstance(handle, int):
        raise TypeError(
            f"cannot get a Level Zero module from {type(module).__name__}: pass a ze_module_handle_t (an int) or "
            "the kernel bundle capsule of Intel's Triton driver"
        )
    fn = _ze_module_init_fn()
    if fn(handle) != 0:
        raise RuntimeError(f"xpushmemx_ze_module_init: {fn.last_error().decode(errors='replace')}")


_module_init: Callable[[Any], None] = ze_module_init


def set_module_init(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    """Replaces how the hook initialises a loaded kernel's module (``fn(kernel.module)``); returns the previous
    function. The default is :func:`ze_module_init`."""
    global _module_init
    previous, _module_init = _module_init, fn
    return previous


def _xpushmem_init_hook(*args: Any, **kwargs: Any) -> None:
    """Post-compile hook: for a registered kernel, loads its module and initialises xpushmem's state in it."""
    jit_function = kwargs["fn"].jit_function
    name = jit_function.fn.__name__
    if not XpushmemKernelRegistry.has(name):
        return
    kernel = jit_function.device_caches[kwargs["compile"]["device"]][0].get(kwargs["key"])
    if kernel is None:
        logger.warning("Triton has not created a kernel for %s: its module was not initialised", name)
        return
    _ = kernel.run  # loads the module
    _module_init(kernel.module)


def _chained(previous: Callable[..., Any] | None) -> Callable[..., Any]:
    def hook(*args: Any, **kwargs: Any) -> Any:
        _xpushmem_init_hook(*args, **kwargs)
        return previous(*args, **kwargs) if previous is not None else None

    hook._xpushmem_hook = True  # type: ignore[attr-defined]
    hook._xpushmem_previous = previous  # type: ignore[attr-defined]
    return hook


def install_kernel_load_hook() -> None:
    """Installs the kernel-load hook once, keeping (and calling after it) any hook already installed:
    ``triton.knobs.runtime.jit_post_compile_hook`` where it exists (Triton >= 3.4), else
    ``JITFunction.compiled_hook`` (Triton 3.3)."""
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    if runtime is not None and hasattr(runtime, "jit_post_compile_hook"):
        current = runtime.jit_post_compile_hook
        if not getattr(current, "_xpushmem_hook", False):
            runtime.jit_post_compile_hook = _chained(current)
    else:
        current = JITFunction.compiled_hook
        if not getattr(current, "_xpushmem_hook", False):
            JITFunction.compiled_hook = _chained(current)


class GridCallableWithExtern(KernelInterface):
    """``kernel[grid](...)`` with the device library passed as ``extern_libs`` (as upstream's helper)."""

    def __init__(self, jit_func: JITFunction, extern_libs: dict[str, str]) -> None:
        self.jit_func = jit_func
        self.extern_libs = extern_libs

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self.jit_func.run(*args, **kwargs, extern_libs=self.extern_libs)


def requires_xpushmem(jit_func: Any) -> GridCallableWithExtern:
    """Decorator for ``@triton.jit`` kernels that call this module's functions: links the device library
    (``extern_libs={EXTERN_LIBS_KEY: find_device_library()}``), registers the kernel, and installs the kernel-load
    hook that initialises xpushmem's state in the kernel's module."""
    if not isinstance(jit_func, JITFunction):
        raise TypeError(f"requires_xpushmem must be applied to a @triton.jit function, got {type(jit_func)}")
    extern_libs = {EXTERN_LIBS_KEY: find_device_library()}
    XpushmemKernelRegistry.register(jit_func.fn.__name__)
    install_kernel_load_hook()
    return GridCallableWithExtern(jit_func, extern_libs)


# ------------------------------------------------------------------------------------------ extern declarations


def _style(_builder: Any, _semantic: Any) -> dict[str, Any]:
    """The keyword Triton passes builtins: ``_builder`` (3.3) or ``_semantic`` (>= 3.4)."""
    return {"_builder": _builder} if _builder is not None else {"_semantic": _semantic}


def _call(symbol: str, args: list[Any], types: tuple[str, ...], ret: str, is_pure: bool,
          _builder: Any, _semantic: Any) -> Any:
    return core.extern_elementwise(
        "", "", args, {tuple(core.dtype(t) for t in types): (symbol, core.dtype(ret))}, is_pure=is_pure,
        **_style(_builder, _semantic),
    )


I64_I64_I64_I32 = ("int64", "int64", "int64", "int32")


@core.extern
def putmem_work_group(dest, source, size_bytes, pe, _builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """``xpushmemx_putmem_work_group`` (NVSHMEM ``nvshmemx_putmem_block``)."""
    return _call("xpushmemx_putmem_work_group", [dest, source, size_bytes, pe], I64_I64_I64_I32, "int32", False,
                 _builder, _semantic)


@core.extern
def getmem_work_group(dest, source, size_bytes, pe, _builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """``xpushmemx_getmem_work_group`` (NVSHMEM ``nvshmemx_getmem_block``)."""
    return _call("xpushmemx_getmem_work_group", [dest, source, size_bytes, pe], I64_I64_I64_I32, "int32", False,
                 _builder, _semantic)


@core.extern
def getmem_nbi_work_group(dest, source, size_bytes, pe, _builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """``xpushmemx_getmem_nbi_work_group`` (NVSHMEM ``nvshmemx_getmem_nbi_block``); complete with ``quiet``."""
    return _call("xpushmemx_getmem_nbi_work_group", [dest, source, size_bytes, pe], I64_I64_I64_I32, "int32",
                 False, _builder, _semantic)


@core.extern
def putmem_signal_work_group(dst, src, size_bytes, signal, sig_val, sig_op, pe,  # noqa: ANN001, ANN201
                             _builder=None, _semantic=None):
    """``xpushmemx_putmem_signal_work_group`` (NVSHMEM ``nvshmemx_putmem_signal_block``)."""
    return _call("xpushmemx_putmem_signal_work_group", [dst, src, size_bytes, signal, sig_val, sig_op, pe],
                 ("int64", "int64", "int64", "int64", "uint64", "int32", "int32"), "int32", False,
                 _builder, _semantic)


@core.extern
def int_wait_until(ivar, cmp_op, cmp_val, _builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """``xpushmem_int_wait_until`` on a 4-byte symmetric word."""
    return _call("xpushmem_int_wait_until", [ivar, cmp_op, cmp_val], ("int64", "int32", "int32"), "int32", False,
                 _builder, _semantic)


@core.extern
def signal_wait_until_extern(signal, cmp, cmp_val, _builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """``xpushmem_signal_wait_until`` on a 64-bit signal word; returns its value."""
    return _call("xpushmem_signal_wait_until", [signal, cmp, cmp_val], ("int64", "int32", "uint64"), "uint64",
                 False, _builder, _semantic)


@core.extern
def signal_op_extern(sig_addr, signal, sig_op, pe, _builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """``xpushmemx_signal_op`` (NVSHMEM ``nvshmemx_signal_op``)."""
    return _call("xpushmemx_signal_op", [sig_addr, signal, sig_op, pe], ("int64", "uint64", "int32", "int32"),
                 "int32", False, _builder, _semantic)


@core.extern
def fence(_builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """Orders this PE's puts to each PE (``xpushmem_fence``)."""
    return _call("xpushmem_fence", [], (), "int32", False, _builder, _semantic)


@core.extern
def quiet(_builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """Completes this PE's outstanding puts and non-blocking gets (``xpushmem_quiet``)."""
    return _call("xpushmem_quiet", [], (), "int32", False, _builder, _semantic)


@core.extern
def my_pe(_builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """This PE's number (``xpushmem_my_pe``)."""
    return _call("xpushmem_my_pe", [], (), "int32", True, _builder, _semantic)


@core.extern
def n_pes(_builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """The number of PEs (``xpushmem_n_pes``)."""
    return _call("xpushmem_n_pes", [], (), "int32", True, _builder, _semantic)


@core.extern
def barrier_all(_builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """Completes this PE's puts and waits for every PE (``xpushmemx_barrier_all_work_group``: the work-group
    calls it)."""
    return _call("xpushmemx_barrier_all_work_group", [], (), "int32", False, _builder, _semantic)


@core.extern
def sync_all(_builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """Waits for every PE, making local stores visible (``xpushmemx_sync_all_work_group``)."""
    return _call("xpushmemx_sync_all_work_group", [], (), "int32", False, _builder, _semantic)


@core.extern
def alltoallmem_work_group(team, dest, source, size_bytes_per_pe, _builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """``xpushmemx_alltoallmem_work_group`` (NVSHMEM ``nvshmemx_alltoallmem_block``)."""
    return _call("xpushmemx_alltoallmem_work_group", [team, dest, source, size_bytes_per_pe],
                 ("int32", "int64", "int64", "int64"), "int32", False, _builder, _semantic)


@core.extern
def broadcastmem_work_group(team, dest, source, size_bytes, pe_root, _builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """``xpushmemx_broadcastmem_work_group`` (NVSHMEM ``nvshmemx_broadcastmem_block``)."""
    return _call("xpushmemx_broadcastmem_work_group", [team, dest, source, size_bytes, pe_root],
                 ("int32", "int64", "int64", "int64", "int32"), "int32", False, _builder, _semantic)


# Element types of reductions: Triton's name -> the device library's.
_REDUCE_TYPES = {
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "fp16": "half", "bf16": "bfloat16", "fp32": "float", "fp64": "double",
}
_REDUCE_OPS = ("sum", "max", "min", "prod")


def _constexpr_value(x: Any) -> Any:
    return getattr(x, "value", x)


@core.extern
def reduce_work_group(team, dest, source, nreduce, operation, dtype, _builder=None, _semantic=None):  # noqa: ANN001, ANN201
    """``xpushmemx_<type>_<op>_reduce_work_group``: ``operation`` one of sum/max/min/prod, ``dtype`` the element
    type (a constexpr ``tl.dtype``); errors name an unsupported operation or type."""
    op = _constexpr_value(operation)
    ty = _constexpr_value(dtype)
    if op not in _REDUCE_OPS:
        raise ValueError(f"reduce: operation {op!r} is not one of {_REDUCE_OPS}")
    name = _REDUCE_TYPES.get(getattr(ty, "name", str(ty)))
    if name is None:
        raise ValueError(f"reduce: element type {ty} is not one of {sorted(_REDUCE_TYPES)}")
    return _call(f"xpushmemx_{name}_{op}_reduce_work_group", [team, dest, source, nreduce],
                 ("int32", "int64", "int64", "int64"), "int32", False, _builder, _semantic)


# ------------------------------------------------------------------------------------------ the public functions
# Every argument goes through ``tl.cast`` to the extern's type, never ``.to()``: upstream's call forms pass Python
# literals and ``tl.constexpr`` values (``signal_op(ptr, 1, SIGNAL_SET, pe)``, ``put(dst, src, 100, 1)``), which
# have no ``.to()``; ``tl.cast`` makes a tensor of them first. Pointers become their int64 address the same way.


@triton.jit
def put(dest, source, nelems, pe):  # noqa: ANN001, ANN201
    """Copies ``nelems`` elements of ``source`` (local) to ``dest`` on PE ``pe``; the work-group calls it."""
    tl.static_assert(dest.type == source.type)
    nbytes = nelems * dest.type.element_ty.primitive_bitwidth // 8
    return putmem_work_group(tl.cast(dest, tl.int64), tl.cast(source, tl.int64), tl.cast(nbytes, tl.int64),
                             tl.cast(pe, tl.int32))


@triton.jit
def get(dest, source, nelems, pe):  # noqa: ANN001, ANN201
    """Copies ``nelems`` elements of ``source`` on PE ``pe`` to ``dest`` (local); the work-group calls it."""
    tl.static_assert(dest.type == source.type)
    nbytes = nelems * dest.type.element_ty.primitive_bitwidth // 8
    return getmem_work_group(tl.cast(dest, tl.int64), tl.cast(source, tl.int64), tl.cast(nbytes, tl.int64),
                             tl.cast(pe, tl.int32))


@triton.jit
def get_nbi(dest, source, nelems, pe):  # noqa: ANN001, ANN201
    """Non-blocking ``get``: ``dest`` is valid after a following ``quiet``."""
    tl.static_assert(dest.type == source.type)
    nbytes = nelems * dest.type.element_ty.primitive_bitwidth // 8
    return getmem_nbi_work_group(tl.cast(dest, tl.int64), tl.cast(source, tl.int64), tl.cast(nbytes, tl.int64),
                                 tl.cast(pe, tl.int32))


@triton.jit
def putmem_signal_block(dst, src, size_bytes, signal, sig_val, sig_op, pe):  # noqa: ANN001, ANN201
    """Copies ``size_bytes`` bytes to PE ``pe``, then applies ``sig_op`` (SIGNAL_SET/SIGNAL_ADD) with ``sig_val``
    to the 64-bit ``signal`` word there; the work-group calls it."""
    return putmem_signal_work_group(tl.cast(dst, tl.int64), tl.cast(src, tl.int64), tl.cast(size_bytes, tl.int64),
                                    tl.cast(signal, tl.int64), tl.cast(sig_val, tl.uint64),
                                    tl.cast(sig_op, tl.int32), tl.cast(pe, tl.int32))


@triton.jit
def wait_until(ivar, cmp_op, cmp_val):  # noqa: ANN001, ANN201
    """Waits until the local 4-byte word ``ivar`` compares ``cmp_op`` to ``cmp_val``."""
    return int_wait_until(tl.cast(ivar, tl.int64), tl.cast(cmp_op, tl.int32), tl.cast(cmp_val, tl.int32))


@triton.jit
def signal_wait_until(signal, cmp, cmp_val):  # noqa: ANN001, ANN201
    """Waits until the local 64-bit ``signal`` compares ``cmp`` to ``cmp_val``; returns its value."""
    return signal_wait_until_extern(tl.cast(signal, tl.int64), tl.cast(cmp, tl.int32), tl.cast(cmp_val, tl.uint64))


@triton.jit
def signal_op(sig_addr, signal, sig_op, pe):  # noqa: ANN001, ANN201
    """Applies ``sig_op`` with ``signal`` to the 64-bit word ``sig_addr`` on PE ``pe``."""
    return signal_op_extern(tl.cast(sig_addr, tl.int64), tl.cast(signal, tl.uint64), tl.cast(sig_op, tl.int32),
                            tl.cast(pe, tl.int32))


@triton.jit
def alltoall(team, dest, source, nelems_per_pe):  # noqa: ANN001, ANN201
    """Team all-to-all: block ``j`` of ``source`` goes to block ``my_pe`` of ``dest`` on member ``j``."""
    tl.static_assert(dest.type == source.type)
    nbytes = nelems_per_pe * dest.type.element_ty.primitive_bitwidth // 8
    return alltoallmem_work_group(tl.cast(team, tl.int32), tl.cast(dest, tl.int64), tl.cast(source, tl.int64),
                                  tl.cast(nbytes, tl.int64))


@triton.jit
def broadcast(team, dest, source, nelems, pe_root):  # noqa: ANN001, ANN201
    """Team broadcast of ``nelems`` elements of ``source`` on member ``pe_root`` to ``dest`` on every member."""
    tl.static_assert(dest.type == source.type)
    nbytes = nelems * dest.type.element_ty.primitive_bitwidth // 8
    return broadcastmem_work_group(tl.cast(team, tl.int32), tl.cast(dest, tl.int64), tl.cast(source, tl.int64),
                                   tl.cast(nbytes, tl.int64), tl.cast(pe_root, tl.int32))


@triton.jit
def reduce(team, dest, source, nreduce, operation: tl.constexpr):  # noqa: ANN001, ANN201
    """Team reduction (``operation`` sum/max/min/prod) of ``nreduce`` elements of ``source`` into ``dest``."""
    tl.static_assert(dest.type == source.type)
    dtype: tl.constexpr = dest.type.element_ty
    return reduce_work_group(tl.cast(team, tl.int32), tl.cast(dest, tl.int64), tl.cast(source, tl.int64),
                             tl.cast(nreduce, tl.int64), operation, dtype)
