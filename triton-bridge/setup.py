"""Builds a self-contained wheel: cargo builds ``libxpushmem.so`` (setuptools-rust), and the wheel carries it with
the C headers and the device bitcode, all inside the package (``xpushmem/lib``, ``xpushmem/include``). Nothing
about the checkout is recorded: the installed package works with the checkout deleted.

The checkout's ``ffi/`` crate and ``shmem/device-lib/prebuilt/`` are read at build time, so build from the checkout
(``pip wheel ./triton-bridge``); ``SETUPTOOLS_RUST_CARGO_PROFILE=dev`` builds the library in cargo's debug profile
(reusing a debug build in ``$CARGO_TARGET_DIR``).
"""

import os
import shutil
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
    code links it with ``-lxpushmem``."""

    def get_dylib_ext_path(self, ext, target_fname):  # noqa: D102 (setuptools-rust hook)
        path = super().get_dylib_ext_path(ext, target_fname)
        return os.path.join(os.path.dirname(path), LIB_NAME)


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


setup(
    rust_extensions=[
        RustExtension(
            "xpushmem.lib.libxpushmem",
            path=str(REPO / "ffi" / "Cargo.toml"),
            binding=Binding.NoBinding,
        )
    ],
    cmdclass={"build_rust": BuildRustPlainName, "build_py": BuildPyWithNativeData},
    zip_safe=False,
)
