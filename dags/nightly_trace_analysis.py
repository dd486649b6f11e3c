"""### Nightly trace analysis

Every day at 00:00 UTC, for the day that just ended (the data interval `[D, D+1)`), every trace in the
landing directory whose trace day `D - start_date` is due: ingest its new files, then the heat, ALIS and
policy analyses of that day, the reorganization plans of the best policies and the HTML report.

- **Landing**: `<landing_dir>/<trace_id>/manifest.json` (`format`, `start_date` = the date of trace day 0,
  optional `days`) beside the trace's files. A file whose content was seen before (under any name) is
  ingested once; newly landed files are appended to the trace, and the trace is ingested again whole only
  when a file it holds changed or went away.
- **Spark**: every stage is a `SparkSubmitOperator` on the installed `blockheat/jobs/<stage>.py` over connection
  `spark_default`
  (local mode, or a cluster URL), one mapped task instance per trace. `aged_heat` and `alis_graph` compute
  exactly trace day N from day N-1's stored state (`depends_on_past`), so a backfill equals the nightly runs.
- **Settings**: Airflow Variable `blockheat_nightly` (JSON), see `infra/airflow/README.md`.
- **Clean-up**: after the night's stages, `vacuum` (no Spark: delta-rs) deletes from every table the files of
  versions replaced more than 7 days ago (Delta's VACUUM; older versions can no longer be read) and what killed
  writes left over a day ago (libs.io.vacuum), as `blockheat vacuum` does.
- **XCom** carries job arguments, table names, Delta versions and row counts, never data.
- **Installing**: the DAG comes with the blockheat package; a DAG folder holds one line (dags/README.md):
  `from blockheat.dags.nightly_trace_analysis import dag  # noqa: F401  (airflow)`.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import CronDataIntervalTimetable, TriggerRule, task
from airflow.sdk import dag as dag_of

from blockheat import jobs
from blockheat.dags.stage_order import MAX_ACTIVE_TASKS, PRIORITY, UPSTREAM

#: The installed job files the Spark stages submit (blockheat/jobs/<stage>.py of this environment).
JOBS = Path(jobs.__file__).resolve().parent
SPARK_CONN = "spark_default"
LOCAL_CONN = '{"conn_type": "spark", "host": "local[*]"}'
CHAINED = ("aged_heat", "alis_graph")  # day N reads day N-1's rows: depends_on_past


@task
def stage_kwargs(planned: dict[str, Any], stage: str) -> list[dict[str, Any]]:
    """One stage's SparkSubmitOperator kwargs per trace (Airflow maps only over a task's return value)."""
    return list(planned["stages"][stage])


def spark_stage(stage: str, planned: Any) -> Any:
    """blockheat/jobs/<stage>.py once per trace (expand_kwargs: application_args, name, conf, env_vars,
    jars/packages)."""
    kwargs = stage_kwargs.override(task_id=f"{stage}_args")(planned, stage)
    return SparkSubmitOperator.partial(
        task_id=stage, application=str(JOBS / f"{stage}.py"), conn_id=SPARK_CONN, depends_on_past=stage in CHAINED,
        priority_weight=PRIORITY[stage], weight_rule="absolute",
    ).expand_kwargs(kwargs)


@dag_of(
    dag_id="nightly_trace_analysis",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,          # days run in order: the aged chains need the day before
    max_active_tasks=MAX_ACTIVE_TASKS,  # one Spark stage at a time (dags/stage_order.py)
    default_args={"retries": 1, "retry_delay": dt.timedelta(minutes=10)},
    doc_md=__doc__,
    tags=["blockheat"],
)
def nightly_trace_analysis() -> None:
    @task
    def plan(data_interval_start: Any = None, data_interval_end: Any = None) -> dict[str, Any]:
        """Which traces take part today, which need an ingest or the whole-trace stages, every job's arguments."""
        import sys

        from airflow.sdk import Connection, Variable
        from airflow.sdk.exceptions import AirflowNotFoundException

        from blockheat.libs.ingest.pipeline import FORMATS
        from blockheat.libs.io.session import cached_delta_jars
        from blockheat.libs.nightly import SETTINGS_VARIABLE, NightlySettings, plan_run, submit_options, table_versions
        from blockheat.libs.nightly import stage_kwargs as kwargs_of

        try:
            Connection.get(SPARK_CONN)
        except AirflowNotFoundException as exc:  # the provider would fall back to YARN without a word
            raise RuntimeError(f"connection {SPARK_CONN} is not defined: define it, for local mode as "
                               f"AIRFLOW_CONN_{SPARK_CONN.upper()}='{LOCAL_CONN}', or with a cluster URL "
                               "(infra/airflow/README.md)") from exc
        settings = NightlySettings.from_mapping(Variable.get(SETTINGS_VARIABLE, deserialize_json=True),
                                                python=sys.executable)
        plans = plan_run(settings, data_interval_start.date(), now=data_interval_end, formats=FORMATS)
        traces = [{"trace_id": p.trace_id, "day": p.day, "ingest": p.ingest, "appends": p.appends, "analyse": p.analyse,
                   "fingerprint": p.fingerprint, "analysed": p.analysed, "files": list(p.files),
                   "duplicates": [list(d) for d in p.duplicates]} for p in plans]
        return {"stages": kwargs_of(plans, submit_options(settings, cached_delta_jars())), "traces": traces,
                "warehouse": str(settings.warehouse), "tables_before": table_versions(settings.warehouse)}

    @task(trigger_rule=TriggerRule.NONE_FAILED)
    def record_ingest(planned: dict[str, Any], run_id: Any = None) -> dict[str, Any]:
        """The ingested traces' fingerprints into the ledger; the ingest tables' versions and rows written."""
        from blockheat.libs.nightly import record_ledger, table_changes

        # the warehouse as the plan task wrote it: a local path or a URI (Path() would break a URI's "//")
        traces, warehouse, tables_before = planned["traces"], planned["warehouse"], planned["tables_before"]
        for t in traces:
            if t["ingest"]:
                record_ledger(warehouse, t["trace_id"], "ingested",
                              {"fingerprint": t["fingerprint"], "files": t["files"], "run_id": run_id})
        ingest_tables = {k: tables_before[k] for k in ("requests", "rejected_records", "traces")}
        return {"ingested": [t["trace_id"] for t in traces if t["ingest"]],
                "duplicates": {t["trace_id"]: t["duplicates"] for t in traces if t["duplicates"]},
                "tables": table_changes(warehouse, ingest_tables)}

    @task(trigger_rule=TriggerRule.NONE_FAILED)
    def summary(planned: dict[str, Any], run_id: Any = None) -> dict[str, Any]:
        """Marks the whole-trace stages done in the ledger; per table written today its version and rows."""
        from blockheat.libs.nightly import record_ledger, table_changes

        traces, warehouse, tables_before = planned["traces"], planned["warehouse"], planned["tables_before"]
        for t in traces:
            if t["analyse"]:
                record_ledger(warehouse, t["trace_id"], "analysed", {**t["analysed"], "run_id": run_id})
        return {"traces": {t["trace_id"]: t["day"] for t in traces},
                "tables": table_changes(warehouse, tables_before)}

    @task(trigger_rule=TriggerRule.NONE_FAILED)
    def vacuum(planned: dict[str, Any]) -> dict[str, Any]:
        """Delta's VACUUM of every table (default retention) and the sweep of killed writes' files: per table the
        files and bytes deleted."""
        from blockheat.libs.io.vacuum import DEFAULT_RETAIN_HOURS, sweep_warehouse, vacuum_warehouse

        warehouse = planned["warehouse"]
        swept = sweep_warehouse(warehouse)
        vacuumed = vacuum_warehouse(warehouse, DEFAULT_RETAIN_HOURS)
        return {"retain_hours": DEFAULT_RETAIN_HOURS,
                "replaced": {r.where: {"files": r.files, "bytes": r.bytes} for r in vacuumed},
                "orphans": {r.where: {"files": r.files, "bytes": r.bytes} for r in swept if r.files}}

    planned = plan()
    stages = {s: spark_stage(s, planned) for s in UPSTREAM}
    recorded = record_ingest(planned)
    stages["ingest_trace"] >> recorded
    for stage, upstream in UPSTREAM.items():
        for u in upstream:
            (recorded if u == "ingest_trace" else stages[u]) >> stages[stage]
    done = summary(planned)
    last = [s for s in UPSTREAM if s != "ingest_trace" and not any(s in u for u in UPSTREAM.values())]
    [stages[s] for s in last] >> done             # the stages no other stage waits for
    done >> vacuum(planned)


#: The DAG object, by name: what a DAG folder's one line imports (Airflow collects a module's DAG globals).
dag = nightly_trace_analysis()
