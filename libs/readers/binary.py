"""Binary trace formats (VMware vSCSI, HP SRT): numpy decoders over byte ranges, run in Spark tasks.

Each decoder turns one byte range of one file into an Arrow batch of RECORD_SCHEMA rows (vSCSI:
VSCSI_RECORD_SCHEMA, for libs.ingest.direct); the Spark side fans ranges out with mapInArrow.
Fixed-size vSCSI records split at record-aligned offsets; variable-length SRT records are walked
with numba, then gathered vectorised.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from blockheat.libs.io import storage
from blockheat.libs.io.inputs import drop_cached, read_at
from blockheat.libs.readers import limits
from blockheat.libs.readers.scan import previous_valid
from blockheat.libs.readers.srt import decode_srt_records, find_record_offsets

# The columns every reader (text or binary) produces before numbering; see readers.records.
RECORD_SCHEMA = pa.schema([
    pa.field("file_uri", pa.string()),
    pa.field("block_start", pa.int64()),
    pa.field("m", pa.int64()),             # record index within the block, contiguous from 0
    pa.field("byte_pos", pa.int64()),      # byte offset of the record in its file
    pa.field("raw", pa.string()),          # hex of the record bytes, only for rejected records
    pa.field("device", pa.string()),
    pa.field("ts_raw_us", pa.int64()),
    pa.field("op", pa.string()),
    pa.field("offset_bytes", pa.int64()),
    pa.field("size_bytes", pa.int64()),
    pa.field("response_us", pa.float64()),
    pa.field("queue_us", pa.float64()),
    pa.field("reason", pa.string()),
    pa.field("message", pa.string()),
    # Final numbering, where the decoder knows it (vSCSI); null for formats numbered by the scan.
    pa.field("seq", pa.int64()),
    pa.field("source_file", pa.string()),
])
# vSCSI decodes to the same columns with the per-file constants (file_uri, device, source_file)
# dictionary-encoded: one value each instead of a string per record (10 M records: 3 x 10 M strings).
CONSTANT_COLUMNS = ("file_uri", "device", "source_file")
VSCSI_RECORD_SCHEMA = pa.schema([
    pa.field(f.name, pa.dictionary(pa.int32(), pa.string())) if f.name in CONSTANT_COLUMNS else f
    for f in RECORD_SCHEMA
])
RAW_HEX_LIMIT = 256  # bytes of a corrupt tail kept as hex in rejected_records

SECTOR = 512
VSCSI_READ_CMDS = (0x08, 0x28, 0xA8, 0x88)
VSCSI_WRITE_CMDS = (0x0A, 0x2A, 0xAA, 0x8A)
VSCSI_DTYPES = {
    1: np.dtype([("sn", "<u4"), ("len", "<u4"), ("nsg", "<u4"), ("cmd", "<u2"), ("ver", "<u2"),
                 ("lbn", "<u8"), ("ts", "<u8")]),
    2: np.dtype([("cmd", "<u2"), ("ver", "<u2"), ("sn", "<u4"), ("len", "<u4"), ("nsg", "<u4"),
                 ("lbn", "<u8"), ("ts", "<u8"), ("rt", "<u8")]),
}
VSCSI_EXPECTED = ("VMware vSCSI binary: 32-byte v1 records (ver field at byte 14) or 40-byte v2 "
                  "records (ver field at byte 2), version = ver >> 8")


class BinaryFormatError(ValueError):
    """A file that is not in the stated binary format; the message names file and byte offset."""


@dataclass(frozen=True)
class ByteRange:
    """One Spark task's share of a binary file."""

    path: str          # location to open: a local path or a URI (a staged, decompressed copy when the input was
                       # compressed)
    file_uri: str      # the identity used for numbering (stable across the two passes)
    start: int
    length: int


def detect_vscsi_version(head: bytes, source: str) -> int:
    """Version 1 or 2 from the `ver` field of the first records; BinaryFormatError otherwise."""
    if len(head) < 32:
        raise BinaryFormatError(f"{source}: byte 0: only {len(head)} bytes; expected {VSCSI_EXPECTED}")
    votes = {}
    for version, dtype in VSCSI_DTYPES.items():
        n = min(len(head) // dtype.itemsize, 64)
        recs = np.frombuffer(head[: n * dtype.itemsize], dtype=dtype)
        votes[version] = bool(n) and bool(np.all(recs["ver"] >> 8 == version))
    if votes[2] and not votes[1]:
        return 2
    if votes[1] and not votes[2]:
        return 1
    v1 = int.from_bytes(head[14:16], "little")
    v2 = int.from_bytes(head[2:4], "little")
    raise BinaryFormatError(
        f"{source}: byte 0: not a vSCSI trace: ver field reads 0x{v2:04x} at byte 2 (v2) and "
        f"0x{v1:04x} at byte 14 (v1); expected {VSCSI_EXPECTED}"
    )


def vscsi_ranges(path: str, file_uri: str, size: int, version: int, target_bytes: int) -> list[ByteRange]:
    """Record-aligned ranges of about target_bytes; the last one keeps any truncated tail."""
    rs = VSCSI_DTYPES[version].itemsize
    step = max(rs, (target_bytes // rs) * rs)
    return [ByteRange(path, file_uri, s, min(step, size - s)) for s in range(0, size, step)]


def _sparse_strings(n: int, where: np.ndarray, values: list[str]) -> pa.Array:
    """A length-n string array, null except at indices `where` (no per-row Python objects)."""
    if len(where) == 0:
        return pa.nulls(n, pa.string())
    mask = np.zeros(n, dtype=bool)
    mask[where] = True
    return pc.replace_with_mask(pa.nulls(n, pa.string()), pa.array(mask), pa.array(values, pa.string()))


def _reasons(n: int, checks: list[tuple[np.ndarray, str, list[str] | str]]) -> tuple[pa.Array, pa.Array]:
    """(reason, message) arrays from ordered (mask, code, message(s)) checks; the first match wins."""
    code = np.full(n, -1, dtype=np.int64)
    for k, (mask, _, _) in reversed(list(enumerate(checks))):
        code[mask] = k
    where = np.flatnonzero(code >= 0)
    # Per-check messages are listed per masked row: a row's index into them is its rank in the mask.
    ranks = [np.cumsum(mask) - 1 for mask, _, _ in checks]
    reasons, messages = [], []
    for i in where:
        _, name, msg = checks[code[i]]
        reasons.append(name)
        messages.append(msg if isinstance(msg, str) else msg[int(ranks[code[i]][i])])
    return _sparse_strings(n, where, reasons), _sparse_strings(n, where, messages)


def constant_column(value: str, n: int) -> pa.Array:
    """A length-n dictionary array holding `value` n times."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))


def _op(is_read: np.ndarray, is_write: np.ndarray) -> pa.Array:
    return pc.if_else(pa.array(is_read), "R", pc.if_else(pa.array(is_write), "W", pa.scalar(None, pa.string())))


def _hex(buf: bytes) -> str:
    suffix = "" if len(buf) <= RAW_HEX_LIMIT else f"...(+{len(buf) - RAW_HEX_LIMIT} bytes)"
    return buf[:RAW_HEX_LIMIT].hex() + suffix


@dataclass(frozen=True)
class VscsiFile:
    """What a vSCSI task needs to number its records without a scan pass."""

    device: str          # one file is one device (the records carry none)
    source_file: str
    seq_base: int        # records in the trace's earlier files


@dataclass(frozen=True)
class VscsiChecks:
    """The decoded fields of one range's records and its reject checks, in order (the first match wins):
    (mask, reason code, message of record i)."""

    recs: np.ndarray
    ts: np.ndarray           # int64; a timestamp outside the plausible range (ts_ok false) is not one
    cmd: np.ndarray
    size: np.ndarray
    is_read: np.ndarray
    is_write: np.ndarray
    checks: list[tuple[np.ndarray, str, Callable[[int], str]]]
    ts_ok: np.ndarray        # 0 <= ts < limits.TS_MAX_US
    offset_ok: np.ndarray    # lbn x 512 + len fits a long
    rt_ok: np.ndarray        # v2: rt <= limits.TS_MAX_US (v1: all true)


def vscsi_checks(data: bytes, version: int, *, tolerance_us: int | None = None,
                 prev_ts: int | None = None) -> VscsiChecks:
    """Checks of the whole records in `data`: bad versions, non-data commands, empty records, timestamps
    outside the plausible range (limits.TS_MAX_US), offsets (lbn x 512, and with the length) past 2^63 - 1
    bytes, v2 response times above limits.TS_MAX_US, and timestamps more than tolerance_us before the previous
    plausible one (prev_ts: the record just before this range; ignored when itself out of range). The unsigned
    fields are compared before any cast, so nothing wraps."""

    dtype = VSCSI_DTYPES[version]
    n = len(data) // dtype.itemsize
    recs = np.frombuffer(data[: n * dtype.itemsize], dtype=dtype)
    ts_ok = recs["ts"] < np.uint64(limits.TS_MAX_US)
    ts = np.where(ts_ok, recs["ts"], 0).astype(np.int64)
    if prev_ts is not None and not 0 <= prev_ts < limits.TS_MAX_US:
        prev_ts = None
    if tolerance_us is None:
        back = np.zeros(n, dtype=bool)
        prev = ts
    else:
        prev, has_prev = previous_valid(ts, ts_ok, prev_ts)
        back = ts_ok & has_prev & (ts < prev - tolerance_us)
    cmd = recs["cmd"].astype(np.int64)
    is_read = np.isin(cmd, VSCSI_READ_CMDS)
    is_write = np.isin(cmd, VSCSI_WRITE_CMDS)
    size = recs["len"].astype(np.int64)
    offset_ok = recs["lbn"] <= ((limits.LONG_MAX - size) // SECTOR).astype(np.uint64)
    rt_ok = recs["rt"] <= np.uint64(limits.TS_MAX_US) if version == 2 else np.ones(n, dtype=bool)
    return VscsiChecks(recs, ts, cmd, size, is_read, is_write, [
        ((recs["ver"] >> 8) != version, "bad_version",
         lambda i: f"record version 0x{recs['ver'][i]:04x}, file is version {version}"),
        (~(is_read | is_write), "non_data_command", lambda i: f"SCSI opcode 0x{cmd[i]:02x} carries no data"),
        (size <= 0, "nonpositive_size", lambda i: "data command with length 0"),
        (~ts_ok, limits.TS_OUT_OF_RANGE,
         lambda i: f"timestamp {recs['ts'][i]} us is outside the plausible range (0 to {limits.TS_MAX_US} us)"),
        (~offset_ok, limits.OFFSET_OVERFLOW,
         lambda i: f"lbn {recs['lbn'][i]} x {SECTOR} bytes + length {size[i]} is past 2^63 - 1 bytes"),
        (~rt_ok, limits.BAD_RESPONSE,
         lambda i: f"response time {recs['rt'][i]} us is above {limits.TS_MAX_US} us"),
        (back, "ts_backwards", lambda i: f"timestamp goes back {prev[i] - ts[i]} us (tolerance {tolerance_us} us)"),
    ], ts_ok, offset_ok, rt_ok)


def truncated_message(tail_bytes: int, record_bytes: int) -> str:
    return f"{tail_bytes} trailing bytes, a record is {record_bytes}"


def decode_vscsi(data: bytes, rng: ByteRange, version: int, info: VscsiFile, *,
                 tolerance_us: int | None = None, prev_ts: int | None = None) -> pa.RecordBatch:
    """Decode the records of one range (vscsi_checks' rejects get their reason; a truncated tail record
    too). Fixed-size records make seq exact here."""
    device = info.device
    rs = VSCSI_DTYPES[version].itemsize
    checked = vscsi_checks(data, version, tolerance_us=tolerance_us, prev_ts=prev_ts)
    recs, ts, size = checked.recs, checked.ts, checked.size
    is_read, is_write = checked.is_read, checked.is_write
    n = len(recs)
    reason, message = _reasons(n, [(mask, code, [text(i) for i in np.flatnonzero(mask)])
                                   for mask, code, text in checked.checks])
    rejected = np.flatnonzero(~np.asarray(pc.is_null(reason)))
    seq0 = info.seq_base + rng.start // rs
    columns = {
        "file_uri": constant_column(rng.file_uri, n),
        "block_start": pa.array(np.full(n, rng.start, np.int64)),
        "m": pa.array(np.arange(n, dtype=np.int64)),
        "byte_pos": pa.array(rng.start + np.arange(n, dtype=np.int64) * rs),
        "raw": _sparse_strings(n, rejected, [data[i * rs:(i + 1) * rs].hex() for i in rejected]),
        "device": constant_column(device, n),
        "ts_raw_us": pa.array(ts, mask=~checked.ts_ok),
        "op": _op(is_read, is_write),
        "offset_bytes": pa.array(np.where(checked.offset_ok, recs["lbn"], 0).astype(np.int64) * SECTOR,
                                 mask=~checked.offset_ok),
        "size_bytes": pa.array(size),
        "response_us": (pa.array(recs["rt"].astype(np.float64), mask=~checked.rt_ok) if version == 2
                        else pa.nulls(n, pa.float64())),
        "queue_us": pa.nulls(n, pa.float64()),
        "reason": reason,
        "message": message,
        "seq": pa.array(seq0 + np.arange(n, dtype=np.int64)),
        "source_file": constant_column(info.source_file, n),
    }
    batch = pa.RecordBatch.from_pydict(columns, schema=VSCSI_RECORD_SCHEMA)
    tail = data[n * rs:]
    if tail:
        batch = pa.Table.from_batches([batch, _tail_reject(
            rng, n, rng.start + n * rs, tail, device, "truncated_record",
            truncated_message(len(tail), rs), seq=seq0 + n, source_file=info.source_file,
            schema=VSCSI_RECORD_SCHEMA)]).unify_dictionaries().combine_chunks().to_batches()[0]
    return batch


def _tail_reject(rng: ByteRange, m: int, pos: int, tail: bytes, device: str, reason: str,
                 message: str, seq: int | None = None, source_file: str | None = None,
                 schema: pa.Schema = RECORD_SCHEMA) -> pa.RecordBatch:
    row: dict[str, list[object]] = {name: [None] for name in schema.names}
    row.update(file_uri=[rng.file_uri], block_start=[rng.start], m=[m], byte_pos=[pos],
               raw=[_hex(tail)], device=[device], reason=[reason], message=[message],
               seq=[seq], source_file=[source_file])
    return pa.RecordBatch.from_pydict(row, schema=schema)


def range_task(decode: Callable[[bytes, ByteRange, bytes], pa.RecordBatch],
               before: int = 0):  # type: ignore[no-untyped-def]
    """mapInArrow function: rows of (path, file_uri, start, length) -> decode(range bytes, rng, the
    `before` bytes preceding the range). A local file is read with seek and read (its pages then dropped from the
    page cache); a remote one with pyarrow's RandomAccessFile.read_at, the same bytes."""
    # The driver's file system lookup, pickled with the task (by reference: libs.io.storage.filesystem, which the
    # task runs with the S3 settings of its own environment; a test's stand-in store travels the same way).
    resolve = storage.filesystem

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():
                rng = ByteRange(row["path"], row["file_uri"], row["start"], row["length"])
                lead = min(before, rng.start)
                if storage.is_local(rng.path):
                    with open(rng.path, "rb") as fh:
                        fh.seek(rng.start - lead)
                        data = fh.read(rng.length + lead)
                        drop_cached(fh, rng.start, rng.length)
                else:
                    data = read_at(rng.path, rng.start - lead, rng.length + lead, resolve)
                yield decode(data[lead:], rng, data[:lead])

    return run


def vscsi_task(version: int, files: dict[str, VscsiFile], tolerance_us: int | None):  # type: ignore[no-untyped-def]
    """Decode vSCSI ranges, each also reading the record just before it for the time check."""
    dtype = VSCSI_DTYPES[version]

    def decode(data: bytes, rng: ByteRange, before: bytes) -> pa.RecordBatch:
        prev_ts = int(np.frombuffer(before, dtype=dtype)["ts"][0]) if before else None
        return decode_vscsi(data, rng, version, files[rng.file_uri], tolerance_us=tolerance_us, prev_ts=prev_ts)

    return range_task(decode, before=dtype.itemsize)


def decode_srt(data: bytes, rng: ByteRange, sector_sizes: dict[int, int]) -> pa.RecordBatch:
    """Decode a whole SRT body (bytes after the header's form feed); rng.start is its file offset."""

    body = np.frombuffer(data, dtype=np.uint8)
    offsets, stop = find_record_offsets(body)
    f = decode_srt_records(body, offsets)
    n = len(offsets)
    disk = f["disk"]
    known = np.isin(disk, list(sector_sizes))
    sector_size = np.zeros(n, np.int64)
    for number, ssize in sector_sizes.items():
        sector_size[disk == number] = ssize
    size = f["size_bytes"]
    rtype = f["record_type"]
    bad_type = rtype != 1
    sizes = f["record_size"]
    short = f["ioflags"] < 0              # the decoder's -1: a word past the record's end
    ts = f["enqueue_s"] * 1_000_000 + f["enqueue_us"]       # uint32 words: no overflow, maybe -1s
    # the microseconds word of the enqueue time is under a second (a -1 word, 4294967295, shifted the record by
    # 71 minutes); the seconds word's range is the plausible one
    us_bad = f["enqueue_us"] >= 1_000_000
    ts_bad = (f["enqueue_s"] < 0) | (f["enqueue_us"] < 0) | us_bad | (ts >= limits.TS_MAX_US)
    # sector (uint32) x the header's sector size + size must fit a long
    offset_ok = f["sector"] <= (limits.LONG_MAX - np.maximum(size, 0)) // np.maximum(sector_size, 1)
    reason, message = _reasons(n, [
        (bad_type & (rtype == 4), "suspect_io", "record type 4 (suspect I/O)"),
        (bad_type & (rtype != 4), "unknown_record_type",
         [f"record type {t} (1 = short I/O, 4 = suspect I/O)" for t in rtype[bad_type & (rtype != 4)]]),
        (short, "short_record", [f"record of {r} bytes ends before its ioflags word (48 bytes needed)"
                                 for r in sizes[short]]),
        (~known, "unknown_device", [f"disk {d} is not described in the header" for d in disk[~known]]),
        (size <= 0, "nonpositive_size", "size is not positive"),
        (us_bad, "bad_timestamp",
         [f"enqueue time microseconds word {u} is not below 1000000" for u in f["enqueue_us"][us_bad]]),
        (ts_bad, limits.TS_OUT_OF_RANGE,
         [f"enqueue time {s} s {u} us is outside the plausible range (0 to {limits.TS_MAX_US} us)"
          for s, u in zip(f["enqueue_s"][ts_bad], f["enqueue_us"][ts_bad], strict=True)]),
        (~offset_ok, limits.OFFSET_OVERFLOW,
         [f"sector {s} x {z} bytes + size {b} is past 2^63 - 1 bytes"
          for s, z, b in zip(f["sector"][~offset_ok], sector_size[~offset_ok], size[~offset_ok], strict=True)]),
    ])
    rejected = np.flatnonzero(~np.asarray(pc.is_null(reason)))
    columns = {
        "file_uri": pa.repeat(pa.scalar(rng.file_uri, pa.string()), n),
        "block_start": pa.array(np.full(n, rng.start, np.int64)),
        "m": pa.array(np.arange(n, dtype=np.int64)),
        "byte_pos": pa.array(rng.start + offsets.astype(np.int64)),
        "raw": _sparse_strings(n, rejected, [data[offsets[i]:offsets[i] + sizes[i]].hex() for i in rejected]),
        "device": pa.array(disk.astype(str), pa.string()),
        "ts_raw_us": pa.array(ts, mask=ts_bad),
        "op": _op((f["ioflags"] & 1).astype(bool), ~(f["ioflags"] & 1).astype(bool)),
        "offset_bytes": pa.array(np.where(offset_ok, f["sector"], 0) * sector_size, mask=~offset_ok),
        "size_bytes": pa.array(size),
        "response_us": pa.array(f["stop_us"].astype(np.float64)),
        "queue_us": pa.array(f["start_us"].astype(np.float64)),
        "reason": reason,
        "message": message,
        "seq": pa.nulls(n, pa.int64()),
        "source_file": pa.nulls(n, pa.string()),
    }
    batch = pa.RecordBatch.from_pydict(columns, schema=RECORD_SCHEMA)
    if stop < len(data):
        tail = data[stop:]
        word = int.from_bytes(tail[:4], "big") if len(tail) >= 4 else None
        why = (f"{len(tail)} trailing bytes, record size word says {word}" if word is not None
               else f"{len(tail)} trailing bytes, shorter than a size word")
        batch = pa.concat_batches([batch, _tail_reject(rng, n, rng.start + stop, tail, "",
                                                       "truncated_record", why)])
    return batch


def srt_task(sector_sizes: dict[str, dict[int, int]]):  # type: ignore[no-untyped-def]
    """Decode SRT bodies, one range per file (record boundaries need a walk from the start)."""
    return range_task(lambda data, rng, _: decode_srt(data, rng, sector_sizes[rng.file_uri]))
