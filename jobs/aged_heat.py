"""Spark application: aged reference counts per extent and reorganization interval (`aged_heat`).

Incremental: interval N reads interval N-1's aged rows from the table and interval N's requests,
so a nightly run does one interval's work; --from-scratch recomputes every interval. --interval-index N
computes exactly interval N from the stored N-1 (the nightly DAG's mode: a retry or a backfill gives
the same rows as the nightly chain).
"""
from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from blockheat.libs.io.delta_files import replace_from_driver
from blockheat.libs.io.delta_log import LogUnreadable, snapshot
from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.io.tables import read_table, replace_rows, table_exists, table_path, table_target, trace_info
from blockheat.libs.table_io.device_pass import files_or_sql, read_files
from blockheat.libs.table_io.heat import interval_counts
from blockheat.libs.transforms.aging import age_values
from blockheat.libs.transforms.heat import compute_interval_counts
from blockheat.schemas import aged_heat

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
    interval_index: int | None = None  # exactly this interval, from the stored previous one


class AgingChainError(LookupError):
    """--interval-index N without interval N-1 in the table, or past the trace's data."""


def _existing(spark: SparkSession, cfg: SparkConfig, job: AgingConfig) -> DataFrame | None:
    if not table_exists(cfg.warehouse, aged_heat.TABLE):
        return None
    return read_table(spark, cfg.warehouse, aged_heat.TABLE, job.trace_id).where(
        (F.col("extent_bytes") == job.extent_bytes) & (F.col("interval_us") == job.interval_us)
        & (F.col("alpha") == job.alpha))


def _stored(spark: SparkSession, cfg: SparkConfig, job: AgingConfig, interval_id: int) -> pa.Table | None:
    """The stored (device, extent_id, aged_count) rows of interval_id for this aging (extent size, interval
    length, alpha); None when there is no table. Read from the current files the log lists (libs.io.delta_log):
    the nightly run's chain check and previous values then cost no Spark read of the table (a job's first one
    is seconds of Delta state and reader set-up); through Spark when the reader does not handle the log."""
    if not table_exists(cfg.warehouse, aged_heat.TABLE):
        return None
    columns = [*KEYS, "aged_count"]
    try:
        snap = snapshot(table_path(cfg.warehouse, aged_heat.TABLE))
    except LogUnreadable as exc:
        log.info("aged heat: %s read through Spark (%s)", aged_heat.TABLE, exc)
        return _existing(spark, cfg, job).where(F.col("interval_id") == interval_id).select(*columns).toArrow()
    parts = [read_files([snap.path(add)], columns,
                        [("interval_us", "==", job.interval_us), ("alpha", "==", job.alpha),
                         ("interval_id", "==", interval_id)])
             for add in snap.files if add["partitionValues"] == {"trace_id": job.trace_id,
                                                                 "extent_bytes": str(job.extent_bytes)}]
    schema = pa.schema([aged_heat.ARROW_SCHEMA.field(c) for c in columns])
    return pa.concat_tables([t.cast(schema) for t in parts]) if parts else schema.empty_table()


def run(spark: SparkSession, cfg: SparkConfig, job: AgingConfig) -> list[int]:
    """Computes the intervals not yet in the table (all of them with from_scratch; exactly interval_index
    when given); returns their ids."""
    if job.interval_us <= 0:
        raise ValueError(f"interval must be > 0, got {job.interval_us} us")
    span_us = int(trace_info(spark, cfg.warehouse, job.trace_id)["span_us"])
    last = span_us // job.interval_us if job.through is None else job.through
    done = -1
    stored_before = None        # the nightly run's interval N-1, read once for the chain check and the aging
    if job.interval_index is not None:
        done, last, stored_before = _one_interval(spark, cfg, job, job.interval_index, span_us // job.interval_us)
    elif (existing := _existing(spark, cfg, job)) is not None and not job.from_scratch:
        found = existing.agg(F.max("interval_id")).first()[0]
        done = -1 if found is None else int(found)
    computed = []
    for interval_id in range(done + 1, last + 1):
        log.info("aged heat: %s interval %d of %d", job.trace_id, interval_id, last)
        stored = stored_before if interval_id == done + 1 else None
        files_or_sql(lambda i=interval_id, stored=stored: _interval_from_files(spark, cfg, job, i, stored),
                     lambda i=interval_id: _interval_sql(spark, cfg, job, i),
                     f"aged heat {job.trace_id} interval {interval_id}")
        computed.append(interval_id)
    return computed


def _interval_sql(spark: SparkSession, cfg: SparkConfig, job: AgingConfig, interval_id: int) -> None:
    """One interval's aged_heat rows through the Spark SQL definitions (compute_interval_counts, age_values)."""
    requests = read_table(spark, cfg.warehouse, "requests", job.trace_id)
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


def aged_rows(current: pa.Table, previous: pa.Table | None, job: AgingConfig, interval_id: int) -> pa.Table:
    """The aged_heat rows of one interval (trace_id '') from its counts (device, extent_id, count) and the previous
    interval's (device, extent_id, aged_count), on the driver: age_values' blend with the same floating-point
    operations (alpha x count, plus (1 - alpha) x the old value when there is a previous interval), keys on
    either side, rows aged to 0 dropped."""
    if previous is None:
        count = current.column("count").to_numpy().astype(np.int64)
        keys = current.select(list(KEYS))
        aged = job.alpha * count.astype(np.float64)
    else:
        joined = current.join(previous, keys=list(KEYS), join_type="full outer")
        keys = joined.select(list(KEYS))
        count = pc.fill_null(joined.column("count"), 0).to_numpy().astype(np.int64)
        old = pc.fill_null(joined.column("aged_count"), 0.0).to_numpy().astype(np.float64)
        aged = job.alpha * count.astype(np.float64) + (1.0 - job.alpha) * old
    keep = aged > 0.0
    n = int(keep.sum())
    out = {"trace_id": pa.array([""] * n, pa.string()),
           "extent_bytes": pa.array(np.full(n, job.extent_bytes, np.int64)),
           "interval_us": pa.array(np.full(n, job.interval_us, np.int64)),
           "interval_id": pa.array(np.full(n, interval_id, np.int64)),
           "alpha": pa.array(np.full(n, job.alpha, np.float64)),
           "device": keys.column("device").filter(pa.array(keep)), "extent_id": keys.column("extent_id").filter(
               pa.array(keep)), "count": pa.array(count[keep]), "aged_count": pa.array(aged[keep])}
    return pa.table({c: out[c] for c in aged_heat.COLUMNS}, schema=aged_heat.ARROW_SCHEMA)


def _interval_from_files(spark: SparkSession, cfg: SparkConfig, job: AgingConfig, interval_id: int,
                         previous: pa.Table | None = None) -> None:
    """One interval's rows from the requests files (libs.table_io.heat.interval_counts) and the stored
    previous interval (`previous` when the caller has read it already), aged and written from the driver;
    Unsupported, before anything is written, when the files cannot be read directly."""
    current = interval_counts(spark, cfg.warehouse, job.trace_id, extent_bytes=job.extent_bytes,
                              interval_us=job.interval_us, interval_id=interval_id)
    if previous is None and interval_id > 0:
        previous = _stored(spark, cfg, job, interval_id - 1)
    replace_from_driver(spark, table_target(spark, cfg.warehouse, aged_heat.TABLE),
                        {"trace_id": job.trace_id, "extent_bytes": job.extent_bytes, "interval_us": job.interval_us,
                         "alpha": job.alpha, "interval_id": interval_id},
                        aged_rows(current, previous, job, interval_id))


def _one_interval(spark: SparkSession, cfg: SparkConfig, job: AgingConfig, n: int,
                  data_last: int) -> tuple[int, int, pa.Table | None]:
    """(done, last, interval n-1's stored rows or None for n = 0) that make run() compute exactly interval n.
    Interval 0 always has rows (the trace's first request is in it) and aged values stay > 0, so a computed
    interval n-1 has rows."""
    what = (f"aged_heat of trace {job.trace_id!r} (extent {job.extent_bytes} B, interval {job.interval_us} us, "
            f"alpha {job.alpha:g})")
    if n < 0:
        raise ValueError(f"--interval-index must be >= 0, got {n}")
    if n > data_last:
        raise AgingChainError(f"{what}: interval {n} is after the trace's data (its requests end in interval "
                              f"{data_last}); ingest the later files first")
    if n > 0 and ((stored := _stored(spark, cfg, job, n - 1)) is None or stored.num_rows == 0):
        raise AgingChainError(f"{what}: interval {n - 1} is not in the table; compute it first "
                              f"(--interval-index {n - 1})")
    return n - 1, n, (stored if n > 0 else None)


def parse_args(argv: Sequence[str] | None) -> AgingConfig:
    parser = argparse.ArgumentParser(prog="aged_heat", description=__doc__)
    parser.add_argument("trace_id")
    parser.add_argument("--extent-bytes", type=int, default=1 << 20)
    parser.add_argument("--interval", type=float, default=86_400.0, help="seconds (default one day)")
    parser.add_argument("--alpha", type=float, default=0.8)
    parser.add_argument("--from-scratch", action="store_true")
    parser.add_argument("--interval-index", type=int, default=None, metavar="N",
                        help="compute exactly interval N from the stored interval N-1 (nightly mode)")
    args = parser.parse_args(argv)
    if args.from_scratch and args.interval_index is not None:
        parser.error("--from-scratch and --interval-index exclude each other")
    return AgingConfig(args.trace_id, args.extent_bytes, round(args.interval * 1e6), args.alpha, args.from_scratch,
                       interval_index=args.interval_index)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point."""
    job = parse_args(argv)
    cfg = SparkConfig.from_env("aged_heat")
    run(build_session(cfg), cfg, job)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
