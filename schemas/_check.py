"""Shared schema comparison used by every table's validate_<table>()."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _diff(have: dict[str, str], want: dict[str, str]) -> list[str]:
    """Missing, extra and mistyped columns of `have` against `want` (name -> type name)."""
    problems = []
    if missing := [c for c in want if c not in have]:
        problems.append(f"missing columns {missing}")
    if extra := [c for c in have if c not in want]:
        problems.append(f"extra columns {extra}")
    problems += [f"column {c!r} is {have[c]}, expected {want[c]}"
                 for c in want if c in have and have[c] != want[c]]
    return problems


def schema_problems(actual: StructType, expected: StructType) -> list[str]:
    """Names every missing, extra or mistyped column of a Spark schema."""
    return _diff({f.name: f.dataType.simpleString() for f in actual.fields},
                 {f.name: f.dataType.simpleString() for f in expected.fields})


def arrow_problems(actual: pa.Schema, expected: pa.Schema) -> list[str]:
    """The same check for a pyarrow schema (the simulator and benchmarks exchange Arrow tables)."""
    return _diff({f.name: str(f.type) for f in actual}, {f.name: str(f.type) for f in expected})


def check(df_or_schema: DataFrame | pa.Schema, spark_schema: StructType, arrow_schema: pa.Schema,
          error: type[ValueError], table: str) -> None:
    """Raise `error` naming the table and every problem, or return None when the schema matches."""
    if isinstance(df_or_schema, pa.Schema):
        problems = arrow_problems(df_or_schema, arrow_schema)
    else:
        problems = schema_problems(df_or_schema.schema, spark_schema)
    if problems:
        raise error(f"{table}: " + "; ".join(problems))


_KINDS: dict[str, tuple[Any, pa.DataType]] = {
    "string": (T.StringType(), pa.string()),
    "long": (T.LongType(), pa.int64()),
    "int": (T.IntegerType(), pa.int32()),
    "double": (T.DoubleType(), pa.float64()),
    "boolean": (T.BooleanType(), pa.bool_()),
    # Named like Spark's own Arrow conversion (toArrow), so Arrow schemas compare equal as text too.
    "array<long>": (T.ArrayType(T.LongType(), True), pa.list_(pa.field("element", pa.int64()))),
}


def flat_schemas(fields: Sequence[tuple[str, str, bool]]) -> tuple[StructType, pa.Schema]:
    """Spark and Arrow schemas of a flat table from (name, kind, nullable) triples."""
    unknown = [kind for _, kind, _ in fields if kind not in _KINDS]
    if unknown:
        raise ValueError(f"unknown column kinds {unknown}; known: {sorted(_KINDS)}")
    spark = T.StructType([T.StructField(n, _KINDS[k][0], nullable) for n, k, nullable in fields])
    arrow = pa.schema([pa.field(n, _KINDS[k][1], nullable) for n, k, nullable in fields])
    return spark, arrow
