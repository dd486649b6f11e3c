"""FIVE's synthetic setup shared by the five-* experiments: the 32-disk array of table 1, the file workload of
table 2, and files striped round robin as an extent map (each file cut into striping units, dealt over the
disks with one cursor across files in logical order, each disk packed in logical order), so one map serves
both striping and cooling (cooling moves the striping units, FIVE's extents)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.allocation import AllocUnit, round_robin_allocation, to_extent_map
from sim.array import Extent, ExtentMap
from sim.spec import DiskSpec
from sim.specs import load
from sim.workloads import FiveWorkload, five_synthetic

N_DISKS = 32
SPEC_NAME = "five_table1"
#: Striping units in 1 KB blocks (FIVE 4.1.1): a track is 35 blocks, a cylinder 11 tracks; Gopt140 is
#: ceil(260 / 3) = 87 KB; Gopt (light load) 8 KB; Block 1 KB.
UNITS = {"Block": 1, "Gopt": 8, "Track": 35, "Gopt140": 87, "Cyl": 385}
#: The replays' backlog limit (SimConfig.max_outstanding): a run whose backlog exceeds it is saturated.
MAX_OUTSTANDING = 3_000
#: A saturated rate's response, as the papers' tables and ours print it.
INF = math.inf


def spec() -> DiskSpec:
    return load(SPEC_NAME)


def workload(seed: int, n_requests: int, rate_per_s: float, skew: str) -> FiveWorkload:
    """FIVE's workload; the same seed gives the same files, ranking and chosen files at every rate (only the
    arrival times scale), so the rates of one sweep differ only in load."""
    return five_synthetic(np.random.default_rng(seed), n_requests=n_requests, rate_per_s=rate_per_s, skew=skew,
                          sector_size=spec().sector_size)


@dataclass(frozen=True, eq=False)
class StripedFiles:
    """The extent map and each extent's file (for cooling's same-file rule)."""

    extent_map: ExtentMap
    unit_file: np.ndarray


def striped_files(w: FiveWorkload, unit_blocks: int, n_disks: int = N_DISKS) -> StripedFiles:
    """Every file cut into units of unit_blocks (its last one shorter), dealt round robin (sim.allocation)."""
    order = np.argsort(w.file_start, kind="stable")
    ends = w.file_start[order] + w.file_sectors[order]
    if w.file_start[order[0]] != 0 or np.any(w.file_start[order[1:]] != ends[:-1]):
        raise ValueError("the workload's files do not tile the logical space")
    units, files = [], []
    for f in order.tolist():
        n = int(w.file_sectors[f])
        for j, start in enumerate(range(0, n, unit_blocks)):
            units.append(AllocUnit(str(f), j, 0.0, min(unit_blocks, n - start)))
            files.append(f)
    placed = round_robin_allocation(units, n_disks, capacity_sectors=spec().capacity_sectors)
    return StripedFiles(to_extent_map(units, placed), np.array(files, dtype=np.int64))


def striped_file_map(w: FiveWorkload, unit_blocks: np.ndarray | int, n_disks: int = N_DISKS) -> ExtentMap:
    """striped_files' extent map built with numpy, for a unit per file (array indexed like w's file table) or
    one for all: the same dealing (units in logical order, one cursor across files, each disk packed in
    logical order) without a Python object per unit, so Block-sized units over 8.5 million blocks stay cheap."""
    units = np.broadcast_to(np.asarray(unit_blocks, dtype=np.int64), w.file_sectors.shape)
    if np.any(units <= 0):
        raise ValueError("striping units must be positive block counts")
    order = np.argsort(w.file_start, kind="stable")
    size, unit = w.file_sectors[order], units[order]
    count = -(-size // unit)
    first = np.repeat(np.cumsum(count) - count, count)          # each unit's file's first unit index
    j = np.arange(int(count.sum()), dtype=np.int64) - first      # unit index within its file
    file_size, file_unit = np.repeat(size, count), np.repeat(unit, count)
    length = np.minimum(file_unit, file_size - j * file_unit)
    disk = np.arange(len(length), dtype=np.int64) % n_disks
    by_disk = np.argsort(disk, kind="stable")
    held = np.bincount(disk, weights=length, minlength=n_disks).astype(np.int64)
    if int(held.max()) > spec().capacity_sectors:
        raise ValueError(f"disk {int(held.argmax())} would hold {int(held.max())} sectors, beyond its capacity "
                         f"{spec().capacity_sectors}")
    physical = np.empty_like(length)                            # each disk packed in logical order
    physical[by_disk] = np.cumsum(length[by_disk]) - length[by_disk] - np.repeat(np.cumsum(held) - held, 
                                                                                  np.bincount(disk, minlength=n_disks))
    logical = np.cumsum(length) - length
    return ExtentMap(tuple(Extent(int(a), int(b), int(c), int(d))
                           for a, b, c, d in zip(logical.tolist(), length.tolist(), disk.tolist(), physical.tolist(),
                                                 strict=True)))
