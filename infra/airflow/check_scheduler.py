"""The nightly DAG under a real Airflow (`make airflow-check`): PostgreSQL as the metadata database
(infra/postgres/local-cluster.sh), the LocalExecutor, a scheduler, a dag-processor and an api-server (in Airflow 3 the
LocalExecutor's task processes report to its execution API), all with the settings of local-postgres.env. After
`airflow db migrate` and the parse check (`dags reserialize`, `dags list-import-errors`), `airflow dags trigger` starts
one night of nightly_trace_analysis on the bundled hplajw trace, landed with yesterday (UTC) as its day 0: a manual
run with a logical date has the last whole day before the trigger as its data interval (Airflow 3 infers it from the
time of the trigger; without a logical date a run has none), so the run analyses trace day 0. The script polls the
run through the REST API until it ends, prints its duration, every task's and the rows each table got, and stops
everything it started.

    .venv/bin/python infra/airflow/check_scheduler.py [--keep] [--timeout MINUTES]

Exit 0 when the run succeeded; 1 otherwise, with the failed tasks' log tails. Everything lives in a temporary
directory (removed unless --keep) and on free loopback ports.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "infra" / "postgres" / "local-cluster.sh"
ENV_FILE = REPO / "infra" / "airflow" / "local-postgres.env"
TRACE = REPO / "data" / "traces" / "hplajw" / "ajw.1week.srt"
DAG_ID = "nightly_trace_analysis"
# Compact evaluation settings for a check (the stages, not the paper's sizes): one k of the tracker and one policy
# family in the scorecard; small partition counts and short-job JVM flags for local mode on small data.
SETTINGS = {"tracking_ks": [5], "scorecard_args": ["--families", "striped"],
            "spark_conf": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                           "spark.databricks.delta.snapshotPartitions": "2",
                           "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}}
ENDED = ("success", "failed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def say(message: str) -> None:
    sys.stdout.write(f"airflow-check: {message}\n")
    sys.stdout.flush()


def airflow_env(root: Path, pg_port: int, api_port: int) -> dict[str, str]:
    """local-postgres.env's environment (sourced by bash, as a user would), pointed at this check's directories,
    database and ports."""
    landing, warehouse = root / "landing", root / "warehouse"
    base = {**os.environ, "AIRFLOW_HOME": str(root / "airflow"),
            "BLOCKHEAT_AIRFLOW_DB": f"postgresql+psycopg://airflow:airflow@127.0.0.1:{pg_port}/airflow"}
    for name in [k for k in base if k.startswith(("BLOCKHEAT_METASTORE", "AIRFLOW_VAR_", "AIRFLOW_CONN_"))]:
        del base[name]
    dumped = subprocess.run(["bash", "-c", f'set -a; . "{ENV_FILE}"; env -0'], cwd=REPO, env=base,
                            capture_output=True, check=True).stdout
    env = dict(item.split("=", 1) for item in dumped.decode().split("\0") if "=" in item)
    env.update({
        "AIRFLOW_VAR_BLOCKHEAT_NIGHTLY": json.dumps({"landing_dir": str(landing), "warehouse": str(warehouse),
                                                     **SETTINGS}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),     # one secret for scheduler and api-server
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",         # the REST API without a login, locally
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        # Only the triggered run: no run of the latest interval when the DAG is unpaused (max_active_runs=1 would
        # queue the check's run behind it).
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        # Task processes wait longer for the api-server than the default, which a busy 2-core machine can exceed.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
    })
    return env


def land_trace(root: Path, day0: dt.date) -> None:
    """The landing layout of infra/airflow/README.md: the whole week as the trace's one file, trace day 0 on `day0`."""
    folder = root / "landing" / "hplajw"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"format": "hp-srt", "start_date": day0.isoformat(), "days": 7}))
    shutil.copy(TRACE, folder / "day-000.srt")


def airflow(env: dict[str, str], *args: str, timeout: float = 600) -> str:
    """`airflow ARGS` to its end; its stdout (RuntimeError with its output when it fails)."""
    done = subprocess.run(["airflow", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"airflow {' '.join(args)} exited with {done.returncode}:\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return done.stdout


def get(api: str, path: str) -> Any:
    with urllib.request.urlopen(f"{api}/api/v2{path}", timeout=30) as response:
        return json.load(response)


def wait_for_api(api: str, processes: dict[str, subprocess.Popen[bytes]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        for name, process in processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"airflow {name} exited with {process.returncode}")
        try:
            get(api, "/monitor/health")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the api-server did not answer at {api} in {timeout_s:.0f} s") from None
            time.sleep(1)


def wait_for_run(api: str, run_id: str, processes: dict[str, subprocess.Popen[bytes]],
                 timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        run = get(api, f"/dags/{DAG_ID}/dagRuns/{run_id}")
        if run["state"] != last:
            say(f"run {run_id}: {run['state']}")
            last = run["state"]
        if run["state"] in ENDED:
            return dict(run)
        for name, process in processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"airflow {name} exited with {process.returncode} while the run was {last}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the run did not end in {timeout_s / 60:.0f} minutes (state {last})")
        time.sleep(5)


def seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()


def report_tasks(api: str, run_id: str, logs: Path) -> list[dict[str, Any]]:
    """Every task instance's state and seconds, printed; the log tail of each failed one."""
    tis = get(api, f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances?limit=200")["task_instances"]
    for ti in sorted(tis, key=lambda t: (t["start_date"] or "", t["task_id"], t["map_index"])):
        index = "" if ti["map_index"] < 0 else f"[{ti['map_index']}]"
        seconds = seconds_between(ti["start_date"], ti["end_date"])
        say(f"  {ti['task_id'] + index:24} {ti['state'] or 'none':10} "
            + ("" if seconds is None else f"{seconds:7.1f} s"))
        if ti["state"] == "failed":
            for log in sorted(p for p in logs.rglob("*.log") if f"task_id={ti['task_id']}" in str(p)):
                say(f"  --- {log}\n{log.read_text(errors='replace')[-3000:]}")
    return list(tis)


def report_summary(api: str, run_id: str, day0: dt.date) -> bool:
    """The summary task's rows written per table, printed; whether the run analysed the trace's day 0."""
    summary = get(api, f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/summary/xcomEntries/return_value")["value"]
    if isinstance(summary, str):
        summary = json.loads(summary)
    say(f"traces: {json.dumps(summary['traces'])}")
    for table, change in sorted(summary["tables"].items()):
        say(f"  {table:20} {json.dumps(change)}")
    if "hplajw" not in summary["traces"]:
        say(f"the run did not analyse hplajw (day 0 = {day0}: did the trigger cross midnight UTC?)")
        return False
    return True


def stop(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each component's process group (each was started in a session of its own), then SIGKILL."""
    for process in processes.values():
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes.values():
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def check(root: Path, pg_dir: Path, timeout_min: float) -> int:
    began = time.monotonic()
    pg_port, api_port = free_port(), free_port()
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        subprocess.run(["bash", str(CLUSTER), "start", str(pg_dir), str(pg_port)], check=True,
                       stdout=subprocess.DEVNULL)
        say(f"PostgreSQL on 127.0.0.1:{pg_port} ({time.monotonic() - began:.0f} s)")
        env = airflow_env(root, pg_port, api_port)
        day0 = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)     # the data interval of a run triggered now
        land_trace(root, day0)
        step = time.monotonic()
        airflow(env, "db", "migrate")
        say(f"airflow db migrate: {time.monotonic() - step:.0f} s")
        step = time.monotonic()
        airflow(env, "dags", "reserialize")
        errors = json.loads(airflow(env, "dags", "list-import-errors", "-o", "json").strip().splitlines()[-1])
        if errors:
            say(f"import errors: {errors}")
            return 1
        say(f"parsed (dags reserialize, list-import-errors): no import errors ({time.monotonic() - step:.0f} s)")
        logs = root / "logs"
        logs.mkdir()
        for name, args in (("api-server", ["api-server", "--host", "127.0.0.1", "--port", str(api_port)]),
                           ("scheduler", ["scheduler"]), ("dag-processor", ["dag-processor"])):
            with (logs / f"{name}.log").open("wb") as out:
                processes[name] = subprocess.Popen(["airflow", *args], env=env, cwd=REPO, stdout=out,
                                                   stderr=subprocess.STDOUT, start_new_session=True)
        api = f"http://127.0.0.1:{api_port}"
        wait_for_api(api, processes, 180)
        run_id = f"airflow-check-{int(time.time())}"
        airflow(env, "dags", "unpause", DAG_ID)
        airflow(env, "dags", "trigger", DAG_ID, "--run-id", run_id, "--logical-date",
                dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat())
        say(f"triggered {run_id} ({time.monotonic() - began:.0f} s since the start)")
        run = wait_for_run(api, run_id, processes, timeout_min * 60)
        seconds = seconds_between(run["start_date"], run["end_date"]) or 0.0
        say(f"run {run['state']} in {seconds:.0f} s ({seconds / 60:.1f} min), data interval "
            f"{run['data_interval_start']} .. {run['data_interval_end']}; tasks:")
        report_tasks(api, run_id, Path(env["AIRFLOW_HOME"]) / "logs")
        if run["state"] == "success" and not report_summary(api, run_id, day0):
            run["state"] = "analysed nothing"
    finally:
        stop(processes)
        subprocess.run(["bash", str(CLUSTER), "stop", str(pg_dir)], check=False)
    say(f"everything stopped; {time.monotonic() - began:.0f} s in all")
    return 0 if run["state"] == "success" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="check_scheduler", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories (logs, warehouse)")
    parser.add_argument("--timeout", type=float, default=45.0, metavar="MINUTES", help="for the run (default 45)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="blockheat-airflow-check-"))
    pg_dir = Path(tempfile.mkdtemp(prefix="blockheat-airflow-pg-"))   # beside, where the postgres user may enter
    try:
        return check(root, pg_dir, args.timeout)
    finally:
        if args.keep:
            say(f"kept {root} and {pg_dir}")
        else:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(pg_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
