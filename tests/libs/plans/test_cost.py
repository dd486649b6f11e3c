"""libs.plans.cost: move time on the modeled disk, worked by hand from the HP C2247A spec, and the budgets."""
from __future__ import annotations

import pytest

from blockheat.libs.plans.cost import MoveBudget, breaches, cost_benefit, move_seconds
from blockheat.libs.plans.types import Step, Target
from blockheat.sim.specs import load

SPEC = load("hp_c2247a")
MIB = 1 << 20
# Positioning: the datasheet's 11.4935 ms average seek + half of a 5400 rpm turn (11.111 ms / 2).
POSITION_S = (11.493468741764072 + 60_000 / 5400 / 2) / 1000


def target() -> Target:
    return Target("t", ("a", "b"), (40960, 40960), SPEC, "hp_c2247a")      # 20 MiB each, 512-byte sectors


def step(src: str, dst: str, n: int = MIB, at: int = 0) -> Step:
    return Step("migrate_extent", "g", src, at, dst, at, n)


def test_one_move_reads_on_one_disk_and_writes_on_the_other():
    # Zone 1 (outermost) of the C2247A: 96 sectors per track at 5400 rpm = 4,423,680 B/s on the media, but its bus
    # takes 0.1701 ms per sector (3.0 MB/s): the slower of the two, 2048 sectors x 0.1701 ms = 348.3648 ms per MiB.
    busy = move_seconds(target(), [step("a", "b")])
    assert busy == pytest.approx({"a": POSITION_S + 0.3483648, "b": POSITION_S + 0.3483648})
    assert move_seconds(target(), [Step("align_to_track", "g", "a", 0, "a", 0, MIB)]) == {"a": 0.0, "b": 0.0}


def figures(mean_ms: float, improvement: float | None = None) -> dict:
    return {"mean_response_ms": mean_ms, "improvement_mean": improvement, "improvement_p95": 0.1,
            "hottest_utilization": 0.5}


def section(steps, idle_s=(100.0, 100.0), improvement=0.2):
    idle = {"per_device": [{"device": d, "idle_s": s} for d, s in zip("ab", idle_s, strict=True)]}
    return cost_benefit(target(), steps, idle=idle, window={"requests": 1000}, score=figures(8.0, improvement),
                        baseline=figures(10.0), validation_demerit_ms=0.3, throttle_mb_per_s=50.0, budget=MoveBudget())


def test_cost_benefit_of_two_moves():
    got = section([step("a", "b"), step("a", "b", at=MIB)])
    one = POSITION_S + 0.3483648
    assert got["bytes_to_move"] == 2 * MIB
    assert got["move_s"] == pytest.approx(2 * one)                     # each disk busy for both; they overlap
    assert got["disk_busy_s"] == pytest.approx(4 * one)
    a, b = got["per_disk"]
    assert (a["bytes_read"], a["bytes_written"], a["volume_share_moved"]) == (2 * MIB, 0, 0.1)
    assert b["idle_share_used"] == pytest.approx(2 * one / 100.0)
    # 1000 requests 2 ms faster: 2 s of response time saved per window, against the disks' 1.47 s.
    assert got["benefit"]["saved_response_s_per_window"] == pytest.approx(2.0)
    assert got["net_s_per_window"] == pytest.approx(2.0 - 4 * one)
    assert got["gain_per_gib"] == pytest.approx(0.2 * 512)
    assert breaches(got, MoveBudget(), 64 << 30) == []


def test_each_budget_names_its_breach():
    three = [step("a", "b", at=k * MIB) for k in range(3)]             # 15 % of volume a
    one = POSITION_S + 0.3483648
    # 3 x 365 ms on each disk = 1.1 s, 55 % of disk a's 2 s of idle time; 0.005 % better for 3 MiB: 1.71 % per GiB.
    assert breaches(section(three, idle_s=(2.0, 100.0), improvement=0.00005), MoveBudget(), 2 * MIB) == [
        "moves 15.0% of volume a, over the 10% budget",
        "the moves keep disk a busy 1.1 s: 55% of its 2 s of idle time in a window like this one, over the 50% "
        "budget",
        "moves 3,145,728 bytes, over the 2,097,152-byte safety limit",
        "gains 1.71% of the mean response per GiB moved, under the 2.00% minimum"]
    assert 3 * one / 2 == pytest.approx(0.548, abs=1e-3)
    assert breaches(section(three, idle_s=(0.0, 0.0)), MoveBudget(max_volume_share=0.2), 64 << 30) == [
        f"the moves keep disk a busy {3 * one:,.1f} s: no idle time in a window like this one, over the 50% budget",
        f"the moves keep disk b busy {3 * one:,.1f} s: no idle time in a window like this one, over the 50% budget"]
    with pytest.raises(ValueError, match="budget needs shares in"):
        MoveBudget(max_volume_share=0.0)
