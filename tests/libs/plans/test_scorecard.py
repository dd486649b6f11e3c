"""The scorecard's pure parts: windows, the policy registry, the sweep's scenarios and the ranking."""
from __future__ import annotations

import math
import re

import pytest

from blockheat.libs.plans.policies import (
    FAMILIES,
    PENDING_FAMILIES,
    PolicyFamily,
    SweepOptions,
    families,
    register_family,
    size_label,
)
from blockheat.libs.plans.scorecard import Window, parse_window, rank_rows, score_rows, sweep_scenarios
from blockheat.libs.plans.types import PolicyError, Target, WindowStats
from blockheat.sim.cooling import CoolingConfig
from blockheat.sim.scenarios import ScenarioConfig
from blockheat.sim.specs import load

SPEC = load("hp_c2247a")


def test_windows_parse_and_name_themselves():
    assert parse_window("all", span_us=10_000_000) == Window("all", 0, 10_000_001)
    assert parse_window(None, span_us=5) == Window("all", 0, 6)
    assert parse_window("0:21600", span_us=1) == Window("0s-21600s", 0, 21_600_000_000)
    assert parse_window("1.5:", span_us=9_000_000) == Window("1.5s-end", 1_500_000, 9_000_001)
    with pytest.raises(PolicyError, match=r"window '5:1': the end must be after the start"):
        parse_window("5:1", span_us=10)
    with pytest.raises(PolicyError, match=r"window 'today': use 'all' or START:END in seconds"):
        parse_window("today", span_us=10)


def test_registry_lists_families_and_says_what_is_missing():
    assert list(FAMILIES) == ["as-traced", "striped", "random", "greedy", "incremental", "cooling", "alis",
                             "track-aligned"]
    assert [f.name for f in families(["cooling", "random"])] == ["as-traced", "cooling", "random"]
    assert PENDING_FAMILIES == {}            # every family the scorecard covers is scorable
    PENDING_FAMILIES["teleport"] = "no simulator support"
    try:
        with pytest.raises(PolicyError, match=re.escape("policy family 'teleport' is not available (no simulator "
                                                        "support); families: ['as-traced', ")):
            families(["teleport"])
    finally:
        del PENDING_FAMILIES["teleport"]
    with pytest.raises(PolicyError, match=r"policy family 'x': needs must be one of \[None, 'layout', 'moves', "
                                          r"'requests'\], got 'files'"):
        register_family(PolicyFamily("x", "x", lambda *a: [], needs="files"))
    with pytest.raises(PolicyError, match=r"policy family 'as-traced' is registered already"):
        register_family(PolicyFamily("as-traced", "again", lambda *a: []))
    assert (size_label(1 << 20), size_label(65536), size_label(1000)) == ("1MiB", "64KiB", "1000B")


def test_target_checks_sizes_against_the_disk():
    with pytest.raises(PolicyError, match=r"device\(s\) \['b'\] address more than the disk capacity of HP C2247A"):
        Target("t", ("a", "b"), (8, SPEC.capacity_sectors + 1), SPEC, "hp_c2247a")
    tgt = Target("t", ("a", "b"), (8, 8), SPEC, "hp_c2247a")
    with pytest.raises(PolicyError, match=r"extent_bytes 1000 must be a positive multiple of the spec's sector"):
        tgt.extent_sectors(1000)


def test_variants_and_their_scenarios():
    tgt = Target("t", ("a", "b"), (8, 6), SPEC, "hp_c2247a")
    stats = WindowStats(10.0, 50, 2048.0, {"a": 2048.0, "b": 2048.0})
    opts = SweepOptions(extent_bytes=(2048,), heat_fractions=(1.0,))
    variants = [v for f in families() for v in f.variants(tgt, stats, opts)]
    by_id = {v.policy_id: v for v in variants}
    assert by_id["greedy:2KiB,heat=1"].scenario == {"layout": {"kind": "extents", "extent_sectors": 4},
                                                      "policy": {"name": "greedy-allocation", "heat_fraction": 1.0}}
    # Cooling starts from today's layout in extents of 4 sectors (sim.scenarios.AsTracedExtents builds the map).
    assert by_id["cooling:2KiB"].scenario["layout"] == {"kind": "as_traced", "extent_sectors": 4}
    # Its demon every 100 s of trace time (FIVE 4.3's trace experiment), every 100 / speedup s of the replay.
    assert by_id["cooling:2KiB"].scenario["policy"] == {"name": "cooling", "every_s": 100.0, "delta": 0.05}
    assert by_id["cooling:2KiB"].params == {"extent_bytes": 2048, "every_s": 100.0, "delta": 0.05}
    assert {v.policy_id for v in variants if v.family == "striped"} == {
        "striped:five", "striped:five_phase_a", "striped:eq1", "striped:mpl_slope"}
    assert by_id["random"].plannable is False
    scenarios, scenario_of = sweep_scenarios(variants, tgt)
    assert scenarios[0] == ("as-traced", {"spec": "hp_c2247a", "scheduler": "clook", "speedup": 1.0, "seed": 1,
                                          "devices": ["a", "b"], "device_sectors": [8, 6],
                                          "layout": {"kind": "as_traced"}})
    assert len(scenarios) == len({s for s in scenario_of.values()})
    assert all(sid == scenario_of[sid] for sid, _ in scenarios)


def test_the_cooling_period_is_in_trace_time_or_in_arrivals():
    stats = WindowStats(10.0, 50, 2048.0, {"a": 2048.0, "b": 2048.0})
    fast = Target("t", ("a", "b"), (8, 6), SPEC, "hp_c2247a", speedup=4.0)
    (sped_up,) = families(["cooling"])[1].variants(fast, stats, SweepOptions(extent_bytes=(2048,), cooling_every_s=60))
    assert (sped_up.params["every_s"], sped_up.scenario["policy"]["every_s"]) == (60.0, 15.0)
    (by_arrivals,) = families(["cooling"])[1].variants(fast, stats, SweepOptions(extent_bytes=(2048,),
                                                                                 cooling_every_requests=100))
    assert by_arrivals.scenario["policy"] == {"name": "cooling", "every_requests": 100, "delta": 0.05}
    assert ScenarioConfig.from_dict({"scenario_id": "c", "spec": "hp_c2247a", **sped_up.scenario}).policy.config \
        == CoolingConfig(every_requests=None, every_s=15.0, delta=0.05)
    for bad, match in (({"cooling_every_s": 0.0}, r"cooling period must be a positive number of seconds, got 0.0"),
                       ({"cooling_every_s": math.inf}, r"positive number of seconds, got inf"),
                       ({"cooling_every_requests": 0}, r"cooling every N arrivals needs N > 0, got 0")):
        with pytest.raises(PolicyError, match=match):
            SweepOptions(**bad)


def result(mean, p95=10.0, saturated=False, spec="HP C2247A"):
    return {"spec": spec, "saturated": saturated, "mean_response_ms": mean, "p95_response_ms": p95,
            "p99_response_ms": p95, "mean_service_ms": 1.0, "mean_queue_ms": 0.0, "hottest_utilization": 0.5,
            "disk_utilization": [0.5, 0.25], "migration_mb": 0.0, "remaps": 0}


def test_ranking_puts_saturated_last_and_improvements_against_the_baseline():
    tgt = Target("t", ("a", "b"), (8, 6), SPEC, "hp_c2247a")
    variants = [v for f in families(["random", "greedy"]) for v in
                f.variants(tgt, WindowStats(1.0, 1, 512.0), SweepOptions(extent_bytes=(2048,), heat_fractions=(1.0,)))]
    _, scenario_of = sweep_scenarios(variants, tgt)
    results = {"as-traced": result(20.0, 40.0), "random": result(math.inf, math.inf, saturated=True),
               "greedy:2KiB,heat=1": result(15.0, 40.0)}
    rows = score_rows(variants, scenario_of, results, target=tgt, window=Window("all", 0, 1), window_requests=1,
                      grid_id="g", array_group="all")
    assert [(r["rank"], r["policy_id"], r["improvement_mean"], r["improvement_p95"]) for r in rows] == [
        (1, "greedy:2KiB,heat=1", 0.25, 0.0), (2, "as-traced", 0.0, 0.0), (3, "random", -math.inf, -math.inf)]
    assert rows[0]["utilization_max_over_mean"] == pytest.approx(0.5 / 0.375)
    saturated_base = score_rows(variants, scenario_of, {**results, "as-traced": result(math.inf, math.inf, True)},
                                target=tgt, window=Window("all", 0, 1), window_requests=1, grid_id="g",
                                array_group="all")
    assert [(r["policy_id"], r["improvement_mean"]) for r in saturated_base] == [
        ("greedy:2KiB,heat=1", None), ("as-traced", None), ("random", None)]
    assert [r["policy_id"] for r in rank_rows([{"saturated": False, "mean_response_ms": 1.0, "p95_response_ms": 2.0,
                                                "policy_id": "b"},
                                               {"saturated": False, "mean_response_ms": 1.0, "p95_response_ms": 2.0,
                                                "policy_id": "a"}])] == ["a", "b"]


def test_alis_is_scored_where_its_area_fits():
    from blockheat.sim.scenarios import ScenarioConfig

    alis = FAMILIES["alis"]
    stats, opts = WindowStats(3600.0, 100, 4096.0), SweepOptions()
    full = Target("t", ("a",), (SPEC.capacity_sectors - 10,), SPEC, "hp_c2247a")
    assert alis.why_not(full, stats, opts) == (
        f"a reorganized area of 15% of the storage used does not fit next to device(s) a "
        f"({SPEC.capacity_sectors - 10 + (SPEC.capacity_sectors - 10) * 15 // 100} sectors) on a disk of "
        f"{SPEC.capacity_sectors} sectors (HP C2247A); a larger disk spec (--spec) leaves room")
    roomy = Target("t", ("a", "b"), (1000, 800), SPEC, "hp_c2247a")
    assert alis.why_not(roomy, stats, opts) is None
    variants = alis.variants(roomy, stats, opts)
    assert [(v.policy_id, v.plannable, v.params["interval_s"]) for v in variants] == [
        ("alis:heat", True, 900.0), ("alis:run", True, 900.0), ("alis:combined", True, 900.0),
        ("alis:heat,area@1", True, 900.0), ("alis:run,area@1", True, 900.0), ("alis:combined,area@1", True, 900.0)]
    assert (alis.needs, alis.plan is not None) == ("requests", True)
    for sid, scenario in sweep_scenarios(variants, roomy)[0]:
        cfg = ScenarioConfig.from_dict({"scenario_id": sid, **scenario})
        assert (cfg.policy.params.mode, cfg.policy.params.interval_s) == (sid.split(":")[1].split(",")[0], 900.0)
    assert alis.why_not(roomy, WindowStats(2.0, 3, 512.0), opts) == (
        "the window is too short for reorganization intervals (a quarter of it is under a second)")


def test_track_alignment_variants_report_per_traced_request():
    from blockheat.sim.scenarios import ScenarioConfig
    from blockheat.sim.tracks import IoShaping

    tgt = Target("t", ("a", "b"), (1000, 800), SPEC, "hp_c2247a")
    variants = FAMILIES["track-aligned"].variants(tgt, WindowStats(10.0, 50, 2048.0), SweepOptions(track_units=(1, 4)))
    assert [(v.policy_id, v.params, v.plannable) for v in variants] == [
        ("track-aligned:1track", {"tracks": 1, "merge_gap_ms": 10.0}, True),
        ("track-aligned:4tracks", {"tracks": 4, "merge_gap_ms": 10.0}, True)]
    for sid, scenario in sweep_scenarios(variants, tgt)[0]:
        cfg = ScenarioConfig.from_dict({"scenario_id": sid, **scenario})
        assert cfg.io == IoShaping("track-aligned", tracks=int(sid.split(":")[1][0]), report="requests")
    with pytest.raises(PolicyError, match=r"track units must be whole numbers of tracks >= 1, got \[0\]"):
        SweepOptions(track_units=(0,))


def test_table_schemas_agree_and_validators_name_problems():
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from blockheat.schemas import policy_scores, reorg_plan_steps, reorg_plans

    for module in (policy_scores, reorg_plans, reorg_plan_steps):
        converted = to_arrow_schema(module.SPARK_SCHEMA, timezone="UTC")
        assert [(f.name, str(f.type), f.nullable) for f in converted] == \
               [(f.name, str(f.type), f.nullable) for f in module.ARROW_SCHEMA]
        assert tuple(module.SPARK_SCHEMA.fieldNames()) == module.COLUMNS
    assert str(reorg_plan_steps.ARROW_SCHEMA.field("depends_on").type) == "list<element: int64>"
    bad = pa.schema([f for f in reorg_plan_steps.ARROW_SCHEMA if f.name != "depends_on"]
                    + [pa.field("depends", pa.string())])
    with pytest.raises(reorg_plan_steps.ReorgPlanStepsSchemaError,
                       match=r"reorg_plan_steps: missing columns \['depends_on'\]; extra columns \['depends'\]"):
        reorg_plan_steps.validate_reorg_plan_steps(bad)
