"""`blockheat serve`: one warm Spark application that every command attaches to.

The commands run as real processes with no Java to start (JAVA_HOME and PATH point nowhere): they can only answer
through the server. A job run through it writes a new table that a query then reads by name; stopping the server
withdraws its endpoint file. Runs on a copy of the session's ingested hplajw tables."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from libs.io import endpoint
from libs.io.connect_server import free_port
from libs.io.jvm import SHORT_JOB_OPTIONS
from tests.conftest import HPLAJW_TRACE_ID
from tests.jobs.cli.test_sql_catalog import DEVICE_TOTALS, TOTALS_SQL, stop_server

START_TIMEOUT_S = 240


def env_of(warehouse: Path, java: bool) -> dict[str, str]:
    env = {**os.environ, "BLOCKHEAT_WAREHOUSE": str(warehouse), "BLOCKHEAT_SPARK_MASTER": "local[1]",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "BLOCKHEAT_JAVA_OPTIONS": " ".join(SHORT_JOB_OPTIONS)}
    env.pop("BLOCKHEAT_SPARK_REMOTE", None)
    if not java:        # a command that tried to start a JVM of its own would fail
        env.update(JAVA_HOME="/nonexistent", PATH=str(Path(sys.executable).parent) + ":/nonexistent",
                   SPARK_HOME="/nonexistent")
    return env


def blockheat(warehouse: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jobs.cli.main", *argv], env=env_of(warehouse, java=False),
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def served(hplajw, spark_cfg, tmp_path_factory):  # type: ignore[no-untyped-def]
    """`blockheat serve` on a copy of the session's requests and traces: (process, warehouse, JDBC port)."""
    warehouse = tmp_path_factory.mktemp("serve") / "wh"
    for table in ("requests", "rejected_records", "traces"):
        shutil.copytree(spark_cfg.warehouse / table, warehouse / table)
    port, connect_port = free_port(), free_port()
    log = (warehouse.parent / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "jobs.cli.main", "serve", "--port", str(port),
                             "--connect-port", str(connect_port), "--refresh", "1"],
                            env=env_of(warehouse, java=True), stdout=subprocess.PIPE, stderr=log, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        line = ""
        while time.monotonic() < deadline and proc.poll() is None and not line.startswith("serving"):
            line = proc.stdout.readline()
        assert line.startswith(f"serving the warehouse {warehouse}"), (warehouse.parent / "serve.log").read_text()
        yield proc, warehouse, port, connect_port
    finally:
        stop_server(proc)
        log.close()


def test_the_server_publishes_its_endpoints(served):  # type: ignore[no-untyped-def]
    proc, warehouse, port, connect_port = served
    published = json.loads((warehouse / "_serve" / "endpoint.json").read_text())
    assert published == {"connect": f"sc://127.0.0.1:{connect_port}", "jdbc": f"jdbc:hive2://127.0.0.1:{port}",
                         "host": socket.gethostname(), "pid": published["pid"]}
    stat = Path(f"/proc/{published['pid']}/stat").read_text()       # the server's JVM, a child of the command
    assert int(stat.rsplit(")", 1)[1].split()[1]) == proc.pid
    assert endpoint.find(warehouse) == endpoint.Endpoint(**published)


def test_commands_without_java_answer_through_the_server(served):  # type: ignore[no-untyped-def]
    _, warehouse, _, _ = served
    done = blockheat(warehouse, "sql", "--json", f"{TOTALS_SQL} ORDER BY device")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [tuple(json.loads(line).values()) for line in done.stdout.splitlines()] == DEVICE_TOTALS
    traces = blockheat(warehouse, "traces", "--json")
    assert traces.returncode == 0, traces.stderr[-3000:]
    (row,) = [json.loads(line) for line in traces.stdout.splitlines()]
    assert (row["trace_id"], row["requests"]) == (HPLAJW_TRACE_ID, 44519)


def test_a_job_through_the_server_writes_a_table_queried_by_name(served):  # type: ignore[no-untyped-def]
    _, warehouse, _, _ = served
    heat = blockheat(warehouse, "heat", HPLAJW_TRACE_ID)
    assert heat.returncode == 0, heat.stderr[-3000:]
    assert (warehouse / "disk_heat" / "_delta_log").is_dir()
    done = blockheat(warehouse, "sql", "--json", "SELECT disk, requests FROM disk_heat WHERE trace_id = "
                                                 f"'{HPLAJW_TRACE_ID}' AND layout = 'as-traced' AND window_us = 0 "
                                                 "ORDER BY disk")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["disk"], r["requests"]) for r in rows] == [(d, n) for d, n, _ in DEVICE_TOTALS]


def test_a_stopped_server_withdraws_its_endpoint(served):  # type: ignore[no-untyped-def]
    proc, warehouse, _, _ = served
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert not (warehouse / "_serve" / "endpoint.json").exists()
    assert endpoint.find(warehouse) is None


def test_an_endpoint_left_by_a_dead_or_remote_server_is_ignored(tmp_path):  # type: ignore[no-untyped-def]
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        url = f"sc://127.0.0.1:{listening.getsockname()[1]}"
        alive = endpoint.Endpoint(url, "jdbc:hive2://127.0.0.1:1", socket.gethostname(), os.getpid())
        endpoint.write(tmp_path, alive)
        assert endpoint.find(tmp_path) == alive
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
        for stale in (endpoint.Endpoint(url, alive.jdbc, "another-host", os.getpid()),
                      endpoint.Endpoint(url, alive.jdbc, socket.gethostname(), int(dead.stdout))):
            endpoint.write(tmp_path, stale)
            assert endpoint.find(tmp_path) is None
        endpoint.remove(tmp_path, alive)                  # not the published one: left alone
        assert endpoint.read(tmp_path) is not None
    endpoint.write(tmp_path, alive)
    assert endpoint.find(tmp_path) is None                # nothing listens on the port any more
    endpoint.remove(tmp_path, alive)
    assert endpoint.read(tmp_path) is None
