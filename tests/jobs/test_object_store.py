"""The warehouse on a real S3-compatible server (S3Proxy on 127.0.0.1, tests/s3_server.py) and the commands over Spark
Connect: a slice of the bundled HP trace and a vSCSI fixture ingested, then heat, the ALIS graph and layout, the
scorecard, a plan and its check (tests/command_run.py), once on a local warehouse, once on an s3a:// warehouse, once
through a Spark Connect server on another s3a:// warehouse; every table equal row for row. The SQL and serving
commands on the s3a:// warehouse. And the commit protocol on the object store: concurrent replaces of different
traces all survive."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from blockheat.libs.io import delta_log, storage
from blockheat.libs.io.catalog import metastore_path
from blockheat.libs.io.connect_server import ConnectServer, free_port
from blockheat.libs.io.delta_files import FileWriter, TableTarget, commit_replace
from blockheat.libs.io.jvm import SHORT_JOB_OPTIONS
from blockheat.libs.io.session import SparkConfig
from tests.command_run import NOW, SRT_TRACE, VSCSI_TRACE
from tests.drivers import write_slice
from tests.jobs.cli.test_sql_catalog import stop_server

REPO = Path(__file__).resolve().parents[2]
TABLES = {"requests": (), "rejected_records": (), "traces": ("ingested_at", "source_files"),
          "extent_heat": (), "disk_heat": (), "access_graph": (), "alis_graphs": (), "alis_runs": (),
          "reorg_units": (), "alis_layout": (), "alis_summary": (), "policy_scores": (),
          "reorg_plans": (), "reorg_plan_steps": ()}
EMPTY_TABLES = {"rejected_records"}


def run_commands(tmp: Path, warehouse: str, env: dict[str, str], inputs: tuple[Path, Path], log: str) -> str:
    """tests/command_run.py in a process of its own; the plan id it printed."""
    full = {**os.environ, **env, "BLOCKHEAT_WAREHOUSE": warehouse, "BLOCKHEAT_SPARK_MASTER": "local[2]",
            "BLOCKHEAT_JAVA_OPTIONS": " ".join(SHORT_JOB_OPTIONS)}      # a short-lived driver on small data
    with (tmp / log).open("w") as out:
        done = subprocess.run([sys.executable, "-m", "tests.command_run", "--srt", str(inputs[0]),
                               "--vscsi", str(inputs[1])], env=full, cwd=REPO, stdout=subprocess.PIPE,
                              stderr=out, text=True, timeout=1200, check=False)
    assert done.returncode == 0, (tmp / log).read_text()[-4000:] + done.stdout[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def runs(s3_server, tmp_path_factory):  # type: ignore[no-untyped-def]
    """The commands on a local warehouse, on s3a://, and over Spark Connect on s3a://: warehouse -> plan id."""
    tmp = tmp_path_factory.mktemp("object-store")
    inputs = (write_slice(REPO / "data/traces/hplajw/ajw.1week.srt", tmp / "slice.srt"),
              REPO / "tests/data/agree/dev0.v2.vscsi")
    env = s3_server.environment()
    out = {}
    local = str(tmp / "local-warehouse")
    out[local] = run_commands(tmp, local, {}, inputs, "local.log")
    remote = s3_server.url("e2e/warehouse", scheme="s3a")
    out[remote] = run_commands(tmp, remote, env, inputs, "s3.log")
    connect = s3_server.url("e2e/connect-warehouse", scheme="s3a")
    cfg = SparkConfig(master="local[2]", warehouse=connect, app_name="blockheat-connect-test",
                      extra={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                             "spark.driver.extraJavaOptions": " ".join(SHORT_JOB_OPTIONS)})
    # The server's session and Python workers read the store's settings from the environment it starts with.
    with mock.patch.dict(os.environ, env), ConnectServer.start(cfg, log_path=tmp / "connect-server.log") as server:
        out[connect] = run_commands(tmp, connect, {**env, "BLOCKHEAT_SPARK_REMOTE": server.url}, inputs,
                                    "connect.log")
    return out


def read(warehouse: str, table: str, env: dict[str, str]) -> pa.Table:
    """A table as delta-rs reads it."""
    options = None if storage.is_local(warehouse) else storage.S3Settings.from_env(env).delta_options()
    return DeltaTable(storage.join(warehouse, table), storage_options=options).to_pyarrow_table()


def table_rows(warehouse: str, table: str, drop: tuple[str, ...], env: dict[str, str]) -> list[tuple]:
    """Every row of a table, without `drop`, in a fixed order."""
    data = read(warehouse, table, env)
    data = data.drop_columns([c for c in drop if c in data.column_names])
    data = data.select(sorted(data.column_names))
    return sorted(tuple(repr(v) for v in row.values()) for row in data.to_pylist())


@pytest.mark.parametrize("which", ["s3a", "connect"])
def test_every_table_equals_the_local_runs(runs, s3_server, which):  # type: ignore[no-untyped-def]
    (local, local_plan), (remote, remote_plan), (connect, connect_plan) = runs.items()
    other, plan = (remote, remote_plan) if which == "s3a" else (connect, connect_plan)
    env = s3_server.environment()
    for table, drop in TABLES.items():
        expected = table_rows(local, table, drop, env)
        assert bool(expected) != (table in EMPTY_TABLES), table
        assert table_rows(other, table, drop, env) == expected, table
    assert plan == local_plan
    assert sorted(read(other, "traces", env).column("trace_id").to_pylist()) == sorted([SRT_TRACE, VSCSI_TRACE])


def test_concurrent_replaces_of_different_traces_all_survive(s3_server):  # type: ignore[no-untyped-def]
    """Eight writers at once, each replacing its own trace's rows of one table on the object store, three rounds:
    every commit is in the table's history and every trace's last rows are what its last writer wrote."""
    with mock.patch.dict(os.environ, s3_server.environment()):
        root = s3_server.url("concurrent/t", scheme="s3a")
        schema = pa.schema([("trace_id", pa.string()), ("writer_round", pa.int64())])
        assert delta_log.create_table(root, schema, ["trace_id"], {})
        target = TableTarget("t", root, schema, ("trace_id",), ("writer_round",))
        traces = [f"trace-{i}" for i in range(8)]
        errors: list[BaseException] = []

        def replace(trace: str, round_: int, barrier: threading.Barrier) -> None:
            try:
                write = target.for_write()
                writer = FileWriter(write)
                writer.write(pa.table({"trace_id": [trace] * 3, "writer_round": [round_] * 3}, schema=schema))
                files = writer.close().to_pylist()
                barrier.wait()
                commit_replace(None, write, {"trace_id": trace}, files)
            except BaseException as exc:
                errors.append(exc)

        for round_ in range(3):
            barrier = threading.Barrier(len(traces))
            threads = [threading.Thread(target=replace, args=(t, round_, barrier)) for t in traces]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert errors == []
        assert delta_log.table_version(root) == 3 * len(traces)              # version 0 the creation: none lost
        rows = DeltaTable(root, storage_options=storage.delta_options(root)).to_pyarrow_table().to_pylist()
        assert sorted((r["trace_id"], r["writer_round"]) for r in rows) == sorted(
            (t, 2) for t in traces for _ in range(3))
        predicates = [e.get(delta_log.REPLACE_KEY) for e in delta_log.history(root)]
        assert sorted(p for p in predicates if p) == sorted(f"trace_id = '{t}'" for t in traces for _ in range(3))


def test_the_sql_and_serving_commands_on_an_object_store_warehouse(runs, s3_server, tmp_path):  # type: ignore[no-untyped-def]
    """On the s3a:// warehouse of the runs above, from an empty working directory: `sql` in a JVM of its own (its
    Derby metastore in this user's cache, not a path made of the URI), then `serve` with both endpoints and, attached
    to it, `sql`, `beeline`, `report`, `plan check` and `vacuum`. Nothing is written to the working directory."""
    _, (remote, plan_id), _ = runs.items()
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    env = {**os.environ, **s3_server.environment(), "BLOCKHEAT_WAREHOUSE": remote, "BLOCKHEAT_SPARK_MASTER": "local[1]",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "HOME": str(home),
           "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state"),
           "BLOCKHEAT_JAVA_OPTIONS": " ".join(SHORT_JOB_OPTIONS)}
    env = {k: v for k, v in env.items() if not k.startswith(("BLOCKHEAT_METASTORE", "BLOCKHEAT_SPARK_REMOTE"))}
    requests = read(remote, "requests", env).num_rows
    count = f"SELECT count(*) AS n FROM requests WHERE trace_id IN ('{SRT_TRACE}', '{VSCSI_TRACE}')"

    def blockheat(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "blockheat.jobs.cli.main", *argv], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=600, check=False)

    own = blockheat("sql", "--json", count)
    assert own.returncode == 0, own.stderr[-3000:]
    assert own.stdout.splitlines() == [f'{{"n": {requests}}}']
    with mock.patch.dict(os.environ, {"XDG_CACHE_HOME": env["XDG_CACHE_HOME"]}):
        assert metastore_path(remote).is_relative_to(home / "cache" / "blockheat" / "metastore")
        assert metastore_path(remote).is_dir()
    port, connect_port = free_port(), free_port()
    with (tmp_path / "serve.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "blockheat.jobs.cli.main", "serve", "--port", str(port),
                                 "--connect-port", str(connect_port)], env=env, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=log, text=True, start_new_session=True)
        try:
            line = proc.stdout.readline()
            assert line.startswith(f"serving the warehouse {remote}: commands attach to it; JDBC on "
                                   f"jdbc:hive2://127.0.0.1:{port}"), (tmp_path / "serve.log").read_text()[-3000:]
            attached = blockheat("sql", "--json", count)
            assert (attached.returncode, attached.stdout) == (0, own.stdout), attached.stderr[-3000:]
            bee = blockheat("beeline", "--port", str(port), "-e", count, "--", "--silent=true",
                            "--showHeader=false", "--outputformat=csv2")
            assert (bee.returncode, bee.stdout.split()) == (0, [str(requests)]), bee.stderr[-3000:]
            report = blockheat("report", SRT_TRACE, "--out", str(tmp_path / "report"))
            assert report.returncode == 0, report.stderr[-3000:]
            assert (tmp_path / "report" / "report.html").stat().st_size > 10_000
            check = blockheat("plan", "check", plan_id, "--now", NOW)
            assert check.returncode == 0, check.stderr[-3000:]
            vacuum = blockheat("vacuum", "--json")
            assert vacuum.returncode == 0, vacuum.stderr[-3000:]
            assert {json.loads(row)["table"] for row in vacuum.stdout.splitlines()} >= {"requests", "reorg_plans"}
        finally:
            stop_server(proc)
    assert proc.returncode == 0
    assert list(cwd.iterdir()) == []
