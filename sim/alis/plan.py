"""ALIS placements without Spark, for the simulator's redirector (sim.redirect): the lookaside directory of
each reorganization interval of a request stream, planned from the history up to the interval
("realizable") or from the interval's own references ("lookahead"), with the numeric cores of sim.alis
(count_pairs, prune_arrays, discover_runs, plan_area) and the definitions the Spark jobs use
(jobs/alis_graph.py, jobs/alis_layout.py): units are a volume's distinct request extents (ids in address
order), reference counts (reads and, with heat_writes, writes) aged by alpha, access graphs of the reads
aged by beta and pruned to the size budget each interval, runs of the pruned graph, the RA filled by
plan_area.

    schedule = plan_schedule(requests, volumes, AlisParams(), sector_size=512)    # one per interval
    schedule = plan_schedule_chunks(spill, facts.last_us, volumes, AlisParams(), sector_size=512,
                                    device_volume=dv, device_offset=do)         # the same, over chunks
    directory = plan_window(requests, volumes, AlisParams(), window=3, sector_size=512)
    plan = plan_trace_window(requests_table, AlisParams(), window=3, sector_size=512)
    plan.to_arrow()        # the lookaside directory in bytes, alis_layout's columns

Choices (tested in tests/sim/alis/test_plan.py): intervals are [k I, (k + 1) I) of the requests'
arrival times (interval_id = arrival // I, as unit_refs counts from the trace's first record); the
realizable plan built at the end of interval k takes effect at (k + 1) I, so interval 0 runs without
copies; the lookahead plan of interval k takes effect at k I. Addresses are the volume's sectors (the
spec's sectors), so plan_area's byte arguments carry sectors here; the graph budget is in bytes
(sector_size x storage used x graph_share). Background requests are not planned on.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from blockheat.sim.alis.graph import count_pairs, merge_counts, prune_arrays
from blockheat.sim.alis.layout import plan_area
from blockheat.sim.alis.runs import discover_runs
from blockheat.sim.alis.units import ExtentSet, packed, packing
from blockheat.sim.redirect import REGION_HEAT, REGION_RUN, Directory, Reorganization, Volume, device_mapping
from blockheat.sim.workloads import from_arrow

if TYPE_CHECKING:
    from blockheat.sim.alis.params import AlisParams
    from blockheat.sim.records import Requests

__all__ = ["IntervalState", "UnitExtents", "VolumeUnits", "WindowPlan", "interval_plans", "interval_states",
           "plan_schedule", "plan_schedule_chunks", "plan_trace_window", "plan_window", "unit_extents", "volume_units",
           "volumes_for"]


def volumes_for(device_sectors: Sequence[int], *, concatenated: bool, ra_share: float,
                ra_offset: float) -> tuple[list[Volume], np.ndarray, np.ndarray]:
    """(volumes, device_volume, device_offset): each traced device its own volume on its own disk, or
    (concatenated, the paper's choice for multi-volume workloads) all devices end to end in one volume on
    disk 0. Each volume gets an RA of ra_share of its size, ra_offset into it."""
    sizes = np.asarray(device_sectors, np.int64)
    if concatenated:
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        vol = Volume.with_area(0, int(sizes.sum()), ra_share=ra_share, ra_offset=ra_offset)
        return [vol], np.zeros(len(sizes), np.int64), offsets
    vols = [Volume.with_area(d, int(s), ra_share=ra_share, ra_offset=ra_offset) for d, s in enumerate(sizes)]
    return vols, np.arange(len(sizes), dtype=np.int64), np.zeros(len(sizes), np.int64)


@dataclass(frozen=True, eq=False)
class VolumeUnits:
    """One volume's reference stream as units: per request (in arrival order) its unit id (-1: another
    volume), and per unit its home extent (sectors)."""

    unit: np.ndarray
    home_sector: np.ndarray
    sectors: np.ndarray


def volume_units(requests: Requests, n_volumes: int, *, device_volume: np.ndarray,
                 device_offset: np.ndarray) -> list[VolumeUnits]:
    """Units of each volume: the distinct (home sector, sectors) of its requests, ids 0.. in that order
    (libs.alis.units.compute_reorg_units with request-sized units), and each request's unit."""
    dv, do = np.asarray(device_volume, np.int64), np.asarray(device_offset, np.int64)
    vol, a, n = _volume_columns(requests, dv, do)
    out = []
    for v, units in enumerate(unit_extents([requests], n_volumes, device_volume=dv, device_offset=do)):
        mine = np.flatnonzero(vol == v)
        unit = np.full(len(requests), -1, np.int64)
        unit[mine] = units.ids(a[mine], n[mine])
        out.append(VolumeUnits(unit, units.home_sector, units.sectors))
    return out


def _aged(current: tuple[np.ndarray, ...], previous: tuple[np.ndarray, ...], beta: float,
          n_units: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ALIS eq. 2 over the union of edges (a missing side counts 0), as libs.transforms.aging.age_values."""
    key_c = current[0] * n_units + current[1]
    key_p = previous[0] * n_units + previous[1]
    keys, inverse = np.unique(np.concatenate([key_c, key_p]), return_inverse=True)
    cur = np.zeros(len(keys))
    old = np.zeros(len(keys))
    cur[inverse[: len(key_c)]] = current[2]
    old[inverse[len(key_c):]] = previous[2]
    weight = beta * cur + (1.0 - beta) * old
    keep = weight > 0.0
    return keys[keep] // n_units, keys[keep] % n_units, weight[keep]


def _directory(v: int, vu: UnitExtents, heat: np.ndarray, graph: tuple[np.ndarray, ...], volume: Volume,
               params: AlisParams, sector_size: int) -> Directory:
    """One volume's RA from the heat per unit and the (pruned) graph: runs, then plan_area."""
    runs_cols: dict[str, np.ndarray] = {k: np.zeros(0, np.int64) for k in
                                        ("run_id", "rank", "position", "unit_id", "offset_bytes", "size_bytes")}
    if params.mode != "heat":
        found = discover_runs(*graph, tau=params.tau, f=params.f, threshold=params.run_threshold,
                              min_length=params.min_length)
        members = np.array([u for _, run in found for u in run], np.int64)
        runs_cols = {
            "run_id": np.array([rid for rid, run in found for _ in run], np.int64),
            "rank": np.array([r for r, (_, run) in enumerate(found) for _ in run], np.int64),
            "position": np.array([p for _, run in found for p in range(len(run))], np.int64),
            "unit_id": members,
            "offset_bytes": vu.home_sector[members],
            "size_bytes": vu.sectors[members],
        }
    hot_ids = np.flatnonzero(heat > 0) if params.mode != "run" else np.zeros(0, np.int64)
    hot = {"unit_id": hot_ids, "heat": heat[hot_ids], "offset_bytes": vu.home_sector[hot_ids],
           "size_bytes": vu.sectors[hot_ids]}
    plan = plan_area(runs_cols, hot, ra_bytes=volume.ra_sectors, mode=params.mode, layout=params.heat_layout,
                     extent_bytes=max(1, params.extent_bytes // sector_size))
    n = len(plan["unit_id"])
    region = np.array([REGION_RUN if r == "run" else REGION_HEAT for r in plan["region"]], np.int64)
    return Directory(np.full(n, v, np.int64), region, plan["run_id"], plan["unit_id"], plan["home_offset_bytes"],
                     plan["size_bytes"], plan["ra_offset_bytes"])


def _budget(volume: Volume, params: AlisParams, sector_size: int) -> int:
    return math.floor(volume.size_sectors * sector_size * params.graph_share)


@dataclass(frozen=True, eq=False)
class IntervalState:
    """What one volume's planner knows at the end of an interval: heat per unit (aged counts, or the
    interval's own counts for lookahead) and the access graph (aged and pruned, or the interval's own
    pruned graph): src, dst (unit ids), weight."""

    interval_id: int
    volume: int
    heat: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray


@dataclass(frozen=True, eq=False)
class UnitExtents:
    """One volume's units: the distinct (home sector, sectors) of its requests in address order (unit id =
    index), as volume_units numbers them."""

    home_sector: np.ndarray
    sectors: np.ndarray

    def ids(self, home: np.ndarray, sectors: np.ndarray) -> np.ndarray:
        """The unit id of each (home sector, sectors) given (each must be a unit)."""
        shift = packing(self.home_sector, self.sectors)
        if shift is None:
            if not len(self.home_sector):
                return np.zeros(len(home), np.int64)
            raise ValueError(f"volume sector {int(self.home_sector[-1])} too large to number units")
        keys = packed(self.home_sector, self.sectors, shift)
        return np.searchsorted(keys, packed(home, sectors, shift)).astype(np.int64)


def _volume_columns(requests: Requests, device_volume: np.ndarray, device_offset: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(volume, volume sector, sectors) of each request."""
    return (device_volume[requests.device], device_offset[requests.device] + requests.lbn,
            requests.sectors.astype(np.int64))


def unit_extents(chunks: Iterable[Requests], n_volumes: int, *, device_volume: np.ndarray,
                 device_offset: np.ndarray) -> list[UnitExtents]:
    """Each volume's units over requests given in chunks (one pass; memory follows the units)."""
    sets = [ExtentSet() for _ in range(n_volumes)]
    for chunk in chunks:
        vol, a, n = _volume_columns(chunk, device_volume, device_offset)
        order = np.argsort(vol, kind="stable")
        bounds = np.searchsorted(vol[order], np.arange(n_volumes + 1))
        for v, units in enumerate(sets):
            mine = order[bounds[v]:bounds[v + 1]]
            if len(mine):
                units.add(a[mine], n[mine])
    return [UnitExtents(*units.extents()) for units in sets]


def _wanted(final: int, lookahead: bool, last: int | None) -> list[int]:
    """The intervals whose states interval_plans needs (final: the last interval with requests)."""
    if last is None:
        return list(range(final + 1)) if lookahead else list(range(final))
    return [last] if lookahead else list(range(last))


def _chunk_states(chunks: Iterable[Requests], units: Sequence[UnitExtents], volumes: Sequence[Volume],
                  params: AlisParams, *, device_volume: np.ndarray, device_offset: np.ndarray, sector_size: int,
                  wanted: Sequence[int]) -> Iterator[tuple[int, list[IntervalState]]]:
    """interval_states over requests given in chunks (in arrival order): per volume, an interval's reference
    counts and the pair counts of its reads (count_pairs after the last tau reads before, summed with
    merge_counts: what one count over the interval gives), closed when a later interval's requests come."""
    if not wanted:
        return
    lookahead = params.plan == "lookahead"
    last, keep_set = max(wanted), set(wanted)
    n_vol = len(volumes)
    empty = np.zeros(0, np.int64)
    heat = [np.zeros(len(u.home_sector)) for u in units]
    graphs: list[tuple[np.ndarray, ...]] = [(empty, empty, np.zeros(0)) for _ in units]
    counts = [np.zeros(len(u.home_sector), np.int64) for u in units]
    sums = [np.zeros((4, 0), np.int64) for _ in units]
    carry = [empty for _ in units]

    def close(k: int) -> list[IntervalState]:
        states = []
        for v, vol in enumerate(volumes):
            n_units = len(units[v].home_sector)
            src, dst, pairs, closeness = sums[v]
            raw = (src, dst, pairs * (1.0 - params.f) + (params.f / params.tau) * closeness)
            interval_counts = counts[v].astype(np.float64)
            counts[v][:] = 0
            sums[v], carry[v] = np.zeros((4, 0), np.int64), empty
            if lookahead:
                keep, _ = prune_arrays(*raw, _budget(vol, params, sector_size))
                states.append(IntervalState(k, v, interval_counts, *(x[keep] for x in raw)))
                continue
            heat[v] = params.alpha * interval_counts + (1.0 - params.alpha) * heat[v]
            aged = _aged(raw, graphs[v], params.beta, max(n_units, 1))
            keep, _ = prune_arrays(*aged, _budget(vol, params, sector_size))
            graphs[v] = tuple(x[keep] for x in aged)
            states.append(IntervalState(k, v, heat[v], *graphs[v]))
        return states

    current = 0
    for chunk in chunks:
        if not len(chunk):
            continue
        iv = np.floor(chunk.arrival_us / params.interval_us).astype(np.int64)
        fg = ~chunk.is_background
        counted = fg if params.heat_writes else fg & chunk.is_read
        graphed = fg if params.include_writes else fg & chunk.is_read
        vol, a, n = _volume_columns(chunk, device_volume, device_offset)
        mine = [np.flatnonzero(vol == v) for v in range(n_vol)]
        ids = [units[v].ids(a[m], n[m]) for v, m in enumerate(mine)]
        starts = np.flatnonzero(np.concatenate([[True], iv[1:] != iv[:-1], [True]]))
        for lo, hi in itertools.pairwise(starts.tolist()):
            k = int(iv[lo])
            if k > last:
                break
            while current < k:
                states = close(current)
                if current in keep_set:
                    yield current, states
                current += 1
            for v in range(n_vol):
                m_lo, m_hi = np.searchsorted(mine[v], [lo, hi])
                rows, unit = mine[v][m_lo:m_hi], ids[v][m_lo:m_hi]
                counts[v] += np.bincount(unit[counted[rows]], minlength=len(counts[v]))
                read = unit[graphed[rows]]
                if len(read):
                    string = np.concatenate([carry[v], read])
                    part = count_pairs(np.zeros(len(string), np.int64), string, params.tau, first=len(carry[v]))
                    sums[v] = merge_counts(sums[v], part) if sums[v].shape[1] else part
                    carry[v] = string[-params.tau:]
    while current <= last:
        states = close(current)
        if current in keep_set:
            yield current, states
        current += 1


def interval_states(requests: Requests, volumes: Sequence[Volume], params: AlisParams, *,
                    device_volume: np.ndarray, device_offset: np.ndarray, sector_size: int,
                    intervals: Sequence[int] | None = None) -> Iterator[tuple[int, list[IntervalState]]]:
    """(interval, per-volume state) at the end of each interval in `intervals` (default: 0 to the last with
    requests), in order. Realizable: the aged chain from interval 0 (eq. 1 with alpha for heat, eq. 2 with
    beta for the graph, pruned to the budget each interval, as jobs/alis_graph.py and alis_layout.py);
    lookahead: each interval on its own (raw counts, the raw graph pruned)."""
    dv, do = np.asarray(device_volume, np.int64), np.asarray(device_offset, np.int64)
    final = _final_interval(requests.arrival_us[-1] if len(requests) else None, params)
    wanted = list(range(final + 1)) if intervals is None else sorted(intervals)
    units = unit_extents([requests], len(volumes), device_volume=dv, device_offset=do)
    yield from _chunk_states([requests], units, volumes, params, device_volume=dv, device_offset=do,
                             sector_size=sector_size, wanted=wanted)


def _final_interval(last_us: float | None, params: AlisParams) -> int:
    """The interval of the last arrival (-1: no requests)."""
    return -1 if last_us is None else int(np.floor(np.float64(last_us) / params.interval_us))


def _plans(chunks: Callable[[], Iterable[Requests]], final: int, volumes: Sequence[Volume], params: AlisParams, *,
           sector_size: int, device_volume: np.ndarray, device_offset: np.ndarray,
           last: int | None = None) -> Iterator[tuple[int, Directory]]:
    """interval_plans over requests given in chunks (two passes: the units, then the intervals)."""
    lookahead = params.plan == "lookahead"
    wanted = _wanted(final, lookahead, last)
    if not wanted:
        return
    units = unit_extents(chunks(), len(volumes), device_volume=device_volume, device_offset=device_offset)
    for k, states in _chunk_states(chunks(), units, volumes, params, device_volume=device_volume,
                                   device_offset=device_offset, sector_size=sector_size, wanted=wanted):
        parts = [_directory(st.volume, units[st.volume], st.heat, (st.src, st.dst, st.weight), volumes[st.volume],
                            params, sector_size) for st in states]
        yield (k if lookahead else k + 1), Directory.concat(parts)


def interval_plans(requests: Requests, volumes: Sequence[Volume], params: AlisParams, *, sector_size: int,
                   device_volume: np.ndarray, device_offset: np.ndarray,
                   last: int | None = None) -> Iterator[tuple[int, Directory]]:
    """(interval the directory serves, directory) up to interval `last` (default: the last with requests),
    in order: realizable plans built at the end of interval k serve k + 1 (interval 0 has none);
    lookahead plans serve their own interval (only `last`'s is built when last is given)."""
    final = _final_interval(requests.arrival_us[-1] if len(requests) else None, params)
    yield from _plans(lambda: [requests], final, volumes, params, sector_size=sector_size,
                      device_volume=np.asarray(device_volume, np.int64),
                      device_offset=np.asarray(device_offset, np.int64), last=last)


def plan_schedule_chunks(chunks: Callable[[], Iterable[Requests]], last_us: float | None, volumes: Sequence[Volume],
                         params: AlisParams, *, sector_size: int, device_volume: np.ndarray,
                         device_offset: np.ndarray) -> list[Reorganization]:
    """plan_schedule over requests read a chunk at a time (each call of `chunks` a pass in arrival order;
    last_us: the last arrival, None when there are none): the same schedule, in memory that follows a chunk
    and the units, not the requests."""
    return [Reorganization(served * params.interval_us, d, served)
            for served, d in _plans(chunks, _final_interval(last_us, params), volumes, params,
                                    sector_size=sector_size, device_volume=np.asarray(device_volume, np.int64),
                                    device_offset=np.asarray(device_offset, np.int64))]


def plan_schedule(requests: Requests, volumes: Sequence[Volume], params: AlisParams, *, sector_size: int,
                  device_volume: Sequence[int] | np.ndarray | None = None,
                  device_offset: Sequence[int] | np.ndarray | None = None) -> list[Reorganization]:
    """Every reorganization of the run, in time order: one per interval from the first it can serve
    (realizable: 1, lookahead: 0) to the last with requests, at the interval's start.

    device_volume / device_offset: traced device -> volume and its first sector there (default: device d is
    volume d from sector 0), as sim.redirect.redirect takes them.
    """
    dv, do = device_mapping(requests, device_volume, device_offset)
    return [Reorganization(served * params.interval_us, d, served)
            for served, d in interval_plans(requests, volumes, params, sector_size=sector_size, device_volume=dv,
                                            device_offset=do)]


def plan_window(requests: Requests, volumes: Sequence[Volume], params: AlisParams, *, window: int, sector_size: int,
                device_volume: Sequence[int] | np.ndarray | None = None,
                device_offset: Sequence[int] | np.ndarray | None = None) -> Directory:
    """The lookaside directory serving interval `window`: planned from intervals 0..window-1 (realizable;
    empty for window 0) or from interval `window` itself (lookahead)."""
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    dv, do = device_mapping(requests, device_volume, device_offset)
    for served, d in interval_plans(requests, volumes, params, sector_size=sector_size, device_volume=dv,
                                    device_offset=do, last=window):
        if served == window:
            return d
    return Directory.empty()


@dataclass(frozen=True, eq=False)
class WindowPlan:
    """The ALIS placement serving one window of a trace: the lookaside directory, the volumes its copies
    refer to (with their RAs), the traced devices in volume order (device d's sectors start at
    device_offset[d] of volume device_volume[d]) and each volume's name (its device, or the devices joined
    by "+" when concatenated)."""

    window: int
    directory: Directory
    volumes: list[Volume]
    devices: tuple[str, ...]
    volume_names: tuple[str, ...]
    device_volume: np.ndarray
    device_offset: np.ndarray
    sector_size: int

    def to_arrow(self) -> pa.Table:
        """The directory in bytes with alis_layout's columns (device = volume name, without trace_id and
        interval_id): Directory.to_arrow."""
        return self.directory.to_arrow(self.volumes, sector_size=self.sector_size, volume_names=self.volume_names)


def plan_trace_window(table: pa.Table, params: AlisParams, *, window: int, sector_size: int,
                      concatenated: bool = False, device_sectors: Sequence[int] | None = None,
                      devices: Sequence[str] | None = None) -> WindowPlan:
    """The placement serving interval `window` of a trace given as `requests` rows (ts_us, device, op,
    offset_bytes, size_bytes; seq breaks ties), in sectors of sector_size bytes: realizable from the
    intervals before it, lookahead from itself. Volumes as volumes_for: one per device, or all
    devices concatenated (in `devices` order, default sorted names); sizes default to each device's highest
    address used (the paper's storage used).

        plan = plan_trace_window(spark.table("requests").where("trace_id = 'hplajw'").toArrow(), AlisParams(),
                                 window=3, sector_size=512)
    """
    requests, names = from_arrow(table, sector_size=sector_size, devices=devices)
    if device_sectors is None:
        ends = np.ones(len(names), np.int64)
        if len(requests):
            np.maximum.at(ends, requests.device, requests.lbn + requests.sectors)
        sizes = ends
    else:
        sizes = np.asarray(device_sectors, np.int64)
        if len(sizes) != len(names):
            raise ValueError(f"device_sectors has {len(sizes)} sizes for the devices {list(names)}")
    volumes, dv, do = volumes_for(sizes, concatenated=concatenated, ra_share=params.ra_share,
                                  ra_offset=params.ra_offset)
    directory = plan_window(requests, volumes, params, window=window, sector_size=sector_size, device_volume=dv,
                            device_offset=do)
    volume_names = ("+".join(names),) if concatenated else tuple(names)
    return WindowPlan(window, directory, volumes, tuple(names), volume_names, dv, do, sector_size)
