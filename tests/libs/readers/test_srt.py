"""Tests for libs.readers.srt against the real HP SRT trace ajw.1week.srt and hand-built records."""

from __future__ import annotations

import collections
import struct
from pathlib import Path

import numpy as np
import pytest

from blockheat.libs.readers import srt
from blockheat.libs.readers.srt import (
    RECORD_FIELDS,
    SrtFormatError,
    SrtHeader,
    decode_srt_records,
    find_record_offsets,
    parse_srt_header,
    read_srt,
    tracedate_to_iso,
)

RealTrace = tuple[SrtHeader, dict[str, np.ndarray], np.ndarray, int]

TRACE = Path(__file__).resolve().parents[3] / "data" / "traces" / "hplajw" / "ajw.1week.srt"

# ---- Values pinned from the real trace (derived with the struct reference loop below and `xxd`). ----
FILE_SIZE = 2_495_268
DATA_OFFSET = 2204
N_RECORDS = 44_519
N_READS = 13_040
N_WRITES = 31_479
N_ASYNC = 17_429
TOTAL_BYTES = 263_305_216
PER_DISK = {0: 42_252, 1: 2_267}
READS_PER_DISK = {0: 10_887, 1: 2_153}
WRITES_PER_DISK = {0: 31_365, 1: 114}
PER_DISK_SECTION = {(0, 8): 40_295, (0, 14): 1_055, (0, 15): 902, (1, 7): 2_267}
PER_MAJOR = {8: 44_517, 7: 2}
FIRST_ENQUEUE = (0, 0)
LAST_ENQUEUE = (603_064, 588_892)  # seconds, microseconds: 6.9799 days
MAX_QUEUE_LENGTH = 104

# `xxd -p -s 2204 -l 56 ajw.1week.srt`: size 56, id 0x00040001, enqueue 0 s 0 us, start 174, stop 19687,
# 4096 bytes | sector 1056, devno 0x08000107, driver 4, cylinder 1, ioflags 0x1b, info 0x70000, qlen 1.
FIRST_RECORD_HEX = (
    "00000038000400010000000000000000000000ae00004ce700001000"
    "000004200800010700000004000000010000001b0007000000000001"
)
FIRST_RECORD_WORDS = (56, 0x40001, 0, 0, 174, 19_687, 4096, 1056, 0x08000107, 4, 1, 0x1B, 0x70000, 1)
FIRST_RECORD = {
    "record_size": 56,
    "version": 4,
    "record_type": 1,
    "enqueue_s": 0,
    "enqueue_us": 0,
    "start_us": 174,
    "stop_us": 19_687,
    "size_bytes": 4096,
    "sector": 1056,
    "major": 8,
    "disk": 1,
    "section": 7,
    "driver_type": 4,
    "cylinder": 1,
    "ioflags": 0x1B,  # read, synchronous
    "info": 0x70000,
    "queue_length": 1,
}
# `xxd -p -s 2495212 -l 56 ajw.1week.srt`
LAST_RECORD = {
    "record_size": 56,
    "version": 4,
    "record_type": 1,
    "enqueue_s": 603_064,
    "enqueue_us": 588_892,
    "start_us": 32_060,
    "stop_us": 61_615,
    "size_bytes": 8192,
    "sector": 674_032,
    "major": 8,
    "disk": 0,
    "section": 8,
    "driver_type": 4,
    "cylinder": 745,
    "ioflags": 0x8810A,  # write, asynchronous
    "info": 0x22000F,
    "queue_length": 2,
}


def _reference_records(data: bytes, start: int) -> list[tuple[int, ...]]:
    """Slow, obviously-correct decoder: walk with struct, 14 big-endian words per record."""
    out: list[tuple[int, ...]] = []
    off = start
    while off + 4 <= len(data):
        (size,) = struct.unpack_from(">I", data, off)
        if size < 8 or size % 4 or off + size > len(data):
            break
        out.append(struct.unpack_from(">14I", data, off))
        off += size
    return out


@pytest.fixture(scope="module")
def trace_bytes() -> bytes:
    return TRACE.read_bytes()


@pytest.fixture(scope="module")
def real(trace_bytes: bytes) -> RealTrace:
    return read_srt(str(TRACE))


@pytest.fixture(scope="module")
def reference(trace_bytes: bytes) -> list[tuple[int, ...]]:
    return _reference_records(trace_bytes, DATA_OFFSET)


# ------------------------------------------------------------------------------------------ header


def test_real_header(trace_bytes: bytes) -> None:
    assert len(trace_bytes) == FILE_SIZE
    h = parse_srt_header(trace_bytes[: 1 << 20], source=str(TRACE))
    assert h.version == "1.3"
    assert h.tracedate == "Sat May 30 00:03:06 1992"
    assert h.system == "hplajw.hpl.hp.com"
    assert h.fields["machinetype"] == "9000/845"
    assert h.fields["osversion"] == "HP-UX A.08.00 U"
    assert h.fields["physmem"] == "33554432"
    assert "disks" not in h.fields
    assert h.data_offset == DATA_OFFSET
    assert trace_bytes[DATA_OFFSET - 1] == 0x0C
    assert sorted(h.disks) == [0, 1]

    d0 = h.disks[0]
    assert d0.number == 0
    assert d0.disktype == "hp335h"
    assert (d0.sectors_per_track, d0.tracks_per_cylinder, d0.cylinders) == (113, 8, 1449)
    assert d0.rpm == 4002
    assert d0.overhead_us == 1100
    assert d0.head_switch_us == 1000
    assert d0.sector_skew == 12
    assert d0.seek_params == (616, 3450, 597, 10840, 12, 2500)
    assert d0.sector_size == 256
    assert d0.block_size == 8192
    assert [(s.number, s.name, s.start_sector, s.size_bytes) for s in d0.sections] == [
        (8, "/", 171_760, 291_362_816),
        (14, "<swap>", 74_128, 24_862_720),
        (15, "<swap2>", 8_136, 16_777_216),
    ]
    assert d0.raw["readchar"] == "oncrossing"
    assert d0.raw["description"] == "none"
    assert d0.raw["nspt"] == "113"
    assert "seekparms" not in d0.raw  # not a scalar

    d1 = h.disks[1]
    assert d1.cylinders == 1449
    assert d1.raw["description"] == "section 8 not included since this where the data was collected"
    assert [(s.number, s.name, s.start_sector, s.size_bytes) for s in d1.sections] == [
        (7, "<swap>", 0, 43_970_560)
    ]


def test_tracedate_to_iso() -> None:
    assert tracedate_to_iso("Sat May 30 00:03:06 1992") == "1992-05-30T00:03:06"
    assert tracedate_to_iso("Mon Jun  1 23:59:59 1992") == "1992-06-01T23:59:59"


SYNTH_HEADER = (
    b"$$TR_IOREC-2.0 (synthetic)\x00\n"
    b'tracedate = "Mon Jun  1 10:00:00 1992"; speed=fast;\n'
    b"extra = {a, b}; arrow = 3 -> { x , 1.5 };\n"
    b"disks = {5 -> {disktype = rz26, nspt = 57, ntpc = 14, ncyl = 2570, rpm = 5400,"
    b" overhead = 900, headswitch = 800, sectorskew = 3, seekparms = {1, 2},"
    b" blocksize = 4096, sectorsize = 512,"
    b' sections = { 0 -> { "a b", size = (0 1024), swap = ( 0 1024 ) }, }, }};'
    b"\x0c\x00\x00\x00\x08"
)


def test_synthetic_header_other_layout() -> None:
    h = parse_srt_header(SYNTH_HEADER)
    assert h.version == "2.0"  # no `version` key: taken from the banner
    assert h.tracedate == "Mon Jun  1 10:00:00 1992"
    assert h.system is None
    assert h.fields == {"tracedate": "Mon Jun  1 10:00:00 1992", "speed": "fast"}
    assert h.data_offset == SYNTH_HEADER.index(b"\x0c") + 1
    (disk,) = h.disks.values()
    assert disk.number == 5
    assert (disk.disktype, disk.sectors_per_track, disk.tracks_per_cylinder) == ("rz26", 57, 14)
    assert (disk.cylinders, disk.rpm, disk.sector_size, disk.block_size) == (2570, 5400, 512, 4096)
    assert disk.seek_params == (1, 2)
    assert disk.sections == (srt.SrtSection(number=0, name="a b", start_sector=0, size_bytes=1024),)


# ---------------------------------------------------------------------------------- header errors


def test_header_bad_magic() -> None:
    want = r"^trace\.bin: byte 0: expected '\$\$TR_IOREC' header, found b'\\x00\\x00\\x008garbage'$"
    with pytest.raises(SrtFormatError, match=want):
        parse_srt_header(b"\x00\x00\x00\x38garbage", source="trace.bin")


def test_header_missing_form_feed() -> None:
    data = SYNTH_HEADER[: SYNTH_HEADER.index(b"\x0c")]
    want = rf"^x\.srt: byte {len(data)}: no end-of-header form feed \(0x0C\) in the first {len(data)} bytes$"
    with pytest.raises(SrtFormatError, match=want):
        parse_srt_header(data, source="x.srt")


def test_header_malformed_disks_names_offset() -> None:
    # Missing ',' between two disk entries.
    bad = SYNTH_HEADER.replace(b"}};\x0c", b"} 6 -> {}};\x0c")
    where = bad.index(b" 6 -> {}") + 1
    want = rf"^x\.srt: byte {where}: expected ',' or '\}}' in block, found '6'$"
    with pytest.raises(SrtFormatError, match=want):
        parse_srt_header(bad, source="x.srt")

    # Unclosed `disks` block: the statement's ';' arrives where ',' or '}' was expected.
    unclosed = SYNTH_HEADER.replace(b"}};\x0c", b"};\x0c")
    semi = unclosed.index(b";\x0c")
    with pytest.raises(SrtFormatError, match=rf"byte {semi}: expected ',' or '\}}' in block, found ';'"):
        parse_srt_header(unclosed, source="x.srt")

    # Header cut off inside the disks structure (form feed too early).
    cut = SYNTH_HEADER[: SYNTH_HEADER.index(b"sections")] + b"\x0c"
    disk_open = cut.index(b"5 -> {") + 5  # the innermost open block is disk 5's
    want = rf"byte {len(cut) - 1}: expected '\}}' closing the block opened at byte {disk_open}$"
    with pytest.raises(SrtFormatError, match=want):
        parse_srt_header(cut, source="x.srt")

    # Disk entry without a geometry key.
    nogeo = SYNTH_HEADER.replace(b" ncyl = 2570,", b"")
    block_at = nogeo.index(b"5 -> {") + len(b"5 -> ")
    with pytest.raises(SrtFormatError, match=rf"byte {block_at}: expected key 'ncyl' in the block of disk 5"):
        parse_srt_header(nogeo)

    # Non-integer geometry value.
    badint = SYNTH_HEADER.replace(b"rpm = 5400", b"rpm = fast")
    with pytest.raises(SrtFormatError, match=rf"byte {badint.index(b'fast,')}: expected an integer"):
        parse_srt_header(badint)


# ---------------------------------------------------------------------------------- real records


def test_reference_loop_matches_pinned(reference: list[tuple[int, ...]], trace_bytes: bytes) -> None:
    recs = reference
    assert len(recs) == N_RECORDS
    assert DATA_OFFSET + 56 * N_RECORDS == FILE_SIZE
    assert {(r[0], r[1]) for r in recs} == {(56, (4 << 16) | 1)}
    assert sum(1 for r in recs if r[11] & 1) == N_READS
    assert sum(1 for r in recs if not r[11] & 1) == N_WRITES
    assert sum(1 for r in recs if r[11] & 0x100) == N_ASYNC
    assert sum(r[6] for r in recs) == TOTAL_BYTES
    assert dict(collections.Counter((r[8] >> 8) & 0xFF for r in recs)) == PER_DISK
    assert dict(collections.Counter((r[8] >> 8) & 0xFF for r in recs if r[11] & 1)) == READS_PER_DISK
    assert dict(collections.Counter((r[8] >> 8) & 0xFF for r in recs if not r[11] & 1)) == WRITES_PER_DISK
    assert dict(collections.Counter(((r[8] >> 8) & 0xFF, r[8] & 0xFF) for r in recs)) == PER_DISK_SECTION
    assert dict(collections.Counter(r[8] >> 24 for r in recs)) == PER_MAJOR
    assert max(r[13] for r in recs) == MAX_QUEUE_LENGTH
    assert (recs[0][2], recs[0][3]) == FIRST_ENQUEUE
    assert (recs[-1][2], recs[-1][3]) == LAST_ENQUEUE
    enq = [r[2] * 1_000_000 + r[3] for r in recs]
    assert min(enq) == 0
    assert max(enq) == LAST_ENQUEUE[0] * 1_000_000 + LAST_ENQUEUE[1]
    assert 6.97 < max(enq) / 86_400e6 < 6.99
    assert trace_bytes[DATA_OFFSET : DATA_OFFSET + 56].hex() == FIRST_RECORD_HEX
    assert struct.unpack(">14I", bytes.fromhex(FIRST_RECORD_HEX)) == FIRST_RECORD_WORDS
    assert recs[0] == FIRST_RECORD_WORDS


def test_decoder_matches_reference(real: RealTrace, reference: list[tuple[int, ...]]) -> None:
    header, cols, offsets, stop = real
    assert header.data_offset == DATA_OFFSET
    assert stop == FILE_SIZE - DATA_OFFSET
    assert offsets.dtype == np.int64
    np.testing.assert_array_equal(offsets, np.arange(N_RECORDS, dtype=np.int64) * 56)
    assert list(cols) == list(RECORD_FIELDS)
    assert all(v.dtype == np.int64 and v.shape == (N_RECORDS,) for v in cols.values())

    ref = np.array(reference, dtype=np.int64)
    expected = {
        "record_size": ref[:, 0],
        "version": ref[:, 1] >> 16,
        "record_type": ref[:, 1] & 0xFFFF,
        "enqueue_s": ref[:, 2],
        "enqueue_us": ref[:, 3],
        "start_us": ref[:, 4],
        "stop_us": ref[:, 5],
        "size_bytes": ref[:, 6],
        "sector": ref[:, 7],
        "major": ref[:, 8] >> 24,
        "disk": (ref[:, 8] >> 8) & 0xFF,
        "section": ref[:, 8] & 0xFF,
        "driver_type": ref[:, 9],
        "cylinder": ref[:, 10],
        "ioflags": ref[:, 11],
        "info": ref[:, 12],
        "queue_length": ref[:, 13],
    }
    for key, want in expected.items():
        np.testing.assert_array_equal(cols[key], want, err_msg=key)


def test_decoded_real_values_pinned(real: RealTrace) -> None:
    _, cols, _, _ = real
    assert {k: int(v[0]) for k, v in cols.items()} == FIRST_RECORD
    assert {k: int(v[-1]) for k, v in cols.items()} == LAST_RECORD
    assert np.all(cols["record_size"] == 56)
    assert np.all(cols["version"] == 4)
    assert np.all(cols["record_type"] == 1)
    reads = (cols["ioflags"] & 1) == 1
    assert int(reads.sum()) == N_READS
    assert int((~reads).sum()) == N_WRITES
    for disk, count in PER_DISK.items():
        on = cols["disk"] == disk
        assert int(on.sum()) == count
        assert int((on & reads).sum()) == READS_PER_DISK[disk]
        assert int((on & ~reads).sum()) == WRITES_PER_DISK[disk]
    enq = cols["enqueue_s"] * 1_000_000 + cols["enqueue_us"]
    assert int(enq.min()) == 0
    assert int(enq.max()) == 603_064_588_892
    assert np.all(np.diff(enq) >= 0)


def test_fast_path_equals_walk(trace_bytes: bytes) -> None:
    body = np.frombuffer(trace_bytes, dtype=np.uint8, offset=DATA_OFFSET)
    fast, fast_stop = find_record_offsets(body)
    slow, slow_stop = srt._walk_records(body)
    np.testing.assert_array_equal(fast, slow)
    assert fast_stop == slow_stop == FILE_SIZE - DATA_OFFSET


# ----------------------------------------------------------------------------- hand-built records


def _record(version: int, words: list[int], size: int, rtype: int = 1, fill: int = 0xAB) -> bytes:
    """Pack a record: size, id, then `words`, then filler bytes up to `size`."""
    raw = struct.pack(f">{2 + len(words)}I", size, (version << 16) | rtype, *words)
    assert len(raw) <= size
    return raw + bytes([fill]) * (size - len(raw))


# enqueue_s, enqueue_us, start, stop, size, sector, devno, driver, cylinder, ioflags, info[, qlen]
V3 = [10, 500, 30, 900, 8192, 4000, (8 << 24) | (2 << 8) | 3, 4, 17, 0x101, 9]
V4 = [11, 0, 40, 1000, 1024, 5000, (8 << 24) | (0 << 8) | 8, 4, 18, 0x0, 0, 6]
V4_LONG = [12, 999_999, 50, 2000, 2048, 0xFFFFFFF0, (7 << 24) | (1 << 8) | 15, 2, 19, 0x1, 0xFFFFFFFF, 3]


def _mixed_body() -> bytes:
    return _record(3, V3, 52) + _record(4, V4, 56) + _record(4, V4_LONG, 64, rtype=4, fill=0xFF)


def test_variable_length_records_slow_path() -> None:
    raw = _mixed_body()
    assert len(raw) == 172
    body = np.frombuffer(raw, dtype=np.uint8)
    offsets, stop = find_record_offsets(body)
    assert offsets.tolist() == [0, 52, 108]
    assert stop == 172
    cols = decode_srt_records(body, offsets)
    assert cols["record_size"].tolist() == [52, 56, 64]
    assert cols["version"].tolist() == [3, 4, 4]
    assert cols["record_type"].tolist() == [1, 1, 4]
    assert cols["enqueue_s"].tolist() == [10, 11, 12]
    assert cols["enqueue_us"].tolist() == [500, 0, 999_999]
    assert cols["start_us"].tolist() == [30, 40, 50]
    assert cols["stop_us"].tolist() == [900, 1000, 2000]
    assert cols["size_bytes"].tolist() == [8192, 1024, 2048]
    assert cols["sector"].tolist() == [4000, 5000, 0xFFFFFFF0]  # unsigned, not negative
    assert cols["major"].tolist() == [8, 8, 7]
    assert cols["disk"].tolist() == [2, 0, 1]
    assert cols["section"].tolist() == [3, 8, 15]
    assert cols["driver_type"].tolist() == [4, 4, 2]
    assert cols["cylinder"].tolist() == [17, 18, 19]
    assert cols["ioflags"].tolist() == [0x101, 0, 1]
    assert cols["info"].tolist() == [9, 0, 0xFFFFFFFF]
    assert cols["queue_length"].tolist() == [-1, 6, 3]  # v3 has none; extra 0xFF bytes skipped

    # Same records after a 2-byte prefix: unaligned offsets take the byte-gather path.
    shifted = np.frombuffer(b"\x00\x00" + raw, dtype=np.uint8)
    cols2 = decode_srt_records(shifted, offsets + 2)
    for key in RECORD_FIELDS:
        np.testing.assert_array_equal(cols2[key], cols[key], err_msg=key)


def test_v4_record_too_short_for_queue_length() -> None:
    raw = _record(4, V4[:-1], 52) + _record(4, [1, 2], 20)
    body = np.frombuffer(raw, dtype=np.uint8)
    offsets, stop = find_record_offsets(body)
    assert offsets.tolist() == [0, 52]
    assert stop == 72
    cols = decode_srt_records(body, offsets)
    assert cols["queue_length"].tolist() == [-1, -1]
    assert cols["enqueue_s"].tolist() == [11, 1]
    assert cols["enqueue_us"].tolist() == [0, 2]
    assert cols["start_us"].tolist() == [40, 0xABABABAB]  # filler inside the 20-byte record
    assert cols["stop_us"].tolist() == [1000, -1]  # beyond the record's size
    assert cols["info"].tolist() == [0, -1]


def test_truncated_trailing_record() -> None:
    raw = _record(4, V4, 56) + _record(4, V4, 56) + _record(4, V4, 56)[:20]
    body = np.frombuffer(raw, dtype=np.uint8)
    offsets, stop = find_record_offsets(body)
    assert offsets.tolist() == [0, 56]
    assert stop == 112
    assert len(raw) - stop == 20
    assert decode_srt_records(body, offsets)["queue_length"].tolist() == [6, 6]


def test_fixed_size_then_short_valid_record_in_tail() -> None:
    # The fast path must not swallow a tail that still holds a (smaller) complete record.
    raw = _record(4, V4, 56) * 3 + _record(1, [7, 8], 16)
    offsets, stop = find_record_offsets(np.frombuffer(raw, dtype=np.uint8))
    assert offsets.tolist() == [0, 56, 112, 168]
    assert stop == 184


@pytest.mark.parametrize("bad_size", [3, 0, 4, 58])
def test_corrupt_size_word_stops_walk(bad_size: int) -> None:
    raw = _record(4, V4, 56) + _record(4, V4, 56) + struct.pack(">I", bad_size) + bytes(60)
    offsets, stop = find_record_offsets(np.frombuffer(raw, dtype=np.uint8))
    assert offsets.tolist() == [0, 56]
    assert stop == 112


def test_corrupt_first_size_word() -> None:
    raw = struct.pack(">I", 3) + _record(4, V4, 56)
    offsets, stop = find_record_offsets(np.frombuffer(raw, dtype=np.uint8))
    assert offsets.tolist() == []
    assert stop == 0


def test_empty_and_tiny_bodies() -> None:
    for raw in (b"", b"\x00\x00\x00"):
        offsets, stop = find_record_offsets(np.frombuffer(raw, dtype=np.uint8))
        assert offsets.dtype == np.int64
        assert offsets.size == 0
        assert stop == 0
    cols = decode_srt_records(np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64))
    assert set(cols) == set(RECORD_FIELDS)
    assert all(v.size == 0 and v.dtype == np.int64 for v in cols.values())
