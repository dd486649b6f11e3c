"""Compiles the loops of ALIS's Spark build (the reduce buckets' split) and runs one per-device build
(libs.alis.graph_files) into numba's on-disk cache (`make venv` runs it once, through libs.warm): otherwise
every process that builds a graph before the cache is written compiles them itself. One small device build,
whole-trace and then nightly with the first night's graph aged in, as the per-device tasks of
jobs/alis_graph.py run them. The cores it calls (sim.alis) are warmed by sim.warm as well.

    python -m libs.alis.warm
"""
from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from blockheat.libs.alis.graph import _split_by_bucket
from blockheat.libs.alis.graph_files import Build, GraphParams, device_build
from blockheat.sim.warm import compile_alis, trace


def compile_all() -> int:
    """Builds one device's graphs and runs from sim.warm.trace(); returns the runs' member rows found. Then the
    loops only the Spark build calls (jobs/alis_graph.py's fallback): the reduce buckets' split, and the cores
    on the arrays its Arrow groups give (sim.warm.compile_alis)."""
    table = trace()
    requests = table.filter(pc.equal(table.column("device"), "0"))
    params = GraphParams(graph_share=0.5)          # a budget small enough that pruning runs
    first = device_build(requests, None, None, Build("warm", 0, 1, 4_000_000), params)
    night = device_build(requests, first["units"], first["graph"].filter(pc.equal(first["graph"]["interval_id"], 1)),
                         Build("warm", 2, 2, 4_000_000, nightly=True), params)
    src, dst = np.array([0, 1, 2, 0], np.int64), np.array([1, 2, 0, 2], np.int64)
    _split_by_bucket(src % 2, src, dst, dst, dst, 2)
    compile_alis()
    return first["runs"].num_rows + night["runs"].num_rows


if __name__ == "__main__":
    print(f"libs.alis.warm: {compile_all():,} run members found, ALIS's loops are in numba's cache")
