"""`blockheat simulate` with the `alis` policy on the session's hplajw trace: the Spark stage plans and
redirects inside each partition and stores exactly what sim.scenarios gives when called directly."""
from __future__ import annotations

import json

from blockheat.libs.io.tables import read_table
from blockheat.libs.simulation.grid import load_grid
from blockheat.libs.simulation.stage import run
from blockheat.schemas import sim_results
from blockheat.sim.scenarios import ScenarioConfig, simulate_partition
from tests.conftest import HPLAJW_TRACE_ID


def test_the_simulate_stage_runs_alis_scenarios(spark, spark_cfg, hplajw, tmp_path) -> None:
    grid_path = tmp_path / "grid.json"
    grid_path.write_text(json.dumps({
        "grid_id": "alis", "traces": [HPLAJW_TRACE_ID], "base": {"spec": "hp_c2247a"},
        "sweep": {"policy": {"none": None, "runs": {"name": "alis", "mode": "run"}}}}))
    grid = load_grid(grid_path)
    run(spark, spark_cfg, grid)
    # By path, not by name: a table name stays bound to the warehouse that first registered it in
    # the session, which another test's private warehouse may have been.
    got = {r.scenario_id: r.asDict(recursive=True)
           for r in read_table(spark, spark_cfg.warehouse, "sim_results").where("grid_id = 'alis'").collect()}
    assert sorted(got) == ["policy=none", "policy=runs"]
    table = read_table(spark, spark_cfg.warehouse, "requests", HPLAJW_TRACE_ID).toArrow()
    for scenario in grid.scenarios:
        direct = simulate_partition(table, ScenarioConfig.from_dict({"scenario_id": scenario.scenario_id,
                                                                     **scenario.params})).to_pylist()[0]
        row = got[scenario.scenario_id]
        assert {k: row[k] for k in sim_results.RESULT_COLUMNS} == {k: direct[k] for k in sim_results.RESULT_COLUMNS}
    plain, runs = got["policy=none"], got["policy=runs"]
    # Each device its own volume and disk (as traced); the week's reads, fewer of them from the media.
    assert plain["reads"] == runs["reads"] == 13_040
    assert runs["physical_ios_read"] < plain["physical_ios_read"]
    assert runs["read_miss_ratio"] < plain["read_miss_ratio"]
