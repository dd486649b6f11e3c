"""ALIS units, access graphs and runs built from the `requests` files, one task per device: the path
jobs.alis_graph takes for request-sized units. The Spark transforms of libs.alis.units, graph and runs stay
the definition and the fallback (fixed-size units, --from-interval, files that cannot be read directly).

A task reads its device's requests in time order in parts of about CHUNK_ROWS (DeviceChunks; for a nightly
interval N > 0 also its stored units and interval N-1's graph): one pass over the parts numbers the units (the
distinct extents, known ones first), the next counts the pairs of each interval's reads part by part
(PairCounter: sim.alis.graph.count_pairs after the part before's last tau reads, the parts' sums merged: what
one count over the whole interval gives, the sum the chunked Spark build arrives at too), then weighs and ages
them as with_weight and age_graph do, and prunes and finds runs with the functions the Spark path's groups
call (prune_arrays, discover_run_arrays). A task's memory follows the part and the units, not the device: an
interval of more distinct edges than SPILL.sum_edges sums them in bucket files and is pruned there
(libs.table_io.alis_spill) until SPILL.memory_edges remain. One device pass (libs.table_io.device_pass): the tasks
write their reorg_units, access_graph and alis_runs files, the driver commits one replace per table. The Spark path
numbers the units with a window and joins them back (two shuffles of the trace), counts the pairs through two more
and groups the graph through another.

    built = build(spark, warehouse, Build("t1", first=0, last=6, interval_us=DAY_US), graph_options)
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from blockheat.libs.io.arrow_values import equal_mask
from blockheat.libs.io.tables import table_exists, table_target, trace_rows
from blockheat.libs.table_io.alis_spill import Edges, SpilledCounts, SpillSizes, WeighAge
from blockheat.libs.table_io.device_pass import (
    DeviceChunks,
    Output,
    Read,
    RequestFiles,
    Unsupported,
    device_pass,
    request_files,
    task_threads,
    threads_per_task,
    trace_files,
)
from blockheat.schemas import access_graph, alis_graphs, alis_runs, reorg_units
from blockheat.sim import ALIS_EDGE_BYTES as EDGE_BYTES
from blockheat.sim import ALIS_PRUNE_SHARE as PRUNE_SHARE
from blockheat.sim import ALIS_VERTEX_BYTES as VERTEX_BYTES
from blockheat.sim import (
    ExtentSet,
    KeyTable,
    count_pairs,
    discover_run_arrays,
    extent_packing,
    merge_counts,
    packed_extents,
    pruned_edges,
)
from blockheat.sim import alis_vertex_count as vertex_count

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

TABLES = (reorg_units.TABLE, access_graph.TABLE, alis_runs.TABLE)
#: The per-device figures of the runs (None when the build finds none: GraphParams.runs False).
RUN_STATS = ("runs", "last_run_units", "last_runs")

__all__ = ["Build", "GraphParams", "RequestFiles", "Unsupported", "build", "device_build", "keyed", "request_files"]


@dataclass(frozen=True)
class GraphParams:
    """The graph parameters the tasks need (jobs.alis_graph.GraphOptions' numeric ones)."""

    tau: int = 9
    f: float = 1.0
    beta: float = 0.8
    include_writes: bool = False
    graph_share: float = 0.005
    prefilter_min_refs: int = 0
    threshold: float = 0.1
    min_length: int = 9
    runs: bool = True            # False: no run discovery, alis_runs left alone (the nightly: alis_layout's)


@dataclass(frozen=True)
class Build:
    """Intervals first..last of a trace (interval id: ts_us div interval_us, as the Spark path's idiv).

    nightly=False: the whole-trace build from interval 0 (units of all requests numbered in address order,
    budget from all requests). nightly=True (first == last == N): exactly interval N, as run_interval: the
    stored units extended with those of N's requests, the budget from the requests before the end of N,
    interval N-1's stored graph aged in."""

    trace_id: str
    first: int
    last: int
    interval_us: int
    nightly: bool = False


# --- one device ------------------------------------------------------------------------------


def _idiv(values: np.ndarray, divisor: int) -> np.ndarray:
    """SQL `div` (truncation toward zero), as libs.alis.units.idiv."""
    out = np.abs(values) // divisor
    return np.where(values < 0, -out, out)


def _unit_keys(offsets: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """int64 keys ordered as (offset_bytes, size_bytes): both packed in one integer when they fit, else the
    dense rank of the pair."""
    shift = extent_packing(offsets, sizes)
    if shift is not None:
        return packed_extents(offsets, sizes, shift)
    order = np.lexsort((sizes, offsets))
    new = np.ones(len(order), bool)
    new[1:] = (offsets[order][1:] != offsets[order][:-1]) | (sizes[order][1:] != sizes[order][:-1])
    keys = np.empty(len(order), np.int64)
    keys[order] = np.cumsum(new) - 1
    return keys


def number_units(offsets: np.ndarray, sizes: np.ndarray, counted: np.ndarray, known: pa.Table | None
                 ) -> tuple[np.ndarray, pa.Table]:
    """Unit id of every request, and the units (unit_id, offset_bytes, size_bytes): the `known` ones as they
    are, then the extents of the `counted` requests not known, numbered after the known ids in (offset,
    size) order (compute_reorg_units / extend_reorg_units). Requests outside `counted` whose extent is no
    unit get -1."""
    k_ids = np.zeros(0, np.int64) if known is None else known.column("unit_id").to_numpy().astype(np.int64)
    k_off = np.zeros(0, np.int64) if known is None else known.column("offset_bytes").to_numpy().astype(np.int64)
    k_size = np.zeros(0, np.int64) if known is None else known.column("size_bytes").to_numpy().astype(np.int64)
    keys = _unit_keys(np.concatenate([offsets, k_off]), np.concatenate([sizes, k_size]))
    req_keys, known_keys = keys[: len(offsets)], keys[len(offsets):]
    # One sort of the requests' keys: the distinct extents (in (offset, size) order), where each first
    # occurs, and each request's extent.
    extents, first, inverse = np.unique(req_keys, return_index=True, return_inverse=True)
    del keys, req_keys
    extent_id = np.full(len(extents), -1, np.int64)
    if len(k_ids) and len(extents):
        at = np.minimum(np.searchsorted(extents, known_keys), len(extents) - 1)
        hit = extents[at] == known_keys
        extent_id[at[hit]] = k_ids[hit]
    counted_extent = np.zeros(len(extents), bool)
    counted_extent[inverse[counted]] = True
    new = np.flatnonzero(counted_extent & (extent_id < 0))
    base = int(k_ids.max()) + 1 if len(k_ids) else 0
    extent_id[new] = base + np.arange(len(new), dtype=np.int64)
    ids = extent_id[inverse]
    units = pa.table({"unit_id": pa.array(np.concatenate([k_ids, extent_id[new]])),
                      "offset_bytes": pa.array(np.concatenate([k_off, offsets[first[new]]])),
                      "size_bytes": pa.array(np.concatenate([k_size, sizes[first[new]]]))})
    return ids, units


def run_members(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, p: Any) -> dict[str, np.ndarray]:
    """The runs of one graph (discover_run_arrays with p's tau, f, threshold and min_length) as alis_runs
    columns: run_id, rank, position, unit_id, one entry per member."""
    run_ids, offsets, members = discover_run_arrays(src, dst, weight, tau=p.tau, f=p.f, threshold=p.threshold,
                                                    min_length=p.min_length)
    lengths = np.diff(offsets)
    return {"run_id": np.repeat(run_ids, lengths).astype(np.int64),
            "rank": np.repeat(np.arange(len(run_ids), dtype=np.int64), lengths),
            "position": np.arange(len(members), dtype=np.int64) - np.repeat(offsets[:-1], lengths),
            "unit_id": np.asarray(members, np.int64)}


def weigh(pairs: np.ndarray, closeness: np.ndarray, tau: int, f: float) -> np.ndarray:
    """with_weight on arrays: pairs * (1 - f) + f / tau * closeness, the Spark expression's operations."""
    weight = pairs.astype(np.float64)
    weight *= 1.0 - f
    weight += (f / tau) * closeness.astype(np.float64)
    return weight


def _age(cur: tuple[np.ndarray, ...], previous: tuple[np.ndarray, ...] | None, beta: float
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """age_graph on arrays: beta * current + (1 - beta) * previous per (src, dst), the union of both, rows
    whose aged weight is not above 0 dropped (the same float operations as the Spark expression)."""
    src, dst, weight = cur
    if previous is None:
        aged = beta * weight
        if beta > 0.0 and (weight > 0.0).all():             # the usual case: every edge stays, no copies
            return src, dst, aged
    else:
        p_src, p_dst, p_weight = previous
        n = len(src)
        src, dst = np.concatenate([src, p_src]), np.concatenate([dst, p_dst])
        now = np.concatenate([weight, np.zeros(len(p_src))])
        old = np.concatenate([np.zeros(n), p_weight])
        order = np.lexsort((dst, src))
        src, dst, now, old = src[order], dst[order], now[order], old[order]
        starts = np.flatnonzero(np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])]) if len(src) else \
            np.zeros(0, np.int64)
        src, dst = src[starts], dst[starts]
        # At most one current and one previous row per edge: a sum with the other side's 0.0 is exact.
        now = np.add.reduceat(now, starts) if len(starts) else now[:0]
        old = np.add.reduceat(old, starts) if len(starts) else old[:0]
        aged = beta * now + (1.0 - beta) * old
    keep = aged > 0.0
    return src[keep], dst[keep], aged[keep]


#: A device's requests: one table, or DeviceChunks (its parts in time order, read again for each pass).
Requests = pa.Table | DeviceChunks

CHUNK_ROWS = 4_000_000     # requests a task holds at once: a device is read in time order in parts of about this many
SPILL = SpillSizes()       # an interval's edges held while counted and while pruned (libs.table_io.alis_spill)
COLUMNS = ("ts_us", "seq", "op", "offset_bytes", "size_bytes")


def parts_of(requests: Requests, columns: Sequence[str], start: int | None = None) -> Iterable[pa.Table]:
    """The device's rows of these columns in (ts_us, seq) order, in parts (a table is one part; DeviceChunks
    from `start` on)."""
    if isinstance(requests, pa.Table):
        return [requests.sort_by([("ts_us", "ascending"), ("seq", "ascending")]).select(list(columns))]
    return requests.reread(columns, start)


def _ints(part: pa.Table, *columns: str) -> list[np.ndarray]:
    return [np.ascontiguousarray(part.column(c).to_numpy(), dtype=np.int64) for c in columns]


def _is_read(part: pa.Table) -> np.ndarray:
    return equal_mask(part.column("op"), "R")


class UnitIndex:
    """The unit id of an extent (offset_bytes, size_bytes) among a units table's (-1: no unit)."""

    def __init__(self, units: pa.Table | None) -> None:
        cols = ("unit_id", "offset_bytes", "size_bytes")
        ids, off, size = ([np.zeros(0, np.int64)] * 3 if units is None else _ints(units, *cols))
        self.shift = extent_packing(off, size)
        if self.shift is not None:                      # one int64 key per extent: one search per request
            self.top = (int(off.max()), int(size.max()))
            keys = packed_extents(off, size, self.shift)
        else:                                           # the ranks of offset and size, packed
            self.offsets, self.sizes = np.unique(off), np.unique(size)
            keys = (np.searchsorted(self.offsets, off) << 32) | np.searchsorted(self.sizes, size)
        self.size = len(keys)
        self.table = KeyTable(keys, ids)

    def ids_of(self, offsets: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        if not self.size:
            return np.full(len(offsets), -1, np.int64)
        if self.shift is not None:
            found = (offsets >= 0) & (offsets <= self.top[0]) & (sizes >= 0) & (sizes <= self.top[1])
            keys = np.where(found, packed_extents(offsets, sizes, self.shift), -1)
        else:
            ro, rs = np.searchsorted(self.offsets, offsets), np.searchsorted(self.sizes, sizes)
            found = ((self.offsets[np.minimum(ro, len(self.offsets) - 1)] == offsets)
                     & (self.sizes[np.minimum(rs, len(self.sizes) - 1)] == sizes))
            keys = np.where(found, (ro << 32) | rs, -1)
        return self.table.get(keys)


def _bounds(sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, start, end) of each run of equal values in a sorted array."""
    if not len(sorted_values):
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    return sorted_values[starts], starts, np.append(starts[1:], len(sorted_values))


Counts = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]       # (src, dst, pairs, closeness) by (src, dst)


class PairCounter:
    """The pair counts of each interval's reference string, fed in parts in reference order: each part's pairs
    (count_pairs after the last tau references of the part before in the same interval) added to the interval's
    sums (merge_counts), the sum whole-interval count_pairs gives. Memory: a part's pair keys and the interval's
    distinct edges; with spill (a SpilledCounts for the interval), sums of more than sum_edges edges go to its
    files and the interval's counts are the SpilledCounts. threads > 1: up to that many parts are counted at once
    while the next is read (integer sums: the same counts in any order); call close() to the end."""

    def __init__(self, tau: int, spill: Callable[[], SpilledCounts] | None = None,
                 sum_edges: int = SpillSizes.sum_edges, threads: int = 1) -> None:
        self.tau = tau
        self.interval: int | None = None
        self.carry = np.zeros(0, np.int64)
        self.sums = np.zeros((4, 0), np.int64)
        self.spill, self.sum_edges = spill, sum_edges
        self.spilled: SpilledCounts | None = None
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="alis-count") if threads > 1 else None
        self.threads = threads
        self.counting: deque[Future[np.ndarray]] = deque()

    def _count(self, string: np.ndarray, first: int) -> np.ndarray:
        return count_pairs(np.zeros(len(string), np.int64), string, self.tau, first=first)

    def _sum(self, part: np.ndarray) -> None:
        self.sums = merge_counts(self.sums, part) if self.sums.shape[1] else part
        if self.spill is not None and self.sums.shape[1] > self.sum_edges:
            self.spilled = self.spilled or self.spill()
            self.spilled.add(self.sums)
            self.sums = np.zeros((4, 0), np.int64)

    def add(self, interval: np.ndarray, refs: np.ndarray) -> Iterator[tuple[int, Counts | SpilledCounts]]:
        """Feeds references (units) with their intervals (non-decreasing, none before an interval fed earlier);
        yields (interval, counts) of each interval the part ends."""
        for i, a, b in zip(*_bounds(interval), strict=True):
            if self.interval is not None and int(i) != self.interval:
                yield from self.close()
            self.interval = int(i)
            string = np.concatenate([self.carry, refs[a:b]])
            if self.pool is None:
                self._sum(self._count(string, len(self.carry)))
            else:
                self.counting.append(self.pool.submit(self._count, string, len(self.carry)))
                while len(self.counting) > self.threads:
                    self._sum(self.counting.popleft().result())
            self.carry = string[-self.tau:]

    def close(self) -> Iterator[tuple[int, Counts | SpilledCounts]]:
        """The open interval's counts (nothing when none is open)."""
        while self.counting:
            self._sum(self.counting.popleft().result())
        if self.interval is not None:
            if self.spilled is not None:
                self.spilled.add(self.sums)
                yield self.interval, self.spilled
            else:
                yield self.interval, tuple(self.sums)  # type: ignore[misc]
        self.interval, self.carry, self.sums = None, np.zeros(0, np.int64), np.zeros((4, 0), np.int64)
        self.spilled = None

    def __enter__(self) -> PairCounter:
        return self

    def __exit__(self, *exc: object) -> None:
        """The counting threads stopped (what a counter not closed holds is dropped)."""
        for f in self.counting:
            f.cancel()
        self.counting.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=True)


def _add_unit_counts(a: tuple[np.ndarray, np.ndarray], units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (unit, count) pairs with the references `units` counted in: in an array over the unit ids when they are
    not much sparser than the pairs and references (a device's units, numbered from 0; no sort), else by sorting."""
    if len(units) and units.min() >= 0:
        n = int(max(units.max(), a[0].max(initial=0))) + 1
        if n <= 4 * (len(units) + len(a[0])) + (1 << 20):
            dense = np.bincount(units, minlength=n)
            dense[a[0]] += a[1]
            ids = np.flatnonzero(dense)
            return ids, dense[ids].astype(np.int64)
    ids, counts = np.unique(units, return_counts=True)
    ids, inverse = np.unique(np.concatenate([a[0], ids]), return_inverse=True)
    return ids, np.bincount(inverse, np.concatenate([a[1], counts]), len(ids)).astype(np.int64)


def references(parts: Iterable[pa.Table], index: UnitIndex, interval_us: int, chosen_of: Any, min_refs: int = 0,
               frequent: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
               ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(interval, unit) of the chosen requests of each part (chosen_of(part, ts, interval) -> mask) whose extent
    is a unit, in reference order; with min_refs > 1, only the units referenced at least that often in their interval
    (`frequent`: each interval's sorted (unit, count))."""
    for part in parts:
        ts, off, size = _ints(part, "ts_us", "offset_bytes", "size_bytes")
        interval = _idiv(ts, interval_us)
        chosen = chosen_of(part, ts, interval)
        i, u = interval[chosen], index.ids_of(off[chosen], size[chosen])
        known = u >= 0                                  # a request whose extent is no unit has no reference
        i, u = i[known], u[known]
        if min_refs > 1 and frequent is not None:
            keep = np.zeros(len(u), bool)
            for value, a, b in zip(*_bounds(i), strict=True):
                ids, counts = frequent.get(int(value), (np.zeros(0, np.int64), np.zeros(0, np.int64)))
                at = np.minimum(np.searchsorted(ids, u[a:b]), max(len(ids) - 1, 0))
                keep[a:b] = (counts[at] >= min_refs) & (ids[at] == u[a:b]) if len(ids) else False
            i, u = i[keep], u[keep]
        yield i, u


def interval_unit_counts(refs: Iterable[tuple[np.ndarray, np.ndarray]],
                         into: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
                         ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each interval's sorted (unit, references) of (interval: sorted, unit) arrays, added to `into`'s."""
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {} if into is None else into
    for interval, units in refs:
        for value, a, b in zip(*_bounds(interval), strict=True):
            empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
            out[int(value)] = _add_unit_counts(out.get(int(value), empty), units[a:b])
    return out


def spilling_counter(tau: int, n_vertices: int, spill: SpillSizes) -> PairCounter:
    """A PairCounter whose intervals of more than spill.sum_edges distinct edges go to bucket files (units
    0..n_vertices-1)."""
    return PairCounter(tau, lambda: SpilledCounts(n_vertices, spill.buckets, spill.threads), spill.sum_edges,
                       spill.threads)


def pruned_graph(counts: Counts | SpilledCounts, weigh_age: WeighAge, previous: Edges | None, budget: int | None,
                 spill: SpillSizes) -> Edges:
    """An interval's graph from its counts: weighed and aged (weigh_age), pruned to the budget (None: not pruned),
    in (src, dst) order; spilled counts are pruned on their files (down to spill.memory_edges), then removed."""
    if isinstance(counts, SpilledCounts):
        try:
            return counts.graph(weigh_age, previous, budget, memory_edges=spill.memory_edges)
        finally:
            counts.close()
    src, dst, weight = weigh_age(*counts, previous)
    if len(src) and budget is not None:
        return pruned_edges(src, dst, weight, budget, share=PRUNE_SHARE)
    return src, dst, weight


def device_build(requests: Requests, known: pa.Table | None, previous: pa.Table | None, b: Build,
                 p: GraphParams, spill: SpillSizes | None = None) -> dict[str, Any]:
    """One device: {"units": (unit_id, offset_bytes, size_bytes), "graph": (interval_id, src_unit, dst_unit,
    weight), "runs": (interval_id, run_id, rank, position, unit_id), None without p.runs, "stats": per-device
    figures}.
    previous: interval first-1's stored graph (src_unit, dst_unit, weight) or None. The requests in parts
    (DeviceChunks) give what one table gives: a pass over the parts finds the units (distinct extents) and the
    space used, the next counts the pairs of each interval part by part (PairCounter; with a prefilter a pass
    before counts the references). Memory: a part, the units, up to spill.sum_edges of an interval's edges (the
    rest in bucket files: libs.table_io.alis_spill; default SPILL) and the pruned graphs."""
    spill = spill or SPILL
    lo_us, hi_us = b.first * b.interval_us, (b.last + 1) * b.interval_us
    extents = ExtentSet()
    used = None
    for part in parts_of(requests, ("ts_us", "seq", "offset_bytes", "size_bytes")):
        ts, off, size = _ints(part, "ts_us", "offset_bytes", "size_bytes")
        counted = (ts >= lo_us) & (ts < hi_us) if b.nightly else np.ones(len(ts), bool)
        extents.add(off[counted], size[counted])
        before = ts < hi_us if b.nightly else np.ones(len(ts), bool)
        if before.any():
            end = int((off[before] + size[before]).max())
            used = end if used is None else max(used, end)
    ext_off, ext_size = extents.extents()
    _, units = number_units(ext_off, ext_size, np.ones(len(ext_off), bool), known)
    del ext_off, ext_size, extents
    index = UnitIndex(units)
    budget = None if used is None else math.floor(used * p.graph_share)

    def chosen_of(part: pa.Table, ts: np.ndarray, interval: np.ndarray) -> np.ndarray:
        chosen = (interval >= b.first) & (interval <= b.last)
        if b.nightly:
            chosen &= (ts >= lo_us) & (ts < hi_us)
        return chosen if p.include_writes else chosen & _is_read(part)

    start = lo_us if b.first > 0 else None      # interval 0 holds the times just below 0 (div truncates)
    frequent = interval_unit_counts(references(parts_of(requests, COLUMNS, start), index, b.interval_us, chosen_of)
                                    ) if p.prefilter_min_refs > 1 else None
    graphs, runs = [], []
    prev = None if previous is None else tuple(np.asarray(previous.column(c).to_numpy(), t) for c, t in
                                               (("src_unit", np.int64), ("dst_unit", np.int64),
                                                ("weight", np.float64)))
    graph_refs, last_sizes, following = 0, (0, 0), b.first
    empty: Counts = tuple(np.zeros(0, np.int64) for _ in range(4))  # type: ignore[assignment]

    def weigh_age(src: np.ndarray, dst: np.ndarray, pairs: np.ndarray, closeness: np.ndarray,
                  previous: tuple[np.ndarray, ...] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return _age((src, dst, weigh(pairs, closeness, p.tau, p.f)), previous, p.beta)

    def finish(i: int, counts: Counts | SpilledCounts) -> None:
        """Interval i's graph (its pairs weighed, aged with the previous graph, pruned) and runs."""
        nonlocal prev, last_sizes
        src, dst, weight = pruned_graph(counts, weigh_age, prev, budget, spill)
        prev = (src, dst, weight)
        graphs.append(pa.table({"interval_id": pa.array(np.full(len(src), i, np.int64)), "src_unit": pa.array(src),
                                "dst_unit": pa.array(dst), "weight": pa.array(weight)}))
        if p.runs:
            members = run_members(src, dst, weight, p)
            runs.append(pa.table({"interval_id": np.full(len(members["unit_id"]), i, np.int64), **members}))
        if i == b.last:
            vertices = vertex_count(src, dst)
            last_sizes = (len(src), vertices * VERTEX_BYTES + len(src) * EDGE_BYTES) if len(src) else (0, 0)

    def upto(ended: Iterable[tuple[int, Counts | SpilledCounts]]) -> None:
        """Finishes the intervals before each ended one (no references: no pairs), then the ended one."""
        nonlocal following
        for i, counts in ended:
            for j in range(following, i):
                finish(j, empty)
            finish(i, counts)
            following = i + 1

    with spilling_counter(p.tau, int(pc.max(units.column("unit_id")).as_py() or 0) + 1, spill) as counter:
        for interval, units_of in references(parts_of(requests, COLUMNS, start), index, b.interval_us, chosen_of,
                                             p.prefilter_min_refs, frequent):
            graph_refs += len(units_of)
            upto(counter.add(interval, units_of))
        upto(counter.close())
    upto([(i, empty) for i in range(following, b.last + 1)])
    graph = pa.concat_tables(graphs)
    stats = {"units": units.num_rows, "graph_refs": graph_refs, "last_edges": last_sizes[0],
             "last_graph_bytes": last_sizes[1], "budget_bytes": budget, **dict.fromkeys(RUN_STATS)}
    found = pa.concat_tables(runs) if p.runs else None
    if found is not None:
        last_runs = found.filter(pc.equal(found.column("interval_id"), b.last))
        stats.update(runs=found.group_by(["interval_id", "run_id"], use_threads=False).aggregate([]).num_rows,
                     last_run_units=last_runs.num_rows, last_runs=len(pc.unique(last_runs.column("run_id"))))
    return {"units": units, "graph": graph, "runs": found, "stats": stats}


# --- the pass and the commits ---------------------------------------------------------------------


def keyed(rows: pa.Table, trace_id: str, device: str, **constants: int) -> pa.Table:
    """One device's rows of a table with trace_id, device and the constant columns added (the strings as
    dictionaries of their one value: a graph's millions of rows repeat no string)."""
    n = rows.num_rows
    zeros = pa.array(np.zeros(n, np.int32))
    for column, text in (("trace_id", trace_id), ("device", device)):
        rows = rows.append_column(column, pa.DictionaryArray.from_arrays(zeros, pa.array([text], pa.string())))
    for column, value in constants.items():
        rows = rows.append_column(column, pa.array(np.full(n, value, np.int64)))
    return rows


def build(spark: SparkSession, warehouse: Path, b: Build, p: GraphParams,
          requests: RequestFiles | None = None) -> list[dict[str, Any]]:
    """Build, write and commit (reorg_units, access_graph, alis_runs unless p.runs is False: one replace each, in
    that order; the graph and runs of interval N only for a nightly N > 0). Returns the per-device figures of
    jobs.alis_graph's summary, by device. Unsupported (nothing written) when the files cannot be read
    directly."""
    requests = requests if requests is not None else request_files(spark, warehouse, b.trace_id)
    stored_units: dict[str, list[str]] = {}
    stored_graph: dict[str, list[str]] = {}
    if b.nightly and b.first:
        stored_units = _stored(spark, warehouse, b.trace_id, reorg_units.TABLE)
        stored_graph = _stored(spark, warehouse, b.trace_id, access_graph.TABLE)
    devices = [(dev, {"requests": requests.files[dev], "units": stored_units.get(dev, []),
                      "graph": stored_graph.get(dev, [])}) for dev in requests.by_size()]
    sizes = dataclasses.replace(SPILL, threads=threads_per_task(spark, len(devices)))   # the tasks get the driver's
    reads = {"requests": Read(COLUMNS, chunk_rows=CHUNK_ROWS),
             "units": Read(["unit_id", "offset_bytes", "size_bytes"]),
             "graph": Read(["src_unit", "dst_unit", "weight"], [("interval_id", "=", b.first - 1)])}
    where = {"trace_id": b.trace_id}
    graph_where = {**where, "interval_id": b.first} if b.nightly and b.first else where
    written = ((reorg_units.TABLE, where), (access_graph.TABLE, graph_where),
               *([(alis_runs.TABLE, graph_where)] if p.runs else []))
    outputs = {name: Output(table_target(spark, warehouse, name).for_write(), w) for name, w in written}

    def build_device(device: str, rows: dict[str, pa.Table | None]) -> tuple[dict[str, pa.Table], dict[str, Any]]:
        started = time.perf_counter()
        out = device_build(rows["requests"], rows["units"], rows["graph"], b, p,
                           dataclasses.replace(sizes, threads=task_threads(sizes.threads)))
        tables = {reorg_units.TABLE: keyed(out["units"], b.trace_id, device, unit_bytes=0),
                  access_graph.TABLE: keyed(out["graph"], b.trace_id, device)}
        if p.runs:
            tables[alis_runs.TABLE] = keyed(out["runs"], b.trace_id, device)
        return tables, {**out["stats"], "seconds": time.perf_counter() - started}

    started = time.perf_counter()
    built = device_pass(spark, devices, build_device, read=reads, outputs=outputs, label=f"alis graph {b.trace_id}")
    stats = sorted(({"device": d, **s} for d, s in built.extras.items()), key=lambda r: r["device"])
    log.info("alis graph %s: %d devices built and committed in %.1f s (slowest task %.1f s)", b.trace_id,
             len(devices), time.perf_counter() - started, max((r["seconds"] for r in stats), default=0.0))
    log.debug("alis graph %s: seconds per device (built, without its files): %s", b.trace_id,
              ", ".join(f"{r['device']} {r['seconds']:.1f}" for r in stats))
    keys = ("units", "graph_refs", "last_edges", "last_graph_bytes", "budget_bytes", "runs", "last_run_units",
            "last_runs")
    return [{"device": r["device"], **{k: r[k] for k in keys}} for r in stats if r["units"]]


def _stored(spark: SparkSession, warehouse: Path, trace_id: str, table: str) -> dict[str, list[str]]:
    """The trace's files of a stored table by device; none is an empty dict (a table with no rows for the
    trace yet), a file that cannot be read directly Unsupported."""
    if not table_exists(warehouse, table):
        return {}
    try:
        return trace_files(spark, warehouse, trace_id, table)
    except Unsupported as e:
        if str(e).startswith(f"no {table} files"):
            return {}
        raise


def params_of(opts: Any) -> GraphParams:
    """GraphParams from jobs.alis_graph.GraphOptions."""
    names = {f.name for f in dataclasses.fields(GraphParams)}
    return GraphParams(**{n: getattr(opts, n) for n in names})


def graph_params(spark: SparkSession, warehouse: Any, trace_id: str) -> dict[str, Any]:
    """The stored alis_graphs row of a trace (read from the log: tables.trace_rows); a clear error when the graphs
    were not built."""
    rows = trace_rows(spark, warehouse, alis_graphs.TABLE, trace_id) if table_exists(warehouse, alis_graphs.TABLE) \
        else []
    if not rows:
        raise LookupError(f"no ALIS graphs for trace {trace_id!r} (run: blockheat graph {trace_id})")
    return rows[0]
