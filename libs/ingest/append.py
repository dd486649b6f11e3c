"""Append ingest (`blockheat ingest --append`): what a batch of new files continues, what refuses it, and the
catalog row after it.

A batch continues its trace: seq numbers go on from the trace's records read, and ts_us is measured from the
trace's time origin (its first record's raw timestamp, kept in the `traces` row's options as ts_origin_raw_us).
The batch is refused, with nothing written, when a file's SHA-256 is already in the trace,
when it starts before the trace's first record, or, without --allow-overlap, before the trace's end. With
--allow-overlap the `requests` files of a device that the batch's rows reach into in time are read with that
device's new rows, sorted by (ts_us, seq) and written again; every other file stays as it is (a trace appended day
by day holds a day's files per device, so only the days the batch reaches into are rewritten).
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from blockheat.libs.io import delta_log, storage
from blockheat.libs.io.delta_files import Append, FileWriter, PendingWrite, files_matching
from blockheat.libs.io.tables import Location, table_path
from blockheat.libs.table_io.device_pass import read_files, row_groups, spark_tasks
from blockheat.schemas import requests, traces

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from blockheat.libs.io.inputs import InputFile

log = logging.getLogger(__name__)

ORIGIN_OPTION = "ts_origin_raw_us"


class AppendError(ValueError):
    """The append was refused; nothing was written."""


def _seconds(us: int) -> str:
    return f"{us:,} us ({us / 1e6:,.3f} s)"


@dataclass(frozen=True)
class TraceSoFar:
    """The trace an append continues: its catalog row (as pyarrow gives it), its next seq, its time origin (the
    first record's raw timestamp, us) and its end (the last record's ts_us)."""

    row: dict[str, Any]
    seq_base: int
    origin_raw_us: int
    end_us: int

    @classmethod
    def read(cls, warehouse: Location, trace_id: str, fmt: str, layout: str | None) -> TraceSoFar:
        """The trace's row from `traces`; AppendError when there is none, or it is another format or layout, or
        it has no recorded time origin."""
        root = table_path(warehouse, traces.TABLE)
        rows = (delta_log.read(root, list(traces.COLUMNS), {"trace_id": trace_id}).to_pylist()
                if delta_log.is_table(root) else [])
        if not rows:
            raise AppendError(f"trace {trace_id!r} is not in the catalog under {warehouse}: nothing to append to "
                              "(ingest its first files without --append)")
        row = rows[0]
        if row["format"] != fmt:
            raise AppendError(f"trace {trace_id} holds {row['format']} records: --format {fmt} files cannot be "
                              "appended to it")
        options = dict(row["options"])
        if layout is not None and options.get("layout") != layout:
            raise AppendError(f"trace {trace_id} was read with the columns {options.get('layout')}, this append "
                              f"with {layout}: append with the trace's own --csv-* options")
        if ORIGIN_OPTION not in options:
            raise AppendError(f"trace {trace_id} has no recorded time origin ({ORIGIN_OPTION}): ingest it again "
                              "without --append once, then append to it")
        return cls(row, int(row["records_read"]), int(options[ORIGIN_OPTION]), int(row["span_us"]))

    def check_unchanged(self, warehouse: Location) -> None:
        """AppendError when the trace's catalog row changed since read() (another ingest of the trace ran)."""
        trace_id = self.row["trace_id"]
        now = delta_log.read(table_path(warehouse, traces.TABLE), ["records_read", "ingested_at"],
                             {"trace_id": trace_id}).to_pylist()
        if now != [{"records_read": self.row["records_read"], "ingested_at": self.row["ingested_at"]}]:
            raise AppendError(f"trace {trace_id} changed while this append ran (another ingest of it committed); "
                              "nothing written: run the append again")


def check_new_files(so_far: TraceSoFar, files: Sequence[InputFile]) -> None:
    """AppendError naming both files when a file's SHA-256 is already in the trace (twice in the batch is refused by
    libs.io.inputs). Only a file of a known file's size can hold its content: only those wait for their digest."""
    trace_id = so_far.row["trace_id"]
    known = {(f["size_bytes"], f["sha256"]): f["path"] for f in so_far.row["source_files"]}
    sizes = {size for size, _ in known}
    for f in files:
        if f.size_bytes in sizes and (f.size_bytes, f.sha256) in known:
            raise AppendError(f"{f.given}: already in trace {trace_id} as {known[f.size_bytes, f.sha256]} (the same "
                              f"SHA-256, {f.sha256[:16]}...); nothing written")


def overlap_problem(so_far: TraceSoFar, first_raw_us: int, firsts: Callable[[], dict[str, int]],
                    allow_overlap: bool) -> str | None:
    """Why the batch whose earliest record is at `first_raw_us` cannot be appended (None: it can). `firsts()`
    gives each file's first raw timestamp, to name the file."""
    start = first_raw_us - so_far.origin_raw_us
    if start >= so_far.end_us:
        return None
    trace_id = so_far.row["trace_id"]
    early = sorted((t - so_far.origin_raw_us, name) for name, t in firsts().items())
    at, name = early[0] if early else (start, "the appended files")
    if start < 0:
        return (f"{name}: starts {_seconds(-at)} before trace {trace_id}'s first record: an append cannot go before "
                "a trace's start (ingest the trace again with this file); nothing written")
    if allow_overlap:
        return None
    return (f"{name}: starts at {_seconds(at)} into trace {trace_id}, before its end at {_seconds(so_far.end_us)}; "
            "nothing written. Append files later than the trace's end, or pass --allow-overlap to merge it in (the "
            "requests files it reaches into are re-sorted)")


def merged_row(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The trace's catalog row after an append: `new` describes the batch (times from the trace's origin)."""
    reasons = Counter(dict(old["rejected_by_reason"]))
    reasons.update(dict(new["rejected_by_reason"]))
    known = {g["device"] for g in old["geometry"]}
    summed = ("records_read", "records_accepted", "records_rejected", "reads", "writes", "bytes_read", "bytes_written")
    return {
        **new,
        **{k: old[k] + new[k] for k in summed},
        "source_files": [*old["source_files"], *new["source_files"]],
        "start_time_utc": old["start_time_utc"],
        "start_time_source": old["start_time_source"],
        "span_us": max(old["span_us"], new["span_us"]),
        "devices": sorted(set(old["devices"]) | set(new["devices"])),
        "rejected_by_reason": dict(reasons),
        "options": dict(old["options"]),
        "geometry": [*old["geometry"], *(g for g in new["geometry"] if g["device"] not in known)],
    }


def _time_range(path: str) -> tuple[int, int]:
    groups = row_groups(path)
    return min(g.lo for g in groups), max(g.hi for g in groups)


def resort_overlaps(spark: SparkSession, writes: Sequence[PendingWrite], trace_id: str) -> int:
    """Before an overlapping append's commit: for each device, the trace's `requests` files whose time range meets
    the range of the device's new rows are read with those rows, sorted by (ts_us, seq) and written again (one
    Spark task per device); the pending write then adds the sorted files in place of the device's new ones and
    removes the files they replace. Returns how many files are re-sorted."""
    write = next(w for w in writes if requests.TABLE in w.replaces)
    target, where = write.replaces[requests.TABLE]
    assert isinstance(where, Append), where
    new = write.table_files(requests.TABLE)
    new_paths: dict[str, list[str]] = {}
    ranges: dict[str, tuple[int, int]] = {}
    for f in new:
        device = json.loads(f["partition"])["device"]
        path = delta_log.file_path(target.root, f["path"])
        lo, hi = _time_range(path)
        new_paths.setdefault(device, []).append(path)
        old_lo, old_hi = ranges.get(device, (lo, hi))
        ranges[device] = (min(lo, old_lo), max(hi, old_hi))
    _, stored = files_matching(target.root, {"trace_id": trace_id}, target.partition_columns)
    affected: dict[str, list[dict[str, Any]]] = {}
    for add in stored:
        device = add["partitionValues"]["device"]
        if device in ranges:
            lo, hi = _time_range(delta_log.file_path(target.root, add["path"]))
            if lo <= ranges[device][1] and hi >= ranges[device][0]:
                affected.setdefault(device, []).append(add)
    if not affected:
        return 0
    jobs = [(device, [delta_log.file_path(target.root, a["path"]) for a in adds] + new_paths[device])
            for device, adds in sorted(affected.items())]
    columns = [f.name for f in requests.ARROW_SCHEMA if f.name not in target.partition_columns]

    def task(ids: Iterator[int]) -> Iterator[dict[str, Any]]:
        for i in ids:
            device, paths = jobs[i]
            rows = read_files(paths, columns).sort_by([("ts_us", "ascending"), ("seq", "ascending")])
            rows = rows.append_column("trace_id", pa.repeat(pa.scalar(trace_id, pa.string()), rows.num_rows))
            rows = rows.append_column("device", pa.repeat(pa.scalar(device, pa.string()), rows.num_rows))
            writer = FileWriter(target)
            writer.write(rows)
            yield from writer.close().to_pylist()

    written = spark_tasks(spark, len(jobs), task)
    for device in affected:
        for path in new_paths[device]:
            storage.delete(path)
    plain = [f if isinstance(f, dict) else f.asDict() for f in write.files]     # dicts or Spark rows
    kept = [f for f in plain if f["table"] != requests.TABLE or json.loads(f["partition"])["device"] not in affected]
    write.files = [*kept, *({**f, "table": requests.TABLE} for f in written)]
    removed = tuple(a["path"] for adds in affected.values() for a in adds)
    write.replaces = {**write.replaces, requests.TABLE: (target, Append(where.scope, removed))}
    log.info("trace %s: %d requests file(s) of %d device(s) re-sorted with the appended rows", trace_id,
             len(removed), len(affected))
    return len(removed)
