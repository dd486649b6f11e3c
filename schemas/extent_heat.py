"""`extent_heat`: heat and temperature per trace, device, extent size, extent and time window.

Heat is 512-byte blocks accessed per second over the window (FIVE section 1.2); temperature is heat
divided by the extent size in blocks. window_us = 0 is the whole-trace window."""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockheat.schemas._check import check, flat_schema, spark_schema_attr

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TABLE = "extent_heat"
PARTITION_COLUMNS = ("trace_id", "extent_bytes")
STATS_COLUMNS = ("extent_id", "window_start_us")
FIELDS = (
    ("trace_id", "string", False),
    ("device", "string", False),
    ("extent_bytes", "long", False),      # extent size; several sizes coexist
    ("extent_id", "long", False),         # offset_bytes // extent_bytes
    ("window_start_us", "long", False),   # window start, us since the trace start (0 when window_us = 0)
    ("window_us", "long", False),         # window length; 0 = the whole trace
    ("requests", "long", False),          # requests touching the extent in the window
    ("reads", "long", False),
    ("writes", "long", False),
    ("blocks", "long", False),            # 512-byte blocks of the extent accessed (with repeats)
    ("bytes", "long", False),             # bytes of the requests that fall in the extent
    ("heat", "double", True),             # blocks per second over the window (NULL for a zero-length trace)
    ("temperature", "double", True),      # heat / (extent_bytes / 512)
)
COLUMNS = tuple(name for name, _, _ in FIELDS)
ARROW_SCHEMA = flat_schema(FIELDS)


class ExtentHeatSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `extent_heat` table."""


def validate_extent_heat(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise ExtentHeatSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, ExtentHeatSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
