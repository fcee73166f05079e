"""When a wheel's prebuilt C++ shim may be loaded (``xpushmem/torch/_shim_spec.py``, loaded by path, without
torch): only by the exact torch it was compiled against, as the module the torch needs, with its library present;
every refusal says why. The installed case itself (import with no compiler) is scripts/test-python.sh's smoke test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "xpushmem" / "torch" / "_shim_spec.py"


@pytest.fixture(scope="module")
def spec_mod():
    spec = importlib.util.spec_from_file_location("xpushmem_shim_spec_under_test", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    del sys.modules[spec.name]


def _install(mod, d: Path, torch_version: str, module: str, with_library: bool = True) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / mod.MANIFEST).write_text(mod.manifest(torch_version, module))
    if with_library:
        (d / f"{module}.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    return d


def test_the_torch_it_was_built_for_loads_it(spec_mod, tmp_path):
    d = _install(spec_mod, tmp_path / "torch", "2.15.0+cpu", spec_mod.MODULE)
    assert spec_mod.prebuilt_refusal(d, "2.15.0+cpu", spec_mod.MODULE) is None


@pytest.mark.parametrize("running", ["2.15.1+cpu", "2.15.0+xpu", "2.15.0"])
def test_another_torch_is_refused_with_both_versions(spec_mod, tmp_path, running):
    d = _install(spec_mod, tmp_path / "torch", "2.15.0+cpu", spec_mod.MODULE)
    why = spec_mod.prebuilt_refusal(d, running, spec_mod.MODULE)
    assert why is not None and "2.15.0+cpu" in why and running in why, why


def test_a_shim_without_the_xpu_half_is_refused_where_xpu_is_needed(spec_mod, tmp_path):
    d = _install(spec_mod, tmp_path / "torch", "2.15.0+xpu", spec_mod.MODULE)
    why = spec_mod.prebuilt_refusal(d, "2.15.0+xpu", spec_mod.MODULE + "_xpu")
    assert why is not None and spec_mod.MODULE + "_xpu" in why, why


def test_no_manifest_or_no_library_is_refused(spec_mod, tmp_path):
    assert "no prebuilt shim" in spec_mod.prebuilt_refusal(tmp_path, "2.15.0", spec_mod.MODULE)
    d = _install(spec_mod, tmp_path / "torch", "2.15.0", spec_mod.MODULE, with_library=False)
    why = spec_mod.prebuilt_refusal(d, "2.15.0", spec_mod.MODULE)
    assert why is not None and "missing" in why, why
    (d / spec_mod.MANIFEST).write_text("{not json")
    assert "unreadable" in spec_mod.prebuilt_refusal(d, "2.15.0", spec_mod.MODULE)


def test_the_xpu_variant_has_its_own_name_and_flags(spec_mod, tmp_path, monkeypatch):
    sycl = tmp_path / "sycl-include"
    (sycl / "sycl").mkdir(parents=True)
    (sycl / "sycl" / "sycl.hpp").write_text("")
    monkeypatch.setenv("XPUSHMEM_SYCL_INCLUDE", str(sycl))
    monkeypatch.delenv("CMPLR_ROOT", raising=False)
    cpu = spec_mod.spec(tmp_path, xpu_built=False)
    xpu = spec_mod.spec(tmp_path, xpu_built=True)
    assert cpu.name == spec_mod.MODULE and "-DXPUSHMEM_TORCH_WITH_XPU" not in cpu.cflags
    assert xpu.name == spec_mod.MODULE + "_xpu" and "-DXPUSHMEM_TORCH_WITH_XPU" in xpu.cflags
    assert str(sycl) in xpu.includes and "torch_xpu" in xpu.libraries
    monkeypatch.setenv("XPUSHMEM_SYCL_INCLUDE", str(tmp_path / "nowhere"))
    missing = spec_mod.spec(tmp_path, xpu_built=True)
    assert missing.name == spec_mod.MODULE and missing.xpu_missing and "SYCL" in missing.xpu_missing
