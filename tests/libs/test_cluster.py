"""Running on a Spark standalone cluster (issue 8, items 9-10): a master and two workers (1 core, 1 GiB each)
started on 127.0.0.1 by infra/spark/local-cluster.sh; ingest, heat, ALIS graph and a simulation grid of a
hplajw slice on the cluster give exactly the local-mode tables; a worker killed while the simulation stage
runs costs a retry, not the result; a driver killed in the middle of a Delta write leaves the table at its
previous version, and a rerun completes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from libs.tables import read_table, replace_trace, table_path
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
            "PYSPARK_DRIVER_PYTHON": sys.executable}


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
                            "--port", "0", "--webui-port", "0", "--dir", str(state)],
                           env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True,
                           timeout=300, check=False)
    try:
        assert start.returncode == 0, start.stderr[-3000:]
        yield Cluster(start.stdout.strip(), state)
    finally:
        subprocess.run([str(CLUSTER_SCRIPT), "stop", "--dir", str(state)], timeout=120, check=False)


@pytest.fixture(scope="module")
def pipelines(cluster, spark, spark_cfg, repo_root, tmp_path_factory):
    """The pipeline on the slice, on the cluster (warehouse of its own) and in the local test session."""
    tmp = tmp_path_factory.mktemp("pipelines")
    trace = write_slice(repo_root / "data/traces/hplajw/ajw.1week.srt", tmp / "slice.srt")
    grid = tmp / f"{GRID_ID}.json"
    grid.write_text(json.dumps(slice_grid(GRID_ID, [1, 2, 4])))
    warehouse = tmp / "cluster-warehouse"
    with (tmp / "pipeline.log").open("w") as log:
        remote = driver(cluster.url, "pipeline", "--warehouse", str(warehouse), "--trace", str(trace),
                        "--grid", str(grid), stdout=log, stderr=subprocess.STDOUT)
        try:
            assert remote.wait(timeout=600) == 0, (tmp / "pipeline.log").read_text()[-3000:]
        finally:
            if remote.poll() is None:
                os.killpg(remote.pid, signal.SIGKILL)
    run_pipeline(spark, spark_cfg, trace, grid)
    return warehouse, grid


def test_pipeline_on_the_cluster_equals_local_mode(pipelines, spark, spark_cfg):
    warehouse, _ = pipelines
    for table, drop in PIPELINE_TABLES.items():
        local = rows(spark, spark_cfg.warehouse, table, drop)
        assert bool(local) != (table in EMPTY_TABLES), table
        assert rows(spark, warehouse, table, drop) == local, table
    assert len(rows(spark, warehouse, "requests", ())) == 3000
    assert len(rows(spark, warehouse, "sim_results", ())) == GRID_PARTS


def test_worker_killed_during_the_simulation_stage(pipelines, cluster, spark, spark_cfg, tmp_path):
    """Killed while both executors run their first simulation task: the lost task (and any lost shuffle output)
    is rerun on the other worker and the grid's results are those of local mode."""
    warehouse, grid = pipelines
    stages: list[dict[str, int]] = []
    with (tmp_path / "simulate.err").open("w") as err:
        remote = driver(cluster.url, "simulate", "--warehouse", str(warehouse), "--grid", str(grid),
                        stdout=subprocess.PIPE, stderr=err)
        try:
            killed_at = None
            for line in remote.stdout:
                if line.startswith("{"):
                    stages.append(json.loads(line))
                    now = stages[-1]
                    # The simulation's first tasks start the executors' Python workers: seconds each. (The
                    # tracker may count a task as active a moment after its executor has started the next.)
                    if killed_at is None and now["total"] == GRID_PARTS and now["active"] >= 2 and not now["done"]:
                        os.kill(cluster.worker_pid(2), signal.SIGKILL)
                        killed_at = len(stages)
            assert remote.wait(timeout=600) == 0, (tmp_path / "simulate.err").read_text()[-3000:]
        finally:
            if remote.poll() is None:
                os.killpg(remote.pid, signal.SIGKILL)
    assert killed_at is not None, stages
    assert any(s["failed"] >= 1 for s in stages[killed_at:]), stages
    assert "Lost executor" in (tmp_path / "simulate.err").read_text()
    assert rows(spark, warehouse, "sim_results", ("wall_s",)) == rows(spark, spark_cfg.warehouse, "sim_results",
                                                                       ("wall_s",))


def test_driver_killed_during_a_table_write(spark, tmp_path):
    """SIGKILL to the driver (Python and its JVM) once the write's first data file exists: no commit, so the
    table reads as its previous version; the rerun commits the next version."""
    warehouse, before_n, after_n = tmp_path / "wh", 1000, 100_000
    replace_trace(generated_requests(spark, before_n), spark, warehouse, "requests", GENERATED_TRACE_ID)
    data = table_path(warehouse, "requests")
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
