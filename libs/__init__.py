"""Shared library code for blockheat: trace readers and helpers."""

from __future__ import annotations

from pathlib import Path

import blockheat.sim
from blockheat.sim.jit_cache import drop_stale

# libs' compiled kernels read sim's too: a change to either recompiles them (sim.jit_cache).
drop_stale(Path(__file__).parent, [Path(__file__).parent, Path(blockheat.sim.__file__).parent])
