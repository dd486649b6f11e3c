"""A Delta table's state, history, creation and commits through delta-rs (the `deltalake` package), without Spark.

A job's first Delta read through Spark is slow on a fresh driver (the log's state rebuilt by Spark jobs, the
reader's classes loaded and compiled) even for the one-row `traces` table; delta-rs reads the log in
milliseconds, on a local path or an object store alike (libs.io.storage gives it the store's settings).

A table whose files cannot be read as they are (deletion vectors, column mapping) raises LogUnreadable from
snapshot(): the caller reads it through Spark.

Commits: a commit is one new log version, written with put-if-absent (a local file system's hard link, S3's
conditional put), so two writers never both write one version and no commit is lost; a writer that finds its
version taken rebases on the winner and retries when the two do not conflict. Every replace (commit()) also
records an application transaction on its table and scope (`app_id`): two replaces of the same scope at once
conflict, and the loser recomputes what it removes (libs.io.delta_files).
"""
from __future__ import annotations

import datetime as dt
import json
import struct
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

from blockheat.libs.io import arrow_values, storage

#: The commitInfo key under which a replace records its predicate (column = value terms, libs.io.delta_files).
REPLACE_KEY = "blockheat.replace"
#: The commitInfo key under which an append records its scope and the files it re-sorted (libs.io.delta_files).
APPEND_KEY = "blockheat.append"
#: The commitInfo key of a commit's own id (how commit() finds the version it wrote).
COMMIT_KEY = "blockheat.commit"
# Reader features that leave a file's rows as they are in the file (deletion vectors: only while no file has one).
_PLAIN_READER_FEATURES = frozenset({"timestampNtz", "vacuumProtocolCheck", "deletionVectors"})


class LogUnreadable(Exception):
    """The table has something its files cannot be read without (the caller reads it through Spark)."""


class CommitConflict(Exception):
    """A concurrent commit changed what this one read (retried by the caller with a fresh snapshot)."""


@dataclass(frozen=True)
class Snapshot:
    """A version of a table: its files' add actions (as in the log: path relative and URL-encoded,
    partitionValues, size) and its metadata (partitionColumns, configuration)."""

    root: str
    version: int
    files: tuple[dict[str, Any], ...]
    metadata: dict[str, Any]

    def path(self, add: dict[str, Any]) -> str:
        return file_path(self.root, add["path"])


def file_path(root: str, relative_uri: str) -> str:
    """The location of a file the log names by a URI relative to the table's root (URL-encoded)."""
    return storage.join(root, *unquote(relative_uri).split("/"))


def _open(root: str, version: int | None = None) -> DeltaTable:
    try:
        return DeltaTable(storage.delta_uri(root), version=version, storage_options=storage.delta_options(root))
    except TableNotFoundError:
        raise LogUnreadable(f"{root}: no Delta log") from None


def is_table(root: str) -> bool:
    """Whether a Delta table exists at `root`."""
    return DeltaTable.is_deltatable(storage.delta_uri(root), storage.delta_options(root))


def table_version(root: str) -> int | None:
    """The table's latest version (None when there is no table)."""
    try:
        return _open(root).version()
    except LogUnreadable:
        return None


def _check(table: DeltaTable, where: str) -> None:
    protocol = table.protocol()
    features = set(protocol.reader_features or ())
    if protocol.min_reader_version > 3 or features - _PLAIN_READER_FEATURES:
        raise LogUnreadable(f"{where}: reader protocol {protocol}")
    mode = (table.metadata().configuration or {}).get("delta.columnMapping.mode", "none")
    if mode != "none":
        raise LogUnreadable(f"{where}: column mapping mode {mode}")


def _readable(root: str, version: int | None = None) -> DeltaTable:
    """The table at `version`, when its files hold its rows as they are (else LogUnreadable)."""
    table = _open(root, version)
    _check(table, root)
    if "deletionVectors" in set(table.protocol().reader_features or ()) and \
            _arrow(table.deletion_vectors()).num_rows:
        raise LogUnreadable(f"{root}: a file has a deletion vector")
    return table


def snapshot(root: str, version: int | None = None) -> Snapshot:
    """The table's files at `version` (default: the latest)."""
    table = _readable(root, version)
    files = _add_rows(table)
    meta = table.metadata()
    return Snapshot(root, table.version(), tuple(files),
                    {"partitionColumns": list(meta.partition_columns), "configuration": dict(meta.configuration)})


def read(root: str, columns: Sequence[str], where: Mapping[str, Any] | None = None, *,
         version: int | None = None) -> pa.Table:
    """`columns` of the table at `version` (default: the latest), in the rows where column == value for each item
    of `where` (a partition column's value as the log writes it), read without Spark: for the small catalog tables a
    command lists or looks up. The files are read by pyarrow's own file system (delta-rs's, through
    to_pyarrow_table, can abort the interpreter at exit). LogUnreadable when there is no table, or its files cannot
    be read as they are."""
    table = _readable(root, version)
    partitions = list(table.metadata().partition_columns)
    schema = pa.schema(table.schema().to_arrow())
    wanted = pa.schema([schema.field(c) for c in columns])
    where = dict(where or {})
    stored = [c for c in columns if c not in partitions]
    tests = {c: v for c, v in where.items() if c not in partitions}
    read = stored + [c for c in tests if c not in stored]
    parts = [pa.Table.from_batches([], wanted)]       # not empty_table(), which loads pandas
    for add in _add_rows(table):
        values = add["partitionValues"]
        if any(values.get(c) != v for c, v in where.items() if c in partitions):
            continue
        fs, path = storage.filesystem(file_path(root, add["path"]))
        with fs.open_input_file(path) as source:
            part = pq.ParquetFile(source).read(columns=read)
        for c, v in tests.items():
            part = part.filter(pc.equal(part[c], _repeat(v, part.num_rows) if isinstance(v, str) else v))
        for c in columns:
            if c in partitions:
                part = part.append_column(c, _repeat(values.get(c), part.num_rows))
        parts.append(part.select(list(columns)).cast(wanted))
    return pa.concat_tables(parts)


def sql_literal(value: Any) -> str:
    """A partition value as a SQL literal in a replace predicate ('text', 3, 0.5); quotes and backslashes
    are refused rather than escaped."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TypeError(f"partition value {value!r}: only str, int and float are supported")
    if isinstance(value, str):
        if "'" in value or "\\" in value:
            raise ValueError(f"partition value {value!r} contains a quote or backslash")
        return f"'{value}'"
    return repr(value)


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of a table read() gave, as Table.to_pylist() gives them (a column of UTC timestamps as aware
    datetimes; time-zoned timestamps nested in other types naive, in UTC), without pandas (arrow_values)."""
    columns = {}
    for field in table.schema:
        values = arrow_values.utc_values(table.column(field.name))
        if pa.types.is_timestamp(field.type) and field.type.tz in ("UTC", "+00:00"):
            values = [None if v is None else v.replace(tzinfo=dt.UTC) for v in values]
        columns[field.name] = values
    return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def _repeat(value: str | None, n: int) -> pa.Array:
    """`value` n times as a string array, built from its buffers: pa.array() and pa.scalar() load pandas (a fifth
    of a second) on their first use, which the catalog commands' half-second answers cannot spend."""
    data = b"" if value is None else value.encode()
    one = pa.Array.from_buffers(pa.string(), 1, [None if value is not None else pa.py_buffer(b"\0"),
                                                 pa.py_buffer(struct.pack("<ii", 0, len(data))), pa.py_buffer(data)],
                                null_count=int(value is None))
    return pa.repeat(one[0], n)


def _arrow(data: Any) -> pa.Table:
    """A pyarrow Table of delta-rs's Arrow result (an Arrow C stream), without loading pandas as pa.table() does."""
    return pa.RecordBatchReader.from_stream(data).read_all()


def _add_rows(table: DeltaTable) -> list[dict[str, Any]]:
    """The table's add actions: path (as the log has it), size, modificationTime, partitionValues (log text)."""
    actions = _arrow(table.get_add_actions(flatten=False))
    partitions = actions.column("partition").to_pylist() if "partition" in actions.column_names else None
    files = []
    for i, row in enumerate(actions.select(["path", "size_bytes", "modification_time"]).to_pylist()):
        values = (partitions[i] or {}) if partitions is not None else {}
        files.append({"path": row["path"], "size": row["size_bytes"], "modificationTime": row["modification_time"],
                      "partitionValues": {k: None if v is None else partition_text(v) for k, v in values.items()}})
    return files


def partition_text(value: Any) -> str:
    """A partition value as the log writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def history(root: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The table's commitInfo entries, newest first, each with its "version" (what the log still holds)."""
    return _open(root).history(limit)


@dataclass(frozen=True)
class Change:
    """What one commit changed, from the snapshots before and after it: the partition values of the files it added
    or removed, and whether the schema, partitioning or properties changed."""

    partitions: tuple[dict[str, str | None], ...]
    metadata: bool


def change(root: str, version: int) -> Change | None:
    """What commit `version` changed (None when the version before it can no longer be loaded)."""
    try:
        before, after = _open(root, version - 1), _open(root, version)
    except Exception:
        return None

    def files(table: DeltaTable) -> dict[str, dict[str, Any]]:
        return {f["path"]: f for f in _add_rows(table)}

    old, new = files(before), files(after)
    touched = [new[p] for p in new.keys() - old.keys()] + [old[p] for p in old.keys() - new.keys()]
    meta = [(t.schema().to_json(), tuple(t.metadata().partition_columns), dict(t.metadata().configuration))
            for t in (before, after)]
    return Change(tuple(f["partitionValues"] for f in touched), meta[0] != meta[1])


def create_table(root: str, schema: pa.Schema, partition_columns: Sequence[str],
                 configuration: Mapping[str, str]) -> bool:
    """Create an empty Delta table at `root` (protocol 1/2, readable and writable by delta-spark); False, writing
    nothing, when a table is already there."""
    storage.makedirs(root)
    try:
        DeltaTable.create(storage.delta_uri(root), schema, mode="error", partition_by=list(partition_columns) or None,
                          configuration=dict(configuration), storage_options=storage.delta_options(root))
    except Exception as exc:
        if is_table(root):
            return False
        raise exc
    return True


def add_action(row: Mapping[str, Any], mtime_ms: int) -> AddAction:
    """A FILES_DDL row (libs.io.delta_files) as delta-rs's add action (which takes the path decoded, and encodes it
    in the log itself)."""
    return AddAction(unquote(row["path"]), int(row["size"]), json.loads(row["partition"]), mtime_ms, True, row["stats"])


def has_transaction(root: str, app_id: str) -> bool:
    """Whether a commit of the table recorded the application transaction `app_id`."""
    return _open(root).transaction_version(app_id) is not None


def commit(root: str, adds: Iterable[AddAction],
           removes: Iterable[Mapping[str, Any]], *, app_id: str, info: Mapping[str, Any],
           also: Sequence[str] = (), read_version: int | None = None) -> int:
    """One commit: add `adds`, remove `removes` (add actions of the snapshot at read_version, default the current
    one), record `info` in the commit and the application transactions `app_id` and `also`. Raises CommitConflict
    when a commit after read_version took something this one read (the same app_id, a removed file): give the
    version the removes were chosen from, or a commit made since would go unseen. Returns the new version."""
    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = list(adds)
    actions += [RemoveAction(unquote(r["path"]), True, now, int(r.get("size") or 0),
                             dict(r.get("partitionValues") or {})) for r in removes]
    table = _open(root, read_version)
    read_version = table.version()
    marker = uuid.uuid4().hex
    properties = CommitProperties(custom_metadata={**info, COMMIT_KEY: marker},
                                  app_transactions=[Transaction(app_id=a, version=time.time_ns() // 1000)
                                                    for a in (app_id, *also)])
    try:
        table.create_write_transaction(actions, "append", table.schema(),
                                       partition_by=table.metadata().partition_columns or None,
                                       commit_properties=properties)
    except CommitFailedError as exc:
        raise CommitConflict(f"{root}: {exc}") from exc
    return _version_of(root, marker, after=read_version)


def _version_of(root: str, marker: str, *, after: int) -> int:
    """The log version holding the commit with `marker`: the first commit file after version `after` (the one this
    writer read) that names it. Read from the log files themselves: concurrent writers may have committed before
    and after it, and a history read while they commit can number its entries wrongly."""
    version, needle = after + 1, json.dumps(marker)
    while True:
        entry = storage.join(root, "_delta_log", f"{version:020d}.json")
        try:
            text = storage.read_bytes(entry).decode("utf-8")
        except OSError:
            if storage.exists(entry):
                raise
            raise RuntimeError(f"{root}: the commit {marker} is not in the table's log after version {after}") \
                from None
        if needle in text:
            return version
        version += 1


__all__ = [
    "APPEND_KEY",
    "REPLACE_KEY",
    "Change",
    "CommitConflict",
    "LogUnreadable",
    "Snapshot",
    "add_action",
    "change",
    "commit",
    "create_table",
    "file_path",
    "has_transaction",
    "history",
    "is_table",
    "read",
    "rows",
    "snapshot",
    "sql_literal",
    "table_version",
]
