"""`cooling_moves`: every move the disk-cooling policy executed in a simulated run (FIVE section 3.2),
keyed like sim_results by (grid_id, trace_id, array_group, scenario_id) of the scenario grid that ran it
(`blockheat simulate`, a scenario with `"policy": {"name": "cooling", ...}`): time, extent, source and
target disk and place, bytes, heats before and after.

MOVE_SCHEMA is the one schema of the move columns, as the simulator's cooling policy returns them
(sim.cooling.moves_table: a column per CoolingMove field; heats in the spec's sectors per second, from the tracker
inside the simulation): the simulation stage casts the simulator's columns to it, and
tests/sim/test_table_schemas.py checks that the simulator's columns are these, in order and type."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "cooling_moves"
PARTITION_COLUMNS = ("grid_id",)
KEY_COLUMNS = ("grid_id", "trace_id", "array_group", "scenario_id")

#: One executed move, after the scenario's keys.
MOVE_SCHEMA = pa.schema([
    pa.field("time_us", pa.float64(), False),            # simulated time of the decision (the remap)
    pa.field("unit", pa.int64(), False),                 # index of the extent (or fragment) in the map
    pa.field("unit_kind", pa.string(), False),           # "extent" or "fragment"
    pa.field("file", pa.int64(), False),                 # the unit's file (traced device or object)
    pa.field("logical_start", pa.int64(), False),        # sectors, in the run's logical space
    pa.field("sectors", pa.int64(), False),
    pa.field("bytes", pa.int64(), False),
    pa.field("from_disk", pa.int64(), False),
    pa.field("to_disk", pa.int64(), False),
    pa.field("from_physical_start", pa.int64(), False),
    pa.field("to_physical_start", pa.int64(), False),
    pa.field("unit_heat", pa.float64(), False),          # tracked heat, sectors per second
    pa.field("unit_temperature", pa.float64(), False),   # heat per sector of the unit
    pa.field("source_heat_before", pa.float64(), False),
    pa.field("source_heat_after", pa.float64(), False),
    pa.field("target_heat_before", pa.float64(), False),
    pa.field("target_heat_after", pa.float64(), False),
    pa.field("mean_disk_heat", pa.float64(), False),
    pa.field("source_queue", pa.int64(), False),         # sub-requests waiting on the source at the decision
])
ARROW_SCHEMA = pa.schema([
    pa.field("grid_id", pa.string(), False),       # the scenario grid (sim_results.grid_id)
    pa.field("trace_id", pa.string(), False),      # the replayed trace
    pa.field("array_group", pa.string(), False),   # the traced devices simulated as one array
    pa.field("scenario_id", pa.string(), False),   # the scenario the moves belong to
    *MOVE_SCHEMA,
])
COLUMNS = tuple(ARROW_SCHEMA.names)


class CoolingMovesSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `cooling_moves` table."""


def validate_cooling_moves(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise CoolingMovesSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, CoolingMovesSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
