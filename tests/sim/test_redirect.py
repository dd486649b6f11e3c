"""ALIS's redirector (sim.redirect): each request's physical pieces on hand-made directories (a read that
straddles a run copy and home, writes to units with two copies, overlapping run copies), copy validity
against a model of the data, the plain layout reproduced with an empty area, and the errors."""
from __future__ import annotations

import bisect
import itertools

import numpy as np
import pytest

from blockheat.sim.array import Concatenated, DiskArray, ExtentTable
from blockheat.sim.engine import SimConfig, Simulation
from blockheat.sim.redirect import (
    REGION_HEAT,
    REGION_RUN,
    SRC_HEAT,
    SRC_HOME,
    SRC_MIXED,
    SRC_RUN,
    Directory,
    Redirected,
    RedirectedChunk,
    RedirectStream,
    Reorganization,
    Volume,
    redirect,
)
from tests.sim.conftest import requests, toy_spec

# Home sectors [0, 300) stay, the RA is physical [300, 400), home [300, 1000) moves to [400, 1100).
VOL = Volume(disk=0, size_sectors=1000, ra_start=300, ra_sectors=100)


def directory(*copies: tuple[int, int, int, int, int]) -> Directory:
    """Copies as (region, run_id, home_sector, sectors, ra_sector), unit ids 0.. in the given order."""
    n = len(copies)
    return Directory(np.zeros(n, np.int64), [c[0] for c in copies], [c[1] for c in copies], list(range(n)),
                     [c[2] for c in copies], [c[3] for c in copies], [c[4] for c in copies])


def pieces(out: Redirected, i: int) -> list[tuple[int, int, int]]:
    """(disk, physical start, sectors) of request i, through the extent map as the compiled loop forks it."""
    base = np.concatenate([[0], np.cumsum(out.device_sectors)[:-1]])
    lo = int(base[out.requests.device[i]] + out.requests.lbn[i])
    return _walk(_rows(out.layout), lo, lo + int(out.requests.sectors[i]))


def _rows(lay: ExtentTable) -> list[tuple[int, int, int, int]]:
    return list(zip(lay.logical_start.tolist(), lay.sectors.tolist(), lay.disk.tolist(), lay.physical_start.tolist(),
                    strict=True))


def _walk(extents: list[tuple[int, int, int, int]], lo: int, hi: int) -> list[tuple[int, int, int]]:
    """The physical pieces of logical sectors [lo, hi) through (logical start, sectors, disk, physical start)
    extents, contiguous pieces on one disk joined."""
    k = bisect.bisect_right([e[0] for e in extents], lo) - 1
    found: list[tuple[int, int, int]] = []
    while k < len(extents) and extents[k][0] < hi:
        start, sectors, disk, physical = extents[k]
        a, b = max(lo, start), min(hi, start + sectors)
        p = physical + (a - start)
        if found and found[-1][0] == disk and found[-1][1] + found[-1][2] == p:
            found[-1] = (disk, found[-1][1], found[-1][2] + b - a)
        else:
            found.append((disk, p, b - a))
        k += 1
    return found


def test_volume_with_area_rounds_down_and_places_the_area() -> None:
    v = Volume.with_area(2, 1001)
    assert (v.disk, v.ra_start, v.ra_sectors, v.physical_sectors) == (2, 300, 150, 1151)
    assert [VOL.home_address(s) for s in (0, 299, 300, 999)] == [0, 299, 400, 1099]
    assert VOL.ra_address(5) == 305


def test_read_straddling_a_run_copy_and_home() -> None:
    # Unit [100, 110) has a run copy at RA 0 (physical 300) from t = 10 ms; requests 100 ms apart.
    d = directory((REGION_RUN, 0, 100, 10, 0))
    reqs = requests([(0.0, 0, 100, 10, "R"),          # before the reorganization: home
                     (100e3, 0, 95, 10, "R"),         # straddles the copy and home, home up to date: home whole
                     (200e3, 0, 100, 10, "R"),        # exactly the unit: its run copy
                     (300e3, 0, 100, 5, "W"),         # RunHeat: into the run copy; home [100, 105) now stale
                     (400e3, 0, 95, 10, "R"),         # the same straddling read: home part, then the copy's part
                     (500e3, 0, 290, 20, "R")])       # home data across the area's start: two physical ranges
    out = redirect(reqs, [VOL], [Reorganization(10e3, d, 1)])
    assert out.source.tolist() == [SRC_HOME, SRC_HOME, SRC_RUN, SRC_RUN, SRC_MIXED, SRC_HOME]
    assert [pieces(out, i) for i in range(6)] == [
        [(0, 100, 10)], [(0, 95, 10)], [(0, 300, 10)], [(0, 300, 5)], [(0, 95, 5), (0, 300, 5)],
        [(0, 290, 10), (0, 400, 10)]]
    assert out.copy_in_sectors.tolist() == [10]
    assert out.copy_back_sectors.tolist() == [5]
    # Replayed with a constant 10 ms per disk access: the split read and the crossing read cost two each.
    sim = out.simulation(toy_spec(), SimConfig(service="constant", constant_ms=10.0), np.random.default_rng(1))
    sim.run()
    res = sim.result()
    assert (res.requests, res.physical_ios, res.physical_ios_read) == (6, 8, 7)
    assert (res.mean_response_ms_read, res.max_response_ms_read) == pytest.approx((14.0, 20.0))


def test_write_to_a_unit_with_two_copies_updates_the_run_copy_and_invalidates_the_heat_copy() -> None:
    # Unit [200, 208): run copy at RA 0 (physical 300) and heat copy at RA 8 (physical 308). From t = 100 only
    # a heat copy at RA 16 (physical 316): the run copy's update went home at that reorganization.
    both = directory((REGION_RUN, 4, 200, 8, 0), (REGION_HEAT, -1, 200, 8, 8))
    heat_only = directory((REGION_HEAT, -1, 200, 8, 16))
    reqs = requests([(1.0, 0, 200, 8, "R"), (2.0, 0, 200, 8, "W"), (3.0, 0, 200, 8, "R"), (4.0, 0, 196, 8, "R"),
                     (101.0, 0, 200, 8, "R"), (102.0, 0, 200, 4, "W"), (103.0, 0, 196, 8, "R"),
                     (104.0, 0, 204, 4, "R")])
    out = redirect(reqs, [VOL], [Reorganization(0.0, both, 0), Reorganization(100.0, heat_only, 1)])
    assert out.source.tolist() == [SRC_RUN, SRC_RUN, SRC_RUN, SRC_MIXED, SRC_HEAT, SRC_HEAT, SRC_MIXED, SRC_HEAT]
    assert [pieces(out, i) for i in range(8)] == [
        [(0, 300, 8)], [(0, 300, 8)], [(0, 300, 8)],
        [(0, 196, 4), (0, 300, 4)],             # home stale where the run copy was written: no whole home read
        [(0, 316, 8)], [(0, 316, 4)],
        [(0, 196, 4), (0, 316, 4)],             # the heat copy now holds [200, 204)
        [(0, 320, 4)]]                          # a copy holding the whole read serves it (tail of the copy)
    assert out.copy_in_sectors.tolist() == [16, 8]
    assert out.copy_back_sectors.tolist() == [8, 4]
    assert out.served() == {"home": 0, "run": 2, "heat": 2, "mixed": 2}       # reads only


def test_overlapping_run_copies_follow_the_latest_write() -> None:
    # Units A = [100, 108) in run 0 at RA 8 (physical 308) and B = [100, 104) in run 1 at RA 0 (physical 300).
    d = directory((REGION_RUN, 0, 100, 8, 8), (REGION_RUN, 1, 100, 4, 0))
    reqs = requests([(1.0, 0, 100, 4, "R"),     # both hold it whole: the lower RA address, B
                     (2.0, 0, 100, 4, "W"),     # B again; A's first half is stale now
                     (3.0, 0, 100, 8, "R"),     # A is not wholly valid, home is stale: B's half, then A's
                     (4.0, 0, 100, 8, "W"),     # A holds the whole write: A; B is stale now
                     (5.0, 0, 100, 4, "R")])    # only A holds it up to date
    out = redirect(reqs, [VOL], [Reorganization(0.0, d, 0)])
    assert [pieces(out, i) for i in range(5)] == [[(0, 300, 4)], [(0, 300, 4)], [(0, 300, 4), (0, 312, 4)],
                                                  [(0, 308, 8)], [(0, 308, 4)]]
    assert out.source.tolist() == [SRC_RUN] * 5
    assert out.copy_back_sectors.tolist() == [8]


def test_holding_lists_copies_in_the_redirectors_order() -> None:
    d = directory((REGION_HEAT, -1, 100, 8, 0), (REGION_RUN, 2, 96, 8, 30), (REGION_RUN, 1, 100, 4, 8))
    assert d.holding(0, 101).tolist() == [2, 1, 0]
    assert d.holding(0, 99).tolist() == [1]
    assert d.holding(1, 101).tolist() == []
    assert d.ra_end(0) == 38


def _random_directory(rng: np.random.Generator, n: int) -> Directory:
    home = rng.integers(0, 190, n)
    size = rng.integers(1, 11, n)
    ra = np.concatenate([[0], np.cumsum(size)[:-1]])
    keep = ra + size <= VOL.ra_sectors
    return Directory(np.zeros(keep.sum(), np.int64), rng.integers(0, 2, keep.sum()),
                     np.where(rng.random(keep.sum()) < 0.5, 1, -1), np.arange(keep.sum()), home[keep], size[keep],
                     ra[keep])


def test_reads_always_see_the_latest_write() -> None:
    # A model of the data: every write stamps its sectors with its index; every read must find, in each of
    # its physical sectors, the stamp of the latest write to that home sector. At a reorganization updated
    # copies go home and the new copies are taken from home.
    rng = np.random.default_rng(7)
    n = 3000
    start = rng.integers(0, 190, n)          # the copies' home range, plus a little home-only data
    size = rng.integers(1, 13, n)
    times = np.arange(n, dtype=np.float64)
    reqs = requests([(float(t), 0, int(a), int(s), "R" if rng.random() < 0.5 else "W")
                     for t, a, s in zip(times, start, size, strict=True)])
    # Overlapping home extents, both regions, and directories that change at each reorganization.
    schedule = [Reorganization(t, _random_directory(rng, 25), k) for k, t in enumerate((500.0, 1500.0, 2200.0))]
    out = redirect(reqs, [VOL], schedule)
    latest = np.zeros(VOL.size_sectors, np.int64)
    physical = np.zeros(VOL.physical_sectors, np.int64)
    nxt = 0
    for i in range(n):
        while nxt < len(schedule) and schedule[nxt].time_us <= times[i]:
            physical[[VOL.home_address(s) for s in range(VOL.size_sectors)]] = latest
            d = schedule[nxt].directory
            for h, m, r in zip(d.home_sector, d.sectors, d.ra_sector, strict=True):
                physical[VOL.ra_address(r): VOL.ra_address(r) + m] = latest[h: h + m]
            nxt += 1
        where = np.concatenate([np.arange(p, p + m) for _, p, m in pieces(out, i)])
        a, s = int(reqs.lbn[i]), int(reqs.sectors[i])
        assert len(where) == s
        if reqs.is_read[i]:
            assert physical[where].tolist() == latest[a: a + s].tolist(), f"request {i} read stale data"
        else:
            latest[a: a + s] = i + 1
            physical[where] = i + 1
    counts = np.bincount(out.source, minlength=4)
    assert counts.min() > 100                 # every kind of outcome was exercised


def test_an_empty_area_replays_like_the_plain_volume() -> None:
    from blockheat.libs.experiments.alis import load as load_hplajw

    w = load_hplajw(days=3)                      # the hplajw trace in the 73LZX's sectors
    spec = w.spec
    reqs = w.requests.take(np.arange(3000))
    plain = Simulation(spec, DiskArray(1, Concatenated()), reqs, SimConfig(), np.random.default_rng(1),
                       device_sectors=w.device_sectors)
    plain.run()
    vol = Volume(disk=0, size_sectors=sum(w.device_sectors), ra_start=1000, ra_sectors=0)
    out = redirect(reqs, [vol], [], device_volume=[0, 0], device_offset=[0, w.device_sectors[0]])
    assert out.requests.lbn.tolist() == (np.where(reqs.device == 1, w.device_sectors[0], 0) + reqs.lbn).tolist()
    sim = out.simulation(spec, SimConfig(), np.random.default_rng(1))
    sim.run()
    assert sim.result().as_row() == plain.result().as_row()


@pytest.mark.parametrize(("build", "message"), [
    (lambda: directory((REGION_RUN, 0, 10, 8, 0), (REGION_HEAT, -1, 50, 8, 4)),
     "copies 0 and 1 overlap in the reorganized area of volume 0"),
    (lambda: directory((2, 0, 10, 8, 0)), "Directory.region must be 0 .run. or 1 .heat., entry 0 is 2"),
    (lambda: directory((REGION_RUN, 0, 10, 0, 0)), "sectors must be > 0"),
    (lambda: Directory([0, 1, 1], [0, 0, 1], [0, 0, -1], [0, 1, 2], [0, 0, 50], [8, 8, 8], [0, 0, 4]),
     "copies 1 and 2 overlap in the reorganized area of volume 1"),
])
def test_bad_directories_are_refused(build, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize(("volumes", "schedule", "rows", "message"), [
    ([VOL], [Reorganization(0.0, directory((REGION_RUN, 0, 10, 8, 95)), 3)], [(1.0, 0, 0, 8, "R")],
     r"reorganization 0 at 0.0 us: copies of volume 0 need 103 RA sectors, the area has 100"),
    ([VOL], [Reorganization(0.0, directory((REGION_HEAT, -1, 996, 8, 0)))], [(1.0, 0, 0, 8, "R")],
     "a copy of volume 0 ends at home sector 1004, beyond its 1000 sectors"),
    ([VOL], [], [(1.0, 0, 996, 8, "R")], "request 0 ends at sector 1004 of volume 0, beyond its 1000 sectors"),
    ([VOL, Volume(0, 50, 0, 0, disk_start=1050)], [], [(1.0, 0, 0, 8, "R")], "volumes 0 and 1 overlap on disk 0"),
    ([VOL], [Reorganization(5.0, Directory.empty()), Reorganization(1.0, Directory.empty())], [(1.0, 0, 0, 8, "R")],
     r"reorganization times must not decrease, got \[5.0, 1.0\]"),
])
def test_bad_runs_are_refused(volumes, schedule, rows, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        redirect(requests(rows), volumes, schedule)


def test_a_volume_and_its_area_must_fit_the_disk() -> None:
    with pytest.raises(ValueError, match="volume 0: 1000 home sectors plus an RA of 100 from sector 0 need 1100 "
                                         "sectors, beyond the disk capacity 1050"):
        redirect(requests([(1.0, 0, 0, 8, "R")]), [VOL], [], capacity_sectors=1050)


def test_directory_in_bytes_has_the_alis_layout_columns() -> None:
    from blockheat.schemas import alis_layout

    d = directory((REGION_RUN, 3, 100, 8, 0), (REGION_HEAT, -1, 40, 4, 8))
    table = d.to_arrow([VOL], sector_size=512, volume_names=["dev0"])
    assert table.column_names == [c for c in alis_layout.COLUMNS if c not in ("trace_id", "interval_id")]
    assert table.to_pylist() == [
        {"device": "dev0", "region": "run", "run_id": 3, "unit_id": 0, "home_offset_bytes": 51_200,
         "size_bytes": 4096, "ra_offset_bytes": 0, "ra_address_bytes": 153_600},
        {"device": "dev0", "region": "heat", "run_id": None, "unit_id": 1, "home_offset_bytes": 20_480,
         "size_bytes": 2048, "ra_offset_bytes": 4096, "ra_address_bytes": 157_696}]


@pytest.mark.parametrize("sizes", [[1, 499, 1, 999, 1000, 500], [3000], [700, 800, 700, 800]])
def test_a_redirect_stream_gives_the_whole_redirects_pieces(sizes: list[int]) -> None:
    # The random workload above, redirected a chunk at a time (epochs starting inside chunks, at their first
    # request and between them): each chunk's requests and pieces, put end to end, are the whole redirect's.
    rng = np.random.default_rng(7)
    n = 3000
    start, size = rng.integers(0, 190, n), rng.integers(1, 13, n)
    reqs = requests([(float(t), 0, int(a), int(s), "R" if rng.random() < 0.5 else "W")
                     for t, a, s in zip(np.arange(n, dtype=np.float64), start, size, strict=True)])
    schedule = [Reorganization(t, _random_directory(rng, 25), k) for k, t in enumerate((500.0, 1500.0, 1501.0, 2200.0))]
    whole = redirect(reqs, [VOL], schedule)
    stream = RedirectStream([VOL], schedule, device_volume=[0], device_offset=[0], virtual_sectors=36_000)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    parts = [stream.chunk(reqs.rows(int(a), int(b))) for a, b in itertools.pairwise(bounds)]
    assert np.concatenate([p.source for p in parts]).tolist() == whole.source.tolist()
    assert np.concatenate([p.pieces for p in parts]).tolist() == whole.pieces.tolist()
    assert stream.copy_back_sectors.tolist() == whole.copy_back_sectors.tolist()
    assert stream.copy_back_sectors.min() > 0
    assert stream.copy_in_sectors.tolist() == whole.copy_in_sectors.tolist()
    # Each request's physical pieces: a chunk's virtual device starts at sector 0 and maps only its own pieces.
    got = [piece for p in parts for i in range(len(p.requests)) for piece in _chunk_pieces(p, i)]
    assert got == [piece for i in range(n) for piece in pieces(whole, i)]
    assert all(p.layout.logical_sectors == VOL.size_sectors + 36_000 for p in parts)    # padded
    assert sum(p.virtual_sectors for p in parts) == int(whole.requests.sectors[whole.pieces > 0].sum()) > 1000
    with pytest.raises(ValueError, match=r"requests 0\.\.2999 redirect \d+ sectors, beyond the stream's 10 virtual"):
        RedirectStream([VOL], schedule, device_volume=[0], device_offset=[0], virtual_sectors=10).chunk(reqs)


def _chunk_pieces(part: RedirectedChunk, i: int) -> list[tuple[int, int, int]]:
    """(disk, physical start, sectors) of request i of a redirected chunk (one volume, VOL), through the chunk's own
    layout."""
    r, lay = part.requests, part.layout
    lo = (VOL.size_sectors if r.device[i] == 1 else 0) + int(r.lbn[i])
    return _walk(_rows(lay), lo, lo + int(r.sectors[i]))
