"""Compiled integer helpers the kernels share (numba, inlined): division and modulo by a power of two as a shift
and a mask."""
from __future__ import annotations

import numba


@numba.njit(cache=True, inline="always")
def shift_of(d: int) -> int:  # pragma: no cover - compiled
    """log2(d) when d is a power of two, else -1."""
    if d <= 0 or d & (d - 1):
        return -1
    s = 0
    while (1 << s) < d:
        s += 1
    return s


@numba.njit(cache=True, inline="always")
def div(x: int, d: int, shift: int) -> int:  # pragma: no cover - compiled
    """x // d (floor division, any sign), by a shift when shift_of(d) gave one (a division costs ~30 cycles)."""
    return x >> shift if shift >= 0 else x // d


@numba.njit(cache=True, inline="always")
def mask_of(d: int) -> int:  # pragma: no cover - compiled
    """d - 1 when d is a power of two (x & (d - 1) is then x mod d), else -1."""
    return d - 1 if d > 0 and not d & (d - 1) else -1


@numba.njit(cache=True, inline="always")
def pmod(x: int, d: int, mask: int) -> int:  # pragma: no cover - compiled
    """x mod d in [0, d) for any sign of x and d > 0 (Spark's pmod), by a mask when mask_of(d) gave one
    (compiled % is Python's floor modulo: the divisor's sign)."""
    return x & mask if mask >= 0 else x % d
