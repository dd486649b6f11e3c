"""`blockheat serve` on the shared PostgreSQL catalog: one warm Spark application that every command attaches to,
while a job in a JVM of its own uses the same catalog at the same time.

The attached commands run as real processes with no Java to start (JAVA_HOME and PATH point nowhere): they can
only answer through the server. A job run through it writes new tables that a query then reads by name; a job in
its own JVM writes another, which the job and `sql` through the server (never rescanning the warehouse: --refresh
3600) both see by name, as they see a view saved through the server and the tables the server's job wrote; the
names are rows of PostgreSQL's metastore, none under the warehouse. Stopping the server withdraws its endpoint
file. The server allows writes (--allow-writes, which it says): a JDBC client's DELETE runs, while an attached
`sql` still reads only unless it has --allow-writes itself. Runs on a copy of the session's ingested hplajw tables,
against the session's PostgreSQL (tests/postgres_server.py)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from deltalake import DeltaTable

from blockheat.libs.io import endpoint, journal, redaction, sql_access
from blockheat.libs.io.catalog import METASTORE_DIR
from blockheat.libs.io.connect_server import free_port
from blockheat.libs.io.jvm import SHORT_JOB_OPTIONS
from tests.conftest import HPLAJW_TRACE_ID
from tests.jobs.cli.test_sql_catalog import (
    DEVICE_TOTALS,
    TOTALS_SQL,
    output_lines,
    password_path,
    run_beeline,
    stop_server,
)
from tests.libs.ingest.test_atomic_ingest import REPO, SOURCES, TRACE
from tests.postgres_server import METASTORE_DB

START_TIMEOUT_S = 240
COPIED_TABLES = ("requests", "rejected_records", "traces")
SERVER_JOB_TABLES = ("extent_heat", "disk_heat")   # `blockheat heat` through the server
OWN_JOB_TABLE = "trace_profile"                    # jobs/trace_profile.py in a JVM of its own
PROFILED_SQL = ("SELECT sum(value) AS requests FROM trace_profile WHERE scope = 'trace' AND window_us = 3600000000 "
                "AND metric = 'requests'")        # the hourly windows' requests: all 44,519
# The job in its own JVM, then queries by name in its session (its driver is this process's).
JOB = """
import json, sys
from pyspark.sql import SparkSession
from blockheat.jobs.trace_profile import main
main([sys.argv[1]])
spark = SparkSession.getActiveSession()
rows = lambda q: [list(r) for r in spark.sql(q).collect()]
print("RESULT " + json.dumps({"catalog": spark.conf.get("spark.sql.catalogImplementation"),
                              "profiled": rows(sys.argv[2]),
                              "totals": rows("SELECT * FROM device_totals ORDER BY device"),
                              "disks": rows("SELECT count(DISTINCT disk) FROM disk_heat")}))
"""


def env_of(warehouse: Path, java: bool) -> dict[str, str]:
    """The environment of a command on `warehouse` and the shared catalog; java=False: one that cannot start a
    JVM of its own (the attached commands), java=True: one that may (the server, and with
    BLOCKHEAT_SPARK_REMOTE=local the commands of their own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOCKHEAT_", "AIRFLOW"))}
    env.update(BLOCKHEAT_WAREHOUSE=str(warehouse), BLOCKHEAT_SPARK_MASTER="local[1]", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, BLOCKHEAT_JAVA_OPTIONS=" ".join(SHORT_JOB_OPTIONS),
               HOME=str(warehouse.parent / "home"),
               **json.loads((warehouse.parent / "metastore.json").read_text()))
    if not java:        # a command that tried to start a JVM of its own would fail
        env.update(JAVA_HOME="/nonexistent", PATH=str(Path(sys.executable).parent) + ":/nonexistent",
                   SPARK_HOME="/nonexistent")
    return env


def blockheat(warehouse: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """A command attached to the server."""
    return subprocess.run([sys.executable, "-m", "blockheat.jobs.cli.main", *argv], env=env_of(warehouse, java=False),
                          capture_output=True, text=True, timeout=300, check=False)


def own_jvm(warehouse: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """A process that starts its own JVM on the shared catalog, beside the server."""
    env = {**env_of(warehouse, java=True), "BLOCKHEAT_SPARK_REMOTE": "local"}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def served(hplajw, spark_cfg, postgres_server, tmp_path_factory):  # type: ignore[no-untyped-def]
    """`blockheat serve --allow-writes` on a copy of the session's requests and traces, its catalog in PostgreSQL:
    (process, warehouse, JDBC port, Connect port, the lines it printed)."""
    root = tmp_path_factory.mktemp("serve")
    warehouse = root / "wh"
    for table in COPIED_TABLES:
        shutil.copytree(spark_cfg.warehouse / table, warehouse / table)
    (root / "home").mkdir()
    (root / "metastore.json").write_text(json.dumps(postgres_server.metastore_environment(root / "pg-password")))
    port, connect_port = free_port(), free_port()
    log = (root / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "blockheat.jobs.cli.main", "serve", "--port", str(port),
                             "--connect-port", str(connect_port), "--refresh", "3600", "--allow-writes"],
                            env=env_of(warehouse, java=True), stdout=subprocess.PIPE, stderr=log, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        lines = [""]
        while time.monotonic() < deadline and proc.poll() is None and not lines[-1].startswith("serving"):
            lines.append(proc.stdout.readline())
        assert lines[-1].startswith(f"serving the warehouse {warehouse}"), (root / "serve.log").read_text()[-3000:]
        yield proc, warehouse, port, connect_port, lines[1:]
    finally:
        stop_server(proc)
        log.close()


def test_the_server_publishes_its_endpoints(served):  # type: ignore[no-untyped-def]
    proc, warehouse, port, connect_port, _ = served
    published = json.loads((warehouse / "_serve" / "endpoint.json").read_text())
    assert published == {"connect": f"sc://127.0.0.1:{connect_port}", "jdbc": f"jdbc:hive2://127.0.0.1:{port}",
                         "host": socket.gethostname(), "pid": published["pid"]}
    stat = Path(f"/proc/{published['pid']}/stat").read_text()       # the server's JVM, a child of the command
    assert int(stat.rsplit(")", 1)[1].split()[1]) == proc.pid
    assert endpoint.find(warehouse) == endpoint.Endpoint(**published)


def test_commands_without_java_answer_through_the_server(served):  # type: ignore[no-untyped-def]
    _, warehouse, _, _, _ = served
    done = blockheat(warehouse, "sql", "--json", f"{TOTALS_SQL} ORDER BY device")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [tuple(json.loads(line).values()) for line in done.stdout.splitlines()] == DEVICE_TOTALS
    traces = blockheat(warehouse, "traces", "--json")
    assert traces.returncode == 0, traces.stderr[-3000:]
    rows = {r["trace_id"]: r for r in map(json.loads, traces.stdout.splitlines())}   # the session's other traces too
    assert rows[HPLAJW_TRACE_ID]["requests"] == 44519


def test_a_job_through_the_server_writes_a_table_queried_by_name(served):  # type: ignore[no-untyped-def]
    _, warehouse, _, _, _ = served
    heat = blockheat(warehouse, "heat", HPLAJW_TRACE_ID)
    assert heat.returncode == 0, heat.stderr[-3000:]
    assert (warehouse / "disk_heat" / "_delta_log").is_dir()
    done = blockheat(warehouse, "sql", "--json", "SELECT disk, requests FROM disk_heat WHERE trace_id = "
                                                 f"'{HPLAJW_TRACE_ID}' AND layout = 'as-traced' AND window_us = 0 "
                                                 "ORDER BY disk")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["disk"], r["requests"]) for r in rows] == [(d, n) for d, n, _ in DEVICE_TOTALS]


def test_a_job_of_its_own_shares_the_catalog_with_the_server(served, postgres_server):  # type: ignore[no-untyped-def]
    _, warehouse, _, _, _ = served
    view = blockheat(warehouse, "sql", f"CREATE VIEW device_totals AS {TOTALS_SQL}")
    assert view.returncode == 0, view.stderr[-3000:]
    job = own_jvm(warehouse, [sys.executable, "-c", JOB, HPLAJW_TRACE_ID, PROFILED_SQL])
    assert job.returncode == 0, job.stderr[-3000:]
    assert json.loads(job.stdout.splitlines()[-1].removeprefix("RESULT ")) == {
        "catalog": "hive", "profiled": [[44519.0]], "totals": [list(t) for t in DEVICE_TOTALS], "disks": [[2]]}
    # `sql` (attached: the server, which never rescanned the warehouse) sees the job's new table by the catalog alone
    attached = blockheat(warehouse, "sql", "--json",
                         f"SELECT d.*, ({PROFILED_SQL}) AS profiled FROM device_totals d ORDER BY device")
    assert attached.returncode == 0, attached.stderr[-3000:]
    assert [json.loads(line) for line in attached.stdout.splitlines()] == [
        {"device": d, "n": n, "bytes": b, "profiled": 44519.0} for d, n, b in DEVICE_TOTALS]
    psql = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(postgres_server.port), "-U", METASTORE_DB, "-At",
                           "-c", 'SELECT "TBL_NAME", "TBL_TYPE" FROM "TBLS" ORDER BY 1', METASTORE_DB],
                          env={**os.environ, "PGPASSWORD": METASTORE_DB}, capture_output=True, text=True, timeout=60,
                          check=True)
    assert [line.split("|") for line in psql.stdout.splitlines()] == sorted(
        [["device_totals", "VIRTUAL_VIEW"]]
        + [[t, "EXTERNAL_TABLE"] for t in (*COPIED_TABLES, *SERVER_JOB_TABLES, OWN_JOB_TABLE)])
    assert not (warehouse / METASTORE_DIR).exists()


def test_writes_are_the_servers_and_each_sql_commands_choice(served):  # type: ignore[no-untyped-def]
    _, warehouse, port, _, lines = served
    assert lines == ["writes allowed (--allow-writes): JDBC clients may change and drop tables\n", lines[-1]]
    assert f"(password in {password_path(warehouse)})" in lines[-1]
    delete = "DELETE FROM rejected_records WHERE trace_id = 'no-such-trace'"
    jdbc = run_beeline(f"jdbc:hive2://127.0.0.1:{port}", delete, warehouse.parent / "home", password_path(warehouse))
    assert jdbc.returncode == 0, jdbc.stderr[-3000:]
    refused = blockheat(warehouse, "sql", delete)                  # attached, without --allow-writes of its own
    assert refused.returncode == 1
    assert "read-only SQL: DeleteCommand is not allowed" in refused.stderr, refused.stderr[-3000:]
    for script in (f"BEGIN EXECUTE IMMEDIATE 'RESET spark.blockheat.readOnly'; {delete}; END",
                   f"BEGIN EXECUTE IMMEDIATE 'RESET'; {delete}; END"):     # the seal outlives RESET, even here
        refused = blockheat(warehouse, "sql", script)
        assert refused.returncode == 1, script
        assert "read-only SQL: DeleteCommand is not allowed" in refused.stderr, refused.stderr[-3000:]
    allowed = blockheat(warehouse, "sql", "--allow-writes", "--json", delete)
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert json.loads(allowed.stdout.splitlines()[0]) == {"num_affected_rows": 0}


# Results of every kind an attached `sql` reads without pyspark's client (libs.io.connect_sql): time-zoned timestamps
# (nested too), maps, structs, arrays, decimals, dates, binary, nulls, two columns of one name.
TYPED_SQL = ("SELECT trace_id, ingested_at, devices, CAST(2.5 AS DECIMAL(5, 2)) AS d, DATE'2020-01-01' AS day, "
             "map('a', 1, 'b', NULL) AS m, named_struct('p', 1, 'q', array(TIMESTAMP'2020-01-01 00:00:00')) AS s, "
             "X'0102' AS b, array(map('k', TIMESTAMP'2021-06-01 12:00:00')) AS am, 1 AS a, 2 AS a FROM traces "
             "ORDER BY trace_id")
# An attached `sql` in a fresh interpreter: the exit code, and which of pyspark and pandas it loaded.
LIGHT_SQL = """
import sys
from blockheat.jobs.cli.main import main
code = main(["sql", "--json", sys.argv[1]])
print(code, sorted(m for m in ("pandas", "pyspark") if m in sys.modules))
"""


def test_an_attached_sql_answers_without_pyspark_as_pyspark_would(served):  # type: ignore[no-untyped-def]
    _, warehouse, _, _, _ = served
    light = subprocess.run([sys.executable, "-c", LIGHT_SQL, f"{TOTALS_SQL} ORDER BY device"],
                           env=env_of(warehouse, java=False), capture_output=True, text=True, timeout=300, check=False)
    lines = light.stdout.splitlines()
    assert [tuple(json.loads(line).values()) for line in lines[:-1]] == DEVICE_TOTALS, light.stderr[-3000:]
    assert lines[-1] == "0 []"
    # The same output as through pyspark's Connect client (which --debug uses), in every format; a variant result
    # and a struct with two fields of one name go through pyspark's client, as do errors (its words).
    cases = [([], TYPED_SQL), (["--json"], TYPED_SQL), (["--output-format", "csv"], TYPED_SQL), ([], "SHOW TABLES"),
             ([], "SELECT * FROM requests WHERE trace_id = 'none'"),
             (["--limit", "3", "--json"], "SELECT seq, ts_us FROM requests ORDER BY seq"),
             ([], """SELECT parse_json('{"a": 1}') AS v"""), ([], "SELECT named_struct('a', 1, 'a', 2) AS s")]
    for options, query in cases:
        fast, full = (blockheat(warehouse, *debug, "sql", *options, query) for debug in ([], ["--debug"]))
        assert (fast.returncode, full.returncode) == (0, 0), (query, fast.stderr[-3000:], full.stderr[-3000:])
        assert fast.stdout == full.stdout, query
        assert fast.stderr == "", query
    assert "(0 rows)" in blockheat(warehouse, "sql", "SELECT * FROM requests WHERE trace_id = 'none'").stdout
    assert len(blockheat(warehouse, "sql", "--limit", "3", "--json", "SELECT seq FROM requests").stdout
               .splitlines()) == 3
    missing = blockheat(warehouse, "sql", "SELECT * FROM no_such_table")
    assert missing.returncode == 1
    assert missing.stderr.startswith("blockheat: error: [TABLE_OR_VIEW_NOT_FOUND] The table or view `no_such_table` "
                                     "cannot be found."), missing.stderr[-3000:]


# A Spark Connect client in a process of its own: the one row of a query, as JSON.
CONNECT_QUERY = """
import json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
print(json.dumps(list(spark.sql(sys.argv[2]).collect()[0])))
"""
# A Spark Connect client in a process of its own, with the URL's token: what it printed.
CONNECT_CLIENT = """
import sys
from pyspark.sql import SparkSession
try:
    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    print("ANSWER", spark.sql("SELECT count(*) FROM traces").collect()[0][0])
except Exception as exc:
    print("REFUSED", type(exc).__name__, " ".join(str(exc).split())[:2000])
"""


def test_spark_connect_is_the_owners_alone(served):  # type: ignore[no-untyped-def]
    """Read-only users get SQL only: the JDBC password (or no token) opens no Spark Connect session, so no one but
    the owner runs Python or reads files on the server."""
    _, warehouse, _, connect_port, _ = served
    password = password_path(warehouse).read_text().strip()
    token = (sql_access.serve_dir(warehouse) / sql_access.TOKEN_FILE).read_text().strip()
    printed = {}
    for who, url in (("password", f"sc://localhost:{connect_port}/;token={password}"),
                     ("nobody", f"sc://localhost:{connect_port}"),
                     ("owner", f"sc://localhost:{connect_port}/;token={token}")):
        done = subprocess.run([sys.executable, "-c", CONNECT_CLIENT, url], env=env_of(warehouse, java=False),
                              capture_output=True, text=True, timeout=300, check=False)
        printed[who] = done.stdout.strip()
    # the served copy's traces: the session's, as many as the tests before this one ingested there
    assert printed["owner"] == f"ANSWER {DeltaTable(str(warehouse / 'traces')).to_pyarrow_table().num_rows}", printed
    for who in ("password", "nobody"):
        assert printed[who].startswith("REFUSED"), printed
        assert "StatusCode.UNAUTHENTICATED" in printed[who], printed


# Commands with the server's token in the environment as the docs give it (BLOCKHEAT_SPARK_REMOTE with ;token=, and
# SPARK_CONNECT_AUTHENTICATE_TOKEN): each starts a Spark Connect session on the server; with --debug and without; that
# answer, and that fail there (an unknown table or trace, a refused file query) or before (a bad remote URL).
SECRET_COMMANDS = (
    (0, "traces"), (0, "sql", "SELECT count(*) FROM traces"), (0, "--debug", "sql", "SELECT count(*) FROM traces"),
    (1, "sql", "SELECT * FROM no_such_table"), (1, "--debug", "sql", "SELECT * FROM no_such_table"),
    (1, "sql", "SELECT * FROM text.`/etc/hostname`"), (1, "profile", "no-such-trace"),
    (1, "--debug", "heat", "no-such-trace"), (1, "score", "no-such-trace"))


def test_no_command_prints_a_secret(served):  # type: ignore[no-untyped-def]
    _, warehouse, _, connect_port, _ = served
    token = (sql_access.serve_dir(warehouse) / sql_access.TOKEN_FILE).read_text().strip()
    password = password_path(warehouse).read_text().strip()
    env = {**env_of(warehouse, java=False), sql_access.TOKEN_ENV: token}

    def run(argv: tuple[str, ...], remote: str = f"sc://localhost:{connect_port}/;token={token}") -> tuple[int, str]:
        done = subprocess.run([sys.executable, "-m", "blockheat.jobs.cli.main", *argv],
                              env={**env, "BLOCKHEAT_SPARK_REMOTE": remote}, capture_output=True, text=True,
                              timeout=300, check=False)
        return done.returncode, done.stdout + done.stderr

    with ThreadPoolExecutor(3) as pool:
        done = list(pool.map(run, [tuple(argv) for _, *argv in SECRET_COMMANDS]))
    for (code, *argv), (returncode, printed) in zip(SECRET_COMMANDS, done, strict=True):
        assert (returncode, token in printed, password in printed) == (code, False, False), (argv, printed[-3000:])
        assert ("Traceback" in printed) == ("--debug" in argv and code == 1), (argv, printed[-3000:])
    assert "hplajw" in done[0][1]
    assert f"token={redaction.MASK}" in done[2][1]        # the session's log line, masked
    returncode, printed = run(("sql", "SELECT 1"), remote=f"http://localhost:{connect_port}/;token={token}")
    assert (returncode, token in printed) == (1, False)
    assert f"got 'http://localhost:{connect_port}/;token={redaction.MASK}'" in printed, printed


def test_no_client_reads_the_servers_environment(served):  # type: ignore[no-untyped-def]
    """`serve` as `serve-sql` (test_sql_catalog): variables stay literal for a JDBC client that turns substitution
    on, even on a server that lets it write."""
    _, warehouse, port, _, _ = served
    token = (sql_access.serve_dir(warehouse) / sql_access.TOKEN_FILE).read_text().strip()
    done = run_beeline(f"jdbc:hive2://127.0.0.1:{port}/default;?spark.sql.variable.substitute=true",
                       "SELECT '${env:SPARK_CONNECT_AUTHENTICATE_TOKEN}', '${system:user.name}'",
                       warehouse.parent / "home", password_path(warehouse))
    assert done.returncode == 0, done.stderr[-3000:]
    assert output_lines(done) == ["${env:SPARK_CONNECT_AUTHENTICATE_TOKEN},${system:user.name}"], done.stdout
    assert token not in done.stdout + done.stderr


# One statement that reads the trace's `traces` row and its `requests` rows: they agree unless half an ingest shows.
WHOLE_SQL = ("SELECT t.format, t.records_accepted, (SELECT count(*) FROM requests r WHERE r.trace_id = 't') "
             "FROM traces t WHERE t.trace_id = 't'")


def killed_ingest(warehouse: Path, fmt: str) -> None:
    """An attached `blockheat ingest` of trace "t" killed after its `requests` and `rejected_records` commits,
    before its `traces` commit (tests.libs.ingest.crash_at step-2): its journal entry is left decided, half made."""
    done = subprocess.run([sys.executable, "-m", "tests.libs.ingest.crash_at", "step-2", "kill", "--", "ingest",
                           "--format", fmt, "--trace-id", TRACE, *SOURCES[fmt]], cwd=REPO,
                          env=env_of(warehouse, java=False), capture_output=True, text=True, timeout=300,
                          check=False, start_new_session=True)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]


def test_a_served_query_right_after_a_killed_ingest_sees_it_whole(served):  # type: ignore[no-untyped-def]
    """The server never rescans tables here (--refresh 3600), yet a JDBC and a Spark Connect query made the moment
    an ingest was killed between its commits see the new trace whole: the server finishes the left journal entry,
    and its queries wait for that (libs.io.sql_access, CommitBarrier)."""
    _, warehouse, port, connect_port, _ = served
    first = blockheat(warehouse, "ingest", "--format", "msr", "--trace-id", TRACE, *SOURCES["msr"])
    assert first.returncode == 0, first.stderr[-3000:]
    killed_ingest(warehouse, "blkparse")
    jdbc = run_beeline(f"jdbc:hive2://127.0.0.1:{port}", WHOLE_SQL, warehouse.parent / "home",
                       password_path(warehouse))
    assert jdbc.returncode == 0, jdbc.stderr[-3000:]
    (line,) = output_lines(jdbc)
    fmt, accepted, rows = line.split(",")
    assert (fmt, accepted) == ("blkparse", rows), jdbc.stdout
    killed_ingest(warehouse, "vscsi")
    token = (sql_access.serve_dir(warehouse) / sql_access.TOKEN_FILE).read_text().strip()
    connect = subprocess.run([sys.executable, "-c", CONNECT_QUERY, f"sc://localhost:{connect_port}/;token={token}",
                              WHOLE_SQL], env=env_of(warehouse, java=False), capture_output=True, text=True,
                             timeout=300, check=False)
    assert connect.returncode == 0, connect.stderr[-3000:]
    fmt, accepted, rows = json.loads(connect.stdout)
    assert (fmt, accepted) == ("vscsi", rows), connect.stdout
    assert journal.pending(warehouse) == []


def test_a_stopped_server_withdraws_its_endpoint(served):  # type: ignore[no-untyped-def]
    proc, warehouse, _, _, _ = served
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
