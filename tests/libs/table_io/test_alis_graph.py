"""The per-device build of units, graphs and runs from the requests files (libs.table_io.alis_graph), and of the
layout job's plans and scores (libs.table_io.alis_layout), against the Spark transforms they replace, on the
bundled real trace (the tests run in file order: the layout plans the whole-trace build's graphs); and the
pieces on hand-made arrays. The default
settings are pinned through it elsewhere (test_hplajw, test_jobs, tests/jobs/test_nightly_jobs.py were
pinned by the Spark build)."""
from __future__ import annotations

import dataclasses
import itertools
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import blockheat.libs.table_io.alis_graph as GF
from blockheat.jobs import alis_graph
from blockheat.libs.io.tables import read_table, replace_trace, trace_rows
from blockheat.libs.table_io.alis_spill import SpilledCounts, SpillSizes, _summed
from blockheat.sim import DAY_US, count_pairs, kth_smallest
from tests.builders import table_digest
from tests.conftest import HPLAJW_TRACE_ID

TRACE = "hplajw-graph-files"
TABLES = ("reorg_units", "access_graph", "alis_runs", "alis_graphs")


def test_units_are_numbered_after_the_known_ones_in_address_order():
    offsets = np.array([40, 10, 10, 30, 10, 50, 20], np.int64)
    sizes = np.array([8, 8, 4, 8, 8, 8, 8], np.int64)
    counted = np.array([True, True, True, True, True, False, True])
    known = pa.table({"unit_id": [0, 1], "offset_bytes": [30, 40], "size_bytes": [8, 8]})
    ids, units = GF.number_units(offsets, sizes, counted, known)
    # Known: (30,8) 0, (40,8) 1; new in (offset, size) order from 2: (10,4) 2, (10,8) 3, (20,8) 4; (50,8) is not
    # counted and no unit: -1.
    assert ids.tolist() == [1, 3, 2, 0, 3, -1, 4]
    assert units.to_pydict() == {"unit_id": [0, 1, 2, 3, 4], "offset_bytes": [30, 40, 10, 10, 20],
                                 "size_bytes": [8, 8, 4, 8, 8]}
    fresh, _ = GF.number_units(offsets, sizes, np.ones(7, bool), None)
    assert fresh.tolist() == [4, 1, 0, 3, 1, 5, 2]
    # Offsets too large to pack with the sizes: the dense-rank keys give the same numbering.
    big = offsets << 50
    assert GF.number_units(big, sizes, np.ones(7, bool), None)[0].tolist() == fresh.tolist()


def test_unit_index_finds_each_extent_and_refuses_others():
    units = pa.table({"unit_id": [7, 3, 5], "offset_bytes": [10 << 50, 10, 10], "size_bytes": [8, 8, 4]})
    index = GF.UnitIndex(units)
    got = index.ids_of(np.array([10, 10, 10 << 50, 10, 11, 10 << 50], np.int64), np.array([4, 8, 8, 6, 8, 4], np.int64))
    assert got.tolist() == [5, 3, 7, -1, -1, -1]
    assert GF.UnitIndex(None).ids_of(np.array([1]), np.array([1])).tolist() == [-1]
    # Packed keys (offset << shift | size) when they fit in 62 bits, else the ranks of offset and size: both find
    # the same ids, and an extent beyond the units' largest offset or size is none.
    assert index.shift is not None
    wide = GF.UnitIndex(units.set_column(1, "offset_bytes", pa.array([1 << 61, 10, 10])))
    assert wide.shift is None
    assert wide.ids_of(np.array([10, 10, 1 << 61, 10, 11, 1 << 61], np.int64),
                       np.array([4, 8, 8, 6, 8, 4], np.int64)).tolist() == [5, 3, 7, -1, -1, -1]
    assert index.ids_of(np.array([10, 10 << 51, -10], np.int64), np.array([16, 8, 8], np.int64)).tolist() == [-1] * 3


@pytest.mark.parametrize("high", [1 << 40, 1 << 60], ids=["packed", "ranked"])
def test_extents_gathered_in_parts_are_the_distinct_extents_of_all(high):
    """ExtentSet fed parts of uneven sizes holds what one distinct_extents of all the requests gives, in (offset,
    size) order, whether the pairs pack into one key or not."""
    rng = np.random.default_rng(11)
    offsets = rng.integers(0, 400, 20_000) * (high // 400)
    sizes = rng.integers(1, 9, 20_000) * 512
    gathered = GF.ExtentSet()
    for a, b in itertools.pairwise([0, 1, 50, 51, 3_000, 3_001, 9_000, 20_000]):
        gathered.add(offsets[a:b], sizes[a:b])
    got = gathered.extents()
    pairs = sorted(set(zip(offsets.tolist(), sizes.tolist(), strict=True)))
    assert [got[0].tolist(), got[1].tolist()] == [[o for o, _ in pairs], [s for _, s in pairs]]
    assert 3_000 < len(pairs) <= 3_200                  # most of the 400 x 8 drawn: parts repeat each other's


def test_pair_counts_fed_in_parts_equal_one_count_per_interval():
    """Parts cut anywhere (inside an interval, on its edge, parts of one reference) sum to count_pairs over each
    interval's whole reference string, and an interval's counts come out when a later one starts."""
    rng = np.random.default_rng(7)
    interval = np.sort(rng.integers(0, 4, 3_000))
    refs = rng.integers(0, 60, 3_000)
    tau = 5
    whole = {}
    for i in range(4):
        r = refs[interval == i]
        whole[i] = [a.tolist() for a in count_pairs(np.zeros(len(r), np.int64), r, tau)]
    for cuts, threads in itertools.product(([], [1, 2, 3, 700, 1_500, 1_501, 2_999], list(range(0, 3_000, 97))),
                                           (1, 3)):
        with GF.PairCounter(tau, threads=threads) as counter:     # threads: parts counted 3 at a time
            got = {}
            for a, b in zip([0, *cuts], [*cuts, 3_000], strict=True):
                ended = list(counter.add(interval[a:b], refs[a:b]))
                assert all(i < interval[b - 1] for i, _ in ended) if b > a else not ended
                got.update({i: [c.tolist() for c in counts] for i, counts in ended})
            got.update({i: [c.tolist() for c in counts] for i, counts in counter.close()})
        assert got == whole, (cuts, threads)
    # count_pairs' first: only pairs whose later read is at or after it.
    string = np.array([1, 2, 1, 3], np.int64)
    src, dst, pairs, closeness = count_pairs(np.zeros(4, np.int64), string, 2, first=3)
    assert (src.tolist(), dst.tolist(), pairs.tolist(), closeness.tolist()) == ([1, 2], [3, 3], [1, 1], [2, 1])


def test_aging_on_arrays_is_eq_2_over_the_union_of_edges():
    cur = (np.array([1, 1, 2]), np.array([2, 3, 1]), np.array([2.0, 1.0, 0.5]))
    prev = (np.array([1, 5]), np.array([2, 6]), np.array([4.0, 1.0]))
    beta = 0.8
    src, dst, w = GF._age(cur, prev, beta)
    got = {(int(s), int(d)): float(x) for s, d, x in zip(src, dst, w, strict=True)}
    # Exactly the Spark expression's operations: beta * current + (1 - beta) * previous, 0.0 for a missing side.
    assert got == {(1, 2): beta * 2.0 + (1 - beta) * 4.0, (1, 3): beta * 1.0 + (1 - beta) * 0.0,
                   (2, 1): beta * 0.5 + (1 - beta) * 0.0, (5, 6): beta * 0.0 + (1 - beta) * 1.0}
    assert GF._age(cur, None, 1.0)[2].tolist() == [2.0, 1.0, 0.5]
    assert len(GF._age(cur, prev, 0.0)[0]) == 2                   # beta 0: only the previous edges stay above 0


PART_ROWS = 50   # requests a part holds in the tests of devices read in parts
#: An interval's edges in 3 bucket files once its sums pass 20 edges, pruned on disk down to 30 edges.
SPILL = SpillSizes(sum_edges=20, memory_edges=30, buckets=3)
DAYS = 2      # the week's first two days: two daily graphs, the second aged with the first (each Spark build
              # costs seconds per interval)


@pytest.fixture(scope="module")
def trace(spark, spark_cfg, hplajw):
    """The session's hplajw requests of days 0-1 under a trace id of this module's own (its graphs are rebuilt
    here)."""
    rows = read_table(spark, spark_cfg.warehouse, "requests", HPLAJW_TRACE_ID).where(
        F.col("ts_us") < DAYS * DAY_US).withColumn("trace_id", F.lit(TRACE))
    replace_trace(rows, spark, spark_cfg.warehouse, "requests", TRACE)
    return TRACE


def _through_spark(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise GF.Unsupported("test: the Spark build")

    monkeypatch.setattr(GF, "request_files", refuse)


def _build(spark, spark_cfg, opts, monkeypatch, caplog, *, files: bool, parts: int = 0,
           spill: SpillSizes | None = None):
    """alis_graph.run through the files (asserted; with parts, each device read in parts of about that many
    requests; with spill, these spill sizes) or through Spark (the fallback, asserted by its log line)."""
    calls = []
    caplog.set_level("INFO", logger="blockheat.libs.table_io.device_pass")
    caplog.clear()
    with monkeypatch.context() as m:
        if parts:
            m.setattr(GF, "CHUNK_ROWS", parts)
        if spill:
            m.setattr(GF, "SPILL", spill)
        if files:
            real = GF.build
            m.setattr(GF, "build", lambda *a, **k: calls.append(1) or real(*a, **k))
        else:
            _through_spark(m)
        summary = alis_graph.run(spark, spark_cfg, opts)
    assert len(calls) == (1 if files else 0)
    assert (": through Spark SQL (test: the Spark build)" in caplog.text) == (not files)
    return summary, {t: table_digest(spark, spark_cfg.warehouse, t, opts.trace_id) for t in TABLES}


def test_whole_trace_build_equals_the_spark_build(spark, spark_cfg, trace, monkeypatch, caplog):
    """Writes counted, the reference-count prefilter on, a graph budget that prunes (asserted below), other tau, f,
    beta: every table row for row, and the summary."""
    opts = alis_graph.GraphOptions(trace, tau=4, f=0.5, beta=0.5, include_writes=True, prefilter_min_refs=2,
                                   graph_share=0.00002, threshold=0.2, min_run_length=3)
    spark_summary, spark_tables = _build(spark, spark_cfg, opts, monkeypatch, caplog, files=False)
    files_summary, files_tables = _build(spark, spark_cfg, opts, monkeypatch, caplog, files=True)
    assert files_tables == spark_tables
    assert files_summary == spark_summary
    parts_summary, parts_tables = _build(spark, spark_cfg, opts, monkeypatch, caplog, files=True, parts=PART_ROWS)
    assert parts_tables == spark_tables
    assert parts_summary == spark_summary
    spilled_summary, spilled_tables = _build(spark, spark_cfg, opts, monkeypatch, caplog, files=True,
                                             parts=PART_ROWS, spill=SPILL)
    assert spilled_tables == spark_tables
    assert spilled_summary == spark_summary
    assert spark_summary.intervals == list(range(DAYS))
    per_day = Counter(r["interval_id"] for r in trace_rows(spark, spark_cfg.warehouse, "access_graph", trace))
    assert len(per_day) == DAYS
    assert min(per_day.values()) > 0
    assert {(r["interval_id"], r["run_id"]) for r in trace_rows(spark, spark_cfg.warehouse, "alis_runs", trace)}
    # The budget bites: device 0's last graph, built again in process with a budget that keeps everything,
    # has more edges.
    requests = read_table(spark, spark_cfg.warehouse, "requests", trace).where("device = '0'").toArrow()
    assert requests.num_rows > 10 * PART_ROWS                # the parts' build above read device 0 in many parts
    params = GF.params_of(opts)
    unpruned = GF.device_build(requests, None, None, GF.Build(trace, 0, DAYS - 1, opts.interval_us),
                               GF.GraphParams(**{**vars(params), "graph_share": 1.0}))
    pruned = next(d for d in files_summary.per_device if d["device"] == "0")
    assert unpruned["stats"]["last_edges"] > pruned["last_edges"] > 0


def test_a_spilled_interval_is_the_graph_counted_and_pruned_in_memory(spark, spark_cfg, trace, monkeypatch):
    """Device 0's two days in process, writes counted: counted into bucket files past 20 edges and pruned there in
    rounds, every day's graph and runs equal the in-memory build's (the second day aged with the first)."""
    requests = read_table(spark, spark_cfg.warehouse, "requests", trace).where("device = '0'").toArrow()
    b = GF.Build(trace, 0, DAYS - 1, DAY_US)
    params = GF.GraphParams(tau=9, f=0.5, beta=0.5, include_writes=True, graph_share=0.00002)
    rounds, added = [], []
    real_prune, real_add = SpilledCounts._prune_on_disk, SpilledCounts.add
    monkeypatch.setattr(SpilledCounts, "_prune_on_disk", lambda self, found, *a: rounds.append(found.edges) or
                        real_prune(self, found, *a))
    monkeypatch.setattr(SpilledCounts, "add", lambda self, counts: added.append(counts.shape[1]) or
                        real_add(self, counts))
    spilled = GF.device_build(requests, None, None, b, params, SPILL)
    in_memory = GF.device_build(requests, None, None, b, params, SpillSizes(sum_edges=10**9))
    # Day 0's 368 summed edges and day 1's 794 go to the files; pruning starts on disk from 368 and from 843 (day 1
    # aged with day 0's graph) edges, more than memory_edges.
    assert [a for a in added if a] == [368, 794]
    assert rounds == [368, 843]
    for name in ("units", "graph", "runs"):
        assert spilled[name].equals(in_memory[name]), name
    assert spilled["stats"] == in_memory["stats"]
    assert spilled["stats"]["last_edges"] == 238
    # Buckets summed, weighed and pruned on 3 threads, the day's parts counted 3 at a time: the same graph.
    threaded = GF.device_build(requests, None, None, b, params, dataclasses.replace(SPILL, threads=3))
    for name in ("units", "graph", "runs"):
        assert threaded[name].equals(in_memory[name]), name
    # Pruned on disk down to 300 edges, then in memory (prune_arrays goes on from the graph the files left).
    rounds.clear()
    handed = GF.device_build(requests, None, None, b, params, SpillSizes(sum_edges=20, memory_edges=300, buckets=2))
    assert rounds == [368, 843]
    for name in ("units", "graph", "runs"):
        assert handed[name].equals(in_memory[name]), name
    assert spilled["stats"]["last_graph_bytes"] <= spilled["stats"]["budget_bytes"] == 5726


def _sorted_counts(rng: np.random.Generator, n: int, vertices: int) -> np.ndarray:
    """n distinct (src, dst) pairs in (src, dst) order with random pairs and closeness."""
    keys = np.unique(rng.integers(0, vertices * vertices, n))
    return np.stack([keys // vertices, keys % vertices, rng.integers(1, 9, len(keys)),
                     rng.integers(1, 90, len(keys))]).astype(np.int64)


def test_spilled_counts_read_back_as_added_in_narrow_and_wide_segments():
    """The first counts added cut the sources into 4 equal shares; every segment is split at those cuts. Segments
    whose pairs and closeness fit int32 are stored narrow, one with a count past it wide: each bucket reads back its
    segments' slices, in order, as int64, and sums them per (src, dst)."""
    rng = np.random.default_rng(5)
    small = _sorted_counts(rng, 300, 1000)
    wide = _sorted_counts(rng, 50, 1000)
    wide[2, 7], wide[3, 11] = 2**31, 2**40
    later = _sorted_counts(rng, 200, 1000)
    counts = SpilledCounts(1000, 4)
    assert counts.lows.tolist() == [0, 250, 500, 750, 1000]       # equal ranges until counts come
    try:
        for segment in (small, wide, small[:, :0], later):
            counts.add(segment)
        n = small.shape[1]
        assert counts.lows.tolist() == [0, *small[0, [n // 4, n // 2, 3 * n // 4]].tolist(), 1000]
        for b in range(4):
            lo, hi = counts.lows[b], counts.lows[b + 1]
            want = [seg[:, (seg[0] >= lo) & (seg[0] < hi)] for seg in (small, wide, later)]
            got = counts._counts(b)
            assert [g.dtype for g in got] == [np.int64] * 3
            assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
            # Summed per (src, dst) in order: what a dictionary of the three segments' rows gives.
            total: dict[tuple[int, int], list[int]] = {}
            for seg in want:
                for s_, d_, p_, c_ in seg.T.tolist():
                    total.setdefault((s_, d_), [0, 0])
                    total[(s_, d_)][0] += p_
                    total[(s_, d_)][1] += c_
            src, dst, pairs, closeness = _summed(got)
            assert list(zip(src.tolist(), dst.tolist(), strict=True)) == sorted(total)
            assert [[p_, c_] for p_, c_ in zip(pairs.tolist(), closeness.tolist(), strict=True)] == \
                [total[k] for k in sorted(total)]
        assert [t for _, t in counts._segments[0]] == [np.int32, np.int64, np.int32]
        with pytest.raises(ValueError, match="sorted by source"):
            counts.add(small[:, ::-1].copy())
    finally:
        counts.close()


def test_the_vertex_cut_is_the_kth_smallest_weight():
    """The pruning rounds' percentiles (sim.select.kth_smallest): by the weights' bits, many of them equal, as a sort
    gives it; with a negative value among them, by a partition."""
    rng = np.random.default_rng(9)
    values = rng.permutation(np.concatenate([rng.exponential(1.0, 20_000), np.full(9000, 1 / 9), np.full(400, 0.0),
                                             np.full(3000, 0.8 / 9)]))
    ordered = np.sort(values)
    for k in (0, 399, 400, 5000, 12_399, 12_400, 21_399, len(values) - 1):
        assert kth_smallest(values, k) == ordered[k]
    values[17] = -2.5
    assert kth_smallest(values, 0) == -2.5
    assert kth_smallest(values, 401) == np.sort(values)[401]


def test_the_spilled_edge_percentile_is_the_sorted_weights_kth(tmp_path):
    rng = np.random.default_rng(3)
    weights = np.concatenate([rng.exponential(2.0, 5000), np.full(700, 0.5), np.full(300, 1.0 + 2**-40),
                              rng.random(50) * 1e-9])
    counts = SpilledCounts(10, 4)
    try:
        src = rng.integers(0, 10, len(weights))
        for b in range(4):
            inside = src % 4 == b
            counts._write(b, src[inside], src[inside], weights[inside])
        top = np.bincount(weights.view(np.uint64) >> np.uint64(48), minlength=1 << 16)
        ordered = np.sort(weights)
        for k in (0, 1, 49, 50, 51, 600, 1234, 3000, len(weights) - 1):
            assert counts._select(top, k) == ordered[k]
    finally:
        counts.close()


@pytest.mark.parametrize(("mode", "layout", "heat_writes"),
                         [("combined", "sequential", True), ("run", "packed", False)])
def test_layout_from_the_files_equals_the_spark_layout(spark, spark_cfg, trace, monkeypatch, caplog, mode, layout,
                                                       heat_writes):
    """alis_layout over the two days' graphs of the test above (tau 4, writes counted, prefilter 2, a budget that
    prunes): plans, runs and summary row for row, both ways (libs.table_io.alis_layout against the Spark job)."""
    from blockheat.jobs import alis_layout

    opts = alis_layout.LayoutOptions(trace, mode=mode, layout=layout, heat_writes=heat_writes)
    caplog.set_level("INFO", logger="blockheat.libs.table_io.device_pass")
    got = {}
    for files in (False, True, "parts", "spilled"):
        caplog.clear()
        with monkeypatch.context() as m:
            if not files:
                _through_spark(m)
            if files in ("parts", "spilled"):
                m.setattr(GF, "CHUNK_ROWS", PART_ROWS)
            if files == "spilled":
                m.setattr(GF, "SPILL", SPILL)
            rows = alis_layout.run(spark, spark_cfg, opts)
        assert (f"alis {trace}: through Spark SQL (test: the Spark build)" in caplog.text) == (not files)
        got[files] = (rows, {t: table_digest(spark, spark_cfg.warehouse, t, trace)
                             for t in ("alis_layout", "alis_runs", "alis_summary")})
    assert got[True] == got[False]
    assert got["parts"] == got[False]
    assert got["spilled"] == got[False]
    rows = got[True][0]
    assert [r["interval_id"] for r in rows if r["device"] == "0"] == list(range(DAYS))
    assert sum(r["realizable_reads"] or 0 for r in rows) > 0
    assert sum(r["lookahead_reads"] or 0 for r in rows) > 0


def test_a_spilled_lookahead_plans_as_the_in_memory_one(spark, spark_cfg, trace, monkeypatch):
    """Device 0's layout in process with the job's own parameters: day 1's lookahead graph, counted into bucket
    files past 20 edges and pruned there, gives the in-memory count's plans, runs and summary."""
    from blockheat.jobs import alis_layout
    from blockheat.libs.table_io import alis_layout as LF

    seen = []
    real_layout = LF.layout
    monkeypatch.setattr(LF, "layout", lambda *a: seen.append(a[3]) or real_layout(*a))
    alis_layout.run(spark, spark_cfg, alis_layout.LayoutOptions(trace, mode="combined"))
    (p,) = seen

    def device_0(table: str) -> pa.Table:
        return read_table(spark, spark_cfg.warehouse, table, trace).where("device = '0'").toArrow()

    requests, units, graph = device_0("requests"), device_0("reorg_units"), device_0("access_graph")
    added = []
    real_add = SpilledCounts.add
    monkeypatch.setattr(SpilledCounts, "add", lambda self, counts: added.append(counts.shape[1]) or
                        real_add(self, counts))
    spilled = LF.device_layout(requests, units, graph, p, SPILL)
    assert [a for a in added if a] == [327]                 # day 1's lookahead edges went to the files
    threaded = LF.device_layout(requests, units, graph, p, dataclasses.replace(SPILL, threads=2))
    added.clear()
    in_memory = LF.device_layout(requests, units, graph, p, SpillSizes(sum_edges=10**9))
    assert not added
    for name in ("plan", "runs"):
        assert spilled[name].equals(in_memory[name]), name
        assert threaded[name].equals(in_memory[name]), name
    assert spilled["summary"] == in_memory["summary"] == threaded["summary"]
    assert spilled["summary"][0]["lookahead_reads"] > 0


def test_nightly_intervals_equal_the_spark_build(spark, spark_cfg, trace, monkeypatch, caplog):
    """--interval-index 0 then 1: units extended by first use, interval N-1's stored graph aged in."""
    got = {}
    for files, parts, spill in ((False, 0, None), (True, 0, None), (True, PART_ROWS, None), (True, PART_ROWS, SPILL)):
        for n in range(2):
            opts = alis_graph.GraphOptions(trace, interval_index=n, graph_share=0.0005, prefilter_min_refs=2)
            summary, tables = _build(spark, spark_cfg, opts, monkeypatch, caplog, files=files, parts=parts,
                                     spill=spill)
        got[files, parts, spill] = (summary, tables)
    assert got[True, 0, None] == got[False, 0, None]
    assert got[True, PART_ROWS, None] == got[False, 0, None]
    assert got[True, PART_ROWS, SPILL] == got[False, 0, None]
    assert got[True, 0, None][0].intervals == [1]



def test_a_nightly_build_without_runs_leaves_the_runs_to_the_layout(spark, spark_cfg, trace, monkeypatch, caplog):
    """--no-runs (the nightly DAG's graph stage): the units and graphs of the build with runs, alis_runs left as it
    was, no run figures, through the files and through Spark; the layout after it writes the tables it writes
    after the build with runs (it finds the runs of its mode's threshold itself)."""
    from blockheat.jobs import alis_layout

    def layout_tables():
        alis_layout.run(spark, spark_cfg, alis_layout.LayoutOptions(trace))
        return {t: table_digest(spark, spark_cfg.warehouse, t, trace) for t in ("alis_layout", "alis_runs",
                                                                                 "alis_summary")}

    built = {}
    for n in range(2):
        opts = alis_graph.GraphOptions(trace, interval_index=n, graph_share=0.0005, prefilter_min_refs=2)
        built[n] = _build(spark, spark_cfg, opts, monkeypatch, caplog, files=True)
    after_runs = layout_tables()
    runs_before = table_digest(spark, spark_cfg.warehouse, "alis_runs", trace)
    for files in (True, False):
        for n in range(2):
            opts = alis_graph.GraphOptions(trace, interval_index=n, graph_share=0.0005, prefilter_min_refs=2,
                                           runs=False)
            summary, tables = _build(spark, spark_cfg, opts, monkeypatch, caplog, files=files)
            assert tables["alis_runs"] == runs_before                     # not written
            assert {t: tables[t] for t in ("reorg_units", "access_graph")} == \
                   {t: built[n][1][t] for t in ("reorg_units", "access_graph")}
            stats = [{k: v for k, v in d.items() if k not in GF.RUN_STATS} for d in summary.per_device]
            assert stats == [{k: v for k, v in d.items() if k not in GF.RUN_STATS} for d in built[n][0].per_device]
            assert {d[k] for d in summary.per_device for k in GF.RUN_STATS} == {None}
            assert {d[k] for d in built[n][0].per_device for k in GF.RUN_STATS} != {None}
    assert layout_tables() == after_runs


@pytest.mark.parametrize("stride", [1, 10**9])
def test_interval_unit_counts_equal_a_count_of_all_references(stride):
    """Parts counted one after another into the same intervals (dense unit ids counted in an array, sparse ones
    by sorting) give each interval's sorted (unit, references) of all the parts at once."""
    rng = np.random.default_rng(5)
    parts = []
    for _ in range(4):
        interval = np.sort(rng.integers(0, 3, 5000))
        parts.append((interval, np.minimum(rng.zipf(1.3, 5000), 40_000) * stride))
    into: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for part in parts:
        GF.interval_unit_counts([part], into)
    interval = np.concatenate([p[0] for p in parts])
    units = np.concatenate([p[1] for p in parts])
    assert sorted(into) == [0, 1, 2]
    for i, (ids, counts) in into.items():
        want_ids, want_counts = np.unique(units[interval == i], return_counts=True)
        assert ids.tolist() == want_ids.tolist()
        assert counts.tolist() == want_counts.tolist()
        assert counts.dtype == np.int64
