"""The plans' store: a plan document's rows in `reorg_plans` and `reorg_plan_steps` (store), a stored plan by id
read without Spark (load), the check before a plan may be applied (check: the stored document, its validity and
its inputs' versions) and the export for review (export: nothing is ever applied). load and check load no pyspark:
`blockheat plan check` answers in a fraction of a second."""
from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from blockheat import schemas
from blockheat.libs.io import delta_log
from blockheat.libs.io.delta_log import LogUnreadable
from blockheat.libs.io.table_versions import Location, scoped_version, table_path
from blockheat.libs.plans.document import (
    canonical_json,
    check_plan,
    document_from_rows,
    first_difference,
    plan_ids,
    plan_rows,
    plan_scope,
    write_plan,
)
from blockheat.libs.plans.types import PlanError
from blockheat.schemas import policy_scores, reorg_plan_steps, reorg_plans, sim_results
from blockheat.schemas.reorg_plan_json import schema_errors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from blockheat.libs.io.session import SparkConfig


def store(spark: SparkSession, cfg: SparkConfig, doc: Mapping[str, Any]) -> None:
    """Replace the plan's rows of reorg_plans and reorg_plan_steps (a rerun with the same id rewrites them)."""
    from blockheat.libs.io.tables import replace_rows  # lazy: pyspark loads only to store a plan

    row, steps = plan_rows(doc)
    where = {"trace_id": row["trace_id"], "plan_id": row["plan_id"]}
    replace_rows(spark.createDataFrame([tuple(row[c] for c in reorg_plans.COLUMNS)], reorg_plans.SPARK_SCHEMA),
                 spark, cfg.warehouse, reorg_plans.TABLE, where)
    replace_rows(spark.createDataFrame([tuple(s[c] for c in reorg_plan_steps.COLUMNS) for s in steps],
                                       reorg_plan_steps.SPARK_SCHEMA), spark, cfg.warehouse, reorg_plan_steps.TABLE,
                 where)


#: The shortest plan id prefix load() takes for a whole id (as git's abbreviated hashes).
MIN_PREFIX = 4


def load(warehouse: Location, plan_id: str, spark: SparkSession | None = None) -> dict[str, Any]:
    """A stored plan's document by id, or by a unique prefix of its id (at least MIN_PREFIX characters; PlanError
    listing the candidates when several plans share it), recomputed from its stored rows
    (libs.plans.document.document_from_rows): the reorg_plans row's plan_json with its steps from reorg_plan_steps,
    every column of both checked against the document (PlanError naming the table, the row and the column). Read
    without Spark (libs.io.delta_log.read); through `spark` when delta-rs cannot read the tables' files (without
    one, LogUnreadable)."""
    try:
        rows = _stored_rows(warehouse, reorg_plans, plan_id, None)
        steps = _stored_rows(warehouse, reorg_plan_steps, plan_id, None) if rows else []
    except LogUnreadable:
        if spark is None:
            raise
        rows = _stored_rows(warehouse, reorg_plans, plan_id, spark)
        steps = _stored_rows(warehouse, reorg_plan_steps, plan_id, spark) if rows else []
    if not rows:
        if len(plan_id) >= MIN_PREFIX and (whole := _whole_id(warehouse, plan_id, spark)) is not None:
            return load(warehouse, whole, spark)
        raise PlanError(f"no plan {plan_id!r} in reorg_plans under {warehouse}")
    if len(rows) > 1:
        raise PlanError(f"reorg_plans under {warehouse} holds {len(rows)} rows for plan {plan_id}")
    return document_from_rows(rows[0], steps)


def stored_ids(warehouse: Location, spark: SparkSession | None = None) -> list[str]:
    """Every plan id in reorg_plans (without Spark unless `spark` is given; no table: none)."""
    if spark is not None:
        from blockheat.libs.io.tables import read_table  # lazy: pyspark loads only for a read through Spark

        return [r[0] for r in read_table(spark, warehouse, reorg_plans.TABLE).select("plan_id").collect()]
    root = table_path(warehouse, reorg_plans.TABLE)
    if delta_log.table_version(root) is None:
        return []
    return delta_log.read(root, ["plan_id"]).column("plan_id").to_pylist()


def _whole_id(warehouse: Location, prefix: str, spark: SparkSession | None) -> str | None:
    """The one stored plan id starting with `prefix` (None: none does; PlanError: several do)."""
    found = sorted({i for i in stored_ids(warehouse, spark) if i.startswith(prefix)})
    if len(found) > 1:
        raise PlanError(f"plan id prefix {prefix!r} is ambiguous: {', '.join(found[:5])}"
                        + (f" and {len(found) - 5} more" if len(found) > 5 else "") + "; give more of the id")
    return found[0] if found else None


def _stored_rows(warehouse: Location, table: Any, plan_id: str, spark: SparkSession | None) -> list[dict[str, Any]]:
    """The rows of `table` (a schemas module: TABLE, COLUMNS) whose plan_id is `plan_id`, every column; without
    Spark unless `spark` is given. No table: no rows."""
    if spark is not None:
        from pyspark.sql import functions as F  # lazy: pyspark loads only for a read through Spark

        from blockheat.libs.io.tables import read_table

        return [r.asDict() for r in read_table(spark, warehouse, table.TABLE).where(F.col("plan_id") == plan_id)
                .select(*table.COLUMNS).collect()]
    root = table_path(warehouse, table.TABLE)
    if delta_log.table_version(root) is None:
        return []
    return delta_log.rows(delta_log.read(root, list(table.COLUMNS), {"plan_id": plan_id}))


def check(warehouse: Location, doc: Mapping[str, Any], now: dt.datetime | None = None,
          stored: Mapping[str, Any] | None = None) -> list[str]:
    """Why the plan must not be applied now (empty: it may be). A document is trusted only as the one stored under
    its id (`stored`, default: recomputed here from the reorg_plans and reorg_plan_steps rows, load): the whole
    document, a copy from a file included, must equal it in canonical form (canonical_json: formatting and key order
    aside), else the first differing field is named, so an edited plan with its ids recomputed is refused; then
    libs.plans.document.check_plan on the stored document against the input tables' latest versions that changed the
    plan's rows (its trace, window and grid; a rerun of `score` that rewrote them equal, RERUN_COLUMNS aside, changed
    nothing). Only blockheat's own tables under the warehouse are read, never a path the document names."""
    now = now or dt.datetime.now(dt.UTC)
    if schema_errors(doc):
        return check_plan(doc, now=now, versions={})      # not a plan document: check_plan says why
    if stored is None:
        try:
            stored = load(warehouse, str(doc["plan_id"]))
        except PlanError as exc:
            return [f"not a stored plan: {exc}"]
    if canonical_json(stored) != canonical_json(doc):
        at = first_difference(stored, doc) or "(the whole document)"
        return [f"not the stored plan: the document differs from plan {stored.get('plan_id')} in reorg_plans at "
                f"{at} (edited after it was built)"]
    unknown = sorted(set(stored["inputs"]["tables"]) - set(schemas.TABLE_MODULES))
    if unknown:
        return [f"not a blockheat plan: input tables {', '.join(unknown)} are not blockheat tables"]
    scope = plan_scope(stored)
    versions = {t: scoped_version(warehouse, t, scope, since=v) for t, v in stored["inputs"]["tables"].items()}
    for table, read in stored["inputs"]["tables"].items():
        now_at = versions[table]
        if now_at is not None and now_at > read and _rerun_unchanged(warehouse, table, scope, read, now_at):
            versions[table] = read
    return check_plan(stored, now=now, versions=versions)


#: Result tables a rerun rewrites (`score`), with their columns that differ from run to run: a commit that leaves
#: the plan's rows equal apart from those does not make the plan stale.
RERUN_COLUMNS = {policy_scores.TABLE: (), sim_results.TABLE: ("wall_s",)}
_COLUMNS = {policy_scores.TABLE: policy_scores.COLUMNS, sim_results.TABLE: sim_results.COLUMNS}


def _rerun_unchanged(warehouse: Location, table: str, scope: Mapping[str, str], read: int, now_at: int) -> bool:
    """Whether `table`'s rows in `scope` are the same at versions `read` and `now_at` (RERUN_COLUMNS aside); False
    for any other table, or when delta-rs cannot read a version."""
    if table not in RERUN_COLUMNS:
        return False
    names = [c for c in _COLUMNS[table] if c not in RERUN_COLUMNS[table]]
    where = {c: v for c, v in scope.items() if c in names}
    root = table_path(warehouse, table)
    try:
        before, after = (delta_log.rows(delta_log.read(root, names, where, version=v)) for v in (read, now_at))
    except LogUnreadable:
        return False
    return sorted(map(_row_text, before)) == sorted(map(_row_text, after))


def _row_text(row: Mapping[str, Any]) -> str:
    """A row as comparable text (NaN equal to NaN)."""
    return json.dumps(row, sort_keys=True, default=str)


def export(doc: Mapping[str, Any], fmt: str, out: Path) -> Path:
    """Write the plan for review (a dry run: nothing is applied); refuses a document whose id does not match."""
    plan_id, _ = plan_ids(doc)
    if plan_id != doc.get("plan_id"):
        raise PlanError(f"plan {doc.get('plan_id')}: hash mismatch (the document hashes to {plan_id}); not exported")
    return write_plan(doc, out, fmt)
