"""Locating the native pieces: ``libxpushmem.so``, the C headers and the device bitcode.

An installed wheel carries all three inside the package (``xpushmem/lib``, ``xpushmem/include``); environment
variables override them for development:

* library directory: ``$XPUSHMEM_LIB_DIR`` (must contain libxpushmem.so: an error otherwise, never a silent
  fallback), else the package's ``lib/``; when running from the source tree (no bundled library),
  ``$CARGO_TARGET_DIR/{release,debug}`` and ``<checkout>/target/{release,debug}``, the most recently built first;
* headers: ``$XPUSHMEM_INCLUDE_DIR``, else the ``ffi/include`` of the checkout ``$XPUSHMEM_LIB_DIR`` lies in (so a
  development library and its header match), else the package's ``include/``, else the source tree's;
* device bitcode ``libxpushmem_device-*.bc``: ``$XPUSHMEM_DEVICE_LIB_DIR``, else the package's ``lib/``, else the
  install prefix of ffi/install.sh (``<sys.prefix>/lib/xpushmem``, ``/usr/local/lib/xpushmem``), else the source
  tree's ``shmem/device-lib/prebuilt``.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path

LIB_NAME = "libxpushmem.so"
HEADER_NAME = "xpushmem.h"
DEVICE_LIB_GLOB = "libxpushmem_device-*.bc"

_PKG = Path(__file__).resolve().parent


def _source_tree() -> Path | None:
    """The checkout this file lies in (in-tree use: <repo>/triton-bridge/xpushmem/_lib.py), if any."""
    root = _PKG.parent.parent
    return root if (root / "ffi" / "include" / HEADER_NAME).exists() else None


@lru_cache(maxsize=None)
def lib_dir() -> Path:
    """The directory holding libxpushmem.so."""
    env = os.environ.get("XPUSHMEM_LIB_DIR")
    if env:
        d = Path(env).resolve()
        if not (d / LIB_NAME).exists():
            raise RuntimeError(f"XPUSHMEM_LIB_DIR={env} does not contain {LIB_NAME}")
        return d
    if (_PKG / "lib" / LIB_NAME).exists():
        return _PKG / "lib"
    candidates: list[Path] = []
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        candidates += [Path(target) / "release", Path(target) / "debug"]
    root = _source_tree()
    if root is not None:
        candidates += [root / "target" / "release", root / "target" / "debug"]
    found = [c.resolve() for c in candidates if (c / LIB_NAME).exists()]
    if not found:
        searched = ", ".join(str(c) for c in [_PKG / "lib", *candidates])
        raise RuntimeError(
            f"{LIB_NAME} not found; install the wheel (pip install ./triton-bridge), or build it with "
            f"`cargo build --release -p xpushmem-ffi` and set XPUSHMEM_LIB_DIR. Searched: {searched}"
        )
    return max(found, key=lambda d: (d / LIB_NAME).stat().st_mtime)


def lib_path() -> Path:
    """Full path of libxpushmem.so."""
    return lib_dir() / LIB_NAME


@lru_cache(maxsize=None)
def include_dir() -> Path:
    """The directory holding xpushmem.h."""
    env = os.environ.get("XPUSHMEM_INCLUDE_DIR")
    if env:
        d = Path(env).resolve()
        if not (d / HEADER_NAME).exists():
            raise RuntimeError(f"XPUSHMEM_INCLUDE_DIR={env} does not contain {HEADER_NAME}")
        return d
    candidates: list[Path] = []
    if os.environ.get("XPUSHMEM_LIB_DIR"):
        # <checkout>/<target dir>/<profile>/libxpushmem.so
        candidates.append(lib_dir().parent.parent / "ffi" / "include")
    candidates.append(_PKG / "include")
    root = _source_tree()
    if root is not None:
        candidates.append(root / "ffi" / "include")
    for c in candidates:
        if (c / HEADER_NAME).exists():
            return c.resolve()
    searched = ", ".join(str(c) for c in candidates)
    raise RuntimeError(f"{HEADER_NAME} not found; set XPUSHMEM_INCLUDE_DIR. Searched: {searched}")


def _newest_device_lib(d: Path) -> Path | None:
    found = sorted(d.glob(DEVICE_LIB_GLOB), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def device_lib_path() -> Path:
    """The device bitcode ``libxpushmem_device-<version>.bc`` linked into Triton kernels (not cached: a new release
    gets a new versioned name, which is also what keeps Triton's kernel cache honest across releases; see
    :func:`xpushmem._xpushmem_triton.find_device_library` for a rebuild of the same version)."""
    env = os.environ.get("XPUSHMEM_DEVICE_LIB_DIR")
    if env:
        found = _newest_device_lib(Path(env))
        if found is None:
            raise RuntimeError(f"XPUSHMEM_DEVICE_LIB_DIR={env} contains no {DEVICE_LIB_GLOB}")
        return found.resolve()
    # ffi/install.sh puts the library in $PREFIX/lib/xpushmem (pkg-config: devicelibdir).
    candidates = [_PKG / "lib", Path(sys.prefix) / "lib" / "xpushmem", Path("/usr/local/lib/xpushmem")]
    root = _source_tree()
    if root is not None:
        candidates.append(root / "shmem" / "device-lib" / "prebuilt")
    for c in candidates:
        found = _newest_device_lib(c) if c.is_dir() else None
        if found is not None:
            return found.resolve()
    searched = ", ".join(str(c) for c in candidates)
    raise RuntimeError(
        f"the xpushmem device library ({DEVICE_LIB_GLOB}) was not found; set XPUSHMEM_DEVICE_LIB_DIR. "
        f"Searched: {searched}"
    )
