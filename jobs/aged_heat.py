"""Spark application: aged reference counts per extent and reorganization interval (`aged_heat`).

Incremental: interval N reads interval N-1's aged rows from the table and interval N's requests,
so a nightly run does one interval's work; --from-scratch recomputes every interval.
"""
from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from libs.spark import SparkConfig, build_session
from libs.tables import read_table, replace_rows, table_path, trace_info
from libs.transforms.aging import age_values
from libs.transforms.heat import compute_interval_counts
from schemas import aged_heat

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
KEYS = ("device", "extent_id")


@dataclass(frozen=True)
class AgingConfig:
    trace_id: str
    extent_bytes: int = 1 << 20
    interval_us: int = 86_400_000_000
    alpha: float = 0.8
    from_scratch: bool = False
    through: int | None = None  # last interval to compute (default: the trace's last)


def _existing(spark: SparkSession, cfg: SparkConfig, job: AgingConfig) -> DataFrame | None:
    if not (table_path(cfg.warehouse, aged_heat.TABLE) / "_delta_log").is_dir():
        return None
    return read_table(spark, cfg.warehouse, aged_heat.TABLE, job.trace_id).where(
        (F.col("extent_bytes") == job.extent_bytes) & (F.col("interval_us") == job.interval_us)
        & (F.col("alpha") == job.alpha))


def run(spark: SparkSession, cfg: SparkConfig, job: AgingConfig) -> list[int]:
    """Computes the intervals not yet in the table (all of them with from_scratch); returns their ids."""
    if job.interval_us <= 0:
        raise ValueError(f"interval must be > 0, got {job.interval_us} us")
    span_us = int(trace_info(spark, cfg.warehouse, job.trace_id)["span_us"])
    last = span_us // job.interval_us if job.through is None else job.through
    existing = _existing(spark, cfg, job)
    done = -1
    if existing is not None and not job.from_scratch:
        found = existing.agg(F.max("interval_id")).first()[0]
        done = -1 if found is None else int(found)
    requests = read_table(spark, cfg.warehouse, "requests", job.trace_id)
    computed = []
    for interval_id in range(done + 1, last + 1):
        log.info("aged heat: %s interval %d of %d", job.trace_id, interval_id, last)
        current = compute_interval_counts(requests, extent_bytes=job.extent_bytes, interval_us=job.interval_us,
                                          interval_id=interval_id)
        previous = None
        if interval_id > 0:
            previous = _existing(spark, cfg, job).where(F.col("interval_id") == interval_id - 1).select(
                *KEYS, F.col("aged_count").alias("count"))
        aged = age_values(current, previous, keys=KEYS, value="count", alpha=job.alpha)
        rows = (aged.withColumnRenamed("count", "aged_count")
                .join(current, on=list(KEYS), how="left")
                .select(F.lit("").alias("trace_id"), F.lit(job.extent_bytes).cast("long").alias("extent_bytes"),
                        F.lit(job.interval_us).cast("long").alias("interval_us"),
                        F.lit(interval_id).cast("long").alias("interval_id"), F.lit(job.alpha).alias("alpha"),
                        *KEYS, F.coalesce("count", F.lit(0)).cast("long").alias("count"), "aged_count")
                .select(*aged_heat.COLUMNS))
        replace_rows(rows, spark, cfg.warehouse, aged_heat.TABLE,
                     {"trace_id": job.trace_id, "extent_bytes": job.extent_bytes, "interval_us": job.interval_us,
                      "alpha": job.alpha, "interval_id": interval_id})
        computed.append(interval_id)
    return computed


def parse_args(argv: Sequence[str] | None) -> AgingConfig:
    parser = argparse.ArgumentParser(prog="aged_heat", description=__doc__)
    parser.add_argument("trace_id")
    parser.add_argument("--extent-bytes", type=int, default=1 << 20)
    parser.add_argument("--interval", type=float, default=86_400.0, help="seconds (default one day)")
    parser.add_argument("--alpha", type=float, default=0.8)
    parser.add_argument("--from-scratch", action="store_true")
    args = parser.parse_args(argv)
    return AgingConfig(args.trace_id, args.extent_bytes, round(args.interval * 1e6), args.alpha, args.from_scratch)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point."""
    job = parse_args(argv)
    cfg = SparkConfig.from_env("aged_heat")
    run(build_session(cfg), cfg, job)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
