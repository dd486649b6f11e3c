"""Interarrival heat tracking read from the `requests` files: the per-device form of libs.transforms.tracking
(whose window functions are the definition, and the fallback when the files cannot be read directly).

Per device (a task of libs.table_io.tracking_update's device passes): its requests cut into extent pieces, sorted by
(extent, ts_us, seq) and walked once for every k asked (libs.transforms.tracking_kernels). The window functions
sort and shuffle the pieces once per k and join the true heat back; this reads the trace once. Also the
evaluation's relative errors, read from the heat_tracking files.

    per_k = device_rows(requests, ks=(5, 10), extent_bytes=1 << 20, aging_period_us=3_600_000_000, span_us=span)
"""
from __future__ import annotations

import io
import logging
import math
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from blockheat.libs.io import storage
from blockheat.libs.table_io.changes import footer_ranges, known_requests_state, read_state_doc, replace_state_doc
from blockheat.libs.table_io.device_pass import Unsupported, spark_tasks, trace_files
from blockheat.libs.transforms.profile import interpolate, keys_sorted
from blockheat.libs.transforms.tracking_kernels import checkpoint_rows, extent_pieces, pieces_by_extent, track
from blockheat.schemas import heat_tracking as HT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

COLUMNS = ["ts_us", "seq", "offset_bytes", "size_bytes"]

__all__ = ["Unsupported", "device_rows", "forget_errors", "kth_smallest", "relative_errors_files", "rows_of_pieces",
           "sorted_pieces"]


def device_rows(requests: pa.Table, *, ks: Sequence[int], extent_bytes: int, aging_period_us: int,
                span_us: int) -> dict[int, pa.Table]:
    """One device's heat_tracking rows per k (trace_id and device left out) from its requests (ts_us, seq,
    offset_bytes, size_bytes, any order)."""
    ext, ts, _, blocks = sorted_pieces(requests, extent_bytes)
    return rows_of_pieces(ext, ts, blocks, ks=ks, extent_bytes=extent_bytes, aging_period_us=aging_period_us,
                          last_j=span_us // aging_period_us - 1)


def sorted_pieces(requests: pa.Table, extent_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The requests (ts_us, seq, offset_bytes, size_bytes) cut into extent pieces, sorted by (extent, ts_us, seq):
    extent id, ts_us, seq, blocks."""
    col = {c: np.ascontiguousarray(requests.column(c).to_numpy(), dtype=np.int64) for c in COLUMNS}
    ts, seq, offset, size = col["ts_us"], col["seq"], col["offset_bytes"], col["size_bytes"]
    timed = keys_sorted([ts, seq])
    if timed and len(offset):
        low, high = int(offset.min()) // extent_bytes, int((offset + size - 1).max()) // extent_bytes
        if high - low < 4 * len(offset) + (1 << 20):         # requests in time order: one counting sort by extent
            return pieces_by_extent(ts, seq, offset, size, extent_bytes, low, high - low + 1)
    ext, ts, seq, blocks = extent_pieces(ts, seq, offset, size, extent_bytes)
    order = np.argsort(ext, kind="stable") if timed else np.lexsort((seq, ts, ext))
    return ext[order], ts[order], seq[order], blocks[order]


def rows_of_pieces(ext: np.ndarray, ts: np.ndarray, blocks: np.ndarray, *, ks: Sequence[int], extent_bytes: int,
                   aging_period_us: int, last_j: int, first_row_j: int = 0,
                   seen_before: np.ndarray | None = None) -> dict[int, pa.Table]:
    """heat_tracking rows per k (trace_id and device left out) of sorted pieces, for checkpoints first_row_j ..
    last_j (tracking_kernels.track; seen_before: requests of each extent group before its pieces here)."""
    p = aging_period_us
    starts = checkpoint_rows(ext, ts, last_j, p, first_row_j)
    extent_id, checkpoint, seen, true_heat, heat, known, unaged = track(ext, ts, blocks, starts,
                                                                         np.array(ks, np.int64), last_j, p,
                                                                         first_row_j, seen_before)
    n = len(extent_id)
    base = {"extent_bytes": pa.array(np.full(n, extent_bytes, np.int64)), "extent_id": pa.array(extent_id),
            "aging_period_us": pa.array(np.full(n, p, np.int64)), "checkpoint_us": pa.array(checkpoint),
            "requests_seen": pa.array(seen), "true_heat": pa.array(true_heat)}
    out = {}
    for q, k in enumerate(ks):
        missing = ~known[q]
        out[k] = pa.table({**base, "k": pa.array(np.full(n, k, np.int32)),
                           "heat": pa.array(heat[q], mask=missing), "heat_no_aging": pa.array(unaged[q], mask=missing)})
    return out


# --- the evaluation's relative errors from the heat_tracking files ------------------------------------------


def _error_task(files: list[tuple[int, str]], folder: str, extent_bytes: int, aging_period_us: int,
                since: int | None = None, tag: str = "") -> Callable[[Iterator[int]], Iterator[dict[str, Any]]]:
    """The function each task runs: one heat_tracking file's relative errors |heat - true| / true (rows of this
    extent size and aging period with an estimate and true heat > 0; checkpoints from `since` on), sorted, saved
    as .npy under `folder`; with the latest checkpoint read."""

    def run(ids: Iterator[int]) -> Iterator[dict[str, Any]]:
        for i in ids:
            k, path = files[i]
            t = storage.read_parquet(path, columns=["extent_bytes", "aging_period_us", "checkpoint_us", "heat",
                                                    "true_heat"])
            keep = pc.and_(pc.and_(pc.equal(t.column("extent_bytes"), extent_bytes),
                                   pc.equal(t.column("aging_period_us"), aging_period_us)),
                           pc.and_(pc.is_valid(t.column("heat")), pc.greater(t.column("true_heat"), 0)))
            if since is not None:
                keep = pc.and_(keep, pc.greater_equal(t.column("checkpoint_us"), since))
            t = t.filter(keep)
            heat = t.column("heat").to_numpy().astype(np.float64)
            true = t.column("true_heat").to_numpy().astype(np.float64)
            e = np.sort(np.abs(heat - true) / true)
            latest = int(pc.max(t.column("checkpoint_us")).as_py()) if t.num_rows else None
            out = storage.join(folder, f"k{k}-{tag}{i}.npy")
            if storage.is_local(out):
                np.save(out, e)
            else:                                  # an object-store scratch: the whole file in one put
                buffer = io.BytesIO()
                np.save(buffer, e)
                storage.write_bytes(out, buffer.getvalue())
            yield {"k": k, "path": out, "n": len(e), "sum": float(e.sum()), "latest": latest}

    return run


def forget_errors(warehouse: Path | str, trace_id: str) -> None:
    """Drop the kept sorted errors of a trace (after they were computed another way): the next run reads every row."""
    storage.delete_tree(storage.join(storage.normalize(warehouse), "_state", "tracking_errors", trace_id))


def kth_smallest(arrays: Sequence[np.ndarray], rank: int) -> float:
    """The value of 0-based rank `rank` among sorted arrays of non-negative floats, without merging them:
    a binary search over the floats' bit patterns (ordered like the values when >= 0), counting the values at
    or below each candidate with searchsorted (a few pages of each memory-mapped array per step)."""
    lo, hi = 0, 0x7FF0000000000000                     # 0.0 and +inf as int64 bits
    while lo < hi:
        mid = (lo + hi) // 2
        v = np.array(mid, np.int64).view(np.float64)
        if sum(int(np.searchsorted(a, v, side="right")) for a in arrays) >= rank + 1:
            hi = mid
        else:
            lo = mid + 1
    return float(np.array(lo, np.int64).view(np.float64))


def relative_errors_files(spark: SparkSession, warehouse: Path, trace_id: str, *, ks: Sequence[int],
                          extent_bytes: int, aging_period_us: int, full: bool = False
                          ) -> dict[int, dict[str, float | int | None]]:
    """libs.transforms.tracking_eval.relative_errors_by_k (k -> {checkpoints, mean, median}) for the trace's
    heat_tracking rows of this extent size and aging period, read from the table's files: one task per file
    sorts its errors to a .npy file, the driver sums the counts and takes the median (Spark's percentile
    0.5: the mean of the two middle values for an even count) with kth_smallest over the memory-mapped files (read
    whole from an object store). The mean is the sum over the count (the sums' order differs from Spark's avg:
    equal to ~1e-15).
    The sorted files are kept (under <warehouse>/_state/tracking_errors/<trace_id>/), with the latest checkpoint
    they hold: a heat_tracking row is final once written (tracking adds only later checkpoints), so the next run
    reads only the files holding later checkpoints, sorts only those rows, and takes the median over the kept
    files and its own; full (or a trace ingested again since) reads every row.
    Unsupported when the files cannot be read directly."""
    by_k = trace_files(spark, warehouse, trace_id, HT.TABLE, by="k")
    wanted = sorted({int(k) for k in ks})
    folder = storage.join(storage.normalize(warehouse), "_state", "tracking_errors", trace_id,
                          f"{extent_bytes}-{aging_period_us}-{'_'.join(map(str, wanted))}")
    known = known_requests_state(warehouse, trace_id)
    doc = None if full or known is None else read_state_doc(storage.join(folder, "state.json"))
    if doc is not None and known is not None and known[1][:len(doc["sha256"])] != doc["sha256"]:
        doc = None
    if doc is None and storage.exists(folder):
        storage.delete_tree(folder)
    since = None if doc is None else int(doc["since"])
    files = [(int(k), f) for k, fs in sorted(by_k.items()) if int(k) in set(wanted) for f in fs
             if since is None or footer_ranges(f, ("checkpoint_us",))["checkpoint_us"][1] >= since]
    runs: dict[int, list[dict[str, Any]]] = {k: list((doc or {}).get("runs", {}).get(str(k), [])) for k in wanted}
    tag = uuid.uuid4().hex[:8] + "-"
    storage.makedirs(folder)
    parts = spark_tasks(spark, len(files), _error_task(files, folder, extent_bytes, aging_period_us, since, tag))
    for part in parts:
        if part["n"]:
            runs[part["k"]].append({"file": storage.name(part["path"]), "n": part["n"], "sum": part["sum"]})
    out: dict[int, dict[str, float | int | None]] = {}
    for k in wanted:
        n = sum(r["n"] for r in runs[k])
        if n == 0:
            out[k] = {"checkpoints": 0, "mean": None, "median": None}
            continue
        paths = [storage.join(folder, r["file"]) for r in runs[k]]
        arrays = [np.load(p, mmap_mode="r") if storage.is_local(p) else np.load(io.BytesIO(storage.read_bytes(p)))
                  for p in paths]
        position = (n - 1) * 0.5
        lower, higher = math.floor(position), math.ceil(position)
        lo = kth_smallest(arrays, lower)
        hi = lo if higher == lower else kth_smallest(arrays, higher)
        median = float(interpolate(position, lower, higher, lo, hi))
        out[k] = {"checkpoints": n, "mean": sum(r["sum"] for r in runs[k]) / n, "median": median}
        del arrays
    latest = [p["latest"] for p in parts if p["latest"] is not None]
    if known is not None:
        state = {"sha256": known[1], "since": max([*latest, (since or 0) - 1]) + 1,
                 "runs": {str(k): v for k, v in runs.items()}}
        replace_state_doc(storage.join(folder, "state.json"), state)
    else:
        storage.delete_tree(folder)
    return out
