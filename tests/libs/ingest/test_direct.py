"""vSCSI's direct ingest (libs.ingest.direct): the summary pass, computed from the checks alone, gives
the totals of the decoded records themselves, range by range and merged."""
from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from blockheat.libs.ingest.direct import merge_summaries, summarize_vscsi
from blockheat.libs.readers.binary import ByteRange, VscsiFile, decode_vscsi


def summarize_decoded(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The reference: totals per device and reason of decode_vscsi's rows."""
    reason = batch.column("reason")
    accepted = np.asarray(pc.is_null(reason))
    rows = []
    if accepted.any():
        ok = batch.filter(pa.array(accepted))
        op = np.asarray(ok.column("op").to_numpy(zero_copy_only=False))
        size = ok.column("size_bytes").to_numpy()
        ts = ok.column("ts_raw_us").to_numpy()
        is_read = op == "R"
        rows.append({
            "device": ok.column("device")[0].as_py(), "reason": None, "n": ok.num_rows,
            "reads": int(is_read.sum()), "writes": int((~is_read).sum()),
            "bytes_read": int(size[is_read].sum()), "bytes_written": int(size[~is_read].sum()),
            "ts_min": int(ts.min()), "ts_max": int(ts.max()),
            "first_seq": int(ok.column("seq")[0].as_py()), "first_where": None, "first_message": None,
        })
    if not accepted.all():
        bad = batch.filter(pa.array(~accepted))
        codes = bad.column("reason").to_pylist()
        sources, positions = bad.column("source_file"), bad.column("byte_pos")
        for code in dict.fromkeys(codes):
            first = codes.index(code)
            rows.append({
                "device": None, "reason": code, "n": codes.count(code), "reads": 0, "writes": 0,
                "bytes_read": None, "bytes_written": None, "ts_min": None, "ts_max": None,
                "first_seq": bad.column("seq")[first].as_py(),
                "first_where": f"{sources[first].as_py()} byte {positions[first].as_py()}",
                "first_message": bad.column("message")[first].as_py(),
            })
    return rows



def _records() -> bytes:
    recs = []
    for i in range(40):
        cmd, ver, size, ts = (0x28 if i % 3 else 0x2A), 0x0100, 4096 * (1 + i % 4), 10_000_000 + i * 100
        if i in (3, 17):
            cmd = 0x00                                  # no data
        if i == 9:
            ver = 0x0200                                # wrong version in a v1 file
        if i in (11, 30):
            size = 0
        if i in (20, 21):
            ts -= 3_000_000                             # 20: back 3 s; 21 is checked against 20: in order
        recs.append(struct.pack("<IIIHHQQ", i, size, 1, cmd, ver, 8 * i, ts))
    return b"".join(recs) + b"\x07" * 13               # a truncated tail


def test_the_summary_equals_the_totals_of_the_decoded_records():
    data = _records()
    info = VscsiFile("vm", "vm.vscsi", 1000)
    rng = ByteRange("p", "file:///p", 0, len(data))
    decoded = decode_vscsi(data, rng, 1, info, tolerance_us=1_000_000)
    want = sorted(summarize_decoded(decoded), key=lambda r: r["first_seq"])
    got = sorted(summarize_vscsi(data, rng, 1, info, tolerance_us=1_000_000), key=lambda r: r["first_seq"])
    assert got == want
    assert [r["reason"] for r in got] == [None, "non_data_command", "bad_version", "nonpositive_size",
                                          "ts_backwards", "truncated_record"]
    assert [r["n"] for r in got] == [34, 2, 1, 2, 1, 1]
    assert [r["first_seq"] for r in got] == [1000, 1003, 1009, 1011, 1020, 1040]
    assert got[-1]["first_where"] == "vm.vscsi byte 1280"


def test_ranges_merge_to_the_whole():
    data = _records()
    info = VscsiFile("vm", "vm.vscsi", 0)
    whole = summarize_vscsi(data, ByteRange("p", "u", 0, len(data)), 1, info, tolerance_us=1_000_000)
    cut = 16 * 32
    first = summarize_vscsi(data[:cut], ByteRange("p", "u", 0, cut), 1, info, tolerance_us=1_000_000)
    prev_ts = struct.unpack("<Q", data[cut - 8:cut])[0]
    second = summarize_vscsi(data[cut:], ByteRange("p", "u", cut, len(data) - cut), 1, info,
                             tolerance_us=1_000_000, prev_ts=prev_ts)
    rows = [SimpleNamespace(**r, asDict=lambda r=r: dict(r)) for r in first + second]
    merged = {(m.device, m.reason): vars(m) for m in merge_summaries(rows)}
    assert merged == {(r["device"], r["reason"]): r for r in whole}


def test_unsigned_fields_past_their_range_are_rejected_not_wrapped():
    """lbn 2^64-1 (once offset_bytes = -512), 2^55+7 (once 3584), a timestamp 2^64-10 (once -10) and a v2
    response time 2^64-1: each a rejected record with its reason; the next records are compared with the last
    plausible timestamp, and the summary still equals the decoded totals."""
    def rec(sn: int, lbn: int, ts: int, rt: int = 5) -> bytes:
        return struct.pack("<HHIIIQQQ", 0x28, 0x0200, sn, 4096, 1, lbn, ts, rt)

    data = b"".join([
        rec(0, 8, 1_000_000),
        rec(1, (1 << 64) - 1, 1_000_010),
        rec(2, (1 << 55) + 7, 1_000_020),
        rec(3, 16, (1 << 64) - 10),
        rec(4, 24, 1_000_040, rt=(1 << 64) - 1),
        rec(5, ((1 << 63) - 1) // 512 - 8, 1_000_050),       # the last 4096-byte request ending below 2^63
        rec(6, ((1 << 63) - 1) // 512 - 7, 1_000_060),       # ends at 2^63: past 2^63 - 1
        rec(7, 32, 1_000_070),
    ])
    info = VscsiFile("vm", "vm.vscsi", 0)
    rng = ByteRange("p", "file:///p", 0, len(data))
    batch = decode_vscsi(data, rng, 2, info, tolerance_us=0)
    assert batch.column("reason").to_pylist() == [
        None, "offset_overflow", "offset_overflow", "ts_out_of_range", "bad_response", None, "offset_overflow", None]
    assert pc.drop_null(batch.column("message")).to_pylist() == [
        f"lbn {(1 << 64) - 1} x 512 bytes + length 4096 is past 2^63 - 1 bytes",
        f"lbn {(1 << 55) + 7} x 512 bytes + length 4096 is past 2^63 - 1 bytes",
        f"timestamp {(1 << 64) - 10} us is outside the plausible range (0 to 4102444800000000 us)",
        f"response time {(1 << 64) - 1} us is above 4102444800000000 us",
        f"lbn {((1 << 63) - 1) // 512 - 7} x 512 bytes + length 4096 is past 2^63 - 1 bytes",
    ]
    assert batch.column("offset_bytes").to_pylist() == [
        4096, None, None, 8192, 12288, (1 << 63) - 4096 - 512, None, 16384]
    assert batch.column("ts_raw_us").to_pylist() == [
        1_000_000, 1_000_010, 1_000_020, None, 1_000_040, 1_000_050, 1_000_060, 1_000_070]
    assert batch.column("response_us").to_pylist() == [5.0, 5.0, 5.0, 5.0, None, 5.0, 5.0, 5.0]
    summary = summarize_vscsi(data, rng, 2, info, tolerance_us=0)
    assert sorted(summary, key=lambda r: r["first_seq"]) == sorted(summarize_decoded(batch),
                                                                   key=lambda r: r["first_seq"])
    accepted = next(r for r in summary if r["reason"] is None)
    assert (accepted["n"], accepted["ts_min"], accepted["ts_max"]) == (3, 1_000_000, 1_000_070)
    assert sum(r["n"] for r in summary) == 8


def test_an_out_of_range_timestamp_before_a_range_is_not_its_reference():
    def rec(sn: int, ts: int) -> bytes:
        return struct.pack("<IIIHHQQ", sn, 4096, 1, 0x28, 0x0100, sn * 8, ts)

    data = rec(1, 500) + rec(2, 400)
    rng = ByteRange("p", "u", 32, len(data))
    batch = decode_vscsi(data, rng, 1, VscsiFile("vm", "vm.vscsi", 0), tolerance_us=0, prev_ts=(1 << 64) - 10)
    assert batch.column("reason").to_pylist() == [None, "ts_backwards"]
    assert pc.drop_null(batch.column("message")).to_pylist() == ["timestamp goes back 100 us (tolerance 0 us)"]
