"""An interval's ALIS graph too large to hold while it is counted and pruned (a hot device's day): the pair counts
kept in bucket files on the task's local disk by source unit range (the first counts spilled cut into equal shares,
so a hot range gets narrow buckets), merged, weighed and aged bucket by bucket, then pruned in rounds over the files
with the cuts of sim.alis.graph.prune_arrays (the edge percentile found exactly by radix selection over the weights'
bits, the vertex weights held: one per unit) until the graph holds at most memory_edges edges, where prune_arrays
takes over in memory. The graph is the one counted and pruned in memory, edge for edge, in (src, dst) order (the
buckets' edges one after the other): a round's cuts depend only on the graph as the round finds it."""
from __future__ import annotations

import math
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from blockheat.sim import (
    ALIS_EDGE_BYTES,
    ALIS_PRUNE_SHARE,
    ALIS_VERTEX_BYTES,
    alis_heaviest_into,
    float_of_bits,
    kth_smallest,
    merge_counts,
    pruned_edges,
    select_bits,
    top16_counts,
)

__all__ = ["Edges", "SpillSizes", "SpilledCounts", "WeighAge"]

Edges = tuple[np.ndarray, np.ndarray, np.ndarray]           # (src, dst, weight)
#: An interval's summed counts of one bucket (src, dst, pairs, closeness; sorted by (src, dst)) and the previous
#: graph's edges of the same bucket (None: no previous graph) -> the bucket's weighed and aged edges.
WeighAge = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Edges | None], Edges]


@dataclass(frozen=True)
class SpillSizes:
    """sum_edges: distinct edges an interval's pair counts hold in memory before they go to the bucket files;
    memory_edges: edges the pruning takes into memory (prune_arrays); buckets: the files; threads: how many a task
    counts parts and sums, weighs and prunes buckets with (numpy's sorts and the numba loops run without the GIL),
    so a device that is the only task on a machine uses its cores. The results do not depend on it."""

    sum_edges: int = 8_000_000
    memory_edges: int = 16_000_000
    buckets: int = 64
    threads: int = 1


class SpilledCounts:
    """One interval's pair counts in bucket files (a scratch directory of their own, removed by close()). Bucket b
    holds the sources in [lows[b], lows[b + 1]): equal ranges of the vertex ids until the first counts added set
    the cuts at their sources' quantiles."""

    def __init__(self, n_vertices: int, buckets: int, threads: int = 1) -> None:
        self.n_vertices, self.buckets, self.threads = max(int(n_vertices), 1), int(buckets), max(1, int(threads))
        self.vertex_type = np.int32 if self.n_vertices < 2**31 else np.int64
        self._scratch = tempfile.TemporaryDirectory(prefix="blockheat-alis-")
        self._root = Path(self._scratch.name)
        self._segments: list[list[tuple[int, type]]] = [[] for _ in range(self.buckets)]  # (edges, tally type)
        self.lows = np.arange(self.buckets + 1, dtype=np.int64) * self.n_vertices // self.buckets
        self._cut = False

    def _path(self, kind: str, b: int) -> Path:
        return self._root / f"{kind}-{b}"

    def _slices(self, src: np.ndarray) -> np.ndarray:
        """Sorted sources' bucket bounds: bucket b is [at[b], at[b + 1]) (ids past the last cut in the last)."""
        at = np.searchsorted(src, self.lows)
        at[0], at[-1] = 0, len(src)
        return at

    def add(self, counts: np.ndarray) -> None:
        """Counts (4, n) int64: src, dst, pairs, closeness, sorted by (src, dst) without repeats (PairCounter's
        sums), appended to their buckets (as a segment of four column blocks: src and dst in the vertex type, pairs
        and closeness in int32 when the segment's fit, else int64)."""
        n = counts.shape[1]
        if n == 0:
            return
        src = counts[0]
        if n > 1 and bool((src[1:] < src[:-1]).any()):
            raise ValueError("spilled counts must come sorted by source")
        if not self._cut:                  # the first counts' sources in equal shares: a hot range, narrow buckets
            self.lows[1:-1] = src[np.arange(1, self.buckets) * n // self.buckets]
            self._cut = True
        fits = int(counts[2:].min()) >= 0 and int(counts[2:].max()) < 2**31
        tally_type = np.int32 if fits else np.int64
        bounds = self._slices(src)
        for b in range(self.buckets):
            a, z = int(bounds[b]), int(bounds[b + 1])
            if z > a:
                with open(self._path("counts", b), "ab") as f:
                    for row, dtype in zip(counts, (self.vertex_type, self.vertex_type, tally_type, tally_type),
                                          strict=True):
                        row[a:z].astype(dtype).tofile(f)
                self._segments[b].append((z - a, tally_type))

    def _counts(self, b: int) -> list[np.ndarray]:
        """A bucket's segments as added, each (4, n) int64 (sorted by (src, dst))."""
        if not self._segments[b]:
            return []
        raw = np.fromfile(self._path("counts", b), np.uint8)
        out, at = [], 0
        for n, tally_type in self._segments[b]:
            segment = np.empty((4, n), np.int64)
            for c, dtype in enumerate((self.vertex_type, self.vertex_type, tally_type, tally_type)):
                size = np.dtype(dtype).itemsize * n
                segment[c] = raw[at:at + size].view(dtype)
                at += size
            out.append(segment)
        return out

    def _previous_parts(self, previous: Edges | None) -> list[Edges] | None:
        """The previous graph's edges by bucket (each part in the previous graph's order)."""
        if previous is None:
            return None
        src = np.asarray(previous[0])
        if len(src) > 1 and bool((src[1:] < src[:-1]).any()):
            order = np.argsort(src, kind="stable")
            previous = (src[order], previous[1][order], previous[2][order])
            src = previous[0]
        at = self._slices(src)
        return [(previous[0][at[b]:at[b + 1]], previous[1][at[b]:at[b + 1]], previous[2][at[b]:at[b + 1]])
                for b in range(self.buckets)]

    def graph(self, weigh_age: WeighAge, previous: Edges | None, budget: int | None, *,
              memory_edges: int, share: float = ALIS_PRUNE_SHARE) -> Edges:
        """The interval's graph: counts summed per (src, dst), weighed and aged with `previous` (weigh_age, per
        bucket), pruned to the budget (None: not pruned); in (src, dst) order."""
        found = None if budget is None else _Census(self.n_vertices)     # what the pruning's first round needs
        previous_parts = self._previous_parts(previous)

        def bucket(b: int) -> None:
            src, dst, pairs, closeness = _summed(self._counts(b))
            s, d, w = weigh_age(src, dst, pairs, closeness, None if previous_parts is None else previous_parts[b])
            s, d = s.astype(self.vertex_type, copy=False), d.astype(self.vertex_type, copy=False)  # as read back
            self._write(b, s, d, w)
            if found is not None:
                found.add(s, d, w)

        self._each_bucket(bucket)
        if found is not None and found.edges:
            self._prune_on_disk(found, budget, share, memory_edges)
        # Each bucket's edges come in (src, dst) order (weigh_age keeps or makes it) and the buckets are ranges of src.
        total = sum(self._edge_file(b)[2] for b in range(self.buckets))
        src, dst, weight = np.empty(total, np.int64), np.empty(total, np.int64), np.empty(total, np.float64)
        at = 0
        for s, d, w in self._edges():
            src[at:at + len(s)], dst[at:at + len(s)], weight[at:at + len(s)] = s, d, w
            at += len(s)
        if budget is not None and len(src):
            return pruned_edges(src, dst, weight, budget, share=share)
        return src, dst, weight

    def _write(self, b: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> None:
        """A bucket's edges as three blocks (src and dst in the vertex type, weight as float64)."""
        with open(self._path("edges", b), "wb") as f:
            for column, dtype in ((src, self.vertex_type), (dst, self.vertex_type), (weight, np.float64)):
                np.ascontiguousarray(column, dtype).tofile(f)

    def _edge_file(self, b: int) -> tuple[Path, int, int]:
        """A bucket's edge file, the vertex type's bytes and its edges."""
        path, v = self._path("edges", b), np.dtype(self.vertex_type).itemsize
        return path, v, path.stat().st_size // (2 * v + 8)

    def _read(self, b: int) -> Edges:
        """A bucket's edges (views of one read)."""
        path, v, n = self._edge_file(b)
        raw = np.fromfile(path, np.uint8)
        return (raw[: v * n].view(self.vertex_type), raw[v * n: 2 * v * n].view(self.vertex_type),
                raw[2 * v * n:].view(np.float64))

    def _weights(self, b: int) -> np.ndarray:
        """A bucket's weights alone (the file's last block)."""
        path, v, n = self._edge_file(b)
        return np.fromfile(path, np.float64, count=n, offset=2 * v * n)

    def _edges(self) -> Iterator[Edges]:
        for b in range(self.buckets):
            yield self._read(b)

    def _prune_on_disk(self, found: _Census, budget: int, share: float, memory_edges: int) -> None:
        """prune_arrays's rounds over the bucket files while the graph has more than memory_edges edges (or until
        it fits the budget). found: the census of the graph as the files hold it; each round's rewrite takes the
        next one."""
        while found.edges > memory_edges:
            present = found.vertex[found.vertex > -np.inf]
            if ALIS_VERTEX_BYTES * len(present) + ALIS_EDGE_BYTES * found.edges <= budget:
                break
            edge_cut = self._select(found.top, max(1, math.ceil(found.edges * share)) - 1)
            k = max(1, math.ceil(len(present) * share))
            vertex_cut = kth_smallest(present, k - 1)
            tied = edge_cut == found.lightest and vertex_cut == present.min()
            dropped = found.vertex < vertex_cut
            del present
            found = _Census(self.n_vertices)

            def bucket(b: int, census: _Census = found, edge_cut: float = edge_cut, tied: bool = tied,
                       dropped: np.ndarray = dropped) -> None:
                s, d, w = self._read(b)
                stays = w >= edge_cut
                if tied:
                    stays &= w > edge_cut
                stays &= ~dropped[s]
                stays &= ~dropped[d]
                s, d, w = s[stays], d[stays], w[stays]
                self._write(b, s, d, w)
                census.add(s, d, w)

            self._each_bucket(bucket)

    def _each_bucket(self, fn: Callable[[int], None]) -> None:
        """fn of every bucket, on `threads` threads (each bucket's files are its own; the census locks)."""
        if self.threads == 1:
            for b in range(self.buckets):
                fn(b)
            return
        with ThreadPoolExecutor(self.threads, thread_name_prefix="alis-bucket") as pool:
            for done in [pool.submit(fn, b) for b in range(self.buckets)]:
                done.result()

    def _select(self, top: np.ndarray, k: int) -> float:
        """The k-th smallest weight (0-based) of the files' edges, top: the count per value of the weights' top 16
        bits (positive floats order as their bits; select_bits). Its passes read the weights only."""
        def passes() -> Iterator[np.ndarray]:
            for b in range(self.buckets):
                yield self._weights(b).view(np.uint64)

        return float_of_bits(select_bits(passes, top, k))

    def close(self) -> None:
        """The files removed."""
        self._scratch.cleanup()


def _summed(segments: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """A bucket's segments (each (4, n) sorted by (src, dst) without repeats) summed per (src, dst): merged in
    pairs (merge_counts), in (src, dst) order."""
    if not segments:
        return tuple(np.zeros(0, np.int64) for _ in range(4))
    while len(segments) > 1:
        segments = [merge_counts(*segments[k:k + 2]) if k + 1 < len(segments) else segments[k]
                    for k in range(0, len(segments), 2)]
    return tuple(segments[0])


class _Census:
    """What a pruning round needs of a graph, gathered as its edges are written (by any thread, in any order): the
    edges, each vertex's heaviest edge (in or out; -inf: none), the count per value of the weights' top 16 bits, and
    the lightest weight."""

    def __init__(self, n_vertices: int) -> None:
        self.lock = threading.Lock()
        self.edges = 0
        self.vertex = np.full(n_vertices, -np.inf)
        self.top = np.zeros(1 << 16, np.int64)
        self.lightest = math.inf

    def add(self, s: np.ndarray, d: np.ndarray, w: np.ndarray) -> None:
        if not len(w):
            return
        top = top16_counts(w.view(np.uint64))
        lightest = float(w.min())
        with self.lock:
            self.edges += len(w)
            alis_heaviest_into(self.vertex, s, d, w)
            self.top += top
            self.lightest = min(self.lightest, lightest)
