"""ALIS's request-sized units: the distinct (offset, size) extents of a reference stream, gathered part by part in
(offset, size) order (a unit's id is its index), and the int64 key that packs an extent in that order. Pure numpy:
the simulator's planner (sim.alis.plan) and the graph tasks (libs.table_io.alis_graph) number units with them.

    units = ExtentSet()
    for offsets, sizes in parts:
        units.add(offsets, sizes)
    offsets, sizes = units.extents()
"""
from __future__ import annotations

import numpy as np

__all__ = ["ExtentSet", "distinct_extents", "packed", "packing"]


def packing(offsets: np.ndarray, sizes: np.ndarray) -> int | None:
    """The shift that packs each (offset, size) into one int64 ordered as the pairs, offset << shift | size (None:
    they do not fit, or one is negative)."""
    if not len(offsets) or offsets.min() < 0 or sizes.min() < 0:
        return None
    shift = int(sizes.max()).bit_length()
    return shift if int(offsets.max()).bit_length() + shift <= 62 else None


def packed(offsets: np.ndarray, sizes: np.ndarray, shift: int) -> np.ndarray:
    """Each (offset, size) as one int64, offset << shift | size (shift from packing)."""
    return (offsets << shift) | sizes


def distinct_extents(offsets: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (offset, size) pairs, in (offset, size) order."""
    shift = packing(offsets, sizes)
    if shift is not None:                               # one sort of int64 keys (np.unique's hashing is slower)
        keys = np.sort(packed(offsets, sizes, shift))
        keys = keys[np.r_[True, keys[1:] != keys[:-1]]]
        return keys >> shift, keys & ((1 << shift) - 1)
    order = np.lexsort((sizes, offsets))
    o, s = offsets[order], sizes[order]
    new = np.r_[True, (o[1:] != o[:-1]) | (s[1:] != s[:-1])] if len(o) else np.zeros(0, bool)
    return o[new], s[new]


class ExtentSet:
    """The distinct extents of requests added part by part, in (offset, size) order: each part's distinct ones are
    merged in when those waiting outnumber the ones held (memory: at most twice the distinct extents and a part;
    time: each extent is sorted about log2(parts) times, not once per part)."""

    def __init__(self) -> None:
        self.offsets, self.sizes = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self._waiting: list[tuple[np.ndarray, np.ndarray]] = []
        self._rows = 0

    def add(self, offsets: np.ndarray, sizes: np.ndarray) -> None:
        o, s = distinct_extents(offsets, sizes)
        self._waiting.append((o, s))
        self._rows += len(o)
        if self._rows > len(self.offsets):
            self._merge()

    def _merge(self) -> None:
        if self._waiting:
            self.offsets, self.sizes = distinct_extents(np.concatenate([self.offsets, *(o for o, _ in self._waiting)]),
                                                        np.concatenate([self.sizes, *(s for _, s in self._waiting)]))
        self._waiting, self._rows = [], 0

    def extents(self) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, sizes) of every extent added, distinct, in (offset, size) order."""
        self._merge()
        return self.offsets, self.sizes
