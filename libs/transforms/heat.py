"""Heat and temperature per extent and per disk (FIVE section 1.2), and per-interval reference counts.

Heat is 512-byte blocks accessed per second; temperature is heat per block of extent size. Input is
always the `requests` table's columns (one trace); outputs are the matching schemas/ tables.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from blockheat.libs.columns import idiv_sql, to_schema, window_start
from blockheat.libs.transforms.heat_kernels import BLOCK_BYTES
from blockheat.schemas import disk_heat as DH
from blockheat.schemas import extent_heat as EH

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

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
    # SQL text: the Column API makes hundreds of JVM calls here per plan.
    pieces = requests.selectExpr(
        "device", "seq", "ts_us", "op", f"{lo} AS _lo", f"{lo} + size_bytes AS _hi",
        f"explode_outer(CASE WHEN {first} = {last} THEN array({first}) ELSE sequence({first}, {last}) END) AS {id_col}")
    piece_lo, piece_hi = f"greatest(_lo, {id_col} * {u})", f"least(_hi, ({id_col} + 1L) * {u})"
    return pieces.selectExpr("device", "seq", "ts_us", "op", id_col, f"{piece_hi} - {piece_lo} AS bytes",
                             f"{_blocks_sql(piece_lo, piece_hi)} AS blocks")


def _window_seconds(window_us: int, span_us: int) -> float:
    """The seconds a window's heat divides by: its length, the trace's span for the whole-trace window (0).

    A window is a time unit: the last (partial) window still divides by the full window length,
    so a trace ending early in a window shows less heat there rather than an inflated rate.
    """
    return (window_us if window_us else span_us) / 1e6


def _per_second_sql(blocks: str, window_us: int, span_us: int) -> str:
    """blocks / _window_seconds, as Spark SQL text; a zero-length window gives null."""
    seconds = _window_seconds(window_us, span_us)
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
        "'' AS trace_id",  # stamped by libs.io.tables.replace_rows
        "device", f"{extent_bytes}L AS extent_bytes", "extent_id", "window_start_us", f"{window_us}L AS window_us",
        "requests", "reads", "requests - reads AS writes",  # op is R or W (schemas.requests.validate_requests)
        "blocks", "bytes", f"{heat} AS heat", f"{heat} / {extent_bytes // BLOCK_BYTES}D AS temperature",
    ).transform(lambda df: to_schema(df, EH.SPARK_SCHEMA))


def _device_ends(requests: DataFrame) -> dict[str, int]:
    """Each device's end (its largest offset + size), devices in name order: one row per device reaches the
    driver, in one job for the as-traced disks and the striped volume both."""
    ends = requests.groupBy("device").agg(F.max(F.col("offset_bytes") + F.col("size_bytes")).alias("end"))
    return {r["device"]: int(r["end"]) for r in sorted(ends.collect(), key=lambda r: r["device"])}


def _volume_bases(ends: dict[str, int], unit_bytes: int) -> dict[str, int]:
    """Byte address of each device in the concatenated volume (devices in name order, each starting on a
    stripe-unit boundary)."""
    bases, cursor = {}, 0
    for device, end in ends.items():
        bases[device] = cursor
        cursor += -(-end // unit_bytes) * unit_bytes
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
    return compute_disk_heats(requests, layouts=(layout,), window_us=window_us, span_us=span_us,
                              stripe_unit_bytes=stripe_unit_bytes, width=width, disks=disks, seed=seed)


def compute_disk_heats(requests: DataFrame, *, layouts: Sequence[str] = LAYOUTS, window_us: int = 3_600_000_000,
                       span_us: int, stripe_unit_bytes: int = 65_536, width: int = 4, disks: int = 4,
                       seed: int = 0) -> DataFrame:
    """compute_disk_heat of several layouts at once (disk_heat_table's rows as a DataFrame)."""
    rows = disk_heat_table(requests, layouts=layouts, window_us=window_us, span_us=span_us,
                           stripe_unit_bytes=stripe_unit_bytes, width=width, disks=disks, seed=seed)
    return requests.sparkSession.createDataFrame(rows, schema=DH.SPARK_SCHEMA)


def disk_heat_table(requests: DataFrame, *, layouts: Sequence[str] = LAYOUTS, window_us: int = 3_600_000_000,
                    span_us: int, stripe_unit_bytes: int = 65_536, width: int = 4, disks: int = 4,
                    seed: int = 0) -> pa.Table:
    """compute_disk_heat's rows of several layouts, as an Arrow table on the driver: one Spark job counts
    every layout's pieces of the requests per (layout, window, disk) (a few rows per window and disk), and
    disk_heat_rows adds the idle disks, the heats and the statistics across disks (one job, not a query per
    layout with its grid and statistics joins)."""
    unknown = [name for name in layouts if name not in LAYOUTS]
    if unknown or not layouts:
        raise ValueError(f"layout {unknown[0] if unknown else ''!r}: expected one of {', '.join(LAYOUTS)}")
    if "striped" in layouts:
        if width <= 0:
            raise ValueError(f"width must be > 0, got {width}")
        _check_unit("stripe_unit_bytes", stripe_unit_bytes)
    if "random" in layouts and disks <= 0:
        raise ValueError(f"disks must be > 0, got {disks}")
    ends = _device_ends(requests) if {"as-traced", "striped"} & set(layouts) else {}
    whole = F.expr(_blocks_sql("offset_bytes", "offset_bytes + size_bytes")).alias("blocks")
    pieces, names = [], {}   # per layout: (layout, disk, ts_us, blocks) rows; layout -> (params, its disks)
    for layout in dict.fromkeys(layouts):
        if layout == "as-traced":
            pieces.append(requests.select(F.lit(layout).alias("layout"), F.col("device").alias("disk"), "ts_us",
                                          whole))
            names[layout] = ("", list(ends))
        elif layout == "striped":
            bases = _volume_bases(ends, stripe_unit_bytes)
            base = F.element_at(F.create_map(*[F.lit(x) for kv in bases.items() for x in kv]), F.col("device"))
            split = split_at(requests, stripe_unit_bytes, start=base + F.col("offset_bytes"), id_col="unit")
            pieces.append(split.select(F.lit(layout).alias("layout"),
                                       (F.col("unit") % width).cast("string").alias("disk"), "ts_us", "blocks"))
            names[layout] = (f"unit_bytes={stripe_unit_bytes},width={width}", [str(d) for d in range(width)])
        else:
            pick = F.pmod(F.xxhash64(F.lit(seed), F.col("device"), F.col("seq")), F.lit(disks))
            pieces.append(requests.select(F.lit(layout).alias("layout"), pick.cast("string").alias("disk"), "ts_us",
                                          whole))
            names[layout] = (f"disks={disks},seed={seed}", [str(d) for d in range(disks)])
    every = pieces[0]
    for more in pieces[1:]:
        every = every.unionByName(more)
    per_disk = (every.groupBy("layout", window_start(window_us).alias("window_start_us"), "disk")
                .agg(F.count(F.lit(1)).alias("requests"), F.sum("blocks").alias("blocks")))
    return disk_heat_rows(per_disk.toArrow(), names, window_us=window_us, span_us=span_us)


def whole_trace_disk_heat(windows: DataFrame, *, span_us: int) -> DataFrame:
    """compute_disk_heats(window_us=0) from disk_heat rows of any other window length (whole_trace_disk_table)."""
    return windows.sparkSession.createDataFrame(whole_trace_disk_table(windows.toArrow(), span_us=span_us),
                                                schema=DH.SPARK_SCHEMA)


def whole_trace_disk_table(windows: pa.Table, *, span_us: int) -> pa.Table:
    """compute_disk_heats(window_us=0) from disk_heat rows of any other window length (the stored table's: every
    layout's disks in every window), for every layout in them: the disks' counts summed over the windows
    (integers, the same rows), without reading the requests again. Empty for empty input."""
    summed = windows.group_by(["layout", "disk"], use_threads=False).aggregate([("requests", "sum"), ("blocks", "sum")])
    per_disk = pa.table({"layout": summed["layout"], "disk": summed["disk"], "requests": summed["requests_sum"],
                         "blocks": summed["blocks_sum"],
                         "window_start_us": pa.array(np.zeros(summed.num_rows, np.int64))})
    names: dict[str, tuple[str, list[str]]] = {}
    for layout, params, disk in sorted(set(zip(*(windows.column(c).to_pylist()
                                                 for c in ("layout", "layout_params", "disk")), strict=True))):
        names.setdefault(layout, (params, []))[1].append(disk)
    return disk_heat_rows(per_disk, names, window_us=0, span_us=span_us)


def disk_heat_rows(per_disk: pa.Table, layouts: Mapping[str, tuple[str, Sequence[str]]], *, window_us: int,
                   span_us: int) -> pa.Table:
    """disk_heat rows (schemas.disk_heat; trace_id '') from per-disk counts (layout, window_start_us, disk,
    requests, blocks) and each layout's (layout_params, disks): every disk of a layout in every window where the
    layout has requests, idle ones at 0; heat = blocks / window seconds (the trace's span for the whole-trace
    window; null for a zero span), and across the layout's disks in each window the mean, max, max/mean (null
    when the mean is 0) and population variance of heat (numpy's, equal to Spark's avg and var_pop to the last
    bits or nearly: the order of the sums differs)."""
    seconds = _window_seconds(window_us, span_us)
    layout_col = per_disk.column("layout").to_pylist()
    window_col = per_disk.column("window_start_us").to_numpy()
    disk_col = per_disk.column("disk").to_pylist()
    req_col, blk_col = per_disk.column("requests").to_numpy(), per_disk.column("blocks").to_numpy()
    parts: list[pa.Table] = []
    for layout, (params, disk_names) in layouts.items():
        mine = np.array([name == layout for name in layout_col], bool)
        windows = np.unique(window_col[mine])
        column_of = {d: k for k, d in enumerate(disk_names)}
        n_w, n_d = len(windows), len(disk_names)
        req, blk = np.zeros((n_w, n_d), np.int64), np.zeros((n_w, n_d), np.int64)
        for i in np.flatnonzero(mine):
            w, d = np.searchsorted(windows, window_col[i]), column_of[disk_col[i]]
            req[w, d], blk[w, d] = req_col[i], blk_col[i]
        cells = n_w * n_d
        if seconds > 0 and cells:
            heat = blk / seconds
            mean, top = heat.mean(axis=1), heat.max(axis=1)
            variance = ((heat - mean[:, None]) ** 2).mean(axis=1)
            ratio = np.divide(top, mean, out=np.zeros(n_w), where=mean > 0)
            stats = [pa.array(np.repeat(v, n_d)) for v in (mean, top)]
            over = pa.array(np.repeat(ratio, n_d), mask=np.repeat(~(mean > 0), n_d))
            heat_a, var_a = pa.array(heat.ravel()), pa.array(np.repeat(variance, n_d))
        else:
            heat_a = var_a = over = pa.nulls(cells, pa.float64())
            stats = [pa.nulls(cells, pa.float64())] * 2
        parts.append(pa.table({
            "trace_id": pa.array([""] * cells), "layout": pa.array([layout] * cells),
            "layout_params": pa.array([params] * cells), "window_start_us": pa.array(np.repeat(windows, n_d)),
            "window_us": pa.array(np.full(cells, window_us, np.int64)),
            "disk": pa.array(list(disk_names) * n_w, pa.string()), "requests": pa.array(req.ravel()),
            "blocks": pa.array(blk.ravel()), "heat": heat_a, "disks": pa.array(np.full(cells, n_d, np.int64)),
            "mean_heat": stats[0], "max_heat": stats[1], "max_over_mean": over, "heat_variance": var_a,
        }, schema=DH.ARROW_SCHEMA))
    return pa.concat_tables(parts) if parts else DH.ARROW_SCHEMA.empty_table()


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
