"""sim.prefetch: the hints compile for arrays of several element types in one loop and change no result."""
from __future__ import annotations

import numpy as np
from numba import njit

from blockheat.sim.prefetch import prefetch_read, prefetch_write


@njit(cache=False)
def _gather(values: np.ndarray, counts: np.ndarray, idx: np.ndarray, ahead: int) -> float:
    total = 0.0
    for j in range(idx.shape[0]):
        if ahead and j + ahead < idx.shape[0]:
            prefetch_read(values, idx[j + ahead])         # float64
            prefetch_write(counts, idx[j + ahead])        # int64, in the same function
        counts[idx[j]] += 1
        total += values[idx[j]]
    return total


def test_prefetching_loop_gives_the_plain_loop_s_results() -> None:
    rng = np.random.default_rng(7)
    values = rng.random(100_000)
    idx = rng.integers(0, values.shape[0], 50_000)
    plain_counts, hinted_counts = np.zeros(values.shape[0], np.int64), np.zeros(values.shape[0], np.int64)
    plain = _gather(values, plain_counts, idx, 0)
    hinted = _gather(values, hinted_counts, idx, 8)
    assert hinted == plain                                # the same sum, in the same order
    assert np.isclose(plain, values[idx].sum(), rtol=1e-12)
    np.testing.assert_array_equal(hinted_counts, np.bincount(idx, minlength=values.shape[0]))
    np.testing.assert_array_equal(plain_counts, hinted_counts)
