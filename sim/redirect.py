"""ALIS's traffic redirector (sections 3, 5.3 and 6.3) in the simulator: the lookaside directory of each
reorganization (home extent -> copy in the reorganized area), copy validity kept under writes, and every
request rewritten into the physical pieces it touches, so that the unchanged compiled loop replays them
(the pieces of one request stay one request: fork-join, one response time, at most one read miss).

    vol = Volume.with_area(disk=0, size_sectors=1_000_000)           # RA: 15 % of it, 30 % into it
    out = redirect(requests, [vol], [Reorganization(86_400e6, directory)])
    sim = out.simulation(spec, SimConfig(), np.random.default_rng(1))

A volume is one disk's home data laid out from `disk_start`, with the reorganized area (RA) inserted
`ra_start` sectors into it: home sectors [0, ra_start) keep their place, the RA takes the next ra_sectors
and the rest of the home data follows it. Traced devices map onto volumes one to one (as traced) or end to
end into one volume (`device_volume`, `device_offset`).

Rules where the paper is open (each tested in tests/sim/test_redirect.py):
- read: one valid copy holding all its sectors serves it, run copies before heat copies (the paper's
  order), the lowest RA address first among equals; else home, when home is up to date for all of them;
  else sector by sector the first valid run copy, heat copy, then home (fewest pieces first: a split
  request costs one disk access per piece);
- write (RunHeat, section 6.3): each sector goes to a run copy holding it, else a heat copy, else home
  (copies holding the whole write first, then the lowest RA address); every other copy of the sector,
  home included, becomes stale until the next reorganization;
- reorganization is instantaneous at its time (the paper's simplification): RA sectors updated since the
  last one are copied home, the new directory's copies start valid; both copies are counted
  (copy_back_sectors, copy_in_sectors), not simulated, and the disk cache is not remapped to the copies.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from numba import njit

from blockheat.sim.array import DiskArray, ExtentTable
from blockheat.sim.engine import Simulation
from blockheat.sim.records import Requests

if TYPE_CHECKING:
    from blockheat.sim.engine import SimConfig, Simulation
    from blockheat.sim.spec import DiskSpec

__all__ = ["REGIONS", "SOURCES", "Directory", "RedirectStream", "Redirected", "RedirectedChunk", "Reorganization",
           "Volume", "device_mapping", "redirect"]

#: Directory.region codes.
REGION_RUN, REGION_HEAT = 0, 1
REGIONS = ("run", "heat")
#: Redirected.source codes: where a request's data came from (reads) or went (writes).
SRC_HOME, SRC_RUN, SRC_HEAT, SRC_MIXED = 0, 1, 2, 3
SOURCES = ("home", "run", "heat", "mixed")


@dataclass(frozen=True)
class Volume:
    """One volume: size_sectors of home data on `disk` from disk_start, the RA inserted ra_start sectors in."""

    disk: int
    size_sectors: int
    ra_start: int
    ra_sectors: int
    disk_start: int = 0

    def __post_init__(self) -> None:
        if self.disk < 0 or self.disk_start < 0:
            raise ValueError(f"volume disk and disk_start must be >= 0, got {self.disk}, {self.disk_start}")
        if self.size_sectors <= 0 or self.ra_sectors < 0:
            raise ValueError(f"volume size_sectors must be > 0 and ra_sectors >= 0, got {self.size_sectors}, "
                             f"{self.ra_sectors}")
        if not 0 <= self.ra_start <= self.size_sectors:
            raise ValueError(f"volume ra_start must be in [0, {self.size_sectors}], got {self.ra_start}")

    @classmethod
    def with_area(cls, disk: int, size_sectors: int, *, ra_share: float = 0.15, ra_offset: float = 0.30,
                  disk_start: int = 0) -> Volume:
        """The paper's sizing: an RA of ra_share of the storage used, ra_offset of the way into it (sectors
        rounded down, as libs.alis.layout.reorganized_area rounds bytes)."""
        if not 0.0 <= ra_share <= 1.0:
            raise ValueError(f"ra_share must be in [0, 1], got {ra_share}")
        if not 0.0 <= ra_offset <= 1.0:
            raise ValueError(f"ra_offset must be in [0, 1], got {ra_offset}")
        return cls(disk, size_sectors, math.floor(size_sectors * ra_offset), math.floor(size_sectors * ra_share),
                   disk_start)

    @property
    def physical_sectors(self) -> int:
        """Sectors the volume occupies on its disk, RA included."""
        return self.size_sectors + self.ra_sectors

    def home_address(self, sector: int) -> int:
        """Physical sector of home sector `sector` on the volume's disk."""
        return self.disk_start + sector + (self.ra_sectors if sector >= self.ra_start else 0)

    def ra_address(self, ra_sector: int) -> int:
        """Physical sector of RA offset `ra_sector` on the volume's disk."""
        return self.disk_start + self.ra_start + ra_sector


def _int_array(values: object, name: str) -> np.ndarray:
    arr = np.ascontiguousarray(values, dtype=np.int64)
    if arr.ndim != 1:
        raise ValueError(f"Directory.{name} must be one-dimensional")
    return arr


@dataclass(frozen=True, eq=False)
class Directory:
    """The lookaside directory of one reorganization: one entry per copy in the reorganized area.

    volume: index into the run's volumes; region: REGION_RUN (0) or REGION_HEAT (1); run_id: the run of a
    run copy (-1 for heat copies); unit_id: the reorganization unit copied; home_sector, sectors: the
    unit's home extent in volume sectors; ra_sector: where the copy starts, from the start of the volume's
    RA. Copies of one volume never overlap in the RA; home extents may (a unit in a run and in the heat
    region, or overlapping request extents).
    """

    volume: np.ndarray
    region: np.ndarray
    run_id: np.ndarray
    unit_id: np.ndarray
    home_sector: np.ndarray
    sectors: np.ndarray
    ra_sector: np.ndarray

    def __post_init__(self) -> None:
        n = None
        for name in ("volume", "region", "run_id", "unit_id", "home_sector", "sectors", "ra_sector"):
            arr = _int_array(getattr(self, name), name)
            object.__setattr__(self, name, arr)
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise ValueError(f"Directory.{name} has {len(arr)} entries, volume has {n}")
        if n and (self.sectors.min() <= 0 or self.home_sector.min() < 0 or self.ra_sector.min() < 0
                  or self.volume.min() < 0):
            raise ValueError("Directory: sectors must be > 0; home_sector, ra_sector and volume >= 0")
        bad = np.flatnonzero((self.region != REGION_RUN) & (self.region != REGION_HEAT))
        if bad.size:
            raise ValueError(f"Directory.region must be {REGION_RUN} (run) or {REGION_HEAT} (heat), entry "
                             f"{int(bad[0])} is {int(self.region[bad[0]])}")
        order = np.lexsort((self.ra_sector, self.volume))
        v, start, end = self.volume[order], self.ra_sector[order], (self.ra_sector + self.sectors)[order]
        clash = np.flatnonzero((v[1:] == v[:-1]) & (start[1:] < end[:-1]))
        if clash.size:
            i, j = int(order[clash[0]]), int(order[clash[0] + 1])
            raise ValueError(f"Directory: copies {i} and {j} overlap in the reorganized area of volume "
                             f"{int(v[clash[0]])}")

    def __len__(self) -> int:
        return len(self.volume)

    @classmethod
    def empty(cls) -> Directory:
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z, z, z, z)

    @classmethod
    def concat(cls, parts: Sequence[Directory]) -> Directory:
        if not parts:
            return cls.empty()
        return cls(*[np.concatenate([getattr(p, f) for p in parts]) for f in _DIR_FIELDS])

    def ra_end(self, volume: int) -> int:
        """The end of the RA sectors used in `volume`."""
        mine = self.volume == volume
        return int((self.ra_sector[mine] + self.sectors[mine]).max()) if mine.any() else 0

    def holding(self, volume: int, sector: int) -> np.ndarray:
        """Indices of the copies holding home sector `sector` of `volume` (run copies first, then heat, by
        RA address): the redirector's order of preference."""
        hit = np.flatnonzero((self.volume == volume) & (self.home_sector <= sector)
                             & (sector < self.home_sector + self.sectors))
        return hit[np.lexsort((self.ra_sector[hit], self.region[hit]))]

    def to_arrow(self, volumes: Sequence[Volume], *, sector_size: int,
                 volume_names: Sequence[str] | None = None) -> pa.Table:
        """In bytes, with the columns of the alis_layout table (without trace_id and interval_id):
        device (the volume's name), region, run_id (null for heat copies), unit_id, home_offset_bytes,
        size_bytes, ra_offset_bytes and ra_address_bytes (the copy's place in the volume's physical
        layout: RA start + RA offset)."""
        names = list(volume_names) if volume_names is not None else [str(k) for k in range(len(volumes))]
        ra_start = np.array([v.ra_start for v in volumes], np.int64)
        ss = int(sector_size)
        return pa.table({
            "device": pa.array([names[v] for v in self.volume.tolist()], pa.string()),
            "region": pa.array([REGIONS[r] for r in self.region.tolist()], pa.string()),
            "run_id": pa.array(self.run_id, pa.int64(), mask=self.run_id < 0),
            "unit_id": pa.array(self.unit_id, pa.int64()),
            "home_offset_bytes": pa.array(self.home_sector * ss, pa.int64()),
            "size_bytes": pa.array(self.sectors * ss, pa.int64()),
            "ra_offset_bytes": pa.array(self.ra_sector * ss, pa.int64()),
            "ra_address_bytes": pa.array((ra_start[self.volume] + self.ra_sector) * ss, pa.int64()),
        })


_DIR_FIELDS = ("volume", "region", "run_id", "unit_id", "home_sector", "sectors", "ra_sector")


@dataclass(frozen=True, eq=False)
class Reorganization:
    """At time_us the reorganized areas are rebuilt to hold `directory`'s copies (until the next one);
    interval_id: the reorganization interval it serves."""

    time_us: float
    directory: Directory
    interval_id: int = -1


@dataclass(frozen=True, eq=False)
class Redirected:
    """A workload rewritten for the simulator.

    requests: requests on home data keep their volume address (device = volume); the others are moved to
    their own range of one extra virtual device (index len(volumes)) whose extents map each to its pieces.
    layout: the extent map (volumes' home data around their RAs, then the redirected requests' pieces).
    source: SRC_* per request (where a read's data came from, where a write went). pieces: per request, the
    physical accesses it was cut into (0: not redirected, home data at its own address). copy_in_sectors:
    per reorganization, the sectors its directory holds (all copied, copies kept from the last one too);
    copy_back_sectors: the sectors updated in the RAs while it held, copied home by the next one.
    """

    requests: Requests
    layout: ExtentTable
    device_sectors: tuple[int, ...]
    n_disks: int
    source: np.ndarray
    pieces: np.ndarray
    copy_in_sectors: np.ndarray
    copy_back_sectors: np.ndarray

    def served(self, mask: np.ndarray | None = None) -> dict[str, int]:
        """Reads per source (home, run, heat, mixed), over the requests in `mask` (default all)."""
        keep = self.requests.is_read if mask is None else self.requests.is_read & mask
        counts = np.bincount(self.source[keep], minlength=len(SOURCES))
        return {name: int(counts[k]) for k, name in enumerate(SOURCES)}

    def simulation(self, spec: DiskSpec, config: SimConfig, rng: np.random.Generator, *,
                   n_disks: int | None = None, scheduler: str = "fcfs") -> Simulation:
        """A Simulation of the redirected workload on n_disks (default: the volumes' disks) of `spec`."""

        disks = self.n_disks if n_disks is None else n_disks
        return Simulation(spec, DiskArray(disks, self.layout, scheduler), self.requests, config, rng,
                          device_sectors=self.device_sectors)


# --- compiled core ------------------------------------------------------------------------------


@njit(cache=True)
def _emit(p_disk: np.ndarray, p_start: np.ndarray, p_len: np.ndarray, m: int, m0: int, disk: int, start: int,
          n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover
    """Append a piece of the request whose pieces start at m0, growing the arrays when full; a piece
    continuing the request's last one on its disk joins it."""
    if m > m0 and p_disk[m - 1] == disk and p_start[m - 1] + p_len[m - 1] == start:
        p_len[m - 1] += n
        return p_disk, p_start, p_len, m
    if m == p_disk.shape[0]:
        size = 2 * m + 16
        d2 = np.empty(size, np.int64)
        s2 = np.empty(size, np.int64)
        n2 = np.empty(size, np.int64)
        d2[:m] = p_disk[:m]
        s2[:m] = p_start[:m]
        n2[:m] = p_len[:m]
        p_disk, p_start, p_len = d2, s2, n2
    p_disk[m] = disk
    p_start[m] = start
    p_len[m] = n
    return p_disk, p_start, p_len, m + 1


@njit(cache=True)
def _epoch(k: int, c_ptr: np.ndarray, c_vol: np.ndarray, c_home: np.ndarray, c_len: np.ndarray,
           big: np.int64) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """Epoch k's copies: each one's first sector in the validity arrays (and their end), its (volume, home) key."""
    lo_c = c_ptr[k]
    m_c = c_ptr[k + 1] - lo_c
    st = np.zeros(m_c + 1, np.int64)
    keys = np.empty(m_c, np.int64)
    for c in range(m_c):
        st[c + 1] = st[c] + c_len[lo_c + c]
        keys[c] = c_vol[lo_c + c] * big + c_home[lo_c + c]
    return st, keys


@njit(cache=True)
def _redirect(vol: np.ndarray, vlbn: np.ndarray, nsec: np.ndarray, is_read: np.ndarray, epoch_first: np.ndarray,
              c_ptr: np.ndarray, c_vol: np.ndarray, c_home: np.ndarray, c_len: np.ndarray, c_ra: np.ndarray,
              c_region: np.ndarray, c_maxlen: np.ndarray, v_disk: np.ndarray, v_start: np.ndarray,
              v_ra_start: np.ndarray, v_ra_len: np.ndarray, k0: int, valid0: np.ndarray, owner0: np.ndarray,
              updated: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray,
                         np.ndarray]:  # pragma: no cover
    """Pieces of every request. Epoch k (copies c_ptr[k]..c_ptr[k+1], sorted by (volume, home sector, RA
    sector)) holds from request epoch_first[k] on. Starts in epoch k0 (-1: before the first) with its copies'
    validity (valid0, owner0: per copy sector, up to date, and updated since the epoch began); sets updated[k]
    for each epoch it leaves. Returns per request the source code and piece count (0: on home data, not
    redirected), the pieces (disk, physical start, sectors) of the redirected ones in request order, and the
    epoch it ends in with its validity."""
    n = vol.shape[0]
    n_epoch = epoch_first.shape[0]
    source = np.zeros(n, np.int8)
    count = np.zeros(n, np.int64)
    p_disk = np.empty(n // 4 + 16, np.int64)
    p_start = np.empty(n // 4 + 16, np.int64)
    p_len = np.empty(n // 4 + 16, np.int64)
    m = 0
    big = np.int64(1) << np.int64(40)
    k = k0
    lo_c = 0
    hi_c = 0
    valid = valid0
    owner = owner0
    st = np.zeros(0, np.int64)
    keys = np.zeros(0, np.int64)
    if k >= 0:
        lo_c = c_ptr[k]
        hi_c = c_ptr[k + 1]
        st, keys = _epoch(k, c_ptr, c_vol, c_home, c_len, big)
    for i in range(n):
        while k + 1 < n_epoch and epoch_first[k + 1] <= i:
            if k >= 0:
                updated[k] = int(owner.sum())
            k += 1
            lo_c = c_ptr[k]
            hi_c = c_ptr[k + 1]
            st, keys = _epoch(k, c_ptr, c_vol, c_home, c_len, big)
            valid = np.ones(st[hi_c - lo_c], np.uint8)
            owner = np.zeros(st[hi_c - lo_c], np.uint8)
        v = vol[i]
        a = vlbn[i]
        b = a + nsec[i]
        disk = v_disk[v]
        base = v_start[v]
        ra0 = v_ra_start[v]
        ra_n = v_ra_len[v]
        # Candidate copies: home extent overlapping [a, b).
        ncand = 0
        cand = np.empty(0, np.int64)
        if k >= 0 and hi_c > lo_c:
            first = np.searchsorted(keys, v * big + a - c_maxlen[k] + 1)
            last = np.searchsorted(keys, v * big + b)
            cand = np.empty(max(0, last - first), np.int64)
            for j in range(first, last):
                c = lo_c + j
                if c_vol[c] == v and c_home[c] + c_len[c] > a:
                    cand[ncand] = c
                    ncand += 1
        if ncand == 0:
            continue                         # no copy of this data: home, as unreorganized
        # Order of preference: run before heat, copies holding the whole request first, lowest RA address.
        pref = np.empty(ncand, np.int64)
        for j in range(ncand):
            c = cand[j]
            whole = 0 if (c_home[c] <= a and b <= c_home[c] + c_len[c]) else 1
            pref[j] = (c_region[c] * 2 + whole) * big + c_ra[c]
        order = np.argsort(pref, kind="mergesort")
        rd = is_read[i]
        chosen = -1
        if rd:
            for j in range(ncand):
                c = cand[order[j]]
                if c_home[c] <= a and b <= c_home[c] + c_len[c]:
                    s0 = st[c - lo_c] + (a - c_home[c])
                    ok = True
                    for s in range(s0, s0 + (b - a)):
                        if valid[s] == 0:
                            ok = False
                            break
                    if ok:
                        chosen = c
                        break
            if chosen >= 0:
                source[i] = SRC_RUN if c_region[chosen] == REGION_RUN else SRC_HEAT
                count[i] = 1
                p_disk, p_start, p_len, m = _emit(p_disk, p_start, p_len, m, m, disk,
                                                  base + ra0 + c_ra[chosen] + (a - c_home[chosen]), b - a)
                continue
            home_ok = True
            for j in range(ncand):
                c = cand[j]
                lo = max(a, c_home[c])
                hi = min(b, c_home[c] + c_len[c])
                s0 = st[c - lo_c] + (lo - c_home[c])
                for s in range(s0, s0 + (hi - lo)):
                    if owner[s] != 0:
                        home_ok = False
                        break
                if not home_ok:
                    break
            if home_ok:
                continue                     # served from home like an unreorganized request
        # Sector by sector (reads whose up-to-date data is scattered, and every write).
        m0 = m
        used = 0                             # bit 1: home, 2: run, 4: heat
        for x in range(a, b):
            pick = -1
            for j in range(ncand):
                c = cand[order[j]]
                if c_home[c] <= x < c_home[c] + c_len[c] and (
                        not rd or valid[st[c - lo_c] + (x - c_home[c])] != 0):
                    pick = c
                    break
            if not rd:
                for j in range(ncand):
                    c = cand[j]
                    if c_home[c] <= x < c_home[c] + c_len[c]:
                        s = st[c - lo_c] + (x - c_home[c])
                        valid[s] = 1 if c == pick else 0
                        owner[s] = 1 if c == pick else 0
            if pick < 0:
                used |= 1
                phys = base + x + (ra_n if x >= ra0 else 0)
            else:
                used |= 2 if c_region[pick] == REGION_RUN else 4
                phys = base + ra0 + c_ra[pick] + (x - c_home[pick])
            p_disk, p_start, p_len, m = _emit(p_disk, p_start, p_len, m, m0, disk, phys, 1)
        if used == 1:
            m = m0                           # all home: the request keeps its own address
            source[i] = SRC_HOME
        else:
            source[i] = SRC_RUN if used == 2 else (SRC_HEAT if used == 4 else SRC_MIXED)
            count[i] = m - m0
    return source, count, p_disk[:m], p_start[:m], p_len[:m], k, valid, owner


# --- Python face ---------------------------------------------------------------------------------


def device_mapping(requests: Requests, device_volume: Sequence[int] | np.ndarray | None,
                   device_offset: Sequence[int] | np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(volume of each traced device, its first sector there) as int64 arrays: by default device d is
    volume d from sector 0; a clear error unless there is one entry per traced device."""
    n_dev = int(requests.device.max()) + 1 if len(requests) else 0
    dv = np.arange(n_dev, dtype=np.int64) if device_volume is None else np.asarray(device_volume, np.int64)
    do = np.zeros(len(dv), np.int64) if device_offset is None else np.asarray(device_offset, np.int64)
    if len(dv) < n_dev or len(do) != len(dv):
        raise ValueError(f"device_volume and device_offset need one entry per traced device ({n_dev}), got "
                         f"{len(dv)} and {len(do)}")
    return dv, do


def _check_volumes(volumes: Sequence[Volume], capacity: int | None) -> None:
    if not volumes:
        raise ValueError("redirect needs at least one volume")
    by_disk: dict[int, list[tuple[int, int, int]]] = {}
    for k, v in enumerate(volumes):
        by_disk.setdefault(v.disk, []).append((v.disk_start, v.disk_start + v.physical_sectors, k))
        if capacity is not None and v.disk_start + v.physical_sectors > capacity:
            raise ValueError(f"volume {k}: {v.size_sectors} home sectors plus an RA of {v.ra_sectors} from sector "
                             f"{v.disk_start} need {v.disk_start + v.physical_sectors} sectors, beyond the disk "
                             f"capacity {capacity}")
    for disk, spans in by_disk.items():
        spans.sort()
        for (_, end, k), (start, _, k2) in itertools.pairwise(spans):
            if start < end:
                raise ValueError(f"volumes {k} and {k2} overlap on disk {disk}")


def _check_directory(d: Directory, volumes: Sequence[Volume], where: str) -> None:
    if len(d) == 0:
        return
    if int(d.volume.max()) >= len(volumes):
        raise ValueError(f"{where}: a copy names volume {int(d.volume.max())}; there are {len(volumes)}")
    for k, v in enumerate(volumes):
        mine = d.volume == k
        if not mine.any():
            continue
        end = int((d.ra_sector[mine] + d.sectors[mine]).max())
        if end > v.ra_sectors:
            raise ValueError(f"{where}: copies of volume {k} need {end} RA sectors, the area has {v.ra_sectors}")
        home_end = int((d.home_sector[mine] + d.sectors[mine]).max())
        if home_end > v.size_sectors:
            raise ValueError(f"{where}: a copy of volume {k} ends at home sector {home_end}, beyond its "
                             f"{v.size_sectors} sectors")


def redirect(requests: Requests, volumes: Sequence[Volume], schedule: Sequence[Reorganization], *,
             device_volume: Sequence[int] | None = None, device_offset: Sequence[int] | None = None,
             capacity_sectors: int | None = None) -> Redirected:
    """Rewrite `requests` for the reorganizations in `schedule` (no copies before the first one).

    Traced device d is volume device_volume[d] (default d) from sector device_offset[d] (default 0) on.
    capacity_sectors: the disks' size, checked against the volumes. Requests must stay inside their
    volume.

        out = redirect(reqs, [Volume.with_area(0, 2_000_000)], plans)
        out.served()       # {'home': ..., 'run': ..., 'heat': ..., 'mixed': ...}
    """
    dv, do = device_mapping(requests, device_volume, device_offset)
    stream = RedirectStream(volumes, schedule, device_volume=dv, device_offset=do, capacity_sectors=capacity_sectors)
    part = stream.chunk(requests)
    sizes = (*[v.size_sectors for v in volumes], *([part.virtual_sectors] if part.virtual_sectors else []))
    return Redirected(part.requests, part.layout, tuple(int(s) for s in sizes), stream.n_disks, part.source,
                      part.pieces, stream.copy_in_sectors, stream.copy_back_sectors)


@dataclass(frozen=True, eq=False)
class RedirectedChunk:
    """One chunk of requests rewritten (RedirectStream.chunk): requests on home data keep their volume address, the
    others are on the virtual device (index len(volumes)), each its own range from sector 0 of the chunk's; layout: the
    volumes' home data around their RAs, then the chunk's pieces (padded to the stream's virtual_sectors when set);
    source and pieces per request as Redirected's; virtual_sectors: the virtual sectors the chunk's requests use."""

    requests: Requests
    layout: ExtentTable
    source: np.ndarray
    pieces: np.ndarray
    virtual_sectors: int


class RedirectStream:
    """redirect() a chunk of requests at a time, in arrival order (a streamed ALIS replay): the epoch and the copies'
    validity carry from one chunk to the next, so the chunks' pieces are the whole run's. Each chunk's virtual
    device starts again at sector 0: a replay that has issued a chunk's requests before the next chunk's (sim.engine's
    chunk_layout) needs only the chunk's own pieces mapped. virtual_sectors: when given, every chunk's layout covers
    that many virtual sectors (the run's fixed device size; a chunk needing more is an error).

        stream = RedirectStream(volumes, schedule, device_volume=dv, device_offset=do)
        part = stream.chunk(requests)        # part.requests, part.layout
    """

    def __init__(self, volumes: Sequence[Volume], schedule: Sequence[Reorganization], *,
                 device_volume: Sequence[int] | np.ndarray, device_offset: Sequence[int] | np.ndarray,
                 capacity_sectors: int | None = None, virtual_sectors: int | None = None) -> None:
        _check_volumes(volumes, capacity_sectors)
        self.volumes = list(volumes)
        self.dv = np.asarray(device_volume, np.int64)
        self.do = np.asarray(device_offset, np.int64)
        if len(self.dv) and (self.dv.min() < 0 or self.dv.max() >= len(volumes)):
            raise ValueError(f"device_volume names volumes outside 0..{len(volumes) - 1}: {self.dv.tolist()}")
        times = [r.time_us for r in schedule]
        if any(t1 < t0 for t0, t1 in itertools.pairwise(times)):
            raise ValueError(f"reorganization times must not decrease, got {times}")
        for j, r in enumerate(schedule):
            _check_directory(r.directory, volumes, f"reorganization {j} at {r.time_us} us")
        self.times = np.array(times, np.float64)
        cols: dict[str, list[np.ndarray]] = {f: [] for f in ("vol", "home", "len", "ra", "region")}
        c_ptr = [0]
        maxlen = []
        for r in schedule:
            d = r.directory
            order = np.lexsort((d.ra_sector, d.home_sector, d.volume))
            for name, arr in (("vol", d.volume), ("home", d.home_sector), ("len", d.sectors), ("ra", d.ra_sector),
                              ("region", d.region)):
                cols[name].append(arr[order])
            c_ptr.append(c_ptr[-1] + len(d))
            maxlen.append(int(d.sectors.max()) if len(d) else 1)
        self._copies = (np.array(c_ptr, np.int64),
                        *[np.concatenate(cols[f]).astype(np.int64) if cols[f] else np.zeros(0, np.int64)
                          for f in ("vol", "home", "len", "ra", "region")],
                        np.array(maxlen, np.int64))
        self._volumes = tuple(np.array([getattr(v, f) for v in volumes], np.int64)
                              for f in ("disk", "disk_start", "ra_start", "ra_sectors"))
        self.sizes = np.array([v.size_sectors for v in volumes], np.int64)
        self.copy_in_sectors = np.array([int(r.directory.sectors.sum()) for r in schedule], np.int64)
        self.n_disks = max(v.disk for v in volumes) + 1
        self.virtual_sectors = virtual_sectors
        self._home = _home_extents(volumes)
        self._k = -1
        self._valid = np.zeros(0, np.uint8)
        self._owner = np.zeros(0, np.uint8)
        self._updated = np.zeros(len(schedule), np.int64)
        self._first = 0                            # the run index of the next chunk's first request

    @property
    def copy_back_sectors(self) -> np.ndarray:
        """Per reorganization, the sectors updated in the RAs while it held (so far)."""
        out = self._updated.copy()
        if self._k >= 0:
            out[self._k] = int(self._owner.sum())
        return out

    def chunk(self, requests: Requests) -> RedirectedChunk:
        """The next chunk rewritten (requests continue the last chunk's in arrival order)."""
        if len(requests) and int(requests.device.max()) >= len(self.dv):
            raise ValueError(f"device_volume and device_offset need one entry per traced device "
                             f"({int(requests.device.max()) + 1}), got {len(self.dv)}")
        vol = self.dv[requests.device]
        vlbn = self.do[requests.device] + requests.lbn
        nsec = requests.sectors.astype(np.int64)
        if len(requests):
            over = np.flatnonzero(vlbn + nsec > self.sizes[vol])
            if over.size:
                i = int(over[0])
                raise ValueError(f"request {self._first + i} ends at sector {int(vlbn[i] + nsec[i])} of volume "
                                 f"{int(vol[i])}, beyond its {int(self.sizes[vol[i]])} sectors")
        epoch_first = np.searchsorted(requests.arrival_us, self.times, side="left").astype(np.int64)
        source, count, p_disk, p_start, p_len, self._k, self._valid, self._owner = _redirect(
            vol, vlbn, nsec, requests.is_read, epoch_first, *self._copies, *self._volumes, self._k, self._valid,
            self._owner, self._updated)
        moved = count > 0
        start = np.zeros(len(nsec), np.int64)
        start[moved] = np.cumsum(nsec[moved]) - nsec[moved]          # each redirected request its own range
        out = Requests(requests.arrival_us, np.where(moved, len(self.volumes), vol).astype(np.int32),
                       np.where(moved, start, vlbn).astype(np.int64), requests.sectors, requests.flags,
                       requests.think_us)
        used = int(nsec[moved].sum())
        extents = [self._home, (p_len, p_disk, p_start)]          # (sectors, disk, physical start) blocks, in order
        if self.virtual_sectors is not None:
            if used > self.virtual_sectors:
                raise ValueError(f"requests {self._first}..{self._first + len(requests) - 1} redirect {used} sectors, "
                                 f"beyond the stream's {self.virtual_sectors} virtual sectors")
            extents.append(_padding(self.virtual_sectors - used, int(self._volumes[0][0]), int(self.sizes.max())))
        self._first += len(requests)
        layout = ExtentTable.tiling(*(np.concatenate(cols) for cols in zip(*extents, strict=True)))
        return RedirectedChunk(out, layout, source, count, used)


def _home_extents(volumes: Sequence[Volume]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sectors, disk, physical start) of the volumes' home data, end to end, around their RAs."""
    rows = []
    for v in volumes:
        head = min(v.ra_start, v.size_sectors)
        if head:
            rows.append((head, v.disk, v.disk_start))
        if v.size_sectors > head:
            rows.append((v.size_sectors - head, v.disk, v.disk_start + head + v.ra_sectors))
    cols = np.array(rows, np.int64).reshape(-1, 3)
    return cols[:, 0].copy(), cols[:, 1].copy(), cols[:, 2].copy()


def _padding(extra: int, pad_disk: int, pad_sectors: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sectors, disk, physical start) of `extra` logical sectors that no request uses, in parts of at most
    pad_sectors on pad_disk from sector 0 (a volume's disk, which holds at least that many)."""
    sizes = np.full(-(-extra // pad_sectors), pad_sectors, np.int64)
    if len(sizes):
        sizes[-1] = extra - pad_sectors * (len(sizes) - 1)
    return sizes, np.full(len(sizes), pad_disk, np.int64), np.zeros(len(sizes), np.int64)
