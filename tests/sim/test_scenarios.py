"""simulate_partition with pyarrow alone: one result row per scenario, the time series, scenario files."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from blockheat.sim.array import ExtentMap, Striped
from blockheat.sim.scenarios import (
    SIM_RESULT_SCHEMA,
    ScenarioConfig,
    ScenarioError,
    layout_from_dict,
    simulate_partition,
    simulate_partition_with_timeseries,
)
from tests.sim.conftest import REPO


def _requests_table(n: int = 2000, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.exponential(20_000.0, n)).astype(np.int64)
    return pa.table({
        "trace_id": pa.array(["t1"] * n), "device": pa.array(rng.choice(["0", "1"], n)),
        "seq": pa.array(np.arange(n)), "ts_us": pa.array(ts), "op": pa.array(rng.choice(["R", "W"], n)),
        "offset_bytes": pa.array(rng.integers(0, 500_000, n) * 512), "size_bytes": pa.array(np.full(n, 4096)),
        "response_us": pa.nulls(n, pa.float64()), "queue_us": pa.nulls(n, pa.float64()),
        "source_file": pa.array(["f"] * n)})


def test_simulate_partition_returns_one_flat_row() -> None:
    table = _requests_table()
    cfg = ScenarioConfig.from_dict({"scenario_id": "s1", "spec": "hp_c2247a", "scheduler": "clook"})
    out = simulate_partition(table, cfg)
    assert out.schema == SIM_RESULT_SCHEMA
    assert out.num_rows == 1
    row = out.to_pylist()[0]
    assert (row["scenario_id"], row["trace_id"], row["devices"]) == ("s1", "t1", ["0", "1"])
    assert row["requests"] == 2000
    assert row["reads"] + row["writes"] == 2000
    assert row["sectors_read"] + row["sectors_written"] == 2000 * 8
    assert 0 < row["mean_response_ms"] < 100
    assert len(row["disk_utilization"]) == 2
    assert simulate_partition(table, cfg).equals(out)                     # deterministic


def test_time_series_rows_carry_the_scenario_key() -> None:
    cfg = ScenarioConfig.from_dict({"scenario_id": "s2", "spec": "hp_c2247a", "disks": 4, "speedup": 4.0,
                                    "layout": {"kind": "striped", "unit_sectors": 64}, "interval_ms": 1000.0})
    result, series = simulate_partition_with_timeseries(_requests_table(), cfg)
    assert series.schema.names == ["scenario_id", "trace_id", "interval", "start_ms", "arrivals", "completions",
                                   "mean_response_ms", "max_response_ms", "mean_outstanding", "mean_utilization",
                                   "hottest_utilization", "mean_queue_length", "hottest_queue_length"]
    assert set(series.column("scenario_id").to_pylist()) == {"s2"}
    assert sum(series.column("completions").to_pylist()) == result.column("requests")[0].as_py() == 2000
    # Speed-up 4 compresses ~40 s of arrivals into ~10 s.
    assert 9 <= series.num_rows <= 13


def test_background_traffic_runs_on_the_simulated_clock() -> None:
    cfg = ScenarioConfig.from_dict({"scenario_id": "bg", "spec": "hp_c2247a", "speedup": 2.0,
                                    "background": {"rate_per_s": 20.0, "size_bytes": 8192}})
    row = simulate_partition(_requests_table(), cfg).to_pylist()[0]
    span_s = float(_requests_table().column("ts_us")[-1].as_py()) / 2 / 1e6
    assert row["bg_requests"] == pytest.approx(20.0 * span_s, rel=0.1)
    assert row["requests"] == 2000


def test_scenario_spec_from_trace_geometry() -> None:
    geom = {"device": "0", "disk_type": "hp335h", "sector_size": 256, "sectors_per_track": 113,
            "tracks_per_cylinder": 8, "cylinders": 1449, "rpm": 4002, "head_switch_us": 1000,
            "overhead_us": 1100, "sector_skew": 12, "seek_params": [616, 3450, 597, 10840, 12, 2500],
            "block_size": 8192, "raw": {"bustype": "hp_ib"}}
    cfg = ScenarioConfig.from_dict({"scenario_id": "g", "spec": {"geometry": geom}})
    assert cfg.spec.capacity_sectors == 113 * 8 * 1449


@pytest.mark.parametrize(("data", "message"), [
    ({"scenario_id": "x"}, "'scenario_id' and 'spec' are required"),
    ({"scenario_id": "x", "spec": "hp_c2247a", "disk": 3}, r"unknown key\(s\) \['disk'\]"),
    ({"scenario_id": "x", "spec": "nope"}, "neither a shipped spec"),
    ({"scenario_id": "x", "spec": "hp_c2247a", "layout": {"kind": "striped"}}, "unit_sectors"),
    ({"scenario_id": "x", "spec": "hp_c2247a", "layout": {"kind": "mirrored"}}, "layout kind must be"),
    ({"scenario_id": "x", "spec": "hp_c2247a", "closed_loop": {"mpl": 2}}, "closed_loop must be"),
])
def test_bad_scenarios_are_refused(data: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        ScenarioConfig.from_dict(data)


def test_layouts_from_grid_entries() -> None:
    assert layout_from_dict({"kind": "striped", "unit_sectors": 16, "width": 2}) == Striped(16, 2)
    ext = layout_from_dict({"kind": "extents", "logical_sectors": 100, "extent_sectors": 30, "disks": 2,
                            "remaps": [{"time_us": 5.0, "extent": 1, "disk": 0, "physical_start": 500}]})
    assert isinstance(ext, ExtentMap)
    assert [e.disk for e in ext.extents] == [0, 1, 0, 1]
    assert ext.remaps[0].migrate


def test_sim_package_never_imports_pyspark_or_the_project_above_it() -> None:
    code = ("import importlib, pkgutil, sys; from blockheat import sim; "
            "[importlib.import_module(m.name) for m in pkgutil.walk_packages(sim.__path__, 'blockheat.sim.')]; "
            "assert {'blockheat.sim.scenarios', 'blockheat.sim.validate', 'blockheat.sim.warm', "
            "'blockheat.sim.alis.plan', 'blockheat.sim.alis.policy'} <= set(sys.modules); "
            "above = ('pyspark', 'py4j', 'blockheat.libs', 'blockheat.jobs', 'blockheat.schemas', 'blockheat.dags'); "
            "bad = [m for m in sys.modules if m.split('.')[0] in above or '.'.join(m.split('.')[:2]) in above]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_empty_partition_gives_a_row_of_zeros_and_nulls() -> None:
    cfg = ScenarioConfig.from_dict({"scenario_id": "empty", "spec": "hp_c2247a"})
    row = simulate_partition(_requests_table().slice(0, 0), cfg).to_pylist()[0]
    assert (row["requests"], row["physical_ios"], row["saturated"]) == (0, 0, False)
    assert row["mean_response_ms"] is None
    assert row["trace_id"] is None
