"""Writes ze-emu/tests/data/triton_add_one.spv: ``y[i] = x[i] + 1`` compiled by triton-xpu for an XPU target, the
module ze-emu's tests load unmodified (run with the venv of scripts/setup-triton.sh:
``python triton-bridge/tests/triton/make_ze_emu_fixture.py``)."""

from pathlib import Path

import triton
import triton.language as tl

from _xpu import compile_xpu


@triton.jit
def add_one(x, y, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(y + off, tl.load(x + off, mask=m) + 1, mask=m)


if __name__ == "__main__":
    k = compile_xpu(add_one, {"x": "*i32", "y": "*i32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 64},
                    num_warps=2, threads_per_warp=16)
    out = Path(__file__).resolve().parents[3] / "ze-emu" / "tests" / "data" / "triton_add_one.spv"
    out.write_bytes(k.asm["spv"])
    print(out, len(k.asm["spv"]), "bytes")
