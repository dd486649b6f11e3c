"""The event engine: queueing theory (M/M/1, M/D/1), closed loops, queue disciplines, fork-join, layouts,
saturation, remap events with migration I/O, policies between run(until) calls, write-back, exact event
logs and determinism."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from blockheat.sim import _kernel as K
from blockheat.sim.array import AsTraced, Concatenated, DiskArray, Extent, ExtentMap, RandomDisk, RemapEvent, Striped
from blockheat.sim.engine import ClosedLoop, PolicyBase, SimConfig, Simulation, Window, run_with_policy
from blockheat.sim.records import Requests
from blockheat.sim.specs import load
from tests.sim.conftest import requests, run, toy_spec


def _poisson(rng: np.random.Generator, n: int, rate_per_s: float, cylinders_lbn: int = 19_000) -> Requests:
    t = np.cumsum(rng.exponential(1e6 / rate_per_s, n))
    return Requests.build(t, np.zeros(n), rng.integers(0, cylinders_lbn, n), np.ones(n), rng.random(n) < 0.5)


def _log(sim: Simulation) -> tuple[np.ndarray, np.ndarray]:
    n = int(sim.core.si[K.SI_LOG_N])
    return sim.out.log_t[:n], sim.out.log_i[:n]


def test_mm1_mean_response_matches_theory() -> None:
    # lambda = 50/s, mean service 10 ms: rho = 0.5, E[R] = 1 / (mu - lambda) = 20 ms.
    reqs = _poisson(np.random.default_rng(7), 200_000, 50.0)
    res = run(toy_spec(), DiskArray(1), reqs, seed=3, service="exponential", exponential_ms=10.0).result()
    assert res.mean_response_ms == pytest.approx(20.0, rel=0.03)
    assert res.mean_utilization == pytest.approx(0.5, rel=0.02)
    assert res.mean_queue_length == pytest.approx(1.0, rel=0.05)       # L = rho / (1 - rho)
    assert not res.saturated


def test_md1_mean_response_matches_theory() -> None:
    # Constant 10 ms service, lambda = 50/s: W = rho / (2 mu (1 - rho)) = 5 ms, R = 15 ms.
    reqs = _poisson(np.random.default_rng(8), 200_000, 50.0)
    res = run(toy_spec(), DiskArray(1), reqs, service="constant", constant_ms=10.0).result()
    assert res.mean_response_ms == pytest.approx(15.0, rel=0.03)
    assert res.mean_queue_ms == pytest.approx(5.0, rel=0.05)
    assert res.mean_service_ms == pytest.approx(10.0, rel=1e-9)


def test_closed_loop_keeps_the_outstanding_count() -> None:
    reqs = requests([(0.0, 0, 100 * i, 1, "R") for i in range(100)])
    two = run(toy_spec(), DiskArray(1), reqs, service="constant", constant_ms=10.0,
              closed_loop=ClosedLoop(outstanding=2), per_request=True)
    # Two always in the system on one FCFS disk: the first waits 10 ms, every later one 20 ms.
    np.testing.assert_allclose(two.out.resp[:3], [10_000, 20_000, 20_000])
    res = two.result()
    assert res.mean_response_ms == pytest.approx((10 + 99 * 20) / 100)
    assert res.max_outstanding == 2
    thinking = run(toy_spec(), DiskArray(1), reqs, service="constant", constant_ms=10.0,
                   closed_loop=ClosedLoop(outstanding=1, think_ms=5.0)).result()
    assert thinking.simulated_s * 1000 == pytest.approx(100 * 10 + 99 * 5)
    assert thinking.mean_utilization == pytest.approx(1000 / 1495)


def test_closed_loop_uses_each_requests_think_time() -> None:
    reqs = requests([(0.0, 0, 0, 1, "R"), (0.0, 0, 0, 1, "R"), (0.0, 0, 0, 1, "R")],
                    think_us=np.array([1000.0, 7000.0, 0.0]))
    sim = run(toy_spec(), DiskArray(1), reqs, service="constant", constant_ms=2.0,
              closed_loop=ClosedLoop(outstanding=1), event_log=True)
    t, i = _log(sim)
    arrivals = t[i[:, 0] == K.LOG_ARRIVE]
    np.testing.assert_allclose(arrivals, [0.0, 3000.0, 12_000.0])


@pytest.mark.parametrize(("scheduler", "order"), [("fcfs", [0, 1, 2, 3]), ("sstf", [0, 2, 3, 1]),
                                                   ("clook", [0, 3, 1, 2])])
def test_queue_disciplines_pick_in_their_order(scheduler: str, order: list[int]) -> None:
    # Cylinder c starts at lbn 200 c. The first request (cylinder 50) is in service while requests for
    # cylinders 90, 45 and 60 queue; then FCFS, SSTF and C-LOOK differ.
    cyl = [50, 90, 45, 60]
    reqs = requests([(float(k), 0, 200 * c, 1, "R") for k, c in enumerate(cyl)])
    sim = run(toy_spec(), DiskArray(1, scheduler=scheduler), reqs, service="constant", constant_ms=5.0,
              event_log=True)
    _t, i = _log(sim)
    started = i[i[:, 0] == K.LOG_START, 1]
    assert started.tolist() == order


def test_fork_join_response_is_the_slowest_part() -> None:
    # Sectors 4..35 striped in units of 8 over 4 idle disks: 4-7 and 32-35 both on disk 0, physically
    # contiguous there (sectors 4-7 and 8-11), so one part; 8-15, 16-23, 24-31 on disks 1-3.
    reqs = requests([(0.0, 0, 4, 32, "R")])
    sim = run(toy_spec(), DiskArray(4, Striped(unit_sectors=8)), reqs, event_log=True, per_request=True)
    t, i = _log(sim)
    parts = t[i[:, 0] == K.LOG_PART_DONE]
    assert sorted(i[i[:, 0] == K.LOG_PART_DONE, 2].tolist()) == [0, 1, 2, 3]
    assert sim.out.resp[0] == pytest.approx(parts.max())
    assert len(set(np.round(parts, 3))) > 1                 # the parts really finish at different times
    res = sim.result()
    assert res.disk_physical_ios == (1, 1, 1, 1)
    assert sim.out.out_service[0] == pytest.approx(float(sim.core.dk_f[:, K.DKF_BUSY].sum()))


def test_fork_join_waits_for_a_part_queued_behind_other_work() -> None:
    # Disk 1 is busy with request 0 when request 1 (parts on disks 0 and 1) arrives.
    reqs = requests([(0.0, 0, 8, 8, "R"), (1.0, 0, 0, 16, "R")])
    sim = run(toy_spec(), DiskArray(2, Striped(unit_sectors=8)), reqs, service="constant", constant_ms=10.0,
              per_request=True)
    np.testing.assert_allclose(sim.out.resp, [10_000.0, 19_999.0])
    np.testing.assert_allclose(sim.out.out_queue, [0.0, 9_999.0])


def test_layouts_place_requests_on_their_disks() -> None:
    spec = toy_spec()
    cap = spec.capacity_sectors                              # 20,000 sectors per disk
    reqs = requests([(0.0, 0, 10, 4, "R"), (1.0, 1, 10, 4, "W"), (2.0, 0, cap - 2, 4, "R")])
    as_traced = run(spec, DiskArray(2, AsTraced()), requests([(0.0, 0, 10, 4, "R"), (1.0, 1, 10, 4, "W")]))
    assert as_traced.result().disk_physical_ios == (1, 1)
    # Concatenated over 3 disks: device 1 starts after device 0's highest address; the last request of
    # device 0 straddles disks 0 and 1.
    concat = Simulation(spec, DiskArray(3, Concatenated()), reqs, SimConfig(), np.random.default_rng(1),
                        device_sectors=[cap + 2, 100])
    concat.run()
    assert concat.result().disk_physical_ios == (2, 2, 0)
    striped = run(spec, DiskArray(4, Striped(unit_sectors=4, width=2, first_disk=2)), requests(
        [(0.0, 0, 0, 4, "R"), (1.0, 0, 4, 4, "R"), (2.0, 0, 8, 4, "R")]))
    assert striped.result().disk_physical_ios == (0, 0, 2, 1)
    rnd = run(spec, DiskArray(4, RandomDisk()), _poisson(np.random.default_rng(1), 4000, 20.0), seed=5).result()
    assert all(900 < n < 1100 for n in rnd.disk_physical_ios)
    again = run(spec, DiskArray(4, RandomDisk()), _poisson(np.random.default_rng(1), 4000, 20.0), seed=5).result()
    other = run(spec, DiskArray(4, RandomDisk()), _poisson(np.random.default_rng(1), 4000, 20.0), seed=6).result()
    np.testing.assert_equal(again.as_row(), rnd.as_row())
    assert other.disk_physical_ios != rnd.disk_physical_ios


def test_as_traced_refuses_addresses_beyond_the_disk() -> None:
    with pytest.raises(ValueError, match=r"request 0 ends at sector 20001, beyond the disk capacity 20000"):
        Simulation(toy_spec(), DiskArray(1), requests([(0.0, 0, 19_999, 2, "R")]), SimConfig(),
                   np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"request 0 is on device 1, but the array has 1 disks"):
        Simulation(toy_spec(), DiskArray(1), requests([(0.0, 1, 0, 1, "R")]), SimConfig(), np.random.default_rng(0))


def test_saturation_is_reported_instead_of_huge_numbers() -> None:
    over = run(toy_spec(), DiskArray(1), _poisson(np.random.default_rng(2), 50_000, 120.0), service="constant",
               constant_ms=10.0).result()                              # rho = 1.2
    assert over.saturated
    assert over.mean_response_ms == np.inf
    assert over.p99_response_ms_read == np.inf
    assert over.hottest_utilization > 0.99
    under = run(toy_spec(), DiskArray(1), _poisson(np.random.default_rng(2), 50_000, 90.0), service="constant",
                constant_ms=10.0).result()                             # rho = 0.9
    assert not under.saturated
    assert np.isfinite(under.mean_response_ms)
    sim = Simulation(toy_spec(), DiskArray(1), _poisson(np.random.default_rng(2), 50_000, 500.0),
                     SimConfig(service="constant", constant_ms=10.0, max_outstanding=500), np.random.default_rng(0))
    status = sim.run()
    assert status.saturated
    assert not status.finished
    assert sim.result().saturated
    assert int(sim.core.si[K.SI_ARRIVED]) < 50_000                     # stopped early


def _two_extents() -> ExtentMap:
    return ExtentMap((Extent(0, 1000, 0, 0), Extent(1000, 1000, 0, 1000)),
                     (RemapEvent(time_us=50_000.0, extent=1, disk=1, physical_start=0, migrate=True),))


def test_remap_event_moves_an_extent_and_costs_migration_io() -> None:
    reqs = requests([(10_000.0 * k, 0, 1000 + 8 * k, 8, "R") for k in range(10)])
    sim = run(toy_spec(), DiskArray(2, _two_extents()), reqs, event_log=True)
    res = sim.result()
    assert res.remaps == 1
    assert res.migration_ios == 2
    assert res.migration_mb == pytest.approx(2 * 1000 * 512 / 1e6)
    # The copy is one read of 1000 sectors on disk 0 then one write of 1000 on disk 1.
    assert (res.migration_ios_read, res.migration_ios_write) == (1, 1)
    assert res.migration_mb_read == res.migration_mb_write == pytest.approx(1000 * 512 / 1e6)
    assert res.migration_busy_ms_read + res.migration_busy_ms_write == pytest.approx(res.migration_busy_ms)
    # The foreground is all reads, so disk 1's write busy time is the copy's write and disk 0 has none.
    span_ms = res.simulated_s * 1000.0
    assert res.disk_utilization_write[0] == 0.0
    assert res.disk_utilization_write[1] * span_ms == pytest.approx(res.migration_busy_ms_write)
    assert res.migration_busy_ms_read > 0.0
    assert res.disk_physical_ios == (5 + 1, 5 + 1)       # before / after 50 ms, plus the copy's read / write
    t, i = _log(sim)
    assert t[i[:, 0] == K.LOG_REMAP].tolist() == [50_000.0]
    assert sim.layout.ext_disk.tolist() == [0, 1]


class _MoveOnce(PolicyBase):
    interval_us = 30_000.0

    def __init__(self) -> None:
        self.windows: list[Window] = []

    def on_interval(self, sim: Simulation, window: Window) -> Sequence[RemapEvent]:
        self.windows.append(window)
        if len(self.windows) == 1:
            return (RemapEvent(sim.now_us, extent=0, disk=1, physical_start=5000, migrate=False),)
        return ()


def test_policy_remaps_between_run_calls() -> None:
    reqs = requests([(10_000.0 * k, 0, 8 * k, 8, "W") for k in range(10)])
    lay = ExtentMap((Extent(0, 1000, 0, 0), Extent(1000, 1000, 0, 1000)))
    sim = Simulation(toy_spec(), DiskArray(2, lay), reqs, SimConfig(), np.random.default_rng(0))
    policy = _MoveOnce()
    status = run_with_policy(sim, policy)
    res = sim.result()
    assert status.finished
    assert res.remaps == 1
    assert res.migration_ios == 0
    assert res.disk_physical_ios == (4, 6)                           # requests at 0..30 ms stay on disk 0
    first = policy.windows[0]
    assert (first.start_us, first.end_us, first.first_request, first.end_request) == (0.0, 30_000.0, 0, 4)


def test_run_until_and_step_give_the_same_run() -> None:
    reqs = _poisson(np.random.default_rng(4), 3000, 60.0)
    whole = run(toy_spec(), DiskArray(1, scheduler="sstf"), reqs, per_request=True)
    parts = Simulation(toy_spec(), DiskArray(1, scheduler="sstf"), reqs, SimConfig(per_request=True),
                       np.random.default_rng(1))
    for t in np.linspace(0, reqs.arrival_us[-1], 7):
        parts.run(until=float(t))
        assert parts.now_us == pytest.approx(float(t)) or parts.now_us >= t
    for _ in range(50):
        parts.step()
    parts.run()
    np.testing.assert_array_equal(parts.out.resp, whole.out.resp)
    np.testing.assert_equal(parts.result().as_row(), whole.result().as_row())
    with pytest.raises(ValueError, match="before the current time"):
        parts.run(until=0.0)


def test_write_back_finishes_writes_at_bus_speed_and_destages_later() -> None:
    spec = toy_spec(cache={"segments": 2, "segment_sectors": 256, "read_ahead_sectors": 0, "write_back": True},
                    bus_ms_per_sector=0.05)
    reqs = requests([(50_000.0 * k, 0, 4000 * k, 8, "W") for k in range(4)])
    sim = run(spec, DiskArray(1), reqs, per_request=True)
    np.testing.assert_allclose(sim.out.resp, 300.0 + 8 * 50.0)
    res = sim.result()
    assert res.destage_ios == 4
    assert res.physical_ios_write == 0
    assert float(sim.core.dk_f[0, K.DKF_BUSY]) > 4 * 700.0            # the destages kept the disk busy


def test_event_log_of_one_request_is_exact() -> None:
    sim = run(toy_spec(), DiskArray(1), requests([(100.0, 0, 10, 5, "R")]), event_log=True)
    t, i = _log(sim)
    # Arrival at 100 us, start, part done and request done at 100 + 200 (overhead) -> slot 3, wait 7 slots,
    # read 5: 1500 us.
    assert i.tolist() == [[K.LOG_ARRIVE, 0, -1], [K.LOG_START, 0, 0], [K.LOG_PART_DONE, 0, 0], [K.LOG_DONE, 0, -1]]
    np.testing.assert_allclose(t, [100.0, 100.0, 1500.0, 1500.0])


def test_time_series_adds_up_to_the_run() -> None:
    from blockheat.sim.stats import timeseries

    reqs = _poisson(np.random.default_rng(9), 5000, 50.0)
    sim = run(toy_spec(), DiskArray(1), reqs, service="constant", constant_ms=10.0, interval_ms=10_000.0)
    ts = timeseries(sim)
    res = sim.result()
    assert sum(ts.column("arrivals").to_pylist()) == sum(ts.column("completions").to_pylist()) == 5000
    busy = np.array(ts.column("mean_utilization").to_pylist()) * 10_000.0
    assert busy.sum() == pytest.approx(5000 * 10.0)
    assert ts.num_rows == int(res.simulated_s * 1000 // 10_000) + 1 or ts.num_rows == int(
        (reqs.arrival_us[-1] / 1000 + 10) // 10_000) + 1


def test_c2247a_spec_runs_an_array_of_eight_with_background_traffic() -> None:
    from blockheat.sim.workloads import mix, poisson_background

    spec = load("hp_c2247a")
    rng = np.random.default_rng(11)
    volume = 8 * (spec.capacity_sectors // 64 * 64)
    trace = _poisson(rng, 20_000, 200.0, cylinders_lbn=volume - 16)
    trace = Requests.build(trace.arrival_us, trace.device, trace.lbn, np.full(len(trace), 16), trace.is_read)
    bg = poisson_background(rng, rate_per_s=40.0, start_us=0.0, end_us=float(trace.arrival_us[-1]),
                            address_sectors=spec.capacity_sectors, size_sectors=16)
    sim = Simulation(spec, DiskArray(8, Striped(unit_sectors=64), scheduler="clook"), mix(trace, bg),
                     SimConfig(), np.random.default_rng(3), device_sectors=[volume])
    assert sim.run().finished
    res = sim.result()
    assert res.requests == 20_000
    assert res.bg_requests == len(bg)
    assert res.sectors_read + res.sectors_written == 16 * 20_000
    assert 0.2 < res.mean_utilization < 0.9
    assert res.p50_response_ms < res.p95_response_ms < res.max_response_ms


def test_closed_loop_trace_with_open_loop_background() -> None:
    from blockheat.sim.workloads import mix, poisson_background

    fg = requests([(0.0, 0, 64 * k, 64, "R") for k in range(200)])
    bg = poisson_background(np.random.default_rng(3), rate_per_s=50.0, start_us=0.0, end_us=2e6,
                            address_sectors=20_000, size_sectors=16)
    sim = run(toy_spec(), DiskArray(1, scheduler="clook"), mix(fg, bg), closed_loop=ClosedLoop(outstanding=2),
              event_log=True)
    res = sim.result()
    assert res.requests == 200
    assert res.bg_requests == len(bg)
    t, i = _log(sim)
    bg_idx = np.flatnonzero(mix(fg, bg).is_background)
    arrivals = dict(zip(i[i[:, 0] == K.LOG_ARRIVE, 1].tolist(), t[i[:, 0] == K.LOG_ARRIVE].tolist(), strict=True))
    np.testing.assert_allclose([arrivals[k] for k in bg_idx], mix(fg, bg).arrival_us[bg_idx])  # open loop


def test_independent_spindles_wait_for_the_slowest_rotation() -> None:
    # One-sector reads on each of 4 disks at once, far apart in time, head already on the cylinder, cache
    # off: the rotational wait is uniform on [0, ROT); a request waits for the slowest of its 4 disks:
    # E[max of 4 uniforms] = 4/5 ROT with independent spindles, 1/2 ROT with synchronized ones.
    from dataclasses import replace

    spec = load("hp_c2247a")
    spec = replace(spec, cache=replace(spec.cache, segments=0, read_ahead_sectors=0))
    spt = spec.zones[0].sectors_per_track
    rng = np.random.default_rng(5)
    n = 3000
    j = rng.integers(0, spt // 4, n)
    req = Requests.build(np.arange(n) * 50_000.0 + rng.random(n) * 20_000.0, np.zeros(n), 4 * j, np.full(n, 4),
                         np.ones(n, dtype=bool))
    rot = spec.rotation_ms
    means = {}
    for spindles in ("synchronized", "independent"):
        sim = Simulation(spec, DiskArray(4, Striped(unit_sectors=1)), req, SimConfig(spindles=spindles),
                         np.random.default_rng(1), device_sectors=[4 * spt])
        sim.run()
        means[spindles] = float(np.mean(sim.out.resp)) / 1000.0
        phase = sim.core.dk_f[:, K.DKF_PHASE] / 1000.0
        if spindles == "synchronized":
            assert (phase == 0).all()
        else:
            assert len(set(phase.tolist())) == 4
            assert ((phase >= 0) & (phase < rot)).all()
    assert means["independent"] - means["synchronized"] == pytest.approx(0.3 * rot, abs=0.03 * rot)
    with pytest.raises(ValueError, match="spindles must be one of"):
        SimConfig(spindles="sync")


def test_utilization_and_queue_length_split_by_read_and_write() -> None:
    # Constant 10 ms service, one disk: a read and a write arrive together at 0 (read first, FCFS), another
    # write at 20 ms. The read is in the system for [0, 10), the first write for [0, 20), the second for
    # [20, 30): over the 30 ms span, reads are busy 10 ms and in the system 10 ms, writes 20 and 30 ms.
    req = Requests.build(np.array([0.0, 0.0, 20_000.0]), np.zeros(3), np.array([0, 100, 200]), np.ones(3),
                         np.array([True, False, False]))
    sim = Simulation(load("hp_c2247a"), DiskArray(1), req, SimConfig(service="constant", constant_ms=10.0),
                     np.random.default_rng(0))
    sim.run()
    r = sim.result()
    assert r.mean_utilization == pytest.approx(1.0)
    assert (r.mean_utilization_read, r.mean_utilization_write) == (pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert r.disk_utilization_read == (pytest.approx(1 / 3),)
    assert r.mean_queue_length == pytest.approx(40 / 30)
    assert (r.mean_queue_length_read, r.mean_queue_length_write) == (pytest.approx(10 / 30), pytest.approx(1.0))
    assert r.disk_queue_length_write == (pytest.approx(1.0),)


@pytest.mark.parametrize("scheduler", ["sstf", "clook"])
def test_long_queues_are_searched_by_cylinder_with_the_same_picks(scheduler: str) -> None:
    # An overloaded disk (rho 1.5 on the HP C2247A's 1981 cylinders, mixed sizes, ties at equal distance
    # likely with 200 addresses) builds queues of thousands: searched by cylinder past K.QUEUE_SCAN_MAX, scanned
    # below it. Forcing either way everywhere (0: always by cylinder; 2^62: always a scan) gives the same event
    # log, response by response, and the default mixes both.
    spec = load("hp_c2247a")
    rng = np.random.default_rng(5)
    n = 6000
    reqs = Requests.build(np.cumsum(rng.exponential(1e6 / 150.0, n)), np.zeros(n),
                          rng.integers(0, 200, n) * (spec.capacity_sectors // 200), rng.choice([1, 16, 64], n),
                          rng.random(n) < 0.6)
    logs = {}
    for scan_max in (0, 1 << 62, None):
        sim = Simulation(spec, DiskArray(1, scheduler=scheduler), reqs, SimConfig(event_log=True, per_request=True),
                         np.random.default_rng(0))
        if scan_max is not None:
            sim.core.si[K.CI_QSCAN] = scan_max
        sim.run()
        logs[scan_max] = (*_log(sim), sim.out.resp.copy(), int(sim.core.dk_i[0, K.DK_MAXQ]))
    scan, indexed, default = logs[1 << 62], logs[0], logs[None]
    assert scan[3] > 8 * K.QUEUE_SCAN_MAX                                # the queue did grow long
    for got in (indexed, default):
        assert np.array_equal(got[0], scan[0])
        assert np.array_equal(got[1], scan[1])
        assert np.array_equal(got[2], scan[2], equal_nan=True)
