"""xpushmem for Python.

* ``import xpushmem.torch`` registers xpushmem as PyTorch's ``"NVSHMEM"`` symmetric-memory backend for XPU and
  CPU tensors and the kernels of the ``torch.ops.symm_mem`` NVSHMEM op family (see :mod:`xpushmem.torch`).
* :func:`lib_dir` / :func:`include_dir` locate the native library ``libxpushmem.so`` and its C header.
"""

from ._lib import include_dir, lib_dir, lib_path

__all__ = ["include_dir", "lib_dir", "lib_path"]
__version__ = "0.1.0"
