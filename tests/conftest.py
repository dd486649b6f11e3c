"""One SparkSession (local[2], Delta, UI off, UTC) and one temporary warehouse for the whole run."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from libs.spark import SparkConfig, build_session

# The files that take minutes (a fresh clone's `make test`, 2 workers), started first: pytest-xdist's loadfile
# hands whole files to the two workers in item order (with --no-loadscope-reorder; by default it orders files by
# their number of tests, which started the nightly DAG's 6-8 minutes two thirds of the way through the run and left
# one worker idle for minutes at the end). Every other file keeps its collection order.
LONG_FILES = ("tests/dags/test_nightly_dag.py", "tests/libs/test_ingest_errors.py", "tests/libs/test_sql_catalog.py",
              "tests/libs/test_clean_text.py", "tests/libs/alis/test_graph_files.py", "tests/libs/test_profile.py",
              "tests/libs/test_cluster.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = {name: rank for rank, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::", 1)[0], len(first)))   # stable: the rest in order


@pytest.fixture(scope="session")
def spark_cfg(tmp_path_factory: pytest.TempPathFactory) -> SparkConfig:
    warehouse = tmp_path_factory.mktemp("warehouse")
    return SparkConfig(master="local[2]", warehouse=warehouse, app_name="blockheat-tests",
                       # the throughput collector: the suite's files ran 11-14% faster than on G1
                       # (docs/BENCHMARKS.md, "JVM start-up"), two test JVMs sharing 2 cores
                       extra={"spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
                              "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                              "spark.databricks.delta.snapshotPartitions": "2",
                              "spark.ui.showConsoleProgress": "false"})


@pytest.fixture(scope="session")
def spark(spark_cfg: SparkConfig) -> Iterator[object]:
    os.environ["SPARK_TESTING"] = "1"
    os.environ["BLOCKHEAT_WAREHOUSE"] = str(spark_cfg.warehouse)
    session = build_session(spark_cfg)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).parent.parent


HPLAJW_TRACE_ID = "hplajw-test"


@pytest.fixture(scope="session")
def hplajw(spark: object, spark_cfg: SparkConfig, repo_root: Path) -> object:
    """The bundled real HP trace, ingested once per run as trace HPLAJW_TRACE_ID."""
    from tests.builders import ingest

    return ingest(spark, spark_cfg, "hp-srt", HPLAJW_TRACE_ID, [repo_root / "data/traces/hplajw/ajw.1week.srt"])
