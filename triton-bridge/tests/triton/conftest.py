"""The Triton tests run in the venv of scripts/setup-triton.sh (triton-xpu); elsewhere they are not collected."""

import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def _has_triton_xpu() -> bool:
    if importlib.util.find_spec("triton") is None:
        return False
    import triton.backends

    return "intel" in triton.backends.backends


collect_ignore_glob = [] if _has_triton_xpu() else ["test_*.py"]
