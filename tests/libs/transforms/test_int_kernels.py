"""The kernels' integer helpers against Python's own floor division and modulo, at powers of two and others."""
from __future__ import annotations

import numba
import pytest

from blockheat.libs.transforms.int_kernels import div, mask_of, pmod, shift_of


@numba.njit(cache=True)
def _both(x: int, d: int) -> tuple[int, int]:  # pragma: no cover - compiled
    return div(x, d, shift_of(d)), pmod(x, d, mask_of(d))


@pytest.mark.parametrize("d", [1, 2, 3, 7, 8, 1 << 20, 3 * (1 << 20), 1 << 40])
def test_div_and_pmod_equal_floor_division_and_modulo(d: int) -> None:
    for x in (0, 1, d - 1, d, d + 1, 5 * d + 3, -1, -d, -d - 1, -(1 << 50) + 7, (1 << 62) + 11):
        assert _both(x, d) == (x // d, x % d), (x, d)


def test_shift_and_mask_only_for_powers_of_two() -> None:
    assert [shift_of(d) for d in (1, 2, 4096, 1 << 40)] == [0, 1, 12, 40]
    assert [shift_of(d) for d in (0, -4, 3, 6, 4097)] == [-1] * 5
    assert [mask_of(d) for d in (1, 8, 1 << 40, 0, -4, 3, 12)] == [0, 7, (1 << 40) - 1, -1, -1, -1, -1]
