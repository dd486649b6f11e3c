"""Trace profile: every definition on a hand-built trace, and pinned figures of the real HP trace.

The hplajw figures were derived independently with a plain numpy/pandas pass over the `requests`
rows (sorting per device, diffing, bincount per second, a set of (device, 4 KiB block) pairs).
"""
from __future__ import annotations

import json
import math

import pytest

from jobs.trace_profile import run as run_profile
from libs.cli import main as cli_main
from libs.tables import read_table
from libs.transforms.profile import compute_trace_profile
from schemas import trace_profile
from tests.builders import ingest, make_requests, write_msr
from tests.conftest import HPLAJW_TRACE_ID

MIB = 1 << 20
TINY = [
    ("d", 0, 0, "R", 0, 4096),
    ("d", 1, 5_000, "R", 4096, 4096),          # sequential
    ("d", 2, 25_000, "W", 8192, 8192),         # sequential: a run of 3
    ("e", 3, 1_000_000, "W", MIB, 512),
    ("d", 4, 2_025_000, "R", 0, 4096),         # seek back 16384 bytes; re-reads block 0 after 2.025 s
]


def _metrics(rows, scope, device, window_start=0, window=0):
    return {r.metric: r.value for r in rows if (r.scope, r.device, r.window_start_us, r.window_us)
            == (scope, device, window_start, window)}


@pytest.fixture(scope="module")
def tiny_profile(spark):
    df = compute_trace_profile(make_requests(spark, TINY), span_us=2_025_000, window_us=1_000_000,
                               chunk_us=10_000)  # small chunks: runs and lags cross chunk edges
    trace_profile.validate_trace_profile(df)
    return df.collect()


def test_profile_device_definitions_by_hand(tiny_profile):
    d = _metrics(tiny_profile, "device", "d")
    assert (d["requests"], d["reads"], d["writes"]) == (4, 3, 1)
    assert d["read_share_bytes"] == pytest.approx(12288 / 20480)
    assert (d["seq_share"], d["runs"], d["run_length_mean"], d["run_length_max"]) == (0.5, 2, 2.0, 3.0)
    assert (d["seek_bytes_mean"], d["seek_bytes_max"]) == (pytest.approx(16384 / 3), 16384.0)
    assert d["interarrival_us_mean"] == pytest.approx((5000 + 20000 + 2_000_000) / 3)
    assert (d["idle_10ms_count"], d["idle_10ms_total_s"], d["idle_1s_count"]) == (2, pytest.approx(2.02), 1)
    assert (d["footprint_blocks_4k"], d["footprint_bytes"], d["reuse_share"]) == (4, 16384, 0.2)
    assert d["reuse_time_us_p50"] == 2_025_000
    assert (d["size_bytes_p50"], d["size_bytes_max"]) == (4096.0, 8192.0)


def test_profile_trace_scope_merges_devices(tiny_profile):
    t = _metrics(tiny_profile, "trace", "*")
    assert t["requests"] == 5
    assert t["rate_per_s"] == pytest.approx(5 / 2.025)
    # merged arrivals: gaps 5 ms, 20 ms, 975 ms, 1025 ms
    assert (t["idle_10ms_count"], t["idle_1s_count"]) == (3, 1)
    assert t["footprint_blocks_4k"] == 5
    # 1 s bins over 2.025 s -> 3 bins with 3, 1, 1 requests
    assert t["peak_to_mean_1s"] == pytest.approx(3 / (5 / 3))
    assert t["dispersion_1s"] == pytest.approx((11 / 3 - 25 / 9) / (5 / 3))
    # extents: (d, 0) x4 and (e, 1) x1; the hottest 1% (rounded up to one extent) gets 4/5
    assert (t["extents_touched"], t["skew_top1pct_share"]) == (2, 0.8)
    theta = math.log(0.8) / math.log(0.5)
    assert t["skew_theta"] == pytest.approx(theta)
    y = t["skew_y_pct"] / 100
    assert y**theta + y == pytest.approx(1.0)
    assert t["skew_x_pct"] + t["skew_y_pct"] == pytest.approx(100.0)


def test_profile_windows(tiny_profile):
    per_window = {ws: _metrics(tiny_profile, "trace", "*", ws, 1_000_000)["requests"]
                  for ws in (0, 1_000_000, 2_000_000)}
    assert per_window == {0: 3, 1_000_000: 1, 2_000_000: 1}
    # the run of 3 starts in window 0; the run of 1 in window 2
    assert _metrics(tiny_profile, "device", "d", 0, 1_000_000)["run_length_max"] == 3.0


HPLAJW_PINNED = {
    # scope/device: metric -> value (see the module docstring for how they were derived)
    ("trace", "*"): {"requests": 44_519, "reads": 13_040, "runs": 43_917, "seq_share": 0.013522316314382624,
                     "interarrival_us_mean": 13_546_533.736735702, "idle_10ms_count": 31_547,
                     "footprint_blocks_4k": 7_344, "reuse_share": 0.9003135562161502,
                     "peak_to_mean_1s": 1435.9013005682966, "dispersion_1s": 20.001854324373728,
                     "extents_touched": 257, "skew_top10pct_share": 0.7149377964736419},
    ("device", "0"): {"requests": 42_252, "runs": 41_691, "seq_share": 0.013277477989207611,
                      "interarrival_us_mean": 14_273_379.413812691, "idle_10ms_count": 29_390,
                      "footprint_blocks_4k": 7_064, "reuse_share": 0.900240079084875,
                      "peak_to_mean_1s": 1512.9435293003883, "dispersion_1s": 20.003543883706712,
                      "extents_touched": 255, "skew_top10pct_share": 0.7107837360047142},
    ("device", "1"): {"requests": 2_267, "runs": 2_226, "seq_share": 0.01808557565063961,
                      "interarrival_us_mean": 266_110_902.08075905, "idle_10ms_count": 2_227,
                      "footprint_blocks_4k": 280, "reuse_share": 0.9021321216357917,
                      "peak_to_mean_1s": 3724.2655491839437, "dispersion_1s": 4.144013255971771,
                      "extents_touched": 2, "skew_top10pct_share": 0.9311865902073224},
}


def test_profile_pinned_on_hplajw(spark, spark_cfg, hplajw):
    written = run_profile(spark, spark_cfg, HPLAJW_TRACE_ID)
    rows = read_table(spark, spark_cfg.warehouse, "trace_profile", HPLAJW_TRACE_ID).collect()
    assert written == len(rows) > 0
    for (scope, device), pinned in HPLAJW_PINNED.items():
        got = _metrics(rows, scope, device)
        assert {m: got[m] for m in pinned} == pytest.approx(pinned, rel=1e-9), (scope, device)
    # one week in 1 h windows: 168 windows hold all requests
    windows = [r for r in rows if r.scope == "trace" and r.window_us == 3_600_000_000 and r.metric == "requests"]
    assert len(windows) <= 168
    assert sum(r.value for r in windows) == 44_519


def test_cli_profile_json(spark, spark_cfg, tmp_path, capsys):
    path = write_msr(tmp_path / "p_0.csv", [(0, 0, "R", 0, 4096), (1000, 0, "R", 4096, 4096),
                                            (3000, 0, "R", 65536, 4096)])
    ingest(spark, spark_cfg, "msr", "prof-cli", [path])
    capsys.readouterr()
    assert cli_main(["profile", "prof-cli", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trace"]["requests"] == 3
    assert out["trace"]["seq_share"] == pytest.approx(1 / 3)
    assert out["device h_0"]["interarrival_us_mean"] == 1500
