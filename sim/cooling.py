"""FIVE's disk cooling (section 3.2, Figure 5) as a simulator policy: every N arrivals or T simulated
seconds, when the hottest disk's heat exceeds the mean by more than delta, move the hottest-temperature
extent of that disk to the coolest disk that can take it; the copy is a read on the source and a write
on the target through the normal queues (RemapEvent with migrate). Heat comes from the interarrival
tracker (sim.tracker) fed with the requests that have arrived so far.

    policy = DiskCooling(CoolingConfig(every_requests=100, delta=0.05, k=10))
    run_with_policy(sim, policy)          # sim with an ExtentMap layout
    policy.moves_table()                  # one row per executed move (moves_table)

Choices where the paper is open (each tested in tests/sim/test_cooling.py):
- "the source disk's queue is not empty" counts waiting sub-requests only, not the one in service
  (FIVE 4.2.1 reads a queue length of 1.6 as "1 request in service and 0.6 waiting");
- the target must not end up hotter than the source: move when H_t + H_e <= H_s - H_e (section 3.2's
  text; Figure 5's "H_t' < H_e" cannot hold for any H_t >= 0 and is read as H_t' < H_s', the text's
  version also allowing a move that leaves both equal);
- as in Figure 5, only the first (extent, target) pair found is checked by step 5: a failed check means
  no move in this invocation; extents with no heat are not candidates (moving them gains nothing);
- ties: the lowest disk index is hottest/coolest first, the lowest unit index first among equal temperatures;
- an extent of unknown heat (fewer than two requests so far) counts as 0;
- pseudo requests for aging happen at each invocation (the demon's period is the cooling period);
- the space an extent leaves is free at once (the simulator moves no data, so nothing is overwritten);
  room means a contiguous free range of the unit's size (first fit);
- DHV variant: step 5 moves when the variance of the disk heats drops; with dhv_copy_cost the copy
  adds its blocks over the last window's length to both disks' heats first;
- fragments: the map's units are fragments (fragment_map), ranked by heat, with no same-file rule.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa
from numba import njit

from blockheat.sim import _kernel as K
from blockheat.sim.array import LP_SHIFT, Extent, ExtentMap, ExtentTable, LayoutArrays, RemapEvent
from blockheat.sim.engine import PolicyBase, Window
from blockheat.sim.stats import arrow_type
from blockheat.sim.tracker import InterarrivalTracker, split_into_units

if TYPE_CHECKING:
    from blockheat.sim.engine import Simulation

__all__ = ["CoolingConfig", "CoolingMove", "DiskCooling", "Step", "cooling_step", "fragment_map", "moves_table"]

OBJECTIVES = ("max", "variance")
UNITS = ("extent", "fragment")

@dataclass(frozen=True)
class CoolingConfig:
    """every_requests (N arrivals) or every_s (simulated seconds) between invocations; delta the trigger
    (hottest > mean x (1 + delta)); k and aging for the tracker; objective "max" (Figure 5) or "variance"
    (disk-heat variance); unit "extent" or "fragment"; migrate: the copy costs I/O; max_moves per call."""

    every_requests: int | None = 100
    every_s: float | None = None
    delta: float = 0.05
    k: int = 10
    aging: bool = True
    objective: str = "max"
    unit: str = "extent"
    migrate: bool = True
    dhv_copy_cost: bool = False
    max_moves: int = 1

    def __post_init__(self) -> None:
        if (self.every_requests is None) == (self.every_s is None):
            raise ValueError(f"give exactly one of every_requests and every_s, got {self.every_requests} and "
                             f"{self.every_s}")
        if self.every_requests is not None and self.every_requests <= 0:
            raise ValueError(f"every_requests must be > 0, got {self.every_requests}")
        if self.every_s is not None and not (self.every_s > 0 and math.isfinite(self.every_s)):
            raise ValueError(f"every_s must be a positive number, got {self.every_s}")
        if not self.delta >= 0:
            raise ValueError(f"delta must be >= 0, got {self.delta}")
        if self.k < 2:
            raise ValueError(f"k must be >= 2, got {self.k}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        if self.max_moves <= 0:
            raise ValueError(f"max_moves must be > 0, got {self.max_moves}")


class Step(NamedTuple):
    """One cooling decision: outcome is "move", "balanced" (no trigger), "no_target", "source_queue",
    "target_hotter" (max objective) or "no_gain" (variance objective); unit/source/target are -1 when
    not reached."""

    outcome: str
    unit: int
    source: int
    target: int


def cooling_step(disk_heat: np.ndarray, unit_heat: np.ndarray, unit_sectors: np.ndarray, unit_disk: np.ndarray,
                 unit_file: np.ndarray, queue_len: np.ndarray, largest_gap: np.ndarray, *, delta: float = 0.05,
                 objective: str = "max", unit: str = "extent", copy_span_s: float | None = None) -> Step:
    """Figure 5 on arrays: disks' heats, units' heats, sizes, disks and files, disks' waiting queues and
    largest contiguous free ranges (sectors). With copy_span_s, the variance test first adds the copy's
    heat (the unit's sectors over copy_span_s seconds) to both disks."""
    n_disks = len(disk_heat)
    source = int(np.argmax(disk_heat))                                       # step 1
    if not disk_heat[source] > disk_heat.mean() * (1.0 + delta):             # step 2
        return Step("balanced", -1, source, -1)
    on_source = np.flatnonzero((unit_disk == source) & (unit_heat > 0))
    rank = unit_heat[on_source] if unit == "fragment" else unit_heat[on_source] / unit_sectors[on_source]
    by_heat = np.lexsort((np.arange(n_disks), disk_heat))                    # ascending, ties by index
    chosen, target = -1, -1
    for e in _descending(on_source, rank):                                   # step 3
        if unit == "extent":
            holding = np.zeros(n_disks, dtype=bool)
            holding[unit_disk[unit_file == unit_file[e]]] = True
        else:
            holding = np.arange(n_disks) == source
        for t in by_heat:                                                    # step 4
            if not holding[t] and largest_gap[t] >= unit_sectors[e]:
                chosen, target = int(e), int(t)
                break
        if target >= 0:
            break
    if target < 0:
        return Step("no_target", -1, source, -1)
    return _decide(disk_heat, float(unit_heat[chosen]), int(unit_sectors[chosen]), chosen, source, target, queue_len,
                   objective=objective, copy_span_s=copy_span_s)


def _decide(disk_heat: np.ndarray, h_e: float, sectors_e: int, chosen: int, source: int, target: int,
            queue_len: np.ndarray, *, objective: str, copy_span_s: float | None) -> Step:
    """Figure 5's step 5 for the (extent, target) pair found: the source's queue, then the objective."""
    if queue_len[source] > 0:
        return Step("source_queue", chosen, source, target)
    if objective == "max":
        if disk_heat[target] + h_e > disk_heat[source] - h_e:
            return Step("target_hotter", chosen, source, target)
        return Step("move", chosen, source, target)
    copy_heat = 0.0 if copy_span_s is None else float(sectors_e) / copy_span_s
    after = disk_heat.astype(np.float64).copy()
    after[source] += copy_heat - h_e
    after[target] += copy_heat + h_e
    if not after.var() < disk_heat.var():
        return Step("no_gain", chosen, source, target)
    return Step("move", chosen, source, target)


@njit(cache=True, nogil=True)
def _scan(known: np.ndarray, work: np.ndarray, unaged: np.ndarray, aging_from: np.ndarray, at_us: float,
          aging: bool, unit_disk: np.ndarray, unit_sectors: np.ndarray, n_disks: int,
          by_temperature: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """One pass over the units with an estimate (known, ascending; the others have no heat): the disks' heats
    (each unit's tracked heat, aged at at_us when asked, summed in index order as np.bincount does) and per disk
    its first candidate, the unit of highest rank (temperature, or heat for fragments) among those with heat > 0,
    ties to the lowest index (-1: none), with that unit's heat."""
    disk_heat = np.zeros(n_disks)
    best = np.full(n_disks, -1, dtype=np.int64)
    best_rank = np.zeros(n_disks)
    best_heat = np.zeros(n_disks)
    for u in known:
        h = unaged[u]
        if aging:
            gap = at_us - aging_from[u]
            aged = work[u] / (gap if gap > 1.0 else 1.0)
            h = aged if aged < h else h
        d = unit_disk[u]
        disk_heat[d] += h
        if h > 0.0:
            b = best[d]
            # Same size as the best so far and less heat: a lower (or equal) temperature, no division needed.
            if b >= 0 and h < best_heat[d] and unit_sectors[u] == unit_sectors[b]:
                continue
            r = h / unit_sectors[u] if by_temperature else h
            if b < 0 or r > best_rank[d]:
                best[d] = u
                best_rank[d] = r
                best_heat[d] = h
    return disk_heat, best, best_heat


def _descending(units: np.ndarray, rank: np.ndarray) -> Iterator[int]:
    """`units` by descending rank, ties by index (units ascending); the first without a sort, since the
    hottest unit usually finds a target and a demon call rarely needs a second."""
    if len(units) == 0:
        return
    yield int(units[np.argmax(rank)])                                        # the first maximum
    yield from units[np.lexsort((units, -rank))[1:]].tolist()


@dataclass(frozen=True)
class CoolingMove:
    """One executed move (a row of moves_table; the `cooling_moves` table stores these columns after its keys)."""

    time_us: float
    unit: int
    unit_kind: str
    file: int
    logical_start: int
    sectors: int
    bytes: int
    from_disk: int
    to_disk: int
    from_physical_start: int
    to_physical_start: int
    unit_heat: float
    unit_temperature: float
    source_heat_before: float
    source_heat_after: float
    target_heat_before: float
    target_heat_after: float
    mean_disk_heat: float
    source_queue: int


def free_ranges(unit_disk: np.ndarray, unit_pstart: np.ndarray, unit_len: np.ndarray, n_disks: int,
                capacity: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per disk, the (starts, lengths) of its free ranges in address order."""
    order = np.lexsort((unit_pstart, unit_disk))
    bounds = np.searchsorted(unit_disk[order], np.arange(n_disks + 1))
    return [_gaps(unit_pstart[order[bounds[d]:bounds[d + 1]]], unit_len[order[bounds[d]:bounds[d + 1]]], capacity)
            for d in range(n_disks)]


def _gaps(starts: np.ndarray, lengths: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Free ranges around occupied ranges given in address order."""
    gap_lo = np.concatenate([[0], starts + lengths])
    gap_hi = np.concatenate([starts, [capacity]])
    keep = gap_hi > gap_lo
    return gap_lo[keep], gap_hi[keep] - gap_lo[keep]


def _disk_free(unit_disk: np.ndarray, unit_pstart: np.ndarray, unit_len: np.ndarray, d: int,
               capacity: int) -> tuple[np.ndarray, np.ndarray]:
    mine = np.flatnonzero(unit_disk == d)
    mine = mine[np.argsort(unit_pstart[mine], kind="stable")]
    return _gaps(unit_pstart[mine], unit_len[mine], capacity)


@dataclass
class DiskCooling(PolicyBase):
    """The cooling demon as a sim.engine Policy (run it with sim.engine.run_with_policy). unit_file: the
    file of each unit of the extent map (default: the traced device holding its logical start)."""

    config: CoolingConfig = field(default_factory=CoolingConfig)
    unit_file: np.ndarray | None = None
    moves: list[CoolingMove] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.interval_us = self.config.every_s * 1e6 if self.config.every_s is not None else 1_000_000.0
        self._tracker: InterarrivalTracker | None = None
        self._files = np.zeros(0, dtype=np.int64)
        self._file_ids = np.zeros(0, dtype=np.int64)       # the files numbered 0.. (rows of _holding)
        self._prev_us = 0.0
        # The placement the demon works on: the live map as of the last call with that call's moves applied
        # (a copy kept across calls; units only change by remap events, so each call compares the remapped
        # units alone); per disk its free ranges, and per (file, disk) how many units of the file it holds.
        self._seen_disk = np.zeros(0, dtype=np.int64)
        self._seen_pstart = np.zeros(0, dtype=np.int64)
        self._free: list[tuple[np.ndarray, np.ndarray]] = []
        self._largest = np.zeros(0, dtype=np.int64)        # per disk its largest free range (sectors)
        self._holding = np.zeros((0, 0), dtype=np.int64)
        self._watched = np.zeros(0, dtype=np.int64)        # units named by any remap event so far
        self._watched_events = -1

    def start(self, sim: Simulation) -> None:
        if not isinstance(sim.array.layout, ExtentMap | ExtentTable):
            raise ValueError("disk cooling needs an extent map layout (ExtentMap or ExtentTable)")
        if sim.config.closed_loop is not None:
            # The tracker and the every-N stops read requests in arrival order, which closed loops do not keep.
            raise ValueError("disk cooling runs open loop only (the run has a closed loop)")
        lay = sim.layout
        n = len(lay.ext_lstart)
        self._tracker = InterarrivalTracker(n, self.config.k)
        if self.unit_file is None:
            self._files = np.searchsorted(sim.dev_base, lay.ext_lstart, side="right").astype(np.int64) - 1
        else:
            files = np.asarray(self.unit_file, dtype=np.int64)
            if files.shape != (n,):
                raise ValueError(f"unit_file needs one file per unit ({n}), got shape {files.shape}")
            self._files = files
        self._file_ids = np.unique(self._files, return_inverse=True)[1].astype(np.int64).reshape(-1)
        self._prev_us = sim.now_us
        self._seen_disk = np.zeros(0, dtype=np.int64)

    @property
    def unit_files(self) -> np.ndarray:
        """The file of each unit (set by start)."""
        return self._files

    def next_stop_us(self, sim: Simulation, start_us: float) -> float:
        """The arrival of the N-th next request (every_requests), else start + every_s."""
        n = self.config.every_requests
        if n is None:
            return start_us + self.interval_us

        idx = int(sim.core.si[K.SI_ARRIVED]) + n - 1 - sim.request_base
        arrivals = sim.requests.arrival_us
        if idx >= len(arrivals) and sim.core.si[K.CI_MORE]:
            raise ValueError("cooling every_requests looks ahead in the requests: a streamed run needs every_s")
        return float(arrivals[idx]) if idx < len(arrivals) else math.inf

    def on_interval(self, sim: Simulation, window: Window) -> Sequence[RemapEvent]:
        """One demon call. Its cost is one compiled pass over the units with a heat estimate (the disks' heats and
        each disk's first candidate) plus work per remapped unit; Figure 5 on whole arrays (cooling_step) runs only when
        the first candidate finds no target or for the second and later moves of a call (max_moves > 1)."""
        assert self._tracker is not None, "start() runs first"
        cfg = self.config
        lay = sim.layout
        r = sim.requests
        unit, t_us, blocks = split_into_units(lay.ext_lstart, sim.dev_base, r.arrival_us, r.device, r.lbn, r.sectors,
                                              window.first_request - sim.request_base,
                                              window.end_request - sim.request_base,
                                              index=(lay.ext_index, int(lay.params[LP_SHIFT])))
        self._tracker.observe(unit, t_us, blocks)
        now = sim.now_us
        n_disks = sim.array.n_disks
        capacity = sim.spec.capacity_sectors
        unit_len = lay.ext_len
        self._sync(lay, n_disks, capacity)
        unit_disk, unit_pstart = self._seen_disk, self._seen_pstart
        at_us = now if cfg.aging else None
        _, work, unaged, aging_from = self._tracker.estimates()
        disk_heat, best, best_heat = _scan(self._tracker.known_units(), work, unaged, aging_from, float(now), cfg.aging,
                                           unit_disk, unit_len, n_disks, cfg.unit == "extent")
        queue = sim.disk_queue_lengths()
        span_s = max(now - self._prev_us, 1.0) / 1e6
        self._prev_us = now
        copy_span_s = span_s if cfg.dhv_copy_cost else None
        free = self._free
        events: list[RemapEvent] = []
        heat = None                                    # every unit's heat, made only when cooling_step needs it
        for i in range(cfg.max_moves):
            largest = self._largest
            step = None if i else self._first_step(disk_heat, best, best_heat, unit_len, queue, largest, copy_span_s)
            if step is None:
                if heat is None:
                    heat = self._tracker.heat(at_us=at_us)
                step = cooling_step(disk_heat, heat, unit_len, unit_disk, self._files, queue, largest, delta=cfg.delta,
                                    objective=cfg.objective, unit=cfg.unit, copy_span_s=copy_span_s)
            self.outcomes[step.outcome] = self.outcomes.get(step.outcome, 0) + 1
            if step.outcome != "move":
                break
            e, s, t = step.unit, step.source, step.target
            starts, lengths = free[t]
            pstart = int(starts[np.flatnonzero(lengths >= unit_len[e])[0]])
            h_e = float(heat[e]) if heat is not None else float(best_heat[s])
            self.moves.append(CoolingMove(
                now, e, cfg.unit, int(self._files[e]), int(lay.ext_lstart[e]), int(unit_len[e]),
                int(unit_len[e]) * sim.spec.sector_size, s, t, int(unit_pstart[e]), pstart, h_e,
                h_e / float(unit_len[e]), float(disk_heat[s]), float(disk_heat[s] - h_e), float(disk_heat[t]),
                float(disk_heat[t] + h_e), float(disk_heat.mean()), int(queue[s])))
            events.append(RemapEvent(now, e, t, pstart, migrate=cfg.migrate))
            disk_heat[s] -= h_e
            disk_heat[t] += h_e
            self._place(np.array([e]), np.array([t]), np.array([pstart]))
            for d in (s, t):
                self._set_free(d, _disk_free(unit_disk, unit_pstart, unit_len, d, capacity))
        return events

    def _first_step(self, disk_heat: np.ndarray, best: np.ndarray, best_heat: np.ndarray, unit_len: np.ndarray,
                    queue: np.ndarray, largest: np.ndarray, copy_span_s: float | None) -> Step | None:
        """cooling_step's answer when the trigger is not met or the source's first candidate (best[source])
        finds a target; None when cooling_step has to walk the further candidates."""
        cfg = self.config
        n_disks = len(disk_heat)
        source = int(np.argmax(disk_heat))
        if not disk_heat[source] > disk_heat.mean() * (1.0 + cfg.delta):
            return Step("balanced", -1, source, -1)
        e = int(best[source])
        if e < 0:
            return Step("no_target", -1, source, -1)
        holding = (self._holding[self._file_ids[e]] > 0).tolist() if cfg.unit == "extent" else \
            [d == source for d in range(n_disks)]
        heats, room, size = disk_heat.tolist(), largest.tolist(), int(unit_len[e])
        for t in sorted(range(n_disks), key=heats.__getitem__):     # ascending heat, ties by index (stable)
            if not holding[t] and room[t] >= size:
                return _decide(disk_heat, float(best_heat[source]), size, e, source, t, queue,
                               objective=cfg.objective, copy_span_s=copy_span_s)
        return None

    def _sync(self, lay: LayoutArrays, n_disks: int, capacity: int) -> None:
        """Bring the demon's placement up to the live map: everything the first time, then the units remap
        events named (only they can have moved), with the free ranges of the disks they left or joined."""
        if len(self._seen_disk) != len(lay.ext_disk):
            self._seen_disk = lay.ext_disk.copy()
            self._seen_pstart = lay.ext_pstart.copy()
            self._free = free_ranges(self._seen_disk, self._seen_pstart, lay.ext_len, n_disks, capacity)
            self._largest = np.array([int(n.max()) if len(n) else 0 for _, n in self._free], dtype=np.int64)
            self._holding = np.zeros((int(self._file_ids.max(initial=0)) + 1, n_disks), dtype=np.int64)
            np.add.at(self._holding, (self._file_ids, self._seen_disk), 1)
            return
        if len(lay.rm_ext) != self._watched_events:
            self._watched = np.unique(lay.rm_ext)
            self._watched_events = len(lay.rm_ext)
        w = self._watched
        if not len(w):
            return
        changed = w[(lay.ext_disk[w] != self._seen_disk[w]) | (lay.ext_pstart[w] != self._seen_pstart[w])]
        if not len(changed):
            return
        disks = set(self._seen_disk[changed].tolist()) | set(lay.ext_disk[changed].tolist())
        self._place(changed, lay.ext_disk[changed], lay.ext_pstart[changed])
        for d in sorted(disks):
            self._set_free(d, _disk_free(self._seen_disk, self._seen_pstart, lay.ext_len, d, capacity))

    def _set_free(self, disk: int, ranges: tuple[np.ndarray, np.ndarray]) -> None:
        self._free[disk] = ranges
        self._largest[disk] = int(ranges[1].max()) if len(ranges[1]) else 0

    def _place(self, units: np.ndarray, disks: np.ndarray, pstarts: np.ndarray) -> None:
        """Set units' disks and starts in the demon's placement, keeping the per-(file, disk) counts."""
        np.subtract.at(self._holding, (self._file_ids[units], self._seen_disk[units]), 1)
        np.add.at(self._holding, (self._file_ids[units], disks), 1)
        self._seen_disk[units] = disks
        self._seen_pstart[units] = pstarts

    def moves_table(self) -> pa.Table:
        """The executed moves, one row each (moves_table)."""
        return moves_table(self.moves)


def moves_table(moves: Sequence[CoolingMove]) -> pa.Table:
    """Moves as a table: a column per CoolingMove field, in its order, typed by its annotation (never null). The
    `cooling_moves` table's contract (schemas/cooling_moves.py) is the one schema of these columns: the simulation
    stage casts to it, and tests/sim/test_table_schemas.py keeps the two in step."""
    return pa.table({f.name: pa.array([getattr(m, f.name) for m in moves], arrow_type(str(f.type)))
                     for f in fields(CoolingMove)})


def fragment_map(extent_map: ExtentMap, fragment_sectors: int) -> tuple[ExtentMap, np.ndarray]:
    """Each extent cut into fragments of fragment_sectors (the last one shorter), consecutive on the
    extent's disk: the map to run the fragment variant on, and each fragment's extent index."""
    if fragment_sectors <= 0:
        raise ValueError(f"fragment_sectors must be > 0, got {fragment_sectors}")
    if extent_map.remaps:
        raise ValueError("fragment_map takes a map without remap events")
    out: list[Extent] = []
    parent: list[int] = []
    for i, e in enumerate(extent_map.extents):
        for off in range(0, e.sectors, fragment_sectors):
            size = min(fragment_sectors, e.sectors - off)
            out.append(Extent(e.logical_start + off, size, e.disk, e.physical_start + off))
            parent.append(i)
    return ExtentMap(tuple(out)), np.array(parent, dtype=np.int64)
