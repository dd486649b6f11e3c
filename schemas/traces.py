"""`traces`: the catalog, one row per ingested trace (sources, totals, device geometry)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import types as T

from blockheat.schemas._check import check

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "traces"

SOURCE_FILE = T.StructType([
    T.StructField("path", T.StringType(), True),
    T.StructField("size_bytes", T.LongType(), True),
    T.StructField("sha256", T.StringType(), True),
])

# Delta rejects NOT NULL inside arrays, so nested fields are nullable; ingest always fills them.
# Geometry a source carries for a device (the HP SRT header); later stages build disk specs from it.
GEOMETRY = T.StructType([
    T.StructField("device", T.StringType(), True),
    T.StructField("disk_type", T.StringType(), True),
    T.StructField("sector_size", T.LongType(), True),
    T.StructField("sectors_per_track", T.LongType(), True),
    T.StructField("tracks_per_cylinder", T.LongType(), True),
    T.StructField("cylinders", T.LongType(), True),
    T.StructField("rpm", T.LongType(), True),
    T.StructField("head_switch_us", T.LongType(), True),
    T.StructField("overhead_us", T.LongType(), True),
    T.StructField("sector_skew", T.LongType(), True),
    T.StructField("seek_params", T.ArrayType(T.LongType()), True),
    T.StructField("block_size", T.LongType(), True),
    T.StructField("raw", T.MapType(T.StringType(), T.StringType()), True),
])

COLUMNS = (
    "trace_id", "format", "source_files", "start_time_utc", "start_time_source", "span_us",
    "devices", "records_read", "records_accepted", "records_rejected", "rejected_by_reason",
    "reads", "writes", "bytes_read", "bytes_written", "ingested_at", "options", "geometry",
)

SPARK_SCHEMA = T.StructType([
    T.StructField("trace_id", T.StringType(), False),
    T.StructField("format", T.StringType(), False),
    T.StructField("source_files", T.ArrayType(SOURCE_FILE), False),
    T.StructField("start_time_utc", T.TimestampType(), True),     # null when the source has no zone
    T.StructField("start_time_source", T.StringType(), True),     # the absolute start as the source says it
    T.StructField("span_us", T.LongType(), False),
    T.StructField("devices", T.ArrayType(T.StringType()), False),
    T.StructField("records_read", T.LongType(), False),
    T.StructField("records_accepted", T.LongType(), False),
    T.StructField("records_rejected", T.LongType(), False),
    T.StructField("rejected_by_reason", T.MapType(T.StringType(), T.LongType()), False),
    T.StructField("reads", T.LongType(), False),
    T.StructField("writes", T.LongType(), False),
    T.StructField("bytes_read", T.LongType(), False),
    T.StructField("bytes_written", T.LongType(), False),
    T.StructField("ingested_at", T.TimestampType(), False),
    T.StructField("options", T.MapType(T.StringType(), T.StringType()), False),
    T.StructField("geometry", T.ArrayType(GEOMETRY), False),
])

ARROW_SCHEMA = pa.schema([
    pa.field("trace_id", pa.string(), False),
    pa.field("format", pa.string(), False),
    pa.field("source_files", pa.list_(pa.struct([
        pa.field("path", pa.string()), pa.field("size_bytes", pa.int64()),
        pa.field("sha256", pa.string())])), False),
    pa.field("start_time_utc", pa.timestamp("us", tz="UTC"), True),
    pa.field("start_time_source", pa.string(), True),
    pa.field("span_us", pa.int64(), False),
    pa.field("devices", pa.list_(pa.string()), False),
    pa.field("records_read", pa.int64(), False),
    pa.field("records_accepted", pa.int64(), False),
    pa.field("records_rejected", pa.int64(), False),
    pa.field("rejected_by_reason", pa.map_(pa.string(), pa.int64()), False),
    pa.field("reads", pa.int64(), False),
    pa.field("writes", pa.int64(), False),
    pa.field("bytes_read", pa.int64(), False),
    pa.field("bytes_written", pa.int64(), False),
    pa.field("ingested_at", pa.timestamp("us", tz="UTC"), False),
    pa.field("options", pa.map_(pa.string(), pa.string()), False),
    pa.field("geometry", pa.list_(pa.struct([
        pa.field("device", pa.string()), pa.field("disk_type", pa.string()),
        pa.field("sector_size", pa.int64()), pa.field("sectors_per_track", pa.int64()),
        pa.field("tracks_per_cylinder", pa.int64()), pa.field("cylinders", pa.int64()),
        pa.field("rpm", pa.int64()), pa.field("head_switch_us", pa.int64()),
        pa.field("overhead_us", pa.int64()), pa.field("sector_skew", pa.int64()),
        pa.field("seek_params", pa.list_(pa.int64())), pa.field("block_size", pa.int64()),
        pa.field("raw", pa.map_(pa.string(), pa.string()))])), False),
])


class TracesSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `traces` table."""


def validate_traces(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise TracesSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, SPARK_SCHEMA, ARROW_SCHEMA, TracesSchemaError, TABLE)
