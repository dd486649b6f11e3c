"""The trace profile straight from the `requests` table's Parquet files: no shuffle of requests.

libs.transforms.profile computes the profile from a DataFrame: two shuffles bring every request to
the numpy passes (grouped by time part, then by address region), and Spark SQL merges what they
leave. Here the passes read the table's files themselves, which `requests` makes cheap: it is
partitioned by (trace_id, device), so every file holds one device, and its Parquet row groups carry
the minimum and maximum timestamp. The driver plans units of work from the Delta snapshot and the
files' footers alone (no Spark job), runs them in one RDD job (a second one after it for the block tasks of
devices in several buckets; each spread by estimated cost over 2 x cores Spark tasks: a Spark task has a fixed
cost of its own, and an RDD job about half a DataFrame job's), and finishes the profile from their partials
(rows per group, histogram cell or cut bin: they scale with groups, not requests). The units, each at most
`rows_per_part` (ROWS_PER_TASK, 1 M) requests (a block task: BLOCK_ROWS, 8 M):

- ordered tasks: one device over one time span [start, stop), cut where the row-group statistics
  put equal shares of the device's requests (an estimate: a span may hold more or fewer). The task
  reads the row groups the span overlaps, and its predecessor (the device's last request before
  `start`) from the few row groups that can hold it. Device-scope groups inside the span are
  finished there; the rest leave histogram cells, run pieces and cut 1 s / 1 min bins.
- block tasks: one device's requests touching an address region (lcm(extent, 4 KiB) bytes) of one
  of `buckets` buckets, so every access to a block and every touch of an extent is in one task: one compiled
  loop (profile_kernels.block_pass) over the requests in time order, with a table of each block's last access.
  A device in one bucket is read by its block task itself; in several, its ordered tasks write their rows to
  scratch Arrow files by bucket and the block tasks run after them in a job of their own, each reading its
  bucket's files (the device's rows read from the table once, not once per bucket).
- device tasks: both of the above for a device that fits one task, on one read of its rows.
- arrival tasks: every device's timestamps over one time span, for the trace scope's interarrival
  times, idle periods and bursts (arrivals merged across devices).
Histogram cells and extent counts go to scratch Arrow files by group bucket (a stable hash); a last
small job merges each bucket (libs.transforms.profile.merge_histograms, merge_skew), reading only the
files the successful attempts reported, with the cells of the runs the driver joined across span edges.
The driver sums counts, footprints and burst bins, and commits the rows (~16,000 for a day in 1 h windows).

The result is the same rows as compute_trace_profile (tested on the hplajw week and on generated
traces split many ways). Tables this reader cannot take (deletion vectors, no files) go through
compute_trace_profile. Files are opened by path: on a cluster the warehouse must be on a file
system every executor sees (as for the rest of the direct readers).

    rows = profile_trace(spark, warehouse, "hplajw", span_us=span)
"""
from __future__ import annotations

import heapq
import itertools
import logging
import math
import os
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from blockheat.libs.io import storage
from blockheat.libs.io.connect import parallelism as session_parallelism
from blockheat.libs.io.delta_files import replace_from_driver
from blockheat.libs.io.tables import read_table, replace_rows, table_target
from blockheat.libs.io.task_parquet import (
    Opener,
    from_ipc,
    mapped_arrays,
    release_memory,
    scratch_dir,
    task_file_name,
    task_opener,
    to_ipc,
)
from blockheat.libs.table_io.changes import known_requests_state
from blockheat.libs.table_io.device_pass import (
    RowGroup,
    cuts,
    files_or_sql,
    row_groups,
    spark_tasks,
    trace_files,
)
from blockheat.libs.table_io.profile_state import (
    BLOCKS,
    Kept,
    ProfileState,
    block_file,
    seen_blocks,
)
from blockheat.libs.transforms import profile as P

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

READ = ("seq", "ts_us", "op", "offset_bytes", "size_bytes")
ARRIVAL_ROWS = 2   # an arrival task takes this many times rows_per_part (it holds one column, and ~8 arrays of it)
MERGE_ROWS = 2_500_000   # a merge bucket per this many requests at least (the histogram cells grow with them)
ROWS_PER_TASK = 1_000_000   # the most requests an ordered task holds (~100 bytes each in the compiled passes)
# The most requests a block task holds (~800 MB in the compiled pass). A device in several buckets has its rows
# written by bucket by its ordered tasks, which read them anyway, and each block task reads its bucket's files.
BLOCK_ROWS = 8_000_000


@dataclass(frozen=True)
class Task:
    """One unit of work (several run in one Spark task, see slots())."""

    kind: str                  # "ordered", "block", "device" (both for a device that fits one task) or "arrival"
    device: str = ""
    part: int = 0              # ordered: the span's index among the device's spans, in time order
    start: int | None = None   # ordered and arrival: the span [start, stop); None = open
    stop: int | None = None
    bucket: int = 0            # block: this task's bucket of `buckets`
    buckets: int = 1           # ordered: its device's block buckets (its rows go to each one's files)
    rows: int = 0              # about how many requests it reads (for spreading the work over Spark tasks)

    @property
    def cost(self) -> float:
        """Relative time: per request, the block pass takes ~1.1x the ordered one (measured), an arrival ~0.4x."""
        return self.rows * {"block": 1.1, "ordered": 1.0, "device": 2.1, "arrival": 0.4}[self.kind]


class _Reader:
    """Row groups of a task's files, read by column and time span (files opened once per task)."""

    def __init__(self) -> None:
        self.files: dict[str, pq.ParquetFile] = {}

    def group(self, g: RowGroup, columns: Sequence[str]) -> pa.Table:
        if g.path not in self.files:
            self.files[g.path] = storage.parquet_file(g.path)
        table = self.files[g.path].read_row_group(g.index, columns=list(columns))
        if "op" in columns and pa.types.is_dictionary(table.schema.field("op").type):
            table = table.set_column(table.schema.get_field_index("op"), "op", table.column("op").cast(pa.string()))
        return table

    def span(self, groups: Sequence[RowGroup], columns: Sequence[str], start: int | None, stop: int | None
             ) -> pa.Table:
        """Rows with start <= ts_us < stop of the groups that can hold any."""
        tables = []
        for g in groups:
            if (start is not None and g.hi < start) or (stop is not None and g.lo >= stop):
                continue
            table = self.group(g, columns)
            ts = table.column("ts_us")
            keep = None
            if start is not None and g.lo < start:
                keep = pc.greater_equal(ts, start)
            if stop is not None and g.hi >= stop:
                below = pc.less(ts, stop)
                keep = below if keep is None else pc.and_(keep, below)
            tables.append(table if keep is None else table.filter(keep))
        return pa.concat_tables(tables) if tables else self.empty(columns)

    def last_before(self, groups: Sequence[RowGroup], columns: Sequence[str], start: int) -> pa.Table:
        """The rows with the greatest ts_us below `start` (empty if none): read from the groups whose
        range reaches the largest minimum below `start` (every earlier group ends before it)."""
        candidates = [g for g in groups if g.lo < start]
        if not candidates:
            return self.empty(columns)
        floor = max(g.lo for g in candidates)
        rows = self.span([g for g in candidates if min(g.hi, start - 1) >= floor], columns, floor, start)
        if not rows.num_rows:
            return rows
        return rows.filter(pc.equal(rows.column("ts_us"), pc.max(rows.column("ts_us"))))

    @staticmethod
    def empty(columns: Sequence[str]) -> pa.Table:
        types = {"op": pa.string()}
        return pa.table({c: pa.array([], types.get(c, pa.int64())) for c in columns})


def _with_device(table: pa.Table, device: str) -> pa.Table:
    return table.append_column("device", pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(table.num_rows, np.int32)), pa.array([device], pa.string())))


def run_task(task: Task, groups: Sequence[RowGroup], *, window_us: int, extent_bytes: int, end: int,
             seen: tuple[np.ndarray, np.ndarray] | None = None, rows_out: Callable[[pa.Table], None] | None = None,
             bucket_rows: tuple[np.ndarray, ...] | None = None
             ) -> tuple[pa.Table, tuple[np.ndarray, np.ndarray] | None]:
    """One task's PARTIAL rows (libs.transforms.profile) and, for a block pass, its blocks' last access at `end`,
    the end of the data (stop()). `groups`: the device's row groups (arrival tasks: every device's); seen: the
    blocks' last access before the task's start; rows_out: given an ordered task's rows (READ); bucket_rows: a
    block task's (ts_us, seq, lo, hi), as bucket_split gives them (from its device's ordered tasks; a device's only
    bucket reads its rows itself)."""
    reader = _Reader()
    span = (task.start, task.stop)
    if task.kind == "arrival":
        ts = reader.span(groups, ["ts_us"], task.start, task.stop).column("ts_us").to_numpy()
        before = None
        if task.start is not None:
            last = reader.last_before(groups, ["ts_us"], task.start)
            before = int(last.column("ts_us")[0].as_py()) if last.num_rows else None
        if not len(ts):
            return P.PARTIAL.empty_table(), None
        return P.merged_partials(ts, before_ts=before, window_us=window_us, span=span, data_end=end), None
    if task.kind in ("ordered", "device"):
        table = reader.span(groups, READ, task.start, task.stop)
        if not table.num_rows:
            return P.PARTIAL.empty_table(), seen if task.kind == "device" else None
        before = {}
        if task.start is not None:
            last = reader.last_before(groups, READ, task.start)
            if last.num_rows:
                i = int(np.argmax(last.column("seq").to_numpy()))
                tail = last.column("offset_bytes")[i].as_py() + last.column("size_bytes")[i].as_py()
                before[task.device] = (int(last.column("ts_us")[i].as_py()), int(tail))
        ordered = P.ordered_partials(_with_device(table, task.device), part=task.part, before=before, before_ts=None,
                                     window_us=window_us, span=span, merged=False, data_end=end)
        if task.kind == "ordered":
            if rows_out is not None:
                rows_out(table)
            return ordered, None
        lo = table.column("offset_bytes").to_numpy()           # "device": the block pass on the same rows
        blocks, held = P.resumed_block_partials(
            task.device, table.column("ts_us").to_numpy(), table.column("seq").to_numpy(), lo,
            lo + table.column("size_bytes").to_numpy(), window_us=window_us, extent_bytes=extent_bytes, buckets=1,
            bucket=0, start=task.start, end=end, seen=seen or _NONE)
        return pa.concat_tables([ordered, blocks]), held
    if task.kind == "block":
        if bucket_rows is None and task.buckets > 1:
            raise ValueError(f"block task {task.device}/{task.bucket}: its bucket's rows (bucket_rows) are required")
        if bucket_rows is None:
            bucket_rows = bucket_split(
                reader.span(groups, ["seq", "ts_us", "offset_bytes", "size_bytes"], task.start, None), 1, 1)[0]
            release_memory()    # the Arrow rows, copied out: Arrow's allocator keeps them otherwise during the pass
        ts, seq, lo, hi = bucket_rows
        return P.resumed_block_partials(task.device, ts, seq, lo, hi, window_us=window_us, extent_bytes=extent_bytes,
                                        buckets=task.buckets, bucket=task.bucket, start=task.start, end=end,
                                        seen=seen or _NONE)
    raise ValueError(f"unknown profile task kind {task.kind!r}")


_NONE = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def bucket_split(table: pa.Table, buckets: int, region_bytes: int) -> list[tuple[np.ndarray, ...]]:
    """Per block bucket k of `buckets`, (ts_us, seq, lo, hi) of the requests (READ rows) touching an address region
    r (region_bytes) with r % buckets == k: a request spanning several regions goes to each of theirs."""
    lo = table.column("offset_bytes").to_numpy()
    hi = lo + table.column("size_bytes").to_numpy()
    ts, seq = table.column("ts_us").to_numpy(), table.column("seq").to_numpy()
    if buckets == 1:
        return [(ts, seq, lo, hi)]
    first, last = lo // region_bytes, (hi - 1) // region_bytes
    out = []
    for k in range(buckets):
        keep = (k - first) % buckets <= last - first                 # some r in [first, last] is k's
        out.append((ts[keep], seq[keep], lo[keep], hi[keep]))
    return out


ROWS = pa.schema([(c, pa.int64()) for c in ("ts_us", "seq", "lo", "hi")])


def plan(files: dict[str, list[str]], *, rows_per_part: int, parallelism: int, block_rows: int | None = None,
         start: int | None = None, part_base: int = 0) -> tuple[list[Task], dict[str, list[RowGroup]]]:
    """The tasks for the trace's requests from `start` on (None: all; block tasks first: the longest), and each
    device's row groups. block_rows: the most requests of a block task (default
    the larger of BLOCK_ROWS and rows_per_part); part_base: the first ordered part's number."""
    block_rows = block_rows or max(BLOCK_ROWS, rows_per_part)
    groups = {device: [g for path in sorted(paths) for g in row_groups(path)]
              for device, paths in sorted(files.items())}
    new = {device: [g for g in gs if start is None or g.hi >= start] for device, gs in groups.items()}
    rows = {device: sum(g.rows for g in gs) for device, gs in new.items()}   # an estimate when a group straddles
    total = sum(rows.values())
    wanted = P._tasks(total, rows_per_part, parallelism)
    ordered, blocks = [], []
    for device, gs in new.items():
        if not rows[device]:
            continue
        n = rows[device]
        parts = max(math.ceil(n / rows_per_part), min(round(wanted * n / total), math.ceil(n / P.MIN_ROWS_PER_TASK)), 1)
        edges = [start, *(c for c in cuts(gs, parts) if start is None or c > start), None]
        buckets = math.ceil(n / block_rows)
        if parts == buckets == 1:                 # both passes in one task: the device's rows read once
            blocks.append(Task("device", device, part=part_base, start=start, rows=n))
            continue
        ordered += [Task("ordered", device, part=part_base + i, start=a, stop=b, buckets=buckets,
                         rows=n // (len(edges) - 1)) for i, (a, b) in enumerate(itertools.pairwise(edges))]
        blocks += [Task("block", device, start=start, bucket=k, buckets=buckets, rows=n // buckets)
                   for k in range(buckets)]
    every = [g for gs in new.values() for g in gs]
    spans = max(math.ceil(total / (ARRIVAL_ROWS * rows_per_part)),
                min(2 * parallelism, math.ceil(total / (ARRIVAL_ROWS * P.MIN_ROWS_PER_TASK))), 1)
    edges = [start, *(c for c in cuts(every, spans) if start is None or c > start), None]
    arrivals = [Task("arrival", start=a, stop=b, rows=total // (len(edges) - 1))
                for a, b in itertools.pairwise(edges)] if total else []
    return blocks + ordered + arrivals, groups


def stop(groups: dict[str, list[RowGroup]]) -> int:
    """The end of the requests in the groups: their last ts_us + 1 (0 when there are none)."""
    return max((g.hi + 1 for gs in groups.values() for g in gs), default=0)


def _buckets_of(table: pa.Table, buckets: int) -> np.ndarray:
    """Each row's merge bucket: a stable hash of its group (scope, device, w, window_us, metric)."""
    keys = zip(*(table.column(c).to_pylist() for c in ("scope", "device", "w", "window_us", "metric")), strict=True)
    return np.array([zlib.crc32("\x1f".join(map(str, key)).encode()) % buckets for key in keys], np.int64)


class Result(NamedTuple):
    """What a Spark task returns: its small rows as an Arrow IPC blob (bucket -1), or a file it wrote."""
    bucket: int
    name: str
    blob: bytes


def slots(tasks: Sequence[Task], n: int) -> list[list[int]]:
    """The tasks spread over n Spark tasks of about equal cost (longest first, each to the least loaded), each
    Spark task's in the order it runs them: a Spark task costs ~30-45 ms of its own in local mode, so many small
    ones are slow."""
    loads = [(0.0, k) for k in range(n)]
    out: list[list[int]] = [[] for _ in range(n)]
    for i in sorted(range(len(tasks)), key=lambda i: -tasks[i].cost):
        load, k = heapq.heappop(loads)
        out[k].append(i)
        heapq.heappush(loads, (load + tasks[i].cost, k))
    # Spark runs the slots in order, `cores` at a time: every other slot runs its tasks cheapest first, so that the
    # memory-bound block passes (the costliest) of two slots running side by side do not all meet.
    return [s if k % 2 == 0 else s[::-1] for k, s in enumerate(x for x in out if x)]


def _stage_one(tasks: Sequence[Task], groups: dict[str, list[RowGroup]], *, window_us: int, extent_bytes: int,
               scratch: str, buckets: int, assigned: list[list[int]], seen: dict[str, list[str]], run: str,
               end: int, rows_files: dict[tuple[str, int], list[tuple[str, int]]] | None = None
               ):  # type: ignore[no-untyped-def]
    """mapPartitions function of the first jobs (one id per Spark task: its index into `assigned`): each
    task's histogram cells and extent counts written to one Arrow file per merge bucket under
    `scratch`, a block pass's blocks' last access to a file under the state's `run` folder (from the
    device's `seen` files), an ordered task's rows of a device in several block buckets to one Arrow file per
    bucket under `scratch` (bucket_split; a block task reads its (device, bucket)'s files of rows_files, (name,
    rows) each, so the device's rows are read from the table once), everything else returned as one blob."""
    every = [g for gs in groups.values() for g in gs]
    opener = task_opener()
    region_bytes = math.lcm(extent_bytes, P.FOOTPRINT_BLOCK)
    region_blocks = region_bytes // P.FOOTPRINT_BLOCK

    def read_rows(files: Sequence[tuple[str, int]]) -> tuple[np.ndarray, ...]:
        """The files' rows (name, rows) as one array per ROWS column, each file copied in and let go (read, not
        memory-mapped: the task holds the bucket's rows once)."""
        columns = tuple(np.empty(sum(n for _, n in files), np.int64) for _ in ROWS.names)
        at = 0
        for name, n in files:
            with _unspill(opener, scratch, name, mapped=False) as source:
                table = pa.ipc.open_file(source).read_all()
            for column, c in zip(columns, ROWS.names, strict=True):
                column[at:at + n] = table.column(c).to_numpy()
            at += n
            del table
        return columns

    def run_tasks(slots: Iterator[int]) -> Iterator[Result]:
        with mapped_arrays():
            yield from each_task(slots)

    def each_task(slots: Iterator[int]) -> Iterator[Result]:
        for slot in slots:
            for i in assigned[slot]:
                task = tasks[i]
                blocks = task.kind in ("block", "device")
                before = seen_blocks(seen.get(task.device, []), bucket=task.bucket, buckets=task.buckets,
                                     region_blocks=region_blocks, opener=opener) if blocks else None
                written: list[Result] = []

                def rows_out(table: pa.Table, task: Task = task, i: int = i, written: list = written) -> None:
                    for k, columns in enumerate(bucket_split(table, task.buckets, region_bytes)):
                        if len(columns[0]):
                            name = f"rows/b{k:04d}/{task_file_name(f'task{i}')}".removesuffix(".parquet") + ".arrow"
                            with _spill(opener, scratch, name) as sink, pa.ipc.new_file(sink, ROWS) as writer:
                                writer.write_table(pa.table(dict(zip(ROWS.names, columns, strict=True)), schema=ROWS))
                            written.append(Result(ROWS_FILE, name, f"{task.device}\x1f{k}\x1f{len(columns[0])}"
                                                  f"\x1f{task.part}".encode()))

                split = task.buckets > 1
                rows = read_rows((rows_files or {}).get((task.device, task.bucket), [])) \
                    if task.kind == "block" and split else None
                out, held = run_task(task, every if task.kind == "arrival" else groups[task.device],
                                     window_us=window_us, extent_bytes=extent_bytes, end=end, seen=before,
                                     rows_out=rows_out if task.kind == "ordered" and split else None,
                                     bucket_rows=rows)
                yield from written
                if blocks:
                    path = block_file(run, task.device, task.bucket, task.buckets)
                    storage.write_parquet(path, pa.table({"block": held[0], "last": held[1]}, schema=BLOCKS), opener)
                    yield Result(BLOCK_FILE, path, task.device.encode())
                merged = pc.is_in(out.column("kind"), pa.array(["hist", "extent"]))
                cells = out.filter(merged)
                bucket = _buckets_of(cells, buckets)
                yield Result(SMALL, "", to_ipc(out.filter(pc.invert(merged))))
                for k in np.unique(bucket):
                    name = f"b{k:04d}/{task_file_name(f'task{i}')}".removesuffix(".parquet") + ".arrow"
                    with _spill(opener, scratch, name) as sink, pa.ipc.new_file(sink, P.PARTIAL) as writer:
                        writer.write_table(cells.filter(pa.array(bucket == k)))
                    yield Result(int(k), name, b"")
                del out, cells, before, held, rows
                release_memory()

    return run_tasks


# The spill files are written by one task and read by another, maybe on another executor: they go to the
# run's scratch under the warehouse (a shared directory, or an object-store prefix), not to executor-local temp.
def _spill(opener: Opener, scratch: str, name: str) -> pa.NativeFile:
    """A new spill file scratch/name to write (its bucket's directory created on a local file system)."""
    if storage.is_local(scratch):
        os.makedirs(os.path.dirname(os.path.join(scratch, name)), exist_ok=True)
        return pa.OSFile(os.path.join(scratch, name), "wb")
    fs, root = opener(scratch)
    return fs.open_output_stream(f"{root}/{name}")


def _unspill(opener: Opener, scratch: str, name: str, *, mapped: bool = True) -> pa.NativeFile:
    """A spill file to read: on a local file system memory-mapped (or opened, not mapped), a random-access file
    on an object store."""
    if storage.is_local(scratch):
        path = os.path.join(scratch, name)
        return pa.memory_map(path) if mapped else pa.OSFile(path, "rb")
    fs, root = opener(scratch)
    return fs.open_input_file(f"{root}/{name}")


def _stage_two(files: dict[int, list[str]], extra: dict[int, bytes], scratch: str,
               horizon: P.Horizon):  # type: ignore[no-untyped-def]
    """mapPartitions function of the second job: one merge bucket's cells from every first-job task
    (only the files the successful attempts reported; `extra`: the driver's rows for the bucket)
    merged into FINAL rows (a blob, bucket SMALL) and the open groups' cells compacted for a later run
    (a blob, bucket OPEN)."""
    opener = task_opener()

    def run(ids: Iterator[int]) -> Iterator[Result]:
        with mapped_arrays():
            yield from merge(ids)

    def merge(ids: Iterator[int]) -> Iterator[Result]:
        for k in ids:
            tables = [from_ipc([extra[k]], P.PARTIAL)] if k in extra else []
            for name in files[k]:
                with _unspill(opener, scratch, name) as source:
                    tables.append(pa.ipc.open_file(source).read_all())
            cells = pa.concat_tables(tables)
            merged, kept = P.merge_and_keep(cells, horizon)
            yield Result(SMALL, "", to_ipc(pa.concat_tables([merged, P.merge_skew(cells)])))
            yield Result(OPEN, "", to_ipc(kept))

    return run


SMALL, BLOCK_FILE, OPEN, ROWS_FILE = -1, -2, -3, -4   # Result.bucket of a blob of rows, a block file, compacted
#                                                     cells, an ordered task's rows of one block bucket


class Ran(NamedTuple):
    """What run_tasks leaves: the profile's FINAL rows (but the closed groups `kept` holds), and the state
    after these requests."""
    rows: pa.Table
    kept: Kept


def run_tasks(spark: SparkSession, tasks: Sequence[Task], groups: dict[str, list[RowGroup]], *, window_us: int,
              extent_bytes: int, scratch: str, span_us: int, kept: Kept | None = None, run: str | None = None
              ) -> Ran:
    """Both jobs, after the state `kept` (None: from the trace's beginning): the profile rows of every group the
    tasks' requests and the state reach, and the state at the end of the groups (block files under `run`,
    default a folder in `scratch`). `scratch`: an empty directory every executor reaches (a local path or a URI,
    libs.io.storage)."""
    kept = kept or Kept.empty()
    run = run or storage.join(scratch, "state")
    parallelism = session_parallelism(spark)
    requests = sum(t.rows for t in tasks if t.kind in ("ordered", "device"))
    buckets = max(1, min(len(tasks), max(parallelism, math.ceil(requests / MERGE_ROWS))))
    started = time.perf_counter()
    end = max(stop(groups), kept.stop)
    spark_task_count = 0

    def job(ids: list[int], rows_files: dict[tuple[str, int], list[tuple[str, int]]] | None) -> list[Result]:
        nonlocal spark_task_count
        assigned = [[ids[j] for j in slot] for slot in slots([tasks[i] for i in ids], min(len(ids), 2 * parallelism))]
        spark_task_count += len(assigned)
        return spark_tasks(spark, len(assigned), _stage_one(
            tasks, groups, window_us=window_us, extent_bytes=extent_bytes, scratch=scratch, buckets=buckets,
            assigned=assigned, seen=kept.blocks, run=run, end=end, rows_files=rows_files)) if assigned else []

    # The block tasks of a device in several buckets after the rest: they read the rows its ordered tasks wrote by
    # block bucket (a device in one bucket reads its rows itself, with the rest).
    later = [t.kind == "block" and t.buckets > 1 for t in tasks]
    first = job([i for i, t in enumerate(tasks) if not later[i]], None)
    parts: dict[tuple[str, int], list[tuple[int, str, int]]] = {}
    for r in first:
        if r.bucket == ROWS_FILE:
            device, k, n, part = r.blob.decode().rsplit("\x1f", 3)
            parts.setdefault((device, int(k)), []).append((int(part), r.name, int(n)))
    # in time order (the ordered parts'), so a block task's rows need no sort when the files' groups are in order
    rows_files = {key: [(name, n) for _, name, n in sorted(files)] for key, files in parts.items()}
    first += job([i for i in range(len(tasks)) if later[i]], rows_files)
    new = from_ipc([r.blob for r in first if r.bucket == SMALL], P.PARTIAL)
    small = pa.concat_tables([kept.small, new])
    ended, still = P.runs_of_pieces(small)
    horizon = P.Horizon.after(end, window_us, still)
    counts = P.add_extent_counts([kept.extents, P.extent_counts(new)])
    driver = pa.concat_tables([kept.hist, P.extent_rows(counts, window_us), P.run_rows(ended, window_us),
                               P.run_rows(still, window_us, key=P.OPEN_RUN)])
    files: dict[int, list[str]] = {}
    blocks = {device: list(paths) for device, paths in kept.blocks.items() if not any(
        t.device == device and t.kind in ("block", "device") for t in tasks)}
    for r in first:
        if r.bucket >= 0:
            files.setdefault(r.bucket, []).append(r.name)
        elif r.bucket == BLOCK_FILE:
            blocks.setdefault(r.blob.decode(), []).append(r.name)
    driver_bucket = _buckets_of(driver, buckets)
    extra = {int(k): to_ipc(driver.filter(pa.array(driver_bucket == k))) for k in np.unique(driver_bucket)}
    keys = sorted(set(files) | set(extra))
    log.info("profile: %d tasks in %d Spark tasks, %.1f s", len(tasks), spark_task_count, time.perf_counter() - started)
    started = time.perf_counter()
    second = spark_tasks(spark, len(keys), _stage_two({i: files.get(k, []) for i, k in enumerate(keys)},
                                                {i: extra[k] for i, k in enumerate(keys) if k in extra}, scratch,
                                                horizon)) if keys else []
    log.info("profile: %d buckets merged in %.1f s", len(keys), time.perf_counter() - started)
    merged = from_ipc([r.blob for r in second if r.bucket == SMALL], P.FINAL)
    rows = pa.concat_tables([P.finish(small, merged, span_us=span_us, window_us=window_us), kept.closed])
    part = max([t.part for t in tasks if t.kind in ("ordered", "device")], default=kept.part)
    open_counts = counts.filter(pc.or_(pc.equal(counts.column("w"), -1),
                                       pc.greater(pc.add(counts.column("w"), window_us), end)))
    finished = new.filter(pc.equal(new.column("kind"), "kept"))       # open groups a task held whole
    finished = finished.set_column(0, "kind", pa.array(["hist"] * finished.num_rows, pa.string()))
    hist = pa.concat_tables([finished, from_ipc([r.blob for r in second if r.bucket == OPEN], P.PARTIAL)])
    return Ran(rows, Kept(end, part, P.kept_partials(small, horizon, still, part=part), hist, open_counts,
                          horizon.closed(rows), blocks))


def profile_trace(spark: SparkSession, warehouse: Path, trace_id: str, *, span_us: int,
                  window_us: int = 3_600_000_000, extent_bytes: int = 1 << 20,
                  rows_per_part: int = ROWS_PER_TASK, block_rows: int | None = None, full: bool = False) -> int:
    """Replaces the trace's `trace_profile` rows with its profile read from the `requests` files, after an
    append from the stored state and the new requests only (full: the whole trace); returns how many rows
    were written. Falls back to compute_trace_profile (Spark) for a table this reader cannot take (and drops
    the state). rows_per_part, block_rows: plan()'s task sizes."""

    if window_us < 0 or extent_bytes <= 0 or rows_per_part <= 0:
        raise ValueError(f"window_us >= 0, extent_bytes > 0, rows_per_part > 0 required, got "
                         f"{window_us}, {extent_bytes}, {rows_per_part}")
    return files_or_sql(
        lambda: _profile_files(spark, warehouse, trace_id, span_us=span_us, window_us=window_us,
                               extent_bytes=extent_bytes, rows_per_part=rows_per_part, block_rows=block_rows,
                               full=full),
        lambda: _profile_sql(spark, warehouse, trace_id, span_us=span_us, window_us=window_us,
                             extent_bytes=extent_bytes), f"profile {trace_id}")


def _profile_sql(spark: SparkSession, warehouse: Path, trace_id: str, *, span_us: int, window_us: int,
                 extent_bytes: int) -> int:
    """profile_trace through compute_trace_profile (Spark)."""
    ProfileState(warehouse, trace_id, window_us, extent_bytes).forget()
    persisted: list = []
    profile = P.compute_trace_profile(read_table(spark, warehouse, "requests", trace_id), span_us=span_us,
                                      window_us=window_us, extent_bytes=extent_bytes, persisted=persisted)
    try:
        replace_rows(profile, spark, warehouse, "trace_profile", {"trace_id": trace_id})
    finally:
        for df in persisted:
            df.unpersist()
    return read_table(spark, warehouse, "trace_profile", trace_id).count()


def _profile_files(spark: SparkSession, warehouse: Path, trace_id: str, *, span_us: int, window_us: int,
                   extent_bytes: int, rows_per_part: int, block_rows: int | None, full: bool) -> int:
    """profile_trace from the requests files (this module's tasks), resumed from the stored state unless `full`
    or it cannot be (libs.table_io.profile_state); Unsupported before anything is written."""
    files = trace_files(spark, warehouse, trace_id)
    state = ProfileState(warehouse, trace_id, window_us, extent_bytes)
    known = known_requests_state(warehouse, trace_id)     # before the passes: what they read (None: profiled whole)
    kept = None if full or known is None else state.load(known[1], set(files))
    tasks, groups = plan(files, rows_per_part=rows_per_part, parallelism=session_parallelism(spark),
                         block_rows=block_rows, start=kept.stop if kept else None,
                         part_base=kept.part + 1 if kept else 0)
    log.info("profile: %s", f"the requests from {kept.stop} us on, after the stored state" if kept else "whole trace")
    run = state.new_run() if known else None
    with scratch_dir(warehouse, f"profile-{trace_id}") as scratch:
        ran = run_tasks(spark, tasks, groups, window_us=window_us, extent_bytes=extent_bytes, scratch=str(scratch),
                        span_us=span_us, kept=kept, run=run)
    merged_at = time.perf_counter()
    replace_from_driver(spark, table_target(spark, warehouse, "trace_profile"), {"trace_id": trace_id}, ran.rows)
    if known and run:
        state.save(run, ran.kept, version=known[0], sha256=known[1], devices=sorted(files))
    log.info("profile: %d rows committed in %.1f s", ran.rows.num_rows, time.perf_counter() - merged_at)
    count = ran.rows.num_rows
    del ran
    release_memory()        # the driver's share of the merge, handed back before the next stage of its process
    return count
