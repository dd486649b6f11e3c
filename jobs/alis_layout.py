"""Spark application: the ALIS reorganized-area layout of one trace (`alis_layout`, `alis_summary`,
and `alis_runs` for the run threshold of the chosen mode).

For every interval N, the plan built from the history up to N (aged reference counts, the aged
access graph of N and its runs) is scored on the reads of N + 1 ("realizable"), against the same
plan built from interval N + 1 itself, its raw counts and unaged graph ("lookahead").
"""
from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from blockheat.libs.alis.graph import (
    budget_bytes,
    build_edge_counts,
    graph_refs,
    partitions_for,
    prune_to_budget,
    with_weight,
)
from blockheat.libs.alis.layout import (
    area_hits,
    interval_counts,
    plan_layouts,
    reorganized_area,
)
from blockheat.libs.alis.runs import find_runs
from blockheat.libs.alis.units import storage_used, unit_refs
from blockheat.libs.io.connect import parallelism
from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.io.tables import read_table, replace_trace
from blockheat.libs.table_io import alis_layout as layout_files
from blockheat.libs.table_io.alis_graph import graph_params
from blockheat.libs.table_io.alis_runs import find_stored_runs
from blockheat.libs.table_io.device_pass import files_or_sql
from blockheat.libs.transforms.aging import age_values
from blockheat.schemas import alis_layout, alis_runs, alis_summary, reorg_units, requests
from blockheat.sim import ALIS_LAYOUTS as LAYOUTS
from blockheat.sim import ALIS_MODES as MODES
from blockheat.sim import ALIS_THRESHOLD as THRESHOLD
from blockheat.sim import ALIS_THRESHOLD_COMBINED as THRESHOLD_COMBINED
from blockheat.sim import check_alis_plan as check_plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LayoutOptions:
    """Parameters of `blockheat alis` (defaults: the paper's combined heat and run clustering)."""

    trace_id: str
    mode: str = "combined"
    layout: str = "sequential"
    ra_share: float = 0.15
    ra_offset: float = 0.30
    extent_bytes: int = 1 << 30      # packed-extents layout
    alpha: float = 0.8               # reference-count age factor
    heat_writes: bool = True         # the paper counts writes in heat clustering (section 6.3)
    threshold: float | None = None   # None: 0.1 for run, 0.4 for combined

    def __post_init__(self) -> None:
        check_plan(self.mode, self.layout, self.extent_bytes)
        if not 0.0 < self.ra_share <= 1.0:
            raise ValueError(f"ra_share must be in (0, 1], got {self.ra_share}")
        if not 0.0 <= self.ra_offset <= 1.0:
            raise ValueError(f"ra_offset must be in [0, 1], got {self.ra_offset}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")

    @property
    def run_threshold(self) -> float:
        if self.threshold is not None:
            return self.threshold
        return THRESHOLD_COMBINED if self.mode == "combined" else THRESHOLD


def aged_heat(counts: DataFrame, *, last: int, alpha: float) -> DataFrame:
    """ALIS eq. 1 chained over intervals 0..last: device, interval_id, unit_id, heat."""
    keys = ("device", "unit_id")
    previous, aged = None, []
    for interval_id in range(last + 1):
        current = counts.where(F.col("interval_id") == interval_id).select(*keys, "count")
        step = age_values(current, previous, keys=keys, value="count", alpha=alpha).localCheckpoint()
        aged.append(step.select("device", F.lit(interval_id).cast("long").alias("interval_id"), "unit_id",
                                F.col("count").alias("heat")))
        previous = step
    return reduce(lambda a, b: a.unionByName(b), aged)


def run(spark: SparkSession, cfg: SparkConfig, opts: LayoutOptions) -> list[dict[str, Any]]:
    """Plan, score and write; returns the alis_summary rows."""
    trace = opts.trace_id
    params = graph_params(spark, cfg.warehouse, trace)
    if int(params["unit_bytes"]):                  # fixed-size units: the Spark transforms alone
        return _run_sql(spark, cfg, opts, params)
    return files_or_sql(lambda: _run_files(spark, cfg, opts, params), lambda: _run_sql(spark, cfg, opts, params),
                        f"alis {trace}")


def _run_sql(spark: SparkSession, cfg: SparkConfig, opts: LayoutOptions, params: dict[str, Any]
             ) -> list[dict[str, Any]]:
    """run through the Spark transforms (libs.alis)."""
    trace = opts.trace_id
    tau, f, last = int(params["tau"]), float(params["f"]), int(params["intervals"]) - 1
    reqs = read_table(spark, cfg.warehouse, requests.TABLE, trace)
    n_requests = reqs.count()
    units = read_table(spark, cfg.warehouse, reorg_units.TABLE, trace)
    refs = unit_refs(reqs, units, unit_bytes=int(params["unit_bytes"]),
                     interval_us=int(params["interval_us"])).localCheckpoint()
    storage = storage_used(reqs)
    area = reorganized_area(storage, ra_share=opts.ra_share, ra_offset=opts.ra_offset).localCheckpoint()
    reads = refs.where(F.col("op") == "R")
    counts = interval_counts(refs if opts.heat_writes else reads).localCheckpoint()
    use_runs = opts.mode != "heat"
    threshold = opts.run_threshold

    log.info("alis %s: realizable plans (history up to each interval)", trace)
    heat = aged_heat(counts, last=last, alpha=opts.alpha)
    runs = None
    if use_runs:
        runs = find_stored_runs(spark, cfg.warehouse, trace, tau=tau, f=f, threshold=threshold,
                                min_length=int(params["min_run_length"])).localCheckpoint()
    plan = plan_layouts(runs, heat, units, area, mode=opts.mode, layout=opts.layout,
                        extent_bytes=opts.extent_bytes).localCheckpoint()

    realizable = area_hits(plan, reads, shift=1).select(
        "device", "interval_id", F.col("reads").alias("next_reads"), F.col("hits").alias("realizable_reads"))
    # Interval N's lookahead plan scores the row of N - 1: interval 0's would score none, so the lookahead
    # starts at interval 1 (a one-interval trace has none; its only row is not evaluated either).
    lookahead = None
    if last >= 1:
        log.info("alis %s: lookahead plans (each interval's own references, intervals 1..%d)", trace, last)
        later = F.col("interval_id") >= 1
        la_runs = None
        if use_runs:
            chosen = graph_refs(refs.where(later), include_writes=bool(params["include_writes"]),
                                prefilter_min_refs=int(params["prefilter_min_refs"]))
            tasks = partitions_for(n_requests, cores=parallelism(spark))
            raw = with_weight(build_edge_counts(chosen, tau=tau, chunk_us=int(params["chunk_us"]), partitions=tasks),
                              tau=tau, f=f)
            pruned = prune_to_budget(raw, budget_bytes(storage, share=float(params["graph_share"])))
            la_runs = find_runs(pruned, tau=tau, f=f, threshold=threshold, min_length=int(params["min_run_length"]))
        la_plan = plan_layouts(la_runs, counts.where(later).withColumnRenamed("count", "heat"), units, area,
                               mode=opts.mode, layout=opts.layout, extent_bytes=opts.extent_bytes)
        lookahead = area_hits(la_plan, reads, shift=0).select(
            "device", (F.col("interval_id") - 1).alias("interval_id"), F.col("hits").alias("lookahead_reads"))
    summary = _summary(spark, trace, opts, plan, area, realizable, lookahead, last).localCheckpoint()

    replace_trace(plan, spark, cfg.warehouse, alis_layout.TABLE, trace)
    if runs is not None:
        replace_trace(runs, spark, cfg.warehouse, alis_runs.TABLE, trace)
    replace_trace(summary, spark, cfg.warehouse, alis_summary.TABLE, trace)
    return [r.asDict() for r in summary.orderBy("device", "interval_id").collect()]


def _run_files(spark: SparkSession, cfg: SparkConfig, opts: LayoutOptions, params: dict[str, Any]
               ) -> list[dict[str, Any]]:
    """run by one task per device reading the table files (libs.table_io.alis_layout)."""
    log.info("alis %s: plans and scores of every interval, one task per device", opts.trace_id)
    p = layout_files.LayoutParams(
        interval_us=int(params["interval_us"]), last=int(params["intervals"]) - 1, tau=int(params["tau"]),
        f=float(params["f"]), min_length=int(params["min_run_length"]), include_writes=bool(params["include_writes"]),
        prefilter_min_refs=int(params["prefilter_min_refs"]), graph_share=float(params["graph_share"]),
        threshold=opts.run_threshold, mode=opts.mode, layout=opts.layout, extent_bytes=opts.extent_bytes,
        ra_share=opts.ra_share, ra_offset=opts.ra_offset, alpha=opts.alpha, heat_writes=opts.heat_writes)
    return layout_files.layout(spark, cfg.warehouse, opts.trace_id, p)


def _summary(spark: SparkSession, trace: str, opts: LayoutOptions, plan: DataFrame, area: DataFrame,
             realizable: DataFrame, lookahead: DataFrame | None, last: int) -> DataFrame:
    grid = area.crossJoin(spark.range(last + 1).withColumnRenamed("id", "interval_id"))
    placed = plan.groupBy("device", "interval_id").agg(
        F.countDistinct(F.when(F.col("region") == "run", F.col("run_id"))).alias("runs_placed"),
        F.count_if(F.col("region") == "run").alias("run_copies"),
        F.count_if(F.col("region") == "heat").alias("heat_copies"),
        F.sum("size_bytes").alias("bytes_placed"))
    keys = ["device", "interval_id"]
    rows = grid.join(placed, on=keys, how="left").join(realizable, on=keys, how="left")
    rows = (rows.join(lookahead, on=keys, how="left") if lookahead is not None
            else rows.withColumn("lookahead_reads", F.lit(None).cast("long")))
    evaluated = F.col("interval_id") < last
    next_reads = F.when(evaluated, F.coalesce("next_reads", F.lit(0)))
    share = lambda hits: F.when(next_reads > 0, F.coalesce(hits, F.lit(0)) / next_reads)  # noqa: E731
    return rows.select(
        F.lit(trace).alias("trace_id"), "device", "interval_id", F.lit(opts.mode).alias("mode"),
        F.lit(opts.layout).alias("layout"), "storage_used_bytes", "ra_start_bytes", "ra_bytes",
        *[F.coalesce(c, F.lit(0)).cast("long").alias(c) for c in ("runs_placed", "run_copies", "heat_copies",
                                                                   "bytes_placed")],
        next_reads.cast("long").alias("next_reads"),
        F.when(evaluated, F.coalesce("realizable_reads", F.lit(0))).cast("long").alias("realizable_reads"),
        F.when(evaluated, F.coalesce("lookahead_reads", F.lit(0))).cast("long").alias("lookahead_reads"),
        share(F.col("realizable_reads")).alias("realizable_share"),
        share(F.col("lookahead_reads")).alias("lookahead_share"),
    ).select(*alis_summary.COLUMNS)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of this job and of `blockheat alis`."""
    parser.add_argument("trace_id", metavar="TRACE_ID", help="a trace with ALIS graphs (blockheat graph TRACE_ID)")
    parser.add_argument("--ra-share", type=float, default=0.15,
                        help="reorganized area size, share of the storage used (default 0.15)")
    parser.add_argument("--ra-offset", type=float, default=0.30,
                        help="reorganized area start, share of the storage used (default 0.30)")
    parser.add_argument("--layout", choices=LAYOUTS, default="sequential", help="heat-region layout")
    parser.add_argument("--mode", choices=MODES, default="combined", help="what fills the area (default combined)")
    parser.add_argument("--extent-bytes", type=int, default=1 << 30, help="packed-extents extent size (default 1 GiB)")
    parser.add_argument("--alpha", type=float, default=0.8, help="reference-count age factor (default 0.8)")
    parser.add_argument("--heat-reads-only", action="store_true", help="count only reads for heat (default: all)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="run edge-weight threshold (default 0.1, or 0.4 with --mode combined)")
    return parser


def options_from_args(args: argparse.Namespace) -> LayoutOptions:
    """Parsed add_arguments options -> LayoutOptions (bad values: ValueError naming the value)."""
    return LayoutOptions(args.trace_id, mode=args.mode, layout=args.layout, ra_share=args.ra_share,
                         ra_offset=args.ra_offset, extent_bytes=args.extent_bytes, alpha=args.alpha,
                         heat_writes=not args.heat_reads_only, threshold=args.threshold)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point."""
    opts = options_from_args(add_arguments(argparse.ArgumentParser(prog="alis_layout", description=__doc__))
                             .parse_args(argv))
    cfg = SparkConfig.from_env("alis_layout")
    run(build_session(cfg), cfg, opts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
