"""Trace profile: the numbers storage engineers look at first, per trace and device, whole and per window.

Output is long-format schemas.trace_profile rows (scope, device, window, metric, value). Ordered
metrics (sequentiality, seek distance, interarrival, runs) follow each device's request order
(ts_us, seq); the trace scope's interarrival and idle times use all devices' requests merged.
Order-dependent columns are computed per time chunk and stitched at chunk edges through small
per-chunk tables, so one device's requests never have to fit in one task.

Definitions (where the literature varies):
- sequential: a request starting at the byte where the previous request on the same device ended;
  a run is a maximal sequence of such requests plus the one that starts it (run length >= 1), and
  belongs to the window of its first request;
- seek distance: |offset - end of the previous request on the device| in bytes;
- idle period: a gap between consecutive arrivals longer than the threshold (10 ms, 1 s, 1 min);
  traces do not all carry completions, so arrival gaps are used for every format;
- burstiness: peak-to-mean of request counts in 1 s and 1 min bins and their index of dispersion
  (variance / mean), empty bins included, over the scope's duration;
- footprint: distinct 4 KiB blocks touched (per device); reuse time: time since the previous access
  to the same 4 KiB block, for accesses that re-reference a block;
- skew: accesses (requests touching) per extent, share of the hottest 1/10/20% of touched extents,
  and the exponent theta of FIVE eq. 26 (share of accesses to the hottest fraction s of extents
  = s ** theta) fitted by least squares in log-log space, reported as the X/Y rule with
  X + Y = 100 ("X% of accesses go to Y% of extents");
- percentiles of continuous values are exact over values rounded to 4 significant digits
  (Spark's `percentile` with frequencies), which bounds memory per group; sizes are not rounded.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from libs.transforms.columns import idiv, to_schema
from schemas import trace_profile as TP

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

PERCENTILES = (0.5, 0.9, 0.99)
IDLE_THRESHOLDS_US = {"10ms": 10_000, "1s": 1_000_000, "1min": 60_000_000}
BURST_BINS_US = {"1s": 1_000_000, "1min": 60_000_000}
SKEW_SHARES = {"1pct": 0.01, "10pct": 0.10, "20pct": 0.20}
FOOTPRINT_BLOCK = 4096
GROUP = ("scope", "device", "window_start_us", "window_us")
ORDER = ("ts_us", "seq")


def round_significant(value: Column) -> Column:
    """Round to 4 significant digits (exact for values below 10,000)."""
    digits = F.floor(F.log10(F.abs(value)))
    step = F.pow(F.lit(10.0), F.greatest(digits - 3, F.lit(0.0)))
    return F.when(value == 0, F.lit(0.0)).otherwise(F.round(value / step) * step)


def chunked_lag(df: DataFrame, *, keys: Sequence[str], chunk_us: int, cols: Sequence[str],
                prefix: str = "prev_") -> DataFrame:
    """Adds prefix+col = the value of the previous row in (keys; ts_us, seq) order.

    Rows are ordered inside (keys, ts_us // chunk_us) windows; the first row of a chunk takes the
    last row of the nearest earlier non-empty chunk from a per-chunk table (one row per chunk).
    """
    df = df.withColumn("_chunk", idiv(F.col("ts_us"), chunk_us))
    inner = Window.partitionBy(*keys, "_chunk").orderBy(*ORDER)
    lagged = df.select("*", (F.row_number().over(inner) == 1).alias("_first"),
                       *[F.lag(c).over(inner).alias(f"_lag_{c}") for c in cols])
    edges = df.groupBy(*keys, "_chunk").agg(F.max_by(F.struct(*cols), F.struct(*ORDER)).alias("_last"))
    # The per-chunk table is small (one row per chunk), so a window over all of it is cheap.
    across = Window.partitionBy(*keys).orderBy("_chunk") if keys else Window.partitionBy(F.lit(0)).orderBy("_chunk")
    edges = edges.select(*keys, "_chunk", F.lag("_last").over(across).alias("_edge"))
    joined = lagged.join(F.broadcast(edges), on=[*keys, "_chunk"], how="left")
    return joined.select(
        *df.columns,
        *[F.when(F.col("_first"), F.col(f"_edge.{c}")).otherwise(F.col(f"_lag_{c}")).alias(prefix + c) for c in cols],
    ).drop("_chunk")


def chunked_cumsum(df: DataFrame, *, keys: Sequence[str], chunk_us: int, col: str, out: str) -> DataFrame:
    """Adds `out` = running sum of `col` in (keys; ts_us, seq) order, current row included."""
    df = df.withColumn("_chunk", idiv(F.col("ts_us"), chunk_us))
    inner = Window.partitionBy(*keys, "_chunk").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding,
                                                                            Window.currentRow)
    totals = df.groupBy(*keys, "_chunk").agg(F.sum(col).alias("_total"))
    before = Window.partitionBy(*keys).orderBy("_chunk").rowsBetween(Window.unboundedPreceding, -1)
    totals = totals.select(*keys, "_chunk", F.coalesce(F.sum("_total").over(before), F.lit(0)).alias("_offset"))
    return (df.select("*", F.sum(col).over(inner).alias("_in_chunk"))
            .join(F.broadcast(totals), on=[*keys, "_chunk"], how="left")
            .withColumn(out, F.col("_in_chunk") + F.col("_offset"))
            .drop("_chunk", "_in_chunk", "_offset"))


def _expand(df: DataFrame, window_us: int, keep: Sequence[str]) -> DataFrame:
    """Each row once per group it belongs to: trace and device scope, the whole trace and its window.

    Output: GROUP columns, `dev` (the row's own device) and the `keep` columns.
    """
    window_start = (idiv(F.col("ts_us"), window_us) * window_us) if window_us else None
    spans = [(F.lit(0).cast("long"), 0)] + ([(window_start, window_us)] if window_start is not None else [])
    groups = F.array(*[
        F.struct(F.lit(scope).alias("scope"), dev.alias("device"), start.alias("window_start_us"),
                 F.lit(w).cast("long").alias("window_us"))
        for scope, dev in (("trace", F.lit("*")), ("device", F.col("device")))
        for start, w in spans
    ])
    return df.select(F.col("device").alias("dev"), *keep, F.explode(groups).alias("_g")).select(
        "_g.*", "dev", *keep)


def _long(df: DataFrame, metrics: dict[str, Column]) -> DataFrame:
    """Wide (GROUP + metric columns) -> long rows, one per metric."""
    wide = df.select(*GROUP, *[v.cast("double").alias(k) for k, v in metrics.items()])
    stacked = F.explode(F.array(*[F.struct(F.lit(k).alias("metric"), F.col(k).alias("value")) for k in metrics]))
    return wide.select(*GROUP, stacked.alias("_m")).select(*GROUP, "_m.metric", "_m.value")


def _percentile_rows(values: DataFrame, value: str, name: str, *, rounded: bool = True,
                     ps: Sequence[float] = PERCENTILES) -> DataFrame:
    """Exact percentiles (and mean, max) of `value` per group from (value, frequency) pairs."""
    v = round_significant(F.col(value)) if rounded else F.col(value).cast("double")
    counted = values.groupBy(*GROUP, v.alias("_v")).agg(F.count(F.lit(1)).alias("_n"),
                                                         F.sum(value).alias("_sum"), F.max(value).alias("_max"))
    agg = counted.groupBy(*GROUP).agg(
        F.percentile("_v", list(ps), F.col("_n")).alias("_p"),
        (F.sum("_sum") / F.sum("_n")).alias("_mean"), F.max("_max").alias("_max"))
    metrics = {f"{name}_p{round(p * 100):g}": F.col("_p")[i] for i, p in enumerate(ps)}
    metrics |= {f"{name}_mean": F.col("_mean"), f"{name}_max": F.col("_max")}
    return _long(agg, metrics)


def compute_trace_profile(requests: DataFrame, *, span_us: int, window_us: int = 3_600_000_000,
                          extent_bytes: int = 1 << 20, chunk_us: int = 60_000_000) -> DataFrame:
    """The profile of one trace. Input: `requests` rows; span_us the trace's span (traces.span_us).
    Output: exactly schemas.trace_profile.COLUMNS, trace_id left for libs.tables.replace_rows.

        profile = compute_trace_profile(spark.table("requests").where("trace_id = 'x'"), span_us=span)
    """
    if window_us < 0 or chunk_us <= 0 or extent_bytes <= 0:
        raise ValueError(f"window_us >= 0, chunk_us > 0, extent_bytes > 0 required, got "
                         f"{window_us}, {chunk_us}, {extent_bytes}")
    base = requests.select("device", "seq", "ts_us", "op", "offset_bytes", "size_bytes",
                           (F.col("offset_bytes") + F.col("size_bytes")).alias("end_bytes"))
    # Previous request on the same device, and in the merged trace (for trace-scope gaps).
    ordered = chunked_lag(base, keys=["device"], chunk_us=chunk_us, cols=["ts_us", "end_bytes"])
    ordered = chunked_lag(ordered, keys=[], chunk_us=chunk_us, cols=["ts_us"], prefix="all_prev_")
    ordered = ordered.select(
        "*",
        (F.col("offset_bytes") == F.col("prev_end_bytes")).alias("is_seq"),
        F.abs(F.col("offset_bytes") - F.col("prev_end_bytes")).alias("seek_bytes"),
        (F.col("ts_us") - F.col("prev_ts_us")).alias("gap_device"),
        (F.col("ts_us") - F.col("all_prev_ts_us")).alias("gap_trace"),
    ).withColumn("run_start", F.when(F.coalesce(F.col("is_seq"), F.lit(False)), 0).otherwise(1))
    ordered = chunked_cumsum(ordered, keys=["device"], chunk_us=chunk_us, col="run_start", out="run_id")
    ordered = ordered.persist()

    duration_s = F.when(F.col("window_us") > 0, F.col("window_us")).otherwise(F.lit(span_us)) / 1e6
    keep = ["ts_us", "op", "size_bytes", "is_seq", "seek_bytes", "run_start", "gap_device", "gap_trace"]
    expanded = _expand(ordered, window_us, keep).withColumn(
        "gap_us", F.when(F.col("scope") == "trace", F.col("gap_trace")).otherwise(F.col("gap_device")))

    is_read = F.col("op") == "R"
    counts = expanded.groupBy(*GROUP).agg(
        F.count(F.lit(1)).alias("requests"), F.count_if(is_read).alias("reads"),
        F.count_if(~is_read).alias("writes"),
        F.sum(F.when(is_read, F.col("size_bytes")).otherwise(0)).alias("bytes_read"),
        F.sum(F.when(~is_read, F.col("size_bytes")).otherwise(0)).alias("bytes_written"),
        F.count_if(F.col("is_seq")).alias("sequential"), F.sum("run_start").alias("runs"),
    )
    total_bytes = F.col("bytes_read") + F.col("bytes_written")
    parts = [_long(counts, {
        "requests": F.col("requests"), "duration_s": duration_s, "rate_per_s": F.col("requests") / duration_s,
        "reads": F.col("reads"), "writes": F.col("writes"),
        "read_share_requests": F.col("reads") / F.col("requests"),
        "read_share_bytes": F.when(total_bytes > 0, F.col("bytes_read") / total_bytes),
        "bytes_read": F.col("bytes_read"), "bytes_written": F.col("bytes_written"),
        "seq_share": F.col("sequential") / F.col("requests"), "runs": F.col("runs"),
    })]
    parts.append(_percentile_rows(expanded, "size_bytes", "size_bytes", rounded=False,
                                  ps=(0.1, 0.5, 0.9, 0.99)))
    parts.append(_percentile_rows(expanded.where(F.col("seek_bytes").isNotNull()), "seek_bytes", "seek_bytes"))
    with_gap = expanded.where(F.col("gap_us").isNotNull())
    parts.append(_percentile_rows(with_gap, "gap_us", "interarrival_us"))
    parts.append(_long(with_gap.groupBy(*GROUP).agg(F.stddev_pop("gap_us").alias("_sd"), F.avg("gap_us").alias("_m")),
                       {"interarrival_cv": F.when(F.col("_m") > 0, F.col("_sd") / F.col("_m"))}))
    for label, threshold in IDLE_THRESHOLDS_US.items():
        idle = with_gap.where(F.col("gap_us") > threshold)
        parts.append(_percentile_rows(idle, "gap_us", f"idle_{label}_us", ps=(0.5, 0.9)))
        parts.append(_long(idle.groupBy(*GROUP).agg(F.count(F.lit(1)).alias("_n"), F.sum("gap_us").alias("_t")),
                           {f"idle_{label}_count": F.col("_n"), f"idle_{label}_total_s": F.col("_t") / 1e6}))
    parts += [_burstiness(expanded, label, bin_us, span_us) for label, bin_us in BURST_BINS_US.items()]
    parts.append(_run_lengths(ordered, window_us))
    parts += _blocks_and_reuse(base, window_us, chunk_us)
    parts.append(_skew(base, window_us, extent_bytes))
    profile = functools.reduce(lambda a, b: a.unionByName(b), parts)
    return to_schema(profile.select(F.lit("").alias("trace_id"), *GROUP, "metric", "value"), TP.SPARK_SCHEMA)


def _burstiness(expanded: DataFrame, label: str, bin_us: int, span_us: int) -> DataFrame:
    """Peak-to-mean and index of dispersion of request counts per bin, empty bins included."""
    per_bin = expanded.groupBy(*GROUP, idiv(F.col("ts_us"), bin_us).alias("_bin")).agg(F.count(F.lit(1)).alias("_c"))
    agg = per_bin.groupBy(*GROUP).agg(F.sum("_c").alias("_n"), F.sum(F.col("_c") * F.col("_c")).alias("_n2"),
                                      F.max("_c").alias("_peak"))
    length_us = F.when(F.col("window_us") > 0, F.col("window_us")).otherwise(F.lit(max(span_us, 1)))
    bins = F.greatest(F.ceil(length_us / F.lit(bin_us)), F.lit(1))
    mean = F.col("_n") / bins
    var = F.col("_n2") / bins - mean * mean
    return _long(agg, {f"peak_to_mean_{label}": F.col("_peak") / mean,
                       f"dispersion_{label}": F.when(mean > 0, var / mean)})


def _run_lengths(ordered: DataFrame, window_us: int) -> DataFrame:
    runs = ordered.groupBy("device", "run_id").agg(F.count(F.lit(1)).alias("run_length"),
                                                    F.min("ts_us").alias("ts_us"))
    expanded = _expand(runs, window_us, ["ts_us", "run_length"])
    return _percentile_rows(expanded, "run_length", "run_length", rounded=False)


def _blocks_and_reuse(base: DataFrame, window_us: int, chunk_us: int) -> list[DataFrame]:
    """Footprint (distinct 4 KiB blocks) and reuse time, keyed by (device, block) so it spreads."""
    b = FOOTPRINT_BLOCK
    first, last = idiv(F.col("offset_bytes"), b), idiv(F.col("end_bytes") - 1, b)
    blocks = base.select("device", "seq", "ts_us", F.explode(
        F.when(first == last, F.array(first)).otherwise(F.sequence(first, last))).alias("block"))
    w = Window.partitionBy("device", "block").orderBy(*ORDER)
    accessed = blocks.select("device", "block", "ts_us", (F.col("ts_us") - F.lag("ts_us").over(w)).alias("reuse_us"))
    expanded = _expand(accessed, window_us, ["ts_us", "block", "reuse_us"])
    footprint = expanded.groupBy(*GROUP).agg(
        F.count_distinct("dev", "block").alias("_blocks"),
        F.count(F.lit(1)).alias("_accesses"), F.count("reuse_us").alias("_reuses"))
    parts = [_long(footprint, {"footprint_blocks_4k": F.col("_blocks"), "footprint_bytes": F.col("_blocks") * b,
                               "reuse_share": F.col("_reuses") / F.col("_accesses")})]
    parts.append(_percentile_rows(expanded.where(F.col("reuse_us").isNotNull()), "reuse_us", "reuse_time_us"))
    return parts


def _skew(base: DataFrame, window_us: int, extent_bytes: int) -> DataFrame:
    first, last = idiv(F.col("offset_bytes"), extent_bytes), idiv(F.col("end_bytes") - 1, extent_bytes)
    touched = base.select("device", "ts_us", F.explode(
        F.when(first == last, F.array(first)).otherwise(F.sequence(first, last))).alias("extent_id"))
    expanded = _expand(touched, window_us, ["ts_us", "extent_id"])
    per_extent = expanded.groupBy(*GROUP, "dev", "extent_id").agg(F.count(F.lit(1)).alias("_c"))
    w = Window.partitionBy(*GROUP)
    ranked = per_extent.select(
        *GROUP, "_c", F.row_number().over(w.orderBy(F.desc("_c"), "dev", "extent_id")).alias("_rank"),
        F.count(F.lit(1)).over(w).alias("_extents"), F.sum("_c").over(w).alias("_total"))
    ranked = ranked.withColumn("_cum", F.sum("_c").over(w.orderBy("_rank").rowsBetween(Window.unboundedPreceding,
                                                                                       Window.currentRow)))
    # Least-squares fit through the origin of ln(cumulative share) on ln(rank share), ranks < all.
    x = F.log(F.col("_rank") / F.col("_extents"))
    y = F.log(F.col("_cum") / F.col("_total"))
    fit_row = F.col("_rank") < F.col("_extents")
    agg = ranked.groupBy(*GROUP).agg(
        F.first("_extents").alias("_extents"),
        *[(F.max(F.when(F.col("_rank") <= F.greatest(F.ceil(F.col("_extents") * share), F.lit(1)), F.col("_cum")))
           / F.first("_total")).alias(f"_top_{label}") for label, share in SKEW_SHARES.items()],
        (F.sum(F.when(fit_row, x * y)) / F.sum(F.when(fit_row, x * x))).alias("_theta"))
    # X/Y rule with X + Y = 100: solve y**theta + y = 1 by Newton's method. theta <= 1 (the hottest
    # s of extents get at least s of the accesses), where this iteration from 0.5 converges.
    theta = F.col("_theta")
    agg = agg.withColumn("_y", F.lit(0.5))
    for _ in range(20):
        y = F.col("_y")
        agg = agg.withColumn("_y", F.when(theta > 0, y - (F.pow(y, theta) + y - 1) / (theta * F.pow(y, theta - 1) + 1)))
    yv = F.col("_y")
    metrics = {f"skew_top{label}_share": F.col(f"_top_{label}") for label in SKEW_SHARES}
    metrics |= {"extents_touched": F.col("_extents"), "skew_theta": theta,
                "skew_y_pct": F.when(theta > 0, yv * 100), "skew_x_pct": F.when(theta > 0, 100 - yv * 100)}
    return _long(agg, metrics)
