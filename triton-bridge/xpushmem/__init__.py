"""xpushmem for Python.

* ``import xpushmem.torch`` registers xpushmem as PyTorch's ``"NVSHMEM"`` symmetric-memory backend for XPU and
  CPU tensors and the kernels of the ``torch.ops.symm_mem`` NVSHMEM op family (see :mod:`xpushmem.torch`).
* ``xpushmem._xpushmem_triton``: Triton device functions over the device library (``requires_xpushmem``).
* :func:`lib_dir` / :func:`include_dir` / :func:`device_lib_path` locate the native library ``libxpushmem.so``, its
  C header and the device bitcode (inside the installed wheel, or overridden by ``XPUSHMEM_*`` variables).
"""

from ._lib import device_lib_path, include_dir, lib_dir, lib_path

__all__ = ["device_lib_path", "include_dir", "lib_dir", "lib_path"]
__version__ = "0.1.0"
