"""`heat_tracking`: interarrival heat estimates (FIVE section 3.3) per extent at every aging checkpoint,
with the true heat of the following checkpoint period for comparison."""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockheat.schemas._check import check, flat_schema, spark_schema_attr

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TABLE = "heat_tracking"
PARTITION_COLUMNS = ("trace_id", "k")

FIELDS = (
    ("trace_id", "string", False),
    ("device", "string", False),
    ("extent_bytes", "long", False),
    ("extent_id", "long", False),
    ("k", "int", False),                  # requests in the moving window
    ("aging_period_us", "long", False),   # P: a pseudo request (and a checkpoint) every P
    ("checkpoint_us", "long", False),     # us since the trace start, a multiple of P
    ("requests_seen", "long", False),     # requests to the extent up to the checkpoint
    ("heat", "double", True),             # tracked estimate with selective aging, blocks/s (NULL: < 2 requests)
    ("heat_no_aging", "double", True),    # the same estimate without aging
    ("true_heat", "double", False)        # blocks/s actually accessed in [checkpoint, checkpoint + P)
)
COLUMNS = tuple(name for name, _, _ in FIELDS)
ARROW_SCHEMA = flat_schema(FIELDS)


class HeatTrackingSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `heat_tracking` table."""


def validate_heat_tracking(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise HeatTrackingSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, HeatTrackingSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
