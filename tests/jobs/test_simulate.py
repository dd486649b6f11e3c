"""`blockheat simulate`: scenario grids, the Spark simulation stage and its tables.

Hand-built traces with analytic answers (constant service time), the Spark result against sim.scenarios called
directly on the same Arrow table, one scenario per partition, grid errors, and the real hplajw trace on the
disk spec built from its header."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from blockheat.jobs.cli.main import main
from blockheat.jobs.cli.output import human
from blockheat.libs.simulation.grid import GridError, load_grid, parse_grid, plan_parts
from blockheat.libs.simulation.stage import SimulationError, part_memory, run, simulate_parts, stage_requests
from blockheat.schemas import cooling_moves, sim_results, sim_timeseries
from blockheat.sim.scenarios import ScenarioConfig, simulate_partition, simulate_partition_with_timeseries
from blockheat.sim.specs import from_geometry
from tests.builders import ingest
from tests.conftest import HPLAJW_TRACE_ID

TICKS_PER_S = 10_000_000          # MSR timestamps are Windows filetime ticks (100 ns)
T0 = 128166372000000000
# (seconds, op, offset_bytes, size_bytes): two 8-sector requests arriving together (the read first by seq),
# then a 16-sector write and a read, each alone.
ANALYTIC = [(0, "Read", 0, 4096), (0, "Write", 4096, 4096), (1, "Write", 0, 8192), (2, "Read", 0, 4096)]
CONSTANT = {"spec": "hp_c2247a", "service": "constant", "constant_ms": 10}


@pytest.fixture(scope="module")
def analytic(spark, spark_cfg, tmp_path_factory):
    """The ANALYTIC trace, ingested as MSR (device fix_0)."""
    path = tmp_path_factory.mktemp("sim") / "fix_0.csv"
    path.write_text("".join(f"{T0 + s * TICKS_PER_S},fix,0,{op},{off},{size},100\n" for s, op, off, size in ANALYTIC))
    ingest(spark, spark_cfg, "msr", "sim-analytic", [path])
    return "sim-analytic"


def write_grid(tmp_path: Path, grid: dict, name: str = "grid.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(grid))
    return path


def results_of(spark, grid_id: str) -> dict[str, dict]:
    rows = spark.sql(f"SELECT * FROM sim_results WHERE grid_id = '{grid_id}'").collect()
    return {r.scenario_id: r.asDict(recursive=True) for r in rows}


def test_schemas_arrow_matches_spark():
    for module in (sim_results, sim_timeseries, cooling_moves):
        converted = to_arrow_schema(module.SPARK_SCHEMA, timezone="UTC")
        assert [(f.name, f.type, f.nullable) for f in converted] == \
               [(f.name, f.type, f.nullable) for f in module.ARROW_SCHEMA]
    assert sim_results.COLUMNS[:4] == sim_results.KEY_COLUMNS
    assert {"mean_response_ms", "disk_utilization"} <= set(sim_results.COLUMNS)
    assert cooling_moves.COLUMNS[:4] == cooling_moves.KEY_COLUMNS == sim_results.KEY_COLUMNS


def test_grid_expands_scenarios_times_sweep(tmp_path):
    grid = parse_grid({
        "traces": ["t"], "base": {"spec": "hp_c2247a", "scheduler": "clook"},
        "scenarios": [{"scenario_id": "one", "disks": 1},
                      {"scenario_id": "two", "disks": 2, "layout": {"kind": "striped", "unit_sectors": 8}}],
        "sweep": {"speedup": [1, 2.5]},
    }, source="g.json", default_id="g")
    got = [(s.scenario_id, s.layout_label, dict(s.params)) for s in grid.scenarios]
    striped = {"kind": "striped", "unit_sectors": 8}
    assert got == [
        ("one,speedup=1", "as_traced", {"spec": "hp_c2247a", "scheduler": "clook", "disks": 1, "speedup": 1}),
        ("one,speedup=2.5", "as_traced", {"spec": "hp_c2247a", "scheduler": "clook", "disks": 1, "speedup": 2.5}),
        ("two,speedup=1", "striped(unit_sectors=8)",
         {"spec": "hp_c2247a", "scheduler": "clook", "disks": 2, "layout": striped, "speedup": 1}),
        ("two,speedup=2.5", "striped(unit_sectors=8)",
         {"spec": "hp_c2247a", "scheduler": "clook", "disks": 2, "layout": striped, "speedup": 2.5}),
    ]
    assert grid.grid_id == "g"
    labelled = parse_grid({"traces": ["t"], "base": {"spec": "hp_c2247a"},
                           "sweep": {"layout": {"wide": {"kind": "striped", "unit_sectors": 64}, "raid0": striped}}},
                          source="g.json", default_id="g")
    assert [(s.scenario_id, s.layout_label) for s in labelled.scenarios] == \
           [("layout=wide", "wide"), ("layout=raid0", "raid0")]


@pytest.mark.parametrize(("grid", "message"), [
    ({"traces": ["t"], "base": {"spec": "hp_c2247a"}, "scenarios": [{"scenario_id": "a", "layuot": {}}]},
     r"grid\.json: scenario 'a': scenario: unknown key\(s\) \['layuot'\]"),
    ({"traces": ["t"], "base": {"spec": "hp_c2247a"}, "sweeps": {"speedup": [1]}},
     r"grid\.json: unknown key\(s\) \['sweeps'\]; allowed: \['grid_id', "),
    ({"traces": ["t"], "base": {"spec": "from-trace"}, "sweep": {"speedup": [1, -2]}},
     r"grid\.json: scenario 'speedup=-2': speedup must be a positive number, got -2"),
    ({"traces": ["t"], "base": {"spec": "hp_c2247a", "layout": {"kind": "striped"}}},
     r"grid\.json: scenario 'base': layout \{'kind': 'striped'\}: "),
    ({"traces": ["t"], "base": {"spec": "no_such_disk"}},
     r"grid\.json: scenario 'base': spec 'no_such_disk' is neither a shipped spec"),
    ({"traces": "t", "base": {"spec": "hp_c2247a"}}, r"grid\.json: traces: must be a non-empty list"),
    ({"traces": ["t"], "array_groups": [["0"], ["0", "1"]], "base": {"spec": "hp_c2247a"}},
     r"grid\.json: array_groups: a device is in two groups"),
    ({"traces": ["t"], "base": {"spec": "hp_c2247a"}, "sweep": {"layout": [{"unit_sectors": 8}]}},
     r"grid\.json: sweep\.layout\[0\]: \{'unit_sectors': 8\} has no label"),
    ({"traces": ["t"], "base": {"spec": "hp_c2247a"}, "scenarios": [{"scenario_id": "x", "speedup": 2}],
      "sweep": {"speedup": [1]}}, r"grid\.json: scenarios\[0\]: sets \['speedup'\], which a sweep also varies"),
    ({"traces": ["t"], "base": {"spec": "hp_c2247a", "layout": {"kind": "extents", "extent_sectors": 64}},
      "sweep": {"policy": [None, {"name": "cooling", "treshold": 0.1}]}},
     r"grid\.json: scenario 'policy=cooling': policy 'cooling': unknown parameter\(s\) \['treshold'\]; allowed: "),
    ({"traces": ["t"], "base": {"spec": "hp_c2247a"}, "scenarios": [{"scenario_id": "g", "policy": {"name": "ga"}}]},
     r"grid\.json: scenario 'g': policy: name must be one of \['cooling', 'greedy-allocation', "
     r"'incremental-greedy', 'alis'\], got 'ga'"),
    ({"traces": ["t"], "base": {"spec": "hp_c2247a", "policy": {"name": "cooling"}}},
     r"grid\.json: scenario 'base': policy 'cooling' moves extents: it needs layout kind 'extents'"),
])
def test_grid_errors_name_file_and_key(tmp_path, grid, message):
    with pytest.raises(GridError, match=message):
        load_grid(write_grid(tmp_path, grid))


def test_plan_checks_groups_and_trace_geometry():
    grid = parse_grid({"traces": [{"trace_id": "t", "array_groups": [["b"], ["a"]]}],
                       "base": {"spec": "from-trace"}}, source="g.json", default_id="g")
    no_geometry = {"t": {"devices": ["a", "b"], "geometry": []}}
    with pytest.raises(GridError, match=r"g\.json: scenario 'base' on trace 't', array group 'b': spec 'from-trace' "
                                        r"needs the trace's recorded geometry, but there is none for device\(s\) "
                                        r"\['b'\]"):
        plan_parts(grid, no_geometry)
    bad_group = parse_grid({"traces": [{"trace_id": "t", "array_groups": [["c"]]}], "base": {"spec": "hp_c2247a"}},
                           source="g.json", default_id="g")
    with pytest.raises(GridError, match=r"traces\[0\]\.array_groups: device\(s\) \['c'\] are not in trace 't'"):
        plan_parts(bad_group, no_geometry)
    wide = parse_grid({"traces": ["t"], "base": {"spec": "hp_c2247a", "layout": {"kind": "striped", "unit_sectors": 8,
                                                                                  "width": 3}}},
                      source="g.json", default_id="g")
    with pytest.raises(GridError, match=r"array group 'all': stripe width 3 and first_disk 0 must fit in 2 disks"):
        plan_parts(wide, no_geometry)


def test_partitions_start_heaviest_first():
    from blockheat.libs.simulation.stage import longest_first

    grid = parse_grid({"traces": ["small", "big"], "base": {"spec": "hp_c2247a", "device_sectors": [4096, 4096]},
                       "scenarios": [
                           {"scenario_id": "plain"},
                           {"scenario_id": "striped", "layout": {"kind": "striped", "unit_sectors": 8}},
                           {"scenario_id": "cooling", "layout": {"kind": "extents", "extent_sectors": 512},
                            "policy": {"name": "cooling"}},
                           {"scenario_id": "greedy", "policy": {"name": "greedy-allocation", "extent_sectors": 512}},
                           {"scenario_id": "timed", "layout": {"kind": "extents", "extent_sectors": 512},
                            "policy": {"name": "cooling", "every_s": 100.0}}]},
                      source="g.json", default_id="g")
    catalog = {"small": {"devices": ["a", "b"], "geometry": [], "records_accepted": 1_000},
               "big": {"devices": ["a", "b"], "geometry": [], "records_accepted": 5_000}}
    order = [(p.trace_id, p.scenario_id) for p in longest_first(plan_parts(grid, catalog), catalog)]
    # Requests x 6.1 (cooling every 100 arrivals), 1.5 (cooling every 100 s: its demon calls per second of trace,
    # not per request), 1.45 (striped), 1.4 (greedy), 1 (plain): 30,500, 7,500, 7,250, 7,000, 6,100, 5,000, ...
    assert order == [("big", "cooling"), ("big", "timed"), ("big", "striped"), ("big", "greedy"), ("small", "cooling"),
                     ("big", "plain"), ("small", "timed"), ("small", "striped"), ("small", "greedy"),
                     ("small", "plain")]


def test_cli_rejects_a_bad_grid_in_one_line(tmp_path, capsys):
    path = write_grid(tmp_path, {"traces": ["t"], "base": {"spec": "hp_c2247a", "schedular": "sstf"}})
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"blockheat: error: {path}: scenario 'base': scenario: unknown key(s) ['schedular']; allowed: "
                   "['background', 'closed_loop', 'constant_ms', 'device_sectors', 'devices', 'disks', "
                   "'exponential_ms', 'interval_ms', 'io', 'layout', 'max_outstanding', 'per_request', 'policy', "
                   "'scenario_id', 'scheduler', 'seed', 'service', 'spec', 'speedup', 'spindles', 'zero_latency']\n")


@pytest.fixture(scope="module")
def analytic_run(spark, spark_cfg, analytic, tmp_path_factory):
    """One run of a grid over the ANALYTIC trace: two constant-service scenarios with analytic answers and
    four on the detailed model (two layouts x two array sizes) to compare with sim.scenarios called directly."""
    grid = load_grid(write_grid(tmp_path_factory.mktemp("grid"), {
        "grid_id": "analytic", "traces": [analytic],
        "scenarios": [{"scenario_id": "one-disk", **CONSTANT, "disks": 1},
                      {"scenario_id": "striped", **CONSTANT, "disks": 2,
                       "layout": {"kind": "striped", "unit_sectors": 8}},
                      {"scenario_id": "detailed", "spec": "hp_c2247a", "interval_ms": 500, "seed": 7,
                       "sweep": {"layout": {"traced": {"kind": "as_traced"}, "random": {"kind": "random"}},
                                 "disks": [2, 3]}}],
    }))
    return grid, run(spark, spark_cfg, grid)


def test_simulate_constant_service_is_analytic(spark, analytic, analytic_run):
    _, summary = analytic_run
    by_id = {r["scenario_id"]: r for r in summary.results}
    assert [(r["scenario_id"], r["layout"], r["requests"], r["mean_response_ms"], r["saturated"])
            for r in summary.results[:2]] == [("one-disk", "as_traced", 4, 12.5, False),
                                          ("striped", "striped(unit_sectors=8)", 4, 10.0, False)]
    got = results_of(spark, "analytic")
    # One disk, FCFS, 10 ms each: the read (first by seq) 10 ms, the write queued behind it 20 ms, the rest 10 ms.
    one = got["one-disk"]
    assert (one["mean_response_ms_read"], one["mean_response_ms_write"], one["max_response_ms"]) == (10.0, 15.0, 20.0)
    assert (one["mean_queue_ms"], one["physical_ios"], one["disk_physical_ios"]) == (2.5, 4, [4])
    # Striped over two disks in 8-sector units: the first two go to different disks, the 16-sector write splits
    # into one part per disk served in parallel: every response is exactly the 10 ms service time.
    striped = got["striped"]
    assert (striped["max_response_ms"], striped["mean_queue_ms"]) == (10.0, 0.0)
    assert (striped["physical_ios"], striped["disk_physical_ios"], striped["mean_service_ms"]) == (5, [3, 2], 12.5)
    assert (striped["trace_id"], striped["array_group"], striped["devices"], striped["spec"], striped["speedup"]) == \
           (analytic, "all", ["fix_0"], "HP C2247A", 1.0)
    assert json.loads(striped["scenario_json"]) == {"scenario_id": "striped", **CONSTANT, "disks": 2,
                                                    "layout": {"kind": "striped", "unit_sectors": 8}}
    assert by_id.keys() == got.keys()


def test_spark_result_equals_direct_call_one_part_per_partition(spark, spark_cfg, analytic, analytic_run):
    grid, _ = analytic_run
    table = spark.sql(f"SELECT * FROM requests WHERE trace_id = '{analytic}'").toArrow()
    table = table.take(pa.array(range(table.num_rows - 1, -1, -1)))       # any order: the glue sorts
    got = results_of(spark, "analytic")
    assert sorted(got) == ["detailed,layout=random,disks=2", "detailed,layout=random,disks=3",
                           "detailed,layout=traced,disks=2", "detailed,layout=traced,disks=3", "one-disk", "striped"]
    names = sim_timeseries.INTERVAL_SCHEMA.names
    for scenario in grid.scenarios:
        cfg = ScenarioConfig.from_dict({"scenario_id": scenario.scenario_id, **scenario.params})
        direct = simulate_partition(table, cfg).to_pylist()[0]
        row = got[scenario.scenario_id]
        assert {k: row[k] for k in sim_results.RESULT_COLUMNS} == {k: direct[k] for k in sim_results.RESULT_COLUMNS}
        _, series = simulate_partition_with_timeseries(table, cfg)
        stored = spark.sql(f"SELECT * FROM sim_timeseries WHERE grid_id = 'analytic' AND scenario_id = "
                           f"'{scenario.scenario_id}' ORDER BY interval").collect()
        assert [tuple(r[n] for n in names) for r in stored] == [tuple(r[n] for n in names) for r in series.to_pylist()]
    random3, traced3 = got["detailed,layout=random,disks=3"], got["detailed,layout=traced,disks=3"]
    assert random3["disk_physical_ios"] != traced3["disk_physical_ios"]
    assert len(stored) == 5                                   # 2.01 s in 500 ms intervals

    parts = plan_parts(grid, {analytic: {"devices": ["fix_0"], "geometry": []}})
    with tempfile.TemporaryDirectory(dir=spark_cfg.warehouse) as scratch:
        staged = stage_requests(spark.sql("SELECT * FROM requests"), scratch)
        assert sum(pq.read_metadata(f).num_rows for f in staged[(analytic, "fix_0")]) == 4
        located = simulate_parts(spark, staged, parts)
        # Memory for one part at a time: one lane converts the 4 requests once and simulates every part in turn.
        one_lane = simulate_parts(spark, staged, parts, memory_bytes=max(part_memory(p, 4) for p in parts))
        # Two lanes taking parts from one queue; part 2 was claimed by a lane whose task failed: run again after.
        claims = Path(scratch) / "claims"
        claims.mkdir()
        (claims / "2").touch()
        queued = simulate_parts(spark, staged, parts, claims=str(claims), lane_min_requests=0)
        assert sorted(int(f.name) for f in claims.iterdir()) == list(range(len(parts)))
    assert located.column("scenario_id").to_pylist() == [p.scenario_id for p in parts]   # in the parts' order
    assert set(located.column("requests").to_pylist()) == {4}       # each had exactly its own trace's requests
    assert one_lane.drop_columns(["wall_s"]).equals(located.drop_columns(["wall_s"]))
    assert queued.drop_columns(["wall_s"]).equals(located.drop_columns(["wall_s"]))


def test_a_spilled_replay_streams_in_chunks_and_equals_the_whole_one(spark, spark_cfg, hplajw):
    # hplajw's second day, both disks in one group, from the requests table's own files: with every part over the
    # stream threshold, the lanes convert the day in spans of about 97 requests into a spill and replay it 97 at a
    # time (ALIS planned in two passes over the chunks and redirected chunk by chunk); every figure, time series and
    # cooling move equals the whole replay's (mean responses to 1e-12: they are summed chunk by chunk).
    from blockheat.libs.io.tables import trace_info
    from blockheat.libs.simulation.stage import OUTPUT_ARROW_SCHEMA, table_files

    day = (86_400_000_000, 2 * 86_400_000_000)
    extents = {"disks": 3, "layout": {"kind": "extents", "extent_sectors": 2048}}
    grid = parse_grid({"grid_id": "spill", "traces": [HPLAJW_TRACE_ID], "array_groups": "all",
                       "base": {"spec": "hp_c2247a", "scheduler": "clook", "disks": 2, "speedup": 50.0,
                                "interval_ms": 60_000.0},
                       "scenarios": [{"scenario_id": "traced"},
                                     {"scenario_id": "striped", "layout": {"kind": "striped", "unit_sectors": 64}},
                                     {"scenario_id": "cooling", **extents, "speedup": 400.0,
                                      "policy": {"name": "cooling", "every_s": 0.5, "delta": 0.01}},
                                     {"scenario_id": "greedy", **extents,
                                      "policy": {"name": "greedy-allocation", "heat_fraction": 0.5}},
                                     {"scenario_id": "track", "io": {"kind": "track-aligned", "tracks": 1,
                                                                     "report": "requests"}},
                                     {"scenario_id": "alis", "policy": {"name": "alis", "interval_s": 21_600.0}}]},
                      source="test")
    parts = plan_parts(grid, {HPLAJW_TRACE_ID: trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)})
    files = table_files(spark, spark_cfg.warehouse, [HPLAJW_TRACE_ID], None)
    whole = simulate_parts(spark, files, parts, by_device=True, window_us=day)
    spilled = simulate_parts(spark, files, parts, by_device=True, window_us=day, stream_min_requests=0,
                             spill_rows=97)
    means = [f.name for f in OUTPUT_ARROW_SCHEMA if f.name.startswith("mean_response_ms")]
    keep = [n for n in whole.column_names if n not in ("wall_s", *means)]
    assert spilled.select(keep).equals(whole.select(keep))
    for name in means:
        for a, b in zip(whole.column(name).to_pylist(), spilled.column(name).to_pylist(), strict=True):
            assert b == pytest.approx(a, rel=1e-12)
    by_id = dict(zip(whole.column("scenario_id").to_pylist(), whole.to_pylist(), strict=True))
    assert len(by_id["cooling"]["cooling_moves"]) == 1
    assert by_id["alis"]["mean_response_ms"] < by_id["traced"]["mean_response_ms"]    # reads served from the areas
    assert {s: r["requests"] for s, r in by_id.items()} == dict.fromkeys(by_id, 653)   # the day's requests, 7 chunks


def test_lanes_claim_each_part_once_heaviest_first_keeping_their_requests(tmp_path):
    from blockheat.libs.simulation.stage import _Queue, claimed_parts

    # Queue order 3, 0, 1, 2, 4 (heaviest first); parts 1 and 3 replay requests "b", the others "a".
    queue = _Queue(str(tmp_path), [3, 0, 1, 2, 4], ["a", "b", "a", "b", "a"])
    (tmp_path / "0").touch()                               # claimed by a lane that failed since
    held = {"x": None, "y": None}
    x, y = (claimed_parts(queue, lambda lane=lane: held[lane]) for lane in ("x", "y"))
    assert next(x) == 3                                     # the heaviest
    held["x"] = "b"
    assert next(y) == 1                                     # 0 is taken: the next in queue order
    held["y"] = "a"
    assert next(y) == 2                                     # y holds "a": 2 before 4
    assert next(x) == 4                                     # no "b" left: the first part left
    assert next(x, None) is None
    assert next(y, None) is None
    assert sorted(f.name for f in tmp_path.iterdir()) == ["0", "1", "2", "3", "4"]


def test_memory_bounds_the_parts_simulating_at_once():
    from blockheat.libs.simulation.grid import Part
    from blockheat.libs.simulation.spill import SPAN_REQUESTS
    from blockheat.libs.simulation.stage import (
        LANE_HELD_BYTES,
        LANE_LOAD_BYTES,
        PART_EXTRA_BYTES,
        lane_assignment,
        lanes_for,
    )
    from blockheat.sim.scenarios import ScenarioConfig

    def part(**scenario) -> Part:
        cfg = ScenarioConfig.from_dict({"scenario_id": "s", "spec": "hp_c2247a", **scenario})
        return Part("t", "all", ("d0",), "s", cfg, "as_traced", "{}")

    plain, cooling = part(), part(layout={"kind": "extents", "extent_sectors": 64}, policy={"name": "cooling"})
    timed = part(layout={"kind": "extents", "extent_sectors": 64}, policy={"name": "cooling", "every_s": 100.0})
    assert part_memory(timed, 1000) == part_memory(cooling, 1000)
    aligned = part(io={"kind": "track-aligned"})
    assert part_memory(plain, 1000) == 1000 * (LANE_HELD_BYTES + PART_EXTRA_BYTES["other"])
    assert part_memory(cooling, 1000) == 1000 * (LANE_HELD_BYTES + PART_EXTRA_BYTES["cooling"])
    assert part_memory(aligned, 1000) == 1000 * (LANE_HELD_BYTES + PART_EXTRA_BYTES["io"])
    assert LANE_HELD_BYTES + min(PART_EXTRA_BYTES.values()) >= LANE_LOAD_BYTES   # the simulation's peak is the larger
    per_part = part_memory(plain, 10_000_000)
    assert lanes_for([per_part] * 8, 2, 2 * per_part) == 2
    assert lanes_for([per_part] * 8, 2, 2 * per_part - 1) == 1
    assert lanes_for([per_part, 1_000], 4, 10 * per_part) == 2               # no more lanes than parts
    assert lanes_for([100], 2, 0) == 1                                        # always one
    # The two largest decide: a track-aligned part and a cooling part of 100 M requests fit 75% of 24 GB together.
    big = [part_memory(p, 100_000_000) for p in (aligned, cooling, plain)]
    assert lanes_for(big, 2, int(0.75 * 24 * 2**30)) == 2
    assert lanes_for(big, 2, big[0] + big[1] - 1) == 1
    # Streamed from the spill, a part holds a span, but a closed loop with background traffic may hold its window.
    closed_bg = part(closed_loop={"outstanding": 4, "think_ms": 0.0}, background={"rate_per_s": 5.0})
    assert part_memory(plain, 100_000_000) == SPAN_REQUESTS * (LANE_HELD_BYTES + PART_EXTRA_BYTES["other"])
    assert part_memory(closed_bg, 100_000_000) == 100_000_000 * (LANE_HELD_BYTES + PART_EXTRA_BYTES["other"])
    # Heaviest first, each to the least-loaded lane (ties: the first): 8 | 5, 4 -> 9 | 3 -> 11 | 2 -> 11
    assert lane_assignment([8.0, 5.0, 4.0, 3.0, 2.0], 2) == [[0, 3], [1, 2, 4]]


def test_rerun_replaces_the_grid(spark, spark_cfg, analytic, tmp_path):
    def grid(scenarios):
        return load_grid(write_grid(tmp_path, {"grid_id": "rerun", "traces": [analytic],
                                               "base": {**CONSTANT, "interval_ms": 1000}, "scenarios": scenarios}))

    run(spark, spark_cfg, grid([{"scenario_id": "a"}, {"scenario_id": "b", "constant_ms": 4}]))
    run(spark, spark_cfg, grid([{"scenario_id": "b", "constant_ms": 5}]))
    assert {k: v["max_response_ms"] for k, v in results_of(spark, "rerun").items()} == {"b": 10.0}  # 5 ms, queued
    series = spark.sql("SELECT scenario_id, count(*) AS n FROM sim_timeseries WHERE grid_id = 'rerun' "
                       "GROUP BY scenario_id").collect()
    assert [(r.scenario_id, r.n) for r in series] == [("b", 3)]


def test_an_executor_failure_names_its_partition(spark, spark_cfg, analytic, tmp_path):
    grid = load_grid(write_grid(tmp_path, {
        "grid_id": "fails", "traces": [analytic],
        "base": {"spec": "hp_c2247a", "layout": {"kind": "extents", "logical_sectors": 8, "extent_sectors": 8,
                                                 "disks": 1}}}))
    with pytest.raises(SimulationError, match=r"^trace 'sim-analytic', array group 'all', scenario 'base': ValueError: "
                                              r"extent map covers 8 logical sectors, the workload addresses 16$"):
        run(spark, spark_cfg, grid)


def test_simulate_hplajw_on_the_header_spec(spark, spark_cfg, hplajw, tmp_path, capsys):
    path = write_grid(tmp_path, {
        "grid_id": "hplajw", "traces": [HPLAJW_TRACE_ID], "array_groups": "per-device",
        "base": {"spec": "from-trace", "scheduler": "clook", "interval_ms": 3_600_000},
        "sweep": {"speedup": [1, 4]},
    })
    assert main(["simulate", str(path)]) == 0
    out = capsys.readouterr().out
    got = {(r.array_group, r.scenario_id): r.asDict(recursive=True)
           for r in spark.sql("SELECT * FROM sim_results WHERE grid_id = 'hplajw'").collect()}
    assert sorted(got) == [("0", "speedup=1"), ("0", "speedup=4"), ("1", "speedup=1"), ("1", "speedup=4")]
    geometry = {g["device"]: g for g in spark.sql(f"SELECT geometry FROM traces WHERE trace_id = '{HPLAJW_TRACE_ID}'")
                .first().asDict(recursive=True)["geometry"]}
    device0 = spark.sql(f"SELECT * FROM requests WHERE trace_id = '{HPLAJW_TRACE_ID}' AND device = '0'").toArrow()
    direct = simulate_partition(device0, ScenarioConfig(
        "direct", from_geometry(geometry["0"]), scheduler="clook")).to_pylist()[0]
    row = got[("0", "speedup=1")]
    assert row["spec"] == "hp335h (device 0, from trace geometry)"
    assert (row["requests"], row["mean_response_ms"]) == (direct["requests"], direct["mean_response_ms"])
    # Pinned (python -m pytest ... -k hplajw shows the figures when they move): the response times include the
    # queueing of the week's bursts; the service time is the access time sim/README.md reports for validate_srt.
    assert (row["requests"], round(row["mean_response_ms"], 2), round(row["mean_service_ms"], 2)) == \
           (42_252, 95.77, 21.53)
    assert (got[("1", "speedup=1")]["requests"], round(got[("1", "speedup=1")]["mean_response_ms"], 2)) == \
           (2_267, 16.61)
    assert got[("0", "speedup=4")]["mean_response_ms"] > row["mean_response_ms"]     # four times the load
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["trace", "group", "scenario", "layout", "alpha", "requests", "mean_ms", "p95_ms", "max_util",
                        "saturated"]
    assert lines[2] == [HPLAJW_TRACE_ID, "0", "speedup=1", "as_traced", "1", "42,252",
                        *human(row["mean_response_ms"], "ms").split(), *human(row["p95_response_ms"], "ms").split(),
                        human(row["hottest_utilization"]), "false"]
    assert spark.sql("SELECT count(*) FROM sim_timeseries WHERE grid_id = 'hplajw' AND array_group = '0' AND "
                     "scenario_id = 'speedup=1'").first()[0] == 168          # a week of one-hour intervals


@pytest.fixture(scope="module")
def alternating(spark, spark_cfg, tmp_path_factory):
    """40 one-block reads every 100 ms alternating between bytes 0 and 8192 (extents 0 and 2 of 4 KB)."""
    path = tmp_path_factory.mktemp("sim") / "alt_0.csv"
    path.write_text("".join(f"{T0 + i * TICKS_PER_S // 10},alt,0,Read,{0 if i % 2 == 0 else 8192},4096,100\n"
                            for i in range(40)))
    ingest(spark, spark_cfg, "msr", "sim-alternating", [path])
    return "sim-alternating"


def test_policies_run_in_the_partition_and_cooling_moves_are_stored(spark, spark_cfg, alternating, tmp_path):
    def grid(policies):
        return load_grid(write_grid(tmp_path, {
            "grid_id": "policies", "traces": [alternating],
            "base": {**CONSTANT, "disks": 2, "device_sectors": [32],
                     "layout": {"kind": "extents", "extent_sectors": 8}},
            "sweep": {"policy": policies}}))

    cooling = {"name": "cooling", "every_requests": 10}
    summary = run(spark, spark_cfg, grid([None, {"name": "greedy-allocation"}, cooling]))
    got = results_of(spark, "policies")
    # Round robin: extents 0 and 2 both on disk 0. Greedy (equal heats 0 and 2 first): 0 -> disk 0, 2 -> disk 1.
    # Cooling (tests/sim/test_scenarios_policy.py works it out): extent 0 moves to disk 1 at the 10th arrival, its
    # copy a read on disk 0 and a write on disk 1.
    assert {k: (v["disk_physical_ios"], v["remaps"]) for k, v in got.items()} == {
        "policy=none": ([40, 0], 0), "policy=greedy-allocation": ([20, 20], 0), "policy=cooling": ([26, 16], 1)}
    assert json.loads(got["policy=cooling"]["scenario_json"])["policy"] == cooling
    assert summary.cooling_moves == 1
    moves = [r.asDict() for r in spark.sql("SELECT * FROM cooling_moves WHERE grid_id = 'policies'").collect()]
    assert [(m["trace_id"], m["array_group"], m["scenario_id"], m["unit"], m["from_disk"], m["to_disk"],
             m["to_physical_start"], m["bytes"], m["time_us"]) for m in moves] == \
           [(alternating, "all", "policy=cooling", 0, 0, 1, 16, 4096, 900_000.0)]
    run(spark, spark_cfg, grid([None]))                        # a rerun without cooling clears the grid's moves
    assert spark.sql("SELECT count(*) FROM cooling_moves WHERE grid_id = 'policies'").first()[0] == 0


def test_the_table_files_replay_equals_the_staged_one(spark, spark_cfg, hplajw, caplog):
    # hplajw's second day, both disks in one group: replayed from the requests table's own files (the lanes read
    # them, no staging) and from a staged DataFrame of the same rows, the results are the same; at a version the
    # table has moved past, the files are not used (run() stages the DataFrame instead).
    from pyspark.sql import functions as F

    from blockheat.libs.io.table_versions import table_version
    from blockheat.libs.io.tables import read_table
    from blockheat.libs.simulation.stage import TableFiles, table_files

    day = (86_400_000_000, 2 * 86_400_000_000)
    grid = parse_grid({"grid_id": "files", "traces": [HPLAJW_TRACE_ID], "array_groups": "all",
                       "base": {"spec": "hp_c2247a", "scheduler": "clook", "disks": 2},
                       "scenarios": [{"scenario_id": "traced"}, {"scenario_id": "striped",
                                                                 "layout": {"kind": "striped", "unit_sectors": 64}}]},
                      source="test")
    requests = read_table(spark, spark_cfg.warehouse, "requests", HPLAJW_TRACE_ID)
    windowed = requests.where((F.col("ts_us") >= day[0]) & (F.col("ts_us") < day[1]))
    version = table_version(spark_cfg.warehouse, "requests")

    def results() -> list[dict]:
        rows = spark.sql("SELECT * FROM sim_results WHERE grid_id = 'files' ORDER BY scenario_id").collect()
        return [{k: v for k, v in r.asDict(recursive=True).items() if k != "wall_s"} for r in rows]

    with caplog.at_level("INFO", logger="blockheat.libs.simulation.stage"):
        run(spark, spark_cfg, grid, requests=windowed, files=TableFiles(version, day))
        assert "staged" not in caplog.text
        from_files = results()
        run(spark, spark_cfg, grid, requests=windowed)
        assert results() == from_files
        assert table_files(spark, spark_cfg.warehouse, [HPLAJW_TRACE_ID], version - 1) is None   # staged instead
        assert f"the requests are staged (the table is at version {version}, not {version - 1})" in caplog.text
    assert [r["requests"] for r in from_files] == [windowed.count()] * 2
    assert 0 < from_files[0]["requests"] < requests.count()
