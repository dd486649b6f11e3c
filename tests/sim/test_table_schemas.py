"""The simulator's output and the tables that store it agree column for column (names, types, nullability):
schemas/ defines each table once as its contract, sim returns its own rows, and these tests keep the two from
drifting apart (libs/simulation/stage.py copies the columns by name into the tables)."""
from __future__ import annotations

import pyarrow as pa

from blockheat.schemas import cooling_moves, sim_results, sim_timeseries
from blockheat.sim.cooling import COOLING_MOVES_SCHEMA
from blockheat.sim.glue import (
    SIM_COOLING_MOVES_SCHEMA,
    SIM_RESULT_SCHEMA,
    SIM_TIMESERIES_SCHEMA,
    ScenarioConfig,
    simulate_scenario,
)
from blockheat.sim.stats import RESULT_SCHEMA, TIMESERIES_SCHEMA

GLUE_KEYS = ["scenario_id", "trace_id"]       # the glue's keys in front of every row; the job sets its own
TABLE_KEYS = ("grid_id", "trace_id", "array_group", "scenario_id")


def columns(schema: pa.Schema) -> list[tuple[str, pa.DataType, bool]]:
    return [(f.name, f.type, f.nullable) for f in schema]


def test_the_result_row_is_sim_results_result_columns() -> None:
    assert SIM_RESULT_SCHEMA.names[:2] == GLUE_KEYS
    assert columns(SIM_RESULT_SCHEMA)[2:] == columns(sim_results.RESULT_SCHEMA)
    assert columns(RESULT_SCHEMA) == columns(sim_results.RESULT_SCHEMA)[1:]          # after the devices
    assert sim_results.COLUMNS[:4] == TABLE_KEYS
    assert sim_results.COLUMNS[-len(sim_results.RESULT_COLUMNS):] == sim_results.RESULT_COLUMNS


def test_the_time_series_is_sim_timeseries_interval_columns() -> None:
    assert SIM_TIMESERIES_SCHEMA.names[:2] == GLUE_KEYS
    assert columns(SIM_TIMESERIES_SCHEMA)[2:] == columns(TIMESERIES_SCHEMA) == columns(sim_timeseries.INTERVAL_SCHEMA)
    assert (*TABLE_KEYS, *sim_timeseries.INTERVAL_SCHEMA.names) == sim_timeseries.COLUMNS


def test_the_moves_are_cooling_moves_move_columns() -> None:
    assert SIM_COOLING_MOVES_SCHEMA.names[:2] == GLUE_KEYS
    assert columns(SIM_COOLING_MOVES_SCHEMA)[2:] == columns(COOLING_MOVES_SCHEMA) == columns(cooling_moves.MOVE_SCHEMA)
    assert (*TABLE_KEYS, *cooling_moves.MOVE_SCHEMA.names) == cooling_moves.COLUMNS


def test_a_scenarios_output_has_the_tables_columns() -> None:
    # Reads alternating between two extents of disk 0 every 100 ms: the cooling policy moves one of them
    # (tests/sim/test_glue_policy.py works it out), and the run has a time series.
    n = 40
    requests = pa.table({"trace_id": ["t"] * n, "device": ["0"] * n, "seq": list(range(n)),
                         "ts_us": [100_000 * i for i in range(n)], "op": ["R"] * n,
                         "offset_bytes": [(0 if i % 2 == 0 else 2) * 4096 for i in range(n)], "size_bytes": [4096] * n})
    cfg = ScenarioConfig.from_dict({
        "scenario_id": "s", "spec": "hp_c2247a", "service": "constant", "constant_ms": 10, "disks": 2,
        "device_sectors": [32], "layout": {"kind": "extents", "extent_sectors": 8},
        "policy": {"name": "cooling", "every_requests": 10}, "interval_ms": 1000})
    out = simulate_scenario(requests, cfg)
    assert (out.result.num_rows, out.series.num_rows > 0, out.moves.num_rows) == (1, True, 1)
    assert columns(out.result.schema)[2:] == columns(sim_results.RESULT_SCHEMA)
    assert columns(out.series.schema)[2:] == columns(sim_timeseries.INTERVAL_SCHEMA)
    assert columns(out.moves.schema)[2:] == columns(cooling_moves.MOVE_SCHEMA)
