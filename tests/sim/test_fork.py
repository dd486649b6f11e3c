"""How a request forks into sub-requests: pieces that are physically contiguous on one disk (the units
i, i + D, i + 2D, ... of a stripe) form one sub-request, as a striping driver issues them; pieces that are
not contiguous (an extent map that scatters them) stay separate accesses."""
from __future__ import annotations

import numpy as np
import pytest

from blockheat.sim import _kernel as K
from blockheat.sim.array import (
    LAYOUT_EXTENTS,
    LP_COUNT,
    LP_KIND,
    LP_SHIFT,
    DiskArray,
    Extent,
    ExtentMap,
    ExtentTable,
    Striped,
    extent_index,
)
from blockheat.sim.engine import SimConfig, Simulation
from blockheat.sim.records import Requests
from blockheat.sim.specs import load
from tests.sim.conftest import requests, run, toy_spec


def _parts_in_service(sim: Simulation) -> dict[int, tuple[int, int]]:
    """{disk: (physical start, sectors)} of the sub-request each busy disk is serving."""
    out = {}
    for d in range(sim.array.n_disks):
        s = int(sim.core.dk_i[d, K.DK_BUSY])
        if s >= 0:
            out[d] = (int(sim.core.slot_i[s, K.S_LBN]), int(sim.core.slot_i[s, K.S_N]))
    return out


@pytest.mark.parametrize(("start", "expect"), [
    (0, {d: (0, 24) for d in range(4)}),                          # aligned: units d, d+4, d+8 on disk d
    (4, {0: (4, 24), 1: (0, 24), 2: (0, 24), 3: (0, 24)}),        # half a unit in: disk 0 gets 4-7 ... 24-27
])
def test_a_stripe_multiple_becomes_one_sub_request_per_disk(start: int, expect: dict[int, tuple[int, int]]) -> None:
    # D = 4 disks, u = 8 sectors, k = 3 units per disk: D u k = 96 sectors -> exactly 4 parts of 24.
    sim = Simulation(toy_spec(), DiskArray(4, Striped(unit_sectors=8)), requests([(0.0, 0, start, 96, "R")]),
                     SimConfig(service="constant", constant_ms=10.0), np.random.default_rng(1))
    sim.step()                                                    # the arrival: all parts start at once
    assert _parts_in_service(sim) == expect
    assert sim.disk_queue_lengths().tolist() == [0, 0, 0, 0]      # nothing left queued behind them
    sim.run()
    res = sim.result()
    assert (res.physical_ios, res.disk_physical_ios, res.sectors_read) == (4, (1, 1, 1, 1), 96)
    # Constant 10 ms per access: the four parts run in parallel; before the merge, 3 accesses per disk (30 ms).
    assert (res.mean_response_ms, res.mean_service_ms) == (10.0, 40.0)


def test_width_and_first_disk_keep_one_part_per_disk() -> None:
    # 2-wide stripe from disk 1 of 3 disks, unit 4: 40 sectors = 10 units -> 5 on disk 1, 5 on disk 2.
    sim = Simulation(toy_spec(), DiskArray(3, Striped(unit_sectors=4, width=2, first_disk=1)),
                     requests([(0.0, 0, 0, 40, "W")]), SimConfig(service="constant", constant_ms=7.0),
                     np.random.default_rng(1))
    sim.step()
    assert _parts_in_service(sim) == {1: (0, 20), 2: (0, 20)}
    sim.run()
    assert sim.result().disk_physical_ios == (0, 1, 1)
    assert sim.result().mean_response_ms == 7.0


def test_physical_io_count_is_disks_touched_per_request() -> None:
    # Random offsets and sizes over a 5-disk stripe of 6-sector units: a request covering m units (partial
    # ones included) costs min(5, m) accesses, one per disk it touches.
    rng = np.random.default_rng(4)
    n = 3000
    lbn = rng.integers(0, 50_000, n)
    size = rng.integers(1, 80, n)
    reqs = Requests.build(np.arange(n) * 1000.0, np.zeros(n), lbn, size, rng.random(n) < 0.5)
    res = run(toy_spec(), DiskArray(5, Striped(unit_sectors=6)), reqs, service="constant", constant_ms=0.5).result()
    units = (lbn + size - 1) // 6 - lbn // 6 + 1
    assert res.physical_ios == int(np.minimum(units, 5).sum())
    assert res.sectors_read + res.sectors_written == int(size.sum())


def test_detailed_service_of_a_merged_part_by_hand() -> None:
    # Toy disk (10 ms revolution, 0.1 ms per sector, 0.2 ms read-miss overhead), head on cylinder 0 at
    # t = 0: each disk's 24-sector part at physical 0 pays the overhead, waits for sector 0 to come round
    # (10 - 0.2 ms) and transfers 24 sectors: 0.2 + 9.8 + 2.4 = 12.4 ms. Three separate 8-sector accesses
    # per disk would take 0.2 + 9.8 + 0.8 and then nearly a revolution more for each of the other two.
    sim = run(toy_spec(), DiskArray(4, Striped(unit_sectors=8)), requests([(0.0, 0, 0, 96, "R")]))
    res = sim.result()
    assert res.mean_response_ms == pytest.approx(12.4)
    assert res.mean_service_ms == pytest.approx(4 * 12.4)


def test_five_block_striping_of_a_256_block_request() -> None:
    # FIVE's Block striping: 256-block requests on 1-block units over the 32 disks of table 1 (table 3
    # quotes 24.5 ms at light load). Merged, each disk reads its 8 contiguous blocks once: one seek plus
    # rotation plus 8 blocks per disk, the slowest of 32; per-block accesses took about 115 ms.
    spec = load("five_table1")
    rng = np.random.default_rng(3)
    n = 100
    total = 32 * spec.capacity_sectors - 512
    reqs = Requests.build(np.arange(n) * 1e6, np.zeros(n), rng.integers(0, total - 256, n), np.full(n, 256),
                          np.ones(n, dtype=bool))
    sim = Simulation(spec, DiskArray(32, Striped(unit_sectors=1)), reqs, SimConfig(), np.random.default_rng(2),
                     device_sectors=[total])
    sim.run()
    res = sim.result()
    assert res.physical_ios == 32 * n
    rev_ms = 60_000.0 / 4400
    assert rev_ms + 3.0 < res.mean_response_ms < 30.0             # > a revolution + a short seek; near 24.5


def test_scattered_pieces_stay_separate_and_contiguous_ones_merge() -> None:
    # 8-sector extents alternating over 2 disks. Scattered: extent 2 sits 8 sectors after extent 0 on
    # disk 0, so a 32-sector request costs 4 accesses (2 queued per disk: 2 x 10 ms). Packed (round robin):
    # extents 0 and 2 are back to back on disk 0 and merge, 2 accesses, 10 ms.
    scattered = ExtentMap(tuple(Extent(8 * i, 8, i % 2, 16 * (i // 2)) for i in range(8)))
    packed = ExtentMap.round_robin(64, 8, 2)
    reqs = requests([(0.0, 0, 0, 32, "R")])
    cfg = {"service": "constant", "constant_ms": 10.0}
    a = Simulation(toy_spec(), DiskArray(2, scattered), reqs, SimConfig(**cfg), np.random.default_rng(1))
    a.step()
    assert _parts_in_service(a) == {0: (0, 8), 1: (0, 8)}
    assert a.disk_queue_lengths().tolist() == [1, 1]
    a.run()
    assert (a.result().physical_ios, a.result().mean_response_ms) == (4, 20.0)
    b = run(toy_spec(), DiskArray(2, packed), reqs, **cfg)
    assert (b.result().physical_ios, b.result().mean_response_ms) == (2, 10.0)


def test_a_piece_ending_where_the_open_part_begins_joins_it() -> None:
    # Logical 0-7 on disk 0 at 8, 8-15 on disk 1 at 0, 16-23 on disk 0 at 0: disk 0 reads 0-15 once.
    lay = ExtentMap((Extent(0, 8, 0, 8), Extent(8, 8, 1, 0), Extent(16, 8, 0, 0)))
    sim = Simulation(toy_spec(), DiskArray(2, lay), requests([(0.0, 0, 0, 24, "R")]),
                     SimConfig(service="constant", constant_ms=10.0), np.random.default_rng(1))
    sim.step()
    assert _parts_in_service(sim) == {0: (0, 16), 1: (0, 8)}
    sim.run()
    assert sim.result().physical_ios == 2


@pytest.mark.parametrize("lengths", [
    [2048] * 50,                                    # uniform: one extent per bucket
    [1, 1, 1, 5000, 3, 7, 1, 90_000, 2, 2, 2],      # skewed: buckets far longer and far shorter than extents
    [12345],                                        # one extent
])
def test_the_extent_index_finds_the_extent_a_binary_search_finds(lengths: list[int]) -> None:
    length = np.array(lengths, dtype=np.int64)
    lstart = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    index, shift = extent_index(lstart, length)
    end = int(lstart[-1] + length[-1])
    assert (index[0], index[-1]) == (0, len(lengths) - 1)
    ext = np.arange(len(lengths), dtype=np.int64)
    lay = np.zeros(LP_COUNT, dtype=np.int64)
    lay[LP_KIND], lay[LP_SHIFT] = LAYOUT_EXTENTS, shift
    sectors = np.unique(np.concatenate([lstart, lstart + length - 1, np.random.default_rng(4).integers(0, end, 500)]))
    for x in sectors:
        want = int(np.searchsorted(lstart, x, side="right") - 1)
        d, p, left = K.map_unit(lay, lstart, length, ext, 1000 * ext, index, 0, 0, int(x), 0, np.uint64(1))
        assert (d, p, left) == (want, 1000 * want + x - lstart[want], lstart[want] + length[want] - x)


def test_an_extent_map_compiles_its_index_and_replays_through_it() -> None:
    # 300 extents of 8 sectors, shuffled over 2 disks, the first 100 of the shuffle on disk 0: the index has one
    # extent per 8-sector bucket (shift 3), 302 entries (the last two past the end point at the last extent), and
    # one 8-sector read of each extent reaches the disk its extent is on.
    rng = np.random.default_rng(7)
    order = rng.permutation(300)
    disk = (order >= 100).astype(int)
    lay = ExtentMap(tuple(Extent(8 * i, 8, int(disk[i]), 8 * int(order[i])) for i in range(300)))
    arrays = DiskArray(2, lay).compile(1 << 20, np.zeros(1, dtype=np.int64))
    assert arrays.params[LP_SHIFT] == 3
    assert arrays.ext_index.tolist() == [*range(300), 299, 299]
    reqs = requests([(10.0 * i, 0, 8 * int(j), 8, "R") for i, j in enumerate(rng.permutation(300))])
    res = run(toy_spec(), DiskArray(2, lay), reqs, service="constant", constant_ms=1.0).result()
    assert res.disk_physical_ios == (100, 200)


def test_an_extent_table_compiles_and_replays_as_the_same_extent_map() -> None:
    # The shuffled map above held as arrays: the same compiled arrays and the same replay.
    rng = np.random.default_rng(7)
    order = rng.permutation(300)
    disk = (order >= 100).astype(int)
    lay = ExtentMap(tuple(Extent(8 * i, 8, int(disk[i]), 8 * int(order[i])) for i in range(300)))
    table = ExtentTable(np.arange(300) * 8, np.full(300, 8), disk, 8 * order)
    base = np.zeros(1, dtype=np.int64)
    want, got = DiskArray(2, lay).compile(1 << 20, base), DiskArray(2, table).compile(1 << 20, base)
    for name in ("params", "ext_lstart", "ext_len", "ext_disk", "ext_pstart", "ext_index"):
        assert getattr(got, name).tolist() == getattr(want, name).tolist()
    reqs = requests([(10.0 * i, 0, 8 * int(j), 8, "R") for i, j in enumerate(rng.permutation(300))])
    res = run(toy_spec(), DiskArray(2, table), reqs, service="constant", constant_ms=1.0).result()
    assert (table.logical_sectors, len(table), res.disk_physical_ios) == (2400, 300, (100, 200))


@pytest.mark.parametrize(("cols", "message"), [
    (([0, 8, 17], [8, 8, 8], [0, 0, 0], [0, 8, 16]), r"extent 2: logical_start must be 16 \(extents tile"),
    (([0, 8], [8, 0], [0, 0], [0, 8]), "extent 1: sectors must be > 0, got 0"),
    (([0, 8], [8, 8], [0, -1], [0, 8]), "extent 1: disk and physical_start must be >= 0"),
    (([], [], [], []), "an extent map needs at least one extent"),
])
def test_an_extent_table_names_the_bad_extent(cols, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        ExtentTable(*(np.array(c, np.int64) for c in cols))


def test_an_extent_table_must_fit_the_disks() -> None:
    table = ExtentTable(np.array([0, 8]), np.array([8, 8]), np.array([0, 2]), np.array([0, 100]))
    with pytest.raises(ValueError, match=r"extent map names disks beyond the array's 2 \(extents \[1\]\)"):
        DiskArray(2, table)
    with pytest.raises(ValueError, match="extent 1 ends at sector 108, beyond the disk capacity 64"):
        DiskArray(3, table).compile(64, np.zeros(1, dtype=np.int64))
