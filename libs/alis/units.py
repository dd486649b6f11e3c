"""Reorganization units (ALIS section 5.2.1) and the unit reference string of a trace.

A unit is the data one request references (a distinct device, offset_bytes, size_bytes), as ALIS
uses, or one fixed-size block. Requests that overlap only partly are different units; copies of
the shared bytes may then sit in several runs, as the paper intends.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from blockheat.schemas import reorg_units as U

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Request units get dense ids in address order. Ranking within 1 GiB address buckets (and adding
# the counts of the buckets below) keeps one device's units out of a single task.
ID_BUCKET_BYTES = 1 << 30
REF_COLUMNS = ("trace_id", "device", "interval_id", "ts_us", "seq", "sub", "op", "unit_id")
# The reference string's order: arrival time, then source order; `sub` orders the fixed-size
# units of one request by address.
REF_ORDER = ("ts_us", "seq", "sub")


def idiv(col: Column, divisor: int | Column) -> Column:
    """Integer division (SQL `div`) of a non-negative long column."""
    return F.call_function("div", col, divisor if not isinstance(divisor, int) else F.lit(divisor))


def _check_unit_bytes(unit_bytes: int) -> None:
    if unit_bytes < 0:
        raise ValueError(f"unit_bytes must be 0 (request-sized units) or > 0, got {unit_bytes}")


def _fixed_range(unit_bytes: int) -> tuple[Column, Column]:
    """First and last fixed-size unit a request touches (a zero-byte request touches one)."""
    first = idiv(F.col("offset_bytes"), unit_bytes)
    last = idiv(F.col("offset_bytes") + F.greatest(F.col("size_bytes"), F.lit(1)) - 1, unit_bytes)
    return first, last


def compute_reorg_units(requests: DataFrame, *, unit_bytes: int = 0) -> DataFrame:
    """The units a trace references, with ids.

    Input: schemas.requests columns (one trace). Output: exactly schemas.reorg_units.COLUMNS.
    unit_bytes=0: one unit per distinct (device, offset_bytes, size_bytes), ids 0.. per device in
    (offset_bytes, size_bytes) order. unit_bytes>0: the fixed-size units touched, unit_id =
    offset_bytes // unit_bytes.

        units = compute_reorg_units(requests)                     # ALIS default
        units = compute_reorg_units(requests, unit_bytes=8192)    # 8 KiB blocks
    """
    _check_unit_bytes(unit_bytes)
    if unit_bytes:
        first, last = _fixed_range(unit_bytes)
        touched = requests.select("trace_id", "device", F.explode(F.sequence(first, last)).alias("unit_id"))
        return touched.distinct().select(
            "trace_id", "device", "unit_id", (F.col("unit_id") * unit_bytes).alias("offset_bytes"),
            F.lit(unit_bytes).cast("long").alias("size_bytes"), F.lit(unit_bytes).cast("long").alias("unit_bytes"),
        ).select(*U.COLUMNS)
    extents = (requests.select("trace_id", "device", "offset_bytes", "size_bytes").distinct()
               .withColumn("_bucket", idiv(F.col("offset_bytes"), ID_BUCKET_BYTES)))
    per_bucket = extents.groupBy("trace_id", "device", "_bucket").agg(F.count(F.lit(1)).alias("_n"))
    below = Window.partitionBy("trace_id", "device").orderBy("_bucket").rowsBetween(Window.unboundedPreceding, -1)
    bases = per_bucket.select("trace_id", "device", "_bucket",
                              F.coalesce(F.sum("_n").over(below), F.lit(0)).alias("_base"))
    in_bucket = Window.partitionBy("trace_id", "device", "_bucket").orderBy("offset_bytes", "size_bytes")
    return (
        extents.join(bases, on=["trace_id", "device", "_bucket"], how="inner")
        .select("trace_id", "device", (F.col("_base") + F.row_number().over(in_bucket) - 1).alias("unit_id"),
                "offset_bytes", "size_bytes", F.lit(0).cast("long").alias("unit_bytes"))
        .select(*U.COLUMNS)
    )


def extend_reorg_units(units: DataFrame | None, requests: DataFrame, *, unit_bytes: int = 0) -> DataFrame:
    """`units` plus the units `requests` reference that it lacks, for a graph built one interval at a time.

    Existing ids never change, so graphs stored with them stay valid. New request units get ids after
    their device's highest, in (offset_bytes, size_bytes) order; fixed-size ids are offset_bytes //
    unit_bytes anyway. units=None: compute_reorg_units(requests). Output: schemas.reorg_units.COLUMNS.

        units = extend_reorg_units(day0_units, day1_requests)    # day 0's ids, then day 1's new units
    """
    fresh = compute_reorg_units(requests, unit_bytes=unit_bytes)
    if units is None:
        return fresh
    known = units.select(*U.COLUMNS)
    if unit_bytes:
        return known.unionByName(fresh.join(known.select("trace_id", "device", "unit_id"),
                                            on=["trace_id", "device", "unit_id"], how="left_anti"))
    new = fresh.join(known.select("trace_id", "device", "offset_bytes", "size_bytes"),
                     on=["trace_id", "device", "offset_bytes", "size_bytes"], how="left_anti")
    bases = known.groupBy("trace_id", "device").agg((F.max("unit_id") + 1).alias("_base"))
    order = Window.partitionBy("trace_id", "device").orderBy("offset_bytes", "size_bytes")
    numbered = new.join(bases, on=["trace_id", "device"], how="left").select(
        "trace_id", "device", (F.coalesce("_base", F.lit(0)) + F.row_number().over(order) - 1).alias("unit_id"),
        "offset_bytes", "size_bytes", "unit_bytes")
    return known.unionByName(numbered.select(*U.COLUMNS))


def unit_refs(requests: DataFrame, units: DataFrame, *, unit_bytes: int, interval_us: int) -> DataFrame:
    """The trace as a reference string of units: one row per (request, unit it touches).

    Input: schemas.requests columns and the trace's reorg_units rows (built with the same
    unit_bytes). Output: REF_COLUMNS; interval_id = ts_us // interval_us (intervals count from the
    trace's first record), sub = the unit's place within its request (0 for request units).
    """
    _check_unit_bytes(unit_bytes)
    if interval_us <= 0:
        raise ValueError(f"interval_us must be > 0, got {interval_us}")
    interval = idiv(F.col("ts_us"), interval_us).alias("interval_id")
    if unit_bytes:
        first, last = _fixed_range(unit_bytes)
        exploded = requests.select("trace_id", "device", interval, "ts_us", "seq", "op",
                                   F.posexplode(F.sequence(first, last)).alias("sub", "unit_id"))
        return exploded.select(*REF_COLUMNS)
    keyed = units.select("trace_id", "device", "offset_bytes", "size_bytes", "unit_id")
    return (
        requests.join(keyed, on=["trace_id", "device", "offset_bytes", "size_bytes"], how="inner")
        .select("trace_id", "device", interval, "ts_us", "seq", F.lit(0).alias("sub"), "op", "unit_id")
    )


def storage_used(requests: DataFrame) -> DataFrame:
    """Per device, the storage the trace uses: the highest byte address it references.

    The paper sizes the graph budget and the reorganized area as shares of the storage used
    (its volumes' size); a trace shows only the addresses touched, so the end of the highest
    extent stands in for the volume size. Output: trace_id, device, storage_used_bytes.
    """
    return requests.groupBy("trace_id", "device").agg(
        F.max(F.col("offset_bytes") + F.col("size_bytes")).alias("storage_used_bytes"))
