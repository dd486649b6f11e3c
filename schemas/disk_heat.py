"""`disk_heat`: heat per disk and window under a layout (as traced, striped, random), with the balance figures."""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockheat.schemas._check import check, flat_schema, spark_schema_attr

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TABLE = "disk_heat"
PARTITION_COLUMNS = ("trace_id", "layout")

FIELDS = (
    ("trace_id", "string", False),
    ("layout", "string", False),          # as-traced | striped | random
    ("layout_params", "string", False),   # e.g. "unit_bytes=65536,width=4" ("" for as-traced)
    ("window_start_us", "long", False),
    ("window_us", "long", False),         # 0 = the whole trace
    ("disk", "string", False),            # the device name (as-traced) or the disk number
    ("requests", "long", False),          # requests, or request pieces after a stripe split, on the disk
    ("blocks", "long", False),
    ("heat", "double", True),             # blocks per second
    ("disks", "long", False),             # disks in the layout (zero-heat disks included)
    ("mean_heat", "double", True),        # over all disks of the layout in the window
    ("max_heat", "double", True),
    ("max_over_mean", "double", True),    # NULL when the window has no heat
    ("heat_variance", "double", True)     # population variance of heat across the disks
)
COLUMNS = tuple(name for name, _, _ in FIELDS)
ARROW_SCHEMA = flat_schema(FIELDS)


class DiskHeatSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `disk_heat` table."""


def validate_disk_heat(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise DiskHeatSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, DiskHeatSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
