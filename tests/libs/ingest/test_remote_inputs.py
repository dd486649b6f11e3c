"""Inputs on an object store (s3a://, s3://) ingest exactly like the same files on local disk: the driver checks,
hashes and stages them through pyarrow's file system, and the tasks read their byte ranges with pyarrow's
RandomAccessFile. The store is a stand-in (tests/libs/ingest/remote_store.py): S3 locations kept in a directory,
reached only through pyarrow's file system abstraction, so every remote branch runs without a server."""
from __future__ import annotations

import bz2
import gzip
import hashlib
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import zstandard

from blockheat.jobs.ingest_trace import run
from blockheat.libs.ingest.pipeline import IngestOptions
from blockheat.libs.io import inputs, storage
from blockheat.libs.io.inputs import InputError, prepare_inputs
from blockheat.libs.io.tables import trace_rows
from blockheat.libs.readers import clean_text
from blockheat.libs.readers.binary import range_task
from tests.libs.ingest.remote_store import Store

AGREE = Path(__file__).parents[2] / "data" / "agree"
STRIP = ("trace_id", "source_file")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    """S3 locations in tmp_path/s3 for this test: libs.io.storage.filesystem answers them with the stand-in."""
    fake = Store(tmp_path / "s3")
    monkeypatch.setattr(storage, "filesystem", fake.resolver)
    return fake


def rows(spark: Any, cfg: Any, table: str, trace_id: str) -> list[dict[str, Any]]:
    return trace_rows(spark, cfg.warehouse, table, trace_id)


def requests(spark: Any, cfg: Any, trace_id: str) -> list[dict[str, Any]]:
    return sorted(({k: v for k, v in r.items() if k not in STRIP} for r in rows(spark, cfg, "requests", trace_id)),
                  key=lambda r: r["seq"])


def ingest(spark: Any, cfg: Any, fmt: str, trace_id: str, paths: list[str], staging: Any, **options: Any) -> Any:
    return run(spark, cfg, IngestOptions(fmt, trace_id, tuple(paths), staging=staging, **options))


# ---- end to end: the same rows from local paths and from the store ----------------------------------------------

def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


# case -> (format, [(local file in AGREE, name in the store, compress)], staging in the store)
CASES: dict[str, tuple[str, list[tuple[str, str, Any]], bool]] = {
    # binary, two passes of range tasks (libs.ingest.direct); staging on the store
    "vscsi": ("vscsi", [("dev0.v2.vscsi", "dev0.v2.vscsi", None), ("dev1.v2.vscsi", "dev1.v2.vscsi", None)], True),
    # binary, general path (range tasks, then Spark classifies into a local scratch copy)
    "hp-srt": ("hp-srt", [("canonical.srt", "canonical.srt", None)], False),
    # text, the clean-text range tasks
    "msr": ("msr", [("msr_fix_0.csv", "msr_fix_0.csv", None), ("msr_fix_1.csv", "msr_fix_1.csv", None)], True),
    # gzip: a binary input decompressed into staging on the store, then read by the range tasks from there
    "vscsi-gzip": ("vscsi", [("dev0.v1.vscsi", "dev0.v1.vscsi.gz", _gz), ("dev1.v1.vscsi", "dev1.v1.vscsi", None)],
                   True),
    # gzip text without the .gz name (Spark would not decode it): staged on the store, read by the clean-text tasks
    "msr-gzip": ("msr", [("msr_fix_0.csv", "msr_fix_0.csv.gzip", _gz), ("msr_fix_1.csv", "msr_fix_1.csv", None)],
                 True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_inputs_on_an_object_store_ingest_like_local_files(spark, spark_cfg, tmp_path, store, case):
    fmt, files, remote_staging = CASES[case]
    local_dir = tmp_path / "local"
    local_dir.mkdir()
    local, remote = [], []
    for source, name, compress in files:
        data = (AGREE / source).read_bytes()
        data = compress(data) if compress else data
        (local_dir / name).write_bytes(data)
        local.append(str(local_dir / name))
        remote.append(store.put(f"traces/{case}/{name}", data, scheme="s3" if len(remote) else "s3a"))
    staging = store.url("wh/_staging") if remote_staging else tmp_path / "staging"
    ingest(spark, spark_cfg, fmt, f"local-{case}", local, tmp_path / "staging")
    driver_opens = len(store.opens())
    ingest(spark, spark_cfg, fmt, f"remote-{case}", remote, staging)

    got, expected = requests(spark, spark_cfg, f"remote-{case}"), requests(spark, spark_cfg, f"local-{case}")
    assert len(expected) >= 6
    assert got == expected
    assert {r["source_file"] for r in rows(spark, spark_cfg, "requests", f"remote-{case}")} <= set(remote)
    local_row = rows(spark, spark_cfg, "traces", f"local-{case}")[0]
    remote_row = rows(spark, spark_cfg, "traces", f"remote-{case}")[0]
    assert [(f["size_bytes"], f["sha256"]) for f in remote_row["source_files"]] == [
        (f["size_bytes"], f["sha256"]) for f in local_row["source_files"]]
    assert [f["path"] for f in remote_row["source_files"]] == [storage.normalize(u) for u in remote]
    for key in ("records_read", "records_accepted", "records_rejected", "rejected_by_reason", "devices", "span_us",
                "start_time_utc", "geometry"):
        assert remote_row[key] == local_row[key], key
    # The tasks (Spark's Python workers, not this process) read the store through pyarrow's RandomAccessFile.
    assert any(pid != os.getpid() for pid, _ in store.opens()[driver_opens:])
    assert not [k for k in store.objects() if k.startswith("wh/")], "staged copies are removed"


# ---- the driver's side: checks, hashing, staging -------------------------------------------------------------

@pytest.mark.parametrize(("make", "message"), [
    (lambda s: s.url("traces/nope.csv"), r"s3a://bucket/traces/nope\.csv: no such file"),
    (lambda s: (s.put("traces/dir/a.csv", b"1\n"), s.url("traces/dir"))[1],
     r"s3a://bucket/traces/dir: is a directory \(a prefix\); name the trace files themselves"),
    (lambda s: s.put("traces/empty.csv", b""), r"traces/empty\.csv: empty file"),
    (lambda s: s.put("traces/locked.csv", b"1,2\n"), r"traces/locked\.csv: cannot open: .*Access Denied"),
    (lambda s: s.put("traces/empty.csv.gz", gzip.compress(b"")),
     r"empty\.csv\.gz: empty file \(after gzip decompression\)"),
    (lambda s: s.put("traces/bad.csv.gz", b"\x1f\x8b\x08garbage"), r"bad\.csv\.gz: corrupt gzip data"),
    (lambda s: "s3a://", r"s3a://: an S3 location needs a bucket"),
    (lambda s: "ftp://host/a.csv", r"ftp://host/a\.csv: unsupported location scheme 'ftp'"),
])
def test_bad_remote_inputs_are_named(store, tmp_path, make, message):
    with pytest.raises(InputError, match=message):
        prepare_inputs([make(store)], staging=store.url("wh/_staging"), binary=False)


def test_the_same_object_given_twice_is_refused(store, tmp_path):
    store.put("traces/a.csv", b"1,2\n")
    with pytest.raises(InputError, match=r"s3://bucket/traces/a\.csv: given twice \(also as s3a://bucket/traces"):
        prepare_inputs([store.url("traces/a.csv"), store.url("traces/a.csv", "s3")], staging=tmp_path, binary=False)


@pytest.mark.parametrize(("name", "compress", "compression", "staged"), [
    ("plain.csv", None, None, False),
    ("a.csv.gz", gzip.compress, "gzip", False),            # Spark decodes it itself: read from the store, as is
    ("a.csv.bz2", bz2.compress, "bzip2", False),
    ("a.csv.zst", zstandard.ZstdCompressor().compress, "zstd", True),
    ("gzip-without-extension.csv", gzip.compress, "gzip", True),
])
@pytest.mark.parametrize("staging_on_store", [True, False])
def test_remote_inputs_are_hashed_sniffed_and_staged(store, tmp_path, name, compress, compression, staged,
                                                     staging_on_store):
    plain = b"".join(b"%d,srv,0,Read,%d,4096,10\n" % (i, i * 4096) for i in range(50_000))
    data = compress(plain) if compress else plain
    url = store.put(f"traces/{name}", data)
    staging = store.url("wh/_staging") if staging_on_store else tmp_path / "staging"
    [f] = prepare_inputs([url], staging=staging, binary=False, defer_digests=True)
    assert (f.given, f.path, f.size_bytes, f.compression) == (url, url, len(data), compression)
    assert isinstance(f.digest, str)              # a remote file: hashed in the read that counts its newlines
    assert f.sha256 == hashlib.sha256(data).hexdigest()
    assert f.is_staged == staged
    assert inputs.read_head(f, 100) == plain[:100]
    if not staged:
        assert f.readable_path == url
        return
    if staging_on_store:
        assert isinstance(f.readable_path, str)
        assert f.readable_path.startswith("s3a://bucket/wh/_staging/")
        assert f.readable_path.endswith(f"{name}.raw")
        assert storage.read_bytes(f.readable_path) == plain
    else:
        assert isinstance(f.readable_path, Path)
        assert f.readable_path.parent == tmp_path / "staging"
        assert f.readable_path.read_bytes() == plain
    inputs.remove_staged(f.readable_path)
    assert not [k for k in store.objects() if k.startswith("wh/")]


def test_a_refused_input_leaves_no_staged_copy(store):
    good = store.put("traces/a.vscsi.zst", zstandard.ZstdCompressor().compress((AGREE / "dev0.v1.vscsi").read_bytes()))
    bad = store.put("traces/b.vscsi.gz", b"\x1f\x8b\x08garbage")
    with pytest.raises(InputError, match=r"b\.vscsi\.gz: corrupt gzip data"):
        prepare_inputs([good, bad], staging=store.url("wh/_staging"), binary=True)
    assert not [k for k in store.objects() if k.startswith("wh/")]


def test_a_prefetched_remote_digest_is_used_and_a_changed_object_hashed_again(store):
    a = store.put("traces/a.csv", b"1,2,3\n" * 100_000)
    b = store.put("traces/b.csv", b"4,5,6\n")
    inputs.prefetch_digests([a, b, store.url("traces/missing.csv")])
    assert {k[0] for k in inputs._PREFETCHED} >= {a, b}
    store.put("traces/b.csv", b"7,8,9,0\n")                              # changed after the prefetch
    files = prepare_inputs([a, b], staging=store.url("wh/_staging"), binary=False)
    assert [f.sha256 for f in files] == [hashlib.sha256(b"1,2,3\n" * 100_000).hexdigest(),
                                         hashlib.sha256(b"7,8,9,0\n").hexdigest()]
    assert not [k for k in inputs._PREFETCHED if k[0] in (a, b)]


# ---- the readers' range reads: the same bytes and counts as from a local file ---------------------------------

def test_line_ranges_of_a_remote_file_are_the_local_ones(store, tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "NEWLINE_BLOCK", 7)
    data = bytes(random.Random(3).choice(b"ab\n") for _ in range(301)) + b"\n"
    local = tmp_path / "f.txt"
    local.write_bytes(data)
    url = store.put("traces/f.txt", data)
    for step in (1, 2, 5, 64, 400):
        bounds = [(s, min(s + step, len(data))) for s in range(0, len(data), step)]
        assert [clean_text.read_lines(url, s, e - s) for s, e in bounds] == [
            clean_text.read_lines(str(local), s, e - s) for s, e in bounds], step
        assert clean_text.lines_per_range(url, bounds) == clean_text.lines_per_range(str(local), bounds), step
    assert inputs.newlines_before(url) is None                        # not hashed yet
    assert inputs._sha256(url) == hashlib.sha256(data).hexdigest()   # hashed: newlines counted per block on the way
    before = inputs.newlines_before(url)
    assert before is not None
    assert [before(x) for x in range(len(data) + 1)] == [data[:x].count(b"\n") for x in range(len(data) + 1)]
    bounds = [(s, min(s + 10, len(data))) for s in range(0, len(data), 10)]
    assert clean_text.lines_per_range(url, bounds) == clean_text.lines_per_range(str(local), bounds)


def test_binary_range_task_reads_remote_ranges_like_local_ones(store, tmp_path):
    data = bytes(random.Random(9).randrange(256) for _ in range(1000))
    local = tmp_path / "f.bin"
    local.write_bytes(data)
    url = store.put("traces/f.bin", data)
    task = range_task(lambda body, rng, before: pa.RecordBatch.from_pydict({"body": [body], "before": [before]}),
                      before=32)

    def read(path: str) -> list[tuple[bytes, bytes]]:
        ranges = pa.RecordBatch.from_pydict({"path": [path] * 4, "file_uri": ["f"] * 4, "start": [0, 10, 500, 990],
                                             "length": [10, 490, 490, 50]})
        return [(b.column("body")[0].as_py(), b.column("before")[0].as_py()) for b in task(iter([ranges]))]

    got = read(url)
    assert got == read(str(local))
    assert got[2] == (data[500:990], data[468:500])                   # with the 32 bytes before the range
    assert got[3] == (data[990:], data[958:990])                      # a range past the end: up to the end


# ---- the same against a real S3-compatible server (pyarrow's S3FileSystem; tests/s3_server.py) -----------------

@pytest.fixture
def real_s3(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The session's S3Proxy (`make` installs its jar), with this process's S3 settings pointing at it."""
    server = s3_server
    for key, value in server.environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("BLOCKHEAT_S3_PATH_STYLE", raising=False)
    return server


def test_inputs_on_a_real_s3_server_are_checked_hashed_staged_and_read_in_ranges(real_s3, tmp_path):
    from blockheat.libs.ingest.pipeline import _remove_scratch

    def put(key: str, data: bytes, scheme: str = "s3a") -> str:
        url = real_s3.url(f"remote-inputs/{key}", scheme=scheme)
        fs, path = storage.filesystem(url)
        with fs.open_output_stream(path, compression=None) as out:
            out.write(data)
        return url

    plain = b"".join(b"%d,srv,0,Read,%d,4096,10\n" % (i, i * 4096) for i in range(100_000))
    put("traces/empty.csv", b"")
    for key, message in (("traces/nope.csv", "no such file"), ("traces", "is a directory"),
                         ("traces/empty.csv", "empty file")):
        with pytest.raises(InputError, match=message):
            prepare_inputs([real_s3.url(f"remote-inputs/{key}", scheme="s3a")], staging=tmp_path, binary=False)
    urls = [put("traces/a.csv", plain), put("traces/b.csv.gzip", gzip.compress(plain, mtime=0)),   # not one content
            put("traces/c.csv.gz", gzip.compress(plain, mtime=1), scheme="s3")]
    staging = real_s3.url("remote-inputs/wh/_staging/t-1", scheme="s3a")
    files = prepare_inputs(urls, staging=staging, binary=False)
    assert [(f.compression, f.is_staged) for f in files] == [(None, False), ("gzip", True), ("gzip", False)]
    assert files[0].sha256 == hashlib.sha256(plain).hexdigest()
    assert files[1].readable_path == f"{staging}/0001_b.csv.gzip.raw"
    assert inputs.read_head(files[1], 1000) == inputs.read_head(files[2], 1000) == plain[:1000]

    local = tmp_path / "a.csv"
    local.write_bytes(plain)
    for path in (str(f.readable_path) for f in files[:2]):
        size = inputs.file_size(path)
        assert size == len(plain)
        bounds = [(s, min(s + 300_007, size)) for s in range(0, size, 300_007)]
        assert clean_text.lines_per_range(path, bounds) == clean_text.lines_per_range(str(local), bounds)
        assert [clean_text.read_lines(path, s, e - s) for s, e in bounds] == [
            clean_text.read_lines(str(local), s, e - s) for s, e in bounds]
    task = range_task(lambda body, rng, before: pa.RecordBatch.from_pydict({"body": [body], "before": [before]}),
                      before=40)
    ranges = pa.RecordBatch.from_pydict({"path": [urls[0]], "file_uri": ["a"], "start": [1000], "length": [5000]})
    [batch] = task(iter([ranges]))
    assert (batch.column("body")[0].as_py(), batch.column("before")[0].as_py()) == (plain[1000:6000], plain[960:1000])

    _remove_scratch(f"{staging}/classified.parquet", [files[1].readable_path])
    assert not [p for p, _ in storage.files_under(staging)]
