"""Running on a Spark standalone cluster: a master and two workers (1 core, 1 GiB each)
started on 127.0.0.1 by infra/spark/local-cluster.sh; ingest, heat, ALIS graph and a simulation grid of a
hplajw slice on the cluster give exactly the local-mode tables, although a worker is killed while the
simulation stage runs (one cluster run serves both checks: the module must stay short); a driver killed in
the middle of a Delta write leaves the table at its previous version, and a rerun completes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from blockheat.libs.io.jvm import SHORT_JOB_OPTIONS
from blockheat.libs.io.tables import read_table, replace_trace, table_path
from tests.drivers import (
    GENERATED_TRACE_ID,
    SLICE_TRACE_ID,
    generated_requests,
    run_pipeline,
    slice_grid,
    write_slice,
)

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO / "infra" / "spark" / "local-cluster.sh"
GRID_ID = "cluster-slice"
GRID_PARTS = 6                   # 2 scenarios x 3 speed-ups: one task each in the simulation stage
# Every table the pipeline writes, with the columns that legitimately differ between runs.
PIPELINE_TABLES = {"requests": (), "rejected_records": (), "traces": ("ingested_at",), "extent_heat": (),
                   "disk_heat": (), "reorg_units": (), "access_graph": (), "alis_runs": (), "alis_graphs": (),
                   "sim_results": ("wall_s",)}
EMPTY_TABLES = {"rejected_records"}   # every record of the slice is a request


@dataclass(frozen=True)
class Cluster:
    url: str
    state: Path

    def worker_pid(self, i: int) -> int:
        return int((self.state / f"worker-{i}.pid").read_text())


def driver_env(master: str) -> dict[str, str]:
    return {**os.environ, "BLOCKHEAT_SPARK_MASTER": master, "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "BLOCKHEAT_JAVA_OPTIONS": " ".join(SHORT_JOB_OPTIONS)}     # a short-lived driver on small data


def driver(master: str, *argv: str, **popen: object) -> subprocess.Popen[str]:
    """`python -m tests.drivers ...` as its own process group (so a kill takes its JVM too)."""
    return subprocess.Popen([sys.executable, "-m", "tests.drivers", *argv], env=driver_env(master), cwd=REPO,
                            text=True, start_new_session=True, **popen)  # type: ignore[call-overload]


def rows(spark: object, warehouse: Path, table: str, drop: tuple[str, ...]) -> list[str]:
    """The slice's rows of a table, as sorted reprs (exact: floats compare bit for bit, NaN equals NaN)."""
    return sorted(repr(r) for r in read_table(spark, warehouse, table, SLICE_TRACE_ID).drop(*drop).collect())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    state = tmp_path_factory.mktemp("cluster")
    start = subprocess.run([str(CLUSTER_SCRIPT), "start", "--workers", "2", "--cores", "1", "--memory", "1g",
                            "--port", "0", "--webui-port", "0", "--dir", str(state), "--pin"],
                           env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True,
                           timeout=300, check=False)
    try:
        assert start.returncode == 0, start.stderr[-3000:]
        yield Cluster(start.stdout.strip(), state)
    finally:
        subprocess.run([str(CLUSTER_SCRIPT), "stop", "--dir", str(state)], timeout=120, check=False)


@dataclass(frozen=True)
class Runs:
    warehouse: Path                   # the cluster run's
    lines: list[dict[str, object]]    # the cluster driver's step and stage lines, in order
    killed_at: int | None             # index in lines of the stage line the worker was killed at
    log: str                          # the cluster driver's stderr


def allowed_cpus(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(line.split()[1] for line in status.splitlines() if line.startswith("Cpus_allowed_list"))


@pytest.mark.spark          # a standalone cluster's JVMs (cluster)
def test_pinned_workers_each_have_a_cpu_of_their_own(cluster):
    """--pin: worker I on the (I-1)-th CPU this process may use (modulo their count), like 1-core machines."""
    mine = allowed_cpus(os.getpid())
    cpus = [c for part in mine.split(",") for c in (range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1))]
    assert [allowed_cpus(cluster.worker_pid(i)) for i in (1, 2)] == [str(cpus[0]), str(cpus[1 % len(cpus)])]


def watch_and_kill(remote: subprocess.Popen[str], cluster: Cluster, lines: list[dict[str, object]],
                   killed: list[int]) -> None:
    """Reads the driver's lines; once the simulation step's stage has both executors on a task, SIGKILLs worker 2's
    JVM (its executor exits with it, losing its task). Any such moment will do, not only the first tasks': a task
    of the 3,000-request slice can end between two of the driver's polls (10 ms apart), so on a busy machine no
    poll may see both first tasks running, and a later pair takes the kill."""
    step = None
    for text in remote.stdout:
        if not text.startswith("{"):
            continue
        line = json.loads(text)
        lines.append(line)
        step = line.get("step", step)
        # The tracker may count a task as active a moment after its executor has started the next one.
        if not killed and step == "simulate" and line.get("total") == GRID_PARTS and line["active"] >= 2:
            os.kill(cluster.worker_pid(2), signal.SIGKILL)
            killed.append(len(lines) - 1)


@pytest.fixture(scope="module")
def runs(cluster, spark, spark_cfg, repo_root, tmp_path_factory):
    """The pipeline on the slice on the cluster (warehouse of its own; worker 2 killed during the simulation
    step) and, meanwhile, in the local test session."""
    tmp = tmp_path_factory.mktemp("pipelines")
    trace = write_slice(repo_root / "data/traces/hplajw/ajw.1week.srt", tmp / "slice.srt")
    grid = tmp / f"{GRID_ID}.json"
    grid.write_text(json.dumps(slice_grid(GRID_ID, [1, 2, 4])))
    warehouse = tmp / "cluster-warehouse"
    lines: list[dict[str, object]] = []
    killed: list[int] = []
    with (tmp / "cluster.log").open("w") as log:
        remote = driver(cluster.url, "pipeline", "--warehouse", str(warehouse), "--trace", str(trace),
                        "--grid", str(grid), stdout=subprocess.PIPE, stderr=log)
        watcher = threading.Thread(target=watch_and_kill, args=(remote, cluster, lines, killed), daemon=True)
        watcher.start()
        try:
            run_pipeline(spark, spark_cfg, trace, grid)
            assert remote.wait(timeout=600) == 0, (tmp / "cluster.log").read_text()[-3000:]
            watcher.join(timeout=60)
        finally:
            if remote.poll() is None:
                os.killpg(remote.pid, signal.SIGKILL)
    return Runs(warehouse, lines, killed[0] if killed else None, (tmp / "cluster.log").read_text())


def test_pipeline_on_the_cluster_equals_local_mode(runs, spark, spark_cfg):
    """Every table the cluster run wrote equals the local run's, row for row, bit for bit."""
    for table, drop in PIPELINE_TABLES.items():
        local = rows(spark, spark_cfg.warehouse, table, drop)
        assert bool(local) != (table in EMPTY_TABLES), table
        assert rows(spark, runs.warehouse, table, drop) == local, table
    assert len(rows(spark, runs.warehouse, "requests", ())) == 3000
    assert len(rows(spark, runs.warehouse, "sim_results", ())) == GRID_PARTS


def test_a_worker_killed_during_the_simulation_costs_a_retry_not_the_result(runs):
    """The kill landed while both executors ran simulation tasks; the lost task was retried (and any shuffle
    output lost with the executor recomputed) on the other worker. Same results: the test above."""
    assert runs.killed_at is not None, runs.lines
    assert any(line.get("failed", 0) >= 1 for line in runs.lines[runs.killed_at:]), runs.lines
    assert "Lost executor" in runs.log


def test_driver_killed_during_a_table_write(spark, tmp_path):
    """SIGKILL to the driver (Python and its JVM) once the write's first data file exists: no commit, so the
    table reads as its previous version; the rerun commits the next version."""
    warehouse, before_n, after_n = tmp_path / "wh", 1000, 100_000
    replace_trace(generated_requests(spark, before_n), spark, warehouse, "requests", GENERATED_TRACE_ID)
    data = Path(table_path(warehouse, "requests"))
    files_before = set(data.rglob("*.parquet"))
    log_before = sorted(p.name for p in (data / "_delta_log").glob("*.json"))
    remote = driver("local[2]", "write", "--warehouse", str(warehouse), "--rows", str(after_n),
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while remote.poll() is None and time.monotonic() < deadline and set(data.rglob("*.parquet")) == files_before:
            time.sleep(0.01)
    finally:
        os.killpg(remote.pid, signal.SIGKILL)
        remote.wait()
    assert remote.returncode == -signal.SIGKILL                        # killed, not finished
    assert set(data.rglob("*.parquet")) - files_before                   # the write had begun
    assert sorted(p.name for p in (data / "_delta_log").glob("*.json")) == log_before

    def summary() -> tuple[int, int, int]:
        df = read_table(spark, warehouse, "requests", GENERATED_TRACE_ID)
        row = df.selectExpr("count(*)", "sum(seq)", "max(ts_us)").first()
        return int(row[0]), int(row[1]), int(row[2])

    assert summary() == (before_n, before_n * (before_n - 1) // 2, (before_n - 1) * 1000)
    replace_trace(generated_requests(spark, after_n), spark, warehouse, "requests", GENERATED_TRACE_ID)
    assert summary() == (after_n, after_n * (after_n - 1) // 2, (after_n - 1) * 1000)
    assert len(list((data / "_delta_log").glob("*.json"))) == len(log_before) + 1
