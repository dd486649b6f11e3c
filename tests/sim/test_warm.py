"""The warm-up `make venv` runs to fill numba's cache: every scenario shape replays its whole trace, and the
ALIS build finds runs (the seeded trace gives the same counts every time)."""
from __future__ import annotations

from sim import warm


def test_every_warm_up_scenario_replays_every_request():
    assert len(warm.SCENARIOS) == 10
    assert warm.trace().num_rows == 2_000
    assert warm.compile_all() == 10 * 2_000


def test_the_alis_warm_up_builds_graphs_and_finds_runs():
    from libs.alis import warm as alis_warm

    assert alis_warm.compile_all() == 1_298
