"""Delta tables written by the tasks themselves: pyarrow Parquet files, then one commit from the driver.

Spark's Delta writer turns every Arrow batch a Python worker returns into JVM rows and encodes
them to Parquet again, and runs several jobs per write. Here each task writes its rows straight
into the table's directory with pyarrow (one file per partition value it holds, in Hive-style
directories as Delta's own writer makes them) and reports each file: path, size, rows, partition
values and Delta statistics. The driver then commits exactly the reported files, with the removal
of the rows being replaced, as one Delta commit through delta-rs (libs.io.delta_log): the same atomic
replace as `.write.mode("overwrite").option("replaceWhere", ...)`, with the predicate recorded in the
commit (delta_log.REPLACE_KEY) and the replaced scope as an application transaction, so two replaces of
one scope at once conflict and the later one is redone on top of the earlier. The files a replace
removes come from the table's snapshot as delta-rs reads it: no Spark job. The table may be on a local
file system or an object store (libs.io.storage).

Until the commit the new files are invisible to every reader (Delta reads only committed files).
Every file name carries the write's id: a failed write deletes all of its files (a task of the failed job
still running then deletes its own, see discard()), and a successful one those that no successful task attempt
reported.

The predicate is column = value terms, on partition columns or not. Rows written here carry those
values, so the files they replace are whole files; a file another writer made with both matching
and other rows is rewritten without the matching ones, as Delta's replaceWhere does.

    target = table_target(spark, warehouse, "extent_heat")        # libs.io.tables: the target of a blockheat table
    replace_by_tasks(spark, target, {"trace_id": "t1", "extent_bytes": 1 << 20, "window_us": 0}, frame)
"""
from __future__ import annotations

import dataclasses
import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from blockheat.libs.io import delta_log, storage
from blockheat.libs.io.delta_log import CommitConflict, file_path, sql_literal
from blockheat.libs.io.task_parquet import task_file_name
from blockheat.libs.io.worker import python_task

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ArrowFn = Callable[[Iterator[pa.RecordBatch]], Iterable[pa.RecordBatch | pa.Table]]

log = logging.getLogger(__name__)

# One row per file a task wrote: the path relative to the table (URI-encoded, as the Delta log
# holds it), bytes, rows, partition values and statistics (JSON, the Delta log's own encoding).
FILES_DDL = "path string, size long, rows long, partition string, stats string"
FILES_SCHEMA = pa.schema([
    pa.field("path", pa.string()), pa.field("size", pa.int64()), pa.field("rows", pa.int64()),
    pa.field("partition", pa.string()), pa.field("stats", pa.string()),
])

# Characters Hive-style partition directories escape as %XX (Spark's ExternalCatalogUtils set).
_PATH_ESCAPE = frozenset('"#%\'*/:=?\\\x7f{[]^') | frozenset(chr(c) for c in range(0x20))
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
# delta-rs checks a commit's conflicts per table, not per partition: a replace that loses the race to a commit of
# another trace is redone on the new snapshot (its removals recomputed), after a randomised, growing pause.
COMMIT_RETRIES = 20


@dataclass(frozen=True)
class TableTarget:
    """What a task needs to write files for one table (picklable, sent to the executors)."""

    name: str
    root: str                        # the table's location: an absolute path or a URI (libs.io.storage)
    schema: pa.Schema                # every column in table order, partition columns included
    partition_columns: tuple[str, ...]
    stats_columns: tuple[str, ...]   # integer columns Delta keeps min/max on (others: counts only)
    write_id: str = ""               # in every file name of one write (set per write by replace_by_tasks)

    def for_write(self) -> TableTarget:
        """This target with a fresh write id: one per write, so cleaning up after it touches no other."""
        return dataclasses.replace(self, write_id=uuid.uuid4().hex[:16])


@dataclass(frozen=True)
class Append:
    """A commit that adds files and removes no rows but those of the files named in `remove` (add paths, as the
    log holds them): an append (`remove` empty), or the files an append re-sorted with its new rows. `scope` names
    the rows it belongs to (column -> value, e.g. the trace), so appends to one scope are serialised."""

    scope: Mapping[str, Any]
    remove: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"scope": dict(self.scope), "remove": list(self.remove)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Append:
        return cls(dict(d["scope"]), tuple(d["remove"]))


#: What a commit replaces: the rows where column = value for every item, or an Append.
Where = Mapping[str, Any] | Append


def sql_string(text: str) -> str:
    """`text` as a Spark SQL string literal, its backslashes and quotes escaped (a table's LOCATION under a
    warehouse path with a quote)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def with_commit_retry(action: Callable[[], object], what: str) -> None:
    """Retry a commit that lost an optimistic-concurrency race (CommitConflict); let all else propagate."""
    for attempt in range(1, COMMIT_RETRIES + 1):
        try:
            action()
            return
        except CommitConflict as exc:
            if attempt == COMMIT_RETRIES:
                raise
            log.info("%s: concurrent commit (%s), retry %d", what, type(exc).__name__, attempt)
            time.sleep(min(2.0, 0.05 * 2 ** attempt) * random.uniform(0.5, 1.5))


def escape_partition(value: str) -> str:
    """A partition value as a directory name part, escaped as Spark's writer does."""
    return "".join(f"%{ord(c):02X}" if c in _PATH_ESCAPE else c for c in value)


def _partition_text(value: Any) -> str | None:
    """A partition value as the Delta log writes it (a string; None for null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _only_value(column: pa.ChunkedArray | pa.Array) -> pa.Scalar | None:
    """The value every row of a non-empty column holds, None when the rows differ or some is null (one comparison
    per row: a third of the time hashing them takes)."""
    if not len(column) or column.null_count:
        return None
    first = column[0]
    return first if pc.all(pc.equal(column, first)).as_py() else None


def _as_type(column: pa.ChunkedArray | pa.Array, wanted: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """column as type `wanted`; a dictionary is kept (re-indexed to int32) or made when `wanted` is one (of one
    entry without hashing the rows when they all hold one value: a device's or a trace's name)."""
    if column.type == wanted:
        return column
    if pa.types.is_dictionary(wanted):
        if not pa.types.is_dictionary(column.type):
            only = _only_value(column)
            if only is not None:
                return pa.DictionaryArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), len(column)),
                                                      pa.array([only.as_py()], wanted.value_type))
            column = pc.dictionary_encode(column.cast(wanted.value_type))
        return column.cast(wanted)
    return column.cast(wanted)


def _stats(table: pa.Table, columns: tuple[str, ...]) -> dict[str, Any]:
    stats: dict[str, Any] = {"numRecords": table.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for name in columns:
        column = table.column(name)
        stats["nullCount"][name] = column.null_count
        if column.null_count < len(column):
            bounds = pc.min_max(column)
            stats["minValues"][name] = bounds["min"].as_py()
            stats["maxValues"][name] = bounds["max"].as_py()
    return stats


def _merge_stats(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {"numRecords": a["numRecords"] + b["numRecords"], "minValues": {}, "maxValues": {},
           "nullCount": {k: a["nullCount"][k] + b["nullCount"][k] for k in a["nullCount"]}}
    for key, pick in (("minValues", min), ("maxValues", max)):
        for name in a["nullCount"]:
            values = [s[key][name] for s in (a, b) if name in s[key]]
            if values:
                out[key][name] = pick(values)
    return out


#: Under a table's root: one empty file per write discarded after a failure, named by its write id (Delta and
#: Spark skip names starting with _; libs.io.vacuum's sweep deletes the markers older than LONGEST_WRITE).
ABANDONED_DIR = "_abandoned"


class WriteAbandoned(RuntimeError):
    """A task closed its files after the driver had discarded the write: the files are deleted."""


class FileWriter:
    """Task side: rows in (any batches with the target's columns), one Parquet file per partition value;
    close() returns the FILES_SCHEMA rows that describe them. Rows are buffered up to `buffer_rows` in
    all, so row groups are large (Spark hands Arrow batches of 10,000 rows) and statistics are
    computed once per row group."""

    def __init__(self, target: TableTarget, buffer_rows: int = 1 << 20) -> None:
        self.target = target
        self.buffer_rows = buffer_rows
        # Strings are written dictionary-encoded (what Parquet stores anyway): per-file constants such as
        # a device name then cost one value, not one string per row.
        self.data_schema = pa.schema([
            pa.field(f.name, pa.dictionary(pa.int32(), f.type), f.nullable) if pa.types.is_string(f.type) else f
            for f in target.schema if f.name not in target.partition_columns])
        self._open: dict[tuple[Any, ...], tuple[pq.ParquetWriter, str, dict[str, Any]]] = {}
        self._pending: dict[tuple[Any, ...], list[pa.Table]] = {}
        self._pending_rows = 0

    def _file(self, key: tuple[Any, ...]) -> tuple[pq.ParquetWriter, str, dict[str, Any]]:
        if key not in self._open:
            parts = [f"{c}={escape_partition(v) if v is not None else HIVE_NULL}"
                     for c, v in zip(self.target.partition_columns, map(_partition_text, key), strict=True)]
            relative = "/".join([*parts, task_file_name(self.target.write_id)])
            full = storage.join(self.target.root, *relative.split("/"))
            storage.makedirs(storage.parent(full))
            fs, path = storage.filesystem(full)
            writer = pq.ParquetWriter(path, self.data_schema, filesystem=fs,
                                      **storage.parquet_options(self.data_schema))
            self._open[key] = (writer, relative, {})
        return self._open[key]

    def write(self, rows: pa.Table | pa.RecordBatch) -> None:
        """Write rows (the target's columns, in any order; cast to the table's types)."""
        if not rows.num_rows:
            return
        table = pa.Table.from_batches([rows]) if isinstance(rows, pa.RecordBatch) else rows
        data = pa.Table.from_arrays([_as_type(table.column(f.name), f.type) for f in self.data_schema],
                                    schema=self.data_schema)
        keys = list(self.target.partition_columns)
        if not keys:
            self._buffer((), data)
            return
        single = {}
        for column in keys:                           # the common case: one partition value in the batch
            only = _only_value(table.column(column))
            if only is None:
                break
            single[column] = only.as_py()
        else:
            self._buffer(tuple(single[c] for c in keys), data)
            return
        plain = pa.table({c: _as_type(table.column(c), self.target.schema.field(c).type) for c in keys})
        for key in plain.group_by(keys, use_threads=False).aggregate([]).to_pylist():
            mask = None
            for column, value in key.items():
                match = pc.is_null(plain.column(column)) if value is None else pc.equal(plain.column(column), value)
                mask = match if mask is None else pc.and_(mask, match)
            self._buffer(tuple(key[c] for c in keys), data.filter(mask))

    def _buffer(self, key: tuple[Any, ...], data: pa.Table) -> None:
        self._pending.setdefault(key, []).append(data)
        self._pending_rows += data.num_rows
        while self._pending_rows >= self.buffer_rows:
            self._flush(max(self._pending, key=lambda k: sum(t.num_rows for t in self._pending[k])))

    def _flush(self, key: tuple[Any, ...]) -> None:
        data = pa.concat_tables(self._pending.pop(key)).combine_chunks()
        self._pending_rows -= data.num_rows
        writer, _, stats = self._file(key)
        writer.write_table(data, row_group_size=max(data.num_rows, 1))
        piece = _stats(data, self.target.stats_columns)
        merged = _merge_stats(stats, piece) if stats else piece
        stats.clear()
        stats.update(merged)

    def close(self) -> pa.Table:
        """Close the files and describe them; raises WriteAbandoned, deleting them, when the write was discarded
        meanwhile (a task still running after its job failed)."""
        for key in list(self._pending):
            self._flush(key)
        for writer, _, _ in self._open.values():
            writer.close()
        if self.target.write_id and storage.exists(_abandoned_marker(self.target)):
            for _, relative, _ in self._open.values():
                storage.delete(storage.join(self.target.root, *relative.split("/")))
            self._open.clear()
            raise WriteAbandoned(f"{self.target.name}: write {self.target.write_id} was discarded before this task "
                                 "closed its files; they are deleted")
        rows = []
        for key, (_, relative, stats) in self._open.items():
            size = storage.size(storage.join(self.target.root, *relative.split("/")))
            partition = dict(zip(self.target.partition_columns, map(_partition_text, key), strict=True))
            rows.append({"path": quote(relative, safe="/="), "size": size, "rows": stats["numRecords"],
                         "partition": json.dumps(partition), "stats": json.dumps(stats)})
        self._open.clear()
        return pa.Table.from_pylist(rows, schema=FILES_SCHEMA)


def write_files(target: TableTarget, fn: ArrowFn | None = None
                ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function: fn's output (the input itself without fn) written into the table's
    directory; yields FILES_DDL rows, one per file."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        writer = FileWriter(target)
        for out in (fn(batches) if fn is not None else batches):
            writer.write(out)
        yield from writer.close().to_batches()

    return run


def _file_path(target: TableTarget, relative_uri: str) -> str:
    return file_path(target.root, relative_uri)


def _abandoned_marker(target: TableTarget) -> str:
    return storage.join(target.root, ABANDONED_DIR, target.write_id)


def discard(target: TableTarget, keep: Iterable[Any] | None = None) -> int:
    """Delete the files of this write (its write_id) that are not in `keep`: all of them after a refused
    or failed write (keep None), those of failed task attempts after a commit. Returns how many.

    A failed write is first marked abandoned (an empty file under the table's ABANDONED_DIR): a task of a failed
    job may still be running, and one that closes its files after the marker exists deletes them itself
    (FileWriter.close), so its files are gone whichever of the two comes first."""
    if keep is None and target.write_id:
        storage.write_bytes(_abandoned_marker(target), b"")
    kept = {_file_path(target, f["path"] if isinstance(f, Mapping) else f.path) for f in keep or ()}
    marker = f"-{target.write_id}-"
    deleted = 0
    for path, _ in list(storage.files_under(target.root)):
        if marker in storage.name(path) and "/_delta_log/" not in path and path not in kept and storage.delete(path):
            deleted += 1
    return deleted


def _add_action(target: TableTarget, f: Any) -> delta_log.AddAction:
    row = f if isinstance(f, Mapping) else f.asDict()
    return delta_log.add_action(row, storage.mtime_ms(_file_path(target, row["path"])))


def _uniform(path: str, where: Mapping[str, Any]) -> bool | None:
    """From the Parquet footer: True when every row of the file has column = value for each item of
    `where`, False when none has, None when it cannot tell (mixed rows, or no statistics)."""
    fs, local = storage.filesystem(path)
    meta = pq.ParquetFile(local, filesystem=fs).metadata
    if meta.num_rows == 0:
        return False
    index = {meta.schema.column(i).name: i for i in range(meta.num_columns)}
    verdicts = set()
    for g in range(meta.num_row_groups):
        group: bool | None = True
        for column, value in where.items():
            stats = meta.row_group(g).column(index[column]).statistics
            if stats is None or not stats.has_min_max:
                return None
            if value < stats.min or value > stats.max:
                group = False                          # no row of this group matches every term
                break
            if not (stats.min == value == stats.max and stats.null_count == 0):
                group = None
        if group is None:
            return None
        verdicts.add(group)
    return verdicts.pop() if len(verdicts) == 1 else None


def _rewrite_without(target: TableTarget, add: dict[str, Any], where: Mapping[str, Any]) -> dict[str, Any] | None:
    """A new file holding the rows of a mixed file that the replace keeps (rows where some `where`
    column differs or is null); its FILES_DDL row, or None when no row is kept. Its name does not carry the
    write's id, so discard() never takes it (an attempt that loses its commit deletes it itself)."""
    fs, path = storage.filesystem(_file_path(target, add["path"]))
    table = pq.read_table(path, filesystem=fs)
    match = None
    for column, value in where.items():
        equal = pc.fill_null(pc.equal(table.column(column), value), False)
        match = equal if match is None else pc.and_(match, equal)
    kept = table.filter(pc.invert(match))
    if not kept.num_rows:
        return None
    relative = "/".join([*add["path"].split("/")[:-1], quote(task_file_name(f"{target.write_id}k"))])
    fs, path = storage.filesystem(_file_path(target, relative))
    pq.write_table(kept, path, filesystem=fs, **storage.parquet_options(kept.schema))
    return {"path": relative, "size": storage.size(_file_path(target, relative)), "rows": kept.num_rows,
            "partition": json.dumps(add["partitionValues"]), "stats": json.dumps(_stats(kept, target.stats_columns))}


def files_matching(root: str, where: Mapping[str, Any], partition_columns: tuple[str, ...]
                   ) -> tuple[int, list[dict[str, Any]]]:
    """The table's version and the add actions of its files that may hold rows matching `where` (every file in
    the partitions `where` names)."""
    snap = delta_log.snapshot(root)
    wanted = {c: _partition_text(v) for c, v in where.items() if c in partition_columns}
    return snap.version, [add for add in snap.files
                          if all(add["partitionValues"].get(c) == v for c, v in wanted.items())]


def scope_id(target: TableTarget, where: Where) -> str:
    """The application id a replace of `where` (or an append to its scope) records: the table and the `where` term on
    its first partition column (e.g. the trace), so writes of one trace's rows of one table are serialised and others
    are not."""
    where = where.scope if isinstance(where, Append) else where
    first = target.partition_columns[0] if target.partition_columns else None
    term = f"{first}={_partition_text(where[first])}" if first in where else "*"
    return f"blockheat.replace:{target.name}:{term}"


def commit_replace(spark: SparkSession | None, target: TableTarget, where: Where,
                   files: Iterable[Any], *, txn: str | None = None) -> int:
    """One Delta commit: remove the table's rows where column = value for every item of `where`, add
    `files` (FILES_DDL rows). Files in partitions outside `where` are not read; a file whose footer
    shows every row matches is removed, one with some matching rows is rewritten without them (only
    files another writer made can be mixed: the rows written here carry the `where` values). Retried
    when a concurrent commit wins the race (the removals are recomputed). Returns the new version; on
    failure every file of this write is deleted.

    With `txn` (one step of a multi-table commit, libs.io.journal) the commit also records the application
    transaction `txn` and is not made when the table already has it (another process finished the step: the
    table's latest version is returned); a failure keeps the files, which the journal still names.

    With an Append for `where` nothing is removed but the files it names (ValueError when one of them is no longer
    in the table: another writer changed those rows)."""
    files = [_as_dict(f) for f in files]
    if isinstance(where, Append):
        return _commit_append(target, where, files, txn)
    columns = [f.name for f in target.schema]
    unknown = sorted(set(where) - set(columns))
    if not where or unknown:
        raise ValueError(f"replace of {target.name}: the predicate needs columns of the table, got {sorted(where)}")
    if not target.write_id:
        raise ValueError(f"replace of {target.name}: the target has no write id (use target.for_write())")
    predicate = " AND ".join(f"{column} = {sql_literal(value)}" for column, value in where.items())
    data_where = {c: v for c, v in where.items() if c not in target.partition_columns}
    adds = [_add_action(target, f) for f in files]
    version: list[int] = []
    rewritten: list[dict[str, Any]] = []

    def drop_rewritten() -> None:
        for kept in rewritten:
            storage.delete(_file_path(target, kept["path"]))
        rewritten.clear()

    def attempt() -> None:
        drop_rewritten()
        if txn is not None and delta_log.has_transaction(target.root, txn):
            version.append(delta_log.table_version(target.root) or 0)
            return
        removes = []
        read, matching = files_matching(target.root, where, target.partition_columns)
        for add in matching:
            if data_where:
                uniform = _uniform(_file_path(target, add["path"]), data_where)
                if uniform is False:
                    continue                           # Delta's statistics could not exclude it; the footer does
                if uniform is None and (kept := _rewrite_without(target, add, data_where)) is not None:
                    rewritten.append(kept)
            removes.append(add)
        # What Delta's replaceWhere records: the new rows (kept rows of a rewritten file not counted).
        version.append(delta_log.commit(
            target.root, [*adds, *(_add_action(target, k) for k in rewritten)], removes,
            app_id=scope_id(target, where), also=(txn,) if txn else (), read_version=read,
            info={delta_log.REPLACE_KEY: predicate, "blockheat.metrics": _commit_metrics(files, removes)}))

    return _committed(target, attempt, f"replace {target.name} where {predicate}", files, txn, version,
                      on_failure=drop_rewritten)


def _commit_metrics(files: Sequence[Mapping[str, Any]], removes: Sequence[Mapping[str, Any]]) -> str:
    """The commit's "blockheat.metrics" (JSON): files, rows and bytes added, files and bytes removed."""
    return json.dumps({"numFiles": len(files), "numOutputRows": sum(int(f["rows"]) for f in files),
                       "numOutputBytes": sum(int(f["size"]) for f in files), "numRemovedFiles": len(removes),
                       "numRemovedBytes": sum(int(r.get("size") or 0) for r in removes)})


def _committed(target: TableTarget, attempt: Callable[[], None], what: str, files: list[dict[str, Any]],
               txn: str | None, version: list[int], on_failure: Callable[[], None] | None = None) -> int:
    """attempt() under with_commit_retry, then the clean-up both commit forms share: on failure this write's files
    deleted (unless a journal step still names them, `txn`), on success the files of failed task attempts.
    Returns the version attempt() recorded."""
    try:
        with_commit_retry(attempt, what)
    except BaseException:
        if on_failure is not None:
            on_failure()
        if txn is None:
            discard(target)
        raise
    if txn is None and (stray := discard(target, keep=files)):
        log.info("%s: deleted %d file(s) of failed task attempts", target.name, stray)
    return version[-1]


def _commit_append(target: TableTarget, append: Append, files: list[dict[str, Any]], txn: str | None) -> int:
    """commit_replace's form for an Append."""
    if not target.write_id:
        raise ValueError(f"append to {target.name}: the target has no write id (use target.for_write())")
    adds = [_add_action(target, f) for f in files]
    version: list[int] = []

    def attempt() -> None:
        if txn is not None and delta_log.has_transaction(target.root, txn):
            version.append(delta_log.table_version(target.root) or 0)
            return
        wanted = set(append.remove)
        read, matching = files_matching(target.root, append.scope, target.partition_columns)
        removes = [add for add in matching if add["path"] in wanted]
        if len(removes) != len(wanted):
            gone = sorted(wanted - {add["path"] for add in removes})
            raise ValueError(f"append to {target.name}: {len(gone)} file(s) it re-sorts are no longer in the table "
                             f"(first: {gone[0]}); another writer changed these rows")
        version.append(delta_log.commit(
            target.root, adds, removes, app_id=scope_id(target, append), also=(txn,) if txn else (),
            read_version=read, info={delta_log.APPEND_KEY: json.dumps(append.to_json()),
                  "blockheat.metrics": _commit_metrics(files, removes)}))

    what = f"append to {target.name} of " + " AND ".join(f"{c} = {sql_literal(v)}" for c, v in append.scope.items())
    return _committed(target, attempt, what, files, txn, version)


def _as_dict(f: Any) -> dict[str, Any]:
    """A FILES_DDL row (a Spark Row or a mapping) as a dict."""
    return dict(f) if isinstance(f, Mapping) else f.asDict()


def replace_by_tasks(spark: SparkSession, target: TableTarget, where: Mapping[str, Any], frame: DataFrame,
                     fn: ArrowFn | None = None) -> int:
    """Run frame.mapInArrow with every task writing fn's output (frame's rows without fn) into the
    table, then commit_replace; nothing is committed, and the written files are deleted, if any of it
    fails. Returns the new version."""
    return write_by_tasks(spark, target, where, frame, fn).commit(spark)[target.name]


def write_by_tasks(spark: SparkSession, target: TableTarget, where: Where, frame: DataFrame,
                   fn: ArrowFn | None = None) -> PendingWrite:
    """replace_by_tasks's files, written and not committed (the files are deleted if the pass fails)."""
    target = target.for_write()
    try:
        files = frame.mapInArrow(python_task(write_files(target, fn)), FILES_DDL).collect()
    except BaseException:
        discard(target)
        raise
    return PendingWrite({target.name: (target, where)}, [{**f.asDict(), "table": target.name} for f in files], [])


def replace_from_driver(spark: SparkSession, target: TableTarget, where: Mapping[str, Any], rows: pa.Table) -> int:
    """commit_replace of a few rows the driver holds, written by the driver itself (no Spark job).
    The `where` values are stamped on every row."""
    return write_from_driver(target, where, rows).commit(spark)[target.name]


def write_from_driver(target: TableTarget, where: Mapping[str, Any], rows: pa.Table) -> PendingWrite:
    """replace_from_driver's file, written and not committed."""
    target = target.for_write()
    for column, value in where.items():
        rows = rows.drop_columns([column]) if column in rows.column_names else rows
        rows = rows.append_column(column, pa.repeat(pa.scalar(value, target.schema.field(column).type), rows.num_rows))
    writer = FileWriter(target)
    try:
        writer.write(rows)
        files = writer.close().to_pylist()
    except BaseException:
        discard(target)
        raise
    return PendingWrite({target.name: (target, where)}, [{**f, "table": target.name} for f in files], [])


SIDE = "_side"     # the table name under which write_tables_by_tasks's fn returns small rows to the driver


@dataclass
class PendingWrite:
    """Files written into one or more tables, not committed: invisible to every reader until commit(),
    deleted by discard(). `files` are FILES_DDL rows with their `table`; `side` holds the rows fn returned
    under the name SIDE (as dicts)."""

    replaces: Mapping[str, tuple[TableTarget, Where]]   # name -> (target with its write id, where or Append)
    files: list[Any]
    side: list[dict[str, Any]]
    done: bool = False

    def table_files(self, name: str) -> list[dict[str, Any]]:
        """The FILES_DDL rows (dicts, without `table`) written into table `name`."""
        rows = (_as_dict(f) for f in self.files)
        return [{k: v for k, v in f.items() if k != "table"} for f in rows if f["table"] == name]

    def commit(self, spark: SparkSession | None) -> dict[str, int]:
        """One replace commit per table, in the order of `replaces` (each atomic; for several tables at once,
        all or none, see libs.io.journal). Returns name -> new version."""
        versions: dict[str, int] = {}
        try:
            for name, (target, where) in self.replaces.items():
                versions[name] = commit_replace(spark, target, where, self.table_files(name))
        except BaseException:
            for name, (target, _) in self.replaces.items():
                if name not in versions:
                    discard(target)
            raise
        finally:
            self.done = True
        return versions

    def discard(self) -> None:
        """Delete the files (nothing once committed or handed to a journal)."""
        if not self.done:
            for target, _ in self.replaces.values():
                discard(target)
            self.done = True


def write_tables_by_tasks(spark: SparkSession, replaces: Mapping[str, tuple[TableTarget, Where]],
                          frame: DataFrame, fn: Callable[[Iterator[pa.RecordBatch]], Iterable[tuple[str, pa.Table]]]
                          ) -> PendingWrite:
    """Several tables from one pass, not committed yet: fn yields (table name, rows) pairs, or (SIDE, rows)
    for small rows the driver gets back; every task writes each table's rows into that table. If the
    pass fails, its files are deleted."""
    targets = {name: target.for_write() for name, (target, _) in replaces.items()}

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        writers = {name: FileWriter(target) for name, target in targets.items()}
        side: list[str] = []
        for name, rows in fn(batches):
            if name == SIDE:
                side += [json.dumps(r) for r in rows.to_pylist()]
            else:
                writers[name].write(rows)
        for name, writer in writers.items():
            done = writer.close()
            yield from done.add_column(0, "table", pa.repeat(pa.scalar(name, pa.string()), done.num_rows)).to_batches()
        if side:
            yield pa.RecordBatch.from_pydict({"table": [SIDE] * len(side), "path": [None] * len(side),
                                              "size": [None] * len(side), "rows": [None] * len(side),
                                              "partition": [None] * len(side), "stats": side},
                                             schema=FILES_SCHEMA.insert(0, pa.field("table", pa.string())))

    try:
        written = frame.mapInArrow(python_task(run), f"table string, {FILES_DDL}").collect()
    except BaseException:
        for target in targets.values():
            discard(target)
        raise
    return PendingWrite({name: (targets[name], where) for name, (_, where) in replaces.items()},
                        [f for f in written if f.table != SIDE],
                        [json.loads(f.stats) for f in written if f.table == SIDE])


def replace_tables_by_tasks(spark: SparkSession, replaces: Mapping[str, tuple[TableTarget, Where]],
                            frame: DataFrame, fn: Callable[[Iterator[pa.RecordBatch]], Iterable[tuple[str, pa.Table]]]
                            ) -> dict[str, int]:
    """write_tables_by_tasks, then one replace commit per table, in the order of `replaces` (name ->
    (target, where)). Nothing is committed if the pass fails. Returns name -> new version."""
    return write_tables_by_tasks(spark, replaces, frame, fn).commit(spark)


__all__ = [
    "ABANDONED_DIR",
    "FILES_DDL",
    "SIDE",
    "Append",
    "FileWriter",
    "PendingWrite",
    "TableTarget",
    "Where",
    "WriteAbandoned",
    "commit_replace",
    "discard",
    "replace_by_tasks",
    "replace_from_driver",
    "replace_tables_by_tasks",
    "sql_string",
    "with_commit_retry",
    "write_by_tasks",
    "write_files",
    "write_from_driver",
    "write_tables_by_tasks",
]
