"""Column -> Column helpers shared by the transforms."""
from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType


def idiv(value: Column, divisor: int) -> Column:
    """Floor division of a non-negative long column by a positive int, exact for every long.

    PySpark columns have no `//`, and `/` goes through a double, which rounds (k * n + n - 1) / n
    up to k + 1 once the dividend passes 2**52; one long-arithmetic correction step fixes that.
    """
    if divisor <= 0:
        raise ValueError(f"divisor must be > 0, got {divisor}")
    n = F.lit(divisor).cast("long")
    q = F.floor(value / n).cast("long")
    return (F.when(q * n > value, q - 1).when((q + 1) * n <= value, q + 1).otherwise(q))


def window_start(window_us: int) -> Column:
    """Start (us since the trace start) of the ts_us window a row falls in; window_us = 0 is the
    whole trace, whose single window starts at 0."""
    if window_us < 0:
        raise ValueError(f"window_us must be >= 0 (0 = whole trace), got {window_us}")
    return (idiv(F.col("ts_us"), window_us) * window_us) if window_us else F.lit(0).cast("long")


def to_schema(df: DataFrame, schema: StructType) -> DataFrame:
    """Select exactly the schema's columns, in its order, cast to its types (the transform's contract)."""
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
