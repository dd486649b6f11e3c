"""One SparkSession (local[2], Delta, UI off, UTC) and one temporary warehouse per test process; under xdist both
workers' sessions run in one JVM that the controller starts (tests/shared_jvm.py)."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from blockheat.libs.io.session import SparkConfig, build_session
from tests.postgres_server import PostgresServer, running_postgres
from tests.s3_server import S3Server, running_s3_server
from tests.shared_jvm import SWITCH_ENV, WAREHOUSE_CONF, SharedJvm, attach, session_config, shared_worker

SHARED_JVM = pytest.StashKey[SharedJvm]()

# The files that take minutes (a fresh clone's `make test`, 2 workers), started first: pytest-xdist's loadfile
# hands whole files to the two workers in item order (with --no-loadscope-reorder; by default it orders files by
# their number of tests, which started the nightly DAG's 6-8 minutes two thirds of the way through the run and left
# one worker idle for minutes at the end). Every other file keeps its collection order.
LONG_FILES = ("tests/dags/test_nightly_dag.py", "tests/libs/ingest/test_errors.py",
              "tests/jobs/cli/test_sql_catalog.py",
              "tests/jobs/cli/test_serve.py",
              "tests/libs/readers/test_clean_text.py",
              "tests/libs/table_io/test_alis_graph.py", "tests/libs/transforms/test_profile.py",
              "tests/jobs/test_cluster.py")


# Fixtures that start a JVM (Spark, S3Proxy): a test using one, directly or through another fixture, is marked
# `spark` at collection; `make test-fast` runs the rest (-m "not spark") with a `java` that refuses to start
# (.ci/no-jvm), so a JVM test left unmarked fails there instead of slowing the lane. Files whose tests start
# JVMs in child processes (the `blockheat` command, Airflow, spark-submit) carry `pytestmark = pytest.mark.spark`.
JVM_FIXTURES = frozenset({"spark", "s3_server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = {name: rank for rank, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::", 1)[0], len(first)))   # stable: the rest in order
    for item in items:
        if JVM_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)


def pytest_configure(config: pytest.Config) -> None:
    if shares_jvm(config):
        config.stash[SHARED_JVM] = SharedJvm()


def pytest_unconfigure(config: pytest.Config) -> None:
    if SHARED_JVM in config.stash:
        config.stash[SHARED_JVM].stop()


def shares_jvm(config: pytest.Config) -> bool:
    """The xdist controller of a run with workers starts the one JVM (tests/shared_jvm.py), unless switched off or
    the run leaves out the tests that need one (`-m "not spark"`: the fast lane)."""
    return (not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", 0))
            and getattr(config.option, "dist", "no") != "no" and os.environ.get(SWITCH_ENV, "1") != "0"
            and "not spark" not in (getattr(config.option, "markexpr", "") or ""))


@pytest.fixture(scope="session")
def spark_cfg(tmp_path_factory: pytest.TempPathFactory) -> SparkConfig:
    return session_config(tmp_path_factory.mktemp("warehouse"))


@pytest.fixture(scope="session")
def spark(spark_cfg: SparkConfig) -> Iterator[object]:
    os.environ["SPARK_TESTING"] = "1"
    os.environ["BLOCKHEAT_WAREHOUSE"] = str(spark_cfg.warehouse)
    worker = shared_worker()                            # the controller's JVM: it stops the JVM at the run's end
    session = attach(spark_cfg, database=f"tests_{worker}") if worker else build_session(spark_cfg)
    session.conf.set(WAREHOUSE_CONF, str(spark_cfg.warehouse))
    yield session
    if not worker:
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


@pytest.fixture(scope="session")
def hplajw_days(tmp_path_factory: pytest.TempPathFactory, repo_root: Path) -> list[Path]:
    """The bundled HP week cut into its seven days, one SRT file each (for appending a day at a time)."""
    from tests.builders import write_srt_days

    folder = tmp_path_factory.mktemp("hplajw-days")
    source = repo_root / "data/traces/hplajw/ajw.1week.srt"
    return [write_srt_days(folder / f"day-{d}.srt", source, range(d, d + 1)) for d in range(7)]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3-compatible server (S3Proxy, tests/s3_server.py) with one bucket, started once per test process on
    its first use and stopped at the end: its endpoint, bucket, access and secret key, region."""
    with running_s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL cluster (tests/postgres_server.py: the databases of infra/postgres/local-cluster.sh) on a
    free loopback port, started once per test process on its first use and stopped at the end."""
    with running_postgres() as server:
        yield server
