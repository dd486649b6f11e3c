"""Invariants over random small traces (Hypothesis): every request arrives and completes exactly once,
the clock never runs backwards, a disk serves one part at a time, a request ends with its last part,
sectors in equal sectors completed, a request forks into one part per disk on a stripe and one per extent on
a map that scatters its pieces, and the same seed gives the same run."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blockheat.sim import _kernel as K
from blockheat.sim.array import AsTraced, Concatenated, DiskArray, Extent, ExtentMap, RandomDisk, RemapEvent, Striped
from blockheat.sim.engine import ClosedLoop, SimConfig, Simulation
from blockheat.sim.records import Requests
from tests.sim.conftest import toy_spec

SPEC = toy_spec(cache={"segments": 2, "segment_sectors": 64, "read_ahead_sectors": 32}, bus_ms_per_sector=0.02)
CAP = SPEC.capacity_sectors


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.floats(0, 30_000), min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(1, 80), min_size=n, max_size=n))
    lbns = draw(st.lists(st.integers(0, 4000), min_size=n, max_size=n))
    devices = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    reads = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    kind = draw(st.sampled_from(["as_traced", "concat", "striped", "random", "extents", "scattered"]))
    layout = {"as_traced": AsTraced(), "concat": Concatenated(), "random": RandomDisk(),
              "striped": Striped(unit_sectors=draw(st.integers(1, 64))),
              # 7-sector extents alternating over the disks with a 7-sector gap: no two pieces are contiguous.
              "scattered": ExtentMap(tuple(Extent(7 * i, 7, i % 2, 14 * (i // 2)) for i in range(1429))),
              "extents": ExtentMap((Extent(0, 5000, 0, 0), Extent(5000, 5000, 1, 0)),
                                   (RemapEvent(draw(st.floats(0, 200_000)), 0, 1, 10_000, draw(st.booleans())),))}[kind]
    closed = draw(st.one_of(st.none(), st.integers(1, 3)))
    return {
        "kind": kind,
        "requests": Requests.build(np.cumsum(gaps), devices, lbns, sizes, reads),
        "array": DiskArray(2, layout, draw(st.sampled_from(["fcfs", "sstf", "clook"]))),
        "config": SimConfig(service=draw(st.sampled_from(["detailed", "constant", "expected"])), constant_ms=3.0,
                            event_log=True, per_request=True,
                            closed_loop=ClosedLoop(closed, think_ms=1.0) if closed else None,
                            zero_latency=draw(st.booleans())),
    }


def _run(s: dict[str, Any], seed: int) -> Simulation:
    sim = Simulation(SPEC, s["array"], s["requests"], s["config"], np.random.default_rng(seed),
                     device_sectors=[5000, 5000])
    assert sim.run().finished
    return sim


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_run_invariants(s: dict[str, Any]) -> None:
    sim = _run(s, seed=11)
    req: Requests = s["requests"]
    n = len(req)
    k = int(sim.core.si[K.SI_LOG_N])
    t, log = sim.out.log_t[:k], sim.out.log_i[:k]
    assert np.all(np.diff(t) >= 0)                                        # the clock never goes back
    for kind in (K.LOG_ARRIVE, K.LOG_DONE):
        assert sorted(log[log[:, 0] == kind, 1].tolist()) == list(range(n))   # exactly once each
    starts = log[log[:, 0] == K.LOG_START]
    dones = log[log[:, 0] == K.LOG_PART_DONE]
    assert len(starts) == len(dones)                                       # every part starts and ends once
    assert len(starts[starts[:, 1] < 0]) == sim.result().migration_ios + sim.result().destage_ios
    for d in (0, 1):                                                      # one part at a time per disk
        seq = [row[0] for row in log if row[2] == d and row[0] in (K.LOG_START, K.LOG_PART_DONE)]
        busy = 0
        for kind in seq:
            busy += 1 if kind == K.LOG_START else -1
            assert busy in (0, 1)
    arrive_t = np.empty(n)
    arrive_t[log[log[:, 0] == K.LOG_ARRIVE, 1]] = t[log[:, 0] == K.LOG_ARRIVE]
    done_t = np.empty(n)
    done_t[log[log[:, 0] == K.LOG_DONE, 1]] = t[log[:, 0] == K.LOG_DONE]
    last_part = np.zeros(n)
    fg = dones[:, 1] >= 0
    np.maximum.at(last_part, dones[fg, 1], t[log[:, 0] == K.LOG_PART_DONE][fg])
    np.testing.assert_allclose(done_t, last_part)                         # fork-join: ends with its last part
    np.testing.assert_allclose(sim.out.resp, done_t - arrive_t, rtol=1e-6, atol=0.01)
    assert np.all(sim.out.out_queue >= 0)
    assert np.all(sim.out.out_service > 0)
    assert np.all(sim.out.resp >= sim.out.out_queue)
    if s["config"].closed_loop is None:
        np.testing.assert_allclose(arrive_t, req.arrival_us)
    parts = np.bincount(starts[starts[:, 1] >= 0, 1], minlength=n)
    first = req.device.astype(np.int64) * 5000 + req.lbn                 # logical (device_sectors 5000 each)
    last = first + req.sectors - 1
    if s["kind"] == "striped":                                            # one part per disk touched
        unit = s["array"].layout.unit_sectors
        np.testing.assert_array_equal(parts, np.minimum(2, last // unit - first // unit + 1))
    elif s["kind"] == "scattered":                                        # one part per extent touched
        np.testing.assert_array_equal(parts, last // 7 - first // 7 + 1)
    res = sim.result()
    assert res.sectors_read == int(req.sectors[req.is_read].sum())
    assert res.sectors_written == int(req.sectors[~req.is_read].sum())
    again = _run(s, seed=11)
    np.testing.assert_array_equal(again.out.resp, sim.out.resp)
    np.testing.assert_equal(again.result().as_row(), res.as_row())
