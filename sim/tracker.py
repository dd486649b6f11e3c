"""FIVE's interarrival heat tracking (section 3.3) inside a simulation: per mapping unit (extent or
fragment) the times and block counts of its last k requests, heat k R / (t_n - t_(n-k+1)) and selective
aging at pseudo requests. Same rules as the Spark side (libs/transforms/tracking.py):
- before the k-th request the n requests seen so far stand in for k; one request gives no estimate;
- a zero time span counts as 1 us;
- a pseudo request at t' lowers the estimate to m R / (t' - t_(n-m+2)) (m = min(n, k)) only if that is
  lower, without changing the request history.
Heat is in the simulator's blocks (the spec's sectors) per second."""
from __future__ import annotations

import numpy as np
from numba import njit

from blockheat.sim.array import extent_at, extent_index
from blockheat.sim.prefetch import prefetch_write

__all__ = ["InterarrivalTracker", "add_unit_blocks", "split_into_units", "unit_heat"]


#: How many pieces ahead _observe asks for a unit's history and terms (sim.prefetch).
OBSERVE_AHEAD = 12


@njit(cache=True, nogil=True)
def _observe(times: np.ndarray, blocks: np.ndarray, count: np.ndarray, unit: np.ndarray, t_us: np.ndarray,
             nblocks: np.ndarray, work_out: np.ndarray, unaged_out: np.ndarray, aging_from_out: np.ndarray,
             known: np.ndarray, n_known: int, listed: np.ndarray) -> int:  # pragma: no cover
    """Record each piece in its unit's history and recompute the unit's history-only terms while its row is in
    cache: m R x 1e6 (the blocks of the last m = min(n, k) requests, newest first), the unaged estimate and
    t_(n-m+2); a unit getting its first estimate (second request) joins known[:n_known]. Returns the new
    n_known."""
    k = times.shape[1]
    times_flat = times.reshape(times.size)
    blocks_flat = blocks.reshape(blocks.size)
    pieces = unit.shape[0]
    for j in range(pieces):
        if j + OBSERVE_AHEAD < pieces:               # a later piece's unit, asked for ahead (units come at random)
            v = unit[j + OBSERVE_AHEAD]
            prefetch_write(count, v)
            prefetch_write(times_flat, v * k)
            prefetch_write(blocks_flat, v * k)
            prefetch_write(work_out, v)
            prefetch_write(unaged_out, v)
            prefetch_write(aging_from_out, v)
        u = unit[j]
        slot = count[u] % k
        times[u, slot] = t_us[j]
        blocks[u, slot] = nblocks[j]
        n = count[u] + 1
        count[u] = n
        if n < 2:
            continue
        if not listed[u]:
            listed[u] = True
            known[n_known] = u
            n_known += 1
        m = n if n < k else k
        work = 0.0                                   # m R: the blocks of the last m requests
        for i in range(m):
            work += blocks[u, (n - 1 - i) % k]
        work *= 1e6                                  # per second once divided by a span in us
        span = times[u, (n - 1) % k] - times[u, (n - m) % k]
        work_out[u] = work
        unaged_out[u] = work / (span if span > 1.0 else 1.0)
        aging_from_out[u] = times[u, (n - m + 1) % k]    # t_(n-m+2)
    return n_known


@njit(cache=True, nogil=True)
def _split(lstart: np.ndarray, index: np.ndarray, shift: int, dev_base: np.ndarray, arrival: np.ndarray,
           device: np.ndarray, lbn: np.ndarray, sectors: np.ndarray, first: int,
           end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    n_units = lstart.shape[0]
    k = end - first
    # Each request's first unit and that unit's end, in loops of independent lookups (their cache misses overlap,
    # where a loop that also cuts the pieces waits for each in turn): 2.3x on 1.4 M extents.
    u0 = np.empty(k, dtype=np.int64)
    for i in range(first, end):
        u0[i - first] = extent_at(lstart, index, shift, dev_base[device[i]] + lbn[i])
    u1 = np.empty(k, dtype=np.int64)
    for j in range(k):
        u = u0[j]
        u1[j] = lstart[u + 1] if u + 1 < n_units else np.iinfo(np.int64).max
    cap = 2 * k + 8
    unit = np.empty(cap, dtype=np.int64)
    t = np.empty(cap)
    nb = np.empty(cap)
    m = 0
    for i in range(first, end):
        lo = dev_base[device[i]] + lbn[i]
        hi = lo + sectors[i]
        u = u0[i - first]
        if lo < hi <= u1[i - first] and m < cap:      # one piece: the request ends in its first unit
            unit[m] = u
            t[m] = arrival[i]
            nb[m] = hi - lo
            m += 1
            continue
        while u < n_units and lo < hi:
            u_end = lstart[u + 1] if u + 1 < n_units else hi
            piece_end = hi if hi < u_end else u_end
            if m == cap:
                cap *= 2
                unit2 = np.empty(cap, dtype=np.int64)
                unit2[:m] = unit[:m]
                unit = unit2
                t2 = np.empty(cap)
                t2[:m] = t[:m]
                t = t2
                nb2 = np.empty(cap)
                nb2[:m] = nb[:m]
                nb = nb2
            unit[m] = u
            t[m] = arrival[i]
            nb[m] = piece_end - lo
            m += 1
            lo = piece_end
            u += 1
    return unit[:m], t[:m], nb[:m]


def split_into_units(lstart: np.ndarray, dev_base: np.ndarray, arrival_us: np.ndarray, device: np.ndarray,
                     lbn: np.ndarray, sectors: np.ndarray, first: int = 0, end: int | None = None, *,
                     index: tuple[np.ndarray, int] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Requests [first, end) cut at the mapping units' logical starts (sorted, from 0): (unit, arrival
    us, blocks in that unit) per piece, in request order. index: sim.array.extent_index of the units (built
    here when not given; a caller splitting often, like the cooling demon, passes the layout's)."""
    stop = len(arrival_us) if end is None else end
    lstart = np.ascontiguousarray(lstart, dtype=np.int64)
    if len(lstart) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
    if index is None:
        index = extent_index(lstart, np.diff(lstart, append=lstart[-1] + 1))
    return _split(lstart, index[0], int(index[1]), np.ascontiguousarray(dev_base, dtype=np.int64),
                  arrival_us, device, lbn, sectors, first, stop)


def add_unit_blocks(counted: np.ndarray, lstart: np.ndarray, dev_base: np.ndarray, device: np.ndarray,
                    lbn: np.ndarray, sectors: np.ndarray, first: int = 0, end: int | None = None, *,
                    index: tuple[np.ndarray, int] | None = None) -> None:
    """Requests [first, end)'s blocks added to `counted` (float64, one per unit) by the unit holding them: the sum
    of split_into_units' pieces per unit (np.bincount(unit, weights=blocks)) without making the pieces."""
    stop = len(lbn) if end is None else end
    lstart = np.ascontiguousarray(lstart, dtype=np.int64)
    if len(lstart) == 0 or stop <= first:
        return
    if index is None:
        index = extent_index(lstart, np.diff(lstart, append=lstart[-1] + 1))
    _add_blocks(counted, lstart, index[0], int(index[1]), np.ascontiguousarray(dev_base, dtype=np.int64), device, lbn,
                sectors, first, stop)


@njit(cache=True, nogil=True)
def _add_blocks(counted: np.ndarray, lstart: np.ndarray, index: np.ndarray, shift: int, dev_base: np.ndarray,
                device: np.ndarray, lbn: np.ndarray, sectors: np.ndarray, first: int,
                end: int) -> None:  # pragma: no cover
    n_units = lstart.shape[0]
    u0 = np.empty(end - first, dtype=np.int64)       # first the lookups, independent of each other (as _split)
    for i in range(first, end):
        u0[i - first] = extent_at(lstart, index, shift, dev_base[device[i]] + lbn[i])
    for i in range(first, end):
        lo = dev_base[device[i]] + lbn[i]
        hi = lo + sectors[i]
        u = u0[i - first]
        while u < n_units and lo < hi:
            u_end = lstart[u + 1] if u + 1 < n_units else hi
            piece_end = hi if hi < u_end else u_end
            counted[u] += piece_end - lo
            lo = piece_end
            u += 1


class InterarrivalTracker:
    """The last k request times and block counts of each of n_units units (k + 1 numbers each in FIVE;
    the block counts give R).

        tr = InterarrivalTracker(n_units=4, k=3)
        tr.observe(unit=np.array([0, 0]), t_us=np.array([0.0, 1e6]), blocks=np.array([8.0, 8.0]))
        tr.heat(at_us=2e6)      # blocks per second per unit, aged at a pseudo request at 2 s
    """

    def __init__(self, n_units: int, k: int) -> None:
        if n_units <= 0:
            raise ValueError(f"n_units must be > 0, got {n_units}")
        if k < 2:
            raise ValueError(f"k must be >= 2 (the estimate needs an interarrival time), got {k}")
        self.k = k
        self.times = np.zeros((n_units, k))
        self.blocks = np.zeros((n_units, k))
        self.count = np.zeros(n_units, dtype=np.int64)
        # Per unit, from its history alone: m R x 1e6, the unaged estimate and t_(n-m+2) for aging, kept up to
        # date by observe (a cooling demon asks for them every 100 requests).
        self._work = np.zeros(n_units)
        self._unaged = np.zeros(n_units)
        self._aging_from = np.zeros(n_units)
        self._known = np.zeros(n_units, dtype=np.int64)     # units with an estimate (2+ requests) ...
        self._n_known = 0                                    # ... in _known[:_n_known], each once
        self._listed = np.zeros(n_units, dtype=np.bool_)
        self._sorted_known = np.zeros(0, dtype=np.int64)      # _known[:_n_known] ascending (known_units)

    def observe(self, unit: np.ndarray, t_us: np.ndarray, blocks: np.ndarray) -> None:
        """Record requests (pieces) in time order: unit index, arrival time (us), blocks in the unit."""
        self._n_known = _observe(self.times, self.blocks, self.count, np.ascontiguousarray(unit, dtype=np.int64),
                                 np.ascontiguousarray(t_us, dtype=np.float64),
                                 np.ascontiguousarray(blocks, dtype=np.float64), self._work, self._unaged,
                                 self._aging_from, self._known, self._n_known, self._listed)

    def estimates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The history-only terms per unit: whether it has an estimate (2+ requests), m R x 1e6, the unaged
        estimate and t_(n-m+2); a unit's heat at t' is the unaged estimate, or with aging min(unaged, m R x 1e6 /
        max(t' - t_(n-m+2), 1)) (what heat() computes for every unit)."""
        return self._listed, self._work, self._unaged, self._aging_from

    def known_units(self) -> np.ndarray:
        """The units with an estimate (2+ requests), ascending. Units only join (_known grows at its end), so the
        units that joined since the last call are sorted and merged in: a demon's call costs a copy of the list,
        not a sort of it (units keep joining all through a trace with a large address space)."""
        have = len(self._sorted_known)
        if have != self._n_known:
            joined = np.sort(self._known[have:self._n_known])
            self._sorted_known = np.insert(self._sorted_known, np.searchsorted(self._sorted_known, joined), joined)
        return self._sorted_known

    def heat(self, at_us: float | None = None) -> np.ndarray:
        """Estimated heat of every unit (blocks/s; 0 before a unit's second request). With at_us, each
        estimate is aged by a pseudo request at that time (selective: only a lower value is taken)."""
        return _heat(len(self.count), self._known[:self._n_known], self._work, self._unaged, self._aging_from,
                     -1.0 if at_us is None else float(at_us), at_us is not None)


@njit(cache=True, nogil=True, inline="always")
def unit_heat(u: int, work: np.ndarray, unaged: np.ndarray, aging_from: np.ndarray, at_us: float,
              aging: bool) -> float:  # pragma: no cover
    """Unit u's estimate from its cached terms (estimates()), aged by a pseudo request at at_us when asked."""
    h = unaged[u]
    if aging:
        gap = at_us - aging_from[u]
        aged = work[u] / (gap if gap > 1.0 else 1.0)
        if aged < h:
            h = aged
    return h


@njit(cache=True, nogil=True)
def _heat(n_units: int, known: np.ndarray, work: np.ndarray, unaged: np.ndarray, aging_from: np.ndarray,
          at_us: float, aging: bool) -> np.ndarray:  # pragma: no cover
    """Every unit's estimate (0 where unknown), aged at at_us when asked; visits the known units only."""
    out = np.zeros(n_units)
    for u in known:
        out[u] = unit_heat(u, work, unaged, aging_from, at_us, aging)
    return out
