"""Binary trace formats (VMware vSCSI, HP SRT): numpy decoders over byte ranges, run in Spark tasks.

Each decoder turns one byte range of one file into an Arrow batch of RECORD_SCHEMA rows; the
Spark side fans ranges out with mapInArrow. Fixed-size vSCSI records split at record-aligned
offsets; variable-length SRT records are walked with numba, then gathered vectorised.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

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

    path: str          # local path to open (a staged, decompressed copy when the input was compressed)
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


def _hex(buf: bytes) -> str:
    suffix = "" if len(buf) <= RAW_HEX_LIMIT else f"...(+{len(buf) - RAW_HEX_LIMIT} bytes)"
    return buf[:RAW_HEX_LIMIT].hex() + suffix


def decode_vscsi(data: bytes, rng: ByteRange, version: int, device: str) -> pa.RecordBatch:
    """Decode the records of one range; non-data commands, bad versions, empty and truncated records
    become rejects with a reason."""
    dtype = VSCSI_DTYPES[version]
    rs = dtype.itemsize
    n = len(data) // rs
    recs = np.frombuffer(data[: n * rs], dtype=dtype)
    cmd = recs["cmd"].astype(np.int64)
    is_read = np.isin(cmd, VSCSI_READ_CMDS)
    is_write = np.isin(cmd, VSCSI_WRITE_CMDS)
    size = recs["len"].astype(np.int64)
    bad_ver = (recs["ver"] >> 8) != version
    reason = np.full(n, None, dtype=object)
    message = np.full(n, None, dtype=object)
    non_data = ~(is_read | is_write)
    reason[size <= 0] = "nonpositive_size"
    message[size <= 0] = "data command with length 0"
    reason[non_data] = "non_data_command"
    message[non_data] = [f"SCSI opcode 0x{c:02x} carries no data" for c in cmd[non_data]]
    reason[bad_ver] = "bad_version"
    message[bad_ver] = [f"record version 0x{v:04x}, file is version {version}" for v in recs["ver"][bad_ver]]
    rejected = reason != None  # noqa: E711  (object array: elementwise comparison)
    byte_pos = rng.start + np.arange(n, dtype=np.int64) * rs
    raw = np.full(n, None, dtype=object)
    raw[rejected] = [data[i * rs:(i + 1) * rs].hex() for i in np.flatnonzero(rejected)]
    columns = {
        "file_uri": pa.array([rng.file_uri] * n, pa.string()),
        "block_start": pa.array(np.full(n, rng.start, np.int64)),
        "m": pa.array(np.arange(n, dtype=np.int64)),
        "byte_pos": pa.array(byte_pos),
        "raw": pa.array(raw, pa.string()),
        "device": pa.array([device] * n, pa.string()),
        "ts_raw_us": pa.array(recs["ts"].astype(np.int64)),
        "op": pa.array(np.where(is_read, "R", np.where(is_write, "W", None)), pa.string()),
        "offset_bytes": pa.array(recs["lbn"].astype(np.int64) * SECTOR),
        "size_bytes": pa.array(size),
        "response_us": pa.array(recs["rt"].astype(np.float64) if version == 2 else np.full(n, np.nan),
                                from_pandas=True),
        "queue_us": pa.nulls(n, pa.float64()),
        "reason": pa.array(reason, pa.string()),
        "message": pa.array(message, pa.string()),
    }
    batch = pa.RecordBatch.from_pydict(columns, schema=RECORD_SCHEMA)
    tail = data[n * rs:]
    if tail:
        batch = pa.concat_batches([batch, _tail_reject(rng, n, rng.start + n * rs, tail, device,
                                                       "truncated_record",
                                                       f"{len(tail)} trailing bytes, a record is {rs}")])
    return batch


def _tail_reject(rng: ByteRange, m: int, pos: int, tail: bytes, device: str, reason: str,
                 message: str) -> pa.RecordBatch:
    row = {name: [None] for name in RECORD_SCHEMA.names}
    row.update(file_uri=[rng.file_uri], block_start=[rng.start], m=[m], byte_pos=[pos],
               raw=[_hex(tail)], device=[device], reason=[reason], message=[message])
    return pa.RecordBatch.from_pydict(row, schema=RECORD_SCHEMA)


def vscsi_task(version: int, devices: dict[str, str]):  # type: ignore[no-untyped-def]
    """mapInArrow function: rows of (path, file_uri, start, length) -> decoded records."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():
                rng = ByteRange(row["path"], row["file_uri"], row["start"], row["length"])
                with open(rng.path, "rb") as fh:
                    fh.seek(rng.start)
                    data = fh.read(rng.length)
                yield decode_vscsi(data, rng, version, devices[rng.file_uri])

    return run


def decode_srt(data: bytes, rng: ByteRange, sector_sizes: dict[int, int]) -> pa.RecordBatch:
    """Decode a whole SRT body (bytes after the header's form feed); rng.start is its file offset."""
    from libs.readers.srt import decode_srt_records, find_record_offsets

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
    reason = np.full(n, None, dtype=object)
    message = np.full(n, None, dtype=object)
    reason[size <= 0] = "nonpositive_size"
    message[size <= 0] = "size is not positive"
    reason[~known] = "unknown_device"
    message[~known] = [f"disk {d} is not described in the header" for d in disk[~known]]
    bad_type = f["record_type"] != 1
    reason[bad_type] = np.where(f["record_type"][bad_type] == 4, "suspect_io", "unknown_record_type")
    message[bad_type] = [f"record type {t} (1 = short I/O, 4 = suspect I/O)" for t in f["record_type"][bad_type]]
    rejected = reason != None  # noqa: E711
    raw = np.full(n, None, dtype=object)
    raw[rejected] = [data[o:o + s].hex() for o, s in zip(offsets[rejected], f["record_size"][rejected], strict=True)]
    columns = {
        "file_uri": pa.array([rng.file_uri] * n, pa.string()),
        "block_start": pa.array(np.full(n, rng.start, np.int64)),
        "m": pa.array(np.arange(n, dtype=np.int64)),
        "byte_pos": pa.array(rng.start + offsets.astype(np.int64)),
        "raw": pa.array(raw, pa.string()),
        "device": pa.array(disk.astype(str), pa.string()),
        "ts_raw_us": pa.array(f["enqueue_s"] * 1_000_000 + f["enqueue_us"]),
        "op": pa.array(np.where(f["ioflags"] & 1, "R", "W"), pa.string()),
        "offset_bytes": pa.array(f["sector"] * sector_size),
        "size_bytes": pa.array(size),
        "response_us": pa.array(f["stop_us"].astype(np.float64)),
        "queue_us": pa.array(f["start_us"].astype(np.float64)),
        "reason": pa.array(reason, pa.string()),
        "message": pa.array(message, pa.string()),
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
    """mapInArrow function: one row per SRT file (whole body, record boundaries need a walk)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():
                rng = ByteRange(row["path"], row["file_uri"], row["start"], row["length"])
                data = Path(rng.path).read_bytes()[rng.start:rng.start + rng.length]
                yield decode_srt(data, rng, sector_sizes[rng.file_uri])

    return run
