"""The profile's compiled loops (numba), in a module of their own so that only the processes that run
them (the Python workers) import numba: about 60 MB more resident memory per process, plus LLVM's
on the first call."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def round_significant_code(values: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Non-negative int64 values rounded as libs.transforms.profile.round_significant_np rounds them
    (4 significant digits, half up), in integers, as small codes in the same order: v itself below 10,000, else
    10,000 + 9,000 * (e - 1) + (m - 1,000) for the rounded value m * 10**e (1,000 <= m <= 9,999)."""
    out = np.empty_like(values)
    for i in range(len(values)):
        v = values[i]
        if v < 10_000:
            out[i] = v
            continue
        step = 1
        e = 0
        x = v
        while x >= 10_000:
            x //= 10
            step *= 10
            e += 1
        r = v // step
        if 2 * (v - r * step) >= step:
            r += 1
        if r == 10_000:
            r = 1_000
            e += 1
        out[i] = 10_000 + 9_000 * (e - 1) + (r - 1_000)
    return out


@numba.njit(cache=True)
def previous_access(code: np.ndarray, block: np.ndarray,
                     ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """For accesses in time order: whether (code, block) was accessed before, and the time of its
    previous access (an open-addressing table of the last access per block)."""
    n = len(block)
    bits = 1
    while (1 << bits) < 2 * n:
        bits += 1
    size = 1 << bits
    used = np.zeros(size, np.bool_)
    key_block = np.empty(size, np.int64)
    key_code = np.empty(size, np.int64)
    last = np.empty(size, np.int64)
    seen = np.zeros(n, np.bool_)
    prev = np.zeros(n, np.int64)
    shift = np.uint64(64 - bits)
    for i in range(n):
        h = np.uint64(block[i]) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(code[i]) * np.uint64(0xC2B2AE3D27D4EB4F)
        j = np.int64(h >> shift)
        while used[j] and (key_block[j] != block[i] or key_code[j] != code[i]):
            j = (j + 1) & (size - 1)
        if used[j]:
            seen[i] = True
            prev[i] = last[j]
        else:
            used[j] = True
            key_block[j] = block[i]
            key_code[j] = code[i]
        last[j] = ts[i]
    return seen, prev
