"""Disk specs: one drive model (geometry, seek curve, overheads, on-board cache) as a validated, typed
value, read from a JSON or TOML file and compiled to flat arrays for the numba service-time model."""
from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "BusProtocol",
    "CacheSpec",
    "DiskArrays",
    "DiskSpec",
    "Overheads",
    "SeekCurve",
    "SpecError",
    "Zone",
    "load_spec_file",
]

# Column indices of DiskArrays.zones (int64 [n_pieces, Z_COLS]): one row per run of consecutive mapped
# tracks of a zone (a zone is split where a slipped track or the empty space at its front interrupts it).
(Z_FIRST_CYL, Z_NCYL, Z_SPT, Z_TSKEW, Z_CSKEW, Z_SPARE, Z_FIRST_LBN, Z_NLBN, Z_OFFSET, Z_LSPT, Z_FIRST_TRACK,
 Z_FIRST_SECTOR, Z_ZONE) = range(13)
Z_COLS = 13
# Indices of DiskArrays.params (float64). Overheads without a suffix apply after a read, *_AW after a write.
(P_ROT_US, P_HEAD_SWITCH_US, P_WRITE_SETTLE_US, P_OH_HIT_US, P_OH_MISS_US, P_OH_WRITE_US, P_BUS_US,
 P_SEGMENTS, P_SEG_SECTORS, P_READ_AHEAD, P_WRITE_BACK, P_ZERO_LATENCY, P_SURFACES, P_CAPACITY,
 P_AVG_SEEK_US, P_CYLINDERS, P_BUS_WRITE_US, P_READ_BUS_START,
 P_OH_HIT_AW_US, P_OH_MISS_AW_US, P_OH_WRITE_AW_US, P_CPL_READ_US, P_CPL_WRITE_US, P_ZL_WRITES,
 P_RA_TO, P_RA_OVER_REQ, P_WRITE_SEG, P_READ_HITS_ON_WRITES, P_WRITE_MARK, P_MARK_BY_REQ,
 P_RESEL_FIRST_US, P_RESEL_OTHER_US, P_DATA_PREP_US, P_XD_ON, P_XD_CMD_US, P_XD_DISC_US, P_XD_DELAY_US,
 P_XD_SEEK_DELTA_US, P_MIN_WRITE_SEEK_US, P_DISC_WRITE_IF_SEEK, P_DISC_READ_US, P_DISC_READ_AW_US,
 P_DISC_WRITE_US, P_XD_DISC2_US, P_HOLD_READ, P_HOLD_WRITE, P_IMMED_PARTIAL) = range(47)
P_COUNT = 47
#: cache.read_ahead_to: where read-ahead after a read stops (DiskSim "Buffer continuous read" 3, 1, 2).
READ_AHEAD_TO = {"segment": 0, "track": 1, "cylinder": 2}
#: Upper bounds of the spec numbers that size the model's arrays (checked before any is allocated): the seek
#: table and the schedulers' queues have one entry per cylinder, the zone table one row per run of tracks, the
#: cache's state one column per segment per disk. Each is far above any real drive's.
LIMITS = {"cylinders": 1 << 22, "surfaces": 1 << 10, "sectors_per_track": 1 << 20, "sector_size": 1 << 16,
          "zones": 1 << 16, "segments": 1 << 12, "segment_sectors": 1 << 24}


class SpecError(ValueError):
    """A disk spec is malformed; the message names the field and the bad value."""


class DiskArrays(NamedTuple):
    """A spec compiled for the numba model: zone table, dense seek times (us) by distance, scalars."""

    zones: np.ndarray
    seek_us: np.ndarray
    params: np.ndarray


@dataclass(frozen=True)
class Zone:
    """Cylinders first..last (inclusive) recorded with sectors_per_track physical sectors; skews in sectors.

    Layout within the zone (DiskSim's g1 layout): logical blocks fill its physical tracks in order (track t
    is cylinder first + t // surfaces, head t % surfaces), after empty_front_sectors of management area and
    skipping the tracks listed in slips (physical track numbers within the zone). Every track's last
    spare_sectors_per_track sectors are spares; the zone's last spare_tracks tracks are spare tracks, and
    each slipped track uses one of them. The first block of the zone lies first_block_offset sectors past
    physical sector 0; each track's first block is skewed a further track_skew per head switch and
    cylinder_skew per cylinder switch, counted over physical tracks.
    """

    first_cylinder: int
    last_cylinder: int
    sectors_per_track: int
    track_skew: int = 0
    cylinder_skew: int = 0
    spare_tracks: int = 0
    first_block_offset: int = 0
    empty_front_sectors: int = 0
    slips: tuple[int, ...] = ()
    spare_sectors_per_track: int = 0

    @property
    def cylinders(self) -> int:
        return self.last_cylinder - self.first_cylinder + 1

    @property
    def logical_per_track(self) -> int:
        return self.sectors_per_track - self.spare_sectors_per_track

    def mapped_sectors(self, surfaces: int) -> int:
        return (self.cylinders * surfaces - self.spare_tracks) * self.logical_per_track - self.empty_front_sectors

    def pieces(self, surfaces: int) -> list[tuple[int, int, int]]:
        """Runs of mapped tracks: (first physical track in the zone, first logical sector in it, blocks)."""
        lspt = self.logical_per_track
        track, sector = divmod(self.empty_front_sectors, lspt)
        left = self.mapped_sectors(surfaces)
        slips = sorted(self.slips)
        out: list[tuple[int, int, int]] = []
        while left > 0:
            while slips and slips[0] < track:
                slips.pop(0)
            if slips and slips[0] == track:
                slips.pop(0)
                track += 1
                continue
            run_end = slips[0] if slips else track + (left + sector + lspt - 1) // lspt
            n = min(left, (run_end - track) * lspt - sector)
            out.append((track, sector, n))
            left -= n
            track, sector = run_end, 0
        return out


@dataclass(frozen=True)
class SeekCurve:
    """Seek time (ms) by cylinder distance d >= 1; distance 0 costs nothing.

    Pieces, tried in order: `table` points (distance, ms) with linear interpolation for d up to the last
    point (below the first point: its time); then a + b*sqrt(d) for d < sqrt_below; then c + e*d.
    """

    table: tuple[tuple[float, float], ...] = ()
    sqrt_a_ms: float | None = None
    sqrt_b_ms: float | None = None
    sqrt_below: float = math.inf
    linear_c_ms: float | None = None
    linear_e_ms: float | None = None

    def time_ms(self, distance: np.ndarray | int) -> np.ndarray:
        d = np.asarray(distance, dtype=np.float64)
        out = np.full(d.shape, np.nan)
        done = d <= 0
        out[done] = 0.0
        if self.table:
            xs = np.array([p[0] for p in self.table], dtype=np.float64)
            ys = np.array([p[1] for p in self.table], dtype=np.float64)
            m = ~done & (d <= xs[-1])
            out[m] = np.interp(d[m], xs, ys)
            done = done | m
        if self.sqrt_a_ms is not None and self.sqrt_b_ms is not None:
            m = ~done & (d < self.sqrt_below)
            out[m] = self.sqrt_a_ms + self.sqrt_b_ms * np.sqrt(d[m])
            done = done | m
        if self.linear_c_ms is not None and self.linear_e_ms is not None:
            m = ~done
            out[m] = self.linear_c_ms + self.linear_e_ms * d[m]
        return out

    def average_ms(self, cylinders: int) -> float:
        """Mean seek time between two independent uniformly random cylinders (distance 0 included)."""
        d = np.arange(cylinders, dtype=np.float64)
        weight = np.where(d == 0, 1.0 / cylinders, 2.0 * (cylinders - d) / cylinders**2)
        return float(np.sum(weight * self.time_ms(d)))

    @classmethod
    def fitted(cls, *, average_ms: float, single_cylinder_ms: float, cylinders: int,
               boundary_fraction: float = 1.0 / 3.0) -> SeekCurve:
        """The usual shape (a + b*sqrt(d) for short seeks, c + e*d beyond) fitted to a datasheet average.

        Constraints: t(1) = single_cylinder_ms; value and slope continuous at the boundary
        d0 = boundary_fraction * cylinders; mean over random cylinder pairs = average_ms.
        """
        if not 0 < single_cylinder_ms < average_ms:
            raise SpecError(f"seek fit: need 0 < single_cylinder_ms < average_ms, got "
                            f"{single_cylinder_ms} and {average_ms}")
        if cylinders < 8:
            raise SpecError(f"seek fit: need at least 8 cylinders, got {cylinders}")
        d0 = max(2.0, boundary_fraction * cylinders)
        d = np.arange(cylinders, dtype=np.float64)
        w = np.where(d == 0, 0.0, 2.0 * (cylinders - d) / cylinders**2)
        short = (d > 0) & (d < d0)
        long_ = d >= d0
        # Unknowns x = (a, b, c, e); time(d) is linear in x piecewise.
        rows = np.array([
            [1.0, 1.0, 0.0, 0.0],                              # t(1) = a + b
            [1.0, math.sqrt(d0), -1.0, -d0],                   # value continuity at d0
            [0.0, 1.0 / (2.0 * math.sqrt(d0)), 0.0, -1.0],     # slope continuity at d0
            [np.sum(w * short), np.sum(w * short * np.sqrt(d)), np.sum(w * long_), np.sum(w * long_ * d)],
        ])
        a, b, c, e = np.linalg.solve(rows, np.array([single_cylinder_ms, 0.0, 0.0, average_ms]))
        curve = cls(sqrt_a_ms=float(a), sqrt_b_ms=float(b), sqrt_below=float(d0),
                    linear_c_ms=float(c), linear_e_ms=float(e))
        times = curve.time_ms(np.arange(1, cylinders))
        if np.any(times <= 0) or np.any(np.diff(times) < -1e-9):
            raise SpecError(f"seek fit: average {average_ms} ms with single-cylinder {single_cylinder_ms} ms "
                            f"gives a non-monotone curve on {cylinders} cylinders; choose other values")
        return curve

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.table:
            out["table"] = [list(p) for p in self.table]
        if self.sqrt_a_ms is not None:
            out["sqrt"] = {"a_ms": self.sqrt_a_ms, "b_ms": self.sqrt_b_ms}
            if math.isfinite(self.sqrt_below):
                out["sqrt"]["below"] = self.sqrt_below
        if self.linear_c_ms is not None:
            out["linear"] = {"c_ms": self.linear_c_ms, "e_ms": self.linear_e_ms}
        return out


@dataclass(frozen=True)
class Overheads:
    """Controller overheads (ms): command overhead by outcome when the previous request was a read, the
    same after a write (None: as after a read), and the completion overhead before the completion message."""

    read_hit_ms: float = 0.0
    read_miss_ms: float = 0.0
    write_ms: float = 0.0
    read_hit_after_write_ms: float | None = None
    read_miss_after_write_ms: float | None = None
    write_after_write_ms: float | None = None
    read_completion_ms: float = 0.0
    write_completion_ms: float = 0.0


@dataclass(frozen=True)
class BusProtocol:
    """SCSI reconnection costs (ms) of a disconnecting disk (DiskSim's reselect, data preparation, disconnect and
    extra-write-disconnect overheads). A read miss disconnects after its command (read_disconnect, after a read
    or a write: None as after a read) and reselects (first_reselect) at its water mark, not before the
    disconnection is done. A write through to the media disconnects once its data are in (write_disconnect)
    and reselects (first_reselect) to complete when the media work and the disconnection are done.
    extra_write_disconnect: a write after a write disconnects after its command,
    before any data (extra_command replaces the write command overhead; the data follow extra_disconnect +
    inter_disconnect_delay + first_reselect later; positioning starts seek_delta after the command; once its
    data are in it disconnects with extra_second_disconnect and completes after other_reselect).
    minimum_write_seek: the head reaches a write's track no sooner than this after positioning starts.
    disconnect_write_if_seek: DiskSim's flag for stopping a read-ahead caught in a seek: true (the default) stops
    it at once; false runs the seek (a track switch) out, the head ends on the new track and the next request's
    positioning starts the rest of the switch later. hold_bus_read: a read miss keeps the bus from its
    reselection to its last sector (else, when the bus has sent every buffered sector it disconnects,
    read_disconnect, and reselects once the read water mark's sectors more are buffered). hold_bus_write: a
    write larger than its segment keeps the bus while the segment drains (else it disconnects and reselects,
    other_reselect, at the write water mark)."""

    first_reselect_ms: float = 0.0
    other_reselect_ms: float = 0.0
    data_preparation_ms: float = 0.0
    extra_write_disconnect: bool = False
    extra_command_ms: float = 0.0
    extra_disconnect_ms: float = 0.0
    inter_disconnect_delay_ms: float = 0.0
    seek_delta_ms: float = 0.0
    minimum_write_seek_ms: float = 0.0
    disconnect_write_if_seek: bool = True
    read_disconnect_ms: float = 0.0
    read_disconnect_after_write_ms: float | None = None
    write_disconnect_ms: float = 0.0
    extra_second_disconnect_ms: float = 0.0
    hold_bus_read: bool = True
    hold_bus_write: bool = False


@dataclass(frozen=True)
class CacheSpec:
    """On-board cache: `segments` read segments of segment_sectors; read-ahead after a read up to
    read_ahead_sectors, stopping at read_ahead_to ("segment": when the segment is full, "track" or
    "cylinder": at the end of the one holding the request's last sector).

    read_ahead_over_requested: read-ahead may replace the data just returned (the segment's window slides);
    else it stops when the segment is full. write_segment: writes pass through one dedicated segment and
    never evict read data; else a write takes the least recently used read segment. read_hits_on_write_data:
    a read of data the last write left in its segment hits. write_water_mark: a write larger than its
    segment refills it when the dirty data fall to this fraction (of the request when water_marks_by is
    "request", of the segment when "segment"); read_bus_start_fraction (the spec's top level) is the read
    water mark on the same basis. enable_caching false: segments only match the bus to the media, nothing is
    kept for later requests (no hits, no read-ahead, no write-back). immediate_partial_hit: a read whose
    first sectors are buffered (or being read ahead) sends them at once with the hit overhead; else, unless
    the read water mark's sectors are already in, it is served like a miss (miss overhead, disconnect,
    reselection at the water mark)."""

    segments: int = 0
    segment_sectors: int = 0
    read_ahead_sectors: int = 0
    write_back: bool = False
    read_ahead_to: str = "segment"
    read_ahead_over_requested: bool = True
    write_segment: bool = True
    read_hits_on_write_data: bool = False
    write_water_mark: float = 0.0
    water_marks_by: str = "request"
    enable_caching: bool = True
    immediate_partial_hit: bool = True


@dataclass(frozen=True)
class DiskSpec:
    """One drive model. Times in ms, sizes in the drive's sectors. Build with from_dict/load_spec_file.

    rpm_error_percent: each disk of a run turns at rpm off by up to this percent, drawn once per run from the
    run's seed (DiskSim's "Percent error in rpms"). calc_sector_by_sector: DiskSim's choice between media
    transfers computed sector by sector or in groups, which its manual says has no effect on accuracy (and
    DiskSim 4.0 always computes sector by sector); accepted so its files translate, no effect here."""

    name: str
    sector_size: int
    cylinders: int
    surfaces: int
    rpm: float
    zones: tuple[Zone, ...]
    seek: SeekCurve
    head_switch_ms: float = 0.0
    write_settle_ms: float = 0.0
    overhead: Overheads = field(default_factory=Overheads)
    bus_ms_per_sector: float = 0.0
    bus_write_ms_per_sector: float | None = None
    read_bus_start_fraction: float = 0.0
    cache: CacheSpec = field(default_factory=CacheSpec)
    zero_latency: bool = False
    zero_latency_writes: bool | None = None
    bus_protocol: BusProtocol = field(default_factory=BusProtocol)
    average_seek_ms: float | None = None
    rpm_error_percent: float = 0.0
    calc_sector_by_sector: bool = True
    sources: Mapping[str, str] = field(default_factory=dict)
    assumed: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_spec(self)

    @property
    def rotation_ms(self) -> float:
        return 60_000.0 / self.rpm

    @property
    def capacity_sectors(self) -> int:
        return sum(z.mapped_sectors(self.surfaces) for z in self.zones)

    @property
    def capacity_bytes(self) -> int:
        return self.capacity_sectors * self.sector_size

    def mean_seek_ms(self) -> float:
        """The datasheet average when the spec states one, else the curve's mean over random pairs."""
        if self.average_seek_ms is not None:
            return self.average_seek_ms
        return self.seek.average_ms(self.cylinders)

    def compile(self) -> DiskArrays:
        rows = []
        lbn = 0
        for i, z in enumerate(self.zones):
            for track, sector, n in z.pieces(self.surfaces):
                rows.append((z.first_cylinder, z.cylinders, z.sectors_per_track, z.track_skew, z.cylinder_skew,
                             z.spare_tracks, lbn, n, z.first_block_offset, z.logical_per_track, track, sector, i))
                lbn += n
        zones = np.array(rows, dtype=np.int64).reshape(len(rows), Z_COLS)
        seek_us = self.seek.time_ms(np.arange(self.cylinders)) * 1000.0
        params = np.zeros(P_COUNT, dtype=np.float64)
        params[P_ROT_US] = self.rotation_ms * 1000.0
        params[P_HEAD_SWITCH_US] = self.head_switch_ms * 1000.0
        params[P_WRITE_SETTLE_US] = self.write_settle_ms * 1000.0
        params[P_OH_HIT_US] = self.overhead.read_hit_ms * 1000.0
        params[P_OH_MISS_US] = self.overhead.read_miss_ms * 1000.0
        params[P_OH_WRITE_US] = self.overhead.write_ms * 1000.0
        params[P_BUS_US] = self.bus_ms_per_sector * 1000.0
        # Without caching the segments only match bus and media: none is searched or kept (sim.disk skips both
        # with no read segments), the segment size still sets the water marks and a write's refills.
        params[P_SEGMENTS] = self.cache.segments if self.cache.enable_caching else 0
        params[P_SEG_SECTORS] = self.cache.segment_sectors
        params[P_READ_AHEAD] = self.cache.read_ahead_sectors
        params[P_WRITE_BACK] = 1.0 if self.cache.write_back else 0.0
        params[P_ZERO_LATENCY] = 1.0 if self.zero_latency else 0.0
        params[P_SURFACES] = self.surfaces
        params[P_CAPACITY] = lbn
        params[P_AVG_SEEK_US] = self.mean_seek_ms() * 1000.0
        params[P_CYLINDERS] = self.cylinders
        write_bus = self.bus_ms_per_sector if self.bus_write_ms_per_sector is None else self.bus_write_ms_per_sector
        params[P_BUS_WRITE_US] = write_bus * 1000.0
        params[P_READ_BUS_START] = self.read_bus_start_fraction
        o = self.overhead
        params[P_OH_HIT_AW_US] = _after_write(o.read_hit_after_write_ms, o.read_hit_ms) * 1000.0
        params[P_OH_MISS_AW_US] = _after_write(o.read_miss_after_write_ms, o.read_miss_ms) * 1000.0
        params[P_OH_WRITE_AW_US] = _after_write(o.write_after_write_ms, o.write_ms) * 1000.0
        params[P_CPL_READ_US] = o.read_completion_ms * 1000.0
        params[P_CPL_WRITE_US] = o.write_completion_ms * 1000.0
        params[P_ZL_WRITES] = 1.0 if (self.zero_latency if self.zero_latency_writes is None
                                      else self.zero_latency_writes) else 0.0
        c = self.cache
        params[P_RA_TO] = READ_AHEAD_TO[c.read_ahead_to]
        params[P_RA_OVER_REQ] = 1.0 if c.read_ahead_over_requested else 0.0
        params[P_WRITE_SEG] = 1.0 if c.write_segment else 0.0
        params[P_READ_HITS_ON_WRITES] = 1.0 if c.read_hits_on_write_data and c.enable_caching else 0.0
        params[P_IMMED_PARTIAL] = 1.0 if c.immediate_partial_hit else 0.0
        params[P_WRITE_MARK] = c.write_water_mark
        params[P_MARK_BY_REQ] = 1.0 if c.water_marks_by == "request" else 0.0
        b = self.bus_protocol
        params[P_RESEL_FIRST_US] = b.first_reselect_ms * 1000.0
        params[P_RESEL_OTHER_US] = b.other_reselect_ms * 1000.0
        params[P_DATA_PREP_US] = b.data_preparation_ms * 1000.0
        params[P_XD_ON] = 1.0 if b.extra_write_disconnect else 0.0
        params[P_XD_CMD_US] = b.extra_command_ms * 1000.0
        params[P_XD_DISC_US] = b.extra_disconnect_ms * 1000.0
        params[P_XD_DELAY_US] = b.inter_disconnect_delay_ms * 1000.0
        params[P_XD_SEEK_DELTA_US] = b.seek_delta_ms * 1000.0
        params[P_MIN_WRITE_SEEK_US] = b.minimum_write_seek_ms * 1000.0
        params[P_DISC_WRITE_IF_SEEK] = 1.0 if b.disconnect_write_if_seek else 0.0
        params[P_DISC_READ_US] = b.read_disconnect_ms * 1000.0
        params[P_DISC_READ_AW_US] = _after_write(b.read_disconnect_after_write_ms, b.read_disconnect_ms) * 1000.0
        params[P_DISC_WRITE_US] = b.write_disconnect_ms * 1000.0
        params[P_XD_DISC2_US] = b.extra_second_disconnect_ms * 1000.0
        params[P_HOLD_READ] = 1.0 if b.hold_bus_read else 0.0
        params[P_HOLD_WRITE] = 1.0 if b.hold_bus_write else 0.0
        return DiskArrays(zones, np.ascontiguousarray(seek_us), params)

    # ---------------------------------------------------------------------------------------------
    # Files.

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "spec") -> DiskSpec:
        """Build from the file layout documented in sim/README.md; unknown keys are errors."""
        _only(data, _TOP_KEYS, source)
        for key in ("name", "sector_size", "cylinders", "surfaces", "rpm", "zones", "seek"):
            if key not in data:
                raise SpecError(f"{source}: missing required key {key!r}")
        zones_raw = data["zones"]
        if not isinstance(zones_raw, list) or not zones_raw:
            raise SpecError(f"{source}: 'zones' must be a non-empty list, got {zones_raw!r}")
        _bounded(len(zones_raw), "zones", source)
        zones = []
        for i, z in enumerate(zones_raw):
            where = f"{source}: zones[{i}]"
            if not isinstance(z, Mapping):
                raise SpecError(f"{where} must be a table, got {z!r}")
            _only(z, _ZONE_KEYS, where)
            slips = z.get("slips", [])
            if not isinstance(slips, list):
                raise SpecError(f"{where}: slips must be a list of track numbers, got {slips!r}")
            zones.append(Zone(
                first_cylinder=_int(z, "first_cylinder", where), last_cylinder=_int(z, "last_cylinder", where),
                sectors_per_track=_bounded(_int(z, "sectors_per_track", where), "sectors_per_track", where),
                track_skew=_int(z, "track_skew", where, 0), cylinder_skew=_int(z, "cylinder_skew", where, 0),
                spare_tracks=_int(z, "spare_tracks", where, 0),
                first_block_offset=_int(z, "first_block_offset", where, 0),
                empty_front_sectors=_int(z, "empty_front_sectors", where, 0),
                slips=tuple(_int({"slip": v}, "slip", f"{where}: slips[{k}]") for k, v in enumerate(slips)),
                spare_sectors_per_track=_int(z, "spare_sectors_per_track", where, 0)))
        cylinders = _bounded(_int(data, "cylinders", source), "cylinders", source)
        seek = _seek_from(data["seek"], cylinders, f"{source}: seek")
        overhead = data.get("overhead_ms", {})
        ow = f"{source}: overhead_ms"
        _only(overhead, ("read_hit", "read_miss", "write", "read_completion", "write_completion"), ow)
        cache = data.get("cache", {})
        cw = f"{source}: cache"
        _only(cache, _CACHE_KEYS, cw)
        zl = data.get("zero_latency", False)
        if isinstance(zl, Mapping):
            _only(zl, ("reads", "writes"), f"{source}: zero_latency")
            zl_reads = _bool(zl, "reads", f"{source}: zero_latency", False)
            zl_writes: bool | None = _bool(zl, "writes", f"{source}: zero_latency", False)
        else:
            zl_reads, zl_writes = _bool(data, "zero_latency", source, False), None
        avg = data.get("average_seek_ms")
        return cls(
            name=str(data["name"]), sector_size=_bounded(_int(data, "sector_size", source), "sector_size", source),
            cylinders=cylinders, surfaces=_bounded(_int(data, "surfaces", source), "surfaces", source),
            rpm=_float(data, "rpm", source), zones=tuple(zones),
            seek=seek, head_switch_ms=_float(data, "head_switch_ms", source, 0.0),
            write_settle_ms=_float(data, "write_settle_ms", source, 0.0),
            overhead=_overheads(overhead, ow,
                                read_completion_ms=_float(overhead, "read_completion", ow, 0.0),
                                write_completion_ms=_float(overhead, "write_completion", ow, 0.0)),
            bus_ms_per_sector=_float(data, "bus_ms_per_sector", source, 0.0),
            bus_write_ms_per_sector=(None if data.get("bus_write_ms_per_sector") is None
                                     else _float(data, "bus_write_ms_per_sector", source)),
            read_bus_start_fraction=_float(data, "read_bus_start_fraction", source, 0.0),
            cache=CacheSpec(_bounded(_int(cache, "segments", cw, 0), "segments", cw),
                            _bounded(_int(cache, "segment_sectors", cw, 0), "segment_sectors", cw),
                            _int(cache, "read_ahead_sectors", cw, 0), _bool(cache, "write_back", cw, False),
                            read_ahead_to=_choice(cache, "read_ahead_to", cw, tuple(READ_AHEAD_TO), "segment"),
                            read_ahead_over_requested=_bool(cache, "read_ahead_over_requested", cw, True),
                            write_segment=_bool(cache, "write_segment", cw, True),
                            read_hits_on_write_data=_bool(cache, "read_hits_on_write_data", cw, False),
                            write_water_mark=_float(cache, "write_water_mark", cw, 0.0),
                            water_marks_by=_choice(cache, "water_marks_by", cw, ("request", "segment"), "request"),
                            enable_caching=_bool(cache, "enable_caching", cw, True),
                            immediate_partial_hit=_bool(cache, "immediate_partial_hit", cw, True)),
            zero_latency=zl_reads, zero_latency_writes=zl_writes,
            bus_protocol=_bus_protocol(data.get("bus_protocol_ms", {}), f"{source}: bus_protocol_ms"),
            average_seek_ms=None if avg is None else _float(data, "average_seek_ms", source),
            rpm_error_percent=_float(data, "rpm_error_percent", source, 0.0),
            calc_sector_by_sector=_bool(data, "calc_sector_by_sector", source, True),
            sources=_notes(data.get("sources", {}), f"{source}: sources"),
            assumed=_notes(data.get("assumed", {}), f"{source}: assumed"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "sector_size": self.sector_size, "cylinders": self.cylinders,
            "surfaces": self.surfaces, "rpm": self.rpm,
            "zones": [{"first_cylinder": z.first_cylinder, "last_cylinder": z.last_cylinder,
                       "sectors_per_track": z.sectors_per_track, "track_skew": z.track_skew,
                       "cylinder_skew": z.cylinder_skew, "spare_tracks": z.spare_tracks,
                       **({"first_block_offset": z.first_block_offset} if z.first_block_offset else {}),
                       **({"empty_front_sectors": z.empty_front_sectors} if z.empty_front_sectors else {}),
                       **({"slips": list(z.slips)} if z.slips else {}),
                       **({"spare_sectors_per_track": z.spare_sectors_per_track}
                          if z.spare_sectors_per_track else {})} for z in self.zones],
            "seek": self.seek.to_dict(), "head_switch_ms": self.head_switch_ms,
            "write_settle_ms": self.write_settle_ms,
            "overhead_ms": _overheads_dict(self.overhead),
            "bus_ms_per_sector": self.bus_ms_per_sector,
            **({"bus_write_ms_per_sector": self.bus_write_ms_per_sector}
               if self.bus_write_ms_per_sector is not None else {}),
            "read_bus_start_fraction": self.read_bus_start_fraction,
            "cache": {"segments": self.cache.segments, "segment_sectors": self.cache.segment_sectors,
                      "read_ahead_sectors": self.cache.read_ahead_sectors, "write_back": self.cache.write_back,
                      "read_ahead_to": self.cache.read_ahead_to,
                      "read_ahead_over_requested": self.cache.read_ahead_over_requested,
                      "write_segment": self.cache.write_segment,
                      "read_hits_on_write_data": self.cache.read_hits_on_write_data,
                      "write_water_mark": self.cache.write_water_mark, "water_marks_by": self.cache.water_marks_by,
                      "enable_caching": self.cache.enable_caching,
                      "immediate_partial_hit": self.cache.immediate_partial_hit},
            "zero_latency": (self.zero_latency if self.zero_latency_writes is None
                             else {"reads": self.zero_latency, "writes": self.zero_latency_writes}),
            **({"bus_protocol_ms": _bus_protocol_dict(self.bus_protocol)}
               if self.bus_protocol != BusProtocol() else {}),
            **({"average_seek_ms": self.average_seek_ms} if self.average_seek_ms is not None else {}),
            **({"rpm_error_percent": self.rpm_error_percent} if self.rpm_error_percent else {}),
            **({} if self.calc_sector_by_sector else {"calc_sector_by_sector": False}),
            "sources": dict(self.sources), "assumed": dict(self.assumed),
        }


def load_spec_file(path: str | Path) -> DiskSpec:
    """Read a spec from a .json or .toml file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise SpecError(f"{p}: cannot read spec file ({exc.strerror})") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8")) if p.suffix.lower() == ".toml" else json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p}: not valid {'TOML' if p.suffix.lower() == '.toml' else 'JSON'}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise SpecError(f"{p}: the top level must be a table/object, got {type(data).__name__}")
    return DiskSpec.from_dict(data, source=str(p))


# -------------------------------------------------------------------------------------------------
# Parsing and validation helpers.

_TOP_KEYS = ("name", "sector_size", "cylinders", "surfaces", "rpm", "zones", "seek", "head_switch_ms",
             "write_settle_ms", "overhead_ms", "bus_ms_per_sector", "bus_write_ms_per_sector",
             "read_bus_start_fraction", "cache", "zero_latency", "bus_protocol_ms", "average_seek_ms",
             "rpm_error_percent", "calc_sector_by_sector", "sources", "assumed", "description")
_ZONE_KEYS = ("first_cylinder", "last_cylinder", "sectors_per_track", "track_skew", "cylinder_skew",
              "spare_tracks", "first_block_offset", "empty_front_sectors", "slips", "spare_sectors_per_track")
_CACHE_KEYS = ("segments", "segment_sectors", "read_ahead_sectors", "write_back", "read_ahead_to",
               "read_ahead_over_requested", "write_segment", "read_hits_on_write_data", "write_water_mark",
               "water_marks_by", "enable_caching", "immediate_partial_hit")
_XD_KEYS = ("command", "disconnect", "inter_disconnect_delay", "seek_delta", "second_disconnect")


def _after_write(after_write: float | None, after_read: float) -> float:
    return after_read if after_write is None else after_write


def _by_previous(data: Mapping[str, Any], key: str, where: str) -> tuple[float, float | None]:
    """An overhead given as one number, or as {"after_read": ms, "after_write": ms}."""
    v = data.get(key, 0.0)
    if isinstance(v, Mapping):
        _only(v, ("after_read", "after_write"), f"{where}.{key}")
        return _float(v, "after_read", f"{where}.{key}"), _float(v, "after_write", f"{where}.{key}")
    return _float(data, key, where, 0.0), None


def _overheads(data: Mapping[str, Any], where: str, **completion: float) -> Overheads:
    (hit, hit_w), (miss, miss_w), (write, write_w) = (_by_previous(data, k, where)
                                                      for k in ("read_hit", "read_miss", "write"))
    return Overheads(hit, miss, write, hit_w, miss_w, write_w, **completion)


def _overheads_dict(o: Overheads) -> dict[str, Any]:
    def one(after_read: float, after_write: float | None) -> Any:
        return after_read if after_write is None else {"after_read": after_read, "after_write": after_write}
    out = {"read_hit": one(o.read_hit_ms, o.read_hit_after_write_ms),
           "read_miss": one(o.read_miss_ms, o.read_miss_after_write_ms),
           "write": one(o.write_ms, o.write_after_write_ms)}
    if o.read_completion_ms or o.write_completion_ms:
        out |= {"read_completion": o.read_completion_ms, "write_completion": o.write_completion_ms}
    return out


def _bus_protocol(data: Any, where: str) -> BusProtocol:
    _only(data, ("first_reselect", "other_reselect", "data_preparation", "extra_write_disconnect",
                 "minimum_write_seek", "disconnect_write_if_seek", "read_disconnect", "write_disconnect",
                 "hold_bus_read", "hold_bus_write"), where)
    xd = data.get("extra_write_disconnect")
    if xd is not None:
        _only(xd, _XD_KEYS, f"{where}.extra_write_disconnect")
    xw = f"{where}.extra_write_disconnect"
    read_disc, read_disc_w = _by_previous(data, "read_disconnect", where)
    return BusProtocol(
        first_reselect_ms=_float(data, "first_reselect", where, 0.0),
        other_reselect_ms=_float(data, "other_reselect", where, 0.0),
        data_preparation_ms=_float(data, "data_preparation", where, 0.0),
        extra_write_disconnect=xd is not None,
        extra_command_ms=0.0 if xd is None else _float(xd, "command", xw),
        extra_disconnect_ms=0.0 if xd is None else _float(xd, "disconnect", xw, 0.0),
        inter_disconnect_delay_ms=0.0 if xd is None else _float(xd, "inter_disconnect_delay", xw, 0.0),
        seek_delta_ms=0.0 if xd is None else _float(xd, "seek_delta", xw, 0.0),
        minimum_write_seek_ms=_float(data, "minimum_write_seek", where, 0.0),
        disconnect_write_if_seek=_bool(data, "disconnect_write_if_seek", where, True),
        read_disconnect_ms=read_disc, read_disconnect_after_write_ms=read_disc_w,
        write_disconnect_ms=_float(data, "write_disconnect", where, 0.0),
        hold_bus_read=_bool(data, "hold_bus_read", where, True),
        hold_bus_write=_bool(data, "hold_bus_write", where, False),
        extra_second_disconnect_ms=0.0 if xd is None else _float(xd, "second_disconnect", xw, 0.0))


def _bus_protocol_dict(b: BusProtocol) -> dict[str, Any]:
    out: dict[str, Any] = {"first_reselect": b.first_reselect_ms, "other_reselect": b.other_reselect_ms,
                           "data_preparation": b.data_preparation_ms,
                           "minimum_write_seek": b.minimum_write_seek_ms,
                           "disconnect_write_if_seek": b.disconnect_write_if_seek,
                           "read_disconnect": (b.read_disconnect_ms if b.read_disconnect_after_write_ms is None
                                               else {"after_read": b.read_disconnect_ms,
                                                     "after_write": b.read_disconnect_after_write_ms}),
                           "write_disconnect": b.write_disconnect_ms,
                           "hold_bus_read": b.hold_bus_read, "hold_bus_write": b.hold_bus_write}
    if b.extra_write_disconnect:
        out["extra_write_disconnect"] = {"command": b.extra_command_ms, "disconnect": b.extra_disconnect_ms,
                                         "inter_disconnect_delay": b.inter_disconnect_delay_ms,
                                         "seek_delta": b.seek_delta_ms,
                                         "second_disconnect": b.extra_second_disconnect_ms}
    return out


def _choice(data: Mapping[str, Any], key: str, where: str, allowed: tuple[str, ...], default: str) -> str:
    v = data.get(key, default)
    if v not in allowed:
        raise SpecError(f"{where}: {key} must be one of {', '.join(allowed)}, got {v!r}")
    return str(v)


def _only(data: Any, allowed: tuple[str, ...], where: str) -> None:
    if not isinstance(data, Mapping):
        raise SpecError(f"{where} must be a table/object, got {data!r}")
    extra = sorted(set(data) - set(allowed))
    if extra:
        raise SpecError(f"{where}: unknown key(s) {', '.join(map(repr, extra))}; allowed: {', '.join(allowed)}")


def _int(data: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    if key not in data:
        if default is None:
            raise SpecError(f"{where}: missing required key {key!r}")
        return default
    v = data[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or (isinstance(v, float) and not v.is_integer()):
        raise SpecError(f"{where}: {key} must be an integer, got {v!r}")
    return int(v)


def _float(data: Mapping[str, Any], key: str, where: str, default: float | None = None) -> float:
    if key not in data:
        if default is None:
            raise SpecError(f"{where}: missing required key {key!r}")
        return default
    v = data[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise SpecError(f"{where}: {key} must be a finite number, got {v!r}")
    return float(v)


def _bool(data: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    v = data.get(key, default)
    if not isinstance(v, bool):
        raise SpecError(f"{where}: {key} must be true or false, got {v!r}")
    return v


def _notes(data: Any, where: str) -> dict[str, str]:
    if not isinstance(data, Mapping) or not all(isinstance(v, str) for v in data.values()):
        raise SpecError(f"{where} must map field names to text notes, got {data!r}")
    return {str(k): v for k, v in data.items()}


def _seek_from(data: Any, cylinders: int, where: str) -> SeekCurve:
    if not isinstance(data, Mapping):
        raise SpecError(f"{where} must be a table/object, got {data!r}")
    if "fit" in data:
        _only(data, ("fit",), where)
        fit = data["fit"]
        _only(fit, ("average_ms", "single_cylinder_ms", "boundary_fraction"), f"{where}.fit")
        return SeekCurve.fitted(average_ms=_float(fit, "average_ms", f"{where}.fit"),
                                single_cylinder_ms=_float(fit, "single_cylinder_ms", f"{where}.fit"),
                                cylinders=cylinders,
                                boundary_fraction=_float(fit, "boundary_fraction", f"{where}.fit", 1.0 / 3.0))
    _only(data, ("table", "sqrt", "linear"), where)
    table: list[tuple[float, float]] = []
    for i, point in enumerate(data.get("table", [])):
        if (not isinstance(point, list | tuple) or len(point) != 2
                or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in point)):
            raise SpecError(f"{where}.table[{i}] must be [distance, ms], got {point!r}")
        table.append((float(point[0]), float(point[1])))
    sq = data.get("sqrt")
    lin = data.get("linear")
    if sq is not None:
        _only(sq, ("a_ms", "b_ms", "below"), f"{where}.sqrt")
    if lin is not None:
        _only(lin, ("c_ms", "e_ms"), f"{where}.linear")
    return SeekCurve(
        table=tuple(table),
        sqrt_a_ms=None if sq is None else _float(sq, "a_ms", f"{where}.sqrt"),
        sqrt_b_ms=None if sq is None else _float(sq, "b_ms", f"{where}.sqrt"),
        sqrt_below=math.inf if sq is None else _float(sq, "below", f"{where}.sqrt", math.inf),
        linear_c_ms=None if lin is None else _float(lin, "c_ms", f"{where}.linear"),
        linear_e_ms=None if lin is None else _float(lin, "e_ms", f"{where}.linear"),
    )


def _bounded(value: int, key: str, where: str) -> int:
    """value, or SpecError when it is above LIMITS[key] (the number sizes the model's arrays)."""
    if value > LIMITS[key]:
        raise SpecError(f"{where}: {key} must be at most {LIMITS[key]:,} (it sizes the disk model's arrays), "
                        f"got {value:,}")
    return value


def _positive(name: str, value: float, spec: str) -> None:
    if not value > 0:
        raise SpecError(f"{spec}: {name} must be > 0, got {value!r}")


def _nonneg(name: str, value: float, spec: str) -> None:
    if not value >= 0:
        raise SpecError(f"{spec}: {name} must be >= 0, got {value!r}")


def _check_spec(s: DiskSpec) -> None:
    n = f"spec {s.name!r}"
    for key, value in (("cylinders", s.cylinders), ("surfaces", s.surfaces), ("sector_size", s.sector_size),
                       ("zones", len(s.zones)), ("segments", s.cache.segments),
                       ("segment_sectors", s.cache.segment_sectors)):
        _bounded(value, key, f"{n}{' cache' if key.startswith('seg') else ''}")
    for i, z in enumerate(s.zones):
        _bounded(z.sectors_per_track, "sectors_per_track", f"{n} zone {i}")
    _positive("sector_size", s.sector_size, n)
    _positive("cylinders", s.cylinders, n)
    _positive("surfaces", s.surfaces, n)
    _positive("rpm", s.rpm, n)
    for name in ("head_switch_ms", "bus_ms_per_sector"):
        _nonneg(name, getattr(s, name), n)
    if s.bus_write_ms_per_sector is not None:
        _nonneg("bus_write_ms_per_sector", s.bus_write_ms_per_sector, n)
    if not 0.0 <= s.read_bus_start_fraction <= 1.0:
        raise SpecError(f"{n}: read_bus_start_fraction must be in [0, 1], got {s.read_bus_start_fraction!r}")
    for name in ("read_hit_ms", "read_miss_ms", "write_ms", "read_hit_after_write_ms", "read_miss_after_write_ms",
                 "write_after_write_ms", "read_completion_ms", "write_completion_ms"):
        v = getattr(s.overhead, name)
        if v is not None:
            _nonneg(f"overhead {name}", v, n)
    for name, v in vars(s.bus_protocol).items():
        if isinstance(v, float):
            _nonneg(f"bus_protocol {name}", v, n)
    expect = 0
    for i, z in enumerate(s.zones):
        where = f"{n} zone {i}"
        if z.first_cylinder != expect:
            raise SpecError(f"{where}: first_cylinder must be {expect} (zones cover the cylinders in order, "
                            f"without gaps), got {z.first_cylinder}")
        if z.last_cylinder < z.first_cylinder:
            raise SpecError(f"{where}: last_cylinder {z.last_cylinder} is below first_cylinder {z.first_cylinder}")
        _positive(f"zone {i} sectors_per_track", z.sectors_per_track, n)
        for name in ("track_skew", "cylinder_skew"):
            v = getattr(z, name)
            if not 0 <= v < z.sectors_per_track:
                raise SpecError(f"{where}: {name} must be in [0, sectors_per_track={z.sectors_per_track}), got {v}")
        if not 0 <= z.spare_tracks < z.cylinders * s.surfaces:
            raise SpecError(f"{where}: spare_tracks must be in [0, {z.cylinders * s.surfaces}), got {z.spare_tracks}")
        if not 0 <= z.spare_sectors_per_track < z.sectors_per_track:
            raise SpecError(f"{where}: spare_sectors_per_track must be in [0, {z.sectors_per_track}), "
                            f"got {z.spare_sectors_per_track}")
        if not 0 <= z.first_block_offset < z.sectors_per_track:
            raise SpecError(f"{where}: first_block_offset must be in [0, {z.sectors_per_track}), "
                            f"got {z.first_block_offset}")
        if z.empty_front_sectors < 0 or z.mapped_sectors(s.surfaces) <= 0:
            raise SpecError(f"{where}: empty_front_sectors {z.empty_front_sectors} leaves no mapped sectors")
        tracks = z.cylinders * s.surfaces
        if len(set(z.slips)) != len(z.slips) or any(not 0 <= t < tracks for t in z.slips):
            raise SpecError(f"{where}: slips must be distinct physical track numbers in [0, {tracks}), "
                            f"got {list(z.slips)}")
        if len(z.slips) > z.spare_tracks:
            raise SpecError(f"{where}: {len(z.slips)} slipped tracks need as many spare tracks, "
                            f"the zone has {z.spare_tracks}")
        expect = z.last_cylinder + 1
    if expect != s.cylinders:
        raise SpecError(f"{n}: zones end at cylinder {expect - 1}, but the disk has {s.cylinders} cylinders")
    times = s.seek.time_ms(np.arange(1, s.cylinders))
    if s.cylinders > 1 and np.isnan(times).any():
        first = int(np.flatnonzero(np.isnan(times))[0]) + 1
        raise SpecError(f"{n}: the seek curve does not cover distance {first} (add a 'linear' piece or "
                        f"extend the table to {s.cylinders - 1} cylinders)")
    if (times < 0).any():
        first = int(np.flatnonzero(times < 0)[0]) + 1
        raise SpecError(f"{n}: negative seek time {times[first - 1]:.4g} ms at distance {first}")
    c = s.cache
    for name in ("segments", "segment_sectors", "read_ahead_sectors"):
        _nonneg(f"cache {name}", getattr(c, name), n)
    if c.segments > 0 and c.segment_sectors <= 0:
        raise SpecError(f"{n}: cache segment_sectors must be > 0 with {c.segments} segments, got {c.segment_sectors}")
    if c.segments > 0 and c.read_ahead_sectors > c.segment_sectors:
        raise SpecError(f"{n}: cache read_ahead_sectors {c.read_ahead_sectors} exceeds segment_sectors "
                        f"{c.segment_sectors}")
    if s.average_seek_ms is not None:
        _positive("average_seek_ms", s.average_seek_ms, n)
    if not 0.0 <= s.rpm_error_percent < 100.0:
        raise SpecError(f"{n}: rpm_error_percent must be in [0, 100), got {s.rpm_error_percent!r}")
    if not c.enable_caching and (c.read_ahead_sectors > 0 or c.write_back):
        raise SpecError(f"{n}: cache enable_caching false leaves nothing to read ahead into or write back from "
                        f"(read_ahead_sectors {c.read_ahead_sectors}, write_back {c.write_back})")
    if not 0.0 <= c.write_water_mark <= 1.0:
        raise SpecError(f"{n}: cache write_water_mark must be in [0, 1], got {c.write_water_mark!r}")
