"""The nightly's stage order as data: the same stages as libs.nightly runs, an order without cycles, and the
slots taken as the DAG's scheduler takes them (the longest chains first when there are two slots)."""
from __future__ import annotations

from blockheat.dags.stage_order import PRIORITY, UPSTREAM, next_stages
from blockheat.libs.nightly import STAGES


def test_the_order_covers_the_nightlys_stages_in_dag_order():
    assert set(UPSTREAM) == set(PRIORITY) == set(STAGES)
    for i, stage in enumerate(STAGES):                 # STAGES lists every stage after its upstream stages
        assert set(UPSTREAM[stage]) <= set(STAGES[:i]), stage


def test_two_slots_take_the_longest_chains_first():
    finished: set[str] = set()
    started: set[str] = set()
    order: list[list[str]] = []

    def take(free: int) -> list[str]:
        picked = next_stages(finished, started)[:free]
        started.update(picked)
        order.append(picked)
        return picked

    assert take(2) == ["ingest_trace"]
    assert take(1) == []                               # nothing else before the ingest
    finished.add("ingest_trace")
    assert take(2) == ["policy_scores", "alis_graph"]
    finished.add("alis_graph")
    assert take(1) == ["alis_layout"]
    finished.add("alis_layout")
    assert take(1) == ["trace_profile"]
    finished.update({"trace_profile", "policy_scores"})
    assert take(2) == ["reorg_plan", "heat_tracking"]
    finished.update({"reorg_plan", "heat_tracking"})
    assert take(2) == ["extent_heat", "aged_heat"]     # heat_report still waits for extent_heat
    finished.update({"extent_heat"})
    assert take(1) == ["heat_report"]


def test_a_subset_of_stages_waits_only_for_its_own_members():
    assert next_stages(set(), set(), ("alis_layout", "heat_report")) == ["alis_layout", "heat_report"]
    assert next_stages(set(), set(), ("alis_graph", "alis_layout")) == ["alis_graph"]
