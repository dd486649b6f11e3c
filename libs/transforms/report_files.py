"""The report's distributions (request size, per-device interarrival time, response time) straight from the
`requests` table's Parquet files: the per-device form of `heat_report`'s Spark SQL `_cdf` (the definition, and the
fallback when the files cannot be read directly).

One device pass (libs.io.device_pass): each task orders its device's requests by (ts_us, seq) and counts each
distinct value (request sizes as they are; interarrival and response times rounded to 4 significant digits,
libs.transforms.profile.round_significant_np, as the Spark SQL form rounds them). The driver merges the counts and
takes the percentiles exactly as Spark's `percentile` with frequencies does: position (count - 1) x p, linear
interpolation between the two values around it.

    cdfs = report_cdfs(spark, warehouse, "t1", points=[i / 200 for i in range(201)])
    cdfs["size_bytes"]            # [(value at p, p) for each p]; [] when the trace has no such values
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from libs.io.device_pass import Read, Unsupported, device_pass, trace_files
from libs.transforms.profile import percentile_cells, round_significant_np

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["METRICS", "Unsupported", "device_cells", "percentiles", "report_cdfs"]

#: The distributions, in the report's order.
METRICS = ("size_bytes", "interarrival_us", "response_us")
COLUMNS = ["ts_us", "seq", "size_bytes", "response_us"]


def _cells(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v, n = np.unique(values, return_counts=True)
    return v, n.astype(np.int64)


def device_cells(requests: pa.Table) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """One device's requests (COLUMNS) -> per metric its (distinct values, counts): sizes as they are (as
    float64), the gaps between consecutive requests in (ts_us, seq) order and the non-null response times
    both rounded to 4 significant digits."""
    ts = requests.column("ts_us").to_numpy().astype(np.int64)
    seq = requests.column("seq").to_numpy().astype(np.int64)
    order = np.lexsort((seq, ts))
    gaps = np.diff(ts[order]).astype(np.float64)
    response = pc.drop_null(requests.column("response_us")).to_numpy().astype(np.float64)
    return {"size_bytes": _cells(requests.column("size_bytes").to_numpy().astype(np.float64)),
            "interarrival_us": _cells(round_significant_np(gaps)),
            "response_us": _cells(round_significant_np(response))}


def percentiles(values: np.ndarray, counts: np.ndarray, points: Sequence[float]) -> list[float]:
    """Spark's `percentile(value, points, count)` over (value, count) cells: at position (N - 1) x p, the value
    there, or the linear interpolation between the values at its floor and ceiling ranks."""
    order = np.argsort(values, kind="stable")
    at = percentile_cells(np.zeros(1, np.int64), values[order], counts[order], points)
    return [float(x[0]) for x in at]


def report_cdfs(spark: SparkSession, warehouse: Path, trace_id: str,
                points: Sequence[float]) -> dict[str, list[tuple[float, float]]]:
    """Per metric of METRICS: [(value at p, p) for p in points], [] when no request has a value. Unsupported
    when the requests files cannot be read directly."""
    devices = sorted(trace_files(spark, warehouse, trace_id).items())
    cells = device_pass(spark, devices, lambda _device, table: ({}, device_cells(table)), read=Read(COLUMNS),
                        label=f"report {trace_id}").extras
    out: dict[str, list[tuple[float, float]]] = {}
    for metric in METRICS:
        mine = [per_device[metric] for per_device in cells.values()]
        values = np.concatenate([v for v, _ in mine]) if mine else np.zeros(0)
        if len(values) == 0:
            out[metric] = []
            continue
        distinct, inverse = np.unique(values, return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([n for _, n in mine])).astype(np.int64)
        out[metric] = list(zip(percentiles(distinct, counts, points), points, strict=True))
    return out
