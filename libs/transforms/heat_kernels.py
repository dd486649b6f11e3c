"""Extent heat's per-device counts in one compiled pass (libs.transforms.heat_files.device_heat's fast path).

The array path cuts every request into extent pieces and stripe-unit pieces as arrays, hashes every seq as an
array and counts each key set in its own pass: some twenty full-length temporaries for a device, which two
workers on one machine stream through one memory bus. Here each request is read once and its pieces added
straight into small dense grids:

- extents: (touched extent, window) cells of requests, reads, blocks, bytes; extents are numbered in the order
  of their ids among those the device touches (a uint8 mark per extent id of the device's range, then a
  running count), so a 16 TB volume with a day of scattered requests costs touched extents x windows cells,
  not its whole extent range;
- per window: requests and blocks as traced, per random disk (Spark's xxhash64 of (seed, device, seq): the
  seed and the device hashed once, heat_files._device_state, each seq's 8 bytes here, _disk, which
  heat_files.spark_xxhash64_disk runs too), and per stripe-unit number modulo the stripe width.

The cuts, the 512-byte block counts and the window numbering are heat_files' (unit_pieces, _window_start),
so the counts are equal to the array path's, cell for cell (tests/libs/transforms/test_heat.py).

    python -m libs.transforms.heat_kernels      # compile into numba's cache (make venv does it)
"""
from __future__ import annotations

import numpy as np
from numba import njit, uint64

from libs.transforms.xxh64 import P1 as _P1
from libs.transforms.xxh64 import P2 as _P2
from libs.transforms.xxh64 import P3 as _P3
from libs.transforms.xxh64 import P4 as _P4

BLOCK_BYTES = 512


@njit(cache=True, nogil=True)
def extent_range(ts: np.ndarray, offset: np.ndarray, size: np.ndarray, extent_bytes: int
                 ) -> tuple[int, int, int, int]:  # pragma: no cover
    """(lowest ts, highest ts, lowest extent id, highest extent id) of the device's requests and pieces (the
    extent ids lowest > highest when no request has a piece). At least one request."""
    t_lo = t_hi = ts[0]
    e_lo, e_hi = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    for i in range(ts.shape[0]):
        t = ts[i]
        t_lo = min(t_lo, t)
        t_hi = max(t_hi, t)
        a = offset[i] // extent_bytes
        b = (offset[i] + size[i] - 1) // extent_bytes
        if a <= b:
            e_lo = min(e_lo, a)
            e_hi = max(e_hi, b)
    return t_lo, t_hi, e_lo, e_hi


@njit(cache=True, nogil=True)
def touched_extents(offset: np.ndarray, size: np.ndarray, extent_bytes: int, e_lo: int, e_span: int
                    ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """(each extent id's number among the touched ones, -1 if untouched, indexed by id - e_lo; the touched ids
    ascending)."""
    mark = np.zeros(e_span, np.uint8)
    for i in range(offset.shape[0]):
        for e in range(offset[i] // extent_bytes, (offset[i] + size[i] - 1) // extent_bytes + 1):
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


@njit(cache=True, nogil=True, inline="always")
def _blocks(a: int, b: int) -> int:  # pragma: no cover
    """512-byte blocks that bytes [a, b) touch (heat_files.unit_pieces' count)."""
    return (b + BLOCK_BYTES - 1) // BLOCK_BYTES - a // BLOCK_BYTES


@njit(cache=True, nogil=True)
def _disk(state: uint64, seq: int, disks: int) -> int:  # pragma: no cover
    """pmod(XXH64 of seq's 8 bytes continuing from `state`, disks), Spark's pmod of the signed hash (state: the
    seed and the device hashed, plus P5 + 8: heat_files._device_state)."""
    k = uint64(seq) * uint64(_P2)
    k = ((k << uint64(31)) | (k >> uint64(33))) * uint64(_P1)
    acc = state ^ k
    acc = ((acc << uint64(27)) | (acc >> uint64(37))) * uint64(_P1) + uint64(_P4)
    acc ^= acc >> uint64(33)
    acc *= uint64(_P2)
    acc ^= acc >> uint64(29)
    acc *= uint64(_P3)
    acc ^= acc >> uint64(32)
    r = np.int64(acc) % disks
    return r + disks if r < 0 else r


@njit(cache=True, nogil=True)
def disks_of(state: uint64, seq: np.ndarray, disks: int) -> np.ndarray:  # pragma: no cover
    """_disk of every seq (heat_files.spark_xxhash64_disk)."""
    out = np.empty(seq.shape[0], np.int64)
    for i in range(seq.shape[0]):
        out[i] = _disk(state, seq[i], disks)
    return out


@njit(cache=True, nogil=True)
def device_grids(ts: np.ndarray, seq: np.ndarray, offset: np.ndarray, size: np.ndarray, read: np.ndarray,
                 extent_bytes: int, number: np.ndarray, e_lo: int, touched: int, window_us: int, w_lo: int,
                 w_span: int, unit_bytes: int, width: int, disks: int, state: uint64
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """One pass over a device's requests. window_us 0: one window; else window k is ts // window_us = w_lo + k.
    Returns the grids (rows: requests, then sums):
    extents (4, touched * w_span): requests, reads, blocks, bytes at touched number * w_span + window;
    traced (2, w_span): requests, blocks; random (2, w_span * disks): requests, blocks at window * disks + disk;
    striped (2, w_span * width): pieces, blocks at window * width + unit % width."""
    ext = np.zeros((4, touched * w_span), np.int64)
    traced = np.zeros((2, w_span), np.int64)
    rand = np.zeros((2, w_span * disks), np.int64)
    striped = np.zeros((2, w_span * width), np.int64)
    for i in range(ts.shape[0]):
        w = ts[i] // window_us - w_lo if window_us else 0
        lo = offset[i]
        hi = lo + size[i]
        r = read[i]
        for e in range(lo // extent_bytes, (hi - 1) // extent_bytes + 1):
            a = max(lo, e * extent_bytes)
            b = min(hi, (e + 1) * extent_bytes)
            c = number[e - e_lo] * w_span + w
            ext[0, c] += 1
            ext[1, c] += r
            ext[2, c] += _blocks(a, b)
            ext[3, c] += b - a
        whole = _blocks(lo, hi)
        traced[0, w] += 1
        traced[1, w] += whole
        c = w * disks + _disk(state, seq[i], disks)
        rand[0, c] += 1
        rand[1, c] += whole
        for u in range(lo // unit_bytes, (hi - 1) // unit_bytes + 1):
            a = max(lo, u * unit_bytes)
            b = min(hi, (u + 1) * unit_bytes)
            m = u % width
            c = w * width + (m + width if m < 0 else m)
            striped[0, c] += 1
            striped[1, c] += _blocks(a, b)
    return ext, traced, rand, striped


def compile_all() -> None:
    """Compile the loops into numba's cache (one tiny call each), for writable input columns and for the
    read-only ones a requests file's Arrow columns give."""
    from sim.warm import frozen

    for view in (np.array, frozen):
        one, size = view(np.array([0], np.int64)), view(np.array([4096], np.int64))
        _, _, e_lo, e_hi = extent_range(one, one, size, 1 << 20)
        number, ids = touched_extents(one, size, 1 << 20, e_lo, e_hi - e_lo + 1)
        device_grids(one, one, one, size, np.array([0], np.int64), 1 << 20, number, e_lo, len(ids), 3_600_000_000,
                     0, 1, 65_536, 4, 4, np.uint64(1))
        disks_of(np.uint64(1), one, 4)


if __name__ == "__main__":
    compile_all()
