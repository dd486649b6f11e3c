"""Ingest: source files -> classified records -> `requests`, `rejected_records` and a `traces` row.

load_trace() reads and checks a trace and returns what to write (refusing it, with nothing written, when
it is not in the stated format or too many records are rejected); write_trace() commits it. Every
source record is either a request or a rejected record with a reason, and records_read = accepted +
rejected holds by construction. An append (IngestOptions.append, libs.ingest.append) adds a batch of files to an
existing trace, continuing its seq numbers and time. Three ways in:
- delimited text with no bad line (MSR, SPC, Alibaba, Tencent, plain CSV layouts): readers.clean_text,
  one pass of Spark tasks over line-aligned byte ranges that parse with pyarrow and write `requests`
  themselves; the first sign of a line it does not take hands the trace to the general path;
- vSCSI: two passes of tasks over record-aligned byte ranges (libs.ingest.direct);
- the general path, every other format and any trace with a bad line: Spark's text reader (or a
  binary decoder) into Spark expressions, classified into a scratch Parquet copy, then written.

Inputs, the staging location and the warehouse may each be local or on an object store (libs.io.storage): the
driver checks, hashes and stages remote inputs through pyarrow's file system (libs.io.inputs), the tasks read
their byte ranges of a remote file with pyarrow's random-access reads, and Spark's own readers and writers get the
URI (s3:// as s3a://, Hadoop's S3 file system).

Nothing is left behind: an ingest stages decompressed inputs and its scratch copy in a folder of its own under
the staging location and deletes that folder whole when it ends, failed or not; a failed write deletes its table
files (libs.io.delta_files). What a killed ingest left is deleted by the next ingest's start (sweep_leftovers,
libs.io.vacuum), once older than the longest possible write.

Numbering on the general path: Spark splits a big text file into blocks read in parallel. Within a block
rows keep file order, and monotonically_increasing_id() counts them contiguously, so a narrow ordered first
pass (readers.scan: counts per block, backwards timestamps) gives every line its exact line number
and `seq` without funnelling the file through one task or shuffling it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import os
import shutil
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
from pyspark.sql import Row, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from blockheat.libs.ingest import direct
from blockheat.libs.ingest.append import (
    AppendError,
    TraceSoFar,
    check_new_files,
    merged_row,
    overlap_problem,
    resort_overlaps,
)
from blockheat.libs.io import journal, storage, vacuum
from blockheat.libs.io.connect import one_row_per_task, parallelism
from blockheat.libs.io.delta_files import Append, PendingWrite, Where, write_from_driver, write_tables_by_tasks
from blockheat.libs.io.inputs import (
    COPY_CHUNK,
    LONG_LINE_KEPT,
    MAX_LINE_BYTES,
    SNIFF_BYTES,
    InputError,
    InputFile,
    Location,
    file_size,
    local_path,
    open_decompressed,
    prepare_inputs,
    read_head,
    remove_staged,
    text_problem,
)
from blockheat.libs.io.lease import DEFAULT_WAIT_S, Lease
from blockheat.libs.io.table_versions import table_path
from blockheat.libs.io.tables import check_trace_id, table_target, write_rows
from blockheat.libs.io.worker import python_task
from blockheat.libs.readers import binary, clean_text
from blockheat.libs.readers.scan import SCAN_DDL, scan_blocks
from blockheat.libs.readers.srt import SrtFormatError, parse_srt_header, tracedate_to_iso
from blockheat.libs.readers.text_formats import (
    BLKPARSE_EXPECTED,
    FILETIME_UNIX_OFFSET_US,
    LAYOUTS,
    CsvLayout,
    parse_blkparse,
    parse_csv,
)
from blockheat.schemas import rejected_records, requests, traces
from blockheat.schemas import rejected_records as RJ

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# A trace whose requests are under this share of its records read (the rest informational rejects: summary lines,
# other events, non-data commands) is refused as not in its format: 2 events among 1,053 other lines is no trace.
MIN_REQUEST_SHARE = 0.01

TEXT_FORMATS = (*LAYOUTS, "blkparse", "csv")
BINARY_FORMATS = ("vscsi", "hp-srt")
FORMATS = tuple(sorted((*TEXT_FORMATS, *BINARY_FORMATS)))
SNIFF_LINES = 50
BINARY_RANGE_BYTES = 64 << 20
#: The clean text path's range per task: larger than a binary one, as each task's fixed cost (~0.1 s of Spark's
#: scheduling and Arrow exchange) is a fifth of parsing 64 MB; a task then adds ~0.4 GB at its peak (bytes, columns).
TEXT_RANGE_BYTES = 128 << 20
#: The reason of a text line longer than libs.io.inputs.MAX_LINE_BYTES (its raw: its first LONG_LINE_KEPT bytes).
LINE_TOO_LONG = "line_too_long"


class IngestError(ValueError):
    """The ingest was refused (wrong format, too many rejects); nothing was written."""


@dataclass(frozen=True)
class IngestOptions:
    """What to ingest and how strict to be."""

    fmt: str
    trace_id: str
    paths: tuple[str, ...]
    max_reject_share: float = 0.01
    # A record whose timestamp is more than this earlier than the previous record's (same file)
    # is rejected as ts_backwards; None disables the check.
    ts_tolerance_us: int | None = 1_000_000
    layout: CsvLayout | None = None          # for fmt == "csv"
    # Clean delimited text through readers.clean_text; False: always the general text path (the tests
    # compare the two).
    fast_text: bool = True
    staging: Location = Path("warehouse/_staging")      # a local directory or a URI (libs.io.storage)
    # Add the files to the existing trace (libs.ingest.append) instead of replacing it.
    append: bool = False
    # An appended file may start before the trace's end: the requests files its rows reach into are re-sorted.
    allow_overlap: bool = False
    # The most a compressed input may decompress to, in bytes, per file; None: libs.io.inputs.expanded_limit's
    # default (1,000 x the compressed size, at least 1 GiB).
    max_expanded_bytes: int | None = None
    # How long to wait for another ingest of the same trace id (its lease, libs.io.lease) before refusing, in s.
    lock_wait_s: float = DEFAULT_WAIT_S
    # Set by load_trace for an append: where the trace left off.
    continues: TraceSoFar | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_trace_id(self.trace_id)
        if self.fmt not in FORMATS:
            raise IngestError(f"unknown format {self.fmt!r}; one of {', '.join(FORMATS)}")
        if self.fmt == "csv" and self.layout is None:
            raise IngestError("--format csv needs a column mapping (--csv-columns)")
        if not 0.0 <= self.max_reject_share <= 1.0:
            raise IngestError(f"max reject share must be in [0, 1], got {self.max_reject_share}")
        if self.ts_tolerance_us is not None and self.ts_tolerance_us < 0:
            raise IngestError(f"timestamp tolerance must be >= 0 us, got {self.ts_tolerance_us}")
        if self.max_expanded_bytes is not None and self.max_expanded_bytes <= 0:
            raise IngestError(f"--max-expanded-bytes must be > 0, got {self.max_expanded_bytes}")
        if self.allow_overlap and not self.append:
            raise IngestError("--allow-overlap applies only to --append")
        if self.lock_wait_s < 0:
            raise IngestError(f"--lock-wait must be >= 0 s, got {self.lock_wait_s}")

    @property
    def seq_base(self) -> int:
        """The first record's seq: 0, or where the trace an append continues left off."""
        return self.continues.seq_base if self.continues else 0

    def where(self) -> Where:
        """What the ingest's `requests` and `rejected_records` commits replace: the trace's rows, or nothing (an
        append; with --allow-overlap the files it re-sorts, set at the commit)."""
        scope = {"trace_id": self.trace_id}
        return Append(scope) if self.continues else scope


@dataclass
class IngestResult:
    """The checked trace, ready to write (write_trace); release() afterwards.

    Either lazy `requests` and `rejected` frames over the classified records (a scratch Parquet copy),
    or `write_direct`: tasks that write both tables' files themselves (vSCSI: libs.ingest.direct; clean text:
    already written, readers.clean_text), uncommitted.
    """

    requests: DataFrame | None
    rejected: DataFrame | None
    trace_row: dict[str, Any]
    per_device: list[dict[str, Any]]
    opts: IngestOptions
    _scratch: Location
    _staged: list[Location] = field(default_factory=list)
    write_direct: Callable[[SparkSession, Location], PendingWrite] | None = None
    _pending: list[PendingWrite] = field(default_factory=list)   # files written and not committed
    lease: Lease | None = None               # the trace's lease the ingest holds (load_trace's `lease`)

    def release(self) -> None:
        for pending in self._pending:
            pending.discard()   # a no-op once committed
        _remove_scratch(self._scratch, self._staged)


def write_trace(spark: SparkSession, warehouse: Location, result: IngestResult) -> None:
    """Replace the trace's rows of `requests` and `rejected_records` and its `traces` row (an append: add to the
    first two, replace the third), all or nothing: the three tables' files are written first, then committed as
    one decision (libs.io.journal), so every reader sees the whole old trace or the whole new one, after a crash, a
    kill or a full disk too."""
    trace_id = result.trace_row["trace_id"]
    where = {"trace_id": trace_id}
    rows_where = result.opts.where()
    if result.write_direct is not None:
        log.info("writing %s and %s", requests.TABLE, rejected_records.TABLE)
        written = result.write_direct(spark, warehouse)
        if all(p is not written for p in result._pending):      # the clean-text path wrote its files earlier
            result._pending.append(written)
    elif result.requests is not None and result.rejected is not None:
        log.info("writing %s", requests.TABLE)
        result._pending.append(write_rows(result.requests, spark, warehouse, requests.TABLE, rows_where))
        log.info("writing %s", rejected_records.TABLE)
        result._pending.append(write_rows(result.rejected, spark, warehouse, rejected_records.TABLE, rows_where))
    so_far = result.opts.continues
    if so_far is not None:
        if result.opts.allow_overlap:
            resort_overlaps(spark, result._pending, trace_id)
        with _refusal():
            so_far.check_unchanged(warehouse)
    row = pa.Table.from_pylist([result.trace_row], schema=traces.ARROW_SCHEMA)
    result._pending.append(write_from_driver(table_target(spark, warehouse, traces.TABLE), where, row))
    log.info("committing trace %s", trace_id)
    journal.commit(warehouse, result._pending, f"the {'append to' if so_far else 'ingest of'} trace {trace_id}",
                   lease=result.lease)


@contextlib.contextmanager
def _refusal() -> Iterator[None]:
    """An append's refusal (libs.ingest.append) as the ingest's own."""
    try:
        yield
    except AppendError as exc:
        raise IngestError(str(exc)) from None


# ---------------------------------------------------------------------------------------------
# Locations as Spark and the records' file_uri column name them


def _spark_path(location: Location) -> str:
    """A location as Spark's readers and writers take it: a local path, or the URI (s3:// as s3a://: Hadoop's S3
    file system is s3a)."""
    text = os.fspath(location)
    return f"s3a://{text.split('://', 1)[1]}" if storage.scheme(text) == "s3" else text


def _file_uri(location: Location) -> str:
    """A readable file's identity in the records' file_uri column: a local file's file:// URI, a remote one's URI
    as Spark names it (_metadata.file_path)."""
    return Path(location).absolute().as_uri() if storage.is_local(location) else _spark_path(location)


def _file_key(uri: str) -> str:
    """The file a file_uri names (Spark's _metadata.file_path, file:/x for a local file, or _file_uri's), comparable
    across both."""
    parsed = urlparse(uri)
    if parsed.scheme.lower() in ("", "file"):
        return str(Path(unquote(parsed.path)))
    return unquote(_spark_path(uri))


# ---------------------------------------------------------------------------------------------
# Reading: every format yields "pre" rows: file_uri, block_start, m, byte_pos, raw + parsed fields


def _layout(opts: IngestOptions) -> CsvLayout | None:
    return opts.layout if opts.fmt == "csv" else LAYOUTS.get(opts.fmt)


def _parser(opts: IngestOptions) -> tuple[Any, str]:
    """(DataFrame transform adding the parsed columns from `raw`, the layout as a person reads it)."""
    layout = _layout(opts)
    if layout is not None:
        return (lambda df: parse_csv(df, layout)), layout.expected
    return parse_blkparse, BLKPARSE_EXPECTED


def _sniff_text(spark: SparkSession, heads: list[tuple[str, bytes]], opts: IngestOptions) -> None:
    """Refuse a file that is binary, or whose first lines are none of them records of the format; `heads`: each
    file's (name, first SNIFF_BYTES + 1 decompressed bytes). One Spark job for all files."""
    parse, expected = _parser(opts)
    sample = []
    for k, (given, head) in enumerate(heads):
        problem = text_problem(head[:SNIFF_BYTES])
        if problem:
            raise IngestError(f"{given}: {problem}; expected text ({expected})")
        lines = head[:SNIFF_BYTES].decode("utf-8", errors="replace").splitlines()
        if len(head) > SNIFF_BYTES:
            lines = lines[:-1]  # the last line may be cut at the sniff boundary
        sample += [(k, i + 1, s) for i, s in enumerate(lines[:SNIFF_LINES])]
    if not sample:
        return
    df = spark.createDataFrame(sample, "file int, line long, raw string")
    by_file: dict[int, list[Any]] = defaultdict(list)
    for r in parse(df).select("file", "line", "reason", "message").collect():
        by_file[r.file].append(r)
    for k, (given, _) in enumerate(heads):
        rows = sorted(by_file[k], key=lambda r: r.line)
        errors = [r for r in rows if r.reason is not None and r.reason not in RJ.INFORMATIONAL_REASONS]
        if rows and errors and not any(r.reason is None for r in rows):
            first = errors[0]
            raise IngestError(f"{given}: line {first.line}: not {opts.fmt} data ({first.message}); "
                              f"expected {expected}")


def _format_check(spark: SparkSession,
                  opts: IngestOptions) -> tuple[Callable[[list[tuple[str, bytes, bool]]], None], int]:
    """The check prepare_inputs runs on the files' first decompressed bytes before staging anything (IngestError
    when a file is not in the format), and how many bytes it needs: the vSCSI version or the SRT header; for text,
    that it is text, and the parse sniff (a Spark job) of a compressed file, before it is decompressed here; a plain
    file's sniff is the general path's (_text_pre), the clean-text path needing none."""
    def vscsi(heads: list[tuple[str, bytes, bool]]) -> None:
        for given, head, _ in heads:
            try:
                binary.detect_vscsi_version(head, given)
            except binary.BinaryFormatError as exc:
                hint = "" if text_problem(head) else " (the file looks like text)"
                raise IngestError(f"{exc}{hint}") from exc

    def srt(heads: list[tuple[str, bytes, bool]]) -> None:
        for given, head, _ in heads:
            try:
                parse_srt_header(head, source=given)
            except SrtFormatError as exc:
                raise IngestError(str(exc)) from exc

    if opts.fmt == "vscsi":
        return vscsi, 64 * 40
    if opts.fmt == "hp-srt":
        return srt, 1 << 20
    def text(heads: list[tuple[str, bytes, bool]]) -> None:
        _, expected = _parser(opts)
        for given, head, _ in heads:
            if problem := text_problem(head[:SNIFF_BYTES]):
                raise IngestError(f"{given}: {problem}; expected text ({expected})")
        _sniff_text(spark, [(given, head) for given, head, compressed in heads if compressed], opts)

    return text, SNIFF_BYTES + 1


def _text_pre(spark: SparkSession, files: list[InputFile], opts: IngestOptions) -> DataFrame:
    parse, _ = _parser(opts)
    _sniff_text(spark, [(f.given, read_head(f, SNIFF_BYTES + 1)) for f in files], opts)
    lines = spark.read.text([_spark_path(f.readable_path) for f in files]).select(
        F.col("_metadata.file_path").alias("file_uri"),
        F.col("_metadata.file_block_start").alias("block_start"),
        # Must come straight after the scan: ids are contiguous per partition only before filters.
        F.monotonically_increasing_id().alias("m"),
        F.lit(None).cast("bigint").alias("byte_pos"),
        F.col("value").alias("raw"),
    )
    return parse(lines)


def _device_name(f: InputFile) -> str:
    """One binary file is one device (vSCSI records carry none): the file name sans extensions."""
    name = f.name
    for suffix in (".gz", ".bz2", ".zst", ".zstd"):
        name = name.removesuffix(suffix)
    return name.split(".")[0] or name


def _binary_pre(spark: SparkSession, files: list[InputFile], opts: IngestOptions,
                geometry: list[dict[str, Any]], meta: dict[str, Any]) -> DataFrame:
    range_df, task, _ = _binary_ranges(spark, files, opts, geometry, meta)
    return range_df.mapInArrow(python_task(task), from_arrow_schema(binary.RECORD_SCHEMA))


def _balanced(size: int, target: int, slots: int) -> int:
    """Range length near `target` that splits `size` bytes into a multiple of `slots` ranges, so every
    core gets as many (400 MB on 2 cores: 8 ranges of 50 MB, not 7 of 64 MB with one core idle at the end)."""
    count = -(-size // target)
    count = -(-count // slots) * slots
    return max(1, -(-size // count))


def _binary_ranges(spark: SparkSession, files: list[InputFile], opts: IngestOptions,
                   geometry: list[dict[str, Any]], meta: dict[str, Any]) -> tuple[DataFrame, Any, Any]:
    """One row per byte range to decode (path, file_uri, start, length), the mapInArrow function that
    decodes them into RECORD_SCHEMA rows, and (vSCSI) the one that summarizes them (ingest_direct)."""
    ranges: list[binary.ByteRange] = []
    schema = T.StructType([T.StructField(n, t) for n, t in (
        ("path", T.StringType()), ("file_uri", T.StringType()),
        ("start", T.LongType()), ("length", T.LongType()))])
    if opts.fmt == "vscsi":
        versions = {}
        for f in files:
            head = read_head(f, 64 * 40)
            try:
                versions[f.given] = binary.detect_vscsi_version(head, f.given)
            except binary.BinaryFormatError as exc:
                hint = "" if text_problem(head) else " (the file looks like text)"
                raise IngestError(f"{exc}{hint}") from exc
        if len(set(versions.values())) > 1:
            raise IngestError(f"vSCSI files of mixed versions in one trace: {versions}")
        version = next(iter(versions.values()))
        meta["vscsi_version"] = str(version)
        rs = binary.VSCSI_DTYPES[version].itemsize
        plan: dict[str, binary.VscsiFile] = {}
        seq_base = opts.seq_base
        for f in files:
            size = file_size(f.readable_path)
            uri = _file_uri(f.readable_path)
            plan[uri] = binary.VscsiFile(_device_name(f), f.given, seq_base)
            seq_base += size // rs + (1 if size % rs else 0)  # a truncated tail is one rejected record
            ranges += binary.vscsi_ranges(str(f.readable_path), uri, size, version,
                                          _balanced(size, BINARY_RANGE_BYTES, parallelism(spark)))
        task = binary.vscsi_task(version, plan, opts.ts_tolerance_us)
        summarize = direct.summary_task(version, plan, opts.ts_tolerance_us)
    else:
        sector_sizes: dict[str, dict[int, int]] = {}
        for f in files:
            try:
                header = parse_srt_header(read_head(f, 1 << 20), source=f.given)
            except SrtFormatError as exc:
                raise IngestError(str(exc)) from exc
            uri = _file_uri(f.readable_path)
            sector_sizes[uri] = {n: d.sector_size for n, d in header.disks.items()}
            size = file_size(f.readable_path)
            ranges.append(binary.ByteRange(str(f.readable_path), uri, header.data_offset,
                                           size - header.data_offset))
            if header.tracedate and "start" not in meta:
                meta["start"] = f"{tracedate_to_iso(header.tracedate)} local time of " \
                                f"{header.system or 'the traced host'} (zone not recorded)"
            for n, d in sorted(header.disks.items()):
                geometry.append({
                    "device": str(n), "disk_type": d.disktype, "sector_size": d.sector_size,
                    "sectors_per_track": d.sectors_per_track, "tracks_per_cylinder": d.tracks_per_cylinder,
                    "cylinders": d.cylinders, "rpm": d.rpm, "head_switch_us": d.head_switch_us,
                    "overhead_us": d.overhead_us, "sector_skew": d.sector_skew,
                    "seek_params": list(d.seek_params), "block_size": d.block_size, "raw": dict(d.raw),
                })
        task = binary.srt_task(sector_sizes)
        summarize = None
    rows = [(r.path, r.file_uri, r.start, r.length) for r in ranges]
    range_df = one_row_per_task(spark, rows, schema)
    return range_df, task, summarize


# ---------------------------------------------------------------------------------------------
# Numbering and classification


def _scan(spark: SparkSession, pre: DataFrame, files: list[InputFile], tolerance_us: int | None,
          opts: IngestOptions) -> tuple[DataFrame, DataFrame | None]:
    """The ordered first pass (readers.scan): per block, its file and the line/seq number of its
    first record; and the records whose timestamp goes back more than tolerance_us from the
    previous record with a timestamp in the same file (None when there are none)."""
    rows = (pre.select("file_uri", "block_start", "m", "ts_raw_us")
            .mapInArrow(python_task(scan_blocks(tolerance_us)), SCAN_DDL).collect())
    back = [(r.file_uri, r.block_start, r.min_m, r.last_ts) for r in rows if r.kind == "back"]
    by_path = {_file_key(_file_uri(f.readable_path)): i for i, f in enumerate(files)}
    by_file: dict[int, list[Any]] = defaultdict(list)
    for row in rows:
        if row.kind == "block":
            by_file[by_path[_file_key(row.file_uri)]].append(row)
    info = []
    seq_base = opts.seq_base
    for index, f in enumerate(files):
        line_base = 0
        prev_ts = None
        for row in sorted(by_file[index], key=lambda r: r.block_start):
            info.append((row.file_uri, row.block_start, f.given, seq_base + line_base, line_base, row.min_m))
            # A block's first timestamp is checked against the previous block's last one here.
            if (tolerance_us is not None and row.first_ts is not None and prev_ts is not None
                    and row.first_ts < prev_ts - tolerance_us):
                back.append((row.file_uri, row.block_start, row.first_m, prev_ts))
            line_base += row.n
            prev_ts = row.last_ts if row.last_ts is not None else prev_ts
        seq_base += line_base
    info_df = spark.createDataFrame(info, "file_uri string, block_start long, source_file string, "
                                          "seq_base long, line_base long, min_m long")
    back_df = (spark.createDataFrame(back, "file_uri string, block_start long, m long, prev_ts long")
               if back else None)
    return info_df, back_df


def _closed_loop_ts(df: DataFrame) -> DataFrame:
    """DiskSim validation traces: one request outstanding, so arrival(n+1) = arrival(n) + access(n)
    + idle gap(n). A running sum per file (these traces are small; one task per file is fine)."""
    w = Window.partitionBy("source_file").orderBy("seq").rowsBetween(Window.unboundedPreceding, -1)
    step = F.coalesce(F.col("response_us"), F.lit(0.0)) + F.coalesce(F.col("queue_us"), F.lit(0.0))
    ts = F.coalesce(F.round(F.sum(step).over(w)).cast("bigint"), F.lit(0).cast("bigint"))
    # The idle gap is not a queueing time: it only served to place the next arrival.
    return df.withColumn("ts_raw_us", ts).withColumn("queue_us", F.lit(None).cast("double"))


def _blkparse_response(df: DataFrame) -> DataFrame:
    """Response time of each D (issue) event = time of the first later C (complete) event for the
    same device, sector and length. Ordering by time descending makes that the last non-null C
    time in a growing frame, which Spark evaluates in one pass per group."""
    key = ["device", "offset_bytes", "size_bytes"]
    w = (Window.partitionBy(*key)
         .orderBy(F.col("ts_raw_us").desc(), F.col("seq").desc())
         .rowsBetween(Window.unboundedPreceding, -1))
    is_c = F.col("reason") == "completion_event"
    next_c = F.last(F.when(is_c, F.col("ts_raw_us")), ignorenulls=True).over(w)
    response = F.when(F.col("reason").isNull() & (F.col("blk_action") == "D"),
                      (next_c - F.col("ts_raw_us")).cast("double"))
    return df.withColumn("response_us", response).drop("blk_action")


def _mark_backwards(df: DataFrame, back: DataFrame, tolerance_us: int) -> DataFrame:
    """Give the records the scan found going back in time the reason ts_backwards (a record that
    is already rejected for another reason keeps it)."""
    # Broadcast: the set is small (above the reject limit the ingest has already failed).
    marked = df.join(F.broadcast(back), ["file_uri", "block_start", "m"], how="left")
    back_now = F.col("reason").isNull() & F.col("prev_ts").isNotNull()
    return (
        marked.withColumn("_back", back_now)
        .withColumn("reason", F.when(F.col("_back"), F.lit("ts_backwards")).otherwise(F.col("reason")))
        .withColumn("message", F.when(F.col("_back"), F.concat(
            F.lit("timestamp goes back "), (F.col("prev_ts") - F.col("ts_raw_us")).cast("string"),
            F.lit(f" us (tolerance {tolerance_us} us)"))).otherwise(F.col("message")))
        .drop("_back", "prev_ts")
    )


CLASSIFIED_COLUMNS = (
    "source_file", "seq", "position", "position_kind", "device", "ts_raw_us", "op", "offset_bytes",
    "size_bytes", "response_us", "queue_us", "reason", "message", "raw",
)


def classify(spark: SparkSession, pre: DataFrame, files: list[InputFile], opts: IngestOptions,
             *, binary_positions: bool) -> DataFrame:
    """Number every record (seq, position) and finish its reason. Output columns: source_file,
    seq, position, position_kind, device, ts_raw_us, op, offset_bytes, size_bytes, response_us,
    queue_us, reason, message, raw (raw only on rejected records)."""
    # vSCSI: fixed-size records, so the decoder numbered them and checked time order itself.
    df = pre if opts.fmt == "vscsi" else _number(spark, pre.drop("seq", "source_file"), files, opts)
    if binary_positions:
        df = df.withColumn("position", F.col("byte_pos")).withColumn("position_kind", F.lit("byte"))
    else:
        df = df.withColumn("position", F.col("line_base") + F.col("m") - F.col("min_m") + 1) \
               .withColumn("position_kind", F.lit("line"))
    layout = _layout(opts)
    if layout is not None and layout.skip_header_lines:
        header = (F.col("position") <= layout.skip_header_lines) & (F.col("position_kind") == "line")
        df = (df.withColumn("reason", F.when(header, F.lit("header_line")).otherwise(F.col("reason")))
                .withColumn("message", F.when(header, F.lit("header line")).otherwise(F.col("message"))))
    long = [(f.given, line, length) for f in files for line, length in f.long_lines]
    if long and not binary_positions:
        df = _mark_long_lines(spark, df, long)
    if opts.fmt == "disksim-validate":
        df = _closed_loop_ts(df)
    if opts.fmt == "blkparse":
        df = _blkparse_response(df)
    return df.select(*CLASSIFIED_COLUMNS[:-1], F.when(F.col("reason").isNotNull(), F.col("raw")).alias("raw"))


def _mark_long_lines(spark: SparkSession, df: DataFrame, long: list[tuple[str, int, int]]) -> DataFrame:
    """Give the lines prepare_inputs cut (libs.io.inputs.MAX_LINE_BYTES; (source_file, line, length)) the reason
    line_too_long, whatever their first bytes parsed as; their parsed fields are dropped."""
    marks = spark.createDataFrame(long, "source_file string, position long, line_bytes long")
    df = df.join(F.broadcast(marks), ["source_file", "position"], how="left")
    cut = F.col("line_bytes").isNotNull()
    message = F.concat(F.lit(f"line longer than {MAX_LINE_BYTES} bytes ("), F.col("line_bytes").cast("string"),
                       F.lit(f" bytes); raw holds its first {LONG_LINE_KEPT} bytes at most"))
    df = (df.withColumn("reason", F.when(cut, F.lit(LINE_TOO_LONG)).otherwise(F.col("reason")))
            .withColumn("message", F.when(cut, message).otherwise(F.col("message"))))
    for name in ("device", "ts_raw_us", "op", "offset_bytes", "size_bytes", "response_us", "queue_us"):
        df = df.withColumn(name, F.when(cut, F.lit(None)).otherwise(F.col(name)))
    return df.drop("line_bytes")


def _number(spark: SparkSession, pre: DataFrame, files: list[InputFile], opts: IngestOptions) -> DataFrame:
    """seq (and the per-block columns positions need) from the ordered scan; ts_backwards marked."""
    tolerance = None if opts.fmt == "disksim-validate" else opts.ts_tolerance_us
    info, back = _scan(spark, pre, files, tolerance, opts)
    df = pre.join(F.broadcast(info), ["file_uri", "block_start"], how="inner")
    df = df.withColumn("seq", F.col("seq_base") + F.col("m") - F.col("min_m"))
    if back is not None and tolerance is not None:
        df = _mark_backwards(df, back, tolerance)
    return df


# ---------------------------------------------------------------------------------------------
# The whole ingest


def _start_time(fmt: str, start_raw_us: int | None, meta: dict[str, Any],
                layout: CsvLayout | None) -> tuple[dt.datetime | None, str | None]:
    epoch = layout.ts_epoch if layout else None
    if start_raw_us is None:
        return None, meta.get("start")
    if epoch == "filetime":
        unix_us = start_raw_us - FILETIME_UNIX_OFFSET_US
    elif epoch == "unix":
        unix_us = start_raw_us
    else:
        return None, meta.get("start")
    when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=unix_us)
    return when, f"{when.isoformat()} ({epoch} timestamp of the first record)"


def staging_location(warehouse: Location) -> Location:
    """Where an ingest stages decompressed inputs: <warehouse>/_staging (a Path under a local warehouse)."""
    return _child(warehouse, "_staging")


def _child(base: Location, name: str) -> Location:
    """base/name: a Path under a local directory, a URI under a remote one."""
    return local_path(base) / name if storage.is_local(base) else storage.join(storage.normalize(base), name)


def load_trace(spark: SparkSession, opts: IngestOptions, warehouse: Location,
               lease: Lease | None = None) -> IngestResult:
    """Read, number and classify a trace; refuse it (IngestError, nothing cached or written) when it
    is not in the stated format or too many records are rejected. `lease`: the trace's lease (libs.io.lease) the
    caller holds from before this call until write_trace's commit, so no other ingest of the id runs in between.

    >>> result = load_trace(spark, IngestOptions("msr", "hm", ("hm_0.csv",)), Path("warehouse"))
    >>> write(result.requests); write(result.rejected); write_row(result.trace_row)
    """
    is_binary = opts.fmt in BINARY_FORMATS
    sweep_leftovers(warehouse, opts.staging, holder=lease)
    if opts.append:
        with _refusal():
            opts = dataclasses.replace(opts, continues=TraceSoFar.read(warehouse, opts.trace_id, opts.fmt,
                                                                        opts.layout.expected if opts.layout else None))
    staging = _child(opts.staging, f"{opts.trace_id}-{uuid.uuid4().hex[:8]}")
    try:
        check, head_bytes = _format_check(spark, opts)
        files = prepare_inputs(list(opts.paths), staging=staging, binary=is_binary, check=check,
                               head_bytes=head_bytes, max_expanded_bytes=opts.max_expanded_bytes,
                               defer_digests=True)            # hashed while the tasks parse; the commit waits
        if opts.continues is not None:
            with _refusal():
                check_new_files(opts.continues, files)
    except BaseException:
        _remove_staging(staging)
        raise
    staged = [f.readable_path for f in files if f.is_staged]
    log.info("trace %s: %d %s file(s), %.1f MB%s", opts.trace_id, len(files), opts.fmt,
             sum(f.size_bytes for f in files) / 1e6,
             f" ({len(staged)} decompressed for reading)" if staged else "")
    geometry: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    # The classified records are read three times (summary, requests, rejects): from a scratch
    # Parquet copy, a little faster end to end than Spark's in-memory cache. It lives only until
    # release().
    scratch = _child(staging, "classified.parquet")
    if opts.fmt == "vscsi":
        try:
            result = _load_vscsi(spark, files, opts, geometry, meta, scratch)
        except BaseException:
            _remove_scratch(scratch, staged)
            raise
        result._staged, result.lease = staged, lease
        return result
    try:
        fast = None if is_binary else _load_clean_text(spark, files, opts, warehouse, scratch)
        if fast is not None:
            fast._staged, fast.lease = staged, lease
            return fast
        pre = _binary_pre(spark, files, opts, geometry, meta) if is_binary else _text_pre(spark, files, opts)
        classify(spark, pre, files, opts, binary_positions=is_binary).write.mode("overwrite").parquet(
            _spark_path(scratch))
        log.info("trace %s: parsed and checked every record", opts.trace_id)
        cached = spark.read.parquet(_spark_path(scratch))
        summary = _summarize(cached)
        log.info("trace %s: %d records read", opts.trace_id, sum(r.n for r in summary))
        result = _finish(cached, summary, files, opts, geometry, meta, scratch)
    except BaseException as exc:
        _remove_scratch(scratch, staged)
        # A refusal (IngestError) comes from records read whole; any other failure may be a cut-short input.
        corrupt = _corrupt_input(files) if isinstance(exc, Exception) and not isinstance(exc, IngestError) else None
        if corrupt is not None:
            raise corrupt from exc
        raise
    result._staged, result.lease = staged, lease
    return result


#: The tables an ingest writes: the start-up sweep looks for a killed ingest's files in these (`blockheat vacuum`
#: sweeps every table).
INGEST_TABLES = (requests.TABLE, rejected_records.TABLE, traces.TABLE)


def sweep_leftovers(warehouse: Location, staging: Location, holder: Lease | None = None) -> None:
    """The ingest's start-up: finish what a stopped ingest decided (libs.io.journal, as the holder of the trace's
    lease `holder`: a left entry of an older lease of the trace is applied first; JournalError when that fails),
    then the sweep (libs.io.vacuum): delete what a killed ingest left, older than vacuum.LONGEST_WRITE: ingests'
    folders under `staging`, and Parquet files in the ingest's tables that no committed version references. A
    failure to clean up is logged, never the ingest's failure."""
    journal.finish(warehouse, holder=holder)
    try:
        swept = [vacuum.sweep_staging(staging)]
        swept += [vacuum.sweep_table(table_path(warehouse, t)) for t in INGEST_TABLES]
    except (OSError, ValueError) as exc:
        log.warning("sweep of left-over files in %s failed: %s", warehouse, exc)
        return
    for removed in swept:
        if removed.files:
            log.info("deleted %d left-over file(s), %d bytes, of killed writes in %s (older than %s)",
                     removed.files, removed.bytes, removed.where, vacuum.LONGEST_WRITE)


def _corrupt_input(files: list[InputFile]) -> InputError | None:
    """After a failed read: an InputError naming the first input Spark decompressed itself (gzip, bzip2 by their
    extension) that is corrupt or cut short, found by decompressing it to its end; None when they are all whole
    (the failure was something else)."""
    for f in files:
        if not f.compression or f.is_staged:
            continue
        try:
            with open_decompressed(f.readable_path, f.compression) as src:
                while src.read(COPY_CHUNK):
                    pass
        except (OSError, EOFError, ValueError) as exc:
            return InputError(f"{f.given}: corrupt {f.compression} data (cut short or damaged): {exc}; "
                              "nothing written")
    return None


def _remove_scratch(scratch: Location, staged: list[Location]) -> None:
    """Remove the scratch Parquet copy and the decompressed inputs: this ingest's whole folder under the staging
    location (their parent)."""
    for path in staged:
        with contextlib.suppress(OSError):
            remove_staged(path)
    _remove_staging(local_path(scratch).parent if storage.is_local(scratch) else storage.parent(str(scratch)))


def _remove_staging(folder: Location) -> None:
    """Delete this ingest's own folder under the staging location and everything in it (on an object store the
    prefix, with any directory marker the store keeps for it); nothing when it is not there."""
    if storage.is_local(folder):
        shutil.rmtree(local_path(folder), ignore_errors=True)
        return
    with contextlib.suppress(OSError):
        storage.delete_tree(str(folder))


def _summarize(cached: DataFrame) -> list[Any]:
    accepted = F.col("reason").isNull()
    return (
        cached.groupBy(F.when(accepted, F.col("device")).alias("device"), "reason")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.count_if(accepted & (F.col("op") == "R")).alias("reads"),
            F.count_if(accepted & (F.col("op") == "W")).alias("writes"),
            F.sum(F.when(accepted & (F.col("op") == "R"), F.col("size_bytes"))).alias("bytes_read"),
            F.sum(F.when(accepted & (F.col("op") == "W"), F.col("size_bytes"))).alias("bytes_written"),
            F.min(F.when(accepted, F.col("ts_raw_us"))).alias("ts_min"),
            F.max(F.when(accepted, F.col("ts_raw_us"))).alias("ts_max"),
            F.min("seq").alias("first_seq"),
        )
        .collect()
    )


def _load_vscsi(spark: SparkSession, files: list[InputFile], opts: IngestOptions,
                geometry: list[dict[str, Any]], meta: dict[str, Any], scratch: Location) -> IngestResult:
    """vSCSI: the summary pass now, the tasks' own writes in write_trace (libs.ingest.direct)."""
    range_df, decode, summarize = _binary_ranges(spark, files, opts, geometry, meta)
    summary = direct.merge_summaries(range_df.mapInArrow(python_task(summarize), direct.SUMMARY_DDL).collect())
    log.info("trace %s: %d records read", opts.trace_id, sum(r.n for r in summary))
    first = {r.first_seq: r for r in summary}

    def first_reject(seq: int) -> tuple[str, str]:
        return first[seq].first_where or "", first[seq].first_message or ""

    def firsts() -> dict[str, int]:                       # one device per file
        by_device = {r.device: r.ts_min for r in summary if r.reason is None}
        return {f.given: by_device[_device_name(f)] for f in files if _device_name(f) in by_device}

    trace_row, per_device, ts_min = _describe(summary, files, opts, geometry, meta, first_reject, firsts)

    def write_direct(spark: SparkSession, warehouse: Location) -> PendingWrite:
        where = opts.where()
        return write_tables_by_tasks(spark, {
            requests.TABLE: (table_target(spark, warehouse, requests.TABLE), where),
            rejected_records.TABLE: (table_target(spark, warehouse, rejected_records.TABLE), where),
        }, range_df, direct.write_task(decode, opts.trace_id, ts_min))

    return IngestResult(None, None, trace_row, per_device, opts, scratch, write_direct=write_direct)


def _load_clean_text(spark: SparkSession, files: list[InputFile], opts: IngestOptions, warehouse: Location,
                     scratch: Location) -> IngestResult | None:
    """Delimited text with no bad line (readers.clean_text), in one pass of tasks that parse line-aligned
    byte ranges and write `requests` (not committed: write_trace commits). The driver numbers the lines
    first (newline counts) and takes the first line's timestamp as the time base; in the rare trace
    whose earliest timestamp is not the first line of a file, the pass runs a second time with the
    true one. None when the layout, an input or any range is not for this path (nothing written):
    the general path then ingests the trace and gives every reject its reason and line."""
    layout = _layout(opts)
    if (not opts.fast_text or not clean_text.eligible(layout) or any(f.long_lines for f in files)
            or any(f.compression and not f.is_staged for f in files)):
        return None
    assert layout is not None
    if any(text_problem(read_head(f, SNIFF_BYTES)) for f in files):
        return None                                   # the general path refuses it with the reason
    try:
        ts_base = min(clean_text.first_timestamp(str(f.readable_path), layout) for f in files)
    except clean_text.NotClean:
        return None
    if opts.continues is not None:
        ts_base = opts.continues.origin_raw_us                  # an append keeps the trace's time 0
    rows, uris = [], {}
    slots = parallelism(spark)
    seq_base = opts.seq_base
    for f in files:                                   # files in the order given, ranges in file order
        path, size = str(f.readable_path), file_size(f.readable_path)
        uri = _file_uri(f.readable_path)
        uris[uri] = f.given
        step = _balanced(size, TEXT_RANGE_BYTES, slots)
        bounds = [(start, min(start + step, size)) for start in range(0, size, step)]
        for (start, end), lines in zip(bounds, clean_text.lines_per_range(path, bounds), strict=True):
            rows.append((path, uri, start, end - start, seq_base, lines))
            seq_base += lines
    range_df = one_row_per_task(spark, rows, clean_text.RANGE_DDL)
    where = opts.where()
    replaces = {requests.TABLE: (table_target(spark, warehouse, requests.TABLE), where),
                rejected_records.TABLE: (table_target(spark, warehouse, rejected_records.TABLE), where)}

    def attempt(base: int) -> tuple[Any, list[direct.Summary] | None]:
        task = clean_text.write_task(layout, opts.trace_id, base, opts.ts_tolerance_us, uris)
        pending = write_tables_by_tasks(spark, replaces, range_df, task)
        try:
            return pending, _clean_summary(pending.side, rows, opts)
        except BaseException:
            pending.discard()
            raise

    pending, summary = attempt(ts_base)
    if summary is not None and opts.continues is None and min(r.ts_min for r in summary) < ts_base:  # type: ignore
        pending.discard()
        pending, summary = attempt(min(r.ts_min for r in summary))          # type: ignore[type-var]
    if summary is None:
        pending.discard()
        return None
    log.info("trace %s: %d records read, every one a clean request", opts.trace_id, seq_base)

    def no_reject(seq: int) -> tuple[str, str]:
        raise AssertionError(f"the clean path has no rejected record (asked for {seq})")

    try:
        def firsts() -> dict[str, int]:
            out: dict[str, int] = {}
            for r in pending.side:
                if r["device"] is not None:
                    given = uris[r["file_uri"]]
                    out[given] = min(out.get(given, r["ts_min"]), r["ts_min"])
            return out

        trace_row, per_device, _ = _describe(summary, files, opts, [], {}, no_reject, firsts)
    except BaseException:
        pending.discard()
        raise
    return IngestResult(None, None, trace_row, per_device, opts, scratch,
                        write_direct=lambda _spark, _warehouse: pending, _pending=[pending])


def _clean_summary(side: list[dict[str, Any]], rows: list[tuple], opts: IngestOptions) -> list[Any] | None:
    """The clean pass's side rows -> per-device Summary rows, or None (with the reason logged) when a range
    is not clean or a timestamp goes back across a range edge."""
    dirty = [r for r in side if not r["clean"]]
    if dirty:
        log.info("trace %s: not clean text (%s, in the lines from byte %d of %s): the general path reads it",
                 opts.trace_id, dirty[0]["why"], dirty[0]["start"], dirty[0]["file_uri"])
        return None
    ends = {(r["file_uri"], r["start"]): r for r in side}
    prev: tuple[str, int] | None = None
    tolerance = opts.ts_tolerance_us
    for _, uri, start, _, _, lines in rows:
        r = ends[(uri, start)]
        if not lines:
            continue
        if (tolerance is not None and prev is not None and prev[0] == uri
                and r["first_ts"] < prev[1] - tolerance):
            log.info("trace %s: a timestamp goes back at the lines from byte %d of %s: the general path reads it",
                     opts.trace_id, start, uri)
            return None
        prev = (uri, r["last_ts"])
    base = {(uri, start): seq for _, uri, start, _, seq, _ in rows}
    per_range = [Row(device=r["device"], reason=None, n=r["n"], reads=r["reads"], writes=r["n"] - r["reads"],
                     bytes_read=r["bytes_read"], bytes_written=r["bytes_written"], ts_min=r["ts_min"],
                     ts_max=r["ts_max"], first_seq=base[(r["file_uri"], r["start"])] + r["first_index"],
                     first_where=None, first_message=None)
                 for r in side if r["device"] is not None]
    return direct.merge_summaries(per_range) or None


def _finish(cached: DataFrame, summary: list[Any], files: list[InputFile], opts: IngestOptions,
            geometry: list[dict[str, Any]], meta: dict[str, Any], scratch: Location) -> IngestResult:
    def first_reject(seq: int) -> tuple[str, str]:
        first = cached.where(F.col("seq") == seq).first()
        return f"{first.source_file} {first.position_kind} {first.position}", first.message

    def firsts() -> dict[str, int]:
        rows = (cached.where(F.col("reason").isNull()).groupBy("source_file")
                .agg(F.min("ts_raw_us").alias("first")).collect())
        return {r.source_file: r.first for r in rows}

    trace_row, per_device, ts_min = _describe(summary, files, opts, geometry, meta, first_reject, firsts)
    trace_id = F.lit(opts.trace_id)
    requests = cached.where(F.col("reason").isNull()).select(
        trace_id.alias("trace_id"), "device", "seq",
        (F.col("ts_raw_us") - F.lit(ts_min)).alias("ts_us"), "op", "offset_bytes", "size_bytes",
        "response_us", "queue_us", "source_file",
    )
    rejects = cached.where(F.col("reason").isNotNull()).select(
        trace_id.alias("trace_id"), "source_file", "position", "position_kind", "reason",
        F.coalesce("message", F.lit("")).alias("message"), F.coalesce("raw", F.lit("")).alias("raw"),
    )
    return IngestResult(requests, rejects, trace_row, per_device, opts, scratch)


def _describe(summary: list[Any], files: list[InputFile], opts: IngestOptions, geometry: list[dict[str, Any]],
              meta: dict[str, Any], first_reject: Callable[[int], tuple[str, str]],
              firsts: Callable[[], dict[str, int]]) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """Check the summary (reject share, any valid request at all: IngestError otherwise) and describe the
    trace: its catalog row, per-device totals, and its first timestamp (ts_us = 0; an append's: the trace's).
    `first_reject(seq)` gives where the record `seq` is and its message, for the error; `firsts()` each file's
    first timestamp (an append's overlap check)."""
    read = sum(r.n for r in summary)
    by_reason = {r.reason: r.n for r in summary if r.reason is not None}
    rejected = sum(by_reason.values())
    errors = {k: v for k, v in by_reason.items() if k not in RJ.INFORMATIONAL_REASONS}
    error_count = sum(errors.values())
    if read and error_count / read > opts.max_reject_share:
        # Most frequent error; on a tie the one seen first in the file (group order is arbitrary).
        worst = max((r for r in summary if r.reason in errors), key=lambda r: (r.n, -r.first_seq))
        where, message = first_reject(worst.first_seq)
        raise IngestError(
            f"{error_count} of {read} records rejected ({error_count / read:.2%}), above the limit of "
            f"{opts.max_reject_share:.2%}; nothing written. Most common: {worst.reason} x{worst.n}, "
            f"first at {where}: {message}"
        )
    devices = sorted((r for r in summary if r.reason is None), key=lambda r: r.device)
    if not devices:
        raise IngestError(f"no valid requests in {', '.join(f.given for f in files)}; nothing written")
    accepted = read - rejected
    if accepted < MIN_REQUEST_SHARE * read:
        raise IngestError(f"{', '.join(f.given for f in files)}: not {opts.fmt} data: {accepted} requests in {read} "
                          f"records ({accepted / read:.2%}, under the {MIN_REQUEST_SHARE:.0%} a {opts.fmt} trace has); "
                          "nothing written")
    ts_min = min(r.ts_min for r in devices)
    ts_max = max(r.ts_max for r in devices)
    so_far = opts.continues
    if so_far is not None:
        problem = overlap_problem(so_far, ts_min, firsts, opts.allow_overlap)
        if problem:
            raise IngestError(problem)
        ts_min = so_far.origin_raw_us
    start_utc, start_text = _start_time(opts.fmt, ts_min, meta, _layout(opts))
    per_device = [
        {"device": r.device, "records": r.n, "reads": r.reads, "writes": r.writes,
         "bytes": (r.bytes_read or 0) + (r.bytes_written or 0),
         "first_us": r.ts_min - ts_min, "last_us": r.ts_max - ts_min}
        for r in devices
    ]
    options = {"max_reject_share": str(opts.max_reject_share),
               "ts_tolerance_us": str(opts.ts_tolerance_us)}
    if opts.fmt == "csv" and opts.layout is not None:
        options["layout"] = opts.layout.expected
    options.update({k: v for k, v in meta.items() if k != "start"})
    options["ts_origin_raw_us"] = str(ts_min)
    trace_row = {
        "trace_id": opts.trace_id,
        "format": opts.fmt,
        "source_files": [{"path": str(f.path), "size_bytes": f.size_bytes, "sha256": f.sha256} for f in files],
        "start_time_utc": start_utc,
        "start_time_source": start_text,
        "span_us": ts_max - ts_min,
        "devices": [r.device for r in devices],
        "records_read": read,
        "records_accepted": read - rejected,
        "records_rejected": rejected,
        "rejected_by_reason": by_reason,
        "reads": sum(r.reads for r in devices),
        "writes": sum(r.writes for r in devices),
        "bytes_read": sum(r.bytes_read or 0 for r in devices),
        "bytes_written": sum(r.bytes_written or 0 for r in devices),
        "ingested_at": dt.datetime.now(dt.UTC),
        "options": options,
        "geometry": geometry,
    }
    if so_far is not None:
        trace_row = merged_row(so_far.row, trace_row)
    return trace_row, per_device, ts_min


__all__ = ["FORMATS", "IngestError", "IngestOptions", "IngestResult", "InputError", "load_trace", "write_trace"]
