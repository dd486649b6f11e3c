"""`requests`: one row per I/O request, the canonical trace table every analysis reads."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "requests"
PARTITION_COLUMNS = ("trace_id", "device")
STATS_COLUMNS = ("seq", "ts_us", "offset_bytes", "size_bytes")  # Delta data-skipping statistics
COLUMNS = (
    "trace_id",       # the ingest's trace id
    "device",         # traced disk/volume/ASU, e.g. "hm_0", "0", "8,0"
    "seq",            # record order in the source, 0-based over the trace's files in given order
    "ts_us",          # microseconds since the trace's first record
    "op",             # "R" or "W"
    "offset_bytes",
    "size_bytes",
    "response_us",    # traced response/access time where the format has one
    "queue_us",       # traced queueing time where the format has one
    "source_file",
)
OPS = ("R", "W")
# What a replay reads of a request (the simulator's workload), and of a device's own files (device is a partition
# column: the files do not hold it).
REPLAY_COLUMNS = ("device", "seq", "ts_us", "op", "offset_bytes", "size_bytes")
DEVICE_FILE_COLUMNS = REPLAY_COLUMNS[1:]


ARROW_SCHEMA = pa.schema([
    pa.field("trace_id", pa.string(), False),
    pa.field("device", pa.string(), False),
    pa.field("seq", pa.int64(), False),
    pa.field("ts_us", pa.int64(), False),
    pa.field("op", pa.string(), False),
    pa.field("offset_bytes", pa.int64(), False),
    pa.field("size_bytes", pa.int64(), False),
    pa.field("response_us", pa.float64(), True),
    pa.field("queue_us", pa.float64(), True),
    pa.field("source_file", pa.string(), False),
])


class RequestsSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `requests` table."""


def validate_requests(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise RequestsSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, RequestsSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
