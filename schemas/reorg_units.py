"""`reorg_units`: ALIS reorganization units, one row per unit with its id and extent on the device.

A unit is either the data of one request (a distinct device, offset_bytes, size_bytes; the paper's
default) or one fixed-size block of unit_bytes. Ids are per device: dense in address order for
request units, offset_bytes // unit_bytes for fixed-size units.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "reorg_units"
PARTITION_COLUMNS = ("trace_id", "device")
STATS_COLUMNS = ("unit_id", "offset_bytes")
COLUMNS = (
    "trace_id",
    "device",
    "unit_id",        # unique per (trace_id, device)
    "offset_bytes",   # the unit's home location
    "size_bytes",
    "unit_bytes",     # 0: one unit per distinct request extent; > 0: fixed-size units of this many bytes
)


ARROW_SCHEMA = pa.schema([
    pa.field("trace_id", pa.string(), False),
    pa.field("device", pa.string(), False),
    pa.field("unit_id", pa.int64(), False),
    pa.field("offset_bytes", pa.int64(), False),
    pa.field("size_bytes", pa.int64(), False),
    pa.field("unit_bytes", pa.int64(), False),
])


class ReorgUnitsSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `reorg_units` table."""


def validate_reorg_units(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise ReorgUnitsSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, ReorgUnitsSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
