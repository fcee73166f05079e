"""Builds a self-contained wheel: cargo builds ``libxpushmem.so`` (setuptools-rust), and the wheel carries it with
the C headers and the device bitcode, all inside the package (``xpushmem/lib``, ``xpushmem/include``). Nothing
about the checkout is recorded: the installed package works with the checkout deleted.

When torch is importable in the build environment (``pip wheel --no-build-isolation`` in an environment with the
torch to serve), the wheel also carries the C++ shim of ``xpushmem.torch`` compiled against that torch
(``xpushmem/torch/xpushmem_torch_shim*.so``, linked to the wheel's ``libxpushmem.so`` through ``$ORIGIN``, with a
manifest naming the torch): ``import xpushmem.torch`` then needs no compiler. One wheel serves one torch version;
with another torch (or none at build time) the import builds the shim as before. ``XPUSHMEM_WHEEL_TORCH_SHIM=0``
leaves it out.

The checkout's ``ffi/`` crate and ``shmem/device-lib/prebuilt/`` are read at build time, so build from the checkout
(``pip wheel ./triton-bridge``); ``SETUPTOOLS_RUST_CARGO_PROFILE=dev`` builds the library in cargo's debug profile
(reusing a debug build in ``$CARGO_TARGET_DIR``).
"""

import importlib.util
import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools_rust import Binding, RustExtension
from setuptools_rust.build import build_rust

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LIB_NAME = "libxpushmem.so"


class BuildRustPlainName(build_rust):
    """Installs the cdylib under its C name (``libxpushmem.so``) instead of a Python extension-module name, so C++
    code links it with ``-lxpushmem``. With ``XPUSHMEM_WHEEL_LIB`` (a ``libxpushmem.so`` that cargo built from this
    checkout, e.g. ``target/debug/libxpushmem.so`` after ``cargo build``), the wheel carries that file instead of
    running cargo: setuptools-rust's ``cargo rustc --crate-type cdylib`` is a different build of the ``ffi`` crate
    (its manifest also asks for a staticlib), so after a workspace build it compiled the crate again, and the
    next workspace build compiled it back (about a minute each on two cores; scripts/test.sh sets it)."""

    def get_dylib_ext_path(self, ext, target_fname):  # noqa: D102 (setuptools-rust hook)
        path = super().get_dylib_ext_path(ext, target_fname)
        return os.path.join(os.path.dirname(path), LIB_NAME)

    def build_extension(self, ext, *args, **kwargs):  # noqa: D102 (setuptools-rust hook)
        prebuilt = os.environ.get("XPUSHMEM_WHEEL_LIB")
        if not prebuilt:
            return super().build_extension(ext, *args, **kwargs)
        if not Path(prebuilt).is_file():
            raise FileNotFoundError(f"XPUSHMEM_WHEEL_LIB={prebuilt}: no such file (build it with cargo first)")
        from setuptools_rust.build import _BuiltModule

        print(f"setup.py: the wheel carries XPUSHMEM_WHEEL_LIB={prebuilt} (cargo not run)")
        return [_BuiltModule(ext.name, prebuilt)], None


class BuildPyWithNativeData(build_py):
    """Copies the C headers and the versioned device bitcode into the package."""

    def run(self) -> None:
        super().run()
        pkg = Path(self.build_lib) / "xpushmem"
        include = pkg / "include"
        include.mkdir(parents=True, exist_ok=True)
        for header in ("xpushmem.h", "xpushmem_ops.h"):
            src = REPO / "ffi" / "include" / header
            if not src.exists():
                raise FileNotFoundError(f"{src} is missing: build the wheel from an xpushmem checkout")
            shutil.copy2(src, include / header)
        lib = pkg / "lib"
        lib.mkdir(parents=True, exist_ok=True)
        for bc in sorted((REPO / "shmem" / "device-lib" / "prebuilt").glob("libxpushmem_device-*.bc")):
            shutil.copy2(bc, lib / bc.name)


def _load_shim_spec():
    """``xpushmem/torch/_shim_spec.py`` by path (importing the package would load the shim)."""
    spec = importlib.util.spec_from_file_location("_xpushmem_shim_spec", HERE / "xpushmem" / "torch" / "_shim_spec.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _torch_shim():
    """The shim as a ``CppExtension`` and the ``build_ext`` that builds it after ``libxpushmem.so``, or ``None``
    when torch is not importable here or ``XPUSHMEM_WHEEL_TORCH_SHIM=0``."""
    if os.environ.get("XPUSHMEM_WHEEL_TORCH_SHIM") == "0":
        return None
    try:
        import torch
        from torch.utils.cpp_extension import BuildExtension, CppExtension
    except ImportError:
        print("setup.py: torch is not importable here: the wheel carries no prebuilt C++ shim "
              "(xpushmem.torch builds it at import)")
        return None
    shim_spec = _load_shim_spec()
    xpu = getattr(torch, "xpu", None)
    spec = shim_spec.spec(REPO / "ffi" / "include", bool(xpu is not None and xpu._is_compiled()))
    if spec.xpu_missing:
        print(f"setup.py: the prebuilt shim has no XPU half: {spec.xpu_missing}")
    ext = CppExtension(
        f"xpushmem.torch.{spec.name}",
        sources=[str(Path("xpushmem") / shim_spec.SOURCE)],
        include_dirs=spec.includes,
        libraries=spec.libraries,
        extra_compile_args=spec.cflags,
        # Next to the package's own library wherever it is installed (xpushmem/torch -> xpushmem/lib).
        extra_link_args=["-Wl,-rpath,$ORIGIN/../lib"],
    )

    class BuildShimAfterRust(BuildExtension.with_options(use_ninja=False)):
        """Builds ``libxpushmem.so`` first (the shim links it), then the shim, then writes its manifest.
        distutils' compiler (no ninja): it passes ``$ORIGIN`` to the linker untouched (one source file: ninja
        would gain nothing)."""

        def run(self) -> None:
            self.run_command("build_rust")
            lib = Path(self.build_lib) / "xpushmem" / "lib"
            for e in self.extensions:
                e.library_dirs = [str(lib), *e.library_dirs]
            super().run()
            torch_dir = Path(self.build_lib) / "xpushmem" / "torch"
            (torch_dir / shim_spec.MANIFEST).write_text(shim_spec.manifest(torch.__version__, spec.name))

    return ext, BuildShimAfterRust


shim = _torch_shim()
cmdclass = {"build_rust": BuildRustPlainName, "build_py": BuildPyWithNativeData}
if shim is not None:
    cmdclass["build_ext"] = shim[1]

setup(
    ext_modules=[shim[0]] if shim is not None else [],
    rust_extensions=[
        RustExtension(
            "xpushmem.lib.libxpushmem",
            path=str(REPO / "ffi" / "Cargo.toml"),
            binding=Binding.NoBinding,
        )
    ],
    cmdclass=cmdclass,
    zip_safe=False,
)
