"""Track boundaries (Lachesis's ACCESS DELAY BOUNDARIES) against hand computation on the HP C2247A (zones,
skews, spare tracks) and a two-zone toy disk; the track-aligned and fixed-size request transforms on
hand-built requests and on the bundled hplajw week; one track-sized read aligned and unaligned against its
analytic media time; the scenario's `io` key in sim.scenarios."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from blockheat.sim.array import DiskArray
from blockheat.sim.disk import locate, media_access
from blockheat.sim.records import Requests
from blockheat.sim.scenarios import ScenarioConfig, ScenarioError, simulate_partition
from blockheat.sim.specs import load
from blockheat.sim.tracks import (
    TRACK_SCHEMA,
    IoShaping,
    IoShapingError,
    align_to_tracks,
    fixed_size_io,
    merge_sequential,
    original_responses,
    shape_requests,
    track_boundaries,
    track_map,
)
from tests.sim.conftest import requests, run, toy_spec


def two_zone():
    """Zone 0: cylinders 0-9, 2 surfaces, 50 sectors per track, the last track spare (19 tracks, blocks
    0-949); zone 1: cylinders 10-19, 40 sectors per track (20 tracks, blocks 950-1749)."""
    return toy_spec(cylinders=20, zones=[
        {"first_cylinder": 0, "last_cylinder": 9, "sectors_per_track": 50, "track_skew": 3, "cylinder_skew": 7,
         "spare_tracks": 1},
        {"first_cylinder": 10, "last_cylinder": 19, "sectors_per_track": 40}])


def test_c2247a_track_boundaries_by_hand() -> None:
    spec = load("hp_c2247a")
    m = track_map(spec)
    # Zone 0: 559 cylinders x 13 surfaces - 325 spare tracks = 6942 tracks of 96 blocks, less 1632 blocks (17
    # tracks) of management area at its front: 6925 mapped tracks from physical track 17 on (the slipped
    # tracks 468, 526, ... are skipped on the platter, not in block numbers). Zone 1: 202 x 13 - 130.
    assert m.tracks.tolist()[:2] == [6925, 2496]
    assert m.first_lbn.tolist()[:3] == [0, 6925 * 96, 6925 * 96 + 2496 * 92]
    assert m.n_tracks == 6925 + sum(z.cylinders * 13 - z.spare_tracks for z in spec.zones[1:])
    assert m.capacity_sectors == spec.capacity_sectors == 2_054_864
    assert [x.tolist() for x in m.bounds(np.array([0, 95, 96, 664_799, 664_800, 2_054_863]))] == [
        [0, 0, 96, 664_704, 664_800, 2_054_808], [96, 96, 192, 664_800, 664_892, 2_054_864]]
    table = track_boundaries(spec)
    assert table.schema == TRACK_SCHEMA
    assert table.num_rows == m.n_tracks
    assert int(pa.compute.sum(table["sectors"]).as_py()) == spec.capacity_sectors
    rows = table.take([0, 450, 451, 6924, 6925]).to_pylist()
    # A cylinder switch adds 12 track skews + 1 cylinder skew = 12 x 14 + 32 = 200 sectors, a head switch 14.
    # Track 0 = physical track 17 (cylinder 1, head 4): 200 + 4 x 14 = 256 = 64 (mod 96). Track 450 = physical
    # 467 (cylinder 35, head 12): 7000 + 168 = 64. Track 451 is physical 469 (468 is slipped): cylinder 36,
    # head 1: 7214 = 14. Track 6924 = physical 6951 (cylinder 534, head 9): 106,926 = 78. Zone 1 starts at
    # cylinder 559, head 0, at its first-block offset 14.
    assert [(r["cylinder"], r["head"], r["first_lbn"], r["sectors"], r["skew_sectors"]) for r in rows] == [
        (1, 4, 0, 96, 64), (35, 12, 450 * 96, 96, 64), (36, 1, 451 * 96, 96, 14), (534, 9, 6924 * 96, 96, 78),
        (559, 0, 664_800, 92, 14)]
    assert rows[2]["offset_bytes"] == 451 * 96 * 512
    assert rows[4]["size_bytes"] == 92 * 512


def test_track_table_agrees_with_the_disk_model() -> None:
    # Every 37th track of every zone of both drives: sim.disk.locate puts its first block at sector 0 of the
    # same cylinder and head, with the same skew.
    for name in ("hp_c2247a", "maxtor_atlas_10k3"):
        spec = load(name)
        a = spec.compile()
        t = track_boundaries(spec)
        for i in range(0, t.num_rows, 37):
            r = {k: t[k][i].as_py() for k in ("cylinder", "head", "first_lbn", "sectors", "skew_sectors")}
            assert locate(a.zones, spec.surfaces, r["first_lbn"]) == (r["cylinder"], r["head"], 0, r["sectors"],
                                                                      r["skew_sectors"])


def test_two_zone_toy_tracks_and_errors() -> None:
    spec = two_zone()
    t = track_boundaries(spec).to_pylist()
    assert [(r["first_lbn"], r["sectors"], r["cylinder"], r["head"], r["skew_sectors"]) for r in t[:3]] == [
        (0, 50, 0, 0, 0), (50, 50, 0, 1, 3), (100, 50, 1, 0, 10)]
    assert (t[18]["first_lbn"], t[18]["cylinder"], t[18]["head"], t[18]["skew_sectors"]) == (900, 9, 0, 90 % 50)
    assert (t[19]["first_lbn"], t[19]["sectors"], t[19]["cylinder"], t[19]["zone"]) == (950, 40, 10, 1)
    m = track_map(spec)
    with pytest.raises(IoShapingError, match=r"sector 1750 is outside toy \(0..1749\)"):
        m.track_of(1750)
    with pytest.raises(IoShapingError, match="ends at sector 1751, beyond the capacity 1750 of toy"):
        align_to_tracks(requests([(0.0, 0, 1740, 11, "R")]), spec)


def test_align_to_tracks_cuts_at_boundaries_and_the_zone_change() -> None:
    spec = two_zone()
    reqs = requests([(0.0, 0, 30, 40, "R"), (5.0, 0, 930, 60, "W"), (6.0, 0, 200, 10, "R")])
    out = align_to_tracks(reqs, spec)
    # 30..70 crosses the boundary at 50; 930..990 crosses the zone change at 950 (zone 1 tracks of 40 blocks).
    assert list(zip(out.arrival_us, out.lbn, out.sectors, out.is_read, strict=True)) == [
        (0.0, 30, 20, True), (0.0, 50, 20, True), (5.0, 930, 20, False), (5.0, 950, 40, False), (6.0, 200, 10, True)]
    # Two-track units from track 0: [0, 100), [100, 200), ...; zone 1's first unit is tracks 18-19: [900, 990).
    two = align_to_tracks(reqs, spec, tracks=2)
    assert list(zip(two.lbn, two.sectors, strict=True)) == [(30, 40), (930, 60), (200, 10)]
    whole = align_to_tracks(reqs, spec, min_bytes=60 * 512)          # only the 60-block run is cut
    assert list(zip(whole.lbn, whole.sectors, strict=True)) == [(30, 40), (930, 20), (950, 40), (200, 10)]
    whole = align_to_tracks(reqs, spec, min_bytes=60 * 512 + 1)
    assert list(zip(whole.lbn, whole.sectors, strict=True)) == [(30, 40), (930, 60), (200, 10)]


def test_merge_joins_back_to_back_requests_of_each_stream() -> None:
    # Two interleaved sequential read streams on device 0, a write continuing one of them (other op: apart),
    # device 1 at the same address (apart), and a read continuing stream A after a 20 ms pause (apart).
    reqs = requests([(0.0, 0, 0, 8, "R"), (100.0, 0, 500, 8, "R"), (200.0, 0, 8, 8, "R"), (300.0, 0, 508, 8, "R"),
                     (400.0, 0, 16, 8, "W"), (500.0, 1, 16, 8, "R"), (600.0, 0, 16, 8, "R"),
                     (20_700.0, 0, 24, 8, "R")], think_us=np.arange(8, dtype=np.float64))
    runs, counts = merge_sequential(reqs, max_gap_us=10_000.0)
    assert list(zip(runs.arrival_us, runs.device, runs.lbn, runs.sectors, runs.is_read, strict=True)) == [
        (0.0, 0, 0, 24, True), (100.0, 0, 500, 16, True), (400.0, 0, 16, 8, False), (500.0, 1, 16, 8, True),
        (20_700.0, 0, 24, 8, True)]
    assert counts.tolist() == [3, 2, 1, 1, 1]
    assert runs.think_us.tolist() == [6.0, 3.0, 4.0, 5.0, 7.0]          # each run's last request's think time
    # On the toy disk (100-block tracks) nothing crosses a track: the runs are the aligned requests; the last
    # piece of a cut run carries the think time.
    assert align_to_tracks(reqs, toy_spec()).sectors.tolist() == [24, 16, 8, 8, 8]
    cut = align_to_tracks(requests([(0.0, 0, 90, 20, "R")], think_us=np.array([9.0])), toy_spec())
    assert cut.think_us.tolist() == [0.0, 9.0]
    with pytest.raises(IoShapingError, match="merge gap must be >= 0"):
        merge_sequential(reqs, max_gap_us=-1.0)


def test_fixed_size_io_cuts_from_the_run_start() -> None:
    spec = toy_spec()
    reqs = requests([(0.0, 0, 10, 8, "R"), (1.0, 0, 18, 300, "R"), (2.0, 0, 1000, 20, "W")])
    out = fixed_size_io(reqs, spec, io_bytes=128 * 512)
    # The first two merge into 10..318: pieces of 128 blocks from 10, wherever the 100-block tracks end.
    assert list(zip(out.arrival_us, out.lbn, out.sectors, strict=True)) == [
        (0.0, 10, 128), (0.0, 138, 128), (0.0, 266, 52), (2.0, 1000, 20)]
    apart = fixed_size_io(reqs, spec, io_bytes=128 * 512, merge=False)
    assert apart.sectors.tolist() == [8, 128, 128, 44, 20]
    with pytest.raises(IoShapingError, match="multiple of the sector size 512 of toy, got 1000"):
        fixed_size_io(reqs, spec, io_bytes=1000)
    with pytest.raises(IoShapingError, match="tracks must be an integer >= 1, got 0"):
        align_to_tracks(reqs, spec, tracks=0)


def test_hplajw_week_aligned_to_its_tracks() -> None:
    # Pinned on the real trace (HP 335H from the header: one zone of 113 sectors of 256 B per track).
    from blockheat.libs.experiments.placement import load_hplajw

    w = load_hplajw()
    r, spec = w.requests, w.spec
    assert (len(r), int(r.sectors.sum()), spec.zones[0].sectors_per_track) == (44_519, 1_028_536, 113)
    # Without merging: one piece per track each request touches, counted independently of sim.tracks.
    touched = int(((r.lbn + r.sectors - 1) // 113 - r.lbn // 113 + 1).sum())
    assert len(align_to_tracks(r, spec, merge=False)) == touched == 55_268
    runs, counts = merge_sequential(r, max_gap_us=10_000.0)
    assert (len(runs), int((counts > 1).sum()), int(counts.max())) == (43_389, 1_017, 5)
    aligned = align_to_tracks(r, spec)
    fixed = fixed_size_io(r, spec, io_bytes=8192)
    assert (len(aligned), len(fixed)) == (54_139, 44_832)
    for out in (aligned, fixed):
        assert int(out.sectors.sum()) == 1_028_536
        for dev in (0, 1):
            for op in (True, False):
                mine, theirs = out.is_read == op, r.is_read == op
                assert int(out.sectors[mine & (out.device == dev)].sum()) == \
                       int(r.sectors[theirs & (r.device == dev)].sum())
    m = track_map(spec)
    assert np.all(m.track_of(aligned.lbn) == m.track_of(aligned.lbn + aligned.sectors - 1))
    assert np.all(np.diff(aligned.arrival_us) >= 0)


@pytest.mark.parametrize(("name", "start", "zero_latency", "expect_sectors"), [
    # Atlas 10k III zone 0: 686 sectors per track, skew 69 sectors = 0.6035 ms just covering the 0.6 ms head
    # switch. Aligned with zero latency: one revolution from the next sector boundary (N + 1/2 on average);
    # without it the mean rotational wait (N/2) first. Unaligned (start s inside track A, end inside track B),
    # with or without zero latency: from landing rel sectors past s, the total is 2N + K - rel (the head reads
    # the tail of A, switches, waits out the skew K, reads B's head; or on landing inside A's run reads all of A
    # around in one revolution and then waits for B's start), so 1.5N + K on average.
    ("maxtor_atlas_10k3", 0, True, 686.5), ("maxtor_atlas_10k3", 0, False, 1029.0),
    ("maxtor_atlas_10k3", 343, True, 1098.0), ("maxtor_atlas_10k3", 300, False, 1098.0),
    ("hp_c2247a", 0, True, 96.5), ("hp_c2247a", 0, False, 144.0), ("hp_c2247a", 48, False, 158.0),
])
def test_track_sized_read_aligned_and_unaligned(name: str, start: int, zero_latency: bool,
                                                expect_sectors: float) -> None:
    spec = load(name)
    a = spec.compile()
    n = spec.zones[0].sectors_per_track
    st = spec.rotation_ms * 1000.0 / n
    cyl, head = locate(a.zones, spec.surfaces, start)[:2]
    # The head already on the track (no seek), landing at 10 n evenly spaced angles.
    times = (np.arange(10 * n) + 0.5) * st / 10 + 7 * spec.rotation_ms * 1000.0
    media = [media_access(a.zones, a.seek_us, a.params, cyl, head, t, t, start, n, False, zero_latency)[1] - t
             for t in times]
    assert np.mean(media) / st == pytest.approx(expect_sectors, abs=1e-6)
    efficiency = n / expect_sectors
    assert efficiency == pytest.approx({686.5: 0.99927, 1029.0: 2 / 3, 1098.0: 0.62477, 96.5: 0.99482,
                                        144.0: 2 / 3, 158.0: 0.60759}[expect_sectors], abs=1e-5)


def test_zero_latency_on_the_next_track_when_the_skew_exceeds_the_switch() -> None:
    # HP C2247A: skew 14 sectors (1.62 ms) against a 0.89 ms head switch: landing on track B up to
    # K - switch = 6.3 sectors early, zero latency may read B around too, so the unaligned mean may fall
    # below 1.5N + K by at most that much (here 0.16 sectors).
    spec = load("hp_c2247a")
    a = spec.compile()
    n, st = 96, spec.rotation_ms * 1000.0 / 96
    times = (np.arange(960) + 0.5) * st / 10
    cyl, head = locate(a.zones, spec.surfaces, 48)[:2]           # the first mapped track: cylinder 1, head 4
    assert (cyl, head) == (1, 4)
    media = [media_access(a.zones, a.seek_us, a.params, cyl, head, t, t, 48, n, False, True)[1] - t for t in times]
    slack = 14 - spec.head_switch_ms * 1000.0 / st
    assert 158.0 - slack < np.mean(media) / st < 158.0
    assert np.mean(media) / st == pytest.approx(157.84375, abs=1e-6)


def test_zero_latency_read_just_past_a_cached_segment_is_a_miss() -> None:
    # Toy disk (10 ms per revolution, 100 us per sector, seek 1 ms + 0.01 ms per cylinder, miss overhead 0.2 ms,
    # hit 0.1 ms, no bus) with a cache. A reads track 0; B (queued meanwhile) reads one block on cylinder 20,
    # aborting A's read-ahead; C (queued behind B) reads track 1, right after A's cached segment.
    spec = toy_spec(cache={"segments": 2, "segment_sectors": 200, "read_ahead_sectors": 100})
    reqs = requests([(0.0, 0, 0, 100, "R"), (100.0, 0, 4000, 1, "R"), (200.0, 0, 100, 100, "R")])
    on = run(spec, DiskArray(1), reqs, zero_latency=True, per_request=True).out.out_service.tolist()
    off = run(spec, DiskArray(1), reqs, zero_latency=False, per_request=True).out.out_service.tolist()
    # Zero latency: A from 200 us (slot 2) in one revolution, done 10.2 ms. B: 0.2 + 1.2 ms seek to 11.6 ms
    # (slot 16), waits 84 slots, one sector: 20.1 ms. C is a miss read out of order: 0.2 + 1.2 ms seek to
    # 21.5 ms, then one revolution: 31.5 ms, 11.4 ms of service.
    assert on == [10_200.0, 9_900.0, 11_400.0]
    # Without it C restarts A's stream at block 100: 0.1 ms hit overhead, 1.2 ms seek, wait for sector 0 of
    # track 1 (slot 0: 86 slots after slot 14), then the track at the streaming rate: 19.9 ms.
    assert off == [20_000.0, 10_100.0, 19_900.0]


# -------------------------------------------------------------------------------------------------
# The scenario key.

def _table(rows: list[tuple[int, int, int]]) -> pa.Table:
    """Device "0" reads: (ts_us, offset in 512 B sectors, sectors)."""
    return pa.table({"device": ["0"] * len(rows), "seq": list(range(len(rows))), "ts_us": [r[0] for r in rows],
                     "op": ["R"] * len(rows), "offset_bytes": [r[1] * 512 for r in rows],
                     "size_bytes": [r[2] * 512 for r in rows]})


def test_scenario_io_key() -> None:
    base = {"scenario_id": "s", "spec": "hp_c2247a", "service": "constant", "constant_ms": 10}
    # A 200-block sequential read in four requests from block 50: tracks [0, 96), [96, 192), [192, 288).
    trace = _table([(0, 50, 50), (1000, 100, 50), (2000, 150, 50), (3000, 200, 50)])
    counts = {}
    for label, io in (("none", None), ("aligned", {"kind": "track-aligned"}),
                      ("fixed", {"kind": "fixed", "io_bytes": 64 * 1024})):
        cfg = ScenarioConfig.from_dict({**base, **({"io": io} if io else {})})
        row = simulate_partition(trace, cfg).to_pylist()[0]
        counts[label] = (row["requests"], row["sectors_read"])
    assert counts == {"none": (4, 200), "aligned": (3, 200), "fixed": (2, 200)}
    cfg = ScenarioConfig.from_dict({**base, "io": {"kind": "track-aligned", "tracks": 2, "merge_gap_ms": 0.5}})
    assert cfg.io == IoShaping("track-aligned", tracks=2, merge_gap_ms=0.5)
    # No merging (1 ms apart); two-track units [0, 192), [192, 384): only 150..200 is cut.
    assert simulate_partition(trace, cfg).to_pylist()[0]["requests"] == 5


def test_shape_maps_each_traced_request_to_its_pieces() -> None:
    # Toy disk, 100-block tracks. Requests 0..2 merge into 90..260 (pieces [90, 100), [100, 200), [200, 260));
    # request 3 (another device) stays whole; merge off: each request cut alone.
    reqs = requests([(0.0, 0, 90, 20, "R"), (1.0, 0, 110, 50, "R"), (2.0, 0, 160, 100, "R"), (3.0, 1, 0, 8, "R")])
    shaped = shape_requests(reqs, toy_spec(), IoShaping("track-aligned"))
    assert list(zip(shaped.pieces.lbn, shaped.pieces.sectors, strict=True)) == [(90, 10), (100, 100), (200, 60),
                                                                                (0, 8)]
    assert (shaped.first_piece.tolist(), shaped.last_piece.tolist()) == ([0, 1, 1, 3], [1, 1, 2, 3])
    apart = shape_requests(reqs, toy_spec(), IoShaping("track-aligned", merge=False))
    assert apart.pieces.sectors.tolist() == [10, 10, 50, 40, 60, 8]
    assert (apart.first_piece.tolist(), apart.last_piece.tolist()) == ([0, 2, 3, 5], [1, 2, 4, 5])
    fixed = shape_requests(reqs, toy_spec(), IoShaping("fixed", io_bytes=64 * 512))
    assert fixed.pieces.sectors.tolist() == [64, 64, 42, 8]      # 90..154, 154..218, 218..260
    assert (fixed.first_piece.tolist(), fixed.last_piece.tolist()) == ([0, 0, 1, 3], [0, 1, 2, 3])
    assert np.array_equal(shaped.pieces.lbn, align_to_tracks(reqs, toy_spec()).lbn)
    # Pieces done at 30, 12 and 40 us (arrival + response); request 1's piece done at 12 us: 11 us after it.
    resp = original_responses(shaped, reqs.arrival_us, np.zeros(4), np.array([30.0, 12.0, 40.0, np.nan]))
    assert resp[:3].tolist() == [30.0, 11.0, 38.0]
    assert np.isnan(resp[3])
    with pytest.raises(IoShapingError, match="4 pieces, but 3 arrivals and 4 responses"):
        original_responses(shaped, reqs.arrival_us, np.zeros(3), np.zeros(4))


def test_scenario_reports_per_traced_request() -> None:
    base = {"scenario_id": "s", "spec": "hp_c2247a", "service": "constant", "constant_ms": 10}
    trace = _table([(0, 50, 50), (1000, 100, 50), (2000, 150, 50), (3000, 200, 50)])
    io = {"kind": "track-aligned"}
    pieces = simulate_partition(trace, ScenarioConfig.from_dict({**base, "io": io})).to_pylist()[0]
    traced = simulate_partition(trace, ScenarioConfig.from_dict({**base, "io": {**io, "report": "requests"}})
                                ).to_pylist()[0]
    # One run 50..250 at t = 0 cut into [50, 96), [96, 192), [192, 250), served FCFS 10 ms each: done at 10, 20,
    # 30 ms. Per piece: 10, 20, 30. Per traced request: 50..100 waits for pieces 0 and 1 (20 ms), 100..150 for
    # piece 1 (20 - 1), 150..200 (crossing 192) for pieces 1 and 2 (30 - 2), 200..250 for piece 2 (30 - 3).
    assert (pieces["requests"], pieces["mean_response_ms"], pieces["max_response_ms"]) == (3, 20.0, 30.0)
    assert (traced["requests"], traced["reads"], traced["writes"]) == (4, 4, 0)
    assert (traced["mean_response_ms"], traced["p50_response_ms"], traced["max_response_ms"],
            traced["mean_response_ms_read"], traced["mean_response_ms_write"]) == \
           pytest.approx((23.5, 20.0, 28.0, 23.5, None))
    assert (traced["mean_service_ms"], traced["physical_ios"]) == (pieces["mean_service_ms"], 3)    # per piece
    # A request whose data was fetched before it was issued: the run 0..16 done at 5 ms, request 1 at 9 ms.
    early = simulate_partition(_table([(0, 0, 8), (9000, 8, 8)]), ScenarioConfig.from_dict(
        {**base, "constant_ms": 5, "io": {**io, "report": "requests"}})).to_pylist()[0]
    assert (early["requests"], early["mean_response_ms"], early["max_response_ms"]) == (2, 2.5, 5.0)
    # Sped up 2x: arrivals halve on the simulated clock, the traced requests' too (pieces done at 10, 20, 30).
    fast = simulate_partition(trace, ScenarioConfig.from_dict({**base, "speedup": 2.0, "io": {**io,
                                                               "report": "requests"}})).to_pylist()[0]
    assert fast["mean_response_ms"] == pytest.approx((20 + 19.5 + 29 + 28.5) / 4)
    with pytest.raises(ScenarioError, match=r"io: report must be one of \['pieces', 'requests'\], got 'all'"):
        ScenarioConfig.from_dict({**base, "io": {**io, "report": "all"}})
    with pytest.raises(ScenarioError, match="io report 'requests' maps each traced request to its pieces; policy "
                                            "'alis' redirects"):
        ScenarioConfig.from_dict({**base, "io": {**io, "report": "requests"}, "policy": {"name": "alis"}})


@pytest.mark.parametrize(("io", "extra", "message"), [
    ({"kind": "aligned"}, {}, r"io: kind must be one of \['track-aligned', 'fixed'\], got 'aligned'"),
    ({"kind": "fixed"}, {}, "io 'fixed' needs io_bytes"),
    ({"kind": "track-aligned", "io_bytes": 4096}, {}, "give 'tracks', not io_bytes"),
    ({"kind": "track-aligned", "trakcs": 2}, {}, r"io: unknown key\(s\) \['trakcs'\]"),
    ({"kind": "fixed", "io_bytes": 4096, "merge": "yes"}, {}, "merge must be true or false"),
    ({"kind": "track-aligned"}, {"disks": 2, "layout": {"kind": "striped", "unit_sectors": 64}},
     "needs layout kind 'as_traced', got Striped"),
])
def test_scenario_io_errors(io: dict, extra: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        ScenarioConfig.from_dict({"scenario_id": "s", "spec": "hp_c2247a", "io": io, **extra})


def test_scenario_io_error_names_the_request() -> None:
    cfg = ScenarioConfig.from_dict({"scenario_id": "s", "spec": "hp_c2247a", "io": {"kind": "track-aligned"},
                                    "service": "constant"})
    with pytest.raises(ScenarioError, match="io 'track-aligned': request 0 ends at sector 2054865, beyond"):
        simulate_partition(_table([(0, 2_054_800, 65)]), cfg)


def test_empty_requests_pass() -> None:
    empty = Requests.build(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool))
    assert len(align_to_tracks(empty, toy_spec())) == 0
    assert len(fixed_size_io(empty, toy_spec(), io_bytes=512)) == 0


def _merge_by_dict(reqs: Requests, max_gap_us: float) -> list[int]:
    """merge_sequential's rule written plainly (a dict of open runs, the definition the compiled pass keeps)."""
    run_of, open_runs, last_t = [], {}, []
    for t, dev, lbn, sec, fl in zip(reqs.arrival_us.tolist(), reqs.device.tolist(), reqs.lbn.tolist(),
                                    reqs.sectors.tolist(), reqs.flags.tolist(), strict=True):
        r = open_runs.pop((dev, fl, lbn), -1)
        if r < 0 or t - last_t[r] > max_gap_us:
            r = len(last_t)
            last_t.append(t)
        last_t[r] = t
        run_of.append(r)
        open_runs[(dev, fl, lbn + sec)] = r
    return run_of


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_merge_equals_the_dict_rule(seed: int) -> None:
    # Streams that collide on their keys (few addresses, two ops, three devices), gaps around the merge gap, and
    # 20,000 requests: the open-run table fills and drops its stale entries many times over.
    from blockheat.sim.tracks import _merge

    rng = np.random.default_rng(seed)
    n = 20_000
    t = np.cumsum(rng.exponential(rng.choice([10.0, 2000.0, 30_000.0]), n))
    dev, sec, read = rng.integers(0, 3, n), rng.choice([1, 8, 16], n), rng.random(n) < 0.5
    lbn = rng.integers(0, 64, n) * 8 if seed % 2 else rng.integers(0, 5000, n)
    follow = rng.integers(1, 20, n)                     # half the requests continue one of the last 20
    for i in np.flatnonzero(rng.random(n) < 0.5):
        j = i - follow[i]
        if j >= 0:
            dev[i], read[i], lbn[i] = dev[j], read[j], lbn[j] + sec[j]
    reqs = Requests.build(t, dev, lbn, sec, read)
    runs, run_of = _merge(reqs, 10_000.0)
    expected = np.array(_merge_by_dict(reqs, 10_000.0))
    assert np.array_equal(run_of, expected)
    heads = np.unique(expected, return_index=True)[1]
    assert np.array_equal(runs.lbn, reqs.lbn[heads])
    assert np.array_equal(runs.arrival_us, reqs.arrival_us[heads])
    assert np.array_equal(runs.sectors, np.bincount(expected, weights=reqs.sectors).astype(np.int32))
    assert len(np.unique(expected)) < n                                     # some requests did merge


def _shape_by_rule(requests: Requests, spec, io: IoShaping) -> tuple[list[tuple], list[int], list[int]]:
    """The transform run by run in plain Python (TrackMap's scalar lookups): pieces as (arrival, device, lbn,
    sectors, flags, think), and each request's first and last piece."""
    import blockheat.sim.tracks as T

    runs, run_of = T._prepare(requests, spec, io.merge, io.merge_gap_ms)
    m = track_map(spec)
    pieces, first_of_run = [], []
    for r in range(len(runs)):
        lo, hi = int(runs.lbn[r]), int(runs.lbn[r] + runs.sectors[r])
        if hi - lo < -(-io.min_bytes // spec.sector_size):
            cuts = [(lo, hi)]
        elif io.kind == "track-aligned":
            units = range(int(m.track_of(lo)) // io.tracks, int(m.track_of(hi - 1)) // io.tracks + 1)
            cuts = [(max(lo, int(m.start_of(min(u * io.tracks, m.n_tracks)))),
                     min(hi, int(m.start_of(min((u + 1) * io.tracks, m.n_tracks))))) for u in units]
        else:
            size = io.io_bytes // spec.sector_size
            cuts = [(s, min(hi, s + size)) for s in range(lo, hi, size)]
        first_of_run.append(len(pieces))
        for k, (a, b) in enumerate(cuts):
            think = 0.0 if runs.think_us is None else (float(runs.think_us[r]) if k == len(cuts) - 1 else 0.0)
            pieces.append((float(runs.arrival_us[r]), int(runs.device[r]), a, b - a, int(runs.flags[r]), think))
    first_of_run.append(len(pieces))
    first, last = [], []
    for q in range(len(requests)):
        r = int(run_of[q])
        lo, hi = int(requests.lbn[q]), int(requests.lbn[q] + requests.sectors[q])
        mine = range(first_of_run[r], first_of_run[r + 1])
        first.append(next(p for p in mine if pieces[p][2] + pieces[p][3] > lo))
        last.append(max(p for p in mine if pieces[p][2] < hi))
    return pieces, first, last


@pytest.mark.parametrize("io", [IoShaping("track-aligned", merge_gap_ms=50.0),
                                IoShaping("track-aligned", tracks=3, min_bytes=16384),
                                IoShaping("fixed", io_bytes=4096, merge_gap_ms=50.0),
                                IoShaping("fixed", io_bytes=2048, merge=False)])
def test_compiled_cut_equals_the_rule_on_hplajw(io: IoShaping) -> None:
    # The compiled cut and request-to-piece map against the rule run by run, on the first 8,000 requests of the
    # hplajw week with think times (merged runs of many pieces, runs left whole under min_bytes).
    from blockheat.libs.experiments.placement import load_hplajw

    w = load_hplajw()
    n = 8000
    r = Requests(w.requests.arrival_us[:n], w.requests.device[:n], w.requests.lbn[:n], w.requests.sectors[:n],
                 w.requests.flags[:n], np.arange(n, dtype=np.float64))
    shaped = shape_requests(r, w.spec, io)
    pieces, first, last = _shape_by_rule(r, w.spec, io)
    got = list(zip(shaped.pieces.arrival_us.tolist(), shaped.pieces.device.tolist(), shaped.pieces.lbn.tolist(),
                   shaped.pieces.sectors.tolist(), shaped.pieces.flags.tolist(), shaped.pieces.think_us.tolist(),
                   strict=True))
    assert got == pieces
    assert shaped.first_piece.tolist() == first
    assert shaped.last_piece.tolist() == last
    assert len(pieces) != n
    assert int((shaped.last_piece > shaped.first_piece).sum()) > 0                 # requests of several pieces
