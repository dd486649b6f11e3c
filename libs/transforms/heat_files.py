"""Extent heat and disk heat straight from the `requests` table's Parquet files, in one pass: the path
`extent_heat` takes (libs.transforms.heat's Spark SQL stays the definition and the fallback).

The Spark path explodes every request into its extent pieces and aggregates them in a shuffle, then scans the
trace again for the device ends and once more for the three layouts' pieces per disk (226 s at 100 M
requests on 2 cores). Here one Spark task per device reads that device's files (the Delta snapshot's list,
libs.transforms.profile_files.request_files: a device of more than MAX_DEVICE_REQUESTS goes the Spark way)
and, from the same arrays:

- cuts the requests at extent boundaries, counts each (extent, window) and each extent over the whole trace, and
  writes both sets of extent_heat rows into the table itself (libs.io.delta_files);
- counts per window its requests and blocks as traced, per random disk (Spark's xxhash64 of (seed, device, seq)
  reproduced bit for bit, spark_xxhash64_disk), and its stripe-unit pieces per unit number modulo the stripe
  width; with the device's end, the driver shifts those by where the device starts in the striped volume (a
  stripe-unit multiple, so every piece keeps its blocks) and builds the disk_heat rows (heat.disk_heat_rows).

All of it in one compiled pass into dense grids (libs.transforms.heat_kernels) when they fit, else as arrays
(tracking_kernels.unit_pieces, then each key set grouped by counting or sorting, _groups); the same arrays either
way. The driver commits one replace per window length. Integer counts, so the rows equal the Spark path's, heat and
temperature as the same double divisions.

    written, disks = extent_and_disk_heat(spark, warehouse, "t1", HeatParams(span_us=span))
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from libs.transforms.heat import BLOCK_BYTES, LAYOUTS, _check_unit, _volume_bases, _window_seconds, disk_heat_rows
from libs.transforms.profile_files import Unsupported, read_files, request_files
from libs.transforms.xxh64 import MASK as _M
from libs.transforms.xxh64 import P1 as _P1
from libs.transforms.xxh64 import P2 as _P2
from libs.transforms.xxh64 import P3 as _P3
from libs.transforms.xxh64 import P4 as _P4
from libs.transforms.xxh64 import P5 as _P5
from schemas import extent_heat as EH

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from libs.io.delta_files import TableTarget

log = logging.getLogger(__name__)

COLUMNS = ["ts_us", "seq", "op", "offset_bytes", "size_bytes"]

__all__ = ["HeatParams", "Unsupported", "device_heat", "extent_and_disk_heat", "spark_xxhash64_disk"]

SPARK_HASH_SEED = 42                       # Spark's xxhash64 starts from this seed


@dataclass(frozen=True)
class HeatParams:
    """What jobs.extent_heat computes (its HeatConfig with the stripe width and random disks resolved)."""

    span_us: int
    extent_bytes: int = 1 << 20
    window_us: int = 3_600_000_000        # the windowed rows; 0: the whole trace only
    stripe_unit_bytes: int = 65_536
    width: int = 4
    disks: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        _check_unit("extent_bytes", self.extent_bytes)
        _check_unit("stripe_unit_bytes", self.stripe_unit_bytes)
        if self.window_us < 0 or self.width <= 0 or self.disks <= 0:
            raise ValueError(f"window_us >= 0, width and disks > 0 expected, got {self.window_us}, {self.width}, "
                             f"{self.disks}")

    @property
    def windows(self) -> tuple[int, ...]:
        """The extent_heat window lengths written: the window, then the whole trace (0)."""
        return tuple(dict.fromkeys((self.window_us, 0)))


# --- Spark's xxhash64 (org.apache.spark.sql.catalyst.expressions.XxHash64, XXH64 of each value in turn) ---


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def _hash_int(value: int, seed: int) -> int:
    """XXH64.hashInt: a 4-byte value."""
    h = (seed + _P5 + 4) & _M
    h ^= ((value & 0xFFFFFFFF) * _P1) & _M
    return _fmix((_rotl(h, 23) * _P2 + _P3) & _M)


def _hash_long(value: int, seed: int) -> int:
    """XXH64.hashLong: an 8-byte value."""
    h = (seed + _P5 + 8) & _M
    h ^= (_rotl((value * _P2) & _M, 31) * _P1) & _M
    return _fmix((_rotl(h, 27) * _P1 + _P4) & _M)


def _hash_bytes(data: bytes, seed: int) -> int:
    """XXH64.hashUnsafeBytes: a string's UTF-8 bytes (the reference XXH64)."""
    n, at = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        while at + 32 <= n:
            v = [_round(v[k], int.from_bytes(data[at + 8 * k:at + 8 * k + 8], "little")) for k in range(4)]
            at += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for x in v:
            h = (((h ^ _round(0, x)) * _P1) + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while at + 8 <= n:
        h ^= _round(0, int.from_bytes(data[at:at + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _M
        at += 8
    if at + 4 <= n:
        h ^= (int.from_bytes(data[at:at + 4], "little") * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        at += 4
    while at < n:
        h ^= (data[at] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        at += 1
    return _fmix(h)


def _device_state(seed: int, device: str) -> int:
    """XXH64's state before each seq's 8 bytes: the seed literal hashed as an int (a long beyond 32 bits, as
    py4j passes it), then the device's UTF-8 bytes, plus P5 + 8 (hashLong's start)."""
    h = _hash_int(seed, SPARK_HASH_SEED) if -(1 << 31) <= seed < (1 << 31) else _hash_long(seed, SPARK_HASH_SEED)
    return (_hash_bytes(device.encode(), h) + _P5 + 8) & _M


def spark_xxhash64_disk(seed: int, device: str, seq: np.ndarray, disks: int) -> np.ndarray:
    """pmod(xxhash64(seed, device, seq), disks) as Spark computes it (heat.compute_disk_heat's random layout):
    the seed literal hashed as an int (a long beyond 32 bits, as py4j passes it), then the device's UTF-8 bytes,
    then each seq as a long, on 64-bit words; pmod of the signed result."""
    from libs.transforms.heat_kernels import disks_of

    return disks_of(np.uint64(_device_state(seed, device)), np.ascontiguousarray(seq, np.int64), disks)


# --- one device ---------------------------------------------------------------------------------------------


def _groups(keys: Sequence[np.ndarray], sums: Sequence[np.ndarray], steps: Sequence[int] | None = None
            ) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray]]:
    """Group rows by the key columns (sorted, the last key most significant): the distinct keys, the row count
    and each of `sums` summed per group (int64, exact). steps: a known stride of each key's values (a window
    start's is its window length), letting the counting path below take keys like that."""
    n = len(keys[0])
    if n == 0:
        return [k[:0] for k in keys], np.zeros(0, np.int64), [s[:0].astype(np.int64) for s in sums]
    counted = _counted_groups(keys, sums, steps or [1] * len(keys))
    if counted is not None:
        return counted
    order = np.lexsort(keys) if len(keys) > 1 else np.argsort(keys[0], kind="stable")
    ks = [k[order] for k in keys]
    change = np.zeros(n, bool)
    change[0] = True
    for k in ks:
        change[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, n)).astype(np.int64)
    return ([k[starts] for k in ks], counts,
            [np.add.reduceat(np.asarray(s, np.int64)[order], starts) for s in sums])


# The counting path's limits: cells of the dense key grid (16 M: 128 MB of counts), and per row.
_COUNT_CELLS = 1 << 24
_CELLS_PER_ROW = 4


def _counted_groups(keys: Sequence[np.ndarray], sums: Sequence[np.ndarray], steps: Sequence[int]
                    ) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray]] | None:
    """_groups by counting into the dense grid of key combinations when it is small (an extent-hour grid of a
    32 GiB disk over a day is 786 k cells for 25 M requests): two passes over the rows, where lexsort's ~4 s
    for 25 M rows moves them around memory, which two workers on one machine share. None when the grid is
    too large, a key is not on its stride, or a sum could reach 2^53 (bincount adds in float64)."""
    lows, spans = [], []
    for k, step in zip(keys, steps, strict=True):
        lo, hi = int(k.min()), int(k.max())
        if step != 1 and (lo % step or hi % step):
            return None
        lows.append(lo)
        spans.append((hi - lo) // step + 1)
    cells = math.prod(spans)
    if cells > _COUNT_CELLS or cells > _CELLS_PER_ROW * len(keys[0]):
        return None
    if any(int(np.abs(s).max(initial=0)) * len(s) >= 1 << 53 for s in sums):
        return None
    code = np.zeros(len(keys[0]), np.int64)
    for k, lo, span, step in zip(reversed(keys), reversed(lows), reversed(spans), reversed(steps), strict=True):
        code *= span
        code += (k - lo) // step if step != 1 else k - lo
    counts = np.bincount(code, minlength=cells)
    present = np.flatnonzero(counts)
    totals = [np.bincount(code, weights=s, minlength=cells)[present].astype(np.int64) for s in sums]
    out, rest = [], present.copy()
    for lo, span, step in zip(lows, spans, steps, strict=True):
        out.append((rest % span) * step + lo)
        rest //= span
    return out, counts[present].astype(np.int64), totals


def _window_start(ts: np.ndarray, window_us: int) -> np.ndarray:
    """heat.window_start on arrays (floor division, as idiv)."""
    return (ts // window_us) * window_us if window_us else np.zeros(len(ts), np.int64)


def _extent_table(device: str, p: HeatParams, w: int, start: np.ndarray, ext_id: np.ndarray, n: np.ndarray,
                  reads: np.ndarray, blk: np.ndarray, byt: np.ndarray) -> pa.Table:
    """extent_heat rows of window length w (trace_id left '') from the grouped arrays."""
    seconds = _window_seconds(w, p.span_us)
    m = len(n)
    heat = pa.array(blk / seconds) if seconds > 0 else pa.nulls(m, pa.float64())
    temperature = (pa.array(blk / seconds / float(p.extent_bytes // BLOCK_BYTES)) if seconds > 0
                   else pa.nulls(m, pa.float64()))
    return pa.table({
        "trace_id": pa.array([""] * m, pa.string()), "device": pa.array([device] * m, pa.string()),
        "extent_bytes": pa.array(np.full(m, p.extent_bytes, np.int64)), "extent_id": pa.array(ext_id),
        "window_start_us": pa.array(start), "window_us": pa.array(np.full(m, w, np.int64)),
        "requests": pa.array(n), "reads": pa.array(reads), "writes": pa.array(n - reads),
        "blocks": pa.array(blk), "bytes": pa.array(byt), "heat": heat, "temperature": temperature,
    }, schema=EH.ARROW_SCHEMA)


# The compiled pass's limits: the span of extent ids it marks (16 M: 80 MB of marks and numbers), and its grids'
# cells (4 M: 128 MB for the extents' four counts), at most 4 per request beyond a floor of 64 k.
_EXTENT_SPAN = 1 << 24
_GRID_CELLS = 1 << 22
_GRID_FLOOR = 1 << 16


def _grid_heat(col: dict[str, np.ndarray], read: np.ndarray, device: str, p: HeatParams
               ) -> tuple[dict[int, pa.Table], dict[str, Any]] | None:
    """device_heat by one compiled pass into dense grids (libs.transforms.heat_kernels); None when a grid
    would pass the limits above (or no request has a piece), for the array path."""
    from libs.transforms import heat_kernels as HK

    ts, seq, off, size = col["ts_us"], col["seq"], col["offset_bytes"], col["size_bytes"]
    if not len(ts):
        return None
    t_lo, t_hi, e_lo, e_hi = HK.extent_range(ts, off, size, p.extent_bytes)
    w = p.window_us
    w_lo, w_span = (t_lo // w, t_hi // w - t_lo // w + 1) if w else (0, 1)
    limit = min(_GRID_CELLS, max(_CELLS_PER_ROW * len(ts), _GRID_FLOOR))
    if e_lo > e_hi or e_hi - e_lo >= _EXTENT_SPAN or w_span * (1 + p.disks + p.width) > limit:
        return None
    number, ids = HK.touched_extents(off, size, p.extent_bytes, e_lo, e_hi - e_lo + 1)
    if len(ids) * w_span + w_span * (1 + p.disks + p.width) > limit:
        return None
    ext, traced, rand, striped = HK.device_grids(
        ts, seq, off, size, read, p.extent_bytes, number, e_lo, len(ids), w, w_lo, w_span, p.stripe_unit_bytes,
        p.width, p.disks, np.uint64(_device_state(p.seed, device)))
    del number

    def starts(window: np.ndarray, length: int) -> np.ndarray:
        return (w_lo + window) * length if length else np.zeros(len(window), np.int64)

    extent_rows = {}
    grid = ext.reshape(4, len(ids), w_span)
    for length in p.windows:                         # the window, then the whole trace: the windows summed
        g = grid if length == w else grid.sum(axis=2, keepdims=True)
        n = g[0].ravel()
        present = np.flatnonzero(n)
        k, j = np.divmod(present, g.shape[2])
        extent_rows[length] = _extent_table(device, p, length, starts(j, length), ids[k], n[present],
                                            *(g[x].ravel()[present] for x in (1, 2, 3)))

    def layout(cells: np.ndarray, per: int) -> tuple[np.ndarray, ...]:
        present = np.flatnonzero(cells[0])
        j, d = np.divmod(present, per)
        return starts(j, w), d, cells[0][present], cells[1][present]

    counts = {"end": int((off + size).max()), "as-traced": layout(traced, 1), "random": layout(rand, p.disks),
              "striped": layout(striped, p.width)}
    return extent_rows, counts


def device_heat(requests: pa.Table, device: str, p: HeatParams, *, grids: bool = True
                ) -> tuple[dict[int, pa.Table], dict[str, Any]]:
    """One device's requests (COLUMNS, any order) -> (window_us -> its extent_heat rows (trace_id left ''),
    the disk counts of window p.window_us: {"end", "as-traced", "striped", "random"}, each layout's
    (window_start_us, disk or unit residue, requests, blocks) arrays). grids: the compiled pass when its grids
    fit (_grid_heat), else (and with False) the array path below; both give the same arrays."""
    from libs.transforms.tracking_kernels import unit_pieces

    col = {c: np.ascontiguousarray(requests.column(c).to_numpy(), dtype=np.int64)
           for c in ("ts_us", "seq", "offset_bytes", "size_bytes")}
    op = requests.column("op")
    op = op.cast(pa.string()) if pa.types.is_dictionary(op.type) else op
    read = pc.equal(op, "R").to_numpy(zero_copy_only=False).astype(np.int64)
    counted = _grid_heat(col, read, device, p) if grids else None
    if counted is not None:
        return counted
    ts, off, size = col["ts_us"], col["offset_bytes"], col["size_bytes"]

    row, ext, nbytes, blocks = unit_pieces(off, size, p.extent_bytes)
    extent_rows = {}
    for w in p.windows:
        (start, ext_id), n, (reads, blk, byt) = _groups([_window_start(ts, w)[row], ext], [read[row], blocks, nbytes],
                                                        [w or 1, 1])
        extent_rows[w] = _extent_table(device, p, w, start, ext_id, n, reads, blk, byt)
    del row, ext, nbytes, blocks

    start = _window_start(ts, p.window_us)
    whole = (off + size + BLOCK_BYTES - 1) // BLOCK_BYTES - off // BLOCK_BYTES
    step = p.window_us or 1
    (w_t,), n_t, (b_t,) = _groups([start], [whole], [step])
    disk = spark_xxhash64_disk(p.seed, device, col["seq"], p.disks)
    (d_r, w_r), n_r, (b_r,) = _groups([disk, start], [whole], [1, step])
    row, unit, _, blocks = unit_pieces(off, size, p.stripe_unit_bytes)
    (d_s, w_s), n_s, (b_s,) = _groups([unit % p.width, start[row]], [blocks], [1, step])
    counts = {"end": int((off + size).max()) if len(off) else 0,
              "as-traced": (w_t, np.zeros(len(w_t), np.int64), n_t, b_t),
              "random": (w_r, d_r, n_r, b_r), "striped": (w_s, d_s, n_s, b_s)}
    return extent_rows, counts


# --- the tasks and the driver ---------------------------------------------------------------------------------


def _task(devices: list[tuple[str, list[str]]], targets: dict[int, TableTarget], trace_id: str,
          p: HeatParams) -> Callable[[Iterator[int]], Iterator[dict[str, Any]]]:
    """The function each task runs: its device's extent_heat rows written per window length; yields FILES rows
    (dicts) with "window_us", and one {"device", "counts"} row."""
    from libs.io.delta_files import FileWriter

    def run(ids: Iterator[int]) -> Iterator[dict[str, Any]]:
        for i in ids:
            device, paths = devices[i]
            table = read_files(paths, COLUMNS)
            rows, counts = device_heat(table, device, p)
            del table
            for w, part in rows.items():
                writer = FileWriter(targets[w])
                writer.write(part.set_column(0, "trace_id", pa.array([trace_id] * part.num_rows, pa.string())))
                for f in writer.close().to_pylist():
                    yield {**f, "window_us": w}
            yield {"device": device, "counts": counts}

    return run


def disk_counts(per_device: dict[str, dict[str, Any]], p: HeatParams
                ) -> tuple[pa.Table, dict[str, tuple[str, list[str]]]]:
    """The devices' counts (device_heat) -> heat.disk_heat_rows' input: (layout, window_start_us, disk,
    requests, blocks) per layout, window and disk, and each layout's (layout_params, disks)."""
    ends = {d: per_device[d]["end"] for d in sorted(per_device)}
    bases = _volume_bases(ends, p.stripe_unit_bytes)
    parts: list[pa.Table] = []
    names: dict[str, tuple[str, list[str]]] = {}
    for layout in LAYOUTS:
        if layout == "as-traced":
            names[layout] = ("", list(ends))
            for d in ends:
                w, _, n, b = per_device[d][layout]
                parts.append(pa.table({"layout": [layout] * len(w), "window_start_us": w, "disk": [d] * len(w),
                                       "requests": n, "blocks": b}))
            continue
        if layout == "striped":
            names[layout] = (f"unit_bytes={p.stripe_unit_bytes},width={p.width}", [str(k) for k in range(p.width)])
            shift = {d: (bases[d] // p.stripe_unit_bytes) % p.width for d in ends}
        else:
            names[layout] = (f"disks={p.disks},seed={p.seed}", [str(k) for k in range(p.disks)])
            shift = dict.fromkeys(ends, 0)
        modulus = p.width if layout == "striped" else p.disks
        w = np.concatenate([per_device[d][layout][0] for d in ends])
        disk = np.concatenate([(per_device[d][layout][1] + shift[d]) % modulus for d in ends])
        (d_k, w_k), _, (n, b) = _groups([disk, w], [np.concatenate([per_device[d][layout][k] for d in ends])
                                                    for k in (2, 3)])
        parts.append(pa.table({"layout": [layout] * len(w_k), "window_start_us": w_k,
                               "disk": pa.array([str(x) for x in d_k.tolist()], pa.string()), "requests": n,
                               "blocks": b}))
    return pa.concat_tables(parts), names


def extent_and_disk_heat(spark: SparkSession, warehouse: Path, trace_id: str, p: HeatParams
                         ) -> tuple[dict[int, int], pa.Table]:
    """Replaces the trace's extent_heat rows of p.extent_bytes for each window length of p.windows (one commit
    each) and returns (window_us -> rows written, the disk_heat rows of window p.window_us, not written).
    Unsupported when the requests files cannot be read directly."""
    from libs.io.delta_files import commit_replace, discard, table_target

    listed = request_files(spark, warehouse, trace_id)
    files = [(d, listed.files[d]) for d in listed.by_size()]                   # the largest first
    target = table_target(spark, warehouse, EH.TABLE)
    targets = {w: target.for_write() for w in p.windows}
    started = time.perf_counter()
    written: dict[int, int] = {}
    try:
        out = spark.sparkContext.parallelize(range(len(files)), len(files)).mapPartitions(
            _task(files, targets, trace_id, p)).collect()
        log.info("extent heat %s: %d devices counted in %.1f s", trace_id, len(files), time.perf_counter() - started)
        for w in p.windows:
            mine = [f for f in out if f.get("window_us") == w]
            where = {"trace_id": trace_id, "extent_bytes": p.extent_bytes, "window_us": w}
            commit_replace(spark, targets[w], where, mine)           # deletes this window's files if it fails
            written[w] = sum(int(f["rows"]) for f in mine)
    except BaseException:
        for w, t in targets.items():
            if w not in written:
                discard(t)
        raise
    per_disk, names = disk_counts({r["device"]: r["counts"] for r in out if "counts" in r}, p)
    return written, disk_heat_rows(per_disk, names, window_us=p.window_us, span_us=p.span_us)


# --- reference counts of one interval (aged_heat) -------------------------------------------------------------


def _interval_task(devices: list[tuple[str, list[str]]], extent_bytes: int, lo_us: int, hi_us: int
                   ) -> Callable[[Iterator[int]], Iterator[tuple[str, bytes, bytes]]]:
    def run(ids: Iterator[int]) -> Iterator[tuple[str, bytes, bytes]]:
        from libs.transforms.tracking_kernels import unit_pieces

        for i in ids:
            device, paths = devices[i]
            where = [("ts_us", ">=", lo_us), ("ts_us", "<", hi_us)]
            t = read_files(paths, ["offset_bytes", "size_bytes"], where)
            off, size = (np.ascontiguousarray(t.column(c).to_numpy(), np.int64) for c in ("offset_bytes", "size_bytes"))
            _, ext, _, _ = unit_pieces(off, size, extent_bytes)
            extent_id, count = np.unique(ext, return_counts=True)
            if len(extent_id):
                yield device, extent_id.astype(np.int64).tobytes(), count.astype(np.int64).tobytes()

    return run


def interval_counts(spark: SparkSession, warehouse: Path, trace_id: str, *, extent_bytes: int, interval_us: int,
                    interval_id: int) -> pa.Table:
    """heat.compute_interval_counts (device, extent_id, count: requests touching each extent in the interval)
    from the requests files, one task per device, as an Arrow table on the driver. Unsupported when the files
    cannot be read directly."""
    _check_unit("extent_bytes", extent_bytes)
    if interval_us <= 0:
        raise ValueError(f"interval_us must be > 0, got {interval_us}")
    listed = request_files(spark, warehouse, trace_id)
    files = [(d, listed.files[d]) for d in listed.by_size()]
    lo, hi = interval_id * interval_us, (interval_id + 1) * interval_us
    out = spark.sparkContext.parallelize(range(len(files)), len(files)).mapPartitions(
        _interval_task(files, extent_bytes, lo, hi)).collect()
    ids = [np.frombuffer(e, np.int64) for _, e, _ in out]
    return pa.table({"device": pa.array([d for d, e, _ in out for _ in range(len(e) // 8)], pa.string()),
                     "extent_id": pa.array(np.concatenate(ids) if ids else np.zeros(0, np.int64)),
                     "count": pa.array(np.concatenate([np.frombuffer(c, np.int64) for _, _, c in out]) if out
                                       else np.zeros(0, np.int64))})
