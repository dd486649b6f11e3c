"""ALIS run discovery (section 5.2.2): the paper's greedy algorithm on one aggregated access graph.

1. Take the heaviest edge linking two unmarked vertices; R = (its source, its target), both marked.
2. Repeat: headweight = max over unmarked u of sum_{i=1..min(tau,|R|)} W(u, R[i]); tailweight =
   max over unmarked v of sum_{i=1..min(tau,|R|)} W(R[|R|-i+1], v); add u at the front if
   headweight > tailweight, else v at the back, and mark it; stop when both are below the
   threshold.
3. Repeat from 1 for runs of decreasing desirability; keep runs of at least min_length units.

The threshold is relative to what a sequence seen once per interval would score: threshold *
sum_{j=1..m} (1 - f + f * (tau - j + 1) / tau) with m = min(tau, |R|), the weights of one pass
through the sequence. Cost O(e log e + v): one sort of the edges, adjacency arrays both ways, and
head/tail scores kept incrementally (each vertex enters and leaves the head and the tail at most
once, touching its edges each time) with lazy max-heaps, which take only scores the run could still pick (at
least its threshold, which only grows as the run does). Ties: the heaviest edge with the smallest
(src, dst) unit ids first, the smallest unit id among equal scores, the back on equal weights (as
in the paper's figure 11 walk-through). Vertices of a discarded short run stay marked. The loop is
compiled (numba) over arrays: CSR adjacency both ways, one score array and one array heap per side;
tests/libs/alis/runs_reference.py keeps the first pure-Python version it is checked against.

libs.alis.runs finds the runs of every stored graph with Spark from discover_run_arrays.
"""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

from blockheat.sim.alis.graph import check_context, distinct_ranks, edge_weight

THRESHOLD = 0.1           # run clustering alone
THRESHOLD_COMBINED = 0.4  # runs plus heat clustering (the paper's section 5.3 default)
# A head or tail weight within this relative distance of the threshold counts as reaching it, so a
# sequence seen exactly as often as the threshold asks is not lost to float rounding.
REL_TOLERANCE = 1e-9


def once_weight(m: int, *, tau: int, f: float) -> float:
    """Headweight (or tailweight) of a sequence seen once, over m = min(tau, |R|) run members."""
    return sum(edge_weight(j, tau=tau, f=f) for j in range(1, min(m, tau) + 1))


@numba.njit(cache=True, inline="always")
def _push(key: np.ndarray, ids: np.ndarray, size: int, s: float, x: int) -> int:
    """Push (s, x) on a binary max-heap ordered by s, then by the smaller x; returns the new size
    (the caller has made room)."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        ps, px = key[parent], ids[parent]
        if ps > s or (ps == s and px < x):
            break
        key[i], ids[i] = ps, px
        i = parent
    key[i], ids[i] = s, x
    return size + 1


@numba.njit(cache=True, inline="always")
def _pop(key: np.ndarray, ids: np.ndarray, size: int) -> int:
    """Remove the top of the heap; returns the new size."""
    size -= 1
    s, x = key[size], ids[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and (key[child + 1] > key[child]
                                 or (key[child + 1] == key[child] and ids[child + 1] < ids[child])):
            child += 1
        cs, cx = key[child], ids[child]
        if s > cs or (s == cs and x < cx):
            break
        key[i], ids[i] = cs, cx
        i = child
    if size > 0:
        key[i], ids[i] = s, x
    return size


@numba.njit(cache=True, inline="always")
def _change(ptr: np.ndarray, nbr: np.ndarray, wgt: np.ndarray, side: np.ndarray, stamp: float, key: np.ndarray,
            ids: np.ndarray, size: int, member: int, sign: float, floor: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Add (sign 1) or remove (-1) `member`'s edges to the candidates' scores and push the new scores of at least
    `floor`, growing the heap arrays when full. side[x] = (score, stamp) of one side (head or tail), a vertex's
    two numbers in one cache line: the score counts only where its stamp is this run's (earlier runs' values
    read as 0, so no per-run reset is needed); a stamp below 0 marks a run member. floor: the run's threshold now;
    it only grows as the run does, so a score below it cannot be picked before it changes again (and is pushed
    then), and a side whose best is below it loses to the other side or ends the run either way."""
    for k in range(ptr[member], ptr[member + 1]):
        x = nbr[k]
        seen = side[x, 1]
        if seen < 0.0:
            continue
        s = sign * wgt[k]
        if seen == stamp:
            s += side[x, 0]
        else:
            side[x, 1] = stamp
        side[x, 0] = s
        if s < floor:
            continue
        if size == len(key):
            grown_key, grown_ids = np.empty(2 * size, np.float64), np.empty(2 * size, np.int64)
            grown_key[:size], grown_ids[:size] = key, ids
            key, ids = grown_key, grown_ids
        size = _push(key, ids, size, s, x)
    return key, ids, size


@numba.njit(cache=True, inline="always")
def _best(key: np.ndarray, ids: np.ndarray, size: int, side: np.ndarray) -> tuple[float, int, int]:
    """(score, vertex) of the best unmarked candidate, or (-inf, -1); drops stale entries on the way."""
    while size > 0:
        s, x = key[0], ids[0]
        if side[x, 1] < 0.0 or side[x, 0] != s:
            size = _pop(key, ids, size)
            continue
        return s, x, size
    return -np.inf, -1, size


@numba.njit(cache=True, inline="always")
def _mark(marked: np.ndarray, head: np.ndarray, tail: np.ndarray, x: int) -> None:
    marked[x] = True
    head[x, 1] = -1.0
    tail[x, 1] = -1.0


@numba.njit(cache=True)
def _discover(out_ptr: np.ndarray, out_nbr: np.ndarray, out_w: np.ndarray, in_ptr: np.ndarray,
              in_nbr: np.ndarray, in_w: np.ndarray, seed_s: np.ndarray, seed_d: np.ndarray, limits: np.ndarray,
              tau: int, min_length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The greedy loop over local vertex numbers 0..n-1 (module docstring): the kept runs as
    (run_id per kept run, offsets into members, members in layout order)."""
    n = len(out_ptr) - 1
    # Per side, per vertex (score, stamp): the stamp is run + 1 of the score, -1 once the vertex is in a run.
    head, tail = np.zeros((n, 2), np.float64), np.zeros((n, 2), np.float64)
    marked = np.zeros(n, np.bool_)           # the same as a stamp below 0, in a denser array for the seeds' scan
    # Heap arrays (keys, ids) and sizes per side: head hk, hi_, hs; tail tk, ti, ts (grown by _change).
    hk, hi_ = np.empty(1024, np.float64), np.empty(1024, np.int64)
    tk, ti = np.empty(1024, np.float64), np.empty(1024, np.int64)
    buf = np.empty(2 * n + 2, np.int64)        # the run, growing both ways from the middle
    kept_ids = np.empty(n // 2 + 1, np.int64)
    offsets = np.zeros(n // 2 + 2, np.int64)
    members = np.empty(n, np.int64)
    kept = 0
    run_id = -1
    e = 0
    while True:
        while e < len(seed_s) and (marked[seed_s[e]] or marked[seed_d[e]]):
            e += 1
        if e == len(seed_s):
            break
        run_id += 1
        stamp = float(run_id + 1)
        a, b = seed_s[e], seed_d[e]
        _mark(marked, head, tail, a)
        _mark(marked, head, tail, b)
        lo, hi = n, n + 2                      # buf[lo:hi] is the run
        buf[lo], buf[lo + 1] = a, b
        hs = ts = 0
        floor = limits[min(tau, 2)]            # the least score the run can take next (limits grow with the run)
        # head = run[:tau], tail = run[-tau:], entered in run order as the paper's deques
        for p in range(lo, min(hi, lo + tau)):
            hk, hi_, hs = _change(in_ptr, in_nbr, in_w, head, stamp, hk, hi_, hs, buf[p], 1.0, floor)
        for p in range(max(lo, hi - tau), hi):
            tk, ti, ts = _change(out_ptr, out_nbr, out_w, tail, stamp, tk, ti, ts, buf[p], 1.0, floor)
        while True:
            length = hi - lo
            limit = limits[min(tau, length)]
            head_weight, u, hs = _best(hk, hi_, hs, head)
            tail_weight, v, ts = _best(tk, ti, ts, tail)
            if head_weight < limit and tail_weight < limit:
                break
            if head_weight > tail_weight:
                _mark(marked, head, tail, u)
                lo -= 1
                buf[lo] = u
                floor = limits[min(tau, hi - lo)]
                hk, hi_, hs = _change(in_ptr, in_nbr, in_w, head, stamp, hk, hi_, hs, u, 1.0, floor)
                if hi - lo > tau:              # the member that left the head
                    hk, hi_, hs = _change(in_ptr, in_nbr, in_w, head, stamp, hk, hi_, hs, buf[lo + tau], -1.0,
                                          floor)
                if hi - lo <= tau:
                    tk, ti, ts = _change(out_ptr, out_nbr, out_w, tail, stamp, tk, ti, ts, u, 1.0, floor)
            else:
                _mark(marked, head, tail, v)
                buf[hi] = v
                hi += 1
                floor = limits[min(tau, hi - lo)]
                tk, ti, ts = _change(out_ptr, out_nbr, out_w, tail, stamp, tk, ti, ts, v, 1.0, floor)
                if hi - lo > tau:              # the member that left the tail
                    tk, ti, ts = _change(out_ptr, out_nbr, out_w, tail, stamp, tk, ti, ts, buf[hi - tau - 1], -1.0,
                                         floor)
                if hi - lo <= tau:
                    hk, hi_, hs = _change(in_ptr, in_nbr, in_w, head, stamp, hk, hi_, hs, v, 1.0, floor)
        if hi - lo >= min_length:
            kept_ids[kept] = run_id
            start = offsets[kept]
            members[start:start + hi - lo] = buf[lo:hi]
            offsets[kept + 1] = start + hi - lo
            kept += 1
    return kept_ids[:kept], offsets[:kept + 1], members[:offsets[kept]]


@numba.njit(cache=True)
def _csr(keys: np.ndarray, nbrs: np.ndarray, weights: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Adjacency arrays: vertex v's neighbours are nbr[ptr[v]:ptr[v + 1]], in edge order (a counting sort)."""
    ptr = np.zeros(n + 1, np.int64)
    for k in keys:
        ptr[k + 1] += 1
    for v in range(n):
        ptr[v + 1] += ptr[v]
    fill = ptr[:-1].copy()
    nbr, wgt = np.empty(len(keys), np.int64), np.empty(len(keys), np.float64)
    for i in range(len(keys)):
        at = fill[keys[i]]
        nbr[at], wgt[at] = nbrs[i], weights[i]
        fill[keys[i]] = at + 1
    return ptr, nbr, wgt


def _seed_order(s: np.ndarray, d: np.ndarray, weight: np.ndarray, n: int) -> np.ndarray:
    """The seeds' order: heaviest first, then by (src, dst) (vertex order is unit-id order), as two stable sorts
    (by pair, then by -weight). The pair sort is skipped when the edges come sorted (a graph's edges do); with
    few distinct weights the weight sort is a stable radix sort of their ranks."""
    key = s * n + d
    by_pair = None if np.all(key[1:] > key[:-1]) else np.argsort(key, kind="stable")
    w = weight if by_pair is None else weight[by_pair]
    encoded = pa.array(w).dictionary_encode()
    values = encoded.dictionary.to_numpy()
    if len(values) < (1 << 15):
        rank = np.empty(len(values), np.int16)
        rank[np.argsort(-values, kind="stable")] = np.arange(len(values), dtype=np.int16)
        order = np.argsort(rank[encoded.indices.to_numpy()], kind="stable")       # radix sort for int16
    else:
        order = np.argsort(-w, kind="stable")
    return order if by_pair is None else by_pair[order]


def discover_run_arrays(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, *, tau: int = 9, f: float = 1.0,
                        threshold: float = THRESHOLD,
                        min_length: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """discover_runs as arrays: (run_id of each kept run, offsets (kept + 1 of them) into `units`,
    `units`: the kept runs' members in layout order, run after run)."""
    check_context(tau, f)
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    min_length = tau if min_length is None else min_length
    src, dst, weight = np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(weight, np.float64)
    loop = src == dst
    if loop.any():
        src, dst, weight = src[~loop], dst[~loop], weight[~loop]
    if len(src) == 0:
        empty = np.zeros(0, np.int64)
        return empty, np.zeros(1, np.int64), empty
    vocab, inverse = distinct_ranks(np.concatenate([src, dst]))
    s, d, n = inverse[: len(src)], inverse[len(src):], len(vocab)
    order = _seed_order(s, d, weight, n)
    limits = np.array([threshold * once_weight(m, tau=tau, f=f) * (1 - REL_TOLERANCE) for m in range(tau + 1)])
    run_ids, offsets, members = _discover(*_csr(s, d, weight, n), *_csr(d, s, weight, n), s[order], d[order],
                                          limits, tau, min_length)
    return run_ids, offsets, vocab[members]


def discover_runs(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, *, tau: int = 9, f: float = 1.0,
                  threshold: float = THRESHOLD, min_length: int | None = None) -> list[tuple[int, list[int]]]:
    """Runs of one graph as (run_id, units in layout order), in discovery order.

    Input: one row per edge (src, dst unit ids, weight > 0; no duplicate (src, dst)). run_id counts
    every run found, discarded short ones included; min_length defaults to tau.

        discover_runs(np.array([1, 2]), np.array([2, 3]), np.array([2.0, 2.0]), tau=2, f=0.0)
    """
    run_ids, offsets, units = discover_run_arrays(src, dst, weight, tau=tau, f=f, threshold=threshold,
                                                  min_length=min_length)
    return [(int(r), units[offsets[k]:offsets[k + 1]].tolist()) for k, r in enumerate(run_ids)]
