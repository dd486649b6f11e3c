"""Binary decoding without Spark (vSCSI, HP SRT): each rejected record gets its own reason and message."""
from __future__ import annotations

import struct

import pyarrow.compute as pc

from blockheat.libs.readers.binary import ByteRange, VscsiFile, decode_vscsi


def test_messages_follow_their_records_when_a_check_rejects_many():
    cmds = [0x28, 0x00, 0x12, 0x2A, 0x1A, 0x28, 0x25]   # 0x00, 0x12, 0x1A, 0x25 carry no data
    data = b"".join(struct.pack("<IIIHHQQ", i, 4096, 1, c, 0x0100, i, i * 10) for i, c in enumerate(cmds))
    batch = decode_vscsi(data, ByteRange("x", "file:///x", 0, len(data)), 1, VscsiFile("vm", "x", 100),
                         tolerance_us=0)
    assert batch.column("reason").to_pylist() == [
        None, "non_data_command", "non_data_command", None, "non_data_command", None, "non_data_command"]
    assert pc.drop_null(batch.column("message")).to_pylist() == [
        f"SCSI opcode 0x{c:02x} carries no data" for c in (0x00, 0x12, 0x1A, 0x25)]
    assert batch.column("seq").to_pylist() == list(range(100, 107))


def test_binary_ranges_come_in_multiples_of_the_cores():
    from blockheat.libs.ingest.pipeline import _balanced

    assert _balanced(400_000_000, 64 << 20, 2) == 66_666_667     # 6 ranges (not 5 of 64 MiB and a short one)
    assert _balanced(16 * 32, 4 * 32, 2) == 4 * 32                # 4 ranges already: unchanged
    assert _balanced(12 * 32, 4 * 32, 2) == 3 * 32                # 3 -> 4 ranges
    assert _balanced(10, 64 << 20, 4) == 3                        # tiny file: vscsi_ranges rounds up to a record


def _srt_record(*, size: int = 4096, sector: int = 100, enqueue_s: int = 1, record_bytes: int = 56) -> bytes:
    words = [record_bytes, 0x00040001, enqueue_s, 0, 10, 250, size, sector, 0 << 8, 0, 0, 1, 0, 0]
    return struct.pack(">14I", *words)[:record_bytes]


def test_srt_numbers_past_their_range_are_rejected_with_a_reason():
    from blockheat.libs.readers.binary import decode_srt

    records = [
        _srt_record(),
        _srt_record(enqueue_s=0xFFFF_FFFF),                  # 4.29e15 us: past 2100
        _srt_record(sector=0xFFFF_FFFF),                     # x 2^33-byte sectors: past 2^63
        _srt_record(record_bytes=40),                        # no ioflags word (the decoder's -1)
        _srt_record(enqueue_s=2),
    ]
    body = b"".join(records)
    batch = decode_srt(body, ByteRange("x", "file:///x", 1000, len(body)), {0: 1 << 33})
    assert batch.column("reason").to_pylist() == [None, "ts_out_of_range", "offset_overflow", "short_record", None]
    assert pc.drop_null(batch.column("message")).to_pylist() == [
        "enqueue time 4294967295 s 0 us is outside the plausible range (0 to 4102444800000000 us)",
        f"sector 4294967295 x {1 << 33} bytes + size 4096 is past 2^63 - 1 bytes",
        "record of 40 bytes ends before its ioflags word (48 bytes needed)",
    ]
    assert batch.column("byte_pos").to_pylist() == [1000, 1056, 1112, 1168, 1208]
    assert batch.column("ts_raw_us").to_pylist() == [1_000_000, None, 1_000_000, 1_000_000, 2_000_000]
    assert batch.column("offset_bytes").to_pylist() == [100 << 33, 100 << 33, None, 100 << 33, 100 << 33]


def test_an_srt_enqueue_microseconds_word_of_a_second_or_more_is_rejected():
    """A -1 word (4294967295) once moved the record 71 minutes later; 999999 is the largest microsecond."""
    from blockheat.libs.readers.binary import decode_srt

    def record(enqueue_us: int) -> bytes:
        words = [56, 0x00040001, 7, enqueue_us, 10, 250, 4096, 100, 0, 0, 0, 1, 0, 0]
        return struct.pack(">14I", *words)

    body = record(999_999) + record(0xFFFF_FFFF) + record(1_000_000)
    batch = decode_srt(body, ByteRange("x", "file:///x", 0, len(body)), {0: 512})
    assert batch.column("reason").to_pylist() == [None, "bad_timestamp", "bad_timestamp"]
    assert pc.drop_null(batch.column("message")).to_pylist() == [
        "enqueue time microseconds word 4294967295 is not below 1000000",
        "enqueue time microseconds word 1000000 is not below 1000000"]
    assert batch.column("ts_raw_us").to_pylist() == [7_999_999, None, None]
