"""The clean-text fast path (readers.clean_text): line-aligned byte ranges own every line exactly once, the
strict parser refuses every spelling the general path could read differently, and an ingest through it
writes exactly what the general path writes, or hands the trace to the general path (leaving no file)."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import blockheat.libs.ingest.pipeline as ingest_module
from blockheat.libs.io.tables import table_path
from blockheat.libs.readers.clean_text import NotClean, eligible, lines_per_range, parse_range, read_lines
from blockheat.libs.readers.text_formats import ALIBABA, DISKSIM_ASCII, MSR, SPC, TENCENT, custom_layout
from tests.builders import ingest, rejects_of, requests_of, trace_row

AGREE = Path(__file__).parents[2] / "data" / "agree"
T0 = 128_166_372_000_000_000  # FILETIME ticks


def msr(ts_us: int, disk: int = 0, op: str = "Read", offset: int = 4096, size: int = 4096, rt: str = "1000") -> str:
    return f"{T0 + ts_us * 10},srv,{disk},{op},{offset},{size},{rt}"


def write(path: Path, lines: list[str], end: str = "\n") -> Path:
    path.write_text("\n".join(lines) + end)
    return path


# ---- ranges -------------------------------------------------------------------------------------

@pytest.mark.parametrize("end", ["\n", ""])
def test_every_split_gives_every_line_once(tmp_path, end):
    lines = ["1", "22", "", "333", "4444", "", "", "55555", "6"]
    path = write(tmp_path / "f.txt", lines, end)
    data = path.read_bytes()
    for step in range(1, len(data) + 2):
        bounds = [(s, min(s + step, len(data))) for s in range(0, len(data), step)]
        pieces = [read_lines(str(path), s, e - s) for s, e in bounds]
        assert b"".join(pieces) == data, step
        assert lines_per_range(str(path), bounds) == [len(bytes(p).splitlines()) for p in pieces], step


def test_a_line_longer_than_the_read_ahead_is_read_whole(tmp_path, monkeypatch):
    import blockheat.libs.readers.clean_text as module

    monkeypatch.setattr(module, "_READ_AHEAD", 8)
    lines = ["a" * 5, "b" * 40, "c" * 3, "d" * 30]
    path = write(tmp_path / "f.txt", lines, "")
    data = path.read_bytes()
    for step in (1, 4, 6, 9, 20, 50):
        bounds = [(s, min(s + step, len(data))) for s in range(0, len(data), step)]
        pieces = [bytes(read_lines(str(path), s, e - s)) for s, e in bounds]
        assert b"".join(pieces) == data, step
        assert all(p == b"" or p.endswith(b"\n") or p.endswith(b"d") for p in pieces), step


@pytest.mark.parametrize("block", [1, 3, 7, 64, 1 << 20])
def test_ranges_are_counted_from_the_index_made_while_hashing(tmp_path, monkeypatch, block):
    """A file hashed in this process has its newlines counted per block as it is read (libs.io.inputs): every
    prefix count N(x) is bytes.count's, and lines_per_range gives every split the same answer as without it."""
    import hashlib
    import os

    from blockheat.libs.io import inputs

    monkeypatch.setattr(inputs, "NEWLINE_BLOCK", block)
    data = bytes(random.Random(5).choice(b"ab\n") for _ in range(301)) + b"\n"
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    without = {step: lines_per_range(str(path), [(s, min(s + step, len(data))) for s in range(0, len(data), step)])
               for step in (1, 2, 5, 64, 400)}
    assert inputs.newlines_before(path) is None                       # not hashed yet
    assert inputs._sha256(path) == hashlib.sha256(data).hexdigest()
    before = inputs.newlines_before(path)
    assert before is not None
    assert [before(x) for x in range(len(data) + 1)] == [data[:x].count(b"\n") for x in range(len(data) + 1)]
    for step, counts in without.items():
        bounds = [(s, min(s + step, len(data))) for s in range(0, len(data), step)]
        assert lines_per_range(str(path), bounds) == counts, step
    os.utime(path, ns=(1, 1))                                          # changed since: no index
    assert inputs.newlines_before(path) is None
    assert inputs._sha256(path, text=False) == hashlib.sha256(data).hexdigest()   # a binary format's input:
    assert inputs.newlines_before(path) is None                                # hashed, no newlines counted


@pytest.mark.parametrize("length", [1, 15, 16, 17, 32, 48, 49, 64, 65, 100, 161])
def test_the_scan_hashes_and_counts_every_chunk_once(tmp_path, monkeypatch, length):
    """libs.io.inputs._scan hashes on a thread of its own while it counts, SCAN_READERS chunks read ahead at their
    offsets, four buffers in turn (16 bytes each here): files of whole buffers, one byte more or less, and of more
    chunks than buffers, give hashlib's digest and bytes.count's newlines per block."""
    import hashlib

    from blockheat.libs.io import inputs

    monkeypatch.setattr(inputs, "NEWLINE_BLOCK", 1)
    data = bytes(random.Random(length).choice(b"ab\n") for _ in range(length))
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    scan = inputs._scan(path)
    assert scan.sha256 == hashlib.sha256(data).hexdigest()
    assert scan.newlines.tolist() == [int(b == 10) for b in data]
    assert inputs._scan(path, newlines=False).sha256 == scan.sha256


def test_newlines_are_counted_across_chunk_edges(tmp_path):
    """The driver's newline count reads the mapped file in chunks: every chunk size and range gives bytes.count's
    answer (a newline on a chunk's first or last byte counted once)."""
    import mmap

    from blockheat.libs.readers.clean_text import _newlines

    data = bytes(random.Random(4).choice(b"ab\n") for _ in range(997))
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for chunk in (1, 2, 3, 7, 64, 1000, 16 << 20):
            for lo, hi in ((0, 997), (1, 996), (13, 500), (500, 501), (3, 3)):
                assert _newlines(mm, lo, hi, chunk) == data[lo:hi].count(b"\n"), (chunk, lo, hi)



def _resident_pages(path: Path) -> list[bool]:
    """Which pages of the file are in the page cache (mincore(2) over a private mapping of it)."""
    import ctypes
    import mmap
    import os

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size, page = path.stat().st_size, os.sysconf("SC_PAGE_SIZE")
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_COPY) as mm:
        anchor = ctypes.c_char.from_buffer(mm)
        vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
        try:
            assert libc.mincore(ctypes.addressof(anchor), size, vec) == 0, os.strerror(ctypes.get_errno())
        finally:
            del anchor                            # the map cannot close while a view of it exists
    return [bool(v & 1) for v in vec]


def test_a_range_read_leaves_the_page_cache_and_the_rest_stays(tmp_path):
    """read_lines and the binary decoders read each input byte once: the range's pages are dropped from the page
    cache once read (libs.io.inputs.drop_cached), so a large trace does not push out the tables ingest writes; the
    pages of other ranges stay. Ranges on 2 MiB boundaries: the kernel drops only whole folios (up to 2 MiB on
    x86-64) inside the range."""
    import os

    import pyarrow as pa

    from blockheat.libs.readers.binary import range_task

    mib, page = 1 << 20, os.sysconf("SC_PAGE_SIZE")
    path = tmp_path / "f.txt"
    path.write_bytes(b"abcdefg\n" * (32 * mib // 8))
    with path.open("rb") as fh:
        os.fsync(fh.fileno())                     # written back: clean pages can be dropped
        fh.read()                                 # and all of them cached
    at = [k * mib // page for k in range(33)]     # page index of each MiB
    assert all(_resident_pages(path))
    assert read_lines(str(path), 8 * mib, 16 * mib) == b"abcdefg\n" * (16 * mib // 8)
    resident = _resident_pages(path)
    assert not any(resident[at[8]:at[24]])
    assert all(resident[:at[8]])
    assert all(resident[at[24]:])
    batch = pa.RecordBatch.from_pylist([{"path": str(path), "file_uri": "f", "start": 26 * mib, "length": 4 * mib}])
    assert list(range_task(lambda data, rng, before: len(data))([batch])) == [4 * mib]
    resident = _resident_pages(path)
    assert not any(resident[at[26]:at[30]])
    assert all(resident[at[24]:at[26]])
    assert all(resident[at[30]:])


# ---- the strict parser ----------------------------------------------------------------------------

def test_clean_msr_lines_parse_to_the_general_paths_values():
    data = "\n".join([msr(0, 1, "Read", 512, 4096, "15000"), msr(7, 0, "Write", 0, 512, "3")]).encode()
    p = parse_range(data, MSR, tolerance_us=0)
    assert [p.device_names[c] for c in p.device_codes] == ["srv_1", "srv_0"]
    assert p.ts_raw_us.tolist() == [T0 // 10, T0 // 10 + 7]
    assert p.is_read.tolist() == [True, False]
    assert (p.offset_bytes.tolist(), p.size_bytes.tolist()) == ([512, 0], [4096, 512])
    assert p.response_us.to_pylist() == [15000 * 0.1, 3 * 0.1]   # FILETIME ticks, as the general path scales them


def test_seconds_are_exact_decimals():
    p = parse_range(b"1538352000.000001,1,8,0,7\n0.5,1,8,1,7\n", TENCENT, tolerance_us=None)
    assert p.ts_raw_us.tolist() == [1_538_352_000_000_001, 500_000]      # a double would lose the 1 us
    assert (p.offset_bytes.tolist(), p.size_bytes.tolist()) == ([512, 512], [4096, 4096])
    with pytest.raises(NotClean, match="ts"):                            # more than 9 decimals: Spark rounds
        parse_range(b"0.1234567891,1,8,0,7\n", TENCENT, tolerance_us=None)


@pytest.mark.parametrize(("text", "why"), [
    (msr(0, offset="0x10"), "offset"),                 # pyarrow reads hex; Spark's cast does not
    (msr(0, offset="+16"), "offset"),
    (msr(0, offset=" 16"), "offset"),
    (msr(0, offset="-16"), "offset"),
    (msr(0, size=0), "size"),
    (msr(0, op="read"), "op"),
    (msr(0, op="Read "), "op"),
    (msr(0, rt="nan"), "duration"),
    (msr(0, rt=""), "duration"),
    (msr(0).replace("srv", " srv"), "device"),
    (msr(0).replace("srv", ""), "device"),
    (msr(0) + ",extra", "column count"),                # the first line sets the count
    (msr(0) + "\n1,2,3", "Expected 7 columns, got 3"),  # a later line
    (msr(0) + "\n", "blank line"),                      # the general path rejects it
    ("\n" + msr(0), "blank line"),
    (msr(0) + "\n   ", "Expected 7 columns, got 1"),  # spaces only
    (msr(0) + "\r", "carriage return"),
    ("\ufeff" + msr(0), "byte order mark"),
    (msr(0) + "\n" + msr(1).replace("srv", "sr\udcff"), "CSV conversion error|UTF8"),
    (msr(0, rt="-5"), "duration: negative or above the plausible range"),
    ("9223372036854775807,srv,0,Read,4096,4096,1", "ts: outside the plausible range"),
    ("1,srv,0,Read,4096,4096,1", "ts: outside the plausible range"),     # 1601: before 1970
    (msr(0, offset=(1 << 63) - 4096), "offset \\+ size: past a long"),
], ids=["hex", "plus", "space", "negative", "zero-size", "op-case", "op-padded", "nan", "empty-response",
        "padded-device", "empty-device", "extra-column", "short-line", "blank-line", "blank-first", "spaces-line",
        "crlf", "bom", "bad-utf8", "negative-response", "ts-past-2100", "ts-before-1970", "end-past-2^63"])
def test_anything_the_general_path_could_read_differently_is_not_clean(text, why):
    data = (text + "\n" + msr(1) + "\n").encode("utf-8", errors="surrogateescape")
    with pytest.raises(NotClean, match=why):
        parse_range(data, MSR, tolerance_us=None)


def test_a_timestamp_going_back_beyond_the_tolerance_is_not_clean():
    data = "\n".join([msr(2_000_000), msr(500_000)]).encode()
    assert len(parse_range(data, MSR, tolerance_us=1_500_000)) == 2
    with pytest.raises(NotClean, match="timestamp going back"):
        parse_range(data, MSR, tolerance_us=1_000_000)


def test_which_layouts_take_the_fast_path():
    assert [eligible(x) for x in (MSR, SPC, ALIBABA, TENCENT, DISKSIM_ASCII)] == [True, True, True, True, False]
    assert not eligible(custom_layout({"ts": 0, "op": 1, "offset": 2, "size": 3}, skip_header_lines=1))
    assert not eligible(custom_layout({"ts": 0, "op": 1, "offset": 2, "size": 3}, delimiter="|"))   # a regex
    assert eligible(custom_layout({"ts": 0, "op": 1, "offset": 2, "size": 3}, delimiter=";"))


# ---- ingests: the same rows as the general path ----------------------------------------------------

def _ingested(spark, trace_id):
    rows = [{k: v for k, v in r.items() if k != "trace_id"} for r in requests_of(spark, trace_id)]
    row = {k: v for k, v in trace_row(spark, trace_id).items() if k not in ("trace_id", "ingested_at")}
    return rows, row, rejects_of(spark, trace_id)


def _both(spark, spark_cfg, fmt, name, paths, **options):
    fast = ingest(spark, spark_cfg, fmt, f"clean-{name}-fast", paths, **options)
    general = ingest(spark, spark_cfg, fmt, f"clean-{name}-general", paths, fast_text=False, **options)
    assert fast.per_device == general.per_device
    return _ingested(spark, f"clean-{name}-fast"), _ingested(spark, f"clean-{name}-general")


def _data_files(spark_cfg, trace_id):
    root = Path(table_path(spark_cfg.warehouse, "requests")) / f"trace_id={trace_id}"   # a local warehouse
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.parquet")) if root.exists() else []


def _committed(spark, spark_cfg, trace_id):
    files = spark.read.format("delta").load(str(table_path(spark_cfg.warehouse, "requests"))) \
        .where(f"trace_id = '{trace_id}'").inputFiles()
    return sorted(f.split(f"trace_id={trace_id}/", 1)[1] for f in files)


@pytest.mark.parametrize(("fmt", "files"), [
    ("msr", ["msr_fix_0.csv", "msr_fix_1.csv"]), ("alibaba", ["alibaba.csv"]), ("tencent", ["tencent.csv"])])
def test_fixture_ingests_equal_the_general_paths(spark, spark_cfg, monkeypatch, fmt, files, caplog):
    monkeypatch.setattr(ingest_module, "TEXT_RANGE_BYTES", 64)     # many ranges of a tiny file
    caplog.set_level("INFO", logger="blockheat.libs.ingest.pipeline")
    fast, general = _both(spark, spark_cfg, fmt, fmt, [AGREE / f for f in files])
    assert fast == general
    assert (len(fast[0]), fast[2]) == (6, [])
    assert f"trace clean-{fmt}-fast: 6 records read, every one a clean request" in caplog.text


def test_a_generated_multi_device_trace_equals_the_general_paths(spark, spark_cfg, monkeypatch, tmp_path):
    rng = np.random.default_rng(5)
    ts = np.cumsum(rng.integers(0, 3000, 2000))
    lines = [msr(int(t), int(rng.integers(0, 5)), "Read" if rng.random() < 0.4 else "Write",
                 int(rng.integers(0, 1 << 20)) * 512, int(rng.choice([512, 4096, 65536])),
                 str(int(rng.integers(1, 9999)))) for t in ts]
    monkeypatch.setattr(ingest_module, "TEXT_RANGE_BYTES", 9_000)
    paths = [write(tmp_path / "a.csv", lines[:1200]), write(tmp_path / "b.csv", lines[1200:], end="")]
    fast, general = _both(spark, spark_cfg, "msr", "gen", paths)
    assert fast == general
    assert [r["seq"] for r in fast[0]] == list(range(2000))
    assert _data_files(spark_cfg, "clean-gen-fast") == _committed(spark, spark_cfg, "clean-gen-fast")


def test_an_earliest_timestamp_after_the_first_line_reruns_the_pass(spark, spark_cfg, caplog, tmp_path):
    """Within the tolerance, the second line is the earliest: the time base must be its timestamp."""
    path = write(tmp_path / "late.csv", [msr(800_000), msr(100_000, disk=1), msr(900_000), msr(2_000_000)])
    caplog.set_level("INFO", logger="blockheat.libs.ingest.pipeline")
    fast, general = _both(spark, spark_cfg, "msr", "late", [path])
    assert fast == general
    assert [r["ts_us"] for r in fast[0]] == [700_000, 0, 800_000, 1_900_000]
    assert "every one a clean request" in caplog.text
    assert _data_files(spark_cfg, "clean-late-fast") == _committed(spark, spark_cfg, "clean-late-fast")


@pytest.mark.parametrize(("name", "bad", "reason", "found"), [
    ("hex", msr(150_000, offset="0x10"), "bad_offset", "not clean text (offset: not all plain digits"),
    # 1.249 s back, beyond the 1 s tolerance, on the first line of a range: found by the driver
    ("back", msr(150_000 - 1_100_000), "ts_backwards", "a timestamp goes back at the lines from byte"),
], ids=["hex", "back"])
def test_a_bad_line_in_a_later_range_hands_the_trace_to_the_general_path(spark, spark_cfg, monkeypatch, tmp_path,
                                                                          caplog, name, bad, reason, found):
    lines = [msr(t * 1000) for t in range(200)]
    lines[150] = bad
    assert len({len(line) for line in lines}) == 1
    # 25 lines a range: line index 150 is the first of its range, so "back" is found across a range edge
    monkeypatch.setattr(ingest_module, "TEXT_RANGE_BYTES", 25 * (len(lines[0]) + 1))
    path = write(tmp_path / f"{name}.csv", lines)
    caplog.set_level("INFO", logger="blockheat.libs.ingest.pipeline")
    fast, general = _both(spark, spark_cfg, "msr", name, [path], max_reject_share=0.05)
    assert fast == general
    assert fast[2] == [(151, reason)]                       # line 151, as the general path numbers lines
    assert found in caplog.text
    assert "the general path reads it" in caplog.text
    assert _data_files(spark_cfg, f"clean-{name}-fast") == _committed(spark, spark_cfg, f"clean-{name}-fast")
