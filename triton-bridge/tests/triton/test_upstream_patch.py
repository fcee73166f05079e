"""docs/upstream/shmem_triton-xpu.patch applies to the installed torch's _shmem_triton.py, and the patched module
answers with xpushmem._xpushmem_triton on XPU and with upstream's module elsewhere."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.distributed._symmetric_memory as sm

import kernels as K
import xpushmem._xpushmem_triton as xt

PATCH = Path(__file__).resolve().parents[3] / "docs" / "upstream" / "shmem_triton-xpu.patch"
REL = "torch/distributed/_symmetric_memory/_shmem_triton.py"


@pytest.fixture
def patched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """The patched copy of the installed torch's _shmem_triton.py, imported under a private name."""
    dst = tmp_path / REL
    dst.parent.mkdir(parents=True)
    shutil.copy(Path(sm.__file__).parent / "_shmem_triton.py", dst)
    subprocess.run(["git", "apply", f"--include={REL}", str(PATCH)], cwd=tmp_path, check=True,
                   capture_output=True, text=True)
    spec = importlib.util.spec_from_file_location("patched_shmem_triton", dst)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libxpushmem_device-9.9.9.bc").write_bytes(b"BC")
    monkeypatch.setenv("XPUSHMEM_DEVICE_LIB_DIR", str(lib))
    monkeypatch.setattr(xt.XpushmemKernelRegistry, "_to_init", {})
    return module


def test_xpu_branch(patched, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    assert patched.get_shmem_backend_module() is xt
    g = patched.requires_shmem(K.my_fence_kernel)
    assert isinstance(g, xt.GridCallableWithExtern)
    assert xt.XpushmemKernelRegistry.has("my_fence_kernel")


def test_other_devices_keep_upstream(patched, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
    assert patched.get_shmem_backend_module().__name__ == "torch.distributed._symmetric_memory._nvshmem_triton"
