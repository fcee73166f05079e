"""After ``import xpushmem.torch``, PyTorch's ``_shmem_triton`` dispatch answers with ``_xpushmem_triton`` where
Triton targets XPU (here: Intel's Triton installed, no CUDA device), as upstream's test file uses it."""

from pathlib import Path

import pytest

import kernels as K


@pytest.fixture
def device_lib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    lib = tmp_path / "libxpushmem_device-9.9.9.bc"
    lib.write_bytes(b"BC")
    monkeypatch.setenv("XPUSHMEM_DEVICE_LIB_DIR", str(tmp_path))
    return lib


def test_get_shmem_backend_module_and_requires_shmem_use_xpushmem(device_lib: Path) -> None:
    import torch.distributed._symmetric_memory._shmem_triton as shmem_triton

    import xpushmem._xpushmem_triton as xt
    import xpushmem.torch  # noqa: F401  (installs the XPU branch)

    assert shmem_triton.get_shmem_backend_module() is xt
    from torch.distributed._symmetric_memory._shmem_triton import requires_shmem

    g = requires_shmem(K.my_barrier_all_kernel)
    assert isinstance(g, xt.GridCallableWithExtern)
    assert g.extern_libs == {xt.EXTERN_LIBS_KEY: str(device_lib.resolve())}
    assert xt.XpushmemKernelRegistry.has("my_barrier_all_kernel")
    # Installing again does not wrap twice.
    before = shmem_triton.get_shmem_backend_module
    xpushmem.torch._install_shmem_triton_branch()
    assert shmem_triton.get_shmem_backend_module is before
