"""Reader for HP SRT block I/O traces (HP Labs, 1992): ASCII header with disk geometry,
then big-endian binary I/O records; header parsing plus vectorised record decoding."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
from numba import njit

__all__ = [
    "HEADER_MAGIC",
    "RECORD_FIELDS",
    "SrtDisk",
    "SrtFormatError",
    "SrtHeader",
    "SrtSection",
    "decode_srt_records",
    "find_record_offsets",
    "parse_srt_header",
    "read_srt",
    "tracedate_to_iso",
]

logger = logging.getLogger(__name__)

HEADER_MAGIC = b"$$TR_IOREC"
FORM_FEED = 0x0C
#: Smallest legal record: word 0 (size) and word 1 (id).
MIN_RECORD_SIZE = 8

#: Keys of the dict returned by :func:`decode_srt_records`, in record order.
RECORD_FIELDS: tuple[str, ...] = (
    "record_size",
    "version",
    "record_type",
    "enqueue_s",
    "enqueue_us",
    "start_us",
    "stop_us",
    "size_bytes",
    "sector",
    "major",
    "disk",
    "section",
    "driver_type",
    "cylinder",
    "ioflags",
    "info",
    "queue_length",
)


class SrtFormatError(ValueError):
    """The input is not a well-formed HP SRT trace; the message names file, byte offset and expectation."""


@dataclass(frozen=True)
class SrtSection:
    """One section (partition) of a disk, from ``sections = { N -> { "name", size = (start bytes) } }``."""

    number: int
    name: str
    start_sector: int
    size_bytes: int


@dataclass(frozen=True)
class SrtDisk:
    """Geometry and layout of one traced disk, as described in the header."""

    number: int
    disktype: str
    sectors_per_track: int
    tracks_per_cylinder: int
    cylinders: int
    rpm: int
    overhead_us: int
    head_switch_us: int
    sector_skew: int
    seek_params: tuple[int, ...]
    sector_size: int
    block_size: int
    sections: tuple[SrtSection, ...]
    raw: dict[str, str]


@dataclass(frozen=True)
class SrtHeader:
    """The parsed ASCII header of an SRT trace."""

    version: str
    tracedate: str | None
    system: str | None
    fields: dict[str, str]
    disks: dict[int, SrtDisk]
    data_offset: int


# --------------------------------------------------------------------------------------------------
# Header: tokenizer + recursive-descent parser for the `key = value;` / brace syntax.
# --------------------------------------------------------------------------------------------------

_PUNCT = frozenset("{}(),;=")
_ATOM_STOP = frozenset('{}(),;="')
# Whitespace in the header text; NUL ends the banner line and is treated as blank space.
_BLANK = frozenset(" \t\r\n\v\x00")


@dataclass(frozen=True)
class _Tok:
    kind: str  # "atom", "string", "punct" ("{", "}", "(", ")", ",", ";", "=", "->") or "eof"
    text: str
    offset: int  # absolute byte offset in the file


@dataclass(frozen=True)
class _Scalar:
    text: str
    quoted: bool
    offset: int


@dataclass(frozen=True)
class _Arrow:
    key: _Value
    value: _Value
    offset: int


@dataclass(frozen=True)
class _Block:
    """``{ item, item, ... }``; each item is ``(key, value)`` with key None for a bare value."""

    items: tuple[tuple[str | None, _Value], ...]
    offset: int


@dataclass(frozen=True)
class _Tuple:
    """``( v v ... )``: blank-separated values (commas are tolerated)."""

    items: tuple[_Value, ...]
    offset: int


_Value = _Scalar | _Arrow | _Block | _Tuple


def _describe(value: _Value) -> str:
    if isinstance(value, _Scalar):
        return repr(value.text)
    if isinstance(value, _Arrow):
        return "a 'key -> value' mapping"
    if isinstance(value, _Block):
        return "a '{...}' block"
    return "a '(...)' tuple"


def _err(source: str, offset: int, what: str) -> SrtFormatError:
    return SrtFormatError(f"{source}: byte {offset}: {what}")


def _tokenize(text: str, base: int, source: str) -> list[_Tok]:
    """Split header text (latin-1 decoded, so one char = one byte) into tokens with absolute offsets."""
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _BLANK:
            i += 1
        elif c == "-" and i + 1 < n and text[i + 1] == ">":
            toks.append(_Tok("punct", "->", base + i))
            i += 2
        elif c in _PUNCT:
            toks.append(_Tok("punct", c, base + i))
            i += 1
        elif c == '"':
            start = i
            i += 1
            chars: list[str] = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                chars.append(text[i])
                i += 1
            if i >= n:
                raise _err(source, base + start, "unterminated string literal (expected closing '\"')")
            toks.append(_Tok("string", "".join(chars), base + start))
            i += 1
        else:
            start = i
            while i < n:
                c = text[i]
                if c in _BLANK or c in _ATOM_STOP or (c == "-" and i + 1 < n and text[i + 1] == ">"):
                    break
                i += 1
            toks.append(_Tok("atom", text[start:i], base + start))
    toks.append(_Tok("eof", "", base + n))
    return toks


class _Parser:
    """Recursive-descent parser for the header's statements (grammar below)."""

    # header    := statement*
    # statement := ATOM '=' value ';'
    # value     := primary ('->' value)?
    # primary   := STRING | ATOM | '{' [item (',' item)* [',']] '}' | '(' (value [','])* ')'
    # item      := ATOM '=' value | value

    def __init__(self, toks: list[_Tok], source: str) -> None:
        self.toks = toks
        self.pos = 0
        self.source = source

    def peek(self, ahead: int = 0) -> _Tok:
        return self.toks[min(self.pos + ahead, len(self.toks) - 1)]

    def next(self) -> _Tok:
        tok = self.peek()
        self.pos = min(self.pos + 1, len(self.toks) - 1)
        return tok

    def expect(self, text: str) -> _Tok:
        tok = self.next()
        if tok.kind != "punct" or tok.text != text:
            raise _err(self.source, tok.offset, f"expected '{text}', found {_show(tok)}")
        return tok

    def statements(self) -> list[tuple[str, _Value, int]]:
        out: list[tuple[str, _Value, int]] = []
        while self.peek().kind != "eof":
            key = self.next()
            if key.kind != "atom":
                raise _err(self.source, key.offset, f"expected 'key = value;', found {_show(key)}")
            self.expect("=")
            value = self.value()
            self.expect(";")
            out.append((key.text, value, key.offset))
        return out

    def value(self) -> _Value:
        first = self.primary()
        if self.peek().kind == "punct" and self.peek().text == "->":
            self.next()
            return _Arrow(first, self.value(), first.offset)
        return first

    def primary(self) -> _Value:
        tok = self.next()
        if tok.kind in ("atom", "string"):
            return _Scalar(tok.text, tok.kind == "string", tok.offset)
        if tok.kind == "punct" and tok.text == "{":
            return self.block(tok)
        if tok.kind == "punct" and tok.text == "(":
            return self.tuple_(tok)
        raise _err(self.source, tok.offset, f"expected a value, found {_show(tok)}")

    def block(self, open_tok: _Tok) -> _Block:
        items: list[tuple[str | None, _Value]] = []
        while True:
            tok = self.peek()
            if tok.kind == "punct" and tok.text == "}":
                self.next()
                return _Block(tuple(items), open_tok.offset)
            if tok.kind == "eof":
                what = f"expected '}}' closing the block opened at byte {open_tok.offset}"
                raise _err(self.source, tok.offset, what)
            if tok.kind == "atom" and self.peek(1).kind == "punct" and self.peek(1).text == "=":
                self.pos += 2
                items.append((tok.text, self.value()))
            else:
                items.append((None, self.value()))
            sep = self.peek()
            if sep.kind == "punct" and sep.text == ",":
                self.next()
            elif not (sep.kind == "punct" and sep.text == "}"):
                raise _err(self.source, sep.offset, f"expected ',' or '}}' in block, found {_show(sep)}")

    def tuple_(self, open_tok: _Tok) -> _Tuple:
        items: list[_Value] = []
        while True:
            tok = self.peek()
            if tok.kind == "punct" and tok.text == ")":
                self.next()
                return _Tuple(tuple(items), open_tok.offset)
            if tok.kind == "eof":
                what = f"expected ')' closing the tuple opened at byte {open_tok.offset}"
                raise _err(self.source, tok.offset, what)
            if tok.kind == "punct" and tok.text == ",":
                self.next()
                continue
            items.append(self.value())


def _show(tok: _Tok) -> str:
    if tok.kind == "eof":
        return "end of header"
    if tok.kind == "string":
        return repr('"' + tok.text[:30] + '"')
    return repr(tok.text[:30])


def _short_repr(data: bytes, limit: int = 16) -> str:
    return repr(bytes(data[:limit]))


def _int(value: _Value, what: str, source: str) -> int:
    if not isinstance(value, _Scalar):
        raise _err(source, value.offset, f"expected an integer for {what}, found {_describe(value)}")
    try:
        return int(value.text, 10)
    except ValueError:
        raise _err(source, value.offset, f"expected an integer for {what}, found {value.text!r}") from None


def _render(value: _Value) -> str:
    """Text form of a value (used for `raw`): scalars verbatim, structures re-serialised compactly."""
    if isinstance(value, _Scalar):
        return value.text
    if isinstance(value, _Arrow):
        return f"{_render(value.key)} -> {_render(value.value)}"
    if isinstance(value, _Tuple):
        return "(" + " ".join(_render(v) for v in value.items) + ")"
    parts = [(f"{k} = {_render(v)}" if k is not None else _render(v)) for k, v in value.items]
    return "{" + ", ".join(parts) + "}"


def _parse_section(entry: _Value, source: str) -> SrtSection:
    if not isinstance(entry, _Arrow) or not isinstance(entry.value, _Block):
        raise _err(source, entry.offset, f"expected 'N -> {{ ... }}' section entry, found {_describe(entry)}")
    number = _int(entry.key, "section number", source)
    name = ""
    size: _Value | None = None
    for key, value in entry.value.items:
        if key is None and isinstance(value, _Scalar) and not name:
            name = value.text
        elif key == "size":
            size = value
    if size is None:
        raise _err(source, entry.value.offset, f"expected 'size = (start bytes)' in section {number}")
    if not isinstance(size, _Tuple) or len(size.items) != 2:
        raise _err(source, size.offset, f"expected 'size = (start_sector size_bytes)' in section {number}")
    start = _int(size.items[0], f"section {number} start sector", source)
    nbytes = _int(size.items[1], f"section {number} size in bytes", source)
    return SrtSection(number=number, name=name, start_sector=start, size_bytes=nbytes)


_DISK_INT_KEYS: dict[str, str] = {
    "nspt": "sectors_per_track",
    "ntpc": "tracks_per_cylinder",
    "ncyl": "cylinders",
    "rpm": "rpm",
    "overhead": "overhead_us",
    "headswitch": "head_switch_us",
    "sectorskew": "sector_skew",
    "sectorsize": "sector_size",
    "blocksize": "block_size",
}


def _parse_disk(entry: _Value, source: str) -> SrtDisk:
    if not isinstance(entry, _Arrow) or not isinstance(entry.value, _Block):
        raise _err(source, entry.offset, f"expected 'N -> {{ ... }}' disk entry, found {_describe(entry)}")
    number = _int(entry.key, "disk number", source)
    body = entry.value
    keyed: dict[str, _Value] = {}
    for key, value in body.items:
        if key is not None:
            keyed.setdefault(key, value)
    raw = {k: v.text for k, v in keyed.items() if isinstance(v, _Scalar)}

    ints: dict[str, int] = {}
    for key, attr in _DISK_INT_KEYS.items():
        if key not in keyed:
            raise _err(source, body.offset, f"expected key '{key}' in the block of disk {number}")
        ints[attr] = _int(keyed[key], f"disk {number} '{key}'", source)

    disktype = keyed.get("disktype")
    if not isinstance(disktype, _Scalar):
        raise _err(source, body.offset, f"expected scalar key 'disktype' in the block of disk {number}")

    seek = keyed.get("seekparms")
    if seek is None:
        seek_params: tuple[int, ...] = ()
    elif isinstance(seek, _Block) and all(k is None for k, _ in seek.items):
        seek_params = tuple(_int(v, f"disk {number} seekparms", source) for _, v in seek.items)
    else:
        raise _err(source, seek.offset, f"expected 'seekparms = {{a, b, ...}}' for disk {number}")

    sections: list[SrtSection] = []
    sec_block = keyed.get("sections")
    if sec_block is not None:
        if not isinstance(sec_block, _Block):
            raise _err(source, sec_block.offset, f"expected 'sections = {{ ... }}' for disk {number}")
        for key, value in sec_block.items:
            if key is not None:
                what = f"expected 'N -> {{ ... }}' section entry, found key {key!r}"
                raise _err(source, value.offset, what)
            sections.append(_parse_section(value, source))

    return SrtDisk(
        number=number,
        disktype=disktype.text,
        seek_params=seek_params,
        sections=tuple(sections),
        raw=raw,
        **ints,
    )


def parse_srt_header(data: bytes, *, source: str = "<bytes>") -> SrtHeader:
    """Parse the ASCII header at the start of ``data`` (at least the header; callers pass the first MiB).

    ``data_offset`` in the result is the offset of the first binary record (end-of-header form feed + 1).
    """
    data = bytes(data)
    if not data.startswith(HEADER_MAGIC):
        raise _err(source, 0, f"expected {HEADER_MAGIC.decode()!r} header, found {_short_repr(data)}")
    ff = data.find(bytes([FORM_FEED]))
    if ff < 0:
        raise _err(source, len(data), f"no end-of-header form feed (0x0C) in the first {len(data)} bytes")

    # Banner line: "$$TR_IOREC-1.3 (IOAdaptor Upgrade Version)\0\n".
    ends = [i for i in (data.find(b"\x00", 0, ff), data.find(b"\n", 0, ff)) if i >= 0]
    banner_end = min(ends) if ends else ff
    banner = data[:banner_end].decode("latin-1").strip()

    text = data[banner_end:ff].decode("latin-1")
    statements = _Parser(_tokenize(text, banner_end, source), source).statements()

    fields: dict[str, str] = {}
    disks: dict[int, SrtDisk] = {}
    for key, value, offset in statements:
        if key == "disks":
            if not isinstance(value, _Block):
                raise _err(source, value.offset, f"expected 'disks = {{ ... }}', found {_describe(value)}")
            for item_key, entry in value.items:
                if item_key is not None:
                    raise _err(
                        source, entry.offset, f"expected 'N -> {{ ... }}' disk entry, found key {item_key!r}"
                    )
                disk = _parse_disk(entry, source)
                if disk.number in disks:
                    raise _err(source, entry.offset, f"expected a unique disk number, {disk.number} repeats")
                disks[disk.number] = disk
        elif isinstance(value, _Scalar):
            fields[key] = value.text
        else:
            logger.debug("%s: byte %d: skipping non-scalar header key %r", source, offset, key)

    version = fields.get("version")
    if version is None:
        rest = banner[len(HEADER_MAGIC) :].lstrip("-")
        version = rest.split()[0] if rest.split() else ""
    header = SrtHeader(
        version=version,
        tracedate=fields.get("tracedate"),
        system=fields.get("system"),
        fields=fields,
        disks=disks,
        data_offset=ff + 1,
    )
    logger.debug(
        "%s: SRT header version %s, %d disk(s), records at byte %d",
        source,
        header.version,
        len(disks),
        header.data_offset,
    )
    return header


def tracedate_to_iso(tracedate: str) -> str:
    """``"Sat May 30 00:03:06 1992"`` -> ``"1992-05-30T00:03:06"`` (the trace's local time, no zone)."""
    return datetime.strptime(" ".join(tracedate.split()), "%a %b %d %H:%M:%S %Y").isoformat()


# --------------------------------------------------------------------------------------------------
# Binary records.
# --------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _walk_records(body: np.ndarray) -> tuple[np.ndarray, int]:  # pragma: no cover - compiled by numba
    n = body.shape[0]
    out = np.empty(n // MIN_RECORD_SIZE + 1, dtype=np.int64)
    count = 0
    pos = 0
    while pos + 4 <= n:
        size = int(
            (np.int64(body[pos]) << 24)
            | (np.int64(body[pos + 1]) << 16)
            | (np.int64(body[pos + 2]) << 8)
            | np.int64(body[pos + 3])
        )
        if size < MIN_RECORD_SIZE or size % 4 != 0 or pos + size > n:
            break
        out[count] = pos
        count += 1
        pos += size
    return out[:count].copy(), pos


def _be_u32_at(body: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Big-endian uint32 at each byte index (every index must have 4 bytes available) as int64."""
    words: np.ndarray = (
        (body[idx].astype(np.int64) << 24)
        | (body[idx + 1].astype(np.int64) << 16)
        | (body[idx + 2].astype(np.int64) << 8)
        | body[idx + 3].astype(np.int64)
    )
    return words


def find_record_offsets(body: np.ndarray) -> tuple[np.ndarray, int]:
    """Offsets of the complete records in ``body`` (the bytes after the header) and where the walk stopped.

    The walk stops at a size word that is < 8 or not a multiple of 4 (corrupt), at a record that does
    not fit in the remaining bytes (truncated), or when fewer than 4 bytes remain; ``stop < len(body)``
    then means the caller has ``len(body) - stop`` unreadable bytes to report.
    """
    body = np.ascontiguousarray(body, dtype=np.uint8)
    n = int(body.shape[0])
    if n < 4:
        return np.empty(0, dtype=np.int64), 0
    first = int(_be_u32_at(body, np.zeros(1, dtype=np.int64))[0])
    if first >= MIN_RECORD_SIZE and first % 4 == 0 and first <= n:
        # Fast path: fixed-size records (the common case). Size words are checked at every multiple of
        # the first size; the (shorter than one record) tail is still walked, so the result is the walk's.
        count = n // first
        starts = np.arange(count, dtype=np.int64) * first
        if np.all(_be_u32_at(body, starts) == first):
            done = count * first
            if n - done < MIN_RECORD_SIZE:
                return starts, done
            tail, tail_stop = _walk_records(body[done:])
            return np.concatenate([starts, tail + done]), done + int(tail_stop)
    offsets, stop = _walk_records(body)
    return offsets, int(stop)


def decode_srt_records(body: np.ndarray, offsets: np.ndarray) -> dict[str, np.ndarray]:
    """Decode the records starting at ``offsets`` in ``body`` into int64 columns (see ``RECORD_FIELDS``).

    Words are read as unsigned big-endian 32-bit values. A word that lies beyond the record's size
    (or the end of ``body``) decodes as -1; ``queue_length`` is also -1 for record versions below 4.
    """
    body = np.ascontiguousarray(body, dtype=np.uint8)
    offsets = np.asarray(offsets, dtype=np.int64)
    n = int(body.shape[0])
    if offsets.size and (int(offsets.min()) < 0 or int(offsets.max()) + 4 > n):
        bad = offsets[(offsets < 0) | (offsets + 4 > n)][0]
        raise ValueError(f"record offset {int(bad)} outside the {n}-byte body")

    nwords = 14
    aligned = bool(np.all(offsets % 4 == 0))
    if aligned:
        words_view = body[: n - n % 4].view(">u4")
        base = offsets // 4
    # Bytes of each record that can be read: its size word, capped at the end of the body.
    avail = np.minimum(_be_u32_at(body, offsets), n - offsets)
    words: list[np.ndarray] = []
    for w in range(nwords):
        valid = avail >= 4 * (w + 1)
        if aligned:
            idx = np.where(valid, base + w, base)
            vals = words_view[idx].astype(np.int64)
        else:
            idx = np.where(valid, offsets + 4 * w, offsets)
            vals = _be_u32_at(body, idx)
        words.append(np.where(valid, vals, np.int64(-1)))

    def hi16(x: np.ndarray) -> np.ndarray:
        return np.where(x >= 0, x >> 16, -1)

    def bits(x: np.ndarray, shift: int) -> np.ndarray:
        return np.where(x >= 0, (x >> shift) & 0xFF, -1)

    version = hi16(words[1])
    out: dict[str, np.ndarray] = {
        "record_size": words[0],
        "version": version,
        "record_type": np.where(words[1] >= 0, words[1] & 0xFFFF, -1),
        "enqueue_s": words[2],
        "enqueue_us": words[3],
        "start_us": words[4],
        "stop_us": words[5],
        "size_bytes": words[6],
        "sector": words[7],
        "major": bits(words[8], 24),
        "disk": bits(words[8], 8),
        "section": bits(words[8], 0),
        "driver_type": words[9],
        "cylinder": words[10],
        "ioflags": words[11],
        "info": words[12],
        "queue_length": np.where(version >= 4, words[13], np.int64(-1)),
    }
    return {k: np.ascontiguousarray(out[k], dtype=np.int64) for k in RECORD_FIELDS}


def read_srt(path: str) -> tuple[SrtHeader, dict[str, np.ndarray], np.ndarray, int]:
    """Read a whole SRT file: (header, decoded columns, record offsets relative to the body, stop offset).

    Offsets and ``stop`` are relative to ``header.data_offset``. Intended for tests and small inputs.
    """
    raw = Path(path).read_bytes()
    header = parse_srt_header(raw[: 1 << 20], source=str(path))
    body = np.frombuffer(raw, dtype=np.uint8, offset=header.data_offset)
    offsets, stop = find_record_offsets(body)
    if stop < body.shape[0]:
        logger.warning(
            "%s: byte %d: record walk stopped, %d trailing byte(s) not decoded",
            path,
            header.data_offset + stop,
            body.shape[0] - stop,
        )
    columns = decode_srt_records(body, offsets)
    logger.info("%s: %d SRT records on %d disk(s)", path, offsets.shape[0], len(header.disks))
    return header, columns, offsets, stop
