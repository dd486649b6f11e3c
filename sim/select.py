"""Exact order statistics by the keys' bits: the k-th smallest of unsigned keys (non-negative floats order as
their bits) in a few passes over them, for keys that do not fit in memory at once (a streamed run's response
times, a spilled graph's weights) or that np.partition handles slowly (many equal weights)."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from numba import njit

__all__ = ["float_of_bits", "kth_smallest", "select_bits", "top16_counts"]


def _top16(bits: np.ndarray) -> np.ndarray:
    """The keys' top 16 bits (select_bits's `top` counts them)."""
    return bits >> bits.dtype.type(bits.dtype.itemsize * 8 - 16)


def top16_counts(bits: np.ndarray) -> np.ndarray:
    """select_bits's `top` of some keys: the count per value of their top 16 bits (add the counts of several
    batches)."""
    return np.bincount(_top16(bits), minlength=1 << 16)


def float_of_bits(bits: int, dtype: np.dtype | type = np.float64) -> float:
    """The float of `dtype` (float32 or float64) whose bits, read as the unsigned integer of its width, are `bits`:
    select_bits's answer over floats' bits as a value."""
    dtype = np.dtype(dtype)
    return float(np.array([bits], f"u{dtype.itemsize}").view(dtype)[0])


def select_bits(passes: Callable[[], Iterator[np.ndarray]], top: np.ndarray, k: int) -> int:
    """The k-th smallest (0-based) of unsigned keys (uint32 or uint64, e.g. non-negative floats' bits) read by
    passes(), each call a pass over them; top: the count per value of their top 16 bits. One pass counts the next 16
    bits in the bucket of rank k; 64-bit keys take one more, the distinct keys sharing those 32 bits."""
    below = np.cumsum(top)
    high = int(np.searchsorted(below, k, side="right"))
    k -= int(below[high - 1]) if high else 0
    middle = np.zeros(1 << 16, np.int64)
    width = 32
    for bits in passes():
        width = bits.dtype.itemsize * 8
        _count_middle(np.ascontiguousarray(bits), high, width, middle)
    below = np.cumsum(middle)
    mid = int(np.searchsorted(below, k, side="right"))
    k -= int(below[mid - 1]) if mid else 0
    prefix = (high << 16) | mid
    if width == 32:
        return prefix
    values, counts = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    for bits in passes():
        low, n = np.unique(_with_prefix(np.ascontiguousarray(bits), prefix), return_counts=True)
        values, inverse = np.unique(np.concatenate([values, low]), return_inverse=True)
        counts = np.bincount(inverse, np.concatenate([counts, n]), len(values)).astype(np.int64)
    return int(values[int(np.searchsorted(np.cumsum(counts), k, side="right"))])


def kth_smallest(values: np.ndarray, k: int) -> float:
    """The k-th smallest (0-based) of float64 values: by their bits (select_bits, two passes over them) when none
    is negative, else by np.partition (which slows down on many equal values, as a graph's weights are)."""
    values = np.ascontiguousarray(values, np.float64)
    if values.min() < 0:
        return float(np.partition(values, k)[k])
    bits = values.view(np.uint64)
    return float_of_bits(select_bits(lambda: iter([bits]), top16_counts(bits), k))


@njit(cache=True, nogil=True)
def _count_middle(bits: np.ndarray, high: int, width: int, middle: np.ndarray) -> None:  # pragma: no cover
    """middle[the key's second 16 bits] += 1 for each key whose top 16 bits are `high` (select_bits's first pass)."""
    top = bits.dtype.type(width - 16)
    second = bits.dtype.type(width - 32)
    wanted = bits.dtype.type(high)
    mask = bits.dtype.type(0xFFFF)
    for x in bits:
        if x >> top == wanted:
            middle[(x >> second) & mask] += 1


@njit(cache=True, nogil=True)
def _with_prefix(bits: np.ndarray, prefix: int) -> np.ndarray:  # pragma: no cover
    """The 64-bit keys whose top 32 bits are `prefix`, in their order (select_bits's second pass)."""
    shift = np.uint64(32)
    wanted = np.uint64(prefix)
    n = 0
    for x in bits:
        if x >> shift == wanted:
            n += 1
    out = np.empty(n, np.uint64)
    n = 0
    for x in bits:
        if x >> shift == wanted:
            out[n] = x
            n += 1
    return out
