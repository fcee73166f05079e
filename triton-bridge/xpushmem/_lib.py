"""Locating the native pieces: ``libxpushmem.so`` (built by cargo) and ``xpushmem.h`` (ffi/include).

Search order for the library directory:
  1. ``$XPUSHMEM_LIB_DIR`` (must contain libxpushmem.so; an error otherwise, never a silent fallback);
  2. ``$CARGO_TARGET_DIR/{release,debug}``;
  3. ``<repo>/target/{release,debug}``, where <repo> is the checkout the package was installed from (recorded at
     install time) or that contains this file (in-tree use).
Among candidates of 2 and 3 the most recently built library wins.
The header: ``$XPUSHMEM_INCLUDE_DIR``, else ``<repo>/ffi/include``.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

LIB_NAME = "libxpushmem.so"
HEADER_NAME = "xpushmem.h"


def _repo_roots() -> list[Path]:
    roots: list[Path] = []
    info = Path(__file__).with_name("_build_info.json")
    if info.exists():
        recorded = json.loads(info.read_text()).get("repo_root")
        if recorded:
            roots.append(Path(recorded))
    # In-tree: <repo>/triton-bridge/xpushmem/_lib.py
    here = Path(__file__).resolve().parent.parent.parent
    if (here / "ffi" / "include" / HEADER_NAME).exists() and here not in roots:
        roots.append(here)
    return roots


@lru_cache(maxsize=None)
def lib_dir() -> Path:
    """The directory holding libxpushmem.so."""
    env = os.environ.get("XPUSHMEM_LIB_DIR")
    if env:
        d = Path(env).resolve()
        if not (d / LIB_NAME).exists():
            raise RuntimeError(f"XPUSHMEM_LIB_DIR={env} does not contain {LIB_NAME}")
        return d
    candidates: list[Path] = []
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        candidates += [Path(target) / "release", Path(target) / "debug"]
    for root in _repo_roots():
        candidates += [root / "target" / "release", root / "target" / "debug"]
    found = [c.resolve() for c in candidates if (c / LIB_NAME).exists()]
    if not found:
        searched = ", ".join(str(c) for c in candidates) or "(no candidate directories)"
        raise RuntimeError(
            f"{LIB_NAME} not found; build it with `cargo build --release -p xpushmem-ffi` or set "
            f"XPUSHMEM_LIB_DIR. Searched: {searched}"
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
    candidates = [root / "ffi" / "include" for root in _repo_roots()]
    # A library inside <repo>/target*/<profile>/ also names its checkout.
    try:
        candidates.append(lib_dir().parent.parent / "ffi" / "include")
    except RuntimeError:
        pass
    for c in candidates:
        if (c / HEADER_NAME).exists():
            return c.resolve()
    searched = ", ".join(str(c) for c in candidates) or "(no candidate directories)"
    raise RuntimeError(f"{HEADER_NAME} not found; set XPUSHMEM_INCLUDE_DIR. Searched: {searched}")
