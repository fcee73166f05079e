"""A small launcher for kernels compiled by Intel's Triton, on this PE's Level Zero device through xpushmem.

No PyPI torch has ``torch.xpu``, so Triton's own XPU driver (SYCL) cannot load or launch here. This launcher is the
one part of the Triton tests that differs from a GPU run; everything else is Triton's and xpushmem's own path:

* **compile**: :meth:`TritonXpuKernel.compile` calls ``triton.compile`` for the XPU target with the
  ``extern_libs`` of the ``@requires_xpushmem`` wrapper (the device bitcode), as ``JITFunction.run`` does;
* **load**: the SPIR-V becomes a Level Zero module in the xpushmem runtime's context (``xpushmemx_ze_get_handles``,
  ``zeModuleCreate``; ze-emu removes what the CPU runtime rejects), the kernel goes into the JIT function's kernel
  cache and Triton's post-compile hook is called as ``JITFunction.run`` calls it: the hook that ``requires_xpushmem``
  installed loads the kernel and calls ``xpushmemx_ze_module_init`` on ``kernel.module``;
* **launch**, as Intel's SYCL launcher does: local size ``num_warps * threads_per_warp``, one work-group per program
  (grid), arguments the non-constexpr parameters (tensors as device addresses, ints as 32-bit values), and a
  trailing local-memory argument when ``metadata.shared > 0``; a synchronous immediate command list.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from triton.runtime.jit import JITFunction

from _xpu import compile_xpu

ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC = 0xE
ZE_STRUCTURE_TYPE_MODULE_DESC = 0x1B
ZE_STRUCTURE_TYPE_KERNEL_DESC = 0x1D
ZE_MODULE_FORMAT_IL_SPIRV = 0
ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS = 1


class _ModuleDesc(ctypes.Structure):
    _fields_ = [("stype", ctypes.c_uint32), ("pNext", ctypes.c_void_p), ("format", ctypes.c_uint32),
                ("inputSize", ctypes.c_size_t), ("pInputModule", ctypes.c_void_p),
                ("pBuildFlags", ctypes.c_char_p), ("pConstants", ctypes.c_void_p)]


class _KernelDesc(ctypes.Structure):
    _fields_ = [("stype", ctypes.c_uint32), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("pKernelName", ctypes.c_char_p)]


class _QueueDesc(ctypes.Structure):
    _fields_ = [("stype", ctypes.c_uint32), ("pNext", ctypes.c_void_p), ("ordinal", ctypes.c_uint32),
                ("index", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("mode", ctypes.c_uint32),
                ("priority", ctypes.c_uint32)]


class _GroupCount(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint32), ("y", ctypes.c_uint32), ("z", ctypes.c_uint32)]


class ZeError(RuntimeError):
    """A Level Zero call failed; the message names the call, its result and the build log if any."""


class Ze:
    """The Level Zero calls the launcher needs, on the xpushmem runtime's driver, device and context."""

    def __init__(self, xpushmem: ctypes.CDLL) -> None:
        self.lib = ctypes.CDLL("libze_loader.so.1")
        drv, dev, ctx = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        xpushmem.xpushmemx_ze_get_handles.argtypes = [ctypes.POINTER(ctypes.c_void_p)] * 3
        if xpushmem.xpushmemx_ze_get_handles(ctypes.byref(drv), ctypes.byref(dev), ctypes.byref(ctx)) != 0:
            xpushmem.xpushmem_last_error.restype = ctypes.c_char_p
            raise ZeError(f"xpushmemx_ze_get_handles: {xpushmem.xpushmem_last_error().decode()}")
        self.device, self.context = dev, ctx
        desc = _QueueDesc(ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, None, 0, 0, 0, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS, 0)
        self.cmdlist = ctypes.c_void_p()
        self.call("zeCommandListCreateImmediate", ctx, dev, ctypes.byref(desc), ctypes.byref(self.cmdlist))

    def call(self, name: str, *args: Any) -> None:
        r = getattr(self.lib, name)(*args)
        if r != 0:
            raise ZeError(f"{name} = {r:#x}")

    def build_log(self, log: ctypes.c_void_p) -> str:
        n = ctypes.c_size_t()
        self.lib.zeModuleBuildLogGetString(log, ctypes.byref(n), None)
        buf = ctypes.create_string_buffer(n.value)
        self.lib.zeModuleBuildLogGetString(log, ctypes.byref(n), buf)
        self.lib.zeModuleBuildLogDestroy(log)
        return buf.value.decode(errors="replace")

    def module(self, spirv: bytes) -> int:
        """``zeModuleCreate`` from SPIR-V; a failed build raises with the build log (e.g. a missing symbol)."""
        buf = ctypes.create_string_buffer(spirv, len(spirv))
        desc = _ModuleDesc(ZE_STRUCTURE_TYPE_MODULE_DESC, None, ZE_MODULE_FORMAT_IL_SPIRV, len(spirv),
                           ctypes.cast(buf, ctypes.c_void_p), b"", None)
        module, log = ctypes.c_void_p(), ctypes.c_void_p()
        r = self.lib.zeModuleCreate(self.context, self.device, ctypes.byref(desc), ctypes.byref(module),
                                    ctypes.byref(log))
        text = self.build_log(log) if log.value else ""
        if r != 0:
            raise ZeError(f"zeModuleCreate = {r:#x}: {text}")
        return module.value

    def kernel(self, module: int, name: str) -> int:
        desc = _KernelDesc(ZE_STRUCTURE_TYPE_KERNEL_DESC, None, 0, name.encode())
        k = ctypes.c_void_p()
        self.call("zeKernelCreate", ctypes.c_void_p(module), ctypes.byref(desc), ctypes.byref(k))
        return k.value

    def launch(self, kernel: int, args: list[tuple[int, Any]], groups: int, local: int) -> None:
        k = ctypes.c_void_p(kernel)
        for i, (size, value) in enumerate(args):
            ptr = None if value is None else ctypes.cast(ctypes.byref(value), ctypes.c_void_p)
            self.call("zeKernelSetArgumentValue", k, ctypes.c_uint32(i), ctypes.c_size_t(size), ptr)
        self.call("zeKernelSetGroupSize", k, ctypes.c_uint32(local), ctypes.c_uint32(1), ctypes.c_uint32(1))
        gc = _GroupCount(groups, 1, 1)
        self.call("zeCommandListAppendLaunchKernel", self.cmdlist, k, ctypes.byref(gc), None, 0, None)


class _LoadedKernel:
    """What Triton's kernel cache holds for a compiled kernel: ``run`` loads it, ``module`` is its module."""

    def __init__(self, ze: Ze, compiled: Any) -> None:
        self.ze, self.compiled = ze, compiled
        self._module: int | None = None

    @property
    def run(self) -> None:
        if self._module is None:
            self._module = self.ze.module(self.compiled.asm["spv"])

    @property
    def module(self) -> int:
        assert self._module is not None, "module read before the kernel was loaded"
        return self._module


@dataclass
class TritonXpuKernel:
    """A ``@requires_xpushmem`` (``@requires_shmem``) kernel, launched ``kernel[grid](*args, **kwargs)``."""

    wrapper: Any  # xpushmem._xpushmem_triton.GridCallableWithExtern
    ze: Ze
    threads_per_warp: int = 16
    num_warps: int = 4

    def __post_init__(self) -> None:
        self._loaded: dict[tuple, tuple[_LoadedKernel, int]] = {}

    @property
    def jit(self) -> JITFunction:
        return self.wrapper.jit_func

    def __getitem__(self, grid: tuple[int, ...]):  # noqa: ANN204
        return lambda *args, **kwargs: self.run(grid, *args, **kwargs)

    def _bind(self, args: tuple, kwargs: dict) -> tuple[dict[str, Any], dict[str, Any]]:
        """Parameters by name, split into runtime values and constexprs (launch options are dropped)."""
        for option in ("launch_cooperative_grid", "num_ctas", "num_warps"):
            kwargs.pop(option, None)
        names = [p.name for p in self.jit.params]
        values = dict(zip(names, args))
        values.update(kwargs)
        missing = [n for n in names if n not in values]
        if missing:
            raise TypeError(f"{self.jit.fn.__name__}: missing arguments {missing}")
        constexprs = {p.name: values[p.name] for p in self.jit.params if p.is_constexpr}
        return {n: values[n] for n in names if n not in constexprs}, constexprs

    @staticmethod
    def _sig(value: Any) -> str:
        import torch

        if isinstance(value, torch.Tensor):
            return "*" + {torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
                          torch.uint8: "u8", torch.uint16: "u16", torch.uint32: "u32", torch.uint64: "u64",
                          torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32",
                          torch.float64: "fp64"}[value.dtype]
        if isinstance(value, bool):
            return "i1"
        if isinstance(value, int):
            return "i32" if -(2**31) <= value < 2**31 else "i64"
        raise TypeError(f"unsupported kernel argument {value!r}")

    def _load(self, runtime: dict[str, Any], constexprs: dict[str, Any]) -> tuple[_LoadedKernel, int]:
        signature = {n: self._sig(v) for n, v in runtime.items()}
        signature.update({n: "constexpr" for n in constexprs})
        key = (tuple(signature.items()), tuple(sorted(constexprs.items())))
        if key not in self._loaded:
            compiled = compile_xpu(self.jit, signature, constexprs, num_warps=self.num_warps,
                                   threads_per_warp=self.threads_per_warp, extern_libs=self.wrapper.extern_libs)
            kernel = _LoadedKernel(self.ze, compiled)
            # As JITFunction.run: the kernel goes into the cache of its device, then the post-compile hook runs.
            device = 0
            cache = self.jit.__dict__.setdefault("device_caches", {})
            cache.setdefault(device, ({}, None, None, None))[0][key] = kernel
            hook = JITFunction.compiled_hook
            if hook is not None:
                hook(key=key, repr=self.jit.fn.__name__, fn=_JitFunctionInfo(self.jit),
                     compile={"device": device, "signature": signature, "constants": constexprs},
                     is_manual_warmup=False, already_compiled=False)
            _ = kernel.run  # loaded (the hook has loaded it if the kernel is registered)
            self._loaded[key] = (kernel, self.ze.kernel(kernel.module, compiled.metadata.name))
        return self._loaded[key]

    def run(self, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> None:
        import torch

        runtime, constexprs = self._bind(args, kwargs)
        kernel, handle = self._load(runtime, constexprs)
        md = kernel.compiled.metadata
        launch_args: list[tuple[int, Any]] = []
        for value in runtime.values():
            if isinstance(value, torch.Tensor):
                launch_args.append((8, ctypes.c_uint64(value.data_ptr())))
            elif self._sig(value) == "i64":
                launch_args.append((8, ctypes.c_int64(value)))
            else:
                launch_args.append((4, ctypes.c_int32(int(value))))
        if md.shared > 0:
            launch_args.append((md.shared, None))
        groups = 1
        for g in grid:
            groups *= g
        self.ze.launch(handle, launch_args, groups, md.num_warps * md.threads_per_warp)


class _JitFunctionInfo:
    def __init__(self, jit_function: JITFunction) -> None:
        self.module = jit_function.fn.__module__
        self.name = jit_function.fn.__name__
        self.jit_function = jit_function
