"""The first, pure-Python run discovery (heapq, dicts, deques), kept as the reference the compiled
sim.alis.runs.discover_runs is checked against on random graphs: same runs, same order, same ids."""
from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from blockheat.sim.alis.graph import check_context
from blockheat.sim.alis.runs import REL_TOLERANCE, THRESHOLD, once_weight


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
