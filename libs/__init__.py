"""Shared library code for blockheat: trace readers and helpers."""

from __future__ import annotations

from pathlib import Path

from blockheat.sim import JIT_SIM_DIR, drop_stale_jit_cache

# libs' compiled kernels read sim's too: a change to either recompiles them (sim.jit_cache).
drop_stale_jit_cache(Path(__file__).parent, [Path(__file__).parent, JIT_SIM_DIR])
