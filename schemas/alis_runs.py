"""`alis_runs`: runs discovered in the access graph (ALIS section 5.2.2), one row per run member.

Runs of one (device, interval) are numbered in the order the greedy algorithm found them, which
is the order of decreasing desirability; runs shorter than the minimum length are discarded.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "alis_runs"
PARTITION_COLUMNS = ("trace_id", "device")
COLUMNS = (
    "trace_id",
    "device",
    "interval_id",    # the access graph's interval
    "run_id",         # discovery order counting discarded short runs too (unique per device, interval)
    "rank",           # discovery order among the kept runs: 0 is the most desirable
    "position",       # 0-based place of the unit in the run (the order it is laid out in)
    "unit_id",
)


ARROW_SCHEMA = pa.schema([
    pa.field("trace_id", pa.string(), False),
    pa.field("device", pa.string(), False),
    pa.field("interval_id", pa.int64(), False),
    pa.field("run_id", pa.int64(), False),
    pa.field("rank", pa.int64(), False),
    pa.field("position", pa.int64(), False),
    pa.field("unit_id", pa.int64(), False),
])


class AlisRunsSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `alis_runs` table."""


def validate_alis_runs(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise AlisRunsSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, AlisRunsSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
