"""How the C++ shim is compiled: one description for both builds of it.

* at import (``xpushmem.torch``, torch's ``cpp_extension.load`` into a private build directory), when no prebuilt shim
  fits this torch;
* in the wheel (``setup.py``: a ``CppExtension`` built against the torch of the build environment, linked to the
  wheel's own ``libxpushmem.so`` through ``$ORIGIN``), so that ``import xpushmem.torch`` needs no compiler.

This module imports nothing but the standard library (``setup.py`` loads it by path, before the package exists).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

#: The shim's module name (the ``_xpu`` variant has the XPU half compiled in).
MODULE = "xpushmem_torch_shim"
#: The shim's source, relative to the package directory ``xpushmem/``.
SOURCE = Path("csrc") / "xpushmem_torch.cpp"
#: What a wheel's prebuilt shim was built for, beside it in ``xpushmem/torch/``.
MANIFEST = "prebuilt_shim.json"


@dataclass
class Spec:
    """The shim's module name, compiler flags, include directories and libraries."""

    name: str
    cflags: list[str]
    includes: list[str]
    #: Linked libraries besides torch's (``-l`` names).
    libraries: list[str] = field(default_factory=list)
    #: Why the XPU half is left out although torch has XPU (no SYCL headers), or ``None``.
    xpu_missing: str | None = None


def sycl_include_dirs() -> list[str]:
    """SYCL headers for the XPU MemPool allocator: $XPUSHMEM_SYCL_INCLUDE, else oneAPI's $CMPLR_ROOT/include."""
    candidates = [os.environ.get("XPUSHMEM_SYCL_INCLUDE", "")]
    if os.environ.get("CMPLR_ROOT"):
        candidates.append(os.path.join(os.environ["CMPLR_ROOT"], "include"))
    return [c for c in candidates if c and os.path.exists(os.path.join(c, "sycl", "sycl.hpp"))]


def spec(include_dir: Path, xpu_built: bool) -> Spec:
    """The shim for a torch with (``xpu_built``) or without XPU, against the C headers in ``include_dir``."""
    # -O1 -g0: the shim is glue (argument checks, then one call into libxpushmem per op, whose cost is the Python
    # dispatch around it); torch's headers make its compile the slow part of a wheel build or a first import, and
    # -O2 with debug information doubles it (56 s -> 28 s on the 2-core CI machine) for a 27 MiB object.
    s = Spec(name=MODULE, cflags=["-O1", "-g0", "-Wall", "-Wno-unused-function"], includes=[str(include_dir)],
             libraries=["xpushmem"])
    sycl = sycl_include_dirs() if xpu_built else []
    if sycl:
        s.cflags.append("-DXPUSHMEM_TORCH_WITH_XPU")
        s.includes += sycl
        s.libraries.append("torch_xpu")
        s.name += "_xpu"
    elif xpu_built:
        s.xpu_missing = (
            "no SYCL headers found (set XPUSHMEM_SYCL_INCLUDE or source oneAPI's setvars.sh): the XPU MemPool "
            "allocator is not registered; set TORCH_SYMMMEM_IMPLICIT_POOL=0 for symm_mem.empty on XPU"
        )
    return s


def manifest(torch_version: str, module: str) -> str:
    """The manifest of a prebuilt shim: the torch it was built against and its module name."""
    return json.dumps({"torch": torch_version, "module": module}, indent=1) + "\n"


def prebuilt_refusal(torch_dir: Path, torch_version: str, wanted: str) -> str | None:
    """Why the prebuilt shim in ``torch_dir`` (the installed ``xpushmem/torch/``) cannot serve this torch and the
    wanted module, or ``None`` when it can. A shim is compiled against one torch's C++ headers and ABI: only the
    exact version (local tag included, e.g. ``+cpu``/``+xpu``) it was built with may load it."""
    path = torch_dir / MANIFEST
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError:
        return "this install has no prebuilt shim"
    except (OSError, ValueError) as e:
        return f"its manifest {path} is unreadable ({e})"
    if m.get("torch") != torch_version:
        return f"it was built for torch {m.get('torch')}, this is torch {torch_version}"
    if m.get("module") != wanted:
        return f"it is {m.get('module')}, this torch needs {wanted}"
    if not any(torch_dir.glob(f"{wanted}.*.so")) and not (torch_dir / f"{wanted}.so").exists():
        return f"its library {wanted}*.so is missing from {torch_dir}"
    return None
