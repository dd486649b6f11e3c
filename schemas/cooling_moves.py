"""`cooling_moves`: every move the disk-cooling policy executed in a simulated run (FIVE section 3.2),
keyed by run_id: time, extent, source and target disk and place, bytes, heats before and after.

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
PARTITION_COLUMNS = ("run_id",)
KEY_COLUMNS = ("run_id", "trace_id")

ARROW_SCHEMA = pa.schema([
    pa.field("run_id", pa.string(), False),        # the simulated run (scenario) the moves belong to
    pa.field("trace_id", pa.string(), False),      # the replayed trace ("" for a synthetic workload)
    *COOLING_MOVES_SCHEMA,
])
SPARK_SCHEMA = from_arrow_schema(ARROW_SCHEMA)
COLUMNS = tuple(ARROW_SCHEMA.names)


class CoolingMovesSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `cooling_moves` table."""


def validate_cooling_moves(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise CoolingMovesSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, SPARK_SCHEMA, ARROW_SCHEMA, CoolingMovesSchemaError, TABLE)
