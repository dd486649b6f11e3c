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

from libs.transforms.columns import idiv, to_schema, window_start
from libs.transforms.heat import split_at
from schemas import trace_profile as TP

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

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


def _expand(pre: DataFrame, window_us: int, *, scopes: Sequence[str] = ("trace", "device")) -> DataFrame:
    """Each pre-aggregated row (columns device, w = its window start, payload) once per group it
    belongs to: the scopes, each for the whole trace and for its window. Payloads must be additive
    (counts, sums, maxima), since the group's rows are summed afterwards.

    Pre-aggregating by (device, window) before this step is what keeps the profile cheap: the
    expansion multiplies pre-aggregated rows, not requests.
    """
    spans = [(F.lit(0).cast("long"), 0)] + ([(F.col("w"), window_us)] if window_us else [])
    groups = F.array(*[
        F.struct(F.lit(scope).alias("scope"), (F.lit("*") if scope == "trace" else F.col("device")).alias("device"),
                 start.alias("window_start_us"), F.lit(w).cast("long").alias("window_us"))
        for scope in scopes for start, w in spans
    ])
    payload = [c for c in pre.columns if c not in ("device", "w")]
    return pre.select(*payload, F.explode(groups).alias("_g")).select("_g.*", *payload)


def _window(window_us: int) -> Column:
    return window_start(window_us).alias("w")


def _long(df: DataFrame, metrics: dict[str, Column]) -> DataFrame:
    """Wide (GROUP + metric columns) -> long rows, one per metric."""
    wide = df.select(*GROUP, *[v.cast("double").alias(k) for k, v in metrics.items()])
    stacked = F.explode(F.array(*[F.struct(F.lit(k).alias("metric"), F.col(k).alias("value")) for k in metrics]))
    return wide.select(*GROUP, stacked.alias("_m")).select(*GROUP, "_m.metric", "_m.value")


EXACT = frozenset({"size_bytes", "run_length"})  # few distinct values: not rounded
PS = (0.1, 0.5, 0.9, 0.99)


def _pairs(df: DataFrame, window_us: int, values: Sequence[tuple[str, Column, str]]) -> DataFrame:
    """(device, w, metric, scopes, v) rows: one per non-null value of each (metric, value, scopes)
    item, scopes being "both", "device" or "trace" (which groups the value counts in)."""
    items = F.array(*[F.struct(F.lit(name).alias("metric"), F.lit(scopes).alias("scopes"),
                               value.cast("double").alias("v")) for name, value, scopes in values])
    return (df.select("device", _window(window_us), F.explode(items).alias("_p"))
            .select("device", "w", "_p.metric", "_p.scopes", "_p.v").where(F.col("v").isNotNull()))


def _distributions(pairs: DataFrame, window_us: int) -> DataFrame:
    """Percentiles (exact over 4-significant-digit values), mean and max of every metric's values
    per group, plus count/total for idle periods and the coefficient of variation of interarrivals.
    One pipeline for all metrics: pre-aggregate (device, window, metric, value) counts, expand to
    groups, merge, then one percentile aggregate per (group, metric)."""
    v = F.when(F.col("metric").isin(*EXACT), F.col("v")).otherwise(round_significant(F.col("v")))
    pre = pairs.groupBy("device", "w", "metric", "scopes", v.alias("_v")).agg(
        F.count(F.lit(1)).alias("_n"), F.sum("v").alias("_s"), F.sum(F.col("v") * F.col("v")).alias("_s2"),
        F.max("v").alias("_max"))
    expanded = _expand(pre, window_us).where((F.col("scopes") == "both") | (F.col("scopes") == F.col("scope")))
    counted = expanded.groupBy(*GROUP, "metric", "_v").agg(
        F.sum("_n").alias("_n"), F.sum("_s").alias("_s"), F.sum("_s2").alias("_s2"), F.max("_max").alias("_max"))
    agg = counted.groupBy(*GROUP, "metric").agg(
        F.percentile("_v", list(PS), F.col("_n")).alias("_p"), F.sum("_n").alias("_n"), F.sum("_s").alias("_s"),
        F.sum("_s2").alias("_s2"), F.max("_max").alias("_max"))
    mean = F.col("_s") / F.col("_n")
    sd = F.sqrt(F.greatest(F.col("_s2") / F.col("_n") - mean * mean, F.lit(0.0)))
    is_idle = F.col("metric").startswith("idle_")
    stats = [(f"_p{round(p * 100):g}", F.col("_p")[i], F.lit(True)) for i, p in enumerate(PS)]
    stats += [("_mean", mean, F.lit(True)), ("_max", F.col("_max"), F.lit(True)),
              ("_count", F.col("_n"), is_idle), ("_total_s", F.col("_s") / 1e6, is_idle),
              ("_cv", F.when(mean > 0, sd / mean), F.col("metric") == "interarrival_us")]
    rows = F.array(*[F.struct(F.lit(suffix).alias("suffix"), value.cast("double").alias("value"), keep.alias("keep"))
                     for suffix, value, keep in stats])
    long = agg.select(*GROUP, "metric", F.explode(rows).alias("_r")).where(F.col("_r.keep"))
    # idle_10ms_us + _count -> idle_10ms_count; interarrival_us + _cv -> interarrival_cv
    name = F.when(F.col("_r.suffix").isin("_count", "_total_s", "_cv"),
                  F.concat(F.regexp_replace("metric", "_us$", ""), F.col("_r.suffix"))) \
        .otherwise(F.concat("metric", F.col("_r.suffix")))
    return long.select(*GROUP, name.alias("metric"), F.col("_r.value").alias("value"))


def compute_trace_profile(requests: DataFrame, *, span_us: int, window_us: int = 3_600_000_000,
                          extent_bytes: int = 1 << 20, chunk_us: int = 60_000_000,
                          persisted: list[DataFrame] | None = None) -> DataFrame:
    """The profile of one trace. Input: `requests` rows; span_us the trace's span (traces.span_us).
    Output: exactly schemas.trace_profile.COLUMNS, trace_id left for libs.tables.replace_rows.
    With `persisted` (a list), the two ordered intermediates that many metrics read are persisted
    and appended to it, for the caller to unpersist once the result is written.

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
    if persisted is not None:
        ordered = ordered.persist()
        persisted.append(ordered)

    duration_s = F.when(F.col("window_us") > 0, F.col("window_us")).otherwise(F.lit(span_us)) / 1e6
    is_read = F.col("op") == "R"
    sums = {
        "requests": F.count(F.lit(1)), "reads": F.count_if(is_read), "writes": F.count_if(~is_read),
        "bytes_read": F.sum(F.when(is_read, F.col("size_bytes")).otherwise(0)),
        "bytes_written": F.sum(F.when(~is_read, F.col("size_bytes")).otherwise(0)),
        "sequential": F.count_if(F.col("is_seq")), "runs": F.sum("run_start"),
    }
    pre = ordered.groupBy("device", _window(window_us)).agg(*[v.alias(k) for k, v in sums.items()])
    counts = _expand(pre, window_us).groupBy(*GROUP).agg(*[F.sum(k).alias(k) for k in sums])
    total_bytes = F.col("bytes_read") + F.col("bytes_written")
    parts = [_long(counts, {
        "requests": F.col("requests"), "duration_s": duration_s, "rate_per_s": F.col("requests") / duration_s,
        "reads": F.col("reads"), "writes": F.col("writes"),
        "read_share_requests": F.col("reads") / F.col("requests"),
        "read_share_bytes": F.when(total_bytes > 0, F.col("bytes_read") / total_bytes),
        "bytes_read": F.col("bytes_read"), "bytes_written": F.col("bytes_written"),
        "seq_share": F.col("sequential") / F.col("requests"), "runs": F.col("runs"),
    })]
    values: list[tuple[str, Column, str]] = [
        ("size_bytes", F.col("size_bytes"), "both"), ("seek_bytes", F.col("seek_bytes"), "both"),
        # gaps: device scope between a device's requests, trace scope between all requests merged
        ("interarrival_us", F.col("gap_device"), "device"), ("interarrival_us", F.col("gap_trace"), "trace"),
    ]
    for label, threshold in IDLE_THRESHOLDS_US.items():
        values += [(f"idle_{label}_us", F.when(F.col("gap_device") > threshold, F.col("gap_device")), "device"),
                   (f"idle_{label}_us", F.when(F.col("gap_trace") > threshold, F.col("gap_trace")), "trace")]
    runs = ordered.groupBy("device", "run_id").agg(F.count(F.lit(1)).alias("run_length"),
                                                    F.min("ts_us").alias("ts_us"))
    footprint, accessed = _blocks_and_reuse(base, window_us, persisted)
    pairs = (_pairs(ordered, window_us, values)
             .unionByName(_pairs(runs, window_us, [("run_length", F.col("run_length"), "both")]))
             .unionByName(_pairs(accessed, window_us, [("reuse_time_us", F.col("reuse_us"), "both")])))
    parts += [_distributions(pairs, window_us), footprint]
    parts += [_burstiness(ordered, label, bin_us, span_us, window_us) for label, bin_us in BURST_BINS_US.items()]
    parts.append(_skew(base, window_us, extent_bytes))
    profile = functools.reduce(lambda a, b: a.unionByName(b), parts)
    return to_schema(profile.select(F.lit("").alias("trace_id"), *GROUP, "metric", "value"), TP.SPARK_SCHEMA)


def _burstiness(ordered: DataFrame, label: str, bin_us: int, span_us: int, window_us: int) -> DataFrame:
    """Peak-to-mean and index of dispersion of request counts per bin, empty bins included."""
    pre = ordered.groupBy("device", _window(window_us), idiv(F.col("ts_us"), bin_us).alias("_bin")).agg(
        F.count(F.lit(1)).alias("_c"))
    per_bin = _expand(pre, window_us).groupBy(*GROUP, "_bin").agg(F.sum("_c").alias("_c"))
    agg = per_bin.groupBy(*GROUP).agg(F.sum("_c").alias("_n"), F.sum(F.col("_c") * F.col("_c")).alias("_n2"),
                                      F.max("_c").alias("_peak"))
    length_us = F.when(F.col("window_us") > 0, F.col("window_us")).otherwise(F.lit(max(span_us, 1)))
    bins = F.greatest(F.ceil(length_us / F.lit(bin_us)), F.lit(1))
    mean = F.col("_n") / bins
    var = F.col("_n2") / bins - mean * mean
    return _long(agg, {f"peak_to_mean_{label}": F.col("_peak") / mean,
                       f"dispersion_{label}": F.when(mean > 0, var / mean)})


def _blocks_and_reuse(base: DataFrame, window_us: int,
                      persisted: list[DataFrame] | None) -> tuple[DataFrame, DataFrame]:
    """Footprint rows (distinct 4 KiB blocks, reuse share) and the block accesses with their reuse
    time (device, block, ts_us, reuse_us), keyed by (device, block) so the work spreads."""
    b = FOOTPRINT_BLOCK
    blocks = split_at(base, b, id_col="block")
    w = Window.partitionBy("device", "block").orderBy(*ORDER)
    accessed = blocks.select("device", "block", "ts_us",
                             (F.col("ts_us") - F.lag("ts_us").over(w)).alias("reuse_us"))
    if persisted is not None:
        accessed = accessed.persist()
        persisted.append(accessed)
    # Distinct blocks are not additive over windows: count them per window and per whole trace.
    per_window = accessed.groupBy("device", "block", _window(window_us)).agg(
        F.count(F.lit(1)).alias("_a"), F.count("reuse_us").alias("_r"))
    spans = [per_window.groupBy("device", "block").agg(F.lit(0).cast("long").alias("window_start_us"),
                                                       F.lit(0).cast("long").alias("window_us"),
                                                       F.sum("_a").alias("_a"), F.sum("_r").alias("_r"))]
    if window_us:
        spans.append(per_window.select("device", "block", F.col("w").alias("window_start_us"),
                                       F.lit(window_us).cast("long").alias("window_us"), "_a", "_r"))
    per_group = []
    for span in spans:
        per_device = span.groupBy("device", "window_start_us", "window_us").agg(
            F.count(F.lit(1)).alias("_blocks"), F.sum("_a").alias("_a"), F.sum("_r").alias("_r"))
        per_group.append(per_device.select(F.lit("device").alias("scope"), "device", "window_start_us", "window_us",
                                           "_blocks", "_a", "_r"))
        per_group.append(per_device.groupBy("window_start_us", "window_us").agg(
            F.sum("_blocks").alias("_blocks"), F.sum("_a").alias("_a"), F.sum("_r").alias("_r")).select(
            F.lit("trace").alias("scope"), F.lit("*").alias("device"), "window_start_us", "window_us",
            "_blocks", "_a", "_r"))
    footprint = functools.reduce(lambda x, y: x.unionByName(y), per_group)
    return (_long(footprint, {"footprint_blocks_4k": F.col("_blocks"), "footprint_bytes": F.col("_blocks") * b,
                              "reuse_share": F.col("_r") / F.col("_a")}), accessed)


def _skew(base: DataFrame, window_us: int, extent_bytes: int) -> DataFrame:
    touched = split_at(base, extent_bytes)
    pre = touched.groupBy("device", _window(window_us), "extent_id").agg(F.count(F.lit(1)).alias("_c")) \
        .withColumn("dev", F.col("device"))
    per_extent = _expand(pre, window_us).groupBy(*GROUP, "dev", "extent_id").agg(F.sum("_c").alias("_c"))
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
