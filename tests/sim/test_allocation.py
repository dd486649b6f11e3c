"""Static allocation: FIVE's Figure 3 example (three files of three extents on three disks), the
same-file rule and its generalization, capacities, and units built from `extent_heat` rows. No Spark."""
from __future__ import annotations

import numpy as np
import pytest

from blockheat.sim.allocation import (
    AllocationError,
    AllocUnit,
    greedy_allocation,
    greedy_disks,
    incremental_moves,
    round_robin_allocation,
    to_extent_map,
    units_from_extent_heat,
)

# Figure 3: extent j of file i is "i.j". Heats chosen so that, as the text says, 2.2, 1.2 and 3.1 go first,
# each to the coolest (empty) disk, and 3.3 then skips disk 3 (the coolest, holding 3.1) for disk 2.
FIG3_HEAT = {"1.1": 2, "1.2": 8, "1.3": 4, "2.1": 5, "2.2": 9, "2.3": 1, "3.1": 7, "3.2": 3, "3.3": 6}


def fig3_units() -> list[AllocUnit]:
    return [AllocUnit(name[0], int(name[2]), float(h)) for name, h in FIG3_HEAT.items()]


def placement(units: list[AllocUnit], disks: tuple[int, ...]) -> dict[str, int]:
    return {f"{u.file}.{u.index}": d + 1 for u, d in zip(units, disks, strict=True)}   # disks 1..3 as in Figure 3


def test_greedy_allocation_of_figure_3() -> None:
    units = fig3_units()
    placed = greedy_allocation(units, 3)
    order = [f"{units[i].file}.{units[i].index}" for i in placed.order]
    assert order[:4] == ["2.2", "1.2", "3.1", "3.3"]
    # By hand: 2.2 -> 1, 1.2 -> 2, 3.1 -> 3 (heats 9, 8, 7); 3.3: disk 3 is coolest but holds 3.1 -> disk 2 (14);
    # 2.1 -> 3 (12); 1.3 -> 1 (13); 3.2: 3 holds file 3 -> 1 (16); 1.1 -> 3 (14); 2.3: only disk 2 lacks file 2 (15).
    assert placement(units, placed.disk) == {"2.2": 1, "1.2": 2, "3.1": 3, "3.3": 2, "2.1": 3, "1.3": 1, "3.2": 1,
                                             "1.1": 3, "2.3": 2}
    assert placed.disk_heat == (16.0, 15.0, 14.0)
    assert placed.max_over_mean == pytest.approx(16 / 15)


def test_round_robin_allocation_of_figure_3() -> None:
    units = fig3_units()
    placed = round_robin_allocation(units, 3)
    assert placement(units, placed.disk) == {f"{i}.{j}": j for i in (1, 2, 3) for j in (1, 2, 3)}
    assert placed.disk_heat == (2 + 5 + 7, 8 + 9 + 3, 4 + 1 + 6)         # 14, 20, 11
    assert placed.max_over_mean == pytest.approx(20 / 15)


def test_greedy_keeps_a_file_off_disks_that_hold_it() -> None:
    units = fig3_units()
    placed = greedy_allocation(units, 3)
    for f in "123":
        assert sorted(d for u, d in zip(units, placed.disk, strict=True) if u.file == f) == [0, 1, 2]


def test_greedy_ties_go_to_the_lowest_disk_and_to_logical_order() -> None:
    units = [AllocUnit("a", 0, 1.0), AllocUnit("b", 0, 1.0), AllocUnit("c", 0, 1.0)]
    placed = greedy_allocation(units, 2)
    assert placed.order == (0, 1, 2)
    assert placed.disk == (0, 1, 0)


def test_more_extents_than_disks_spread_a_file_evenly() -> None:
    # One file, five extents, two disks: FIVE's rule cannot hold; among the disks holding the fewest extents
    # of the file the coolest wins: 10 -> 0; 9 -> 1 (holds none); 8: both hold one, 1 is cooler (9 < 10);
    # 7 -> 0 (holds one, 1 holds two); 1: both hold two, equal heats 17 -> the lower index 0.
    units = [AllocUnit("f", i, h) for i, h in enumerate([10.0, 9.0, 8.0, 7.0, 1.0])]
    placed = greedy_allocation(units, 2)
    assert placed.disk == (0, 1, 1, 0, 0)
    assert placed.disk_heat == (18.0, 17.0)


def test_capacity_makes_full_disks_ineligible() -> None:
    # a -> 0; b -> 1 (now full); c: disk 1 is cooler (4 < 5) but has no room -> 0.
    units = [AllocUnit("a", 0, 5.0, 4), AllocUnit("b", 0, 4.0, 8), AllocUnit("c", 0, 3.0, 4)]
    placed = greedy_allocation(units, 2, capacity_sectors=8)
    assert placed.disk == (0, 1, 0)
    with pytest.raises(AllocationError, match="no disk has room for unit 3"):
        greedy_allocation([*units, AllocUnit("d", 0, 1.0, 4)], 2, capacity_sectors=8)
    with pytest.raises(AllocationError, match="beyond its capacity 8"):
        round_robin_allocation([*units, AllocUnit("d", 0, 1.0, 8)], 2, capacity_sectors=8)


def test_units_lie_back_to_back_in_logical_order_on_each_disk() -> None:
    units = [AllocUnit("f", i, h, 10) for i, h in enumerate([1.0, 5.0, 3.0])]
    placed = greedy_allocation(units, 2)                        # 5 -> 0, 3 -> 1, 1 -> 1
    assert placed.disk == (1, 0, 1)
    assert placed.physical_start == (0, 0, 10)                  # on disk 1: unit 0 before unit 2
    layout = to_extent_map(units, placed)
    assert [(e.logical_start, e.sectors, e.disk, e.physical_start) for e in layout.extents] == [
        (0, 10, 1, 0), (10, 10, 0, 0), (20, 10, 1, 10)]


def test_units_from_extent_heat_rows() -> None:
    rows = [{"device": "d0", "extent_id": 1, "heat": 4.0}, {"device": "d1", "extent_id": 0, "heat": 2.5}]
    units = units_from_extent_heat(rows, extent_bytes=4096, device_bytes={"d0": 10_000, "d1": 4096},
                                   sector_bytes=512)
    assert units == [AllocUnit("d0", 0, 0.0, 8), AllocUnit("d0", 1, 4.0, 8), AllocUnit("d0", 2, 0.0, 4),
                     AllocUnit("d1", 0, 2.5, 8)]
    objects = units_from_extent_heat(rows, extent_bytes=4096, device_bytes={"d0": 10_000, "d1": 4096},
                                     sector_bytes=512, object_bytes=8192)
    assert [(u.file, u.index) for u in objects] == [("d0:0", 0), ("d0:0", 1), ("d0:1", 0), ("d1:0", 0)]
    with pytest.raises(ValueError, match="beyond its 4096 bytes"):
        units_from_extent_heat([{"device": "d1", "extent_id": 1, "heat": 1.0}], extent_bytes=4096,
                               device_bytes={"d1": 4096}, sector_bytes=512)


def test_fewest_extents_rule_applies_among_disks_with_room() -> None:
    # a fills disk 0; b and c (file f) both fit only on disk 1, so c joins b there despite the same-file rule.
    units = [AllocUnit("x", 0, 5.0, 8), AllocUnit("f", 0, 4.0, 4), AllocUnit("f", 1, 3.0, 4)]
    assert greedy_allocation(units, 2, capacity_sectors=8).disk == (0, 1, 1)


def _greedy_by_the_rule(units: list[AllocUnit], n_disks: int, cap: int | None) -> list[int]:
    """FIVE's greedy step by step in plain Python (the loop sim.allocation compiles), for comparison."""
    order = sorted(range(len(units)), key=lambda i: (-units[i].heat, i))
    heat, used, held, disk = [0.0] * n_disks, [0] * n_disks, {}, [-1] * len(units)
    for i in order:
        u = units[i]
        counts = held.setdefault(u.file, [0] * n_disks)
        room = [d for d in range(n_disks) if cap is None or used[d] + u.sectors <= cap]
        fewest = min(counts[d] for d in room)
        d = min((d for d in room if counts[d] == fewest), key=lambda d: (heat[d], d))
        disk[i], heat[d], used[d] = d, heat[d] + u.heat, used[d] + u.sectors
        counts[d] += 1
    return disk


@pytest.mark.parametrize(("n_disks", "cap"), [(3, None), (5, 110), (8, 70)])
def test_the_compiled_greedy_places_every_unit_as_the_rule_does(n_disks: int, cap: int | None) -> None:
    # 120 units of 4 files, sizes 1-8 sectors, heats with many ties (whole numbers 0-9): the same disk per unit.
    # The capacities are tight (530 and 539 sectors in all): 4 and 14 units go elsewhere than without one.
    rng = np.random.default_rng(n_disks)
    units = [AllocUnit(f"f{rng.integers(4)}", i, float(rng.integers(10)), int(rng.integers(1, 9))) for i in range(120)]
    placed = greedy_allocation(units, n_disks, capacity_sectors=cap)
    assert list(placed.disk) == _greedy_by_the_rule(units, n_disks, cap)


def test_greedy_disks_names_the_file_that_did_not_fit() -> None:
    with pytest.raises(AllocationError, match=r"unit 1 \(8 sectors\) of file number 0"):
        greedy_disks(np.array([0, 0]), np.array([2.0, 1.0]), np.array([8, 8]), 1, 8)


# --- incremental_moves: FIVE's cooling rule offline, moves that pay for themselves ------------------------------


def _moves(heat, disk, used, *, sectors=8, window_s=10.0, cap=100, max_sectors=None):
    heat = np.asarray(heat, dtype=np.float64)
    return incremental_moves(heat, np.full(len(heat), sectors), np.asarray(disk), used, capacity_sectors=cap,
                             window_s=window_s, max_sectors=max_sectors)


def test_two_hot_extents_on_one_disk_make_one_move() -> None:
    # Disk 0 carries 20 blocks/s in two extents, disk 1 nothing: one move halves the hottest disk; a second would
    # only make disk 1 the hot one.
    (m,) = _moves([10, 10, 0, 0], [0, 0, 0, 1], [24, 8])
    assert (m.extent, m.from_disk, m.to_disk, m.to_start, m.sectors) == (0, 0, 1, 8, 8)
    assert (m.hottest_before, m.hottest_after) == (20.0, 10.0)


def test_one_hot_extent_alone_does_not_move() -> None:
    # Moving the only hot extent just moves the hot spot: the hottest disk's heat does not drop.
    assert _moves([10, 0, 0, 0], [0, 0, 0, 1], [24, 8]) == []


def test_a_move_is_made_only_when_it_gains_more_than_it_costs() -> None:
    # Gain: 1 block/s off the hottest disk x 10 s = 10 blocks; cost: 8 sectors read and written = 16 blocks.
    assert _moves([1, 1, 0], [0, 0, 1], [16, 8]) == []
    # Over 20 s the same move gains 20 blocks > 16: made.
    assert [m.extent for m in _moves([1, 1, 0], [0, 0, 1], [16, 8], window_s=20.0)] == [0]


def test_the_largest_drop_of_the_hottest_disk_goes_first_and_three_disks_balance() -> None:
    # Disk 0: 6 + 3 + 3 = 12; disks 1 and 2 cold. The 6 goes first (12 -> 6, where a 3 gives 12 -> 9); then disk 1
    # holds 6 too, so no move from disk 0 lowers the hottest disk: one move.
    moves = _moves([6, 3, 3, 0, 0], [0, 0, 0, 1, 2], [24, 8, 8])
    assert [(m.extent, m.to_disk, m.hottest_after) for m in moves] == [(0, 1, 6.0)]


def test_the_budget_and_the_free_space_bound_the_moves() -> None:
    heat, disk, used = [10, 10, 10, 10, 0], [0, 0, 0, 0, 1], [32, 8]
    assert len(_moves(heat, disk, used)) == 2                     # 40 | 0 -> 30 | 10 -> 20 | 20
    assert len(_moves(heat, disk, used, max_sectors=8)) == 1       # room in the budget for one extent
    assert _moves(heat, disk, used, cap=15) == []                  # disk 1 has 7 free sectors: no extent fits
