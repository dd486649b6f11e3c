"""Spark application: the HTML report of one trace (heat map, disk heat, CDFs, tracking accuracy, profile).

Runs the heat, profile and tracking-evaluation jobs first when their tables lack the trace, then
gathers small binned inputs (never trace-sized data) and renders them with libs.report. The distributions
come from the requests files in one pass (libs.transforms.report_files), through Spark SQL when the files
cannot be read directly.
"""
from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

# The report runs these stages itself when their tables lack the trace (_ensure_inputs): job to job on purpose.
from jobs import extent_heat as heat_job
from jobs import heat_tracking as tracking_job
from jobs import trace_profile as profile_job
from libs.columns import idiv
from libs.io import storage
from libs.io.device_pass import files_or_sql
from libs.io.session import SparkConfig, build_session
from libs.io.tables import read_table, table_exists, trace_info
from libs.report import ReportInputs, render, write_report
from libs.transforms.profile import chunked_lag, round_significant
from libs.transforms.report_files import report_cdfs
from libs.transforms.tracking_eval import DEFAULT_SPEC, KS, StepSpec, paper_claims

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
EXTENT_BYTES = 1 << 20
WINDOW_US = 3_600_000_000
MAX_BINS = (400, 300)  # heat-map resolution: time bins x address bins
CDF_POINTS = [i / 200 for i in range(201)]


def _rows(spark: SparkSession, cfg: SparkConfig, table: str, trace_id: str, where: str = "true") -> DataFrame | None:
    if not table_exists(cfg.warehouse, table):
        return None
    df = read_table(spark, cfg.warehouse, table, trace_id).where(where)
    return df if df.limit(1).count() else None


def _ensure_inputs(spark: SparkSession, cfg: SparkConfig, trace_id: str, eval_ks: Sequence[int],
                   eval_spec: StepSpec) -> None:
    heat_where = f"extent_bytes = {EXTENT_BYTES} AND window_us = {WINDOW_US}"
    if _rows(spark, cfg, "extent_heat", trace_id, heat_where) is None \
            or _rows(spark, cfg, "disk_heat", trace_id, f"window_us = {WINDOW_US}") is None:
        heat_job.run(spark, cfg, heat_job.HeatConfig(trace_id, EXTENT_BYTES, WINDOW_US))
    if _rows(spark, cfg, "trace_profile", trace_id) is None:
        profile_job.run(spark, cfg, trace_id)
    if _rows(spark, cfg, "tracking_eval", trace_id, f"extent_bytes = {EXTENT_BYTES}") is None:
        tracking_job.run_eval(spark, cfg, trace_id, extent_bytes=EXTENT_BYTES, ks=eval_ks, spec=eval_spec)


def _heat_map(spark: SparkSession, cfg: SparkConfig, trace_id: str) -> tuple[list[dict[str, Any]], tuple[int, int]]:
    heat = read_table(spark, cfg.warehouse, "extent_heat", trace_id).where(
        (F.col("extent_bytes") == EXTENT_BYTES) & (F.col("window_us") == WINDOW_US))
    extent = heat.agg(F.max("window_start_us"), F.max("extent_id")).first()
    time_bin = WINDOW_US * max(1, math.ceil((extent[0] // WINDOW_US + 1) / MAX_BINS[0]))
    addr_bin = EXTENT_BYTES * max(1, math.ceil((extent[1] + 1) / MAX_BINS[1]))
    binned = heat.groupBy("device", (idiv(F.col("window_start_us"), time_bin) * time_bin).alias("time_bin_us"),
                          (idiv(F.col("extent_id") * EXTENT_BYTES, addr_bin) * addr_bin).alias("addr_bin_bytes")) \
        .agg((F.sum("blocks") / F.lit(time_bin / 1e6)).alias("heat"))
    return [r.asDict() for r in binned.collect()], (time_bin, addr_bin)


def _cdf(values: DataFrame, column: str, *, rounded: bool) -> list[tuple[float, float]]:
    v = round_significant(F.col(column)) if rounded else F.col(column).cast("double")
    counted = values.where(F.col(column).isNotNull()).groupBy(v.alias("_v")).agg(F.count(F.lit(1)).alias("_n"))
    row = counted.agg(F.percentile("_v", CDF_POINTS, F.col("_n"))).first()
    if row is None or row[0] is None:
        return []
    return list(zip(row[0], CDF_POINTS, strict=True))


def spark_cdfs(spark: SparkSession, cfg: SparkConfig, trace_id: str) -> dict[str, list[tuple[float, float]]]:
    """The report's distributions in Spark SQL (the definition; libs.transforms.report_files reads the files
    in one pass instead): request size, per-device interarrival time, response time."""
    requests = read_table(spark, cfg.warehouse, "requests", trace_id)
    gaps = chunked_lag(requests.select("device", "seq", "ts_us"), keys=["device"], chunk_us=60_000_000,
                       cols=["ts_us"]).select((F.col("ts_us") - F.col("prev_ts_us")).alias("interarrival_us"))
    return {"size_bytes": _cdf(requests, "size_bytes", rounded=False),
            "interarrival_us": _cdf(gaps, "interarrival_us", rounded=True),
            "response_us": _cdf(requests, "response_us", rounded=True)}


def report_dir(cfg: SparkConfig, trace_id: str, out_dir: str | None = None) -> str:
    """Where the report goes: out_dir (a local directory or a URI), else <warehouse>/reports/<trace_id> on the
    warehouse's file system (a local directory or an object-store prefix)."""
    if out_dir:
        return storage.normalize(out_dir)
    return storage.join(storage.normalize(cfg.warehouse), "reports", trace_id)


def run(spark: SparkSession, cfg: SparkConfig, trace_id: str, *, out_dir: str | None = None,
        eval_ks: Sequence[int] = KS, eval_spec: StepSpec = DEFAULT_SPEC) -> Path | str:
    """Writes report.html (figures embedded) and the PNG files to report_dir(); returns the HTML page's location
    (a Path when local, else its URI). eval_ks / eval_spec: the tracking evaluation's k values and generated
    traces, when it must run."""
    trace = trace_info(spark, cfg.warehouse, trace_id)
    _ensure_inputs(spark, cfg, trace_id, eval_ks, eval_spec)
    log.info("report: gathering figures for %s", trace_id)
    heat_map, bins = _heat_map(spark, cfg, trace_id)
    disk_rows = read_table(spark, cfg.warehouse, "disk_heat", trace_id).where(F.col("window_us") == WINDOW_US)
    disk_heat = {layout: [r.asDict() for r in disk_rows.where(F.col("layout") == layout)
                          .select("window_start_us", "disk", "heat").collect()]
                 for layout in ("as-traced", "striped")}
    params = disk_rows.where(F.col("layout") == "striped").select("layout_params").first()
    if params:
        disk_heat[f"striped ({params[0]})"] = disk_heat.pop("striped")
    cdfs = files_or_sql(lambda: report_cdfs(spark, cfg.warehouse, trace_id, CDF_POINTS),
                        lambda: spark_cdfs(spark, cfg, trace_id), f"report {trace_id}: distributions")
    tracking = [r.asDict() for r in read_table(spark, cfg.warehouse, "tracking_eval", trace_id)
                .where(F.col("extent_bytes") == EXTENT_BYTES).orderBy("k").collect()]
    profile = [r.asDict() for r in read_table(spark, cfg.warehouse, "trace_profile", trace_id)
               .where(F.col("window_us") == 0).select("scope", "device", "metric", "value").collect()]
    inputs = ReportInputs(
        trace=trace, heat_map=heat_map, heat_map_bins=bins, disk_heat=disk_heat, cdfs=cdfs, tracking=tracking,
        claims=paper_claims(tracking), profile=profile,
        notes=["Heat = 512-byte blocks accessed per second; temperature = heat per block of extent size.",
               "Interarrival CDF: per device. Percentiles of continuous values are computed on values "
               "rounded to 4 significant digits."])
    page, figures = render(inputs)
    return write_report(report_dir(cfg, trace_id, out_dir), page, figures)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point."""
    parser = argparse.ArgumentParser(prog="heat_report", description=__doc__)
    parser.add_argument("trace_id")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    cfg = SparkConfig.from_env("heat_report")
    run(build_session(cfg), cfg, args.trace_id, out_dir=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
