"""`cooling_moves`: every move the disk-cooling policy executed in a simulated run (FIVE section 3.2),
keyed like sim_results by (grid_id, trace_id, array_group, scenario_id) of the scenario grid that ran it
(`blockheat simulate`, a scenario with `"policy": {"name": "cooling", ...}`): time, extent, source and
target disk and place, bytes, heats before and after.

The move columns are sim.cooling.COOLING_MOVES_SCHEMA's (heats in the spec's sectors per second, from
the tracker inside the simulation); this module only adds the keys in front."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

from schemas._check import check
from sim.cooling import COOLING_MOVES_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "cooling_moves"
PARTITION_COLUMNS = ("grid_id",)
KEY_COLUMNS = ("grid_id", "trace_id", "array_group", "scenario_id")

ARROW_SCHEMA = pa.schema([
    pa.field("grid_id", pa.string(), False),       # the scenario grid (sim_results.grid_id)
    pa.field("trace_id", pa.string(), False),      # the replayed trace
    pa.field("array_group", pa.string(), False),   # the traced devices simulated as one array
    pa.field("scenario_id", pa.string(), False),   # the scenario the moves belong to
    *COOLING_MOVES_SCHEMA,
])
SPARK_SCHEMA = from_arrow_schema(ARROW_SCHEMA)
COLUMNS = tuple(ARROW_SCHEMA.names)


class CoolingMovesSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `cooling_moves` table."""


def validate_cooling_moves(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise CoolingMovesSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, SPARK_SCHEMA, ARROW_SCHEMA, CoolingMovesSchemaError, TABLE)
