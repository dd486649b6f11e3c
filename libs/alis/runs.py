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
once, touching its edges each time) with lazy max-heaps. Ties: the heaviest edge with the smallest
(src, dst) unit ids first, the smallest unit id among equal scores, the back on equal weights (as
in the paper's figure 11 walk-through). Vertices of a discarded short run stay marked.

Runs are found per (device, interval) in applyInArrow groups on the executors: the graphs are
already aggregated and pruned to their size budget, so one group fits a task, and the devices and
intervals run in parallel without passing through the driver.
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from libs.alis.graph import GROUP, check_context, edge_weight

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

THRESHOLD = 0.1           # run clustering alone
THRESHOLD_COMBINED = 0.4  # runs plus heat clustering (the paper's section 5.3 default)
RUN_COLUMNS = ("device", "interval_id", "run_id", "rank", "position", "unit_id")
RUN_DDL = "device string, interval_id long, run_id long, rank long, position long, unit_id long"
# A head or tail weight within this relative distance of the threshold counts as reaching it, so a
# sequence seen exactly as often as the threshold asks is not lost to float rounding.
REL_TOLERANCE = 1e-9


def once_weight(m: int, *, tau: int, f: float) -> float:
    """Headweight (or tailweight) of a sequence seen once, over m = min(tau, |R|) run members."""
    return sum(edge_weight(j, tau=tau, f=f) for j in range(1, min(m, tau) + 1))


class _Side:
    """Scores of the unmarked candidates for one end of the run (head: in-edges of the head
    members, tail: out-edges of the tail members) with a lazy max-heap over them."""

    def __init__(self, ptr: list[int], nbr: list[int], wgt: list[float], marked: bytearray) -> None:
        self.ptr, self.nbr, self.wgt, self.marked = ptr, nbr, wgt, marked
        self.score: dict[int, float] = {}
        self.heap: list[tuple[float, int]] = []

    def change(self, member: int, sign: float) -> None:
        score, heap, marked, nbr, wgt = self.score, self.heap, self.marked, self.nbr, self.wgt
        for k in range(self.ptr[member], self.ptr[member + 1]):
            x = nbr[k]
            if not marked[x]:
                s = score.get(x, 0.0) + sign * wgt[k]
                score[x] = s
                heapq.heappush(heap, (-s, x))

    def best(self) -> tuple[float, int]:
        heap, score, marked = self.heap, self.score, self.marked
        while heap:
            neg, x = heap[0]
            if marked[x] or score[x] != -neg:
                heapq.heappop(heap)
                continue
            return -neg, x
        return float("-inf"), -1


def _csr(keys: np.ndarray, nbrs: np.ndarray, weights: np.ndarray, n: int) -> tuple[list[int], list[int], list[float]]:
    order = np.argsort(keys, kind="stable")
    ptr = np.searchsorted(keys[order], np.arange(n + 1), side="left")
    return ptr.tolist(), nbrs[order].tolist(), weights[order].tolist()


def discover_runs(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, *, tau: int = 9, f: float = 1.0,
                  threshold: float = THRESHOLD, min_length: int | None = None) -> list[tuple[int, list[int]]]:
    """Runs of one graph as (run_id, units in layout order), in discovery order.

    Input: one row per edge (src, dst unit ids, weight > 0; no duplicate (src, dst)). run_id counts
    every run found, discarded short ones included; min_length defaults to tau.

        discover_runs(np.array([1, 2]), np.array([2, 3]), np.array([2.0, 2.0]), tau=2, f=0.0)
    """
    check_context(tau, f)
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    min_length = tau if min_length is None else min_length
    src, dst, weight = np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(weight, np.float64)
    loop = src == dst
    src, dst, weight = src[~loop], dst[~loop], weight[~loop]
    if len(src) == 0:
        return []
    vocab, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    s, d, n = inverse[: len(src)], inverse[len(src):], len(vocab)
    marked = bytearray(n)
    out_ptr, out_nbr, out_w = _csr(s, d, weight, n)
    in_ptr, in_nbr, in_w = _csr(d, s, weight, n)
    order = np.lexsort((d, s, -weight))  # heaviest first; vocab order is unit-id order
    seed_s, seed_d = s[order].tolist(), d[order].tolist()
    limits = [threshold * once_weight(m, tau=tau, f=f) * (1 - REL_TOLERANCE) for m in range(tau + 1)]
    units = vocab.tolist()
    runs: list[tuple[int, list[int]]] = []
    run_id = -1
    e = 0
    while True:
        while e < len(seed_s) and (marked[seed_s[e]] or marked[seed_d[e]]):
            e += 1
        if e == len(seed_s):
            return runs
        run_id += 1
        a, b = seed_s[e], seed_d[e]
        marked[a] = marked[b] = 1
        run: deque[int] = deque([a, b])
        head_side = _Side(in_ptr, in_nbr, in_w, marked)
        tail_side = _Side(out_ptr, out_nbr, out_w, marked)
        head: deque[int] = deque()
        tail: deque[int] = deque()
        for x in list(run)[:tau]:
            head.append(x)
            head_side.change(x, 1.0)
        for x in list(run)[-tau:]:
            tail.append(x)
            tail_side.change(x, 1.0)
        while True:
            limit = limits[min(tau, len(run))]
            head_weight, u = head_side.best()
            tail_weight, v = tail_side.best()
            if head_weight < limit and tail_weight < limit:
                break
            if head_weight > tail_weight:
                marked[u] = 1
                run.appendleft(u)
                head.appendleft(u)
                head_side.change(u, 1.0)
                if len(head) > tau:
                    head_side.change(head.pop(), -1.0)
                if len(run) <= tau:
                    tail.appendleft(u)
                    tail_side.change(u, 1.0)
            else:
                marked[v] = 1
                run.append(v)
                tail.append(v)
                tail_side.change(v, 1.0)
                if len(tail) > tau:
                    tail_side.change(tail.popleft(), -1.0)
                if len(run) <= tau:
                    head.append(v)
                    head_side.change(v, 1.0)
        if len(run) >= min_length:
            runs.append((run_id, [units[x] for x in run]))


def _runs_of_group(tau: int, f: float, threshold: float, min_length: int | None):  # type: ignore[no-untyped-def]
    def run(table: pa.Table) -> pa.Table:
        found = discover_runs(table.column("src_unit").to_numpy(), table.column("dst_unit").to_numpy(),
                              table.column("weight").to_numpy(), tau=tau, f=f, threshold=threshold,
                              min_length=min_length)
        run_ids = [rid for rid, members in found for _ in members]
        ranks = [rank for rank, (_, members) in enumerate(found) for _ in members]
        positions = [p for _, members in found for p in range(len(members))]
        unit_ids = [u for _, members in found for u in members]
        n = len(unit_ids)
        device = table.column("device")[0].as_py() if table.num_rows else ""
        interval = table.column("interval_id")[0].as_py() if table.num_rows else 0
        return pa.table([pa.array([device] * n, pa.string()), pa.array([interval] * n, pa.int64()),
                         pa.array(run_ids, pa.int64()), pa.array(ranks, pa.int64()),
                         pa.array(positions, pa.int64()), pa.array(unit_ids, pa.int64())], names=list(RUN_COLUMNS))

    return run


def find_runs(graph: DataFrame, *, tau: int = 9, f: float = 1.0, threshold: float = THRESHOLD,
              min_length: int | None = None) -> DataFrame:
    """Runs of every (device, interval_id) graph.

    Input: device, interval_id, src_unit, dst_unit, weight (an aged, pruned access graph).
    Output: RUN_COLUMNS, one row per run member.

        runs = find_runs(graph, tau=9, f=1.0, threshold=THRESHOLD_COMBINED)
    """
    check_context(tau, f)
    return (graph.select(*GROUP, "src_unit", "dst_unit", "weight").groupBy(*GROUP)
            .applyInArrow(_runs_of_group(tau, f, threshold, min_length), RUN_DDL))
