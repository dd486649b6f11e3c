"""The nightly DAG: it parses without import errors and without heavy imports, has the expected tasks and
order, refuses to run without spark_default, skips every Spark stage on a night with no trace due, and runs
with dag.test() for two consecutive nights on the first two days of the real hplajw trace, one day's file
landing per night (and day 0's file a second time): the tables, the aging across the two nights (equal to a
backfill's, tests/jobs/test_nightly_jobs.py) and the exported plans are checked. Airflow runs in a child
process (tests/dags/airflow_driver.py) with its SQLite database under a temporary AIRFLOW_HOME; spark_default
is local[2] and spark-submit really runs the jobs. Consecutive runs share one Airflow process (the two nights;
the night with nothing due and the run without spark_default).

To keep the test time down the whole-trace stages (extent_heat, heat_tracking, trace_profile, heat_report:
existing jobs with their own tests; their arguments are checked in tests/libs/test_nightly.py) are marked
successful by dag.test's mark_success_pattern instead of run; on night 1 so are alis_layout, policy_scores
and reorg_plan, which night 2 does not read (it runs them over both days; the per-day window of their
arguments is checked in tests/libs/test_nightly.py). Every other task runs, each a real spark-submit."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest

from blockheat.libs.io.table_versions import table_version
from blockheat.libs.io.tables import trace_rows
from tests.builders import write_srt_days
from tests.jobs.test_nightly_jobs import CHAIN_DIGESTS, chain_digests

TRACE = "hplajw"
NOT_RUN = "extent_heat|heat_tracking|trace_profile|heat_report"
NOT_RUN_NIGHT_1 = f"{NOT_RUN}|alis_layout|policy_scores|reorg_plan"
SPARK_STAGES = ("ingest_trace", "extent_heat", "heat_tracking", "trace_profile", "heat_report", "aged_heat",
                "alis_graph", "alis_layout", "policy_scores", "reorg_plan")
DOWNSTREAM = {
    "plan": {f"{s}_args" for s in SPARK_STAGES} | {"record_ingest", "summary", "vacuum"},
    "ingest_trace": {"record_ingest"},
    "record_ingest": {"extent_heat", "heat_tracking", "trace_profile", "aged_heat", "alis_graph", "policy_scores"},
    "extent_heat": {"heat_report"}, "heat_tracking": {"heat_report"}, "trace_profile": {"heat_report"},
    "alis_graph": {"alis_layout"}, "policy_scores": {"reorg_plan"},
    "heat_report": {"summary"}, "aged_heat": {"summary"}, "alis_layout": {"summary"}, "reorg_plan": {"summary"},
    "summary": {"vacuum"}, "vacuum": set(),
} | {f"{s}_args": {s} for s in SPARK_STAGES}


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory, repo_root):
    """The child's environment: nothing of this process's Airflow, Spark-test or warehouse settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "BLOCKHEAT_", "PYSPARK_")) and k != "SPARK_TESTING"}
    env.update(AIRFLOW_HOME=str(tmp_path_factory.mktemp("airflow_home")), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__CORE__DAGS_FOLDER=str(repo_root / "infra" / "airflow" / "dags"), PYTHONDONTWRITEBYTECODE="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    return env


@contextmanager
def _runs(env, log_path):
    """One Airflow process for consecutive orders (airflow_driver.py runs): step(DATE, PATTERN, unset=(VAR, ...))
    returns a run, step(inspect=True) the parsed DAG folder; the process's logs go to log_path (stderr, then the
    task logs dag.test printed)."""
    printed = []
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("airflow_driver.py")), "runs"], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)

        def step(date=None, pattern=None, unset=(), inspect=False):
            order = {"inspect": True} if inspect else {"date": date, "pattern": pattern, "unset": list(unset)}
            proc.stdin.write(json.dumps(order) + "\n")
            proc.stdin.flush()
            watchdog = threading.Timer(1500, proc.kill)      # a hung run fails the test instead of the suite
            watchdog.start()
            try:
                line = proc.stdout.readline()
                while line and not line.startswith("RESULT "):
                    printed.append(line)
                    line = proc.stdout.readline()
            finally:
                watchdog.cancel()
            assert line, log_path.read_text()[-5000:]
            return json.loads(line[len("RESULT "):])

        try:
            yield step
            proc.stdin.close()
            assert proc.wait(timeout=120) == 0, log_path.read_text()[-5000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.writelines(printed)


@pytest.fixture(scope="module")
def quiet_runs(airflow_env, tmp_path_factory):
    """One Airflow process: the DAG folder parsed (before anything else imports a module), then two runs,
    2026-01-06 with a trace whose first day is still to come and 2026-01-07 with spark_default no longer
    defined."""
    root = tmp_path_factory.mktemp("quiet")
    folder = root / "landing" / TRACE
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"format": "hp-srt", "start_date": "2026-02-01"}))
    env = {**airflow_env, "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
           "AIRFLOW_VAR_BLOCKHEAT_NIGHTLY": json.dumps({"landing_dir": str(root / "landing"),
                                                       "warehouse": str(root / "wh")})}
    with _runs(env, root / "airflow.log") as run:
        parsed = run(inspect=True)
        nothing_due = run("2026-01-06T00:00:00+00:00")
        no_connection = run("2026-01-07T00:00:00+00:00", unset=["AIRFLOW_CONN_SPARK_DEFAULT"])
    return {"inspect": parsed, "nothing_due": nothing_due, "no_connection": no_connection,
            "logs": (root / "airflow.log").read_text()}


def test_dag_imports_cleanly_with_the_expected_tasks(quiet_runs, repo_root):
    found = quiet_runs["inspect"]
    assert found["import_errors"] == {}
    assert found["dags"] == ["nightly_trace_analysis"]
    assert found["heavy_modules"] == []                       # parsing imports no pyspark, pandas, numpy, ...
    tasks = found["tasks"]
    assert {t: set(v["downstream"]) for t, v in tasks.items()} == DOWNSTREAM
    assert {t for t, v in tasks.items() if v["depends_on_past"]} == {"aged_heat", "alis_graph"}
    assert {t for t, v in tasks.items() if v["trigger_rule"].endswith("NONE_FAILED")} == {
        "record_ingest", "summary", "vacuum"}
    assert {t: v["application"] for t, v in tasks.items() if t in SPARK_STAGES} == {
        s: str(repo_root / "jobs" / f"{s}.py") for s in SPARK_STAGES}
    assert all(tasks[s]["type"] == "MappedOperator" for s in SPARK_STAGES)
    # One Spark job at a time; were there more slots, the longest chains first: the scorecard, the ALIS graph.
    by_priority = sorted(SPARK_STAGES, key=lambda s: -tasks[s]["priority_weight"])
    assert by_priority[:5] == ["ingest_trace", "policy_scores", "reorg_plan", "alis_graph", "alis_layout"]
    assert len({tasks[s]["priority_weight"] for s in SPARK_STAGES}) == len(SPARK_STAGES)
    assert {tasks[s]["weight_rule"] for s in SPARK_STAGES} == {"absolute"}
    assert found["schedule"] == {"timetable": "CronDataIntervalTimetable", "cron": "0 0 * * *", "timezone": "UTC",
                                 "catchup": False, "max_active_runs": 1, "max_active_tasks": 1}


def test_a_run_without_the_spark_connection_fails_in_plan(quiet_runs):
    """Without spark_default the Spark provider would submit to YARN: the plan task refuses instead."""
    run = quiet_runs["no_connection"]
    assert run["state"] == "failed"
    assert run["task_states"]["plan"] == ["failed"]
    assert "connection spark_default is not defined: define it, for local mode as AIRFLOW_CONN_SPARK_DEFAULT=" in \
        quiet_runs["logs"]


def test_a_night_with_no_trace_due_skips_every_spark_stage(quiet_runs):
    run = quiet_runs["nothing_due"]
    assert run["state"] == "success"
    assert {t: s for t, s in run["task_states"].items() if s != ["success"]} == {s: ["skipped"] for s in SPARK_STAGES}
    assert run["xcom"]["summary"] == {"traces": {}, "tables": {}}


@pytest.fixture(scope="module")
def two_nights(airflow_env, tmp_path_factory, repo_root):
    """Night 1 analyses trace day 0 with day 0's file landed; night 2 day 1, after day 1's file and a copy
    of day 0's landed."""
    root = tmp_path_factory.mktemp("nightly")
    folder = root / "landing" / TRACE
    folder.mkdir(parents=True)
    source = repo_root / "data/traces/hplajw/ajw.1week.srt"
    (folder / "manifest.json").write_text(json.dumps({"format": "hp-srt", "start_date": "2026-01-05", "days": 7}))
    write_srt_days(folder / "day-0.srt", source, range(0, 1))
    settings = {"landing_dir": str(root / "landing"), "warehouse": str(root / "wh"), "tracking_ks": [5],
                "scorecard_args": ["--families", "striped"],
                "spark_conf": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                               "spark.databricks.delta.snapshotPartitions": "2",
                               # short jobs on small data: the JIT's first tier and a serial GC cost less CPU
                               "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}}
    env = {**airflow_env, "AIRFLOW_VAR_BLOCKHEAT_NIGHTLY": json.dumps(settings),
           "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"})}
    with _runs(env, root / "airflow.log") as night:
        first = night("2026-01-06T00:00:00+00:00", NOT_RUN_NIGHT_1)
        write_srt_days(folder / "day-1.srt", source, range(1, 2))
        shutil.copy(folder / "day-0.srt", folder / "resent-day-0.srt")
        second = night("2026-01-07T00:00:00+00:00", NOT_RUN)
    for night, run in enumerate((first, second), start=1):      # where the time goes (pytest -s shows it)
        print(f"night {night} task seconds:", json.dumps({t: round(s, 1) for t, s in run["task_seconds"].items()}))
    return {"root": root, "folder": folder, "warehouse": root / "wh", "runs": (first, second)}


def _rows(spark, warehouse, name):
    """The trace's rows of a table, as collect() gives them, read from the files its log lists."""
    return trace_rows(spark, warehouse, name, TRACE)


@pytest.mark.spark          # the nights' Spark stages are spark-submits
def test_two_nights_run_every_task(two_nights):
    first, second = two_nights["runs"]
    assert (first["state"], second["state"]) == ("success", "success")
    assert first["data_interval"] == ["2026-01-05T00:00:00+00:00", "2026-01-06T00:00:00+00:00"]
    assert second["data_interval"] == ["2026-01-06T00:00:00+00:00", "2026-01-07T00:00:00+00:00"]
    for run in (first, second):
        assert set(run["task_states"]) == set(DOWNSTREAM)
        assert all(s == ["success"] for s in run["task_states"].values()), run["task_states"]
    plan1, plan2 = first["xcom"]["plan"]["traces"], second["xcom"]["plan"]["traces"]
    assert [(t["trace_id"], t["day"], t["ingest"], t["appends"]) for t in plan1 + plan2] == [
        (TRACE, 0, True, False), (TRACE, 1, True, True)]                # night 2 appends day 1's file
    folder = two_nights["folder"]
    assert plan2[0]["files"] == [str(folder / "day-0.srt"), str(folder / "day-1.srt")]
    assert plan2[0]["duplicates"] == [[str(folder / "resent-day-0.srt"), str(folder / "day-0.srt")]]
    assert second["xcom"]["record_ingest"]["ingested"] == [TRACE]
    aged = second["xcom"]["summary"]["tables"]["aged_heat"]
    assert (aged["commits"], aged["rows_written"]) == (1, 27)        # exactly one day's rows, day 1's
    # The nightly vacuum keeps 7 days of replaced versions: night 1's files, replaced tonight, stay readable.
    cleaned = second["xcom"]["vacuum"]
    assert cleaned["retain_hours"] == 168
    assert cleaned["orphans"] == {}
    assert {"requests", "aged_heat", "traces"} <= set(cleaned["replaced"])
    assert all(r == {"files": 0, "bytes": 0} for r in cleaned["replaced"].values()), cleaned


def test_tables_ingest_once_and_age_across_the_nights(spark, two_nights):
    wh = two_nights["warehouse"]
    requests = _rows(spark, wh, "requests")
    assert len(requests) == 398 + 653                              # day 0's file counted once, not twice
    assert {r["source_file"] for r in requests} == {
        str(two_nights["folder"] / "day-0.srt"), str(two_nights["folder"] / "day-1.srt")}
    ledger = json.loads((wh / "_nightly" / "ledger" / f"{TRACE}.json").read_text())
    sha = [hashlib.sha256((two_nights["folder"] / f"day-{d}.srt").read_bytes()).hexdigest() for d in (0, 1)]
    assert ledger["ingested"]["fingerprint"] == {"format": "hp-srt", "sha256": sha}

    # night 1 saw only day 0's file: the tables equal those of the backfill in test_nightly_jobs.py
    assert chain_digests(spark, wh, TRACE) == CHAIN_DIGESTS
    rows = _rows(spark, wh, "aged_heat")
    day = {n: {(r["device"], r["extent_id"]): r for r in rows if r["interval_id"] == n} for n in (0, 1)}
    assert {n: (len(d), sum(r["count"] for r in d.values())) for n, d in day.items()} == {0: (21, 398), 1: (27, 653)}
    for key, r in day[1].items():
        previous = day[0][key]["aged_count"] if key in day[0] else 0.0
        assert r["aged_count"] == pytest.approx(0.8 * r["count"] + 0.2 * previous, rel=1e-12)
    assert Counter(r["interval_id"] for r in _rows(spark, wh, "access_graph")) == {0: 8, 1: 120}
    assert sorted({r["interval_id"] for r in _rows(spark, wh, "alis_summary")}) == [0, 1]
    versions = two_nights["runs"][1]["xcom"]["summary"]["tables"]
    assert all(v["version"] == table_version(wh, t) for t, v in versions.items())


def test_the_nights_plan_is_exported(spark, two_nights):
    wh = two_nights["warehouse"]
    plans = {r["plan_id"]: r for r in _rows(spark, wh, "reorg_plans")}
    exported = {p.stem: json.loads(p.read_text()) for p in (wh / "exports" / TRACE).glob("*.json")}
    assert set(exported) == set(plans)
    # Night 2 scores and plans its day (night 1's plan stages were marked successful, not run).
    docs = sorted(exported.values(), key=lambda d: d["created_at"])
    assert [(d["created_at"], d["inputs"]["window"]["window_id"]) for d in docs] == [
        ("2026-01-07T00:00:00Z", "86400s-172800s")]
    for plan_id, doc in exported.items():
        assert doc == json.loads(plans[plan_id]["plan_json"])
    assert sorted({r["window_id"] for r in _rows(spark, wh, "policy_scores")}) == ["86400s-172800s"]
    assert [d["valid_until"] for d in docs] == ["2026-01-08T00:00:00Z"]                          # 24 h
