"""Compiles the simulator's numba loops into numba's on-disk cache (`make venv` runs it once).

The loops are compiled lazily, on first call, for the argument types of that call; cold, every process that
replays before the cache is written compiles them itself (the test workers and each Spark Python worker at
once). One small replay per scenario shape the scorecard and the grids use (every layout kind, each
policy, track-aligned I/O, both queue disciplines, the constant and the mechanical service) compiles them
all once, with the same array types as a real replay; ALIS's cores (sim.alis) are also called on the
read-only arrays Arrow columns give, as libs.alis's Spark tasks call them.

    python -m blockheat.sim.warm
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from blockheat.sim.alis.graph import count_pairs, prune_arrays
from blockheat.sim.alis.runs import discover_run_arrays
from blockheat.sim.alis.units import KeyTable
from blockheat.sim.scenarios import ScenarioConfig, simulate_scenario
from blockheat.sim.stats import ResponseTally
from blockheat.sim.tracker import InterarrivalTracker

DEVICE_SECTORS = 1 << 18          # 128 MiB of 512-byte sectors per device
SCENARIOS: tuple[dict[str, Any], ...] = (
    {"layout": {"kind": "as_traced"}},
    {"layout": {"kind": "as_traced"}, "scheduler": "fcfs", "service": "constant", "constant_ms": 5},
    {"layout": {"kind": "random"}},
    {"layout": {"kind": "striped", "unit_sectors": 128, "width": 2}},
    {"layout": {"kind": "extents", "extent_sectors": 2048},
     "policy": {"name": "greedy-allocation", "heat_fraction": 1.0}},
    {"layout": {"kind": "extents", "extent_sectors": 2048}, "policy": {"name": "cooling", "every_s": 0.5}},
    {"layout": {"kind": "extents", "extent_sectors": 2048}, "policy": {"name": "cooling", "every_requests": 50}},
    {"layout": {"kind": "as_traced"}, "policy": {"name": "alis", "interval_s": 1.0}},
    {"layout": {"kind": "as_traced"}, "io": {"kind": "track-aligned", "tracks": 1, "report": "requests"}},
    {"layout": {"kind": "as_traced"}, "interval_ms": 500},
    {"layout": {"kind": "as_traced"}, "closed_loop": {"outstanding": 2, "think_ms": 1.0}},
)


def frozen(a: np.ndarray) -> np.ndarray:
    """A read-only copy of `a`, as an Arrow column's to_numpy() gives: numba compiles a function again for
    read-only arrays (a type of their own), so the warm-ups call the kernels with both kinds."""
    out = np.array(a)
    out.flags.writeable = False
    return out


def trace(n: int = 2_000, seed: int = 3) -> pa.Table:
    """n requests over 2 devices, 4 ms apart, a third of them writes, skewed to a few hot regions."""
    rng = np.random.default_rng(seed)
    hot = rng.integers(0, DEVICE_SECTORS // 2048, 8) * 2048
    start = np.where(rng.random(n) < 0.7, hot[rng.integers(0, 8, n)] + rng.integers(0, 2000, n),
                     rng.integers(0, DEVICE_SECTORS - 256, n))
    return pa.table({"trace_id": ["warm"] * n, "device": [str(d) for d in rng.integers(0, 2, n)],
                     "seq": np.arange(n, dtype=np.int64), "ts_us": np.arange(n, dtype=np.int64) * 4_000,
                     "op": np.where(rng.random(n) < 0.33, "W", "R").tolist(),
                     "offset_bytes": (start * 512).astype(np.int64),
                     "size_bytes": (rng.integers(1, 33, n) * 4096).astype(np.int64)})


def compile_alis() -> int:
    """Calls ALIS's cores (sim.alis: pair counts, pruning, run discovery, the units' key table) on a small graph,
    writable and read-only (a stored graph's Arrow weights); returns the run members found."""
    src, dst, weight = np.array([0, 1, 2, 0], np.int64), np.array([1, 2, 0, 2], np.int64), np.array([4., 3., 2., 1.])
    count_pairs(np.zeros(4, np.int64), src, 2)
    prune_arrays(src.astype(np.int32), dst.astype(np.int32), weight, 40, share=0.5)
    KeyTable(src, np.arange(len(src))).get(dst)
    members = 0
    for w in (weight, frozen(weight)):
        _, offsets, _ = discover_run_arrays(src, dst, w, tau=2)
        members += int(offsets[-1])
    return members


def compile_all() -> int:
    """Replays `trace()` under every scenario of SCENARIOS, asks an interarrival tracker (sim.tracker) for its
    heat, fills a streamed run's response tallies (sim.stats) and warms ALIS's cores (compile_alis); returns the
    requests replayed."""
    table, done = trace(), 0
    for k, extra in enumerate(SCENARIOS):
        cfg = ScenarioConfig.from_dict({"scenario_id": f"warm{k}", "spec": "hp_c2247a", "scheduler": "clook",
                                        "devices": ["0", "1"], "device_sectors": [DEVICE_SECTORS] * 2, **extra})
        done += int(simulate_scenario(table, cfg).result.column("requests")[0].as_py())
    tracker = InterarrivalTracker(n_units=4, k=2)
    tracker.observe(np.array([0, 1, 0]), np.array([0, 10, 20]), np.array([1, 1, 1]))
    tracker.heat(40.0)
    for dtype in (np.float32, np.float64):          # the response tallies of streamed runs (engine, track-aligned)
        tally = ResponseTally(dtype)
        tally.add(np.array([1.0, np.nan, 2.0], dtype), np.array([1, 1, 0], np.int8))
        tally.order_stats((0, 1))                   # select_bits's passes over 32- and 64-bit keys
    compile_alis()
    return done


if __name__ == "__main__":
    print(f"sim.warm: {compile_all():,} requests replayed, the simulator's loops are in numba's cache")
