"""Extent heat and disk heat straight from the `requests` table's Parquet files: the per-device form of
libs.transforms.heat (whose Spark SQL is the definition, and the fallback when the files cannot be read directly).

One Spark task per device reads that device's files (the Delta snapshot's list) in parts of whole windows, about
CHUNK_ROWS requests each (a device of any size: the task's memory follows the part), and for each part, in the
compiled passes of libs.transforms.heat_kernels:

- cuts the requests at extent boundaries, counts each (extent, window) and each extent over the whole trace, and
  writes both sets of extent_heat rows into the table itself (libs.io.delta_files);
- counts per window its requests and blocks as traced, per random disk (Spark's xxhash64 of (seed, device, seq)
  reproduced bit for bit), and its stripe-unit pieces per unit number modulo the stripe width; with the device's
  end, the driver shifts those by where the device starts in the striped volume (a stripe-unit multiple, so every
  piece keeps its blocks) and builds the disk_heat rows (heat.disk_heat_rows).

The parts' whole-trace counts are summed per extent and their disk counts per window and disk (device_heat_parts).
A device of more than CHUNK_ROWS requests holding more than its share of the session's cores is split by time into
spans of whole windows, one task each (pieces), so one hot device keeps every core busy: its tasks write their
windows' rows, and the driver sums their whole-trace rows and writes them. The driver commits one replace per
window length. Integer counts, so the rows equal the Spark SQL form's, heat and
temperature as the same double divisions.

    written, disks, counts = extent_and_disk_heat(spark, warehouse, "t1", HeatParams(span_us=span))
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from blockheat.libs.io.arrow_values import equal_mask
from blockheat.libs.io.connect import parallelism
from blockheat.libs.io.tables import table_target
from blockheat.libs.table_io.device_pass import (
    DeviceChunks,
    Output,
    Read,
    RequestFiles,
    Unsupported,
    device_pass,
    request_files,
    time_pieces,
)
from blockheat.libs.transforms import heat_kernels as HK
from blockheat.libs.transforms.heat import LAYOUTS, _check_unit, _volume_bases, _window_seconds, disk_heat_rows
from blockheat.libs.transforms.heat_kernels import BLOCK_BYTES
from blockheat.libs.transforms.tracking_kernels import unit_pieces
from blockheat.schemas import extent_heat as EH
from blockheat.schemas.requests import DEVICE_FILE_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = DEVICE_FILE_COLUMNS

__all__ = ["CHUNK_ROWS", "HeatParams", "Unsupported", "device_heat", "device_heat_parts", "disk_counts",
           "extent_and_disk_heat", "extent_table", "spark_xxhash64_disk"]


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


def spark_xxhash64_disk(seed: int, device: str, seq: np.ndarray, disks: int) -> np.ndarray:
    """pmod(xxhash64(seed, device, seq), disks) as Spark computes it (heat.compute_disk_heat's random layout)."""
    return HK.disks_of(HK.device_state(seed, device), np.ascontiguousarray(seq, np.int64), disks)


# --- one device ---------------------------------------------------------------------------------------------


def extent_table(device: str, p: HeatParams, w: int, start: np.ndarray, ext_id: np.ndarray, n: np.ndarray,
                  reads: np.ndarray, blk: np.ndarray, byt: np.ndarray) -> pa.Table:
    """extent_heat rows of window length w (trace_id left '') from the grouped arrays."""
    seconds = _window_seconds(w, p.span_us)
    m = len(n)
    heat = pa.array(blk / seconds) if seconds > 0 else pa.nulls(m, pa.float64())
    temperature = (pa.array(blk / seconds / float(p.extent_bytes // BLOCK_BYTES)) if seconds > 0
                   else pa.nulls(m, pa.float64()))
    return pa.table({
        "trace_id": pa.repeat(pa.scalar("", pa.string()), m), "device": pa.repeat(pa.scalar(device, pa.string()), m),
        "extent_bytes": pa.array(np.full(m, p.extent_bytes, np.int64)), "extent_id": pa.array(ext_id),
        "window_start_us": pa.array(start), "window_us": pa.array(np.full(m, w, np.int64)),
        "requests": pa.array(n), "reads": pa.array(reads), "writes": pa.array(n - reads),
        "blocks": pa.array(blk), "bytes": pa.array(byt), "heat": heat, "temperature": temperature,
    }, schema=EH.ARROW_SCHEMA)


# The compiled pass's limits: the span of extent ids it numbers by marks (16 M: 80 MB of marks and numbers; a wider
# range is numbered by binary search), the extent grid's cells per pass (4 M: 128 MB for the four counts; more
# windows take more passes), and the per-window layout grids' cells (a device with more is left to Spark SQL).
_EXTENT_SPAN = 1 << 24
_GRID_CELLS = 1 << 22
_LAYOUT_CELLS = 1 << 25


def device_heat(requests: pa.Table, device: str, p: HeatParams) -> tuple[dict[int, pa.Table], dict[str, Any]]:
    """One device's requests (COLUMNS, any order) -> (window_us -> its extent_heat rows (trace_id left ''),
    the disk counts of window p.window_us: {"end", "as-traced", "striped", "random"}, each layout's
    (window_start_us, disk or unit residue, requests, blocks) arrays), by the compiled passes of heat_kernels.
    Unsupported when the per-window layout grids would pass _LAYOUT_CELLS (windows far too short for the span)."""
    col = {c: np.ascontiguousarray(requests.column(c).to_numpy(), dtype=np.int64)
           for c in ("ts_us", "seq", "offset_bytes", "size_bytes")}
    read = equal_mask(requests.column("op"), "R").view(np.uint8)
    ts, off, size = col["ts_us"], col["offset_bytes"], col["size_bytes"]
    w = p.window_us
    if len(ts):
        t_lo, t_hi, e_lo, e_hi, pieces, ordered, end = HK.extent_range(ts, off, size, p.extent_bytes)
    else:
        t_lo = t_hi = e_lo = pieces = end = 0
        e_hi, ordered = -1, True
    w_lo, w_span = (t_lo // w, t_hi // w - t_lo // w + 1) if w else (0, 1)
    if w_span * (1 + p.disks + p.width) > _LAYOUT_CELLS:
        raise Unsupported(f"device {device}: {w_span:,} windows of {w} us, too many for one task's grids")
    if e_lo > e_hi:                                            # no request has a piece
        number, ids, e_lo = np.zeros(0, np.int32), np.zeros(0, np.int64), 0
    elif e_hi - e_lo < _EXTENT_SPAN:
        number, ids = HK.touched_extents(off, size, p.extent_bytes, e_lo, e_hi - e_lo + 1)
    else:
        number, ids = np.zeros(0, np.int32), HK.touched_extent_ids(off, size, p.extent_bytes)
    state = HK.device_state(p.seed, device)
    args = (ts, col["seq"], off, size, read, p.extent_bytes, number, ids, e_lo, w, w_lo, w_span)
    layout_args = (p.stripe_unit_bytes, p.width, p.disks, state)
    if ordered:                          # in time order (as the files hold it): one window's cells at a time
        cells, whole, *layouts = HK.ordered_device_cells(*args, *layout_args, pieces)
        windowed = [cells]
    else:                                # any order: dense grids of a range of windows per pass
        per_pass = max(1, min(w_span, _GRID_CELLS // max(1, len(ids))))
        windowed, whole, layouts = [], np.zeros((len(ids), 4), np.int64), []
        for first in range(0, w_span, per_pass):
            count = min(per_pass, w_span - first)
            ext, *grids = HK.device_grids(*args, first, count, first == 0, *layout_args)
            layouts = layouts or grids
            whole += ext.sum(axis=0)
            if w:
                windowed.append(HK.window_cells(ext, ids, w_lo + first, w))
    present = np.flatnonzero(whole[:, 0])
    extent_rows = {0: extent_table(device, p, 0, np.zeros(len(present), np.int64), ids[present],
                                    *whole[present].T)}
    if w:
        cells = windowed[0] if len(windowed) == 1 else np.concatenate(windowed, axis=1)
        extent_rows = {w: extent_table(device, p, w, *cells), **extent_rows}

    def starts(window: np.ndarray, length: int) -> np.ndarray:
        return (w_lo + window) * length if length else np.zeros(len(window), np.int64)

    def layout(cells: np.ndarray, per: int) -> tuple[np.ndarray, ...]:
        present = np.flatnonzero(cells[0])
        j, d = np.divmod(present, per)
        return starts(j, w), d, cells[0][present], cells[1][present]

    traced, rand, striped = layouts
    counts = {"end": int(end), "as-traced": layout(traced, 1),
              "random": layout(rand, p.disks), "striped": layout(striped, p.width)}
    return extent_rows, counts


CHUNK_ROWS = 4_000_000     # requests a part holds, about (whole windows each): ~100 bytes each in the passes


def device_heat_parts(parts: Iterable[pa.Table], device: str, p: HeatParams
                      ) -> tuple[dict[int, pa.Table], dict[str, Any]]:
    """device_heat over a device's requests given in parts of whole windows of p.window_us (DeviceChunks), the same
    result: each part's window rows as they are, the whole trace's rows summed per extent over the parts, the
    disk counts summed per window and disk."""
    found = [device_heat(part, device, p) for part in parts]
    if len(found) == 1:
        return found[0]
    if not found:
        return device_heat(pa.table({c: pa.array([], pa.int64()) for c in COLUMNS if c != "op"}
                                    | {"op": pa.array([], pa.string())}), device, p)
    rows: dict[int, pa.Table] = {}
    if p.window_us:
        rows[p.window_us] = pa.concat_tables([r[p.window_us] for r, _ in found])
    rows[0] = whole_rows(device, p, [r[0] for r, _ in found])
    return {w: rows[w] for w in p.windows}, merged_counts([c for _, c in found])


def whole_rows(device: str, p: HeatParams, parts: Sequence[pa.Table]) -> pa.Table:
    """The whole trace's extent_heat rows of a device from its parts' whole-trace rows (summed per extent)."""
    summed = pa.concat_tables(parts).group_by("extent_id").aggregate(
        [(c, "sum") for c in ("requests", "reads", "blocks", "bytes")]).sort_by("extent_id")
    n = summed["requests_sum"].to_numpy()
    return extent_table(device, p, 0, np.zeros(len(n), np.int64), summed["extent_id"].to_numpy(), n,
                        *(summed[f"{c}_sum"].to_numpy() for c in ("reads", "blocks", "bytes")))


def merged_counts(found: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One device's disk counts (device_heat's) from its parts' (the end the largest, cells summed per window and
    disk)."""
    counts: dict[str, Any] = {"end": max(c["end"] for c in found)}
    for layout in LAYOUTS:
        w, d, n, b = (np.concatenate([c[layout][i] for c in found]) for i in range(4))
        table = pa.table({"w": w, "d": d, "n": n, "b": b}).group_by(["w", "d"]).aggregate(
            [("n", "sum"), ("b", "sum")]).sort_by([("w", "ascending"), ("d", "ascending")])
        counts[layout] = tuple(table[c].to_numpy() for c in ("w", "d", "n_sum", "b_sum"))
    return counts


def pieces(listed: RequestFiles, tasks: int, align_us: int, start: int | None = None, stop: int | None = None
           ) -> list[tuple[str, str, tuple[int | None, int | None]]]:
    """device_pass.time_pieces over CHUNK_ROWS parts of whole windows of align_us (0: no windows, a device one
    task)."""
    return time_pieces(listed, tasks if align_us else 1, CHUNK_ROWS, align_us, start, stop)


# --- the driver ------------------------------------------------------------------------------------------


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
        summed = pa.table({
            "window_start_us": np.concatenate([per_device[d][layout][0] for d in ends]),
            "disk": np.concatenate([(per_device[d][layout][1] + shift[d]) % modulus for d in ends]),
            "requests": np.concatenate([per_device[d][layout][2] for d in ends]),
            "blocks": np.concatenate([per_device[d][layout][3] for d in ends]),
        }).group_by(["window_start_us", "disk"]).aggregate([("requests", "sum"), ("blocks", "sum")])
        parts.append(pa.table({"layout": [layout] * summed.num_rows, "window_start_us": summed["window_start_us"],
                               "disk": pc.cast(summed["disk"], pa.string()), "requests": summed["requests_sum"],
                               "blocks": summed["blocks_sum"]}))
    return pa.concat_tables(parts), names


def extent_and_disk_heat(spark: SparkSession, warehouse: Path, trace_id: str, p: HeatParams
                         ) -> tuple[dict[int, int], pa.Table, dict[str, Any]]:
    """Replaces the trace's extent_heat rows of p.extent_bytes for each window length of p.windows (one commit
    each) and returns (window_us -> rows written, the disk_heat rows of window p.window_us, not written, and each
    device's counts as device_heat gives them, with "whole": its whole-trace rows' extent ids, requests, reads,
    blocks and bytes).
    Unsupported when the requests files cannot be read directly, or a device has more windows than one task's
    grids hold."""
    listed = request_files(spark, warehouse, trace_id)
    windows = listed.last_us // p.window_us + 1 if p.window_us else 1
    if windows * (1 + p.disks + p.width) > _LAYOUT_CELLS:
        raise Unsupported(f"{windows:,} windows of {p.window_us} us, too many for one task's grids")
    target = table_target(spark, warehouse, EH.TABLE)
    outputs = {w: Output(target.for_write(), {"trace_id": trace_id, "extent_bytes": p.extent_bytes, "window_us": w})
               for w in p.windows}

    tasks = pieces(listed, parallelism(spark), p.window_us)
    of_task = {name: (device, span) for name, device, span in tasks}
    split = {device for name, device, _ in tasks if name != device}

    def keyed(t: pa.Table) -> pa.Table:
        return t.set_column(0, "trace_id", pa.repeat(pa.scalar(trace_id, pa.string()), t.num_rows))

    def heat_of(name: str, parts: DeviceChunks) -> tuple[dict[int, pa.Table], dict[str, Any]]:
        device, span = of_task[name]
        rows, counts = device_heat_parts(parts.reread(COLUMNS, *span) if device in split else parts, device, p)
        if device in split:
            counts["rows"] = rows[0]                 # a part of the whole-trace rows: summed by the driver
        else:                                        # its counts, for the update after an append (heat_update)
            counts["whole"] = _whole_counts(rows[0])
        return {w: keyed(t) for w, t in rows.items() if device not in split or w != 0}, counts

    wholes: dict[str, pa.Table] = {}

    def whole_of_split(extras: dict[str, Any]) -> dict[int, pa.Table]:
        """The split devices' whole-trace rows, their pieces' summed (written by the driver)."""
        for d in sorted(split):
            wholes[d] = whole_rows(d, p, [extras[name].pop("rows") for name, dev, _ in tasks if dev == d])
        return {0: pa.concat_tables([keyed(wholes[d]) for d in sorted(split)])} if split else {}

    read = Read(COLUMNS, chunk_rows=CHUNK_ROWS, align_us=p.window_us, ordered=False)
    out = device_pass(spark, [(name, listed.files[device]) for name, device, _ in tasks], heat_of, read=read,
                      outputs=outputs, label=f"extent heat {trace_id}", driver_rows=whole_of_split)
    per_device: dict[str, dict[str, Any]] = {}
    for device in listed.files:
        of_device = [out.extras[name] for name, d, _ in tasks if d == device]
        if device in split:
            per_device[device] = {**merged_counts(of_device), "whole": _whole_counts(wholes[device])}
        else:
            per_device[device] = of_device[0]
    per_disk, names = disk_counts(per_device, p)
    return dict(out.rows), disk_heat_rows(per_disk, names, window_us=p.window_us, span_us=p.span_us), per_device


def _whole_counts(whole: pa.Table) -> tuple[np.ndarray, ...]:
    """A device's whole-trace rows' counts (what libs.table_io.heat_update keeps after an append)."""
    return tuple(whole[c].to_numpy() for c in ("extent_id", "requests", "reads", "blocks", "bytes"))


# --- reference counts of one interval (aged_heat) -------------------------------------------------------------


def interval_counts(spark: SparkSession, warehouse: Path, trace_id: str, *, extent_bytes: int, interval_us: int,
                    interval_id: int) -> pa.Table:
    """heat.compute_interval_counts (device, extent_id, count: requests touching each extent in the interval)
    from the requests files, one task per device, as an Arrow table on the driver. Unsupported when the files
    cannot be read directly."""
    _check_unit("extent_bytes", extent_bytes)
    if interval_us <= 0:
        raise ValueError(f"interval_us must be > 0, got {interval_us}")
    lo, hi = interval_id * interval_us, (interval_id + 1) * interval_us

    def counts_of(_device: str, parts: Iterable[pa.Table]
                  ) -> tuple[dict[int, pa.Table], tuple[np.ndarray, np.ndarray]]:
        extent_id, count = np.zeros(0, np.int64), np.zeros(0, np.int64)
        for part in parts:
            part = part.filter(pc.less(part["ts_us"], hi))
            off, size = (np.ascontiguousarray(part.column(c).to_numpy(), np.int64)
                         for c in ("offset_bytes", "size_bytes"))
            _, ext, _, _ = unit_pieces(off, size, extent_bytes)
            ids, n = np.unique(ext, return_counts=True)
            extent_id, at = np.unique(np.concatenate([extent_id, ids]), return_inverse=True)
            count = np.bincount(at, np.concatenate([count, n]), len(extent_id)).astype(np.int64)
        return {}, (extent_id.astype(np.int64), count)

    read = Read(["offset_bytes", "size_bytes", "ts_us"], chunk_rows=CHUNK_ROWS, ordered=False, start=lo)
    counted = device_pass(spark, request_files(spark, warehouse, trace_id).by_size_items(), counts_of, read=read,
                          label=f"interval counts {trace_id}").extras
    return pa.table({"device": pa.array([d for d, (e, _) in counted.items() for _ in range(len(e))], pa.string()),
                     "extent_id": pa.array(np.concatenate([e for e, _ in counted.values()]) if counted
                                           else np.zeros(0, np.int64)),
                     "count": pa.array(np.concatenate([c for _, c in counted.values()]) if counted
                                       else np.zeros(0, np.int64))})
