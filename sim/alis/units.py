"""ALIS's request-sized units: the distinct (offset, size) extents of a reference stream, gathered part by part in
(offset, size) order (a unit's id is its index), the int64 key that packs an extent in that order, and a hash table
from those keys to unit ids (KeyTable, compiled). Pure numpy and numba: the simulator's planner (sim.alis.plan) and
the graph tasks (libs.table_io.alis_graph) number units with them.

    units = ExtentSet()
    for offsets, sizes in parts:
        units.add(offsets, sizes)
    offsets, sizes = units.extents()
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["ExtentSet", "KeyTable", "distinct_extents", "packed", "packing"]


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


class KeyTable:
    """Distinct non-negative int64 keys (the packed extents of a units table) to int64 values, by open addressing
    in a table of 2-4 slots per key: a lookup is one short probe sequence, where a sorted search has to sort a
    chunk's needles first to walk the keys in order (12 against 115 ns a lookup, a million over a million keys).

        KeyTable(np.array([7, 3]), np.array([0, 1])).get(np.array([3, 5]))      # [1, -1]
    """

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        keys = np.ascontiguousarray(keys, np.int64)
        if len(keys) and keys.min() < 0:
            raise ValueError("KeyTable keys must not be negative")
        self.bits = max(4, (2 * len(keys)).bit_length())
        self.slots = _build(keys, np.ascontiguousarray(values, np.int64), self.bits)

    def get(self, needles: np.ndarray, missing: int = -1) -> np.ndarray:
        """Each needle's value, `missing` where it is not a key."""
        return _find(self.slots, self.bits, np.ascontiguousarray(needles, np.int64), missing)


@njit(cache=True, nogil=True, inline="always")
def _slot(key: int, bits: int) -> int:  # pragma: no cover
    return np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))


@njit(cache=True, nogil=True)
def _build(keys: np.ndarray, values: np.ndarray, bits: int) -> np.ndarray:  # pragma: no cover
    """(2^bits, 2) slots of (key, value), key -1 where empty; a repeated key keeps its first value."""
    slots = np.full((1 << bits, 2), -1, np.int64)
    mask = (1 << bits) - 1
    for i in range(len(keys)):
        j = _slot(keys[i], bits)
        while slots[j, 0] != -1 and slots[j, 0] != keys[i]:
            j = (j + 1) & mask
        if slots[j, 0] == -1:
            slots[j, 0] = keys[i]
            slots[j, 1] = values[i]
    return slots


@njit(cache=True, nogil=True)
def _find(slots: np.ndarray, bits: int, needles: np.ndarray, missing: int) -> np.ndarray:  # pragma: no cover
    out = np.empty(len(needles), np.int64)
    mask = (1 << bits) - 1
    for i in range(len(needles)):
        key = needles[i]
        out[i] = missing
        if key < 0:
            continue
        j = _slot(key, bits)
        while slots[j, 0] != -1:
            if slots[j, 0] == key:
                out[i] = slots[j, 1]
                break
            j = (j + 1) & mask
    return out
