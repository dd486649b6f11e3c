"""Interarrival heat tracking resumed after an append, instead of tracked again over the whole trace.

A heat_tracking row at checkpoint j P sees the requests before it, and its true heat the blocks of [j P, (j + 1) P).
Up to S = (span // P) P every row is final once the trace has grown past its span (an append's requests come after
the trace's end). The state, kept per trace, extent size, aging period and k values under
<warehouse>/_state/heat_tracking/<trace_id>/, holds per device and extent what the tracker needs at S: the number of
requests before S and the last max(k) of them (ts_us, seq, blocks), with the requests version and the trace's files
it was made from. A resumed run reads only the requests from S on (the row groups whose ts range reaches there),
tracks them after each extent's stored requests (tracking_kernels.track with first_row_j and seen_before: the same
values as a full run), adds the rows of the checkpoints from S on in one commit (removing any a stopped run left
there) and writes the state at the new S. The full tracking runs instead (and writes the state) on the first run,
for other parameters, after a re-ingest, when the devices change, when requests changed before S (an overlapping
append) or the state's version is no longer in the log.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from blockheat.libs.io import storage
from blockheat.libs.io.delta_files import Append, FileWriter, commit_replace, discard
from blockheat.libs.io.tables import Location, table_target
from blockheat.libs.table_io.changes import (
    changes_since,
    footer_ranges,
    read_state_doc,
    replace_state_doc,
    requests_state,
    stored_files,
)
from blockheat.libs.table_io.device_pass import DeviceChunks, Output, Read, device_pass, trace_files
from blockheat.libs.table_io.tracking import COLUMNS, rows_of_pieces, sorted_pieces
from blockheat.libs.transforms.tracking import _check
from blockheat.libs.transforms.tracking_kernels import last_of_groups
from blockheat.schemas import heat_tracking as HT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

CHUNK_ROWS = 4_000_000     # requests a task holds at once: a device is read in parts of whole aging periods

HISTORY_SCHEMA = pa.schema([pa.field("extent_id", pa.int64()), pa.field("count", pa.int64()),
                            pa.field("ts_us", pa.int64()), pa.field("seq", pa.int64()), pa.field("blocks", pa.int64())])


@dataclass(frozen=True)
class TrackParams:
    """What a tracking state is for."""

    ks: tuple[int, ...]
    extent_bytes: int
    aging_period_us: int

    def folder(self, warehouse: Location, trace_id: str) -> str:
        name = f"{self.extent_bytes}-{self.aging_period_us}-{'_'.join(map(str, self.ks))}"
        return storage.join(storage.normalize(warehouse), "_state", "heat_tracking", trace_id, name)

    def start(self, span_us: int) -> int:
        """S: the first checkpoint a later run may still change."""
        return span_us // self.aging_period_us * self.aging_period_us


def history(ext: np.ndarray, ts: np.ndarray, seq: np.ndarray, blocks: np.ndarray, before: dict[int, int],
            until: int, keep: int) -> pa.Table:
    """HISTORY_SCHEMA rows of sorted pieces (extent, ts, seq): per extent its requests before `until` (plus
    before[extent] counted earlier) and the last `keep` of them."""
    if not (ts < until).all():
        mask = ts < until
        ext, ts, seq, blocks = ext[mask], ts[mask], seq[mask], blocks[mask]
    if not len(ext):
        return HISTORY_SCHEMA.empty_table()
    last, counts = last_of_groups(ext, keep)
    ext = ext[last]
    if before:
        first = np.flatnonzero(np.r_[True, ext[1:] != ext[:-1]])
        extra = np.array([before.get(int(e), 0) for e in ext[first]], np.int64)
        counts = counts + np.repeat(extra, np.diff(np.r_[first, len(ext)]))
    return pa.table({"extent_id": ext, "count": counts, "ts_us": ts[last], "seq": seq[last], "blocks": blocks[last]},
                    schema=HISTORY_SCHEMA)


def tracked(old: pa.Table, rows: pa.Table, p: TrackParams, *, first_j: int, last_j: int, until: int
            ) -> tuple[dict[int, pa.Table], pa.Table]:
    """Tracking of a device's requests `rows` (from first_j P on, any order) after the history `old` (HISTORY_SCHEMA:
    per extent the requests counted before first_j P and the last max(k) of them): the heat_tracking rows per k of
    checkpoints first_j .. last_j (trace_id and device left out; the same values as tracking every request), and the
    history at `until`."""
    ext, ts, seq, blocks = sorted_pieces(rows, p.extent_bytes)
    h = {c: old.column(c).to_numpy() for c in HISTORY_SCHEMA.names}
    ext = np.concatenate([h["extent_id"], ext])
    order = np.argsort(ext, kind="stable")                      # history first within each extent
    ext, ts, seq, blocks = (ext[order], np.concatenate([h["ts_us"], ts])[order],
                            np.concatenate([h["seq"], seq])[order], np.concatenate([h["blocks"], blocks])[order])
    counted = dict(zip(h["extent_id"].tolist(), h["count"].tolist(), strict=False))
    kept = dict(zip(*np.unique(h["extent_id"], return_counts=True), strict=True)) if len(old) else {}
    groups = ext[np.flatnonzero(np.r_[True, ext[1:] != ext[:-1]])] if len(ext) else ext
    before = np.array([counted.get(int(e), 0) - int(kept.get(e, 0)) for e in groups], np.int64)
    out = rows_of_pieces(ext, ts, blocks, ks=p.ks, extent_bytes=p.extent_bytes, aging_period_us=p.aging_period_us,
                         last_j=last_j, first_row_j=first_j, seen_before=before)
    earlier = {int(e): counted[int(e)] - int(kept[e]) for e in kept}
    return out, history(ext, ts, seq, blocks, earlier, until, max(p.ks))


def tracked_parts(old: pa.Table, parts: DeviceChunks | None, p: TrackParams, *, start: int | None, span_us: int
                  ) -> tuple[dict[int, pa.Table], pa.Table]:
    """tracked() over a device's requests from `start` (None: all) given in parts of whole aging periods
    (DeviceChunks' spans), each after the history the part before left: the rows per k of every checkpoint from
    `start` on, and the history at S. A task holds one part and the history (extents x max(k)), not the device."""
    period = p.aging_period_us
    last = span_us // period - 1
    out: dict[int, list[pa.Table]] = {k: [] for k in p.ks}
    empty = pa.table({c: pa.array([], pa.int64()) for c in COLUMNS})
    for (a, b), part in parts.with_spans() if parts is not None else [((start, None), empty)]:
        rows, old = tracked(old, part, p, first_j=0 if a is None else a // period,
                            last_j=last if b is None else b // period - 1, until=p.start(span_us) if b is None else b)
        for k, t in rows.items():
            out[k].append(t)
    return {k: pa.concat_tables(t) for k, t in out.items()}, old


def _write_history(folder: str, device: str, table: pa.Table) -> str:
    name = f"{quote(device, safe='')}-{uuid.uuid4().hex}.parquet"
    storage.makedirs(folder)
    fs, path = storage.filesystem(storage.join(folder, name))
    pq.write_table(table, path, filesystem=fs)
    return name


def _read_history(folder: str, name: str | None) -> pa.Table:
    if not name:
        return HISTORY_SCHEMA.empty_table()
    fs, path = storage.filesystem(storage.join(folder, name))
    return pq.read_table(path, filesystem=fs, schema=HISTORY_SCHEMA)


def save_state(warehouse: Location, trace_id: str, p: TrackParams, *, version: int, sha256: list[str], start: int,
               files: dict[str, str]) -> None:
    """The state document (one PUT or rename) naming each device's history file written by the tasks; the previous
    document's files are deleted after it."""
    doc = {"version": version, "sha256": sha256, "start": start, "files": files}
    replace_state_doc(storage.join(p.folder(warehouse, trace_id), "state.json"), doc,
                      lambda d: (d.get("files") or {}).values())


def forget_state(warehouse: Location, trace_id: str, p: TrackParams) -> None:
    """Drop the state: the next run tracks the whole trace."""
    path = storage.join(p.folder(warehouse, trace_id), "state.json")
    if storage.is_file(path):
        storage.delete(path)


def track_whole(spark: SparkSession, warehouse: Location, trace_id: str, p: TrackParams, *, span_us: int
                ) -> dict[int, int]:
    """The whole trace's heat_tracking rows of every k (libs.table_io.tracking's per-device passes: one device pass,
    every k's rows replaced, one commit per k), and the state at S: k -> rows written. Unsupported when the requests
    files cannot be read directly."""
    for k in p.ks:
        _check(k, p.aging_period_us)
    version, sha256 = requests_state(warehouse, trace_id)              # before the pass: what it reads
    folder = p.folder(warehouse, trace_id)
    target = table_target(spark, warehouse, HT.TABLE)
    outputs = {k: Output(target.for_write(), {"trace_id": trace_id, "k": k, "extent_bytes": p.extent_bytes,
                                              "aging_period_us": p.aging_period_us}) for k in p.ks}

    def rows_of(device: str, parts: DeviceChunks | None) -> tuple[dict[int, pa.Table], str]:
        rows, after = tracked_parts(HISTORY_SCHEMA.empty_table(), parts, p, start=None, span_us=span_us)
        name = _write_history(folder, device, after)
        return {k: _with_ids(t, trace_id, device) for k, t in rows.items()}, name

    read = Read(COLUMNS, chunk_rows=CHUNK_ROWS, align_us=p.aging_period_us, ordered=False)
    written = device_pass(spark, sorted(trace_files(spark, warehouse, trace_id).items()), rows_of, read=read,
                          outputs=outputs, label=f"heat tracking {trace_id}, k in {list(p.ks)}")
    save_state(warehouse, trace_id, p, version=version, sha256=sha256, start=p.start(span_us),
               files=dict(written.extras))
    return {k: written.rows[k] for k in p.ks}


def _with_ids(rows: pa.Table, trace_id: str, device: str) -> pa.Table:
    """A device's rows with the trace id and device, in the table's column order."""
    return (rows.append_column("trace_id", pa.repeat(pa.scalar(trace_id, pa.string()), rows.num_rows))
            .append_column("device", pa.repeat(pa.scalar(device, pa.string()), rows.num_rows)).select(list(HT.COLUMNS)))


def update_tracking(spark: SparkSession, warehouse: Location, trace_id: str, p: TrackParams, *, span_us: int,
                    devices: Sequence[str]) -> dict[int, int] | None:
    """Resume tracking from the state: the rows of the checkpoints from S on, per k (the counts added), or None
    when the whole trace must be tracked (nothing written)."""
    folder = p.folder(warehouse, trace_id)
    doc = read_state_doc(storage.join(folder, "state.json"))
    if doc is None:
        return None
    version, sha256 = requests_state(warehouse, trace_id)
    start = int(doc["start"])
    if set(doc["files"]) - set(devices):
        return None
    changed = changes_since(warehouse, trace_id, sha256, doc["sha256"], int(doc["version"]))
    if changed is False or (isinstance(changed, tuple) and changed[0] < start):
        log.info("heat tracking %s: requests changed before the resumable checkpoint: tracked whole", trace_id)
        return None
    period, new_start = p.aging_period_us, p.start(span_us)
    stored = dict(doc["files"])
    target = table_target(spark, warehouse, HT.TABLE).for_write()

    def resume(device: str, parts: DeviceChunks | None) -> tuple[dict[int, pa.Table], str]:
        out, after = tracked_parts(_read_history(folder, stored.get(device)), parts, p, start=start,
                                   span_us=span_us)
        name = _write_history(folder, device, after)
        return {k: _with_ids(t, trace_id, device) for k, t in out.items()}, name

    files = trace_files(spark, warehouse, trace_id)
    try:
        result = device_pass(spark, sorted(files.items()), lambda d, r: _written(resume(d, r), target),
                             read=Read(COLUMNS, chunk_rows=CHUNK_ROWS, align_us=period, ordered=False, start=start),
                             label=f"heat tracking {trace_id} from {start} us")
        written = [f for extra in result.extras.values() for f in extra["files"]]
        removes = _rows_from(target, trace_id, p, start)
        commit_replace(spark, target, Append({"trace_id": trace_id}, tuple(removes["paths"])),
                       [*written, *removes["rewritten"]])
    except BaseException:
        discard(target)
        raise
    save_state(warehouse, trace_id, p, version=version, sha256=sha256, start=new_start,
               files={d: extra["history"] for d, extra in result.extras.items()})
    counts = {k: 0 for k in p.ks}
    for extra in result.extras.values():
        for k, n in extra["rows"].items():
            counts[k] += n
    log.info("heat tracking %s: checkpoints from %d us tracked on from the stored state", trace_id, start)
    return counts


def _written(out: tuple[dict[int, pa.Table], str], target: Any) -> tuple[dict[int, pa.Table], dict[str, Any]]:
    """Task side: write the rows (their files are committed by the driver) and return what the driver needs."""
    tables, name = out
    writer = FileWriter(target)
    for t in tables.values():
        writer.write(t)
    rows = {k: t.num_rows for k, t in tables.items()}
    return {}, {"files": writer.close().to_pylist(), "history": name, "rows": rows}


def _rows_from(target: Any, trace_id: str, p: TrackParams, start: int) -> dict[str, list[Any]]:
    """The stored heat_tracking files of these parameters holding checkpoints from `start` on (left by a stopped
    run): their paths, and the files written again with their other rows."""
    paths = []
    columns = [f.name for f in HT.ARROW_SCHEMA if f.name not in HT.PARTITION_COLUMNS]
    writer = FileWriter(target)
    for add, path in stored_files(target, {"trace_id": trace_id}):
        if int(add["partitionValues"]["k"]) not in p.ks:
            continue
        if footer_ranges(path, ("checkpoint_us",))["checkpoint_us"][1] < start:
            continue
        fs, local = storage.filesystem(path)
        rows = pq.read_table(local, filesystem=fs, columns=columns)
        mine = pc.and_(pc.equal(rows["extent_bytes"], p.extent_bytes), pc.equal(rows["aging_period_us"],
                                                                                 p.aging_period_us))
        drop = pc.and_(mine, pc.greater_equal(rows["checkpoint_us"], start))
        if not pc.any(drop).as_py():
            continue
        paths.append(add["path"])
        rest = rows.filter(pc.invert(drop))
        n = rest.num_rows
        writer.write(rest.append_column("trace_id", pa.repeat(pa.scalar(trace_id, pa.string()), n))
                     .append_column("k", pa.array([int(add["partitionValues"]["k"])] * n, pa.int32())))
    rewritten = writer.close().to_pylist()
    return {"paths": paths, "rewritten": rewritten}
