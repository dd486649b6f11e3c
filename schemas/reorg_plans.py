"""`reorg_plans`: one row per reorganization plan (`blockheat plan TRACE_ID --policy POLICY`): its id, status,
headline figures and the whole plan document as canonical JSON (`plan_json`, the format of
schemas.reorg_plan_json; its steps are also rows of `reorg_plan_steps`).

plan_id is the SHA-256 (hex) of the canonical plan document without plan_id itself: every other field is
covered, created_at and valid_until included, so no field can change unnoticed (`blockheat plan check`);
created_at is given (`--now`, the DAG's logical date), so a rerun on the same inputs reproduces the id.
content_id hashes the same document without plan_id, content_id, created_at and valid_until: the decision
alone, equal for the same plan built on another day.

    SELECT plan_id, policy_id, status, n_steps, bytes_to_move, improvement_mean FROM reorg_plans
    WHERE trace_id = 'hplajw' ORDER BY created_at DESC
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockheat.schemas._check import check, flat_schema, spark_schema_attr

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TABLE = "reorg_plans"
PARTITION_COLUMNS = ("trace_id",)
KEY_COLUMNS = ("trace_id", "plan_id")
STATUSES = ("proposed", "no_improvement", "not_worth_it")
FIELDS = (
    ("trace_id", "string", False),
    ("plan_id", "string", False),                # SHA-256 hex of the canonical document without plan_id
    ("content_id", "string", False),             # SHA-256 hex without plan_id, content_id, created_at, valid_until
    ("schema_version", "long", False),           # schemas.reorg_plan_json.SCHEMA_VERSION
    ("created_at", "string", False),             # ISO-8601 UTC, e.g. 2026-01-02T03:04:05Z
    ("valid_until", "string", False),            # ISO-8601 UTC; `plan check` refuses the plan after it
    ("window_id", "string", False),              # policy_scores.window_id the plan was scored on
    ("policy_id", "string", False),              # policy_scores.policy_id
    ("family", "string", False),
    ("status", "string", False),                 # "proposed" (steps listed), "no_improvement" or "not_worth_it" (none)
    ("reason", "string", True),                  # why there are no steps (status no_improvement or not_worth_it)
    ("n_steps", "long", False),
    ("bytes_to_move", "long", False),            # sum of the steps' bytes
    ("predicted_mean_response_ms", "double", True),  # the policy in the simulator (NULL: saturated)
    ("baseline_mean_response_ms", "double", True),   # as traced, same window and disks
    ("improvement_mean", "double", True),        # 1 - predicted / baseline
    ("validation_demerit_ms", "double", True),   # the disk model's demerit on the window (NULL: not measurable)
    ("plan_json", "string", False),              # the whole plan (canonical JSON, plan_id included)
)
COLUMNS = tuple(name for name, _, _ in FIELDS)
ARROW_SCHEMA = flat_schema(FIELDS)


class ReorgPlansSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `reorg_plans` table."""


def validate_reorg_plans(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise ReorgPlansSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, ReorgPlansSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
