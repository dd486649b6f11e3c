"""`alis_layout`: the reorganized area's lookaside directory, one row per copy of a unit.

The plan of interval N is built from the history up to the end of interval N and serves the reads
of interval N + 1. A unit may have several copies (one in a run, one in the heat-clustered region).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "alis_layout"
PARTITION_COLUMNS = ("trace_id", "device")
STATS_COLUMNS = ("interval_id", "unit_id", "ra_offset_bytes")
REGIONS = ("run", "heat")
COLUMNS = (
    "trace_id",
    "device",
    "interval_id",        # the plan built at the end of this interval
    "region",             # "run" or "heat"
    "run_id",             # alis_runs.run_id for run copies, NULL for heat copies
    "unit_id",
    "home_offset_bytes",  # where the unit lives in the home area
    "size_bytes",
    "ra_offset_bytes",    # where the copy lives, from the start of the reorganized area
    "ra_address_bytes",   # ra_offset_bytes + the area's start (a share of the storage used)
)


ARROW_SCHEMA = pa.schema([
    pa.field("trace_id", pa.string(), False),
    pa.field("device", pa.string(), False),
    pa.field("interval_id", pa.int64(), False),
    pa.field("region", pa.string(), False),
    pa.field("run_id", pa.int64(), True),
    pa.field("unit_id", pa.int64(), False),
    pa.field("home_offset_bytes", pa.int64(), False),
    pa.field("size_bytes", pa.int64(), False),
    pa.field("ra_offset_bytes", pa.int64(), False),
    pa.field("ra_address_bytes", pa.int64(), False),
])


class AlisLayoutSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `alis_layout` table."""


def validate_alis_layout(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise AlisLayoutSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, AlisLayoutSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
