"""Static allocation of extents to disks (FIVE section 3.1, Figure 3): round-robin versus FIVE's greedy
allocation (extents by descending heat, each onto the coolest disk not already holding an extent of the
same file), with heats from `extent_heat`, and the result as a simulator extent map. The greedy loop is
compiled with numba (`greedy_disks`, over arrays: a Python loop is too slow for the millions
of extents of a large trace); the rest is plain Python.

    units = units_from_extent_heat(rows, extent_bytes=1 << 20, device_bytes={"0": 8 << 30}, sector_bytes=512)
    placed = greedy_allocation(units, n_disks=8)
    layout = to_extent_map(units, placed)        # sim.array.ExtentMap, units in logical order

Choices where the paper is open (each tested in tests/sim/test_allocation.py):
- a file with more extents than disks (fixed-size extents from `extent_heat`, file = device) cannot keep
  one extent per disk; the rule becomes "a disk holding the fewest extents of that file", which is
  FIVE's rule exactly while the file has at most D extents;
- ties: equal heats keep the input (logical) order; equal disk heats go to the lowest disk index;
- round-robin deals the units in logical order over the disks with one cursor across files (a file starts
  where the previous one ended), so with as many extents per file as disks it is "extent j on disk j";
- on each disk, the units lie back to back in logical order, so the two methods differ only in the
  disk each unit gets; with a capacity, a disk without room is not eligible, and the fewest-extents
  rule applies among the disks with room (a file may then share a disk before all are used).

incremental_moves is the layout-preserving counterpart (FIVE's cooling rule, section 3.2, applied offline to the
current layout): only the extents whose move most lowers the hottest disk's heat move, one at a time, each from
the hottest disk to the coolest one, and the moves stop when the next one gains less than it costs. Choices:
- gain = how much the move lowers the hottest disk's heat (over all disks, blocks per second) times the window's
  seconds; cost = the blocks the move transfers (its sectors read, then written); a move is made only while
  gain > cost, so it pays for itself within one window like the one it was planned from;
- the moved extent goes to the free space after the target disk's used area (never over data), and the space it
  leaves is not reused; ties: the larger gain, then the hotter extent per sector, then the lower extent number;
- a budget (max_sectors) bounds the sectors moved in all.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from blockheat.sim.array import Extent, ExtentMap

if TYPE_CHECKING:
    from blockheat.sim.array import ExtentMap

__all__ = ["AllocUnit", "Allocation", "AllocationError", "IncrementalMove", "greedy_allocation", "greedy_disks",
           "incremental_moves", "round_robin_allocation", "to_extent_map", "units_from_extent_heat"]


class AllocationError(ValueError):
    """No disk can take a unit (all full)."""


@dataclass(frozen=True)
class AllocUnit:
    """One extent to place: its file, its number within the file, its heat and size (sectors)."""

    file: str
    index: int
    heat: float
    sectors: int = 1


@dataclass(frozen=True)
class Allocation:
    """Per unit (input order) its disk and physical start (sectors); disk heats; the allocation order."""

    disk: tuple[int, ...]
    physical_start: tuple[int, ...]
    disk_heat: tuple[float, ...]
    order: tuple[int, ...]

    @property
    def max_over_mean(self) -> float:
        """Hottest disk's heat over the mean (1 = balanced; 0 with no heat)."""
        mean = sum(self.disk_heat) / len(self.disk_heat)
        return max(self.disk_heat) / mean if mean > 0 else 0.0


def _check(units: Sequence[AllocUnit], n_disks: int) -> None:
    if n_disks <= 0:
        raise ValueError(f"n_disks must be > 0, got {n_disks}")
    bad = [i for i, u in enumerate(units) if u.sectors <= 0 or not u.heat >= 0]
    if bad:
        raise ValueError(f"units need sectors > 0 and heat >= 0; unit {bad[0]} is {units[bad[0]]}")


def _finish(units: Sequence[AllocUnit], disk: list[int], n_disks: int, order: Sequence[int]) -> Allocation:
    start = [0] * len(units)
    used = [0] * n_disks
    heat = [0.0] * n_disks
    for i, u in enumerate(units):
        start[i] = used[disk[i]]
        used[disk[i]] += u.sectors
        heat[disk[i]] += u.heat
    return Allocation(tuple(disk), tuple(start), tuple(heat), tuple(order))


def round_robin_allocation(units: Sequence[AllocUnit], n_disks: int, *,
                           capacity_sectors: int | None = None) -> Allocation:
    """Units in the given (logical) order dealt to disks 0, 1, ..., D-1, 0, ... regardless of heat."""
    _check(units, n_disks)
    disk = [i % n_disks for i in range(len(units))]
    placed = _finish(units, disk, n_disks, range(len(units)))
    _check_capacity(units, placed, n_disks, capacity_sectors)
    return placed


def _check_capacity(units: Sequence[AllocUnit], placed: Allocation, n_disks: int, capacity: int | None) -> None:
    if capacity is None:
        return
    for d in range(n_disks):
        used = sum(u.sectors for u, x in zip(units, placed.disk, strict=True) if x == d)
        if used > capacity:
            raise AllocationError(f"disk {d} would hold {used} sectors, beyond its capacity {capacity}")


def greedy_allocation(units: Sequence[AllocUnit], n_disks: int, *,
                      capacity_sectors: int | None = None) -> Allocation:
    """FIVE's greedy: units by descending heat, each onto the disk with the lowest accumulated heat among
    those holding the fewest units of its file (none, while the file has at most D units) and with room."""
    _check(units, n_disks)
    files: dict[str, int] = {}
    file_id = np.array([files.setdefault(u.file, len(files)) for u in units], dtype=np.int64)
    heat = np.array([u.heat for u in units], dtype=np.float64)
    sectors = np.array([u.sectors for u in units], dtype=np.int64)
    disk, order = greedy_disks(file_id, heat, sectors, n_disks, capacity_sectors, file_names=list(files))
    return _finish(units, disk.tolist(), n_disks, order.tolist())


def greedy_disks(file_id: np.ndarray, heat: np.ndarray, sectors: np.ndarray, n_disks: int,
                 capacity_sectors: int | None = None, *,
                 file_names: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """greedy_allocation over arrays (file numbers 0..F-1, heats, sectors per unit): (disk per unit, the
    allocation order). Raises AllocationError when no disk has room for a unit (naming its file by
    file_names[number] when given)."""
    order = np.argsort(-np.asarray(heat, dtype=np.float64), kind="stable").astype(np.int64)   # ties: input order
    n_files = int(file_id.max()) + 1 if len(file_id) else 0
    cap = -1 if capacity_sectors is None else int(capacity_sectors)
    disk = np.full(len(order), -1, dtype=np.int64)
    failed = _greedy(order, np.ascontiguousarray(file_id, dtype=np.int64), np.ascontiguousarray(heat, dtype=np.float64),
                     np.ascontiguousarray(sectors, dtype=np.int64), n_files, n_disks, cap, disk)
    if failed >= 0:
        f = int(file_id[failed])
        name = repr(file_names[f]) if file_names is not None else f"number {f}"
        raise AllocationError(f"no disk has room for unit {failed} ({int(sectors[failed])} sectors) of file {name}")
    return disk, order


@njit(cache=True, nogil=True)
def _greedy(order: np.ndarray, file_id: np.ndarray, heat: np.ndarray, sectors: np.ndarray, n_files: int,
            n_disks: int, cap: int, disk: np.ndarray) -> int:  # pragma: no cover - compiled by numba
    """greedy_disks' loop, filling disk; returns -1, or the unit no disk had room for (cap -1: no limit).
    Among the disks with room: the fewest units of the unit's file, then the lowest heat, then the lowest index."""
    disk_heat = np.zeros(n_disks)
    used = np.zeros(n_disks, dtype=np.int64)
    counts = np.zeros((n_files, n_disks), dtype=np.int64)
    for i in order:
        f = file_id[i]
        best = -1
        for d in range(n_disks):
            if cap >= 0 and used[d] + sectors[i] > cap:
                continue
            if best < 0 or counts[f, d] < counts[f, best] or (counts[f, d] == counts[f, best]
                                                                and disk_heat[d] < disk_heat[best]):
                best = d
        if best < 0:
            return i
        disk[i] = best
        disk_heat[best] += heat[i]
        used[best] += sectors[i]
        counts[f, best] += 1
    return -1


@dataclass(frozen=True)
class IncrementalMove:
    """One move of incremental_moves: the extent, from and to which disk (and where on it), its heat, and the
    hottest disk's heat before and after it (blocks per second)."""

    extent: int
    from_disk: int
    to_disk: int
    to_start: int
    sectors: int
    heat: float
    hottest_before: float
    hottest_after: float


def incremental_moves(heat: np.ndarray, sectors: np.ndarray, disk: np.ndarray, used_end: Sequence[int], *,
                      capacity_sectors: int, window_s: float, sector_bytes: int = 512,
                      max_sectors: int | None = None) -> list[IncrementalMove]:
    """The moves, in order, that cool the hottest disk of the current layout (`disk` per extent, heats in 512-byte
    blocks per second over `window_s`; used_end: where each disk's free space starts) while each gains more than
    it costs (see the module's choices)."""
    heat = np.asarray(heat, dtype=np.float64)
    sectors = np.asarray(sectors, dtype=np.int64)
    disk = np.asarray(disk, dtype=np.int64).copy()
    n_disks = len(used_end)
    if len(heat) != len(sectors) or len(heat) != len(disk) or (len(disk) and (disk.min() < 0 or disk.max() >= n_disks)):
        raise ValueError("heat, sectors and disk need one value per extent, disks within used_end")
    if window_s <= 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    free = np.asarray(used_end, dtype=np.int64).copy()
    disk_heat = np.bincount(disk, weights=heat, minlength=n_disks).astype(np.float64)
    blocks_per_sector = sector_bytes / 512.0
    budget = np.iinfo(np.int64).max if max_sectors is None else int(max_sectors)
    movable = heat > 0
    moves: list[IncrementalMove] = []
    while True:
        hot = int(np.argmax(disk_heat))
        cool = int(np.argmin(disk_heat))
        if hot == cool:
            break
        others = np.delete(disk_heat, [hot, cool])
        rest = float(others.max()) if len(others) else 0.0
        cand = np.flatnonzero(movable & (disk == hot) & (sectors <= budget)
                              & (free[cool] + sectors <= capacity_sectors))
        if not len(cand):
            break
        after = np.maximum(np.maximum(disk_heat[hot] - heat[cand], disk_heat[cool] + heat[cand]), rest)
        gain = (disk_heat[hot] - after) * window_s
        cost = 2.0 * sectors[cand] * blocks_per_sector
        best = min(range(len(cand)), key=lambda i: (-gain[i], -heat[cand[i]] / sectors[cand[i]], cand[i]))
        if not gain[best] > cost[best]:
            break
        e = int(cand[best])
        moves.append(IncrementalMove(e, hot, cool, int(free[cool]), int(sectors[e]), float(heat[e]),
                                     float(disk_heat[hot]), float(after[best])))
        disk_heat[hot] -= heat[e]
        disk_heat[cool] += heat[e]
        disk[e] = cool
        free[cool] += sectors[e]
        budget -= int(sectors[e])
        movable[e] = False                       # moved once: its next move would be a plan of its own
    return moves


def units_from_extent_heat(rows: Iterable[Mapping[str, Any]], *, extent_bytes: int, device_bytes: Mapping[str, int],
                           sector_bytes: int, object_bytes: int | None = None) -> list[AllocUnit]:
    """Every extent of every device (in the mapping's order; extents no row mentions have heat 0) from
    `extent_heat` rows (device, extent_id, heat) of one extent size and window. The file is the device,
    or with object_bytes the object "device:k" holding bytes [k object_bytes, (k + 1) object_bytes)."""
    if extent_bytes <= 0 or extent_bytes % sector_bytes:
        raise ValueError(f"extent_bytes must be a positive multiple of the sector size {sector_bytes}, got "
                         f"{extent_bytes}")
    if object_bytes is not None and (object_bytes <= 0 or object_bytes % extent_bytes):
        raise ValueError(f"object_bytes must be a positive multiple of extent_bytes {extent_bytes}, got {object_bytes}")
    heat: dict[tuple[str, int], float] = {}
    for r in rows:
        key = (str(r["device"]), int(r["extent_id"]))
        heat[key] = heat.get(key, 0.0) + float(r["heat"] or 0.0)
    unknown = sorted({d for d, _ in heat} - set(device_bytes))
    if unknown:
        raise ValueError(f"extent_heat rows for devices {unknown} not in device_bytes")
    units = []
    for dev, size in device_bytes.items():
        n = math.ceil(size / extent_bytes)
        beyond = [x for d, x in heat if d == dev and x >= n]
        if beyond:
            raise ValueError(f"device {dev!r}: extent {beyond[0]} lies beyond its {size} bytes")
        per_object = None if object_bytes is None else object_bytes // extent_bytes
        for x in range(n):
            nbytes = min(extent_bytes, size - x * extent_bytes)
            file = dev if per_object is None else f"{dev}:{x // per_object}"
            index = x if per_object is None else x % per_object
            units.append(AllocUnit(file, index, heat.get((dev, x), 0.0), math.ceil(nbytes / sector_bytes)))
    return units


def to_extent_map(units: Sequence[AllocUnit], placed: Allocation) -> ExtentMap:
    """The simulator's extent map: the units tile the logical space in the given order."""

    extents = []
    start = 0
    for u, d, p in zip(units, placed.disk, placed.physical_start, strict=True):
        extents.append(Extent(start, u.sectors, d, p))
        start += u.sectors
    return ExtentMap(tuple(extents))
