"""ALIS access graphs' numeric core (section 5.2.1): pair counts of a reference string, edge weights and
size-budget pruning, over numpy arrays (numba loops).

For each read X_n, edges X_(n-j) -> X_n for j = 1..tau, weight 1 - f + f * (tau - j + 1) / tau. Edges are
counted exactly as two integers per (src, dst), pairs = number of pairs and closeness = sum of
(tau - j + 1), so that any split of the work sums to the same graph bit for bit; weight = pairs * (1 - f) +
f * closeness / tau at the end. Pruning to the size budget (19 bytes a vertex, 20 an edge) runs per graph
(prune_arrays). libs.alis.graph builds the graphs of a trace with Spark from these.

    src, dst, pairs, closeness = count_pairs(np.zeros(len(units), np.int64), units, 9)    # one segment
    keep, rounds = prune_arrays(src, dst, closeness / 9, 4096)         # f = 1; a 4 KiB budget
"""
from __future__ import annotations

import math

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from blockheat.sim.select import kth_smallest

# The paper's memory model of the graph: 19 bytes per vertex, 20 per edge (two adjacency entries).
VERTEX_BYTES = 19
EDGE_BYTES = 20
PRUNE_SHARE = 0.1


def check_context(tau: int, f: float) -> None:
    if tau < 1:
        raise ValueError(f"tau (context size) must be >= 1, got {tau}")
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"f (share of weight for distance) must be in [0, 1], got {f}")


def edge_weight(j: int, *, tau: int, f: float) -> float:
    """Weight of one pair of reads j apart (1 <= j <= tau)."""
    return 1.0 - f + f * (tau - j + 1) / tau


# --- pair counts ------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _pair_keys(seg: np.ndarray, vertex: np.ndarray, tau: int, vertex_bits: int, closeness_bits: int,
               first: int) -> np.ndarray:
    """Packed (src, dst, closeness) of every pair of reads at most tau apart in the same segment whose later
    read is at index first or after; pairs of a unit with itself carry no layout information and are skipped."""
    n = len(vertex)
    out = np.empty(max(n - first, 0) * tau, np.int64)
    m = 0
    for i in range(first, n):
        dst = vertex[i]
        high = dst << closeness_bits
        for j in range(1, tau + 1):
            if i < j or seg[i - j] != seg[i]:
                break
            src = vertex[i - j]
            if src != dst:
                out[m] = (src << (vertex_bits + closeness_bits)) | high | (tau - j + 1)
                m += 1
    return out[:m]


@numba.njit(cache=True, nogil=True)
def _radix_sort(keys: np.ndarray, bits: int) -> np.ndarray:
    """LSD radix sort, 16 bits a pass, of non-negative int64 keys below 2**bits (about 2.5x
    numpy's sort on the tens of millions of packed pairs one task sorts)."""
    n = len(keys)
    src, dst = keys, np.empty_like(keys)
    shift = 0
    while shift < bits:
        count = np.zeros(65537, np.int64)
        for i in range(n):
            count[((src[i] >> shift) & 0xFFFF) + 1] += 1
        for b in range(65536):
            count[b + 1] += count[b]
        for i in range(n):
            digit = (src[i] >> shift) & 0xFFFF
            dst[count[digit]] = src[i]
            count[digit] += 1
        src, dst = dst, src
        shift += 16
    return src


def _packing(n_vertices: int, tau: int) -> tuple[int, int]:
    vertex_bits = max(1, int(n_vertices - 1).bit_length())
    closeness_bits = int(tau).bit_length()
    if 2 * vertex_bits + closeness_bits > 63:
        raise ValueError(f"{n_vertices} distinct units in one task: too many to pack; use more partitions")
    return vertex_bits, closeness_bits


@numba.njit(cache=True, nogil=True)
def _sum_sorted(keys: np.ndarray, vocab: np.ndarray, vertex_bits: int, closeness_bits: int) -> np.ndarray:
    """Sorted packed keys -> the (4, n) counts (src, dst, pairs, closeness) per distinct pair key, units from
    vocab, in one pass (numpy's version made about ten arrays of the keys' length: 6 GB at the 79 M pairs of one
    25 M-request device)."""
    n = len(keys)
    distinct = 0
    for i in range(n):
        if i == 0 or (keys[i] >> closeness_bits) != (keys[i - 1] >> closeness_bits):
            distinct += 1
    out = np.zeros((4, distinct), np.int64)
    mask = (1 << closeness_bits) - 1
    low = (1 << vertex_bits) - 1
    k = -1
    last = -1
    for i in range(n):
        p = keys[i] >> closeness_bits
        if p != last:
            k += 1
            last = p
            out[0, k] = vocab[p >> vertex_bits]
            out[1, k] = vocab[p & low]
        out[2, k] += 1
        out[3, k] += keys[i] & mask
    return out


def _sum_keys(keys: np.ndarray, vocab: np.ndarray, vertex_bits: int, closeness_bits: int) -> np.ndarray:
    """Packed (src, dst, closeness) keys -> (4, n) counts (src, dst, pairs, closeness) per distinct (src, dst),
    sorted by (src, dst) (vocab is sorted)."""
    if len(keys) == 0:
        return np.zeros((4, 0), np.int64)
    keys = _radix_sort(keys, 2 * vertex_bits + closeness_bits)
    return _sum_sorted(keys, np.ascontiguousarray(vocab, np.int64), vertex_bits, closeness_bits)


def distinct_ranks(units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vocab, rank): the distinct ids in increasing order and each id's place among them, as
    np.unique(return_inverse=True): through a presence array when the ids are dense (units are numbered from 0
    per device), else by hashing first and sorting only the distinct ids."""
    if len(units) and units.min() >= 0 and units.max() < 4 * len(units):
        present = np.zeros(int(units.max()) + 1, bool)
        present[units] = True
        rank = np.cumsum(present) - 1
        return np.flatnonzero(present), rank[units]
    encoded = pa.array(units).dictionary_encode()
    distinct = encoded.dictionary.to_numpy()
    order = np.argsort(distinct)
    rank = np.empty(len(distinct), np.int64)
    rank[order] = np.arange(len(distinct))
    return distinct[order], rank[encoded.indices.to_numpy()]


def count_pairs(seg: np.ndarray, units: np.ndarray, tau: int, first: int = 0) -> np.ndarray:
    """The (4, n) counts: rows src, dst, pairs, closeness, summed over all pairs inside the segments of one
    group, sorted by (src, dst) (`src, dst, pairs, closeness = count_pairs(...)` unpacks the rows).

    seg: segment number per read (pairs never cross segments), units: unit id per read, both in
    reference order. first: only the pairs whose later read is at that index or after (the reads before are
    the last tau of the part before, so that parts of one reference string counted in turn sum to the whole's
    counts). Sort-based: keys pack (local src, local dst, closeness) into one int64.
    """
    vocab, vertex = distinct_ranks(np.asarray(units, np.int64))
    vertex_bits, closeness_bits = _packing(len(vocab), tau)
    # No name holds the keys here: _sum_keys keeps only the sorted copy (79 M keys are 630 MB).
    return _sum_keys(_pair_keys(np.asarray(seg, np.int64), vertex.astype(np.int64), tau, vertex_bits, closeness_bits,
                                first),
                     vocab, vertex_bits, closeness_bits)


def sum_pairs(src: np.ndarray, dst: np.ndarray, closeness: np.ndarray, tau: int) -> np.ndarray:
    """The (4, n) counts (src, dst, pairs, closeness) per distinct (src, dst) of single pairs with their
    closeness."""
    vocab, vertex = np.unique(np.concatenate([src, dst]), return_inverse=True)
    vertex_bits, closeness_bits = _packing(len(vocab), tau)
    v = vertex.astype(np.int64)
    keys = (v[: len(src)] << (vertex_bits + closeness_bits)) | (v[len(src):] << closeness_bits) | closeness
    return _sum_keys(keys, vocab, vertex_bits, closeness_bits)



# One fixed signature (C-contiguous in and out): lazily typed, it would compile F- and A-layout variants
# in the workers whenever numba's disk cache lacks them (as after any edit of this module).
@numba.njit("int64[:, ::1](int64[:, ::1], int64[:, ::1])", cache=True, nogil=True)
def merge_counts(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sum of two (4, n) int64 count arrays (src, dst, pairs, closeness), each sorted by (src, dst)
    without repeats; the result is sorted the same way."""
    na, nb = a.shape[1], b.shape[1]
    out = np.empty((4, na + nb), np.int64)
    i = j = m = 0
    while i < na and j < nb:
        if a[0, i] == b[0, j] and a[1, i] == b[1, j]:
            out[0, m], out[1, m] = a[0, i], a[1, i]
            out[2, m], out[3, m] = a[2, i] + b[2, j], a[3, i] + b[3, j]
            i += 1
            j += 1
        elif a[0, i] < b[0, j] or (a[0, i] == b[0, j] and a[1, i] < b[1, j]):
            out[:, m] = a[:, i]
            i += 1
        else:
            out[:, m] = b[:, j]
            j += 1
        m += 1
    out[:, m:m + na - i] = a[:, i:]
    m += na - i
    out[:, m:m + nb - j] = b[:, j:]
    return out[:, :m + nb - j].copy()



# --- pruning ---------------------------------------------------------------------------------


def _nearest_rank(values: np.ndarray, share: float) -> float:
    """The share-th percentile by nearest rank: the smallest value with at least ceil(share * n)
    values at or below it (always one of the values)."""
    return kth_smallest(values, max(1, math.ceil(len(values) * share)) - 1)


@numba.njit(cache=True, nogil=True)
def heaviest_into(out: np.ndarray, s: np.ndarray, d: np.ndarray, w: np.ndarray) -> None:
    """out[v] raised to the weight of each edge of vertex v, in or out (out: one float64 per vertex number)."""
    for i in range(len(w)):
        if w[i] > out[s[i]]:
            out[s[i]] = w[i]
        if w[i] > out[d[i]]:
            out[d[i]] = w[i]


def _vertex_weights(s: np.ndarray, d: np.ndarray, w: np.ndarray, n_vertices: int) -> np.ndarray:
    """Each vertex's heaviest edge weight, in or out; -inf for a vertex on no edge."""
    out = np.full(n_vertices, -np.inf)
    heaviest_into(out, s, d, w)
    return out


def _direct(src: np.ndarray, dst: np.ndarray) -> int | None:
    """The number of vertex numbers (largest id + 1) when the ids can serve as vertex numbers themselves: not
    negative, int32, and not much sparser than the edges (a graph's unit ids are a device's units, numbered from 0);
    None otherwise."""
    if not len(src):
        return None
    lo, hi = min(int(src.min()), int(dst.min())), max(int(src.max()), int(dst.max()))
    return hi + 1 if lo >= 0 and hi < min(1 << 31, 16 * len(src) + (1 << 20)) else None


def _numbered(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(s, d, n): the edges' ends as int32 vertex numbers below n: the ids themselves where _direct allows (no
    hashing of 2 E ids), else their dictionary codes."""
    n = _direct(src, dst)
    if n is not None:
        return src.astype(np.int32), dst.astype(np.int32), n
    encoded = pa.array(np.concatenate([src, dst])).dictionary_encode()
    inverse = encoded.indices.to_numpy().copy()         # writable: the rounds compact it in place
    return inverse[: len(src)], inverse[len(src):], len(encoded.dictionary)


def vertex_count(src: np.ndarray, dst: np.ndarray) -> int:
    """The number of distinct vertices on the edges (src[i], dst[i]): marked in an array where _direct allows,
    else by a hash."""
    n = _direct(src, dst)
    if n is None:
        return int(pc.count_distinct(pa.array(np.concatenate([src, dst]))).as_py()) if len(src) else 0
    seen = np.zeros(n, np.bool_)
    seen[src] = True
    seen[dst] = True
    return int(np.count_nonzero(seen))


def pruned_edges(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, budget: int, *,
                 share: float = PRUNE_SHARE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges prune_arrays keeps, as (src, dst, weight); the arrays themselves when it keeps them all."""
    keep, _ = prune_arrays(src, dst, weight, budget, share=share)
    if len(keep) == len(src):
        return src, dst, weight
    return src[keep], dst[keep], weight[keep]


def prune_arrays(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, budget: int, *,
                 share: float = PRUNE_SHARE) -> tuple[np.ndarray, int]:
    """The paper's bottom pruning of one graph until 19 V + 20 E <= budget bytes.

    Each round removes the edges whose weight is below the share-th percentile of the edge
    weights, and the vertices whose weight (their heaviest edge, in or out) is below the share-th
    percentile of the vertex weights, with those vertices' edges; both cuts are taken on the graph
    as the round finds it. When nothing lies below either percentile (the lightest weights are
    tied), the edges of the smallest weight go, all alike, so every round makes progress.
    Returns the indices of the edges kept and the number of rounds.

    Vertices are numbered once (a hash); a round is then O(E + V) (compiled vertex weights,
    np.partition for the percentiles): a random 7.9 M-edge graph, 15 rounds, went from 24.7 s
    (np.unique and np.maximum.at every round) to 5 s.
    """
    if EDGE_BYTES * len(src) + VERTEX_BYTES * vertex_count(src, dst) <= budget:   # fits as it is: no round
        return np.arange(len(src)), 0
    weight = np.asarray(weight, np.float64)
    # Any numbering of the vertices will do: the cuts do not depend on it. The surviving edges are compacted every
    # round (their original indices in `keep`), in int32 vertex numbers (fresh, writable arrays).
    s, d, n_vertices = _numbered(src, dst)
    w = weight.copy()
    keep = np.arange(len(src))
    rounds = 0
    while len(keep):
        vertex_weight = _vertex_weights(s, d, w, n_vertices)
        present = vertex_weight[vertex_weight > -np.inf]          # the vertices of the graph as it is now
        if VERTEX_BYTES * len(present) + EDGE_BYTES * len(keep) <= budget:
            break
        edge_cut, vertex_cut = _nearest_rank(w, share), _nearest_rank(present, share)
        tied = edge_cut == w.min() and vertex_cut == present.min()
        m = _cut(keep, s, d, w, vertex_weight < vertex_cut, edge_cut, tied)
        keep, s, d, w = keep[:m], s[:m], d[:m], w[:m]
        rounds += 1
    return keep, rounds


@numba.njit(cache=True, nogil=True)
def _cut(keep: np.ndarray, s: np.ndarray, d: np.ndarray, w: np.ndarray, dropped: np.ndarray, edge_cut: float,
         tied: bool) -> int:
    """One pruning round, in place: the edges that stay (weight not below the cut, neither end dropped; with
    `tied`, weight above it) moved to the front of all four arrays in their order; returns their count."""
    m = 0
    for i in range(len(w)):
        goes = w[i] < edge_cut or dropped[s[i]] or dropped[d[i]] or (tied and w[i] <= edge_cut)
        if not goes:
            keep[m], s[m], d[m], w[m] = keep[i], s[i], d[i], w[i]
            m += 1
    return m

