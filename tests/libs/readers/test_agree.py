"""Every reader, fed the same six requests in its own format, writes the same `requests` rows."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from blockheat.libs.readers.text_formats import custom_layout
from tests.builders import ingest, rejects_of, requests_of, trace_row
from tests.data.make_fixtures import CANONICAL, DEVICES

AGREE = Path(__file__).parents[2] / "data" / "agree"
CUSTOM = custom_layout(
    {"ts": 0, "device": 1, "op": 2, "offset": 3, "size": 4, "response": 5},
    delimiter=";", ts_unit="s", offset_unit_bytes=512, response_unit="ms",
    read_ops=("read",), write_ops=("write",), skip_header_lines=1,
)

# format key -> (reader format, files, options, has response time, seconds-only timestamps)
CASES: dict[str, tuple[str, list[str], dict[str, Any], bool, bool]] = {
    "msr": ("msr", ["msr_fix_0.csv", "msr_fix_1.csv"], {}, True, False),
    "spc": ("spc", ["spc.csv"], {}, False, False),
    "alibaba": ("alibaba", ["alibaba.csv"], {}, False, False),
    "tencent": ("tencent", ["tencent.csv"], {}, False, True),
    "disksim-ascii": ("disksim-ascii", ["disksim.ascii"], {}, False, False),
    "blkparse": ("blkparse", ["blkparse.txt"], {}, True, False),
    "vscsi-v1": ("vscsi", ["dev0.v1.vscsi", "dev1.v1.vscsi"], {}, False, False),
    "vscsi-v2": ("vscsi", ["dev0.v2.vscsi", "dev1.v2.vscsi"], {}, True, False),
    "hp-srt": ("hp-srt", ["canonical.srt"], {}, True, False),
    "csv": ("csv", ["custom.csv"], {"layout": CUSTOM}, True, False),
}


def expected_rows(key: str) -> list[tuple[Any, ...]]:
    _, _, _, has_rt, whole_seconds = CASES[key]
    names = DEVICES[key]
    rows = []
    for ts, dev, op, off, size, rt in CANONICAL:
        ts_us = (ts // 1_000_000) * 1_000_000 if whole_seconds else ts
        rows.append((names[dev], ts_us, op, off, size, float(rt) if has_rt else None))
    return sorted(rows, key=lambda r: (r[1], r[0], r[3]))


@pytest.mark.parametrize("key", sorted(CASES))
def test_reader_agrees_with_canonical_requests(spark, spark_cfg, key):
    fmt, files, options, _, _ = CASES[key]
    trace_id = f"agree-{key}"
    summary = ingest(spark, spark_cfg, fmt, trace_id, [AGREE / f for f in files], **options)
    got = sorted(
        ((r["device"], r["ts_us"], r["op"], r["offset_bytes"], r["size_bytes"], r["response_us"])
         for r in requests_of(spark, trace_id)),
        key=lambda r: (r[1], r[0], r[3]),
    )
    assert got == expected_rows(key)
    row = trace_row(spark, trace_id)
    assert row is not None
    assert row["records_read"] == row["records_accepted"] + row["records_rejected"]
    assert row["records_accepted"] == 6
    assert (row["reads"], row["writes"]) == (3, 3)
    assert row["bytes_read"] == 4096 + 512 + 65536
    assert row["bytes_written"] == 8192 + 4096 + 4096
    assert sorted(row["devices"]) == sorted(DEVICES[key])
    assert summary.trace["records_read"] == row["records_read"]


def _source_records(path: Path, fmt: str) -> int:
    """Records in a source file counted independently of the readers."""
    data = path.read_bytes()
    if fmt == "vscsi":
        return len(data) // (32 if ".v1." in path.name else 40)
    if fmt == "hp-srt":
        return (len(data) - data.index(b"\x0c") - 1) // 56
    return len(data.decode().splitlines())


@pytest.mark.parametrize("key", sorted(CASES))
def test_every_source_record_is_accounted_for(spark, key):
    """records_read = accepted + rejected, and records_read = the records in the files."""
    fmt, files, _, _, _ = CASES[key]
    row = trace_row(spark, f"agree-{key}")
    assert row is not None, "runs after test_reader_agrees_with_canonical_requests"
    assert row["records_read"] == sum(_source_records(AGREE / f, fmt) for f in files)
    assert row["records_rejected"] == sum(row["rejected_by_reason"].values())
    assert len(rejects_of(spark, f"agree-{key}")) == row["records_rejected"]


def test_seq_follows_files_in_given_order_then_lines(spark):
    # msr: file fix_0 holds canonical requests 0,1,3,5 and file fix_1 holds 2,4.
    rows = requests_of(spark, "agree-msr")
    assert [(r["seq"], r["device"], r["ts_us"]) for r in rows] == [
        (0, "fix_0", 0), (1, "fix_0", 250), (2, "fix_0", 500_000), (3, "fix_0", 2_000_000),
        (4, "fix_1", 1_000), (5, "fix_1", 1_250_000),
    ]


def test_blkparse_keeps_issue_events_and_explains_every_other_line(spark):
    rows = requests_of(spark, "agree-blkparse")
    # seq is the 0-based line of the D event in blkparse.txt
    assert [r["seq"] for r in rows] == [3, 7, 11, 18, 23, 28]
    row = trace_row(spark, "agree-blkparse")
    assert row["rejected_by_reason"] == {
        "completion_event": 6, "ignored_event": 19, "no_data": 1, "blank_line": 1, "summary_line": 4,
    }


def test_srt_fixture_keeps_queue_time_and_geometry(spark):
    rows = requests_of(spark, "agree-hp-srt")
    assert {r["queue_us"] for r in rows} == {100.0}
    geometry = {g["device"]: g for g in trace_row(spark, "agree-hp-srt")["geometry"]}
    assert geometry["0"]["sectors_per_track"] == 113
    assert geometry["0"]["sector_size"] == 256
    assert geometry["1"]["seek_params"] == [616, 3450, 597, 10840, 12, 2500]


def test_absolute_start_times_from_epoch_formats(spark):
    import datetime as dt

    def start(trace: str) -> dt.datetime | None:
        value = trace_row(spark, trace)["start_time_utc"]  # the session time zone is UTC
        return None if value is None else value.replace(tzinfo=dt.UTC)

    assert start("agree-alibaba") == dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    assert start("agree-tencent") == dt.datetime(2018, 10, 1, tzinfo=dt.UTC)
    # FILETIME 128166372000000000 ticks, by hand: 12816637200 s - 11644473600 s (1601 -> 1970)
    # = 1172163600 s after 1970 = 2007-02-22 17:00:00 UTC
    assert start("agree-msr") == dt.datetime(2007, 2, 22, 17, 0, tzinfo=dt.UTC)
    assert start("agree-spc") is None
