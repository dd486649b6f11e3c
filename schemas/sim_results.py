"""`sim_results`: one row per simulated scenario of a scenario grid (`blockheat simulate`), keyed by
(grid_id, trace_id, array_group, scenario_id): the scenario's parameters, then the simulator's result row.

The result columns are sim.glue.SIM_RESULT_SCHEMA's (sim.stats.RunResult: counts, response times in ms,
+inf when saturated, utilization, per-disk lists); this module only adds the keys and parameters in front."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

from schemas._check import check
from sim.glue import SIM_RESULT_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "sim_results"
PARTITION_COLUMNS = ("grid_id",)
KEY_COLUMNS = ("grid_id", "trace_id", "array_group", "scenario_id")
_GLUE_KEYS = ("scenario_id", "trace_id")      # set by the job, not taken from the glue's row

ARROW_SCHEMA = pa.schema([
    pa.field("grid_id", pa.string(), False),       # the grid file's grid_id (default: its file name)
    pa.field("trace_id", pa.string(), False),
    pa.field("array_group", pa.string(), False),   # the traced devices simulated as one array: "all", "0", "0+1"
    pa.field("scenario_id", pa.string(), False),
    pa.field("spec", pa.string(), False),          # the disk spec's name
    pa.field("layout", pa.string(), False),        # layout label: the sweep's label or kind:params
    pa.field("speedup", pa.float64(), False),      # open-loop speed-up alpha (arrivals at ts_us / alpha)
    pa.field("scenario_json", pa.string(), False),  # the scenario as the grid expands it (JSON, sorted keys)
    pa.field("wall_s", pa.float64(), False),       # executor wall-clock time of the simulation (the first part
    #                                                a lane simulates also converts the lane's requests)
    *[f for f in SIM_RESULT_SCHEMA if f.name not in _GLUE_KEYS],
])
SPARK_SCHEMA = from_arrow_schema(ARROW_SCHEMA)
COLUMNS = tuple(ARROW_SCHEMA.names)
RESULT_COLUMNS = tuple(f.name for f in SIM_RESULT_SCHEMA if f.name not in _GLUE_KEYS)


class SimResultsSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `sim_results` table."""


def validate_sim_results(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise SimResultsSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, SPARK_SCHEMA, ARROW_SCHEMA, SimResultsSchemaError, TABLE)
