"""`reorg_plan_steps`: the ordered steps of each plan in `reorg_plans` (one row per step, `step` = execution
order from 0). A step copies `bytes` from (source_device, source_offset_bytes) to (dest_device,
dest_offset_bytes); devices are the traced devices, each one disk of the target array. It may start once
every step in depends_on has finished; steps with no path between them may run concurrently (within the
plan's per-disk limit). This tool applies nothing.

Step types: migrate_extent (an extent to its new place), stage (an extent to free space first, to break a
cycle of moves; a later migrate_extent takes it on), restripe (the stripe units of source_device that land
on dest_device, every width-th unit of unit_bytes, first one at dest_offset_bytes: one reshape by the volume
manager), align_to_track (a host-side I/O rule for the whole device, tracks of unit_bytes, width tracks per
I/O: no data moves, so its bytes are not counted as moved), create_area (ALIS: the reorganized area inserted
into a volume, its home data from there on shifted up by the area's size, copied back to front), copy_run and
copy_heat_unit (ALIS: a home extent copied into the reorganized area; group_id names the run).

    SELECT dest_device, sum(bytes) AS bytes_in FROM reorg_plan_steps WHERE plan_id = '...' GROUP BY dest_device
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockheat.schemas._check import check, flat_schema, spark_schema_attr

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TABLE = "reorg_plan_steps"
PARTITION_COLUMNS = ("trace_id",)
KEY_COLUMNS = ("trace_id", "plan_id", "step")
STEP_TYPES = ("migrate_extent", "stage", "restripe", "align_to_track", "copy_run", "copy_heat_unit", "create_area")
#: Step types that move no data (host-side rules): not counted in bytes_to_move or per-disk bytes.
NO_DATA_STEP_TYPES = ("align_to_track",)
FIELDS = (
    ("trace_id", "string", False),
    ("plan_id", "string", False),
    ("step", "long", False),                     # execution order, 0-based
    ("step_type", "string", False),              # one of STEP_TYPES
    ("group_id", "string", False),               # steps that belong together (a device's restripe, a move chain)
    ("source_device", "string", False),
    ("source_offset_bytes", "long", False),
    ("dest_device", "string", False),
    ("dest_offset_bytes", "long", False),
    ("bytes", "long", False),
    ("depends_on", "array<long>", False),        # steps that must finish first
    ("extent", "long", True),                    # the extent's index in the simulated extent map
    ("unit_bytes", "long", True),                # restripe: stripe unit
    ("width", "long", True),                     # restripe: disks the device is striped over
    ("time_us", "double", True),                 # cooling: when the simulated policy made the move
    ("note", "string", True),
)
COLUMNS = tuple(name for name, _, _ in FIELDS)
ARROW_SCHEMA = flat_schema(FIELDS)


class ReorgPlanStepsSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `reorg_plan_steps` table."""


def validate_reorg_plan_steps(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise ReorgPlanStepsSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, ReorgPlanStepsSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
