"""Pinned totals of the two bundled real traces, ingested end to end.

hplajw (HP SRT, one week of 1992): the totals below were derived independently with a plain
struct.unpack loop over the file (tests/libs/readers/test_srt.py pins the same numbers) and agree with
the format notes (44,519 records, 13,040 reads, 31,479 writes, 6.98 days).
hp_c2247a (DiskSim validate): 9,999 requests measured on a real HP C2247A.
"""
from __future__ import annotations

import pytest

from tests.builders import ingest, rejects_of, requests_of, trace_row

HPLAJW_SPAN_US = 603_064_588_892          # last enqueue time; the first is 0
HPLAJW_DEVICES = {
    # device: (records, reads, writes, first ts_us)
    "0": (42_252, 10_887, 31_365, 35_279),
    "1": (2_267, 2_153, 114, 0),
}


def test_hplajw_catalog_totals(spark, hplajw):
    row = trace_row(spark, "hplajw-test")
    assert row["records_read"] == 44_519
    assert row["records_accepted"] == 44_519
    assert row["records_rejected"] == 0
    assert row["reads"] == 13_040
    assert row["writes"] == 31_479
    assert row["bytes_read"] + row["bytes_written"] == 263_305_216
    assert row["span_us"] == HPLAJW_SPAN_US
    assert row["devices"] == ["0", "1"]
    assert row["start_time_utc"] is None  # tracedate is local time with no zone
    assert row["start_time_source"].startswith("1992-05-30T00:03:06 local time of hplajw.hpl.hp.com")
    assert row["source_files"][0]["size_bytes"] == 2_495_268


def test_hplajw_per_device_totals(spark, hplajw):
    got = spark.sql(
        "SELECT device, count(*) n, count_if(op = 'R') r, count_if(op = 'W') w, min(ts_us) t0 "
        "FROM requests WHERE trace_id = 'hplajw-test' GROUP BY device ORDER BY device").collect()
    assert {r.device: (r.n, r.r, r.w, r.t0) for r in got} == HPLAJW_DEVICES
    assert {d["device"]: d["records"] for d in hplajw.per_device} == {"0": 42_252, "1": 2_267}


def test_hplajw_first_request_decoded_in_bytes(spark, hplajw):
    first = requests_of(spark, "hplajw-test")[0]
    # First record: disk 1, sector 1056 of 256 bytes, 4096 bytes read, start 174 us, stop 19,687 us.
    assert {k: first[k] for k in ("seq", "device", "ts_us", "op", "offset_bytes", "size_bytes",
                                  "response_us", "queue_us")} == {
        "seq": 0, "device": "1", "ts_us": 0, "op": "R", "offset_bytes": 1056 * 256,
        "size_bytes": 4096, "response_us": 19_687.0, "queue_us": 174.0,
    }


def test_hplajw_geometry_from_header(spark, hplajw):
    geometry = {g["device"]: g for g in trace_row(spark, "hplajw-test")["geometry"]}
    for disk in ("0", "1"):
        g = geometry[disk]
        assert (g["disk_type"], g["sectors_per_track"], g["tracks_per_cylinder"], g["cylinders"],
                g["rpm"], g["sector_size"], g["head_switch_us"], g["overhead_us"], g["sector_skew"]) == (
            "hp335h", 113, 8, 1449, 4002, 256, 1000, 1100, 12)


def test_hplajw_seq_is_record_order(spark, hplajw):
    row = spark.sql("SELECT min(seq), max(seq), count(DISTINCT seq) FROM requests "
                    "WHERE trace_id = 'hplajw-test'").first()
    assert tuple(row) == (0, 44_518, 44_519)


def test_disksim_validation_trace_closed_loop_times(spark, spark_cfg, repo_root):
    ingest(spark, spark_cfg, "disksim-validate", "c2247a-test",
           [repo_root / "data/traces/disksim-validation/hp_c2247a.trace"])
    row = trace_row(spark, "c2247a-test")
    assert (row["records_read"], row["records_accepted"], row["records_rejected"]) == (9_999, 9_999, 0)
    rows = requests_of(spark, "c2247a-test")
    # First lines: "R Miss 564347 2 14095.370 13876.270" and "R Hit 564349 2 1414.270 18746.770":
    # the second request arrives access + idle gap after the first (closed loop).
    assert [(r["op"], r["offset_bytes"], r["size_bytes"], r["response_us"], r["ts_us"]) for r in rows[:3]] == [
        ("R", 564_347 * 512, 1024, 14_095.37, 0),
        ("R", 564_349 * 512, 1024, 1_414.27, 27_972),      # round(14095.370 + 13876.270 = 27971.64)
        ("R", 564_351 * 512, 1024, 1_476.75, 48_133),      # round(27971.64 + 1414.27 + 18746.77 = 48132.68)
    ]
    mean_ms = sum(r["response_us"] for r in rows) / len(rows) / 1000
    assert mean_ms == pytest.approx(15.30, abs=0.005)  # the format notes' measured mean
    assert rejects_of(spark, "c2247a-test") == []
