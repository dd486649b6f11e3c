"""Access graphs: the paper's figures 8 and 9, chunked against unchunked builds and a plain-Python
reference, aging (eq. 2), bottom pruning and the reference-count pre-filter."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from blockheat.libs.alis.graph import (
    _bucket,
    _chunk_of,
    _reduce_bucket,
    _split_by_bucket,
    _task_partials,
    age_graph,
    build_edge_counts,
    cross_chunk_pairs,
    graph_bytes,
    prefilter_refs,
    prune_to_budget,
    with_weight,
    write_edge_counts,
    write_pruned,
)
from blockheat.libs.io.partitioning import partition_keys, spark_hash_long
from blockheat.sim.alis.graph import (
    EDGE_BYTES,
    VERTEX_BYTES,
    count_pairs,
    edge_weight,
    prune_arrays,
    pruned_edges,
    vertex_count,
)
from tests.libs.alis.prune_reference import prune_arrays_reference
from tests.libs.alis.refs import (
    counts_of,
    make_graph,
    make_refs,
    reference_counts,
    string_refs,
    units_of,
    weights_of,
)


def graph_of(spark, text, *, tau, f, chunk_us=10_000_000):
    return with_weight(build_edge_counts(string_refs(spark, text), tau=tau, chunk_us=chunk_us), tau=tau, f=f)


def test_edge_weight_formula():
    assert [edge_weight(j, tau=9, f=1.0) for j in (1, 9)] == [1.0, 1 / 9]
    assert [edge_weight(j, tau=2, f=0.0) for j in (1, 2)] == [1.0, 1.0]
    assert edge_weight(2, tau=4, f=0.5) == pytest.approx(0.5 + 0.5 * 3 / 4)


def test_figure_8c_context_two(spark):
    # R, U, N, R, X, U, N with tau = 2 and uniform weights, edge by edge from the definition
    # (j = 1..tau): the repeated R -> U and U -> N reach 2. The paper's figure 8(c) text says three
    # edges reach 2; R -> N does only with a context of three (next test), since the second N is
    # three reads after the second R.
    assert weights_of(graph_of(spark, "R U N R X U N", tau=2, f=0.0)) == {
        "RU": 2.0, "UN": 2.0, "RN": 1.0, "NR": 1.0, "UR": 1.0, "RX": 1.0, "NX": 1.0, "XU": 1.0, "XN": 1.0}


def test_figure_8c_three_heavy_edges_with_context_three(spark):
    got = weights_of(graph_of(spark, "R U N R X U N", tau=3, f=0.0))
    assert sorted(k for k, w in got.items() if w == 2.0) == ["RN", "RU", "UN"]
    assert all(w == 1.0 for k, w in got.items() if k not in ("RN", "RU", "UN"))


def test_figure_9_graduated_weights_order_u_before_n(spark):
    uniform = weights_of(graph_of(spark, "R U N R U N", tau=2, f=0.0))
    assert uniform["RU"] == uniform["RN"] == 2.0          # figure 9(a): R equally tied to U and N
    graduated = weights_of(graph_of(spark, "R U N R U N", tau=2, f=1.0))
    # figure 9(b), normalised: j = 1 weighs 1, j = 2 weighs 1/2
    assert graduated == {"RU": 2.0, "UN": 2.0, "RN": 1.0, "NR": 1.0, "UR": 0.5, "NU": 0.5}


def _bursty_rows(seed: int) -> list[tuple[str, int, int, int]]:
    """Two devices, two intervals, bursts and gaps so 1 ms chunks hold 0 to ~7 reads."""
    rng = np.random.default_rng(seed)
    rows = []
    for device in ("d0", "d1"):
        for interval_id in (0, 1):
            t = interval_id * 1_000_000
            for _ in range(150):
                t += int(rng.choice([30, 60, 200, 1500]))
                rows.append((device, interval_id, t, int(rng.integers(0, 12))))
    order = rng.permutation(len(rows))  # rows arrive unordered; seq is still their list position
    return [rows[k] for k in order]


@pytest.mark.parametrize("tau", [2, 9])
def test_chunked_build_equals_unchunked_and_reference(spark, tau):
    rows = _bursty_rows(seed=tau)
    refs = make_refs(spark, rows)
    one_chunk = counts_of(build_edge_counts(refs, tau=tau, chunk_us=10**12, partitions=1))
    chunked = counts_of(build_edge_counts(refs, tau=tau, chunk_us=1000, partitions=3))
    assert chunked == one_chunk
    assert one_chunk == reference_counts(rows, tau)
    assert len(one_chunk) > 100


def test_counts_written_by_the_tasks_equal_the_reference(spark, tmp_path):
    rows = _bursty_rows(seed=4)
    counts = write_edge_counts(make_refs(spark, rows), str(tmp_path / "counts"), tau=9, chunk_us=1000, partitions=3)
    assert counts_of(counts) == reference_counts(rows, 9)
    assert counts.count() == len(reference_counts(rows, 9)) > 100        # one row per edge
    assert sorted(p.suffix for p in (tmp_path / "counts").iterdir()) == [".parquet"] * 3   # one file a bucket


def test_partition_keys_follow_sparks_hash_partitioning(spark):
    keys = [0, 1, -1, 42, 2**31, -(2**40), 2**62 + 12345]
    spark_hash = spark.createDataFrame([(k,) for k in keys], "k long").select("k", F.hash("k").alias("h")).collect()
    assert {r.k: r.h for r in spark_hash} == {k: spark_hash_long(k) for k in keys}
    for n in (1, 2, 3, 8):
        routes = partition_keys(n)
        placed = (spark.createDataFrame([(int(r), b) for b, r in enumerate(routes)], "route long, bucket long")
                  .repartition(n, "route").select("bucket", F.spark_partition_id().alias("p")).collect())
        assert {r.bucket: r.p for r in placed} == {b: b for b in range(n)}


def test_task_chunks_agree_with_the_partitioning_and_buckets_keep_order(spark):
    # The task recomputes the chunk Spark partitioned by (SQL div, truncating); its counts split by
    # bucket keep their (src, dst) order inside each bucket.
    ts = [-2001, -2000, -1999, -1, 0, 1, 999, 1000, 2**50 + 7]
    div = spark.createDataFrame([(t,) for t in ts], "t long").select("t", F.expr("t div 1000").alias("c")).collect()
    assert {r.t: r.c for r in div} == dict(zip(ts, _chunk_of(np.array(ts), 1000).tolist(), strict=True))
    src = np.random.default_rng(3).integers(-(2**62), 2**62, 5000)
    zeros = np.zeros(5000, np.int64)
    split, bounds = _split_by_bucket(_bucket(src, 7).astype(np.int64), src, src + 1, zeros, zeros, 7)
    for b in range(7):
        assert split[0, bounds[b]:bounds[b + 1]].tolist() == src[_bucket(src, 7) == b].tolist()
    np.testing.assert_array_equal(split[1], split[0] + 1)


def test_reduce_is_right_when_buckets_share_a_partition():
    # Two tasks' partials of 3 buckets, all handed to one reduce call: still the reference graph.
    rows = _bursty_rows(seed=4)
    tau, chunk_us = 3, 1000
    table = pa.table({"device": [r[0] for r in rows], "interval_id": [r[1] for r in rows],
                      "ts_us": [r[2] for r in rows], "seq": list(range(len(rows))), "sub": [0] * len(rows),
                      "unit_id": [r[3] for r in rows]})
    task = np.array([r[2] // chunk_us % 2 for r in rows])
    partials = [b for t in (0, 1) for b in _task_partials(tau, chunk_us, np.array(partition_keys(3)))(
        iter(table.filter(pa.array(task == t)).to_batches()))]
    out = pa.Table.from_batches(list(_reduce_bucket(tau, 3)(iter(partials))))
    got = {(d, i, s, t): (p, c) for d, i, s, t, p, c in zip(*(out.column(k).to_pylist() for k in out.column_names),
                                                            strict=True)}
    assert got == reference_counts(rows, tau)
    assert len(partials) == 2 * 4      # 2 tasks x 4 groups, each group in 3 buckets
    assert len(got) > 100


def test_order_is_time_then_seq_and_intervals_do_not_connect(spark):
    # Same timestamp: source order (seq) decides. A read in the next interval starts a new string.
    refs = make_refs(spark, [("d", 0, 5, units_of("A")[0]), ("d", 0, 5, units_of("R")[0]),
                             ("d", 0, 2, units_of("U")[0]), ("d", 1, 7, units_of("N")[0])])
    assert weights_of(with_weight(build_edge_counts(refs, tau=3), tau=3, f=0.0)) == {
        "UA": 1.0, "UR": 1.0, "AR": 1.0}


def test_count_pairs_and_cross_chunk_pairs_numpy():
    units = np.array(units_of("A R U N B A R U N B"))
    src, dst, pairs, closeness = count_pairs(np.zeros(10, np.int64), units, 2)
    got = {(int(s), int(d)): (int(p), int(c)) for s, d, p, c in zip(src, dst, pairs, closeness, strict=True)}
    assert got[(1, 2)] == (2, 4)      # R -> U twice at distance 1 (closeness 2 each)
    assert got[(0, 2)] == (2, 2)      # A -> U twice at distance 2
    assert got[(4, 1)] == (1, 1)      # B -> R once at distance 2
    # Chunks [A R U] [N] [B A ...]: only pairs across chunk edges, with their distances.
    chunk = np.array([0, 0, 1, 2, 2, 2])
    pos = np.array([1, 2, 0, 0, 1, 2])
    chunk_len = np.array([3, 3, 1, 5, 5, 5])
    s, d, c = cross_chunk_pairs(chunk, pos, chunk_len, np.array(units_of("R U N B A R")), 2)
    assert sorted(zip(s.tolist(), d.tolist(), c.tolist(), strict=True)) == sorted([
        (1, 3, 1), (2, 3, 2), (2, 4, 1), (3, 4, 2), (3, 0, 1)])


def test_aging_blends_current_and_previous_graph(spark):
    day0 = make_graph(spark, [("d", 0, 0, 1, 1.0)])
    day1 = make_graph(spark, [("d", 1, 0, 1, 2.0), ("d", 1, 1, 2, 1.0)])
    aged0 = age_graph(day0, None, beta=0.8)
    aged1 = age_graph(day1, aged0, beta=0.8)
    assert {(r.src_unit, r.dst_unit): r.weight for r in aged0.collect()} == {(0, 1): 0.8}
    got = {(r.src_unit, r.dst_unit): r.weight for r in aged1.collect()}
    assert got == pytest.approx({(0, 1): 0.8 * 2.0 + 0.2 * 0.8, (1, 2): 0.8})
    pc = age_graph(day1, age_graph(day0, None, beta=0.1), beta=0.1)   # the paper's PC setting
    assert {(r.src_unit, r.dst_unit): r.weight for r in pc.collect()} == pytest.approx(
        {(0, 1): 0.1 * 2.0 + 0.9 * 0.1, (1, 2): 0.1})


def test_graph_bytes_uses_19_per_vertex_and_20_per_edge(spark):
    g = make_graph(spark, [("d", 0, 1, 2, 1.0), ("d", 0, 2, 3, 1.0), ("d", 0, 3, 1, 1.0), ("d", 1, 5, 6, 1.0),
                           ("e", 0, 1, 9, 1.0), ("e", 0, 9, 1, 1.0)])
    assert {(r.device, r.interval_id, r.vertices, r.edges, r.graph_bytes) for r in graph_bytes(g).collect()} == {
        ("d", 0, 3, 3, 3 * 19 + 3 * 20), ("d", 1, 2, 1, 2 * 19 + 20), ("e", 0, 2, 2, 2 * 19 + 2 * 20)}


CHAIN = [(k, k + 1, float(k + 1)) for k in range(20)]   # 0 -> 1 -> ... -> 20, weights 1..20: 799 bytes


def prune_chain(budget):
    src, dst, w = (np.array(c) for c in zip(*CHAIN, strict=True))
    keep, rounds = prune_arrays(src, dst, w, budget)
    return [(int(src[k]), int(dst[k])) for k in keep], rounds


def test_prune_removes_bottom_tenth_of_edges_and_vertices():
    # Edge 10th percentile (rank 2 of 20): 2, so edge 0->1 goes. Vertex weights 1, 2, ..., 20, 20:
    # 10th percentile (rank 3 of 21): 3, so vertices 0 and 1 go with edge 1->2. 18 edges, 19
    # vertices: 721 bytes.
    assert prune_chain(750) == ([(k, k + 1) for k in range(2, 20)], 1)
    assert prune_chain(799) == ([(k, k + 1) for k in range(20)], 0)


def test_prune_repeats_until_within_budget():
    # Later rounds take the lightest edge and the lightest vertex each: 721, 682, 643 bytes.
    assert prune_chain(680) == ([(k, k + 1) for k in range(4, 20)], 3)


def test_prune_with_tied_lightest_weights_drops_them_alike():
    # Nothing lies below either percentile (both are the tied minimum 1): the weight-1 edges go.
    keep, rounds = prune_arrays(np.array([0, 1, 2, 3, 8]), np.array([1, 2, 3, 4, 9]),
                                np.array([1.0, 1.0, 1.0, 1.0, 5.0]), 100)
    assert (keep.tolist(), rounds) == ([4], 1)


def test_pruned_edges_are_the_arrays_themselves_when_all_fit():
    src, dst, w = np.array([0, 1, 2, 3, 8]), np.array([1, 2, 3, 4, 9]), np.array([1.0, 1.0, 1.0, 1.0, 5.0])
    # 5 edges and 9 vertices take 20 x 5 + 19 x 9 = 271 bytes.
    kept = pruned_edges(src, dst, w, 271)
    assert all(a is b for a, b in zip(kept, (src, dst, w), strict=True))
    # The tied lightest edges go (as in the test above): a copy of the one left.
    assert [a.tolist() for a in pruned_edges(src, dst, w, 100)] == [[8], [9], [5.0]]


def test_prune_to_budget_per_device_and_interval(spark):
    graph = make_graph(spark, [("d", 0, s, t, w) for s, t, w in CHAIN] + [("d", 1, 1, 2, 1.0), ("e", 0, 1, 2, 1.0)])
    budgets = spark.createDataFrame([("d", 750), ("e", 10)], "device string, budget_bytes long")
    got = sorted((r.device, r.interval_id, r.src_unit, r.dst_unit, r.weight)
                 for r in prune_to_budget(graph, budgets).collect())
    # d/0 loses its two lightest edges; d/1 is within d's budget; e/0 (58 bytes > 10) loses its only edge.
    assert got == [("d", 0, k, k + 1, float(k + 1)) for k in range(2, 20)] + [("d", 1, 1, 2, 1.0)]


def test_pruned_graphs_written_by_the_tasks_equal_prune_to_budget(spark, tmp_path):
    graph = make_graph(spark, [("d", 0, s, t, w) for s, t, w in CHAIN] + [("d", 1, 1, 2, 1.0), ("e", 0, 1, 2, 1.0)])
    budgets = spark.createDataFrame([("d", 750), ("e", 10)], "device string, budget_bytes long")
    written = write_pruned(graph, budgets, str(tmp_path / "pruned"))
    assert sorted(written.collect()) == sorted(prune_to_budget(graph, budgets).collect())
    assert written.count() == 19                                     # d/0 keeps 18 edges, d/1 one, e/0 none
    assert len(list((tmp_path / "pruned").iterdir())) == 2          # a file per non-empty graph


def test_prefilter_drops_rarely_referenced_units(spark):
    refs = string_refs(spark, "A R A U A R")
    kept = prefilter_refs(refs, min_refs=2).orderBy("seq")
    assert [r.unit_id for r in kept.collect()] == units_of("A R A A R")
    assert prefilter_refs(refs, min_refs=0) is refs
    assert kept.where(F.col("unit_id") == units_of("U")[0]).count() == 0


@pytest.mark.parametrize("spread", [10**12, 700])
@pytest.mark.parametrize("seed", range(8))
def test_prune_keeps_what_the_first_version_kept(seed, spread):
    # Random graphs with tied weights (few distinct values), vertex ids far apart (numbered by a hash) or below 700
    # (numbered by themselves), budgets from nothing to everything: the same edges kept after the same number of
    # rounds as the first version.
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 5000))
    ids = rng.choice(spread, int(rng.integers(2, 600)), replace=False)
    src, dst = ids[rng.integers(0, len(ids), m)], ids[rng.integers(0, len(ids), m)]
    weight = rng.integers(1, int(rng.integers(2, 40)), m) / 9.0
    full = VERTEX_BYTES * len(np.unique(np.concatenate([src, dst]))) + EDGE_BYTES * m
    for budget in (0, full // 10, full // 2, full - 1, full):
        keep, rounds = prune_arrays(src, dst, weight, budget)
        ref_keep, ref_rounds = prune_arrays_reference(src, dst, weight, budget)
        assert (keep.tolist(), rounds) == (ref_keep.tolist(), ref_rounds)
        assert rounds > 0 or budget == full
    assert vertex_count(src, dst) == len(np.unique(np.concatenate([src, dst])))


def test_vertex_count_of_ids_below_and_beyond_the_direct_range():
    src, dst = np.array([0, 5, 5, 9]), np.array([5, 9, 0, 3])
    assert vertex_count(src, dst) == 4                          # 0, 3, 5, 9: marked in a 10-slot array
    assert vertex_count(src + 2**40, dst + 2**40) == 4          # too sparse to mark: hashed
    assert vertex_count(np.array([-1, 2]), np.array([2, 7])) == 3
    assert vertex_count(np.zeros(0, np.int64), np.zeros(0, np.int64)) == 0
