"""Disk-cooling benchmark: the scorecard's cooling scenario on the scale benchmark's generated trace (its first
N requests: 4 disks, Zipf-hot 1 MiB extents over 32 GiB each), against the same extent map replayed without
the policy, in one process, on one core.

    python bench/cooling.py [--millions 1] [--repeats 3]

Both runs go through sim.scenarios.simulate_scenario exactly as a policy_scores partition does (IBM Ultrastar
73LZX, C-LOOK, the as-traced layout cut into 131,072 extents of 1 MiB; cooling every 100 arrivals, delta
0.05). Prints seconds (best of the repeats; numba caches warmed on a small slice first), the ratio cooling /
no policy, the demon's cost per call ((cooling - no policy) / calls) and the moves, and ends with
`cooling_over_plain=<ratio>`.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))   # ahead of bench/ (the script's own folder), whose sim.py would shadow sim/
sys.path.insert(1, str(REPO / "bench"))

from scale import SCORECARD_SPEC, trace_chunks  # noqa: E402

from blockheat.sim import ScenarioConfig, simulate_scenario  # noqa: E402

DISK_BYTES = 32 << 30
EXTENT_SECTORS = 2048                       # 1 MiB of 512-byte sectors
EVERY, DELTA = 100, 0.05


def requests(n: int) -> pa.Table:
    """The first n requests of the scale trace as `requests` columns (ts in us from the first chunk's start)."""
    chunk = next(trace_chunks(max(n, 1_000_000)))
    t = chunk.slice(0, n)
    ts = pc.divide(pc.subtract(t.column("ts"), t.column("ts")[0]), 10)
    return pa.table({"device": pc.cast(t.column("disk"), pa.string()), "seq": pa.array(np.arange(n)),
                     "ts_us": ts, "op": pc.if_else(pc.equal(t.column("type"), "Read"), "R", "W"),
                     "offset_bytes": t.column("offset"), "size_bytes": t.column("size")})


def scenario(name: str, policy: bool) -> ScenarioConfig:
    sectors = DISK_BYTES // 512
    extents = [[d * sectors + s, EXTENT_SECTORS, d, s] for d in range(4) for s in range(0, sectors, EXTENT_SECTORS)]
    data: dict[str, Any] = {"scenario_id": name, "spec": SCORECARD_SPEC, "scheduler": "clook",
                            "devices": ["0", "1", "2", "3"], "device_sectors": [sectors] * 4,
                            "layout": {"kind": "extents", "extents": extents}}
    if policy:
        data["policy"] = {"name": "cooling", "every_requests": EVERY, "delta": DELTA}
    return ScenarioConfig.from_dict(data)


def best_of(table: pa.Table, cfg: ScenarioConfig, repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = simulate_scenario(table, cfg)
        times.append(time.perf_counter() - t0)
    print(f"  {cfg.scenario_id}: " + ", ".join(f"{t:.2f}" for t in times) + " s", flush=True)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--millions", type=float, default=1.0, help="requests, millions (default 1, at most 1)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n = round(args.millions * 1e6)
    if not 0 < n <= 1_000_000:
        ap.error("--millions must be in (0, 1]")
    table = requests(n)
    plain, cooling = scenario("extents", False), scenario("cooling", True)
    warm = table.slice(0, 20_000)
    simulate_scenario(warm, plain)
    simulate_scenario(warm, cooling)
    print(f"{n:,} requests, 131,072 extents of 1 MiB on 4 disks, cooling every {EVERY} arrivals, delta {DELTA}:")
    t_plain, _ = best_of(table, plain, args.repeats)
    t_cool, out = best_of(table, cooling, args.repeats)
    calls = n // EVERY
    moves = 0 if out.moves is None else out.moves.num_rows
    print(f"no policy {t_plain:.2f} s ({n / t_plain / 1e6:.2f} M req/s); cooling {t_cool:.2f} s "
          f"({n / t_cool / 1e6:.2f} M req/s), {moves} moves")
    print(f"demon: {(t_cool - t_plain) / calls * 1e6:.0f} us per call ({calls:,} calls)")
    print(f"cooling_over_plain={t_cool / t_plain:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
