"""Compiles ALIS's numba loops (pair counting, pruning, run discovery) into numba's on-disk cache (`make venv`
runs it once): ~10 s of one CPU otherwise in every process that builds a graph before the cache is written.
One small device build, whole-trace and then nightly with the first night's graph aged in, as the per-device
tasks of jobs/alis_graph.py run them.

    python -m libs.alis.warm
"""
from __future__ import annotations

import pyarrow.compute as pc

from libs.alis.graph_files import Build, GraphParams, device_build
from sim.warm import trace


def compile_all() -> int:
    """Builds one device's graphs and runs from sim.warm.trace(); returns the runs' member rows found."""
    table = trace()
    requests = table.filter(pc.equal(table.column("device"), "0"))
    params = GraphParams(graph_share=0.5)          # a budget small enough that pruning runs
    first = device_build(requests, None, None, Build("warm", 0, 1, 4_000_000), params)
    night = device_build(requests, first["units"], first["graph"].filter(pc.equal(first["graph"]["interval_id"], 1)),
                         Build("warm", 2, 2, 4_000_000, nightly=True), params)
    return first["runs"].num_rows + night["runs"].num_rows


if __name__ == "__main__":
    print(f"libs.alis.warm: {compile_all():,} run members found, ALIS's loops are in numba's cache")
