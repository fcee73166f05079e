"""``xpushmem.ep``: a DeepEP-compatible expert-parallel ``Buffer`` (``deep_ep.Buffer``'s Python API) over
xpushmem's token switch (``ops/src/ep``), for code written against DeepEP::

    from xpushmem.ep import Buffer          # instead of: from deep_ep import Buffer

CPU tensors (the host path). ``docs/EP.md`` lists every difference from DeepEP.
"""

from __future__ import annotations

from .buffer import Buffer, Config, EventOverlap

__all__ = ["Buffer", "Config", "EventOverlap"]
