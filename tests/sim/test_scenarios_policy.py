"""Policies in scenarios (the grid's `policy` key) run by sim.scenarios inside a partition: round-robin extents
built from the partition's device sizes, FIVE's greedy allocation from the partition's own heats, disk
cooling with its moves; hand-built traces on the constant-service model, so every count is worked out."""
from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa
import pytest

from blockheat.sim.array import ExtentMap, ExtentTable
from blockheat.sim.cooling import CoolingMove
from blockheat.sim.scenarios import (
    AsTracedExtents,
    CoolingPolicy,
    GreedyAllocation,
    RoundRobinExtents,
    ScenarioConfig,
    ScenarioError,
    _build,
    simulate_partition,
    simulate_scenario,
)

EXTENT = 8                     # sectors (512 B on hp_c2247a): extent e covers bytes [4096 e, 4096 (e + 1))
BASE = {"spec": "hp_c2247a", "service": "constant", "constant_ms": 10, "disks": 2, "device_sectors": [32],
        "layout": {"kind": "extents", "extent_sectors": EXTENT}}


def table(rows: list[tuple[float, int]]) -> pa.Table:
    """One device "0": (seconds, extent) reads of one 4 KB block at the extent's start."""
    n = len(rows)
    return pa.table({"trace_id": ["t"] * n, "device": ["0"] * n, "seq": list(range(n)),
                     "ts_us": [int(s * 1e6) for s, _ in rows], "op": ["R"] * n,
                     "offset_bytes": [e * EXTENT * 512 for _, e in rows], "size_bytes": [4096] * n})


def extents(layout: ExtentTable) -> list[tuple[int, int, int, int]]:
    """(logical start, sectors, disk, physical start) of each extent of a partition's extent map (held as arrays)."""
    assert isinstance(layout, ExtentTable)
    return list(zip(layout.logical_start.tolist(), layout.sectors.tolist(), layout.disk.tolist(),
                    layout.physical_start.tolist(), strict=True))


def scenario(**kw: Any) -> ScenarioConfig:
    return ScenarioConfig.from_dict({"scenario_id": "s", **BASE, **kw})


# e1 twice early, then e0 three times and e2 twice: 7 requests, 2 s apart from 10 s on (no queueing).
SKEWED = [(0.0, 1), (1.0, 1), (10.0, 0), (11.0, 2), (12.0, 0), (13.0, 2), (14.0, 0)]


def test_round_robin_extents_are_built_from_the_partition() -> None:
    cfg = scenario()
    assert cfg.layout == RoundRobinExtents(EXTENT)
    sim, _ = _build(table(SKEWED), cfg)
    lay = sim.array.layout
    assert isinstance(lay, ExtentMap)
    assert [(e.logical_start, e.sectors, e.disk, e.physical_start) for e in lay.extents] == \
           [(0, 8, 0, 0), (8, 8, 1, 0), (16, 8, 0, 8), (24, 8, 1, 8)]
    row = simulate_partition(table(SKEWED), cfg).to_pylist()[0]
    assert row["disk_physical_ios"] == [5, 2]                  # e0, e2 on disk 0; e1, e3 on disk 1


@pytest.mark.parametrize(("fraction", "disks", "ios"), [
    # Whole trace: heats e0 3, e1 2, e2 2, e3 0 (x 4096 B / 14 s). e0 -> 0; e1 (before e2 on equal heat) -> 1;
    # e2: both disks hold one extent of the file -> the cooler, 1; e3 -> 0 (fewest extents of the file).
    (1.0, [0, 1, 1, 0], [3, 4]),
    # First half (7 s): only e1's two requests. e1 -> 0, then e0, e2, e3 at heat 0 in logical order:
    # e0 -> 1 (fewest), e2 -> 1 (tie on count, cooler), e3 -> 0.
    (0.5, [1, 0, 1, 0], [2, 5]),
])
def test_greedy_allocation_uses_the_partitions_heats(fraction: float, disks: list[int], ios: list[int]) -> None:
    cfg = scenario(policy={"name": "greedy-allocation", "heat_fraction": fraction})
    assert cfg.policy == GreedyAllocation(None, fraction)
    sim, _ = _build(table(SKEWED), cfg)
    assert [e[2] for e in extents(sim.array.layout)] == disks
    out = simulate_scenario(table(SKEWED), cfg)
    assert out.result.to_pylist()[0]["disk_physical_ios"] == ios
    assert out.moves.num_rows == 0


def test_greedy_allocation_with_its_own_extent_size_and_no_layout() -> None:
    cfg = ScenarioConfig.from_dict({"scenario_id": "g", **{k: v for k, v in BASE.items() if k != "layout"},
                                    "policy": {"name": "greedy-allocation", "extent_sectors": 16}})
    sim, _ = _build(table(SKEWED), cfg)
    # Two 16-sector extents: e0+e1 (5 requests) and e2+e3 (2): one per disk, hottest first.
    assert [(e[1], e[2]) for e in extents(sim.array.layout)] == [(16, 0), (16, 1)]


def test_incremental_greedy_moves_one_of_two_hot_extents_from_the_current_layout() -> None:
    # One device of 4 extents on disk 0 (as traced), disk 1 empty. Reads alternate e0, e2 every 100 ms for 3.9 s:
    # 20 reads x 8 blocks each, 41 blocks/s per extent, 82 on disk 0. Moving e0 to the free space of disk 1 lowers
    # the hottest disk to 41 blocks/s: 160 blocks over the window against the 16 the move transfers. Then both
    # disks carry 41: nothing more moves. Every other extent stays where it is.
    rows = [(0.1 * i, 0 if i % 2 == 0 else 2) for i in range(40)]
    cfg = ScenarioConfig.from_dict({"scenario_id": "inc", **{k: v for k, v in BASE.items() if k != "layout"},
                                    "policy": {"name": "incremental-greedy", "extent_sectors": EXTENT,
                                               "max_share": 0.25}})
    assert cfg.policy == GreedyAllocation(EXTENT, 1.0, incremental=True, max_share=0.25)
    sim, _ = _build(table(rows), cfg)
    assert extents(sim.array.layout) == \
           [(0, 8, 1, 0), (8, 8, 0, 8), (16, 8, 0, 16), (24, 8, 0, 24)]
    assert simulate_partition(table(rows), cfg).to_pylist()[0]["disk_physical_ios"] == [20, 20]
    # A budget under one extent (10 % of 32 sectors = 3) moves nothing: the current layout.
    none = ScenarioConfig.from_dict({"scenario_id": "inc0", **{k: v for k, v in BASE.items() if k != "layout"},
                                     "policy": {"name": "incremental-greedy", "extent_sectors": EXTENT}})
    assert none.policy.max_share == 0.1                            # the default
    sim, _ = _build(table(rows), none)
    assert [e[2] for e in extents(sim.array.layout)] == [0, 0, 0, 0]


def test_cooling_moves_one_of_two_hot_extents_and_reports_it() -> None:
    # Reads alternate e0, e2 (both on disk 0 round robin) every 100 ms. At the 10th arrival (0.9 s) both
    # have heat 5 x 8 sectors / 0.8 s = 50/s: disk 0 100, disk 1 0. e0 (lowest index) moves to disk 1 at
    # sector 16 (after e1 and e3); then the disks are balanced and nothing more moves.
    rows = [(0.1 * i, 0 if i % 2 == 0 else 2) for i in range(40)]
    cfg = scenario(policy={"name": "cooling", "every_requests": 10, "delta": 0.05, "k": 10})
    assert cfg.policy == CoolingPolicy(cfg.policy.config, "extent")
    out = simulate_scenario(table(rows), cfg)
    assert out.moves.schema.names == ["scenario_id", "trace_id", *(f.name for f in dataclasses.fields(CoolingMove))]
    moves = out.moves.to_pylist()
    assert len(moves) == 1
    m = moves[0]
    assert (m["scenario_id"], m["trace_id"], m["unit"], m["from_disk"], m["to_disk"], m["from_physical_start"],
            m["to_physical_start"], m["sectors"], m["bytes"]) == ("s", "t", 0, 0, 1, 0, 16, 8, 4096)
    assert m["time_us"] == pytest.approx(900_000.0)
    assert (m["unit_heat"], m["source_heat_before"], m["target_heat_before"]) == pytest.approx((50.0, 100.0, 0.0))
    row = out.result.to_pylist()[0]
    # e0 before the move: requests 0, 2, ..., 8 on disk 0; after: 10, ..., 38 on disk 1. The copy: a read on
    # disk 0, a write on disk 1.
    assert (row["remaps"], row["migration_ios"], row["physical_ios"]) == (1, 2, 40)
    assert row["disk_physical_ios"] == [5 + 20 + 1, 15 + 1]


def test_as_traced_extents_are_built_from_the_partition() -> None:
    # Two devices of 8 and 6 sectors in extents of 4: a's two on disk 0, b's 4 + 2 on disk 1, each extent at its
    # own device address (device k on disk k).
    rows = pa.table({"trace_id": ["t"] * 2, "device": ["a", "b"], "seq": [0, 1], "ts_us": [0, 1000], "op": ["R"] * 2,
                     "offset_bytes": [0, 4 * 512], "size_bytes": [512, 512]})
    cfg = ScenarioConfig.from_dict({"scenario_id": "s", "spec": "hp_c2247a", "disks": 2, "device_sectors": [8, 6],
                                    "layout": {"kind": "as_traced", "extent_sectors": 4}})
    assert cfg.layout == AsTracedExtents(4)
    sim, _ = _build(rows, cfg)
    assert extents(sim.array.layout) == \
           [(0, 4, 0, 0), (4, 4, 0, 4), (8, 4, 1, 0), (12, 2, 1, 4)]
    with pytest.raises(ScenarioError, match=r"the as-traced layout puts device k on disk k: 2 devices need as many "
                                            r"disks, the array has 1"):
        _build(rows, dataclasses.replace(cfg, n_disks=1))


def test_cooling_from_the_as_traced_extents_equals_it_from_the_same_map_given_whole() -> None:
    # The extent size alone and the explicit map of today's layout are one scenario: the same moves and figures.
    # e0 and e2 both on disk 0 (the device's disk): at the 10th arrival e0 moves to the empty disk 1.
    rows = [(0.1 * i, 0 if i % 2 == 0 else 2) for i in range(40)]
    policy = {"name": "cooling", "every_requests": 10, "delta": 0.05, "k": 10}
    compact = simulate_scenario(table(rows), scenario(layout={"kind": "as_traced", "extent_sectors": EXTENT},
                                                      policy=policy))
    whole = simulate_scenario(table(rows), scenario(layout={"kind": "extents", "extents": [
        [e * EXTENT, EXTENT, 0, e * EXTENT] for e in range(4)]}, policy=policy))
    assert compact.moves.equals(whole.moves)
    assert compact.result.equals(whole.result)
    assert [(m["unit"], m["from_disk"], m["to_disk"], m["to_physical_start"]) for m in compact.moves.to_pylist()] == \
           [(0, 0, 1, 0)]


def test_cooling_by_device_files_never_moves_within_one_device() -> None:
    # FIVE's same-file rule with the device as the file: every disk already holds an extent of device 0.
    rows = [(0.1 * i, 0 if i % 2 == 0 else 2) for i in range(40)]
    out = simulate_scenario(table(rows), scenario(policy={"name": "cooling", "every_requests": 10, "files": "device"}))
    assert out.moves.num_rows == 0
    assert out.result.to_pylist()[0]["disk_physical_ios"] == [40, 0]


def test_an_empty_partition_runs_without_its_policy() -> None:
    out = simulate_scenario(table([]), scenario(policy={"name": "cooling"}))
    assert (out.result.to_pylist()[0]["requests"], out.moves.num_rows) == (0, 0)
    assert out.moves.schema.names[2:] == [f.name for f in dataclasses.fields(CoolingMove)]


@pytest.mark.parametrize(("policy", "changes", "message"), [
    ({"name": "coolng"}, {}, r"policy: name must be one of \['cooling', 'greedy-allocation', 'incremental-greedy', "
     r"'alis'\], got 'coolng'"),
    ({"delta": 0.1}, {}, r"policy: name must be one of .*, got None"),
    ("cooling", {}, r"policy must be an object"),
    ({"name": "cooling", "detla": 0.1}, {}, r"policy 'cooling': unknown parameter\(s\) \['detla'\]; allowed: "
                                             r"\['aging', 'delta', 'dhv_copy_cost', 'every_requests', 'every_s', "
                                             r"'files', 'k', 'max_moves', 'migrate', 'objective', 'unit'\]"),
    ({"name": "cooling", "k": 1}, {}, r"policy 'cooling': k must be >= 2, got 1"),
    ({"name": "cooling", "every_s": 5, "every_requests": 10}, {}, r"policy 'cooling': give exactly one of"),
    ({"name": "cooling", "files": "file"}, {}, r"policy 'cooling': files must be one of \['extent', 'device'\]"),
    ({"name": "cooling"}, {"layout": {"kind": "striped", "unit_sectors": 8}},
     r"policy 'cooling' moves extents: it needs layout kind 'extents'"),
    ({"name": "cooling"}, {"closed_loop": {"outstanding": 2}}, r"policy 'cooling' runs open loop only"),
    ({"name": "greedy-allocation", "extent_size": 8}, {},
     r"policy 'greedy-allocation': unknown parameter\(s\) \['extent_size'\]; allowed: \['extent_sectors', "
     r"'heat_fraction'\]"),
    ({"name": "greedy-allocation", "heat_fraction": 0}, {}, r"heat_fraction must be in \(0, 1\], got 0"),
    ({"name": "greedy-allocation", "extent_sectors": 16}, {},
     r"extent_sectors 16 differs from the layout's 8"),
    ({"name": "greedy-allocation"}, {"layout": {"kind": "random"}}, r"builds its own extent map"),
    ({"name": "greedy-allocation"}, {"layout": {"kind": "as_traced"}}, r"needs extent_sectors"),
])
def test_bad_policies_are_refused(policy: Any, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        ScenarioConfig.from_dict({"scenario_id": "s", **BASE, **changes, "policy": policy})


def test_every_s_alone_replaces_the_request_count() -> None:
    cfg = scenario(policy={"name": "cooling", "every_s": 100 / 8})
    assert isinstance(cfg.policy, CoolingPolicy)
    assert (cfg.policy.config.every_requests, cfg.policy.config.every_s) == (None, 12.5)
