"""Spark application: interarrival heat tracking (`heat_tracking`) and its evaluation (`tracking_eval`)."""
from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.io.tables import read_table, replace_rows, trace_info
from blockheat.libs.table_io.device_pass import files_or_sql
from blockheat.libs.table_io.tracking import forget_errors, relative_errors_files
from blockheat.libs.table_io.tracking_update import TrackParams, forget_state, track_whole, update_tracking
from blockheat.libs.transforms.tracking import compute_heat_tracking
from blockheat.libs.transforms.tracking_eval import (
    DEFAULT_SPEC,
    KS,
    StepSpec,
    generated_trace,
    relative_errors_by_k,
    requests_to_reach_arrays,
    stale_seconds_arrays,
)
from blockheat.schemas import heat_tracking, tracking_eval

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrackConfig:
    trace_id: str
    k: int = 10
    aging_period_us: int = 3_600_000_000
    extent_bytes: int = 1 << 20


def track_ks(spark: SparkSession, cfg: SparkConfig, trace_id: str, ks: Sequence[int], *,
             aging_period_us: int = 3_600_000_000, extent_bytes: int = 1 << 20, full: bool = False) -> dict[int, int]:
    """Writes the trace's heat_tracking rows of every k (extent size, aging period); returns k -> rows written.
    After an append, resumed from the stored state: only the new checkpoints' rows (libs.table_io.tracking_update;
    not with `full`). Otherwise read from the requests files in one pass for all k (libs.table_io.tracking); the
    window functions (libs.transforms.tracking), one pass per k, when the files cannot be read directly."""
    info = trace_info(spark, cfg.warehouse, trace_id)
    span_us = int(info["span_us"])
    params = TrackParams(tuple(dict.fromkeys(int(k) for k in ks)), extent_bytes, aging_period_us)
    log.info("heat tracking: %s, k in %s, aging every %g s", trace_id, list(ks), aging_period_us / 1e6)
    if not full:
        resumed = files_or_sql(lambda: update_tracking(spark, cfg.warehouse, trace_id, params, span_us=span_us,
                                                       devices=info["devices"]),
                               lambda: None, f"heat tracking update {trace_id}")
        if resumed is not None:
            return resumed

    def sql_way() -> dict[int, int]:
        forget_state(cfg.warehouse, trace_id, params)
        return _track_sql(spark, cfg, trace_id, ks, span_us, aging_period_us, extent_bytes)

    return files_or_sql(lambda: track_whole(spark, cfg.warehouse, trace_id, params, span_us=span_us), sql_way,
                        f"heat tracking {trace_id}")


def _track_sql(spark: SparkSession, cfg: SparkConfig, trace_id: str, ks: Sequence[int], span_us: int,
               aging_period_us: int, extent_bytes: int) -> dict[int, int]:
    """track_ks through the window functions (libs.transforms.tracking), one pass per k."""
    requests = read_table(spark, cfg.warehouse, "requests", trace_id)
    rows = {}
    for k in ks:
        tracked = compute_heat_tracking(requests, extent_bytes=extent_bytes, k=k, aging_period_us=aging_period_us,
                                        span_us=span_us)
        where = {"trace_id": trace_id, "k": k, "extent_bytes": extent_bytes, "aging_period_us": aging_period_us}
        replace_rows(tracked, spark, cfg.warehouse, heat_tracking.TABLE, where)
        rows[k] = _tracked(spark, cfg, trace_id, k, extent_bytes, aging_period_us).count()
    return rows


def _tracked(spark: SparkSession, cfg: SparkConfig, trace_id: str, k: int, extent_bytes: int,
             aging_period_us: int) -> DataFrame:
    return read_table(spark, cfg.warehouse, heat_tracking.TABLE, trace_id).where(
        f"k = {k} AND extent_bytes = {extent_bytes} AND aging_period_us = {aging_period_us}")


def run_track(spark: SparkSession, cfg: SparkConfig, job: TrackConfig, *, full: bool = False) -> int:
    """Writes the trace's heat_tracking rows for (k, extent size, aging period); returns the row count."""
    return track_ks(spark, cfg, job.trace_id, [job.k], aging_period_us=job.aging_period_us, full=full,
                    extent_bytes=job.extent_bytes)[job.k]


def run_eval(spark: SparkSession, cfg: SparkConfig, trace_id: str, *, ks: Sequence[int] = KS,
             aging_period_us: int = 3_600_000_000, extent_bytes: int = 1 << 20,
             spec: StepSpec = DEFAULT_SPEC, full: bool = False) -> list[dict[str, Any]]:
    """For each k: tracking error on the real trace (via heat_tracking; the relative errors read from its files,
    libs.table_io.tracking.relative_errors_files, or through Spark SQL when they cannot be) and
    step/drop behaviour on generated traces. Writes and returns the tracking_eval rows."""
    track_ks(spark, cfg, trace_id, ks, aging_period_us=aging_period_us, extent_bytes=extent_bytes, full=full)

    def errors_sql() -> dict[int, dict[str, Any]]:
        forget_errors(cfg.warehouse, trace_id)           # the kept sorted errors no longer follow the table
        return relative_errors_by_k(read_table(spark, cfg.warehouse, heat_tracking.TABLE, trace_id).where(
            f"extent_bytes = {int(extent_bytes)} AND aging_period_us = {int(aging_period_us)} "
            f"AND k IN ({', '.join(str(int(k)) for k in ks)})"))

    errors = files_or_sql(
        lambda: relative_errors_files(spark, cfg.warehouse, trace_id, ks=ks, extent_bytes=extent_bytes,
                                      aging_period_us=aging_period_us, full=full),
        errors_sql, f"tracking eval {trace_id}: relative errors")
    none = {"checkpoints": 0, "mean": None, "median": None}
    step, drop = generated_trace("step", spec), generated_trace("drop", spec)
    rows = []
    for k in ks:
        log.info("tracking eval k=%d: generated step and drop traces", k)
        e = errors.get(k, none)
        rows.append({
            "trace_id": trace_id, "k": k, "aging_period_us": aging_period_us, "extent_bytes": extent_bytes,
            "checkpoints": e["checkpoints"], "mean_relative_error": e["mean"], "median_relative_error": e["median"],
            "requests_to_90pct": requests_to_reach_arrays(step, k=k, spec=spec),
            "stale_s_aging": stale_seconds_arrays(drop, k=k, aging=True, spec=spec),
            "stale_s_no_aging": stale_seconds_arrays(drop, k=k, aging=False, spec=spec),
        })
    df = spark.createDataFrame(rows, tracking_eval.SPARK_SCHEMA)
    replace_rows(df, spark, cfg.warehouse, tracking_eval.TABLE,
                 {"trace_id": trace_id, "aging_period_us": aging_period_us, "extent_bytes": extent_bytes})
    return rows


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(k) for k in text.split(",") if k.strip())
    except ValueError:
        ks = ()
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return ks


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point: track (default) or --eval (its k values and generated traces configurable)."""
    parser = argparse.ArgumentParser(prog="heat_tracking", description=__doc__)
    parser.add_argument("trace_id")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--aging-period", type=float, default=3600.0, help="seconds")
    parser.add_argument("--eval", action="store_true")
    parser.add_argument("--full", action="store_true", help="track the whole trace (not only what an append added)")
    parser.add_argument("--ks", type=_ks, default=KS, help="--eval: k values (default 5,10,20,50)")
    parser.add_argument("--eval-extents", type=int, default=DEFAULT_SPEC.extents,
                        help="--eval: extents of the generated step and drop traces (default %(default)s)")
    parser.add_argument("--eval-change", type=float, default=DEFAULT_SPEC.change_s,
                        help="--eval: second of the generated traces' rate change (default %(default)s)")
    parser.add_argument("--eval-end", type=float, default=DEFAULT_SPEC.end_s,
                        help="--eval: end of the generated drop trace, s (default %(default)s)")
    args = parser.parse_args(argv)
    cfg = SparkConfig.from_env("heat_tracking")
    logging.basicConfig(level=logging.INFO)        # whether the run updated or computed whole
    spark = build_session(cfg)
    period = round(args.aging_period * 1e6)
    if args.eval:
        spec = StepSpec(extents=args.eval_extents, change_s=args.eval_change, end_s=args.eval_end)
        run_eval(spark, cfg, args.trace_id, ks=args.ks, aging_period_us=period, spec=spec, full=args.full)
    else:
        run_track(spark, cfg, TrackConfig(args.trace_id, args.k, period), full=args.full)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
