"""Exponential aging of per-key counts across reorganization intervals (ALIS section 5.1, eq. 1).

    value_new = alpha * value_current + (1 - alpha) * value_old

Used for aged reference counts (alpha) and aged access-graph edge weights (beta). Incremental:
interval N needs only interval N-1's aged values and interval N's raw values.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def age_values(current: DataFrame, previous: DataFrame | None, *, keys: Sequence[str], value: str,
               alpha: float, min_value: float = 0.0) -> DataFrame:
    """Blend this interval's raw `value` per key with the previous interval's aged `value`.

    Input: `current` and `previous` each have columns keys + [value] (one row per key).
    Output: keys + [value] for the union of keys; a key missing on one side counts 0 there.
    Keys whose aged value falls to `min_value` or below are dropped (0.0 keeps everything
    non-zero; aged values never reach 0 exactly, so a positive floor bounds the table's growth).

        aged = age_values(day2_counts, day1_aged, keys=["device", "unit_id"], value="count", alpha=0.8)
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if not keys:
        raise ValueError("age_values needs at least one key column")
    cols = [*keys, value]
    cur = current.select(*cols)
    if previous is None:
        # The first interval has no history: its aged value is alpha * raw, exactly what the
        # formula gives with value_old = 0, so a rebuild from scratch equals the incremental chain.
        blended = cur.select(*keys, (F.lit(alpha) * F.col(value).cast("double")).alias(value))
    else:
        old = previous.select(*keys, F.col(value).alias("_old"))
        joined = cur.withColumnRenamed(value, "_cur").join(old, on=list(keys), how="full_outer")
        blended = joined.select(
            *keys,
            (F.lit(alpha) * F.coalesce(F.col("_cur").cast("double"), F.lit(0.0))
             + F.lit(1.0 - alpha) * F.coalesce(F.col("_old").cast("double"), F.lit(0.0))).alias(value),
        )
    return blended.where(F.col(value) > F.lit(min_value))
