"""ALIS heat clustering and the reorganized area (sections 5.1, 5.3, 6.2).

The reorganized area (RA) is ra_share of the storage used, starting ra_offset of the way into it.
Heat clustering copies the hottest units (by aged reference count) that fit and arranges them by a
layout: organ pipe, heat (descending heat), packed extents, or sequential (ascending home address,
the paper's recommendation). Run clustering lays the discovered runs out whole, in discovery
order; combined, runs are placed first and heat-clustered units fill the rest, so a unit may have
a copy in a run and another in the heat region.

Choices the paper leaves open: the hot units are the longest prefix of the heat order (ties: lower
unit id) that fits, and runs are placed in rank order up to the first that does not fit whole.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F

from libs.alis.graph import GROUP

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

LAYOUTS = ("sequential", "packed", "heat", "organ-pipe")
MODES = ("heat", "run", "combined")
PLAN_COLUMNS = ("device", "interval_id", "region", "run_id", "unit_id", "home_offset_bytes", "size_bytes",
                "ra_offset_bytes", "ra_address_bytes")
PLAN_DDL = ("device string, interval_id long, region string, run_id long, unit_id long, home_offset_bytes long, "
            "size_bytes long, ra_offset_bytes long, ra_address_bytes long")
RUN_SIDE_DDL = ("device string, interval_id long, run_id long, rank long, position long, unit_id long, "
                "offset_bytes long, size_bytes long, ra_bytes long, ra_start_bytes long")


def check_plan(mode: str, layout: str, extent_bytes: int) -> None:
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: use one of {', '.join(MODES)}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: use one of {', '.join(LAYOUTS)}")
    if extent_bytes <= 0:
        raise ValueError(f"extent_bytes must be > 0, got {extent_bytes}")


# --- numeric core (one device and plan) --------------------------------------------------------


def hot_units(heat: np.ndarray, sizes: np.ndarray, unit_ids: np.ndarray, capacity: int) -> np.ndarray:
    """Indices of the target units: the longest prefix of descending heat (ties: lower unit id)
    whose sizes add up to at most capacity bytes; units with no heat are never targets."""
    order = np.lexsort((unit_ids, -heat))
    order = order[heat[order] > 0]
    fits = np.cumsum(sizes[order]) <= capacity
    return order[: int(np.argmin(fits)) if not fits.all() else len(order)]


def arrange(offsets: np.ndarray, heat: np.ndarray, unit_ids: np.ndarray, *, layout: str,
            extent_bytes: int = 1 << 30) -> np.ndarray:
    """The order (indices) in which the given target units are laid out in the heat region.

    sequential: ascending home address. heat: descending heat. organ-pipe: hottest in the middle,
    the next ones alternately right and left of it. packed: extents of extent_bytes ranked by
    their units' heats in descending order compared element by element (highest first, then the
    next highest, ...), units by extent rank and then home address.
    """
    check_plan("heat", layout, extent_bytes)
    if layout == "sequential":
        return np.lexsort((unit_ids, offsets))
    by_heat = np.lexsort((unit_ids, offsets, -heat))
    if layout == "heat":
        return by_heat
    if layout == "organ-pipe":
        rank = np.arange(len(by_heat))
        side = np.where(rank % 2 == 1, (rank + 1) // 2, -(rank // 2))  # 0, 1, -1, 2, -2, ...
        return by_heat[np.argsort(side, kind="stable")]
    extent = offsets // extent_bytes
    vectors: dict[int, list[float]] = {}
    for i in by_heat:  # descending heat, so each extent's list comes out sorted
        vectors.setdefault(int(extent[i]), []).append(-float(heat[i]))
    # An extent without a next-highest unit ranks after one with any: heats are > 0, so the
    # sentinel 0.0 sorts after every negated heat.
    ranked = sorted(vectors, key=lambda e: ([*vectors[e], 0.0], e))
    extent_rank = {e: r for r, e in enumerate(ranked)}
    ranks = np.array([extent_rank[int(e)] for e in extent], np.int64)
    return np.lexsort((unit_ids, offsets, ranks))


def plan_area(runs: dict[str, np.ndarray], hot: dict[str, np.ndarray], *, ra_bytes: int, mode: str,
              layout: str, extent_bytes: int) -> dict[str, np.ndarray]:
    """Copies for one device's reorganized area, in RA order.

    runs: run_id, rank, position, unit_id, offset_bytes, size_bytes (one row per member).
    hot: unit_id, heat, offset_bytes, size_bytes (candidate units). Output: region, run_id (-1 for
    heat copies), unit_id, home_offset_bytes, size_bytes, ra_offset_bytes.
    """
    check_plan(mode, layout, extent_bytes)
    parts: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    used = 0
    if mode in ("run", "combined") and len(runs["unit_id"]):
        order = np.lexsort((runs["position"], runs["rank"]))
        rank = runs["rank"][order]
        starts = np.flatnonzero(np.concatenate(([True], rank[1:] != rank[:-1])))
        run_bytes = np.add.reduceat(runs["size_bytes"][order], starts)
        fits = np.cumsum(run_bytes) <= ra_bytes
        placed_runs = int(np.argmin(fits)) if not fits.all() else len(starts)
        take = order[: (starts[placed_runs] if placed_runs < len(starts) else len(order))]
        used = int(runs["size_bytes"][take].sum())
        parts.append(("run", runs["run_id"][take], runs["unit_id"][take], runs["offset_bytes"][take],
                      runs["size_bytes"][take]))
    if mode in ("heat", "combined") and len(hot["unit_id"]):
        chosen = hot_units(hot["heat"], hot["size_bytes"], hot["unit_id"], ra_bytes - used)
        order = chosen[arrange(hot["offset_bytes"][chosen], hot["heat"][chosen], hot["unit_id"][chosen],
                               layout=layout, extent_bytes=extent_bytes)]
        parts.append(("heat", np.full(len(order), -1, np.int64), hot["unit_id"][order],
                      hot["offset_bytes"][order], hot["size_bytes"][order]))
    region = np.concatenate([np.full(len(p[2]), p[0], dtype=object) for p in parts]) if parts else np.zeros(0, object)
    size = np.concatenate([p[4] for p in parts]) if parts else np.zeros(0, np.int64)
    return {
        "region": region,
        "run_id": np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64),
        "unit_id": np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64),
        "home_offset_bytes": np.concatenate([p[3] for p in parts]) if parts else np.zeros(0, np.int64),
        "size_bytes": size,
        "ra_offset_bytes": np.concatenate(([0], np.cumsum(size)[:-1])).astype(np.int64) if len(size) else size,
    }


# --- Spark glue --------------------------------------------------------------------------------


def _columns(table: pa.Table, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    return {n: table.column(n).to_numpy() for n in names}


def _plan_group(mode: str, layout: str, extent_bytes: int):  # type: ignore[no-untyped-def]
    run_cols = ("run_id", "rank", "position", "unit_id", "offset_bytes", "size_bytes")
    hot_cols = ("unit_id", "heat", "offset_bytes", "size_bytes")

    def run(runs: pa.Table, hot: pa.Table) -> pa.Table:
        first = runs if runs.num_rows else hot
        if first.num_rows == 0:
            return pa.table({c: pa.array([], t) for c, t in _PLAN_ARROW})
        device = first.column("device")[0].as_py()
        interval = first.column("interval_id")[0].as_py()
        ra_bytes = int(first.column("ra_bytes")[0].as_py())
        ra_start = int(first.column("ra_start_bytes")[0].as_py())
        plan = plan_area(_columns(runs, run_cols), _columns(hot, hot_cols), ra_bytes=ra_bytes, mode=mode,
                         layout=layout, extent_bytes=extent_bytes)
        n = len(plan["unit_id"])
        run_id = pa.array(plan["run_id"], pa.int64(), mask=plan["run_id"] < 0)
        return pa.table([pa.array([device] * n, pa.string()), pa.array(np.full(n, interval, np.int64)),
                         pa.array(plan["region"].tolist(), pa.string()), run_id, pa.array(plan["unit_id"], pa.int64()),
                         pa.array(plan["home_offset_bytes"], pa.int64()), pa.array(plan["size_bytes"], pa.int64()),
                         pa.array(plan["ra_offset_bytes"], pa.int64()),
                         pa.array(plan["ra_offset_bytes"] + ra_start, pa.int64())], names=list(PLAN_COLUMNS))

    return run


_PLAN_ARROW = [("device", pa.string()), ("interval_id", pa.int64()), ("region", pa.string()), ("run_id", pa.int64()),
               ("unit_id", pa.int64()), ("home_offset_bytes", pa.int64()), ("size_bytes", pa.int64()),
               ("ra_offset_bytes", pa.int64()), ("ra_address_bytes", pa.int64())]


def reorganized_area(storage: DataFrame, *, ra_share: float = 0.15, ra_offset: float = 0.30) -> DataFrame:
    """Per device: ra_bytes = ra_share and ra_start_bytes = ra_offset of the storage used.

    Input: device, storage_used_bytes (libs.alis.units.storage_used). Output: device,
    storage_used_bytes, ra_bytes, ra_start_bytes.
    """
    if not 0.0 < ra_share <= 1.0:
        raise ValueError(f"ra_share must be in (0, 1], got {ra_share}")
    if not 0.0 <= ra_offset <= 1.0:
        raise ValueError(f"ra_offset must be in [0, 1], got {ra_offset}")
    used = F.col("storage_used_bytes")
    return storage.select("device", "storage_used_bytes",
                          F.floor(used * F.lit(ra_share)).cast("long").alias("ra_bytes"),
                          F.floor(used * F.lit(ra_offset)).cast("long").alias("ra_start_bytes"))


def interval_counts(refs: DataFrame) -> DataFrame:
    """Reference counts per (device, interval_id, unit_id): requests touching the unit.

    Input: libs.alis.units.unit_refs rows (already restricted to the ops to count).
    Output: device, interval_id, unit_id, count.
    """
    return refs.groupBy(*GROUP, "unit_id").agg(F.count(F.lit(1)).alias("count"))


def plan_layouts(runs: DataFrame | None, heat: DataFrame | None, units: DataFrame, area: DataFrame, *,
                 mode: str = "combined", layout: str = "sequential", extent_bytes: int = 1 << 30) -> DataFrame:
    """The reorganized area of every (device, interval_id) plan.

    Input: runs (RUN_COLUMNS of libs.alis.runs) and heat (device, interval_id, unit_id, heat), either
    None when the mode does not use it; units (device, unit_id, offset_bytes, size_bytes); area
    (reorganized_area). Output: PLAN_COLUMNS, one row per copy.

        layout = plan_layouts(runs, aged_heat, units, area, mode="combined", layout="sequential")
    """
    check_plan(mode, layout, extent_bytes)
    spark = units.sparkSession
    unit_cols = units.select("device", "unit_id", "offset_bytes", "size_bytes")
    area_cols = area.select("device", "ra_bytes", "ra_start_bytes")
    if runs is not None and mode != "heat":
        run_side = (runs.select(*GROUP, "run_id", "rank", "position", "unit_id")
                    .join(unit_cols, on=["device", "unit_id"], how="inner")
                    .join(area_cols, on="device", how="inner"))
    else:
        run_side = spark.createDataFrame([], RUN_SIDE_DDL)
    if heat is not None and mode != "run":
        # Only units that could fit reach the planner: heat order, cumulative size <= ra_bytes.
        w = (Window.partitionBy(*GROUP).orderBy(F.col("heat").desc(), "unit_id")
             .rowsBetween(Window.unboundedPreceding, 0))
        hot_side = (heat.where(F.col("heat") > 0).select(*GROUP, "unit_id", "heat")
                    .join(unit_cols, on=["device", "unit_id"], how="inner")
                    .join(area_cols, on="device", how="inner")
                    .withColumn("_cum", F.sum("size_bytes").over(w))
                    .where(F.col("_cum") <= F.col("ra_bytes")).drop("_cum"))
    else:
        hot_side = spark.createDataFrame([], "device string, interval_id long, unit_id long, heat double, "
                                             "offset_bytes long, size_bytes long, ra_bytes long, ra_start_bytes long")
    # Both sides join the same units and area frames: fresh column ids keep the cogroup unambiguous.
    hot_side = hot_side.select(*[F.col(c).alias(c) for c in hot_side.columns])
    return (run_side.groupBy(*GROUP).cogroup(hot_side.groupBy(*GROUP))
            .applyInArrow(_plan_group(mode, layout, extent_bytes), PLAN_DDL))


def area_hits(plan: DataFrame, reads: DataFrame, *, shift: int) -> DataFrame:
    """Reads of interval N + shift that find all their units in the area planned at interval N.

    Input: plan (device, interval_id, unit_id, ...) and reads (device, interval_id, seq, unit_id:
    read references). Output: device, interval_id (the plan's), reads, hits. shift=1 scores a plan
    on the next interval (realizable); shift=0 scores a plan on its own interval (lookahead).
    """
    planned = (plan.select("device", (F.col("interval_id") + shift).alias("interval_id"), "unit_id")
               .distinct().withColumn("_in", F.lit(True)))
    per_read = (reads.select(*GROUP, "seq", "unit_id")
                .join(planned, on=[*GROUP, "unit_id"], how="left")
                .groupBy(*GROUP, "seq").agg(F.bool_and(F.col("_in").isNotNull()).alias("_hit")))
    return per_read.groupBy(*GROUP).agg(F.count(F.lit(1)).alias("reads"), F.count_if("_hit").alias("hits")).select(
        "device", (F.col("interval_id") - shift).alias("interval_id"), "reads", "hits")
