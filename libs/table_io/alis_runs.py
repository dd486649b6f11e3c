"""ALIS run discovery over a trace's stored access graphs, read from the `access_graph` files: one device pass
(libs.table_io.device_pass), each task the runs of its device's graphs, every interval (libs.alis.runs' rules; its
Spark form on the table is the fallback when the files cannot be read directly)."""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from blockheat.libs.alis.runs import RUN_COLUMNS, RUN_DDL, _runs_of_group, find_runs
from blockheat.libs.io.tables import read_table
from blockheat.libs.io.task_parquet import arrow_schema
from blockheat.libs.table_io.device_pass import Read, device_pass, files_or_sql, trace_files
from blockheat.sim import ALIS_THRESHOLD as THRESHOLD
from blockheat.sim import check_alis_context as check_context

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession


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
            out.append(runs(part.append_column("device", pa.repeat(pa.scalar(device, pa.string()), part.num_rows))))
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
