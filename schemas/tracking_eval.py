"""`tracking_eval`: accuracy of interarrival heat tracking per k (libs.transforms.tracking_eval)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockheat.schemas._check import check, flat_schema, spark_schema_attr

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TABLE = "tracking_eval"
PARTITION_COLUMNS = ("trace_id",)

FIELDS = (
    ("trace_id", "string", False),
    ("k", "int", False),
    ("aging_period_us", "long", False),
    ("extent_bytes", "long", False),
    ("checkpoints", "long", False),            # (extent, checkpoint) pairs with an estimate and true heat > 0
    ("mean_relative_error", "double", True),   # mean |heat - true| / true over those pairs
    ("median_relative_error", "double", True),
    ("requests_to_90pct", "double", True),     # generated step trace: requests after a 10x rise until 90% of it
    ("stale_s_aging", "double", True),         # generated drop: seconds until the estimate < 10% of the old heat
    ("stale_s_no_aging", "double", True)       # the same without aging (NULL: never within the test horizon)
)
COLUMNS = tuple(name for name, _, _ in FIELDS)
ARROW_SCHEMA = flat_schema(FIELDS)


class TrackingEvalSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `tracking_eval` table."""


def validate_tracking_eval(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise TrackingEvalSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, TrackingEvalSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
