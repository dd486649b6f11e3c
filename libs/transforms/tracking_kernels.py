"""Compiled loops of interarrival heat tracking read from the files (libs.table_io.tracking): one
device's requests cut into extent pieces (unit_pieces, which extent heat's files path uses too), and the
tracked heat of every extent at every checkpoint for several k in one walk. Imported only where they run
(the Python workers); the rules are those of libs.transforms.tracking, whose window functions these loops
reproduce value for value:

- after the n-th request to an extent (in (ts_us, seq) order), m = min(n, k), R the mean blocks of the
  last m requests, heat = (m R) 1e6 / max(t_n - t_(n-m+1), 1) blocks/s (NULL for n = 1), computed in that
  order of floating-point operations (Spark: avg as a double sum over a count, m times it, times 1e6,
  over the span as a double);
- a checkpoint j P (j = t_n // P + 1 .. min(t_(n+1) // P, last_j)) sees request n's state; aged at it:
  min(heat, (m R) 1e6 / max(j P - t_(n-m+2), 1));
- true heat at checkpoint j: the extent's blocks with ts_us // P = j, over P in seconds.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from blockheat.libs.transforms.heat_kernels import BLOCK_BYTES


@njit(cache=True, nogil=True)
def unit_pieces(offset: np.ndarray, size: np.ndarray, unit_bytes: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """Each request (size > 0) cut at multiples of unit_bytes (libs.transforms.heat.split_at), per piece in
    request order: the request's row, the unit id (floor division), the request's bytes inside the unit and
    the 512-byte blocks it overlaps there."""
    n = offset.shape[0]
    total = 0
    for i in range(n):
        total += (offset[i] + size[i] - 1) // unit_bytes - offset[i] // unit_bytes + 1
    row = np.empty(total, np.int64)
    uid = np.empty(total, np.int64)
    nbytes = np.empty(total, np.int64)
    blocks = np.empty(total, np.int64)
    at = 0
    for i in range(n):
        lo, hi = offset[i], offset[i] + size[i]
        for e in range(lo // unit_bytes, (hi - 1) // unit_bytes + 1):
            a = max(lo, e * unit_bytes)
            b = min(hi, (e + 1) * unit_bytes)
            row[at] = i
            uid[at] = e
            nbytes[at] = b - a
            blocks[at] = (b + BLOCK_BYTES - 1) // BLOCK_BYTES - a // BLOCK_BYTES
            at += 1
    return row, uid, nbytes, blocks


@njit(cache=True, nogil=True)
def extent_pieces(ts: np.ndarray, seq: np.ndarray, offset: np.ndarray, size: np.ndarray,
                  extent_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """Each request cut at extent boundaries (unit_pieces): extent id, ts_us, seq and the 512-byte blocks the
    request overlaps inside that extent, per piece in request order."""
    row, ext, _, blocks = unit_pieces(offset, size, extent_bytes)
    return ext, ts[row], seq[row], blocks


@njit(cache=True, nogil=True)
def pieces_by_extent(ts: np.ndarray, seq: np.ndarray, offset: np.ndarray, size: np.ndarray, extent_bytes: int,
                     low: int, span: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """extent_pieces of requests in (ts_us, seq) order, grouped by extent in one counting sort (extents low ..
    low + span - 1): extent id, ts_us, seq and blocks sorted by (extent, ts_us, seq)."""
    n = offset.shape[0]
    at = np.zeros(span + 1, np.int64)
    for i in range(n):
        for e in range(offset[i] // extent_bytes, (offset[i] + size[i] - 1) // extent_bytes + 1):
            at[e - low + 1] += 1
    for e in range(span):
        at[e + 1] += at[e]
    total = at[span]
    ext = np.empty(total, np.int64)
    ts_out = np.empty(total, np.int64)
    seq_out = np.empty(total, np.int64)
    blocks = np.empty(total, np.int64)
    for i in range(n):
        lo, hi = offset[i], offset[i] + size[i]
        for e in range(lo // extent_bytes, (hi - 1) // extent_bytes + 1):
            a = max(lo, e * extent_bytes)
            b = min(hi, (e + 1) * extent_bytes)
            k = at[e - low]
            at[e - low] = k + 1
            ext[k] = e
            ts_out[k] = ts[i]
            seq_out[k] = seq[i]
            blocks[k] = (b + BLOCK_BYTES - 1) // BLOCK_BYTES - a // BLOCK_BYTES
    return ext, ts_out, seq_out, blocks


@njit(cache=True, nogil=True)
def last_of_groups(ext: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """Per extent group of sorted pieces (ext ascending) its last `keep` pieces: their positions, and per position
    its group's size."""
    n = ext.shape[0]
    rows = np.empty(n, np.int64)
    sizes = np.empty(n, np.int64)
    m = 0
    a = 0
    while a < n:
        b = a + 1
        while b < n and ext[b] == ext[a]:
            b += 1
        for i in range(max(a, b - keep), b):
            rows[m] = i
            sizes[m] = b - a
            m += 1
        a = b
    return rows[:m], sizes[:m]


@njit(cache=True, nogil=True)
def checkpoint_rows(ext: np.ndarray, ts: np.ndarray, last_j: int, period: int,
                    first_row_j: int = 0) -> np.ndarray:  # pragma: no cover
    """Per extent group of the sorted pieces (ext ascending), the first output row: rows run over the
    checkpoints first_j = max(t_1 // P + 1, first_row_j) .. last_j of each extent, in extent order. Returns group
    starts (len groups + 1, the last = pieces) followed by row starts (len groups + 1, the last = rows)."""
    n = ext.shape[0]
    groups = 0
    for i in range(n):
        if i == 0 or ext[i] != ext[i - 1]:
            groups += 1
    out = np.empty(2 * (groups + 1), np.int64)
    g = 0
    rows = 0
    for i in range(n):
        if i == 0 or ext[i] != ext[i - 1]:
            out[g] = i
            out[groups + 1 + g] = rows
            first_j = max(ts[i] // period + 1, first_row_j)
            if first_j <= last_j:
                rows += last_j - first_j + 1
            g += 1
    out[groups] = n
    out[2 * groups + 1] = rows
    return out


@njit(cache=True, nogil=True)
def track(ext: np.ndarray, ts: np.ndarray, blocks: np.ndarray, starts: np.ndarray, ks: np.ndarray, last_j: int,
          period: int, first_row_j: int = 0, seen_before: np.ndarray | None = None
          ) -> tuple[np.ndarray, ...]:  # pragma: no cover
    """The heat_tracking rows of one device's pieces, sorted by (extent, ts_us, seq): extent id, checkpoint
    (us), requests seen and true heat per row, and per k (rows of `ks`) heat, its validity and the heat
    without aging. Resuming (libs.table_io.tracking_update): rows only from checkpoint first_row_j on (starts by
    checkpoint_rows with the same first_row_j), and seen_before[g] requests of extent group g before its first
    piece here (its first pieces being the last max(ks) before them, the rest counted only)."""
    groups = (starts.shape[0] - 2) // 2
    n_rows = starts[2 * groups + 1]
    nk = ks.shape[0]
    extent_id = np.empty(n_rows, np.int64)
    checkpoint = np.empty(n_rows, np.int64)
    seen = np.empty(n_rows, np.int64)
    true_heat = np.zeros(n_rows)
    heat = np.empty((nk, n_rows))
    known = np.zeros((nk, n_rows), np.bool_)
    unaged = np.empty((nk, n_rows))
    seconds = period / 1e6
    for g in range(groups):
        a, b = starts[g], starts[g + 1]
        r0 = starts[groups + 1 + g]
        first_j = max(ts[a] // period + 1, first_row_j)
        if first_j > last_j:
            continue
        before = 0 if seen_before is None else seen_before[g]
        for r in range(r0, starts[groups + 2 + g]):
            extent_id[r] = ext[a]
            checkpoint[r] = (first_j + r - r0) * period
        for i in range(a, b):                          # true heat: the blocks of each checkpoint's period
            j = ts[i] // period
            if first_j <= j <= last_j:
                true_heat[r0 + j - first_j] += blocks[i]
        for i in range(a, b):
            n = i - a + 1 + before
            jf = max(ts[i] // period + 1, first_j)
            ju = last_j if i == b - 1 else min(ts[i + 1] // period, last_j)
            for j in range(jf, ju + 1):
                seen[r0 + j - first_j] = n
            if n < 2 or jf > ju:
                continue
            for q in range(nk):
                m = min(n, ks[q], i - a + 1)
                total = 0
                for x in range(i - m + 1, i + 1):
                    total += blocks[x]
                work = m * (total / m) * 1e6
                span = ts[i] - ts[i - m + 1]
                h = work / (span if span > 1 else 1)
                age_from = ts[i - m + 2] if m >= 2 else ts[i]
                for j in range(jf, ju + 1):
                    r = r0 + j - first_j
                    gap = j * period - age_from
                    aged = work / (gap if gap > 1 else 1)
                    heat[q, r] = aged if aged < h else h
                    known[q, r] = True
                    unaged[q, r] = h
    for r in range(n_rows):
        true_heat[r] = true_heat[r] / seconds
    return extent_id, checkpoint, seen, true_heat, heat, known, unaged
