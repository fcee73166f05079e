"""xpushmem as PyTorch's NVSHMEM symmetric-memory backend, for XPU and CPU tensors.

Importing this module

* loads a small C++ shim between torch and ``libxpushmem.so``: the one a wheel carries, compiled against the torch
  it was built with (no compiler needed), when this is that torch; else it builds the shim (once, cached; a C++
  compiler and ninja needed);
* registers a ``SymmetricMemoryAllocator`` named ``"NVSHMEM"``: for ``DeviceType.CPU`` always (host heap, peers'
  buffers mapped, so ``get_buffer``/``get_remote_tensors`` work across the processes of one machine) and for
  ``DeviceType.XPU`` when torch is built with XPU (device heap);
* registers the ``symm_mem`` kernels (``nvshmem_put/get/get_out/broadcast/put_with_signal/wait_for_signal/
  all_to_all``, ``all_to_all_vdev``, ``_2d``, ``_2d_offset``, ``tile_reduce``, ``multi_root_tile_reduce``) for the
  CPU and XPU dispatch keys;
* registers the rest of the ``symm_mem`` kernels (``one_shot_all_reduce[_copy][_out]``, ``two_shot_all_reduce_``,
  ``two_shot_all_reduce_out``, ``reduce_scatter_out``, ``memset32_``, ``stream_write_value32_``,
  ``_low_contention_all_gather``, ``_low_contention_reduce_scatter``, ``_async_input_mm``) for CPU (host code,
  ``_symm_ops.py``) and XPU (the first nine as device kernels on the current stream, from the shim; the others from
  ``_symm_ops.py``), and makes the multicast ops (``multimem_*``, ``memcpy_to_multicast_``) raise: there is no
  multicast;
* makes ``torch.distributed._symmetric_memory.is_nvshmem_available()`` answer for this backend;
* gives ``torch.distributed._symmetric_memory._shmem_triton`` its XPU branch: ``get_shmem_backend_module()`` returns
  ``xpushmem._xpushmem_triton`` and ``requires_shmem`` applies ``requires_xpushmem`` when torch is built with XPU or
  the installed Triton is Intel's (and neither ROCm nor a CUDA device is in use); otherwise upstream's answer.

Then, as with NVSHMEM on CUDA::

    import xpushmem.torch
    import torch.distributed._symmetric_memory as symm_mem
    symm_mem.set_backend("NVSHMEM")
    t = symm_mem.empty(1024, device="cpu")      # or "xpu"
    hdl = symm_mem.rendezvous(t, dist.group.WORLD)

The runtime starts lazily at the first allocation, from the default process group's store (unique-ID start-up);
a process without a default group is a world of one. An allocation with a group name
(``_SymmetricMemory.empty_strided_p2p(..., group_name=...)``) is made by that group's ranks only, on a team of them
(host heaps on one node or across nodes, device heaps on one node: CPU tensors anywhere, XPU tensors on one node;
across nodes on XPU it fails with the reason), and ``rendezvous`` without a group takes the allocation's.
``rendezvous`` of a tensor that is not symmetric returns ``None``; a group with ``use_pg_for_symm_mem_rendezvous`` set
rendezvouses through its allgather, not its store.
Errors are ``RuntimeError`` with xpushmem's message.

Environment: ``XPUSHMEM_LIB_DIR`` (where libxpushmem.so is), ``XPUSHMEM_TORCH_BUILD_DIR`` (where the shim is
built; default ``${XDG_CACHE_HOME:-~/.cache}/xpushmem/torch-<torch version>-<tag>``; used only when owned by the
user and not writable by group or others, else a private one, see ``_build_cache``), ``XPUSHMEM_TORCH_VERBOSE=1``
(show the build), ``XPUSHMEM_TORCH_JIT=1`` (build the shim even where the wheel's prebuilt one fits).
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

import torch
import torch.distributed  # noqa: F401  (loads c10d, whose types the shim uses)

from .._lib import include_dir, lib_dir, lib_path
from . import _build_cache, _shim_spec

__all__ = [
    "BACKEND_NAME",
    "TokenSwitch",
    "is_available",
    "missing_ops",
    "runtime_started",
    "shim",
]

BACKEND_NAME = "NVSHMEM"
_PKG = Path(__file__).resolve().parent.parent


def _xpu_built() -> bool:
    """Whether this torch build has XPU support (the XPU registrations are made only then)."""
    xpu = getattr(torch, "xpu", None)
    return bool(xpu is not None and getattr(xpu, "_is_compiled", lambda: False)())


def _build_dir(libdir: Path) -> Path:
    """The shim's build directory: used only when this user alone can write to it (see ``_build_cache``)."""
    return _build_cache.build_dir(libdir, torch.__version__)


def _prebuilt_refusal(spec: _shim_spec.Spec) -> str | None:
    """Why this process cannot load the wheel's prebuilt shim, or ``None`` when it can."""
    if os.environ.get("XPUSHMEM_TORCH_JIT") == "1":
        return "XPUSHMEM_TORCH_JIT=1"
    return _shim_spec.prebuilt_refusal(Path(__file__).resolve().parent, torch.__version__, spec.name)


def _load() -> ModuleType:
    spec = _shim_spec.spec(include_dir(), _xpu_built())
    if spec.xpu_missing:
        warnings.warn(f"xpushmem.torch: {spec.xpu_missing}", stacklevel=2)
    why = _prebuilt_refusal(spec)
    if why is None:
        # The wheel's shim, compiled against this very torch: no compiler needed. Its run path names the package's
        # own libxpushmem.so; the library this process uses (XPUSHMEM_LIB_DIR's, when set) is loaded first, and
        # its SONAME (libxpushmem.so) satisfies the shim's dependency, so one process never holds two runtimes.
        ctypes.CDLL(str(lib_path()), mode=ctypes.RTLD_GLOBAL)
        return importlib.import_module(f"{__name__}.{spec.name}")
    if (Path(__file__).resolve().parent / _shim_spec.MANIFEST).exists():
        warnings.warn(f"xpushmem.torch: not using the wheel's prebuilt C++ shim ({why}): building it now "
                      "(needs a C++ compiler and ninja; cached for the next import)", stacklevel=2)
    from torch.utils import cpp_extension

    libdir = lib_dir()
    build = _build_dir(libdir)
    # cpp_extension runs ninja from PATH; a venv's ninja is next to its python.
    venv_bin = str(Path(sys.executable).parent)
    if venv_bin not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = venv_bin + os.pathsep + os.environ.get("PATH", "")
    ldflags = [f"-L{libdir}", *(f"-l{lib}" for lib in spec.libraries), f"-Wl,-rpath,{libdir}"]
    return cpp_extension.load(
        name=spec.name,
        sources=[str(_PKG / _shim_spec.SOURCE)],
        extra_include_paths=spec.includes,
        extra_cflags=spec.cflags,
        extra_ldflags=ldflags,
        build_directory=str(build),
        with_cuda=False,
        verbose=os.environ.get("XPUSHMEM_TORCH_VERBOSE") == "1",
    )


shim: ModuleType = _load()
# On a CUDA machine, torch's own NVSHMEM backend keeps the "NVSHMEM" name; the CPU backend is registered anyway.
shim.install(xpu=_xpu_built(), advertise_cpu=not torch.cuda.is_available())


def missing_ops() -> list[str]:
    """The xpushmem-ops C functions libxpushmem.so lacks (the symm_mem kernels that need them then raise)."""
    return list(shim.missing_ops_symbols())


def is_available() -> bool:
    """Whether the backend is usable: the shim is loaded and libxpushmem.so exports every function it calls."""
    return not missing_ops()


def runtime_started() -> bool:
    """Whether this process's xpushmem runtime is running (it starts at the first symmetric allocation)."""
    return bool(shim.runtime_started())


def _is_nvshmem_available() -> bool:
    return is_available()


def _register_python_ops_for_cpu() -> None:
    """Ops that torch implements in Python for CUDA and XPU only, registered for CPU with the same function."""
    import torch.distributed._symmetric_memory as symm_mem

    torch.library.impl(symm_mem.lib, "get_remote_tensors", "CPU")(symm_mem._get_remote_tensors_default)


_register_python_ops_for_cpu()

# The rest of symm_mem's kernels (one-/two-shot all-reduce, reduce_scatter_out, memset32_, stream_write_value32_,
# the low-contention collectives; the multicast ops refuse): see _symm_ops.py.
from . import _symm_ops  # noqa: E402

_symm_ops.register("CPU")
if _xpu_built():
    # The shim registered the device-kernel ones for XPU (install(xpu=True)); the rest from Python.
    _symm_ops.register("XPU", skip=tuple(shim.symm_device_ops()))

# symm_mem.is_nvshmem_available() imports this name from torch._C._distributed_c10d at call time.
torch._C._distributed_c10d._is_nvshmem_available = _is_nvshmem_available  # type: ignore[attr-defined]


def _xpu_shmem_triton() -> bool:
    """Whether Triton kernels target XPU here: not ROCm, no CUDA device, and torch built with XPU or the installed
    Triton being Intel's (``triton-xpu``)."""
    if torch.version.hip is not None or torch.cuda.is_available():
        return False
    if _xpu_built():
        return True
    try:
        import triton.backends
    except ImportError:
        return False
    return "intel" in triton.backends.backends


def _install_shmem_triton_branch() -> None:
    """Wraps ``_shmem_triton.get_shmem_backend_module`` and ``requires_shmem`` with the XPU branch (once)."""
    from torch.distributed._symmetric_memory import _shmem_triton

    if getattr(_shmem_triton.get_shmem_backend_module, "_xpushmem_branch", False):
        return
    upstream_module, upstream_requires = _shmem_triton.get_shmem_backend_module, _shmem_triton.requires_shmem

    def get_shmem_backend_module():  # noqa: ANN202 (upstream's signature)
        if _xpu_shmem_triton():
            from .. import _xpushmem_triton

            return _xpushmem_triton
        return upstream_module()

    def requires_shmem(jit_func):  # noqa: ANN001, ANN202
        if _xpu_shmem_triton():
            from .. import _xpushmem_triton

            return _xpushmem_triton.requires_xpushmem(jit_func)
        return upstream_requires(jit_func)

    get_shmem_backend_module.__doc__ = upstream_module.__doc__
    requires_shmem.__doc__ = upstream_requires.__doc__
    get_shmem_backend_module._xpushmem_branch = True  # type: ignore[attr-defined]
    _shmem_triton.get_shmem_backend_module = get_shmem_backend_module
    _shmem_triton.requires_shmem = requires_shmem


_install_shmem_triton_branch()

# Expert-parallel dispatch/combine: torch.distributed._token_switch.TokenSwitch on xpushmem (token_switch.py).
from .token_switch import TokenSwitch  # noqa: E402
