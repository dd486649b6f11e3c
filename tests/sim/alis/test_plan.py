"""ALIS plans without Spark (sim.alis.plan): the layout job's worked example (tests/libs/alis/test_jobs.py)
reproduced as directories, the modes, plan_window, and the aged chain checked against the Spark pipeline's
pinned figures on the bundled hplajw week. No SparkSession."""
from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from blockheat.sim.alis.params import AlisParams
from blockheat.sim.alis.plan import (
    interval_states,
    plan_schedule,
    plan_schedule_chunks,
    plan_trace_window,
    plan_window,
    volume_units,
    volumes_for,
)
from blockheat.sim.records import Requests
from blockheat.sim.redirect import REGION_HEAT, REGION_RUN, Directory

# test_jobs.py's hand trace in 4 KiB sectors: units A 0, B 5, C 9, D 20, X 39 -> ids 0..4; intervals of 1000 s.
BLOCK = {"A": 0, "B": 5, "C": 9, "D": 20, "X": 39}
INTERVALS = ("A B C A B C", "A B C D", "A B C")
KIB4 = 4096


def hand_requests() -> Requests:
    rows = [(i * 1e9 + k * 1e6, BLOCK[u], True) for i, text in enumerate(INTERVALS) for k, u in enumerate(text.split())]
    rows.append((500e6, BLOCK["X"], False))          # X written once in interval 0
    rows.sort()
    return Requests.build(np.array([r[0] for r in rows]), np.zeros(len(rows)), np.array([r[1] for r in rows]),
                          np.ones(len(rows)), np.array([r[2] for r in rows]))


def entries(d: Directory) -> list[tuple[str, int, int, int, int]]:
    """(region, run_id, unit_id, home block, RA block) in RA order."""
    names = {REGION_RUN: "run", REGION_HEAT: "heat"}
    return [(names[int(r)], int(k), int(u), int(h), int(a))
            for r, k, u, h, a in zip(d.region, d.run_id, d.unit_id, d.home_sector, d.ra_sector, strict=True)]


def schedule(**kw):  # type: ignore[no-untyped-def]
    vols, dv, do = volumes_for([40], concatenated=False, ra_share=0.15, ra_offset=0.30)
    return vols, plan_schedule(hand_requests(), vols, AlisParams(tau=2, interval_s=1000, **kw), sector_size=KIB4,
                               device_volume=dv, device_offset=do)


def test_realizable_plans_match_the_layout_jobs_worked_example() -> None:
    vols, plans = schedule()
    assert (vols[0].ra_start, vols[0].ra_sectors) == (12, 6)          # 40 blocks used: 6 at block 12
    assert [(p.interval_id, p.time_us) for p in plans] == [(1, 1e9), (2, 2e9)]
    # Built at the end of interval 0: run A B C, then the three hottest units (A, B, C; X written once).
    assert entries(plans[0].directory) == [("run", 0, 0, 0, 0), ("run", 0, 1, 5, 1), ("run", 0, 2, 9, 2),
                                           ("heat", -1, 0, 0, 3), ("heat", -1, 1, 5, 4), ("heat", -1, 2, 9, 5)]
    # The same rows as the Spark job's alis_layout plan of interval 0 (test_jobs.py).
    rows = plans[0].directory.to_arrow(vols, sector_size=KIB4, volume_names=["d0"]).to_pylist()
    assert [(r["ra_offset_bytes"] // KIB4, r["region"], r["run_id"], r["unit_id"], r["home_offset_bytes"] // KIB4,
             r["ra_address_bytes"]) for r in rows] == [
        (0, "run", 0, 0, 0, 49_152), (1, "run", 0, 1, 5, 53_248), (2, "run", 0, 2, 9, 57_344),
        (3, "heat", None, 0, 0, 61_440), (4, "heat", None, 1, 5, 65_536), (5, "heat", None, 2, 9, 69_632)]
    # End of interval 1: aged graph 0.8 x (A B C D) + 0.2 x interval 0 -> run A B C D (D's 0.8 + 0.4 clears
    # 0.4 x 1.5); aged heat A, B, C 1.12, D 0.8, X 0.16: two blocks left take A and B.
    assert entries(plans[1].directory) == [("run", 0, 0, 0, 0), ("run", 0, 1, 5, 1), ("run", 0, 2, 9, 2),
                                           ("run", 0, 3, 20, 3), ("heat", -1, 0, 0, 4), ("heat", -1, 1, 5, 5)]


def test_a_traces_window_plan_in_bytes() -> None:
    # The hand trace as `requests` rows (bytes): the placement serving interval 1 is the Spark job's plan 0.
    r = hand_requests()
    n = len(r)
    table = pa.table({"device": ["d0"] * n, "seq": list(range(n)), "ts_us": r.arrival_us.astype(np.int64),
                      "op": ["R" if x else "W" for x in r.is_read], "offset_bytes": r.lbn * KIB4,
                      "size_bytes": [KIB4] * n})
    plan = plan_trace_window(table, AlisParams(tau=2, interval_s=1000), window=1, sector_size=KIB4)
    assert (plan.devices, plan.volume_names, plan.window) == (("d0",), ("d0",), 1)
    assert [(x["device"], x["region"], x["unit_id"], x["ra_address_bytes"]) for x in plan.to_arrow().to_pylist()] == [
        ("d0", "run", 0, 49_152), ("d0", "run", 1, 53_248), ("d0", "run", 2, 57_344),
        ("d0", "heat", 0, 61_440), ("d0", "heat", 1, 65_536), ("d0", "heat", 2, 69_632)]
    both = pa.concat_tables([table, table.set_column(0, "device", pa.array(["d1"] * n))])
    joined = plan_trace_window(both, AlisParams(tau=2, interval_s=1000), window=1, sector_size=KIB4,
                               concatenated=True)
    assert (joined.volume_names, joined.device_offset.tolist(), joined.volumes[0].size_sectors) == (
        ("d0+d1",), [0, 40], 80)
    with pytest.raises(ValueError, match=r"device_sectors has 1 sizes for the devices \['d0', 'd1'\]"):
        plan_trace_window(both, AlisParams(), window=1, sector_size=KIB4, device_sectors=[40])


def test_lookahead_plans_use_each_interval_alone() -> None:
    _, plans = schedule(plan="lookahead")
    assert [p.interval_id for p in plans] == [0, 1, 2]
    # Interval 1 on its own: run A B C D; counts 1 each, the two left blocks go to A and B (lower ids).
    assert entries(plans[1].directory) == [("run", 0, 0, 0, 0), ("run", 0, 1, 5, 1), ("run", 0, 2, 9, 2),
                                           ("run", 0, 3, 20, 3), ("heat", -1, 0, 0, 4), ("heat", -1, 1, 5, 5)]
    assert entries(plans[2].directory) == entries(plans[0].directory)   # A B C again, X not written


@pytest.mark.parametrize(("mode", "expected"), [
    # Heat alone: A, B, C (1.6) and X (0.8) all fit in 6 blocks, laid out by home address.
    ("heat", [("heat", -1, 0, 0, 0), ("heat", -1, 1, 5, 1), ("heat", -1, 2, 9, 2), ("heat", -1, 4, 39, 3)]),
    ("run", [("run", 0, 0, 0, 0), ("run", 0, 1, 5, 1), ("run", 0, 2, 9, 2)]),
])
def test_modes_fill_the_area_with_their_own_copies(mode, expected) -> None:  # type: ignore[no-untyped-def]
    _, plans = schedule(mode=mode)
    assert entries(plans[0].directory) == expected


def test_background_requests_are_not_planned_on() -> None:
    # Lachesis-style competing reads, repeated, at block 30: never hot, never in a run.
    r = hand_requests()
    noise = np.array([0.5e9 + k * 1e6 for k in range(20)])
    arrival = np.concatenate([r.arrival_us, noise])
    order = np.argsort(arrival, kind="stable")
    bg = Requests.build(arrival[order], np.zeros(len(arrival)), np.concatenate([r.lbn, np.full(20, 30)])[order],
                        np.ones(len(arrival)), np.concatenate([r.is_read, np.ones(20, bool)])[order],
                        background=np.concatenate([np.zeros(len(r), bool), np.ones(20, bool)])[order])
    vols, plans = schedule()
    with_bg = plan_schedule(bg, vols, AlisParams(tau=2, interval_s=1000), sector_size=KIB4)
    # Unit ids shift (block 30 is a unit, between D and X), the copies do not.
    assert [[(e[0], e[3], e[4]) for e in entries(p.directory)] for p in with_bg] == \
        [[(e[0], e[3], e[4]) for e in entries(p.directory)] for p in plans]


def test_plan_window_is_the_schedules_directory() -> None:
    vols, plans = schedule()
    params = AlisParams(tau=2, interval_s=1000)
    assert entries(plan_window(hand_requests(), vols, params, window=2, sector_size=KIB4)) == \
        entries(plans[1].directory)
    assert len(plan_window(hand_requests(), vols, params, window=0, sector_size=KIB4)) == 0
    ahead = replace(params, plan="lookahead")
    assert entries(plan_window(hand_requests(), vols, ahead, window=1, sector_size=KIB4)) == \
        entries(schedule(plan="lookahead")[1][1].directory)
    with pytest.raises(ValueError, match="window must be >= 0, got -1"):
        plan_window(hand_requests(), vols, params, window=-1, sector_size=KIB4)


def test_concatenated_devices_share_one_volume() -> None:
    # Device 1's requests sit after device 0's 40 sectors; the same extent on two devices is two units.
    reqs = Requests.build(np.array([0.0, 1.0, 2.0]), np.array([0, 1, 1]), np.array([5, 5, 0]), np.array([1, 1, 2]),
                          np.array([True, True, False]))
    vols, dv, do = volumes_for([40, 10], concatenated=True, ra_share=0.1, ra_offset=0.5)
    assert (len(vols), vols[0].size_sectors, vols[0].ra_start, vols[0].ra_sectors) == (1, 50, 25, 5)
    assert (dv.tolist(), do.tolist()) == ([0, 0], [0, 40])
    units = volume_units(reqs, 1, device_volume=dv, device_offset=do)[0]
    assert units.unit.tolist() == [0, 2, 1]
    assert (units.home_sector.tolist(), units.sectors.tolist()) == ([5, 40, 45], [1, 2, 1])


def test_the_aged_chain_matches_the_spark_pipeline_on_hplajw() -> None:
    # tests/libs/alis/test_hplajw.py pins, per device, the units, the edges of days 0 and 6, and the runs kept
    # over the week (with their units) of jobs/alis_graph.py's defaults; the same chain in numpy:
    from blockheat.libs.experiments.placement import load_hplajw
    from blockheat.sim.alis.runs import discover_runs
    from tests.libs.alis.test_hplajw import PINNED

    w = load_hplajw()                                   # addresses in the trace's 256-byte sectors
    r = w.requests
    ends = np.zeros(2, np.int64)
    np.maximum.at(ends, r.device, r.lbn + r.sectors)
    vols, dv, do = volumes_for(ends, concatenated=False, ra_share=0.15, ra_offset=0.30)
    params = AlisParams(mode="run")
    units = volume_units(r, 2, device_volume=dv, device_offset=do)
    got = {str(v): [len(units[v].home_sector), 0, 0, 0, 0] for v in (0, 1)}
    for k, states in interval_states(r, vols, params, device_volume=dv, device_offset=do, sector_size=256):
        for st in states:
            fig = got[str(st.volume)]
            if k in (0, 6):
                fig[1 if k == 0 else 2] = len(st.src)
            found = discover_runs(st.src, st.dst, st.weight, tau=9, f=1.0, threshold=0.1, min_length=9)
            fig[3] += len(found)
            fig[4] += sum(len(members) for _, members in found)
    assert {d: tuple(v) for d, v in got.items()} == PINNED


@pytest.mark.parametrize(("mode", "plan", "concatenated"), [
    ("combined", "realizable", False), ("run", "lookahead", True), ("heat", "realizable", True)])
def test_a_schedule_planned_over_chunks_is_the_whole_schedule_on_hplajw(mode: str, plan: str,
                                                                         concatenated: bool) -> None:
    # The week in chunks that end inside days, on a day's last request and one request long: the same
    # directories, every interval, as one plan over the whole week (the units, counts and pair counts merged).
    from blockheat.libs.experiments.placement import load_hplajw

    r = load_hplajw().requests
    ends = np.zeros(2, np.int64)
    np.maximum.at(ends, r.device, r.lbn + r.sectors)
    vols, dv, do = volumes_for(ends, concatenated=concatenated, ra_share=0.15, ra_offset=0.30)
    params = AlisParams(mode=mode, plan=plan, interval_s=86_400.0)
    whole = plan_schedule(r, vols, params, sector_size=256, device_volume=dv, device_offset=do)
    day_end = int(np.searchsorted(r.arrival_us, 86_400e6)) - 1
    bounds = sorted({0, 1000, 1001, day_end, day_end + 1, 9000, 20_000, 20_001, 37_777, len(r)})
    passes = []

    def chunks():  # type: ignore[no-untyped-def]
        passes.append(1)
        return (r.rows(a, b) for a, b in itertools.pairwise(bounds))

    got = plan_schedule_chunks(chunks, float(r.arrival_us[-1]), vols, params, sector_size=256, device_volume=dv,
                               device_offset=do)
    assert len(passes) == 2                                  # the units, then the intervals
    assert [(g.interval_id, g.time_us) for g in got] == [(w.interval_id, w.time_us) for w in whole]
    assert len(whole) == (7 if plan == "lookahead" else 6)
    for g, w in zip(got, whole, strict=True):
        for name in ("volume", "region", "run_id", "unit_id", "home_sector", "sectors", "ra_sector"):
            assert getattr(g.directory, name).tolist() == getattr(w.directory, name).tolist()
    assert sum(len(w.directory) for w in whole) > 1000
    if mode != "heat":
        assert any((w.directory.region == REGION_RUN).any() for w in whole)


def test_the_parameters_take_the_cores_constants() -> None:
    # One definition each (sim.alis.runs, sim.alis.layout), shared by the parameters and the Spark jobs.
    from blockheat.sim.alis import layout, params, runs

    assert (params.THRESHOLD, params.THRESHOLD_COMBINED, params.LAYOUTS, params.MODES) == \
        (runs.THRESHOLD, runs.THRESHOLD_COMBINED, layout.LAYOUTS, layout.MODES) == \
        (0.1, 0.4, ("sequential", "packed", "heat", "organ-pipe"), ("heat", "run", "combined"))
    assert (AlisParams().run_threshold, AlisParams(mode="run").run_threshold, AlisParams(threshold=0.3).run_threshold,
            AlisParams().min_length, AlisParams(min_run_length=4).min_length) == (0.4, 0.1, 0.3, 9, 4)


@pytest.mark.parametrize(("kw", "message"), [
    ({"mode": "runs"}, "ALIS mode must be one of heat, run, combined, got 'runs'"),
    ({"plan": "oracle"}, "ALIS plan must be one of realizable, lookahead, got 'oracle'"),
    ({"ra_share": 0.0}, r"ALIS ra_share must be in \(0, 1\], got 0.0"),
    ({"interval_s": 0}, "ALIS interval_s must be a positive number, got 0"),
    ({"tau": 0}, "ALIS tau .context size. must be >= 1, got 0"),
    ({"beta": 1.5}, r"ALIS beta must be in \[0, 1\], got 1.5"),
    ({"heat_layout": "zigzag"}, "ALIS heat_layout must be one of sequential, packed, heat, organ-pipe, got 'zigzag'"),
])
def test_bad_parameters_name_the_knob(kw, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        AlisParams(**kw)
