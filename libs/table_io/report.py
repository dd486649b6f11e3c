"""The report's distributions per device (request size and response time of reads and writes apart, interarrival
time of all requests) straight from the `requests` table's Parquet files: the per-device form of `heat_report`'s
Spark SQL `spark_cdfs` (the definition, and the fallback when the files cannot be read directly).

The distinct values and their counts are kept between runs (per trace under <warehouse>/_state/report/<trace_id>/,
with each device's last request time, the requests version and the trace's files they were made from), so after an
append a run reads only the requests after the stored end and adds their counts: the same distributions as
counting the whole trace. The whole trace is read instead when there is no state, the trace was ingested again,
a device it knew has gone, or requests changed before the stored end (an overlapping append).

One device pass (libs.table_io.device_pass): each task reads its device's requests in time order, in parts of about
CHUNK_ROWS (its memory follows the part, not the device), and counts each distinct value (request sizes as they
are; interarrival and response times rounded to 4 significant digits, libs.transforms.profile.round_significant_np,
as the Spark SQL form rounds them). A device of more than CHUNK_ROWS requests holding more than its share of the
session's cores is split by time into spans, one task each (device_pass.time_pieces): a piece counts its gaps from
its own first request on, and the driver adds each gap across a cut (the piece's first request against the last
one before it) and sums the pieces' counts. The driver takes the percentiles
exactly as Spark's `percentile` with frequencies does: position (count - 1) x p, linear interpolation between the two
values around it.

The heat map's bins are summed from the trace's `extent_heat` files in this process (heat_map_files): a few
million rows, where Spark took two jobs over the table.

    cdfs = report_cdfs(spark, warehouse, "t1", points=[i / 200 for i in range(201)])
    cdfs["size_bytes"][("0", "R")]        # device 0's reads: [(value at p, p) for each p]
    cdfs["interarrival_us"][("0", "*")]   # device 0, reads and writes together
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from blockheat.libs.io import storage
from blockheat.libs.io.connect import parallelism
from blockheat.libs.table_io.changes import changes_since, known_requests_state, read_state_doc, replace_state_doc
from blockheat.libs.table_io.device_pass import (
    DeviceChunks,
    Read,
    Unsupported,
    device_pass,
    read_files,
    request_files,
    time_pieces,
    trace_files,
)
from blockheat.libs.transforms.profile import keys_sorted, percentile_cells, round_significant_np, value_counts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

__all__ = ["ALL_OPS", "METRICS", "PER_OP", "Cdfs", "Unsupported", "add_cells", "device_cells", "forget_state",
           "heat_map_bins", "heat_map_files", "percentiles", "report_cdfs"]

#: The distributions, in the report's order.
METRICS = ("size_bytes", "interarrival_us", "response_us")
#: Distributions kept apart per operation (requests.op "R" / "W"); the others hold all of a device's requests ("*").
PER_OP = ("size_bytes", "response_us")
ALL_OPS = "*"
COLUMNS = ["ts_us", "seq", "op", "size_bytes", "response_us"]
CHUNK_ROWS = 4_000_000     # requests a task holds at once: a device is read in parts of about this many

#: One device's distributions: per metric, per operation ("R", "W" or ALL_OPS), the distinct values and their counts.
Cells = dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
#: The report's distributions: per metric, per (device, operation), [(value at p, p) for each p].
Cdfs = dict[str, dict[tuple[str, str], list[tuple[float, float]]]]


def device_cells(requests: pa.Table, before_ts: int | None = None) -> Cells:
    """One device's requests (COLUMNS) -> per metric and operation the (distinct values, counts): sizes as they
    are (as float64) and the non-null response times rounded to 4 significant digits, per operation present; the
    gaps between consecutive requests in (ts_us, seq) order, all operations together, rounded the same way.
    before_ts: the time of the device's last request before these (its gap to the first is counted)."""
    ts = requests.column("ts_us").to_numpy().astype(np.int64)
    seq = requests.column("seq").to_numpy().astype(np.int64)
    if not keys_sorted([ts, seq]):
        ts = ts[np.lexsort((seq, ts))]
    gaps = np.diff(ts) if before_ts is None else np.diff(ts, prepend=before_ts)
    out: Cells = {"size_bytes": {}, "response_us": {}, "interarrival_us": {ALL_OPS: value_counts(gaps, rounded=True)}}
    op = requests.column("op").combine_chunks().dictionary_encode()
    names = op.dictionary.to_pylist()
    index = op.indices.to_numpy(zero_copy_only=False)
    size = requests.column("size_bytes").to_numpy().astype(np.int64)
    response = requests.column("response_us")
    timed = None
    if response.null_count < len(response):
        raw = pc.fill_null(response, 0.0).to_numpy()
        timed = np.flatnonzero(response.is_valid().to_numpy(zero_copy_only=False))
        rounded = round_significant_np(raw[timed])
    for i, name in enumerate(names):
        mine = index == i
        if not mine.any():
            continue
        out["size_bytes"][name] = value_counts(size[mine], rounded=False)
        if timed is not None and len(r := rounded[mine[timed]]):
            out["response_us"][name] = _rounded_cells(r)
    if not len(gaps):
        del out["interarrival_us"][ALL_OPS]
    return out


def _rounded_cells(rounded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, counts) of values already rounded to 4 significant digits (round_significant_np)."""
    if len(rounded) and rounded.min() >= 0 and rounded.max() < 2.0 ** 53:
        return value_counts(rounded.astype(np.int64), rounded=True)      # rounding again keeps each value
    v, n = np.unique(rounded, return_counts=True)
    return v, n.astype(np.int64)


def add_cells(a: Cells, b: Cells) -> Cells:
    """Two sets of a device's cells as one: the counts of equal values summed."""
    out: Cells = {}
    for metric in METRICS:
        out[metric] = dict(a.get(metric, {}))
        for op, (values, counts) in b.get(metric, {}).items():
            if op in out[metric]:
                v, at = np.unique(np.concatenate([out[metric][op][0], values]), return_inverse=True)
                n = np.bincount(at.reshape(-1), np.concatenate([out[metric][op][1], counts]), len(v))
                out[metric][op] = (v, n.astype(np.int64))
            else:
                out[metric][op] = (values, counts)
    return out


def percentiles(values: np.ndarray, counts: np.ndarray, points: Sequence[float]) -> list[float]:
    """Spark's `percentile(value, points, count)` over (value, count) cells: at position (N - 1) x p, the value
    there, or the linear interpolation between the values at its floor and ceiling ranks."""
    order = np.argsort(values, kind="stable")
    at = percentile_cells(np.zeros(1, np.int64), values[order], counts[order], points)
    return [float(x[0]) for x in at]


def report_cdfs(spark: SparkSession, warehouse: Path, trace_id: str, points: Sequence[float], *,
                full: bool = False) -> Cdfs:
    """Per metric of METRICS, per (device, operation) with values: [(value at p, p) for p in points]; the operation
    is "R" or "W" for PER_OP metrics, ALL_OPS otherwise. After an append, from the stored counts and the new
    requests (full: from every request). Unsupported when the requests files cannot be read directly."""
    listed = request_files(spark, warehouse, trace_id)
    state = _State(warehouse, trace_id)
    known = known_requests_state(warehouse, trace_id)     # before the pass: what it reads (None: counted whole)
    stored = None if full or known is None else state.load(known[1], set(listed.files))
    cells, last = stored or ({}, {})
    stop = max(last.values()) + 1 if last else None
    tasks = time_pieces(listed, parallelism(spark), CHUNK_ROWS, start=stop)
    of_task = {name: (device, span) for name, device, span in tasks}

    def count(name: str, parts: DeviceChunks) -> tuple[dict, tuple[Cells, int | None, int | None]]:
        device, span = of_task[name]
        cells: Cells = {}
        before = last.get(device) if span[0] == stop else None      # a later piece's first gap: the driver's
        start = end = None
        for part in parts if name == device else parts.reread(COLUMNS, *span):
            if part.num_rows:                      # in time order: each part's first gap from the one before
                cells = add_cells(cells, device_cells(part, before))
                if start is None:
                    start = int(pc.min(part.column("ts_us")).as_py())
                before = end = int(pc.max(part.column("ts_us")).as_py())
        return {}, (cells, start, end)

    read = Read(COLUMNS, chunk_rows=CHUNK_ROWS, start=stop)
    label = f"report {trace_id}" + ("" if stop is None else f", requests from {stop} us on after the stored counts")
    new = device_pass(spark, [(name, listed.files[device]) for name, device, _ in tasks], count, read=read,
                      label=label).extras
    for device in listed.files:
        before = last.get(device)
        for name, (counted, start, end) in ((n, new[n]) for n, d, _ in tasks if d == device):
            if start is None:
                continue
            if of_task[name][1][0] != stop and before is not None:
                gap = value_counts(np.array([start - before], np.int64), rounded=True)   # the gap across the cut
                counted = add_cells(counted, {"interarrival_us": {ALL_OPS: gap}})
            cells[device] = add_cells(cells.get(device, {}), counted)
            before = end
        if before is not None:
            last[device] = before
    if known is not None:
        state.save(cells, last, version=known[0], sha256=known[1])
    out: Cdfs = {metric: {} for metric in METRICS}
    for device in sorted(cells):
        for metric in METRICS:
            for op, (values, counts) in sorted(cells[device][metric].items()):
                out[metric][(device, op)] = list(zip(percentiles(values, counts, points), points, strict=True))
    return out


CELLS = pa.schema([("device", pa.string()), ("metric", pa.string()), ("op", pa.string()), ("value", pa.float64()),
                   ("count", pa.int64())])


class _State:
    """The stored counts of one trace (see the module docstring)."""

    def __init__(self, warehouse: Path | str, trace_id: str) -> None:
        self.warehouse = warehouse
        self.trace_id = trace_id
        self.folder = storage.join(storage.normalize(warehouse), "_state", "report", trace_id)

    def load(self, sha256: list[str], devices: set[str]) -> tuple[dict[str, Cells], dict[str, int]] | None:
        doc = read_state_doc(storage.join(self.folder, "state.json"))
        if doc is None or set(doc["last"]) - devices:
            return None
        last = {d: int(t) for d, t in doc["last"].items()}
        changed = changes_since(self.warehouse, self.trace_id, sha256, doc["sha256"], int(doc["version"]))
        if changed is False or (isinstance(changed, tuple) and last and changed[0] <= max(last.values())):
            log.info("report %s: requests changed before the stored counts' end: counted whole", self.trace_id)
            return None
        try:
            table = storage.read_parquet(storage.join(self.folder, doc["file"])).cast(CELLS)
        except (OSError, ValueError, pa.ArrowException):
            return None
        cells: dict[str, Cells] = {}
        rows = table.sort_by([(c, "ascending") for c in ("device", "metric", "op", "value")])
        keys = list(zip(*(rows.column(c).to_pylist() for c in ("device", "metric", "op")), strict=True))
        values, counts = rows.column("value").to_numpy(), rows.column("count").to_numpy()
        start = 0
        for i in range(1, len(keys) + 1):
            if i == len(keys) or keys[i] != keys[start]:
                device, metric, op = keys[start]
                cells.setdefault(device, {m: {} for m in METRICS})[metric][op] = (values[start:i].copy(),
                                                                                  counts[start:i].copy())
                start = i
        return cells, last

    def save(self, cells: dict[str, Cells], last: dict[str, int], *, version: int, sha256: list[str]) -> None:
        """The counts' file, then the document naming it (one PUT or rename); the previous file deleted after."""
        columns: dict[str, list[Any]] = {f.name: [] for f in CELLS}
        for device, of_device in cells.items():
            for metric, by_op in of_device.items():
                for op, (values, counts) in by_op.items():
                    columns["device"] += [device] * len(values)
                    columns["metric"] += [metric] * len(values)
                    columns["op"] += [op] * len(values)
                    columns["value"].append(np.asarray(values, np.float64))
                    columns["count"].append(np.asarray(counts, np.int64))
        table = pa.table({"device": columns["device"], "metric": columns["metric"], "op": columns["op"],
                          "value": np.concatenate(columns["value"]) if columns["value"] else np.zeros(0),
                          "count": np.concatenate(columns["count"]) if columns["count"] else np.zeros(0, np.int64)},
                         schema=CELLS)
        name = f"cells-{uuid.uuid4().hex}.parquet"
        storage.write_parquet(storage.join(self.folder, name), table)
        doc = {"version": version, "sha256": sha256, "last": last, "file": name}
        replace_state_doc(storage.join(self.folder, "state.json"), doc, lambda d: [d["file"]] if d.get("file") else [])

    def forget(self) -> None:
        if storage.exists(self.folder):
            storage.delete_tree(self.folder)


def forget_state(warehouse: Path | str, trace_id: str) -> None:
    """Drop the stored counts (after the distributions were counted another way): the next run counts whole."""
    _State(warehouse, trace_id).forget()


def heat_map_bins(last_window_start_us: int, last_extent: int, *, window_us: int, extent_bytes: int,
                  max_bins: tuple[int, int]) -> tuple[int, int]:
    """The heat map's (time bin us, address bin bytes): whole windows and whole extents, at most max_bins (time,
    address) bins up to the last window start and the highest extent id with heat."""
    time_bin = window_us * max(1, -(-(last_window_start_us // window_us + 1) // max_bins[0]))
    addr_bin = extent_bytes * max(1, -(-(last_extent + 1) // max_bins[1]))
    return time_bin, addr_bin


def heat_map_files(warehouse: Path | str, trace_id: str, *, window_us: int, extent_bytes: int,
                   max_bins: tuple[int, int]) -> tuple[pa.Table, tuple[int, int]]:
    """The report's heat map from the trace's `extent_heat` files (window_us windows, extents of extent_bytes), read
    in this process: (device, time_bin_us, addr_bin_bytes, heat: blocks per second of the bin) per bin with heat,
    and the bins (heat_map_bins); the rows `heat_report`'s Spark SQL form groups, in (device, time, address) order.
    Unsupported when the files cannot be read directly."""
    files = trace_files(None, warehouse, trace_id, "extent_heat", by="extent_bytes").get(str(extent_bytes))
    if not files:
        raise Unsupported(f"no extent_heat files of {extent_bytes}-byte extents for trace {trace_id!r}")
    rows = read_files(files, ["device", "window_start_us", "extent_id", "blocks"], [("window_us", "==", window_us)])
    if not rows.num_rows:
        raise Unsupported(f"no extent_heat rows of {window_us} us windows for trace {trace_id!r}")
    start = rows.column("window_start_us").to_numpy()
    extent = rows.column("extent_id").to_numpy()
    bins = heat_map_bins(int(start.max()), int(extent.max()), window_us=window_us, extent_bytes=extent_bytes,
                         max_bins=max_bins)
    coded = pc.dictionary_encode(rows.column("device").combine_chunks())
    # Devices numbered in name order (as Spark's strings sort): each dictionary entry's rank among the names.
    names, rank = np.unique(np.array(coded.dictionary.to_pylist(), dtype=object), return_inverse=True)
    device = rank.astype(np.int64)[coded.indices.to_numpy()]
    t, a = start // bins[0], extent * extent_bytes // bins[1]
    n_t, n_a = int(t.max()) + 1, int(a.max()) + 1
    key = (device * n_t + t) * n_a + a
    weights = rows.column("blocks").to_numpy()                    # whole numbers: their float sums are exact
    if len(names) * n_t * n_a <= 2 * len(key) + (1 << 20):        # few cells: counted in place, not sorted
        present = np.bincount(key, minlength=len(names) * n_t * n_a)
        cells = np.flatnonzero(present)
        blocks = np.bincount(key, weights=weights, minlength=len(present))[cells]
    else:
        cells, at = np.unique(key, return_inverse=True)
        blocks = np.bincount(at, weights=weights, minlength=len(cells))
    return pa.table({"device": pa.array(names[cells // (n_t * n_a)], pa.string()),
                     "time_bin_us": pa.array(cells // n_a % n_t * bins[0], pa.int64()),
                     "addr_bin_bytes": pa.array(cells % n_a * bins[1], pa.int64()),
                     "heat": pa.array(blocks / (bins[0] / 1e6), pa.float64())}), bins
