"""Runs Airflow for tests/dags in a child process with the test's environment (temporary AIRFLOW_HOME, SQLite):

    python tests/dags/airflow_driver.py runs    # one order per stdin line, in turn, each a JSON object:
                                                # {"date": DATE, "pattern": PATTERN, "unset": [VAR]}: dag.test
                                                # or {"inspect": true}: the DAG folder parsed (first, for
                                                # heavy_modules)

Output: one line "RESULT <json>" on stdout per order (Airflow logs go to stderr; dag.test prints task logs to
stdout). Consecutive orders share the process (the test may change the landing folder between them; "unset"
removes environment variables, such as a connection, from that run on): Airflow's import, database set-up and
in-process execution API are paid once per process."""
from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any

DAG_ID = "nightly_trace_analysis"
HEAVY = ("pyspark", "pandas", "numpy", "networkx", "numba", "matplotlib", "pyarrow")


def _bag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])


def inspect() -> dict[str, Any]:
    bag = _bag()
    dag = bag.dags.get(DAG_ID)
    out: dict[str, Any] = {"import_errors": bag.import_errors, "dags": sorted(bag.dags),
                           "heavy_modules": sorted(m for m in HEAVY if m in sys.modules)}
    if dag is not None:
        out["tasks"] = {t.task_id: {"downstream": sorted(t.downstream_task_ids), "depends_on_past": t.depends_on_past,
                                    "trigger_rule": str(t.trigger_rule), "type": type(t).__name__,
                                    "application": getattr(t, "partial_kwargs", {}).get("application"),
                                    "priority_weight": t.priority_weight, "weight_rule": str(t.weight_rule)}
                        for t in dag.tasks}
        out["schedule"] = {"timetable": type(dag.timetable).__name__, "cron": dag.timetable.expression,
                           "timezone": str(dag.timetable.timezone), "catchup": dag.catchup,
                           "max_active_runs": dag.max_active_runs, "max_active_tasks": dag.max_active_tasks}
    return out


@functools.cache
def _initdb() -> None:
    from airflow.utils import db

    db.initdb()


def run(date: str, mark_success: str | None) -> dict[str, Any]:
    import pendulum
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    _initdb()
    dag = _bag().dags[DAG_ID]
    for task in dag.tasks:
        task.retries = 0          # a failure ends the test run instead of waiting for the retry delay
    dr = dag.test(logical_date=pendulum.parse(date), mark_success_pattern=mark_success)
    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.run_id == dr.run_id).all()
        states: dict[str, list[str]] = {}
        seconds: dict[str, float] = {}
        for ti in sorted(tis, key=lambda t: (t.task_id, t.map_index)):
            states.setdefault(ti.task_id, []).append(str(ti.state))
            if ti.start_date and ti.end_date:
                seconds[ti.task_id] = seconds.get(ti.task_id, 0.0) + (ti.end_date - ti.start_date).total_seconds()
        xcoms = {x.task_id: x.value for x in session.query(XComModel).filter(
            XComModel.run_id == dr.run_id, XComModel.key == "return_value",
            XComModel.task_id.in_(("plan", "record_ingest", "summary", "vacuum")))}
    return {"state": str(dr.state), "data_interval": [dr.data_interval_start.isoformat(),
                                                      dr.data_interval_end.isoformat()],
            "task_states": states, "task_seconds": seconds, "xcom": xcoms}


def _print(result: dict[str, Any]) -> None:
    sys.stdout.write("RESULT " + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    assert sys.argv[1:] == ["runs"], sys.argv
    for line in sys.stdin:
        order = json.loads(line)
        for name in order.get("unset", ()):
            os.environ.pop(name, None)
        _print(inspect() if order.get("inspect") else run(order["date"], order.get("pattern")))
