"""Compiles ALIS's numba loops (pair counting, pruning, run discovery) into numba's on-disk cache (`make venv`
runs it once): ~10 s of one CPU otherwise in every process that builds a graph before the cache is written.
One small device build, whole-trace and then nightly with the first night's graph aged in, as the per-device
tasks of jobs/alis_graph.py run them.

    python -m libs.alis.warm
"""
from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from libs.alis.graph import _split_by_bucket, prune_arrays
from libs.alis.graph_files import Build, GraphParams, device_build
from libs.alis.runs import discover_run_arrays
from sim.warm import frozen, trace


def compile_all() -> int:
    """Builds one device's graphs and runs from sim.warm.trace(); returns the runs' member rows found. Then the
    loops only the Spark build calls (jobs/alis_graph.py's fallback): the reduce buckets' split, pruning on the
    int32 vertex numbers its Arrow groups give, and run discovery on a stored graph's read-only weights."""
    table = trace()
    requests = table.filter(pc.equal(table.column("device"), "0"))
    params = GraphParams(graph_share=0.5)          # a budget small enough that pruning runs
    first = device_build(requests, None, None, Build("warm", 0, 1, 4_000_000), params)
    night = device_build(requests, first["units"], first["graph"].filter(pc.equal(first["graph"]["interval_id"], 1)),
                         Build("warm", 2, 2, 4_000_000, nightly=True), params)
    src, dst, weight = np.array([0, 1, 2, 0], np.int64), np.array([1, 2, 0, 2], np.int64), np.array([4., 3., 2., 1.])
    _split_by_bucket(src % 2, src, dst, dst, dst, 2)
    prune_arrays(src.astype(np.int32), dst.astype(np.int32), weight, 40, share=0.5)
    discover_run_arrays(src, dst, frozen(weight), tau=2)
    return first["runs"].num_rows + night["runs"].num_rows


if __name__ == "__main__":
    print(f"libs.alis.warm: {compile_all():,} run members found, ALIS's loops are in numba's cache")
