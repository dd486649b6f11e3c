"""The report's distributions per device (request size and response time of reads and writes apart, interarrival
time of all requests) straight from the `requests` table's Parquet files: the per-device form of `heat_report`'s
Spark SQL `spark_cdfs` (the definition, and the fallback when the files cannot be read directly).

One device pass (libs.table_io.device_pass): each task orders its device's requests by (ts_us, seq) and counts each
distinct value (request sizes as they are; interarrival and response times rounded to 4 significant digits,
libs.transforms.profile.round_significant_np, as the Spark SQL form rounds them). The driver takes the percentiles
exactly as Spark's `percentile` with frequencies does: position (count - 1) x p, linear interpolation between the two
values around it.

    cdfs = report_cdfs(spark, warehouse, "t1", points=[i / 200 for i in range(201)])
    cdfs["size_bytes"][("0", "R")]        # device 0's reads: [(value at p, p) for each p]
    cdfs["interarrival_us"][("0", "*")]   # device 0, reads and writes together
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from blockheat.libs.table_io.device_pass import Read, Unsupported, device_pass, trace_files
from blockheat.libs.transforms.profile import percentile_cells, round_significant_np

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["ALL_OPS", "METRICS", "PER_OP", "Cdfs", "Unsupported", "device_cells", "percentiles", "report_cdfs"]

#: The distributions, in the report's order.
METRICS = ("size_bytes", "interarrival_us", "response_us")
#: Distributions kept apart per operation (requests.op "R" / "W"); the others hold all of a device's requests ("*").
PER_OP = ("size_bytes", "response_us")
ALL_OPS = "*"
COLUMNS = ["ts_us", "seq", "op", "size_bytes", "response_us"]

#: One device's distributions: per metric, per operation ("R", "W" or ALL_OPS), the distinct values and their counts.
Cells = dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
#: The report's distributions: per metric, per (device, operation), [(value at p, p) for each p].
Cdfs = dict[str, dict[tuple[str, str], list[tuple[float, float]]]]


def _cells(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v, n = np.unique(values, return_counts=True)
    return v, n.astype(np.int64)


def device_cells(requests: pa.Table) -> Cells:
    """One device's requests (COLUMNS) -> per metric and operation the (distinct values, counts): sizes as they
    are (as float64) and the non-null response times rounded to 4 significant digits, per operation present; the
    gaps between consecutive requests in (ts_us, seq) order, all operations together, rounded the same way."""
    ts = requests.column("ts_us").to_numpy().astype(np.int64)
    seq = requests.column("seq").to_numpy().astype(np.int64)
    order = np.lexsort((seq, ts))
    out: Cells = {"size_bytes": {}, "response_us": {},
                  "interarrival_us": {ALL_OPS: _cells(round_significant_np(np.diff(ts[order]).astype(np.float64)))}}
    for op in pc.unique(requests.column("op")).to_pylist():
        mine = requests.filter(pc.equal(requests.column("op"), op))
        out["size_bytes"][op] = _cells(mine.column("size_bytes").to_numpy().astype(np.float64))
        response = pc.drop_null(mine.column("response_us")).to_numpy().astype(np.float64)
        if len(response):
            out["response_us"][op] = _cells(round_significant_np(response))
    if len(ts) < 2:
        del out["interarrival_us"][ALL_OPS]
    return out


def percentiles(values: np.ndarray, counts: np.ndarray, points: Sequence[float]) -> list[float]:
    """Spark's `percentile(value, points, count)` over (value, count) cells: at position (N - 1) x p, the value
    there, or the linear interpolation between the values at its floor and ceiling ranks."""
    order = np.argsort(values, kind="stable")
    at = percentile_cells(np.zeros(1, np.int64), values[order], counts[order], points)
    return [float(x[0]) for x in at]


def report_cdfs(spark: SparkSession, warehouse: Path, trace_id: str, points: Sequence[float]) -> Cdfs:
    """Per metric of METRICS, per (device, operation) with values: [(value at p, p) for p in points]; the operation
    is "R" or "W" for PER_OP metrics, ALL_OPS otherwise. Unsupported when the requests files cannot be read
    directly."""
    devices = sorted(trace_files(spark, warehouse, trace_id).items())
    cells: dict[str, Cells] = device_pass(spark, devices, lambda _device, table: ({}, device_cells(table)),
                                          read=Read(COLUMNS), label=f"report {trace_id}").extras
    out: Cdfs = {metric: {} for metric in METRICS}
    for device in sorted(cells):
        for metric in METRICS:
            for op, (values, counts) in sorted(cells[device][metric].items()):
                out[metric][(device, op)] = list(zip(percentiles(values, counts, points), points, strict=True))
    return out
