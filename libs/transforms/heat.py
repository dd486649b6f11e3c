"""Heat and temperature per extent and per disk (FIVE section 1.2), and per-interval reference counts.

Heat is 512-byte blocks accessed per second; temperature is heat per block of extent size. Input is
always the `requests` table's columns (one trace); outputs are the matching schemas/ tables.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from libs.transforms.columns import idiv_sql, to_schema, window_start
from schemas import disk_heat as DH
from schemas import extent_heat as EH

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

BLOCK_BYTES = 512
LAYOUTS = ("as-traced", "striped", "random")


def _check_unit(name: str, value: int) -> None:
    # Extents and stripe units are whole 512-byte blocks, so a request's blocks split over the
    # extents it touches sum to the request's own block count.
    if value <= 0 or value % BLOCK_BYTES:
        raise ValueError(f"{name} must be a positive multiple of {BLOCK_BYTES}, got {value}")


def _blocks_sql(lo: str, hi: str) -> str:
    """512-byte blocks overlapped by the byte range [lo, hi), as Spark SQL text."""
    return f"({idiv_sql(f'{hi} + {BLOCK_BYTES - 1}L', BLOCK_BYTES)} - {idiv_sql(lo, BLOCK_BYTES)})"


def split_at(requests: DataFrame, unit_bytes: int, *, start: Column | None = None,
             id_col: str = "extent_id") -> DataFrame:
    """One row per (request, unit of `unit_bytes` it touches), as a striping driver splits requests.

    Input: requests columns (device, seq, ts_us, op, offset_bytes, size_bytes; `start` overrides the
    byte address, e.g. a volume offset). Output: device, seq, ts_us, op, <id_col>, bytes, blocks —
    bytes and 512-byte blocks of the request inside that unit.
    """
    _check_unit("unit_bytes", unit_bytes)
    lo = "offset_bytes"
    if start is not None:
        requests, lo = requests.withColumn("_start", start), "_start"
    u = f"{unit_bytes}L"
    first, last = idiv_sql(lo, unit_bytes), idiv_sql(f"{lo} + size_bytes - 1", unit_bytes)
    # Most requests touch one unit; only crossing requests pay for a sequence. The list is never
    # empty (size_bytes > 0), so explode_outer gives the same rows as explode, without the filter
    # Spark infers for explode (size(list) > 0), which built every row's list a second time.
    # SQL text: the Column API made ~600 JVM calls here, 0.25 s of driver time per plan.
    pieces = requests.selectExpr(
        "device", "seq", "ts_us", "op", f"{lo} AS _lo", f"{lo} + size_bytes AS _hi",
        f"explode_outer(CASE WHEN {first} = {last} THEN array({first}) ELSE sequence({first}, {last}) END) AS {id_col}")
    piece_lo, piece_hi = f"greatest(_lo, {id_col} * {u})", f"least(_hi, ({id_col} + 1L) * {u})"
    return pieces.selectExpr("device", "seq", "ts_us", "op", id_col, f"{piece_hi} - {piece_lo} AS bytes",
                             f"{_blocks_sql(piece_lo, piece_hi)} AS blocks")


def _per_second_sql(blocks: str, window_us: int, span_us: int) -> str:
    """blocks / window length in seconds, as Spark SQL text; the whole-trace window (0) divides by the
    trace's span, and a zero-length window gives null.

    A window is a time unit: the last (partial) window still divides by the full window length,
    so a trace ending early in a window shows less heat there rather than an inflated rate.
    """
    seconds = (window_us if window_us else span_us) / 1e6
    # repr round-trips the float exactly; a bare 3600.0 would be a DECIMAL literal in Spark SQL.
    return f"({blocks} / CAST('{seconds!r}' AS DOUBLE))" if seconds > 0 else "CAST(NULL AS DOUBLE)"


def compute_extent_heat(requests: DataFrame, *, extent_bytes: int = 1 << 20, window_us: int = 3_600_000_000,
                        span_us: int) -> DataFrame:
    """Heat and temperature per device, extent and window.

    Input: `requests` rows of one trace; span_us is that trace's time span (traces.span_us), used
    by the whole-trace window (window_us = 0). Output: exactly schemas.extent_heat.COLUMNS.
    A request crossing an extent boundary counts its blocks in each extent it touches and counts
    once in `requests` of each.

        heat = compute_extent_heat(spark.table("requests").where("trace_id = 'x'"), span_us=span)
    """
    _check_unit("extent_bytes", extent_bytes)
    pieces = split_at(requests, extent_bytes)
    counted = (
        pieces.groupBy("device", "extent_id", window_start(window_us).alias("window_start_us"))
        .agg(F.count(F.lit(1)).alias("requests"),
             F.count_if(F.col("op") == "R").alias("reads"),
             F.sum("blocks").alias("blocks"),
             F.sum("bytes").alias("bytes"))
    )
    return _extent_heat_rows(counted, extent_bytes=extent_bytes, window_us=window_us, span_us=span_us)


def whole_trace_extent_heat(windows: DataFrame, *, extent_bytes: int, span_us: int) -> DataFrame:
    """compute_extent_heat(window_us=0) from the extent_heat rows of any other window length of the same
    trace and extent size (the stored table's): the whole trace's counts are the windows' counts summed
    (integers, so the same rows), without reading the requests again."""
    counted = windows.groupBy("device", "extent_id").agg(
        F.lit(0).cast("long").alias("window_start_us"), F.sum("requests").alias("requests"),
        F.sum("reads").alias("reads"), F.sum("blocks").alias("blocks"), F.sum("bytes").alias("bytes"))
    return _extent_heat_rows(counted, extent_bytes=extent_bytes, window_us=0, span_us=span_us)


def _extent_heat_rows(counted: DataFrame, *, extent_bytes: int, window_us: int, span_us: int) -> DataFrame:
    heat = _per_second_sql("blocks", window_us, span_us)
    return counted.selectExpr(
        "'' AS trace_id",  # stamped by libs.tables.replace_rows
        "device", f"{extent_bytes}L AS extent_bytes", "extent_id", "window_start_us", f"{window_us}L AS window_us",
        "requests", "reads", "requests - reads AS writes",  # op is R or W (schemas.requests.validate)
        "blocks", "bytes", f"{heat} AS heat", f"{heat} / {extent_bytes // BLOCK_BYTES}D AS temperature",
    ).transform(lambda df: to_schema(df, EH.SPARK_SCHEMA))


def _volume_bases(requests: DataFrame, unit_bytes: int) -> dict[str, int]:
    """Byte address of each device in the concatenated volume (devices in name order, each
    starting on a stripe-unit boundary). One row per device reaches the driver."""
    ends = requests.groupBy("device").agg(F.max(F.col("offset_bytes") + F.col("size_bytes")).alias("end"))
    bases, cursor = {}, 0
    for row in sorted(ends.collect(), key=lambda r: r["device"]):
        bases[row["device"]] = cursor
        cursor += -(-int(row["end"]) // unit_bytes) * unit_bytes
    return bases


def compute_disk_heat(requests: DataFrame, *, layout: str = "as-traced", window_us: int = 3_600_000_000,
                      span_us: int, stripe_unit_bytes: int = 65_536, width: int = 4, disks: int = 4,
                      seed: int = 0) -> DataFrame:
    """Heat per disk and window under a layout, with mean, max, max/mean and variance across disks.

    - as-traced: each traced device is a disk.
    - striped: the devices are concatenated into one volume (name order, each on a stripe-unit
      boundary) and striped over `width` disks; requests split at stripe-unit boundaries.
    - random: each request goes whole to a uniformly random disk of `disks`, drawn from a hash of
      (seed, device, seq), so a rerun with the same seed gives the same placement.
    Windows are those with at least one request; every disk of the layout is in each of them
    (zero heat included in the mean and variance). Output: exactly schemas.disk_heat.COLUMNS.
    """
    if layout == "as-traced":
        pieces = requests.select(F.col("device").alias("disk"), "ts_us",
                                 F.expr(_blocks_sql("offset_bytes", "offset_bytes + size_bytes"))
                                 .alias("blocks"))
        disk_names: Sequence[str] = sorted(r["device"] for r in requests.select("device").distinct().collect())
        params = ""
    elif layout == "striped":
        if width <= 0:
            raise ValueError(f"width must be > 0, got {width}")
        _check_unit("stripe_unit_bytes", stripe_unit_bytes)
        bases = _volume_bases(requests, stripe_unit_bytes)
        base = F.element_at(F.create_map(*[F.lit(x) for kv in bases.items() for x in kv]), F.col("device"))
        split = split_at(requests, stripe_unit_bytes, start=base + F.col("offset_bytes"), id_col="unit")
        pieces = split.select((F.col("unit") % width).cast("string").alias("disk"), "ts_us", "blocks")
        disk_names = [str(d) for d in range(width)]
        params = f"unit_bytes={stripe_unit_bytes},width={width}"
    elif layout == "random":
        if disks <= 0:
            raise ValueError(f"disks must be > 0, got {disks}")
        pick = F.pmod(F.xxhash64(F.lit(seed), F.col("device"), F.col("seq")), F.lit(disks))
        pieces = requests.select(pick.cast("string").alias("disk"), "ts_us",
                                 F.expr(_blocks_sql("offset_bytes", "offset_bytes + size_bytes"))
                                 .alias("blocks"))
        disk_names = [str(d) for d in range(disks)]
        params = f"disks={disks},seed={seed}"
    else:
        raise ValueError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)}")

    per_disk = (pieces.groupBy(window_start(window_us).alias("window_start_us"), "disk")
                .agg(F.count(F.lit(1)).alias("requests"), F.sum("blocks").alias("blocks")))
    return _disk_heat_rows(per_disk, disk_names, layout=layout, params=params, window_us=window_us, span_us=span_us)


def whole_trace_disk_heat(windows: DataFrame, *, span_us: int) -> DataFrame:
    """compute_disk_heat(window_us=0) of one layout from its disk_heat rows of any other window length (the
    stored table's, every disk in every window): the disks' counts summed over the windows (integers, the
    same rows), without reading the requests again. Empty for empty input."""
    first = windows.select("layout", "layout_params").first()
    if first is None:
        return windows
    per_disk = windows.groupBy("disk").agg(F.lit(0).cast("long").alias("window_start_us"),
                                           F.sum("requests").alias("requests"), F.sum("blocks").alias("blocks"))
    disk_names = sorted(r["disk"] for r in per_disk.select("disk").collect())
    return _disk_heat_rows(per_disk, disk_names, layout=first["layout"], params=first["layout_params"], window_us=0,
                           span_us=span_us)


def _disk_heat_rows(per_disk: DataFrame, disk_names: Sequence[str], *, layout: str, params: str, window_us: int,
                    span_us: int) -> DataFrame:
    spark = per_disk.sparkSession
    grid = (per_disk.select("window_start_us").distinct()
            .crossJoin(spark.createDataFrame([(d,) for d in disk_names], "disk string")))
    full = (grid.join(per_disk, on=["window_start_us", "disk"], how="left")
            .select("window_start_us", "disk", F.coalesce("requests", F.lit(0)).alias("requests"),
                    F.coalesce("blocks", F.lit(0)).alias("blocks")))
    full = full.withColumn("heat", F.expr(_per_second_sql("blocks", window_us, span_us)))
    stats = full.groupBy("window_start_us").agg(
        F.avg("heat").alias("mean_heat"), F.max("heat").alias("max_heat"),
        F.var_pop("heat").alias("heat_variance"))
    return (
        full.join(stats, on="window_start_us", how="inner")
        .select(F.lit("").alias("trace_id"), F.lit(layout).alias("layout"), F.lit(params).alias("layout_params"),
                "window_start_us", F.lit(window_us).cast("long").alias("window_us"), "disk", "requests", "blocks",
                "heat", F.lit(len(disk_names)).cast("long").alias("disks"), "mean_heat", "max_heat",
                F.when(F.col("mean_heat") > 0, F.col("max_heat") / F.col("mean_heat")).alias("max_over_mean"),
                "heat_variance")
        .transform(lambda df: to_schema(df, DH.SPARK_SCHEMA))
    )


def compute_interval_counts(requests: DataFrame, *, extent_bytes: int, interval_us: int,
                            interval_id: int) -> DataFrame:
    """Reference counts (requests touching each extent) in one reorganization interval.

    Output: device, extent_id, count — the raw Count_current of ALIS eq. 1, ready for
    libs.transforms.aging.age_values.
    """
    if interval_us <= 0:
        raise ValueError(f"interval_us must be > 0, got {interval_us}")
    lo, hi = interval_id * interval_us, (interval_id + 1) * interval_us
    in_interval = requests.where((F.col("ts_us") >= lo) & (F.col("ts_us") < hi))
    return (split_at(in_interval, extent_bytes).groupBy("device", "extent_id")
            .agg(F.count(F.lit(1)).alias("count")))
