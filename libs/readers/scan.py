"""The ordered first pass over a trace: per-block record counts and backwards-time detection.

Spark reads a big file as blocks, one task each, and keeps file order within a block. One narrow
pass (block key, row id, timestamp) through mapInArrow walks every block in order and returns
only small results: per-block counts and boundary timestamps, and the rows whose timestamp goes
backwards. The driver stitches blocks together (line numbers, the check across block edges), so
no shuffle of the trace is needed.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SCAN_OUTPUT = pa.schema([
    pa.field("kind", pa.string()),         # "block" summary or "back" (a backwards record)
    pa.field("file_uri", pa.string()),
    pa.field("block_start", pa.int64()),
    pa.field("n", pa.int64()),             # block: records in the block
    pa.field("min_m", pa.int64()),         # block: first row id; back: the record's row id
    pa.field("first_m", pa.int64()),       # block: row id of the first record with a timestamp
    pa.field("first_ts", pa.int64()),      # block: its timestamp
    pa.field("last_ts", pa.int64()),       # block: last timestamp; back: the previous timestamp
])
SCAN_DDL = ("kind string, file_uri string, block_start long, n long, min_m long, first_m long, "
            "first_ts long, last_ts long")


@dataclass
class _Block:
    n: int = 0
    min_m: int | None = None
    first_m: int | None = None
    first_ts: int | None = None
    last_ts: int | None = None


def previous_valid(ts: np.ndarray, valid: np.ndarray, carry: int | None) -> tuple[np.ndarray, np.ndarray]:
    """For each row, the timestamp of the nearest earlier row with a timestamp (carry before the
    segment), and whether such a row exists."""
    n = len(ts)
    idx = np.where(valid, np.arange(n), -1)
    last_at_or_before = np.maximum.accumulate(idx) if n else idx
    prev_idx = np.empty(n, dtype=np.int64)
    if n:
        prev_idx[0] = -1
        prev_idx[1:] = last_at_or_before[:-1]
    has_prev = prev_idx >= 0
    prev = np.where(has_prev, ts[np.maximum(prev_idx, 0)], 0)
    if carry is not None:
        prev = np.where(has_prev, prev, carry)
        has_prev = np.ones(n, dtype=bool)
    return prev, has_prev


def scan_blocks(tolerance_us: int | None):  # type: ignore[no-untyped-def]
    """mapInArrow function over (file_uri, block_start, m, ts_raw_us) in file order per task."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        blocks: dict[tuple[str, int], _Block] = {}
        back: dict[str, list[object]] = {name: [] for name in SCAN_OUTPUT.names}
        for batch in batches:
            if batch.num_rows == 0:
                continue
            uri = pc.dictionary_encode(batch.column("file_uri"))
            codes = np.asarray(uri.indices)
            starts = np.asarray(batch.column("block_start"))
            m = np.asarray(batch.column("m"))
            ts_col = batch.column("ts_raw_us")
            valid = ~np.asarray(ts_col.is_null())
            ts = np.asarray(ts_col.fill_null(0))
            change = np.flatnonzero((codes[1:] != codes[:-1]) | (starts[1:] != starts[:-1])) + 1
            for lo, hi in zip(np.r_[0, change], np.r_[change, len(m)], strict=True):
                key = (uri.dictionary[codes[lo]].as_py(), int(starts[lo]))
                block = blocks.setdefault(key, _Block())
                seg_ts, seg_valid = ts[lo:hi], valid[lo:hi]
                block.n += hi - lo
                block.min_m = int(m[lo]) if block.min_m is None else min(block.min_m, int(m[lo]))
                if tolerance_us is not None:
                    prev, has_prev = previous_valid(seg_ts, seg_valid, block.last_ts)
                    bad = np.flatnonzero(seg_valid & has_prev & (seg_ts < prev - tolerance_us))
                    for i in bad:
                        for name, value in (("kind", "back"), ("file_uri", key[0]), ("block_start", key[1]),
                                            ("n", None), ("min_m", int(m[lo + i])), ("first_m", None),
                                            ("first_ts", int(seg_ts[i])), ("last_ts", int(prev[i]))):
                            back[name].append(value)
                hits = np.flatnonzero(seg_valid)
                if len(hits):
                    if block.first_m is None:
                        block.first_m, block.first_ts = int(m[lo + hits[0]]), int(seg_ts[hits[0]])
                    block.last_ts = int(seg_ts[hits[-1]])
        if back["kind"]:
            yield pa.RecordBatch.from_pydict(back, schema=SCAN_OUTPUT)
        if blocks:
            rows = [{"kind": "block", "file_uri": k[0], "block_start": k[1], "n": b.n, "min_m": b.min_m,
                     "first_m": b.first_m, "first_ts": b.first_ts, "last_ts": b.last_ts}
                    for k, b in blocks.items()]
            yield pa.RecordBatch.from_pylist(rows, schema=SCAN_OUTPUT)

    return run
