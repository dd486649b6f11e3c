"""ALIS run discovery (section 5.2.2) with Spark: the runs of every (device, interval) access graph, found
by sim.alis.runs.discover_run_arrays (the paper's greedy algorithm) in applyInArrow groups on the executors.
The graphs are already aggregated and pruned to their size budget, so one group fits a task, and the devices
and intervals run in parallel without passing through the driver. The runs of stored graphs, read from the
table's files, are libs.table_io.alis_runs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from blockheat.libs.alis.graph import (
    GRAPH_BYTES_DDL,
    GROUP,
    WEIGHT_DDL,
    _graph_size,
    _graphs_with_budgets,
    _prune_group,
)
from blockheat.libs.io.task_parquet import sink_parquet_groups_multi
from blockheat.libs.io.worker import python_task
from blockheat.sim import ALIS_PRUNE_SHARE as PRUNE_SHARE
from blockheat.sim import ALIS_THRESHOLD as THRESHOLD
from blockheat.sim import check_alis_context as check_context
from blockheat.sim import discover_run_arrays

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

RUN_COLUMNS = ("device", "interval_id", "run_id", "rank", "position", "unit_id")
RUN_DDL = "device string, interval_id long, run_id long, rank long, position long, unit_id long"


def _runs_of_group(tau: int, f: float, threshold: float, min_length: int | None):  # type: ignore[no-untyped-def]
    def run(table: pa.Table) -> pa.Table:
        run_ids, offsets, units = discover_run_arrays(
            table.column("src_unit").to_numpy(), table.column("dst_unit").to_numpy(),
            table.column("weight").to_numpy(), tau=tau, f=f, threshold=threshold, min_length=min_length)
        lengths = np.diff(offsets)
        n = len(units)
        position = np.arange(n, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
        device = table.column("device")[0].as_py() if table.num_rows else ""
        interval = table.column("interval_id")[0].as_py() if table.num_rows else 0
        return pa.table([pa.repeat(pa.scalar(device, pa.string()), n), pa.array(np.full(n, interval, np.int64)),
                         pa.array(np.repeat(run_ids, lengths)), pa.array(np.repeat(np.arange(len(run_ids)), lengths)),
                         pa.array(position), pa.array(units)], names=list(RUN_COLUMNS))

    return run


def find_runs(graph: DataFrame, *, tau: int = 9, f: float = 1.0, threshold: float = THRESHOLD,
              min_length: int | None = None) -> DataFrame:
    """Runs of every (device, interval_id) graph.

    Input: device, interval_id, src_unit, dst_unit, weight (an aged, pruned access graph).
    Output: RUN_COLUMNS, one row per run member.

        runs = find_runs(graph, tau=9, f=1.0, threshold=THRESHOLD_COMBINED)
    """
    check_context(tau, f)
    return (graph.select(*GROUP, "src_unit", "dst_unit", "weight").groupBy(*GROUP)
            .applyInArrow(python_task(_runs_of_group(tau, f, threshold, min_length)), RUN_DDL))


def write_graphs_and_runs(graph: DataFrame, budgets: DataFrame, directory: str, *, tau: int = 9, f: float = 1.0,
                          threshold: float = THRESHOLD, min_length: int | None = None,
                          share: float = PRUNE_SHARE, find: bool = True) -> tuple[DataFrame, DataFrame, DataFrame]:
    """libs.alis.graph.write_pruned, find_runs and graph_bytes in one pass: each group's task prunes its graph
    and, holding the pruned graph, finds its runs and measures it; the three are written under `directory`
    and returned read back: (pruned graph WEIGHT_COLUMNS, runs RUN_COLUMNS, sizes GRAPH_BYTES_DDL). Separate
    find_runs and graph_bytes jobs would each read and shuffle the whole pruned graph again. find False: no
    runs are looked for (the runs come back empty)."""
    check_context(tau, f)
    prune, runs = _prune_group(share), _runs_of_group(tau, f, threshold, min_length)

    def run(table: pa.Table) -> dict[str, pa.Table]:
        pruned = prune(table)
        return {"graph": pruned, "runs": runs(pruned if find else pruned.slice(0, 0)),
                "sizes": _graph_size(pruned) if pruned.num_rows else _graph_size(table).slice(0, 0)}

    out = sink_parquet_groups_multi(_graphs_with_budgets(graph, budgets, share), run,
                                    {"graph": WEIGHT_DDL, "runs": RUN_DDL, "sizes": GRAPH_BYTES_DDL}, directory)
    return out["graph"], out["runs"], out["sizes"]
