"""Bad input: clear errors naming file and place, nothing written, every record accounted for."""
from __future__ import annotations

import bz2
import gzip
import struct
from pathlib import Path

import pytest
import zstandard

from blockheat.libs.ingest.pipeline import IngestError
from blockheat.libs.io.inputs import InputError
from tests.builders import ingest, rejects_of, requests_of, table_count, trace_row

AGREE = Path(__file__).parents[2] / "data" / "agree"
T0 = 128_166_372_000_000_000  # FILETIME ticks


def msr_line(ts_us: int, op: str = "Read", offset: int = 4096, size: int = 4096) -> str:
    return f"{T0 + ts_us * 10},srv,0,{op},{offset},{size},1000"


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def assert_nothing_written(spark, trace_id: str) -> None:
    for table in ("requests", "rejected_records", "traces"):
        assert table_count(spark, table, trace_id) == 0, table


# ---- a file in another format is refused, naming file, place and what was expected ----------

def test_vscsi_file_given_as_msr_is_refused(spark, spark_cfg):
    path = AGREE / "dev0.v1.vscsi"
    with pytest.raises(IngestError, match=r"dev0\.v1\.vscsi: byte 0: NUL byte.*expected text \(MSR Cambridge CSV"):
        ingest(spark, spark_cfg, "msr", "wrong-1", [path])
    assert_nothing_written(spark, "wrong-1")


def test_text_file_given_as_vscsi_is_refused(spark, spark_cfg):
    with pytest.raises(IngestError, match=r"spc\.csv: byte 0: not a vSCSI trace.*looks like text"):
        ingest(spark, spark_cfg, "vscsi", "wrong-2", [AGREE / "spc.csv"])
    assert_nothing_written(spark, "wrong-2")


def test_text_file_given_as_srt_is_refused(spark, spark_cfg):
    with pytest.raises(IngestError, match=r"msr_fix_0\.csv: byte 0: expected '\$\$TR_IOREC' header"):
        ingest(spark, spark_cfg, "hp-srt", "wrong-3", [AGREE / "msr_fix_0.csv"])
    assert_nothing_written(spark, "wrong-3")


def test_msr_file_given_as_spc_is_refused_at_line_1(spark, spark_cfg):
    with pytest.raises(IngestError, match=r"msr_fix_0\.csv: line 1: not spc data \(unknown op: Read\); "
                                          r"expected UMass/SPC CSV"):
        ingest(spark, spark_cfg, "spc", "wrong-4", [AGREE / "msr_fix_0.csv"])
    assert_nothing_written(spark, "wrong-4")


# ---- record-level rejects ------------------------------------------------------------------

def test_each_reject_reason_at_its_line(spark, spark_cfg, tmp_path):
    lines = [
        msr_line(0),                                  # 1 ok
        "128166372000000010,srv,0,Read,4096",         # 2 column_count
        "12816637x000000020,srv,0,Read,0,4096,1",     # 3 bad_timestamp
        msr_line(30, op="Trim"),                      # 4 unknown_op
        msr_line(40, offset=-512),                    # 5 negative_offset
        msr_line(50, size=0),                         # 6 nonpositive_size
        msr_line(60, size=-4096),                     # 7 nonpositive_size
        msr_line(3_000_000),                          # 8 ok
        msr_line(1_000_000),                          # 9 ts_backwards (2 s back, tolerance 1 s)
        msr_line(2_500_000),                          # 10 ok: compared with line 9 (1 s), forward
        "",                                           # 11 blank_line (informational)
        msr_line(4_000_000, offset="x"),              # 12 bad_offset  # type: ignore[arg-type]
        msr_line(4_100_000),                          # 13 ok
    ]
    path = write_lines(tmp_path / "mixed.csv", lines)
    ingest(spark, spark_cfg, "msr", "reasons", [path], max_reject_share=1.0)
    assert rejects_of(spark, "reasons") == [
        (2, "column_count"), (3, "bad_timestamp"), (4, "unknown_op"), (5, "negative_offset"),
        (6, "nonpositive_size"), (7, "nonpositive_size"), (9, "ts_backwards"), (11, "blank_line"),
        (12, "bad_offset"),
    ]
    assert [(r["seq"], r["ts_us"]) for r in requests_of(spark, "reasons")] == [
        (0, 0), (7, 3_000_000), (9, 2_500_000), (12, 4_100_000)]
    row = trace_row(spark, "reasons")
    assert (row["records_read"], row["records_accepted"], row["records_rejected"]) == (13, 4, 9)
    msg = spark.sql("SELECT message, raw FROM rejected_records "
                    "WHERE trace_id = 'reasons' AND position = 9").first()
    assert msg.message == "timestamp goes back 2000000 us (tolerance 1000000 us)"
    assert msg.raw == lines[8]


def test_reject_share_above_limit_writes_nothing(spark, spark_cfg, tmp_path):
    lines = [msr_line(i * 100) for i in range(98)] + ["garbage", msr_line(99_000, size=0)]
    path = write_lines(tmp_path / "twopct.csv", lines)
    expected = (r"2 of 100 records rejected \(2\.00%\), above the limit of 1\.00%; nothing written\. "
                r"Most common: column_count x1, first at .*twopct\.csv line 99")
    with pytest.raises(IngestError, match=expected):
        ingest(spark, spark_cfg, "msr", "share", [path])
    assert_nothing_written(spark, "share")
    ingest(spark, spark_cfg, "msr", "share", [path], max_reject_share=0.05)
    assert rejects_of(spark, "share") == [(99, "column_count"), (100, "nonpositive_size")]
    assert table_count(spark, "requests", "share") == 98


def test_tolerance_none_accepts_backwards_time(spark, spark_cfg, tmp_path):
    path = write_lines(tmp_path / "back.csv", [msr_line(5_000_000), msr_line(0)])
    ingest(spark, spark_cfg, "msr", "back-ok", [path], ts_tolerance_us=None)
    assert [(r["seq"], r["ts_us"]) for r in requests_of(spark, "back-ok")] == [(0, 5_000_000), (1, 0)]


def test_line_numbers_and_seq_exact_across_many_splits(spark, spark_cfg, tmp_path):
    """Force ~40 Spark splits of one file; positions, seq and cross-split time checks stay exact."""
    n = 4000
    lines = [msr_line(i * 1000) for i in range(n)]
    bad = {17: "x,y", 1234: "", 2999: "1,2,3,4,5,6,7", 3999: "tail,bad"}
    for index, text in bad.items():
        lines[index] = text
    path = write_lines(tmp_path / "split.csv", lines)
    size = path.stat().st_size
    # The record after each split boundary goes 2 s back in time: every split's first line must
    # be compared with the previous split's last line.
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(size // 40))
    spark.conf.set("spark.sql.files.openCostInBytes", "0")
    try:
        ingest(spark, spark_cfg, "msr", "splits", [path], max_reject_share=0.01)
        n_splits = spark.read.text(str(path)).rdd.getNumPartitions()
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("spark.sql.files.openCostInBytes")
    assert n_splits >= 30
    expected_rejects = sorted((i + 1, "blank_line" if t == "" else
                               "column_count" if t != "1,2,3,4,5,6,7" else "unknown_op")
                              for i, t in bad.items())
    assert rejects_of(spark, "splits") == expected_rejects
    rows = requests_of(spark, "splits")
    assert [r["seq"] for r in rows] == [i for i in range(n) if i not in bad]
    assert [r["ts_us"] for r in rows] == [i * 1000 for i in range(n) if i not in bad]


def test_backwards_time_detected_at_a_split_boundary(spark, spark_cfg, tmp_path):
    lines = [msr_line(10_000_000 + i) for i in range(200)]
    path = write_lines(tmp_path / "boundary.csv", lines)
    data = path.read_bytes()
    # Put a 5 s step back on the first line of the second split.
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(len(data) // 2))
    try:
        blocks = spark.read.text(str(path)).select("_metadata.file_block_start").distinct().collect()
        starts = sorted(r[0] for r in blocks)
        assert len(starts) >= 2
        boundary_line = data[: starts[1]].count(b"\n")  # 0-based index of the line the split starts in
        if data[starts[1] - 1:starts[1]] != b"\n":
            boundary_line += 1  # a split starting mid-line begins at the next line
        lines[boundary_line] = msr_line(5_000_000)
        write_lines(path, lines)
        ingest(spark, spark_cfg, "msr", "boundary", [path], max_reject_share=1.0)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert rejects_of(spark, "boundary") == [(boundary_line + 1, "ts_backwards")]


def test_vscsi_non_data_command_and_truncated_tail(spark, spark_cfg, tmp_path):
    recs = [
        struct.pack("<IIIHHQQ", 0, 4096, 1, 0x28, 0x0100, 8, 0),
        struct.pack("<IIIHHQQ", 1, 0, 0, 0x00, 0x0100, 0, 10),      # TEST UNIT READY: no data
        struct.pack("<IIIHHQQ", 2, 8192, 1, 0x2A, 0x0100, 16, 20),
        struct.pack("<IIIHHQQ", 3, 0, 1, 0x28, 0x0100, 16, 30),     # read of length 0
    ]
    path = tmp_path / "vm1.vscsi"
    path.write_bytes(b"".join(recs) + b"\x01" * 10)
    ingest(spark, spark_cfg, "vscsi", "vscsi-bad", [path], max_reject_share=1.0)
    assert rejects_of(spark, "vscsi-bad") == [(32, "non_data_command"), (96, "nonpositive_size"),
                                              (128, "truncated_record")]
    assert [(r["device"], r["op"], r["offset_bytes"], r["size_bytes"]) for r in requests_of(spark, "vscsi-bad")] == [
        ("vm1", "R", 4096, 4096), ("vm1", "W", 8192, 8192)]
    raw = spark.sql("SELECT raw FROM rejected_records WHERE trace_id = 'vscsi-bad' AND position = 128").first().raw
    assert raw == "01" * 10


def test_vscsi_reject_share_above_limit_names_the_first_reject_and_writes_nothing(spark, spark_cfg, tmp_path):
    good = [struct.pack("<IIIHHQQ", i, 4096, 1, 0x28, 0x0100, 8 * i, 10 * i) for i in range(97)]
    path = tmp_path / "vm2.vscsi"
    bad = struct.pack("<IIIHHQQ", 97, 0, 1, 0x2A, 0x0100, 0, 970)               # write of length 0
    path.write_bytes(b"".join(good[:40]) + bad + b"".join(good[40:]) + bad + bad)
    expected = (r"^3 of 100 records rejected \(3\.00%\), above the limit of 1\.00%; nothing written\. "
                r"Most common: nonpositive_size x3, first at .*vm2\.vscsi byte 1280: data command with length 0$")
    with pytest.raises(IngestError, match=expected):
        ingest(spark, spark_cfg, "vscsi", "vscsi-refused", [path])
    assert_nothing_written(spark, "vscsi-refused")
    written = Path(spark_cfg.warehouse) / "requests" / "trace_id=vscsi-refused"
    assert not written.exists() or not any(written.rglob("*.parquet"))          # no file, committed or not


def test_srt_truncated_tail_is_rejected_at_its_byte_offset(spark, spark_cfg, tmp_path):
    data = (AGREE / "canonical.srt").read_bytes()
    path = tmp_path / "cut.srt"
    path.write_bytes(data + struct.pack(">5I", 56, 0x00040001, 3, 0, 1))
    ingest(spark, spark_cfg, "hp-srt", "srt-cut", [path], max_reject_share=0.2)
    header_end = data.index(b"\x0c") + 1
    assert rejects_of(spark, "srt-cut") == [(header_end + 6 * 56, "truncated_record")]
    assert table_count(spark, "requests", "srt-cut") == 6


def _file(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# ---- paths ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("make", "message"), [
    (lambda d: d / "nope.csv", r"nope\.csv: no such file"),
    (lambda d: d, r": is a directory; name the trace files themselves"),
    (lambda d: _file(d / "empty.csv", b""), r"empty\.csv: empty file"),
    (lambda d: _file(d / "empty.csv.gz", gzip.compress(b"")),
     r"empty\.csv\.gz: empty file \(after gzip decompression\)"),
    (lambda d: _file(d / "bad.csv.gz", b"\x1f\x8b\x08garbage"), r"bad\.csv\.gz: corrupt gzip data"),
])
def test_bad_paths_fail_before_spark_reads(spark, spark_cfg, tmp_path, make, message):
    with pytest.raises(InputError, match=message):
        ingest(spark, spark_cfg, "msr", "badpath", [make(tmp_path)])
    assert_nothing_written(spark, "badpath")


def test_unreadable_file_is_named(spark, spark_cfg, tmp_path, monkeypatch):
    import blockheat.libs.io.inputs

    path = write_lines(tmp_path / "locked.csv", [msr_line(0)])
    real_open = open

    def deny(file, *args, **kwargs):  # root ignores permission bits, so simulate the OS refusal
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(blockheat.libs.io.inputs, "open", deny, raising=False)
    with pytest.raises(InputError, match=r"locked\.csv: cannot open: Permission denied"):
        ingest(spark, spark_cfg, "msr", "locked", [path])
    assert_nothing_written(spark, "locked")


def test_same_file_twice_is_refused(spark, spark_cfg):
    with pytest.raises(InputError, match=r"msr_fix_0\.csv: given twice"):
        ingest(spark, spark_cfg, "msr", "twice", [AGREE / "msr_fix_0.csv", AGREE / "msr_fix_0.csv"])


# ---- compressed inputs ---------------------------------------------------------------------

STRIP = ("trace_id", "source_file")


@pytest.fixture(scope="module")
def plain_spc(spark, spark_cfg):
    """The requests of the uncompressed SPC file, ingested once for the compressed variants below."""
    ingest(spark, spark_cfg, "spc", "z-plain", [AGREE / "spc.csv"])
    return [{k: v for k, v in r.items() if k not in STRIP} for r in requests_of(spark, "z-plain")]


@pytest.mark.parametrize(("name", "compress"), [
    ("spc.csv.gz", gzip.compress),                           # Spark's own codec
    ("spc.csv.bz2", bz2.compress),                           # Spark's own codec
    ("spc.csv.zst", zstandard.ZstdCompressor().compress),    # staged by blockheat
    ("spc-gzip-without-extension.csv", gzip.compress),       # codec by magic bytes, staged
])
def test_compressed_text_reads_like_plain(spark, spark_cfg, tmp_path, plain_spc, name, compress):
    path = tmp_path / name
    path.write_bytes(compress((AGREE / "spc.csv").read_bytes()))
    trace = "z-" + name.replace(".", "-")
    ingest(spark, spark_cfg, "spc", trace, [path])
    got = [{k: v for k, v in r.items() if k not in STRIP} for r in requests_of(spark, trace)]
    assert len(plain_spc) > 0
    assert got == plain_spc
    assert {r["source_file"] for r in requests_of(spark, trace)} == {str(path)}
    assert not list((spark_cfg.warehouse / "_staging").rglob("*.raw")), "staged copies are removed"


def test_compressed_vscsi_is_decoded(spark, spark_cfg, tmp_path):
    path = tmp_path / "dev0.v2.vscsi.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress((AGREE / "dev0.v2.vscsi").read_bytes()))
    ingest(spark, spark_cfg, "vscsi", "vscsi-zst", [path])
    assert [(r["device"], r["ts_us"], r["offset_bytes"]) for r in requests_of(spark, "vscsi-zst")] == [
        ("dev0", 0, 1_048_576), ("dev0", 250, 5_242_880), ("dev0", 500_000, 1_052_672),
        ("dev0", 2_000_000, 1_048_576)]


def test_vscsi_seq_and_time_check_across_ranges(spark, spark_cfg, tmp_path, monkeypatch):
    import blockheat.libs.ingest.pipeline

    # 4 v1 records per Spark task: a's 16 records make 4 ranges, a multiple of the 2 cores
    # (libs.ingest.pipeline._balanced).
    monkeypatch.setattr(blockheat.libs.ingest.pipeline, "BINARY_RANGE_BYTES", 4 * 32)

    def rec(sn: int, ts_s: int) -> bytes:
        return struct.pack("<IIIHHQQ", sn, 4096, 1, 0x28, 0x0100, sn * 8, ts_s * 1_000_000)

    times = [0, 1, 2, 3, 4, 1, 6, 7, 2, 9, 10, 11, 12, 13, 14, 15]   # record 5: back 3 s inside a range;
    a = tmp_path / "a.vscsi"                                          # record 8: back 5 s at a range's first
    a.write_bytes(b"".join(rec(i, t) for i, t in enumerate(times)))
    b = tmp_path / "b.vscsi"
    b.write_bytes(b"".join(rec(i, 20 + i) for i in range(3)))
    ingest(spark, spark_cfg, "vscsi", "vscsi-ranges", [a, b], max_reject_share=1.0)
    assert rejects_of(spark, "vscsi-ranges") == [(5 * 32, "ts_backwards"), (8 * 32, "ts_backwards")]
    rows = requests_of(spark, "vscsi-ranges")
    assert [(r["seq"], r["device"]) for r in rows] == (
        [(i, "a") for i in range(16) if i not in (5, 8)] + [(16, "b"), (17, "b"), (18, "b")])
    msg = spark.sql("SELECT message FROM rejected_records WHERE trace_id = 'vscsi-ranges' "
                    "AND position = 256").first().message
    assert msg == "timestamp goes back 5000000 us (tolerance 1000000 us)"


def test_crlf_line_endings_read_like_lf(spark, spark_cfg, tmp_path):
    path = tmp_path / "msr_crlf.csv"
    path.write_bytes((AGREE / "msr_fix_0.csv").read_bytes().replace(b"\n", b"\r\n"))
    ingest(spark, spark_cfg, "msr", "crlf", [path])
    ingest(spark, spark_cfg, "msr", "lf", [AGREE / "msr_fix_0.csv"])
    assert [{k: v for k, v in r.items() if k not in STRIP} for r in requests_of(spark, "crlf")] == [
        {k: v for k, v in r.items() if k not in STRIP} for r in requests_of(spark, "lf")]
    assert trace_row(spark, "crlf")["records_read"] == 4


def test_prefetched_digest_is_the_files_and_a_changed_file_is_hashed_again(tmp_path: Path) -> None:
    import hashlib
    import os

    from blockheat.libs.io import inputs

    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_bytes(b"1,2,3\n" * 100_000)
    b.write_bytes(b"4,5,6\n")
    inputs.prefetch_digests([str(a), str(b), str(tmp_path / "missing.csv")])   # a missing file: left to the checks
    assert len([k for k in inputs._PREFETCHED if k[0].startswith(str(tmp_path))]) == 2
    b.write_bytes(b"7,8,9\n")                                        # changed after the prefetch
    os.utime(b, ns=(1, 1))
    files = inputs.prepare_inputs([str(a), str(b)], staging=tmp_path / "staging", binary=False)
    assert [f.sha256 for f in files] == [hashlib.sha256(a.read_bytes()).hexdigest(),
                                         hashlib.sha256(b"7,8,9\n").hexdigest()]
    assert not [k for k in inputs._PREFETCHED if k[0].startswith(str(tmp_path))]   # the stale one is dropped too
    with pytest.raises(InputError, match=r"missing\.csv: no such file"):
        inputs.prepare_inputs([str(tmp_path / "missing.csv")], staging=tmp_path / "staging", binary=False)


@pytest.mark.parametrize("binary", [False, True])
def test_deferred_digests_are_the_files_and_files_of_one_size_are_hashed_first(tmp_path: Path, binary) -> None:
    """prepare_inputs(defer_digests=True): a file no other given file matches in size is hashed on the background
    thread (its newlines counted at once when text); files of one size are hashed before anything goes on, so a
    copy is still refused there."""
    import hashlib
    from concurrent.futures import Future

    from blockheat.libs.io import inputs

    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    a.write_bytes(b"1,2,3\n" * 100_000)
    b.write_bytes(b"4,5,6\n" * 7)
    c.write_bytes(b"7,8,9\n" * 7)                                    # b's size: hashed at once
    files = inputs.prepare_inputs([str(a), str(b), str(c)], staging=tmp_path / "staging", binary=binary,
                                  defer_digests=True)
    assert [isinstance(f.digest, Future) for f in files] == [True, False, False]
    assert [f.sha256 for f in files] == [hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b, c)]
    before = inputs.newlines_before(a)
    assert (before is None) if binary else (before(a.stat().st_size) == 100_000)
    c.write_bytes(b.read_bytes())
    with pytest.raises(InputError, match=r"c\.csv: the same content as .*b\.csv"):
        inputs.prepare_inputs([str(a), str(b), str(c)], staging=tmp_path / "staging", binary=binary,
                              defer_digests=True)


# ---- numbers past their range: one rejected record each, never a failed ingest or a wrapped value --

TS_RANGE = "(0 to 4102444800000000 us from 1970-01-01)"


def test_msr_numbers_past_their_range_are_rejected_at_their_lines(spark, spark_cfg, tmp_path):
    lines = [
        msr_line(0),                                                  # 1 ok
        "9223372036854775807,srv,0,Read,4096,4096,1000",              # 2 ts_out_of_range (once: date out of range)
        f"{T0 + 1000},srv,0,Read,4096,4096,-5",                       # 3 negative_response (once -0.5 us)
        f"{T0 + 2000},srv,0,Read,9223372036854775808,4096,1000",      # 4 offset_overflow: 2^63
        f"{T0 + 3000},srv,0,Read,{(1 << 63) - 4096},8192,1000",       # 5 offset_overflow: ends past 2^63 - 1
        f"{T0 + 4000},srv,0,Read,4096,4096,abc",                      # 6 bad_response
        f"{T0 + 5000},srv,0,Read,4096,99999999999999999999,1000",     # 7 size_overflow
        "1,srv,0,Read,4096,4096,1000",                                # 8 ts_out_of_range: 1601
        msr_line(600),                                                # 9 ok
    ]
    path = write_lines(tmp_path / "bignum.csv", lines)
    ingest(spark, spark_cfg, "msr", "msr-range", [path], max_reject_share=1.0)
    assert rejects_of(spark, "msr-range") == [
        (2, "ts_out_of_range"), (3, "negative_response"), (4, "offset_overflow"), (5, "offset_overflow"),
        (6, "bad_response"), (7, "size_overflow"), (8, "ts_out_of_range")]
    assert [(r["seq"], r["ts_us"], r["response_us"]) for r in requests_of(spark, "msr-range")] == [
        (0, 0, 100.0), (8, 600, 100.0)]
    row = trace_row(spark, "msr-range")
    assert (row["records_read"], row["records_accepted"], row["records_rejected"]) == (9, 2, 7)
    assert row["start_time_utc"].year == 2007
    messages = {r.position: r.message for r in spark.sql(
        "SELECT position, message FROM rejected_records WHERE trace_id = 'msr-range'").collect()}
    assert messages == {
        2: f"timestamp 9223372036854775807 is outside the plausible range {TS_RANGE}",
        3: "negative response time: -5",
        4: "offset 9223372036854775808 is past 2^63 - 1 bytes",
        5: f"request end (offset {(1 << 63) - 4096} + size 8192) is past 2^63 - 1 bytes",
        6: "response time is not a finite number: abc",
        7: "size 99999999999999999999 is past 2^63 - 1 bytes",
        8: f"timestamp 1 is outside the plausible range {TS_RANGE}",
    }


def test_an_spc_lba_past_2_63_bytes_is_one_rejected_record(spark, spark_cfg, tmp_path):
    lines = [f"0,{8 * i},4096,R,{i / 1000:.6f}" for i in range(300)]
    lines[150] = f"0,{1 << 60},4096,R,0.150000"                      # once [ARITHMETIC_OVERFLOW] for the whole ingest
    lines[151] = "0,2048,4096,W,-1.0"                                 # a negative relative timestamp
    path = write_lines(tmp_path / "lba.csv", lines)
    ingest(spark, spark_cfg, "spc", "spc-lba", [path], max_reject_share=0.01)
    assert rejects_of(spark, "spc-lba") == [(151, "offset_overflow"), (152, "ts_out_of_range")]
    row = trace_row(spark, "spc-lba")
    assert (row["records_read"], row["records_accepted"], row["records_rejected"]) == (300, 298, 2)
    message = spark.sql("SELECT message FROM rejected_records WHERE trace_id = 'spc-lba' AND position = 151").first()
    assert message.message == f"offset {1 << 60} x 512 bytes is past 2^63 - 1 bytes"
    assert max(r["offset_bytes"] for r in requests_of(spark, "spc-lba")) == 8 * 299 * 512


def test_vscsi_numbers_past_their_range_are_rejected_not_wrapped(spark, spark_cfg, tmp_path):
    def rec(sn: int, lbn: int, ts: int) -> bytes:
        return struct.pack("<IIIHHQQ", sn, 4096, 1, 0x28, 0x0100, lbn, ts)

    start = 5_634_195_000_000                 # the audit's trace: a first timestamp of 2^64-10 stretched it to this
    recs = [rec(0, 8, (1 << 64) - 10), rec(1, (1 << 64) - 1, start), rec(2, (1 << 55) + 7, start + 10)]
    recs += [rec(3 + i, 8 * i, start + 100 * i) for i in range(5)]
    path = tmp_path / "vm9.vscsi"
    path.write_bytes(b"".join(recs))
    ingest(spark, spark_cfg, "vscsi", "vscsi-range", [path], max_reject_share=1.0)
    assert rejects_of(spark, "vscsi-range") == [(0, "ts_out_of_range"), (32, "offset_overflow"),
                                                (64, "offset_overflow")]
    assert [(r["seq"], r["ts_us"], r["offset_bytes"]) for r in requests_of(spark, "vscsi-range")] == [
        (3 + i, 100 * i, 4096 * i) for i in range(5)]
    row = trace_row(spark, "vscsi-range")
    assert (row["records_read"], row["records_accepted"], row["records_rejected"], row["span_us"]) == (8, 5, 3, 400)


# Two blkparse issue (D) events, a read and a write.
BLK_EVENTS = ["  8,0 0       1    0.000100000  4242  D  R 2048 + 8 [fio]",
              "  8,0 0       2    0.000200000  4242  D  W 4096 + 8 [fio]"]


def test_a_blkparse_file_of_junk_is_refused_naming_file_and_line(spark, spark_cfg, tmp_path):
    events = BLK_EVENTS
    junk = [f"junk line {i} of no trace format" for i in range(1053)]
    first = write_lines(tmp_path / "junk.blk", junk + events)
    with pytest.raises(IngestError, match=r"junk\.blk: line 1: not blkparse data \(neither a blkparse event nor a "
                                          r"summary line\); expected blkparse text"):
        ingest(spark, spark_cfg, "blkparse", "blk-junk", [first])
    assert_nothing_written(spark, "blk-junk")
    last = write_lines(tmp_path / "tail.blk", events + junk)
    with pytest.raises(IngestError, match=r"^1053 of 1055 records rejected \(99\.81%\), above the limit of 1\.00%; "
                                          r"nothing written\. Most common: unknown_line x1053, first at .*tail\.blk "
                                          r"line 3: neither a blkparse event nor a summary line$"):
        ingest(spark, spark_cfg, "blkparse", "blk-junk", [last])
    assert_nothing_written(spark, "blk-junk")


def test_too_few_requests_among_informational_lines_is_not_the_format(spark, spark_cfg, tmp_path):
    """Summary lines are informational (no error share), but 2 events among 300 of them is no blkparse trace."""
    events = BLK_EVENTS
    summary = [f" Reads Queued:       {i:>6},    {4 * i:>6}KiB" for i in range(300)]
    path = write_lines(tmp_path / "summary.blk", events + summary)
    with pytest.raises(IngestError, match=r"^.*summary\.blk: not blkparse data: 2 requests in 302 records \(0\.66%, "
                                          r"under the 1% a blkparse trace has\); nothing written$"):
        ingest(spark, spark_cfg, "blkparse", "blk-summary", [path])
    assert_nothing_written(spark, "blk-summary")
    # 1% of the records as requests is a trace: 3 events among 297 summary lines
    path = write_lines(tmp_path / "enough.blk", [*events, events[0].replace("    1 ", "    3 "), *summary[:297]])
    ingest(spark, spark_cfg, "blkparse", "blk-enough", [path])
    row = trace_row(spark, "blk-enough")
    assert (row["records_read"], row["records_accepted"], row["records_rejected"]) == (300, 3, 297)
