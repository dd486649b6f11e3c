"""Schema validators name what is missing, extra or mistyped; Spark and Arrow schemas agree."""
from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from blockheat.schemas import rejected_records, requests, traces
from blockheat.schemas.requests import RequestsSchemaError, validate_requests
from blockheat.schemas.traces import TracesSchemaError, validate_traces


def test_the_table_modules_import_no_pyspark_and_derive_spark_schemas_from_arrow():
    """One definition per table: the Arrow schema, built with pyarrow alone; the Spark schema is pyspark's conversion
    of it, made on first use (importing every table module loads no pyspark)."""
    import importlib
    import subprocess
    import sys

    from pyspark.sql.pandas.types import from_arrow_schema

    from blockheat import schemas

    code = ("import importlib, sys; from blockheat import schemas; "
            "[importlib.import_module(f'blockheat.schemas.{m}') for m in schemas.TABLE_MODULES]; "
            "import blockheat.schemas.reorg_plan_json; "
            "print(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    for name in schemas.TABLE_MODULES:
        module = importlib.import_module(f"blockheat.schemas.{name}")
        assert "SPARK_SCHEMA" not in vars(module) or vars(module)["SPARK_SCHEMA"] == module.SPARK_SCHEMA
        assert from_arrow_schema(module.ARROW_SCHEMA) == module.SPARK_SCHEMA, name
        assert vars(module)["SPARK_SCHEMA"] is module.SPARK_SCHEMA                   # made once, then kept
    with pytest.raises(AttributeError, match="has no attribute 'NO_SUCH'"):
        _ = requests.NO_SUCH


@pytest.mark.parametrize("module", [requests, rejected_records, traces])
def test_arrow_schema_matches_spark_schema(module):
    converted = to_arrow_schema(module.SPARK_SCHEMA, timezone="UTC")
    assert [(f.name, f.type) for f in converted] == [(f.name, f.type) for f in module.ARROW_SCHEMA]
    assert tuple(module.SPARK_SCHEMA.fieldNames()) == module.COLUMNS


def test_validate_requests_accepts_its_own_schema(spark):
    df = spark.createDataFrame([], requests.SPARK_SCHEMA)
    validate_requests(df)
    validate_requests(requests.ARROW_SCHEMA)


def test_validate_requests_names_missing_extra_and_mistyped(spark):
    df = spark.createDataFrame([], "trace_id string, device string, seq int, ts_us long, op string, "
                                   "offset_bytes long, size_bytes long, response_us double, "
                                   "source_file string, lba long")
    with pytest.raises(RequestsSchemaError, match=r"requests: missing columns \['queue_us'\]; "
                                                  r"extra columns \['lba'\]; column 'seq' is int, expected bigint"):
        validate_requests(df)


def test_validate_traces_on_arrow(spark):
    bad = pa.schema([f for f in traces.ARROW_SCHEMA if f.name != "geometry"])
    with pytest.raises(TracesSchemaError, match=r"traces: missing columns \['geometry'\]"):
        validate_traces(bad)
