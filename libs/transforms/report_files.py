"""The report's distributions (request size, per-device interarrival time, response time) straight from the
`requests` table's Parquet files, in one pass: the path `heat_report` takes (its Spark SQL `_cdf` stays the
definition and the fallback).

The Spark path scans the trace three times and orders every device's requests in a window function for the
interarrival times (229 s of a 278 s report at 100 M requests). Here one Spark task per device reads that
device's files (the Delta snapshot's list, libs.transforms.profile_files.trace_files), orders its requests by
(ts_us, seq) and counts each distinct value (request sizes as they are; interarrival and response times rounded
to 4 significant digits, libs.transforms.profile.round_significant_np, as the Spark path rounds them). The
driver merges the counts and takes the percentiles exactly as Spark's `percentile` with frequencies does:
position (count - 1) x p, linear interpolation between the two values around it.

    cdfs = report_cdfs(spark, warehouse, "t1", points=[i / 200 for i in range(201)])
    cdfs["size_bytes"]            # [(value at p, p) for each p]; [] when the trace has no such values
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from libs.transforms.profile import percentile_cells, round_significant_np
from libs.transforms.profile_files import Unsupported, read_files, trace_files

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


def _task(devices: list[tuple[str, list[str]]]) -> Callable[[Iterator[int]], Iterator[tuple[str, bytes, bytes]]]:
    """The function each task runs: its device's files read, its cells per metric yielded as raw bytes."""

    def run(indices: Iterator[int]) -> Iterator[tuple[str, bytes, bytes]]:
        for i in indices:
            _, paths = devices[i]
            table = read_files(paths, COLUMNS)
            for metric, (v, n) in device_cells(table).items():
                yield metric, v.tobytes(), n.tobytes()

    return run


def report_cdfs(spark: SparkSession, warehouse: Path, trace_id: str,
                points: Sequence[float]) -> dict[str, list[tuple[float, float]]]:
    """Per metric of METRICS: [(value at p, p) for p in points], [] when no request has a value. Unsupported
    when the requests files cannot be read directly."""
    devices = sorted(trace_files(spark, warehouse, trace_id).items())
    parts = spark.sparkContext.parallelize(range(len(devices)), len(devices)).mapPartitions(_task(devices)).collect()
    out: dict[str, list[tuple[float, float]]] = {}
    for metric in METRICS:
        mine = [(np.frombuffer(v, np.float64), np.frombuffer(n, np.int64)) for m, v, n in parts if m == metric]
        values = np.concatenate([v for v, _ in mine]) if mine else np.zeros(0)
        if len(values) == 0:
            out[metric] = []
            continue
        distinct, inverse = np.unique(values, return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([n for _, n in mine])).astype(np.int64)
        out[metric] = list(zip(percentiles(distinct, counts, points), points, strict=True))
    return out
