"""Extent heat's per-device counts in one compiled pass: the per-device form of libs.transforms.heat (whose
Spark SQL is the definition), run by libs.table_io.heat.

Each request is read once and its pieces added straight into small dense grids:

- extents: (touched extent, window) cells of requests, reads, blocks, bytes; extents are numbered in the order
  of their ids among those the device touches, so a 16 TB volume with a day of scattered requests costs touched
  extents x windows cells, not its whole extent range; a pass counts the windows [w_first, w_first + w_count),
  so a device whose grid would be too large is counted in several passes of a window range each; requests in time
  order (as the `requests` files hold a device's) are counted one window's cells at a time instead
  (ordered_device_cells: touched extents' cells, emitted when the window ends);
- per window: requests and blocks as traced, per random disk (Spark's xxhash64 of (seed, device, seq), the
  seed and the device hashed once by device_state, each seq's 8 bytes by _disk), and per stripe-unit number
  modulo the stripe width.

Spark's xxhash64 (org.apache.spark.sql.catalyst.expressions.XxHash64: XXH64 of each value in turn, 64-bit words)
is reproduced here bit for bit, on unsigned 64-bit integers that wrap as XXH64's arithmetic does.
"""
from __future__ import annotations

import numpy as np
from numba import njit, uint64

from blockheat.libs.transforms.int_kernels import div, mask_of, pmod, shift_of

# XXH64's primes.
_P1, _P2, _P3 = np.uint64(0x9E3779B185EBCA87), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9)
_P4, _P5 = np.uint64(0x85EBCA77C2B2AE63), np.uint64(0x27D4EB2F165667C5)
SPARK_HASH_SEED = 42                       # Spark's xxhash64 starts from this seed
BLOCK_BYTES = 512                          # heat's unit: 512-byte blocks touched (partial ones count)


@njit(cache=True, nogil=True)
def extent_range(ts: np.ndarray, offset: np.ndarray, size: np.ndarray, extent_bytes: int
                 ) -> tuple[int, int, int, int, int, bool, int]:  # pragma: no cover
    """(lowest ts, highest ts, lowest extent id, highest extent id, extent pieces, whether ts never decreases, the
    highest request end) of the device's requests (the extent ids lowest > highest when no request has a piece).
    At least one request."""
    t_lo = t_hi = ts[0]
    e_lo, e_hi = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    e_shift = shift_of(extent_bytes)
    pieces = 0
    ordered = True
    end = offset[0] + size[0]
    for i in range(ts.shape[0]):
        t = ts[i]
        ordered &= t >= t_hi
        t_lo = min(t_lo, t)
        t_hi = max(t_hi, t)
        hi = offset[i] + size[i]
        end = max(end, hi)
        a = div(offset[i], extent_bytes, e_shift)
        b = div(hi - 1, extent_bytes, e_shift)
        if a <= b:
            e_lo = min(e_lo, a)
            e_hi = max(e_hi, b)
            pieces += b - a + 1
    return t_lo, t_hi, e_lo, e_hi, pieces, ordered, end


@njit(cache=True, nogil=True)
def touched_extents(offset: np.ndarray, size: np.ndarray, extent_bytes: int, e_lo: int, e_span: int
                    ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """(each extent id's number among the touched ones, -1 if untouched, indexed by id - e_lo; the touched ids
    ascending): a mark per extent id of the device's range."""
    mark = np.zeros(e_span, np.uint8)
    e_shift = shift_of(extent_bytes)
    for i in range(offset.shape[0]):
        for e in range(div(offset[i], extent_bytes, e_shift), div(offset[i] + size[i] - 1, extent_bytes, e_shift) + 1):
            mark[e - e_lo] = 1
    number = np.full(e_span, -1, np.int32)
    touched = 0
    for k in range(e_span):
        if mark[k]:
            number[k] = touched
            touched += 1
    ids = np.empty(touched, np.int64)
    for k in range(e_span):
        if number[k] >= 0:
            ids[number[k]] = k + e_lo
    return number, ids


@njit(cache=True, nogil=True)
def touched_extent_ids(offset: np.ndarray, size: np.ndarray, extent_bytes: int) -> np.ndarray:  # pragma: no cover
    """The touched extent ids ascending, for a range too wide for touched_extents' marks (device_grids then
    numbers a piece's extent by binary search)."""
    pieces = 0
    for i in range(offset.shape[0]):
        pieces += max(0, (offset[i] + size[i] - 1) // extent_bytes - offset[i] // extent_bytes + 1)
    every = np.empty(pieces, np.int64)
    k = 0
    for i in range(offset.shape[0]):
        for e in range(offset[i] // extent_bytes, (offset[i] + size[i] - 1) // extent_bytes + 1):
            every[k] = e
            k += 1
    return np.unique(every)


@njit(cache=True, nogil=True, inline="always")
def _blocks(a: int, b: int) -> int:  # pragma: no cover
    """512-byte blocks that bytes [a, b) touch (partial blocks count)."""
    return (b + BLOCK_BYTES - 1) // BLOCK_BYTES - a // BLOCK_BYTES


@njit(cache=True, nogil=True, inline="always")
def _rotl(x: uint64, r: int) -> uint64:  # pragma: no cover
    return (x << uint64(r)) | (x >> uint64(64 - r))


@njit(cache=True, nogil=True, inline="always")
def _fmix(h: uint64) -> uint64:  # pragma: no cover
    h ^= h >> uint64(33)
    h *= _P2
    h ^= h >> uint64(29)
    h *= _P3
    return h ^ (h >> uint64(32))


@njit(cache=True, nogil=True, inline="always")
def _round(acc: uint64, lane: uint64) -> uint64:  # pragma: no cover
    return _rotl(acc + lane * _P2, 31) * _P1


@njit(cache=True, nogil=True, inline="always")
def _word(data: np.ndarray, at: int, width: int) -> uint64:  # pragma: no cover
    """`width` bytes of data from `at`, little-endian."""
    v = uint64(0)
    for k in range(width):
        v |= uint64(data[at + k]) << uint64(8 * k)
    return v


@njit(cache=True, nogil=True)
def _hash_bytes(data: np.ndarray, seed: uint64) -> uint64:  # pragma: no cover
    """XXH64.hashUnsafeBytes: a string's UTF-8 bytes (the reference XXH64)."""
    n, at = data.shape[0], 0
    if n >= 32:
        v1, v2, v3, v4 = seed + _P1 + _P2, seed + _P2, seed, seed - _P1
        while at + 32 <= n:
            v1 = _round(v1, _word(data, at, 8))
            v2 = _round(v2, _word(data, at + 8, 8))
            v3 = _round(v3, _word(data, at + 16, 8))
            v4 = _round(v4, _word(data, at + 24, 8))
            at += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        for x in (v1, v2, v3, v4):
            h = (h ^ _round(uint64(0), x)) * _P1 + _P4
    else:
        h = seed + _P5
    h += uint64(n)
    while at + 8 <= n:
        h ^= _round(uint64(0), _word(data, at, 8))
        h = _rotl(h, 27) * _P1 + _P4
        at += 8
    if at + 4 <= n:
        h ^= _word(data, at, 4) * _P1
        h = _rotl(h, 23) * _P2 + _P3
        at += 4
    while at < n:
        h ^= uint64(data[at]) * _P5
        h = _rotl(h, 11) * _P1
        at += 1
    return _fmix(h)


@njit(cache=True, nogil=True)
def _seeded_state(seed: int, data: np.ndarray) -> uint64:  # pragma: no cover
    """XXH64's state before each seq's 8 bytes: the seed literal hashed from SPARK_HASH_SEED as an int
    (XXH64.hashInt) or, beyond 32 bits, a long (hashLong, as py4j passes it), then the device's bytes, plus
    P5 + 8 (hashLong's start)."""
    start = uint64(SPARK_HASH_SEED)
    if -(1 << 31) <= seed < (1 << 31):
        h = start + _P5 + uint64(4)
        h ^= (uint64(seed) & uint64(0xFFFFFFFF)) * _P1
        h = _fmix(_rotl(h, 23) * _P2 + _P3)
    else:
        h = start + _P5 + uint64(8)
        h ^= _rotl(uint64(seed) * _P2, 31) * _P1
        h = _fmix(_rotl(h, 27) * _P1 + _P4)
    return _hash_bytes(data, h) + _P5 + uint64(8)


def device_state(seed: int, device: str) -> np.uint64:
    """The random layout's hash state of one device (its seed and name hashed once), for _disk and disks_of."""
    return np.uint64(_seeded_state(seed, np.frombuffer(device.encode(), np.uint8)))


@njit(cache=True, nogil=True)
def _disk(state: uint64, seq: int, disks: int) -> int:  # pragma: no cover
    """pmod(XXH64 of seq's 8 bytes continuing from `state` (device_state), disks): Spark's pmod of the signed
    hash."""
    acc = state ^ _round(uint64(0), uint64(seq))
    acc = _fmix(_rotl(acc, 27) * _P1 + _P4)
    return pmod(np.int64(acc), disks, mask_of(disks))


@njit(cache=True, nogil=True)
def disks_of(state: uint64, seq: np.ndarray, disks: int) -> np.ndarray:  # pragma: no cover
    """_disk of every seq: pmod(xxhash64(seed, device, seq), disks) as Spark computes it."""
    out = np.empty(seq.shape[0], np.int64)
    for i in range(seq.shape[0]):
        out[i] = _disk(state, seq[i], disks)
    return out


@njit(cache=True, nogil=True, inline="always")
def _add_spread(rand: np.ndarray, striped: np.ndarray, w: int, lo: int, hi: int, whole: int, seq: int, state: uint64,
                unit_bytes: int, u_shift: int, width: int, w_mask: int, disks: int) -> None:  # pragma: no cover
    """Adds the request [lo, hi) (`whole`: its blocks) of sequence number seq in window w to the random and striped
    grids (device_grids')."""
    c = w * disks + _disk(state, seq, disks)
    rand[0, c] += 1
    rand[1, c] += whole
    u0, u1 = div(lo, unit_bytes, u_shift), div(hi - 1, unit_bytes, u_shift)
    if u0 == u1:                                  # within one stripe unit (most requests): one piece, the request
        c = w * width + pmod(u0, width, w_mask)
        striped[0, c] += 1
        striped[1, c] += whole
    else:
        for u in range(u0, u1 + 1):
            a = max(lo, u * unit_bytes)
            b = min(hi, (u + 1) * unit_bytes)
            c = w * width + pmod(u, width, w_mask)
            striped[0, c] += 1
            striped[1, c] += _blocks(a, b)


@njit(cache=True, nogil=True)
def device_grids(ts: np.ndarray, seq: np.ndarray, offset: np.ndarray, size: np.ndarray, read: np.ndarray,
                 extent_bytes: int, number: np.ndarray, ids: np.ndarray, e_lo: int, window_us: int, w_lo: int,
                 w_span: int, w_first: int, w_count: int, layouts: bool, unit_bytes: int, width: int, disks: int,
                 state: uint64) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """One pass over a device's requests. window_us 0: one window; else window k is ts // window_us = w_lo + k.
    Extents are numbered by `number` (touched_extents, indexed by id - e_lo), or by binary search in `ids` when
    `number` is empty. Returns the grids (rows: requests, then sums):
    extents (w_count, len(ids), 4): requests, reads, blocks, bytes of each window - w_first and touched number, for
    the windows [w_first, w_first + w_count) only (window-major, the four counts side by side: one cache line a
    piece; requests in time order take ordered_device_cells instead);
    with `layouts` (else empty grids): traced (2, w_span): requests, blocks; random (2, w_span * disks): requests,
    blocks at window * disks + disk; striped (2, w_span * width): pieces, blocks at window * width + unit % width."""
    touched = ids.shape[0]
    dense = number.shape[0] > 0
    ext = np.zeros((w_count, touched, 4), np.int64)
    spans = w_span if layouts else 0
    traced = np.zeros((2, spans), np.int64)
    rand = np.zeros((2, spans * disks), np.int64)
    striped = np.zeros((2, spans * width), np.int64)
    # Power-of-two extents, units and moduli (the usual sizes) by shifts and masks instead of 64-bit divisions, and
    # the window of a request in the previous one's window without one: the same numbers, a third of the time.
    e_shift, u_shift = shift_of(extent_bytes), shift_of(unit_bytes)
    w_mask = mask_of(width)
    win, win_start, win_end = 0, 1, 0           # an empty window [1, 0): the first request computes its own
    for i in range(ts.shape[0]):
        if window_us:
            t = ts[i]
            if t < win_start or t >= win_end:
                win = t // window_us
                win_start = win * window_us
                win_end = win_start + window_us
            w = win - w_lo
        else:
            w = 0
        lo = offset[i]
        hi = lo + size[i]
        r = read[i]
        k = w - w_first
        if 0 <= k < w_count:
            for e in range(div(lo, extent_bytes, e_shift), div(hi - 1, extent_bytes, e_shift) + 1):
                a = max(lo, e * extent_bytes)
                b = min(hi, (e + 1) * extent_bytes)
                n = number[e - e_lo] if dense else np.searchsorted(ids, e)
                ext[k, n, 0] += 1
                ext[k, n, 1] += r
                ext[k, n, 2] += _blocks(a, b)
                ext[k, n, 3] += b - a
        if layouts:
            whole = _blocks(lo, hi)
            traced[0, w] += 1
            traced[1, w] += whole
            _add_spread(rand, striped, w, lo, hi, whole, seq[i], state, unit_bytes, u_shift, width, w_mask, disks)
    return ext, traced, rand, striped


@njit(cache=True, nogil=True)
def window_cells(ext: np.ndarray, ids: np.ndarray, w_first: int, window_us: int) -> np.ndarray:  # pragma: no cover
    """The cells of device_grids' extent grid (w_count, touched, 4) with requests, as ordered_device_cells gives
    them: (6, cells) of window start, extent id, requests, reads, blocks, bytes in (window, extent id) order;
    w_first: the absolute window number of the grid's first (w_lo + the pass's first)."""
    w_count, touched = ext.shape[0], ext.shape[1]
    m = 0
    for j in range(w_count):
        for n in range(touched):
            m += ext[j, n, 0] != 0
    out = np.empty((6, m), np.int64)
    at = 0
    for j in range(w_count):
        for n in range(touched):
            if ext[j, n, 0]:
                out[0, at] = (w_first + j) * window_us
                out[1, at] = ids[n]
                for x in range(4):
                    out[2 + x, at] = ext[j, n, x]
                at += 1
    return out


@njit(cache=True, nogil=True)
def _flush(acc: np.ndarray, whole: np.ndarray, seen: np.ndarray, m_seen: int, start: int, ids: np.ndarray,
           out: np.ndarray, m: int) -> int:  # pragma: no cover
    """Appends the cells of one window (acc's rows `seen[:m_seen]`, in the order they were first touched) to out's
    columns from row m, adds them to whole and clears them; returns the rows out then holds."""
    for k in range(m_seen):
        n = seen[k]
        out[0, m] = start
        out[1, m] = ids[n]
        for x in range(4):
            out[2 + x, m] = acc[n, x]
            whole[n, x] += acc[n, x]
            acc[n, x] = 0
        m += 1
    return m


@njit(cache=True, nogil=True)
def ordered_device_cells(ts: np.ndarray, seq: np.ndarray, offset: np.ndarray, size: np.ndarray, read: np.ndarray,
                         extent_bytes: int, number: np.ndarray, ids: np.ndarray, e_lo: int, window_us: int,
                         w_lo: int, w_span: int, unit_bytes: int, width: int, disks: int, state: uint64, pieces: int
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """device_grids of every window in one pass over requests whose ts never decreases, one window's cells held at a
    time (a device's memory follows its touched extents, not extents x windows). Returns (cells (6, m): window
    start, extent id, requests, reads, blocks, bytes of each (window, extent) with requests, in window order and
    within a window in the order of the extents' first requests there; whole (len(ids), 4): each touched extent's
    counts over all windows; and the traced, random and striped grids as device_grids'). `pieces`: the requests'
    extent pieces (extent_range's), a bound on the cells."""
    touched = ids.shape[0]
    dense = number.shape[0] > 0
    acc = np.zeros((touched, 4), np.int64)
    whole = np.zeros((touched, 4), np.int64)
    seen = np.empty(touched, np.int64)
    out = np.empty((6, min(pieces, touched * w_span)), np.int64)
    traced = np.zeros((2, w_span), np.int64)
    rand = np.zeros((2, w_span * disks), np.int64)
    striped = np.zeros((2, w_span * width), np.int64)
    e_shift, u_shift = shift_of(extent_bytes), shift_of(unit_bytes)
    w_mask = mask_of(width)
    m = m_seen = n_req = n_blk = 0
    win, win_start, win_end = w_lo, w_lo * window_us, (w_lo + 1) * window_us if window_us else np.iinfo(np.int64).max
    for i in range(ts.shape[0]):
        t = ts[i]
        if t >= win_end:
            m = _flush(acc, whole, seen, m_seen, win_start, ids, out, m)
            m_seen = 0
            traced[0, win - w_lo] += n_req
            traced[1, win - w_lo] += n_blk
            n_req = n_blk = 0
            win = t // window_us
            win_start = win * window_us
            win_end = win_start + window_us
        w = win - w_lo
        lo = offset[i]
        hi = lo + size[i]
        r = read[i]
        for e in range(div(lo, extent_bytes, e_shift), div(hi - 1, extent_bytes, e_shift) + 1):
            a = max(lo, e * extent_bytes)
            b = min(hi, (e + 1) * extent_bytes)
            n = number[e - e_lo] if dense else np.searchsorted(ids, e)
            if acc[n, 0] == 0:
                seen[m_seen] = n
                m_seen += 1
            acc[n, 0] += 1
            acc[n, 1] += r
            acc[n, 2] += _blocks(a, b)
            acc[n, 3] += b - a
        blocks = _blocks(lo, hi)
        n_req += 1                                # as traced: the window's sums in registers, stored as it ends
        n_blk += blocks
        c = w * disks + _disk(state, seq[i], disks)
        rand[0, c] += 1
        rand[1, c] += blocks
        u0, u1 = div(lo, unit_bytes, u_shift), div(hi - 1, unit_bytes, u_shift)
        if u0 == u1:                              # _add_spread written out (its inlined form ran 10 % slower)
            c = w * width + pmod(u0, width, w_mask)
            striped[0, c] += 1
            striped[1, c] += blocks
        else:
            for u in range(u0, u1 + 1):
                a = max(lo, u * unit_bytes)
                b = min(hi, (u + 1) * unit_bytes)
                c = w * width + pmod(u, width, w_mask)
                striped[0, c] += 1
                striped[1, c] += _blocks(a, b)
    m = _flush(acc, whole, seen, m_seen, win_start, ids, out, m)
    traced[0, win - w_lo] += n_req
    traced[1, win - w_lo] += n_blk
    return out[:, :m], whole, traced, rand, striped
