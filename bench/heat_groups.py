"""Extent heat's per-device pass (libs.transforms.heat_files.device_heat) three ways, in one process on the same
generated device: the array path sorting its groups (lexsort), the array path counting them into dense key
grids, and the compiled pass (libs.transforms.heat_kernels) adding each request's pieces straight into its
grids: the time of each, the ratios, and a check that every output array is equal.

    .venv/bin/python bench/heat_groups.py [--millions 25] [--repeat 2]

Generated device: N requests over one day, Zipf-like hot 1 MiB extents over 32 GiB, 0.5-64 KiB, 35% reads (the
shape of bench/scale.py's traces; 25 M is one device of its 100 M trace).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from libs.transforms import heat_files as HF

DAY_US = 86_400_000_000


def device(n: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    extents = 32 << 10
    hot = np.minimum(rng.zipf(1.3, n) - 1, extents - 1)
    extent = rng.permutation(extents)[hot]
    size = rng.integers(1, 129, n) * 512
    offset = extent * (1 << 20) + rng.integers(0, (1 << 20) // 512, n) * 512
    return pa.table({"ts_us": np.sort(rng.integers(0, DAY_US, n)), "seq": np.arange(n, dtype=np.int64),
                     "op": pa.array(np.where(rng.random(n) < 0.35, "R", "W")),
                     "offset_bytes": offset, "size_bytes": size})


def arrays(result: tuple) -> list[np.ndarray]:
    rows, counts = result
    out = [np.asarray(c) for w in sorted(rows) for c in rows[w].columns[1:]]
    for layout in ("as-traced", "random", "striped"):
        out.extend(counts[layout])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=float, default=25.0)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, alternating; the best is kept")
    args = parser.parse_args(argv)
    table = device(round(args.millions * 1e6))
    params = HF.HeatParams(span_us=DAY_US)
    ways = ("sorting", "counting", "compiled")
    best = dict.fromkeys(ways, float("inf"))
    results = {}
    cells = HF._COUNT_CELLS
    HF.device_heat(table.slice(0, 1000), "0", params)               # numba's loops loaded before timing
    for _ in range(args.repeat):
        for way in ways:
            HF._COUNT_CELLS = 0 if way == "sorting" else cells
            started = time.perf_counter()
            results[way] = HF.device_heat(table, "0", params, grids=way == "compiled")
            best[way] = min(best[way], time.perf_counter() - started)
    HF._COUNT_CELLS = cells
    for way in ways[1:]:
        for a, b in zip(arrays(results["sorting"]), arrays(results[way]), strict=True):
            np.testing.assert_array_equal(a, b)
    print(f"device_heat of {table.num_rows:,} requests: sorting {best['sorting']:.2f} s, counting "
          f"{best['counting']:.2f} s, compiled {best['compiled']:.2f} s: counting / compiled "
          f"{best['counting'] / best['compiled']:.2f}x, sorting / compiled {best['sorting'] / best['compiled']:.2f}x "
          "(every output array equal)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
