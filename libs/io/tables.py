"""Delta table I/O: where tables live, creating them, their write targets (libs.io.delta_files), atomic partition
replace, and name registration.

Called from jobs/ and the CLI only; transforms in libs/ never read or write.
Every table is described by one module in schemas/ listed in schemas.TABLE_MODULES
(TABLE, SPARK_SCHEMA, and optionally PARTITION_COLUMNS and STATS_COLUMNS).
"""
from __future__ import annotations

import datetime as dt
import importlib
import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from delta.tables import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

import schemas
from libs.columns import to_schema
from libs.io import delta_log
from libs.io.delta_files import TableTarget, replace_by_tasks, sql_literal, with_commit_retry
from libs.io.delta_log import LogUnreadable, commit_versions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def _load_tables() -> tuple[dict[str, tuple[T.StructType, tuple[str, ...]]], dict[str, str]]:
    tables: dict[str, tuple[T.StructType, tuple[str, ...]]] = {}
    stats: dict[str, str] = {}
    for module_name in schemas.TABLE_MODULES:
        module = importlib.import_module(f"schemas.{module_name}")
        tables[module.TABLE] = (module.SPARK_SCHEMA, tuple(getattr(module, "PARTITION_COLUMNS", ())))
        if getattr(module, "STATS_COLUMNS", None):
            stats[module.TABLE] = ",".join(module.STATS_COLUMNS)
    return tables, stats


# name -> (schema, partition columns); name -> columns Delta keeps min/max statistics on, for data
# skipping. Numeric ranges only: statistics on every column (strings included) would be a large
# part of a write's cost.
TABLES, STATS_COLUMNS = _load_tables()

TRACE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
# Set to "false" in a session built with catalog "none" (libs.io.session): ensure_table names no table there.
NAMES_CONF = "spark.blockheat.tableNames"


class TraceIdError(ValueError):
    """A trace id that is not safe as a partition value and SQL literal."""


def check_trace_id(trace_id: str) -> str:
    """Trace ids become partition directories and SQL literals: letters, digits and _.:- only."""
    if not TRACE_ID_RE.match(trace_id):
        raise TraceIdError(
            f"invalid trace id {trace_id!r}: use 1-128 letters, digits and _ . : - "
            "(starting with a letter or digit)"
        )
    return trace_id


def table_path(warehouse: Path, name: str) -> Path:
    """Delta tables live at <warehouse>/<name>."""
    return Path(warehouse) / name


def registers_names(spark: SparkSession) -> bool:
    """Whether tables this session creates get a name (not in a session built with catalog "none")."""
    return spark.conf.get(NAMES_CONF, "true") != "false"


def ensure_table(spark: SparkSession, warehouse: Path, name: str, *, register: bool = True) -> Path:
    """Create the Delta table with its fixed schema and partitioning if it does not exist yet; register=False
    leaves it unnamed in this session's catalog (a table by path only)."""
    schema, partitions = TABLES[name]
    path = table_path(warehouse, name)
    if not (path / "_delta_log").is_dir():
        properties = {"delta.dataSkippingStatsColumns": STATS_COLUMNS[name]} if name in STATS_COLUMNS else {}
        if _plain_table_defaults(spark):
            # Delta's own CREATE TABLE would write the same version 0 (tested), much slower on a fresh driver.
            schema_json = json.dumps(schema.jsonValue(), separators=(",", ":"))     # Delta's key order
            delta_log.create_table(path, schema_json, partitions, properties, engine=_ENGINE)
        else:
            builder = DeltaTable.createIfNotExists(spark).location(str(path)).addColumns(schema)
            for key, value in properties.items():
                builder = builder.property(key, value)
            if partitions:
                builder = builder.partitionedBy(*partitions)
            with_commit_retry(builder.execute, f"create {name}")
    if register and registers_names(spark) and not spark.catalog.tableExists(name):
        _register(spark, name, path)
    return path


# Session settings with which Delta gives a new table more than its columns, partitioning and our properties
# (table property defaults, protocol versions or features): tables are then created by Delta itself.
_DELTA_TABLE_DEFAULTS = ("spark.databricks.delta.properties.defaults.", "spark.databricks.delta.protocol.")
_ENGINE = "blockheat libs.io.delta_log"


def _plain_table_defaults(spark: SparkSession) -> bool:
    """Whether Delta would create a plain table here (PLAIN_PROTOCOL, no properties of its own)."""
    return not any(key.startswith(_DELTA_TABLE_DEFAULTS) for key in spark.conf.getAll)


def _register(spark: SparkSession, name: str, path: Path) -> None:
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION '{path.resolve()}'")


def register_tables(spark: SparkSession, warehouse: Path) -> list[str]:
    """Make every existing table queryable by name (`SELECT * FROM requests`) in this session."""
    registered = []
    for name in TABLES:
        path = table_path(warehouse, name)
        if (path / "_delta_log").is_dir():
            _register(spark, name, path)
            registered.append(name)
    return registered


def table_target(spark: SparkSession, warehouse: Path, name: str) -> TableTarget:
    """The target for table `name` (created if missing) under the warehouse."""
    path = ensure_table(spark, warehouse, name)
    spark_schema, partitions = TABLES[name]
    schema = to_arrow_schema(spark_schema, timezone="UTC")   # the session time zone (libs.io.session)
    listed = STATS_COLUMNS.get(name)
    wanted = listed.split(",") if listed else [f.name for f in schema][:32]   # Delta's default: 32 columns
    stats = tuple(c for c in wanted if c not in partitions and pa.types.is_integer(schema.field(c).type))
    return TableTarget(name, str(Path(path).resolve()), schema, tuple(partitions), stats)


def replace_rows(df: DataFrame, spark: SparkSession, warehouse: Path, name: str,
                 where: Mapping[str, Any]) -> None:
    """Atomically replace the rows of table `name` matching column = value for every item of
    `where` with `df` (one Delta commit), e.g. where={"trace_id": "hplajw", "extent_bytes": 1 << 20}.

    The `where` values are stamped on every row of `df`, so the new rows satisfy the predicate by
    construction. The tasks write the files and the driver commits them (libs.io.delta_files): the
    same commit as Delta's replaceWhere, without its extra Spark jobs and JVM re-encoding.
    Concurrent readers see the old or the new version; rows outside the predicate are untouched,
    and writers with disjoint predicates on partition columns do not conflict.
    """
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
    replace_by_tasks(spark, table_target(spark, warehouse, name), where, to_schema(df, schema, where))


def replace_trace(df: DataFrame, spark: SparkSession, warehouse: Path, name: str, trace_id: str) -> None:
    """Atomically replace one trace's rows of table `name` with `df` (see replace_rows)."""
    replace_rows(df, spark, warehouse, name, {"trace_id": trace_id})


def read_table(spark: SparkSession, warehouse: Path, name: str, trace_id: str | None = None, *,
               version: int | None = None) -> DataFrame:
    """A table as a DataFrame (optionally one trace's rows; optionally as of a Delta version, see
    table_version); a clear error when it does not exist."""
    path = table_path(warehouse, name)
    if not (path / "_delta_log").is_dir():
        raise FileNotFoundError(f"table {name} does not exist under {warehouse} (run the job that writes it)")
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(str(path))
    if trace_id is not None:
        df = df.where(F.col("trace_id") == check_trace_id(trace_id))
    return df


def table_version(warehouse: Path, name: str) -> int | None:
    """The table's latest Delta version, from its commit files (None when the table does not exist): read
    with read_table(..., version=v) to see exactly that version; compare later to tell whether it changed."""
    log_dir = table_path(warehouse, name) / "_delta_log"
    if not log_dir.is_dir():
        return None
    versions = commit_versions(log_dir)
    return versions[-1] if versions else None


_EQUALITY = re.compile(r"^\(?\s*(\w+)\s*=\s*('(?:[^']*)'|-?[\d.]+)\s*\)?$")


def _predicate_values(predicate: str) -> dict[str, str] | None:
    """column -> literal text of a replace predicate "a = 'x' AND b = 3" (as replace_rows writes them);
    None when it is anything else."""
    out = {}
    for term in re.split(r"\s+AND\s+", predicate.strip()):
        m = _EQUALITY.match(term.strip())
        if m is None:
            return None
        out[m.group(1)] = m.group(2)
    return out


def _commit_touches(actions: list[dict[str, Any]], scope: Mapping[str, str]) -> bool:
    """Whether one commit may have changed rows where column = scope[column] for every scope column
    (conservative: True unless the commit shows it did not)."""
    info: dict[str, Any] = {}
    files = []
    for action in actions:
        if "metaData" in action or "protocol" in action:
            return True                                  # created, or its schema or properties changed
        if "commitInfo" in action:
            info = action["commitInfo"]
        for kind in ("add", "remove"):
            if kind in action and action[kind].get("dataChange", True):
                files.append(action[kind])
    if not files:
        return False                                     # e.g. OPTIMIZE: rewrites files, changes no row
    params = info.get("operationParameters") or {}
    if info.get("operation") == "WRITE" and isinstance(params.get("predicate"), str):
        values = _predicate_values(params["predicate"])
        if values is not None:                           # a replace_rows commit: it changed the rows it names
            return all(values[c] == sql_literal(v) for c, v in scope.items() if c in values)
    return not all(any(c in f.get("partitionValues", {}) and f["partitionValues"][c] != str(v)
                       for c, v in scope.items()) for f in files)


def scoped_version(warehouse: Path, name: str, scope: Mapping[str, Any], *, since: int | None = None) -> int | None:
    """The latest version of table `name` whose commit may have changed the rows where column = value for
    each item of `scope` (e.g. {"trace_id": "hplajw"}): a commit that replaced other traces' rows does not
    count, one that changed the schema does. With `since`, the scan stops there: the answer is `since` when
    nothing in scope changed after it; when the log no longer holds every commit after `since` (log
    retention), it is the latest version (counted as changed). None when the table does not exist or was
    recreated (its latest version is older than `since`).

    From the commit files: replace_rows commits name their rows in the predicate; other commits count
    unless every file they add or remove is in another partition of a scope column."""
    latest = table_version(warehouse, name)
    if latest is None or (since is not None and latest < since):
        return None
    log_dir = table_path(warehouse, name) / "_delta_log"
    stop = -1 if since is None else since
    for version in range(latest, stop, -1):
        commit = log_dir / f"{version:020d}.json"
        if not commit.is_file():
            return latest                                # history cleaned up: cannot tell, so changed
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        if _commit_touches(actions, scope):
            return version
    return since


class UnknownTraceError(LookupError):
    """A trace id that is not in the `traces` catalog."""


def trace_info(spark: SparkSession, warehouse: Path, trace_id: str) -> dict[str, Any]:
    """The trace's catalog row (span_us, devices, geometry, ...); a clear error when it is missing."""
    check_trace_id(trace_id)
    rows = []
    if (table_path(warehouse, "traces") / "_delta_log").is_dir():
        rows = trace_rows(spark, warehouse, "traces", trace_id)
    if not rows:
        raise UnknownTraceError(f"trace {trace_id!r} is not in the catalog under {warehouse} "
                                "(ingest it first: blockheat ingest --format FMT --trace-id ID PATH...)")
    return rows[0]


def trace_rows(spark: SparkSession, warehouse: Path, name: str, trace_id: str, *,
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


def rows_from_log(warehouse: Path, name: str, trace_id: str, version: int | None = None) -> list[dict[str, Any]]:
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
        table = pq.read_table(snap.path(add), columns=columns, filters=[("trace_id", "==", trace_id)]
                              if "trace_id" not in partitions else None)
        for row in table.to_pylist():
            values = {**{c: add["partitionValues"].get(c) for c in partitions}, **row}
            rows.append(schema.fromInternal(_internal(values, schema)).asDict(recursive=True))
    return rows


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
