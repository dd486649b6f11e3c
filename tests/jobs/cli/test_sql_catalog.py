"""The persistent catalog: `blockheat serve-sql` queried with the real beeline client,
`blockheat sql` while the server holds the metastore, and the metastore's views seen by `blockheat sql` and
`blockheat sql-shell` after the server stopped and the warehouse moved (to a path with spaces and quotes). The
server's front door: beeline logs in with the password file only, and reads only (no DELETE, DROP, TRANSFORM, file
query or Java call, whatever the client sets when it connects); `blockheat sql` reads only unless --allow-writes.

Runs on a copy of the ingested hplajw tables in a warehouse of its own (the session's stays metastore-free)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyspark
import pytest

from blockheat.libs.io import sql_access
from blockheat.libs.io.catalog import init_sql, metastore_in_use, metastore_path
from blockheat.libs.io.connect_server import free_port
from blockheat.libs.io.jvm import SHORT_JOB_OPTIONS
from tests.conftest import HPLAJW_TRACE_ID

BEELINE = Path(pyspark.__file__).parent / "bin" / "beeline"
START_TIMEOUT_S = 240
# Per device: requests and bytes of the hplajw week (README, `make demo`).
DEVICE_TOTALS = [("0", 42252, 254613504), ("1", 2267, 8691712)]
TOTALS_SQL = (f"SELECT device, count(*) AS n, sum(size_bytes) AS bytes FROM requests "
              f"WHERE trace_id = '{HPLAJW_TRACE_ID}' GROUP BY device")


def stop_server(proc: subprocess.Popen[str]) -> None:
    """SIGTERM a server command still running, and SIGKILL its process group if it has not exited in 60 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def blockheat_env(warehouse: Path) -> dict[str, str]:
    return {**os.environ, "BLOCKHEAT_WAREHOUSE": str(warehouse), "BLOCKHEAT_SPARK_MASTER": "local[1]",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "BLOCKHEAT_JAVA_OPTIONS": " ".join(SHORT_JOB_OPTIONS)}     # short-lived JVMs on small data


def blockheat(warehouse: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "blockheat.jobs.cli.main", *argv], env=blockheat_env(warehouse),
                          capture_output=True, text=True, timeout=300, check=False)


def run_beeline(url: str, sql: str, home: Path, password: Path) -> subprocess.CompletedProcess[str]:
    """beeline (CSV, no prompt) running `sql` as user "analyst" with the password in the file `password`."""
    return subprocess.run([str(BEELINE), "-u", url, "-n", "analyst", "-w", str(password), "--silent=true",
                           "--showHeader=false", "--outputformat=csv2", "-e", sql],
                          env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=120,
                          check=False)


def beeline(url: str, sql: str, home: Path) -> list[str]:
    """Output lines of beeline running `sql` with the password of the warehouse `home`/../wh1 (the server's, see
    `server`); fails the test on a non-zero exit."""
    done = run_beeline(url, sql, home, password_path(home.parent / "wh1"))
    assert done.returncode == 0, done.stderr[-3000:]
    return output_lines(done)


def output_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """beeline's output lines without the prompt it prints before the first one."""
    return [re.sub(r"^\d+: jdbc:hive2://\S+> ", "", line) for line in done.stdout.splitlines()]


def password_path(warehouse: Path) -> Path:
    return sql_access.serve_dir(warehouse) / sql_access.PASSWORD_FILE


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a TCP socket listening on `port` (from /proc/net/tcp and tcp6; state 0A)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}   # 127.0.0.1 as IPv4 and as IPv4-mapped IPv6


def documented_queries(repo_root: Path) -> list[str]:
    """The SQL examples of docs/sql.md (the SQL guide the README links), one statement per ```sql block."""
    return re.findall(r"```sql\n(.*?)```", (repo_root / "docs" / "sql.md").read_text(), re.DOTALL)


COPIED_TABLES = ("requests", "rejected_records", "traces")
EMPTY_TABLES = ("extent_heat", "disk_heat", "alis_runs", "policy_scores", "reorg_plans", "reorg_plan_steps")


@pytest.fixture(scope="module")
def sql_home(hplajw, spark, spark_cfg, tmp_path_factory):
    """A warehouse holding a copy of the session's requests, rejected_records and traces (hplajw ingested), and
    empty tables docs/sql.md's examples query (created as the jobs create them, by path only: the session's
    catalog is left alone)."""
    from blockheat.libs.io.tables import ensure_table

    root = tmp_path_factory.mktemp("sql")
    warehouse = root / "wh1"
    for table in COPIED_TABLES:
        shutil.copytree(spark_cfg.warehouse / table, warehouse / table)
    for table in EMPTY_TABLES:
        ensure_table(spark, warehouse, table, register=False)
    (root / "home").mkdir()
    return root


@pytest.fixture(scope="module")
def server(sql_home):
    """`blockheat serve-sql` (read-only, the default) on sql_home/wh1, and what beeline printed for the setup
    statements: a view saved in the metastore, queried. Before the server starts, `blockheat sql --allow-writes`
    adds a metastore entry for a blockheat table that lives outside the warehouse (the server drops it)."""
    warehouse, port = sql_home / "wh1", free_port()
    elsewhere = sql_home / "elsewhere" / "cooling_moves"
    entry = blockheat(warehouse, "sql", "--allow-writes",
                      f"CREATE TABLE cooling_moves (x INT) USING delta LOCATION '{elsewhere}'")
    assert entry.returncode == 0, entry.stderr[-3000:]
    assert (elsewhere / "_delta_log").is_dir()
    log = (sql_home / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "blockheat.jobs.cli.main", "serve-sql", "--port", str(port),
                             "--refresh", "1"],
                            env=blockheat_env(warehouse), stdout=subprocess.PIPE, stderr=log, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        line = ""
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            if line.startswith("serving Spark SQL on"):
                break
        assert line.startswith(f"serving Spark SQL on jdbc:hive2://127.0.0.1:{port} (warehouse {warehouse}; "
                               f"password in {password_path(warehouse)})"), \
            (sql_home / "serve.log").read_text()[-3000:]
        url = f"jdbc:hive2://127.0.0.1:{port}"
        setup = beeline(url, f"CREATE VIEW device_totals AS {TOTALS_SQL}; "
                             f"SELECT 'totals', * FROM device_totals ORDER BY device; "
                             f"SELECT 'version0', count(*) FROM requests VERSION AS OF 0", sql_home / "home")
        yield proc, port, url, setup
    finally:
        stop_server(proc)
        log.close()


def test_init_sql_registers_existing_tables_only(sql_home):
    wh = sql_home / "wh1"
    assert init_sql(wh) == "".join(f"CREATE TABLE IF NOT EXISTS {t} USING delta LOCATION '{wh / t}';\n"
                                   for t in ("requests", "rejected_records", "traces", "extent_heat", "disk_heat",
                                             "alis_runs", "policy_scores", "reorg_plans", "reorg_plan_steps"))


def test_beeline_queries_tables_by_name_through_the_thrift_server(server):
    _, port, _, setup = server
    assert [line for line in setup if line.startswith(("totals,", "version0,"))] == [
        *(f"totals,{d},{n},{b}" for d, n, b in DEVICE_TOTALS), "version0,0"]
    assert listening_addresses(port)
    assert listening_addresses(port) <= LOOPBACK


def test_the_server_keeps_its_password_for_its_owner_only(server, sql_home):
    password = password_path(sql_home / "wh1")
    assert password.stat().st_mode & 0o777 == 0o600
    assert len(sql_access.read_secret(password)) == 43
    token = sql_access.serve_dir(sql_home / "wh1") / sql_access.TOKEN_FILE
    assert token.stat().st_mode & 0o777 == 0o600
    assert sql_access.read_secret(token) != sql_access.read_secret(password)


def test_a_wrong_password_is_refused(server, sql_home):
    _, _, url, _ = server
    wrong = sql_home / "wrong-password"
    wrong.write_text("not-the-password\n")
    done = run_beeline(url, "SELECT count(*) FROM requests", sql_home / "home", wrong)
    assert done.returncode != 0
    assert "Error validating the login" in done.stderr, done.stderr[-3000:]
    assert "44519" not in done.stdout
    anonymous = subprocess.run([str(BEELINE), "-u", url, "--silent=true", "-e", "SELECT 1"],
                               env={**os.environ, "HOME": str(sql_home / "home")}, capture_output=True, text=True,
                               timeout=120, check=False)
    assert anonymous.returncode != 0
    assert "Error validating the login" in anonymous.stderr, anonymous.stderr[-3000:]


# Statements a read-only server refuses, and what the refusal names; the URL's part after ";?" is what a client
# sets in its session when it connects (beeline's hive configuration).
REFUSED = [
    ("", f"DELETE FROM requests WHERE trace_id = '{HPLAJW_TRACE_ID}'", "read-only SQL: DeleteCommand is not allowed"),
    ("", "DROP TABLE traces", "read-only SQL: DropTable is not allowed"),
    ("", "INSERT INTO traces SELECT * FROM traces LIMIT 0", "read-only SQL: AppendData is not allowed"),
    ("", "SELECT TRANSFORM(device) USING 'id' AS (who) FROM requests LIMIT 1",
     "read-only SQL: TRANSFORM (a script) is not allowed"),
    ("", "SELECT * FROM text.`/etc/hostname`", "The table or view `text`.`/etc/hostname` cannot be found"),
    ("", "SELECT reflect('java.lang.System', 'getenv', 'SPARK_CONNECT_AUTHENTICATE_TOKEN')",
     "read-only SQL: reflect/java_method (a Java call) is not allowed"),
    ("", "SET spark.blockheat.allowWrites=true", "read-only SQL: SET spark.blockheat.allowWrites is not allowed"),
    ("", "SET spark.sql.runSQLOnFiles=true", "read-only SQL: SET spark.sql.runSQLOnFiles is not allowed"),
    ("spark.blockheat.allowWrites=true", f"DELETE FROM requests WHERE trace_id = '{HPLAJW_TRACE_ID}'",
     "read-only SQL: DeleteCommand is not allowed"),
    ("spark.sql.runSQLOnFiles=true", "SELECT * FROM text.`/etc/hostname`",
     "read-only SQL: any statement with spark.sql.runSQLOnFiles on is not allowed"),
]


def test_a_read_only_server_refuses_writes_scripts_and_files(server, sql_home):
    _, _, url, _ = server
    home, password = sql_home / "home", password_path(sql_home / "wh1")
    hostname = Path("/etc/hostname").read_text().strip()
    for settings, sql, refusal in REFUSED:
        done = run_beeline(f"{url}/default;?{settings}" if settings else url, sql, home, password)
        assert done.returncode != 0, sql
        assert refusal in done.stdout + done.stderr, (sql, (done.stdout + done.stderr)[-3000:])
        assert hostname not in done.stdout.splitlines()
    rows = beeline(url, f"SELECT count(*) FROM requests WHERE trace_id = '{HPLAJW_TRACE_ID}'; SHOW TABLES; "
                        "DESCRIBE HISTORY traces; EXPLAIN SELECT * FROM traces", home)
    assert rows[0] == str(sum(n for _, n, _ in DEVICE_TOTALS))
    assert "traces" in {line.split(",")[1] for line in rows if line.count(",") == 2}     # SHOW TABLES


def test_no_read_only_client_becomes_the_owner(server, sql_home):
    """A JDBC client that knows every setting name and even the owner's Spark Connect token still only reads: no
    variable substitution (so the token cannot be read), and whether it writes is the server's decision from the
    password it logged in with, not the settings it sends, nor a RESET; EXECUTE IMMEDIATE's statement is checked as
    any other (scripts: test_sql_is_read_only_unless_allow_writes and test_serve)."""
    _, _, url, _ = server
    home, password = sql_home / "home", password_path(sql_home / "wh1")
    token = (sql_access.serve_dir(sql_home / "wh1") / sql_access.TOKEN_FILE).read_text().strip()
    probe = ("SELECT '${env:SPARK_CONNECT_AUTHENTICATE_TOKEN}', '${system:user.name}', "
             "'${spark:spark.blockheat.allowWrites}'")
    for settings in ("", "spark.sql.variable.substitute=true"):
        done = run_beeline(f"{url}/default;?{settings}" if settings else url, probe, home, password)
        assert done.returncode == 0, done.stderr[-3000:]
        assert output_lines(done) == [
            "${env:SPARK_CONNECT_AUTHENTICATE_TOKEN},${system:user.name},${spark:spark.blockheat.allowWrites}"], \
            done.stdout
    leak = run_beeline(f"{url}/default;?spark.sql.variable.substitute=true",
                       "SELECT ${env:SPARK_CONNECT_AUTHENTICATE_TOKEN} x y", home, password)
    assert leak.returncode != 0                             # a parse error quotes the statement: still literal
    assert "${env:SPARK_CONNECT_AUTHENTICATE_TOKEN} x y" in leak.stdout + leak.stderr, leak.stderr[-3000:]
    assert token not in leak.stdout + leak.stderr
    owner_claims = f"spark.blockheat.allowWrites=true;spark.blockheat.writeKey={token};spark.blockheat.readOnly=false"
    elsewhere = sql_home / "ctas-elsewhere"
    for sql, refusal in (
            (f"DELETE FROM requests WHERE trace_id = '{HPLAJW_TRACE_ID}'", "DeleteCommand"),
            (f"CREATE TABLE stolen USING delta LOCATION '{elsewhere}' AS SELECT * FROM traces",
             "CreateTableAsSelect"),
            (f"EXECUTE IMMEDIATE 'RESET'; DELETE FROM requests WHERE trace_id = '{HPLAJW_TRACE_ID}'",
             "DeleteCommand"),          # beeline runs one statement after the other in its session
            ("EXECUTE IMMEDIATE 'SET spark.sql.runSQLOnFiles=true'", "SET spark.sql.runSQLOnFiles"),
            ("SELECT try_reflect('java.lang.System', 'getenv', 'SPARK_CONNECT_AUTHENTICATE_TOKEN')",
             "reflect/java_method")):
        done = run_beeline(f"{url}/default;?{owner_claims}", sql, home, password)
        assert done.returncode != 0, sql
        assert f"read-only SQL: {refusal}" in done.stdout + done.stderr, (sql, (done.stdout + done.stderr)[-3000:])
        assert token not in done.stdout + done.stderr
    assert not elsewhere.exists()
    totals = beeline(url, f"SELECT count(*) FROM requests WHERE trace_id = '{HPLAJW_TRACE_ID}'", home)
    assert totals == [str(sum(n for _, n, _ in DEVICE_TOTALS))]


def test_blockheat_beeline_logs_in_with_the_password_file(server, sql_home):
    _, port, _, _ = server
    done = subprocess.run([sys.executable, "-m", "blockheat.jobs.cli.main", "beeline", "--port", str(port), "-e",
                           f"SELECT count(*) FROM requests WHERE trace_id = '{HPLAJW_TRACE_ID}'"],
                          env={**blockheat_env(sql_home / "wh1"), "HOME": str(sql_home / "home")},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(rf"^\|\s*{sum(n for _, n, _ in DEVICE_TOTALS)}\s*\|$", done.stdout, re.MULTILINE), done.stdout


def test_documented_examples_run_through_the_server(server, sql_home, repo_root):
    """Every example of docs/sql.md runs (on real requests and traces, the other tables
    empty), except the TIMESTAMP AS OF current_date() one: it needs a table written before today's midnight,
    which a test cannot have; VERSION AS OF by name is checked in the server's setup above."""
    queries = documented_queries(repo_root)
    assert len(queries) == 6
    runnable = [q for q in queries if "TIMESTAMP AS OF current_date()" not in q]
    assert len(runnable) == 5
    script = sql_home / "examples.sql"
    script.write_text("".join(f"{q.strip()};\n" for q in runnable))
    _, _, url, _ = server
    done = subprocess.run([str(BEELINE), "-u", url, "-n", "analyst", "-w", str(password_path(sql_home / "wh1")),
                           "--silent=true", "-f", str(script)],
                          env={**os.environ, "HOME": str(sql_home / "home")}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def test_sql_registers_tables_itself_while_the_server_holds_the_metastore(server, sql_home):
    assert metastore_in_use(sql_home / "wh1")
    done = blockheat(sql_home / "wh1", "sql", "--json", f"{TOTALS_SQL} ORDER BY device")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [tuple(json.loads(line).values()) for line in done.stdout.splitlines()] == DEVICE_TOTALS
    assert f"metastore {sql_home / 'wh1' / 'metastore_db'} is in use by another process" in done.stderr


def test_sql_is_read_only_unless_allow_writes(server, sql_home):
    delete = f"DELETE FROM requests WHERE trace_id = '{HPLAJW_TRACE_ID}'"
    refusals = [(sql, "DeleteCommand") for sql in (
        delete, f"BEGIN EXECUTE IMMEDIATE 'RESET spark.blockheat.readOnly'; {delete}; END",
        f"BEGIN EXECUTE IMMEDIATE 'RESET'; {delete}; END")]                  # its own JVM: the seal outlives RESET
    refusals += [("SET spark.blockheat.readOnly=false", "SET spark.blockheat.readOnly"),
                 ("SET spark.blockheat.allowWrites=true", "SET spark.blockheat.allowWrites")]
    with ThreadPoolExecutor(3) as pool:                 # each command a JVM of its own: three at a time
        done = list(pool.map(lambda sql: blockheat(sql_home / "wh1", "sql", sql), [sql for sql, _ in refusals]))
    for (sql, refusal), result in zip(refusals, done, strict=True):
        assert result.returncode == 1, sql
        assert f"blockheat: error: read-only SQL: {refusal} is not allowed" in result.stderr, result.stderr[-3000:]


def test_saved_views_outlive_the_server_and_follow_a_moved_warehouse(server, sql_home):
    proc, port, *_ = server
    proc.send_signal(signal.SIGTERM)             # the server stops its Thrift service and session, exit 0
    assert proc.wait(timeout=60) == 0
    assert not listening_addresses(port)
    moved = sql_home / "it's a \"warehouse\" 2"   # a path with spaces and quotes: JVM options and SQL quote it
    (sql_home / "wh1").rename(moved)             # metastore entries still name wh1
    assert metastore_path(moved).is_dir()
    assert not metastore_in_use(moved)           # the server's JVM is gone too

    done = blockheat(moved, "sql", "--json", "SELECT t.*, (SELECT input_file_name() FROM requests LIMIT 1) AS file "
                                             "FROM device_totals t ORDER BY device")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["device"], r["n"], r["bytes"]) for r in rows] == DEVICE_TOTALS
    assert {Path(unquote(urlparse(r["file"]).path)).is_relative_to(moved / "requests") for r in rows} == {True}, rows

    shell = subprocess.run([sys.executable, "-m", "blockheat.jobs.cli.main", "sql-shell", "-e",
                            "SHOW TABLES; SELECT * FROM device_totals ORDER BY device"],
                           env=blockheat_env(moved), capture_output=True, text=True, timeout=300, check=False)
    assert shell.returncode == 0, shell.stderr[-3000:]
    assert shell.stdout.splitlines() == [*sorted(("device_totals", *COPIED_TABLES, *EMPTY_TABLES)),
                                         *(f"{d}\t{n}\t{b}" for d, n, b in DEVICE_TOTALS)]
