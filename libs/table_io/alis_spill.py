"""An interval's ALIS graph too large to hold while it is counted and pruned (a hot device's day): the pair counts
kept in bucket files on the task's local disk by source unit (src % buckets), summed, weighed and aged bucket by
bucket, then pruned in rounds over the files with the cuts of sim.alis.graph.prune_arrays (the edge percentile
found exactly by radix selection over the weights' bits, the vertex weights held: one per unit) until the graph
holds at most memory_edges edges, where prune_arrays takes over in memory. The graph is the one counted and pruned
in memory, edge for edge, in (src, dst) order: a round's cuts depend only on the graph as the round finds it."""
from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from blockheat.sim import ALIS_EDGE_BYTES, ALIS_PRUNE_SHARE, ALIS_VERTEX_BYTES, prune_arrays, select_bits

__all__ = ["Edges", "SpillSizes", "SpilledCounts", "WeighAge"]

Edges = tuple[np.ndarray, np.ndarray, np.ndarray]           # (src, dst, weight)
#: An interval's summed counts of one bucket (src, dst, pairs, closeness; sorted by (src, dst)) and the previous
#: graph's edges of the same bucket (None: no previous graph) -> the bucket's weighed and aged edges.
WeighAge = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Edges | None], Edges]


@dataclass(frozen=True)
class SpillSizes:
    """sum_edges: distinct edges an interval's pair counts hold in memory before they go to the bucket files;
    memory_edges: edges the pruning takes into memory (prune_arrays); buckets: the files."""

    sum_edges: int = 8_000_000
    memory_edges: int = 16_000_000
    buckets: int = 64


class SpilledCounts:
    """One interval's pair counts in bucket files (a scratch directory of their own, removed by close())."""

    def __init__(self, n_vertices: int, buckets: int) -> None:
        self.n_vertices, self.buckets = max(int(n_vertices), 1), int(buckets)
        self._scratch = tempfile.TemporaryDirectory(prefix="blockheat-alis-")
        self._root = Path(self._scratch.name)

    def _path(self, kind: str, b: int) -> Path:
        return self._root / f"{kind}-{b}"

    def add(self, counts: np.ndarray) -> None:
        """Counts (4, n) int64: src, dst, pairs, closeness, appended to their buckets."""
        bucket = counts[0] % self.buckets
        order = np.argsort(bucket, kind="stable")
        rows = np.ascontiguousarray(counts[:, order].T)
        bounds = np.searchsorted(bucket[order], np.arange(self.buckets + 1))
        for b in range(self.buckets):
            if bounds[b + 1] > bounds[b]:
                with open(self._path("counts", b), "ab") as f:
                    rows[bounds[b]:bounds[b + 1]].tofile(f)

    def graph(self, weigh_age: WeighAge, previous: Edges | None, budget: int | None, *,
              memory_edges: int, share: float = ALIS_PRUNE_SHARE) -> Edges:
        """The interval's graph: counts summed per (src, dst), weighed and aged with `previous` (weigh_age, per
        bucket), pruned to the budget (None: not pruned); in (src, dst) order."""
        edges = 0
        for b in range(self.buckets):
            path = self._path("counts", b)
            rows = np.fromfile(path, np.int64).reshape(-1, 4) if path.exists() else np.zeros((0, 4), np.int64)
            src, dst, pairs, closeness = self._summed(rows)
            del rows
            prev = None if previous is None else _bucket_of(previous, b, self.buckets)
            s, d, w = weigh_age(src, dst, pairs, closeness, prev)
            _write(self._path("edges", b), s, d, w)
            edges += len(s)
        if budget is not None and edges:
            edges = self._prune_on_disk(edges, budget, share, memory_edges)
        src, dst, weight = (np.concatenate(c) for c in zip(*self._edges(), strict=True))
        order = np.lexsort((dst, src))
        src, dst, weight = src[order], dst[order], weight[order]
        if budget is not None and len(src):
            keep, _ = prune_arrays(src, dst, weight, budget, share=share)
            src, dst, weight = src[keep], dst[keep], weight[keep]
        return src, dst, weight

    def _summed(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """One bucket's rows summed per (src, dst) (integers: exact in any order), sorted by (src, dst)."""
        key = rows[:, 0] * self.n_vertices + rows[:, 1]
        order = np.argsort(key, kind="stable")
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, np.int64)
        pairs = np.add.reduceat(rows[order, 2], starts) if len(starts) else np.zeros(0, np.int64)
        closeness = np.add.reduceat(rows[order, 3], starts) if len(starts) else np.zeros(0, np.int64)
        first = key[starts]
        return first // self.n_vertices, first % self.n_vertices, pairs, closeness

    def _edges(self) -> Iterator[Edges]:
        for b in range(self.buckets):
            yield _read(self._path("edges", b))

    def _prune_on_disk(self, edges: int, budget: int, share: float, memory_edges: int) -> int:
        """prune_arrays's rounds over the bucket files while the graph has more than memory_edges edges (or until
        it fits the budget); returns its edges."""
        while edges > memory_edges:
            vertex = np.full(self.n_vertices, -np.inf)
            top = np.zeros(1 << 16, np.int64)
            lightest = math.inf
            for s, d, w in self._edges():
                np.maximum.at(vertex, s, w)            # each vertex's heaviest edge, in or out
                np.maximum.at(vertex, d, w)
                top += np.bincount(w.view(np.uint64) >> np.uint64(48), minlength=1 << 16)
                lightest = min(lightest, float(w.min())) if len(w) else lightest
            present = vertex[vertex > -np.inf]
            if ALIS_VERTEX_BYTES * len(present) + ALIS_EDGE_BYTES * edges <= budget:
                break
            edge_cut = self._select(top, max(1, math.ceil(edges * share)) - 1)
            k = max(1, math.ceil(len(present) * share))
            vertex_cut = float(np.partition(present, k - 1)[k - 1])
            tied = edge_cut == lightest and vertex_cut == present.min()
            dropped = vertex < vertex_cut
            edges = 0
            for b in range(self.buckets):
                s, d, w = _read(self._path("edges", b))
                goes = (w < edge_cut) | dropped[s] | dropped[d]
                if tied:
                    goes |= w <= edge_cut
                _write(self._path("edges", b), s[~goes], d[~goes], w[~goes])
                edges += int(np.count_nonzero(~goes))
        return edges

    def _select(self, top: np.ndarray, k: int) -> float:
        """The k-th smallest weight (0-based) of the files' edges, top: the count per value of the weights' top 16
        bits (positive floats order as their bits; select_bits)."""
        def passes() -> Iterator[np.ndarray]:
            for _, _, w in self._edges():
                yield w.view(np.uint64)

        return float(np.array([select_bits(passes, top, k)], np.uint64).view(np.float64)[0])

    def close(self) -> None:
        """The files removed."""
        self._scratch.cleanup()


def _bucket_of(edges: Edges, b: int, buckets: int) -> Edges:
    inside = edges[0] % buckets == b
    return edges[0][inside], edges[1][inside], edges[2][inside]


def _write(path: Path, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> None:
    rows = np.empty((len(src), 3), np.int64)
    rows[:, 0], rows[:, 1], rows[:, 2] = src, dst, np.asarray(weight, np.float64).view(np.int64)
    rows.tofile(path)


def _read(path: Path) -> Edges:
    rows = np.fromfile(path, np.int64).reshape(-1, 3)
    return rows[:, 0].copy(), rows[:, 1].copy(), rows[:, 2].copy().view(np.float64)

