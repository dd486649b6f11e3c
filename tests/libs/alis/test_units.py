"""Reorganization units: request extents with dense ids in address order, fixed-size units, the
unit reference string and the storage a trace uses."""
from __future__ import annotations

import pytest

from blockheat.libs.alis.units import compute_reorg_units, storage_used, unit_refs
from blockheat.schemas import requests as R
from blockheat.schemas.reorg_units import validate_reorg_units

GIB = 1 << 30


def make_requests(spark, rows, trace_id="u"):
    """(device, seq, ts_us, op, offset_bytes, size_bytes) -> a `requests` DataFrame."""
    return spark.createDataFrame([(trace_id, d, s, t, op, o, n, None, None, "hand") for d, s, t, op, o, n in rows],
                                 R.SPARK_SCHEMA)


ROWS = [
    ("a", 0, 0, "R", 3 * GIB, 4096),
    ("a", 1, 10, "W", 0, 8192),
    ("a", 2, 20, "R", 4096, 4096),        # overlaps the request above only in part: its own unit
    ("a", 3, 30, "R", 0, 8192),           # same extent as seq 1: same unit
    ("a", 4, 2_000_000, "R", GIB + 512, 512),
    ("b", 5, 40, "R", 4096, 4096),        # same extent as seq 2, other device
]


def test_request_units_are_distinct_extents_numbered_in_address_order(spark):
    units = compute_reorg_units(make_requests(spark, ROWS))
    validate_reorg_units(units)
    got = sorted((r.device, r.unit_id, r.offset_bytes, r.size_bytes, r.unit_bytes) for r in units.collect())
    assert got == [("a", 0, 0, 8192, 0), ("a", 1, 4096, 4096, 0), ("a", 2, GIB + 512, 512, 0),
                   ("a", 3, 3 * GIB, 4096, 0), ("b", 0, 4096, 4096, 0)]


def test_fixed_size_units_cover_every_block_a_request_touches(spark):
    reqs = make_requests(spark, [("a", 0, 0, "R", 4096, 20480), ("a", 1, 5, "W", 0, 0), ("a", 2, 9, "R", 32768, 8192)])
    units = compute_reorg_units(reqs, unit_bytes=8192)
    assert sorted((r.unit_id, r.offset_bytes, r.size_bytes, r.unit_bytes) for r in units.collect()) == [
        (0, 0, 8192, 8192), (1, 8192, 8192, 8192), (2, 16384, 8192, 8192), (4, 32768, 8192, 8192)]
    refs = unit_refs(reqs, units, unit_bytes=8192, interval_us=100)
    assert sorted((r.seq, r.sub, r.op, r.unit_id) for r in refs.collect()) == [
        (0, 0, "R", 0), (0, 1, "R", 1), (0, 2, "R", 2), (1, 0, "W", 0), (2, 0, "R", 4)]


def test_unit_refs_number_intervals_from_the_first_record(spark):
    reqs = make_requests(spark, ROWS)
    refs = unit_refs(reqs, compute_reorg_units(reqs), unit_bytes=0, interval_us=1_000_000)
    assert sorted((r.device, r.seq, r.interval_id, r.op, r.unit_id) for r in refs.collect()) == [
        ("a", 0, 0, "R", 3), ("a", 1, 0, "W", 0), ("a", 2, 0, "R", 1), ("a", 3, 0, "R", 0), ("a", 4, 2, "R", 2),
        ("b", 5, 0, "R", 0)]


def test_storage_used_is_the_highest_byte_addressed(spark):
    got = {r.device: r.storage_used_bytes for r in storage_used(make_requests(spark, ROWS)).collect()}
    assert got == {"a": 3 * GIB + 4096, "b": 8192}


def test_bad_parameters_are_rejected(spark):
    reqs = make_requests(spark, ROWS)
    with pytest.raises(ValueError, match="unit_bytes must be 0"):
        compute_reorg_units(reqs, unit_bytes=-1)
    with pytest.raises(ValueError, match="interval_us must be > 0, got 0"):
        unit_refs(reqs, reqs, unit_bytes=0, interval_us=0)
