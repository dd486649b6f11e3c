"""`sim_timeseries`: per-interval figures of each simulated scenario of a scenario grid, keyed like
`sim_results` plus the interval (rows only for scenarios with `interval_ms`).

The interval columns are sim.glue.SIM_TIMESERIES_SCHEMA's (sim.stats.TIMESERIES_SCHEMA)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

from schemas._check import check
from sim.glue import SIM_TIMESERIES_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "sim_timeseries"
PARTITION_COLUMNS = ("grid_id",)
STATS_COLUMNS = ("interval",)
_GLUE_KEYS = ("scenario_id", "trace_id")

ARROW_SCHEMA = pa.schema([
    pa.field("grid_id", pa.string(), False),
    pa.field("trace_id", pa.string(), False),
    pa.field("array_group", pa.string(), False),
    pa.field("scenario_id", pa.string(), False),
    *[f for f in SIM_TIMESERIES_SCHEMA if f.name not in _GLUE_KEYS],
])
SPARK_SCHEMA = from_arrow_schema(ARROW_SCHEMA)
COLUMNS = tuple(ARROW_SCHEMA.names)
#: The per-interval columns (sim.stats.TIMESERIES_SCHEMA), in order.
INTERVAL_SCHEMA = pa.schema([f for f in SIM_TIMESERIES_SCHEMA if f.name not in _GLUE_KEYS])


class SimTimeseriesSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `sim_timeseries` table."""


def validate_sim_timeseries(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise SimTimeseriesSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, SPARK_SCHEMA, ARROW_SCHEMA, SimTimeseriesSchemaError, TABLE)
