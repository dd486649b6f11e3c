"""Compiled integer helpers the kernels share (numba, inlined): division by a power of two as a shift."""
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
