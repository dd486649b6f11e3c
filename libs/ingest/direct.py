"""vSCSI ingest in two passes of the decoding tasks, with no intermediate copy.

Fixed-size records let every task number its records and check their time order itself
(readers.binary), so the classified records never need to meet in one place:
1. summary pass: each task runs the record checks over its byte range (vscsi_checks, without
   building the records' columns) and returns a few rows of totals per device and reject reason,
   with the first reject of each reason for the error message; the driver checks the reject share
   and learns the trace's first timestamp (ts_us = 0);
2. write pass: each task decodes its range and writes the accepted records into `requests` and the
   rejected ones into `rejected_records` itself (libs.io.delta_files), then one Delta commit per table.
   A refused ingest writes nothing: the refusal comes after pass 1.

Decoding the bytes twice costs much less than the scratch Parquet copy the other formats make
(docs/BENCHMARKS.md, "Ingest").
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from blockheat.libs.readers.binary import (
    VSCSI_DTYPES,
    ByteRange,
    VscsiFile,
    constant_column,
    range_task,
    truncated_message,
    vscsi_checks,
)

SUMMARY_DDL = ("device string, reason string, n long, reads long, writes long, bytes_read long, "
               "bytes_written long, ts_min long, ts_max long, first_seq long, first_where string, "
               "first_message string")
SUMMARY_SCHEMA = pa.schema([
    pa.field("device", pa.string()), pa.field("reason", pa.string()), pa.field("n", pa.int64()),
    pa.field("reads", pa.int64()), pa.field("writes", pa.int64()), pa.field("bytes_read", pa.int64()),
    pa.field("bytes_written", pa.int64()), pa.field("ts_min", pa.int64()), pa.field("ts_max", pa.int64()),
    pa.field("first_seq", pa.int64()), pa.field("first_where", pa.string()), pa.field("first_message", pa.string()),
])

Decoder = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


@dataclass
class Summary:
    """Totals of one device's accepted records (reason None) or of one reject reason (device None)."""

    device: str | None
    reason: str | None
    n: int
    reads: int
    writes: int
    bytes_read: int | None
    bytes_written: int | None
    ts_min: int | None
    ts_max: int | None
    first_seq: int
    first_where: str | None        # "<source file> byte <offset>" of the reason's first record
    first_message: str | None


def summarize_vscsi(data: bytes, rng: ByteRange, version: int, info: VscsiFile, *,
                    tolerance_us: int | None = None, prev_ts: int | None = None) -> list[dict[str, Any]]:
    """SUMMARY rows of one range, from the checks alone (the records' columns are not built): the same
    totals as summarizing decode_vscsi's output."""
    checked = vscsi_checks(data, version, tolerance_us=tolerance_us, prev_ts=prev_ts)
    rs = VSCSI_DTYPES[version].itemsize
    n = len(checked.recs)
    seq0 = info.seq_base + rng.start // rs
    code = np.full(n, -1, dtype=np.int64)
    for k, (mask, _, _) in reversed(list(enumerate(checked.checks))):
        code[mask] = k
    rows = []
    accepted = code < 0
    if accepted.any():
        is_read = checked.is_read[accepted]
        size, ts = checked.size[accepted], checked.ts[accepted]
        rows.append({
            "device": info.device, "reason": None, "n": int(accepted.sum()),
            "reads": int(is_read.sum()), "writes": int((~is_read).sum()),
            "bytes_read": int(size[is_read].sum()), "bytes_written": int(size[~is_read].sum()),
            "ts_min": int(ts.min()), "ts_max": int(ts.max()), "first_seq": seq0 + int(np.argmax(accepted)),
            "first_where": None, "first_message": None,
        })

    def reject(reason: str, count: int, index: int, message: str) -> dict[str, Any]:
        return {"device": None, "reason": reason, "n": count, "reads": 0, "writes": 0, "bytes_read": None,
                "bytes_written": None, "ts_min": None, "ts_max": None, "first_seq": seq0 + index,
                "first_where": f"{info.source_file} byte {rng.start + index * rs}", "first_message": message}

    counts = np.bincount(code[~accepted], minlength=len(checked.checks)) if n else np.zeros(0, np.int64)
    for k, (_, reason, text) in enumerate(checked.checks):
        if k < len(counts) and counts[k]:
            first = int(np.argmax(code == k))
            rows.append(reject(reason, int(counts[k]), first, text(first)))
    if len(data) > n * rs:
        rows.append(reject("truncated_record", 1, n, truncated_message(len(data) - n * rs, rs)))
    return rows


def summary_task(version: int, files: dict[str, VscsiFile], tolerance_us: int | None) -> Decoder:
    """mapInArrow function: ranges -> SUMMARY_DDL rows (a few per range)."""
    rs = VSCSI_DTYPES[version].itemsize

    def summarize(data: bytes, rng: ByteRange, before: bytes) -> pa.RecordBatch:
        prev_ts = int(np.frombuffer(before, dtype=VSCSI_DTYPES[version])["ts"][0]) if before else None
        rows = summarize_vscsi(data, rng, version, files[rng.file_uri], tolerance_us=tolerance_us, prev_ts=prev_ts)
        return pa.RecordBatch.from_pylist(rows, schema=SUMMARY_SCHEMA)

    return range_task(summarize, before=rs)


def merge_summaries(rows: list[Any]) -> list[Summary]:
    """The per-range rows added up per (device, reason), as libs.ingest.pipeline's summary of the whole trace."""
    merged: dict[tuple[str | None, str | None], Summary] = {}
    for row in rows:
        key = (row.device, row.reason)
        if key not in merged:
            merged[key] = Summary(**row.asDict())
            continue
        m = merged[key]
        m.n += row.n
        m.reads += row.reads
        m.writes += row.writes
        if row.reason is None:
            m.bytes_read = (m.bytes_read or 0) + (row.bytes_read or 0)
            m.bytes_written = (m.bytes_written or 0) + (row.bytes_written or 0)
            m.ts_min = min(m.ts_min, row.ts_min)                                   # type: ignore[type-var]
            m.ts_max = max(m.ts_max, row.ts_max)                                   # type: ignore[type-var]
        if row.first_seq < m.first_seq:
            m.first_seq, m.first_where, m.first_message = row.first_seq, row.first_where, row.first_message
    return list(merged.values())


def write_task(decode: Decoder, trace_id: str, ts_min: int
               ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[tuple[str, pa.Table]]]:
    """For delta_files.replace_tables_by_tasks: ranges -> ("requests", rows), ("rejected_records", rows)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[str, pa.Table]]:
        for decoded in decode(batches):
            accepted = pc.is_null(decoded.column("reason"))
            ok = decoded.filter(accepted)
            n = ok.num_rows
            if n:
                yield "requests", pa.table({
                    "trace_id": constant_column(trace_id, n),
                    "device": ok.column("device"), "seq": ok.column("seq"),
                    "ts_us": pc.subtract(ok.column("ts_raw_us"), pa.scalar(ts_min, pa.int64())),
                    "op": ok.column("op"), "offset_bytes": ok.column("offset_bytes"),
                    "size_bytes": ok.column("size_bytes"), "response_us": ok.column("response_us"),
                    "queue_us": ok.column("queue_us"), "source_file": ok.column("source_file"),
                })
            bad = decoded.filter(pc.invert(accepted))
            m = bad.num_rows
            if m:
                yield "rejected_records", pa.table({
                    "trace_id": constant_column(trace_id, m),
                    "source_file": bad.column("source_file"), "position": bad.column("byte_pos"),
                    "position_kind": constant_column("byte", m),
                    "reason": bad.column("reason"), "message": pc.fill_null(bad.column("message"), ""),
                    "raw": pc.fill_null(bad.column("raw"), ""),
                })

    return run
