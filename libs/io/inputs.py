"""Input files of an ingest: existence and permission checks, compression, staging, checksums.

Everything here runs on the driver before Spark reads a byte, so a bad path fails fast with a
message naming it, and nothing is written.

An input is a local path or a URI of an object store (`s3a://bucket/key`, libs.io.storage); so is the staging
location. Local files keep the fast local reads (one unbuffered read to hash, posix_fadvise for the tasks); remote
ones are read through pyarrow's file system streams: sequential streams to check, hash and decompress,
random-access files (read_at, open_random_access) for the tasks' byte ranges.

Bounded resources: the format check (prepare_inputs' `check`) sees only each file's first decompressed bytes, before
anything is staged; decompression stops past a limit per file (expanded_limit: max(1,000 x the compressed size,
1 GiB) unless given) with an InputError; a text line longer than MAX_LINE_BYTES is cut to its first
LONG_LINE_KEPT bytes in a staged copy (InputFile.long_lines says where), so no reader holds it whole.
"""
from __future__ import annotations

import bz2
import contextlib
import functools
import gzip
import hashlib
import os
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from numba import njit

from blockheat.libs.io import storage

MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\x28\xb5\x2f\xfd": "zstd"}
# Compressions Spark's text reader decodes itself, chosen by file extension (Hadoop codecs).
SPARK_NATIVE = {"gzip": (".gz",), "bzip2": (".bz2",)}
SNIFF_BYTES = 1 << 16
#: What prepare_inputs' format check sees: the first decompressed bytes of a file (an SRT header is within them).
HEAD_BYTES = 1 << 20
#: The default limit of a compressed file's decompressed size: this many times its compressed size, and at least
#: EXPANSION_FLOOR (a gzip of a text trace expands 5-20x; a bomb 1,000x and more).
EXPANSION_RATIO = 1000
EXPANSION_FLOOR = 1 << 30
#: A text line (the bytes between two newlines) longer than this is a rejected record (no trace line is near it).
MAX_LINE_BYTES = 1 << 20
#: What of such a line is kept (its raw text in rejected_records): its first bytes, up to a carriage return.
LONG_LINE_KEPT = 4096
#: Read buffer of a remote file's sequential stream (decompression and sniffing read it in small pieces; every
#: unbuffered read of an object store would be a request of its own).
STREAM_BUFFER = 1 << 20
COPY_CHUNK = 1 << 22

#: A location as this module hands it on: a Path for a local file, the normalized URI (str) for a remote one.
Location = Path | str
#: libs.io.storage.filesystem or a stand-in: a location -> (pyarrow file system, path on it).
Resolver = Callable[[str], tuple[pafs.FileSystem, str]]


class InputError(ValueError):
    """A path that cannot be ingested: missing, a directory, unreadable, empty or duplicated."""


@dataclass(frozen=True)
class InputFile:
    """One source file: what the user named, and what Spark or a decoder should open."""

    given: str              # as the user wrote it (stored in source_file)
    path: Location          # absolute path of the source (Path), or its normalized URI (str)
    size_bytes: int
    digest: str | Future[str]   # the source's SHA-256 hex digest, or its computation on a background thread
    compression: str | None
    readable_path: Location  # the source itself, or a decompressed copy in the staging location
    # The lines longer than MAX_LINE_BYTES: (line number as Spark's text reader counts lines, length in bytes);
    # readable_path is then a staged copy with each cut to its first LONG_LINE_KEPT bytes.
    long_lines: tuple[tuple[int, int], ...] = ()

    @property
    def sha256(self) -> str:
        """The source's SHA-256 hex digest (waiting for it while prepare_inputs(defer_digests=True)'s thread hashes;
        its error, such as the file gone, is raised here)."""
        return self.digest if isinstance(self.digest, str) else self.digest.result()

    @property
    def is_staged(self) -> bool:
        return self.readable_path != self.path

    @property
    def name(self) -> str:
        """The source's file name (the last part of its path)."""
        return storage.name(str(self.path))


def _resolve(location: str | os.PathLike[str], resolve: Resolver | None = None) -> tuple[pafs.FileSystem, str]:
    return (resolve or storage.filesystem)(os.fspath(location))


def open_random_access(location: str, resolve: Resolver | None = None) -> pa.NativeFile:
    """A remote file opened for random access (pyarrow's RandomAccessFile: read_at, seek + read). `resolve`:
    the file system lookup, libs.io.storage.filesystem by default (a task gets the driver's, see
    libs.readers.binary.range_task)."""
    fs, path = _resolve(location, resolve)
    return fs.open_input_file(path)


def read_fully_at(fh: pa.NativeFile, offset: int, length: int) -> bytes:
    """Bytes [offset, offset + length) of a random-access file, fewer only at its end."""
    parts = []
    got = 0
    while got < length:
        chunk = fh.read_at(length - got, offset + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_at(location: str, offset: int, length: int, resolve: Resolver | None = None) -> bytes:
    """Bytes [offset, offset + length) of a remote file (fewer at its end): the same bytes a local file's seek and
    read give."""
    with open_random_access(location, resolve) as fh:
        return read_fully_at(fh, offset, length)


def file_size(location: str | os.PathLike[str]) -> int:
    """The file's size in bytes (a stat for a local file, the store's file info for a remote one)."""
    return os.stat(location).st_size if storage.is_local(location) else storage.size(os.fspath(location))


def _open_source(location: Location) -> BinaryIO:
    """The file's raw bytes as a sequential stream (no decompression: pyarrow's would guess it from the name)."""
    if storage.is_local(location):
        return open(location, "rb")
    fs, path = _resolve(location)
    return fs.open_input_stream(path, compression=None, buffer_size=STREAM_BUFFER)  # type: ignore[return-value]


def _open_output(location: Location) -> BinaryIO:
    if storage.is_local(location):
        return open(location, "wb")
    fs, path = _resolve(location)
    return fs.open_output_stream(path, compression=None)  # type: ignore[return-value]


def drop_cached(fh: BinaryIO, start: int, length: int) -> None:
    """Tell the kernel a task is done with bytes [start, start + length) of an input it reads once: a large
    trace's pages then leave the page cache as they are parsed instead of pushing out the table files the
    ingest writes (which the next stage reads). Advisory, and a no-op where posix_fadvise is missing."""
    if hasattr(os, "posix_fadvise") and length > 0:
        with contextlib.suppress(OSError):
            os.posix_fadvise(fh.fileno(), start, length, os.POSIX_FADV_DONTNEED)


def detect_compression(head: bytes) -> str | None:
    """gzip, bzip2 or zstd from the magic bytes; None for uncompressed data."""
    for magic, name in MAGIC.items():
        if head.startswith(magic):
            return name
    return None


class _DeflateErrors:
    """A gzip stream whose damaged-data errors are OSErrors: zlib.error (an invalid distance, a bad block type) is
    no OSError, and every caller turns an OSError of a compressed input into one naming the file."""

    def __init__(self, src: BinaryIO) -> None:
        self._src = src

    def read(self, n: int = -1) -> bytes:
        try:
            return self._src.read(n)
        except zlib.error as exc:
            raise OSError(f"damaged deflate data: {exc}") from exc


@contextlib.contextmanager
def open_decompressed(path: Location, compression: str | None) -> Iterator[BinaryIO]:
    """A binary stream of the decompressed content (a context manager), of a local or a remote file. Data cut short
    or damaged raises OSError or EOFError when read, never a shorter stream."""
    with _open_source(path) as raw:
        if compression == "gzip":
            with gzip.open(raw, "rb") as src:
                yield _DeflateErrors(src)  # type: ignore[misc]
        elif compression == "bzip2":
            with bz2.open(raw, "rb") as src:
                yield src  # type: ignore[misc]
        elif compression == "zstd":
            # pyarrow's stream, not zstandard's stream_reader: that one ends quietly where a cut-short file ends
            # (half a frame read as a whole, shorter file); this one raises OSError "Truncated compressed stream".
            # Both read every frame of a multi-frame file.
            src = pa.CompressedInputStream(raw, "zstd")
            try:
                yield src  # type: ignore[misc]
            finally:
                src.close()
        else:
            yield raw


#: While a file is hashed, its newlines are counted per block of this many bytes: the index from which
#: newlines_before tells the driver how many lines start before any byte (lines_per_range numbers the records of
#: a text trace with it, without reading the file again).
NEWLINE_BLOCK = 1 << 20


@njit(cache=True, nogil=True)
def newline_blocks(data: np.ndarray, block: int, counts: np.ndarray, firsts: np.ndarray,
                   lasts: np.ndarray) -> None:  # pragma: no cover - compiled by numba
    """Per block of `block` bytes of data: its newlines, and the offsets in the block of its first and last (-1
    when it has none). The count is a plain sum (vectorized), the two ends searched from each end."""
    for b in range(counts.shape[0]):
        lo, hi = b * block, min((b + 1) * block, data.shape[0])
        c = 0
        for i in range(lo, hi):
            c += data[i] == 10
        counts[b] = c
        firsts[b] = lasts[b] = -1
        if c:
            i = lo
            while data[i] != 10:
                i += 1
            firsts[b] = i - lo
            i = hi - 1
            while data[i] != 10:
                i -= 1
            lasts[b] = i - lo


class _Lines:
    """The lines longer than `longest` bytes of a stream fed chunk by chunk (a line: the bytes between two
    newlines, or the file's ends), as (first byte, length); and the newlines per NEWLINE_BLOCK bytes. Per block
    only its first and last newline are looked at, so a line spanning blocks is measured exactly, and lines
    within a block (shorter than the block) are measured only when `longest` is below the block size."""

    def __init__(self, longest: int = MAX_LINE_BYTES) -> None:
        self.longest = longest
        self.size = 0
        self.last_newline = -1
        self.long: list[tuple[int, int]] = []

    def _line(self, start: int, end: int) -> None:
        if end - start > self.longest:
            self.long.append((start, end - start))

    def feed(self, buf: bytes | bytearray | memoryview, n: int | None = None) -> np.ndarray:
        """Take the next n bytes (all of buf); the newlines in each of their blocks."""
        data = np.frombuffer(buf, np.uint8, len(buf) if n is None else n)
        block = NEWLINE_BLOCK
        blocks = -(-len(data) // block)
        counts, firsts, lasts = (np.empty(blocks, np.int64) for _ in range(3))
        newline_blocks(data, block, counts, firsts, lasts)
        for at, c, first, last in zip(range(0, len(data), block), counts.tolist(), firsts.tolist(), lasts.tolist(),
                                      strict=True):
            if not c:
                continue
            base = self.size + at
            if self.longest < block:
                hit = data[at:at + block] == 10
                for nl in (np.flatnonzero(hit) + base).tolist():
                    self._line(self.last_newline + 1, nl)
                    self.last_newline = nl
                continue
            self._line(self.last_newline + 1, base + first)
            self.last_newline = base + last
        self.size += len(data)
        return counts

    def finish(self) -> list[tuple[int, int]]:
        """The long lines, the last one (no newline after it) included."""
        self._line(self.last_newline + 1, self.size)
        self.last_newline = self.size - 1
        return self.long


@dataclass(frozen=True)
class _Scan:
    sha256: str
    block: int
    newlines: np.ndarray | None     # per block of the file (the last one partial); None: not counted (binary)
    long_lines: tuple[tuple[int, int], ...] = ()    # (first byte, length) of lines over MAX_LINE_BYTES (text)


def _open_scan(path: Location) -> BinaryIO:
    """The file as _scan reads it: unbuffered for a local one (its chunks are large), pyarrow's input stream (one
    ranged read per chunk) for a remote one."""
    if storage.is_local(path):
        return open(path, "rb", buffering=0)
    fs, where = _resolve(path)
    return fs.open_input_stream(where, compression=None)  # type: ignore[return-value]


#: Chunks a local file's scan has being read at once, each at its own offset: one sequential reader got about half
#: of a virtual disk's rate (1.1 GB not in the page cache: 1.0-2.2 s with one reader, 0.46-0.56 s with two).
SCAN_READERS = 2


def _read_chunk(fd: int, view: memoryview, at: int) -> int:
    """Bytes of the file at offset `at` read into view, until it is full or the file ends; how many."""
    n = 0
    while n < len(view) and (got := os.preadv(fd, [view[n:]], at + n)):
        n += got
    return n


def _scan(path: Location, newlines: bool = True, digest: bool = True) -> _Scan:
    """One read of the file: its SHA-256 and (`newlines`, for text) its newlines per NEWLINE_BLOCK bytes. A thread
    of its own hashes the chunks in file order (SHA-256 is serial, and slower than the count) while this thread
    counts the newlines of the next (numpy) and, for a local file, SCAN_READERS threads read the ones after it at
    their offsets; so a text file costs its hashing time and not the sum. hashlib, numpy's comparison and sums and
    the reads release the GIL, so this also runs beside the main thread (prefetch_digests). A remote file is read
    in order through its pyarrow stream. Without `digest` the newlines only (the sha256 left empty)."""
    block = NEWLINE_BLOCK
    size = block * 16
    local = storage.is_local(path)
    ahead = SCAN_READERS if local else 0
    buffers = [bytearray(size) for _ in range(2 + ahead)]
    hashing: list[Future[None] | None] = [None] * len(buffers)    # the update in flight on each buffer
    hasher = hashlib.sha256()
    counts: list[np.ndarray] = []
    lines = _Lines()
    with (_open_scan(path) as fh, ThreadPoolExecutor(1, thread_name_prefix="sha256-update") as pool,
          ThreadPoolExecutor(max(ahead, 1), thread_name_prefix="scan-read") as readers):
        reading: dict[int, Future[int]] = {}

        def free(slot: int) -> memoryview:
            if (pending := hashing[slot]) is not None:
                pending.result()                            # hashed: its buffer can take the next chunk
                hashing[slot] = None
            return memoryview(buffers[slot])

        def read_ahead(k: int) -> None:
            reading[k] = readers.submit(_read_chunk, fh.fileno(), free(k % len(buffers)), k * size)

        for k in range(ahead):
            read_ahead(k)
        turn = 0
        while True:
            slot = turn % len(buffers)
            if local:
                n = reading.pop(turn).result()
                read_ahead(turn + ahead)
            else:
                view = free(slot)
                n = 0
                while n < size and (got := fh.readinto(view[n:])):
                    n += got
            if not n:
                break
            if digest:
                hashing[slot] = pool.submit(hasher.update, memoryview(buffers[slot])[:n])   # in file order
            if newlines:
                counts.append(lines.feed(buffers[slot], n))
            turn += 1
            if n < size:
                break
        for future in reading.values():
            future.result()
        for pending in hashing:
            if pending is not None:
                pending.result()
    hex_digest = hasher.hexdigest() if digest else ""
    if not newlines:
        return _Scan(hex_digest, block, None)
    per_block = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    return _Scan(hex_digest, block, per_block, tuple(lines.finish()))


# Scans started early (prefetch_digests), by the file's path, size and modification time.
_PREFETCHED: dict[tuple[str, int, int], Future[_Scan]] = {}
# The newline counts of the files hashed in this process, by the same key (a few KB for a GB).
_NEWLINES: dict[tuple[str, int, int], _Scan] = {}


def _stat_key(path: Location) -> tuple[str, int, int]:
    """(location, size, modification time): a file unchanged since it was hashed has the same key. OSError when it
    is missing (a remote one: FileNotFoundError)."""
    if storage.is_local(path):
        st = os.stat(path)
        return str(Path(path).absolute()), st.st_size, st.st_mtime_ns
    location = storage.normalize(path)
    fs, where = _resolve(location)
    info = fs.get_file_info(where)
    if info.type != pafs.FileType.File:
        raise FileNotFoundError(2, "no such file", location)
    return location, int(info.size or 0), int(info.mtime_ns or 0)


def local_path(location: str | os.PathLike[str]) -> Path:
    """A local location as a Path (a file:// URI as its path)."""
    return Path(storage.normalize(location)) if storage.scheme(location) == "file" else Path(location)


def _location(given: str) -> Location:
    """What the user wrote as a location: an absolute local Path, or the normalized URI (StorageError when the
    URI is not one this product reads)."""
    if storage.is_local(given):
        return local_path(given).expanduser().absolute()
    return storage.normalize(given)


def prefetch_digests(given: list[str], text: bool = True) -> None:
    """Start the files' SHA-256 (and newline counts) on a background thread, so the ingest job hashes while
    its Spark session starts (a 5 GB file is ~6 s of one CPU, the JVM's start as long). A file that cannot be
    read is skipped here and reported by prepare_inputs; one that changed is hashed again. text: count the
    newlines too (not for binary formats)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256")
    for g in given:
        try:
            path = _location(g)
            key = _stat_key(path)
        except (OSError, storage.StorageError):
            continue
        if (not isinstance(path, Path) or path.is_file()) and key not in _PREFETCHED:
            _PREFETCHED[key] = pool.submit(_scan, path, text)
    pool.shutdown(wait=False)


def file_sha256(path: Location) -> str:
    """The file's SHA-256 hex digest, from one read (no newline index): the nightly run's landing scan."""
    return _scan(path, newlines=False).sha256


def _sha256(path: Location, text: bool = True) -> str:
    """The file's SHA-256 hex digest (the prefetched one when the file is unchanged since)."""
    return _scanned(path, text).sha256


def _scanned(path: Location, text: bool = True, digest: bool = True) -> _Scan:
    """The file's scan: its SHA-256 digest and (text) its newlines and long lines (the prefetched one when the file
    is unchanged since; without `digest` and none prefetched, its sha256 is empty)."""
    key = _stat_key(path)
    for stale in [k for k in _PREFETCHED if k[0] == key[0] and k != key]:      # the file changed since
        _PREFETCHED.pop(stale).cancel()
    future = _PREFETCHED.pop(key, None)
    scan = None
    if future is not None:
        with contextlib.suppress(OSError):
            scan = future.result()
    if scan is None:
        scan = _scan(path, text, digest)
    if scan.newlines is not None:
        _NEWLINES[key] = scan
    return scan


@functools.cache
def _background() -> ThreadPoolExecutor:
    """The thread that computes deferred digests (prepare_inputs(defer_digests=True)), one file after another."""
    return ThreadPoolExecutor(1, thread_name_prefix="sha256-deferred")


def newlines_before(path: str | Path) -> Callable[[int], int] | None:
    """N(x): the newlines in the file's bytes [0, x), from the counts made when this process hashed it; None
    when it did not (or the file changed since). Reads at most one block per call."""
    local = storage.is_local(path)
    where: Location = Path(path) if local else storage.normalize(path)
    try:
        scan = _NEWLINES.get(_stat_key(where))
    except (OSError, storage.StorageError):
        return None
    if scan is None:
        return None
    cumulative = np.concatenate([[0], np.cumsum(scan.newlines)])

    def before(x: int) -> int:
        whole, rest = divmod(x, scan.block)
        n = int(cumulative[whole])
        if rest and local:
            with open(where, "rb") as fh:
                fh.seek(whole * scan.block)
                n += fh.read(rest).count(b"\n")
        elif rest:
            n += read_at(str(where), whole * scan.block, rest).count(b"\n")
        return n

    return before


def check_path(given: str) -> Location:
    """The absolute path (a remote input: its normalized URI), or InputError saying exactly what is wrong with it."""
    if not storage.is_local(given):
        return _check_remote(given)
    path = Path(_location(given))
    if not path.exists():
        raise InputError(f"{given}: no such file")
    if path.is_dir():
        raise InputError(f"{given}: is a directory; name the trace files themselves")
    if not path.is_file():
        raise InputError(f"{given}: not a regular file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{given}: permission denied (not readable)")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise InputError(f"{given}: cannot open: {exc.strerror}") from exc
    if path.stat().st_size == 0:
        raise _empty(given)
    return path


def _empty(given: str, after: str | None = None) -> InputError:
    return InputError(f"{given}: empty file" + (f" (after {after} decompression)" if after else ""))


def _check_remote(given: str) -> str:
    """A remote input's checks, as a local one's: there, an object (a prefix is a directory), not empty, and its
    first byte readable (a store may list what it does not let you read)."""
    try:
        location = storage.normalize(given)
        fs, path = _resolve(location)
        info = fs.get_file_info(path)
    except storage.StorageError as exc:
        raise InputError(str(exc)) from exc
    except OSError as exc:
        raise InputError(f"{given}: cannot open: {exc}") from exc
    if info.type == pafs.FileType.NotFound:
        raise InputError(f"{given}: no such file")
    if info.type == pafs.FileType.Directory:
        raise InputError(f"{given}: is a directory (a prefix); name the trace files themselves")
    if info.type != pafs.FileType.File:
        raise InputError(f"{given}: not a regular file")
    if not info.size:
        raise _empty(given)
    try:
        with fs.open_input_stream(path, compression=None) as fh:
            fh.read(1)
    except OSError as exc:
        raise InputError(f"{given}: cannot open: {exc}") from exc
    return location


def _suffix(location: Location) -> str:
    return PurePosixPath(storage.name(str(location))).suffix.lower()


def _staged_location(staging: Location, name: str) -> Location:
    """<staging>/<name>: a Path for a local staging directory (made here), a URI under a remote one."""
    if storage.is_local(staging):
        local_path(staging).mkdir(parents=True, exist_ok=True)
        return local_path(staging) / name
    return storage.join(storage.normalize(staging), name)


def remove_staged(location: Location) -> None:
    """Delete a staged copy (nothing when it is not there)."""
    if storage.is_local(location):
        Path(location).unlink(missing_ok=True)
    else:
        storage.delete(str(location))


@dataclass(frozen=True)
class ExpandedLimit:
    """How many bytes a compressed file may decompress to, and why (for the error)."""

    bytes: int
    why: str


def expanded_limit(compressed_bytes: int, given: int | None = None) -> ExpandedLimit:
    """The limit of one file's decompressed size: `given` (--max-expanded-bytes), else EXPANSION_RATIO times its
    compressed size and at least EXPANSION_FLOOR."""
    if given is not None:
        return ExpandedLimit(given, "--max-expanded-bytes")
    ratio = EXPANSION_RATIO * compressed_bytes
    if ratio >= EXPANSION_FLOOR:
        return ExpandedLimit(ratio, f"{EXPANSION_RATIO:,} x its {compressed_bytes:,} compressed bytes")
    return ExpandedLimit(EXPANSION_FLOOR, f"the least default, {EXPANSION_FLOOR >> 30} GiB")


def _too_big(given: str, compression: str, limit: ExpandedLimit) -> InputError:
    return InputError(f"{given}: {compression} data decompresses to more than {limit.bytes:,} bytes, the limit "
                      f"per file ({limit.why}); stopped there, nothing written. If the file is a real trace, raise "
                      "the limit with --max-expanded-bytes")


def _expand(given: str, source: Location, compression: str, limit: ExpandedLimit,
            sink: Callable[[bytes], object] | None, lines: _Lines | None, *, where: bool = True) -> int:
    """Decompress `source` chunk by chunk into `sink` (None: only count and measure): InputError when it is
    corrupt, empty or more than `limit` bytes (stopped there: a chunk past it is never handed on); `where`: the
    corruption's message says after how many bytes. The bytes."""
    written = 0
    try:
        with open_decompressed(source, compression) as src:
            while chunk := src.read(COPY_CHUNK):
                written += len(chunk)
                if written > limit.bytes:
                    raise _too_big(given, compression, limit)
                if lines is not None:
                    lines.feed(chunk)
                if sink is not None:
                    sink(chunk)
    except (OSError, EOFError) as exc:
        after = f" after {written} decompressed bytes" if where else ""
        raise InputError(f"{given}: corrupt {compression} data (cut short or damaged){after}: {exc}; "
                         "nothing written") from exc
    if written == 0:
        raise _empty(given, compression)
    return written


def _decompress(given: str, source: Location, compression: str, target: Location,
                limit: ExpandedLimit, lines: _Lines | None = None) -> None:
    """Write the decompressed content of `source` to `target` (InputError when it is corrupt, empty or bigger than
    `limit`; the caller removes the partial target)."""
    with _open_output(target) as dst:
        _expand(given, source, compression, limit, dst.write, lines)


def _spark_lines(data: bytes, after_cr: bool) -> int:
    """The line ends in `data` as Spark's (Hadoop's) text reader counts them: a newline, a carriage return, or both
    in that order as one; `after_cr`: the byte before `data` was a carriage return."""
    n = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    return n - 1 if after_cr and data[:1] == b"\n" else n


def _cut_long_lines(source: Location, compression: str | None, target: Location,
                    long: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Copy the (decompressed) content of `source` to `target`, each of the `long` lines ((first byte, length),
    in order) cut to its first LONG_LINE_KEPT bytes up to any carriage return (then one line for Spark's text
    reader too). Their (line number as that reader counts lines, length)."""
    marks = []
    lines = 0
    after_cr = False
    with open_decompressed(source, compression) as src, _open_output(target) as dst:
        def copy(n: int) -> None:
            nonlocal lines, after_cr
            while n > 0 and (chunk := src.read(min(n, COPY_CHUNK))):
                dst.write(chunk)
                lines += _spark_lines(chunk, after_cr)
                after_cr = chunk.endswith(b"\r")
                n -= len(chunk)

        at = 0
        for start, length in long:
            copy(start - at)
            kept = read_upto(src, min(length, LONG_LINE_KEPT)).split(b"\r", 1)[0]
            rest = length - min(length, LONG_LINE_KEPT)
            while rest > 0 and (chunk := src.read(min(rest, COPY_CHUNK))):
                rest -= len(chunk)
            dst.write(kept)
            after_cr = False
            marks.append((lines + 1, length))
            at = start + length
        copy(1 << 62)
    return tuple(marks)


def prepare_inputs(given: list[str], *, staging: Location, binary: bool,
                   check: Callable[[list[tuple[str, bytes, bool]]], None] | None = None, head_bytes: int = HEAD_BYTES,
                   max_expanded_bytes: int | None = None, defer_digests: bool = False) -> list[InputFile]:
    """Check every path and decide how it will be read.

    Text: Spark reads gzip/bzip2 itself when the extension names the codec (it picks codecs by
    extension); zstd (no native Hadoop codec in the pip install) and mislabelled compressed files
    are decompressed into `staging`. Binary formats are decoded by numpy, so any compressed
    binary input is staged. Inputs and the staging location may each be local or remote (libs.io.storage);
    a staged copy is removed again when a later input is refused.

    Bounds: `check` (the format check; it raises to refuse) sees every file's (given, first `head_bytes`
    decompressed bytes, whether it is compressed: decompressed here, staged or read through for its limit), in one
    call before anything is staged or decompressed (a file whose first bytes cannot be read is left out: its full
    read reports it). A compressed file is decompressed at most to its limit
    (expanded_limit: `max_expanded_bytes`, else the default per file); a text one Spark decompresses itself is
    decompressed once here too, to check that limit and its lines. A text file with lines over MAX_LINE_BYTES
    is read from a staged copy with those lines cut (InputFile.long_lines).

    `defer_digests`: an uncompressed local file no other given file matches in size (so none can hold the same
    content) is hashed on a background thread while the caller goes on (InputFile.sha256 waits for it); a text
    file's newlines are still counted here. The SHA-256 of a GB is ~0.6 s of one core, which then overlaps the
    ingest's tasks. A remote file is hashed here, in the read that counts its newlines (one transfer, not two).
    """
    if not given:
        raise InputError("no input files given")
    paths = [check_path(g) for g in given]
    seen: dict[object, str] = {}
    for g, p in zip(given, paths, strict=True):
        same = _identity(p)
        if same in seen:
            raise InputError(f"{g}: given twice (also as {seen[same]}); nothing written")
        seen[same] = g
    compressions = [_compression(p) for p in paths]
    if check is not None:
        heads = [(g, _head(p, c, head_bytes), c is not None)
                 for g, p, c in zip(given, paths, compressions, strict=True)]
        check([h for h in heads if h[1]])
    sizes = [file_size(p) for p in paths]
    alike = {size for size in sizes if sizes.count(size) > 1}
    contents: dict[str, str] = {}
    files: list[InputFile] = []
    staged: list[Location] = []
    try:
        for g, p, compression, size in zip(given, paths, compressions, sizes, strict=True):
            readable: Location = p
            native = _native(p, compression)
            lines = None if binary else _Lines()
            limit = expanded_limit(size, max_expanded_bytes)
            if compression and (binary or not native):
                readable = _staged_location(staging, f"{len(files):04d}_{storage.name(str(p))}.raw")
                staged.append(readable)
                _decompress(g, p, compression, readable, limit, lines)
            elif compression:
                _expand(g, p, compression, limit, None, lines, where=False)
            defer = defer_digests and not compression and storage.is_local(p) and size not in alike
            # A binary file needs no newlines: nothing to read now, unless its prefetched digest is on the way.
            scan = (None if defer and binary and _stat_key(p) not in _PREFETCHED
                    else _scanned(p, not binary, digest=not defer))
            digest: str | Future[str] = scan.sha256 if scan is not None and scan.sha256 else _background().submit(
                file_sha256, p)
            if isinstance(digest, str):
                if digest in contents:
                    raise InputError(f"{g}: the same content as {contents[digest]} (SHA-256 {digest[:16]}...): a "
                                     "trace's files are different recordings, a copy would count its records twice; "
                                     "nothing written")
                contents[digest] = g
            long = (lines.finish() if compression else list(scan.long_lines)) if lines is not None else []
            marks: tuple[tuple[int, int], ...] = ()
            if long:
                cut = _staged_location(staging, f"{len(files):04d}_{storage.name(str(p))}.lines")
                staged.append(cut)
                from_staged = readable != p
                marks = _cut_long_lines(readable, None if from_staged else compression, cut, long)
                if from_staged:
                    remove_staged(readable)
                    staged.remove(readable)
                readable = cut
            files.append(InputFile(g, p, size, digest, compression, readable, marks))
    except BaseException:
        for location in staged:
            with contextlib.suppress(OSError):
                remove_staged(location)
        raise
    return files


def _native(location: Location, compression: str | None) -> bool:
    """Whether Spark's text reader decompresses the file itself (its codec named by its extension)."""
    return compression in SPARK_NATIVE and _suffix(location) in SPARK_NATIVE[compression]


def _compression(location: Location) -> str | None:
    """The file's compression by its magic bytes."""
    if isinstance(location, Path):
        with open(location, "rb") as fh:
            return detect_compression(fh.read(4))
    return detect_compression(read_at(location, 0, 4))


def _head(location: Location, compression: str | None, n: int) -> bytes:
    """The first n decompressed bytes of a file (a bounded read); empty when they cannot be read (a file cut short
    or damaged is reported by its full read)."""
    try:
        with open_decompressed(location, compression) as src:
            return read_upto(src, n)
    except (OSError, EOFError):
        return b""


def _identity(location: Location) -> object:
    """What makes two inputs one file: a local file's device and inode (another spelling, a symbolic or a hard
    link is the same file), a remote one's URI (s3:// as s3a://)."""
    if isinstance(location, Path):
        st = location.stat()
        return st.st_dev, st.st_ino
    return f"s3a://{location.split('://', 1)[1]}" if storage.scheme(location) == "s3" else location


def read_head(f: InputFile, n: int = SNIFF_BYTES) -> bytes:
    """The first n decompressed bytes of the source file as it is (for format sniffing; a long line not cut)."""
    with open_decompressed(f.path, f.compression) as src:
        return read_upto(src, n)


def read_upto(src: BinaryIO, n: int) -> bytes:
    """n bytes of a stream, fewer only at its end (a stream's read may give fewer before it)."""
    data = src.read(n)
    if len(data) >= n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n and (more := src.read(n - got)):
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def text_problem(head: bytes) -> str | None:
    """Why `head` is not text (a NUL byte or invalid UTF-8, with its byte offset), else None."""
    nul = head.find(b"\x00")
    if nul >= 0:
        return f"byte {nul}: NUL byte, this is binary data"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the sniff boundary is not an error.
        if exc.start < len(head) - 4:
            return f"byte {exc.start}: invalid UTF-8 ({exc.reason}), this is binary data"
    return None
