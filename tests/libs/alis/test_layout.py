"""Heat-clustering layouts on hand-made heat vectors, the reorganized area (runs first, heat fills
the rest, copies allowed), and the Spark planner with its realizable scoring."""
from __future__ import annotations

import numpy as np
import pytest

from blockheat.libs.alis.layout import area_hits, plan_layouts, reorganized_area
from blockheat.sim.alis.layout import arrange, hot_units, plan_area

MIB = 1 << 20
# unit:          0     1     2     3        4               5
OFFSETS = np.array([0, 4096, 8192, MIB, MIB + 4096, 3 * MIB])
HEAT = np.array([5.0, 1.0, 9.0, 7.0, 3.0, 8.0])
IDS = np.arange(6)
SIZES = np.full(6, 4096)


def test_hot_units_are_the_hottest_that_fit():
    assert hot_units(HEAT, SIZES, IDS, 4 * 4096).tolist() == [2, 5, 3, 0]
    assert hot_units(HEAT, SIZES, IDS, 4 * 4096 - 1).tolist() == [2, 5, 3]
    assert hot_units(np.array([2.0, 2.0, 0.0]), np.full(3, 10), np.array([7, 3, 1]), 100).tolist() == [1, 0]


def test_hot_units_stop_at_the_first_that_does_not_fit():
    sizes = np.array([65536, 4096, 4096, 4096, 4096, 4096])
    # heat order 2, 5, 3, 0 (64 KiB), 4, 1: the prefix ends at unit 0 although unit 4 would fit
    assert hot_units(HEAT, sizes, IDS, 5 * 4096).tolist() == [2, 5, 3]


def chosen_order(layout, chosen=(2, 5, 3, 0), extent_bytes=MIB):
    idx = np.array(chosen)
    return idx[arrange(OFFSETS[idx], HEAT[idx], IDS[idx], layout=layout, extent_bytes=extent_bytes)].tolist()


def test_sequential_layout_keeps_home_address_order():
    assert chosen_order("sequential") == [0, 2, 3, 5]


def test_heat_layout_is_descending_heat():
    assert chosen_order("heat") == [2, 5, 3, 0]


def test_organ_pipe_puts_the_hottest_in_the_middle():
    # ranks 2, 5, 3, 0, 4 -> places 0, +1, -1, +2, -2
    assert chosen_order("organ-pipe", chosen=(2, 5, 3, 0, 4)) == [4, 3, 2, 5, 0]
    assert chosen_order("organ-pipe") == [3, 2, 5, 0]


def test_packed_extents_rank_extents_by_their_heats():
    # 1 MiB extents: {0, 2} heats (9, 5); {3} (7); {5} (8) -> extent 0, extent 3, extent 1.
    assert chosen_order("packed") == [0, 2, 5, 3]
    # one extent holding everything is the sequential layout
    assert chosen_order("packed", extent_bytes=1 << 30) == chosen_order("sequential")


def test_packed_extents_break_ties_on_the_next_highest_heat():
    offsets = np.array([0, 4096, MIB, MIB + 4096, 2 * MIB])
    heat = np.array([9.0, 2.0, 9.0, 4.0, 9.0])
    ids = np.arange(5)
    order = arrange(offsets, heat, ids, layout="packed", extent_bytes=MIB)
    # extents (9, 4) > (9, 2) > (9): the longer vector wins a tie on every shared place
    assert order.tolist() == [2, 3, 0, 1, 4]


def test_unknown_layout_and_mode_are_rejected():
    with pytest.raises(ValueError, match="layout 'spiral'"):
        arrange(OFFSETS, HEAT, IDS, layout="spiral")
    with pytest.raises(ValueError, match="mode 'both'"):
        plan_area({}, {}, ra_bytes=1, mode="both", layout="heat", extent_bytes=1)


def runs_input(rows):
    cols = ("run_id", "rank", "position", "unit_id", "offset_bytes", "size_bytes")
    return {c: np.array([r[i] for r in rows], np.int64) for i, c in enumerate(cols)}


HOT = {"unit_id": IDS, "heat": HEAT, "offset_bytes": OFFSETS, "size_bytes": SIZES}
RUNS = runs_input([(4, 1, 0, 1, 4096, 4096), (4, 1, 1, 4, MIB + 4096, 4096),           # rank 1: units 1, 4
                   (0, 0, 0, 5, 3 * MIB, 4096), (0, 0, 1, 2, 8192, 4096), (0, 0, 2, 3, MIB, 4096)])


def test_combined_area_places_runs_first_then_heat_with_copies():
    plan = plan_area(RUNS, HOT, ra_bytes=7 * 4096, mode="combined", layout="sequential", extent_bytes=MIB)
    assert plan["region"].tolist() == ["run"] * 5 + ["heat"] * 2
    assert plan["run_id"].tolist() == [0, 0, 0, 4, 4, -1, -1]
    # runs in rank order and run order; then the two hottest units, 2 and 5, in address order
    assert plan["unit_id"].tolist() == [5, 2, 3, 1, 4, 2, 5]
    assert plan["ra_offset_bytes"].tolist() == [k * 4096 for k in range(7)]
    assert plan["home_offset_bytes"].tolist() == [3 * MIB, 8192, MIB, 4096, MIB + 4096, 8192, 3 * MIB]


def test_a_run_that_does_not_fit_ends_the_run_region():
    plan = plan_area(RUNS, HOT, ra_bytes=4 * 4096, mode="combined", layout="heat", extent_bytes=MIB)
    assert list(zip(plan["region"].tolist(), plan["unit_id"].tolist(), strict=True)) == [
        ("run", 5), ("run", 2), ("run", 3), ("heat", 2)]
    runs_only = plan_area(RUNS, HOT, ra_bytes=4 * 4096, mode="run", layout="heat", extent_bytes=MIB)
    assert runs_only["unit_id"].tolist() == [5, 2, 3]
    heat_only = plan_area(RUNS, HOT, ra_bytes=4 * 4096, mode="heat", layout="organ-pipe", extent_bytes=MIB)
    assert heat_only["unit_id"].tolist() == [3, 2, 5, 0]


def test_plan_layouts_and_realizable_hits(spark):
    units = spark.createDataFrame(
        [("d", int(u), int(o), 4096) for u, o in zip(IDS, OFFSETS, strict=True)],
        "device string, unit_id long, offset_bytes long, size_bytes long")
    area = reorganized_area(spark.createDataFrame([("d", 400_000)], "device string, storage_used_bytes long"),
                            ra_share=0.1, ra_offset=0.3)
    assert [tuple(r) for r in area.collect()] == [("d", 400_000, 40_000, 120_000)]   # 9 units of 4 KiB fit
    runs = spark.createDataFrame([("d", 0, 0, 0, 0, 1), ("d", 0, 0, 0, 1, 4)],
                                 "device string, interval_id long, run_id long, rank long, position long, unit_id long")
    heat = spark.createDataFrame([("d", 0, int(u), float(h)) for u, h in zip(IDS, HEAT, strict=True)],
                                 "device string, interval_id long, unit_id long, heat double")
    plan = plan_layouts(runs, heat, units, area, mode="combined", layout="sequential")
    rows = [(r.region, r.run_id, r.unit_id, r.ra_offset_bytes, r.ra_address_bytes)
            for r in plan.orderBy("ra_offset_bytes").collect()]
    assert rows == [("run", 0, 1, 0, 120_000), ("run", 0, 4, 4096, 124_096)] + [
        ("heat", None, u, 8192 + 4096 * k, 128_192 + 4096 * k) for k, u in enumerate([0, 1, 2, 3, 4, 5])]
    # Interval 1 reads units 1, 2 and 9 (not planned): two of three find their data in the area.
    reads = spark.createDataFrame([("d", 1, 10, 1), ("d", 1, 11, 2), ("d", 1, 12, 9)],
                                  "device string, interval_id long, seq long, unit_id long")
    assert [tuple(r) for r in area_hits(plan, reads, shift=1).collect()] == [("d", 0, 3, 2)]
    assert [tuple(r) for r in area_hits(plan, reads, shift=0).collect()] == [("d", 1, 3, 0)]
