"""Interarrival heat tracking: a hand-computed sequence with aging, and the evaluation metrics against
a literal step-by-step simulation of the paper's rules in numpy."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from blockheat.libs.table_io.tracking import device_rows, kth_smallest
from blockheat.libs.transforms.tracking import compute_heat_tracking
from blockheat.libs.transforms.tracking_eval import (
    ACCURACY_LABEL,
    StepSpec,
    accuracy,
    generated_trace,
    judge_claims,
    paper_claims,
    relative_errors,
    report_claims,
    requests_to_reach,
    requests_to_reach_arrays,
    stale_seconds,
    stale_seconds_arrays,
)
from blockheat.schemas import heat_tracking
from tests.builders import make_requests

MIB = 1 << 20
S = 1_000_000


BY_HAND_ROWS = [
    # extent 0: k = 3 window over 8, 8, 16, 8, 8 blocks
    ("d", 0, 1 * S, "R", 0, 4096), ("d", 1, 2 * S, "R", 0, 4096), ("d", 2, 4 * S, "R", 0, 8192),
    ("d", 3, 5 * S, "R", 0, 4096), ("d", 5, 23 * S, "R", 0, 4096),
    # extent 1: one request only -> known, but no estimate
    ("d", 6, 25 * S, "R", MIB, 4096),
    # extent 2: a request exactly at a checkpoint is not seen by it
    ("d", 4, 10 * S, "R", 2 * MIB, 4096), ("d", 7, 30 * S, "R", 2 * MIB, 4096),
]
R4 = 3 * (32 / 3) / 3          # after request 4: k*R/(t4 - t2) = 32/3 blocks/s
R5 = 3 * (32 / 3) / (23 - 4)   # after request 5: k*R/(t5 - t3)
BY_HAND = {
    # checkpoints see requests strictly before them; aging: k*R/(t' - t_(n-k+2)), only if lower
    (0, 10): (4, min(R4, 32 / (10 - 4)), R4, 0.0),
    (0, 20): (4, 32 / (20 - 4), R4, 0.8),          # true: 8 blocks in [20 s, 30 s)
    (0, 30): (5, min(R5, 32 / (30 - 5)), R5, 0.0),
    (0, 40): (5, 32 / (40 - 5), R5, 0.0),
    (0, 50): (5, 32 / (50 - 5), R5, 0.0),
    (1, 30): (1, None, None, 0.0), (1, 40): (1, None, None, 0.0), (1, 50): (1, None, None, 0.0),
    (2, 20): (1, None, None, 0.0),
    (2, 30): (1, None, None, 0.8),
    # n = 2 < k: 2*R/(t2 - t1) = 16/20; aging from t_2 = 30 s never lowers it here
    (2, 40): (2, 0.8, 0.8, 0.0), (2, 50): (2, 0.8, 0.8, 0.0),
}


def _assert_by_hand(rows: list[dict]) -> None:
    got = {(r["extent_id"], r["checkpoint_us"] // S): (r["requests_seen"], r["heat"], r["heat_no_aging"],
                                                       r["true_heat"]) for r in rows}
    assert sorted(got) == sorted(BY_HAND)
    for key, want in BY_HAND.items():
        assert got[key][0] == want[0], key
        for have, exp in zip(got[key][1:], want[1:], strict=True):
            assert have == (None if exp is None else pytest.approx(exp, rel=1e-12)), key


def test_tracking_by_hand_with_selective_aging(spark):
    tracked = compute_heat_tracking(make_requests(spark, BY_HAND_ROWS), extent_bytes=MIB, k=3, aging_period_us=10 * S,
                                    span_us=60 * S)
    heat_tracking.validate_heat_tracking(tracked)
    _assert_by_hand([r.asDict() for r in tracked.collect()])


def test_compiled_tracking_by_hand_for_several_k_at_once():
    # The files path's loops (one device's requests in any order), with k = 3 among others: the same rows.
    order = [7, 2, 0, 5, 1, 6, 3, 4]
    requests = pa.table({"ts_us": [BY_HAND_ROWS[i][2] for i in order], "seq": [BY_HAND_ROWS[i][1] for i in order],
                         "offset_bytes": [BY_HAND_ROWS[i][4] for i in order],
                         "size_bytes": [BY_HAND_ROWS[i][5] for i in order]})
    per_k = device_rows(requests, ks=(2, 3, 50), extent_bytes=MIB, aging_period_us=10 * S, span_us=60 * S)
    assert sorted(per_k) == [2, 3, 50]
    _assert_by_hand(per_k[3].to_pylist())
    assert {r["k"] for r in per_k[3].to_pylist()} == {3}
    # k = 2 after request 4 of extent 0 (16 and 8 blocks at 4 s and 5 s): 2 x 12 / 1 s; aged at 10 s from t_4.
    row = next(r for r in per_k[2].to_pylist() if (r["extent_id"], r["checkpoint_us"]) == (0, 10 * S))
    assert (row["heat_no_aging"], row["heat"]) == (pytest.approx(24.0), pytest.approx(24 / (10 - 5)))


def test_files_path_equals_the_window_functions_on_the_real_trace(spark, spark_cfg, hplajw):
    """Every row, bit for bit, on the bundled HP trace (two devices): three k with hourly checkpoints, k = 10
    with checkpoints every 10 minutes (all three written in one pass each time)."""
    from blockheat.libs.io.tables import read_table, trace_info
    from blockheat.libs.table_io.tracking_update import TrackParams, track_whole
    from tests.conftest import HPLAJW_TRACE_ID as TID

    span = int(trace_info(spark, spark_cfg.warehouse, TID)["span_us"])
    requests = read_table(spark, spark_cfg.warehouse, "requests", TID)
    cols = [c for c in heat_tracking.COLUMNS if c != "trace_id"]
    key = ["device", "extent_id", "checkpoint_us"]
    for period, rows, compared in ((3600 * S, 26_548, (2, 10, 50)), (600 * S, 161_026, (10,))):
        written = track_whole(spark, spark_cfg.warehouse, TID, TrackParams((2, 10, 50), MIB, period), span_us=span)
        assert written == {2: rows, 10: rows, 50: rows}
        for k in compared:
            want = compute_heat_tracking(requests, k=k, aging_period_us=period, span_us=span).select(cols).toPandas()
            got = read_table(spark, spark_cfg.warehouse, "heat_tracking", TID).where(
                f"k = {k} AND aging_period_us = {period} AND extent_bytes = {MIB}").select(cols).toPandas()
            assert len(got) == rows
            want, got = (t.sort_values(key).reset_index(drop=True) for t in (want, got))
            assert got.equals(want), (k, period)          # NaN (no estimate) equals NaN here, nothing else


def test_tracking_rejects_k_below_two(spark):
    with pytest.raises(ValueError, match="k must be >= 2"):
        compute_heat_tracking(make_requests(spark, [("d", 0, 0, "R", 0, 512)]), k=1, span_us=1)


SPEC = StepSpec(extents=24, change_s=120.0, end_s=150.0, seed=3)


def _times_by_extent(kind):
    table = generated_trace(kind, SPEC).to_pydict()
    by = {}
    for ts, off in zip(table["ts_us"], table["offset_bytes"], strict=True):
        by.setdefault(off // MIB, []).append(ts)
    return {e: np.array(v, dtype=np.int64) for e, v in by.items()}


def _estimate(t, n, k):
    """The paper's estimate after request n (1-based) with R = 8 blocks (every request is 4 KiB)."""
    m = min(n, k)
    return m * 8 * 1e6 / max(t[n - 1] - t[n - m], 1)


def test_requests_to_reach_matches_a_literal_count(spark):
    k = 5
    counts = []
    for t in _times_by_extent("step").values():
        first = int(np.searchsorted(t, round(SPEC.change_s * S)))
        for n in range(first + 1, len(t) + 1):
            if n >= 2 and _estimate(t, n, k) >= 0.9 * 80:
                counts.append(n - first)
                break
    df = spark.createDataFrame(generated_trace("step", SPEC).to_pandas())
    assert requests_to_reach(df, k=k, spec=SPEC) == pytest.approx(np.mean(counts), rel=1e-12)
    for kk in (2, k, 20):           # the numpy version (what the eval job runs) equals the window functions
        assert requests_to_reach_arrays(generated_trace("step", SPEC), k=kk, spec=SPEC) == requests_to_reach(
            df, k=kk, spec=SPEC)
    assert 4 <= np.mean(counts) <= 7   # about k, as FIVE section 3.3 says


def test_stale_seconds_matches_stepping_pseudo_requests(spark):
    k, period = 5, S
    stale = []
    for t in _times_by_extent("drop").values():
        n = len(t)
        heat = _estimate(t, n, k)
        age_from = t[n - k + 1] if n >= k else t[1]
        pseudo = (t[-1] // period + 1) * period
        while min(heat, min(n, k) * 8 * 1e6 / (pseudo - age_from)) >= 0.1 * 80:
            pseudo += period
        stale.append((pseudo - t[-1]) / 1e6)
    df = spark.createDataFrame(generated_trace("drop", SPEC).to_pandas())
    assert stale_seconds(df, k=k, aging=True, spec=SPEC, aging_period_us=period) == pytest.approx(np.mean(stale))
    assert stale_seconds(df, k=k, aging=False, spec=SPEC) is None   # without aging: stale forever
    table = generated_trace("drop", SPEC)
    for kk in (2, k, 20):           # the numpy version (what the eval job runs) against the window functions
        assert stale_seconds_arrays(table, k=kk, aging=True, spec=SPEC, aging_period_us=period) == pytest.approx(
            stale_seconds(df, k=kk, aging=True, spec=SPEC, aging_period_us=period), rel=1e-12)
        assert stale_seconds_arrays(table, k=kk, aging=False, spec=SPEC) is None
    assert stale_seconds_arrays(table, k=k, aging=True, spec=SPEC, aging_period_us=period) == pytest.approx(
        np.mean(stale), rel=1e-12)
    # Analytic expectation at 10 requests/s: about (9k + 2) / rate + P / 2 = 5.2 s.
    assert 3.5 < np.mean(stale) < 7.0


def test_paper_claims_verdicts_reasons_and_accuracy():
    rows = [{"k": 5, "mean_relative_error": 1.0, "requests_to_90pct": 5.5, "stale_s_aging": 5.0,
             "stale_s_no_aging": None},
            {"k": 50, "mean_relative_error": 2.0, "requests_to_90pct": 70.0, "stale_s_aging": 45.0,
             "stale_s_no_aging": None}]
    verdicts = {claim.split(" (")[0]: holds for claim, holds, _ in paper_claims(rows)}
    assert verdicts == {"estimate fairly insensitive to k": False, "quick to follow a rise": False,
                        "aging needed for a sudden drop": True}
    # A claim that does not hold names the k values failing it and by how much; one that holds has no reason.
    assert [c.reason for c in judge_claims(rows)] == ["k=50 errs 2.00x as much as k=5", "k=50: 1.40 k requests", ""]
    assert paper_claims(rows)[1][2] == "k=5: 5.5 requests, k=50: 70.0 requests; does not hold: k=50: 1.40 k requests"
    stale = [{**rows[0], "stale_s_aging": None}, {**rows[1], "stale_s_no_aging": 3.25}]
    assert judge_claims(stale)[2].reason == "k=5: stale forever with aging; k=50: cold after 3.2 s without aging"
    # Accuracy is its own line: 100-200 % mean error is inaccurate whatever the insensitivity; 25 % at most is
    # accurate; no measured error is no verdict.
    assert accuracy(rows) == (False, "inaccurate: estimates off by 1.0x to 2.0x the true heat on average (mean "
                                     "relative error k=5: 100%, k=50: 200%)")
    calm = [{**r, "mean_relative_error": e} for r, e in zip(rows, (0.2, 0.25), strict=True)]
    assert accuracy(calm) == (True, "accurate within 25% (mean relative error k=5: 20%, k=50: 25%)")
    assert judge_claims(calm)[0].holds is True
    none = [{**r, "mean_relative_error": None} for r in rows]
    assert accuracy(none)[0] is None
    assert [c.claim.split(" (")[0] for c in judge_claims(none)] == ["quick to follow a rise",
                                                                    "aging needed for a sudden drop"]
    # The report lists the accuracy line before the paper's claims.
    assert report_claims(rows) == [(ACCURACY_LABEL, *accuracy(rows)), *paper_claims(rows)]


def test_eval_job_on_the_real_trace_and_its_window_function_fallback(spark, spark_cfg, hplajw, monkeypatch):
    """jobs.heat_tracking --eval: heat_tracking rows of every k from one pass, tracking_eval rows from them and
    the generated traces; with files it cannot read, the window functions write the same rows."""
    import blockheat.libs.table_io.tracking_update as TU
    from blockheat.jobs.heat_tracking import run_eval, track_ks
    from blockheat.libs.io.tables import read_table
    from blockheat.libs.table_io.device_pass import Unsupported
    from tests.conftest import HPLAJW_TRACE_ID as TID

    def table(k):
        return read_table(spark, spark_cfg.warehouse, "heat_tracking", TID).where(
            f"k = {k} AND aging_period_us = {3600 * S} AND extent_bytes = {MIB}")

    spec = StepSpec(extents=6, change_s=60.0, end_s=75.0, seed=3)
    rows = run_eval(spark, spark_cfg, TID, ks=(5, 10), spec=spec)
    assert [r["k"] for r in rows] == [5, 10]
    step = spark.createDataFrame(generated_trace("step", spec).to_pandas())
    for r in rows:
        assert table(r["k"]).count() == 26_548
        assert r["checkpoints"] == table(r["k"]).where("heat IS NOT NULL AND true_heat > 0").count() > 0
        assert r["requests_to_90pct"] == requests_to_reach(step, k=r["k"], spec=spec)
        errors = relative_errors(table(r["k"]))
        assert (r["mean_relative_error"], r["median_relative_error"]) == (
            pytest.approx(errors["mean"], rel=1e-12), pytest.approx(errors["median"], rel=1e-12))
    # The real trace's accuracy, as its own line: the estimates are far off whatever k (which the paper's
    # insensitivity claim would pass: 2.76 / 2.01 < 1.5).
    assert accuracy(rows) == (False, "inaccurate: estimates off by 2.0x to 2.8x the true heat on average (mean "
                                     "relative error k=5: 276%, k=10: 201%)")
    assert judge_claims(rows)[0].holds is True
    stored = read_table(spark, spark_cfg.warehouse, "tracking_eval", TID).orderBy("k").collect()
    assert [(s.k, s.checkpoints) for s in stored] == [(r["k"], r["checkpoints"]) for r in rows]

    key = ["device", "extent_id", "checkpoint_us"]
    before = table(5).drop("trace_id").toPandas().sort_values(key).reset_index(drop=True)

    def unreadable(*args, **kwargs):
        raise Unsupported("test: a deletion vector")

    monkeypatch.setattr(TU, "trace_files", unreadable)
    assert track_ks(spark, spark_cfg, TID, [5], full=True) == {5: 26_548}     # the whole trace, by Spark SQL
    after = table(5).drop("trace_id").toPandas().sort_values(key).reset_index(drop=True)
    assert after[before.columns].equals(before)


def test_kth_smallest_across_sorted_arrays_is_the_merged_order_statistic():
    # Three sorted arrays with zeros, ties across arrays and one empty array: every rank of the merge.
    rng = np.random.default_rng(2)
    arrays = [np.sort(rng.choice([0.0, 0.25, 1.5, 1e-300, 7.0, 1e300], 40)), np.sort(rng.random(25)),
              np.zeros(0), np.sort(np.concatenate([rng.random(10), [0.25, 0.25]]))]
    merged = np.sort(np.concatenate(arrays))
    assert [kth_smallest(arrays, r) for r in range(len(merged))] == merged.tolist()


def test_relative_errors_from_the_files_equal_spark_sql_on_the_real_trace(spark, spark_cfg, hplajw, monkeypatch):
    # The hplajw week tracked for k = 5 and 10: the files' checkpoints and median equal Spark SQL's exactly (an
    # order statistic, the two middle values' mean for an even count); the mean to the last few bits. A k the
    # table lacks has no checkpoints.
    from blockheat.jobs.heat_tracking import track_ks
    from blockheat.libs.io.tables import read_table
    from blockheat.libs.table_io.tracking import relative_errors_files
    from blockheat.libs.transforms.tracking_eval import relative_errors_by_k
    from tests.conftest import HPLAJW_TRACE_ID as TID

    track_ks(spark, spark_cfg, TID, [5, 10])
    direct = relative_errors_files(spark, spark_cfg.warehouse, TID, ks=(5, 10, 7), extent_bytes=MIB,
                                   aging_period_us=3600 * S)
    rows = read_table(spark, spark_cfg.warehouse, "heat_tracking", TID).where(
        f"extent_bytes = {MIB} AND aging_period_us = {3600 * S} AND k IN (5, 10)")
    sql = relative_errors_by_k(rows)
    assert direct[7] == {"checkpoints": 0, "mean": None, "median": None}
    for k in (5, 10):
        assert (direct[k]["checkpoints"], direct[k]["median"]) == (sql[k]["checkpoints"], sql[k]["median"])
        assert direct[k]["mean"] == pytest.approx(sql[k]["mean"], rel=1e-12)
    # 4,196 checkpoints (even): the median interpolates between the two middle errors.
    assert (direct[5]["checkpoints"], direct[10]["checkpoints"]) == (4196, 4196)
