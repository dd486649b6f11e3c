"""ALIS run discovery (section 5.2.2) with Spark: the runs of every (device, interval) access graph, found
by sim.alis.runs.discover_run_arrays (the paper's greedy algorithm) in applyInArrow groups on the executors.
The graphs are already aggregated and pruned to their size budget, so one group fits a task, and the devices
and intervals run in parallel without passing through the driver.
"""
from __future__ import annotations

import itertools
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
from blockheat.libs.io.device_pass import Read, device_pass, files_or_sql, trace_files
from blockheat.libs.io.tables import read_table
from blockheat.libs.io.task_parquet import arrow_schema, sink_parquet_groups_multi
from blockheat.sim.alis.graph import PRUNE_SHARE, check_context
from blockheat.sim.alis.runs import THRESHOLD, discover_run_arrays

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

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
        return pa.table([pa.array([device] * n, pa.string()), pa.array(np.full(n, interval, np.int64)),
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
            .applyInArrow(_runs_of_group(tau, f, threshold, min_length), RUN_DDL))


def write_graphs_and_runs(graph: DataFrame, budgets: DataFrame, directory: str, *, tau: int = 9, f: float = 1.0,
                          threshold: float = THRESHOLD, min_length: int | None = None,
                          share: float = PRUNE_SHARE) -> tuple[DataFrame, DataFrame, DataFrame]:
    """libs.alis.graph.write_pruned, find_runs and graph_bytes in one pass: each group's task prunes its graph
    and, holding the pruned graph, finds its runs and measures it; the three are written under `directory`
    and returned read back: (pruned graph WEIGHT_COLUMNS, runs RUN_COLUMNS, sizes GRAPH_BYTES_DDL). Separate
    find_runs and graph_bytes jobs would each read and shuffle the whole pruned graph again."""
    check_context(tau, f)
    prune, runs = _prune_group(share), _runs_of_group(tau, f, threshold, min_length)

    def run(table: pa.Table) -> dict[str, pa.Table]:
        pruned = prune(table)
        return {"graph": pruned, "runs": runs(pruned), "sizes": _graph_size(pruned) if pruned.num_rows else
                _graph_size(table).slice(0, 0)}

    out = sink_parquet_groups_multi(_graphs_with_budgets(graph, budgets, share), run,
                                    {"graph": WEIGHT_DDL, "runs": RUN_DDL, "sizes": GRAPH_BYTES_DDL}, directory)
    return out["graph"], out["runs"], out["sizes"]


def _stored_runs(tau: int, f: float, threshold: float, min_length: int | None):  # type: ignore[no-untyped-def]
    """A device pass's function for find_stored_runs: the runs of every interval's stored graph of one device."""
    runs = _runs_of_group(tau, f, threshold, min_length)

    def run(device: str, graph: pa.Table) -> tuple[dict[str, pa.Table], pa.Table | None]:
        interval = graph.column("interval_id").to_numpy()
        order = np.argsort(interval, kind="stable")
        bounds = np.flatnonzero(np.r_[True, np.diff(interval[order]) != 0, True])
        out = []
        for a, b in itertools.pairwise(bounds):
            part = graph.take(pa.array(order[a:b]))
            out.append(runs(part.append_column("device", pa.array([device] * part.num_rows, pa.string()))))
        return {}, pa.concat_tables(out) if out else None

    return run


def find_stored_runs(spark: SparkSession, warehouse: Path, trace_id: str, *, tau: int = 9, f: float = 1.0,
                     threshold: float = THRESHOLD, min_length: int | None = None) -> DataFrame:
    """find_runs of the trace's stored access graphs (every interval), read from the table's files: one task
    per device reads its graphs (the table is partitioned by device) instead of a shuffle of every edge into
    groups; the runs come back through the driver (far fewer rows than edges). Falls back to find_runs on
    the table when its files cannot be read directly."""
    check_context(tau, f)

    def from_files() -> DataFrame:
        files = sorted(trace_files(spark, warehouse, trace_id, "access_graph").items())
        found = device_pass(spark, files, _stored_runs(tau, f, threshold, min_length),
                            read=Read(["interval_id", "src_unit", "dst_unit", "weight"]),
                            label=f"stored runs {trace_id}")
        runs = [t for t in found.extras.values() if t is not None]
        table = pa.concat_tables(runs) if runs else arrow_schema(RUN_DDL).empty_table()
        return spark.createDataFrame(table.select(list(RUN_COLUMNS)), RUN_DDL)

    return files_or_sql(from_files, lambda: find_runs(read_table(spark, warehouse, "access_graph", trace_id), tau=tau,
                                                      f=f, threshold=threshold, min_length=min_length),
                        f"stored runs {trace_id}")
