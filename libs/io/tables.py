"""Delta table I/O: where tables live, creating them, their write targets (libs.io.delta_files), atomic partition
replace, and name registration.

Called from jobs/, the CLI and the per-device passes (libs/table_io); the transforms (libs/transforms, libs/alis)
and plans (libs/plans) never read or write tables (a contract in pyproject.toml).
Every table is described by one module in schemas/ listed in schemas.TABLE_MODULES
(TABLE, SPARK_SCHEMA, and optionally PARTITION_COLUMNS and STATS_COLUMNS).
"""
from __future__ import annotations

import datetime as dt
import importlib
import logging
import re
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from blockheat import schemas
from blockheat.libs.columns import to_schema
from blockheat.libs.io import delta_log, storage
from blockheat.libs.io.delta_files import (
    Append,
    PendingWrite,
    TableTarget,
    Where,
    sql_string,
    write_by_tasks,
)
from blockheat.libs.io.delta_log import LogUnreadable
from blockheat.libs.io.table_names import NAMES_CONF, NAMES_CREATED
from blockheat.libs.io.table_versions import Location, table_exists, table_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def _load_tables() -> tuple[dict[str, tuple[T.StructType, tuple[str, ...]]], dict[str, str]]:
    tables: dict[str, tuple[T.StructType, tuple[str, ...]]] = {}
    stats: dict[str, str] = {}
    for module_name in schemas.TABLE_MODULES:
        module = importlib.import_module(f"{schemas.__name__}.{module_name}")
        tables[module.TABLE] = (module.SPARK_SCHEMA, tuple(getattr(module, "PARTITION_COLUMNS", ())))
        if getattr(module, "STATS_COLUMNS", None):
            stats[module.TABLE] = ",".join(module.STATS_COLUMNS)
    return tables, stats


# name -> (schema, partition columns); name -> columns Delta keeps min/max statistics on, for data
# skipping. Numeric ranges only: statistics on every column (strings included) would be a large
# part of a write's cost.
TABLES, STATS_COLUMNS = _load_tables()

TRACE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")    # the whole id (fullmatch: no trailing newline)


class TraceIdError(ValueError):
    """A trace id that is not safe as a partition value and SQL literal."""


def check_trace_id(trace_id: str) -> str:
    """Trace ids become partition directories and SQL literals: letters, digits and _.:- only."""
    if not TRACE_ID_RE.fullmatch(trace_id):
        raise TraceIdError(
            f"invalid trace id {trace_id!r}: use 1-128 letters, digits and _ . : - "
            "(starting with a letter or digit)"
        )
    return trace_id


def registers_names(spark: SparkSession) -> bool:
    """Whether tables this session uses get a name (not in a session built with catalog "none", nor in a client of
    `blockheat serve`, whose catalog has every table: such a client names only the tables it creates)."""
    return spark.conf.get(NAMES_CONF, "true") == "true"


# Names each session has registered (or found registered): the catalog's tableExists loads the Delta table, which
# after a commit made outside Spark (delta-rs) costs Spark's log replay, ~0.5 s a call. A name dropped by hand in
# SQL is therefore not re-registered by the same session; sync_catalog (libs.io.catalog) forgets what it drops.
_REGISTERED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def forget_registered(spark: SparkSession, name: str) -> None:
    """Forget that this session registered `name` (after its catalog entry was dropped)."""
    _REGISTERED.get(spark, set()).discard(name)


def ensure_table(spark: SparkSession, warehouse: Location, name: str, *, register: bool = True) -> str:
    """Create the Delta table with its fixed schema and partitioning if it does not exist yet (through delta-rs,
    libs.io.delta_log: protocol 1/2, as Delta's CREATE TABLE makes it); register=False leaves it unnamed in this
    session's catalog (a table by path only)."""
    schema, partitions = TABLES[name]
    path = table_path(warehouse, name)
    created = False
    if not delta_log.is_table(path):
        properties = {"delta.dataSkippingStatsColumns": STATS_COLUMNS[name]} if name in STATS_COLUMNS else {}
        created = delta_log.create_table(path, to_arrow_schema(schema, timezone="UTC"), partitions, properties)
    if created and register and spark.conf.get(NAMES_CONF, "true") == NAMES_CREATED:
        _register(spark, name, path)
    elif register and registers_names(spark) and name not in _REGISTERED.get(spark, ()):
        if not spark.catalog.tableExists(name):
            _register(spark, name, path)
        _REGISTERED.setdefault(spark, set()).add(name)
    return path


def _register(spark: SparkSession, name: str, path: str) -> None:
    """Name the table at `path`. Two sessions on one shared metastore may both find the name missing and both
    create it: the one that loses gets TABLE_OR_VIEW_ALREADY_EXISTS, and takes the winner's entry (the same
    warehouse's table) as its own."""
    try:
        spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION {sql_string(path)}")
    except AnalysisException as exc:
        if "ALREADY_EXISTS" not in (exc.getCondition() or "") or not spark.catalog.tableExists(name):
            raise
    _REGISTERED.setdefault(spark, set()).add(name)


def register_tables(spark: SparkSession, warehouse: Location) -> list[str]:
    """Make every existing table queryable by name (`SELECT * FROM requests`) in this session."""
    registered = []
    for name in TABLES:
        path = table_path(warehouse, name)
        if delta_log.is_table(path):
            _register(spark, name, path)
            registered.append(name)
    return registered


def table_target(spark: SparkSession, warehouse: Location, name: str) -> TableTarget:
    """The target for table `name` (created if missing) under the warehouse."""
    path = ensure_table(spark, warehouse, name)
    spark_schema, partitions = TABLES[name]
    schema = to_arrow_schema(spark_schema, timezone="UTC")   # the session time zone (libs.io.session)
    listed = STATS_COLUMNS.get(name)
    wanted = listed.split(",") if listed else [f.name for f in schema][:32]   # Delta's default: 32 columns
    stats = tuple(c for c in wanted if c not in partitions and pa.types.is_integer(schema.field(c).type))
    return TableTarget(name, path, schema, tuple(partitions), stats)


def replace_rows(df: DataFrame, spark: SparkSession, warehouse: Location, name: str,
                 where: Mapping[str, Any]) -> None:
    """Atomically replace the rows of table `name` matching column = value for every item of
    `where` with `df` (one Delta commit), e.g. where={"trace_id": "hplajw", "extent_bytes": 1 << 20}.

    The `where` values are stamped on every row of `df`, so the new rows satisfy the predicate by
    construction. The tasks write the files and the driver commits them (libs.io.delta_files): the
    same commit as Delta's replaceWhere, without its extra Spark jobs and JVM re-encoding.
    Concurrent readers see the old or the new version; rows outside the predicate are untouched,
    and writers with disjoint predicates on partition columns do not conflict.
    """
    write_rows(df, spark, warehouse, name, where).commit(spark)


def write_rows(df: DataFrame, spark: SparkSession, warehouse: Location, name: str, where: Where) -> PendingWrite:
    """replace_rows's files, written and not committed: commit() or discard() the result (several tables at once:
    libs.io.journal). With an Append (libs.io.delta_files) for `where` the rows are added, stamped with its scope."""
    append = where if isinstance(where, Append) else None
    where = append.scope if append else where
    if not where:
        raise ValueError(f"replace of {name}: an empty predicate would replace the whole table")
    if "trace_id" in where:
        check_trace_id(str(where["trace_id"]))
    schema, _ = TABLES[name]
    unknown = sorted(set(where) - set(schema.fieldNames()))
    if unknown:
        raise ValueError(f"replace of {name}: no column(s) {unknown}")
    # The schema is the contract: columns in its order and types (e.g. row_number()'s int -> long),
    # the `where` values stamped, in one projection (each is an analysis of the whole plan).
    return write_by_tasks(spark, table_target(spark, warehouse, name), append or where, to_schema(df, schema, where))


def replace_trace(df: DataFrame, spark: SparkSession, warehouse: Location, name: str, trace_id: str) -> None:
    """Atomically replace one trace's rows of table `name` with `df` (see replace_rows)."""
    replace_rows(df, spark, warehouse, name, {"trace_id": trace_id})


def read_table(spark: SparkSession, warehouse: Location, name: str, trace_id: str | None = None, *,
               version: int | None = None) -> DataFrame:
    """A table as a DataFrame (optionally one trace's rows; optionally as of a Delta version, see
    table_version); a clear error when it does not exist."""
    path = table_path(warehouse, name)
    if not delta_log.is_table(path):
        raise FileNotFoundError(f"table {name} does not exist under {warehouse} (run the job that writes it)")
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(path)
    if trace_id is not None:
        df = df.where(F.col("trace_id") == check_trace_id(trace_id))
    return df


class UnknownTraceError(LookupError):
    """A trace id that is not in the `traces` catalog."""


def trace_info(spark: SparkSession, warehouse: Location, trace_id: str) -> dict[str, Any]:
    """The trace's catalog row (span_us, devices, geometry, ...); a clear error when it is missing."""
    check_trace_id(trace_id)
    rows = []
    if table_exists(warehouse, "traces"):
        rows = trace_rows(spark, warehouse, "traces", trace_id)
    if not rows:
        raise UnknownTraceError(f"trace {trace_id!r} is not in the catalog under {warehouse} "
                                "(ingest it first: blockheat ingest --format FMT --trace-id ID PATH...)")
    return rows[0]


def trace_rows(spark: SparkSession, warehouse: Location, name: str, trace_id: str, *,
               version: int | None = None) -> list[dict[str, Any]]:
    """One trace's rows of a table (at `version`, default the latest) as `collect()` gives them
    (Row.asDict(recursive=True)): for the small tables a job reads whole (scores, results, catalog rows), from
    the files the log lists (rows_from_log), through Spark when the reader does not handle the log."""
    try:
        return rows_from_log(warehouse, name, trace_id, version)
    except LogUnreadable as exc:
        log.info("%s read through Spark: %s", name, exc)
        return [r.asDict(recursive=True)
                for r in read_table(spark, warehouse, name, trace_id, version=version).collect()]


def has_rows(spark: SparkSession, warehouse: Location, name: str, trace_id: str,
             equal: Mapping[str, int | str] | None = None) -> bool:
    """Whether the table exists and holds a row of the trace with column == value for each item of `equal`:
    from the log's partition values and the candidate files' rows (pyarrow, stopping at the first file with one),
    without a Spark job; through Spark when the log cannot be read directly."""
    if not table_exists(warehouse, name):
        return False
    equal = dict(equal or {})
    try:
        snap = delta_log.snapshot(table_path(warehouse, name))
    except LogUnreadable as exc:
        log.info("%s checked through Spark: %s", name, exc)
        df = read_table(spark, warehouse, name, trace_id)
        for column, value in equal.items():
            df = df.where(F.col(column) == value)
        return bool(df.limit(1).count())
    partitions = set(snap.metadata["partitionColumns"])
    wanted = {"trace_id": trace_id, **equal}
    filters = [(c, "==", v) for c, v in wanted.items() if c not in partitions]
    for add in snap.files:
        values = add["partitionValues"]
        if any(values.get(c) != delta_log.partition_text(v) for c, v in wanted.items() if c in partitions):
            continue
        fs, path = storage.filesystem(snap.path(add))
        rows = pq.read_table(path, filesystem=fs, columns=[filters[0][0]], filters=filters).num_rows if filters \
            else pq.read_metadata(path, filesystem=fs).num_rows
        if rows:
            return True
    return False


def rows_from_log(warehouse: Location, name: str, trace_id: str, version: int | None = None) -> list[dict[str, Any]]:
    """One trace's rows of a table as `collect()` gives them (Row.asDict(recursive=True): naive local
    datetimes, dicts for maps and structs), from the files of its latest version (or `version`) read without
    Spark: a job's first Spark read of a Delta table is slow on a fresh driver (libs.io.delta_log)."""
    schema, partitions = TABLES[name]
    if any(not isinstance(schema[c].dataType, T.StringType) for c in partitions):
        raise LogUnreadable(f"{name}: a partition column that is not a string")
    snap = delta_log.snapshot(table_path(warehouse, name), version)   # by module: tests replace it
    rows = []
    for add in snap.files:
        if "trace_id" in partitions and add["partitionValues"].get("trace_id") != trace_id:
            continue
        columns = [f.name for f in schema.fields if f.name not in partitions]
        fs, path = storage.filesystem(snap.path(add))
        table = pq.read_table(path, filesystem=fs, columns=columns, filters=[("trace_id", "==", trace_id)]
                              if "trace_id" not in partitions else None)
        for row in table.to_pylist():
            values = {**{c: add["partitionValues"].get(c) for c in partitions}, **row}
            rows.append(schema.fromInternal(_internal(values, schema)).asDict(recursive=True))
    return rows


def trace_arrow(spark: SparkSession, warehouse: Location, name: str, trace_id: str, columns: list[str] | None = None,
                where: Mapping[str, Any] | None = None) -> pa.Table:
    """One trace's rows of a table with column == value for each item of `where`, the given columns (default all,
    in the table's order), as an Arrow table in no particular order: from the files the log lists
    (libs.io.delta_log.read; the small tables a report gathers, where a Spark job's first read of a Delta table costs
    seconds), else through Spark."""
    schema, partitions = TABLES[name]
    columns = list(schema.names) if columns is None else columns
    wanted = {"trace_id": trace_id, **(where or {})}
    try:
        return delta_log.read(table_path(warehouse, name), columns,
                              {c: str(v) if c in partitions else v for c, v in wanted.items()})
    except LogUnreadable as exc:
        log.info("%s read through Spark: %s", name, exc)
    df = read_table(spark, warehouse, name, trace_id)
    for column, value in (where or {}).items():
        df = df.where(F.col(column) == value)
    return df.select(*columns).toArrow()


def _internal(value: Any, dtype: Any) -> Any:
    """A value read by pyarrow in Spark's internal form for `dtype` (StructType.fromInternal's input)."""
    if value is None:
        return None
    if isinstance(dtype, T.StructType):
        return tuple(_internal(value.get(f.name), f.dataType) for f in dtype.fields)
    if isinstance(dtype, T.ArrayType):
        return [_internal(v, dtype.elementType) for v in value]
    if isinstance(dtype, T.MapType):
        return {_internal(k, dtype.keyType): _internal(v, dtype.valueType) for k, v in value}
    if isinstance(dtype, T.TimestampType):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return (aware - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    return value
