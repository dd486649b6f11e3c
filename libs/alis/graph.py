"""ALIS access graphs (section 5.2.1) with Spark: edges from the reference string, aging, size-budget
pruning. The numeric core (pair counts, weights, pruning) is sim.alis.graph's; this module spreads it over
the tasks.

For each read X_n of a device and interval, edges X_(n-j) -> X_n for j = 1..tau, counted exactly as
pairs and closeness per (src, dst) (sim.alis.graph), so that any split of the work sums to the same graph
bit for bit; weight = pairs * (1 - f) + f * closeness / tau at the end.

Scale: a device's ordered reads are cut into time chunks (chunk_us, default 60 s), which
hash-partition over all tasks; each task counts the pairs inside its chunks (numba + a radix sort
of packed keys) and keeps the first and last tau reads of every chunk (the overlap). It passes
both on packed in a few binary rows per group and reduce bucket (a hash of src); one reduce task
per bucket (routed by libs.io.partitioning.partition_keys) finds, for every group, the pairs across chunk edges from the
group's overlaps and merges the sorted partial counts (numba). One hot device so spreads over
every core, in both stages. Time chunks, not read counts, so that a chunk is a function of the
row alone.

Pruning to the size budget (19 bytes a vertex, 20 an edge) runs per graph in numpy
(sim.alis.graph.prune_arrays): a graph is bounded by its budget plus one interval's new edges.
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

from blockheat.libs.alis.units import REF_ORDER, idiv
from blockheat.libs.io.partitioning import partition_keys
from blockheat.libs.io.task_parquet import sink_parquet, sink_parquet_groups
from blockheat.libs.io.worker import python_task
from blockheat.libs.transforms.aging import age_values
from blockheat.sim import ALIS_EDGE_BYTES as EDGE_BYTES
from blockheat.sim import ALIS_PRUNE_SHARE as PRUNE_SHARE
from blockheat.sim import ALIS_VERTEX_BYTES as VERTEX_BYTES
from blockheat.sim import check_alis_context as check_context
from blockheat.sim import count_pairs, merge_counts, prune_arrays, sum_pairs

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
# Time chunks of the parallel build: a chunk is the unit of spreading (one task holds it whole),
# and each chunk edge costs tau * (tau + 1) / 2 crossing pairs computed apart, by every reduce
# bucket of the group.
CHUNK_US = 60_000_000


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


def _partials(device: str, interval: int, counts: np.ndarray, ends: np.ndarray,
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


def _reduce_bucket(tau: int, buckets: int):  # type: ignore[no-untyped-def]
    """mapInArrow function over PARTIAL_DDL rows (normally those of one reduce bucket, all groups) ->
    COUNT_COLUMNS, per group and bucket: the tasks' counts plus the bucket's pairs across the group's
    chunk edges."""

    def group(rows: pa.Table, bucket: int) -> pa.RecordBatch:
        ends = np.concatenate([_unpack(blob) for blob in rows.column("ends").to_pylist()], axis=1)
        crossing = sum_pairs(*cross_chunk_pairs(*ends, tau), tau)
        parts = [np.ascontiguousarray(crossing[:, _bucket(crossing[0], buckets) == bucket]),
                 *(_unpack(blob) for blob in rows.column("counts").to_pylist())]
        while len(parts) > 1:
            parts = [merge_counts(*parts[k:k + 2]) if k + 1 < len(parts) else parts[k]
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
    partials = spread.mapInArrow(python_task(_task_partials(tau, chunk_us, routes)), PARTIAL_DDL)
    return partials.repartition(buckets, "route"), buckets


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
    return partials.mapInArrow(python_task(_reduce_bucket(tau, buckets)), COUNT_DDL)


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
            .applyInArrow(python_task(_graph_size), GRAPH_BYTES_DDL))


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
    return _graphs_with_budgets(graph, budgets, share).applyInArrow(python_task(_prune_group(share)), WEIGHT_DDL)


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


def graph_refs(refs: DataFrame, *, include_writes: bool, prefilter_min_refs: int) -> DataFrame:
    """The references that build the graph: reads (and writes if asked), optionally pre-filtered."""
    chosen = refs if include_writes else refs.where(F.col("op") == "R")
    return prefilter_refs(chosen, min_refs=prefilter_min_refs)
