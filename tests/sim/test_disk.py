"""The detailed disk model against hand-computed timings on the toy disk (10 ms per revolution, 100 us
per sector): rotation from the clock, seeks, track switches and skew, zero-latency access, overheads,
the read-ahead cache, and the two simple modes."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from numba import njit

from blockheat.sim import _kernel as K
from blockheat.sim.array import DiskArray
from blockheat.sim.disk import (
    DI_LAST_END,
    DI_RA_SEG,
    F_HIT,
    F_PHYSICAL,
    cylinder_of,
    detailed_service,
    expected_service,
    locate,
    media_access,
    mod_positive,
)
from blockheat.sim.spec import DiskSpec
from tests.sim.conftest import requests, run, toy_spec


def _state(spec: DiskSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    dk_i = np.zeros((1, K.DK_I), dtype=np.int64)
    dk_i[0, [DI_RA_SEG, DI_LAST_END]] = -1        # no read-ahead, no previous request
    seg = np.full((1, spec.cache.segments + 1, 3), -1.0)      # the read segments and the write segment
    seg[:, :, 2] = 0.0
    dk_f = np.zeros((1, K.DK_F))
    dk_f[:, K.DKF_CLOCK] = 1.0                 # the disk's own clock runs at nominal speed (synchronized)
    return dk_i, dk_f, seg


def _media(spec: DiskSpec, lbn: int, n: int, t: float = 200.0, cyl: int = 0, head: int = 0,
           zero_latency: bool = False) -> tuple[float, float, int, int]:
    a = spec.compile()
    return media_access(a.zones, a.seek_us, a.params, cyl, head, t, t, lbn, n, False, zero_latency)


def test_locate_walks_zones_tracks_and_skew() -> None:
    spec = load_two_zone()
    a = spec.compile()
    # Zone 0: cylinders 0-9, 50 sectors per track, 2 surfaces, 1 spare track -> 19 tracks = 950 sectors.
    assert locate(a.zones, 2, 0) == (0, 0, 0, 50, 0)
    assert locate(a.zones, 2, 50) == (0, 1, 0, 50, 3)          # head switch: track skew 3
    assert locate(a.zones, 2, 100) == (1, 0, 0, 50, 10)        # cylinder switch: 3 + cylinder skew 7
    assert locate(a.zones, 2, 949) == (9, 0, 49, 50, (9 * 10) % 50)
    assert locate(a.zones, 2, 950) == (10, 0, 0, 40, 0)        # the spare track is skipped; zone 1 starts
    assert spec.capacity_sectors == 950 + 10 * 2 * 40


def test_cylinder_of_is_locates_cylinder_on_every_block() -> None:
    spec = load_two_zone()
    a = spec.compile()
    assert [cylinder_of(a.zones, 2, lbn) for lbn in range(spec.capacity_sectors)] == \
        [locate(a.zones, 2, lbn)[0] for lbn in range(spec.capacity_sectors)]


@njit(cache=False)
def _mods(t: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    fast, lib = np.empty(len(t)), np.empty(len(t))
    for i in range(len(t)):
        fast[i] = mod_positive(t[i], m[i])
        lib[i] = t[i] % m[i]
    return fast, lib


def test_mod_positive_is_the_float_remainder_bit_for_bit() -> None:
    """The rotational position's remainder (sim.disk.mod_positive) against numba's %, whose result is exact: on
    random times up to 10^13 us, on multiples of a revolution and their neighbouring doubles (where the quotient
    rounds up), and on the cases left to the library (negative, -0.0, a quotient past 2^52, NaN, infinity)."""
    rng = np.random.default_rng(7)
    rot = np.array([5988.023952095808, 6000.0, 8333.333333333334, 11111.11111111111, 0.1, 3.0])
    t = np.concatenate([rng.random(200_000) * 10.0 ** rng.integers(0, 14, 200_000), np.array([0.0, -0.0])])
    m = rng.choice(rot, len(t))
    k = rng.integers(1, 2 ** 40, 100_000).astype(np.float64)
    # Multiples of two revolutions: t x (1 / m) rounds above the quotient's integer for 3,600 rpm, below it for
    # 4,002 rpm (HP 335H; 14,992.503748125937 us), where the one fused multiply-add finds the remainder at m or past.
    rev = np.repeat([rot[0], 60e6 / 4002], len(k) // 2)
    on = k * rev
    t = np.concatenate([t, on, np.nextafter(on, np.inf), np.nextafter(on, -np.inf), [-1.5, -6000.0, 1e300, np.nan,
                                                                                      np.inf]])
    m = np.concatenate([m, np.tile(rev, 3), [6000.0] * 5])
    # Both corrections are taken: the rounded quotient is one too large for some multiples, one too small for others.
    near = slice(len(t) - 3 * len(k) - 5, len(t) - 5, 50)
    off = [math.floor(x * (1.0 / r)) - math.floor(Fraction(x) / Fraction(r))
           for x, r in zip(t[near], m[near], strict=True)]
    assert off.count(1) > 0
    assert off.count(-1) > 0
    assert set(off) <= {-1, 0, 1}
    fast, lib = _mods(t, m)
    np.testing.assert_array_equal(fast.view(np.int64), lib.view(np.int64))
    assert ((fast[:-2] >= 0.0) & (fast[:-2] < m[:-2])).all()
    assert np.isnan(fast[-2:]).all()            # NaN and infinity give NaN


def load_two_zone() -> DiskSpec:
    return toy_spec(cylinders=20, zones=[
        {"first_cylinder": 0, "last_cylinder": 9, "sectors_per_track": 50, "track_skew": 3, "cylinder_skew": 7,
         "spare_tracks": 1},
        {"first_cylinder": 10, "last_cylinder": 19, "sectors_per_track": 40}])


def test_rotational_wait_is_read_from_the_clock() -> None:
    # At 200 us the head is over slot 2; sector 10 comes after 8 slots (800 us), then 5 sectors take 500 us.
    first, end, cyl, head = _media(toy_spec(), 10, 5)
    assert (first, end, cyl, head) == (pytest.approx(1100.0), pytest.approx(1500.0), 0, 0)
    # One full revolution later the same request costs exactly the same.
    assert _media(toy_spec(), 10, 5, t=10_200.0)[1] == pytest.approx(11_500.0)


def test_seek_by_cylinder_distance() -> None:
    # Cylinder 10 starts at lbn 2000: seek 1 + 0.01 * 10 ms lands at 1300 us (slot 13); wait 87 slots.
    assert _media(toy_spec(), 2000, 1)[1] == pytest.approx(10_100.0)


def test_track_boundary_costs_a_head_switch_and_waits_for_the_skewed_sector() -> None:
    # lbn 95..104: wait 93 slots to sector 95 (9500 us), read 5 to the end of the track (10000), switch
    # heads (10500, slot 5). Without skew sector 0 of the next track is at slot 0: wait 95 slots.
    assert _media(toy_spec(), 95, 10)[1] == pytest.approx(20_500.0)
    skewed = toy_spec(zones=[{"first_cylinder": 0, "last_cylinder": 99, "sectors_per_track": 100, "track_skew": 6}])
    assert _media(skewed, 95, 10)[1] == pytest.approx(11_100.0)


def test_zero_latency_reads_a_full_track_in_one_revolution() -> None:
    # Normal: wait 98 slots for sector 0, then a full revolution. Zero latency: start at once (slot 2).
    assert _media(toy_spec(), 0, 100)[1] == pytest.approx(20_000.0)
    assert _media(toy_spec(), 0, 100, zero_latency=True)[1] == pytest.approx(10_200.0)
    # A request that the head is not inside gains nothing.
    assert _media(toy_spec(), 50, 10, zero_latency=True)[1] == pytest.approx(_media(toy_spec(), 50, 10)[1])


def test_read_miss_service_adds_overhead_and_bus_after_media() -> None:
    spec = toy_spec(bus_ms_per_sector=0.05, read_bus_start_fraction=1.0)
    a = spec.compile()
    dk_i, dk_f, seg = _state(spec)
    svc, flags = detailed_service(a.zones, a.seek_us, a.params, dk_i, dk_f, seg, 0, 0.0, 10, 5, False, False, False)
    # 0.2 ms overhead, media done at 1500 us, then 5 x 50 us on the bus.
    assert svc == pytest.approx(1750.0)
    assert flags == F_PHYSICAL
    overlapped = toy_spec(bus_ms_per_sector=0.05, read_bus_start_fraction=0.0).compile()
    dk_i, dk_f, seg = _state(spec)
    svc, _ = detailed_service(overlapped.zones, overlapped.seek_us, overlapped.params, dk_i, dk_f, seg, 0, 0.0,
                              10, 5, False, False, False)
    assert svc == pytest.approx(1550.0)          # bus keeps pace with the media: last sector + 50 us


def test_write_settle_only_when_the_head_moves_and_may_be_negative() -> None:
    def write(spec: DiskSpec, lbn: int) -> float:
        a = spec.compile()
        dk_i, dk_f, seg = _state(spec)
        return detailed_service(a.zones, a.seek_us, a.params, dk_i, dk_f, seg, 0, 0.0, lbn, 5, True, False,
                                False)[0]
    # Same track: 0.3 ms overhead -> 300 us (slot 3), wait 7 slots, write 5; the settle is not added.
    assert write(toy_spec(write_settle_ms=0.4), 10) == pytest.approx(1500.0)
    # Head switch to track 1 (lbn 110 = head 1, sector 10): 300 + 500 + 400 settle = 1200 us (slot 12),
    # wait 98 slots, write 5 -> 11,500; with a settle of -0.4 ms: 400 us (slot 4), wait 6 -> 1500.
    assert write(toy_spec(write_settle_ms=0.4), 110) == pytest.approx(11_500.0)
    assert write(toy_spec(write_settle_ms=-0.4), 110) == pytest.approx(1500.0)
    # A settle more negative than the move leaves the move at zero, never below: 300 us, as on the track.
    assert write(toy_spec(write_settle_ms=-0.9), 110) == pytest.approx(1500.0)


def test_sequential_reread_hits_the_read_ahead_cache() -> None:
    spec = toy_spec(cache={"segments": 2, "segment_sectors": 256, "read_ahead_sectors": 128},
                    bus_ms_per_sector=0.01)
    reqs = requests([(0.0, 0, 0, 8, "R"), (20_000.0, 0, 8, 8, "R"), (40_000.0, 0, 5000, 8, "R")])
    sim = run(spec, DiskArray(1), reqs, per_request=True)
    res = sim.result()
    # The first and third are misses; the second is in the segment read ahead after the first.
    assert sim.out.out_service[1] == pytest.approx(100.0 + 8 * 10.0)
    assert (res.physical_ios_read, res.read_miss_ratio) == (2, pytest.approx(2 / 3))
    a = spec.compile()
    dk_i, dk_f, seg = _state(spec)
    detailed_service(a.zones, a.seek_us, a.params, dk_i, dk_f, seg, 0, 0.0, 0, 8, False, False, False)
    _, flags = detailed_service(a.zones, a.seek_us, a.params, dk_i, dk_f, seg, 0, 30_000.0, 0, 8, False, False,
                                False)
    assert flags == F_HIT                          # a plain re-read of the same blocks hits too
    _, flags = detailed_service(a.zones, a.seek_us, a.params, dk_i, dk_f, seg, 0, 31_000.0, 4, 4, True, False,
                                False)
    _, flags = detailed_service(a.zones, a.seek_us, a.params, dk_i, dk_f, seg, 0, 40_000.0, 0, 8, False, False,
                                False)
    assert flags == F_PHYSICAL                     # the write in between invalidated the segment


def test_expected_value_mode_equals_the_formula() -> None:
    spec = toy_spec()
    a = spec.compile()
    avg = spec.seek.average_ms(spec.cylinders)
    for lbn, n, write in ((0, 8, False), (12_345, 64, True)):
        oh = 0.3 if write else 0.2
        expect_ms = oh + avg + 10.0 / 2 + n * 10.0 / 100
        assert expected_service(a.zones, a.params, lbn, n, write) / 1000 == pytest.approx(expect_ms, rel=1e-12)
    five = DiskSpec.from_dict({**toy_spec().to_dict(), "average_seek_ms": 12.0})
    f = five.compile()
    assert expected_service(f.zones, f.params, 0, 1, False) / 1000 == pytest.approx(0.2 + 12.0 + 5.0 + 0.1)
    sim = run(spec, DiskArray(1), requests([(0.0, 0, 0, 8, "R"), (1e6, 0, 12_345, 64, "W")]), service="expected",
              per_request=True)
    np.testing.assert_allclose(sim.out.out_service / 1000, [0.2 + avg + 5.8, 0.3 + avg + 11.4], rtol=1e-6)


def test_constant_mode_ignores_size_and_position() -> None:
    sim = run(toy_spec(), DiskArray(1), requests([(0.0, 0, 0, 1, "R"), (50_000.0, 0, 9_000, 90, "W")]),
              service="constant", constant_ms=20.0, per_request=True)
    np.testing.assert_allclose(sim.out.out_service, [20_000.0, 20_000.0])


def test_zero_latency_saves_half_a_revolution_on_track_aligned_reads() -> None:
    # Lachesis's effect on the Atlas 10k III: whole-track reads at random tracks of zone 0, one at a time.
    from blockheat.sim.records import Requests
    from blockheat.sim.specs import load

    spec = load("maxtor_atlas_10k3")
    spt = spec.zones[0].sectors_per_track
    rng = np.random.default_rng(4)
    n = 400
    reqs = Requests.build(np.arange(n) * 50_000.0, np.zeros(n), rng.integers(0, 2000, n) * spt,
                          np.full(n, spt), np.ones(n, dtype=bool))
    on = run(spec, DiskArray(1), reqs, zero_latency=True).result()
    off = run(spec, DiskArray(1), reqs, zero_latency=False).result()
    assert off.mean_service_ms - on.mean_service_ms == pytest.approx(spec.rotation_ms / 2, rel=0.1)
    assert on.mean_service_ms == pytest.approx(0.3 + spec.seek.average_ms(2000 // 4) + spec.rotation_ms, abs=1.0)
