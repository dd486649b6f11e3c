"""One Spark JVM for both pytest-xdist workers (`make test`): started by the controller process, attached to by
each worker through py4j, each worker with its own SparkSession (SQL settings, temporary views) and its own
database (tables registered by name), over its own warehouse.

Why: two test JVMs would each compile the same Spark and Delta code, and their JIT threads would take a large
share of the CPU of a suite CPU-bound on two cores (docs/BENCHMARKS.md, "Test suite"). The controller owns the
JVM for the whole run, so neither worker's end stops it under the other. Without xdist (`pytest -n 0`, one file)
each process builds its own session.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from blockheat.libs.io.session import SparkConfig, build_session

#: The file, named in the workers' environment, where the controller writes the JVM's py4j port and secret.
INFO_ENV = "BLOCKHEAT_TEST_JVM"
#: The session's own warehouse (spark.sql.warehouse.dir is the JVM's, the controller's under xdist).
WAREHOUSE_CONF = "spark.blockheat.test.warehouse"
#: Set to 0 to give each worker its own JVM again.
SWITCH_ENV = "BLOCKHEAT_TEST_SHARED_JVM"
START_TIMEOUT_S = 600


def session_config(warehouse: Path) -> SparkConfig:
    """The test sessions' settings: local[2], the throughput collector, 2 shuffle partitions."""
    return SparkConfig(master="local[2]", warehouse=warehouse, app_name="blockheat-tests",
                       # the throughput collector: the suite's CPU-bound files run faster than on G1
                       extra={"spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
                              "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                              "spark.databricks.delta.snapshotPartitions": "2",
                              "spark.ui.showConsoleProgress": "false"})


def shared_worker() -> str | None:
    """This process's xdist worker name when its session is to run on the controller's JVM, else None."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return worker if worker and INFO_ENV in os.environ else None


class SharedJvm:
    """The controller's side: the session is built in a thread while xdist starts its workers."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="blockheat-test-jvm-"))
        self.info = self.root / "gateway.json"
        self.session: Any = None
        os.environ[INFO_ENV] = str(self.info)          # before xdist spawns the workers: they inherit it
        os.environ["SPARK_TESTING"] = "1"
        self.thread = threading.Thread(target=self._start, name="shared-jvm", daemon=True)
        self.thread.start()

    def _start(self) -> None:
        try:
            self.session = build_session(session_config(self.root / "warehouse"))
            params = self.session.sparkContext._gateway.gateway_parameters
            record = {"port": params.port, "secret": params.auth_token}
        except Exception:  # the workers fail with this text instead of waiting
            record = {"error": traceback.format_exc()}
        partial = self.info.with_suffix(".tmp")
        partial.write_text(json.dumps(record))
        partial.replace(self.info)

    def stop(self) -> None:
        self.thread.join()
        if self.session is not None:
            self.session.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def attach(cfg: SparkConfig, database: str) -> Any:
    """This worker's session on the controller's JVM: a new session of its context, its own current database,
    then build_session(cfg) as a worker with its own JVM would (the tables of cfg's warehouse registered)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    info = Path(os.environ[INFO_ENV])
    deadline = time.monotonic() + START_TIMEOUT_S
    while not info.is_file():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the controller's Spark JVM did not start in {START_TIMEOUT_S} s ({info})")
        time.sleep(0.2)
    record = json.loads(info.read_text())
    if "error" in record:
        raise RuntimeError(f"the controller's Spark JVM failed to start:\n{record['error']}")
    os.environ.update(PYSPARK_GATEWAY_PORT=str(record["port"]), PYSPARK_GATEWAY_SECRET=record["secret"])
    try:
        gateway = launch_gateway()                     # connects: the port is set
    finally:                                           # a test's spark-submit must start its own JVM
        del os.environ["PYSPARK_GATEWAY_PORT"], os.environ["PYSPARK_GATEWAY_SECRET"]
    jvm = gateway.jvm
    context = jvm.org.apache.spark.SparkContext.getOrCreate()
    sc = SparkContext(gateway=gateway, jsc=jvm.org.apache.spark.api.java.JavaSparkContext.fromSparkContext(context))
    sessions = getattr(jvm, "org.apache.spark.sql.classic.SparkSession")
    controllers = sessions.getDefaultSession().get()
    own = SparkSession(sc, jsparkSession=controllers.newSession())
    sessions.setDefaultSession(controllers)            # the JVM's default session stays the controller's
    own.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    own.catalog.setCurrentDatabase(database)
    return build_session(cfg)                          # getOrCreate: `own`, with cfg's tables registered
