"""The shared catalog on PostgreSQL: while `blockheat serve-sql` runs on it, a job writes new tables and names them
there, and `blockheat sql` starts on the same catalog (no per-session fallback): the server (through beeline), the
job and `sql` each see the view saved through the server and the job's new table by name, with the same rows.

Runs on a copy of the ingested hplajw tables in a warehouse of its own, against the session's PostgreSQL
(tests/postgres_server.py); every process is a short-lived JVM on local[1] (SHORT_JOB_OPTIONS)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from libs.io.catalog import METASTORE_DIR
from libs.io.connect_server import free_port
from libs.io.jvm import SHORT_JOB_OPTIONS
from tests.conftest import HPLAJW_TRACE_ID
from tests.jobs.cli.test_sql_catalog import BEELINE, DEVICE_TOTALS, START_TIMEOUT_S, TOTALS_SQL
from tests.postgres_server import METASTORE_DB

COPIED_TABLES = ("requests", "rejected_records", "traces")
JOB_TABLES = ("extent_heat", "disk_heat")           # what jobs/extent_heat.py writes, new to the warehouse
# extent_heat rows of the hplajw week per window_us: the one-hour windows and the whole trace.
EXTENT_HEAT_ROWS = [[0, 257], [3_600_000_000, 4537]]
HEAT_SQL = "SELECT window_us, count(*) AS n FROM extent_heat GROUP BY window_us ORDER BY window_us"
# The job, then queries by name in the job's own session (its driver is this process's).
JOB = """
import json, sys
from pyspark.sql import SparkSession
from jobs.extent_heat import main
main([sys.argv[1]])
spark = SparkSession.getActiveSession()
rows = lambda q: [list(r) for r in spark.sql(q).collect()]
print("RESULT " + json.dumps({"catalog": spark.conf.get("spark.sql.catalogImplementation"), "heat": rows(sys.argv[2]),
                              "totals": rows("SELECT * FROM device_totals ORDER BY device")}))
"""


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def beeline_rows(url: str, sql: str, env: dict[str, str]) -> list[list[str]]:
    """The CSV rows beeline prints for `sql` (no header, no prompt)."""
    done = run([str(BEELINE), "-u", url, "--silent=true", "--showHeader=false", "--outputformat=csv2", "-e", sql], env)
    return [re.sub(r"^\d+: jdbc:hive2://\S+> ", "", line).split(",") for line in done.stdout.splitlines() if line]


@pytest.fixture(scope="module")
def shared(hplajw, spark_cfg, postgres_server, tmp_path_factory):
    """The whole sequence, while one serve-sql runs on the PostgreSQL catalog: beeline saves a view; the job writes
    extent_heat and disk_heat; beeline and `sql` query both. What each printed, and the metastore's table names as
    PostgreSQL holds them."""
    root = tmp_path_factory.mktemp("pgcatalog")
    warehouse = root / "wh"
    for table in COPIED_TABLES:
        shutil.copytree(spark_cfg.warehouse / table, warehouse / table)
    (root / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOCKHEAT_", "AIRFLOW"))}
    env.update(postgres_server.metastore_environment(root / "metastore-password"),
               BLOCKHEAT_WAREHOUSE=str(warehouse), BLOCKHEAT_SPARK_MASTER="local[1]", HOME=str(root / "home"),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               BLOCKHEAT_JAVA_OPTIONS=" ".join(SHORT_JOB_OPTIONS))
    port = free_port()
    log = (root / "serve.log").open("w")
    # --refresh: the server never rescans the warehouse after its start; it sees the job's tables in the catalog only.
    server = subprocess.Popen([sys.executable, "-m", "jobs.cli.main", "serve-sql", "--port", str(port),
                               "--refresh", "3600"], env=env, stdout=subprocess.PIPE, stderr=log, text=True,
                              start_new_session=True)
    out = {}
    try:
        deadline, line = time.monotonic() + START_TIMEOUT_S, ""
        while time.monotonic() < deadline and server.poll() is None and not line.startswith("serving"):
            line = server.stdout.readline()
        assert line.startswith(f"serving Spark SQL on jdbc:hive2://127.0.0.1:{port}"), \
            (root / "serve.log").read_text()[-3000:]
        url = f"jdbc:hive2://127.0.0.1:{port}"
        out["server_before"] = beeline_rows(url, f"CREATE VIEW device_totals AS {TOTALS_SQL}; SHOW TABLES", env)
        job = run([sys.executable, "-c", JOB, HPLAJW_TRACE_ID, HEAT_SQL], env)
        out["job"] = json.loads(job.stdout.splitlines()[-1].removeprefix("RESULT "))
        out["server_after"] = beeline_rows(url, f"{HEAT_SQL}; SELECT 'disk_heat', count(*) > 0 FROM disk_heat", env)
        out["sql"] = run([sys.executable, "-m", "jobs.cli.main", "sql", "--json",
                          "SELECT d.*, (SELECT count(*) FROM extent_heat) AS heat FROM device_totals d "
                          "ORDER BY device"], env)
        server.send_signal(signal.SIGTERM)
        out["server_exit"] = server.wait(timeout=60)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
    psql = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(postgres_server.port), "-U", METASTORE_DB, "-At",
                           "-c", 'SELECT "TBL_NAME", "TBL_TYPE" FROM "TBLS" ORDER BY 1', METASTORE_DB],
                          env={**env, "PGPASSWORD": METASTORE_DB}, capture_output=True, text=True, timeout=60,
                          check=True)
    out["metastore"] = [line.split("|") for line in psql.stdout.splitlines()]
    out["warehouse"] = warehouse
    return out


def test_the_server_sees_its_view_and_the_tables_a_job_named_meanwhile(shared):
    assert shared["server_before"] == [["default", t, "false"] for t in sorted(("device_totals", *COPIED_TABLES))]
    assert shared["server_after"] == [[str(w), str(n)] for w, n in EXTENT_HEAT_ROWS] + [["disk_heat", "true"]]
    assert shared["server_exit"] == 0


def test_a_job_names_its_new_tables_and_sees_the_view_saved_through_the_server(shared):
    assert shared["job"] == {"catalog": "hive", "heat": EXTENT_HEAT_ROWS,
                             "totals": [list(t) for t in DEVICE_TOTALS]}


def test_sql_uses_the_shared_catalog_beside_the_server(shared):
    done = shared["sql"]
    heat_rows = sum(n for _, n in EXTENT_HEAT_ROWS)
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        {"device": d, "n": n, "bytes": b, "heat": heat_rows} for d, n, b in DEVICE_TOTALS]
    assert "in use by another process" not in done.stderr         # no fallback to per-session registration


def test_the_catalog_is_in_postgresql_not_under_the_warehouse(shared):
    assert shared["metastore"] == sorted([["device_totals", "VIRTUAL_VIEW"]]
                                         + [[t, "EXTERNAL_TABLE"] for t in (*COPIED_TABLES, *JOB_TABLES)])
    assert not (shared["warehouse"] / METASTORE_DIR).exists()
