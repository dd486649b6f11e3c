"""The plans' store: a plan document's rows in `reorg_plans` and `reorg_plan_steps` (store), a stored plan by id
read without Spark (load), the check before a plan may be applied (check: the stored document, its validity and
its inputs' versions) and the export for review (export: nothing is ever applied)."""
from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from blockheat.libs.io import delta_log
from blockheat.libs.io.delta_log import LogUnreadable
from blockheat.libs.io.tables import (
    TABLES,
    Location,
    read_table,
    replace_rows,
    scoped_version,
    table_path,
    table_version,
)
from blockheat.libs.plans.steps import (
    PlanError,
    canonical_json,
    check_plan,
    plan_ids,
    plan_rows,
    plan_scope,
    write_plan,
)
from blockheat.schemas import reorg_plan_steps, reorg_plans
from blockheat.schemas.reorg_plan_json import schema_errors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from blockheat.libs.io.session import SparkConfig


def store(spark: SparkSession, cfg: SparkConfig, doc: Mapping[str, Any]) -> None:
    """Replace the plan's rows of reorg_plans and reorg_plan_steps (a rerun with the same id rewrites them)."""
    row, steps = plan_rows(doc)
    where = {"trace_id": row["trace_id"], "plan_id": row["plan_id"]}
    replace_rows(spark.createDataFrame([tuple(row[c] for c in reorg_plans.COLUMNS)], reorg_plans.SPARK_SCHEMA),
                 spark, cfg.warehouse, reorg_plans.TABLE, where)
    replace_rows(spark.createDataFrame([tuple(s[c] for c in reorg_plan_steps.COLUMNS) for s in steps],
                                       reorg_plan_steps.SPARK_SCHEMA), spark, cfg.warehouse, reorg_plan_steps.TABLE,
                 where)


def load(warehouse: Location, plan_id: str, spark: SparkSession | None = None) -> dict[str, Any]:
    """A stored plan's document by id (the row's id must be the document's: it is checked again by check), read
    without Spark (libs.io.delta_log.read); through `spark` when delta-rs cannot read the table's files (without
    one, LogUnreadable)."""
    root = table_path(warehouse, reorg_plans.TABLE)
    try:
        rows = [] if table_version(warehouse, reorg_plans.TABLE) is None else \
            delta_log.read(root, ["plan_id", "plan_json"], {"plan_id": plan_id}).to_pylist()
    except LogUnreadable:
        if spark is None:
            raise
        rows = [r.asDict() for r in read_table(spark, warehouse, reorg_plans.TABLE)
                .where(F.col("plan_id") == plan_id).select("plan_id", "plan_json").collect()]
    if not rows:
        raise PlanError(f"no plan {plan_id!r} in reorg_plans under {warehouse}")
    doc = dict(json.loads(rows[0]["plan_json"]))
    if doc.get("plan_id") != plan_id:
        raise PlanError(f"reorg_plans row {plan_id} holds a document claiming id {doc.get('plan_id')!r}")
    return doc


def check(warehouse: Location, doc: Mapping[str, Any], now: dt.datetime | None = None,
          stored: Mapping[str, Any] | None = None) -> list[str]:
    """Why the plan must not be applied now (empty: it may be). A document is trusted only as the one stored under
    its id in reorg_plans (`stored`, default: read here): a copy from a file must equal it (formatting and key
    order aside), so an edited plan with its ids recomputed is refused; then libs.plans.steps.check_plan against
    the input tables' latest versions that changed the plan's rows (its trace, window and grid). Only blockheat's
    own tables under the warehouse are read, never a path the document names."""
    now = now or dt.datetime.now(dt.UTC)
    if schema_errors(doc):
        return check_plan(doc, now=now, versions={})      # not a plan document: check_plan says why
    if stored is None:
        try:
            stored = load(warehouse, str(doc["plan_id"]))
        except PlanError as exc:
            return [f"not a stored plan: {exc}"]
    if canonical_json(stored) != canonical_json(doc):
        return [f"not the stored plan: the document differs from plan {doc['plan_id']} in reorg_plans (edited after "
                "it was built)"]
    unknown = sorted(set(doc["inputs"]["tables"]) - set(TABLES))
    if unknown:
        return [f"not a blockheat plan: input tables {', '.join(unknown)} are not blockheat tables"]
    scope = plan_scope(doc)
    versions = {t: scoped_version(warehouse, t, scope, since=v) for t, v in doc["inputs"]["tables"].items()}
    return check_plan(doc, now=now, versions=versions)


def export(doc: Mapping[str, Any], fmt: str, out: Path) -> Path:
    """Write the plan for review (a dry run: nothing is applied); refuses a document whose id does not match."""
    plan_id, _ = plan_ids(doc)
    if plan_id != doc.get("plan_id"):
        raise PlanError(f"plan {doc.get('plan_id')}: hash mismatch (the document hashes to {plan_id}); not exported")
    return write_plan(doc, out, fmt)
