"""The `alis` policy in scenarios (sim.scenarios): parsed and checked like the other policies, planned and
redirected inside the partition; a repeated scattered read sequence on the HP C2247A (read-ahead 128
sectors), where run clustering turns day 2's ten misses into one."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from blockheat.sim.alis.params import AlisParams
from blockheat.sim.scenarios import AlisPolicy, ScenarioConfig, ScenarioError, simulate_partition

SCATTERED = [k * 10_000 for k in range(10)]        # ten 4 KiB reads 5 MB apart (512-byte sectors)


def table(days: int = 2) -> pa.Table:
    """The ten reads in the same order, one a second, at the start of each 100 s "day"."""
    rows = [(d * 100_000_000 + k * 1_000_000, s) for d in range(days) for k, s in enumerate(SCATTERED)]
    n = len(rows)
    return pa.table({"trace_id": ["t"] * n, "device": ["0"] * n, "seq": list(range(n)),
                     "ts_us": [t for t, _ in rows], "op": ["R"] * n,
                     "offset_bytes": [s * 512 for _, s in rows], "size_bytes": [4096] * n})


def scenario(**policy: Any) -> ScenarioConfig:
    return ScenarioConfig.from_dict({"scenario_id": "a", "spec": "hp_c2247a",
                                     "policy": None if not policy else {"name": "alis", **policy}})


def test_the_policy_is_parsed_into_alis_params() -> None:
    cfg = scenario(mode="run", plan="lookahead", tau=2, interval_s=100)
    assert cfg.policy == AlisPolicy(AlisParams(mode="run", plan="lookahead", tau=2, interval_s=100))
    assert ScenarioConfig.from_dict({"scenario_id": "c", "spec": "hp_c2247a", "layout": {"kind": "concatenated"},
                                     "policy": {"name": "alis"}}).policy == AlisPolicy()


@pytest.mark.parametrize(("data", "message"), [
    ({"policy": {"name": "alis", "tua": 3}}, r"policy 'alis': unknown parameter\(s\) \['tua'\]"),
    ({"policy": {"name": "alis", "mode": "runs"}}, "policy 'alis': ALIS mode must be one of heat, run, combined"),
    ({"policy": {"name": "alis"}, "layout": {"kind": "striped", "unit_sectors": 64}},
     "policy 'alis' redirects to reorganized areas inside each volume: it needs layout kind 'as_traced' or "
     "'concatenated', got Striped"),
])
def test_bad_alis_scenarios_are_refused(data, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ScenarioError, match=message):
        ScenarioConfig.from_dict({"scenario_id": "x", "spec": "hp_c2247a", **data})


@pytest.mark.parametrize(("policy", "misses"), [
    # No ALIS: every read a miss (two cache segments, the reads 5 MB apart).
    ({}, 20),
    # Day 1's run, planned from day 0, lies in the area in reference order: after its first read the
    # read-ahead has the other nine in the cache.
    ({"mode": "run", "tau": 2, "interval_s": 100}, 11),
    # Lookahead: day 0 reads its run from the area too, and on day 1 the run is still in the cache segment.
    ({"mode": "run", "tau": 2, "interval_s": 100, "plan": "lookahead"}, 1),
    # Heat clustering lays the ten hot units out by home address, the same order here.
    ({"mode": "heat", "interval_s": 100}, 11),
])
def test_run_clustering_turns_a_repeated_sequence_into_cache_hits(policy, misses) -> None:  # type: ignore[no-untyped-def]
    row = simulate_partition(table(), scenario(**policy)).to_pylist()[0]
    assert (row["reads"], row["physical_ios_read"]) == (20, misses)
    assert row["read_miss_ratio"] == misses / 20


def test_the_volume_and_its_area_must_fit_the_disk() -> None:
    cfg = ScenarioConfig.from_dict({"scenario_id": "f", "spec": "hp_c2247a", "device_sectors": [2_000_000],
                                    "policy": {"name": "alis"}})
    with pytest.raises(ScenarioError, match="policy 'alis': volume 0: 2000000 home sectors plus an RA of 300000 from "
                                            "sector 0 need 2300000 sectors, beyond the disk capacity 2054864"):
        simulate_partition(table(), cfg)
