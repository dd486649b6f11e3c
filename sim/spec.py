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
    "CacheSpec",
    "DiskArrays",
    "DiskSpec",
    "Overheads",
    "SeekCurve",
    "SpecError",
    "Zone",
    "load_spec_file",
]

# Column indices of DiskArrays.zones (int64 [n_zones, Z_COLS]).
Z_FIRST_CYL, Z_NCYL, Z_SPT, Z_TSKEW, Z_CSKEW, Z_SPARE, Z_FIRST_LBN, Z_NLBN = range(8)
Z_COLS = 8
# Indices of DiskArrays.params (float64).
(P_ROT_US, P_HEAD_SWITCH_US, P_WRITE_SETTLE_US, P_OH_HIT_US, P_OH_MISS_US, P_OH_WRITE_US, P_BUS_US,
 P_SEGMENTS, P_SEG_SECTORS, P_READ_AHEAD, P_WRITE_BACK, P_ZERO_LATENCY, P_SURFACES, P_CAPACITY,
 P_AVG_SEEK_US, P_CYLINDERS, P_BUS_WRITE_US, P_READ_BUS_START) = range(18)
P_COUNT = 18


class SpecError(ValueError):
    """A disk spec is malformed; the message names the field and the bad value."""


class DiskArrays(NamedTuple):
    """A spec compiled for the numba model: zone table, dense seek times (us) by distance, scalars."""

    zones: np.ndarray
    seek_us: np.ndarray
    params: np.ndarray


@dataclass(frozen=True)
class Zone:
    """Cylinders first..last (inclusive) recorded with sectors_per_track; skews in sectors.

    spare_tracks are the zone's last tracks, held back for defect sparing (no logical blocks map there).
    """

    first_cylinder: int
    last_cylinder: int
    sectors_per_track: int
    track_skew: int = 0
    cylinder_skew: int = 0
    spare_tracks: int = 0

    @property
    def cylinders(self) -> int:
        return self.last_cylinder - self.first_cylinder + 1


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
    """Controller command overhead (ms) by outcome."""

    read_hit_ms: float = 0.0
    read_miss_ms: float = 0.0
    write_ms: float = 0.0


@dataclass(frozen=True)
class CacheSpec:
    """On-board cache: segments of segment_sectors; read-ahead after a read up to read_ahead_sectors."""

    segments: int = 0
    segment_sectors: int = 0
    read_ahead_sectors: int = 0
    write_back: bool = False


@dataclass(frozen=True)
class DiskSpec:
    """One drive model. Times in ms, sizes in the drive's sectors. Build with from_dict/load_spec_file."""

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
    average_seek_ms: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    assumed: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_spec(self)

    @property
    def rotation_ms(self) -> float:
        return 60_000.0 / self.rpm

    @property
    def capacity_sectors(self) -> int:
        return sum((z.cylinders * self.surfaces - z.spare_tracks) * z.sectors_per_track for z in self.zones)

    @property
    def capacity_bytes(self) -> int:
        return self.capacity_sectors * self.sector_size

    def mean_seek_ms(self) -> float:
        """The datasheet average when the spec states one, else the curve's mean over random pairs."""
        if self.average_seek_ms is not None:
            return self.average_seek_ms
        return self.seek.average_ms(self.cylinders)

    def compile(self) -> DiskArrays:
        zones = np.zeros((len(self.zones), Z_COLS), dtype=np.int64)
        lbn = 0
        for i, z in enumerate(self.zones):
            n = (z.cylinders * self.surfaces - z.spare_tracks) * z.sectors_per_track
            zones[i] = (z.first_cylinder, z.cylinders, z.sectors_per_track, z.track_skew, z.cylinder_skew,
                        z.spare_tracks, lbn, n)
            lbn += n
        seek_us = self.seek.time_ms(np.arange(self.cylinders)) * 1000.0
        params = np.zeros(P_COUNT, dtype=np.float64)
        params[P_ROT_US] = self.rotation_ms * 1000.0
        params[P_HEAD_SWITCH_US] = self.head_switch_ms * 1000.0
        params[P_WRITE_SETTLE_US] = self.write_settle_ms * 1000.0
        params[P_OH_HIT_US] = self.overhead.read_hit_ms * 1000.0
        params[P_OH_MISS_US] = self.overhead.read_miss_ms * 1000.0
        params[P_OH_WRITE_US] = self.overhead.write_ms * 1000.0
        params[P_BUS_US] = self.bus_ms_per_sector * 1000.0
        params[P_SEGMENTS] = self.cache.segments
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
        zones = []
        for i, z in enumerate(zones_raw):
            where = f"{source}: zones[{i}]"
            if not isinstance(z, Mapping):
                raise SpecError(f"{where} must be a table, got {z!r}")
            _only(z, _ZONE_KEYS, where)
            zones.append(Zone(
                first_cylinder=_int(z, "first_cylinder", where), last_cylinder=_int(z, "last_cylinder", where),
                sectors_per_track=_int(z, "sectors_per_track", where),
                track_skew=_int(z, "track_skew", where, 0), cylinder_skew=_int(z, "cylinder_skew", where, 0),
                spare_tracks=_int(z, "spare_tracks", where, 0)))
        cylinders = _int(data, "cylinders", source)
        seek = _seek_from(data["seek"], cylinders, f"{source}: seek")
        overhead = data.get("overhead_ms", {})
        _only(overhead, ("read_hit", "read_miss", "write"), f"{source}: overhead_ms")
        cache = data.get("cache", {})
        _only(cache, ("segments", "segment_sectors", "read_ahead_sectors", "write_back"), f"{source}: cache")
        avg = data.get("average_seek_ms")
        return cls(
            name=str(data["name"]), sector_size=_int(data, "sector_size", source), cylinders=cylinders,
            surfaces=_int(data, "surfaces", source), rpm=_float(data, "rpm", source), zones=tuple(zones),
            seek=seek, head_switch_ms=_float(data, "head_switch_ms", source, 0.0),
            write_settle_ms=_float(data, "write_settle_ms", source, 0.0),
            overhead=Overheads(_float(overhead, "read_hit", f"{source}: overhead_ms", 0.0),
                               _float(overhead, "read_miss", f"{source}: overhead_ms", 0.0),
                               _float(overhead, "write", f"{source}: overhead_ms", 0.0)),
            bus_ms_per_sector=_float(data, "bus_ms_per_sector", source, 0.0),
            bus_write_ms_per_sector=(None if data.get("bus_write_ms_per_sector") is None
                                     else _float(data, "bus_write_ms_per_sector", source)),
            read_bus_start_fraction=_float(data, "read_bus_start_fraction", source, 0.0),
            cache=CacheSpec(_int(cache, "segments", f"{source}: cache", 0),
                            _int(cache, "segment_sectors", f"{source}: cache", 0),
                            _int(cache, "read_ahead_sectors", f"{source}: cache", 0),
                            _bool(cache, "write_back", f"{source}: cache", False)),
            zero_latency=_bool(data, "zero_latency", source, False),
            average_seek_ms=None if avg is None else _float(data, "average_seek_ms", source),
            sources=_notes(data.get("sources", {}), f"{source}: sources"),
            assumed=_notes(data.get("assumed", {}), f"{source}: assumed"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "sector_size": self.sector_size, "cylinders": self.cylinders,
            "surfaces": self.surfaces, "rpm": self.rpm,
            "zones": [{"first_cylinder": z.first_cylinder, "last_cylinder": z.last_cylinder,
                       "sectors_per_track": z.sectors_per_track, "track_skew": z.track_skew,
                       "cylinder_skew": z.cylinder_skew, "spare_tracks": z.spare_tracks} for z in self.zones],
            "seek": self.seek.to_dict(), "head_switch_ms": self.head_switch_ms,
            "write_settle_ms": self.write_settle_ms,
            "overhead_ms": {"read_hit": self.overhead.read_hit_ms, "read_miss": self.overhead.read_miss_ms,
                            "write": self.overhead.write_ms},
            "bus_ms_per_sector": self.bus_ms_per_sector,
            **({"bus_write_ms_per_sector": self.bus_write_ms_per_sector}
               if self.bus_write_ms_per_sector is not None else {}),
            "read_bus_start_fraction": self.read_bus_start_fraction,
            "cache": {"segments": self.cache.segments, "segment_sectors": self.cache.segment_sectors,
                      "read_ahead_sectors": self.cache.read_ahead_sectors, "write_back": self.cache.write_back},
            "zero_latency": self.zero_latency,
            **({"average_seek_ms": self.average_seek_ms} if self.average_seek_ms is not None else {}),
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
             "read_bus_start_fraction", "cache", "zero_latency", "average_seek_ms",
             "sources", "assumed", "description")
_ZONE_KEYS = ("first_cylinder", "last_cylinder", "sectors_per_track", "track_skew", "cylinder_skew",
              "spare_tracks")


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


def _positive(name: str, value: float, spec: str) -> None:
    if not value > 0:
        raise SpecError(f"{spec}: {name} must be > 0, got {value!r}")


def _nonneg(name: str, value: float, spec: str) -> None:
    if not value >= 0:
        raise SpecError(f"{spec}: {name} must be >= 0, got {value!r}")


def _check_spec(s: DiskSpec) -> None:
    n = f"spec {s.name!r}"
    _positive("sector_size", s.sector_size, n)
    _positive("cylinders", s.cylinders, n)
    _positive("surfaces", s.surfaces, n)
    _positive("rpm", s.rpm, n)
    for name in ("head_switch_ms", "write_settle_ms", "bus_ms_per_sector"):
        _nonneg(name, getattr(s, name), n)
    if s.bus_write_ms_per_sector is not None:
        _nonneg("bus_write_ms_per_sector", s.bus_write_ms_per_sector, n)
    if not 0.0 <= s.read_bus_start_fraction <= 1.0:
        raise SpecError(f"{n}: read_bus_start_fraction must be in [0, 1], got {s.read_bus_start_fraction!r}")
    for name in ("read_hit_ms", "read_miss_ms", "write_ms"):
        _nonneg(f"overhead {name}", getattr(s.overhead, name), n)
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
