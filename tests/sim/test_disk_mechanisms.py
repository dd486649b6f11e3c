"""DiskSim's mechanisms in the disk model, each against a hand-computed request timeline on the toy disk
(tests.sim.conftest.toy_spec: 10 ms per revolution, 100 us per sector, seek 1 ms + 10 us per cylinder, head
switch 0.5 ms, overheads 0.1 hit / 0.2 miss / 0.3 write ms): overheads after a read or a write, completion
overheads, the read and write water marks, disconnection, reselection and the extra write disconnect, the
minimum write seek delay, zero latency for reads only, read-ahead limits, the write segment, read hits on write
data, the g1 layout's first-block offset, empty zone front, slipped tracks and spare sectors, and the bus
holding, partial-hit, caching, rpm-error and sector-by-sector parameters."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from blockheat.sim import _kernel as K
from blockheat.sim.array import DiskArray
from blockheat.sim.disk import (
    DF_RA_TARGET,
    DI_LAST_END,
    DI_LAST_WRITE,
    DI_RA_SEG,
    F_HIT,
    F_PHYSICAL,
    SG_END,
    SG_LRU,
    SG_START,
    detailed_service,
    locate,
    media_access,
)
from blockheat.sim.engine import SimConfig, Simulation
from blockheat.sim.spec import DiskSpec, SpecError
from blockheat.sim.tracks import track_boundaries
from tests.sim.conftest import requests, toy_spec


class Disk:
    """One toy disk and its state, served request by request as the engine would."""

    def __init__(self, spec: DiskSpec) -> None:
        self.spec = spec
        self.a = spec.compile()
        self.di = np.zeros((1, K.DK_I), dtype=np.int64)
        self.di[0, [DI_RA_SEG, DI_LAST_END]] = -1
        self.df = np.zeros((1, K.DK_F))
        self.df[:, K.DKF_CLOCK] = 1.0
        self.seg = np.full((1, 3, spec.cache.segments + 1), -1.0)
        self.seg[:, SG_LRU, :] = 0.0

    def serve(self, now: float, lbn: int, n: int, op: str, zero_latency: bool = False) -> tuple[float, int]:
        a = self.a
        svc, flags = detailed_service(a.zones, a.seek_us, a.params, self.di, self.df, self.seg, 0, now, lbn, n,
                                      op == "W", False, zero_latency)
        return float(svc), int(flags)


def toy(**changes: Any) -> Disk:
    return Disk(toy_spec(**changes))


CACHE = {"segments": 1, "segment_sectors": 256, "read_ahead_sectors": 0}


def test_command_overhead_depends_on_the_previous_request() -> None:
    def read_after_a_write(miss: Any) -> float:
        d = toy(overhead_ms={"read_hit": 0.1, "read_miss": miss, "write": 0.3})
        d.serve(0.0, 50, 1, "W")                 # 300 us, wait 47 slots, write: 5100 us; the head stays on track 0
        return d.serve(10_000.0, 5, 5, "R")[0]
    # After the write, 0.6 ms: at 10,600 us sector 5 has passed, wait 99 slots (9900), read 5: 11,000 us.
    assert read_after_a_write({"after_read": 0.2, "after_write": 0.6}) == pytest.approx(11_000.0)
    # One value for both: 0.2 ms, slot 2, wait 3 slots, read 5: 1000 us.
    assert read_after_a_write(0.2) == pytest.approx(1000.0)


def test_a_hit_costs_overhead_data_preparation_bus_and_completion() -> None:
    d = toy(cache=CACHE, bus_ms_per_sector=0.05, overhead_ms={"read_hit": 0.1, "read_miss": 0.2, "write": 0.3,
                                                            "read_completion": 0.06, "write_completion": 0.04},
            bus_protocol_ms={"data_preparation": 0.02})
    d.serve(0.0, 0, 8, "R")
    assert d.serve(50_000.0, 0, 8, "R") == (pytest.approx(100.0 + 20.0 + 8 * 50.0 + 60.0), F_HIT)


@pytest.mark.parametrize("segments", [2, 62, 63, 70])
def test_a_read_finds_its_data_in_any_segment(segments: int) -> None:
    # Up to 62 segments are searched as bit masks, more one by one: the same segment either way. Each of
    # `segments` misses fills the least recently used segment in turn (no read-ahead), so area k is in segment k.
    d = toy(cache={"segments": segments, "segment_sectors": 64, "read_ahead_sectors": 0})
    for k in range(segments):
        assert d.serve(100_000.0 * k, 100 * k, 8, "R")[1] == F_PHYSICAL
    assert d.seg[0, SG_START, segments - 1] == 100 * (segments - 1)
    hit = 100.0                             # the hit overhead (the toy has no bus or completion time)
    assert d.serve(1e8, 100 * (segments - 1) + 2, 4, "R") == (pytest.approx(hit), F_HIT)
    assert d.serve(1e8 + 1e5, 0, 8, "R") == (pytest.approx(hit), F_HIT)
    assert d.serve(1e8 + 2e5, 100 * segments, 8, "R")[1] == F_PHYSICAL       # an area no segment holds


def test_read_miss_reselects_at_the_read_water_mark() -> None:
    def miss(by: str, **protocol: float) -> float:
        d = toy(cache={**CACHE, "water_marks_by": by}, bus_ms_per_sector=0.2, read_bus_start_fraction=0.75,
                overhead_ms={"read_hit": 0.1, "read_miss": 0.2, "write": 0.3, "read_completion": 0.05},
                bus_protocol_ms=protocol)
        return d.serve(0.0, 10, 8, "R")[0]
    # 200 us overhead, slot 2, wait 8: sector 10 done at 1100, the last at 1800. The mark: 6 of 8 sectors,
    # in at 1100 + 700 x 5/7 = 1600; reselect 150, prepare 20, 8 x 200 on the bus (slower than the media):
    # 3370, then the 50 us completion.
    assert miss("request", first_reselect=0.15, data_preparation=0.02) == pytest.approx(3420.0)
    # By segment (0.75 x 256 > 8): the whole request first, 1800 + 170 + 1600 + 50.
    assert miss("segment", first_reselect=0.15, data_preparation=0.02) == pytest.approx(3620.0)
    # Without reconnection costs the bus never runs ahead of the media: 1600 + 1600 + 50.
    assert miss("request") == pytest.approx(3250.0)


WRITE_PROTOCOL = {"first_reselect": 0.15, "other_reselect": 0.1, "data_preparation": 0.02,
                  "minimum_write_seek": 0.6, "write_disconnect": 0.2,
                  "extra_write_disconnect": {"command": 0.5, "disconnect": 0.05, "inter_disconnect_delay": 0.4,
                                             "seek_delta": 0.25, "second_disconnect": 0.12}}


def write_disk(last_write: bool, last_end: int = -1, *, extra_disconnect: bool = True, **protocol: Any) -> Disk:
    """A toy disk with WRITE_PROTOCOL (without its extra write disconnects if not extra_disconnect) whose previous
    request was a write (ending at last_end) or a read."""
    base = {k: v for k, v in WRITE_PROTOCOL.items() if extra_disconnect or k != "extra_write_disconnect"}
    d = toy(bus_write_ms_per_sector=0.2, bus_protocol_ms={**base, **protocol},
            overhead_ms={"read_hit": 0.1, "read_miss": 0.2, "write": 0.3, "write_completion": 0.05})
    d.di[0, DI_LAST_WRITE] = 1 if last_write else 0
    d.di[0, DI_LAST_END] = last_end
    return d


def test_a_write_after_a_write_disconnects_before_its_data() -> None:
    def write(lbn: int, **protocol: Any) -> float:
        return write_disk(True, **protocol).serve(0.0, lbn, 4, "W")[0]
    # Command 500 us; data from 500 + 50 + 400 + 150 + 20 = 1120, 4 x 200 us (in by 1920); positioning from
    # 750 (seek delta), 10 cylinders (1100 us) to 1850, past 750 + 600 (minimum seek); the media may start at
    # 1120 + (800 - 300) = 1620. Slot 18.5, sector 10 after 91.5 slots: 11,000, 4 sectors: 11,400. The disk
    # disconnected at 1920 + 120 (second disconnect); reselect (other) 100, completion 50.
    assert write(2010) == pytest.approx(11_550.0)
    # 90 cylinders away the seek (1900 us) outlasts the data; the disk disconnects all the same (a write
    # without fast writes always does once its data are in): 2650 (slot 26.5), sector 10 after 83.5 slots.
    assert write(18_010) == pytest.approx(11_550.0)
    assert write(18_010, disconnect_write_if_seek=True) == pytest.approx(11_550.0)


def test_a_write_after_a_read_sends_its_data_at_once() -> None:
    # Command 300 us, data from 320, 4 x 200 (in by 1120); positioning from 300: 10 cylinders to 1400 (past
    # 300 + 600); the media may start at 320 + 500 = 820. Slot 14, sector 10 after 96 slots: 11,000, 4 sectors:
    # 11,400; disconnected at 1120 + 200; reselect (first) 150, completion 50.
    assert write_disk(False).serve(0.0, 2010, 4, "W")[0] == pytest.approx(11_600.0)
    # A write starting where the previous write ended takes no extra disconnect (DiskSim's write segment ends
    # there): the command after a write (300 us here too) and the same timeline, 11,600.
    assert write_disk(True, last_end=2010).serve(0.0, 2010, 4, "W")[0] == pytest.approx(11_600.0)
    # Not continuing it: the extra disconnect, 11,550 as in the test above.
    assert write_disk(True, last_end=2000).serve(0.0, 2010, 4, "W")[0] == pytest.approx(11_550.0)


def test_a_disk_with_extra_write_disconnects_writes_once_enough_blocks_are_buffered() -> None:
    # After a read, 4 sectors at sector 10 of the track under the head: command 300, data from 320 at 200 us a
    # block. The head is ready at 300 + 600 (minimum seek). DiskSim's rule for such a disk: no block goes to the
    # media before min(4, 10) blocks are buffered, 320 + 800 = 1120, so sector 10 (at 1000) is missed: 11,000,
    # 4 sectors: 11,400; reselect 150 and completion 50 (the disconnection ended at 1120 + 200).
    assert write_disk(False).serve(0.0, 10, 4, "W")[0] == pytest.approx(11_600.0)
    # Without extra write disconnects each block only needs its own data: sector 10 (1000, its data in at 520),
    # 11 (1100; 720), 12 (1200; 920), 13 (1300; 1120) are written by 1400; disconnected 1120 + 200: 1600.
    assert write_disk(False, extra_disconnect=False).serve(0.0, 10, 4, "W")[0] == pytest.approx(1600.0)


@pytest.mark.parametrize(("n", "expected"), [(44, 6400.0), (50, 17_000.0)])
def test_a_large_write_waits_for_fifteen_blocks(n: int, expected: float) -> None:
    # After a read, bus 120 us a block from 320, sector 18 under the head at 1800 (ready at 900). 44 blocks:
    # 10 buffered by 1520, so sector 18 is written and the media (100 us a sector) never outruns the data
    # (block k in at 440 + 120 k): done 1800 + 4400 = 6200, the disconnection (5600 + 200) before that: 6400.
    # 50 blocks (45 or more): 15 buffered only at 2120, sector 18 comes again at 11,800: 16,800 + 200.
    d = toy(bus_write_ms_per_sector=0.12, bus_protocol_ms=WRITE_PROTOCOL,
            overhead_ms={"read_hit": 0.1, "read_miss": 0.2, "write": 0.3, "write_completion": 0.05})
    assert d.serve(0.0, 18, n, "W")[0] == pytest.approx(expected)


def test_the_media_outrunning_a_slower_bus_loses_a_revolution() -> None:
    # The disk with extra write disconnects, after a read: 20 blocks from 320 at 200 us, 10 buffered by 2320;
    # sector 24 under the head at 2400 is written, and the next ones (100 us each) while their data are in; sector
    # 43's pass starts at 4300, its data only at 4320: it comes round at 14,300, done 14,400; the disconnection
    # (4320 + 200) long over: reselect 150, completion 50.
    assert write_disk(False).serve(0.0, 24, 20, "W")[0] == pytest.approx(14_600.0)
    # A disk without them starts the write late enough that the media never outruns the data: from 320 + 4000
    # - 1900 = 2420 sector 24 is next at 12,400, done 14,400: the same completion here.
    assert write_disk(False, extra_disconnect=False).serve(0.0, 24, 20, "W")[0] == pytest.approx(14_600.0)


def test_reselection_waits_for_the_disconnection() -> None:
    # One sector at slot 9 of the track under the head: command 300, data in by 320 + 200 = 520; positioned
    # at 300 + 600 (minimum seek, slot 9): the sector is written by 1000. The disconnection (600 us) ends at
    # 1120: reselect 150, completion 50.
    d = write_disk(False, write_disconnect=0.6)
    assert d.serve(0.0, 9, 1, "W")[0] == pytest.approx(1320.0)


def test_minimum_write_seek_delay_applies_to_sequential_writes() -> None:
    protocol = {"minimum_write_seek": 0.6}
    d = toy(bus_protocol_ms=protocol)
    # The media no sooner than 300 + 600 us (slot 9): sector 0 after 91 slots (10,000), 5 sectors.
    assert d.serve(0.0, 0, 5, "W")[0] == pytest.approx(10_500.0)
    # Sequential to it, after its completion: the delay still applies (DiskSim waives it only for a write
    # joining one whose media work is under way): 20,900 (slot 9), sector 5 after 96 slots, one sector: 10,600.
    assert d.serve(20_000.0, 5, 1, "W")[0] == pytest.approx(10_600.0)
    # Without the delay: 300 us (slot 3), sector 5 after 2 slots, one sector: 600 us.
    assert toy().serve(20_000.0, 5, 1, "W")[0] == pytest.approx(600.0)


def test_the_read_water_mark_by_request_rounds_down() -> None:
    # DiskSim: max(1, (int)(0.75 x 2)) = 1 sector. Two sectors at sector 10 (200 us overhead): done at 1100 and
    # 1200; the bus from 1100 + 150 + 20, two sectors of 200 us, completion 50: 1720 (1820 were it rounded up).
    d = toy(cache=CACHE, bus_ms_per_sector=0.2, read_bus_start_fraction=0.75,
            overhead_ms={"read_hit": 0.1, "read_miss": 0.2, "write": 0.3, "read_completion": 0.05},
            bus_protocol_ms={"first_reselect": 0.15, "data_preparation": 0.02})
    assert d.serve(0.0, 10, 2, "R")[0] == pytest.approx(1720.0)


@pytest.mark.parametrize(("fraction", "expected"), [(0.75, 22_020.0), (0.5, 20_950.0)])
def test_a_read_across_a_track_switch(fraction: float, expected: float) -> None:
    # 8 sectors from sector 96 (no skew): 96-99 done 9700-10,000, head switch 500, sector 0 of the next track at
    # 20,000: the rest done 20,100-20,400. The water mark 6 (0.75): the 6th sector is done at 20,200 (not
    # interpolated over the switch); bus from 20,200 + 170, 8 x 200: 21,970 + 50. The mark 4 (0.5): in at 10,000,
    # the bus would end at 11,770, but it waits for the next track: its first sector at 20,100, four more
    # sectors of 200 us from there: 20,900 + 50.
    d = toy(cache=CACHE, bus_ms_per_sector=0.2, read_bus_start_fraction=fraction,
            overhead_ms={"read_hit": 0.1, "read_miss": 0.2, "write": 0.3, "read_completion": 0.05},
            bus_protocol_ms={"first_reselect": 0.15, "data_preparation": 0.02})
    assert d.serve(0.0, 96, 8, "R")[0] == pytest.approx(expected)


@pytest.mark.parametrize(("runs_out", "expected"), [(True, 10_400.0), (False, 400.0)])
def test_a_read_ahead_stopped_in_a_track_switch(runs_out: bool, expected: float) -> None:
    # Track skew 10: sector s of track 1 passes at slot s + 10. A miss of sectors 96-97 ends at 9800; read-ahead
    # reads 98, 99 by 10,000 and switches to track 1 (500 us). At 10,200 a miss of sector 95 of track 1 (lbn 195,
    # slot 5: 10,500-10,600). When the switch runs out (DiskSim's disconnect_write_if_seek 0) the head ends on
    # track 1 with none of it read, and positioning starts the switch's rest (300 us) after the 200 us overhead:
    # 10,700, past the sector, which comes again at 20,500: 10,400 us. Stopped at once, the stream's mean rate
    # (a track per 11 ms) has it at sector 101, the head on track 1 from 10,400: 400 us.
    zones = [{"first_cylinder": 0, "last_cylinder": 99, "sectors_per_track": 100, "track_skew": 10}]
    d = toy(zones=zones, cache={"segments": 2, "segment_sectors": 256, "read_ahead_sectors": 50},
            bus_protocol_ms={"disconnect_write_if_seek": not runs_out})
    assert d.serve(0.0, 96, 2, "R")[0] == pytest.approx(9800.0)
    assert d.serve(10_200.0, 195, 1, "R")[0] == pytest.approx(expected)
    assert d.seg[0, SG_END, 0] == (100.0 if runs_out else 101.0)     # what the stopped stream had read


@pytest.mark.parametrize(("last_write", "expected"), [(False, 1070.0), (True, 1370.0)])
def test_read_miss_reselects_after_its_disconnection(last_write: bool, expected: float) -> None:
    # Sector 2 of the track under the head, 200 us overhead (slot 2): read by 300, the water mark (one sector)
    # then. The disconnection after the command ends at 200 + 500 (after a read) or 200 + 800 (after a write);
    # reselect 150, prepare 20, one sector on the bus (200).
    d = toy(bus_ms_per_sector=0.2, read_bus_start_fraction=0.75,
            bus_protocol_ms={"first_reselect": 0.15, "data_preparation": 0.02,
                             "read_disconnect": {"after_read": 0.5, "after_write": 0.8}})
    d.di[0, DI_LAST_WRITE] = 1 if last_write else 0
    assert d.serve(0.0, 2, 1, "R")[0] == pytest.approx(expected)


def test_zero_latency_for_reads_but_not_writes() -> None:
    d = toy(zero_latency={"reads": True, "writes": False})
    # A full track read starts where the head lands (slot 2): one revolution after the 200 us overhead.
    assert d.serve(0.0, 0, 100, "R", zero_latency=True)[0] == pytest.approx(10_200.0)
    # The write waits for sector 0: 300 us, 97 slots, then a revolution.
    assert d.serve(30_000.0, 0, 100, "W", zero_latency=True)[0] == pytest.approx(20_000.0)
    both = toy(zero_latency=True)
    assert both.serve(30_000.0, 0, 100, "W", zero_latency=True)[0] == pytest.approx(10_300.0)


@pytest.mark.parametrize(("to", "over", "target", "start"), [
    ("segment", True, 288, 32), ("segment", False, 286, 30), ("track", True, 100, 30), ("cylinder", True, 200, 30)])
def test_read_ahead_limits(to: str, over: bool, target: int, start: int) -> None:
    # A miss of 30..37 with 250 sectors of read-ahead into a 256-sector segment: up to 288 when read-ahead
    # may replace the requested data (the window slides to 32), 286 when it stops at the full segment, the
    # end of track 0 (100) or of cylinder 0 (200).
    d = toy(cache={"segments": 1, "segment_sectors": 256, "read_ahead_sectors": 250, "read_ahead_to": to,
                   "read_ahead_over_requested": over})
    d.serve(0.0, 30, 8, "R")
    assert d.df[0, DF_RA_TARGET] == target
    assert d.seg[0, SG_START, 0] == start


@pytest.mark.parametrize(("write_segment", "flags"), [(True, F_HIT), (False, F_PHYSICAL)])
def test_a_dedicated_write_segment_keeps_read_data(write_segment: bool, flags: int) -> None:
    d = toy(cache={**CACHE, "write_segment": write_segment})
    d.serve(0.0, 0, 8, "R")
    d.serve(50_000.0, 5000, 8, "W")
    assert d.serve(100_000.0, 0, 8, "R")[1] == flags


@pytest.mark.parametrize(("allowed", "flags"), [(True, F_HIT), (False, F_PHYSICAL)])
def test_read_hits_on_write_data(allowed: bool, flags: int) -> None:
    d = toy(cache={**CACHE, "read_hits_on_write_data": allowed})
    d.serve(0.0, 5000, 8, "W")
    assert d.serve(50_000.0, 5000, 8, "R")[1] == flags
    assert d.seg[0, SG_END, 1] == (5008 if allowed else -1)


def test_write_water_mark_refills() -> None:
    def write(mark: float) -> float:
        d = toy(cache={"segments": 1, "segment_sectors": 4, "write_water_mark": mark, "water_marks_by": "segment"},
                bus_protocol_ms={"other_reselect": 0.25})
        return d.serve(0.0, 0, 12, "W")[0]
    # 12 sectors through a 4-sector segment. At a mark of 1 sector the 3 refills ((12 - 4) / 3) reconnect in
    # 250 us while the media writes the one sector left in 100: each refill loses a revolution. At 3 sectors
    # (300 us of media work) the data come in time.
    assert write(0.25) - write(0.75) == pytest.approx(3 * 10_000.0)


def layout() -> DiskSpec:
    return toy_spec(cylinders=10, zones=[{"first_cylinder": 0, "last_cylinder": 9, "sectors_per_track": 10,
                                          "track_skew": 1, "cylinder_skew": 2, "first_block_offset": 3,
                                          "empty_front_sectors": 15, "slips": [4], "spare_tracks": 3,
                                          "spare_sectors_per_track": 2}])


def test_g1_layout_offset_empty_front_slips_and_spare_sectors() -> None:
    spec = layout()
    a = spec.compile()
    # 20 tracks of 8 logical sectors, 3 spare tracks, 15 sectors of management area: 121 blocks.
    assert spec.capacity_sectors == 121
    # The front takes track 0 and 7 sectors of track 1 (cylinder 0, head 1; skew 3 + 1): block 0 is its last
    # logical sector. Track 2 (cylinder 1, head 0): 3 + (1 + 2). Track 3: one more track skew. Track 4 is
    # slipped: block 17 is on track 5 (cylinder 2, head 1): 3 + 2 x 3 + 1 = 10 = 0 (mod 10).
    assert locate(a.zones, 2, 0) == (0, 1, 7, 10, 4)
    assert locate(a.zones, 2, 1) == (1, 0, 0, 10, 6)
    assert locate(a.zones, 2, 9) == (1, 1, 0, 10, 7)
    assert locate(a.zones, 2, 17) == (2, 1, 0, 10, 0)
    assert locate(a.zones, 2, 120) == (8, 1, 7, 10, (3 + 8 * 3 + 1) % 10)   # track 17, the last before 3 spares
    rows = track_boundaries(spec).to_pylist()
    assert [(r["cylinder"], r["head"], r["first_lbn"], r["sectors"], r["skew_sectors"]) for r in rows[:4]] == [
        (0, 1, 0, 1, 1), (1, 0, 1, 8, 6), (1, 1, 9, 8, 7), (2, 1, 17, 8, 0)]
    assert sum(r["sectors"] for r in rows) == 121


def test_a_transfer_steps_over_the_slipped_track() -> None:
    a = layout().compile()
    # From cylinder 1, head 1 at 0 us: block 16 (sector 7 of track 3, slot 4) after 4 slots of 1000 us, then a
    # one-cylinder seek (1010 us) to track 5, where block 17 is at slot 0: 6010 -> 10,000, read: 11,000.
    first, end, cyl, head = media_access(a.zones, a.seek_us, a.params, 1, 1, 0.0, 0.0, 16, 2, False, False)
    assert (first, end, cyl, head) == (pytest.approx(5000.0), pytest.approx(11_000.0), 2, 1)


def test_layout_errors_name_the_zone() -> None:
    zone = {"first_cylinder": 0, "last_cylinder": 99, "sectors_per_track": 100}
    with pytest.raises(SpecError, match="zone 0: 2 slipped tracks need as many spare tracks, the zone has 1"):
        toy_spec(zones=[{**zone, "slips": [3, 7], "spare_tracks": 1}])
    with pytest.raises(SpecError, match="zone 0: first_block_offset must be in"):
        toy_spec(zones=[{**zone, "first_block_offset": 100}])
    with pytest.raises(SpecError, match="read_ahead_to must be one of segment, track, cylinder"):
        toy_spec(cache={"read_ahead_to": "disk"})
    with pytest.raises(SpecError, match=r"overhead_ms\.read_miss: unknown key"):
        toy_spec(overhead_ms={"read_miss": {"after_read": 0.2, "later": 1.0}})


def test_the_new_fields_round_trip() -> None:
    spec = layout()
    spec2 = toy_spec(zero_latency={"reads": True, "writes": False}, bus_protocol_ms=WRITE_PROTOCOL,
                     overhead_ms={"read_hit": {"after_read": 0.1, "after_write": 0.2}, "read_miss": 0.2,
                                  "write": 0.3, "read_completion": 0.05, "write_completion": 0.04},
                     cache={**CACHE, "read_ahead_to": "track", "write_water_mark": 0.5})
    for s in (spec, spec2):
        assert DiskSpec.from_dict(s.to_dict()) == s


# DiskSim disk parameters beyond the C2247A's: each with its hand-computed timeline on the toy disk.


@pytest.mark.parametrize("by_sector", [True, False])
def test_calc_sector_by_sector_has_no_effect(by_sector: bool) -> None:
    # DiskSim: "no effect on simulation accuracy". 200 us overhead (slot 2), sector 50 after 48 slots, one sector.
    d = toy(calc_sector_by_sector=by_sector)
    assert d.serve(0.0, 50, 1, "R")[0] == pytest.approx(5100.0)


@pytest.mark.parametrize(("caching", "again"), [(True, 100.0), (False, 10_800.0)])
def test_caching_off_keeps_nothing_for_later_requests(caching: bool, again: float) -> None:
    d = toy(cache={**CACHE, "enable_caching": caching})
    # 200 us (slot 2), sector 0 after 98 slots (10,000), 8 sectors: 10,800.
    assert d.serve(0.0, 0, 8, "R") == (pytest.approx(10_800.0), F_PHYSICAL)
    # Again at 50,000: a hit (100 us overhead), or without caching the same miss: 50,200 is slot 2 again.
    assert d.serve(50_000.0, 0, 8, "R")[0] == pytest.approx(again)
    with pytest.raises(SpecError, match="enable_caching false leaves nothing to read ahead into"):
        toy_spec(cache={**CACHE, "read_ahead_sectors": 16, "enable_caching": False})


@pytest.mark.parametrize(("hold", "mark", "expected"), [(False, 0.25, 41_200.0), (False, 0.75, 11_200.0),
                                                       (True, 0.25, 11_200.0), (True, 0.75, 11_200.0)])
def test_holding_the_bus_through_a_write_spares_its_refills(hold: bool, mark: float, expected: float) -> None:
    d = toy(cache={"segments": 1, "segment_sectors": 4, "write_water_mark": mark, "water_marks_by": "segment"},
            bus_protocol_ms={"other_reselect": 0.25, "hold_bus_write": hold})
    # 12 sectors through a 4-sector segment: 300 us command (slot 3), sector 0 after 97 slots (10,000), 12
    # sectors: 11,200. Releasing the bus, each of the 3 refills ((12 - 4) / 3 at a 1-sector mark) reconnects in
    # 250 us while the media writes the one sector left in 100: a revolution each. At 3 sectors, or holding
    # the bus (it follows the media), none is lost.
    assert d.serve(0.0, 0, 12, "W")[0] == pytest.approx(expected)


@pytest.mark.parametrize(("hold", "expected"), [(True, 1850.0), (False, 2070.0)])
def test_releasing_the_bus_during_a_read(hold: bool, expected: float) -> None:
    d = toy(bus_ms_per_sector=0.05, read_bus_start_fraction=0.25,
            bus_protocol_ms={"first_reselect": 0.15, "data_preparation": 0.02, "read_disconnect": 0.1,
                             "hold_bus_read": hold})
    # 200 us (slot 2), sectors 10..17 buffered at 1100, 1200, ..., 1800; the water mark (2 sectors) at 1200.
    # Reselect 150 + prepare 20: the bus from 1370. Holding it: 8 x 50 us never ahead of the media: 1800 + 50.
    # Releasing it: 3 sectors in at 1370 (sent by 1520), 2 more (1620), 1 more (1670), then none: disconnect
    # (100 us, to 1770) and reselect once 2 more are in (1800): 1970, the last 2 sent by 2070.
    assert d.serve(0.0, 10, 8, "R")[0] == pytest.approx(expected)


@pytest.mark.parametrize(("immediate", "expected"), [(True, 1250.0), (False, 1570.0)])
def test_a_partial_hit_sent_at_once_or_at_the_water_mark(immediate: bool, expected: float) -> None:
    d = toy(cache={**CACHE, "immediate_partial_hit": immediate}, bus_ms_per_sector=0.05,
            read_bus_start_fraction=0.75, bus_protocol_ms={"first_reselect": 0.15, "data_preparation": 0.02})
    d.serve(0.0, 0, 8, "R")                         # sectors 0..7 in the segment, no read-ahead
    # 4..11 at 50,000: 4 sectors cached, the stream restarts at sector 8 (slot 8), which passes 50,800..50,900;
    # sector 11 is in at 51,200. At once: 100 us hit overhead, then the bus overlapped with the stream: the
    # last sector at 51,200 + 50. Not at once (4 cached, below the mark of 6): miss overhead 200 (the stream
    # from 50,200, the same sector 8), sector 9 in at 51,000: reselect 150 + prepare 20, 8 x 50: 51,570.
    assert d.serve(50_000.0, 4, 8, "R")[0] == pytest.approx(expected)


def test_rpm_error_gives_each_disk_its_own_speed() -> None:
    # A disk 1 % fast (clock 1.01): 200 us overhead is 202 us of its own time (slot 2.02), sector 50 after
    # 47.98 slots: 5000, one sector: 5100 of its time, 5100 / 1.01 us of the run's.
    d = toy()
    d.df[0, K.DKF_CLOCK] = 1.01
    assert d.serve(0.0, 50, 1, "R")[0] == pytest.approx(5100.0 / 1.01)
    # The run draws each spindle's speed within rpm +- the error, from the seed, and only with an error.
    spec = toy_spec(rpm_error_percent=1.0)
    clocks = []
    for s in (spec, spec, toy_spec()):
        sim = Simulation(s, DiskArray(4), requests([(0.0, k, 0, 1, "R") for k in range(4)]), SimConfig(),
                         rng=np.random.default_rng(7))
        clocks.append(sim.core.dk_f[:, K.DKF_CLOCK].copy())
    assert np.all(np.abs(clocks[0] - 1.0) <= 0.01)
    assert len(set(clocks[0])) == 4
    assert np.array_equal(clocks[0], clocks[1])
    assert np.all(clocks[2] == 1.0)
    with pytest.raises(SpecError, match=r"rpm_error_percent must be in \[0, 100\)"):
        toy_spec(rpm_error_percent=-1.0)
