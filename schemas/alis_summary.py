"""`alis_summary`: one row per device and plan interval of an ALIS layout: what was placed and
which share of the next interval's reads would find their data in the reorganized area, for the
plan built from history ("realizable") and the same plan built from that next interval itself
("lookahead", ALIS section 6.4).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "alis_summary"
PARTITION_COLUMNS = ("trace_id",)
COLUMNS = (
    "trace_id",
    "device",
    "interval_id",         # the plan built at the end of this interval
    "mode",                # heat, run or combined
    "layout",              # heat-region layout: sequential, packed, heat or organ-pipe
    "storage_used_bytes",  # highest byte the trace addresses on the device
    "ra_start_bytes",
    "ra_bytes",
    "runs_placed",
    "run_copies",
    "heat_copies",
    "bytes_placed",
    "next_reads",          # reads of interval_id + 1 (NULL for the last interval)
    "realizable_reads",    # of those, reads whose units all have a copy in this plan
    "lookahead_reads",     # the same for the plan built from interval_id + 1 itself
    "realizable_share",
    "lookahead_share",
)


ARROW_SCHEMA = pa.schema([
    pa.field("trace_id", pa.string(), False),
    pa.field("device", pa.string(), False),
    pa.field("interval_id", pa.int64(), False),
    pa.field("mode", pa.string(), False),
    pa.field("layout", pa.string(), False),
    pa.field("storage_used_bytes", pa.int64(), False),
    pa.field("ra_start_bytes", pa.int64(), False),
    pa.field("ra_bytes", pa.int64(), False),
    pa.field("runs_placed", pa.int64(), False),
    pa.field("run_copies", pa.int64(), False),
    pa.field("heat_copies", pa.int64(), False),
    pa.field("bytes_placed", pa.int64(), False),
    pa.field("next_reads", pa.int64(), True),
    pa.field("realizable_reads", pa.int64(), True),
    pa.field("lookahead_reads", pa.int64(), True),
    pa.field("realizable_share", pa.float64(), True),
    pa.field("lookahead_share", pa.float64(), True),
])


class AlisSummarySchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `alis_summary` table."""


def validate_alis_summary(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise AlisSummarySchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, AlisSummarySchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
