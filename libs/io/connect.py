"""What a job needs to know of its session that a classic session and a Spark Connect one answer differently.

A Spark Connect client (`BLOCKHEAT_SPARK_REMOTE=sc://host:port`, libs.io.session) has no SparkContext: no RDDs, no
defaultParallelism. Jobs ask here instead, and run Python on the executors only through DataFrame APIs both kinds
of session have (mapInArrow).
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

_LOCAL = re.compile(r"^local(?:-cluster)?\[(\*|\d+)")


def is_remote(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect client session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def parallelism(spark: SparkSession) -> int:
    """How many tasks the session runs at once (SparkContext.defaultParallelism where there is one; under Spark
    Connect, spark.default.parallelism if set, else the cores of a local master, else the executors' cores)."""
    if not is_remote(spark):
        return int(spark.sparkContext.defaultParallelism)
    conf = spark.conf
    given = conf.get("spark.default.parallelism", None)
    if given:
        return max(1, int(given))
    found = _LOCAL.match(conf.get("spark.master", None) or "")
    if found:
        return (os.cpu_count() or 1) if found.group(1) == "*" else max(1, int(found.group(1)))
    executors = int(conf.get("spark.executor.instances", None) or 2)
    cores = int(conf.get("spark.executor.cores", None) or 1)
    return max(2, executors * cores)


def one_row_per_task(spark: SparkSession, rows: Sequence[tuple[Any, ...]], schema: str | StructType) -> DataFrame:
    """A DataFrame of `rows` with one row in each partition, in order (a task per row downstream): parallelize in a
    classic session; under Spark Connect, spark.range's partitions (one id each) joined with the rows broadcast,
    which keeps range's partitioning."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    n = max(1, len(rows))
    if not is_remote(spark):
        return spark.createDataFrame(spark.sparkContext.parallelize(rows, n), schema)
    with_task = f"_task long, {schema}" if isinstance(schema, str) else \
        StructType([StructField("_task", LongType(), False), *schema.fields])
    numbered = spark.createDataFrame([(i, *row) for i, row in enumerate(rows)], with_task)
    ids = spark.range(0, n, 1, n).withColumnRenamed("id", "_task")
    return ids.join(F.broadcast(numbered), "_task").drop("_task")


__all__ = ["is_remote", "one_row_per_task", "parallelism"]
