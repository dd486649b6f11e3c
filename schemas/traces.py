"""`traces`: the catalog, one row per ingested trace (sources, totals, device geometry)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "traces"

SOURCE_FILE = pa.struct([pa.field("path", pa.string()), pa.field("size_bytes", pa.int64()),
                         pa.field("sha256", pa.string())])

# Delta rejects NOT NULL inside arrays, so nested fields are nullable; ingest always fills them.
# Geometry a source carries for a device (the HP SRT header); later stages build disk specs from it.
GEOMETRY = pa.struct([
    pa.field("device", pa.string()), pa.field("disk_type", pa.string()),
    pa.field("sector_size", pa.int64()), pa.field("sectors_per_track", pa.int64()),
    pa.field("tracks_per_cylinder", pa.int64()), pa.field("cylinders", pa.int64()),
    pa.field("rpm", pa.int64()), pa.field("head_switch_us", pa.int64()),
    pa.field("overhead_us", pa.int64()), pa.field("sector_skew", pa.int64()),
    pa.field("seek_params", pa.list_(pa.int64())), pa.field("block_size", pa.int64()),
    pa.field("raw", pa.map_(pa.string(), pa.string()))])

COLUMNS = (
    "trace_id", "format", "source_files", "start_time_utc", "start_time_source", "span_us",
    "devices", "records_read", "records_accepted", "records_rejected", "rejected_by_reason",
    "reads", "writes", "bytes_read", "bytes_written", "ingested_at", "options", "geometry",
)


ARROW_SCHEMA = pa.schema([
    pa.field("trace_id", pa.string(), False),
    pa.field("format", pa.string(), False),
    pa.field("source_files", pa.list_(SOURCE_FILE), False),
    pa.field("start_time_utc", pa.timestamp("us", tz="UTC"), True),    # null when the source has no zone
    pa.field("start_time_source", pa.string(), True),                   # the absolute start as the source says it
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
    pa.field("geometry", pa.list_(GEOMETRY), False),
])


class TracesSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `traces` table."""


def validate_traces(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise TracesSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, TracesSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
