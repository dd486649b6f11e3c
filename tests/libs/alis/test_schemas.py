"""The ALIS tables' Spark and Arrow schemas agree, and their validators name what is wrong."""
from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from blockheat import schemas
from blockheat.schemas import access_graph, alis_graphs, alis_layout, alis_runs, alis_summary, reorg_units

MODULES = [reorg_units, access_graph, alis_runs, alis_layout, alis_summary, alis_graphs]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.TABLE)
def test_arrow_schema_matches_spark_schema(module):
    converted = to_arrow_schema(module.SPARK_SCHEMA, timezone="UTC")
    assert [(f.name, f.type, f.nullable) for f in converted] == [
        (f.name, f.type, f.nullable) for f in module.ARROW_SCHEMA]
    assert tuple(module.SPARK_SCHEMA.fieldNames()) == module.COLUMNS
    assert module.TABLE in schemas.TABLE_MODULES


def test_validators_name_missing_and_mistyped_columns():
    bad = pa.schema([pa.field(f.name, pa.int32() if f.name == "weight" else f.type)
                     for f in access_graph.ARROW_SCHEMA if f.name != "dst_unit"])
    message = r"access_graph: missing columns \['dst_unit'\]; column 'weight' is int32, expected double"
    with pytest.raises(access_graph.AccessGraphSchemaError, match=message):
        access_graph.validate_access_graph(bad)
    alis_runs.validate_alis_runs(alis_runs.ARROW_SCHEMA)
    with pytest.raises(alis_layout.AlisLayoutSchemaError, match=r"extra columns \['x'\]"):
        alis_layout.validate_alis_layout(alis_layout.ARROW_SCHEMA.append(pa.field("x", pa.int64())))
