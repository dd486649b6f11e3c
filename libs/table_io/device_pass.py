"""The device pass: a trace's table files by device, one Spark task per device over them with a pure function
(`pyarrow.Table` in, tables out), the tables written by the tasks and committed once by the driver.

`requests` (and the tables partitioned like it) is partitioned by (trace_id, device), so every file holds one
device: a device's requests are read by one task without a shuffle. The files are listed from the table's Delta
snapshot on the driver. A table whose files cannot be read directly (a deletion vector, a file outside the table,
a footer without ts_us statistics) raises Unsupported before anything is written: the caller takes the transform's
Spark SQL form instead (`files_or_sql`). Files are opened by location (libs.io.storage): a local path every
executor sees, or an object store.

    out = device_pass(spark, request_files(spark, wh, "t1").by_size_items(), heat_of_device,
                      read=Read(["ts_us", "seq", "op", "offset_bytes", "size_bytes"]),
                      outputs={3600: Output(target.for_write(), {"trace_id": "t1", "window_us": 3600})})
    out.rows[3600], out.extras["0"]            # rows committed per output, what each device's task returned
"""
from __future__ import annotations

import copy
import itertools
import logging
import os
import pickle
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from blockheat.libs.io import storage
from blockheat.libs.io.connect import parallelism
from blockheat.libs.io.delta_files import FileWriter, TableTarget, commit_replace, discard
from blockheat.libs.io.delta_log import LogUnreadable, snapshot
from blockheat.libs.io.tables import Location, table_path
from blockheat.libs.io.task_parquet import reused_heap
from blockheat.libs.io.worker import python_task

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

R = TypeVar("R")

NO_STATS = 1 << 62               # a row group without ts_us statistics spans every time


class Unsupported(Exception):
    """The table's files cannot be read directly: the caller takes the Spark SQL form."""


def files_or_sql(files_way: Callable[[], R], sql_way: Callable[[], R], what: str) -> R:
    """files_way(), or sql_way() when it raises Unsupported (before anything was written)."""
    try:
        return files_way()
    except Unsupported as exc:
        log.info("%s: through Spark SQL (%s)", what, exc)
        return sql_way()


def trace_files(spark: SparkSession | None, warehouse: Location, trace_id: str, table: str = "requests",
                by: str = "device") -> dict[str, list[str]]:
    """The trace's files of `table` (partitioned by trace_id and `by`) by that partition value (locations),
    from the table's current snapshot (delta-rs: Spark's first snapshot of a table is seconds of a job's start)."""
    try:
        snap = snapshot(table_path(warehouse, table))
    except LogUnreadable as exc:
        raise Unsupported(f"{table}: {exc}") from exc
    found = [(add, snap.path(add)) for add in snap.files if add["partitionValues"].get("trace_id") == trace_id]
    files: dict[str, list[str]] = {}
    for add, path in found:
        if "://" in add["path"] or add["path"].startswith("/"):
            raise Unsupported(f"{table} file {add['path']}: a path outside the table")
        files.setdefault(add["partitionValues"][by], []).append(path)
    if not files:
        raise Unsupported(f"no {table} files for trace {trace_id!r}")
    return files


@dataclass(frozen=True)
class RowGroup:
    """One Parquet row group of a device's file: its rows and timestamp range (inclusive)."""

    path: str
    index: int
    rows: int
    lo: int
    hi: int


def row_groups(path: str, opened: pq.ParquetFile | None = None) -> list[RowGroup]:
    """The file's row groups with their ts_us range from the footer (a group without statistics counts as
    spanning every time); opened: the file, already open."""
    if opened is None:
        fs, local = storage.filesystem(path)
        opened = pq.ParquetFile(local, filesystem=fs)
    meta = opened.metadata
    column = meta.schema.to_arrow_schema().get_field_index("ts_us")
    out = []
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        stats = group.column(column).statistics
        known = stats is not None and stats.has_min_max
        out.append(RowGroup(path, i, group.num_rows, int(stats.min) if known else -NO_STATS,
                            int(stats.max) if known else NO_STATS))
    return [g for g in out if g.rows]


def cuts(groups: Sequence[RowGroup], parts: int) -> list[int]:
    """Up to parts - 1 increasing timestamps that cut the groups' rows into about equal shares,
    taking each group's rows as spread evenly over its timestamp range."""
    if parts <= 1 or not groups:
        return []
    lo = np.array([g.lo for g in groups], np.float64)
    width = np.array([g.hi for g in groups], np.float64) - lo + 1
    rows = np.array([g.rows for g in groups], np.float64)
    total = rows.sum()
    first, last = min(g.lo for g in groups), max(g.hi for g in groups)
    out: list[int] = []
    for i in range(1, parts):
        target = total * i / parts
        a, b = first, last + 1
        while a < b:                  # the first t with at least `target` rows estimated below it
            t = (a + b) // 2
            if float(np.sum(rows * np.clip((t - lo) / width, 0.0, 1.0))) < target:
                a = t + 1
            else:
                b = t
        if first < a <= last and (not out or a > out[-1]):
            out.append(a)
    return out


def spans(groups: Sequence[RowGroup], max_rows: int, align_us: int = 0, start: int | None = None,
          stop: int | None = None) -> list[tuple[int | None, int | None]]:
    """Consecutive time spans [start, stop) (None: open) that cut the groups' rows in it into parts of about
    max_rows (cuts()), each inner edge a multiple of align_us when given (a part then holds whole windows of
    align_us)."""
    groups = [g for g in groups if (start is None or g.hi >= start) and (stop is None or g.lo < stop)]
    total = sum(g.rows for g in groups)
    edges = cuts(groups, max(1, -(-total // max_rows)))
    if align_us:
        edges = sorted({e // align_us * align_us for e in edges})
    inner = [e for e in edges if (start is None or e > start) and (stop is None or e < stop)]
    return list(itertools.pairwise([start, *inner, stop]))


class DeviceChunks:
    """Task side: a device's rows of some columns in time order, as tables of about `max_rows` rows each (a part
    holds whole windows of align_us when given, so it holds more when one window does), read row group by row
    group: a task's memory follows the part, not the device. Each part is sorted by (ts_us, seq) when both are
    read. Iterate it once per pass."""

    def __init__(self, paths: Sequence[str], columns: Sequence[str], max_rows: int, align_us: int = 0,
                 ordered: bool = True, start: int | None = None) -> None:
        self.paths = list(paths)
        self.max_rows, self.align_us, self.sort = max_rows, align_us, ordered
        self.columns = list(dict.fromkeys([*columns, "ts_us"]))
        self.wanted = list(columns)
        self.ordered = ordered and "seq" in self.columns
        self.groups = [g for p in paths for g in row_groups(p)]
        self.spans = spans(self.groups, max_rows, align_us, start)

    def reread(self, columns: Sequence[str], start: int | None = None, stop: int | None = None) -> DeviceChunks:
        """The same device's rows of other columns in [start, stop) (None: open), in parts of the same size (the
        footers are not read again)."""
        other = copy.copy(self)
        other.columns = list(dict.fromkeys([*columns, "ts_us"]))
        other.wanted = list(columns)
        other.ordered = self.sort and "seq" in other.columns
        other.spans = spans(self.groups, self.max_rows, self.align_us, start, stop)
        return other

    def __iter__(self) -> Iterator[pa.Table]:
        """The parts that hold rows."""
        for _, part in self.with_spans():
            if part.num_rows:
                yield part

    def with_spans(self) -> Iterator[tuple[tuple[int | None, int | None], pa.Table]]:
        """Every span [start, stop) and its rows (an empty table when it holds none)."""
        if self.spans == [(None, None)] and not self.ordered:        # one part: the files as they are
            yield (None, None), read_files(self.paths, self.wanted)
            return
        files: dict[str, pq.ParquetFile] = {}
        for start, stop in self.spans:
            tables = []
            for g in self.groups:
                if (start is not None and g.hi < start) or (stop is not None and g.lo >= stop):
                    continue
                if g.path not in files:
                    files[g.path] = storage.parquet_file(g.path)
                table = files[g.path].read_row_group(g.index, columns=self.columns)
                ts = table.column("ts_us")
                keep = pc.and_(pc.greater_equal(ts, start if start is not None else -NO_STATS),
                               pc.less(ts, stop if stop is not None else NO_STATS))
                tables.append(table.filter(keep))
            if not tables:
                first = storage.parquet_file(self.paths[0]).schema_arrow
                tables = [pa.schema([first.field(c) for c in self.columns]).empty_table()]
            part = pa.concat_tables(tables)
            if self.ordered:
                part = part.sort_by([("ts_us", "ascending"), ("seq", "ascending")])
            yield (start, stop), part.select(self.wanted)


@dataclass(frozen=True)
class RequestFiles:
    """A trace's requests files by device (absolute paths), their rows by device, the largest ts_us and each
    device's row groups (from the footers)."""

    files: dict[str, list[str]]
    rows: dict[str, int]
    last_us: int
    groups: dict[str, list[RowGroup]]

    def by_size(self) -> list[str]:
        """The devices, the most requests first (the longest tasks start first)."""
        return sorted(self.files, key=lambda d: (-self.rows[d], d))

    def by_size_items(self) -> list[tuple[str, list[str]]]:
        """(device, its files), the most requests first."""
        return [(d, self.files[d]) for d in self.by_size()]


def request_files(spark: SparkSession | None, warehouse: Location, trace_id: str) -> RequestFiles:
    """The trace's requests files, from the snapshot and the files' footers; Unsupported when a footer lacks
    ts_us statistics."""
    files = trace_files(spark, warehouse, trace_id)
    rows, highest, groups = {}, [], {}
    for device, paths in files.items():
        groups[device] = [g for p in paths for g in row_groups(p)]
        if any(g.hi == NO_STATS for g in groups[device]):
            raise Unsupported(f"requests of {trace_id}/{device}: a row group without ts_us statistics")
        rows[device] = sum(g.rows for g in groups[device])
        highest += [g.hi for g in groups[device]]
    if not highest:
        raise Unsupported(f"no requests rows for trace {trace_id!r}")
    return RequestFiles(files, rows, int(max(highest)), groups)


def time_pieces(listed: RequestFiles, tasks: int, chunk_rows: int, align_us: int = 0, start: int | None = None,
                stop: int | None = None) -> list[tuple[str, str, tuple[int | None, int | None]]]:
    """(task name, device, time span) of each task over the requests in [start, stop) (None: open): a device with
    more than chunk_rows of them and more than its share of `tasks` is split by time into about that many spans
    ("<device>#<i>", in time order; inner edges multiples of align_us when given, so each holds whole windows),
    so one hot device keeps every core busy; the others are one task each ("<device>"). The most requests first."""
    groups = {d: [g for g in listed.groups[d] if (start is None or g.hi >= start) and (stop is None or g.lo < stop)]
              for d in listed.files}
    rows = {d: sum(g.rows for g in gs) for d, gs in groups.items()}
    total = sum(rows.values()) or 1
    out = []
    for device in sorted(listed.files, key=lambda d: (-rows[d], d)):
        k = min(tasks, -(-rows[device] // chunk_rows), max(1, round(rows[device] * tasks / total)))
        edges = cuts(groups[device], k) if k > 1 else []
        if align_us:
            edges = sorted({e // align_us * align_us for e in edges})
        inner = [e for e in edges if (start is None or e > start) and (stop is None or e < stop)]
        spans_of = list(itertools.pairwise([start, *inner, stop]))
        out += [(device if len(spans_of) == 1 else f"{device}#{i}", device, span) for i, span in enumerate(spans_of)]
    return out


def read_files(paths: Sequence[str], columns: Sequence[str], where: Any = None) -> pa.Table:
    """Task side: these Parquet files' (at least one) columns, the rows matching the pyarrow filter `where`, as
    one table."""
    tables = []
    for location in paths:
        fs, path = storage.filesystem(location)
        tables.append(pq.read_table(path, filesystem=fs, columns=list(columns), filters=where))
    return pa.concat_tables(tables)


_ITEMS = pa.schema([pa.field("item", pa.binary())])


ArrowTask = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def _pickled(fn: Callable[[Iterator[int]], Iterator[Any]]) -> ArrowTask:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids = (i for batch in batches for i in batch.column(0).to_pylist())
        items = [pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL) for item in fn(ids)]
        yield pa.RecordBatch.from_arrays([pa.array(items, pa.binary())], schema=_ITEMS)

    return run


def threads_per_task(spark: SparkSession, tasks: int) -> int:
    """Driver side: the threads each of `tasks` tasks may use when they run together (the session's parallelism
    shared among them; 1 when they fill it). A task caps it at its own CPUs (task_threads)."""
    return max(1, parallelism(spark) // max(1, tasks))


def task_threads(threads: int) -> int:
    """Task side: `threads` capped at the CPUs this process may run on (a pinned worker's one)."""
    return max(1, min(threads, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
                      (os.cpu_count() or 1)))


def spark_tasks(spark: SparkSession, n: int, fn: Callable[[Iterator[int]], Iterator[Any]]) -> list[Any]:
    """fn over task ids 0..n-1, one Spark task each (in that order of scheduling); everything the tasks yielded
    (picklable values), in task order. A mapInArrow job over spark.range: the same under Spark Connect."""
    if not n:
        return []
    items = spark.range(n, numPartitions=n).mapInArrow(python_task(_pickled(fn)), "item binary").toArrow()
    return [pickle.loads(item) for item in items.column("item").to_pylist()]


@dataclass(frozen=True)
class Read:
    """What a pass reads of a table's files for each device: its columns, and the rows matching the pyarrow
    filter `where`; or with chunk_rows, the rows (from `start` on) in time order in parts of about that many
    (DeviceChunks, whole windows of align_us each; sorted unless `ordered` is False; no filter)."""

    columns: Sequence[str]
    where: Any = None
    chunk_rows: int = 0
    align_us: int = 0
    ordered: bool = True          # chunks: each sorted by (ts_us, seq) (False: in the files' order)
    start: int | None = None      # chunks: the rows from this ts_us on

    def __post_init__(self) -> None:
        if self.chunk_rows and self.where is not None:
            raise ValueError("a chunked read takes no row filter")

    def of(self, paths: Sequence[str]) -> pa.Table | DeviceChunks | None:
        """Task side: the rows of these files (None when there is no file)."""
        if not paths:
            return None
        if self.chunk_rows:
            return DeviceChunks(paths, self.columns, self.chunk_rows, self.align_us, self.ordered, self.start)
        return read_files(paths, self.columns, self.where)


@dataclass(frozen=True)
class Output:
    """A table a device pass writes: its target (one write: `TableTarget.for_write()`) and the rows its one commit
    replaces (partition column -> value)."""

    target: TableTarget
    where: Mapping[str, Any]


@dataclass
class PassResult:
    """Rows committed per output key, and what each device's function returned besides its tables."""

    rows: dict[Hashable, int] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)


#: A device's function: (device, its rows: one table, or for several reads one per name (None: no file)) ->
#: (output key -> rows to write, anything else for the driver).
DeviceFn = Callable[[str, Any], tuple[Mapping[Hashable, pa.Table], Any]]
#: A device and its files: paths, or for several reads the paths per read name.
DeviceFiles = tuple[str, Sequence[str] | Mapping[str, Sequence[str]]]


def _device_task(devices: Sequence[DeviceFiles], fn: DeviceFn, read: Read | Mapping[str, Read],
                 targets: Mapping[Hashable, TableTarget]) -> Callable[[Iterator[int]], Iterator[dict[str, Any]]]:
    def run(ids: Iterator[int]) -> Iterator[dict[str, Any]]:
        for i in ids:
            device, paths = devices[i]
            with reused_heap():              # a device's arrays come and go by the hundred MB
                if isinstance(read, Read):
                    rows = read.of(paths)  # type: ignore[arg-type]
                else:
                    rows = {name: r.of(paths.get(name, ())) for name, r in read.items()}  # type: ignore[union-attr]
                tables, extra = fn(device, rows)
                del rows
                for key, table in tables.items():
                    writer = FileWriter(targets[key])
                    writer.write(table)
                    for f in writer.close().to_pylist():
                        yield {"file": f, "key": key}
                tables = table = None  # type: ignore[assignment]
            yield {"device": device, "extra": extra}

    return run


def device_pass(spark: SparkSession, devices: Sequence[DeviceFiles], fn: DeviceFn, *, read: Read | Mapping[str, Read],
                outputs: Mapping[Hashable, Output] | None = None, label: str = "device pass",
                driver_rows: Callable[[dict[str, Any]], Mapping[Hashable, pa.Table]] | None = None) -> PassResult:
    """fn over each device's rows (`read` of its files; with several named reads, each device's files per name),
    one Spark task per device in the given order (the largest first runs longest); a "device" is any task name
    fn knows (a part of a device, too). The tables fn returns for an output key are written by the task into that
    output's table, and those driver_rows(extras) returns by the driver; after every task succeeded each output is
    committed once, replacing its `where` rows, in key order. On any failure no further output is committed and
    the files of the uncommitted ones are deleted (a committed output stays)."""
    outputs = dict(outputs or {})
    targets = {key: out.target for key, out in outputs.items()}
    started = time.perf_counter()
    result = PassResult()
    try:
        yielded = spark_tasks(spark, len(devices), _device_task(devices, fn, read, targets))
        log.info("%s: %d devices in %.1f s", label, len(devices), time.perf_counter() - started)
        result.extras = {r["device"]: r["extra"] for r in yielded if "device" in r}
        for key, table in (driver_rows(result.extras) if driver_rows else {}).items():
            writer = FileWriter(targets[key])
            writer.write(table)
            yielded += [{"file": f, "key": key} for f in writer.close().to_pylist()]
        for key, out in outputs.items():
            files = [r["file"] for r in yielded if "file" in r and r["key"] == key]
            commit_replace(spark, out.target, out.where, files)      # deletes this output's files if it fails
            result.rows[key] = sum(int(f["rows"]) for f in files)
    except BaseException:
        for key, target in targets.items():
            if key not in result.rows:
                discard(target)
        raise
    return result
