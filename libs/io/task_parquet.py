"""Parquet written by the tasks' Python workers themselves, for the large results of a mapInArrow.

Spark's own path turns every Arrow batch a Python worker returns into JVM rows and encodes them to
Parquet again; for the tens of millions of rows of an access graph's pair counts that conversion is
most of the final stage, and pyarrow's writer does the same work in a fraction of the time.
Here each task writes its own output with pyarrow and returns only the file's name and row count.

Commit: every task attempt writes `part-<partition>-<random>.parquet` into the directory and
reports it; the driver keeps exactly the files that collect() returns (those of the successful
attempts) and deletes any other file there, so a retried or speculative attempt leaves nothing
behind. The directory must be empty or absent, and reachable from the driver and every executor
under the same location (any local path in local mode; a shared file system or an object-store URI,
libs.io.storage, on a cluster).

    counts = sink_parquet(frame, count_fn, COUNT_DDL, "/scratch/run-7/counts")
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType, _parse_datatype_string

from blockheat.libs.io import storage
from blockheat.libs.io.worker import python_task, release_after_stage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, GroupedData, SparkSession

log = logging.getLogger(__name__)

SINK_DDL = "name string, rows long"

ArrowFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def arrow_schema(ddl: str) -> pa.Schema:
    """The Arrow schema Spark uses for a DDL schema string (driver side: needs an active session)."""
    schema = _parse_datatype_string(ddl)
    if not isinstance(schema, StructType):
        raise ValueError(f"expected a struct schema like 'a long, b string', got {ddl!r}")
    return to_arrow_schema(schema)


def to_ipc(table: pa.Table) -> bytes:
    """A table as Arrow IPC stream bytes: how a task hands a small result back through collect()."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(blobs: Sequence[bytes], schema: pa.Schema) -> pa.Table:
    """The tables of to_ipc blobs concatenated (an empty table of `schema` for none)."""
    return pa.concat_tables([pa.ipc.open_stream(b).read_all() for b in blobs]) if blobs else schema.empty_table()


Opener = Callable[[str], tuple[pafs.FileSystem, str]]


def task_opener() -> Opener:
    """libs.io.storage.filesystem as the driver sees it, for a task's closure to open its locations with: pickled by
    reference, so each task opens them with its own process's settings (a test's stand-in for an object store
    travels with the closure instead)."""
    return storage.filesystem


def task_file_name(tag: str = "") -> str:
    """A file name no other task attempt can pick: the partition, the tag if any, and a random part."""
    context = TaskContext.get()
    tag = f"{tag}-" if tag else ""
    return f"part-{context.partitionId() if context is not None else 0:05d}-{tag}{uuid.uuid4().hex}.parquet"


def _conform(batch: pa.RecordBatch | pa.Table, schema: pa.Schema) -> pa.RecordBatch | pa.Table:
    if batch.schema == schema:
        return batch
    columns = [batch.column(f.name).cast(f.type) for f in schema]
    if isinstance(batch, pa.Table):
        return pa.Table.from_arrays(columns, schema=schema)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _written(name: str, rows: int) -> pa.Table:
    return pa.table({"name": pa.array([name]), "rows": pa.array([rows], pa.int64())})


def _writing(fn: ArrowFn, directory: str, schema: pa.Schema) -> ArrowFn:
    """fn, with its output written to one Parquet file per task attempt; yields SINK_DDL rows."""
    opener = task_opener()

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fs, root = opener(directory)
        name = task_file_name()
        writer, rows = None, 0
        try:
            for batch in fn(batches):
                if not batch.num_rows:
                    continue
                if writer is None:
                    writer = pq.ParquetWriter(f"{root}/{name}", schema, filesystem=fs,
                                              **storage.parquet_options(schema))
                writer.write_batch(_conform(batch, schema))
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
        if rows:
            yield from _written(name, rows).to_batches()

    return run


def _writing_groups(fn: Callable[[pa.Table], pa.Table], directory: str, schema: pa.Schema
                    ) -> Callable[[pa.Table], pa.Table]:
    """fn (one applyInArrow group in, a table out), with its output written to a Parquet file of its
    own; returns a SINK_DDL row (none for an empty result)."""
    opener = task_opener()

    def run(table: pa.Table) -> pa.Table:
        out = fn(table)
        if not out.num_rows:
            return _written("", 0).slice(0, 0)
        fs, root = opener(directory)
        name = task_file_name()
        pq.write_table(_conform(out, schema), f"{root}/{name}", filesystem=fs, **storage.parquet_options(schema))
        return _written(name, out.num_rows)

    return run


def _prepare(directory: str) -> str:
    """The directory as a location (libs.io.storage.normalize: local paths made absolute, URIs kept), created
    empty (an object-store prefix has nothing to create)."""
    directory = storage.normalize(directory)
    fs, root = storage.filesystem(directory)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.Directory:
        if fs.get_file_info(pafs.FileSelector(root)):
            raise FileExistsError(f"{directory}: the task Parquet sink needs an empty directory")
    elif info.type != pafs.FileType.NotFound:
        raise FileExistsError(f"{directory}: exists and is not a directory")
    storage.makedirs(directory)
    return directory


def remove_unreported(directory: str, kept: set[str], prefix: str = "") -> None:
    """Delete every file directly under `directory` (a local path or a URI) whose name, after `prefix`, is not
    in `kept`: what a failed or duplicate task attempt wrote."""
    fs, root = storage.filesystem(directory)
    for leftover in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if leftover.type == pafs.FileType.File and prefix + leftover.base_name not in kept:
            fs.delete_file(leftover.path)


def _read_back(spark: SparkSession, ddl: str, files: list[str]) -> DataFrame:
    """Spark's DataFrame over the kept files (locations), or an empty one of the schema."""
    if not files:
        return spark.createDataFrame([], ddl)
    return spark.read.schema(ddl).parquet(*files)


def _read_kept(spark: SparkSession, written: DataFrame, ddl: str, directory: str) -> DataFrame:
    """Run the writing job; delete every file it did not report; the reported files read back."""
    kept = {row["name"] for row in written.collect()}
    remove_unreported(directory, kept)
    return _read_back(spark, ddl, [storage.join(directory, name) for name in sorted(kept)])


def sink_parquet(frame: DataFrame, fn: ArrowFn, ddl: str, directory: str) -> DataFrame:
    """Run frame.mapInArrow(fn, ddl) with each task writing its output straight to Parquet under
    `directory`; returns those files read back (schema `ddl`). The caller owns the directory and
    removes it once the returned DataFrame is no longer needed."""
    schema = arrow_schema(ddl)
    directory = _prepare(directory)
    written = frame.mapInArrow(python_task(_writing(fn, directory, schema)), SINK_DDL)
    return _read_kept(frame.sparkSession, written, ddl, directory)


def sink_parquet_groups(grouped: GroupedData, fn: Callable[[pa.Table], pa.Table], ddl: str,
                        directory: str) -> DataFrame:
    """The same for grouped.applyInArrow(fn, ddl): each group's output is written to a file of its
    own (groups such as one access graph are large; many small groups make many small files)."""
    schema = arrow_schema(ddl)
    directory = _prepare(directory)
    written = grouped.applyInArrow(python_task(_writing_groups(fn, directory, schema)), SINK_DDL)
    return _read_kept(written.sparkSession, written, ddl, directory)


def sink_parquet_groups_multi(grouped: GroupedData, fn: Callable[[pa.Table], Mapping[str, pa.Table]],
                              ddls: Mapping[str, str], directory: str) -> dict[str, DataFrame]:
    """sink_parquet_groups for a function with several outputs: fn returns {name: table} (the names of
    `ddls`) and each group's table of each name is written under `directory`/name; returns {name: those
    files read back}. One pass for results that come from the same held data (e.g. a pruned graph and
    its runs), where separate jobs would each shuffle the data again."""
    schemas = {n: arrow_schema(ddl) for n, ddl in ddls.items()}
    directory = _prepare(directory)
    for n in ddls:
        storage.makedirs(storage.join(directory, n))
    opener = task_opener()

    def run(table: pa.Table) -> pa.Table:
        outs = fn(table)
        name = task_file_name()
        written = [(n, out.num_rows) for n, out in outs.items() if out.num_rows]
        fs, root = opener(directory)
        for n, _ in written:
            pq.write_table(_conform(outs[n], schemas[n]), f"{root}/{n}/{name}", filesystem=fs,
                           **storage.parquet_options(schemas[n]))
        return pa.table({"name": pa.array([f"{n}/{name}" for n, _ in written], pa.string()),
                         "rows": pa.array([r for _, r in written], pa.int64())})

    written = grouped.applyInArrow(python_task(run), SINK_DDL)
    kept = {row["name"] for row in written.collect()}
    spark = written.sparkSession
    out = {}
    for n, ddl in ddls.items():
        remove_unreported(storage.join(directory, n), kept, prefix=f"{n}/")
        out[n] = _read_back(spark, ddl, [storage.join(directory, *f.split("/"))
                                         for f in sorted(k for k in kept if k.startswith(f"{n}/"))])
    return out


@contextlib.contextmanager
def scratch_dir(warehouse: str | os.PathLike[str], label: str) -> Iterator[Path | str]:
    """A fresh directory `<warehouse>/_scratch/<label>-<random>` for a job's intermediate files (the
    warehouse is where every worker can reach), removed on exit whatever happens: a Path under a local
    warehouse, a URI string (libs.io.storage.join to go below it) under an object-store one."""
    parent = storage.join(storage.normalize(warehouse), "_scratch")
    where = storage.join(parent, f"{label}-{uuid.uuid4().hex[:12]}")
    storage.makedirs(where)
    try:
        yield Path(where) if storage.is_local(where) else where
    finally:
        try:
            storage.delete_tree(where)
        except OSError as exc:                        # not to hide the error the job may be raising
            log.warning("scratch %s not removed: %s", where, exc)
        if storage.is_local(parent):
            with contextlib.suppress(OSError):
                os.rmdir(parent)                      # only when no other job's scratch is there


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3            # glibc's mallopt parameters
#: glibc's limits as they stand in a process that has freed an array of 32 MiB or more (its dynamic threshold's
#: maximum, and twice that for trimming): what a numpy task's worker runs with.
USUAL_MMAP_BYTES, USUAL_TRIM_BYTES = 32 << 20, 64 << 20
REUSED_BYTES = 1 << 30
MAPPED_BYTES = 4 << 20


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") else None
    except OSError:                                         # not glibc: its own ways
        return None


def _usual_limits() -> None:
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, USUAL_MMAP_BYTES)
        libc.mallopt(M_TRIM_THRESHOLD, USUAL_TRIM_BYTES)


def _usual_limits_released() -> None:
    _usual_limits()
    release_memory()


@contextlib.contextmanager
def _heap_limits(mmap_bytes: int, trim_bytes: int, *, keep: bool = False) -> Iterator[None]:
    """Within: glibc's mmap and trim thresholds at these; after: its usual ones and the memory handed back (with
    `keep`, both before the worker's next task of another stage: worker.release_after_stage)."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, mmap_bytes)
        libc.mallopt(M_TRIM_THRESHOLD, trim_bytes)
    try:
        yield
    finally:
        if keep:
            release_after_stage(_usual_limits_released)
        else:
            _usual_limits_released()


def reused_heap() -> contextlib.AbstractContextManager[None]:
    """Within: glibc serves arrays of up to 1 GiB from its heap and keeps what is freed for the next ones, instead
    of a fresh mapping per array whose every page faults in anew (`blockheat graph` of 20 M requests on 8 devices:
    the workers' page faults 1.13 M -> 0.41 M, their system time 23.8 -> 14.6 s). After: glibc's usual limits
    (USUAL_MMAP_BYTES, USUAL_TRIM_BYTES) and the memory handed back (release_memory), both before the worker's next
    task of another stage (worker.release_after_stage), so the next device of the same pass reuses the pages
    (`blockheat heat` of 20 M requests on 8 devices: the tasks' page faults about 90,000 -> 33,000)."""
    return _heap_limits(REUSED_BYTES, REUSED_BYTES, keep=True)


def mapped_arrays() -> contextlib.AbstractContextManager[None]:
    """Within: glibc maps every allocation of MAPPED_BYTES or more on its own and unmaps it when freed, so a task
    that makes and drops many arrays of a few MB holds only the live ones (the profile's tasks: a worker's peak
    ~500 -> ~410 MiB on 20 M requests), where the usual 32 MiB threshold leaves the freed ones in the heap until
    the task ends. After: as reused_heap."""
    return _heap_limits(MAPPED_BYTES, USUAL_TRIM_BYTES)


def release_memory() -> None:
    """Hands the memory a task freed back to the OS: Arrow's allocator (mimalloc) and glibc's both keep
    freed pages for reuse (~100-200 MB per Python worker after a profile unit of a million requests, more
    after a simulation part's conversion), and the workers stay resident between tasks (measured: 595 MB per
    profile worker at the peak without this)."""
    pa.default_memory_pool().release_unused()
    libc = _glibc()
    if libc is not None:                                    # not glibc: nothing to trim
        libc.malloc_trim(0)
