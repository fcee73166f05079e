"""``requires_xpushmem``: the checks, the device-library search, the ``extern_libs`` entry, the registry, and the
kernel-load hook that chains to a hook already installed (Triton 3.3's ``JITFunction.compiled_hook`` and
``triton.knobs.runtime.jit_post_compile_hook`` of Triton >= 3.4)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import triton
from triton.runtime.jit import JITFunction

import kernels as K
import xpushmem._xpushmem_triton as xt


@pytest.fixture
def device_lib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    lib = tmp_path / "libxpushmem_device-9.9.9.bc"
    lib.write_bytes(b"BC")
    monkeypatch.setenv("XPUSHMEM_DEVICE_LIB_DIR", str(tmp_path))
    return lib


@pytest.fixture
def clean_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(JITFunction, "compiled_hook", None)
    monkeypatch.setattr(xt.XpushmemKernelRegistry, "_to_init", {})


def _hook_kwargs(fn: JITFunction, module: object, monkeypatch: pytest.MonkeyPatch) -> dict:
    """What Triton passes the post-compile hook: the function, the cache key, the device."""

    class Kernel:
        def __init__(self) -> None:
            self.loaded = False

        @property
        def run(self) -> None:
            self.loaded = True

        @property
        def module(self) -> object:
            assert self.loaded, "the module is read before the kernel is loaded"
            return module

    # The kernel cache of device 7 (Triton fills it at compile time; no driver is needed here).
    monkeypatch.setattr(fn, "device_caches", {7: ({"key": Kernel()}, None, None, None)})
    return {"key": "key", "fn": types.SimpleNamespace(jit_function=fn), "compile": {"device": 7}}


def test_rejects_a_plain_function(device_lib: Path) -> None:
    with pytest.raises(TypeError, match="@triton.jit"):
        xt.requires_xpushmem(lambda: None)


def test_missing_library_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XPUSHMEM_DEVICE_LIB_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match="XPUSHMEM_DEVICE_LIB_DIR=.* contains no libxpushmem_device-"):
        xt.requires_xpushmem(K.my_fence_kernel)


def test_links_the_library_under_its_own_key_and_registers(device_lib: Path, clean_hooks: None) -> None:
    g = xt.requires_xpushmem(K.my_fence_kernel)
    assert g.extern_libs == {"libxpushmem_device": str(device_lib.resolve())}
    assert "libdevice" not in g.extern_libs
    assert xt.XpushmemKernelRegistry.has("my_fence_kernel")
    assert not xt.XpushmemKernelRegistry.has("my_put_kernel")


def test_hook_chains_on_compiled_hook(device_lib: Path, clean_hooks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    JITFunction.compiled_hook = lambda *a, **kw: calls.append(("previous", kw["key"])) or "previous-result"
    monkeypatch.setattr(xt, "_module_init", lambda m: calls.append(("init", m)))
    xt.requires_xpushmem(K.my_fence_kernel)
    xt.requires_xpushmem(K.my_put_kernel)  # installed once, not wrapped twice
    hook = JITFunction.compiled_hook
    assert hook._xpushmem_hook and not getattr(hook._xpushmem_previous, "_xpushmem_hook", False)
    assert hook(**_hook_kwargs(K.my_fence_kernel, 1234, monkeypatch)) == "previous-result"
    assert calls == [("init", 1234), ("previous", "key")]
    calls.clear()
    hook(**_hook_kwargs(K.my_barrier_all_kernel, 99, monkeypatch))  # not registered: only the previous hook runs
    assert calls == [("previous", "key")]


def test_hook_chains_on_knobs(device_lib: Path, clean_hooks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    runtime = types.SimpleNamespace(jit_post_compile_hook=lambda *a, **kw: calls.append("previous"))
    monkeypatch.setattr(triton, "knobs", types.SimpleNamespace(runtime=runtime), raising=False)
    monkeypatch.setattr(xt, "_module_init", lambda m: calls.append(("init", m)))
    xt.requires_xpushmem(K.my_fence_kernel)
    assert JITFunction.compiled_hook is None  # the knob is used where it exists
    runtime.jit_post_compile_hook(**_hook_kwargs(K.my_fence_kernel, 5, monkeypatch))
    assert calls == [("init", 5), "previous"]


def test_module_init_refuses_what_is_not_a_level_zero_module() -> None:
    with pytest.raises(TypeError, match="Level Zero module"):
        xt.ze_module_init(object())
