"""System faults reach the user as one line naming the cause and the path: a real full disk and a real read-only
file system (small tmpfs mounts: the tests run as root, as CI does), and the causes Spark wraps (a denied path, the
JVM out of memory or gone, a Python worker that died) from the exceptions Python and Spark raise; a real failure in the
driver JVM, without its Java stacks."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from py4j.protocol import Py4JNetworkError

from blockheat.jobs.cli.faults import fault_message
from blockheat.jobs.cli.main import main
from blockheat.libs.io.connect_server import free_port
from blockheat.libs.io.jvm import SHORT_JOB_OPTIONS
from tests.libs.readers.test_agree import AGREE


@contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    where.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True, timeout=30)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True, timeout=30)


def test_a_full_disk_is_one_line_naming_the_device_path(spark, tmp_path, monkeypatch, capsys):
    with tmpfs(tmp_path / "full", "size=16k") as mount:
        monkeypatch.setenv("BLOCKHEAT_WAREHOUSE", str(mount / "wh"))
        assert main(["ingest", "--format", "msr", "--trace-id", "full", str(AGREE / "msr_fix_0.csv")]) == 1
        err = capsys.readouterr().err
    # delta-rs creating the first table's log says ENOSPC without a path: the warehouse is named
    assert err == (f"blockheat: error: disk full: no space left on the device (under the warehouse {mount}/wh); free "
                   "space there and run the command again\n")


def test_a_read_only_warehouse_is_one_line_naming_it(spark, tmp_path, monkeypatch, capsys):
    with tmpfs(tmp_path / "ro", "size=64k,ro") as mount:
        monkeypatch.setenv("BLOCKHEAT_WAREHOUSE", str(mount / "wh"))
        assert main(["ingest", "--format", "msr", "--trace-id", "ro", str(AGREE / "msr_fix_0.csv")]) == 1
        err = capsys.readouterr().err
    assert err == f"blockheat: error: read-only file system ({mount}/wh): the warehouse must be writable\n"


def test_wrapped_causes_are_named():
    denied = PermissionError(13, "Permission denied", "/srv/wh/requests")
    assert fault_message(denied) == "permission denied (/srv/wh/requests): this user may not write or read there"
    java_denied = RuntimeError("An error occurred while calling o88.save.\n: java.nio.file.AccessDeniedException: "
                               "/srv/wh/traces/part-0.parquet\n\tat sun.nio.fs.UnixException.translateToIOException")
    assert fault_message(java_denied, "/srv/wh") == ("permission denied (/srv/wh/traces/part-0.parquet): this user "
                                                     "may not write or read there")
    spark_full = RuntimeError(   # a Spark task's write into a full tmpfs, as ingest reported it
        "An error occurred while calling o191.parquet.\n: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task "
        "failed while writing rows to file:/tmp/full/wh/_staging/full-4ae40d55/classified.parquet. SQLSTATE: 58030\n"
        "Caused by: org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device")
    assert fault_message(spark_full, "/tmp/full/wh") == (
        "disk full: no space left on the device (/tmp/full/wh/_staging/full-4ae40d55/classified.parquet); free space "
        "there and run the command again")
    oom = RuntimeError("An error occurred while calling o273.commit.\n: java.lang.OutOfMemoryError: Java heap space\n"
                       "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)")
    assert fault_message(oom) == ("the Spark JVM ran out of memory (Java heap space): give it more "
                                  "(BLOCKHEAT_SPARK_MASTER with fewer cores, or spark.driver.memory, 4g by default)")
    worker = RuntimeError("An exception was thrown from the Python worker. Please see the stack trace below.\n"
                          "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)")
    assert fault_message(worker) == ("a Python worker of Spark died (out of memory, or killed): run with --debug for "
                                     "the worker's error")
    gone = RuntimeError("An error occurred while calling o12.sql")
    gone.__cause__ = Py4JNetworkError("Answer from Java side is empty")
    assert fault_message(gone) == ("the Spark JVM stopped answering (it exited: killed, or out of memory); run with "
                                   "--debug for its output")
    assert fault_message(ValueError("[TABLE_OR_VIEW_NOT_FOUND] The table or view `x` cannot be found.")) is None


@pytest.mark.spark                  # a driver JVM in a child process
def test_a_jvm_side_failure_is_one_line_without_a_java_stack(tmp_path):
    """A shared metastore nothing answers at: its client in the driver JVM logs every retry with a stack (7,800
    lines); the command prints one line naming the cause."""
    url = f"jdbc:postgresql://127.0.0.1:{free_port()}/nowhere"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOCKHEAT_", "AIRFLOW"))}
    env.update(BLOCKHEAT_WAREHOUSE=str(tmp_path / "wh"), BLOCKHEAT_SPARK_MASTER="local[1]",
               BLOCKHEAT_METASTORE_URL=url, BLOCKHEAT_METASTORE_USER="nobody", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, BLOCKHEAT_JAVA_OPTIONS=" ".join(SHORT_JOB_OPTIONS))
    done = subprocess.run([sys.executable, "-m", "blockheat.jobs.cli.main", "sql", "SELECT 1"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"blockheat: error: the SQL catalog cannot start: the PostgreSQL metastore {url} (BLOCKHEAT_METASTORE_URL) "
        "did not answer or refused the login; run with --debug for the metastore's own errors"], done.stderr[-3000:]
