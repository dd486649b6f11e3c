"""Run discovery: the paper's figure 11 and 9 examples, the threshold normaliser, minimum length,
tie rules, runs of decreasing desirability, and the Spark wrapper."""
from __future__ import annotations

import numpy as np
import pytest

from blockheat.libs.alis.runs import find_runs
from blockheat.sim.alis.graph import count_pairs
from blockheat.sim.alis.runs import discover_runs, once_weight
from tests.libs.alis.refs import make_graph, name, units_of


def graph_arrays(text: str, *, tau: int, f: float, relabel: dict[int, int] | None = None):
    """The access graph of a reference string; '|' separates strings that do not connect."""
    parts = [units_of(part) for part in text.split("|")]
    units = np.array([(relabel or {}).get(u, u) for part in parts for u in part], np.int64)
    seg = np.repeat(np.arange(len(parts)), [len(part) for part in parts])
    src, dst, pairs, closeness = count_pairs(seg, units, tau)
    return src, dst, pairs * (1 - f) + f * closeness / tau


def edges(*named: tuple[str, float]):
    """('RU', 6.0), ... -> src, dst, weight arrays."""
    return (np.array([units_of(e[0])[0] for e, _ in named]), np.array([units_of(e[1])[0] for e, _ in named]),
            np.array([w for _, w in named]))


def named_runs(found, relabel=None):
    back = {v: k for k, v in (relabel or {}).items()}
    return [(run_id, "".join(name(back.get(u, u)) for u in members)) for run_id, members in found]


def test_once_weight_is_one_pass_through_the_sequence():
    assert once_weight(9, tau=9, f=1.0) == pytest.approx(5.0)          # 9/9 + 8/9 + ... + 1/9
    assert once_weight(2, tau=9, f=1.0) == pytest.approx(1 + 8 / 9)
    assert once_weight(2, tau=2, f=0.0) == 2.0
    assert once_weight(12, tau=9, f=0.0) == 9.0                        # at most tau members count


@pytest.mark.parametrize("f", [0.0, 1.0])
def test_figure_11_discovers_a_r_u_n_b(f):
    assert named_runs(discover_runs(*graph_arrays("A R U N B A R U N B", tau=2, f=f), tau=2, f=f)) == [
        (0, "ARUNB")]


def test_figure_11_walk_through_seeded_from_r_u():
    # The paper's walk-through starts from R -> U (one of the tied heaviest edges); give R and U the
    # smallest ids so that it is the one taken. N joins the back first (equal head and tail weights).
    relabel = {units_of("R")[0]: 0, units_of("U")[0]: 1, units_of("A")[0]: 2, units_of("N")[0]: 3}
    found = discover_runs(*graph_arrays("A R U N B A R U N B", tau=2, f=0.0, relabel=relabel), tau=2, f=0.0)
    assert named_runs(found, relabel) == [(0, "ARUNB")]


def test_figure_9_graduated_weights_put_u_right_after_r():
    assert named_runs(discover_runs(*graph_arrays("R U N R U N", tau=2, f=1.0), tau=2, f=1.0)) == [(0, "RUN")]


def test_threshold_is_relative_to_a_sequence_seen_once():
    # A B C D E once: each growth step scores exactly once_weight(2) = 1.5, the threshold 1.0 level.
    graph = graph_arrays("A C D E F", tau=2, f=1.0)
    assert named_runs(discover_runs(*graph, tau=2, f=1.0, threshold=1.0)) == [(0, "ACDEF")]
    # Slightly stricter: no growth; both seeds (A->C, then D->E) stay pairs, shorter than 3.
    assert discover_runs(*graph, tau=2, f=1.0, threshold=1.01, min_length=3) == []
    assert named_runs(discover_runs(*graph, tau=2, f=1.0, threshold=1.01, min_length=2)) == [
        (0, "AC"), (1, "DE")]


def test_runs_come_in_decreasing_desirability_and_short_ones_are_dropped():
    # C D E F seen three times, A R U twice (apart): the heavier run is found and ranked first; the
    # three-unit run is shorter than tau = 4 and dropped, but still numbered.
    text = "C D E F C D E F C D E F | A R U A R U"
    assert named_runs(discover_runs(*graph_arrays(text, tau=4, f=1.0), tau=4, f=1.0)) == [(0, "CDEF")]
    assert named_runs(discover_runs(*graph_arrays(text, tau=4, f=1.0), tau=4, f=1.0, min_length=3)) == [
        (0, "CDEF"), (1, "ARU")]


def test_equal_head_and_tail_weights_grow_the_back():
    # Seed R -> U; A precedes and N follows with weight 2 each: N goes to the back, and then A
    # follows N more strongly (5) than it precedes R (2).
    found = discover_runs(*edges(("RU", 6.0), ("AR", 2.0), ("UN", 2.0), ("NA", 5.0)), tau=1, f=0.0, min_length=2)
    assert named_runs(found) == [(0, "RUNA")]
    # A heavier head goes to the front, and N then precedes A.
    found = discover_runs(*edges(("RU", 6.0), ("AR", 2.5), ("UN", 2.0), ("NA", 5.0)), tau=1, f=0.0, min_length=2)
    assert named_runs(found) == [(0, "NARU")]


def test_head_is_the_first_tau_members_only():
    # P Q S grows at the back; S is third, outside the head (P, Q) for tau = 2, so Z -> S does not
    # draw Z to the front although 3.0 is far above the threshold.
    found = discover_runs(*edges(("PQ", 5.0), ("QS", 4.0), ("ZS", 3.0)), tau=2, f=0.0, min_length=2)
    assert named_runs(found) == [(0, "PQS")]
    # Mirror image: the tail is the last tau members, so P -> X (the first of S Q P... ) is ignored.
    found = discover_runs(*edges(("QS", 5.0), ("PQ", 4.0), ("PX", 3.0)), tau=2, f=0.0, min_length=2)
    assert named_runs(found) == [(0, "PQS")]


def test_self_loops_and_empty_graphs():
    assert discover_runs(np.array([1]), np.array([1]), np.array([5.0])) == []
    assert discover_runs(np.array([], np.int64), np.array([], np.int64), np.array([])) == []


def test_find_runs_per_device_and_interval(spark):
    rows = []
    for device, interval_id, text in (("d0", 0, "A R U N B A R U N B"), ("d0", 1, "R U N R U N"),
                                      ("d1", 0, "C D E C D E")):
        src, dst, w = graph_arrays(text, tau=2, f=1.0)
        rows += [(device, interval_id, int(s), int(d), float(x)) for s, d, x in zip(src, dst, w, strict=True)]
    got = find_runs(make_graph(spark, rows), tau=2, f=1.0).collect()
    runs: dict[tuple[str, int, int, int], list[tuple[int, int]]] = {}
    for r in got:
        runs.setdefault((r.device, r.interval_id, r.run_id, r.rank), []).append((r.position, r.unit_id))
    assert {k: "".join(name(u) for _, u in sorted(v)) for k, v in runs.items()} == {
        ("d0", 0, 0, 0): "ARUNB", ("d0", 1, 0, 0): "RUN", ("d1", 0, 0, 0): "CDE"}


def _random_graph(rng: np.random.Generator, *, vertices: int, reads: int, tau: int, f: float):
    """The access graph of a random reference string with repeated sequences (so runs exist) and
    small integer counts (so equal scores and tie rules are exercised)."""
    runs = [rng.integers(0, vertices, rng.integers(3, 15)) for _ in range(max(2, vertices // 8))]
    units: list[int] = []
    while len(units) < reads:
        units += (runs[rng.integers(len(runs))] if rng.random() < 0.7
                  else rng.integers(0, vertices, rng.integers(1, 6))).tolist()
    units_array = np.array(units[:reads], np.int64) * 7 + 3          # unit ids are not 0..n-1
    seg = np.cumsum(rng.random(reads) < 0.02)
    src, dst, pairs, closeness = count_pairs(seg, units_array, tau)
    return src, dst, pairs * (1 - f) + f * closeness / tau


@pytest.mark.parametrize("seed", [*range(12), "large"])
def test_compiled_discovery_matches_the_python_reference_on_random_graphs(seed):
    """The numba loop against the first, pure-Python version (heapq, dicts, deques): the same runs, in
    the same order, with the same ids, whatever the context, threshold and minimum length ("large":
    tens of thousands of edges, so the heaps grow past their first allocation)."""
    from tests.libs.alis.runs_reference import discover_runs as reference

    rng = np.random.default_rng(99 if seed == "large" else seed)
    tau = 9 if seed == "large" else int(rng.choice([1, 2, 3, 9]))
    f = 1.0 if seed == "large" else float(rng.choice([0.0, 0.5, 1.0]))
    threshold = 0.1 if seed == "large" else float(rng.choice([0.0, 0.1, 0.4, 1.0]))
    min_length = tau if seed == "large" else int(rng.choice([1, 2, tau]))
    vertices, reads = (3000, 60_000) if seed == "large" else (int(rng.integers(5, 400)), int(rng.integers(10, 4000)))
    graph = _random_graph(rng, vertices=vertices, reads=reads, tau=tau, f=f)
    expected = reference(*graph, tau=tau, f=f, threshold=threshold, min_length=min_length)
    assert sum(len(m) for _, m in expected) > 0
    assert discover_runs(*graph, tau=tau, f=f, threshold=threshold, min_length=min_length) == expected


@pytest.mark.parametrize(("ids", "distinct_weights", "sorted_edges"), [(50, 4, True), (50, 4, False),
                                                                         (10**12, 40_000, True), (10**12, 3, False)])
def test_seed_order_and_vertices_equal_the_plain_sorts(ids: int, distinct_weights: int, sorted_edges: bool) -> None:
    # The shortcuts (presence array for dense unit ids, the pair sort skipped for sorted edges, a radix sort of
    # the weights' ranks) give np.unique's vertices and the two stable sorts' seed order, ties included.
    from blockheat.sim.alis.graph import distinct_ranks
    from blockheat.sim.alis.runs import _seed_order

    rng = np.random.default_rng(ids % 97 + distinct_weights)
    pairs = np.unique(rng.integers(0, ids, (60_000, 2)), axis=0)             # sorted by (src, dst), no duplicates
    if not sorted_edges:
        pairs = pairs[rng.permutation(len(pairs))]
    src, dst = pairs[:, 0], pairs[:, 1]
    weight = rng.integers(1, distinct_weights + 1, len(src)) / 7.0
    vocab, inverse = distinct_ranks(np.concatenate([src, dst]))
    want_vocab, want_inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    assert np.array_equal(vocab, want_vocab)
    assert np.array_equal(inverse, want_inverse)
    s, d, n = inverse[: len(src)], inverse[len(src):], len(vocab)
    by_pair = np.argsort(s * n + d, kind="stable")
    assert np.array_equal(_seed_order(s, d, weight, n), by_pair[np.argsort(-weight[by_pair], kind="stable")])
