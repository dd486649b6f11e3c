"""What every table module shares: its Arrow schema from plain (name, kind, nullable) triples, its Spark schema
derived from the Arrow one on first use (a table module imports no pyspark), and the schema comparison of every
validate_<table>()."""
from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


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


def check(df_or_schema: DataFrame | pa.Schema, arrow_schema: pa.Schema, error: type[ValueError], table: str) -> None:
    """Raise `error` naming the table and every problem, or return None when the schema matches (a DataFrame's
    against the Spark schema derived from `arrow_schema`)."""
    if isinstance(df_or_schema, pa.Schema):
        problems = arrow_problems(df_or_schema, arrow_schema)
    else:
        problems = schema_problems(df_or_schema.schema, spark_schema(arrow_schema))
    if problems:
        raise error(f"{table}: " + "; ".join(problems))


_KINDS: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "int": pa.int32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    # Named like Spark's own Arrow conversion (toArrow), so Arrow schemas compare equal as text too.
    "array<long>": pa.list_(pa.field("element", pa.int64())),
}


def flat_schema(fields: Sequence[tuple[str, str, bool]]) -> pa.Schema:
    """The Arrow schema of a flat table from (name, kind, nullable) triples."""
    unknown = [kind for _, kind, _ in fields if kind not in _KINDS]
    if unknown:
        raise ValueError(f"unknown column kinds {unknown}; known: {sorted(_KINDS)}")
    return pa.schema([pa.field(n, _KINDS[k], nullable) for n, k, nullable in fields])


def spark_schema(arrow_schema: pa.Schema) -> StructType:
    """The Spark schema of a table, derived from its Arrow schema (pyspark's own conversion)."""
    from pyspark.sql.pandas.types import from_arrow_schema  # lazy: importing a schema loads no pyspark

    return from_arrow_schema(arrow_schema)


def spark_schema_attr(module: str) -> Callable[[str], Any]:
    """A table module's __getattr__: SPARK_SCHEMA derived from the module's ARROW_SCHEMA on first use, then kept."""
    def __getattr__(name: str) -> Any:
        if name != "SPARK_SCHEMA":
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        found = spark_schema(sys.modules[module].ARROW_SCHEMA)
        sys.modules[module].SPARK_SCHEMA = found
        return found

    return __getattr__
