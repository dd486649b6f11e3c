"""FIVE's synthetic setup shared by the five-* experiments: the 32-disk array of table 1, the file workload of
table 2, and files striped round robin as an extent map (each file cut into striping units, dealt over the
disks with one cursor across files in logical order, each disk packed in logical order), so one map serves
both striping and cooling (cooling moves the striping units, FIVE's extents), Gopt-140, the one tuned
global unit every five-* experiment uses (gopt140), and table 4's claim judged on five-striping's light-load
rows by request size (table4_claim)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from blockheat.libs.experiments.common import Claim, about
from blockheat.libs.plans.striping_advisor import DiskModel, PhaseB, Workload, advise, phase_b
from blockheat.sim import (
    AllocUnit,
    DiskArray,
    DiskSpec,
    Extent,
    ExtentMap,
    FiveWorkload,
    LayoutArrays,
    five_synthetic,
    round_robin_allocation,
    to_extent_map,
)
from blockheat.sim import load_spec as load

N_DISKS = 32
SPEC_NAME = "five_table1"
#: Fixed striping units in 1 KB blocks (FIVE 4.1.1): a track is 35 blocks, a cylinder 11 tracks; Block 1 KB.
#: The tuned units (Gopt, Gopt-140) are computed (gopt140, five_striping.all_file_units).
UNITS = {"Block": 1, "Track": 35, "Cyl": 385}
#: The arrival rate Gopt-140 and Opt-140 are tuned for, and FIVE's printed Gopt-140: ceil(260 / 3) KB.
TUNED_RATE = 140.0
PAPER_GOPT140 = 87
#: The replays' backlog limit (SimConfig.max_outstanding): a run whose backlog exceeds it is saturated.
MAX_OUTSTANDING = 3_000
#: A saturated rate's response, as the papers' tables and ours print it.
INF = math.inf


def spec() -> DiskSpec:
    return load(SPEC_NAME)


@cache
def disk_model() -> DiskModel:
    return DiskModel.from_spec(spec())


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
    return ExtentMap(tuple(map(Extent, logical.tolist(), length.tolist(), disk.tolist(), physical.tolist())))


@dataclass(frozen=True)
class SharedArray(DiskArray):
    """A DiskArray that builds its numeric layout once and hands each run a fresh copy: building it walks
    every extent in Python (about 250,000 here), which costs more than a tiny run. Runs may change the copy
    (cooling's remaps), never the kept one."""

    _built: dict[tuple[int, bytes], LayoutArrays] = field(default_factory=dict, compare=False, repr=False)

    def compile(self, capacity: int, dev_base: np.ndarray) -> LayoutArrays:
        key = (capacity, np.ascontiguousarray(dev_base, dtype=np.int64).tobytes())
        if key not in self._built:
            self._built[key] = super().compile(capacity, dev_base)
        return LayoutArrays(*(a.copy() for a in self._built[key]))


@dataclass(frozen=True, eq=False)
class TunedUnit:
    """Figure 2's global striping unit for whole-file requests of mean size r_bar (blocks) at rate_per_s:
    unit = ceil(r_bar / min(p_opt, p_bar)); phase_b holds equation 25 and rho for P = 1, 2, ..."""

    rate_per_s: float
    r_bar: float
    p_opt: int
    p_bar: int
    unit: int
    phase_b: PhaseB


def tuned_unit(w: FiveWorkload, rate_per_s: float = TUNED_RATE) -> TunedUnit:
    """The advisor's global unit ("five") for w's requested files (R-bar = their mean size, aligned)."""
    r_bar = float(w.file_sectors[w.file_class < 2].mean())
    m = disk_model()
    recs = advise(m, n_disks=N_DISKS, workload=Workload(r_bar, r_bar, rate_per_s, aligned=True))
    rec = next(r for r in recs if r.file == "*" and r.method == "five")
    b = phase_b(m, r_bar, rate_per_s, N_DISKS)
    return TunedUnit(rate_per_s, r_bar, int(rec.phase_a_p or 0), int(rec.phase_b_p or 0), rec.striping_unit_blocks, b)


@cache
def gopt140(seed: int = 1) -> TunedUnit:
    """Gopt-140 for the files of `seed`'s workload (the files do not depend on the skew, rate or length):
    the one unit five-striping and five-cooling stripe "Gopt140" with."""
    return tuned_unit(workload(seed, 1, 1.0, "uniform"))


def striped_file_units(w: FiveWorkload, unit_blocks: np.ndarray | int, n_disks: int = N_DISKS) -> StripedFiles:
    """striped_files through striped_file_map (numpy): the same map and each unit's file."""
    units = np.broadcast_to(np.asarray(unit_blocks, dtype=np.int64), w.file_sectors.shape)
    order = np.argsort(w.file_start, kind="stable")
    count = -(-w.file_sectors[order] // units[order])
    return StripedFiles(striped_file_map(w, units, n_disks), np.repeat(order, count).astype(np.int64))


#: FIVE table 4 (ms), the request sizes between 50 and 500 KB: size class -> (Opt, Track).
TABLE4_OPT_TRACK = {"51-100": (22.97, 31.23), "101-200": (24.58, 34.56), "201-500": (27.48, 36.38)}


def table4_claim(size_rows: list[dict]) -> Claim:
    """Table 4's "in the order of 30 percent" gain of Opt over Track for requests of 50 to 500 KB, judged on
    five-striping's light-load rows by size class (method, size_class, mean_response_ms): in each of the three
    classes, Track / Opt - 1 within 20 % of the paper's own (its table's 36.0, 40.6 and 32.4 %)."""
    by = {(r["method"], r["size_class"]): r["mean_response_ms"] for r in size_rows}
    ours = {c: by[("Track", c)] / by[("Opt", c)] - 1 for c in TABLE4_OPT_TRACK}
    paper = {c: t / o - 1 for c, (o, t) in TABLE4_OPT_TRACK.items()}
    near = {c: about(ours[c], paper[c]) for c in ours}
    holds = all(near.values())
    return Claim(
        "Opt about 30 % faster than Track for 50-500 KB requests",
        "at λ = 1, for each size class from 51 to 500 KB, Track's mean over Opt's minus 1 within 20 % of the "
        "paper's (table 4)",
        ", ".join(f"{c} KB: +{100 * paper[c]:.1f} %" for c in paper),
        ", ".join(f"{c} KB: {100 * ours[c]:+.1f} %" for c in ours), holds,
        "" if holds else
        f"the gain differs by more than a fifth in the {', '.join(c for c, ok in near.items() if not ok)} KB "
        "class(es): "
        "see light_load_by_size (each class's mean response per method)",
        quote="Compared to the Track and Cyl methods, Opt achieves significant improvements in the order of 30 "
              "percent (in the case of Track) for medium to large requests between 50 and 500 KBytes.",
        where="section 4.1.1, table 4", wording="about")
