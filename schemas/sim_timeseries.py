"""`sim_timeseries`: per-interval figures of each simulated scenario of a scenario grid, keyed like
`sim_results` plus the interval (rows only for scenarios with `interval_ms`).

INTERVAL_SCHEMA is the one schema of the interval columns, as the simulator returns them (sim.stats.timeseries):
the simulation stage casts the simulator's columns to it, and tests/sim/test_table_schemas.py checks that the
simulator's columns are these, in order and type."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "sim_timeseries"
PARTITION_COLUMNS = ("grid_id",)
STATS_COLUMNS = ("interval",)

#: The per-interval columns, in order: one row per interval of the run.
INTERVAL_SCHEMA = pa.schema([
    pa.field("interval", pa.int64(), False),
    pa.field("start_ms", pa.float64(), False),
    pa.field("arrivals", pa.int64(), False),
    pa.field("completions", pa.int64(), False),
    pa.field("mean_response_ms", pa.float64(), True),   # of requests completing in the interval
    pa.field("max_response_ms", pa.float64(), True),
    pa.field("mean_outstanding", pa.float64(), False),  # requests in the array, time-averaged
    pa.field("mean_utilization", pa.float64(), False),
    pa.field("hottest_utilization", pa.float64(), False),
    pa.field("mean_queue_length", pa.float64(), False),
    pa.field("hottest_queue_length", pa.float64(), False),
])
ARROW_SCHEMA = pa.schema([
    pa.field("grid_id", pa.string(), False),
    pa.field("trace_id", pa.string(), False),
    pa.field("array_group", pa.string(), False),
    pa.field("scenario_id", pa.string(), False),
    *INTERVAL_SCHEMA,
])
COLUMNS = tuple(ARROW_SCHEMA.names)


class SimTimeseriesSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `sim_timeseries` table."""


def validate_sim_timeseries(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise SimTimeseriesSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, SimTimeseriesSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
