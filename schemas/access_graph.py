"""`access_graph`: the ALIS access graph (section 5.2.1) per device and reorganization interval.

Weights are aged across intervals (eq. 2) and the graph is pruned to its size budget, so the rows
of interval N are the graph a reorganization at the end of interval N would use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "access_graph"
PARTITION_COLUMNS = ("trace_id", "device")
STATS_COLUMNS = ("interval_id", "src_unit", "dst_unit")
COLUMNS = (
    "trace_id",
    "device",
    "interval_id",    # ts_us // interval_us, counted from the trace's first record
    "src_unit",       # reorg_units.unit_id referenced first
    "dst_unit",       # reorg_units.unit_id referenced within tau reads after src_unit
    "weight",         # aged sum of 1 - f + f * (tau - j + 1) / tau over the pairs at distance j
)


ARROW_SCHEMA = pa.schema([
    pa.field("trace_id", pa.string(), False),
    pa.field("device", pa.string(), False),
    pa.field("interval_id", pa.int64(), False),
    pa.field("src_unit", pa.int64(), False),
    pa.field("dst_unit", pa.int64(), False),
    pa.field("weight", pa.float64(), False),
])


class AccessGraphSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `access_graph` table."""


def validate_access_graph(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise AccessGraphSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, AccessGraphSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
