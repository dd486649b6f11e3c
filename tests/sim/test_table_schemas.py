"""The simulator's output and the tables that store it agree column for column: schemas/ defines each table once
(its contract: names, types, nullability), sim returns its own columns without declaring those schemas, the
simulation stage (libs/simulation/stage.py) casts them to the contract, and these tests keep the two from
drifting apart: the same names in the same order, each column's type the contract's, no null where the contract
has none."""
from __future__ import annotations

import pyarrow as pa

from blockheat.schemas import cooling_moves, sim_results, sim_timeseries
from blockheat.sim.scenarios import SIM_RESULT_SCHEMA, ScenarioConfig, simulate_scenario
from blockheat.sim.stats import RESULT_SCHEMA

SCENARIO_KEYS = ["scenario_id", "trace_id"]   # sim.scenarios' keys in front of every row; the job sets its own
TABLE_KEYS = ("grid_id", "trace_id", "array_group", "scenario_id")


def columns(schema: pa.Schema) -> list[tuple[str, pa.DataType, bool]]:
    return [(f.name, f.type, f.nullable) for f in schema]


def fits(table: pa.Table, contract: pa.Schema) -> bool:
    """The table's columns after the scenario key are the contract's, in order and type, with no null where the
    contract has none; the cast the simulation stage makes then changes no value."""
    body = table.select(table.schema.names[2:])
    assert [(f.name, f.type) for f in body.schema] == [(f.name, f.type) for f in contract]
    assert all(f.nullable or body.column(f.name).null_count == 0 for f in contract)
    cast = body.cast(contract)
    return all(cast.column(f.name).equals(body.column(f.name)) for f in contract)


def scenario_output(**changes: object) -> object:
    # Reads alternating between two extents of disk 0 every 100 ms: the cooling policy moves one of them
    # (tests/sim/test_scenarios_policy.py works it out), and the run has a time series.
    n = 40
    requests = pa.table({"trace_id": ["t"] * n, "device": ["0"] * n, "seq": list(range(n)),
                         "ts_us": [100_000 * i for i in range(n)], "op": ["R"] * n,
                         "offset_bytes": [(0 if i % 2 == 0 else 2) * 4096 for i in range(n)], "size_bytes": [4096] * n})
    cfg = ScenarioConfig.from_dict({
        "scenario_id": "s", "spec": "hp_c2247a", "service": "constant", "constant_ms": 10, "disks": 2,
        "device_sectors": [32], "layout": {"kind": "extents", "extent_sectors": 8},
        "policy": {"name": "cooling", "every_requests": 10}, "interval_ms": 1000, **changes})
    return simulate_scenario(requests, cfg)


def test_the_result_row_is_sim_results_result_columns() -> None:
    assert SIM_RESULT_SCHEMA.names[:2] == SCENARIO_KEYS
    assert columns(SIM_RESULT_SCHEMA)[2:] == columns(sim_results.RESULT_SCHEMA)
    assert columns(RESULT_SCHEMA) == columns(sim_results.RESULT_SCHEMA)[1:]          # after the devices
    assert sim_results.COLUMNS[:4] == TABLE_KEYS
    assert sim_results.COLUMNS[-len(sim_results.RESULT_COLUMNS):] == sim_results.RESULT_COLUMNS


def test_the_time_series_is_sim_timeseries_interval_columns() -> None:
    out = scenario_output()
    assert out.series.schema.names[:2] == SCENARIO_KEYS
    assert out.series.num_rows == 4
    assert fits(out.series, sim_timeseries.INTERVAL_SCHEMA)
    assert fits(scenario_output(interval_ms=None).series, sim_timeseries.INTERVAL_SCHEMA)      # no rows, same columns
    assert (*TABLE_KEYS, *sim_timeseries.INTERVAL_SCHEMA.names) == sim_timeseries.COLUMNS


def test_the_moves_are_cooling_moves_move_columns() -> None:
    out = scenario_output()
    assert out.moves.schema.names[:2] == SCENARIO_KEYS
    assert out.moves.num_rows == 1
    assert fits(out.moves, cooling_moves.MOVE_SCHEMA)
    assert fits(scenario_output(policy=None, layout={"kind": "as_traced"}).moves, cooling_moves.MOVE_SCHEMA)
    assert (*TABLE_KEYS, *cooling_moves.MOVE_SCHEMA.names) == cooling_moves.COLUMNS


def test_a_scenarios_output_has_the_tables_columns() -> None:
    out = scenario_output()
    assert (out.result.num_rows, out.series.num_rows > 0, out.moves.num_rows) == (1, True, 1)
    assert columns(out.result.schema)[2:] == columns(sim_results.RESULT_SCHEMA)
