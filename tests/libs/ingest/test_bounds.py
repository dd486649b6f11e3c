"""Bounded resources: decompression stops at a limit per file, the format check reads only the first bytes before
anything is staged, and a text line over the limit is a rejected record (never held whole by a reader)."""
from __future__ import annotations

import gzip
import random
import re
import zlib
from pathlib import Path

import pytest
import zstandard

from blockheat.libs.ingest.pipeline import IngestError
from blockheat.libs.io import inputs
from blockheat.libs.io.inputs import InputError, expanded_limit
from tests.builders import ingest, rejects_of, requests_of, table_count, trace_row, write_msr

AGREE = Path(__file__).parents[2] / "data" / "agree"
LIMIT = 10_000_000


def staged_files(warehouse: Path) -> list[Path]:
    return [p for p in (warehouse / "_staging").rglob("*") if p.is_file()]


def assert_nothing_written(spark, trace_id: str) -> None:
    for table in ("requests", "rejected_records", "traces"):
        assert table_count(spark, table, trace_id) == 0, table


def gzip_of(head: bytes, zeros: int) -> bytes:
    """A gzip stream of `head` then `zeros` zero bytes, made a MiB at a time (200 MB of zeros: about 200 KB)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [z.compress(head)]
    chunk = bytes(1 << 20)
    for _ in range(zeros >> 20):
        out.append(z.compress(chunk))
    out.append(z.flush())
    return b"".join(out)


def msr_rows(n: int) -> list[tuple[int, int, str, int, int]]:
    return [(i * 1000, i % 2, "R" if i % 3 else "W", i * 4096, 4096) for i in range(n)]


def test_default_limit_is_1000_times_the_compressed_size_and_at_least_1_gib() -> None:
    assert expanded_limit(3_100_000).bytes == 3_100_000_000
    assert expanded_limit(1000).bytes == 1 << 30
    assert expanded_limit(3_100_000, 5).bytes == 5


def test_binary_gzip_bomb_stops_at_the_limit_naming_the_file(spark, spark_cfg, tmp_path):
    path = tmp_path / "bomb.vscsi.gz"
    path.write_bytes(gzip_of((AGREE / "dev0.v2.vscsi").read_bytes() * 20, 200 << 20))   # records, then zeros
    expected = (f"{path}: gzip data decompresses to more than 10,000,000 bytes, the limit per file "
                "(--max-expanded-bytes); stopped there, nothing written. If the file is a real trace, raise the "
                "limit with --max-expanded-bytes")
    with pytest.raises(InputError, match=f"^{re.escape(expected)}$"):
        ingest(spark, spark_cfg, "vscsi", "bomb-binary", [path], max_expanded_bytes=LIMIT)
    assert staged_files(spark_cfg.warehouse) == [], "the partial staged copy is removed"
    assert_nothing_written(spark, "bomb-binary")


@pytest.mark.parametrize("name", ["big.csv.gz", "big-gzip.csv"])     # Spark's own codec; gzip staged by its magic
def test_text_gzip_past_the_limit_is_refused_naming_the_file(spark, spark_cfg, tmp_path, name):
    text = write_msr(tmp_path / "big.csv", msr_rows(250_000)).read_bytes()      # 11.9 MB
    assert len(text) > LIMIT
    path = tmp_path / name
    path.write_bytes(gzip.compress(text, 1))
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: gzip data decompresses to more than "
                                         r"10,000,000 bytes, the limit per file \(--max-expanded-bytes\)"):
        ingest(spark, spark_cfg, "msr", "bomb-text", [path], max_expanded_bytes=LIMIT)
    assert staged_files(spark_cfg.warehouse) == []
    assert_nothing_written(spark, "bomb-text")


@pytest.mark.parametrize(("fmt", "name", "message"), [
    ("vscsi", "spc.csv.zst", r"spc\.csv\.zst: byte 0: not a vSCSI trace.*looks like text"),
    ("msr", "dev0.v1.vscsi.gzip", r"dev0\.v1\.vscsi\.gzip: byte 0: NUL byte.*expected text"),
])
def test_wrong_format_compressed_is_refused_before_anything_is_staged(spark, spark_cfg, tmp_path, monkeypatch,
                                                                     fmt, name, message):
    source = AGREE / name.rsplit(".", 1)[0]
    data = source.read_bytes() * 50
    path = tmp_path / name
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if name.endswith(".zst") else gzip.compress(data))
    opened: list[object] = []
    real = inputs._open_output

    def spy(location):
        opened.append(location)
        return real(location)

    monkeypatch.setattr(inputs, "_open_output", spy)
    with pytest.raises(IngestError, match=message):
        ingest(spark, spark_cfg, fmt, "wrong-staged", [path])
    assert opened == [], "nothing is written to the staging location"
    assert staged_files(spark_cfg.warehouse) == []
    assert_nothing_written(spark, "wrong-staged")


@pytest.mark.parametrize("compress", [False, True])
def test_line_over_the_limit_is_a_rejected_record(spark, spark_cfg, tmp_path, compress):
    lines = write_msr(tmp_path / "good.csv", msr_rows(300)).read_bytes().splitlines(keepends=True)
    long = b"128166372001490000,h,0,Read,4096,4096," + b"9" * (3 << 19) + b"\r\n"    # 1.5 MiB, line 150
    data = b"".join(lines[:149]) + long + b"".join(lines[149:])
    path = tmp_path / ("long.csv.gz" if compress else "long.csv")
    path.write_bytes(gzip.compress(data, 1) if compress else data)
    trace = f"long-line-{int(compress)}"
    ingest(spark, spark_cfg, "msr", trace, [path])
    assert rejects_of(spark, trace) == [(150, "line_too_long")]
    [reject] = spark.sql(f"SELECT message, raw FROM rejected_records WHERE trace_id = '{trace}'").collect()
    assert reject.message == (f"line longer than 1048576 bytes ({len(long) - 1} bytes); raw holds its first 4096 "
                              "bytes at most")
    assert reject.raw == long[:4096].decode()
    rows = requests_of(spark, trace)
    assert len(rows) == 300
    assert [r["seq"] for r in rows] == [*range(149), *range(150, 301)]
    row = trace_row(spark, trace)
    assert (row["records_read"], row["records_rejected"]) == (301, 1)
    assert staged_files(spark_cfg.warehouse) == []


def test_one_giant_line_is_refused_by_the_reject_share(spark, spark_cfg, tmp_path):
    path = tmp_path / "giant.csv"
    path.write_bytes(b"128166372001490000,h,0,Read,4096,4096," + b"1" * (2 << 20))
    with pytest.raises(IngestError, match=rf"^1 of 1 records rejected \(100\.00%\), above the limit of 1\.00%; "
                                          rf"nothing written\. Most common: line_too_long x1, first at "
                                          rf"{re.escape(str(path))} line 1: line longer than 1048576 bytes"):
        ingest(spark, spark_cfg, "msr", "giant-line", [path])
    assert_nothing_written(spark, "giant-line")
    assert staged_files(spark_cfg.warehouse) == []


def test_long_lines_are_found_exactly_however_the_stream_is_cut() -> None:
    rng = random.Random(7)
    for _ in range(100):
        longest = rng.choice([5, 3000, 1 << 20])
        parts = [b"x" * rng.choice([0, 1, 60, 5000, (1 << 20) + rng.randint(-2, 2), 3 << 20])
                 for _ in range(rng.randint(0, 12))]
        data = b"\n".join(parts) + rng.choice([b"", b"\n"])
        expect, start = [], 0
        for i, byte in enumerate(data + b"\n"):
            if byte == 10:
                if i - start > longest and start < len(data):
                    expect.append((start, i - start))
                start = i + 1
        lines = inputs._Lines(longest)
        at = 0
        while at < len(data):
            n = rng.choice([1, 7, 1 << 20, 5 << 20])
            lines.feed(data[at:at + n])
            at += n
        assert lines.finish() == expect
