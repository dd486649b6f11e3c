"""Extent and disk heat brought up to date after an append, instead of computed again over the whole trace.

A window's rows depend only on the requests in that window (its heat divides by the window's length, libs.transforms
.heat), so after new requests only the windows that the changed `requests` files span (added or removed since the
state's version: an append's files, the files an overlapping append re-sorted) are computed again, from the
requests in them (the row groups whose ts range meets them). What the rest needs is the state, kept per trace and
parameters under <warehouse>/_state/extent_heat/<trace_id>/: the requests version and the trace's files (SHA-256s)
it was computed from, each device's end, and each device's layout counts per window before the striped volume's
shift (what device_heat returns). From them:
- extent_heat: the changed windows' rows replace the stored ones (files wholly inside the windows are removed,
  files partly inside written again without them); the whole-trace rows are summed again from every stored window
  row (they divide by the new span);
- disk_heat: every window's rows are built again from the state's counts (a device's place in the striped volume
  moves when an earlier device's end grows), the whole-trace rows from them.
Both tables change in one journal decision (libs.io.journal); the state is written after it, so a run stopped
between the two computes the same windows again next time. The full computation runs instead (and writes the state)
when there is no usable state: the first run, other parameters, the trace ingested again (its files are not the
state's files followed by new ones), another set of devices, a state version the log no longer holds, or
window_us = 0 (the whole trace only).
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from blockheat.libs.io import journal, storage
from blockheat.libs.io.connect import parallelism
from blockheat.libs.io.delta_files import Append, FileWriter, PendingWrite, discard
from blockheat.libs.io.tables import Location, table_target
from blockheat.libs.table_io.changes import (
    changes_since,
    footer_ranges,
    read_state_doc,
    replace_state_doc,
    requests_state,
    stored_files,
)
from blockheat.libs.table_io.device_pass import DeviceChunks, Read, device_pass, request_files
from blockheat.libs.table_io.heat import (
    CHUNK_ROWS,
    COLUMNS,
    HeatParams,
    device_heat_parts,
    disk_counts,
    extent_table,
    merged_counts,
    pieces,
)
from blockheat.libs.transforms.heat import LAYOUTS, disk_heat_rows, whole_trace_disk_table
from blockheat.schemas import disk_heat as DH
from blockheat.schemas import extent_heat as EH

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

STATE_DIR = ("_state", "extent_heat")
COUNTS_SCHEMA = pa.schema([pa.field("device", pa.string()), pa.field("layout", pa.string()),
                           pa.field("window_start_us", pa.int64()), pa.field("disk", pa.int64()),
                           pa.field("requests", pa.int64()), pa.field("blocks", pa.int64())])
WHOLE_SCHEMA = pa.schema([pa.field("device", pa.string()), pa.field("extent_id", pa.int64()),
                          pa.field("requests", pa.int64()), pa.field("reads", pa.int64()),
                          pa.field("blocks", pa.int64()), pa.field("bytes", pa.int64())])


def _key(p: HeatParams) -> dict[str, int]:
    """The parameters a state holds for (the span changes with the trace)."""
    return {k: v for k, v in asdict(p).items() if k != "span_us"}


def _folder(warehouse: Location, trace_id: str) -> str:
    return storage.join(storage.normalize(warehouse), *STATE_DIR, trace_id)


@dataclass(frozen=True)
class HeatState:
    """What extent and disk heat were last computed from, and the per-device counts disk heat is built from."""

    version: int                                  # the requests table's version
    sha256: list[str]                             # the trace's files, in order
    devices: list[str]
    ends: dict[str, int]
    counts: pa.Table                              # COUNTS_SCHEMA: per device, layout, window and unshifted disk
    whole: pa.Table                               # WHOLE_SCHEMA: the whole-trace extent rows' counts
    window_rows: int                              # extent_heat rows of the window length

    def save(self, warehouse: Location, trace_id: str, p: HeatParams) -> None:
        """Write the counts (new files), then the document naming them (one PUT or rename): a reader sees the old
        state or the new one."""
        folder = _folder(warehouse, trace_id)
        storage.makedirs(folder)
        names = {}
        for kind, table in (("counts", self.counts), ("whole", self.whole)):
            names[kind] = f"{kind}-{uuid.uuid4().hex}.parquet"
            storage.write_parquet(storage.join(folder, names[kind]), table)
        doc = {"params": _key(p), "version": self.version, "sha256": self.sha256, "devices": self.devices,
               "ends": self.ends, "window_rows": self.window_rows, **names}
        replace_state_doc(storage.join(folder, f"{p.extent_bytes}-{p.window_us}.json"), doc,
                          lambda d: [d[k] for k in ("counts", "whole") if d.get(k)])

    @classmethod
    def load(cls, warehouse: Location, trace_id: str, p: HeatParams) -> HeatState | None:
        """The state for these parameters (None when there is none, or it is for others or unreadable)."""
        folder = _folder(warehouse, trace_id)
        doc = read_state_doc(storage.join(folder, f"{p.extent_bytes}-{p.window_us}.json"))
        if not doc or doc.get("params") != _key(p):
            return None
        try:
            tables = {}
            for kind, schema in (("counts", COUNTS_SCHEMA), ("whole", WHOLE_SCHEMA)):
                fs, path = storage.filesystem(storage.join(folder, doc[kind]))
                tables[kind] = pq.read_table(path, filesystem=fs, schema=schema)
            window_rows = int(doc["window_rows"])
        except (OSError, KeyError, pa.ArrowException):
            return None
        return cls(int(doc["version"]), list(doc["sha256"]), list(doc["devices"]),
                   {d: int(e) for d, e in doc["ends"].items()}, tables["counts"], tables["whole"], window_rows)


def forget_state(warehouse: Location, trace_id: str, p: HeatParams) -> None:
    """Drop the state (after the tables were written another way: the next run computes them whole)."""
    path = storage.join(_folder(warehouse, trace_id), f"{p.extent_bytes}-{p.window_us}.json")
    if storage.is_file(path):
        storage.delete(path)


def counts_table(per_device: Mapping[str, Mapping[str, Any]]) -> pa.Table:
    """device_heat's layout counts of every device as COUNTS_SCHEMA rows."""
    parts = [COUNTS_SCHEMA.empty_table()]
    for device in sorted(per_device):
        for layout in LAYOUTS:
            w, d, n, b = per_device[device][layout]
            parts.append(pa.table({"device": pa.repeat(pa.scalar(device, pa.string()), len(w)),
                                   "layout": pa.repeat(pa.scalar(layout, pa.string()), len(w)),
                                   "window_start_us": pa.array(np.asarray(w, np.int64)),
                                   "disk": pa.array(np.asarray(d, np.int64)), "requests": pa.array(np.asarray(n)),
                                   "blocks": pa.array(np.asarray(b))}, schema=COUNTS_SCHEMA))
    return pa.concat_tables(parts)


def whole_table(per_device: Mapping[str, Mapping[str, Any]]) -> pa.Table:
    """The whole-trace extent counts device_heat's callers keep ("whole": extent ids and their requests, reads,
    blocks and bytes) of every device as WHOLE_SCHEMA rows."""
    parts = [WHOLE_SCHEMA.empty_table()]
    for device in sorted(per_device):
        cols = per_device[device]["whole"]
        parts.append(pa.table({"device": pa.repeat(pa.scalar(device, pa.string()), len(cols[0])),
                               **{c: pa.array(np.asarray(v, np.int64)) for c, v in zip(WHOLE_SCHEMA.names[1:], cols,
                                                                                     strict=True)}},
                              schema=WHOLE_SCHEMA))
    return pa.concat_tables(parts)


def per_device_counts(counts: pa.Table, ends: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """COUNTS_SCHEMA rows back into device_heat's form (cells in window, disk order), with each device's end."""
    col = {c: counts.column(c).to_numpy(zero_copy_only=False) for c in COUNTS_SCHEMA.names}
    out: dict[str, dict[str, Any]] = {}
    for device in sorted(ends):
        entry: dict[str, Any] = {"end": ends[device]}
        for layout in LAYOUTS:
            mine = np.flatnonzero((col["device"] == device) & (col["layout"] == layout))
            mine = mine[np.lexsort((col["disk"][mine], col["window_start_us"][mine]))]
            entry[layout] = tuple(np.ascontiguousarray(col[c][mine], np.int64)
                                  for c in ("window_start_us", "disk", "requests", "blocks"))
        out[device] = entry
    return out


def update_heat(spark: SparkSession, warehouse: Location, trace_id: str, p: HeatParams, devices: Sequence[str]
                ) -> dict[str, int] | None:
    """Bring extent_heat (window p.window_us and the whole trace) and disk_heat up to date from the state; the rows
    written per table and window, or None when the full computation must run instead (nothing written). Raises
    Unsupported (libs.table_io.device_pass) when the requests files cannot be read directly."""
    state = HeatState.load(warehouse, trace_id, p)
    w = p.window_us
    if state is None or not w:
        return None
    version, sha256 = requests_state(warehouse, trace_id)
    span = changes_since(warehouse, trace_id, sha256, state.sha256, state.version)
    if span is False or sorted(devices) != state.devices:
        log.info("extent heat %s: the trace was ingested again, its devices changed or its log cannot tell: "
                 "computed whole", trace_id)
        return None
    if span is None:
        lo, hi = 0, -1                                     # nothing new: the span and the state are written again
    else:
        assert isinstance(span, tuple)
        lo, hi = span[0] // w * w, (span[1] // w + 1) * w
    listed = request_files(spark, warehouse, trace_id)
    first_us = min((g.lo for groups in listed.groups.values() for g in groups), default=0)
    if hi > lo and lo <= first_us and hi > listed.last_us:
        # Every window changed (a trace ingested again): the full computation, which holds a device part at a time,
        # where the update would hold the stored rows it replaces and the new ones (10 M each: 9.7 GiB).
        log.info("extent heat %s: every window changed: computed whole", trace_id)
        return None
    tasks = pieces(listed, parallelism(spark), w, lo, hi) if hi > lo else []
    of_task = {name: (device, span) for name, device, span in tasks}

    def heat_of(name: str, parts: DeviceChunks) -> tuple[dict[int, pa.Table], Any]:
        device, span = of_task[name]
        extent_rows, counts = device_heat_parts(parts.reread(COLUMNS, *span), device, p)
        return {}, (extent_rows[w], counts)

    read = Read(COLUMNS, chunk_rows=CHUNK_ROWS, align_us=w, ordered=False)
    out = (device_pass(spark, [(name, listed.files[device]) for name, device, _ in tasks], heat_of, read=read,
                       label=f"extent heat {trace_id}, windows {lo}-{hi} us") if tasks else None)
    fresh: dict[str, tuple[pa.Table, dict[str, Any]]] = {}
    for device in listed.files if out else ():
        found = [out.extras[name] for name, d, _ in tasks if d == device]
        fresh[device] = found[0] if len(found) == 1 else \
            (pa.concat_tables([rows for rows, _ in found]), merged_counts([c for _, c in found]))
    new_end = {d: int(c["end"]) for d, (_, c) in fresh.items()}
    if lo <= 0 and hi > listed.last_us:                    # every window again (a re-ingest): the ends as they are
        ends = {d: new_end.get(d, 0) for d in state.devices}
    else:
        ends = {d: max(state.ends.get(d, 0), new_end.get(d, 0)) for d in state.devices}
    kept = state.counts.filter(pc.or_(pc.less(state.counts["window_start_us"], lo),
                                      pc.greater_equal(state.counts["window_start_us"], hi)))
    counts = pa.concat_tables([kept, counts_table({d: c for d, (_, c) in fresh.items()})])
    new_windows = pa.concat_tables([EH.ARROW_SCHEMA.empty_table(), *(t for t, _ in fresh.values())])
    new_windows = _with_trace(new_windows, trace_id, EH.ARROW_SCHEMA)

    written, whole, window_rows = _commit(spark, warehouse, trace_id, p, lo, hi, new_windows,
                                          per_device_counts(counts, ends), state)
    HeatState(version, sha256, state.devices, ends, counts, whole, window_rows).save(warehouse, trace_id, p)
    log.info("extent heat %s: windows [%d, %d) us computed again, the rest kept", trace_id, lo, hi)
    return written


def _commit(spark: SparkSession, warehouse: Location, trace_id: str, p: HeatParams, lo: int, hi: int,
            new_windows: pa.Table, per_device: dict[str, dict[str, Any]], state: HeatState
            ) -> tuple[dict[str, int], pa.Table, int]:
    """One journal decision: extent_heat's changed windows and whole-trace rows, disk_heat's window and whole-trace
    rows. Returns the rows per window length, and the whole-trace counts and window rows for the next state."""
    w = p.window_us
    eh = table_target(spark, warehouse, EH.TABLE).for_write()
    dh = table_target(spark, warehouse, DH.TABLE).for_write()
    try:
        # extent_heat: the stored window rows in [lo, hi) are replaced (a file partly inside is written again
        # without the rows inside; a file whose footer puts it outside is not read), the whole-trace rows are the
        # state's counts less the replaced rows' plus the new rows'.
        removes: list[str] = []
        replaced: list[pa.Table] = []           # the stored window rows in [lo, hi)
        rewrite: list[pa.Table] = []            # rows of removed files that stay: written again
        columns = [f.name for f in EH.ARROW_SCHEMA if f.name not in EH.PARTITION_COLUMNS]
        for add, path in stored_files(eh, {"trace_id": trace_id, "extent_bytes": str(p.extent_bytes)}):
            ranges = footer_ranges(path, ("window_us", "window_start_us"))
            low, high = ranges["window_us"]
            first, last = ranges["window_start_us"]
            whole_rows, window_rows = low <= 0 <= high, low <= w <= high and first < hi and last >= lo
            if not (whole_rows or window_rows):
                continue                                       # other window lengths, or windows outside [lo, hi)
            fs, local = storage.filesystem(path)
            rows = pq.read_table(local, filesystem=fs, columns=columns)
            length, starts = rows["window_us"], rows["window_start_us"]
            inside = pc.and_(pc.greater_equal(starts, lo), pc.less(starts, hi))
            replaced.append(rows.filter(pc.and_(pc.equal(length, w), inside)))
            removes.append(add["path"])
            rewrite += [rows.filter(pc.and_(pc.equal(length, w), pc.invert(inside))),
                        rows.filter(pc.and_(pc.not_equal(length, w), pc.not_equal(length, 0)))]
        writer = FileWriter(eh)
        for t in rewrite:
            if t.num_rows:
                writer.write(_stamp(t, trace_id, p.extent_bytes))
        writer.write(new_windows)
        eh_files = writer.close().to_pylist()
        gone = pa.concat_tables([_stamp(t, trace_id, p.extent_bytes) for t in replaced] or
                                [EH.ARROW_SCHEMA.empty_table()])
        counts = _whole_counts(state.whole, gone, new_windows)
        window_rows = state.window_rows - gone.num_rows + new_windows.num_rows
        whole = _whole_extent_rows(counts, trace_id, p)
        writer = FileWriter(eh)                                # the whole-trace rows in files of their own
        writer.write(whole)
        eh_files += writer.close().to_pylist()
        # disk_heat: every window from the state's counts, and the whole trace.
        per_disk, names = disk_counts(per_device, p)
        windows = disk_heat_rows(per_disk, names, window_us=w, span_us=p.span_us)
        whole_disk = whole_trace_disk_table(windows, span_us=p.span_us)
        rows = pa.concat_tables([windows, whole_disk])
        rows = _with_trace(rows, trace_id, DH.ARROW_SCHEMA)
        dh_removes, dh_kept = [], []
        for add, path in stored_files(dh, {"trace_id": trace_id}):
            low, high = footer_ranges(path, ("window_us",))["window_us"]
            if low <= 0 <= high or low <= w <= high:
                dh_removes.append(add["path"])
                fs, local = storage.filesystem(path)
                other = pq.read_table(local, filesystem=fs,
                                      columns=[c for c in DH.ARROW_SCHEMA.names if c not in DH.PARTITION_COLUMNS])
                length = other["window_us"]
                other = other.filter(pc.and_(pc.not_equal(length, w), pc.not_equal(length, 0)))
                dh_kept.append(other.append_column("layout", pa.array([add["partitionValues"]["layout"]]
                                                                      * other.num_rows, pa.string())))
        writer = FileWriter(dh)
        writer.write(rows)
        for t in dh_kept:
            if t.num_rows:
                writer.write(t.append_column("trace_id", pa.repeat(pa.scalar(trace_id, pa.string()), t.num_rows)))
        dh_files = writer.close().to_pylist()
    except BaseException:
        discard(eh)
        discard(dh)
        raise
    scope = {"trace_id": trace_id}
    pending = [PendingWrite({EH.TABLE: (eh, Append({**scope, "extent_bytes": p.extent_bytes}, tuple(removes)))},
                            [{**f, "table": EH.TABLE} for f in eh_files], []),
               PendingWrite({DH.TABLE: (dh, Append(scope, tuple(dh_removes)))},
                            [{**f, "table": DH.TABLE} for f in dh_files], [])]
    journal.commit(warehouse, pending, f"the heat update of trace {trace_id}")
    return ({f"extent_heat window_us={w}": window_rows, "extent_heat window_us=0": whole.num_rows}, counts,
            window_rows)


def _whole_counts(before: pa.Table, gone: pa.Table, new: pa.Table) -> pa.Table:
    """WHOLE_SCHEMA counts: `before` less the replaced window rows `gone` plus the `new` window rows, per device and
    extent (extents left without requests dropped)."""
    def signed(rows: pa.Table, sign: int) -> pa.Table:
        return pa.table({"device": rows["device"].cast(pa.string()), "extent_id": rows["extent_id"],
                         **{c: pc.multiply(rows[c], sign) for c in WHOLE_SCHEMA.names[2:]}}, schema=WHOLE_SCHEMA)

    summed = pa.concat_tables([before, signed(gone, -1), signed(new, 1)]).group_by(
        ["device", "extent_id"], use_threads=False).aggregate([(c, "sum") for c in WHOLE_SCHEMA.names[2:]])
    summed = pa.table({"device": summed["device"], "extent_id": summed["extent_id"],
                       **{c: summed[f"{c}_sum"] for c in WHOLE_SCHEMA.names[2:]}}, schema=WHOLE_SCHEMA)
    return summed.filter(pc.greater(summed["requests"], 0))


def _with_trace(rows: pa.Table, trace_id: str, schema: pa.Schema) -> pa.Table:
    """Rows whose first column is the trace id (left '' by the builders), set, in the table's schema."""
    return rows.set_column(0, "trace_id", pa.repeat(pa.scalar(trace_id, pa.string()), rows.num_rows)).cast(schema)


def _stamp(rows: pa.Table, trace_id: str, extent_bytes: int) -> pa.Table:
    """Stored rows (without the partition columns) with them, in the table's column order."""
    n = rows.num_rows
    if "trace_id" in rows.column_names:
        return rows
    cols = {"trace_id": pa.repeat(pa.scalar(trace_id, pa.string()), n),
            "extent_bytes": pa.array(np.full(n, extent_bytes, np.int64))}
    return pa.table({f.name: cols[f.name] if f.name in cols else rows[f.name] for f in EH.ARROW_SCHEMA},
                    schema=EH.ARROW_SCHEMA)


def _whole_extent_rows(counts: pa.Table, trace_id: str, p: HeatParams) -> pa.Table:
    """The whole-trace extent_heat rows from their counts (WHOLE_SCHEMA; the full computation's integers, heat and
    temperature by the same divisions)."""
    parts = [EH.ARROW_SCHEMA.empty_table()]
    device_col = counts["device"].to_numpy(zero_copy_only=False)
    for device in sorted(set(device_col.tolist())):
        mine = np.flatnonzero(device_col == device)
        ids = counts["extent_id"].to_numpy()[mine]
        order = np.argsort(ids)
        pick = mine[order]
        t = extent_table(device, p, 0, np.zeros(len(pick), np.int64), ids[order],
                          *(counts[c].to_numpy()[pick] for c in ("requests", "reads", "blocks", "bytes")))
        parts.append(_with_trace(t, trace_id, EH.ARROW_SCHEMA))
    return pa.concat_tables(parts)
