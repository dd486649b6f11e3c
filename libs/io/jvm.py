"""Faster starts for short Spark applications: a class-data-sharing (CDS) archive of the classes a Spark + Delta
session loads, made once per environment (`blockheat jvm-archive`; `make` makes it), used by every driver and
executor JVM started afterwards.

A Spark driver loads some 15,000 classes before its first query; mapped from the archive instead of parsed and
verified, they make the JVM start faster, and that start is most of a nightly stage on one day's data
(docs/BENCHMARKS.md, "JVM start-up"). No pyspark import here: libs.nightly
calls it while Airflow parses the DAG.

Choices: the archive lives in the environment (<prefix>/var/blockheat/, next to the pyspark it was made with,
keyed by the pyspark version); a JVM whose JDK or class path does not match it (another JDK, a cluster node
without the file) runs as without it, and its CDS warnings are switched off so they never reach a command's
output; the archive is written under a temporary name and renamed, so concurrent makers cannot leave half a
file.
"""
from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: JVM flags that keep CDS quiet when the archive cannot be used (the JVM then runs without it).
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
#: For short applications on small data (the nightly stages, tests' drivers): the JIT's first tier and a
#: serial GC start faster and use less CPU; long jobs on large data should keep the defaults.
SHORT_JOB_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
#: For a local-mode driver whose job runs its passes in Python workers reading the files (the profile, extent heat):
#: the JVM schedules tasks, passes their results on and commits. G1 grows its committed heap to ~600 MB on the
#: results' large arrays while about 100 MB are live; the serial GC with a small young generation, started small,
#: keeps about 180 MB (docs/BENCHMARKS.md, "Trace profile"). Choice: 20-50% of the old generation kept free after a
#: full collection; with 5-20% it filled again at once (twice the full collections, 3.5 s against 1.6 s of pauses over
#: six 2 M-request profiles, at the same resident size). The JIT's first tier only: the second (C2) took 0.7-0.9 s of
#: CPU in each `blockheat heat` of 20 M requests on 2 cores, against 0.35-0.5 s for the whole JVM without it, a core
#: the Python workers then lack.
LEAN_DRIVER_OPTIONS = ("-XX:+UseSerialGC", "-Xms128m", "-Xmn48m", "-XX:MinHeapFreeRatio=20", "-XX:MaxHeapFreeRatio=50",
                       "-XX:TieredStopAtLevel=1")
JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def archive_path(prefix: str | Path | None = None) -> Path:
    """Where the archive of the environment at `prefix` (default: this interpreter's) is kept."""
    root = Path(sys.prefix if prefix is None else prefix)
    return root / "var" / "blockheat" / f"spark-{version('pyspark')}.jsa"


def prefix_of(python: str | Path) -> Path:
    """The environment prefix of an interpreter path (<prefix>/bin/python)."""
    return Path(python).parent.parent


def archive_options(prefix: str | Path | None = None) -> list[str]:
    """The JVM flags that use the environment's archive ([] when it has none)."""
    path = archive_path(prefix)
    return [f"-XX:SharedArchiveFile={path}", *QUIET] if path.is_file() else []


_PLAIN = re.compile(r"[^\s\"'\\]+")


def quote_java_option(flag: str) -> str:
    """`flag` as one word of an extraJavaOptions string, which Spark's launcher splits as a POSIX shell does
    (quotes, backslash escapes): as it is when it has no space, quote or backslash, else in double quotes with
    `\\` and `"` escaped (a path with a space or a quote, e.g. -Dderby.system.home=<warehouse>)."""
    if _PLAIN.fullmatch(flag):
        return flag
    return '"' + flag.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_options(*flags: str) -> str:
    """Single flags (unquoted, e.g. -Dname=<a path with spaces>) as one extraJavaOptions string."""
    return " ".join(quote_java_option(f) for f in flags if f)


def merge_java_options(*parts: str | None) -> str:
    """One extraJavaOptions string from several (each split as Spark's launcher splits it; empty and repeated flags
    dropped, order kept; flags with spaces or quotes quoted again)."""
    seen: list[str] = []
    for part in parts:
        for flag in shlex.split(part or ""):
            if flag not in seen:
                seen.append(flag)
    return java_options(*seen)


def sample_workload(spark: Any, warehouse: Path) -> None:
    """What the archive is made from (and bench/jvm_start.py times): a 2,000-row partitioned Delta write, a
    replace of one partition as libs.io.tables.replace_rows makes it (libs.io.delta_files), a read with an
    aggregate, an Arrow UDF and a SQL query, in table `t` under `warehouse`: the classes a nightly stage on
    one day's data loads, minus the data."""
    # lazy: libs.nightly imports this module while Airflow parses the DAG; pyspark and pyarrow stay out of it
    from pyspark.sql.pandas.types import to_arrow_schema

    from blockheat.libs.io.delta_files import TableTarget, replace_by_tasks
    from blockheat.libs.io.worker import python_task

    df = spark.range(2000).selectExpr("id", "id % 7 AS k", "cast(id AS double) / 3 AS x")
    df.write.format("delta").partitionBy("k").save(str(warehouse / "t"))
    target = TableTarget("t", str((warehouse / "t").resolve()), to_arrow_schema(df.schema), ("k",), ("id",))
    replace_by_tasks(spark, target, {"k": 1}, df.where("k = 1"))
    t = spark.read.format("delta").load(str(warehouse / "t"))
    t.groupBy("k").agg({"x": "sum"}).orderBy("k").collect()
    t.mapInArrow(python_task(lambda batches: batches), t.schema).count()
    t.createOrReplaceTempView("t")
    spark.sql("SELECT k, count(*) FROM t GROUP BY k").toArrow()


_WORKLOAD = """
import shutil, sys, tempfile
from pathlib import Path
from blockheat.libs.io.jvm import sample_workload
from blockheat.libs.io.session import SparkConfig, build_session
wh = Path(tempfile.mkdtemp(prefix="blockheat-jvm-"))
cfg = SparkConfig(master="local[2]", warehouse=wh, app_name="blockheat-jvm-archive",
                  extra={"spark.driver.extraJavaOptions": sys.argv[1], "spark.sql.shuffle.partitions": "2"})
spark = build_session(cfg)
sample_workload(spark, wh)
spark.stop()
shutil.rmtree(wh, ignore_errors=True)
"""


def make_archive(*, force: bool = False, timeout_s: float = 600.0) -> Path:
    """Make this environment's archive by running a small Spark + Delta session in a child process that
    dumps its classes at exit; returns the archive's path (an existing one is kept unless `force`)."""
    path = archive_path()
    if path.is_file() and not force:
        return path
    path.unlink(missing_ok=True)        # the maker must not map the old archive (JVMs using it keep their copy)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)                      # the JVM creates it
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    try:
        done = subprocess.run([sys.executable, "-c", _WORKLOAD, f"-XX:ArchiveClassesAtExit={tmp}"], env=env,
                              cwd=path.parent, capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0 or not Path(tmp).is_file():
            raise RuntimeError(f"making the JVM class archive failed (exit {done.returncode}): "
                               f"{done.stderr.strip()[-2000:]}")
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path
