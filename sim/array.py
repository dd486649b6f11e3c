"""Disk arrays: D identical disks behind one logical-to-physical mapping (as traced, concatenated, striped,
random, or an explicit extent map that remap events change during a run), compiled for the engine."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numba import njit

__all__ = [
    "SCHEDULERS",
    "AsTraced",
    "Concatenated",
    "DiskArray",
    "Extent",
    "ExtentMap",
    "ExtentTable",
    "Layout",
    "LayoutArrays",
    "RandomDisk",
    "RemapEvent",
    "Striped",
]

LAYOUT_AS_TRACED, LAYOUT_CONCAT, LAYOUT_STRIPED, LAYOUT_RANDOM, LAYOUT_EXTENTS = range(5)
# LayoutArrays.params indices.
LP_KIND, LP_DISKS, LP_UNIT, LP_WIDTH, LP_FIRST, LP_CAPACITY, LP_SHIFT = range(7)
LP_COUNT = 7
SCHEDULERS = {"fcfs": 0, "sstf": 1, "clook": 2}


def extent_index(lstart: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, int]:
    """(index, shift): index[b] is the extent holding logical sector b << shift, for b up to one past the
    extents' end; shift makes a bucket about as long as an average extent. The extent holding a sector x lies
    between index[x >> shift] and index[(x >> shift) + 1], so the loop's lookup searches one or two extents
    where a binary search over all of them takes ~20 dependent, cache-missing reads (1.3 M extents at 100 M
    requests on 40 disks)."""
    if len(lstart) == 0:
        return np.zeros(0, dtype=np.int64), 0
    end = int(lstart[-1] + length[-1])
    shift = max(0, (max(1, end // len(lstart))).bit_length() - 1)
    starts = np.arange((end >> shift) + 2, dtype=np.int64) << shift
    return np.searchsorted(lstart, starts, side="right").astype(np.int64) - 1, shift


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def index_slot(index: np.ndarray, shift: int, x: int) -> int:  # pragma: no cover
    """The entry of extent_index's index where the search for logical sector x starts (the last for x past the
    end)."""
    return min(x >> shift, index.shape[0] - 1)


@njit(cache=True, nogil=True, _nrt=False)
def extent_at(lstart: np.ndarray, index: np.ndarray, shift: int, x: int) -> int:  # pragma: no cover
    """The extent holding logical sector x (the last one for x past the end), through extent_index's index: a
    binary search between the index's entries x >> shift and the next (usually one or two extents apart)."""
    last = index.shape[0] - 1
    slot = index_slot(index, shift, x)
    lo = index[slot]
    hi = index[slot + 1] if slot < last else lstart.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if lstart[mid] <= x:
            lo = mid
        else:
            hi = mid - 1
    return int(lo)


class LayoutArrays(NamedTuple):
    """A layout compiled for numba: scalar params, the extent table, the remap schedule, device bases."""

    params: np.ndarray        # int64 [LP_COUNT]
    ext_lstart: np.ndarray    # int64 [E] logical start sector of each extent (sorted, tiling from 0)
    ext_len: np.ndarray       # int64 [E]
    ext_disk: np.ndarray      # int64 [E] (changed in place by remap events)
    ext_pstart: np.ndarray    # int64 [E] (changed in place by remap events)
    rm_time: np.ndarray       # float64 [R] remap times (us), non-decreasing
    rm_ext: np.ndarray        # int64 [R]
    rm_disk: np.ndarray       # int64 [R]
    rm_pstart: np.ndarray     # int64 [R]
    rm_migrate: np.ndarray    # int64 [R] 1 = copy the extent (read old, then write new) as extra I/O
    dev_base: np.ndarray      # int64 [devices] logical start of each traced device
    ext_index: np.ndarray     # int64 [B] the extent holding logical sector b << params[LP_SHIFT] (extent_index)


@dataclass(frozen=True)
class AsTraced:
    """Each traced device on its own disk (device index = disk index), addresses unchanged."""


@dataclass(frozen=True)
class Concatenated:
    """The traced devices, end to end, laid over the disks end to end."""


@dataclass(frozen=True)
class Striped:
    """Stripe units of unit_sectors round-robin over `width` disks starting at first_disk (width None: all)."""

    unit_sectors: int
    width: int | None = None
    first_disk: int = 0

    def __post_init__(self) -> None:
        if self.unit_sectors <= 0:
            raise ValueError(f"stripe unit_sectors must be > 0, got {self.unit_sectors}")
        if self.width is not None and self.width <= 0:
            raise ValueError(f"stripe width must be > 0, got {self.width}")
        if self.first_disk < 0:
            raise ValueError(f"stripe first_disk must be >= 0, got {self.first_disk}")


@dataclass(frozen=True)
class RandomDisk:
    """Each request to a uniformly random disk (from the run's seeded generator), at its own address
    modulo the disk capacity (moved down to fit when it would run past the end)."""


@dataclass(frozen=True)
class Extent:
    """Logical sectors [logical_start, logical_start + sectors) stored on `disk` from physical_start."""

    logical_start: int
    sectors: int
    disk: int
    physical_start: int


@dataclass(frozen=True)
class RemapEvent:
    """At time_us, extent number `extent` moves to (disk, physical_start); requests arriving from then on
    go to the new place. With migrate, the move costs a read of the old copy then a write of the new one,
    queued like any I/O and reported as migration I/O (the extent map switches at time_us regardless)."""

    time_us: float
    extent: int
    disk: int
    physical_start: int
    migrate: bool = True


@dataclass(frozen=True)
class ExtentMap:
    """An explicit map: extents tile the logical space from sector 0 in order, without gaps."""

    extents: tuple[Extent, ...]
    remaps: tuple[RemapEvent, ...] = ()

    def __post_init__(self) -> None:
        if not self.extents:
            raise ValueError("an extent map needs at least one extent")
        expect = 0
        for i, e in enumerate(self.extents):
            if e.logical_start != expect:
                raise ValueError(f"extent {i}: logical_start must be {expect} (extents tile the logical space "
                                 f"in order), got {e.logical_start}")
            if e.sectors <= 0:
                raise ValueError(f"extent {i}: sectors must be > 0, got {e.sectors}")
            if e.disk < 0 or e.physical_start < 0:
                raise ValueError(f"extent {i}: disk and physical_start must be >= 0, got {e.disk}, {e.physical_start}")
            expect += e.sectors
        last = -np.inf
        for j, r in enumerate(self.remaps):
            if not 0 <= r.extent < len(self.extents):
                raise ValueError(f"remap {j}: extent must be in [0, {len(self.extents)}), got {r.extent}")
            if r.time_us < last:
                raise ValueError(f"remap {j}: times must not decrease, got {r.time_us} after {last}")
            if r.disk < 0 or r.physical_start < 0:
                raise ValueError(f"remap {j}: disk and physical_start must be >= 0, got {r.disk}, {r.physical_start}")
            last = r.time_us

    @property
    def logical_sectors(self) -> int:
        return self.extents[-1].logical_start + self.extents[-1].sectors

    @classmethod
    def round_robin(cls, logical_sectors: int, extent_sectors: int, n_disks: int,
                    remaps: Sequence[RemapEvent] = ()) -> ExtentMap:
        """Extents of extent_sectors dealt round-robin over the disks, packed from sector 0 on each disk."""
        if logical_sectors <= 0 or extent_sectors <= 0 or n_disks <= 0:
            raise ValueError(f"round_robin needs positive sizes, got logical_sectors={logical_sectors}, "
                             f"extent_sectors={extent_sectors}, n_disks={n_disks}")
        extents = []
        for i, start in enumerate(range(0, logical_sectors, extent_sectors)):
            size = min(extent_sectors, logical_sectors - start)
            extents.append(Extent(start, size, i % n_disks, (i // n_disks) * extent_sectors))
        return cls(tuple(extents), tuple(remaps))


@dataclass(frozen=True, eq=False)
class ExtentTable:
    """An extent map held as int64 arrays, without remaps (no Extent per entry): for maps of millions of
    extents, such as the pieces of a chunk of ALIS-redirected requests. Entry i maps logical sectors
    [logical_start[i], logical_start[i] + sectors[i]) to disk[i] from physical_start[i]; the entries tile
    the logical space from sector 0 in order, as an ExtentMap's extents do."""

    logical_start: np.ndarray
    sectors: np.ndarray
    disk: np.ndarray
    physical_start: np.ndarray

    def __post_init__(self) -> None:
        cols = [np.ascontiguousarray(getattr(self, n), dtype=np.int64)
                for n in ("logical_start", "sectors", "disk", "physical_start")]
        for name, col in zip(("logical_start", "sectors", "disk", "physical_start"), cols, strict=True):
            if col.ndim != 1 or len(col) != len(cols[0]):
                raise ValueError(f"ExtentTable.{name} must be one-dimensional, one entry per extent")
            object.__setattr__(self, name, col)
        lstart, sectors, disk, pstart = cols
        if not len(lstart):
            raise ValueError("an extent map needs at least one extent")
        bad = np.flatnonzero(sectors <= 0)
        if bad.size:
            raise ValueError(f"extent {int(bad[0])}: sectors must be > 0, got {int(sectors[bad[0]])}")
        bad = np.flatnonzero((disk < 0) | (pstart < 0))
        if bad.size:
            raise ValueError(f"extent {int(bad[0])}: disk and physical_start must be >= 0")
        expect = np.concatenate([[0], np.cumsum(sectors)[:-1]])
        bad = np.flatnonzero(lstart != expect)
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"extent {i}: logical_start must be {int(expect[i])} (extents tile the logical space "
                             f"in order), got {int(lstart[i])}")

    @classmethod
    def tiling(cls, sectors: np.ndarray, disk: np.ndarray, physical_start: np.ndarray) -> ExtentTable:
        """Extents of these sizes, end to end from logical sector 0."""
        sectors = np.asarray(sectors, dtype=np.int64)
        return cls(np.cumsum(sectors) - sectors, sectors, disk, physical_start)

    def __len__(self) -> int:
        return len(self.logical_start)

    @property
    def logical_sectors(self) -> int:
        return int(self.logical_start[-1] + self.sectors[-1])


Layout = AsTraced | Concatenated | Striped | RandomDisk | ExtentMap | ExtentTable


@dataclass(frozen=True)
class DiskArray:
    """n_disks identical disks, a layout, and the per-disk queue discipline (fcfs, sstf or clook)."""

    n_disks: int
    layout: Layout = field(default_factory=AsTraced)
    scheduler: str = "fcfs"

    def __post_init__(self) -> None:
        if self.n_disks <= 0:
            raise ValueError(f"n_disks must be > 0, got {self.n_disks}")
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler must be one of {', '.join(SCHEDULERS)}, got {self.scheduler!r}")
        lay = self.layout
        if isinstance(lay, Striped):
            width = lay.width or self.n_disks
            if width > self.n_disks or lay.first_disk >= self.n_disks:
                raise ValueError(f"stripe width {width} and first_disk {lay.first_disk} must fit in "
                                 f"{self.n_disks} disks")
        if isinstance(lay, ExtentMap):
            bad = [i for i, e in enumerate(lay.extents) if e.disk >= self.n_disks]
            bad_r = [j for j, r in enumerate(lay.remaps) if r.disk >= self.n_disks]
            if bad or bad_r:
                raise ValueError(f"extent map names disks beyond the array's {self.n_disks} (extents {bad[:5]}, "
                                 f"remaps {bad_r[:5]})")
        if isinstance(lay, ExtentTable):
            bad = np.flatnonzero(lay.disk >= self.n_disks)
            if bad.size:
                raise ValueError(f"extent map names disks beyond the array's {self.n_disks} (extents "
                                 f"{bad[:5].tolist()})")

    def compile(self, capacity: int, dev_base: np.ndarray) -> LayoutArrays:
        """Numeric form for a disk capacity (sectors) and the traced devices' logical bases."""
        lay = self.layout
        params = np.zeros(LP_COUNT, dtype=np.int64)
        params[LP_DISKS] = self.n_disks
        params[LP_CAPACITY] = capacity
        cols: dict[str, np.ndarray] = {name: np.zeros(0, dtype=np.int64) for name in LayoutArrays._fields}
        cols["rm_time"] = np.zeros(0)
        if isinstance(lay, AsTraced):
            params[LP_KIND] = LAYOUT_AS_TRACED
        elif isinstance(lay, Concatenated):
            params[LP_KIND] = LAYOUT_CONCAT
        elif isinstance(lay, Striped):
            params[LP_KIND] = LAYOUT_STRIPED
            params[LP_UNIT] = lay.unit_sectors
            params[LP_WIDTH] = lay.width or self.n_disks
            params[LP_FIRST] = lay.first_disk
        elif isinstance(lay, RandomDisk):
            params[LP_KIND] = LAYOUT_RANDOM
        elif isinstance(lay, ExtentTable):
            params[LP_KIND] = LAYOUT_EXTENTS
            over = np.flatnonzero(lay.physical_start + lay.sectors > capacity)
            if over.size:
                i = int(over[0])
                raise ValueError(f"extent {i} ends at sector {int(lay.physical_start[i] + lay.sectors[i])}, beyond "
                                 f"the disk capacity {capacity}")
            cols.update(ext_lstart=lay.logical_start, ext_len=lay.sectors, ext_disk=lay.disk.copy(),
                        ext_pstart=lay.physical_start.copy())
            cols["ext_index"], params[LP_SHIFT] = extent_index(lay.logical_start, lay.sectors)
        else:
            params[LP_KIND] = LAYOUT_EXTENTS
            for i, e in enumerate(lay.extents):
                if e.physical_start + e.sectors > capacity:
                    raise ValueError(f"extent {i} ends at sector {e.physical_start + e.sectors}, beyond the disk "
                                     f"capacity {capacity}")
            for j, r in enumerate(lay.remaps):
                if r.physical_start + lay.extents[r.extent].sectors > capacity:
                    raise ValueError(f"remap {j} moves extent {r.extent} past the disk capacity {capacity}")
            for col, attr in (("ext_lstart", "logical_start"), ("ext_len", "sectors"), ("ext_disk", "disk"),
                              ("ext_pstart", "physical_start")):
                cols[col] = np.array([getattr(e, attr) for e in lay.extents], dtype=np.int64)
            cols["ext_index"], params[LP_SHIFT] = extent_index(cols["ext_lstart"], cols["ext_len"])
            cols["rm_time"] = np.array([r.time_us for r in lay.remaps], dtype=np.float64)
            for col, attr in (("rm_ext", "extent"), ("rm_disk", "disk"), ("rm_pstart", "physical_start"),
                              ("rm_migrate", "migrate")):
                cols[col] = np.array([getattr(r, attr) for r in lay.remaps], dtype=np.int64)
        cols["params"] = params
        cols["dev_base"] = np.ascontiguousarray(dev_base, dtype=np.int64)
        return LayoutArrays(**cols)
