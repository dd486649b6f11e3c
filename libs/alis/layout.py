"""ALIS heat clustering and the reorganized area (sections 5.1, 5.3, 6.2) with Spark: the area of every
(device, interval) plan, laid out by sim.alis.layout.plan_area (the numeric core and the paper's open
choices are documented there) in cogrouped applyInArrow groups, and the plans' hits on the reads.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F

from blockheat.libs.alis.graph import GROUP
from blockheat.libs.io.worker import python_task
from blockheat.sim import check_alis_plan as check_plan
from blockheat.sim import plan_area

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PLAN_COLUMNS = ("device", "interval_id", "region", "run_id", "unit_id", "home_offset_bytes", "size_bytes",
                "ra_offset_bytes", "ra_address_bytes")
PLAN_DDL = ("device string, interval_id long, region string, run_id long, unit_id long, home_offset_bytes long, "
            "size_bytes long, ra_offset_bytes long, ra_address_bytes long")
RUN_SIDE_DDL = ("device string, interval_id long, run_id long, rank long, position long, unit_id long, "
                "offset_bytes long, size_bytes long, ra_bytes long, ra_start_bytes long")


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
        return pa.table([pa.repeat(pa.scalar(device, pa.string()), n), pa.array(np.full(n, interval, np.int64)),
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
            .applyInArrow(python_task(_plan_group(mode, layout, extent_bytes)), PLAN_DDL))


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
