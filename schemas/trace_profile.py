"""`trace_profile`: what storage engineers look at first: one row per (scope, device, window, metric).

scope is "trace" (device = "*") or "device"; window_us = 0 is the whole trace."""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockheat.schemas._check import check, flat_schema, spark_schema_attr

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TABLE = "trace_profile"
PARTITION_COLUMNS = ("trace_id",)

FIELDS = (
    ("trace_id", "string", False),
    ("scope", "string", False),
    ("device", "string", False),
    ("window_start_us", "long", False),
    ("window_us", "long", False),
    ("metric", "string", False),          # e.g. requests, read_share_bytes, size_bytes_p50, seq_share
    ("value", "double", True)
)
COLUMNS = tuple(name for name, _, _ in FIELDS)
ARROW_SCHEMA = flat_schema(FIELDS)


class TraceProfileSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `trace_profile` table."""


def validate_trace_profile(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise TraceProfileSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, TraceProfileSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
