"""ALIS access graphs (section 5.2.1): edges from the reference string, aging, size-budget pruning.

For each read X_n of a device and interval, edges X_(n-j) -> X_n for j = 1..tau, weight
1 - f + f * (tau - j + 1) / tau. Edges are first counted exactly as two integers per (src, dst),
pairs = number of pairs and closeness = sum of (tau - j + 1), so that any split of the work sums
to the same graph bit for bit; weight = pairs * (1 - f) + f * closeness / tau at the end.

Scale: a device's ordered reads are cut into time chunks (chunk_us, default 60 s), which
hash-partition over all tasks; each task counts the pairs inside its chunks (numba + a radix sort
of packed keys) and keeps the first and last tau reads of every chunk (the overlap). It passes
both on packed in a few binary rows per group and reduce bucket (a hash of src); one reduce task
per bucket (routed by libs.io.partitioning.partition_keys) finds, for every group, the pairs across chunk edges from the
group's overlaps and merges the sorted partial counts (numba). One hot device so spreads over
every core, in both stages. Time chunks, not read counts, so that a chunk is a function of the
row alone.

Pruning to the size budget (19 bytes a vertex, 20 an edge) runs per graph in numpy
(prune_arrays): a graph is bounded by its budget plus one interval's new edges.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from libs.alis.units import REF_ORDER, idiv
from libs.io.partitioning import partition_keys
from libs.io.task_parquet import sink_parquet, sink_parquet_groups
from libs.transforms.aging import age_values

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, GroupedData

GROUP = ("device", "interval_id")
EDGE = ("device", "src_unit", "dst_unit")
COUNT_COLUMNS = ("device", "interval_id", "src_unit", "dst_unit", "pairs", "closeness")
COUNT_DDL = "device string, interval_id long, src_unit long, dst_unit long, pairs long, closeness long"
# What a task passes to the final sum, packed: one row per (task, group, reduce bucket) with the
# bucket's share of the task's pair counts and all the task's chunk-end reads of the group; `route`
# is a key that Spark's hash partitioning sends to partition `bucket` (libs.io.partitioning.partition_keys).
PARTIAL_DDL = "device string, interval_id long, bucket long, route long, counts binary, ends binary"
WEIGHT_COLUMNS = ("device", "interval_id", "src_unit", "dst_unit", "weight")
WEIGHT_DDL = "device string, interval_id long, src_unit long, dst_unit long, weight double"
# The paper's memory model of the graph: 19 bytes per vertex, 20 per edge (two adjacency entries).
VERTEX_BYTES = 19
EDGE_BYTES = 20
PRUNE_SHARE = 0.1
# Time chunks of the parallel build: a chunk is the unit of spreading (one task holds it whole),
# and each chunk edge costs tau * (tau + 1) / 2 crossing pairs computed apart, by every reduce
# bucket of the group.
CHUNK_US = 60_000_000


def check_context(tau: int, f: float) -> None:
    if tau < 1:
        raise ValueError(f"tau (context size) must be >= 1, got {tau}")
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"f (share of weight for distance) must be in [0, 1], got {f}")


def edge_weight(j: int, *, tau: int, f: float) -> float:
    """Weight of one pair of reads j apart (1 <= j <= tau)."""
    return 1.0 - f + f * (tau - j + 1) / tau


# --- per-task numeric core -------------------------------------------------------------------


@numba.njit(cache=True)
def _pair_keys(seg: np.ndarray, vertex: np.ndarray, tau: int, vertex_bits: int, closeness_bits: int) -> np.ndarray:
    """Packed (src, dst, closeness) of every pair of reads at most tau apart in the same segment;
    pairs of a unit with itself carry no layout information and are skipped."""
    n = len(vertex)
    out = np.empty(n * tau, np.int64)
    m = 0
    for i in range(n):
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


@numba.njit(cache=True)
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


@numba.njit(cache=True)
def _sum_sorted(keys: np.ndarray, closeness_bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted packed keys -> (pair key, pairs, closeness) per distinct pair key, in one pass (numpy's
    version made about ten arrays of the keys' length: 6 GB at the 79 M pairs of one 25 M-request device)."""
    n = len(keys)
    distinct = 0
    for i in range(n):
        if i == 0 or (keys[i] >> closeness_bits) != (keys[i - 1] >> closeness_bits):
            distinct += 1
    pair = np.empty(distinct, np.int64)
    pairs = np.zeros(distinct, np.int64)
    closeness = np.zeros(distinct, np.int64)
    mask = (1 << closeness_bits) - 1
    k = -1
    for i in range(n):
        p = keys[i] >> closeness_bits
        if k < 0 or p != pair[k]:
            k += 1
            pair[k] = p
        pairs[k] += 1
        closeness[k] += keys[i] & mask
    return pair, pairs, closeness


def _sum_keys(keys: np.ndarray, vocab: np.ndarray, vertex_bits: int, closeness_bits: int) -> tuple[np.ndarray, ...]:
    """Packed (src, dst, closeness) keys -> (src, dst, pairs, closeness) per distinct (src, dst),
    sorted by (src, dst) (vocab is sorted)."""
    if len(keys) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    keys = _radix_sort(keys, 2 * vertex_bits + closeness_bits)
    first, pairs, closeness = _sum_sorted(keys, closeness_bits)
    del keys
    return vocab[first >> vertex_bits], vocab[first & ((1 << vertex_bits) - 1)], pairs, closeness


def count_pairs(seg: np.ndarray, units: np.ndarray, tau: int) -> tuple[np.ndarray, ...]:
    """(src, dst, pairs, closeness) summed over all pairs inside the segments of one group.

    seg: segment number per read (pairs never cross segments), units: unit id per read, both in
    reference order. Sort-based: keys pack (local src, local dst, closeness) into one int64.
    """
    vocab, vertex = np.unique(units, return_inverse=True)
    vertex_bits, closeness_bits = _packing(len(vocab), tau)
    # No name holds the keys here: _sum_keys keeps only the sorted copy (79 M keys are 630 MB).
    return _sum_keys(_pair_keys(np.asarray(seg, np.int64), vertex.astype(np.int64), tau, vertex_bits, closeness_bits),
                     vocab, vertex_bits, closeness_bits)


def sum_pairs(src: np.ndarray, dst: np.ndarray, closeness: np.ndarray, tau: int) -> tuple[np.ndarray, ...]:
    """(src, dst, pairs, closeness) per distinct (src, dst) of single pairs with their closeness."""
    vocab, vertex = np.unique(np.concatenate([src, dst]), return_inverse=True)
    vertex_bits, closeness_bits = _packing(len(vocab), tau)
    v = vertex.astype(np.int64)
    keys = (v[: len(src)] << (vertex_bits + closeness_bits)) | (v[len(src):] << closeness_bits) | closeness
    return _sum_keys(keys, vocab, vertex_bits, closeness_bits)


def _changes(*cols: np.ndarray) -> np.ndarray:
    """True where a row starts a new run of equal values in any of the columns."""
    n = len(cols[0])
    new = np.zeros(n, bool)
    if n:
        new[0] = True
        for c in cols:
            new[1:] |= c[1:] != c[:-1]
    return new


def _table(batches: Iterator[pa.RecordBatch]) -> pa.Table | None:
    kept = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(kept) if kept else None


def _bucket(src: np.ndarray, buckets: int) -> np.ndarray:
    """Reduce bucket of each edge: a multiplicative hash of its source unit."""
    return ((src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) % np.uint64(buckets)


def _pack(rows: np.ndarray) -> bytes:
    """A (k, n) int64 array as bytes: each row as its minimum and the offsets from it in the
    narrowest unsigned type that holds them (the pair counts shrink about 3x)."""
    parts = [np.array(rows.shape, np.int64).tobytes()]
    for row in rows:
        low = int(row.min()) if len(row) else 0
        span = int(row.max()) - low if len(row) else 0
        width = next(w for w in (1, 2, 4, 8) if span < 1 << (8 * w))
        parts += [np.array([low, width], np.int64).tobytes(), (row - low).astype(f"u{width}").tobytes()]
    return b"".join(parts)


def _unpack(blob: bytes) -> np.ndarray:
    """_pack's bytes -> the (k, n) int64 array."""
    k, n = (int(v) for v in np.frombuffer(blob, np.int64, 2))
    rows, at = np.empty((k, n), np.int64), 16
    for r in range(k):
        low, width = (int(v) for v in np.frombuffer(blob, np.int64, 2, at))
        rows[r] = np.frombuffer(blob, f"u{width}", n, at + 16)
        rows[r] += low
        at += 16 + width * n
    return rows


@numba.njit(cache=True)
def _split_by_bucket(bucket: np.ndarray, src: np.ndarray, dst: np.ndarray, pairs: np.ndarray,
                     closeness: np.ndarray, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts as one (4, n) array grouped by their reduce bucket, keeping their order within a
    bucket (a counting sort), and the bucket bounds: bucket b is [bounds[b], bounds[b + 1])."""
    n = len(src)
    bounds = np.zeros(buckets + 1, np.int64)
    for i in range(n):
        bounds[bucket[i] + 1] += 1
    for b in range(buckets):
        bounds[b + 1] += bounds[b]
    at = bounds[:-1].copy()
    out = np.empty((4, n), np.int64)
    for i in range(n):
        k = at[bucket[i]]
        out[0, k], out[1, k], out[2, k], out[3, k] = src[i], dst[i], pairs[i], closeness[i]
        at[bucket[i]] = k + 1
    return out, bounds


def _partials(device: str, interval: int, counts: tuple[np.ndarray, ...], ends: np.ndarray,
              routes: np.ndarray) -> pa.RecordBatch:
    """PARTIAL_DDL rows of one group in one task, one per bucket: the bucket's share of counts
    (src, dst, pairs, closeness, sorted by (src, dst)) as a packed (4, n) array still so sorted,
    and in every bucket the same packed ends (from _chunk_ends)."""
    buckets = len(routes)
    stacked, bounds = _split_by_bucket(_bucket(counts[0], buckets).astype(np.int64), *counts, buckets)
    return pa.RecordBatch.from_arrays(
        [pa.array([device] * buckets, pa.string()), pa.array([interval] * buckets, pa.int64()),
         pa.array(np.arange(buckets, dtype=np.int64)), pa.array(routes, pa.int64()),
         pa.array([_pack(stacked[:, bounds[b]:bounds[b + 1]]) for b in range(buckets)], pa.binary()),
         pa.array([_pack(ends)] * buckets, pa.binary())],
        names=["device", "interval_id", "bucket", "route", "counts", "ends"])


# One fixed signature (C-contiguous in and out): lazily typed, it compiled F- and A-layout variants
# in the workers whenever numba's disk cache lacked them (as after any edit of this module).
@numba.njit("int64[:, ::1](int64[:, ::1], int64[:, ::1])", cache=True)
def _merge_counts(a: np.ndarray, b: np.ndarray) -> np.ndarray:
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


def _reduce_bucket(tau: int, buckets: int):  # type: ignore[no-untyped-def]
    """mapInArrow function over PARTIAL_DDL rows (normally those of one reduce bucket, all groups) ->
    COUNT_COLUMNS, per group and bucket: the tasks' counts plus the bucket's pairs across the group's
    chunk edges."""

    def group(rows: pa.Table, bucket: int) -> pa.RecordBatch:
        ends = np.concatenate([_unpack(blob) for blob in rows.column("ends").to_pylist()], axis=1)
        crossing = np.stack(sum_pairs(*cross_chunk_pairs(*ends, tau), tau))
        parts = [np.ascontiguousarray(crossing[:, _bucket(crossing[0], buckets) == bucket]),
                 *(_unpack(blob) for blob in rows.column("counts").to_pylist())]
        while len(parts) > 1:
            parts = [_merge_counts(*parts[k:k + 2]) if k + 1 < len(parts) else parts[k]
                     for k in range(0, len(parts), 2)]
        merged = np.ascontiguousarray(parts[0])
        n = merged.shape[1]
        return pa.RecordBatch.from_arrays(
            [pa.repeat(rows.column("device")[0], n), pa.repeat(rows.column("interval_id")[0], n),
             *(pa.array(merged[k]) for k in range(4))], names=list(COUNT_COLUMNS))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = _table(batches)
        if table is None:
            return
        # Normally one bucket per partition (partition_keys); grouping by it keeps any routing correct.
        keys = table.select([*GROUP, "bucket"]).group_by([*GROUP, "bucket"], use_threads=False).aggregate([])
        for device, interval, bucket in zip(*(keys.column(c).to_pylist() for c in (*GROUP, "bucket")), strict=True):
            rows = table.filter((pc.field("device") == device) & (pc.field("interval_id") == interval)
                                & (pc.field("bucket") == bucket))
            yield group(rows, bucket)

    return run


def _chunk_ends(chunk: np.ndarray, units: np.ndarray, tau: int) -> np.ndarray:
    """(chunk, pos, chunk_len, unit) as a (4, n) int64 array of the first and last tau reads of
    every chunk of one group's reads (sorted by chunk and reference order)."""
    starts = np.flatnonzero(_changes(chunk))
    lengths = np.diff(np.append(starts, len(chunk)))
    seg = np.repeat(np.arange(len(starts)), lengths)
    pos = np.arange(len(chunk)) - starts[seg]
    length = lengths[seg]
    keep = (pos < tau) | (pos >= length - tau)
    return np.stack([chunk[keep], pos[keep], length[keep], units[keep]])


def _chunk_of(ts_us: np.ndarray, chunk_us: int) -> np.ndarray:
    """ts_us div chunk_us, truncated toward zero like SQL `div` (idiv), which partitions the reads."""
    chunk = np.abs(ts_us) // chunk_us
    return np.where(ts_us < 0, -chunk, chunk)


def _task_partials(tau: int, chunk_us: int, routes: np.ndarray):  # type: ignore[no-untyped-def]
    """mapInArrow function over (device, interval_id, *REF_ORDER, unit_id) in any order, partitioned
    by (device, interval_id, ts_us div chunk_us): per group, the pair counts inside its chunks and
    its chunk ends, as PARTIAL_DDL rows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = _table(batches)
        if table is None:
            return
        # Sorting here (numpy, the arrival order is mostly sorted already) costs less than Spark's
        # row sort, whose comparisons all fall through the device string.
        devices = table.column("device").combine_chunks().dictionary_encode()
        keys = [devices.indices.to_numpy(), table.column("interval_id").to_numpy(),
                _chunk_of(table.column("ts_us").to_numpy(), chunk_us), *(table.column(c).to_numpy() for c in REF_ORDER)]
        order = np.lexsort(keys[::-1])
        device, interval, chunk = (key[order] for key in keys[:3])
        units = table.column("unit_id").to_numpy()[order]
        seg = np.cumsum(_changes(device, interval, chunk))
        starts = np.flatnonzero(_changes(device, interval))
        for lo, hi in zip(starts, np.append(starts[1:], len(units)), strict=True):
            counts = count_pairs(seg[lo:hi], units[lo:hi], tau)
            yield _partials(devices.dictionary[device[lo]].as_py(), int(interval[lo]), counts,
                            _chunk_ends(chunk[lo:hi], units[lo:hi], tau), routes)

    return run


def cross_chunk_pairs(chunk: np.ndarray, pos: np.ndarray, chunk_len: np.ndarray, units: np.ndarray,
                      tau: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, closeness) of the pairs whose reads lie in different chunks of one group.

    Input: the chunk-end reads of one (device, interval): chunk number, place in the chunk, the
    chunk's length and unit. Every read within tau of a chunk edge is there, so every crossing
    pair is found.
    """
    order = np.lexsort((pos, chunk))
    chunk, pos, chunk_len, units = chunk[order], pos[order], chunk_len[order], units[order]
    firsts = np.flatnonzero(_changes(chunk))
    base = np.concatenate(([0], np.cumsum(chunk_len[firsts])[:-1]))
    index = np.repeat(np.arange(len(firsts)), np.diff(np.append(firsts, len(chunk))))
    place = base[index] + pos
    srcs, dsts, closeness = [], [], []
    for k in range(1, tau + 1):
        gap = place[k:] - place[:-k]
        hit = (gap <= tau) & (chunk[k:] != chunk[:-k]) & (units[k:] != units[:-k])
        srcs.append(units[:-k][hit])
        dsts.append(units[k:][hit])
        closeness.append(tau - gap[hit] + 1)
    return np.concatenate(srcs), np.concatenate(dsts), np.concatenate(closeness).astype(np.int64)


# --- Spark transforms ------------------------------------------------------------------------


def _routed_partials(refs: DataFrame, *, tau: int, chunk_us: int, partitions: int | None) -> tuple[DataFrame, int]:
    """The first stage of the build: PARTIAL_DDL rows, partitioned so that bucket b is partition b;
    and the number of buckets."""
    check_context(tau, 1.0)
    if chunk_us <= 0:
        raise ValueError(f"chunk_us must be > 0, got {chunk_us}")
    chunk = idiv(F.col("ts_us"), chunk_us)
    reads = refs.select(*GROUP, *REF_ORDER, "unit_id")
    spread = reads.repartition(partitions, *GROUP, chunk) if partitions else reads.repartition(*GROUP, chunk)
    # Each task's counts reach the final sum pre-reduced and packed, a few wide rows per group and
    # bucket, rather than as one row per edge through a Spark aggregation (several times slower).
    buckets = partitions or int(refs.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    routes = np.array(partition_keys(buckets), np.int64)
    return spread.mapInArrow(_task_partials(tau, chunk_us, routes), PARTIAL_DDL).repartition(buckets, "route"), buckets


def build_edge_counts(refs: DataFrame, *, tau: int = 9, chunk_us: int = CHUNK_US,
                      partitions: int | None = None) -> DataFrame:
    """Pair counts of the access graph of every (device, interval) in `refs`.

    Input: device, interval_id, ts_us, seq, sub, unit_id (libs.alis.units.unit_refs, already
    restricted to the requests that build the graph, normally the reads). Output: COUNT_COLUMNS,
    one row per (device, interval_id, src_unit, dst_unit); self-pairs are left out.

        counts = build_edge_counts(refs.where(F.col("op") == "R"), tau=9)
        graph = with_weight(counts, tau=9, f=1.0)

    partitions: tasks that count the pairs (default spark.sql.shuffle.partitions), and the number
    of reduce buckets of each group.
    """
    partials, buckets = _routed_partials(refs, tau=tau, chunk_us=chunk_us, partitions=partitions)
    return partials.mapInArrow(_reduce_bucket(tau, buckets), COUNT_DDL)


def write_edge_counts(refs: DataFrame, directory: str, *, tau: int = 9, chunk_us: int = CHUNK_US,
                      partitions: int | None = None) -> DataFrame:
    """build_edge_counts, run now, with the reduce tasks writing their counts to Parquet under
    `directory` themselves (libs.io.task_parquet: the graph has several times more edges than there
    are reads, and Spark's own writer spent most of the final stage converting them); returns the
    counts read back from there. The caller removes the directory when done with them."""
    partials, buckets = _routed_partials(refs, tau=tau, chunk_us=chunk_us, partitions=partitions)
    return sink_parquet(partials, _reduce_bucket(tau, buckets), COUNT_DDL, directory)


def with_weight(counts: DataFrame, *, tau: int, f: float) -> DataFrame:
    """COUNT_COLUMNS -> WEIGHT_COLUMNS: weight = pairs * (1 - f) + f * closeness / tau."""
    check_context(tau, f)
    weight = F.col("pairs") * F.lit(1.0 - f) + F.lit(f / tau) * F.col("closeness")
    return counts.select(*GROUP, "src_unit", "dst_unit", weight.alias("weight"))


def age_graph(current: DataFrame, previous: DataFrame | None, *, beta: float) -> DataFrame:
    """ALIS eq. 2 for one interval: weight = beta * current + (1 - beta) * previous aged weight.

    Input: device, src_unit, dst_unit, weight (this interval's raw graph; the previous interval's
    aged, pruned graph or None for the first). Output: the same columns for the union of edges.
    """
    return age_values(current.select(*EDGE, "weight"), None if previous is None else previous.select(*EDGE, "weight"),
                      keys=EDGE, value="weight", alpha=beta)


GRAPH_BYTES_DDL = "device string, interval_id long, vertices long, edges long, graph_bytes long"


def _graph_size(table: pa.Table) -> pa.Table:
    vertices = len(pc.unique(pa.chunked_array(table.column("src_unit").chunks + table.column("dst_unit").chunks)))
    edges = table.num_rows
    return pa.table({"device": table.column("device").slice(0, 1),
                     "interval_id": table.column("interval_id").slice(0, 1), "vertices": [vertices],
                     "edges": [edges], "graph_bytes": [vertices * VERTEX_BYTES + edges * EDGE_BYTES]})


def graph_bytes(graph: DataFrame) -> DataFrame:
    """Per (device, interval_id): vertices, edges and the paper's size model 19 V + 20 E bytes.
    One graph per applyInArrow group (a hash of its ends there, instead of a distinct over all ends
    through a shuffle): graphs are held whole for pruning and run discovery anyway."""
    return (graph.select(*GROUP, "src_unit", "dst_unit").groupBy(*GROUP)
            .applyInArrow(_graph_size, GRAPH_BYTES_DDL))


def _nearest_rank(values: np.ndarray, share: float) -> float:
    """The share-th percentile by nearest rank: the smallest value with at least ceil(share * n)
    values at or below it (always one of the values)."""
    k = max(1, math.ceil(len(values) * share))
    return float(np.partition(values, k - 1)[k - 1])


@numba.njit(cache=True)
def _vertex_weights(s: np.ndarray, d: np.ndarray, w: np.ndarray, n_vertices: int) -> np.ndarray:
    """Each vertex's heaviest edge weight, in or out; -inf for a vertex on no edge."""
    out = np.full(n_vertices, -np.inf)
    for i in range(len(w)):
        if w[i] > out[s[i]]:
            out[s[i]] = w[i]
        if w[i] > out[d[i]]:
            out[d[i]] = w[i]
    return out


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
    weight = np.asarray(weight, np.float64)
    # Any numbering of the vertices will do (hashing, no sort): the cuts do not depend on it. The surviving
    # edges are compacted every round (their original indices in `keep`), in int32 vertex numbers.
    encoded = pa.array(np.concatenate([src, dst])).dictionary_encode()
    n_vertices = len(encoded.dictionary)
    inverse = encoded.indices.to_numpy().copy()         # writable: the rounds compact it in place
    del encoded
    s, d, w = inverse[: len(src)], inverse[len(src):], weight.copy()
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


@numba.njit(cache=True)
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


def _prune_group(share: float):  # type: ignore[no-untyped-def]
    def run(table: pa.Table) -> pa.Table:
        budget = int(table.column("budget_bytes")[0].as_py())
        keep, _ = prune_arrays(table.column("src_unit").to_numpy(), table.column("dst_unit").to_numpy(),
                               table.column("weight").to_numpy(), budget, share=share)
        return table.select(list(WEIGHT_COLUMNS)).take(pa.array(keep, pa.int64()))

    return run


def _graphs_with_budgets(graph: DataFrame, budgets: DataFrame, share: float) -> GroupedData:
    if not 0.0 < share < 1.0:
        raise ValueError(f"prune share must be in (0, 1), got {share}")
    return (graph.select(*WEIGHT_COLUMNS).join(budgets.select("device", "budget_bytes"), on="device", how="inner")
            .groupBy(*GROUP))


def prune_to_budget(graph: DataFrame, budgets: DataFrame, *, share: float = PRUNE_SHARE) -> DataFrame:
    """Prune every (device, interval_id) graph until 19 V + 20 E <= its device's budget_bytes
    (prune_arrays), one graph per applyInArrow group: a graph is bounded by its budget plus one
    interval's new edges, and run discovery holds it whole in one task anyway.

    Input: WEIGHT_COLUMNS and budgets (device, budget_bytes). Output: WEIGHT_COLUMNS.
    """
    return _graphs_with_budgets(graph, budgets, share).applyInArrow(_prune_group(share), WEIGHT_DDL)


def write_pruned(graph: DataFrame, budgets: DataFrame, directory: str, *, share: float = PRUNE_SHARE) -> DataFrame:
    """prune_to_budget, run now, each pruned graph written to Parquet under `directory` by its task
    (libs.io.task_parquet; instead of a localCheckpoint of tens of millions of edges); returns them read
    back. The caller removes the directory when done with them."""
    return sink_parquet_groups(_graphs_with_budgets(graph, budgets, share), _prune_group(share), WEIGHT_DDL,
                               directory)


def prefilter_refs(refs: DataFrame, *, min_refs: int) -> DataFrame:
    """Drop the references to units referenced fewer than min_refs times in their (device,
    interval) (the paper's optional pre-filter by reference count); min_refs <= 1 keeps all."""
    if min_refs <= 1:
        return refs
    counts = refs.groupBy(*GROUP, "unit_id").agg(F.count(F.lit(1)).alias("_refs"))
    return (refs.join(counts, on=[*GROUP, "unit_id"], how="inner")
            .where(F.col("_refs") >= min_refs).drop("_refs"))


def budget_bytes(storage: DataFrame, *, share: float) -> DataFrame:
    """Per device, the graph's size budget: share of the storage used (default 0.5%)."""
    if share <= 0:
        raise ValueError(f"graph budget share must be > 0, got {share}")
    return storage.select("device", F.floor(F.col("storage_used_bytes") * F.lit(share)).cast("long")
                          .alias("budget_bytes"))


def partitions_for(reads: int, *, cores: int, per_task: int = 2_000_000) -> int:
    """Tasks for the edge build: about per_task reads each (a task holds its reads in memory),
    a whole number of rounds over the cores."""
    rounds = max(1, math.ceil(reads / (per_task * max(1, cores))))
    return rounds * max(1, cores)
