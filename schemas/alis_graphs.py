"""`alis_graphs`: one row per trace, the parameters its ALIS units, access graphs and runs were
built with (`blockheat graph`); `blockheat alis` reads them so its plans match the graphs."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "alis_graphs"
COLUMNS = (
    "trace_id",
    "unit_bytes",          # 0: request-sized units
    "interval_us",         # reorganization interval
    "intervals",           # interval ids 0 .. intervals - 1
    "tau",                 # context size
    "f",                   # share of the edge weight given to distance
    "beta",                # edge-weight age factor
    "include_writes",      # writes build the graph too
    "graph_share",         # size budget, share of the storage used
    "prefilter_min_refs",  # references a unit needs in its interval to enter the graph (0: no filter)
    "chunk_us",            # time chunks of the parallel build
    "threshold",           # run discovery's edge-weight threshold for alis_runs
    "min_run_length",
)


ARROW_SCHEMA = pa.schema([
    pa.field("trace_id", pa.string(), False),
    pa.field("unit_bytes", pa.int64(), False),
    pa.field("interval_us", pa.int64(), False),
    pa.field("intervals", pa.int64(), False),
    pa.field("tau", pa.int64(), False),
    pa.field("f", pa.float64(), False),
    pa.field("beta", pa.float64(), False),
    pa.field("include_writes", pa.bool_(), False),
    pa.field("graph_share", pa.float64(), False),
    pa.field("prefilter_min_refs", pa.int64(), False),
    pa.field("chunk_us", pa.int64(), False),
    pa.field("threshold", pa.float64(), False),
    pa.field("min_run_length", pa.int64(), False),
])


class AlisGraphsSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `alis_graphs` table."""


def validate_alis_graphs(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise AlisGraphsSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, AlisGraphsSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
