"""`aged_heat`: reference counts per extent and reorganization interval, aged across intervals (ALIS eq. 1).

aged_count = alpha * count + (1 - alpha) * previous interval's aged_count."""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockheat.schemas._check import check, flat_schema, spark_schema_attr

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TABLE = "aged_heat"
PARTITION_COLUMNS = ("trace_id", "extent_bytes")

FIELDS = (
    ("trace_id", "string", False),
    ("extent_bytes", "long", False),
    ("interval_us", "long", False),       # reorganization interval length (default one day)
    ("interval_id", "long", False),       # ts_us // interval_us
    ("alpha", "double", False),
    ("device", "string", False),
    ("extent_id", "long", False),
    ("count", "long", False),             # requests touching the extent in this interval
    ("aged_count", "double", False)
)
COLUMNS = tuple(name for name, _, _ in FIELDS)
ARROW_SCHEMA = flat_schema(FIELDS)


class AgedHeatSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `aged_heat` table."""


def validate_aged_heat(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise AgedHeatSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, AgedHeatSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
