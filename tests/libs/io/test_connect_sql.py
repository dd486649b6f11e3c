"""libs.io.connect_sql without a server: its protocol messages from pyspark's descriptors, and result rows exactly as
pyspark's own conversion of the same Arrow table gives them (Row.asDict(recursive=True))."""
from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql.conversion import ArrowTableToRowsConversion
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DateType,
    DecimalType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from blockheat.libs.io import connect_sql

UTC_TS = pa.timestamp("us", tz="UTC")
T1, T2 = dt.datetime(2020, 1, 1, 12, 30, 0, 5), dt.datetime(2021, 6, 30, 23, 59, 59)


def typed_table() -> tuple[pa.Table, StructType]:
    """A result of every converted kind, nulls included, and the Spark schema pyspark converts it with."""
    table = pa.table({
        "ts": pa.array([T1, None], UTC_TS),
        "ntz": pa.array([T2, None], pa.timestamp("us")),
        "tss": pa.array([[T1, None], None], pa.list_(UTC_TS)),
        "st": pa.array([{"n": 1, "t": T2}, None], pa.struct([("n", pa.int32()), ("t", UTC_TS)])),
        "m": pa.array([[("a", T1), ("b", None)], None], pa.map_(pa.string(), UTC_TS)),
        "d": pa.array([Decimal("2.50"), None], pa.decimal128(5, 2)),
        "day": pa.array([dt.date(2020, 1, 1), None], pa.date32()),
        "b": pa.array([b"\x01\x02", None], pa.binary()),
        "s": pa.array(["x", None], pa.string()),
    })
    schema = StructType([
        StructField("ts", TimestampType()), StructField("ntz", TimestampNTZType()),
        StructField("tss", ArrayType(TimestampType())),
        StructField("st", StructType([StructField("n", IntegerType()), StructField("t", TimestampType())])),
        StructField("m", MapType(StringType(), TimestampType())), StructField("d", DecimalType(5, 2)),
        StructField("day", DateType()), StructField("b", BinaryType()), StructField("s", StringType())])
    return table, schema


@pytest.mark.parametrize(("zone", "offset_min"), [("UTC", 0), ("America/New_York", -300), ("Asia/Kolkata", 330)])
def test_rows_are_pysparks_rows(zone, offset_min, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        table, schema = typed_table()
        expected = [r.asDict(recursive=True) for r in ArrowTableToRowsConversion.convert(table, schema)]
        got = connect_sql.table_rows(table)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert got == expected
    assert got[0]["ts"] == T1 + dt.timedelta(minutes=offset_min)          # local time (January: no daylight saving)
    assert got[0]["ntz"] == T2
    assert got[1] == dict.fromkeys(table.column_names)


def test_messages_come_from_pysparks_descriptors():
    m = connect_sql.messages()
    request = m.ExecutePlanRequest(session_id="s")
    request.plan.root.limit.limit = 3
    request.plan.root.limit.input.sql.query = "SELECT 1"
    parsed = m.ExecutePlanRequest.FromString(request.SerializeToString())
    assert (parsed.plan.root.limit.limit, parsed.plan.root.limit.input.sql.query) == (3, "SELECT 1")
    # the wire format pyspark's own classes read
    from pyspark.sql.connect.proto import base_pb2

    theirs = base_pb2.ExecutePlanRequest.FromString(request.SerializeToString())
    assert theirs.plan.root.limit.input.sql.query == "SELECT 1"
