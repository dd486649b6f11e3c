"""`sim_results`: one row per simulated scenario of a scenario grid (`blockheat simulate`), keyed by
(grid_id, trace_id, array_group, scenario_id): the scenario's parameters, then the simulator's result row.

RESULT_SCHEMA is the table's contract for the result columns: the traced devices, then the figures of
sim.stats.RunResult as the simulator's scenarios return them (sim.scenarios.SIM_RESULT_SCHEMA without its
scenario_id and trace_id; tests/sim/test_table_schemas.py checks the two agree)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "sim_results"
PARTITION_COLUMNS = ("grid_id",)
KEY_COLUMNS = ("grid_id", "trace_id", "array_group", "scenario_id")

#: The simulator's result row after the scenario's keys: one row per run.
RESULT_SCHEMA = pa.schema([
    pa.field("devices", pa.list_(pa.string()), False),   # the traced devices, in the array's disk order
    # Counts of foreground requests; response, queue and service times in ms (+inf when saturated, null when
    # there are no such requests); _read / _write split them (sim.stats.RunResult documents each figure).
    pa.field("requests", pa.int64(), False),
    pa.field("reads", pa.int64(), False),
    pa.field("writes", pa.int64(), False),
    pa.field("saturated", pa.bool_(), False),
    pa.field("mean_response_ms", pa.float64(), True),
    pa.field("p50_response_ms", pa.float64(), True),
    pa.field("p95_response_ms", pa.float64(), True),
    pa.field("p99_response_ms", pa.float64(), True),
    pa.field("max_response_ms", pa.float64(), True),
    pa.field("mean_response_ms_read", pa.float64(), True),
    pa.field("p50_response_ms_read", pa.float64(), True),
    pa.field("p95_response_ms_read", pa.float64(), True),
    pa.field("p99_response_ms_read", pa.float64(), True),
    pa.field("max_response_ms_read", pa.float64(), True),
    pa.field("mean_response_ms_write", pa.float64(), True),
    pa.field("p50_response_ms_write", pa.float64(), True),
    pa.field("p95_response_ms_write", pa.float64(), True),
    pa.field("p99_response_ms_write", pa.float64(), True),
    pa.field("max_response_ms_write", pa.float64(), True),
    pa.field("mean_queue_ms", pa.float64(), True),
    pa.field("mean_queue_ms_read", pa.float64(), True),
    pa.field("mean_queue_ms_write", pa.float64(), True),
    pa.field("mean_service_ms", pa.float64(), True),
    pa.field("mean_service_ms_read", pa.float64(), True),
    pa.field("mean_service_ms_write", pa.float64(), True),
    # Media accesses and sectors completed (the spec's sectors); read_miss_ratio: reads that needed the media.
    pa.field("physical_ios", pa.int64(), False),
    pa.field("physical_ios_read", pa.int64(), False),
    pa.field("physical_ios_write", pa.int64(), False),
    pa.field("sectors_read", pa.int64(), False),
    pa.field("sectors_written", pa.int64(), False),
    pa.field("read_miss_ratio", pa.float64(), True),
    # Per-disk utilization and queue length, time-averaged; the hottest disk is the most utilized.
    pa.field("mean_utilization", pa.float64(), True),
    pa.field("mean_utilization_read", pa.float64(), True),
    pa.field("mean_utilization_write", pa.float64(), True),
    pa.field("hottest_disk", pa.int64(), False),
    pa.field("hottest_utilization", pa.float64(), True),
    pa.field("mean_queue_length", pa.float64(), True),
    pa.field("mean_queue_length_read", pa.float64(), True),
    pa.field("mean_queue_length_write", pa.float64(), True),
    pa.field("hottest_queue_length", pa.float64(), True),
    pa.field("max_outstanding", pa.int64(), False),
    # Copies of the policies (remaps, cooling moves) and write-back destages; background traffic (bg_*).
    pa.field("migration_ios", pa.int64(), False),
    pa.field("migration_mb", pa.float64(), True),
    pa.field("migration_busy_ms", pa.float64(), True),
    pa.field("migration_ios_read", pa.int64(), False),
    pa.field("migration_ios_write", pa.int64(), False),
    pa.field("migration_mb_read", pa.float64(), True),
    pa.field("migration_mb_write", pa.float64(), True),
    pa.field("migration_busy_ms_read", pa.float64(), True),
    pa.field("migration_busy_ms_write", pa.float64(), True),
    pa.field("remaps", pa.int64(), False),
    pa.field("destage_ios", pa.int64(), False),
    pa.field("bg_requests", pa.int64(), False),
    pa.field("bg_mean_response_ms", pa.float64(), True),
    pa.field("simulated_s", pa.float64(), True),
    pa.field("events", pa.int64(), False),
    # One value per disk of the array, in disk order.
    pa.field("disk_utilization", pa.list_(pa.float64()), False),
    pa.field("disk_queue_length", pa.list_(pa.float64()), False),
    pa.field("disk_physical_ios", pa.list_(pa.int64()), False),
    pa.field("disk_max_queue", pa.list_(pa.int64()), False),
    pa.field("disk_utilization_read", pa.list_(pa.float64()), False),
    pa.field("disk_utilization_write", pa.list_(pa.float64()), False),
    pa.field("disk_queue_length_read", pa.list_(pa.float64()), False),
    pa.field("disk_queue_length_write", pa.list_(pa.float64()), False),
])
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
    *RESULT_SCHEMA,
])
COLUMNS = tuple(ARROW_SCHEMA.names)
RESULT_COLUMNS = tuple(RESULT_SCHEMA.names)


class SimResultsSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `sim_results` table."""


def validate_sim_results(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise SimResultsSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, SimResultsSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
