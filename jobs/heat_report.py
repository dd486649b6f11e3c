"""Spark application: the HTML report of one trace (summary, load over time, disk heat per layout, heat map,
distributions per device, scorecard and latest plan, profile, tracking accuracy).

Runs the heat, profile and tracking-evaluation jobs first when their tables lack the trace, then
gathers small binned inputs (never trace-sized data: windows, bins, percentiles, policies) and renders them with
libs.report. The distributions come from the requests files in one pass and the heat map from the extent_heat
files (libs.table_io.report), through Spark SQL when the files cannot be read directly; the other tables' rows
from their files (libs.io.tables.trace_arrow). The scorecard and the plan are shown when they exist.
"""
from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
from pyspark.sql import functions as F

# The report runs these stages itself when their tables lack the trace (_ensure_inputs): job to job on purpose.
from blockheat.jobs import extent_heat as heat_job
from blockheat.jobs import heat_tracking as tracking_job
from blockheat.jobs import trace_profile as profile_job
from blockheat.libs.columns import idiv
from blockheat.libs.io import storage
from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.io.tables import has_rows, read_table, table_exists, trace_arrow, trace_info, trace_rows
from blockheat.libs.report import ReportInputs, render, write_report
from blockheat.libs.table_io.device_pass import files_or_sql
from blockheat.libs.table_io.report import (
    ALL_OPS,
    METRICS,
    PER_OP,
    Cdfs,
    forget_state,
    heat_map_bins,
    heat_map_files,
    report_cdfs,
)
from blockheat.libs.transforms.profile import chunked_lag, round_significant
from blockheat.libs.transforms.tracking_eval import DEFAULT_SPEC, KS, StepSpec, report_claims

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
EXTENT_BYTES = 1 << 20
WINDOW_US = 3_600_000_000
MAX_BINS = (400, 512)  # heat-map resolution at most: time bins x address bins (address bins of the extent size when
#                        a device's touched range fits, else a whole number of extents)
CDF_POINTS = [i / 200 for i in range(201)]


def _ensure_inputs(spark: SparkSession, cfg: SparkConfig, trace_id: str, eval_ks: Sequence[int],
                   eval_spec: StepSpec) -> None:
    def lacks(table: str, **equal: int) -> bool:
        return not has_rows(spark, cfg.warehouse, table, trace_id, equal)

    if lacks("extent_heat", extent_bytes=EXTENT_BYTES, window_us=WINDOW_US) or lacks("disk_heat", window_us=WINDOW_US):
        heat_job.run(spark, cfg, heat_job.HeatConfig(trace_id, EXTENT_BYTES, WINDOW_US))
    if lacks("trace_profile"):
        profile_job.run(spark, cfg, trace_id)
    if lacks("tracking_eval", extent_bytes=EXTENT_BYTES):
        tracking_job.run_eval(spark, cfg, trace_id, extent_bytes=EXTENT_BYTES, ks=eval_ks, spec=eval_spec)


def _heat_map(spark: SparkSession, cfg: SparkConfig, trace_id: str) -> tuple[pa.Table, tuple[int, int]]:
    """The heat map's bins from the `extent_heat` files (libs.table_io.report.heat_map_files), else through Spark SQL
    (spark_heat_map)."""
    return files_or_sql(lambda: heat_map_files(cfg.warehouse, trace_id, window_us=WINDOW_US, extent_bytes=EXTENT_BYTES,
                                               max_bins=MAX_BINS),
                        lambda: spark_heat_map(spark, cfg, trace_id), f"report {trace_id}: heat map")


def spark_heat_map(spark: SparkSession, cfg: SparkConfig, trace_id: str) -> tuple[pa.Table, tuple[int, int]]:
    """The heat map's bins (heat_map_files's rows, in no order) through Spark SQL."""
    heat = read_table(spark, cfg.warehouse, "extent_heat", trace_id).where(
        (F.col("extent_bytes") == EXTENT_BYTES) & (F.col("window_us") == WINDOW_US))
    extent = heat.agg(F.max("window_start_us"), F.max("extent_id")).first()
    time_bin, addr_bin = heat_map_bins(extent[0], extent[1], window_us=WINDOW_US, extent_bytes=EXTENT_BYTES,
                                       max_bins=MAX_BINS)
    binned = heat.groupBy("device", (idiv(F.col("window_start_us"), time_bin) * time_bin).alias("time_bin_us"),
                          (idiv(F.col("extent_id") * EXTENT_BYTES, addr_bin) * addr_bin).alias("addr_bin_bytes")) \
        .agg((F.sum("blocks") / F.lit(time_bin / 1e6)).alias("heat"))
    return binned.toArrow(), (time_bin, addr_bin)


def _cdf(values: DataFrame, column: str, *, rounded: bool) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Per (device, op) of `values`: [(value at p, p) for p in CDF_POINTS] over the non-null values of `column`."""
    v = round_significant(F.col(column)) if rounded else F.col(column).cast("double")
    counted = values.where(F.col(column).isNotNull()).groupBy("device", "op", v.alias("_v")) \
        .agg(F.count(F.lit(1)).alias("_n"))
    rows = counted.groupBy("device", "op").agg(F.percentile("_v", CDF_POINTS, F.col("_n")).alias("_p")).collect()
    return {(r["device"], r["op"]): list(zip(r["_p"], CDF_POINTS, strict=True))
            for r in sorted(rows, key=lambda r: (r["device"], r["op"]))}


def spark_cdfs(spark: SparkSession, cfg: SparkConfig, trace_id: str) -> Cdfs:
    """The report's distributions in Spark SQL (the definition; libs.table_io.report reads the files
    in one pass instead): per device, request size and response time of reads and writes apart, interarrival
    time of all the device's requests (op ALL_OPS)."""
    forget_state(cfg.warehouse, trace_id)            # the stored counts are not brought up to date here
    requests = read_table(spark, cfg.warehouse, "requests", trace_id)
    gaps = chunked_lag(requests.select("device", "seq", "ts_us"), keys=["device"], chunk_us=60_000_000,
                       cols=["ts_us"]).select("device", F.lit(ALL_OPS).alias("op"),
                                              (F.col("ts_us") - F.col("prev_ts_us")).alias("interarrival_us"))
    frames = {"interarrival_us": gaps} | dict.fromkeys(PER_OP, requests)
    return {m: _cdf(frames[m], m, rounded=m != "size_bytes") for m in METRICS}


def _rates(spark: SparkSession, cfg: SparkConfig, trace_id: str) -> tuple[list[dict[str, Any]], int]:
    """Per device and window of the profile's windowed rows (the shortest window there): requests, bytes_read,
    bytes_written; and the window's length in us (0: no windowed rows)."""
    device = trace_arrow(spark, cfg.warehouse, "trace_profile", trace_id,
                         ["device", "window_us", "window_start_us", "metric", "value"], {"scope": "device"})
    windowed = device.filter(pc.field("window_us") > 0)
    if not windowed.num_rows:
        return [], 0
    window = pc.min(windowed.column("window_us")).as_py()
    metrics = ["requests", "bytes_read", "bytes_written"]
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for r in windowed.filter((pc.field("window_us") == window) & pc.field("metric").isin(metrics)).to_pylist():
        row = rows.setdefault((r["device"], r["window_start_us"]), {"device": r["device"],
                                                                    "window_start_us": r["window_start_us"],
                                                                    **dict.fromkeys(metrics)})
        if row[r["metric"]] is None:            # one row per metric; the first, as Spark's pivot takes it
            row[r["metric"]] = r["value"]
    return list(rows.values()), int(window)


def scores_and_plan(spark: SparkSession, cfg: SparkConfig, trace_id: str) -> tuple[
        list[dict[str, Any]], dict[str, Any] | None, list[dict[str, Any]]]:
    """The scorecard of one window (the latest plan's, else the whole trace "all", else the window that ends
    last), the latest plan's row (every column the table has) and its steps summed per (step_type, source_device,
    dest_device): steps, extents, bytes. Empty when the tables or the trace's rows are missing."""
    plans = trace_rows(spark, cfg.warehouse, "reorg_plans", trace_id) if table_exists(cfg.warehouse,
                                                                                      "reorg_plans") else []
    plan = max(plans, key=lambda r: (r["created_at"], r["plan_id"])) if plans else None
    scores = trace_rows(spark, cfg.warehouse, "policy_scores", trace_id) if table_exists(cfg.warehouse,
                                                                                         "policy_scores") else []
    windows = {r["window_id"]: r["window_end_us"] for r in scores}
    window = (plan["window_id"] if plan and plan["window_id"] in windows else
              "all" if "all" in windows else max(windows, key=lambda w: (windows[w], w), default=None))
    steps: list[dict[str, Any]] = []
    if plan and table_exists(cfg.warehouse, "reorg_plan_steps"):
        steps = [r.asDict() for r in read_table(spark, cfg.warehouse, "reorg_plan_steps", trace_id)
                 .where(F.col("plan_id") == plan["plan_id"])
                 .groupBy("step_type", "source_device", "dest_device")
                 .agg(F.count(F.lit(1)).alias("steps"), F.count_distinct("extent").alias("extents"),
                      F.sum("bytes").alias("bytes")).collect()]
    return [r for r in scores if r["window_id"] == window], plan, steps


def report_dir(cfg: SparkConfig, trace_id: str, out_dir: str | None = None) -> str:
    """Where the report goes: out_dir (a local directory or a URI), else <warehouse>/reports/<trace_id> on the
    warehouse's file system (a local directory or an object-store prefix)."""
    if out_dir:
        return storage.normalize(out_dir)
    return storage.join(storage.normalize(cfg.warehouse), "reports", trace_id)


def run(spark: SparkSession, cfg: SparkConfig, trace_id: str, *, out_dir: str | None = None,
        eval_ks: Sequence[int] = KS, eval_spec: StepSpec = DEFAULT_SPEC, full: bool = False) -> Path | str:
    """Writes report.html (figures embedded) and the PNG files to report_dir(); returns the HTML page's location
    (a Path when local, else its URI). eval_ks / eval_spec: the tracking evaluation's k values and generated
    traces, when it must run. The distributions come from stored counts and the requests an append added
    (full: from every request)."""
    trace = trace_info(spark, cfg.warehouse, trace_id)
    _ensure_inputs(spark, cfg, trace_id, eval_ks, eval_spec)
    log.info("report: gathering figures for %s", trace_id)
    heat_map, bins = _heat_map(spark, cfg, trace_id)
    wh = cfg.warehouse
    disk_heat = trace_arrow(spark, wh, "disk_heat", trace_id, ["layout", "layout_params", "window_start_us",
                                                              "window_us", "disk", "requests", "heat",
                                                              "max_over_mean"]) \
        .filter(pc.field("window_us").isin([0, WINDOW_US])).to_pylist()
    hottest = trace_arrow(spark, wh, "extent_heat", trace_id, where={"extent_bytes": EXTENT_BYTES, "window_us": 0}) \
        .sort_by([("heat", "descending"), ("device", "ascending"), ("extent_id", "ascending")]) \
        .slice(0, 5).to_pylist()                   # nulls last (pyarrow's default), as Spark's desc("heat")
    rates, rate_window = _rates(spark, cfg, trace_id)
    cdfs = files_or_sql(lambda: report_cdfs(spark, wh, trace_id, CDF_POINTS, full=full),
                        lambda: spark_cdfs(spark, cfg, trace_id), f"report {trace_id}: distributions")
    tracking = sorted(trace_arrow(spark, wh, "tracking_eval", trace_id, where={"extent_bytes": EXTENT_BYTES})
                      .to_pylist(), key=lambda r: r["k"])
    profile = trace_arrow(spark, wh, "trace_profile", trace_id, ["scope", "device", "metric", "value"],
                          {"window_us": 0}).to_pylist()
    scores, plan, steps = scores_and_plan(spark, cfg, trace_id)
    inputs = ReportInputs(
        trace=trace, heat_map=heat_map, heat_map_bins=bins, disk_heat=disk_heat, rates=rates,
        rate_window_us=rate_window, cdfs=cdfs, tracking=tracking, claims=report_claims(tracking), profile=profile,
        extent_bytes=EXTENT_BYTES, hottest_extents=hottest, scores=scores, plan=plan, plan_steps=steps,
        notes=["Heat = 512-byte blocks accessed per second; temperature = heat per block of extent size "
               f"({EXTENT_BYTES // 2**20} MiB extents).",
               "Percentiles of continuous values (response, interarrival and idle times) are computed on values "
               "rounded to 4 significant digits."])
    page, figures = render(inputs)
    return write_report(report_dir(cfg, trace_id, out_dir), page, figures)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point."""
    parser = argparse.ArgumentParser(prog="heat_report", description=__doc__)
    parser.add_argument("trace_id")
    parser.add_argument("--out")
    parser.add_argument("--full", action="store_true", help="count the distributions over every request again")
    args = parser.parse_args(argv)
    cfg = SparkConfig.from_env("heat_report")
    run(build_session(cfg), cfg, args.trace_id, out_dir=args.out, full=args.full)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
