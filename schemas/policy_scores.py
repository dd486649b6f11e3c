"""`policy_scores`: the policy scorecard (`blockheat score TRACE_ID`): per trace and replayed window, every
applicable policy variant (as traced, the striping methods, random, greedy allocation, disk cooling, ...)
with its parameters, the simulator's figures, the improvement against the as-traced baseline and its rank.

Written by jobs/policy_scores.py (one commit per (trace_id, window_id): a rerun replaces the window's rows).
The figures are those of the scenario in `sim_results` named by (grid_id, trace_id, array_group, scenario_id);
policies with the same scenario share it. Improvements are fractions of the baseline: 1 - policy / baseline
(0.25 = a quarter faster; negative = slower; NULL when the baseline is saturated). Rank 1 is the lowest mean
response time of the window (ties: lower p95, then policy_id); saturated variants rank last.

    SELECT rank, policy_id, mean_response_ms, improvement_mean FROM policy_scores
    WHERE trace_id = 'hplajw' AND window_id = 'all' ORDER BY rank
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockheat.schemas._check import check, flat_schema, spark_schema_attr

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TABLE = "policy_scores"
PARTITION_COLUMNS = ("trace_id",)
KEY_COLUMNS = ("trace_id", "window_id", "policy_id")
FIELDS = (
    ("trace_id", "string", False),
    ("window_id", "string", False),              # "all" (the whole trace) or "<start>s-<end>s" from the trace start
    ("policy_id", "string", False),              # "family" or "family:variant", e.g. "striped:five"
    ("family", "string", False),                 # libs.plans.policies registry name: as-traced, striped, random, ...
    ("rank", "long", False),                     # 1 = best mean response in the window
    ("params_json", "string", False),            # the variant's parameters (JSON object, sorted keys)
    ("window_start_us", "long", False),          # replayed requests: window_start_us <= ts_us < window_end_us
    ("window_end_us", "long", False),
    ("window_requests", "long", False),          # requests replayed (the window's, all devices of the group)
    ("array_group", "string", False),            # the traced devices simulated as one array ("all")
    ("n_disks", "long", False),                  # one disk per traced device: the target array
    ("spec", "string", False),                   # the disk spec's name
    ("scheduler", "string", False),              # per-disk queue discipline
    ("speedup", "double", False),                # open-loop speed-up alpha (arrivals at ts_us / alpha)
    ("grid_id", "string", False),                # sim_results.grid_id of the sweep
    ("scenario_id", "string", False),            # sim_results.scenario_id holding the figures
    ("saturated", "boolean", False),
    ("mean_response_ms", "double", False),       # +inf when saturated
    ("p95_response_ms", "double", False),
    ("p99_response_ms", "double", False),
    ("mean_service_ms", "double", True),         # disk busy time per request (ALIS's throughput proxy)
    ("mean_queue_ms", "double", True),
    ("hottest_utilization", "double", True),     # busy share of the most utilized disk
    ("utilization_max_over_mean", "double", True),   # disk balance: hottest utilization / mean (1 = even)
    ("migration_mb", "double", False),           # data the policy copied during the run (cooling), MB read + written
    ("remaps", "long", False),                   # extent moves during the run
    ("baseline_mean_response_ms", "double", False),  # the as-traced scenario of the same window
    ("baseline_p95_response_ms", "double", False),
    ("improvement_mean", "double", True),        # 1 - mean_response_ms / baseline_mean_response_ms
    ("improvement_p95", "double", True),         # 1 - p95_response_ms / baseline_p95_response_ms
    ("plannable", "boolean", False),             # `blockheat plan` can turn this variant into steps
    ("note", "string", True),                    # e.g. why a variant is not plannable
)
COLUMNS = tuple(name for name, _, _ in FIELDS)
ARROW_SCHEMA = flat_schema(FIELDS)


class PolicyScoresSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `policy_scores` table."""


def validate_policy_scores(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise PolicyScoresSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, PolicyScoresSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
