"""Interarrival heat tracking per extent (FIVE section 3.3) with selective aging, as window functions.

After the n-th request to an extent at t_n the estimate is k * R / (t_n - t_(n-k+1)) blocks per
second, R the mean blocks per request over the last k requests. Choices the paper leaves open:
- before the k-th request the estimate uses the n requests seen so far (k replaced by n); one
  request alone gives no estimate (NULL), since one time stamp has no interarrival time;
- a zero time span (requests in the same microsecond) counts as 1 us, the trace's resolution;
- a pseudo request at t' (every P seconds, t' = P, 2P, ...) computes k * R / (t' - t_(n-k+2)) with
  the R of the last real request and lowers the estimate only if that is lower; the real request
  history is not changed, so each later pseudo request ages from the same t_(n-k+2) ("k" again
  replaced by n while n < k);
- a checkpoint at t' sees the requests strictly before t'; its true heat is the blocks accessed in
  [t', t' + P) per second, and only checkpoints whose whole following period lies inside the trace
  are produced.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from blockheat.libs.columns import idiv, to_schema
from blockheat.libs.transforms.heat import split_at
from blockheat.schemas import heat_tracking as HT

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def _check(k: int, aging_period_us: int | None = None) -> None:
    if k < 2:
        raise ValueError(f"k must be >= 2 (the estimate needs an interarrival time), got {k}")
    if aging_period_us is not None and aging_period_us <= 0:
        raise ValueError(f"aging_period_us must be > 0, got {aging_period_us}")


def with_tracked_heat(pieces: DataFrame, *, k: int) -> DataFrame:
    """Adds the estimate after each request to its extent.

    Input: device, extent_id, seq, ts_us, blocks (libs.transforms.heat.split_at output).
    Adds: n (requests so far), m = min(n, k), mean_blocks (R), heat (blocks/s, NULL when n = 1),
    age_from_us (t_(n-k+2), the base of pseudo-request aging), next_ts_us (the extent's next request).
    """
    _check(k)
    w = Window.partitionBy("device", "extent_id").orderBy("ts_us", "seq")
    last_k = w.rowsBetween(-(k - 1), Window.currentRow)
    so_far = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    n = F.row_number().over(w)
    oldest = F.when(n >= k, F.lag("ts_us", k - 1).over(w)).otherwise(F.first("ts_us").over(so_far))
    age_from = F.when(n >= k, F.lag("ts_us", k - 2).over(w)).otherwise(F.nth_value("ts_us", 2).over(so_far))
    tracked = pieces.select(
        "*", n.alias("n"), F.least(n, F.lit(k)).alias("m"), F.avg("blocks").over(last_k).alias("mean_blocks"),
        oldest.alias("_oldest"), age_from.alias("age_from_us"), F.lead("ts_us", 1).over(w).alias("next_ts_us"))
    return tracked.withColumn(
        "heat", F.when(F.col("n") >= 2, _rate(F.col("m") * F.col("mean_blocks"), F.col("ts_us") - F.col("_oldest")))
    ).drop("_oldest")


def _rate(blocks: Column, span_us: Column) -> Column:
    return blocks * F.lit(1e6) / F.greatest(span_us, F.lit(1)).cast("double")


def aged_heat(tracked_heat: Column, m: Column, mean_blocks: Column, age_from_us: Column, at_us: Column) -> Column:
    """Selective aging at a pseudo request at `at_us`: min(heat, m * R / (at - t_(n-k+2)))."""
    return F.when(tracked_heat.isNotNull(), F.least(tracked_heat, _rate(m * mean_blocks, at_us - age_from_us)))


def compute_heat_tracking(requests: DataFrame, *, extent_bytes: int = 1 << 20, k: int = 10,
                          aging_period_us: int = 3_600_000_000, span_us: int) -> DataFrame:
    """Tracked heat per extent at every checkpoint (multiples of the aging period P), with and
    without aging, next to the true heat of the following period.

    Input: `requests` rows of one trace; span_us its time span. Output: schemas.heat_tracking.COLUMNS.
    Partitioned by extent throughout, so it scales with the number of extents.
    """
    _check(k, aging_period_us)
    p = aging_period_us
    last_j = span_us // p - 1  # the last checkpoint whose following period ends inside the trace
    pieces = split_at(requests, extent_bytes)
    tracked = with_tracked_heat(pieces, k=k)
    # Request n's state holds for checkpoints j*P in (t_n, t_(n+1)]: a checkpoint sees only earlier requests.
    first_j = idiv(F.col("ts_us"), p) + 1
    upto_j = F.least(F.coalesce(idiv(F.col("next_ts_us"), p), F.lit(last_j)), F.lit(last_j))
    states = tracked.select(
        "device", "extent_id", "n", "m", "mean_blocks", "heat", "age_from_us",
        F.explode(F.when(first_j <= upto_j, F.sequence(first_j, upto_j)).otherwise(F.array().cast("array<long>")))
        .alias("j"))
    at = F.col("j") * p
    estimates = states.select(
        "device", "extent_id", "j", (at).alias("checkpoint_us"), F.col("n").alias("requests_seen"),
        aged_heat(F.col("heat"), F.col("m"), F.col("mean_blocks"), F.col("age_from_us"), at).alias("heat"),
        F.col("heat").alias("heat_no_aging"))
    truth = (pieces.groupBy("device", "extent_id", idiv(F.col("ts_us"), p).alias("j"))
             .agg((F.sum("blocks") / F.lit(p / 1e6)).alias("true_heat")))
    return (
        estimates.join(truth, on=["device", "extent_id", "j"], how="left")
        .select(F.lit("").alias("trace_id"), "device", F.lit(extent_bytes).cast("long").alias("extent_bytes"),
                "extent_id", F.lit(k).alias("k"), F.lit(p).cast("long").alias("aging_period_us"),
                "checkpoint_us", "requests_seen", "heat", "heat_no_aging",
                F.coalesce("true_heat", F.lit(0.0)).alias("true_heat"))
        .transform(lambda df: to_schema(df, HT.SPARK_SCHEMA))
    )
