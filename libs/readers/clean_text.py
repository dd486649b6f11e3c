"""The fast path for clean delimited text: Spark tasks parse line-aligned byte ranges with pyarrow.

Most real traces (MSR, Alibaba, Tencent, SPC exports) are machine-written and have no bad line at
all. For those, this module gives exactly the rows the general text path (readers.text_formats,
Spark expressions over Spark's text reader, plus the ordered scan) would give, in a fraction of
the time (docs/BENCHMARKS.md): the driver numbers the lines of each byte range from its newlines (a range owns
the lines that start in it, the rule of Spark's own line reader, so a 50 GB file still splits across
tasks); then, in one pass, each task parses its range with pyarrow's CSV reader, checks it with
pyarrow compute and numpy, writes its `requests` files and returns per-device totals and its first
and last timestamps (libs.ingest.pipeline commits).

"Clean" is strict on purpose: a range is clean when every line is a request the general path
accepts and every field is spelled so that both paths read the same value (digits only for
integers, no padding spaces, finite numbers, no carriage returns, valid UTF-8) and timestamps
never go back by more than the tolerance. When any range of a trace is not clean, the ingest
falls back to the general path for the whole trace (so rejected records, their reasons and line
positions come from one place); the cost is the fast pass, whose files are deleted uncommitted.
"""
from __future__ import annotations

import io
import mmap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from blockheat.libs.io import storage
from blockheat.libs.io.delta_files import SIDE
from blockheat.libs.io.inputs import (
    Resolver,
    drop_cached,
    file_size,
    newlines_before,
    open_random_access,
    read_fully_at,
)
from blockheat.libs.readers import limits
from blockheat.libs.readers import text_kernels as TK
from blockheat.libs.readers.binary import constant_column
from blockheat.libs.readers.text_formats import CsvLayout

# Single-character delimiters that mean the same as a Java regex (the general path splits with one).
PLAIN_DELIMITERS = frozenset(",;\t:")
# What the general path divides an integer time field by (text_formats.time_to_us), or the decimal
# multiplier of a fractional one.
_INT_DIVISOR = {"filetime": 10, "ns": 1000, "us": 1}
_DECIMAL_SCALE = {"s": 1_000_000, "ms": 1000}
_DURATION_SCALE = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3, "filetime": 0.1}
_LONG_MAX = (1 << 63) - 1
_READ_AHEAD = 1 << 16


class NotClean(Exception):
    """A range the fast path does not take; the general text path ingests the trace instead."""


def eligible(layout: CsvLayout | None) -> bool:
    """Layouts the fast path can parse exactly as text_formats.parse_csv does."""
    return (layout is not None and layout.delimiter in PLAIN_DELIMITERS and not layout.skip_header_lines
            and layout.comment_prefix is None and layout.op_flags_read_bit is None and "ts" in layout.columns)


def read_lines(path: str, start: int, length: int, resolve: Resolver | None = None) -> bytes | memoryview:
    """The lines that start in [start, start + length) of the file, as bytes or a view of them (the last one with its
    newline when the file has one): a line starts at byte 0 or after a '\\n'. A local file's range's pages are
    dropped from the page cache once read (libs.io.inputs.drop_cached); a remote file (a URI) is read through
    pyarrow's RandomAccessFile (seek and read), `resolve` its file system lookup (libs.io.storage.filesystem by
    default)."""
    if not storage.is_local(path):
        with open_random_access(path, resolve) as remote:
            return _read_lines(remote, start, length)  # type: ignore[arg-type]
    with open(path, "rb") as fh:
        data = _read_lines(fh, start, length)
        drop_cached(fh, start, length)
        return data


def _read_lines(fh: BinaryIO, start: int, length: int) -> bytes | memoryview:
    lead = 1 if start > 0 else 0               # the byte before the range: does a line start at `start`?
    fh.seek(start - lead)
    data = fh.read(lead + length + _READ_AHEAD)
    first = data.find(b"\n", 0, lead + length) + 1 if lead else 0
    if (lead and first == 0) or first >= min(len(data), lead + length):
        return b""                              # no line starts in this range
    end = data.find(b"\n", lead + length - 1)
    if end >= 0 or len(data) < lead + length + _READ_AHEAD:
        stop = end + 1 if end >= 0 else len(data)
        return memoryview(data)[first:stop] if (first, stop) != (0, len(data)) else data
    parts = [data[first:]]                      # the last line runs past the read-ahead: finish it
    while True:
        more = fh.read(_READ_AHEAD)
        if not more:
            break
        cut = more.find(b"\n")
        if cut >= 0:
            parts.append(more[:cut + 1])
            break
        parts.append(more)
    return b"".join(parts)


@dataclass(frozen=True)
class Parsed:
    """One range's requests, in line order."""

    device_codes: np.ndarray  # int32 index into device_names per request
    device_names: list[str]
    ts_raw_us: np.ndarray     # int64
    is_read: np.ndarray       # bool
    offset_bytes: np.ndarray  # int64
    size_bytes: np.ndarray    # int64
    response_us: pa.Array     # double (null when the layout has none)
    queue_us: pa.Array

    def __len__(self) -> int:
        return len(self.ts_raw_us)


def _digits(column: pa.ChunkedArray, name: str) -> np.ndarray:
    """Unsigned decimal integers (no sign, space, hex or exponent)."""
    if not pc.all(pc.ascii_is_decimal(column)).as_py():
        raise NotClean(f"{name}: not all plain digits")
    try:
        return pc.cast(column, pa.int64()).to_numpy()
    except pa.ArrowInvalid as exc:
        raise NotClean(f"{name}: {exc}") from exc


def _times_unit(values: np.ndarray, name: str, unit: int) -> np.ndarray:
    """Integers times unit, without overflow."""
    if unit == 1:
        return values
    if len(values) and values.max() > _LONG_MAX // unit:
        raise NotClean(f"{name}: overflows a long in bytes")
    return values * unit


def _text(column: pa.ChunkedArray, name: str) -> tuple[np.ndarray, list[str]]:
    """A dictionary-typed text field -> (codes, values). The general path trims spaces; here a padded or
    empty value is not clean."""
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    values = array.dictionary.to_pylist()
    if any(not v or v[0] == " " or v[-1] == " " for v in values):
        raise NotClean(f"{name}: padded or empty")
    return array.indices.to_numpy(zero_copy_only=False), values


def _joined(parts: list[tuple[np.ndarray, list[str]]]) -> tuple[np.ndarray, list[str]]:
    """Fields joined with "_" (MSR: Hostname_DiskNumber), from their codes: only combinations present."""
    codes, names = parts[0]
    for more_codes, more_names in parts[1:]:
        combined = codes.astype(np.int64) * len(more_names) + more_codes
        if len(names) * len(more_names) <= 1 << 22:          # a table of every combination: no sort
            seen = np.zeros(len(names) * len(more_names), bool)
            seen[combined] = True
            present = np.flatnonzero(seen)
            codes = (np.cumsum(seen) - 1)[combined].astype(np.int32)
        else:
            present, inverse = np.unique(combined, return_inverse=True)
            codes = inverse.astype(np.int32)
        names = [f"{names[c // len(more_names)]}_{more_names[c % len(more_names)]}" for c in present.tolist()]
    return codes, names


def _timestamps(column: pa.ChunkedArray, unit: str) -> np.ndarray:
    if unit in _INT_DIVISOR:
        return _digits(column, "ts") // _INT_DIVISOR[unit]   # non-negative: floor division is Spark's div
    if unit not in _DECIMAL_SCALE or pc.any(pc.starts_with(column, "-")).as_py():
        raise NotClean("ts: not a non-negative decimal")
    try:  # decimal(20, 9): exact where the general path's decimal(38, 9) is, or an error (not clean)
        exact = pc.cast(column, pa.decimal128(20, 9))
        scaled = pc.multiply(exact, pa.scalar(_DECIMAL_SCALE[unit], pa.decimal128(7, 0)))
        return pc.cast(pc.floor(scaled), pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise NotClean(f"ts: {exc}") from exc


def _number(column: pa.ChunkedArray) -> np.ndarray:
    try:
        return pc.cast(column, pa.float64()).to_numpy()
    except pa.ArrowInvalid as exc:
        raise NotClean(f"duration: {exc}") from exc


def _duration(values: np.ndarray | None, unit: str, n: int) -> pa.Array:
    if values is None:
        return pa.nulls(n, pa.float64())
    if not np.isfinite(values).all():
        raise NotClean("duration: not finite")
    us = values * _DURATION_SCALE[unit]
    if n and (us.min() < 0 or us.max() > limits.TS_MAX_US):     # the general path's duration checks
        raise NotClean("duration: negative or above the plausible range")
    return pa.array(us)


@dataclass(frozen=True)
class _Fields:
    """One range's used fields by column index, before units and checks: text as (codes, values), integers,
    timestamps in the layout's microseconds (raw: before ts_base), durations as doubles in their unit."""

    n: int
    text: Callable[[int, str], tuple[np.ndarray, list[str]]]
    digits: Callable[[int, str], np.ndarray]
    ts: Callable[[int], np.ndarray]
    number: Callable[[int], np.ndarray]


def _numeric_columns(layout: CsvLayout) -> set[int]:
    return {layout.columns[f] for f in ("ts", "offset", "size", "response", "queue") if f in layout.columns}


def _text_columns(layout: CsvLayout) -> set[int]:
    return set(layout.device_columns) | {layout.columns[f] for f in ("device", "op") if f in layout.columns}


def _check_column_count(ncols: int, layout: CsvLayout) -> None:
    """NotClean unless the layout takes lines of ncols fields."""
    if ncols < layout.min_columns or (layout.max_columns is not None and ncols > layout.max_columns):
        raise NotClean("column count")


def _plain_fields(data: bytes | memoryview, layout: CsvLayout) -> _Fields | None:
    """The fields from the compiled parser (readers.text_kernels), or None when the range or the layout is outside
    its plain grammar (pyarrow's reader then parses the range). Decimal timestamps come scaled and floored as the
    general path's decimal(38, 9) gives them; integers and durations as their digits say."""
    numeric, text = _numeric_columns(layout), _text_columns(layout)
    ts_col = layout.columns["ts"]
    if numeric & text or (layout.ts_unit not in _INT_DIVISOR and layout.ts_unit not in _DECIMAL_SCALE):
        return None
    decimal_digits = {1_000_000: 6, 1000: 3}.get(_DECIMAL_SCALE.get(layout.ts_unit, 1), 0)
    width = max(numeric | text) + 1
    roles, slots = np.zeros(width, np.int64), np.zeros(width, np.int64)
    for k, i in enumerate(sorted(numeric)):
        roles[i] = TK.DECIMAL if i == ts_col and layout.ts_unit in _DECIMAL_SCALE else TK.DIGITS
        slots[i] = k
    for k, i in enumerate(sorted(text)):
        roles[i], slots[i] = TK.TEXT, k
    raw = np.frombuffer(data, np.uint8)
    rows = TK.lines_upper_bound(raw)
    numbers = np.empty((len(numeric), rows), np.int64)
    codes = np.empty((len(text), rows), np.int32)
    starts = np.empty((len(text), TK.MAX_DISTINCT), np.int64)
    lengths = np.empty((len(text), TK.MAX_DISTINCT), np.int64)
    distinct, fields = np.zeros(len(text), np.int64), np.zeros(1, np.int64)
    n = TK.parse_plain(raw, ord(layout.delimiter), roles, slots, decimal_digits, numbers, codes, starts, lengths,
                       distinct, fields)
    if n < 0:
        return None
    _check_column_count(int(fields[0]), layout)

    def values(i: int, _name: str) -> tuple[np.ndarray, list[str]]:
        s = slots[i]
        return codes[s, :n], [bytes(data[a:a + b]).decode("ascii")
                              for a, b in zip(starts[s, :distinct[s]].tolist(), lengths[s, :distinct[s]].tolist(),
                                              strict=True)]

    def ts(i: int) -> np.ndarray:
        got = numbers[slots[i], :n]
        return got // _INT_DIVISOR[layout.ts_unit] if layout.ts_unit in _INT_DIVISOR else got

    return _Fields(n, values, lambda i, _name: numbers[slots[i], :n], ts,
                   lambda i: numbers[slots[i], :n].astype(np.float64))


def _arrow_fields(data: bytes | memoryview, layout: CsvLayout) -> _Fields:
    """The fields from pyarrow's CSV reader, with the checks that make them the general path's values."""
    data = bytes(data)
    if b"\r" in data:
        raise NotClean("carriage return")
    if data.startswith(b"\n") or b"\n\n" in data:
        raise NotClean("blank line")
    if data.startswith(b"\xef\xbb\xbf"):     # pyarrow drops a byte order mark at the start of what it reads
        raise NotClean("byte order mark")
    first = data[:data.find(b"\n")] if b"\n" in data else data
    ncols = first.count(layout.delimiter.encode()) + 1
    _check_column_count(ncols, layout)
    numeric = _numeric_columns(layout)
    used = sorted(set(layout.columns.values()) | set(layout.device_columns))
    names = [f"c{i}" for i in range(ncols)]
    # Text fields come as dictionaries (few distinct values: device parts, op), numbers as strings checked
    # and cast below.
    types = {names[i]: pa.string() if i in numeric else pa.dictionary(pa.int32(), pa.string()) for i in used}
    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False, block_size=len(data) + 1),
            parse_options=pacsv.ParseOptions(delimiter=layout.delimiter, quote_char=False, escape_char=False,
                                             newlines_in_values=False, ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(column_types=types, include_columns=[names[i] for i in used],
                                                 null_values=[], strings_can_be_null=False,
                                                 quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:   # column count, UTF-8, ...
        raise NotClean(str(exc)) from exc

    def col(i: int) -> pa.ChunkedArray:
        return table.column(names[i])

    def text(i: int, name: str) -> tuple[np.ndarray, list[str]]:
        if i in numeric:          # a column that is also a number (a custom layout): encode its text here
            return _text(pc.dictionary_encode(col(i)), name)
        return _text(col(i), name)

    return _Fields(table.num_rows, text, lambda i, name: _digits(col(i), name),
                   lambda i: _timestamps(col(i), layout.ts_unit), lambda i: _number(col(i)))


def parse_range(data: bytes | memoryview, layout: CsvLayout, *, tolerance_us: int | None) -> Parsed:
    """Parse and check one range's lines; NotClean unless every line is a request the general path
    accepts with the same values."""
    if not data:
        empty = np.zeros(0, np.int64)
        return Parsed(np.zeros(0, np.int32), [], empty, np.zeros(0, bool), empty, empty,
                      pa.nulls(0, pa.float64()), pa.nulls(0, pa.float64()))
    fields = _plain_fields(data, layout) or _arrow_fields(data, layout)
    n, cols = fields.n, layout.columns
    if layout.device_columns:
        device_codes, device_names = _joined([fields.text(i, "device") for i in layout.device_columns])
    elif "device" in cols:
        device_codes, device_names = fields.text(cols["device"], "device")
    else:
        device_codes, device_names = np.zeros(n, np.int32), [layout.device_const or "0"]
    op_codes, op_values = fields.text(cols["op"], "op")
    read_values = np.array([v in layout.read_ops for v in op_values] + [False])
    write_values = np.array([v in layout.write_ops for v in op_values] + [False])
    if not (read_values | write_values)[:-1].all():
        raise NotClean("op")
    is_read = read_values[op_codes]
    ts = fields.ts(cols["ts"])
    zero = limits.ts_zero_us(layout.ts_epoch)
    if n and (ts.min() < zero or ts.max() >= zero + limits.TS_MAX_US):
        raise NotClean("ts: outside the plausible range")
    if tolerance_us is not None and n > 1 and (ts[1:] < ts[:-1] - tolerance_us).any():
        raise NotClean("timestamp going back")
    offset = _times_unit(fields.digits(cols["offset"], "offset"), "offset", layout.offset_unit_bytes)
    size = _times_unit(fields.digits(cols["size"], "size"), "size", layout.size_unit_bytes)
    if n and size.min() <= 0:
        raise NotClean("size")
    if n and (offset > _LONG_MAX - size).any():
        raise NotClean("offset + size: past a long")
    response = _duration(fields.number(cols["response"]) if "response" in cols else None, layout.response_unit, n)
    queue = _duration(fields.number(cols["queue"]) if "queue" in cols else None, layout.queue_unit, n)
    return Parsed(device_codes, device_names, ts, is_read, offset, size, response, queue)


# ---------------------------------------------------------------------------------------------
# The pass: a mapInArrow function over rows of RANGE_DDL, through delta_files.write_tables_by_tasks

RANGE_DDL = "path string, file_uri string, start long, length long, seq_base long, lines long"
SIDE_FIELDS = ("file_uri", "start", "clean", "why", "lines", "first_ts", "last_ts", "device", "n", "reads",
               "bytes_read", "bytes_written", "ts_min", "ts_max", "first_index")


def lines_per_range(path: str, bounds: list[tuple[int, int]]) -> list[int]:
    """How many lines start in each [start, end) of the file (read_lines's rule), from its newlines: the
    driver numbers the records before any task parses them. A local or a remote file (a URI)."""
    size = file_size(path)
    if not size:
        return [0 for _ in bounds]
    before = newlines_before(path)              # counted while the file was hashed, if it was
    spans = [(start, max(start - 1, 0), min(end - 1, size - 1)) for start, end in bounds]
    if before is not None:
        return [(1 if start == 0 else 0) + (before(hi) - before(lo) if hi > lo else 0) for start, lo, hi in spans]
    # a line starts at p in [start, end), p < size, when p == 0 or byte p - 1 is a newline
    if not storage.is_local(path):
        with open_random_access(path) as remote:
            return [(1 if start == 0 else 0) + (_remote_newlines(remote, lo, hi) if hi > lo else 0)
                    for start, lo, hi in spans]
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return [(1 if start == 0 else 0) + (_newlines(mm, lo, hi) if hi > lo else 0) for start, lo, hi in spans]


def _newlines(mm: Any, lo: int, hi: int, chunk: int = 16 << 20) -> int:
    """Newlines in bytes [lo, hi) of a mapped file, counted by numpy on views of the map in 16 MiB chunks: no
    copy (slicing the map copied every byte first: a 5 GB file 10.6 s, now ~1 s)."""
    n = 0
    for at in range(lo, hi, chunk):
        view = np.frombuffer(mm, np.uint8, min(chunk, hi - at), at)
        n += int(np.count_nonzero(view == 10))
        del view                  # the map cannot close while a view of it exists
    return n


def _remote_newlines(fh: Any, lo: int, hi: int, chunk: int = 16 << 20) -> int:
    """Newlines in bytes [lo, hi) of a remote file (pyarrow's RandomAccessFile), read in 16 MiB pieces."""
    n = 0
    for at in range(lo, hi, chunk):
        n += read_fully_at(fh, at, min(chunk, hi - at)).count(b"\n")
    return n


def first_timestamp(path: str, layout: CsvLayout) -> int:
    """The first line's raw timestamp (NotClean when the line is not a clean request)."""
    first = parse_range(read_lines(path, 0, 1), layout, tolerance_us=None)
    if not len(first):
        raise NotClean("no first line")
    return int(first.ts_raw_us[0])


def _side(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([{k: r.get(k) for k in SIDE_FIELDS} for r in rows])


_NONE = np.zeros(0, np.float64)
_NONE.setflags(write=False)          # read-only, as a column's values are: one compiled form of TK.by_device


def regroup_values(column: pa.Array) -> np.ndarray:
    """A non-empty double column's values (read-only) for TK.by_device to regroup; none when it has a null."""
    if column.null_count:
        return _NONE
    values = column.to_numpy()
    values.setflags(write=False)
    return values


def _regrouped(column: pa.Array, values: np.ndarray, regrouped: np.ndarray, seq: np.ndarray, seq_base: int
               ) -> pa.Array:
    """A double column in by_device's order: its regrouped values, all nulls, or (some nulls) taken by the rows'
    line indexes (by_device's seq - seq_base)."""
    if len(values):
        return pa.array(regrouped)
    if column.null_count == len(column):
        return pa.nulls(len(column), column.type)
    return column.take(seq - seq_base)


def write_task(layout: CsvLayout, trace_id: str, ts_base: int, tolerance_us: int | None, source: dict[str, str]
               ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[tuple[str, pa.Table]]]:
    """Per range: ("requests", rows) per device, with ts_us = raw - ts_base, and side rows (delta_files.SIDE)
    of SIDE_FIELDS: whether the range is clean (why not), its first and last timestamps (for the check
    across range edges) and per-device totals. A range that is not clean writes nothing."""
    resolve = storage.filesystem        # the driver's, pickled with the task (libs.readers.binary.range_task)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[str, pa.Table]]:
        for batch in batches:
            for r in batch.to_pylist():
                head = {"file_uri": r["file_uri"], "start": r["start"]}
                try:
                    p = parse_range(read_lines(r["path"], r["start"], r["length"], resolve), layout,
                                    tolerance_us=tolerance_us)
                    if len(p) != r["lines"]:
                        raise NotClean(f"{len(p)} records where the driver counted {r['lines']} lines")
                except NotClean as exc:
                    yield SIDE, _side([{**head, "clean": False, "why": str(exc)[:300], "lines": 0}])
                    continue
                n = len(p)
                head.update(clean=True, lines=n, first_ts=int(p.ts_raw_us[0]) if n else None,
                            last_ts=int(p.ts_raw_us[-1]) if n else None)
                if not n:
                    yield SIDE, _side([head])
                    continue
                # One compiled pass regroups the rows by device (line order within a device) and sums the totals.
                response, queue = regroup_values(p.response_us), regroup_values(p.queue_us)
                starts, seq, ts, op, offset, size, response_out, queue_out, sums = TK.by_device(
                    p.device_codes, len(p.device_names), r["seq_base"], p.ts_raw_us, ts_base, p.is_read,
                    p.offset_bytes, p.size_bytes, response, queue)
                rows = pa.table({
                    "seq": seq, "ts_us": ts,
                    "op": pa.DictionaryArray.from_arrays(pa.array(op), pa.array(["R", "W"])),
                    "offset_bytes": offset, "size_bytes": size,
                    "response_us": _regrouped(p.response_us, response, response_out, seq, r["seq_base"]),
                    "queue_us": _regrouped(p.queue_us, queue, queue_out, seq, r["seq_base"]),
                })
                totals = []
                for d in np.flatnonzero(sums[:, 0]).tolist():
                    lo, k = int(starts[d]), int(sums[d, 0])
                    name = p.device_names[d]
                    yield "requests", rows.slice(lo, k).append_column(
                        "trace_id", constant_column(trace_id, k)).append_column(
                        "device", constant_column(name, k)).append_column(
                        "source_file", constant_column(source[r["file_uri"]], k))
                    totals.append({**head, "device": name, **dict(zip(TK.TOTALS, sums[d].tolist(), strict=True))})
                yield SIDE, _side(totals)

    return run


__all__ = ["RANGE_DDL", "NotClean", "eligible", "first_timestamp", "lines_per_range", "parse_range", "read_lines",
           "regroup_values", "write_task"]
